"""Tile statements of the generic lowering: declarations, views, assignments and tile atomics.

Guarantees: `cta_stmt(g, s)` writes one statement every thread of the CTA runs: a tile
declaration (its C storage: a shared-memory pointer at the analysis' offset, or registers in
its layout, and its valid region), a `let` view (resolved to its base, `ViewInfo`), a whole-tile
or windowed assignment (through `sweeps.run_sweep`, or `mma.statements.mma_stmt` where the
tensor cores take it, or `sm90.gemm.staged_store` for a wgmma accumulator), a cluster reduction
(`cluster`) or a tile atomic. Stores write only the elements valid in the value and inside the
target.
"""
from __future__ import annotations

from ... import ir
from ...analysis.layout import wgmma_panel_bytes
from ...analysis.lowering import WgmmaLayout, compound_value
from ...analysis.mma_tiles import MmaLayout, shape2

from .. import ctypes_ as C
from ..emitter import c_add, is_int, swz_c
from ..mma import fragments as frags
from ..mma import statements as mma
from ..sm90 import gemm
from ..values import At, Loc, TileVar, ViewInfo

from . import cluster, exprs, sweeps, vectors


def atomic_call(g, s: ir.Atomic, addr: str, v: str, vdt: str, dt: str) -> str:
    """The call that applies atomic `s.op` of value `v` (C text of IR type vdt) to the element of
    storage type `dt` at `addr` (C text `&p[i]`): the hardware atomic where CUDA has one, else the prelude's
    compare-and-swap loop (f32/f64 max; f16/bf16 add, on the 32-bit word holding the element).
    A type without either is an UnsupportedError naming the statement."""
    if dt in ("f16", "bf16"):
        if s.op != "add":
            g.fail(f"atomic_{s.op} on a {dt} tensor (only atomic_add has a {dt} form)", s)
        return (f"tnb_atomic_add16((unsigned short*){addr}, {C.convert(v, vdt, 'f32')}, "
                f"{'true' if dt == 'bf16' else 'false'})")
    cty = {"f32": "float", "f64": "double", "i32": "int", "u32": "unsigned", "i64": "long long"}.get(dt)
    if cty is None:
        g.fail(f"atomic_{s.op} on a {dt} tensor", s)
    return f"tnb_atomic_{s.op}(({cty}*){addr}, ({cty})({C.convert(v, vdt, dt)}))"


def tile_atomic(g, s: ir.Atomic):
    """atomic_add / atomic_max of a tile into a tensor slice: the partition sweep of a store into
    that window (`assign_window`), each element valid in the value and inside the tensor
    updated by one atomic of the thread that owns it; never vectorized, never staged."""
    loc = exprs.loc_of(g, s.target)
    if loc is None or loc.kind != "global":
        g.fail("a tile atomic into something other than a tensor slice", s)
    value = s.value
    domain = shape2(loc.shape)
    bounds = exprs.loc_bounds(g, loc, False)
    if isinstance(value.type, ir.TileT):
        vr = exprs.broadcast_region(g, exprs.region(g, value), value.type.shape, loc.shape or (1,))
        mask = exprs.name_region(g, exprs.intersect(g, vr, bounds))
    else:
        mask = bounds
    lay = sweeps.sweep_layout(g, s, None, value, domain)
    V = vectors.stmt_vec(g, s, domain)
    g.emit(f"// atomic_{s.op}: each element valid in the value and inside {loc.sym.name}, by the thread that owns it")

    def write(at: At, val: str, vdt: str):
        g.emit(atomic_call(g, s, f"&{loc.ptr}[{loc.index(at.i, at.j)}]", val, vdt, loc.dtype) + ";")

    sweeps.run_sweep(g, s, domain, lay, V, value, write, mask, False, None)


def declare_tile(g, sym: ir.Sym) -> TileVar:
    place = g.plan.tiles.get(id(sym))
    if place is None:
        g.fail(f"the plan has no place for tile '{sym.name}'")
    R, Cc = shape2(sym.type.shape)
    n = g.cname(sym)
    dt = sym.type.dtype
    tv = TileVar(sym, n, dt, (R, Cc), len(sym.type.shape), place.space, g.layouts.get(id(sym)))
    if place.space == "shared":
        tv.swz = g.swz.get(id(sym))
        g.emit(f"{C.STORE_C[dt]}* const {n} = ({C.STORE_C[dt]}*)(tnb_smem + {place.offset});  // [{R}, {Cc}] {dt}, {place.bytes} bytes")
        if tv.swz is not None:
            g.emit(f"// {n} is swizzled: {tv.swz.describe()} (column reads spread over the banks; vectors "
                      f"stay whole)")
    elif frags.mma_declare(g, tv):
        pass
    else:
        lay = tv.layout
        cty = C.VALUE_C[dt]
        what = ("mma.sync accumulator fragments" if isinstance(lay, MmaLayout) else lay.what
                if isinstance(lay, WgmmaLayout) else f"chunks of {lay.V} by the partition")
        g.emit(f"{cty} {n}[{lay.slots}];  // [{R}, {Cc}] {dt} in registers: {what}")
    g.emit(f"int {n}_r0 = 0, {n}_r1 = {R}, {n}_c0 = 0, {n}_c1 = {Cc};  // valid region")
    g.tiles[id(sym)] = tv
    return tv


def cta_stmt(g, s):
    if isinstance(s, ir.ClusterReduce):
        cluster.cluster_reduce(g, s)
        return
    if isinstance(s, ir.Barrier):
        g.emit("__syncthreads();  // barrier() written in the source")
        return
    if isinstance(s, ir.Let) and s.sym.kind == "view":
        let_view(g, s)
        return
    if isinstance(s, (ir.Let, ir.VarDecl)):
        tv = declare_tile(g, s.sym)
        if s.value is None:
            return
        g.emit("{")
        g.ind += 1
        if not mma.mma_stmt(g, s, tv):          # tensor-core dots and fragment layouts (mma.statements)
            assign_whole(g, s, tv, s.value)
        g.ind -= 1
        g.emit("}")
        return
    if isinstance(s, ir.Atomic):
        g.emit("{")
        g.ind += 1
        tile_atomic(g, s)
        g.ind -= 1
        g.emit("}")
        return
    if isinstance(s, ir.Assign):
        r = g.low.routes.get(id(s))
        if r is not None and r.folded:
            g.emit("// written with the next statement, which accumulates a dot onto this value (lowering.fold_pairs)")
            return
        g.emit("{")
        g.ind += 1
        t = s.target
        tv = g.tile_of(t.sym) if isinstance(t, ir.Ref) else None
        if mma.mma_stmt(g, s, tv):                # tensor-core dots and fragment layouts (mma.statements)
            pass
        elif tv is not None:
            assign_whole(g, s, tv, compound_value(s.op, t, s.value))
        else:
            loc = exprs.loc_of(g, t)
            if loc is None:
                g.fail("a store into a window of a register tile", s)
            assign_window(g, s, loc, t, compound_value(s.op, t, s.value))
        g.ind -= 1
        g.emit("}")
        return
    g.fail(f"statement {type(s).__name__}", s)


def async_proxy_fence(g, s):
    """After ordinary stores into a shared tile that wgmma may read by descriptor (a tile in
    its layout, on a streamed sm_90 loop: mma.accumulate `wg_ss`): each writing thread's fence, so
    the tensor cores' reads (the async proxy) see them after the next barrier."""
    if getattr(g, "stream", None) is None:
        return
    sym = s.sym if isinstance(s, (ir.Let, ir.VarDecl)) else ir.named_sym(s.target) if isinstance(s, ir.Assign) else None
    sw = g.swz.get(id(sym)) if sym is not None else None
    if sw is None:
        return
    tv = g.tiles.get(id(sym))
    if wgmma_panel_bytes(sw, tv.shape[1] if tv is not None else 0) is not None:
        g.emit("tnb_fence_async_smem();  // ordinary stores, read next by the tensor cores by descriptor")


def let_view(g, s: ir.Let):
    if id(s.sym) in g.low.inline_views:
        # no tile, no copy: each tensor-core dot that reads it stages the slice where it is, as if
        # written there (`KernelLowering.inline_views`)
        g.emit(f"// read only by tensor-core dots, each of which stages {s.value.base.name}[...] itself, as if "
               f"written in the dot: no tile, no copy")
        return
    v = s.value
    if isinstance(v, ir.Ref):
        base, flat, entries = exprs.resolve(g, v.sym, False)
        bounds = exprs.view_bounds(g, v.sym)
        if entries is None:
            tv = g.tile_of(base)
            if tv is not None and tv.space == "registers":
                g.fail(f"a let view of the register tile '{base.name}'", s)
            exts = [tv.shape[1]] if tv.rank == 1 else list(tv.shape)
            entries = [("rng", 0, x) for x in exts]
        g.views[id(s.sym)] = ViewInfo(base, flat, entries, bounds)
    else:
        base, flat, entries = exprs.resolve(g, v.base, v.flat)
        bounds = None
        if entries is not None:      # a view of a view: it sees only the enclosing view's window
            bounds = exprs.sub_bounds(g, entries, exprs.view_bounds(g, v.base), v.subs, exprs.sub_dims(g, entries, v.subs))
        if entries is None:
            if base.kind == "tensor":
                exts = list(base.type.dims)
            else:
                tv = g.tile_of(base)
                if tv is None:
                    g.fail(f"tile '{base.name}' is used before it is declared", s)
                if tv.space == "registers":
                    g.fail(f"a let view of the register tile '{base.name}'", s)
                exts = [1, tv.shape[0] * tv.shape[1]] if flat else ([tv.shape[1]] if tv.rank == 1 else list(tv.shape))
            entries = [("rng", 0, x) for x in exts]
        entries = apply_subs_named(g, entries, v.subs, s.sym)
        g.views[id(s.sym)] = ViewInfo(base, flat, entries, bounds)
    place = g.plan.tiles.get(id(s.sym))
    if place is not None and place.space == "shared":
        # staged: a dot reads this view more than once, so it gets a shared-memory copy
        g.emit("// staged in shared memory: a dot reads this view")
        tv = declare_tile(g, s.sym)
        view_ref = ir.Ref(s.sym, s.sym.type, s.span)
        del g.tiles[id(s.sym)]
        g.emit("{")
        g.ind += 1
        g.regions = {}
        assign_whole(g, s, tv, view_ref)
        g.ind -= 1
        g.emit("}")
        g.tiles[id(s.sym)] = tv


def apply_subs_named(g, entries, subs, sym):
    rng_idx = exprs.sub_dims(g, entries, subs)
    out = list(entries)
    n = g.cname(sym)
    for m, (k, sub) in enumerate(zip(rng_idx, subs)):
        en = out[k]
        st = en[1] if en[0] == "rng" else 0
        x = c_add(st, exprs.idx_c(g, sub.index if isinstance(sub, ir.SubIndex) else sub.start))
        if not is_int(x):
            g.emit(f"const long long {n}_o{m} = {x};  // view start")
            x = f"{n}_o{m}"
        out[k] = ("fix", x) if isinstance(sub, ir.SubIndex) else ("rng", x, sub.length)
    return out


def assign_whole(g, s, tv: TileVar, value):
    """tile = value: every element written; the tile takes the value's region."""
    domain = tv.shape
    if isinstance(value.type, ir.TileT):
        vr = exprs.broadcast_region(g, exprs.region(g, value), value.type.shape, (domain[0], domain[1]))
        vr = exprs.name_region(g, vr)
    else:
        vr = (0, domain[0], 0, domain[1])
    lay = sweeps.sweep_layout(g, s, tv, value, domain)
    V = vectors.stmt_vec(g, s, domain)
    two_phase = tv.space == "shared" and sweeps.two_phase(g, s)

    def write(at: At, val: str, vdt: str):
        if tv.space == "registers":
            g.emit(f"{tv.cname}[{at.slot}] = {C.convert(val, vdt, tv.dtype)};")
        else:
            idx = at.i * domain[1] + at.j if is_int(at.i) and is_int(at.j) else f"({at.i}) * {domain[1]} + ({at.j})"
            g.emit(f"{tv.cname}[{swz_c(tv.swz, idx)}] = {C.store_bits(val, vdt, tv.dtype)};")

    vt = None
    if tv.space == "shared":
        vt = (tv.cname, lambda i, j: swz_c(tv.swz, f"({i}) * {domain[1]} + ({j})"), tv.dtype, None, False, True,
              "shared")
    sweeps.run_sweep(g, s, domain, lay, V, value, write, None, two_phase, vt)
    g.emit(f"{tv.cname}_r0 = {vr[0]}; {tv.cname}_r1 = {vr[1]}; {tv.cname}_c0 = {vr[2]}; {tv.cname}_c1 = {vr[3]};")


def assign_window(g, s, loc: Loc, target, value):
    """window = value: only elements valid in the value and inside the base are written."""
    domain = shape2(loc.shape)
    bounds = exprs.loc_bounds(g, loc, False)
    if isinstance(value.type, ir.TileT):
        vr = exprs.broadcast_region(g, exprs.region(g, value), value.type.shape, loc.shape or (1,))
        mask = exprs.name_region(g, exprs.intersect(g, vr, bounds))
    else:
        mask = bounds
    lay = sweeps.sweep_layout(g, s, None, value, domain)
    if g.gemm is not None and gemm.staged_store(g, s, loc, value, mask, lay):
        return   # a wgmma accumulator's tile, stored through shared memory in 16-byte rows
    V = vectors.stmt_vec(g, s, domain)
    two_phase = sweeps.two_phase(g, s)

    def write(at: At, val: str, vdt: str):
        idx = loc.index(at.i, at.j)
        g.emit(f"{loc.ptr}[{idx}] = {C.store_bits(val, vdt, loc.dtype)};")

    vt = (loc.ptr, loc.index, loc.dtype, mask, loc.kind == "global" and id(loc.sym) in g.hints.stores, False,
          loc.kind) if exprs.row_contiguous(g, loc) else None
    sweeps.run_sweep(g, s, domain, lay, V, value, write, mask, two_phase, vt)
