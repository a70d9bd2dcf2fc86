"""Tensor maps for the bulk tensor copies (TMA) of kernels whose GEMM loops run on wgmma.

Guarantees: `extra_args(ks, tensors)` returns the arguments a generated kernel takes after its
runtime dims (`KernelSource.tmaps`, see `tilenb.codegen.sm90.gemm`): one 128-byte CUtensorMap
per spec, passed by value, then the int flag `tnb_tma` (1: every map was built; 0: at least one
tensor cannot be described by a tensor map, and the kernel takes its bounds-checked copy path,
equally exact), then one such flag for each other `TmaSpec.flag` of the specs (`tnb_tma_st`, the
bulk tensor stores of TILENB_GEMM_TMA_STORE: 0 sends those stores through the threads). It never raises for a tensor a map cannot describe. The maps are encoded with
the CUDA driver's `cuTensorMapEncodeTiled` (CUDA 12+ driver API) and cached by everything
that determines them (pointer, extents, dtype, box, swizzle).

Limits a tensor map has (CUDA driver API documentation of cuTensorMapEncodeTiled): the global
address 16-byte aligned; every stride but the innermost a multiple of 16 bytes and below 2**40;
extents from 1 to 2**32; box extents at most 256; rank 1 to 5.
"""
from __future__ import annotations

import ctypes
import functools
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from ... import caches

_DATA_TYPE = {"u8": 0, "u16": 1, "u32": 2, "i32": 3, "u64": 4, "i64": 5, "f16": 6, "f32": 7, "f64": 8, "bf16": 9}
_ITEMSIZE = {"u8": 1, "u16": 2, "u32": 4, "i32": 4, "u64": 8, "i64": 8, "f16": 2, "f32": 4, "f64": 8, "bf16": 2}
_SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}
_MAP_BYTES = 128
_MAP_DTYPE = np.dtype((np.void, _MAP_BYTES))
_ZERO = np.zeros(1, dtype=_MAP_DTYPE)


@functools.lru_cache(maxsize=1)
def _encoder():
    """The driver's cuTensorMapEncodeTiled, or None where there is no CUDA 12+ driver."""
    for name in ("libcuda.so.1", "libcuda.so"):
        try:
            lib = ctypes.CDLL(name)
            fn = lib.cuTensorMapEncodeTiled
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                       ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
                       ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32),
                       ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        return fn
    return None


def describable(ptr: int, shape: Sequence[int], dtype: str, box: Sequence[int]) -> bool:
    """Whether a tensor map can describe this row-major tensor (module docstring's limits)."""
    if dtype not in _DATA_TYPE or ptr % 16 or not 1 <= len(shape) <= 5 or len(box) != len(shape):
        return False
    if any(int(s) < 1 or int(s) > 2 ** 32 for s in shape) or any(b < 1 or b > 256 for b in box):
        return False
    stride = _ITEMSIZE[dtype]
    for s in reversed(shape[1:]):
        stride *= int(s)
        if stride % 16 or stride >= 2 ** 40:
            return False
    return True


@functools.lru_cache(maxsize=256)
def encode(ptr: int, shape: Tuple[int, ...], dtype: str, box: Tuple[int, ...], swizzle: int) -> Optional[bytes]:
    """The 128 bytes of a CUtensorMap for a row-major tensor at `ptr` with extents `shape`
    (outermost first) and copies of `box` elements (innermost first) landing in shared memory
    with the given swizzle span (bytes); None when no map can describe it. Out-of-bounds
    elements of a box read as zero."""
    if not describable(ptr, shape, dtype, tuple(reversed(box))):
        return None
    fn = _encoder()
    if fn is None:
        return None
    rank = len(shape)
    dims = (ctypes.c_uint64 * rank)(*[int(s) for s in reversed(shape)])
    strides = (ctypes.c_uint64 * max(1, rank - 1))()
    st = _ITEMSIZE[dtype]
    inner_first = [int(s) for s in reversed(shape)]
    for i in range(rank - 1):
        st *= inner_first[i]
        strides[i] = st
    boxes = (ctypes.c_uint32 * rank)(*box)
    elem = (ctypes.c_uint32 * rank)(*([1] * rank))
    out = ctypes.create_string_buffer(_MAP_BYTES + 64)
    addr = (ctypes.addressof(out) + 63) & ~63          # CUtensorMap is 64-byte aligned
    rc = fn(ctypes.c_void_p(addr), _DATA_TYPE[dtype], rank, ctypes.c_void_p(ptr), dims, strides, boxes, elem,
            0, _SWIZZLE[swizzle], 2, 0)               # no interleave; L2 promotion 128 B; zero fill
    if rc != 0:
        return None
    return ctypes.string_at(addr, _MAP_BYTES)


# a tensor map is a pure function of its arguments; forgotten with the rest (a cold first launch encodes)
caches.register(__name__, encode.cache_clear)


def extra_args(ks, tensors: Dict[str, Tuple[int, Tuple[int, ...]]]) -> tuple:
    """The arguments after the dims for KernelSource `ks`: its tensor maps, then `tnb_tma`.
    tensors: parameter name -> (device pointer, extents) as the kernel receives them."""
    specs = getattr(ks, "tmaps", ())
    if not specs:
        return ()
    out, ok = [], {"tnb_tma": True}
    for t in specs:
        ptr, shape = tensors[t.tensor]
        blob = encode(int(ptr), tuple(int(s) for s in shape), t.dtype, tuple(t.box), t.swizzle)
        flag = getattr(t, "flag", "tnb_tma")
        ok.setdefault(flag, True)
        if blob is None:
            ok[flag] = False
            out.append(_ZERO)
        else:
            out.append(np.frombuffer(blob, dtype=_MAP_DTYPE))   # a one-element array: passed by value
    out += [np.int32(1 if v else 0) for v in ok.values()]      # tnb_tma, then the others (gemm.tma_flags)
    return tuple(out)
