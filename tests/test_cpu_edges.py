"""Edges of the reference executor and of the launch checks: valid programs that once reached an
"internal error in the CPU executor", flat() of a partly valid tile on both backends, and launch
arguments the spec does not allow. Every expected value is computed here with numpy.
"""
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tilenb
from tilenb import LaunchError, TileError

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cuda_emulator as EMU  # noqa: E402

needs_gxx = pytest.mark.skipif(not EMU.available(), reason="g++ (C++20) is needed to emulate CUDA on the CPU")


def compile_cpu(src, **kw):
    return tilenb.compile(textwrap.dedent(src).lstrip("\n"), backend="cpu", filename="k.tile", **kw)


def f32(*shape, seed=0, lo=-1.0, hi=1.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32)


def masked_store(dst, start, value):
    """numpy's view of a 1-D slice store dst[start :+ len(value)] = value: the part inside dst."""
    out = dst.copy()
    for k, v in enumerate(value):
        if 0 <= start + k < len(dst):
            out[start + k] = v
    return out


# ---- windows with negative and runtime starts, broadcasts --------------------------------------
BROADCAST = """
@launch(32)
kernel bc(Z: tensor<f32>[N], X: tensor<f32>[1], s: i32) {
  var x = X[0 :+ 1]
  Z[s :+ 16] = x
}
"""


@pytest.mark.parametrize("s", [-1, -15, -16, 0, 3, 7, 30])
def test_broadcast_store_with_a_negative_or_runtime_start(s):
    mod = compile_cpu(BROADCAST)
    Z = f32(20, seed=1)
    X = np.array([2.5], np.float32)
    want = masked_store(Z, s, np.full(16, 2.5, np.float32))
    mod.bc[1](Z, X, s)
    np.testing.assert_array_equal(Z, want)


ROWBC = """
@launch(64)
kernel rowbc(Y: tensor<f32>[M, N], X: tensor<f32>[M, 1], r: i32, c: i32) {
  var x = X[r :+ 4, 0 :+ 1]
  Y[r :+ 4, c :+ 24] = x * 2.0
}
"""


@pytest.mark.parametrize("r,c", [(0, -1), (-2, -5), (3, -23), (1, 10), (-4, 0)])
def test_column_broadcast_store_past_both_edges(r, c):
    mod = compile_cpu(ROWBC)
    M, N = 5, 20
    Y = f32(M, N, seed=2)
    X = f32(M, 1, seed=3)
    want = Y.copy()
    for i in range(4):
        for j in range(24):
            if 0 <= r + i < M and 0 <= c + j < N:
                want[r + i, c + j] = X[r + i, 0] * 2.0
    mod.rowbc[1](Y, X, r, c)
    np.testing.assert_array_equal(Y, want)


# ---- tensors with a zero extent --------------------------------------------------------------------
ZERO = """
@launch(32)
kernel z(X: tensor<f32>[M, N], Y: tensor<f32>[4, 8], C: tensor<f32>[1, 8], E: tensor<f32>[M, N]) {
  Y[0 :+ 4, :] = X[0 :+ 4, 0 :+ 8] * 2.0 + 1.0
  Y[0 :+ 4, 0 :+ 1] = rowmax(X[0 :+ 4, 0 :+ 8])
  C[0 :+ 1, :] = colmax(X[0 :+ 4, 0 :+ 8])
  E[0 :+ 4, 0 :+ 8] = X[1 :+ 4, 0 :+ 8]
  if ctx.thread < 3 {
    Y[3, ctx.thread] = X[ctx.thread, 0] + 5.0
    E[ctx.thread, 1] = 9.0
  }
}
"""


@pytest.mark.parametrize("M,N", [(0, 64), (5, 0), (0, 4), (0, 0)])
def test_tensors_with_a_zero_extent_are_wholly_outside(M, N):
    """A runtime dimension may be 0: every slice of that tensor is then outside it (reads 0,
    invalid; nothing stored), and a column reduction over no valid row is its identity."""
    mod = compile_cpu(ZERO)
    X = f32(M, N, seed=8)
    E = f32(M, N, seed=9)
    Y = f32(4, 8, seed=4)
    C = f32(1, 8, seed=5)
    E0 = E.copy()
    m, n = min(M, 4), min(N, 8)              # the valid rows and columns of X[0 :+ 4, 0 :+ 8]
    want_y = Y.copy()
    want_y[:m, :n] = X[:m, :n] * 2.0 + 1.0
    # rowmax over no valid column is -inf; over no valid row nothing is stored
    want_y[:m, 0] = X[:m, :n].max(axis=1) if n else -np.inf
    want_y[3, :3] = [(X[t, 0] if t < M and N else 0.0) + 5.0 for t in range(3)]
    want_c = C.copy()
    want_c[0, :n] = X[:m, :n].max(axis=0) if m else -np.inf
    want_e = E0.copy()
    want_e[:4, :8] = X[1:5, :8][:want_e[:4, :8].shape[0]]
    for t in range(3):
        if t < M and 1 < N:
            want_e[t, 1] = 9.0
    mod.z[1](X, Y, C, E)
    np.testing.assert_array_equal(Y, want_y)
    np.testing.assert_array_equal(C, want_c)
    np.testing.assert_array_equal(E, want_e)
    assert E.shape == (M, N)


# ---- dot of operands whose data the CTAs share but whose regions they do not ------------------------
DOT = """
@launch(64)
kernel d(X: tensor<f32>[M, 8], W: tensor<f32>[K, 4], Y: tensor<f32>[G, 4], s: i32) {
  let r = ctx.block.x * 4
  Y[r :+ 4, :] = dot(f16(X[0 :+ 4, :]), f16(W[s :+ 8, :]))
}
"""


@pytest.mark.parametrize("s", [0, 3, -2])
def test_dot_of_operands_every_cta_shares(s):
    """Both operands' windows are the same in every CTA (their data is held once), while the
    executor keeps a region per CTA."""
    mod = compile_cpu(DOT)
    X = f32(3, 8, seed=6)               # 3 of the 4 rows valid: the region has one entry per CTA
    W = f32(9, 4, seed=7)
    Y = np.full((12, 4), 7.0, np.float32)
    want = Y.copy()
    xh = X.astype(np.float16).astype(np.float32)
    w = np.zeros((8, 4), np.float32)
    for k in range(8):
        if 0 <= s + k < 9:
            w[k] = W[s + k].astype(np.float16).astype(np.float32)     # rows outside W read as 0
    for b in range(3):
        want[4 * b:4 * b + 3] = xh @ w    # row 3 of each block is invalid in X: not stored
    mod.d[3](X, W, Y, s)
    np.testing.assert_allclose(Y, want, rtol=1e-5, atol=1e-5)


# ---- flat(t) of a partly valid tile (spec section 6) ------------------------------------------------
FLAT = """
@launch(64)
kernel fl(X: tensor<f32>[M, N], Y: tensor<f32>[1, 4], Z: tensor<f32>[3, 40], r: i32, c: i32) {
  var t = X[r :+ 5, c :+ 8]
  Y[0 :+ 1, 0 :+ 1] = rowmax(flat(t))
  Y[0 :+ 1, 1 :+ 1] = rowmin(flat(t))
  Y[0 :+ 1, 2 :+ 1] = rowsum(flat(t)[0 :+ 1, 3 :+ 30])
  Z[0 :+ 1, :] = flat(t)[0 :+ 1, 0 :+ 40]
  var u = X[r :+ 5, c :+ 8] * 2.0 + 1.0       // its invalid elements hold 1.0: never seen
  let v = flat(u)[0 :+ 1, 8 :+ 32]
  Z[1 :+ 1, 0 :+ 32] = v
  var h: tile<f32>[5, 8] = 0.0                // the way to see every element: a filled tile
  h[0 :+ 5, :] = X[r :+ 5, c :+ 8]
  Y[0 :+ 1, 3 :+ 1] = rowmax(flat(h))
  Z[2 :+ 1, :] = flat(h)
}
"""

# (M, N, r, c): wholly valid; cut at the bottom (whole rows); cut at the right (part of each
# row: the run stops at the end of the first row's valid part); one row; the run starting
# mid-tile; nothing valid
FLAT_CASES = [(7, 12, 0, 0), (3, 8, 0, 0), (6, 4, 0, 0), (7, 12, 6, 0), (2, 8, -1, -3),
              (9, 12, 0, 7), (0, 8, 0, 0), (4, 8, 6, 0)]


def flat_reference(X, r, c, Y, Z):
    """numpy: t = X[r :+ 5, c :+ 8] with its valid mask; flat(t) is valid on the run of the
    flattened mask that starts at its first True and stops at the next False."""
    M, N = X.shape
    t = np.zeros((5, 8), np.float32)
    valid = np.zeros((5, 8), bool)
    for i in range(5):
        for j in range(8):
            if 0 <= r + i < M and 0 <= c + j < N:
                t[i, j], valid[i, j] = X[r + i, c + j], True
    m = valid.ravel()
    run = np.zeros(40, bool)
    if m.any():
        a = int(np.argmax(m))
        b = a
        while b < 40 and m[b]:
            b += 1
        run[a:b] = True
    ft = t.ravel()
    Y, Z = Y.copy(), Z.copy()
    Y[0, 0] = ft[run].max() if run.any() else -np.inf
    Y[0, 1] = ft[run].min() if run.any() else np.inf
    Y[0, 2] = ft[3:33][run[3:33]].sum(dtype=np.float64)
    Z[0, run] = ft[run]
    u = ft * 2.0 + 1.0
    Z[1, :32][run[8:40]] = u[8:40][run[8:40]]
    Y[0, 3] = ft.max()                   # h is wholly valid: its zeros count
    Z[2, :] = ft
    return Y, Z


def flat_args(M, N, r, c):
    X = f32(M, N, seed=M * 100 + N, lo=-3.0, hi=-1.0)      # all negative: an invalid 0 would show
    return X, np.full((1, 4), 7.0, np.float32), np.full((3, 40), 7.0, np.float32), r, c


@pytest.mark.parametrize("M,N,r,c", FLAT_CASES)
def test_flat_of_a_partly_valid_tile_is_valid_on_its_run(M, N, r, c):
    mod = compile_cpu(FLAT)
    X, Y, Z, r, c = flat_args(M, N, r, c)
    want_y, want_z = flat_reference(X, r, c, Y, Z)
    mod.fl[1](X, Y, Z, r, c)
    np.testing.assert_allclose(Y, want_y, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(Z, want_z)


@needs_gxx
def test_flat_on_the_generated_cuda_agrees_with_the_cpu_executor(tmp_path):
    """The CUDA generator's flat(t) region (codegen/cuda.py flat_run), run by the CPU emulator
    of the generated code, against the reference executor on the same cases."""
    from tilenb.codegen import generate
    text = textwrap.dedent(FLAT).lstrip("\n")
    mod = compile_cpu(FLAT)
    ks = generate(mod.fl.ir(), text)
    for M, N, r, c in FLAT_CASES:
        X, Y, Z, r, c = flat_args(M, N, r, c)
        Yg, Zg = Y.copy(), Z.copy()
        mod.fl[1](X, Y, Z, r, c)
        EMU.run(ks, [X, Yg, Zg, r, c], {"M": M, "N": N}, (1, 1, 1), workdir=tmp_path)
        np.testing.assert_allclose(Yg, Y, rtol=1e-5, atol=1e-5, err_msg=str((M, N, r, c)))
        np.testing.assert_array_equal(Zg, Z, err_msg=str((M, N, r, c)))
