"""Shared-memory traffic outside the copy plans: what the tile statements read and write in shared
memory besides the tensor <-> tile moves of `tilenb.analysis.copies`, and which shared values the
code generator keeps in a register instead of re-reading them.

The copy plans count one shared side per tensor copy (the tile a load fills, the first tile of the
destination's shape a store reads). Everything else a statement does in shared memory is here, one
`SharedTraffic` record per (statement, tile, kind of access), each with its wavefronts per warp by
the same bank model as the copy plans (`layout.wavefronts_per_request`: 32 banks of 4 bytes,
phases of 32 / 16 / 8 lanes for 4 / 8 / 16-byte accesses):

- "reduction pass": a CTA-wide row reduction (`ownership` row_reductions, partials sized in
  `smem.SmemMap.partials`) reads its shared operand tiles, chunk k of V elements -> thread k % T,
  one V-element vector a chunk (a tile read twice, `rowsum(x * x)`, is read once a chunk);
- "broadcast in a pass": a shared tile the reduction's operand broadcasts along the row
  (`rowsum((x - mean) * (x - mean))`): where its element does not change along the row (an
  [R, 1] or [1, 1] tile) NVRTC hoists the load out of the unrolled chunk loop, so it is read once
  a row by every thread, one request per (row, warp) (the H200's layer_norm, f32 and bf16, show
  2,400 LDS over 300 CTAs of 8 warps, not one a chunk); a [1, C] tile is read once a chunk;
- "warp reduction pass": a row reduction the lanes of one warp share (`smem.identity_reductions`
  with no partials: the generator's cooperative sweep). Output o -> thread o % T; the warp's
  outputs take S lanes each (S the power of two at least the outputs it owns, at most 32), lane l
  reading column l / S + i * 32 / S of its output's row, one request per step i: the bank model
  gives the conflicts of rows that share banks (tutorial 04's center_rows, 8 rows of 64 f32: 8
  lanes a bank, 8 wavefronts a request, 16 requests a CTA, as the H200 counted); a tile the
  operand broadcasts along the reduced axis is read once per lane (the same hoisting as above,
  out of the lanes' loop; not yet measured on this path);
- "partials store": lane 0 of every warp stores the warp's partial of every row (one wavefront
  per (row, warp)); "partials load": the owner of output o reads the NW partials of its row, which
  NVRTC merges into the widest loads of 16, 8 or 4 bytes that divide them (LDS.128: NW * 4 / 16
  of them for f32 partials and 8 or more warps, as the H200's row kernels of 8 warps show; the
  narrower merges are the same rule, not measured);
- "reduction result": the owner of each output element writes it to the destination tile;
- "register scalar": a [1, 1] shared tile broadcast to every element of a vector statement
  (`x * inv * g`) is read once per thread into a register before the sweep (`register_scalars`,
  the decision the generator reads): one request per warp;
- "broadcast read": any other shared tile a vector statement reads broadcast along its row (an
  [R, 1] tile): once a chunk, one element;
- "tile read" / "tile write": a shared tile of the statement's shape read or written elementwise
  that no copy plan counts (tile to tile statements, a second tile of a store).

Every offset goes through the tile's swizzle where the generator lays the tile out swizzled
(`copies.tile_swizzles`, the decision the generator reads): tutorial 05's add_blocks reads b
transposed through its swizzle in one wavefront a request, not eight.

Not modelled (no record): statements with a dot (the tensor-core paths stage their operands by
rules of their own), per-thread statements (their tensor element accesses are counted per launch
by `thread_traffic`), and a reduction evaluated in a vector statement.

Guarantees: a pure function of the statement plans, the shared-memory map and the copy plans;
`SharedTraffic.wavefronts` equals the sum of its `warps`; nothing the copy plans count is counted
again.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Set, Tuple

import numpy as np

from .. import ir
from ..types import dtype
from .layout import wavefronts_per_request
from .partition import as_2d, chunks
from .smem import identity_reductions

# the element types the generator holds in a scalar register (every value type of the language)
_REGISTER_DTYPES = ("f16", "bf16", "f32", "f64", "i8", "i32", "i64", "index", "u8", "u16", "u32", "bool")


@dataclass(frozen=True)
class SharedTraffic:
    """Shared-memory accesses of one statement to one tile (or reduction scratch) that the copy
    plans do not count. direction "load" (LDS) or "store" (STS); `requests` warp-wide
    instructions per CTA; `wavefronts` their wavefronts per CTA; `warps`: (warp, wavefronts) for
    each warp that issues any; `in_registers`: the value is read once and then kept in a
    register (kind "register scalar")."""
    line: int
    position: int
    tile: str
    kind: str
    direction: str
    requests: int
    wavefronts: int
    warps: Tuple[Tuple[int, int], ...]
    in_registers: bool = False

    def to_json(self) -> dict:
        return {"line": self.line, "position": self.position, "tile": self.tile, "kind": self.kind,
                "direction": self.direction, "requests": self.requests, "wavefronts": self.wavefronts,
                "warps": [list(w) for w in self.warps], "in_registers": self.in_registers}


def register_scalars(value, space_of: Callable[[ir.Sym], Optional[str]]) -> Tuple[ir.Ref, ...]:
    """The reads of `value` (a vector statement's expression) that the generated code does once per
    thread, into a register, before its sweep over the chunks: every Ref to a [1, 1] tile in
    shared memory (`space_of(sym) == "shared"`) broadcast to all the elements, outside reductions,
    dots and transposes (those read their operands themselves). In the order met; the same tile
    may appear more than once (one register serves all of them)."""
    out: List[ir.Ref] = []

    def visit(e):
        if isinstance(e, ir.Ref) and isinstance(e.type, ir.TileT) and as_2d(e.type.shape) == (1, 1):
            if space_of(e.sym) == "shared" and e.type.dtype in _REGISTER_DTYPES:
                out.append(e)
            return
        if isinstance(e, (ir.Reduce, ir.Dot, ir.Transpose)):
            return
        for c in ir.sub_exprs(e):
            visit(c)
    if isinstance(getattr(value, "type", None), ir.TileT):
        visit(value)
    return tuple(out)


def _figures(req: np.ndarray, lane: np.ndarray, warp_of: np.ndarray, start: np.ndarray, nbytes: int, nwarps: int):
    """(requests, wavefronts, ((warp, wavefronts), ...)) of accesses given per lane."""
    if len(req) == 0:
        return 0, 0, ()
    # renumber the requests densely (the bank model sizes its output by the largest)
    uniq, dense = np.unique(req, return_inverse=True)
    wf = wavefronts_per_request(dense, lane, start, nbytes)
    rw = np.zeros(len(uniq), dtype=np.int64)
    rw[dense] = warp_of
    per = np.zeros(nwarps, dtype=np.int64)
    np.add.at(per, rw, wf)
    return len(uniq), int(wf.sum()), tuple((w, int(per[w])) for w in range(nwarps) if per[w])


def _value_of(stmt):
    return getattr(stmt, "value", None)


def _tile_refs(e, out: List[ir.Ref]):
    if isinstance(e, ir.Ref) and isinstance(e.type, ir.TileT):
        out.append(e)
        return
    if isinstance(e, (ir.Reduce, ir.Dot, ir.Transpose)):
        return
    for c in ir.sub_exprs(e):
        _tile_refs(c, out)


def _contains(e, kinds) -> bool:
    if isinstance(e, kinds):
        return True
    return any(_contains(c, kinds) for c in ir.sub_exprs(e))


def shared_traffic(plans, smem, copies, threads: int, space_of: Callable[[ir.Sym], Optional[str]],
                   base_of: Callable[[ir.Sym], int]) -> Tuple[SharedTraffic, ...]:
    """The records of the module docstring, in statement order. `space_of(sym)`: "shared" for a
    tile in shared memory; `base_of(sym)`: its byte offset there."""
    T = threads
    NW = -(-T // 32)
    counted: Set[Tuple[int, str, str]] = set()
    for cp in copies:
        if cp.tile is not None and not cp.is_view:
            counted.add((cp.position, cp.tile, "write" if cp.direction == "load" else "read"))
    from .copies import tile_swizzles
    swz = tile_swizzles(plans, T)
    out: List[SharedTraffic] = []
    for plan in plans:
        if plan.kind != "tile" or _contains_dot(plan.stmt):
            continue
        parts = smem.partials.get(id(plan.stmt), ()) if smem is not None else ()
        if plan.row_reductions and parts and parts[0]:
            out.extend(_block_reduction(plan, NW, T, space_of, base_of, swz))
            continue
        value = _value_of(plan.stmt)
        coop = (identity_reductions(value, tuple(plan.shape))
                if plan.vector_width == 1 and isinstance(getattr(value, "type", None), ir.TileT) else [])
        if plan.row_reductions and not coop:
            continue
        if coop:
            out.extend(_warp_reduction(plan, coop, NW, T, space_of, base_of, swz))
        out.extend(_sweep(plan, NW, T, counted, space_of, swz))
    return tuple(out)


def _relabel(offs, sym, swz):
    """Element offsets in `sym`'s tile as the generated code stores them (its swizzle, if any)."""
    sw = swz.get(id(sym)) if swz else None
    if sw is None:
        return offs
    offs = np.asarray(offs)
    inside = (offs >= 0) & (offs < sym.type.size)
    return np.where(inside, sw(np.where(inside, offs, 0)), offs)


def _warp_reduction(plan, reds, NW, T, space_of, base_of, swz) -> List[SharedTraffic]:
    """The operand reads of the row reductions the lanes of a warp share (the module docstring's
    "warp reduction pass"), for a CTA whose operands are wholly valid."""
    out: List[SharedTraffic] = []
    R, Cc = as_2d(plan.shape)
    n_out = R * Cc
    lanes = np.arange(32, dtype=np.int64)
    for ri, red in enumerate(reds):
        x = red.x
        Rx, Cx = as_2d(x.type.shape)
        length = Cx if red.axis == 1 else Rx
        refs: List[ir.Ref] = []
        _tile_refs(x, refs)
        leaves, done = [], set()
        for r in refs:
            if id(r.sym) in done or space_of(r.sym) != "shared":
                continue
            done.add(id(r.sym))
            leaves.append(r)
        if not leaves:
            continue
        recs: Dict[int, list] = {id(r.sym): [[], [], [], []] for r in leaves}
        req_id = 0
        for base in range(0, n_out, T):
            for w in range(NW):
                nw = min(32, max(0, n_out - base - w * 32))
                if nw <= 0:
                    continue
                S = 1
                while S < nw:
                    S <<= 1
                mine = (lanes & (S - 1)) < nw
                o = base + w * 32 + (lanes & (S - 1))
                steps = -(-length // (32 // S))
                for r in leaves:
                    R2, C2 = as_2d(r.type.shape)
                    along = C2 if red.axis == 1 else R2      # the leaf's extent along the reduced axis
                    hoisted = along == 1                     # the same element at every step: read once
                    acc = recs[id(r.sym)]
                    for i in range(1 if hoisted else steps):
                        k = lanes // S + i * (32 // S)
                        act = mine & (k < length)
                        if hoisted:
                            act = mine & (lanes // S < length)
                            k = np.zeros_like(k)
                        oo, kk = o[act], k[act]
                        row, col = (oo, kk) if red.axis == 1 else (kk, oo)
                        row = row if R2 == Rx else np.zeros_like(row)
                        col = col if C2 == Cx else np.zeros_like(col)
                        acc[0].append(np.full(len(oo), req_id, dtype=np.int64))
                        acc[1].append(lanes[act])
                        acc[2].append(np.full(len(oo), w, dtype=np.int64))
                        acc[3].append(_relabel(row * C2 + col, r.sym, swz))
                        req_id += 1
        for r in leaves:
            acc = recs[id(r.sym)]
            if not acc[0]:
                continue
            eb = dtype(r.type.dtype).itemsize
            st = base_of(r.sym) + np.concatenate(acc[3]) * eb
            n, wf, per = _figures(np.concatenate(acc[0]), np.concatenate(acc[1]), np.concatenate(acc[2]), st, eb, NW)
            R2, C2 = as_2d(r.type.shape)
            kind = "warp reduction pass" if (R2, C2) == (Rx, Cx) else "broadcast in a pass"
            out.append(SharedTraffic(plan.line, plan.position, r.sym.name, kind, "load", n, wf, per))
    return out


def _contains_dot(stmt) -> bool:
    return any(_contains(e, (ir.Dot,)) for e in ir.stmt_exprs(stmt))


def _sweep(plan, NW, T, counted, space_of, swz=None) -> List[SharedTraffic]:
    """Shared accesses of an elementwise tile statement not in the copy plans."""
    out: List[SharedTraffic] = []
    V = plan.vector_width
    try:
        ch = chunks(plan.shape, V, T)
    except ValueError:
        return out
    warp = ch.thread // 32
    req = ch.step * NW + warp
    lane = ch.thread % 32
    value = _value_of(plan.stmt)
    held = {id(r) for r in register_scalars(value, space_of)} if plan.vector_path and value is not None else set()
    seen: Set[Tuple[int, str]] = set()
    for a in plan.accesses:
        if a.space != "shared" or a.mode != "partition":
            continue
        key = (id(a.storage), a.rw)
        if key in seen or (plan.position, a.name, a.rw) in counted:
            continue
        seen.add(key)
        lay = a.layouts[0]
        offs = _relabel(lay.offsets(), a.storage, swz)
        if a.node is not None and id(a.node) in held:
            # one read a thread, before the sweep: every busy thread, one request per warp
            busy = np.unique(ch.thread)
            r = busy // 32
            st = np.full(len(busy), a.base_byte + int(offs.flat[0]) * a.elem_bytes, dtype=np.int64)
            n, wf, per = _figures(r, busy % 32, r, st, a.elem_bytes, NW)
            out.append(SharedTraffic(plan.line, plan.position, a.name, "register scalar", "load", n, wf, per, True))
            continue
        if a.broadcast_along_row or not a.contiguous:
            # one element a chunk (a broadcast) or, along a column, one request per element of the chunk
            cols = [0] if a.broadcast_along_row or V == 1 else list(range(V))
            r_all, l_all, w_all, s_all = [], [], [], []
            for v in cols:
                r_all.append(req * V + v)
                l_all.append(lane)
                w_all.append(warp)
                s_all.append(a.base_byte + offs[ch.row, ch.col + v] * a.elem_bytes)
            n, wf, per = _figures(np.concatenate(r_all), np.concatenate(l_all), np.concatenate(w_all),
                                  np.concatenate(s_all), a.elem_bytes, NW)
            kind = "broadcast read" if a.broadcast_along_row else ("tile read" if a.rw == "read" else "tile write")
        else:
            st = a.base_byte + offs[ch.row, ch.col] * a.elem_bytes
            n, wf, per = _figures(req, lane, warp, st, a.elem_bytes * V, NW)
            kind = "tile read" if a.rw == "read" else "tile write"
        out.append(SharedTraffic(plan.line, plan.position, a.name, kind, "load" if a.rw == "read" else "store",
                                 n, wf, per))
    return out


def _block_reduction(plan, NW, T, space_of, base_of, swz=None) -> List[SharedTraffic]:
    """The passes, partials and result of a CTA-wide row reduction statement."""
    out: List[SharedTraffic] = []
    line, pos = plan.line, plan.position
    for red, V in plan.row_reductions:
        x = red.x
        Rx, Cx = as_2d(x.type.shape)
        steps = Cx // V // T
        if steps < 1:
            continue
        # request (row, step, warp): thread t of the pass reads chunk j0 = (t + s*T) * V of the row
        t = np.tile(np.arange(T, dtype=np.int64), Rx * steps)
        s = np.repeat(np.tile(np.arange(steps, dtype=np.int64), Rx), T)
        row = np.repeat(np.arange(Rx, dtype=np.int64), steps * T)
        j0 = (t + s * T) * V
        warp = t // 32
        req = (row * steps + s) * NW + warp
        refs: List[ir.Ref] = []
        _tile_refs(x, refs)
        done: Set[int] = set()
        for r in refs:
            if id(r.sym) in done or space_of(r.sym) != "shared":
                continue
            done.add(id(r.sym))
            eb = dtype(r.type.dtype).itemsize
            R2, C2 = as_2d(r.type.shape)
            base = base_of(r.sym)
            if (R2, C2) == (Rx, Cx):
                st = base + _relabel(row * C2 + j0, r.sym, swz) * eb
                n, wf, per = _figures(req, t % 32, warp, st, eb * V, NW)
                out.append(SharedTraffic(line, pos, r.sym.name, "reduction pass", "load", n, wf, per))
            else:
                rr = row if R2 == Rx else np.zeros_like(row)
                cc = j0 if C2 == Cx else np.zeros_like(j0)
                st = base + _relabel(rr * C2 + cc, r.sym, swz) * eb
                if C2 == 1:
                    # the same element at every step of the row: NVRTC hoists the load out of the
                    # unrolled chunk loop, one request per (row, warp) (the first step's)
                    first = s == 0
                    n, wf, per = _figures(req[first], (t % 32)[first], warp[first], st[first], eb, NW)
                else:
                    n, wf, per = _figures(req, t % 32, warp, st, eb, NW)
                out.append(SharedTraffic(line, pos, r.sym.name, "broadcast in a pass", "load", n, wf, per))
        pb = dtype(red.type.dtype).itemsize
        name = f"row{red.op} partials"
        # lane 0 of every warp, every row: one single-lane request
        w = np.tile(np.arange(NW, dtype=np.int64), Rx)
        rows = np.repeat(np.arange(Rx, dtype=np.int64), NW)
        n, wf, per = _figures(rows * NW + w, np.zeros_like(w), w, (rows * NW + w) * pb, pb, NW)
        out.append(SharedTraffic(line, pos, name, "partials store", "store", n, wf, per))
        # the owner of output o (thread o % T) reads its row's NW partials, merged into 16-byte loads
        o = np.arange(Rx, dtype=np.int64)
        ot = o % T
        ostep = o // T
        vb = next(b for b in (16, 8, 4, 2, 1) if (NW * pb) % b == 0 and b >= pb or b == pb)
        per_out = NW * pb // vb
        q = np.tile(np.arange(per_out, dtype=np.int64), Rx)
        oo = np.repeat(o, per_out)
        ow = np.repeat(ot // 32, per_out)
        oreq = (np.repeat(ostep, per_out) * per_out + q) * NW + ow
        n, wf, per = _figures(oreq, np.repeat(ot % 32, per_out), ow, (oo * NW) * pb + q * vb, vb, NW)
        out.append(SharedTraffic(line, pos, name, "partials load", "load", n, wf, per))
    dest = plan.accesses[0] if plan.accesses and plan.accesses[0].rw == "write" else None
    if dest is not None and dest.space == "shared" and dest.mode == "partition":
        R, Cc = plan.shape
        k = np.arange(R * Cc, dtype=np.int64)
        th = k % T
        offs = dest.layouts[0].offsets()
        st = dest.base_byte + offs[k // Cc, k % Cc] * dest.elem_bytes
        n, wf, per = _figures((k // T) * NW + th // 32, th % 32, th // 32, st, dest.elem_bytes, NW)
        out.append(SharedTraffic(line, pos, dest.name, "reduction result", "store", n, wf, per))
    return out
