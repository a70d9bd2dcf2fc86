# %% [markdown]
# # 10. Halos, edges and reductions across CTAs
#
# Three things every kernel writer meets after the first week, and that each cost a newcomer a
# silent wrong answer before the compiler learned to say so:
#
# 1. **A stencil with a halo.** Each output element needs its neighbours, so each CTA reads a
#    slice a little wider than the one it writes, and at the ends of the tensor that slice runs
#    outside it. What the elements outside *are* is a rule of the language (spec section 8), and
#    it is not "zero".
# 2. **A reduction across CTAs.** A column sum over 30,522 rows is more than one CTA should do.
#    Many CTAs each reduce a block of rows and combine their partial results with one tile atomic
#    (spec section 9).
# 3. **A row too long for one CTA**, held by a thread block cluster (`@cluster`), and per-thread
#    loops that stop early (`break`) or skip (`continue`).
#
# The built-ins used here (`where`, `colmax`, `exp2`, `cluster_sum`, ...) are all in the table of
# spec section 10, [docs/spec.md](../docs/spec.md#10-built-ins). Every result is checked against
# numpy; the inputs are sizes that are *not* multiples of the tiles, and one of them is the real
# token-embedding table of the MiniLM model (`tilenb.datasets`).

# %%
%load_ext tilenb
import warnings

import numpy as np
import tilenb
from tilenb import datasets

rng = np.random.default_rng(10)

# %% [markdown]
# ## 1. A 3-point moving average: the halo that loses its edges
#
# `Y[i] = (X[i - 1] + X[i] + X[i + 1]) / 3`, with `X` taken as 0 outside the vector (zero
# padding). Each CTA writes 512 outputs from `s = 512 * ctx.block.x` and so reads 514 inputs,
# from `s - 1`. The obvious kernel copies that slice into a tile and adds three shifted windows
# of it:

# %%
%%tilekernel --show threads
@launch(128)
@grid(cdiv(N, 512))
kernel avg3_naive(X: tensor<f32>[N], Y: tensor<f32>[N]) {
  let s = ctx.block.x * 512
  var x = X[s - 1 :+ 514]               // the CTA's 512 elements and one neighbour each side
  Y[s :+ 512] = (x[0 :+ 512] + x[1 :+ 512] + x[2 :+ 512]) / 3.0
}

# %% [markdown]
# The thread map shows the two copies as the 1-D slices they are (`[514]`, `[512]`), and flags
# the load as uncoalesced with its cause: a slice starting at `s - 1` is one element short of a
# 32-byte sector, so each warp touches one sector more than its bytes fill. For a halo that extra
# sector is the price of the neighbours, and the flag says so ("or accept the extra sector").
#
# The result is wrong, though, and not because of memory traffic. Run it on 1,000 elements with
# `Y` poisoned with NaN, so that anything never written stands out:

# %%
N = 1000
X = rng.standard_normal(N).astype(np.float32)
P = np.pad(X, 1)                                  # zero padding, the intended meaning
want = (P[:-2] + P[1:-1] + P[2:]) / 3

Y = np.full(N, np.nan, np.float32)
avg3_naive(X, Y)
print("elements never written:", np.flatnonzero(np.isnan(Y)))

# %% [markdown]
# `Y[0]` and `Y[999]` were never written. Spec section 8, rule 1: an element outside the tensor
# loads as 0 but is **invalid** in the tile; rule 4: an elementwise result is valid only where
# all its operands are, so `x[0 :+ 512] + ...` is invalid at output 0 (it reads `X[-1]`) and at
# output 999 (it reads `X[1000]`); rule 9: a store writes only valid elements. Nothing was
# computed wrongly: the kernel said "these elements are unknown" and the store left them alone.
#
# A launch with `debug=True` says exactly that, as a `tilenb.EdgeWarning` (also kept in
# `kernel.last_run.notes`) that names the elements, the store, and the operand that made them
# invalid:

# %%
Y = np.full(N, np.nan, np.float32)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    avg3_naive(X, Y, debug=True)
for w in caught:
    print(f"{w.category.__name__}: {w.message}")
print(avg3_naive.last_run.notes == tuple(str(w.message) for w in caught))

# %% [markdown]
# ### The fix: fill a tile, then store the slice into a window of it
#
# Zero padding means "outside the tensor, use 0". Say so: declare the tile filled with `0.0`
# (wholly valid, rule 3), then store the slice into a **window** of it, `x[:] = X[...]`. A window
# store writes the slice's valid elements and leaves the rest of the tile, and its valid region,
# as they were (rule 9): the two ends stay 0 and valid. (`x = X[...]` would not do: assigning a
# whole tile replaces its values *and* its region, rule 8, and the halo is invalid again.)

# %%
%%tilekernel --show threads
@launch(128)
@grid(cdiv(N, 512))
kernel avg3(X: tensor<f32>[N], Y: tensor<f32>[N]) {
  let s = ctx.block.x * 512
  var x: tile<f32>[514] = 0.0           // wholly valid, 0 everywhere
  x[:] = X[s - 1 :+ 514]                // writes the elements inside X; the ends stay 0
  Y[s :+ 512] = (x[0 :+ 512] + x[1 :+ 512] + x[2 :+ 512]) / 3.0
}

# %%
Y = np.full(N, np.nan, np.float32)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    avg3(X, Y, debug=True)
print("edge warnings:", len(caught))
err = tilenb.verify(Y, want, what="avg3 with zero padding, 1,000 elements in 2 CTAs")

# %% [markdown]
# ## 2. A reduction across CTAs: column statistics of the MiniLM embedding table
#
# The embedding table has one row per word piece: 30,522 rows of 384. Per column we want the sum
# of the positive entries and the largest entry. One CTA per 64 columns would loop over 30,522
# rows alone; instead the grid is 2-D: CTA `(bx, by)` takes rows `64 * by` on and columns
# `64 * bx` on, reduces its `[64, 64]` block to a `[1, 64]` row with `colsum` and `colmax`, and
# adds its row into the result with a **tile atomic**: `atomic_add(Pos[0 :+ 1, c :+ 64], t)`
# gives every element of the slice one indivisible update by its element of `t`, against every
# other CTA doing the same (spec section 9). `atomic_max` does the same with a maximum.
#
# `where(x > 0.0, x, 0.0)` keeps the positive entries. The last block of rows (30,522 is not a
# multiple of 64) is partly outside the table: `colsum` and `colmax` skip invalid elements (rule
# 5), so it needs no mask either.

# %%
%%tilekernel --show threads,barriers
@launch(256)
@grid(cdiv(N, 64), cdiv(M, 64))
kernel column_stats(X: tensor<f32>[M, N], Pos: tensor<f32>[1, N], Top: tensor<f32>[1, N]) {
  let r = ctx.block.y * 64
  let c = ctx.block.x * 64
  var x = X[r :+ 64, c :+ 64]                                     // this CTA's block
  atomic_add(Pos[0 :+ 1, c :+ 64], colsum(where(x > 0.0, x, 0.0)))  // every CTA adds its sums
  atomic_max(Top[0 :+ 1, c :+ 64], colmax(x))                     // ... and offers its maxima
}

# %% [markdown]
# The outputs start at the identity of each reduction: 0 for the sum, -inf for the maximum.
# (CTAs add in no promised order, so on a GPU the sums may differ from run to run in their last
# bits; `tilenb.verify` allows for it.)

# %%
E = datasets.token_embedding_table()                  # [30522, 384] f32, the real weights
Pos = np.zeros((1, E.shape[1]), np.float32)
Top = np.full((1, E.shape[1]), -np.inf, np.float32)
column_stats(E, Pos, Top)
err = tilenb.verify(Pos, np.where(E > 0, E, 0).sum(axis=0, keepdims=True, dtype=np.float64),
                    what="sum of positive entries per column, 30,522 rows in 477 x 6 CTAs")
err = tilenb.verify(Top, E.max(axis=0, keepdims=True), what="largest entry per column")

# %% [markdown]
# ## 3. A row held by a thread block cluster: softmax over 4,096 columns
#
# A softmax needs the whole row's maximum and sum before it can write anything. With `@cluster(4)`
# the grid is cut into clusters of 4 CTAs that can reach each other's shared memory; each CTA
# keeps a quarter of the row (`ctx.cluster.x` is the cluster's number, `ctx.cluster.rank` the
# CTA's place in it), reduces its quarter, and `cluster_max(m)` / `cluster_sum(s)` replace its
# partial result by the combination of all four (spec section 9). The row is read once and never
# leaves the chip.
#
# The exponential is written with `exp2`: `exp(x) = exp2(x * log2(e))`, and `exp2` is the one the
# GPU has in hardware.

# %%
%%tilekernel --show lifetimes,barriers
@launch(256)
@cluster(4)
@grid(M * 4)
kernel softmax_cluster(X: tensor<f32>[M, 4096], Y: tensor<f32>[M, 4096]) {
  let r = ctx.cluster.x                       // one cluster per row
  let c = ctx.cluster.rank * 1024             // this CTA's quarter of it
  var x = X[r :+ 1, c :+ 1024]
  var m = rowmax(x)
  cluster_max(m)                              // the whole row's maximum, in every CTA
  var p = exp2((x - m) * 1.4426950408889634)  // exp(x - m)
  var s = rowsum(p)
  cluster_sum(s)                              // the whole row's sum
  Y[r :+ 1, c :+ 1024] = p / s
}

# %%
S = (3.0 * rng.standard_normal((7, 4096))).astype(np.float32)
Ys = np.zeros_like(S)
softmax_cluster(S, Ys)
e = np.exp(S.astype(np.float64) - S.max(axis=1, keepdims=True))
err = tilenb.verify(Ys, e / e.sum(axis=1, keepdims=True), what="softmax_cluster, 7 rows in 7 clusters of 4 CTAs")

# %% [markdown]
# ## 4. Per-thread loops that stop early: `break` and `continue`
#
# Not everything is a tile statement. For each row, find the first column where the running sum
# of the row's *positive* entries passes a limit (-1 if it never does). Each thread takes one row
# and walks it: `continue` skips an entry that does not count, `break` stops at the answer. The
# threads of a warp now run different numbers of turns (they diverge), which is fine for code
# like this; spec section 9 says what a `break` means for the threads that stay.

# %%
%%tilekernel --show none
@launch(64)
@grid(cdiv(M, 64))
kernel first_over(X: tensor<f32>[M, N], F: tensor<i32>[M, 1], limit: f32) {
  let row = ctx.block.x * 64 + ctx.thread
  if row < M {
    var total = 0.0
    var found = -1
    for j in range(0, N) {
      let v = X[row, j]
      if v <= 0.0 {
        continue                  // only positive entries count
      }
      total = total + v
      if total > limit {
        found = i32(j)
        break                     // the first column past the limit
      }
    }
    F[row, 0] = found
  }
}

# %%
B = rng.standard_normal((300, 52)).astype(np.float32)
F = np.zeros((300, 1), np.int32)
first_over(B, F, 6.0)
run = np.cumsum(np.where(B > 0, B, 0), axis=1, dtype=np.float32)   # the same f32 sums, in order
past = run > 6.0
err = tilenb.verify(F, np.where(past.any(axis=1), past.argmax(axis=1), -1).astype(np.int32)[:, None],
                    what="first_over, 300 rows of 52")

# %% [markdown]
# ## What to remember
#
# - Outside a tensor, elements are **invalid**, not zero: they are never stored, and whatever is
#   computed from them is invalid too. Reductions skip them, so ragged edges need no mask.
# - For zero padding, **fill a tile and store into a window of it** (`x[:] = X[...]`).
# - `debug=True` turns "silently not written" into an `EdgeWarning` that names the operand.
# - Partial results of many CTAs combine in one statement: `atomic_add` / `atomic_max` on a
#   tensor slice. A row too long for one CTA can be held by a cluster (`cluster_sum`).
