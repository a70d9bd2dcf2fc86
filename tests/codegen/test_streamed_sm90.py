"""Loops whose tensor-core dots read register rows, streamed by TMA and run on wgmma (sm_90).

Flash attention is the model (tilenb/codegen/sm90/streamed.py). What is checked, without a GPU:
- which loops take the lowering (attention variants on the mma row layout of a multiple of 128
  threads do; other targets and layouts keep cp.async + mma.sync), and that the sm_90a source
  compiles with NVRTC;
- the generated sm_90 CUDA, run by the emulator of TMA, mbarriers and wgmma of
  tests/codegen/test_gemm_sm90_edges.py (extended with wgmma's register-A form), against numpy at
  sequence lengths that are not multiples of the tiles, on the tensor-map path and on the
  bounds-checked copy path, with copies late / products early and the reverse;
- a GPU test (marked `gpu`) runs the same kernels on an H100/H200 against numpy.
"""
from __future__ import annotations

import re

import math

import ml_dtypes
import numpy as np
import pytest

import tilenb
from tilenb.codegen import generate
from tilenb.codegen.nvrtc import nvrtc_available, nvrtc_compile

from tilenb.examples import suite_kernels  # noqa: E402

from support.cuda_emulator import needs_gxx  # noqa: E402
from test_gemm_sm90_edges import assert_close, build_sm90, run_sm90  # noqa: E402

BF16 = ml_dtypes.bfloat16
needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="needs NVRTC")

# (BR, BC, D, NT): q from registers (64 x 64, 128 x 64 x 128) or from shared memory (128 x 128 x 128)
TAKEN = [(64, 64, 64, 128), (128, 64, 128, 256), (128, 128, 128, 256), (64, 128, 64, 128)]


def module():
    return tilenb.compile(suite_kernels.ATTENTION)


def ref_attention(q, k, v, scale):
    """softmax(q k^T * scale) v per head in float64, from the bf16 inputs."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = np.einsum("hnd,hmd->hnm", q, k) * scale
    s -= s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    return np.einsum("hnm,hmd->hnd", p / p.sum(axis=-1, keepdims=True), v)


def inputs(H, N, Nk, D, seed=0):
    r = np.random.default_rng(seed)
    q = r.standard_normal((H, N, D)).astype(BF16)
    k = r.standard_normal((H, Nk, D)).astype(BF16)
    v = r.standard_normal((H, Nk, D)).astype(BF16)
    return q, k, v


@pytest.mark.parametrize("tune", TAKEN, ids=lambda t: "BR%d_BC%d_D%d_NT%d" % t)
def test_attention_loop_is_streamed_on_sm90_only(tune):
    BR, BC, D, NT = tune
    k = module().attention_bf16
    hop = k.cuda_source(arch="sm_90", BR=BR, BC=BC, D=D, NT=NT)
    assert "tnb_wgmma_rs_bf16" in hop and "tnb_tma_3d" in hop and "tnb_cp16u" not in hop.split("extern \"C\"")[-1]
    for arch in ("sm_80", None):
        other = k.cuda_source(arch=arch, BR=BR, BC=BC, D=D, NT=NT)
        assert "wgmma" not in other and "tnb_tma" not in other


def test_rows_not_owned_by_whole_warpgroups_keep_mma_sync():
    """64 rows on 256 threads: the mma row layout needs 16 rows a warp; nothing to stream."""
    src = module().attention_bf16.cuda_source(arch="sm_90", BR=64, BC=64, D=64, NT=256)
    assert "wgmma" not in src


def test_the_turns_last_dot_retires_at_the_next_turns_first_wait():
    """With a ring of 3 or more stages, P V is not waited for at the end of its turn: the next
    turn's Q K^T wait retires both (wgmma groups retire in order), its stage is freed then, and
    the loop waits once after its last turn. Two stages (128 threads) keep the wait, and so does
    a loop that reads acc after the dot."""
    k = module().attention_bf16
    src = k.cuda_source(arch="sm_90", BR=128, BC=64, D=128, NT=256)
    loop = src[src.index("for (long long kt_"):]
    assert "retires at the next turn's first wait" in loop
    assert "the last turn's products have retired" in loop and "the last turn's deferred product" in loop
    # the first dot's wait fences the accumulator too: no read of it moves above that wait
    assert re.search(r"tnb_reg_fence<64>\(acc_\d+\);  // and the last turn's product, retired by the same wait", loop)
    assert "retires at the next turn" not in k.cuda_source(arch="sm_90", BR=64, BC=64, D=64, NT=128)
    reads_acc = suite_kernels.ATTENTION.replace("    m = m_new\n", "    m = m_new + rowmax(acc) * 0.0\n")
    assert reads_acc != suite_kernels.ATTENTION
    src2 = tilenb.compile(reads_acc, backend="cpu").attention_bf16.cuda_source(arch="sm_90", BR=128, BC=64, D=128,
                                                                                NT=256)
    assert "tnb_wgmma_rs_bf16" in src2 and "retires at the next turn" not in src2


@needs_nvrtc
@pytest.mark.parametrize("tune", TAKEN, ids=lambda t: "BR%d_BC%d_D%d_NT%d" % t)
def test_streamed_attention_compiles_for_sm90a(tune):
    BR, BC, D, NT = tune
    src = module().attention_bf16.cuda_source(arch="sm_90", BR=BR, BC=BC, D=D, NT=NT)
    assert nvrtc_compile(src, "sm_90a")


@needs_gxx
@pytest.mark.parametrize("tune,shape,form", [((64, 64, 64, 128), (2, 100, 300), "as written"),
                                             ((128, 128, 128, 256), (1, 130, 150), "as written"),
                                             ((128, 64, 128, 256), (1, 70, 200), "as written"),
                                             ((128, 64, 64, 256), (2, 70, 200), "let views")],
                         ids=["64x64x64_ring_wraps", "128x128x128_q_shared", "128x64x128_q_registers",
                              "128x64x64_let_views"])
def test_emulated_streamed_attention_matches_numpy(tune, shape, form, tmp_path):
    BR, BC, D, NT = tune
    H, N, Nk = shape
    text = suite_kernels.ATTENTION if form == "as written" else suite_kernels.ATTENTION_TC
    kern = tilenb.compile(text).kernels["attention_bf16" if form == "as written" else "attention_tc_bf16"]
    kir = kern.ir(BR=BR, BC=BC, D=D, NT=NT)
    ks = generate(kir, text, 0, arch="sm_90")
    assert ks.arch == "sm_90a"
    q, k, v = inputs(H, N, Nk, D, seed=sum(shape))
    scale = 1.0 / math.sqrt(D)
    want = ref_attention(q, k, v, scale)
    o = np.full((H, N, D), np.nan, BF16)
    args = [q, k, v, o, np.float32(scale)]
    exe = build_sm90(ks, args, {"H": H, "N": N, "Nk": Nk, "D": D}, (math.ceil(N / BR), H), tmp_path)
    for tma in (1, 0):
        for late_products in (0, 1):
            got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
            run_sm90(exe, got, tmp_path, tma, late_products)
            assert_close(got[3], want, f"emulated sm_90 attention {tune} at {shape} (tma={tma}, late={late_products})",
                         rtol=3e-2, atol=3e-2)


# Programs around the loop that its ring must not be set up ahead of (or that repeat it):
# a write through a view of K before the loop, a loop bound read from a tile element written
# before it, and the loop inside `for<unroll 2>` (its ring and turn counter set up per copy).
VIEW_WRITE = suite_kernels.ATTENTION.replace(
    "  var q = Q[h, row :+ BR, :]\n", "  let kv = K[h, 0 :+ 8, :]\n  var q = Q[h, row :+ BR, :]\n  kv[0, 0] = 8.0\n")
TILE_BOUND = suite_kernels.ATTENTION.replace(
    "  var q = Q[h, row :+ BR, :]\n",
    "  var cnt: tile<i32>[1, 4] = 0\n  cnt[0, 1] = 2 * BC\n  var q = Q[h, row :+ BR, :]\n").replace(
    "for kt in range(0, Nk, BC)", "for kt in range(0, cnt[0, 1], BC)")
UNROLLED = suite_kernels.ATTENTION.replace("@grid(cdiv(N, BR), H)", "@grid(cdiv(N, BR), 1)").replace(
    "  let h = ctx.block.y\n", "  for<unroll 2> h in range(0, H) {\n").replace(
    "  O[h, row :+ BR, :] = acc / l\n}", "  O[h, row :+ BR, :] = acc / l\n  }\n}")


@needs_nvrtc
@pytest.mark.parametrize("arch,tune", [(None, (64, 64, 64, 128)), ("sm_90", (128, 64, 128, 256)),
                                       ("sm_90", (64, 64, 64, 128))], ids=["generic", "sm90_256", "sm90_128"])
def test_a_tensor_core_loop_inside_an_unrolled_loop_compiles(arch, tune):
    BR, BC, D, NT = tune
    src = tilenb.compile(UNROLLED).attention_bf16.cuda_source(arch=arch, BR=BR, BC=BC, D=D, NT=NT)
    assert nvrtc_compile(src, "sm_90a" if arch else "sm_80")


@needs_gxx
@pytest.mark.parametrize("form", ["view_write", "tile_bound", "unrolled"])
def test_emulated_ring_around_other_statements_matches_the_cpu_executor(form, tmp_path):
    """The ring is not set up above a write through a view of K nor above the statements a loop
    bound reads; inside `for<unroll 2>` each copy of the loop has its own ring."""
    text = {"view_write": VIEW_WRITE, "tile_bound": TILE_BOUND, "unrolled": UNROLLED}[form]
    assert text != suite_kernels.ATTENTION
    BR, BC, D, NT = 64, 64, 64, 128
    H, N, Nk = 2, 50, 100
    kern = tilenb.compile(text, backend="cpu").attention_bf16
    q, k, v = inputs(H, N, Nk, D, seed=3)
    args = [q, k, v, np.full((H, N, D), np.nan, BF16), np.float32(1.0 / math.sqrt(D))]
    cpu = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    kern(*cpu, variant=dict(BR=BR, BC=BC, D=D, NT=NT))
    ks = generate(kern.ir(BR=BR, BC=BC, D=D, NT=NT), text, 0, arch="sm_90")
    grid = (math.ceil(N / BR), 1 if form == "unrolled" else H)
    exe = build_sm90(ks, args, {"H": H, "N": N, "Nk": Nk, "D": D}, grid, tmp_path)
    for tma in (1, 0):
        for late_products in (0, 1):
            got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
            run_sm90(exe, got, tmp_path, tma, late_products)
            assert_close(got[3], cpu[3].astype(np.float64), f"{form} (tma={tma}, late={late_products})",
                         rtol=2e-2, atol=2e-2)


def _on_hopper() -> bool:
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0 and cupy.cuda.Device().compute_capability == "90"
    except Exception:
        return False


@pytest.mark.gpu
@pytest.mark.skipif(not _on_hopper(), reason="needs an H100/H200")
@pytest.mark.parametrize("tune", TAKEN, ids=lambda t: "BR%d_BC%d_D%d_NT%d" % t)
@pytest.mark.parametrize("shape", [(3, 333, 517), (2, 128, 1000)], ids=["odd", "long"])
def test_on_hopper_streamed_attention_matches_numpy(tune, shape):
    import cupy
    BR, BC, D, NT = tune
    H, N, Nk = shape
    q, k, v = inputs(H, N, Nk, D, seed=N)
    scale = 1.0 / math.sqrt(D)
    want = ref_attention(q, k, v, scale)
    mod = module()
    dq, dk, dv = (cupy.asarray(x) for x in (q, k, v))
    do = cupy.full((H, N, D), cupy.nan, dtype=dq.dtype)
    mod.attention_bf16(dq, dk, dv, do, np.float32(scale), variant=dict(BR=BR, BC=BC, D=D, NT=NT))
    assert "sm_90" in str(mod.attention_bf16.last_run.extra.get("arch"))
    assert_close(cupy.asnumpy(do), want, f"H100/H200 attention {tune} at {shape}", rtol=3e-2, atol=3e-2)
