"""Kernels of our own on the CPU reference executor, each against an independent numpy reference.

Each test pins one behaviour of the language as the executor defines it: masking at partial
tiles, views, flash attention with a ragged key length, i8 quantization, nibble unpacking, a
per-thread scan with barrier(), halo stencils, functions, per-thread loops with break, f16 and
bf16 storage, integer wraparound and float-to-int saturation. Shapes are never multiples of the
tile sizes.
"""
import textwrap

import ml_dtypes
import numpy as np
import pytest

import tilenb

f32 = np.float32
bf16 = ml_dtypes.bfloat16


def kernel(src, name=None, **kw):
    mod = tilenb.compile(textwrap.dedent(src), backend="cpu", **kw)
    return mod.kernels[name] if name else next(iter(mod.kernels.values()))


def rnd(seed, *shape, scale=1.0, dtype=f32):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


# ---- tiles, masking, views --------------------------------------------------------------------
SOFTMAX = """
@autotune(R in [8], C in [64])
@launch(128)
@grid(cdiv(M, R))
kernel softmax(X: tensor<f32>[M, N], Y: tensor<f32>[M, N]) {
  let r = ctx.block.x * R
  var x = X[r :+ R, 0 :+ C]          // wider than the row: columns past N are invalid
  var m = rowmax(x)                  // so the max is over real elements only
  var e = exp(x - m)
  Y[r :+ R, 0 :+ C] = e / rowsum(e)
}
"""


def test_softmax_rows_narrower_than_the_tile_all_negative():
    k = kernel(SOFTMAX)
    M, N = 20, 44                                      # 44 < C = 64; 20 rows = 2.5 CTAs
    X = -np.abs(rnd(1, M, N, scale=3.0)) - 5.0         # a padded 0 would win a naive max
    Y = np.full((M, N), -7.0, f32)
    k(X, Y)
    x = X.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(Y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_gemm_f16_inputs_with_let_views_of_c():
    k = kernel("""
    @autotune(TM in [32], TN in [32], TK in [16])
    @launch(128)
    @grid(cdiv(M, TM), cdiv(N, TN))
    kernel hgemm(A: tensor<f16>[M, K], B: tensor<f16>[K, N], C: tensor<f32>[M, N], alpha: f32, beta: f32) {
      var acc: tile<f32>[TM, TN] = 0.0
      for kt in range(0, K, TK) {
        let a = A[ctx.block.x * TM :+ TM, kt :+ TK]
        let b = B[kt :+ TK, ctx.block.y * TN :+ TN]
        acc += dot(a, b)
      }
      let c = C[ctx.block.x * TM :+ TM, ctx.block.y * TN :+ TN]
      c[0 :+ TM, :] = alpha * acc + beta * c     // written through the view, read through it too
    }
    """)
    M, K, N = 44, 36, 52
    A, B = rnd(2, M, K, dtype=np.float16), rnd(3, K, N, dtype=np.float16)
    C = rnd(4, M, N)
    C0 = C.copy()
    k(A, B, C, 1.5, 0.25)
    ref = 1.5 * (A.astype(np.float64) @ B.astype(np.float64)) + 0.25 * C0
    np.testing.assert_allclose(C, ref, rtol=1e-5, atol=1e-4)


def test_view_reads_the_tensor_as_it_is_when_read():
    k = kernel("""
    @launch(32)
    kernel k(X: tensor<f32>[N], Y: tensor<f32>[N]) {
      let v = X[0 :+ 8]
      X[0 :+ 4] = 100.0
      Y[0 :+ 8] = v + 1.0
    }
    """)
    X = np.arange(8, dtype=f32)
    Y = np.zeros(8, f32)
    k[1](X, Y)
    assert list(Y) == [101.0] * 4 + [5.0, 6.0, 7.0, 8.0]


def test_window_store_writes_valid_elements_and_keeps_the_tile_region():
    k = kernel("""
    @launch(64)
    kernel k(X: tensor<f32>[M, 8], Y: tensor<f32>[8, 8]) {
      var t: tile<f32>[8, 8] = -1.0          // wholly valid
      t[0 :+ 8, :] = X[2 :+ 8, :]           // rows past M are invalid in the value: not written
      Y[0 :+ 8, :] = t                      // t stays wholly valid: all 8 rows stored
    }
    """)
    X = rnd(5, 4, 8)                        # only rows 2, 3 exist
    Y = np.zeros((8, 8), f32)
    k[1](X, Y)
    np.testing.assert_array_equal(Y[:2], X[2:])
    np.testing.assert_array_equal(Y[2:], -1.0)


def test_whole_assignment_takes_the_value_region():
    k = kernel("""
    @launch(64)
    kernel k(X: tensor<f32>[M, 8], Y: tensor<f32>[8, 8]) {
      var t: tile<f32>[8, 8] = -1.0
      t = X[2 :+ 8, :]                      // t = e takes e's region: rows 0..1 only
      Y[0 :+ 8, :] = t
    }
    """)
    X = rnd(6, 4, 8)
    Y = np.full((8, 8), 9.0, f32)
    k[1](X, Y)
    np.testing.assert_array_equal(Y[:2], X[2:])
    np.testing.assert_array_equal(Y[2:], 9.0)


def test_reductions_of_nothing_and_column_reductions():
    k = kernel("""
    @launch(32)
    kernel k(X: tensor<f32>[M, N], S: tensor<f32>[4, 3], C: tensor<f32>[3, 8]) {
      var x = X[0 :+ 4, N - 2 :+ 4]          // columns N, N+1 are past the end
      var none = X[0 :+ 4, N :+ 4]           // no valid column at all
      S[0 :+ 4, 0 :+ 1] = rowsum(none)       // 0
      S[0 :+ 4, 1 :+ 1] = rowmax(none)       // -inf
      S[0 :+ 4, 2 :+ 1] = rowmin(x)
      C[0 :+ 1, 0 :+ 4] = colmax(x)          // columns 2, 3 of x invalid: not stored
      C[1 :+ 1, 0 :+ 4] = colsum(x)
      C[2 :+ 1, 0 :+ 4] = colmin(x)
    }
    """)
    X = rnd(7, 4, 12)
    S = np.zeros((4, 3), f32)
    Cc = np.full((3, 8), 5.0, f32)
    k[1](X, S, Cc)
    np.testing.assert_array_equal(S[:, 0], 0.0)
    assert np.all(np.isneginf(S[:, 1]))
    np.testing.assert_array_equal(S[:, 2], X[:, 10:].min(axis=1))
    np.testing.assert_array_equal(Cc[0, :2], X[:, 10:].max(axis=0))
    np.testing.assert_allclose(Cc[1, :2], X[:, 10:].sum(axis=0), rtol=1e-6)
    np.testing.assert_array_equal(Cc[2, :2], X[:, 10:].min(axis=0))
    np.testing.assert_array_equal(Cc[:, 2:], 5.0)


def test_transpose_and_flat():
    k = kernel("""
    @launch(64)
    kernel k(X: tensor<f32>[M, 8], Y: tensor<f32>[8, 8], F: tensor<f32>[1, 64]) {
      var t = X[0 :+ 8, :]                  // M = 4: rows 4..7 invalid
      Y[0 :+ 8, :] = transpose(t)           // so columns 4..7 of the transpose are invalid
      var u: tile<f32>[8, 8] = 0.0
      flat(u)[0 :+ 1, 0 :+ 64] = F[0 :+ 1, :]   // writes through the flat view
      flat(u)[0, 3] = -1.0                  // one element, the same in every thread
      var v = transpose(u)
      F[0 :+ 1, :] = flat(v)
    }
    """)
    X = rnd(8, 4, 8)
    Y = np.full((8, 8), 3.0, f32)
    F = np.arange(64, dtype=f32).reshape(1, 64)
    k[1](X, Y, F)
    np.testing.assert_array_equal(Y[:, :4], X.T)
    np.testing.assert_array_equal(Y[:, 4:], 3.0)
    u = np.arange(64, dtype=f32).reshape(8, 8)
    u[0, 3] = -1.0
    np.testing.assert_array_equal(F.reshape(8, 8), u.T)


# ---- flash attention, quantization, nibbles ----------------------------------------------------
def test_flash_attention_ragged_keys_causal_free():
    k = kernel("""
    @autotune(BR in [16], BC in [24], D in [32])
    @launch(128)
    @grid(cdiv(N, BR))
    kernel attn(Q: tensor<f32>[N, D], K: tensor<f32>[Nk, D], V: tensor<f32>[Nk, D], O: tensor<f32>[N, D], scale: f32) {
      let row = ctx.block.x * BR
      let q = Q[row :+ BR, :]
      var acc: tile<f32>[BR, D] = 0.0
      var m: tile<f32>[BR, 1] = -1.0e30
      var l: tile<f32>[BR, 1] = 0.0
      for kt in range(0, Nk, BC) {
        var s: tile<f32>[BR, BC] = dot_t(q, K[kt :+ BC, :]) * scale
        var m_new = max(m, rowmax(s))
        var p = exp(s - m_new)
        var alpha = exp(m - m_new)
        l = l * alpha + rowsum(p)
        acc = acc * alpha + dot(p, V[kt :+ BC, :])
        m = m_new
      }
      O[row :+ BR, :] = acc / l
    }
    """)
    N, Nk, D = 36, 52, 32                     # 52 = 2 * 24 + 4: the last key tile has 4 keys
    Q, K, V = rnd(9, N, D), rnd(10, Nk, D, scale=2.0), rnd(11, Nk, D)
    O = np.zeros((N, D), f32)
    k(Q, K, V, O, 0.2)
    s = Q.astype(np.float64) @ K.T.astype(np.float64) * 0.2
    p = np.exp(s - s.max(axis=1, keepdims=True))
    np.testing.assert_allclose(O, p / p.sum(axis=1, keepdims=True) @ V, rtol=1e-4, atol=1e-5)


def test_quantize_rows_to_i8_with_scale_saturating():
    k = kernel("""
    @autotune(C in [64])
    @launch(64)
    kernel quant(X: tensor<f32>[M, C], Q: tensor<i8>[M, C], S: tensor<f32>[M, 1]) {
      let r = ctx.block.x * 4
      var x = X[r :+ 4, :]
      var amax = rowmax(abs(x))
      var scale = amax / 100.0                  // 127 would be usual; 100 makes values saturate
      S[r :+ 4, :] = scale
      Q[r :+ 4, :] = i8(round(x / scale * 1.5))  // float -> i8 saturates at -128 / 127
    }
    """)
    M = 12
    X = rnd(12, M, 64, scale=10.0)
    Q = np.zeros((M, 64), np.int8)
    S = np.zeros((M, 1), f32)
    k[3](X, Q, S)
    amax = np.abs(X).max(axis=1, keepdims=True)
    scale = (amax / f32(100.0)).astype(f32)
    np.testing.assert_array_equal(S, scale)
    q = np.rint((X / scale * f32(1.5)).astype(f32))
    np.testing.assert_array_equal(Q, np.clip(q, -128, 127).astype(np.int8))
    assert Q.max() == 127 and Q.min() == -128


def test_nibble_unpacking_from_u8_per_thread_and_tiles():
    mod = tilenb.compile(textwrap.dedent("""
    @launch(128)
    kernel unpack(P: tensor<u8>[N], Lo: tensor<i32>[N], Hi: tensor<i32>[N]) {
      let i = ctx.block.x * 128 + ctx.thread
      if i < N {
        let b = i32(P[i])
        Lo[i] = b & 15
        Hi[i] = (i32(b) >> 4) & 15
      }
    }

    @launch(64)
    kernel unpack_tile(P: tensor<u8>[R, 16], W: tensor<i8>[R, 32]) {
      let r = ctx.block.x * 2
      var p: tile<i32>[2, 16] = i32(P[r :+ 2, :])
      W[r :+ 2, 0 :+ 16] = i8((p & 15) - 8)
      W[r :+ 2, 16 :+ 16] = i8(((p >> 4) & 15) - 8)
    }
    """), backend="cpu")
    N = 300
    P = np.random.default_rng(13).integers(0, 256, N).astype(np.uint8)
    P[:3] = [0xff, 0x80, 0x0f]                # a high bit set: u8 zero-extends
    Lo, Hi = np.zeros(N, np.int32), np.zeros(N, np.int32)
    mod.unpack[3](P, Lo, Hi)
    np.testing.assert_array_equal(Lo, P & 15)
    np.testing.assert_array_equal(Hi, P >> 4)
    R = 12
    P2 = P[: R * 16].reshape(R, 16).copy()
    W = np.zeros((R, 32), np.int8)
    mod.unpack_tile[R // 2](P2, W)
    np.testing.assert_array_equal(W[:, :16], (P2 & 15).astype(np.int8) - 8)
    np.testing.assert_array_equal(W[:, 16:], (P2 >> 4).astype(np.int8) - 8)


# ---- per-thread code ------------------------------------------------------------------------
SCAN = """
@launch(128)
kernel scan(X: tensor<i32>[N], Y: tensor<i32>[N]) {
  let base = ctx.block.x * 128
  let t = ctx.thread
  var buf: tile<i32>[2, 128]
  var x = 0
  if base + t < N { x = X[base + t] }
  buf[0, t] = x
  barrier()
  var src = 0
  var off = 1
  while off < 128 {
    var v = buf[src, t]
    if t >= off {
      v += buf[src, t - off]
    }
    buf[1 - src, t] = v
    barrier()
    src = 1 - src
    off = off * 2
  }
  if base + t < N { Y[base + t] = buf[src, t] }
}
"""


def test_per_thread_block_scan_with_barriers():
    k = kernel(SCAN)
    N = 300
    X = np.random.default_rng(14).integers(-50, 50, N).astype(np.int32)
    Y = np.zeros(N, np.int32)
    k[3](X, Y)
    ref = np.concatenate([np.cumsum(X[i:i + 128]) for i in range(0, N, 128)])
    np.testing.assert_array_equal(Y, ref)


def test_halo_stencil_starting_at_minus_one_reads_zero():
    mod = tilenb.compile(textwrap.dedent("""
    // zero padding: a filled tile is wholly valid; the window store writes only the elements
    // inside X, so the halo outside X stays 0 and every output is written
    @autotune(T in [32])
    @launch(64)
    @grid(cdiv(N, T))
    kernel blur(X: tensor<f32>[N], Y: tensor<f32>[N]) {
      let base = ctx.block.x * T
      var h: tile<f32>[T + 2] = 0.0
      h[0 :+ T + 2] = X[base - 1 :+ T + 2]
      Y[base :+ T] = (h[0 :+ T] + h[1 :+ T] + h[2 :+ T]) / 3.0
    }

    // masking: the halo elements outside X are invalid, so the outputs that need them are
    // invalid too and are not stored
    @autotune(T in [32])
    @launch(64)
    @grid(cdiv(N, T))
    kernel blur_masked(X: tensor<f32>[N], Y: tensor<f32>[N]) {
      let base = ctx.block.x * T
      let h = X[base - 1 :+ T + 2]
      Y[base :+ T] = (h[0 :+ T] + h[1 :+ T] + h[2 :+ T]) / 3.0
    }

    // per-thread reads of the halo view: element -1 reads 0
    @launch(64)
    kernel left(X: tensor<f32>[N], Y: tensor<f32>[N]) {
      let v = X[-1 :+ 65]
      let i = ctx.thread
      if i < N { Y[i] = v[i] + v[i + 1] }
    }
    """), backend="cpu")
    N = 76
    X = rnd(15, N)
    P = np.pad(X.astype(np.float64), 1)
    ref = (P[:-2] + P[1:-1] + P[2:]) / 3
    Y = np.full(N, 9.0, f32)
    mod.blur(X, Y)
    np.testing.assert_allclose(Y, ref, rtol=1e-6, atol=1e-7)
    Y = np.full(N, 9.0, f32)
    mod.blur_masked(X, Y)
    np.testing.assert_allclose(Y[1:-1], ref[1:-1], rtol=1e-6, atol=1e-7)
    assert Y[0] == 9.0 and Y[-1] == 9.0
    Y = np.zeros(N, f32)
    mod.left[1](X, Y)
    assert Y[0] == X[0]                           # v[0] is X[-1]: reads 0
    np.testing.assert_array_equal(Y[1:64], X[:63] + X[1:64])


def test_statement_and_expression_functions():
    k = kernel("""
    fn gelu(x) = 0.5 * x * (1.0 + erf(x * 0.70710678))
    fn sq(x) = x * x
    fn axpy(y, a, x) {
      y = y + a * x
    }
    fn repeat_scale(t, s, n) {
      var k = s
      for i in range(0, n) {
        t = t * k
      }
    }
    @launch(64)
    kernel f(X: tensor<f32>[M, 16], Y: tensor<f32>[M, 16], a: f32) {
      let r = ctx.block.x * 4
      var y = X[r :+ 4, :]
      var g = gelu(y)
      axpy(y, a, g)                 // y is written: it aliases the caller's tile
      repeat_scale(y, 0.5, 3)
      Y[r :+ 4, :] = y + sq(g)
    }
    """)
    M = 12
    X = rnd(16, M, 16, scale=2.0)
    Y = np.zeros((M, 16), f32)
    k[3](X, Y, 0.75)
    from math import erf
    x = X.astype(np.float64)
    g = 0.5 * x * (1 + np.vectorize(erf)(x * 0.70710678))
    ref = (x + 0.75 * g) * 0.125 + g * g
    np.testing.assert_allclose(Y, ref, rtol=1e-5, atol=1e-6)


LOOPS = """
@launch(32)
kernel loops(X: tensor<i32>[M, N], F: tensor<i32>[M], W: tensor<i32>[M], T: tensor<i32>[M]) {
  let row = ctx.block.x * 32 + ctx.thread
  // for: the bound is evaluated once, on entry
  var n = 4
  var turns = 0
  for j in range(0, n) {
    n = n + 1
    turns += 1
  }
  T[row] = turns
  // first index holding a negative value, with break
  var found = -1
  for j in range(0, N) {
    if X[row, j] < 0 {
      found = i32(j)
      break
    }
  }
  F[row] = found
  // while: the condition is re-tested every turn; continue skips, break leaves
  var j = 0
  var sum = 0
  while j < N {
    let v = X[row, j]
    j += 1
    if v == 0 { continue }
    if v < 0 { break }
    sum += v
  }
  W[row] = sum
}
"""


def test_per_thread_loops_break_continue_and_for_bounds_fixed_on_entry():
    k = kernel(LOOPS)
    M, N = 40, 12
    X = np.random.default_rng(17).integers(-2, 6, (M, N)).astype(np.int32)
    X[0] = 1                                   # a row with no negative value
    F, W, T = (np.zeros(M, np.int32) for _ in range(3))
    k[2](X, F, W, T)
    for r in range(M):
        neg = np.nonzero(X[r] < 0)[0]
        assert F[r] == (neg[0] if len(neg) else -1)
        stop = neg[0] if len(neg) else N
        assert W[r] == X[r, :stop].sum()
    np.testing.assert_array_equal(T, 4)         # not an endless loop: n is read once


def test_return_under_varying_control_and_atomics():
    k = kernel("""
    @launch(64)
    kernel k(X: tensor<f32>[N], Cnt: tensor<i32>[1], Mx: tensor<f32>[1], S: tensor<f32>[1]) {
      let i = ctx.block.x * 64 + ctx.thread
      if i >= N { return }
      atomic_add(Cnt[0], 1)
      if X[i] < 0.0 { return }
      atomic_max(Mx[0], X[i])
      atomic_add(S[0], X[i])
    }
    """)
    N = 152
    X = rnd(18, N)
    Cnt, Mx, S = np.zeros(1, np.int32), np.full(1, -np.inf, f32), np.zeros(1, f32)
    k[4](X, Cnt, Mx, S)
    assert Cnt[0] == N
    assert Mx[0] == X.max()
    acc = f32(0)                                 # thread order, rounded to f32 each time
    for v in X:
        if v >= 0:
            acc = f32(acc + v)
    assert S[0] == acc


def test_ctx_fields_and_three_dimensional_grid():
    k = kernel("""
    @launch(64)
    kernel k(O: tensor<i32>[24, 64, 8]) {
      let b = ctx.block.x + ctx.grid.x * (ctx.block.y + ctx.grid.y * ctx.block.z)
      O[b, ctx.thread, 0] = i32(ctx.block.x)
      O[b, ctx.thread, 1] = i32(ctx.block.y)
      O[b, ctx.thread, 2] = i32(ctx.block.z)
      O[b, ctx.thread, 3] = i32(ctx.warp)
      O[b, ctx.thread, 4] = i32(ctx.lane)
      O[b, ctx.thread, 5] = i32(ctx.threads)
      O[b, ctx.thread, 6] = i32(ctx.grid.x * 100 + ctx.grid.y * 10 + ctx.grid.z)
    }
    """)
    O = np.zeros((24, 64, 8), np.int32)
    k[(2, 3, 4)](O)
    b = np.arange(24)
    t = np.arange(64)
    np.testing.assert_array_equal(O[:, :, 0], np.broadcast_to((b % 2)[:, None], (24, 64)))
    np.testing.assert_array_equal(O[:, :, 1], np.broadcast_to((b // 2 % 3)[:, None], (24, 64)))
    np.testing.assert_array_equal(O[:, :, 2], np.broadcast_to((b // 6)[:, None], (24, 64)))
    np.testing.assert_array_equal(O[:, :, 3], np.broadcast_to(t // 32, (24, 64)))
    np.testing.assert_array_equal(O[:, :, 4], np.broadcast_to(t % 32, (24, 64)))
    np.testing.assert_array_equal(O[:, :, 5], 64)
    np.testing.assert_array_equal(O[:, :, 6], 234)


# ---- types ----------------------------------------------------------------------------------
def test_bf16_and_f16_compute_in_f32_and_round_on_store():
    k = kernel("""
    @launch(64)
    kernel k(A: tensor<bf16>[M, 8], H: tensor<f16>[M, 8], Ob: tensor<bf16>[M, 8], Oh: tensor<f16>[M, 8],
             S: tensor<f32>[M, 1]) {
      let r = ctx.block.x * 4
      var a = A[r :+ 4, :]
      var h = H[r :+ 4, :]
      Ob[r :+ 4, :] = a * h + 1.0
      Oh[r :+ 4, :] = a * h + 1.0
      S[r :+ 4, :] = rowsum(h)                 // f16 reduces to f32
      var e: f16 = H[r, 0] * 3.0               // per-thread scalar var rounds to f16
      Oh[r, 0] = e + 0.0001
    }
    """)
    M = 8
    A = rnd(19, M, 8, dtype=bf16)
    H = rnd(20, M, 8, dtype=np.float16)
    Ob, Oh, S = np.zeros((M, 8), bf16), np.zeros((M, 8), np.float16), np.zeros((M, 1), f32)
    k[2](A, H, Ob, Oh, S)
    prod = A.astype(f32) * H.astype(f32) + f32(1)
    np.testing.assert_array_equal(Ob, prod.astype(bf16))
    ref_h = prod.astype(np.float16)
    e = (H[::4, 0].astype(f32) * f32(3)).astype(np.float16)
    ref_h[::4, 0] = (e.astype(f32) + f32(0.0001)).astype(np.float16)
    np.testing.assert_array_equal(Oh, ref_h)
    np.testing.assert_allclose(S[:, 0], H.astype(f32).sum(axis=1), rtol=1e-6)


def test_integer_wraparound_division_and_shifts():
    k = kernel("""
    @launch(32)
    kernel k(X: tensor<i32>[N], Y: tensor<i32>[N, 6], B: tensor<i8>[N]) {
      let i = ctx.thread
      if i < N {
        let x = X[i]
        Y[i, 0] = x * 65536 * 65536 + x * 2147483647   // i32 arithmetic wraps
        Y[i, 1] = x / 7                                 // truncates toward zero
        Y[i, 2] = x % 7                                 // sign of the dividend
        Y[i, 3] = x >> 2                                // arithmetic shift
        Y[i, 4] = i32(i8(x))                            // i32 -> i8 wraps
        Y[i, 5] = i32(B[i]) + 1000                      // i8 loads sign-extend
        B[i] = i8(x * 3)                                // wraps on conversion
      }
    }
    """)
    X = np.array([5, -5, 20, -20, 2147483647, -2147483648, 200, 130, 7, -7, 1000, -129], np.int32)
    N = len(X)
    Y = np.zeros((N, 6), np.int32)
    B = np.array(np.arange(-60, 60, 10), np.int8)
    B0 = B.copy()
    k[1](X, Y, B)
    x = X.astype(np.int64)
    wrap32 = lambda v: ((v + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(np.int32)  # noqa: E731
    np.testing.assert_array_equal(Y[:, 0], wrap32(x * 65536 * 65536 + x * 2147483647))
    np.testing.assert_array_equal(Y[:, 1], np.trunc(x / 7).astype(np.int32))
    np.testing.assert_array_equal(Y[:, 2], np.fmod(x, 7).astype(np.int32))
    np.testing.assert_array_equal(Y[:, 3], x >> 2)
    np.testing.assert_array_equal(Y[:, 4], ((x + 128) % 256 - 128))
    np.testing.assert_array_equal(Y[:, 5], B0.astype(np.int32) + 1000)
    np.testing.assert_array_equal(B, ((x * 3 + 128) % 256 - 128).astype(np.int8))


def test_float_to_int_truncates_and_saturates():
    k = kernel("""
    @launch(32)
    kernel k(X: tensor<f32>[N], I: tensor<i32>[N], B: tensor<i8>[N], U: tensor<u8>[N], L: tensor<i64>[N]) {
      let i = ctx.thread
      if i < N {
        I[i] = i32(X[i])
        B[i] = i8(X[i])
        U[i] = u8(X[i])
        L[i] = i64(X[i])
      }
    }
    """)
    X = np.array([1.9, -1.9, 3e9, -3e9, np.nan, np.inf, -np.inf, 300.0, -300.0, 255.5, 1e19, 0.5], f32)
    N = len(X)
    I, B, U, L = np.zeros(N, np.int32), np.zeros(N, np.int8), np.zeros(N, np.uint8), np.zeros(N, np.int64)
    k[1](X, I, B, U, L)

    def sat(v, lo, hi):
        return 0 if np.isnan(v) else int(max(lo, min(hi, np.trunc(np.float64(v)))))
    assert list(I) == [sat(v, -2 ** 31, 2 ** 31 - 1) for v in X]
    assert list(B) == [sat(v, -128, 127) for v in X]
    assert list(U) == [sat(v, 0, 255) for v in X]
    assert list(L) == [sat(v, -2 ** 63, 2 ** 63 - 1) for v in X]


def test_i8_dot_accumulates_in_i32():
    k = kernel("""
    @launch(64)
    kernel k(A: tensor<i8>[M, 40], B: tensor<i8>[40, 24], C: tensor<i32>[M, 24]) {
      let r = ctx.block.x * 16
      C[r :+ 16, :] = dot(A[r :+ 16, :], B[0 :+ 40, :])
    }
    """)
    rng = np.random.default_rng(21)
    M = 20
    A = rng.integers(-128, 128, (M, 40)).astype(np.int8)
    B = rng.integers(-128, 128, (40, 24)).astype(np.int8)
    A[0] = -128
    B[:, 0] = -128                               # 40 * 16384: far beyond i16
    C = np.zeros((M, 24), np.int32)
    k[2](A, B, C)
    np.testing.assert_array_equal(C, A.astype(np.int32) @ B.astype(np.int32))
    assert C[0, 0] == 40 * 16384


def test_min_max_where_and_math_in_f32():
    k = kernel("""
    @launch(64)
    kernel k(X: tensor<f32>[M, 8], Y: tensor<f32>[M, 8], Z: tensor<f32>[M, 8]) {
      let r = ctx.block.x * 4
      var x = X[r :+ 4, :]
      Y[r :+ 4, :] = where(x > 0.0, sqrt(x), exp2(x)) + max(x, 0.5) - min(x, -0.5)
      Z[r :+ 4, :] = rsqrt(abs(x) + 1.0) * tanh(x) + floor(x) * ceil(x) - log2(abs(x) + 2.0)
    }
    """)
    M = 8
    X = rnd(22, M, 8, scale=2.0)
    Y, Z = np.zeros((M, 8), f32), np.zeros((M, 8), f32)
    k[2](X, Y, Z)
    x = X
    with np.errstate(invalid="ignore"):
        refy = np.where(x > 0, np.sqrt(x), np.exp2(x)) + np.maximum(x, f32(0.5)) - np.minimum(x, f32(-0.5))
    refz = f32(1) / np.sqrt(np.abs(x) + f32(1)) * np.tanh(x) + np.floor(x) * np.ceil(x) - np.log2(np.abs(x) + f32(2))
    np.testing.assert_allclose(Y, refy, rtol=1e-6)
    np.testing.assert_allclose(Z, refz, rtol=1e-6, atol=1e-6)


def test_for_reads_its_bounds_once_while_retests_its_condition():
    k = kernel("""
    @launch(32)
    kernel k(O: tensor<i32>[32, 4]) {
      let t = i32(ctx.thread)
      var n = t % 5
      var a = 0
      for j in range(0, n) {         // range(0, n) is fixed on entry: t % 5 turns
        n += 1
        a += 1
      }
      var m = t % 5
      var b = 0
      var j = 0
      while j < m && j < 12 {        // re-tested each turn: m keeps moving, so 12 turns (or 0)
        m += 1
        j += 1
        b += 1
      }
      var c = 0                      // the same loops leaving by break at turn t % 3
      for i in range(0, 8) {
        if i32(i) == t % 3 { break }
        c += 1
      }
      var d = 0
      while true {
        if d == t % 3 { break }
        d += 1
      }
      O[ctx.thread, 0] = a
      O[ctx.thread, 1] = b
      O[ctx.thread, 2] = c
      O[ctx.thread, 3] = d
    }
    """)
    O = np.zeros((32, 4), np.int32)
    k[1](O)
    t = np.arange(32)
    np.testing.assert_array_equal(O[:, 0], t % 5)
    np.testing.assert_array_equal(O[:, 1], np.where(t % 5 > 0, 12, 0))
    np.testing.assert_array_equal(O[:, 2], t % 3)
    np.testing.assert_array_equal(O[:, 3], t % 3)


DIVERGENT_CTAS = """
@launch(32)
kernel tri(X: tensor<f32>[M, 8], Y: tensor<f32>[M, 8]) {
  let b = ctx.block.x
  if b % 3 == 2 { return }                  // some CTAs leave at once
  var acc: tile<f32>[8, 8] = 0.0
  for i in range(0, b + 1) {                // a different trip count in every CTA
    acc += X[i * 8 :+ 8, :]
    if i == 4 { break }                     // a break taken by the whole CTA
  }
  if b % 2 == 0 { acc = acc * 2.0 } else { acc = acc - 1.0 }
  Y[b * 8 :+ 8, :] = acc
}
"""


@pytest.mark.parametrize("batch", [1, 3, None])
def test_ctas_taking_different_uniform_paths_in_one_batch(monkeypatch, batch):
    from tilenb.runtime.cpu import executor as cpu
    if batch is not None:
        monkeypatch.setattr(cpu, "MAX_BATCH", batch)
    k = kernel(DIVERGENT_CTAS)
    G = 12
    X = rnd(23, 8 * G, 8)
    Y = np.full((8 * G, 8), 5.0, f32)
    k[G](X, Y)
    ref = np.full((8 * G, 8), 5.0, f32)
    for b in range(G):
        if b % 3 == 2:
            continue
        acc = np.zeros((8, 8), f32)
        for i in range(min(b, 4) + 1):
            acc = acc + X[i * 8:(i + 1) * 8]
        ref[b * 8:(b + 1) * 8] = acc * 2 if b % 2 == 0 else acc - 1
    np.testing.assert_array_equal(Y, ref)
    assert k.last_run.extra["batch"] == (batch or G)
