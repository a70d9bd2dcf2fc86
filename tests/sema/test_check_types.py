"""The type rules, pinned on the typed IR the checker produces (docs/spec.md, "Types").

Literals are open until their context types them (float literals default to f32, integer
literals to i32, or i64 when they do not fit); f16/bf16 compute in f32 and i8 in i32; index is
64-bit; int and float never mix without a conversion call; u8/u16/u32 are storage only.
"""
import math

import numpy as np
import pytest

import tilenb
from tilenb import TileTypeError, ir

PARAMS = ("X: tensor<f32>[M, 64], H: tensor<f16>[M, 64], BF: tensor<bf16>[M, 64], "
          "Q: tensor<i8>[M, 64], U: tensor<u8>[M, 64], D: tensor<f64>[M, 64], I: tensor<i32>[M, 64], "
          "L: tensor<i64>[M, 64]")


def kernel_ir(body):
    return tilenb.compile(f"kernel k({PARAMS}) {{\n{body}\n}}\n", backend="cpu").k.ir()


def bound(body, name):
    """The value bound to `name` by the let/var of that name in `body`."""
    kir = kernel_ir(body)
    for s in ir.walk_stmts(kir.body):
        if isinstance(s, (ir.Let, ir.VarDecl)) and s.sym.name == name:
            return s.sym, s.value
    raise KeyError(name)


def test_float_literal_defaults_to_f32():
    sym, v = bound("let a = 0.1", "a")
    assert sym.type == ir.ScalarT("f32") and v.type == ir.ScalarT("f32")
    assert v.value == float(np.float32(0.1))


def test_float_literal_keeps_f64_precision_in_an_f64_context():
    sym, v = bound("let a: f64 = 0.1", "a")
    assert v == ir.Const(0.1, ir.ScalarT("f64"), v.span)
    _, v = bound("let d = D[0, 0]\nlet a = d * 0.1", "a")
    assert v.type == ir.ScalarT("f64") and v.b.type == ir.ScalarT("f64") and v.b.value == 0.1


def test_half_types_compute_in_f32_and_round_on_store():
    _, v = bound("let h = H[0, 0]\nlet a = h * 2.0", "a")
    assert v.type == ir.ScalarT("f32") and v.b.type == ir.ScalarT("f32")
    _, v = bound("let b = BF[0, 0]\nlet a = b + b", "a")
    assert v.type == ir.ScalarT("f32")
    sym, v = bound("let h = H[0, 0]\nlet a: f16 = h * h", "a")
    assert sym.type == ir.ScalarT("f16") and v.type == ir.ScalarT("f32")
    sym, v = bound("var t = H[0 :+ 4, :]\nvar s = t * 0.5", "s")
    assert sym.type == ir.TileT("f32", (4, 64))


def test_i8_computes_in_i32():
    _, v = bound("let q = Q[0, 0]\nlet a = q + q", "a")
    assert v.type == ir.ScalarT("i32")
    _, v = bound("let q = Q[0, 0]\nlet a = -q", "a")
    assert v.type == ir.ScalarT("i32")
    _, v = bound("let q = Q[0, 0]\nlet a = q * 3", "a")
    assert v.type == ir.ScalarT("i32") and v.b == ir.Const(3, ir.ScalarT("i32"), v.b.span)


def test_integer_literals_adapt_to_context():
    _, v = bound("let x = X[0, 0]\nlet a = x * 3", "a")
    assert v.b == ir.Const(3.0, ir.ScalarT("f32"), v.b.span)
    _, v = bound("let a = ctx.thread + 3", "a")
    assert v.type == ir.ScalarT("index") and v.b.type == ir.ScalarT("index")
    _, v = bound("let l = L[0, 0]\nlet a = l << 40", "a")
    assert v.type == ir.ScalarT("i64") and v.b.type == ir.ScalarT("i64")
    sym, _ = bound("let a = 3", "a")
    assert sym.type == ir.ScalarT("i32")
    sym, v = bound("let a = 5000000000", "a")
    assert sym.type == ir.ScalarT("i64") and v.value == 5000000000
    sym, v = bound("let a = 1 << 40", "a")
    assert sym.type == ir.ScalarT("i64") and v.value == 1 << 40


def test_constant_arithmetic_folds_exactly():
    assert bound("let a = 7 / 2", "a")[1].value == 3
    assert bound("let a = -7 / 2", "a")[1].value == -3      # truncates toward zero
    assert bound("let a = -7 % 2", "a")[1].value == -1      # the sign of the dividend
    assert bound("let a = 100000 * 100000", "a")[1].value == 10 ** 10
    assert bound("let a = 1 < 2 && 2.5 > 1", "a")[1] .value is True
    assert bound("let a: f64 = 1.0 / 3.0", "a")[1].value == 1.0 / 3.0


def test_index_is_64_bit():
    kir = kernel_ir("for i in range(0, M) { X[0, i] = 1.0 }\nlet t = ctx.thread")
    loop = kir.body[0]
    assert loop.var.type == ir.ScalarT("index") and loop.hi.type == ir.ScalarT("index")
    assert kir.dims["M"].type == ir.ScalarT("index")
    assert tilenb.types.DTYPES["index"].bits == 64
    _, v = bound("let i = ctx.thread\nlet a = i + I[0, 0]", "a")
    assert v.type == ir.ScalarT("index")


@pytest.mark.parametrize("body, phrase", [
    ("let a = X[0, 0] + I[0, 0]", "mixes f32 and i32"),
    ("let a = I[0, 0] * 1.5", "the float literal 1.5"),
    ("let a = X[0, 0] + i32(2)", "mixes f32 and i32"),
    ("let a = ctx.thread * 0.5", "mixes index and the float literal 0.5"),
    ("let a: f32 = I[0, 0]", "write f32(...)"),
    ("let a: i32 = 2.0", "cannot store the float literal 2.0 into i32"),
    ("I[0, 0] = X[0, 0]", "write i32(...)"),
    ("let a = exp(I[0, 0])", "needs a float"),
])
def test_int_and_float_never_mix_without_a_conversion(body, phrase):
    with pytest.raises(TileTypeError, match=phrase.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        kernel_ir(body)


def test_conversions_make_typed_values():
    _, v = bound("let a = f32(I[0, 0]) + X[0, 0]", "a")
    assert isinstance(v.a, ir.Convert) and v.a.type == ir.ScalarT("f32")
    _, v = bound("let u = U[0, 0]\nlet a = (i32(u) >> 4) & 15", "a")
    assert v.type == ir.ScalarT("i32") and isinstance(v.a.a, ir.Convert)
    assert v.a.a.x.type == ir.ScalarT("u8")
    # a typed constant wider than the other side decides the operand type
    _, v = bound("let a = X[0, 0] < f64(0.1)", "a")
    assert isinstance(v.b, ir.Convert) and v.b.type == ir.ScalarT("f64")


@pytest.mark.parametrize("expr, dtype, value", [
    ("i8(300)", "i8", 44), ("i32(2.9)", "i32", 2), ("i32(-2.9)", "i32", -2),
    ("i32(1.0e10)", "i32", 2 ** 31 - 1), ("i32(-1.0e10)", "i32", -(2 ** 31)), ("u8(-1)", "u8", 255),
    ("u16(70000)", "u16", 70000 - 65536), ("f16(0.1)", "f16", float(np.float16(0.1))),
    ("bf16(1.0 / 3.0)", "bf16", float(np.asarray(1 / 3, np.float32).astype(tilenb.types.DTYPES["bf16"].numpy))),
    ("f64(0.1)", "f64", 0.1), ("i64(3)", "i64", 3),
])
def test_constant_conversions(expr, dtype, value):
    _, v = bound(f"let a = {expr}", "a")
    assert v.type == ir.ScalarT(dtype) and v.value == value


def test_f16_conversion_of_a_large_constant_is_infinite():
    _, v = bound("let a = f16(70000.0)", "a")
    assert math.isinf(v.value)


@pytest.mark.parametrize("body", [
    "let u = U[0, 0]\nlet a = u + 1", "let u = U[0, 0]\nlet a = -u", "let u = U[0, 0]\nlet a = u < 3",
    "var t = U[0 :+ 4, :]\nvar s = rowmax(t)", "let u = U[0, 0]\nlet a = u & 15",
])
def test_storage_types_take_no_arithmetic(body):
    with pytest.raises(TileTypeError, match="storage type; convert first"):
        kernel_ir(body)


def test_storage_types_move_and_store():
    sym, v = bound("var t = U[0 :+ 4, :]\nvar s = transpose(t)", "s")
    assert sym.type == ir.TileT("u8", (64, 4))
    kir = kernel_ir("U[0 :+ 4, :] = U[4 :+ 4, :]\nU[0, 0] = u8(I[0, 0] + 1)")
    assert kir.body[0].value.type.dtype == "u8"


def test_bool_comes_from_comparisons_only():
    _, v = bound("let a = X[0, 0] > 0.0 && !(I[0, 0] == 3)", "a")
    assert v.type == ir.ScalarT("bool")
    for body in ["let a = i32(X[0, 0] > 0.0)", "let a = bool(1)", "let a: bool = 1",
                 "let a = (X[0, 0] > 0.0) + 1", "let a = X[0, 0] > 0.0\nlet b = a < a"]:
        with pytest.raises(TileTypeError):
            kernel_ir(body)


def test_reduction_and_dot_types():
    kir = kernel_ir("""var h = H[0 :+ 4, :]
var q = Q[0 :+ 4, :]
var d = D[0 :+ 4, :]
var a = rowsum(h)
var b = rowmax(q)
var c = rowsum(q)
var e = colmin(d)
var f = dot_t(h, h)
var g = dot_t(q, q)
var k = dot(d, transpose(d))""")
    types = {s.sym.name: s.sym.type for s in kir.body if isinstance(s, ir.VarDecl)}
    assert types["a"] == ir.TileT("f32", (4, 1)) and types["b"] == ir.TileT("i8", (4, 1))
    assert types["c"] == ir.TileT("i32", (4, 1)) and types["e"] == ir.TileT("f64", (1, 64))
    assert types["f"] == ir.TileT("f32", (4, 4)) and types["g"] == ir.TileT("i32", (4, 4))
    assert types["k"] == ir.TileT("f64", (4, 4))
    with pytest.raises(TileTypeError, match="operands of one type"):
        kernel_ir("var h = H[0 :+ 4, :]\nvar x = X[0 :+ 4, :]\nvar f = dot_t(h, x)")


def test_every_const_in_the_ir_fits_its_type():
    kir = kernel_ir("let a = 1\nlet b = 2.5\nlet c = X[0, 0] * 3 + 0.1\nlet d = min(1, 2.5)\n"
                    "let e = where(X[0, 0] > 0.0, 1, 0)\nlet f = cdiv(M, 8)")
    for s in ir.walk_stmts(kir.body):
        for e in ir.stmt_exprs(s):
            for x in ir.walk_expr(e):
                if isinstance(x, ir.Const):
                    assert type(x) is ir.Const
                    d = tilenb.types.DTYPES[x.type.dtype]
                    if d.is_float:
                        assert isinstance(x.value, float)
                        assert float(np.asarray(x.value).astype(d.numpy)) == x.value
                    elif x.type.dtype != "bool":
                        assert isinstance(x.value, int)
