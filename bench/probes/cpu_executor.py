"""Question: How fast is the CPU reference executor on tutorial-size kernels?

Throughput of the CPU reference executor (a benchmark, not a test).

Runs a few tutorial-size kernels on the CPU backend and prints, per kernel, the wall time of
one launch (best of `--repeat`), tensor elements processed per second and CTAs per second.
Usage: python bench/probes/cpu_executor.py [--repeat 3] [--scale 1.0]
"""
from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

import tilenb

SOURCE = """
@autotune(D in [256])
@launch(256)
@grid(cdiv(M, 8))
kernel rms_norm(X: tensor<f32>[M, D], G: tensor<f32>[1, D], Y: tensor<f32>[M, D]) {
  let r = ctx.block.x * 8
  var x = X[r :+ 8, :]
  var ss: tile<f32>[8, 1] = rowsum(x * x)
  var inv: tile<f32>[8, 1] = 1.0 / sqrt(ss / 256.0 + 0.000001)
  var g = G[0 :+ 1, :]
  Y[r :+ 8, :] = x * inv * g
}

@autotune(BLOCK in [1024])
@launch(128)
@grid(cdiv(M, 4))
kernel softmax(X: tensor<f32>[M, N], Y: tensor<f32>[M, N]) {
  let r = ctx.block.x * 4
  var x = X[r :+ 4, 0 :+ BLOCK]
  var m = rowmax(x)
  var e = exp(x - m)
  Y[r :+ 4, 0 :+ BLOCK] = e / rowsum(e)
}

@autotune(TM in [64], TN in [64], TK in [32])
@launch(128)
@grid(cdiv(M, TM), cdiv(N, TN))
kernel gemm(A: tensor<f32>[M, K], B: tensor<f32>[K, N], C: tensor<f32>[M, N]) {
  var acc: tile<f32>[TM, TN] = 0.0
  for kt in range(0, K, TK) {
    var a = A[ctx.block.x * TM :+ TM, kt :+ TK]
    var b = B[kt :+ TK, ctx.block.y * TN :+ TN]
    acc += dot(a, b)
  }
  C[ctx.block.x * TM :+ TM, ctx.block.y * TN :+ TN] = acc
}

@autotune(BR in [32], BC in [64], D in [64])
@launch(128)
@grid(cdiv(N, BR))
kernel attention(Q: tensor<f32>[N, D], K: tensor<f32>[Nk, D], V: tensor<f32>[Nk, D], O: tensor<f32>[N, D]) {
  let row = ctx.block.x * BR
  let q = Q[row :+ BR, :]
  var acc: tile<f32>[BR, D] = 0.0
  var m: tile<f32>[BR, 1] = -1.0e30
  var l: tile<f32>[BR, 1] = 0.0
  for kt in range(0, Nk, BC) {
    var s: tile<f32>[BR, BC] = dot_t(q, K[kt :+ BC, :]) * 0.125
    var m_new = max(m, rowmax(s))
    var p = exp(s - m_new)
    var alpha = exp(m - m_new)
    l = l * alpha + rowsum(p)
    acc = acc * alpha + dot(p, V[kt :+ BC, :])
    m = m_new
  }
  O[row :+ BR, :] = acc / l
}

// per-thread code: each thread scans its own row, with a data-dependent early exit
@launch(128)
@grid(cdiv(M, 128))
kernel first_above(X: tensor<f32>[M, N], O: tensor<i32>[M, 1], thr: f32) {
  let row = ctx.block.x * 128 + ctx.thread
  var found: i32 = -1
  for j in range(0, N) {
    if X[row, j] > thr {
      found = i32(j)
      break
    }
  }
  O[row, 0] = found
}
"""


def cases(scale):
    rng = np.random.default_rng(0)
    f32 = np.float32

    def r(*shape):
        return rng.standard_normal(shape).astype(f32)

    m = int(4096 * scale) // 8 * 8
    yield "rms_norm", "rms_norm", (r(m, 256), r(1, 256), np.zeros((m, 256), f32)), m * 256
    yield "softmax", "softmax", (r(m, 1000), np.zeros((m, 1000), f32)), m * 1000
    n = int(512 * scale) // 4 * 4
    yield f"gemm {n}^3", "gemm", (r(n, n), r(n, n), np.zeros((n, n), f32)), n * n * n
    s = int(1024 * scale) // 4 * 4
    yield f"attention {s}x{s}x64", "attention", (r(s, 64), r(s, 64), r(s, 64), np.zeros((s, 64), f32)), s * s * 64
    yield "first_above (per-thread)", "first_above", (r(m, 256), np.zeros((m, 1), np.int32), 2.0), m * 256


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0)
    args = ap.parse_args()
    mod = tilenb.compile(SOURCE, backend="cpu", filename="bench.tile")
    print(f"CPU executor, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"numpy {np.__version__}")
    print(f"{'kernel':28s} {'ms':>9s} {'elements/s':>12s} {'CTAs':>7s} {'CTAs/s':>10s}")
    for label, name, arrays, work in cases(args.scale):
        k = mod.kernels[name]
        best = float("inf")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            k(*arrays)
            best = min(best, time.perf_counter() - t0)
        ctas = k.last_run.ctas
        print(f"{label:28s} {best * 1e3:9.1f} {work / best:12.3g} {ctas:7d} {ctas / best:10.3g}")
    print("elements: tensor elements of the main input (gemm: M*N*K multiply-adds; attention: N*Nk*D)")


if __name__ == "__main__":
    main()
