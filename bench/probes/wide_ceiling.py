"""Question: How fast can a two-pass long-row kernel go, and which of a reverse second pass, L2
eviction hints, CTAs per SM and a head in shared memory matter?

Hand-written CUDA ceiling for RMSNorm over long rows (issue 8, 4096 x 131072): how fast can a
two-pass row kernel go on this GPU at all, and which of a reverse second pass, L2 eviction hints,
CTAs per SM and a head kept in shared memory matter. Not tilenb code: a measuring stick for it.

    python bench/probes/wide_ceiling.py gen DIR     # here: NVRTC -> DIR/*.cubin + manifest.json
    python bench/probes/wide_ceiling.py run DIR     # on the GPU: checked on sampled rows, timed (CUDA events)
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

M, N = 4096, 131072

SRC = r"""
#define NT {NT}
#define U {U}
#define HV {HV}
#define REV {REV}
#define HINT {HINT}
#define BF16 {BF16}
__device__ __forceinline__ unsigned long long pol_last() { unsigned long long p; asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p)); return p; }
__device__ __forceinline__ unsigned long long pol_first() { unsigned long long p; asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p)); return p; }
__device__ __forceinline__ unsigned long long pol_normal() { unsigned long long p; asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(p)); return p; }
__device__ __forceinline__ uint4 ldh(const uint4* a, unsigned long long p) { uint4 v; asm volatile("ld.global.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(a), "l"(p)); return v; }
__device__ __forceinline__ void sth(uint4* a, uint4 v, unsigned long long p) { asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1,%2,%3,%4}, %5;" :: "l"(a), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "l"(p) : "memory"); }
__device__ __forceinline__ void stcs(uint4* a, uint4 v) { asm volatile("st.global.cs.v4.u32 [%0], {%1,%2,%3,%4};" :: "l"(a), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory"); }
#if BF16
#define EPV 8
__device__ __forceinline__ void unpack(uint4 v, float* f) { unsigned w[4] = {v.x, v.y, v.z, v.w};
  for (int i = 0; i < 4; ++i) { f[2*i] = __uint_as_float(w[i] << 16); f[2*i+1] = __uint_as_float(w[i] & 0xffff0000u); } }
__device__ __forceinline__ uint4 pack(const float* f) { unsigned w[4];
  for (int i = 0; i < 4; ++i) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w[i]) : "f"(f[2*i+1]), "f"(f[2*i]));
  return make_uint4(w[0], w[1], w[2], w[3]); }
#else
#define EPV 4
__device__ __forceinline__ void unpack(uint4 v, float* f) { f[0] = __uint_as_float(v.x); f[1] = __uint_as_float(v.y); f[2] = __uint_as_float(v.z); f[3] = __uint_as_float(v.w); }
__device__ __forceinline__ uint4 pack(const float* f) { return make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]), __float_as_uint(f[3])); }
#endif
// HINT 0: none; 1: pass-2 loads and Y stores evict_first; 2: also pass-1 loads evict_last; 3: stores st.cs only
__device__ __forceinline__ uint4 ld1(const uint4* a) {
#if HINT == 2
  return ldh(a, pol_last());
#else
  return *a;
#endif
}
__device__ __forceinline__ uint4 ld2(const uint4* a) {
#if HINT == 1 || HINT == 2
  return ldh(a, pol_first());
#else
  return *a;
#endif
}
__device__ __forceinline__ void st(uint4* a, uint4 v) {
#if HINT == 1 || HINT == 2
  sth(a, v, pol_first());
#elif HINT == 3
  stcs(a, v);
#else
  *a = v;
#endif
}
extern "C" __global__ void __launch_bounds__(NT) k(const uint4* X, const uint4* G, uint4* Y, float eps, long long Mr, long long Nc) {
  extern __shared__ uint4 head[];
  __shared__ float red[32];
  const int tid = threadIdx.x;
  const long long nv = Nc / EPV;
  const uint4* x = X + blockIdx.x * nv;
  uint4* y = Y + blockIdx.x * nv;
  float ss = 0.f;
  #pragma unroll
  for (int h = 0; h < HV; ++h) { uint4 v = ld2(x + h * NT + tid); head[h * NT + tid] = v; float f[EPV]; unpack(v, f); for (int e = 0; e < EPV; ++e) ss += f[e] * f[e]; }
  const long long first = (long long)HV * NT;
  for (long long b = first; b < nv; b += U * NT) {
    uint4 r[U];
    #pragma unroll
    for (int u = 0; u < U; ++u) { long long i = b + u * NT + tid; r[u] = i < nv ? ld1(x + i) : make_uint4(0, 0, 0, 0); }
    #pragma unroll
    for (int u = 0; u < U; ++u) { float f[EPV]; unpack(r[u], f); for (int e = 0; e < EPV; ++e) ss += f[e] * f[e]; }
  }
  for (int o = 16; o; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if ((tid & 31) == 0) red[tid >> 5] = ss;
  __syncthreads();
  float t = 0.f;
  for (int w = 0; w < NT / 32; ++w) t += red[w];
  const float inv = rsqrtf(t / (float)Nc + eps);
  const long long nb = (nv - first + U * NT - 1) / (U * NT);
  for (long long j = 0; j < nb; ++j) {
    const long long b = first + (REV ? (nb - 1 - j) : j) * (U * NT);
    uint4 r[U], g[U];
    #pragma unroll
    for (int u = 0; u < U; ++u) { long long i = b + u * NT + tid; if (i < nv) { r[u] = ld2(x + i); g[u] = G[i]; } }
    #pragma unroll
    for (int u = 0; u < U; ++u) { long long i = b + u * NT + tid; if (i < nv) { float f[EPV], gg[EPV]; unpack(r[u], f); unpack(g[u], gg);
      for (int e = 0; e < EPV; ++e) f[e] = f[e] * inv * gg[e]; st(y + i, pack(f)); } }
  }
  #pragma unroll
  for (int h = 0; h < HV; ++h) { long long i = h * NT + tid; float f[EPV], gg[EPV]; unpack(head[i], f); unpack(G[i], gg);
    for (int e = 0; e < EPV; ++e) f[e] = f[e] * inv * gg[e]; st(y + i, pack(f)); }
}
"""


def variants():
    out = []
    for bf in (0, 1):
        for NT, occ in ((1024, 1), (1024, 2), (512, 2), (512, 4)):
            for rev in (0, 1):
                for hint in (0, 1, 2, 3):
                    out.append(dict(BF16=bf, NT=NT, U=4 if NT == 1024 else 8, HV=0, REV=rev, HINT=hint, OCC=occ))
        for NT, occ, hv in ((1024, 1, 12), (1024, 1, 6), (1024, 2, 5), (512, 2, 10)):
            for hint in (0, 1, 3):
                out.append(dict(BF16=bf, NT=NT, U=4 if NT == 1024 else 8, HV=hv, REV=1, HINT=hint, OCC=occ))
    return out


def tag(v):
    return "rms_{}_NT{NT}_occ{OCC}_HV{HV}_rev{REV}_hint{HINT}".format("bf16" if v["BF16"] else "f32", **v)


def smem_for(v):
    head = v["HV"] * v["NT"] * 16
    force = {1: 120 * 1024, 2: 80 * 1024, 4: 50 * 1024}[v["OCC"]]
    return max(head, force)


def _one(args):
    v, d = args
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tilenb.codegen import nvrtc_compile
    src = SRC
    for k, x in v.items():
        src = src.replace("{" + k + "}", str(x))
    Path(d, tag(v) + ".cubin").write_bytes(nvrtc_compile(src, "sm_90", name=tag(v) + ".cu", use_cache=False))
    return dict(v, tag=tag(v), smem=smem_for(v))


def gen(d: Path, only: str = ""):
    import re
    from concurrent.futures import ProcessPoolExecutor
    d.mkdir(parents=True, exist_ok=True)
    todo = [v for v in variants() if re.search(only, tag(v))]
    with ProcessPoolExecutor(2) as ex:
        man = list(ex.map(_one, [(v, str(d)) for v in todo]))
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
    rows_chk = np.array([0, 1, 131, 4095])
    data = {}
    for bf in (0, 1):
        x = cp.random.standard_normal((M, N), dtype=cp.float32)
        g = cp.random.standard_normal((1, N), dtype=cp.float32)
        if bf:
            x, g = to_bf16_bits(x), to_bf16_bits(g)
        data[bf] = (x, g, cp.empty_like(x))
    res = []
    for v in man:
        x, g, y = data[v["BF16"]]
        try:
            fn = cp.RawModule(path=str(Path(d, v["tag"] + ".cubin"))).get_function("k")
            fn.max_dynamic_shared_size_bytes = v["smem"]
            args = (x, g, y, np.float32(1e-5), np.int64(M), np.int64(N))
            launch = lambda: fn((M,), (v["NT"],), args, shared_mem=v["smem"])
            y.fill(0)
            launch(); cp.cuda.runtime.deviceSynchronize()
            h = lambda a: (cp.asnumpy(a).view(ml_dtypes.bfloat16) if v["BF16"] else cp.asnumpy(a)).astype(np.float64)
            xs, gs, ys = h(x[rows_chk]), h(g), h(y[rows_chk])
            ref = xs / np.sqrt((xs * xs).mean(1, keepdims=True) + 1e-5) * gs
            err = float(np.linalg.norm(ys - ref) / np.linalg.norm(ref))
            s = time_s(launch)
            rate = 2 * M * N * (2 if v["BF16"] else 4) / s / 1e9
            res.append(dict(v, seconds=s, frac=rate / bw, err=err))
            print(f"{v['tag']:<44} {s * 1e3:7.3f} ms {100 * rate / bw:5.1f}%  err {err:.1e}", flush=True)
        except Exception as exc:
            print(v["tag"], "FAILED", repr(exc)[:200], flush=True)
    return bw, res


if __name__ == "__main__":
    import os
    if sys.argv[1] == "gen":
        gen(Path(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "")
    else:
        bw, res = run(Path(sys.argv[2]))
        Path(os.environ.get("OUT", "."), "wide_ceiling.json").write_text(json.dumps(dict(copy_bandwidth_GBps=bw, rows=res), indent=1))
        for r in sorted(res, key=lambda r: -r["frac"])[:12]:
            print(f"best: {r['tag']:<44} {100 * r['frac']:5.1f}%")
