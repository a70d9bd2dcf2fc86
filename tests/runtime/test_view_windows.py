"""Windows of a `let` view at a start known only at run time (spec 6, windows): the part of the
window outside the view reads as 0 and is invalid, exactly like the part outside a tensor's edge,
on both backends. The fuzzer's finding F5 (tests/fuzz/FINDINGS.md): the generated CUDA lowered a
window of a view to a window of the tensor and bounded it by the tensor's extent only, so it read
(and stored) the tensor's elements past the view. Expected values are computed here with numpy;
the CPU executor and the generated CUDA (run by tests/support/cuda_emulator.py without a GPU, and on a
GPU with the `gpu` marker) must both agree with them.
"""
import textwrap

import numpy as np
import pytest

import tilenb

from support import cuda_emulator as EMU
from support.cuda_emulator import needs_gxx
from support.windows import store, window

SENT = np.float32(-7.0)

# the reduced reproducer of F5: columns of a view of a tensor
REPRO = """
@launch(32)
kernel viewwin(X: tensor<f32>[4, 16], Y: tensor<f32>[1, 8], s: i32) {
  let v = X[0 :+ 2, 0 :+ 8]
  Y[0 :+ 1, 0 :+ 8] = v[0 :+ 1, s :+ 8]
}
"""

# rows and columns, a view the tensor's edge may cut, a view of a view, and a store through a view
VIEWS = """
@launch(32)
kernel vw(X: tensor<f32>[M, N], Y: tensor<f32>[3, 8], Z: tensor<f32>[2, 4], W: tensor<f32>[M, N], s: i32, r: i32) {
  let v = X[1 :+ 3, 2 :+ 8]
  Y[0 :+ 3, 0 :+ 8] = v[0 :+ 3, s :+ 8]
  let u = v[r :+ 2, 0 :+ 8]
  Z[0 :+ 2, 0 :+ 4] = u[0 :+ 2, s :+ 4] + 1.0
  let w = W[1 :+ 3, 2 :+ 8]
  w[r :+ 2, s :+ 8] = v[r :+ 2, s :+ 8] * 2.0
}
"""


def views_reference(X, s, r):
    M, N = X.shape
    a, oka = window(X, (0, s), (3, 8), view=((1, 2), (3, 8)))
    Y = store(np.full((3, 8), SENT, np.float32), (0, 0), a, oka)
    # u = v[r :+ 2, :] is v's rows r, r + 1 (clipped to v); u[0 :+ 2, s :+ 4] is inside u's rows
    b, okb = window(X, (r, s), (2, 4), view=((1, 2), (3, 8)))
    Z = store(np.full((2, 4), SENT, np.float32), (0, 0), b + np.float32(1), okb)
    c, okc = window(X, (r, s), (2, 8), view=((1, 2), (3, 8)))
    # the store lands only inside w (rows [1, 4), columns [2, 10) of W) and inside W
    okw = np.array([[0 <= r + i < 3 and 0 <= s + j < 8 for j in range(8)] for i in range(2)])
    W = store(np.full((M, N), SENT, np.float32), (1 + r, 2 + s), c * np.float32(2), okc & okw)
    return Y, Z, W


# (M, N, s, r): starts inside, running outside past the end, and negative; a view cut by X's edge
CASES = [(5, 12, 0, 0), (5, 12, 3, 1), (5, 12, 4, 2), (5, 12, -2, -1), (5, 12, 9, 3), (3, 8, 1, 1),
         (3, 8, -3, 0), (6, 16, 6, -2)]
REPRO_STARTS = [0, 4, -3, 8, 2]


def _compile(src, backend):
    return tilenb.compile(textwrap.dedent(src).lstrip("\n"), backend=backend, filename="k.tile")


def _views_args(M, N):
    X = np.random.default_rng(M * 31 + N).uniform(-4, 4, (M, N)).astype(np.float32)
    return X, [np.full((3, 8), SENT, np.float32), np.full((2, 4), SENT, np.float32),
               np.full((M, N), SENT, np.float32)]


def _repro_args():
    return np.arange(64, dtype=np.float32).reshape(4, 16), np.full((1, 8), SENT, np.float32)


def _repro_reference(X, s):
    a, ok = window(X, (0, s), (1, 8), view=((0, 0), (2, 8)))
    return store(np.full((1, 8), SENT, np.float32), (0, 0), a, ok)


def test_the_reference_of_the_reproducer():
    """The finding's own numbers: columns 8 to 11 lie outside the view."""
    X, _ = _repro_args()
    np.testing.assert_array_equal(_repro_reference(X, 4)[0], [4, 5, 6, 7, -7, -7, -7, -7])


@pytest.mark.parametrize("s", REPRO_STARTS)
def test_reproducer_on_the_cpu_executor(s):
    X, Y = _repro_args()
    _compile(REPRO, "cpu").viewwin[1](X, Y, s)
    np.testing.assert_array_equal(Y, _repro_reference(X, s))


@needs_gxx
@pytest.mark.parametrize("s", REPRO_STARTS)
def test_reproducer_in_the_generated_cuda(s, tmp_path):
    X, Y = _repro_args()
    EMU.run_source(REPRO, "viewwin", [X, Y, s], {}, tmp_path)
    np.testing.assert_array_equal(Y, _repro_reference(X, s))


@pytest.mark.parametrize("M,N,s,r", CASES)
def test_view_windows_on_the_cpu_executor(M, N, s, r):
    X, outs = _views_args(M, N)
    _compile(VIEWS, "cpu").vw[1](X, *outs, s, r)
    for got, want in zip(outs, views_reference(X, s, r)):
        np.testing.assert_array_equal(got, want)


@needs_gxx
@pytest.mark.parametrize("M,N,s,r", CASES)
def test_view_windows_in_the_generated_cuda(M, N, s, r, tmp_path):
    X, outs = _views_args(M, N)
    EMU.run_source(VIEWS, "vw", [X, *outs, s, r], {"M": M, "N": N}, tmp_path)
    for got, want in zip(outs, views_reference(X, s, r)):
        np.testing.assert_array_equal(got, want)


# ---- the same on a GPU (marker `gpu`: skipped without one) ---------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("s", REPRO_STARTS)
def test_reproducer_on_the_gpu(s):
    X, Y = _repro_args()
    _compile(REPRO, "cuda").viewwin[1](X, Y, s)
    np.testing.assert_array_equal(Y, _repro_reference(X, s))


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,s,r", CASES)
def test_view_windows_on_the_gpu(M, N, s, r):
    X, outs = _views_args(M, N)
    _compile(VIEWS, "cuda").vw[1](X, *outs, s, r)
    for got, want in zip(outs, views_reference(X, s, r)):
        np.testing.assert_array_equal(got, want)
