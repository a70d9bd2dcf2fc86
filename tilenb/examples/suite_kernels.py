"""The tile-language kernels of the benchmark suite (bench/suite/suite.py), and numpy references.

Guarantees: `program()` is one tile-language source holding every kernel the suite times; it
checks without error (`python -m tilenb check` on `write_tile_file()`'s output). The f32 / bf16
pairs are written once as templates and instantiated per element type. Every kernel is written as
a user would write it today, in the project's style: tiles named after what they hold, row
reductions with rowsum / rowmax, @autotune over the tile sizes and the CTA size where a choice
is natural. Nothing here is tuned to the code generator's current weaknesses (the report,
docs/benchmarks.md, says what those are). `REFERENCES[name](args, scalars)` returns the
expected outputs in float64 for the CPU checks (`bench/suite/suite.py --cpu-check`).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from . import kernel_block

# ---- elementwise and data movement -------------------------------------------------------------
ELEMENTWISE = """
// Copy a 1-D tensor: the tile-language form of a device-to-device copy.
@autotune(TILE in [2048, 4096, 8192], NT in [256, 512])
@launch(NT)
@grid(cdiv(N, TILE))
kernel copy_f32(X: tensor<f32>[N], Y: tensor<f32>[N]) {
  let b = ctx.block.x * TILE
  Y[b :+ TILE] = X[b :+ TILE]
}

// z = x + y over a 1-D tensor.
@autotune(TILE in [2048, 4096, 8192], NT in [256, 512])
@launch(NT)
@grid(cdiv(N, TILE))
kernel add_f32(X: tensor<f32>[N], Y: tensor<f32>[N], Z: tensor<f32>[N]) {
  let b = ctx.block.x * TILE
  Z[b :+ TILE] = X[b :+ TILE] + Y[b :+ TILE]
}

// y[i, :] = x[i, :] * s[i]: one scale per row, broadcast along it.
@autotune(R in [1, 2, 4], D in [4096], NT in [256, 512])
@launch(NT)
@grid(cdiv(M, R))
kernel scale_rows_f32(X: tensor<f32>[M, D], S: tensor<f32>[M, 1], Y: tensor<f32>[M, D]) {
  let r = ctx.block.x * R
  Y[r :+ R, :] = X[r :+ R, :] * S[r :+ R, :]
}

// Y = X^T through a shared-memory tile.
@autotune(T in [32, 64], NT in [128, 256])
@launch(NT)
@grid(cdiv(N, T), cdiv(M, T))
kernel transpose_f32(X: tensor<f32>[M, N], Y: tensor<f32>[N, M]) {
  let r = ctx.block.y * T
  let c = ctx.block.x * T
  var x = X[r :+ T, c :+ T]
  Y[c :+ T, r :+ T] = transpose(x)
}
"""

# ---- row-wise normalizations, whole row on chip (rows of D = 4096 or 16384 elements; @dynshared:
# a 16384-element f32 row is 64 KB) ---------------------------------------------------------------
ROWS = """
// RMSNorm: y = x / sqrt(mean(x^2) + eps) * g, R whole rows per CTA.
@autotune(R in [1, 2, 4], D in [4096, 16384], NT in [128, 256, 512])
@launch(NT)
@dynshared
@grid(cdiv(M, R))
kernel rms_norm_{T}(X: tensor<{T}>[M, D], G: tensor<{T}>[1, D], Y: tensor<{T}>[M, D], eps: f32) {
  let r = ctx.block.x * R
  var x = X[r :+ R, :]
  let inv = rsqrt(rowsum(x * x) / f32(D) + eps)
  Y[r :+ R, :] = x * inv * G[0 :+ 1, :]
}

// LayerNorm: y = (x - mean) / sqrt(var + eps) * w + b, R whole rows per CTA.
@autotune(R in [1, 2, 4], D in [4096, 16384], NT in [128, 256, 512])
@launch(NT)
@dynshared
@grid(cdiv(M, R))
kernel layer_norm_{T}(X: tensor<{T}>[M, D], W: tensor<{T}>[1, D], B: tensor<{T}>[1, D], Y: tensor<{T}>[M, D],
                      eps: f32) {
  let r = ctx.block.x * R
  var x = X[r :+ R, :]
  let mean = rowsum(x) / f32(D)
  let rstd = rsqrt(rowsum((x - mean) * (x - mean)) / f32(D) + eps)
  Y[r :+ R, :] = (x - mean) * rstd * W[0 :+ 1, :] + B[0 :+ 1, :]
}

// Row softmax, R whole rows per CTA.
@autotune(R in [1, 2, 4], D in [4096, 16384], NT in [128, 256, 512])
@launch(NT)
@dynshared
@grid(cdiv(M, R))
kernel softmax_{T}(X: tensor<{T}>[M, D], Y: tensor<{T}>[M, D]) {
  let r = ctx.block.x * R
  var x = X[r :+ R, :]
  let m = rowmax(x)
  let l = rowsum(exp(x - m))
  Y[r :+ R, :] = exp(x - m) / l
}
"""

# ---- the same over rows too long for shared memory (N = 131072): chunks of C columns, two passes
# over the row (@dynshared: a 65536-element bf16 chunk is 128 KB, one CTA an SM). The second pass
# walks the chunks from the last to the first: the chunks the first pass read last are the likeliest
# to be still in L2 when the second pass reads them again (docs/benchmarks.md, long rows) --------
WIDE = """
// RMSNorm over long rows: a pass for the sum of squares, a pass to write (last chunk first).
@autotune(R in [1], C in [2048, 4096, 16384, 65536], NT in [256, 512, 1024])
@launch(NT)
@dynshared
@grid(cdiv(M, R))
kernel rms_norm_wide_{T}(X: tensor<{T}>[M, N], G: tensor<{T}>[1, N], Y: tensor<{T}>[M, N], eps: f32) {
  let r = ctx.block.x * R
  var ss: tile<f32>[R, 1] = 0.0
  for c in range(0, N, C) {
    var x = X[r :+ R, c :+ C]
    ss = ss + rowsum(x * x)
  }
  let inv = rsqrt(ss / f32(N) + eps)
  let n = cdiv(N, C)
  for i in range(0, n) {
    let c = (n - 1 - i) * C
    Y[r :+ R, c :+ C] = X[r :+ R, c :+ C] * inv * G[0 :+ 1, c :+ C]
  }
}

// LayerNorm over long rows: one pass for the sum and the sum of squares, one to write (last chunk first).
@autotune(R in [1], C in [2048, 4096, 16384, 65536], NT in [256, 512, 1024])
@launch(NT)
@dynshared
@grid(cdiv(M, R))
kernel layer_norm_wide_{T}(X: tensor<{T}>[M, N], W: tensor<{T}>[1, N], B: tensor<{T}>[1, N],
                           Y: tensor<{T}>[M, N], eps: f32) {
  let r = ctx.block.x * R
  var s: tile<f32>[R, 1] = 0.0
  var ss: tile<f32>[R, 1] = 0.0
  for c in range(0, N, C) {
    var x = X[r :+ R, c :+ C]
    s = s + rowsum(x)
    ss = ss + rowsum(x * x)
  }
  let mean = s / f32(N)
  let rstd = rsqrt(ss / f32(N) - mean * mean + eps)
  let n = cdiv(N, C)
  for i in range(0, n) {
    let c = (n - 1 - i) * C
    Y[r :+ R, c :+ C] = (X[r :+ R, c :+ C] - mean) * rstd * W[0 :+ 1, c :+ C] + B[0 :+ 1, c :+ C]
  }
}

// Softmax over long rows: an online pass for the maximum and the sum, one to write (last chunk first).
@autotune(R in [1], C in [2048, 4096, 16384, 65536], NT in [256, 512, 1024])
@launch(NT)
@dynshared
@grid(cdiv(M, R))
kernel softmax_wide_{T}(X: tensor<{T}>[M, N], Y: tensor<{T}>[M, N]) {
  let r = ctx.block.x * R
  var m: tile<f32>[R, 1] = -1.0e30
  var l: tile<f32>[R, 1] = 0.0
  for c in range(0, N, C) {
    var x = X[r :+ R, c :+ C]
    var m_new = max(m, rowmax(x))
    l = l * exp(m - m_new) + rowsum(exp(x - m_new))
    m = m_new
  }
  let n = cdiv(N, C)
  for i in range(0, n) {
    let c = (n - 1 - i) * C
    Y[r :+ R, c :+ C] = exp(X[r :+ R, c :+ C] - m) / l
  }
}
"""

# ---- the same rows held on chip by a thread block cluster (sm_90): K CTAs of a cluster each keep
# D / K columns of the row in shared memory, and the row statistics are combined across the cluster
# in distributed shared memory (cluster_sum / cluster_max), so X is read from HBM once -------------
CLUSTER = """
// RMSNorm, a row per cluster of K CTAs (D / K columns each, one read of X).
@autotune(K in [2, 4, 8], D in [131072], NT in [128, 256, 512])
@launch(NT)
@dynshared
@cluster(K)
@grid(M * K)
kernel rms_norm_cluster_{T}(X: tensor<{T}>[M, D], G: tensor<{T}>[1, D], Y: tensor<{T}>[M, D], eps: f32) {
  let r = ctx.block.x / K
  let c = (ctx.block.x % K) * (D / K)
  var x = X[r :+ 1, c :+ D / K]
  var ss = rowsum(x * x)
  cluster_sum(ss)
  Y[r :+ 1, c :+ D / K] = x * rsqrt(ss / f32(D) + eps) * G[0 :+ 1, c :+ D / K]
}

// LayerNorm, a row per cluster of K CTAs: the mean, then the variance about it, each combined
// across the cluster.
@autotune(K in [2, 4, 8], D in [131072], NT in [128, 256, 512])
@launch(NT)
@dynshared
@cluster(K)
@grid(M * K)
kernel layer_norm_cluster_{T}(X: tensor<{T}>[M, D], W: tensor<{T}>[1, D], B: tensor<{T}>[1, D],
                              Y: tensor<{T}>[M, D], eps: f32) {
  let r = ctx.block.x / K
  let c = (ctx.block.x % K) * (D / K)
  var x = X[r :+ 1, c :+ D / K]
  var s = rowsum(x)
  cluster_sum(s)
  let mean = s / f32(D)
  var ss = rowsum((x - mean) * (x - mean))
  cluster_sum(ss)
  let rstd = rsqrt(ss / f32(D) + eps)
  Y[r :+ 1, c :+ D / K] = (x - mean) * rstd * W[0 :+ 1, c :+ D / K] + B[0 :+ 1, c :+ D / K]
}

// Row softmax, a row per cluster of K CTAs: the maximum and the sum each combined across the cluster.
@autotune(K in [2, 4, 8], D in [131072], NT in [128, 256, 512])
@launch(NT)
@dynshared
@cluster(K)
@grid(M * K)
kernel softmax_cluster_{T}(X: tensor<{T}>[M, D], Y: tensor<{T}>[M, D]) {
  let r = ctx.block.x / K
  let c = (ctx.block.x % K) * (D / K)
  var x = X[r :+ 1, c :+ D / K]
  var m = rowmax(x)
  cluster_max(m)
  var l = rowsum(exp(x - m))
  cluster_sum(l)
  Y[r :+ 1, c :+ D / K] = exp(x - m) / l
}
"""

# ---- the same rows, one CTA a row, with the head of the row kept on chip: the first K columns
# are copied into a shared tile (asynchronously, all at once), the other D - K (the tail) are read
# from global memory for the statistics and again to write (that second read mostly from L2), and
# the head is written from shared memory last. X is read from HBM once except for what of the
# tail L2 does not keep. {KS} is the head's sizes (HEAD_SIZES) ----------------------------------
HEAD = """
// RMSNorm, a row per CTA: the head of the row in shared memory, the tail read twice.
@autotune(K in [{KS}], D in [131072], NT in [512, 1024])
@launch(NT)
@dynshared
@grid(M)
kernel rms_norm_head_{T}(X: tensor<{T}>[M, D], G: tensor<{T}>[1, D], Y: tensor<{T}>[M, D], eps: f32) {
  let r = ctx.block.x
  var h = X[r :+ 1, 0 :+ K]
  let tail_ss = rowsum(X[r :+ 1, K :+ D - K] * X[r :+ 1, K :+ D - K])
  let inv = rsqrt((rowsum(h * h) + tail_ss) / f32(D) + eps)
  Y[r :+ 1, K :+ D - K] = X[r :+ 1, K :+ D - K] * inv * G[0 :+ 1, K :+ D - K]
  Y[r :+ 1, 0 :+ K] = h * inv * G[0 :+ 1, 0 :+ K]
}

// LayerNorm, a row per CTA: the sum and the sum of squares over the head and the tail.
@autotune(K in [{KS}], D in [131072], NT in [512, 1024])
@launch(NT)
@dynshared
@grid(M)
kernel layer_norm_head_{T}(X: tensor<{T}>[M, D], W: tensor<{T}>[1, D], B: tensor<{T}>[1, D],
                           Y: tensor<{T}>[M, D], eps: f32) {
  let r = ctx.block.x
  var h = X[r :+ 1, 0 :+ K]
  let tail_s = rowsum(X[r :+ 1, K :+ D - K])
  let tail_ss = rowsum(X[r :+ 1, K :+ D - K] * X[r :+ 1, K :+ D - K])
  let mean = (rowsum(h) + tail_s) / f32(D)
  let rstd = rsqrt((rowsum(h * h) + tail_ss) / f32(D) - mean * mean + eps)
  Y[r :+ 1, K :+ D - K] = (X[r :+ 1, K :+ D - K] - mean) * rstd * W[0 :+ 1, K :+ D - K] + B[0 :+ 1, K :+ D - K]
  Y[r :+ 1, 0 :+ K] = (h - mean) * rstd * W[0 :+ 1, 0 :+ K] + B[0 :+ 1, 0 :+ K]
}

// Row softmax, a row per CTA: the maximum over the head and the tail, then the sum.
@autotune(K in [{KS}], D in [131072], NT in [512, 1024])
@launch(NT)
@dynshared
@grid(M)
kernel softmax_head_{T}(X: tensor<{T}>[M, D], Y: tensor<{T}>[M, D]) {
  let r = ctx.block.x
  var h = X[r :+ 1, 0 :+ K]
  let m = max(rowmax(h), rowmax(X[r :+ 1, K :+ D - K]))
  let l = rowsum(exp(h - m)) + rowsum(exp(X[r :+ 1, K :+ D - K] - m))
  Y[r :+ 1, K :+ D - K] = exp(X[r :+ 1, K :+ D - K] - m) / l
  Y[r :+ 1, 0 :+ K] = exp(h - m) / l
}
"""
HEAD_SIZES = {"f32": (24576, 32768, 49152, 53248), "bf16": (49152, 65536, 98304, 106496)}   # 96 (two CTAs an SM), 128, 192 and 208 KB

# ---- matrix work ----------------------------------------------------------------------------
GEMM = """
// C = A B with f32 accumulation: a GEMM loop (on sm_90 lowered to TMA copies into a ring of
// swizzled shared stages and wgmma; elsewhere mma.sync), C stored in the input type.
@autotune(TM in [128], TN in [128, 256], TK in [32, 64], NT in [256])
@launch(NT)
@grid(cdiv(M, TM), cdiv(N, TN))
kernel gemm_{T}(A: tensor<{T}>[M, K], B: tensor<{T}>[K, N], C: tensor<{T}>[M, N]) {
  let pm = ctx.block.x
  let pn = ctx.block.y
  var acc: tile<f32>[TM, TN] = 0.0
  for kt in range(0, K, TK) {
    let a = A[pm * TM :+ TM, kt :+ TK]
    let b = B[kt :+ TK, pn * TN :+ TN]
    acc += dot(a, b)
  }
  C[pm * TM :+ TM, pn * TN :+ TN] = acc
}
"""

ATTENTION = """
// Flash-attention forward (no mask): O = softmax(Q K^T * scale) V per head, one pass over the
// keys with a running maximum m and sum l per query row; Q, K, V, O as [heads, seq, D]. Written
// in base 2, as Triton's tutorial kernel is: exp(x * scale - m) = exp2(x * qs - m') with
// qs = scale * log2(e), so each score costs one fused multiply-add before exp2 (m and m' are
// the running maximum in the two bases).
@autotune(BR in [64, 128], BC in [64, 128], D in [64, 128], NT in [128, 256])
@launch(NT)
@dynshared
@grid(cdiv(N, BR), H)
kernel attention_bf16(Q: tensor<bf16>[H, N, D], K: tensor<bf16>[H, Nk, D], V: tensor<bf16>[H, Nk, D],
                      O: tensor<bf16>[H, N, D], scale: f32) {
  let h = ctx.block.y
  let row = ctx.block.x * BR
  let qs = scale * 1.4426950408889634
  var q = Q[h, row :+ BR, :]
  var acc: tile<f32>[BR, D] = 0.0
  var m: tile<f32>[BR, 1] = -1.0e30
  var l: tile<f32>[BR, 1] = 0.0
  for kt in range(0, Nk, BC) {
    var s: tile<f32>[BR, BC] = dot_t(q, K[h, kt :+ BC, :])
    var m_new = max(m, rowmax(s) * qs)
    var p: tile<bf16>[BR, BC] = exp2(s * qs - m_new)
    var rescale = exp2(m - m_new)
    l = l * rescale + rowsum(p)
    acc = acc * rescale + dot(p, V[h, kt :+ BC, :])
    m = m_new
  }
  O[h, row :+ BR, :] = acc / l
}
"""

# The same attention with each dot written as a statement of its own: the K and V slices named
# by `let` views, the scores a `var` whose whole value is a dot, and the rescale and the
# accumulation of P V as two statements (`acc = acc * rescale` then `acc += dot(p, v)`). The math
# (base 2) and the @autotune space are the kernel's above, so the benchmark compares the two
# written forms of one computation: the analysis takes a view only tensor-core dots read as the
# slice written in the dot, and `acc = acc * rescale` then `acc += dot(p, v)` as one statement
# (tilenb/analysis/mma_tiles.py, lowering.py), so where the loop streams on wgmma (sm_90) the
# generated CUDA is the same up to names (tests/codegen/test_attention_forms.py).
ATTENTION_TC = """
@autotune(BR in [64, 128], BC in [64, 128], D in [64, 128], NT in [128, 256])
@launch(NT)
@dynshared
@grid(cdiv(N, BR), H)
kernel attention_tc_bf16(Q: tensor<bf16>[H, N, D], K: tensor<bf16>[H, Nk, D], V: tensor<bf16>[H, Nk, D],
                         O: tensor<bf16>[H, N, D], scale: f32) {
  let h = ctx.block.y
  let row = ctx.block.x * BR
  let qs = scale * 1.4426950408889634
  var q = Q[h, row :+ BR, :]
  var acc: tile<f32>[BR, D] = 0.0
  var m: tile<f32>[BR, 1] = -1.0e30
  var l: tile<f32>[BR, 1] = 0.0
  for kt in range(0, Nk, BC) {
    let k = K[h, kt :+ BC, :]
    let v = V[h, kt :+ BC, :]
    var s: tile<f32>[BR, BC] = dot_t(q, k)
    var m_new = max(m, rowmax(s) * qs)
    var p: tile<bf16>[BR, BC] = exp2(s * qs - m_new)
    var rescale = exp2(m - m_new)
    l = l * rescale + rowsum(p)
    acc = acc * rescale
    acc += dot(p, v)
    m = m_new
  }
  O[h, row :+ BR, :] = acc / l
}
"""

FLOAT_TYPES = ("f32", "bf16")


def program() -> str:
    """The whole benchmark program (every kernel of the suite), as tile-language text."""
    parts = ["// The kernels of bench/suite/suite.py (generated by tilenb/examples/suite_kernels.py: do not edit)\n", ELEMENTWISE]
    for t in FLOAT_TYPES:
        parts.append(ROWS.replace("{T}", t))
    for t in FLOAT_TYPES:
        parts.append(WIDE.replace("{T}", t))
    for t in FLOAT_TYPES:
        parts.append(CLUSTER.replace("{T}", t))
    for t in FLOAT_TYPES:
        parts.append(HEAD.replace("{T}", t).replace("{KS}", ", ".join(map(str, HEAD_SIZES[t]))))
    for t in ("f16", "bf16"):
        parts.append(GEMM.replace("{T}", t))
    parts.append(ATTENTION)
    parts.append(ATTENTION_TC)
    return "\n".join(parts)


def kernel_text(name: str) -> str:
    """The source of one kernel (with its attributes and comment), for the compile benchmarks."""
    return kernel_block(program(), name)


def write_tile_file(path: Path) -> Path:
    path.write_text(program())
    return path


# ---- float64 references (numpy), for the CPU checks ---------------------------------------------
def _f64(a):
    return np.asarray(a, dtype=np.float64)


def ref_rms_norm(x, g, eps):
    x, g = _f64(x), _f64(g)
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps) * g


def ref_layer_norm(x, w, b, eps):
    x, w, b = _f64(x), _f64(w), _f64(b)
    mu = x.mean(axis=1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def ref_softmax(x):
    x = _f64(x)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def ref_attention(q, k, v, scale):
    q, k, v = _f64(q), _f64(k), _f64(v)
    s = q @ k.transpose(0, 2, 1) * scale
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


if __name__ == "__main__":
    import sys
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("bench_kernels.tile")
    print(write_tile_file(out))
