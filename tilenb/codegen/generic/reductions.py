"""CTA-wide reductions inside a tile statement (rowsum, rowmax, ... over a row wider than a thread).

Guarantees: `block_sweep` reduces each row across the threads that own its chunks: each thread
combines its own elements (vector loads where the analysis proved the window aligned), then a
warp shuffle tree, then (when a row spans warps) partials in the shared arrays the analysis
sized (`Analysis.smem`, `identity_reductions`); `coop_sweep` is the same for reductions the
statement evaluates at an extent of 1. Invalid elements are skipped (the combine's identity);
an operand's valid columns are uniform, so whether they cover the whole row is tested once
outside the step loop: the covered loop tests no chunk, only the other one tests each chunk.
every thread of the CTA reaches the same barriers.
"""
from __future__ import annotations

from typing import List, Optional

from ... import ir
from ...analysis.mma_tiles import shape2
from ...analysis.smem import identity_reductions

from .. import cache_hints
from .. import ctypes_ as C
from ..emitter import c_cond, is_int
from ..values import At

from . import exprs, vectors


def coop_reduces(g, value, domain, V, lay):
    """The reductions a warp's lanes share (the analysis' rule, `smem.identity_reductions`,
    which also sizes their partials): element-wise chunks over an extent of 1 only."""
    if lay is not None or V != 1 or not isinstance(value.type, ir.TileT):
        return []
    R, Cc = domain
    if R != 1 and Cc != 1:
        return []
    return identity_reductions(value, domain)


# one combine across warps through a small shared scratch
def reduce_vector_leaves(g, x, xshape, V):
    """The leaves of a reduction's operand read as V-element vectors at the chunk's own
    coordinates: those the analysis gives vector V (`ownership`, row_reduce_widths: whole
    shared tiles, and tensor windows whose every chunk provably starts on a multiple of V
    elements; the vector load of a chunk that crosses the window's valid region falls back
    to element loads)."""
    return [(e, loc) for e, loc in vectors.vector_leaves(g, x, xshape)
            if V > 1 and loc.kind in ("global", "shared") and vectors.access_vector(g, e) == V]


def block_reduce_widths(g, domain, reds, s) -> Optional[List[int]]:
    """Per reduction, the chunk width V of the CTA-wide path, or None when it does not apply;
    both are the analysis'. Whether it applies: its shared-memory map holds the partials'
    arrays of this copy of the statement (`analysis.smem`: row reductions whose row of Cx
    elements is a multiple of the CTA's threads, so that, by the partition rule, chunk
    k -> thread k % T, every thread owns the same number of chunks of every row and each warp
    works on one row at a time, within the kernel's shared-memory limit). The width: the
    statement plan's (`ownership`, row_reduce_widths: the widest V whose Cx / V chunks are
    still a multiple of the threads and whose operands read as V-element vectors)."""
    copies = g.smem.partials.get(id(s), ())
    k = g.partial_copies.get(id(s), 0)
    g.partial_copies[id(s)] = k + 1
    if k >= len(copies) or not copies[k]:
        return None
    sp = vectors.stmt_plan(g, s)
    if sp is None or not sp.row_reductions:
        return None
    out = []
    for red in reds:
        V = sp.reduce_width(red)
        if V is None:
            return None
        out.append(V)
    return out


def in_loop(g, s) -> bool:
    ids = getattr(g, "_loop_ids", None)
    if ids is None:
        ids = set()
        for st in ir.walk_stmts(g.kir.body):
            if isinstance(st, (ir.For, ir.While)):
                ids.update(id(x) for x in ir.walk_stmts(st.body))
        g._loop_ids = ids
    return id(s) in ids


def reduce_chunk(g, red, x, xr, xshape, dt, acc, row, j0, V, bufs, checked: bool):
    """acc <- acc combined with the chunk's V elements of x's row `row` from column j0
    (`checked`: skip elements outside x's valid columns)."""
    vv = g.new("v")
    if V > 1:
        g.emit("#pragma unroll")
        g.emit(f"for (int {vv} = 0; {vv} < {V}; ++{vv}) {{")
        g.ind += 1
        j = g.new("j")
        g.emit(f"const int {j} = {j0} + {vv};")
    else:
        j = j0
    saved = dict(g.pre)
    for e, loc, buf, b in bufs:
        val = exprs.vector_elem(g, buf, None, vv, loc.dtype) if V > 1 else C.load_value(f"{buf}[{vv}]", loc.dtype)
        cond = exprs.in_region(g, b, row, j, shape2(loc.shape))
        if cond is False:
            val = C.zero(loc.dtype)
        elif cond is not True:
            val = f"(({cond}) ? {val} : {C.zero(loc.dtype)})"
        g.pre[id(e)] = val
    cond = exprs.in_region(g, (0, 1, xr[2], xr[3]), 0, j, (1, xshape[1])) if checked else True
    if cond is not False:
        if cond is not True:
            g.emit(f"if ({cond}) {{")
            g.ind += 1
        v = exprs.ev(g, x, At(row, j, None, None, True))
        g.emit(f"{acc} = {exprs.reduce_combine(g, red.op, dt, acc, C.convert(v, x.type.dtype, dt))};")
        if cond is not True:
            g.ind -= 1
            g.emit("}")
    g.pre = saved
    if V > 1:
        g.ind -= 1
        g.emit("}")


def row_covered(xr, n: int):
    """C condition (or True) that valid columns [xr[2], xr[3]) (uniform ints) hold all n columns
    of the row: then every chunk of the step loop is whole."""
    conds = []
    if not (is_int(xr[2]) and xr[2] <= 0):
        conds.append(f"{xr[2]} <= 0")
    if not (is_int(xr[3]) and xr[3] >= n):
        conds.append(f"{xr[3]} >= {n}")
    return " && ".join(conds) if conds else True


def reduce_steps(g, red, x, xr, xshape, dt, acc, row, V, steps, vtypes, mode: str):
    """The step loop of one thread over its `steps` chunks of x's row `row`: each chunk's vector
    operands loaded, then combined into acc. `mode`: "whole" (the caller proved every column
    of the row valid: no chunk is tested), "test" (each chunk tests whether it lies wholly in
    x's valid columns, else checks its elements one by one), "plain" (as "test", but where the
    chunk is provably whole or x nests a reduction: one unchecked or element-checked chunk)."""
    assert mode in ("whole", "test", "plain")
    st = g.new("s")
    g.emit("#pragma unroll")
    g.emit(f"for (int {st} = 0; {st} < {steps}; ++{st}) {{")
    g.ind += 1
    j0 = g.new("j")
    g.emit(f"const int {j0} = (tnb_tid + {st} * {g.T}) * {V};")
    inner = dict(g.pre)
    bufs = []
    if V > 1:
        seen = {}
        for e, loc in reduce_vector_leaves(g, x, xshape, V):
            key = exprs.leaf_key(g, e, loc)
            if key in seen:
                bufs.append((e,) + seen[key][1:])
                continue
            buf = g.new("vin")
            nb = C.itemsize(loc.dtype) * V
            g.emit(f"__align__(16) {C.STORE_C[loc.dtype]} {buf}[{V}];")
            load = f"*({vtypes[nb]}*){buf} = *(const {vtypes[nb]}*)({loc.ptr} + {loc.index(row, j0)});"
            if loc.kind == "global":
                b = exprs.region(g, e)
                if id(e) in g.hints.loads:      # the last touch of re-read data
                    load = cache_hints.load_text(vtypes[nb], buf, f"{loc.ptr} + {loc.index(row, j0)}")
                vectors.chunk_load(g, load, loc, b, row, j0, V, lambda v, buf=buf: f"{buf}[{v}]")
            else:
                g.emit(load)
                b = exprs.loc_bounds(g, loc, False)
            bufs.append((e, loc, buf, b))
            seen[key] = bufs[-1]
    whole = True if mode == "whole" else exprs.chunk_inside(g, (0, 1, xr[2], xr[3]), 0, j0, V, (1, xshape[1]))
    if mode == "test":
        g.emit(f"if ({c_cond(whole)}) {{  // the whole chunk lies in the valid region")
        g.ind += 1
        reduce_chunk(g, red, x, xr, xshape, dt, acc, row, j0, V, bufs, checked=False)
        g.ind -= 1
        g.emit("} else {")
        g.ind += 1
        reduce_chunk(g, red, x, xr, xshape, dt, acc, row, j0, V, bufs, checked=True)
        g.ind -= 1
        g.emit("}")
    else:
        reduce_chunk(g, red, x, xr, xshape, dt, acc, row, j0, V, bufs, checked=whole is not True)
    g.pre = inner
    g.ind -= 1
    g.emit("}")


def block_sweep(g, s, domain, value, reds, widths, write, mask):
    R, _ = domain
    NW = g.T // 32
    vtypes = {4: "unsigned", 8: "uint2", 16: "uint4"}
    p = g.plan.positions.get(id(s))
    before = any(b.where == "before" for b in g.plan.barriers.get(p, ()))
    if in_loop(g, s) and not before:   # (an analysis barrier right before the statement does the same)
        g.emit("__syncthreads();  // codegen-internal: the previous turn's owners have read this reduction's "
                  "scratch before the warps write it again")
    saved = dict(g.pre)
    accs = []
    for red, V in zip(reds, widths):
        x = red.x
        xr = exprs.region(g, x)
        dt = red.type.dtype
        vc = C.VALUE_C[dt]
        xshape = shape2(x.type.shape)
        per_row = xshape[1] // V
        steps = per_row // g.T
        sc = g.new("rsc")
        g.emit(f"__shared__ {vc} {sc}[{R * NW}];  // codegen-internal scratch: one partial per (row, warp)")
        g.emit(f"// {red.op} over each row: chunk k of {V} row elements -> thread k % {g.T} (the partition), "
                  f"{steps} chunk(s) a row per thread, reduced in registers,")
        g.emit("// then across the warp with shuffles; lane 0 leaves the warp's partial in the scratch")
        row = g.new("row")
        g.emit(f"for (int {row} = 0; {row} < {R}; ++{row}) {{")
        g.ind += 1
        acc = g.new("red")
        g.emit(f"{vc} {acc} = {exprs.reduce_ident(g, red.op, dt)};")
        rowok = exprs.in_region(g, (xr[0], xr[1], 0, 1), row, 0, (R, 1))
        if rowok is not False:
            if rowok is not True:
                g.emit(f"if ({rowok}) {{")
                g.ind += 1
            whole_row = row_covered(xr, xshape[1])
            if whole_row is True or exprs.has_reduce_or_dot(g, x):
                reduce_steps(g, red, x, xr, xshape, dt, acc, row, V, steps, vtypes, "plain")
            else:
                # x's valid columns are uniform: test once whether they cover the whole row, so that
                # the hot step loop is straight-line code; only a partial row tests each chunk
                g.emit(f"if ({c_cond(whole_row)}) {{  // the valid region covers every column of the row")
                g.ind += 1
                reduce_steps(g, red, x, xr, xshape, dt, acc, row, V, steps, vtypes, "whole")
                g.ind -= 1
                g.emit("} else {")
                g.ind += 1
                reduce_steps(g, red, x, xr, xshape, dt, acc, row, V, steps, vtypes, "test")
                g.ind -= 1
                g.emit("}")
            if rowok is not True:
                g.ind -= 1
                g.emit("}")
        off = g.new("off")
        comb = exprs.reduce_combine(g, red.op, dt, acc, f"__shfl_xor_sync(0xffffffffu, {acc}, {off})")
        g.emit("#pragma unroll")
        g.emit(f"for (int {off} = 16; {off} > 0; {off} >>= 1) {acc} = {comb};")
        g.emit(f"if (tnb_lane == 0) {sc}[{row} * {NW} + tnb_warp] = {acc};")
        g.ind -= 1
        g.emit("}")
        accs.append((red, sc, dt))
    g.emit("__syncthreads();  // codegen-internal: the warps' partials in the reduction scratch are read by the "
              "owner of each output")
    o = g.new("o")
    g.emit(f"// output k -> thread k % {g.T} (the partition of the [{R}, 1] result): combine the {NW} warps' "
              "partials in warp order")
    g.emit(f"for (int {o} = tnb_tid; {o} < {R}; {o} += {g.T}) {{")
    g.ind += 1
    for red, sc, dt in accs:
        acc = g.new("red")
        w = g.new("w")
        g.emit(f"{C.VALUE_C[dt]} {acc} = {sc}[{o} * {NW}];")
        comb = exprs.reduce_combine(g, red.op, dt, acc, f"{sc}[{o} * {NW} + {w}]")
        g.emit(f"for (int {w} = 1; {w} < {NW}; ++{w}) {acc} = {comb};")
        g.pre[id(red)] = acc
    vectors.masked(g, mask, At(o, 0, None, None, True), domain,
                lambda at: write(at, exprs.elem_value(g, value, at), value.type.dtype))
    g.pre = saved
    g.ind -= 1
    g.emit("}")


def coop_sweep(g, domain, value, reds, write, mask):
    R, Cc = domain
    n_out = R * Cc
    base, nw, S, o = g.new("base"), g.new("nw"), g.new("S"), g.new("o")
    g.emit(f"// outputs owned by the partition (output k -> thread k % {g.T}); the lanes of the owning")
    g.emit("// warp split each output's row, then combine with warp shuffles (no barrier needed)")
    g.emit(f"for (int {base} = 0; {base} < {n_out}; {base} += {g.T}) {{")
    g.ind += 1
    g.emit(f"const int {nw} = min(32, max(0, {n_out} - {base} - tnb_warp * 32));  // outputs this warp owns")
    g.emit(f"if ({nw} > 0) {{")
    g.ind += 1
    g.emit(f"int {S} = 1; while ({S} < {nw}) {S} <<= 1;  // lanes l, l + {S}, ... share output l")
    g.emit(f"const int {o} = {base} + tnb_warp * 32 + (tnb_lane & ({S} - 1));")
    g.emit(f"const bool {o}_mine = (tnb_lane & ({S} - 1)) < {nw};")
    saved = dict(g.pre)
    for red in reds:
        x = red.x
        xr = exprs.region(g, x)
        dt = red.type.dtype
        acc = g.new("red")
        kk = g.new("k")
        g.emit(f"{C.VALUE_C[dt]} {acc} = {exprs.reduce_ident(g, red.op, dt)};")
        if red.axis == 1:
            okc = f"{o}_mine && {o} >= {xr[0]} && {o} < {xr[1]}"
            lo, hi, pos = xr[2], xr[3], (o, kk)
        else:
            okc = f"{o}_mine && {o} >= {xr[2]} && {o} < {xr[3]}"
            lo, hi, pos = xr[0], xr[1], (kk, o)
        g.emit(f"if ({okc}) for (int {kk} = {lo} + tnb_lane / {S}; {kk} < {hi}; {kk} += 32 / {S}) {{")
        g.ind += 1
        v = exprs.ev(g, x, At(pos[0], pos[1], None, None, False))
        g.emit(f"{acc} = {exprs.reduce_combine(g, red.op, dt, acc, C.convert(v, x.type.dtype, dt))};")
        g.ind -= 1
        g.emit("}")
        off = g.new("off")
        comb = exprs.reduce_combine(g, red.op, dt, acc, f"__shfl_xor_sync(0xffffffffu, {acc}, {off})")
        g.emit(f"for (int {off} = {S}; {off} < 32; {off} <<= 1) {acc} = {comb};")
        g.pre[id(red)] = acc
    g.emit("if (tnb_lane < " + nw + ") {")
    g.ind += 1
    i, j = (o, 0) if Cc == 1 else (0, o)
    vectors.masked(g, mask, At(i, j, None, None, True), domain,
                lambda at: write(at, exprs.elem_value(g, value, at), value.type.dtype))
    g.pre = saved
    g.ind -= 1
    g.emit("}")
    g.ind -= 1
    g.emit("}")
    g.ind -= 1
    g.emit("}")
