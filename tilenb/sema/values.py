"""Constants, literals and shapes: the value rules the checker applies (spec sections 4 and 6).

Guarantees: `_convert_const` converts a constant as the language converts values; `_finalize`
gives every open literal of an expression its own type; `_fold` / `_const_int` evaluate the
constant expressions attributes and loop steps take (exactly, over literals and @autotune
names); `_broadcast` / `_fits` are the broadcasting rule; `_type_str` / `_shape_str` write
types as messages show them.
"""
from __future__ import annotations

import math
from dataclasses import fields, replace
from typing import Optional, Tuple

import numpy as np

from .. import ir
from .. import types as T
from ..lang import ast as A
from ..lang.diagnostics import TileRuleError, TileTypeError
from .scope import _Lit, _Tune


class _NotConst(Exception):
    pass


def _const_int(expr, src, errors, what, env=None) -> Optional[int]:
    """Fold an attribute argument (literal, or arithmetic on literals and tune names)."""
    try:
        v = _fold(expr, env)
    except _NotConst:
        errors.append(src.error(TileRuleError, f"{what} must be a constant: an integer literal or an @autotune name", expr.span.line, expr.span.column))
        return None
    if not isinstance(v, int) or isinstance(v, bool):
        errors.append(src.error(TileTypeError, f"{what} must be an integer, not {v}", expr.span.line, expr.span.column))
        return None
    if not -(2 ** 63) <= v < 2 ** 63:
        errors.append(src.error(TileTypeError, f"{what} does not fit in 64 bits", expr.span.line, expr.span.column))
        return None
    return v


def _fold(e, env):
    """The value of a constant expression over literals and @autotune names (exact), or _NotConst."""
    if isinstance(e, A.IntLit):
        return e.value
    if isinstance(e, A.FloatLit):
        return e.value
    if isinstance(e, A.Name) and env is not None:
        b = env.lookup(e.id)
        if isinstance(b, _Tune):
            return b.value
        raise _NotConst()
    if isinstance(e, A.Unary) and e.op == "-":
        return -_fold(e.operand, env)
    if isinstance(e, A.Unary) and e.op == "~":
        v = _fold(e.operand, env)
        if not isinstance(v, int):
            raise _NotConst()
        return ~v
    if isinstance(e, A.Binary) and e.op in ("&", "|", "^", "<<", ">>"):
        # integer bit operations fold too (spec 4.3: arithmetic on literals folds exactly)
        a, b = _fold(e.left, env), _fold(e.right, env)
        if not isinstance(a, int) or not isinstance(b, int) or max(abs(a), abs(b)) > 2 ** 64:
            raise _NotConst()
        if e.op in ("<<", ">>"):
            if not 0 <= b <= 63:      # out of range: the checker's own rule reports it
                raise _NotConst()
            return a << b if e.op == "<<" else a >> b
        return a & b if e.op == "&" else a | b if e.op == "|" else a ^ b
    if isinstance(e, A.Binary) and e.op in ("+", "-", "*", "/", "%"):
        a, b = _fold(e.left, env), _fold(e.right, env)
        if max(abs(a), abs(b)) > 2 ** 64:
            raise _NotConst()
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if e.op == "*":
            return a * b
        if isinstance(a, int) and isinstance(b, int):
            if b == 0:
                raise _NotConst()
            q = _cdiv_trunc(a, b)
            return q if e.op == "/" else a - q * b
        if e.op == "/" and b != 0:
            return a / b
        raise _NotConst()
    if isinstance(e, A.Call) and e.func == "cdiv" and len(e.args) == 2:
        a, b = _fold(e.args[0], env), _fold(e.args[1], env)
        if not isinstance(a, int) or not isinstance(b, int) or b == 0:
            raise _NotConst()
        return -(-a // b)
    raise _NotConst()


def _cdiv_trunc(a: int, b: int) -> int:
    """Integer division truncating toward zero (C's `/`)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _broadcast(a: Tuple[int, ...], b: Tuple[int, ...]) -> Optional[Tuple[int, ...]]:
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + a
    b = (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            return None
    return tuple(out)


def _fits(value: Tuple[int, ...], target: Tuple[int, ...]) -> bool:
    """Whether a value of shape `value` broadcasts to exactly `target`."""
    return _broadcast(value, target) == tuple(target) and len(value) <= len(target)


def _shape_str(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _type_str(t):
    if isinstance(t, ir.ScalarT):
        return t.dtype
    if isinstance(t, ir.TileT):
        return f"tile<{t.dtype}>{_shape_str(t.shape)}"
    if isinstance(t, ir.TensorT):
        return f"tensor<{t.dtype}>{_shape_str(t.dims)}"
    return "?"


def _int_range(dtype: str) -> Tuple[int, int]:
    d = T.DTYPES[dtype]
    if d.kind == "uint":
        return 0, (1 << d.bits) - 1
    return -(1 << (d.bits - 1)), (1 << (d.bits - 1)) - 1


def _lit_type(value) -> ir.ScalarT:
    """The type of a literal its context leaves open: f32 for a float, i32 for an integer that
    fits, else i64."""
    if isinstance(value, float):
        return ir.ScalarT("f32")
    lo, hi = _int_range("i32")
    return ir.ScalarT("i32" if lo <= value <= hi else "i64")


def _round_float(v: float, dtype: str) -> float:
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.asarray(v, dtype=np.float64).astype(T.DTYPES[dtype].numpy).astype(np.float64))


def _convert_const(v, dt):
    """A constant converted as the language converts values: float -> int truncates toward
    zero and saturates (NaN -> 0); int -> narrower int wraps; to a float rounds."""
    d = T.DTYPES[dt]
    if dt == "bool":
        return bool(v)
    if d.is_float:
        return _round_float(float(v), dt)
    lo, hi = _int_range("i64" if dt == "index" else dt)
    if isinstance(v, float):
        if v != v:
            return 0
        return int(max(lo, min(hi, math.trunc(v)))) if math.isfinite(v) else (hi if v > 0 else lo)
    v = int(v)
    span = hi - lo + 1
    return (v - lo) % span + lo


_IR_NODES = (ir.Unary, ir.Binary, ir.Math, ir.Convert, ir.Reduce, ir.Dot, ir.Transpose, ir.Slice,
             ir.Element, ir.SubIndex, ir.SubRange)
# Per IR node class, the names of its fields that can hold an expression (dataclasses.fields()
# is slow on this path: `fin` runs on every statement and nested subscript). The others hold a
# type, a span, a Sym, an operator or function name, a flag or an int, never an open literal.
_NOT_EXPR_FIELDS = {"type", "span", "op", "fn", "sym", "base", "flat", "trans_b", "axis", "length", "full"}
_NODE_FIELDS = {cls: tuple(f.name for f in fields(cls) if f.name not in _NOT_EXPR_FIELDS) for cls in _IR_NODES}


def _finalize(e, fit):
    """`e` with every open literal (`_Lit`) replaced by a plain `Const` of its own type."""
    cls = type(e)
    if cls is _Lit:
        return fit(e, e.type.dtype, e.span)
    if cls is tuple:
        new = tuple([_finalize(x, fit) for x in e])
        for a, b in zip(new, e):
            if a is not b:
                return new
        return e
    names = _NODE_FIELDS.get(cls)
    if names is None:
        if isinstance(e, _IR_NODES + (tuple,)):   # a subclass: the general path
            return _finalize_slow(e, fit)
        return e
    changes = None
    for name in names:
        v = getattr(e, name)
        t = type(v)
        if t is tuple or t is _Lit or t in _NODE_FIELDS:
            nv = _finalize(v, fit)
            if nv is not v:
                if changes is None:
                    changes = {}
                changes[name] = nv
        elif t is not ir.Const and isinstance(v, (tuple, ir.Const) + _IR_NODES):
            nv = _finalize_slow(v, fit)
            if nv is not v:
                if changes is None:
                    changes = {}
                changes[name] = nv
    return replace(e, **changes) if changes else e


def _finalize_slow(e, fit):
    """`_finalize` for instances of subclasses of the IR node classes (none today)."""
    if isinstance(e, _Lit):
        return fit(e, e.type.dtype, e.span)
    if isinstance(e, tuple):
        new = tuple(_finalize(x, fit) for x in e)
        return new if any(a is not b for a, b in zip(new, e)) else e
    if isinstance(e, _IR_NODES):
        changes = {}
        for f in fields(e):
            v = getattr(e, f.name)
            if isinstance(v, (tuple, ir.Const) + _IR_NODES):
                nv = _finalize(v, fit)
                if nv is not v:
                    changes[f.name] = nv
        return replace(e, **changes) if changes else e
    return e
