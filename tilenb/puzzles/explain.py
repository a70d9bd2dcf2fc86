"""Who writes an output element, and why an element was left unwritten, in a learner's terms.

After a launch, `Trace(kernel_ir, analysis, dims, scalars, inputs, grid, source)` replays the
kernel's control on the host, without touching memory: for every CTA it evaluates the scalars
(slice starts, loop variables, `let`s and scalar `var`s, per thread where they vary, `ctx` fields,
dimensions, scalar parameters), follows `if`, `for`, `while`, `break`, `continue` and `return`
thread by thread, and records every store into a tensor (`Instance`) with the threads that run it.
From those:

* `covered(tensor, shape)`: which elements lie inside some store's window (or are addressed by an
  active thread's element store), and which store instance covers each one last;
* `owner(tensor, coord)`: the CTA, thread and source line that write that element: for a tile
  store the thread that owns the element's chunk in the statement's canonical partition
  (`tilenb.analysis.partition.owners`, at the vector width of the statement's plan in
  `analysis.statements`), for an element store the active thread whose index lands there;
* `why_invalid(instance, coord)`: for an element inside a tile store's window that was not
  written, the operand that made the stored value invalid there (a slice running outside its
  tensor, a window outside its tile, a tile whose whole-tile assignment took such a slice's valid
  region), following spec section 8's rules through elementwise operators, broadcasts,
  reductions, dots, transposes, windows, views and tile variables: the walk of
  `tilenb.runtime.cpu.unwritten.why_invalid`, which a debug launch's notes use too, fed with the
  replay's scalars.

Guarantees: nothing here raises for a checked kernel: what cannot be replayed (a value read from a
tile element or an output tensor, more than `MAX_INSTANCES` stores or `MAX_TURNS` loop turns) is
reported as unknown (`Trace.complete` is False, an owner or reason is None), never guessed.
Element reads of *input* tensors are evaluated from the arrays given (the kernel does not write
them), so guards such as `if X[i] < 0.0` replay exactly.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from .. import ir
from ..analysis.partition import as_2d, owners
from ..runtime.cpu.unwritten import Invalid, Unknown, fit, origins_of, root_tensor, span_text, why_invalid  # noqa: F401

MAX_INSTANCES = 200_000       # store instances recorded per trace (beyond: incomplete)
MAX_TURNS = 200_000           # loop turns replayed in all (beyond: incomplete)


@dataclass
class Instance:
    """One execution of a store into a tensor by one CTA (one turn of its loops).

    window: per tensor dimension, (start, length) of a tile store (length None for a scalar
    index); indices: per dimension, the index each thread addresses (element stores and atomics:
    int64 arrays of shape (threads,)); mask: the threads that execute it."""
    stmt: object
    order: int
    cta: Tuple[int, int, int]
    env: Dict[int, object]
    window: Optional[List[Tuple[int, Optional[int]]]]
    indices: Optional[List[np.ndarray]]
    mask: np.ndarray
    atomic: bool = False


@dataclass(frozen=True)
class Owner:
    """Who writes one output element: the CTA, the thread, the statement's line and text, and
    for a tile store the element's position in the stored slice and the thread's chunk there."""
    cta: Tuple[int, int, int]
    thread: Optional[int]
    line: int
    text: str
    position: Optional[Tuple[int, ...]] = None
    chunk: Optional[Tuple[int, int, int]] = None     # (row, first column, vector width) in the slice
    atomic: bool = False
    threads: Tuple[int, ...] = ()                     # element stores: every thread writing there


def _trunc_div(a, b):
    a = np.asarray(a)
    b = np.asarray(b)
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        return a / b
    b0 = np.where(b == 0, 1, b)
    q = np.abs(a) // np.abs(b0) * np.sign(a) * np.sign(b0)
    return np.where(b == 0, 0, q)


def _trunc_mod(a, b):
    a = np.asarray(a)
    b = np.asarray(b)
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        return np.fmod(a, b)
    b0 = np.where(b == 0, 1, b)
    return np.where(b == 0, 0, a - b0 * _trunc_div(a, b0))


_BIN = {
    "+": np.add, "-": np.subtract, "*": np.multiply, "/": _trunc_div, "%": _trunc_mod,
    "&": np.bitwise_and, "|": np.bitwise_or, "^": np.bitwise_xor,
    "<<": np.left_shift, ">>": np.right_shift,
    "==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater,
    ">=": np.greater_equal, "&&": np.logical_and, "||": np.logical_or,
}
_MATH1 = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
          "rsqrt": lambda x: 1.0 / np.sqrt(x), "abs": np.abs, "floor": np.floor, "ceil": np.ceil,
          "round": np.round, "tanh": np.tanh, "sin": np.sin, "cos": np.cos}


class _Frame:
    """Threads that left the current loop (break) or its current turn (continue)."""
    __slots__ = ("broken", "cont")

    def __init__(self, n):
        self.broken = np.zeros(n, bool)
        self.cont = np.zeros(n, bool)


class Trace:
    """The replay of one launch (see the module docstring).

    kir: the launched variant's KernelIR; analysis: its `tilenb.analysis.Analysis`; dims, scalars:
    the launch's runtime dimensions and scalar arguments; inputs: arrays of the tensors the
    kernel only reads (by name); grid: (x, y, z) CTAs; source_lines: the module's source text
    split at newlines (spans index it); line_offset: added to lines when shown."""

    def __init__(self, kir: ir.KernelIR, analysis, dims: Dict[str, int], scalars: Dict[str, object],
                 inputs: Dict[str, np.ndarray], grid: Tuple[int, int, int], source_lines: Sequence[str],
                 line_offset: int = 0):
        self.kir = kir
        self.analysis = analysis
        self.dims = {k: int(v) for k, v in dims.items()}
        self.scalars = dict(scalars)
        self.inputs = inputs
        self.grid = tuple(int(g) for g in grid)
        self.lines = list(source_lines)
        self.line_offset = line_offset
        self.T = kir.threads
        self.complete = True
        self.instances: List[Instance] = []
        self._order = 0
        self._turns = 0
        origins = origins_of(kir)             # shared with the debug launch's notes (runtime.cpu.unwritten)
        self.origins = origins
        self.position = origins.position
        self.defs = origins.defs                 # tile sym -> [(position, op, value expr, stmt)]
        self.views = origins.views               # view sym -> its Slice (or Ref)
        self.lets: Dict[int, object] = {}        # scalar let sym -> value expr (never reassigned)
        for s in ir.walk_stmts(kir.body):
            if isinstance(s, ir.Let) and not isinstance(s.sym.type, ir.TileT) and s.value is not None:
                self.lets[id(s.sym)] = s.value
        self.plans = {id(p.stmt): p for p in analysis.statements} if analysis is not None else {}
        self._replay()

    # ---- text of the source ------------------------------------------------------------------
    def text(self, node) -> str:
        return span_text(self.lines, node)

    def line(self, node) -> int:
        sp = getattr(node, "span", None)
        return (sp.line + self.line_offset) if sp is not None else 0

    # ---- scalar evaluation ---------------------------------------------------------------------
    def ev(self, e, env, depth=0):
        if depth > 200:
            raise Unknown("too deep")
        t = type(e)
        if t is ir.Const:
            v = e.value
            return np.asarray(v if not isinstance(v, bool) else bool(v))
        if t is ir.Ref:
            sym = e.sym
            if id(sym) in env:
                v = env[id(sym)]
                if v is _UNKNOWN:
                    raise Unknown(sym.name)
                return v
            if sym.kind == "dim":
                return np.asarray(self.dims[sym.name], np.int64)
            if sym.kind == "scalar_param":
                return np.asarray(self.scalars[sym.name])
            if id(sym) in self.lets:
                v = self.ev(self.lets[id(sym)], env, depth + 1)
                return v
            raise Unknown(sym.name)
        if t is ir.Ctx:
            return self._ctx(e.field, env)
        if t is ir.Unary:
            x = self.ev(e.x, env, depth + 1)
            return {"-": np.negative, "!": np.logical_not, "~": np.invert}[e.op](x)
        if t is ir.Binary:
            a = self.ev(e.a, env, depth + 1)
            b = self.ev(e.b, env, depth + 1)
            with np.errstate(all="ignore"):
                return _BIN[e.op](a, b)
        if t is ir.Math:
            args = [self.ev(a, env, depth + 1) for a in e.args]
            with np.errstate(all="ignore"):
                if e.fn in _MATH1:
                    return _MATH1[e.fn](args[0])
                if e.fn == "min":
                    return np.minimum(args[0], args[1])
                if e.fn == "max":
                    return np.maximum(args[0], args[1])
                if e.fn == "where":
                    return np.where(args[0], args[1], args[2])
                if e.fn == "cdiv":
                    return _trunc_div(args[0] + args[1] - 1, args[1])
            raise Unknown(e.fn)
        if t is ir.Convert:
            x = self.ev(e.x, env, depth + 1)
            dt = e.type.dtype
            if dt in ("f16", "bf16", "f32", "f64"):
                return np.asarray(x, np.float64)
            if np.asarray(x).dtype.kind == "f":
                x = np.trunc(np.nan_to_num(np.asarray(x, np.float64)))
            return np.asarray(x).astype(np.int64)
        if t is ir.Element:
            return self._read_input(e, env, depth)
        raise Unknown(type(e).__name__)

    def _read_input(self, e, env, depth):
        base = e.base
        if base.kind != "tensor" or base.name not in self.inputs or e.flat:
            raise Unknown("element")
        arr = self.inputs[base.name]
        idx = [np.asarray(self.ev(i, env, depth + 1)).astype(np.int64) for i in e.indices]
        inside = np.ones(np.broadcast(*idx).shape if idx else (), bool)
        cl = []
        for i, n in zip(idx, arr.shape):
            inside = inside & (i >= 0) & (i < n)
            cl.append(np.clip(i, 0, n - 1))
        val = np.asarray(arr[tuple(cl)], np.float64 if arr.dtype.kind == "f" else np.int64)
        return np.where(inside, val, 0)

    def _ctx(self, field, env):
        cta = env["cta"]
        T = self.T
        if field.startswith("block."):
            return np.asarray(cta["xyz".index(field[-1])], np.int64)
        if field.startswith("grid."):
            return np.asarray(self.grid["xyz".index(field[-1])], np.int64)
        if field == "thread":
            return np.arange(T, dtype=np.int64)
        if field == "threads":
            return np.asarray(T, np.int64)
        if field == "warp":
            return np.arange(T, dtype=np.int64) // 32
        if field == "lane":
            return np.arange(T, dtype=np.int64) % 32
        n = max(1, self.kir.cluster)
        if field == "cluster.rank":
            return np.asarray(cta[0] % n if n > 1 else 0, np.int64)
        if field == "cluster.x":
            return np.asarray(cta[0] // n if n > 1 else cta[0], np.int64)
        raise Unknown(field)

    # ---- the replay ------------------------------------------------------------------------------
    def _replay(self):
        gx, gy, gz = self.grid
        for z in range(gz):
            for y in range(gy):
                for x in range(gx):
                    env = {"cta": (x, y, z)}
                    alive = np.ones(self.T, bool)
                    try:
                        self._block(self.kir.body, env, alive, alive, [])
                    except _Stop:
                        self.complete = False
                        return

    def _active(self, mask, alive, frames):
        m = mask & alive
        for f in frames:
            m = m & ~f.broken & ~f.cont
        return m

    def _block(self, body, env, mask, alive, frames):
        for s in body:
            m = self._active(mask, alive, frames)
            if not m.any():
                return
            t = type(s)
            if t is ir.Assign:
                if isinstance(s.target, (ir.Slice, ir.Element)) and s.target.base.kind == "tensor":
                    self._record(s, s.target, env, m, atomic=False)
                elif isinstance(s.target, ir.Ref) and not isinstance(s.target.sym.type, ir.TileT):
                    self._assign_var(s, env, m)
            elif t is ir.VarDecl:
                if not isinstance(s.sym.type, ir.TileT):
                    try:
                        v = np.asarray(self.ev(s.value, env)) if s.value is not None else np.asarray(0)
                    except Unknown:
                        v = _UNKNOWN
                    env[id(s.sym)] = v
            elif t is ir.Atomic:
                self._record(s, s.target, env, m, atomic=True)
            elif t is ir.For:
                self._for(s, env, m, alive, frames)
            elif t is ir.While:
                self._while(s, env, m, alive, frames)
            elif t is ir.If:
                try:
                    c = np.broadcast_to(np.asarray(self.ev(s.cond, env), bool), (self.T,))
                except Unknown:
                    self._unknown_block(s.then)
                    self._unknown_block(s.orelse)
                    continue
                self._block(s.then, env, m & c, alive, frames)
                self._block(s.orelse, env, m & ~c, alive, frames)
            elif t is ir.Return:
                alive &= ~m
            elif t is ir.Break:
                if frames:
                    frames[-1].broken |= m
            elif t is ir.Continue:
                if frames:
                    frames[-1].cont |= m

    def _assign_var(self, s, env, m):
        sym = s.target.sym
        old = env.get(id(sym), _UNKNOWN)
        try:
            val = np.asarray(self.ev(s.value, env))
            if s.op is not None:
                if old is _UNKNOWN:
                    raise Unknown(sym.name)
                with np.errstate(all="ignore"):
                    val = np.asarray(_BIN[s.op](old, val))
        except Unknown:
            env[id(sym)] = _UNKNOWN
            return
        if m.all():
            env[id(sym)] = val
        elif old is _UNKNOWN:
            env[id(sym)] = _UNKNOWN
        else:
            new = np.where(m, np.broadcast_to(val, (self.T,)), np.broadcast_to(old, (self.T,)))
            env[id(sym)] = np.asarray(new[0]) if np.all(new == new[0]) else new

    def _while(self, s, env, m, alive, frames):
        frame = _Frame(self.T)
        while True:
            try:
                c = np.broadcast_to(np.asarray(self.ev(s.cond, env), bool), (self.T,))
            except Unknown:
                self._unknown_block(s.body)
                return
            inside = self._active(m & c, alive, frames) & ~frame.broken
            if not inside.any():
                return
            self._turns += 1
            if self._turns > MAX_TURNS:
                raise _Stop()
            frame.cont[:] = False
            self._block(s.body, env, inside, alive, frames + [frame])

    def _unknown_block(self, body):
        for s in ir.walk_stmts(body):
            if isinstance(s, (ir.Assign, ir.Atomic)):
                tgt = s.target
                if isinstance(tgt, (ir.Slice, ir.Element)) and tgt.base.kind == "tensor":
                    self.complete = False

    def _for(self, s, env, m, alive, frames):
        try:
            lo = np.broadcast_to(np.asarray(self.ev(s.lo, env)).astype(np.int64), (self.T,))
            hi = np.broadcast_to(np.asarray(self.ev(s.hi, env)).astype(np.int64), (self.T,))
        except Unknown:
            self._unknown_block(s.body)
            return
        frame = _Frame(self.T)
        k = 0
        while True:
            val = lo + k * s.step
            inside = m & (val < hi) & ~frame.broken
            if not inside.any():
                break
            self._turns += 1
            if self._turns > MAX_TURNS:
                raise _Stop()
            frame.cont[:] = False
            env[id(s.var)] = val if not np.all(val == val[0]) else np.asarray(val[0])
            self._block(s.body, env, inside, alive, frames + [frame])
            k += 1
        env.pop(id(s.var), None)

    def _record(self, stmt, target, env, mask, atomic):
        if len(self.instances) >= MAX_INSTANCES:
            raise _Stop()
        snapshot = dict(env)
        try:
            if isinstance(target, ir.Slice):
                win = []
                for sub in target.subs:
                    if isinstance(sub, ir.SubIndex):
                        v = np.asarray(self.ev(sub.index, env))
                        if v.ndim:
                            raise Unknown("varying index")
                        win.append((int(v), None))
                    else:
                        v = np.asarray(self.ev(sub.start, env))
                        if v.ndim:
                            raise Unknown("varying start")
                        win.append((int(v), int(sub.length)))
                inst = Instance(stmt, self._order, snapshot["cta"], snapshot, win, None, mask.copy(), atomic)
            else:
                idx = [np.broadcast_to(np.asarray(self.ev(i, env)).astype(np.int64), (self.T,)).copy()
                       for i in target.indices]
                inst = Instance(stmt, self._order, snapshot["cta"], snapshot, None, idx, mask.copy(), atomic)
        except Unknown:
            self.complete = False
            return
        self._order += 1
        self.instances.append(inst)

    # ---- what the stores cover -------------------------------------------------------------------
    def stores_of(self, tensor: str) -> List[Instance]:
        return [i for i in self.instances if (i.stmt.target.base.name == tensor)]

    def store_statements(self, tensor: str) -> list:
        """Every statement of the kernel that stores into (or atomically updates) `tensor`."""
        out = []
        for s in ir.walk_stmts(self.kir.body):
            tgt = getattr(s, "target", None)
            if isinstance(s, (ir.Assign, ir.Atomic)) and isinstance(tgt, (ir.Slice, ir.Element)) \
                    and tgt.base.kind in ("tensor", "view") and _root(tgt.base, self.views).name == tensor:
                out.append(s)
        return out

    def covered(self, tensor: str, shape: Tuple[int, ...]) -> np.ndarray:
        """int32 array of `shape`: the index (into self.instances) of the last store instance whose
        window or element address covers each element, -1 where none does."""
        last = np.full(shape, -1, np.int32)
        for k, inst in enumerate(self.instances):
            if inst.stmt.target.base.name != tensor:
                continue
            if inst.window is not None:
                box = []
                empty = False
                for (start, length), n in zip(inst.window, shape):
                    if length is None:
                        if not 0 <= start < n:
                            empty = True
                        box.append(slice(start, start + 1))
                    else:
                        a, b = max(0, start), min(n, start + length)
                        if a >= b:
                            empty = True
                        box.append(slice(a, b))
                if not empty:
                    last[tuple(box)] = k
            else:
                idx = inst.indices
                ok = inst.mask.copy()
                for i, n in zip(idx, shape):
                    ok &= (i >= 0) & (i < n)
                if ok.any():
                    last[tuple(i[ok] for i in idx)] = k
        return last

    def owner(self, inst: Instance, coord: Tuple[int, ...]) -> Owner:
        stmt = inst.stmt
        text = self.text(stmt)
        line = self.line(stmt)
        if inst.window is not None:
            pos = tuple(c - s for (s, n), c in zip(inst.window, coord) if n is not None)
            plan = self.plans.get(id(stmt))
            if plan is None or not pos:
                return Owner(inst.cta, None, line, text, pos or None)
            r, c = as_2d(tuple(n for _, n in inst.window if n is not None))
            rr, cc = (0, pos[0]) if len(pos) == 1 else pos
            shape = plan.shape
            if tuple(shape) != (r, c):
                return Owner(inst.cta, None, line, text, pos)
            vec = plan.vector_width
            th = int(owners(shape, vec, self.T)[rr, cc])
            return Owner(inst.cta, th, line, text, pos, (rr, cc - cc % vec, vec), inst.atomic)
        hit = inst.mask.copy()
        for i, c in zip(inst.indices, coord):
            hit &= i == c
        threads = tuple(int(t) for t in np.nonzero(hit)[0])
        return Owner(inst.cta, threads[-1] if threads else None, line, text, None, None, inst.atomic, threads)

    # ---- why a stored value is invalid -------------------------------------------------------------
    def why_invalid(self, inst: Instance, coord: Tuple[int, ...]) -> Optional[Invalid]:
        """The operand that makes the value of tile store `inst` invalid at tensor element `coord`
        (None: valid there as far as the replay can tell, or unknown): `runtime.cpu.unwritten.why_invalid`,
        which a debug launch uses too, with the replay's scalars of that store instance."""
        if inst.window is None:
            return None
        pos = tuple(c - s for (s, n), c in zip(inst.window, coord) if n is not None)
        value = inst.stmt.value
        shape = tuple(n for _, n in inst.window if n is not None)
        return why_invalid(self.origins, value, fit(pos, shape, value), self.position[id(inst.stmt)],
                           _ReplayReader(self, inst.env))

    def _extents(self, sym) -> Tuple[int, ...]:
        return tuple(d if isinstance(d, int) else self.dims[d] for d in sym.type.dims)


class _Stop(Exception):
    pass


_UNKNOWN = object()      # a scalar var whose value the replay cannot know


def _root(sym, views):
    return root_tensor(sym, views)


class _ReplayReader:
    """The replay's view of one store instance for `why_invalid`: its scalars, its tensors' extents."""

    def __init__(self, trace: Trace, env):
        self.t, self.env = trace, env

    def scalar(self, e):
        v = np.asarray(self.t.ev(e, self.env))
        if v.ndim:
            raise Unknown("varying")
        return int(v)

    def extents(self, sym):
        return self.t._extents(sym)

    def text(self, node):
        return self.t.text(node)

    def line(self, node):
        return self.t.line(node)
