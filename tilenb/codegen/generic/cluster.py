"""Cluster reductions (`cluster_reduce`): a tile combined across the CTAs of a thread block cluster.

Guarantees: each CTA publishes its copy into its own slot (the analysis' "cluster slot" regions),
the cluster synchronises with `barrier.cluster` arrive/wait, and each CTA combines every CTA's
copy in rank order (the same order on every CTA, so every CTA holds the same result). The second
half is written as late as the program allows (`cluster_needs_finish`: before the first
statement that names the tile or its inputs), and the last arrive is waited for before the
kernel exits (`cluster_exit`) so no CTA leaves while another still reads its shared memory.
"""
from __future__ import annotations

from ... import ir

from .. import ctypes_ as C
from ..emitter import swz_c
from ..values import TileVar

from . import exprs


def cluster_reduce(g, s: ir.ClusterReduce):
    """cluster_sum(t) (max, min) of a shared tile, in two halves with one cluster barrier.
    Here: a CTA barrier, then each element of t is published into a slot of this CTA's own
    (static shared memory, written once; an element outside the CTA's valid region as the
    identity), and the CTA arrives at the cluster barrier. `cluster_finish`, emitted just
    before the next top-level statement that names t (or a view, or is another cluster
    reduction), waits on the barrier and combines: the thread of each element loads the K
    CTAs' slots (distributed shared memory, all K loads in flight), rank 0 first, into the
    valid elements of t, then a CTA barrier. The statements in between (which neither read
    nor write t) run while the other CTAs of the cluster catch up. After the last cluster
    reduction the CTA arrives once more, and waits on that before it exits (`cluster_exit`):
    no CTA leaves while another may still read its slots."""
    K = g.kir.cluster
    tv = g.tile_of(s.target.sym)
    name = f"cluster_{s.op}({s.target.sym.name})"
    if tv is None or tv.space != "shared":
        g.fail(f"{name} of a tile in registers (it must live in shared memory)", s)
    R, Cc = tv.shape
    dt = tv.dtype
    ident = exprs.reduce_ident(g, s.op, dt)
    if K == 1:   # the cluster is this CTA: each valid element combined with the identity
        g.emit(f"__syncthreads();  // codegen-internal (cluster reduction): {s.target.sym.name} is complete")
        cluster_each(g, tv, [f"if (tnb_in) {tv.cname}[{swz_c(tv.swz, 'tnb_e')}] = "
                               f"{exprs.reduce_combine(g, s.op, dt, ident, tv.cname + '[' + str(swz_c(tv.swz, 'tnb_e')) + ']')};"])
        g.emit(f"__syncthreads();  // codegen-internal (cluster reduction): {name} is read by other threads next")
        return
    slot = g.new("tnb_cls")
    g.emit(f"{C.STORE_C[dt]}* const {slot} = ({C.STORE_C[dt]}*)(tnb_smem + {g.cluster_slot_at[id(s)]});  "
              f"// {name}: this CTA's published copy (an element outside its valid region as the identity)")
    g.emit(f"__syncthreads();  // codegen-internal (cluster reduction): {s.target.sym.name} is complete (any "
              f"thread may have written an element)")
    cluster_each(g, tv, [f"{slot}[tnb_e] = tnb_in ? {tv.cname}[{swz_c(tv.swz, 'tnb_e')}] : {ident};"])
    g.cluster_pending = (s, tv, slot)
    later = g.kir.body[next(i for i, st in enumerate(g.kir.body) if st is s) + 1:]
    if not any(sym is s.target.sym for st in later for sym in _named_syms(st)):
        # nothing reads t later: its bytes may go to another tile after this statement, so the
        # combination cannot wait (nor can anything else overlap it)
        g.emit(f"tnb_cluster_arrive();  // {name}: published")
        cluster_finish(g)
        return
    g.emit(f"tnb_cluster_arrive();  // {name}: published; the wait and the combination come just before "
              f"the next statement that needs {s.target.sym.name}")


def cluster_each(g, tv: TileVar, lines):
    """Per element e of tile tv (thread e % threads): `tnb_e`, and `tnb_in` (e lies in tv's
    valid region), then `lines`."""
    R, Cc = tv.shape
    total, T = R * Cc, g.T
    r0, r1, c0, c1 = tv.region
    g.emit("#pragma unroll")
    g.emit(f"for (int tnb_k = 0; tnb_k < {-(-total // T)}; ++tnb_k) {{")
    g.emit(f"  const int tnb_e = tnb_tid + tnb_k * {T};")
    g.emit(f"  const int tnb_i = tnb_e / {Cc}, tnb_j = tnb_e % {Cc};")
    g.emit(f"  const bool tnb_in = tnb_i >= {r0} && tnb_i < {r1} && tnb_j >= {c0} && tnb_j < {c1};")
    g.emit(f"  if (tnb_e < {total}) {{")
    for line in lines:
        g.emit("    " + line)
    g.emit("  }")
    g.emit("}")


def _named_syms(st):
    """The symbols statement st (nested ones included) names: tiles, views, tensors."""
    for x in ir.walk_stmts((st,)):
        for e in ir.stmt_exprs(x):
            for y in ir.walk_expr(e):
                sym = ir.named_sym(y)
                if sym is not None:
                    yield sym


def cluster_needs_finish(g, st) -> bool:
    """Whether top-level statement `st` must see the pending cluster reduction's result:
    it names its tile (or any view), or is a cluster reduction itself (the barrier's arrive
    and wait alternate)."""
    target = g.cluster_pending[0].target.sym
    if any(isinstance(x, ir.ClusterReduce) or (isinstance(x, ir.Let) and x.sym.kind == "view")
           for x in ir.walk_stmts((st,))):
        return True
    return any(sym is target or sym.kind == "view" for sym in _named_syms(st))


def cluster_finish(g):
    s, tv, slot = g.cluster_pending
    g.cluster_pending = None
    K, dt = g.kir.cluster, tv.dtype
    cty = C.VALUE_C[dt]
    name = f"cluster_{s.op}({s.target.sym.name})"
    a = g.new("tnb_cla")
    g.emit(f"{{  // {name}, continued (line {s.span.line + g.line_offset}): combined over the {K} CTAs "
              f"of the cluster, rank 0 first")
    g.ind += 1
    g.emit("tnb_cluster_wait();  // every CTA of the cluster has published its copy")
    g.emit(f"const unsigned {a} = tnb_smem_addr({slot});")
    combine = exprs.reduce_combine(g, s.op, dt, "tnb_acc", "tnb_v[tnb_r]")
    cluster_each(g, tv, [
        f"{cty} tnb_v[{K}];",
        "#pragma unroll",
        f"for (int tnb_r = 0; tnb_r < {K}; ++tnb_r) tnb_v[tnb_r] = tnb_cluster_ld(tnb_cluster_addr({a} + "
        f"{C.itemsize(dt)} * tnb_e, tnb_r), {cty}());",
        f"{cty} tnb_acc = {exprs.reduce_ident(g, s.op, dt)};",
        "#pragma unroll",
        f"for (int tnb_r = 0; tnb_r < {K}; ++tnb_r) tnb_acc = {combine};",
        f"if (tnb_in) {tv.cname}[{swz_c(tv.swz, 'tnb_e')}] = tnb_acc;"])
    if s is g.cluster_last:
        g.emit("tnb_cluster_arrive();  // this CTA is done reading the cluster's slots (waited on at exit)")
    g.emit(f"__syncthreads();  // codegen-internal (cluster reduction): {name} is read by other threads next")
    g.ind -= 1
    g.emit("}")


def cluster_exit(g):
    """Before the kernel ends: finish a pending cluster reduction, then wait until every CTA
    of the cluster has read the slots of the last one (its final `tnb_cluster_arrive`)."""
    if g.cluster_last is None or g.kir.cluster == 1:
        return
    if g.cluster_pending is not None:
        cluster_finish(g)
    g.emit("tnb_cluster_wait();  // no CTA exits while another may still read its slots")
