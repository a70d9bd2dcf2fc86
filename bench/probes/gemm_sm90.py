"""Question: How fast is each variant of tilenb's wgmma GEMM lowering against cuBLAS?

GEMM on the H200: tilenb's wgmma lowering (every variant of a small space, each timed alone)
against cuBLAS through torch.matmul, in one process. Prints one line per variant and shape.

    python bench/probes/gemm_sm90.py [--shapes 4096,8192] [--dtypes bf16,f16] [--ncu]

Each time is the median of CUDA-event timings of REPS launches after warm-up (torch_timing.py);
the output is checked against torch's (relative Frobenius error). The full suite
(bench/suite/suite.py) holds the figures of record; this script is for working on the lowering.
"""
from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))              # tilenb
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "suite"))   # the suite's launch helpers
sys.path.insert(0, str(Path(__file__).resolve().parent))                 # the probes' helpers (torch_timing)

from torch_timing import time_ms  # noqa: E402

REPS = 20          # launches a timing (the median is kept)
KERNEL = """
@autotune(TM in [128, 256], TN in [128, 256], TK in [32, 64], NT in [256])
@launch(NT)
@grid(cdiv(M, TM), cdiv(N, TN))
kernel gemm(A: tensor<{T}>[M, K], B: tensor<{T}>[K, N], C: tensor<{T}>[M, N]) {
  var acc: tile<f32>[TM, TN] = 0.0
  for kt in range(0, K, TK) {
    let a = A[ctx.block.x * TM :+ TM, kt :+ TK]
    let b = B[kt :+ TK, ctx.block.y * TN :+ TN]
    acc += dot(a, b)
  }
  C[ctx.block.x * TM :+ TM, ctx.block.y * TN :+ TN] = acc
}
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="4096")
    ap.add_argument("--dtypes", default="bf16,f16")
    ap.add_argument("--variants", default="", help="TM.TN.TK.NT,... (default: the kernel's space)")
    args = ap.parse_args()
    import torch
    import tilenb
    import suite
    suite.S.torch = torch
    from suite import GpuArray
    tdt = {"bf16": torch.bfloat16, "f16": torch.float16}
    for dt in args.dtypes.split(","):
        mod = tilenb.compile(KERNEL.replace("{T}", dt), backend="cuda")
        k = mod.gemm
        space = k.tune_space
        if args.variants:
            vs = [dict(zip(("TM", "TN", "TK", "NT"), map(int, v.split(".")))) for v in args.variants.split(",")]
        else:
            vs = [dict(zip(space, vals)) for vals in itertools.product(*space.values())]
        for n in map(int, args.shapes.split(",")):
            a = torch.randn(n, n, device="cuda", dtype=tdt[dt])
            b = torch.randn(n, n, device="cuda", dtype=tdt[dt])
            ref = torch.matmul(a, b)
            t_ref = time_ms(torch, lambda: torch.matmul(a, b), REPS)
            flop = 2.0 * n ** 3
            print(f"{dt} {n}^3 cuBLAS {t_ref:.3f} ms {flop / t_ref / 1e9:.0f} TFLOP/s", flush=True)
            for v in vs:
                c = torch.full((n, n), float("nan"), device="cuda", dtype=tdt[dt])
                w = [GpuArray(a), GpuArray(b), GpuArray(c)]
                try:
                    k(*w, variant=v)
                    torch.cuda.synchronize()
                    err = ((c.double() - ref.double()).norm() / ref.double().norm()).item()
                    go, ks, fn = suite.prepared_launch(k, None, w, v)
                    t = time_ms(torch, go, REPS)
                    print(f"  {v} lowered={ks.arch == 'sm_90a'} smem={ks.smem_bytes} regs={fn.num_regs} "
                          f"err={err:.2e} {t:.3f} ms {flop / t / 1e9:.0f} TFLOP/s = {t_ref / t * 100:.1f}% of cuBLAS", flush=True)
                except Exception as e:  # report and go on
                    print(f"  {v} FAILED: {type(e).__name__}: {str(e)[:400]}", flush=True)


if __name__ == "__main__":
    main()
