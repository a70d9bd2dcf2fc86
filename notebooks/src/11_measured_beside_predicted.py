# %% [markdown]
# # 11. Measured beside predicted
#
# Every view so far has been a **prediction**: before a kernel runs, the analysis works out which
# thread moves which elements, how many 32-byte **sectors** each warp's global accesses touch and
# how many shared-memory **wavefronts** (one pass of the 32 banks) each warp's tile accesses take.
# The GPU keeps its own count. Nsight Compute (`ncu`) reads the hardware counters of one launch and
# attributes them to source lines; tilenb compiles the profiled launch with a `#line` directive
# before every line of the generated CUDA, so those lines are the tile-language lines you wrote,
# and the two can be read side by side.
#
# This tutorial runs the classic lesson on memory access, one kernel at a time:
#
# | kernel | what a warp does in one step | predicted cost |
# | --- | --- | --- |
# | `copy_rows` | 32 lanes read 512 consecutive bytes | the ideal: 16 sectors |
# | `copy_column` | 32 lanes read one column: 32 addresses 256 bytes apart | 32 sectors where 4 would do |
# | `transpose96` | reads a column of a `[32, 96]` shared tile | 8 wavefronts where 1 would do (bank conflicts) |
# | `transpose96_pad` | the same, with each tile row padded by one element | the ideal |
# | `transpose64` | the same at 64 columns, where the compiler **swizzles** the tile | the ideal |
#
# For each one, the cell after the launch calls `measure(kernel, grid, *args)`
# (`tilenb.notebook.measure`). On a GPU with Nsight Compute it prints, per tile line, the
# predicted and the measured sectors and wavefronts, a verdict, and the reason where they differ,
# and shows the thread map, barriers and timing views with the measured figures beside the
# predicted ones. Where nothing can measure (this notebook's saved outputs come from the CPU
# backend) the same cell prints the prediction for that launch and one sentence saying why there
# is no measurement. In a notebook cell of your own, `p = %tileprofile copy_rows[grid](X, Y)` does
# the GPU half of the same thing.
#
# The shapes are not multiples of the tiles: 1,000 rows, 32 rows per CTA, so the last CTA of each
# launch holds 8 rows. The prediction describes full CTAs, so for a launch it is a range: from the
# full CTAs alone to every CTA counted as full; a measurement inside the range agrees.

# %%
%load_ext tilenb
import numpy as np
import tilenb
from tilenb.notebook import measure

rng = np.random.default_rng(11)
M = 1000                          # rows: not a multiple of the 32 rows a CTA takes
R = 32
grid, full = -(-M // R), M // R   # 32 CTAs, 31 of them full
print(f"M = {M} rows: {grid} CTAs of {R} rows, {full} full, the last one {M - full * R} rows")

# %% [markdown]
# ## What a measurement costs
#
# `kernel.profile` (which `measure` and `%tileprofile` call) starts a new Python process under
# `ncu`, which compiles the profiled variant (the same CUDA with `#line` directives, NVRTC
# `-lineinfo`) and launches it once with your arguments, passed through a file. Nsight Compute
# cannot read all its counters in one run, so it **replays** the kernel, tens of passes, saving
# and restoring device memory between them and flushing the caches before each; it also locks the
# clocks to their base frequency. So a profile takes seconds, not microseconds, and its duration
# is the kernel's time under those conditions, not an ordinary launch's (tutorial 5 times ordinary
# launches). Because memory is restored between replays, the outputs hold exactly one launch's
# result, and they are copied back into your arrays: `tilenb.verify` after `measure` checks the
# profiled launch itself.

# %% [markdown]
# ## 1. A coalesced copy
#
# Each CTA copies 32 rows of 64 `f32`. Run `k` of 4 elements goes to thread `k % 256`, so in one
# step a warp's 32 lanes read 32 x 16 = 512 consecutive bytes: 16 sectors, the fewest that can
# hold them. No tile is involved (the copy goes through registers), so there are no wavefronts.

# %%
%%tilekernel --show threads
@launch(256)
kernel copy_rows(X: tensor<f32>[M, 64], Y: tensor<f32>[M, 64]) {
  let r = ctx.block.x * 32
  Y[r :+ 32, :] = X[r :+ 32, :]
}

# %%
X = rng.standard_normal((M, 64)).astype(np.float32)
Y = np.zeros_like(X)
copy_rows[grid](X, Y)
err = tilenb.verify(Y, X, what="copy_rows")

# %%
p = measure(copy_rows, grid, X, Y, full_ctas=full)

# %% [markdown]
# On the H200, the full CTAs' sectors are exactly the prediction (256 load and 256 store sectors
# a CTA); the last CTA's 8 rows cost a quarter of that, which puts the launch inside the range.

# %% [markdown]
# ## 2. A strided copy
#
# `copy_column` copies column 0 of `X`. Each thread takes one row, so in one step the 32 lanes of a
# warp read 32 elements that are one row, 256 bytes, apart: 32 sectors for 128 bytes that would
# fit in 4. The thread map flags every warp of the load as uncoalesced and says why. (The store
# into `Y`, a tensor one element wide, is contiguous: 4 sectors a warp.)

# %%
%%tilekernel --show threads
@launch(256)
kernel copy_column(X: tensor<f32>[M, 64], Y: tensor<f32>[M, 1]) {
  let r = ctx.block.x * 256
  Y[r :+ 256, :] = X[r :+ 256, 0 :+ 1]
}

# %%
Y1 = np.zeros((M, 1), np.float32)
g256, full256 = -(-M // 256), M // 256
copy_column[g256](X, Y1)
err = tilenb.verify(Y1, X[:, :1], what="copy_column")

# %%
p = measure(copy_column, g256, X, Y1, full_ctas=full256)

# %% [markdown]
# ## 3. A transposed read through a tile, with bank conflicts
#
# `transpose96` writes the transpose of each `[32, 96]` block. The load into `t` is ideal. The
# store walks `Y` row by row (so its global side is coalesced), which means each thread reads 4
# elements down a **column** of `t`. A row of `t` is 96 words, a multiple of the 32 banks, so all
# the elements of a column sit in the same bank: the lanes queue behind each other, 8 times the
# wavefronts the bytes need. The thread map flags the store ("bank conflicts"), names two lanes that
# collide, and proposes the fix the analysis found: pad each row by one element.

# %%
%%tilekernel --show threads
@launch(256)
kernel transpose96(X: tensor<f32>[M, 96], Y: tensor<f32>[96, M]) {
  let r = ctx.block.x * 32
  var t = X[r :+ 32, :]
  Y[:, r :+ 32] = transpose(t)
}

# %%
X96 = rng.standard_normal((M, 96)).astype(np.float32)
YT = np.zeros((96, M), np.float32)
transpose96[grid](X96, YT)
err = tilenb.verify(YT, X96.T, what="transpose96")

# %%
p = measure(transpose96, grid, X96, YT, full_ctas=full)

# %% [markdown]
# ## 4. The padded fix
#
# Declare the tile one element wider, `[32, 97]`, and use the window `t[:, 0 :+ 96]` of it: each
# row now starts one bank further on, so a column spreads over all 32 banks. The store's shared
# reads fall to the ideal, 96 wavefronts a CTA. The price is in the thread map too: a row of 97
# words no longer starts 16-byte aligned, so the load into the window moves one element at a
# time (vector width 1: 4 times the requests for the same sectors).

# %%
%%tilekernel --show threads
@launch(256)
kernel transpose96_pad(X: tensor<f32>[M, 96], Y: tensor<f32>[96, M]) {
  let r = ctx.block.x * 32
  var t: tile<f32>[32, 97]
  t[:, 0 :+ 96] = X[r :+ 32, :]
  Y[:, r :+ 32] = transpose(t[:, 0 :+ 96])
}

# %%
YT = np.zeros((96, M), np.float32)
transpose96_pad[grid](X96, YT)
err = tilenb.verify(YT, X96.T, what="transpose96_pad")

# %%
p = measure(transpose96_pad, grid, X96, YT, full_ctas=full)

# %% [markdown]
# ## 5. The swizzled layout
#
# With 64 columns the compiler fixes the conflict itself, without padding: within each row of `t`
# it permutes the 16-byte units by bits of the row number (an XOR **swizzle**), so a column
# spreads over the banks while every row keeps its bytes and its 16-byte vectors. Both sides of the
# transpose are ideal, and the loads keep vector width 4 (the copy plans record the layout:
# `copy.swizzle`, printed below). (It cannot do this
# at 96 columns: the XOR permutes a power-of-two number of units per row, and 96 columns are 24.)

# %%
%%tilekernel --show threads
@launch(256)
kernel transpose64(X: tensor<f32>[M, 64], Y: tensor<f32>[64, M]) {
  let r = ctx.block.x * 32
  var t = X[r :+ 32, :]
  Y[:, r :+ 32] = transpose(t)
}

# %%
Y64 = np.zeros((64, M), np.float32)
transpose64[grid](X, Y64)
err = tilenb.verify(Y64, X.T, what="transpose64")

# %%
p = measure(transpose64, grid, X, Y64, full_ctas=full)

# %% [markdown]
# ## The predictions side by side
#
# The analysis behind the views is data, and so is what it predicts for each launch
# (`tilenb.runtime.gpu.profile.predict_launch`, the same figures `measure` prints):

# %%
from tilenb.runtime.gpu.profile import predict_launch

launches = [(copy_rows, grid, (X, Y), full), (copy_column, g256, (X, Y1), full256),
            (transpose96, grid, (X96, YT), full), (transpose96_pad, grid, (X96, YT), full),
            (transpose64, grid, (X, Y64), full)]
print(f"{'kernel':16} {'global sectors':>15} {'shared wavefronts':>18}  {'load width':>10}  tile layout"
      "   (per full CTA)")
for k, g, args, f in launches:
    pred = predict_launch(k, g, args, full_ctas=f)
    sec = sum(r["per_cta"] for r in pred.rows if r["metric"] == "global sectors")
    wf = sum(r["per_cta"] for r in pred.rows if r["metric"] == "shared wavefronts")
    load = next(c for c in pred.analysis.copies if c.direction == "load")
    layout = "swizzled" if load.swizzle else ("row by row" if load.tile else "no tile")
    print(f"{k.name:16} {sec:15} {wf:18}  {load.vector_width:>10}  {layout}")

# %% [markdown]
# ## Reading a verdict
#
# A line whose measurement falls outside the predicted range is flagged, with the reason the
# counters point to, and the instructions (SASS opcodes) that counted it:
#
# - **fewer sectors**: L1 hits, or edge CTAs masked further than the range allows;
# - **more sectors on a store**: the machine code stores fewer bytes per thread than the analysis
#   planned (the per-instruction widths say which);
# - **a cp.async copy**: its global side is counted under its own metric;
# - **fewer shared wavefronts**: values the generator keeps in registers instead of re-reading;
# - **more shared wavefronts**: shared accesses the analysis does not model, or conflicts it did
#   not foresee. The shared accesses it does model beyond the copies (an `[R, 1]` operand read
#   once per chunk, a reduction's passes and partials) are part of the prediction, named in it:
#   "with 160 for the broadcast read of s".
#
# ## What to remember
#
# - Coalescing and bank conflicts are properties of a warp's step; the thread map predicts both per
#   warp before a run, and `measure` / `%tileprofile` check them against the hardware per line.
# - A column of a shared tile whose rows are a multiple of 32 words sits in one bank. Padding each
#   row by one element fixes it at the cost of vector width; at power-of-two widths the compiler
#   swizzles instead and keeps both.
# - A profile replays the kernel under Nsight Compute: seconds per launch, base clocks, outputs
#   as one launch leaves them. Measure to check a prediction; time with ordinary launches.
