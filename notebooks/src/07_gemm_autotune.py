# %% [markdown]
# # 7. GEMM with `@autotune`, and tensor cores
#
# A matrix product `C = A B` is the kernel every accelerator is built around. The tiled form:
# each CTA owns a `TM x TN` block of `C`, keeps it in an accumulator tile, and walks the inner
# dimension `K` in steps of `TK`, copying a `TM x TK` panel of `A` and a `TK x TN` panel of `B`
# into shared memory and adding their product. Each element copied is then used `TN` (or `TM`)
# times from fast memory instead of once from slow memory.
#
# Which `TM`, `TN`, `TK` are best depends on the matrix shapes and on the GPU, so the kernel does
# not choose: `@autotune` lists candidates, the compiler builds one **variant** per combination,
# and on a GPU the first call times them all and keeps the fastest.
#
# The data is a real linear layer: MiniLM's layer-0 **query projection** (`W_q`, 384 x 384, plus a
# bias) applied to the token vectors of a sentence. A linear layer stores its weight as
# `[out, in]`, so `y = x W^T + b`: the kernel reads `W` in its stored layout with `dot_t`
# (`dot_t(a, w)` is `a` times the transpose of `w`).

# %%
%load_ext tilenb
import itertools
import ml_dtypes
import numpy as np
import tilenb
from tilenb import datasets
from tilenb.notebook import show

att = datasets.attention_weights(layer=0)
X = datasets.sentence_embeddings()                          # [36, 384]
Wq, bq = att["q"], att["q_bias"].reshape(1, -1).copy()      # [384 out, 384 in], [1, 384]
reference = X.astype(np.float64) @ Wq.T.astype(np.float64) + bq
print("x:", X.shape, " W_q:", Wq.shape, " y:", reference.shape)

# %%
%%tilekernel --tune TM=32,TN=64,TK=32
@autotune(TM in [32, 64], TN in [32, 64], TK in [16, 32])
@launch(256)
@grid(cdiv(M, TM), cdiv(N, TN))
kernel linear(X: tensor<f32>[M, K], W: tensor<f32>[N, K], Bias: tensor<f32>[1, N], Y: tensor<f32>[M, N]) {
  let r = ctx.block.x * TM
  let c = ctx.block.y * TN
  var acc: tile<f32>[TM, TN] = 0.0
  for k in range(0, K, TK) {
    var a = X[r :+ TM, k :+ TK]          // TM x TK panel of the activations
    var w = W[c :+ TN, k :+ TK]          // TN x TK panel of the weight, as stored
    acc += dot_t(a, w)                   // a times w transposed: TM x TN
  }
  Y[r :+ TM, c :+ TN] = acc + Bias[0 :+ 1, c :+ TN]
}

# %% [markdown]
# The views above are for the variant named with `--tune` (the magic's option); the ruler and
# thread map change with the tile sizes. The space of variants, and each one's shared memory:

# %%
space = linear.tune_space
print(space)
variants = [dict(zip(space, values)) for values in itertools.product(*space.values())]
for v in variants:
    a = linear.analysis(**v)
    print(f"  {v}: footprint {a.footprint:6,} B, {len(a.barriers)} barriers")

# %% [markdown]
# ## Every variant computes the same product
#
# Variants differ in speed, never in result: each is checked here against numpy. 36 tokens is not
# a multiple of 32 or 64, so every variant's last row of CTAs is partly masked.
#
# On a GPU the first call without `variant=` times every variant on these shapes, keeps the
# fastest (and remembers it on disk), and the **timing view** lists each variant's time. The CPU
# executor times nothing: it runs the first variant unless a call names one with `variant=`.

# %%
for v in variants:
    Y = np.zeros((36, 384), np.float32)
    linear(X, Wq, bq, Y, variant=v)
    tilenb.verify(Y, reference, what=f"linear {v}", rtol=1e-4, atol=1e-4)

# %%
Y = np.zeros((36, 384), np.float32)
linear(X, Wq, bq, Y)                   # autotuned on a GPU; the first variant on the CPU
err = tilenb.verify(Y, reference, what="linear, variant chosen by the backend", rtol=1e-4, atol=1e-4)
print(linear.last_run.note)
show(linear, "timing")

# %% [markdown]
# ## Tensor cores: bf16 inputs, f32 accumulation
#
# A GPU's tensor cores multiply small blocks of 16-bit floats (f16 or bf16) and accumulate in f32,
# many times faster than ordinary f32 arithmetic. The compiler uses them for a loop of exactly
# this shape: a plain `for` whose body does `acc += dot(a, b)` or `dot_t` on f16/bf16 tiles. It
# then keeps the accumulator in registers and overlaps the next panels' loads with the current
# product. Nothing in the kernel changes but the element types.
#
# bf16 keeps f32's range with 8 bits of mantissa: the inputs are rounded once when converted, and
# the reference below is computed from the same rounded values, in f64, so the check measures the
# kernel, not the rounding.

# %%
%%tilekernel --tune TM=64,TN=64,TK=32
@autotune(TM in [64, 128], TN in [64, 128], TK in [32])
@launch(256)
@grid(cdiv(M, TM), cdiv(N, TN))
kernel linear_bf16(X: tensor<bf16>[M, K], W: tensor<bf16>[N, K], Bias: tensor<f32>[1, N], Y: tensor<f32>[M, N]) {
  let r = ctx.block.x * TM
  let c = ctx.block.y * TN
  var acc: tile<f32>[TM, TN] = 0.0
  for k in range(0, K, TK) {
    var a = X[r :+ TM, k :+ TK]
    var w = W[c :+ TN, k :+ TK]
    acc += dot_t(a, w)                   // bf16 x bf16 -> f32: tensor cores on a GPU
  }
  Y[r :+ TM, c :+ TN] = acc + Bias[0 :+ 1, c :+ TN]
}

# %%
ON_GPU = linear_bf16.module.backend == "cuda"
bf16 = ml_dtypes.bfloat16
if ON_GPU:
    # a GPU-sized problem: 4096 real embedding-table rows through the layer-0 feed-forward weight
    Xg = np.ascontiguousarray(datasets.token_embedding_table()[:4096])
    Wg = datasets.minilm_weights()["encoder.layer.0.intermediate.dense.weight"]      # [1536, 384]
    bg = datasets.minilm_weights()["encoder.layer.0.intermediate.dense.bias"].reshape(1, -1).copy()
else:
    Xg, Wg, bg = X, Wq, bq            # the CPU executor: the 36 x 384 x 384 projection
Xh, Wh = Xg.astype(bf16), Wg.astype(bf16)
Yh = np.zeros((Xg.shape[0], Wg.shape[0]), np.float32)
linear_bf16(Xh, Wh, bg, Yh)
ref = Xh.astype(np.float64) @ Wh.astype(np.float64).T + bg
err = tilenb.verify(Yh, ref, what=f"linear_bf16 {Xg.shape[0]} x {Wg.shape[1]} x {Wg.shape[0]}", rtol=1e-3, atol=1e-3)
print(f"bf16 rounding of the inputs moved the result by up to "
      f"{np.abs(ref - (Xg.astype(np.float64) @ Wg.T.astype(np.float64) + bg)).max():.3f}")
show(linear_bf16, "timing")

# %% [markdown]
# On an NVIDIA H200, one run of this notebook autotuned `linear` to `TM=32, TN=32, TK=16` for the
# 36-token product (the eight variants took 0.096 to 0.29 ms: with 36 rows, small tiles mean more
# CTAs to spread over the 132 multiprocessors), and `linear_bf16` to `TM=64, TN=64` for the
# 4096 x 384 x 1536 product, at about 22 TFLOP/s: a problem this small keeps the tensor cores
# far from their peak, which needs products of thousands in every dimension.
#
# On the CPU backend the bf16 values are computed in f32 exactly as the GPU's tensor cores define
# them (products of bf16 inputs, f32 sums), so the results agree within f32 rounding; the speed
# difference only exists on a GPU, where the timing view above reports each variant's time and the
# achieved FLOP/s against the tensor cores' peak.

# %% [markdown]
# ## Fusing the activation: functions, across cells
#
# MiniLM's feed-forward block applies GELU to the output of its first linear layer. Rather than
# a second kernel that reads the product back, the activation goes into the store of the GEMM
# (the **epilogue**), where the accumulator is still on chip.
#
# A function (`fn`) is inlined where it is called: an expression function such as `gelu` is a
# formula that fuses into the caller's elementwise statement at no cost beyond its arithmetic.
# A function defined in one `%%tilekernel` cell is visible to the cells after it, so helpers can
# live in a cell of their own (it defines no kernel, and says so).

# %%
%%tilekernel
fn gelu(x) = 0.5 * x * (1.0 + erf(x * 0.7071067811865476))

# %%
%%tilekernel --show none
@autotune(TM in [32], TN in [64], TK in [32])
@launch(256)
@grid(cdiv(M, TM), cdiv(N, TN))
kernel linear_gelu(X: tensor<f32>[M, K], W: tensor<f32>[N, K], Bias: tensor<f32>[1, N], Y: tensor<f32>[M, N]) {
  let r = ctx.block.x * TM
  let c = ctx.block.y * TN
  var acc: tile<f32>[TM, TN] = 0.0
  for k in range(0, K, TK) {
    var a = X[r :+ TM, k :+ TK]
    var w = W[c :+ TN, k :+ TK]
    acc += dot_t(a, w)
  }
  Y[r :+ TM, c :+ TN] = gelu(acc + Bias[0 :+ 1, c :+ TN])     // gelu from the cell above
}

# %%
from math import erf
W1 = datasets.minilm_weights()["encoder.layer.0.intermediate.dense.weight"]          # [1536, 384]
b1 = datasets.minilm_weights()["encoder.layer.0.intermediate.dense.bias"].reshape(1, -1).copy()
Y1 = np.zeros((X.shape[0], W1.shape[0]), np.float32)
linear_gelu(X, W1, b1, Y1)
z = X.astype(np.float64) @ W1.T.astype(np.float64) + b1
ref = 0.5 * z * (1.0 + np.vectorize(erf)(z / np.sqrt(2.0)))
err = tilenb.verify(Y1, ref, what="linear_gelu: MiniLM layer-0 feed-forward, 36 x 384 -> 1536", rtol=1e-4, atol=1e-4)
print(f"{(Y1 > 0).mean():.0%} of the 36 x 1536 activations are positive after GELU")
