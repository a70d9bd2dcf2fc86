"""A chain of functions each calling the next, too long for the checker to inline, is an error at
the kernel's call that starts it, naming the chain; not 'this statement nests too deeply' at 1:1
(the first function's line, which nests nothing)."""
import numpy as np
import pytest

import tilenb
from tilenb import TileError


def chain(n):
    fns = "\n".join(f"fn g{i}(x) = g{i - 1}(x) + 1.0" if i else "fn g0(x) = x" for i in range(n))
    return fns + (f"\n@launch(32)\nkernel k(X: tensor<f32>[M, 32], Y: tensor<f32>[M, 32]) {{\n"
                  f"  Y[0 :+ 8, :] = g{n - 1}(X[0 :+ 8, :])\n}}\n"), n + 3


def test_a_too_long_chain_is_named_at_the_call_that_starts_it():
    src, line = chain(400)
    with pytest.raises(TileError) as info:
        tilenb.compile(src, backend="cpu")
    e = info.value
    assert (e.line, e.column) == (line, 18), str(e)
    assert e.message.startswith("this call inlines 400 functions inside one another "
                                "(g399 -> g398 -> g397 -> g396 -> ... -> g0)"), e.message


def test_a_chain_the_checker_can_inline_still_runs():
    src, _ = chain(20)
    mod = tilenb.compile(src, backend="cpu")
    X = np.arange(11 * 32, dtype=np.float32).reshape(11, 32)
    Y = np.zeros_like(X)
    mod.k[1](X, Y)
    np.testing.assert_array_equal(Y[:8], X[:8] + 19)
    np.testing.assert_array_equal(Y[8:], 0)
