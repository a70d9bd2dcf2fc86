"""Masks decided per tile at its corners: the `where(c, a, b)` whose condition the generated code
can test once for the whole tile (the same test in every thread) instead of at each element.

A causal mask `where(cols(BR, BC, kt) <= rows(BR, BC, row), s, -1e30)` compares, at element
(i, j) of its [BR, BC] tile, kt + j with row + i: a function of (i, j) that is affine, with
uniform coefficients and a uniform offset. Over the rectangle 0 <= i < BR, 0 <= j < BC an affine
function takes its least and greatest values at corners, so one comparison of each extreme tells
whether the condition holds at every element (the where is its `a`), at none (its `b`), or at some
(mixed: the where is evaluated per element). A key block wholly below the diagonal is all true, so
that turn's sweep computes no compare and no select; only the blocks crossing the diagonal pay
for the mask.

What qualifies (`corner_masks`): a tile statement (a tile let / var with a value, or an assignment
to a tile or a window) whose value holds a 2-D `where`; its condition is built of comparisons
(< <= > >= == !=) joined by && || and !, and each comparison's operands are affine index
expressions: `rows`/`cols` tiles, integer constants, uniform integer scalars (any scalar
expression the same in every thread, taken whole, as the language computes it), joined by
+ and -, unary -, and products with an integer constant. Every tile node among them is i32 (the
index tiles' type), each comparison is made in i32 or i64 (an i64 scalar may be one side of a
comparison on its own). The first qualifying where of a statement (in pre-order) is recorded; the
others stay per element.

Guarantees:
- The decision is exact, i32 wrap included: the test (`CornerMask.cases`) computes the corners in
  64-bit integers, where nothing it adds can overflow (terms are at most 32-bit values times
  constants, an i64 scalar only ever compared whole); it decides "all true" or "all false" only
  when every i32 tile node's range over the tile lies within i32 (`guards`: no element wraps),
  and "mixed" otherwise. The per-element branch is the where as written, so every branch gives
  the values the CPU executor gives.
- The record is target-free: `Analysis.masks` lists it; the generator (`tilenb/codegen/generic/
  masks.py`) splits the statement's element sweep on it for every lowering (generic, mma.sync,
  wgmma) and nothing else decides it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple, Union

from .. import ir
from ..types import DTYPES

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
COMPARES = ("<", "<=", ">", ">=", "==", "!=")
_MAX_COEF = 1 << 16          # constant factors kept small: the 64-bit corner sums cannot overflow


@dataclass(frozen=True)
class Affine:
    """ci * i + cj * j + k + sum(coef * leaf): an index expression at element (i, j) of the
    where's tile. terms: (coefficient, a uniform integer scalar expression, how the comparison
    reads its value: "i32" (converted to i32 first, as an i32 tile operation does) or "i64")."""
    ci: int
    cj: int
    k: int
    terms: Tuple[Tuple[int, ir.Expr, str], ...] = ()

    def __add__(self, o: "Affine") -> "Affine":
        return Affine(self.ci + o.ci, self.cj + o.cj, self.k + o.k, self.terms + o.terms)

    def scale(self, c: int) -> "Affine":
        return Affine(self.ci * c, self.cj * c, self.k * c, tuple((c * a, e, w) for a, e, w in self.terms))

    def span(self, shape: Tuple[int, int]) -> Tuple[int, int]:
        """The least and greatest value of ci * i + cj * j over the tile (offsets excluded)."""
        R, C = shape
        lo = min(0, self.ci * (R - 1)) + min(0, self.cj * (C - 1))
        hi = max(0, self.ci * (R - 1)) + max(0, self.cj * (C - 1))
        return lo, hi


@dataclass(frozen=True)
class Compare:
    op: str
    left: Affine
    right: Affine


@dataclass(frozen=True)
class Logic:
    op: str                                   # "&&", "||", "!"
    parts: Tuple["Cond", ...]


Cond = Union[Compare, Logic]


@dataclass(frozen=True)
class CornerMask:
    """One where decided per tile. stmt: the statement whose element sweep the generator splits;
    where: the `ir.Math` node; shape: its [R, C]; cond: its condition as comparisons of affine
    forms; guards: the i32 tile nodes whose range must lie within i32 for a decision."""
    stmt: object
    where: ir.Math
    shape: Tuple[int, int]
    cond: Cond
    guards: Tuple[Affine, ...]

    @property
    def line(self) -> int:
        return self.where.span.line

    def describe(self) -> str:
        R, C = self.shape
        return (f"the where at line {self.line}: its condition is decided once per [{R}, {C}] tile from its "
                f"corners (the same test in every thread): all true takes its first value, all false its "
                f"second, with no compare or select; only a tile where it is mixed is masked per element")

    def to_json(self) -> dict:
        return {"line": self.line, "column": self.where.span.column, "shape": list(self.shape),
                "guards": len(self.guards), "why": self.describe()}


# ---- recognition ---------------------------------------------------------------------------------
class _No(Exception):
    pass


def _int_const(e) -> Optional[int]:
    if isinstance(e, ir.Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return int(e.value)
    return None


def _is_int(dt: str) -> bool:
    return DTYPES[dt].is_int


class _Forms:
    def __init__(self, uni, shape):
        self.uni = uni
        self.shape = shape
        self.guards = []

    def leaf(self, e, width: str) -> Affine:
        """A uniform integer scalar, read as the node of `width` reads it."""
        if isinstance(e.type, ir.TileT) or not _is_int(e.type.dtype) or self.uni.expr_varying(e):
            raise _No
        c = _int_const(e)
        if c is not None:
            if width == "i32" and not I32_MIN <= c <= I32_MAX:
                raise _No
            return Affine(0, 0, c)
        # "i32": the value converted to i32 (an index tile's start, an operand of an i32 tile
        # operation: the language's own wrap); "i64": a signed integer of at most 64 bits, exact
        return Affine(0, 0, 0, ((1, e, width),))

    def form(self, e, width: str) -> Affine:
        """The affine form of e, an operand of a node computed in `width` ("i32" / "i64")."""
        if not isinstance(e.type, ir.TileT):
            return self.leaf(e, width)
        if e.type.dtype != "i32" or len(e.type.shape) != 2:
            raise _No
        f = self.tile_form(e)
        return f

    def tile_form(self, e) -> Affine:
        R, C = e.type.shape
        if isinstance(e, ir.Math) and e.fn in ("rows", "cols"):
            start = self.leaf(e.args[0], "i32")
            idx = Affine(1 if (e.fn == "rows" and R > 1) else 0, 1 if (e.fn == "cols" and C > 1) else 0, 0)
            f = start + idx
            if idx.ci or idx.cj:
                self.guards.append(f)
            return f
        if isinstance(e, ir.Unary) and e.op == "-":
            f = self.form(e.x, "i32").scale(-1)
            self.guards.append(f)
            return f
        if isinstance(e, ir.Binary) and e.op in ("+", "-"):
            a, b = self.form(e.a, "i32"), self.form(e.b, "i32")
            f = a + (b.scale(-1) if e.op == "-" else b)
            self.guards.append(f)
            return f
        if isinstance(e, ir.Binary) and e.op == "*":
            ca, cb = _int_const(e.a), _int_const(e.b)
            c, x = (ca, e.b) if ca is not None else (cb, e.a)
            if c is None or abs(c) > _MAX_COEF:
                raise _No
            f = self.form(x, "i32").scale(c)
            self.guards.append(f)
            return f
        raise _No

    def cond(self, e) -> Cond:
        if isinstance(e, ir.Binary) and e.op in ("&&", "||"):
            return Logic(e.op, (self.cond(e.a), self.cond(e.b)))
        if isinstance(e, ir.Unary) and e.op == "!":
            return Logic("!", (self.cond(e.x),))
        if isinstance(e, ir.Binary) and e.op in COMPARES:
            if not any(isinstance(x.type, ir.TileT) for x in (e.a, e.b)):
                raise _No                     # a uniform scalar condition: not a mask
            from ..types import operand_dtype  # noqa: PLC0415
            ct = operand_dtype(e.a.type.dtype, e.b.type.dtype, isinstance(e.a, ir.Const), isinstance(e.b, ir.Const))
            if ct not in ("i32", "i64", "index"):
                raise _No
            w = "i32" if ct == "i32" else "i64"
            return Compare(e.op, self.form(e.a, w), self.form(e.b, w))
        raise _No


def _decide(where: ir.Math, uni) -> Optional[Tuple[Cond, Tuple[Affine, ...]]]:
    t = where.type
    if not (isinstance(t, ir.TileT) and len(t.shape) == 2):
        return None
    c = where.args[0]
    if not isinstance(c.type, ir.TileT):
        return None
    shape = tuple(int(x) for x in t.shape)
    fm = _Forms(uni, shape)
    try:
        cond = fm.cond(c)
    except _No:
        return None
    uniq = []
    for g in fm.guards:
        if g not in uniq:
            uniq.append(g)
    return cond, tuple(uniq)


def _statement_value(s):
    if isinstance(s, (ir.Let, ir.VarDecl)):
        if s.value is None or not isinstance(s.sym.type, ir.TileT) or s.sym.kind == "view":
            return None
        return s.value
    if isinstance(s, ir.Assign) and isinstance(s.target.type, ir.TileT):
        return s.value
    return None


def corner_masks(kir: ir.KernelIR, uni) -> Tuple[CornerMask, ...]:
    """Every statement's where decided per tile at its corners (module doc), in source order."""
    out = []
    for s in ir.walk_stmts(kir.body):
        v = _statement_value(s)
        if v is None or not isinstance(v.type, ir.TileT):
            continue
        for x in ir.walk_expr(v):
            if isinstance(x, ir.Math) and x.fn == "where":
                got = _decide(x, uni)
                if got is not None:
                    out.append(CornerMask(s, x, tuple(int(n) for n in x.type.shape), *got))
                    break
    return tuple(out)


def by_statement(masks) -> Dict[int, CornerMask]:
    """id(statement) -> its CornerMask."""
    return {id(m.stmt): m for m in masks}


def enclosing_loops(kir: ir.KernelIR, masks) -> Dict[int, Tuple[CornerMask, ...]]:
    """id(For / While) -> the masks of the statements directly in its body (nested ifs included,
    nested loops not): what a loop's entry in `Analysis.loops` says besides its lowering."""
    want = by_statement(masks)
    out: Dict[int, list] = {}

    def walk(body, loop):
        for s in body:
            m = want.get(id(s))
            if m is not None and loop is not None:
                out.setdefault(id(loop), []).append(m)
            for b in ir.child_blocks(s):
                walk(b, s if isinstance(s, (ir.For, ir.While)) else loop)
    walk(kir.body, None)
    return {k: tuple(v) for k, v in out.items()}

