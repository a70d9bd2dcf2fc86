"""Stores and tile assignments whose value has extent 1 along a dimension the target is wider in
(spec 6, broadcasting): a slice of one column or one element, or an elementwise expression of
such slices, is repeated along that dimension. The fuzzer's finding F1 (tests/fuzz/FINDINGS.md):
the generated CUDA's vector sweep read the value at the target's own column (consecutive
elements) instead of column 0. Every expected value is computed here with numpy, at shapes that
leave the windows partly outside their tensors; the CPU executor and the generated CUDA (run by
tests/support/cuda_emulator.py without a GPU, and on a GPU with the `gpu` marker) must both agree.
"""
import textwrap

import numpy as np
import pytest

import tilenb

from support import cuda_emulator as EMU
from support.cuda_emulator import needs_gxx
from support.windows import store, window

SENT = np.float32(-7.0)

# the reduced reproducer of F1 and its neighbours: 2-D, a column slice of a tensor and of a tile
COLUMN = """
@launch(32)
kernel col(X: tensor<f32>[M, N], Y: tensor<f32>[M, N], Z: tensor<f32>[M, N], W: tensor<f32>[M, N], r: i32) {
  Y[0 :+ 4, 0 :+ 8] = X[0 :+ 4, 3 :+ 1]
  var t = X[r :+ 4, 0 :+ 8]
  Z[r :+ 4, 0 :+ 8] = t[0 :+ 4, 3 :+ 1] * 2.0
  let v = t[0 :+ 4, 3 :+ 1]
  W[0 :+ 4, 0 :+ 8] = v
}
"""

# 1-D: one element of a tile broadcast along a row of 16
ELEMENT = """
@launch(32)
kernel elt(X: tensor<f32>[N], A: tensor<f32>[N], B: tensor<f32>[N], C: tensor<f32>[N]) {
  var u = X[0 :+ 16]
  A[0 :+ 16] = u[3 :+ 1]
  B[0 :+ 16] = u[3 :+ 1] + 1.0
  var w: tile<f32>[16] = u[3 :+ 1]
  C[0 :+ 16] = w
}
"""


def column_reference(X, r):
    M, N = X.shape
    full = np.full((M, N), SENT, np.float32)
    c, okc = window(X, (0, 3), (4, 1))
    Y = store(full, (0, 0), np.broadcast_to(c, (4, 8)), np.broadcast_to(okc, (4, 8)))
    t, okt = window(X, (r, 0), (4, 8))
    Z = store(full, (r, 0), np.broadcast_to(t[:, 3:4] * np.float32(2), (4, 8)), np.broadcast_to(okt[:, 3:4], (4, 8)))
    W = store(full, (0, 0), np.broadcast_to(t[:, 3:4], (4, 8)), np.broadcast_to(okt[:, 3:4], (4, 8)))
    return Y, Z, W


def element_reference(X):
    N = X.shape[0]
    full = np.full(N, SENT, np.float32)
    u, oku = window(X, (0,), (16,))
    one, ok1 = np.full(16, u[3], np.float32), np.full(16, oku[3])
    return store(full, (0,), one, ok1), store(full, (0,), one + np.float32(1), ok1), store(full, (0,), one, ok1)


COLUMN_CASES = [(5, 12, 0), (3, 4, 0), (7, 8, 2), (6, 20, -1)]   # row lengths: multiples of 4 (spec 8)
ELEMENT_CASES = [12, 20, 4]


def _column_args(M, N):
    X = np.random.default_rng(M * 31 + N).uniform(-4, 4, (M, N)).astype(np.float32)
    return X, [np.full((M, N), SENT, np.float32) for _ in range(3)]


def _compile(src, backend):
    return tilenb.compile(textwrap.dedent(src).lstrip("\n"), backend=backend, filename="k.tile")


@pytest.mark.parametrize("M,N,r", COLUMN_CASES)
def test_column_broadcast_on_the_cpu_executor(M, N, r):
    X, outs = _column_args(M, N)
    _compile(COLUMN, "cpu").col[1](X, *outs, r)
    for got, want in zip(outs, column_reference(X, r)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("N", ELEMENT_CASES)
def test_element_broadcast_on_the_cpu_executor(N):
    X = np.random.default_rng(N).uniform(-4, 4, N).astype(np.float32)
    outs = [np.full(N, SENT, np.float32) for _ in range(3)]
    _compile(ELEMENT, "cpu").elt[1](X, *outs)
    for got, want in zip(outs, element_reference(X)):
        np.testing.assert_array_equal(got, want)


@needs_gxx
@pytest.mark.parametrize("M,N,r", COLUMN_CASES)
def test_column_broadcast_in_the_generated_cuda(M, N, r, tmp_path):
    X, outs = _column_args(M, N)
    EMU.run_source(COLUMN, "col", [X, *outs, r], {"M": M, "N": N}, tmp_path)
    for got, want in zip(outs, column_reference(X, r)):
        np.testing.assert_array_equal(got, want)


@needs_gxx
@pytest.mark.parametrize("N", ELEMENT_CASES)
def test_element_broadcast_in_the_generated_cuda(N, tmp_path):
    X = np.random.default_rng(N).uniform(-4, 4, N).astype(np.float32)
    outs = [np.full(N, SENT, np.float32) for _ in range(3)]
    EMU.run_source(ELEMENT, "elt", [X, *outs], {"N": N}, tmp_path)
    for got, want in zip(outs, element_reference(X)):
        np.testing.assert_array_equal(got, want)


def test_the_broadcast_operand_is_not_read_with_vectors():
    """The analysis' plan of the F1 store: the destination moves 4-element vectors, the
    one-column operand (column stride 0) element by element; the generator reads that plan."""
    mod = _compile(COLUMN, "cpu")
    sp = next(p for p in mod.col.analysis().statements if p.kind == "tile" and p.line == 3)
    dest, src = sp.accesses[0], sp.access_of(sp.stmt.value)
    assert sp.vector_width > 1 and dest.vector == sp.vector_width
    assert src.broadcast_along_row and src.vector == 1


# ---- the same on a GPU (marker `gpu`: skipped without one) ---------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("M,N,r", COLUMN_CASES)
def test_column_broadcast_on_the_gpu(M, N, r):
    X, outs = _column_args(M, N)
    _compile(COLUMN, "cuda").col[1](X, *outs, r)
    for got, want in zip(outs, column_reference(X, r)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.gpu
@pytest.mark.parametrize("N", ELEMENT_CASES)
def test_element_broadcast_on_the_gpu(N):
    X = np.random.default_rng(N).uniform(-4, 4, N).astype(np.float32)
    outs = [np.full(N, SENT, np.float32) for _ in range(3)]
    _compile(ELEMENT, "cuda").elt[1](X, *outs)
    for got, want in zip(outs, element_reference(X)):
        np.testing.assert_array_equal(got, want)
