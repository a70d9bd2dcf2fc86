"""Statements and control flow of the generic lowering.

Guarantees: `block(g, body)` writes each statement after its `// line N` comment and the
analysis' barriers before and after it. A tile statement (or a `let` view) goes to
`tiles.cta_stmt`; a loop or `if` whose body has tile statements is written so every thread
reaches the same barriers (uniform condition; a `for` with break/continue some threads take
alone keeps running no-op turns under break/continue flags); a loop the analysis put on
"wgmma TMA pipeline" goes whole to `sm90.gemm.emit`; any other statement is per-thread code
under the current no-op guard. `for<unroll n>` runs whole turns of n copies, then the rest one
at a time; a loop `prefetch.prefetch_candidate` accepts loads its copy a turn ahead.
"""
from __future__ import annotations

from ... import ir
from ...analysis.lowering import compound_value
from ...analysis.mma_tiles import shape2

from .. import ctypes_ as C
from ..mma import statements as mma
from ..plan import contains_cta, is_tile_stmt
from ..sm90 import gemm

from . import cluster, exprs, prefetch, tiles


def block(g, body):
    early = mma.mma_early_rings(g, body)
    top = body is g.kir.body
    for k, s in enumerate(body):
        for loop in early.get(k, ()):
            mma.mma_ring_early(g, loop)       # a streamed loop's first copies, ahead (mma.statements)
        if top and g.cluster_pending is not None and cluster.cluster_needs_finish(g, s):
            cluster.cluster_finish(g)           # the second half of a cluster reduction
        stmt(g, s)


def barriers(g, s, where):
    p = g.plan.positions.get(id(s))
    for b in g.plan.barriers.get(p, ()):
        if b.where == where:
            g.emit(f"__syncthreads();  // barrier ({b.where} line {s.span.line + g.line_offset}): {b.reason}")


def stmt(g, s):
    g.cur_stmt = s
    g.src_comment(s)
    barriers(g, s, "before")
    g.regions = {}
    g.memo = {}
    if is_tile_stmt(s) or (isinstance(s, ir.Let) and s.sym.kind == "view"):
        tiles.cta_stmt(g, s)
        tiles.async_proxy_fence(g, s)
    elif isinstance(s, (ir.For, ir.While, ir.If)) and contains_cta((s,)):
        control(g, s)
    else:
        thread_stmt(g, s)
    g.cur_stmt = s
    barriers(g, s, "after")


# per-thread statements run under the no-op guard
def thread_stmt(g, s):
    gd = g.guard()
    pure = isinstance(s, (ir.Let,)) or (isinstance(s, ir.VarDecl))
    if gd and not pure:
        g.emit(f"if (!({gd})) {{")
        g.ind += 1
        plain_stmt(g, s)
        g.ind -= 1
        g.emit("}")
    else:
        plain_stmt(g, s)


def plain_stmt(g, s):
    if isinstance(s, ir.Let):
        dt = s.sym.type.dtype
        g.emit(f"const {C.VALUE_C[dt]} {g.cname(s.sym)} = {exprs.scalar_as(g, s.value, dt)};")
    elif isinstance(s, ir.VarDecl):
        dt = s.sym.type.dtype
        init = exprs.scalar_as(g, s.value, dt) if s.value is not None else C.zero(dt)
        g.emit(f"{C.VALUE_C[dt]} {g.cname(s.sym)} = {init};")
    elif isinstance(s, ir.Assign):
        scalar_assign(g, s)
    elif isinstance(s, ir.For):
        for_stmt(g, s, cta=False)
    elif isinstance(s, ir.While):
        while_stmt(g, s, cta=False)
    elif isinstance(s, ir.If):
        if_stmt(g, s)
    elif isinstance(s, ir.Break):
        jump(g, s, "break")
    elif isinstance(s, ir.Continue):
        jump(g, s, "continue")
    elif isinstance(s, ir.Return):
        if g.ret_flag:
            g.emit("tnb_ret = true;")
        else:
            g.emit("return;")
    elif isinstance(s, ir.Atomic):
        atomic(g, s)
    else:
        g.fail(f"statement {type(s).__name__}", s)


def if_stmt(g, s):
    """An if whose condition every thread that reaches it evaluates (both kinds of body)."""
    g.emit(f"if ({exprs.scalar(g, s.cond)}) {{")
    g.ind += 1
    block(g, s.then)
    g.ind -= 1
    if s.orelse:
        g.emit("} else {")
        g.ind += 1
        block(g, s.orelse)
        g.ind -= 1
    g.emit("}")


def flag_body(g, s, brk, cnt):
    """A loop turn where threads may break or continue alone: each keeps a break and a continue
    flag, and the body's statements run under both (the turn goes on as a no-op)."""
    g.emit(f"bool {cnt} = false;")
    g.loop_ctx.append({"mode": "flag", "brk": brk, "cnt": cnt, "wrapped": False})
    g.guards.extend([brk, cnt])
    block(g, s.body)
    g.guards.pop()
    g.guards.pop()


def jump(g, s, word):
    if not g.loop_ctx:
        g.fail(f"'{word}' outside a loop", s)
    lc = g.loop_ctx[-1]
    if lc["mode"] == "flag" and id(s) in g.plan.uni.varying_control:
        flag = lc["brk"] if word == "break" else lc["cnt"]
        g.emit(f"{flag} = true;  // this thread's remaining turns are no-ops")
        return
    if lc["wrapped"]:
        if word == "break":
            g.emit(f"{{ {lc['brk']} = true; break; }}")
        else:
            g.emit("break;  // to the end of this turn")
        return
    g.emit(f"{word};")


def control(g, s):
    """A loop or if whose body holds tile statements (its condition is uniform)."""
    if isinstance(s, ir.If):
        if_stmt(g, s)
    elif isinstance(s, ir.For):
        if g.paths.loop(s) == "wgmma TMA pipeline":
            gemm.emit(g, g.gemm, s)   # a GEMM loop on Hopper: TMA + wgmma pipeline
        else:
            for_stmt(g, s, cta=True)
    else:
        while_stmt(g, s, cta=True)


def loop_mode(g, s, cta: bool) -> str:
    """'flag' when some thread may break/continue alone in a loop with tile statements."""
    if not cta:
        return "native"
    for t in own_jumps(g, s.body):
        if id(t) in g.plan.uni.varying_control:
            return "flag"
    return "native"


def own_jumps(g, body):
    out = []
    for t in body:
        if isinstance(t, (ir.Break, ir.Continue)):
            out.append(t)
        elif isinstance(t, ir.If):
            out.extend(own_jumps(g, t.then))
            out.extend(own_jumps(g, t.orelse))
    return out


def for_stmt(g, s: ir.For, cta: bool):
    v = g.cname(s.var)
    lo = exprs.scalar_as(g, s.lo, "index")
    hi = exprs.scalar_as(g, s.hi, "index")
    mode = loop_mode(g, s, cta)
    jumps = own_jumps(g, s.body)
    step = s.step
    g.emit("{")
    g.ind += 1
    hv = g.new("hi")
    g.emit(f"const long long {hv} = {hi};")
    if mode == "flag":
        brk, cnt = g.new("brk"), g.new("cnt")
        g.emit(f"bool {brk} = false;  // some threads may break alone: they run no-op turns")
        g.emit(f"for (long long {v} = {lo}; {v} < {hv}; {v} += {step}) {{")
        g.ind += 1
        flag_body(g, s, brk, cnt)
        g.loop_ctx.pop()
        g.ind -= 1
        g.emit("}")
    elif s.unroll <= 1 and cta and (cand := prefetch.prefetch_candidate(g, s)) is not None:
        prefetch_loop(g, s, v, lo, hv, step, cand)     # a chunked loop: its copy loaded a turn ahead
    elif s.unroll <= 1:
        mma.mma_loop_begin(g, s, v, lo, hv)    # double-buffered tensor-core operands (mma.statements)
        g.emit(f"for (long long {v} = {lo}; {v} < {hv}; {v} += {step}) {{")
        g.ind += 1
        g.loop_ctx.append({"mode": "native", "wrapped": False, "brk": None})
        block(g, s.body)
        g.loop_ctx.pop()
        g.ind -= 1
        g.emit("}")
        mma.mma_loop_end(g, s)                 # a streamed loop's last deferred product (mma.statements)
    else:
        n = s.unroll
        lov, mid, base = g.new("lo"), g.new("mid"), g.new("ib")
        brk = g.new("brk")
        g.emit(f"const long long {lov} = {lo};")
        g.emit(f"// for<unroll {n}>: whole turns of {n} copies, then the rest one at a time")
        g.emit(f"const long long {mid} = {hv} > {lov} ? {lov} + (({hv} - {lov}) / {n * step}) * {n * step} : {lov};")
        g.emit(f"bool {brk} = false;")
        wrap = bool(jumps)
        g.emit(f"for (long long {base} = {lov}; {base} < {mid}; {base} += {n * step}) {{")
        g.ind += 1
        for k in range(n):
            g.emit("do {" if wrap else "{")
            g.ind += 1
            g.emit(f"const long long {v} = {base} + {k * step};")
            g.loop_ctx.append({"mode": "native", "wrapped": wrap, "brk": brk})
            block(g, s.body)
            g.loop_ctx.pop()
            g.ind -= 1
            g.emit("} while (0);" if wrap else "}")
            if wrap:
                g.emit(f"if ({brk}) break;")
        g.ind -= 1
        g.emit("}")
        g.emit(f"if (!{brk}) for (long long {v} = {mid}; {v} < {hv}; {v} += {step}) {{")
        g.ind += 1
        if wrap:
            g.emit("do {")
            g.ind += 1
        g.loop_ctx.append({"mode": "native", "wrapped": wrap, "brk": brk})
        block(g, s.body)
        g.loop_ctx.pop()
        if wrap:
            g.ind -= 1
            g.emit("} while (0);")
            g.emit(f"if ({brk}) break;")
        g.ind -= 1
        g.emit("}")
    g.ind -= 1
    g.emit("}")


def while_stmt(g, s: ir.While, cta: bool):
    mode = loop_mode(g, s, cta)
    brk = cnt = None
    if mode == "flag":
        brk, cnt = g.new("brk"), g.new("cnt")
        g.emit(f"bool {brk} = false;  // some threads may break alone: they run no-op turns")
    g.emit("while (true) {  // the test is re-evaluated every turn")
    g.ind += 1
    g.emit(f"if (!({exprs.scalar(g, s.cond)})) break;")
    if mode == "flag":
        flag_body(g, s, brk, cnt)
    else:
        g.loop_ctx.append({"mode": "native", "wrapped": False, "brk": None})
        block(g, s.body)
    g.loop_ctx.pop()
    g.ind -= 1
    g.emit("}")


def scalar_assign(g, s: ir.Assign):
    t = s.target
    if isinstance(t, ir.Ref):
        dt = t.type.dtype
        val = compound_value(s.op, t, s.value)
        g.emit(f"{g.cname(t.sym)} = {exprs.scalar_as(g, val, dt)};")
        return
    if isinstance(t, ir.Element):
        ptr, idx, inb, dt = exprs.element_addr(g, t)
        val = compound_value(s.op, t, s.value)
        store = C.store_bits(exprs.scalar(g, val), val.type.dtype, dt)
        if inb == "true":
            g.emit(f"{ptr}[{idx}] = {store};")
        else:
            g.emit(f"if ({inb}) {ptr}[{idx}] = {store};")
        return
    g.fail("this assignment", s)


def atomic(g, s: ir.Atomic):
    ptr, idx, inb, dt = exprs.element_addr(g, s.target)
    call = tiles.atomic_call(g, s, f"&{ptr}[{idx}]", exprs.scalar(g, s.value), s.value.type.dtype, dt)
    if inb == "true":
        g.emit(call + ";")
    else:
        g.emit(f"if ({inb}) {call};")


def prefetch_loop(g, s: ir.For, v, lo, hv, step, cand):
    """A loop whose copy `cand` is loaded a turn ahead into registers: before the loop for
    the first turn, then right after each turn's copy for the next one (its loads are in
    flight while the rest of the turn computes). The turn's copy writes the registers into
    the shared tile; everything else is as without the prefetch."""
    t, w, V = cand
    buf, lov, nx = g.new("pf"), g.new("lo"), g.new("nx")
    domain = shape2(t.sym.type.shape)
    steps = -(-(domain[0] * domain[1] // V) // g.T)
    g.prefetch_var = s.var
    g.emit(f"// line {t.span.line + g.line_offset}'s copy of {w.base.name} is loaded a turn ahead, into "
              f"registers ({steps} chunk(s) of {V} a thread), while the turn before it computes")
    g.emit(f"__align__(16) {C.STORE_C[t.sym.type.dtype]} {buf}[{steps}][{V}];")
    g.emit(f"const long long {lov} = {lo};")
    g.emit(f"if ({lov} < {hv}) {{")
    g.ind += 1
    prefetch.emit_prefetch(g, cand, lov, buf)
    g.close()
    g.emit(f"for (long long {v} = {lov}; {v} < {hv}; {v} += {step}) {{")
    g.ind += 1
    g.loop_ctx.append({"mode": "native", "wrapped": False, "brk": None})
    for st in s.body:
        if st is t:
            g.prefetched = (id(t), buf)
            stmt(g, st)
            g.prefetched = None
            g.emit(f"// the next turn's chunks of {w.base.name}, in flight while this turn computes")
            g.emit(f"if ({v} + {step} < {hv}) {{")
            g.ind += 1
            g.emit(f"const long long {nx} = {v} + {step};")
            prefetch.emit_prefetch(g, cand, nx, buf)
            g.close()
        else:
            stmt(g, st)
    g.loop_ctx.pop()
    g.close()
