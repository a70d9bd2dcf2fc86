"""Values and arithmetic of the CPU reference executor (the language's numeric semantics).

Guarantees, for every operation the typed IR can express:

* A scalar value is a numpy array (or numpy scalar) of shape `()` (the same everywhere),
  `(B, 1)` (one per CTA of the batch), `(1, N)` or `(B, N)` (one per thread); B is the number
  of CTAs executed together, N the threads per CTA. Broadcasting combines them.
* A tile value is a `TileVal`: `data` of shape `(B or 1, *tile_shape)` and its valid region, a
  rectangle `[lo, hi)` per tile dimension, one per CTA (`None`: wholly valid).
* Types: every value is held in the numpy dtype of its IR type (`tilenb.types.DTYPES`). f16 and
  bf16 operands are widened to f32 by the operation that reads them (the checker types those
  results f32); i8 widens (sign-extends) to i32, u8/u16/u32 zero-extend when converted.
  Integer arithmetic wraps in its own width (i32 in int32, index in int64). Integer `/` and
  `%` truncate toward zero as in C (a zero divisor gives 0). Float `%` is C's fmod.
  `min`/`max` on floats follow C's fminf/fmaxf (a NaN operand yields the other operand).
  Conversions: float -> int truncates toward zero and saturates, NaN -> 0; int -> narrower int
  wraps; to a float type rounds to nearest even. `round` is half-to-even.
* Valid regions: elementwise results take the intersection of their operands' regions after
  broadcasting, dimension by dimension (an extent-1 dimension broadcast along a larger one is
  valid along all of it if its one element is valid, else empty along it; the other dimensions
  keep their ranges, spec 8 rule 2); reductions skip invalid elements (sum of nothing 0, max of nothing
  -inf or the integer minimum, min of nothing +inf or the integer maximum) and keep the input's
  rows (row*) or columns (col*); dot/dot_t read invalid elements as 0 and are valid over a's
  rows by b's columns (dot_t: b's rows); transpose transposes the region.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from ...types import DTYPES

Region = Optional[Tuple[np.ndarray, np.ndarray]]   # (lo, hi), each (B or 1, rank) int64


def npdt(name: str) -> np.dtype:
    """The numpy dtype that holds values of IR type `name`."""
    return DTYPES[name].numpy


def is_float(name: str) -> bool:
    return DTYPES[name].is_float


# ---- literals and conversions -------------------------------------------------------------
def const_value(value, name: str):
    """A literal as a numpy scalar of IR type `name` (integers wrap, floats round to the type)."""
    dt = npdt(name)
    if name == "bool":
        return np.bool_(bool(value))
    if DTYPES[name].is_float:
        return np.asarray(float(value), np.float64).astype(dt)[()]
    if isinstance(value, float):
        return convert(np.asarray(value, np.float64), "f64", name)[()]
    return np.asarray(int(value) & ((1 << 64) - 1), np.uint64).astype(dt)[()]


def convert(x, src: str, dst: str):
    """Convert array `x` of IR type `src` to IR type `dst` with the language's rules."""
    d = DTYPES[dst]
    x = np.asarray(x)
    if src == dst and x.dtype == d.numpy:
        return x
    if d.is_float or dst == "bool":
        if x.dtype == DTYPES["bf16"].numpy and dst != "f32":
            x = x.astype(np.float32)
        return x.astype(d.numpy)
    if DTYPES[src].is_float:
        # truncate toward zero, saturate to the target range, NaN -> 0
        info = np.iinfo(d.numpy)
        t = np.trunc(x.astype(np.float64))
        big = t >= float(info.max)
        small = t <= float(info.min)
        mid = np.where(big | small | np.isnan(t), 0.0, t).astype(d.numpy)
        return np.where(big, d.numpy.type(info.max), np.where(small, d.numpy.type(info.min), mid))
    # integer -> integer: two's complement wraparound (numpy's astype)
    return x.astype(d.numpy)


def store_cast(x, src: str, dst: str):
    """The value `x` (IR type `src`) as held by storage of IR type `dst` (rounding on store)."""
    if x.dtype == npdt(dst):
        return x
    return convert(x, src, dst)


def as_compute(x, name: str):
    """`x` widened to the dtype arithmetic of IR type `name` is done in."""
    want = npdt(name)
    x = np.asarray(x) if not isinstance(x, np.generic) else x
    if x.dtype == want:
        return x
    if x.dtype == DTYPES["bf16"].numpy and want != np.float32:
        x = x.astype(np.float32)
    return x.astype(want)


# ---- scalar arithmetic (also used elementwise on tile data) -------------------------------
def _trunc_div(a, b):
    q = np.floor_divide(a, b)
    r = a - q * b
    # floor and truncation differ when there is a remainder and the signs differ
    q = q + ((r != 0) & ((a < 0) != (b < 0))).astype(q.dtype)
    return np.where(b == 0, np.zeros((), q.dtype), q)


def arith(op: str, a, b, name: str):
    """a op b, both already of IR type `name` (the result type)."""
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        if DTYPES[name].is_float:
            return a / b
        return _trunc_div(a, b)
    if op == "%":
        if DTYPES[name].is_float:
            return np.fmod(a, b)
        q = _trunc_div(a, b)
        return np.where(b == 0, np.zeros((), q.dtype), a - q * b)
    if op == "&":
        return a & b
    if op == "|":
        return a | b
    if op == "^":
        return a ^ b
    if op == "<<":
        return np.left_shift(a, b)
    if op == ">>":
        return np.right_shift(a, b)
    raise KeyError(op)


def compare(op: str, a, b):
    if op == "==":
        return a == b
    if op == "!=":
        return a != b
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    if op == ">":
        return a > b
    if op == ">=":
        return a >= b
    raise KeyError(op)


_ERF = []


def _erf(x):
    """erf in float64: scipy's when it is installed (fast), else math.erf per element."""
    if not _ERF:
        try:
            from scipy.special import erf  # noqa: PLC0415 (optional dependency)
        except ImportError:
            erf = np.frompyfunc(math.erf, 1, 1)
        _ERF.append(erf)
    return np.asarray(_ERF[0](np.asarray(x, np.float64)), np.float64)


def math1(fn: str, x, name: str):
    """Elementwise built-in of one argument, computed in IR type `name` (x already of it)."""
    if fn == "exp":
        return np.exp(x)
    if fn == "exp2":
        return np.exp2(x)
    if fn == "log":
        return np.log(x)
    if fn == "log2":
        return np.log2(x)
    if fn == "sqrt":
        return np.sqrt(x)
    if fn == "rsqrt":
        return np.ones((), x.dtype) / np.sqrt(x)
    if fn == "abs":
        return np.abs(x)
    if fn == "floor":
        return np.floor(x)
    if fn == "ceil":
        return np.ceil(x)
    if fn == "round":
        return np.rint(x)
    if fn == "tanh":
        return np.tanh(x)
    if fn == "sin":
        return np.sin(x)
    if fn == "cos":
        return np.cos(x)
    if fn == "erf":
        return np.asarray(_erf(np.asarray(x))).astype(x.dtype)
    raise KeyError(fn)


def math2(fn: str, a, b, name: str):
    if fn == "min":
        return np.fmin(a, b) if is_float(name) else np.minimum(a, b)
    if fn == "max":
        return np.fmax(a, b) if is_float(name) else np.maximum(a, b)
    if fn == "cdiv":
        return -np.floor_divide(-a, b)
    raise KeyError(fn)


# ---- tile values and valid regions --------------------------------------------------------
@dataclass
class TileVal:
    """A tile-valued intermediate: `data` (B or 1, *shape) and its valid region (None: all)."""
    data: np.ndarray
    region: Region = None

    @property
    def shape(self):
        return self.data.shape[1:]


def full_region(batch: int, shape) -> Tuple[np.ndarray, np.ndarray]:
    lo = np.zeros((batch, len(shape)), np.int64)
    hi = np.broadcast_to(np.asarray(shape, np.int64), (batch, len(shape))).copy()
    return lo, hi


def broadcast_region(region: Region, shape, out_shape) -> Region:
    """The region of a value of `shape` seen broadcast to `out_shape` (right-aligned), dimension
    by dimension (spec 8 rule 4): a dimension of equal extent keeps its range; an extent-1
    dimension broadcast along a longer one is valid along all of it when its one element is
    valid and empty along it when not; a dimension the value lacks is valid all along. An empty
    range in one dimension leaves the others' ranges as they are (spec 8 rule 2)."""
    if region is None:
        return None
    lo, hi = region
    shape = tuple(shape)
    out_shape = tuple(out_shape)
    if shape == out_shape:
        return region
    extra = len(out_shape) - len(shape)
    nb = lo.shape[0]
    nlo = np.zeros((nb, len(out_shape)), np.int64)
    nhi = np.broadcast_to(np.asarray(out_shape, np.int64), (nb, len(out_shape))).copy()
    for d, ext in enumerate(shape):
        od = extra + d
        if ext == out_shape[od]:
            nlo[:, od] = lo[:, d]
            nhi[:, od] = hi[:, d]
        else:  # extent 1 broadcast: valid all along iff its element is valid, else empty along it
            ok = (lo[:, d] <= 0) & (hi[:, d] > 0)
            nhi[:, od] = np.where(ok, nhi[:, od], 0)
    return nlo, nhi


def intersect(a: Region, b: Region) -> Region:
    if a is None:
        return b
    if b is None:
        return a
    return np.maximum(a[0], b[0]), np.minimum(a[1], b[1])


def region_is_full(region: Region, shape) -> bool:
    if region is None:
        return True
    lo, hi = region
    return bool(np.all(lo <= 0) and np.all(hi >= np.asarray(shape, np.int64)))


def region_mask(region: Region, shape) -> Optional[np.ndarray]:
    """Boolean mask (B or 1, *shape) of the valid elements, or None when wholly valid."""
    if region_is_full(region, shape):
        return None
    lo, hi = region
    nb = lo.shape[0]
    mask = None
    rank = len(shape)
    for d, ext in enumerate(shape):
        ar = np.arange(ext, dtype=np.int64)
        shp = [nb] + [1] * rank
        shp[1 + d] = ext
        m = ((ar[None, :] >= lo[:, d:d + 1]) & (ar[None, :] < hi[:, d:d + 1])).reshape(shp)
        mask = m if mask is None else mask & m
    return mask


def combine_regions(vals, out_shape) -> Region:
    """Intersection of the regions of several operands (tiles or scalars) broadcast to out_shape."""
    out = None
    for v in vals:
        if isinstance(v, TileVal) and v.region is not None:
            out = intersect(out, broadcast_region(v.region, v.shape, out_shape))
    return out


def tile_data(v, rank: int):
    """Operand data aligned for broadcasting against tiles of `rank` dims (leading batch axis)."""
    if isinstance(v, TileVal):
        d = v.data
        extra = rank - (d.ndim - 1)
        if extra:
            d = d.reshape((d.shape[0],) + (1,) * extra + d.shape[1:])
        return d
    # a scalar: () stays, (B, 1) becomes (B, 1, ..., 1); per-thread values cannot meet tiles
    v = np.asarray(v) if not isinstance(v, np.generic) else v
    if v.ndim == 0:
        return v
    return v[:, :1].reshape((v.shape[0],) + (1,) * rank)


def reduce_tile(op: str, axis: int, x: TileVal, res: str) -> TileVal:
    """row*/col* reductions; `res` is the result's IR type."""
    data = as_compute(x.data, res)
    shape = x.shape
    mask = region_mask(x.region, shape)
    if mask is not None:
        if op == "sum":
            ident = 0
        elif is_float(res):
            ident = -np.inf if op == "max" else np.inf
        else:
            info = np.iinfo(npdt(res))
            ident = info.min if op == "max" else info.max
        data = np.where(mask, data, np.asarray(ident).astype(data.dtype))
    ax = 1 + (axis if len(shape) == 2 else 0)
    if op == "sum":
        out = np.sum(data, axis=ax, keepdims=True, dtype=data.dtype)
    elif is_float(res):
        out = (np.fmax if op == "max" else np.fmin).reduce(data, axis=ax, keepdims=True)
    else:
        out = (np.max if op == "max" else np.min)(data, axis=ax, keepdims=True)
    region = None
    if x.region is not None and len(shape) == 2:
        # the kept dimension keeps the input's range; the reduced one (extent 1) is valid
        nlo, nhi = x.region[0].copy(), x.region[1].copy()
        nlo[:, axis], nhi[:, axis] = 0, 1
        region = (nlo, nhi)
    return TileVal(out, region)


def zero_invalid(x: TileVal):
    mask = region_mask(x.region, x.shape)
    if mask is None:
        return x.data
    return np.where(mask, x.data, np.zeros((), x.data.dtype))


def dot_tiles(a: TileVal, b: TileVal, trans_b: bool, res: str) -> TileVal:
    """dot(a, b) / dot_t(a, b): invalid elements read as 0; accumulates in IR type `res`."""
    ad = as_compute(zero_invalid(a), res)
    bd = as_compute(zero_invalid(b), res)
    if trans_b:
        bd = np.swapaxes(bd, 1, 2)
    out = np.matmul(ad, bd)
    region = None
    if a.region is not None or b.region is not None:
        ar = a.region if a.region is not None else full_region(1, a.shape)
        br = b.region if b.region is not None else full_region(1, b.shape)
        # one region row per CTA when either operand's region has them (its data may be shared)
        nb = max(ar[0].shape[0], br[0].shape[0])
        bcol = 0 if trans_b else 1
        lo = np.zeros((nb, 2), np.int64)
        hi = np.zeros((nb, 2), np.int64)
        lo[:, 0], hi[:, 0] = ar[0][:, 0], ar[1][:, 0]
        lo[:, 1], hi[:, 1] = br[0][:, bcol], br[1][:, bcol]
        region = (lo, hi)
    return TileVal(out, region)


def transpose_tile(x: TileVal) -> TileVal:
    region = None
    if x.region is not None:
        region = (x.region[0][:, ::-1].copy(), x.region[1][:, ::-1].copy())
    return TileVal(np.swapaxes(x.data, 1, 2), region)
