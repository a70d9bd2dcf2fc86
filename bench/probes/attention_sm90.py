"""Question: How fast is each variant of tilenb's flash attention against torch SDPA (cuDNN and flash
backends)?

Flash attention on the H200: each variant of tilenb's attention kernel (tilenb/examples/suite_kernels.py)
timed alone, against torch SDPA (cuDNN and flash backends), in one process. Prints one line per
variant and shape: time, TFLOP/s (4 N Nk D H B flops), share of the best SDPA backend.

    python bench/probes/attention_sm90.py [--shapes 2x16x4096] [--dims 64,128] [--variants BR.BC.NT,...]
                                   [--nk 4096,16384] [--no-sdpa]

`--nk` sets the key length apart from the query length (BxHxN): the time per key block and the
fixed cost of a CTA (Q load, pipeline fill, epilogue) follow from two key lengths at one grid.
`--no-sdpa` skips the peers and the error check (for ncu runs).

Each time is the median of CUDA-event timings after warm-up; outputs are checked against SDPA
(relative Frobenius error). bench/suite/suite.py holds the figures of record; this script is for
working on the lowering (tilenb/codegen/sm90/streamed.py).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))              # tilenb
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "suite"))   # the suite's launch helpers

from gemm_sm90 import time_ms  # noqa: E402


# Forms of the attention kernel kept for comparison (not in the suite): the natural-base form,
# exp(s - m) of scores scaled after the dot, which the suite's kernel used until the base-2 form
# (tilenb/examples/suite_kernels.py) measured 4-6% faster on the H200.
TRIALS = {"attention_exp_bf16": """
@autotune(BR in [64, 128], BC in [64, 128], D in [64, 128], NT in [128, 256])
@launch(NT)
@dynshared
@grid(cdiv(N, BR), H)
kernel attention_exp_bf16(Q: tensor<bf16>[H, N, D], K: tensor<bf16>[H, Nk, D], V: tensor<bf16>[H, Nk, D],
                          O: tensor<bf16>[H, N, D], scale: f32) {
  let h = ctx.block.y
  let row = ctx.block.x * BR
  var q = Q[h, row :+ BR, :]
  var acc: tile<f32>[BR, D] = 0.0
  var m: tile<f32>[BR, 1] = -1.0e30
  var l: tile<f32>[BR, 1] = 0.0
  for kt in range(0, Nk, BC) {
    var s: tile<f32>[BR, BC] = dot_t(q, K[h, kt :+ BC, :]) * scale
    var m_new = max(m, rowmax(s))
    var p: tile<bf16>[BR, BC] = exp(s - m_new)
    var rescale = exp(m - m_new)
    l = l * rescale + rowsum(p)
    acc = acc * rescale + dot(p, V[h, kt :+ BC, :])
    m = m_new
  }
  O[h, row :+ BR, :] = acc / l
}
"""}


def _kernel_text(suite_kernels, name):
    return TRIALS[name] if name in TRIALS else suite_kernels.kernel_text(name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="2x16x4096")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--variants", default="", help="BR.BC.NT,... (default: the kernel's space)")
    ap.add_argument("--nk", default="", help="key lengths, comma-separated (default: N)")
    ap.add_argument("--no-sdpa", action="store_true")
    ap.add_argument("--ab", default="", choices=["", "defer", "ss"],
                    help="time each variant built with and without one code-generator choice, alternating, "
                         "7 rounds: defer (tilenb.switches: stream_defer, the deferred retire of a turn's last dot); "
                         "ss (tilenb.switches: wgmma_ss, a shared q read by wgmma by descriptor)")
    ap.add_argument("--kernel", default="attention_bf16", choices=["attention_bf16", "attention_tc_bf16", *TRIALS],
                    help="which attention kernel of tilenb/examples/suite_kernels.py")
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import tilenb
    import suite
    from tilenb.examples import suite_kernels
    suite.S.torch = torch
    from suite import GpuArray
    k = tilenb.compile(_kernel_text(suite_kernels, args.kernel), backend="cuda").kernels[args.kernel]
    space = k.tune_space
    for shp in args.shapes.split(","):
        B, H, N = map(int, shp.split("x"))
        for D in map(int, args.dims.split(",")):
          for NK in (map(int, args.nk.split(",")) if args.nk else [N]):
            q = torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16)
            kk, v = (torch.randn(B, H, NK, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
            flop = 4.0 * B * H * N * NK * D
            best, ref = None, None
            for name, be in (() if args.no_sdpa else (("cuDNN", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION))):
                with sdpa_kernel(be):
                    ref = F.scaled_dot_product_attention(q, kk, v)
                    t = time_ms(torch, lambda: F.scaled_dot_product_attention(q, kk, v))
                print(f"B{B} H{H} N{N} Nk{NK} D{D} SDPA {name} {t:.3f} ms {flop / t / 1e9:.0f} TFLOP/s", flush=True)
                best = t if best is None else min(best, t)
            qh, kh, vh = q.reshape(B * H, N, D), kk.reshape(B * H, NK, D), v.reshape(B * H, NK, D)
            if args.variants:
                vs = [dict(zip(("BR", "BC", "NT"), map(int, x.split(".")))) for x in args.variants.split(",")]
            else:
                vs = [dict(BR=br, BC=bc, NT=nt) for br in space["BR"] for bc in space["BC"] for nt in space["NT"]]
            for var in vs:
                var = dict(var, D=D)
                o = torch.full((B * H, N, D), float("nan"), device="cuda", dtype=torch.bfloat16)
                w = [GpuArray(qh), GpuArray(kh), GpuArray(vh), GpuArray(o), D ** -0.5]
                try:
                    k(*w, variant=var)
                    torch.cuda.synchronize()
                    err = float("nan") if ref is None else \
                        ((o.double() - ref.reshape(B * H, N, D).double()).norm() / ref.double().norm()).item()
                    if args.ab:
                        ab_choice(torch, tilenb, suite, args.kernel, w, var, flop, args.ab)
                        continue
                    go, ks, fn = suite.prepared_launch(k, None, w, var)
                    t = time_ms(torch, go)
                    share = "" if best is None else f" = {best / t * 100:.1f}% of SDPA's best"
                    print(f"  Nk{NK} {var} streamed={'tnb_wgmma_rs' in ks.source} smem={ks.smem_bytes} regs={fn.num_regs} "
                          f"err={err:.2e} {t:.3f} ms {flop / t / 1e9:.0f} TFLOP/s{share}", flush=True)
                except Exception as e:  # report and go on
                    print(f"  {var} FAILED: {type(e).__name__}: {str(e)[:400]}", flush=True)


def ab_choice(torch, tilenb, suite, name, w, var, flop, which):
    """One variant built with a code-generator choice off and on (fresh caches for each), timed
    in alternation so that clock drift falls on both alike."""
    import statistics
    from tilenb.examples import suite_kernels
    import tilenb.api
    from tilenb.switches import SWITCHES as mod
    attr, mark = {"defer": ("stream_defer", "retires at the next turn"),
                  "ss": ("wgmma_ss", "A by descriptor")}[which]
    saved, runs = getattr(mod, attr), {}
    for flag in (False, True):
        setattr(mod, attr, flag)
        tilenb.api.clear_caches()
        k = tilenb.compile(_kernel_text(suite_kernels, name), backend="cuda").kernels[name]
        k(*w, variant=var)
        torch.cuda.synchronize()
        go, ks, fn = suite.prepared_launch(k, None, w, var)
        runs[flag] = (go, fn.num_regs, mark in ks.source, [])
    setattr(mod, attr, saved)
    for _ in range(7):
        for flag in (False, True):
            runs[flag][3].append(time_ms(torch, runs[flag][0]))
    for flag in (False, True):
        go, regs, taken, ts = runs[flag]
        t = statistics.median(ts)
        print(f"  {var} {which}={flag} (taken: {taken}) regs={regs} {t:.3f} ms {flop / t / 1e9:.0f} TFLOP/s "
              f"(min {min(ts):.3f}, max {max(ts):.3f})", flush=True)


if __name__ == "__main__":
    main()
