"""Causal attention (tilenb/examples/suite_kernels.py ATTENTION_CAUSAL) on every lowering.

The mask is a tile expression over the score tile, `where(cols(BR, BC, kt) <= rows(BR, BC, row),
dot_t(...), -1.0e30)`, and the loop bound `min(Nk, row + BR)` skips the key blocks wholly above
the diagonal. The alignment is torch's `is_causal`: query i sees key j when j <= i (top left),
so with fewer keys than queries the last queries see every key, and with more keys the keys past
the last query are never seen. What is checked:
- the CPU executor against numpy (float64, from the same bf16 inputs), at query and key lengths
  that are not tile multiples and differ from each other, both ways;
- which lowering each variant takes (streamed attention on wgmma for sm_90 where the rows are
  owned by whole warpgroups, mma.sync elsewhere; the f32 form on the generic path), that the
  index tiles are computed in registers at each fragment element (no shared memory, no
  loads), and that the loop's trip count is the per-CTA bound;
- the generated CUDA compiles with NVRTC for sm_90a (wgmma) and sm_80 (mma.sync, generic);
- the generated CUDA emulated on the CPU (tests/support/cuda_emulator.py for mma.sync and the
  generic path, the TMA / mbarrier / wgmma emulator of test_gemm_sm90_edges.py for sm_90)
  against the CPU executor, so each fragment layout's element -> (row, column) map is the one
  the mask needs;
- GPU tests (marked `gpu`) run the three paths on the device against the CPU executor.
"""
from __future__ import annotations

import math
import re

import ml_dtypes
import numpy as np
import pytest

import tilenb
from tilenb.codegen import generate
from tilenb.codegen.nvrtc import nvrtc_available, nvrtc_compile
from tilenb.examples import suite_kernels as SK

from support import cuda_emulator as EMU  # noqa: E402
from support.cuda_emulator import needs_gxx  # noqa: E402
from test_gemm_sm90_edges import assert_close, build_sm90, run_sm90  # noqa: E402

BF16 = ml_dtypes.bfloat16
needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="needs NVRTC")

# the same kernel in f32: its dots are not tensor-core dots, so it takes the generic path
F32 = SK.ATTENTION_CAUSAL.replace("bf16", "f32").replace(
    "@autotune(BR in [64, 128], BC in [64, 128], D in [64, 128], NT in [128, 256])",
    "@autotune(BR in [16, 32], BC in [16], D in [32], NT in [128])")

STREAMED = dict(BR=64, BC=64, D=64, NT=128)       # sm_90: wgmma; elsewhere mma.sync
MMA_ONLY = dict(BR=64, BC=64, D=64, NT=256)       # 16 rows a warp: mma.sync on every target


def module(text=SK.ATTENTION_CAUSAL):
    return tilenb.compile(text, backend="cpu")


def inputs(H, N, Nk, D, dtype=BF16, seed=0):
    r = np.random.default_rng(seed)
    q, k, v = (r.standard_normal((H, n, D)).astype(dtype) for n in (N, Nk, Nk))
    return [q, k, v, np.full((H, N, D), np.nan, dtype), np.float32(1.0 / math.sqrt(D))]


def run_cpu(kern, args, variant):
    out = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    kern(*out, variant=variant)
    return out


def grid(N, H, variant):
    """The kernel's own grid: heads along x, query blocks along y (the heaviest first)."""
    return (H, -(-N // variant["BR"]))


# ---- the reference executor ---------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(2, 150, 100), (1, 70, 200), (2, 77, 77)],
                         ids=["more_queries", "more_keys", "square_ragged"])
@pytest.mark.parametrize("variant", [STREAMED, dict(BR=128, BC=64, D=64, NT=256)],
                         ids=["64x64", "128x64"])
def test_cpu_causal_attention_matches_numpy(shape, variant):
    H, N, Nk = shape
    args = inputs(H, N, Nk, variant["D"], seed=N + Nk)
    kern = module().attention_causal_bf16
    got = run_cpu(kern, args, variant)[3]
    assert tuple(kern.last_run.grid)[:2] == grid(N, H, variant)
    want = SK.ref_attention(args[0], args[1], args[2], args[4], causal=True)
    assert not np.isnan(got.astype(np.float32)).any()
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-2, atol=2e-2)
    # the mask matters: the same inputs without it differ (every query row but the last Nk ones)
    full = SK.ref_attention(args[0], args[1], args[2], args[4])
    assert np.abs(full - want)[:, :min(N, Nk) - 1].max() > 0.05


def test_cpu_f32_causal_attention_matches_numpy():
    H, N, Nk, D = 2, 45, 37, 32
    args = inputs(H, N, Nk, D, dtype=np.float32, seed=5)
    got = run_cpu(module(F32).attention_causal_f32, args, dict(BR=16, BC=16, D=32, NT=128))[3]
    want = SK.ref_attention(args[0], args[1], args[2], args[4], causal=True)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


# ---- the lowering of each variant ---------------------------------------------------------------
def test_each_path_is_the_one_the_analysis_names():
    k = module().attention_causal_bf16
    assert [lp.lowering for lp in k.analysis(arch="sm_90", **STREAMED).loops] == ["streamed attention on wgmma"]
    assert [lp.lowering for lp in k.analysis(arch=None, **STREAMED).loops] == ["mma.sync"]
    assert [lp.lowering for lp in k.analysis(arch="sm_90", **MMA_ONLY).loops] == ["mma.sync"]
    f = module(F32).attention_causal_f32
    assert [lp.lowering for lp in f.analysis(arch="sm_90", BR=16).loops] == ["generic"]


@pytest.mark.parametrize("arch,variant", [("sm_90", STREAMED), (None, STREAMED)], ids=["wgmma", "mma_sync"])
def test_the_mask_is_computed_at_each_fragment_element_from_its_own_row_and_column(arch, variant):
    """The index tiles take no shared memory and no load: the mask is one comparison of the
    element's key index (kt + its column) with its query index (row + its row), in the sweep
    over the score tile's fragments, and s stays in registers."""
    k = module().attention_causal_bf16
    an = k.analysis(arch=arch, **variant)
    assert an.tile("s").space == "registers"
    src = k.cuda_source(arch=arch, **variant)
    body = src[src.index("// line 18:"):src.index("// line 19:")]
    body = body[body.index("} else {  // per element"):]     # the key blocks the diagonal crosses (below)
    m = re.search(r"const int (i\d+) = [^;]*tnb_lane >> 2[^;]*, (j\d+) = [^;]*tnb_lane & 3[^;]*;", body)
    assert m, body
    i, j = m.groups()
    assert re.search(rf"tnb_add\(\(int\)\(kt_\d+\), \(int\)\({j}\)\) <= "
                     rf"tnb_add\(\(int\)\(row_\d+\), \(int\)\({i}\)\)", body), body
    # nothing of the mask is in shared memory: the same footprint as the kernel without it
    plain = module(SK.ATTENTION).attention_bf16.analysis(arch=arch, **variant)
    assert an.footprint == plain.footprint


def test_the_streamed_loop_runs_the_turns_of_its_own_cta_s_bound():
    """The ring's trip count is computed per CTA from min(Nk, row + BR): a CTA of early queries
    loads none of the key blocks above the diagonal."""
    src = module().attention_causal_bf16.cuda_source(arch="sm_90", **STREAMED)
    line = next(x for x in src.splitlines() if "turns of the loop" in x)
    assert re.search(r"= tnb_min\(\(long long\)\(Nk_\d+\), \(long long\)\(tnb_add\(\(long long\)\(row_\d+\), "
                     r"\(long long\)\(64LL\)\)\)\) > lo\d+ \?", line), line


@needs_nvrtc
@pytest.mark.parametrize("arch,variant,text,name", [
    ("sm_90", STREAMED, SK.ATTENTION_CAUSAL, "attention_causal_bf16"),
    ("sm_90", dict(BR=128, BC=128, D=128, NT=256), SK.ATTENTION_CAUSAL, "attention_causal_bf16"),
    (None, STREAMED, SK.ATTENTION_CAUSAL, "attention_causal_bf16"),
    ("sm_90", MMA_ONLY, SK.ATTENTION_CAUSAL, "attention_causal_bf16"),
    (None, dict(BR=16, BC=16, D=32, NT=128), F32, "attention_causal_f32")],
    ids=["wgmma_64", "wgmma_128_d128", "mma_sync", "mma_sync_sm90", "generic"])
def test_generated_cuda_compiles(arch, variant, text, name):
    src = module(text).kernels[name].cuda_source(arch=arch, **variant)
    assert nvrtc_compile(src, "sm_90a" if arch else "sm_80")


# ---- the generated CUDA, emulated on the CPU, against the CPU executor ----------------------------
@needs_gxx
@pytest.mark.parametrize("shape", [(1, 70, 45), (1, 45, 130)], ids=["more_queries", "more_keys"])
def test_emulated_mma_sync_causal_attention_matches_the_cpu_executor(shape):
    H, N, Nk = shape
    variant = STREAMED
    args = inputs(H, N, Nk, variant["D"], seed=N)
    k = module().attention_causal_bf16
    cpu = run_cpu(k, args, variant)
    EMU.run(generate(k.ir(**variant), SK.ATTENTION_CAUSAL), args, {"H": H, "N": N, "Nk": Nk, "D": variant["D"]},
            grid(N, H, variant))
    assert_close(args[3], cpu[3].astype(np.float64), f"mma.sync causal attention at {shape}", rtol=2e-2, atol=2e-2)


@needs_gxx
def test_emulated_generic_causal_attention_matches_the_cpu_executor():
    H, N, Nk, D = 1, 45, 37, 32
    variant = dict(BR=16, BC=16, D=D, NT=128)
    args = inputs(H, N, Nk, D, dtype=np.float32, seed=9)
    k = module(F32).attention_causal_f32
    cpu = run_cpu(k, args, variant)
    EMU.run(generate(k.ir(**variant), F32), args, {"H": H, "N": N, "Nk": Nk, "D": D}, grid(N, H, variant))
    assert_close(args[3], cpu[3], "generic causal attention", rtol=1e-4, atol=1e-4)


@needs_gxx
@pytest.mark.parametrize("shape,variant", [((1, 100, 70), STREAMED), ((1, 70, 150), STREAMED),
                                           ((1, 150, 200), dict(BR=128, BC=64, D=64, NT=256))],
                         ids=["more_queries", "more_keys", "two_warpgroups"])
def test_emulated_streamed_causal_attention_matches_the_cpu_executor(shape, variant, tmp_path):
    """The wgmma accumulator rows and columns of every lane (of one warpgroup, and of two, each
    holding 64 of the 128 rows), masked; the ring's turn count is each CTA's own (the CTA of the
    first queries runs fewer turns than the keys have blocks)."""
    H, N, Nk = shape
    args = inputs(H, N, Nk, variant["D"], seed=N + 1)
    k = module().attention_causal_bf16
    cpu = run_cpu(k, args, variant)
    assert [lp.lowering for lp in k.analysis(arch="sm_90", **variant).loops] == ["streamed attention on wgmma"]
    ks = generate(k.ir(**variant), SK.ATTENTION_CAUSAL, 0, arch="sm_90")
    assert ks.arch == "sm_90a"
    exe = build_sm90(ks, args, {"H": H, "N": N, "Nk": Nk, "D": variant["D"]}, grid(N, H, variant), tmp_path)
    for tma in (1, 0):
        got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        run_sm90(exe, got, tmp_path, tma, 0)
        assert_close(got[3], cpu[3].astype(np.float64), f"wgmma causal attention at {shape} (tma={tma})",
                     rtol=2e-2, atol=2e-2)


# A GEMM loop bounded by min(): block-lower-triangular A (its blocks right of the diagonal are
# skipped, as a causal mask's are), on the TMA + wgmma pipeline and on mma.sync; the store keeps
# the product's lower triangle, a mask over the accumulator in wgmma's (or mma.sync's) layout.
TRI_GEMM = """
@autotune(TM in [64], TN in [64], TK in [16], NT in [128])
@launch(NT)
@grid(cdiv(M, TM), cdiv(N, TN))
kernel tri_gemm(A: tensor<f16>[M, K], B: tensor<f16>[K, N], C: tensor<f32>[M, N]) {
  var acc: tile<f32>[TM, TN] = 0.0
  for kt in range(0, min(K, (ctx.block.x + 1) * TM), TK) {
    let a = A[ctx.block.x * TM :+ TM, kt :+ TK]
    let b = B[kt :+ TK, ctx.block.y * TN :+ TN]
    acc += dot(a, b)
  }
  let r0 = ctx.block.x * TM
  let c0 = ctx.block.y * TN
  C[r0 :+ TM, c0 :+ TN] = where(cols(TM, TN, c0) <= rows(TM, TN, r0), acc, 0.0)   // and the product's lower triangle
}
"""


def _tri_gemm_args(M, N, K, seed=4):
    r = np.random.default_rng(seed)
    a, b = r.standard_normal((M, K)).astype(np.float16), r.standard_normal((K, N)).astype(np.float16)
    want = np.zeros((M, N))
    for i0 in range(0, M, 64):
        kk = min(K, i0 + 64)
        want[i0:i0 + 64] = a[i0:i0 + 64, :kk].astype(np.float64) @ b[:kk].astype(np.float64)
    want = np.where(np.arange(N)[None, :] <= np.arange(M)[:, None], want, 0.0)
    return [a, b, np.full((M, N), np.nan, np.float32)], want


def test_cpu_gemm_loop_with_a_min_bound_matches_numpy():
    args, want = _tri_gemm_args(150, 76, 200)
    tilenb.compile(TRI_GEMM, backend="cpu").tri_gemm(*args)
    np.testing.assert_allclose(args[2], want, rtol=1e-3, atol=1e-3)


@needs_gxx
@pytest.mark.parametrize("arch", ["sm_90", None], ids=["wgmma_pipeline", "mma_sync"])
def test_emulated_gemm_loop_with_a_min_bound_matches_numpy(arch, tmp_path):
    M, N, K = 150, 76, 100
    k = module(TRI_GEMM).tri_gemm
    want_path = "wgmma TMA pipeline" if arch else "mma.sync"
    assert [lp.lowering for lp in k.analysis(arch=arch).loops] == [want_path]
    args, want = _tri_gemm_args(M, N, K)
    grid2 = (-(-M // 64), -(-N // 64))
    ks = generate(k.ir(), TRI_GEMM, 0, arch=arch)
    if arch:
        exe = build_sm90(ks, args, {"M": M, "N": N, "K": K}, grid2, tmp_path)
        for tma in (1, 0):
            got = [a.copy() for a in args]
            run_sm90(exe, got, tmp_path, tma, 0)
            assert_close(got[2], want, f"wgmma GEMM loop bounded by min (tma={tma})", rtol=1e-3, atol=1e-3)
    else:
        EMU.run(ks, args, {"M": M, "N": N, "K": K}, grid2)
        assert_close(args[2], want, "mma.sync GEMM loop bounded by min", rtol=1e-3, atol=1e-3)


# ---- on the GPU -------------------------------------------------------------------------------------
def _on_hopper() -> bool:
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0 and cupy.cuda.Device().compute_capability == "90"
    except Exception:
        return False


def _gpu_vs_cpu(text, name, variant, shape, dtype, tol, lowering):
    import cupy
    H, N, Nk = shape
    args = inputs(H, N, Nk, variant["D"], dtype=dtype, seed=N * 3 + Nk)
    cpu_mod = module(text)
    assert [lp.lowering for lp in cpu_mod.kernels[name].analysis(arch="sm_90", **variant).loops] == [lowering]
    cpu = run_cpu(cpu_mod.kernels[name], args, variant)
    gpu = tilenb.compile(text, backend="cuda").kernels[name]
    dev = [cupy.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
    gpu(*dev, variant=variant)
    assert "sm_90" in str(gpu.last_run.extra.get("arch"))
    assert_close(cupy.asnumpy(dev[3]), cpu[3].astype(np.float64), f"{lowering} on the GPU at {shape}", rtol=tol, atol=tol)
    want = SK.ref_attention(args[0], args[1], args[2], args[4], causal=True)
    assert_close(cupy.asnumpy(dev[3]), want, f"{lowering} on the GPU at {shape}, against numpy", rtol=3e-2, atol=3e-2)


GPU_SHAPES = [(3, 333, 517), (2, 517, 333), (1, 1000, 1000)]


@pytest.mark.gpu
@pytest.mark.skipif(not _on_hopper(), reason="needs an H100/H200")
@pytest.mark.parametrize("variant", [STREAMED, dict(BR=128, BC=64, D=128, NT=256), dict(BR=128, BC=128, D=64, NT=256)],
                         ids=["64x64x64", "128x64x128", "128x128x64"])
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=["more_keys", "more_queries", "square"])
def test_on_hopper_wgmma_causal_attention_matches_the_cpu_executor(variant, shape):
    _gpu_vs_cpu(SK.ATTENTION_CAUSAL, "attention_causal_bf16", variant, shape, BF16, 2e-2,
                "streamed attention on wgmma")


@pytest.mark.gpu
@pytest.mark.skipif(not _on_hopper(), reason="needs an H100/H200")
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=["more_keys", "more_queries", "square"])
def test_on_hopper_mma_sync_causal_attention_matches_the_cpu_executor(shape):
    _gpu_vs_cpu(SK.ATTENTION_CAUSAL, "attention_causal_bf16", MMA_ONLY, shape, BF16, 2e-2, "mma.sync")


@pytest.mark.gpu
@pytest.mark.skipif(not _on_hopper(), reason="needs an H100/H200")
@pytest.mark.parametrize("shape", [(2, 133, 77), (1, 77, 133)], ids=["more_queries", "more_keys"])
def test_on_hopper_generic_causal_attention_matches_the_cpu_executor(shape):
    _gpu_vs_cpu(F32, "attention_causal_f32", dict(BR=16, BC=16, D=32, NT=128), shape, np.float32, 1e-4, "generic")


@pytest.mark.gpu
@pytest.mark.skipif(not _on_hopper(), reason="needs an H100/H200")
def test_on_hopper_gemm_loop_with_a_min_bound_matches_numpy():
    import cupy
    M, N, K = 333, 196, 300
    args, want = _tri_gemm_args(M, N, K)
    k = tilenb.compile(TRI_GEMM, backend="cuda").tri_gemm
    dev = [cupy.asarray(a) for a in args]
    k(*dev)
    assert "sm_90" in str(k.last_run.extra.get("arch"))
    assert_close(cupy.asnumpy(dev[2]), want, "wgmma GEMM loop bounded by min on the GPU", rtol=1e-3, atol=1e-3)
