"""launch_traffic: the byte and FLOP floors the timing view divides by, computed by hand here."""
import numpy as np

import tilenb
from tilenb.runtime.checks import bind_arguments
from tilenb.runtime.gpu.traffic import launch_traffic

SRC = """
@autotune(TM in [32], TN in [32], TK in [8])
@grid(cdiv(M, TM), cdiv(N, TN))
kernel mm(A: tensor<f32>[M, K], B: tensor<f32>[K, N], C: tensor<f32>[M, N]) {
  var acc: tile<f32>[TM, TN] = 0.0
  for kt in range(0, K, TK) {
    var a = A[ctx.block.x * TM :+ TM, kt :+ TK]
    var b = B[kt :+ TK, ctx.block.y * TN :+ TN]
    acc += dot(a, b)
  }
  C[ctx.block.x * TM :+ TM, ctx.block.y * TN :+ TN] = acc
}

kernel axpy(X: tensor<f32>[N], Y: tensor<f32>[N], a: f32) {
  let i = ctx.block.x * 256 + ctx.thread
  Y[i] += a * X[i]
}
"""


def test_gemm_bytes_and_flops():
    mod = tilenb.compile(SRC, backend="cpu")
    M, K, N = 70, 44, 36
    args = (np.zeros((M, K), np.float32), np.zeros((K, N), np.float32), np.zeros((M, N), np.float32))
    kir = mod.mm.ir()
    bound = bind_arguments(kir, args)
    grid = (3, 2, 1)  # cdiv(70, 32), cdiv(36, 32)
    nbytes, flops, dims = launch_traffic(kir, bound, grid)
    assert nbytes == 4 * (M * K + K * N + M * N)
    # each CTA: cdiv(44, 8) = 6 turns of a 32x32x8 dot
    assert flops == 6 * 2 * 32 * 32 * 8 * 6
    assert dims == {"M": M, "K": K, "N": N}


def test_read_modify_write_counts_twice_and_no_dot_is_zero_flops():
    mod = tilenb.compile(SRC, backend="cpu")
    x = np.zeros(100, np.float32)
    kir = mod.axpy.ir()
    nbytes, flops, _ = launch_traffic(kir, bind_arguments(kir, (x, x.copy(), 2.0)), (1, 1, 1))
    assert nbytes == 400 + 2 * 400
    assert flops == 0
