"""Where a tensor-core operand is read from: ldmatrix sources, staged and double-buffered copies.

Guarantees: `operand_source` gives each dot operand its source (a shared tile through its
swizzle, a register tile on the row layout, a staged scratch tile, or an expression read
element by element); `stage_now` / `stage_pipelined` copy a tensor slice into its staging buffer with
16-byte `cp.async` (zero-filled outside the tensor) now, or a turn ahead in a double buffer;
`wgmma_readable` says whether a shared tile is laid out as wgmma reads it by descriptor.
"""
from __future__ import annotations

from typing import List, Tuple

from ... import ir
from ...analysis.lowering import Stage
from ...analysis.mma_tiles import MmaLayout, packed, shape2

from .. import ctypes_ as C
from ..emitter import is_int
from ..generic import exprs


def wgmma_readable(g, sym) -> bool:
    """Whether wgmma may read shared tile `sym` by descriptor: every write to it is a whole-tile
    statement (then `async_proxy_fence` follows each), none through a window, an element or
    a view, and no view of it exists."""
    hit = g.wgmma_ok.get(id(sym))
    if hit is None:
        hit = True
        for st in ir.walk_stmts(g.kir.body):
            if isinstance(st, ir.Let) and st.sym.kind == "view" and any(
                    ir.named_sym(x) is sym for x in ir.walk_expr(st.value)):
                hit = False
            elif isinstance(st, (ir.Assign, ir.Atomic)) and not isinstance(st.target, ir.Ref) \
                    and ir.named_sym(st.target) is sym:
                hit = False
            elif isinstance(st, ir.ClusterReduce) and st.target.sym is sym:
                hit = False
        g.wgmma_ok[id(sym)] = hit
    return hit


def operand_source(g, d: ir.Dot, op, role: str, lay: MmaLayout):
    """('regs', TileVar) | ('smem', C pointer, row pitch, swizzle or None) | ('elem',)."""
    dt = op.type.dtype
    R, Cc = shape2(op.type.shape)
    if id(op) in g.stages and (isinstance(op, ir.Ref) or (isinstance(op, ir.Slice) and op.base.kind == "tensor")):
        return ("stage", g.stages[id(op)])
    if isinstance(op, ir.Ref):
        tv = g.tile_of(op.sym)
        if tv is None:
            return ("elem",)
        if tv.space == "registers":
            tl = tv.layout
            if (role == "a" and isinstance(tl, MmaLayout) and tl.rows_mode and lay.rows_mode and tl.M == lay.M
                    and packed(tl, tv.dtype)):
                return ("regs", tv)
            return ("elem",)
        if tv.dtype == dt and tuple(tv.shape) == (R, Cc) and tv.rank == 2:
            sw = getattr(tv, "swz", None)
            if sw is None or (1 << sw.base) % 8 == 0:
                return ("smem", tv.cname, Cc, sw)
    return ("elem",)


def stage_now(g, stages: List[Tuple[object, Stage]]):
    """Copy tensor slices into their scratch buffers where the statement needs them."""
    g.emit("__syncthreads();  // codegen-internal: staging scratch: the previous reads of these bytes are done")
    for op, st in stages:
        _copy_tile(g, st.src or op, st, g.low.stage_off(st), asynchronous=True)
    g.emit("tnb_cp_commit(); tnb_cp_wait<0>();")
    g.emit("__syncthreads();  // codegen-internal: the staged scratch tile is visible to every warp")


def stage_pipelined(g, op, st: Stage) -> str:
    """The double-buffered staging of `op` in its loop; returns the C pointer of this turn's tile."""
    lp = g.mma_live_loops[id(st.loop)]
    pipe = g.mma_pipes[id(st.loop)]
    P = len(pipe.stages)
    it = lp["it"]
    base = g.low.stage_off(st)
    cur = g.new("stg")
    g.emit(f"// {(st.src or op).base.name}[...] in a double-buffered staging scratch: this turn's tile was copied during the "
              "previous turn (cp.async); the next turn's copy starts below")
    g.emit(f"unsigned char* const {cur} = tnb_smem + {base} + ({it} & 1) * {st.bytes};")
    g.emit(f"if ({it} == 0) {{  // the first turn: nothing is in flight for this operand yet")
    g.ind += 1
    g.emit("tnb_cp_wait<0>();")
    g.emit("__syncthreads();  // codegen-internal: staging scratch: no warp still reads it from a previous entry")
    _copy_tile(g, st.src or op, st, f"{base}", asynchronous=True)
    g.emit("tnb_cp_commit(); tnb_cp_wait<0>();")
    g.ind -= 1
    g.emit("} else {")
    g.emit(f"  tnb_cp_wait<{P - 1}>();  // this turn's group: {P - 1} later group(s) may still be in flight")
    g.emit("}")
    g.emit("__syncthreads();  // codegen-internal: the staged scratch tile is visible to every warp, and every warp "
              "is done with the other buffer")
    nx = g.new("nx")
    var = lp["var"]
    g.emit("{")
    g.ind += 1
    g.emit(f"const long long {nx} = {var} + {lp['step']};")
    g.emit(f"if ({nx} < {lp['hi']}) {{  // the next turn's tile, into the other buffer")
    g.ind += 1
    g.emit(f"const long long {var} = {nx};")
    saved = g.regions
    g.regions = {}
    _copy_tile(g, st.src or op, st, f"{base} + (({it} + 1) & 1) * {st.bytes}", asynchronous=True)
    g.regions = saved
    g.ind -= 1
    g.emit("}")
    g.ind -= 1
    g.emit("}")
    g.emit("tnb_cp_commit();")
    if pipe.stages and pipe.stages[-1] == id(op):
        g.emit(f"++{it};")
    return cur


def _copy_tile(g, op: ir.Slice, st: Stage, off, asynchronous: bool):
    """Copy the tensor slice `op` into scratch at byte offset `off` (int or C text) with rows of
    st.pitch elements: 16-byte cp.async where a chunk is whole and aligned, zeros outside the
    tensor, element copies at a partial edge."""
    loc = exprs.loc_of(g, op)
    b = exprs.loc_bounds(g, loc, False)
    per = st.cols // 8
    nch = st.rows * per
    steps = -(-nch // g.T)
    sb, k, r, c = g.new("sb"), g.new("k"), g.new("r"), g.new("c")
    g.emit(f"const unsigned {sb} = tnb_saddr(tnb_smem + {off});")
    g.emit(f"// {op.base.name}[...] -> scratch [{st.rows}, {st.cols}] {st.dtype}, rows of {st.pitch} elements "
              f"(16-byte chunk k -> thread k % {g.T})")
    stp = g.new("s")
    g.emit("#pragma unroll")
    g.emit(f"for (int {stp} = 0; {stp} < {steps}; ++{stp}) {{")
    g.ind += 1
    g.emit(f"const int {k} = tnb_tid + {stp} * {g.T};")
    if nch % g.T:
        g.emit(f"if ({k} < {nch}) {{")
        g.ind += 1
    g.emit(f"const int {r} = {k} / {per}, {c} = ({k} % {per}) * 8;")
    dst = g.new("dst")
    src = g.new("src")
    st_c = C.STORE_C[st.dtype]
    g.emit(f"const unsigned {dst} = {sb} + ({r} * {st.pitch} + {c}) * 2;")
    g.emit(f"const {st_c}* const {src} = {loc.ptr} + ({loc.index(r, c)});")
    rows = []
    if not (is_int(b[0]) and b[0] <= 0):
        rows.append(f"{r} >= {b[0]}")
    if not (is_int(b[1]) and b[1] >= st.rows):
        rows.append(f"{r} < {b[1]}")
    cols_full = []
    if not (is_int(b[2]) and b[2] <= 0):
        cols_full.append(f"{c} >= {b[2]}")
    if not (is_int(b[3]) and b[3] >= st.cols):
        cols_full.append(f"{c} + 8 <= {b[3]}")
    # the analysis' proof (`Stage.move`, analysis/tc_moves): a run-time address test only where it is short
    aligned = [f"(((unsigned long long){src}) & 15) == 0"] if st.move is None or st.move.checked else []
    full = " && ".join(rows + cols_full + aligned) or "true"
    copy = f"tnb_cp16u({dst}, {src});" if asynchronous else f"tnb_st16u({dst}, *(const uint4*){src});"
    g.emit(f"if ({full}) {copy}")
    empty = []
    if rows:
        empty.append("!(" + " && ".join(rows) + ")")
    if not (is_int(b[2]) and b[2] <= 0):
        empty.append(f"{c} + 8 <= {b[2]}")
    if not (is_int(b[3]) and b[3] >= st.cols):
        empty.append(f"{c} >= {b[3]}")
    empty_c = " || ".join(empty) or "false"
    g.emit(f"else if ({empty_c}) tnb_st16u({dst}, make_uint4(0u, 0u, 0u, 0u));  // outside the tensor: zeros")
    v = g.new("v")
    cond = []
    if not (is_int(b[2]) and b[2] <= 0):
        cond.append(f"{c} + {v} >= {b[2]}")
    if not (is_int(b[3]) and b[3] >= st.cols):
        cond.append(f"{c} + {v} < {b[3]}")
    cc = " && ".join(cond) or "true"
    g.emit(f"else for (int {v} = 0; {v} < 8; ++{v}) tnb_st2u({dst} + {v} * 2, ({cc}) ? {src}[{v}] : ({st_c})0);")
    if nch % g.T:
        g.ind -= 1
        g.emit("}")
    g.ind -= 1
    g.emit("}")


def lane_base(g, src, lane_off):
    """An ldmatrix source with its 32-bit shared base: (..., lane address) for a row-major
    tile, (..., None, tile address) for a swizzled one (the swizzle applies per load)."""
    ptr, sw = src[1], src[3]
    v = g.new("sa")
    if sw is None:
        g.emit(f"const unsigned {v} = tnb_saddr({ptr}) + {lane_off} * 2;  // this lane's row, 32-bit shared address")
        return src + (v,)
    g.emit(f"const unsigned {v} = tnb_saddr({ptr});")
    return src + (None, v)


def describe_source(g, src) -> str:
    if src[0] == "smem":
        return f"shared memory (ldmatrix, rows of {src[2]})"
    if src[0] == "regs":
        return f"the registers of {src[1].sym.name}"
    return "elements (masked)"
