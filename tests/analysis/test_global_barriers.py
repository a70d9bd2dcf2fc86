"""Barriers for hazards through global memory within a CTA, and one home for uniformity (issue 16).

A tensor element that one thread of a CTA writes and another thread of the same CTA then reads
or writes needs a barrier between the two, exactly like a shared-tile element: the barrier
analysis places it (with a reason naming the tensor and the element), the generated CUDA has the
`__syncthreads()`, the CPU executor (statements in order) gives numpy's result, the generated
CUDA run on the CPU through tests/support/cuda_emulator.py agrees with it, and `debug=True` reports what
per-thread code leaves to the program's own `barrier()`. Kernels that never read back a tensor
they write get no new barrier. A brute-force simulator written here (from the partition rule of
docs/spec.md, not from tilenb.analysis) checks, over random kernels that write and read back one
tensor, that every hazard between two threads of a CTA has a barrier between its two sides.
"""
from __future__ import annotations

import textwrap
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import tilenb
from tilenb import ir
from tilenb.analysis import analyze
from tilenb.codegen import generate
from tilenb.codegen.plan import plan as codegen_plan
from tilenb.lang.diagnostics import RaceError

from support import cuda_emulator as EMU  # noqa: E402
from support.cuda_emulator import needs_gxx  # noqa: E402
from tilenb.examples import suite_kernels as SK  # noqa: E402


def _mod(src, debug=False):
    return tilenb.compile(textwrap.dedent(src).lstrip("\n"), backend="cpu", debug=debug, filename="k.tile")


def _global_barriers(a, tensor):
    return [b for b in a.barriers if b.tile == tensor and "in global memory" in b.reason]


def _syncs_before_line(cuda: str, line: int, tensor: str):
    """The `__syncthreads()` lines of the CUDA placed before source line `line` for `tensor`."""
    return [ln.strip() for ln in cuda.splitlines()
            if ln.strip().startswith(f"__syncthreads();  // barrier (before line {line}): {tensor}")]


# ---- the four reproducers of the issue -----------------------------------------------------------
RAW = """
@launch(64)
@grid(cdiv(M, 16))
kernel raw(X: tensor<f32>[M, 20], Y: tensor<f32>[M, 20], Z: tensor<f32>[M, 1]) {
  let r = ctx.block.x * 16
  Y[r :+ 16, :] = X[r :+ 16, :] * 2.0
  Z[r :+ 16, :] = Y[r :+ 16, 5 :+ 1]
}
"""

WAR = """
@launch(64)
@grid(cdiv(M, 16))
kernel war(X: tensor<f32>[M, 20], Y: tensor<f32>[M, 20], Z: tensor<f32>[M, 1]) {
  let r = ctx.block.x * 16
  var c = Y[r :+ 16, 5 :+ 1]
  Y[r :+ 16, :] = X[r :+ 16, :] * 2.0
  Z[r :+ 16, :] = c
}
"""

PER_THREAD = """
@launch(64)
@grid(cdiv(M, 8))
kernel ptw(Y: tensor<f32>[M, 8], Z: tensor<f32>[M, 8]) {
  let r = ctx.block.x * 8
  let t = ctx.thread
  if r + t / 8 < M {
    Y[r + t / 8, t % 8] = f32(t) * 0.5
  }
  Z[r :+ 8, :] = Y[r :+ 8, :] + 1.0
}
"""

ATOMIC = """
@launch(64)
kernel atom(S: tensor<f32>[M, 12], T: tensor<f32>[M, 16]) {
  let b = ctx.block.x
  atomic_add(S[b, ctx.thread % 12], f32(ctx.thread))
  T[b :+ 1, 0 :+ 16] = S[b :+ 1, 0 :+ 16] * 1.0
}
"""

M = 37     # not a multiple of any tile's row count


def _raw_case(rng):
    X = rng.standard_normal((M, 20)).astype(np.float32)
    args = [X, np.zeros((M, 20), np.float32), np.zeros((M, 1), np.float32)]
    want = [X, 2 * X, 2 * X[:, 5:6]]
    return args, want, (-(-M // 16),), {"M": M}


def _war_case(rng):
    X = rng.standard_normal((M, 20)).astype(np.float32)
    Y = rng.standard_normal((M, 20)).astype(np.float32)
    args = [X, Y.copy(), np.zeros((M, 1), np.float32)]
    want = [X, 2 * X, Y[:, 5:6]]
    return args, want, (-(-M // 16),), {"M": M}


def _pt_case(rng):
    i, j = np.meshgrid(np.arange(M), np.arange(8), indexing="ij")
    Y = ((i % 8) * 8 + j).astype(np.float32) * 0.5
    args = [np.zeros((M, 8), np.float32), np.zeros((M, 8), np.float32)]
    return args, [Y, Y + 1], (-(-M // 8),), {"M": M}


def _atomic_case(rng):
    rows = 5
    S = rng.integers(-4, 4, (rows, 12)).astype(np.float32)
    add = np.zeros(12, np.float32)
    for t in range(64):
        add[t % 12] += t
    S2 = S + add
    T = np.zeros((rows, 16), np.float32)
    T[:, :12] = S2
    return [S.copy(), np.zeros((rows, 16), np.float32)], [S2, T], (rows,), {"M": rows}


CASES = {  # name: (source, kernel, the tensor, the line of the later access, the hazard, numpy case)
    "raw": (RAW, "raw", "Y", 6, "read after write", _raw_case),
    "war": (WAR, "war", "Y", 6, "write after read", _war_case),
    "per_thread_write": (PER_THREAD, "ptw", "Y", 9, "read after write", _pt_case),
    "atomic": (ATOMIC, "atom", "S", 5, "read after write", _atomic_case),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_analysis_places_a_barrier_whose_reason_names_the_tensor(case):
    src, name, tensor, line, kind, _ = CASES[case]
    a = _mod(src).kernels[name].analysis()
    assert a.notes == ()
    bars = _global_barriers(a, tensor)
    assert len(bars) == 1, a.barriers
    b = bars[0]
    assert (b.line, b.where, b.kind) == (line, "before", kind)
    assert b.reason.startswith(f"{tensor}") and "in global memory" in b.reason


def test_the_reasons_name_the_element_and_the_threads():
    (b,) = _global_barriers(_mod(RAW).raw.analysis(), "Y")
    # chunk 1 of the [16, 20] store (4-element vectors) is row 0, columns 4..7: thread 1 writes
    # Y[r, 5]; row 0 of the [16, 1] store into Z is thread 0's
    assert b.reason.startswith("Y[16 * ctx.block.x, 5] in global memory is written by thread 1 at line 5 "
                               "(the store into Y) and read by thread 0 at line 6"), b.reason
    assert b.reason.endswith("without a barrier the read may come before the write")
    (b,) = _global_barriers(_mod(WAR).war.analysis(), "Y")
    assert "read by thread 0 at line 5" in b.reason and "written by thread 1 at line 6" in b.reason, b.reason


@pytest.mark.parametrize("case", list(CASES))
def test_the_generated_cuda_has_the_barrier(case):
    src, name, tensor, line, _, _ = CASES[case]
    k = _mod(src).kernels[name]
    cuda = k.cuda_source()
    assert len(_syncs_before_line(cuda, line, tensor)) == 1
    # and it sits between the two statements: after the earlier one's code, before the later one's
    (b,) = _global_barriers(k.analysis(), tensor)
    at = cuda.index(f"__syncthreads();  // barrier (before line {line}): {tensor}")
    assert cuda.index(f"// line {b.earlier_line}:") < cuda.index(f"// line {line}:") < at
    assert at < cuda.index("{", at) < cuda.index(tensor, cuda.index("\n", at))


@pytest.mark.parametrize("case", list(CASES))
def test_the_cpu_executor_gives_numpys_result(case):
    src, name, _, _, _, make = CASES[case]
    args, want, grid, _ = make(np.random.default_rng(3))
    _mod(src).kernels[name][grid](*args)
    for got, w in zip(args, want):
        np.testing.assert_allclose(got, w, rtol=0, atol=0)


@needs_gxx
@pytest.mark.parametrize("case", list(CASES))
def test_the_emulated_cuda_agrees_with_numpy(case, tmp_path):
    src, name, _, _, _, make = CASES[case]
    args, want, grid, dims = make(np.random.default_rng(4))
    text = textwrap.dedent(src).lstrip("\n")
    kir = _mod(src).kernels[name].ir()
    EMU.run(generate(kir, text), args, dims, grid, workdir=tmp_path)
    for got, w in zip(args, want):
        np.testing.assert_allclose(got, w, rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("case", list(CASES))
def test_the_gpu_agrees_with_numpy(case):
    src, name, _, _, _, make = CASES[case]
    args, want, grid, _ = make(np.random.default_rng(11))
    k = tilenb.compile(textwrap.dedent(src).lstrip("\n"), backend="cuda").kernels[name]
    for _ in range(20):       # a race that no barrier fenced would show in some of the runs
        got = [a.copy() for a in args]
        k[grid](*got)
        assert k.last_run.backend == "cuda"
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=0, atol=0)


# ---- what gets no new barrier ----------------------------------------------------------------------
NO_READ_BACK = """
@launch(128)
@grid(cdiv(M, 8))
kernel whole_rows(X: tensor<f32>[M, 256], Y: tensor<f32>[M, 256]) {
  let r = ctx.block.x * 8
  Y[r :+ 8, :] = X[r :+ 8, :] * 2.0
}

@launch(128)
@grid(cdiv(M, 8))
kernel chunks(X: tensor<f32>[M, N], Y: tensor<f32>[M, N]) {
  let r = ctx.block.x * 8
  let n = cdiv(N, 64)
  for i in range(0, n) {
    let c = (n - 1 - i) * 64
    Y[r :+ 8, c :+ 64] = X[r :+ 8, c :+ 64] + 1.0
  }
}

@launch(64)
kernel strided(X: tensor<f32>[M, 32], Y: tensor<f32>[M, 32]) {
  for i in range(0, M, 8) {
    Y[i :+ 8, :] = transpose(transpose(X[i :+ 8, :]))
  }
}

@launch(64)
@grid(M)
kernel halves(X: tensor<f32>[M, 96], Y: tensor<f32>[M, 96]) {
  let r = ctx.block.x
  Y[r :+ 1, 32 :+ 64] = X[r :+ 1, 32 :+ 64] * 3.0
  Y[r :+ 1, 0 :+ 32] = X[r :+ 1, 0 :+ 32]
}

@launch(64)
@grid(M)
kernel same_window_each_turn(X: tensor<f32>[M, 64], Y: tensor<f32>[M, 64]) {
  let r = ctx.block.x
  for k in range(0, 3) {
    Y[r :+ 1, :] = X[r :+ 1, :] + f32(k)
  }
}
"""


def test_kernels_that_never_read_back_a_tensor_get_no_new_barrier():
    mod = _mod(NO_READ_BACK)
    for name, k in mod.kernels.items():
        a = k.analysis()
        assert not [b for b in a.barriers if "in global memory" in b.reason], (name, a.barriers)


def test_the_suite_kernels_get_no_barrier_for_global_memory():
    mod = tilenb.compile(SK.program(), backend="cpu")
    for name, k in mod.kernels.items():
        tune = k.checked.default_tune()
        a = k.analysis(**tune)
        assert not [b for b in a.barriers if "in global memory" in b.reason], name


READ_BACK_LOOP = """
@launch(64)
@grid(M)
kernel prefix(X: tensor<f32>[M, 64], Y: tensor<f32>[M, 64]) {
  let r = ctx.block.x
  Y[r :+ 1, 0 :+ 16] = X[r :+ 1, 0 :+ 16]
  for i in range(1, 4) {
    // each chunk adds the total of the chunk before it, written the turn before
    var prev = rowsum(Y[r :+ 1, (i - 1) * 16 :+ 16])
    Y[r :+ 1, i * 16 :+ 16] = X[r :+ 1, i * 16 :+ 16] + prev
  }
}
"""


def test_a_loop_that_reads_back_the_previous_turn_gets_a_barrier_and_numpys_result():
    k = _mod(READ_BACK_LOOP).prefix
    a = k.analysis()
    assert a.notes == ()
    bars = _global_barriers(a, "Y")
    assert bars, a.barriers
    rows = 3
    X = np.random.default_rng(5).standard_normal((rows, 64)).astype(np.float32)
    Y = np.zeros_like(X)
    k[rows](X, Y)
    want = X.copy()
    for i in range(1, 4):
        want[:, i * 16:(i + 1) * 16] = X[:, i * 16:(i + 1) * 16] + want[:, (i - 1) * 16:i * 16].sum(1, keepdims=True)
    np.testing.assert_allclose(Y, want, rtol=1e-6, atol=1e-5)


@needs_gxx
def test_the_emulated_read_back_loop_agrees_with_numpy(tmp_path):
    text = textwrap.dedent(READ_BACK_LOOP).lstrip("\n")
    kir = _mod(READ_BACK_LOOP).prefix.ir()
    rows = 3
    X = np.random.default_rng(6).standard_normal((rows, 64)).astype(np.float32)
    Y = np.zeros_like(X)
    cpu = Y.copy()
    _mod(READ_BACK_LOOP).prefix[rows](X, cpu)
    EMU.run(generate(kir, text), [X, Y], {"M": rows}, (rows,), workdir=tmp_path)
    np.testing.assert_allclose(Y, cpu, rtol=1e-5, atol=1e-5)


SLIDING = """
@launch(64)
@grid(M)
kernel sliding(Y: tensor<f32>[M, 16]) {
  let r = ctx.block.x
  for i in range(0, 3) {
    // turn i doubles columns i .. i + 7: thread j's column in this turn is thread j + 1's in the last
    Y[r :+ 1, i :+ 8] = Y[r :+ 1, i :+ 8] * 2.0
  }
}
"""

RECURRENCE = """
@launch(64)
kernel rec(Y: tensor<f32>[R, 40], s: i32) {
  for i in range(0, R - 1) {
    var a = Y[i :+ 1, s :+ 16]
    Y[i + 1 :+ 1, 0 :+ 16] = a * 2.0
  }
}
"""


def _sliding_want(Y):
    Y = Y.copy()
    for i in range(3):
        Y[:, i:i + 8] *= 2
    return Y


def _recurrence_want(Y, s):
    Y = Y.copy()
    for i in range(Y.shape[0] - 1):
        Y[i + 1, 0:16] = 2 * Y[i, s:s + 16]
    return Y


def test_turns_of_a_loop_that_overlap_get_a_barrier_at_the_end_of_each_turn():
    k = _mod(SLIDING).sliding
    (b,) = _global_barriers(k.analysis(), "Y")
    assert (b.where, b.carried, b.kind) == ("after", True, "read after write")
    assert b.reason.startswith("around the loop at line 5, from one turn to the next: Y in global memory is written "
                               "at line 7 (the store into Y: Y[ctx.block.x :+ 1, i :+ 8])"), b.reason
    assert "the window moves from turn to turn onto elements other threads touched in an earlier turn" in b.reason
    Y = np.random.default_rng(7).standard_normal((3, 16)).astype(np.float32)
    got = Y.copy()
    k[3](got)
    np.testing.assert_array_equal(got, _sliding_want(Y))


def test_a_row_recurrence_gets_only_the_barrier_between_turns():
    """Within a turn the read row i and the written row i + 1 are apart (their starts differ by a
    constant); from one turn to the next, row i + 1 is written by one thread and read by another:
    one barrier, at the end of the turn."""
    k = _mod(RECURRENCE).rec
    a = k.analysis()
    bars = _global_barriers(a, "Y")
    assert [(b.where, b.carried, b.kind) for b in bars] == [("after", True, "read after write")]
    assert "the two windows are apart within a turn, but a later turn's may cover an earlier turn's" in bars[0].reason
    Y = np.random.default_rng(8).standard_normal((5, 40)).astype(np.float32)
    for s in (0, 3):
        got = Y.copy()
        k[1](got, s)
        np.testing.assert_allclose(got, _recurrence_want(Y, s), rtol=1e-6)


@needs_gxx
def test_the_emulated_loops_agree_with_numpy(tmp_path):
    Y = np.random.default_rng(9).standard_normal((3, 16)).astype(np.float32)
    got = Y.copy()
    EMU.run(generate(_mod(SLIDING).sliding.ir(), textwrap.dedent(SLIDING).lstrip("\n")), [got], {"M": 3}, (3,),
            workdir=tmp_path)
    np.testing.assert_array_equal(got, _sliding_want(Y))
    Y = np.random.default_rng(10).standard_normal((5, 40)).astype(np.float32)
    got = Y.copy()
    EMU.run(generate(_mod(RECURRENCE).rec.ir(), textwrap.dedent(RECURRENCE).lstrip("\n")), [got, 3], {"R": 5}, (1,),
            workdir=tmp_path)
    np.testing.assert_allclose(got, _recurrence_want(Y, 3), rtol=1e-6)


@pytest.mark.gpu
def test_the_gpu_runs_the_loops_as_numpy_does():
    Y = np.random.default_rng(12).standard_normal((300, 16)).astype(np.float32)
    k = tilenb.compile(textwrap.dedent(SLIDING).lstrip("\n"), backend="cuda").sliding
    got = Y.copy()
    k[300](got)
    np.testing.assert_array_equal(got, _sliding_want(Y))
    Y = np.random.default_rng(13).standard_normal((9, 40)).astype(np.float32)
    k = tilenb.compile(textwrap.dedent(RECURRENCE).lstrip("\n"), backend="cuda").rec
    for s_ in (0, 3):
        got = Y.copy()
        k[1](got, s_)
        np.testing.assert_allclose(got, _recurrence_want(Y, s_), rtol=1e-6)
    X = np.random.default_rng(14).standard_normal((500, 64)).astype(np.float32)
    k = tilenb.compile(textwrap.dedent(READ_BACK_LOOP).lstrip("\n"), backend="cuda").prefix
    got = np.zeros_like(X)
    k[500](X, got)
    cpu = np.zeros_like(X)
    _mod(READ_BACK_LOOP).prefix[500](X, cpu)
    np.testing.assert_allclose(got, cpu, rtol=1e-5, atol=1e-5)


def test_a_barrier_needed_after_a_jump_some_threads_took_goes_where_all_threads_are():
    """After `if ctx.thread >= 32 { return }` the rest of the kernel runs under varying control;
    the barrier between the store and the per-thread read goes before that `if`, where every
    thread still is (for a shared tile as for a tensor), and nothing is left unplaced."""
    src = """
    @launch(64)
    kernel k(X: tensor<f32>[1, 64], Y: tensor<f32>[1, 64], Z: tensor<f32>[64], W: tensor<f32>[64]) {
      Y[0 :+ 1, :] = X[0 :+ 1, :] * 2.0
      var t: tile<f32>[1, 64] = X[0 :+ 1, :]
      if ctx.thread >= 32 { return }
      Z[ctx.thread] = Y[0, 63 - ctx.thread]
      W[ctx.thread] = t[0, 63 - ctx.thread]
    }
    """
    k = _mod(src).k
    a = k.analysis()
    assert a.notes == ()
    assert [(b.line, b.where) for b in a.barriers] == [(5, "before")]
    assert _global_barriers(a, "Y") or "Y" in a.barriers[0].reason
    X = np.arange(64, dtype=np.float32).reshape(1, 64)
    Y, Z, W = np.zeros((1, 64), np.float32), np.zeros(64, np.float32), np.zeros(64, np.float32)
    k[1](X, Y, Z, W)
    np.testing.assert_array_equal(Z[:32], 2 * X[0, ::-1][:32])
    np.testing.assert_array_equal(W[:32], X[0, ::-1][:32])
    np.testing.assert_array_equal(Z[32:], 0)


# ---- debug=True: what per-thread code leaves to the program ---------------------------------------
SHIFT = """
@launch(64)
kernel shift(X: tensor<f32>[N], Y: tensor<f32>[N]) {
  let t = ctx.thread
  let i = ctx.block.x * 64 + t
  let j = ctx.block.x * 64 + (t + 1) % 64
  if i < N { Y[i] = X[i] * 2.0 }
  SYNC
  if i < N && j < N { X[i] = Y[j] }
}
"""


@pytest.fixture(params=["dense", "sparse"])
def records(request, monkeypatch):
    """Run a debug test with the race records in arrays (small tensors) and sparse (large ones)."""
    from tilenb.runtime.cpu import debug as cpu_debug
    if request.param == "sparse":
        monkeypatch.setattr(cpu_debug, "DENSE_LIMIT", 0)
    return request.param


def test_debug_reports_a_race_through_global_memory_that_only_barrier_can_fix(records):
    """Per-thread code against per-thread code: no tile statement touches X or Y, so the
    compiler places nothing (the analysis leaves it to the program, as for shared tiles), and a
    debug launch reports the race the GPU would have; with barrier() it is quiet and right."""
    N = 100
    X0 = np.arange(N, dtype=np.float32)
    k = _mod(SHIFT.replace("SYNC", "barrier()"), debug=True).shift
    assert not k.analysis().barriers
    X, Y = X0.copy(), np.zeros(N, np.float32)
    k[2](X, Y)
    b = np.arange(N) // 64 * 64
    j = b + (np.arange(N) % 64 + 1) % 64
    ok = j < N
    np.testing.assert_array_equal(X[ok], 2 * X0[j[ok]])
    np.testing.assert_array_equal(X[~ok], X0[~ok])
    with pytest.raises(RaceError) as info:
        _mod(SHIFT.replace("SYNC", "// barrier() forgotten"), debug=True).shift[2](X0.copy(), np.zeros(N, np.float32))
    msg = str(info.value)
    assert "data race on tensor 'Y'[1] in CTA (0, 0, 0): thread 0 reads it at line 8, but thread 1 wrote it at line 6" in msg
    assert info.value.line == 8


def test_debug_barriers_reached_by_some_ctas_only(records):
    """A barrier under `if ctx.block.x > 0` ends the interval of those CTAs only: CTA 0 races,
    the others do not (the records are kept per CTA)."""
    src = """
    @launch(32)
    kernel k(Y: tensor<f32>[N], Z: tensor<f32>[N]) {
      let i = ctx.block.x * 32 + ctx.thread
      Y[i] = f32(i)
      if ctx.block.x > 0 { barrier() }
      if ctx.block.x > 0 { Z[i] = Y[ctx.block.x * 32 + (ctx.thread + 1) % 32] }
      if ctx.block.x == 0 { Z[i] = Y[(ctx.thread + 1) % 32] }
    }
    """
    with pytest.raises(RaceError, match=r"tensor 'Y'\[1\] in CTA \(0, 0, 0\): thread 0 reads it at line 7"):
        _mod(src, debug=True).k[3](np.zeros(96, np.float32), np.zeros(96, np.float32))
    quiet = src.replace("if ctx.block.x == 0 { Z[i] = Y[(ctx.thread + 1) % 32] }", "")
    Y, Z = np.zeros(96, np.float32), np.zeros(96, np.float32)
    _mod(quiet, debug=True).k[3](Y, Z)
    i = np.arange(32, 96)
    np.testing.assert_array_equal(Z[32:], (i // 32 * 32 + (i % 32 + 1) % 32).astype(np.float32))


def test_debug_reports_a_read_of_an_element_other_threads_update_atomically(records):
    src = """
    @launch(64)
    kernel k(S: tensor<f32>[M, 8], T: tensor<f32>[M, 64]) {
      atomic_add(S[ctx.block.x, ctx.thread % 8], 1.0)
      SYNC
      T[ctx.block.x, ctx.thread] = S[ctx.block.x, ctx.thread % 8]
    }
    """
    k = _mod(src.replace("SYNC", "barrier()"), debug=True).k
    S, T = np.zeros((3, 8), np.float32), np.zeros((3, 64), np.float32)
    k[3](S, T)
    np.testing.assert_array_equal(S, 8)
    np.testing.assert_array_equal(T, 8)
    with pytest.raises(RaceError, match=r"tensor 'S'\[0, 0\] in CTA \(0, 0, 0\): thread 0 reads it at line 5, "
                                        r"but thread 56 updated it atomically at line 3"):
        _mod(src.replace("SYNC", "// none"), debug=True).k[3](np.zeros((3, 8), np.float32), np.zeros((3, 64), np.float32))


def test_debug_follows_the_barriers_the_compiler_places(records):
    """The CPU's barrier intervals are the GPU code's: a barrier the analysis places (before the
    tile statement that reads Y) separates the two per-thread accesses around it, so the debug
    launch is quiet; where the tile statement touches neither Y nor anything the per-thread code
    wrote, the GPU has no barrier there, and the debug launch reports the race."""
    src = """
    @launch(64)
    kernel k(X: tensor<f32>[64], Y: tensor<f32>[64], Z: tensor<f32>[64]) {
      let t = ctx.thread
      Y[t] = X[t] + 1.0
      Z[0 :+ 64] = SRC[0 :+ 64] * 2.0
      X[t] = Y[(t + 1) % 64]
    }
    """
    X0 = np.arange(64, dtype=np.float32)
    k = _mod(src.replace("SRC", "Y"), debug=True).k
    assert [b.line for b in _global_barriers(k.analysis(), "Y")] == [5]
    X, Y, Z = X0.copy(), np.zeros(64, np.float32), np.zeros(64, np.float32)
    k[1](X, Y, Z)
    np.testing.assert_array_equal(Z, 2 * (X0 + 1))
    np.testing.assert_array_equal(X, np.roll(X0 + 1, -1))
    k2 = _mod(src.replace("SRC", "Z"), debug=True).k
    assert not k2.analysis().barriers
    with pytest.raises(RaceError, match=r"tensor 'Y'\[1\] .* thread 0 reads it at line 6, but thread 1 wrote it at line 4"):
        k2[1](X0.copy(), np.zeros(64, np.float32), np.zeros(64, np.float32))


def test_debug_reports_a_shared_tile_race_that_a_tile_statement_does_not_fence():
    """A tile statement is no barrier by itself: the GPU code has one only where the analysis
    places it. Per-thread writes of a tile, then a tile statement on other data, then per-thread
    reads of elements other threads wrote: a race on the GPU, so a race in debug."""
    src = """
    @launch(32)
    kernel k(X: tensor<f32>[1, 32], Y: tensor<f32>[32], Z: tensor<f32>[1, 32]) {
      let t = ctx.thread
      var buf: tile<f32>[1, 32]
      buf[0, t] = X[0, t]
      Z[0 :+ 1, :] = X[0 :+ 1, :] * 2.0
      Y[t] = buf[0, (t + 1) % 32]
    }
    """
    with pytest.raises(RaceError, match=r"tile 'buf'\[0, 1\] .* thread 0 reads it at line 7, but thread 1 wrote it at line 5"):
        _mod(src, debug=True).k[1](np.ones((1, 32), np.float32), np.zeros(32, np.float32), np.zeros((1, 32), np.float32))


# ---- one home for uniformity --------------------------------------------------------------------
def test_uniformity_has_one_home_read_by_the_analysis_and_the_code_generator():
    src = """
    @launch(64)
    kernel k(X: tensor<f32>[64], Y: tensor<f32>[64]) {
      let t = ctx.thread
      let w = ctx.warp
      var acc = 0.0
      if t >= 32 { return }
      acc += X[t]
      Y[t] = acc
    }
    """
    kir = _mod(src).k.ir()
    a = analyze(kir)
    assert codegen_plan(kir).uni is a.uniformity
    body = kir.body
    let_t, let_w, var_acc, branch, inc, store = body
    # the control each statement runs under: the `if` itself is reached by every thread; the
    # statements after the return some threads took are not
    assert [kir.uniformity[id(s)] for s in body] == [ir.UNIFORM] * 4 + [ir.VARYING] * 2
    assert kir.uniformity[id(branch.then[0])] == ir.VARYING
    u = a.uniformity
    assert u.varying_control == {id(inc), id(store), id(branch.then[0])}
    assert (u.sym_level(let_t.sym), u.sym_level(let_w.sym), u.sym_level(var_acc.sym)) == (ir.VARYING, ir.WARP, ir.VARYING)
    assert u.expr_varying(ir.Ref(let_w.sym, let_w.sym.type, let_w.span))


# ---- brute force: every hazard through a tensor is separated --------------------------------------
MULTI = "multi"   # several threads


class _Gen:
    """A random kernel that writes and reads back the tensor Y: source text and a model of each
    statement (its position in pre-order, what it reads and writes, by which thread)."""

    def __init__(self, data):
        self.d = data
        self.T = data.draw(st.sampled_from([32, 64, 128]), label="threads")
        self.lines = []
        self.pos = 0
        self.tiles = {}            # name -> (h, w)
        self.n = 0
        self.loops = []            # enclosing loop variables: (name, step of the variable)

    def draw(self, s, label=None):
        return self.d.draw(s, label=label)

    def take(self):
        p = self.pos
        self.pos += 1
        return p

    def emit(self, text, ind):
        self.lines.append("  " * ind + text)

    def start(self, top):
        """A window start (text, fn(env) -> value) within [0, top]."""
        base = self.draw(st.sampled_from(["r0", "0", "v", "c", "c", "c"] if self.loops else ["r0", "0", "v"]))
        a = self.draw(st.integers(0, 4))
        terms, fns = [], []
        if base == "r0":
            terms.append("r0")
            fns.append(lambda e: e["r0"])
        elif base == "v":
            terms.append("v")
            fns.append(lambda e: e["v"])
        elif base == "c":
            var, _ = self.loops[-1]
            k = self.draw(st.sampled_from([1, 2, 4, 8]))
            terms.append(f"{k} * {var}")
            fns.append(lambda e, var=var, k=k: k * e[var])
        terms.append(str(a))
        fns.append(lambda e, a=a: a)
        return " + ".join(terms), (lambda e: sum(f(e) for f in fns))

    def window(self):
        h = self.draw(st.sampled_from([1, 2, 4, 8]))
        w = self.draw(st.sampled_from([1, 4, 8, 16]))
        rt, rf = self.start(8)
        ct, cf = self.start(16)
        return h, w, rt, rf, ct, cf

    def block(self, ind, depth, n):
        out = []
        for _ in range(n):
            out.extend(self.stmt(ind, depth))
        return out

    def stmt(self, ind, depth):
        kinds = ["store", "store", "load", "load", "reduce", "inplace", "pt_write", "pt_read", "atomic",
                 "vif", "barrier", "bump"]
        if self.tiles:
            kinds += ["tstore", "tstore"]
        if depth < 2:
            kinds += ["loop"] * (6 if depth == 0 else 2) + ["if"]
        return getattr(self, "s_" + self.draw(st.sampled_from(kinds), label="stmt"))(ind, depth)

    def s_store(self, ind, depth):
        h, w, rt, rf, ct, cf = self.window()
        p = self.take()
        self.emit(f"Y[{rt} :+ {h}, {ct} :+ {w}] = X[{rt} :+ {h}, {ct} :+ {w}] * 2.0", ind)
        return [("tile", p, dict(writes=[(h, w, rf, cf)], reads=[], any_reads=[]))]

    def s_load(self, ind, depth):
        h, w, rt, rf, ct, cf = self.window()
        p = self.take()
        name = f"t{self.n}"
        self.n += 1
        self.tiles[name] = (h, w)
        self.emit(f"var {name} = Y[{rt} :+ {h}, {ct} :+ {w}]", ind)
        return [("tile", p, dict(writes=[], reads=[(h, w, rf, cf)], any_reads=[]))]

    def s_reduce(self, ind, depth):
        h, w, rt, rf, ct, cf = self.window()
        p = self.take()
        name = f"t{self.n}"
        self.n += 1
        self.tiles[name] = (h, 1)
        self.emit(f"var {name} = rowsum(Y[{rt} :+ {h}, {ct} :+ {w}])", ind)
        return [("tile", p, dict(writes=[], reads=[], any_reads=[(h, w, rf, cf)]))]

    def s_inplace(self, ind, depth):
        h, w, rt, rf, ct, cf = self.window()
        _, _, rt2, rf2, ct2, cf2 = self.window()
        p = self.take()
        self.emit(f"Y[{rt} :+ {h}, {ct} :+ {w}] = Y[{rt2} :+ {h}, {ct2} :+ {w}] + 1.0", ind)
        return [("tile", p, dict(writes=[(h, w, rf, cf)], reads=[(h, w, rf2, cf2)], any_reads=[]))]

    def s_tstore(self, ind, depth):
        name = self.draw(st.sampled_from(sorted(self.tiles)))
        h, w = self.tiles[name]
        rt, rf = self.start(8)
        ct, cf = self.start(16)
        p = self.take()
        self.emit(f"Y[{rt} :+ {w}, {ct} :+ {h}] = transpose({name})", ind)
        return [("tile", p, dict(writes=[(w, h, rf, cf)], reads=[], any_reads=[]))]

    def s_pt_write(self, ind, depth):
        h = self.draw(st.sampled_from([1, 4, 8]))
        w = self.draw(st.sampled_from([1, 8, 16]))
        rt, rf = self.start(8)
        ct, cf = self.start(16)
        p = self.take()
        self.emit(f"Y[{rt} + ctx.thread % {h}, {ct} + ctx.thread / {h} % {w}] = 1.0", ind)
        return [("pt", p, dict(rw="w", fn=lambda e, t, h=h, w=w, rf=rf, cf=cf: (rf(e) + t % h, cf(e) + t // h % w)))]

    def s_pt_read(self, ind, depth):
        h = self.draw(st.sampled_from([1, 4, 8]))
        rt, rf = self.start(8)
        ct, cf = self.start(16)
        p = self.take()
        self.emit(f"Z[ctx.block.x, ctx.thread] = Y[{rt} + ctx.thread % {h}, {ct}]", ind)
        return [("pt", p, dict(rw="r", fn=lambda e, t, h=h, rf=rf, cf=cf: (rf(e) + t % h, cf(e))))]

    def s_atomic(self, ind, depth):
        rt, rf = self.start(8)
        ct, cf = self.start(16)
        p = self.take()
        self.emit(f"atomic_add(Y[{rt} + ctx.thread % 4, {ct} + ctx.thread % 8], 1.0)", ind)
        return [("pt", p, dict(rw="a", fn=lambda e, t, rf=rf, cf=cf: (rf(e) + t % 4, cf(e) + t % 8)))]

    def s_vif(self, ind, depth):
        lim = self.draw(st.sampled_from([1, 5, 40]))
        rt, rf = self.start(8)
        ct, cf = self.start(16)
        p = self.take()
        self.emit(f"if ctx.thread < {lim} {{", ind)
        q = self.take()
        self.emit(f"Y[{rt}, {ct} + ctx.thread % 16] = 2.0", ind + 1)
        self.emit("}", ind)
        inner = ("pt", q, dict(rw="w", fn=lambda e, t, lim=lim, rf=rf, cf=cf: (rf(e), cf(e) + t % 16) if t < lim else None))
        return [("block", p, [inner])]

    def s_barrier(self, ind, depth):
        p = self.take()
        self.emit("barrier()", ind)
        return [("barrier", p, None)]

    def s_bump(self, ind, depth):
        p = self.take()
        k = self.draw(st.sampled_from([0, 1, 4]))
        self.emit(f"v = v + {k}", ind)
        return [("bump", p, k)]

    def s_loop(self, ind, depth):
        var = f"i{depth}"
        p = self.take()
        runtime = self.draw(st.booleans())
        if runtime:
            self.emit(f"for {var} in range(0, K, 2) {{", ind)
        else:
            self.emit(f"for {var} in range(0, 3) {{", ind)
        self.loops.append((var, 2 if runtime else 1))
        saved = dict(self.tiles)
        body = self.block(ind + 1, depth + 1, self.draw(st.integers(1, 4)))
        self.tiles = saved
        self.loops.pop()
        self.emit("}", ind)
        return [("loop", p, dict(var=var, runtime=runtime, body=body))]

    def s_if(self, ind, depth):
        p = self.take()
        self.emit("if ctx.block.x > 0 {", ind)
        saved = dict(self.tiles)
        then = self.block(ind + 1, depth + 1, self.draw(st.integers(1, 3)))
        self.tiles = dict(saved)
        self.emit("} else {", ind)
        orelse = self.block(ind + 1, depth + 1, self.draw(st.integers(0, 2)))
        self.tiles = saved
        self.emit("}", ind)
        return [("if", p, dict(then=then, orelse=orelse))]

    def kernel(self):
        self.emit(f"@launch({self.T})", 0)
        self.emit("kernel k(X: tensor<f32>[64, 64], Y: tensor<f32>[64, 64], Z: tensor<f32>[4, 128], K: i32) {", 0)
        p0 = self.take()
        self.emit("let r0 = ctx.block.x * 8", 1)
        p1 = self.take()
        self.emit("var v = 2", 1)
        nodes = self.block(1, 0, self.draw(st.integers(1, 7), label="length"))
        self.emit("}", 0)
        return "\n".join(self.lines) + "\n", [("let", p0, None), ("var", p1, None)] + nodes


def _simulate(nodes, a, T, bx, K, src):
    """Run the model in program order for CTA `bx` (loops of `K` / 2 turns at run time), tracking
    per element of Y who touched it since the last barrier; raise on a hazard with no barrier."""
    bars = {(b.position, b.where) for b in a.barriers}
    state = defaultdict(list)     # (row, col) -> [(who, rw, position)]
    env = {"r0": 8 * bx, "v": 2}

    def clash(x, y):
        if x[0] == "pt" and y[0] == "pt":
            return False          # per-thread code against per-thread code: the program's business
        return x == MULTI or y == MULTI or x[1] != y[1]

    def touch(el, who, rw, p):
        for (w0, rw0, p0) in state[el]:
            if rw == "r" and rw0 == "r":
                continue
            if rw == "a" and rw0 == "a":
                continue          # atomics are indivisible against each other
            if clash(w0, who):
                raise AssertionError(f"hazard on Y{el}: statement {p0} ({rw0} by {w0}) then {p} ({rw} by {who}), "
                                     f"no barrier between; barriers {sorted(bars)}; CTA {bx}, K {K}\n{src}")
        state[el].append((who, rw, p))

    def run(body):
        for kind, p, m in body:
            if (p, "before") in bars:
                state.clear()
            if kind == "barrier":
                state.clear()
            elif kind == "bump":
                env["v"] += m
            elif kind == "tile":
                vec = a.statements[p].vector_width
                for h, w, rf, cf in m["reads"]:
                    r, c = rf(env), cf(env)
                    for i in range(h):
                        for j in range(w):
                            touch((r + i, c + j), ("t", (i * w + j) // vec % T), "r", p)
                for h, w, rf, cf in m["any_reads"]:
                    r, c = rf(env), cf(env)
                    for i in range(h):
                        for j in range(w):
                            touch((r + i, c + j), MULTI, "r", p)
                if (p, "within") in bars:
                    state.clear()
                for h, w, rf, cf in m["writes"]:
                    r, c = rf(env), cf(env)
                    for i in range(h):
                        for j in range(w):
                            touch((r + i, c + j), ("t", (i * w + j) // vec % T), "w", p)
            elif kind == "pt":
                for t in range(T):
                    el = m["fn"](env, t)
                    if el is not None:
                        touch(el, ("pt", t), m["rw"], p)
            elif kind == "block":
                run(m)
            elif kind == "loop":
                n = K // 2 if m["runtime"] else 3
                for i in range(n):
                    env[m["var"]] = i * (2 if m["runtime"] else 1)
                    run(m["body"])
            elif kind == "if":
                run(m["then"] if bx > 0 else m["orelse"])
            if (p, "after") in bars:
                state.clear()

    run(nodes)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_random_read_back_kernels_have_a_barrier_for_every_hazard(data):
    g = _Gen(data)
    src, nodes = g.kernel()
    kir = tilenb.compile(src, backend="cpu").k.ir()
    a = analyze(kir)
    assert a.notes == (), (a.notes, src)
    for bx in (0, 1):
        for K in (0, 2, 4, 6):
            _simulate(nodes, a, g.T, bx, K, src)
