"""The element sweep of a statement split on a mask the analysis decides per tile at its corners
(`tilenb.analysis.masks`): one test, the same in every thread, then the sweep written for "all
true" (the where is its first value), "all false" (its second) and "mixed" (per element).

Guarantees:
- Which statements split, and on which where, is the analysis' record (`Analysis.masks`, read
  here through `g.masks`); this module writes its test and nothing decides it here.
- The test computes each comparison's extremes over the tile in 64-bit integers (nothing it adds
  can overflow: see the analysis) and decides a case only when no i32 tile node of the condition
  wraps over the tile; every other tile takes the per-element branch, the where as written.
- Each branch starts from the same generator state: the per-statement caches (`memo`, `pre`,
  `pre_bcast`, `regions`, `fast_div`, `lay_pre`) are restored between branches, so no branch
  names a C variable declared in another.
"""
from __future__ import annotations

from typing import Callable, List, Tuple

from ... import ir
from ...analysis.masks import I32_MAX, I32_MIN, Affine, Compare, CornerMask, Logic
from . import exprs

ALL_TRUE, ALL_FALSE, MIXED = 1, 2, 0

_CACHES = ("memo", "pre", "pre_bcast", "regions", "fast_div", "lay_pre")


def _offset(g, f: Affine) -> str:
    """k + sum(coef * leaf) in long long."""
    parts: List[str] = []
    for c, e, width in f.terms:
        v = exprs.scalar(g, e)
        leaf = f"(long long)(int)({v})" if width == "i32" else f"(long long)({v})"
        parts.append(leaf if c == 1 else f"{c}LL * {leaf}")
    if f.k or not parts:
        parts.append(f"{f.k}LL")
    return "(" + " + ".join(parts) + ")"


def _plus(x: str, c: int) -> str:
    return x if c == 0 else f"({x} + {c}LL)" if c > 0 else f"({x} - {-c}LL)"


def _compare(g, c: Compare, shape) -> Tuple[str, str]:
    """(all true, all false) of one comparison, as C booleans."""
    diff = Affine(c.left.ci - c.right.ci, c.left.cj - c.right.cj, 0)
    lo, hi = diff.span(shape)
    L = _offset(g, Affine(0, 0, c.left.k, c.left.terms))
    R = _offset(g, Affine(0, 0, c.right.k, c.right.terms))
    Llo, Lhi = _plus(L, lo), _plus(L, hi)     # the left side's tile part moved over: L + t, t in [lo, hi]
    op = c.op
    if op == "<":
        return f"{Lhi} < {R}", f"{Llo} >= {R}"
    if op == "<=":
        return f"{Lhi} <= {R}", f"{Llo} > {R}"
    if op == ">":
        return f"{Llo} > {R}", f"{Lhi} <= {R}"
    if op == ">=":
        return f"{Llo} >= {R}", f"{Lhi} < {R}"
    eq_t = f"{Llo} == {R}" if lo == hi else "false"
    eq_f = f"({Lhi} < {R} || {Llo} > {R})"
    return (eq_t, eq_f) if op == "==" else (eq_f, eq_t)


def _cases(g, cond, shape) -> Tuple[str, str]:
    if isinstance(cond, Compare):
        return _compare(g, cond, shape)
    assert isinstance(cond, Logic)
    parts = [_cases(g, p, shape) for p in cond.parts]
    if cond.op == "!":
        t, f = parts[0]
        return f, t
    (ta, fa), (tb, fb) = parts
    if cond.op == "&&":
        return f"({ta}) && ({tb})", f"({fa}) || ({fb})"
    return f"({ta}) || ({tb})", f"({fa}) && ({fb})"


def _guard(g, f: Affine, shape) -> List[str]:
    """The conditions that node f stays within i32 over the tile (none for a half that cannot
    leave it: an i32 value plus a tile part that only adds, or only subtracts)."""
    lo, hi = f.span(shape)
    u = _offset(g, Affine(0, 0, f.k, f.terms))
    one = f.k == 0 and len(f.terms) == 1 and f.terms[0][0] == 1 and f.terms[0][2] == "i32"
    out = []
    if not (one and lo >= 0):
        out.append(f"{_plus(u, lo)} >= {I32_MIN}LL")
    if not (one and hi <= 0):
        out.append(f"{_plus(u, hi)} <= {I32_MAX}LL")
    return out


def split(g, s, value, emit: Callable[[], None]):
    """Write `emit()` (the sweep of statement s over `value`) once, or, when the analysis decided
    a where of it per tile, three times under the one test (module doc)."""
    m: CornerMask = getattr(g, "masks", {}).get(id(s))
    if m is None or not any(x is m.where for x in ir.walk_expr(value)):
        emit()
        return
    shape = m.shape
    t, f = _cases(g, m.cond, shape)
    guards = [c for x in m.guards for c in _guard(g, x, shape)]
    mode = g.new("mask")
    g.emit(f"// the where at line {m.line + g.line_offset}: its condition over this [{shape[0]}, {shape[1]}] tile, "
           "decided at its corners (analysis.masks): all true, all false, or per element")
    head = f"({' && '.join(guards)}) ? " if guards else ""
    g.emit(f"const int {mode} = {head}(({t}) ? {ALL_TRUE} : ({f}) ? {ALL_FALSE} : {MIXED})"
           f"{' : ' + str(MIXED) if guards else ''};")
    saved = {k: _copy(getattr(g, k)) for k in _CACHES if hasattr(g, k)}
    picks = g.__dict__.setdefault("where_pick", {})
    for n, (case, head) in enumerate(((ALL_TRUE, f"if ({mode} == {ALL_TRUE}) {{  // every element: its first value"),
                                      (ALL_FALSE, f"}} else if ({mode} == {ALL_FALSE}) {{  // no element: its second value"),
                                      (MIXED, "} else {  // per element"))):
        g.emit(head)
        g.ind += 1
        if case != MIXED:
            picks[id(m.where)] = case
        emit()
        picks.pop(id(m.where), None)
        g.ind -= 1
        for k, v in saved.items():
            _restore(g, k, v)
    g.emit("}")


def _copy(v):
    return type(v)(v) if isinstance(v, (dict, set)) else v


def _restore(g, name, saved):
    """Put cache `name` of g back to `saved`, in place (other modules may hold the same object)."""
    cur = getattr(g, name)
    if isinstance(cur, (dict, set)) and type(cur) is type(saved):
        cur.clear()
        cur.update(saved)
    else:
        setattr(g, name, _copy(saved))
