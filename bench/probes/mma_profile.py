"""Question: How fast is each @autotune variant of flash attention at the suite's shape (and what does
Nsight Compute see in it)?

Launch flash attention (tilenb/examples/suite_kernels.py ATTENTION) per @autotune variant at the suite's
shape, print each variant's time from CUDA events, and serve as the target of Nsight Compute.

    python bench/probes/mma_profile.py [--d 64] [--variant BR=64,NT=128] [--reps 20]
    ncu --clock-control none -k regex:attention_bf16 --launch-skip 1 --launch-count 1 \
        --section SpeedOfLight --section Occupancy --section WarpStateStats \
        --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
        python bench/probes/mma_profile.py --variant BR=64,NT=128 --reps 1

Guarantees: inputs are random bf16 on the GPU (32 heads of sequence 4096: the suite's 2 x 16);
before timing, the output of 2 heads is compared with float64 softmax(q k^T * scale) v (relative
error printed); a time is the median of --reps launches of the kernel alone (from prepared
arguments, as the suite times it) between CUDA events. Needs torch and CuPy.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))              # tilenb
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "suite"))   # the suite's launch helpers


class _Dev:
    """A torch CUDA tensor seen through __cuda_array_interface__, bf16 named by its numpy dtype."""

    def __init__(self, t):
        import ml_dtypes
        import torch
        self.t = t
        self.shape = tuple(t.shape)
        self.dtype = {torch.float32: np.dtype(np.float32), torch.bfloat16: np.dtype(ml_dtypes.bfloat16)}[t.dtype]
        typestr = "<V2" if t.dtype == torch.bfloat16 else self.dtype.str
        self.__cuda_array_interface__ = {"shape": self.shape, "typestr": typestr, "data": (t.data_ptr(), False),
                                         "version": 3, "strides": None}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", default="64", help="head dims, comma-separated")
    ap.add_argument("--sdpa", action="store_true", help="also time torch SDPA (cuDNN and flash backends)")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--variant", default="")
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args(argv)
    import torch
    import tilenb
    from tilenb.examples import suite_kernels as SK
    mod = tilenb.compile(SK.ATTENTION, backend="cuda")
    k = mod.attention_bf16
    for D in (int(x) for x in a.d.split(",")):
        run_d(a, k, D, torch)


def _median_time(torch, fn, reps):
    ts = []
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(reps):
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1) / 1e3)
    return float(np.median(ts))


def run_d(a, k, D, torch):
    import suite
    H, N = a.heads, a.n
    g = torch.Generator(device="cuda").manual_seed(0)
    q, kk, v = (torch.randn((H, N, D), device="cuda", generator=g).to(torch.bfloat16) for _ in range(3))
    o = torch.empty_like(q)
    scale = 1.0 / math.sqrt(D)
    flops = 4 * H * N * N * D
    if a.sdpa:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        F = torch.nn.functional
        q4, k4, v4 = (x.view(2, H // 2, N, D) for x in (q, kk, v))
        for name, be in (("cuDNN", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
            try:
                def call(be=be):
                    with sdpa_kernel([be]):
                        F.scaled_dot_product_attention(q4, k4, v4, scale=scale)
                call()
                t = _median_time(torch, call, max(a.reps, 5))
                print(f"SDPA {name} D={D}: {t * 1e3:.3f} ms, {flops / t / 1e12:.1f} TFLOP/s", flush=True)
            except Exception as e:
                print(f"SDPA {name} D={D}: {type(e).__name__}: {str(e)[:200]}", flush=True)
    if a.variant:
        variants = [dict((x.split("=")[0], int(x.split("=")[1])) for x in a.variant.split(","))]
    else:
        variants = [{x: y for x, y in dict(key).items() if x in ("BR", "BC", "NT")} for key in k.checked.variants
                    if dict(key)["D"] == D]
    args = tuple(_Dev(x) for x in (q, kk, v, o)) + (scale,)
    for var in variants:
        var = dict(var, D=D)
        o.fill_(float("nan"))
        try:
            k(*args, variant=var)
            torch.cuda.synchronize()
        except Exception as e:  # a variant the device cannot run: say so, go on
            print(f"{var}: {type(e).__name__}: {str(e)[:300]}", flush=True)
            continue
        ref = torch.nn.functional.scaled_dot_product_attention(q[:2].double(), kk[:2].double(), v[:2].double(), scale=scale)
        err = float((o[:2].double() - ref).norm() / ref.norm())
        go, ks, fn = suite.prepared_launch(k, None, args, var)
        t = _median_time(torch, go, a.reps)
        regs = getattr(fn, "num_regs", "?")
        print(f"attention_bf16 {var}: {t * 1e3:.3f} ms, {flops / t / 1e12:.1f} TFLOP/s, rel err {err:.2e}, "
              f"{regs} registers, {ks.smem_bytes} B shared", flush=True)


if __name__ == "__main__":
    main()
