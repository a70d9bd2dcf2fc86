"""Which lowering writes each part of a kernel variant: the one place the generator's paths are chosen.

The analysis decides (`tilenb.analysis.lowering`, shown as `Analysis.loops`); `choose(g)` reads
its decisions for the generator's target and sets up every path before any code is written:

    "wgmma TMA pipeline"           a GEMM loop: `sm90.gemm` writes the whole loop (TMA + wgmma)
    "streamed attention on wgmma"  a native loop whose ring `sm90.streamed` sets up; its dots on
                                   wgmma (`mma.accumulate`)
    "mma.sync"                     a native loop; its tensor-core dots on mma.sync fragments
                                   (`mma`), their slices double-buffered where the analysis says
    "generic"                      everything else: `generic` (statements, sweeps, reductions)

Guarantees: after `choose(g)`, `g.low` / `g.smem` are the analysis' lowering and shared-memory
map for `g.target`, `g.paths.loop(s)` names the lowering of every loop (one of
`lowering.LOWERINGS`; "generic" for a loop the analysis has not seen), `g.gemm` and `g.stream`
are the sm_90 lowerings (None when the kernel has none), every register tile has its layout in
`g.layouts`, and a tensor-core statement no path can lower has raised `UnsupportedError`
(before any code). Nothing here re-recognises a loop or a statement.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

from .. import ir
from ..analysis import analyze
from ..analysis.copies import tile_swizzles
from ..analysis.lowering import CHUNKS, KernelLowering
from ..analysis.masks import by_statement
from ..analysis.mma_tiles import shape2
from . import cache_hints
from .mma import statements as mma
from .sm90 import gemm, streamed
from .values import ChunkLayout


@dataclass(frozen=True)
class Paths:
    """The analysis' lowering of one kernel variant, as the generator's dispatch reads it."""
    low: KernelLowering

    def loop(self, s) -> str:
        """How loop `s` is lowered: one of `lowering.LOWERINGS` (see the module doc)."""
        return self.low.lowering_of(s)


def choose(g) -> Paths:
    """Read the analysis' decisions for `g` (a `context.Gen`) and set up every path (module doc)."""
    a = analyze(g.kir, arch=g.target)
    g.low, g.smem = a.lowering, a.smem      # the analysis' lowering and shared-memory map for this target
    g.paths = Paths(g.low)
    g.masks = by_statement(a.masks)         # wheres decided per tile at their corners (analysis.masks)
    g.gemm = gemm.prepare(g)                # GEMM loops on TMA + wgmma (sm_90)
    g.hints = cache_hints.plan(g.kir)       # L2 evict_first for the last touch of re-read data
    g.swz = _swizzles(g)
    _register_layouts(g)
    mma.mma_prepare(g)                      # tensor-core routes and their shared scratch
    g.stream = streamed.streaming(g, g.low)  # streamed-attention rings (sm_90)
    return g.paths


def _swizzles(g) -> Dict[int, object]:
    """id(tile Sym) -> the XOR swizzle of the shared tiles the analysis lays out swizzled
    (`tilenb.analysis.copies.tile_swizzles`: tiles read or written along a column)."""
    return dict(tile_swizzles(analyze(g.kir, arch=g.target).statements, g.T))   # target-free plans, shared


def _register_layouts(g):
    """The register layout of every register tile: the analysis' for tensor-core tiles (the
    wgmma accumulator, the mma row layout, the 2-D warp grid: `lowering.register_layouts`);
    the others take the partition's chunks at their declaration's width."""
    regs = {k for k, t in g.plan.tiles.items() if t.space == "registers"}
    decl_vec = {}
    for s in ir.walk_stmts(g.kir.body):
        if isinstance(s, (ir.VarDecl, ir.Let)) and id(s.sym) in regs:
            decl_vec[id(s.sym)] = (s.sym, g.plan.vec.get(id(s), 1))
    # a register tile's chunk width is its declaration's: the analysis gives every statement
    # that touches it the same width (`ownership.statement_plans`), so all keep one partition
    for k, (sym, v) in decl_vec.items():
        R, Cc = shape2(sym.type.shape)
        lay = g.low.layouts.get(k, CHUNKS)
        if lay is not CHUNKS:
            g.layouts[k] = lay
        else:
            g.layouts[k] = ChunkLayout(R, Cc, v, g.T)
