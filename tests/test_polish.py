"""Rough edges a user ran into, each with what the user should see now: a TileError that says
what is wrong (not a misleading one, and never silence), views whose labels are true, and a
CPU launch that refuses to run for hours instead of showing no sign of life."""
import json
import re
import shutil
import subprocess

import numpy as np
import pytest

import tilenb


def compile_error(src):
    with pytest.raises(tilenb.TileError) as e:
        tilenb.compile(src, backend="cpu")
    return e.value


# ---- 1. @grid over a tensor ----------------------------------------------------------------
@pytest.mark.parametrize("grid, column", [("X", 7), ("X[0]", 7), ("cdiv(M, X)", 15)])
def test_grid_over_a_tensor_says_what_grid_takes_and_that_it_is_a_tensor(grid, column):
    """It said "'X' is not defined", though X is a parameter of the kernel."""
    e = compile_error(f"@grid({grid})\nkernel k(X: tensor<f32>[M], n: i32) {{\n  X[0] = 1.0\n}}\n")
    assert isinstance(e, tilenb.TileRuleError)
    assert (e.line, e.column) == (1, column)
    assert "not defined" not in e.message
    assert ("@grid takes expressions over runtime dimensions, @autotune names and scalar parameters"
            in e.message)
    assert "'X' is a tensor" in e.message


def test_grid_over_dimensions_and_scalars_still_launches():
    mod = tilenb.compile("@grid(cdiv(M, 32) + n)\nkernel k(X: tensor<f32>[M], n: i32) {\n"
                         "  X[ctx.block.x] = 1.0\n}\n", backend="cpu")
    x = np.zeros(100, np.float32)
    mod.k(x, 2)
    assert mod.k.last_run.grid == (6, 1, 1)
    np.testing.assert_array_equal(x, np.r_[np.ones(6), np.zeros(94)].astype(np.float32))
