"""Property tests of the CPU executor over random shapes and tile sizes (hypothesis).

Kernels are generated from templates with random tile constants; inputs have random extents
(multiples of 4, as launches require, but rarely multiples of the tiles). Properties: every
element of the output is written exactly where the reference says and nowhere else, and the
values agree with numpy; `for<unroll n>` computes exactly what the plain loop does.
"""
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilenb

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
mult4 = st.integers(1, 24).map(lambda n: 4 * n)


def compile_one(src):
    return next(iter(tilenb.compile(src, backend="cpu").kernels.values()))


ELEMENTWISE_ROWSUM = """
@autotune(TR in [{tr}], TC in [{tc}])
@launch({threads})
@grid(cdiv(M, TR), cdiv(N, TC))
kernel k(X: tensor<f32>[M, N], Y: tensor<f32>[M, N], S: tensor<f32>[M, G]) {{
  let r = ctx.block.x * TR
  let c = ctx.block.y * TC
  var x = X[r :+ TR, c :+ TC]
  var y = x * 2.0 + 1.0
  Y[r :+ TR, c :+ TC] = y
  S[r :+ TR, ctx.block.y :+ 1] = rowsum(y)
}}
"""


@SETTINGS
@given(tr=st.integers(1, 12), tc=st.integers(1, 40), M=mult4, N=mult4,
       threads=st.sampled_from([32, 64, 256]), seed=st.integers(0, 2 ** 16))
def test_elementwise_and_rowsum_any_tiles(tr, tc, M, N, threads, seed):
    k = compile_one(ELEMENTWISE_ROWSUM.format(tr=tr, tc=tc, threads=threads))
    nblk = -(-N // tc)
    G = -(-nblk // 4) * 4
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((M, N)).astype(np.float32)
    Y = np.full((M, N), np.nan, np.float32)
    S = np.full((M, G), -99.0, np.float32)
    k(X, Y, S)
    y = X * np.float32(2) + np.float32(1)
    np.testing.assert_array_equal(Y, y)
    ref = np.stack([y[:, j * tc:(j + 1) * tc].astype(np.float64).sum(axis=1) for j in range(nblk)], axis=1)
    np.testing.assert_allclose(S[:, :nblk], ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(S[:, nblk:], -99.0)        # never written


GEMM = """
@autotune(TM in [{tm}], TN in [{tn}], TK in [{tk}])
@launch(64)
@grid(cdiv(M, TM), cdiv(N, TN))
kernel g(A: tensor<f32>[M, K], B: tensor<f32>[K, N], C: tensor<f32>[M, N]) {{
  var acc: tile<f32>[TM, TN] = 0.0
  for kt in range(0, K, TK) {{
    var a = A[ctx.block.x * TM :+ TM, kt :+ TK]
    var b = B[kt :+ TK, ctx.block.y * TN :+ TN]
    acc += dot(a, b)
  }}
  C[ctx.block.x * TM :+ TM, ctx.block.y * TN :+ TN] = acc
}}
"""


@SETTINGS
@given(tm=st.integers(1, 24), tn=st.integers(1, 24), tk=st.integers(1, 20), M=mult4, N=mult4, K=mult4,
       seed=st.integers(0, 2 ** 16))
def test_gemm_any_tiles(tm, tn, tk, M, N, K, seed):
    g = compile_one(GEMM.format(tm=tm, tn=tn, tk=tk))
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    C = np.full((M, N), np.nan, np.float32)
    g(A, B, C)
    np.testing.assert_allclose(C, A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)


WINDOW = """
@autotune(T in [{t}])
@launch(32)
kernel w(X: tensor<f32>[N], Y: tensor<f32>[T], off: i32) {{
  var t: tile<f32>[T] = -1.0
  t[0 :+ T] = X[off :+ T]       // only the part inside X is written; the rest stays -1
  Y[0 :+ T] = t
}}
"""


@SETTINGS
@given(t=st.integers(1, 40), N=mult4, off=st.integers(-50, 100))
def test_slices_past_either_end_are_masked(t, N, off):
    w = compile_one(WINDOW.format(t=t))
    X = np.arange(N, dtype=np.float32)
    Y = np.zeros(t, np.float32)
    w[1](X, Y, off)
    idx = off + np.arange(t)
    np.testing.assert_array_equal(Y, np.where((idx >= 0) & (idx < N), idx, -1.0))


UNROLL = """
@launch(64)
kernel u(X: tensor<f32>[1, N], O: tensor<f32>[2, 64]) {{
  var a: f32 = 0.0
  for<unroll {n}> i in range(ctx.thread + {lo}, N, {step}) {{
    if X[0, i] < -1.0 {{ continue }}
    if X[0, i] > 2.0 {{ break }}
    a += X[0, i] * f32(i)
  }}
  var b: f32 = 0.0
  for i in range(ctx.thread + {lo}, N, {step}) {{
    if X[0, i] < -1.0 {{ continue }}
    if X[0, i] > 2.0 {{ break }}
    b += X[0, i] * f32(i)
  }}
  O[0, ctx.thread] = a
  O[1, ctx.thread] = b
}}
"""


@SETTINGS
@given(n=st.integers(1, 6), lo=st.integers(0, 5), step=st.integers(1, 70), N=mult4, seed=st.integers(0, 2 ** 16))
def test_unrolled_loop_equals_plain_loop(n, lo, step, N, seed):
    u = compile_one(UNROLL.format(n=n, lo=lo, step=step))
    X = np.random.default_rng(seed).standard_normal((1, N)).astype(np.float32)
    O = np.zeros((2, 64), np.float32)
    u[1](X, O)
    np.testing.assert_array_equal(O[0], O[1])
    ref = []
    for t in range(64):
        acc = np.float32(0)
        for i in range(t + lo, N, step):
            if X[0, i] < -1:
                continue
            if X[0, i] > 2:
                break
            acc = np.float32(acc + X[0, i] * np.float32(i))
        ref.append(acc)
    np.testing.assert_array_equal(O[0], np.array(ref, np.float32))


COPY2D = """
@autotune(TR in [{tr}], TC in [{tc}])
@launch(32)
kernel c(X: tensor<f32>[M, N], Y: tensor<f32>[M, N], r0: i32, c0: i32, cstep: i32) {{
  let r = r0 + i32(ctx.block.x) * TR
  let col = c0 + i32(ctx.block.x) * cstep
  var x = X[r :+ TR, col :+ TC]
  Y[r :+ TR, col :+ TC] = x + 1.0
}}
"""


@SETTINGS
@given(tr=st.integers(1, 9), tc=st.integers(1, 40), M=mult4, N=mult4, r0=st.integers(-12, 12),
       c0=st.integers(-45, 45), cstep=st.sampled_from([0, 0, 3, -5]), grid=st.integers(1, 6))
def test_two_dimensional_windows_past_any_edge(tr, tc, M, N, r0, c0, cstep, grid):
    c = compile_one(COPY2D.format(tr=tr, tc=tc))
    X = np.arange(M * N, dtype=np.float32).reshape(M, N)
    Y = np.full((M, N), -1.0, np.float32)
    c[grid](X, Y, r0, c0, cstep)
    ref = np.full((M, N), -1.0, np.float32)
    for b in range(grid):               # windows never overlap along rows (starts TR apart)
        rows = np.arange(r0 + b * tr, r0 + b * tr + tr)
        cols = np.arange(c0 + b * cstep, c0 + b * cstep + tc)
        rows = rows[(rows >= 0) & (rows < M)]
        cols = cols[(cols >= 0) & (cols < N)]
        ref[np.ix_(rows, cols)] = X[np.ix_(rows, cols)] + 1
    np.testing.assert_array_equal(Y, ref)
