"""Run the generated CUDA of a kernel on the CPU: a C++ build of the kernel with every CUDA thread
an OS thread, for checking code paths without a GPU (the tensor-core path of tilenb/codegen/mma/).

What is emulated, and how (the PTX ISA's definitions, "Warp-level matrix instructions"):
- a CTA's threads run concurrently (std::thread); `__syncthreads()` is a barrier of the CTA;
  `__shfl_xor_sync`, `ldmatrix` (x2/x4, .trans) and `mma.sync.m16n8k16` (f16/bf16 -> f32) are
  collective within each warp of 32 threads (a warp barrier, then each lane reads the others);
- shared memory is one buffer per CTA, filled with 0xFF bytes (NaN in every float type) before
  each CTA, so a read of bytes nothing wrote shows; CTAs run one after another;
- `cp.async` copies are deferred: they land when a `cp.async.wait_group` lets their group
  complete (the latest a GPU may deliver them), so a missing wait or barrier shows as wrong data;
- atomics (`tnb_atomic_add`, `tnb_atomic_max` of 32- and 64-bit types) are compare-and-swap
  loops on std::atomic_ref;
- f16 uses the compiler's _Float16, bf16 rounds to nearest even in software; mma sums its
  products in f32 in k order (hardware order differs: compare with tolerances);
- atomics (`atomicAdd`, `atomicMax`, `atomicCAS`) are std::atomic_ref operations, so the prelude's
  compare-and-swap helpers run as written; the prelude's other helpers that need no PTX
  (conversions, shifts, wrapping arithmetic) are taken from tilenb/codegen/prelude.py itself
  (`prelude_helpers`), so the two cannot drift apart.

Use: `run(kernel_source, args, dims, grid)` with a `tilenb.codegen.KernelSource`, the launch's
arguments (numpy arrays, updated in place; Python numbers for scalars), the runtime dimensions in
the kernel's order, and the grid. Needs g++ with C++20. Errors: RuntimeError with the compiler's
or the program's output. `run_source(src, name, args, dims)` does the same from tile source (the
kernel compiled and its CUDA generated here, one CTA by default); `needs_gxx` marks tests that
need the emulator.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

EMU_PRELUDE = r"""
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(x) alignas(x)
#define __restrict__
struct tnb_dim3 { unsigned x = 0, y = 0, z = 0; };
thread_local tnb_dim3 threadIdx, blockIdx;
tnb_dim3 gridDim, blockDim;
struct uint4 { unsigned x, y, z, w; };
struct uint2 { unsigned x, y; };
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return uint4{a, b, c, d}; }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline float __int_as_float(int u) { float f; std::memcpy(&f, &u, 4); return f; }
inline int __float_as_int(float f) { int u; std::memcpy(&u, &f, 4); return u; }
inline double __longlong_as_double(long long u) { double f; std::memcpy(&f, &u, 8); return f; }
inline long long __double_as_longlong(double f) { long long u; std::memcpy(&u, &f, 8); return u; }
inline int max(int a, int b) { return a > b ? a : b; }
inline int min(int a, int b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
// atomics of the prelude (tilenb/codegen/prelude.py), indivisible across the emulated threads
template <class T> inline void tnb_atomic_add(T* p, T v) {
  std::atomic_ref<T> a(*p); T old = a.load();
  while (!a.compare_exchange_weak(old, (T)(old + v))) {}
}
template <class T> inline void tnb_atomic_max(T* p, T v) {   // a NaN operand yields the other
  std::atomic_ref<T> a(*p); T old = a.load();
  for (;;) {
    T n = (old != old) ? v : (v != v) ? old : (v > old ? v : old);
    if (n == old || (n != n && old != old)) return;
    if (a.compare_exchange_weak(old, n)) return;
  }
}

typedef unsigned short tnb_f16;
typedef unsigned short tnb_bf16;
inline float tnb_h2f(tnb_f16 h) { _Float16 v; std::memcpy(&v, &h, 2); return (float)v; }
inline tnb_f16 tnb_f2h(float f) { _Float16 v = (_Float16)f; tnb_f16 h; std::memcpy(&h, &v, 2); return h; }
inline float tnb_b2f(tnb_bf16 b) { return __uint_as_float(((unsigned)b) << 16); }
inline tnb_bf16 tnb_f2b(float f) {
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (tnb_bf16)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (tnb_bf16)(u >> 16);
}
inline float tnb_rh(float f) { return tnb_h2f(tnb_f2h(f)); }
inline float tnb_rb(float f) { return tnb_b2f(tnb_f2b(f)); }
inline int tnb_add(int a, int b) { return (int)((unsigned)a + (unsigned)b); }
inline int tnb_sub(int a, int b) { return (int)((unsigned)a - (unsigned)b); }
inline int tnb_mul(int a, int b) { return (int)((unsigned)a * (unsigned)b); }
inline long long tnb_add(long long a, long long b) { return (long long)((unsigned long long)a + (unsigned long long)b); }
inline long long tnb_sub(long long a, long long b) { return (long long)((unsigned long long)a - (unsigned long long)b); }
inline long long tnb_mul(long long a, long long b) { return (long long)((unsigned long long)a * (unsigned long long)b); }
inline long long tnb_clamp(long long v, long long lo, long long hi) { return v < lo ? lo : (v > hi ? hi : v); }
inline int tnb_neg(int a) { return (int)(0u - (unsigned)a); }
inline long long tnb_neg(long long a) { return (long long)(0ull - (unsigned long long)a); }
inline int tnb_div(int a, int b) { return b == 0 ? 0 : (b == -1 ? tnb_neg(a) : a / b); }
inline long long tnb_div(long long a, long long b) { return b == 0 ? 0 : (b == -1 ? tnb_neg(a) : a / b); }
inline int tnb_mod(int a, int b) { return (b == 0 || b == -1) ? 0 : a % b; }
inline long long tnb_mod(long long a, long long b) { return (b == 0 || b == -1) ? 0 : a % b; }
inline long long tnb_cdiv(long long a, long long b) {  // as the prelude: exact for operands of any sign
  if (b == 0) return 0;
  long long q = tnb_div(a, b);
  return (a % b != 0 && ((a > 0) == (b > 0))) ? q + 1 : q;
}
inline float tnb_min(float a, float b) { return std::fmin(a, b); }
inline float tnb_max(float a, float b) { return std::fmax(a, b); }
inline int tnb_min(int a, int b) { return b < a ? b : a; }
inline int tnb_max(int a, int b) { return b > a ? b : a; }
inline long long tnb_min(long long a, long long b) { return b < a ? b : a; }
inline long long tnb_max(long long a, long long b) { return b > a ? b : a; }
inline unsigned tnb_pack_h2(float lo, float hi) { return (unsigned)tnb_f2h(lo) | ((unsigned)tnb_f2h(hi) << 16); }
inline unsigned tnb_pack_b2(float lo, float hi) { return (unsigned)tnb_f2b(lo) | ((unsigned)tnb_f2b(hi) << 16); }
inline int tnb_swz(int o, int s, int m, int b) { return o ^ (((o >> s) & m) << b); }
inline long long tnb_swz(long long o, int s, int m, int b) { return o ^ (((o >> s) & (long long)m) << b); }
inline unsigned tnb_kmask(int k, int lo, int hi) {
  return (k >= lo && k < hi ? 0x0000ffffu : 0u) | (k + 1 >= lo && k + 1 < hi ? 0xffff0000u : 0u);
}
inline float tnb_exp(float x) { return std::exp(x); }
inline float tnb_exp2(float x) { return std::exp2(x); }
inline bool tnb_rcp_ok(float d) { float a = std::fabs(d); return !(a < 1.17549435e-38f && a != 0.0f) && !(a > 8.50705917e+37f && !std::isinf(a)); }
inline float tnb_b2f_w(unsigned w, int hi) { return __uint_as_float(hi ? (w & 0xffff0000u) : (w << 16)); }
inline float tnb_h2f_w(unsigned w, int hi) { return tnb_h2f((tnb_f16)(hi ? (w >> 16) : (w & 0xffffu))); }
inline float tnb_lo_b2f(unsigned w) { return __uint_as_float(w << 16); }
inline float tnb_hi_b2f(unsigned w) { return __uint_as_float(w & 0xffff0000u); }
inline float tnb_lo_h2f(unsigned w) { return tnb_h2f((tnb_f16)(w & 0xffffu)); }
inline float tnb_hi_h2f(unsigned w) { return tnb_h2f((tnb_f16)(w >> 16)); }

// ---- the CTA ----
static unsigned char* g_smem = nullptr;
static const size_t SMEM = 256 * 1024;
static std::barrier<>* g_cta = nullptr;
struct Warp { std::barrier<> bar{32}; unsigned u[32][8]; float f[32][8]; double d[32]; long long l[32]; };
static Warp* g_warps = nullptr;
thread_local int t_tid = 0;
inline void __syncthreads() { g_cta->arrive_and_wait(); }
inline Warp& my_warp() { return g_warps[t_tid >> 5]; }
inline int my_lane() { return t_tid & 31; }
inline float __shfl_xor_sync(unsigned, float v, int m) {
  Warp& w = my_warp(); int l = my_lane(); w.f[l][0] = v; w.bar.arrive_and_wait(); float r = w.f[l ^ m][0]; w.bar.arrive_and_wait(); return r;
}
inline int __shfl_xor_sync(unsigned, int v, int m) {
  Warp& w = my_warp(); int l = my_lane(); w.u[l][0] = (unsigned)v; w.bar.arrive_and_wait(); int r = (int)w.u[l ^ m][0]; w.bar.arrive_and_wait(); return r;
}
inline unsigned __shfl_xor_sync(unsigned, unsigned v, int m) {
  Warp& w = my_warp(); int l = my_lane(); w.u[l][0] = v; w.bar.arrive_and_wait(); unsigned r = w.u[l ^ m][0]; w.bar.arrive_and_wait(); return r;
}
inline double __shfl_xor_sync(unsigned, double v, int m) {
  Warp& w = my_warp(); int l = my_lane(); w.d[l] = v; w.bar.arrive_and_wait(); double r = w.d[l ^ m]; w.bar.arrive_and_wait(); return r;
}
inline long long __shfl_xor_sync(unsigned, long long v, int m) {
  Warp& w = my_warp(); int l = my_lane(); w.l[l] = v; w.bar.arrive_and_wait(); long long r = w.l[l ^ m]; w.bar.arrive_and_wait(); return r;
}
inline unsigned tnb_saddr(const void* p) {
  long long o = (const unsigned char*)p - g_smem;
  if (o < 0 || o >= (long long)SMEM) { std::fprintf(stderr, "tnb_saddr: not a shared address\n"); std::abort(); }
  return (unsigned)o;
}
inline unsigned short ld16(unsigned a) {
  if (a + 2 > SMEM || (a & 1)) { std::fprintf(stderr, "ldmatrix: bad address %u\n", a); std::abort(); }
  unsigned short v; std::memcpy(&v, g_smem + a, 2); return v;
}
inline void ldsm(unsigned a, unsigned* r, int nmat, bool trans) {
  Warp& w = my_warp(); int l = my_lane();
  if (a & 15) { std::fprintf(stderr, "ldmatrix: row address %u not 16-byte aligned\n", a); std::abort(); }
  w.u[l][0] = a; w.bar.arrive_and_wait();
  for (int q = 0; q < nmat; ++q) {
    unsigned lo, hi;
    if (!trans) {
      unsigned row = w.u[8 * q + l / 4][0];
      lo = ld16(row + 4 * (l % 4)); hi = ld16(row + 4 * (l % 4) + 2);
    } else {
      lo = ld16(w.u[8 * q + 2 * (l % 4)][0] + 2 * (l / 4));
      hi = ld16(w.u[8 * q + 2 * (l % 4) + 1][0] + 2 * (l / 4));
    }
    r[q] = lo | (hi << 16);
  }
  w.bar.arrive_and_wait();
}
inline void tnb_ldsm_x4(unsigned a, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) { unsigned r[4]; ldsm(a, r, 4, false); r0 = r[0]; r1 = r[1]; r2 = r[2]; r3 = r[3]; }
inline void tnb_ldsm_x2(unsigned a, unsigned& r0, unsigned& r1) { unsigned r[4]; ldsm(a, r, 2, false); r0 = r[0]; r1 = r[1]; }
inline void tnb_ldsm_x4_t(unsigned a, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) { unsigned r[4]; ldsm(a, r, 4, true); r0 = r[0]; r1 = r[1]; r2 = r[2]; r3 = r[3]; }
inline void tnb_ldsm_x2_t(unsigned a, unsigned& r0, unsigned& r1) { unsigned r[4]; ldsm(a, r, 2, true); r0 = r[0]; r1 = r[1]; }
inline float half16(unsigned w, int hi, bool bf) { unsigned short h = (unsigned short)(hi ? (w >> 16) : (w & 0xffffu)); return bf ? tnb_b2f(h) : tnb_h2f(h); }
inline void mma16816(float* c, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1, bool bf) {
  Warp& w = my_warp(); int l = my_lane();
  w.u[l][0] = a0; w.u[l][1] = a1; w.u[l][2] = a2; w.u[l][3] = a3; w.u[l][4] = b0; w.u[l][5] = b1;
  w.bar.arrive_and_wait();
  float d[4];
  for (int e = 0; e < 4; ++e) {
    int row = l / 4 + (e >> 1) * 8, col = 2 * (l % 4) + (e & 1);
    float acc = c[e];
    for (int k = 0; k < 16; ++k) {
      int al = (row % 8) * 4 + (k % 8) / 2, areg = (row / 8) + 2 * (k / 8);
      int bl = col * 4 + (k % 8) / 2, breg = 4 + k / 8;
      acc += half16(w.u[al][areg], k % 2, bf) * half16(w.u[bl][breg], k % 2, bf);
    }
    d[e] = acc;
  }
  w.bar.arrive_and_wait();
  for (int e = 0; e < 4; ++e) c[e] = d[e];
}
inline void tnb_mma_f16(float* c, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) { mma16816(c, a0, a1, a2, a3, b0, b1, false); }
inline void tnb_mma_bf16(float* c, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) { mma16816(c, a0, a1, a2, a3, b0, b1, true); }
// cp.async: copies wait in their group until a wait_group lets the group complete
struct CpCopy { unsigned char* dst; const unsigned char* src; };
thread_local std::vector<std::vector<CpCopy>> t_groups;
thread_local std::vector<CpCopy> t_open;
inline void tnb_cp16(void* dst, const void* src) {
  tnb_saddr(dst);
  if (((unsigned long long)src) & 15) { std::fprintf(stderr, "cp.async: source not 16-byte aligned\n"); std::abort(); }
  t_open.push_back(CpCopy{(unsigned char*)dst, (const unsigned char*)src});
}
inline void tnb_cp16u(unsigned dst, const void* src) { tnb_cp16(g_smem + dst, src); }
inline void tnb_st16u(unsigned dst, uint4 v) { tnb_saddr(g_smem + dst); std::memcpy(g_smem + dst, &v, 16); }
inline void tnb_st2u(unsigned dst, unsigned short v) { tnb_saddr(g_smem + dst); std::memcpy(g_smem + dst, &v, 2); }
// the vector stores of the generated code's VECTOR_HELPERS (inline PTX there): one aligned store
#define TILENB_VECTOR_HELPERS
template <class V> inline void tnb_vec_check(const V* p, const char* what) {
  if (((unsigned long long)p) % sizeof(V)) { std::fprintf(stderr, "%s of %d bytes: misaligned address\n", what, (int)sizeof(V)); std::abort(); }
}
template <class V> inline void tnb_stg(V* p, V v) { tnb_vec_check(p, "st.global"); std::memcpy((void*)p, &v, sizeof(V)); }
template <class V> inline void tnb_sts(V* p, V v) { tnb_saddr(p); tnb_vec_check(p, "st.shared"); std::memcpy((void*)p, &v, sizeof(V)); }
inline void tnb_cp_commit() { t_groups.push_back(t_open); t_open.clear(); }
template <int N> inline void tnb_cp_wait() {
  while ((int)t_groups.size() > N) {
    for (auto& c : t_groups.front()) std::memcpy(c.dst, c.src, 16);
    t_groups.erase(t_groups.begin());
  }
}
"""

# CUDA's device intrinsics and atomics on the host, for the prelude's helpers (prelude_helpers)
EMU_INTRINSICS = r"""
template <class I> inline I tnb_emu_trunc(double f, double lo, double hi) {
  if (f != f) return (I)0;
  double t = std::trunc(f);
  return t <= lo ? (I)lo : (t >= hi ? (I)hi : (I)t);
}
inline int __float2int_rz(float f) { return tnb_emu_trunc<int>(f, -2147483648.0, 2147483647.0); }
inline int __double2int_rz(double f) { return tnb_emu_trunc<int>(f, -2147483648.0, 2147483647.0); }
inline unsigned __float2uint_rz(float f) { return tnb_emu_trunc<unsigned>(f, 0.0, 4294967295.0); }
inline unsigned __double2uint_rz(double f) { return tnb_emu_trunc<unsigned>(f, 0.0, 4294967295.0); }
inline long long tnb_emu_ll(double f) {
  if (f != f) return (long long)0x8000000000000000ull;
  double t = std::trunc(f);
  if (t >= 9223372036854775807.0) return 9223372036854775807LL;
  if (t <= -9223372036854775808.0) return (long long)0x8000000000000000ull;
  return (long long)t;
}
inline long long __float2ll_rz(float f) { return tnb_emu_ll(f); }
inline long long __double2ll_rz(double f) { return tnb_emu_ll(f); }
inline float __double2float_rz(double d) {
  float f = (float)d;
  if (d == d && std::isfinite(f) && std::fabs((double)f) > std::fabs(d)) f = std::nextafter(f, 0.0f);
  if (std::isinf(f) && std::isfinite(d)) f = std::copysign(3.40282347e+38f, (float)d);
  return f;
}
template <class T> inline T atomicAdd(T* p, T v) { return std::atomic_ref<T>(*p).fetch_add(v); }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  return std::atomic_ref<unsigned long long>(*p).fetch_add(v);
}
template <class T> inline T atomicCAS(T* p, T expect, T v) {
  std::atomic_ref<T>(*p).compare_exchange_strong(expect, v); return expect;
}
template <class T> inline T atomicMax(T* p, T v) {
  std::atomic_ref<T> a(*p); T old = a.load();
  while (old < v && !a.compare_exchange_weak(old, v)) {}
  return old;
}
"""


def prelude_helpers() -> str:
    """The helpers of tilenb's CUDA prelude that need no PTX (no `asm`, no `#if` inside) and that
    EMU_PRELUDE does not define itself (by signature), as host C++: the prelude's own text."""
    import re

    from tilenb.codegen.prelude import PRELUDE
    have = {_signature(m) for m in re.findall(r"^(?:inline |template[^\n]*?inline )[^{;]*\)", EMU_PRELUDE, re.M)}
    out = []
    for item in _prelude_items(PRELUDE):
        head = item.split("{", 1)[0]
        if "asm" in item or "#" in item or _signature(head) in have:
            continue
        out.append(item.replace("__device__ __forceinline__", "inline"))
    return "\n".join(out) + "\n"


def _signature(head: str) -> str:
    """'name(type, type)' of a C++ function declaration head (parameter names dropped)."""
    import re
    head = head.replace("__device__ __forceinline__", "inline")
    m = re.search(r"(\w+)\s*\(([^)]*)\)\s*$", head.strip())
    name, params = m.group(1), m.group(2)
    types = []
    for p in params.split(","):
        p = p.strip()
        if not p:
            continue
        words = re.sub(r"[&*]", lambda x: " " + x.group(0) + " ", p).split()
        if len(words) > 1 and re.fullmatch(r"\w+", words[-1]) and words[-1] not in ("int", "float", "double", "long", "unsigned", "short", "char", "bool"):
            words = words[:-1]
        types.append(" ".join(words))
    return f"{name}({', '.join(types)})"


def _prelude_items(text: str):
    """The top-level function definitions of the prelude's text, each whole (braces matched)."""
    i, n = 0, len(text)
    while True:
        j = text.find("__device__ __forceinline__", i)
        if j < 0:
            return
        start = text.rfind("\n", 0, j) + 1
        if text[start:j].strip() and not text[start:j].strip().startswith("template"):
            i = j + 1
            continue
        k = text.find("{", j)
        semi = text.find(";", j)
        if k < 0 or (0 <= semi < k):
            i = j + 1
            continue
        depth, m = 0, k
        while m < n:
            if text[m] == "{":
                depth += 1
            elif text[m] == "}":
                depth -= 1
                if depth == 0:
                    break
            m += 1
        yield text[start:m + 1]
        i = m + 1


def main_template(hooks: dict) -> str:
    """MAIN with its hook points (@ARGS@, @MAPS@, @CTA_START@, @THREAD_START@, @THREAD_END@)
    filled from `hooks` (C++ text; an absent hook is left empty), for emulators built on this one."""
    text = MAIN
    for name in ("ARGS", "MAPS", "CTA_START", "THREAD_START", "THREAD_END"):
        text = text.replace(f"@{name}@", hooks.get(name, ""))
    return text


MAIN = r"""
static std::vector<unsigned char> load(const char* path, size_t n) {
  std::vector<unsigned char> b(n ? n : 1);
  FILE* f = std::fopen(path, "rb");
  if (!f || std::fread(b.data(), 1, n, f) != n) { std::fprintf(stderr, "cannot read %s\n", path); std::exit(2); }
  std::fclose(f); return b;
}
static void save(const char* path, const std::vector<unsigned char>& b, size_t n) {
  FILE* f = std::fopen(path, "wb"); std::fwrite(b.data(), 1, n, f); std::fclose(f);
}
int main(int argc, char** argv) {
  const char* dir = argv[1];
@ARGS@
  char path[4096];
@LOADS@
@MAPS@
  g_smem = (unsigned char*)aligned_alloc(1024, SMEM);
  const int T = @T@;
  gridDim.x = @GX@; gridDim.y = @GY@; gridDim.z = @GZ@; blockDim.x = T; blockDim.y = 1; blockDim.z = 1;
  for (unsigned bz = 0; bz < gridDim.z; ++bz) for (unsigned by = 0; by < gridDim.y; ++by) for (unsigned bx = 0; bx < gridDim.x; ++bx) {
    std::memset(g_smem, 0xff, SMEM);
@CTA_START@
    std::barrier<> cta(T);
    g_cta = &cta;
    std::vector<Warp> warps(T / 32);
    g_warps = warps.data();
    std::vector<std::thread> th;
    for (int t = 0; t < T; ++t) th.emplace_back([&, t, bx, by, bz] {
      t_tid = t; threadIdx.x = t; blockIdx.x = bx; blockIdx.y = by; blockIdx.z = bz;
      t_groups.clear(); t_open.clear();@THREAD_START@
      @CALL@;
@THREAD_END@
    });
    for (auto& x : th) x.join();
  }
@SAVES@
  return 0;
}
"""

_C_SCALAR = {"f32": ("float", np.float32), "f64": ("double", np.float64), "i32": ("int", np.int32),
             "i64": ("long long", np.int64), "u32": ("unsigned", np.uint32), "i8": ("int", np.int32)}


def available() -> bool:
    return shutil.which("g++") is not None


# the marker of tests that emulate the generated CUDA: they skip where g++ is missing
needs_gxx = pytest.mark.skipif(not available(), reason="g++ (C++20) is needed to emulate CUDA on the CPU")


def run_source(src, name, args, dims, workdir=None, grid=(1, 1, 1)):
    """Compile tile source `src` (dedented), generate the CUDA of its kernel `name` and run it
    here with `run` (default: one CTA); tensors in `args` are updated in place."""
    import textwrap

    import tilenb
    from tilenb.codegen import generate
    text = textwrap.dedent(src).lstrip("\n")
    mod = tilenb.compile(text, backend="cpu", filename="k.tile")
    run(generate(getattr(mod, name).ir(), text), args, dims, grid, workdir=workdir)


def emulated_source(ks) -> str:
    """The kernel's CUDA with the emulation prelude in place of the real one."""
    src = ks.source
    head, sep, body = src.partition("#endif  // TILENB_PRELUDE")
    if not sep:
        raise RuntimeError("no prelude marker in the generated source")
    body = body.replace("extern __shared__ __align__(16) unsigned char tnb_smem[];", "unsigned char* const tnb_smem = g_smem;")
    import re
    body = re.sub(r"__shared__ __align__\(16\) unsigned char tnb_smem\[\d+\];", "unsigned char* const tnb_smem = g_smem;", body)
    body = body.replace("__shared__ ", "static ")
    return EMU_PRELUDE + EMU_INTRINSICS + prelude_helpers() + body


def run(ks, args, dims, grid, workdir=None, timeout=600):
    """Run the generated kernel on the CPU; tensors in `args` are updated in place."""
    if not available():
        raise RuntimeError("g++ is not available")
    grid = tuple(grid) + (1,) * (3 - len(tuple(grid)))
    tensors, call = [], []
    ai = 0
    for kind, name, dt in ks.params:
        if kind == "tensor":
            a = args[ai]
            ai += 1
            k = len(tensors)
            tensors.append(a)
            ctype = {"f16": "tnb_f16", "bf16": "tnb_bf16", "f32": "float", "f64": "double", "i8": "signed char",
                     "i32": "int", "i64": "long long", "u8": "unsigned char", "u16": "unsigned short",
                     "u32": "unsigned int"}[dt]
            call.append(f"({ctype}*)t{k}.data()")
        elif kind == "scalar":
            v = args[ai]
            ai += 1
            if dt in ("f16", "bf16"):
                import ml_dtypes
                bits = np.array([v], dtype=np.float16 if dt == "f16" else ml_dtypes.bfloat16).view(np.uint16)[0]
                call.append(f"(unsigned short){int(bits)}")
            else:
                cty, npt = _C_SCALAR[dt]
                call.append(f"({cty}){repr(npt(v).item())}")
        else:
            call.append(f"(long long){int(dims[name])}LL")
    loads = []
    saves = []
    for k, a in enumerate(tensors):
        n = a.nbytes
        loads.append(f'  std::snprintf(path, sizeof path, "%s/in{k}.bin", dir); auto t{k} = load(path, {n});')
        saves.append(f'  std::snprintf(path, sizeof path, "%s/out{k}.bin", dir); save(path, t{k}, {n});')
    main = (main_template({}).replace("@LOADS@", "\n".join(loads)).replace("@SAVES@", "\n".join(saves))
            .replace("@T@", str(ks.threads)).replace("@GX@", str(grid[0])).replace("@GY@", str(grid[1]))
            .replace("@GZ@", str(grid[2])).replace("@CALL@", f"{ks.symbol}({', '.join(call)})"))
    text = emulated_source(ks) + main
    tmp = Path(workdir or tempfile.mkdtemp(prefix="tnb-emu-"))
    tmp.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256(text.encode()).hexdigest()[:16]
    exe = tmp / f"k_{key}"
    if not exe.exists():
        (tmp / f"k_{key}.cpp").write_text(text)
        part = tmp / f"k_{key}.{os.getpid()}.part"       # renamed when whole: another process may share tmp
        r = subprocess.run(["g++", "-std=c++20", "-O1", "-w", "-pthread", "-o", str(part), str(tmp / f"k_{key}.cpp")],
                           capture_output=True, text=True, timeout=timeout)
        if r.returncode:
            raise RuntimeError(f"g++ failed:\n{r.stderr[:6000]}")
        os.replace(part, exe)
    for k, a in enumerate(tensors):
        np.ascontiguousarray(a).tofile(tmp / f"in{k}.bin")
    r = subprocess.run([str(exe), str(tmp)], capture_output=True, text=True, timeout=timeout)
    if r.returncode:
        raise RuntimeError(f"the emulated kernel failed ({r.returncode}):\n{r.stderr[:4000]}")
    for k, a in enumerate(tensors):
        out = np.fromfile(tmp / f"out{k}.bin", dtype=a.dtype).reshape(a.shape)
        a[...] = out
    return args
