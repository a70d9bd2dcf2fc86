"""Question: How fast can long-row RMSNorm on a thread block cluster go at all, written by hand?

Hand-written CUDA ceiling for long rows held by a thread block cluster (issue 8, 4096 x 131072):
how fast can RMSNorm go when a persistent cluster of K CTAs walks rows, copying row i + 1 into
a second shared buffer (a 1-D bulk copy on an mbarrier) while row i's partial sums meet across
the cluster (distributed shared memory) and row i is written. Not tilenb code: a measuring stick
for what `@cluster` kernels would gain from cluster reductions inside loops plus an asynchronous
copy a row ahead (docs/benchmarks.md, long rows).

    python bench/probes/cluster_ceiling.py            # on an sm_90 GPU (CuPy + torch): prints % of copy bandwidth
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))              # tilenb
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "suite"))   # the suite's launch helpers

from gemm_sm90 import time_ms  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tilenb.target import target  # noqa: E402

H100 = target("sm_90")   # the shared-memory limits of the GPU these probes are written for

M, N = 4096, 131072

SRC = r"""
#define K {K}
#define NT {NT}
#define S {S}                              // shared buffers: rows copied up to S - 1 ahead
#define BF16 {BF16}
#if BF16
typedef unsigned short T;
__device__ __forceinline__ float ld(const T* p, int i) { return __uint_as_float(((unsigned)p[i]) << 16); }
#else
typedef float T;
#endif
#define C ({N} / K)                       // elements a CTA holds of a row
#define EPV (16 / (int)sizeof(T))         // elements a 16-byte vector
__device__ __forceinline__ unsigned saddr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void cl_arrive() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
__device__ __forceinline__ void cl_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }
__device__ __forceinline__ float cl_ld(unsigned a, unsigned r) {
  unsigned ra; asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(ra) : "r"(a), "r"(r));
  float v; asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(ra) : "memory"); return v; }
__device__ __forceinline__ void mbar_init(unsigned b) { asm volatile("mbarrier.init.shared.b64 [%0], 1;" :: "r"(b)); }
__device__ __forceinline__ void mbar_expect(unsigned b, unsigned n) {
  asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" :: "r"(b), "r"(n) : "memory"); }
__device__ __forceinline__ void mbar_wait(unsigned b, unsigned ph) {
  asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared.b64 p, [%0], %1;\n @!p bra W;\n}" :: "r"(b), "r"(ph) : "memory"); }
__device__ __forceinline__ void bulk(unsigned dst, const void* src, unsigned n, unsigned b) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(dst), "l"(src), "r"(n), "r"(b) : "memory"); }

extern "C" __global__ void __cluster_dims__(K, 1, 1) __launch_bounds__(NT) k(const T* X, T* Y, int rows, float eps) {
  extern __shared__ __align__(1024) unsigned char smem[];
  T* buf = (T*)smem;                                   // [S][C]
  unsigned long long* bar = (unsigned long long*)(smem + S * C * sizeof(T));   // [S]
  float* slot = (float*)(bar + S);                     // [2] published partial sums
  float* part = slot + 2;                              // [NT / 32] warp partials
  const int tid = threadIdx.x, rank = blockIdx.x % K, cid = blockIdx.x / K, ncl = gridDim.x / K;
  const size_t col = (size_t)rank * C;
  if (tid == 0) { for (int q = 0; q < S; ++q) mbar_init(saddr(&bar[q])); asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
  __syncthreads();
  if (tid == 0)
    for (int q = 0; q < S - 1 && cid + q * ncl < rows; ++q) {
      mbar_expect(saddr(&bar[q]), C * sizeof(T));
      bulk(saddr(buf + q * C), X + (size_t)(cid + q * ncl) * {N} + col, C * sizeof(T), saddr(&bar[q]));
    }
  int it = 0;
  for (int r = cid; r < rows; r += ncl, ++it) {
    const int b = it & 1, st = it % S;
    T* x = buf + st * C;
    mbar_wait(saddr(&bar[st]), (it / S) & 1);
    const int ahead = r + (S - 1) * ncl, sa = (it + S - 1) % S;
    if (tid == 0 && ahead < rows) {     // S - 1 rows ahead, into the buffer the last turn freed
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");   // its ordinary reads before the copy's writes
      mbar_expect(saddr(&bar[sa]), C * sizeof(T));
      bulk(saddr(buf + sa * C), X + (size_t)ahead * {N} + col, C * sizeof(T), saddr(&bar[sa]));
    }
    float ss = 0.f;
    for (int v = tid; v < C / EPV; v += NT) {
      uint4 u = ((const uint4*)x)[v];
#if BF16
      unsigned w[4] = {u.x, u.y, u.z, u.w};
      for (int q = 0; q < 4; ++q) { float lo = __uint_as_float(w[q] << 16), hi = __uint_as_float(w[q] & 0xffff0000u); ss += lo * lo + hi * hi; }
#else
      ss += __uint_as_float(u.x) * __uint_as_float(u.x) + __uint_as_float(u.y) * __uint_as_float(u.y)
          + __uint_as_float(u.z) * __uint_as_float(u.z) + __uint_as_float(u.w) * __uint_as_float(u.w);
#endif
    }
    for (int o = 16; o; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if ((tid & 31) == 0) part[tid >> 5] = ss;
    __syncthreads();
    if (tid == 0) { float t = 0.f; for (int w = 0; w < NT / 32; ++w) t += part[w]; slot[b] = t; }
    cl_arrive(); cl_wait();             // every CTA of the cluster has published row r's partial
    float tot = 0.f;
    for (int q = 0; q < K; ++q) tot += cl_ld(saddr(&slot[b]), q);
    const float inv = rsqrtf(tot / {N} + eps);
    for (int v = tid; v < C / EPV; v += NT) {
      uint4 u = ((const uint4*)x)[v];
#if BF16
      unsigned w[4] = {u.x, u.y, u.z, u.w};
      for (int q = 0; q < 4; ++q) {
        float lo = __uint_as_float(w[q] << 16) * inv, hi = __uint_as_float(w[q] & 0xffff0000u) * inv;
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w[q]) : "f"(hi), "f"(lo)); }
      u = make_uint4(w[0], w[1], w[2], w[3]);
#else
      u = make_uint4(__float_as_uint(__uint_as_float(u.x) * inv), __float_as_uint(__uint_as_float(u.y) * inv),
                     __float_as_uint(__uint_as_float(u.z) * inv), __float_as_uint(__uint_as_float(u.w) * inv));
#endif
      ((uint4*)(Y + (size_t)r * {N} + col))[v] = u;
    }
    __syncthreads();                    // x is free for the copy two rows ahead; part is free
  }
  cl_arrive(); cl_wait();               // no CTA leaves while another may read its slots
}
"""


# (K, threads, CTAs an SM, buffers): rows copied up to buffers - 1 ahead
CONFIGS = [(8, 256, 1, 2), (8, 256, 1, 3), (8, 512, 1, 3), (4, 256, 1, 2), (8, 256, 2, 2), (8, 256, 2, 3),
           (8, 128, 3, 2), (16, 256, 1, 3)]


def main():
    import cupy as cp
    import torch
    x0 = torch.empty(1 << 28, device="cuda")
    y0 = torch.empty_like(x0)

    bw = 2 * x0.numel() * 4 / time_ms(torch, lambda: y0.copy_(x0)) / 1e6
    print(f"copy {bw:.0f} GB/s", flush=True)
    del x0, y0
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for bf16 in (0, 1):
        dt = torch.bfloat16 if bf16 else torch.float32
        x = torch.randn(M, N, device="cuda", dtype=dt)
        y = torch.empty_like(x)
        ref = (x.float() * torch.rsqrt((x.float() ** 2).mean(1, keepdim=True) + 1e-6))
        nbytes = 2 * M * N * x.element_size()
        for K, NT, per_sm, S in CONFIGS:
            C = N // K
            smem = S * C * x.element_size() + 8 * S + 8 + 4 * (NT // 32) + 64
            if smem * per_sm > H100.smem_per_sm or smem > H100.dynamic_smem:
                continue
            src = (SRC.replace("{K}", str(K)).replace("{NT}", str(NT)).replace("{BF16}", str(bf16)).replace("{N}", str(N))
                   .replace("{S}", str(S)))
            try:
                fn = cp.RawModule(code=src, options=("--std=c++17",), backend="nvrtc").get_function("k")
                fn.max_dynamic_shared_size_bytes = smem
                grid = (sms * per_sm // K) * K
                xc, yc = cp.from_dlpack(x), cp.from_dlpack(y)
                go = lambda: fn((grid,), (NT,), (xc, yc, cp.int32(M), cp.float32(1e-6)), shared_mem=smem)  # noqa: E731
                y.fill_(float("nan"))
                go()
                torch.cuda.synchronize()
                err = ((y.float() - ref).norm() / ref.norm()).item()
                ms = time_ms(torch, go)
                print(f"{'bf16' if bf16 else 'f32 '} K={K} NT={NT} buffers={S} CTAs/SM={per_sm} grid={grid} {ms:.3f} ms "
                      f"{nbytes / ms / 1e6 / bw:6.1%}  err {err:.1e}", flush=True)
            except Exception as e:  # noqa: BLE001
                print(f"{'bf16' if bf16 else 'f32 '} K={K} NT={NT} failed: {type(e).__name__}: {str(e)[:300]}", flush=True)


if __name__ == "__main__":
    main()
