"""The generic lowering: the CUDA every GPU runs, statement by statement.

Guarantees, for every statement the analysis leaves on the generic path ("generic" in
`Analysis.loops`, and every statement outside the tensor-core and sm_90 lowerings):

- Every tile value carries its valid region (rows [r0, r1), columns [c0, c1), uniform ints).
  Elementwise results take the intersection of their operands' regions after broadcasting,
  reductions skip invalid elements, dot reads invalid elements as 0; elements outside a tensor
  are never read (they load as 0) and never written; a store writes only the elements valid in
  the value (and inside the tensor or tile).
- Tile statements follow the canonical partition (`tilenb.analysis.partition`): chunk k of
  `vec` row elements of the statement's iteration space goes to thread k % threads, which
  evaluates the whole expression for those elements. Tiles in registers follow their own layout
  (the chunk partition, or the mma.sync / wgmma fragment layout for tensor-core accumulators).
- Barriers are exactly the analysis' (`tilenb.codegen.plan`), each with its reason in a comment;
  a statement whose target is also read by other threads in the same statement (the analysis'
  "within" barrier) computes into registers, then `__syncthreads()`, then writes.
- A `for` whose body has tile statements and a break/continue taken by some threads only keeps
  running no-op turns (per-thread effects are skipped) so every thread reaches the same
  barriers; a `while` stops at its next test.
- Memory-bound paths (none changes which thread touches which element, so the barriers hold):
  a shared tile the analysis swizzles is addressed through its swizzle everywhere; a vector
  sweep loads a batch of a thread's chunks before computing any, and a copy into a whole shared
  tile with more chunks a thread than one batch starts them all as `cp.async`, waited for before
  the next statement; a row reduction reads a tensor window as vectors where its alignment is
  proven, equal windows of a statement are loaded once, and a [1, 1] tile broadcast to a vector
  statement is read once; a plain loop that writes no tensor loads its top-level tensor copy a
  turn ahead into registers; f32 `exp` is `tnb_exp` and a division by a value shared by a chunk
  is a multiplication by its reciprocal where that is within spec 17's f32 bound; the last
  reads of re-read tensors and the stores never read back carry an L2 evict_first policy
  (`tilenb.codegen.cache_hints`).

Modules, from the statements down (each imports only those below it; every function receives
the generation state `g`, a `tilenb.codegen.context.Gen`):

    statements   statements and control flow (if, for, while, jumps, atomics, the prefetch loop)
    tiles        tile statements: declarations, `let` views, assignments, tile atomics
    cluster      cluster reductions across the CTAs of a thread block cluster
    sweeps       a tile statement's sweep over its iteration space, on the partition or a layout
    prefetch     which loop copy is loaded a turn ahead
    reductions   CTA-wide row reductions (warp shuffles and shared partials)
    vectors      vector sweeps: batched chunk loads, cp.async copies, stores
    exprs        expressions at an element, windows (`Loc`), valid regions, element addresses
"""
