"""Edges of the reference executor and of the launch checks: valid programs that once reached an
"internal error in the CPU executor", flat() of a partly valid tile on both backends, and launch
arguments the spec does not allow. Every expected value is computed here with numpy.
"""
import sys
import textwrap

import numpy as np
import pytest

import tilenb
from tilenb import LaunchError, TileError

from support import cuda_emulator as EMU
from support.cuda_emulator import needs_gxx
from support.windows import first_run, store, window


def compile_cpu(src, **kw):
    return tilenb.compile(textwrap.dedent(src).lstrip("\n"), backend="cpu", filename="k.tile", **kw)


def f32(*shape, seed=0, lo=-1.0, hi=1.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32)


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
    want = store(Z, (s,), np.full(16, 2.5, np.float32))
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
    t, valid = window(X, (r, c), (5, 8))
    run = first_run(valid)
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
    """The CUDA generator's flat(t) region (codegen/generic, flat_run), run by the CPU emulator
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


# ---- launch checks: scalars ------------------------------------------------------------------------
SCALARS = """
@launch(32)
kernel sc(Y: tensor<f32>[4], a: f32, h: f16, b: bf16, n: i32, w: u8, q: i64) {
  if ctx.thread == 0 {
    Y[0] = a
    Y[1] = f32(h) + f32(b)
    Y[2] = f32(n) + f32(i32(w))
    Y[3] = f32(q)
  }
}
"""


def _sc(mod, **kw):
    vals = dict(a=1.0, h=1.0, b=1.0, n=1, w=1, q=1)
    vals.update(kw)
    Y = np.zeros(4, np.float32)
    mod.sc[1](Y, *vals.values())
    return Y


def test_numpy_and_ml_dtypes_scalars_that_convert_exactly_are_accepted():
    import ml_dtypes
    mod = compile_cpu(SCALARS)
    bf = ml_dtypes.bfloat16
    Y = _sc(mod, b=bf(1.5), h=np.float16(0.25))
    np.testing.assert_array_equal(Y, [1.0, 1.75, 2.0, 1.0])
    Y = _sc(mod, a=np.array(bf(2.5)), b=ml_dtypes.float8_e4m3fn(0.5))      # a 0-d array, a float8 scalar
    assert Y[0] == 2.5 and Y[1] == 1.5
    for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64):
        Y = _sc(mod, a=t(3), n=t(5), w=t(7), q=t(9))
        np.testing.assert_array_equal(Y, [3.0, 2.0, 12.0, 9.0], err_msg=t.__name__)
    for t in (np.float16, np.float32, np.float64, bf, ml_dtypes.int4):
        Y = _sc(mod, n=t(-6), q=t(4))                                         # integral floats for ints
        assert Y[2] == -5.0 and Y[3] == 4.0, t
    Y = _sc(mod, a=float("inf"), h=-np.inf, b=np.float32("nan"))            # non-finite floats stay so
    assert Y[0] == np.inf and np.isnan(Y[1])


@pytest.mark.parametrize("kw,phrase", [
    (dict(n=np.timedelta64(3)), "argument 'n' (i32) must be a number, not timedelta64"),
    (dict(a=np.datetime64("2020-01-01")), "argument 'a' (f32) must be a number, not datetime64"),
    (dict(a=np.complex64(1)), "argument 'a' (f32) must be a number, not complex64"),
    (dict(a=np.str_("1")), "argument 'a' (f32) must be a number, not str_"),
    (dict(n=True), "argument 'n' (i32) must be a number, not bool"),
    (dict(n=np.bool_(False)), "argument 'n' (i32) must be a number, not bool"),
    (dict(n=float("nan")), "argument 'n' (i32) must be an integer, not nan"),
    (dict(q=np.float64("inf")), "argument 'q' (i64) must be an integer, not np.float64(inf)"),
    (dict(n=np.float32(2.5)), "argument 'n' (i32) must be an integer"),
    (dict(n=2 ** 31), "argument 'n' = 2147483648 does not fit in i32"),
    (dict(w=np.int64(256)), "argument 'w' = 256 does not fit in u8"),
    (dict(w=-1), "argument 'w' = -1 does not fit in u8"),
    (dict(q=np.uint64(2 ** 63)), "argument 'q' = 9223372036854775808 does not fit in i64"),
    (dict(h=70000.0), "argument 'h' = 70000.0 is beyond the range of f16"),
    (dict(a=1e39), "argument 'a' = 1e+39 is beyond the range of f32"),
    (dict(b=np.float64(1e39)), "argument 'b' = 1e+39 is beyond the range of bf16"),
    (dict(a=np.array([1.0])), "argument 'a' (f32) must be a number, not ndarray"),
])
def test_scalars_the_spec_does_not_allow_are_refused(kw, phrase):
    mod = compile_cpu(SCALARS)
    with pytest.raises(LaunchError) as info:
        _sc(mod, **kw)
    assert phrase in str(info.value)


# ---- launch checks: grid and debug -----------------------------------------------------------------
GRIDS = """
@launch(32)
@grid(cdiv(N, 64), M / 8 + n)
kernel g(X: tensor<f32>[M, N], n: i32) {
  if ctx.thread == 0 { X[ctx.block.y, ctx.block.x] = 1.0 }
}

@launch(32)
@grid(N * 1048576)
kernel big(X: tensor<f32>[N]) {
  X[0] = 1.0
}
"""


@pytest.mark.parametrize("grid,phrase", [
    ([2], "the grid must be an int or a tuple of 1 to 3 ints, not list [2]; write the tuple (2,)"),
    ([1, 2, 1], "not list [1, 2, 1]; write the tuple (1, 2, 1)"),
    ((1, 1, 1, 1), "the grid must be an int or a tuple of 1 to 3 ints, not tuple (1, 1, 1, 1)"),
    ((), "the grid must be an int or a tuple of 1 to 3 ints, not tuple ()"),
    (np.array([2]), "the grid must be an int or a tuple of 1 to 3 ints, not ndarray"),
    (True, "the grid must be an int or a tuple of 1 to 3 ints, not bool True"),
    (0, "grid dimension x is 0; it must be at least 1"),
    ((2, -1), "grid dimension y is -1; it must be at least 1"),
    ((2, 1.0), "grid dimension y must be an int, not 1.0"),
    ((2, np.bool_(True)), "grid dimension y must be an int"),
    (2 ** 31, "grid dimension x is 2147483648; CUDA allows at most 2147483647"),
    ((1, 65536), "grid dimension y is 65536; CUDA allows at most 65535"),
])
def test_grids_the_spec_does_not_allow_are_refused(grid, phrase):
    mod = compile_cpu(GRIDS)
    X = np.zeros((8, 64), np.float32)
    with pytest.raises(LaunchError) as info:
        mod.g[grid](X, 0)
    assert phrase in str(info.value)
    assert not X.any()
    mod.g[np.int64(1), np.int32(2)](X, 0)         # numpy integers are ints
    assert X[:2, 0].tolist() == [1.0, 1.0]


def test_a_grid_attribute_of_zero_names_its_entry_and_the_dimension_or_argument():
    mod = compile_cpu(GRIDS)
    with pytest.raises(LaunchError) as info:
        mod.g(np.zeros((4, 64), np.float32), 0)       # M / 8 + n = 0
    msg = str(info.value)
    assert "its @grid gives 0 CTAs along y" in msg
    assert "the entry 'M / 8 + n' must be at least 1" in msg
    assert "M = 4, dimension 0 of 'X'" in msg and "argument n = 0" in msg
    with pytest.raises(LaunchError, match=r"0 CTAs along x \(with N = 0, dimension 1 of 'X'\): the entry "
                                          r"'cdiv\(N, 64\)'"):
        mod.g(np.zeros((16, 0), np.float32), 1)
    with pytest.raises(LaunchError, match=r"grid dimension x is 2147483648 \(its @grid entry 'N \* 1048576', "
                                          r"with N = 2048, dimension 0 of 'X'\); CUDA allows at most"):
        mod.big(np.zeros(2048, np.float32))
    X = np.zeros((9, 130), np.float32)[:, :128].copy()
    mod.g(X, 1)                                     # 2 x 2 CTAs
    assert X[:2, :2].tolist() == [[1.0, 1.0], [1.0, 1.0]] and X.sum() == 4


@pytest.mark.parametrize("debug", ["yes", 1, 0.0, "False"])
def test_debug_must_be_a_bool(debug):
    mod = compile_cpu(GRIDS)
    X = np.zeros((8, 64), np.float32)
    with pytest.raises(LaunchError, match="debug must be True or False, not"):
        mod.g[1](X, 0, debug=debug)
    assert not X.any()
    with pytest.raises(TileError, match="debug must be True or False, not"):
        compile_cpu(GRIDS, debug=debug)
    mod.g[1](X, 0, debug=np.bool_(True))
    assert X[0, 0] == 1.0


def test_tensor_arguments_in_another_byte_order_or_broadcast_are_refused():
    mod = compile_cpu(GRIDS)
    with pytest.raises(LaunchError, match=r"argument 'X' \(tensor<f32>\[M, N\]\) has dtype float32 in non-native byte order"):
        mod.g[1](np.zeros((8, 64), np.float32).astype(">f4" if sys.byteorder == "little" else "<f4"), 0)
    with pytest.raises(LaunchError, match=r"argument 'X' \(tensor<f32>\[M, N\]\) is not C-contiguous"):
        mod.g[1](np.broadcast_to(np.zeros(64, np.float32), (8, 64)), 0)
    with pytest.raises(LaunchError, match=r"argument 'X' \(tensor<f32>\[M, N\]\) has 0 dimension"):
        mod.g[1](np.zeros((), np.float32), 0)


# ---- debug=True on the CUDA backend: the reference executor checks the same launch ------------------
RACY = """
@launch(64)
kernel race(X: tensor<f32>[64], Y: tensor<f32>[64]) {
  var t: tile<f32>[1, 64] = 0.0
  t[0, ctx.thread] = X[ctx.thread]
  Y[ctx.thread] = t[0, 63 - ctx.thread]
}

@launch(64)
kernel oob(X: tensor<f32>[64], Y: tensor<f32>[64]) {
  Y[ctx.thread + 1] = X[ctx.thread]
}

@launch(64)
kernel clean(X: tensor<f32>[64], Y: tensor<f32>[64]) {
  Y[ctx.thread] = X[ctx.thread] * 2.0
}
"""


@pytest.fixture
def fake_gpu(monkeypatch, tmp_path):
    """tests/support/fake_cupy.py in place of CuPy and the GPU; a launch writes 42.0 into every written
    tensor (that is "the GPU's result")."""
    import ctypes

    from support import fake_cupy

    def run(name, grid, block, args, shared):
        ptr = int(args[1])                          # Y, the tensor these kernels write
        ctypes.memmove(ptr, np.full(64, 42.0, np.float32).ctypes.data, 64 * 4)
    with fake_cupy.installed(monkeypatch, tmp_path) as cp:
        cp.run = run
        yield cp


def _cuda_kernel(name, debug=False):
    mod = tilenb.compile(textwrap.dedent(RACY).lstrip("\n"), backend="cuda", filename="k.tile", debug=debug)
    return getattr(mod, name)


@pytest.mark.parametrize("name,error,phrase", [
    ("race", "RaceError", "data race on tile 't'"),
    ("oob", "OutOfBoundsError", "out-of-bounds write at line 10: thread 63"),
])
def test_debug_on_the_cuda_backend_reports_what_the_reference_check_finds(fake_gpu, name, error, phrase):
    from tilenb.lang import diagnostics as D
    X, Y = f32(64, seed=10), np.zeros(64, np.float32)
    with pytest.raises(getattr(D, error)) as info:
        _cuda_kernel(name)[1](X, Y, debug=True)
    msg = str(info.value)
    assert phrase in msg and "debug=True on the CUDA backend: found by the reference executor" in msg
    assert "the outputs hold the GPU's results" in msg and msg.startswith("k.tile:")
    assert len(fake_gpu.launches) == 1 and (Y == 42.0).all()      # the GPU ran; its results are kept
    with pytest.raises(getattr(D, error)):                          # debug=True given to compile
        _cuda_kernel(name, debug=True)[1](X, np.zeros(64, np.float32))
    Y = np.zeros(64, np.float32)
    _cuda_kernel(name)[1](X, Y)                                      # without debug: nothing checks it
    assert (Y == 42.0).all()


def test_debug_on_the_cuda_backend_says_when_the_check_found_nothing(fake_gpu):
    k = _cuda_kernel("clean")
    X, Y = f32(64, seed=11), np.zeros(64, np.float32)
    k[1](X, Y, debug=True)
    assert (Y == 42.0).all()                 # the GPU's results, not the reference executor's 2 X
    run = k.last_run
    assert run.backend == "cuda" and run.debug
    assert "the reference executor ran this launch on copies of the arguments and found no" in run.note
    k[1](X, Y, debug=True)                   # a debug launch is never a cached repeat: checked again
    assert "found no" in k.last_run.note and len(fake_gpu.launches) == 2


def test_debug_on_the_cuda_backend_checks_even_when_the_gpu_launch_fails(fake_gpu, monkeypatch):
    from tilenb.lang.diagnostics import RaceError
    cp = fake_gpu
    Device = cp.cuda.Device

    class Failing(Device):
        def synchronize(self):
            raise cp.cuda.runtime.CUDARuntimeError("cudaErrorIllegalAddress")
    monkeypatch.setattr(cp.cuda, "Device", Failing)
    X = f32(64, seed=12)
    with pytest.raises(RaceError) as info:
        _cuda_kernel("race")[1](X, np.zeros(64, np.float32), debug=True)
    assert "the GPU launch failed" in str(info.value) and "cudaErrorIllegalAddress" in str(info.value)
    assert isinstance(info.value.__cause__, LaunchError)
    with pytest.raises(LaunchError, match="failed on the GPU: cudaErrorIllegalAddress"):
        _cuda_kernel("clean")[1](X, np.zeros(64, np.float32), debug=True)


def test_debug_on_the_cuda_backend_is_bounded_by_cpu_limit(fake_gpu):
    k = _cuda_kernel("clean")
    X, Y = f32(64, seed=13), np.zeros(64, np.float32)
    with pytest.raises(LaunchError, match=r"more than the CPU backend runs in one launch \(100\) \(debug=True "
                                          r"checks a CUDA launch on the reference executor\)"):
        k[2](X, Y, debug=True, cpu_limit=100)
    assert not fake_gpu.launches and not Y.any()
    k[2](X, Y, cpu_limit=100)                # the limit is the check's: without debug it does not apply
    assert (Y == 42.0).all()


def test_finite_floats_of_every_kind_beyond_a_float_parameter_are_refused():
    from decimal import Decimal
    from fractions import Fraction
    mod = compile_cpu(SCALARS)
    for big in (np.longdouble(10) ** 400 if np.finfo(np.longdouble).max > 1e400 else 1e300, Decimal("1e400"),
                Fraction(10 ** 400), 10 ** 400):
        with pytest.raises(LaunchError, match="argument 'a'"):
            _sc(mod, a=big)
    Y = _sc(mod, a=Fraction(3, 4), h=Decimal("0.5"))      # real numbers that fit: rounded, accepted
    assert Y[0] == 0.75 and Y[1] == 1.5


FLAT2 = """
@launch(128)
kernel fl2(A: tensor<i32>[M, N], O: tensor<i32>[G, 2], F: tensor<i32>[G, 48]) {
  let b = ctx.block.x
  var t = A[b * 3 - 2 :+ 6, b - 1 :+ 8]        // per CTA: cut at the top, the left or the right
  t[0 :+ 1, 2 :+ 4] = 5                        // a window store keeps t's region
  let l = t * 3 - 1                            // a let tile: its own bytes, t's region
  O[b :+ 1, 0 :+ 1] = rowmax(flat(l))
  O[b :+ 1, 1 :+ 1] = rowsum(flat(t)[0 :+ 1, 5 :+ 40])
  F[b :+ 1, :] = flat(t)[0 :+ 1, 0 :+ 48]
}
"""


def flat2_reference(A, G):
    O = np.full((G, 2), -7, np.int32)
    F = np.full((G, 48), -7, np.int32)
    for b in range(G):
        r, c = b * 3 - 2, b - 1
        t, valid = window(A.astype(np.int64), (r, c), (6, 8))
        t[0, 2:6] = 5
        run = first_run(valid)
        ft = t.ravel()
        lv = ft * 3 - 1
        O[b, 0] = lv[run].max() if run.any() else np.iinfo(np.int32).min
        O[b, 1] = ft[5:45][run[5:45]].sum()
        F[b, run] = ft[run]
    return O, F


@pytest.mark.parametrize("M,N", [(9, 8), (13, 12), (4, 4), (20, 16)])
def test_flat_of_int_tiles_with_a_region_per_cta(M, N, tmp_path):
    G = 4
    mod = compile_cpu(FLAT2)
    A = np.random.default_rng(M).integers(-1000, -1, (M, N)).astype(np.int32)
    O = np.full((G, 2), -7, np.int32)
    F = np.full((G, 48), -7, np.int32)
    want_o, want_f = flat2_reference(A, G)
    mod.fl2[G](A, O, F)
    np.testing.assert_array_equal(O, want_o)
    np.testing.assert_array_equal(F, want_f)
    if EMU.available():                 # the generated CUDA, emulated on the CPU, agrees exactly
        from tilenb.codegen import generate
        ks = generate(mod.fl2.ir(), textwrap.dedent(FLAT2).lstrip("\n"))
        Og, Fg = np.full((G, 2), -7, np.int32), np.full((G, 48), -7, np.int32)
        EMU.run(ks, [A, Og, Fg], {"M": M, "N": N, "G": G}, (G, 1, 1), workdir=tmp_path)
        np.testing.assert_array_equal(Og, want_o)
        np.testing.assert_array_equal(Fg, want_f)


# ---- the same on a GPU (marker `gpu`: skipped without one) -------------------------------------------
def _cuda(src):
    return tilenb.compile(textwrap.dedent(src).lstrip("\n"), backend="cuda", filename="k.tile")


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,r,c", FLAT_CASES)
def test_flat_on_the_gpu_agrees_with_the_cpu_executor(M, N, r, c):
    X, Y, Z, r, c = flat_args(M, N, r, c)
    want_y, want_z = flat_reference(X, r, c, Y, Z)
    _cuda(FLAT).fl[1](X, Y, Z, r, c)
    np.testing.assert_allclose(Y, want_y, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(Z, want_z)


@pytest.mark.gpu
@pytest.mark.parametrize("M,N", [(9, 8), (13, 12), (4, 4), (20, 16)])
def test_flat_of_int_tiles_on_the_gpu(M, N):
    G = 4
    A = np.random.default_rng(M).integers(-1000, -1, (M, N)).astype(np.int32)
    O, F = np.full((G, 2), -7, np.int32), np.full((G, 48), -7, np.int32)
    want_o, want_f = flat2_reference(A, G)
    _cuda(FLAT2).fl2[G](A, O, F)
    np.testing.assert_array_equal(O, want_o)
    np.testing.assert_array_equal(F, want_f)


@pytest.mark.gpu
def test_negative_starts_and_shared_dot_operands_on_the_gpu():
    mod = _cuda(BROADCAST + ROWBC + DOT)
    for s in (-1, -15, 3):
        Z = f32(20, seed=1)
        want = store(Z, (s,), np.full(16, 2.5, np.float32))
        mod.bc[1](Z, np.array([2.5], np.float32), s)
        np.testing.assert_array_equal(Z, want)
    M, N = 5, 20
    for r, c in [(0, -1), (-2, -5), (3, -23)]:
        Y, X = f32(M, N, seed=2), f32(M, 1, seed=3)
        want = Y.copy()
        for i in range(4):
            for j in range(24):
                if 0 <= r + i < M and 0 <= c + j < N:
                    want[r + i, c + j] = X[r + i, 0] * 2.0
        mod.rowbc[1](Y, X, r, c)
        np.testing.assert_array_equal(Y, want)
    X, W = f32(3, 8, seed=6), f32(9, 4, seed=7)
    Yc, Yg = np.full((12, 4), 7.0, np.float32), np.full((12, 4), 7.0, np.float32)
    compile_cpu(DOT).d[3](X, W, Yc, 3)
    mod.d[3](X, W, Yg, 3)
    np.testing.assert_allclose(Yg, Yc, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_debug_on_a_gpu_reports_the_race_and_keeps_the_gpu_results():
    from tilenb.lang.diagnostics import RaceError
    import cupy as cp
    mod = _cuda(RACY)
    X = f32(64, seed=14)
    Y = cp.zeros(64, cp.float32)
    with pytest.raises(RaceError, match="found by the reference executor"):
        mod.race[1](cp.asarray(X), Y, debug=True)       # GPU arrays: the check copies them to the host
    Yh = np.zeros(64, np.float32)
    mod.clean[1](X, Yh, debug=True)
    np.testing.assert_array_equal(Yh, X * 2.0)
    assert mod.clean.last_run.debug and "found no shared-tile race" in mod.clean.last_run.note
