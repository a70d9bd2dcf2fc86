"""Question: Where does the time of a row kernel on a thread block cluster go: the cluster reduction,
the cluster, or the per-CTA work?

Where the time of a row kernel held by a thread block cluster goes (issue 8, 4096 x 131072):
the same per-CTA work timed with the cluster reduction, without it, and without the cluster at
all, each variant alone, against the device-to-device copy in the same process.

    python bench/probes/cluster_probe.py [--dtypes f32,bf16] [--variants K.NT,...]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))              # tilenb
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "suite"))   # the suite's launch helpers

from gemm_sm90 import time_ms  # noqa: E402

M, N = 4096, 131072

FORMS = {
    # the suite's kernel: one cluster_sum
    "full": ("@cluster(K)", "cluster_sum(ss)"),
    # the cluster launch without the reduction (wrong results: the cost of the cluster alone)
    "no_reduce": ("@cluster(K)", ""),
    # neither: the same CTAs as plain CTAs
    "plain": ("", ""),
}

TEXT = """
@autotune(K in [2, 4, 8], NT in [128, 256, 512, 1024])
@launch(NT)
@dynshared
{CL}
@grid(M * K)
kernel k_{NAME}(X: tensor<{T}>[M, D], Y: tensor<{T}>[M, D], eps: f32) {
  let r = ctx.block.x / K
  let c = (ctx.block.x % K) * (D / K)
  var x = X[r :+ 1, c :+ D / K]
  var ss = rowsum(x * x)
  {RED}
  Y[r :+ 1, c :+ D / K] = x * rsqrt(ss / f32(D) + eps)
}
"""


# Two rows a cluster: the second row's copy and partial sum run while the cluster catches up on the
# first row's reduction (the code generator waits for a cluster reduction only where its result is
# first needed), and the first row's store while it catches up on the second's.
TWO_ROWS = """
@autotune(K in [2, 4, 8], NT in [128, 256, 512, 1024])
@launch(NT)
@dynshared
@cluster(K)
@grid(cdiv(M, 2) * K)
kernel k_two_rows(X: tensor<{T}>[M, D], Y: tensor<{T}>[M, D], eps: f32) {
  let r = (ctx.block.x / K) * 2
  let c = (ctx.block.x % K) * (D / K)
  var xa = X[r :+ 1, c :+ D / K]
  var sa = rowsum(xa * xa)
  cluster_sum(sa)
  var xb = X[r + 1 :+ 1, c :+ D / K]
  var sb = rowsum(xb * xb)
  cluster_sum(sb)
  Y[r :+ 1, c :+ D / K] = xa * rsqrt(sa / f32(D) + eps)
  Y[r + 1 :+ 1, c :+ D / K] = xb * rsqrt(sb / f32(D) + eps)
}
"""


# Two reads of X, the second from L2: a cluster's CTAs read their slice for the partial sums
# (no tile kept: few bytes of shared memory, so many CTAs an SM hide the cluster's wait), and
# read it again to write; with K CTAs a row only (CTAs resident) / K rows are in flight, which
# L2 holds.
REREAD = """
@autotune(K in [2, 4, 8], NT in [128, 256, 512, 1024])
@launch(NT)
@cluster(K)
@grid(M * K)
kernel k_reread(X: tensor<{T}>[M, D], Y: tensor<{T}>[M, D], eps: f32) {
  let r = ctx.cluster.x
  let c = ctx.cluster.rank * (D / K)
  var ss = rowsum(X[r :+ 1, c :+ D / K] * X[r :+ 1, c :+ D / K])
  cluster_sum(ss)
  Y[r :+ 1, c :+ D / K] = X[r :+ 1, c :+ D / K] * rsqrt(ss / f32(D) + eps)
}
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("--variants", default="8.256,8.512,4.512,4.1024")
    ap.add_argument("--forms", default=",".join(FORMS) + ",two_rows")
    args = ap.parse_args()
    import torch
    import tilenb
    x0 = torch.empty(1 << 28, device="cuda")
    y0 = torch.empty_like(x0)
    copy = time_ms(torch, lambda: y0.copy_(x0))
    bw = 2 * x0.numel() * 4 / copy / 1e6
    print(f"copy {bw:.0f} GB/s", flush=True)
    del x0, y0
    for dt in args.dtypes.split(","):
        tdt = torch.float32 if dt == "f32" else torch.bfloat16
        x = torch.randn(M, N, device="cuda", dtype=tdt)
        y = torch.empty_like(x)
        ref = x.float() * torch.rsqrt((x.float() ** 2).mean(1, keepdim=True) + 1e-6)
        nbytes = 2 * M * N * x.element_size()
        for form in args.forms.split(","):
            if form == "two_rows":
                text = TWO_ROWS.replace("{T}", dt)
            elif form == "reread":
                text = REREAD.replace("{T}", dt)
            else:
                cl, red = FORMS[form]
                text = TEXT.replace("{CL}", cl).replace("{RED}", red).replace("{T}", dt).replace("{NAME}", form)
            text = text.replace("D]", f"{N}]").replace("(D / K)", f"({N} / K)").replace("D / K", f"{N} / K").replace("f32(D)", f"f32({N})")
            k = tilenb.compile(text, backend="cuda").kernels[f"k_{form}"]
            for v in args.variants.split(","):
                K, NT = (int(a) for a in v.split("."))
                if dt == "f32" and K < 4:  # a 256 KB chunk does not fit
                    continue
                var = {"K": K, "NT": NT}
                try:
                    k(x, y, 1e-6, variant=var)
                    torch.cuda.synchronize()
                    err = ((y.float() - ref).norm() / ref.norm()).item()
                    ms = time_ms(torch, lambda: k(x, y, 1e-6, variant=var))
                    print(f"{dt:5s} {form:10s} K={K} NT={NT:5d} {ms:.3f} ms  {nbytes / ms / 1e6 / bw:6.1%}  err {err:.1e}", flush=True)
                except Exception as e:  # noqa: BLE001
                    print(f"{dt:5s} {form:10s} K={K} NT={NT:5d} failed: {type(e).__name__}: {str(e)[:200]}", flush=True)


if __name__ == "__main__":
    main()
