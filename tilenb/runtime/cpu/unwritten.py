"""Elements a store leaves unwritten, and why: the one home of that explanation.

Two users read it: a debug launch on the CPU executor (`debug=True`, which notes what each store
leaves unwritten: `kernel.last_run.notes`, and an `EdgeWarning`), and the puzzles' checker
(`tilenb.puzzles.explain.Trace`, which replays a launch to explain the elements it found still
holding their poison). Both name the cause with `why_invalid` and word it with `invalid_text`,
`describe_set` and `covers_text`.

* `why_invalid(origins, value, pos, at, reader)`: for a tile store whose value is invalid at
  position `pos` of its window, the operand that made it so (spec section 8): a slice that runs
  outside its tensor, a window outside its tile, followed through elementwise operators,
  broadcasts, reductions (a row or column is invalid only when all its elements are), dots,
  transposes, windows, views and tile variables (the last whole definition of a tile before the
  store, then the compound assignments after it; `Invalid.via` lists them). The `reader` gives
  what the static IR cannot: the uniform scalar values of slice starts (`scalar(expr)`, raising
  `Unknown` for what it cannot evaluate), tensor extents, and source text and lines.
* `EdgeRecorder`: what a debug launch collects, store by store: the elements inside a tile
  store's window and inside the tensor that the store left alone because its value is invalid
  there (tile atomics too), and for tensors written only by tile stores, the elements no store's
  window reached in any CTA. `notes()` words each finding as one message.

Guarantees: nothing here changes what a launch computes, and nothing raises for a checked kernel:
what cannot be evaluated gives an unknown cause (None), never a guess. A note is a warning, not
an error: leaving elements alone can be what the program means.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np

from ... import ir
from ...caches import per_kernel

SPEC_8 = "spec section 8"


class Unknown(Exception):
    """A value the reader cannot know (a per-thread value, a var it cannot replay, ...)."""


@dataclass(frozen=True)
class Invalid:
    """Why a stored value is invalid at one element: the operand (its text and line), the tensor or
    tile it reads and the coordinates it reaches there, that thing's extents, and the tile
    variables whose values carried the invalid element to the store (name, line, how)."""
    operand: str
    line: int
    target: str
    coords: Tuple[int, ...]
    extents: Tuple[int, ...]
    is_tensor: bool
    via: Tuple[Tuple[str, int, str], ...] = ()


class Origins:
    """What the IR says about where tile values come from: each statement's pre-order position
    (`position`, id(stmt) -> index in `ir.walk_stmts`), each tile's definitions (`defs`, id(sym) ->
    [(position, op, value, stmt)]: declarations and whole assignments, op None, and compound
    assignments) and each let view's value (`views`). One per KernelIR (`origins_of`)."""

    def __init__(self, kir: ir.KernelIR):
        self.position: Dict[int, int] = {}
        self.defs: Dict[int, list] = {}
        self.views: Dict[int, object] = {}
        for i, s in enumerate(ir.walk_stmts(kir.body)):
            self.position[id(s)] = i
            if isinstance(s, (ir.Let, ir.VarDecl)) and isinstance(s.sym.type, ir.TileT):
                if s.sym.kind == "view":
                    self.views[id(s.sym)] = s.value
                else:
                    self.defs.setdefault(id(s.sym), []).append((i, None, s.value, s))
            elif isinstance(s, ir.Assign) and isinstance(s.target, ir.Ref) and isinstance(s.target.sym.type, ir.TileT):
                self.defs.setdefault(id(s.target.sym), []).append((i, s.op, s.value, s))


def origins_of(kir: ir.KernelIR) -> Origins:
    """The `Origins` of `kir`, made once per KernelIR object (kept in its
    `tilenb.caches.per_kernel` dict)."""
    memo = per_kernel(kir)
    hit = memo.get("origins")
    if hit is None:
        hit = memo["origins"] = Origins(kir)
    return hit


def span_text(lines, node) -> str:
    """The source text of `node` (its first line's part, for a node spanning several lines)."""
    sp = getattr(node, "span", None)
    if sp is None or lines is None or not (1 <= sp.line <= len(lines)):
        return ""
    if sp.end_line and sp.end_line != sp.line:
        return lines[sp.line - 1][sp.column - 1:].strip()
    line = lines[sp.line - 1]
    end = sp.end_column - 1 if sp.end_column else len(line)
    return line[sp.column - 1:end].strip()


def fit(pos, shape, operand) -> Tuple[int, ...]:
    """A position in a value of `shape` -> the position in `operand` that numpy broadcasting
    reads there (shapes aligned at the right; an extent of 1 is read at 0)."""
    oshape = tuple(getattr(getattr(operand, "type", None), "shape", ()) or ())
    if not oshape:
        return ()
    pos = tuple(pos)
    out = []
    off = len(pos) - len(oshape)
    for k, n in enumerate(oshape):
        p = pos[off + k] if off + k >= 0 else 0
        out.append(0 if n == 1 else p)
    return tuple(out)


# ---- why a value is invalid ----------------------------------------------------------------------
def why_invalid(origins: Origins, value, pos, at: int, reader) -> Optional[Invalid]:
    """The operand that makes tile value `value` invalid at position `pos` (in value's own shape),
    for the statement at pre-order position `at`; None: valid there as far as can be told, or
    unknown. `reader` has scalar(expr) -> int (raises Unknown), extents(tensor sym) -> tuple,
    text(node) -> str, line(node) -> int (as shown to the user)."""
    try:
        return _Walk(origins, reader).invalid(value, tuple(pos), at, (), 0)
    except (Unknown, RecursionError, IndexError, KeyError, TypeError, ValueError):
        return None


class _Walk:
    def __init__(self, origins: Origins, reader):
        self.o, self.r = origins, reader

    def invalid(self, e, pos, at, via, depth) -> Optional[Invalid]:
        if depth > 60 or not isinstance(getattr(e, "type", None), ir.TileT):
            return None
        t = type(e)
        if t is ir.Slice:
            return self.slice(e, pos, at, via, depth)
        if t is ir.Ref:
            return self.tile(e.sym, pos, at, via, depth)
        if t in (ir.Unary, ir.Convert):
            return self.invalid(e.x, fit(pos, e.type.shape, e.x), at, via, depth + 1)
        if t in (ir.Binary, ir.Math):
            for x in ((e.a, e.b) if t is ir.Binary else e.args):
                r = self.invalid(x, fit(pos, e.type.shape, x), at, via, depth + 1)
                if r is not None:
                    return r
            return None
        if t is ir.Transpose:
            return self.invalid(e.x, tuple(reversed(pos)), at, via, depth + 1)
        if t is ir.Reduce:
            xs = e.x.type.shape
            if len(xs) == 1:
                cands = [(j,) for j in range(xs[0])]
            elif e.axis == 1:
                cands = [(pos[0], j) for j in range(xs[1])]
            else:
                cands = [(i, pos[-1]) for i in range(xs[0])]
            first = None
            for c in cands:
                r = self.invalid(e.x, c, at, via, depth + 1)
                if r is None:
                    return None           # one valid element keeps the row (column) valid
                first = first or r
            return first
        if t is ir.Dot:
            ka = e.a.type.shape[1]
            ra = [(pos[0], k) for k in range(ka)]
            rb = [(pos[1], k) for k in range(ka)] if e.trans_b else [(k, pos[1]) for k in range(ka)]
            for side, cands in ((e.a, ra), (e.b, rb)):
                first = None
                ok = False
                for c in cands:
                    r = self.invalid(side, c, at, via, depth + 1)
                    if r is None:
                        ok = True
                        break
                    first = first or r
                if not ok:
                    return first
            return None
        return None

    def slice(self, e, pos, at, via, depth):
        base = e.base
        if e.flat:
            return None
        coords, k = [], 0
        for sub in e.subs:
            if isinstance(sub, ir.SubIndex):
                coords.append(int(self.r.scalar(sub.index)))
            else:
                coords.append(int(self.r.scalar(sub.start)) + pos[k])
                k += 1
        if base.kind == "tensor":
            ext = tuple(self.r.extents(base))
            if any(not 0 <= c < n for c, n in zip(coords, ext)):
                return Invalid(self.r.text(e), self.r.line(e), base.name, tuple(coords), ext, True, via)
            return None
        if base.kind == "view":
            v = self.o.views.get(id(base))
            if v is None:
                return None
            return self.invalid(v, fit(tuple(coords), base.type.shape, v), at, via, depth + 1)
        shape = tuple(base.type.shape)
        if any(not 0 <= c < n for c, n in zip(coords, shape)):
            return Invalid(self.r.text(e), self.r.line(e), base.name, tuple(coords), shape, False, via)
        return self.tile(base, tuple(coords), at, via, depth + 1)

    def tile(self, sym, pos, at, via, depth):
        if sym.kind == "view":
            v = self.o.views.get(id(sym))
            return None if v is None else self.invalid(v, fit(pos, sym.type.shape, v), at, via, depth + 1)
        defs = [d for d in self.o.defs.get(id(sym), []) if d[0] < at]
        if not defs:
            return None
        # the last whole definition before `at`, then the compound assignments after it
        whole = [i for i, d in enumerate(defs) if d[1] is None]
        if not whole:
            return None
        for pos_, op, value, stmt in defs[whole[-1]:]:
            if value is None or not isinstance(getattr(value, "type", None), ir.TileT):
                continue                      # a fill or uninitialized: wholly valid
            how = ("declared from" if isinstance(stmt, (ir.VarDecl, ir.Let)) else
                   ("assigned whole from" if op is None else f"updated with {op}="))
            step = (sym.name, self.r.line(stmt), f"{how} `{self.r.text(value)}`")
            r = self.invalid(value, fit(pos, sym.type.shape, value), pos_, via + (step,), depth + 1)
            if r is not None:
                return r
        return None


# ---- words ------------------------------------------------------------------------------------------
def elem_text(name: str, coord) -> str:
    return f"{name}[{', '.join(str(int(c)) for c in coord)}]"


def runs_text(idx) -> str:
    """[0, 1, 2, 5] -> '0..2, 5'."""
    idx = np.unique(np.asarray(idx, np.int64))
    parts, start, prev = [], None, None
    for i in idx.tolist():
        if start is None:
            start = prev = i
        elif i == prev + 1:
            prev = i
        else:
            parts.append(f"{start}" if start == prev else f"{start}..{prev}")
            start = prev = i
    if start is not None:
        parts.append(f"{start}" if start == prev else f"{start}..{prev}")
    if len(parts) > 6:
        parts = parts[:3] + ["..."] + parts[-2:]
    return ", ".join(parts)


def describe_set(mask: np.ndarray, name: str, short: bool = False) -> str:
    """A set of elements of tensor `name` in words: a box when the set is one, else a few elements.
    short: without the counts and the words (a box, a few runs of a vector, or "n elements of name")."""
    coords = np.argwhere(mask)
    n = len(coords)
    if n == 0:
        return "no element"
    if mask.ndim == 1:
        runs = runs_text(coords[:, 0]).split(", ")
        if short and len(runs) > 3:
            return f"{n} elements of {name}"
        text = " and ".join(", ".join(r if r == "..." else f"{name}[{r}]" for r in runs).rsplit(", ", 1))
        return text + (f" ({n} elements)" if any(".." in r for r in runs) and not short else "")
    lo, hi = coords.min(axis=0), coords.max(axis=0) + 1
    box = tuple(slice(a, b) for a, b in zip(lo, hi))
    if mask[box].all():
        parts = []
        for d, (a, b) in enumerate(zip(lo, hi)):
            parts.append(str(a) if b - a == 1 else f"{a}..{b - 1}")
        full = [a == 0 and b == s for a, b, s in zip(lo, hi, mask.shape)]
        words = ""
        if short:
            return f"{name}[{', '.join(parts)}]"
        if mask.ndim == 2 and full[0] and not full[1]:
            words = f": columns {parts[1]} of every row"
        elif mask.ndim == 2 and full[1] and not full[0]:
            words = f": rows {parts[0]}"
        return f"{name}[{', '.join(parts)}]" + (f" ({n} elements{words})" if n > 1 else "")
    if short:
        return f"{n} elements of {name}"
    shown = ", ".join(elem_text(name, c) for c in coords[:4])
    return f"{n} elements, {shown}{', ...' if n > 4 else ''}"


def cause_text(why: Invalid, rule: bool = True) -> str:
    """The operand that makes a stored value invalid, and (with `rule`) the rule, spec section 8."""
    shape = "[" + ", ".join(map(str, why.extents)) + "]"
    through = ""
    if why.via:
        tiles = " and ".join(f"tile `{n}` (line {ln})" for n, ln, _ in reversed(why.via))
        through = f", and the store reads it through {tiles}"
    text = (f"`{why.operand}` (line {why.line}) reaches {elem_text(why.target, why.coords)}, outside {why.target} "
            f"(shape {shape}){through}.")
    if rule:
        text += (f" Elements outside a {'tensor' if why.is_tensor else 'tile'} read as 0 but are invalid, and a "
                 f"store never writes an invalid value ({SPEC_8}).")
    return text


def fix_text(why: Invalid) -> str:
    """What to write instead, for the cause `why` ("" when there is nothing general to say)."""
    whole = [v for v in why.via if v[2].startswith("assigned whole")]
    if whole:
        tname, line, how = whole[-1]
        return (f"Tile `{tname}` took that invalid region at line {line}, {how}: assigning a whole tile replaces "
                f"its values and its valid region, fill included. To keep a filled tile's zeros, store into a "
                f"window of it instead: `{tname}[:] = ...` (or `{tname}[:, :] = ...`).")
    if why.is_tensor:
        return ("If the elements outside should count as 0 (zero padding), fill a tile with 0.0 and store the "
                "slice into a window of it (`h[:] = X[...]`): the tile stays wholly valid. If the slice should not "
                "reach outside at all, check its start: an off-by-one?")
    return ""


def invalid_text(why: Invalid) -> str:
    """Why the value is invalid, and the fix, in a learner's words."""
    fix = fix_text(why)
    return cause_text(why) + (" " + fix if fix else "")


def covers_text(name: str, covered: np.ndarray, lines: str, grid, lengths=None) -> str:
    """What the tile stores into `name` do cover (`lines`: "line 9" or "lines 9, 12"), and where
    to look for the part they miss. `lengths`: per tensor dimension, the longest window a store
    gives one CTA there (None: not known). When the stores cover a leading block of one dimension
    only (rows 0..R-1 of M, say), the advice is for that dimension, from the figures: for columns
    a loop over the row or more CTAs, for rows (and other dimensions) cdiv(extent, length) CTAs
    along the grid axis that picks them, naming the axis when the grid's extents tell it."""
    covers = describe_set(covered, name) if covered.any() else "nothing"
    head = f"the stores into {name} ({lines}) cover {covers}, over the grid {tuple(grid)}."
    advice = _short_dimension_advice(name, covered, tuple(grid), lengths)
    if advice is None:
        advice = (f"A tile narrower than the row needs a loop over the row, and every part of {name} needs a CTA "
                  f"whose slice reaches it: check the slice starts, the lengths and the @grid.")
    return head + " " + advice


def _short_dimension_advice(name, covered, grid, lengths) -> Optional[str]:
    """Advice when `covered` is exactly indices 0..R-1 (R >= 1) of one dimension d, all of the
    others; None otherwise."""
    shape = covered.shape
    nd = len(shape)
    if not covered.any() or covered.all():
        return None
    short = None
    for d in range(nd):
        hit = np.flatnonzero(covered.any(axis=tuple(k for k in range(nd) if k != d)))
        r = int(hit[-1]) + 1
        if r < shape[d]:
            if short is not None:
                return None             # short in two dimensions
            short = (d, r)
    if short is None:
        return None
    d, r = short
    box = np.zeros(shape, bool)
    box[(slice(None),) * d + (slice(0, r),)] = True
    if not np.array_equal(box, covered):
        return None                     # a gap inside, not a short end
    e = shape[d]
    what = "elements" if nd == 1 else "columns" if d == nd - 1 else "rows" if d == nd - 2 else None
    if what is None:               # a batch dimension
        reached, them, over = f"The stores reach indices 0..{r - 1} of dimension {d}, of {e}", "them", f"dimension {d}"
    else:
        reached, them, over = f"The stores reach {what} 0..{r - 1} of the {e}", f"the {what}", f"the {what}"
    length = None if lengths is None or d >= len(lengths) or not lengths[d] else int(lengths[d])
    axis_text = ""
    if length is None:
        need = f"enough CTAs along the grid axis that picks {them}"
    else:
        k = -(-e // length)
        reached += f", {length} per CTA"
        need = f"cdiv({e}, {length}) = {k} CTAs along the grid axis that picks {them}"
        now = [a for a in range(3) if r % length == 0 and grid[a] == r // length]
        right = [a for a in range(3) if grid[a] == k]
        if len(now) == 1:
            x = "xyz"[now[0]]
            need = f"cdiv({e}, {length}) = {k} CTAs along {x} (ctx.block.{x}), which has {grid[now[0]]}"
            if len(right) == 1 and right[0] != now[0]:
                y = "xyz"[right[0]]
                axis_text = (f" The grid has {k} along {y}: if ctx.block.{x} picks {them}, ctx.block.{x} and "
                             f"ctx.block.{y} may be swapped.")
    if what == "columns":
        turn = f", {length} columns a turn" if length else ""
        return f"{reached}: a tile narrower than the row needs a loop over the row{turn}, or {need}.{axis_text}"
    return f"{reached}: launch {need} (@grid with cdiv, not /), or loop over {over}.{axis_text}"


def lines_text(line_numbers) -> str:
    ls = sorted(set(int(x) for x in line_numbers))
    return f"line{'s' if len(ls) > 1 else ''} {', '.join(map(str, ls))}"


# ---- what a debug launch collects ------------------------------------------------------------------
MAX_EXPLAINED = 16      # stores per statement whose first and last lost element get a cause computed


class _Lost:
    """One statement's elements left unwritten because its value is invalid there."""
    __slots__ = ("stmt", "tensor", "mask", "whys", "tried")

    def __init__(self, stmt, tensor: str, shape):
        self.stmt = stmt
        self.tensor = tensor
        self.mask = np.zeros(shape, bool)
        self.whys: List[Tuple[Tuple[int, ...], Optional[Invalid]]] = []   # (tensor coord, cause)
        self.tried = 0


def root_tensor(sym, views):
    """The tensor (or tile) a view `sym` finally looks at, through views of views."""
    seen = 0
    while sym.kind == "view" and seen < 50:
        v = views.get(id(sym))
        if v is None:
            break
        sym = v.base if isinstance(v, ir.Slice) else v.sym
        seen += 1
    return sym


class EdgeRecorder:
    """Collects, over one debug launch on the CPU executor, what each tile store into a tensor
    leaves unwritten (see the module docstring). The executor calls `store` before each tile store
    or tile atomic into a tensor window, and `notes` at the end."""

    def __init__(self, kir: ir.KernelIR, lines, line_offset: int, grid, shapes: Dict[str, Tuple[int, ...]]):
        self.kir = kir
        self.shapes = dict(shapes)      # tensor parameter -> the extents of its array
        self.lines = lines
        self.line_offset = line_offset
        self.grid = tuple(grid)
        self.origins = origins_of(kir)
        self.lost: Dict[int, _Lost] = {}
        self.covered: Dict[str, np.ndarray] = {}
        self.lengths: Dict[str, List[int]] = {}     # tensor -> per dimension, the longest window of one CTA
        # tensors written by some element store or element atomic: their coverage depends on data
        self.per_thread = set()
        self.stores: Dict[str, list] = {}
        for s in ir.walk_stmts(kir.body):
            if isinstance(s, (ir.Assign, ir.Atomic)) and isinstance(s.target, (ir.Slice, ir.Element)):
                root = root_tensor(s.target.base, self.origins.views)
                if root.kind != "tensor":
                    continue
                self.stores.setdefault(root.name, []).append(s)
                if isinstance(s.target, ir.Element):
                    self.per_thread.add(root.name)

    def text(self, node) -> str:
        return span_text(self.lines, node)

    def line(self, node) -> int:
        sp = getattr(node, "span", None)
        return (sp.line + self.line_offset) if sp is not None else 0

    def store(self, stmt, win, inside, written, index, scalar_of):
        """One tile store (or tile atomic) `stmt` into tensor window `win`, for a batch of CTAs:
        `inside` (B, *window shape) the window's elements inside the tensor in the CTAs that run it,
        `written` those the store writes, `index` per tensor dimension the coordinates of each
        window element; scalar_of(b) -> a function evaluating a uniform scalar in CTA b of the
        batch (raising Unknown)."""
        name = win.base.name
        shape = tuple(win.base.array.shape)
        cov = self.covered.get(name)
        if cov is None:
            cov = self.covered[name] = np.zeros(shape, bool)
        if inside.any():
            cov[tuple(ix[inside] for ix in index)] = True
        lens = self.lengths.setdefault(name, [0] * len(shape))
        if inside.size:
            axes = tuple(range(1, inside.ndim))     # the window's axes: one extent per CTA of the batch
            for d, ix in enumerate(index):
                b = np.broadcast_to(ix, inside.shape)
                lens[d] = max(lens[d], int((b.max(axis=axes) - b.min(axis=axes)).max()) + 1)
        lost = inside & ~written
        if not lost.any():
            return
        rec = self.lost.get(id(stmt))
        if rec is None:
            rec = self.lost[id(stmt)] = _Lost(stmt, name, shape)
        rec.mask[tuple(ix[lost] for ix in index)] = True
        if rec.tried >= MAX_EXPLAINED or len({_key(w) for _, w in rec.whys}) >= 2:
            return
        rec.tried += 1
        where = np.argwhere(lost)
        for k in (0, len(where) - 1):        # the first and the last element this batch loses
            b, *p = (int(x) for x in where[k])
            coord = tuple(int(ix[(b, *p)]) for ix in index)
            if any(c == coord for c, _ in rec.whys):
                continue
            reader = _Reader(self, scalar_of(b))
            why = why_invalid(self.origins, stmt.value, fit(tuple(p), win.shape, stmt.value),
                              self.origins.position[id(stmt)], reader)
            if why is None and rec.whys:
                continue
            if not rec.whys or _key(why) not in {_key(w) for _, w in rec.whys}:
                rec.whys.append((coord, why))

    def notes(self) -> Tuple[str, ...]:
        """One message per store that left elements unwritten (in source order), then one per
        tensor, written only by tile stores, with elements no store's window reached."""
        out = []
        k = self.kir.name
        for rec in sorted(self.lost.values(), key=lambda r: self.origins.position[id(r.stmt)]):
            s = rec.stmt
            verb = "updated" if isinstance(s, ir.Atomic) else "written"
            head = (f"{describe_set(rec.mask, rec.tensor)} not {verb} (kernel '{k}', line {self.line(s)}: "
                    f"`{self.text(s)}`): inside the {'atomic' if isinstance(s, ir.Atomic) else 'store'}'s window "
                    f"and inside {rec.tensor}, but the value is invalid there.")
            parts = [head]
            fixes = []
            for coord, why in rec.whys:
                if why is not None:
                    parts.append(f"At {elem_text(rec.tensor, coord)}: {cause_text(why, rule=len(parts) == 1)}")
                    fix = fix_text(why)
                    if fix and fix not in fixes:
                        fixes.append(fix)
            if len(parts) == 1:
                parts.append(f"Its operands' valid regions leave those elements out ({SPEC_8}).")
            parts += fixes
            out.append(" ".join(parts))
        for name, cov in self.covered.items():
            if name in self.per_thread or cov.all():
                continue
            lines = lines_text(self.line(s) for s in self.stores.get(name, ()))
            out.append(f"{describe_set(~cov, name)} not written (kernel '{k}'): no store's window reaches "
                       f"{'it' if (~cov).sum() == 1 else 'them'}; " + covers_text(name, cov, lines, self.grid,
                                                                                  self.lengths.get(name)))
        return tuple(out)


def _key(why: Optional[Invalid]):
    return None if why is None else (why.operand, why.line, why.target)


class _Reader:
    """The executor's view of one CTA for `why_invalid`."""

    def __init__(self, rec: EdgeRecorder, scalar):
        self.rec, self.scalar = rec, scalar

    def extents(self, sym):
        shape = self.rec.shapes.get(sym.name)
        if shape is None:
            raise Unknown(sym.name)
        return tuple(shape)

    def text(self, node):
        return self.rec.text(node)

    def line(self, node):
        return self.rec.line(node)
