"""The copy a plain loop loads a turn ahead (the generator's one pipelining of generic loops).

Guarantees: `prefetch_candidate(g, s)` accepts only a top-level statement of a plain loop that
writes no tensor (so nothing the loop does can change what the copy reads), with no break,
continue, return or dot, copying a tensor window whose position depends only on the loop
variable and values fixed before the loop into a whole shared tile, moved as vectors, at most
PREFETCH_BYTES a thread; `emit_prefetch` loads the next turn's chunks into registers. The
values stored are those the copy would load in its own turn.
"""
from __future__ import annotations

from ... import ir
from ...analysis.mma_tiles import shape2

from .. import ctypes_ as C

from . import exprs, vectors

PREFETCH_BYTES = 128        # registers a thread may hold for the next turn's chunks (32)


def prefetch_candidate(g, s: ir.For):
    """The copy `var x = X[...]` of a loop body whose next turn can be loaded while this turn
    computes: a top-level statement of a plain loop that writes no tensor (so nothing the loop
    does can change what the copy reads) and has no break, continue, return or dot; the copy
    is a tensor window whose position depends only on the loop variable and values fixed
    before the loop, into a whole shared tile, moved as vectors, at most PREFETCH_BYTES a
    thread. Returns (statement, tile, window, V) or None."""
    if s.unroll > 1 or g.guards:
        return None
    if getattr(g, "gemm", None) is not None and id(s) in getattr(g.gemm, "loops", ()):
        return None
    assigned = set()
    for t in ir.walk_stmts(s.body):
        if isinstance(t, (ir.Break, ir.Continue, ir.Return, ir.Atomic, ir.Barrier)):
            return None
        if isinstance(t, ir.Assign) and not isinstance(t.target, ir.Ref):
            base = ir.named_sym(t.target)
            if base is None or base.kind == "tensor" or getattr(base, "kind", "") == "view":
                return None           # a tensor (or a view, which may be one) written in the loop
        if isinstance(t, ir.Assign) and isinstance(t.target, ir.Ref):
            assigned.add(id(t.target.sym))
        if isinstance(t, (ir.Let, ir.VarDecl)):
            assigned.add(id(t.sym))
        if isinstance(t, ir.For):
            assigned.add(id(t.var))
        for e in ir.stmt_exprs(t):
            if any(isinstance(x, ir.Dot) for x in ir.walk_expr(e)):
                return None
    for t in s.body:
        if not isinstance(t, (ir.Let, ir.VarDecl)) or not isinstance(t.value, ir.Slice):
            continue
        w = t.value
        if w.base.kind != "tensor" or w.flat or not isinstance(t.sym.type, ir.TileT):
            continue
        place = g.plan.tiles.get(id(t.sym))
        if place is None or place.space != "shared" or t.sym.type.dtype != w.base.type.dtype:
            continue
        if len(t.sym.type.shape) not in (1, 2):
            continue
        uses = [x for sub in w.subs for x in ir.walk_expr(sub.index if isinstance(sub, ir.SubIndex) else sub.start)]
        if any(isinstance(x, ir.Ref) and id(x.sym) in assigned for x in uses):
            continue
        if any(isinstance(x, (ir.Element, ir.Slice, ir.Reduce, ir.Dot)) for x in uses):
            continue
        domain = shape2(t.sym.type.shape)
        V = g.plan.vec.get(id(t), 1)
        sp = vectors.stmt_plan(g, t)
        src = sp.access_of(w) if sp is not None else None
        if sp is None or not sp.vector_path or src is None or src.vector != V:
            continue          # the analysis moves this copy element by element
        p = g.plan.positions.get(id(t))
        if any(b.where == "within" for b in g.plan.barriers.get(p, ())):
            continue
        steps = -(-(domain[0] * domain[1] // V) // g.T)
        if steps * C.itemsize(t.sym.type.dtype) * V > PREFETCH_BYTES:
            continue
        return t, w, V
    return None


def emit_prefetch(g, cand, var_c, buf):
    """Load this thread's chunks of the candidate copy into `buf`, with the loop variable
    standing for the C expression `var_c` (a turn ahead)."""
    t, w, V = cand
    domain = shape2(t.sym.type.shape)
    saved_names, saved_regions = dict(g.names), g.regions
    g.names[id(g.prefetch_var)] = var_c
    g.regions = {}
    try:
        loc = exprs.loc_of(g, w)
        nch = domain[0] * domain[1] // V
        steps = -(-nch // g.T)
        exprs.prepare_regions(g, w)
        vectors.vector_loads(g, [(w, loc, buf)], domain, V, steps, "0", nch % g.T != 0)
    finally:
        g.names, g.regions = saved_names, saved_regions
