"""Question: How fast are a few kernels of the CUDA test corpus (a quick figure after a GPU check)?

A few timings of generated kernels on the GPU (correct-first code; figures for the record).

Usage: python bench/probes/cuda_bench.py   (needs a CUDA GPU and CuPy). Prints one line per kernel:
the kernel time from CUDA events (best of 5 launches, data already on the GPU) and the rate.
"""
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import cupy as cp  # noqa: E402

import tilenb  # noqa: E402
import tilenb.runtime.gpu.cuda as tcuda  # noqa: E402
from support.programs import PROGRAMS, SEED  # noqa: E402


def best_ms(launch, n=5):
    out = []
    for _ in range(n):
        launch()
        out.append(tcuda_last[0].last_run.extra["kernel_ms"])
    return min(out)


tcuda_last = [None]


def main():
    tcuda.PROGRESS = True
    tcuda.TIME_REPEATS = True      # best_ms reads each repeat's own kernel_ms
    rng = np.random.default_rng(0)
    # f16 GEMM on tensor cores (fp32 accumulate), 2048^3
    mod = tilenb.compile(PROGRAMS["gemm_f16"], backend="cuda")
    M = N = K = 2048
    a = cp.asarray(rng.standard_normal((M, K)).astype(np.float16))
    b = cp.asarray(rng.standard_normal((K, N)).astype(np.float16))
    c = cp.zeros((M, N), dtype=cp.float32)
    tcuda_last[0] = mod.hgemm
    ms = best_ms(lambda: mod.hgemm(a, b, c, 1.0, 0.0))
    ref = cp.matmul(a.astype(cp.float32), b.astype(cp.float32))
    err = float(cp.linalg.norm(c - ref) / cp.linalg.norm(ref))
    print(f"hgemm {M}x{N}x{K} f16: {ms:.3f} ms, {2 * M * N * K / ms / 1e9:.1f} TFLOP/s, rel err {err:.2e}, "
          f"variant {mod.hgemm.last_run.variant}")
    # f32 GEMM (seed, simple loop per output element)
    mod = tilenb.compile(SEED, backend="cuda")
    M = N = K = 1024
    a = cp.asarray(rng.standard_normal((M, K)).astype(np.float32))
    b = cp.asarray(rng.standard_normal((K, N)).astype(np.float32))
    c = cp.zeros((M, N), dtype=cp.float32)
    tcuda_last[0] = mod.gemm
    ms = best_ms(lambda: mod.gemm(a, b, c, 1.0, 0.0))
    print(f"gemm {M}x{N}x{K} f32 (CUDA cores): {ms:.3f} ms, {2 * M * N * K / ms / 1e9:.2f} TFLOP/s")
    # rms_norm, memory bound
    M, D = 65536, 256
    x = cp.asarray(rng.standard_normal((M, D)).astype(np.float32))
    g = cp.asarray(rng.standard_normal((1, D)).astype(np.float32))
    y = cp.zeros_like(x)
    tcuda_last[0] = mod.rms_norm
    ms = best_ms(lambda: mod.rms_norm[M // 8](x, g, y))
    print(f"rms_norm {M}x{D} f32: {ms:.3f} ms, {2 * x.nbytes / ms / 1e6:.0f} GB/s (read + write)")
    # flash attention f32
    N, D = 4096, 64
    q, k, v = (cp.asarray(rng.standard_normal((N, D)).astype(np.float32)) for _ in range(3))
    o = cp.zeros_like(q)
    tcuda_last[0] = mod.flash_attention
    ms = best_ms(lambda: mod.flash_attention[N // 32](q, k, v, o))
    print(f"flash_attention N={N} D={D} f32: {ms:.3f} ms, {4 * N * N * D / ms / 1e9:.2f} TFLOP/s")


if __name__ == "__main__":
    main()
