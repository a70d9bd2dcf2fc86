"""GEMM loops on wgmma (a TMA pipeline): the recognition of a GEMM loop and the records the
lowering (`tilenb.analysis.lowering`) keeps for it, read by the generator (`codegen/sm90/gemm.py`)
and the views.

Guarantees: `match_loop(s, acc_ok)` recognizes the spec's GEMM loop shape (a plain `for` whose body
is two tensor copies and `acc += dot(a, b)`, `GemmLoop`) or returns None; `plan_shape` chooses its
wgmma tile shape, ring of stages and warpgroup split for a target (`Shape`) or returns None when
no pipeline holds it; `WgmmaLayout` is the wgmma accumulator's register layout. Under the
experiment switches of the GEMM epilogue (`tilenb.switches`; off by default, and then nothing
below changes any decision), `epilogue_plans` says how each staged store of an accumulator's tile
leaves (`EpiloguePlan`: TMA store, per warpgroup, full staging, no barrier after its loop) and
which pipelines need no entry barrier (`entry_free`). All are pure functions of the IR, the
target and the switches; none raises.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from .. import ir
from ..switches import SWITCHES
from ..target import Target
from .mma_tiles import plain_accumulation

RING_ALIGN = 1024            # bytes: a TMA ring's stages start on this boundary (the 128-byte swizzle repeats)
GEMM_MAX_STAGES = 8
MAX_ACC_REGS = 128           # f32 accumulator registers a thread may hold


# ---- GEMM loops on wgmma (TMA pipeline) ----------------------------------------------------------
@dataclass(frozen=True)
class WgmmaLayout:
    """Registers: the f32 accumulators of wgmma m64nWNk16. The CTA's [M, N] tile is split among
    warpgroups, GM along rows and GN along columns (warpgroup g -> row part g / GN, column part
    g % GN); each warpgroup's [WM, WN] part is WM / 64 products of m64. Warp w holds, in each
    m64 part, the 16 rows 16 (w % 4) ..; lane l holds rows l / 4 and l / 4 + 8 and columns
    2 (l % 4), 2 (l % 4) + 1 of every 8-column block, slot (m * WN / 8 + block) * 4 + e."""
    M: int
    N: int
    W: int        # warps of the CTA
    GM: int
    GN: int

    @property
    def R(self):
        return self.M

    @property
    def C(self):
        return self.N

    @property
    def WM(self):
        return self.M // self.GM

    @property
    def WN(self):
        return self.N // self.GN

    @property
    def mi(self):
        return self.WM // 64

    @property
    def slots(self):
        return self.mi * self.WN // 2

    what = "wgmma accumulator fragments"


def split_warpgroups(M: int, N: int, G: int, n_chunk: int) -> Optional[Tuple[int, int]]:
    """(GM, GN) for G warpgroups over an [M, N] tile: rows first, each part a multiple of 64
    rows and of `n_chunk` columns, at most 256 columns a wgmma."""
    for gm in range(G, 0, -1):
        if G % gm:
            continue
        gn = G // gm
        if M % (64 * gm) or N % gn:
            continue
        wn = N // gn
        if wn % 8 or wn > 256 or (gn > 1 and wn % n_chunk):
            continue
        return gm, gn
    return None


@dataclass
class Operand:
    tensor: ir.Sym
    fixed: List[ir.Expr]          # indices of the leading dims
    outer: ir.Expr                # start of the second-to-last dim's range
    inner: ir.Expr                # start of the last dim's range
    box: Tuple[int, int]          # (rows, cols) of the tile: second-to-last, last
    k_inner: bool                 # K runs along the last (contiguous) dim


@dataclass
class GemmLoop:
    loop: ir.For
    acc: ir.Sym
    assign: ir.Assign
    dtype: str
    TM: int
    TN: int
    TK: int
    a: Operand
    b: Operand
    views: Tuple[ir.Sym, ...]


def _uses(e, syms: set) -> bool:
    return any(isinstance(x, ir.Ref) and id(x.sym) in syms for x in ir.walk_expr(e))


def _operand(e, lets: Dict[int, ir.Let]) -> Optional[ir.Slice]:
    if isinstance(e, ir.Ref) and id(e.sym) in lets:
        e = lets[id(e.sym)].value
    if isinstance(e, ir.Slice) and not e.flat and e.base.kind == "tensor":
        return e
    return None


def split_slice(sl: ir.Slice) -> Optional[Tuple[List[ir.Expr], ir.SubRange, ir.SubRange]]:
    """(fixed leading indices, row range, column range) of a slice whose last two subscripts are
    ranges and whose others (at most three) are indices; None otherwise."""
    subs = sl.subs
    if len(subs) < 2 or len(subs) > 5:
        return None
    if not all(isinstance(x, ir.SubIndex) for x in subs[:-2]):
        return None
    r, c = subs[-2], subs[-1]
    if not (isinstance(r, ir.SubRange) and isinstance(c, ir.SubRange)):
        return None
    return [x.index for x in subs[:-2]], r, c


def _is_var(e, sym) -> bool:
    return isinstance(e, ir.Ref) and e.sym is sym


def match_loop(s: ir.For, acc_ok) -> Optional[GemmLoop]:
    """The GemmLoop of `s`, or None when `s` is not of the GEMM-loop form (codegen/sm90/gemm.py's
    docstring): lets (or var tiles) copied from tensors, read by the dot alone, and one
    `acc += dot(a, b)` (or dot_t; or `acc = acc + dot(a, b)`: `mma_tiles.plain_accumulation`)
    into an f32 rank-2 tile `acc_ok` accepts."""
    if s.unroll > 1 or not isinstance(s.step, int) or s.step <= 0:
        return None
    lets: Dict[int, ir.Let] = {}
    assign = None
    for t in s.body:
        if isinstance(t, ir.Let) and t.sym.kind == "view":
            lets[id(t.sym)] = t
        elif (isinstance(t, (ir.Let, ir.VarDecl)) and isinstance(t.value, ir.Slice)
              and isinstance(t.sym.type, ir.TileT) and t.value.base.kind == "tensor"
              and t.sym.type.dtype == t.value.base.type.dtype):
            lets[id(t.sym)] = t      # a tile copied from a tensor and read by the dot alone
        elif isinstance(t, ir.Assign) and assign is None:
            assign = t
        else:
            return None
    d = plain_accumulation(assign) if assign is not None else None    # acc += dot, acc = acc + dot
    if d is None:
        return None
    acc = assign.target.sym
    if not acc_ok(acc) or acc.type.dtype != "f32" or len(acc.type.shape) != 2:
        return None
    sa, sb = _operand(d.a, lets), _operand(d.b, lets)
    if sa is None or sb is None:
        return None
    dt = sa.base.type.dtype
    if dt not in ("f16", "bf16") or sb.base.type.dtype != dt:
        return None
    pa, pb = split_slice(sa), split_slice(sb)
    if pa is None or pb is None:
        return None
    kv = s.var
    TM, TN = acc.type.shape
    fa, ra, ca = pa
    fb, rb, cb = pb
    if not _is_var(ca.start, kv) or ca.length != s.step or ra.length != TM:
        return None
    TK = s.step
    if d.trans_b:
        if not _is_var(cb.start, kv) or cb.length != TK or rb.length != TN:
            return None
        b = Operand(sb.base, fb, rb.start, cb.start, (TN, TK), True)
    else:
        if not _is_var(rb.start, kv) or rb.length != TK or cb.length != TN:
            return None
        b = Operand(sb.base, fb, rb.start, cb.start, (TK, TN), False)
    a = Operand(sa.base, fa, ra.start, ca.start, (TM, TK), True)
    inv = {id(kv)} | set(lets)
    for e in list(fa) + list(fb) + [ra.start, rb.start if d.trans_b else cb.start]:
        if _uses(e, inv):
            return None
    # every let or tile of the body is an operand of the dot (nothing else reads or writes them)
    used = {id(x.sym) for x in (d.a, d.b) if isinstance(x, ir.Ref)}
    if set(lets) - used:
        return None
    return GemmLoop(s, acc, assign, dt, TM, TN, TK, a, b, tuple(lets[k].sym for k in lets))


@dataclass
class Shape:
    """How one matched loop is laid out: swizzle spans, stages, warpgroup split."""
    sw_a: int            # bytes of one swizzled row of A's stage (= TK * 2)
    sw_b: int            # bytes of one swizzled row of B's stage
    chunk_b: int         # B not transposed: columns per swizzled chunk; else TN
    a_bytes: int
    b_bytes: int
    stage_bytes: int
    stages: int
    GM: int
    GN: int

    @property
    def ring_bytes(self) -> int:
        """The ring's shared memory from its offset: alignment slack, the stages, the mbarriers."""
        return RING_ALIGN + self.stages * self.stage_bytes + 16 * self.stages


def contiguous_boxes(n: int) -> Optional[Tuple[int, int]]:
    """(swizzle span in bytes, elements a TMA box holds along the row) for a shared tile whose
    rows hold n contiguous 2-byte elements: one box as wide as the row when the row is 32, 64 or
    128 bytes, else boxes of 64 elements (128-byte span) when n is a multiple of 64; None when
    neither (no swizzle mode fits)."""
    if n * 2 in (32, 64, 128):
        return n * 2, n
    if n % 64 == 0:
        return 128, 64
    return None


def plan_shape(m: GemmLoop, threads: int, ring_base: int, target: Target) -> Optional[Shape]:
    """The pipeline of a matched GEMM loop for a CTA of `threads` whose ring starts at byte
    `ring_base`, or None when no wgmma pipeline holds it (threads not a multiple of 128, TM not a
    multiple of 64 up to 256, TN not a multiple of 8 up to 256, TK * 2 not 32, 64 or 128 bytes,
    no warpgroup split, too many accumulator registers, fewer than two stages fit)."""
    if threads % 128:
        return None
    G = threads // 128
    TM, TN, TK = m.TM, m.TN, m.TK
    if TM % 64 or TN % 8 or TM > 256 or TN > 256 or TK * 2 not in (32, 64, 128):
        return None
    sw_a = TK * 2
    if m.b.k_inner:
        sw_b, chunk = TK * 2, 8
    else:
        boxes = contiguous_boxes(TN)
        if boxes is None:
            return None
        sw_b, chunk = boxes
    split = split_warpgroups(TM, TN, G, chunk)
    if split is None:
        return None
    # f32 accumulators a thread holds: at most 128, and room for ~56 others within the
    # registers of an SM (tilenb.target) that one CTA of `threads` may use
    if TM * TN // threads > min(MAX_ACC_REGS, target.regs_per_sm // threads - 56):
        return None
    a_bytes = TM * TK * 2
    b_bytes = TK * TN * 2
    a_pad = -(-a_bytes // 1024) * 1024
    b_pad = -(-b_bytes // 1024) * 1024
    stage = a_pad + b_pad
    room = target.dynamic_smem - ring_base - 1024 - 16 * GEMM_MAX_STAGES
    stages = min(GEMM_MAX_STAGES, room // stage)
    if stages < 2:
        return None
    # two CTAs on an SM overlap one's epilogue with the other's main loop: take one stage less
    # for that when three or more remain (half an SM's shared memory, less what the driver keeps a CTA)
    two = (target.smem_per_sm // 2 - target.smem_reserved - ring_base - 1024 - 16 * GEMM_MAX_STAGES) // stage
    if SWITCHES.gemm_stages:      # TILENB_GEMM_STAGES (tilenb.switches): at most this many
        stages = max(2, min(stages, SWITCHES.gemm_stages))
    elif two >= 3 and TM * TN // threads <= 64:
        stages = min(stages, two)
    return Shape(sw_a, sw_b, chunk, a_bytes, b_bytes, stage, stages, split[0], split[1])


@dataclass
class GemmChoice:
    """A GEMM loop taken by the TMA + wgmma pipeline: its match, its pipeline shape, the byte
    offset of its ring (the ring's stages start at the first 1024-byte boundary from there, its
    mbarriers follow them) and its index among the loops taken (its tensor maps' names)."""
    loop: GemmLoop
    shape: Shape
    ring_off: int
    index: int

    @property
    def ring_end(self) -> int:
        return self.ring_off + self.shape.ring_bytes


# ---- the epilogue: how a wgmma accumulator's staged store leaves (experiment switches) ----------
@dataclass(frozen=True)
class EpiloguePlan:
    """How the staged store (`codegen/sm90/gemm.staged_store`) of tile statement
    `T[..., r :+ M, c :+ N] = value` writes its [M, N] tile, when an experiment switch
    (`tilenb.switches`: TILENB_GEMM_TMA_STORE, TILENB_GEMM_WG_EPILOGUE, TILENB_GEMM_FULL_STAGE,
    TILENB_GEMM_LEAN_SYNC) asks for more than the default path. The tile is split into parts of [rows, cols]
    elements: the whole tile, or (per_warpgroup) the [WM, WN] part each warpgroup holds of the
    accumulator layout `layout`, which that warpgroup stages and stores alone between named
    barriers of its 128 threads.

    - tma: the staged part leaves shared memory by bulk tensor stores (TMA) of boxes of
      [rows, box_cols] elements, issued by the part's first thread, where the launch allows it
      (C's tensor map built, the first column 16-byte aligned, the value's valid region equal to
      the part of the tile inside the tensor: TMA writes exactly the elements inside the tensor);
      the staging area is then laid out as those boxes (`span`-byte swizzled rows), and the
      threads' 16-byte stores read the same layout where TMA is not allowed.
    - in_loop: the statement lies inside a loop: the issuing thread waits until the copy engine's
      writes are done, not only its reads of shared memory, before a later turn's store.
    - last: the statement is the kernel's last top-level statement: no barrier after it.
    - after_loop (TILENB_GEMM_LEAN_SYNC): the statement comes right after a GEMM loop of the
      pipeline in the same block, whose last barrier already orders every use of the ring before
      the staging: no barrier of its own before it.
    - full_stage: the value reads registers, scalars and constants alone, so every element is
      staged without a valid-region test (the stores to the tensor keep theirs); for 2-byte
      elements by `stmatrix` (each warp 16 rows x 16 columns an instruction).
    """
    tensor: str
    dtype: str
    layout: WgmmaLayout
    per_warpgroup: bool
    tma: bool
    full_stage: bool
    in_loop: bool
    last: bool
    rows: int
    cols: int
    box_cols: int
    span: int
    fixed: int              # the tensor's leading dimensions fixed by an index
    after_loop: bool = False   # TILENB_GEMM_LEAN_SYNC: it follows its GEMM loop directly (no barrier before it)

    @property
    def itemsize(self) -> int:
        return 2 if self.dtype in ("f16", "bf16") else 4

    @property
    def stmatrix(self) -> bool:
        """Whether the full staging is written by stmatrix (2-byte elements, 16-column blocks a warp)."""
        return self.full_stage and self.itemsize == 2 and self.layout.WN % 16 == 0

    @property
    def stage_bytes(self) -> int:
        """Bytes of shared memory the staged tile needs (boxes; or rows padded by 16 bytes)."""
        if self.tma:
            return self.layout.M * self.layout.N * self.itemsize
        return self.layout.M * (self.layout.N * self.itemsize + 16)


def _register_value(e, acc_ids) -> bool:
    """Whether value `e` reads only wgmma accumulators, scalars and constants (nothing outside
    registers, so any element may be computed)."""
    for x in ir.walk_expr(e):
        if isinstance(x, (ir.Const, ir.Ctx, ir.Unary, ir.Binary, ir.Math, ir.Convert)):
            continue
        if isinstance(x, ir.Ref) and (id(x.sym) in acc_ids or isinstance(x.sym.type, ir.ScalarT)):
            continue
        return False
    return True


def _box_cols(cols: int, isz: int) -> Optional[int]:
    """Elements a row of a TMA box holds over `cols` columns: the widest swizzle span (128, 64,
    32 bytes) whose elements divide `cols`; None when none does."""
    for span in (128, 64, 32):
        if cols % (span // isz) == 0:
            return span // isz
    return None


def plan_epilogue(kir: ir.KernelIR, s, layouts: Dict[int, WgmmaLayout], room: int,
                  tma_store: bool, per_warpgroup: bool, full_stage: bool,
                  lean: bool = False, loops: frozenset = frozenset()) -> Optional[EpiloguePlan]:
    """The `EpiloguePlan` of tile statement `s` when it is a store of a wgmma accumulator's tile
    (`layouts`: id(acc Sym) -> its layout) into a tensor slice whose last two subscripts are
    ranges of the layout's [M, N] and whose others are indices; `room`: bytes of the GEMM ring
    the staged tile may use. TMA only where the tensor is written by `s` alone and read by no
    statement (the copy engine's writes need no ordering with other accesses of the kernel).
    `lean`, `loops` (ids of the GEMM loops on the pipeline): TILENB_GEMM_LEAN_SYNC's `after_loop`.
    None when the statement does not qualify or no switch asks for a change."""
    if not (tma_store or per_warpgroup or full_stage or lean) or not isinstance(s, ir.Assign) or s.op is not None:
        return None
    t = s.target
    if not (isinstance(t, ir.Slice) and t.base.kind == "tensor" and not t.flat and isinstance(t.type, ir.TileT)):
        return None
    parts = split_slice(t)
    if parts is None:
        return None
    fixed, rr, cr = parts
    lay = next((layouts[id(x.sym)] for x in ir.walk_expr(s.value)
                if isinstance(x, ir.Ref) and id(x.sym) in layouts), None)
    if lay is None or (rr.length, cr.length) != (lay.M, lay.N):
        return None
    dt = t.base.type.dtype
    if dt not in ("f16", "bf16", "f32"):
        return None
    isz = 4 if dt == "f32" else 2
    rows, cols = (lay.WM, lay.WN) if per_warpgroup else (lay.M, lay.N)
    if per_warpgroup and cols % (16 // isz):
        per_warpgroup, rows, cols = False, lay.M, lay.N
    box = _box_cols(cols, isz) if tma_store else None
    if box is not None:
        others = [x for x in ir.walk_stmts(kir.body) if x is not s]
        if any(ir.named_sym(e) is t.base for x in others for y in ir.stmt_exprs(x) for e in ir.walk_expr(y)):
            box = None       # another statement reads or writes the tensor
    full_stage = full_stage and _register_value(s.value, set(layouts))
    after = lean and _follows(kir.body, s, loops)
    if box is None and not per_warpgroup and not full_stage and not after:
        return None
    in_loop, last = _position(kir.body, s)
    plan = EpiloguePlan(t.base.name, dt, lay, per_warpgroup, box is not None, full_stage, in_loop, last,
                        rows, cols, box or 0, (box or 0) * isz, len(fixed), after)
    if plan.stage_bytes > room:
        return None
    return plan


def _position(body, s) -> Tuple[bool, bool]:
    """(whether `s` lies inside a loop, whether it is the last statement of the kernel's top level)."""
    if body and body[-1] is s:
        return False, True

    def inside(block, looped) -> Optional[bool]:
        for x in block:
            if x is s:
                return looped
            for b in ir.child_blocks(x):
                r = inside(b, looped or isinstance(x, (ir.For, ir.While)))
                if r is not None:
                    return r
        return None
    return bool(inside(body, False)), False


def _follows(body, s, loops) -> bool:
    """Whether statement `s` comes right after one of the loops `loops` (ids) in the same block."""
    for block in [body] + [b for x in ir.walk_stmts(body) for b in ir.child_blocks(x)]:
        for prev, x in zip(block, block[1:]):
            if x is s:
                return id(prev) in loops
    return False


def entry_free(kir: ir.KernelIR, loop, acc_ids) -> bool:
    """TILENB_GEMM_LEAN_SYNC: whether GEMM loop `loop` is a statement of the kernel's top level
    before which no statement touches memory: only lets of scalars (reading no tensor element)
    and wgmma accumulators (`acc_ids`) set to a constant. Its pipeline then needs no barrier and
    no proxy fence before its mbarriers are set up (nothing earlier uses the ring's bytes or
    wrote what its copies read)."""
    for x in kir.body:
        if x is loop:
            return True
        if isinstance(x, ir.Let) and isinstance(x.sym.type, ir.ScalarT) and not any(
                isinstance(e, (ir.Element, ir.Slice, ir.Dot, ir.Reduce)) for e in ir.walk_expr(x.value)):
            continue
        if isinstance(x, ir.VarDecl) and id(x.sym) in acc_ids and isinstance(x.value, ir.Const):
            continue
        return False
    return False


def epilogue_plans(kir: ir.KernelIR, gemm: Dict[int, GemmChoice], layouts: Dict[int, WgmmaLayout]):
    """(id(statement) -> EpiloguePlan, ids of the loops `entry_free`) for the GEMM loops `gemm`
    (id(For) -> GemmChoice) as the experiment switches (`SWITCHES`) ask; both empty with the
    switches unset. Stores are staged in the ring of the lowest offset (`staged_store`'s)."""
    sw = SWITCHES
    plans: Dict[int, EpiloguePlan] = {}
    if gemm and (sw.gemm_tma_store or sw.gemm_wg_epilogue or sw.gemm_full_stage or sw.gemm_lean_sync):
        ring = min(gemm.values(), key=lambda ch: ch.ring_off)
        room = ring.shape.stages * ring.shape.stage_bytes
        for s in ir.walk_stmts(kir.body):
            p = plan_epilogue(kir, s, layouts, room, sw.gemm_tma_store, sw.gemm_wg_epilogue, sw.gemm_full_stage,
                              sw.gemm_lean_sync, frozenset(gemm))
            if p is not None:
                plans[id(s)] = p
    lean = {lid for lid, ch in gemm.items() if entry_free(kir, ch.loop.loop, set(layouts))} if sw.gemm_lean_sync else set()
    return plans, lean
