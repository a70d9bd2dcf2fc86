"""The warpgroup ping-pong of streamed attention on sm_90 (`Ring.pingpong`, TILENB_STREAM_PINGPONG).

The two warpgroups of a 256-thread CTA, each owning 64 rows of the scores, take turns issuing
their products through two named barriers (tilenb/codegen/sm90/streamed.py, "Ping-pong", which
also argues why no wait can hang). What is checked:
- the analysis' decision and its reason, for the suite's attention variants and where it must not
  apply (128 threads; 64 rows on 256 threads, which do not stream; a ring whose last product is not
  deferred; a loop holding a CTA barrier; other targets; the switch unset), in `Analysis.loops`
  and in the waits the barriers view lists (`Analysis.waits`, the view's text);
- with the switch unset the generated CUDA has no trace of it; with it set, only the streamed
  variants it applies to change, and each compiles with NVRTC for sm_90a;
- the generated CUDA run by the CPU emulator of TMA, mbarriers, wgmma and named barriers
  (tests/codegen/test_gemm_sm90_edges.py: every CUDA thread an OS thread; a wait that never
  completes aborts it, and so do named-barrier arrivals left over at the end of a CTA) against the
  CPU executor, at shapes that are not tile multiples, with 0, 1 and many turns a CTA;
- on an H100/H200 (marked `gpu`), the same against the CPU executor, causal with a query length
  different from the key length.
"""
from __future__ import annotations

import itertools
import math

import ml_dtypes
import numpy as np
import pytest

import tilenb
from tilenb.codegen import generate
from tilenb.codegen.nvrtc import nvrtc_available, nvrtc_compile
from tilenb.examples import suite_kernels as SK
from tilenb.switches import SWITCHES

from support.cuda_emulator import needs_gxx  # noqa: E402
from test_gemm_sm90_edges import assert_close, build_sm90, run_sm90  # noqa: E402

BF16 = ml_dtypes.bfloat16
needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="needs NVRTC")

KERNELS = {"attention_bf16": SK.ATTENTION, "attention_tc_bf16": SK.ATTENTION_TC,
           "attention_causal_bf16": SK.ATTENTION_CAUSAL}
SPACE = [dict(BR=br, BC=bc, D=d, NT=nt) for br, bc, d, nt in itertools.product([64, 128], [64, 128], [64, 128], [128, 256])]
APPLIES = [v for v in SPACE if v["BR"] == 128 and v["NT"] == 256]


def vid(v):
    return "BR%(BR)d_BC%(BC)d_D%(D)d_NT%(NT)d" % v


def kernel(name, tag, backend="cpu", text=None):
    """The kernel compiled afresh (a distinct comment: the checked program, its analyses and its
    CUDA are cached per text, and the switch is read when they are made)."""
    src = (text or KERNELS[name]) + f"\n// {tag}\n"
    return tilenb.compile(src, backend=backend).kernels[name], src


@pytest.fixture
def pingpong(monkeypatch):
    """Wherever it is safe (2), so that every variant exercises the protocol, paying or not."""
    monkeypatch.setattr(SWITCHES, "stream_pingpong", 2)


def ring_of(a):
    rings = list(a.lowering.rings.values())
    return rings[0] if rings else None


# ---- the decision ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("variant", APPLIES, ids=vid)
def test_it_applies_to_the_two_warpgroup_variants(name, variant, pingpong):
    k, _ = kernel(name, "pp on")
    a = k.analysis(arch="sm_90", **variant)
    ring = ring_of(a)
    assert ring is not None and ring.defer and ring.pingpong, ring and ring.pingpong_why
    assert "warpgroups 0 and 1 take turns" in ring.pingpong_why
    (lp,) = a.loops
    assert lp.lowering == "streamed attention on wgmma" and "ping-pong: warpgroups 0 and 1 take turns" in lp.why
    named = [w for w in a.waits if w.kind == "named barrier"]
    # before the turn's first product (turn 0 only) and before its last (every turn)
    assert len(named) == 2 and all("warpgroup ping-pong" in w.reason for w in named)
    body = ring.loop.body
    lines = {s.span.line for s in body}
    assert {w.line for w in named} <= lines
    assert {w.barrier for w in named} == {"named barrier 1 (warpgroup 0) / 2 (warpgroup 1)"}


@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("variant", [v for v in SPACE if v["NT"] == 128 and v not in APPLIES], ids=vid)
def test_one_warpgroup_has_no_one_to_take_turns_with(name, variant, pingpong):
    k, _ = kernel(name, "pp on")
    a = k.analysis(arch="sm_90", **variant)
    ring = ring_of(a)
    if ring is None:
        assert [lp.lowering for lp in a.loops] == ["mma.sync"]
        return
    assert not ring.pingpong and ring.pingpong_why == "not with 128 threads: it needs two warpgroups (256 threads)"
    assert "ping-pong: not with 128 threads" in a.loops[0].why
    assert not [w for w in a.waits if w.kind == "named barrier"]


@pytest.mark.parametrize("name", KERNELS)
def test_rows_that_do_not_split_by_warpgroup_do_not_stream_at_all(name, pingpong):
    """64 rows on 256 threads: 16 rows a warp on 4 of the 8 warps; the loop keeps mma.sync."""
    k, _ = kernel(name, "pp on")
    a = k.analysis(arch="sm_90", BR=64, BC=64, D=64, NT=256)
    assert ring_of(a) is None and [lp.lowering for lp in a.loops] == ["mma.sync"] and a.waits == ()
    assert "tnb_pp_" not in k.cuda_source(arch="sm_90", BR=64, BC=64, D=64, NT=256)


@pytest.mark.parametrize("arch", [None, "sm_80"])
def test_other_targets_have_no_ring_and_no_waits(arch, pingpong):
    k, _ = kernel("attention_bf16", "pp on")
    a = k.analysis(arch=arch, BR=128, BC=64, D=64, NT=256)
    assert a.lowering.rings == {} and a.waits == ()
    assert "tnb_pp_" not in k.cuda_source(arch=arch, BR=128, BC=64, D=64, NT=256)


def test_off_with_its_reason(monkeypatch):
    monkeypatch.setattr(SWITCHES, "stream_pingpong", 0)
    k, _ = kernel("attention_bf16", "pp off")
    a = k.analysis(arch="sm_90", BR=128, BC=128, D=128, NT=256)
    ring = ring_of(a)
    assert not ring.pingpong and ring.pingpong_why == "off (TILENB_STREAM_PINGPONG=0)"
    # the ring's mbarrier waits are listed all the same: every warp's full waits, thread 0's empty wait
    assert [(w.kind, w.who, w.barrier) for w in a.waits] == [
        ("mbarrier", "every warp", "full[stage][0]"), ("mbarrier", "thread 0", "empty[stage]"),
        ("mbarrier", "every warp", "full[stage][1]")]
    assert "tnb_pp_" not in k.cuda_source(arch="sm_90", BR=128, BC=128, D=128, NT=256)


@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("variant", APPLIES, ids=vid)
def test_by_default_only_where_it_pays(name, variant):
    assert SWITCHES.stream_pingpong == 1
    k, _ = kernel(name, "pp default")
    ring = ring_of(k.analysis(arch="sm_90", **variant))
    pays = variant["BC"] * variant["D"] >= 128 * 128
    assert ring.pingpong == pays, ring.pingpong_why
    if not pays:
        assert ring.pingpong_why.startswith("it would not pay: the streamed [%d, %d] slice" % (variant["BC"], variant["D"]))
    assert ("tnb_pp_sync(" in k.cuda_source(arch="sm_90", **variant)) == pays


def test_a_last_product_waited_for_in_its_turn_keeps_the_warpgroups_apart(pingpong, monkeypatch):
    monkeypatch.setattr(SWITCHES, "stream_defer", False)
    k, _ = kernel("attention_bf16", "pp on, defer off")
    ring = ring_of(k.analysis(arch="sm_90", BR=128, BC=64, D=64, NT=256))
    assert not ring.defer and not ring.pingpong
    assert ring.pingpong_why.startswith("the turn's last product is waited for in its own turn")


BARRIER_IN_LOOP = SK.ATTENTION.replace("    m = m_new\n", "    m = m_new\n    barrier()\n")


def test_a_cta_barrier_in_the_loop_keeps_the_warpgroups_apart(pingpong):
    assert BARRIER_IN_LOOP != SK.ATTENTION
    k, _ = kernel("attention_bf16", "pp on, barrier", text=BARRIER_IN_LOOP)
    a = k.analysis(arch="sm_90", BR=128, BC=64, D=64, NT=256)
    ring = ring_of(a)
    assert ring is not None and not ring.pingpong
    line = next(s.span.line for s in ring.loop.body if type(s).__name__ == "Barrier")
    assert f"line {line}" in ring.pingpong_why
    assert "tnb_pp_" not in k.cuda_source(arch="sm_90", BR=128, BC=64, D=64, NT=256)


def test_the_barriers_view_lists_the_named_barrier_waits_with_their_reasons(pingpong):
    from tilenb.notebook import build, summary
    k, src = kernel("attention_bf16", "pp on, view")
    a = k.analysis(arch="sm_90", BR=128, BC=128, D=128, NT=256).to_json()
    named = [w for w in a["waits"] if w["kind"] == "named barrier"]
    assert len(named) == 2 and set(named[0]) == {"line", "position", "where", "kind", "who", "barrier", "reason"}
    (view,) = build.from_analysis(a, src, ["barriers"])
    assert view.waits == a["waits"]
    text = summary._text_barriers({"kernel": k.name, "barriers": a["barriers"], "waits": a["waits"],
                                   "lines": view.lines})
    marks = [ln for ln in text.splitlines() if "named barrier wait" in ln]
    assert len(marks) == 2 and all("warpgroup ping-pong" in ln for ln in marks)


# ---- the generated code --------------------------------------------------------------------------
@pytest.mark.parametrize("name", KERNELS)
def test_only_the_variants_it_applies_to_change(name, monkeypatch):
    monkeypatch.setattr(SWITCHES, "stream_pingpong", 0)
    off, _ = kernel(name, "pp compare")
    before = {vid(v): off.cuda_source(arch="sm_90", **v) for v in SPACE}
    monkeypatch.setattr(SWITCHES, "stream_pingpong", 2)
    on, _ = kernel(name, "pp compare, on")
    for v in SPACE:
        src = on.cuda_source(arch="sm_90", **v)
        if v in APPLIES:
            body = src.split('extern "C"')[-1]
            assert src != before[vid(v)]
            # one arrival before the loop; per dot form (A by descriptor, by ldmatrix, masked) the
            # first dot's wait and arrival; per form of the last (whole K, masked) its wait and arrival
            assert body.count("tnb_pp_arrive(1);") == 1
            assert body.count("tnb_pp_sync(") == body.count("tnb_pp_arrive(tnb_warp < 4 ? 2 : 1);") + 2
            assert body.count("tnb_pp_arrive(2);") == 2
        else:
            assert src == before[vid(v)], vid(v)


@needs_nvrtc
@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("variant", APPLIES, ids=vid)
def test_it_compiles_for_sm90a(name, variant, pingpong):
    k, _ = kernel(name, "pp on, nvrtc")
    src = k.cuda_source(arch="sm_90", **variant)
    assert "tnb_pp_sync" in src
    assert nvrtc_compile(src, "sm_90a")


# ---- emulated, against the CPU executor ------------------------------------------------------------
def inputs(H, N, Nk, D, seed=0):
    r = np.random.default_rng(seed)
    q, k, v = (r.standard_normal((H, n, D)).astype(BF16) for n in (N, Nk, Nk))
    return [q, k, v, np.full((H, N, D), np.nan, BF16), np.float32(1.0 / math.sqrt(D))]


def run_cpu(kern, args, variant):
    out = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    kern(*out, variant=variant)
    return out


# the first query block's CTA runs no turn (its rows come out 0 / 0); the others every key block
NO_TURNS = SK.ATTENTION.replace("for kt in range(0, Nk, BC)", "for kt in range(0, Nk * min(ctx.block.x, 1), BC)")


@needs_gxx
@pytest.mark.parametrize("name,variant,shape", [
    ("attention_bf16", dict(BR=128, BC=64, D=64, NT=256), (1, 200, 333)),      # 6 turns, 4 stages, 2 ahead
    ("attention_tc_bf16", dict(BR=128, BC=128, D=128, NT=256), (1, 130, 300)),  # 3 turns, 3 stages, 1 ahead
    ("attention_bf16", dict(BR=128, BC=128, D=64, NT=256), (1, 150, 50)),       # one turn
    ("attention_causal_bf16", dict(BR=128, BC=64, D=64, NT=256), (1, 200, 150)),   # 2 and 3 turns a CTA
    ("attention_causal_bf16", dict(BR=128, BC=64, D=128, NT=256), (1, 150, 333)),  # 2 and 4 turns a CTA
], ids=["many_turns", "three_stages", "one_turn", "causal_more_queries", "causal_more_keys"])
def test_emulated_pingpong_matches_the_cpu_executor(name, variant, shape, pingpong, tmp_path):
    H, N, Nk = shape
    k, src = kernel(name, "pp on, emulated")
    assert ring_of(k.analysis(arch="sm_90", **variant)).pingpong
    args = inputs(H, N, Nk, variant["D"], seed=N + Nk)
    cpu = run_cpu(k, args, variant)
    ks = generate(k.ir(**variant), src, 0, arch="sm_90")
    assert "tnb_pp_sync" in ks.source
    grid = (H, -(-N // variant["BR"])) if "causal" in name else (-(-N // variant["BR"]), H)
    exe = build_sm90(ks, args, {"H": H, "N": N, "Nk": Nk, "D": variant["D"]}, grid, tmp_path)
    for tma, late in ((1, 0), (1, 1), (0, 0)):
        got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        run_sm90(exe, got, tmp_path, tma, late)
        assert_close(got[3], cpu[3].astype(np.float64), f"ping-pong {name} {vid(variant)} at {shape} "
                     f"(tma={tma}, late={late})", rtol=2e-2, atol=2e-2)


@needs_gxx
def test_emulated_pingpong_with_a_cta_that_runs_no_turn(pingpong, tmp_path):
    variant = dict(BR=128, BC=64, D=64, NT=256)
    H, N, Nk = 1, 200, 100
    k, src = kernel("attention_bf16", "pp on, no turns", text=NO_TURNS)
    assert ring_of(k.analysis(arch="sm_90", **variant)).pingpong
    args = inputs(H, N, Nk, variant["D"], seed=7)
    cpu = run_cpu(k, args, variant)
    assert np.isnan(cpu[3][:, :128].astype(np.float64)).all()      # 0 / 0: the CTA ran no turn
    ks = generate(k.ir(**variant), src, 0, arch="sm_90")
    exe = build_sm90(ks, args, {"H": H, "N": N, "Nk": Nk, "D": variant["D"]}, (2, H), tmp_path)
    got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    run_sm90(exe, got, tmp_path, 1, 0)      # aborts on a hang or on named-barrier arrivals left over
    assert np.isnan(got[3][:, :128].astype(np.float64)).all()
    assert_close(got[3][:, 128:], cpu[3][:, 128:].astype(np.float64), "the CTA with turns", rtol=2e-2, atol=2e-2)


# ---- on the GPU --------------------------------------------------------------------------------------
def _on_hopper() -> bool:
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0 and cupy.cuda.Device().compute_capability == "90"
    except Exception:
        return False


@pytest.mark.gpu
@pytest.mark.skipif(not _on_hopper(), reason="needs an H100/H200")
@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("variant", APPLIES, ids=vid)
@pytest.mark.parametrize("shape", [(3, 200, 333), (3, 333, 200)], ids=["more_keys", "more_queries"])
def test_on_hopper_pingpong_matches_the_cpu_executor(name, variant, shape, pingpong):
    import cupy
    H, N, Nk = shape
    args = inputs(H, N, Nk, variant["D"], seed=N * 3 + Nk)
    cpu_k, _ = kernel(name, "pp on, gpu, cpu side")
    assert ring_of(cpu_k.analysis(arch="sm_90", **variant)).pingpong
    cpu = run_cpu(cpu_k, args, variant)
    gpu, _ = kernel(name, "pp on, gpu", backend="cuda")
    dev = [cupy.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
    gpu(*dev, variant=variant)
    cupy.cuda.Device().synchronize()
    assert "sm_90" in str(gpu.last_run.extra.get("arch"))
    assert "tnb_pp_sync" in gpu.cuda_source(arch="sm_90", **variant)
    got = cupy.asnumpy(dev[3])
    assert_close(got, cpu[3].astype(np.float64), f"ping-pong {name} {vid(variant)} on the GPU at {shape}",
                 rtol=2e-2, atol=2e-2)
    want = SK.ref_attention(args[0], args[1], args[2], args[4], causal="causal" in name)
    assert_close(got, want, f"ping-pong {name} {vid(variant)} on the GPU at {shape}, against numpy",
                 rtol=3e-2, atol=3e-2)


@needs_gxx
def test_the_emulator_catches_an_arrival_left_over(pingpong, tmp_path):
    """Warpgroup 1 arriving after its last turn too leaves 128 arrivals at barrier 1 at the end
    of the CTA, which would complete a later wait early: the emulation aborts."""
    import dataclasses
    variant = dict(BR=128, BC=64, D=64, NT=256)
    k, src = kernel("attention_bf16", "pp on, broken")
    ks = generate(k.ir(**variant), src, 0, arch="sm_90")
    good = "&& tnb_warp < 4) tnb_pp_arrive(2);"
    assert good in ks.source
    bad = dataclasses.replace(ks, source=ks.source.replace(good, ") tnb_pp_arrive(tnb_warp < 4 ? 2 : 1);"))
    args = inputs(1, 100, 100, 64, seed=1)
    exe = build_sm90(bad, args, {"H": 1, "N": 100, "Nk": 100, "D": 64}, (1, 1), tmp_path)
    with pytest.raises(RuntimeError, match="arrivals left over"):
        run_sm90(exe, [a.copy() if isinstance(a, np.ndarray) else a for a in args], tmp_path, 1, 0)


@needs_gxx
def test_emulated_pingpong_loop_run_twice_in_a_cta(pingpong, tmp_path):
    """The streamed loop inside `for<unroll 2>` over the heads: each CTA runs two ping-pong loops one
    after the other, the second starting on the named barriers the first left (empty)."""
    from test_streamed_sm90 import UNROLLED
    variant = dict(BR=128, BC=64, D=64, NT=256)
    H, N, Nk = 2, 150, 200
    k, src = kernel("attention_bf16", "pp on, unrolled", text=UNROLLED)
    assert ring_of(k.analysis(arch="sm_90", **variant)).pingpong
    args = inputs(H, N, Nk, variant["D"], seed=11)
    cpu = run_cpu(k, args, variant)
    ks = generate(k.ir(**variant), src, 0, arch="sm_90")
    # one loop a copy of the unrolled body: two a whole turn of the unrolled loop, one for the rest
    assert ks.source.count("tnb_pp_arrive(1);") == 3
    exe = build_sm90(ks, args, {"H": H, "N": N, "Nk": Nk, "D": variant["D"]}, (2, 1), tmp_path)
    got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    run_sm90(exe, got, tmp_path, 1, 0)
    assert_close(got[3], cpu[3].astype(np.float64), "two ping-pong loops in a CTA", rtol=2e-2, atol=2e-2)
