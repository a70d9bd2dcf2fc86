"""Layouts: maps from coordinates to element offsets, and what the memory system makes of them.

A `Layout` is a triple (shape, stride, offset). It sends a coordinate x, with 0 <= x[k] < shape[k],
to the element offset

    L(x) = offset + stride[0] * x[0] + ... + stride[d-1] * x[d-1]

Coordinates are enumerated row-major (the last dimension varies fastest), the order in which the
language stores tensors and tiles. Every place data can sit is a layout:

- a tensor [D0, D1] is `row_major((D0, D1))`: stride (D1, 1);
- the slice `A[r :+ 64, c :+ 16]` is that layout restricted to a box: `slice((r, c), (64, 16))`,
  whose offset is the element offset of A[r, c];
- a scalar subscript drops a dimension: `select(0, i)` (the row i, a rank-1 layout);
- `transpose(t)` swaps the strides; a broadcast of a [R, 1] tile over [R, C] has stride 0 along
  the columns; `flat(t)` of a packed [R, C] tile is the one row [1, R * C];
- a shared-memory tile padded by p elements per row is `row_major((R, C), pad=p)`: stride (C + p, 1);
- a swizzled tile is a layout followed by a `Swizzle`, a relabelling of element offsets (an XOR of
  some offset bits into others) that keeps the set of offsets a row covers and spreads a column
  over many banks (`SwizzledLayout`).

Composition: an access that reads element `m(x)` of a layout L for coordinate x of an iteration
space, where m selects, swaps or drops (broadcasts) coordinates, is again a layout over the
iteration space (`Layout.compose_map`). Copy plans and bank-conflict counts are computed from such
layouts: `sectors_per_request` counts 32-byte global-memory sectors, `wavefronts_per_request`
counts shared-memory wavefronts (32 banks of 4 bytes).

Guarantees: layouts are immutable; `offsets()` lists L(x) for every coordinate in row-major order
as an integer numpy array of the layout's shape; every operation checks its arguments and raises
ValueError on a coordinate or box outside the layout.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Optional, Sequence, Tuple

import numpy as np

SECTOR_BYTES = 32      # a global-memory transaction unit (L2 sector), CUDA Best Practices Guide
BANKS = 32             # shared memory: 32 banks, each 4 bytes wide, per cycle
BANK_BYTES = 4
WAVEFRONT_BYTES = BANKS * BANK_BYTES   # 128 bytes served per shared-memory wavefront at best


@dataclass(frozen=True)
class Layout:
    """(shape, stride, offset): coordinate x -> offset + sum(stride[k] * x[k]), in elements."""
    shape: Tuple[int, ...]
    stride: Tuple[int, ...]
    offset: int = 0

    def __post_init__(self):
        if len(self.shape) != len(self.stride):
            raise ValueError(f"a layout needs one stride per dimension: shape {self.shape}, stride {self.stride}")
        if any(s < 0 for s in self.shape):
            raise ValueError(f"negative extent in shape {self.shape}")

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return prod(self.shape)

    def __call__(self, *coord: int) -> int:
        if len(coord) != self.rank:
            raise ValueError(f"a rank-{self.rank} layout takes {self.rank} coordinates, not {len(coord)}")
        for x, s in zip(coord, self.shape):
            if not 0 <= x < s:
                raise ValueError(f"coordinate {coord} is outside the shape {self.shape}")
        return self.offset + sum(t * x for t, x in zip(self.stride, coord))

    def offsets(self) -> np.ndarray:
        """L(x) for every coordinate, as an int64 array of this layout's shape."""
        out = np.full(self.shape, self.offset, dtype=np.int64)
        for k, (s, t) in enumerate(zip(self.shape, self.stride)):
            idx = [1] * self.rank
            idx[k] = s
            out = out + (np.arange(s, dtype=np.int64) * t).reshape(idx)
        return out

    # ---- building new layouts
    def slice(self, starts: Sequence[int], lengths: Sequence[int]) -> "Layout":
        """The box starts[k] :+ lengths[k] of every dimension (same rank)."""
        if len(starts) != self.rank or len(lengths) != self.rank:
            raise ValueError("slice needs a start and a length per dimension")
        for a, n, s in zip(starts, lengths, self.shape):
            if a < 0 or n < 0 or a + n > s:
                raise ValueError(f"the box {tuple(starts)} :+ {tuple(lengths)} is outside the shape {self.shape}")
        off = self.offset + sum(t * a for t, a in zip(self.stride, starts))
        return Layout(tuple(lengths), self.stride, off)

    def select(self, dim: int, index: int) -> "Layout":
        """Fix dimension `dim` at `index`, dropping it (a scalar subscript)."""
        if not 0 <= index < self.shape[dim]:
            raise ValueError(f"index {index} is outside dimension {dim} of extent {self.shape[dim]}")
        return Layout(self.shape[:dim] + self.shape[dim + 1:], self.stride[:dim] + self.stride[dim + 1:],
                      self.offset + self.stride[dim] * index)

    def transpose(self) -> "Layout":
        """The rank-2 layout read with its coordinates swapped: T(i, j) = L(j, i)."""
        if self.rank != 2:
            raise ValueError("transpose takes a rank-2 layout")
        return Layout(self.shape[::-1], self.stride[::-1], self.offset)

    def as_2d(self) -> "Layout":
        """Rank 1 [n] becomes the row [1, n]; rank 2 is returned unchanged."""
        if self.rank == 1:
            return Layout((1, self.shape[0]), (0, self.stride[0]), self.offset)
        if self.rank == 2:
            return self
        raise ValueError(f"a rank-{self.rank} layout is not a tile layout")

    def flat(self) -> "Layout":
        """A packed row-major [R, C] layout seen as the one row [1, R * C] of the same elements."""
        if self.rank == 1:
            return self.as_2d()
        r, c = self.shape
        if self.stride != (c, 1):
            raise ValueError("flat() needs a packed row-major layout")
        return Layout((1, r * c), (0, 1), self.offset)

    def compose_map(self, shape: Tuple[int, int], source: Tuple[Optional[int], Optional[int]]) -> "Layout":
        """The layout over an iteration space `shape` that reads this rank-2 layout at
        coordinate (x[source[0]], x[source[1]]) for iteration coordinate x; a None source means
        the coordinate is always 0 (a broadcast dimension).

        Example: a [R, 1] tile read by an [R, C] pass is source (0, None): stride (s0, 0)."""
        if self.rank != 2:
            raise ValueError("compose_map takes a rank-2 layout")
        stride = [0, 0]
        for k, src in enumerate(source):
            if src is not None:
                stride[src] += self.stride[k]
        return Layout(tuple(shape), tuple(stride), self.offset)

    def with_offset(self, offset: int) -> "Layout":
        return Layout(self.shape, self.stride, offset)


def row_major(shape: Sequence[int], offset: int = 0, pad: int = 0) -> Layout:
    """The packed (or, with pad > 0, row-padded) row-major layout of `shape`."""
    shape = tuple(int(s) for s in shape)
    stride = []
    acc = 1
    for k in range(len(shape) - 1, -1, -1):
        stride.append(acc)
        acc *= shape[k] + (pad if k == len(shape) - 1 else 0)
    return Layout(shape, tuple(reversed(stride)), offset)


@dataclass(frozen=True)
class Swizzle:
    """A relabelling of element offsets: o -> o XOR (((o >> (base + shift)) & (2**bits - 1)) << base).

    The `bits` bits of the offset starting at bit base + shift (for a row-major tile of 2**(base +
    shift) elements per row: the low bits of the row number) are XORed into the bits starting at
    `base` (the column, in units of 2**base elements). Within one row the relabelling permutes
    whole units of 2**base elements, so vector accesses of that many elements stay contiguous,
    while walking down a column the unit index changes from row to row: a column lands in many
    banks instead of one. Applying it twice gives back the offset."""
    bits: int
    base: int
    shift: int

    def __call__(self, o):
        mask = (1 << self.bits) - 1
        return o ^ (((o >> (self.base + self.shift)) & mask) << self.base)

    def c_expr(self, o: str) -> str:
        """The relabelling as C text of the element offset expression `o` (prelude: tnb_swz)."""
        return f"tnb_swz({o}, {self.base + self.shift}, {(1 << self.bits) - 1}, {self.base})"

    def describe(self) -> str:
        return (f"element offset o is stored at o ^ (((o >> {self.base + self.shift}) & {(1 << self.bits) - 1}) << "
                f"{self.base}), i.e. the {1 << self.base}-element units of a row are permuted by row bits")


@dataclass(frozen=True)
class PanelSwizzle(Swizzle):
    """The layout wgmma reads a K-major operand in from shared memory with 128-byte swizzling
    (PTX ISA, "Matrix Descriptor" / canonical layouts): a [rows, cols] tile of 2-byte elements,
    cols a multiple of 64, stored as cols / 64 panels of [rows, 64] one after another, each row
    of a panel 128 bytes, its eight 16-byte units XORed by the row's low three bits (the
    Swizzle(3, 3, 3) of a 64-column tile, panel by panel). 16-byte units stay whole. Not its
    own inverse: it maps row-major element offsets to stored ones."""
    rows: int = 0
    cols: int = 0

    def __call__(self, o):
        lc = self.cols.bit_length() - 1
        r, c = o >> lc, o & (self.cols - 1)
        return (((c >> 6) * self.rows + r) << 6) + ((c & 63) ^ ((r & 7) << 3))

    def c_expr(self, o: str) -> str:
        return f"tnb_pswz({o}, {self.cols.bit_length() - 1}, {self.rows})"

    def describe(self) -> str:
        return (f"stored as {self.cols // 64} panels of [{self.rows}, 64], each row's 16-byte units XORed by its low "
                f"three bits (the 128-byte swizzled K-major layout Hopper's tensor cores read)")


@dataclass(frozen=True)
class SwizzledLayout:
    """A layout followed by a swizzle of its element offsets (relative to the layout's origin)."""
    layout: Layout
    swizzle: Swizzle
    origin: int = 0

    @property
    def shape(self):
        return self.layout.shape

    def __call__(self, *coord: int) -> int:
        return self.origin + int(self.swizzle(self.layout(*coord) - self.origin))

    def offsets(self) -> np.ndarray:
        return self.origin + self.swizzle(self.layout.offsets() - self.origin)


def wgmma_panel_bytes(sw, cols: int) -> Optional[int]:
    """The bytes of one 64-column panel when a shared tile of `cols` 2-byte columns, laid out by
    swizzle `sw`, is in the 128-byte swizzled K-major layout wgmma reads by descriptor: a
    `PanelSwizzle` (rows x 128 bytes), or the XOR swizzle of a 64-column tile (one panel: 0);
    else None."""
    if isinstance(sw, PanelSwizzle):
        return sw.rows * 128
    if type(sw) is Swizzle and (sw.bits, sw.base, sw.shift) == (3, 3, 3) and cols == 64:
        return 0
    return None


# ---- what the memory system does with one warp request -----------------------------------------
def sectors_per_request(request: np.ndarray, start: np.ndarray, nbytes: int) -> np.ndarray:
    """Distinct 32-byte sectors touched by each request.

    `request[i]` is the request number of access i, `start[i]` its first byte address and every
    access covers `nbytes` bytes. Returns an int64 array indexed by request number (length
    max(request) + 1). A sector is the 32-byte aligned unit global memory moves (CUDA C++ Best
    Practices Guide, "Coalesced Access to Global Memory")."""
    if len(request) == 0:
        return np.zeros(0, dtype=np.int64)
    first = start // SECTOR_BYTES
    last = (start + nbytes - 1) // SECTOR_BYTES
    span = int((last - first).max()) + 1
    req, sec = [], []
    for k in range(span):
        s = first + k
        keep = s <= last
        req.append(request[keep])
        sec.append(s[keep])
    req = np.concatenate(req)
    sec = np.concatenate(sec)
    key = np.unique(np.stack([req, sec], axis=1), axis=0)
    return np.bincount(key[:, 0], minlength=int(request.max()) + 1).astype(np.int64)


def wavefronts_per_request(request: np.ndarray, lane: np.ndarray, start: np.ndarray, nbytes: int) -> np.ndarray:
    """Shared-memory wavefronts each warp request takes (the figure Nsight Compute reports).

    Shared memory has 32 banks of 4 bytes; byte address a is in bank (a // 4) % 32. A request of
    accesses of `nbytes` bytes per lane is served in phases: one phase of 32 lanes for accesses of
    up to 4 bytes, two phases of 16 lanes (lanes 0-15, 16-31) for 8-byte accesses, four phases
    of 8 lanes for 16-byte accesses. In a phase, lanes that touch the same 4-byte word share it
    (a broadcast); distinct words in one bank are served one per wavefront. A phase therefore
    takes as many wavefronts as the largest number of distinct words any bank holds among its
    accesses, and the request takes the sum over its phases."""
    if len(request) == 0:
        return np.zeros(0, dtype=np.int64)
    lanes_per_phase = 32 if nbytes <= 4 else (16 if nbytes <= 8 else 8)
    phase = lane // lanes_per_phase
    first = start // BANK_BYTES
    last = (start + nbytes - 1) // BANK_BYTES
    span = int((last - first).max()) + 1
    req, ph, word = [], [], []
    for k in range(span):
        w = first + k
        keep = w <= last
        req.append(request[keep])
        ph.append(phase[keep])
        word.append(w[keep])
    req, ph, word = np.concatenate(req), np.concatenate(ph), np.concatenate(word)
    words = np.unique(np.stack([req, ph, word], axis=1), axis=0)           # distinct words per phase
    bank = words[:, 2] % BANKS
    per_bank = np.unique(np.stack([words[:, 0], words[:, 1], bank], axis=1), axis=0, return_counts=True)
    keys, counts = per_bank
    # the largest count in each (request, phase), summed over the phases of each request
    n_req = int(request.max()) + 1
    phase_key = keys[:, 0] * 64 + keys[:, 1]
    worst = np.zeros(n_req * 64, dtype=np.int64)
    np.maximum.at(worst, phase_key, counts)
    return worst.reshape(n_req, 64).sum(axis=1)


def ideal_wavefronts(active_lanes: np.ndarray, nbytes: int) -> np.ndarray:
    """The fewest wavefronts a request of `active_lanes` accesses of `nbytes` distinct bytes can
    take: 128 bytes per wavefront, at least one."""
    return np.maximum(1, -(-(active_lanes * nbytes) // WAVEFRONT_BYTES))


def ideal_sectors(active_lanes: np.ndarray, nbytes: int) -> np.ndarray:
    """The fewest 32-byte sectors that hold `active_lanes * nbytes` bytes."""
    return -(-(active_lanes * nbytes) // SECTOR_BYTES)
