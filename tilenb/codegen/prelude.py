"""The fixed C++ text every generated CUDA kernel starts with.

Guarantees: the prelude needs no header at all (NVRTC's built-in device functions only), so the
generated code compiles with nothing but libnvrtc: no cuda_fp16.h / cuda_bf16.h on the include
path (the `nvidia-cuda-nvrtc-cu12` wheel ships none). f16 and bf16 are stored as their 16-bit
patterns (`tnb_f16`, `tnb_bf16`); values compute in f32 and round to nearest even on store,
through the hardware conversions (`cvt.rn.f16.f32`, `cvt.rn.bf16.f32` and the packed x2 forms on
sm_80+; a bit-exact software rounding only below sm_80); widening bf16 -> f32 is a shift.
Its helpers implement the language's arithmetic rules exactly:

- integer + - * wrap (done in unsigned arithmetic, so no C undefined behaviour);
- integer / and % are C-like (truncating); division by 0 gives 0, MIN / -1 wraps;
- shifts by a negative or too-large amount give 0 (>> of a negative: -1);
- float -> int truncates toward zero and saturates, NaN -> 0;
- float min/max and the max/min reductions follow fminf/fmaxf (a NaN operand yields the other);
- f64 -> f16/bf16 rounds once (through f32 rounded to odd).

Three helpers trade the last ulps for speed, within spec 17's f32 bound: `tnb_exp` (exp on the
special-function unit, relative error <= |x| 2^-24 + 2^-22, results below 2^-126 flushed to 0),
`tnb_exp2` (2^x on that unit: relative error <= 2^-22, the same flush) and the reciprocal a
chunk shares (`tnb_rcp_ok` says when x * (1 / d) stands for x / d).
"""

PRELUDE = r"""
// ---- tilenb prelude: storage types and the language's arithmetic rules (no headers needed) ----
#ifndef TILENB_PRELUDE
#define TILENB_PRELUDE
typedef unsigned short tnb_f16;   // IEEE binary16, stored as its bit pattern
typedef unsigned short tnb_bf16;  // bfloat16, stored as its bit pattern

__device__ __forceinline__ float tnb_h2f(tnb_f16 h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ tnb_f16 tnb_f2h(float f) { tnb_f16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ float tnb_b2f(tnb_bf16 b) { return __uint_as_float(((unsigned)b) << 16); }
__device__ __forceinline__ tnb_bf16 tnb_f2b(float f) {  // round to nearest even; NaN stays NaN
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  tnb_bf16 b; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f)); return b;   // one instruction on sm_80+
#else
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (tnb_bf16)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (tnb_bf16)(u >> 16);
#endif
}
// f64 -> f32 rounded to odd: rounding that again to 16 bits equals one direct rounding
__device__ __forceinline__ float tnb_d2f_odd(double d) {
  float f = __double2float_rz(d);
  if (d == d && (double)f != d) f = __uint_as_float(__float_as_uint(f) | 1u);
  return f;
}
__device__ __forceinline__ tnb_f16 tnb_d2h(double d) { return tnb_f2h(tnb_d2f_odd(d)); }
__device__ __forceinline__ tnb_bf16 tnb_d2b(double d) { return tnb_f2b(tnb_d2f_odd(d)); }
// a value rounded to f16 / bf16, kept in f32
__device__ __forceinline__ float tnb_rh(float f) { return tnb_h2f(tnb_f2h(f)); }
__device__ __forceinline__ float tnb_rb(float f) { return tnb_b2f(tnb_f2b(f)); }
// element `hi` (0: the low half, 1: the high half) of a 32-bit word holding two 16-bit floats, widened
__device__ __forceinline__ float tnb_b2f_w(unsigned w, int hi) { return __uint_as_float(hi ? (w & 0xffff0000u) : (w << 16)); }
__device__ __forceinline__ float tnb_h2f_w(unsigned w, int hi) { return tnb_h2f((tnb_f16)(hi ? (w >> 16) : (w & 0xffffu))); }

// exp(x) in f32 on the special-function unit: 2^t with t = x * fl(log2(e)) (one rounding; the
// constant is 1.93e-8 below log2 e), then ex2.approx.ftz: t is off by at most |x| * 1.05e-7, so the
// relative error is <= |x| * 7.3e-8 + 2^-22 (<= 6.7e-6 wherever the result is a normal number,
// |x| <= 88.7: within spec 17's f32 bound of 1e-5); results below 2^-126 are 0; exp(-inf) = 0,
// exp(inf) = inf, exp(NaN) = NaN
__device__ __forceinline__ float tnb_exp(float x) {
  const float t = x * 1.44269502162933349609375f;
  float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(t)); return y;
}
// 2^x: relative error <= 2^-22 (PTX ISA, ex2.approx.f32) wherever the result is a normal number
// (within spec 17's f32 bound); results below 2^-126 are 0; 2^-inf = 0, 2^inf = inf, 2^NaN = NaN
__device__ __forceinline__ float tnb_exp2(float x) {
  float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y;
}
// x / d as x * (1 / d) (at most 1.5 ulp from the quotient) is used for a divisor shared by many x
// when 1 / d is a normal number, 0 or infinite: every d except 0 < |d| < 2^-126 and 2^126 < |d| < inf
__device__ __forceinline__ bool tnb_rcp_ok(float d) {
  const float a = fabsf(d);
  return !(a < 1.17549435e-38f && a != 0.0f) && !(a > 8.50705917e+37f && a != __int_as_float(0x7f800000));
}

// float -> int: truncate toward zero, saturate, NaN -> 0 (the hardware gives the minimum for a
// NaN converted to 64 bits, so NaN is tested explicitly everywhere)
__device__ __forceinline__ int tnb_f2i32(float f) { return f != f ? 0 : __float2int_rz(f); }
__device__ __forceinline__ int tnb_d2i32(double f) { return f != f ? 0 : __double2int_rz(f); }
__device__ __forceinline__ long long tnb_f2i64(float f) { return f != f ? 0 : __float2ll_rz(f); }
__device__ __forceinline__ long long tnb_d2i64(double f) { return f != f ? 0 : __double2ll_rz(f); }
__device__ __forceinline__ unsigned tnb_f2u32(float f) { return f != f ? 0u : __float2uint_rz(f); }
__device__ __forceinline__ unsigned tnb_d2u32(double f) { return f != f ? 0u : __double2uint_rz(f); }
__device__ __forceinline__ int tnb_f2i8(float f) { int v = tnb_f2i32(f); return v < -128 ? -128 : (v > 127 ? 127 : v); }
__device__ __forceinline__ int tnb_d2i8(double f) { int v = tnb_d2i32(f); return v < -128 ? -128 : (v > 127 ? 127 : v); }
__device__ __forceinline__ unsigned tnb_f2u8(float f) { unsigned v = tnb_f2u32(f); return v > 255u ? 255u : v; }
__device__ __forceinline__ unsigned tnb_d2u8(double f) { unsigned v = tnb_d2u32(f); return v > 255u ? 255u : v; }
__device__ __forceinline__ unsigned tnb_f2u16(float f) { unsigned v = tnb_f2u32(f); return v > 65535u ? 65535u : v; }
__device__ __forceinline__ unsigned tnb_d2u16(double f) { unsigned v = tnb_d2u32(f); return v > 65535u ? 65535u : v; }

// wrapping integer arithmetic
__device__ __forceinline__ int tnb_add(int a, int b) { return (int)((unsigned)a + (unsigned)b); }
__device__ __forceinline__ int tnb_sub(int a, int b) { return (int)((unsigned)a - (unsigned)b); }
__device__ __forceinline__ int tnb_mul(int a, int b) { return (int)((unsigned)a * (unsigned)b); }
__device__ __forceinline__ int tnb_neg(int a) { return (int)(0u - (unsigned)a); }
__device__ __forceinline__ long long tnb_add(long long a, long long b) { return (long long)((unsigned long long)a + (unsigned long long)b); }
__device__ __forceinline__ long long tnb_sub(long long a, long long b) { return (long long)((unsigned long long)a - (unsigned long long)b); }
__device__ __forceinline__ long long tnb_mul(long long a, long long b) { return (long long)((unsigned long long)a * (unsigned long long)b); }
__device__ __forceinline__ long long tnb_neg(long long a) { return (long long)(0ull - (unsigned long long)a); }
__device__ __forceinline__ int tnb_div(int a, int b) { return b == 0 ? 0 : (b == -1 ? tnb_neg(a) : a / b); }
__device__ __forceinline__ int tnb_mod(int a, int b) { return (b == 0 || b == -1) ? 0 : a % b; }
__device__ __forceinline__ long long tnb_div(long long a, long long b) { return b == 0 ? 0 : (b == -1 ? tnb_neg(a) : a / b); }
__device__ __forceinline__ long long tnb_mod(long long a, long long b) { return (b == 0 || b == -1) ? 0 : a % b; }
__device__ __forceinline__ int tnb_shl(int a, int b) { return (b < 0 || b >= 32) ? 0 : (int)((unsigned)a << b); }
__device__ __forceinline__ int tnb_shr(int a, int b) { return (b < 0 || b >= 32) ? (a < 0 ? -1 : 0) : (a >> b); }
__device__ __forceinline__ long long tnb_shl(long long a, long long b) { return (b < 0 || b >= 64) ? 0 : (long long)((unsigned long long)a << b); }
__device__ __forceinline__ long long tnb_shr(long long a, long long b) { return (b < 0 || b >= 64) ? (a < 0 ? -1 : 0) : (a >> b); }
__device__ __forceinline__ int tnb_abs(int a) { return a < 0 ? tnb_neg(a) : a; }
__device__ __forceinline__ long long tnb_abs(long long a) { return a < 0 ? tnb_neg(a) : a; }
__device__ __forceinline__ long long tnb_cdiv(long long a, long long b) {
  if (b == 0) return 0;
  long long q = tnb_div(a, b);
  return (a % b != 0 && ((a > 0) == (b > 0))) ? q + 1 : q;
}
__device__ __forceinline__ int tnb_cdiv(int a, int b) { return (int)tnb_cdiv((long long)a, (long long)b); }
__device__ __forceinline__ long long tnb_clamp(long long v, long long lo, long long hi) { return v < lo ? lo : (v > hi ? hi : v); }
// a swizzled shared tile: element offset o is stored at o ^ (((o >> s) & m) << b)
__device__ __forceinline__ int tnb_swz(int o, int s, int m, int b) { return o ^ (((o >> s) & m) << b); }
__device__ __forceinline__ long long tnb_swz(long long o, int s, int m, int b) { return o ^ (((o >> s) & (long long)m) << b); }

// min / max: for floats C's fminf/fmaxf (a NaN operand yields the other operand)
__device__ __forceinline__ float tnb_min(float a, float b) { return fminf(a, b); }
__device__ __forceinline__ float tnb_max(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double tnb_min(double a, double b) { return fmin(a, b); }
__device__ __forceinline__ double tnb_max(double a, double b) { return fmax(a, b); }
__device__ __forceinline__ int tnb_min(int a, int b) { return b < a ? b : a; }
__device__ __forceinline__ int tnb_max(int a, int b) { return b > a ? b : a; }
__device__ __forceinline__ long long tnb_min(long long a, long long b) { return b < a ? b : a; }
__device__ __forceinline__ long long tnb_max(long long a, long long b) { return b > a ? b : a; }
__device__ __forceinline__ unsigned tnb_min(unsigned a, unsigned b) { return b < a ? b : a; }
__device__ __forceinline__ unsigned tnb_max(unsigned a, unsigned b) { return b > a ? b : a; }

// atomics that CUDA has no instruction for: compare-and-swap loops
__device__ __forceinline__ void tnb_atomic_max(float* p, float v) {
  unsigned* u = (unsigned*)p;
  unsigned old = *u, assumed;
  do { assumed = old; float n = tnb_max(__uint_as_float(assumed), v);
       if (__float_as_uint(n) == assumed) return;
       old = atomicCAS(u, assumed, __float_as_uint(n)); } while (old != assumed);
}
__device__ __forceinline__ void tnb_atomic_max(double* p, double v) {
  unsigned long long* u = (unsigned long long*)p;
  unsigned long long old = *u, assumed;
  do { assumed = old; double n = tnb_max(__longlong_as_double((long long)assumed), v);
       if ((unsigned long long)__double_as_longlong(n) == assumed) return;
       old = atomicCAS(u, assumed, (unsigned long long)__double_as_longlong(n)); } while (old != assumed);
}
__device__ __forceinline__ void tnb_atomic_max(int* p, int v) { atomicMax(p, v); }
__device__ __forceinline__ void tnb_atomic_max(unsigned* p, unsigned v) { atomicMax(p, v); }
__device__ __forceinline__ void tnb_atomic_max(long long* p, long long v) { atomicMax(p, v); }
__device__ __forceinline__ void tnb_atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void tnb_atomic_add(double* p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void tnb_atomic_add(int* p, int v) { atomicAdd(p, v); }
__device__ __forceinline__ void tnb_atomic_add(unsigned* p, unsigned v) { atomicAdd(p, v); }
__device__ __forceinline__ void tnb_atomic_add(long long* p, long long v) { atomicAdd((unsigned long long*)p, (unsigned long long)v); }
// 16-bit floats: CAS on the aligned 32-bit word that holds the element; add in f32, round once
__device__ __forceinline__ void tnb_atomic_add16(unsigned short* p, float v, bool bf) {
  unsigned* w = (unsigned*)((unsigned long long)p & ~3ull);
  unsigned shift = ((unsigned long long)p & 2ull) ? 16u : 0u;
  unsigned old = *w, assumed;
  do { assumed = old;
       unsigned short h = (unsigned short)(assumed >> shift);
       float s = (bf ? tnb_b2f(h) : tnb_h2f(h)) + v;
       unsigned short n = bf ? tnb_f2b(s) : tnb_f2h(s);
       unsigned nw = (assumed & ~(0xffffu << shift)) | ((unsigned)n << shift);
       old = atomicCAS(w, assumed, nw); } while (old != assumed);
}

// tensor cores: D = A * B + D, m16n8k16, f32 accumulators (sm_80+)
// two values rounded and packed in one instruction (cvt.rn.{f16,bf16}x2.f32 puts its first operand in the high half)
__device__ __forceinline__ unsigned tnb_pack_h2(float lo, float hi) { unsigned r; asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r; }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
__device__ __forceinline__ unsigned tnb_pack_b2(float lo, float hi) { unsigned r; asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r; }
#else
__device__ __forceinline__ unsigned tnb_pack_b2(float lo, float hi) { return (unsigned)tnb_f2b(lo) | ((unsigned)tnb_f2b(hi) << 16); }
#endif
__device__ __forceinline__ void tnb_mma_f16(float* c, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void tnb_mma_bf16(float* c, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// ---- tensor cores, mma.sync path (tilenb/codegen/mma.py): operand loads, cp.async, 16-bit pairs ----
__device__ __forceinline__ unsigned tnb_saddr(const void* p) {  // a shared-memory address as ldmatrix/cp.async take it
  unsigned r; asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p)); return r;
}
// four (two) 8x8 b16 matrices; lanes 8q .. 8q + 7 give the row addresses of matrix q; _t: transposed
__device__ __forceinline__ void tnb_ldsm_x4(unsigned a, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(a));
}
__device__ __forceinline__ void tnb_ldsm_x2(unsigned a, unsigned& r0, unsigned& r1) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r0), "=r"(r1) : "r"(a));
}
__device__ __forceinline__ void tnb_ldsm_x4_t(unsigned a, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(a));
}
__device__ __forceinline__ void tnb_ldsm_x2_t(unsigned a, unsigned& r0, unsigned& r1) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];" : "=r"(r0), "=r"(r1) : "r"(a));
}
// 16 bytes global -> shared, asynchronous on sm_80+ (complete after tnb_cp_wait<n> and a barrier)
__device__ __forceinline__ void tnb_cp16(void* dst, const void* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(tnb_saddr(dst)), "l"(src) : "memory");
#else
  *(uint4*)dst = *(const uint4*)src;
#endif
}
__device__ __forceinline__ void tnb_cp16u(unsigned dst, const void* src) {  // the same, to a 32-bit shared address
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(dst), "l"(src) : "memory");
#else
  uint4 v = *(const uint4*)src; asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};" :: "r"(dst), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
#endif
}
__device__ __forceinline__ void tnb_st16u(unsigned dst, uint4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};" :: "r"(dst), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
__device__ __forceinline__ void tnb_st2u(unsigned dst, unsigned short v) {
  asm volatile("st.shared.u16 [%0], %1;" :: "r"(dst), "h"(v) : "memory");
}
__device__ __forceinline__ void tnb_cp_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
template <int N> __device__ __forceinline__ void tnb_cp_wait() {  // all but the N most recent groups are complete
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory");
#endif
}
// the halves of a fragment register for k and k + 1 kept where lo <= k < hi, zeroed elsewhere
__device__ __forceinline__ unsigned tnb_kmask(int k, int lo, int hi) {
  return (k >= lo && k < hi ? 0x0000ffffu : 0u) | (k + 1 >= lo && k + 1 < hi ? 0xffff0000u : 0u);
}
// a register holding two 16-bit values (low half: the even slot)
__device__ __forceinline__ float tnb_lo_b2f(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float tnb_hi_b2f(unsigned w) { return __uint_as_float(w & 0xffff0000u); }
__device__ __forceinline__ float tnb_lo_h2f(unsigned w) { return tnb_h2f((tnb_f16)(w & 0xffffu)); }
__device__ __forceinline__ float tnb_hi_h2f(unsigned w) { return tnb_h2f((tnb_f16)(w >> 16)); }
#endif  // TILENB_PRELUDE
"""


# Thread block clusters (sm_90): emitted only into kernels with @cluster(n > 1). The cluster
# barrier orders shared-memory writes before it with reads after it in every CTA of the cluster
# (release / acquire at cluster scope, PTX ISA "barrier.cluster"); `tnb_cluster_ld_*` read a
# word of another CTA's shared memory (distributed shared memory, `mapa` + `ld.shared::cluster`).
CLUSTER_HELPERS = r"""
// ---- thread block clusters (sm_90): cluster barrier and distributed shared memory ----
#ifndef TILENB_CLUSTER_HELPERS
#define TILENB_CLUSTER_HELPERS
__device__ __forceinline__ void tnb_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ void tnb_cluster_arrive() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
__device__ __forceinline__ void tnb_cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }
__device__ __forceinline__ unsigned tnb_smem_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ unsigned tnb_cluster_addr(unsigned a, unsigned rank) {
  unsigned r; asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank)); return r;
}
__device__ __forceinline__ float tnb_cluster_ld(unsigned a, float) {
  float v; asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(a) : "memory"); return v;
}
__device__ __forceinline__ double tnb_cluster_ld(unsigned a, double) {
  double v; asm volatile("ld.shared::cluster.f64 %0, [%1];" : "=d"(v) : "r"(a) : "memory"); return v;
}
#endif
"""


# Emitted only into kernels with a shared tile in wgmma's 128-byte swizzled K-major layout of
# 64-column panels (`tilenb.analysis.layout.PanelSwizzle`): the stored offset of a row-major one.
PANEL_HELPERS = r"""
#ifndef TILENB_PANEL_HELPERS
#define TILENB_PANEL_HELPERS
__device__ __forceinline__ int tnb_pswz(int o, int lc, int rows) {
  const int r = o >> lc, c = o & ((1 << lc) - 1); return (((c >> 6) * rows + r) << 6) + ((c & 63) ^ ((r & 7) << 3)); }
__device__ __forceinline__ long long tnb_pswz(long long o, int lc, int rows) {
  const long long r = o >> lc, c = o & ((1LL << lc) - 1); return (((c >> 6) * rows + r) << 6) + ((c & 63) ^ ((r & 7) << 3)); }
#endif
"""


# Emitted only into kernels with a copy of a tensor window into a shared tile that is larger than
# one batch of registers (`generic.vectors.vector_sweep`): each thread starts every chunk of the copy as
# an asynchronous copy (sm_80+, `cp.async`; L1 is bypassed for 16 bytes), then waits for its own.
ASYNC_COPY_HELPERS = r"""
#ifndef TILENB_ASYNC_COPY_HELPERS
#define TILENB_ASYNC_COPY_HELPERS
template <int B> __device__ __forceinline__ void tnb_cpa(void* dst, const void* src) {  // B = 4, 8 or 16 bytes
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  if (B == 16) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(d), "l"(src) : "memory");
  else asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" :: "r"(d), "l"(src), "n"(B) : "memory");
#else
  if (B == 16) *(uint4*)dst = *(const uint4*)src;
  else if (B == 8) *(uint2*)dst = *(const uint2*)src;
  else *(unsigned*)dst = *(const unsigned*)src;
#endif
}
__device__ __forceinline__ void tnb_cpa_wait_all() {  // this thread's asynchronous copies have landed
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}
#endif
"""


# Emitted only into kernels with a vector store that is guarded (a chunk that may cross the valid
# region or the tensor's edge, stored element by element there): one st.global / st.shared of 4,
# 8 or 16 bytes in inline PTX. Written in C++, the guarded vector store and its element-by-element
# fallback are merged by the compiler into per-element predicated stores (four 4-byte stores for
# 16 bytes); an asm statement cannot be split, so the access is the one instruction the analysis
# counts (`tilenb.analysis.ownership`, Access.vector). "memory": later loads and stores are not
# moved across it.
VECTOR_HELPERS = r"""
#ifndef TILENB_VECTOR_HELPERS
#define TILENB_VECTOR_HELPERS
__device__ __forceinline__ void tnb_stg(uint4* p, uint4 v) {
  asm volatile("st.global.v4.b32 [%0], {%1,%2,%3,%4};" :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory"); }
__device__ __forceinline__ void tnb_stg(uint2* p, uint2 v) {
  asm volatile("st.global.v2.b32 [%0], {%1,%2};" :: "l"(p), "r"(v.x), "r"(v.y) : "memory"); }
__device__ __forceinline__ void tnb_stg(unsigned* p, unsigned v) {
  asm volatile("st.global.b32 [%0], %1;" :: "l"(p), "r"(v) : "memory"); }
__device__ __forceinline__ void tnb_sts(uint4* p, uint4 v) {
  asm volatile("st.shared.v4.b32 [%0], {%1,%2,%3,%4};" :: "r"((unsigned)__cvta_generic_to_shared(p)),
               "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory"); }
__device__ __forceinline__ void tnb_sts(uint2* p, uint2 v) {
  asm volatile("st.shared.v2.b32 [%0], {%1,%2};" :: "r"((unsigned)__cvta_generic_to_shared(p)), "r"(v.x), "r"(v.y)
               : "memory"); }
__device__ __forceinline__ void tnb_sts(unsigned* p, unsigned v) {
  asm volatile("st.shared.b32 [%0], %1;" :: "r"((unsigned)__cvta_generic_to_shared(p)), "r"(v) : "memory"); }
#endif
"""
