"""Uniformity: which control and which scalar values are the same in every thread of a CTA.

The rules are those of docs/spec.md section 11. A value or a point of control is uniform (the
same in every thread of the CTA), warp-uniform (the same within each warp: `ctx.warp` and what is
computed from it) or varying (`ctx.thread`, `ctx.lane` and what is computed from them); a `let`
or loop variable is as uniform as its value (its bounds) and the control it is bound under; a
scalar `var` is as uniform as the least uniform of everything assigned to it and the control of
each assignment; the control of a statement is as uniform as the least uniform enclosing
condition or loop bounds and, after a jump taken under non-uniform control, the rest of the block
it leaves (a `break` or `return` so taken makes the whole body of the loops it leaves
non-uniform).

One home. The checker (`tilenb.sema.check`) applies these rules while it walks the program,
because it must name the statement that breaks one, and it records what it found in the IR:
`KernelIR.uniformity` (the level of the control every statement runs under) and
`KernelIR.scalar_uniformity` (the level of every scalar symbol). Nothing recomputes them: every
later consumer (the barrier analysis, the CUDA generator) reads them through `uniformity(kir)`,
and the value rule `expr_level` is the checker's own.

Guarantees: `uniformity(kir)` covers every statement of a checked kernel variant;
`Uniformity.varying_control` is the set of statements that not every thread of the CTA reaches
together (warp-uniform control counts as varying there: a CTA barrier needs the whole CTA), so a
barrier may not be placed at them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, FrozenSet

from .. import ir

UNIFORM, WARP, VARYING = ir.UNIFORM, ir.WARP, ir.VARYING


def ctx_level(field: str) -> int:
    """The uniformity of a `ctx` field: ctx.thread and ctx.lane vary, ctx.warp is warp-uniform,
    every other field (block, grid, threads, cluster) is uniform."""
    if field == "warp":
        return WARP
    if field in ("thread", "lane"):
        return VARYING
    return UNIFORM


def expr_level(e, sym_level: Callable[[ir.Sym], int]) -> int:
    """The uniformity of an expression: the least uniform of its `ctx` fields and of the scalar
    symbols it reads (`sym_level` gives theirs); literals and tile values are uniform."""
    if e is None:
        return UNIFORM
    level = UNIFORM
    for x in ir.walk_expr(e):
        t = type(x)
        if t is ir.Ctx:
            level = max(level, ctx_level(x.field))
        elif t is ir.Ref:
            level = max(level, sym_level(x.sym))
        if level == VARYING:
            break
    return level


@dataclass(frozen=True)
class Uniformity:
    """The uniformity the checker recorded for one kernel variant.

    control: id(statement) -> the level of the control it runs under; symbols: scalar Sym ->
    its level (absent: uniform, as for tile symbols)."""
    control: Dict[int, int]
    symbols: Dict[ir.Sym, int]
    varying_control: FrozenSet[int]    # id(statement) whose control is not uniform across the CTA

    def control_level(self, stmt) -> int:
        return self.control.get(id(stmt), UNIFORM)

    def sym_level(self, sym: ir.Sym) -> int:
        return self.symbols.get(sym, UNIFORM)

    def level(self, e) -> int:
        """The uniformity of expression `e` (UNIFORM, WARP or VARYING)."""
        return expr_level(e, self.sym_level)

    def expr_varying(self, e) -> bool:
        """Whether `e` may differ between threads of the CTA (warp-uniform counts as differing)."""
        return self.level(e) > UNIFORM


def uniformity(kir: ir.KernelIR) -> Uniformity:
    """The uniformity of a checked kernel variant, as the checker recorded it in the IR."""
    control = dict(kir.uniformity)
    varying = frozenset(k for k, v in control.items() if v > UNIFORM)
    return Uniformity(control, dict(kir.scalar_uniformity), varying)
