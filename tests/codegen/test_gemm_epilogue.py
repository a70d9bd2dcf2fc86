"""The experiment switches of a wgmma accumulator's staged store and of a GEMM pipeline's entry
(tilenb/switches.py: TILENB_GEMM_TMA_STORE, TILENB_GEMM_WG_EPILOGUE, TILENB_GEMM_FULL_STAGE,
TILENB_GEMM_LEAN_SYNC; the decisions are `tilenb.analysis.gemm_loops.plan_epilogue` and
`entry_free`, the code `codegen/sm90/gemm.planned_store` and `emit_gemm_loop`).

Without a GPU: which stores each switch changes and how (TMA only into a tensor no other
statement reads or writes, a wait for the writes inside a loop, no barrier after the kernel's
last statement, full staging only of register values), that unset switches change nothing, and
that the suite's GEMM variants compile with NVRTC for sm_90a with each switch on and all on.
On an H100/H200 (marked `gpu`): the suite's GEMM and a GEMM whose C is wider than the product
(its valid region narrower than the tensor) against numpy at shapes that are not tile multiples,
f16 and bf16, a C whose row stride is 16-byte aligned (the bulk tensor stores clip at the
tensor's edges) and one whose is not (no tensor map: the threads store), with each switch on
and all on; elements outside the valid region must keep their NaN poison.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tilenb
from tilenb import ir
from tilenb.analysis import analyze
from tilenb.analysis.gemm_loops import plan_epilogue
from tilenb.codegen import generate
from tilenb.codegen.nvrtc import nvrtc_available, nvrtc_compile
from tilenb.examples import suite_kernels as SK
from tilenb.switches import SWITCHES

needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="NVRTC is not installed")

_FIELDS = ("gemm_tma_store", "gemm_wg_epilogue", "gemm_full_stage", "gemm_lean_sync")
# each set names every epilogue switch (the others off), so that a default that changes leaves the sets as they are
SETS = {name: {f: f in on for f in _FIELDS} for name, on in {
    "tma": ("gemm_tma_store",),
    "wg": ("gemm_wg_epilogue",),
    "full": ("gemm_full_stage",),
    "lean": ("gemm_lean_sync",),
    "all": _FIELDS,
    "none": (),
}.items()}

# C wider than the product: the accumulator's valid region (B's N columns) is narrower than C
WIDE_C = """
@launch(256)
@grid(cdiv(M, 128), cdiv(N, 256))
kernel wide(A: tensor<{T}>[M, K], B: tensor<{T}>[K, N], C: tensor<{T}>[M, NC]) {
  var acc: tile<f32>[128, 256] = 0.0
  for kt in range(0, K, 64) {
    acc += dot(A[ctx.block.x * 128 :+ 128, kt :+ 64], B[kt :+ 64, ctx.block.y * 256 :+ 256])
  }
  C[ctx.block.x * 128 :+ 128, ctx.block.y * 256 :+ 256] = acc
}
"""

# C read back by a later statement: no TMA store (the copy engine's writes are not ordered with it)
READ_BACK = """
@launch(256)
@grid(cdiv(M, 128), cdiv(N, 128))
kernel back(A: tensor<f16>[M, K], B: tensor<f16>[K, N], C: tensor<f16>[M, N], D: tensor<f16>[M, N]) {
  var acc: tile<f32>[128, 128] = 0.0
  for kt in range(0, K, 64) {
    acc += dot(A[ctx.block.x * 128 :+ 128, kt :+ 64], B[kt :+ 64, ctx.block.y * 128 :+ 128])
  }
  C[ctx.block.x * 128 :+ 128, ctx.block.y * 128 :+ 128] = acc
  barrier()
  D[ctx.block.x * 128 :+ 128, ctx.block.y * 128 :+ 128] = C[ctx.block.x * 128 :+ 128, ctx.block.y * 128 :+ 128]
}
"""

# the accumulator starts from a tensor: the pipeline keeps its entry barrier under TILENB_GEMM_LEAN_SYNC
FROM_BIAS = """
@launch(256)
@grid(cdiv(M, 128), cdiv(N, 128))
kernel from_bias(A: tensor<f16>[M, K], B: tensor<f16>[K, N], Bias: tensor<f32>[M, N], C: tensor<f16>[M, N]) {
  var acc: tile<f32>[128, 128] = Bias[ctx.block.x * 128 :+ 128, ctx.block.y * 128 :+ 128]
  for kt in range(0, K, 64) {
    acc += dot(A[ctx.block.x * 128 :+ 128, kt :+ 64], B[kt :+ 64, ctx.block.y * 128 :+ 128])
  }
  C[ctx.block.x * 128 :+ 128, ctx.block.y * 128 :+ 128] = acc
}
"""

# a value that reads a tensor: staged with the valid-region test even under TILENB_GEMM_FULL_STAGE
BIAS = """
@launch(256)
@grid(cdiv(M, 128), cdiv(N, 128))
kernel bias(A: tensor<f16>[M, K], B: tensor<f16>[K, N], Bias: tensor<f32>[M, N], C: tensor<f16>[M, N]) {
  var acc: tile<f32>[128, 128] = 0.0
  for kt in range(0, K, 64) {
    acc += dot(A[ctx.block.x * 128 :+ 128, kt :+ 64], B[kt :+ 64, ctx.block.y * 128 :+ 128])
  }
  C[ctx.block.x * 128 :+ 128, ctx.block.y * 128 :+ 128] = acc + Bias[ctx.block.x * 128 :+ 128, ctx.block.y * 128 :+ 128]
}
"""


def _set(monkeypatch, which):
    for name, v in SETS[which].items():
        monkeypatch.setattr(SWITCHES, name, v)


def _kernel(text, name, tag, backend="cpu"):
    # a comment per switch set: the module, its analysis and its generated CUDA are cached by text
    return getattr(tilenb.compile(text + f"\n// switches: {tag}\n", backend=backend), name)


def _suite(dt, tag, backend="cpu"):
    return _kernel(SK.GEMM.replace("{T}", dt), f"gemm_{dt}", tag, backend)


def _plans(k, **tune):
    low = analyze(k.ir(**tune), arch="sm_90").lowering
    return low, list(low.epilogues.values())


def test_switches_off_plan_nothing_and_change_no_code(monkeypatch):
    _set(monkeypatch, "none")
    k = _suite("f16", "none")
    tune = dict(TM=128, TN=256, TK=64, GM=8, NT=256)
    low, plans = _plans(k, **tune)
    assert low.gemm and plans == []
    src = generate(k.ir(**tune), k.module.checked.source.text, arch="sm_90").source
    assert "tnb_tma_st" not in src and "bar.sync" not in src and "tnb_named_sync" not in src
    assert src.rstrip().endswith("__syncthreads();  // codegen-internal: the staging bytes may be reused\n  }\n}")


@pytest.mark.parametrize("tn", [128, 256])
def test_each_switch_plans_the_suite_gemm_store(monkeypatch, tn):
    tune = dict(TM=128, TN=tn, TK=64, GM=8, NT=256)
    for which in (w for w in SETS if w != "none"):
        _set(monkeypatch, which)
        k = _suite("bf16", f"{which}{tn}")
        low, plans = _plans(k, **tune)
        assert len(plans) == 1, which
        p = plans[0]
        lay = p.layout
        assert (lay.M, lay.N) == (128, tn) and p.tensor == "C" and p.last and not p.in_loop
        assert p.tma == SWITCHES.gemm_tma_store and p.full_stage == SWITCHES.gemm_full_stage
        assert p.per_warpgroup == SWITCHES.gemm_wg_epilogue and p.after_loop == SWITCHES.gemm_lean_sync
        assert low.lean_entries == ({id(s) for s in k.ir(**tune).body if isinstance(s, ir.For)}
                                    if SWITCHES.gemm_lean_sync else set())
        # each warpgroup holds 64 rows of the accumulator (m64 parts, split along M)
        assert (p.rows, p.cols) == ((64, tn) if p.per_warpgroup else (128, tn))
        if p.tma:
            assert (p.box_cols, p.span) == (64, 128)
        ks = generate(k.ir(**tune), k.module.checked.source.text, arch="sm_90")
        src = ks.source
        stores = [t for t in ks.tmaps if t.flag == "tnb_tma_st"]
        if p.tma:
            assert [(t.tensor, t.box, t.swizzle) for t in stores] == [("C", (64, p.rows), 128)]
            assert src.count("tnb_tma_store_2d(&tnb_st0") == tn // 64 and "int tnb_tma, int tnb_tma_st)" in src
            assert "tnb_bulk_wait_read();" in src and "tnb_bulk_wait();" not in src
        else:
            assert not stores and "tnb_tma_st" not in src
        assert ("tnb_named_sync(1 + " in src) == p.per_warpgroup
        # full staging of 2-byte elements: stmatrix, a warp's 16 rows x 16 columns an instruction
        assert p.stmatrix == p.full_stage and src.count("tnb_stmatrix_x4(tnb_smem_u32") == int(p.full_stage)
        # the lean entry and store: the barriers and the fence that nothing before them needs are gone
        assert ("tnb_fence_async_global();" in src) != p.after_loop
        assert src.count("every thread is past the GEMM loop's last use") == int(not p.after_loop)
        # the last statement: no barrier after the store
        assert not src.rstrip().rsplit("\n", 4)[-3].strip().startswith("__syncthreads")
        monkeypatch.undo()


def test_tma_store_only_into_a_tensor_nothing_else_touches(monkeypatch):
    _set(monkeypatch, "tma")
    k = _kernel(READ_BACK, "back", "tma")
    _, plans = _plans(k)
    assert plans == []                          # C is read back: no TMA (and no other switch asks)
    _set(monkeypatch, "all")
    k = _kernel(READ_BACK, "back", "all")
    _, plans = _plans(k)
    # the first store (C) qualifies for the warpgroup epilogue only; it is not the last statement
    assert len(plans) == 1 and not plans[0].tma and plans[0].per_warpgroup and not plans[0].last
    src = generate(k.ir(), k.module.checked.source.text, arch="sm_90").source
    assert "tnb_tma_store" not in src and "tnb_named_sync(1 + " in src


def test_a_store_inside_a_loop_waits_for_the_writes(monkeypatch):
    _set(monkeypatch, "tma")
    k = _kernel(SK.GEMM_PERSISTENT.replace("{T}", "f16"), "gemm_persistent_f16", "tma")
    tune = dict(TM=128, TN=256, TK=64, GM=8, NT=256)
    _, plans = _plans(k, **tune)
    assert len(plans) == 1 and plans[0].in_loop and plans[0].tma and not plans[0].last
    src = generate(k.ir(**tune), k.module.checked.source.text, arch="sm_90").source
    assert "tnb_bulk_wait();" in src and "tnb_bulk_wait_read();" not in src


def test_lean_sync_keeps_the_barriers_something_needs(monkeypatch):
    _set(monkeypatch, "lean")
    k = _kernel(FROM_BIAS, "from_bias", "lean")
    low, plans = _plans(k)
    assert low.gemm and low.lean_entries == set()              # the accumulator was read from Bias first
    assert len(plans) == 1 and plans[0].after_loop           # the store comes right after the loop
    src = generate(k.ir(), k.module.checked.source.text, arch="sm_90").source
    assert "tnb_fence_async_global();" in src
    k = _kernel(SK.GEMM_PERSISTENT.replace("{T}", "f16"), "gemm_persistent_f16", "lean")
    low, plans = _plans(k, TM=128, TN=256, TK=64, GM=8, NT=256)
    assert low.lean_entries == set()                           # a loop inside a loop: a turn before it
    assert len(plans) == 1 and plans[0].after_loop and plans[0].in_loop and not plans[0].last
    k = _kernel(READ_BACK, "back", "lean")
    low, plans = _plans(k)
    assert len(low.lean_entries) == 1 and len(plans) == 1 and plans[0].after_loop   # the second store is no accumulator's


def test_full_stage_only_for_a_register_value(monkeypatch):
    _set(monkeypatch, "full")
    k = _kernel(BIAS, "bias", "full")
    _, plans = _plans(k)
    assert plans == []                          # the value reads Bias: nothing to change
    _set(monkeypatch, "all")
    k = _kernel(BIAS, "bias", "all")
    _, plans = _plans(k)
    assert len(plans) == 1 and not plans[0].full_stage and plans[0].tma


def test_plan_epilogue_leaves_what_is_not_an_accumulator_store():
    k = _suite("f16", "direct")
    kir = k.ir(TM=128, TN=256, TK=64, GM=8, NT=256)
    low = analyze(kir, arch="sm_90").lowering
    stmts = list(ir.walk_stmts(kir.body))
    store = stmts[-1]
    assert plan_epilogue(kir, store, low.gemm_layouts, 1 << 20, False, False, False) is None   # no switch
    p = plan_epilogue(kir, store, low.gemm_layouts, 1 << 20, True, False, False)
    assert p is not None and p.tma and p.stage_bytes == 128 * 256 * 2
    assert plan_epilogue(kir, store, low.gemm_layouts, p.stage_bytes - 1, True, False, False) is None  # no room
    for s in stmts[:-1]:                       # the lets, the accumulator, the loop and its statements
        assert plan_epilogue(kir, s, low.gemm_layouts, 1 << 20, True, True, True) is None


@needs_nvrtc
@pytest.mark.parametrize("which", list(SETS))
@pytest.mark.parametrize("dt,tn", [("f16", 256), ("bf16", 128)])
def test_suite_gemm_compiles_for_sm90a_with_the_switch(monkeypatch, which, dt, tn):
    _set(monkeypatch, which)
    k = _suite(dt, f"nvrtc {which}")
    tune = dict(TM=128, TN=tn, TK=64, GM=8, NT=256)
    ks = generate(k.ir(**tune), k.module.checked.source.text, arch="sm_90")
    assert ks.arch == "sm_90a" and nvrtc_compile(ks.source, "sm_90a", use_cache=False)


@needs_nvrtc
def test_wide_c_and_the_persistent_gemm_compile_with_every_switch(monkeypatch):
    _set(monkeypatch, "all")
    k = _kernel(WIDE_C.replace("{T}", "f16"), "wide", "all")
    ks = generate(k.ir(), k.module.checked.source.text, arch="sm_90")
    assert "tnb_tma_store_2d" in ks.source and nvrtc_compile(ks.source, "sm_90a", use_cache=False)
    k = _kernel(SK.GEMM_PERSISTENT.replace("{T}", "bf16"), "gemm_persistent_bf16", "all")
    ks = generate(k.ir(TM=128, TN=128, TK=64, GM=8, NT=256), k.module.checked.source.text, arch="sm_90")
    assert "tnb_bulk_wait();" in ks.source and nvrtc_compile(ks.source, "sm_90a", use_cache=False)


# ---- on the GPU -------------------------------------------------------------------------------
def _on_hopper():
    import cupy as cp
    return cp.cuda.Device().compute_capability == "90"


def _np(dt):
    return ml_dtypes.bfloat16 if dt == "bf16" else np.float16


def _check(c, want, dt, cols):
    """c's first `cols` columns match `want` (relative error), the rest keep the NaN poison."""
    got = c.astype(np.float64)
    err = np.abs(got[:, :cols] - want).max() / (np.abs(want).max() + 1e-9)
    assert err < (1e-2 if dt == "bf16" else 2e-3), err
    assert np.isnan(got[:, cols:]).all()


@pytest.mark.gpu
@pytest.mark.parametrize("which", list(SETS))
@pytest.mark.parametrize("dt", ["f16", "bf16"])
@pytest.mark.parametrize("N", [776, 780])     # 780: C's (and B's) row stride, 1,560 bytes, not 16-byte aligned
# (a row length must be a multiple of 4 elements: tilenb.runtime.checks)
def test_suite_gemm_matches_numpy_with_the_switch(monkeypatch, which, dt, N):
    if not _on_hopper():
        pytest.skip("the wgmma lowering runs on compute capability 9.0 only")
    _set(monkeypatch, which)
    M, K = 1000, 320
    k = _suite(dt, f"gpu {which}", backend="cuda")
    r = np.random.default_rng(M + N + K)
    a = r.standard_normal((M, K)).astype(_np(dt))
    b = r.standard_normal((K, N)).astype(_np(dt))
    want = a.astype(np.float64) @ b.astype(np.float64)
    for tn in (128, 256):
        c = np.full((M, N), np.nan).astype(_np(dt))
        k(a, b, c, variant=dict(TM=128, TN=tn, TK=64, GM=8, NT=256))
        _check(c, want, dt, N)


@pytest.mark.gpu
@pytest.mark.parametrize("which", ["tma", "all"])
@pytest.mark.parametrize("dt", ["f16", "bf16"])
@pytest.mark.parametrize("NC", [784, 780])    # 784: a tensor map of C, but the last column tile is
def test_a_c_wider_than_the_product_keeps_its_extra_columns(monkeypatch, which, dt, NC):
    # ... narrower in value than in C: the threads store it; 780: no tensor map of C while A and B
    # have theirs (the GEMM loop keeps its TMA copies: a flag of its own)
    if not _on_hopper():
        pytest.skip("the wgmma lowering runs on compute capability 9.0 only")
    _set(monkeypatch, which)
    M, N, K = 1000, 520, 320
    k = _kernel(WIDE_C.replace("{T}", dt), "wide", f"gpu {which}", backend="cuda")
    r = np.random.default_rng(NC)
    a = r.standard_normal((M, K)).astype(_np(dt))
    b = r.standard_normal((K, N)).astype(_np(dt))
    c = np.full((M, NC), np.nan).astype(_np(dt))
    k(a, b, c)
    _check(c, a.astype(np.float64) @ b.astype(np.float64), dt, N)


def test_the_store_maps_have_a_flag_of_their_own(monkeypatch):
    # the launcher's arguments after the dims: the maps, tnb_tma (the GEMM loops' copies), then
    # tnb_tma_st (the bulk tensor stores): a C no tensor map describes keeps A's and B's copies
    from tilenb.codegen.sm90.gemm import TmaSpec, tma_flags
    from tilenb.runtime.gpu import tma
    specs = (TmaSpec("A", "f16", (64, 128), 128, "tnb_tm0a"), TmaSpec("B", "f16", (64, 64), 128, "tnb_tm0b"),
             TmaSpec("C", "f16", (64, 64), 128, "tnb_st0", "tnb_tma_st"))
    assert tma_flags(specs) == ["tnb_tma", "tnb_tma_st"] and tma_flags(specs[:2]) == ["tnb_tma"]
    monkeypatch.setattr(tma, "encode", lambda ptr, shape, dt, box, swz: None if shape[-1] % 8 else bytes(128))

    class KS:
        tmaps = specs
    args = tma.extra_args(KS, {"A": (0, (100, 320)), "B": (0, (320, 776)), "C": (0, (100, 777))})
    assert len(args) == 5 and [int(x) for x in args[3:]] == [1, 0]
    args = tma.extra_args(KS, {"A": (0, (100, 320)), "B": (0, (320, 777)), "C": (0, (100, 776))})
    assert [int(x) for x in args[3:]] == [0, 1]

    class Loops:
        tmaps = specs[:2]
    assert len(tma.extra_args(Loops, {"A": (0, (100, 320)), "B": (0, (320, 776))})) == 3


# ---- the emulator of TMA, mbarriers, wgmma, bulk tensor stores and named barriers ---------------
@pytest.mark.parametrize("which,persistent", [("all", False), ("full", False), ("tma", True), ("wg", True),
                                               ("lean", True)])
def test_emulated_kernel_matches_numpy_with_the_switch(monkeypatch, tmp_path, which, persistent):
    """tests/codegen/test_gemm_sm90_edges.py's emulator (every CUDA thread an OS thread): both
    store paths (tensor maps or not), the copy engine reading the staged bytes at issue or as late
    as the issuing thread's wait allows; the persistent GEMM reuses the staging area tile after
    tile. Shapes not tile multiples; C's elements outside the product keep their NaN."""
    from support.cuda_emulator import available
    if not available():
        pytest.skip("no g++ for the emulator")
    from test_gemm_sm90_edges import build_sm90, run_sm90
    _set(monkeypatch, which)
    M, N, K, TN = 150, 264, 72, 128
    if persistent:
        k = _kernel(SK.GEMM_PERSISTENT.replace("{T}", "f16"), "gemm_persistent_f16", f"emu {which}")
    else:
        k = _suite("f16", f"emu {which}")
    tune = dict(TM=128, TN=TN, TK=64, GM=8, NT=256)
    ks = generate(k.ir(**tune), k.module.checked.source.text, arch="sm_90")
    assert ks.arch == "sm_90a"
    assert ("tnb_tma_store_2d" in ks.source) == SWITCHES.gemm_tma_store
    r = np.random.default_rng(5)
    a, b = r.standard_normal((M, K)).astype(np.float16), r.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float16)
    args, grid = ([a, b, c, 2], (2,)) if persistent else ([a, b, c], (2, 3))
    exe = build_sm90(ks, args, dict(M=M, N=N, K=K), grid, tmp_path)
    want = a.astype(np.float64) @ b.astype(np.float64)
    for tma in (1, 0):
        for late in (0, 1):
            got = [x.copy() if isinstance(x, np.ndarray) else x for x in args]
            run_sm90(exe, got, tmp_path, tma, late)
            _check(got[2], want, "f16", N)


def test_the_probe_tells_each_switch_set_by_its_code(monkeypatch):
    # bench/probes/gemm_epilogue.py times a variant only if its CUDA is that of its switch set
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "probes"))
    from gemm_epilogue import code_matches, switches
    tune = dict(TM=128, TN=256, TK=64, GM=8, NT=256)
    srcs = {}
    for name in ("none", "tma", "wg", "full", "lean", "tma+wg", "tma+wg+full+lean"):
        with switches(name):
            k = _suite("f16", f"probe {name}")
            srcs[name] = generate(k.ir(**tune), k.module.checked.source.text, arch="sm_90").source
    assert [getattr(SWITCHES, f) for f in _FIELDS] == [False, False, True, False]   # restored: the defaults
    for name, src in srcs.items():
        assert [other for other in srcs if code_matches(other, src)] == [name]
