"""The width of the tensor-core paths' operand moves: how many bytes every chunk start of a
tensor slice is provably aligned to, so that the generator knows where a 16-byte move needs no
run-time test of its address.

The rule (spec: tensor bases are 16-byte aligned, the launch checks it; a runtime row length is a
multiple of 4 elements): a chunk of a slice starts at element offset sum_d start_d * stride_d +
(row within the slice) * stride_row + (a multiple of the chunk length) along the contiguous
dimension, so it is a multiple of gcd over those terms of `Divisibility.of(start_d) * stride_d`
(`divisibility.stride_divisors` for the strides). Its byte alignment, capped at 16, is what the
analysis proves; a move wider than that keeps a run-time test of its address and a narrower
fallback (element copies), and only there.

Guarantees: `slice_move` is a pure function of the IR and never raises; the result is sound for
every run of the kernel (it never claims more alignment than every launch has).
"""
from __future__ import annotations

from dataclasses import dataclass
from math import gcd

from .. import ir
from ..types import DTYPES
from .divisibility import Divisibility, stride_divisors

VECTOR_BYTES = 16     # the widest move of the tensor-core paths (cp.async, uint4 stores, TMA boxes)


@dataclass(frozen=True)
class Move:
    """The moves of one tensor operand: `proved` bytes (a power of two, at most 16) every chunk
    start is a multiple of, in every run."""
    tensor: str
    proved: int

    @property
    def checked(self) -> bool:
        """Whether a 16-byte move keeps a run-time test of its address (the proof is narrower)."""
        return self.proved < VECTOR_BYTES

    def describe(self) -> str:
        if not self.checked:
            return f"16-byte moves of {self.tensor}, proven aligned (no run-time test)"
        return (f"16-byte moves of {self.tensor} where the address is 16-byte aligned (tested at run time: "
                f"the analysis proves {self.proved} bytes), element copies elsewhere")


def slice_move(kir: ir.KernelIR, div: Divisibility, sl: ir.Slice, chunk: int) -> Move:
    """The alignment of the `chunk`-element runs of tensor slice `sl` that start on a multiple of
    `chunk` along its contiguous dimension (`Move`)."""
    t = sl.base.type
    name = sl.base.name
    if not isinstance(t, ir.TensorT) or sl.flat or len(sl.subs) != len(t.dims):
        return Move(name, 1)
    strides = stride_divisors(kir, t.dims)
    elems = chunk
    for d, (sub, stride) in enumerate(zip(sl.subs, strides)):
        start = sub.index if isinstance(sub, ir.SubIndex) else sub.start
        elems = gcd(elems, div.of(start) * stride)
        if isinstance(sub, ir.SubRange) and d < len(t.dims) - 1:
            elems = gcd(elems, stride)          # the slice's rows along this dimension
    nbytes = (elems or chunk) * DTYPES[t.dtype].itemsize
    return Move(name, gcd(nbytes, VECTOR_BYTES))
