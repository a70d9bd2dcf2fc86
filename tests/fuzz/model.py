"""The fuzzer's own model of the language's values, written from docs/spec.md (sections 4, 8, 10
and 17) and independent of the CPU executor: the numpy oracle of every generated program.

Guarantees:
- `TV` is one CTA's tile (or uniform scalar) value: `data` in the numpy dtype of its IR type,
  its valid region (a half-open `[lo, hi)` per dimension, spec 8 rule 2) and `err`, a float64
  bound (broadcastable to `data`) on how far a correct backend's value may lie from `data`:
  the spec's per-operation tolerance (section 17) propagated to first order through every
  operation, so a composite expression gets the allowance its operations add up to.
- Every operation here follows the spec's rules: arithmetic in the operands' arithmetic type
  (f16/bf16 compute in f32, i8 in i32), integer wraparound and C-like `/` and `%`, valid
  regions intersected after broadcasting, reductions that skip invalid elements, dots that read
  them as 0, windows that see the tile's region, stores that write valid elements only.
- `close(ref, got, dtype, err)` is the comparison the fuzzer uses everywhere: integers and bool
  exactly, floats within `2 * err` plus the spec's elementwise tolerance of the type; NaN only
  equals NaN.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import ml_dtypes
import numpy as np

NP = {"f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16), "f32": np.dtype(np.float32),
      "f64": np.dtype(np.float64), "i8": np.dtype(np.int8), "i32": np.dtype(np.int32), "i64": np.dtype(np.int64),
      "u8": np.dtype(np.uint8), "u16": np.dtype(np.uint16), "u32": np.dtype(np.uint32), "bool": np.dtype(np.bool_)}
FLOATS = ("f16", "bf16", "f32", "f64")
INTS = ("i8", "i32", "i64")
UNSIGNED = ("u8", "u16", "u32")
ARITH = {"f16": "f32", "bf16": "f32", "f32": "f32", "f64": "f64", "i8": "i32", "i32": "i32", "i64": "i64",
         "bool": "bool"}
# spec 17: the elementwise tolerance (rtol = atol) of each float type, and the unit of an
# accumulation in the accumulator's type
EPS = {"f16": 2.0 ** -10, "bf16": 2.0 ** -7, "f32": 1e-5, "f64": 1e-12}
ACC_UNIT = {"f32": 2.0 ** -23, "f64": 2.0 ** -52}


def is_float(t: str) -> bool:
    return t in FLOATS


def is_int(t: str) -> bool:
    return t in INTS or t in UNSIGNED


def promote(a: str, b: str) -> str:
    """The promoted arithmetic type of two operands (spec 4.2)."""
    a, b = ARITH.get(a, a), ARITH.get(b, b)
    if a == "bool" or b == "bool":
        assert a == b == "bool", (a, b)
        return "bool"
    if is_float(a) != is_float(b):
        raise AssertionError(f"no arithmetic between {a} and {b}")
    if is_float(a):
        return "f64" if "f64" in (a, b) else "f32"
    return "i64" if "i64" in (a, b) else "i32"


def convert(x: np.ndarray, src: str, dst: str) -> np.ndarray:
    """Spec 4.4: float->float rounds to nearest even, float->int truncates and saturates (NaN 0),
    int->int keeps the low bits, int->float rounds."""
    x = np.asarray(x)
    want = NP[dst]
    with np.errstate(all="ignore"):
        if is_float(dst):
            if src == "bf16":
                x = x.astype(np.float32)
            return x.astype(np.float64).astype(want) if src == "f64" or dst == "f64" else x.astype(np.float32).astype(want)
        if is_float(src):
            info = np.iinfo(want)
            t = np.trunc(x.astype(np.float64))
            t = np.where(np.isnan(t), 0.0, t)
            t = np.clip(t, float(info.min), float(info.max))
            return t.astype(np.int64).astype(want) if dst != "u32" else t.astype(np.uint64).astype(want)
        # integer -> integer: two's complement wraparound
        return x.astype(np.int64).astype(want) if src not in ("u32",) else x.astype(np.uint64).astype(want)


@dataclass
class TV:
    """One CTA's value: a tile (rank 1 or 2) or a uniform scalar (rank 0)."""
    data: np.ndarray
    ty: str
    lo: Tuple[int, ...]
    hi: Tuple[int, ...]
    err: np.ndarray

    @property
    def shape(self):
        return self.data.shape

    def mask(self) -> np.ndarray:
        m = np.ones(self.shape, bool)
        for d, n in enumerate(self.shape):
            idx = np.arange(n)
            sh = [1] * len(self.shape)
            sh[d] = n
            m &= ((idx >= self.lo[d]) & (idx < self.hi[d])).reshape(sh)
        return m


def scalar(value, ty: str, err: float = 0.0) -> TV:
    return TV(np.asarray(value).astype(NP[ty]) if ty != "bool" else np.asarray(bool(value)), ty, (), (), np.asarray(err))


def full(shape, value, ty: str) -> TV:
    """A filled tile: wholly valid (spec 8 rule 3)."""
    return TV(np.full(shape, value).astype(NP[ty]), ty, (0,) * len(shape), tuple(shape), np.zeros(()))


def _clamp(v, lo, hi):
    return max(lo, min(hi, v))


def bcast_region(v: TV, out_shape) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
    """v's region seen broadcast to out_shape (right-aligned): an extent-1 dimension broadcast
    along a longer one is valid along all of it when its one element is valid, and empty along
    it when not; the other dimensions keep their ranges (spec 8 rules 2 and 4)."""
    extra = len(out_shape) - len(v.shape)
    lo = [0] * len(out_shape)
    hi = list(out_shape)
    for d, n in enumerate(v.shape):
        od = extra + d
        if n == out_shape[od]:
            lo[od], hi[od] = v.lo[d], v.hi[d]
        elif not (v.lo[d] <= 0 < v.hi[d]):
            hi[od] = 0
    return tuple(lo), tuple(hi)


def out_shape(*vals: TV):
    return np.broadcast_shapes(*[v.shape for v in vals])


def region_of(vals: Sequence[TV], shape):
    lo = [0] * len(shape)
    hi = list(shape)
    for v in vals:
        if not v.shape and not len(shape):
            continue
        vlo, vhi = bcast_region(v, shape)
        lo = [max(a, b) for a, b in zip(lo, vlo)]
        hi = [min(a, b) for a, b in zip(hi, vhi)]
    return tuple(lo), tuple(hi)


def compute(v: TV, ty: Optional[str] = None) -> np.ndarray:
    """v's data in the arithmetic type `ty` (default: its own arithmetic type)."""
    ty = ty or ARITH[v.ty]
    if v.ty == ty:
        return v.data
    return convert(v.data, v.ty, ty)


def op_err(value: np.ndarray, ty: str) -> np.ndarray:
    """The allowance one operation rounding to `ty` adds (spec 17 elementwise)."""
    if not is_float(ty):
        return np.zeros(())
    e = EPS[ty]
    return e * (1.0 + np.abs(np.asarray(value, np.float64)))


def _f64(x):
    with np.errstate(all="ignore"):
        return np.asarray(x).astype(np.float64) if np.asarray(x).dtype != NP["bf16"] else np.asarray(x).astype(np.float32).astype(np.float64)


def binop(op: str, a: TV, b: TV) -> TV:
    """a op b for + - * / % & | ^ << >> min max, and the comparisons (-> bool)."""
    cmp = op in ("==", "!=", "<", "<=", ">", ">=")
    logic = op in ("&&", "||")
    ty = promote(a.ty, b.ty)
    x, y = compute(a, ty), compute(b, ty)
    shape = out_shape(a, b)
    lo, hi = region_of([a, b], shape)
    with np.errstate(all="ignore"):
        if cmp:
            r = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater,
                 ">=": np.greater_equal}[op](x, y)
            return TV(np.asarray(r), "bool", lo, hi, np.zeros(()))
        if logic:
            r = (x & y) if op == "&&" else (x | y)
            return TV(np.asarray(r), "bool", lo, hi, np.zeros(()))
        if op == "+":
            r = x + y
        elif op == "-":
            r = x - y
        elif op == "*":
            r = x * y
        elif op == "/":
            r = x / y if is_float(ty) else _trunc_div(x, y)
        elif op == "%":
            r = np.fmod(x, y) if is_float(ty) else _trunc_mod(x, y)
        elif op in ("&", "|", "^"):
            r = {"&": np.bitwise_and, "|": np.bitwise_or, "^": np.bitwise_xor}[op](x, y)
        elif op == "<<":
            r = np.left_shift(x, y)
        elif op == ">>":
            r = np.right_shift(x, y)
        elif op == "min":
            r = np.fmin(x, y) if is_float(ty) else np.minimum(x, y)
        elif op == "max":
            r = np.fmax(x, y) if is_float(ty) else np.maximum(x, y)
        else:
            raise AssertionError(op)
        r = np.asarray(r).astype(NP[ty])
        if not is_float(ty):
            return TV(r, ty, lo, hi, np.zeros(()))
        ea, eb = a.err, b.err
        fx, fy = _f64(x), _f64(y)
        if op in ("+", "-"):
            e = ea + eb
        elif op == "*":
            e = np.abs(fx) * eb + np.abs(fy) * ea + ea * eb
        elif op == "/":
            e = (ea + np.abs(fx / fy) * eb) / np.maximum(np.abs(fy) - eb, 1e-30)
        elif op in ("min", "max"):
            e = np.maximum(ea, eb) + 0 * fx
        else:  # % on exact operands only (the generator keeps it so)
            e = ea + eb
        return TV(r, ty, lo, hi, e + op_err(r, ty))


def _trunc_div(a, b):
    """C's integer division (toward zero) in a's type, wrapping; a zero divisor gives 0."""
    a, b = np.asarray(a), np.asarray(b).astype(np.asarray(a).dtype)
    with np.errstate(all="ignore"):
        safe = np.where(b == 0, np.ones((), b.dtype), b)
        q = np.floor_divide(a, safe)
        r = a - q * safe
        q = q + ((r != 0) & ((a < 0) != (safe < 0))).astype(q.dtype)
    return np.where(b == 0, np.zeros((), q.dtype), q).astype(a.dtype)


def _trunc_mod(a, b):
    a, b = np.asarray(a), np.asarray(b).astype(np.asarray(a).dtype)
    with np.errstate(all="ignore"):
        q = _trunc_div(a, b)
        return np.where(b == 0, np.zeros((), a.dtype), a - q * b).astype(a.dtype)


# unary functions: value and the Lipschitz factor the generator's operands allow
_LIP = {"sin": 1.0, "cos": 1.0, "abs": 1.0, "neg": 1.0}


def unop(fn: str, a: TV) -> TV:
    """neg, ~, !, and the math functions of spec 10 (`a` float for the math functions)."""
    if fn == "!":
        return TV(~a.data, "bool", a.lo, a.hi, np.zeros(()))
    ty = ARITH[a.ty]
    x = compute(a, ty)
    with np.errstate(all="ignore"):
        if fn == "neg":
            r = -x
        elif fn == "~":
            r = ~x
        elif fn == "abs":
            r = np.abs(x)
        elif fn == "exp":
            r = np.exp(x)
        elif fn == "exp2":
            r = np.exp2(x)
        elif fn == "log":
            r = np.log(x)
        elif fn == "log2":
            r = np.log2(x)
        elif fn == "sqrt":
            r = np.sqrt(x)
        elif fn == "rsqrt":
            r = (1.0 / np.sqrt(x.astype(np.float64))).astype(x.dtype) if ty == "f64" else np.float32(1.0) / np.sqrt(x)
        elif fn in ("floor", "ceil"):
            r = getattr(np, fn)(x)
        elif fn == "round":
            r = np.round(x)
        elif fn in ("tanh", "sin", "cos"):
            r = getattr(np, fn)(x)
        elif fn == "erf":
            r = np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64))
        else:
            raise AssertionError(fn)
        r = np.asarray(r).astype(NP[ty])
    if not is_float(ty):
        return TV(r, ty, a.lo, a.hi, np.zeros(()))
    fx, fr = _f64(x), _f64(r)
    ea = a.err
    if fn in _LIP:
        e = _LIP[fn] * ea
    elif fn == "tanh":       # tanh' = 1 - tanh^2, over the interval the error allows
        e = ea * np.minimum(1.0, 1.0 - np.tanh(np.maximum(np.abs(fx) - ea, 0.0)) ** 2)
    elif fn == "erf":        # erf' = 2 / sqrt(pi) exp(-x^2)
        e = ea * 1.1284 * np.exp(-np.maximum(np.abs(fx) - ea, 0.0) ** 2)
    elif fn in ("exp", "exp2"):
        k = 1.0 if fn == "exp" else math.log(2.0)
        # the GPU's exp on the special-function unit: relative |x| 2^-24 + 2^-22 (prelude)
        e = np.abs(fr) * (k * ea * np.exp(np.minimum(k * ea, 50.0)) + np.abs(fx) * 7.3e-8 + 2.0 ** -22)
    elif fn in ("log", "log2"):
        e = ea / np.maximum(np.abs(fx) - ea, 1e-30) / (1.0 if fn == "log" else math.log(2.0))
    elif fn == "sqrt":
        e = ea / np.maximum(2.0 * np.sqrt(np.maximum(np.abs(fx) - ea, 0.0)), 1e-30)
    elif fn == "rsqrt":
        base = np.maximum(np.abs(fx) - ea, 1e-30)
        e = ea * 0.5 * base ** -1.5
    else:  # floor, ceil, round: only on exact operands
        e = ea
    return TV(r, ty, a.lo, a.hi, e + op_err(r, ty))


def conv(a: TV, dst: str) -> TV:
    """dst(a) (spec 4.4)."""
    r = convert(a.data, a.ty, dst)
    e = a.err + 0 * _f64(r) if is_float(dst) else np.zeros(())
    if is_float(dst) and is_float(a.ty) and np.dtype(NP[dst]).itemsize < np.dtype(NP[a.ty]).itemsize:
        e = e + 2 * EPS.get(dst, 0) * np.abs(_f64(r))
    return TV(r, dst, a.lo, a.hi, e)


def where(c: TV, a: TV, b: TV) -> TV:
    ty = promote(a.ty, b.ty)
    shape = out_shape(c, a, b)
    lo, hi = region_of([c, a, b], shape)
    r = np.where(c.data, compute(a, ty), compute(b, ty)).astype(NP[ty])
    e = np.where(c.data, np.broadcast_to(a.err, shape) if a.err.ndim else a.err,
                 np.broadcast_to(b.err, shape) if b.err.ndim else b.err) if is_float(ty) else np.zeros(())
    return TV(r, ty, lo, hi, np.asarray(e))


def reduce(op: str, axis: int, a: TV) -> TV:
    """row* (axis 1) / col* (axis 0) of a 2-D tile, or row* of a 1-D tile; skips invalid elements
    (empty: 0, -inf/+inf, or the integer minimum/maximum); keeps the input's rows (columns)."""
    if op == "sum" or is_float(a.ty):
        ty = ARITH[a.ty]
    else:
        ty = a.ty          # rowmax/rowmin of integers: their own type
    x = compute(a, ty)
    m = a.mask()
    if op == "sum":
        ident = 0
    elif is_float(ty):
        ident = -np.inf if op == "max" else np.inf
    else:
        info = np.iinfo(NP[ty])
        ident = info.min if op == "max" else info.max
    x = np.where(m, x, np.asarray(ident).astype(x.dtype))
    ax = axis if a.data.ndim == 2 else 0
    with np.errstate(all="ignore"):
        if op == "sum":
            r = np.sum(x, axis=ax, keepdims=True, dtype=x.dtype)
        elif op == "max":
            r = np.max(x, axis=ax, keepdims=True)
        else:
            r = np.min(x, axis=ax, keepdims=True)
    r = np.asarray(r).astype(NP[ty])
    if a.data.ndim == 2:
        lo, hi = list(a.lo), list(a.hi)
        lo[ax], hi[ax] = 0, 1
        lo, hi = tuple(lo), tuple(hi)
    else:
        lo, hi = (0,), (1,)
    if not is_float(ty):
        return TV(r, ty, lo, hi, np.zeros(()))
    ea = np.where(m, np.broadcast_to(a.err, a.shape), 0.0)
    if op == "sum":
        terms = np.where(m, np.abs(_f64(x)), 0.0)
        k = a.shape[ax]
        e = np.sum(ea, axis=ax, keepdims=True) + k * ACC_UNIT[ty] * np.sum(terms, axis=ax, keepdims=True)
        e = e + op_err(r, ty)
    else:
        e = np.max(ea, axis=ax, keepdims=True) if ea.size else np.zeros(r.shape)
    return TV(r, ty, lo, hi, e)


def dot(a: TV, b: TV, trans_b: bool) -> TV:
    """dot(a, b) / dot_t(a, b): invalid elements read as 0; valid over a's rows by b's columns
    (dot_t: b's rows); f16/bf16/f32 accumulate in f32, f64 in f64, i8 in i32."""
    ty = {"f16": "f32", "bf16": "f32", "f32": "f32", "f64": "f64", "i8": "i32"}[a.ty]
    am, bm = a.mask(), b.mask()
    x = np.where(am, compute(a, ty), 0).astype(NP[ty])
    y = np.where(bm, compute(b, ty), 0).astype(NP[ty])
    ex = np.where(am, np.broadcast_to(a.err, a.shape), 0.0)
    ey = np.where(bm, np.broadcast_to(b.err, b.shape), 0.0)
    if trans_b:
        y, ey = y.T, ey.T
    with np.errstate(all="ignore"):
        if is_float(ty):
            r = (x.astype(np.float64) @ y.astype(np.float64)).astype(NP[ty]) if ty == "f32" else x @ y
        else:
            r = (x.astype(np.int64) @ y.astype(np.int64)).astype(NP[ty])
    lo = (a.lo[0], b.lo[0] if trans_b else b.lo[1])
    hi = (a.hi[0], b.hi[0] if trans_b else b.hi[1])
    if not is_float(ty):
        return TV(r, ty, lo, hi, np.zeros(()))
    fx, fy = np.abs(_f64(x)), np.abs(_f64(y))
    k = x.shape[1]
    e = fx @ ey + ex @ fy + ex @ ey + k * ACC_UNIT[ty] * (fx @ fy)
    return TV(r, ty, lo, hi, e + op_err(r, ty))


def transpose(a: TV) -> TV:
    e = a.err.T if a.err.ndim == 2 else a.err
    return TV(a.data.T.copy(), a.ty, a.lo[::-1], a.hi[::-1], e)


def window(t: TV, starts: Sequence[Optional[int]], lens: Sequence[Optional[int]]) -> TV:
    """t[s0 :+ n0, ...] (None length: a scalar index, the dimension dropped): the tile's region
    seen through the window; elements outside the tile read 0 and are invalid."""
    shape = t.shape
    oshape = tuple(n for n in lens if n is not None)
    data = np.zeros(oshape, t.data.dtype)
    err = np.zeros(oshape)
    te = np.broadcast_to(t.err, shape)
    src, dst, lo, hi = [], [], [], []
    valid = True
    for d, (s, n) in enumerate(zip(starts, lens)):
        ext = shape[d]
        if n is None:
            if not 0 <= s < ext:
                return TV(data, t.ty, (0,) * len(oshape), (0,) * len(oshape), err)
            valid &= t.lo[d] <= s < t.hi[d]
            src.append(s)
            continue
        a, b = _clamp(-s, 0, n), _clamp(ext - s, 0, n)
        src.append(slice(s + a, s + b))
        dst.append(slice(a, b))
        lo.append(_clamp(t.lo[d] - s, a, b))
        hi.append(max(lo[-1], _clamp(t.hi[d] - s, a, b)))
    data[tuple(dst)] = t.data[tuple(src)]
    err[tuple(dst)] = te[tuple(src)]
    if not valid:
        hi = list(lo)
    return TV(data, t.ty, tuple(lo), tuple(hi), err)


def load(tensor: np.ndarray, ty: str, starts: Sequence[int], lens: Sequence[Optional[int]],
         terr: Optional[np.ndarray] = None) -> TV:
    """A slice of a tensor (None length: a scalar index): elements outside read 0, invalid."""
    t = TV(tensor, ty, (0,) * tensor.ndim, tensor.shape, terr if terr is not None else np.zeros(tensor.shape))
    return window(t, starts, lens)


def _targets(shape, starts, lens):
    """For a store into a window: (index into the destination, index into the value) of the part
    inside the destination, or None when nothing is."""
    dsti, srci = [], []
    for d, (s, n) in enumerate(zip(starts, lens)):
        ext = shape[d]
        if n is None:
            if not 0 <= s < ext:
                return None
            dsti.append(s)
            continue
        a, b = _clamp(-s, 0, n), _clamp(ext - s, 0, n)
        if b <= a:
            return None
        dsti.append(slice(s + a, s + b))
        srci.append(slice(a, b))
    return tuple(dsti), tuple(srci)


def store(dest: np.ndarray, dest_ty: str, dest_err: Optional[np.ndarray], starts, lens, v: TV):
    """Write the valid elements of v (broadcast to the window's shape) that lie inside `dest`,
    converted to dest's type (spec 8 rule 9). Updates dest (and dest_err) in place."""
    wshape = tuple(n for n in lens if n is not None)
    lo, hi = bcast_region(v, wshape) if v.shape else ((0,) * len(wshape), wshape)
    vm = TV(np.zeros(wshape), v.ty, lo, hi, np.zeros(())).mask()
    data = np.broadcast_to(convert(v.data, v.ty, dest_ty) if v.ty != dest_ty else v.data, wshape)
    err = np.broadcast_to(v.err, wshape)
    if is_float(dest_ty) and dest_ty in ("f16", "bf16") and v.ty != dest_ty:
        err = err + 2 * EPS[dest_ty] * np.abs(_f64(data))
    elif is_float(dest_ty) and dest_ty == "f32" and v.ty == "f64":
        err = err + 2 ** -23 * np.abs(_f64(data))
    if not is_float(dest_ty) and np.any(np.broadcast_to(err, wshape)[vm] > 0):
        raise AssertionError("an integer store of an inexact value (a generator bug)")
    tg = _targets(dest.shape, starts, lens)
    if tg is None:
        return
    di, si = tg
    sub = dest[di]
    m = vm[si]
    dest[di] = np.where(m, data[si], sub)
    if dest_err is not None:
        dest_err[di] = np.where(m, np.broadcast_to(err, wshape)[si], dest_err[di])


def store_tile(t: TV, starts, lens, v: TV) -> TV:
    """t[window] = v: the valid elements of v inside the tile; t's region is unchanged."""
    data = t.data.copy()
    err = np.broadcast_to(t.err, t.shape).astype(np.float64).copy()
    store(data, t.ty, err, starts, lens, v)
    return TV(data, t.ty, t.lo, t.hi, err)


def assign(t_ty: str, t_shape, v: TV) -> TV:
    """t = v, or `var t: tile<T>[...] = v`: v's values (converted, broadcast) and region."""
    data = np.broadcast_to(convert(v.data, v.ty, t_ty) if v.ty != t_ty else v.data, t_shape).copy()
    lo, hi = bcast_region(v, t_shape) if v.shape else ((0,) * len(t_shape), tuple(t_shape))
    err = np.broadcast_to(v.err, t_shape).astype(np.float64).copy()
    if t_ty in ("f16", "bf16") and v.ty != t_ty:
        err = err + 2 * EPS[t_ty] * np.abs(_f64(data))
    return TV(data, t_ty, lo, hi, err)


def close(ref: np.ndarray, got: np.ndarray, dtype: str, err: Optional[np.ndarray]):
    """(ok, mask of differing elements, worst excess) comparing `got` with `ref` (spec 17):
    integers and bool exactly; floats within 2 * err + the type's elementwise tolerance."""
    if ref.shape != got.shape:
        return False, None, float("inf")
    if not is_float(dtype):
        bad = ref != got
        return not bad.any(), bad, float(bad.sum())
    r, g = _f64(ref), _f64(got)
    e = np.zeros(r.shape) if err is None else np.broadcast_to(err, r.shape)
    e = np.where(np.isnan(e), np.inf, e)
    tol = 2.0 * e + EPS[dtype] * (1.0 + np.abs(r))
    with np.errstate(invalid="ignore"):
        nan = np.isnan(r) | np.isnan(g)
        bad = np.where(nan, np.isnan(r) != np.isnan(g), ~(np.abs(g - r) <= tol))
        inf_same = np.isinf(r) & (r == g)
        bad &= ~inf_same
        excess = np.where(bad & ~nan, np.abs(g - r) / np.maximum(tol, 1e-300), np.where(bad, np.inf, 0.0))
    return not bad.any(), bad, float(excess.max()) if excess.size else 0.0
