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
- "per_thread": a per-thread element access (`t[i, j]` in scalar code, an atomic): the analyses
  cannot tell which thread touches which element, so the element set is every element the index
  could reach (for a tensor: any element, `Access.window` None).

Global accesses also carry their window in tensor coordinates (`Access.window`: per tensor
dimension the start's terms and the length) and, for "partition" ones, the coordinate within
the window each owner touches (`Access.coords`), which `global_memory` turns into comparable
elements for the barrier analysis. An element read of a tensor inside a tile statement
(`x * Y[0, 0]`) is an "any" access of the whole tensor.

Vector width of a tile statement: the largest power of two v that divides the iteration row length
C such that every "partition" access that is contiguous along the row (column stride 1) moves at
most 16 bytes per chunk (v * element bytes <= 16) and starts every chunk on a multiple of v
elements: v divides the access's start offset and its row stride as far as they are provable
(`tilenb.analysis.divisibility`; tiles start 16-byte aligned in shared memory, tensors are assumed
16-byte aligned at their base). A window's start is proved from its expression, for tile windows
as for tensor windows: a start known only at run time may put the window partly outside its tile
(spec section 6), so the starts enumerated for the elements touched (those inside the tile) prove
nothing about alignment. A partition access of a tensor that is not contiguous along the
row (a column of a tensor, a transposed tensor operand) forces v = 1; one of a shared tile that is
not contiguous (a transposed tile, a column of it: read or written element by element) only keeps
v * element bytes <= 16, so the contiguous side of the statement (a transpose's store) still moves
vectors; one that is broadcast along the row (column stride 0) or lives in registers adds no
condition (registers: v * element bytes <= 16).

Instruction widths (`Access.vector`, decided once here and read by the code generator, the
views and tests/codegen/test_sass_widths.py): the elements one memory instruction moves for a whole
chunk. A statement whose destination is a contiguous shared or global partition access of 4, 8
or 16 bytes a chunk, with V > 1 and no register tile, is moved with vectors (`vector_path`); then
each contiguous shared or global partition access (not read through a transpose) of 4, 8 or 16
bytes a chunk has vector V, every other access 1. A [R, 1] statement of row reductions that the
whole CTA computes has `row_reductions` (the chunk width of each) and its operands that can be
read a chunk at a time have that vector. A statement split by a "within" barrier moves
everything element by element (`narrow_within`, applied after the barriers).

Guarantees: every tile statement of the IR has exactly one plan, with its destination write
first; every shared-memory access names its tile's byte offset from the lifetimes; the plans are
computed once per kernel variant from the IR alone (plus the representative runtime extents used
for global-memory addresses).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from math import gcd
from typing import Dict, List, Optional, Tuple

from .. import ir
from ..types import DTYPES
from .divisibility import Divisibility, stride_divisors
from .layout import Layout, row_major
from .lifetimes import Lifetimes
from .partition import MAX_VECTOR_BYTES, as_2d, vector_width

VECTOR_BYTES = (4, 8, 16)   # the vector accesses a thread issues: 32-, 64- and 128-bit loads and stores

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
    # elements one memory instruction of the generated code moves for a whole chunk (or, for a
    # row reduction's operand, a whole chunk of its row): V with a V * elem_bytes-byte vector
    # access, 1 element by element (and always 1 for registers, which take no memory access)
    vector: int = 1
    node: object = field(default=None, compare=False, repr=False)   # the IR expression accessed

    @property
    def vector_bytes(self) -> int:
        """Bytes one memory instruction of this access moves (a whole chunk's)."""
        return self.vector * self.elem_bytes
    # global only: the window in tensor coordinates, one entry per tensor dimension: (terms, n),
    # the start being the sum of the expressions `terms` (none: 0) and n the window's length
    # there, or None where a scalar subscript fixes the dimension. None (the field): the access
    # may touch any element of the tensor (a per-thread element access).
    window: Optional[tuple] = field(default=None, compare=False)
    # global "partition" only: per window dimension of length n (in order), the layout over the
    # iteration space giving the coordinate within the window that the owner of each
    # iteration coordinate touches
    coords: Tuple[Layout, ...] = field(default=(), compare=False)
    # a tile atomic's read-modify-write of its tensor slice (global, "write", "partition"):
    # indivisible against other atomics, ordered like a store against plain accesses
    atomic: bool = False

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
    what: str                       # e.g. "the copy of X into x", "rowsum", "dot", "the store of t into Y", "the += into acc"
    shape: Tuple[int, int]          # the iteration space (tile statements)
    vector_width: int               # tile statements; 1 otherwise
    accesses: Tuple[Access, ...]    # tile statements: the destination write first
    stmt: ir.Stmt
    # row reductions done by the whole CTA (each thread reduces the chunks of every row it owns,
    # then a warp shuffle and one combine across warps): (the Reduce node, its chunk width)
    row_reductions: Tuple[Tuple[object, int], ...] = field(default=(), compare=False)

    @property
    def vector_path(self) -> bool:
        """The generated code moves this statement's destination with vector stores."""
        return self.kind == "tile" and bool(self.accesses) and self.accesses[0].rw == "write" \
            and self.accesses[0].vector > 1

    def access_of(self, node) -> Optional[Access]:
        """The access of IR expression `node` (a Ref, Slice or Element read by this statement, or
        its target), or None."""
        for a in self.accesses:
            if a.node is node:
                return a
        return None

    def reduce_width(self, node) -> Optional[int]:
        """The chunk width of row reduction `node` done by the whole CTA, or None."""
        for n, w in self.row_reductions:
            if n is node:
                return w
        return None


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
    # a tile window: its first element's offset within the tile is origin_const plus a multiple
    # of origin_var (0: no variable part), from the divisibility of its starts, whatever values
    # they take at run time (a start known only at run time may even lie outside the tile)
    origin_const: int = 0
    origin_var: int = 0

    window: tuple = ()              # global: per tensor dimension (terms, length or None); see Access

    @property
    def origin_align(self) -> int:
        """What the window's first element offset is always a multiple of (0: always 0)."""
        return gcd(abs(self.origin_const), self.origin_var)


class _Planner:
    def __init__(self, kir: ir.KernelIR, lt: Lifetimes, extents: Dict[str, int]):
        self.kir = kir
        self.lt = lt
        self.extents = extents
        self.div = Divisibility(kir)
        self.tiles = {id(t.sym): t for t in lt.tiles}
        self.views: Dict[int, _Leaf] = {}
        self.no_vector: set = set()     # ids of expressions read under a transpose (element by element)
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
                     stride_divisors(self.kir, dims), window=tuple(((), -1) for _ in dims))

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

    def may_leave(self, e, hi: int) -> bool:
        """Whether a window start (or index) on a tile may lie outside [0, hi] at run time."""
        if isinstance(e, ir.Const):
            return False
        if isinstance(e, ir.Ref) and id(e.sym) in self.loop_values:
            return any(not 0 <= v <= hi for v in self.loop_values[id(e.sym)])
        return self.div.of(e) != 0

    def slice_leaf(self, e) -> Optional[_Leaf]:
        """The leaf of a Slice or Element expression (elements it can touch)."""
        base = self.ref_leaf(e.base)
        if base is None:
            return None
        if e.flat and base.space != "global":
            lays = tuple(l.flat() if l.rank == 2 else l for l in base.layouts)
            base = replace(base, layouts=lays, stride_div=lays[0].stride)
        subs = e.subs if isinstance(e, ir.Slice) else tuple(ir.SubIndex(i) for i in e.indices)
        if base.space == "global":
            lay = base.layouts[0]
            shape, stride, sdiv = [], [], []
            od = base.origin_div
            win = list(base.window)
            open_dims = [k for k, (_, n) in enumerate(win) if n is not None]
            for k, sub in enumerate(subs):
                d = open_dims[k] if k < len(open_dims) else None
                if isinstance(sub, ir.SubIndex):
                    od = gcd(od, _mul(self.div.of(sub.index), base.stride_div[k]))
                    if d is not None:
                        win[d] = (win[d][0] + (sub.index,), None)
                else:
                    od = gcd(od, _mul(self.div.of(sub.start), base.stride_div[k]))
                    shape.append(sub.length)
                    stride.append(lay.stride[k])
                    sdiv.append(base.stride_div[k])
                    if d is not None:
                        win[d] = (win[d][0] + (sub.start,), sub.length)
            return _Leaf("global", base.storage, base.name, base.view,
                         (Layout(tuple(shape), tuple(stride), 0),), base.elem_bytes, 0, od, tuple(sdiv),
                         window=tuple(win))
        # a window of a tile: enumerate the possible starts (for the elements touched), and
        # prove the alignment of its origin from the starts' divisibility (for vector widths)
        lays = list(base.layouts)
        overflow = base.overflow
        oc, ov = base.origin_const, base.origin_var
        for k, sub in enumerate(subs):
            start = sub.index if isinstance(sub, ir.SubIndex) else sub.start
            step = abs(base.layouts[0].stride[k])
            if isinstance(start, ir.Const) and isinstance(start.value, int) and not isinstance(start.value, bool):
                oc += int(start.value) * base.layouts[0].stride[k]
            else:
                ov = gcd(ov, _mul(self.div.of(start), step))
        for k, sub in reversed(list(enumerate(subs))):
            new = []
            for lay in lays:
                ext = lay.shape[k]
                if self.may_leave(sub.index if isinstance(sub, ir.SubIndex) else sub.start,
                                  ext - (1 if isinstance(sub, ir.SubIndex) else min(sub.length, ext))):
                    overflow = True
                    break
                if isinstance(sub, ir.SubIndex):
                    vals = [v for v in self.start_values(sub.index, ext - 1) if 0 <= v < ext] or [0]
                    new.extend(lay.select(k, v) for v in vals)
                else:
                    n = min(sub.length, ext)
                    vals = [v for v in self.start_values(sub.start, ext - n) if 0 <= v <= ext - n] or [0]
                    for v in vals:
                        new.append(lay.slice(tuple(v if j == k else 0 for j in range(lay.rank)),
                                             tuple(n if j == k else lay.shape[j] for j in range(lay.rank))))
            if overflow:
                break
            lays = _dedupe(new)
            if len(lays) > MAX_ALTERNATIVES:
                overflow = True
                break
        if overflow:
            # every element of the base is possibly touched
            lays = list(base.layouts)
            return replace(base, layouts=tuple(lays), origin_div=0, stride_div=lays[0].stride, overflow=True)
        return replace(base, layouts=tuple(lays), origin_div=0, stride_div=lays[0].stride,
                       origin_const=oc, origin_var=ov)

    # ---- accesses
    def partition_access(self, leaf: _Leaf, rw: str, shape: Tuple[int, int], src, node=None) -> Access:
        if leaf.overflow:
            return self.any_access(leaf, rw, "any", node)
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
            # the window's origin as proved from its starts (not from the enumerated starts,
            # which leave out runtime starts that put the window partly outside the tile), and
            # the stride between the iteration space's rows
            align = leaf.origin_align
            for l in it:
                if r > 1:
                    align = gcd(align, l.stride[0])
        window, coords = None, ()
        if leaf.space == "global":
            window = leaf.window
            sl = leaf.layouts[0]
            coords = tuple(Layout(sl.shape, tuple(int(i == j) for i in range(sl.rank)), 0).as_2d()
                           .compose_map(shape, src) for j in range(sl.rank))
        return Access(rw, "partition", leaf.space, leaf.name, leaf.storage, leaf.view, it, leaf.elem_bytes,
                      leaf.base_byte, len(it) == 1, leaf.origin_div, align, node=node, window=window, coords=coords)

    def any_access(self, leaf: _Leaf, rw: str, mode: str, node=None) -> Access:
        return Access(rw, mode, leaf.space, leaf.name, leaf.storage, leaf.view, leaf.layouts, leaf.elem_bytes,
                      leaf.base_byte, len(leaf.layouts) == 1 and not leaf.overflow, leaf.origin_div, 0, node=node,
                      window=leaf.window if leaf.space == "global" else None)

    def tensor_element_access(self, leaf: _Leaf, rw: str, mode: str, node=None) -> Access:
        """One element of a tensor (or of a view of one) per thread, at indices the analyses do
        not follow: any element of the tensor, by unknown threads ("per_thread") or by possibly
        every thread ("any", an element read inside a tile statement)."""
        return Access(rw, mode, "global", leaf.storage.name, leaf.storage, leaf.view, leaf.layouts,
                      leaf.elem_bytes, 0, False, 0, 0, node=node, window=None)

    def reads(self, e, src, shape2, iter_shape, mode, out: List[Access]):
        """Collect the reads of expression `e`. In "partition" mode `src` maps e's 2-D
        coordinates to iteration dimensions (None: broadcast); `shape2` is e's 2-D shape."""
        if e is None or isinstance(e, (ir.Const, ir.Ctx)):
            return
        if isinstance(e, ir.Ref):
            if isinstance(e.sym.type, ir.TileT):
                leaf = self.ref_leaf(e.sym)
                if leaf is not None:
                    out.append(self.partition_access(leaf, "read", iter_shape, src, e) if mode == "partition"
                               else self.any_access(leaf, "read", mode, e))
            return
        if isinstance(e, ir.Slice):
            for c in ir.sub_exprs(e):
                self.reads(c, None, None, iter_shape, "any" if mode != "per_thread" else mode, out)
            leaf = self.slice_leaf(e)
            if leaf is not None:
                out.append(self.partition_access(leaf, "read", iter_shape, src, e) if mode == "partition"
                           else self.any_access(leaf, "read", mode, e))
            return
        if isinstance(e, ir.Element):
            for c in e.indices:
                self.reads(c, None, None, iter_shape, "any" if mode != "per_thread" else mode, out)
            m = "per_thread" if mode == "per_thread" else "any"
            g = self.global_leaf(e.base)
            if g is not None:
                out.append(self.tensor_element_access(g, "read", m))
            else:
                leaf = self.element_leaf(e)
                if leaf is not None:
                    out.append(self.any_access(leaf, "read", m, e))
            return
        if isinstance(e, (ir.Reduce, ir.Dot)):
            sub_mode = "per_thread" if mode == "per_thread" else "any"
            for c in ir.sub_exprs(e):
                self.reads(c, None, None, iter_shape, sub_mode, out)
            return
        if isinstance(e, ir.Transpose):
            if mode == "partition":
                # read element by element, whatever the layout composed through the transpose
                self.no_vector.update(id(x) for x in ir.walk_expr(e.x))
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

    def global_leaf(self, sym: ir.Sym) -> Optional[_Leaf]:
        """The leaf of a tensor, or of a let view of one; None for tiles and views of tiles."""
        if sym.kind == "tensor":
            return self.tensor_leaf(sym)
        leaf = self.views.get(id(sym)) if sym.kind == "view" and id(sym) not in self.tiles else None
        return leaf if leaf is not None and leaf.space == "global" else None

    def element_leaf(self, e: ir.Element) -> Optional[_Leaf]:
        base = self.ref_leaf(e.base)
        if base is None or base.space == "global":
            return None
        if all(isinstance(i, ir.Const) for i in e.indices):
            return self.slice_leaf(e)
        if e.flat:
            lays = tuple(l.flat() if l.rank == 2 else l for l in base.layouts)
            return replace(base, layouts=lays, origin_div=0, stride_div=lays[0].stride)
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
                self.views[id(s.sym)] = replace(leaf, name=s.sym.name, view=s.sym)
            if id(s.sym) in self.tiles and leaf is not None:     # staged: copied into a tile of its own
                shape = as_2d(s.sym.type.shape)
                dest = self.partition_access(self.tile_leaf(s.sym), "write", shape, (0, 1), s)
                src_leaf = replace(leaf, view=None)
                acc = [dest, self.partition_access(src_leaf, "read", shape, (0, 1), s.value)]
                return self._tile_plan(p, s, shape, acc, f"the copy of {leaf.name} into {s.sym.name}")
            return StatementPlan(p, line, "view", f"the view {s.sym.name}", (1, 1), 1, (), s)
        if isinstance(s, (ir.Let, ir.VarDecl)) and isinstance(s.sym.type, ir.TileT):
            if s.value is None:
                return StatementPlan(p, line, "decl", f"the declaration of {s.sym.name}", as_2d(s.sym.type.shape), 1, (), s)
            shape = as_2d(s.sym.type.shape)
            acc = [self.partition_access(self.tile_leaf(s.sym), "write", shape, (0, 1), s)]
            self._value_reads(s.value, shape, acc)
            return self._tile_plan(p, s, shape, acc, _describe(s.value, s.sym.name, None))
        if isinstance(s, ir.Assign) and isinstance(s.target.type, ir.TileT):
            shape = as_2d(s.target.type.shape)
            leaf = self.target_leaf(s.target)
            acc = []
            if leaf is not None:
                acc.append(self.partition_access(leaf, "write", shape, (0, 1), s.target))
                if s.op is not None:
                    acc.append(self.partition_access(leaf, "read", shape, (0, 1), s.target))
            self._value_reads(s.value, shape, acc)
            tname = leaf.name if leaf is not None else "?"
            store_into = tname if leaf is not None and leaf.space == "global" else None
            what = _describe(s.value, tname, store_into) if s.op is None else (
                f"the {s.op}= into {tname}" + (f" (with {_collective(s.value)})" if _collective(s.value) else ""))
            return self._tile_plan(p, s, shape, acc, what)
        if isinstance(s, ir.Atomic) and s.tile:
            # a tile atomic: the owner of each element of the slice updates it (one access, "write")
            shape = as_2d(s.target.type.shape)
            leaf = self.slice_leaf(s.target)
            acc = [replace(self.partition_access(leaf, "write", shape, (0, 1), s.target), atomic=True)]
            self._value_reads(s.value, shape, acc)
            return self._tile_plan(p, s, shape, acc, f"the atomic_{s.op} into {leaf.name}")
        # scalar code: per-thread element accesses of tiles
        acc: List[Access] = []
        if isinstance(s, (ir.Assign, ir.Atomic)) and isinstance(s.target, ir.Element):
            for c in s.target.indices:
                self.reads(c, None, None, (1, 1), "per_thread", acc)
            g = self.global_leaf(s.target.base)
            if g is not None:          # a tensor element: written (an atomic reads and writes it)
                acc.append(self.tensor_element_access(g, "write", "per_thread"))
                if s.op is not None and isinstance(s, ir.Assign):
                    acc.append(self.tensor_element_access(g, "read", "per_thread"))
            else:
                leaf = self.element_leaf(s.target)
                if leaf is not None:
                    acc.append(self.any_access(leaf, "write", "per_thread"))
                    if s.op is not None:
                        acc.append(self.any_access(leaf, "read", "per_thread"))
            self.reads(s.value, None, None, (1, 1), "per_thread", acc)
        else:
            for e in ir.stmt_exprs(s):
                self.reads(e, None, None, (1, 1), "per_thread", acc)
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


    # ---- what one memory instruction moves (after the statement's vector width is final)
    def with_vectors(self, sp: StatementPlan) -> StatementPlan:
        """`sp` with every access's `vector` and the CTA row reductions decided.

        A statement is moved with vector accesses (its "vector path") when its width V > 1, its
        destination is a partition access of shared or global memory contiguous along the row
        whose chunk is 4, 8 or 16 bytes, and it touches no register tile (those follow their
        register layout, element by element). On the vector path, every partition access of shared
        or global memory that is contiguous along the row (its alignment is part of V's proof),
        not read through a transpose, and whose chunk is 4, 8 or 16 bytes moves a chunk with one
        instruction: vector V. Everything else moves element by element: vector 1. (A chunk
        that crosses the valid region or a tensor's edge is moved element by element at run
        time; `vector` is what a whole chunk takes.) Statements the barrier analysis must split
        around a "within" barrier are narrowed afterwards (`narrow_within`)."""
        if sp.kind != "tile":
            return sp
        V = sp.vector_width
        acc = list(sp.accesses)
        dest = acc[0] if acc and acc[0].rw == "write" else None
        path = (V > 1 and dest is not None and _vector_ok(dest, V, ()) and not dest.atomic
                and not any(a.space == "registers" for a in acc))     # a tile atomic: element by element
        out = []
        for a in acc:
            w = V if path and _vector_ok(a, V, self.no_vector) else 1
            out.append(a if a.vector == w else replace(a, vector=w))
        sp = replace(sp, accesses=tuple(out))
        return self.row_reduce_widths(sp)

    def row_reduce_widths(self, sp: StatementPlan) -> StatementPlan:
        """The row reductions of a [R, 1] statement that the whole CTA computes together: the
        value's reductions at the statement's own coordinates (none under a dot or transpose)
        are all row reductions (axis 1) of a [R, Cx] operand with R rows, the CTA is whole
        warps, and no register tile is touched. Each gets the widest chunk width w in 8, 4, 2,
        1 that cuts a row into Cx / w chunks, a multiple of the CTA's threads (so each thread
        owns as many chunks of every row), and for w > 1 lets at least one operand be read with
        w-element vectors (`_reduce_leaf_ok`); those operands' accesses get vector w."""
        s = sp.stmt
        R, Cc = sp.shape
        T = self.kir.threads
        if Cc != 1 or T % 32 or any(a.space == "registers" for a in sp.accesses):
            return sp
        if isinstance(s, ir.Assign) and isinstance(s.target.type, ir.TileT):
            value, ident = s.value, (s.op is None or as_2d(s.value.type.shape) == (R, Cc))
        elif isinstance(s, (ir.Let, ir.VarDecl)) and s.value is not None and s.sym.kind != "view":
            value, ident = s.value, True
        else:
            return sp
        if not isinstance(value.type, ir.TileT):
            return sp
        reds = own_reductions(value, ident)
        if not reds or any(r.axis != 1 or len(r.x.type.shape) != 2 or r.x.type.shape[0] != R for r in reds):
            return sp
        widths, vec = [], {}
        for red in reds:
            xr, xc = as_2d(red.x.type.shape)
            leaves = [sp.access_of(e) for e in _own_leaves(red.x)]
            leaves = [a for a in leaves if a is not None]
            for w in (8, 4, 2, 1):
                if xc % w or (xc // w) % T:
                    continue
                ok = [a for a in leaves if self._reduce_leaf_ok(a, w)]
                if w > 1 and not ok:
                    continue
                widths.append((red, w))
                for a in ok:
                    if w > 1:
                        vec[id(a.node)] = w
                break
            else:
                return sp
        acc = tuple(replace(a, vector=vec[id(a.node)]) if a.node is not None and id(a.node) in vec else a
                    for a in sp.accesses)
        return replace(sp, accesses=acc, row_reductions=tuple(widths))

    def _reduce_leaf_ok(self, a: Access, w: int) -> bool:
        """Whether a row reduction's operand access `a` can be read w elements at a time at each
        chunk's own coordinates: w * elem_bytes is 4, 8 or 16 bytes and either `a` is a whole
        shared tile (16-byte aligned, rows a multiple of w: the iteration rule already asks it)
        or a tensor window, contiguous along the row, whose first element offset and the
        strides of the tensor's other dimensions are multiples of w (the divisibility rules;
        tensors are 16-byte aligned at their base)."""
        e = a.node
        if a.elem_bytes * w not in VECTOR_BYTES:
            return False
        if a.space == "shared":
            return isinstance(e, ir.Ref) and id(e.sym) in self.tiles and e.sym.type.shape[-1] % w == 0
        if a.space != "global" or not isinstance(e, ir.Slice) or e.base.kind != "tensor" or e.flat:
            return False
        if not e.subs or not isinstance(e.subs[-1], ir.SubRange):
            return False
        sdiv = stride_divisors(self.kir, e.base.type.dims)
        if any(d % w for d in sdiv[:-1]):
            return False
        origin = 0
        for sub, sd in zip(e.subs, sdiv):
            origin = gcd(origin, _mul(self.div.of(sub.index if isinstance(sub, ir.SubIndex) else sub.start), sd))
        return origin % w == 0


def _vector_ok(a: Access, V: int, no_vector) -> bool:
    return (a.mode == "partition" and a.space in ("shared", "global") and a.contiguous
            and a.elem_bytes * V in VECTOR_BYTES and (a.node is None or id(a.node) not in no_vector))


def _walk_own(value, ident: bool, take, rows_only: bool = False) -> List[object]:
    """The nodes of `value` that `take` keeps, walking down through the nodes evaluated at the
    statement's own coordinates: a child stays "at its own coordinates" (`ident`) while its
    shape is its parent's (with `rows_only`, while its row count is its parent's: the columns
    may broadcast). `take(e, ident)` answers True (keep e, stop), False (stop) or None (go on
    into e's tile operands)."""
    found = []

    def visit(e, ident):
        verdict = take(e, ident)
        if verdict is not None:
            if verdict:
                found.append(e)
            return
        for c in ir.sub_exprs(e):
            if isinstance(c.type, ir.TileT):
                P, Q = as_2d(e.type.shape), as_2d(c.type.shape)
                visit(c, ident and (Q[0] == P[0] if rows_only else Q == P))
    visit(value, ident)
    return found


def _take_reduction(e, ident):
    if isinstance(e, ir.Reduce):
        return ident and len(e.x.type.shape) == 2
    if isinstance(e, (ir.Dot, ir.Transpose)):
        return False
    return None


def own_reductions(value, ident: bool = True, rows_only: bool = False) -> List[ir.Reduce]:
    """The reductions of 2-D tiles that `value` evaluates at the statement's own coordinates
    (through elementwise operators of the same shape; not inside a dot, transpose or another
    reduction). `ident` says whether `value` itself is at those coordinates; with `rows_only`
    only the rows must be the statement's (a reduction broadcast along the row counts). The one
    walk behind the row-reduction plans here, `smem.identity_reductions` and the code
    generator's hoisting of row reductions."""
    return _walk_own(value, ident, _take_reduction, rows_only)


def _take_leaf(e, ident):
    if isinstance(e, (ir.Ref, ir.Slice)) and isinstance(e.type, ir.TileT):
        return ident
    if isinstance(e, (ir.Reduce, ir.Dot, ir.Transpose)):
        return False
    return None


def _own_leaves(x) -> List[object]:
    """The tile names and slices `x` reads at its own coordinates (not broadcast, transposed,
    or inside a reduction or dot)."""
    return _walk_own(x, True, _take_leaf)


def narrow_within(plans: Tuple[StatementPlan, ...], barriers) -> Tuple[StatementPlan, ...]:
    """The plans with every access of a statement that has a "within" barrier moved element by
    element: such a statement computes its value into registers, waits, then writes (the code
    generator's two-phase form), with no vector accesses and no CTA row reduction."""
    within = {b.position for b in barriers if b.where == "within"}
    out = []
    for sp in plans:
        if sp.position in within and sp.kind == "tile" and (sp.row_reductions or any(a.vector != 1 for a in sp.accesses)):
            sp = replace(sp, accesses=tuple(replace(a, vector=1) for a in sp.accesses), row_reductions=())
        out.append(sp)
    return tuple(out)


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
    return tuple(pl.with_vectors(sp) for sp in plans)
