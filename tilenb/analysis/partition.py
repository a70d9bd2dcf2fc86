"""The canonical partition: which thread of a CTA handles which elements of a tile statement.

This module is the one definition of thread ownership; the barrier analysis, the copy plans, the
widgets and the CUDA code generator all follow it.

The rule. A tile statement iterates over a 2-D space [R, C] (a rank-1 shape [N] is [1, N]): the
shape of the tile, window or tensor slice it writes. It has a vector width `vec`, a power of two
that divides C (chosen per statement by `vector_width`). The R * C elements are cut, row-major,
into chunks of `vec` consecutive elements of one row:

    chunk k (0 <= k < R * C / vec) covers row  k / (C / vec),
                                       columns (k % (C / vec)) * vec ... + vec - 1

and chunk k belongs to thread k % T of the CTA's T threads, which handles it in step k / T. In
CUDA, with integer division:

    for (int k = threadIdx.x; k < R * C / vec; k += blockDim.x) {
        int row = k / (C / vec), col = (k % (C / vec)) * vec;
        // elements (row, col) ... (row, col + vec - 1): one vector access per operand
    }

The thread that owns a chunk reads the matching elements of every elementwise operand (through
that operand's layout, broadcasts and transposes included) and is the only thread that writes those
elements of the destination. Warp w is threads 32w ... 32w + 31; in step s its lanes handle chunks
s * T + 32w ... s * T + 32w + 31, which make one warp request per operand.

Guarantees: `chunks` lists every chunk exactly once; so every element of the iteration space is
handled by exactly one thread, exactly once. `owners` gives the owning thread of every element.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Tuple

import numpy as np

MAX_VECTOR_BYTES = 16   # the widest load/store a thread issues (ld.global.v4.b32, ld.shared.v4.b32)


def as_2d(shape: Tuple[int, ...]) -> Tuple[int, int]:
    """The 2-D (rows, columns) extent a tile statement iterates over: [N] -> (1, N);
    [R, C] -> (R, C); () (a scalar) -> (1, 1). ValueError for more dimensions (the checker
    allows tiles of 1 or 2). The one home of this rule; `mma_tiles.shape2` is this function."""
    if len(shape) == 0:
        return (1, 1)
    if len(shape) == 1:
        return (1, int(shape[0]))
    if len(shape) == 2:
        return (int(shape[0]), int(shape[1]))
    raise ValueError(f"a tile statement iterates over 1 or 2 dimensions, not {len(shape)}")


@dataclass(frozen=True)
class Chunks:
    """Every chunk of a partition, in chunk order k = 0, 1, ...: int64 arrays of equal length."""
    thread: np.ndarray
    step: np.ndarray
    row: np.ndarray
    col: np.ndarray
    vec: int

    def __len__(self):
        return len(self.thread)


def chunks(shape: Tuple[int, ...], vec: int, threads: int) -> Chunks:
    """The chunks of the canonical partition of `shape` at vector width `vec` over `threads`.

    Raises ValueError if vec does not divide the row length or threads is not positive."""
    r, c = as_2d(shape)
    if vec < 1 or c % vec:
        raise ValueError(f"vector width {vec} does not divide the row length {c}")
    if threads < 1:
        raise ValueError("a CTA has at least one thread")
    per_row = c // vec
    k = np.arange(r * per_row, dtype=np.int64)
    return Chunks(k % threads, k // threads, k // per_row, (k % per_row) * vec, vec)


def owners(shape: Tuple[int, ...], vec: int, threads: int) -> np.ndarray:
    """The owning thread of every element, as an int64 array of shape (R, C)."""
    r, c = as_2d(shape)
    if vec < 1 or c % vec:
        raise ValueError(f"vector width {vec} does not divide the row length {c}")
    k = (np.arange(r, dtype=np.int64)[:, None] * c + np.arange(c, dtype=np.int64)[None, :]) // vec
    return k % threads


def thread_chunks(shape: Tuple[int, ...], vec: int, threads: int, thread: int):
    """[(row, col), ...] of the chunks `thread` handles, in the order it handles them."""
    ch = chunks(shape, vec, threads)
    mine = ch.thread == thread
    return list(zip(ch.row[mine].tolist(), ch.col[mine].tolist()))


def vector_width(row_length: int, accesses: Iterable[Tuple[int, int]]) -> int:
    """The vector width of a tile statement: the largest power of two v that divides the row
    length and, for every contiguous access (elem_bytes, alignment), keeps v * elem_bytes <= 16
    and divides `alignment` (the provable divisibility, in elements, of every chunk's first
    element offset: of the access's start and of its row stride; 0 means any). An access that is
    not contiguous along the row (a column, a transpose) passes alignment 1, forcing v = 1."""
    v = MAX_VECTOR_BYTES
    for elem_bytes, align in accesses:
        v = min(v, MAX_VECTOR_BYTES // max(1, elem_bytes))
        if align:
            v = min(v, align & -align)   # the largest power of two dividing `align`
    v = max(1, v)
    while row_length % v:
        v //= 2
    return v
