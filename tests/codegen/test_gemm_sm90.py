"""GEMM loops lowered to TMA + wgmma on sm_90 (tilenb/codegen/sm90/gemm.py).

Without a GPU: which loops take the lowering, and that the generated CUDA compiles with NVRTC
for sm_90a. On a GPU (marked `gpu`; the lowering runs only on compute capability 9.0): the
results against numpy at shapes that are not multiples of the tiles, for both the tensor-map
path and the bounds-checked copy path (a row stride that is not a multiple of 16 bytes), a
transposed B, a batched (3-D) operand, `var` tiles and an accumulator that starts non-zero.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tilenb
from tilenb.codegen import generate
from tilenb.codegen.nvrtc import nvrtc_available, nvrtc_compile

GEMM = """
@autotune(TM in [64, 128], TN in [64, 128, 256], TK in [16, 32, 64], NT in [128, 256])
@launch(NT)
@grid(cdiv(M, TM), cdiv(N, TN))
kernel gemm(A: tensor<{T}>[M, K], B: tensor<{T}>[K, N], C: tensor<{T}>[M, N]) {
  var acc: tile<f32>[TM, TN] = 0.0
  for kt in range(0, K, TK) {
    let a = A[ctx.block.x * TM :+ TM, kt :+ TK]
    let b = B[kt :+ TK, ctx.block.y * TN :+ TN]
    acc += dot(a, b)
  }
  C[ctx.block.x * TM :+ TM, ctx.block.y * TN :+ TN] = acc
}
"""

GEMM_T = """
// C = 0.5 (A B^T) + bias, B given as [N, K]; the accumulator starts at the bias;
// the operands are var tiles; the loop starts at K0.
@autotune(TM in [64, 128], TN in [128], TK in [32, 64], NT in [128, 256])
@launch(NT)
@grid(cdiv(M, TM), cdiv(N, TN))
kernel gemm_t(A: tensor<bf16>[M, K], B: tensor<bf16>[N, K], Bias: tensor<f32>[M, N], C: tensor<f32>[M, N], K0: i32) {
  var acc: tile<f32>[TM, TN] = Bias[ctx.block.x * TM :+ TM, ctx.block.y * TN :+ TN] * 2.0
  for kt in range(K0, K, TK) {
    var a = A[ctx.block.x * TM :+ TM, kt :+ TK]
    var b = B[ctx.block.y * TN :+ TN, kt :+ TK]
    acc += dot_t(a, b)
  }
  C[ctx.block.x * TM :+ TM, ctx.block.y * TN :+ TN] = acc * 0.5
}
"""

BATCHED = """
// one GEMM per batch entry: A[b] B[b], operands 3-D with a fixed leading index
@autotune(TM in [64], TN in [128], TK in [64], NT in [128])
@launch(NT)
@grid(cdiv(M, TM), cdiv(N, TN), Bt)
kernel bgemm(A: tensor<f16>[Bt, M, K], B: tensor<f16>[Bt, K, N], C: tensor<f32>[Bt, M, N]) {
  let z = ctx.block.z
  var acc: tile<f32>[TM, TN] = 0.0
  for kt in range(0, K, TK) {
    acc += dot(A[z, ctx.block.x * TM :+ TM, kt :+ TK], B[z, kt :+ TK, ctx.block.y * TN :+ TN])
  }
  C[z, ctx.block.x * TM :+ TM, ctx.block.y * TN :+ TN] = acc
}
"""

NOT_A_GEMM_LOOP = """
@launch(128)
@grid(cdiv(M, 64), cdiv(N, 64))
kernel two(A: tensor<bf16>[M, K], B: tensor<bf16>[K, N], C: tensor<f32>[M, N]) {
  var acc: tile<f32>[64, 64] = 0.0
  for kt in range(0, K, 32) {
    acc += dot(A[ctx.block.x * 64 :+ 64, kt :+ 32], B[kt :+ 32, ctx.block.y * 64 :+ 64])
  }
  acc += dot(A[ctx.block.x * 64 :+ 64, 0 :+ 32], B[0 :+ 32, ctx.block.y * 64 :+ 64])
  C[ctx.block.x * 64 :+ 64, ctx.block.y * 64 :+ 64] = acc
}
"""


def _ks(text, name, arch, **tune):
    mod = tilenb.compile(text, backend="cpu")
    k = getattr(mod, name)
    return generate(k.ir(**tune), mod.checked.source.text, arch=arch)


def test_gemm_loop_lowered_only_for_sm90():
    t = GEMM.replace("{T}", "bf16")
    ks = _ks(t, "gemm", "sm_90", TM=128, TN=128, TK=64, NT=256)
    assert ks.arch == "sm_90a" and [m.tensor for m in ks.tmaps] == ["A", "B"]
    assert "wgmma.mma_async" in ks.source and "cp.async.bulk.tensor" in ks.source
    # a loop start that is not on a 16-byte boundary of K takes the copy path (on the H200 a box
    # starting there stops the kernel with an illegal instruction)
    assert "if (tnb_tma && ((lo" in ks.source and "& 7) == 0" in ks.source
    # B is [K, N] (N contiguous): 64-column boxes of 128-byte swizzled rows; A's rows are TK * 2 bytes
    assert ks.tmaps[0].box == (64, 128) and ks.tmaps[0].swizzle == 128
    assert ks.tmaps[1].box == (64, 64) and ks.tmaps[1].swizzle == 128
    for arch in (None, "sm_80"):
        other = _ks(t, "gemm", arch, TM=128, TN=128, TK=64, NT=256)
        assert other.arch is None and not other.tmaps and "wgmma" not in other.source
    # a 32-row tile is below wgmma's 64: mma.sync stays
    small = _ks(NOT_A_GEMM_LOOP.replace("64", "32"), "two", "sm_90")
    assert small.arch is None


def test_accumulator_with_a_dot_outside_the_loop_keeps_mma_sync():
    ks = _ks(NOT_A_GEMM_LOOP, "two", "sm_90")
    assert ks.arch is None and "wgmma" not in ks.source


@pytest.mark.skipif(not nvrtc_available(), reason="NVRTC is not installed")
@pytest.mark.parametrize("text,name,tune", [
    (GEMM.replace("{T}", "bf16"), "gemm", dict(TM=128, TN=256, TK=64, NT=256)),
    (GEMM.replace("{T}", "f16"), "gemm", dict(TM=64, TN=64, TK=16, NT=128)),
    (GEMM.replace("{T}", "bf16"), "gemm", dict(TM=128, TN=64, TK=32, NT=256)),
    (GEMM_T, "gemm_t", dict(TM=128, TN=128, TK=64, NT=256)),
    (BATCHED, "bgemm", {}),
])
def test_lowered_gemm_compiles_for_sm90a(text, name, tune):
    ks = _ks(text, name, "sm_90", **tune)
    assert ks.arch == "sm_90a"
    assert nvrtc_compile(ks.source, "sm_90a")


# ---- on the GPU -------------------------------------------------------------------------------
def _on_hopper():
    import cupy as cp
    return cp.cuda.Device().compute_capability == "90"


def _bf(x, dt):
    return x.astype(ml_dtypes.bfloat16 if dt == "bf16" else np.float16)


def _ref(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


# (TM, TN, TK, NT): one or two warpgroups, split along M or N, every swizzle span (TK 16/32/64)
VARIANTS = [(128, 128, 64, 256), (128, 256, 64, 256), (64, 64, 16, 128), (128, 64, 32, 256),
            (64, 128, 32, 128), (64, 256, 64, 256)]


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["bf16", "f16"])
@pytest.mark.parametrize("M,N,K", [(200, 328, 136), (130, 72, 1000), (64, 256, 64), (257, 132, 8)])
def test_gemm_matches_numpy_every_variant(dt, M, N, K):
    if not _on_hopper():
        pytest.skip("the wgmma lowering runs on compute capability 9.0 only")
    mod = tilenb.compile(GEMM.replace("{T}", dt), backend="cuda")
    r = np.random.default_rng(M + N + K)
    a, b = _bf(r.standard_normal((M, K)), dt), _bf(r.standard_normal((K, N)), dt)
    want = _ref(a, b)
    for tm, tn, tk, nt in VARIANTS:
        tune = dict(TM=tm, TN=tn, TK=tk, NT=nt)
        c = np.full((M, N), np.nan).astype(a.dtype)      # host arrays: tilenb copies them in and back
        mod.gemm(a, b, c, variant=tune)
        got = c.astype(np.float64)
        err = np.abs(got - want).max() / (np.abs(want).max() + 1e-9)
        tol = 1e-2 if dt == "bf16" else 2e-3
        assert err < tol, (tune, err)


def _variants(k):
    space = k.tune_space
    import itertools
    names = list(space)
    for vals in itertools.product(*(space[n] for n in names)):
        yield dict(zip(names, vals))


@pytest.mark.gpu
@pytest.mark.parametrize("K", [200, 100])   # 100: a 200-byte row stride, no tensor map: the copy path
def test_transposed_b_bias_and_offset_start(K):
    if not _on_hopper():
        pytest.skip("the wgmma lowering runs on compute capability 9.0 only")
    M, N, K0 = 190, 140, 8
    mod = tilenb.compile(GEMM_T, backend="cuda")
    r = np.random.default_rng(K)
    a = r.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
    b = r.standard_normal((N, K)).astype(ml_dtypes.bfloat16)
    bias = r.standard_normal((M, N)).astype(np.float32)
    want = 0.5 * (2.0 * bias.astype(np.float64) + _ref(a[:, K0:], b[:, K0:].T))
    for tune in _variants(mod.gemm_t):
        c = np.full((M, N), np.nan, dtype=np.float32)
        mod.gemm_t(a, b, bias, c, K0, variant=tune)
        got = c
        assert np.abs(got - want).max() / np.abs(want).max() < 1e-2, tune
    assert "sm_90" in str(mod.gemm_t.last_run.extra.get("arch"))


@pytest.mark.gpu
def test_batched_operands_with_a_fixed_index():
    import cupy as cp
    if not _on_hopper():
        pytest.skip("the wgmma lowering runs on compute capability 9.0 only")
    Bt, M, N, K = 3, 100, 200, 72
    mod = tilenb.compile(BATCHED, backend="cuda")
    r = np.random.default_rng(7)
    a = r.standard_normal((Bt, M, K)).astype(np.float16)
    b = r.standard_normal((Bt, K, N)).astype(np.float16)
    c = cp.full((Bt, M, N), np.nan, dtype=cp.float32)
    mod.bgemm(cp.asarray(a), cp.asarray(b), c)
    want = np.einsum("bmk,bkn->bmn", a.astype(np.float64), b.astype(np.float64))
    assert np.abs(cp.asnumpy(c) - want).max() / np.abs(want).max() < 2e-3


def test_sm90_changes_only_gemm_loops_across_the_test_corpus():
    """Generated for sm_90, every kernel of the test suite is the generic code unless it has a
    GEMM loop the lowering takes; those compile for sm_90a."""
    from test_codegen_nvrtc import MAX_VARIANTS, PROGRAM_SOURCES
    lowered = []
    for name, text in sorted(PROGRAM_SOURCES.items()):
        mod = tilenb.compile(text, backend="cpu")
        for k in mod.kernels.values():
            for kir in list(k.checked.variants.values())[:MAX_VARIANTS]:
                ks = generate(kir, text, arch="sm_90")
                if ks.arch is None:
                    assert ks.source == generate(kir, text).source, (name, k.name)
                else:
                    lowered.append((name, ks))
    assert lowered, "the corpus has GEMM loops the lowering takes"
    if nvrtc_available():
        for name, ks in lowered:
            assert nvrtc_compile(ks.source, "sm_90a"), name
