"""Question: Does every kernel of the CUDA test corpus launch cleanly (the target of compute-
sanitizer) and, with --compare, agree with the CPU executor?

Launch every kernel of the CUDA test corpus once on the GPU (for compute-sanitizer runs).

Usage: python bench/probes/cuda_launch_all.py [--compare]
Each case of tests/runtime/test_cuda_kernels.py runs once on the CUDA backend; with --compare its
outputs are checked against the CPU executor. Prints one line per kernel and a summary; exits
non-zero if a launch fails (or, with --compare, an output differs).
"""
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "runtime"))

import tilenb.runtime.gpu.cuda as tcuda  # noqa: E402
import test_cuda_kernels as T  # noqa: E402


def main():
    compare = "--compare" in sys.argv
    tcuda.PROGRESS = False
    bad = 0
    for c in T.CASES:
        t0 = time.perf_counter()
        try:
            mod, k, gpu_args = T.run_case(c, "cuda", seed=1)
            status = f"ran {k.last_run.extra['symbol']} grid {k.last_run.grid}"
            if compare:
                _, kc, cpu_args = T.run_case(c, "cpu", seed=1)
                T.compare(c, cpu_args, gpu_args, [p.sym.name for p in kc.ir().params])
                status += ", matches the CPU executor"
            print(f"ok   {T.case_id(c):40s} {status} ({time.perf_counter() - t0:.2f} s)", flush=True)
        except Exception as e:  # report and go on: one line per kernel
            bad += 1
            print(f"FAIL {T.case_id(c):40s} {type(e).__name__}: {str(e)[:2000]}", flush=True)
            traceback.print_exc()
    print(f"{len(T.CASES) - bad} passed, {bad} failed", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
