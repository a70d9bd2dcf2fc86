"""Question: What would the head form of long-row RMSNorm reach if the code generator emitted it as
well as it could?

What the tile-language "head" form of a long-row RMSNorm (4096 x 131072 bf16) would reach if
the code generator emitted it statement by statement as well as it could: a hand-written kernel in
the shape of tilenb's generated code, with switches for the generator features that do not exist
yet. Not tilenb code: a measuring stick that decides whether those features are worth building
(docs/benchmarks.md, long rows).

The kernel, one CTA of 1024 threads a row, statement by statement:
  1. var h = X[r, 0 :+ K]            the head (192 KB) copied asynchronously into shared memory
  2. st = rowsum(X[r, K :+ T]^2)     the tail (64 KB) summed straight from global memory, all of
                                     a thread's loads in flight, one CTA-wide combine
  3. sh = rowsum(h * h)              (after the wait for step 1: DEFER=1 waits only here, so the
                                     head's and the tail's loads are in flight together)
  4. Y[r, K :+ T] = X[r, K :+ T] * inv * G    (the second read of the tail, evict_first)
  5. Y[r, 0 :+ K] = h * inv * G                (B chunks a thread a batch)
Switches: VB (bytes a vector access: 8 = tilenb's bf16 width for a runtime row length, 16), DEFER,
B (chunks a batch in step 5: 8 = tilenb's, or all of them).

    python bench/probes/head_probe.py gen DIR      # here: NVRTC -> DIR/*.cubin + manifest.json
    python bench/probes/head_probe.py run DIR      # on the GPU: checked on sampled rows, timed
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

M, N, K = 4096, 131072, 98304
T_ = N - K

SRC = r"""
#define VB {VB}
#define DEFER {DEFER}
#define B {B}
#define NT 1024
#define EPC (VB / 2)                      // bf16 elements a chunk
#define HC ({K} / EPC / NT)               // head chunks a thread
#define TC ({T} / EPC / NT)               // tail chunks a thread
#if VB == 16
typedef uint4 V;
#else
typedef uint2 V;
#endif
__device__ __forceinline__ unsigned long long pol_first() { unsigned long long p; asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p)); return p; }
__device__ __forceinline__ V ldh(const V* a, unsigned long long p) { V v;
#if VB == 16
  asm volatile("ld.global.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(a), "l"(p));
#else
  asm volatile("ld.global.L2::cache_hint.v2.u32 {%0,%1}, [%2], %3;" : "=r"(v.x), "=r"(v.y) : "l"(a), "l"(p));
#endif
  return v; }
__device__ __forceinline__ void sth(V* a, V v, unsigned long long p) {
#if VB == 16
  asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1,%2,%3,%4}, %5;" :: "l"(a), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "l"(p) : "memory");
#else
  asm volatile("st.global.L2::cache_hint.v2.u32 [%0], {%1,%2}, %3;" :: "l"(a), "r"(v.x), "r"(v.y), "l"(p) : "memory");
#endif
}
__device__ __forceinline__ void unpack(V v, float* f) { const unsigned* w = (const unsigned*)&v;
  for (int i = 0; i < VB / 4; ++i) { f[2*i] = __uint_as_float(w[i] << 16); f[2*i+1] = __uint_as_float(w[i] & 0xffff0000u); } }
__device__ __forceinline__ V pack(const float* f) { V v; unsigned* w = (unsigned*)&v;
  for (int i = 0; i < VB / 4; ++i) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w[i]) : "f"(f[2*i+1]), "f"(f[2*i]));
  return v; }
__device__ __forceinline__ float block_sum(float s, float* red) {
  for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = s;
  __syncthreads();
  float t = 0.f;
  for (int w = 0; w < NT / 32; ++w) t += red[w];
  return t;
}
extern "C" __global__ void __launch_bounds__(NT) k(const unsigned short* X, const unsigned short* G, unsigned short* Y, float eps, long long Mr, long long Nc) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ float red[32];
  const int tid = threadIdx.x;
  const V* x = (const V*)(X + blockIdx.x * Nc);
  V* y = (V*)(Y + blockIdx.x * Nc);
  const V* g = (const V*)G;
  V* h = (V*)smem;
  const unsigned long long ef = pol_first();
  // 1: the head, asynchronously
  #pragma unroll 4
  for (int q = 0; q < HC; ++q) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(h + tid + q * NT);
#if VB == 16
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(d), "l"(x + tid + q * NT) : "memory");
#else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" :: "r"(d), "l"(x + tid + q * NT) : "memory");
#endif
  }
#if !DEFER
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
  // 2: the tail's sum of squares from global memory
  const V* xt = x + {K} / EPC;
  float ss = 0.f;
  {
    V r[TC];
    #pragma unroll
    for (int q = 0; q < TC; ++q) r[q] = xt[tid + q * NT];
    #pragma unroll
    for (int q = 0; q < TC; ++q) { float f[EPC]; unpack(r[q], f); for (int e = 0; e < EPC; ++e) ss += f[e] * f[e]; }
  }
  const float st = block_sum(ss, red);
#if DEFER
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
  __syncthreads();
  // 3: the head's sum of squares from shared memory
  ss = 0.f;
  #pragma unroll 4
  for (int q = 0; q < HC; ++q) { float f[EPC]; unpack(h[tid + q * NT], f); for (int e = 0; e < EPC; ++e) ss += f[e] * f[e]; }
  const float inv = rsqrtf((block_sum(ss, red) + st) / (float)Nc + eps);
  // 4: the tail again (its last read: evict_first), scaled
  {
    V r[TC], w[TC];
    #pragma unroll
    for (int q = 0; q < TC; ++q) { r[q] = ldh(xt + tid + q * NT, ef); w[q] = g[{K} / EPC + tid + q * NT]; }
    #pragma unroll
    for (int q = 0; q < TC; ++q) { float f[EPC], gg[EPC]; unpack(r[q], f); unpack(w[q], gg);
      for (int e = 0; e < EPC; ++e) f[e] = f[e] * inv * gg[e]; sth(y + {K} / EPC + tid + q * NT, pack(f), ef); }
  }
  // 5: the head, scaled, B chunks a batch
  #pragma unroll 1
  for (int b0 = 0; b0 < HC; b0 += B) {
    V r[B], w[B];
    #pragma unroll
    for (int q = 0; q < B; ++q) { r[q] = h[tid + (b0 + q) * NT]; w[q] = g[tid + (b0 + q) * NT]; }
    #pragma unroll
    for (int q = 0; q < B; ++q) { float f[EPC], gg[EPC]; unpack(r[q], f); unpack(w[q], gg);
      for (int e = 0; e < EPC; ++e) f[e] = f[e] * inv * gg[e]; sth(y + tid + (b0 + q) * NT, pack(f), ef); }
  }
}
"""


def variants():
    out = []
    for VB in (8, 16):
        hc = K * 2 // VB // 1024
        for DEFER in (0, 1):
            for Bv in sorted({8 if VB == 8 else 4, hc}):
                out.append(dict(VB=VB, DEFER=DEFER, B=Bv))
    return out


def tag(v):
    return "head_VB{VB}_DEFER{DEFER}_B{B}".format(**v)


def _one(args):
    v, d = args
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tilenb.codegen import nvrtc_compile
    src = SRC.replace("{K}", str(K)).replace("{T}", str(T_))
    for k, x in v.items():
        src = src.replace("{" + k + "}", str(x))
    Path(d, tag(v) + ".cubin").write_bytes(nvrtc_compile(src, "sm_90", name=tag(v) + ".cu", use_cache=False))
    return dict(v, tag=tag(v), smem=K * 2)


def gen(d: Path):
    from concurrent.futures import ProcessPoolExecutor
    d.mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(4) as ex:
        man = list(ex.map(_one, [(v, str(d)) for v in variants()]))
    Path(d, "manifest.json").write_text(json.dumps(man, indent=1))
    print(len(man), "cubins")


def run(d: Path):
    import cupy as cp
    import numpy as np
    import ml_dtypes
    from cupy_timing import copy_bandwidth_GBps, time_s, to_bf16_bits
    man = json.loads(Path(d, "manifest.json").read_text())
    bw = copy_bandwidth_GBps()
    print(f"copy bandwidth {bw:.0f} GB/s")
    x = to_bf16_bits(cp.random.standard_normal((M, N), dtype=cp.float32))
    g = to_bf16_bits(cp.random.standard_normal((1, N), dtype=cp.float32))
    y = cp.empty_like(x)
    rows = np.array([0, 1, 131, 4095])
    h = lambda a: cp.asnumpy(a).view(ml_dtypes.bfloat16).astype(np.float64)
    xs, gs = h(x[rows]), h(g)
    ref = xs / np.sqrt((xs * xs).mean(1, keepdims=True) + 1e-5) * gs
    res = []
    for _ in range(2):                 # two rounds, alternating the variants
        for v in man:
            fn = cp.RawModule(path=str(Path(d, v["tag"] + ".cubin"))).get_function("k")
            fn.max_dynamic_shared_size_bytes = v["smem"]
            launch = lambda: fn((M,), (1024,), (x, g, y, np.float32(1e-5), np.int64(M), np.int64(N)), shared_mem=v["smem"])
            y.fill(0)
            launch(); cp.cuda.runtime.deviceSynchronize()
            err = float(np.linalg.norm(h(y[rows]) - ref) / np.linalg.norm(ref))
            s = time_s(launch)
            rate = 2 * M * N * 2 / s / 1e9
            res.append(dict(v, seconds=s, frac=rate / bw, err=err))
            print(f"{v['tag']:<30} {s * 1e3:7.3f} ms {100 * rate / bw:5.1f}%  err {err:.1e}", flush=True)
    return bw, res


if __name__ == "__main__":
    import os
    if sys.argv[1] == "gen":
        gen(Path(sys.argv[2]))
    else:
        bw, res = run(Path(sys.argv[2]))
        Path(os.environ.get("OUT", "."), "head_probe.json").write_text(json.dumps(dict(copy_bandwidth_GBps=bw, rows=res), indent=1))
