# %% [markdown]
# # 1. Kernels, tensors and launches
#
# A tile-language program runs on a GPU as a **grid** of **CTAs** (thread blocks). Every CTA runs
# the same kernel body with the same number of threads; what tells them apart is `ctx.block`,
# their position in the grid. The data lives in **tensors**: arrays in global memory that the host
# passes at the launch. Inside the body, a kernel copies slices of those tensors into **tiles**
# (shared memory, next tutorial), computes, and writes slices back.
#
# This notebook covers the host side of that story: writing a kernel in a `%%tilekernel` cell,
# launching it over a grid, passing scalars, letting the kernel pick its own grid with `@grid`,
# and what happens when a launch is wrong.
#
# Everything here runs on the CPU reference executor when there is no GPU (it is the definition of
# what a kernel means), and on CUDA when there is one. Each result is checked against numpy with
# `tilenb.verify`.

# %%
%load_ext tilenb
import numpy as np
import tilenb

rng = np.random.default_rng(2024)


def cdiv(a, b):
    """Ceiling division: how many CTAs of b rows cover a rows."""
    return -(-a // b)

# %% [markdown]
# ## A first kernel
#
# `shift_scale` computes `Y = alpha * X + beta` for a matrix with 96 columns and any number of
# rows. Each CTA takes 16 rows: CTA `b` starts at row `16 * b`.
#
# - `X: tensor<f32>[M, 96]` is a tensor parameter: element type `f32`, a **symbolic** first
#   dimension `M` (bound at the launch from the array passed) and a **literal** second one.
# - `alpha: f32` and `beta: f32` are scalars: one value, the same in every thread.
# - `var x = X[r :+ 16, :]` copies the slice "16 rows from row `r`, every column" into a tile.
#   `a :+ n` reads "start at a, take n".
# - `@launch(128)` gives each CTA 128 threads. The statements are written for the whole CTA; the
#   compiler splits each one among the threads (the thread map below shows how).
#
# Running the cell compiles the kernel, binds the name `shift_scale` in Python, and shows what the
# compiler decided (the views are explained in the next tutorials).

# %%
%%tilekernel
@launch(128)
kernel shift_scale(X: tensor<f32>[M, 96], Y: tensor<f32>[M, 96], alpha: f32, beta: f32) {
  let r = ctx.block.x * 16          // the first row this CTA handles
  var x = X[r :+ 16, :]             // a [16, 96] tile of X
  Y[r :+ 16, :] = alpha * x + beta
}

# %% [markdown]
# A launch names the grid in square brackets, then passes the arguments in order: arrays for
# tensors (written in place for outputs), numbers for scalars. With 100 rows, 7 CTAs of 16 rows
# cover them; the last CTA's slice runs past row 99, and the part outside the tensor is simply
# not read and not written (the edges are **masked**), so no bounds check is needed in the kernel.

# %%
M = 100
X = rng.standard_normal((M, 96)).astype(np.float32)
Y = np.zeros_like(X)
shift_scale[cdiv(M, 16)](X, Y, 2.0, 0.5)
err = tilenb.verify(Y, 2.0 * X + 0.5, what="shift_scale, 100 rows in 7 CTAs of 16")

# %% [markdown]
# `kernel.last_run` says what ran: the backend, the grid, the threads per CTA and, on the CPU
# backend, the wall time of the executor (which says nothing about a GPU).

# %%
print(shift_scale.last_run)

# %% [markdown]
# ## Letting the kernel choose its grid: `@grid`
#
# Most kernels need a grid that follows from their tensors' sizes. `@grid(...)` writes that rule
# next to the kernel, over the symbolic dimensions, with `cdiv` (ceiling division). A call
# without `[grid]` then uses it. A two-dimensional grid gives each CTA a `ctx.block.x` and a
# `ctx.block.y`: here CTAs tile the output in 16 x 32 blocks, and the column count `N` is
# symbolic too.
#
# Runtime dimensions are also ordinary values in the body: `N` here could be used in a loop bound.

# %%
%%tilekernel --show none
@launch(128)
@grid(cdiv(M, 16), cdiv(N, 32))
kernel add_bias(X: tensor<f32>[M, N], Bias: tensor<f32>[1, N], Y: tensor<f32>[M, N]) {
  let r = ctx.block.x * 16
  let c = ctx.block.y * 32
  Y[r :+ 16, c :+ 32] = X[r :+ 16, c :+ 32] + Bias[0 :+ 1, c :+ 32]
}

# %% [markdown]
# `Bias[0 :+ 1, c :+ 32]` is one row; added to a `[16, 32]` slice it **broadcasts** over the rows,
# as in numpy. 60 rows and 72 columns fit neither block size.

# %%
M, N = 60, 72
X = rng.standard_normal((M, N)).astype(np.float32)
bias = rng.standard_normal((1, N)).astype(np.float32)
Y = np.zeros_like(X)
add_bias(X, bias, Y)                     # grid from @grid: (cdiv(60, 16), cdiv(72, 32)) = (4, 3)
print("grid used:", add_bias.last_run.grid)
err = tilenb.verify(Y, X + bias, what="add_bias with @grid")

# %% [markdown]
# ## Who runs what: `ctx`
#
# Inside the body, `ctx` describes the thread that runs it: `ctx.block.x/y/z` (this CTA in the
# grid), `ctx.grid.x/y/z` (the grid's size), `ctx.thread` (0 to `ctx.threads - 1` within the CTA),
# `ctx.warp` (`ctx.thread / 32`: threads run in warps of 32) and `ctx.lane` (`ctx.thread % 32`).
#
# A statement whose subscripts are all single indices, like `O[b, t, 0] = ...`, is
# **per-thread code**: every thread runs it for its own element. This kernel records, for each
# thread of each CTA, its identity.

# %%
%%tilekernel --show none
@launch(64)
kernel who(O: tensor<i32>[G, 64, 4]) {
  let b = ctx.block.x
  let t = ctx.thread
  O[b, t, 0] = i32(ctx.block.x)
  O[b, t, 1] = i32(ctx.warp)
  O[b, t, 2] = i32(ctx.lane)
  O[b, t, 3] = i32(ctx.grid.x)
}

# %%
G = 4
O = np.full((G, 64, 4), -1, np.int32)
who[G](O)
t = np.arange(64)
expected = np.stack(np.broadcast_arrays(np.arange(G)[:, None], t // 32, t % 32, G), axis=-1).astype(np.int32)
tilenb.verify(O, expected, what="ctx.block, ctx.warp, ctx.lane, ctx.grid per thread")
print("CTA 1, threads 30..33 (block, warp, lane, grid):")
print(O[1, 30:34])

# %% [markdown]
# ## Row lengths are multiples of 4
#
# Row counts can be anything (100 rows above), but the language assumes that every runtime
# dimension that is a tensor's **row length** (its last, contiguous dimension) is a multiple of 4
# elements, so that every row starts 16-byte aligned and 16-byte vector loads stay possible (see
# tutorial 5). The launch checks it before anything runs. Here `add_bias` gets rows of 30 columns.
# (The cell is expected to fail: this is what a user sees.)

# %% tags=["raises-exception"]
X30 = rng.standard_normal((20, 30)).astype(np.float32)
b30 = rng.standard_normal((1, 30)).astype(np.float32)
add_bias(X30, b30, np.zeros_like(X30))

# %% [markdown]
# Padding the rows to 32 columns, and ignoring the padding afterwards, is the fix:

# %%
X32 = np.zeros((20, 32), np.float32)
X32[:, :30] = X30
b32 = np.zeros((1, 32), np.float32)
b32[:, :30] = b30
Y32 = np.zeros_like(X32)
add_bias(X32, b32, Y32)
err = tilenb.verify(Y32[:, :30], X30 + b30, what="add_bias on rows of 30 padded to 32")

# ## Launch errors
#
# Every argument is checked against the kernel's parameters before the launch: the count, each
# array's element type, rank and contiguity, each literal dimension, and that one symbolic name
# means one extent everywhere. The error is a `tilenb.LaunchError` naming the parameter and the
# dimension at fault; nothing runs.

# %%
Xok = rng.standard_normal((48, 96)).astype(np.float32)
Yok = np.zeros_like(Xok)
wrong_launches = {
    "a missing argument": lambda: shift_scale[3](Xok, Yok, 1.0),
    "float64 instead of f32": lambda: shift_scale[3](Xok.astype(np.float64), Yok, 1.0, 0.0),
    "64 columns where 96 are declared": lambda: shift_scale[3](Xok[:, :64].copy(), Yok, 1.0, 0.0),
    "M = 48 in X but 52 in Y": lambda: shift_scale[3](Xok, np.zeros((52, 96), np.float32), 1.0, 0.0),
    "a transposed view": lambda: shift_scale[3](np.asfortranarray(Xok), Yok, 1.0, 0.0),
    "no grid and no @grid": lambda: shift_scale(Xok, Yok, 1.0, 0.0),
    "an empty grid": lambda: shift_scale[0](Xok, Yok, 1.0, 0.0),
}
for what, launch in wrong_launches.items():
    try:
        launch()
        print(f"{what}: no error?!")
    except tilenb.LaunchError as e:
        print(f"{what}:\n    {e}")

# %% [markdown]
# Mistakes in the kernel itself are caught when the cell runs, before any launch. The error names
# the cell by its prompt number and the line as counted in the cell (the `%%tilekernel` line is
# line 1), with a caret under the fault. The cell fails, as a Python error does, so "Run All"
# stops there; the earlier, working `shift_scale` stays bound. (This cell is tagged
# `raises-exception` so that the tutorial runs on past it.)

# %% tags=["raises-exception"]
%%tilekernel
@launch(128)
kernel shift_scale(X: tensor<f32>[M, 96], Y: tensor<f32>[M, 96], alpha: f32, beta: f32) {
  let r = ctx.block.x * 16
  var x = X[r :+ 16, :]
  Y[r :+ 16, :] = alpha * x + betta
}

# %%
Y = np.zeros_like(Xok)
shift_scale[3](Xok, Y, -1.0, 0.25)
err = tilenb.verify(Y, -1.0 * Xok + 0.25, what="the earlier shift_scale, still bound")

# %% [markdown]
# ## What next
#
# - Tutorial 2 opens the tile: `var` and `let`, slicing, and the **thread map**, which shows which
#   thread moves which elements.
# - Every built-in function (math such as `exp`, `log`, `rsqrt`; `min`/`max` and `where`; the row
#   and column reductions `rowsum` ... `colmax`; `dot` and `dot_t`; `transpose`, `flat`, `cdiv`;
#   conversions; atomics and cluster reductions), with its operands and result shape, is in one
#   table: spec section 10, [docs/spec.md](../docs/spec.md#10-built-ins). The operators (`&&`,
#   `||`, `%`, the comparisons, ...) are in section 4.2.
# - On a GPU, launches of thousands of CTAs are normal; here the sizes stay small so that the CPU
#   executor answers in well under a second.
