"""Barriers where a swizzled tile takes the bytes of another tile (fuzzer finding F4, `dead_tile`).

The CUDA generator lays a tile read along its columns out with an XOR swizzle of its 16-byte
units (`tilenb.analysis.copies.tile_swizzles`), so a thread's chunk of such a tile is not at the
bytes the row-major layout gives it. When the lifetimes pack that tile into the bytes of an
earlier one (one never read, or one whose life has ended), the same thread no longer writes the
same bytes in both: the barrier analysis must see the swizzled bytes, or the earlier tile's
writes (or reads) race with the new tile's. Each kernel here is checked three ways: the analysis
places a barrier between the two tiles' statements, the CPU executor gives numpy's result, and
the generated CUDA run on the CPU (tests/support/cuda_emulator.py, threads concurrent) gives it too.
"""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

import tilenb
from tilenb.analysis import analyze
from tilenb.codegen import generate

from support import cuda_emulator as EMU
from support.cuda_emulator import needs_gxx


# F4's reproducer, at tensor extents that are not multiples of the tiles: `dead` is written and
# never read, `v` (swizzled: the transpose reads it along columns) is placed in its bytes.
DEAD = """
@launch(256)
kernel dead_fill(X: tensor<f32>[M, N], Y: tensor<f32>[N, M]) {
  var dead: tile<f16>[8, 24] = 1.0
  var v: tile<f32>[32, 32] = 2.0
  Y[0 :+ 32, 0 :+ 32] = transpose(v * X[0 :+ 32, 0 :+ 32])
}
"""

# The same with a live tile whose life ends: `a` is written at line 3 and read at line 4 (row-major
# chunks), then `v`, swizzled, is written into its bytes (the first hazard met: write after write).
REUSED = """
@launch(256)
kernel reused(X: tensor<f32>[M, N], Y: tensor<f32>[N, M], Z: tensor<f32>[M, N]) {
  var a: tile<f32>[32, 32] = X[0 :+ 32, 0 :+ 32]
  Z[0 :+ 32, 0 :+ 32] = a + 1.0
  var v: tile<f32>[32, 32] = 3.0
  Y[0 :+ 32, 0 :+ 32] = transpose(v * X[0 :+ 32, 0 :+ 32])
}
"""

M, N = 28, 20         # row lengths: multiples of 4 elements (spec), not of the tiles


def _kernel(src, name):
    return tilenb.compile(textwrap.dedent(src).lstrip("\n"), backend="cpu", filename="k.tile").kernels[name]


def _dead_case(rng):
    X = rng.standard_normal((M, N)).astype(np.float32)
    Y = np.full((N, M), -7.0, np.float32)
    return [X, Y], [X, (2.0 * X).T]


def _reused_case(rng):
    X = rng.standard_normal((M, N)).astype(np.float32)
    Y = np.full((N, M), -7.0, np.float32)
    Z = np.full((M, N), -7.0, np.float32)
    return [X, Y, Z], [X, (3.0 * X).T, X + 1.0]


# name: (source, kernel, inputs and expected outputs, line of v's fill, hazard, its earlier line)
CASES = {"dead": (DEAD, "dead_fill", _dead_case, 4, "write after write", 3),
         "reused": (REUSED, "reused", _reused_case, 5, "write after write", 3)}


@pytest.mark.parametrize("case", list(CASES))
def test_the_tiles_share_bytes_and_the_later_one_is_swizzled(case):
    # the premise of the finding: without it the kernels test nothing
    src, name, _, line, _, _ = CASES[case]
    a = analyze(_kernel(src, name).ir())
    earlier = a.lifetimes.tiles[0]
    v = a.tile("v")
    assert v.offset == earlier.offset == 0 and earlier.end < v.start
    assert '"swizzle"' in a.json_text() or any(c.swizzle is not None for c in a.copies)


@pytest.mark.parametrize("case", list(CASES))
def test_a_barrier_separates_the_earlier_tiles_bytes_from_the_swizzled_writes(case):
    src, name, _, line, kind, earlier = CASES[case]
    a = analyze(_kernel(src, name).ir())
    hits = [b for b in a.barriers if b.line == line and b.where == "before" and b.tile == "v"]
    assert len(hits) == 1, a.barriers
    assert hits[0].kind == kind and "bytes of" in hits[0].reason
    assert hits[0].earlier_line == earlier


@pytest.mark.parametrize("case", list(CASES))
def test_the_cpu_executor_gives_numpys_result(case):
    src, name, make, _, _, _ = CASES[case]
    args, want = make(np.random.default_rng(11))
    _kernel(src, name)[(1,)](*args)
    for got, w in zip(args, want):
        np.testing.assert_allclose(got, w, rtol=0, atol=0)


@needs_gxx
@pytest.mark.parametrize("case", list(CASES))
def test_the_emulated_cuda_agrees_with_numpy(case, tmp_path):
    src, name, make, line, _, _ = CASES[case]
    args, want = make(np.random.default_rng(12))
    text = textwrap.dedent(src).lstrip("\n")
    ks = generate(_kernel(src, name).ir(), text)
    assert f"__syncthreads();  // barrier (before line {line}): v:" in ks.source
    EMU.run(ks, args, {"M": M, "N": N}, (1,), workdir=tmp_path)
    for got, w in zip(args, want):
        np.testing.assert_allclose(got, w, rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("case", list(CASES))
def test_on_the_gpu(case):
    src, name, make, _, _, _ = CASES[case]
    mod = tilenb.compile(textwrap.dedent(src).lstrip("\n"), backend="cuda", filename="k.tile")
    for seed in range(5):
        args, want = make(np.random.default_rng(20 + seed))
        mod.kernels[name][(1,)](*args)
        for got, w in zip(args, want):
            np.testing.assert_allclose(got, w, rtol=0, atol=0)
