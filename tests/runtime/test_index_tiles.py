"""The index tiles rows(R, C[, s]) and cols(R, C[, s]) (spec section 10): element (i, j) is s + i
(rows) or s + j (cols), an i32 tile, wholly valid.

Checked on the CPU executor against numpy (per-CTA starts, broadcast shapes, transposes, masks
over partial tiles whose valid region stays the data's), on the generic CUDA path emulated on the
CPU (tests/support/cuda_emulator.py) against the same numpy values, and the checker's errors,
each naming the argument at fault.
"""
from __future__ import annotations

import numpy as np
import pytest

import tilenb
from tilenb.codegen import generate
from tilenb.codegen.nvrtc import nvrtc_available, nvrtc_compile

from support import cuda_emulator as EMU  # noqa: E402
from support.cuda_emulator import needs_gxx  # noqa: E402

# A block of 32 x 16 per CTA; tensors of 70 x 44 (neither a multiple of the block).
MASKS = """
@launch(128)
kernel masks(X: tensor<f32>[M, N], low: tensor<f32>[M, N], idx: tensor<i32>[M, N], band: tensor<f32>[M, N],
             tr: tensor<i32>[M, N], w: i32) {
  let r = ctx.block.x * 32
  let c = ctx.block.y * 16
  var x = X[r :+ 32, c :+ 16]
  low[r :+ 32, c :+ 16] = where(cols(32, 16, c) <= rows(32, 16, r), x, -1.0)
  idx[r :+ 32, c :+ 16] = rows(32, 16) * 1000 + cols(1, 16, c) + rows(32, 1, w) * 0
  band[r :+ 32, c :+ 16] = where(rows(32, 1, r) - cols(1, 16, c) < w && cols(32, 16, c) <= rows(32, 16, r), x, 0.0)
  tr[r :+ 32, c :+ 16] = transpose(rows(16, 32, c)) + i32(ctx.block.x) * 0
}
"""
M, N = 70, 44
GRID = (3, 3)


def _args(seed=0):
    x = np.random.default_rng(seed).random((M, N)).astype(np.float32)
    fill = lambda dt: np.full((M, N), -7, dt)  # noqa: E731  (a sentinel: elements not written keep it)
    return [x, fill(np.float32), fill(np.int32), fill(np.float32), fill(np.int32), 5]


def _want(x, w):
    i, j = np.arange(M)[:, None], np.arange(N)[None, :]
    low = np.where(j <= i, x, -1.0)
    idx = np.broadcast_to((i % 32) * 1000 + j, (M, N))
    band = np.where((i - j < w) & (j <= i), x, 0.0)
    tr = np.broadcast_to(j, (M, N))          # transpose(rows(16, 32, c)): element (i, j) is c + j
    return [low, idx, band, tr]


def _check(args):
    for got, want, what in zip(args[1:5], _want(args[0], args[5]), ("low", "idx", "band", "tr")):
        np.testing.assert_array_equal(got, want.astype(got.dtype), err_msg=what)


def test_cpu_index_tiles_match_numpy():
    args = _args()
    tilenb.compile(MASKS, backend="cpu").masks[GRID](*args)
    _check(args)


@needs_gxx
def test_emulated_generic_index_tiles_match_numpy():
    args = _args(1)
    k = tilenb.compile(MASKS, backend="cpu").masks
    EMU.run(generate(k.ir(), MASKS), args, {"M": M, "N": N}, GRID)
    _check(args)


@pytest.mark.skipif(not nvrtc_available(), reason="needs NVRTC")
def test_generic_index_tiles_compile():
    assert nvrtc_compile(tilenb.compile(MASKS, backend="cpu").masks.cuda_source(arch="sm_90"), "sm_90")


@pytest.mark.gpu
def test_gpu_index_tiles_match_numpy():
    args = _args(2)
    tilenb.compile(MASKS, backend="cuda").masks[GRID](*args)
    _check(args)


def test_a_mask_keeps_the_data_s_valid_region():
    """where() over an index tile is valid where its data is (spec 8 rule 4): past the tensor's
    last row nothing is written, and a row sum skips the invalid elements."""
    text = """
@launch(64)
kernel k(X: tensor<f32>[M, 8], S: tensor<f32>[M, 1]) {
  let r = ctx.block.x * 16
  S[r :+ 16, :] = rowsum(where(cols(16, 8) <= rows(16, 8, r) % 8, X[r :+ 16, :], 0.0))
}
"""
    x = np.random.default_rng(3).random((21, 8)).astype(np.float32)
    s = np.full((21, 1), -7, np.float32)
    tilenb.compile(text, backend="cpu").k[2](x, s)
    i, j = np.arange(21)[:, None], np.arange(8)[None, :]
    np.testing.assert_allclose(s, np.where(j <= i % 8, x, 0.0).sum(axis=1, keepdims=True), rtol=1e-6)


def test_index_values_are_i32_and_wrap():
    text = """
@launch(32)
kernel k(Y: tensor<i32>[1, 4], s: i64) {
  Y[0 :+ 1, :] = cols(1, 4, s)
}
"""
    y = np.zeros((1, 4), np.int32)
    tilenb.compile(text, backend="cpu").k[1](y, np.int64(2 ** 31 - 2))
    np.testing.assert_array_equal(y, np.array([[2 ** 31 - 2, 2 ** 31 - 1, -2 ** 31, -2 ** 31 + 1]], np.int64).astype(np.int32))


# ---- errors -------------------------------------------------------------------------------------------
K = """kernel k(X: tensor<f32>[N, 8], Y: tensor<i32>[N, 8], n: i32) {
  let r = ctx.block.x * 8
  Y[r :+ 8, :] = %s
}
"""


@pytest.mark.parametrize("call,err,words", [
    ("rows(n, 8)", tilenb.TileShapeError, "the row count R must be a constant"),
    ("cols(8, N)", tilenb.TileShapeError, "the column count C must be a constant"),
    ("rows(8, 0)", tilenb.TileShapeError, "at least 1"),
    ("rows(8, 8, ctx.thread)", tilenb.TileRuleError, "per-thread value"),
    ("rows(8, 8, ctx.warp)", tilenb.TileRuleError, "'ctx.warp' is a per-warp value"),
    ("rows(8, 8, 1.5)", tilenb.TileTypeError, "must be a signed integer or index scalar"),
    ("cols(8, 8, X[r :+ 8, :])", tilenb.TileTypeError, "must be a signed integer or index scalar"),
    ("rows(8, 8, u8(n))", tilenb.TileTypeError, "u8 is a storage type: convert it first"),
    ("cols(3000000000, 8)", tilenb.TileShapeError, "must be at most 2147483648"),
    ("rows(8)", tilenb.TileRuleError, "rows(R, C) or rows(R, C, start)"),
    ("cols(8, 8, r, r)", tilenb.TileRuleError, "cols(R, C) or cols(R, C, start)"),
    ("rows(4, 8)", tilenb.TileShapeError, None),
], ids=["runtime_R", "dim_C", "zero", "per_thread_start", "per_warp_start", "float_start", "tile_start", "u8_start", "huge_R",
        "too_few", "too_many", "shape_mismatch"])
def test_bad_index_tiles_are_refused_naming_the_argument(call, err, words):
    with pytest.raises(err) as e:
        tilenb.compile(K % call, backend="cpu")
    if words is not None:
        assert words in e.value.message
    assert e.value.line == 3


def test_an_index_tile_takes_no_memory_on_the_cpu_executor():
    """An index tile read elementwise holds no bytes (spec section 10), so the reference executor
    must not build all R x C elements of it: rowsum(rows(4, 2**23)) reads 32 M indices, which as
    an i32 array would be 128 MB (and each CTA of a batch its own copy)."""
    import tracemalloc

    text = """
@launch(128)
kernel k(Y: tensor<i32>[4, 4]) {
  Y[0 :+ 4, 0 :+ 1] = rowsum(rows(4, 8388608, 3))
}
"""
    mod = tilenb.compile(text, backend="cpu")
    y = np.zeros((4, 4), np.int32)
    tracemalloc.start()
    try:
        mod.k[1](y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(y[:, 0], (3 + np.arange(4)) * 8388608)
    assert peak < 80 * 2 ** 20, f"the launch allocated {peak / 2 ** 20:.0f} MB"


@pytest.mark.parametrize("body,where", [
    ("  var t: tile<f32>[rows, 4] = 0.0\n", "a tile's dimension"),
    ("  var t = X[0 :+ cols, :]\n", "a slice's length"),
])
def test_a_built_in_name_as_an_extent_is_named_a_function_not_undefined(body, where):
    with pytest.raises(tilenb.TileNameError) as e:
        tilenb.compile("kernel k(X: tensor<f32>[N, 8]) {\n" + body + "}\n", backend="cpu")
    assert "is a built-in function, not a constant" in e.value.message and where in e.value.message
    assert "not defined" not in e.value.message and e.value.line == 2


def test_rows_and_cols_are_reserved_names():
    with pytest.raises(tilenb.TileError) as e:
        tilenb.compile("kernel k(X: tensor<f32>[N]) {\n  let rows = 3\n}\n", backend="cpu")
    assert "rows" in e.value.message


# Index tiles inside reductions and inside a tensor-core dot (converted to f16: the dot's
# operands are then expressions evaluated at each fragment element, on mma.sync).
REDUCED = """
@launch(128)
kernel reduced(A: tensor<f32>[M, 16], R: tensor<i32>[M, 1], Cm: tensor<i32>[M, 16], D: tensor<f32>[M, 16], s: i32) {
  let r = ctx.block.x * 32
  R[r :+ 32, :] = rowsum(cols(32, 16, s)) + rows(32, 1, r)
  Cm[r :+ 1, :] = colmax(rows(32, 16, r))
  D[r :+ 32, :] = dot(f16(rows(32, 16, r) % 7), f16(cols(16, 16) - rows(16, 16))) + A[r :+ 32, :]
}
"""


def _reduced_args(m=70):
    return [np.random.default_rng(4).random((m, 16)).astype(np.float32), np.full((m, 1), -7, np.int32),
            np.full((m, 16), -7, np.int32), np.full((m, 16), np.nan, np.float32), 3]


def _reduced_want(a):
    m = a[0].shape[0]
    i = np.arange(m)[:, None]
    R = sum(3 + j for j in range(16)) + i
    Cm = np.full((m, 16), -7)
    for r in range(0, m, 32):
        Cm[r] = r + 31                          # the block's last row index (valid all along)
    W = (np.arange(16)[None, :] - np.arange(16)[:, None]).astype(np.float64)
    D = np.repeat(i % 7, 16, axis=1).astype(np.float64) @ W + a[0]
    return R, Cm, D


def test_cpu_index_tiles_in_reductions_and_dots_match_numpy():
    a = _reduced_args()
    tilenb.compile(REDUCED, backend="cpu").reduced[3](*a)
    R, Cm, D = _reduced_want(a)
    np.testing.assert_array_equal(a[1], R)
    np.testing.assert_array_equal(a[2], Cm)
    np.testing.assert_allclose(a[3], D, rtol=1e-6, atol=1e-5)


@needs_gxx
@pytest.mark.parametrize("arch", [None, "sm_90"])
def test_emulated_index_tiles_in_reductions_and_dots_match_numpy(arch):
    k = tilenb.compile(REDUCED, backend="cpu").reduced
    assert "mma.sync" in k.cuda_source(arch=arch)
    a = _reduced_args()
    EMU.run(generate(k.ir(), REDUCED, 0, arch=arch), a, {"M": 70}, (3,))
    R, Cm, D = _reduced_want(a)
    np.testing.assert_array_equal(a[1], R)
    np.testing.assert_array_equal(a[2], Cm)
    np.testing.assert_allclose(a[3], D, rtol=1e-6, atol=1e-5)
