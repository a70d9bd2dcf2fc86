"""The machine's view of a kernel variant, as data: computed once from the typed IR, read by the
CUDA code generator (which obeys it) and by the notebook widgets (which show it).

    a = tilenb.analysis.analyze(kir)          # or kernel.analysis(**autotune_values)
    a.tiles       tile name, dtype, shape, bytes, offset, space, first/last line (lifetimes)
    a.footprint   bytes of shared memory the variant needs; a.budget: 49152, or 232448 (@dynshared)
    a.ruler       for each source line with a statement: the shared tiles alive there
    a.barriers    the CTA barriers, each with line, position, where, tile and reason
    a.copies      copy plans between tensors and tiles: thread -> element runs, vector width,
                  sectors (coalescing) and wavefronts (bank conflicts) per warp
    a.statements  thread ownership of every statement (`ownership.StatementPlan`), indexed by
                  position: what the code generator implements
    a.uniformity  which control and scalars differ between threads (`uniformity.Uniformity`, the
                  checker's record; the barrier placement and the code generator read it here)
    a.to_json()   all of it as one JSON-ready dict, compact enough to embed in a notebook

The pipeline, one stage per module:
    lifetimes.tile_lifetimes     live ranges, registers vs shared, byte offsets
    ownership.statement_plans    per statement: iteration space, vector width, accesses by thread
    uniformity.uniformity        the checker's record of which control and scalars differ between threads
    global_memory.global_cells   tensor accesses as cells the barrier walk compares across statements and turns
    barriers.place_barriers      hazards between threads (shared and global memory) -> the fewest barriers, with reasons
    copies.copy_plans            global <-> shared moves: runs, sectors, wavefronts, layout fixes
(layout.py is the layout algebra; partition.py the one thread -> element rule; divisibility.py the
alignment facts vector widths come from.)

Guarantees: `analyze` is a pure function of the IR (and the representative runtime extents),
cached per KernelIR object; it never raises for a checked kernel. The copy plans are computed
on first use of `a.copies` (the code generator does not need them), with the same result.
"""
from __future__ import annotations

import json
import weakref
from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Tuple

from .. import ir
from .barriers import Barrier, place_barriers
from .copies import CopyPlan, LayoutFix, WarpFigures, copy_plans
from .layout import Layout, Swizzle, SwizzledLayout, row_major
from .lifetimes import Lifetimes, TileLife, gemm_accumulators, tile_lifetimes
from .ownership import DEFAULT_EXTENT, Access, StatementPlan, statement_plans
from .uniformity import Uniformity, uniformity
from .partition import chunks, owners, thread_chunks, vector_width

# Shared-memory budgets (the checker enforces the same numbers): 48 KB of static shared memory per
# CTA, and the opt-in per-block limit of sm_90 (227 KB) with @dynshared.
STATIC_BUDGET = 48 * 1024
DYNAMIC_BUDGET = 227 * 1024

__all__ = ["analyze", "Analysis", "TileInfo", "RulerLine", "RulerTile", "Barrier", "CopyPlan", "WarpFigures",
           "LayoutFix", "StatementPlan", "Access", "Layout", "Swizzle", "SwizzledLayout", "row_major",
           "Lifetimes", "TileLife", "tile_lifetimes", "gemm_accumulators", "chunks", "owners",
           "thread_chunks", "vector_width", "DEFAULT_EXTENT", "Uniformity", "uniformity"]


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
    name: str
    offset: int
    bytes: int


@dataclass(frozen=True)
class RulerLine:
    """The shared tiles alive at the statements of one source line (sorted by offset)."""
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
    uniformity: Optional[Uniformity] = None   # the checker's uniformity record (analysis.uniformity)

    @property
    def copies(self) -> Tuple[CopyPlan, ...]:
        """The copy plans (`tilenb.analysis.copies`), computed from `statements` on first use
        and kept: the views need them, the code generator does not."""
        hit = self.__dict__.get("_copies")
        if hit is None:
            hit = copy_plans(self.statements, self.threads)
            self.__dict__["_copies"] = hit
        return hit

    def tile(self, name: str) -> TileInfo:
        """The first tile of that name; KeyError names the tiles there are."""
        for t in self.tiles:
            if t.name == name:
                return t
        raise KeyError(f"no tile {name!r} (tiles: {', '.join(t.name for t in self.tiles) or 'none'})")

    def barriers_at(self, position: int, where: str = "before") -> Tuple[Barrier, ...]:
        """The barriers the code generator emits at a statement position ("before", "within", "after")."""
        return tuple(b for b in self.barriers if b.position == position and b.where == where)

    def to_json(self) -> dict:
        """A JSON-ready dict: {"kernel", "threads", "footprint", "budget", "tiles", "ruler",
        "barriers", "copies"}, copies as runs [thread, row, col, length] (not per element)."""
        return {
            "kernel": self.kernel,
            "threads": self.threads,
            "footprint": self.footprint,
            "budget": self.budget,
            "tiles": [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape), "bytes": t.bytes,
                       "offset": t.offset, "space": t.space, "first_line": t.first_line,
                       "last_line": t.last_line} for t in self.tiles],
            "ruler": [{"line": r.line, "tiles": [{"name": x.name, "offset": x.offset, "bytes": x.bytes}
                                                 for x in r.tiles]} for r in self.ruler],
            "barriers": [{"line": b.line, "position": b.position, "where": b.where, "tile": b.tile,
                          "reason": b.reason} for b in self.barriers],
            "copies": [c.to_json() for c in self.copies],
        }

    def json_text(self) -> str:
        """`to_json()` as compact JSON text."""
        return json.dumps(self.to_json(), separators=(",", ":"))


_CACHE: Dict[Tuple[int, Tuple[Tuple[str, int], ...]], Tuple["weakref.ref", Analysis]] = {}


def analyze(kir: ir.KernelIR, extents: Optional[Mapping[str, int]] = None) -> Analysis:
    """The analyses of one kernel variant (cached per KernelIR object and extents).

    extents: representative values of runtime dims (name -> elements) used only for the
    global-memory figures of copy plans (row pitches); each defaults to `DEFAULT_EXTENT` (1024).
    Raises TypeError if kir is not a KernelIR."""
    if not isinstance(kir, ir.KernelIR):
        raise TypeError(f"analyze() takes a tilenb.ir.KernelIR, not {type(kir).__name__}")
    ext = {name: int((extents or {}).get(name, DEFAULT_EXTENT)) for name in kir.dims}
    key = (id(kir), tuple(sorted(ext.items())))
    hit = _CACHE.get(key)
    if hit is not None and hit[0]() is kir:
        return hit[1]
    result = _analyze(kir, ext)
    kid = key

    def _drop(_ref, kid=kid):
        _CACHE.pop(kid, None)
    _CACHE[key] = (weakref.ref(kir, _drop), result)
    return result


def _analyze(kir: ir.KernelIR, ext: Dict[str, int]) -> Analysis:
    lt = tile_lifetimes(kir)                                   # live ranges and byte offsets
    plans = statement_plans(kir, lt, ext)                      # who touches what, per statement
    uni = uniformity(kir)                                      # the checker's record, read once
    barriers, notes = place_barriers(kir, lt, plans, uni.varying_control)   # hazards -> barriers
    # copy plans (global <-> shared moves) are computed when first asked for: Analysis.copies
    tiles = tuple(TileInfo(t.name, t.dtype, tuple(t.shape), t.bytes, t.offset, t.space, t.first_line,
                           t.last_line, t.start, t.end) for t in lt.tiles)
    ruler = _ruler(lt)
    budget = DYNAMIC_BUDGET if kir.dynshared else STATIC_BUDGET
    return Analysis(kir.name, kir.threads, lt.footprint, budget, tiles, ruler, barriers, plans, lt,
                    tuple(sorted(ext.items())), notes, uni)


def _ruler(lt: Lifetimes) -> Tuple[RulerLine, ...]:
    lines: Dict[int, set] = {}
    for p, s in lt.positions:
        lines.setdefault(s.span.line, set()).add(p)
    out = []
    for line in sorted(lines):
        ps = lines[line]
        alive = [t for t in lt.tiles if t.space == "shared" and any(t.start <= p <= t.end for p in ps)]
        alive.sort(key=lambda t: (t.offset, t.name))
        out.append(RulerLine(line, tuple(RulerTile(t.name, t.offset, t.bytes) for t in alive)))
    return tuple(out)
