# %% [markdown]
# # 4. Barriers: where the compiler puts them, and why
#
# The threads of a CTA do not run in lockstep: one warp may be several statements ahead of
# another. When a thread reads a tile element that a *different* thread wrote, the writer must be
# finished first. A **CTA barrier** (`__syncthreads()` in CUDA) makes every thread wait until all
# of them reach it.
#
# In tile code you never write one: the compiler knows which thread touches which element of
# every tile statement (the thread map of tutorial 2), finds every pair of accesses by different
# threads to the same bytes with no barrier between them, and places the fewest barriers that
# separate them all. The **barriers view** shows each one with its reason.
#
# Per-thread code is different: there the compiler cannot know which thread touches which element,
# so you place `barrier()` yourself, and a debug launch checks that you did it right.

# %%
%load_ext tilenb
import numpy as np
import tilenb
from tilenb import datasets

rng = np.random.default_rng(4)

# %% [markdown]
# ## When a barrier is needed, and when not
#
# `center_rows` scales a block of rows, subtracts each row's mean, and stores the result.
#
# - Line 5 copies `X` into `x`; line 6 scales `x` in place. Both statements split the `[8, 64]`
#   tile into the same runs at the same vector width, so every thread rewrites exactly the
#   elements it copied itself: **no barrier**.
# - Line 7 sums each row. A row's 64 elements were copied by 16 different threads, so the sum must
#   wait for all of them: **a barrier before line 7**.
# - Line 8 reads `m`, one value per row, from the threads of the whole row; `m` was written by
#   other threads: **a barrier before line 8**.

# %%
%%tilekernel --show barriers
@launch(128)
kernel center_rows(X: tensor<f32>[M, 64], Y: tensor<f32>[M, 64], s: f32) {
  let r = ctx.block.x * 8
  var x = X[r :+ 8, :]
  x = x * s                        // same runs, same threads: nothing to wait for
  var m = rowsum(x) / 64.0         // reads elements other threads wrote
  Y[r :+ 8, :] = x - m             // reads m, written by other threads
}

# %%
X = rng.standard_normal((44, 64)).astype(np.float32)
Y = np.zeros_like(X)
center_rows[-(-44 // 8)](X, Y, 2.0)
x = 2.0 * X.astype(np.float64)
err = tilenb.verify(Y, x - x.mean(axis=1, keepdims=True), what="center_rows", atol=1e-5)

# %% [markdown]
# ## Barriers in a loop
#
# A loop adds a second kind of hazard: the *next* turn overwrites a tile that slower threads may
# still be reading in *this* turn. `project` multiplies a block of rows by a weight matrix, taking
# 16 columns of the inner dimension per turn. In the view, one barrier sits between the copies and
# the `dot` (the dot reads elements other threads copied), and one at the end of the body (the
# next turn's copies overwrite `a` and `b` while other threads may still be in the `dot`).
#
# The weight is real: the first 64 x 64 block of MiniLM's layer-0 query projection; the rows are
# 40 real token embeddings (`tilenb.datasets`).

# %%
%%tilekernel --show barriers
@autotune(TM in [16], TK in [16])
@launch(128)
@grid(cdiv(M, TM))
kernel project(A: tensor<f32>[M, K], W: tensor<f32>[K, 64], C: tensor<f32>[M, 64]) {
  let r = ctx.block.x * TM
  var acc: tile<f32>[TM, 64] = 0.0
  for k in range(0, K, TK) {
    var a = A[r :+ TM, k :+ TK]
    var b = W[k :+ TK, :]
    acc += dot(a, b)
  }
  C[r :+ TM, :] = acc
}

# %%
weights = datasets.minilm_weights()
table = datasets.token_embedding_table()
ids = datasets.token_ids(datasets.SAMPLE_TEXT + " Barriers keep the threads in step.")
A = np.ascontiguousarray(table[ids[:40], :64])                     # 40 tokens x 64 features
Wq = np.ascontiguousarray(weights["encoder.layer.0.attention.self.query.weight"][:64, :64].T)
C = np.zeros((40, 64), np.float32)
project(A, Wq, C)
err = tilenb.verify(C, A.astype(np.float64) @ Wq, what="project: 40 real embeddings x a 64 x 64 block of W_q", atol=1e-5)

# %% [markdown]
# ## `barrier()` in per-thread code: a block scan
#
# An **inclusive scan** replaces each element by the sum of it and everything before it. In a CTA
# it can be done in log2(128) = 7 rounds: in round `k`, every thread adds the value `2^k` places to
# its left. Each thread handles one element, with single-element subscripts (`buf[0, t]`), so this
# is per-thread code, and the barriers are ours to write:
#
# 1. after the first writes, so that no thread reads a neighbour's element before it is there;
# 2. in each round, after the reads and before the writes, so that no thread overwrites an element
#    a slower neighbour has not read yet;
# 3. after the writes, so that the next round reads the new values.
#
# `barrier()` must be reached by every thread of the CTA, so the checker refuses it under a
# condition that differs between threads (`if t < N { barrier() }` is an error); the `while` here
# is the same for every thread.
#
# The data: the length in characters of each wordpiece of a real tokenized sentence; the scan
# gives where each token ends in the concatenated pieces.

# %%
%%tilekernel --show none
@launch(128)
kernel inclusive_scan(X: tensor<i32>[N], Y: tensor<i32>[N]) {
  let t = ctx.thread
  var buf: tile<i32>[1, 128]
  var v = 0
  if t < N { v = X[t] }
  buf[0, t] = v
  barrier()                        // 1. every element is in place
  var step = 1
  while step < 128 {
    var add = 0
    if t >= step { add = buf[0, t - step] }
    barrier()                      // 2. every read is done before anyone overwrites
    v += add
    buf[0, t] = v
    barrier()                      // 3. every write is done before the next round reads
    step = step * 2
  }
  if t < N { Y[t] = v }
}

# %%
pieces = datasets.tokenize("Each thread adds the value of a neighbour, then waits; the compiler "
                           "cannot see which neighbour, so the barriers are written by hand here.")
lengths = np.array([len(p.removeprefix("##")) for p in pieces], np.int32)
lengths = np.pad(lengths, (0, -len(lengths) % 4))          # a row length must be a multiple of 4
ends = np.zeros_like(lengths)
inclusive_scan[1](lengths, ends)
err = tilenb.verify(ends, np.cumsum(lengths), what=f"inclusive_scan of {len(pieces)} token lengths")
print(pieces[:6], "->", ends[:6])

# %% [markdown]
# When many threads must update the *same* global element, no barrier helps (a barrier only
# orders the threads of one CTA); an **atomic** read-modify-write does. `length_histogram` counts
# the token lengths above, one thread per token, with `atomic_add` on the count of its length.

# %%
%%tilekernel --show none
@launch(128)
kernel length_histogram(L: tensor<i32>[N], Hist: tensor<i32>[16]) {
  let i = ctx.block.x * 128 + ctx.thread
  if i < N {
    atomic_add(Hist[min(L[i], 15)], 1)        // lengths of 15 and more share the last bin
  }
}

# %%
hist = np.zeros(16, np.int32)
length_histogram[1](lengths, hist)
err = tilenb.verify(hist, np.bincount(np.minimum(lengths, 15), minlength=16), what="length_histogram with atomic_add")
print("tokens of 1..8 characters:", hist[1:9])

# %% [markdown]
# ## A debug launch catches a forgotten barrier
#
# Remove barrier 2 and the kernel has a **race**: a fast thread may overwrite its element while a
# slower thread `step` places to its right has not read it yet. On a GPU this usually gives the
# right answer, until one day it does not. A launch with `--debug` (or `debug=True` in
# `tilenb.compile`) records, on the CPU executor, which thread read and wrote every tile element
# between two barriers, and stops at the first conflict, naming the tile, the element, both threads
# and both lines. (The cell below is expected to fail.)

# %%
%%tilekernel --debug --show none
@launch(128)
kernel racy_scan(X: tensor<i32>[N], Y: tensor<i32>[N]) {
  let t = ctx.thread
  var buf: tile<i32>[1, 128]
  var v = 0
  if t < N { v = X[t] }
  buf[0, t] = v
  barrier()
  var step = 1
  while step < 128 {
    var add = 0
    if t >= step { add = buf[0, t - step] }
    v += add                       // barrier 2 forgotten: the write below races the read above
    buf[0, t] = v
    barrier()
    step = step * 2
  }
  if t < N { Y[t] = v }
}

# %% tags=["raises-exception"]
racy_scan[1](lengths, np.zeros_like(lengths))

# %% [markdown]
# The same launch without the debug checks runs, and on the CPU executor (which runs the threads
# of a CTA one statement at a time, in order) may even give the right answer: a race is a bug
# whether or not a given run shows it. That is what the debug launch is for.
#
# ## Summary
#
# | situation | barrier? |
# | --- | --- |
# | elementwise statements over the same tile at the same vector width | no |
# | a reduction, `dot`, `transpose` or broadcast reading elements other threads wrote | yes, placed by the compiler |
# | a loop whose next turn overwrites tiles this turn still reads | yes, at the end of the body |
# | per-thread code sharing a tile | yes, `barrier()` written by you; check with `--debug` |
# | threads of different CTAs updating one global element | no barrier can help: `atomic_add` / `atomic_max` |
