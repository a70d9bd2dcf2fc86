"""How each loop and each tensor-core dot of a kernel variant is lowered for a target, and where
the shared memory of that lowering lies: decided once, here, read by the CUDA generator (which
obeys it: `tilenb/codegen/sm90/gemm.py`, `sm90/streamed.py`, `mma/`) and by the views
(`Analysis.loops`, `Analysis.smem`: `tilenb/analysis/smem.py` assembles the shared-memory map).

The decisions, in the order they depend on each other:

1. The target (`target_key`): the one function that turns the `arch` a caller names into the path
   decision: "sm_90" (Hopper: GEMM loops and loops over register rows on TMA + wgmma) or None
   (any GPU: mma.sync m16n8k16 and cp.async). Everything below reads only that key.
2. GEMM loops (`match_loop`, `plan_shape`): on "sm_90", a plain `for` whose body is two tensor
   copies and `acc += dot(a, b)` with f16/bf16 operands, coordinates the same in every thread
   and a tile shape a wgmma pipeline holds, runs as a TMA + wgmma pipeline with its ring of
   stages after every tile of the lifetime analysis except the loop's own copies (which the
   pipeline does not use).
3. Register layouts of tensor-core tiles (`register_layouts`): the wgmma accumulator layout for a
   GEMM loop's accumulator, the mma row layout for the tiles `mma_tiles.mma_register_tiles`
   keeps there, the 2-D warp grid for other `acc += dot` accumulators; every other register tile
   is on the partition's chunks (`CHUNKS`: the generator chooses their vector width).
4. Routes (`route`): how every tile statement meets the tensor cores: swept over fragments, with
   its dots at its own coordinates computed into them; its other dots into shared f32 scratch.
   `t = x` followed at once by `t += dot(a, b)` is routed as the one statement `t = x + dot(a, b)`
   (`fold_pairs`: the first is `Route.folded`), so that both written forms are one program.
5. Staging (`_Lower.allocate`): the tensor slices tensor-core dots read (written in the dot, or
   a `let` view only such dots read: `mma_tiles.dot_staged_views`, `KernelLowering.inline_views`),
   copied into padded shared scratch tiles: double-buffered by cp.async across the turns of a loop whose turns all run,
   else where the dot needs them; after the tiles, 128-byte aligned.
6. Streamed loops (`_Lower.stream`): on "sm_90", a loop whose dots' staged slices are all B
   operands of dots on the mma row layout, with uniform coordinates and wgmma shapes, streams
   them by TMA into a ring of swizzled stages after the scratch (when two stages fit); its
   warpgroups' ping-pong and its waits besides CTA barriers: `analysis.pingpong`.
7. The fallbacks: a ring that does not fit takes its loop back to cp.async; double buffers that
   would push the CTA past the target's opt-in limit are given up for staging where each dot is.

Two target-free rules come before these and are not lowering decisions: which accumulators of
`acc += dot` loops live in registers (`lifetimes.gemm_accumulators`, the spec's GEMM loop) and
which tiles take the mma row layout (`mma_tiles.mma_register_tiles`, which leaves a loop that is
nothing but a GEMM to the rules here); they decide the lifetimes every target shares.

Guarantees: `lower(kir, facts, target)` is a pure function of the IR, the tile places and the
barriers (`Facts`); it never raises (a statement the generator cannot lower carries its reason in
`Route.error`, raised by the generator when it writes that statement). Every byte offset the
generator writes for mma scratch, staging buffers, rings and their mbarriers comes from the
result (`KernelLowering`); `Analysis.loops` names each loop's lowering and why.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

from .. import ir
from ..switches import SWITCHES
from ..types import DTYPES
from ..target import ANY, Target, target as as_target
from .divisibility import Divisibility
from .lifetimes import gemm_accumulators
from .gemm_loops import (GEMM_MAX_STAGES, MAX_ACC_REGS, RING_ALIGN, EpiloguePlan, GemmChoice,  # noqa: F401
                         GemmLoop, Operand, Shape, WgmmaLayout, contiguous_boxes, epilogue_plans, match_loop,
                         plan_shape, split_slice, split_warpgroups)
from .tc_moves import VECTOR_BYTES, Move, slice_move
from .rings import PINGPONG_BARRIERS, Ring, RingOp, Wait  # noqa: F401 (the generator reads them here too)
from .pingpong import decide, ring_waits
from .mma_tiles import (MmaLayout, RowLayout, accumulated_dot, dot_staged_views, grid_layout, identity_dots,
                        mma_dot, mma_register_tiles, plain_accumulation, rows_layout, shape2, statement_parts)

# ---- the target --------------------------------------------------------------------------------
def target_key(arch) -> Target:
    """The target the path decision is made for (`tilenb.target.Target`, parsed from any spelling
    `tilenb.target.target` accepts; None: code for any GPU). Hopper targets (`Target.hopper`) put
    GEMM loops and streamed loops on TMA + wgmma (compiled as sm_90a); every other target keeps
    code every GPU runs (mma.sync, cp.async). Its limits (`dynamic_smem`, `smem_per_sm`,
    `smem_reserved`, `regs_per_sm`) bound the staging, the rings and the accumulators. Raises
    UnsupportedError naming arch when it names no GPU target."""
    return as_target(arch)


# ---- limits and switches -----------------------------------------------------------------------
SMEM_OPTIN = ANY.dynamic_smem   # the largest opt-in per-block limit (tilenb.target.ANY): a bound for any target
SCRATCH_ALIGN = 128          # bytes: mma scratch and staging buffers start on this boundary
STREAM_MAX_STAGES = 4

CHUNKS = "partition chunks"  # a register tile on the partition's chunks (the generator sets their width)

LOWERINGS = ("wgmma TMA pipeline", "streamed attention on wgmma", "mma.sync", "generic")


def _align(n: int, a: int = SCRATCH_ALIGN) -> int:
    return (n + a - 1) // a * a


# ---- what the decisions read -------------------------------------------------------------------
@dataclass
class Facts:
    """What the lowering reads besides the IR: the tiles' places (id(Sym) -> an object with
    `sym`, `space`, `offset`, `bytes`), statement positions (id(Stmt) -> pre-order index), the
    barriers at each position (objects with `where`), the uniformity of scalars and control
    (`expr_varying(e)`, `varying_control`) and the tiles' footprint in bytes."""
    kir: ir.KernelIR
    tiles: Dict[int, object]
    positions: Dict[int, int]
    barriers: Dict[int, list]
    uni: object
    footprint: int

    @property
    def T(self) -> int:
        return self.kir.threads

    def within(self, s) -> bool:
        """Whether the statement's value is computed before its target is written (a "within" barrier)."""
        p = self.positions.get(id(s))
        return any(b.where == "within" for b in self.barriers.get(p, ()))


def compound_value(op, target, value):
    """The value of `target op= value` as one expression (`target op value`), typed as the
    generator evaluates it."""
    if op is None:
        return value
    from ..types import operand_dtype  # noqa: PLC0415
    ta, tb = target.type.dtype, value.type.dtype
    dt = operand_dtype(ta, tb, isinstance(target, ir.Const), isinstance(value, ir.Const))
    typ = ir.TileT(dt, target.type.shape) if isinstance(target.type, ir.TileT) else ir.ScalarT(dt)
    if isinstance(value.type, ir.TileT) and not isinstance(typ, ir.TileT):
        typ = ir.TileT(dt, value.type.shape)
    return ir.Binary(op, target, value, typ, value.span)


# ---- GEMM loops on wgmma (TMA pipeline): their recognition and records are in gemm_loops.py ----


# ---- streamed loops (attention) on wgmma: the ring records (RingOp, Ring) are in rings.py ----------


def blocks_early_copy(t, deps) -> bool:
    """Whether statement `t` keeps a streamed loop's first copies from moving above it: it is not
    a let, var or assignment, or it defines or writes a symbol (id) in `deps`, or it writes a
    tensor or a view (a copy must see every earlier write)."""
    if not isinstance(t, (ir.Let, ir.VarDecl, ir.Assign)):
        return True
    if isinstance(t, (ir.Let, ir.VarDecl)):
        return id(t.sym) in deps or t.sym.kind == "view"
    sym = ir.named_sym(t.target)
    return sym is None or id(sym) in deps or sym.kind in ("tensor", "view")


def is_tile_stmt(s) -> bool:
    """A statement that every thread of the CTA runs together (a tile statement, a tile atomic
    or a barrier); the code generator asks the same (`tilenb.codegen.plan`)."""
    if isinstance(s, ir.Barrier):
        return True
    if isinstance(s, (ir.Let, ir.VarDecl)):
        return isinstance(s.sym.type, ir.TileT)
    if isinstance(s, ir.Assign):
        return isinstance(s.target.type, ir.TileT)
    if isinstance(s, ir.Atomic):
        return s.tile           # a tile atomic (a tensor slice target)
    return False


def early_rings(body, rings: Dict[int, Ring]) -> Dict[int, List[ir.For]]:
    """Streamed loops of this block whose ring (mbarriers and first copies) can be set up
    before earlier statements, so that the first copies are in flight while those run:
    index in `body` -> the loops to set up before that statement. A ring goes up past
    statements that are a let, var or assignment (nothing nested), that define or write no
    symbol its copies or bounds read (scalars, tiles, elements), and that write no tensor or
    view (a copy must see every earlier write); its bytes lie past every tile."""
    out: Dict[int, List[ir.For]] = {}
    if not rings:
        return out
    for j, s in enumerate(body):
        if not (isinstance(s, ir.For) and id(s) in rings and s.unroll <= 1):
            continue
        ring = rings[id(s)]
        exprs = [s.lo, s.hi] + [e for rop in ring.ops for e in (*rop.fixed, rop.row0, rop.col0)]
        deps = {id(y) for e in exprs for x in ir.walk_expr(e) if (y := ir.named_sym(x)) is not None} - {id(s.var)}
        i = j
        while i > 0 and not blocks_early_copy(body[i - 1], deps):
            i -= 1
        if i < j and any(is_tile_stmt(t) for t in body[i:j]):
            out.setdefault(i, []).append(s)
    return out


# ---- tensor-core statements on mma.sync: routes and staging ------------------------------------
@dataclass
class Route:
    """How a tile statement meets the tensor cores: `lay` the fragment layout it is swept in (None:
    the generic path), `frag` the dots at its own coordinates computed into fragments, `scratch` the
    other tensor-core dots, computed into shared scratch tiles first. `error`: why the generator
    cannot write the statement (it raises that), or None. `folded`: the statement is written by
    the next one, whose `value` includes it (`_Lower.fold_pairs`): the generator writes nothing
    for it; `folds`: on that next statement, the folded one (its shared-memory reads are this
    statement's too)."""
    lay: object
    frag: List[ir.Dot]
    scratch: List[ir.Dot]
    domain: Tuple[int, int]
    value: object
    error: Optional[str] = None
    folded: bool = False
    folds: Optional[object] = None


@dataclass
class Stage:
    """A tensor slice read by a tensor-core dot, copied into shared scratch: `off` its (first)
    buffer's byte offset from the scratch base, `bytes` one buffer, `pitch` the row pitch in
    elements; `loop` the For whose turns double-buffer it (None: copied where it is used)."""
    off: int
    bytes: int
    rows: int
    cols: int
    pitch: int
    dtype: str
    loop: Optional[ir.For] = None
    local: bool = True
    ring: bool = False       # streamed by TMA into the loop's ring (codegen/sm90/streamed.py), not cp.async
    src: Optional[ir.Slice] = None   # the tensor slice copied (a view's, when the operand is a view)
    move: Optional[Move] = None      # its 16-byte chunks' proven alignment (`tc_moves`): a run-time test where short


@dataclass
class LoopPipe:
    stages: List[int] = field(default_factory=list)     # id(operand) in body order


def tile_statement(s) -> bool:
    """A statement that writes a tile (a tile let or var that is no view, or an assignment to a tile)."""
    if isinstance(s, (ir.Let, ir.VarDecl)):
        return isinstance(s.sym.type, ir.TileT) and s.sym.kind != "view"
    return isinstance(s, ir.Assign) and isinstance(s.target.type, ir.TileT)


def mma_ok(s: ir.Assign) -> bool:
    """`acc += dot(a, b)` (or `acc = x + dot(a, b)`: `mma_tiles.accumulated_dot`) with f16/bf16
    operands of mma.sync shapes into an f32 tile."""
    d = accumulated_dot(s)
    if d is None:
        return False
    if d.a.type.dtype not in ("f16", "bf16") or d.b.type.dtype != d.a.type.dtype:
        return False
    M, K = d.a.type.shape
    N = d.b.type.shape[0] if d.trans_b else d.b.type.shape[1]
    return M % 16 == 0 and N % 8 == 0 and K % 16 == 0 and s.target.type.dtype == "f32"


# ---- the result -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LoopLowering:
    """One loop of the kernel: its source line, statement position, how it is lowered (one of
    `LOWERINGS`) and why."""
    line: int
    position: int
    lowering: str
    why: str


@dataclass
class KernelLowering:
    """Every lowering decision of one kernel variant for one target (see the module doc).

    gemm: id(For) -> GemmChoice of the GEMM loops on TMA + wgmma; gemm_tried: every GEMM loop taken
    before an accumulator was found unfit (their wgmma functions are emitted; `gemm` is what
    remains); layouts: id(register tile Sym) -> its layout (`CHUNKS` for the partition's);
    routes: id(tile Stmt) -> Route; stages: id(dot operand) -> Stage; scratch_local: id(dot) ->
    offset of its f32 scratch tile after the double buffers; pipes: id(For) -> its double-buffered
    (or ring) operands; rings: id(For) -> Ring of the streamed loops, by_op: id(operand) -> (Ring,
    RingOp); scratch_base,
    pipe_bytes, scratch_bytes: the scratch from its base (double buffers first, then the largest
    statement's local scratch, then the rings); smem_end: bytes of `tnb_smem` before the cluster
    slots (tiles, scratch, rings, GEMM rings)."""
    target: Optional[str]
    gemm: Dict[int, GemmChoice]
    gemm_tried: List[GemmChoice]
    gemm_layouts: Dict[int, WgmmaLayout]
    gemm_end: int
    layouts: Dict[int, object]
    routes: Dict[int, Route]
    stages: Dict[int, Stage]
    scratch_local: Dict[int, int]
    stage_dots: Dict[int, tuple]
    pipes: Dict[int, LoopPipe]
    pipe_bytes: int
    scratch_base: int
    scratch_bytes: int
    rings: Dict[int, Ring]
    by_op: Dict[int, Tuple[Ring, RingOp]]
    smem_end: int
    loops: Tuple[LoopLowering, ...] = ()
    why_not: Dict[int, str] = field(default_factory=dict)    # id(For) -> why a wgmma path was not taken
    by_loop: Dict[int, LoopLowering] = field(default_factory=dict)   # id(For / While) -> its entry of `loops`
    # id(tile Assign) -> the proven alignment of its 16-byte row moves into a tensor (`tc_moves.Move`):
    # the stores a GEMM loop's accumulator may leave by in 16-byte rows (codegen/sm90/gemm.staged_store)
    moves: Dict[int, Move] = field(default_factory=dict)
    # id(tile Assign) -> how that staged store leaves (`gemm_loops.EpiloguePlan`, from the switches)
    epilogues: Dict[int, EpiloguePlan] = field(default_factory=dict)
    # ids of the GEMM loops whose pipeline needs no entry barrier nor fence (TILENB_GEMM_LEAN_SYNC,
    # `gemm_loops.entry_free`; empty with the switch unset)
    lean_entries: Set[int] = field(default_factory=set)
    # id(view Sym) -> the tensor slice of a `let` view only tensor-core dots read
    # (`mma_tiles.dot_staged_views`): it has no tile, and the generator writes each of its reads as
    # that slice written in the dot (the two forms are one program to every path)
    inline_views: Dict[int, ir.Slice] = field(default_factory=dict)
    waits: Tuple[Wait, ...] = ()     # the streamed loops' other waits (`pingpong.ring_waits`): the barriers view's

    def lowering_of(self, loop) -> str:
        """How a loop of the kernel is lowered: one of `LOWERINGS` ("generic" for a loop it has not seen)."""
        lp = self.by_loop.get(id(loop))
        return lp.lowering if lp is not None else "generic"

    @property
    def scratch_end(self) -> int:
        return self.scratch_base + self.scratch_bytes if self.scratch_bytes else 0

    def route(self, s) -> Route:
        r = self.routes.get(id(s))
        if r is None:       # not a tile statement of the kernel's body: the generic path
            target, _, domain, value = statement_parts(s)
            r = Route(None, [], [], domain, value)
        return r

    def scratch_off(self, d: ir.Dot) -> int:
        """Byte offset (from tnb_smem) of the f32 scratch tile of a dot computed into scratch."""
        return self.scratch_base + self.pipe_bytes + self.scratch_local[id(d)]

    def stage_off(self, st: Stage) -> int:
        """Byte offset (from tnb_smem) of a staging buffer (the first, for a double buffer)."""
        return self.scratch_base + (self.pipe_bytes if st.local else 0) + st.off


# ---- the decisions ----------------------------------------------------------------------------------
class _Lower:
    def __init__(self, f: Facts, target: Optional[str]):
        self.f, self.kir, self.target = f, f.kir, target
        self.T = f.T
        self.W = self.T // 32
        self.why_not: Dict[int, str] = {}

    # ---- 2. GEMM loops
    def gemm_loops(self):
        """(taken: id(For) -> GemmChoice, tried in order, accumulator layouts, bytes the rings end at)."""
        f = self.f
        kir = self.kir
        found: List[GemmLoop] = []

        def acc_ok(sym):
            t = f.tiles.get(id(sym))
            return t is not None and t.space == "registers"
        for s in ir.walk_stmts(kir.body):
            if isinstance(s, ir.For):
                m = match_loop(s, acc_ok)
                if m is not None:
                    found.append(m)
        if not self.target.hopper:
            for m in found:
                self.why_not[id(m.loop)] = "a GEMM loop: on sm_90 it can run as a TMA + wgmma pipeline"
            return {}, [], {}, 0
        if not found:
            return {}, [], {}, 0
        matched_assigns = {id(m.assign) for m in found}
        accs = {id(m.acc) for m in found}
        bad: Dict[int, str] = {}
        for s in ir.walk_stmts(kir.body):
            vals = []
            if isinstance(s, ir.Assign) and isinstance(s.target, ir.Ref) and id(s.target.sym) in accs:
                if id(s) not in matched_assigns:
                    vals = [s.value]
            elif isinstance(s, (ir.Let, ir.VarDecl)) and id(s.sym) in accs and s.value is not None:
                vals = [s.value]
            for v in vals:
                if any(isinstance(x, ir.Dot) for x in ir.walk_expr(v)):
                    bad.setdefault(id(s.target.sym if isinstance(s, ir.Assign) else s.sym),
                                   f"its accumulator takes another dot at line {s.span.line}")
        # a statement that combines acc with another register tile needs both in one layout: the
        # other keeps its own (mma.sync or partition), so such an acc keeps mma.sync too
        regs = {k for k, t in f.tiles.items() if t.space == "registers"}
        for s in ir.walk_stmts(kir.body):
            if id(s) in matched_assigns or isinstance(s, (ir.For, ir.While, ir.If)):
                continue
            touched = set()
            for x in (x for e in ir.stmt_exprs(s) for x in ir.walk_expr(e)):
                if isinstance(x, ir.Ref):
                    touched.add(id(x.sym))
                elif isinstance(x, (ir.Slice, ir.Element)):
                    touched.add(id(x.base))
            if isinstance(s, (ir.Let, ir.VarDecl)):
                touched.add(id(s.sym))
            mine = touched & accs
            if mine and (touched & regs) - mine:
                for k in mine:
                    bad.setdefault(k, f"its accumulator meets another register tile at line {s.span.line}")
        taken: Dict[int, GemmChoice] = {}
        tried: List[GemmChoice] = []
        layouts: Dict[int, WgmmaLayout] = {}
        for m in found:
            if id(m.acc) in bad:
                self.why_not[id(m.loop)] = bad[id(m.acc)]
                continue
            # one thread issues the copies for the CTA: every coordinate must be the same in all threads
            coords = list(m.a.fixed) + list(m.b.fixed) + [m.a.outer, m.b.outer if m.b.k_inner else m.b.inner,
                                                          m.loop.lo, m.loop.hi]
            if any(f.uni.expr_varying(e) for e in coords):
                bad[id(m.acc)] = "its copy coordinates differ between threads (thread 0 issues the copies)"
                self.why_not[id(m.loop)] = bad[id(m.acc)]
                continue
            views = {id(v) for v in m.views}
            ring_off = 0
            for t in f.tiles.values():
                if t.space == "shared" and id(t.sym) not in views and t.offset is not None:
                    ring_off = max(ring_off, t.offset + t.bytes)
            shp = plan_shape(m, self.T, ring_off, self.target)
            if shp is None:
                bad[id(m.acc)] = (f"no wgmma pipeline holds it ([{m.TM}, {m.TN}] by {m.TK}, {self.T} threads: TM a "
                                  f"multiple of 64 up to 256, TN of 8 up to 256, TK * 2 of 32, 64 or 128 bytes, "
                                  f"threads a multiple of 128, two stages in shared memory)")
                self.why_not[id(m.loop)] = bad[id(m.acc)]
                continue
            lay = WgmmaLayout(m.TM, m.TN, self.T // 32, shp.GM, shp.GN)
            if layouts.get(id(m.acc), lay) != lay:
                bad[id(m.acc)] = "its accumulator would need two wgmma layouts"
                self.why_not[id(m.loop)] = bad[id(m.acc)]
                continue
            layouts[id(m.acc)] = lay
            ch = GemmChoice(m, shp, ring_off, len(taken))
            taken[id(m.loop)] = ch
            tried.append(ch)
        # an accumulator found unfit late takes every one of its loops back to mma.sync
        for key in [k for k, ch in taken.items() if id(ch.loop.acc) in bad]:
            self.why_not[key] = bad[id(taken[key].loop.acc)]
            del taken[key]
        for key in list(layouts):
            if key in bad:
                del layouts[key]
        end = max([ch.ring_end for ch in tried] + [0]) if taken else 0
        return taken, tried, layouts, end

    # ---- 3. register layouts
    def register_layouts(self, gemm_layouts) -> Dict[int, object]:
        f, kir = self.f, self.kir
        regs = {k for k, t in f.tiles.items() if t.space == "registers"}
        rows = set(mma_register_tiles(kir, gemm_accumulators(kir))) & regs
        decl: Dict[int, ir.Sym] = {}
        accs: Dict[int, List[ir.Assign]] = {}
        for s in ir.walk_stmts(kir.body):
            if isinstance(s, (ir.VarDecl, ir.Let)) and id(s.sym) in regs:
                decl[id(s.sym)] = s.sym
            if isinstance(s, ir.Assign) and isinstance(s.target, ir.Ref) and id(s.target.sym) in regs:
                if isinstance(s.value, ir.Dot) or any(isinstance(x, ir.Dot) for x in ir.walk_expr(s.value)):
                    accs.setdefault(id(s.target.sym), []).append(s)
        out: Dict[int, object] = {}
        for k, sym in decl.items():
            R, Cc = shape2(sym.type.shape)
            lst = accs.get(k, [])
            if k in gemm_layouts:
                out[k] = gemm_layouts[k]                            # the wgmma accumulator layout
            elif k in rows:
                out[k] = rows_layout(sym.type.shape, self.W)        # mma_tiles: the row layout
            elif lst and all(mma_ok(s) for s in lst) and len(sym.type.shape) == 2:
                out[k] = grid_layout(R, Cc, self.W)                 # GEMM accumulator: warp grid
            else:
                out[k] = CHUNKS
        return out

    def reg_layout(self, sym):
        place = self.f.tiles.get(id(sym))
        if place is None or place.space != "registers":
            return None
        return self.layouts.get(id(sym))

    # ---- 4. routes
    def route(self, s) -> Route:
        r = self.routes.get(id(s))
        if r is None:
            r = self.routes[id(s)] = self._route(s)
            r.folded = id(s) in self.folded
            r.folds = self.fused[id(s)][1] if id(s) in self.fused else None
        return r

    def fold_pairs(self) -> Tuple[Set[int], Dict[int, ir.Expr]]:
        """Accumulations written as two statements that are one to the generator: `t = x` (or
        `t op= y`, x its value) followed at once, in the same block, by `t += dot(a, b)` (or
        `t = t + dot(a, b)`, `t = dot(a, b) + t`), t a register tile on a tensor-core layout, is
        written as `t = x + dot(a, b)`, the form that computes the dot inside a larger
        expression (flash attention's `acc = acc * rescale` then `acc += dot(p, v)`): the values
        are the same (x, then the dot added onto it, in f32, with the same valid region), and so
        is the code. Taken when x is the tile's shape and reads no dot and nothing but tiles (not
        through a view), scalars and constants; the dot does not read t; and no barrier stands between the two.
        Returns (id of each first statement, id(second statement) -> (the value it is written
        with, the first statement))."""
        folded: Set[int] = set()
        fused: Dict[int, Tuple[ir.Expr, ir.Stmt]] = {}
        if not self.layouts:
            return folded, fused
        bars = self.f.barriers
        pos = self.f.positions

        def between_free(s1, s2) -> bool:
            after = [b for b in bars.get(pos.get(id(s1)), ()) if b.where != "before"]
            before = [b for b in bars.get(pos.get(id(s2)), ()) if b.where != "after"]
            return not after and not before

        def tiles_only(e) -> bool:
            for x in ir.walk_expr(e):
                if isinstance(x, (ir.Slice, ir.Element, ir.Dot)):
                    return False
                if isinstance(x, ir.Ref) and isinstance(x.type, ir.TileT) and id(x.sym) not in self.f.tiles:
                    return False       # a view
            return True

        def the_dot(s2):
            d = plain_accumulation(s2)
            return d if mma_dot(d) else None

        def visit(body):
            for s1, s2 in zip(body, body[1:]):
                if not (isinstance(s1, ir.Assign) and isinstance(s2, ir.Assign) and id(s1) not in folded
                        and isinstance(s1.target, ir.Ref) and isinstance(s2.target, ir.Ref)
                        and s1.target.sym is s2.target.sym and isinstance(s1.target.type, ir.TileT)):
                    continue
                sym = s1.target.sym
                if not isinstance(self.reg_layout(sym), MmaLayout):
                    continue
                x = compound_value(s1.op, s1.target, s1.value)
                d = the_dot(s2)
                if (d is None or not isinstance(x.type, ir.TileT) or tuple(x.type.shape) != tuple(sym.type.shape)
                        or x.type.dtype != sym.type.dtype or not tiles_only(x)
                        or any(isinstance(y, ir.Ref) and y.sym is sym for y in ir.walk_expr(d))
                        or not between_free(s1, s2) or self.f.within(s1) or self.f.within(s2)):
                    continue
                whole = compound_value(s2.op, s2.target, s2.value)
                v = s2.value if s2.op is None else whole
                parts = (x, d) if (v.b is d) else (d, x)
                folded.add(id(s1))
                fused[id(s2)] = (ir.Binary("+", parts[0], parts[1], whole.type, s2.value.span), s1)
            for s in body:
                for b in ir.child_blocks(s):
                    visit(list(b))
        visit(list(self.kir.body))
        return folded, fused

    def _route(self, s) -> Route:
        target, window, domain, value = statement_parts(s)
        if isinstance(s, ir.Assign) and s.op is not None:
            value = compound_value(s.op, s.target, s.value)
        if id(s) in self.fused:
            value = self.fused[id(s)][0]
        none = Route(None, [], [], domain, value)
        if target is None or value is None or not isinstance(value.type, (ir.TileT, ir.ScalarT)):
            return none
        dots = [x for x in ir.walk_expr(value) if mma_dot(x)] if isinstance(value.type, ir.TileT) else []
        tlay = None if window else self.reg_layout(target)
        mine = (MmaLayout, RowLayout)
        read_mine, read_other = [], False
        for x in ir.walk_expr(value):
            if isinstance(x, ir.Ref) and isinstance(x.type, ir.TileT):
                lay = self.reg_layout(x.sym)
                if isinstance(lay, mine):
                    read_mine.append(lay)
                elif lay is not None:
                    read_other = True
        lay = None
        error = None
        if isinstance(tlay, mine):
            lay = tlay
        elif read_mine:
            if any(isinstance(l, RowLayout) or l.rows_mode for l in read_mine):
                lay = rows_layout(domain, self.W)
            else:
                lay = read_mine[0]
                if any(l != lay for l in read_mine) or (lay.M, lay.N) != tuple(domain):
                    error = "tiles in registers with different tensor-core layouts in one statement"
        elif tlay is None and not read_other and dots:
            idots = identity_dots(value, domain)
            if idots and not self.f.within(s):
                lay = grid_layout(domain[0], domain[1], self.W)
        frag = identity_dots(value, domain) if isinstance(lay, MmaLayout) else []
        scratch = [d for d in dots if not any(d is f for f in frag)]
        return Route(lay, frag, scratch, domain, value, error)

    # ---- 5. staging
    def allocate(self, pipelined: bool, rings=None):
        self.scratch_local = {}
        self.stage_dots = {}          # id(staged operand) -> (dot, statement layout, loop, its tensor slice)
        pipe_bytes = 0
        local_max = 0
        for s in ir.walk_stmts(self.kir.body):
            if id(s) in self.skip or not tile_statement(s):
                continue
            r = self.route(s)
            off = 0
            for d in r.scratch + r.frag:
                if any(d is x for x in r.scratch):
                    M, N = shape2(d.type.shape)
                    self.scratch_local[id(d)] = off
                    off += _align(M * N * 4)
                for op in (d.a, d.b):
                    sl = op if (isinstance(op, ir.Slice) and op.base.kind == "tensor") else self._view_slice(op)
                    if sl is None:
                        continue
                    R, Cc = shape2(op.type.shape)
                    units = Cc // 8
                    pitch = Cc + (8 if units % 2 == 0 else 0)
                    nbytes = _align(R * pitch * 2)
                    loop = self._pipe_loop(s, sl) if pipelined else None
                    self.stage_dots[id(op)] = (d, r.lay if any(d is f for f in r.frag) else None, loop, sl)
                    dt = sl.base.type.dtype
                    if loop is not None and rings and id(loop) in rings:
                        st = Stage(0, 0, R, Cc, pitch, dt, loop, False, ring=True)
                        self.pipes.setdefault(id(loop), LoopPipe()).stages.append(id(op))
                    elif loop is not None:
                        st = Stage(pipe_bytes, nbytes, R, Cc, pitch, dt, loop, False)
                        pipe_bytes += 2 * nbytes
                        self.pipes.setdefault(id(loop), LoopPipe()).stages.append(id(op))
                    else:
                        st = Stage(off, nbytes, R, Cc, pitch, dt)
                        off += nbytes
                    st.src = sl
                    st.move = slice_move(self.kir, self._divisibility(), sl, 8)
                    self.stages[id(op)] = st
            local_max = max(local_max, off)
        self.pipe_bytes = pipe_bytes
        self.scratch_bytes = pipe_bytes + local_max
        self.scratch_base = _align(self.f.footprint) if self.scratch_bytes else self.f.footprint

    def _divisibility(self) -> Divisibility:
        if not hasattr(self, "_div"):
            self._div = Divisibility(self.kir)
        return self._div

    def _view_slice(self, op) -> Optional[ir.Slice]:
        """The tensor slice behind a dot operand that is a `let` view of a tensor with no tile of
        its own (`let k = K[h, kt :+ BC, :]; dot_t(q, k)`, read only by tensor-core dots:
        `mma_tiles.dot_staged_views`): staged like the slice written in the dot, so that the two
        forms are one to every later decision. None for anything else (a staged view's dots read
        its tile)."""
        if not (isinstance(op, ir.Ref) and op.sym.kind == "view"):
            return None
        if not hasattr(self, "_view_lets"):
            self._view_lets = {id(t.sym): t for t in ir.walk_stmts(self.kir.body)
                               if isinstance(t, ir.Let) and t.sym.kind == "view"}
        let = self._view_lets.get(id(op.sym))
        v = let.value if let is not None else None
        if not (isinstance(v, ir.Slice) and v.base.kind == "tensor" and not v.flat):
            return None
        if id(op.sym) in self.f.tiles:    # copied into a tile of its own by its let
            return None
        return copy.copy(v)           # one object per operand: the generator caches regions by object

    def _pipe_loop(self, s, op: ir.Slice) -> Optional[ir.For]:
        """The loop whose turns double-buffer the staging of `op` in statement `s`, or None."""
        L = self.parent.get(id(s))
        if L is None or L.unroll > 1 or id(L) in self.skip or not any(t is s for t in L.body):
            return None
        body = list(ir.walk_stmts(L.body))
        if any(isinstance(t, (ir.Break, ir.Continue, ir.Return)) for t in body):
            return None
        declared = {id(t.sym) for t in body if isinstance(t, (ir.Let, ir.VarDecl))}
        assigned = {id(t.target.sym) for t in body if isinstance(t, ir.Assign) and isinstance(t.target, ir.Ref)}
        for sub in op.subs:
            e = sub.index if isinstance(sub, ir.SubIndex) else sub.start
            for x in ir.walk_expr(e):
                if isinstance(x, (ir.Element, ir.Slice)):
                    return None
                if isinstance(x, ir.Ctx) and x.field in ("thread", "lane", "warp"):
                    return None
                if isinstance(x, ir.Ref):
                    if x.sym is L.var or x.sym.kind in ("dim", "scalar_param", "tensor"):
                        continue
                    if id(x.sym) in declared or id(x.sym) in assigned:
                        return None
        return L

    # ---- 6. streamed loops
    def _ring_op(self, d: ir.Dot, op: ir.Slice, loop: ir.For) -> Optional[RingOp]:
        parts = split_slice(op)
        if parts is None or op.flat:
            return None
        fixed, r, c = parts
        dt = op.base.type.dtype
        if dt not in ("f16", "bf16") or d.a.type.dtype != dt:
            return None
        R, Cc = r.length, c.length
        if not (isinstance(R, int) and isinstance(Cc, int)) or R > 256 or R % 8:
            return None
        # B [N, K] (dot_t): rows are N, columns K; B [K, N]: rows are K, columns N (contiguous)
        N, K = (R, Cc) if d.trans_b else (Cc, R)
        boxes = contiguous_boxes(Cc)
        if boxes is None:
            return None
        span, chunk = boxes
        if N > 256 or N % 8 or K % 16:
            return None
        uni = self.f.uni
        coords = list(fixed) + [r.start, c.start, loop.lo, loop.hi]
        if any(uni.expr_varying(e) for e in coords):
            return None
        if any(isinstance(x, ir.Ref) and x.sym is loop.var for x in ir.walk_expr(c.start)):
            return None
        rop = RingOp(op, d.trans_b, R, Cc, span, chunk, list(fixed), r.start, c.start, dt, dot=d)
        # a TMA box starts on a 16-byte boundary of the contiguous dimension (`tc_moves`): proven
        # here, or tested at run time by the generator (the copy path otherwise)
        rop.col_aligned = self._divisibility().of(c.start) * DTYPES[dt].itemsize % VECTOR_BYTES == 0
        return rop

    def stream_rings(self) -> Optional[Tuple[Dict[int, Ring], Dict[int, Tuple[Ring, RingOp]]]]:
        """The loops streamed on wgmma (codegen/sm90/streamed.py's docstring), before their bytes
        are placed: (id(For) -> Ring, id(operand) -> (Ring, RingOp)), or None."""
        if not self.target.hopper or self.T % 128:
            return None
        loops: Dict[int, Ring] = {}
        bad = set()
        for key, (d, lay, loop, op) in self.stage_dots.items():
            if loop is None:
                continue
            lid = id(loop)
            ok = (key == id(d.b) and isinstance(lay, MmaLayout) and lay.rows_mode and tuple(d.type.shape) == (lay.M, lay.N))
            rop = self._ring_op(d, op, loop) if ok else None
            if rop is None:
                if lid not in bad:
                    self.why_not[lid] = ("a tensor slice its dots read cannot stream by TMA (it must be B of a dot on "
                                         "the mma row layout, with coordinates the same in every thread, a column start "
                                         "fixed in the loop and a wgmma shape)")
                bad.add(lid)
                continue
            rop.key = key
            loops.setdefault(lid, Ring(loop, [])).ops.append(rop)
        rings = {k: v for k, v in loops.items() if k not in bad}
        if not rings:
            return None
        by_op: Dict[int, Tuple[Ring, RingOp]] = {}
        for k, ring in enumerate(rings.values()):
            off = 0
            for j, rop in enumerate(ring.ops):
                rop.off = off
                off += rop.padded
                rop.tmap = f"tnb_sm{k}_{j}"
                by_op[rop.key] = (ring, rop)
            ring.stage_bytes = off
        return rings, by_op

    def place_rings(self, rings: Dict[int, Ring], base: int) -> int:
        """Lay the rings out from byte `base` (after the mma scratch); returns their bytes, or -1
        when one does not fit two stages (the caller then keeps cp.async)."""
        total = 0
        for ring in rings.values():
            ring.off = base + total
            room = self.target.dynamic_smem - ring.off - 1024
            per = ring.stage_bytes + 8 * (len(ring.ops) + 1)
            stages = min(SWITCHES.stream_stages or STREAM_MAX_STAGES, room // per)
            if stages < 2:
                self.why_not[id(ring.loop)] = "two stages of its ring do not fit in shared memory"
                return -1
            # one warpgroup a CTA: two stages, so that several CTAs share an SM and one's softmax
            # overlaps another's products (measured on the H200: 310 against 268 TFLOP/s at D 128)
            if self.T <= 128:
                stages = 2
            ring.stages = stages
            # turns copied ahead: with three stages or more, one less than the ring holds, so that the
            # stage thread 0 refills was freed a whole turn earlier (a warpgroup one turn behind the
            # other does not hold it up)
            ring.ahead = stages - 1 if stages < 3 else stages - 2
            if SWITCHES.stream_ahead:
                ring.ahead = max(1, min(stages - 1, SWITCHES.stream_ahead))
            # the stage thread 0 refills must be freed a turn before: a deferred last dot frees its
            # stage one turn late
            ring.defer = SWITCHES.stream_defer and ring.ahead <= stages - 2 and self._defer_safe(ring)
            ring.pingpong, ring.pingpong_why = decide(ring, self.T, self.f, self.routes, dot_staged_views(self.kir),
                                                      tile_statement)
            total += ring.nbytes
        return total

    def _defer_safe(self, ring: Ring) -> bool:
        """Whether the turn's last dot may retire at the next turn's first wait (wgmma groups retire
        in order, so that wait covers both): the loop body has no break or continue; the first and
        last dots are in different statements of its top level; the last is `t = x + dot(a, B)` (or
        `t += dot(a, B)`) into a register tile t (accumulated in place, nothing read after the dot);
        and no statement after it, nor any up to and including the first dot's (nested ones
        included), names t or what A reads (their registers are the in-flight product's). Records t
        in `ring.defer_acc`."""
        body = list(ring.loop.body)
        if len(ring.ops) < 2 or any(isinstance(x, (ir.Break, ir.Continue)) for x in ir.walk_stmts(body)):
            return False
        first, last = ring.ops[0].dot, ring.ops[-1].dot
        if first is None or last is None or first is last:
            return False

        def where(d):
            for k, st in enumerate(body):
                if any(x is d for e in ir.stmt_exprs(st) for x in ir.walk_expr(e)):
                    return k
            return None
        i0, i1 = where(first), where(last)
        if i0 is None or i1 is None or i0 >= i1:
            return False
        st = body[i1]
        if not (isinstance(st, ir.Assign) and isinstance(st.target, ir.Ref)):
            return False
        v = st.value
        if not ((st.op is None and isinstance(v, ir.Binary) and v.op == "+" and (v.a is last or v.b is last))
                or (st.op == "+" and v is last)):
            return False
        if self.reg_layout(st.target.sym) is None:           # not a register tile
            return False
        held = {id(st.target.sym)} | {id(x.sym) for x in ir.walk_expr(last.a) if isinstance(x, ir.Ref)}
        if any(_names(other, held) for other in body[i1 + 1:] + body[:i0 + 1]):
            return False
        ring.defer_acc = st.target.sym
        return True

    # ---- all of it
    def run(self) -> KernelLowering:
        kir = self.kir
        gemm, tried, gemm_layouts, gemm_end = self.gemm_loops()
        self.layouts = self.register_layouts(gemm_layouts)
        self.folded, self.fused = self.fold_pairs()
        self.routes: Dict[int, Route] = {}
        for s in ir.walk_stmts(kir.body):
            if tile_statement(s):
                self.route(s)
        self.parent: Dict[int, ir.For] = {}

        def walk(body, loop):
            for s in body:
                if loop is not None:
                    self.parent[id(s)] = loop
                for b in ir.child_blocks(s):
                    walk(b, s if isinstance(s, ir.For) else None)
        walk(kir.body, None)
        self.skip = set()
        for s in ir.walk_stmts(kir.body):
            if isinstance(s, ir.For) and id(s) in gemm:
                self.skip |= {id(t) for t in ir.walk_stmts(s.body)}
        self.stages: Dict[int, Stage] = {}
        self.pipes: Dict[int, LoopPipe] = {}
        rings: Dict[int, Ring] = {}
        by_op: Dict[int, Tuple[Ring, RingOp]] = {}
        self.allocate(pipelined=True)
        streamed = self.stream_rings()
        if streamed is not None:
            # loops whose operands stream by TMA into a ring (sm_90): no cp.async buffers for them
            cand, cand_by_op = streamed
            self.stages, self.pipes = {}, {}
            self.allocate(pipelined=True, rings=cand)
            base = self.scratch_base + self.scratch_bytes
            ring_bytes = self.place_rings(cand, base)
            if ring_bytes < 0 or (self.pipe_bytes and base + ring_bytes > self.target.dynamic_smem):
                if ring_bytes >= 0:
                    for lid in cand:
                        self.why_not[lid] = "its ring and the other loops' double buffers do not fit in shared memory"
                self.stages, self.pipes = {}, {}
                self.allocate(pipelined=True)
            else:
                rings, by_op = cand, cand_by_op
                if not self.scratch_bytes:
                    self.scratch_base = self.f.footprint
                self.scratch_bytes += ring_bytes
        if self.pipe_bytes and self.scratch_base + self.scratch_bytes > self.target.dynamic_smem:
            # double buffers would not fit a CTA: stage where each dot needs its operand instead
            for lid in self.pipes:
                self.why_not.setdefault(lid, "double buffers would not fit in shared memory: staged where each dot is")
            self.stages, self.pipes, rings, by_op = {}, {}, {}, {}
            self.allocate(pipelined=False)
        end = self.f.footprint
        if self.scratch_bytes:
            end = max(end, self.scratch_base + self.scratch_bytes)
        if gemm:
            end = max(end, gemm_end)
        low = KernelLowering(self.target, gemm, tried, gemm_layouts, gemm_end, self.layouts, self.routes,
                             self.stages, self.scratch_local, self.stage_dots, self.pipes,
                             self.pipe_bytes, self.scratch_base, self.scratch_bytes, rings, by_op, end,
                             why_not=dict(self.why_not))
        low.inline_views = {id(t.sym): t.value for t in ir.walk_stmts(kir.body)
                            if isinstance(t, ir.Let) and id(t.sym) in dot_staged_views(kir)}
        low.loops = self.loop_summary(low)
        low.waits = tuple(w for ring in rings.values() for w in ring_waits(ring, self.f.positions))
        if gemm:
            low.moves = self.store_moves()
            low.epilogues, low.lean_entries = epilogue_plans(kir, gemm, gemm_layouts)   # experiment switches
        return low

    def store_moves(self) -> Dict[int, Move]:
        """The row moves of every tile statement that writes a tensor slice of 2- or 4-byte
        elements (those a wgmma accumulator's store may take, in 16-byte rows)."""
        out = {}
        for s in ir.walk_stmts(self.kir.body):
            t = s.target if isinstance(s, ir.Assign) else None
            if isinstance(t, ir.Slice) and t.base.kind == "tensor" and isinstance(t.type, ir.TileT):
                isz = DTYPES[t.base.type.dtype].itemsize
                if isz in (2, 4):
                    out[id(s)] = slice_move(self.kir, self._divisibility(), t, 16 // isz)
        return out

    # ---- what `Analysis.loops` says
    def loop_summary(self, low: KernelLowering) -> Tuple[LoopLowering, ...]:
        out = []
        for s in ir.walk_stmts(self.kir.body):
            if not isinstance(s, (ir.For, ir.While)):
                continue
            p = self.f.positions.get(id(s), -1)
            out.append(LoopLowering(s.span.line, p, *self._describe(s, low)))
            low.by_loop[id(s)] = out[-1]
        return tuple(out)

    def _tiles_not_slices(self, s, dots, low: KernelLowering) -> Optional[str]:
        """Why a loop of tensor-core dots on the mma row layout streams nothing on sm_90 when no
        earlier rule said: its dots' B operands are shared tiles (a `var k = K[...]` copy, say),
        and only tensor slices stream. None when that is not the reason."""
        if any(loop is s for (_, _, loop, _) in low.stage_dots.values()):
            return None
        names = []
        for d in dots:
            lay = self._frag_layout(d)
            if not (isinstance(d.b, ir.Ref) and isinstance(lay, MmaLayout) and lay.rows_mode):
                continue
            place = self.f.tiles.get(id(d.b.sym))
            if place is not None and place.space == "shared" and d.b.sym.name not in names:
                names.append(d.b.sym.name)
        return _tile_operand_note(names) if names else None

    def _frag_layout(self, d: ir.Dot):
        """The fragment layout the statement holding dot `d` is swept in (its route's), or None."""
        for r in self.routes.values():
            if any(d is x for x in r.frag):
                return r.lay
        return None

    def _describe(self, s, low: KernelLowering) -> Tuple[str, str]:
        target = str(self.target)
        if id(s) in low.gemm:
            ch = low.gemm[id(s)]
            m, shp = ch.loop, ch.shape
            b = f"[{m.TN}, {m.TK}]" if m.b.k_inner else f"[{m.TK}, {m.TN}]"
            return ("wgmma TMA pipeline",
                    f"{m.acc.name} += dot over {m.a.tensor.name} [{m.TM}, {m.TK}] and {m.b.tensor.name} {b} tiles: "
                    f"thread 0 copies them by TMA into {shp.stages} swizzled stages of {shp.stage_bytes} bytes, "
                    f"wgmma m64n{m.TN // shp.GN}k16 by {self.T // 128} warpgroup(s) ({target})")
        if id(s) in low.rings:
            ring = low.rings[id(s)]
            names = ", ".join(f"{r.slice.base.name} [{r.rows}, {r.cols}]" for r in ring.ops)
            return ("streamed attention on wgmma",
                    f"its dots' tensor slices ({names}) stream by TMA into {ring.stages} stages, {ring.ahead} turn(s) "
                    f"ahead; the dots run on wgmma with A from registers ({target}); warpgroup ping-pong: "
                    f"{ring.pingpong_why}")
        own = [d for t in _own_stmts(s.body) for e in ir.stmt_exprs(t) for d in ir.walk_expr(e) if mma_dot(d)]
        if own:
            lines = sorted({d.span.line for d in own})
            why = (f"its tensor-core dot{'s' * (len(lines) > 1)} (line{'s' * (len(lines) > 1)} "
                   f"{', '.join(map(str, lines))}) run on mma.sync m16n8k16")
            piped = low.pipes.get(id(s))
            if piped is not None and piped.stages:
                n = len(piped.stages)
                why += f"; {n} tensor slice{'s' * (n > 1)} double-buffered by cp.async across its turns"
            note = low.why_not.get(id(s))
            if not note and self.target.hopper:
                note = self._tiles_not_slices(s, own, low)
            if note:
                why += f" (not on wgmma: {note})" if self.target.hopper else f" ({note})"
            return "mma.sync", why
        nested = [t for t in ir.walk_stmts(s.body) if isinstance(t, (ir.For, ir.While))]
        if nested:
            return "generic", "its own statements on the generic path (the loops inside it are described on their own)"
        return "generic", "no tensor-core dot: its statements follow the partition"


def _tile_operand_note(names) -> str:
    return (f"its dots read tile{'s' * (len(names) > 1)} {', '.join(names)}, not tensor slices: only a slice a dot "
            f"reads (written in the dot, or named by a `let` view that only tensor-core dots read) streams by TMA; "
            f"a `var` copies the slice into a tile of its own")


def _own_stmts(body):
    """The statements of a loop body outside nested loops (in nested ifs too)."""
    for s in body:
        yield s
        if isinstance(s, ir.If):
            yield from _own_stmts(s.then)
            yield from _own_stmts(s.orelse)


def _names(st, held) -> bool:
    """Whether a statement (or one nested in it) reads or writes a symbol of `held` (ids)."""
    for s2 in ir.walk_stmts([st]):
        for f in s2.__dataclass_fields__:
            v = getattr(s2, f)
            if isinstance(v, ir.Sym) and id(v) in held:
                return True
        for e in ir.stmt_exprs(s2):
            for x in ir.walk_expr(e):
                sym = ir.named_sym(x)
                if sym is not None and id(sym) in held:
                    return True
    return False


def lower(facts: Facts, target: Optional[str]) -> KernelLowering:
    """Every lowering decision of `facts.kir` for `target` (a `target_key` result). Never raises
    for a checked kernel."""
    return _Lower(facts, target).run()
