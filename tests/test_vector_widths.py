"""Vector widths and alignment are decided once, in the analysis, and proved: runtime window starts.

A tile window whose start is known only at run time may start anywhere, even partly outside the
tile (spec section 6: the elements outside read as 0 and are invalid). Its alignment is what the
divisibility rules prove of the start, never what the in-tile starts happen to share: `rtwin`
once read `u[0 :+ 1, s :+ 32]` (only start 0 fits inside u) with 16-byte shared loads, and
faulted on the GPU for s = 5 (cudaErrorMisalignedAddress). Checked here: the analysis' widths
(`StatementPlan.vector_width`, `Access.vector`), the CPU executor against numpy for starts in
and out of the tile, and (marked `gpu`) the GPU against the CPU executor for random starts.
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
    assert u.align == 1                 # s is any integer: nothing is proved
    assert read.vector_width == 1 and all(a.vector == 1 for a in read.accesses)
    # the copy and the fill, with constant windows, keep their 16-byte vectors
    assert _plan(mod.rtwin, 5).vector_width == 4 and _plan(mod.rtwin, 5).accesses[1].vector == 4


def test_a_runtime_start_s_multiple_of_four_keeps_16_byte_vectors():
    mod = tilenb.compile(STARTS, backend="cpu")
    store = _plan(mod.win_f32, 7)
    x = next(a for a in store.accesses if a.name == "x")
    assert x.align % 4 == 0 and store.vector_width == 4 and x.vector == 4
    assert _plan(mod.win_f32, 6).vector_width == 1
    # bf16: a start that is a multiple of 8 allows 16 bytes on the written side only if the read
    # side allows it too; here s is any value, so the statement is moved element by element
    assert _plan(mod.win_bf16, 14).vector_width == 1
    i8 = _plan(mod.win_i8, 21)
    assert i8.vector_width == 1          # x[.., s :+ 64] with s any value


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
    gpu, cpu = tilenb.compile(STARTS, backend="cuda"), tilenb.compile(STARTS, backend="cpu")
    for name in ("win_f32", "win_bf16", "win_i8"):
        for s in starts:
            x, y0 = _starts_args(name, rng)
            yg, yc = y0.copy(), y0.copy()
            getattr(gpu, name)[1](x, yg, s)
            getattr(cpu, name)[1](x, yc, s)
            np.testing.assert_array_equal(np.asarray(yg).astype(np.float64), np.asarray(yc).astype(np.float64),
                                          err_msg=f"{name}, s = {s}")
