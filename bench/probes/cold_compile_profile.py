"""Question: Where does a cold first launch spend its time?

Where a cold first launch spends its time (bench/suite/suite.py's compile rows): cProfile of
tilenb.compile + the first launch of one compile case, caches empty, then the same CUDA source
through NVRTC alone. Prints the top functions by cumulative time.

    python bench/probes/cold_compile_profile.py gemm_f16 [attention_bf16 ...]
"""
from __future__ import annotations

import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))              # tilenb
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "suite"))   # the suite's launch helpers


def main():
    import torch
    import suite
    import tilenb
    import tilenb.runtime.gpu.cuda as tc
    from tilenb.codegen.nvrtc import nvrtc_compile
    suite.S.torch = torch
    import cupy
    suite.S.cp = cupy
    cases = {c[0]: c for c in suite.COMPILE_CASES}
    for name in sys.argv[1:] or ["gemm_f16"]:
        _, mk, variant, _ = cases[name]
        src = suite.SK.kernel_text(name)
        args = [suite.GpuArray(a) if hasattr(a, "data_ptr") else a for a in mk()]
        suite._clear_tilenb_caches(tempfile.mkdtemp())
        torch.cuda.synchronize()
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        k = getattr(tilenb.compile(src, backend="cuda"), name)
        k(*args, variant=variant)
        torch.cuda.synchronize()
        prof.disable()
        t1 = time.perf_counter()
        ks = tc.kernel_source(k, k.ir(**variant))
        t2 = time.perf_counter()
        nvrtc_compile(ks.source, ks.arch or tc.device_arch(), use_cache=False)
        t3 = time.perf_counter()
        print(f"== {name}: compile + first launch {1e3 * (t1 - t0):.1f} ms; NVRTC alone on its source "
              f"({ks.arch or tc.device_arch()}) {1e3 * (t3 - t2):.1f} ms")
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main()
