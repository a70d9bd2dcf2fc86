"""The shared-memory budget (spec section 12), read from the analysis' shared-memory map.

Guarantees: `check_budget` appends at most one `TileBudgetError` to `errors`, naming the tile
(or, past the tiles, the tensor-core staging) that does not fit: the language's regions (the
tiles as their lifetimes pack them, and the cluster slots) within 48 KB, or the per-block limit
with @dynshared; and the whole map of the kernel for any GPU (`tilenb.analysis.smem`, with what
the tensor cores add after the tiles) within the per-block limit. The checker knows no device:
the limits are those of code for any GPU (`tilenb.target.ANY`); a launch checks its device's.

This module imports the analysis; the analysis imports nothing of the checker (no cycle).
"""
from __future__ import annotations

from .. import ir
from .. import types as T
from ..analysis import analyze
from ..analysis.lifetimes import ALIGN, cluster_slot_bytes, gemm_accumulators, tile_lifetimes
from ..analysis.smem import lowering_bound
from ..lang.diagnostics import TileBudgetError
from ..target import ANY as ANY_TARGET


def check_budget(kir: ir.KernelIR, src, memo, errors):
    """The shared-memory budget of one variant, in two parts that read the analysis'
    shared-memory map (`tilenb.analysis.smem`): the language's regions (the tiles, as the
    lifetimes pack them, and the cluster slots) within 48 KB, or the per-block limit with
    @dynshared; and the whole map of the kernel for any GPU (with the tensor cores' scratch
    and staging, which the generator adds after the tiles) within the per-block limit.
    src: the `Source` errors are made from; memo: the shared walk's memo of tile sizes (variants
    sharing a walk share it), or None; errors: the list an error is appended to.

    The first part is checked here. The second needs the variant's whole analysis where a
    bound from the IR alone (`smem.lowering_bound`) cannot settle it: then this returns a
    function of no arguments that checks it and returns its TileBudgetError or None (the
    checker calls it when the variant is first asked for, `results.CheckedKernel`, so that a
    compile analyses only the variants it uses); else None."""
    if _tile_budget(kir, src, memo, errors) or errors:
        return None
    if _within_bound(kir, memo):
        return None
    return lambda: _device_budget(kir, src)

def _tile_budget(kir, src, budget_memo, errors) -> bool:
    """Whether the tiles and cluster slots are over the budget (then the error is recorded)."""
    # the checker knows no device: the limits of code for any GPU (tilenb.target.ANY, the
    # largest GPUs' per-block opt-in with @dynshared); a launch checks its device's own
    limit = ANY_TARGET.smem_limit(bool(kir.dynshared))
    # The footprint never exceeds the sum of the shared tiles (tilenb.analysis.lifetimes): when
    # every tile declared fits at once, or every one but those surely kept in registers
    # (@registers, GEMM-loop accumulators), the variant fits without computing its lifetimes.
    # the sums depend on the body alone: variants sharing a walk share them (`budget_memo`)
    memo = budget_memo if budget_memo is not None else {}
    slots = memo.get(("cluster_slots", kir.cluster))   # variants sharing a walk may differ in @cluster
    if slots is None:   # each cluster reduction publishes its tile in shared memory (codegen/generic/cluster.py)
        slots = memo[("cluster_slots", kir.cluster)] = cluster_slot_bytes(kir)
    limit -= slots
    note = f" (after the {slots} bytes its cluster reductions publish)" if slots else ""
    total = memo.get("total")
    if total is None:
        sizes = []
        for s in ir.walk_stmts(kir.body):
            if type(s) in (ir.Let, ir.VarDecl) and type(s.sym.type) is ir.TileT:
                t = s.sym.type
                sizes.append((s.sym, (t.size * T.DTYPES[t.dtype].itemsize + ALIGN - 1) // ALIGN * ALIGN))
        total = memo["total"] = sum(n for _, n in sizes)
        memo["sizes"] = sizes
    if total <= limit:
        return False
    outside = memo.get("outside_registers")
    if outside is None:
        in_regs = {id(x) for x in kir.registers} | {id(x) for x in gemm_accumulators(kir)}
        outside = memo["outside_registers"] = sum(n for sym, n in memo["sizes"] if id(sym) not in in_regs)
    if outside <= limit:
        return False
    lt = tile_lifetimes(kir, budget_memo)
    if lt.footprint <= limit:
        return False
    shared = [t for t in lt.tiles if t.space == "shared"]
    alone = [t for t in shared if t.bytes > limit]
    if alone:   # one tile is too large by itself: it is the culprit, whatever else is alive
        first = max(alone, key=lambda t: (t.bytes, -t.start))
        what = f"it alone needs {first.bytes} bytes of shared memory"
    else:
        over = [t for t in shared if t.offset + t.bytes > limit] or shared
        first = min(over, key=lambda t: t.start)
        live = [t for t in shared if t.start <= first.start <= t.end]
        need = sum(t.bytes for t in live)
        if need <= limit:  # the packing, not one live set, overflows: name the largest set
            live, need = list(lt.live_at_peak), lt.largest_live_set
        names = ", ".join(f"{t.name} ({t.bytes} B)" for t in live)
        packed = f"; {lt.footprint} bytes as packed with the kernel's other tiles" if lt.footprint > need else ""
        what = f"the tiles alive here need {need} bytes of shared memory ({names}{packed})"
    decl = [s for _, s in lt.positions if isinstance(s, (ir.VarDecl, ir.Let)) and s.sym is first.sym]
    span = decl[0].span if decl else kir.span
    if kir.dynshared:
        msg = (f"tile '{first.name}' does not fit: {what}, more than the {limit}-byte per-block limit of the "
               f"largest GPUs{note}; use smaller tiles")
    else:
        msg = (f"tile '{first.name}' does not fit: {what}, more than the static budget of {limit} bytes "
               f"({ANY_TARGET.static_smem // 1024} KB)"
               f"{note}; use smaller tiles, or add @dynshared to size shared memory at launch")
    errors.append(src.error(TileBudgetError, msg, span.line, span.column))
    return True

def _within_bound(kir, budget_memo) -> bool:
    """Whether the tiles, the cluster slots and an upper bound of what the tensor cores add
    (`smem.lowering_bound`) fit the per-block limit of the largest GPUs: then the whole map does."""
    memo = budget_memo if budget_memo is not None else {}
    extra = memo.get("lowering_bound")
    if extra is None:
        extra = memo["lowering_bound"] = lowering_bound(kir)
    if not extra:
        return True
    tiles = memo.get("total")
    if tiles is None:
        tiles = sum((t.size * T.DTYPES[t.dtype].itemsize + 15) // 16 * 16 for t in
                    (s.sym.type for s in ir.walk_stmts(kir.body)
                     if type(s) in (ir.Let, ir.VarDecl) and type(s.sym.type) is ir.TileT))
    return tiles + cluster_slot_bytes(kir) + extra <= ANY_TARGET.dynamic_smem


def _device_budget(kir, src):
    """The whole shared-memory map for any GPU (`Analysis.smem`) within the per-block limit:
    a TileBudgetError naming what the tensor cores add, or None. The map of the code for any GPU
    and of Hopper's (whose rings are sized to fit) are asked for in turn (Hopper's first: a
    launch on an H100 or H200 reuses it): the variant fits when either does, and only when
    both are over are both computed."""
    limit = ANY_TARGET.dynamic_smem
    if any(analyze(kir, arch=a).smem.footprint <= limit for a in ("sm_90", None)):
        return None
    m = min((analyze(kir, arch=a).smem for a in (None, "sm_90")), key=lambda x: x.footprint)
    own = max([r.end for r in m.regions if r.kind in ("tile", "tile (unused)", "cluster slot")] + [0])
    added = sorted((r for r in m.regions if r.kind not in ("tile", "tile (unused)", "cluster slot")),
                   key=lambda r: -r.bytes)
    names = ", ".join(f"{r.name} ({r.bytes} B)" for r in added[:4]) + (", ..." if len(added) > 4 else "")
    line = added[0].lines[0] if added and added[0].lines else kir.span.line
    msg = (f"kernel '{kir.name}' needs {m.footprint} bytes of shared memory: its tiles and cluster slots "
           f"({own} B) and, after them, what its tensor-core dots need ({names}), more than the "
           f"{ANY_TARGET.dynamic_smem}-byte per-block limit of the largest GPUs; use smaller tiles")
    return src.error(TileBudgetError, msg, line, 1)
