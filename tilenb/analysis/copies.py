"""Copy plans: for every move between a tensor and shared memory, which thread moves which
elements, with which vector width, and what the memory system makes of it.

Which statements make copies. Every partition access to a tensor slice in a tile statement is one
copy (`tilenb.analysis.ownership`):
- a load `var a = A[...]`, or a tensor slice read elementwise (`var y = exp(X[...])`): direction
  "load", tile = the destination tile (or null when the destination is a tensor);
- a staged view (`let k = K[...]` read by a dot): a load into the tile `k`;
- a let view of a tensor read elementwise (`C[...] = acc + beta * c_old`): a load with
  `is_view` true and tile = the view's name; it is read where it is used (the line of that
  statement), straight into registers, so it has no shared-memory side;
- a store `A[...] = t` or `A[...] = <expression>`: direction "store", tile = the tile read
  elementwise with the destination's shape (the first one; null for a fill or an expression of
  broadcasts only).
Tensor slices read by a reduction or a dot inline (not through a let view) are read by "any"
threads and have no copy plan.

The figures, per warp request (a warp's lanes in one step of the canonical partition):
- `sectors`: distinct 32-byte global-memory sectors the lanes' accesses touch; `ideal_sectors`:
  the bytes moved / 32, rounded up. The tensor's row pitch is computed with the literal dims and,
  for runtime dims, with representative extents (`extents`, default 1024 elements); the slice's
  start is only known as a multiple of its provable alignment, so the figure is the worst over
  the start's possible positions within a sector.
- `wavefronts`: shared-memory wavefronts of the tile side (32 banks of 4 bytes; see
  `tilenb.analysis.layout.wavefronts_per_request`); `ideal_wavefronts`: bytes / 128, at least 1.
- When wavefronts exceed the ideal, `fix` proposes the tile layout that removes the conflicts:
  the smallest row padding that reaches the ideal, else an XOR swizzle, else the best padding.

Guarantees: `runs` lists every chunk of the iteration space exactly once, so every element of the
copied slice is moved by exactly one thread, exactly once; all threads of the CTA take chunks.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import gcd
from typing import List, Optional, Tuple

import numpy as np

from .layout import (SECTOR_BYTES, Swizzle, ideal_sectors, ideal_wavefronts, sectors_per_request,
                     wavefronts_per_request)
from .ownership import Access, StatementPlan
from .partition import chunks


@dataclass(frozen=True)
class WarpFigures:
    warp: int
    sectors: int
    ideal_sectors: int
    wavefronts: int
    ideal_wavefronts: int


@dataclass(frozen=True)
class LayoutFix:
    """A shared-memory layout for the tile that serves this copy in the ideal wavefronts (or
    fewer than now). kind "pad": rows of `row_length` = C + pad elements (the tile grows to
    `bytes`); kind "swizzle": element offsets relabelled by Swizzle(bits, base, shift).
    `keeps_vectors`: 16-byte aligned rows and units survive (vector accesses stay possible)."""
    kind: str
    pad: int
    row_length: int
    bits: int
    base: int
    shift: int
    bytes: int
    wavefronts: int
    ideal_wavefronts: int
    keeps_vectors: bool

    def to_json(self) -> dict:
        d = {"kind": self.kind, "wavefronts": self.wavefronts, "ideal_wavefronts": self.ideal_wavefronts,
             "bytes": self.bytes, "keeps_vectors": self.keeps_vectors}
        if self.kind == "pad":
            d.update(pad=self.pad, row_length=self.row_length)
        else:
            d.update(bits=self.bits, base=self.base, shift=self.shift)
        return d


@dataclass(frozen=True)
class CopyPlan:
    line: int
    position: int
    direction: str                 # "load" | "store"
    tensor: str
    tile: Optional[str]
    shape: Tuple[int, int]
    vector_width: int
    runs: Tuple[Tuple[int, int, int, int], ...]   # (thread, row, col, length) in tile coordinates
    sectors: int
    ideal_sectors: int
    wavefronts: int
    ideal_wavefronts: int
    warps: Tuple[WarpFigures, ...]
    is_view: bool
    fix: Optional[LayoutFix] = None
    worst_start_byte: int = 0      # the slice start's position in a sector the figures are for
    tensor_dtype: str = ""         # the element type of `tensor` (a tile's may differ: stores convert)

    def to_json(self) -> dict:
        return {
            "line": self.line, "direction": self.direction, "tensor": self.tensor, "tile": self.tile,
            "shape": list(self.shape), "vector_width": self.vector_width,
            "runs": [list(r) for r in self.runs],
            "sectors": self.sectors, "ideal_sectors": self.ideal_sectors,
            "wavefronts": self.wavefronts, "ideal_wavefronts": self.ideal_wavefronts,
            "warps": [{"warp": w.warp, "sectors": w.sectors, "ideal_sectors": w.ideal_sectors,
                       "wavefronts": w.wavefronts, "ideal_wavefronts": w.ideal_wavefronts} for w in self.warps],
            "is_view": self.is_view, "tensor_dtype": self.tensor_dtype,
            "fix": self.fix.to_json() if self.fix is not None else None,
        }


def _requests(ch, threads: int):
    nwarps = -(-threads // 32)
    warp = ch.thread // 32
    return ch.step * nwarps + warp, warp, ch.thread % 32, nwarps


def _per_warp(values: np.ndarray, warp_of_req: np.ndarray, nwarps: int) -> np.ndarray:
    out = np.zeros(nwarps, dtype=np.int64)
    np.add.at(out, warp_of_req, values)
    return out


def _shared_figures(acc: Access, plan: StatementPlan, ch, req, lane, relabel=None):
    """(wavefronts, ideal) per request for the shared side of a copy."""
    lay = acc.layouts[0]
    off = lay.offsets()[ch.row, ch.col]
    if relabel is not None:
        off = relabel(off)
    nbytes = plan.vector_width * acc.elem_bytes if acc.contiguous else acc.elem_bytes
    start = acc.base_byte + off * acc.elem_bytes
    wf = wavefronts_per_request(req, lane, start, nbytes)
    active = np.bincount(req, minlength=len(wf))
    return wf, ideal_wavefronts(active, nbytes)


def _fix(acc: Access, plan: StatementPlan, ch, req, lane, current: int, ideal: int) -> Optional[LayoutFix]:
    shape = acc.storage.type.shape
    if len(shape) != 2:
        return None
    tr, tc = shape
    eb = acc.elem_bytes
    size = tr * tc * eb

    def pad_relabel(p):
        return lambda o: (o // tc) * (tc + p) + o % tc

    best = None
    # the smallest padding that reaches the ideal
    for p in range(1, 33):
        wf, _ = _shared_figures(acc, plan, ch, req, lane, pad_relabel(p))
        total = int(wf.sum())
        cand = LayoutFix("pad", p, tc + p, 0, 0, 0, tr * (tc + p) * eb, total, ideal, (p * eb) % 16 == 0)
        if best is None or total < best.wavefronts:
            best = cand
        if total <= ideal:
            return cand
    # an XOR swizzle of units of 2**base elements by the low bits of the row
    if tc & (tc - 1) == 0:
        row_bits = tc.bit_length() - 1
        for base in range(0, row_bits + 1):
            for bits in range(1, row_bits - base + 1):
                sw = Swizzle(bits, base, row_bits - base)
                wf, _ = _shared_figures(acc, plan, ch, req, lane, lambda o, sw=sw: sw(o))
                total = int(wf.sum())
                unit_bytes = (1 << base) * eb
                cand = LayoutFix("swizzle", 0, tc, bits, base, row_bits - base, size, total, ideal,
                                 unit_bytes % 16 == 0)
                if total < best.wavefronts:
                    best = cand
                if total <= ideal:
                    return cand
    return best if best.wavefronts < current else None


def copy_plans(plans: Tuple[StatementPlan, ...], threads: int) -> Tuple[CopyPlan, ...]:
    out: List[CopyPlan] = []
    for plan in plans:
        if plan.kind != "tile":
            continue
        globals_ = [a for a in plan.accesses if a.space == "global" and a.mode == "partition"]
        if not globals_:
            continue
        ch = chunks(plan.shape, plan.vector_width, threads)
        req, warp, lane, nwarps = _requests(ch, threads)
        n_req = int(req.max()) + 1 if len(req) else 0
        warp_of_req = np.arange(n_req) % nwarps
        runs = tuple(zip(ch.thread.tolist(), ch.row.tolist(), ch.col.tolist(), [plan.vector_width] * len(ch)))
        dest = plan.accesses[0] if plan.accesses else None
        for g in globals_:
            direction = "store" if g.rw == "write" else "load"
            is_view = False
            partner: Optional[Access] = None
            if direction == "load":
                if g.view is not None:
                    tile, is_view = g.name, True
                elif dest is not None and dest.space != "global":
                    partner, tile = dest, dest.name
                else:
                    tile = None
            else:
                reads = [a for a in plan.accesses if a.rw == "read" and a.mode == "partition" and a.space != "global"]
                full = [a for a in reads if not any(st == 0 and n > 1 for st, n in zip(a.layouts[0].stride, a.layouts[0].shape))]
                partner = full[0] if full else None
                tile = partner.name if partner is not None else None
            # global side: sectors, worst over the slice start's possible byte positions in a sector
            eb = g.elem_bytes
            nbytes = plan.vector_width * eb if g.contiguous else eb
            off = g.layouts[0].offsets()[ch.row, ch.col]
            step = gcd(g.origin_div * eb, SECTOR_BYTES) if g.origin_div else SECTOR_BYTES
            worst, worst_res = None, 0
            for res in range(0, SECTOR_BYTES, step):
                sec = sectors_per_request(req, res + off * eb, nbytes)
                if worst is None or sec.sum() > worst.sum():
                    worst, worst_res = sec, res
            active = np.bincount(req, minlength=n_req)
            ideal_s = ideal_sectors(active, nbytes)
            if partner is not None and partner.space == "shared":
                wf, ideal_w = _shared_figures(partner, plan, ch, req, lane)
            else:
                wf = np.zeros(n_req, dtype=np.int64)
                ideal_w = np.zeros(n_req, dtype=np.int64)
            fix = None
            if partner is not None and partner.space == "shared" and wf.sum() > ideal_w.sum():
                fix = _fix(partner, plan, ch, req, lane, int(wf.sum()), int(ideal_w.sum()))
            ws = _per_warp(worst, warp_of_req, nwarps)
            wis = _per_warp(ideal_s, warp_of_req, nwarps)
            ww = _per_warp(wf, warp_of_req, nwarps)
            wiw = _per_warp(ideal_w, warp_of_req, nwarps)
            busy = np.bincount(warp, minlength=nwarps)
            warps = tuple(WarpFigures(w, int(ws[w]), int(wis[w]), int(ww[w]), int(wiw[w]))
                          for w in range(nwarps) if busy[w])
            out.append(CopyPlan(plan.line, plan.position, direction, g.storage.name, tile, plan.shape, plan.vector_width,
                                runs, int(worst.sum()), int(ideal_s.sum()), int(wf.sum()), int(ideal_w.sum()),
                                warps, is_view, fix, worst_res, getattr(g.storage.type, "dtype", "")))
    return tuple(out)
