"""Asynchronous tile copies: a copy of a tensor window into a whole shared tile with more chunks
a thread than one register batch is started chunk by chunk as `cp.async` (`tnb_cpa`), and the
thread waits for its own copies before the next statement (docs/cuda-backend.md).

Checked here without a GPU: which copies take the path (a copy with few chunks a thread keeps the
register path; so does a copy whose loads carry an L2 hint), the wait before the barrier that
publishes the tile, the switch `tilenb.switches.SWITCHES.async_copy` (TILENB_ASYNC_COPY), and that the CUDA compiles
with NVRTC for sm_80 and sm_90. On a GPU (marked `gpu`): the kernels against numpy at shapes that
are not multiples of the tile (rows past the tensor's edge, rows shorter than the tile), on both
paths.
"""
from __future__ import annotations

import numpy as np
import pytest

import tilenb
from tilenb.switches import SWITCHES
from tilenb.codegen import nvrtc_available, nvrtc_compile

SRC = """
// A row scaled by its RMS: the row is copied whole into a shared tile first.
@autotune(NT in [32, 128])
@launch(NT)
@grid(M)
kernel rms(X: tensor<f32>[M, N], Y: tensor<f32>[M, N]) {
  let r = ctx.block.x
  var x = X[r :+ 1, 0 :+ 2048]
  let s = rowsum(x * x)
  Y[r :+ 1, 0 :+ 2048] = x * rsqrt(s / f32(N) + 1.0e-6)
}

// Four rows a CTA in bf16, each minus its row maximum.
@autotune(NT in [32, 256])
@launch(NT)
@grid(cdiv(M, 4))
kernel shift(X: tensor<bf16>[M, N], Y: tensor<bf16>[M, N]) {
  let r = ctx.block.x * 4
  var x = X[r :+ 4, 0 :+ 1024]
  Y[r :+ 4, 0 :+ 1024] = x - rowmax(x)
}
"""


def _mod(backend="cpu"):
    return tilenb.compile(SRC, backend=backend)


def _source(name, arch=None, **tune):
    return getattr(_mod(), name).cuda_source(arch=arch, **tune)


def _copy_section(src: str) -> str:
    """The generated text of the statement `var x = X[...]`."""
    start = src.index("var x = X[")
    return src[start:src.index("// line ", start)]


@pytest.mark.parametrize("name,tune,chunk", [("rms", {"NT": 32}, 16), ("shift", {"NT": 32}, 8)])
def test_a_copy_with_many_chunks_a_thread_is_asynchronous(name, tune, chunk):
    src = _source(name, **tune)
    copy = _copy_section(src)
    assert f"tnb_cpa<{chunk}>(" in copy
    assert "tnb_cpa_wait_all();" in copy
    # the wait comes before the barrier that lets other threads read the tile
    assert src.index("tnb_cpa_wait_all();") < src.index("__syncthreads();", src.index("tnb_cpa_wait_all();") - 1)
    assert "TILENB_ASYNC_COPY_HELPERS" in src


@pytest.mark.parametrize("name,tune", [("rms", {"NT": 128}), ("shift", {"NT": 256})])
def test_a_copy_that_fits_one_register_batch_keeps_the_register_path(name, tune):
    src = _source(name, **tune)
    assert "tnb_cpa" not in src
    assert "TILENB_ASYNC_COPY_HELPERS" not in src


def test_the_switch_turns_asynchronous_copies_off(monkeypatch):
    monkeypatch.setattr(SWITCHES, "async_copy", False)
    assert "tnb_cpa" not in _source("rms", NT=32)


def test_a_hinted_load_keeps_the_register_path():
    # the second read of X in a two-pass kernel carries an L2 evict_first hint (cache_hints.py)
    text = """
@launch(32)
@grid(M)
kernel two_pass(X: tensor<f32>[M, N], Y: tensor<f32>[M, N]) {
  let r = ctx.block.x
  var a = X[r :+ 1, 0 :+ 2048]
  let s = rowsum(a)
  var b = X[r :+ 1, 0 :+ 2048]
  Y[r :+ 1, 0 :+ 2048] = b - s
}
"""
    src = tilenb.compile(text, backend="cpu").two_pass.cuda_source()
    assert src.count("tnb_cpa<16>(") == 1          # the first copy only
    assert "tnb_ld_ef(" in src                      # the second copy's loads keep their hint


@pytest.mark.skipif(not nvrtc_available(), reason="NVRTC is not installed")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_asynchronous_copies_compile_with_nvrtc(arch):
    for name, tune in (("rms", {"NT": 32}), ("shift", {"NT": 32})):
        nvrtc_compile(_source(name, arch=arch if arch == "sm_90" else None, **tune), arch, use_cache=False)


def test_the_cpu_executor_is_the_reference():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 1000)).astype(np.float32)
    y = np.zeros_like(x)
    _mod().rms(x, y, variant={"NT": 32})
    ref = x / np.sqrt((x.astype(np.float64) ** 2).mean(1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


# ---- on the GPU ------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("M,N", [(37, 1000), (5, 2048), (3, 4)])
@pytest.mark.parametrize("NT", [32, 128])
def test_gpu_rms_matches_numpy(M, N, NT):
    rng = np.random.default_rng(M * N + NT)
    x = rng.standard_normal((M, N)).astype(np.float32)
    y = np.full_like(x, np.nan)
    _mod("cuda").rms(x, y, variant={"NT": NT})
    ref = x / np.sqrt((x.astype(np.float64) ** 2).mean(1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("M,N", [(37, 1000), (6, 1024), (1, 8)])
@pytest.mark.parametrize("NT", [32, 256])
def test_gpu_shift_matches_numpy(M, N, NT):
    import ml_dtypes
    rng = np.random.default_rng(M + N + NT)
    x = rng.standard_normal((M, N)).astype(ml_dtypes.bfloat16)
    y = np.zeros_like(x)
    _mod("cuda").shift(x, y, variant={"NT": NT})
    xf = x.astype(np.float32)
    ref = (xf - xf.max(1, keepdims=True)).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(y.astype(np.float32), ref.astype(np.float32))
