"""The element sweep split on a mask decided per tile at its corners (tilenb/codegen/generic/masks.py,
from the analysis' record tilenb/analysis/masks.py), on every lowering.

What is checked:
- the generated CUDA: one uniform test before the statement's sweep, then three sweeps: all true
  (the where's first value, no compare), all false (its second) and per element (the where as
  written); the causal attention's score statement so on wgmma, mma.sync and the generic path;
- the generated CUDA emulated on the CPU (tests/support/cuda_emulator.py) against the CPU executor
  and against numpy (i32 wrap computed independently), for masks of every supported form (<=, a
  sliding window with && and !, == and != with || over broadcast index tiles, an i64 side), with
  starts that put tiles on each side of the diagonal and across it, and near the ends of i32 (the
  guard: a tile whose indices wrap is masked per element);
- the causal attention with its loop over every key block (no bound at the diagonal), so the
  tensor-core paths run all three branches (blocks wholly above the diagonal are all false),
  emulated on mma.sync and on the wgmma ring;
- NVRTC compiles the kernels for sm_80 and sm_90a; GPU tests (marked `gpu`) run them on the device.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import tilenb
from tilenb.codegen import generate
from tilenb.codegen.nvrtc import nvrtc_available, nvrtc_compile
from tilenb.examples import suite_kernels as SK

from support import cuda_emulator as EMU  # noqa: E402
from support.cuda_emulator import needs_gxx  # noqa: E402
from test_causal_attention import MMA_ONLY, STREAMED, grid, inputs, run_cpu  # noqa: E402
from test_gemm_sm90_edges import assert_close, build_sm90, run_sm90  # noqa: E402

needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="needs NVRTC")

MASKS = """
@launch(128)
@grid(cdiv(N, 16), cdiv(M, 32), Z)
kernel masks(P: tensor<i32>[Z, 2], O: tensor<i32>[Z, 4, N, M]) {
  let z = ctx.block.z
  let a = P[z, 0]
  let w = P[z, 1]
  let r = ctx.block.x * 16
  let c = ctx.block.y * 32
  O[z, 0, r :+ 16, c :+ 32] = where(cols(16, 32, c) <= rows(16, 32, r + a), cols(16, 32, c) * 3 - rows(16, 32, r), -7)
  O[z, 1, r :+ 16, c :+ 32] = where(rows(16, 32, r) - cols(16, 32, c) < w && !(cols(16, 32, c) > rows(16, 32, r) + a), 1, 0)
  O[z, 2, r :+ 16, c :+ 32] = where(rows(16, 1, r) == cols(1, 32, c) + a || cols(16, 32, c) * 2 != rows(16, 32, r) - w, rows(16, 32, r), cols(16, 32, c))
  O[z, 3, r :+ 16, c :+ 32] = where(cols(16, 32, c) < M - w && rows(16, 32, r) >= a, 5, 6)
}
"""

I32 = 2 ** 31
# (a, w) per z: tiles on both sides of the diagonal and across it, and starts near the ends of i32
PARAMS = [(0, 0), (5, 20), (-40, 3), (70, -9), (-200, 200), (17, 1), (I32 - 20, 7), (I32 - 1, I32 - 1),
          (-I32, -I32), (-I32 + 5, 40), (I32 - 40, -(I32 - 3)), (3, I32 - 10)]
N, M = 45, 76              # neither a multiple of the 16 x 32 tile


def wrap32(x):
    return ((np.asarray(x, np.int64) + I32) % (2 * I32)) - I32


def want_masks(params, n, m):
    """Each output computed here from the spec's definitions, not from the kernel."""
    i = np.arange(n, dtype=np.int64)[:, None]
    j = np.arange(m, dtype=np.int64)[None, :]
    out = []
    for a, w in params:
        o0 = np.where(j <= wrap32(i + a), wrap32(3 * j - i), -7)
        o1 = np.where((i - j < w) & ~(j > wrap32(i + a)), 1, 0)
        o2 = np.where((i == wrap32(j + a)) | (2 * j != wrap32(i - w)), i + 0 * j, j + 0 * i)
        o3 = np.where((j < m - w) & (i >= a), 5, 6)
        out.append(np.stack([np.broadcast_to(x, (n, m)) for x in (o0, o1, o2, o3)]))
    return np.stack(out).astype(np.int32)


def tile_cases(params, n, m):
    """For mask 0: how many 16 x 32 tiles are all true, all false and mixed (so the test data
    reaches every branch)."""
    cases = set()
    for a, _ in params:
        for r in range(0, n, 16):
            for c in range(0, m, 32):
                i = np.arange(r, r + 16)[:, None]
                j = np.arange(c, c + 32)[None, :]
                v = j <= wrap32(i + a)
                cases.add("true" if v.all() else "false" if not v.any() else "mixed")
    return cases


def mask_args(params=PARAMS):
    P = np.array(params, dtype=np.int64).astype(np.int32)
    return [P, np.full((len(params), 4, N, M), -99, np.int32)]


def test_cpu_masks_match_numpy():
    assert tile_cases(PARAMS, N, M) == {"true", "false", "mixed"}
    args = mask_args()
    tilenb.compile(MASKS, backend="cpu").masks(*args)
    np.testing.assert_array_equal(args[1], want_masks(PARAMS, N, M))


def _branches(src: str, line: int):
    body = src[src.index(f"// line {line}:"):src.index(f"// line {line + 1}:")]
    test = body.index("decided at its corners")
    t, f, p = (body.index(x) for x in ("// every element: its first value", "// no element: its second value",
                                        "} else {  // per element"))
    assert test < t < f < p
    return body[t:f], body[f:p], body[p:]


def test_the_generated_sweep_has_one_test_and_three_branches():
    k = tilenb.compile(MASKS, backend="cpu").masks
    src = k.cuda_source()
    assert src.count("decided at its corners") == 4
    yes, no, each = _branches(src, 10)
    assert "<= tnb_add(" not in yes and "-7" not in yes    # the first value alone
    assert "<= tnb_add(" not in no and "= -7;" in no        # the second alone
    assert "<= tnb_add(" in each and ": -7)" in each        # the where as written


@pytest.mark.parametrize("arch,variant,lowering", [("sm_90", STREAMED, "streamed attention on wgmma"),
                                                   (None, STREAMED, "mma.sync"), ("sm_90", MMA_ONLY, "mma.sync")],
                         ids=["wgmma", "mma_sync", "mma_sync_sm90"])
def test_the_causal_score_sweep_is_split_on_every_tensor_core_path(arch, variant, lowering):
    k = tilenb.compile(SK.ATTENTION_CAUSAL, backend="cpu").attention_causal_bf16
    assert [lp.lowering for lp in k.analysis(arch=arch, **variant).loops] == [lowering]
    src = k.cuda_source(arch=arch, **variant)
    yes, no, each = _branches(src, 18)
    assert "tnb_add((int)(kt_" not in yes and "-1e+30f" not in yes
    assert "tnb_add((int)(kt_" not in no and "-1e+30f" in no
    assert "tnb_add((int)(kt_" in each and "-1e+30f" in each
    # the dot is computed once, before the test (its ring's turn is the same in every branch)
    line = src[src.index("// line 18:"):src.index("// line 19:")]
    assert line.index("wgmma" if arch and variant is STREAMED else "mma") < line.index("decided at its corners")


@needs_gxx
def test_emulated_generic_masks_match_the_cpu_executor_and_numpy():
    k = tilenb.compile(MASKS, backend="cpu").masks
    cpu = mask_args()
    k(*cpu)
    got = mask_args()
    EMU.run(generate(k.ir(), MASKS), got, {"Z": len(PARAMS), "N": N, "M": M}, (3, 3, len(PARAMS)))
    np.testing.assert_array_equal(got[1], cpu[1])
    np.testing.assert_array_equal(got[1], want_masks(PARAMS, N, M))


# the causal kernel with its loop over every key block: the blocks wholly above the diagonal run,
# all false (every score -1e30, so each contributes exp2(-1e30 * qs - m) = 0 to its rows)
EVERY_BLOCK = SK.ATTENTION_CAUSAL.replace("range(0, min(Nk, row + BR), BC)", "range(0, Nk, BC)")


def test_every_block_form_matches_numpy_on_the_cpu():
    assert EVERY_BLOCK != SK.ATTENTION_CAUSAL
    args = inputs(1, 70, 150, 64, seed=3)
    got = run_cpu(tilenb.compile(EVERY_BLOCK, backend="cpu").attention_causal_bf16, args, STREAMED)[3]
    want = SK.ref_attention(args[0], args[1], args[2], args[4], causal=True)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-2, atol=2e-2)


@needs_gxx
@pytest.mark.parametrize("shape", [(1, 70, 150), (1, 100, 45)], ids=["more_keys", "more_queries"])
def test_emulated_mma_sync_every_block_matches_the_cpu_executor(shape):
    H, n, nk = shape
    args = inputs(H, n, nk, 64, seed=n)
    k = tilenb.compile(EVERY_BLOCK, backend="cpu").attention_causal_bf16
    cpu = run_cpu(k, args, STREAMED)
    EMU.run(generate(k.ir(**STREAMED), EVERY_BLOCK), args, {"H": H, "N": n, "Nk": nk, "D": 64}, grid(n, H, STREAMED))
    assert_close(args[3], cpu[3].astype(np.float64), f"mma.sync, every key block, at {shape}", rtol=2e-2, atol=2e-2)


@needs_gxx
@pytest.mark.parametrize("shape,variant", [((1, 70, 150), STREAMED), ((1, 150, 200), dict(BR=128, BC=64, D=64, NT=256))],
                         ids=["one_warpgroup", "two_warpgroups"])
def test_emulated_wgmma_every_block_matches_the_cpu_executor(shape, variant, tmp_path):
    H, n, nk = shape
    args = inputs(H, n, nk, variant["D"], seed=n + 7)
    k = tilenb.compile(EVERY_BLOCK, backend="cpu").attention_causal_bf16
    cpu = run_cpu(k, args, variant)
    assert [lp.lowering for lp in k.analysis(arch="sm_90", **variant).loops] == ["streamed attention on wgmma"]
    ks = generate(k.ir(**variant), EVERY_BLOCK, 0, arch="sm_90")
    exe = build_sm90(ks, args, {"H": H, "N": n, "Nk": nk, "D": variant["D"]}, grid(n, H, variant), tmp_path)
    for tma in (1, 0):
        got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        run_sm90(exe, got, tmp_path, tma, 0)
        assert_close(got[3], cpu[3].astype(np.float64), f"wgmma, every key block, at {shape} (tma={tma})",
                     rtol=2e-2, atol=2e-2)


@needs_nvrtc
@pytest.mark.parametrize("arch", [None, "sm_90"], ids=["sm_80", "sm_90a"])
def test_generated_cuda_compiles(arch):
    src = tilenb.compile(MASKS, backend="cpu").masks.cuda_source(arch=arch)
    assert nvrtc_compile(src, "sm_90a" if arch else "sm_80")
    k = tilenb.compile(EVERY_BLOCK, backend="cpu").attention_causal_bf16
    assert nvrtc_compile(k.cuda_source(arch=arch, **STREAMED), "sm_90a" if arch else "sm_80")


# ---- on the GPU -------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_on_the_gpu_masks_match_the_cpu_executor_and_numpy():
    import cupy
    cpu = mask_args()
    tilenb.compile(MASKS, backend="cpu").masks(*cpu)
    dev = [cupy.asarray(a) for a in mask_args()]
    tilenb.compile(MASKS, backend="cuda").masks(*dev)
    np.testing.assert_array_equal(cupy.asnumpy(dev[1]), cpu[1])
    np.testing.assert_array_equal(cupy.asnumpy(dev[1]), want_masks(PARAMS, N, M))


@pytest.mark.gpu
@pytest.mark.parametrize("variant", [STREAMED, MMA_ONLY, dict(BR=128, BC=128, D=128, NT=256)],
                         ids=["64x64x64", "mma_sync", "128x128x128"])
def test_on_the_gpu_every_block_form_matches_the_cpu_executor(variant):
    import cupy
    args = inputs(2, 333, 517, variant["D"], seed=11)
    cpu = run_cpu(tilenb.compile(EVERY_BLOCK, backend="cpu").attention_causal_bf16, args, variant)
    dev = [cupy.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
    tilenb.compile(EVERY_BLOCK, backend="cuda").attention_causal_bf16(*dev, variant=variant)
    assert_close(cupy.asnumpy(dev[3]), cpu[3].astype(np.float64), "every key block on the GPU", rtol=2e-2, atol=2e-2)
    want = SK.ref_attention(args[0], args[1], args[2], args[4], causal=True)
    assert_close(cupy.asnumpy(dev[3]), want, "every key block on the GPU, against numpy", rtol=3e-2, atol=3e-2)
    assert math.isfinite(float(np.abs(cupy.asnumpy(dev[3]).astype(np.float32)).max()))


def test_the_wgmma_accumulator_store_obeys_the_record_too():
    """The GEMM epilogue's store through shared memory (sm90.gemm.staged_store) and the mma.sync
    store: the triangle mask of test_causal_attention.TRI_GEMM splits on both (emulated there)."""
    from test_causal_attention import TRI_GEMM
    k = tilenb.compile(TRI_GEMM, backend="cpu").tri_gemm
    for arch, lowering in (("sm_90", "wgmma TMA pipeline"), (None, "mma.sync")):
        assert [lp.lowering for lp in k.analysis(arch=arch).loops] == [lowering]
        src = k.cuda_source(arch=arch)
        assert src.count("decided at its corners") == 1
        line = next(n for n, x in enumerate(TRI_GEMM.split("\n"), 1) if "where(" in x)
        assert k.analysis(arch=arch).masks[0].line == line
