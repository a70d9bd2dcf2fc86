"""Question: What does tilenb cost on the host: the launch overhead, the warm re-run of a cell, the
cold compile?

The host-side cost of tilenb (issue 8's three overhead targets), with CuPy alone (no torch).

Usage: python bench/probes/host_overhead.py [--out DIR] [--launch-only] [--cpu] [--cpu-launch] [--cpu-cold]
  on a CUDA GPU: the launch overhead of the public call against a CuPy RawKernel of the same CUDA
  (both followed by a synchronize), the warm re-run of a cell (compile of the same text + a
  launch), and the cold compile of the five kernels of bench/suite/suite.py's cold_compile rows
  against NVRTC + module load + launch of the same CUDA; writes DIR/host_overhead.json.
  --launch-only: the launch overhead alone.
  --cpu (no GPU needed): the cold-compile part without the GPU: tilenb's own part (parse, check,
  analyses, generation of one variant) against NVRTC alone on the generated source.
  --cpu-launch (no GPU needed): the Python cost of a repeat call (`module.add_f32(x, y, z)` on
  4096 elements, the launch row's call) with tests/support/fake_cupy.py standing in for CuPy and a
  no-op for the CUDA launch, minus a bare call of that no-op; the arguments are real CuPy
  arrays over host memory where CuPy imports (their attributes cost what they cost on a GPU
  machine), else the stand-in's. It leaves out what CuPy's launch itself costs.
  --cpu-cold (no GPU needed): the suite's cold round of each compile case (caches cleared,
  compile, kernel_source of the variant, first launch) with the stand-in for CuPy and NVRTC
  stubbed out: tilenb's own CPU time, per part.

What it guarantees: every figure is host wall time (time.perf_counter); a launch figure is the
best of 7 batches of 300 calls (each batch's mean per call), so noise from other processes
counts against neither side; compile figures are medians of 3 runs from empty in-memory
caches (`tilenb.api.clear_caches()`) and an empty disk cache directory.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "suite"))

import numpy as np  # noqa: E402

from tilenb.examples import suite_kernels as SK  # noqa: E402
import tilenb  # noqa: E402
import tilenb.api  # noqa: E402

CASES = [("add_f32", {"TILE": 4096, "NT": 256}), ("rms_norm_f32", {"R": 1, "NT": 256}),
         ("softmax_bf16", {"R": 1, "NT": 256}), ("gemm_f16", {"TM": 128, "TN": 128, "NT": 256}),
         ("attention_bf16", {"BR": 64, "D": 64, "NT": 128})]


def per_call(f, sync, calls=300, batches=7):
    out = []
    for _ in range(batches):
        sync()
        t0 = time.perf_counter()
        for _ in range(calls):
            f()
            sync()
        out.append((time.perf_counter() - t0) / calls)
    return min(out)


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def args_for(cp, name):
    """The arguments of bench/suite/suite.py's cold_compile case `name`, on the GPU (bf16 tensors as
    CuPy uint16 memory seen through `Bf16View`)."""
    import ml_dtypes
    rng = np.random.default_rng(0)

    def arr(shape, dt=np.float32):
        h = rng.standard_normal(shape).astype(np.float32)
        if dt == "bf16":
            return Bf16View(cp.asarray(h.astype(ml_dtypes.bfloat16).view(np.uint16)))
        return cp.asarray(h.astype(dt))
    return {"add_f32": lambda: (arr(4096), arr(4096), arr(4096)),
            "rms_norm_f32": lambda: (arr((64, 4096)), arr((1, 4096)), arr((64, 4096)), 1e-6),
            "softmax_bf16": lambda: (arr((64, 4096), "bf16"), arr((64, 4096), "bf16")),
            "gemm_f16": lambda: (arr((256, 256), np.float16), arr((256, 256), np.float16), arr((256, 256), np.float16)),
            "attention_bf16": lambda: tuple(arr((2, 128, 64), "bf16") for _ in range(4)) + (0.125,),
            }[name]()


class Bf16View:
    """A CuPy uint16 array seen as bf16 through __cuda_array_interface__ (typestr '<V2', dtype bf16)."""

    def __init__(self, a):
        import ml_dtypes
        self.a = a
        self.shape = a.shape
        self.dtype = np.dtype(ml_dtypes.bfloat16)
        self.__cuda_array_interface__ = {"shape": a.shape, "typestr": "<V2", "data": (a.data.ptr, False),
                                         "version": 3, "strides": None}


def gpu(out: Path, launch_only=False):
    import cupy as cp

    import tilenb.runtime.gpu.cuda as tc
    from tilenb.codegen.nvrtc import nvrtc_compile
    tc.PROGRESS = False
    res = {"machine": {"gpu": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "cpu": cpu_model(),
                       "cupy": cp.__version__, "python": platform.python_version()}}
    os.environ["TILENB_CACHE_DIR"] = tempfile.mkdtemp(prefix="tilenb-host-")
    dev_sync = cp.cuda.Device().synchronize

    # ---- 1. launch overhead (the suite's launch row: add_f32 on 4096 elements)
    mod = tilenb.compile(SK.program(), backend="cuda")
    k = mod.add_f32
    n = 4096
    x, y, z = (cp.random.standard_normal(n, dtype=cp.float32) for _ in range(3))
    k(x, y, z)
    run = k.last_run
    ks = tc.kernel_source(k, k.ir(**run.variant))
    raw = cp.RawKernel(ks.source, ks.symbol, options=("-std=c++17",))
    grid, block, rargs = tuple(run.grid), (ks.threads, 1, 1), (x, y, z, np.int64(n))
    raw(grid, block, rargs)
    dev_sync()
    assert bool(cp.allclose(z, x + y))
    z[...] = 0
    k(x, y, z)
    dev_sync()
    assert bool(cp.allclose(z, x + y)), "tilenb's repeat launch gave a wrong result"
    L = {}
    L["raw_call_sync_us"] = per_call(lambda: raw(grid, block, rargs), dev_sync) * 1e6
    L["raw_call_async_us"] = per_call(lambda: raw(grid, block, rargs), lambda: None) * 1e6
    for timed in (True, False):
        tc.TIME_REPEATS = timed
        tag = "timed" if timed else "untimed"
        L[f"tilenb_call_sync_{tag}_us"] = per_call(lambda: k(x, y, z), dev_sync) * 1e6
        L[f"tilenb_call_nosync_{tag}_us"] = per_call(lambda: k(x, y, z), lambda: None) * 1e6
        L[f"tilenb_grid_call_sync_{tag}_us"] = per_call(lambda: k[grid](x, y, z), dev_sync) * 1e6
        L[f"last_run_{tag}"] = str(k.last_run)
    tc.TIME_REPEATS = True
    L["ratio_timed"] = L["tilenb_call_sync_timed_us"] / L["raw_call_sync_us"]
    L["ratio_untimed"] = L["tilenb_call_sync_untimed_us"] / L["raw_call_sync_us"]
    res["launch"] = L
    print(json.dumps(L, indent=1), flush=True)
    if launch_only:
        (out / "host_overhead.json").write_text(json.dumps(res, indent=1))
        return

    # ---- 2. warm re-run of a cell (rms_norm_f32 on 64 x 4096; autotune choice cached)
    src = SK.kernel_text("rms_norm_f32")
    a = args_for(cp, "rms_norm_f32")
    tilenb.compile(src, backend="cuda").rms_norm_f32(*a)
    dev_sync()
    ws = []
    for _ in range(20):
        t0 = time.perf_counter()
        tilenb.compile(src, backend="cuda").rms_norm_f32(*a)
        dev_sync()
        ws.append(time.perf_counter() - t0)
    res["warm_rerun_ms"] = {"median": statistics.median(ws) * 1e3, "all": [w * 1e3 for w in ws]}
    print("warm re-run ms:", res["warm_rerun_ms"]["median"], flush=True)

    # ---- 3. cold compile: tilenb (parse .. first launch) against NVRTC + load + launch of the same CUDA
    rows = []
    for name, variant in CASES:
        src = SK.kernel_text(name)
        args = list(args_for(cp, name))
        tl, parts, peer, nv_only = [], [], [], []
        for _ in range(3):
            tilenb.api.clear_caches()
            os.environ["TILENB_CACHE_DIR"] = tempfile.mkdtemp(prefix="tilenb-cold-")
            dev_sync()
            t0 = time.perf_counter()
            m = tilenb.compile(src, backend="cuda")
            t1 = time.perf_counter()
            kk = getattr(m, name)
            ks = tc.kernel_source(kk, kk.ir(**variant))
            t2 = time.perf_counter()
            kk(*args, variant=variant)
            dev_sync()
            t3 = time.perf_counter()
            tl.append(t3 - t0)
            parts.append({"front_end_ms": (t1 - t0) * 1e3, "codegen_ms": (t2 - t1) * 1e3,
                          "nvrtc_load_launch_ms": (t3 - t2) * 1e3})
        from tilenb.runtime.checks import prepare, written_tensors
        prep = prepare(kk, None, tuple(args), variant=variant)
        ch = prep.chosen
        da = tc._device_args(ch.kir, ch.bound, written_tensors(ch.kir))
        arch = getattr(ks, "arch", None) or tc.device_arch()
        for i in range(3):
            dev_sync()
            t0 = time.perf_counter()
            cubin = nvrtc_compile(ks.source, arch, use_cache=False)
            t1 = time.perf_counter()
            path = Path(tempfile.mkdtemp(prefix="tilenb-peer-")) / "k.cubin"
            path.write_bytes(cubin)
            fn = cp.RawModule(path=str(path)).get_function(ks.symbol)
            tc._launch(fn, ks, ch.grid, da)
            dev_sync()
            t2 = time.perf_counter()
            peer.append(t2 - t0)
            nv_only.append(t1 - t0)
        t, p = statistics.median(tl), statistics.median(peer)
        r = {"kernel": name, "variant": variant, "tilenb_ms": t * 1e3, "peer_ms": p * 1e3, "ratio": t / p,
             "nvrtc_only_ms": statistics.median(nv_only) * 1e3, "parts": parts}
        rows.append(r)
        print(f"cold {name}: tilenb {t * 1e3:.1f} ms, NVRTC + load + launch {p * 1e3:.1f} ms, ratio {t / p:.2f}; "
              f"parts {parts[len(parts) // 2]}", flush=True)
    res["cold_compile"] = rows
    (out / "host_overhead.json").write_text(json.dumps(res, indent=1))


def cpu():
    import tilenb.runtime.gpu.cuda as tc
    from tilenb.codegen.nvrtc import nvrtc_compile
    nvrtc_compile('extern "C" __global__ void k() {}', "sm_90", use_cache=False)
    for name, variant in CASES:
        src = SK.kernel_text(name)
        fe, cg, nv = [], [], []
        for _ in range(3):
            tilenb.api.clear_caches()
            t0 = time.perf_counter()
            m = tilenb.compile(src, backend="cpu")
            t1 = time.perf_counter()
            kk = getattr(m, name)
            ks = tc.kernel_source(kk, kk.ir(**variant), "sm_90")
            t2 = time.perf_counter()
            nvrtc_compile(ks.source, getattr(ks, "arch", None) or "sm_90", use_cache=False)
            t3 = time.perf_counter()
            fe.append(t1 - t0)
            cg.append(t2 - t1)
            nv.append(t3 - t2)
        f, c, n = (statistics.median(v) * 1e3 for v in (fe, cg, nv))
        print(f"{name:15s} front end {f:6.1f} ms  analyses + generation {c:6.1f} ms  NVRTC {n:7.1f} ms  "
              f"(tilenb's part + NVRTC) / NVRTC {(f + c + n) / n:5.2f}", flush=True)


def cpu_launch(calls=20000, batches=7):
    import tempfile as tf

    import pytest
    sys.path.insert(0, str(ROOT / "tests"))
    from support import fake_cupy

    import tilenb.runtime.gpu.cuda as tc
    mp = pytest.MonkeyPatch()
    tc.PROGRESS = False
    fake = fake_cupy.install(mp, tf.mkdtemp(prefix="tilenb-fake-"))
    fake.cuda.runtime.getDevice = int     # a C call returning 0, as cudaGetDevice costs next to nothing
    k = tilenb.compile(SK.program(), backend="cuda").add_f32
    n = 4096
    args = [fake.asarray(np.zeros(n, np.float32)) for _ in range(3)]
    k(*args)                                     # the full path (checks, autotune) with the stand-in's arrays
    k[tuple(k.last_run.grid)](*args)
    grid = tuple(k.last_run.grid)
    try:                                         # real CuPy arrays over host memory: no device needed
        import cupy
        hosts = [np.zeros(n, np.float32) for _ in range(3)]
        args = [cupy.ndarray((n,), cupy.float32, cupy.cuda.MemoryPointer(
            cupy.cuda.UnownedMemory(h.ctypes.data, h.nbytes, h, device_id=0), 0)) for h in hosts]
        fake.ndarray = cupy.ndarray              # the same key: shape, strides, dtype
        tc._ND = None                            # rebound at the next call
        kind = "CuPy arrays over host memory"
    except Exception as e:  # no CuPy here: the stand-in's arrays (Python properties: slower)
        kind = f"the stand-in's arrays (no CuPy: {e})"

    def noop(grid, block, args, shared_mem=0):
        pass
    for r in k._repeat.values():
        r.fn = noop
    x, y, z = args
    block, rargs = (256, 1, 1), (x, y, z, np.int64(n))

    def best(f):
        out = []
        for _ in range(batches):
            t0 = time.perf_counter()
            for _ in range(calls):
                f()
            out.append((time.perf_counter() - t0) / calls)
        return min(out) * 1e6
    bare = best(lambda: noop(grid, block, rargs))
    call = best(lambda: k(x, y, z))
    gcall = best(lambda: k[grid](x, y, z))
    assert "launched from the cache" in k.last_run.note
    print(f"{cpu_model()}, Python {platform.python_version()}, {kind}; best of {batches} x {calls} calls")
    print(f"repeat call k(x, y, z): {call - bare:.3f} us of Python over a bare launch call; "
          f"k[grid](x, y, z): {gcall - bare:.3f} us")
    mp.undo()


def cpu_cold(reps=7):
    """The suite's cold round without a GPU: for each of CASES, `tilenb.api.clear_caches()` and an
    empty cache directory, then tilenb.compile (front end), kernel_source of the variant (the
    analyses it needs and generation) and the first launch with that variant, through
    tests/support/fake_cupy.py (NVRTC and the module load stubbed out: what is left of the launch
    is tilenb's own work: checks, cache files, the RunReport). CPU time of this process
    (time.process_time, so other processes on a shared machine count less), the fastest of
    `reps` rounds after one untimed round of every case."""
    import tempfile as tf

    import ml_dtypes
    import pytest
    sys.path.insert(0, str(ROOT / "tests"))
    from support import fake_cupy

    import tilenb.runtime.gpu.cuda as tc
    mp = pytest.MonkeyPatch()
    tc.PROGRESS = False
    fake = fake_cupy.install(mp, tf.mkdtemp(prefix="tilenb-fake-"))
    rng = np.random.default_rng(0)

    class Bf16View:      # a stand-in uint16 array seen as bf16 through __cuda_array_interface__
        def __init__(self, a):
            self.a, self.shape, self.dtype = a, a.shape, np.dtype(ml_dtypes.bfloat16)
            self.__cuda_array_interface__ = {"shape": a.shape, "typestr": "<V2", "data": (a.data.ptr, False),
                                             "version": 3, "strides": None}

    def arr(shape, dt=np.float32):
        h = rng.standard_normal(shape).astype(np.float32)
        if dt == "bf16":
            return Bf16View(fake.asarray(h.astype(ml_dtypes.bfloat16).view(np.uint16)))
        return fake.asarray(h.astype(dt))
    made = {"add_f32": lambda: (arr(4096), arr(4096), arr(4096)),
            "rms_norm_f32": lambda: (arr((64, 4096)), arr((1, 4096)), arr((64, 4096)), 1e-6),
            "softmax_bf16": lambda: (arr((64, 4096), "bf16"), arr((64, 4096), "bf16")),
            "gemm_f16": lambda: tuple(arr((256, 256), np.float16) for _ in range(3)),
            "attention_bf16": lambda: tuple(arr((2, 128, 64), "bf16") for _ in range(4)) + (0.125,)}
    full = {"add_f32": {"TILE": 4096, "NT": 256}, "rms_norm_f32": {"R": 1, "D": 4096, "NT": 256},
            "softmax_bf16": {"R": 1, "D": 4096, "NT": 256}, "gemm_f16": {"TM": 128, "TN": 128, "TK": 64, "NT": 256},
            "attention_bf16": {"BR": 64, "BC": 64, "D": 64, "NT": 128}}   # every @autotune value, as the suite's rows
    root = tf.mkdtemp(prefix="tilenb-cold-")
    args = {name: made[name]() for name, _ in CASES}

    def once(name):
        os.environ["TILENB_CACHE_DIR"] = tf.mkdtemp(dir=root)
        tilenb.api.clear_caches()
        t0 = time.process_time()
        m = tilenb.compile(SK.kernel_text(name), backend="cuda")
        t1 = time.process_time()
        k = getattr(m, name)
        tc.kernel_source(k, k.ir(**full[name]))
        t2 = time.process_time()
        k(*args[name], variant=full[name])
        t3 = time.process_time()
        return t3 - t0, t1 - t0, t2 - t1, t3 - t2
    for name, _ in CASES:
        once(name)
    print(f"{cpu_model()}, Python {platform.python_version()}; CPU ms, fastest of {reps} cold rounds")
    for name, _ in CASES:
        tot, fe, cg, la = min(once(name) for _ in range(reps))
        print(f"{name:15s} total {tot * 1e3:6.2f}  front end {fe * 1e3:6.2f}  analyses + generation {cg * 1e3:6.2f}  "
              f"launch (no NVRTC, no load) {la * 1e3:5.2f}", flush=True)
    mp.undo()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--launch-only", action="store_true")
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--cpu-launch", action="store_true")
    ap.add_argument("--cpu-cold", action="store_true")
    a = ap.parse_args()
    if a.cpu:
        return cpu()
    if a.cpu_cold:
        return cpu_cold()
    if a.cpu_launch:
        return cpu_launch()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    gpu(out, a.launch_only)


if __name__ == "__main__":
    main()
