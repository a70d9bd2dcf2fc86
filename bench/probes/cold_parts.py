"""Question: Without a GPU, what do the parts of a cold compile cost (parse, the rest of the front
end, analyses + generation of the launched variant, NVRTC through tilenb's cache against NVRTC
alone), and what Python does a repeat call `k(x, y, z)` pay through the straight-line check
against `run_cached`'s key?

Usage: python bench/probes/cold_parts.py [--reps 7] [--cases add_f32,gemm_f16] [--no-nvrtc] [--no-launch]

Compile parts, per compile case of bench/suite/suite.py (their variants; code for sm_90), each
round from empty in-memory caches (`tilenb.api.clear_caches()`) and an empty cache directory:
  parse       `tilenb.lang.parser.parse` of the kernel's text alone;
  front end   `tilenb.compile(text, backend="cuda")` (parse, check of every variant);
  codegen     `kernel_source` of the launched variant (its analyses and generation);
  nvrtc path  `nvrtc_compile` as a launch calls it (its disk cache, empty: a compile and a write);
  nvrtc alone `nvrtc_compile(..., use_cache=False)` on the same source (the suite's peer's compile).
The last two alternate, so both see the same load. Medians of `--reps` rounds after one
untimed round of every case; wall time (time.perf_counter).

Launch (with tests/support/fake_cupy.py for CuPy and a no-op for the CUDA launch; the arrays are
real CuPy arrays over host memory where CuPy imports): batches of `k(x, y, z)` on the launch
row's add_f32, alternately with the straight-line check (`Kernel._fast`) and without it (every
call through `run_cached`), minus a bare call of the no-op; the best batch of each, in us of
this process's CPU time (time.process_time: time spent waiting for a core shared with other
work does not count; what such sharing costs shows in the spread, not the order of the two).

Run it on two trees (e.g. main and a branch) to compare before and after; nothing here is a test.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

CASES = {"add_f32": {"TILE": 4096, "NT": 256}, "rms_norm_f32": {"R": 1, "D": 4096, "NT": 256},
         "softmax_bf16": {"R": 1, "D": 4096, "NT": 256},
         "gemm_f16": {"TM": 128, "TN": 128, "TK": 64, "GM": 8, "NT": 256},
         "attention_bf16": {"BR": 64, "BC": 64, "D": 64, "NT": 128}}   # bench/suite/suite.py COMPILE_CASES


def compile_parts(names, reps, nvrtc_too):
    import tilenb
    import tilenb.api
    import tilenb.runtime.gpu.cuda as tc
    from tilenb.codegen import nvrtc
    from tilenb.examples import suite_kernels as SK
    from tilenb.lang import parser
    from tilenb.target import target
    sm90 = target("sm_90")
    root = tempfile.mkdtemp(prefix="tilenb-cold-parts-")

    def once(name):
        text = SK.kernel_text(name)
        os.environ["TILENB_CACHE_DIR"] = tempfile.mkdtemp(dir=root)
        tilenb.api.clear_caches()
        t0 = time.perf_counter()
        parser.parse(text)
        t1 = time.perf_counter()
        tilenb.api.clear_caches()
        t2 = time.perf_counter()
        k = getattr(tilenb.compile(text, backend="cuda"), name)
        t3 = time.perf_counter()
        ks = tc.kernel_source(k, k.ir(**CASES[name]), sm90)
        t4 = time.perf_counter()
        out = {"parse": t1 - t0, "front end": t3 - t2, "codegen": t4 - t3}
        if nvrtc_too:
            arch = tc.compile_target(ks, sm90)
            t5 = time.perf_counter()
            nvrtc.nvrtc_compile(ks.source, arch)
            t6 = time.perf_counter()
            nvrtc.nvrtc_compile(ks.source, arch, use_cache=False)
            t7 = time.perf_counter()
            out.update({"nvrtc path": t6 - t5, "nvrtc alone": t7 - t6})
        return out
    for name in names:
        once(name)
    print(f"compile parts, ms (median of {reps}; front end includes the parse):")
    for name in names:
        runs = [once(name) for _ in range(reps)]
        med = {part: 1e3 * statistics.median(r[part] for r in runs) for part in runs[0]}
        print(f"  {name:15s} " + "  ".join(f"{part} {v:7.2f}" for part, v in med.items()), flush=True)


def launch_ab(batches=15, calls=5000):
    import numpy as np
    import pytest
    sys.path.insert(0, str(ROOT / "tests"))
    from support import fake_cupy

    import tilenb
    import tilenb.runtime.gpu.cuda as tc
    from tilenb.examples import suite_kernels as SK
    mp = pytest.MonkeyPatch()
    tc.PROGRESS = False
    fake = fake_cupy.install(mp, tempfile.mkdtemp(prefix="tilenb-fake-"))
    fake.cuda.runtime.getDevice = int     # a C call returning 0, as cudaGetDevice costs next to nothing
    k = tilenb.compile(SK.program(), backend="cuda").add_f32
    n = 4096
    k(*[fake.asarray(np.zeros(n, np.float32)) for _ in range(3)])
    kind = "the stand-in's arrays"
    args = [fake.asarray(np.zeros(n, np.float32)) for _ in range(3)]
    try:
        import cupy
        hosts = [np.zeros(n, np.float32) for _ in range(3)]
        args = [cupy.ndarray((n,), cupy.float32, cupy.cuda.MemoryPointer(
            cupy.cuda.UnownedMemory(h.ctypes.data, h.nbytes, h, device_id=0), 0)) for h in hosts]
        fake.ndarray = cupy.ndarray
        tc._ND = None
        kind = "CuPy arrays over host memory"
    except Exception:  # no CuPy: the stand-in's arrays
        pass
    x, y, z = args
    k(x, y, z)                                   # the full path for these arrays: an entry

    def noop(grid, block, args, shared_mem=0):
        pass
    for r in k._repeat.values():
        r.fn = noop
    k._hot = None
    if hasattr(k, "_fast"):
        k._fast = None                           # (made by an earlier hit, around the stand-in's launch)
    k(x, y, z)                                   # a hit: the hot entry (and its straight-line check)
    straight = getattr(k, "_fast", None)
    if straight is not None:
        assert straight(k, (x, y, z)) is True, "the straight-line check steps aside for the launch row's call"
    block, rargs = (256, 1, 1), (x, y, z, np.int64(n))

    def batch(f):
        t0 = time.process_time()
        for _ in range(calls):
            f()
        return (time.process_time() - t0) / calls * 1e6

    best = {"bare": [], "straight": [], "run_cached": []}
    for i in range(batches):
        best["bare"].append(batch(lambda: noop((1, 1, 1), block, rargs)))
        for what in (("straight", "run_cached") if i % 2 else ("run_cached", "straight")):   # both orders
            if what == "straight" and straight is None:
                continue
            k._fast = straight if what == "straight" else None
            best[what].append(batch(lambda: k(x, y, z)))
        k._fast = None
    assert "launched from the cache" in k.last_run.note
    bare = min(best["bare"])
    print(f"repeat call k(x, y, z), us of Python over a bare launch call ({kind}; best of {batches} x {calls}):")
    for what in ("straight", "run_cached"):
        if best[what]:
            print(f"  {what:10s} {min(best[what]) - bare:6.3f}   (median batch {statistics.median(best[what]) - bare:6.3f})")
        else:
            print(f"  {what:10s} (not in this tree)")
    mp.undo()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--no-nvrtc", action="store_true")
    ap.add_argument("--no-launch", action="store_true")
    a = ap.parse_args()
    import tilenb
    print(f"tilenb from {Path(tilenb.__file__).parent}; load average {os.getloadavg()[0]:.1f}")
    if not a.no_launch:
        launch_ab()
    compile_parts(a.cases.split(","), a.reps, not a.no_nvrtc)


if __name__ == "__main__":
    main()
