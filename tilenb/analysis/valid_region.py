"""What the analysis knows, before any launch, of the region a copy statement moves (spec
section 8): the tensor slice's elements that lie inside the tensor.

Guarantees: `slice_region(node, shape)` describes an IR `Slice` of a tensor, dimension by
dimension, in the statement's 2-D iteration space `shape` (the copy plan's: a 1-D slice is one
row):
- `text`: the condition in the program's own terms, e.g. "rows i in 0..7 where 0 <= r + i < M;
  columns j in 0..255: all inside (256 of D = 256)"; a dimension whose start is a constant and
  whose extent is a literal is resolved ("columns 0..63 inside, 64..65 outside X's 64");
- `known`: per iteration dimension [rows, cols], the half-open range [lo, hi) of indices inside
  the tensor when it is fixed for every CTA and every launch (constant start, literal extent), else
  None (it depends on a CTA index or a runtime dimension: known only at run time).
What it does not know: a store writes only the elements also valid in its value (spec 8.9), and
the value's region is known at run time (the CPU executor tracks it); a load's elements outside
the tensor read as 0 and are invalid in the tile. The views say so beside the text.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional, Tuple

from .. import ir


@dataclass(frozen=True)
class SliceRegion:
    text: str
    known: Tuple[Optional[Tuple[int, int]], Optional[Tuple[int, int]]]

    def to_json(self) -> dict:
        return {"text": self.text, "known": [list(k) if k is not None else None for k in self.known]}


_PREC = {"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 4, "<=": 4, ">": 4, ">=": 4, "+": 5, "-": 5,
         "*": 6, "/": 6, "%": 6}


def expr_text(e, prec: int = 0) -> Optional[str]:
    """An index expression as the program writes it (names, ctx fields, constants, arithmetic);
    None for anything else."""
    if isinstance(e, ir.Const):
        return str(e.value)
    if isinstance(e, ir.Ref):
        return e.sym.name
    if isinstance(e, ir.Ctx):
        return f"ctx.{e.field}"
    if isinstance(e, ir.Binary) and e.op in _PREC:
        p = _PREC[e.op]
        a, b = expr_text(e.a, p), expr_text(e.b, p + 1)
        if a is None or b is None:
            return None
        s = f"{a} {e.op} {b}"
        return f"({s})" if p < prec else s
    if isinstance(e, ir.Math):
        args = [expr_text(x) for x in e.args]
        return None if any(x is None for x in args) else f"{e.fn}({', '.join(args)})"
    return None


def _const(e) -> Optional[int]:
    if isinstance(e, ir.Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return int(e.value)
    if isinstance(e, ir.Unary) and e.op == "-":
        v = _const(e.x)
        return -v if v is not None else None
    return None


def slice_region(node, shape) -> Optional[SliceRegion]:
    """The region of a tensor slice inside its tensor (see the module docstring); None when
    `node` is not a Slice of a tensor or its ranges do not map onto `shape`."""
    if not isinstance(node, ir.Slice) or node.base.kind != "tensor" or not isinstance(node.base.type, ir.TensorT):
        return None
    dims = node.base.type.dims
    ranges = [(k, s) for k, s in enumerate(node.subs) if isinstance(s, ir.SubRange)]
    rows, cols = int(shape[0]), int(shape[1])
    if len(ranges) == 1 and rows == 1 and ranges[0][1].length == cols:
        axes = [("columns", "j", ranges[0])]
        known: List[Optional[Tuple[int, int]]] = [(0, 1), None]
        slots = [1]
    elif len(ranges) == 2 and (ranges[0][1].length, ranges[1][1].length) == (rows, cols):
        axes = [("rows", "i", ranges[0]), ("columns", "j", ranges[1])]
        known = [None, None]
        slots = [0, 1]
    else:
        return None
    parts = []
    tensor = node.base.name
    for slot, (words, v, (k, sub)) in zip(slots, axes):
        n = sub.length
        word = words[:-1] if n == 1 else words          # "row" / "rows"
        every = f"{v} = 0" if n == 1 else f"{v} in 0..{n - 1}"
        extent = dims[k] if k < len(dims) else None
        start = _const(sub.start)
        if sub.full and isinstance(extent, int):
            parts.append(f"{word} {every}: all inside ({tensor}'s {extent})")
            known[slot] = (0, n)
            continue
        if start is not None and isinstance(extent, int):
            lo, hi = max(0, -start), max(0, min(n, extent - start))
            lo = min(lo, hi)
            known[slot] = (lo, hi)
            if (lo, hi) == (0, n):
                parts.append(f"{word} {every}: all inside ({tensor}'s {extent})")
            elif lo >= hi:
                parts.append(f"{word}: none inside ({tensor}'s {extent}): nothing is moved")
            else:
                out = []
                if lo > 0:
                    out.append(f"0..{lo - 1}")
                if hi < n:
                    out.append(f"{hi}..{n - 1}")
                parts.append(f"{word} {lo}..{hi - 1} inside, {' and '.join(out)} outside ({tensor}'s {extent})")
            continue
        s = expr_text(sub.start, 5)
        s = "the start" if s is None else s
        if re.search(rf"\b{v}\b", s):       # the index letter must not be a name of the start
            v = next(x for x in (("u", "p", "k0") if v == "i" else ("v", "q", "k1")) if not re.search(rf"\b{x}\b", s))
            every = f"{v} = 0" if n == 1 else f"{v} in 0..{n - 1}"
        ext = str(extent) if extent is not None else "the extent"
        low = "" if start is not None and start >= 0 else "0 <= "
        at = f"{s} + {v}" if s != "0" else v
        parts.append(f"{word} {every} where {low}{at} < {ext}")
    return SliceRegion("; ".join(parts), (known[0], known[1]))
