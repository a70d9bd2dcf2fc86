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

# ---- the cluster forms with one meeting of the cluster a row (issue 19): R rows per cluster (the
# weight slice read from L2 once for R rows); each CTA reduces its own slice completely (LayerNorm:
# the slice's mean and its sum of squared deviations; softmax: the slice's maximum and its sum of
# exponentials about it), then every CTA publishes its figures in its own columns of an all-zero
# [R, 2K] tile `ex` and one cluster_sum hands every CTA all K CTAs' figures (adding zeros is exact),
# which each combines itself: LayerNorm by the parallel-variance rule (Chan et al.), softmax by
# rescaling each CTA's sum to the row's maximum (the online-softmax combine). RMSNorm already meets
# once; its form multiplies the weight slice into x while the cluster meets, so the statement after
# the meeting reads only shared memory and writes Y. --------------------------------------------
CLUSTER1 = """
// RMSNorm, R rows per cluster of K CTAs; x * G is formed while the other CTAs of the cluster catch up.
@autotune(K in [4, 8], R in [1, 2], D in [131072], NT in [128, 256, 512])
@launch(NT)
@dynshared
@cluster(K)
@grid(cdiv(M, R) * K)
kernel rms_norm_cluster1_{T}(X: tensor<{T}>[M, D], G: tensor<{T}>[1, D], Y: tensor<{T}>[M, D], eps: f32) {
  let r = ctx.cluster.x * R
  let c = ctx.cluster.rank * (D / K)
  var x = X[r :+ R, c :+ D / K]
  var ss = rowsum(x * x)
  cluster_sum(ss)
  x = x * G[0 :+ 1, c :+ D / K]
  Y[r :+ R, c :+ D / K] = x * rsqrt(ss / f32(D) + eps)
}

// LayerNorm, R rows per cluster of K CTAs, one meeting: each slice's mean and sum of squared
// deviations, combined by the parallel-variance rule.
@autotune(K in [4, 8], R in [1, 2], D in [131072], NT in [128, 256, 512])
@launch(NT)
@dynshared
@cluster(K)
@grid(cdiv(M, R) * K)
kernel layer_norm_cluster1_{T}(X: tensor<{T}>[M, D], W: tensor<{T}>[1, D], B: tensor<{T}>[1, D],
                               Y: tensor<{T}>[M, D], eps: f32) {
  let r = ctx.cluster.x * R
  let q = ctx.cluster.rank
  let c = q * (D / K)
  var x = X[r :+ R, c :+ D / K]
  let mu = rowsum(x) / f32(D / K)
  let m2 = rowsum((x - mu) * (x - mu))
  var ex: tile<f32>[R, 2 * K] = 0.0
  ex[:, q :+ 1] = mu
  ex[:, K + q :+ 1] = m2
  cluster_sum(ex)
  let mean = rowsum(ex[:, 0 :+ K]) / f32(K)
  let dm = ex[:, 0 :+ K] - mean
  let rstd = rsqrt((rowsum(ex[:, K :+ K]) + f32(D / K) * rowsum(dm * dm)) / f32(D) + eps)
  Y[r :+ R, c :+ D / K] = (x - mean) * rstd * W[0 :+ 1, c :+ D / K] + B[0 :+ 1, c :+ D / K]
}

// Row softmax, R rows per cluster of K CTAs, one meeting: each slice's maximum and its sum of
// exponentials about it, rescaled to the row's maximum. A slice whose elements are all -inf takes
// the lowest finite f32 as its maximum, so that its sum is 0 (not exp(-inf + inf), NaN).
@autotune(K in [4, 8], R in [1, 2], D in [131072], NT in [128, 256, 512])
@launch(NT)
@dynshared
@cluster(K)
@grid(cdiv(M, R) * K)
kernel softmax_cluster1_{T}(X: tensor<{T}>[M, D], Y: tensor<{T}>[M, D]) {
  let r = ctx.cluster.x * R
  let q = ctx.cluster.rank
  let c = q * (D / K)
  var x = X[r :+ R, c :+ D / K]
  let mq = max(rowmax(x), -3.4028234663852886e38)
  let lq = rowsum(exp(x - mq))
  var ex: tile<f32>[R, 2 * K] = 0.0
  ex[:, q :+ 1] = mq
  ex[:, K + q :+ 1] = lq
  cluster_sum(ex)
  let m = rowmax(ex[:, 0 :+ K])
  let l = rowsum(ex[:, K :+ K] * exp(ex[:, 0 :+ K] - m))
  Y[r :+ R, c :+ D / K] = exp(x - m) / l
}

// Row softmax as softmax_cluster1, with each exponential taken once: x is replaced by exp(x - mq)
// before the meeting (in bf16, rounded once more), so the write only scales it by exp(mq - m) / l.
@autotune(K in [4, 8], R in [1, 2], D in [131072], NT in [128, 256, 512])
@launch(NT)
@dynshared
@cluster(K)
@grid(cdiv(M, R) * K)
kernel softmax_cluster1e_{T}(X: tensor<{T}>[M, D], Y: tensor<{T}>[M, D]) {
  let r = ctx.cluster.x * R
  let q = ctx.cluster.rank
  let c = q * (D / K)
  var x = X[r :+ R, c :+ D / K]
  let mq = max(rowmax(x), -3.4028234663852886e38)
  x = exp(x - mq)
  let lq = rowsum(x)
  var ex: tile<f32>[R, 2 * K] = 0.0
  ex[:, q :+ 1] = mq
  ex[:, K + q :+ 1] = lq
  cluster_sum(ex)
  let m = rowmax(ex[:, 0 :+ K])
  let l = rowsum(ex[:, K :+ K] * exp(ex[:, 0 :+ K] - m))
  let scale = exp(mq - m) / l
  Y[r :+ R, c :+ D / K] = x * scale
}
"""

# ---- f32 RMSNorm as two head forms in a cluster of 2 (issue 19): each CTA takes half the row, keeps
# its first H columns in shared memory and reads the other D / 2 - H twice (the second time mostly
# from L2), as the bf16 head form does with a whole row of the same bytes; the halves meet once.
# {HS} is the heads' sizes (CHEAD_SIZES) -----------------------------------------------------------
CHEAD = """
// RMSNorm f32, a row per cluster of 2 CTAs: each half row's head in shared memory, its tail read twice.
@autotune(H in [{HS}], D in [131072], NT in [512, 1024])
@launch(NT)
@dynshared
@cluster(2)
@grid(M * 2)
kernel rms_norm_chead_f32(X: tensor<f32>[M, D], G: tensor<f32>[1, D], Y: tensor<f32>[M, D], eps: f32) {
  let r = ctx.cluster.x
  let c = ctx.cluster.rank * (D / 2)
  var h = X[r :+ 1, c :+ H]
  let tail_ss = rowsum(X[r :+ 1, c + H :+ D / 2 - H] * X[r :+ 1, c + H :+ D / 2 - H])
  var ss = rowsum(h * h) + tail_ss
  cluster_sum(ss)
  let inv = rsqrt(ss / f32(D) + eps)
  Y[r :+ 1, c + H :+ D / 2 - H] = X[r :+ 1, c + H :+ D / 2 - H] * inv * G[0 :+ 1, c + H :+ D / 2 - H]
  Y[r :+ 1, c :+ H] = h * inv * G[0 :+ 1, c :+ H]
}
"""
CHEAD_SIZES = (24576, 32768, 49152)   # 96 KB (two CTAs an SM), 128 and 192 KB of each half row's 256 KB

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
# C = A B with f32 accumulation: a GEMM loop (on sm_90 lowered to TMA copies into a ring of
# swizzled shared stages and wgmma; elsewhere mma.sync), C stored in the input type. The CTAs
# take their tiles in a grouped order, for the L2: the hardware starts CTAs in the order of
# ctx.block.x, then ctx.block.y; CTA number pid takes, within each group of GM rows of tiles
# (GM * ctx.grid.y tiles), the tiles column by column, so the CTAs running at once share GM rows
# of A and a few columns of B. GM = 1 walks the tiles row by row; GM at least the tile rows
# (ctx.grid.x = cdiv(M, TM)) walks them column by column, as ctx.block.x, ctx.block.y would.
# (The kernel text keeps the line count it had before the grouped order, so that the kernels
# after it in program() keep their line numbers, and with them their generated CUDA.)
GEMM = """
// C = A B, f32 accumulation, C in the input type; tiles in a grouped order (GM rows of tiles)
@autotune(TM in [128], TN in [128, 256], TK in [64], GM in [1, 8, 16, 64], NT in [256])
@launch(NT)
@grid(cdiv(M, TM), cdiv(N, TN))
kernel gemm_{T}(A: tensor<{T}>[M, K], B: tensor<{T}>[K, N], C: tensor<{T}>[M, N]) {
  let pid = ctx.block.y * ctx.grid.x + ctx.block.x      // the order the CTAs start in
  let first = pid / (GM * ctx.grid.y) * GM               // the first tile row of its group
  let height = min(ctx.grid.x - first, GM)               // the group's tile rows (the last: fewer)
  let pm = first + pid % (GM * ctx.grid.y) % height
  let pn = pid % (GM * ctx.grid.y) / height
  var acc: tile<f32>[TM, TN] = 0.0
  for kt in range(0, K, TK) {
    acc += dot(A[pm * TM :+ TM, kt :+ TK], B[kt :+ TK, pn * TN :+ TN])
  }
  C[pm * TM :+ TM, pn * TN :+ TN] = acc
}
"""

# A candidate for issue 19, timed by bench/probes/gemm_order.py and not part of program(): the
# same GEMM with persistent CTAs. The launch passes P CTAs (the probe: the GPU's SM count); CTA
# b takes the tiles b, b + P, b + 2 P, ... of the grouped order, one after the other, the GEMM
# loop of each on the same pipeline as above.
GEMM_PERSISTENT = """
@autotune(TM in [128], TN in [128, 256], TK in [64], GM in [8, 16], NT in [256])
@launch(NT)
@grid(P)
kernel gemm_persistent_{T}(A: tensor<{T}>[M, K], B: tensor<{T}>[K, N], C: tensor<{T}>[M, N], P: i32) {
  let nm = cdiv(M, TM)
  let nn = cdiv(N, TN)
  for i in range(0, cdiv(nm * nn - ctx.block.x, ctx.grid.x), 1) {
    let t = ctx.block.x + i * ctx.grid.x                 // this CTA's i-th tile in the grouped order
    let first = t / (GM * nn) * GM
    let height = min(nm - first, GM)
    let pm = first + t % (GM * nn) % height
    let pn = t % (GM * nn) / height
    var acc: tile<f32>[TM, TN] = 0.0
    for kt in range(0, K, TK) {
      acc += dot(A[pm * TM :+ TM, kt :+ TK], B[kt :+ TK, pn * TN :+ TN])
    }
    C[pm * TM :+ TM, pn * TN :+ TN] = acc
  }
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

# Causal attention, the form decoder models run: query i sees key j only when j <= i (aligned at
# the top left, as torch's is_causal: with fewer keys than queries the last queries see every key,
# with more keys the keys past the last query are never seen). The mask is a tile expression over
# the score tile (rows / cols: each element's query and key index), and the loop bound stops at
# the last block that holds a key this CTA's queries can see, so the blocks wholly above the
# diagonal are never loaded. The CTAs of a head differ in work (the last block of queries sees
# every key, the first one block), so the grid hands out the last query blocks first and the
# short ones fill the tail. Otherwise the kernel above, line for line.
ATTENTION_CAUSAL = """
// Causal flash-attention forward, O = softmax(mask(Q K^T * scale)) V per head: query i sees keys j <= i (top left,
// as torch's is_causal; masked scores -1e30). Heads along x, query blocks along y from the last: the heaviest start first.
@autotune(BR in [64, 128], BC in [64, 128], D in [64, 128], NT in [128, 256])
@launch(NT)
@dynshared
@grid(H, cdiv(N, BR))
kernel attention_causal_bf16(Q: tensor<bf16>[H, N, D], K: tensor<bf16>[H, Nk, D], V: tensor<bf16>[H, Nk, D],
                             O: tensor<bf16>[H, N, D], scale: f32) {
  let h = ctx.block.x
  let row = (ctx.grid.y - 1 - ctx.block.y) * BR      // the last queries (the most keys) first
  let qs = scale * 1.4426950408889634
  var q = Q[h, row :+ BR, :]
  var acc: tile<f32>[BR, D] = 0.0
  var m: tile<f32>[BR, 1] = -1.0e30
  var l: tile<f32>[BR, 1] = 0.0
  for kt in range(0, min(Nk, row + BR), BC) {         // no block wholly above the diagonal
    var s: tile<f32>[BR, BC] = where(cols(BR, BC, kt) <= rows(BR, BC, row), dot_t(q, K[h, kt :+ BC, :]), -1.0e30)
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
    parts.append(ATTENTION_CAUSAL)
    for t in FLOAT_TYPES:     # last, so that the kernels above keep their line numbers
        parts.append(CLUSTER1.replace("{T}", t))
    parts.append(CHEAD.replace("{HS}", ", ".join(map(str, CHEAD_SIZES))))
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


def ref_attention(q, k, v, scale, causal=False):
    """softmax(q k^T * scale) v per head in float64; causal: query i sees the keys j <= i only
    (top-left aligned, torch's is_causal; every query sees key 0, so no row is empty)."""
    q, k, v = _f64(q), _f64(k), _f64(v)
    s = q @ k.transpose(0, 2, 1) * scale
    if causal:
        n, nk = s.shape[-2:]
        s = np.where(np.arange(nk)[None, :] <= np.arange(n)[:, None], s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


if __name__ == "__main__":
    import sys
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("bench_kernels.tile")
    print(write_tile_file(out))
