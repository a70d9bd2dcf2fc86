"""Barrier placement: where the CTA must wait so that no thread touches bytes another thread is
still writing or reading, in shared memory or in global memory.

The rule. Every statement's accesses to shared memory are known byte by byte, with the thread
that makes each one (`tilenb.analysis.ownership`): a "partition" access by the chunk's owner, an
"any" access by possibly every thread, a "per_thread" access by unknown threads. Accesses to
tensors are known as "cells" of global memory in the same terms (`tilenb.analysis.global_memory`:
one cell per element where windows can be compared, one cell for elements the model cannot tell
apart), and the walk below treats those cells like shared bytes: hazards between two threads of
one CTA through a tensor are placed and pruned by the same rule, with a reason that names the
tensor (and the element and threads where known). Between two barriers, a byte (a cell) may be
touched by several statements without a barrier only if every write to it and every other access
to it come from one and the same thread. So a barrier goes before a tile
statement that reads bytes another thread wrote (read after write), or writes bytes another thread
wrote or read (write after write, write after read) since the last barrier, whichever tile those
bytes belonged to then (a tile placed in the bytes of a dead one is a hazard like any other).
Per-thread element accesses count as made by unknown threads: one after a tile statement's
access, or a tile statement after one, needs a barrier; two per-thread accesses are the program's
own business (the language's `barrier()`). A user `barrier()` counts as a barrier.

Placement, greedy and as late as possible (along one path that is the fewest barriers: each
barrier goes at the first statement that needs it and clears every hazard pending there), then
pruned: a barrier that the others make unneeded on every path (one placed early that a later
loop barrier covers) is dropped, and each kept barrier's reason names a hazard only it separates.
Where:
- "before" the statement that completes the hazard; when that statement is inside loops that
  the hazard's earlier access is not (a tile written before the loop, read in it), before the
  outermost such loop instead, so that the barrier runs once rather than at every turn;
- "after" the last statement of a loop body when the hazard runs around the loop's back edge
  (its first side is later in the body than its second: one turn's access against the next
  turn's); that barrier also separates the last turn from what follows the loop;
- "within" a statement that reads elements other threads of the same statement overwrite
  (`t = transpose(t)`, `p = p / rowsum(p)`): the code generator evaluates the whole value into
  registers, then places the barrier, then writes;
- a barrier needed at a statement under varying control (per-thread code inside an `if` on
  ctx.thread, or after a `return` or `continue` some threads took) goes before the latest earlier
  statement of its block that every thread reaches and that follows the hazard's earlier access
  (the `if` holding that jump), else before the nearest enclosing statement every thread reaches.

Loops are followed to a fixpoint: the state at the top of the body joins the state before the loop
with the state at the end of every turn (and at each `continue`); the state after the loop joins
the top-of-body state with every `break`. So a loop that runs zero times, once, or many times is
covered. On the way back to the top, tensor cells whose windows move with the loop are handled as
`global_memory` says: cleared where the loop's turns provably touch different elements, or handed
on as touched by any thread where a later turn's window may cover an earlier turn's.

Guarantees: afterwards, along every path through the kernel, every pair of shared-memory
accesses to one byte, or of accesses of one CTA to one tensor element, by different threads, at
least one a write and at least one from a tile statement, has a barrier between them; taking
away any one barrier leaves such a pair on some path, as far as the model can tell (it counts a per-thread access as made by unknown threads,
a window whose start is known only as a set of values as touched at every such start, and
tensor windows whose starts differ by run-time amounts as meeting).
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Dict, List, Optional, Set, Tuple

import numpy as np

from .. import ir
from .global_memory import CLASS_BASE, OFF_PARTITION_BASE, GlobalCells, global_cells
from .copies import tile_swizzles
from .lifetimes import Lifetimes
from .ownership import Access, StatementPlan
from .partition import owners

NONE, ANY, UNKNOWN = -1, -2, -3   # no access; several or any threads; per-thread code (unknown threads)
_NEVER = -4                       # equal to no recorded value


@dataclass(frozen=True)
class Barrier:
    """One CTA barrier the compiler places (`__syncthreads()`).

    position: the pre-order index of the statement (as in Lifetimes.positions); where: "before" or
    "after" that statement, or "within" it (between evaluating its value and writing it); line: the
    statement's source line ("after": its last line); tile: the tile whose bytes the later access
    touches, or the tensor, for a hazard through global memory (the reason then says "in global
    memory"); reason: which statement wrote or read those bytes, which later one touches them, and
    why the two are different threads."""
    line: int
    position: int
    where: str
    tile: str
    reason: str
    kind: str                  # "read after write", "write after read", "write after write"
    earlier_line: int
    later_line: int
    carried: bool = False      # the hazard runs around a loop's back edge


@dataclass
class _Effect:
    plan: StatementPlan
    access: Access
    rw: str
    cells: np.ndarray       # the cells (see `_cells`) the access touches, sorted and distinct
    thread: np.ndarray      # per cell: a thread id, ANY or UNKNOWN
    idx: object = None      # `cells` as a slice when they are one range (faster to index), else `cells`
    clash: np.ndarray = None   # `thread` with ANY replaced by a value no record holds (see `_clashes`)

    def __post_init__(self):
        c = self.cells
        self.idx = slice(int(c[0]), int(c[-1]) + 1) if len(c) and c[-1] - c[0] + 1 == len(c) else c
        self.clash = np.where(self.thread == ANY, _NEVER, self.thread).astype(np.int32)


class _Hazard(Exception):
    def __init__(self, later: _Effect, earlier: Optional[_Effect], kind: str, within: bool, cell: int = -1,
                 also: Optional[_Effect] = None):
        self.later, self.earlier, self.kind, self.within = later, earlier, kind, within
        self.cell = cell        # the first cell where the two clash
        self.also = also        # another effect that reaches the later access on another path and clashes too


class _State:
    """Per byte since the last barrier: the writer and the readers (a thread, ANY, UNKNOWN or
    NONE), and up to two effects that made them (for reasons and for telling a hazard carried
    around a loop from one within a turn)."""
    __slots__ = ("w", "r", "wsrc", "rsrc", "wsrc2", "rsrc2")

    def __init__(self, n: int):
        self.w = np.full(n, NONE, dtype=np.int32)
        self.r = np.full(n, NONE, dtype=np.int32)
        self.wsrc = np.full(n, -1, dtype=np.int32)
        self.rsrc = np.full(n, -1, dtype=np.int32)
        self.wsrc2 = np.full(n, -1, dtype=np.int32)
        self.rsrc2 = np.full(n, -1, dtype=np.int32)

    def copy(self) -> "_State":
        s = _State.__new__(_State)
        for k in self.__slots__:
            setattr(s, k, getattr(self, k).copy())
        return s

    def same(self, o: "_State") -> bool:
        return np.array_equal(self.w, o.w) and np.array_equal(self.r, o.r)


def _join_vals(a, b):
    same = a == b
    if same.all():
        return a.copy()
    return np.where(same, a, np.where(a == NONE, b, np.where(b == NONE, a, ANY))).astype(np.int32)


def _join(states: List[Optional[_State]]) -> Optional[_State]:
    live = [s for s in states if s is not None]
    if not live:
        return None
    if len(live) == 1:
        return live[0].copy()
    out = _State.__new__(_State)
    for k in _State.__slots__:   # every field is replaced by a new array below: no copy needed
        setattr(out, k, getattr(live[0], k))
    for s in live[1:]:
        out.w = _join_vals(out.w, s.w)
        out.r = _join_vals(out.r, s.r)
        for src, src2 in (("wsrc", "wsrc2"), ("rsrc", "rsrc2")):
            a, b = getattr(out, src), getattr(s, src)
            a2, b2 = getattr(out, src2), getattr(s, src2)
            # keep one source of each side: the first side's, and the other side's as the second
            differ = a != b
            if not differ.any():             # one source everywhere: no second one from here
                setattr(out, src2, np.where(a2 >= 0, a2, b2).astype(np.int32))
                setattr(out, src, a.copy())
                continue
            both = (a >= 0) & (b >= 0) & differ
            second = np.where(both, b, np.where(a2 >= 0, a2, b2))
            setattr(out, src2, second.astype(np.int32))
            setattr(out, src, np.where(a >= 0, a, b).astype(np.int32))
    return out


def _conflicts(x: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Whether an access by t clashes with the recorded accesses x (byte by byte)."""
    return (x != NONE) & ~((x == t) & (t >= 0)) & ~((x == UNKNOWN) & (t == UNKNOWN))


def _clashes(x: np.ndarray, e: "_Effect") -> np.ndarray:
    """`_conflicts(x, e.thread)`, faster: x != NONE and not (x == t for one thread t, or both
    UNKNOWN) is x != NONE and x != t', where t' is t with ANY replaced by a value x never holds."""
    return (x != NONE) & (x != e.clash)


def _distinct(a: np.ndarray) -> np.ndarray:
    """The sorted distinct values of a 1-D array: np.unique's result, by a sort (numpy 2's
    np.unique hashes first, and takes two to three times as long on these offsets)."""
    if len(a) < 2:
        return a.copy()
    s = np.sort(a)
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def _elements(plan: StatementPlan, a: Access, threads: int, swizzle=None):
    """(first byte of each element the access touches, sorted and distinct; the thread that
    touches it: one thread id, or ANY when several do, or the mode's ANY / UNKNOWN). Every byte
    of an element has the element's thread, since one access's elements never overlap in part.
    swizzle: the tile's XOR swizzle in the generated code (`copies.tile_swizzles`), which moves
    its elements to other bytes (None: row-major)."""
    offs = np.concatenate([l.offsets().ravel() for l in a.layouts])
    if swizzle is not None:
        inside = (offs >= 0) & (offs < a.storage.type.size)
        offs = np.where(inside, swizzle(np.where(inside, offs, 0)), offs)
    increasing = len(a.layouts) == 1 and bool((offs[1:] > offs[:-1]).all())   # sorted and distinct already
    if a.mode == "partition":
        thr = owners(plan.shape, plan.vector_width, threads).ravel()
        if increasing:
            return a.base_byte + offs * a.elem_bytes, thr.astype(np.int32)
        thr = np.tile(thr, len(a.layouts))
        order = np.argsort(offs, kind="stable")
        o, t = offs[order], thr[order]
        starts = np.flatnonzero(np.r_[True, o[1:] != o[:-1]])
        tmin = np.minimum.reduceat(t, starts)
        tmax = np.maximum.reduceat(t, starts)
        thread = np.where(tmin == tmax, tmin, ANY).astype(np.int32)
        o = o[starts]
    else:
        o = offs if increasing else _distinct(offs)
        thread = np.full(len(o), ANY if a.mode == "any" else UNKNOWN, dtype=np.int32)
    return a.base_byte + o * a.elem_bytes, thread


def _cells(elements, size: int) -> np.ndarray:
    """The cell of every byte: cells split shared memory's bytes into runs of consecutive
    bytes that every access touches alike (all of the run or none of it, by one thread). Every
    byte of a cell goes through the same states in the walk, so the walk keeps one value per
    cell; cells are numbered in byte order, so the first cell that clashes holds the first byte
    that clashes. Returns the cell number of each byte 0 .. n (n: one past the last byte any
    access touches, at least `size`)."""
    end = size
    for starts, eb, _ in elements:
        if len(starts):
            end = max(end, int(starts[-1]) + eb)
    cut = np.zeros(end + 1, dtype=bool)        # cut[b]: a cell starts at byte b
    cut[0] = True
    for starts, eb, thread in elements:
        n = len(starts)
        if not n:
            continue
        ends = starts + eb
        joined = (ends[:-1] == starts[1:]) & (thread[:-1] == thread[1:])   # element k runs into k + 1
        first = np.ones(n, dtype=bool)
        first[1:] = ~joined
        last = np.ones(n, dtype=bool)
        last[:-1] = ~joined
        cut[starts[first]] = True
        cut[ends[last]] = True
    return np.cumsum(cut) - 1


def _to_cells(cell_of: np.ndarray, starts: np.ndarray, eb: int, thread: np.ndarray):
    """The cells (sorted, distinct) an access's elements cover, with each cell's thread (a cell
    may hold several elements, or an element several cells)."""
    first = cell_of[starts]
    n = cell_of[starts + (eb - 1)] + 1 - first
    if not (n == 1).all():
        rep = np.repeat(np.arange(len(first)), n)
        first = first[rep] + (np.arange(len(rep)) - np.repeat(np.cumsum(n) - n, n))
        thread = thread[rep]
    if len(first) > 1:
        keep = np.ones(len(first), dtype=bool)
        keep[1:] = first[1:] != first[:-1]
        return first[keep], thread[keep]
    return first, thread


def _effects(plans: Tuple[StatementPlan, ...], threads: int, size: int):
    """Every shared-memory access of every plan as an effect on cells, and the number of cells.
    Accesses that touch the same elements alike (the same tile through the same layouts and
    partition) share one computation. A swizzled tile's elements are at the bytes the generated
    code puts them (`copies.tile_swizzles`, the one decision the generator also reads), so a
    tile placed in the bytes of another (a dead one) meets it where it really does."""
    swizzles = tile_swizzles(plans, threads)
    found, memo = [], {}
    for plan in plans:
        for a in plan.accesses:
            if a.space == "shared":
                sw = swizzles.get(id(a.storage))
                key = (a.mode, a.layouts, a.base_byte, a.elem_bytes,
                       (tuple(plan.shape), plan.vector_width) if a.mode == "partition" else None, sw)
                if key not in memo:
                    memo[key] = _elements(plan, a, threads, sw)
                found.append((plan, a, key))
    cell_of = _cells([(st, k[3], th) for k, (st, th) in memo.items()], size)
    cells = {k: _to_cells(cell_of, st, k[3], th) for k, (st, th) in memo.items()}
    out = [_Effect(plan, a, a.rw, *cells[key]) for plan, a, key in found]
    return out, int(cell_of[-1]) + 1 if size > 0 else 0


class _Placer:
    def __init__(self, kir: ir.KernelIR, lt: Lifetimes, plans: Tuple[StatementPlan, ...], varying: Set[int]):
        self.kir = kir
        self.lt = lt
        self.plans = plans
        self.size = lt.footprint
        self.pos = {id(s): p for p, s in lt.positions}
        self.stmt = {p: s for p, s in lt.positions}
        self.parent: Dict[int, Optional[int]] = {}
        self.loops: Dict[int, Tuple[int, int]] = {}
        self.before_me: Dict[int, List[int]] = {}     # the positions of the earlier statements of its block
        self.varying = varying
        self.effects, self.nshared = _effects(plans, kir.threads, self.size) if self.size > 0 else ([], 0)
        # global memory: the tensors' cells follow the shared bytes' (global_memory)
        self.globals: GlobalCells = global_cells(kir, plans, lt.positions, kir.threads)
        for plan, a, cells, thread in self.globals.effects:
            self.effects.append(_Effect(plan, a, a.rw, cells + self.nshared, thread))
        self.ncells = self.nshared + self.globals.ncells
        # per effect, a code of its tile atomic's op (-1: not an atomic), and a sentinel -1 last so
        # that a source index of -1 (none) reads -1: atomics of one op commute, so two of them at one
        # element, by different threads, need no barrier between them (spec 13.1)
        ops: Dict[str, int] = {}
        self.atomic_op = np.array([ops.setdefault(getattr(e.plan.stmt, "op", ""), len(ops))
                                   if getattr(e.access, "atomic", False) else -1 for e in self.effects] + [-1],
                                  dtype=np.int32)
        self.clear_at = {lp: c + self.nshared for lp, c in self.globals.clear_at.items()}
        self.relabel_at = {lp: c + self.nshared for lp, c in (self.globals.relabel_at or {}).items()}
        self.by_pos: Dict[int, List[int]] = {}
        for i, e in enumerate(self.effects):
            self.by_pos.setdefault(e.plan.position, []).append(i)
        # per position: (reads, writes, the hazard within the statement or None), computed once
        self.at: Dict[int, tuple] = {p: self._at(ids) for p, ids in self.by_pos.items()}
        self._index(kir.body, None)
        self._tops = [self.pos[id(s)] for s in kir.body]      # positions of the top-level statements
        self._snaps: List[Optional[_State]] = [_State(self.ncells)]   # see `_walk`
        self._valid = 0
        self.placed: Dict[Tuple[int, str], Barrier] = {}
        self.unplaced: List[str] = []

    def _index(self, body, parent):
        block = [self.pos[id(s)] for s in body]
        for k, s in enumerate(body):
            p = self.pos[id(s)]
            self.parent[p] = parent
            self.before_me[p] = block[:k]
            if isinstance(s, (ir.For, ir.While)):
                self.loops[p] = (p, p + sum(1 for _ in ir.walk_stmts(s.body)))
            for b in ir.child_blocks(s):
                self._index(b, p)

    # ---- the walk
    def run(self):
        for _ in range(500):
            try:
                self._walk()
                break
            except _Hazard as h:
                if not self._place(h):
                    return
        else:   # pragma: no cover - each round adds a barrier, and there are few places
            self.unplaced.append("the barrier search did not settle")
            return
        self._prune()

    def _prune(self):
        """Drop every barrier the others make unneeded. Greedy placement is optimal along one
        path, but a barrier placed later (for a hazard around a loop) can cover an earlier one's
        hazards on every path; each barrier is tried, latest placed first."""
        for key in list(reversed(list(self.placed))):
            kept = self.placed.pop(key)
            self._changed(key)
            h = self._first_hazard()
            if h is not None:
                # the first hazard without this barrier is one it separates: say that one
                self.placed[key] = self._barrier(key, h, kept.carried)
                self._changed(key)

    def _first_hazard(self) -> Optional[_Hazard]:
        try:
            self._walk()
            return None
        except _Hazard as h:
            return h

    def _walk(self):
        """Walk the kernel from the top (raising the first _Hazard). The state before each
        top-level statement is kept from the previous walk, and the walk resumes at the first
        top-level statement whose state a barrier placed or removed since then may change:
        a barrier inside top-level statement j changes nothing before j."""
        body = self.kir.body
        k = min(self._valid, len(self._snaps) - 1)
        del self._snaps[k + 1:]
        state = self._snaps[k]
        state = state.copy() if state is not None else None
        try:
            for i in range(k, len(body)):
                if i > k:
                    self._snaps.append(state.copy() if state is not None else None)
                if state is None:
                    return
                state = self._block(body[i:i + 1], state, [])
        finally:
            self._valid = len(self._snaps) - 1

    def _changed(self, key):
        """A barrier at `key` was placed or removed: walks resume at its top-level statement."""
        j = bisect.bisect_right(self._tops, key[0]) - 1
        self._valid = min(self._valid, max(j, 0))

    def _has(self, p, where):
        return (p, where) in self.placed

    def _block(self, body, state: Optional[_State], loops) -> Optional[_State]:
        for s in body:
            if state is None:
                return None
            p = self.pos[id(s)]
            if self._has(p, "before"):
                state = _State(self.ncells)
            if isinstance(s, ir.For):
                state = self._apply(p, state)
                state = self._loop(s, p, state, loops)
            elif isinstance(s, ir.While):
                state = self._loop(s, p, state, loops)
            elif isinstance(s, ir.If):
                state = self._apply(p, state)
                a = self._block(s.then, state.copy(), loops)
                b = self._block(s.orelse, state.copy(), loops)
                state = _join([a, b])
            elif isinstance(s, ir.Break):
                if loops:
                    loops[-1]["breaks"].append(state)
                state = None
            elif isinstance(s, ir.Continue):
                if loops:
                    loops[-1]["continues"].append(state)
                state = None
            elif isinstance(s, ir.Return):
                state = None
            elif isinstance(s, ir.Barrier):
                state = _State(self.ncells)
            else:
                state = self._apply(p, state)
            if state is not None and self._has(p, "after"):
                state = _State(self.ncells)
        return state

    def _loop(self, s, p, entry: _State, loops) -> Optional[_State]:
        head = entry
        is_while = isinstance(s, ir.While)
        clear, relabel = self.clear_at.get(p), self.relabel_at.get(p)
        for _ in range(16):
            frame = {"breaks": [], "continues": []}
            top = self._apply(p, head.copy()) if is_while else head.copy()
            end = self._block(s.body, top, loops + [frame])
            back = [end] + frame["continues"]
            if relabel is not None:
                # tensor cells that stand, from the next turn on, for elements any thread may
                # have touched (global_memory)
                back = [_relabeled(b, relabel) for b in back]
            if clear is not None:
                # tensor elements this loop's turns were proved to touch disjointly: one turn's
                # accesses meet none of the next turn's (global_memory)
                back = [_cleared(b, clear) for b in back]
            new_head = _join([head] + back)
            if new_head.same(head):
                break
            head = new_head
        if _runs_at_least_once(s) and end is not None:
            # constant bounds with lo < hi: the loop is left after a turn, never straight from entry
            exit_state = _join([end] + frame["continues"])
        else:
            if clear is not None or relabel is not None:   # the last turn's accesses go on past the loop
                head = _join([head, end] + frame["continues"])
            exit_state = self._apply(p, head.copy()) if is_while else head
        return _join([exit_state] + frame["breaks"])

    def _at(self, ids):
        reads = [(i, self.effects[i]) for i in ids if self.effects[i].rw == "read"]
        writes = [(i, self.effects[i]) for i in ids if self.effects[i].rw == "write"]
        within = None
        for _, w in writes:
            for _, r in reads:
                common, iw, ir_ = np.intersect1d(w.cells, r.cells, assume_unique=True, return_indices=True)
                if len(common):
                    bad = _conflicts(r.thread[ir_], w.thread[iw])
                    if bad.any():
                        within = _Hazard(w, r, "write after read", True, int(common[np.flatnonzero(bad)[0]]))
                        break
            if within is not None:
                break
        return reads, writes, within

    def _apply(self, p: int, state: _State) -> _State:
        at = self.at.get(p)
        if at is None:
            return state
        reads, writes, within = at
        for _, e in reads:
            c = _clashes(state.w[e.idx], e)
            if c.any():
                raise self._hazard(e, state.wsrc, state.wsrc2, c, "read after write")
        for i, e in writes:
            c = _clashes(state.w[e.idx], e)
            if c.any() and self.atomic_op[i] >= 0:
                c = c & ~self._same_atomic(state, i, e)
            if c.any():
                raise self._hazard(e, state.wsrc, state.wsrc2, c, "write after write")
            c = _clashes(state.r[e.idx], e)
            if c.any():
                raise self._hazard(e, state.rsrc, state.rsrc2, c, "write after read")
        for i, e in reads:
            k = e.idx
            x = state.r[k]                  # a view when k is a slice: read all of it before writing
            t = e.thread
            read = x != NONE
            if read.any():
                other = read & (x != t)
                merged = np.where(read, np.where(x == t, x, ANY), t)
                state.rsrc2[k] = np.where(other, state.rsrc[k], state.rsrc2[k])
                state.r[k] = merged
            else:                           # nothing read there yet: this read alone
                state.r[k] = t
            state.rsrc[k] = i
        if self._has(p, "within"):
            state = _State(self.ncells)
        elif within is not None:
            raise _Hazard(within.later, within.earlier, within.kind, True)
        for i, e in writes:
            k = e.idx
            if self.atomic_op[i] >= 0:
                # after two atomics of one op by different threads, both threads wrote the element
                same = self._same_atomic(state, i, e) & (state.w[k] != NONE) & (state.w[k] != e.thread)
                if same.any():
                    state.wsrc2[k] = np.where(same, state.wsrc[k], -1)
                    state.w[k] = np.where(same, ANY, e.thread)
                    state.wsrc[k] = i
                    continue
            state.w[k] = e.thread
            state.wsrc[k] = i
            state.wsrc2[k] = -1
        return state

    def _same_atomic(self, state: _State, i: int, e: _Effect) -> np.ndarray:
        """Per cell of write effect i (a tile atomic): every write recorded there since the last
        barrier is an atomic of the same op."""
        op = self.atomic_op[i]
        k = e.idx
        a = self.atomic_op[state.wsrc[k]] == op
        b2 = state.wsrc2[k]
        return a & ((b2 < 0) | (self.atomic_op[b2] == op))

    def _hazard(self, e: _Effect, src: np.ndarray, src2: np.ndarray, c: np.ndarray, kind: str) -> _Hazard:
        """The hazard `e` completes at its first clashing cell `c`: the effect placement goes by
        (`_src`), and the other recorded effect there when it clashes too (for the reason)."""
        earlier = self._src(src, src2, e, c)
        i = int(np.flatnonzero(c)[0])
        b, t = e.cells[i], e.thread[i]
        also = None
        for k in (int(src[b]), int(src2[b])):
            if k < 0 or earlier is None or self.effects[k] is earlier:
                continue
            cand = self.effects[k]
            j = np.searchsorted(cand.cells, b)
            if j < len(cand.cells) and cand.cells[j] == b and _conflicts(np.array([cand.thread[j]]), np.array([t]))[0]:
                also = cand
        return _Hazard(e, earlier, kind, False, _first(e, c), also)

    def _src(self, src: np.ndarray, src2: np.ndarray, e: _Effect, c: np.ndarray) -> Optional[_Effect]:
        """The recorded effect that clashes with `e` at its first clashing cell."""
        i = int(np.flatnonzero(c)[0])
        b, t = e.cells[i], e.thread[i]
        first = None
        for k in (int(src[b]), int(src2[b])):
            if k < 0:
                continue
            cand = self.effects[k]
            first = first or cand
            j = np.searchsorted(cand.cells, b)
            if j < len(cand.cells) and cand.cells[j] == b and _conflicts(np.array([cand.thread[j]]), np.array([t]))[0]:
                return cand
        return first

    # ---- deciding where a barrier goes
    def _place(self, h: _Hazard) -> bool:
        p = h.later.plan.position
        q = h.earlier.plan.position if h.earlier is not None else -1
        carried = False
        if h.within:
            key = (p, "within")
        else:
            key = None
            if q >= p:
                loop = self._innermost_loop(p, q)
                if loop is not None:
                    body = self.stmt[loop].body
                    last = self.pos[id(body[-1])]
                    if not self._has(last, "after") and id(body[-1]) not in self.varying:
                        key, carried = (last, "after"), True
            if key is None:
                target = self._uniform_point(p, q)
                if target is None or self._has(target, "before"):
                    self.unplaced.append(f"line {h.later.plan.line}: {self._reason(h, False, None)}")
                    return False
                target = self._hoisted(target, q)
                key = (target, "before")
        self.placed[key] = self._barrier(key, h, carried)
        self._changed(key)
        return True

    def _uniform_point(self, p: int, q: int) -> Optional[int]:
        """The statement before which a barrier separating an access at `q` from a later one at
        `p` goes: `p` itself when every thread reaches it together; otherwise the latest earlier
        statement of its block that every thread reaches and that starts after `q` (the one
        holding the jump some threads took, say), else the same search from the enclosing
        statement. None when there is no such place."""
        t = p
        while t is not None and id(self.stmt[t]) in self.varying:
            for sib in reversed(self.before_me.get(t, ())):
                if sib <= q:
                    break
                if id(self.stmt[sib]) not in self.varying:
                    return sib
            t = self.parent.get(t)
        return t

    def _hoisted(self, target: int, q: int) -> int:
        """Where a barrier for a hazard at `target` whose earlier access is at `q` goes: before
        the outermost enclosing loop that does not hold `q` (the access before the loop is
        separated once, not at every turn), climbing only through loops every thread runs."""
        best = target
        if q < 0:
            return best
        p = self.parent.get(target)
        while p is not None:
            s = self.stmt[p]
            if isinstance(s, (ir.For, ir.While)):
                a, b = self.loops[p]
                if a <= q <= b or id(s) in self.varying or self._has(p, "before"):
                    break
                best = p
            elif not isinstance(s, ir.If) or id(s) in self.varying:
                break
            p = self.parent.get(p)
        return best

    def _barrier(self, key, h: _Hazard, carried: bool) -> Barrier:
        pos, where = key
        p = h.later.plan.position
        q = h.earlier.plan.position if h.earlier is not None else -1
        carried = carried and q >= p and self._innermost_loop(p, q) is not None
        stmt = self.stmt[pos]
        line = stmt.span.end_line if where == "after" and stmt.span.end_line else stmt.span.line
        loop_line = self.stmt[self._innermost_loop(p, q)].span.line if carried else None
        return Barrier(line, pos, where, h.later.access.name, self._reason(h, carried, loop_line), h.kind,
                       h.earlier.plan.line if h.earlier is not None else 0, h.later.plan.line, carried)

    def _innermost_loop(self, p: int, q: int) -> Optional[int]:
        best = None
        for lp, (a, b) in self.loops.items():
            if a <= p <= b and a <= q <= b and (best is None or lp > best):
                best = lp
        return best

    def _reason(self, h: _Hazard, carried: bool, loop_line: Optional[int]) -> str:
        if h.later.access.space == "global":
            return self._global_reason(h, carried, loop_line)
        later, earlier = h.later, h.earlier
        la = later.access
        now_verb = "reads" if later.rw == "read" else "writes"
        if earlier is None:
            return f"{la.name}: {later.plan.what} at line {later.plan.line} {now_verb} bytes other threads touched"
        other = None
        alt = h.also
        if (alt is not None and not carried and earlier.plan.position < alt.plan.position < later.plan.position):
            # two accesses reach the later one on different paths (a fill before a loop and the `+=`
            # in it): name the nearest one, the one a reader expects, and the other one after it
            earlier, other = alt, earlier
        ea = earlier.access
        then_verb = "wrote" if earlier.rw == "write" else "read"
        same_tile = ea.storage is la.storage
        bytes_of = (f"{la.name}" if same_tile else f"bytes of {ea.name} that {la.name} now occupies")
        if h.within:
            return (f"{la.name}: {later.plan.what} at line {later.plan.line} reads elements of {ea.name} "
                    f"that other threads of the same statement then overwrite; evaluate the value first, "
                    f"then wait, then write")
        why = _why(earlier, later, same_tile)
        head = (f"{la.name}: {earlier.plan.what} at line {earlier.plan.line} {then_verb} {ea.name}"
                f" ({_who(earlier)}); {later.plan.what} at line {later.plan.line} {now_verb} "
                f"{bytes_of} ({_who(later)})")
        if carried:
            head = f"around the loop at line {loop_line}, from one turn to the next: " + head
        if other is not None:
            skip = self._skipping_loop(earlier.plan.position, other.plan.position)
            path = (f"when the loop at line {self.stmt[skip].span.line} runs no turn" if skip is not None
                    else f"on a path that skips line {earlier.plan.line}")
            why += (f" (and {other.plan.what} at line {other.plan.line} "
                    f"{'wrote' if other.rw == 'write' else 'read'} {other.access.name} {path})")
        return f"{head}: {why}"

    def _skipping_loop(self, p: int, q: int) -> Optional[int]:
        """The outermost loop holding position p but not q, or None."""
        best = None
        for lp, (a, b) in self.loops.items():
            if a <= p <= b and not (a <= q <= b) and (best is None or lp < best):
                best = lp
        return best

    def _global_reason(self, h: _Hazard, carried: bool, loop_line: Optional[int]) -> str:
        """A hazard through a tensor: which element and threads (where the model knows them),
        which statements, and what may happen without a barrier."""
        later, earlier = h.later, h.earlier
        name = later.access.storage.name
        info = self.globals.info(h.cell - self.nshared) if h.cell >= self.nshared else None
        kind = info.kind if info is not None else "whole"

        def who(e: Optional[_Effect]) -> str:
            t = _thread_at(e, h.cell) if e is not None else None
            if t is None or t == ANY or t >= CLASS_BASE:
                return "several threads"
            if t == UNKNOWN:
                return "per-thread code (any thread)"
            if t >= OFF_PARTITION_BASE:
                return "the thread that holds it in registers"
            return f"thread {t}"

        def side(e: Optional[_Effect], verb: str) -> str:
            if e is None:
                return f"{verb} by other threads"
            if kind == "element":
                return f"{verb} by {who(e)} at line {e.plan.line} ({e.plan.what})"
            if kind == "per_thread":
                return f"{verb} at line {e.plan.line} ({e.plan.what}, by {who(e)})"
            return f"{verb} at line {e.plan.line} ({e.plan.what}: {self.globals.window(e.plan, e.access)})"

        def verb(e: Optional[_Effect]) -> str:
            return "touched" if e is None else "written" if e.rw == "write" else "read"
        subject = info.element if kind == "element" else name
        if h.within:
            head = (f"{subject} in global memory is {side(earlier, 'read')} and {side(later, 'written')}, "
                    f"by another thread in the same statement: evaluate the value first, then wait, then write")
        else:
            head = f"{subject} in global memory is {side(earlier, verb(earlier))} and {side(later, verb(later))}"
            if kind == "pair" and any(e is not None and e.access.window is None for e in (earlier, later)):
                head += "; per-thread code may touch any element"
            elif kind == "pair":
                head += "; the two windows may share elements (their starts differ by amounts known only at run time)"
            elif kind == "pair_turns":
                head += "; the two windows are apart within a turn, but a later turn's may cover an earlier turn's"
            elif kind == "turns":
                head += "; the window moves from turn to turn onto elements other threads touched in an earlier turn"
            elif kind == "whole":
                head += "; the window moves in ways the analysis does not follow, so its elements may be other threads'"
            elif kind == "per_thread":
                head += "; per-thread code may touch any element"
            why = {"read after write": "without a barrier the read may come before the write",
                   "write after read": "without a barrier the write may land before the read",
                   "write after write": "without a barrier the two writes may land in either order"}[h.kind]
            head = f"{head}: {why}"
        if carried:
            head = f"around the loop at line {loop_line}, from one turn to the next: " + head
        return head

    def result(self) -> Tuple[Barrier, ...]:
        order = {"before": 0, "within": 1, "after": 2}
        return tuple(sorted(self.placed.values(), key=lambda b: (b.position, order[b.where])))


def _first(e: _Effect, c: np.ndarray) -> int:
    """The first cell of `e` where the clash mask `c` holds."""
    return int(e.cells[int(np.flatnonzero(c)[0])])


def _thread_at(e: _Effect, cell: int) -> Optional[int]:
    j = int(np.searchsorted(e.cells, cell))
    if j < len(e.cells) and e.cells[j] == cell:
        return int(e.thread[j])
    return None


def _relabeled(state: Optional[_State], cells: np.ndarray) -> Optional[_State]:
    """A copy of `state` in which what is recorded on `cells` counts as touched by any thread."""
    if state is None:
        return None
    out = state.copy()
    for k in ("w", "r"):
        a = getattr(out, k)
        a[cells] = np.where(a[cells] != NONE, ANY, NONE)
    return out


def _cleared(state: Optional[_State], cells: np.ndarray) -> Optional[_State]:
    """A copy of `state` with nothing recorded on `cells`."""
    if state is None:
        return None
    out = state.copy()
    out.w[cells] = NONE
    out.r[cells] = NONE
    out.wsrc[cells] = -1
    out.rsrc[cells] = -1
    out.wsrc2[cells] = -1
    out.rsrc2[cells] = -1
    return out


def _who(e: _Effect) -> str:
    a = e.access
    if a.mode == "partition":
        v = e.plan.vector_width
        return f"each thread its own {v}-element runs" if v > 1 else "each thread its own elements"
    if a.mode == "any":
        return "any thread"
    return "per-thread code, threads unknown"


def _why(earlier: _Effect, later: _Effect, same_tile: bool) -> str:
    ea, la = earlier.access, later.access
    if not same_tile:
        return "the bytes are reused, and other threads touched them"
    if la.mode == "per_thread" or ea.mode == "per_thread":
        return "per-thread element code may be any thread"
    if la.mode == "any":
        return f"{later.plan.what} needs elements that other threads hold"
    if ea.mode == "any":
        return f"{earlier.plan.what} may have touched any element"
    if _broadcast(la) or _broadcast(ea):
        return "a broadcast reads one element from the threads of a whole row or column"
    if _transposed(la) or _transposed(ea):
        return "a transposed read takes elements along columns, which other threads wrote along rows"
    if earlier.plan.vector_width != later.plan.vector_width:
        return (f"the vector width changes from {earlier.plan.vector_width} to {later.plan.vector_width}, "
                f"so elements change threads")
    return "the two statements give these elements to different threads (different windows, shapes or a transpose)"


def _runs_at_least_once(s) -> bool:
    return (isinstance(s, ir.For) and isinstance(s.lo, ir.Const) and isinstance(s.hi, ir.Const)
            and isinstance(s.lo.value, int) and isinstance(s.hi.value, int) and s.lo.value < s.hi.value)


def _transposed(a: Access) -> bool:
    l = a.layouts[0]
    return a.mode == "partition" and l.shape[1] > 1 and l.stride[1] not in (0, 1)


def _broadcast(a: Access) -> bool:
    l = a.layouts[0]
    return a.mode == "partition" and any(st == 0 and n > 1 for st, n in zip(l.stride, l.shape))


def place_barriers(kir: ir.KernelIR, lt: Lifetimes, plans: Tuple[StatementPlan, ...], varying: Set[int]):
    """The barriers of a kernel variant, ordered by position, and notes on hazards that could not
    be separated (none for checked programs)."""
    pl = _Placer(kir, lt, plans, varying)
    if pl.ncells > 0:
        pl.run()
    return pl.result(), tuple(pl.unplaced)
