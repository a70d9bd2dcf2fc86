"""What the CUDA generator needs to know about a kernel variant before it writes code.

Guarantees:
- `Plan.uni` is the kernel's uniformity as the checker recorded it (`tilenb.analysis.uniformity`,
  the one home of that decision; read through `Analysis.uniformity`): which scalar symbols and
  which statements' control differ between threads (ctx.warp counts as varying there: a CTA
  barrier needs the whole CTA).
- `plan(kir)` gives the tiles' places (shared-memory offsets or registers), the footprint, the
  barriers (position -> where/tile/reason), the vector width of each tile statement and (from
  the analysis) its StatementPlan, whose accesses carry the width of every memory access. It takes
  them from `tilenb.analysis.analyze` when that module exists, and otherwise from the tile
  lifetimes and a conservative rule of its own (`_conservative_barriers`): a barrier before
  every tile statement that touches shared memory, placed only where control is uniform.
- `partition_chunks` is the one partition rule the generated code implements: chunk c of `vec`
  contiguous row elements of the iteration domain goes to thread c % threads.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .. import ir
from ..analysis.lifetimes import tile_lifetimes
from ..analysis.uniformity import Uniformity, uniformity
from ..types import DTYPES


# ---- statements that need the whole CTA ------------------------------------------------------
def is_tile_stmt(s) -> bool:
    """A statement that every thread of the CTA runs together (a tile statement or barrier)."""
    if isinstance(s, ir.Barrier):
        return True
    if isinstance(s, (ir.Let, ir.VarDecl)):
        return isinstance(s.sym.type, ir.TileT)
    if isinstance(s, ir.Assign):
        return isinstance(s.target.type, ir.TileT)
    if isinstance(s, ir.Atomic):
        return s.tile           # a tile atomic (a tensor slice target)
    return False


def contains_cta(body) -> bool:
    for s in ir.walk_stmts(body):
        if is_tile_stmt(s):
            return True
    return False


def shared_syms_of(e, shared_ids: set) -> bool:
    for x in ir.walk_expr(e):
        if isinstance(x, ir.Ref) and id(x.sym) in shared_ids:
            return True
        if isinstance(x, (ir.Slice, ir.Element)) and id(x.base) in shared_ids:
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
    source: str                              # "analysis" or "codegen's conservative rule"
    notes: List[str] = field(default_factory=list)
    shared_partition: set = field(default_factory=set)   # id(Stmt) reading/writing shared tiles by the partition
    # id(Stmt) -> the analysis' StatementPlan of a tile statement (vector widths of every access)
    statements: Dict[int, object] = field(default_factory=dict)


def vec_width(shape: Tuple[int, ...], dtypes) -> int:
    """Elements per chunk of a tile statement over `shape` touching `dtypes`: the widest of
    8/4/2/1 that divides the row length and keeps each chunk within 16 bytes."""
    cols = shape[-1] if shape else 1
    size = max([DTYPES[d].itemsize for d in dtypes] + [1])
    v = 8
    while v > 1 and (cols % v != 0 or v * size > 16):
        v //= 2
    return v


def _stmt_dtypes(s) -> List[str]:
    out = []
    for e in ir.stmt_exprs(s):
        for x in ir.walk_expr(e):
            t = getattr(x, "type", None)
            if isinstance(t, (ir.TileT,)):
                out.append(t.dtype)
            if isinstance(x, (ir.Slice,)):
                out.append(x.base.type.dtype)
    if isinstance(s, (ir.Let, ir.VarDecl)) and isinstance(s.sym.type, ir.TileT):
        out.append(s.sym.type.dtype)
    return [d for d in out if d != "bool"] or ["f32"]


def _domain_shape(s) -> Optional[Tuple[int, ...]]:
    if isinstance(s, (ir.Let, ir.VarDecl)) and isinstance(s.sym.type, ir.TileT):
        return s.sym.type.shape
    if isinstance(s, (ir.Assign, ir.Atomic)) and isinstance(s.target.type, ir.TileT):
        return s.target.type.shape
    return None


def plan(kir: ir.KernelIR) -> Plan:
    analysis = _try_analysis(kir)
    lt = analysis.lifetimes if analysis is not None else tile_lifetimes(kir)   # one computation
    positions = {id(s): p for p, s in lt.positions}
    if analysis is not None:
        return _plan_from_analysis(kir, analysis, positions, analysis.uniformity)
    uni = uniformity(kir)
    tiles = {id(t.sym): TilePlace(t.sym, t.space, t.offset, t.bytes, t.staged_view) for t in lt.tiles}
    vec = {}
    for _, s in lt.positions:
        shape = _domain_shape(s)
        if shape is not None:
            vec[id(s)] = vec_width(shape, _stmt_dtypes(s))
    barriers = _conservative_barriers(kir, lt, tiles, uni)
    return Plan(tiles, lt.footprint, positions, barriers, vec, uni, "codegen's conservative rule")


def _try_analysis(kir):
    try:
        from .. import analysis as A
    except Exception:  # the analysis package may be mid-edit by a colleague
        return None
    fn = getattr(A, "analyze", None)
    if fn is None:
        return None
    return fn(kir)


def _plan_from_analysis(kir, an, positions, uni) -> Plan:
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
    notes = list(getattr(an, "notes", ()) or ())
    return Plan(tiles, int(lt.footprint), positions, barriers, vec, uni, "analysis", notes, shared_partition, statements)


def _conservative_barriers(kir, lt, tiles, uni) -> Dict[int, List[BarrierSpec]]:
    """A barrier before every statement at uniform control that touches shared memory (a tile
    statement, or per-thread code that reads or writes a shared tile element)."""
    shared_ids = {k for k, t in tiles.items() if t.space == "shared"}
    # let views of shared tiles touch their base's bytes
    for _, s in lt.positions:
        if isinstance(s, ir.Let) and s.sym.kind == "view":
            v = s.value
            base = v.base if isinstance(v, ir.Slice) else (v.sym if isinstance(v, ir.Ref) else None)
            if base is not None and id(base) in shared_ids:
                shared_ids.add(id(s.sym))
    out: Dict[int, List[BarrierSpec]] = {}

    def touches(s) -> Optional[str]:
        for t in ir.walk_stmts((s,)):
            for e in ir.stmt_exprs(t):
                for x in ir.walk_expr(e):
                    sym = ir.named_sym(x)
                    if sym is not None and id(sym) in shared_ids:
                        return sym.name
            if isinstance(t, (ir.Let, ir.VarDecl)) and id(t.sym) in shared_ids:
                return t.sym.name
        return None

    for p, s in lt.positions:
        if id(s) in uni.varying_control:
            continue
        body_uniform = ((isinstance(s, ir.For) and not (uni.expr_varying(s.lo) or uni.expr_varying(s.hi)))
                        or (isinstance(s, (ir.While, ir.If)) and not uni.expr_varying(s.cond)))
        if body_uniform:
            continue  # their bodies get their own barriers
        name = touches(s)
        if name is not None:
            out.setdefault(p, []).append(BarrierSpec(p, "before", name, f"conservative: '{name}' may have been written or read by other threads"))
    return out
