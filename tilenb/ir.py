"""The typed tile IR: what the checker produces and every later stage consumes.

One `KernelIR` is one kernel specialized to one set of @autotune values: functions are
inlined, names are resolved to `Sym`s, autotune names and constant expressions are folded to
`Const`s, every tile has a constant shape, and every expression carries its type. Nodes are
frozen; a `Sym` compares by identity.

Guarantees (established by `tilenb.sema`): types and shapes are consistent; tile statements
never run under varying control; every `Slice` has constant lengths.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple, Union

from .lang.ast import Span


# ---- types -------------------------------------------------------------------------------
@dataclass(frozen=True)
class ScalarT:
    dtype: str


@dataclass(frozen=True)
class TileT:
    dtype: str
    shape: Tuple[int, ...]

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


@dataclass(frozen=True)
class TensorT:
    dtype: str
    dims: Tuple[Union[int, str], ...]  # literal extents, or names of runtime dims


Type = Union[ScalarT, TileT, TensorT]

UNIFORM, WARP, VARYING = 0, 1, 2
UNIFORMITY_NAMES = {UNIFORM: "uniform", WARP: "warp-uniform", VARYING: "varying"}


@dataclass(eq=False)
class Sym:
    """A named thing: kind is one of tensor, scalar_param, dim, let, var, loop, view.

    A `view` is a `let` bound to a slice (of a tensor or a tile): no bytes of its own.
    `line` is the source line that declares it."""
    name: str
    kind: str
    type: Type
    line: int = 0
    uid: int = 0

    def __repr__(self):
        return f"{self.name}#{self.uid}"


# ---- expressions -------------------------------------------------------------------------
@dataclass(frozen=True)
class Const:
    value: object
    type: ScalarT
    span: Span


@dataclass(frozen=True)
class Ref:
    sym: Sym
    type: Type
    span: Span


@dataclass(frozen=True)
class Ctx:
    field: str  # block.x block.y block.z grid.x grid.y grid.z thread threads warp lane
    type: ScalarT
    span: Span


@dataclass(frozen=True)
class Unary:
    op: str  # "-", "!", "~"
    x: "Expr"
    type: Type
    span: Span


@dataclass(frozen=True)
class Binary:
    op: str  # + - * / % & | ^ << >> == != < <= > >= && ||
    a: "Expr"
    b: "Expr"
    type: Type
    span: Span


@dataclass(frozen=True)
class Math:
    """An elementwise built-in (exp, sqrt, min, max, where, cdiv, ...) over scalars or tiles."""
    fn: str
    args: Tuple["Expr", ...]
    type: Type
    span: Span


@dataclass(frozen=True)
class Convert:
    x: "Expr"
    type: Type
    span: Span


@dataclass(frozen=True)
class Reduce:
    """rowsum/rowmax/rowmin (axis=1, [R, C] -> [R, 1]) and col* (axis=0, -> [1, C])."""
    op: str  # sum, max, min
    axis: int
    x: "Expr"
    type: TileT
    span: Span


@dataclass(frozen=True)
class Dot:
    """dot(a, b): [M, K] x [K, N]; with trans_b, dot_t(a, b): [M, K] x [N, K]."""
    a: "Expr"
    b: "Expr"
    trans_b: bool
    type: TileT
    span: Span


@dataclass(frozen=True)
class Transpose:
    x: "Expr"
    type: TileT
    span: Span


@dataclass(frozen=True)
class SubIndex:
    index: "Expr"


@dataclass(frozen=True)
class SubRange:
    start: "Expr"   # index-typed; `:` is SubRange(Const(0), extent)
    length: int
    full: bool = False


Sub = Union[SubIndex, SubRange]


@dataclass(frozen=True)
class Slice:
    """A window of a tensor, tile or view: reading it gives a tile of `type`.

    `base` is a Sym of kind tensor, var/let (a tile) or view. With `flat`, the base tile is
    first seen as one row [1, R*C]. Scalar subscripts drop their dimension."""
    base: Sym
    subs: Tuple[Sub, ...]
    flat: bool
    type: TileT
    span: Span


@dataclass(frozen=True)
class Element:
    """One element of a tensor, tile or view, read or written by each thread on its own."""
    base: Sym
    indices: Tuple["Expr", ...]
    flat: bool
    type: ScalarT
    span: Span


Expr = Union[Const, Ref, Ctx, Unary, Binary, Math, Convert, Reduce, Dot, Transpose, Slice, Element]


# ---- statements --------------------------------------------------------------------------
@dataclass(frozen=True)
class Let:
    sym: Sym
    value: Expr
    span: Span


@dataclass(frozen=True)
class VarDecl:
    sym: Sym
    value: Optional[Expr]  # None: uninitialized
    span: Span


@dataclass(frozen=True)
class Assign:
    """target (op)= value. target is Ref (a var), Slice (tile or tensor window) or Element."""
    target: Expr
    value: Expr
    op: Optional[str]
    span: Span


@dataclass(frozen=True)
class For:
    var: Sym
    lo: Expr
    hi: Expr
    step: int
    unroll: int
    body: Tuple["Stmt", ...]
    span: Span


@dataclass(frozen=True)
class While:
    cond: Expr
    body: Tuple["Stmt", ...]
    span: Span


@dataclass(frozen=True)
class If:
    cond: Expr
    then: Tuple["Stmt", ...]
    orelse: Tuple["Stmt", ...]
    span: Span


@dataclass(frozen=True)
class Break:
    span: Span


@dataclass(frozen=True)
class Continue:
    span: Span


@dataclass(frozen=True)
class Return:
    span: Span


@dataclass(frozen=True)
class Barrier:
    span: Span


@dataclass(frozen=True)
class Atomic:
    op: str  # add, max
    target: Element
    value: Expr
    span: Span


Stmt = Union[Let, VarDecl, Assign, For, While, If, Break, Continue, Return, Barrier, Atomic]


@dataclass(frozen=True)
class Param:
    sym: Sym
    span: Span


@dataclass(frozen=True)
class KernelIR:
    name: str
    params: Tuple[Param, ...]
    dims: Dict[str, Sym]               # runtime dim name -> its Sym (kind "dim")
    tune: Dict[str, int]               # the @autotune values of this specialization
    threads: int                       # @launch
    grid: Optional[Tuple[Expr, ...]]   # @grid, over dims and tune values
    dynshared: bool
    registers: Tuple[Sym, ...]         # tiles named by @registers
    body: Tuple[Stmt, ...]
    span: Span
    uniformity: Dict[int, int] = field(default_factory=dict)  # id(stmt) -> control uniformity

    def tiles(self):
        """Every tile-valued Sym declared in the body (var and let tiles, not views), in order."""
        out = []
        for s in walk_stmts(self.body):
            if isinstance(s, (VarDecl, Let)) and isinstance(s.sym.type, TileT) and s.sym.kind != "view":
                out.append(s.sym)
        return out


def child_blocks(s) -> Tuple[Tuple[Stmt, ...], ...]:
    if isinstance(s, (For, While)):
        return (s.body,)
    if isinstance(s, If):
        return (s.then, s.orelse)
    return ()


def walk_stmts(body):
    """Every statement of `body`, nested ones included, in source order (pre-order)."""
    for s in body:
        yield s
        for b in child_blocks(s):
            yield from walk_stmts(b)


def sub_exprs(e):
    """The direct sub-expressions of an expression."""
    if isinstance(e, (Unary, Convert, Reduce, Transpose)):
        return (e.x,)
    if isinstance(e, Binary):
        return (e.a, e.b)
    if isinstance(e, Dot):
        return (e.a, e.b)
    if isinstance(e, Math):
        return e.args
    if isinstance(e, Slice):
        out = []
        for s in e.subs:
            out.append(s.index if isinstance(s, SubIndex) else s.start)
        return tuple(out)
    if isinstance(e, Element):
        return e.indices
    return ()


def walk_expr(e):
    yield e
    for c in sub_exprs(e):
        yield from walk_expr(c)


def stmt_exprs(s):
    """The expressions a statement evaluates (targets included), not those of nested blocks."""
    if isinstance(s, (Let, VarDecl)):
        return (s.value,) if s.value is not None else ()
    if isinstance(s, Assign):
        return (s.target, s.value)
    if isinstance(s, For):
        return (s.lo, s.hi)
    if isinstance(s, (While, If)):
        return (s.cond,)
    if isinstance(s, Atomic):
        return (s.target, s.value)
    return ()
