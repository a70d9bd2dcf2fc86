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
  broadcasts only); a tile atomic `atomic_add(A[...], t)` is such a store with `op`
  "atomic_add" (or "atomic_max"); `value` names the stored tile when the value is one tile.
Each copy's `region` (`tilenb.analysis.valid_region`) says which of the slice's elements lie
inside the tensor, as far as that is known before a launch.
Tensor slices read by a reduction or a dot inline (not through a let view) are read by "any"
threads and have no copy plan.

The figures, per warp request (a warp's lanes in one step of the canonical partition):
- `sectors`: distinct 32-byte global-memory sectors the lanes' accesses touch; `ideal_sectors`:
  the bytes moved / 32, rounded up. The tensor's row pitch is computed with the literal dims and,
  for runtime dims, with representative extents (`extents`, default 1024 elements); the slice's
  start is only known as a multiple of its provable alignment, so the figure is the worst over
  the start's possible positions within a sector. A tensor operand that is not contiguous along
  the row (a broadcast `S[r :+ R, :]` of shape [R, 1], a column) is read one element at a time,
  each element of a run a request of its own (summed per run's request here), as the
  generated code does.
- `shape` is the 2-D iteration space the runs are in; `slice_shape` the same slice at the rank the
  program declares (one number for a 1-D slice), as the views print it.
- `wavefronts`: shared-memory wavefronts of the tile side (32 banks of 4 bytes; see
  `tilenb.analysis.layout.wavefronts_per_request`); `ideal_wavefronts`: bytes / 128, at least 1.
- When wavefronts exceed the ideal, `fix` proposes the tile layout that removes the conflicts:
  the smallest row padding that reaches the ideal, else an XOR swizzle, else the best padding.

Swizzled tiles. `tile_swizzles` picks, for every shared tile that some tile statement reads or
writes along a column (a transpose, `t[:, j]`), the XOR swizzle of 16-byte units by row bits
(`layout.Swizzle`) that serves all its partition accesses in the fewest wavefronts, if that is
fewer than the row-major layout takes; the CUDA generator lays the tile out that way (a swizzle
permutes 16-byte units within each row, so the tile keeps its bytes and every vector access of up
to 16 bytes stays whole). Tiles that a dot reads or writes are left row-major (the tensor-core
paths address them themselves), except a tile of 2-byte elements that dots only read, whole, as
an operand, with rows of a power-of-two multiple of 128 bytes: ldmatrix reads eight of its rows at
a time, which would share banks, so its 16-byte units are XORed by the row's low three bits. A copy plan's figures are for the layout the generator uses:
`swizzle` names it (None: row-major), and `fix` is measured against it.

Guarantees: `runs` lists every chunk of the iteration space exactly once, so every element of the
copied slice is moved by exactly one thread, exactly once; all threads of the CTA take chunks.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import gcd
from typing import Dict, List, Optional, Tuple

import numpy as np

from .. import caches, ir
from .layout import (SECTOR_BYTES, PanelSwizzle, Swizzle, ideal_sectors, ideal_wavefronts, sectors_per_request,
                     wavefronts_per_request)
from .ownership import Access, StatementPlan
from .partition import chunks
from .valid_region import SliceRegion, slice_region


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
    swizzle: Optional[Swizzle] = None   # the tile's layout in the generated code (None: row-major)
    slice_shape: Tuple[int, ...] = ()   # the tensor slice's shape at its declared rank ([514] for a 1-D slice)
    coalescing_note: str = ""      # when sectors exceed the ideal: which lanes, why, and what to change
    conflict_note: str = ""        # when wavefronts exceed the ideal: which lanes share a bank, and the fix
    op: str = ""                   # "atomic_add" / "atomic_max" for a tile atomic's store; "" for a plain copy
    value: str = ""                # a store's value in words when short ("t", "colsum(x)"), else ""
    region: Optional[SliceRegion] = None   # the slice's part inside the tensor, as far as known before a launch
    # (byte position of the slice start in a 32-byte sector, sectors per CTA there) for every
    # position its divisibility allows; `sectors` is the worst of them (a launch that knows its
    # starts picks its own: tilenb.runtime.gpu.profile.launch_copy_sectors)
    sectors_by_start: Tuple[Tuple[int, int], ...] = ()

    def to_json(self) -> dict:
        """A JSON-ready dict; "swizzle" ({"bits", "base", "shift"}) appears only for a swizzled tile."""
        d = {
            "line": self.line, "direction": self.direction, "tensor": self.tensor, "tile": self.tile,
            "shape": list(self.shape), "slice_shape": list(self.slice_shape or self.shape),
            "vector_width": self.vector_width,
            "runs": [list(r) for r in self.runs],
            "sectors": self.sectors, "ideal_sectors": self.ideal_sectors,
            "wavefronts": self.wavefronts, "ideal_wavefronts": self.ideal_wavefronts,
            "warps": [{"warp": w.warp, "sectors": w.sectors, "ideal_sectors": w.ideal_sectors,
                       "wavefronts": w.wavefronts, "ideal_wavefronts": w.ideal_wavefronts} for w in self.warps],
            "is_view": self.is_view, "tensor_dtype": self.tensor_dtype,
            "coalescing_note": self.coalescing_note, "conflict_note": self.conflict_note,
            "op": self.op, "value": self.value,
            "valid_region": self.region.to_json() if self.region is not None else None,
            "fix": self.fix.to_json() if self.fix is not None else None,
        }
        if self.swizzle is not None:
            d["swizzle"] = {"bits": self.swizzle.bits, "base": self.swizzle.base, "shift": self.swizzle.shift}
            if isinstance(self.swizzle, PanelSwizzle):
                d["swizzle"].update(panel_columns=64, rows=self.swizzle.rows, columns=self.swizzle.cols,
                                    layout=self.swizzle.describe())
        return d


def _requests(ch, threads: int):
    nwarps = -(-threads // 32)
    warp = ch.thread // 32
    return ch.step * nwarps + warp, warp, ch.thread % 32, nwarps


def _per_warp(values: np.ndarray, warp_of_req: np.ndarray, nwarps: int) -> np.ndarray:
    out = np.zeros(nwarps, dtype=np.int64)
    np.add.at(out, warp_of_req, values)
    return out


def _shared_figures(acc: Access, plan: StatementPlan, ch, req, lane, relabel=None):
    """(wavefronts, ideal) per request for the shared side of a copy. A contiguous access moves a
    chunk as one vector; a non-contiguous one (a column, a transpose) moves it one element at a
    time, each element position of the chunk a request of its own (summed per request here)."""
    lay = acc.layouts[0]
    offs = lay.offsets()
    if acc.contiguous or plan.vector_width == 1:
        parts = [offs[ch.row, ch.col]]
        nbytes = plan.vector_width * acc.elem_bytes if acc.contiguous else acc.elem_bytes
    else:
        parts = [offs[ch.row, ch.col + v] for v in range(plan.vector_width)]
        nbytes = acc.elem_bytes
    wf = ideal = None
    for off in parts:
        if relabel is not None:
            off = relabel(off)
        start = acc.base_byte + off * acc.elem_bytes
        w = wavefronts_per_request(req, lane, start, nbytes)
        i = ideal_wavefronts(np.bincount(req, minlength=len(w)), nbytes)
        wf, ideal = (w, i) if wf is None else (wf + w, ideal + i)
    return wf, ideal


# ---- the swizzles the code generator applies --------------------------------------------------
SWIZZLE_UNIT_BYTES = 16      # the widest vector access: units this large stay whole
_SWIZZLE_CACHE: Dict[int, tuple] = {}
caches.register(__name__, _SWIZZLE_CACHE.clear)


def tile_swizzles(plans: Tuple[StatementPlan, ...], threads: int) -> Dict[int, Swizzle]:
    """id(tile Sym) -> the Swizzle the CUDA generator applies to that shared tile (see the module
    docstring); tiles not listed stay row-major. A pure function of the plans (cached on them)."""
    hit = _SWIZZLE_CACHE.get(id(plans))
    if hit is not None and hit[0] is plans and hit[1] == threads:
        return hit[2]
    out = _tile_swizzles(plans, threads)
    if len(_SWIZZLE_CACHE) > 64:
        _SWIZZLE_CACHE.clear()
    _SWIZZLE_CACHE[id(plans)] = (plans, threads, out)
    return out


def _has_dot(stmt) -> bool:
    from .. import ir
    for e in ir.stmt_exprs(stmt):
        for x in ir.walk_expr(e):
            if isinstance(x, ir.Dot):
                return True
    return False


def _operand_swizzles(plans, syms) -> Dict[int, Swizzle]:
    """Shared tiles of 2-byte elements that dots read whole, as an operand (the tensor-core paths
    load them with ldmatrix: eight rows of 16 bytes at a time), and that no dot statement touches
    otherwise: with rows of a power-of-two multiple of 128 bytes those eight rows fall in the same
    banks (an 8-way conflict). Each gets the XOR swizzle of its 16-byte units by the row's low
    three bits, which puts them in eight different banks."""
    from .. import ir
    reads: Dict[int, object] = {}
    bad = set()
    for plan in plans:
        if plan.kind != "tile" or not _has_dot(plan.stmt):
            continue
        operand_refs: Dict[int, int] = {}
        all_refs: Dict[int, int] = {}
        for e in ir.stmt_exprs(plan.stmt):
            for x in ir.walk_expr(e):
                if isinstance(x, ir.Dot):
                    for o in (x.a, x.b):
                        if isinstance(o, ir.Ref):
                            operand_refs[id(o.sym)] = operand_refs.get(id(o.sym), 0) + 1
                            reads[id(o.sym)] = o.sym
                elif isinstance(x, ir.Ref):
                    all_refs[id(x.sym)] = all_refs.get(id(x.sym), 0) + 1
                elif isinstance(x, (ir.Slice, ir.Element)):
                    bad.add(id(x.base))
        for k, n in all_refs.items():
            if n != operand_refs.get(k, 0):
                bad.add(k)          # read or written otherwise by a dot statement
        tgt = getattr(plan.stmt, "target", None)
        if tgt is not None:
            bad.add(id(getattr(tgt, "sym", None) or getattr(tgt, "base", None)))
        sym = getattr(plan.stmt, "sym", None)
        if sym is not None:
            bad.add(id(sym))
    out: Dict[int, Swizzle] = {}
    for k, sym in reads.items():
        if k in bad or k not in syms:
            continue
        t = sym.type
        shape = tuple(getattr(t, "shape", ()))
        if len(shape) != 2 or getattr(t, "dtype", None) not in ("f16", "bf16"):
            continue
        R, Cc = shape
        if not (isinstance(R, int) and isinstance(Cc, int)) or R < 8 or Cc & (Cc - 1) or Cc * 2 < 128:
            continue
        unit = SWIZZLE_UNIT_BYTES // 2
        base = unit.bit_length() - 1
        if Cc > 64 and R % 8 == 0:
            # rows longer than 128 bytes: in 64-column panels, the layout wgmma reads by descriptor
            # (for 64 columns the XOR swizzle below is that layout already)
            out[k] = PanelSwizzle(3, base, 6 - base, rows=R, cols=Cc)
        else:
            out[k] = Swizzle(3, base, (Cc.bit_length() - 1) - base)
    return out


def _tile_swizzles(plans, threads) -> Dict[int, Swizzle]:
    uses: Dict[int, list] = {}        # id(tile) -> [(plan, access)] partition accesses in shared memory
    column = set()                    # tiles some statement reads or writes along a column
    excluded = set()                  # tiles a dot touches, or whose window starts are not exact
    syms = {}
    for plan in plans:
        if plan.kind not in ("tile", "per_thread"):
            continue
        dot = plan.kind == "tile" and _has_dot(plan.stmt)
        for a in plan.accesses:
            if a.space != "shared":
                continue
            k = id(a.storage)
            syms[k] = a.storage
            if dot:
                excluded.add(k)
            if plan.kind != "tile" or a.mode != "partition":
                continue
            uses.setdefault(k, []).append((plan, a))
            lay = a.layouts[0]
            if lay.rank == 2 and ((lay.stride[1] not in (0, 1) and lay.shape[1] > 1)
                                  or (lay.shape[1] == 1 and lay.shape[0] > 1 and lay.stride[0] > 1)):
                column.add(k)       # along a column: by element (a transpose) or by row (t[:, j :+ 1])
    out: Dict[int, Swizzle] = {}
    for k, sw in _operand_swizzles(plans, syms).items():
        if k not in column:
            out[k] = sw
    for k in sorted(column - excluded, key=lambda k: syms[k].name):
        shape = tuple(syms[k].type.shape)
        if len(shape) != 2:
            continue
        R, Cc = shape
        eb = uses[k][0][1].elem_bytes
        unit = SWIZZLE_UNIT_BYTES // eb if SWIZZLE_UNIT_BYTES % eb == 0 else 0
        if unit < 1 or Cc & (Cc - 1) or Cc % unit or Cc // unit < 2 or R < 2:
            continue
        base = unit.bit_length() - 1
        col_bits = Cc.bit_length() - 1
        max_bits = min(3, (Cc // unit).bit_length() - 1)
        figures = []
        for plan, a in uses[k]:
            ch = chunks(plan.shape, plan.vector_width, threads)
            req, _, lane, _ = _requests(ch, threads)
            figures.append((a, plan, ch, req, lane))

        def total(relabel):
            return sum(int(_shared_figures(a, plan, ch, req, lane, relabel)[0].sum())
                       for a, plan, ch, req, lane in figures)
        best, best_sw = total(None), None
        for r0 in range(0, 4):
            if (1 << r0) >= R:
                break
            for bits in range(1, max_bits + 1):
                sw = Swizzle(bits, base, col_bits + r0 - base)
                t = total(sw)
                if t < best:
                    best, best_sw = t, sw
        if best_sw is not None:
            out[k] = best_sw
    return out


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


def _declared_shape(g: Access, shape) -> Tuple[int, ...]:
    """The slice's shape at the rank the program declares it (the iteration space `shape` is
    always 2-D: a 1-D slice of 514 elements is [1, 514] there and [514] here)."""
    declared = tuple(getattr(getattr(g.node, "type", None), "shape", ()) or ())
    if len(declared) == 1 and tuple(shape)[0] == 1 and isinstance(declared[0], int) and declared[0] == shape[1]:
        return (int(declared[0]),)
    return tuple(shape)


def _lanes_of(req, lane, r):
    """The chunk indices of request r, in lane order."""
    sel = np.nonzero(req == r)[0]
    return sel[np.argsort(lane[sel], kind="stable")]


def _coalescing_note(g: Access, direction, ch, req, lane, nwarps, rel, nbytes, worst, ideal_s, worst_res, step) -> str:
    """Why the first warp request over the ideal touches more sectors than its bytes need, and
    what to change; '' when every request meets the ideal. `rel`: each chunk's byte offset from
    the slice's first element; the slice start is `worst_res` bytes into a sector (the worst case)."""
    bad = np.nonzero(worst > ideal_s)[0]
    if not len(bad):
        return ""
    r = int(bad[0])
    idx = _lanes_of(req, lane, r)
    warp = r % nwarps
    verb = "write" if direction == "store" else "read"
    addr = rel[idx]
    gaps = np.diff(addr)
    far = np.nonzero(gaps != nbytes)[0]
    where = f"warp {warp}, step {r // nwarps}"
    if len(far):
        i = int(far[0])
        l0, l1 = int(lane[idx[i]]), int(lane[idx[i + 1]])
        e0 = (int(ch.row[idx[i]]), int(ch.col[idx[i]]))
        e1 = (int(ch.row[idx[i + 1]]), int(ch.col[idx[i + 1]]))
        gap = int(gaps[i])
        if not g.contiguous:
            return (f"{where}: lanes {l0} and {l1} {verb} {nbytes} B each, {gap:,} B apart (elements {list(e0)} "
                    f"and {list(e1)} of the statement): consecutive lanes step along a column of {g.name}, so each lane "
                    f"needs a sector of its own. Fix: make the fastest-moving index the last one (lanes along a "
                    f"row of {g.name}), or transpose through a tile (copy rows of {g.name} into a tile, then read "
                    f"the tile's columns)")
        return (f"{where}: lanes {l0} and {l1} {verb} elements {list(e0)} and {list(e1)} of the slice of {g.name}, "
                f"{gap:,} B apart: a row of the slice ends inside the warp and the next row starts elsewhere in {g.name}, so "
                f"the warp's bytes are not one run of sectors. Fix: make the slice's rows longer (a warp's lanes "
                f"within one row: a multiple of 32 B a row), or let the tile cover whole rows of {g.name}")
    if worst_res:
        elems = SECTOR_BYTES // g.elem_bytes if g.elem_bytes else 0
        return (f"{where}: the slice of {g.name} may start {worst_res} B into a 32-byte sector (the compiler "
                f"cannot prove its start is a multiple of {elems} elements), so the warp's bytes straddle one more "
                f"sector than they fill. Fix: start the slice on a multiple of {elems} elements (for a halo: load "
                f"an aligned, wider window and index into the tile), or accept the extra sector")
    return ""


def _conflict_note(partner, plan, ch, req, lane, nwarps, wf, ideal_w, sw, fix) -> str:
    """Which lanes of the first conflicting warp request share a shared-memory bank, and the fix;
    '' when every request meets the ideal."""
    if partner is None or partner.space != "shared":
        return ""
    bad = np.nonzero(wf > ideal_w)[0]
    if not len(bad):
        return ""
    r = int(bad[0])
    idx = _lanes_of(req, lane, r)
    raw = partner.layouts[0].offsets()[ch.row[idx], ch.col[idx]]
    offs = sw(raw) if sw is not None else raw
    start = partner.base_byte + offs * partner.elem_bytes
    word = start // 4
    bank = word % 32
    tshape = tuple(getattr(partner.storage.type, "shape", ()) or ())
    cols = tshape[-1] if tshape and isinstance(tshape[-1], int) and tshape[-1] > 0 else 0

    def elem(i):
        o = int(raw[i])
        return f"[{o // cols}, {o % cols}]" if cols and len(tshape) == 2 else f"[{o}]"
    pair = ""
    for i in range(len(idx)):
        for j in range(i):
            if bank[i] == bank[j] and word[i] != word[j]:
                pair = (f"lanes {int(lane[idx[j]])} and {int(lane[idx[i]])} touch bank {int(bank[i])} at different "
                        f"words ({partner.name}{elem(j)} and {partner.name}{elem(i)})")
                break
        if pair:
            break
    how = "pad the tile's row by one element or swizzle it"
    if fix is not None:
        how = (f"pad {partner.name}'s row by {fix.pad} element{'s' * (fix.pad != 1)} (rows of {fix.row_length})"
               if fix.kind == "pad" else f"swizzle {partner.name} (XOR {1 << fix.base}-element units by the row)")
    return (f"warp {r % nwarps}, step {r // nwarps}: {int(wf[r])} wavefronts where {int(ideal_w[r])} would do: "
            f"{pair or 'several lanes share a bank'}. Fix: {how}")


def copy_plans(plans: Tuple[StatementPlan, ...], threads: int) -> Tuple[CopyPlan, ...]:
    out: List[CopyPlan] = []
    swizzles = tile_swizzles(plans, threads)
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
            # (a non-contiguous operand of a vector statement, a broadcast `S[r :+ R, :]` or a column,
            # is read by the generated code once per element of the chunk: NVRTC does not merge the
            # loads of one address, as the H200's sectors show; so each element is a request)
            eb = g.elem_bytes
            nbytes = plan.vector_width * eb if g.contiguous else eb
            per_elem = 1 if g.contiguous else plan.vector_width
            offs = g.layouts[0].offsets()
            step = gcd(g.origin_div * eb, SECTOR_BYTES) if g.origin_div else SECTOR_BYTES
            worst, worst_res = None, 0
            by_start = []
            for res in range(0, SECTOR_BYTES, step):
                sec = sum(sectors_per_request(req, res + offs[ch.row, ch.col + v] * eb, nbytes)
                          for v in range(per_elem))
                by_start.append((res, int(sec.sum())))
                if worst is None or sec.sum() > worst.sum():
                    worst, worst_res = sec, res
            active = np.bincount(req, minlength=n_req)
            ideal_s = ideal_sectors(active, nbytes)
            sw = swizzles.get(id(partner.storage)) if partner is not None and partner.space == "shared" else None
            if partner is not None and partner.space == "shared":
                wf, ideal_w = _shared_figures(partner, plan, ch, req, lane, sw)
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
                                warps, is_view, fix, worst_res, getattr(g.storage.type, "dtype", ""), sw,
                                _declared_shape(g, plan.shape),
                                _coalescing_note(g, direction, ch, req, lane, nwarps, offs[ch.row, ch.col] * eb, nbytes, worst, ideal_s, worst_res, step),
                                _conflict_note(partner, plan, ch, req, lane, nwarps, wf, ideal_w, sw, fix),
                                *_store_op(plan.stmt, direction), slice_region(g.node, plan.shape),
                                tuple(by_start)))
    return tuple(out)


def _store_op(stmt, direction: str) -> Tuple[str, str]:
    """(op, value) of a store: the tile atomic's operation ("atomic_add", "atomic_max"; "" for a
    plain store) and its value in words when that is short (`_value_text`)."""
    if direction != "store":
        return "", ""
    op = f"atomic_{stmt.op}" if isinstance(stmt, ir.Atomic) and stmt.tile else ""
    return op, _value_text(getattr(stmt, "value", None))


def _value_text(e) -> str:
    """A tile by name, a reduction of one ("colsum(x)"), a constant; "" for anything longer."""
    if isinstance(e, ir.Ref):
        return e.sym.name
    if isinstance(e, ir.Reduce):
        inner = _value_text(e.x)
        return f"{'row' if e.axis == 1 else 'col'}{e.op}({inner})" if inner else ""
    if isinstance(e, ir.Const):
        return str(e.value)
    return ""
