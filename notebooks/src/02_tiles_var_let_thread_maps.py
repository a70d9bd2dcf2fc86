# %% [markdown]
# # 2. Tiles, `var` and `let`, and thread maps
#
# A **tile** is a block of shared memory that belongs to one CTA: every thread of the CTA can read
# and write all of it, and it is fast, but small (48 KB per CTA by default). Kernels copy the part of
# a tensor they work on into tiles, then compute on the tiles.
#
# This tutorial shows the ways to make a tile, the difference between `var` (a tile of its own)
# and `let` (a view: no tile), slicing tiles, and how to read the **thread map**: the view that
# shows which thread of the CTA moves which elements in each copy, and what the memory system
# makes of it.

# %%
%load_ext tilenb
import numpy as np
import tilenb

rng = np.random.default_rng(7)

# %% [markdown]
# ## `var` copies, `let` views
#
# `blend` mixes each row of `X` with the same row of `R`: `Y = w * X + (1 - w) * R`.
#
# - `var x = X[r :+ 8, :]` copies the slice into a new `[8, 64]` tile. The copy belongs to the
#   kernel: changing `x` never touches `X`.
# - `let res = R[r :+ 8, :]` only gives the slice a name. No tile is made: where `res` is used,
#   the elements are read from global memory straight into the registers of the thread that needs
#   them. A `let` suits data read once; a `var` suits data read many times or changed.
#
# Look at the views under the cell. The **lifetime ruler** lists one tile, `x` (8 x 64 x 4 bytes =
# 2 KB): `res` takes no shared memory. The **thread map** lists three moves: the copy into `x`, the
# view `res` ("no tile is made"), and the store into `Y`.

# %%
%%tilekernel
@launch(128)
kernel blend(X: tensor<f32>[M, 64], R: tensor<f32>[M, 64], Y: tensor<f32>[M, 64], w: f32) {
  let r = ctx.block.x * 8
  var x = X[r :+ 8, :]              // a tile: 2 KB of shared memory
  let res = R[r :+ 8, :]            // a view of R: no tile
  Y[r :+ 8, :] = w * x + (1.0 - w) * res
}

# %%
M = 36
X = rng.standard_normal((M, 64)).astype(np.float32)
R = rng.standard_normal((M, 64)).astype(np.float32)
Y = np.zeros_like(X)
blend[-(-M // 8)](X, R, Y, 0.3)
err = tilenb.verify(Y, 0.3 * X + 0.7 * R, what="blend (var tile + let view)")

# %% [markdown]
# ## Reading the thread map
#
# Each copy statement iterates over the elements of its slice, row by row, in **runs** of a few
# consecutive elements (the **vector width**: 4 `f32` = 16 bytes, the widest load a thread issues).
# Run `k` goes to thread `k % 128` (the thread map draws each run in its thread's colour). So in
# the copy into `x` (8 rows of 64 = 512 elements = 128 runs) thread 0 takes elements 0-3 of row 0, thread 1 elements 4-7, ..., thread 16 elements
# 0-3 of row 1, and every thread moves exactly one run.
#
# The figures per **warp** (32 threads that issue their loads together) say how good that is:
#
# - **coalescing**: how many 32-byte **sectors** of global memory the warp's 32 loads touch,
#   against the fewest possible for the bytes moved. Here a warp reads 32 x 16 = 512 consecutive
#   bytes: 16 sectors, the ideal.
# - **bank conflicts**: shared memory serves a warp in **wavefronts** of 32 banks x 4 bytes; two
#   lanes touching different words of the same bank cost an extra wavefront.
#
# The text under the widget (also what a plain frontend shows) says the same; in Jupyter, hover a
# run of the tile to see its thread.

# %% [markdown]
# ## Making tiles, and slicing them
#
# A tile can be made from a slice (`var a = A[...]`), filled with a scalar
# (`var t: tile<f32>[R, C] = 0.0`), computed from an expression (`var y = x * 2.0`: it takes the
# expression's element type and shape), or declared uninitialized (`var t: tile<f32>[R, C]`).
# Tile dimensions are always constants, literals or `@autotune` names, because the compiler lays
# out shared memory before the launch.
#
# Tiles slice exactly like tensors, and a slice of a tile is a window onto the same bytes, so
# `t[0 :+ 4, :] = ...` writes into `t`. `flat(t)` views a `[R, C]` tile as one row of `R * C`.
#
# `stack_halves` builds an `[8, 32]` tile from two `[4, 32]` pieces of different rows of `X`,
# writes its row sums into column 0 of a second tile, and stores the flat view.

# %%
%%tilekernel --show lifetimes
@autotune(W in [32])
@launch(64)
kernel stack_halves(X: tensor<f32>[M, W], Y: tensor<f32>[G, 256], S: tensor<f32>[G, 8]) {
  let b = ctx.block.x
  var t: tile<f32>[8, W]                       // uninitialized: every element is written below
  t[0 :+ 4, :] = X[b * 4 :+ 4, :]              // rows 0-3: this CTA's 4 rows
  t[4 :+ 4, :] = X[b * 4 :+ 4, :] * -1.0       // rows 4-7: the same rows, negated
  var sums: tile<f32>[8, 1] = rowsum(t * t)    // a column: [8, 1]
  Y[b :+ 1, :] = flat(t)                         // [8, W] seen as one row of 8 * W = 256
  S[b :+ 1, :] = flat(sums)
}

# %%
G = 4
X = rng.standard_normal((4 * G, 32)).astype(np.float32)
Y = np.zeros((G, 256), np.float32)
S = np.zeros((G, 8), np.float32)
stack_halves[G](X, Y, S)
blocks = X.reshape(G, 4, 32)
t_ref = np.concatenate([blocks, -blocks], axis=1)            # [G, 8, 32]
tilenb.verify(Y, t_ref.reshape(G, 256), what="stack_halves: windows and flat()")
err = tilenb.verify(S, (t_ref.astype(np.float64) ** 2).sum(axis=2), what="stack_halves: row sums", rtol=1e-5)

# %% [markdown]
# ## A thread map of a transpose through shared memory, and the layout the compiler picks
#
# `transpose_rows` writes the transpose of each `[32, 32]` block. The copy into `t` is as good as
# a copy gets. The store iterates over `Y`'s elements (so the global side is coalesced, 16-byte
# vectors), which means each thread reads 4 elements down a **column** of `t`. Laid out row by
# row, a column of a 32 x 32 f32 tile sits in one bank, and the lanes would queue behind each
# other: 8 wavefronts where one would do. The analysis sees the column read and **swizzles** `t`:
# within each row, its 16-byte units are permuted by bits of the row number (an XOR), so a column
# spreads over all 32 banks while every row keeps its bytes and its 16-byte vectors. The thread
# map shows the figures of the layout the generated code uses (the ideal, here); a copy that still
# has conflicts is flagged ("bank conflicts"), with a proposed fix (such as padding each row).

# %%
%%tilekernel --show threads
@launch(256)
kernel transpose_rows(X: tensor<f32>[M, 32], Y: tensor<f32>[32, M]) {
  let r = ctx.block.x * 32
  var t = X[r :+ 32, :]
  Y[:, r :+ 32] = transpose(t)
}

# %%
M = 68
X = rng.standard_normal((M, 32)).astype(np.float32)
Y = np.zeros((32, M), np.float32)
transpose_rows[-(-M // 32)](X, Y)
err = tilenb.verify(Y, X.T, what="transpose_rows")

# %% [markdown]
# The analysis behind every view is also data (`kernel.analysis()`), for anyone who wants the
# numbers rather than the picture:

# %%
a = transpose_rows.analysis()
for c in a.copies:
    print(f"{c.direction:5} {c.tensor} <-> {c.tile}: vector width {c.vector_width}, "
          f"sectors {c.sectors} (ideal {c.ideal_sectors}), wavefronts {c.wavefronts} (ideal {c.ideal_wavefronts}), "
          f"tile {'swizzled' if c.swizzle else 'row by row'}")

# %% [markdown]
# ## A thread map that shows a problem: one column, one thread per row
#
# A swizzle cannot fix every column read. `first_column` keeps column 0 of each block: the store
# has one element per row, so one thread per row, and the 32 lanes of a warp read 32 rows of the
# same column. The swizzle moves whole 16-byte units, so a column can reach only 8 of the 32
# banks: 4 lanes share each bank, 4 wavefronts where one would do. The thread map flags the warp
# ("bank conflicts") and proposes a fix: pad each row of the tile by one element, so consecutive
# rows start in consecutive banks (which costs the tile its 16-byte vector accesses). The line
# "bank conflicts: ..." under the copy's figures names the cause: the first warp that conflicts,
# two of its lanes that touch one bank at different words (with the tile elements they touch),
# and the fix.

# %%
%%tilekernel --show threads
@launch(256)
kernel first_column(X: tensor<f32>[M, 32], Y: tensor<f32>[M, 1]) {
  let r = ctx.block.x * 32
  var t = X[r :+ 32, :]
  Y[r :+ 32, :] = t[:, 0 :+ 1]
}

# %%
Y1 = np.zeros((M, 1), np.float32)
first_column[-(-M // 32)](X, Y1)
err = tilenb.verify(Y1, X[:, :1], what="first_column")

# %% [markdown]
# ## Per-thread values: scalar `var`s
#
# Not everything is a tile. A `var` with a scalar type is a value each thread keeps for itself (in
# a register), and single-element subscripts read or write one element per thread. `row_max`
# gives each thread one row and walks it with a loop; no tile is involved, so the thread map has
# no copy to show and the ruler is empty. Tutorial 4 shows how per-thread code and tiles meet.
#
# `for<unroll 4>` runs the same iterations as a plain `for`, but builds the body 4 times per turn
# of the loop (and finishes the remainder one at a time): fewer loop tests, and 4 independent
# loads a thread can have in flight at once.

# %%
%%tilekernel --show none
@launch(64)
kernel row_max(X: tensor<f32>[M, N], Out: tensor<f32>[M]) {
  let row = ctx.block.x * 64 + ctx.thread
  if row < M {
    var best: f32 = -1.0e30
    for<unroll 4> j in range(0, N) {
      best = max(best, X[row, j])
    }
    Out[row] = best
  }
}

# %%
X = rng.standard_normal((100, 20)).astype(np.float32)
out = np.zeros(100, np.float32)
row_max[2](X, out)
err = tilenb.verify(out, X.max(axis=1), what="row_max, one row per thread")

# %% [markdown]
# ## Summary
#
# | statement | shared memory | who moves the data |
# | --- | --- | --- |
# | `var a = A[...]` | a tile of the slice's shape | all threads, run `k` by thread `k % threads` |
# | `let v = A[...]` | none (a view) | each thread reads what it needs where `v` is used |
# | `var t: tile<T>[R, C] = s` | a tile | all threads fill it |
# | `var s: f32 = ...` | none (a register per thread) | each thread its own |
#
# Next: how long each tile lives, and what happens when they do not fit in 48 KB.
