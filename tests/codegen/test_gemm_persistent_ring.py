"""A GEMM loop inside a tile loop (persistent CTAs): the TMA ring carried from tile to tile.

The analysis (`gemm_loops.plan_tile_loop`, `GemmChoice.tile_loop`) takes a GEMM loop that is the
one loop of a plain `for` over tiles (scalar lets, `var acc = 0.0`, the loop, one store of acc);
the generator then sets the ring's mbarriers up once, counts stage and phase over all tiles,
issues the next tile's first stages during this tile's last turns, and stages the store apart
from the ring. Checked here:
- the decision: taken for the suite's persistent GEMM, not for the grid GEMM (whose CUDA is
  unchanged), nor for a tile loop with anything else in its body; the shared-memory map puts the
  store's staging apart from the ring, and the ring keeps the stages of the plain plan;
- the generated sm_90 CUDA run by the TMA / mbarrier / wgmma emulator (tests/support) against the
  CPU executor at shapes that are not tile multiples (a short last tile in M and N, K not a
  multiple of TK), with fewer CTAs than tiles (each CTA several tiles: the ring wraps across
  tiles, the next tile's copies issued early) and more CTAs than tiles, on both copy paths;
- NVRTC compiles it for sm_90a; on an H200 (marked `gpu`) it matches numpy.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tilenb
from tilenb.codegen import generate
from tilenb.codegen.nvrtc import nvrtc_available, nvrtc_compile
from tilenb.examples import suite_kernels as SK

from support.cuda_emulator import needs_gxx  # noqa: E402
from test_gemm_sm90_edges import build_sm90, run_sm90  # noqa: E402

# The persistent GEMM with small tiles (emulation runs every CUDA thread as an OS thread): TK 32
# gives 8 stages of 8 KB, so K = 300 (10 turns, the last one short) lets the next tile's first 7
# turns be issued during this one.
SMALL = """
@launch(128)
@grid(P)
kernel pgemm(A: tensor<f16>[M, K], B: tensor<f16>[K, N], C: tensor<f16>[M, N], P: i32) {
  let nm = cdiv(M, 64)
  let nn = cdiv(N, 64)
  for i in range(0, cdiv(nm * nn - ctx.block.x, ctx.grid.x), 1) {
    let t = ctx.block.x + i * ctx.grid.x
    let pm = t % nm
    let pn = t / nm
    var acc: tile<f32>[64, 64] = 0.0
    for kt in range(0, K, 32) {
      acc += dot(A[pm * 64 :+ 64, kt :+ 32], B[kt :+ 32, pn * 64 :+ 64])
    }
    C[pm * 64 :+ 64, pn * 64 :+ 64] = acc
  }
}
"""

# C in f32: the carried ring, the store staged in padded rows and stored in 16-byte vectors (no bulk stores)
SMALL_F32 = SMALL.replace("C: tensor<f16>[M, N]", "C: tensor<f32>[M, N]")

# the same with a statement between the tiles' stores: not the tile-loop form
OTHER = SMALL.replace("    C[pm * 64 :+ 64, pn * 64 :+ 64] = acc\n",
                      "    C[pm * 64 :+ 64, pn * 64 :+ 64] = acc\n    if K < 0 { break }\n")


def _inputs(M, N, K, seed, dt=np.float16):
    r = np.random.default_rng(seed)
    a = r.standard_normal((M, K)).astype(dt)
    b = r.standard_normal((K, N)).astype(dt)
    return a, b, np.full((M, N), np.nan).astype(dt)


def _check(c, a, b, tol):
    want = a.astype(np.float64) @ b.astype(np.float64)
    got = c.astype(np.float64)
    assert not np.isnan(got).any(), "a tile was never written"
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err < tol, err


def _gemm_choices(k, **tune):
    from tilenb.analysis import analyze
    a = analyze(k.ir(**tune), arch="sm_90")
    low = getattr(a, "lowering")
    return a, list(low.gemm.values())


def test_the_persistent_suite_gemm_carries_its_ring_and_the_grid_gemm_does_not():
    kp = getattr(tilenb.compile(SK.GEMM_PERSISTENT.replace("{T}", "f16"), backend="cpu"), "gemm_persistent_f16")
    kg = getattr(tilenb.compile(SK.GEMM.replace("{T}", "f16"), backend="cpu"), "gemm_f16")
    a, chs = _gemm_choices(kp, TM=128, TN=256, GM=8)
    assert len(chs) == 1 and chs[0].tile_loop is not None
    tl, shp = chs[0].tile_loop, chs[0].shape
    # 128 x 256 f16: 64 rows of 528 bytes staged at a time keep the plain plan's 4 stages of 48 KB
    assert (tl.stage_rows, tl.pitch, shp.stages, tl.tma_store) == (64, 528, 4, True)
    ag, gchs = _gemm_choices(kg, TM=128, TN=256, GM=8)
    assert gchs[0].tile_loop is None and gchs[0].shape.stages == shp.stages
    assert "runs on across the turns of the loop at line" in a.loops[1].why
    # the map: the staging and the ring never share a byte, and the kernel's bytes cover both
    regs = {r.kind: r for r in a.smem.regions if r.kind in ("staging", "ring stages", "mbarriers")}
    st, ring = regs["staging"], regs["ring stages"]
    assert st.offset + st.bytes <= ring.offset
    assert a.smem.array_bytes >= regs["mbarriers"].offset + regs["mbarriers"].bytes
    src = generate(kp.ir(TM=128, TN=256, GM=8), kp.module.checked.source.text, arch="sm_90").source
    assert "runs on across this loop's turns" in src and "the next tile's turn" in src
    assert "tnb_tma_store_2d(&tnb_tm0c" in src
    gsrc = generate(kg.ir(TM=128, TN=256, GM=8), kg.module.checked.source.text, arch="sm_90").source
    assert "runs on across" not in gsrc and "the GEMM ring, free now" in gsrc and "tnb_tma_store_2d" not in gsrc


# a tile loop whose turns read what the turn before stored (a chain of layers): not carried
LAYERS = """
@launch(128)
@grid(cdiv(M, 64))
kernel g(H: tensor<f16>[L, M, 128], W: tensor<f16>[L1, 128, 128]) {
  let r = ctx.block.x * 64
  for layer in range(0, L - 1, 1) {
    var acc: tile<f32>[64, 128] = 0.0
    for kt in range(0, 128, 64) {
      acc += dot(H[layer, r :+ 64, kt :+ 64], W[layer, kt :+ 64, 0 :+ 128])
    }
    H[layer + 1, r :+ 64, 0 :+ 128] = acc
  }
}
"""


@pytest.mark.parametrize("text", [OTHER, LAYERS], ids=["more_in_the_body", "stores_what_the_next_reads"])
def test_other_tile_loops_keep_a_ring_of_their_own(text):
    mod = tilenb.compile(text, backend="cpu")
    k = mod.pgemm if "pgemm" in text else mod.g
    _, chs = _gemm_choices(k)
    assert len(chs) == 1 and chs[0].tile_loop is None


@pytest.mark.skipif(not nvrtc_available(), reason="NVRTC is not installed")
@pytest.mark.parametrize("dt", ["f16", "bf16"])
@pytest.mark.parametrize("tn", [128, 256])
def test_the_carried_ring_compiles_for_sm90a(dt, tn):
    k = getattr(tilenb.compile(SK.GEMM_PERSISTENT.replace("{T}", dt), backend="cpu"), f"gemm_persistent_{dt}")
    ks = generate(k.ir(TM=128, TN=tn, GM=8), k.module.checked.source.text, arch="sm_90")
    assert ks.arch == "sm_90a" and "runs on across" in ks.source
    assert nvrtc_compile(ks.source, "sm_90a")


@needs_gxx
@pytest.mark.parametrize("P,K,out", [(2, 300, "f16"), (9, 300, "f16"), (2, 224, "f16"), (4, 100, "f16"),
                                     (2, 300, "f32")])
def test_emulated_carried_ring_matches_the_cpu_executor(P, K, out, tmp_path):
    """M = 150, N = 100: 3 x 2 tiles of 64 x 64, the last row and column of tiles short. K = 300:
    10 turns of 32, the last short; K = 224: 7 turns, exactly the S - 1 issued ahead (the next
    tile's copies start in the first turn); K = 100: 4 turns, too few to issue the next tile early
    (the mbarriers still carried). P = 2: three tiles a CTA (the ring's 8 stages wrap across
    tiles); P = 4: one or two tiles a CTA; P = 9: three CTAs without a tile. C in f16 leaves by
    bulk tensor stores (tma=1) or 16-byte rows (tma=0); C in f32 in 16-byte rows of padded staging."""
    mod = tilenb.compile(SMALL if out == "f16" else SMALL_F32, backend="cpu")
    k = mod.pgemm
    M, N = 150, 100
    _, chs = _gemm_choices(k)
    assert chs[0].tile_loop is not None and chs[0].shape.stages == 8
    assert chs[0].tile_loop.tma_store == (out == "f16")
    a, b, c = _inputs(M, N, K, P + K)
    c = c.astype(np.float16 if out == "f16" else np.float32)
    want = c.copy()
    k[(P,)](a, b, want, P)
    _check(want, a, b, 2e-3)
    ks = generate(k.ir(), mod.checked.source.text, arch="sm_90")
    assert ks.arch == "sm_90a" and "runs on across" in ks.source
    args = [a, b, c, P]
    exe = build_sm90(ks, args, dict(M=M, N=N, K=K), (P,), tmp_path)
    for tma in (1, 0):
        for late_products in (0, 1):
            got = [x.copy() if isinstance(x, np.ndarray) else x for x in args]
            run_sm90(exe, got, tmp_path, tma, late_products)
            np.testing.assert_allclose(got[2].astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3,
                                       err_msg=f"emulated (tma={tma}, late products={late_products})")


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["f16", "bf16"])
# N = 300 and 1300: rows of C not a multiple of 16 bytes, so no tensor maps (the copy path); N = 1304
# and 520: TMA copies and bulk stores, short last tiles in M and N, K not a multiple of TK; K = 136:
# 3 turns, exactly the S - 1 issued ahead at 128 x 256; K = 520: 9 turns
@pytest.mark.parametrize("M,N,K", [(1102, 300, 72), (1030, 1300, 520), (1030, 1304, 520), (200, 520, 136)])
def test_on_the_gpu_the_carried_ring_matches_numpy(dt, M, N, K):
    import cupy as cp
    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("the wgmma lowering runs on compute capability 9.0 only")
    k = getattr(tilenb.compile(SK.GEMM_PERSISTENT.replace("{T}", dt), backend="cuda"), f"gemm_persistent_{dt}")
    npdt = ml_dtypes.bfloat16 if dt == "bf16" else np.float16
    for P in (1, 3, 132):
        for tn, gm in ((256, 8), (128, 16)):
            a, b, c = _inputs(M, N, K, M + P + tn, npdt)
            k[(P,)](a, b, c, P, variant=dict(TM=128, TN=tn, TK=64, GM=gm, NT=256))
            _check(c, a, b, 1e-2 if dt == "bf16" else 2e-3)
