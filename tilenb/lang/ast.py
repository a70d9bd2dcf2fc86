"""The syntax tree the parser produces: frozen dataclasses, every node with its source span.

Guarantees: nodes are immutable and carry a `Span` (1-based line and column of the first
character); nothing here is checked yet (names, types and shapes are the checker's job).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple, Union


@dataclass(frozen=True)
class Span:
    line: int
    column: int
    end_line: int = 0
    end_column: int = 0


# ---- types -------------------------------------------------------------------------------
@dataclass(frozen=True)
class ScalarTypeExpr:
    name: str
    span: Span


@dataclass(frozen=True)
class TensorTypeExpr:
    dtype: str
    dims: Tuple[Union[int, str], ...]
    dim_spans: Tuple[Span, ...]
    span: Span


@dataclass(frozen=True)
class TileTypeExpr:
    dtype: str
    dims: Tuple["Expr", ...]
    span: Span


TypeExpr = Union[ScalarTypeExpr, TensorTypeExpr, TileTypeExpr]


# ---- expressions -------------------------------------------------------------------------
@dataclass(frozen=True)
class Name:
    id: str
    span: Span


@dataclass(frozen=True)
class IntLit:
    value: int
    span: Span


@dataclass(frozen=True)
class FloatLit:
    value: float
    span: Span


@dataclass(frozen=True)
class Unary:
    op: str
    operand: "Expr"
    span: Span


@dataclass(frozen=True)
class Binary:
    op: str
    left: "Expr"
    right: "Expr"
    span: Span


@dataclass(frozen=True)
class Call:
    func: str
    args: Tuple["Expr", ...]
    span: Span
    func_span: Span


@dataclass(frozen=True)
class Field:
    base: "Expr"
    name: str
    span: Span


@dataclass(frozen=True)
class IndexSub:
    """A scalar subscript: selects one position of a dimension."""
    index: "Expr"
    span: Span


@dataclass(frozen=True)
class RangeSub:
    """`start :+ length`."""
    start: "Expr"
    length: "Expr"
    span: Span


@dataclass(frozen=True)
class FullSub:
    """`:`, the whole dimension."""
    span: Span


Subscript = Union[IndexSub, RangeSub, FullSub]


@dataclass(frozen=True)
class Index:
    base: "Expr"
    subs: Tuple[Subscript, ...]
    span: Span


Expr = Union[Name, IntLit, FloatLit, Unary, Binary, Call, Field, Index]


# ---- statements --------------------------------------------------------------------------
@dataclass(frozen=True)
class Let:
    name: str
    type: Optional[TypeExpr]
    value: Expr
    span: Span


@dataclass(frozen=True)
class VarDecl:
    name: str
    type: Optional[TypeExpr]
    value: Optional[Expr]
    span: Span


@dataclass(frozen=True)
class Assign:
    target: Expr
    op: Optional[str]  # None for `=`, else the binary operator of `op=` ("+", "<<", ...)
    value: Expr
    span: Span


@dataclass(frozen=True)
class For:
    var: str
    args: Tuple[Expr, ...]  # lo, hi[, step]
    unroll: Optional[Union[int, str]]
    unroll_span: Optional[Span]
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
class ExprStmt:
    expr: Expr
    span: Span


Stmt = Union[Let, VarDecl, Assign, For, While, If, Break, Continue, Return, ExprStmt]


# ---- top level ---------------------------------------------------------------------------
@dataclass(frozen=True)
class TuneArg:
    """`NAME in [v1, v2, ...]` inside @autotune."""
    name: str
    values: Tuple[Expr, ...]
    span: Span


@dataclass(frozen=True)
class Attribute:
    name: str
    args: Tuple[Union[Expr, TuneArg], ...]
    has_parens: bool
    span: Span


@dataclass(frozen=True)
class Param:
    name: str
    type: TypeExpr
    span: Span


@dataclass(frozen=True)
class Kernel:
    name: str
    attributes: Tuple[Attribute, ...]
    params: Tuple[Param, ...]
    body: Tuple[Stmt, ...]
    span: Span
    name_span: Span


@dataclass(frozen=True)
class Function:
    """`fn name(params) = expr` (body is an Expr) or `fn name(params) { ... }` (a tuple)."""
    name: str
    params: Tuple[str, ...]
    body: Union[Expr, Tuple[Stmt, ...]]
    is_expr: bool
    span: Span


@dataclass(frozen=True)
class Program:
    kernels: Tuple[Kernel, ...]
    functions: Tuple[Function, ...]
    source: str
    filename: str
