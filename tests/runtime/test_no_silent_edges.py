"""No silent edges: a debug launch notes the elements a tile store leaves unwritten (spec 15.2).

The kernels a newcomer wrote naively (issue 21: a 3-point moving average whose halo loses its
edges, three ways; a row softmax with a 1024 tile over 1100 columns; a bias + ReLU whose grid is
`N / 64`), each run with `debug=True`, get an `EdgeWarning` naming the unwritten elements and
the operand and line that made them invalid, or that no store's window reaches them; the same
text is in `kernel.last_run.notes`. The expected element sets are written here by hand from the
shapes, and checked against the outputs (poisoned with NaN before the launch). Fixed versions,
launches without debug, elements outside the tensor, and tensors written by per-thread code get
no note. The puzzles' checker words the same cause with the same code.
"""
from __future__ import annotations

import textwrap
import warnings

import numpy as np
import pytest

import tilenb
from tilenb import EdgeWarning, puzzles


def compile_cpu(src):
    return tilenb.compile(textwrap.dedent(src).lstrip("\n"), backend="cpu")


def run_debug(kernel, *args, grid=None, debug=True):
    """Launch with debug; -> the EdgeWarnings' texts (each warning also checked to point here)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (kernel[grid] if grid is not None else kernel)(*args, debug=debug)
    edges = [w for w in caught if issubclass(w.category, EdgeWarning)]
    for w in edges:
        assert w.filename == __file__, w.filename        # attributed to the launching line
    texts = tuple(str(w.message) for w in edges)
    assert texts == kernel.last_run.notes
    return texts


N = 1000

HALO_VAR = """
@launch(256)
@grid(cdiv(N, 256))
kernel avg3(X: tensor<f32>[N], Y: tensor<f32>[N]) {
  let s = ctx.block.x * 256
  var x = X[s - 1 :+ 256 + 2]
  Y[s :+ 256] = (x[0 :+ 256] + x[1 :+ 256] + x[2 :+ 256]) / 3.0
}
"""
HALO_FILL_ASSIGN = """
@launch(256)
@grid(cdiv(N, 256))
kernel avg3(X: tensor<f32>[N], Y: tensor<f32>[N]) {
  let s = ctx.block.x * 256
  var x: tile<f32>[256 + 2] = 0.0
  x = X[s - 1 :+ 256 + 2]
  Y[s :+ 256] = (x[0 :+ 256] + x[1 :+ 256] + x[2 :+ 256]) / 3.0
}
"""
HALO_SLICES = """
@launch(256)
@grid(cdiv(N, 256))
kernel avg3(X: tensor<f32>[N], Y: tensor<f32>[N]) {
  let s = ctx.block.x * 256
  Y[s :+ 256] = (X[s - 1 :+ 256] + X[s :+ 256] + X[s + 1 :+ 256]) / 3.0
}
"""
HALO_FIXED = """
@launch(256)
@grid(cdiv(N, 256))
kernel avg3(X: tensor<f32>[N], Y: tensor<f32>[N]) {
  let s = ctx.block.x * 256
  var x: tile<f32>[256 + 2] = 0.0
  x[:] = X[s - 1 :+ 256 + 2]
  Y[s :+ 256] = (x[0 :+ 256] + x[1 :+ 256] + x[2 :+ 256]) / 3.0
}
"""
SOFTMAX = """
@launch(256)
@grid(M)
kernel softmax(X: tensor<f32>[M, 1100], Y: tensor<f32>[M, 1100]) {
  let r = ctx.block.x
  var x = X[r :+ 1, 0 :+ 1024]
  var e = exp(x - rowmax(x))
  Y[r :+ 1, 0 :+ 1024] = e / rowsum(e)
}
"""
RELU = """
@launch(128)
@grid(cdiv(M, 8), N / 64)
kernel relu_wb(X: tensor<f32>[M, N], W: tensor<f32>[1, N], B: tensor<f32>[1, N], Y: tensor<f32>[M, N]) {
  let r = ctx.block.x * 8
  let c = ctx.block.y * 64
  Y[r :+ 8, c :+ 64] = max(X[r :+ 8, c :+ 64] * W[0 :+ 1, c :+ 64] + B[0 :+ 1, c :+ 64], 0.0)
}
"""


def _moving_average(src):
    mod = compile_cpu(src)
    X = np.random.default_rng(0).random(N).astype(np.float32)
    Y = np.full(N, np.nan, np.float32)
    notes = run_debug(mod.avg3, X, Y)
    want = np.full(N, np.nan)
    want[1:-1] = (X[:-2].astype(np.float64) + X[1:-1] + X[2:]) / 3.0
    np.testing.assert_allclose(Y[1:-1], want[1:-1], rtol=1e-6)
    assert np.isnan(Y[0]) and np.isnan(Y[-1])          # what the notes say: the two ends
    return notes


# ---- the five newcomer kernels -------------------------------------------------------------------------
def test_halo_tile_from_a_shifted_slice_names_the_slice_and_the_tile():
    (note,) = _moving_average(HALO_VAR)
    assert note.startswith("Y[0] and Y[999] not written (kernel 'avg3', line 6: `Y[s :+ 256] = ")
    assert "inside the store's window and inside Y, but the value is invalid there" in note
    assert ("At Y[0]: `X[s - 1 :+ 256 + 2]` (line 5) reaches X[-1], outside X (shape [1000]), and the store "
            "reads it through tile `x` (line 5)") in note
    assert "zero padding" in note and "`h[:] = X[...]`" in note


def test_filled_tile_assigned_whole_names_the_assignment_and_the_window_store_fix():
    (note,) = _moving_average(HALO_FILL_ASSIGN)
    assert note.startswith("Y[0] and Y[999] not written (kernel 'avg3', line 7")
    assert "`X[s - 1 :+ 256 + 2]` (line 6) reaches X[-1], outside X" in note
    assert "Tile `x` took that invalid region at line 6, assigned whole from `X[s - 1 :+ 256 + 2]`" in note
    assert "store into a window of it instead: `x[:] = ...`" in note


def test_three_shifted_slices_name_both_ends_causes():
    (note,) = _moving_average(HALO_SLICES)
    assert "At Y[0]: `X[s - 1 :+ 256]` (line 5) reaches X[-1], outside X (shape [1000])" in note
    assert "At Y[999]: `X[s + 1 :+ 256]` (line 5) reaches X[1000], outside X (shape [1000])" in note
    assert note.count("spec section 8") == 1 and note.count("zero padding") == 1   # the rule and fix once


def test_softmax_with_a_tile_narrower_than_the_row_names_the_columns_no_store_reaches():
    mod = compile_cpu(SOFTMAX)
    M = 3
    X = np.random.default_rng(1).standard_normal((M, 1100)).astype(np.float32)
    Y = np.full((M, 1100), np.nan, np.float32)
    (note,) = run_debug(mod.softmax, X, Y)
    assert np.isnan(Y[:, 1024:]).all() and not np.isnan(Y[:, :1024]).any()
    assert note.startswith("Y[0..2, 1024..1099] (228 elements: columns 1024..1099 of every row) not written "
                           "(kernel 'softmax'): no store's window reaches them; the stores into Y (line 7) cover "
                           "Y[0..2, 0..1023]")
    assert "a tile narrower than the row needs a loop over the row" in note


def test_a_grid_of_n_over_64_names_the_columns_it_leaves_out():
    mod = compile_cpu(RELU)
    M, Nc = 20, 200
    rng = np.random.default_rng(2)
    X, W, B = (rng.standard_normal(s).astype(np.float32) for s in ((M, Nc), (1, Nc), (1, Nc)))
    Y = np.full((M, Nc), np.nan, np.float32)
    (note,) = run_debug(mod.relu_wb, X, W, B, Y)
    np.testing.assert_allclose(Y[:, :192], np.maximum(X * W + B, 0)[:, :192], rtol=1e-6)
    assert np.isnan(Y[:, 192:]).all()
    assert note.startswith("Y[0..19, 192..199] (160 elements: columns 192..199 of every row) not written "
                           "(kernel 'relu_wb'): no store's window reaches them")
    assert "over the grid (3, 3, 1)" in note


ROWS_SHORT = """
@launch(256)
@grid(cdiv(N, 64), M / 16)
kernel add_one(A: tensor<f32>[M, N], C: tensor<f32>[M, N]) {
  let r = ctx.block.y * 16
  let c = ctx.block.x * 64
  C[r :+ 16, c :+ 64] = A[r :+ 16, c :+ 64] + 1.0
}
"""


def test_rows_no_cta_reached_get_advice_about_rows_not_columns():
    # M / 16 CTAs along y: 37 rows get 2 CTAs of 16, rows 32..36 are left out
    mod = compile_cpu(ROWS_SHORT)
    A = np.random.default_rng(4).standard_normal((37, 300)).astype(np.float32)
    C = np.full(A.shape, np.nan, np.float32)
    (note,) = run_debug(mod.add_one, A, C)
    assert np.isnan(C[32:]).all() and not np.isnan(C[:32]).any()
    np.testing.assert_allclose(C[:32], A[:32] + 1.0)
    assert note.startswith("C[32..36, 0..299] (1500 elements: rows 32..36) not written")
    assert ("The stores reach rows 0..31 of the 37, 16 per CTA: launch cdiv(37, 16) = 3 CTAs along y "
            "(ctx.block.y), which has 2") in note
    assert "loop over the row," not in note and "narrower than the row" not in note   # advice for columns


def test_columns_no_cta_reached_name_the_figures_and_the_loop():
    mod = compile_cpu(SOFTMAX)
    X = np.random.default_rng(1).standard_normal((3, 1100)).astype(np.float32)
    (note,) = run_debug(mod.softmax, X, np.full((3, 1100), np.nan, np.float32))
    assert ("The stores reach columns 0..1023 of the 1100, 1024 per CTA: a tile narrower than the row needs a "
            "loop over the row, 1024 columns a turn, or cdiv(1100, 1024) = 2 CTAs") in note


# ---- what gets no note ---------------------------------------------------------------------------------
def test_zero_padding_through_a_window_store_gets_no_note():
    mod = compile_cpu(HALO_FIXED)
    X = np.random.default_rng(3).random(N).astype(np.float32)
    Y = np.full(N, np.nan, np.float32)
    assert run_debug(mod.avg3, X, Y) == ()
    xp = np.concatenate([[0.0], X.astype(np.float64), [0.0]])
    np.testing.assert_allclose(Y, (xp[:-2] + xp[1:-1] + xp[2:]) / 3.0, rtol=1e-6)


def test_without_debug_nothing_is_noted():
    mod = compile_cpu(HALO_VAR)
    X, Y = np.ones(N, np.float32), np.zeros(N, np.float32)
    assert run_debug(mod.avg3, X, Y, debug=False) == ()
    assert mod.avg3.last_run.notes == ()


def test_a_window_past_the_end_of_the_tensor_is_not_noted():
    # the last CTA's window runs past Y's end; the elements outside are no one's business
    mod = compile_cpu("""
    @launch(128)
    @grid(cdiv(N, 256))
    kernel copy(X: tensor<f32>[N], Y: tensor<f32>[N]) {
      Y[ctx.block.x * 256 :+ 256] = X[ctx.block.x * 256 :+ 256] * 2.0
    }
    """)
    X = np.arange(N, dtype=np.float32)
    Y = np.zeros(N, np.float32)
    assert run_debug(mod.copy, X, Y) == ()
    np.testing.assert_array_equal(Y, 2 * X)


def test_tensors_written_by_per_thread_code_get_no_coverage_note():
    # empty bins of a histogram are data, not an edge
    mod = compile_cpu("""
    @launch(64)
    @grid(1)
    kernel hist(X: tensor<i32>[N], H: tensor<i32>[16]) {
      for i in range(ctx.thread, N, 64) {
        atomic_add(H[X[i]], 1)
      }
    }
    """)
    X = np.array([1, 1, 3, 7] * 5, np.int32)
    H = np.zeros(16, np.int32)
    assert run_debug(mod.hist, X, H) == ()
    np.testing.assert_array_equal(H, np.bincount(X, minlength=16))


# ---- stores through views, tile atomics, 2-D -------------------------------------------------------------
def test_store_through_a_view_and_2d_windows_name_the_operand():
    mod = compile_cpu("""
    @launch(128)
    @grid(cdiv(M, 4))
    kernel shift_rows(X: tensor<f32>[M, 64], Y: tensor<f32>[M, 64]) {
      let r = ctx.block.x * 4
      let out = Y[r :+ 4, :]
      out[0 :+ 4, 0 :+ 64] = X[r + 1 :+ 4, :] - X[r :+ 4, :]
    }
    """)
    M = 10
    X = np.random.default_rng(4).random((M, 64)).astype(np.float32)
    Y = np.full((M, 64), np.nan, np.float32)
    (note,) = run_debug(mod.shift_rows, X, Y)
    assert np.isnan(Y[M - 1]).all() and not np.isnan(Y[:M - 1]).any()
    assert note.startswith("Y[9, 0..63] (64 elements: rows 9) not written (kernel 'shift_rows', line 6")
    assert "At Y[9, 0]: `X[r + 1 :+ 4, :]` (line 6) reaches X[10, 0], outside X (shape [10, 64])" in note


def test_a_tile_atomic_notes_the_elements_it_does_not_update():
    mod = compile_cpu("""
    @launch(64)
    @grid(cdiv(N, 32))
    kernel diffs(X: tensor<f32>[N], Out: tensor<f32>[N]) {
      let s = ctx.block.x * 32
      atomic_add(Out[s :+ 32], X[s + 2 :+ 32] - X[s :+ 32])
    }
    """)
    n = 100
    X = np.arange(n, dtype=np.float32) ** 2
    Out = np.zeros(n, np.float32)
    (note,) = run_debug(mod.diffs, X, Out)
    np.testing.assert_array_equal(Out[:98], X[2:] - X[:98])
    assert (Out[98:] == 0).all()
    assert note.startswith("Out[98..99] (2 elements) not updated (kernel 'diffs', line 5")
    assert "inside the atomic's window and inside Out" in note
    assert "At Out[98]: `X[s + 2 :+ 32]` (line 5) reaches X[100], outside X (shape [100])" in note


# ---- the checker and the debug notes say the same --------------------------------------------------------
def test_the_checker_words_the_cause_as_the_debug_note_does():
    body = """
  let b = ctx.block.x * 256
  Y[b :+ 256] = (X[b - 1 :+ 256] + X[b :+ 256] + X[b + 1 :+ 256]) / 3.0"""
    src = puzzles.get("moving_average").signature + " {\n" + body.strip("\n") + "\n}\n"
    report = puzzles.check("moving_average", src).report
    mod = tilenb.compile(src, backend="cpu")
    k = list(mod.kernels.values())[0]
    X = np.random.default_rng(5).random(N).astype(np.float32)
    (note,) = run_debug(k, X, np.zeros(N, np.float32))
    line = [i + 1 for i, t in enumerate(src.split("\n")) if "X[b - 1 :+ 256]" in t][0]
    cause = f"`X[b - 1 :+ 256]` (line {line}) reaches X[-1], outside X (shape "
    assert cause in note and cause in report
    rule = note.split(cause, 1)[1].split(" At Y[")[0].split(")", 1)[1]    # after the shape: the rule
    assert "spec section 8" in rule and rule in report


@pytest.mark.gpu
def test_debug_on_the_cuda_backend_notes_the_same_edges():
    mod = tilenb.compile(textwrap.dedent(HALO_VAR).lstrip("\n"), backend="cuda")
    X = np.random.default_rng(6).random(N).astype(np.float32)
    Y = np.full(N, np.nan, np.float32)
    (note,) = run_debug(mod.avg3, X, Y)
    assert note.startswith("Y[0] and Y[999] not written (kernel 'avg3', line 6")
    assert np.isnan(Y[0]) and np.isnan(Y[-1]) and not np.isnan(Y[1:-1]).any()
