"""Launch messages a newcomer met: a tensor passed where a kernel takes a scalar (an argument
missing or out of order) is refused naming the parameter, the array's shape and dtype, on one
line, never the array's elements; an extent that no @autotune variant takes lists the extents
the variants take."""
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


MIXED = """
@autotune(D in [64, 128], T in [8, 16])
@launch(128)
kernel k(X: tensor<f32>[M, D], W: tensor<f32>[4, D]) {
  X[ctx.block.x * T :+ T, :] = X[ctx.block.x * T :+ T, :] + W[0 :+ 1, :]
}
"""


def test_an_extent_no_variant_takes_lists_the_extents_the_variants_take():
    """Every variant refuses the same dimension: the message says every extent some variant
    takes, not that the first variant's is the one it 'must be'."""
    mod = tilenb.compile(MIXED, backend="cpu")
    X, W = np.ones((19, 96), np.float32), np.ones((4, 96), np.float32)
    with pytest.raises(LaunchError) as info:
        mod.k[3](X, W)
    assert str(info.value).endswith("kernel 'k': dimension 1 of 'X' (tensor<f32>[M, D]) is 96; the @autotune "
                                    "variants take 64 or 128 (D in [64, 128])"), str(info.value)
    with pytest.raises(LaunchError) as info:                  # different faults: the first, as before
        mod.k[3](np.ones((19, 64), np.float32), np.ones((5, 128), np.float32))
    assert "(no @autotune variant fits these arguments)" in str(info.value)
    X, W = np.arange(19 * 128, dtype=np.float32).reshape(19, 128), np.full((4, 128), 0.5, np.float32)
    Y = X.copy()
    mod.k[3](Y, W)                                            # D=128, T=8: rows 0..18 of 3 CTAs
    np.testing.assert_array_equal(Y, X + 0.5)
