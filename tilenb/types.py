"""Scalar types of the tile language and the rules that combine them.

Guarantees: one table (`DTYPES`) says what each scalar type is (kind, bits, numpy storage
dtype, C type); `promote` is the only place arithmetic result types are decided. bf16's numpy
dtype comes from ml_dtypes, imported the first time `DTYPES["bf16"].numpy` is read (about half
a second that a program without bf16 never spends).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np


def _bfloat16():
    import ml_dtypes
    return np.dtype(ml_dtypes.bfloat16)


@dataclass(frozen=True)
class DType:
    name: str
    kind: str          # "float", "int", "uint" (storage only), "bool", "index"
    bits: int
    storage: object = field(compare=False)  # numpy dtype of CPU storage, or a function making it
    ctype: str         # the CUDA C++ type

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype of this type's storage on the CPU."""
        s = self.storage
        if not isinstance(s, np.dtype):
            s = s()
            object.__setattr__(self, "storage", s)
        return s

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "index")

    @property
    def storage_only(self) -> bool:
        return self.kind == "uint"

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)


DTYPES = {
    "f16": DType("f16", "float", 16, np.dtype(np.float16), "__half"),
    "bf16": DType("bf16", "float", 16, _bfloat16, "__nv_bfloat16"),
    "f32": DType("f32", "float", 32, np.dtype(np.float32), "float"),
    "f64": DType("f64", "float", 64, np.dtype(np.float64), "double"),
    "i8": DType("i8", "int", 8, np.dtype(np.int8), "signed char"),
    "i32": DType("i32", "int", 32, np.dtype(np.int32), "int"),
    "i64": DType("i64", "int", 64, np.dtype(np.int64), "long long"),
    "u8": DType("u8", "uint", 8, np.dtype(np.uint8), "unsigned char"),
    "u16": DType("u16", "uint", 16, np.dtype(np.uint16), "unsigned short"),
    "u32": DType("u32", "uint", 32, np.dtype(np.uint32), "unsigned int"),
    "bool": DType("bool", "bool", 8, np.dtype(np.bool_), "bool"),
    # The integer width the target addresses memory with: 64-bit on every CUDA target.
    "index": DType("index", "index", 64, np.dtype(np.int64), "long long"),
}

# Types a tensor or tile may hold (index is for values, bool comes only from comparisons).
ELEMENT_DTYPES = tuple(n for n in DTYPES if n not in ("index", "bool"))
# Types that name a conversion call, `f32(x)`.
CONVERSIONS = ELEMENT_DTYPES

# The longest extent a tile (or slice) dimension may have: every shape the checker accepts,
# declared, sliced or built by rows()/cols(), is held to it.
MAX_EXTENT = 2 ** 31


def dtype(name: str) -> DType:
    return DTYPES[name]


def compute_type(name: str) -> str:
    """The type arithmetic on a value of type `name` is done in: f16/bf16 in f32, i8 in i32."""
    if name in ("f16", "bf16"):
        return "f32"
    if name == "i8":
        return "i32"
    return name


def promote(a: str, b: str) -> Optional[str]:
    """Result type of arithmetic on non-literal values of types a and b, or None if they do
    not mix (an int with a float, or anything with bool or a storage-only type)."""
    da, db = DTYPES[a], DTYPES[b]
    if da.is_float and db.is_float:
        return "f64" if "f64" in (a, b) else "f32"
    if da.is_int and db.is_int:
        if "index" in (a, b):
            return "index"
        if "i64" in (a, b):
            return "i64"
        return "i32"
    return None


def operand_dtype(ta: str, tb: str, a_const: bool, b_const: bool) -> str:
    """The type two operands of types ta and tb are combined in, as the checker types them: a
    literal (a_const/b_const) adapts to the other side; bool stays bool. Both backends use it."""
    if ta == "bool" or tb == "bool":
        return "bool"
    if a_const and not b_const:
        return compute_type(tb)
    if b_const and not a_const:
        return compute_type(ta)
    if a_const and b_const:
        return "f32" if "f32" in (ta, tb) else compute_type(ta)
    return promote(ta, tb) or compute_type(ta)
