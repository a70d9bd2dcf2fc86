"""CTA-wide row reductions that read tensor windows directly (`rowsum(X[r :+ 2, c :+ L] * ...)`):
each chunk is one 16-, 8- or 4-byte vector load when the window provably starts every chunk on a
multiple of the chunk (the analysis' `row_reductions`, tilenb/analysis/ownership.py), element
loads otherwise; equal windows in one statement share one load (docs/cuda-backend.md).

Checked here without a GPU: which windows are read as vectors, the shared load, NVRTC for sm_80
and sm_90, the CPU executor against numpy. On a GPU (marked `gpu`): against numpy with rows past
the tensor's edge (their vector loads must be skipped) and rows shorter than the window.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import tilenb
from tilenb.codegen import nvrtc_available, nvrtc_compile

SRC = """
// Sums of squares of two rows a CTA, over columns 256 .. 1023 of a 1024-column bf16 tensor.
@autotune(NT in [32, 128])
@launch(NT)
@grid(cdiv(M, 2))
kernel tail_ss(X: tensor<bf16>[M, 1024], S: tensor<f32>[M, 1]) {
  let r = ctx.block.x * 2
  S[r :+ 2, 0 :+ 1] = rowsum(X[r :+ 2, 256 :+ 768] * X[r :+ 2, 256 :+ 768])
}

// The same over a runtime row length: the window is cut where the row ends.
@launch(64)
@grid(M)
kernel row_max(X: tensor<f32>[M, N], S: tensor<f32>[M, 1]) {
  let r = ctx.block.x
  S[r :+ 1, 0 :+ 1] = rowmax(X[r :+ 1, 0 :+ 1024])
}

// A window that starts one column in: not aligned to any vector.
@launch(32)
@grid(M)
kernel shifted(X: tensor<f32>[M, 1028], S: tensor<f32>[M, 1]) {
  let r = ctx.block.x
  S[r :+ 1, 0 :+ 1] = rowsum(X[r :+ 1, 1 :+ 1024])
}
"""


def _mod(backend="cpu"):
    return tilenb.compile(SRC, backend=backend)


def _reduction(src: str) -> str:
    """The kernel's body (after the prelude)."""
    return src[src.index('extern "C"'):]


def test_an_aligned_window_is_read_as_16_byte_vectors_once():
    src = _reduction(_mod().tail_ss.cuda_source(NT=32))
    loads = re.findall(r"\*\(uint4\*\)vin\d+ = \*\(const uint4\*\)\(X_", src)
    assert len(loads) == 1                 # X[...] * X[...]: one load for both operands
    assert "8 row elements" in src


def test_a_width_that_does_not_split_evenly_over_the_threads_narrows_the_vector():
    src = _reduction(_mod().tail_ss.cuda_source(NT=128))    # 96 chunks of 8 for 128 threads
    assert "uint4" not in src.split("sum over each row")[1].split("__syncthreads")[0]
    assert re.search(r"\*\(unsigned\*\)vin\d+ = \*\(const unsigned\*\)\(X_", src)    # 2 x bf16


def test_a_runtime_row_length_gives_16_bytes_of_f32():
    src = _reduction(_mod().row_max.cuda_source())
    assert re.search(r"\*\(uint4\*\)vin\d+ = \*\(const uint4\*\)\(X_", src)


def test_an_unaligned_window_keeps_element_loads():
    src = _reduction(_mod().shifted.cuda_source())
    assert "vin" not in src.split("sum over each row")[1].split("__syncthreads")[0]


@pytest.mark.skipif(not nvrtc_available(), reason="NVRTC is not installed")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_window_reductions_compile_with_nvrtc(arch):
    mod = _mod()
    for src in (mod.tail_ss.cuda_source(NT=32), mod.tail_ss.cuda_source(NT=128), mod.row_max.cuda_source(),
                mod.shifted.cuda_source()):
        nvrtc_compile(src, arch, use_cache=False)


def _check(mod, M, N, NT, rng):
    import ml_dtypes
    x = rng.standard_normal((M, 1024)).astype(ml_dtypes.bfloat16)
    s = np.full((M, 1), np.nan, np.float32)
    mod.tail_ss(x, s, variant={"NT": NT})
    xf = x.astype(np.float64)[:, 256:]
    np.testing.assert_allclose(s[:, 0], (xf * xf).sum(1), rtol=1e-5)
    y = rng.standard_normal((M, N)).astype(np.float32)
    m = np.full((M, 1), np.nan, np.float32)
    mod.row_max(y, m)
    np.testing.assert_array_equal(m[:, 0], y[:, :1024].max(1))     # the window is the first 1024 columns
    z = rng.standard_normal((M, 1028)).astype(np.float32)
    t = np.full((M, 1), np.nan, np.float32)
    mod.shifted(z, t)
    np.testing.assert_allclose(t[:, 0], z[:, 1:1025].astype(np.float64).sum(1), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("M,N", [(5, 1000), (2, 1024), (3, 2048)])
def test_the_cpu_executor_agrees_with_numpy(M, N):
    _check(_mod(), M, N, 32, np.random.default_rng(M + N))


@pytest.mark.gpu
@pytest.mark.parametrize("M,N", [(37, 1000), (6, 1024), (1, 4), (9, 2048)])
@pytest.mark.parametrize("NT", [32, 128])
def test_gpu_window_reductions_match_numpy(M, N, NT):
    _check(_mod("cuda"), M, N, NT, np.random.default_rng(M * N + NT))


EDGES = """
// Windows wholly past the columns of a constant-width tensor (no valid element), on every path
// that moves vectors: a row reduction, a copy with many chunks a thread, a store.
@launch(32)
@grid(M)
kernel past_edge(X: tensor<f32>[M, 2048], S: tensor<f32>[M, 1], T: tensor<f32>[M, 2048]) {
  let r = ctx.block.x
  S[r :+ 1, 0 :+ 1] = rowsum(X[r :+ 1, 2048 :+ 1024])
  var x = X[r :+ 1, 2048 :+ 2048]
  T[r :+ 1, 0 :+ 2048] = x + 1.0
  T[r :+ 1, 2048 :+ 64] = X[r :+ 1, 0 :+ 64]
}
"""


def test_windows_wholly_past_the_edge_compile_and_read_zeros():
    # a statically empty valid region once reached the CUDA as the Python literal False
    mod = tilenb.compile(EDGES, backend="cpu")
    src = mod.past_edge.cuda_source()
    assert "False" not in src and "True" not in src
    if nvrtc_available():
        for arch in ("sm_80", "sm_90"):
            nvrtc_compile(mod.past_edge.cuda_source(arch=arch if arch == "sm_90" else None), arch, use_cache=False)
    x = np.random.default_rng(3).standard_normal((3, 2048)).astype(np.float32)
    s, t = np.full((3, 1), np.nan, np.float32), np.full((3, 2048), 7.0, np.float32)
    mod.past_edge(x, s, t)
    np.testing.assert_array_equal(s[:, 0], 0)     # a sum over no valid element
    np.testing.assert_array_equal(t, 7)           # x has no valid element, so nothing is stored
