"""The memory-bound code paths of the CUDA generator (issue 8), checked two ways:

- without a GPU: the generated CUDA compiles with NVRTC for sm_90 (cubin) and compute_80 (PTX),
  and it takes the intended path (a transposed tile swizzled, 16-byte stores into the transpose's
  tensor, a loop's tensor copy loaded a turn ahead, 16-bit floats rounded in pairs, a division by
  a row's value done as one reciprocal a chunk);
- on a GPU (`gpu` marker): every kernel against numpy (float64 references computed here) at shapes
  that are not multiples of the tiles, within the bounds of spec section 17, and the edge values
  of the fast paths (a divisor of 0, inf, NaN, a subnormal or a huge one; exp of +-inf, NaN and of
  the ends of its range).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tilenb
from tilenb.codegen import generate, nvrtc_available, nvrtc_compile

needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="libnvrtc cannot be loaded (install nvidia-cuda-nvrtc-cu12)")
BF16 = ml_dtypes.bfloat16

TRANSPOSE = """
// Y = X^T through a shared tile, square tiles of T.
@autotune(T in [32, 64], NT in [128, 256])
@launch(NT)
@grid(cdiv(N, T), cdiv(M, T))
kernel transpose_{T}(X: tensor<{T}>[M, N], Y: tensor<{T}>[N, M]) {
  let r = ctx.block.y * T
  let c = ctx.block.x * T
  var x = X[r :+ T, c :+ T]
  Y[c :+ T, r :+ T] = transpose(x)
}
"""

EXTRAS = """
// A swizzled tile read three more ways: a column slice, per-thread elements, and flat().
@launch(64)
@grid(cdiv(M, 32))
kernel tile_reads(X: tensor<f32>[M, 32], Y: tensor<f32>[32, M], C: tensor<f32>[M, 1], Z: tensor<f32>[M],
                  F: tensor<f32>[M, 32]) {
  let r = ctx.block.x * 32
  var t = X[r :+ 32, :]
  Y[:, r :+ 32] = transpose(t)
  C[r :+ 32, :] = t[:, 3 :+ 1] * 2.0
  if ctx.thread < 32 {
    Z[r + ctx.thread] = t[ctx.thread, 31 - ctx.thread] + flat(t)[0, ctx.thread * 33]
  }
  F[r :+ 32, :] = t + 1.0
}

// A division by a row's value (x / d), into f32 and into bf16; exp into f32 and into bf16.
@autotune(R in [1, 4], NT in [32, 64])
@launch(NT)
@grid(cdiv(M, R))
kernel div_exp(X: tensor<f32>[M, 64], D: tensor<f32>[M, 1], Q: tensor<f32>[M, 64], Qb: tensor<bf16>[M, 64],
               E: tensor<f32>[M, 64], Eb: tensor<bf16>[M, 64]) {
  let r = ctx.block.x * R
  var d = D[r :+ R, :]
  Q[r :+ R, :] = X[r :+ R, :] / d
  Qb[r :+ R, :] = X[r :+ R, :] / d
  E[r :+ R, :] = exp(X[r :+ R, :])
  Eb[r :+ R, :] = exp(X[r :+ R, :])
}
"""

ROWS = """
// Row operations with whole rows on chip: R rows a CTA, a [1, D] weight broadcast over them.
@autotune(R in [1, 2, 4], NT in [64, 128])
@launch(NT)
@grid(cdiv(M, R))
kernel rms_norm_{T}(X: tensor<{T}>[M, 512], G: tensor<{T}>[1, 512], Y: tensor<{T}>[M, 512], eps: f32) {
  let r = ctx.block.x * R
  var x = X[r :+ R, :]
  let inv = rsqrt(rowsum(x * x) / 512.0 + eps)
  Y[r :+ R, :] = x * inv * G[0 :+ 1, :]
}

@autotune(R in [1, 2, 4], NT in [64, 128])
@launch(NT)
@grid(cdiv(M, R))
kernel layer_norm_{T}(X: tensor<{T}>[M, 512], W: tensor<{T}>[1, 512], B: tensor<{T}>[1, 512], Y: tensor<{T}>[M, 512],
                      eps: f32) {
  let r = ctx.block.x * R
  var x = X[r :+ R, :]
  let mean = rowsum(x) / 512.0
  let rstd = rsqrt(rowsum((x - mean) * (x - mean)) / 512.0 + eps)
  Y[r :+ R, :] = (x - mean) * rstd * W[0 :+ 1, :] + B[0 :+ 1, :]
}

@autotune(R in [1, 2, 4], NT in [64, 128])
@launch(NT)
@grid(cdiv(M, R))
kernel softmax_{T}(X: tensor<{T}>[M, 512], Y: tensor<{T}>[M, 512]) {
  let r = ctx.block.x * R
  var x = X[r :+ R, :]
  let m = rowmax(x)
  let l = rowsum(exp(x - m))
  Y[r :+ R, :] = exp(x - m) / l
}

// The same over rows too long for one tile: chunks of C columns, two passes.
@autotune(C in [256, 512, 4096], NT in [64, 128])
@launch(NT)
@grid(M)
kernel softmax_wide_{T}(X: tensor<{T}>[M, N], Y: tensor<{T}>[M, N]) {
  let r = ctx.block.x
  var m: tile<f32>[1, 1] = -1.0e30
  var l: tile<f32>[1, 1] = 0.0
  for c in range(0, N, C) {
    var x = X[r :+ 1, c :+ C]
    var m_new = max(m, rowmax(x))
    l = l * exp(m - m_new) + rowsum(exp(x - m_new))
    m = m_new
  }
  for c in range(0, N, C) {
    Y[r :+ 1, c :+ C] = exp(X[r :+ 1, c :+ C] - m) / l
  }
}

@autotune(C in [256, 512, 4096], NT in [64, 128])
@launch(NT)
@grid(M)
kernel layer_norm_wide_{T}(X: tensor<{T}>[M, N], W: tensor<{T}>[1, N], B: tensor<{T}>[1, N], Y: tensor<{T}>[M, N],
                           eps: f32) {
  let r = ctx.block.x
  var s: tile<f32>[1, 1] = 0.0
  var ss: tile<f32>[1, 1] = 0.0
  for c in range(0, N, C) {
    var x = X[r :+ 1, c :+ C]
    s = s + rowsum(x)
    ss = ss + rowsum(x * x)
  }
  let mean = s / f32(N)
  let rstd = rsqrt(ss / f32(N) - mean * mean + eps)
  for c in range(0, N, C) {
    Y[r :+ 1, c :+ C] = (X[r :+ 1, c :+ C] - mean) * rstd * W[0 :+ 1, c :+ C] + B[0 :+ 1, c :+ C]
  }
}
"""

TYPES = ("f32", "bf16", "f16")


def program() -> str:
    """Every kernel of this file, the templates instantiated per element type ({T})."""
    return "\n".join([EXTRAS] + [t.replace("{T}", dt) for dt in TYPES for t in (TRANSPOSE, ROWS)])


SOURCE = program()


@pytest.fixture(scope="module")
def mod():
    return tilenb.compile(SOURCE, backend="cpu")


def _code(mod, name, **variant):
    return getattr(mod, name).cuda_source(**variant).split("#endif  // TILENB_PRELUDE")[-1]


# ---- without a GPU -------------------------------------------------------------------------------
@needs_nvrtc
@pytest.mark.parametrize("arch", ["compute_80", "sm_90"])
def test_every_variant_compiles_with_nvrtc(mod, arch):
    for k in mod.kernels.values():
        srcs = [generate(kir, SOURCE).source for kir in k.checked.variants.values()]
        nvrtc_compile("\n".join(srcs), arch, use_cache=False)


def test_transpose_tile_is_swizzled_and_both_sides_move_16_bytes(mod):
    for T in (32, 64):
        code = _code(mod, "transpose_f32", T=T, NT=256)
        assert "is swizzled" in code
        # the copy in: 16-byte loads of X, 16-byte stores into the tile through the swizzle
        copy = code.split("transpose(x)")[0]
        assert "*(const uint4*)(X_" in copy and "*(uint4*)(x_" in copy and "tnb_swz(" in copy
        # the store: 16-byte stores into Y, the tile read through the swizzle
        store = code.split("transpose(x)")[1]
        # (a chunk that may cross Y's edge is stored by tnb_stg: one st.global.v4 in inline PTX)
        assert "tnb_stg((uint4*)(Y_" in store and "tnb_swz(" in store
    a = mod.transpose_f32.analysis(T=32, NT=256)
    load, store = a.copies
    assert (store.vector_width, store.wavefronts, store.ideal_wavefronts) == (4, 32, 32)
    assert load.wavefronts == load.ideal_wavefronts and load.swizzle is not None


def test_bf16_rows_round_in_pairs_and_divide_once_a_chunk(mod):
    code = _code(mod, "softmax_bf16", R=2, NT=128)
    store = code.split("exp(x - m) / l")[-1]
    assert "tnb_pack_b2(" in store and "tnb_b2f_w(" in store
    assert "tnb_rcp_ok(" in store and "* rcp" in store
    assert "tnb_exp(" in store and "expf(" not in store
    # the [1, 512] weight broadcast over R rows is loaded as vectors, once a chunk
    code = _code(mod, "rms_norm_bf16", R=4, NT=64)
    store = code.split("G[0 :+ 1, :]")[-1]
    assert "*(const uint4*)(G_" in store


def test_a_one_element_tile_broadcast_to_every_element_is_read_once(mod):
    # R = 1: inv is a [1, 1] tile, the same for every element of the store into Y
    store = _code(mod, "rms_norm_f32", R=1, NT=64).split("Y[r :+ R, :] = x * inv * G")[-1]
    hoisted = [ln for ln in store.split("\n") if "the same for every element" in ln]
    assert len(hoisted) == 1 and "inv_" in hoisted[0]
    reg = hoisted[0].split("=")[0].split()[-1]
    assert f"* {reg})" in store and "inv_" not in store.split(hoisted[0])[1]
    # R = 2: inv is [2, 1], a value per row: still read a chunk at a time
    store = _code(mod, "rms_norm_f32", R=2, NT=64).split("Y[r :+ R, :] = x * inv * G")[-1]
    assert "the same for every element" not in store


def test_chunked_loop_loads_its_copy_a_turn_ahead(mod):
    for name in ("softmax_wide_bf16", "layer_norm_wide_f32"):
        code = _code(mod, name, C=256, NT=64)
        assert "is loaded a turn ahead" in code
        assert "the next turn's chunks of X, in flight while this turn computes" in code
    # the second loop writes Y: no prefetch there (only the first loop's copy)
    code = _code(mod, "softmax_wide_f32", C=256, NT=64)
    assert code.count("is loaded a turn ahead") == 1


# ---- on a GPU --------------------------------------------------------------------------------------
def _rand(rng, shape, dt):
    x = rng.standard_normal(shape).astype(np.float32)
    return x.astype({"f32": np.float32, "bf16": BF16, "f16": np.float16}[dt])


def _tol(dt, acc=False):
    """Spec 17: f32 elementwise 1e-5; one rounding of the storage type for f16/bf16; a little more
    for reductions (the references here are float64)."""
    if dt == "f32":
        return (1e-5, 1e-5) if not acc else (2e-5, 2e-5)
    eps = 2.0 ** -7 if dt == "bf16" else 2.0 ** -10
    return (2 * eps, 2 * eps)


def _check(got, ref, dt, acc=False, what=""):
    rtol, atol = _tol(dt, acc)
    np.testing.assert_allclose(np.asarray(got).astype(np.float64), ref, rtol=rtol, atol=atol, equal_nan=True,
                               err_msg=what)


@pytest.fixture(scope="module")
def gmod():
    return tilenb.compile(SOURCE, backend="cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("variant", [dict(T=32, NT=128), dict(T=64, NT=256), dict(T=64, NT=128)])
def test_gpu_transpose(gmod, dt, variant):
    rng = np.random.default_rng(1)
    M, N = 132, 196            # multiples of 4 (runtime row lengths), not of 32 or 64
    x = _rand(rng, (M, N), dt)
    y = np.zeros((N, M), x.dtype)
    k = getattr(gmod, f"transpose_{dt}")
    k(x, y, variant=variant)
    assert k.last_run.backend == "cuda"
    np.testing.assert_array_equal(y.astype(np.float64), x.astype(np.float64).T)


@pytest.mark.gpu
def test_gpu_swizzled_tile_read_every_way(gmod):
    rng = np.random.default_rng(2)
    M = 100
    x = rng.standard_normal((M, 32)).astype(np.float32)
    y, c, z, f = np.zeros((32, M), np.float32), np.zeros((M, 1), np.float32), np.zeros(M, np.float32), np.zeros((M, 32), np.float32)
    gmod.tile_reads(x, y, c, z, f)
    np.testing.assert_array_equal(y, x.T)
    np.testing.assert_array_equal(c[:, 0], x[:, 3] * 2)
    i = np.arange(M) % 32
    xp = np.zeros((-(-M // 32) * 32, 32), np.float32)
    xp[:M] = x
    blk = np.arange(M) // 32 * 32
    want = xp[blk + i, 31 - i] + xp.reshape(-1, 1024)[np.arange(M) // 32, (i * 33) % 1024]
    np.testing.assert_array_equal(z, want.astype(np.float32))
    np.testing.assert_array_equal(f, x + 1)


@pytest.mark.gpu
@pytest.mark.parametrize("variant", [dict(R=1, NT=32), dict(R=4, NT=64)])
def test_gpu_division_and_exp_edges(gmod, variant):
    rng = np.random.default_rng(3)
    M = 23
    d = np.array([2.5, -7.0, 0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -3e-39, 3e38, -1e38, 1e-30, 1e30,
                  0.1, 3.0, 1.0, -1.0, 6.0, 1e-3, 4096.0, 1.5e-38, 1.2e-38, 0.7], np.float32)[:M, None]
    x = rng.standard_normal((M, 64)).astype(np.float32)
    x[:, :8] = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-6, -1e-6, 88.0], np.float32)
    x[7:9, 8:] *= 1e-7                       # small numerators for the subnormal divisors
    x[9:11, 8:] *= 1e30                      # big ones for the huge divisors
    x[3, 8:] = np.linspace(-103.0, 88.7, 56)  # exp over its range
    q, e = np.zeros_like(x), np.zeros_like(x)
    qb, eb = np.zeros(x.shape, BF16), np.zeros(x.shape, BF16)
    gmod.div_exp(x, d, q, qb, e, eb, variant=variant)
    with np.errstate(all="ignore"):
        want_q = (x / d).astype(np.float32)                       # IEEE f32 division
        want_e = np.exp(x.astype(np.float64))
    fin = np.isfinite(want_q) & (np.abs(want_q) > 1e-37)
    # a fast quotient is within 1.5 ulp; the divisor's special values give the quotient's exactly
    np.testing.assert_allclose(q[fin], want_q[fin], rtol=3e-7, atol=0)
    np.testing.assert_array_equal(np.isnan(q), np.isnan(want_q))
    np.testing.assert_array_equal(q[np.isinf(want_q)], want_q[np.isinf(want_q)])
    np.testing.assert_allclose(qb.astype(np.float64)[fin], want_q[fin], rtol=2 ** -7, atol=0)
    # exp: spec 17's f32 bound, the special values exactly
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(e.astype(np.float64), want_e.astype(np.float32).astype(np.float64),
                                   rtol=1e-5, atol=1e-5, equal_nan=True)
    ok = np.isfinite(want_e) & (want_e > 1e-37) & (want_e < 3e38)
    assert np.max(np.abs(e[ok] / want_e[ok] - 1)) < 1e-5
    assert e[0, 2] == np.inf and e[0, 3] == 0 and np.isnan(e[0, 4])
    _check(eb, want_e.astype(np.float32).astype(np.float64), "bf16", what="exp into bf16")


def _ref_rms(x, g, eps):
    x, g = x.astype(np.float64), g.astype(np.float64)
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps) * g


def _ref_ln(x, w, b, eps):
    x, w, b = (a.astype(np.float64) for a in (x, w, b))
    mu = x.mean(axis=1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=1, keepdims=True) + eps) * w + b


def _ref_softmax(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("variant", [dict(R=1, NT=64), dict(R=2, NT=128), dict(R=4, NT=64)])
def test_gpu_rows(gmod, dt, variant):
    rng = np.random.default_rng(4)
    M = 37                                   # not a multiple of R: the last CTA has missing rows
    x = _rand(rng, (M, 512), dt) * 3
    g, b = _rand(rng, (1, 512), dt), _rand(rng, (1, 512), dt)
    y = np.zeros_like(x)
    getattr(gmod, f"rms_norm_{dt}")(x, g, y, 1e-6, variant=variant)
    _check(y, _ref_rms(x, g, 1e-6), dt, acc=True, what=f"rms_norm_{dt}")
    y = np.zeros_like(x)
    getattr(gmod, f"layer_norm_{dt}")(x, g, b, y, 1e-5, variant=variant)
    _check(y, _ref_ln(x, g, b, 1e-5), dt, acc=True, what=f"layer_norm_{dt}")
    y = np.zeros_like(x)
    getattr(gmod, f"softmax_{dt}")(x, y, variant=variant)
    _check(y, _ref_softmax(x), dt, acc=True, what=f"softmax_{dt}")


@pytest.mark.gpu
@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("variant, N", [(dict(C=256, NT=64), 1300), (dict(C=512, NT=128), 1300),
                                        (dict(C=4096, NT=64), 9000)])
def test_gpu_wide_rows(gmod, dt, variant, N):
    # the last chunk is partial (1300 = 5 * 256 + 20 = 2 * 512 + 276, 9000 = 2 * 4096 + 808); with
    # C = 4096 and 64 threads, 16 chunks a thread: the prefetch holds 16 (bf16) or is not taken
    # (f32, 256 B), and the store pass loads in two batches of 8
    rng = np.random.default_rng(5)
    M = 7
    x = _rand(rng, (M, N), dt) * 3
    w, b = _rand(rng, (1, N), dt), _rand(rng, (1, N), dt)
    y = np.zeros_like(x)
    getattr(gmod, f"softmax_wide_{dt}")(x, y, variant=variant)
    _check(y, _ref_softmax(x), dt, acc=True, what=f"softmax_wide_{dt}")
    y = np.zeros_like(x)
    getattr(gmod, f"layer_norm_wide_{dt}")(x, w, b, y, 1e-5, variant=variant)
    _check(y, _ref_ln(x, w, b, 1e-5), dt, acc=True, what=f"layer_norm_wide_{dt}")
