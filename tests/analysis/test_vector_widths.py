"""Vector widths and alignment are decided once, in the analysis, and proved: runtime window starts.

A tile window whose start is known only at run time may start anywhere, even partly outside the
tile (spec section 6: the elements outside read as 0 and are invalid). Its alignment is what the
divisibility rules prove of the start, never what the in-tile starts happen to share: `rtwin`
once read `u[0 :+ 1, s :+ 32]` (only start 0 fits inside u) with 16-byte shared loads, and
faulted on the GPU for s = 5 (cudaErrorMisalignedAddress). Nor may it be taken as the partition's: a
start that puts the window partly outside the tile makes thread k touch another thread's
element, so such an access is "any" (element by element, and the barrier analysis guards it).
Checked here: the analysis' widths (`StatementPlan.vector_width`, `Access.vector`) and barriers,
the CPU executor against numpy for starts in and out of the tile, and (marked `gpu`) the GPU
against the CPU executor for random starts.
"""
from __future__ import annotations

import numpy as np
import pytest

import tilenb

RTWIN = """
@launch(64)
kernel rtwin(X: tensor<f32>[1, 32], Y: tensor<f32>[1, 32], s: i32) {
  var t: tile<f32>[1, 32] = 1.0
  var u = X[0 :+ 1, :]
  t[0 :+ 1, s :+ 8] = u[0 :+ 1, 0 :+ 8]
  Y[0 :+ 1, :] = t + u[0 :+ 1, s :+ 32]
}
"""

# Runtime starts on shared tiles of three element sizes; the starts are multiples of what the
# comments say, so the analysis may (or may not) prove a vector width.
STARTS = """
@launch(64)
kernel win_f32(X: tensor<f32>[4, 64], Y: tensor<f32>[4, 64], s: i32) {
  var x = X[0 :+ 4, :]
  var t: tile<f32>[4, 64] = -1.0
  t[0 :+ 4, s :+ 40] = x[0 :+ 4, 0 :+ 40] * 2.0        // s: any value
  Y[0 :+ 4, :] = t + x[0 :+ 4, 4 * s :+ 64]             // 4 s: a multiple of 4
}

@launch(32)
kernel win_bf16(X: tensor<bf16>[2, 64], Y: tensor<bf16>[2, 64], s: i32) {
  var x = X[0 :+ 2, :]
  var t: tile<bf16>[2, 64] = 3.0
  t[0 :+ 2, 8 * s :+ 16] = x[0 :+ 2, s :+ 16]           // 8 s: a multiple of 8; s: any
  Y[0 :+ 2, :] = bf16(f32(t) + 1.0)
}

@launch(32)
kernel win_i8(X: tensor<i8>[2, 64], Y: tensor<i32>[2, 64], s: i32) {
  var x = X[0 :+ 2, :]
  Y[0 :+ 2, :] = i32(x[0 :+ 2, s :+ 64]) * 3 + i32(x[0 :+ 2, 16 * s :+ 64])
}
"""


# The copy writes u element k from thread k (its source starts one column in: no vector); the
# store reads u[k + s]: another thread's element for s != 0. The analysis once took the window's
# only in-tile start, 0, as its only start and placed no barrier between the two (a race).
RACE = """
@launch(32)
kernel race(X: tensor<f32>[1, 36], Y: tensor<f32>[1, 32], s: i32) {
  var u = X[0 :+ 1, 1 :+ 32]
  Y[0 :+ 1, :] = u[0 :+ 1, s :+ 32]
}
"""


def rtwin_ref(x, y0, s):
    t = np.ones(32, np.float32)
    u = x[0]
    for i in range(8):
        if 0 <= s + i < 32:
            t[s + i] = u[i]
    y = y0.copy()
    for j in range(32):
        if 0 <= s + j < 32:
            y[0, j] = t[j] + u[s + j]
    return y


def _plan(kernel, line):
    return next(sp for sp in kernel.analysis().statements if sp.kind == "tile" and sp.line == line)


def test_a_window_with_a_runtime_start_is_not_assumed_aligned():
    mod = tilenb.compile(RTWIN, backend="cpu")
    read = _plan(mod.rtwin, 7)
    u = next(a for a in read.accesses if a.name == "u")
    # s is any integer: the window may lie partly outside u, so it is read element by element by
    # whichever thread (the fault: 16-byte shared loads from u + 5); t and Y keep their vectors
    assert u.mode == "any" and u.vector == 1
    assert read.vector_width == 4 and read.accesses[0].vector == 4
    assert next(a for a in read.accesses if a.name == "t").vector == 4
    code = mod.rtwin.cuda_source(arch="sm_90")
    assert "*(const uint4*)(u_" not in code.split("line 7:")[1]
    # the copy and the fill, with constant windows, keep their 16-byte vectors
    assert _plan(mod.rtwin, 5).vector_width == 4 and _plan(mod.rtwin, 5).accesses[1].vector == 4


def test_a_window_that_may_leave_its_tile_is_read_by_any_thread_element_by_element():
    # 4 s is a multiple of 4, but the window may lie partly outside x: which thread reads which
    # element of x is not the partition's, so the access is "any" (a barrier guards it, below)
    # and it moves element by element; the rest of the statement keeps its 16-byte vectors
    mod = tilenb.compile(STARTS, backend="cpu")
    store = _plan(mod.win_f32, 7)
    x = next(a for a in store.accesses if a.name == "x")
    t = next(a for a in store.accesses if a.name == "t")
    assert x.mode == "any" and x.vector == 1
    assert store.vector_width == 4 and t.vector == 4 and store.accesses[0].vector == 4
    assert _plan(mod.win_f32, 6).accesses[0].mode == "any"
    # bf16: both windows may leave their tiles: everything element by element
    assert all(a.mode == "any" and a.vector == 1 for a in _plan(mod.win_bf16, 14).accesses)
    i8 = _plan(mod.win_i8, 21)           # the i8 windows element by element, the i32 store 16 bytes
    assert i8.accesses[0].vector_bytes == 16 and all(a.vector == 1 for a in i8.accesses[1:])


def test_a_window_that_may_leave_its_tile_gets_a_barrier():
    mod = tilenb.compile(RACE, backend="cpu")
    a = mod.race.analysis()
    assert [(b.line, b.where) for b in a.barriers] == [(5, "before")]
    assert "__syncthreads();  // barrier (before line 5)" in mod.race.cuda_source()
    for s in (-5, 0, 3, 31):
        x = np.arange(36, dtype=np.float32).reshape(1, 36)
        y = np.full((1, 32), -1.0, np.float32)
        mod.race[1](x, y, s)
        j = np.arange(32)
        ok = (s + j >= 0) & (s + j < 32)
        np.testing.assert_array_equal(y[0, ok], x[0, 1 + s + j[ok]])
        np.testing.assert_array_equal(y[0, ~ok], -1.0)


@pytest.mark.parametrize("s", [-40, -9, -8, -3, -1, 0, 1, 3, 4, 5, 8, 24, 25, 31, 32, 40])
def test_the_cpu_executor_agrees_with_numpy_for_any_start(s):
    mod = tilenb.compile(RTWIN, backend="cpu")
    rng = np.random.default_rng(s + 100)
    x = rng.standard_normal((1, 32)).astype(np.float32)
    y = np.full((1, 32), 7.5, np.float32)
    want = rtwin_ref(x, y, s)
    mod.rtwin[1](x, y, s)
    np.testing.assert_array_equal(y, want)


def _starts_ref(name, x, y0, s):
    y = y0.copy()
    if name == "win_f32":
        t = np.full((4, 64), -1.0, np.float32)
        for j in range(40):
            if 0 <= s + j < 64:
                t[:, s + j] = x[:, j] * 2.0
        for j in range(64):
            if 0 <= 4 * s + j < 64:
                y[:, j] = t[:, j] + x[:, 4 * s + j]
        return y
    if name == "win_bf16":
        import ml_dtypes
        t = np.full((2, 64), 3.0, np.float32)
        xf = x.astype(np.float32)
        for j in range(16):
            if 0 <= 8 * s + j < 64 and 0 <= s + j < 64:
                t[:, 8 * s + j] = xf[:, s + j]
        return (t + 1.0).astype(ml_dtypes.bfloat16)
    xi = x.astype(np.int64)
    for j in range(64):
        if 0 <= s + j < 64 and 0 <= 16 * s + j < 64:
            y[:, j] = (xi[:, s + j] * 3 + xi[:, 16 * s + j]).astype(np.int32)
    return y


def _starts_args(name, rng):
    import ml_dtypes
    if name == "win_f32":
        return rng.standard_normal((4, 64)).astype(np.float32), np.full((4, 64), 9.0, np.float32)
    if name == "win_bf16":
        return (rng.standard_normal((2, 64)).astype(ml_dtypes.bfloat16),
                np.full((2, 64), 5.0, ml_dtypes.bfloat16))
    return rng.integers(-128, 128, (2, 64)).astype(np.int8), np.full((2, 64), -7, np.int32)


@pytest.mark.parametrize("name", ["win_f32", "win_bf16", "win_i8"])
@pytest.mark.parametrize("s", [-20, -3, -1, 0, 1, 2, 3, 5, 7, 12, 63, 70])
def test_runtime_starts_on_the_cpu_agree_with_numpy(name, s):
    mod = tilenb.compile(STARTS, backend="cpu")
    x, y = _starts_args(name, np.random.default_rng(abs(s) * 7 + len(name)))
    want = _starts_ref(name, x, y, s)
    getattr(mod, name)[1](x, y, s)
    np.testing.assert_array_equal(np.asarray(y).astype(np.float64), np.asarray(want).astype(np.float64))


@pytest.mark.gpu
def test_gpu_rtwin_and_random_runtime_starts_match_the_cpu_executor():
    rng = np.random.default_rng(16)
    starts = [5, -3, 0, 1, 4, 31, 40, -40] + [int(v) for v in rng.integers(-70, 71, 24)]
    gpu, cpu = tilenb.compile(RTWIN, backend="cuda"), tilenb.compile(RTWIN, backend="cpu")
    for s in starts:
        x = rng.standard_normal((1, 32)).astype(np.float32)
        yg, yc = np.full((1, 32), 7.5, np.float32), np.full((1, 32), 7.5, np.float32)
        gpu.rtwin[1](x, yg, s)
        cpu.rtwin[1](x, yc, s)
        np.testing.assert_array_equal(yg, yc, err_msg=f"rtwin, s = {s}")
        np.testing.assert_array_equal(yc, rtwin_ref(x, np.full((1, 32), 7.5, np.float32), s))
    gpu, cpu = tilenb.compile(RACE, backend="cuda"), tilenb.compile(RACE, backend="cpu")
    for s in starts:
        x = rng.standard_normal((1, 36)).astype(np.float32)
        yg, yc = np.full((1, 32), -1.0, np.float32), np.full((1, 32), -1.0, np.float32)
        gpu.race[1](x, yg, s)
        cpu.race[1](x, yc, s)
        np.testing.assert_array_equal(yg, yc, err_msg=f"race, s = {s}")
    gpu, cpu = tilenb.compile(STARTS, backend="cuda"), tilenb.compile(STARTS, backend="cpu")
    for name in ("win_f32", "win_bf16", "win_i8"):
        for s in starts:
            x, y0 = _starts_args(name, rng)
            yg, yc = y0.copy(), y0.copy()
            getattr(gpu, name)[1](x, yg, s)
            getattr(cpu, name)[1](x, yc, s)
            np.testing.assert_array_equal(np.asarray(yg).astype(np.float64), np.asarray(yc).astype(np.float64),
                                          err_msg=f"{name}, s = {s}")
