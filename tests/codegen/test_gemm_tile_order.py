"""The suite's GEMM with its tiles taken in a grouped order (tilenb/examples/suite_kernels.py, GEMM).

The kernel computes its tile coordinates from ctx.block and ctx.grid (GM rows of tiles walked
column by column, the last group shorter where the tile rows do not divide by GM). Checked here:
- on the reference executor, every `GM` of the autotune space at shapes that are not tile
  multiples, with a short last group, against numpy (C starts as NaN: a tile no CTA takes
  stays NaN and fails);
- that the index arithmetic keeps the GEMM loop on the TMA + wgmma pipeline on sm_90 (the
  analysis' decision, `Analysis.loops`), with the copy coordinates the grouped ones and the
  accumulator's staged 16-byte store, and that the CUDA compiles with NVRTC for sm_90a;
- that the mapping from CTA to tile is a permutation of the tiles for many grids (a plain
  Python model of the same integer formulas, so that a short group or GM above the tile rows
  cannot leave a tile out or take one twice);
- the persistent candidate (`GEMM_PERSISTENT`: P CTAs, each looping over tiles of the same
  order) likewise: fewer CTAs than tiles and more, on the reference executor; its inner loop on
  the TMA + wgmma pipeline;
- on an H200 (marked `gpu`), the same shapes through the TMA path against numpy.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tilenb
from tilenb.codegen import generate
from tilenb.codegen.nvrtc import nvrtc_available, nvrtc_compile
from tilenb.examples import suite_kernels as SK

GMS = (1, 8, 16, 64)
# (M, N, K): 9 tile rows of 128 (one group of 8 and a group of 1 at GM = 8), ragged M, N and K
SHAPES = [(1102, 300, 72), (200, 520, 136)]


def _kernel(dt: str, backend: str):
    return getattr(tilenb.compile(SK.GEMM.replace("{T}", dt), backend=backend), f"gemm_{dt}")


def _inputs(dt, M, N, K, seed):
    r = np.random.default_rng(seed)
    npdt = ml_dtypes.bfloat16 if dt == "bf16" else np.float16
    a = r.standard_normal((M, K)).astype(npdt)
    b = r.standard_normal((K, N)).astype(npdt)
    return a, b, np.full((M, N), np.nan).astype(npdt)


def _check(c, a, b, dt):
    want = a.astype(np.float64) @ b.astype(np.float64)
    got = c.astype(np.float64)
    assert not np.isnan(got).any(), "a tile was never written"
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err < (1e-2 if dt == "bf16" else 2e-3), err


def test_the_space_offers_the_grouped_orders():
    k = _kernel("f16", "cpu")
    assert tuple(k.tune_space["GM"]) == GMS


@pytest.mark.parametrize("M,N,K", SHAPES)
@pytest.mark.parametrize("gm", GMS)
def test_every_group_size_matches_numpy_on_the_reference_executor(M, N, K, gm):
    k = _kernel("f16", "cpu")
    for tn in (128, 256):
        a, b, c = _inputs("f16", M, N, K, M + N + K + gm)
        k(a, b, c, variant=dict(TM=128, TN=tn, TK=64, GM=gm, NT=256))
        _check(c, a, b, "f16")


def test_bf16_matches_numpy_on_the_reference_executor():
    k = _kernel("bf16", "cpu")
    a, b, c = _inputs("bf16", 1102, 300, 72, 3)
    k(a, b, c, variant=dict(TM=128, TN=256, TK=64, GM=8, NT=256))
    _check(c, a, b, "bf16")


def _order(nm, nn, gm):
    """The tile (pm, pn) each CTA number takes, by the kernel's own formulas (integers >= 0)."""
    out = []
    for pid in range(nm * nn):
        first = pid // (gm * nn) * gm
        rows = min(nm - first, gm)
        out.append((first + pid % (gm * nn) % rows, pid % (gm * nn) // rows))
    return out


@pytest.mark.parametrize("gm", GMS + (2, 3, 5))
def test_the_grouped_order_takes_every_tile_once(gm):
    for nm in range(1, 20):
        for nn in range(1, 12):
            got = _order(nm, nn, gm)
            assert sorted(got) == [(i, j) for i in range(nm) for j in range(nn)], (nm, nn, gm)
    # GM = 1 is the row-by-row order; GM of the tile rows or more, ctx.block.x fastest
    assert _order(4, 3, 1) == [(i, j) for i in range(4) for j in range(3)]
    assert _order(4, 3, 64) == [(i, j) for j in range(3) for i in range(4)]
    # within a group of GM rows, consecutive CTAs walk down a column of tiles
    assert _order(16, 4, 8)[:10] == [(i, 0) for i in range(8)] + [(0, 1), (1, 1)]


@pytest.mark.parametrize("gm", GMS)
def test_grouped_index_arithmetic_keeps_the_wgmma_tma_pipeline(gm):
    k = _kernel("bf16", "cpu")
    tune = dict(TM=128, TN=256, TK=64, GM=gm, NT=256)
    a = k.analysis(arch="sm_90", **tune)
    assert [lp.lowering for lp in a.loops] == ["wgmma TMA pipeline"]
    ks = generate(k.ir(**tune), k.module.checked.source.text, arch="sm_90")
    assert ks.arch == "sm_90a" and [m.tensor for m in ks.tmaps] == ["A", "B"]
    src = ks.source
    assert "gridDim.x" in src and "gridDim.y" in src
    # the copies start at the grouped tile: a's rows from pm, b's columns from pn
    assert "tnb_mul((long long)(pm_" in src and "// first row of a" in src
    assert "tnb_mul((long long)(pn_" in src and "// first column of b" in src
    assert "leaves in 16-byte rows" in src                 # the staged store of the accumulator


@pytest.mark.skipif(not nvrtc_available(), reason="NVRTC is not installed")
def test_grouped_gemm_compiles_for_sm90a():
    k = _kernel("f16", "cpu")
    ks = generate(k.ir(TM=128, TN=256, TK=64, GM=8, NT=256), k.module.checked.source.text, arch="sm_90")
    assert ks.arch == "sm_90a" and nvrtc_compile(ks.source, "sm_90a")


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["f16", "bf16"])
@pytest.mark.parametrize("M,N,K", SHAPES + [(1030, 1300, 520)])
def test_on_the_gpu_every_group_size_matches_numpy(dt, M, N, K):
    import cupy as cp
    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("the wgmma lowering runs on compute capability 9.0 only")
    k = _kernel(dt, "cuda")
    for gm in GMS:
        for tn in (128, 256):
            a, b, c = _inputs(dt, M, N, K, M + N + gm)
            k(a, b, c, variant=dict(TM=128, TN=tn, TK=64, GM=gm, NT=256))
            _check(c, a, b, dt)


# ---- the persistent candidate ----------------------------------------------------------------
def _persistent(dt: str, backend: str):
    mod = tilenb.compile(SK.GEMM_PERSISTENT.replace("{T}", dt), backend=backend)
    return getattr(mod, f"gemm_persistent_{dt}")


@pytest.mark.parametrize("P", [1, 5, 40])
def test_persistent_ctas_match_numpy_on_the_reference_executor(P):
    # 9 x 2 tiles of 128 x 256 (9 x 3 of 128 x 128): P = 1 takes them all, 40 leaves CTAs idle
    k = _persistent("f16", "cpu")
    for tn, gm in ((256, 8), (128, 16)):
        a, b, c = _inputs("f16", 1102, 300, 72, P + tn)
        k[(P,)](a, b, c, P, variant=dict(TM=128, TN=tn, TK=64, GM=gm, NT=256))
        _check(c, a, b, "f16")


def test_persistent_inner_loop_keeps_the_wgmma_tma_pipeline():
    k = _persistent("bf16", "cpu")
    a = k.analysis(arch="sm_90", TN=256, GM=8)
    assert [lp.lowering for lp in a.loops] == ["generic", "wgmma TMA pipeline"]
    ks = generate(k.ir(TN=256, GM=8), k.module.checked.source.text, arch="sm_90")
    assert ks.arch == "sm_90a" and "leaves in 16-byte rows" in ks.source
    if nvrtc_available():
        assert nvrtc_compile(ks.source, "sm_90a")


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["f16", "bf16"])
@pytest.mark.parametrize("M,N,K", SHAPES + [(1030, 1300, 520)])
def test_on_the_gpu_persistent_ctas_match_numpy(dt, M, N, K):
    import cupy as cp
    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("the wgmma lowering runs on compute capability 9.0 only")
    k = _persistent(dt, "cuda")
    for P in (3, 132):
        for tn, gm in ((256, 8), (128, 16)):
            a, b, c = _inputs(dt, M, N, K, M + P + tn)
            k[(P,)](a, b, c, P, variant=dict(TM=128, TN=tn, TK=64, GM=gm, NT=256))
            _check(c, a, b, dt)
