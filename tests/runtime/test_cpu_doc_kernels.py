"""Kernels a newcomer writes from the README and docs/spec.md alone, run on the CPU executor at
shapes that are not multiples of the tile sizes (70 rows, 1 row, rows shorter than one tile)
and compared with numpy: row softmax, layernorm, transpose, a 1-D stencil with a halo, a
histogram with atomic_add, an @autotune GEMM (every variant), and bf16 inputs. The `gpu` cases
run the same kernels on the CUDA backend, held to the same numpy references."""
import math

import numpy as np
import pytest

import tilenb

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = ml_dtypes.bfloat16

SRC = r"""
// one CTA per 4 rows; a row (length N <= 128) fits one 128-wide tile, the rest is masked
@launch(128)
kernel softmax(X: tensor<f32>[M, N], Y: tensor<f32>[M, N]) {
  let r = ctx.block.x * 4
  var x = X[r :+ 4, 0 :+ 128]
  var p = exp(x - rowmax(x))
  Y[r :+ 4, 0 :+ 128] = p / rowsum(p)
}

@launch(256)
kernel layernorm(X: tensor<f32>[M, N], G: tensor<f32>[N], B: tensor<f32>[N], Y: tensor<f32>[M, N], eps: f32) {
  let r = ctx.block.x * 2
  var x = X[r :+ 2, 0 :+ 256]
  var d = x - rowsum(x) / f32(N)
  var inv = rsqrt(rowsum(d * d) / f32(N) + eps)
  Y[r :+ 2, 0 :+ 256] = d * inv * G[0 :+ 256] + B[0 :+ 256]
}

@launch(128)
@grid(cdiv(N, 32), cdiv(M, 32))
kernel transpose32(X: tensor<f32>[M, N], Y: tensor<f32>[N, M]) {
  let bm = ctx.block.y * 32
  let bn = ctx.block.x * 32
  var t = X[bm :+ 32, bn :+ 32]
  Y[bn :+ 32, bm :+ 32] = transpose(t)
}

// y[i] = x[i-1] + 2 x[i] + x[i+1], zero outside: the halo tile is filled with 0 first and the
// slice stored into a window of it, so the elements outside X stay valid zeros (section 8)
@launch(128)
@grid(cdiv(N, 128))
kernel stencil(X: tensor<f32>[N], Y: tensor<f32>[N]) {
  let b = ctx.block.x * 128
  var h: tile<f32>[130] = 0.0
  h[0 :+ 130] = X[b - 1 :+ 130]
  Y[b :+ 128] = h[0 :+ 128] + 2.0 * h[1 :+ 128] + h[2 :+ 128]
}

// the same stencil straight from the slice: the halo elements outside X are invalid, so the
// outputs next to the ends are left as they were (rules 1, 4 and 9 of section 8)
@launch(128)
@grid(cdiv(N, 128))
kernel stencil_masked(X: tensor<f32>[N], Y: tensor<f32>[N]) {
  let b = ctx.block.x * 128
  var h = X[b - 1 :+ 130]
  Y[b :+ 128] = h[0 :+ 128] + 2.0 * h[1 :+ 128] + h[2 :+ 128]
}

@launch(256)
@grid(cdiv(N, 256))
kernel histogram(V: tensor<i32>[N], H: tensor<i32>[NB]) {
  let i = ctx.block.x * 256 + ctx.thread
  if i < N {
    atomic_add(H[V[i]], 1)
  }
}

@autotune(TM in [32, 64], TN in [32, 64], TK in [16, 32])
@grid(cdiv(M, TM), cdiv(N, TN))
@launch(128)
kernel gemm(A: tensor<f32>[M, K], B: tensor<f32>[K, N], C: tensor<f32>[M, N]) {
  var acc: tile<f32>[TM, TN] = 0.0
  for k in range(0, K, TK) {
    let a = A[ctx.block.x * TM :+ TM, k :+ TK]
    let b = B[k :+ TK, ctx.block.y * TN :+ TN]
    acc += dot(a, b)
  }
  C[ctx.block.x * TM :+ TM, ctx.block.y * TN :+ TN] = acc
}

@autotune(TM in [32], TN in [32], TK in [32])
@grid(cdiv(M, TM), cdiv(N, TN))
kernel bf16_gemm(A: tensor<bf16>[M, K], B: tensor<bf16>[K, N], C: tensor<bf16>[M, N], D: tensor<f32>[M, N]) {
  var acc: tile<f32>[TM, TN] = 0.0
  for k in range(0, K, TK) {
    var a = A[ctx.block.x * TM :+ TM, k :+ TK]
    var b = B[k :+ TK, ctx.block.y * TN :+ TN]
    acc += dot(a, b)
  }
  C[ctx.block.x * TM :+ TM, ctx.block.y * TN :+ TN] = acc
  D[ctx.block.x * TM :+ TM, ctx.block.y * TN :+ TN] = acc
}

@launch(64)
kernel bf16_axpb(X: tensor<bf16>[M, N], Y: tensor<bf16>[M, N], s: f32) {
  let r = ctx.block.x
  Y[r :+ 1, 0 :+ 64] = X[r :+ 1, 0 :+ 64] * s + 1.0
}
"""


@pytest.fixture(scope="module", params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def mod(request):
    """The kernels on the CPU executor, and (with a GPU) the same kernels on the CUDA backend."""
    return tilenb.compile(SRC, backend=request.param)


@pytest.fixture
def rng():
    return np.random.default_rng(2024)


@pytest.mark.parametrize("m,n", [(70, 100), (1, 4), (1, 128), (5, 12), (9, 128)])
def test_row_softmax(mod, rng, m, n):
    x = (rng.standard_normal((m, n)) * 3).astype(np.float32)
    y = np.full_like(x, np.nan)
    mod.softmax[(m + 3) // 4](x, y)
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("m,n", [(70, 100), (1, 4), (3, 256), (7, 252)])
def test_layernorm(mod, rng, m, n):
    x = rng.standard_normal((m, n)).astype(np.float32)
    g = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    y = np.full_like(x, np.nan)
    mod.layernorm[(m + 1) // 2](x, g, b, y, 1e-5)
    x64 = x.astype(np.float64)
    ref = (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + 1e-5) * g + b
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("m,n", [(72, 100), (4, 4), (36, 40), (100, 4), (4, 68)])
def test_transpose(mod, rng, m, n):
    x = rng.standard_normal((m, n)).astype(np.float32)
    y = np.full((n, m), np.nan, np.float32)
    mod.transpose32(x, y)
    np.testing.assert_array_equal(y, x.T)


def _stencil_ref(x):
    p = np.pad(x.astype(np.float64), 1)
    return p[:-2] + 2 * p[1:-1] + p[2:]


@pytest.mark.parametrize("n", [4, 128, 132, 300])
def test_stencil_with_zero_halo(mod, rng, n):
    x = rng.standard_normal(n).astype(np.float32)
    y = np.full_like(x, np.nan)
    mod.stencil(x, y)
    np.testing.assert_allclose(y, _stencil_ref(x), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n", [4, 128, 300])
def test_stencil_straight_from_slice_leaves_the_two_end_outputs(mod, rng, n):
    """What section 8 says, spelled out: out-of-range halo elements are invalid, an elementwise
    result is valid where all its operands are, and a store writes valid elements only."""
    x = rng.standard_normal(n).astype(np.float32)
    y = np.full_like(x, 99.0)
    mod.stencil_masked(x, y)
    ref = _stencil_ref(x)
    np.testing.assert_allclose(y[1:-1], ref[1:-1], rtol=1e-6, atol=1e-6)
    assert y[0] == 99.0 and y[-1] == 99.0


@pytest.mark.parametrize("n,nb", [(1000, 16), (4, 4), (260, 8)])
def test_histogram_atomic_add(mod, rng, n, nb):
    v = rng.integers(0, nb, n).astype(np.int32)
    h = np.zeros(nb, np.int32)
    mod.histogram(v, h)
    np.testing.assert_array_equal(h, np.bincount(v, minlength=nb))


@pytest.mark.parametrize("m,n,k", [(70, 132, 20), (1, 4, 4), (65, 68, 100)])
def test_gemm_every_autotune_variant(mod, rng, m, n, k):
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    ref = a.astype(np.float64) @ b
    space = mod.gemm.tune_space
    for tm in space["TM"]:
        for tn in space["TN"]:
            for tk in space["TK"]:
                c = np.full((m, n), np.nan, np.float32)
                mod.gemm(a, b, c, variant={"TM": tm, "TN": tn, "TK": tk})
                np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-4 * math.sqrt(k))
    c = np.zeros((m, n), np.float32)
    mod.gemm(a, b, c)                       # no variant: the CPU backend picks one and says so
    np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-4 * math.sqrt(k))
    assert "variant" in str(mod.gemm.last_run)


@pytest.mark.parametrize("m,n,k", [(37, 40, 52), (1, 4, 4)])
def test_bf16_gemm(mod, rng, m, n, k):
    a = rng.standard_normal((m, k)).astype(BF16)
    b = rng.standard_normal((k, n)).astype(BF16)
    c = np.zeros((m, n), BF16)
    d = np.zeros((m, n), np.float32)
    mod.bf16_gemm(a, b, c, d)
    ref = a.astype(np.float64) @ b.astype(np.float64)      # bf16 products are exact in f32
    np.testing.assert_allclose(d, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(c.astype(np.float32), d.astype(BF16).astype(np.float32))


def test_bf16_elementwise_rows_shorter_than_the_tile(mod, rng):
    x = rng.standard_normal((5, 60)).astype(BF16)
    y = np.zeros_like(x)
    mod.bf16_axpb[5](x, y, 0.5)
    ref = (x.astype(np.float32) * np.float32(0.5) + np.float32(1)).astype(BF16)
    np.testing.assert_array_equal(y.astype(np.float32), ref.astype(np.float32))
