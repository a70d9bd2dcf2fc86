"""The machine's view of a kernel variant, as data: computed once from the typed IR, read by the
CUDA code generator (which obeys it) and by the notebook widgets (which show it).

    a = tilenb.analysis.analyze(kir)          # or kernel.analysis(**autotune_values)
    a = analyze(kir, arch="sm_90")            # the same for a target: its loops and shared memory
    a.tiles       tile name, dtype, shape, bytes, offset, space, first/last line (lifetimes)
    a.smem        the complete shared-memory map for the target (`smem.SmemMap`): every region
                  (tiles, mma scratch, staging, rings and their mbarriers, cluster slots,
                  reduction partials) with offset, bytes, kind, lines and live positions
    a.footprint   bytes of shared memory the generated kernel declares (`a.smem.footprint`)
    a.budget      49152, or 232448 (tilenb.target.ANY; @dynshared, or a kernel whose shared memory is sized at launch)
    a.loops       every loop's lowering ("wgmma TMA pipeline", "streamed attention on wgmma",
                  "mma.sync", "generic") and why (`lowering.LoopLowering`)
    a.ruler       for each source line with a statement: the regions alive there (tiles first)
    a.barriers    the CTA barriers, each with line, position, where, tile and reason
    a.waits       the other waits of the target's code (`rings.Wait`: a streamed loop's mbarrier
                  waits and its warpgroup ping-pong's named barriers), each with its reason
    a.copies      copy plans between tensors and tiles: thread -> element runs, vector width,
                  sectors (coalescing) and wavefronts (bank conflicts) per warp
    a.statements  thread ownership of every statement (`ownership.StatementPlan`), indexed by
                  position: what the code generator implements
    a.uniformity  which control and scalars differ between threads (`uniformity.Uniformity`, the
                  checker's record; the barrier placement and the code generator read it here)
    a.masks       the wheres whose condition is decided once per tile at its corners (all true,
                  all false or per element: `masks.CornerMask`), whose sweeps the generator splits
    a.to_json()   all of it as one JSON-ready dict, compact enough to embed in a notebook

The pipeline, one stage per module:
    lifetimes.tile_lifetimes     live ranges, registers vs shared, byte offsets
    ownership.statement_plans    per statement: iteration space, vector width, accesses by thread
    uniformity.uniformity        the checker's record of which control and scalars differ between threads
    masks.corner_masks           wheres over affine index tiles (rows/cols), decided per tile at its corners
    global_memory.global_cells   tensor accesses as cells the barrier walk compares across statements and turns
    barriers.place_barriers      hazards between threads (shared and global memory) -> the fewest barriers, with reasons
    lowering.lower               per target: GEMM / streamed / mma.sync loops, tensor-core register
                                 layouts, routes of tensor-core statements, scratch, stages, rings
                                 (gemm_loops.py: the GEMM loop shape and its records; tc_moves.py: the
                                 proven alignment of the tensor-core paths' 16-byte moves, and where a
                                 run-time test remains; pingpong.py: a streamed loop's warpgroup
                                 ping-pong and its waits besides CTA barriers)
    smem.build                   the shared-memory map: every region the generated kernel declares
    copies.copy_plans            global <-> shared moves: runs, sectors, wavefronts, layout fixes
(layout.py is the layout algebra; partition.py the one thread -> element rule; divisibility.py the
alignment facts vector widths come from.)

Guarantees: `analyze` is a pure function of the IR, the target (`tilenb.target.Target`, read
through `lowering.target_key`: None gives the code for any GPU, any sm_90 spelling Hopper's TMA +
wgmma loops, every target its own limits) and the representative runtime
extents, cached per KernelIR object; it never raises for a checked kernel. The target-free part
(lifetimes, statements, barriers, copies) is computed once per KernelIR and extents and shared by
every target's Analysis. The copy plans are computed on first use of `a.copies` (the code
generator does not need them), with the same result.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Dict, Mapping, Optional, Tuple

from .. import ir
from ..caches import per_kernel
from ..target import ANY as ANY_TARGET
from .barriers import Barrier, place_barriers
from .copies import CopyPlan, LayoutFix, WarpFigures, copy_plans
from .dot_reads import DotRead, dot_reads
from .layout import Layout, Swizzle, SwizzledLayout, row_major
from .lifetimes import Lifetimes, TileLife, gemm_accumulators, tile_lifetimes
from .masks import CornerMask, corner_masks, enclosing_loops
from .lowering import Facts, KernelLowering, LoopLowering, lower, target_key
from .ownership import DEFAULT_EXTENT, Access, StatementPlan, narrow_within, statement_plans
from .uniformity import Uniformity, uniformity
from .partition import chunks, owners, thread_chunks, vector_width
from .smem import Region, SmemMap, build as build_smem_map
from .shared_traffic import SharedTraffic, register_scalars, shared_traffic as _shared_traffic

# Shared-memory budgets, the checker's too (tilenb.target.ANY: code for any GPU): 48 KB of static
# shared memory per CTA, and with @dynshared the largest GPUs' opt-in per-block limit.
STATIC_BUDGET = ANY_TARGET.static_smem
DYNAMIC_BUDGET = ANY_TARGET.dynamic_smem

__all__ = ["analyze", "Analysis", "TileInfo", "RulerLine", "RulerTile", "Barrier", "CopyPlan", "WarpFigures",
           "LayoutFix", "StatementPlan", "Access", "Layout", "Swizzle", "SwizzledLayout", "row_major",
           "Lifetimes", "TileLife", "tile_lifetimes", "gemm_accumulators", "chunks", "owners",
           "thread_chunks", "vector_width", "DEFAULT_EXTENT", "Region", "SmemMap", "LoopLowering",
           "target_key", "Uniformity", "uniformity", "SharedTraffic", "register_scalars"]


@dataclass(frozen=True)
class TileInfo:
    """One tile: bytes is its aligned size in shared memory (0 in registers), offset its byte
    offset there (None in registers); it is alive from first_line to last_line (statement
    positions start..end)."""
    name: str
    dtype: str
    shape: Tuple[int, ...]
    bytes: int
    offset: Optional[int]
    space: str
    first_line: int
    last_line: int
    start: int
    end: int


@dataclass(frozen=True)
class RulerTile:
    """A region alive at a line: its name, offset and bytes; kind "tile" for a tile, else the
    `smem.Region` kind (mma scratch, staging, ring stages, ...)."""
    name: str
    offset: int
    bytes: int
    kind: str = "tile"


@dataclass(frozen=True)
class RulerLine:
    """The shared-memory regions alive at the statements of one source line (sorted by offset)."""
    line: int
    tiles: Tuple[RulerTile, ...]


@dataclass(frozen=True)
class Analysis:
    kernel: str
    threads: int
    footprint: int
    budget: int
    tiles: Tuple[TileInfo, ...]
    ruler: Tuple[RulerLine, ...]
    barriers: Tuple[Barrier, ...]
    statements: Tuple[StatementPlan, ...]
    lifetimes: Lifetimes
    extents: Tuple[Tuple[str, int], ...]   # the runtime dims' representative extents used
    notes: Tuple[str, ...] = ()            # hazards no barrier could separate (none when checked)
    target: object = None                  # the tilenb.target.Target the path is decided for (`lowering.target_key`)
    smem: Optional[SmemMap] = None         # the complete shared-memory map for that target
    loops: Tuple[LoopLowering, ...] = ()   # each loop's lowering and why, in source order
    lowering: Optional[KernelLowering] = field(default=None, repr=False, compare=False)   # what the generator reads
    _shared: dict = field(default_factory=dict, repr=False, compare=False)   # the target-free part's lazy results
    uniformity: Optional[Uniformity] = None   # the checker's uniformity record (analysis.uniformity)
    dot_reads: Tuple[DotRead, ...] = ()       # tensor slices dots read inline, and how (analysis.dot_reads)
    masks: Tuple[CornerMask, ...] = ()        # wheres decided per tile at their corners (analysis.masks)

    @property
    def waits(self):
        """The waits of the target's code besides CTA barriers (`lowering.KernelLowering.waits`:
        a streamed loop's mbarrier waits and its ping-pong's named barriers); () for none."""
        return self.lowering.waits if self.lowering is not None else ()

    @property
    def copies(self) -> Tuple[CopyPlan, ...]:
        """The copy plans (`tilenb.analysis.copies`), computed from `statements` on first use
        and kept (one computation for every target's Analysis of the variant): the views need
        them, the code generator does not."""
        hit = self._shared.get("copies")
        if hit is None:
            hit = copy_plans(self.statements, self.threads)
            self._shared["copies"] = hit
        return hit

    @property
    def shared_traffic(self) -> Tuple[SharedTraffic, ...]:
        """The shared-memory accesses the copy plans do not count (`tilenb.analysis.shared_traffic`:
        reduction passes, partials, results, broadcasts, register scalars), computed on first use."""
        key = ("shared_traffic", None if self.target is None else str(self.target))
        hit = self._shared.get(key)
        if hit is None:
            lives = {id(t.sym): t for t in self.lifetimes.tiles}

            def space_of(sym):
                t = lives.get(id(sym))
                return None if t is None else t.space

            def base_of(sym):
                t = lives.get(id(sym))
                return 0 if t is None or t.offset is None else t.offset
            hit = _shared_traffic(self.statements, self.smem, self.copies, self.threads, space_of, base_of)
            self._shared[key] = hit
        return hit

    def traffic(self) -> Dict[str, int]:
        """Per CTA (a CTA whose windows lie wholly inside the tensors): global load and store
        sectors (the copy plans) and shared load and store wavefronts (the copy plans' shared
        sides plus `shared_traffic`), as {"global_ld_sectors", "global_st_sectors",
        "shared_ld_wavefronts", "shared_st_wavefronts"}."""
        out = dict.fromkeys(("global_ld_sectors", "global_st_sectors", "shared_ld_wavefronts",
                             "shared_st_wavefronts"), 0)
        for cp in self.copies:
            if cp.direction == "load":
                out["global_ld_sectors"] += cp.sectors
                out["shared_st_wavefronts"] += cp.wavefronts
            else:
                out["global_st_sectors"] += cp.sectors
                out["shared_ld_wavefronts"] += cp.wavefronts
        for t in self.shared_traffic:
            out["shared_ld_wavefronts" if t.direction == "load" else "shared_st_wavefronts"] += t.wavefronts
        return out

    def tile(self, name: str) -> TileInfo:
        """The first tile of that name; KeyError names the tiles there are."""
        for t in self.tiles:
            if t.name == name:
                return t
        raise KeyError(f"no tile {name!r} (tiles: {', '.join(t.name for t in self.tiles) or 'none'})")

    def loop_at(self, line: int) -> LoopLowering:
        """The first loop on that source line; KeyError names the lines with loops."""
        for lp in self.loops:
            if lp.line == line:
                return lp
        raise KeyError(f"no loop at line {line} (loops at lines: {', '.join(str(x.line) for x in self.loops) or 'none'})")

    def barriers_at(self, position: int, where: str = "before") -> Tuple[Barrier, ...]:
        """The barriers the code generator emits at a statement position ("before", "within", "after")."""
        return tuple(b for b in self.barriers if b.position == position and b.where == where)

    def to_json(self) -> dict:
        """A JSON-ready dict: {"kernel", "threads", "footprint", "budget", "target", "tiles",
        "ruler", "regions", "smem", "loops", "barriers", "waits", "copies", "shared_traffic", "traffic",
        "dot_reads", "masks"}, copies as runs [thread, row,
        col, length] (not per element); ruler entries of regions other than tiles carry their
        "kind"; "smem" holds the map's "array_bytes" and "dynamic"."""
        def ruler_entry(x):
            d = {"name": x.name, "offset": x.offset, "bytes": x.bytes}
            if x.kind != "tile":
                d["kind"] = x.kind
            return d
        m = self.smem
        return {
            "kernel": self.kernel,
            "threads": self.threads,
            "footprint": self.footprint,
            "budget": self.budget,
            "target": None if self.target is None or self.target.cc is None else str(self.target),
            "tiles": [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape), "bytes": t.bytes,
                       "offset": t.offset, "space": t.space, "first_line": t.first_line,
                       "last_line": t.last_line} for t in self.tiles],
            "ruler": [{"line": r.line, "tiles": [ruler_entry(x) for x in r.tiles]} for r in self.ruler],
            "regions": [r.to_json() for r in m.regions] if m is not None else [],
            "smem": {"array_bytes": m.array_bytes, "dynamic": m.dynamic} if m is not None else {},
            "loops": [{"line": lp.line, "position": lp.position, "lowering": lp.lowering, "why": lp.why}
                      for lp in self.loops],
            "barriers": [{"line": b.line, "position": b.position, "where": b.where, "tile": b.tile,
                          "reason": b.reason} for b in self.barriers],
            "waits": [w.to_json() for w in self.waits],
            "copies": [c.to_json() for c in self.copies],
            "shared_traffic": [t.to_json() for t in self.shared_traffic],
            "dot_reads": [d.to_json() for d in self.dot_reads],
            "masks": [mk.to_json() for mk in self.masks],
            "traffic": self.traffic(),
        }

    def json_text(self) -> str:
        """`to_json()` as compact JSON text."""
        return json.dumps(self.to_json(), separators=(",", ":"))


def _cached(kir, key, make):
    """The value under `key` in kir's `tilenb.caches.per_kernel` dict, made by `make()` once."""
    memo = per_kernel(kir)
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = make()
    return hit


def analyze(kir: ir.KernelIR, extents: Optional[Mapping[str, int]] = None, arch=None) -> Analysis:
    """The analyses of one kernel variant for a target (cached per KernelIR object, extents and
    target path).

    extents: representative values of runtime dims (name -> elements) used only for the
    global-memory figures of copy plans (row pitches); each defaults to `DEFAULT_EXTENT` (1024).
    arch: the target the generated code is for, any spelling `tilenb.target.target` accepts
    (sm_90 in any spelling: Hopper's TMA + wgmma loops; None: code for any GPU); it decides
    `loops`, `smem` and `footprint` through `lowering.target_key`, the one place it is read.
    Raises TypeError if kir is not a KernelIR, UnsupportedError if arch names no GPU target."""
    if not isinstance(kir, ir.KernelIR):
        raise TypeError(f"analyze() takes a tilenb.ir.KernelIR, not {type(kir).__name__}")
    ext = {name: int((extents or {}).get(name, DEFAULT_EXTENT)) for name in kir.dims}
    ekey = tuple(sorted(ext.items()))
    target = target_key(arch)
    base = _cached(kir, ("analysis", ekey), lambda: _analyze_base(kir, ext))
    return _cached(kir, ("analysis", ekey, target), lambda: _for_target(kir, base, target))


@dataclass
class _Base:
    """The target-free part of a variant's analysis."""
    lt: Lifetimes
    plans: Tuple[StatementPlan, ...]
    barriers: Tuple[Barrier, ...]
    notes: Tuple[str, ...]
    extents: Tuple[Tuple[str, int], ...]
    tiles: Tuple[TileInfo, ...]
    shared: dict
    uniformity: Uniformity
    masks: Tuple[CornerMask, ...] = ()


def _analyze_base(kir: ir.KernelIR, ext: Dict[str, int]) -> _Base:
    lt = tile_lifetimes(kir)                                   # live ranges and byte offsets
    plans = statement_plans(kir, lt, ext)                      # who touches what, per statement
    uni = uniformity(kir)                                      # the checker's record, read once
    barriers, notes = place_barriers(kir, lt, plans, uni.varying_control)   # hazards -> barriers
    plans = narrow_within(plans, barriers)                     # split statements: element accesses
    # copy plans (global <-> shared moves) are computed when first asked for: Analysis.copies
    tiles = tuple(TileInfo(t.name, t.dtype, tuple(t.shape), t.bytes, t.offset, t.space, t.first_line,
                           t.last_line, t.start, t.end) for t in lt.tiles)
    masks = corner_masks(kir, uni)                             # wheres decided per tile at its corners
    return _Base(lt, tuple(plans), tuple(barriers), tuple(notes), tuple(sorted(ext.items())), tiles, {}, uni, masks)


def facts_of(kir: ir.KernelIR, lt: Lifetimes, barriers) -> Facts:
    """The facts the lowering reads (`lowering.Facts`), from the lifetimes and the barriers."""
    by_pos: Dict[int, list] = {}
    for b in barriers:
        by_pos.setdefault(b.position, []).append(b)
    return Facts(kir, {id(t.sym): t for t in lt.tiles}, {id(s): p for p, s in lt.positions}, by_pos,
                 uniformity(kir), lt.footprint)


def _for_target(kir: ir.KernelIR, base: _Base, target) -> Analysis:
    facts = base.shared.get("facts")
    if facts is None:
        facts = base.shared["facts"] = facts_of(kir, base.lt, base.barriers)
    low = lower(facts, target)
    _note_masks(kir, low, base.masks)
    m = build_smem_map(kir, base.lt, low, facts)
    budget = DYNAMIC_BUDGET if kir.dynshared or m.dynamic else STATIC_BUDGET
    return Analysis(kir.name, kir.threads, m.footprint, budget, base.tiles, _ruler(base.lt, m), base.barriers,
                    base.plans, base.lt, base.extents, base.notes, target, m, low.loops, low, base.shared,
                    base.uniformity, dot_reads(kir, low), base.masks)


def _note_masks(kir: ir.KernelIR, low: KernelLowering, masks):
    """Each loop's entry (`low.loops`, `low.by_loop`) also says which of its statements' wheres are
    decided per tile at their corners (`masks.CornerMask.describe`), so the views that list the
    loops show it."""
    if not masks:
        return
    notes = enclosing_loops(kir, masks)
    by_old = {}
    for lid, lp in list(low.by_loop.items()):
        ms = notes.get(lid)
        if ms:
            new = replace(lp, why=lp.why + "".join(f"; {mk.describe()}" for mk in ms))
            low.by_loop[lid] = new
            by_old[id(lp)] = new
    low.loops = tuple(by_old.get(id(lp), lp) for lp in low.loops)


def _ruler(lt: Lifetimes, m: SmemMap) -> Tuple[RulerLine, ...]:
    lines: Dict[int, set] = {}
    for p, s in lt.positions:
        lines.setdefault(s.span.line, set()).add(p)
    order = {"tile": 0}
    out = []
    for line in sorted(lines):
        ps = lines[line]
        alive = [r for r in m.regions if any(r.alive_at(p) for p in ps)]
        alive.sort(key=lambda r: (r.space != "tnb_smem", r.offset, order.get(r.kind, 1), r.name))
        out.append(RulerLine(line, tuple(RulerTile(r.name, r.offset, r.bytes, r.kind) for r in alive)))
    return tuple(out)
