"""Tensor cores for every f16/bf16 dot (mma.sync m16n8k16), wherever the dot appears.

The CUDA generator (`cuda._Gen`) mixes in `MmaGen`. What it guarantees:

- Every dot with f16/bf16 operands of one type, an f32 result and tile shapes M, N, K multiples
  of 16, 8, 16 (`tilenb.analysis.mma_tiles.mma_dot`) runs on tensor cores, whatever surrounds it:
  * at the statement's own coordinates (`s = dot_t(q, k) * scale`, `acc = acc * r + dot(p, v)`,
    `acc += dot(a, b)`, `C[...] = dot(a, b) + c`): into m16n8 accumulator fragments in registers
    (the target's own registers when it is an f32 register tile and the value allows), and the
    rest of the statement is evaluated on those fragments, element by element, in their layout;
  * anywhere else (`rowsum(dot(a, b))`, `transpose(dot(a, b))`): into an f32 scratch tile in
    shared memory first, which the statement then reads like any tile.
  Invalid elements (spec section 8) read as 0: operand fragments are masked along K wherever the
  K range valid in both operands is not the whole of K; invalid rows of a and columns of b only
  reach output elements that are themselves invalid, whose values nothing observes.
- Operands: tiles in shared memory (and staged let views) are read with `ldmatrix` (`.trans` for
  b in [K, N] form), through the tile's XOR swizzle when the analysis gave it one; an f16/bf16
  register tile on the mma row layout (`mma_tiles`) is already in the A-operand layout and is
  read from registers; a tensor slice (or a `let` view of one that only tensor-core dots read:
  the `let` then copies nothing) is staged into a shared scratch tile whose rows are padded
  to an odd number of 16-byte units (no bank conflicts for ldmatrix), with 16-byte `cp.async`
  copies (elements outside the tensor are zero-filled, never read). In a loop whose turns run
  every statement (no break/continue/return), whose slice start depends only on the loop variable
  and on values fixed during the loop, the staging is double-buffered: the next turn's tile is
  copied while this turn computes (one `cp.async.wait_group` and one barrier per staged operand
  and turn). Anything else (an expression operand, a window with a start known at run time) is
  read element by element with the masks of its region.
- Fragments: the [M, N] result is split over the warps as a WM x WN grid of MT x NT blocks of
  16 x 8 (`MmaLayout`); a warp loads each A fragment once per 16-deep K step and reuses it over its
  NT blocks, each B fragment over its MT blocks. Tiles of the mma row layout (WN = 1, each warp
  owns whole rows) keep row reductions inside the warp: each lane reduces its elements, then two
  shuffles within its quad; [M, 1] tiles are held per lane for its rows (`RowLayout`).
- Barriers: every barrier this module adds is marked "codegen-internal" and names the scratch or
  the mma.sync fragments it is for; a statement that reads or writes shared tiles elementwise while
  iterating over fragments (not the partition the barrier analysis assumes) is fenced before and
  after, as the generic path does for register layouts.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from .. import ir
from ..analysis import lowering as L
from ..analysis.layout import PanelSwizzle, wgmma_panel_bytes
from ..analysis.mma_tiles import MmaLayout, RowLayout, grid_layout, packed, register_words, shape2
from ..switches import SWITCHES
from . import ctypes_ as C
from . import streamed_sm90

# The routes of tensor-core statements, the scratch and staging offsets and the streamed loops are
# the analysis' decisions (tilenb/analysis/lowering.py, placed in its shared-memory map); this
# module writes the code for them.
SCRATCH_ALIGN = L.SCRATCH_ALIGN
FRAG_NOTE = "mma.sync accumulator fragments of the result"   # named by tests: barriers beyond the analysis
Route, Stage, LoopPipe = L.Route, L.Stage, L.LoopPipe


def _columns_adjacent(loc) -> bool:
    """Whether a window's columns are adjacent in memory (its last range is the base's last
    dimension): a fragment pair (two adjacent columns) is then one 4-byte word of 2-byte data."""
    rngs = [k for k, en in enumerate(loc.entries) if en[0] == "rng"]
    return bool(rngs) and rngs[-1] == len(loc.entries) - 1


def _cg():
    from . import cuda
    return cuda


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


# ---- layouts -----------------------------------------------------------------------------------


def _wgmma_panel(src) -> Optional[int]:
    """For an ldmatrix source ("smem", ptr, pitch, swizzle, None, tile address): the bytes of one
    64-column panel when the tile is in wgmma's K-major layout (`layout.wgmma_panel_bytes`),
    else None."""
    if len(src) < 6 or src[5] is None:
        return None
    return wgmma_panel_bytes(src[3], src[2])


# ---- the mixin ---------------------------------------------------------------------------------
class MmaGen:
    mma_on = False
    streamed_views: set = frozenset()
    stream = None            # streamed_sm90.Streaming of this kernel (sm_90), if any

    # ---- set-up, before the body is written
    def mma_prepare(self) -> int:
        """Read the analysis' routes, scratch offsets, pipelined and streamed loops (`self.low`,
        tilenb/analysis/lowering.py); raise for a statement none can lower. Returns the scratch
        bytes after the tiles (0 when none is needed)."""
        low = self.low
        self.mma_on = True
        self.lay_pre: Dict[int, Tuple[str, object]] = {}
        self.dot_scratch: Dict[int, Tuple[str, int]] = {}
        self.stages: Dict[int, Stage] = low.stages
        self.scratch_local: Dict[int, int] = low.scratch_local   # id(dot) -> byte offset of its f32 scratch tile
        self.mma_pipes: Dict[int, LoopPipe] = low.pipes
        self.stage_dots = low.stage_dots
        self.streamed_views = low.streamed_views   # id(view Sym) whose dots stage it: its `let` copies nothing
        self.pipe_bytes, self.scratch_base, self.scratch_bytes = low.pipe_bytes, low.scratch_base, low.scratch_bytes
        self.mma_live_loops: Dict[int, dict] = {}
        self.mma_early_done: set = set()        # streamed loops whose ring mma_ring_early set up
        self.W = self.T // 32
        skip = {id(t) for s in ir.walk_stmts(self.kir.body) if isinstance(s, ir.For) and id(s) in low.gemm
                for t in ir.walk_stmts(s.body)}
        for s in ir.walk_stmts(self.kir.body):
            if id(s) not in skip and id(s) in low.routes:
                self.mma_route(s)               # a statement no path can lower fails here, before any code
        self.stream = streamed_sm90.streaming(self, low)
        return self.scratch_bytes

    def mma_min_blocks(self) -> str:
        """`, n` for __launch_bounds__: as many CTAs an SM as the register tiles on the mma row
        layout leave room for (their 32-bit registers plus 16 for the rest, under the cap of n
        CTAs of this size on an SM's registers, `Target.regs_per_sm`); empty when the kernel has none (ptxas then uses up to
        255 registers a thread, holding loop invariants, which costs CTAs an SM)."""
        words = 0
        for k, lay in self.layouts.items():
            if isinstance(lay, RowLayout) or (isinstance(lay, MmaLayout) and lay.rows_mode):
                t = self.plan.tiles.get(k)
                if t is not None and t.space == "registers":
                    words += register_words(t.sym.type.shape, t.sym.type.dtype, self.W)
        if not words:
            return ""
        for mb in (4, 3, 2):
            cap = min(255, (self.target.regs_per_sm // (self.T * mb)) // 8 * 8)
            if words + 16 <= cap:
                return f", {mb}"
        return ""


    # ---- routes
    def mma_route(self, s) -> Route:
        r = self.low.route(s)
        if r.error is not None:
            self.fail(r.error, s)
        return r

    def _reg_layout(self, sym):
        place = self.plan.tiles.get(id(sym))
        if place is None or place.space != "registers":
            return None
        return self.layouts.get(id(sym))

    # ---- hooks called by the generator
    def mma_stmt(self, s, tv) -> bool:
        """Write a tile statement that meets the tensor cores; False: the generic path writes it
        (after this has computed its scratch dots, which `ev` then reads)."""
        if not self.mma_on:
            return False
        r = self.mma_route(s)
        if r.lay is None and not r.scratch:
            return False
        for d in r.scratch:
            self.mma_dot_to_scratch(d)
        if r.lay is None:
            return False
        self.mma_frag_stmt(s, tv, r)
        return True

    def mma_value(self, e, at) -> Optional[str]:
        """`ev` for what this module holds: dots and reductions computed before the sweep, scratch
        dots, and register tiles on the fragment layouts (None: not one of those)."""
        hit = self.lay_pre.get(id(e))
        if hit is not None and at.slot is not None and at.layout == hit[1]:
            return f"{hit[0]}[{at.slot}]"
        hit = self.dot_scratch.get(id(e))
        if hit is not None:
            return f"{hit[0]}[({at.i}) * {hit[1]} + ({at.j})]"
        if isinstance(e, ir.Ref) and isinstance(e.type, ir.TileT):
            tv = self.tile_of(e.sym)
            if tv is not None and tv.space == "registers" and isinstance(tv.layout, (MmaLayout, RowLayout)):
                if at.slot is None or at.layout != tv.layout:
                    self.fail(f"'{e.sym.name}' is kept in registers (each thread holds its own elements), but this "
                              f"statement reads elements of it that another thread holds", e)
                return self.reg_read(tv, at.slot)
        return None

    def mma_child_at(self, parent, child, at):
        """A [M, 1] operand broadcast along the columns of rows-mode fragments: the lane's own row."""
        lay = at.layout
        if not (isinstance(lay, MmaLayout) and lay.rows_mode and at.slot is not None and at.ident):
            return None
        P, Q = shape2(parent.type.shape), shape2(child.type.shape)
        if Q != (P[0], 1) or P[1] == 1 or P[0] != lay.M:
            return None
        slot = f"((({at.slot}) / {lay.NT * 4}) * 2 + ((({at.slot}) & 3) >> 1))"
        return _cg().At(at.i, 0, slot, RowLayout(lay.M, lay.W), True)

    def mma_declare(self, tv) -> bool:
        lay = tv.layout
        if not isinstance(lay, (MmaLayout, RowLayout)):
            return False
        R, Cc = tv.shape
        if packed(lay, tv.dtype):
            self.emit(f"unsigned {tv.cname}[{lay.slots // 2}];  // [{R}, {Cc}] {tv.dtype} in registers: "
                      f"mma.sync fragments, two values a register ({self._lay_text(lay)})")
        else:
            what = "mma.sync fragments" if isinstance(lay, MmaLayout) else "the values of this lane's fragment rows"
            self.emit(f"{C.VALUE_C[tv.dtype]} {tv.cname}[{lay.slots}];  // [{R}, {Cc}] {tv.dtype} in registers: "
                      f"{what} ({self._lay_text(lay)})")
        return True

    def _lay_text(self, lay) -> str:
        if isinstance(lay, RowLayout):
            return f"warp w: rows {16 * lay.MT}w .. {16 * lay.MT}w + {16 * lay.MT - 1}"
        if lay.rows_mode:
            return f"warp w: rows {16 * lay.MT}w .., all {lay.N} columns"
        return f"warps {lay.WM} x {lay.WN}, each {16 * lay.MT} x {8 * lay.NT}"

    def mma_early_rings(self, body) -> Dict[int, List[ir.For]]:
        """Streamed loops of this block whose ring is set up before earlier statements
        (`lowering.early_rings`: index in `body` -> the loops to set up before that statement)."""
        if getattr(self, "stream", None) is None:
            return {}
        return L.early_rings(body, self.stream.rings)

    def mma_ring_early(self, s: ir.For):
        """Set up the ring of streamed loop `s` here (mma_early_rings chose the place)."""
        lo = self.scalar_as(s.lo, "index")
        hi = self.scalar_as(s.hi, "index")
        self.emit(f"// the ring of the loop at line {s.span.line + self.line_offset}, set up ahead of the statements before it")
        self.mma_live_loops[id(s)] = streamed_sm90.loop_begin(self, s, self.stream.rings[id(s)], self.cname(s.var), lo, hi)
        self.mma_early_done.add(id(s))

    def mma_loop_begin(self, s: ir.For, var: str, lo: str, hi: str):
        """Before a native `for`: the turn counter of its double-buffered stagings (or, for a loop
        streamed on sm_90, its ring: streamed_sm90; already set up when mma_ring_early did)."""
        if not getattr(self, "mma_on", False) or id(s) not in self.mma_pipes:
            return
        if id(s) in self.mma_early_done:       # its ring was set up ahead (mma_ring_early)
            self.mma_early_done.discard(id(s))
            return
        if self.loop_path(s) == "streamed attention on wgmma":
            self.mma_live_loops[id(s)] = streamed_sm90.loop_begin(self, s, self.stream.rings[id(s)], var, lo, hi)
            return
        it = self.new("tnb_it")
        self.emit(f"int {it} = 0;  // turns done: the parity of the double-buffered tensor-core operands")
        self.mma_live_loops[id(s)] = {"it": it, "hi": hi, "var": var, "step": s.step, "left": None}

    def mma_loop_end(self, s: ir.For):
        """After a native `for`: a streamed loop's deferred product retires (streamed_sm90)."""
        live = self.mma_live_loops.get(id(s)) if getattr(self, "mma_on", False) else None
        if live is not None and "ring" in live:
            streamed_sm90.loop_end(self, live)

    # ---- register tiles
    def reg_read(self, tv, slot) -> str:
        if packed(tv.layout, tv.dtype):
            f = "b2f" if tv.dtype == "bf16" else "h2f"
            return f"((({slot}) & 1) ? tnb_hi_{f}({tv.cname}[({slot}) >> 1]) : tnb_lo_{f}({tv.cname}[({slot}) >> 1]))"
        return f"{tv.cname}[{slot}]"

    # ---- sweeps over the fragment layouts
    def frag_sweep(self, lay, body, pairs: bool = False):
        """body(at) for every element this thread holds (pairs: body((at0, at1)) for the two
        adjacent columns of each fragment row)."""
        At = _cg().At
        g, tg = "(tnb_lane >> 2)", "(tnb_lane & 3)"
        if isinstance(lay, RowLayout):
            mi, h = self.new("mi"), self.new("h")
            self.emit("#pragma unroll")
            self.emit(f"for (int {mi} = 0; {mi} < {lay.MT}; ++{mi}) {{")
            self.ind += 1
            self.emit("#pragma unroll")
            self.emit(f"for (int {h} = 0; {h} < 2; ++{h}) {{")
            self.ind += 1
            i = self.new("i")
            self.emit(f"const int {i} = (tnb_warp * {lay.MT} + {mi}) * 16 + {g} + {h} * 8;")
            body(At(i, 0, f"({mi} * 2 + {h})", lay, True))
            self.ind -= 1
            self.emit("}")
            self.ind -= 1
            self.emit("}")
            return
        guard = lay.used < lay.W
        if guard:
            self.emit(f"if (tnb_warp < {lay.used}) {{  // warps past the {lay.WM} x {lay.WN} grid hold no fragments")
            self.ind += 1
        wr, wc = self.new("wr"), self.new("wc")
        self.emit(f"const int {wr} = (tnb_warp / {lay.WN}) * {16 * lay.MT}, {wc} = (tnb_warp % {lay.WN}) * {8 * lay.NT};")
        mi, ni, e = self.new("mi"), self.new("ni"), self.new("e")
        self.emit("#pragma unroll")
        self.emit(f"for (int {mi} = 0; {mi} < {lay.MT}; ++{mi}) {{")
        self.ind += 1
        self.emit("#pragma unroll")
        self.emit(f"for (int {ni} = 0; {ni} < {lay.NT}; ++{ni}) {{")
        self.ind += 1
        self.emit("#pragma unroll")
        self.emit(f"for (int {e} = 0; {e} < {2 if pairs else 4}; ++{e}) {{")
        self.ind += 1
        i, j = self.new("i"), self.new("j")
        base = f"({mi} * {lay.NT} + {ni}) * 4"
        if pairs:
            self.emit(f"const int {i} = {wr} + {mi} * 16 + {g} + {e} * 8, {j} = {wc} + {ni} * 8 + {tg} * 2;")
            s0 = f"({base} + {e} * 2)"
            body((At(i, j, s0, lay, True), At(i, f"({j} + 1)", f"({s0} + 1)", lay, True)))
        else:
            self.emit(f"const int {i} = {wr} + {mi} * 16 + {g} + ({e} >> 1) * 8, {j} = {wc} + {ni} * 8 + {tg} * 2 + ({e} & 1);")
            body(At(i, j, f"({base} + {e})", lay, True))
        for _ in range(3):
            self.ind -= 1
            self.emit("}")
        if guard:
            self.ind -= 1
            self.emit("}")

    def frag_fill(self, arr: str, lay, value: str = "0.0f"):
        self.emit("#pragma unroll")
        k = self.new("z")
        self.emit(f"for (int {k} = 0; {k} < {lay.slots}; ++{k}) {arr}[{k}] = {value};")

    # ---- a statement swept over fragments
    def mma_frag_stmt(self, s, tv, r: Route):
        cg = _cg()
        lay, domain, value = r.lay, r.domain, r.value
        M, N = domain
        loc = None
        if isinstance(s, ir.Assign) and not isinstance(s.target, ir.Ref):
            loc = self.loc_of(s.target)
            if loc is None:
                self.fail("a store into a window of a register tile", s)
        elif isinstance(s, ir.Assign):
            tv = self.tile_of(s.target.sym)
        fence = id(s) in self.plan.shared_partition
        if fence:
            self.emit(f"__syncthreads();  // codegen-internal: this statement sweeps {FRAG_NOTE}, not the partition "
                      "the barrier analysis assumes for its shared-memory operands")
        tile_value = isinstance(value.type, ir.TileT)
        if tile_value:
            vr = self.name_region(self.broadcast_region(self.region(value), value.type.shape, domain))
            self.prepare_regions(value)
        else:
            vr = (0, M, 0, N)
        if loc is not None:
            bounds = self.loc_bounds(loc, False)
            mask = self.name_region(self.intersect(vr, bounds)) if tile_value else bounds
        else:
            mask = None
        in_regs = tv is not None and loc is None and tv.space == "registers"
        if in_regs and tv.layout != lay:
            self.fail("a register tile assigned in a layout other than its own", s)
        added: List[int] = []
        skip_sweep = False
        frag = list(r.frag)
        red_dot = any(isinstance(x, ir.Reduce) and any(isinstance(y, ir.Dot) for y in ir.walk_expr(x.x))
                      for x in ir.walk_expr(value)) if tile_value else False
        direct = (in_regs and isinstance(lay, MmaLayout) and tv.dtype == "f32" and len(frag) == 1
                  and not red_dot and not self._refs(frag[0], tv.sym))
        d0 = frag[0] if frag else None
        if direct and isinstance(value, ir.Binary) and value.op == "+" and (value.a is d0 or value.b is d0):
            # t = x + dot(a, b): x into t, then the tensor cores accumulate onto it
            x = value.a if value.b is d0 else value.b
            self.emit(f"// {tv.sym.name} = (the rest) + dot: the rest first, then mma.sync accumulates onto {tv.cname}")
            if not (isinstance(x, ir.Ref) and x.sym is tv.sym):
                added += self._hoist_reductions(x, lay)
                self._sweep_into(s, tv, lay, x, None, domain)
            self.mma_accumulate(d0, tv.cname, lay)
            frag, skip_sweep = [], True
        elif direct and value is d0:
            self.frag_fill(tv.cname, lay)
            self.mma_accumulate(d0, tv.cname, lay)
            frag, skip_sweep = [], True
        elif direct and not self._refs(value, tv.sym):
            self.frag_fill(tv.cname, lay)
            self.mma_accumulate(d0, tv.cname, lay)
            self.lay_pre[id(d0)] = (tv.cname, lay)
            added.append(id(d0))
            frag = []
        for d in frag:
            arr = self.new("frag")
            self.emit(f"float {arr}[{lay.slots}];  // {FRAG_NOTE}: dot at line {d.span.line + self.line_offset}")
            self.frag_fill(arr, lay)
            self.mma_accumulate(d, arr, lay)
            self.lay_pre[id(d)] = (arr, lay)
            added.append(id(d))
        if not skip_sweep:
            added += self._hoist_reductions(value, lay)
            if loc is not None:
                self._sweep_window(s, loc, lay, value, mask, domain)
            elif tv.space == "registers":
                self._sweep_into(s, tv, lay, value, None, domain)
            else:
                self._sweep_shared(s, tv, lay, value, domain)
        if loc is None and tv is not None:
            n = tv.cname
            self.emit(f"{n}_r0 = {vr[0]}; {n}_r1 = {vr[1]}; {n}_c0 = {vr[2]}; {n}_c1 = {vr[3]};")
        for k in added:
            self.lay_pre.pop(k, None)
        if fence:
            self.emit("__syncthreads();  // codegen-internal: (the same, after the statement)")
        del cg

    def _pair_source(self, value, dtype, domain):
        """The Loc of `value` when it is a slice of a global tensor of `dtype` read at the sweep's
        own coordinates with its columns adjacent in memory (a fragment pair is then one 4-byte
        word of the tensor); None otherwise."""
        if not isinstance(value, ir.Slice) or shape2(value.type.shape) != tuple(domain):
            return None
        loc = self.loc_of(value)
        if loc is None or loc.kind != "global" or loc.dtype != dtype:
            return None
        return loc if _columns_adjacent(loc) else None

    def _in_registers(self, e) -> bool:
        """Whether e reads only scalars, constants and register tiles (so it may be evaluated at any
        fragment element, outside every valid region, without a memory access)."""
        for x in ir.walk_expr(e):
            if isinstance(x, (ir.Slice, ir.Element)):
                return False
            if isinstance(x, ir.Ref) and isinstance(x.type, ir.TileT):
                tv = self.tile_of(x.sym)
                if tv is None or tv.space != "registers":
                    return False
        return True

    def _refs(self, e, sym) -> bool:
        return any(isinstance(x, ir.Ref) and x.sym is sym for x in ir.walk_expr(e))

    def _sweep_into(self, s, tv, lay, value, mask, domain):
        vdt = value.type.dtype
        if packed(lay, tv.dtype):
            if vdt not in C.F32_FAMILY:
                self.fail(f"a {vdt} value stored into the {tv.dtype} register tile '{tv.sym.name}'", s)
            pack = C.pack2(tv.dtype)
            loc = self._pair_source(value, tv.dtype, domain)

            def body(ats):
                a0, a1 = ats
                v0 = C.convert(self.elem_value(value, a0, domain), vdt, "f32")
                v1 = C.convert(self.elem_value(value, a1, domain), vdt, "f32")
                dst = f"{tv.cname}[({a0.slot}) >> 1]"
                if loc is not None:      # the pair's two elements are adjacent in the tensor
                    rg, shape = self.region(value), shape2(loc.shape)
                    conds = [self.in_region(rg, a.i, a.j, shape) for a in ats]
                    if False not in conds:
                        p = self.new("pr")
                        self.emit(f"const {C.STORE_C[loc.dtype]}* const {p} = {loc.ptr} + {loc.index(a0.i, a0.j)};")
                        both = " && ".join(c for c in conds if c is not True)
                        self.emit(f"if ({both + ' && ' if both else ''}(((unsigned long long){p}) & 3ull) == 0) "
                                  f"{dst} = *(const unsigned*){p};  // the pair as one 4-byte load")
                        self.emit(f"else {dst} = {pack}({v0}, {v1});")
                        return
                self.emit(f"{dst} = {pack}({v0}, {v1});")
            self.frag_sweep(lay, body, pairs=True)
            return

        def body(at):
            self.emit(f"{tv.cname}[{at.slot}] = {C.convert(self.elem_value(value, at, domain), vdt, tv.dtype)};")
        self.frag_sweep(lay, body)

    def _sweep_shared(self, s, tv, lay, value, domain):
        vdt = value.type.dtype
        N = domain[1]
        cg = _cg()

        def body(at):
            idx = f"({at.i}) * {N} + ({at.j})"
            idx = cg.swz_c(tv.swz, idx) if hasattr(cg, "swz_c") and getattr(tv, "swz", None) is not None else idx
            line = f"{tv.cname}[{idx}] = {C.store_bits(self.elem_value(value, at, domain), vdt, tv.dtype)};"
            self.emit(("if (tnb_lane % 4 == 0) " if isinstance(lay, RowLayout) else "") + line)
        self.frag_sweep(lay, body)

    def _sweep_window(self, s, loc, lay, value, mask, domain):
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
            return C.store_bits(self.elem_value(value, at, domain), vdt, loc.dtype)

        def write(at):
            self.emit(f"{loc.ptr}[{loc.index(at.i, at.j)}] = {elem(at)};")

        def body(at):
            if isinstance(lay, RowLayout):
                self.emit("if (tnb_lane % 4 == 0) {  // the four lanes of a quad hold the same row values")
                self.ind += 1
                self.masked(mask, at, domain, write)
                self.ind -= 1
                self.emit("}")
            else:
                self.masked(mask, at, domain, write)

        def pair_body(ats):
            a0, a1 = ats
            conds = [self.in_region(mask, a.i, a.j, domain) if mask is not None else True for a in ats]
            if False in conds:            # a column known to be outside: element by element
                for a in ats:
                    self.masked(mask, a, domain, write)
                return
            p = self.new("pw")
            self.emit(f"{C.STORE_C[loc.dtype]}* const {p} = {loc.ptr} + {loc.index(a0.i, a0.j)};")
            both = " && ".join(c for c in conds if c is not True)
            aligned = f"(((unsigned long long){p}) & 3ull) == 0"
            self.emit(f"if ({both + ' && ' if both else ''}{aligned}) {{")
            self.ind += 1
            if vdt in C.F32_FAMILY and loc.dtype in ("bf16", "f16"):    # one cvt for both (prelude)
                pack = C.pack2(loc.dtype)
                v0, v1 = (C.convert(self.elem_value(value, a, domain), vdt, "f32") for a in ats)
                self.emit(f"*(unsigned*){p} = {pack}({v0}, {v1});")
            else:
                self.emit(f"*(unsigned*){p} = (unsigned)({elem(a0)}) | ((unsigned)({elem(a1)}) << 16);")
            self.ind -= 1
            self.emit("} else {")
            self.ind += 1
            for k, a in enumerate(ats):
                if conds[k] is not True:
                    self.emit(f"if ({conds[k]}) {p}[{k}] = {elem(a)};")
                else:
                    self.emit(f"{p}[{k}] = {elem(a)};")
            self.ind -= 1
            self.emit("}")

        def sweep():
            if pairs:
                self.frag_sweep(lay, pair_body, pairs=True)
            else:
                self.frag_sweep(lay, body)

        divs = [d for d in (self.invariant_divisions(value, domain) if grid else []) if self._in_registers(d.b)]
        if not divs:
            sweep()
            return
        ok = self.new("rcpok")
        rcps = [self.new("rcp") for _ in divs]
        rows = 2 * lay.MT                  # the fragment rows this lane holds: (mi, half)
        self.emit(f"bool {ok} = true;  // x * (1 / d) stands for x / d at every row's divisor d (tnb_rcp_ok)")
        for r in rcps:
            self.emit(f"float {r}[{rows}];  // 1 / d at each of this lane's fragment rows")
        At = _cg().At
        wr, wc = self.new("wr"), self.new("wc")
        self.emit(f"const int {wr} = (tnb_warp / {lay.WN}) * {16 * lay.MT}, {wc} = (tnb_warp % {lay.WN}) * {8 * lay.NT};")
        for mi in range(lay.MT):
            for h in range(2):
                # the row's first element this lane holds: the divisor is the same along the row
                at = At(f"({wr} + {mi * 16} + (tnb_lane >> 2) + {h * 8})", f"({wc} + (tnb_lane & 3) * 2)",
                        f"{mi * lay.NT * 4 + h * 2}", lay, True)
                for d, r in zip(divs, rcps):
                    dv = C.convert(self.ev(d.b, self.child_at(d, d.b, at)), d.b.type.dtype, "f32")
                    self.emit(f"{ok} = {ok} & tnb_rcp_ok({dv}); {r}[{mi * 2 + h}] = 1.0f / {dv};")
        saved = dict(self.fast_div)
        self.emit(f"if ({ok}) {{")
        self.ind += 1
        for d, r in zip(divs, rcps):
            self.fast_div[id(d)] = (lambda at, r=r:
                                    f"{r}[(({at.slot}) / {lay.NT * 4}) * 2 + ((({at.slot}) & 3) >> 1)]")
        sweep()
        self.fast_div = dict(saved)
        self.ind -= 1
        self.emit("} else {")
        self.ind += 1
        sweep()
        self.ind -= 1
        self.emit("}")

    # ---- row reductions on rows-mode fragments
    def _hoist_reductions(self, value, lay) -> List[int]:
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
            arr = self.mma_row_reduce(red, M)
            self.lay_pre[id(red)] = (arr, RowLayout(M, self.W))
            added.append(id(red))
        return added

    def mma_row_reduce(self, red: ir.Reduce, M: int) -> str:
        At = _cg().At
        x = red.x
        Nx = shape2(x.type.shape)[1]
        xl = MmaLayout(M, Nx, self.W, self.W, 1)
        rl = RowLayout(M, self.W)
        dt, xdt = red.type.dtype, x.type.dtype
        arr = self.new("rr")
        xr = self.region(x)
        self.prepare_regions(x)
        lo, hi = xr[2], xr[3]
        static_full = _is_int(lo) and _is_int(hi) and lo <= 0 and hi >= Nx
        self.emit(f"{C.VALUE_C[dt]} {arr}[{rl.slots}];  // row{red.op} of this lane's rows (line {red.span.line + self.line_offset}): "
                  "its elements, then the quad")

        def body(masked: bool):
            mi, h, ni, c = self.new("mi"), self.new("h"), self.new("ni"), self.new("c")
            self.emit("#pragma unroll")
            self.emit(f"for (int {mi} = 0; {mi} < {rl.MT}; ++{mi}) {{")
            self.ind += 1
            self.emit("#pragma unroll")
            self.emit(f"for (int {h} = 0; {h} < 2; ++{h}) {{")
            self.ind += 1
            acc = self.new("red")
            i = self.new("i")
            # independent partial results (by column pair and block parity), combined at the end:
            # four short dependency chains instead of one of 2 NT steps
            parts = 4 if xl.NT % 2 == 0 else 2
            self.emit(f"const int {i} = (tnb_warp * {rl.MT} + {mi}) * 16 + (tnb_lane >> 2) + {h} * 8;")
            ident = self.reduce_ident(red.op, dt)
            self.emit(f"{C.VALUE_C[dt]} {acc}[{parts}] = {{{', '.join([ident] * parts)}}};")
            self.emit("#pragma unroll")
            self.emit(f"for (int {ni} = 0; {ni} < {xl.NT}; ++{ni}) {{")
            self.ind += 1
            self.emit("#pragma unroll")
            self.emit(f"for (int {c} = 0; {c} < 2; ++{c}) {{")
            self.ind += 1
            j = self.new("j")
            self.emit(f"const int {j} = {ni} * 8 + (tnb_lane & 3) * 2 + {c};")
            slot = f"(({mi} * {xl.NT} + {ni}) * 4 + {h} * 2 + {c})"
            v = C.convert(self.ev(x, At(i, j, slot, xl, True)), xdt, dt)
            part = f"{acc}[{'((' + ni + ') & 1) * 2 + ' if parts == 4 else ''}{c}]"
            comb = self.reduce_combine(red.op, dt, part, v)
            if masked:
                self.emit(f"if ({j} >= {lo} && {j} < {hi}) {part} = {comb};")
            else:
                self.emit(f"{part} = {comb};")
            self.ind -= 1
            self.emit("}")
            self.ind -= 1
            self.emit("}")
            pair = [self.reduce_combine(red.op, dt, f"{acc}[{2 * q}]", f"{acc}[{2 * q + 1}]") for q in range(parts // 2)]
            total = pair[0] if parts == 2 else self.reduce_combine(red.op, dt, f"({pair[0]})", f"({pair[1]})")
            self.emit(f"{arr}[{mi} * 2 + {h}] = {total};")
            self.ind -= 1
            self.emit("}")
            self.ind -= 1
            self.emit("}")

        if static_full:
            body(False)
        else:
            self.emit(f"if ({lo} <= 0 && {hi} >= {Nx}) {{  // every column valid")
            self.ind += 1
            body(False)
            self.ind -= 1
            self.emit("} else {")
            self.ind += 1
            body(True)
            self.ind -= 1
            self.emit("}")
        k = self.new("k")
        self.emit("#pragma unroll")
        self.emit(f"for (int {k} = 0; {k} < {rl.slots}; ++{k}) {{  // the quad's four lanes share each row")
        self.ind += 1
        for off in (1, 2):
            comb = self.reduce_combine(red.op, dt, f"{arr}[{k}]", f"__shfl_xor_sync(0xffffffffu, {arr}[{k}], {off})")
            self.emit(f"{arr}[{k}] = {comb};")
        self.ind -= 1
        self.emit("}")
        return arr

    # ---- dots elsewhere: into a shared f32 scratch tile
    def mma_dot_to_scratch(self, d: ir.Dot):
        M, N = shape2(d.type.shape)
        lay = grid_layout(M, N, self.W)
        arr = self.new("frag")
        self.emit(f"// dot at line {d.span.line + self.line_offset} on tensor cores, into a shared f32 scratch tile "
                  "that the statement reads")
        self.emit(f"float {arr}[{lay.slots}];  // {FRAG_NOTE}")
        self.frag_fill(arr, lay)
        self.mma_accumulate(d, arr, lay)
        ptr = self.new("dsc")
        off = self.low.scratch_off(d)
        self.emit(f"float* const {ptr} = (float*)(tnb_smem + {off});  // [{M}, {N}] f32 scratch")
        self.emit("__syncthreads();  // codegen-internal: the dot scratch's previous readers are done")

        def put(at):
            self.emit(f"{ptr}[({at.i}) * {N} + ({at.j})] = {arr}[{at.slot}];")
        self.frag_sweep(lay, put)
        self.emit("__syncthreads();  // codegen-internal: the dot scratch is written; every thread may read it")
        self.dot_scratch[id(d)] = (ptr, N)

    # ---- operands
    def _source(self, d: ir.Dot, op, role: str, lay: MmaLayout):
        """('regs', TileVar) | ('smem', C pointer, row pitch, swizzle or None) | ('elem',)."""
        dt = op.type.dtype
        R, Cc = shape2(op.type.shape)
        if id(op) in self.stages and (isinstance(op, ir.Ref) or (isinstance(op, ir.Slice) and op.base.kind == "tensor")):
            return ("stage", self.stages[id(op)])
        if isinstance(op, ir.Ref):
            tv = self.tile_of(op.sym)
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

    def _stage_now(self, stages: List[Tuple[object, Stage]]):
        """Copy tensor slices into their scratch buffers where the statement needs them."""
        self.emit("__syncthreads();  // codegen-internal: staging scratch: the previous reads of these bytes are done")
        for op, st in stages:
            self._copy_tile(st.src or op, st, self._stage_off(st), asynchronous=True)
        self.emit("tnb_cp_commit(); tnb_cp_wait<0>();")
        self.emit("__syncthreads();  // codegen-internal: the staged scratch tile is visible to every warp")

    def _chunks_aligned(self, loc) -> bool:
        """Every 8-element chunk of the slice that starts on a column multiple of 8 starts on a
        16-byte boundary of the tensor (its base is 16-byte aligned): the row length is a constant
        multiple of 8 and the slice's first column a constant multiple of 8."""
        last = loc.entries[-1]
        ext = loc.extents[-1]
        if last[0] != "rng" or not (_is_int(ext) and ext % 8 == 0):
            return False
        return _is_int(last[1]) and last[1] % 8 == 0

    def _stage_off(self, st: Stage) -> int:
        """Byte offset in shared memory of a staging buffer (the first, for a double buffer)."""
        return self.low.stage_off(st)

    def _stage_pipelined(self, op, st: Stage) -> str:
        """The double-buffered staging of `op` in its loop; returns the C pointer of this turn's tile."""
        lp = self.mma_live_loops[id(st.loop)]
        pipe = self.mma_pipes[id(st.loop)]
        P = len(pipe.stages)
        it = lp["it"]
        base = self.low.stage_off(st)
        cur = self.new("stg")
        self.emit(f"// {(st.src or op).base.name}[...] in a double-buffered staging scratch: this turn's tile was copied during the "
                  "previous turn (cp.async); the next turn's copy starts below")
        self.emit(f"unsigned char* const {cur} = tnb_smem + {base} + ({it} & 1) * {st.bytes};")
        self.emit(f"if ({it} == 0) {{  // the first turn: nothing is in flight for this operand yet")
        self.ind += 1
        self.emit("tnb_cp_wait<0>();")
        self.emit("__syncthreads();  // codegen-internal: staging scratch: no warp still reads it from a previous entry")
        self._copy_tile(st.src or op, st, f"{base}", asynchronous=True)
        self.emit("tnb_cp_commit(); tnb_cp_wait<0>();")
        self.ind -= 1
        self.emit("} else {")
        self.emit(f"  tnb_cp_wait<{P - 1}>();  // this turn's group: {P - 1} later group(s) may still be in flight")
        self.emit("}")
        self.emit("__syncthreads();  // codegen-internal: the staged scratch tile is visible to every warp, and every warp "
                  "is done with the other buffer")
        nx = self.new("nx")
        var = lp["var"]
        self.emit("{")
        self.ind += 1
        self.emit(f"const long long {nx} = {var} + {lp['step']};")
        self.emit(f"if ({nx} < {lp['hi']}) {{  // the next turn's tile, into the other buffer")
        self.ind += 1
        self.emit(f"const long long {var} = {nx};")
        saved = self.regions
        self.regions = {}
        self._copy_tile(st.src or op, st, f"{base} + (({it} + 1) & 1) * {st.bytes}", asynchronous=True)
        self.regions = saved
        self.ind -= 1
        self.emit("}")
        self.ind -= 1
        self.emit("}")
        self.emit("tnb_cp_commit();")
        if pipe.stages and pipe.stages[-1] == id(op):
            self.emit(f"++{it};")
        return cur

    def _copy_tile(self, op: ir.Slice, st: Stage, off, asynchronous: bool):
        """Copy the tensor slice `op` into scratch at byte offset `off` (int or C text) with rows of
        st.pitch elements: 16-byte cp.async where a chunk is whole and aligned, zeros outside the
        tensor, element copies at a partial edge."""
        loc = self.loc_of(op)
        b = self.loc_bounds(loc, False)
        per = st.cols // 8
        nch = st.rows * per
        steps = -(-nch // self.T)
        sb, k, r, c = self.new("sb"), self.new("k"), self.new("r"), self.new("c")
        self.emit(f"const unsigned {sb} = tnb_saddr(tnb_smem + {off});")
        self.emit(f"// {op.base.name}[...] -> scratch [{st.rows}, {st.cols}] {st.dtype}, rows of {st.pitch} elements "
                  f"(16-byte chunk k -> thread k % {self.T})")
        stp = self.new("s")
        self.emit("#pragma unroll")
        self.emit(f"for (int {stp} = 0; {stp} < {steps}; ++{stp}) {{")
        self.ind += 1
        self.emit(f"const int {k} = tnb_tid + {stp} * {self.T};")
        if nch % self.T:
            self.emit(f"if ({k} < {nch}) {{")
            self.ind += 1
        self.emit(f"const int {r} = {k} / {per}, {c} = ({k} % {per}) * 8;")
        dst = self.new("dst")
        src = self.new("src")
        st_c = C.STORE_C[st.dtype]
        self.emit(f"const unsigned {dst} = {sb} + ({r} * {st.pitch} + {c}) * 2;")
        self.emit(f"const {st_c}* const {src} = {loc.ptr} + ({loc.index(r, c)});")
        rows = []
        if not (_is_int(b[0]) and b[0] <= 0):
            rows.append(f"{r} >= {b[0]}")
        if not (_is_int(b[1]) and b[1] >= st.rows):
            rows.append(f"{r} < {b[1]}")
        cols_full = []
        if not (_is_int(b[2]) and b[2] <= 0):
            cols_full.append(f"{c} >= {b[2]}")
        if not (_is_int(b[3]) and b[3] >= st.cols):
            cols_full.append(f"{c} + 8 <= {b[3]}")
        aligned = [] if self._chunks_aligned(loc) else [f"(((unsigned long long){src}) & 15) == 0"]
        full = " && ".join(rows + cols_full + aligned) or "true"
        copy = f"tnb_cp16u({dst}, {src});" if asynchronous else f"tnb_st16u({dst}, *(const uint4*){src});"
        self.emit(f"if ({full}) {copy}")
        empty = []
        if rows:
            empty.append("!(" + " && ".join(rows) + ")")
        if not (_is_int(b[2]) and b[2] <= 0):
            empty.append(f"{c} + 8 <= {b[2]}")
        if not (_is_int(b[3]) and b[3] >= st.cols):
            empty.append(f"{c} >= {b[3]}")
        empty_c = " || ".join(empty) or "false"
        self.emit(f"else if ({empty_c}) tnb_st16u({dst}, make_uint4(0u, 0u, 0u, 0u));  // outside the tensor: zeros")
        v = self.new("v")
        cond = []
        if not (_is_int(b[2]) and b[2] <= 0):
            cond.append(f"{c} + {v} >= {b[2]}")
        if not (_is_int(b[3]) and b[3] >= st.cols):
            cond.append(f"{c} + {v} < {b[3]}")
        cc = " && ".join(cond) or "true"
        self.emit(f"else for (int {v} = 0; {v} < 8; ++{v}) tnb_st2u({dst} + {v} * 2, ({cc}) ? {src}[{v}] : ({st_c})0);")
        if nch % self.T:
            self.ind -= 1
            self.emit("}")
        self.ind -= 1
        self.emit("}")

    # ---- the tensor-core core
    def mma_accumulate(self, d: ir.Dot, out: str, lay: MmaLayout):
        """out[slot] += dot(a, b) over the fragments this thread holds in `lay`."""
        At = _cg().At
        M, K = shape2(d.a.type.shape)
        kind = "f16" if d.a.type.dtype == "f16" else "bf16"
        pack = C.pack2(kind)
        ar, br = self.region(d.a), self.region(d.b)
        self.prepare_regions(d.a)
        self.prepare_regions(d.b)
        sa = self._source(d, d.a, "a", lay)
        sb = self._source(d, d.b, "b", lay)
        # staging of tensor slices (double-buffered in their loop, or here; or a TMA ring on sm_90)
        now = []
        srcs = []
        ring = None
        for op, src in ((d.a, sa), (d.b, sb)):
            if src[0] == "stage" and src[1].ring:
                live = self.mma_live_loops[id(src[1].loop)]
                rop = self.stream.by_op[id(op)][1]
                ring = (live, rop, streamed_sm90.acquire(self, live, rop))
                src = ("ring",)
            elif src[0] == "stage":
                st = src[1]
                if st.loop is not None and id(st.loop) in self.mma_live_loops:
                    ptr = self._stage_pipelined(op, st)
                else:
                    now.append((op, st))
                    ptr = f"(tnb_smem + {self._stage_off(st)})"
                src = ("smem", f"(({C.STORE_C[st.dtype]}*)({ptr}))", st.pitch, None)
            srcs.append(src)
        if now:
            self._stage_now(now)
        sa, sb = srcs
        kb = (br[2], br[3]) if d.trans_b else (br[0], br[1])
        klo, khi = self.intersect((0, 1, ar[2], ar[3]), (0, 1, kb[0], kb[1]))[2:]
        static_full = _is_int(klo) and _is_int(khi) and klo <= 0 and khi >= K
        if ring is not None:
            self.emit(f"// tensor cores: wgmma m64n{lay.N}k16 {kind} -> f32 (A from registers), {self._lay_text(lay)}; "
                      f"a from {self._src_text(sa)}, b from the ring's stage")
        else:
            self.emit(f"// tensor cores: mma.sync m16n8k16 {kind} -> f32, {self._lay_text(lay)}; "
                      f"a from {self._src_text(sa)}, b from {self._src_text(sb)}")
        if not static_full:
            kl, kh, kf = self.new("klo"), self.new("khi"), self.new("kfull")
            self.emit(f"const int {kl} = {klo}, {kh} = {khi};  // k valid in both a and b")
            self.emit(f"const bool {kf} = {kl} <= 0 && {kh} >= {K};")
            klo, khi = kl, kh
        guard = lay.used < lay.W
        self.emit("{")
        self.ind += 1
        if guard:
            self.emit(f"if (tnb_warp < {lay.used}) {{")
            self.ind += 1
        g, tg = "(tnb_lane >> 2)", "(tnb_lane & 3)"
        wr, wc = self.new("wr"), self.new("wc")
        self.emit(f"const int {wr} = (tnb_warp / {lay.WN}) * {16 * lay.MT}, {wc} = (tnb_warp % {lay.WN}) * {8 * lay.NT};")
        # ldmatrix lane addresses: the element offset of this lane's row, and (unswizzled tiles) its
        # 32-bit shared address, to which each load adds a constant
        la = lb = None
        if sa[0] == "smem":
            la = self.new("la")
            self.emit(f"const int {la} = ({wr} + (tnb_lane & 7) + ((tnb_lane >> 3) & 1) * 8) * {sa[2]} + (tnb_lane >> 4) * 8;"
                      "  // a: this lane's ldmatrix row (element offset)")
            sa = self._lane_base(sa, la)
        if sb[0] == "smem":
            lb = self.new("lb")
            if d.trans_b:
                self.emit(f"const int {lb} = ({wc} + (tnb_lane & 7) + (tnb_lane >> 4) * 8) * {sb[2]} + ((tnb_lane >> 3) & 1) * 8;"
                          "  // b [N, K]: this lane's ldmatrix row")
            else:
                self.emit(f"const int {lb} = ((tnb_lane & 7) + ((tnb_lane >> 3) & 1) * 8) * {sb[2]} + {wc} + (tnb_lane >> 4) * 8;"
                          "  // b [K, N]: this lane's ldmatrix.trans row")
            sb = self._lane_base(sb, lb)
        bs = shape2(d.b.type.shape)
        MT, NT = lay.MT, lay.NT

        def smem_addr(src, lane_off, extra):
            sw = src[3]
            if len(src) > 4 and src[4] is not None:   # the lane's 32-bit address plus a constant
                return f"{src[4]} + ({extra}) * 2"
            o = f"({lane_off} + {extra})"
            if isinstance(sw, PanelSwizzle):
                o = f"({sw.c_expr(o)})"
            else:
                o = f"({o} ^ ((({o}) >> {sw.base + sw.shift}) & {(1 << sw.bits) - 1}) << {sw.base})"
            return f"{src[5]} + {o} * 2"

        def aval(i, k):
            cond = self.in_region(ar, i, k, (M, K))
            if cond is False:
                return "0.0f"
            v = C.convert(self.ev(d.a, At(i, k, None, None, False)), d.a.type.dtype, "f32")
            return v if cond is True else f"(({cond}) ? {v} : 0.0f)"

        def bval(k, n):
            i, j = (n, k) if d.trans_b else (k, n)
            cond = self.in_region(br, i, j, bs)
            if cond is False:
                return "0.0f"
            v = C.convert(self.ev(d.b, At(i, j, None, None, False)), d.b.type.dtype, "f32")
            return v if cond is True else f"(({cond}) ? {v} : 0.0f)"

        def load_a(fa: str, kk: str, k0: str):
            """The A fragments of K step kk for this warp's MT row blocks, into fa[mi * 4 + q]."""
            for mi in range(MT):
                regs = [f"{fa}[{mi * 4 + q}]" for q in range(4)]
                if sa[0] == "smem":
                    self.emit(f"tnb_ldsm_x4({smem_addr(sa, la, f'{mi * 16 * sa[2]} + {kk} * 16')}, {', '.join(regs)});")
                elif sa[0] == "regs":
                    tv = sa[1]
                    ntp = tv.layout.NT
                    w = f"({mi * ntp} + {kk} * 2) * 2"
                    self.emit(f"{regs[0]} = {tv.cname}[{w}]; {regs[1]} = {tv.cname}[{w} + 1]; "
                              f"{regs[2]} = {tv.cname}[{w} + 2]; {regs[3]} = {tv.cname}[{w} + 3];")
                else:
                    r0 = f"({wr} + {mi * 16} + {g})"
                    for q, (ri, ki) in enumerate(((r0, k0), (f"{r0} + 8", k0), (r0, f"{k0} + 8"), (f"{r0} + 8", f"{k0} + 8"))):
                        self.emit(f"{regs[q]} = {pack}({aval(ri, ki)}, {aval(ri, f'{ki} + 1')});")

        def mask_a(fa: str, k0: str):
            """The K-range masks of K step k0; A's fragments in fa ANDed with them. Returns the
            two mask names (k0 .. k0 + 7, k0 + 8 .. k0 + 15)."""
            ml, mh = self.new("ml"), self.new("mh")
            self.emit(f"const unsigned {ml} = tnb_kmask({k0}, {klo}, {khi}), {mh} = tnb_kmask({k0} + 8, {klo}, {khi});")
            if fa is not None:
                for mi in range(MT):
                    self.emit(f"{fa}[{mi * 4}] &= {ml}; {fa}[{mi * 4 + 1}] &= {ml}; {fa}[{mi * 4 + 2}] &= {mh}; "
                              f"{fa}[{mi * 4 + 3}] &= {mh};")
            return ml, mh

        def wg_loop(masked: bool):
            """wgmma: every K step's A fragments first (wgmma reads them asynchronously), one
            fence, then the products of all K steps and row blocks, then wait for them. A shared
            tile already in the layout wgmma reads (`_wgmma_panel`) is read by descriptor instead,
            where it lies on a 1024-byte boundary (the 128-byte swizzle follows address bits)."""
            panel = (None if masked or not SWITCHES.wgmma_ss or sa[0] != "smem" or MT != 1 or lay.WN != 1
                     or not isinstance(d.a, ir.Ref) or not self.wgmma_readable(d.a.sym) else _wgmma_panel(sa))
            if panel is None:
                wg_rs(masked)
                return
            self.emit(f"if (({sa[5]} & 1023) == 0) {{  // a is in wgmma's layout at a 1024-byte boundary: A by descriptor")
            self.ind += 1
            wg_ss(panel)
            self.ind -= 1
            self.emit("} else {  // A from registers, by ldmatrix")
            self.ind += 1
            wg_rs(masked)
            self.ind -= 1
            self.emit("}")

        def wg_ss(panel: int):
            """wgmma with A from shared memory by descriptor: this warpgroup's 64 rows of a, K step
            kk at panel kk / 4 (each `panel` bytes), 32 bytes in per step within it."""
            live, rop, addr = ring
            steps = K // 16
            self.emit("tnb_wgmma_fence();  // the accumulators written above are seen by wgmma")
            a0, d0 = self.new("da"), self.new("db")
            self.emit(f"const unsigned long long {a0} = tnb_gdesc({sa[5]} + (tnb_warp >> 2) * {64 * 128}, 16, 1024, 1);"
                      f"  // A's first k16 step: this warpgroup's 64 rows")
            self.emit(f"const unsigned long long {d0} = {streamed_sm90.b_desc(rop, addr)};  // B's first k16 step")
            kk = self.new("kk")
            self.emit("#pragma unroll")
            self.emit(f"for (int {kk} = 0; {kk} < {steps}; ++{kk}) {{")
            self.ind += 1
            self.emit(f"tnb_wgmma_{kind}_n{lay.N}_t{0 if d.trans_b else 1}(&{out}[0], {a0} + (unsigned long long)"
                      f"(((({kk}) / 4) * {panel} + (({kk}) % 4) * 32) >> 4), {d0} + {streamed_sm90.b_desc_step(rop, kk)});")
            self.ind -= 1
            self.emit("}")
            self.emit("tnb_wgmma_commit();")
            streamed_sm90.after_issue(self, live, rop)
            self.emit("tnb_wgmma_wait<0>();")
            self.emit(f"tnb_reg_fence<{lay.slots}>({out});  // no read of these registers moves above the wait")
            if rop is live["ring"].ops[0]:
                prev = streamed_sm90.deferred_fence(self, live["ring"])
                if prev:
                    self.emit(f"{prev}  // and the last turn's product, retired by the same wait")

        def wg_rs(masked: bool):
            live, rop, addr = ring
            steps = K // 16
            own = sa[0] == "regs" and not masked     # the register tile itself is the A operand
            if own:
                tv = sa[1]
                fa, nfa = tv.cname, tv.layout.slots // 2

                def aword(kk, mi, q):
                    return f"{fa}[({mi * tv.layout.NT} + ({kk}) * 2) * 2 + {q}]"
            else:
                fa, nfa = self.new("fa"), steps * MT * 4
                self.emit(f"unsigned {fa}[{nfa}];  // A fragments of every K step: read by wgmma until its wait")

                def aword(kk, mi, q):
                    return f"{fa}[({kk}) * {MT * 4} + {mi * 4 + q}]"
                kk = self.new("kk")
                self.emit("#pragma unroll")
                self.emit(f"for (int {kk} = 0; {kk} < {steps}; ++{kk}) {{")
                self.ind += 1
                k0 = self.new("k0")
                self.emit(f"const int {k0} = {kk} * 16 + {tg} * 2;")
                fk = self.new("fk")
                self.emit(f"unsigned* const {fk} = &{fa}[{kk} * {MT * 4}];")
                load_a(fk, kk, k0)
                if masked:
                    mask_a(fk, k0)
                self.ind -= 1
                self.emit("}")
            self.emit("tnb_wgmma_fence();  // the accumulators and A fragments written above are seen by wgmma")
            d0 = self.new("db")
            self.emit(f"const unsigned long long {d0} = {streamed_sm90.b_desc(rop, addr)};  // B's first k16 step")
            kk = self.new("kk")
            self.emit("#pragma unroll")
            self.emit(f"for (int {kk} = 0; {kk} < {steps}; ++{kk}) {{")
            self.ind += 1
            db = self.new("db")
            self.emit(f"const unsigned long long {db} = {d0} + {streamed_sm90.b_desc_step(rop, kk)};")
            fn = f"tnb_wgmma_rs_{kind}_n{lay.N}_t{0 if d.trans_b else 1}"
            for mi in range(MT):
                ws = ", ".join(aword(kk, mi, q) for q in range(4))
                self.emit(f"{fn}(&{out}[{mi * NT * 4}], {ws}, {db});")
            self.ind -= 1
            self.emit("}")
            self.emit("tnb_wgmma_commit();")
            streamed_sm90.after_issue(self, live, rop)
            if own and live["ring"].defer and rop is live["ring"].ops[-1]:
                # the turn's last dot accumulates in place and nothing reads its registers until
                # the next turn's first dot: it retires at that dot's wait (streamed_sm90.release)
                self.emit("// retires at the next turn's first wait, which covers it (wgmma groups retire in order)")
                return
            self.emit("tnb_wgmma_wait<0>();")
            self.emit(f"tnb_reg_fence<{lay.slots}>({out}); tnb_reg_fence_u<{nfa}>({fa});"
                      "  // no read of these registers moves above the wait")
            if rop is live["ring"].ops[0]:
                prev = streamed_sm90.deferred_fence(self, live["ring"])
                if prev:
                    self.emit(f"{prev}  // and the last turn's product, retired by the same wait")

        def loop(masked: bool):
            if ring is not None:
                wg_loop(masked)
                return
            kk = self.new("kk")
            self.emit("#pragma unroll")
            self.emit(f"for (int {kk} = 0; {kk} < {K // 16}; ++{kk}) {{")
            self.ind += 1
            fa, fb = self.new("fa"), self.new("fb")
            self.emit(f"unsigned {fa}[{MT * 4}], {fb}[{NT * 2}];")
            k0 = self.new("k0")
            self.emit(f"const int {k0} = {kk} * 16 + {tg} * 2;")
            load_a(fa, kk, k0)
            ni = 0
            while ni < NT:
                if sb[0] == "smem":
                    two = ni + 1 < NT
                    regs = [f"{fb}[{ni * 2 + q}]" for q in range(4 if two else 2)]
                    if d.trans_b:
                        extra = f"{ni * 8 * sb[2]} + {kk} * 16"
                    else:
                        extra = f"{kk} * {16 * sb[2]} + {ni * 8}"
                    fn = ("tnb_ldsm_x4" if two else "tnb_ldsm_x2") + ("" if d.trans_b else "_t")
                    self.emit(f"{fn}({smem_addr(sb, lb, extra)}, {', '.join(regs)});")
                    ni += 2 if two else 1
                else:
                    n0 = f"({wc} + {ni * 8} + {g})"
                    for q, ki in enumerate((k0, f"{k0} + 8")):
                        self.emit(f"{fb}[{ni * 2 + q}] = {pack}({bval(ki, n0)}, {bval(f'{ki} + 1', n0)});")
                    ni += 1
            if masked:
                ml, mh = mask_a(fa if sa[0] != "elem" else None, k0)
                if sb[0] != "elem":
                    for n in range(NT):
                        self.emit(f"{fb}[{n * 2}] &= {ml}; {fb}[{n * 2 + 1}] &= {mh};")
            for mi in range(MT):
                for n in range(NT):
                    self.emit(f"tnb_mma_{kind}(&{out}[{(mi * NT + n) * 4}], {fa}[{mi * 4}], {fa}[{mi * 4 + 1}], "
                              f"{fa}[{mi * 4 + 2}], {fa}[{mi * 4 + 3}], {fb}[{n * 2}], {fb}[{n * 2 + 1}]);")
            self.ind -= 1
            self.emit("}")

        if static_full:
            loop(False)
        else:
            self.emit(f"if ({kf}) {{  // the whole K range valid in a and b")
            self.ind += 1
            loop(False)
            self.ind -= 1
            self.emit("} else {  // fragments masked to the valid K range (invalid elements read as 0)")
            self.ind += 1
            loop(True)
            self.ind -= 1
            self.emit("}")
        if guard:
            self.ind -= 1
            self.emit("}")
        self.ind -= 1
        self.emit("}")
        if ring is not None:
            streamed_sm90.retire_previous(self, ring[0], ring[1])
            streamed_sm90.release(self, ring[0], ring[1])
        return ar, br

    def _lane_base(self, src, lane_off):
        """An ldmatrix source with its 32-bit shared base: (..., lane address) for a row-major
        tile, (..., None, tile address) for a swizzled one (the swizzle applies per load)."""
        ptr, sw = src[1], src[3]
        v = self.new("sa")
        if sw is None:
            self.emit(f"const unsigned {v} = tnb_saddr({ptr}) + {lane_off} * 2;  // this lane's row, 32-bit shared address")
            return src + (v,)
        self.emit(f"const unsigned {v} = tnb_saddr({ptr});")
        return src + (None, v)

    def _src_text(self, src) -> str:
        if src[0] == "smem":
            return f"shared memory (ldmatrix, rows of {src[2]})"
        if src[0] == "regs":
            return f"the registers of {src[1].sym.name}"
        return "elements (masked)"
