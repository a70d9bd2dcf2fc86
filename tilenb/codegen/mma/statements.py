"""Tile statements on the tensor cores: routes, loop pipelines and fragment sweeps.

Guarantees: `mma_prepare(g)` reads the analysis' routes, scratch offsets and pipelined loops
(`g.low`) and raises for a statement no path can lower, before any code; `mma_stmt(g, s, tv)`
writes a statement the analysis routed to the tensor cores (its dots into fragments or
scratch, the rest evaluated on the fragments) and returns False for one the generic path
writes; `mma_loop_begin` / `mma_loop_end` open and close a loop's double buffers or (sm_90) its
streamed ring (`sm90.streamed`); `mma_min_blocks` is the `__launch_bounds__` minimum the
register tiles leave room for.
"""
from __future__ import annotations

from typing import Dict, List, Tuple

from ... import ir
from ...analysis import lowering as L
from ...analysis.lowering import LoopPipe, Route, Stage
from ...analysis.mma_tiles import MmaLayout, RowLayout, grid_layout, packed, register_words, shape2

from .. import ctypes_ as C
from ..emitter import is_int, swz_c
from ..generic import exprs, masks, vectors
from ..sm90 import streamed
from ..values import At

from . import accumulate
from . import fragments as frags

def _columns_adjacent(loc) -> bool:
    """Whether a window's columns are adjacent in memory (its last range is the base's last
    dimension): a fragment pair (two adjacent columns) is then one 4-byte word of 2-byte data."""
    rngs = [k for k, en in enumerate(loc.entries) if en[0] == "rng"]
    return bool(rngs) and rngs[-1] == len(loc.entries) - 1


def mma_prepare(g):
    """Read the analysis' routes, staging buffers and pipelined loops (`g.low`,
    tilenb/analysis/lowering.py); raise for a statement none can lower."""
    low = g.low
    g.lay_pre: Dict[int, Tuple[str, object]] = {}
    g.dot_scratch: Dict[int, Tuple[str, int]] = {}
    g.stages: Dict[int, Stage] = low.stages
    g.mma_pipes: Dict[int, LoopPipe] = low.pipes
    g.mma_live_loops: Dict[int, dict] = {}
    g.mma_early_done: set = set()        # streamed loops whose ring mma_ring_early set up
    g.W = g.T // 32
    skip = {id(t) for s in ir.walk_stmts(g.kir.body) if isinstance(s, ir.For) and id(s) in low.gemm
            for t in ir.walk_stmts(s.body)}
    for s in ir.walk_stmts(g.kir.body):
        if id(s) not in skip and id(s) in low.routes:
            mma_route(g, s)               # a statement no path can lower fails here, before any code


def mma_min_blocks(g) -> str:
    """`, n` for __launch_bounds__: as many CTAs an SM as the register tiles on the mma row
    layout leave room for (their 32-bit registers plus 16 for the rest, under the cap of n
    CTAs of this size on an SM's registers, `Target.regs_per_sm`); empty when the kernel has none (ptxas then uses up to
    255 registers a thread, holding loop invariants, which costs CTAs an SM)."""
    words = 0
    for k, lay in g.layouts.items():
        if isinstance(lay, RowLayout) or (isinstance(lay, MmaLayout) and lay.rows_mode):
            t = g.plan.tiles.get(k)
            if t is not None and t.space == "registers":
                words += register_words(t.sym.type.shape, t.sym.type.dtype, g.W)
    if not words:
        return ""
    for mb in (4, 3, 2):
        cap = min(255, (g.target.regs_per_sm // (g.T * mb)) // 8 * 8)
        if words + 16 <= cap:
            return f", {mb}"
    return ""


def mma_route(g, s) -> Route:
    r = g.low.route(s)
    if r.error is not None:
        g.fail(r.error, s)
    return r


def mma_stmt(g, s, tv) -> bool:
    """Write a tile statement that meets the tensor cores; False: the generic path writes it
    (after this has computed its scratch dots, which `ev` then reads)."""
    r = mma_route(g, s)
    if r.lay is None and not r.scratch:
        return False
    for d in r.scratch:
        mma_dot_to_scratch(g, d)
    if r.lay is None:
        return False
    mma_frag_stmt(g, s, tv, r)
    return True


def mma_early_rings(g, body) -> Dict[int, List[ir.For]]:
    """Streamed loops of this block whose ring is set up before earlier statements
    (`lowering.early_rings`: index in `body` -> the loops to set up before that statement)."""
    if getattr(g, "stream", None) is None:
        return {}
    return L.early_rings(body, g.stream.rings)


def mma_ring_early(g, s: ir.For):
    """Set up the ring of streamed loop `s` here (mma_early_rings chose the place)."""
    lo = exprs.scalar_as(g, s.lo, "index")
    hi = exprs.scalar_as(g, s.hi, "index")
    g.emit(f"// the ring of the loop at line {s.span.line + g.line_offset}, set up ahead of the statements before it")
    g.mma_live_loops[id(s)] = streamed.loop_begin(g, s, g.stream.rings[id(s)], g.cname(s.var), lo, hi)
    g.mma_early_done.add(id(s))


def mma_loop_begin(g, s: ir.For, var: str, lo: str, hi: str):
    """Before a native `for`: the turn counter of its double-buffered stagings (or, for a loop
    streamed on sm_90, its ring: sm90.streamed; already set up when mma_ring_early did)."""
    if id(s) not in g.mma_pipes:
        return
    if id(s) in g.mma_early_done:       # its ring was set up ahead (mma_ring_early)
        g.mma_early_done.discard(id(s))
        streamed.loop_pingpong_start(g, g.mma_live_loops[id(s)])
        return
    if g.paths.loop(s) == "streamed attention on wgmma":
        g.mma_live_loops[id(s)] = streamed.loop_begin(g, s, g.stream.rings[id(s)], var, lo, hi)
        streamed.loop_pingpong_start(g, g.mma_live_loops[id(s)])
        return
    it = g.new("tnb_it")
    g.emit(f"int {it} = 0;  // turns done: the parity of the double-buffered tensor-core operands")
    g.mma_live_loops[id(s)] = {"it": it, "hi": hi, "var": var, "step": s.step, "left": None}


def mma_loop_end(g, s: ir.For):
    """After a native `for`: a streamed loop's deferred product retires (sm90.streamed)."""
    live = g.mma_live_loops.get(id(s))
    if live is not None and "ring" in live:
        streamed.loop_end(g, live)


def mma_frag_stmt(g, s, tv, r: Route):
    lay, domain, value = r.lay, r.domain, r.value
    M, N = domain
    loc = None
    if isinstance(s, ir.Assign) and not isinstance(s.target, ir.Ref):
        loc = exprs.loc_of(g, s.target)
        if loc is None:
            g.fail("a store into a window of a register tile", s)
    elif isinstance(s, ir.Assign):
        tv = g.tile_of(s.target.sym)
    # a statement that includes a folded one (lowering.fold_pairs) reads that one's operands too
    fence = any(id(x) in g.plan.shared_partition for x in (s, r.folds) if x is not None)
    if fence:
        g.emit(f"__syncthreads();  // codegen-internal: this statement sweeps {frags.FRAG_NOTE}, not the partition "
                  "the barrier analysis assumes for its shared-memory operands")
    tile_value = isinstance(value.type, ir.TileT)
    if tile_value:
        vr = exprs.name_region(g, exprs.broadcast_region(g, exprs.region(g, value), value.type.shape, domain))
        exprs.prepare_regions(g, value)
    else:
        vr = (0, M, 0, N)
    if loc is not None:
        bounds = exprs.loc_bounds(g, loc, False)
        mask = exprs.name_region(g, exprs.intersect(g, vr, bounds)) if tile_value else bounds
    else:
        mask = None
    in_regs = tv is not None and loc is None and tv.space == "registers"
    if in_regs and tv.layout != lay:
        g.fail("a register tile assigned in a layout other than its own", s)
    added: List[int] = []
    skip_sweep = False
    frag = list(r.frag)
    red_dot = any(isinstance(x, ir.Reduce) and any(isinstance(y, ir.Dot) for y in ir.walk_expr(x.x))
                  for x in ir.walk_expr(value)) if tile_value else False
    direct = (in_regs and isinstance(lay, MmaLayout) and tv.dtype == "f32" and len(frag) == 1
              and not red_dot and not _refs(g, frag[0], tv.sym))
    d0 = frag[0] if frag else None
    if direct and isinstance(value, ir.Binary) and value.op == "+" and (value.a is d0 or value.b is d0):
        # t = x + dot(a, b): x into t, then the tensor cores accumulate onto it
        x = value.a if value.b is d0 else value.b
        g.emit(f"// {tv.sym.name} = (the rest) + dot: the rest first, then mma.sync accumulates onto {tv.cname}")
        if not (isinstance(x, ir.Ref) and x.sym is tv.sym):
            def sweep_rest():
                added.extend(_hoist_reductions(g, x, lay))
                _sweep_into(g, s, tv, lay, x, None, domain)
            masks.split(g, s, x, sweep_rest)   # a where of the rest, decided per tile: one sweep per case
        accumulate.mma_accumulate(g, d0, tv.cname, lay)
        frag, skip_sweep = [], True
    elif direct and value is d0:
        frags.frag_fill(g, tv.cname, lay)
        accumulate.mma_accumulate(g, d0, tv.cname, lay)
        frag, skip_sweep = [], True
    elif direct and not _refs(g, value, tv.sym):
        frags.frag_fill(g, tv.cname, lay)
        accumulate.mma_accumulate(g, d0, tv.cname, lay)
        g.lay_pre[id(d0)] = (tv.cname, lay)
        added.append(id(d0))
        frag = []
    for d in frag:
        arr = g.new("frag")
        g.emit(f"float {arr}[{lay.slots}];  // {frags.FRAG_NOTE}: dot at line {d.span.line + g.line_offset}")
        frags.frag_fill(g, arr, lay)
        accumulate.mma_accumulate(g, d, arr, lay)
        g.lay_pre[id(d)] = (arr, lay)
        added.append(id(d))
    if not skip_sweep:
        def sweep():
            added.extend(_hoist_reductions(g, value, lay))
            if loc is not None:
                _sweep_window(g, s, loc, lay, value, mask, domain)
            elif tv.space == "registers":
                _sweep_into(g, s, tv, lay, value, None, domain)
            else:
                _sweep_shared(g, s, tv, lay, value, domain)
        masks.split(g, s, value, sweep)     # a where the analysis decides per tile: one sweep per case
    if loc is None and tv is not None:
        n = tv.cname
        g.emit(f"{n}_r0 = {vr[0]}; {n}_r1 = {vr[1]}; {n}_c0 = {vr[2]}; {n}_c1 = {vr[3]};")
    for k in added:
        g.lay_pre.pop(k, None)
    if fence:
        g.emit("__syncthreads();  // codegen-internal: (the same, after the statement)")


def _pair_source(g, value, dtype, domain):
    """The Loc of `value` when it is a slice of a global tensor of `dtype` read at the sweep's
    own coordinates with its columns adjacent in memory (a fragment pair is then one 4-byte
    word of the tensor); None otherwise."""
    if not isinstance(value, ir.Slice) or shape2(value.type.shape) != tuple(domain):
        return None
    loc = exprs.loc_of(g, value)
    if loc is None or loc.kind != "global" or loc.dtype != dtype:
        return None
    return loc if _columns_adjacent(loc) else None


def _in_registers(g, e) -> bool:
    """Whether e reads only scalars, constants and register tiles (so it may be evaluated at any
    fragment element, outside every valid region, without a memory access)."""
    for x in ir.walk_expr(e):
        if isinstance(x, (ir.Slice, ir.Element)):
            return False
        if isinstance(x, ir.Ref) and isinstance(x.type, ir.TileT):
            tv = g.tile_of(x.sym)
            if tv is None or tv.space != "registers":
                return False
    return True


def _refs(g, e, sym) -> bool:
    return any(isinstance(x, ir.Ref) and x.sym is sym for x in ir.walk_expr(e))


def _sweep_into(g, s, tv, lay, value, mask, domain):
    vdt = value.type.dtype
    if packed(lay, tv.dtype):
        if vdt not in C.F32_FAMILY:
            g.fail(f"a {vdt} value stored into the {tv.dtype} register tile '{tv.sym.name}'", s)
        pack = C.pack2(tv.dtype)
        loc = _pair_source(g, value, tv.dtype, domain)

        def body(ats):
            a0, a1 = ats
            v0 = C.convert(exprs.elem_value(g, value, a0, domain), vdt, "f32")
            v1 = C.convert(exprs.elem_value(g, value, a1, domain), vdt, "f32")
            dst = f"{tv.cname}[({a0.slot}) >> 1]"
            if loc is not None:      # the pair's two elements are adjacent in the tensor
                rg, shape = exprs.region(g, value), shape2(loc.shape)
                conds = [exprs.in_region(g, rg, a.i, a.j, shape) for a in ats]
                if False not in conds:
                    p = g.new("pr")
                    g.emit(f"const {C.STORE_C[loc.dtype]}* const {p} = {loc.ptr} + {loc.index(a0.i, a0.j)};")
                    both = " && ".join(c for c in conds if c is not True)
                    g.emit(f"if ({both + ' && ' if both else ''}(((unsigned long long){p}) & 3ull) == 0) "
                              f"{dst} = *(const unsigned*){p};  // the pair as one 4-byte load")
                    g.emit(f"else {dst} = {pack}({v0}, {v1});")
                    return
            g.emit(f"{dst} = {pack}({v0}, {v1});")
        frags.frag_sweep(g, lay, body, pairs=True)
        return

    def body(at):
        g.emit(f"{tv.cname}[{at.slot}] = {C.convert(exprs.elem_value(g, value, at, domain), vdt, tv.dtype)};")
    frags.frag_sweep(g, lay, body)


def _sweep_shared(g, s, tv, lay, value, domain):
    vdt = value.type.dtype
    N = domain[1]

    def body(at):
        idx = f"({at.i}) * {N} + ({at.j})"
        idx = swz_c(tv.swz, idx)
        line = f"{tv.cname}[{idx}] = {C.store_bits(exprs.elem_value(g, value, at, domain), vdt, tv.dtype)};"
        g.emit(("if (tnb_lane % 4 == 0) " if isinstance(lay, RowLayout) else "") + line)
    frags.frag_sweep(g, lay, body)


def _sweep_window(g, s, loc, lay, value, mask, domain):
    """Store the value at this thread's fragment elements into a window of a tensor or shared tile.

    On the mma.sync grid layout: a division by a row-invariant divisor (`acc / l`) runs as
    x * (1 / d) when every row's d allows it (`tnb_rcp_ok`, within spec 17's f32 bound), the
    reciprocal computed once a row; and a 2-byte element type is stored a fragment pair (two
    adjacent columns) at a time, as one 4-byte store where both are in the window and the
    address is 4-byte aligned (each element alone otherwise)."""
    vdt = value.type.dtype
    grid = isinstance(lay, MmaLayout)
    pairs = grid and loc.kind == "global" and C.itemsize(loc.dtype) == 2 and _columns_adjacent(loc)

    def elem(at):
        return C.store_bits(exprs.elem_value(g, value, at, domain), vdt, loc.dtype)

    def write(at):
        g.emit(f"{loc.ptr}[{loc.index(at.i, at.j)}] = {elem(at)};")

    def body(at):
        if isinstance(lay, RowLayout):
            g.emit("if (tnb_lane % 4 == 0) {  // the four lanes of a quad hold the same row values")
            g.ind += 1
            vectors.masked(g, mask, at, domain, write)
            g.ind -= 1
            g.emit("}")
        else:
            vectors.masked(g, mask, at, domain, write)

    def pair_body(ats):
        a0, a1 = ats
        conds = [exprs.in_region(g, mask, a.i, a.j, domain) if mask is not None else True for a in ats]
        if False in conds:            # a column known to be outside: element by element
            for a in ats:
                vectors.masked(g, mask, a, domain, write)
            return
        p = g.new("pw")
        g.emit(f"{C.STORE_C[loc.dtype]}* const {p} = {loc.ptr} + {loc.index(a0.i, a0.j)};")
        both = " && ".join(c for c in conds if c is not True)
        aligned = f"(((unsigned long long){p}) & 3ull) == 0"
        g.emit(f"if ({both + ' && ' if both else ''}{aligned}) {{")
        g.ind += 1
        if vdt in C.F32_FAMILY and loc.dtype in ("bf16", "f16"):    # one cvt for both (prelude)
            pack = C.pack2(loc.dtype)
            v0, v1 = (C.convert(exprs.elem_value(g, value, a, domain), vdt, "f32") for a in ats)
            g.emit(f"*(unsigned*){p} = {pack}({v0}, {v1});")
        else:
            g.emit(f"*(unsigned*){p} = (unsigned)({elem(a0)}) | ((unsigned)({elem(a1)}) << 16);")
        g.ind -= 1
        g.emit("} else {")
        g.ind += 1
        for k, a in enumerate(ats):
            if conds[k] is not True:
                g.emit(f"if ({conds[k]}) {p}[{k}] = {elem(a)};")
            else:
                g.emit(f"{p}[{k}] = {elem(a)};")
        g.ind -= 1
        g.emit("}")

    def sweep():
        if pairs:
            frags.frag_sweep(g, lay, pair_body, pairs=True)
        else:
            frags.frag_sweep(g, lay, body)

    divs = [d for d in (vectors.invariant_divisions(g, value, domain) if grid else []) if _in_registers(g, d.b)]
    if not divs:
        sweep()
        return
    ok = g.new("rcpok")
    rcps = [g.new("rcp") for _ in divs]
    rows = 2 * lay.MT                  # the fragment rows this lane holds: (mi, half)
    g.emit(f"bool {ok} = true;  // x * (1 / d) stands for x / d at every row's divisor d (tnb_rcp_ok)")
    for r in rcps:
        g.emit(f"float {r}[{rows}];  // 1 / d at each of this lane's fragment rows")
    wr, wc = g.new("wr"), g.new("wc")
    g.emit(f"const int {wr} = (tnb_warp / {lay.WN}) * {16 * lay.MT}, {wc} = (tnb_warp % {lay.WN}) * {8 * lay.NT};")
    for mi in range(lay.MT):
        for h in range(2):
            # the row's first element this lane holds: the divisor is the same along the row
            at = At(f"({wr} + {mi * 16} + (tnb_lane >> 2) + {h * 8})", f"({wc} + (tnb_lane & 3) * 2)",
                    f"{mi * lay.NT * 4 + h * 2}", lay, True)
            for d, r in zip(divs, rcps):
                dv = C.convert(exprs.ev(g, d.b, exprs.child_at(g, d, d.b, at)), d.b.type.dtype, "f32")
                g.emit(f"{ok} = {ok} & tnb_rcp_ok({dv}); {r}[{mi * 2 + h}] = 1.0f / {dv};")
    saved = dict(g.fast_div)
    g.emit(f"if ({ok}) {{")
    g.ind += 1
    for d, r in zip(divs, rcps):
        g.fast_div[id(d)] = (lambda at, r=r:
                                f"{r}[(({at.slot}) / {lay.NT * 4}) * 2 + ((({at.slot}) & 3) >> 1)]")
    sweep()
    g.fast_div = dict(saved)
    g.ind -= 1
    g.emit("} else {")
    g.ind += 1
    sweep()
    g.ind -= 1
    g.emit("}")


def _hoist_reductions(g, value, lay) -> List[int]:
    """Compute, before the sweep, every row reduction the value reads at this lane's rows; `ev`
    then reads them from registers. Returns the keys added to lay_pre."""
    if not isinstance(value.type, ir.TileT):
        return []
    if not (isinstance(lay, RowLayout) or (isinstance(lay, MmaLayout) and lay.rows_mode)):
        return []
    M = lay.M
    found: List[ir.Reduce] = []
    elementwise = (ir.Unary, ir.Binary, ir.Math, ir.Convert)

    def visit(e, ok):
        if isinstance(e, ir.Reduce):
            x = e.x
            if (ok and e.axis == 1 and len(x.type.shape) == 2 and shape2(x.type.shape)[0] == M
                    and shape2(x.type.shape)[1] % 8 == 0):
                visit(x, True)
                if not any(r is e for r in found):
                    found.append(e)
            return
        if isinstance(e, elementwise) and isinstance(e.type, ir.TileT):
            P = shape2(e.type.shape)
            for c in ir.sub_exprs(e):
                if isinstance(c.type, ir.TileT):
                    visit(c, ok and shape2(c.type.shape)[0] == P[0])
    visit(value, shape2(value.type.shape)[0] == M)
    added = []
    for red in found:
        arr = mma_row_reduce(g, red, M)
        g.lay_pre[id(red)] = (arr, RowLayout(M, g.W))
        added.append(id(red))
    return added


def mma_row_reduce(g, red: ir.Reduce, M: int) -> str:
    x = red.x
    Nx = shape2(x.type.shape)[1]
    xl = MmaLayout(M, Nx, g.W, g.W, 1)
    rl = RowLayout(M, g.W)
    dt, xdt = red.type.dtype, x.type.dtype
    arr = g.new("rr")
    xr = exprs.region(g, x)
    exprs.prepare_regions(g, x)
    lo, hi = xr[2], xr[3]
    static_full = is_int(lo) and is_int(hi) and lo <= 0 and hi >= Nx
    g.emit(f"{C.VALUE_C[dt]} {arr}[{rl.slots}];  // row{red.op} of this lane's rows (line {red.span.line + g.line_offset}): "
              "its elements, then the quad")

    def body(masked: bool):
        mi, h, ni, c = g.new("mi"), g.new("h"), g.new("ni"), g.new("c")
        g.emit("#pragma unroll")
        g.emit(f"for (int {mi} = 0; {mi} < {rl.MT}; ++{mi}) {{")
        g.ind += 1
        g.emit("#pragma unroll")
        g.emit(f"for (int {h} = 0; {h} < 2; ++{h}) {{")
        g.ind += 1
        acc = g.new("red")
        i = g.new("i")
        # independent partial results (by column pair and block parity), combined at the end:
        # four short dependency chains instead of one of 2 NT steps
        parts = 4 if xl.NT % 2 == 0 else 2
        g.emit(f"const int {i} = (tnb_warp * {rl.MT} + {mi}) * 16 + (tnb_lane >> 2) + {h} * 8;")
        ident = exprs.reduce_ident(g, red.op, dt)
        g.emit(f"{C.VALUE_C[dt]} {acc}[{parts}] = {{{', '.join([ident] * parts)}}};")
        g.emit("#pragma unroll")
        g.emit(f"for (int {ni} = 0; {ni} < {xl.NT}; ++{ni}) {{")
        g.ind += 1
        g.emit("#pragma unroll")
        g.emit(f"for (int {c} = 0; {c} < 2; ++{c}) {{")
        g.ind += 1
        j = g.new("j")
        g.emit(f"const int {j} = {ni} * 8 + (tnb_lane & 3) * 2 + {c};")
        slot = f"(({mi} * {xl.NT} + {ni}) * 4 + {h} * 2 + {c})"
        v = C.convert(exprs.ev(g, x, At(i, j, slot, xl, True)), xdt, dt)
        part = f"{acc}[{'((' + ni + ') & 1) * 2 + ' if parts == 4 else ''}{c}]"
        comb = exprs.reduce_combine(g, red.op, dt, part, v)
        if masked:
            g.emit(f"if ({j} >= {lo} && {j} < {hi}) {part} = {comb};")
        else:
            g.emit(f"{part} = {comb};")
        g.ind -= 1
        g.emit("}")
        g.ind -= 1
        g.emit("}")
        pair = [exprs.reduce_combine(g, red.op, dt, f"{acc}[{2 * q}]", f"{acc}[{2 * q + 1}]") for q in range(parts // 2)]
        total = pair[0] if parts == 2 else exprs.reduce_combine(g, red.op, dt, f"({pair[0]})", f"({pair[1]})")
        g.emit(f"{arr}[{mi} * 2 + {h}] = {total};")
        g.ind -= 1
        g.emit("}")
        g.ind -= 1
        g.emit("}")

    if static_full:
        body(False)
    else:
        g.emit(f"if ({lo} <= 0 && {hi} >= {Nx}) {{  // every column valid")
        g.ind += 1
        body(False)
        g.ind -= 1
        g.emit("} else {")
        g.ind += 1
        body(True)
        g.ind -= 1
        g.emit("}")
    k = g.new("k")
    g.emit("#pragma unroll")
    g.emit(f"for (int {k} = 0; {k} < {rl.slots}; ++{k}) {{  // the quad's four lanes share each row")
    g.ind += 1
    for off in (1, 2):
        comb = exprs.reduce_combine(g, red.op, dt, f"{arr}[{k}]", f"__shfl_xor_sync(0xffffffffu, {arr}[{k}], {off})")
        g.emit(f"{arr}[{k}] = {comb};")
    g.ind -= 1
    g.emit("}")
    return arr


def mma_dot_to_scratch(g, d: ir.Dot):
    M, N = shape2(d.type.shape)
    lay = grid_layout(M, N, g.W)
    arr = g.new("frag")
    g.emit(f"// dot at line {d.span.line + g.line_offset} on tensor cores, into a shared f32 scratch tile "
              "that the statement reads")
    g.emit(f"float {arr}[{lay.slots}];  // {frags.FRAG_NOTE}")
    frags.frag_fill(g, arr, lay)
    accumulate.mma_accumulate(g, d, arr, lay)
    ptr = g.new("dsc")
    off = g.low.scratch_off(d)
    g.emit(f"float* const {ptr} = (float*)(tnb_smem + {off});  // [{M}, {N}] f32 scratch")
    g.emit("__syncthreads();  // codegen-internal: the dot scratch's previous readers are done")

    def put(at):
        g.emit(f"{ptr}[({at.i}) * {N} + ({at.j})] = {arr}[{at.slot}];")
    frags.frag_sweep(g, lay, put)
    g.emit("__syncthreads();  // codegen-internal: the dot scratch is written; every thread may read it")
    g.dot_scratch[id(d)] = (ptr, N)
