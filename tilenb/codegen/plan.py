"""What the CUDA generator reads of the analysis before it writes code for a kernel variant.

Guarantees:
- `plan(kir, target)` is a view of `tilenb.analysis.analyze(kir, arch=target)` (no decision of its
  own; only its target-free part, the same for every target): the tiles'
  places (shared-memory offsets or registers) and footprint from the lifetimes, the barriers
  (position -> where/tile/reason), the vector width of every tile statement and its
  StatementPlan (whose accesses carry the width of every memory access), and which statements
  read or write shared tiles by the partition.
- `Plan.uni` is the kernel's uniformity as the checker recorded it (`tilenb.analysis.uniformity`,
  read through `Analysis.uniformity`): which scalar symbols and which statements' control differ
  between threads (ctx.warp counts as varying there: a CTA barrier needs the whole CTA).
- `is_tile_stmt` / `contains_cta` say which statements every thread of the CTA runs together.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

from .. import ir
from ..analysis import analyze
from ..analysis.lowering import is_tile_stmt  # noqa: F401  (the analysis' rule, read here too)
from ..analysis.uniformity import Uniformity


# ---- statements that need the whole CTA ------------------------------------------------------
def contains_cta(body) -> bool:
    for s in ir.walk_stmts(body):
        if is_tile_stmt(s):
            return True
    return False


# ---- the plan --------------------------------------------------------------------------------
@dataclass(frozen=True)
class BarrierSpec:
    position: int
    where: str          # "before" or "after"
    tile: str
    reason: str


@dataclass
class TilePlace:
    sym: ir.Sym
    space: str          # "shared" or "registers"
    offset: Optional[int]
    bytes: int
    staged_view: bool


@dataclass
class Plan:
    tiles: Dict[int, TilePlace]              # id(Sym) -> place
    footprint: int                            # bytes of the shared tiles (the lifetimes'; the whole map: analysis.smem)
    positions: Dict[int, int]                # id(Stmt) -> pre-order position
    barriers: Dict[int, List[BarrierSpec]]   # position -> barriers there
    vec: Dict[int, int]                      # id(Stmt) -> vector width (elements) of its partition
    uni: Uniformity
    shared_partition: set = field(default_factory=set)   # id(Stmt) reading/writing shared tiles by the partition
    # id(Stmt) -> the analysis' StatementPlan of a tile statement (vector widths of every access)
    statements: Dict[int, object] = field(default_factory=dict)


def plan(kir: ir.KernelIR, target=None) -> Plan:
    """The plan of one kernel variant (`kir`), read from `tilenb.analysis.analyze(kir, arch=target)`.
    Everything it reads (lifetimes, barriers, statement plans, uniformity) is the target-free
    part that every target's analysis shares; `target` is the one the code is generated for, so
    that generating for sm_90 does not also lower the kernel for any GPU."""
    an = analyze(kir, arch=target)
    positions = {id(s): p for p, s in an.lifetimes.positions}
    return _plan_from_analysis(an, positions)


def _plan_from_analysis(an, positions) -> Plan:
    lt = an.lifetimes
    tiles = {id(t.sym): TilePlace(t.sym, t.space, t.offset, t.bytes, t.staged_view) for t in lt.tiles}
    barriers: Dict[int, List[BarrierSpec]] = {}
    for b in an.barriers:
        barriers.setdefault(b.position, []).append(BarrierSpec(b.position, b.where, str(b.tile), str(b.reason)))
    vec = {}
    shared_partition = set()
    statements = {}
    for sp in an.statements:
        if sp.kind == "tile":
            vec[id(sp.stmt)] = int(sp.vector_width)
            statements[id(sp.stmt)] = sp
            if any(a.mode == "partition" and a.space == "shared" for a in sp.accesses):
                shared_partition.add(id(sp.stmt))
    return Plan(tiles, int(lt.footprint), positions, barriers, vec, an.uniformity, shared_partition, statements)
