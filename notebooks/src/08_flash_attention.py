# %% [markdown]
# # 8. Flash attention over real embeddings
#
# Self-attention turns each token's vector into a weighted mix of every token's value vector:
#
# `O = softmax(Q K^T / sqrt(d)) V`, one softmax per query row.
#
# Written as three kernels (scores, softmax, product) it writes and reads an `N x N` score matrix
# per head: for long sequences that matrix, not the arithmetic, is the cost. **Flash attention**
# fuses the three: each CTA holds a block of query rows, walks the keys one tile at a time, and
# keeps for each row only a running maximum `m`, a running sum `l` and an accumulator `acc`.
# When a new key tile raises a row's maximum, what was accumulated so far is rescaled by
# `exp(m_old - m_new)`, the same trick as the two-pass softmax of tutorial 6, done in one pass.
# The scores never leave the CTA.
#
# The inputs are real: the queries, keys and values of MiniLM's first layer (12 heads of 32) for
# the tokens of real sentences (`tilenb.datasets.attention_inputs`).

# %%
%load_ext tilenb
import numpy as np
import tilenb
from tilenb import datasets

text = (datasets.SAMPLE_TEXT + " Attention lets every token look at every other token; the fused "
        "kernel keeps the scores in shared memory and never writes them out.")
q, k, v = datasets.attention_inputs(text, layer=0)           # [12 heads, tokens, 32] each
heads, n, d = q.shape
print(f"{n} tokens, {heads} heads of {d}")


def attention_reference(q, k, v):
    """numpy, float64: softmax(q k^T / sqrt(d)) v per head."""
    s = q.astype(np.float64) @ k.transpose(0, 2, 1).astype(np.float64) / np.sqrt(q.shape[-1])
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v.astype(np.float64)

# %% [markdown]
# ## The kernel
#
# The grid is two-dimensional: `ctx.block.x` picks a block of `BR` query rows, `ctx.block.y` the
# head. `Q[h, row :+ BR, :]` selects head `h` with a leading scalar index, then slices rows.
#
# - `q` is a `let` view, but `dot_t` reads it in every turn of the loop, so the compiler stages it
#   in shared memory anyway (the ruler shows it).
# - `acc`, `m` and `l` are declared before the loop and read after it: they live across the whole
#   loop. `s` and `p` live for one turn and reuse the same bytes each turn.
# - The last key tile runs past the sequence's end (the token count is not a multiple of `BC`):
#   those scores are invalid, so `rowmax` and `rowsum` skip them and `dot` counts them as 0.

# %%
%%tilekernel
@autotune(BR in [16], BC in [16], D in [32])
@launch(128)
@grid(cdiv(N, BR), H)
kernel flash_attention(Q: tensor<f32>[H, N, D], K: tensor<f32>[H, Nk, D], V: tensor<f32>[H, Nk, D],
                       O: tensor<f32>[H, N, D], scale: f32) {
  let h = ctx.block.y
  let row = ctx.block.x * BR
  let q = Q[h, row :+ BR, :]
  var acc: tile<f32>[BR, D] = 0.0
  var m: tile<f32>[BR, 1] = -1.0e30
  var l: tile<f32>[BR, 1] = 0.0
  for kt in range(0, Nk, BC) {
    var s: tile<f32>[BR, BC] = dot_t(q, K[h, kt :+ BC, :]) * scale
    var m_new = max(m, rowmax(s))
    var p = exp(s - m_new)
    var rescale = exp(m - m_new)
    l = l * rescale + rowsum(p)
    acc = acc * rescale + dot(p, V[h, kt :+ BC, :])
    m = m_new
  }
  O[h, row :+ BR, :] = acc / l
}

# %%
O = np.zeros_like(q)
flash_attention(q, k, v, O, 1.0 / np.sqrt(d))
err = tilenb.verify(O, attention_reference(q, k, v), what=f"flash_attention, {heads} heads x {n} real tokens",
                    rtol=1e-4, atol=1e-5)

# %% [markdown]
# ## Keeping the accumulator in registers: `@registers`
#
# `acc` is only ever updated element by element (`acc * rescale + ...`), used as a `dot`
# accumulator, and stored: no thread ever needs an element another thread holds. Such a tile can
# live in each thread's registers instead of shared memory. `@registers(acc)` asks for that; the
# checker refuses it for a tile that some statement reads across threads (a `rowsum(acc)`, say).
# The ruler shows `acc` in registers and a footprint 2 KB smaller.

# %%
%%tilekernel --show lifetimes
@autotune(BR in [16], BC in [16], D in [32])
@launch(128)
@grid(cdiv(N, BR), H)
@registers(acc)
kernel flash_attention_reg(Q: tensor<f32>[H, N, D], K: tensor<f32>[H, Nk, D], V: tensor<f32>[H, Nk, D],
                           O: tensor<f32>[H, N, D], scale: f32) {
  let h = ctx.block.y
  let row = ctx.block.x * BR
  let q = Q[h, row :+ BR, :]
  var acc: tile<f32>[BR, D] = 0.0
  var m: tile<f32>[BR, 1] = -1.0e30
  var l: tile<f32>[BR, 1] = 0.0
  for kt in range(0, Nk, BC) {
    var s: tile<f32>[BR, BC] = dot_t(q, K[h, kt :+ BC, :]) * scale
    var m_new = max(m, rowmax(s))
    var p = exp(s - m_new)
    var rescale = exp(m - m_new)
    l = l * rescale + rowsum(p)
    acc = acc * rescale + dot(p, V[h, kt :+ BC, :])
    m = m_new
  }
  O[h, row :+ BR, :] = acc / l
}

# %%
O_reg = np.zeros_like(q)
flash_attention_reg(q, k, v, O_reg, 1.0 / np.sqrt(d))
err = tilenb.verify(O_reg, attention_reference(q, k, v), what="flash_attention_reg (@registers(acc))", rtol=1e-4, atol=1e-5)
print(f"shared memory: {flash_attention.analysis().footprint:,} B -> {flash_attention_reg.analysis().footprint:,} B")

# %% [markdown]
# ## Queries and keys from different texts
#
# Nothing ties the number of keys to the number of queries: `Nk` is its own runtime dimension.
# Here the queries are one sentence and the keys and values another (cross-attention, with the
# same real projections): 36 queries against the keys of a 12-token sentence, less than one key tile.

# %%
q2, _, _ = datasets.attention_inputs(datasets.SAMPLE_TEXT, layer=0)
_, k2, v2 = datasets.attention_inputs("Tiles move from global memory into shared memory once.", layer=0)
print("queries", q2.shape, "keys", k2.shape)
O2 = np.zeros_like(q2)
flash_attention(q2, k2, v2, O2, 1.0 / np.sqrt(d))
err = tilenb.verify(O2, attention_reference(q2, k2, v2), what=f"cross attention, {q2.shape[1]} queries x {k2.shape[1]} keys", rtol=1e-4, atol=1e-5)

# %% [markdown]
# ## From heads back to the layer
#
# The heads, side by side, are the attention's output before its own linear layer. Checking it
# against a plain numpy rendition of the model's layer-0 attention confirms that the data is what
# the model computes, not just self-consistent:

# %%
att = datasets.attention_weights(layer=0)
x = datasets.sentence_embeddings(text).astype(np.float64)
proj = lambda p: (x @ att[p].T + att[p + "_bias"]).reshape(n, heads, d).transpose(1, 0, 2)
context_ref = attention_reference(proj("q"), proj("k"), proj("v")).transpose(1, 0, 2).reshape(n, heads * d)
err = tilenb.verify(O.transpose(1, 0, 2).reshape(n, heads * d), context_ref,
                    what="concatenated heads = MiniLM layer-0 attention context", rtol=1e-4, atol=1e-5)

# %% [markdown]
# ## Causal attention: a mask and a loop bound
#
# A decoder (GPT-style) model lets each token attend only to itself and the tokens before it:
# query `i` sees key `j` only when `j <= i`. The alignment is the top-left one of torch's
# `scaled_dot_product_attention(..., is_causal=True)`: query `i` and key `i` are the same
# position even when the two lengths differ, so with more queries than keys the queries past the
# last key see every key, and with more keys than queries the keys past the last query are never
# seen. (Every query sees key 0, so no row of scores is wholly masked.)
#
# Two changes to the kernel above say this:
#
# - **The mask**, a tile expression over the score tile. `rows(BR, BC, row)` is the `[BR, BC]`
#   tile whose element `(i, j)` is `row + i`, the query index of that score; `cols(BR, BC, kt)`
#   holds `kt + j`, its key index. `where(cols(...) <= rows(...), s, -1.0e30)` keeps the scores a
#   query may see and gives the others `-1e30`, which `exp` turns into 0. The index tiles are
#   never stored: each element's index is computed where the comparison needs it.
# - **The loop bound.** The CTA's queries are `row .. row + BR - 1`, so no key at or past
#   `row + BR` is seen by any of them: `range(0, min(Nk, row + BR), BC)` stops after the last key
#   block that holds a visible key, and the blocks wholly above the diagonal are never loaded.
#   Only the blocks the diagonal crosses need the mask; the earlier ones pass it unchanged.

# %%
%%tilekernel
@autotune(BR in [16], BC in [16], D in [32])
@launch(128)
@grid(cdiv(N, BR), H)
kernel causal_attention(Q: tensor<f32>[H, N, D], K: tensor<f32>[H, Nk, D], V: tensor<f32>[H, Nk, D],
                        O: tensor<f32>[H, N, D], scale: f32) {
  let h = ctx.block.y
  let row = ctx.block.x * BR
  let q = Q[h, row :+ BR, :]
  var acc: tile<f32>[BR, D] = 0.0
  var m: tile<f32>[BR, 1] = -1.0e30
  var l: tile<f32>[BR, 1] = 0.0
  for kt in range(0, min(Nk, row + BR), BC) {
    var s: tile<f32>[BR, BC] = where(cols(BR, BC, kt) <= rows(BR, BC, row), dot_t(q, K[h, kt :+ BC, :]) * scale, -1.0e30)
    var m_new = max(m, rowmax(s))
    var p = exp(s - m_new)
    var rescale = exp(m - m_new)
    l = l * rescale + rowsum(p)
    acc = acc * rescale + dot(p, V[h, kt :+ BC, :])
    m = m_new
  }
  O[h, row :+ BR, :] = acc / l
}

# %%
def causal_reference(q, k, v):
    """numpy, float64: softmax over the keys j <= i of each query i (top-left aligned)."""
    s = q.astype(np.float64) @ k.transpose(0, 2, 1).astype(np.float64) / np.sqrt(q.shape[-1])
    s = np.where(np.arange(k.shape[1])[None, :] <= np.arange(q.shape[1])[:, None], s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v.astype(np.float64)


Oc = np.zeros_like(q)
causal_attention(q, k, v, Oc, 1.0 / np.sqrt(d))
err = tilenb.verify(Oc, causal_reference(q, k, v), what=f"causal_attention, {heads} heads x {n} real tokens",
                    rtol=1e-4, atol=1e-5)
print(f"the first query attends to itself alone: row 0 of each head is its value vector "
      f"(max difference {np.abs(Oc[:, 0] - v[:, 0]).max():.1e})")
blocks = [-(-min(n, row + 16) // 16) for row in range(0, n, 16)]   # cdiv(min(Nk, row + BR), BC)
print(f"key blocks loaded per CTA: {blocks} of {-(-n // 16)} (non-causal: all of them)")

# %% [markdown]
# With a query length different from the key length the same kernel applies the same rule: 36
# queries against 12 keys (the queries from 12 on see every key) and the reverse, 12 queries
# against 36 keys (the last 24 keys are seen by no query).

# %%
for qq, kk, vv, what in ((q2, k2, v2, "36 queries x 12 keys"), (k2, q2, q2, "12 queries x 36 keys")):
    Ox = np.zeros_like(qq)
    causal_attention(qq, kk, vv, Ox, 1.0 / np.sqrt(d))
    err = tilenb.verify(Ox, causal_reference(qq, kk, vv), what=f"causal, {what}", rtol=1e-4, atol=1e-5)

# %% [markdown]
# The suite's GPU kernel (`attention_causal_bf16` in `tilenb/examples/suite_kernels.py`) is this
# kernel in bf16 with the base-2 exponentials of the non-causal one; on an H100/H200 its loop runs
# on TMA and wgmma, and the mask is evaluated on the accumulator fragments, each lane comparing the
# query and key index of the scores it holds.

# %% [markdown]
# ## Sizes
#
# One CTA here holds 16 query rows and reads the keys 16 at a time; its shared memory is a few KB
# (ruler above). On a GPU the usual choice is larger blocks (`BR`, `BC` of 64 or 128, for head
# dimensions of 64 or 128) and sequences of thousands of tokens: add them to `@autotune` and the
# GPU picks. MiniLM itself stops at 512 tokens; on the CPU executor the sentences here keep the
# notebook fast.
