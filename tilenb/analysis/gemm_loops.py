"""GEMM loops on wgmma (a TMA pipeline): the recognition of a GEMM loop and the records the
lowering (`tilenb.analysis.lowering`) keeps for it, read by the generator (`codegen/sm90/gemm.py`)
and the views.

Guarantees: `match_loop(s, acc_ok)` recognizes the spec's GEMM loop shape (a plain `for` whose body
is two tensor copies and `acc += dot(a, b)`, `GemmLoop`) or returns None; `plan_shape` chooses its
wgmma tile shape, ring of stages and warpgroup split for a target (`Shape`) or returns None when
no pipeline holds it; `WgmmaLayout` is the wgmma accumulator's register layout;
`plan_tile_loop` recognizes a GEMM loop that is the one loop of a tile loop (`TileLoop`: the
ring carried from tile to tile, the next tile's copy coordinates, the store's own staging) and
re-plans its ring beside that staging, or returns None. All are pure functions of the IR and the
target; none raises.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
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
    tile_loop: Optional["TileLoop"] = None     # the ring carried across the turns of a tile loop

    @property
    def ring_end(self) -> int:
        return self.ring_off + self.shape.ring_bytes


# ---- a GEMM loop inside a tile loop: the ring carried from tile to tile ---------------------------
def _subst(e, env: Dict[int, ir.Expr]):
    """`e` with every Ref to a symbol of `env` replaced by its expression (scalar expressions only)."""
    if isinstance(e, ir.Ref):
        return env.get(id(e.sym), e)
    if isinstance(e, (ir.Const, ir.Ctx)):
        return e
    if isinstance(e, (ir.Unary, ir.Convert)):
        return replace(e, x=_subst(e.x, env))
    if isinstance(e, ir.Binary):
        return replace(e, a=_subst(e.a, env), b=_subst(e.b, env))
    if isinstance(e, ir.Math):
        return replace(e, args=tuple(_subst(x, env) for x in e.args))
    raise _NotScalar()


class _NotScalar(Exception):
    pass


@dataclass
class TileLoop:
    """A GEMM loop on TMA + wgmma that is the one loop of a tile loop (`outer`, a plain `for`
    whose body is scalar lets, the accumulator's `var acc = 0.0`, the GEMM loop and one store of
    the accumulator into a tensor): the ring is carried from one turn of `outer` to the next.
    Its mbarriers are initialised once, before `outer`; the stage and phase of a copy follow one
    count of turns over all tiles; while the last S - 1 turns of a tile run, thread 0 issues the
    first S - 1 copies of the next tile (at the coordinates `next_*`, the tile's lets evaluated
    at the next turn of `outer`), so they land during the tile's epilogue. The store stages the
    accumulator `stage_rows` rows at a time in its own `stage_bytes` at `stage_off`, which no
    stage of the ring overlaps (the copies in flight). With `tma_store` (C a 2-D tensor of 2-byte
    elements, TN a multiple of 64) the staged rows are laid out as the 128-byte swizzle of boxes of
    64 columns (from the first 1024-byte boundary in the staging: its 16 bytes a row of padding
    leave room for that) and leave by bulk tensor stores that thread 0 issues and waits for only
    before the staging is written again."""
    outer: ir.For
    store: ir.Assign
    next_a_outer: ir.Expr
    next_b_n: ir.Expr
    next_a_fixed: List[ir.Expr]
    next_b_fixed: List[ir.Expr]
    stage_off: int
    stage_rows: int
    pitch: int
    tma_store: bool = False

    @property
    def stage_bytes(self) -> int:
        return self.stage_rows * self.pitch

    def describe(self) -> str:
        return (f"the ring runs on across the turns of the loop at line {self.outer.span.line} (mbarriers set up "
                f"once; the next tile's first stages are copied during this tile's store, which stages "
                f"{self.stage_rows} rows at a time in {self.stage_bytes} bytes of its own"
                + (", leaving by TMA bulk stores)" if self.tma_store else ")"))


def match_tile_loop(m: GemmLoop, outer: Optional[ir.For]) -> Optional[Tuple[ir.Assign, list]]:
    """(the store, [next a row start, next b column start, next a fixed, next b fixed]) when the GEMM
    loop `m` sits in tile loop `outer` of the form `TileLoop` describes, else None: `outer` a plain
    `for` (step a constant, no unroll) whose body is scalar lets, `var acc = 0.0`, `m.loop`, and
    `T[...] = acc` of the tile's shape with T neither operand's tensor (the next tile's copies,
    issued before the store, must not read what it writes); the GEMM loop's range the same every
    turn (nothing of the body in it)."""
    if outer is None or outer.unroll > 1 or not isinstance(outer.step, int) or outer.step <= 0:
        return None
    body = list(outer.body)
    if m.loop not in body:
        return None
    at = next(i for i, t in enumerate(body) if t is m.loop)
    before, after = body[:at], body[at + 1:]
    lets = {}
    zeroed = False
    for t in before:
        if isinstance(t, ir.Let) and isinstance(t.sym.type, ir.ScalarT) and t.sym.kind == "let":
            lets[id(t.sym)] = t.value
        elif (isinstance(t, ir.VarDecl) and t.sym is m.acc and isinstance(t.value, ir.Const)
              and float(t.value.value) == 0.0):
            zeroed = True
        else:
            return None
    if not zeroed or len(after) != 1:
        return None
    st = after[0]
    if not (isinstance(st, ir.Assign) and st.op is None and isinstance(st.target, ir.Slice)
            and st.target.base.kind == "tensor" and isinstance(st.value, ir.Ref) and st.value.sym is m.acc
            and tuple(st.target.type.shape) == (m.TM, m.TN)):
        return None
    if st.target.base is m.a.tensor or st.target.base is m.b.tensor:
        return None      # the next tile may read what this one stores: its copies wait for the store
    inner = {id(outer.var)} | set(lets)
    if _uses(m.loop.lo, inner) or _uses(m.loop.hi, inner):
        return None
    # the lets at the next turn: outer.var -> outer.var + step, each let inlined in order
    span = outer.span
    env: Dict[int, ir.Expr] = {id(outer.var): ir.Binary("+", ir.Ref(outer.var, outer.var.type, span),
                                                        ir.Const(outer.step, outer.var.type, span),
                                                        outer.var.type, span)}
    try:
        for t in before:
            if isinstance(t, ir.Let):
                env[id(t.sym)] = _subst(t.value, env)
        nstart = m.b.outer if m.b.k_inner else m.b.inner
        nxt = [_subst(m.a.outer, env), _subst(nstart, env), [_subst(x, env) for x in m.a.fixed],
               [_subst(x, env) for x in m.b.fixed]]
    except _NotScalar:
        return None
    return st, nxt


def plan_tile_loop(m: GemmLoop, outer: Optional[ir.For], threads: int, ring_base: int, target: Target,
                   plain: Shape) -> Optional[Tuple[TileLoop, Shape, int]]:
    """(the TileLoop, the ring's shape, the ring's offset) of a GEMM loop in a tile loop, or None
    when it is not of that form or its ring and staging do not fit: the staging (rows of the
    store's type, 16 bytes of padding) takes as many rows of the tile as leave the ring the stages
    of `plain` (its shape alone), at least 64 (a warpgroup's rows) and a divisor of TM."""
    got = match_tile_loop(m, outer)
    if got is None:
        return None
    st, nxt = got
    isz = {"f16": 2, "bf16": 2, "f32": 4}.get(st.target.base.type.dtype)
    if isz is None:
        return None
    pitch = m.TN * isz + 16
    off = -(-ring_base // 16) * 16
    best = None
    rows = m.TM
    while rows >= 64 and m.TM % rows == 0:
        shp = plan_shape(m, threads, off + rows * pitch, target)
        if shp is not None:
            if shp.stages >= plain.stages:
                best = (rows, shp)
                break
            if best is None or shp.stages > best[1].stages:
                best = (rows, shp)
        rows //= 2
    if best is None:
        return None
    rows, shp = best
    tma_store = (isz == 2 and len(st.target.subs) == 2 and m.TN % 64 == 0 and rows <= 256
                 and all(isinstance(x, ir.SubRange) for x in st.target.subs))
    tl = TileLoop(outer, st, nxt[0], nxt[1], nxt[2], nxt[3], off, rows, pitch, tma_store)
    return tl, shp, off + rows * pitch
