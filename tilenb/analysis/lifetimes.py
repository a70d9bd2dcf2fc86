"""Tile lifetimes and shared-memory offsets.

Guarantees: every tile of a kernel variant (var and let tiles, and `let` views that a `dot`
reads, which are staged in shared memory, except those only tensor-core dots read: each such dot
stages the slice itself, as it does one written inline, `mma_tiles.dot_staged_views`) gets a live range in statement positions (the
pre-order index of the IR statement, `Lifetimes.positions`): from its declaration to its last
use, widened to cover the whole of every loop it is used in but not declared in (a later turn of
the loop reads it again); a use in a `while` condition counts as a use inside that loop. Tiles in
registers (@registers, GEMM accumulators: see `gemm_accumulators`, and the tiles of tensor-core
work on the mma.sync row layout: see `tilenb.analysis.mma_tiles`) take no shared memory.
Shared tiles whose ranges overlap never overlap in bytes; each offset is a multiple of `ALIGN`.
`footprint` is the end of the highest tile; it never exceeds the sum of the tiles, is at least
the largest live set, and equals it whenever such a packing exists and the exact search finds
it within `EXACT_BUDGET` tried offsets (greedy orders first, then a complete search; a packing
that reaches the largest live set does not exist for every set of live ranges).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from .. import ir
from ..caches import per_kernel
from ..types import DTYPES
from .mma_tiles import accumulated_dot, dot_staged_views, mma_register_tiles

ALIGN = 16          # bytes: the widest vector access (16-byte loads and stores)
EXACT_BUDGET = 200_000   # offsets tried by the exact packer before it gives up


@dataclass(frozen=True)
class TileLife:
    name: str
    sym: ir.Sym
    dtype: str
    shape: Tuple[int, ...]
    bytes: int               # aligned size in shared memory (0 in registers)
    offset: Optional[int]    # byte offset in shared memory (None in registers)
    space: str               # "shared" or "registers"
    first_line: int
    last_line: int
    start: int               # statement positions (pre-order index) of the live range
    end: int
    staged_view: bool = False


@dataclass(frozen=True)
class Lifetimes:
    tiles: Tuple[TileLife, ...]
    footprint: int               # bytes of shared memory the kernel needs
    largest_live_set: int        # bytes of the largest set of shared tiles alive at once
    peak_line: int               # a source line where that set is alive
    live_at_peak: Tuple[TileLife, ...]
    positions: Tuple[Tuple[int, ir.Stmt], ...]  # (position, statement) in pre-order
    loops: Tuple[Tuple[int, int], ...] = ()     # (first, last) position of each loop, the loop
                                                # statement itself first, in pre-order
    peak_position: int = 0                      # the statement position where that set is alive


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def cluster_slots(kir: ir.KernelIR) -> List[Tuple[ir.ClusterReduce, int, int]]:
    """(statement, offset, bytes) of the copy each cluster reduction publishes, 16-byte aligned,
    offsets from the end of the tiles' footprint; none under @cluster(1), where no copy is
    published. The shared-memory map (`smem.build`) places them after everything else, the CUDA
    generator reads them there; the checker's budget counts them."""
    out, off = [], 0
    if kir.cluster > 1:
        for s in kir.body:       # cluster reductions stand at the top level only
            if isinstance(s, ir.ClusterReduce):
                t = s.target.type
                n = _aligned(t.size * DTYPES[t.dtype].itemsize)
                out.append((s, off, n))
                off += n
    return out


def cluster_slot_bytes(kir: ir.KernelIR) -> int:
    return sum(n for _, _, n in cluster_slots(kir))


def gemm_accumulators(kir: ir.KernelIR) -> List[ir.Sym]:
    """Tiles accumulated as `acc += dot(a, b)` (or dot_t; or `acc = x + dot(a, b)`:
    `accumulated_dot`) with f16/bf16 operands in a plain (not unrolled) for loop: the GEMM
    loops, whose accumulators live in registers.

    A candidate stays in shared memory when some other use needs elements other threads hold:
    read by a reduction, a dot (as an operand), a transpose or a per-thread element access,
    sliced, viewed by a let, or broadcast over a larger shape. Computed once per KernelIR object
    and kept in its `tilenb.caches.per_kernel` dict, as `tile_lifetimes` is (the lifetimes, the
    checker's budget and the code generator's layouts ask for the same variant's); each call
    returns a new list."""
    memo = per_kernel(kir)
    hit = memo.get("gemm_accumulators")
    if hit is None:
        hit = memo["gemm_accumulators"] = tuple(_gemm_accumulators(kir))
    return list(hit)


def _gemm_accumulators(kir: ir.KernelIR) -> List[ir.Sym]:
    out = []
    for s in ir.walk_stmts(kir.body):
        if isinstance(s, ir.For) and s.unroll == 1:
            for t in s.body:
                d = accumulated_dot(t)
                if (d is not None and d.a.type.dtype in ("f16", "bf16")
                        and t.target.sym not in out and t.target.sym.kind == "var"):
                    out.append(t.target.sym)
    return [a for a in out if _register_compatible(kir, a)]


def _register_compatible(kir: ir.KernelIR, acc: ir.Sym) -> bool:
    """Whether every use of `acc` touches only the elements the using thread holds."""
    shape = tuple(acc.type.shape)

    def ok_expr(e, collective: bool, iter_shape) -> bool:
        if isinstance(e, ir.Ref) and e.sym is acc:
            return not collective and (iter_shape is None or tuple(iter_shape) == shape)
        if isinstance(e, (ir.Slice, ir.Element)) and e.base is acc:
            return False
        if isinstance(e, (ir.Reduce, ir.Transpose)):
            return all(ok_expr(c, True, None) for c in ir.sub_exprs(e))
        if isinstance(e, ir.Dot):
            return ok_expr(e.a, True, None) and ok_expr(e.b, True, None)
        return all(ok_expr(c, collective, iter_shape) for c in ir.sub_exprs(e))

    for s in ir.walk_stmts(kir.body):
        if isinstance(s, ir.Let) and isinstance(s.value, (ir.Ref, ir.Slice)):
            base = s.value.sym if isinstance(s.value, ir.Ref) else s.value.base
            if base is acc:
                return False
        if isinstance(s, ir.Assign) and isinstance(s.target, ir.Ref) and s.target.sym is acc:
            if s.op == "+" and isinstance(s.value, ir.Dot):
                if not (ok_expr(s.value.a, True, None) and ok_expr(s.value.b, True, None)):
                    return False
                continue
            if not ok_expr(s.value, False, shape):
                return False
            continue
        if isinstance(s, ir.Assign) or (isinstance(s, ir.Atomic) and s.tile):   # a tile atomic: a store
            it = s.target.type.shape if isinstance(s.target.type, ir.TileT) else None
            if not ok_expr(s.target, False, it) or not ok_expr(s.value, False, it):
                return False
            continue
        it = s.sym.type.shape if isinstance(s, (ir.Let, ir.VarDecl)) and isinstance(s.sym.type, ir.TileT) else None
        for e in ir.stmt_exprs(s):
            if not ok_expr(e, it is None, it):
                return False
    return True


def _uses(e, views: Dict[int, ir.Sym]):
    """Tile Syms an expression reads or writes (a view counts as its tile, or as itself when staged)."""
    out = []
    for x in ir.walk_expr(e):
        sym = None
        if isinstance(x, ir.Ref):
            sym = x.sym
        elif isinstance(x, (ir.Slice, ir.Element)):
            sym = x.base
        if sym is None:
            continue
        out.append(sym)
        while id(sym) in views:
            sym = views[id(sym)]
            out.append(sym)
    return out


def tile_lifetimes(kir: ir.KernelIR, same_body: Optional[dict] = None) -> Lifetimes:
    """The lifetimes of `kir`'s tiles (see the module's guarantees). Computed once per KernelIR
    object and kept in its `tilenb.caches.per_kernel` dict: the checker's budget check, the analysis and
    the code generator all ask for the same variant's.

    same_body: a dict shared by KernelIRs with one body and one @registers (the checker's
    variants that share a walk); the lifetimes depend on nothing else but the set of tiles kept
    in registers (which the CTA size can change), so variants with equal sets get one result."""
    memo = per_kernel(kir)
    hit = memo.get("tile_lifetimes")
    if hit is not None:
        return hit
    if same_body is None:
        lt = _tile_lifetimes(kir)
    else:
        key = ("tile_lifetimes", _in_registers(kir))
        lt = same_body.get(key)
        if lt is None:
            lt = same_body[key] = _tile_lifetimes(kir)
    memo["tile_lifetimes"] = lt
    return lt


def _in_registers(kir: ir.KernelIR) -> frozenset:
    """id() of the tiles kept in registers: @registers, GEMM accumulators, and the tiles of
    tensor-core work that stay on the mma.sync row layout (flash attention's s, p, acc, m, l:
    see mma_tiles)."""
    accs = gemm_accumulators(kir)
    return frozenset({id(s) for s in kir.registers} | {id(s) for s in accs} | set(mma_register_tiles(kir, accs)))


def _tile_lifetimes(kir: ir.KernelIR) -> Lifetimes:
    positions: List[Tuple[int, ir.Stmt]] = []
    loops: List[Tuple[int, int]] = []          # (start, end) positions of each loop
    loop_of: Dict[int, List[int]] = {}         # position -> indices of enclosing loops
    header_loop: Dict[int, int] = {}           # position of a while -> its loop index

    def visit(body, enclosing):
        for s in body:
            p = len(positions)
            positions.append((p, s))
            loop_of[p] = list(enclosing)
            if isinstance(s, (ir.For, ir.While)):
                idx = len(loops)
                loops.append((p, -1))
                if isinstance(s, ir.While):
                    header_loop[p] = idx     # the condition is evaluated on every turn
                visit(s.body, enclosing + [idx])
                loops[idx] = (p, len(positions) - 1)
            elif isinstance(s, ir.If):
                visit(s.then, enclosing)
                visit(s.orelse, enclosing)
    visit(kir.body, [])

    # which let views are staged (read by a dot) and what each view aliases; a view read only by
    # tensor-core dots is staged by each dot, as the slice written inline is (`dot_staged_views`)
    views: Dict[int, ir.Sym] = {}
    staged: set = set()
    by_dots = dot_staged_views(kir)
    for _, s in positions:
        if isinstance(s, ir.Let) and s.sym.kind == "view":
            base = s.value.base if isinstance(s.value, ir.Slice) else s.value.sym
            if base.kind != "tensor":
                views[id(s.sym)] = base
        for e in ir.stmt_exprs(s):
            for x in ir.walk_expr(e):
                if isinstance(x, ir.Dot):
                    for opnd in (x.a, x.b):
                        if (isinstance(opnd, ir.Ref) and opnd.sym.kind == "view" and id(opnd.sym) not in views
                                and id(opnd.sym) not in by_dots):
                            staged.add(id(opnd.sym))

    decl: Dict[int, Tuple[int, ir.Stmt]] = {}
    syms: Dict[int, ir.Sym] = {}
    for p, s in positions:
        if isinstance(s, (ir.VarDecl, ir.Let)) and isinstance(s.sym.type, ir.TileT):
            if s.sym.kind != "view" or id(s.sym) in staged:
                decl[id(s.sym)] = (p, s)
                syms[id(s.sym)] = s.sym
    last: Dict[int, int] = {k: v[0] for k, v in decl.items()}
    used_at: Dict[int, List[int]] = {k: [] for k in decl}
    for p, s in positions:
        for e in ir.stmt_exprs(s):
            for sym in _uses(e, views):
                if id(sym) in decl:
                    used_at[id(sym)].append(p)
                    last[id(sym)] = max(last[id(sym)], p)

    in_regs = _in_registers(kir)
    ranges: Dict[int, Tuple[int, int]] = {}
    for k, (p0, _) in decl.items():
        start, end = p0, last[k]
        decl_loops = set(loop_of[p0])
        for u in used_at[k]:
            for li in loop_of[u] + ([header_loop[u]] if u in header_loop else []):
                if li not in decl_loops:
                    ls, le = loops[li]
                    start, end = min(start, ls), max(end, le)
        ranges[k] = (start, end)

    shared = [k for k in decl if k not in in_regs]
    sizes = {k: _aligned(syms[k].type.size * DTYPES[syms[k].type.dtype].itemsize) for k in decl}
    offsets = _pack([(k, ranges[k][0], ranges[k][1], sizes[k]) for k in shared])
    footprint = max([offsets[k] + sizes[k] for k in shared] + [0])

    line_of = {p: s.span.line for p, s in positions}
    best, best_p = 0, 0
    for p, _ in positions:
        tot = sum(sizes[k] for k in shared if ranges[k][0] <= p <= ranges[k][1])
        if tot > best:
            best, best_p = tot, p

    tiles = []
    for k in decl:
        sym = syms[k]
        reg = k in in_regs
        s, e = ranges[k]
        tiles.append(TileLife(sym.name, sym, sym.type.dtype, sym.type.shape, 0 if reg else sizes[k],
                              None if reg else offsets[k], "registers" if reg else "shared",
                              line_of[decl[k][0]], line_of[e], s, e, k in staged))
    live_at_peak = tuple(t for t in tiles if t.space == "shared" and t.start <= best_p <= t.end)
    return Lifetimes(tuple(tiles), footprint, best, line_of.get(best_p, kir.span.line), live_at_peak,
                     tuple(positions), tuple(loops), best_p)


def _pack(items: List[Tuple[int, int, int, int]]) -> Dict[int, int]:
    """Offsets for (key, start, end, size) items so that items alive together never share bytes.

    Tries several greedy orders; where all leave a gap above the largest live set, searches
    every aligned placement for one that reaches it, keeping the best greedy one otherwise."""
    if not items:
        return {}
    positions = sorted({i[1] for i in items})
    target = max(sum(it[3] for it in items if it[1] <= p <= it[2]) for p in positions)
    orders = [
        sorted(items, key=lambda i: (i[1], -i[3])),
        sorted(items, key=lambda i: (-i[3], i[1])),
        sorted(items, key=lambda i: (-(i[2] - i[1]), -i[3])),
        sorted(items, key=lambda i: (i[2], -i[3])),
    ]
    best = None
    for order in orders:
        offs = _first_fit(order)
        top = max(offs[i[0]] + i[3] for i in items)
        if best is None or top < best[0]:
            best = (top, offs)
        if top == target:
            return offs
    exact = _exhaustive(items, target, best[0])
    return exact if exact is not None else best[1]


def _overlaps(a, b) -> bool:
    return a[1] <= b[2] and b[1] <= a[2]


def _first_fit(order) -> Dict[int, int]:
    placed = []
    offs = {}
    for it in order:
        off = _lowest_gap(it, placed, offs)
        offs[it[0]] = off
        placed.append(it)
    return offs


def _lowest_gap(it, placed, offs) -> int:
    busy = sorted((offs[p[0]], offs[p[0]] + p[3]) for p in placed if _overlaps(it, p))
    off = 0
    for lo, hi in busy:
        if off + it[3] <= lo:
            break
        off = max(off, hi)
    return off


def _exhaustive(items, target, bound) -> Optional[Dict[int, int]]:
    """A packing of `items` within `target` bytes, by depth-first search over every aligned
    offset (largest items first), or None if there is none or the search budget runs out.

    Complete up to the budget: every offset in [0, target - size] is tried for every item."""
    del bound
    # Tiles of different connected groups of live ranges never meet: pack each group alone.
    groups: List[List[Tuple[int, int, int, int]]] = []
    reach = None
    for it in sorted(items, key=lambda i: i[1]):
        if reach is None or it[1] > reach:
            groups.append([])
            reach = it[2]
        groups[-1].append(it)
        reach = max(reach, it[2])
    out: Dict[int, int] = {}
    for g in groups:
        offs = _exhaustive_group(g, target)
        if offs is None:
            return None
        out.update(offs)
    return out


def _exhaustive_group(items, target) -> Optional[Dict[int, int]]:
    order = sorted(items, key=lambda i: (-i[3], i[1], i[2]))
    offs: Dict[int, int] = {}
    placed: List[Tuple[int, int, int, int]] = []
    budget = [EXACT_BUDGET]

    def free(it, off) -> bool:
        for p in placed:
            if _overlaps(it, p) and off < offs[p[0]] + p[3] and offs[p[0]] < off + it[3]:
                return False
        return True

    def go(i) -> bool:
        if i == len(order):
            return True
        it = order[i]
        for off in range(0, target - it[3] + 1, ALIGN):
            budget[0] -= 1
            if budget[0] < 0:
                return False
            if free(it, off):
                offs[it[0]] = off
                placed.append(it)
                if go(i + 1):
                    return True
                placed.pop()
                del offs[it[0]]
        return False
    return dict(offs) if go(0) else None
