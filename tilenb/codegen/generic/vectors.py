"""Vector sweeps: a thread's chunks loaded, computed and stored as vectors.

Guarantees: `vector_sweep` loads the operands of a batch of a thread's chunks (up to 8 a thread,
128 bytes of registers) before it computes and stores them, so those loads are in flight
together; each load and store is as wide as the analysis' StatementPlan says for that access
(`access_vector`), never wider than its proven alignment; elements outside the valid region or
the tensor load as 0 and are not stored. A plain copy of a tensor window into a whole shared
tile with more chunks a thread than one batch starts every whole chunk as `cp.async`
(`async_copy`; `SWITCHES.async_copy` turns it off) and waits for them before the next statement.
"""
from __future__ import annotations

from typing import Optional

from ...analysis.shared_traffic import register_scalars
from ... import ir
from ...analysis.mma_tiles import shape2
from ...switches import SWITCHES

from .. import cache_hints
from .. import ctypes_ as C
from ..emitter import c_cond
from ..values import At, Loc, Region

from . import exprs


def stmt_vec(g, s, domain) -> int:
    """The statement's partition width, the analysis' (it divides the row length)."""
    return g.plan.vec.get(id(s), 1)


def stmt_plan(g, s):
    """The analysis' StatementPlan of tile statement `s` (None without the analysis)."""
    return g.plan.statements.get(id(s))


def access_vector(g, e) -> int:
    """Elements one memory instruction moves for expression `e` (a tile name or slice the
    current statement reads) in a whole chunk: the analysis' `Access.vector`."""
    sp = stmt_plan(g, g.cur_stmt)
    if sp is None:
        return 1
    a = sp.access_of(e)
    if a is None and isinstance(g.cur_stmt, ir.Let) and g.cur_stmt.sym.kind == "view" \
            and len(sp.accesses) > 1:
        a = sp.accesses[1]          # a staged view's copy reads the viewed window
    return a.vector if a is not None else 1


def vector_leaves(g, value, domain, bcast: bool = False):
    """Tile reads at the sweep's own coordinates whose chunk of V elements is contiguous; with
    `bcast`, also [1, C] reads broadcast along the rows of an [R, C] sweep (row 0 of them):
    the same column j for every row, so the chunk is contiguous there too."""
    out = []
    R, Cc = domain

    def visit(e, ident, cols):
        if isinstance(e, (ir.Ref, ir.Slice)) and isinstance(e.type, ir.TileT):
            shp = shape2(e.type.shape)
            if ident or (bcast and cols and R > 1 and shp == (1, Cc)):
                loc = exprs.loc_of(g, e)
                if loc is not None and exprs.row_contiguous(g, loc) and shape2(loc.shape) == shp:
                    out.append((e, loc))
            return
        if isinstance(e, (ir.Reduce, ir.Dot, ir.Transpose)):
            return
        for c in ir.sub_exprs(e):
            if isinstance(c.type, ir.TileT):
                cs = shape2(c.type.shape)
                visit(c, ident and cs == shape2(e.type.shape), cols and cs[1] == Cc)
    if isinstance(value.type, ir.TileT):
        vs = shape2(value.type.shape)
        visit(value, vs == (R, Cc), vs[1] == Cc)
    return out


def invariant_divisions(g, value, domain):
    """f32-family divisions whose divisor is the same for every element of a chunk (a scalar,
    or a tile broadcast along the row): evaluated as x * (1 / d) with 1 / d computed once a
    chunk (`fast_div`), an error of at most 1.5 ulp, within spec 17's f32 bound."""
    out = []

    def visit(e):
        if isinstance(e, (ir.Reduce, ir.Dot, ir.Transpose)):
            return
        if (isinstance(e, ir.Binary) and e.op == "/" and e.type.dtype in C.F32_FAMILY
                and e.b.type.dtype in C.F32_FAMILY
                and (not isinstance(e.b.type, ir.TileT) or shape2(e.b.type.shape)[1] == 1)
                and not exprs.has_reduce_or_dot(g, e.b)):
            out.append(e)
        for c in ir.sub_exprs(e):
            if isinstance(c.type, ir.TileT) and shape2(c.type.shape) == tuple(domain):
                visit(c)      # only at the sweep's own coordinates: the divisor's row is the chunk's
    if isinstance(value.type, ir.TileT) and shape2(value.type.shape) == tuple(domain) and domain[1] > 1:
        visit(value)
    return out


def vector_batch(g, nch: int, leaf_bytes: int, cap: int = 0) -> int:
    """Chunks a thread loads before it computes any of them: all of its chunks, up to 8 and
    up to 128 bytes of loaded vectors (32 registers), so their loads are in flight together
    (the experiment switch TILENB_BATCH_BYTES=n, or `cap`: up to n bytes and 8 * n / 128 chunks)."""
    steps = -(-nch // g.T)
    cap = cap or SWITCHES.batch_bytes or 128
    b = max(1, min(steps, max(1, 8 * cap // 128), cap // max(1, leaf_bytes)))
    while steps % b and b > 1 and steps > 8:
        b -= 1
    return b


def vector_plan(g, value, domain, V):
    """The vector operands of a vector sweep: [(leaf, Loc, buffer name)] (equal windows share
    a buffer), the first of each buffer, and the bytes a chunk loads."""
    leaves, seen = [], {}
    for e, loc in vector_leaves(g, value, domain, bcast=True):
        if access_vector(g, e) != V:
            continue          # read element by element (the analysis' width for this access)
        key = exprs.leaf_key(g, e, loc)
        if key not in seen:
            seen[key] = g.new("vin")
        leaves.append((e, loc, seen[key]))
    uniq, firsts = [], set()
    for e, loc, b in leaves:
        if b not in firsts:
            firsts.add(b)
            uniq.append((e, loc, b))
    return leaves, uniq, sum(C.itemsize(loc.dtype) * V for _, loc, _ in uniq)


def chunk_head(g, domain, V, base, q, guard):
    """Open chunk (base + q) * T + tid of the partition at width V; returns its (i, j0)."""
    R, Cc = domain
    nch, per_row = R * Cc // V, Cc // V
    k, i, j0 = g.new("k"), g.new("i"), g.new("j")
    g.emit(f"const int {k} = tnb_tid + ({base} + {q}) * {g.T};")
    g.emit(f"if ({k} < {nch}) {{" if guard else "{")
    g.ind += 1
    if R == 1:
        g.emit(f"const int {i} = 0, {j0} = {k} * {V};")
    else:
        g.emit(f"const int {i} = {k} / {per_row}, {j0} = ({k} % {per_row}) * {V};")
    return i, j0


def vector_loads(g, uniq, domain, V, B, base, guard):
    """Phase 1 of a vector sweep: chunks base .. base + B - 1 of this thread, every vector
    operand loaded into its buffer (elements outside the operand's valid region read as 0)."""
    R, Cc = domain
    vtypes = {4: "unsigned", 8: "uint2", 16: "uint4"}
    q = g.new("q")
    g.emit("#pragma unroll")
    g.emit(f"for (int {q} = 0; {q} < {B}; ++{q}) {{")
    g.ind += 1
    i, j0 = chunk_head(g, domain, V, base, q, guard)
    for e, loc, buf in uniq:
        nbytes = C.itemsize(loc.dtype) * V
        row = i if shape2(loc.shape)[0] == R else 0
        b = exprs.loc_bounds(g, loc, False) if loc.kind == "shared" else exprs.region(g, e)
        load = f"*({vtypes[nbytes]}*){buf}[{q}] = *(const {vtypes[nbytes]}*)({loc.ptr} + {loc.index(row, j0)});"
        if loc.kind == "global" and id(e) in g.hints.loads:     # the last touch of re-read data
            load = cache_hints.load_text(vtypes[nbytes], f"{buf}[{q}]", f"{loc.ptr} + {loc.index(row, j0)}")
        chunk_load(g, load, loc, b, row, j0, V, lambda v, buf=buf: f"{buf}[{q}][{v}]")
    g.close()
    g.close()


def chunk_load(g, load: str, loc: "Loc", b: Region, row, j0, V: int, dest) -> None:
    """Emit `load` (one vector access moving a chunk of V elements of `loc`'s row `row` from
    column j0) where the whole chunk lies in the valid region `b`; where it may not, the
    chunk's elements one by one into `dest(v)`, 0 outside the region (nothing is read there)."""
    shp = shape2(loc.shape)
    whole = exprs.chunk_inside(g, b, row, j0, V, shp)
    if whole is True:
        g.emit(load)
        return
    v = g.new("v")
    cond = exprs.in_region(g, b, row, f"{j0} + {v}", shp)
    zero = "0" if loc.dtype not in ("f16", "bf16") else "(unsigned short)0"
    g.emit(f"if ({c_cond(whole)}) {load}")
    g.emit(f"else for (int {v} = 0; {v} < {V}; ++{v}) {dest(v)} = ({c_cond(cond)}) ? "
              f"{loc.ptr}[{loc.index(row, f'{j0} + {v}')}] : ({C.STORE_C[loc.dtype]}){zero};")


def vector_sweep(g, domain, V, value, vt, preloaded=None):
    """The partition at width V with 4/8/16-byte vector loads and stores: the analysis chose V
    so that every contiguous operand's chunk starts on a multiple of V elements (tensors are
    16-byte aligned at their base, the launch guarantees it; tiles are 16-byte aligned).
    A chunk that crosses a tensor's edge or the valid region falls back to element accesses.
    Each thread first loads the vectors of a batch of its chunks (all of them when they fit,
    `vector_batch`), then computes and stores them: the loads are in flight together. A value
    that is one operand of the target's own type is moved as bits; 16-bit floats are widened
    from 32-bit words and rounded in pairs (cvt.rn.{bf16,f16}x2.f32). `preloaded`: the buffer
    a loop's prefetch already loaded this copy's chunks into (all of them; `prefetch_loop`).

    It reads better whole: it writes one C loop nest (batch, chunk, element) whose load,
    compute and store parts share the buffers, masks and indices named at its top; apart,
    each part would take them all as arguments."""
    R, Cc = domain
    nch = R * Cc // V
    vtypes = {4: "unsigned", 8: "uint2", 16: "uint4"}
    optr, oindex, odt, omask = vt[:4]
    hint_store = len(vt) > 4 and vt[4]       # a store this kernel never reads back (cache_hints.py)
    whole_tile = len(vt) > 5 and vt[5]       # the destination is a whole shared tile
    leaves, uniq, leaf_bytes = vector_plan(g, value, domain, V)
    steps = -(-nch // g.T)
    B = steps if preloaded is not None else vector_batch(g, nch, leaf_bytes)
    guard = nch % g.T != 0 or steps % B != 0
    raw = (len(leaves) == 1 and leaves[0][0] is value and leaves[0][1].dtype == odt)
    # (whether a copy is asynchronous does not follow TILENB_BATCH_BYTES: the default batch decides)
    if (SWITCHES.async_copy and raw and whole_tile and preloaded is None and leaves[0][1].kind == "global"
            and steps > vector_batch(g, nch, leaf_bytes, 128)
            and id(value) not in g.hints.loads):
        async_copy(g, domain, V, leaves[0][0], leaves[0][1], vt)
        return
    if preloaded is not None:
        leaves = [(leaves[0][0], leaves[0][1], preloaded)]
        g.emit(f"// partition: chunk k of {V} row elements -> thread k % {g.T}, moved as vectors where whole; "
                  f"this thread's {B} chunks were loaded into {preloaded} ahead of this turn")
    else:
        g.emit(f"// partition: chunk k of {V} row elements -> thread k % {g.T}, moved as vectors where whole; "
                  f"each thread loads {B} of its chunks, then computes and stores them")
    hoisted = None if raw else hoist_scalar_tiles(g, value)
    sb = g.new("sb")
    outer = steps > B
    if outer:
        g.emit("#pragma unroll 1")
        g.emit(f"for (int {sb} = 0; {sb} < {steps}; {sb} += {B}) {{")
        g.ind += 1
    base = sb if outer else "0"
    if preloaded is None:
        for e, loc, b in uniq:
            g.emit(f"__align__(16) {C.STORE_C[loc.dtype]} {b}[{B}][{V}];")
        if uniq:
            vector_loads(g, uniq, domain, V, B, base, guard)
    # phase 2: compute and store
    q = g.new("q")
    g.emit("#pragma unroll")
    g.emit(f"for (int {q} = 0; {q} < {B}; ++{q}) {{")
    g.ind += 1
    i, j0 = chunk_head(g, domain, V, base, q, guard)
    out = g.new("vout")
    ost = C.STORE_C[odt]
    nbytes = C.itemsize(odt) * V
    if raw:
        g.emit(f"// the value is {leaves[0][1].sym.name}'s elements, stored as they are")
        out = f"{leaves[0][2]}[{q}]"
    else:
        exprs.hoist_row_reductions(g, value, i, domain)
        saved, saved_b, saved_d = dict(g.pre), set(g.pre_bcast), dict(g.fast_div)
        g.emit(f"__align__(16) {ost} {out}[{V}];")
        divs = invariant_divisions(g, value, domain)
        ok = None
        if divs:
            conds = []
            for d in divs:
                bv = exprs.ev(g, d.b, exprs.child_at(g, d, d.b, At(i, 0, None, None, False)) if isinstance(d.b.type, ir.TileT) else None)
                dv, rv = g.new("dv"), g.new("rcp")
                g.emit(f"const float {dv} = {C.convert(bv, d.b.type.dtype, 'f32')};")
                g.emit(f"const float {rv} = 1.0f / {dv};  // divisor shared by the chunk: x / d as x * (1 / d)")
                g.fast_div[id(d)] = rv
                conds.append(f"tnb_rcp_ok({dv})")
            ok = " && ".join(conds)
        pack = (odt in ("f16", "bf16") and value.type.dtype in C.F32_FAMILY and V % 2 == 0)

        def element_loop():
            vv = g.new("v")
            res = g.new("res") if pack else None
            if pack:
                g.emit(f"float {res}[{V}];")
            g.emit("#pragma unroll")
            g.emit(f"for (int {vv} = 0; {vv} < {V}; ++{vv}) {{")
            g.ind += 1
            j = g.new("j")
            g.emit(f"const int {j} = {j0} + {vv};")
            for e, loc, buf in leaves:
                g.pre[id(e)] = exprs.vector_elem(g, buf, q, vv, loc.dtype)
                if shape2(loc.shape) != (R, Cc):
                    g.pre_bcast.add(id(e))
            val = exprs.elem_value(g, value, At(i, j, None, None, True), domain)
            if pack:
                g.emit(f"{res}[{vv}] = {C.convert(val, value.type.dtype, 'f32')};")
            else:
                g.emit(f"{out}[{vv}] = {C.store_bits(val, value.type.dtype, odt)};")
            g.close()
            if pack:
                fn = C.pack2(odt)
                p = g.new("p")
                g.emit("#pragma unroll")
                g.emit(f"for (int {p} = 0; {p} < {V // 2}; ++{p}) "
                          f"((unsigned*){out})[{p}] = {fn}({res}[2 * {p}], {res}[2 * {p} + 1]);")

        if ok:
            g.emit(f"if ({ok}) {{")
            g.ind += 1
            element_loop()
            g.ind -= 1
            g.emit("} else {  // a divisor whose reciprocal is not a normal number: divide")
            g.ind += 1
            g.fast_div = saved_d
            element_loop()
            g.close()
        else:
            element_loop()
        g.pre, g.pre_bcast, g.fast_div = saved, saved_b, saved_d
    store = f"*({vtypes[nbytes]}*)({optr} + {oindex(i, j0)}) = *(const {vtypes[nbytes]}*){out};"
    if hint_store:
        store = cache_hints.store_text(vtypes[nbytes], f"{optr} + {oindex(i, j0)}", out)
    whole = exprs.chunk_inside(g, omask, i, j0, V, domain) if omask is not None else True
    if whole is True:
        g.emit(store)
    else:
        if not hint_store:   # one instruction in inline PTX: the compiler would split a C++ store here
            helper = "tnb_stg" if vt[6] == "global" else "tnb_sts"
            store = f"{helper}(({vtypes[nbytes]}*)({optr} + {oindex(i, j0)}), *(const {vtypes[nbytes]}*){out});"
        v = g.new("v")
        cond = exprs.in_region(g, omask, i, f"{j0} + {v}", domain)
        g.emit(f"if ({c_cond(whole)}) {store}")
        g.emit(f"else for (int {v} = 0; {v} < {V}; ++{v}) if ({c_cond(cond)}) {optr}[{oindex(i, f'{j0} + {v}')}] = {out}[{v}];")
    g.close()
    g.close()
    if outer:
        g.close()
    if hoisted is not None:
        g.pre, g.pre_bcast = hoisted


def hoist_scalar_tiles(g, value):
    """Read once, before a vector sweep, each [1, 1] shared tile the value broadcasts to every
    element (the scale of `x * inv * g`): one register instead of a shared load a chunk (and a
    reload after each store the compiler may not move it across). Returns the `pre` map and
    broadcast set to restore after the sweep."""
    saved = (dict(g.pre), set(g.pre_bcast))
    seen = {}
    # which reads: the analysis' decision (shared_traffic.register_scalars), counted in its traffic
    for e in register_scalars(value, lambda sym: getattr(g.tile_of(sym), "space", None)):
        if id(e.sym) not in seen:
            u = g.new("u")
            g.emit(f"const {C.VALUE_C[e.type.dtype]} {u} = {exprs.ev(g, e, At(0, 0, None, None, True))};"
                   f"  // {e.sym.name}, the same for every element")
            seen[id(e.sym)] = u
        g.pre[id(e)] = seen[id(e.sym)]
        g.pre_bcast.add(id(e))
    return saved


def async_copy(g, domain, V, e, loc, vt):
    """A copy of a tensor window into a whole shared tile with more chunks a thread than one
    register batch (`vector_batch`): every whole chunk is started as an asynchronous copy
    (`tnb_cpa`, cp.async on sm_80+), so all of the thread's chunks are in flight at once
    instead of a batch at a time; a chunk that crosses the window's valid region is written
    element by element (0 outside it). The thread waits for its own copies before the next
    statement, so the statement means what the register path means (its barriers are the
    analysis' own)."""
    R, Cc = domain
    nch = R * Cc // V
    steps = -(-nch // g.T)
    optr, oindex, odt = vt[:3]
    nbytes = C.itemsize(odt) * V
    g.emit(f"// partition: chunk k of {V} row elements -> thread k % {g.T}; this thread's {steps} chunks "
              f"are copied asynchronously (cp.async, {nbytes} bytes each), all in flight together")
    q = g.new("q")
    g.emit("#pragma unroll 4")
    g.emit(f"for (int {q} = 0; {q} < {steps}; ++{q}) {{")
    g.ind += 1
    i, j0 = chunk_head(g, domain, V, "0", q, nch % g.T != 0)
    row = i if shape2(loc.shape)[0] == R else 0
    cp = f"tnb_cpa<{nbytes}>({optr} + {oindex(i, j0)}, {loc.ptr} + {loc.index(row, j0)});"
    chunk_load(g, cp, loc, exprs.region(g, e), row, j0, V, lambda v: f"{optr}[{oindex(i, f'{j0} + {v}')}]")
    g.close()
    g.close()
    g.emit("tnb_cpa_wait_all();  // this thread's copies have landed")


def masked(g, mask: Optional[Region], at, domain, body):
    """Emit body(at) for one element, inside an `if` on the mask's valid region unless the
    region is known to hold it (nothing at all when it is known not to)."""
    cond = exprs.in_region(g, mask, at.i, at.j, domain) if mask is not None else True
    if cond is False:
        return
    if cond is not True:
        g.emit(f"if ({cond}) {{")
        g.ind += 1
    body(at)
    if cond is not True:
        g.ind -= 1
        g.emit("}")
