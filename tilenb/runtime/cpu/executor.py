"""The CPU reference executor: runs a kernel's typed IR with the language's exact semantics.

This is the living definition of what a kernel means; the CUDA backend is tested against it.

Execution model. Every CTA of the grid (x fastest, then y, then z) runs the body with
`kir.threads` threads; ctx gives block.*, grid.*, thread, threads, warp = thread / 32 and
lane = thread % 32. CTAs are executed in batches of B at once (independent CTAs cannot observe
each other's order), and the threads of a CTA in lockstep, as vectorized lanes:

* Tile statements (tile declarations, tile assignments, slice stores) run once per CTA over
  whole tiles (numpy arrays with a leading batch axis), each tile carrying its valid region.
* Per-thread code (scalar vars, element reads and writes, if/for/while on per-thread values)
  runs on every thread at once under a boolean mask of the threads that are active.
  `break` masks a thread out for the rest of its loop. A `for` keeps turning while any of its
  threads still has turns left (the broken ones ride along as no-ops); a `while` re-tests its
  condition each turn and ends when no thread is left in it. `continue` masks a thread out for
  the rest of the turn; `return` for the rest of the kernel. A `for`'s bounds are evaluated once,
  on entry. `for<unroll n>` runs exactly the iterations of the plain loop.
* barrier() synchronizes the CTA: a no-op in lockstep, but debug mode checks races per barrier
  interval, the intervals the GPU code has: ended by barrier() and by the barriers the compiler
  places (tilenb.runtime.cpu.debug).
* Several threads storing to one element in one statement: the highest thread of the last CTA
  wins. Atomics (add, max on one tensor element) are applied one lane at a time, in CTA then
  thread order, each rounded to the tensor's type; a tile atomic (into a tensor slice) applies
  each element valid in its value and inside the tensor once per CTA, in CTA order.

Numeric semantics are in `values`, memory (tensors, tiles, windows, views) in `memory`.

Errors: `run_cpu` raises the debug errors of `debug` (RaceError, OutOfBoundsError) in
debug mode; any internal failure is reported as a TileError naming
the source line being executed, never as a bare Python exception.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import numpy as np

from ... import ir
from ...lang.diagnostics import TileError
from ...types import DTYPES, operand_dtype
from . import debug as D
from .unwritten import EdgeRecorder, Unknown
from .memory import (TensorRef, TileStore, Window, atomic_window, element_address, lanes_of, linear,
                         read_element, read_window, sub_window, whole_window, window_positions,
                         write_element, write_window, base_extents, base_array)
from .values import (TileVal, arith, as_compute, broadcast_region, combine_regions, compare,
                         const_value, convert, dot_tiles, full_region, math1, math2, npdt,
                         reduce_tile, region_mask, store_cast, tile_data, transpose_tile)

# CTAs per batch: enough to amortize the per-statement cost, few enough to bound memory.
MAX_BATCH = 2048
BATCH_BYTES = 64 << 20
DEBUG_BATCH = 32


@dataclass(frozen=True)
class CpuStats:
    """What a CPU run reports: grid, threads per CTA, CTAs run, batch size and seconds; with
    debug, `notes`: what stores left unwritten (tilenb.runtime.cpu.unwritten.EdgeRecorder.notes)."""
    grid: Tuple[int, int, int]
    threads: int
    ctas: int
    batch: int
    seconds: float
    notes: Tuple[str, ...] = ()


class _Frame:
    __slots__ = ("kind", "broken", "cont")

    def __init__(self, kind, nb):
        self.kind = kind
        self.broken = np.zeros((nb, 1), bool)
        self.cont = np.zeros((nb, 1), bool)


def _any_cta(m, nb):
    m = np.asarray(m)
    if m.ndim == 0:
        return np.full(nb, bool(m))
    if m.shape[1] == 1:
        return np.broadcast_to(m[:, 0], (nb,))
    return np.broadcast_to(m, (nb, m.shape[1])).any(axis=1)


def _cta_vec(v):
    """A uniform scalar value as one int64 per CTA: () stays (), (B or 1, k) -> column 0."""
    a = np.asarray(v)
    if a.ndim == 0:
        return a.astype(np.int64)
    col = a[:, 0].astype(np.int64)
    return col[0] if col.shape[0] == 1 else col


def _is_uniform(v):
    return np.ndim(v) == 0 or np.shape(v)[1] == 1


def batch_size(kir: ir.KernelIR, total: int) -> int:
    """CTAs executed together: bounded by MAX_BATCH and by BATCH_BYTES of tile data."""
    per_cta = 4096 + 256 * kir.threads
    for sym in kir.tiles():
        per_cta += 6 * sym.type.size * max(4, npdt(sym.type.dtype).itemsize)
    return int(max(1, min(total, MAX_BATCH, BATCH_BYTES // per_cta)))


def run_cpu(kir: ir.KernelIR, dims: Dict[str, int], tensors: Dict[str, np.ndarray],
            scalars: Dict[str, object], grid: Tuple[int, int, int], debug: bool = False,
            source=None, batch: Optional[int] = None) -> CpuStats:
    """Run every CTA of `grid` ((x, y, z) CTA counts) on host arrays, in place.

    dims: runtime dim name -> extent; tensors: parameter name -> C-contiguous numpy array of
    the parameter's dtype; scalars: parameter name -> numpy scalar of its type. `source`:
    (lines, line_offset, filename) for debug reports. Raises RaceError / OutOfBoundsError
    (debug only) and TileError for internal failures. With debug, the stats' `notes` say which
    elements tile stores left unwritten and why (nothing is raised for them).
    """
    t0 = time.perf_counter()
    ex = _Executor(kir, dims, tensors, scalars, grid, debug, source)
    total = grid[0] * grid[1] * grid[2]
    nb = batch or batch_size(kir, total)
    if debug and not batch:
        nb = min(nb, DEBUG_BATCH)      # the race records take 24 bytes per tile element per CTA
    K = kir.cluster
    nb = max(K, nb // K * K)           # whole clusters per batch (grid x is a multiple of K)
    with np.errstate(all="ignore"):
        for c0 in range(0, total, nb):
            ex.run_batch(c0, min(nb, total - c0))
    notes = ex.edges.notes() if ex.edges is not None else ()
    return CpuStats(tuple(grid), kir.threads, total, nb, time.perf_counter() - t0, notes)


def eval_uniform(kir: ir.KernelIR, expr, dims: Dict[str, int], scalars: Dict[str, object]):
    """Evaluate a uniform scalar expression (an @grid entry) over dims and scalar params."""
    ex = _Executor(kir, dims, {}, scalars, (1, 1, 1), False, None)
    with np.errstate(all="ignore"):
        ex.setup_batch(0, 1)
        v = ex.ev(expr, ex.all_act)
    return np.asarray(v).reshape(-1)[0].item()


class _Executor:
    def __init__(self, kir, dims, tensors, scalars, grid, debug, source):
        self.kir = kir
        self.N = kir.threads
        self.grid = tuple(grid)
        self.debug = debug
        self.base_env = {}
        for p in kir.params:
            s = p.sym
            if s.kind == "tensor":
                if s.name in tensors:
                    self.base_env[s] = TensorRef(s.name, tensors[s.name], s.type.dtype)
            else:
                self.base_env[s] = const_value(scalars[s.name], s.type.dtype) if s.name in scalars else None
        for name, s in kir.dims.items():
            self.base_env[s] = np.int64(dims[name])
        self.consts = {}
        # debug: the statements the compiler places barriers before, and within or after
        self.bar_before, self.bar_after = D.barrier_points(kir) if debug else (set(), set())
        lines, offset, filename = source if source is not None else (None, 0, "<cell>")
        self.dbg = D.DebugContext(kir.name, lines, offset, filename, self._cta_coords)
        # debug: what each tile store into a tensor leaves unwritten (tilenb.runtime.cpu.unwritten)
        self.edges = EdgeRecorder(kir, lines, offset, grid, {k: v.shape for k, v in tensors.items()}) \
            if debug else None
        self.span = None
        self.EV = {
            ir.Const: self._const, ir.Ref: self._ref, ir.Ctx: self._ctx, ir.Unary: self._unary,
            ir.Binary: self._binary, ir.Math: self._math, ir.Convert: self._convert,
            ir.Reduce: self._reduce, ir.Dot: self._dot, ir.Transpose: self._transpose,
            ir.Slice: self._slice, ir.Element: self._element,
        }
        self.EX = {
            ir.Let: self._let, ir.VarDecl: self._vardecl, ir.Assign: self._assign, ir.For: self._for,
            ir.While: self._while, ir.If: self._if, ir.Break: self._break, ir.Continue: self._continue,
            ir.Return: self._return, ir.Barrier: self._barrier, ir.Atomic: self._atomic,
            ir.ClusterReduce: self._cluster_reduce,
        }

    # ---- batches --------------------------------------------------------------------------
    def _cta_coords(self, b):
        c = self.c0 + b
        gx, gy, _ = self.grid
        return c % gx, (c // gx) % gy, c // (gx * gy)

    def setup_batch(self, c0, nb):
        self.c0, self.nb = c0, nb
        N = self.N
        c = np.arange(c0, c0 + nb, dtype=np.int64)
        gx, gy, gz = self.grid
        thread = np.arange(N, dtype=np.int64).reshape(1, N)
        self.ctx = {
            "block.x": (c % gx).reshape(nb, 1), "block.y": ((c // gx) % gy).reshape(nb, 1),
            "block.z": (c // (gx * gy)).reshape(nb, 1),
            "grid.x": np.int64(gx), "grid.y": np.int64(gy), "grid.z": np.int64(gz),
            "thread": thread, "threads": np.int64(N), "warp": thread // 32, "lane": thread % 32,
            "cluster.rank": ((c % gx) % self.kir.cluster).reshape(nb, 1),
            "cluster.x": ((c % gx) // self.kir.cluster).reshape(nb, 1),
        }
        self.env = dict(self.base_env)
        self.returned = np.zeros((nb, 1), bool)
        self.frames = []
        self.epoch = 0
        self.all_act = np.ones((nb, 1), bool)
        self.stores = {}          # debug: the live store of each tile Sym
        self.tensor_shadows = {}  # debug: tensor name -> its access records (debug.Shadow)

    def run_batch(self, c0, nb):
        self.setup_batch(c0, nb)
        try:
            self.block(self.kir.body, self.all_act, np.ones(nb, bool))
        except TileError:
            raise
        except Exception as e:  # an executor bug must still reach the user as a TileError
            line = self.span.line + self.dbg.line_offset if self.span is not None else "?"
            raise TileError(f"internal error in the CPU executor running kernel '{self.kir.name}' at "
                            f"line {line}: {type(e).__name__}: {e}") from e

    # ---- statements -----------------------------------------------------------------------
    def _dead(self):
        d = self.returned
        if self.frames:
            f = self.frames[-1]
            d = d | f.broken | f.cont
        return d

    def block(self, body, act, cta):
        epoch = self.epoch
        base_act, base_cta = act, cta
        for s in body:
            if self.epoch != epoch:
                epoch = self.epoch
                act = base_act & ~self._dead()
                cta = base_cta & _any_cta(act, self.nb)
                if not cta.any():
                    return
            self.span = s.span
            if self.debug:
                if id(s) in self.bar_before:
                    self._sync(s, "a compiler barrier", cta)    # the GPU code's barriers
                self.EX[type(s)](s, act, cta)
                if id(s) in self.bar_after:
                    self._sync(s, "a compiler barrier", cta)
            else:
                self.EX[type(s)](s, act, cta)

    def _let(self, s, act, cta):
        sym = s.sym
        if sym.kind == "view":
            self.env[sym] = self._view_of(s.value, act)
        elif isinstance(sym.type, ir.TileT):
            store = TileStore(sym, self.nb)
            self._assign_whole(store, self.ev(s.value, act), s.value.type.dtype, None)
            self.env[sym] = store
            self._track(store)
        else:
            v = self.ev(s.value, act)
            self.env[sym] = store_cast(np.asarray(v), s.value.type.dtype, sym.type.dtype)

    def _vardecl(self, s, act, cta):
        sym = s.sym
        if isinstance(sym.type, ir.TileT):
            store = TileStore(sym, self.nb)
            if s.value is not None:
                self._assign_whole(store, self.ev(s.value, act), s.value.type.dtype, None)
            self.env[sym] = store
            self._track(store)
        elif s.value is None:
            self.env[sym] = np.zeros((), npdt(sym.type.dtype))
        else:
            v = self.ev(s.value, act)
            self.env[sym] = store_cast(np.asarray(v), s.value.type.dtype, sym.type.dtype)

    def _combine(self, op, target_node, cur, value_node, val):
        """cur op val for `target op= value`; returns (result, its IR dtype)."""
        ta, tb = target_node.type.dtype, value_node.type.dtype
        dt = operand_dtype(ta, tb, False, isinstance(value_node, ir.Const))
        shape = None
        if isinstance(target_node.type, ir.TileT):
            shape = target_node.type.shape
        return self._arith(op, cur, val, dt, shape), dt

    def _assign(self, s, act, cta):
        t = s.target
        if isinstance(t, ir.Ref):
            sym = t.sym
            val = self.ev(s.value, act)
            vdt = s.value.type.dtype
            if isinstance(sym.type, ir.TileT):
                store = self.env[sym]
                if s.op is not None:
                    val, vdt = self._combine(s.op, t, TileVal(store.data, store.region), s.value, val)
                self._assign_whole(store, val, vdt, cta)
            else:
                old = self.env[sym]
                if s.op is not None:
                    val, vdt = self._combine(s.op, t, old, s.value, val)
                new = store_cast(np.asarray(val), vdt, sym.type.dtype)
                self.env[sym] = new if act.all() else np.where(act, new, old)
        elif isinstance(t, ir.Slice):
            win = self._window(t, act)
            val = self.ev(s.value, act)
            vdt = s.value.type.dtype
            if s.op is not None:
                val, vdt = self._combine(s.op, t, read_window(win, self.nb), s.value, val)
            if self.edges is not None and not win.is_tile:
                self._note_store(s, win, val, act, cta)
            write_window(win, val, vdt, cta, self.nb)
        else:  # Element: one element per thread
            addr = self._address(t, act)
            val = self.ev(s.value, act)
            vdt = s.value.type.dtype
            if s.op is not None:
                cur = self._read_element(t, addr, act)
                val, vdt = self._combine(s.op, t, cur, s.value, val)
            val = store_cast(np.asarray(val), vdt, t.type.dtype)
            uniform = _is_uniform(act) and _is_uniform(val) and all(_is_uniform(i) for i in addr.index)
            if self.debug:
                self._debug_access(t, addr, act, True, uniform)
            write_element(addr, val, act, self.nb, self.N, uniform)

    def _assign_whole(self, store: TileStore, val, vdt, cta):
        """`t = e`: t takes e's data and valid region, broadcast to t's shape (CTAs in cta)."""
        shape = store.shape
        data = store_cast(np.asarray(tile_data(val, len(shape))), vdt, store.dtype)
        region = None
        if isinstance(val, TileVal) and val.region is not None:
            region = broadcast_region(val.region, val.shape, shape)
            lo, hi = region
            if lo.shape[0] != self.nb:
                region = (np.broadcast_to(lo, (self.nb,) + lo.shape[1:]).copy(),
                          np.broadcast_to(hi, (self.nb,) + hi.shape[1:]).copy())
        if cta is None or cta.all():
            store.data[...] = data
            store.region = region
            return
        full = np.broadcast_to(data, store.data.shape)
        store.data[cta] = full[cta]
        if region is None and store.region is None:
            return
        new = region if region is not None else full_region(self.nb, shape)
        old = store.region if store.region is not None else full_region(self.nb, shape)
        c = cta[:, None]
        store.region = (np.where(c, new[0], old[0]), np.where(c, new[1], old[1]))

    def _for(self, s, act, cta):
        lo = np.asarray(self.ev(s.lo, act)).astype(np.int64)
        hi = np.asarray(self.ev(s.hi, act)).astype(np.int64)
        step = s.step
        frame = _Frame("for", self.nb)
        self.frames.append(frame)
        i = lo
        try:
            while True:
                turn = act & (i < hi) & ~self.returned & ~frame.broken
                cta_t = cta & _any_cta(turn, self.nb)
                if not cta_t.any():
                    break
                if frame.cont.any():
                    frame.cont = np.zeros((self.nb, 1), bool)
                self.env[s.var] = i
                self.block(s.body, turn, cta_t)
                i = i + step
        finally:
            self.frames.pop()
        self.epoch += 1

    def _while(self, s, act, cta):
        frame = _Frame("while", self.nb)
        self.frames.append(frame)
        try:
            while True:
                a = act & ~self.returned & ~frame.broken
                if not a.any():
                    break
                if frame.cont.any():
                    frame.cont = np.zeros((self.nb, 1), bool)
                self.span = s.span
                a = a & self.ev(s.cond, a)
                cta_t = cta & _any_cta(a, self.nb)
                if not cta_t.any():
                    break
                self.block(s.body, a, cta_t)
        finally:
            self.frames.pop()
        self.epoch += 1

    def _if(self, s, act, cta):
        c = self.ev(s.cond, act)
        then_act = act & c
        then_cta = cta & _any_cta(then_act, self.nb)
        if then_cta.any():
            self.block(s.then, then_act, then_cta)
        if s.orelse:
            else_act = act & ~c
            else_cta = cta & _any_cta(else_act, self.nb)
            if else_cta.any():
                self.block(s.orelse, else_act, else_cta)

    def _break(self, s, act, cta):
        f = self.frames[-1]
        f.broken = f.broken | act
        self.epoch += 1

    def _continue(self, s, act, cta):
        f = self.frames[-1]
        f.cont = f.cont | act
        self.epoch += 1

    def _return(self, s, act, cta):
        self.returned = self.returned | act
        self.epoch += 1

    def _barrier(self, s, act, cta):
        if self.debug:
            self._sync(s, "barrier()", cta)

    def _cluster_reduce(self, s, act, cta):
        """cluster_sum / max / min of a tile var: the batch holds whole clusters of K CTAs in
        rank order (run_cpu aligns it); each copy's invalid elements count as the identity, the
        copies combine rank 0 first, and each CTA takes the result where its own copy is valid."""
        if self.debug:
            self._sync(s, "a cluster barrier", cta)
        store = self.env[s.target.sym]
        K, nb = self.kir.cluster, self.nb
        data = store.data
        ident = {"sum": 0.0, "max": -np.inf, "min": np.inf}[s.op]
        valid = region_mask(store.region, store.shape)   # (batch, *shape) or None: all valid
        vals = data if valid is None else np.where(valid, data, data.dtype.type(ident))
        vals = vals.reshape((nb // K, K) + store.shape)
        acc = np.full((nb // K,) + store.shape, ident, data.dtype)
        fn = {"sum": np.add, "max": np.fmax, "min": np.fmin}[s.op]
        for r in range(K):            # rank order, as every CTA combines them on the GPU
            acc = fn(acc, vals[:, r])
        out = np.repeat(acc, K, axis=0)
        store.data[...] = out if valid is None else np.where(valid, out, data)
        if self.debug:
            self._sync(s, "a cluster barrier", cta)

    def _atomic(self, s, act, cta):
        t = s.target
        if isinstance(t, ir.Slice):      # a tile atomic: each valid element once, CTA by CTA
            win = self._window(t, act)
            val = self.ev(s.value, act)
            if self.edges is not None:
                self._note_store(s, win, val, act, cta)
            atomic_window(win, val, s.value.type.dtype, s.op, cta, self.nb)
            return
        addr = self._address(t, act)
        val = store_cast(np.asarray(self.ev(s.value, act)), s.value.type.dtype, t.type.dtype)
        if self.debug:
            self._debug_access(t, addr, act, True, False, atomic=True)
        idx, vals, cta_ids, _ = lanes_of(addr, val, act, self.nb, self.N)
        if len(vals) == 0:
            return
        dst = base_array(addr.base, addr.flat).reshape(-1)
        lin = linear(addr, idx, cta_ids)
        if s.op == "add":
            np.add.at(dst, lin, vals)
        elif DTYPES[t.type.dtype].is_float:
            np.fmax.at(dst, lin, vals)
        else:
            np.maximum.at(dst, lin, vals)

    # ---- debug ------------------------------------------------------------------------------
    def _note_store(self, s, win, val, act, cta):
        """Debug: hand a tile store into a tensor window to the EdgeRecorder (the elements inside
        the window and the tensor, those the store writes, and a scalar evaluator per CTA)."""
        inside, index = window_positions(win, None, self.nb, cta)
        written, _ = window_positions(win, val, self.nb, cta)
        nb = self.nb

        def scalar_of(b):
            def scalar(e):
                saved, self.debug = self.debug, False     # a replay: no race or bounds records
                try:
                    v = np.asarray(self.ev(e, act))
                except Exception as err:
                    raise Unknown(str(err)) from None
                finally:
                    self.debug = saved
                if v.ndim == 0:
                    return int(v)
                row = v[b] if v.shape[0] == nb else v[0]
                if row.size > 1 and not np.all(row == row.reshape(-1)[0]):
                    raise Unknown("a per-thread value")
                return int(row.reshape(-1)[0])
            return scalar

        self.edges.store(s, win, inside, written, index, scalar_of)

    def _sync(self, s, what, cta):
        """A barrier: the race records of the CTAs in `cta` start afresh."""
        for st in self.stores.values():
            if st.shadow is not None:
                st.shadow.reset(cta)
        for sh in self.tensor_shadows.values():
            sh.reset(cta)

    def _track(self, store):
        if self.debug:
            self.stores[store.sym] = store

    def _debug_access(self, node, addr, act, write, uniform, atomic=False):
        """Out-of-bounds and race checks of one per-thread element access (debug launches)."""
        nb, N = self.nb, self.N
        if write and uniform:
            # one write per CTA, by every active thread (lane 0 stands for them)
            full = (nb, 1)
            m = _any_cta(act, nb)[:, None]
            first = np.argmax(np.broadcast_to(act, (nb, N)), axis=1)[:, None]
            threads_full = first
            index = [np.broadcast_to(np.asarray(ix)[:, :1] if np.ndim(ix) == 2 else ix, full) for ix in addr.index]
            inside = addr.inside
            if inside is not None and np.ndim(inside) == 2:
                inside = np.asarray(inside)[:, :1]
        else:
            full = (nb, N)
            m = np.broadcast_to(act, full)
            threads_full = np.broadcast_to(np.arange(N, dtype=np.int64)[None, :], full)
            index = [np.broadcast_to(ix, full) for ix in addr.index]
            inside = addr.inside
        m = np.broadcast_to(m, full)
        if inside is not None:
            ins = np.broadcast_to(inside, full)
            out = m & ~ins
            if out.any():
                ctas, th = np.nonzero(out)
                coords = ", ".join(str(int(ix[ctas[0], th[0]])) for ix in index)
                tid = np.broadcast_to(threads_full, full)[out]
                self._report_oob(node, addr, coords, ctas, tid, write)
            m = m & ins
        store = addr.base
        if isinstance(store, TileStore):
            if store.shadow is None:
                store.shadow = D.Shadow(nb, int(np.prod(store.shape)))
            shadow, shape = store.shadow, store.shape
        else:           # a tensor: races within a CTA through global memory
            shape = tuple(store.array.shape)
            shadow = self.tensor_shadows.get(store.name)
            if shadow is None:
                shadow = self.tensor_shadows[store.name] = D.Shadow(nb, int(np.prod(shape)), "tensor")
        ext = base_extents(store, addr.flat)
        pos = np.zeros(full, np.int64)
        for ix, e in zip(index, ext):
            pos = pos * e + ix
        ctas, _ = np.nonzero(m)
        p = pos[m]
        if write and uniform:
            D.check_uniform_write(self.dbg, node.span, shadow, store.name, shape, ctas, p)
            return
        tids = np.broadcast_to(threads_full, full)[m]
        if write:
            D.check_writes(self.dbg, node.span, shadow, store.name, shape, ctas, tids, p, atomic=atomic)
        else:
            D.check_reads(self.dbg, node.span, shadow, store.name, shape, ctas, tids, p)

    def _report_oob(self, node, addr, coords, ctas, threads, write):
        base = addr.base
        kind = "tensor" if isinstance(base, TensorRef) else "tile"
        ext = ", ".join(str(e) for e in base_extents(base, addr.flat))
        bname = ("flat(" + base.name + ")") if addr.flat else base.name
        if addr.view:
            inside_base = all(0 <= int(c) < e for c, e in zip(coords.split(", "), base_extents(base, addr.flat)))
            where = (f"{kind} {bname}[{coords}] through the view '{node.base.name}', outside "
                     + ("the view's window" if inside_base else f"its extent [{ext}]"))
        else:
            where = f"{kind} {bname}[{coords}], outside its extent [{ext}]"
        D.report_out_of_bounds(self.dbg, node.span, where, ctas, threads, write)

    # ---- windows and elements ---------------------------------------------------------------
    def _base(self, sym):
        return self.env[sym]

    def _window(self, sl: ir.Slice, act) -> Window:
        base = self._base(sl.base)
        subs = []
        for sub in sl.subs:
            if isinstance(sub, ir.SubIndex):
                subs.append((_cta_vec(self.ev(sub.index, act)), None))
            else:
                subs.append((_cta_vec(self.ev(sub.start, act)), sub.length))
        if not isinstance(base, Window):
            base = whole_window(base, sl.flat, base.name)
        return sub_window(base, subs)

    def _view_of(self, value, act) -> Window:
        if isinstance(value, ir.Slice):
            return self._window(value, act)
        base = self._base(value.sym)
        if isinstance(base, Window):
            return base
        return whole_window(base, False, base.name)

    def _address(self, el: ir.Element, act):
        base = self._base(el.base)
        idx = [np.asarray(self.ev(i, act)).astype(np.int64, copy=False) for i in el.indices]
        return element_address(base, idx, el.flat)

    def _read_element(self, node, addr, act):
        if self.debug:
            self._debug_access(node, addr, act, False, False)
        return read_element(addr, self.nb)

    # ---- expressions ------------------------------------------------------------------------
    def ev(self, e, act):
        return self.EV[type(e)](e, act)

    def _const(self, e, act):
        v = self.consts.get(id(e))
        if v is None:
            v = self.consts[id(e)] = const_value(e.value, e.type.dtype)
        return v

    def _ref(self, e, act):
        v = self.env[e.sym]
        if isinstance(v, TileStore):
            return TileVal(v.data, v.region)
        if isinstance(v, Window):
            return read_window(v, self.nb)
        return v

    def _ctx(self, e, act):
        return self.ctx[e.field]

    def _unary(self, e, act):
        x = self.ev(e.x, act)
        dt = e.type.dtype
        if e.op == "-":
            f = lambda d: np.negative(as_compute(d, dt))  # noqa: E731
        elif e.op == "!":
            f = np.logical_not
        else:
            f = lambda d: np.invert(as_compute(d, dt))  # noqa: E731
        if isinstance(x, TileVal):
            return TileVal(f(x.data), x.region)
        return f(x)

    def _arith(self, op, a, b, dt, shape):
        """a op b in IR type dt; shape: the result's tile shape (None for scalars)."""
        if shape is None:
            return arith(op, as_compute(a, dt), as_compute(b, dt), dt)
        rank = len(shape)
        data = arith(op, as_compute(tile_data(a, rank), dt), as_compute(tile_data(b, rank), dt), dt)
        return TileVal(data, combine_regions((a, b), shape))

    def _binary(self, e, act):
        op = e.op
        tile = isinstance(e.type, ir.TileT)
        shape = e.type.shape if tile else None
        if op in ("&&", "||"):
            a = self.ev(e.a, act)
            if not tile:
                # short-circuit: the right side runs only in lanes that need it
                sub = act & (a if op == "&&" else ~a)
                if not np.any(sub):
                    return a
                b = self.ev(e.b, sub)
                return (a & b) if op == "&&" else (a | b)
            b = self.ev(e.b, act)
            rank = len(shape)
            f = np.logical_and if op == "&&" else np.logical_or
            return TileVal(f(tile_data(a, rank), tile_data(b, rank)), combine_regions((a, b), shape))
        a = self.ev(e.a, act)
        b = self.ev(e.b, act)
        if op in ("==", "!=", "<", "<=", ">", ">="):
            dt = operand_dtype(e.a.type.dtype, e.b.type.dtype, isinstance(e.a, ir.Const), isinstance(e.b, ir.Const))
            if not tile:
                return compare(op, as_compute(a, dt), as_compute(b, dt))
            rank = len(shape)
            data = compare(op, as_compute(tile_data(a, rank), dt), as_compute(tile_data(b, rank), dt))
            return TileVal(data, combine_regions((a, b), shape))
        return self._arith(op, a, b, e.type.dtype, shape)

    def _math(self, e, act):
        fn = e.fn
        dt = e.type.dtype
        if fn in ("rows", "cols"):
            return self._index_tile(e, act)
        args = [self.ev(a, act) for a in e.args]
        tile = isinstance(e.type, ir.TileT)
        rank = len(e.type.shape) if tile else 0
        data = [tile_data(a, rank) if tile else a for a in args]
        if fn == "where":
            c, a, b = data
            out = np.where(c, as_compute(a, dt), as_compute(b, dt))
        elif len(args) == 1:
            out = math1(fn, as_compute(data[0], dt), dt)
        else:
            out = math2(fn, as_compute(data[0], dt), as_compute(data[1], dt), dt)
        if not tile:
            return out
        return TileVal(out, combine_regions(args, e.type.shape))

    def _index_tile(self, e, act):
        """rows(R, C, s) / cols(R, C, s): element (i, j) is s + i (s + j), in i32 (wrapping);
        wholly valid (spec section 10). s is uniform: one value per CTA."""
        R, Cc = e.type.shape
        start = np.asarray(tile_data(self.ev(e.args[0], act), 2)).astype(np.int64)
        idx = np.arange(R if e.fn == "rows" else Cc, dtype=np.int64)
        idx = idx.reshape((1, R, 1) if e.fn == "rows" else (1, 1, Cc))
        start = start.reshape((-1, 1, 1)) if start.ndim else start
        # wrap to i32 on the one varying axis, then broadcast without copying: an index tile
        # holds no bytes (spec section 10), so neither does its value here (a read-only view;
        # a var bound to it copies it, as it copies any expression)
        line = (start + idx).astype(np.int32)
        return TileVal(np.broadcast_to(line, (line.shape[0], R, Cc)), None)

    def _convert(self, e, act):
        x = self.ev(e.x, act)
        src, dst = e.x.type.dtype, e.type.dtype
        if isinstance(x, TileVal):
            return TileVal(convert(x.data, src, dst), x.region)
        return convert(x, src, dst)

    def _reduce(self, e, act):
        return reduce_tile(e.op, e.axis, self.ev(e.x, act), e.type.dtype)

    def _dot(self, e, act):
        return dot_tiles(self.ev(e.a, act), self.ev(e.b, act), e.trans_b, e.type.dtype)

    def _transpose(self, e, act):
        return transpose_tile(self.ev(e.x, act))

    def _slice(self, e, act):
        return read_window(self._window(e, act), self.nb)

    def _element(self, e, act):
        return self._read_element(e, self._address(e, act), act)

