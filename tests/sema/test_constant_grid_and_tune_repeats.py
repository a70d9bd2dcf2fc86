"""Two attribute mistakes the checker now refuses where they are written (spec 15.1):

- an @grid entry that is a constant below 1 (`@grid(0)`, `@grid(4 - 4)`, `@grid(T - 64)` in the
  variant T=64) was accepted and refused only at each launch; it is a TileRuleError at the
  entry's file:line:col, naming the axis. An entry over runtime dimensions stays a launch check.
- a repeated @autotune value (`T in [8, 8]`) was silently dropped; it is a TileRuleError at the
  repeat naming the parameter and the value.

The neighbours that are right still compile and launch, against numpy at a length that is not a
multiple of the tile."""
import numpy as np
import pytest

import tilenb
from tilenb import LaunchError

BODY = ("kernel k(X: tensor<f32>[N], Y: tensor<f32>[N]) {\n"
        "  let i = ctx.block.x * 64\n"
        "  Y[i :+ 64] = X[i :+ 64] * f32(T)\n"
        "}\n")


def _src(grid: str, tune: str = "[64, 128]") -> str:
    return f"@autotune(T in {tune})\n@launch(64)\n@grid({grid})\n" + BODY


def _error(src):
    with pytest.raises(tilenb.TileError) as e:
        tilenb.compile(src, backend="cpu", filename="attrs.tile")
    return e.value


@pytest.mark.parametrize("grid, column, axis, value", [
    ("0", 7, "x", 0), ("4 - 4", 7, "x", 0), ("-1", 7, "x", -1), ("cdiv(N, 64), 0", 20, "y", 0),
    ("1, 1, 2 * 0", 13, "z", 0), ("T - 64", 7, "x", 0),
])
def test_a_constant_grid_entry_below_one_is_refused_at_it(grid, column, axis, value):
    e = _error(_src(grid))
    assert isinstance(e, tilenb.TileRuleError)
    assert (e.line, e.column) == (3, column)
    assert f"attrs.tile:3:{column}:" in str(e)
    assert f"@grid gives {value} CTAs along {axis}" in e.message
    if "T" in grid:
        assert "T=64" in str(e)


def test_a_grid_over_dimensions_is_still_checked_at_launch():
    mod = tilenb.compile(_src("cdiv(N, 64) - 1", "[3]"), backend="cpu")
    X = np.arange(20, dtype=np.float32)
    with pytest.raises(LaunchError, match="its @grid gives 0 CTAs along x"):
        mod.k(X, np.zeros_like(X))


def test_the_right_grid_launches():
    mod = tilenb.compile(_src("cdiv(N, 64)", "[3, 5]"), backend="cpu")
    X = np.random.default_rng(1).standard_normal(148).astype(np.float32)
    Y = np.zeros_like(X)
    mod.k(X, Y, variant={"T": 5})
    np.testing.assert_array_equal(Y, X * np.float32(5))


@pytest.mark.parametrize("values, column, value", [("[8, 8]", 20, 8), ("[4, 8, 2 * 4]", 23, 8),
                                                   ("[1, 2, 3, 2]", 26, 2)])
def test_a_repeated_autotune_value_is_refused_at_the_repeat(values, column, value):
    e = _error(f"@autotune(T in {values})\n@launch(64)\n" + BODY)
    assert isinstance(e, tilenb.TileRuleError)
    assert (e.line, e.column) == (1, column)
    assert f"attrs.tile:1:{column}:" in str(e)
    assert "'T'" in e.message and f"the value {value} twice" in e.message


def test_distinct_autotune_values_still_make_one_variant_each():
    mod = tilenb.compile("@autotune(T in [2, 3], U in [1])\n@launch(64)\n" + BODY, backend="cpu")
    X = np.random.default_rng(2).standard_normal(68).astype(np.float32)
    for t in (2, 3):
        Y = np.zeros_like(X)
        mod.k[2](X, Y, variant={"T": t, "U": 1})
        np.testing.assert_array_equal(Y, X * np.float32(t))
