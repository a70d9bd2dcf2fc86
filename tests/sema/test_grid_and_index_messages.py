"""Messages of the checker at edges users met: @grid over a tensor says what @grid takes and that
the name is a tensor (not "not defined"); a constant element index outside a tile is a shape
error at that index, naming the dimension and its range; the valid neighbours still compile and
launch."""
import numpy as np
import pytest

import tilenb


def compile_error(src):
    with pytest.raises(tilenb.TileError) as e:
        tilenb.compile(src, backend="cpu")
    return e.value


# ---- @grid over a tensor ----------------------------------------------------------------
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


# ---- a constant element index outside a tile --------------------------------------------
@pytest.mark.parametrize("shape, use, column, index, dim, extent", [
    ("[32]", "let v = t[99999999999999]", 13, 99999999999999, 0, 32),
    ("[32, 32]", "let v = t[40, 0]", 13, 40, 0, 32),
    ("[32, 32]", "let v = t[0, -1]", 16, -1, 1, 32),
    ("[32, 32]", "t[0, 32] = 1.0", 8, 32, 1, 32),
    ("[4, 8]", "let v = flat(t)[0, 32]", 22, 32, 1, 32),
])
def test_a_constant_element_index_outside_a_tile_is_a_shape_error_there(shape, use, column, index, dim, extent):
    e = compile_error(f"kernel k(X: tensor<f32>[N]) {{\n  var t: tile<f32>{shape} = 0.0\n  {use}\n"
                      f"  X[0] = t[0{', 0' if ',' in shape else ''}]\n}}\n")
    assert isinstance(e, tilenb.TileShapeError)
    assert (e.line, e.column) == (3, column)
    assert (f"the index {index} is outside tile 't': dimension {dim} has the extent {extent}, "
            f"so its indices run from 0 to {extent - 1}") in e.message


def test_element_indices_inside_a_tile_and_past_a_tensor_are_accepted():
    """The last element of a tile is fine; a tensor is runtime-sized, so its constant indices
    stay unchecked until a launch (and past its end they are masked)."""
    mod = tilenb.compile("kernel k(X: tensor<f32>[N], Y: tensor<f32>[N]) {\n"
                         "  var t: tile<f32>[3, 5] = 0.0\n  t[2, 4] = 7.0\n"
                         "  Y[0] = t[2, 4] + X[1000000]\n}\n", backend="cpu")
    y = np.zeros(8, np.float32)
    mod.k[1](np.ones(8, np.float32), y)
    assert y[0] == 7.0
