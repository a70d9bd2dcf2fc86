"""Tile extents are constants (spec 6: literals, @autotune names, arithmetic on those, which folds
exactly as spec 4.3 says): the message for a bad one says what is wrong with it, at its column."""
import numpy as np
import pytest

import tilenb
from tilenb import TileError


def extent_error(ext, tune="@autotune(T in [1000000])\n"):
    src = f"{tune}kernel k(X: tensor<f32>[N], n: i32) {{\n  var t: tile<f32>[{ext}, 4] = 0.0\n}}\n"
    with pytest.raises(TileError) as info:
        tilenb.compile(src, backend="cpu").k.ir()
    e = info.value
    assert (e.line, e.column) == (3, 20), str(e)
    return e.message


@pytest.mark.parametrize("ext", ["T * T", "99999999999999999999", "2147483649"])
def test_an_extent_beyond_the_largest_says_so_not_that_it_is_not_positive(ext):
    msg = extent_error(ext)
    assert "more than the largest extent, 2**31" in msg and "positive" not in msg, msg


@pytest.mark.parametrize("ext", ["8 / 0", "cdiv(64, T - T)", "T % (T - T)"])
def test_a_zero_divisor_in_an_extent_is_named(ext):
    msg = extent_error(ext)
    assert msg == f"a tile's dimension divides by zero: '{ext}'"


def test_a_runtime_name_is_refused_with_what_an_extent_may_be():
    msg = extent_error("n")
    assert "a literal, an @autotune name, or arithmetic on them, not 'n'" in msg


def test_bit_operations_on_constants_fold_into_an_extent():
    """`1 << 3` is arithmetic on literals (spec 4.3 folds it, spec 6 sizes tiles with it)."""
    src = """
@autotune(S in [2])
@launch(32)
kernel k(X: tensor<f32>[N], Y: tensor<f32>[N]) {
  var t: tile<f32>[(1 << S) | 1] = X[ctx.block.x * 5 :+ (1 << S) | 1]
  Y[ctx.block.x * 5 :+ 40 >> 3] = t * 2.0
}
"""
    mod = tilenb.compile(src, backend="cpu")
    assert mod.k.ir(S=2).params is not None
    X = np.arange(24, dtype=np.float32)   # 5 tiles of 5, the last one ragged
    Y = np.zeros_like(X)
    mod.k[5](X, Y)
    np.testing.assert_array_equal(Y, X * 2)
