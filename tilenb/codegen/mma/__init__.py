"""Tensor cores for every f16/bf16 dot (mma.sync m16n8k16, and wgmma in streamed loops on sm_90).

Guarantees:

- Every dot with f16/bf16 operands of one type, an f32 result and tile shapes M, N, K multiples
  of 16, 8, 16 (`tilenb.analysis.mma_tiles.mma_dot`) runs on tensor cores, whatever surrounds it:
  * at the statement's own coordinates (`s = dot_t(q, k) * scale`, `acc = acc * r + dot(p, v)`,
    `acc += dot(a, b)`, `C[...] = dot(a, b) + c`): into m16n8 accumulator fragments in registers
    (the target's own registers when it is an f32 register tile and the value allows), and the
    rest of the statement is evaluated on those fragments, element by element, in their layout;
  * anywhere else (`rowsum(dot(a, b))`, `transpose(dot(a, b))`): into an f32 scratch tile in
    shared memory first, which the statement then reads like any tile.
  Invalid elements (spec section 8) read as 0: operand fragments are masked along K wherever the
  K range valid in both operands is not the whole of K; invalid rows of a and columns of b only
  reach output elements that are themselves invalid, whose values nothing observes.
- Operands: tiles in shared memory (and staged let views) are read with `ldmatrix` (`.trans` for
  b in [K, N] form), through the tile's XOR swizzle when the analysis gave it one; an f16/bf16
  register tile on the mma row layout is already in the A-operand layout and is read from
  registers; a tensor slice (or a `let` view of one that only tensor-core dots read: the `let`
  then copies nothing) is staged into a shared scratch tile whose rows are padded to an odd
  number of 16-byte units (no bank conflicts for ldmatrix), with 16-byte `cp.async` copies
  (elements outside the tensor are zero-filled, never read). In a loop whose turns run every
  statement, whose slice start depends only on the loop variable and on values fixed during the
  loop, the staging is double-buffered (the analysis' `LoopPipe`): the next turn's tile is
  copied while this turn computes. Anything else is read element by element with the masks of
  its region.
- Fragments: the [M, N] result is split over the warps as a WM x WN grid of MT x NT blocks of
  16 x 8 (`MmaLayout`); a warp loads each A fragment once per 16-deep K step and reuses it over
  its NT blocks, each B fragment over its MT blocks. Tiles of the mma row layout (WN = 1) keep
  row reductions inside the warp: each lane reduces its elements, then two shuffles within its
  quad; [M, 1] tiles are held per lane for its rows (`RowLayout`).
- Barriers: every barrier this package adds is marked "codegen-internal" and names the scratch
  or the fragments it is for; a statement that reads or writes shared tiles elementwise while
  iterating over fragments (not the partition the barrier analysis assumes) is fenced before
  and after.

The routes, scratch and staging offsets and streamed loops are the analysis' decisions
(`tilenb.analysis.lowering`, placed in its shared-memory map); these modules write their code:

    statements   which statements take the tensor cores, loops' pipelines, the fragment sweeps
    accumulate   one dot accumulated into fragments (mma.sync; wgmma in streamed loops)
    staging      operand sources: ldmatrix addresses, staged and double-buffered copies
    fragments    fragment layouts swept element by element; values read from fragments
"""
