"""One home for the target machine (tilenb/target.py): every documented spelling of a target
parses to the same Target; a spelling that names no GPU is refused naming the value; the code
`cuda_source(arch=a)` generates compiles with `nvrtc_compile(src, a)` for every spelling a of
sm_90, with the wgmma path present; every shared-memory limit the checker, the analysis, the
generator and the launcher use is read from the one table.

Runs without a GPU (the compile tests need the nvidia-cuda-nvrtc-cu12 wheel); the test marked
gpu compares the device's own Target, from its driver's attributes, with the table.
"""
from __future__ import annotations

import dataclasses

import pytest

import tilenb
from tilenb import TileError, UnsupportedError
from tilenb.analysis import DYNAMIC_BUDGET, STATIC_BUDGET, analyze
from tilenb.codegen import generate, nvrtc_available
from tilenb.codegen import nvrtc as nv
from tilenb.target import ANY, CAPABILITIES, STATIC_SMEM, Target, from_device, target

from tilenb.examples import suite_kernels  # noqa: E402

needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="libnvrtc cannot be loaded (install nvidia-cuda-nvrtc-cu12)")

SM90_SPELLINGS = ["sm_90", "sm_90a", "compute_90", "compute_90a", "sm90", "SM_90A", " sm_90 ", 90, "90", "9.0", 9.0,
                  (9, 0), target("sm_90")]


def _spellings(major: int, minor: int, arch_specific: bool):
    n = major * 10 + minor
    out = [f"sm_{n}", f"compute_{n}", f"sm{n}", n, str(n), f"{major}.{minor}", float(f"{major}.{minor}"),
           (major, minor)]
    if arch_specific:
        out += [f"sm_{n}a", f"compute_{n}a"]
    return out


# ---- parsing ----------------------------------------------------------------------------------
@pytest.mark.parametrize("cc", sorted(CAPABILITIES), ids=lambda cc: f"{cc[0]}.{cc[1]}")
def test_every_spelling_parses_to_the_canonical_target(cc):
    canon = target(f"sm_{cc[0] * 10 + cc[1]}")
    assert canon.cc == cc and canon.name == f"sm_{cc[0] * 10 + cc[1]}"
    for s in _spellings(*cc, CAPABILITIES[cc][2]):
        t = target(s)
        assert t == canon and hash(t) == hash(canon), s
    assert target(canon) is canon


def test_sm90_spellings_are_one_hopper_target():
    ts = {target(s) for s in SM90_SPELLINGS}
    assert len(ts) == 1
    (t,) = ts
    assert t.hopper and t.clusters and t.nvrtc_arch() == "sm_90a" and t.nvrtc_arch(ptx=True) == "compute_90a"
    # no other capability runs the sm_90a paths; None is code for any GPU
    assert [cc for cc in CAPABILITIES if target(cc).hopper] == [(9, 0)]
    assert target(None) is ANY and not ANY.hopper and ANY.name is None
    assert target("sm_80").nvrtc_arch() == "sm_80" and not target("sm_80").clusters


@pytest.mark.parametrize("bad", ["garbage", "sm_7", "sm_", "", "sm_90b", "sm_80a", "sm_30", "compute_35", 35, 9, 0,
                                 "sm_77", 77, (7, 7), (9,), [9, 0], 9.05, True, "9.0.1", object()])
def test_a_spelling_that_names_no_gpu_is_refused_naming_it(bad):
    with pytest.raises(UnsupportedError) as e:
        target(bad)
    assert repr(bad) in e.value.message and "names no GPU target" in e.value.message
    assert e.value.value is bad and e.value.reason
    k = tilenb.compile(suite_kernels.GEMM.replace("{T}", "bf16"), backend="cpu").gemm_bf16
    with pytest.raises(UnsupportedError, match=r"cuda_source\(arch=.*\) names no GPU target") as e2:
        k.cuda_source(arch=bad, TM=128, TN=128, TK=64, NT=256)
    assert repr(bad) in e2.value.message and e.value.reason in e2.value.message
    with pytest.raises(UnsupportedError):
        nv.nvrtc_compile('extern "C" __global__ void k() {}', bad, use_cache=False)


def test_nvrtc_needs_a_target():
    with pytest.raises(UnsupportedError, match="NVRTC needs a GPU target"):
        nv.nvrtc_compile('extern "C" __global__ void k() {}', None, use_cache=False)


# ---- the sm_90 paths for every spelling, through NVRTC --------------------------------------------
GEMM_TUNE = dict(TM=128, TN=128, TK=64, NT=256)
ATTN_TUNE = dict(BR=128, BC=64, D=64, NT=128)


def _kernels():
    gemm = tilenb.compile(suite_kernels.GEMM.replace("{T}", "bf16"), backend="cpu").gemm_bf16
    attn = tilenb.compile(suite_kernels.ATTENTION, backend="cpu").attention_bf16
    return [("gemm", gemm, GEMM_TUNE, "tnb_wgmma"), ("attention", attn, ATTN_TUNE, "tnb_wgmma_rs_bf16")]


@pytest.mark.parametrize("which", ["gemm", "attention"])
def test_every_sm90_spelling_generates_the_wgmma_path(which):
    _, k, tune, marker = next(x for x in _kernels() if x[0] == which)
    srcs = {k.cuda_source(arch=a, **tune) for a in SM90_SPELLINGS}
    assert len(srcs) == 1                                   # one target, one text
    (src,) = srcs
    assert marker in src and "cp.async.bulk.tensor" in src
    generic = k.cuda_source(arch=None, **tune)
    assert "wgmma" not in generic and generic == k.cuda_source(arch="sm_80", **tune)
    ks = generate(k.ir(**tune), k.module.checked.source.text, arch=(9, 0))
    assert ks.arch == "sm_90a" and ks.source == src


@needs_nvrtc
@pytest.mark.parametrize("which", ["gemm", "attention"])
def test_cuda_source_compiles_with_nvrtc_for_the_same_spelling(which, monkeypatch):
    """nvrtc_compile(kernel.cuda_source(arch=a), a) for every spelling a of sm_90. Each distinct
    NVRTC invocation (source, options) runs once for real; a spelling that gives the same
    invocation reuses its result, and the options are recorded to show which it was."""
    _, k, tune, _ = next(x for x in _kernels() if x[0] == which)
    real = nv._compile_ctypes
    ran, seen = {}, []

    def once(lib, source, name, options, want_cubin):
        key = (source, tuple(options), want_cubin)
        seen.append(key[1:])
        if key not in ran:
            ran[key] = real(lib, source, name, options, want_cubin)
        return ran[key]
    monkeypatch.setattr(nv, "_compile_ctypes", once)
    for a in SM90_SPELLINGS:
        out = nv.nvrtc_compile(k.cuda_source(arch=a, **tune), a, use_cache=False, prefer="ctypes")
        ptx = isinstance(a, str) and a.strip().lower().startswith("compute")
        if ptx:
            assert b".target sm_90a" in out
        else:
            assert out[:4] == b"\x7fELF"
    archs = {o[0][0] for o in seen}
    assert archs == {"--gpu-architecture=sm_90a", "--gpu-architecture=compute_90a"}
    assert len(ran) == 2 and len(seen) == len(SM90_SPELLINGS)


# ---- limits: one table --------------------------------------------------------------------------
def test_limits_come_from_the_table():
    for cc, (per_sm, optin, _) in CAPABILITIES.items():
        t = target(cc)
        assert (t.smem_per_sm, t.dynamic_smem, t.static_smem) == (per_sm, optin, STATIC_SMEM)
        assert t.smem_limit(True) == optin and t.smem_limit(False) == STATIC_SMEM
        # from 8.0 the per-block limit is the SM's shared memory less the 1 KB the driver keeps
        if cc >= (8, 0):
            assert t.smem_reserved == 1024 and optin == per_sm - 1024
    # figures of the Programming Guide's table, as bytes
    assert target("sm_90").dynamic_smem == 232448 and target("sm_90").smem_per_sm == 233472
    assert target("sm_80").dynamic_smem == 166912 and target("sm_86").dynamic_smem == 101376
    assert target("sm_75").dynamic_smem == 65536 and target("sm_70").dynamic_smem == 98304
    assert STATIC_SMEM == 49152
    # code for any GPU: the largest figures (what some GPU allows); the checker and the analysis
    # budget with it
    assert ANY.dynamic_smem == max(v[1] for v in CAPABILITIES.values())
    assert (STATIC_BUDGET, DYNAMIC_BUDGET) == (ANY.static_smem, ANY.dynamic_smem)


def test_the_checker_and_the_analysis_budget_with_the_table():
    big = ANY.dynamic_smem // 4 + 16                 # f32 elements: one more than @dynshared allows
    text = f"""
@launch(256)
@dynshared
kernel k(X: tensor<f32>[1, {big}], Y: tensor<f32>[1, {big}]) {{
  var t = X[0 :+ 1, :]
  Y[0 :+ 1, :] = t * 2.0
}}
"""
    with pytest.raises(TileError, match=rf"more than the {ANY.dynamic_smem}-byte per-block limit"):
        tilenb.compile(text, backend="cpu")
    fits = text.replace(str(big), str(ANY.dynamic_smem // 4 - 16))
    a = analyze(tilenb.compile(fits, backend="cpu").k.ir())
    assert a.budget == ANY.dynamic_smem and a.footprint <= a.budget
    static = f"""
@launch(256)
kernel s(X: tensor<f32>[1, {STATIC_SMEM // 4 + 16}], Y: tensor<f32>[1, {STATIC_SMEM // 4 + 16}]) {{
  var t = X[0 :+ 1, :]
  Y[0 :+ 1, :] = t * 2.0
}}
"""
    with pytest.raises(TileError, match=rf"more than the static budget of {STATIC_SMEM} bytes \(48 KB\)"):
        tilenb.compile(static, backend="cpu")


@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_89", "sm_90"])
def test_generated_gemms_fit_their_target(arch):
    """The generator's own shared memory (mma staging buffers, GEMM stages) is planned against
    the target's per-block limit. The suite's GEMMs keep their accumulators in registers, and
    most of their shared memory is the generator's: every variant generated for a target fits
    that target (on main, the sm_86 ones double-buffered past its 99 KB)."""
    t = target(arch)
    mod = tilenb.compile(suite_kernels.program(), backend="cpu")
    n = 0
    for name, k in mod.kernels.items():
        if not name.startswith("gemm"):
            continue
        for kir in k.checked.variants.values():
            a = analyze(kir, arch=arch)
            assert a.footprint <= t.dynamic_smem, (name, kir.tune, a.footprint)
            ks = generate(kir, mod.checked.source.text, arch=arch)
            assert 0 < ks.smem_bytes <= t.smem_limit(ks.dynamic_smem), (name, kir.tune, ks.smem_bytes)
            assert ks.smem_footprint == a.footprint      # the code declares the analysis' map
            n += 1
    assert n == 16          # f16 and bf16, 8 variants each (TN 2 x GM 4)


def test_the_gemm_pipeline_reads_the_target_limit():
    """A Target whose per-block limit holds one stage of a [128, 256] x 64 bf16 GEMM (48 KB)
    but not two: the loop keeps mma.sync; with the table's 227 KB it is lowered to wgmma."""
    k = tilenb.compile(suite_kernels.GEMM.replace("{T}", "bf16"), backend="cpu").gemm_bf16
    kir = k.ir(TM=128, TN=256, TK=64, NT=256)
    text = k.module.checked.source.text
    assert generate(kir, text, arch="sm_90").arch == "sm_90a"
    small = dataclasses.replace(target("sm_90"), dynamic_smem=80 * 1024)
    ks = generate(kir, text, arch=small)
    assert ks.arch is None and "wgmma" not in ks.source


def test_a_device_target_takes_its_driver_s_limits():
    assert from_device((9, 0), 232448, 233472, 1024) == target("sm_90")
    assert from_device((9, 0)) == target("sm_90")
    odd = from_device((8, 6), 50000)
    assert odd.cc == (8, 6) and odd.dynamic_smem == 50000 and odd.smem_per_sm == target("sm_86").smem_per_sm
    # a capability newer than the table: accepted from the device, limits where it gives none
    # from the newest older entry; never the Hopper paths
    new = from_device((13, 0), 200000)
    assert new.cc == (13, 0) and new.dynamic_smem == 200000 and not new.hopper and new.nvrtc_arch() == "sm_130"
    with pytest.raises(UnsupportedError):
        from_device((3, 5))
    assert isinstance(new, Target)


def test_the_launcher_s_device_target(monkeypatch, tmp_path):
    """Through the CuPy stand-in (an sm_90 device reporting 232448 bytes of opt-in shared
    memory): the runtime's device Target is the table's sm_90."""
    from support import fake_cupy
    import tilenb.runtime.gpu.cuda as tc
    fake_cupy.install(monkeypatch, tmp_path)
    try:
        assert tc.device_target() == target("sm_90") and tc.device_arch() == "sm_90"
    finally:
        tc._target_of.cache_clear()


@pytest.mark.gpu
def test_the_gpu_s_target_matches_the_table():
    import cupy as cp
    import tilenb.runtime.gpu.cuda as tc
    t = tc.device_target()
    dev = cp.cuda.Device()
    assert t.name == f"sm_{dev.compute_capability}"
    assert t.dynamic_smem == dev.attributes["MaxSharedMemoryPerBlockOptin"]
    if t.cc in CAPABILITIES:
        assert t == target(t.cc)
