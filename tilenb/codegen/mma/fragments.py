"""Tensor-core fragment layouts, swept element by element, and values read from fragments.

Guarantees: `frag_sweep(g, lay, body)` calls body(At) once for every element of an `MmaLayout`
or `RowLayout` the lane holds (with its row, column and register slot); `frag_fill` zeroes a
fragment array; `mma_value(g, e, at)` is the C value of an expression already held in fragments
(a register tile on a fragment layout, a dot computed into scratch or fragments, a hoisted row
reduction), or None; `mma_declare` declares a register tile in its fragment layout.
"""
from __future__ import annotations

from typing import Optional

from ... import ir
from ...analysis.mma_tiles import MmaLayout, RowLayout, packed, shape2

from .. import ctypes_ as C
from ..values import At


FRAG_NOTE = "mma.sync accumulator fragments of the result"   # named by tests: barriers beyond the analysis


def mma_value(g, e, at) -> Optional[str]:
    """`ev` for what this module holds: dots and reductions computed before the sweep, scratch
    dots, and register tiles on the fragment layouts (None: not one of those)."""
    hit = g.lay_pre.get(id(e))
    if hit is not None and at.slot is not None and at.layout == hit[1]:
        return f"{hit[0]}[{at.slot}]"
    hit = g.dot_scratch.get(id(e))
    if hit is not None:
        return f"{hit[0]}[({at.i}) * {hit[1]} + ({at.j})]"
    if isinstance(e, ir.Ref) and isinstance(e.type, ir.TileT):
        tv = g.tile_of(e.sym)
        if tv is not None and tv.space == "registers" and isinstance(tv.layout, (MmaLayout, RowLayout)):
            if at.slot is None or at.layout != tv.layout:
                g.fail(f"'{e.sym.name}' is kept in registers (each thread holds its own elements), but this "
                          f"statement reads elements of it that another thread holds", e)
            return reg_read(g, tv, at.slot)
    return None


def mma_child_at(g, parent, child, at):
    """A [M, 1] operand broadcast along the columns of rows-mode fragments: the lane's own row."""
    lay = at.layout
    if not (isinstance(lay, MmaLayout) and lay.rows_mode and at.slot is not None and at.ident):
        return None
    P, Q = shape2(parent.type.shape), shape2(child.type.shape)
    if Q != (P[0], 1) or P[1] == 1 or P[0] != lay.M:
        return None
    slot = f"((({at.slot}) / {lay.NT * 4}) * 2 + ((({at.slot}) & 3) >> 1))"
    return At(at.i, 0, slot, RowLayout(lay.M, lay.W), True)


def mma_declare(g, tv) -> bool:
    lay = tv.layout
    if not isinstance(lay, (MmaLayout, RowLayout)):
        return False
    R, Cc = tv.shape
    if packed(lay, tv.dtype):
        g.emit(f"unsigned {tv.cname}[{lay.slots // 2}];  // [{R}, {Cc}] {tv.dtype} in registers: "
                  f"mma.sync fragments, two values a register ({layout_text(g, lay)})")
    else:
        what = "mma.sync fragments" if isinstance(lay, MmaLayout) else "the values of this lane's fragment rows"
        g.emit(f"{C.VALUE_C[tv.dtype]} {tv.cname}[{lay.slots}];  // [{R}, {Cc}] {tv.dtype} in registers: "
                  f"{what} ({layout_text(g, lay)})")
    return True


def layout_text(g, lay) -> str:
    if isinstance(lay, RowLayout):
        return f"warp w: rows {16 * lay.MT}w .. {16 * lay.MT}w + {16 * lay.MT - 1}"
    if lay.rows_mode:
        return f"warp w: rows {16 * lay.MT}w .., all {lay.N} columns"
    return f"warps {lay.WM} x {lay.WN}, each {16 * lay.MT} x {8 * lay.NT}"


def reg_read(g, tv, slot) -> str:
    if packed(tv.layout, tv.dtype):
        f = "b2f" if tv.dtype == "bf16" else "h2f"
        return f"((({slot}) & 1) ? tnb_hi_{f}({tv.cname}[({slot}) >> 1]) : tnb_lo_{f}({tv.cname}[({slot}) >> 1]))"
    return f"{tv.cname}[{slot}]"


def frag_sweep(g, lay, body, pairs: bool = False):
    """body(at) for every element this thread holds (pairs: body((at0, at1)) for the two
    adjacent columns of each fragment row)."""
    gd, tg = "(tnb_lane >> 2)", "(tnb_lane & 3)"
    if isinstance(lay, RowLayout):
        mi, h = g.new("mi"), g.new("h")
        g.emit("#pragma unroll")
        g.emit(f"for (int {mi} = 0; {mi} < {lay.MT}; ++{mi}) {{")
        g.ind += 1
        g.emit("#pragma unroll")
        g.emit(f"for (int {h} = 0; {h} < 2; ++{h}) {{")
        g.ind += 1
        i = g.new("i")
        g.emit(f"const int {i} = (tnb_warp * {lay.MT} + {mi}) * 16 + {gd} + {h} * 8;")
        body(At(i, 0, f"({mi} * 2 + {h})", lay, True))
        g.ind -= 1
        g.emit("}")
        g.ind -= 1
        g.emit("}")
        return
    guard = lay.used < lay.W
    if guard:
        g.emit(f"if (tnb_warp < {lay.used}) {{  // warps past the {lay.WM} x {lay.WN} grid hold no fragments")
        g.ind += 1
    wr, wc = g.new("wr"), g.new("wc")
    g.emit(f"const int {wr} = (tnb_warp / {lay.WN}) * {16 * lay.MT}, {wc} = (tnb_warp % {lay.WN}) * {8 * lay.NT};")
    mi, ni, e = g.new("mi"), g.new("ni"), g.new("e")
    g.emit("#pragma unroll")
    g.emit(f"for (int {mi} = 0; {mi} < {lay.MT}; ++{mi}) {{")
    g.ind += 1
    g.emit("#pragma unroll")
    g.emit(f"for (int {ni} = 0; {ni} < {lay.NT}; ++{ni}) {{")
    g.ind += 1
    g.emit("#pragma unroll")
    g.emit(f"for (int {e} = 0; {e} < {2 if pairs else 4}; ++{e}) {{")
    g.ind += 1
    i, j = g.new("i"), g.new("j")
    base = f"({mi} * {lay.NT} + {ni}) * 4"
    if pairs:
        g.emit(f"const int {i} = {wr} + {mi} * 16 + {gd} + {e} * 8, {j} = {wc} + {ni} * 8 + {tg} * 2;")
        s0 = f"({base} + {e} * 2)"
        body((At(i, j, s0, lay, True), At(i, f"({j} + 1)", f"({s0} + 1)", lay, True)))
    else:
        g.emit(f"const int {i} = {wr} + {mi} * 16 + {gd} + ({e} >> 1) * 8, {j} = {wc} + {ni} * 8 + {tg} * 2 + ({e} & 1);")
        body(At(i, j, f"({base} + {e})", lay, True))
    for _ in range(3):
        g.ind -= 1
        g.emit("}")
    if guard:
        g.ind -= 1
        g.emit("}")


def frag_fill(g, arr: str, lay, value: str = "0.0f"):
    g.emit("#pragma unroll")
    k = g.new("z")
    g.emit(f"for (int {k} = 0; {k} < {lay.slots}; ++{k}) {arr}[{k}] = {value};")
