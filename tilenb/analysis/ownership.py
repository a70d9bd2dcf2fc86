"""Thread ownership: what every statement reads and writes, where, and by which threads.

This is the contract between the analyses and the code generator. For every statement of a
kernel variant, `statement_plans` gives a `StatementPlan`: the iteration space and vector width of
a tile statement, and each memory access it makes (`Access`) with its mode:

- "partition": the access follows the canonical partition of the statement's iteration space at
  the statement's vector width (`tilenb.analysis.partition`). The thread that owns chunk k of the
  iteration space touches exactly the elements `layout(row, col)` of this access for the
  coordinates (row, col) of chunk k. The destination of every tile statement is written this way
  (a copy in, a fill, an elementwise expression, an assignment to a whole tile or a window, a
  store to a tensor slice, a tile atomic's read-modify-write of its tensor slice, marked
  `Access.atomic`, and also the result of a reduction, dot or transpose: the thread that owns a
  result element is the one that writes it). Elementwise operands are read this way,
  through their layout composed with the broadcasts and transposes between them and the
  destination (a [R, 1] operand of a [R, C] pass has stride 0 along the columns: the owner of
  (r, c) reads element (r, 0)).
- "any": any thread may touch any of the listed elements. This is how the operands of a
  reduction (rowsum ... colmin), of dot / dot_t, and single elements read inside a tile statement
  (`x * t[0, 0]`) are read: the code generator is free to split that work among threads as it
  likes.
- "per_thread": a per-thread element access (`t[i, j]` in scalar code): the analyses cannot tell
  which thread touches which element, so the element set is every element the index could reach.

Vector width of a tile statement: the largest power of two v that divides the iteration row length
C such that every "partition" access that is contiguous along the row (column stride 1) moves at
most 16 bytes per chunk (v * element bytes <= 16) and starts every chunk on a multiple of v
elements: v divides the access's start offset and its row stride as far as they are provable
(`tilenb.analysis.divisibility`; tiles start 16-byte aligned in shared memory, tensors are assumed
16-byte aligned at their base). A partition access of a tensor that is not contiguous along the
row (a column of a tensor, a transposed tensor operand) forces v = 1; one of a shared tile that is
not contiguous (a transposed tile, a column of it: read or written element by element) only keeps
v * element bytes <= 16, so the contiguous side of the statement (a transpose's store) still moves
vectors; one that is broadcast along the row (column stride 0) or lives in registers adds no
condition (registers: v * element bytes <= 16).

Guarantees: every tile statement of the IR has exactly one plan, with its destination write
first; every shared-memory access names its tile's byte offset from the lifetimes; the plans are
computed once per kernel variant from the IR alone (plus the representative runtime extents used
for global-memory addresses).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from math import gcd
from typing import Dict, List, Optional, Tuple

from .. import ir
from ..types import DTYPES
from .divisibility import Divisibility, stride_divisors
from .layout import Layout, row_major
from .lifetimes import Lifetimes
from .partition import as_2d, vector_width

MAX_ALTERNATIVES = 64    # window starts known only as a set: beyond this many, an access is "any"
DEFAULT_EXTENT = 1024    # the representative value of a runtime dimension (a multiple of 32)


@dataclass(frozen=True)
class Access:
    """One memory access of a statement.

    `layouts`: for mode "partition", layouts over the statement's iteration space [R, C] giving the
    element offset (within `storage`) that the owner of each coordinate touches; more than one
    when a window's start is known only as a set of values (one layout per possible start, and
    `exact` is False). For "any" and "per_thread", layouts whose elements are the ones possibly
    touched. Global-memory layouts are relative to the slice's first element, whose element offset
    in the tensor is a multiple of `origin_div` (0: always 0)."""
    rw: str                 # "read" | "write"
    mode: str               # "partition" | "any" | "per_thread"
    space: str              # "shared" | "registers" | "global"
    name: str               # the name in the source: the tile, the tensor, or the let view
    storage: ir.Sym         # the tile or tensor that holds the bytes
    view: Optional[ir.Sym]  # the let view the access goes through, if any
    layouts: Tuple[Layout, ...]
    elem_bytes: int
    base_byte: int          # shared: the tile's byte offset in shared memory; else 0
    exact: bool
    origin_div: int         # global: divisibility of the slice origin's element offset
    align: int              # partition: divisibility of every chunk's first element (0: any)
    atomic: bool = False    # a tile atomic's read-modify-write of its tensor slice (global, "write")

    @property
    def contiguous(self) -> bool:
        """Partition access whose consecutive columns are consecutive elements."""
        return self.mode == "partition" and self.layouts[0].rank == 2 and self.layouts[0].stride[1] == 1

    @property
    def broadcast_along_row(self) -> bool:
        return self.mode == "partition" and self.layouts[0].rank == 2 and self.layouts[0].stride[1] == 0


@dataclass(frozen=True)
class StatementPlan:
    """What one statement does to memory. kind: "tile" (a tile statement), "per_thread" (scalar
    code touching tile elements), "barrier" (a user barrier()), "view" (a let view: no access),
    "decl" (an uninitialized tile: no access)."""
    position: int
    line: int
    kind: str
    what: str                       # e.g. "the copy of X into x", "rowsum", "dot", "the store of t into Y"
    shape: Tuple[int, int]          # the iteration space (tile statements)
    vector_width: int               # tile statements; 1 otherwise
    accesses: Tuple[Access, ...]    # tile statements: the destination write first
    stmt: ir.Stmt


@dataclass(frozen=True)
class _Leaf:
    """Where a tile-valued name or slice lives, in its natural rank."""
    space: str
    storage: ir.Sym
    name: str
    view: Optional[ir.Sym]
    layouts: Tuple[Layout, ...]
    elem_bytes: int
    base_byte: int
    origin_div: int                 # global only
    stride_div: Tuple[int, ...]     # global: divisibility of each stride; shared: the strides
    overflow: bool = False          # too many possible window starts: treat as "any"


class _Planner:
    def __init__(self, kir: ir.KernelIR, lt: Lifetimes, extents: Dict[str, int]):
        self.kir = kir
        self.lt = lt
        self.extents = extents
        self.div = Divisibility(kir)
        self.tiles = {id(t.sym): t for t in lt.tiles}
        self.views: Dict[int, _Leaf] = {}
        self.loop_values: Dict[int, Tuple[int, ...]] = {}
        for s in ir.walk_stmts(kir.body):
            if isinstance(s, ir.For) and isinstance(s.lo, ir.Const) and isinstance(s.hi, ir.Const):
                vals = tuple(range(int(s.lo.value), int(s.hi.value), s.step))
                if len(vals) <= 4096:
                    self.loop_values[id(s.var)] = vals

    # ---- where names live
    def tile_leaf(self, sym: ir.Sym, name: Optional[str] = None) -> _Leaf:
        t = self.tiles.get(id(sym))
        lay = row_major(sym.type.shape)
        eb = DTYPES[sym.type.dtype].itemsize
        if t is None or t.space == "registers":
            return _Leaf("registers", sym, name or sym.name, None, (lay,), eb, 0, 0, lay.stride)
        return _Leaf("shared", sym, name or sym.name, None, (lay,), eb, t.offset, 0, lay.stride)

    def tensor_leaf(self, sym: ir.Sym) -> _Leaf:
        dims = sym.type.dims
        rep = [d if isinstance(d, int) else self.extents.get(d, DEFAULT_EXTENT) for d in dims]
        stride, acc = [], 1
        for k in range(len(dims) - 1, -1, -1):
            stride.append(acc)
            acc *= rep[k]
        lay = Layout(tuple(rep), tuple(reversed(stride)), 0)
        return _Leaf("global", sym, sym.name, None, (lay,), DTYPES[sym.type.dtype].itemsize, 0, 0,
                     stride_divisors(self.kir, dims))

    def ref_leaf(self, sym: ir.Sym) -> Optional[_Leaf]:
        if sym.kind == "tensor":
            return self.tensor_leaf(sym)
        if not isinstance(sym.type, ir.TileT):
            return None
        if sym.kind == "view":
            if id(sym) in self.tiles:                 # a staged view: a tile of its own
                return self.tile_leaf(sym)
            return self.views.get(id(sym))
        return self.tile_leaf(sym)

    def start_values(self, e, hi: int) -> Tuple[int, ...]:
        """The possible values of a window start (or index) on a tile, within [0, hi]."""
        if isinstance(e, ir.Const):
            return (int(e.value),)
        if isinstance(e, ir.Ref) and id(e.sym) in self.loop_values:
            return tuple(v for v in self.loop_values[id(e.sym)] if 0 <= v <= hi) or (0,)
        d = self.div.of(e)
        if d == 0:
            return (0,)
        return tuple(range(0, hi + 1, d)) or (0,)

    def slice_leaf(self, e) -> Optional[_Leaf]:
        """The leaf of a Slice or Element expression (elements it can touch)."""
        base = self.ref_leaf(e.base)
        if base is None:
            return None
        if e.flat and base.space != "global":
            lays = tuple(l.flat() if l.rank == 2 else l for l in base.layouts)
            base = _Leaf(base.space, base.storage, base.name, base.view, lays, base.elem_bytes,
                         base.base_byte, base.origin_div, lays[0].stride, base.overflow)
        subs = e.subs if isinstance(e, ir.Slice) else tuple(ir.SubIndex(i) for i in e.indices)
        if base.space == "global":
            lay = base.layouts[0]
            shape, stride, sdiv = [], [], []
            od = base.origin_div
            for k, sub in enumerate(subs):
                if isinstance(sub, ir.SubIndex):
                    od = gcd(od, _mul(self.div.of(sub.index), base.stride_div[k]))
                else:
                    od = gcd(od, _mul(self.div.of(sub.start), base.stride_div[k]))
                    shape.append(sub.length)
                    stride.append(lay.stride[k])
                    sdiv.append(base.stride_div[k])
            return _Leaf("global", base.storage, base.name, base.view,
                         (Layout(tuple(shape), tuple(stride), 0),), base.elem_bytes, 0, od, tuple(sdiv))
        # a window of a tile: enumerate the possible starts
        lays = list(base.layouts)
        overflow = base.overflow
        for k, sub in reversed(list(enumerate(subs))):
            new = []
            for lay in lays:
                ext = lay.shape[k]
                if isinstance(sub, ir.SubIndex):
                    vals = [v for v in self.start_values(sub.index, ext - 1) if 0 <= v < ext] or [0]
                    new.extend(lay.select(k, v) for v in vals)
                else:
                    n = min(sub.length, ext)
                    vals = [v for v in self.start_values(sub.start, ext - n) if 0 <= v <= ext - n] or [0]
                    for v in vals:
                        new.append(lay.slice(tuple(v if j == k else 0 for j in range(lay.rank)),
                                             tuple(n if j == k else lay.shape[j] for j in range(lay.rank))))
            lays = _dedupe(new)
            if len(lays) > MAX_ALTERNATIVES:
                overflow = True
                break
        if overflow:
            # every element of the base is possibly touched
            lays = list(base.layouts)
            return _Leaf(base.space, base.storage, base.name, base.view, tuple(lays), base.elem_bytes,
                         base.base_byte, 0, lays[0].stride, True)
        return _Leaf(base.space, base.storage, base.name, base.view, tuple(lays), base.elem_bytes,
                     base.base_byte, 0, lays[0].stride)

    # ---- accesses
    def partition_access(self, leaf: _Leaf, rw: str, shape: Tuple[int, int], src) -> Access:
        if leaf.overflow:
            return self.any_access(leaf, rw, "any")
        lays2 = [l.as_2d() for l in leaf.layouts]
        it = tuple(l.compose_map(shape, src) for l in lays2)
        r = shape[0]
        if leaf.space == "global":
            sdiv2 = leaf.stride_div if len(leaf.stride_div) == 2 else (0,) + tuple(leaf.stride_div)
            row_div = 0
            for k, s in enumerate(src):
                if s == 0:
                    row_div = gcd(row_div, sdiv2[k])
            align = gcd(leaf.origin_div, row_div if r > 1 else 0)
        else:
            align = 0
            for l in it:
                align = gcd(align, l.offset)
                if r > 1:
                    align = gcd(align, l.stride[0])
        return Access(rw, "partition", leaf.space, leaf.name, leaf.storage, leaf.view, it, leaf.elem_bytes,
                      leaf.base_byte, len(it) == 1, leaf.origin_div, align)

    def any_access(self, leaf: _Leaf, rw: str, mode: str) -> Access:
        return Access(rw, mode, leaf.space, leaf.name, leaf.storage, leaf.view, leaf.layouts, leaf.elem_bytes,
                      leaf.base_byte, len(leaf.layouts) == 1 and not leaf.overflow, leaf.origin_div, 0)

    def reads(self, e, src, shape2, iter_shape, mode, out: List[Access]):
        """Collect the reads of expression `e`. In "partition" mode `src` maps e's 2-D
        coordinates to iteration dimensions (None: broadcast); `shape2` is e's 2-D shape."""
        if e is None or isinstance(e, (ir.Const, ir.Ctx)):
            return
        if isinstance(e, ir.Ref):
            if isinstance(e.sym.type, ir.TileT):
                leaf = self.ref_leaf(e.sym)
                if leaf is not None:
                    out.append(self.partition_access(leaf, "read", iter_shape, src) if mode == "partition"
                               else self.any_access(leaf, "read", mode))
            return
        if isinstance(e, ir.Slice):
            for c in ir.sub_exprs(e):
                self.reads(c, None, None, iter_shape, "any" if mode != "per_thread" else mode, out)
            leaf = self.slice_leaf(e)
            if leaf is not None:
                out.append(self.partition_access(leaf, "read", iter_shape, src) if mode == "partition"
                           else self.any_access(leaf, "read", mode))
            return
        if isinstance(e, ir.Element):
            for c in e.indices:
                self.reads(c, None, None, iter_shape, "any" if mode != "per_thread" else mode, out)
            if e.base.kind != "tensor":
                leaf = self.element_leaf(e)
                if leaf is not None:
                    out.append(self.any_access(leaf, "read", "per_thread" if mode == "per_thread" else "any"))
            return
        if isinstance(e, (ir.Reduce, ir.Dot)):
            sub_mode = "per_thread" if mode == "per_thread" else "any"
            for c in ir.sub_exprs(e):
                self.reads(c, None, None, iter_shape, sub_mode, out)
            return
        if isinstance(e, ir.Transpose):
            if mode == "partition":
                x2 = as_2d(e.x.type.shape)
                self.reads(e.x, (src[1], src[0]), x2, iter_shape, mode, out)
            else:
                self.reads(e.x, None, None, iter_shape, mode, out)
            return
        for c in ir.sub_exprs(e):
            if mode == "partition" and isinstance(c.type, ir.TileT):
                c2 = as_2d(c.type.shape)
                self.reads(c, _bcast(c2, shape2, src), c2, iter_shape, mode, out)
            elif mode == "partition":
                self.reads(c, None, None, iter_shape, "any", out)
            else:
                self.reads(c, None, None, iter_shape, mode, out)

    def element_leaf(self, e: ir.Element) -> Optional[_Leaf]:
        base = self.ref_leaf(e.base)
        if base is None or base.space == "global":
            return None
        if all(isinstance(i, ir.Const) for i in e.indices):
            return self.slice_leaf(e)
        if e.flat:
            lays = tuple(l.flat() if l.rank == 2 else l for l in base.layouts)
            return _Leaf(base.space, base.storage, base.name, base.view, lays, base.elem_bytes, base.base_byte,
                         0, lays[0].stride, base.overflow)
        return base

    def target_leaf(self, t) -> Optional[_Leaf]:
        if isinstance(t, ir.Ref):
            return self.ref_leaf(t.sym)
        if isinstance(t, ir.Slice):
            return self.slice_leaf(t)
        return None

    # ---- statements
    def plan(self, p: int, s: ir.Stmt) -> StatementPlan:
        line = s.span.line
        if isinstance(s, ir.ClusterReduce):
            return StatementPlan(p, line, "barrier", f"cluster_{s.op}({s.target.sym.name}) (a cluster barrier)",
                                 (1, 1), 1, (), s)
        if isinstance(s, ir.Barrier):
            return StatementPlan(p, line, "barrier", "barrier()", (1, 1), 1, (), s)
        if isinstance(s, ir.Let) and s.sym.kind == "view":
            leaf = self.target_leaf(s.value)
            if leaf is not None:
                self.views[id(s.sym)] = _Leaf(leaf.space, leaf.storage, s.sym.name, s.sym, leaf.layouts,
                                              leaf.elem_bytes, leaf.base_byte, leaf.origin_div, leaf.stride_div,
                                              leaf.overflow)
            if id(s.sym) in self.tiles and leaf is not None:     # staged: copied into a tile of its own
                shape = as_2d(s.sym.type.shape)
                dest = self.partition_access(self.tile_leaf(s.sym), "write", shape, (0, 1))
                src_leaf = _Leaf(leaf.space, leaf.storage, leaf.name, None, leaf.layouts, leaf.elem_bytes,
                                 leaf.base_byte, leaf.origin_div, leaf.stride_div, leaf.overflow)
                acc = [dest, self.partition_access(src_leaf, "read", shape, (0, 1))]
                return self._tile_plan(p, s, shape, acc, f"the copy of {leaf.name} into {s.sym.name}")
            return StatementPlan(p, line, "view", f"the view {s.sym.name}", (1, 1), 1, (), s)
        if isinstance(s, (ir.Let, ir.VarDecl)) and isinstance(s.sym.type, ir.TileT):
            if s.value is None:
                return StatementPlan(p, line, "decl", f"the declaration of {s.sym.name}", as_2d(s.sym.type.shape), 1, (), s)
            shape = as_2d(s.sym.type.shape)
            acc = [self.partition_access(self.tile_leaf(s.sym), "write", shape, (0, 1))]
            self._value_reads(s.value, shape, acc)
            return self._tile_plan(p, s, shape, acc, _describe(s.value, s.sym.name, None))
        if isinstance(s, ir.Assign) and isinstance(s.target.type, ir.TileT):
            shape = as_2d(s.target.type.shape)
            leaf = self.target_leaf(s.target)
            acc = []
            if leaf is not None:
                acc.append(self.partition_access(leaf, "write", shape, (0, 1)))
                if s.op is not None:
                    acc.append(self.partition_access(leaf, "read", shape, (0, 1)))
            self._value_reads(s.value, shape, acc)
            tname = leaf.name if leaf is not None else "?"
            store_into = tname if leaf is not None and leaf.space == "global" else None
            return self._tile_plan(p, s, shape, acc, _describe(s.value, tname, store_into))
        if isinstance(s, ir.Atomic) and s.tile:
            # a tile atomic: the owner of each element of the slice updates it (one access, "write")
            shape = as_2d(s.target.type.shape)
            leaf = self.slice_leaf(s.target)
            acc = [replace(self.partition_access(leaf, "write", shape, (0, 1)), atomic=True)]
            self._value_reads(s.value, shape, acc)
            return self._tile_plan(p, s, shape, acc, f"the atomic_{s.op} into {leaf.name}")
        # scalar code: per-thread element accesses of tiles
        acc: List[Access] = []
        if isinstance(s, ir.Assign) and isinstance(s.target, ir.Element):
            for c in s.target.indices:
                self.reads(c, None, None, (1, 1), "per_thread", acc)
            if s.target.base.kind != "tensor":
                leaf = self.element_leaf(s.target)
                if leaf is not None:
                    acc.append(self.any_access(leaf, "write", "per_thread"))
                    if s.op is not None:
                        acc.append(self.any_access(leaf, "read", "per_thread"))
            self.reads(s.value, None, None, (1, 1), "per_thread", acc)
        else:
            for e in ir.stmt_exprs(s):
                self.reads(e, None, None, (1, 1), "per_thread", acc)
        acc = [a for a in acc if a.space != "global"]
        kind = "per_thread" if acc else "scalar"
        return StatementPlan(p, line, kind, "the per-thread element access", (1, 1), 1, tuple(acc), s)

    def _value_reads(self, value, shape, acc):
        if isinstance(value.type, ir.TileT):
            v2 = as_2d(value.type.shape)
            self.reads(value, _bcast(v2, shape, (0, 1)), v2, shape, "partition", acc)
        else:
            self.reads(value, None, None, shape, "any", acc)

    def _tile_plan(self, p, s, shape, acc, what) -> StatementPlan:
        cons = []
        for a in acc:
            if a.mode != "partition":
                continue
            if a.space == "registers":       # no alignment question, but still <= 16 bytes a chunk
                cons.append((a.elem_bytes, 0))
                continue
            if a.broadcast_along_row and shape[1] > 1:
                continue
            if not a.contiguous and a.space == "shared":
                # read or written element by element (a transposed operand, a column): no vector
                # access, so no alignment question; the other operands may still move vectors
                cons.append((a.elem_bytes, 0))
                continue
            cons.append((a.elem_bytes, a.align if a.contiguous else 1))
        vec = vector_width(shape[1], cons)
        return StatementPlan(p, s.span.line, "tile", what, shape, vec, tuple(acc), s)


def _mul(a: int, b: int) -> int:
    if a == 0 or b == 0:
        return 0
    return a * b


def _dedupe(lays):
    seen, out = set(), []
    for l in lays:
        if l not in seen:
            seen.add(l)
            out.append(l)
    return out


def _bcast(child: Tuple[int, int], parent: Tuple[int, int], src) -> Tuple[Optional[int], Optional[int]]:
    """The iteration dimension each of a child's dimensions follows, given its parent's."""
    return tuple(src[k] if child[k] == parent[k] else None for k in range(2))


def _collective(e) -> Optional[str]:
    for x in ir.walk_expr(e):
        if isinstance(x, ir.Reduce):
            return ("row" if x.axis == 1 else "col") + x.op
        if isinstance(x, ir.Dot):
            return "dot_t" if x.trans_b else "dot"
    return None


def _describe(value, target: str, store_into: Optional[str]) -> str:
    if store_into is not None:
        if isinstance(value, ir.Ref):
            return f"the store of {value.sym.name} into {store_into}"
        if isinstance(value, ir.Slice) and value.base.kind != "tensor":
            return f"the store of {value.base.name} into {store_into}"
        coll = _collective(value)
        return f"the store into {store_into}" + (f" (with {coll})" if coll else "")
    if isinstance(value, ir.Slice) and value.base.kind == "tensor":
        return f"the copy of {value.base.name} into {target}"
    if isinstance(value, ir.Const) or (isinstance(value.type, ir.ScalarT)):
        return f"the fill of {target}"
    if isinstance(value, ir.Transpose):
        return f"the transpose into {target}"
    coll = _collective(value)
    if coll:
        return f"{coll} into {target}"
    return f"the elementwise statement into {target}"


def statement_plans(kir: ir.KernelIR, lt: Lifetimes, extents: Optional[Dict[str, int]] = None
                    ) -> Tuple[StatementPlan, ...]:
    """One StatementPlan per statement, indexed by position (pre-order, as `lt.positions`).

    Every statement that touches a tile held in registers gets the same vector width as every
    other statement touching it (the smallest of their widths; a smaller power of two keeps all
    the width conditions), so a register tile has one partition: thread t holds chunks t, t + T,
    ... at that width for its whole life."""
    pl = _Planner(kir, lt, dict(extents or {}))
    plans = [pl.plan(p, s) for p, s in lt.positions]
    # group statements linked through register tiles (union-find over tile ids)
    parent: Dict[int, int] = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x
    users: Dict[int, List[int]] = {}
    for i, sp in enumerate(plans):
        regs = [id(a.storage) for a in sp.accesses if sp.kind == "tile" and a.space == "registers"]
        for r in regs:
            users.setdefault(r, []).append(i)
            parent[find(r)] = find(regs[0])
    width: Dict[int, int] = {}
    for r, idx in users.items():
        root = find(r)
        for i in idx:
            width[root] = min(width.get(root, plans[i].vector_width), plans[i].vector_width)
    for r, idx in users.items():
        for i in idx:
            w = width[find(r)]
            if plans[i].vector_width != w:
                plans[i] = replace(plans[i], vector_width=w)
    return tuple(plans)


# ---- control uniformity (where a compiler barrier may go) ----------------------------------------
def varying_control(kir: ir.KernelIR) -> set:
    """ids of the statements that not every thread of the CTA reaches together: inside an if,
    while or for whose condition or bounds differ between threads (ctx.thread, ctx.lane,
    ctx.warp or values computed from them), or after a break, continue or return taken under such
    control. A barrier may not go there (it would hang); this mirrors the checker's rules."""
    varying_syms: set = set()

    def varies(e) -> bool:
        for x in ir.walk_expr(e):
            if isinstance(x, ir.Ctx) and x.field in ("thread", "lane", "warp"):
                return True
            if isinstance(x, ir.Ref) and id(x.sym) in varying_syms:
                return True
        return False

    out: set = set()

    def visit(body, control_varies: bool) -> bool:
        """Returns whether a jump under varying control happened in this block."""
        diverged = False
        for s in body:
            cv = control_varies or diverged
            if cv:
                out.add(id(s))
            if isinstance(s, (ir.Let, ir.VarDecl)) and isinstance(s.sym.type, ir.ScalarT):
                if cv or (s.value is not None and varies(s.value)):
                    varying_syms.add(id(s.sym))
            elif isinstance(s, ir.Assign) and isinstance(s.target, ir.Ref):
                if cv or varies(s.value):
                    varying_syms.add(id(s.target.sym))
            elif isinstance(s, ir.For):
                v = cv or varies(s.lo) or varies(s.hi)
                if v:
                    varying_syms.add(id(s.var))
                if visit(s.body, v):
                    for t in ir.walk_stmts(s.body):
                        out.add(id(t))
            elif isinstance(s, ir.While):
                v = cv or varies(s.cond)
                if visit(s.body, v):
                    for t in ir.walk_stmts(s.body):
                        out.add(id(t))
            elif isinstance(s, ir.If):
                v = cv or varies(s.cond)
                a = visit(s.then, v)
                b = visit(s.orelse, v)
                if a or b:
                    diverged = True
            elif isinstance(s, (ir.Break, ir.Continue, ir.Return)) and cv:
                diverged = True
        return diverged

    for _ in range(4):   # scalar vars assigned later in a loop can make earlier uses vary
        before = (len(varying_syms), len(out))
        out.clear()
        visit(kir.body, False)
        if (len(varying_syms), len(out)) == before:
            break
    return out
