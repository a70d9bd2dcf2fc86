"""Debug launches of the CPU executor find what the compiler cannot: shared-tile races between
threads with no barrier() between them, per-thread element accesses out of bounds, and barriers
that some threads never reach. Each error names the kernel, the line, the threads and the
element; a correct kernel stays quiet and computes the same result as without debug.
"""
import textwrap

import numpy as np
import pytest

import tilenb
from tilenb.lang.diagnostics import LaunchError, OutOfBoundsError, RaceError


def kernel(src, debug=True):
    mod = tilenb.compile(textwrap.dedent(src).lstrip("\n"), backend="cpu", debug=debug, filename="k.tile")
    return next(iter(mod.kernels.values()))


SCAN = """
@launch(64)
kernel scan(X: tensor<i32>[N], Y: tensor<i32>[N]) {
  let t = ctx.thread
  var buf: tile<i32>[2, 64]
  buf[0, t] = X[t]
  barrier()
  var src = 0
  var off = 1
  while off < 64 {
    var v = buf[src, t]
    if t >= off {
      v += buf[src, t - off]
    }
    buf[1 - src, t] = v
    BARRIER
    src = 1 - src
    off = off * 2
  }
  Y[t] = buf[src, t]
}
"""


def test_correct_scan_is_quiet_and_same_result():
    X = np.random.default_rng(0).integers(-9, 9, 64).astype(np.int32)
    Y = np.zeros(64, np.int32)
    kernel(SCAN.replace("BARRIER", "barrier()"))[1](X, Y)
    np.testing.assert_array_equal(Y, np.cumsum(X))


def test_planted_race_in_scan_is_reported_with_line_threads_and_element():
    k = kernel(SCAN.replace("BARRIER", "// barrier() forgotten"))
    X = np.arange(64, dtype=np.int32)
    Y = np.zeros(64, np.int32)
    with pytest.raises(RaceError) as info:
        k[1](X, Y)
    e = info.value
    assert isinstance(e, LaunchError)
    msg = str(e)
    assert "kernel 'scan'" in msg and "tile 'buf'" in msg
    # round 2 reads buf[1, t - 2] (line 12), which thread t - 2 wrote in round 1 (line 14)
    assert "tile 'buf'[1, 0] in CTA (0, 0, 0): thread 2 reads it at line 12, but thread 0 wrote it at line 14" in msg
    assert e.line == 12 and e.filename == "k.tile"
    assert "k.tile:12:" in msg and "^" in msg          # positioned, with the source line


def test_write_after_read_race():
    k = kernel("""
    @launch(32)
    kernel war(X: tensor<f32>[32], Y: tensor<f32>[32]) {
      let t = ctx.thread
      var buf: tile<f32>[1, 32]
      buf[0, t] = X[t]
      barrier()
      let right = buf[0, (t + 1) % 32]
      buf[0, t] = right * 2.0
      barrier()
      Y[t] = buf[0, t]
    }
    """)
    with pytest.raises(RaceError) as info:
        k[1](np.ones(32, np.float32), np.zeros(32, np.float32))
    msg = str(info.value)
    assert info.value.line == 8
    assert "thread 0 writes it at line 8, but thread 31 read it at line 7" in msg
    assert "tile 'buf'[0, 0]" in msg


def test_two_threads_writing_one_element_race():
    k = kernel("""
    @launch(32)
    kernel waw(Y: tensor<i32>[16]) {
      let t = ctx.thread
      var buf: tile<i32>[1, 16]
      buf[0, t / 2] = i32(t)
      barrier()
      if t < 16 { Y[t] = buf[0, t] }
    }
    """)
    with pytest.raises(RaceError, match=r"threads 0 and 1 both write it at line 5"):
        k[1](np.zeros(16, np.int32))


UNIFORM = """
@launch(32)
kernel k(X: tensor<f32>[1, 32], Y: tensor<f32>[1, 32]) {
  let t = ctx.thread
  var buf: tile<f32>[1, 32]
  buf[0, 0] = 5.0                   // every thread writes the same value: no race among them
  let five = buf[0, 0]              // every thread reads it back: fine after a uniform write
  SYNC
  buf[0, t] = X[0, t] + five        // thread 0 overwrites what all threads read
  var tot = rowsum(buf)             // a tile statement: synchronized on both sides
  Y[0, t] = tot[0, 0] - buf[0, (t + 1) % 32]
}
"""


def test_uniform_stores_and_tile_statements_synchronize():
    X = np.arange(32, dtype=np.float32).reshape(1, 32)
    Y = np.zeros((1, 32), np.float32)
    kernel(UNIFORM.replace("SYNC", "barrier()"))[1](X, Y)
    b = X[0] + 5
    np.testing.assert_allclose(Y[0], b.sum() - np.roll(b, -1))
    with pytest.raises(RaceError) as info:
        kernel(UNIFORM.replace("SYNC", "// no barrier"))[1](X, Y)
    assert "tile 'buf'[0, 0]" in str(info.value)
    assert "thread 0 writes it at line 8, but every thread wrote it at line 5" in str(info.value)


def test_out_of_bounds_tensor_write_names_tensor_thread_and_coordinates():
    k = kernel("""
    @launch(64)
    kernel oob(X: tensor<f32>[N], Y: tensor<f32>[N]) {
      let i = ctx.block.x * 64 + ctx.thread
      Y[i] = X[i] * 2.0
    }
    """)
    X = np.ones(100, np.float32)
    Y = np.zeros(100, np.float32)
    with pytest.raises(OutOfBoundsError) as info:
        k[2](X, Y)
    msg = str(info.value)
    # the read of X[100] by thread 36 of CTA 1 comes first
    assert "thread 36 of CTA (1, 0, 0) reads tensor X[100], outside its extent [100]" in msg
    assert info.value.line == 4
    k2 = kernel("""
    @launch(64)
    kernel oob_write(X: tensor<f32>[N], Y: tensor<f32>[N]) {
      let i = ctx.block.x * 64 + ctx.thread
      if i < N { Y[i + 1] = X[i] }
    }
    """)
    Y[:] = 0
    with pytest.raises(OutOfBoundsError, match=r"thread 35 of CTA \(1, 0, 0\) writes tensor Y\[100\]"):
        k2[2](X, Y)
    # without debug the write outside Y is skipped and the rest is written
    Y[:] = 0
    kernel(textwrap.dedent("""
    @launch(64)
    kernel oob_write(X: tensor<f32>[N], Y: tensor<f32>[N]) {
      let i = ctx.block.x * 64 + ctx.thread
      if i < N { Y[i + 1] = X[i] }
    }
    """), debug=False)[2](np.arange(100, dtype=np.float32), Y)
    np.testing.assert_array_equal(Y[1:], np.arange(99))


def test_out_of_bounds_tile_element():
    k = kernel("""
    @launch(32)
    kernel k(Y: tensor<f32>[32]) {
      let t = ctx.thread
      var buf: tile<f32>[1, 32] = 1.0
      Y[t] = buf[0, t + 1]
    }
    """)
    with pytest.raises(OutOfBoundsError, match=r"thread 31 of CTA \(0, 0, 0\) reads tile buf\[0, 32\], outside its extent \[1, 32\]"):
        k[1](np.zeros(32, np.float32))
    Y = np.full(32, 7.0, np.float32)
    kernel("""
    @launch(32)
    kernel k(Y: tensor<f32>[32]) {
      let t = ctx.thread
      var buf: tile<f32>[1, 32] = 1.0
      Y[t] = buf[0, t + 1]
    }
    """, debug=False)[1](Y)
    assert list(Y) == [1.0] * 31 + [0.0]       # outside the tile reads 0


def test_debug_flag_on_the_launch_overrides_the_module():
    k = kernel(SCAN.replace("BARRIER", "// none"), debug=False)
    X = np.arange(64, dtype=np.int32)
    k[1](X, np.zeros(64, np.int32))                 # no check: runs (lockstep gives some result)
    with pytest.raises(RaceError):
        k[1](X, np.zeros(64, np.int32), debug=True)


def test_out_of_bounds_through_a_view():
    src = """
    @launch(32)
    kernel k(X: tensor<f32>[N], Y: tensor<f32>[N]) {
      let v = X[-1 :+ 16]
      let w = v[4 :+ 8]
      let t = ctx.thread
      if t < 4 { Y[t] = v[t] }
      if t >= 4 && t < 8 { Y[t] = w[t + 4] }   // w is X[3 :+ 8]: w[8] is X[11]
    }
    """
    with pytest.raises(OutOfBoundsError, match=r"thread 0 of CTA \(0, 0, 0\) reads tensor X\[-1\] through the view 'v', outside its extent \[32\]"):
        kernel(src)[1](np.ones(32, np.float32), np.zeros(32, np.float32))
    src2 = src.replace("if t < 4 { Y[t] = v[t] }", "")
    with pytest.raises(OutOfBoundsError, match=r"thread 4 of CTA \(0, 0, 0\) reads tensor X\[11\] through the view 'w', outside the view's window"):
        kernel(src2)[1](np.ones(32, np.float32), np.zeros(32, np.float32))
