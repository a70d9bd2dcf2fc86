"""C types, literals and conversions of the generated CUDA code.

Guarantees: every IR dtype has one value type (what an expression of that type computes in:
f16/bf16/f32 -> float, i8/i32 -> int, i64/index -> long long, u8/u16/u32 -> unsigned) and one
storage type (how tensors, tiles and vars hold it: f16/bf16 as 16-bit patterns). `convert`
implements the language's conversion rules on C value expressions, `store_bits` a value as the
storage of another type (rounding on store), `load_value` the reverse; `literal` prints a
constant exactly.
"""
from __future__ import annotations

import math

import numpy as np

from ..types import DTYPES

VALUE_C = {"f16": "float", "bf16": "float", "f32": "float", "f64": "double", "i8": "int", "i32": "int",
           "i64": "long long", "index": "long long", "u8": "unsigned", "u16": "unsigned", "u32": "unsigned",
           "bool": "bool"}
STORE_C = {"f16": "tnb_f16", "bf16": "tnb_bf16", "f32": "float", "f64": "double", "i8": "signed char",
           "i32": "int", "i64": "long long", "index": "long long", "u8": "unsigned char",
           "u16": "unsigned short", "u32": "unsigned int", "bool": "bool"}
F32_FAMILY = ("f16", "bf16", "f32")


def pack2(dt: str) -> str:
    """The prelude function that rounds two f32 values to one 32-bit word of two `dt` (f16 or
    bf16) values, the first in the low half."""
    return "tnb_pack_b2" if dt == "bf16" else "tnb_pack_h2"


def is_float(dt: str) -> bool:
    return DTYPES[dt].is_float


def itemsize(dt: str) -> int:
    return DTYPES[dt].itemsize


def zero(dt: str) -> str:
    if dt == "bool":
        return "false"
    if dt in F32_FAMILY:
        return "0.0f"
    if dt == "f64":
        return "0.0"
    if dt in ("i64", "index"):
        return "0LL"
    if dt in ("u8", "u16", "u32"):
        return "0u"
    return "0"


def literal(value, dt: str) -> str:
    """A constant of IR type `dt` as an exact C literal of its value type."""
    if dt == "bool":
        return "true" if bool(value) else "false"
    if dt in F32_FAMILY:
        f = float(np.float32(float(value)))
        if math.isnan(f):
            return "__int_as_float(0x7fc00000)"
        if math.isinf(f):
            return "__int_as_float(0x7f800000)" if f > 0 else "__int_as_float(0xff800000)"
        s = str(np.float32(f))
        if not any(c in s for c in ".en"):
            s += ".0"
        return s + "f"
    if dt == "f64":
        f = float(value)
        if math.isnan(f):
            return "__longlong_as_double(0x7ff8000000000000LL)"
        if math.isinf(f):
            return "__longlong_as_double(0x7ff0000000000000LL)" if f > 0 else "__longlong_as_double((long long)0xfff0000000000000ULL)"
        s = repr(f)
        if not any(c in s for c in ".en"):
            s += ".0"
        return s
    v = int(value)
    if dt in ("i64", "index"):
        v = ((v + (1 << 63)) % (1 << 64)) - (1 << 63)
        return "(-9223372036854775807LL - 1)" if v == -(1 << 63) else f"{v}LL"
    if dt in ("i32", "i8"):
        bits = 32
        v = ((v + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1))
        if dt == "i8":
            v = ((v + 128) % 256) - 128
        return "(-2147483647 - 1)" if v == -(1 << 31) else str(v)
    bits = DTYPES[dt].bits
    return f"{v % (1 << bits)}u"


_I2I = {"i8": "(int)(signed char)", "i32": "(int)", "i64": "(long long)", "index": "(long long)",
        "u8": "(unsigned)(unsigned char)", "u16": "(unsigned)(unsigned short)", "u32": "(unsigned)"}


def convert(v: str, src: str, dst: str) -> str:
    """The value `v` (of IR type src) converted to IR type dst, as a C value expression."""
    if src == dst:
        return v
    if src in ("i32", "i8") and dst in ("i32", "i8") and dst == "i32":
        return v
    if DTYPES[dst].is_float:
        if dst == "f32":
            return v if src in F32_FAMILY else f"(float)({v})"
        if dst == "f64":
            return f"(double)({v})"
        h = dst == "f16"
        if src == "f64":
            return f"tnb_h2f(tnb_d2h({v}))" if h else f"tnb_b2f(tnb_d2b({v}))"
        if src in F32_FAMILY:
            return f"tnb_rh({v})" if h else f"tnb_rb({v})"
        return f"tnb_h2f(tnb_d2h((double)({v})))" if h else f"tnb_rb((float)({v}))"
    if dst == "bool" or src == "bool":
        raise ValueError(f"no conversion between {src} and {dst}")
    if DTYPES[src].is_float:
        # truncate toward zero, saturate, NaN -> 0 (prelude helpers tnb_f2i32, tnb_d2u8, ...)
        fn = ("tnb_d2" if src == "f64" else "tnb_f2") + {"i8": "i8", "i32": "i32", "i64": "i64", "index": "i64",
                                                          "u8": "u8", "u16": "u16", "u32": "u32"}[dst]
        return f"{fn}({v})"
    if VALUE_C[src] == VALUE_C[dst] and dst not in ("i8", "u8", "u16"):
        return v
    return f"{_I2I[dst]}({v})"


def _unwrap_call(v: str, fn: str):
    """The argument text if `v` is exactly one call `fn(...)`, else None."""
    if not (v.startswith(fn + "(") and v.endswith(")")):
        return None
    depth = 0
    for n, ch in enumerate(v[len(fn):]):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and n != len(v) - len(fn) - 1:
            return None     # the first call closes before the end: f(a) + g(b)
    return v[len(fn) + 1:-1]


def store_bits(v: str, src: str, dst: str) -> str:
    """The value `v` (IR type src) as the storage of IR type dst (rounds to nearest even).
    A value that is an element of dst's own 16-bit storage, just widened, is stored as those
    bits unchanged (a same-type copy converts nothing)."""
    if dst in ("f16", "bf16") and src == dst:
        inner = _unwrap_call(v, "tnb_h2f" if dst == "f16" else "tnb_b2f")
        if inner is not None:
            return inner
    if dst == "f16":
        if src == "f64":
            return f"tnb_d2h({v})"
        if src in F32_FAMILY:
            return f"tnb_f2h({v})"
        return f"tnb_d2h((double)({v}))"
    if dst == "bf16":
        if src == "f64":
            return f"tnb_d2b({v})"
        if src in F32_FAMILY:
            return f"tnb_f2b({v})"
        return f"tnb_f2b((float)({v}))"
    c = convert(v, src, dst)
    if STORE_C[dst] == VALUE_C[dst]:
        return c
    return f"({STORE_C[dst]})({c})"


def load_value(x: str, dt: str) -> str:
    """Storage `x` of IR type dt as a value expression."""
    if dt == "f16":
        return f"tnb_h2f({x})"
    if dt == "bf16":
        return f"tnb_b2f({x})"
    if dt == "i8":
        return f"(int)({x})"
    if dt in ("u8", "u16"):
        return f"(unsigned)({x})"
    return x
