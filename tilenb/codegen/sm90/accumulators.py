"""The wgmma accumulator layout, swept element by element (sm_90).

Guarantees: `emit_sweep(g, lay, body)` writes the loops over the accumulator elements this
thread holds in a `WgmmaLayout` (the analysis' `lowering.WgmmaLayout`: per warpgroup a WM x WN
block, per warp 16 rows, per lane two adjacent columns of each 8-column group) and calls
body(At) once for each, with the element's row, column and register slot. It writes code only
through `g.emit` and names only through `g.new`.
"""
from __future__ import annotations

from ...analysis.lowering import WgmmaLayout

from ..values import At


def emit_sweep(g, lay: WgmmaLayout, body):
    """Run body(At) for each accumulator element this thread holds (see WgmmaLayout)."""
    m, nb, e = g.new("m"), g.new("nb"), g.new("e")
    i, j = g.new("i"), g.new("j")
    nbs = lay.WN // 8
    g.emit("// elements of the wgmma accumulator layout this thread holds")
    g.emit(f"const int {i}w = ((tnb_warp >> 2) / {lay.GN}) * {lay.WM} + (tnb_warp & 3) * 16 + (tnb_lane >> 2);")
    g.emit(f"const int {j}w = ((tnb_warp >> 2) % {lay.GN}) * {lay.WN} + (tnb_lane & 3) * 2;")
    g.emit("#pragma unroll")
    g.emit(f"for (int {m} = 0; {m} < {lay.mi}; ++{m}) {{")
    g.ind += 1
    g.emit("#pragma unroll")
    g.emit(f"for (int {nb} = 0; {nb} < {nbs}; ++{nb}) {{")
    g.ind += 1
    g.emit("#pragma unroll")
    g.emit(f"for (int {e} = 0; {e} < 4; ++{e}) {{")
    g.ind += 1
    g.emit(f"const int {i} = {i}w + {m} * 64 + ({e} >> 1) * 8;")
    g.emit(f"const int {j} = {j}w + {nb} * 8 + ({e} & 1);")
    body(At(i, j, f"({m} * {nbs} + {nb}) * 4 + {e}", lay, True))
    for _ in range(3):
        g.ind -= 1
        g.emit("}")
