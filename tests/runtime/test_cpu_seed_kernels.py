"""Every kernel of the language documents (tilenb/examples/seed_kernels.tile) runs on the CPU
reference executor and matches a numpy reference computed independently, at shapes that are
not multiples of the kernels' tile sizes (the edges are masked, so partial tiles must be right).
"""
import numpy as np
import pytest

import tilenb
from tilenb.__main__ import EXAMPLE

f32 = np.float32


@pytest.fixture(scope="module")
def mod():
    return tilenb.compile(EXAMPLE.read_text(), backend="cpu", filename="seed_kernels.tile")


def rnd(seed, *shape, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(f32)


def test_scale_rows_partial_last_block(mod):
    M = 100                                   # 3 full blocks of 32 rows and one of 4
    X, S = rnd(1, M, 64), rnd(2, M, 1)
    Y = np.full((M, 64), np.nan, f32)
    mod.scale_rows[(M + 31) // 32](X, S, Y)
    np.testing.assert_array_equal(Y, X * S)


def test_partial_sums_unrolled_per_thread_loop(mod):
    N = 1000                                  # not a multiple of 256 * 4
    X = rnd(3, 1, N)
    O = np.zeros((1, 256), f32)
    mod.partial_sums[1](X, O)
    ref = np.array([X[0, t::256].astype(np.float64).sum() for t in range(256)])
    np.testing.assert_allclose(O[0], ref, rtol=1e-5, atol=1e-6)


def test_act_silu_expression_function(mod):
    N = 2500                                  # the last CTA of 1024 is partial
    X = rnd(4, N, scale=4.0)
    Y = np.zeros(N, f32)
    mod.act[3](X, Y)
    np.testing.assert_allclose(Y, X / (1 + np.exp(-X.astype(np.float64))), rtol=2e-6, atol=1e-6)


def test_rms_norm(mod):
    M = 1004                                  # 125 full CTAs of 8 rows and one of 4
    X, G = rnd(5, M, 256), rnd(6, 1, 256)
    Y = np.zeros((M, 256), f32)
    mod.rms_norm[(M + 7) // 8](X, G, Y)
    x = X.astype(np.float64)
    ref = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-6) * G
    np.testing.assert_allclose(Y, ref, rtol=2e-5, atol=1e-5)
    assert mod.rms_norm.last_run.variant == {"D": 256}


def test_flash_attention_key_length_not_a_multiple_of_the_key_tile(mod):
    N, Nk, D = 100, 68, 64                    # BR = BC = 32: partial query and key tiles
    Q, K, V = rnd(7, N, D), rnd(8, Nk, D), rnd(9, Nk, D)
    O = np.zeros((N, D), f32)
    mod.flash_attention[(N + 31) // 32](Q, K, V, O)
    s = Q.astype(np.float64) @ K.T.astype(np.float64) * 0.125
    p = np.exp(s - s.max(axis=1, keepdims=True))
    ref = p / p.sum(axis=1, keepdims=True) @ V
    np.testing.assert_allclose(O, ref, rtol=1e-4, atol=1e-5)


def test_quantize_rounds_half_to_even_and_wraps_through_i32(mod):
    M = 68
    X = rnd(10, M, 32, scale=60.0)
    X[0, :6] = [0.5, 1.5, 2.5, -0.5, -1.5, 200.0]   # ties to even; 200 wraps to -56 via i32 -> i8
    Q = np.zeros((M, 32), np.int8)
    mod.quantize[(M + 31) // 32](X, Q)
    ref = np.rint(X.astype(np.float64)).astype(np.int64).astype(np.int8)   # i32 -> i8 wraps
    np.testing.assert_array_equal(Q, ref)
    assert list(Q[0, :6]) == [0, 2, 2, 0, -2, -56]


def test_gemm_alpha_beta_through_a_let_view_and_grid_attribute(mod):
    M, K, N = 100, 52, 76                     # none a multiple of TM = TN = 64 or TK = 16
    A, B, C = rnd(11, M, K), rnd(12, K, N), rnd(13, M, N)
    C0 = C.copy()
    mod.gemm(A, B, C, 0.5, -2.0)              # grid from @grid(cdiv(M, TM), cdiv(N, TN))
    ref = 0.5 * (A.astype(np.float64) @ B) - 2.0 * C0
    np.testing.assert_allclose(C, ref, rtol=1e-5, atol=1e-5)
    assert mod.gemm.last_run.grid == (2, 2, 1)
