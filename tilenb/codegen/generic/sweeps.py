"""The sweep of a tile statement over its iteration space.

Guarantees: `run_sweep(g, s, domain, lay, V, value, write, mask, two_phase)` evaluates `value`
at every element of `domain` ([rows, cols]) the thread owns and hands each to `write`, exactly
once: on the canonical partition (chunks of V row elements, chunk k to thread k % threads), or
on a register layout (`ChunkLayout`, mma.sync fragments `MmaLayout` / `RowLayout`, wgmma
accumulators `WgmmaLayout`); elements outside `mask` (a valid region) are skipped. A two-phase
statement (the analysis' "within" barrier) holds its values in registers (at most
MAX_STAGED_SLOTS a thread), meets the barrier, then writes. Statements with CTA-wide reductions
go to `reductions`, plain vector statements to `vectors.vector_sweep`.
"""
from __future__ import annotations

from typing import Optional

from ... import ir
from ...analysis.lowering import WgmmaLayout
from ...analysis.mma_tiles import MmaLayout, RowLayout, shape2

from .. import ctypes_ as C
from ..mma import fragments as frags
from ..sm90 import accumulators as wgacc
from ..values import At, ChunkLayout, Region, TileVar

from . import exprs, masks, reductions, vectors


# which layout a tile statement iterates over
def sweep_layout(g, s, target_tv: Optional[TileVar], value, domain):
    if target_tv is not None and target_tv.space == "registers":
        return target_tv.layout
    found = []

    def visit(e, ident, shape):
        if isinstance(e, ir.Ref) and isinstance(e.type, ir.TileT):
            tv = g.tile_of(e.sym)
            if tv is not None and tv.space == "registers":
                if not ident:
                    g.fail(f"'{e.sym.name}' is kept in registers (each thread holds its own elements), but this "
                              f"statement reads elements of it that another thread holds", e)
                found.append(tv.layout)
            return
        if isinstance(e, (ir.Reduce, ir.Dot, ir.Transpose)):
            for c in ir.sub_exprs(e):
                visit(c, False, None)
            return
        for c in ir.sub_exprs(e):
            if isinstance(c.type, ir.TileT):
                visit(c, ident and shape2(c.type.shape) == shape2(e.type.shape), None)
    visit(value, True, domain)
    if found:
        if any(f != found[0] for f in found):
            g.fail("tiles in registers with different layouts in one statement", s)
        lay = found[0]
        lshape = (lay.M, lay.N) if isinstance(lay, MmaLayout) else (lay.R, lay.C)
        if lshape != tuple(domain):
            g.fail("a register tile used with a shape other than the statement's", s)
        return lay
    return None

MAX_STAGED_SLOTS = 256        # registers per thread a two-phase statement may hold


def two_phase(g, s) -> bool:
    """Whether this statement must compute its value into registers, barrier, then write:
    the analysis' "within" barrier (a read of the target's own bytes at elements other
    threads write)."""
    p = g.plan.positions.get(id(s))
    return any(b.where == "within" for b in g.plan.barriers.get(p, ()))


def off_partition(g, s, lay, V) -> bool:
    """A statement that touches shared tiles by the partition but iterates over a register
    layout other than the partition at its planned width: the analysis' barriers assume the
    partition, so the generator fences this statement on both sides itself."""
    if lay is None or id(s) not in g.plan.shared_partition:
        return False
    if isinstance(lay, ChunkLayout) and lay.V == g.plan.vec.get(id(s), lay.V):
        return False
    return True


def run_sweep(g, s, domain, lay, V, value, write, mask: Optional[Region], two_phase: bool, vt=None):
    fence = off_partition(g, s, lay, V)
    if fence:
        g.emit("__syncthreads();  // codegen-internal: this statement follows a register layout, not the partition "
                  "the barrier analysis assumes for its shared-memory operands")
    sp = vectors.stmt_plan(g, s)

    def emit():
        if sp is not None and sp.vector_path and vt is not None and lay is None and not two_phase:
            # the analysis moves this statement with vector accesses (`ownership`, with_vectors)
            exprs.prepare_regions(g, value)
            pre = getattr(g, "prefetched", None)
            vectors.vector_sweep(g, domain, V, value, vt, pre[1] if pre is not None and pre[0] == id(s) else None)
        else:
            _run_sweep(g, s, domain, lay, V, value, write, mask, two_phase)
    if id(s) in g.masks:
        exprs.prepare_regions(g, value)   # the operands' regions, named once before the branches
    masks.split(g, s, value, emit)        # a where the analysis decides per tile: one sweep per case
    if fence:
        g.emit("__syncthreads();  // codegen-internal: (the same, after the statement)")


def _run_sweep(g, s, domain, lay, V, value, write, mask: Optional[Region], two_phase: bool):
    vdt = value.type.dtype
    # uniform values every element needs: regions of the operands
    exprs.prepare_regions(g, value)
    if two_phase:
        lay2 = lay or ChunkLayout(domain[0], domain[1], V, g.T)
        if lay2.slots > MAX_STAGED_SLOTS:
            g.fail("a statement that reads its own target at other elements, on a tile this large", s)
        stage = g.new("stage")
        g.emit(f"{C.VALUE_C[vdt]} {stage}[{lay2.slots}];  // the new values, written after every thread has read the old ones")

        def compute(at):
            v = exprs.elem_value(g, value, at, domain)
            g.emit(f"{stage}[{at.slot}] = {v};")

        sweep(g, domain, lay2, V, compute, mask=None)
        p = g.plan.positions.get(id(s))
        why = [b.reason for b in g.plan.barriers.get(p, ()) if b.where == "within"]
        if why:
            g.emit(f"__syncthreads();  // barrier (within line {s.span.line + g.line_offset}): {why[0]}")
        else:
            g.emit("__syncthreads();  // codegen-internal: this statement reads its own target at elements other threads write")

        def put(at):
            write(at, f"{stage}[{at.slot}]", vdt)
        sweep(g, domain, lay2, V, put, mask=mask)
        return
    coop = reductions.coop_reduces(g, value, domain, V, lay)
    if coop:
        widths = reductions.block_reduce_widths(g, domain, coop, s)
        if widths is not None:
            reductions.block_sweep(g, s, domain, value, coop, widths, write, mask)
        else:
            reductions.coop_sweep(g, domain, value, coop, write, mask)
        return

    def body(at):
        v = exprs.elem_value(g, value, at, domain)
        write(at, v, vdt)
    sweep(g, domain, lay, V, body, mask=mask, hoist=value)


def sweep(g, domain, lay, V, body, mask: Optional[Region], hoist=None):
    """Run body(at) for every element of the domain this thread owns."""
    R, Cc = domain

    def with_mask(at):
        vectors.masked(g, mask, at, domain, body)

    if isinstance(lay, WgmmaLayout):
        wgacc.emit_sweep(g, lay, with_mask)
        return
    if isinstance(lay, (MmaLayout, RowLayout)):
        g.emit("// elements of the mma.sync fragments this thread holds")
        frags.frag_sweep(g, lay, with_mask)
        return
    if isinstance(lay, ChunkLayout):
        V = lay.V
        nch = lay.nchunks
        s, k = g.new("s"), g.new("k")
        g.emit(f"// partition: chunk k of {V} row element(s) -> thread k % {g.T} (register slots unrolled)")
        g.emit("#pragma unroll")
        g.emit(f"for (int {s} = 0; {s} < {lay.steps}; ++{s}) {{")
        g.ind += 1
        g.emit(f"const int {k} = tnb_tid + {s} * {g.T};")
        cond = f"if ({k} < {nch}) {{" if nch % g.T else "{"
        g.emit(cond)
        g.ind += 1
        chunk_body(g, domain, V, k, lambda at: with_mask(at), slot_base=f"{s} * {V}", layout=lay)
        g.ind -= 1
        g.emit("}")
        g.ind -= 1
        g.emit("}")
        return
    nch = R * Cc // V
    k = g.new("k")
    g.emit(f"// partition: chunk k of {V} row element(s) -> thread k % {g.T}")
    g.emit(f"for (int {k} = tnb_tid; {k} < {nch}; {k} += {g.T}) {{")
    g.ind += 1
    chunk_body(g, domain, V, k, lambda at: with_mask(at), slot_base=None, layout=None, hoist=hoist)
    g.ind -= 1
    g.emit("}")


def chunk_body(g, domain, V, k, body, slot_base, layout, hoist=None):
    R, Cc = domain
    per_row = Cc // V
    i, j0 = g.new("i"), g.new("j")
    if R == 1:
        g.emit(f"const int {i} = 0, {j0} = {k} * {V};" if V > 1 else f"const int {i} = 0, {j0} = {k};")
    elif per_row == 1:
        g.emit(f"const int {i} = {k}, {j0} = 0;")
    else:
        g.emit(f"const int {i} = {k} / {per_row}, {j0} = ({k} % {per_row}) * {V};")
    if hoist is not None and V > 1:
        exprs.hoist_row_reductions(g, hoist, i, domain)
    if V == 1:
        body(At(i, j0, f"{slot_base}" if slot_base else None, layout, True))
        return
    v, j = g.new("v"), g.new("j")
    g.emit("#pragma unroll")
    g.emit(f"for (int {v} = 0; {v} < {V}; ++{v}) {{")
    g.ind += 1
    g.emit(f"const int {j} = {j0} + {v};")
    body(At(i, j, f"{slot_base} + {v}" if slot_base else None, layout, True))
    g.ind -= 1
    g.emit("}")
