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
from math import prod
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
        return prod(self.shape)


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
class ClusterReduce(Barrier):
    """`cluster_sum(t)` (max, min): every CTA of the thread block cluster replaces the elements
    of tile var `t` valid in its own copy by op over the cluster's copies, rank 0 first, each
    copy's invalid elements skipped. A barrier of the whole cluster (so also of the CTA), at
    the kernel's top level only (the checker's rule)."""
    op: str        # sum, max, min
    target: "Ref"  # the tile var


@dataclass(frozen=True)
class Atomic:
    """atomic_add / atomic_max into a tensor. With an `Element` target, per-thread code: each
    thread that runs it updates its element. With a `Slice` target (a tile atomic), a tile
    statement: the value (a tile broadcasting to the slice's shape, or a uniform scalar) is
    applied to every element that is valid in it and inside the tensor, once, by the thread
    that owns the element in the statement's partition."""
    op: str  # add, max
    target: Union[Element, Slice]
    value: Expr
    span: Span

    @property
    def tile(self) -> bool:
        """Whether this is a tile atomic (a slice target)."""
        return isinstance(self.target, Slice)


Stmt = Union[Let, VarDecl, Assign, For, While, If, Break, Continue, Return, Barrier, ClusterReduce, Atomic]


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
    cluster: int = 1                   # @cluster: CTAs per thread block cluster, along x
    # scalar Sym -> its uniformity (params, dims, lets, vars, loop variables): with `uniformity`,
    # the checker's record of section 11, read through tilenb.analysis.uniformity
    scalar_uniformity: Dict["Sym", int] = field(default_factory=dict)

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


# Statement classes without nested blocks (walk_stmts steps over them without a call).
_FLAT_STMTS = frozenset((Let, VarDecl, Assign, Break, Continue, Return, Barrier, ClusterReduce, Atomic))


def walk_stmts(body):
    """Every statement of `body`, nested ones included, in source order (pre-order)."""
    # iterative (a recursive generator costs a frame per level at every step of the walk)
    its = [iter(body)]
    while its:
        for s in its[-1]:
            yield s
            t = type(s)
            if t in _FLAT_STMTS:
                continue
            if t is For or t is While:
                its.append(iter(s.body))
                break
            if t is If:
                its.append(iter(s.orelse))
                its.append(iter(s.then))
                break
            blocks = child_blocks(s)
            if blocks:
                its.extend(iter(b) for b in reversed(blocks))
                break
        else:
            its.pop()


def _no_subs(e):
    return ()


def _x_sub(e):
    return (e.x,)


def _ab_subs(e):
    return (e.a, e.b)


def _args_subs(e):
    return e.args


def _slice_subs(e):
    out = []
    for s in e.subs:
        out.append(s.index if isinstance(s, SubIndex) else s.start)
    return tuple(out)


def _indices_subs(e):
    return e.indices


# The sub-expression rule of each class, in the order sub_exprs tests them (a subclass takes the
# first rule of a class it derives from); classes met later are added to _SUB_RULE as they come.
_SUB_RULES = (((Unary, Convert, Reduce, Transpose), _x_sub), ((Binary,), _ab_subs), ((Dot,), _ab_subs),
              ((Math,), _args_subs), ((Slice,), _slice_subs), ((Element,), _indices_subs))
_SUB_RULE = {c: f for cs, f in _SUB_RULES for c in cs}
_SUB_RULE.update({Const: _no_subs, Ref: _no_subs, Ctx: _no_subs})


def _sub_rule(cls):
    for classes, f in _SUB_RULES:
        if issubclass(cls, classes):
            break
    else:
        f = _no_subs
    _SUB_RULE[cls] = f
    return f


def sub_exprs(e):
    """The direct sub-expressions of an expression."""
    f = _SUB_RULE.get(type(e))
    if f is None:
        f = _sub_rule(type(e))
    return f(e)


def walk_expr(e):
    """`e` and every sub-expression in it, in pre-order (a node, then each of its operands' walks)."""
    rule = _SUB_RULE
    stack = [e]
    pop, push = stack.pop, stack.append
    while stack:
        x = pop()
        yield x
        f = rule.get(type(x))
        subs = (f if f is not None else _sub_rule(type(x)))(x)
        if subs:
            if len(subs) == 1:
                push(subs[0])
            else:
                stack.extend(reversed(subs))


def named_sym(e) -> Optional[Sym]:
    """The symbol an expression node names: a Ref's, or the base of a Slice or an Element (the
    tensor, tile or view it reads or writes); None for every other node."""
    t = type(e)
    if t is Ref:
        return e.sym
    if t is Slice or t is Element:
        return e.base
    return None


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
    if isinstance(s, ClusterReduce):
        return (s.target,)
    return ()
