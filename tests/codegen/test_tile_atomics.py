"""Tile atomics: `atomic_add` / `atomic_max` of a tile into a tensor slice (spec section 9).

What is checked, at shapes that are not multiples of the tiles:
- the CPU executor against numpy references written from the spec (each element of the slice
  that lies inside the tensor and is valid in the value gets one update per CTA, in CTA order;
  nothing else changes), for every element type the element form allows, with windows that run
  past both ends of the tensor and values invalid at the edges;
- reductions across CTAs in one statement (the newcomer's column sum over 5000 rows, a sum and
  a maximum into [1] slices, a split-K GEMM whose accumulator stays in registers);
- the checker's errors (varying control, shapes, targets, types);
- the analysis: a tile plan whose destination is a global "write" marked atomic, and barriers
  against per-thread writes of the tile it reads;
- the generated CUDA: NVRTC compiles it for sm_80 and sm_90, and run by the CPU emulator of the
  generated code (tests/support/cuda_emulator.py; the sm_90 wgmma path through test_gemm_sm90_edges'
  emulator) it gives the CPU executor's result;
- on a GPU (marked `gpu`), the same kernels against numpy.
"""
from __future__ import annotations

import dataclasses
import textwrap

import ml_dtypes
import numpy as np
import pytest

import tilenb
from tilenb import TileError
from tilenb.codegen import generate
from tilenb.codegen.nvrtc import nvrtc_available, nvrtc_compile
from tilenb.lang.diagnostics import TileRuleError, TileShapeError, TileTypeError

from support import cuda_emulator as EMU
from support.cuda_emulator import needs_gxx

needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="libnvrtc cannot be loaded")

NP = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64,
      "i32": np.int32, "i64": np.int64, "u32": np.uint32}
ADD_DTYPES = ("f16", "bf16", "f32", "f64", "i32", "i64", "u32")
MAX_DTYPES = ("f32", "f64", "i32", "i64", "u32")


def compile_cpu(src):
    return tilenb.compile(textwrap.dedent(src).lstrip("\n"), backend="cpu")


# ---- overlapping windows: every dtype, both ends of the tensor ---------------------------------------
# CTA (bx, by) adds X's window shifted one column right into Out's window: rows 4 bx - 2 .. +8 (each
# row is covered by two CTAs), columns 16 by - 3 .. +16; elements outside Out, or whose X element is
# outside X, are left alone.
WINDOWS = """
@launch(64)
@grid(cdiv(M + 2, 4), cdiv(N + 3, 16))
kernel win(X: tensor<DT>[M, N], Out: tensor<DT>[M, N]) {
  let r = ctx.block.x * 4 - 2
  let c = ctx.block.y * 16 - 3
  atomic_OP(Out[r :+ 8, c :+ 16], X[r :+ 8, c + 1 :+ 16])
}
"""
WINDOW_SHAPES = ((13, 36), (1, 4), (7, 68))


def _windows_src(op, dt):
    return WINDOWS.replace("DT", dt).replace("OP", op)


def _windows_reference(op, X, Out0):
    """The spec's rule, element by element, CTA after CTA (x fastest)."""
    M, N = X.shape
    out = Out0.copy()
    gx, gy = -(-(M + 2) // 4), -(-(N + 3) // 16)
    with np.errstate(over="ignore"):
        for by in range(gy):
            for bx in range(gx):
                r, c = bx * 4 - 2, by * 16 - 3
                for i in range(r, r + 8):
                    for j in range(c, c + 16):
                        if 0 <= i < M and 0 <= j < N and 0 <= j + 1 < N:
                            if op == "add":
                                out[i, j] = out[i, j] + X[i, j + 1]
                            else:
                                out[i, j] = max(out[i, j], X[i, j + 1])
    return out


def _windows_args(op, dt, M, N, seed):
    rng = np.random.default_rng(seed)
    t = NP[dt]
    if dt in ("f16", "bf16"):
        X = rng.integers(-3, 4, (M, N)).astype(t)          # small integers: every sum is exact
        Out = rng.integers(-3, 4, (M, N)).astype(t)
    elif dt in ("f32", "f64"):
        X = rng.standard_normal((M, N)).astype(t)
        Out = rng.standard_normal((M, N)).astype(t)
    else:
        info = np.iinfo(t)
        lo = max(int(info.min), -(1 << 62))
        hi = min(int(info.max), 1 << 62)
        X = rng.integers(lo, hi, (M, N), dtype=np.int64 if dt != "u32" else np.uint64).astype(t)
        Out = rng.integers(lo, hi, (M, N), dtype=np.int64 if dt != "u32" else np.uint64).astype(t)
    return X, Out


@pytest.mark.parametrize("op,dt", [("add", d) for d in ADD_DTYPES] + [("max", d) for d in MAX_DTYPES])
def test_windows_past_both_ends_every_dtype(op, dt):
    mod = compile_cpu(_windows_src(op, dt))
    for k, (M, N) in enumerate(WINDOW_SHAPES):
        X, Out = _windows_args(op, dt, M, N, k)
        want = _windows_reference(op, X, Out)
        mod.win(X, Out)
        np.testing.assert_array_equal(Out.astype(np.float64) if dt in ("f16", "bf16") else Out,
                                      want.astype(np.float64) if dt in ("f16", "bf16") else want,
                                      err_msg=f"{op} {dt} {M}x{N}")


def test_integer_adds_wrap_in_the_tensor_type():
    mod = compile_cpu(_windows_src("add", "u32"))
    X = np.full((5, 20), 0xFFFFFFF0, np.uint32)
    Out = np.full((5, 20), 0x20, np.uint32)
    want = _windows_reference("add", X, Out)
    mod.win(X, Out)
    np.testing.assert_array_equal(Out, want)
    assert Out[1, 0] == 0x10 and Out[2, 0] == 0           # one CTA covers row 1, two cover row 2


def test_f16_adds_round_to_the_tensor_type_at_each_update():
    # 2049 is not an f16: 2048 + 1 rounds back to 2048 at each of the two updates
    mod = compile_cpu(_windows_src("add", "f16"))
    X = np.ones((6, 20), np.float16)
    Out = np.full((6, 20), 2048, np.float16)
    mod.win(X, Out)
    assert Out[1, 0] == 2048 and Out[2, 0] == 2048
    Out = np.full((6, 20), 1024, np.float16)
    mod.win(X, Out)
    assert Out[1, 0] == 1025 and Out[2, 5] == 1026


def test_debug_launch_runs_tile_atomics_without_a_race():
    mod = compile_cpu(_windows_src("max", "f32"))
    X, Out = _windows_args("max", "f32", 13, 36, 5)
    want = _windows_reference("max", X, Out)
    with pytest.warns(tilenb.EdgeWarning) as w:       # the last column has no X element to its right
        mod.win(X, Out, debug=True)
    np.testing.assert_array_equal(Out, want)
    assert [str(x.message).split(" (kernel")[0] for x in w] == ["Out[0..12, 35] (13 elements: columns 35 of every row) not updated"]


# ---- reductions across CTAs ---------------------------------------------------------------------------
COLSUM = """
@launch(256)
@grid(cdiv(M, 512), cdiv(N, 64))
kernel column_sums(X: tensor<DT>[M, N], Out: tensor<DT>[1, N], Big: tensor<DT>[1, N]) {
  let c = ctx.block.y * 64
  var acc: tile<DT>[1, 64] = 0
  var big: tile<DT>[1, 64] = LOWEST
  for r in range(ctx.block.x * 512, min(ctx.block.x * 512 + 512, M), 32) {
    let x = X[r :+ 32, c :+ 64]
    acc += colsum(x)
    big = max(big, colmax(x))
  }
  atomic_add(Out[0 :+ 1, c :+ 64], acc)
  atomic_max(Big[0 :+ 1, c :+ 64], big)
}
"""


def _colsum_src(dt):
    return COLSUM.replace("DT", dt).replace("LOWEST", "-1e30" if dt.startswith("f") else "-1000000")


@pytest.mark.parametrize("M,N", [(5000, 100), (3, 4), (513, 64)])
def test_column_sum_over_many_rows_in_one_statement_f32(M, N):
    """The newcomer's column sum: each CTA sums its 512 rows, one tile atomic combines the CTAs."""
    mod = compile_cpu(_colsum_src("f32"))
    X = np.random.default_rng(M).uniform(-1, 1, (M, N)).astype(np.float32)
    Out = np.zeros((1, N), np.float32)
    Big = np.full((1, N), -np.inf, np.float32)
    mod.column_sums(X, Out, Big)
    ref = X.astype(np.float64).sum(axis=0, keepdims=True)
    bound = 1e-5 * (1 + np.abs(ref)) + M * 2.0 ** -23 * np.abs(X.astype(np.float64)).sum(axis=0, keepdims=True)
    assert np.all(np.abs(Out - ref) <= bound)
    np.testing.assert_array_equal(Big, X.max(axis=0, keepdims=True))


def test_column_sum_in_i32_is_exact():
    M, N = 2100, 68
    mod = compile_cpu(_colsum_src("i32"))
    X = np.random.default_rng(1).integers(-1000, 1000, (M, N)).astype(np.int32)
    Out = np.full((1, N), 7, np.int32)
    Big = np.full((1, N), -5000, np.int32)
    mod.column_sums(X, Out, Big)
    np.testing.assert_array_equal(Out, 7 + X.sum(axis=0, keepdims=True))
    np.testing.assert_array_equal(Big, X.max(axis=0, keepdims=True))


SUM_MAX = """
@launch(256)
@grid(cdiv(N, 1024))
kernel sum_and_max(X: tensor<f32>[N], Out: tensor<f32>[2]) {
  var x = X[ctx.block.x * 1024 :+ 1024]
  atomic_add(Out[0 :+ 1], rowsum(x))
  atomic_max(Out[1 :+ 1], rowmax(abs(x)))
}
"""


@pytest.mark.parametrize("N", [4, 1000, 5000])
def test_sum_and_max_of_a_vector_with_rank_one_slices(N):
    mod = compile_cpu(SUM_MAX)
    X = np.random.default_rng(N).standard_normal(N).astype(np.float32)
    Out = np.zeros(2, np.float32)
    mod.sum_and_max(X, Out)
    np.testing.assert_allclose(Out[0], X.astype(np.float64).sum(), rtol=1e-5, atol=1e-4)
    assert Out[1] == np.abs(X).max()


COUNTS = """
@launch(32)
kernel counts(C: tensor<i32>[R, 10], H: tensor<f64>[R, 10]) {
  let r = ctx.block.x % 3
  if ctx.block.x % 2 == 0 {
    atomic_add(C[r :+ 2, 3 :+ 8], 1)
  }
  for k in range(0, ctx.block.x % 4) {
    atomic_max(H[0 :+ 1, k :+ 4], f64(ctx.block.x) + 0.5)
  }
}
"""


def test_scalar_values_under_uniform_if_and_loop():
    mod = compile_cpu(COUNTS)
    R, G = 3, 11
    C = np.zeros((R, 10), np.int32)
    H = np.full((R, 10), -1.0)
    mod.counts[G](C, H)
    wc = np.zeros((R, 10), np.int64)
    wh = np.full((R, 10), -1.0)
    for b in range(G):
        r = b % 3
        if b % 2 == 0:
            for i in range(r, min(r + 2, R)):
                wc[i, 3:10] += 1                     # columns 3..10, the last outside
        for k in range(b % 4):
            wh[0, k:k + 4] = np.maximum(wh[0, k:k + 4], b + 0.5)
    np.testing.assert_array_equal(C, wc)
    np.testing.assert_array_equal(H, wh)


SPLITK = """
@launch(128)
@grid(cdiv(M, 64), cdiv(N, 64), cdiv(K, 96))
kernel splitk(A: tensor<f16>[M, K], B: tensor<f16>[K, N], C: tensor<f32>[M, N]) {
  let r = ctx.block.x * 64
  let c = ctx.block.y * 64
  let k0 = ctx.block.z * 96
  var acc: tile<f32>[64, 64] = 0.0
  for k in range(k0, min(k0 + 96, K), 32) {
    acc += dot(A[r :+ 64, k :+ 32], B[k :+ 32, c :+ 64])
  }
  atomic_add(C[r :+ 64, c :+ 64], acc)
}
"""
SPLITK_SHAPE = (70, 200, 72)     # M, K, N


def _splitk_args(M, K, N, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K)).astype(np.float16)
    B = rng.standard_normal((K, N)).astype(np.float16)
    return A, B, np.zeros((M, N), np.float32)


def _splitk_bound(A, B):
    a, b = A.astype(np.float64), B.astype(np.float64)
    return 1e-5 * (1 + np.abs(a @ b)) + A.shape[1] * 2.0 ** -23 * (np.abs(a) @ np.abs(b))


def test_split_k_gemm_keeps_its_accumulator_in_registers_and_adds_the_k_parts():
    mod = compile_cpu(SPLITK)
    places = {t.sym.name: t.space for t in mod.splitk.analysis().lifetimes.tiles}
    assert places == {"acc": "registers"}
    M, K, N = SPLITK_SHAPE
    A, B, C = _splitk_args(M, K, N)
    mod.splitk(A, B, C)
    assert np.all(np.abs(C - A.astype(np.float64) @ B.astype(np.float64)) <= _splitk_bound(A, B))


# ---- what the checker refuses ----------------------------------------------------------------------------
def _err(body, params="X: tensor<f32>[M, 64], Out: tensor<f32>[2, 64], V: tensor<f16>[2, 64], U: tensor<u8>[2, 64]"):
    src = f"@launch(64)\nkernel k({params}) {{\n{textwrap.dedent(body).strip()}\n}}\n"
    with pytest.raises(TileError) as e:
        tilenb.compile(src, backend="cpu")
    return e.value


@pytest.mark.parametrize("body,cls,phrase", [
    ("var s = colsum(X[0 :+ 8, :])\nif ctx.thread == 0 {\n  atomic_add(Out[0 :+ 1, :], s)\n}", TileRuleError,
     "a tile atomic (atomic_add into a tensor slice, which updates each element once: it needs no "
     "`if ctx.thread == 0`) under varying control: the condition 'ctx.thread == 0' at line 4"),
    ("var s = colsum(X[0 :+ 8, :])\natomic_add(Out[0 :+ 1, 0 :+ 32], s)", TileShapeError,
     "atomic_add into a slice of shape [1, 32] takes a tile of that shape (or one that broadcasts to it), not [1, 64]"),
    ("var t: tile<f32>[2, 64] = 0.0\natomic_add(t[0 :+ 1, :], X[0 :+ 1, :])", TileRuleError,
     "must be one element of a tensor, as in T[i, j], or a slice of a tensor"),
    ("let v = Out[0 :+ 1, :]\natomic_add(v[0 :+ 1, :], X[0 :+ 1, :])", TileRuleError, "through the let view 'v'"),
    ("atomic_max(V[0 :+ 1, :], X[0 :+ 1, :])", TileTypeError, "atomic_max works on f32, f64, i32, i64 and u32 tensors"),
    ("atomic_add(U[0 :+ 1, :], X[0 :+ 1, :])", TileTypeError, "atomic_add works on f16, bf16, f32, f64, i32, i64 and u32 tensors, not u8"),
    ("atomic_add(Out[0 :+ 1, :], f32(ctx.thread))", TileRuleError, "a tile cannot be filled with a per-thread (varying) value"),
    ("atomic_add(Out[0, 0], X[0 :+ 1, :])", TileTypeError, "give a slice of the tensor of that shape, as in atomic_add(T[r :+ 1, c :+ 64], t)"),
    ("atomic_add(Out[0 :+ 1, :], i32(1))", TileTypeError, "cannot store i32 into f32 without a conversion"),
    ("atomic_add(Out[ctx.thread :+ 1, :], X[0 :+ 1, :])", TileRuleError, "the slice start 'ctx.thread' differs between threads"),
])
def test_checker_errors_name_the_fault(body, cls, phrase):
    e = _err(body)
    assert isinstance(e, cls), (type(e), str(e))
    assert phrase in str(e), str(e)


def test_a_tile_atomic_under_a_varying_loop_is_refused():
    e = _err("for i in range(0, ctx.thread) {\n  atomic_add(Out[0 :+ 1, :], X[0 :+ 1, :])\n}")
    assert isinstance(e, TileRuleError) and "the loop bounds at line 3 differ between threads" in str(e)


# ---- what the analysis sees ---------------------------------------------------------------------------
PER_THREAD_THEN_ATOMIC = """
@launch(64)
@grid(1)
kernel pt(X: tensor<f32>[N], Out: tensor<f32>[1, 64]) {
  var t: tile<f32>[1, 64] = 0.0
  t[0, 63 - ctx.thread] = X[ctx.thread]
  atomic_add(Out[0 :+ 1, 0 :+ 64], t)
}
"""


def test_plan_is_a_tile_statement_with_an_atomic_global_write_and_barriers_see_its_reads():
    mod = compile_cpu(PER_THREAD_THEN_ATOMIC)
    a = mod.pt.analysis()
    sp = [p for p in a.statements if p.line == 6][0]
    assert sp.kind == "tile" and sp.what == "the atomic_add into Out"
    first = sp.accesses[0]
    assert (first.rw, first.mode, first.space, first.name, first.atomic) == ("write", "partition", "global", "Out", True)
    assert any(x.rw == "read" and x.space == "shared" and x.name == "t" and x.mode == "partition" for x in sp.accesses)
    # the per-thread write of line 5 and the atomic's partition read of t are different threads
    assert [(b.line, b.where) for b in a.barriers] == [(5, "before"), (6, "before")]
    X = np.arange(64, dtype=np.float32)
    Out = np.ones((1, 64), np.float32)
    mod.pt(X, Out, debug=True)
    np.testing.assert_array_equal(Out[0], 1 + X[::-1])


def test_copy_plan_of_a_tile_atomic_is_a_store():
    mod = compile_cpu(_windows_src("add", "f32"))
    copies = [c for c in mod.win.analysis().copies if c.line == 6]
    assert sorted((c.direction, c.tensor) for c in copies) == [("load", "X"), ("store", "Out")]


# ---- the generated CUDA ---------------------------------------------------------------------------
def _kernels():
    out = {f"win_{op}_{dt}": _windows_src(op, dt) for op, dts in (("add", ADD_DTYPES), ("max", MAX_DTYPES)) for dt in dts}
    out.update({"colsum_f32": _colsum_src("f32"), "colsum_i32": _colsum_src("i32"), "sum_max": SUM_MAX,
                "counts": COUNTS, "splitk": SPLITK, "per_thread": PER_THREAD_THEN_ATOMIC})
    return out


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_generated_cuda_compiles_with_nvrtc(arch):
    for name, src in _kernels().items():
        mod = compile_cpu(src)
        for k in mod.kernels.values():
            text = k.cuda_source(arch=arch)
            assert "tnb_atomic_" in text, name
            nvrtc_compile(text, arch)


@needs_gxx
@pytest.mark.parametrize("op,dt", [("add", "f16"), ("add", "bf16"), ("add", "i64"), ("add", "u32"), ("add", "f64"),
                                   ("max", "f32"), ("max", "i32")])
def test_emulated_cuda_agrees_with_the_cpu_executor_windows(op, dt, tmp_path):
    mod = compile_cpu(_windows_src(op, dt))
    for k, (M, N) in enumerate(WINDOW_SHAPES[::2]):
        X, Out = _windows_args(op, dt, M, N, 10 + k)
        got = Out.copy()
        mod.win(X, Out)
        grid = (-(-(M + 2) // 4), -(-(N + 3) // 16), 1)
        EMU.run(generate(mod.win.ir()), [X, got], {"M": M, "N": N}, grid, workdir=tmp_path)
        np.testing.assert_array_equal(got.view(np.uint8), Out.view(np.uint8), err_msg=f"{op} {dt} {M}x{N}")


@needs_gxx
def test_emulated_cuda_agrees_with_the_cpu_executor_reductions(tmp_path):
    M, N = 1100, 68
    mod = compile_cpu(_colsum_src("i32"))
    X = np.random.default_rng(2).integers(-1000, 1000, (M, N)).astype(np.int32)
    Out, Big = np.zeros((1, N), np.int32), np.full((1, N), -5000, np.int32)
    Og, Bg = Out.copy(), Big.copy()
    mod.column_sums(X, Out, Big)
    EMU.run(generate(mod.column_sums.ir()), [X, Og, Bg], {"M": M, "N": N}, (3, 2, 1), workdir=tmp_path)
    np.testing.assert_array_equal(Og, Out)
    np.testing.assert_array_equal(Bg, Big)
    mod = compile_cpu(COUNTS)
    C, H = np.zeros((3, 10), np.int32), np.full((3, 10), -1.0)
    Cg, Hg = C.copy(), H.copy()
    mod.counts[11](C, H)
    EMU.run(generate(mod.counts.ir()), [Cg, Hg], {"R": 3}, (11, 1, 1), workdir=tmp_path)
    np.testing.assert_array_equal(Cg, C)
    np.testing.assert_array_equal(Hg, H)
    mod = compile_cpu(PER_THREAD_THEN_ATOMIC)
    X, Out = np.arange(64, dtype=np.float32) - 9.5, np.ones((1, 64), np.float32)
    Og = Out.copy()
    mod.pt(X, Out)
    EMU.run(generate(mod.pt.ir()), [X, Og], {"N": 64}, (1, 1, 1), workdir=tmp_path)
    np.testing.assert_array_equal(Og, Out)


@needs_gxx
def test_emulated_split_k_on_mma_sync_and_on_wgmma_agrees_with_the_cpu_executor(tmp_path):
    mod = compile_cpu(SPLITK)
    M, K, N = SPLITK_SHAPE
    A, B, C = _splitk_args(M, K, N, seed=3)
    grid = (-(-M // 64), -(-N // 64), -(-K // 96))
    mod.splitk(A, B, C)
    bound = 1e-5 * (1 + np.abs(C)) + K * 2.0 ** -23 * (np.abs(A.astype(np.float64)) @ np.abs(B.astype(np.float64)))
    ks80 = generate(mod.splitk.ir(), arch="sm_80")
    assert "mma.sync" in ks80.source or "tnb_mma_f16" in ks80.source
    C80 = np.zeros_like(C)
    EMU.run(ks80, [A, B, C80], {"M": M, "K": K, "N": N}, grid, workdir=tmp_path)
    assert np.all(np.abs(C80 - C) <= bound)
    import test_gemm_sm90_edges as G
    ks90 = generate(mod.splitk.ir(), arch="sm_90")
    assert ks90.arch == "sm_90a"
    # the sm_90 emulator's prelude has no atomics: the plain emulator's helpers (atomic_ref
    # primitives, the real prelude's PTX-free helpers, tnb_atomic_* included), in front of the kernel
    head, sep, body = ks90.source.partition("#endif  // TILENB_PRELUDE")
    ks90 = dataclasses.replace(ks90, source=head + sep + "\n" + EMU.EMU_INTRINSICS + EMU.prelude_helpers() + body)
    exe = G.build_sm90(ks90, [A, B, np.zeros_like(C)], dict(M=M, N=N, K=K), grid, tmp_path / "sm90")
    for tma in (1, 0):
        C90 = np.zeros_like(C)
        G.run_sm90(exe, [A, B, C90], tmp_path / "sm90", tma, 0)
        assert np.all(np.abs(C90 - C) <= bound), tma


# ---- on a GPU ---------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("op,dt", [("add", d) for d in ADD_DTYPES] + [("max", d) for d in MAX_DTYPES])
def test_gpu_windows_every_dtype(op, dt):
    mod = tilenb.compile(_windows_src(op, dt), backend="cuda")
    for k, (M, N) in enumerate(WINDOW_SHAPES):
        X, Out = _windows_args(op, dt, M, N, 20 + k)
        want = _windows_reference(op, X, Out)
        got = Out.copy()
        mod.win(X, got)
        if op == "add" and dt in ("f32", "f64"):
            # the GPU adds the CTAs in any order: spec 17's bound for 3 terms
            S = _windows_reference("add", np.abs(X), np.abs(Out)).astype(np.float64)
            eps = 2.0 ** -23 if dt == "f32" else 2.0 ** -52
            tol = (1e-5 if dt == "f32" else 1e-12) * (1 + np.abs(want)) + 3 * eps * S
            assert np.all(np.abs(got.astype(np.float64) - want) <= tol), f"{op} {dt} {M}x{N}"
        else:            # integers, maxima and small-integer f16/bf16 sums are exact in any order
            np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8), err_msg=f"{op} {dt} {M}x{N}")


@pytest.mark.gpu
def test_gpu_reductions_across_ctas():
    mod = tilenb.compile(_colsum_src("f32"), backend="cuda")
    M, N = 5000, 100
    X = np.random.default_rng(4).uniform(-1, 1, (M, N)).astype(np.float32)
    Out, Big = np.zeros((1, N), np.float32), np.full((1, N), -np.inf, np.float32)
    mod.column_sums(X, Out, Big)
    ref = X.astype(np.float64).sum(axis=0, keepdims=True)
    assert np.all(np.abs(Out - ref) <= 1e-5 * (1 + np.abs(ref)) + M * 2.0 ** -23 * np.abs(X).sum(axis=0))
    np.testing.assert_array_equal(Big, X.max(axis=0, keepdims=True))
    mod = tilenb.compile(SUM_MAX, backend="cuda")
    X = np.random.default_rng(5).standard_normal(5000).astype(np.float32)
    Out = np.zeros(2, np.float32)
    mod.sum_and_max(X, Out)
    np.testing.assert_allclose(Out[0], X.astype(np.float64).sum(), rtol=1e-5, atol=1e-4)
    assert Out[1] == np.abs(X).max()
    mod = tilenb.compile(SPLITK, backend="cuda")
    M, K, N = 300, 1000, 200
    A, B, C = _splitk_args(M, K, N, seed=6)
    mod.splitk(A, B, C)
    assert np.all(np.abs(C - A.astype(np.float64) @ B.astype(np.float64)) <= _splitk_bound(A, B))
