"""Tile programs that several test stages share, in one place.

`PROGRAMS` (name -> source): whole programs a user could plausibly write, each checking without
error; the checker's tests (tests/sema/test_check_programs.py) pin their typed IR, and they are
the seed corpus of the front-end fuzz test, the NVRTC compile checks and the GPU runs.
`SEED`: the shipped language-document kernels (tilenb/examples/seed_kernels.tile), as text.
`EXTRA` (name -> source): further programs the CUDA backend is held to (tests/runtime/
test_cuda_kernels.py runs them on the GPU; tests/codegen/test_codegen_nvrtc.py compiles them).
`GEMM_32`: a GEMM of 32 x 32 tiles whose dot reads both operands from the tensors itself (no copy
statement), the kernel the views' tests draw (thread map labels and keys, views beside a Profile);
line 8 is the dot, line 10 the store of C.
`AXPY`: Z = X * a + Y over 1-D tensors of one runtime length N, two @autotune variants (TILE 256
and 512) and one f32 scalar: the kernel the repeat-launch tests call again and again (tests/runtime/
test_launch_fast_path.py, test_launch_overhead.py with the stand-in for CuPy; test_launch_repeat.py
on the GPU).
"""
from __future__ import annotations

from tilenb.examples import source

PROGRAMS = {
    "softmax": """
// Row softmax: each CTA takes 4 rows; BLOCK covers the row, the edge past N is masked.
@autotune(BLOCK in [128, 256])
@launch(128)
@grid(cdiv(M, 4))
kernel softmax_rows(X: tensor<f32>[M, N], Y: tensor<f32>[M, N]) {
  let r = ctx.block.x * 4
  var x = X[r :+ 4, 0 :+ BLOCK]
  var m = rowmax(x)
  var e = exp(x - m)
  var s = rowsum(e)
  Y[r :+ 4, 0 :+ BLOCK] = e / s
}
""",
    "layernorm": """
fn mean_of(t, n) = rowsum(t) / n

@autotune(D in [512])
@launch(256)
kernel layernorm(X: tensor<f16>[M, D], G: tensor<f32>[1, D], B: tensor<f32>[1, D],
                 Y: tensor<f16>[M, D], eps: f32) {
  let r = ctx.block.x * 2
  var x: tile<f32>[2, D] = f32(X[r :+ 2, :])
  var mu = mean_of(x, f32(D))
  var xc = x - mu
  var variance = rowsum(xc * xc) / f32(D)
  var inv = rsqrt(variance + eps)
  Y[r :+ 2, :] = f16(xc * inv * G[0 :+ 1, :] + B[0 :+ 1, :])
}
""",
    "stencil": """
// A five-point Laplacian. The tile reaches one row and column past the block on every side
// (starts of -1 at the first block); elements outside U read as 0.
@autotune(TR in [8], TC in [32])
@launch(256)
@grid(cdiv(H, TR), cdiv(W, TC))
kernel laplace(U: tensor<f32>[H, W], V: tensor<f32>[H, W]) {
  let r = ctx.block.x * TR
  let c = ctx.block.y * TC
  var u = U[r - 1 :+ TR + 2, c - 1 :+ TC + 2]
  // a newline ends a statement, except inside ( ) and [ ]
  V[r :+ TR, c :+ TC] = (u[0 :+ TR, 1 :+ TC] + u[2 :+ TR, 1 :+ TC]
                         + u[1 :+ TR, 0 :+ TC] + u[1 :+ TR, 2 :+ TC] - 4.0 * u[1 :+ TR, 1 :+ TC])
}

@autotune(T in [256])
kernel blur3(X: tensor<f32>[N], Y: tensor<f32>[N]) {
  let base = ctx.block.x * T
  let h = X[base - 1 :+ T + 2]       // a view: read once, no copy
  Y[base :+ T] = (h[0 :+ T] + h[1 :+ T] + h[2 :+ T]) / 3.0
}
""",
    "nibbles": """
// Two 4-bit values per byte, low nibble first, offset by 8 and scaled.
@launch(256)
kernel unpack_nibbles(P: tensor<u8>[N], S: tensor<f32>[1, 1], O: tensor<f32>[N, 2]) {
  let scale = S[0, 0]
  let i = ctx.block.x * 256 + ctx.thread
  if i < N {
    let b = i32(P[i])
    O[i, 0] = f32((b & 15) - 8) * scale
    O[i, 1] = f32(((b >> 4) & 15) - 8) * scale
  }
}

// The same with tiles: one row of 64 packed bytes per CTA.
@launch(64)
kernel unpack_tile(P: tensor<u8>[R, 64], Lo: tensor<i8>[R, 64], Hi: tensor<i8>[R, 64]) {
  let row = ctx.block.x
  var p = P[row :+ 1, :]
  var w: tile<i32>[1, 64] = i32(p)
  Lo[row :+ 1, :] = i8((w & 15) - 8)
  Hi[row :+ 1, :] = i8((i32(p) >> 4) & 15 - 8)
}
""",
    "scan": """
// An inclusive block scan (Hillis-Steele) in per-thread code: each thread owns one element and
// the two halves of buf take turns; barrier() separates the rounds.
@launch(256)
kernel block_scan(X: tensor<i32>[N], Y: tensor<i32>[N]) {
  let base = ctx.block.x * 256
  let t = ctx.thread
  var buf: tile<i32>[2, 256]
  buf[0, t] = X[base + t]
  barrier()
  var src = 0
  var off = 1
  while off < 256 {
    var v = buf[src, t]
    if t >= off {
      v += buf[src, t - off]
    }
    buf[1 - src, t] = v
    barrier()
    src = 1 - src
    off = off * 2
  }
  Y[base + t] = buf[src, t]
}
""",
    "functions": """
fn gelu(x) = 0.5 * x * (1.0 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)))
fn sq(x) = x * x
fn norm2(a, b) = sqrt(sq(a) + sq(b))

// A statement function: its own `tmp` and loop variable `i` never meet the caller's.
fn scale_rows_by(t, s, times) {
  var tmp = s
  for i in range(0, times) {
    t = t * tmp
  }
}

fn clamp_in_place(t, lo, hi) {
  t = min(max(t, lo), hi)
}

@autotune(TM in [16], TN in [64])
kernel act_and_scale(X: tensor<f32>[M, TN], Y: tensor<f32>[M, TN], s: f32) {
  let tmp = 3
  let i = ctx.block.x
  var t = X[i * TM :+ TM, :]
  t = gelu(t)
  scale_rows_by(t, s, tmp)
  var u = sq(t)
  scale_rows_by(u, 0.5, 1)
  clamp_in_place(u, -1.0, 1.0)
  Y[i * TM :+ TM, :] = norm2(t, u)
}
""",
    "breaks": """
// Per-thread loops that leave early: one thread per row.
@launch(64)
kernel first_above(X: tensor<f32>[M, N], O: tensor<i32>[M, 1], thr: f32) {
  let row = ctx.block.x * 64 + ctx.thread
  var found: i32 = -1
  for j in range(0, N) {
    if X[row, j] > thr {
      found = i32(j)
      break
    }
  }
  O[row, 0] = found
}

@launch(32)
kernel count_until_zero(X: tensor<i32>[M, N], O: tensor<i64>[M]) {
  let row = ctx.block.x * 32 + ctx.lane
  var j = 0
  var n: i64 = 0
  while j < 1000000 {
    let v = X[row, j]
    j += 1
    if v == 0 {
      break
    } else if v < 0 {
      continue
    }
    n += i64(v)
  }
  O[row] = n
}

@launch(128)
kernel sum_positive(X: tensor<f32>[1, N], O: tensor<f32>[1, 128]) {
  var acc: f32 = 0.0
  for<unroll 4> i in range(ctx.thread, N, 128) {
    let v = X[0, i]
    if v <= 0.0 { continue }
    acc += v
  }
  O[0, ctx.thread] = acc
}
""",
    "gemm_f16": """
// A GEMM with f16 inputs (tensor-core loop) and a fused epilogue through a let view of C.
@autotune(TM in [64, 128], TN in [64], TK in [32])
@launch(128)
@grid(cdiv(M, TM), cdiv(N, TN))
kernel hgemm(A: tensor<f16>[M, K], B: tensor<f16>[K, N], C: tensor<f32>[M, N], alpha: f32, beta: f32) {
  let pm = ctx.block.x
  let pn = ctx.block.y
  var acc: tile<f32>[TM, TN] = 0.0
  for kt in range(0, K, TK) {
    let a = A[pm * TM :+ TM, kt :+ TK]
    let b = B[kt :+ TK, pn * TN :+ TN]
    acc += dot(a, b)
  }
  let c_old = C[pm * TM :+ TM, pn * TN :+ TN]
  C[pm * TM :+ TM, pn * TN :+ TN] = alpha * acc + beta * c_old
}

// Q K^T with i8 inputs accumulates in i32.
@launch(128)
kernel qk_i8(Q: tensor<i8>[N, 64], Kt: tensor<i8>[N, 64], S: tensor<i32>[N, N]) {
  let i = ctx.block.x * 32
  let j = ctx.block.y * 32
  var q = Q[i :+ 32, :]
  var k = Kt[j :+ 32, :]
  S[i :+ 32, j :+ 32] = dot_t(q, k)
}
""",
    "tiles_reuse": """
// Three 32 KB tiles, 96 KB in all, never alive together: the footprint is 32 KB, so no
// @dynshared is needed. Flat views and tile windows on the way.
@launch(256)
kernel phases(X: tensor<f32>[128, 64], Y: tensor<f32>[128, 64]) {
  var a = X[0 :+ 128, :]
  Y[0 :+ 128, :] = a * 2.0
  var b: tile<f32>[128, 64] = X[0 :+ 128, :] + 1.0
  Y[0 :+ 128, :] = transpose(transpose(b))
  var c: tile<f32>[128, 64]
  c[0 :+ 64, :] = 0.0
  c[64 :+ 64, :] = 1.0
  flat(c)[0, 0 :+ 16] = 2.0
  Y[0 :+ 128, :] = c
}
""",
    "misc": """
// Every statement form and operator in one place.
@launch(256)
kernel misc(X: tensor<i32>[M, 8], F: tensor<f64>[M], B: tensor<bf16>[M], U: tensor<u16>[M],
            W: tensor<u32>[M], I8: tensor<i8>[M], L: tensor<i64>[M], Z: tensor<f32>[4, 4, M]) {
  let i = ctx.block.x * ctx.threads + ctx.thread; var x = X[i, 0]
  x += 1; x -= 2; x *= 3; x /= 4; x %= 5; x &= 6; x |= 7; x ^= 8; x <<= 1; x >>= 1
  let w = ctx.warp + ctx.lane + ctx.block.y + ctx.block.z + ctx.grid.x + ctx.grid.y + ctx.grid.z
  var d: f64 = F[i] * 0.5
  d = d + f64(B[i]) + f64(i32(U[i])) + f64(i64(W[i])) + f64(I8[i] * 2) + f64(L[i])
  let h: bf16 = bf16(d)
  let flag: bool = x > 3 && !(d < 0.0) || x == -1
  if flag { F[i] = d } else if x != 0 { F[i] = -d } else { F[i] = f64(h) }
  X[i, 1] = ~x ^ (x << 2) | (x >> 1) & 0xff
  Z[1, 2, i] = f32(i64(w) % 7)
  for k in range(0, 8, 2) {
    if k == 4 { continue }
    X[i, k] = i32(k)
  }
  if i > 1000000 { return }
  atomic_add(L[0], i64(1))
  atomic_max(F[0], d)
}
""",
}

SEED = source("seed_kernels")

GEMM_32 = """@launch(256)
@grid(cdiv(N, 32), cdiv(M, 32))
kernel gemm(A: tensor<f32>[M, K], B: tensor<f32>[K, N], C: tensor<f32>[M, N]) {
  let i = ctx.block.y * 32
  let j = ctx.block.x * 32
  var acc: tile<f32>[32, 32] = 0.0
  for k in range(0, K, 16) {
    acc += dot(A[i :+ 32, k :+ 16], B[k :+ 16, j :+ 32])
  }
  C[i :+ 32, j :+ 32] = acc
}
"""

AXPY = """
@autotune(TILE in [256, 512])
@launch(128)
@grid(cdiv(N, TILE))
kernel axpy(X: tensor<f32>[N], Y: tensor<f32>[N], Z: tensor<f32>[N], a: f32) {
  let b = ctx.block.x * TILE
  Z[b :+ TILE] = X[b :+ TILE] * a + Y[b :+ TILE]
}
"""

EXTRA = {
    "gemm_bf16_t": """
// bf16 GEMM against a transposed B (dot_t) on tensor cores, bf16 output.
@autotune(TM in [32, 64], TN in [32], TK in [16])
@launch(128)
@grid(cdiv(M, TM), cdiv(N, TN))
kernel gemm_bf16_t(A: tensor<bf16>[M, K], B: tensor<bf16>[N, K], C: tensor<bf16>[M, N]) {
  var acc: tile<f32>[TM, TN] = 0.0
  for kt in range(0, K, TK) {
    var a = A[ctx.block.x * TM :+ TM, kt :+ TK]
    var b = B[ctx.block.y * TN :+ TN, kt :+ TK]
    acc += dot_t(a, b)
  }
  C[ctx.block.x * TM :+ TM, ctx.block.y * TN :+ TN] = bf16(acc * 0.5)
}
""",
    "reductions": """
// Reductions inside expressions (a softmax written in one line), row and column reductions.
@launch(128)
kernel reductions(X: tensor<f32>[M, 48], Y: tensor<f32>[M, 48], R: tensor<f32>[M, 2],
                  Cs: tensor<f32>[1, 48], Cm: tensor<f32>[2, 48]) {
  var x = X[ctx.block.x * 16 :+ 16, :]
  Y[ctx.block.x * 16 :+ 16, :] = exp(x - rowmax(x)) / rowsum(exp(x - rowmax(x)))
  R[ctx.block.x * 16 :+ 16, 0 :+ 1] = rowmin(x)
  R[ctx.block.x * 16 :+ 16, 1 :+ 1] = rowsum(abs(x)) + 1.0
  if ctx.block.x == 0 {
    Cs[0 :+ 1, :] = colsum(x)
    Cm[0 :+ 1, :] = colmax(x)
    Cm[1 :+ 1, :] = colmin(x)
  }
}
""",
    "int_ops": """
// Integer wraparound, C-like / and % (by zero too), shifts past the width, conversions.
@launch(64)
kernel int_ops(A: tensor<i32>[N], B: tensor<i32>[N], F: tensor<f32>[N], U: tensor<u8>[N],
               O: tensor<i32>[8, N], P: tensor<i8>[2, N], Q: tensor<u8>[N], L: tensor<i64>[N]) {
  let base = ctx.block.x * 64
  var a = A[base :+ 64]
  var b = B[base :+ 64]
  var f = F[base :+ 64]
  O[0, base :+ 64] = a * b + a
  O[1, base :+ 64] = a / b
  O[2, base :+ 64] = a % b
  O[3, base :+ 64] = (a << (b & 63)) ^ (a >> (b & 63))
  O[4, base :+ 64] = i32(f)
  O[5, base :+ 64] = i32(round(f)) + i32(floor(f)) * 3 + i32(ceil(f)) * 7
  O[6, base :+ 64] = i32(U[base :+ 64]) * 1000 + abs(a) % 1000
  O[7, base :+ 64] = where(a > b, min(a, b), max(a, b) - 1)
  P[0, base :+ 64] = i8(a)
  P[1, base :+ 64] = i8(f)
  Q[base :+ 64] = u8(i32(f))
  L[base :+ 64] = i64(a) * i64(b) + i64(f * 1000.0)
}
""",
    "float_math": """
// f32 and f64 built-ins, and f16 storage (round on store).
@launch(128)
kernel float_math(X: tensor<f32>[N], D: tensor<f64>[N], H: tensor<f16>[N], Y: tensor<f32>[9, N],
                  E: tensor<f64>[2, N], G: tensor<f16>[N]) {
  let base = ctx.block.x * 128
  var x = X[base :+ 128]
  var d = D[base :+ 128]
  Y[0, base :+ 128] = exp(x * 0.5) + log(abs(x) + 1.0) + sqrt(abs(x))
  Y[1, base :+ 128] = tanh(x) + sin(x) + cos(x) + erf(x)
  Y[2, base :+ 128] = exp2(x) + log2(abs(x) + 2.0) + rsqrt(abs(x) + 1.0)
  Y[3, base :+ 128] = min(x, 0.25) + max(x, -0.25)
  Y[4, base :+ 128] = x % 0.75
  Y[5, base :+ 128] = f32(H[base :+ 128]) * 3.0
  Y[6, base :+ 128] = where(x > 0.0, x, -x * 0.5)
  Y[7, base :+ 128] = f32(f16(x * 1000.0))
  Y[8, base :+ 128] = f32(bf16(x * 1000.0))
  E[0, base :+ 128] = exp(d) + sqrt(abs(d)) + d / 3.0
  E[1, base :+ 128] = f64(x) * d
  G[base :+ 128] = f16(x * d)
}
""",
    "transpose_dot": """
// transpose, f32 dot and dot_t, i8 dot, f64 dot.
@launch(128)
kernel transpose_dot(A: tensor<f32>[M, 24], B: tensor<f32>[24, 40], T: tensor<f32>[24, M],
                     C: tensor<f32>[M, 40], D: tensor<f32>[M, M], I: tensor<i8>[M, 24], J: tensor<i32>[M, M],
                     F: tensor<f64>[M, 24], G: tensor<f64>[M, M]) {
  var a = A[0 :+ 32, :]
  var b = B[0 :+ 24, :]
  T[0 :+ 24, 0 :+ 32] = transpose(a)
  C[0 :+ 32, :] = dot(a, b)
  D[0 :+ 32, 0 :+ 32] = dot_t(a, a)
  var i = I[0 :+ 32, :]
  J[0 :+ 32, 0 :+ 32] = dot_t(i, i)
  var f = F[0 :+ 32, :]
  G[0 :+ 32, 0 :+ 32] = dot_t(f, f)
}
""",
    "registers": """
// A tile kept in registers, updated elementwise across a loop, then stored.
@registers(acc)
@launch(128)
kernel reg_acc(X: tensor<f32>[M, 64], Y: tensor<f32>[16, 64]) {
  var acc: tile<f32>[16, 64] = 0.0
  for r in range(0, M, 16) {
    var x = X[r :+ 16, :]
    acc = acc + x * x
  }
  Y[0 :+ 16, :] = acc
}
""",
    "dynshared": """
// 64 KB of shared memory: needs @dynshared (the launch raises the per-block limit).
@dynshared
@launch(256)
kernel big_tile(X: tensor<f32>[M, 128], Y: tensor<f32>[M, 128]) {
  var big = X[ctx.block.x * 128 :+ 128, :]
  var row = rowsum(big)
  Y[ctx.block.x * 128 :+ 128, :] = big - row / 128.0
}
""",
    "atomics": """
// Atomics from every thread: f32/i32/f16 adds, f32/i32 max (f32 max through compare-and-swap).
@launch(128)
kernel atomics(X: tensor<f32>[N], K: tensor<i32>[N], S: tensor<f32>[4], H: tensor<i32>[8], M: tensor<i32>[2],
               Hf: tensor<f16>[2]) {
  let i = ctx.block.x * 128 + ctx.thread
  if i < N {
    let v = X[i]
    atomic_add(S[0], v)
    atomic_max(S[1], v)
    atomic_max(S[2], -abs(v))
    atomic_add(H[K[i] & 7], 1)
    atomic_max(M[0], K[i])
    atomic_add(Hf[0], f16(0.25))
  }
}
""",
    "f16_dots": """
// f16 dots into shared tiles on tensor cores: an accumulator a reduction reads (so it stays in
// shared memory) and a dot_t straight into a tile; leading dims not multiples of anything.
@launch(128)
kernel f16_dots(A: tensor<f16>[M, 32], B: tensor<f16>[32, 48], R: tensor<f32>[M, 1], S: tensor<f32>[M, 48],
                T: tensor<f32>[M, 32]) {
  var acc: tile<f32>[32, 48] = 0.0
  for kt in range(0, 32, 16) {
    var a = A[ctx.block.x * 32 :+ 32, kt :+ 16]
    var b = B[kt :+ 16, 0 :+ 48]
    acc += dot(a, b)
  }
  R[ctx.block.x * 32 :+ 32, :] = rowsum(acc)
  S[ctx.block.x * 32 :+ 32, :] = acc
  var q = A[ctx.block.x * 32 :+ 32, :]
  var s: tile<f32>[32, 32] = dot_t(q, q)
  T[ctx.block.x * 32 :+ 32, :] = s * 0.5
}
""",
    "early_return": """
// A return some threads take; element reads and writes of a tile in per-thread code.
@launch(128)
kernel early_return(X: tensor<f32>[N], Y: tensor<f32>[N]) {
  var t = X[ctx.block.x * 128 :+ 128]
  t[ctx.thread] = t[ctx.thread] * 2.0
  barrier()
  let i = ctx.block.x * 128 + ctx.thread
  if t[(ctx.thread + 1) % 128] < 0.0 {
    return
  }
  Y[i] = t[ctx.thread] + t[(ctx.thread + 1) % 128]
}
""",
    "unroll_break": """
// for<unroll> with break and continue in per-thread code.
@launch(32)
kernel unroll_break(X: tensor<i32>[M, 40], O: tensor<i32>[M]) {
  let row = ctx.block.x * 32 + ctx.lane
  var s = 0
  for<unroll 3> j in range(0, 40) {
    let v = X[row, j]
    if v == 7 { break }
    if v % 2 == 0 { continue }
    s += v
  }
  O[row] = s
}
""",
    "windows": """
// Tile windows with runtime starts, a window store, flat(), and a self-referencing statement.
@launch(128)
kernel windows(X: tensor<f32>[M, 32], Y: tensor<f32>[M, 32], Z: tensor<f32>[32, 32]) {
  var t = X[ctx.block.x * 32 :+ 32, :]
  for h in range(0, 32, 8) {
    t[h :+ 8, 0 :+ 16] = t[h :+ 8, 16 :+ 16] * 2.0 + t[h :+ 8, 0 :+ 16]
  }
  flat(t)[0, 0 :+ 4] = -1.0
  Y[ctx.block.x * 32 :+ 32, :] = t
  if ctx.block.x == 0 {
    t = transpose(t)
    Z[0 :+ 32, :] = t
  }
}
""",
}
