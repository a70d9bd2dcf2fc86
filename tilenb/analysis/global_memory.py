"""Global memory seen by the barrier analysis: which elements of each tensor every access of a
CTA touches, and by which thread, in a form that can be compared across statements and loop turns.

The CTA's threads reach global memory through tile statements (a copy out of a tensor window, a
store into one, a reduction or dot over one) and through per-thread code (element reads and
writes, atomics). When one thread writes an element that another thread of the same CTA reads
or writes later, the two must be ordered by a barrier, exactly as for a shared tile: this module
turns the tensor accesses of the statement plans (`tilenb.analysis.ownership`) into "cells" that
`tilenb.analysis.barriers` walks with the same rule and the same placement as shared-memory
bytes. Hazards between different CTAs are not the language's business (docs/spec.md, section 13).

The model, per tensor (only tensors that the kernel writes and that a tile statement touches
take part; a tensor only read, or touched only by per-thread code, can make no hazard the
compiler must separate):

- A window's start along each tensor dimension is written as an affine form over "atoms":
  literals fold, `let`s are expanded into their values, `+ - *` by constants and `<<` by
  constants are followed; anything else (a quotient, a runtime `var`, an element read) is an atom
  of its own. Each atom is fixed for the whole kernel (parameters, dimensions, `ctx.block`, lets
  outside loops), fixed within one turn of the loops it is bound in (loop variables, lets inside
  loops), or volatile (a `var` that is assigned, an element read: it may change between any two
  statements).
- Accesses whose starts have the same non-constant part form a class: within a class two
  accesses differ by known constants, so their elements are compared exactly, element by element,
  with the thread the partition gives each one (`partition.owners`; "any" accesses such as a
  reduction's operand count as touched by several threads; a statement that reads or writes a
  tile in registers may follow a register layout rather than the partition, so its elements are
  given a thread of their own per iteration coordinate, which is consistent within the statement
  and across turns but equal to no thread of another statement).
- A class whose starts move with a loop variable is exact within a turn; its accesses in
  different turns are proved disjoint from the loop's step and the windows' lengths (for every
  pair of its accesses and every turn distance d >= 1, the two windows miss each other along a
  dimension that moves by coefficient * step * d), and its cells are then cleared at that loop's
  back edge (`clear_at`). Where that proof fails, where a start is volatile, or where a class
  would need more than MAX_FRAME elements, the class is a single cell touched by several threads.
- Different classes of one tensor may overlap in ways that depend on run-time values: each pair
  of classes shares a cell that both touch, so any write in one against any access in the other
  is a hazard. Per-thread element accesses may touch any element: they form one class touched by
  unknown threads (so two per-thread accesses are never a hazard to the compiler: that is the
  program's own business, with `barrier()`), and an element read inside a tile statement
  (`x * Y[0, 0]`) is that class touched by several threads.

Guarantees: for every pair of accesses of one CTA to one tensor element, at least one a write and
not both per-thread, made by different threads (or by threads the model cannot tell apart), the
two accesses' cells share a cell on which the recorded threads conflict under the barrier
analysis' rule, unless the accesses are in different turns of a loop whose `clear_at` cells hold
them and that loop's turns were proved to touch disjoint elements. Elements outside the tensor
(masked by the edges) may be counted as touched; that only adds barriers.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import floor
from typing import Dict, List, Optional, Tuple

import numpy as np

from .. import ir
from .ownership import Access, StatementPlan
from .partition import owners

ANY, UNKNOWN = -2, -3               # as in barriers: several or any threads; per-thread code
OFF_PARTITION_BASE = 1 << 28        # threads of a register-layout statement: one per iteration coordinate
CLASS_BASE = 1 << 30                # the "thread" of a class on the cells it shares with other classes
MAX_FRAME = 1 << 22                 # elements of one exact class, at most
VOLATILE = None                     # an atom's variance: may change between any two statements


@dataclass(frozen=True)
class CellInfo:
    """What a global cell stands for, for the barriers' reasons. kind: "element" (one element of
    an exact class: `element` gives the tensor coordinates as text), "pair" (the cell two classes
    share), "pair_turns" (the cell of two classes apart within a turn of a loop, not across its
    turns), "whole" (a class the model keeps as one cell), "turns" (the cell of a class whose
    windows move from turn to turn of a loop onto elements earlier turns touched), "per_thread"
    (the per-thread class)."""
    tensor: str
    kind: str
    element: Optional[str] = None
    windows: Tuple[str, ...] = ()


@dataclass
class GlobalCells:
    """The global-memory cells of a kernel variant (numbered 0 .. ncells - 1).

    effects: (plan, access, cells, threads): the cells (sorted, distinct int64) each global
    access of the plans touches and the thread recorded on each; clear_at: loop position -> the
    cells to clear at that loop's back edge; info(cell) describes a cell."""
    ncells: int
    effects: List[Tuple[StatementPlan, Access, np.ndarray, np.ndarray]]
    clear_at: Dict[int, np.ndarray]
    _infos: List[Tuple[int, int, object]]    # (first cell, one past the last, describer)
    windows: Dict[Tuple[int, int], str] = None   # (plan position, id(access)) -> its window as text
    relabel_at: Dict[int, np.ndarray] = None     # loop position -> cells whose records a turn's end
                                                 # hands on as touched by any thread

    def window(self, plan: StatementPlan, access: Access) -> str:
        return (self.windows or {}).get((plan.position, id(access)), access.storage.name)

    def info(self, cell: int) -> CellInfo:
        for a, b, d in self._infos:
            if a <= cell < b:
                return d(cell - a) if callable(d) else d
        return CellInfo("?", "whole")


# ---- affine forms of window starts -------------------------------------------------------------
class _Affine:
    """Affine forms of index expressions over atoms, and each atom's variance (VOLATILE, or the
    frozenset of loop positions across whose turns it may change)."""

    def __init__(self, kir: ir.KernelIR, positions):
        self.pos = {id(s): p for p, s in positions}
        self.lets: Dict[int, ir.Expr] = {}
        self.let_loops: Dict[int, frozenset] = {}
        self.loop_of_var: Dict[int, Tuple[int, frozenset]] = {}   # loop var -> (loop pos, loops it varies with)
        self.var_decl: Dict[int, Optional[ir.Expr]] = {}
        self.assigned: set = set()
        self.var_of: Dict[tuple, object] = {}
        self.names: Dict[int, str] = {id(p.sym): p.sym.name for p in kir.params}
        self.names.update({id(d): d.name for d in kir.dims.values()})
        self._index(kir.body, ())

    def _index(self, body, loops: Tuple[int, ...]):
        for s in body:
            if isinstance(s, (ir.Let, ir.VarDecl)):
                self.names[id(s.sym)] = s.sym.name
            elif isinstance(s, ir.For):
                self.names[id(s.var)] = s.var.name
            if isinstance(s, ir.Let) and isinstance(s.sym.type, ir.ScalarT):
                self.lets[id(s.sym)] = s.value
                self.let_loops[id(s.sym)] = frozenset(loops)
            elif isinstance(s, ir.VarDecl) and isinstance(s.sym.type, ir.ScalarT):
                self.var_decl[id(s.sym)] = s.value
                self.let_loops[id(s.sym)] = frozenset(loops)
            elif isinstance(s, ir.Assign) and isinstance(s.target, ir.Ref):
                self.assigned.add(id(s.target.sym))
            if isinstance(s, ir.For):
                p = self.pos[id(s)]
                self.loop_of_var[id(s.var)] = (p, frozenset(loops + (p,)))
                self._index(s.body, loops + (p,))
            elif isinstance(s, ir.While):
                self._index(s.body, loops + (self.pos[id(s)],))
            elif isinstance(s, ir.If):
                self._index(s.then, loops)
                self._index(s.orelse, loops)

    def form(self, e) -> Tuple[int, Dict[tuple, int]]:
        """(constant, {atom: coefficient}) with e = constant + sum(coefficient * atom)."""
        t = type(e)
        if t is ir.Const:
            v = e.value
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
                return self._opaque(e)
            return int(v), {}
        if t is ir.Ref:
            return self._ref(e)
        if t is ir.Unary and e.op == "-":
            c, a = self.form(e.x)
            return -c, {k: -v for k, v in a.items()}
        if t is ir.Binary and e.op in ("+", "-"):
            c1, a1 = self.form(e.a)
            c2, a2 = self.form(e.b)
            sign = 1 if e.op == "+" else -1
            out = dict(a1)
            for k, v in a2.items():
                out[k] = out.get(k, 0) + sign * v
            return c1 + sign * c2, {k: v for k, v in out.items() if v}
        if t is ir.Binary and e.op in ("*", "<<"):
            c1, a1 = self.form(e.a)
            c2, a2 = self.form(e.b)
            if e.op == "<<":
                if a2 or not 0 <= c2 < 62:
                    return self._opaque(e)
                c2, a2 = 1 << c2, {}
            if not a2:
                return c1 * c2, {k: v * c2 for k, v in a1.items() if v * c2}
            if not a1 and e.op == "*":
                return c1 * c2, {k: v * c1 for k, v in a2.items() if v * c1}
            return self._opaque(e)
        if t is ir.Convert and isinstance(e.x.type, ir.ScalarT) and _is_int(e.x.type.dtype) and _is_int(e.type.dtype):
            return self.form(e.x)
        return self._opaque(e)

    def _ref(self, e: ir.Ref):
        sym = e.sym
        key = ("sym", id(sym))
        if sym.kind in ("scalar_param", "dim"):
            self.var_of[key] = frozenset()
            return 0, {key: 1}
        if sym.kind == "loop":
            self.var_of[key] = self.loop_of_var.get(id(sym), (None, frozenset()))[1]
            return 0, {key: 1}
        if sym.kind in ("let", "var"):
            bound = self.lets.get(id(sym)) if sym.kind == "let" else self.var_decl.get(id(sym))
            if sym.kind == "var" and id(sym) in self.assigned:
                self.var_of[key] = VOLATILE
                return 0, {key: 1}
            if bound is not None:
                c, a = self.form(bound)
                if all(self.var_of.get(k) is not VOLATILE for k in a):
                    return c, a
            # bound once per turn of its loops: an atom of its own
            self.var_of[key] = self.let_loops.get(id(sym), frozenset())
            return 0, {key: 1}
        return self._opaque(e)

    def _opaque(self, e):
        key = ("expr", _skey(e))
        var = frozenset()
        for x in ir.walk_expr(e):
            if isinstance(x, ir.Element) or (isinstance(x, ir.Ctx) and x.field in ("thread", "lane", "warp")):
                var = VOLATILE
                break
            if isinstance(x, ir.Ref) and isinstance(x.sym.type, ir.ScalarT):
                _, a = self._ref(x)
                for k in a:
                    v = self.var_of.get(k, frozenset())
                    if v is VOLATILE:
                        var = VOLATILE
                        break
                    var = var | v
                if var is VOLATILE:
                    break
        self.var_of[key] = var
        return 0, {key: 1}


def _is_int(dtype: str) -> bool:
    return dtype in ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "index")


def _skey(e):
    """A structural key of an expression (equal for equal expressions written in different places)."""
    t = type(e)
    if t is ir.Const:
        return ("c", repr(e.value), e.type.dtype)
    if t is ir.Ref:
        return ("r", id(e.sym))
    if t is ir.Ctx:
        return ("x", e.field)
    head = (t.__name__, getattr(e, "op", None), getattr(e, "fn", None), getattr(e, "axis", None),
            getattr(e.type, "dtype", None))
    if t in (ir.Slice, ir.Element):
        head = head + (id(e.base),)
    return head + tuple(_skey(c) for c in ir.sub_exprs(e))


# ---- the cells ---------------------------------------------------------------------------------
@dataclass
class _Acc:
    plan: StatementPlan
    access: Access
    consts: Tuple[int, ...] = ()
    lengths: Tuple[int, ...] = ()       # per tensor dim: window length (1 where an index fixes it)
    ranged: Tuple[bool, ...] = ()       # per tensor dim: a range (True) or a fixed index
    text: str = ""


def _interval_clear(c: int, lp: int, lq: int, g: int) -> bool:
    """Whether [c + g d, c + g d + lq) misses [0, lp) for every integer d >= 1."""
    if g == 0:
        return False
    if g < 0:
        c, lp, lq, g = -c, lq, lp, -g
    # overlap iff -lq < c + g d < lp; the smallest d >= 1 with c + g d > -lq:
    d0 = max(1, floor((-lq - c) / g) + 1)
    return not (c + g * d0 < lp)


def global_cells(kir: ir.KernelIR, plans: Tuple[StatementPlan, ...], positions, threads: int) -> GlobalCells:
    """The global-memory cells of a kernel variant's statement plans (module docstring)."""
    by_tensor: Dict[int, List[_Acc]] = {}
    order: List[int] = []
    stmt_loops: Dict[int, frozenset] = {}
    pos_stmt = {p: s for p, s in positions}
    _loops_of(kir.body, (), stmt_loops, {id(s): p for p, s in positions})
    for plan in plans:
        for a in plan.accesses:
            if a.space != "global":
                continue
            k = id(a.storage)
            if k not in by_tensor:
                by_tensor[k] = []
                order.append(k)
            by_tensor[k].append(_Acc(plan, a))
    aff = None
    out = _Builder()
    for k in order:
        accs = by_tensor[k]
        if not any(x.access.rw == "write" for x in accs) or not any(x.plan.kind == "tile" for x in accs):
            continue      # only read, or only per-thread code: nothing for the compiler to order
        if len(accs) == 1 and not stmt_loops.get(accs[0].plan.position):
            continue      # one access, run once: it can meet nothing
        if aff is None:
            aff = _Affine(kir, positions)
        _tensor_cells(accs, aff, pos_stmt, threads, out)
    clear = {lp: np.unique(np.concatenate(v)) for lp, v in out.clear_at.items()}
    relabel = {lp: np.unique(np.concatenate(v)) for lp, v in out.relabel_at.items()}
    return GlobalCells(out.n, out.cells, clear, out.infos, out.windows, relabel)


class _Builder:
    """The cells being numbered, and what is recorded on them."""

    def __init__(self):
        self.n = 0
        self.cells: List[Tuple[StatementPlan, Access, np.ndarray, np.ndarray]] = []
        self.clear_at: Dict[int, list] = {}
        self.relabel_at: Dict[int, list] = {}
        self.infos: List[Tuple[int, int, object]] = []
        self.windows: Dict[Tuple[int, int], str] = {}
        self.pseudo = [OFF_PARTITION_BASE, CLASS_BASE]    # next free register-layout / class "thread"
        self.pseudo_of: Dict[int, int] = {}

    def new(self, count: int, info) -> int:
        c = self.n
        self.n += count
        self.infos.append((c, c + count, info))
        return c

    def class_thread(self) -> int:
        t = self.pseudo[1]
        self.pseudo[1] += 1
        return t


def _classes(accs: List[_Acc], aff: _Affine):
    """The tensor's accesses grouped by the affine form of their window's start (one class a
    form; "per_thread" for accesses without a window), each access given its constant offsets,
    lengths and ranged flags per dimension; and the classes whose form names a volatile value."""
    classes: Dict[object, List[_Acc]] = {}
    volatile_keys = set()
    for x in accs:
        a = x.access
        if a.window is None or a.mode == "per_thread":
            classes.setdefault("per_thread", []).append(x)
            continue
        base, consts, lengths, ranged = [], [], [], []
        vol = False
        for terms, ln in a.window:
            c, form = 0, {}
            for t in terms:
                tc, tf = aff.form(t)
                c += tc
                for kk, v in tf.items():
                    form[kk] = form.get(kk, 0) + v
            form = {kk: v for kk, v in form.items() if v}
            if any(aff.var_of.get(kk) is VOLATILE for kk in form):
                vol = True
            base.append(frozenset(form.items()))
            consts.append(c)
            lengths.append(1 if ln is None or ln < 1 else ln)
            ranged.append(ln is not None)
        x.consts, x.lengths, x.ranged = tuple(consts), tuple(lengths), tuple(ranged)
        key = tuple(base)
        classes.setdefault(key, []).append(x)
        if vol:
            volatile_keys.add(key)
    return classes, volatile_keys


def _tensor_cells(accs: List[_Acc], aff: _Affine, pos_stmt, threads: int, out: _Builder):
    """The cells of one tensor's accesses (`_Builder`): per class of accesses a frame of exact
    element cells where the accesses' turns are proven, else one shared cell; then a cell for
    each pair of classes that may meet."""
    name = accs[0].access.storage.name
    classes, volatile_keys = _classes(accs, aff)
    keys = list(classes)
    per: Dict[int, Tuple[list, list]] = {id(x): ([], []) for x in accs}

    def touch(x: _Acc, cells, thread):
        per[id(x)][0].append(np.asarray(cells, dtype=np.int64).reshape(-1))
        per[id(x)][1].append(np.broadcast_to(np.asarray(thread, dtype=np.int64), np.shape(cells)).reshape(-1))

    whole = set()
    for key in keys:
        members = classes[key]
        for x in members:
            out.windows[(x.plan.position, id(x.access))] = (
                "an element per-thread code chooses" if key == "per_thread" else _window_text(name, key, x, aff))
        if key == "per_thread":
            c = out.new(1, CellInfo(name, "per_thread"))
            for x in members:
                touch(x, [c], UNKNOWN if x.access.mode == "per_thread" else ANY)
            continue
        loops, proven = _turns(key, members, aff, pos_stmt)
        if loops is not None and key not in volatile_keys and set(loops) <= proven and all(
                any(_disjoint(p.consts[d], p.lengths[d], q.consts[d], q.lengths[d]) for d in range(len(key)))
                for i, p in enumerate(members) for q in members[i + 1:]):
            # no two accesses of the class share an element within a turn, nor across turns: an
            # access meets only itself in another turn, at the same elements by the same threads
            continue
        frame = None
        if key not in volatile_keys and loops is not None:
            rank = len(key)
            lo = [min(x.consts[d] for x in members) for d in range(rank)]
            hi = [max(x.consts[d] + x.lengths[d] for x in members) for d in range(rank)]
            ext = [h - l for h, l in zip(hi, lo)]
            vol = float(np.prod(ext, dtype=np.float64)) if ext else 1.0
            if vol <= MAX_FRAME:
                frame = (lo, ext, int(vol))
        if frame is None:
            # one cell, touched by several threads: any two accesses of the class may meet
            whole.add(key)
            c = out.new(1, CellInfo(name, "whole"))
            for x in members:
                touch(x, [c], ANY)
            continue
        lo, ext, vol = frame
        vs = [1] * len(ext)
        for d in range(len(ext) - 2, -1, -1):
            vs[d] = vs[d + 1] * ext[d + 1]
        raw = [(x,) + _elements(x, lo, vs, threads, out.pseudo_of, out.pseudo) for x in members]
        cut = np.zeros(vol + 1, dtype=bool)      # runs of the frame every access touches alike
        cut[0] = True
        for _, idx, thr in raw:
            if not len(idx):
                continue
            ends = idx + 1
            joined = (ends[:-1] == idx[1:]) & (thr[:-1] == thr[1:])
            first = np.ones(len(idx), dtype=bool)
            first[1:] = ~joined
            last = np.ones(len(idx), dtype=bool)
            last[:-1] = ~joined
            cut[idx[first]] = True
            cut[ends[last]] = True
        cell_of = np.cumsum(cut) - 1
        ncl = int(cell_of[-1]) + 1
        base_cell = out.new(ncl, _element_describer(name, key, lo, ext, np.flatnonzero(cut[:-1]), aff))
        for x, idx, thr in raw:
            cl, keep = np.unique(cell_of[idx], return_index=True)
            touch(x, cl + base_cell, thr[keep])
        exact = np.arange(base_cell, base_cell + ncl)
        for lp in loops:          # one turn's elements are compared with the same turn's only
            out.clear_at.setdefault(lp, []).append(exact)
        unproven = [lp for lp in loops if lp not in proven]
        if unproven:
            # turns of these loops may meet in ways the frame does not show: a cell the class's
            # accesses share, which a turn's end hands on as touched by any thread
            c = out.new(1, CellInfo(name, "turns"))
            t = out.class_thread()
            for x in members:
                touch(x, [c], t)
            for lp in loops:
                (out.relabel_at if lp in unproven else out.clear_at).setdefault(lp, []).append(np.array([c]))
    # pairs of classes: they may share elements unless a dimension keeps them apart
    for i in range(len(keys)):
        for j in range(i + 1, len(keys)):
            P, Q = keys[i], keys[j]
            apart = None
            if "per_thread" not in (P, Q) and P not in whole and Q not in whole:
                apart = _apart(P, Q, classes[P], classes[Q], aff, pos_stmt)
            if apart is None:               # may meet anywhere, at any time
                c = out.new(1, CellInfo(name, "pair"))
                for key in (P, Q):
                    t = None if key == "per_thread" else out.class_thread()
                    for x in classes[key]:
                        touch(x, [c], t if t is not None else UNKNOWN if x.access.mode == "per_thread" else ANY)
                continue
            relabel, clear = apart
            if not relabel:
                continue                    # never meet
            c = out.new(1, CellInfo(name, "pair_turns"))
            t = out.class_thread()          # apart within a turn: one "thread" for both
            for key in (P, Q):
                for x in classes[key]:
                    touch(x, [c], t)
            for lp in relabel:
                out.relabel_at.setdefault(lp, []).append(np.array([c]))
            for lp in clear:
                out.clear_at.setdefault(lp, []).append(np.array([c]))
    _record_cells(accs, per, out)


def _record_cells(accs: List[_Acc], per, out: _Builder):
    """Each access's touched cells (and their threads) into `out.cells`, sorted by cell."""
    for x in accs:
        cl, th = per[id(x)]
        if not cl:
            continue
        cat_c = np.concatenate(cl)
        cat_t = np.concatenate(th).astype(np.int32)
        o = np.argsort(cat_c, kind="stable")
        out.cells.append((x.plan, x.access, cat_c[o], cat_t[o]))


def _loops_of(body, loops, out, pos):
    for s in body:
        out[pos[id(s)]] = frozenset(loops)
        if isinstance(s, (ir.For, ir.While)):
            _loops_of(s.body, loops + (pos[id(s)],), out, pos)
        elif isinstance(s, ir.If):
            _loops_of(s.then, loops, out, pos)
            _loops_of(s.orelse, loops, out, pos)


def _moving(dim, lp, aff: _Affine, s):
    """The turn step of loop `lp` in a start's form `dim` (coefficient * step), or None when the
    form changes across its turns other than through its variable (or `lp` is not a `for`)."""
    if not isinstance(s, ir.For):
        return None
    moving = [(atom, coef) for atom, coef in dim if lp in (aff.var_of.get(atom) or frozenset())]
    if len(moving) == 1 and moving[0][0] == ("sym", id(s.var)):
        return moving[0][1] * s.step
    return None


def _variance(dim, aff: _Affine):
    loops = set()
    for atom, _ in dim:
        v = aff.var_of.get(atom, frozenset())
        if v is VOLATILE:
            return None
        loops |= v
    return loops


def _turns(key, members: List[_Acc], aff: _Affine, pos_stmt):
    """(the loops across whose turns the class's starts change, those of them whose turns the
    class's accesses provably touch disjointly); (None, None) for a volatile start."""
    loops = set()
    for dim in key:
        v = _variance(dim, aff)
        if v is None:
            return None, None
        loops |= v
    proven = set()
    for lp in loops:
        s = pos_stmt.get(lp)
        usable = [(d, g) for d, dim in enumerate(key) if (g := _moving(dim, lp, aff, s))]
        if usable and all(any(_interval_clear(q.consts[d] - p.consts[d], p.lengths[d], q.lengths[d], g)
                              for d, g in usable) for p in members for q in members):
            proven.add(lp)
    return tuple(sorted(loops)), proven


def _apart(P, Q, ps: List[_Acc], qs: List[_Acc], aff: _Affine, pos_stmt):
    """Two classes kept apart by a dimension whose start form they share and whose constant
    parts put every pair of their windows on different elements: (loops at whose back edge what
    one turn did may meet the next turn's accesses, loops whose turns stay apart too); None when
    no dimension keeps them apart."""
    for d, (a, b) in enumerate(zip(P, Q)):
        if a != b:
            continue
        if not all(_disjoint(p.consts[d], p.lengths[d], q.consts[d], q.lengths[d]) for p in ps for q in qs):
            continue
        loops = _variance(a, aff)
        if loops is None:
            continue
        relabel, clear = [], []
        for lp in sorted(loops):
            g = _moving(a, lp, aff, pos_stmt.get(lp))
            ok = g is not None and all(
                _interval_clear(q.consts[d] - p.consts[d], p.lengths[d], q.lengths[d], g)
                and _interval_clear(p.consts[d] - q.consts[d], q.lengths[d], p.lengths[d], g)
                for p in ps for q in qs)
            (clear if ok else relabel).append(lp)
        return relabel, clear
    return None


def _disjoint(a: int, la: int, b: int, lb: int) -> bool:
    return a + la <= b or b + lb <= a


def _elements(x: _Acc, lo, vs, threads: int, pseudo_of, next_pseudo: list):
    """(frame index of every element the access touches, sorted and distinct; its thread)."""
    a, plan = x.access, x.plan
    rank = len(x.consts)
    if a.mode == "partition":
        shape = plan.shape
        it = int(shape[0]) * int(shape[1])
        idx = np.zeros(it, dtype=np.int64)
        j = 0
        for d in range(rank):
            base = x.consts[d] - lo[d]
            if x.ranged[d]:
                coord = a.coords[j].offsets().ravel() if j < len(a.coords) else np.zeros(it, np.int64)
                j += 1
                idx += (coord + base) * vs[d]
            else:
                idx += base * vs[d]
        if any(acc.space == "registers" for acc in plan.accesses):
            # a register layout, not the partition: one thread per iteration coordinate, its own
            if plan.position not in pseudo_of:
                pseudo_of[plan.position] = next_pseudo[0]
                next_pseudo[0] += it
            thr = pseudo_of[plan.position] + np.arange(it, dtype=np.int64)
        else:
            thr = owners(shape, plan.vector_width, threads).ravel()
        order = np.argsort(idx, kind="stable")
        o, t = idx[order], thr[order]
        if not len(o):
            return o, t.astype(np.int32)
        starts = np.flatnonzero(np.r_[True, o[1:] != o[:-1]])
        tmin = np.minimum.reduceat(t, starts)
        tmax = np.maximum.reduceat(t, starts)
        return o[starts], np.where(tmin == tmax, tmin, ANY).astype(np.int32)
    # "any": every element of the window, by several threads
    idx = np.zeros(1, dtype=np.int64)
    for d in range(rank):
        base = x.consts[d] - lo[d]
        rng = (np.arange(x.lengths[d], dtype=np.int64) + base) * vs[d]
        idx = (idx[:, None] + rng[None, :]).ravel()
    idx = np.unique(idx)
    return idx, np.full(len(idx), ANY, dtype=np.int32)


def _form_text(dim, const: int, names) -> str:
    parts = []
    for atom, coef in sorted(dim, key=lambda t: str(t[0])):
        nm = names(atom)
        parts.append(nm if coef == 1 else f"-{nm}" if coef == -1 else f"{coef} * {nm}")
    if const or not parts:
        parts.append(str(const))
    out = " + ".join(parts)
    return out.replace("+ -", "- ")


def _namer(aff: _Affine):
    def names(atom):
        kind, v = atom
        if kind == "sym":
            return aff.names.get(v, "?")
        if v and v[0] == "x":
            return f"ctx.{v[1]}"
        return "(...)"
    return names


def _window_text(name: str, key, x: _Acc, aff: _Affine) -> str:
    names = _namer(aff)
    parts = []
    for d, dim in enumerate(key):
        start = _form_text(dim, x.consts[d], names)
        parts.append(f"{start} :+ {x.lengths[d]}" if x.ranged[d] else start)
    return f"{name}[{', '.join(parts)}]"


def _element_describer(name: str, key, lo, ext, starts, aff):
    names = _namer(aff)

    def describe(i: int) -> CellInfo:
        v = int(starts[i]) if i < len(starts) else 0
        coords = []
        for d in range(len(ext) - 1, -1, -1):
            coords.append(v % ext[d] + lo[d] if ext[d] else lo[d])
            v //= ext[d] if ext[d] else 1
        coords.reverse()
        text = ", ".join(_form_text(dim, c, names) for dim, c in zip(key, coords))
        return CellInfo(name, "element", f"{name}[{text}]")
    return describe
