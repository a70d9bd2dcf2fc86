"""A tensor passed where a kernel takes a scalar (an argument missing or out of order) is refused
naming the parameter, the array's shape and dtype, on one line: never the array's elements."""
import numpy as np
import pytest

import tilenb
from tilenb import LaunchError

SRC = """
@launch(32)
kernel k(X: tensor<f32>[M, 32], Y: tensor<f32>[M, 32], s: f32) {
  Y[ctx.block.x * 8 :+ 8, :] = X[ctx.block.x * 8 :+ 8, :] * s
}
"""


@pytest.mark.parametrize("shape", [(21, 32), (1,), (3, 1, 2)])
def test_an_array_for_a_scalar_names_its_shape_and_dtype_not_its_elements(shape):
    mod = tilenb.compile(SRC, backend="cpu")
    X = np.full((21, 32), 7.25, np.float32)
    Y = np.zeros_like(X)
    with pytest.raises(LaunchError) as info:
        mod.k[3](X, Y, np.full(shape, 7.25, np.float32))
    text = str(info.value)
    assert f"argument 's' (f32) must be a number, not ndarray of shape {shape} and dtype float32" in text, text
    assert "\n" not in text and "7.25" not in text, text


def test_a_numpy_scalar_and_a_0d_array_are_still_numbers():
    mod = tilenb.compile(SRC, backend="cpu")
    X = np.arange(21 * 32, dtype=np.float32).reshape(21, 32)
    for s in (np.float32(0.5), np.array(0.5, np.float32)):
        Y = np.zeros_like(X)
        mod.k[3](X, Y, s)
        np.testing.assert_array_equal(Y, X * np.float32(0.5))
