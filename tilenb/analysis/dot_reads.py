"""The tensor slices a dot reads inline (`acc += dot(A[i :+ 32, k :+ 16], B[...])`), which have
no copy plan (`tilenb.analysis.copies` plans only partition accesses), and how the generated
code reads them.

Guarantees: `dot_reads(kir, low)` lists, in source order, one `DotRead` per operand of a dot that
is a tensor slice written in the dot itself, or a `let` view only tensor-core dots read, which is
that slice (`KernelLowering.inline_views`); operands that are tiles or other `let` views are not
listed: a view staged into a tile of its own has its copy plan, "load K -> k". `how` is decided here
from the path the dot takes, the one the CUDA generator follows:
- "wgmma": the dot's loop is lowered as a wgmma TMA pipeline (`lowering.LOWERINGS`), or the slice
  is one a streamed loop's ring holds (`KernelLowering.by_op`): thread 0 copies it by TMA into
  swizzled shared-memory stages that wgmma reads;
- "mma.sync": a tensor-core dot (`mma_tiles.mma_dot`) elsewhere: the slice is staged into a
  padded shared scratch tile by 16-byte cp.async copies and read with ldmatrix into mma.sync
  fragments;
- "registers": any other dot: each thread reads, element by element from global memory into
  registers, the row of a (column of b) its result elements need, with no tile in shared memory
  and no tensor cores.
`text` says the same in words for the views.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

from .. import ir
from .mma_tiles import mma_dot


@dataclass(frozen=True)
class DotRead:
    line: int
    tensor: str
    operand: str                   # "a" or "b" (the second operand of dot / dot_t)
    shape: Tuple[int, ...]         # the slice's shape at its declared rank
    how: str                       # "wgmma" | "mma.sync" | "registers"
    text: str                      # `how` in words

    def to_json(self) -> dict:
        return {"line": self.line, "tensor": self.tensor, "operand": self.operand,
                "shape": list(self.shape), "how": self.how, "text": self.text}


_TEXT = {
    "wgmma": "tensor cores (wgmma): copied by TMA into swizzled shared-memory stages, read by wgmma",
    "mma.sync": "tensor cores (mma.sync m16n8k16): staged into a padded shared-memory scratch tile "
                "by 16-byte cp.async copies, read with ldmatrix",
    "registers": "no tensor cores: each thread reads the elements its results need straight from "
                 "global memory into registers, one at a time (no tile in shared memory)",
}


def _walk(body, loop):
    for s in body:
        yield s, loop
        if isinstance(s, (ir.For, ir.While)):
            yield from _walk(s.body, s)
        elif isinstance(s, ir.If):
            yield from _walk(s.then, loop)
            yield from _walk(s.orelse, loop)


def dot_reads(kir: ir.KernelIR, low) -> Tuple[DotRead, ...]:
    """One DotRead per inline tensor-slice operand of a dot (see the module docstring); `low` is
    the target's `lowering.KernelLowering` (its `by_loop` names each loop's lowering)."""
    out: List[DotRead] = []
    by_loop = getattr(low, "by_loop", {}) or {}
    inline = getattr(low, "inline_views", {}) or {}
    streamed = getattr(low, "by_op", {}) or {}      # operands a streamed loop's ring copies by TMA
    for s, loop in _walk(kir.body, None):
        for e in ir.stmt_exprs(s):
            for d in ir.walk_expr(e):
                if not isinstance(d, ir.Dot):
                    continue
                lp: Optional[object] = by_loop.get(id(loop)) if loop is not None else None
                if lp is not None and getattr(lp, "lowering", "") == "wgmma TMA pipeline":
                    how = "wgmma"
                elif mma_dot(d):
                    how = "mma.sync"
                else:
                    how = "registers"
                for name, op in (("a", d.a), ("b", d.b)):
                    # a view only tensor-core dots read is the slice written in the dot (no copy)
                    sl = inline.get(id(op.sym)) if isinstance(op, ir.Ref) else op
                    if isinstance(sl, ir.Slice) and sl.base.kind == "tensor":
                        h = "wgmma" if id(op) in streamed else how
                        out.append(DotRead(d.span.line, sl.base.name, name, tuple(op.type.shape), h, _TEXT[h]))
    return tuple(out)
