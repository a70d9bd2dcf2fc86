"""CTA-wide row reductions whose operand's valid columns are uniform (issue 16, the softmax_head
regression): the generator tests once, outside the step loop, whether the valid region covers
the whole row, so that the hot loop has no per-chunk test; only a partial row takes the loop
that tests each chunk. Both loops must give the CPU executor's results: the generated CUDA is
run by tests/support/cuda_emulator.py at a tensor of 389 columns (the 256-column window is cut
by its edge) for starts inside, across and past the edge, and a broadcast operand `m` that is
valid or empty (row t outside the tensor: the row
is then not written). Expected values are computed with numpy.
"""
import numpy as np
import pytest

import tilenb

from support import cuda_emulator as EMU

needs_gxx = pytest.mark.skipif(not EMU.available(), reason="g++ (C++20) is needed to emulate CUDA on the CPU")

M, N = 3, 389
SRC = """
@launch(32)
kernel k(X: tensor<f32>[M, 389], Y: tensor<f32>[M, 2], s: i32, t: i32) {
  let m = X[t :+ 1, 0 :+ 1]
  Y[0 :+ 1, 0 :+ 1] = rowsum(X[0 :+ 1, s :+ 256] - m)
  Y[0 :+ 1, 1 :+ 1] = rowmax(X[0 :+ 1, s :+ 256] * 2.0)
}
"""
CASES = [(0, 1), (100, 2), (133, 0), (200, 1), (389, 1), (-30, 2), (0, 5), (150, -1)]


def expected(X, s, t):
    Y = np.full((M, 2), -7.0, np.float32)
    cols = [j for j in range(s, s + 256) if 0 <= j < N]
    if 0 <= t < M:           # m valid: the window's valid columns
        Y[0, 0] = np.sum(X[0, cols] - X[t, 0], dtype=np.float64) if cols else 0.0
    # else m is empty in both dimensions: the broadcast empties the row too, nothing is written
    Y[0, 1] = np.max(X[0, cols] * 2.0) if cols else -np.inf
    return Y


def inputs():
    return np.random.default_rng(5).uniform(-1, 1, (M, N)).astype(np.float32)


def test_the_step_loop_is_versioned_outside_not_per_chunk():
    from tilenb.codegen import generate
    mod = tilenb.compile(SRC, backend="cpu", filename="k.tile")
    code = generate(mod.k.ir(), SRC).source
    assert code.count("the valid region covers every column of the row") == 2, code
    # the covered loop precedes the tested one, and only the tested loop tests chunks
    for part in code.split("the valid region covers every column of the row")[1:]:
        covered, rest = part.split("} else {", 1)
        assert "the whole chunk lies in the valid region" not in covered
        assert "the whole chunk lies in the valid region" in rest


@pytest.mark.parametrize("s,t", CASES)
def test_cpu_executor(s, t):
    mod = tilenb.compile(SRC, backend="cpu", filename="k.tile")
    X = inputs()
    Y = np.full((M, 2), -7.0, np.float32)
    mod.k[1](X, Y, s, t)
    np.testing.assert_allclose(Y, expected(X, s, t), rtol=1e-5, atol=1e-4, err_msg=f"s={s} t={t}")


@needs_gxx
def test_generated_cuda_both_loops(tmp_path):
    from tilenb.codegen import generate
    mod = tilenb.compile(SRC, backend="cpu", filename="k.tile")
    ks = generate(mod.k.ir(), SRC)
    X = inputs()
    for s, t in CASES:
        Y = np.full((M, 2), -7.0, np.float32)
        EMU.run(ks, [X, Y, s, t], {"M": M}, (1, 1, 1), workdir=tmp_path)
        np.testing.assert_allclose(Y, expected(X, s, t), rtol=1e-5, atol=1e-4, err_msg=f"s={s} t={t}")


@pytest.mark.gpu
@pytest.mark.parametrize("s,t", CASES)
def test_on_the_gpu(s, t):
    mod = tilenb.compile(SRC, backend="cuda", filename="k.tile")
    X = inputs()
    Y = np.full((M, 2), -7.0, np.float32)
    mod.k[1](X, Y, s, t)
    np.testing.assert_allclose(Y, expected(X, s, t), rtol=1e-5, atol=1e-4, err_msg=f"s={s} t={t}")
