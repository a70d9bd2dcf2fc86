"""Tiles kept in registers on the tensor-core (mma.sync) row layout.

Flash attention keeps its score tile `s`, probabilities `p`, accumulator `acc` and the row
statistics `m`, `l` of a block of query rows in the registers of the warps that own those rows.
This module decides which tiles of a kernel variant can live that way; `tile_lifetimes` puts them
in registers (no shared-memory bytes), and the CUDA generator lays them out as below.

The layout ("rows layout" of a tile of M rows, W warps, M a multiple of 16 W): warp w owns the
M / (16 W) consecutive 16-row blocks starting at block w * M / (16 W), all columns. A [M, N] tile
(N a multiple of 8) is held as the m16n8 accumulator fragments of mma.sync (lane l: rows l/4 and
l/4 + 8 of each block, columns 2 (l%4) and 2 (l%4) + 1 of each 8-column block); a [M, 1] tile
holds in each lane the values of the rows it holds in the fragments (the four lanes of a quad
hold the same values). Every operation on such tiles then stays inside the warp: elementwise
statements over [M, N] and [M, 1] (a [M, 1] operand broadcast along the columns reads the lane's
own row values), row reductions (the lane's elements, then two shuffles in the quad), and a dot
whose result has those rows (an f16/bf16 register tile as its first operand is already in the
A-operand layout of the next mma: the accumulator layout of m16n8k16 maps onto it).

Guarantees of `mma_register_tiles(kir)`: every tile it returns is used only in those ways:
declared or assigned whole (never through a window, `flat`, an element access or a let view),
and read only (a) elementwise at the coordinates of the statement's own [M, N] or [M, 1] rows
(the statement's iteration space has the same M rows and a column count that is 1 or a multiple
of 8), (b) inside a row reduction read that way, or (c) as the first operand of an f16/bf16 dot
evaluated at the statement's own coordinates. Each returned tile belongs to a group of tiles
linked through such statements that involves a tensor-core dot; groups that only hold GEMM
accumulators (`acc += dot`, kept in registers anyway, on a 2-D warp grid) are left out, and
groups are kept within REGISTER_BUDGET 32-bit registers per thread (a tile read only as a dot's
first operand is given up first: it stays in shared memory).

Two target-free rules about how tensor-core work is written live here too, so that every stage
reads one answer: `accumulated_dot` / `plain_accumulation` (which statements accumulate a dot
onto their target: `acc += dot`, `acc = x + dot`) and `dot_staged_views` (the `let` views that
are their slice written in the dot: no tile of their own).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Set, Tuple

from .. import ir
from ..caches import per_kernel
from .partition import as_2d as shape2   # the name the code generator imports

REGISTER_BUDGET = 176     # 32-bit registers per thread the promoted tiles may take together
ELEMENTWISE = (ir.Unary, ir.Binary, ir.Math, ir.Convert)


# ---- the register layouts of tensor-core tiles (the analysis assigns them: lowering.py; the CUDA
# generator sweeps them: codegen/mma/) ----
@dataclass(frozen=True)
class MmaLayout:
    """Registers: the m16n8 f32 accumulator fragments of mma.sync for an [M, N] tile. Warps form a
    WM x WN grid (warp w at grid row w // WN, column w % WN; warps past WM * WN hold nothing); each
    holds MT x NT blocks of 16 x 8: block rows (w // WN) * MT + mi, block columns (w % WN) * NT + ni,
    slot (mi * NT + ni) * 4 + e; lane l holds rows l / 4 (e = 0, 1) and l / 4 + 8 (e = 2, 3) and
    columns 2 (l % 4) + (e & 1) of its blocks. 16-bit tiles are kept two values a register (slot s
    in word s / 2, low half for even s)."""
    M: int
    N: int
    W: int
    WM: int
    WN: int

    @property
    def MT(self) -> int:
        return self.M // (16 * self.WM)

    @property
    def NT(self) -> int:
        return self.N // (8 * self.WN)

    @property
    def per_warp(self) -> int:
        return self.MT * self.NT

    @property
    def slots(self) -> int:
        return self.per_warp * 4

    @property
    def used(self) -> int:
        return self.WM * self.WN

    @property
    def rows_mode(self) -> bool:
        return self.WN == 1 and self.WM == self.W


@dataclass(frozen=True)
class RowLayout:
    """Registers: an [M, 1] tile next to rows-mode fragments of M rows: lane l of warp w holds the
    rows it holds there, slot mi * 2 + h for row (w * MT + mi) * 16 + l / 4 + 8 h (the four lanes of
    a quad hold the same values)."""
    M: int
    W: int

    @property
    def N(self) -> int:
        return 1

    @property
    def MT(self) -> int:
        return self.M // (16 * self.W)

    @property
    def slots(self) -> int:
        return self.MT * 2


def rows_layout(domain, W):
    M, N = domain
    return RowLayout(M, W) if N == 1 else MmaLayout(M, N, W, W, 1)


def grid_layout(M: int, N: int, W: int) -> MmaLayout:
    """The warp grid for an [M, N] result: as many warps used as the blocks allow, then the fewest
    fragment loads per mma (A fragments MT, B fragments NT / 2 per 16-deep step)."""
    best = None
    bm, bn = M // 16, N // 8
    for wm in range(1, W + 1):
        for wn in range(1, W // wm + 1):
            if bm % wm or bn % wn:
                continue
            mt, nt = bm // wm, bn // wn
            key = (-(wm * wn), (mt + nt / 2) / (mt * nt), -mt)
            if best is None or key < best[0]:
                best = (key, wm, wn)
    return MmaLayout(M, N, W, best[1], best[2])


def packed(lay, dtype) -> bool:
    return isinstance(lay, MmaLayout) and dtype in ("f16", "bf16")


def mma_dot(d) -> bool:
    """A dot that tensor cores compute (mma.sync m16n8k16): f16 or bf16 operands of one type, an
    f32 result, rank-2 operands, M a multiple of 16, N of 8 and K of 16."""
    if not isinstance(d, ir.Dot):
        return False
    if d.a.type.dtype not in ("f16", "bf16") or d.b.type.dtype != d.a.type.dtype or d.type.dtype != "f32":
        return False
    if len(d.a.type.shape) != 2 or len(d.b.type.shape) != 2:
        return False
    M, K = d.a.type.shape
    N = d.b.type.shape[0] if d.trans_b else d.b.type.shape[1]
    return M % 16 == 0 and N % 8 == 0 and K % 16 == 0


def identity_dots(value, domain) -> List[ir.Dot]:
    """The tensor-core dots of `value` evaluated at the coordinates of the iteration space
    `domain` (reached from the root through elementwise nodes of that shape, and of that shape)."""
    out: List[ir.Dot] = []

    def visit(e):
        if shape2(getattr(e.type, "shape", ())) != tuple(domain) or not isinstance(e.type, ir.TileT):
            return
        if isinstance(e, ir.Dot):
            if mma_dot(e):
                out.append(e)
            return
        if isinstance(e, ELEMENTWISE):
            for c in ir.sub_exprs(e):
                visit(c)
    if value is not None and isinstance(value.type, ir.TileT):
        visit(value)
    return out


def rows_ok(shape, warps: int) -> bool:
    """Whether a tile (or iteration space) of this shape can take the rows layout."""
    M, N = shape2(shape)
    return M % (16 * warps) == 0 and M >= 16 * warps and (N == 1 or N % 8 == 0)


def register_words(shape, dtype: str, warps: int) -> int:
    """32-bit registers per thread a rows-layout tile takes (16-bit types packed in pairs)."""
    M, N = shape2(shape)
    mt = M // (16 * warps)
    if N == 1:
        return mt * 2
    n = mt * (N // 8) * 4
    return n // 2 if dtype in ("f16", "bf16") else n


def statement_parts(s):
    """(target Sym or None, target is a window, iteration space, value) of a tile statement."""
    if isinstance(s, (ir.Let, ir.VarDecl)):
        if isinstance(s.sym.type, ir.TileT):   # a scalar let or var is no tile statement
            return s.sym, False, shape2(s.sym.type.shape), s.value
    elif isinstance(s, ir.Assign):
        t = s.target
        if isinstance(t, ir.Ref) and isinstance(t.type, ir.TileT):
            return t.sym, False, shape2(t.type.shape), s.value
        if isinstance(t, ir.Slice):
            return t.base, True, shape2(t.type.shape), s.value
    return None, False, None, None


def accumulated_dot(s) -> Optional[ir.Dot]:
    """The dot a statement accumulates onto its target tile: `acc += dot(a, b)`, or
    `acc = x + dot(a, b)` (either order; x reads no dot, the dot does not read acc: the same
    accumulation after `acc = x`, as flash attention's `acc = acc * rescale + dot(p, v)`). None
    for anything else."""
    if not (isinstance(s, ir.Assign) and isinstance(s.target, ir.Ref)):
        return None
    v, acc = s.value, s.target.sym
    if s.op == "+" and isinstance(v, ir.Dot):
        return v
    if s.op is None and isinstance(v, ir.Binary) and v.op == "+":
        for d, x in ((v.b, v.a), (v.a, v.b)):
            if (isinstance(d, ir.Dot) and not any(isinstance(y, ir.Dot) for y in ir.walk_expr(x))
                    and not any(isinstance(y, ir.Ref) and y.sym is acc for y in ir.walk_expr(d))):
                return d
    return None


def plain_accumulation(s) -> Optional[ir.Dot]:
    """The dot of `acc += dot(a, b)`, `acc = acc + dot(a, b)` or `acc = dot(a, b) + acc`: one
    accumulation with nothing else, as a GEMM loop's body holds (`gemm_loops.match_loop`)."""
    d = accumulated_dot(s)
    if d is None or s.op == "+":
        return d
    other = s.value.a if s.value.b is d else s.value.b
    return d if isinstance(other, ir.Ref) and other.sym is s.target.sym else None


def dot_staged_views(kir: ir.KernelIR) -> Set[int]:
    """id() of the `let` views of a tensor slice (`let k = K[h, kt :+ BC, :]`, not flat) that
    are read only as an operand of tensor-core dots (`mma_dot`) in tile statements, with a window
    whose subscripts read nothing that can change (`_fixed_window`): each such
    dot stages the slice itself, on every target (padded cp.async scratch on mma.sync, the TMA
    ring on a streamed sm_90 loop, the GEMM pipeline's stages), exactly as it stages the slice
    written in the dot. Such a view is the slice written inline in every way that counts: it gets
    no tile of its own (`lifetimes`), hence no copy, no shared bytes and no barrier; the lowering
    stages it where each dot is (`lowering._Lower._view_slice`). Any other read (elementwise, a
    reduction, a dot on CUDA cores, a view of it, a write through it) keeps the spec's staging
    rule: the view is copied into a tile of its own that its readers share. Computed once per
    KernelIR object (its `tilenb.caches.per_kernel` dict)."""
    memo = per_kernel(kir)
    hit = memo.get("dot_staged_views")
    if hit is None:
        hit = memo["dot_staged_views"] = frozenset(_dot_staged_views(kir))
    return set(hit)


def _fixed_window(sl: ir.Slice) -> bool:
    """Whether the subscripts of `sl` have the same value wherever its names are in scope: they
    read only dims, scalar parameters, `let` scalars, loop variables, the CTA's coordinates and
    constants (no `var`, no element of a tile or tensor, whose contents can change)."""
    for sub in sl.subs:
        for e in ((sub.index,) if isinstance(sub, ir.SubIndex) else (sub.start,)):
            for x in ir.walk_expr(e):
                if isinstance(x, (ir.Slice, ir.Element)):
                    return False
                if isinstance(x, ir.Ref) and x.sym.kind not in ("dim", "scalar_param", "let", "loop"):
                    return False
    return True


def _dot_staged_views(kir: ir.KernelIR) -> Set[int]:
    cand = {id(s.sym) for s in ir.walk_stmts(kir.body)
            if isinstance(s, ir.Let) and s.sym.kind == "view" and isinstance(s.value, ir.Slice)
            and s.value.base.kind == "tensor" and not s.value.flat and isinstance(s.sym.type, ir.TileT)
            and _fixed_window(s.value)}
    if not cand:
        return set()
    refs: Dict[int, int] = {}        # every expression node that names the view
    as_operand: Dict[int, int] = {}  # those that are an operand of a tensor-core dot of a tile statement
    for s in ir.walk_stmts(kir.body):
        for e in ir.stmt_exprs(s):
            for x in ir.walk_expr(e):
                sym = ir.named_sym(x)
                if sym is not None and id(sym) in cand:
                    refs[id(sym)] = refs.get(id(sym), 0) + 1
        _, _, _, value = statement_parts(s)
        if value is None or not isinstance(value.type, ir.TileT):
            continue
        for x in ir.walk_expr(value):
            if mma_dot(x):
                for o in (x.a, x.b):
                    if isinstance(o, ir.Ref) and id(o.sym) in cand:
                        as_operand[id(o.sym)] = as_operand.get(id(o.sym), 0) + 1
    return {k for k, n in refs.items() if as_operand.get(k) == n}


class _Scan:
    """One pass over the kernel: which candidate tiles each statement touches and how."""

    def __init__(self, kir: ir.KernelIR, cand: Dict[int, ir.Sym], warps: int, other_regs: Set[int]):
        self.kir, self.cand, self.W = kir, cand, warps
        self.other_regs = other_regs            # register tiles on other layouts (@registers, GEMM accumulators)
        self.bad: Set[int] = set()
        self.links: List[Set[int]] = []         # candidates touched together by one statement
        self.anchored: Set[int] = set()         # touched by a statement with a tensor-core dot
        self.rows_need: Set[int] = set()        # [M, 1] members, row-reduced members, A operands
        self.a_operand: Set[int] = set()        # read as the first operand of a tensor-core dot
        self.other_use: Set[int] = set()        # read elementwise or reduced somewhere
        self.written_by_expr: Set[int] = set()  # assigned something other than a copy or a fill

    def tile_refs(self, e, out: Set[int]):
        for x in ir.walk_expr(e):
            sym = ir.named_sym(x)
            if sym is not None and id(sym) in self.cand:
                out.add(id(sym))

    def run(self):
        self.written_in_loop: Set[int] = set()

        def walk(body, in_loop):
            for s in body:
                self.statement(s)
                if in_loop and isinstance(s, (ir.Let, ir.VarDecl, ir.Assign)):
                    target = statement_parts(s)[0]
                    if target is not None and id(target) in self.cand:
                        self.written_in_loop.add(id(target))
                for b in ir.child_blocks(s):
                    walk(b, in_loop or isinstance(s, (ir.For, ir.While)))
        walk(self.kir.body, False)

    def statement(self, s):
        # let views and per-thread code: a candidate seen there stays in shared memory
        if isinstance(s, ir.Let) and s.sym.kind == "view":
            self.tile_refs(s.value, self.bad)
            return
        tile_stmt = ((isinstance(s, (ir.Let, ir.VarDecl)) and isinstance(s.sym.type, ir.TileT))
                     or (isinstance(s, ir.Assign) and isinstance(s.target.type, ir.TileT)))
        if not tile_stmt:
            for e in ir.stmt_exprs(s):
                self.tile_refs(e, self.bad)
            return
        target, window, domain, value = statement_parts(s)
        if target is None:
            for e in ir.stmt_exprs(s):
                self.tile_refs(e, self.bad)
            return
        touched: Set[int] = set()
        bad: Set[int] = set()
        if id(target) in self.cand:
            if window:
                bad.add(id(target))
            else:
                touched.add(id(target))
        if isinstance(s, ir.Assign) and isinstance(s.target, ir.Slice):
            for sub in s.target.subs:
                self.tile_refs(sub.index if isinstance(sub, ir.SubIndex) else sub.start, bad)
        dots = identity_dots(value, domain)
        ok = rows_ok(domain, self.W)
        if value is not None and isinstance(value.type, ir.TileT):
            self.visit(value, ok, True, domain, touched, bad, dots)
        elif value is not None:
            self.tile_refs(value, bad)
        if not ok:
            bad |= touched
        # a statement that also sweeps a register tile of another layout cannot sweep this one
        others = set()
        for e in ir.stmt_exprs(s) if not isinstance(s, (ir.Let, ir.VarDecl)) else (s.value,) if s.value is not None else ():
            for x in ir.walk_expr(e):
                if isinstance(x, ir.Ref) and id(x.sym) in self.other_regs and id(x.sym) not in self.cand:
                    others.add(id(x.sym))
        if id(target) in self.other_regs and id(target) not in self.cand:
            others.add(id(target))
        if others:
            bad |= touched
        if isinstance(s, ir.Assign) and s.op is not None and id(target) in self.cand:
            self.other_use.add(id(target))
        if id(target) in self.cand and value is not None:
            plain = isinstance(value, ir.Const) or not isinstance(value.type, ir.TileT) or (
                isinstance(value, ir.Slice) and value.base.kind == "tensor")
            if not plain or s.__class__ is ir.Assign and s.op is not None:
                self.written_by_expr.add(id(target))
        self.bad |= bad
        touched -= bad
        if touched:
            self.links.append(set(touched))
            if dots:
                self.anchored |= touched
            for k in touched:
                if shape2(self.cand[k].type.shape)[1] == 1:
                    self.rows_need.add(k)

    def visit(self, e, ok: bool, ident: bool, domain, touched, bad, dots):
        """e is evaluated at rows-layout coordinates of its own shape when `ok`; at the
        statement's own coordinates (an elementwise path of the domain's shape) when `ident`."""
        if isinstance(e, ir.Ref):
            if isinstance(e.type, ir.TileT) and id(e.sym) in self.cand:
                if ok:
                    touched.add(id(e.sym))
                    self.other_use.add(id(e.sym))
                else:
                    bad.add(id(e.sym))
            return
        if isinstance(e, (ir.Slice, ir.Element)):
            if id(e.base) in self.cand:
                bad.add(id(e.base))
            for c in ir.sub_exprs(e):
                self.tile_refs(c, bad)
            return
        if isinstance(e, ir.Reduce):
            x = e.x
            row = (ok and e.axis == 1 and len(x.type.shape) == 2 and shape2(x.type.shape)[1] % 8 == 0)
            before = set(touched)
            self.visit(x, row, False, domain, touched, bad, dots)
            if row:
                self.rows_need |= (touched - before)
                for x2 in ir.walk_expr(x):
                    if isinstance(x2, ir.Ref) and id(x2.sym) in self.cand:
                        self.rows_need.add(id(x2.sym))
            return
        if isinstance(e, ir.Dot):
            at_identity = any(e is d for d in dots) and ok and ident
            a = e.a
            if at_identity and isinstance(a, ir.Ref) and id(a.sym) in self.cand:
                touched.add(id(a.sym))
                self.a_operand.add(id(a.sym))
                self.rows_need.add(id(a.sym))
            else:
                self.visit(a, False, False, domain, touched, bad, dots)
            self.visit(e.b, False, False, domain, touched, bad, dots)
            return
        if isinstance(e, ir.Transpose):
            self.visit(e.x, False, False, domain, touched, bad, dots)
            return
        if isinstance(e, ELEMENTWISE):
            P = shape2(e.type.shape) if isinstance(e.type, ir.TileT) else (1, 1)
            for c in ir.sub_exprs(e):
                if not isinstance(c.type, ir.TileT):
                    self.tile_refs(c, bad)
                    continue
                Q = shape2(c.type.shape)
                self.visit(c, ok and Q[0] == P[0], ident and Q == P, domain, touched, bad, dots)
            return
        for c in ir.sub_exprs(e):
            self.tile_refs(c, bad)


def mma_register_tiles(kir: ir.KernelIR, gemm_accs: Optional[List[ir.Sym]] = None) -> Dict[int, ir.Sym]:
    """id(Sym) -> Sym of the tiles kept in registers on the rows layout (see the module doc).

    gemm_accs: the GEMM-loop accumulators (`lifetimes.gemm_accumulators`); a group made of those
    alone is not returned (they keep their own layout). Computed once per KernelIR object and
    set of accumulators, and kept in the KernelIR's `tilenb.caches.per_kernel` dict (the
    lifetimes and the code generator's layouts both ask); each call returns a new dict."""
    key = ("mma_register_tiles",) + tuple(id(a) for a in (gemm_accs or ()))
    memo = per_kernel(kir)
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = (_mma_register_tiles(kir, gemm_accs), tuple(gemm_accs or ()))   # keeps the ids valid
    return dict(hit[0])


def _mma_register_tiles(kir: ir.KernelIR, gemm_accs: Optional[List[ir.Sym]]) -> Dict[int, ir.Sym]:
    W = kir.threads // 32
    if W < 1:
        return {}
    regs = {id(s) for s in kir.registers}
    cand: Dict[int, ir.Sym] = {}
    for s in ir.walk_stmts(kir.body):
        if isinstance(s, (ir.Let, ir.VarDecl)) and isinstance(s.sym.type, ir.TileT) and s.sym.kind != "view":
            t = s.sym.type
            if (len(t.shape) == 2 and t.dtype in ("f32", "f16", "bf16") and id(s.sym) not in regs
                    and rows_ok(t.shape, W)):
                cand[id(s.sym)] = s.sym
    # the accumulator of a loop that is nothing but a GEMM (tile copies and `acc += dot`) keeps the
    # GEMM-loop rules (lifetimes.gemm_accumulators; on sm_90 the whole loop is lowered to wgmma)
    for s in ir.walk_stmts(kir.body):
        if isinstance(s, ir.For):
            acc = _plain_gemm_loop_acc(s)
            if acc is not None:
                cand.pop(id(acc), None)
    if not cand:
        return {}
    accs = {id(a) for a in (gemm_accs or ())}
    while True:
        sc = _Scan(kir, cand, W, regs | accs)
        sc.run()
        # a tile only copied in and read as a dot's first operand gains from registers only when it
        # is loaded once (outside loops): a copy per turn is better made with vectors into shared
        # memory, where the tensor cores' operand loads (ldmatrix) read it
        drop = sc.bad | {k for k in _spare(sc) if k in sc.written_in_loop}
        if not drop:
            break
        for k in drop:
            cand.pop(k, None)
        if not cand:
            return {}
    # groups of candidates linked through statements
    parent = {k: k for k in cand}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x
    for group in sc.links:
        g = list(group)
        for k in g[1:]:
            parent[find(k)] = find(g[0])
    groups: Dict[int, List[int]] = {}
    for k in cand:
        groups.setdefault(find(k), []).append(k)
    out: Dict[int, ir.Sym] = {}
    budget = REGISTER_BUDGET
    for members in sorted(groups.values(), key=lambda m: sum(_words(cand[k], W) for k in m)):
        if not any(k in sc.anchored or k in sc.a_operand for k in members):
            continue        # no tensor-core dot involved: nothing to gain
        if all(k in accs for k in members) and not any(k in sc.rows_need for k in members):
            continue        # GEMM accumulators alone keep their 2-D warp grid
        words = sum(_words(cand[k], W) for k in members)
        if words > budget:
            # tiles only copied in and read as a dot's first operand can stay in shared memory
            spare = [k for k in members if k in _spare(sc)]
            members = [k for k in members if k not in spare]
            words = sum(_words(cand[k], W) for k in members)
            if words > budget or not members:
                continue
        budget -= words
        for k in members:
            out[k] = cand[k]
    return out


def _plain_gemm_loop_acc(s: ir.For) -> Optional[ir.Sym]:
    """The accumulator of a loop whose body is only tile copies / views and one `acc += dot`
    (`plain_accumulation`)."""
    acc = None
    for t in s.body:
        if isinstance(t, (ir.Let, ir.VarDecl)) and isinstance(t.sym.type, ir.TileT) and isinstance(t.value, ir.Slice):
            continue
        if acc is None and plain_accumulation(t) is not None:
            acc = t.target.sym
            continue
        return None
    return acc


def _spare(sc: _Scan) -> Set[int]:
    """Candidates read only as a dot's first operand and written only by copies or fills."""
    return {k for k in sc.a_operand if k not in sc.other_use and k not in sc.written_by_expr}


def _words(sym: ir.Sym, W: int) -> int:
    return register_words(sym.type.shape, sym.type.dtype, W)
