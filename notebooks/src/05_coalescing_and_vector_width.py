# %% [markdown]
# # 5. Coalescing, locality and vector width
#
# On a CPU, a thread that walks its own contiguous block of memory is doing the right thing: each
# cache line it pulls in is used to the last byte, and the prefetcher sees it coming. On a GPU the
# same habit is a trap. Loads are issued by a **warp** of 32 threads at once, and the memory system
# serves the warp's 32 addresses together, in 32-byte **sectors**. What matters is not whether
# each thread's own addresses are consecutive, but whether the 32 addresses of one warp, in one
# step, fall in as few sectors as possible: **coalescing** is a property of the warp, not of the
# thread.
#
# This tutorial adds two vectors three ways and reads the thread map's sector counts for each:
#
# | version | each thread, in each step | what a warp touches in one step |
# | --- | --- | --- |
# | vectorized | 4 consecutive elements (one 16-byte load) | 512 consecutive bytes |
# | per-thread blocks ("tiled") | 1 element of its own 32-element block | 32 elements 128 bytes apart |
# | width 1 (by accident) | 1 element | 128 consecutive bytes |
#
# and then, on a GPU, times them.

# %%
%load_ext tilenb
import numpy as np
import tilenb
from tilenb.notebook import show

rng = np.random.default_rng(5)
ON_GPU = tilenb.compile("kernel probe(X: tensor<f32>[N]) { }").backend == "cuda"
# The CPU executor runs these in well under a second at 10,016 elements; a GPU needs millions of
# elements before the memory system, not the launch, dominates the time.
N = (1 << 24) if ON_GPU else 10_016          # a multiple of 32, not of the 1024-element tiles
A = rng.standard_normal(N).astype(np.float32)
B = rng.standard_normal(N).astype(np.float32)
print(f"N = {N:,} elements per vector, backend {'cuda' if ON_GPU else 'cpu'}")

# %% [markdown]
# ## 1. Vectorized and coalesced
#
# One tile statement over a 1024-element slice per CTA. The compiler cuts the slice into runs of
# 4 `f32` (16 bytes, the widest load a thread can issue), because it can prove every run starts
# 16-byte aligned: `base` is a multiple of 1024 and the tensors start aligned. Thread `t` takes
# run `t`, so in one step a warp's 32 lanes cover 32 x 16 = 512 consecutive bytes: 16 sectors,
# the minimum. The thread map says "vector width 4" and every warp meets the ideal.

# %%
%%tilekernel --show threads
@autotune(TILE in [1024])
@launch(256)
@grid(cdiv(N, TILE))
kernel add_vec(A: tensor<f32>[N], B: tensor<f32>[N], Y: tensor<f32>[N]) {
  let base = ctx.block.x * TILE
  Y[base :+ TILE] = A[base :+ TILE] + B[base :+ TILE]
}

# %%
Y = np.zeros(N, np.float32)
add_vec(A, B, Y)
err = tilenb.verify(Y, A + B, what="add_vec")

# %% [markdown]
# ## 2. Per-thread blocks: locality per thread, no coalescing
#
# Now give each thread its own block of 32 consecutive elements, as a CPU programmer would: view
# the vectors as `[N / 32, 32]` matrices, one row per thread. Reading a row block *transposed*
# into a `[32, 128]` tile makes the compiler's run `k` (row `k / 128`, column `k % 128` of the
# tile) go to thread `k % 128`: thread `t` gets tile column `t`, which is row `t` of the tensor,
# one element per step, in order. Each thread walks its own 128 contiguous bytes, and that is
# exactly the problem: in any one step, lane `t` of a warp reads element `i` of row `t`, so the
# warp's 32 addresses sit 128 bytes apart, in 32 different sectors, where 4 would hold the 128
# bytes it needs.
#
# The thread map flags every warp of both loads as uncoalesced: 4,096 sectors for what could take
# 512, 8 times the traffic. Under each load's figures the view says why and what to change:
# lanes 0 and 1 read 4 bytes each 128 bytes apart, because consecutive lanes step along a column
# of the tensor; the fix is to make the fastest-moving index the last one, or to transpose
# through a tile (read rows, as section 1 does, and take the tile's columns). (The store goes through `transpose` back to row order; it is coalesced,
# and its *shared-memory* side reads columns of the tiles, which the compiler lays out swizzled so
# that those columns cost no bank conflicts.)

# %%
%%tilekernel --show threads
@launch(128)
@grid(cdiv(M, 128))
kernel add_blocks(A: tensor<f32>[M, 32], B: tensor<f32>[M, 32], Y: tensor<f32>[M, 32]) {
  let r = ctx.block.x * 128
  var a: tile<f32>[32, 128] = transpose(A[r :+ 128, :])   // thread t walks row r + t
  var b: tile<f32>[32, 128] = transpose(B[r :+ 128, :])
  Y[r :+ 128, :] = transpose(a + b)
}

# %%
Y = np.zeros(N, np.float32)
add_blocks(A.reshape(-1, 32), B.reshape(-1, 32), Y.reshape(-1, 32))
err = tilenb.verify(Y, A + B, what="add_blocks (one 32-element block per thread)")

# %% [markdown]
# The same pattern written as plain per-thread code: thread `t` loops over its own 32 elements.
# It has no tile statement, so there is no copy plan to draw, but a warp's accesses in one turn of
# the loop are the same 32 addresses 128 bytes apart.

# %%
%%tilekernel --show none
@launch(128)
kernel add_per_thread(A: tensor<f32>[N], B: tensor<f32>[N], Y: tensor<f32>[N]) {
  let first = (ctx.block.x * 128 + ctx.thread) * 32
  for i in range(0, 32) {
    let j = first + i
    if j < N { Y[j] = A[j] + B[j] }
  }
}

# %%
Y = np.zeros(N, np.float32)
add_per_thread[-(-N // (128 * 32))](A, B, Y)
err = tilenb.verify(Y, A + B, what="add_per_thread")

# %% [markdown]
# ## 3. A width that silently drops to 1
#
# A classic bug in hand-written GPU code: a helper that was meant to load `SIMD_WIDTH` elements at
# a time declares its own width parameter, which **shadows** the outer one and is instantiated
# with 1. Everything still computes the right answer, one element per load, 4 times as many loads
# as intended, and nothing says so.
#
# The tile language has no width to shadow: the compiler chooses the vector width of each
# statement from what it can **prove** about alignment. The same silent drop happens when it
# cannot prove it. `add_from` adds the vectors from a start index given at the launch; `start`
# could be odd, so no run is provably 16-byte aligned, and every access falls back to one
# element. Results are right; the thread map says "vector width 1", and each warp now reads 128
# bytes per step where it could read 512, with the worst-case start straddling an extra sector.

# %%
%%tilekernel --show threads
@autotune(TILE in [1024])
@launch(256)
@grid(cdiv(N, TILE))
kernel add_from(A: tensor<f32>[N], B: tensor<f32>[N], Y: tensor<f32>[N], start: i32) {
  let base = start + ctx.block.x * TILE
  Y[base :+ TILE] = A[base :+ TILE] + B[base :+ TILE]
}

# %%
start = 8
Y = np.zeros(N, np.float32)
add_from(A, B, Y, start)
err = tilenb.verify(Y[start:], (A + B)[start:], what="add_from: the sums from index 8 on")
err = tilenb.verify(Y[:start], np.zeros(start, np.float32), what="add_from: nothing before index 8")

# %% [markdown]
# The fix is to make the fact provable: pass the start in units of 4 elements. `start4 * 4` is a
# multiple of 4 whatever `start4` is, and the width is back to 4. (The thread map still counts 17
# sectors where 16 would do: a 16-byte-aligned start may sit in the middle of a 32-byte sector,
# so a warp's 512 bytes can straddle one extra. The 4x fewer, wider requests are what counts.)

# %%
%%tilekernel --show threads
@autotune(TILE in [1024])
@launch(256)
@grid(cdiv(N, TILE))
kernel add_from4(A: tensor<f32>[N], B: tensor<f32>[N], Y: tensor<f32>[N], start4: i32) {
  let base = start4 * 4 + ctx.block.x * TILE
  Y[base :+ TILE] = A[base :+ TILE] + B[base :+ TILE]
}

# %%
Y = np.zeros(N, np.float32)
add_from4(A, B, Y, start // 4)
err = tilenb.verify(Y[start:], (A + B)[start:], what="add_from4: the sums from index 8 on")
for k in (add_vec, add_blocks, add_from, add_from4):
    loads = [c for c in k.analysis().copies if c.direction == "load"]
    print(f"{k.name:11} vector width {loads[0].vector_width}, load sectors {sum(c.sectors for c in loads):5} "
          f"(ideal {sum(c.ideal_sectors for c in loads)}) per CTA")

# %% [markdown]
# ## The measured difference
#
# Sector counts predict traffic; a GPU turns traffic into time. With a GPU, the cell below runs
# each kernel a few times over 16 million elements (64 MB per vector) and reports the kernel time
# measured with CUDA events and the bandwidth it implies (3 vectors moved). On the CPU backend no
# GPU time exists, and the cell says so rather than print the executor's wall time, which measures
# numpy, not a GPU.

# %%
def kernel_ms(kernel, launch, repeat=5):
    """The fastest CUDA-event time of `repeat` launches, in milliseconds (None on the CPU)."""
    best = None
    for _ in range(repeat):
        launch()
        run = kernel.last_run
        ms = (getattr(run, "extra", None) or {}).get("kernel_ms")
        if ms is not None:
            best = ms if best is None else min(best, ms)
    return best


Y = np.zeros(N, np.float32)
runs = {
    "vectorized (add_vec)": (add_vec, lambda: add_vec(A, B, Y)),
    "per-thread blocks, tile form (add_blocks)": (add_blocks, lambda: add_blocks(A.reshape(-1, 32), B.reshape(-1, 32), Y.reshape(-1, 32))),
    "per-thread blocks, loop form (add_per_thread)": (add_per_thread, lambda: add_per_thread[-(-N // 4096)](A, B, Y)),
    "width 1 (add_from, start 0)": (add_from, lambda: add_from(A, B, Y, 0)),
}
if ON_GPU:
    for name, (k, launch) in runs.items():
        ms = kernel_ms(k, launch)
        print(f"{name:48} {ms:8.3f} ms  {3 * 4 * N / (ms * 1e-3) / 1e9:7.1f} GB/s")
else:
    print("CPU backend: no GPU time is measured here. Run this notebook on a machine with a GPU "
          "(backend cuda) to see the times; the sector counts above are what that GPU will see.")

# %% [markdown]
# For the record, one run of the cell above on an NVIDIA H200 (CUDA backend, 16,777,216 elements,
# best of 5 launches; your numbers will differ somewhat):
#
# | version | kernel time | bandwidth |
# | --- | --- | --- |
# | vectorized (`add_vec`) | 0.049 ms | 4.1 TB/s (86% of the 4.8 TB/s peak) |
# | width 1 (`add_from`) | 0.063 ms | 3.2 TB/s |
# | per-thread blocks, tile form (`add_blocks`) | 0.288 ms | 0.70 TB/s |
# | per-thread blocks, loop form (`add_per_thread`) | 0.947 ms | 0.21 TB/s |
#
# Losing coalescing cost a factor of 6 to 19; losing the vector width cost about a quarter: with
# 16-byte accesses a warp has 4 times fewer requests in flight to keep the memory system busy.
#
# The timing view shows the latest launch of a kernel: on a GPU the kernel time, the host's share
# of the call, and the achieved bandwidth against the device's peak; on the CPU backend it says why
# there is nothing to show.

# %%
show(add_vec, "timing")

# %% [markdown]
# ## What to remember
#
# - Coalescing is about the **warp**: in one step, the 32 lanes' addresses should be consecutive.
#   Consecutive addresses *within one thread* across steps buy nothing on a GPU.
# - Tile statements in this language are coalesced by construction (run `k` to thread `k % T`);
#   layouts that walk the tensor against its rows (`transpose` of a global slice) are where it is
#   lost, and the thread map flags them.
# - Vector width is chosen from provable alignment. When the thread map says width 1 where you
#   expected 4, find the offset the compiler cannot prove is a multiple of 4.
