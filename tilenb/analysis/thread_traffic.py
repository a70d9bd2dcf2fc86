"""Global-memory sectors and shared-memory wavefronts of per-thread element accesses (`X[i, j]` or
`buf[0, t]` read or written by each thread on its own), and the turns each CTA runs the lines of
its loops, for one launch.

The copy plans count the tile statements' tensor traffic; per-thread code moves single elements,
and which ones depends on each thread's indices, its loops and its branches, so it is counted here
for a whole launch: every thread of every CTA is followed through the kernel's per-thread code at
once (numpy arrays over the lanes), with the launch's runtime extents and scalar arguments.

- A thread runs a statement when every enclosing `if` condition holds for it and it is inside
  every enclosing `for` range; a `for` runs as many turns as its longest-running thread needs.
- Each evaluation of an element access by a warp whose threads run it is one request (one
  warp-wide load or store); its sectors are the distinct 32-byte sectors its active lanes' elements
  lie in (an element never straddles a sector: tensors are aligned and elements at most 16
  bytes). An `op=` store (`Y[i] += v`) reads the element and writes it: two requests.
- A per-thread atomic (`atomic_add(H[b], 1)`) is one read-modify-write request (RED/ATOM, done
  in L2) per warp with active lanes, its sectors counted as a load's. Where an index is a value
  read from memory (a histogram's bin), a request touches at least one sector and at most
  min(active lanes, the tensor's sectors): `ElementTraffic.sectors_upper` gives that range.
- An element of a tile of the kernel's own (a var or let tile that no tile statement also
  touches: tile statements may lay it out swizzled) is a shared-memory access: one request per
  warp with active lanes, its wavefronts by `layout.wavefronts_per_request` (32 banks of 4 bytes,
  row-major offsets; where the tile starts does not change one request's conflicts).
- `statement_turns` counts, per line inside a loop, how many times each CTA runs it (the copy
  plans' figures are per execution), and the CTAs whose every tensor slice stays inside its
  tensor at every turn.
- A `while` runs while its condition holds for some thread, each thread as long as it holds
  for it.
- Tile statements are left to the copy plans; a launch too large to follow (more than
  MAX_WORK lane-steps), a `break`, `continue` or `return`, or a tensor index,
  condition or loop bound from a value this following does not know (a var assigned from
  memory, a tensor element, a scalar argument not given) makes the whole answer unknown (None,
  with what stopped it), never a guess.

Guarantees: a pure function of the IR, the grid, the extents and the scalars; the figures are
whole-launch totals per source line (the lines the statement plans carry).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np

from .. import ir
from ..types import dtype

SECTOR = 32
MAX_TURNS = 1 << 16            # loop turns followed, all loops together, before giving up
MAX_WORK = 1 << 27             # lane-steps (lanes x loop turns) followed before giving up


class _Unknown(Exception):
    pass


class _FromMemory(Exception):
    """An index that is a value read from memory (its bounds are the tensor's, its value unknown)."""


@dataclass
class ElementTraffic:
    """One source line's per-thread element accesses over a launch: of tensors, `sectors` (32-byte
    sectors, summed over the requests; at least, where an index comes from memory) and
    `sectors_upper` (at most: the same unless an index is a value read from memory),
    `requests` (warp-wide accesses with at least one active lane), `tensors` (the tensors
    accessed, in the order met); of shared tiles, `wavefronts` (summed over the warp requests,
    `layout.wavefronts_per_request`), `shared_requests`, `tiles`."""
    line: int
    sectors: int = 0
    requests: int = 0
    tensors: Tuple[str, ...] = ()
    sectors_upper: Optional[int] = None
    wavefronts: int = 0
    shared_requests: int = 0
    tiles: Tuple[str, ...] = ()

    def __post_init__(self):
        if self.sectors_upper is None:
            self.sectors_upper = self.sectors


def element_sectors(kir: ir.KernelIR, grid, dims: Dict[str, int],
                    scalars: Optional[Dict[str, object]] = None,
                    why: Optional[List[str]] = None) -> Optional[Dict[int, ElementTraffic]]:
    """{line: ElementTraffic} for the per-thread tensor element accesses of one launch of `kir` over
    `grid` (x, y, z) with runtime extents `dims` and scalar arguments `scalars`; {} when the kernel
    has none, None when they cannot be followed exactly (see the module docstring), and then
    `why` (a list, if given) gets what stopped it, naming the line."""
    if not any(_has_element(s) for s in ir.walk_stmts(kir.body)):
        return {}
    try:
        return _Run(kir, grid, dims, scalars or {}).go()
    except _Unknown as e:
        if why is not None:
            why.append(str(e) or "a value the analysis does not follow")
        return None


def _has_element(s) -> bool:
    if isinstance(s, ir.Assign) and isinstance(s.target, ir.Slice):
        return False
    if isinstance(s, ir.Atomic) and not s.tile:
        return True
    return any(isinstance(x, ir.Element) and _followed(x)
               for e in ir.stmt_exprs(s) for x in ir.walk_expr(e))


@dataclass
class StatementTurns:
    """What following the loops of one launch gives: `lines` ({line: {turns: CTAs that run the
    line that many times}}, for the statement lines inside a loop; a line outside every loop runs
    once a CTA) and `full_ctas` (the CTAs whose every tensor slice, at every turn, lies wholly
    inside its tensor: those the copy plans' figures describe exactly)."""
    lines: Dict[int, Dict[int, int]]
    full_ctas: int


def statement_turns(kir: ir.KernelIR, grid, dims: Dict[str, int],
                    scalars: Optional[Dict[str, object]] = None) -> Optional[StatementTurns]:
    """How many times each CTA of one launch runs each statement line inside a loop, and which
    CTAs take every tensor slice inside its tensor (`StatementTurns`). The copy plans' figures
    are per CTA and per execution of the statement, so a copy inside `for k in range(0, K, TK)`
    moves its figure once a turn. None when the kernel has no loop (every line runs once a CTA:
    `count_full_ctas` of the profile tells the full CTAs) or where the loops cannot be followed
    for this launch (as `element_sectors`: a bound or a slice start from memory, an unknown
    scalar, too many lane-steps)."""
    if not any(isinstance(s, (ir.For, ir.While)) for s in ir.walk_stmts(kir.body)):
        return None
    try:
        run = _Run(kir, grid, dims, scalars or {})
        run.check_slices = True
        run.go()
    except _Unknown:
        return None
    out: Dict[int, Dict[int, int]] = {}
    for line, per in run.execs.items():
        if line not in run.looped:
            continue
        vals, counts = np.unique(per, return_counts=True)
        out[line] = {int(v): int(c) for v, c in zip(vals, counts)}
    return StatementTurns(out, int(np.count_nonzero(run.full)))


class _Run:
    def __init__(self, kir, grid, dims, scalars):
        g = tuple(int(x) for x in tuple(grid) + (1,) * (3 - len(tuple(grid))))
        T = int(kir.threads)
        n = g[0] * g[1] * g[2] * T
        lane = np.arange(n, dtype=np.int64)
        cta, t = lane // T, lane % T
        self.ctx = {"block.x": cta % g[0], "block.y": (cta // g[0]) % g[1], "block.z": cta // (g[0] * g[1]),
                    "grid.x": g[0], "grid.y": g[1], "grid.z": g[2], "thread": t, "threads": T,
                    "warp": t // 32, "lane": t % 32}
        self.warp = cta * (-(-T // 32)) + t // 32        # the warp of each lane, over the launch
        self.n = n
        self.dims, self.scalars = dims, scalars
        self.env: Dict[int, object] = {}
        self.turns = 0
        self.work = 0
        self.out: Dict[int, ElementTraffic] = {}
        self.body = kir.body
        self.cta = cta
        self.ctas = g[0] * g[1] * g[2]
        self.execs: Dict[int, np.ndarray] = {}       # line -> times each CTA ran it
        self.looped = set()                          # lines run inside a loop
        self.depth = 0
        self.check_slices = False                    # statement_turns: also which CTAs' slices are inside
        self.full = np.ones(self.ctas, dtype=bool)
        # tiles a tile statement also reads or writes: their layout (a swizzle) is the copy plans'
        self.tile_stmt_tiles = set()
        for st in ir.walk_stmts(kir.body):
            if isinstance(st, ir.Assign) and isinstance(st.target, ir.Slice) or isinstance(st, ir.Atomic) and st.tile:
                for e in ir.stmt_exprs(st):
                    for x in ir.walk_expr(e):
                        if isinstance(x, ir.Ref) and isinstance(x.type, ir.TileT):
                            self.tile_stmt_tiles.add(id(x.sym))
                        if isinstance(x, ir.Slice) and isinstance(x.base.type, ir.TileT):
                            self.tile_stmt_tiles.add(id(x.base))

    def go(self):
        self.block(self.body, np.ones(self.n, dtype=bool))
        return self.out

    # -- statements
    def block(self, body, mask):
        for s in body:
            if not mask.any():
                return
            self.stmt(s, mask)

    def stmt(self, s, mask):
        line = s.span.line
        per = self.execs.get(line)
        if per is None:
            per = self.execs[line] = np.zeros(self.ctas, dtype=np.int64)
        per += np.bincount(self.cta[mask], minlength=self.ctas) > 0
        if self.depth:
            self.looped.add(line)
        if self.check_slices and not isinstance(s, (ir.For, ir.While, ir.If)):
            self.slices_inside(s, mask, line)
        if isinstance(s, (ir.Break, ir.Continue, ir.Return)):
            raise _Unknown(f"the {type(s).__name__.lower()} at line {line}")
        if isinstance(s, ir.Atomic):
            if s.tile:
                return
            # a per-thread atomic on a tensor element: the index and value reads, then one
            # read-modify-write request (RED/ATOM, done in L2) per warp with active lanes
            self.touch(s.value, mask, line)
            for x in s.target.indices:
                self.touch(x, mask, line)
            self.access(s.target, mask, line)
            return
        if isinstance(s, ir.While):
            while True:
                c = np.broadcast_to(np.asarray(self.ev(s.cond, line), dtype=bool), (self.n,))
                act = mask & c
                if not act.any():
                    return
                self.turns += 1
                self.work += self.n
                if self.turns > MAX_TURNS or self.work > MAX_WORK:
                    raise _Unknown(f"the loop at line {line} runs too long to follow")
                self.touch(s.cond, act, line)
                self.depth += 1
                self.block(s.body, act)
                self.depth -= 1
        if isinstance(s, ir.Assign) and isinstance(s.target, ir.Slice):
            return                                    # a tile statement: the copy plans'
        if isinstance(s, (ir.Let, ir.VarDecl)):
            if s.value is not None:
                self.touch(s.value, mask, s.span.line)
            if isinstance(s.sym.type, ir.ScalarT) and s.value is not None:
                self.env[id(s.sym)] = self.value(s.value, mask)
            return
        if isinstance(s, ir.Assign):
            self.touch(s.value, mask, s.span.line)
            tgt = s.target
            if isinstance(tgt, ir.Element):
                for x in tgt.indices:
                    self.touch(x, mask, s.span.line)
                if _followed(tgt):
                    if s.op:
                        self.access(tgt, mask, s.span.line)
                    self.access(tgt, mask, s.span.line)
            elif isinstance(tgt, ir.Ref) and isinstance(tgt.type, ir.ScalarT):
                v = self.value(s.value, mask) if not s.op else _UNKNOWN
                old = self.env.get(id(tgt.sym), _UNKNOWN)
                self.env[id(tgt.sym)] = _merge(old, v, mask)
            return
        if isinstance(s, ir.If):
            self.touch(s.cond, mask, s.span.line)
            c = np.broadcast_to(np.asarray(self.ev(s.cond, s.span.line), dtype=bool), (self.n,))
            self.block(s.then, mask & c)
            self.block(s.orelse, mask & ~c)
            return
        if isinstance(s, ir.For):
            lo = np.broadcast_to(np.asarray(self.ev(s.lo, s.span.line), dtype=np.int64), (self.n,))
            hi = np.broadcast_to(np.asarray(self.ev(s.hi, s.span.line), dtype=np.int64), (self.n,))
            step = int(s.step)
            if step == 0:
                raise _Unknown(f"the loop at line {s.span.line} has step 0")
            k = 0
            while True:
                v = lo + k * step
                act = mask & ((v < hi) if step > 0 else (v > hi))
                if not act.any():
                    break
                self.turns += 1
                self.work += self.n
                if self.turns > MAX_TURNS or self.work > MAX_WORK:
                    raise _Unknown(f"the loop at line {s.span.line} runs too long to follow")
                self.env[id(s.var)] = v
                self.depth += 1
                self.block(s.body, act)
                self.depth -= 1
                k += 1
            return
        # barriers, cluster reductions: no element access

    def slices_inside(self, s, mask, line):
        """Clear `full` for the CTAs where a tensor slice of `s` reaches outside its tensor."""
        for e in ir.stmt_exprs(s):
            for x in ir.walk_expr(e):
                if type(x) is not ir.Slice or x.base.kind != "tensor":
                    continue
                inside = np.ones(self.n, dtype=bool)
                for sub, d in zip(x.subs, x.base.type.dims):
                    if isinstance(sub, ir.SubRange) and sub.full:
                        continue
                    if isinstance(sub, ir.SubRange):
                        lo, length = self.ev(sub.start, line), int(sub.length)
                    else:
                        lo, length = self.ev(sub.index, line), 1
                    lo = np.broadcast_to(np.asarray(lo, dtype=np.int64), (self.n,))
                    inside &= (lo >= 0) & (lo + length <= self.extent(d))
                self.full[np.unique(self.cta[mask & ~inside])] = False

    # -- element accesses
    def touch(self, e, mask, line):
        """Record the tensor element reads inside `e` (not those of tile expressions)."""
        for x in ir.walk_expr(e):
            if isinstance(x, ir.Element) and _followed(x):
                self.access(x, mask, line)

    def access(self, el: ir.Element, mask, line):
        if el.base.kind != "tensor":
            return self.shared_access(el, mask, line)
        dims = el.base.type.dims
        warp = self.warp[mask]
        if len(warp) == 0:
            return
        eb = dtype(el.base.type.dtype).itemsize
        try:
            off = self.offset(el, [self.extent(d) for d in dims], line)
        except _FromMemory:
            # an index read from memory (a histogram's bin): each request touches at least one
            # sector and at most one a lane, and no more than the tensor has
            size = 1
            for d in dims:
                size *= self.extent(d)
            whole = -(-size * eb // SECTOR)
            lanes = np.bincount(warp)
            lanes = lanes[lanes > 0]
            rec = self.out.setdefault(line, ElementTraffic(line))
            rec.sectors += int(len(lanes))
            rec.sectors_upper += int(np.minimum(lanes, whole).sum())
            rec.requests += int(len(lanes))
            if el.base.name not in rec.tensors:
                rec.tensors = rec.tensors + (el.base.name,)
            return
        off = np.broadcast_to(off, (self.n,))[mask]
        sec = (off * eb) // SECTOR
        span = int(sec.max() - sec.min()) + 1
        rec = self.out.setdefault(line, ElementTraffic(line))
        n = int(len(np.unique(warp * span + (sec - sec.min()))))
        rec.sectors += n
        rec.sectors_upper += n
        rec.requests += int(len(np.unique(warp)))
        if el.base.name not in rec.tensors:
            rec.tensors = rec.tensors + (el.base.name,)

    def offset(self, el: ir.Element, extents, line):
        """The element offsets (row-major over `extents`) of `el` for every lane; _FromMemory
        where an index is a value read from memory, _Unknown for anything else not followed."""
        if el.flat:
            return np.asarray(self.index(el.indices[0], line), dtype=np.int64)
        if len(el.indices) != len(extents):
            raise _Unknown(f"the element of {el.base.name} at line {line}")
        off = np.zeros((), dtype=np.int64)
        for ix, d in zip(el.indices, extents):
            off = off * int(d) + np.asarray(self.index(ix, line), dtype=np.int64)
        return off

    def index(self, e, line):
        if any(isinstance(x, ir.Element) for x in ir.walk_expr(e)):
            try:
                return self._ev(e)
            except _Unknown:
                raise _FromMemory from None
        return self.ev(e, line)

    def shared_access(self, el: ir.Element, mask, line):
        """One warp request per warp with active lanes, its wavefronts by the bank model (a tile
        that per-thread code subscripts by thread lives in shared memory, laid out row-major:
        the bank pattern of one request does not depend on where the tile starts, its start
        being aligned to its element)."""
        from .layout import wavefronts_per_request
        if id(el.base) in self.tile_stmt_tiles:
            return      # tile statements also access it: its layout (a swizzle) is the copy plans', not counted here
        shape = [int(x) for x in el.base.type.shape]
        try:
            off = self.offset(el, shape, line)
        except (_FromMemory, _Unknown):
            return      # an index this following does not know: not counted (the global figures stand)
        off = np.broadcast_to(off, (self.n,))[mask]
        warp = self.warp[mask]
        if len(warp) == 0:
            return
        eb = dtype(el.base.type.dtype).itemsize
        uniq, dense = np.unique(warp, return_inverse=True)
        lane = (self.ctx["thread"] % 32)[mask]
        wf = wavefronts_per_request(dense.astype(np.int64), lane, off * eb, eb)
        rec = self.out.setdefault(line, ElementTraffic(line))
        rec.wavefronts += int(wf.sum())
        rec.shared_requests += int(len(uniq))
        if el.base.name not in rec.tiles:
            rec.tiles = rec.tiles + (el.base.name,)

    def extent(self, d):
        if isinstance(d, int):
            return d
        if d in self.dims:
            return int(self.dims[d])
        raise _Unknown(f"the runtime dim {d} is not given")

    # -- values
    def value(self, e, mask):
        """The value of a scalar expression, or _UNKNOWN where this following cannot know it (an
        element read, a float computation it does not need)."""
        try:
            return self._ev(e)
        except _Unknown:
            return _UNKNOWN

    def ev(self, e, line):
        """The value of `e`, which an index, a condition or a loop bound needs: _Unknown naming
        what it depends on where this following cannot know it."""
        try:
            return self._ev(e)
        except _Unknown as x:
            raise _Unknown(f"line {line}: {x or 'a value the analysis does not follow'}") from None

    def _ev(self, e):
        ev = self._ev
        t = type(e)
        if t is ir.Const:
            if isinstance(e.value, (bool, int, np.integer, float)):
                return e.value
            raise _Unknown
        if t is ir.Ctx:
            if e.field not in self.ctx:
                raise _Unknown
            return self.ctx[e.field]
        if t is ir.Ref:
            sym = e.sym
            if sym.kind == "dim" and sym.name in self.dims:
                return int(self.dims[sym.name])
            if sym.kind == "scalar_param" and sym.name in self.scalars:
                return self.scalars[sym.name]
            v = self.env.get(id(sym), _UNKNOWN)
            if v is _UNKNOWN:
                what = {"var": "the var", "scalar_param": "the scalar argument", "dim": "the dim"}.get(sym.kind, "")
                raise _Unknown(f"{what} {sym.name}".strip() + " (its value is not followed)")
            return v
        if t is ir.Convert:
            v = ev(e.x)
            if e.type.dtype in _INTS:
                return np.trunc(np.asarray(v)).astype(np.int64)
            return v
        if t is ir.Unary:
            v = np.asarray(ev(e.x))
            if e.op == "-":
                return -v
            if e.op == "!":
                return ~v.astype(bool)
            if e.op == "~":
                return ~v
            raise _Unknown
        if t is ir.Binary:
            a, b = np.asarray(ev(e.a)), np.asarray(ev(e.b))
            op = e.op
            if op in _CMP:
                return _CMP[op](a, b)
            if op in ("&&", "||"):
                return (a.astype(bool) & b.astype(bool)) if op == "&&" else (a.astype(bool) | b.astype(bool))
            if op in ("+", "-", "*"):
                return a + b if op == "+" else a - b if op == "-" else a * b
            if op in ("/", "%"):
                if np.issubdtype(a.dtype, np.floating) or np.issubdtype(b.dtype, np.floating):
                    if op == "/":
                        return a / b
                    raise _Unknown
                if np.any(b == 0):
                    raise _Unknown
                q = np.trunc(a / b).astype(np.int64)            # the language truncates
                return q if op == "/" else a - q * b
            if op in ("&", "|", "^", "<<", ">>"):
                return {"&": np.bitwise_and, "|": np.bitwise_or, "^": np.bitwise_xor,
                        "<<": np.left_shift, ">>": np.right_shift}[op](a, b)
            raise _Unknown
        if t is ir.Math:
            args = [np.asarray(ev(x)) for x in e.args]
            if e.fn == "min" and len(args) == 2:
                return np.minimum(*args)
            if e.fn == "max" and len(args) == 2:
                return np.maximum(*args)
            if e.fn == "cdiv" and len(args) == 2:
                return -(-args[0] // args[1])
            if e.fn == "where" and len(args) == 3:
                return np.where(args[0].astype(bool), args[1], args[2])
            raise _Unknown
        if t is ir.Element:
            raise _Unknown(f"an element of {e.base.name} (a value read from memory)")
        raise _Unknown(f"a {t.__name__.lower()} value")   # tiles, reductions: values unknown


def _followed(el) -> bool:
    """An element access this following counts: of a tensor, or of a tile of the kernel's own (a
    var or let tile; a view's elements are its base's)."""
    return isinstance(el, ir.Element) and (el.base.kind == "tensor" or
                                           (el.base.kind in ("var", "let") and isinstance(el.base.type, ir.TileT)))


class _UnknownValue:
    def __repr__(self):
        return "unknown"


_UNKNOWN = _UnknownValue()
_INTS = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "index")
_CMP = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal,
        "!=": np.not_equal}


def _merge(old, new, mask):
    """A var's value after an assignment by the threads of `mask` (the others keep theirs)."""
    if new is _UNKNOWN or old is _UNKNOWN:
        return new if bool(np.all(mask)) else _UNKNOWN
    return np.where(mask, new, old)
