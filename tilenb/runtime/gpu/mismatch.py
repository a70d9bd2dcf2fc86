"""Why a measured figure differs from the analysis' prediction (`Profile.compare`'s reasons).

Guarantees: `explain` names a difference's mechanism only where the analysis' facts and the
measurement together establish it, and says whether the prediction corrected by that mechanism
contains the measurement ("accounted"); `reason` is the general sentence for the rest. Neither
changes a figure: the prediction itself is `profile.predicted_lines`.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np

from ... import ir

def _reason(metric, plans, f: LineFigures, lo, hi, also=()) -> str:
    return _with_ops(_reason_text(metric, plans, f, lo, hi, also), metric, f)


def _with_ops(why: str, metric: str, f: LineFigures) -> str:
    k = 1 if metric == "global sectors" else 2
    ops = [f"{op} {v[k]}" for op, v in f.ops.items() if v[k]]
    return why + (f" (by instruction: {', '.join(ops)})" if ops else "")


# ---- the differences whose mechanism is known exactly ----------------------------------------
def _span(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo}..{hi}"


def _lines_text(lines) -> str:
    ls = [str(x) for x in sorted(lines)]
    return ls[0] if len(ls) == 1 else ", ".join(ls[:-1]) + " and " + ls[-1]


def _explain(prof: "Profile", analysis, r: dict, f: LineFigures, pred: List[dict], ctas: int,
             full_ctas: Optional[int]) -> Tuple[str, bool]:
    """(reason, accounted) for a difference `Profile.compare` found, where its mechanism is one of
    those the analysis' facts and the measurement together establish ("", False otherwise: the
    general reason applies); `accounted`: the prediction corrected by that mechanism contains the
    measurement. Each is checked, not assumed:

    - a prelude helper called from several tile lines (ncu gives its inlined instructions the
      helper's line): the lines' own counts plus the helper's equal the lines' predictions
      together;
    - per-thread element accesses of tensors (no copy plan: the analysis counts no sectors for
      per-thread code), naming the tensors and the sectors per request ncu counted;
    - a copy whose runtime start the plans place at its worst byte in a sector: the sector-aligned
      figures (`CopyPlan.ideal_sectors`) contain the measurement;
    - shared reads of tile elements the same threads wrote earlier with no barrier between
      (the same statement partition and offsets): the line issues no shared load, NVRTC reuses
      the registers it stored from; the line's predicted stores alone match;
    - a shared store that the next write of the tile, by the same threads and before any
      barrier, overwrites wholly: NVRTC drops it (no shared store at the line);
    - a dot on the generic path reading shared operand tiles element by element (statement
      accesses of mode "any"), which the analysis does not count yet: named, not accounted."""
    metric, line = r["metric"], r["line"]
    meas = f.sectors if metric == "global sectors" else f.wavefronts
    lo, hi = r["predicted"], r["predicted_upper"]
    dotted = _dot_operand_tiles(analysis, line)
    if metric == "shared wavefronts" and dotted and meas > hi and f.ld_wavefronts:
        return (f"the dot at this line reads its operand tile{'s' * (len(dotted) > 1)} {', '.join(dotted)} from "
                f"shared memory element by element (the generic path's dot, no tensor cores: each thread loads, "
                f"for every result element it owns and every k, one element of each operand), reads the "
                f"analysis does not count yet; only the accumulator's accesses are predicted"), False
    why = _via_shared_helper(prof, r, pred, metric, line)
    if why[0]:
        return why
    if metric == "global sectors" and not r["plans"] and not r["elements"]:
        names = _per_thread_tensors(analysis, line)
        if names and meas:
            per = f" ({meas / f.requests:.1f} a request)" if f.requests else ""
            stop = prof.element_unknown or ("a value it does not follow (an index or a branch from a var, a tensor "
                                            "element or an unknown scalar, a break, continue or return)")
            return (f"per-thread code: each thread accesses single elements of {', '.join(names)}, which the "
                    f"analysis could not follow for this launch (analysis.thread_traffic stopped at {stop}), "
                    f"so it predicts none of its sectors; ncu counted {meas} sectors in {f.requests} "
                    f"requests{per}"), False
        return "", False
    if metric == "global sectors" and meas < lo:
        worst = [p for p in r["plans"] if p.sectors > p.ideal_sectors]
        if worst:
            full = ctas if full_ctas is None else int(full_ctas)   # checked by predicted_lines before
            per = sum(int(p.ideal_sectors) for p in r["plans"])
            if per * full <= meas <= per * ctas:
                starts = sorted({int(p.worst_start_byte) for p in worst})
                return (f"the copy plans place the runtime start of {', '.join(sorted({p.tensor for p in worst}))} at "
                        f"byte {', '.join(map(str, starts))} of a 32-byte sector, the worst case (the analysis "
                        f"cannot prove it aligned), {sum(int(p.sectors) for p in r['plans'])} sectors a CTA; "
                        f"with the start on a sector boundary they need {per} a CTA, "
                        f"{_span(per * full, per * ctas)}, which contains the measurement: this launch's start "
                        f"is sector-aligned"), True
        return "", False
    if metric != "shared wavefronts":
        return "", False
    loads, stores = _shared_split(analysis, r)
    full = ctas if full_ctas is None else int(full_ctas)   # checked by predicted_lines before
    if loads and f.ld_wavefronts == 0 and meas < lo:
        fw = _forwarded_reads(analysis, line)
        if fw:
            rest = ", ".join(f"{tile} from line {w}" for tile, w in fw)
            return (f"the threads read back elements they wrote themselves ({rest}: the same elements by the "
                    f"same threads, no barrier between), so NVRTC reuses the registers it stored from and this "
                    f"line issues no shared load; without those reads the prediction is "
                    f"{_span(stores * full, stores * ctas)}"
                    + (", which matches" if stores * full <= meas <= stores * ctas else "")), \
                stores * full <= meas <= stores * ctas
    if stores and f.st_wavefronts == 0 and meas < lo:
        dead = _overwritten_stores(analysis, line)
        if dead:
            rest = ", ".join(f"{tile} at line {w}" for tile, w in dead)
            left = loads
            return (f"the next write of the tile ({rest}) overwrites every element this line stores, by the same "
                    f"threads before any barrier, so NVRTC drops this line's shared store; without it the "
                    f"prediction is {_span(left * full, left * ctas)}"
                    + (", which matches" if left * full <= meas <= left * ctas else "")), \
                left * full <= meas <= left * ctas
    return "", False


def _via_shared_helper(prof, r, pred, metric, line) -> Tuple[str, bool]:
    key = "sectors" if metric == "global sectors" else "wavefronts"
    for name, at in (prof.helper_calls or {}).items():
        h = prof.other.get(name)
        if line not in at or len(set(at)) < 2 or h is None or not getattr(h, key):
            continue
        group = sorted(set(at))
        own = sum(getattr(prof.lines.get(x), key, 0) for x in group)
        glo = sum(q["predicted"] for q in pred if q["metric"] == metric and q["line"] in group)
        ghi = sum(q["predicted_upper"] for q in pred if q["metric"] == metric and q["line"] in group)
        total = own + getattr(h, key)
        ops = ", ".join(f"{op} {v[1 if key == 'sectors' else 2]}" for op, v in h.ops.items()
                        if v[1 if key == "sectors" else 2])
        return (f"ncu counts these instructions under the helper {name} ({ops}), which lines "
                f"{_lines_text(group)} call: it gives an inlined helper's instructions the helper's own line; "
                f"those lines' own {own} and the helper's {getattr(h, key)} make {total} against the "
                f"{_span(glo, ghi)} they predict together"
                + (", which matches" if glo <= total <= ghi else "")), glo <= total <= ghi
    return "", False


def _per_thread_tensors(analysis, line) -> List[str]:
    out: List[str] = []
    for p in analysis.statements:
        if int(p.line) != int(line):
            continue
        for a in p.accesses:
            if a.mode == "per_thread" and a.space == "global" and a.name not in out:
                out.append(a.name)
    return out


def _shared_split(analysis, r) -> Tuple[int, int]:
    """(load, store) shared wavefronts per CTA of a prediction row: a store copy reads its tile, a
    load copy writes it; the shared_traffic records carry their direction."""
    loads = sum(int(p.wavefronts) for p in r["plans"] if p.direction == "store" and p.tile is not None)
    stores = sum(int(p.wavefronts) for p in r["plans"] if p.direction == "load" and p.tile is not None)
    for t in getattr(analysis, "shared_traffic", ()):
        if int(t.line) == int(r["line"]):
            if t.direction == "load":
                loads += int(t.wavefronts)
            else:
                stores += int(t.wavefronts)
    return loads, stores


def _same_elements(a, pa, b, pb) -> bool:
    """Whether partition accesses `a` (of plan `pa`) and `b` (of `pb`) touch the same elements of the
    same shared tile by the same threads: the same iteration space and width, the same offsets."""
    if a.mode != "partition" or b.mode != "partition" or a.space != "shared" or b.space != "shared":
        return False
    if a.storage is not b.storage or tuple(pa.shape) != tuple(pb.shape) or pa.vector_width != pb.vector_width:
        return False
    if len(a.layouts) != 1 or len(b.layouts) != 1:
        return False
    return bool(np.array_equal(a.layouts[0].offsets(), b.layouts[0].offsets()))


def _barrier_between(analysis, p0: int, p1: int) -> bool:
    for b in analysis.barriers:
        pos = int(b.position)
        if p0 < pos < p1 or (pos == p1 and b.where == "before") or (pos == p0 and b.where == "after") \
                or (pos in (p0, p1) and b.where == "within"):
            return True
    return False


def _top_level(analysis, pos: int) -> bool:
    """Whether the statement at `pos` is in the kernel's body itself (no loop or branch around it:
    straight-line code, where one write and the next read follow each other once)."""
    from ... import ir
    inner = set()
    for q in analysis.statements:
        if ir.child_blocks(q.stmt):
            inner.update(id(x) for x in ir.walk_stmts([q.stmt]) if x is not q.stmt)
    return not any(id(p.stmt) in inner for p in analysis.statements if p.position == pos)


def _dot_operand_tiles(analysis, line) -> List[str]:
    """The shared tiles a dot at `line` reads by its own pattern (statement accesses of mode
    "any": the generic path's dot, whose operand reads no copy plan or shared_traffic record
    counts), in source order; [] where the line has none."""
    out: List[str] = []
    for p in analysis.statements:
        if int(p.line) != int(line):
            continue
        for a in p.accesses:
            name = getattr(a.storage, "name", None)
            if a.rw == "read" and a.space == "shared" and a.mode == "any" and name and name not in out:
                out.append(name)
    return out


def _forwarded_reads(analysis, line) -> List[Tuple[str, int]]:
    """(tile, line of the write) for every shared partition read at `line` whose elements the same
    threads wrote at the tile's latest earlier write, with no barrier between; [] unless all are."""
    plans = sorted(analysis.statements, key=lambda p: p.position)
    out: List[Tuple[str, int]] = []
    for p in plans:
        if int(p.line) != int(line) or p.kind != "tile" or not _top_level(analysis, p.position):
            continue
        for a in p.accesses:
            if a.rw != "read" or a.space != "shared":
                continue
            if a.mode != "partition":
                return []
            w = next((q for q in reversed(plans) if q.position < p.position
                      and any(b.rw == "write" and b.storage is a.storage for b in q.accesses)), None)
            wa = None if w is None else next(b for b in w.accesses if b.rw == "write" and b.storage is a.storage)
            if (w is None or not _top_level(analysis, w.position) or not _same_elements(wa, w, a, p)
                    or _barrier_between(analysis, w.position, p.position)):
                return []
            if (a.name, int(w.line)) not in out:
                out.append((a.name, int(w.line)))
    return out


def _overwritten_stores(analysis, line) -> List[Tuple[str, int]]:
    """(tile, line of the next write) for every shared partition write at `line` that the tile's
    next write overwrites, same elements, same threads, no barrier between, read in between only
    by those same threads; [] unless all are."""
    plans = sorted(analysis.statements, key=lambda p: p.position)
    out: List[Tuple[str, int]] = []
    for p in plans:
        if int(p.line) != int(line) or p.kind != "tile" or not _top_level(analysis, p.position):
            continue
        for a in p.accesses:
            if a.rw != "write" or a.space != "shared":
                continue
            nxt = None
            for q in plans:
                if q.position <= p.position:
                    continue
                for b in q.accesses:
                    if b.storage is a.storage and b.rw == "read" and not _same_elements(a, p, b, q):
                        return []
                if any(b.rw == "write" and b.storage is a.storage for b in q.accesses):
                    nxt = q
                    break
            if nxt is None or not _top_level(analysis, nxt.position) \
                    or _barrier_between(analysis, p.position, nxt.position):
                return []
            wb = next(b for b in nxt.accesses if b.rw == "write" and b.storage is a.storage)
            if not _same_elements(a, p, wb, nxt):
                return []
            out.append((a.name, int(nxt.line)))
    return out


def _reason_text(metric, plans, f: LineFigures, lo, hi, also=()) -> str:
    meas = f.sectors if metric == "global sectors" else f.wavefronts
    if not plans and not also:
        return ("no copy plan at this line: a reduction or element access the analysis does not count as a copy "
                "(for example a row reduction reading a shared tile)")
    if meas == 0:
        return ("ncu attributes no such traffic to this line: the compiler may have merged it into another line's "
                "instructions, or it runs in a helper called from several lines")
    if metric == "global sectors":
        if f.ldgsts_sectors:
            return f"copied with cp.async (LDGSTS, {f.ldgsts_sectors} sectors): its global side is counted apart"
        widths = [p.vector_width * _bytes_of(p.tensor_dtype) for p in plans if p.direction == "store"]
        if meas > hi and f.store_widths and widths and min(f.store_widths) < max(widths):
            return (f"the machine code stores {min(f.store_widths)} bytes per thread where the analysis plans "
                    f"{max(widths)}: more sectors per request")
        if meas < lo:
            return "fewer than predicted: L1 hits or masked edge CTAs (the prediction counts full CTAs)"
        return "more than predicted: the access pattern in the machine code differs from the copy plan's"
    if meas < lo:
        return ("fewer shared accesses than the copy plan: the generator keeps values in registers, or copies by "
                "cp.async whose shared side ncu does not count as store wavefronts")
    return ("more wavefronts than predicted: shared accesses on this line that the analysis does not model "
            "(analysis.shared_traffic lists those it does), or bank conflicts it did not foresee")


def _bytes_of(dt) -> int:
    from ...types import DTYPES
    try:
        return int(DTYPES[dt].itemsize)
    except Exception:
        return 4
