"""The plain-text summary of each view, from its traits alone (no kernel, no widget).

Guarantees: `text(name, state)` is deterministic: the same traits give the same string, with no
memory addresses, ids or clock readings (measured times appear only in the timing view, as
measured). nbval and plain frontends compare and show it; the HTML picture (`render`) and the
PNG drawings (`png`) reuse its labels, copy titles and number formats, so the three forms of a
view say the same things in the same words.
"""
from __future__ import annotations

from typing import Dict, List

from ..target import STATIC_SMEM


def line_labels(state) -> Dict[int, str]:
    return {int(line): str(label) for line, label, _ in state.get("lines", [])}


def _texts(state) -> Dict[int, str]:
    return {int(line): str(text) for line, _, text in state.get("lines", [])}


def _label(labels, line) -> str:
    return labels.get(int(line), str(line))


def _n(n, word: str) -> str:
    """'1 element', '4 elements'."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def _bytes(n) -> str:
    return f"{int(n):,} B"


def _shape(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _ranges(items: List[int]) -> str:
    """[0, 1, 2, 5] -> '0-2, 5'"""
    out, start, prev = [], None, None
    for i in items:
        if start is None:
            start = prev = i
        elif i == prev + 1:
            prev = i
        else:
            out.append(f"{start}-{prev}" if prev != start else f"{start}")
            start = prev = i
    if start is not None:
        out.append(f"{start}-{prev}" if prev != start else f"{start}")
    return ", ".join(out)


def copy_title(c: dict, tile_dtype: str = "") -> str:
    """'load X -> x' / 'store acc -> C' / 'atomic_add colsum(x) -> Out' (a tile atomic, by its
    op and value) / 'let c_old views C (no tile is made)'; where the tile's dtype (`tile_dtype`)
    and the tensor's (c["tensor_dtype"]) differ, both are named, as in 'store x (f32) -> Q (i8)'."""
    tile = c.get("tile")
    if c.get("is_view"):
        return f"let {tile or 'view'} views {c.get('tensor')} (no tile is made; read into registers)"
    tdt = c.get("tensor_dtype") or ""
    both = bool(tile_dtype and tdt and tile_dtype != tdt)
    tensor = f"{c.get('tensor')} ({tdt})" if both else f"{c.get('tensor')}"
    if c.get("direction") == "store":
        name = tile or c.get("value") or ""
        src = f"{name} ({tile_dtype})" if both and name else (name or "an expression")
        return f"{c.get('op') or 'store'} {src} -> {tensor}"
    dst = f"{tile} ({tile_dtype})" if both and tile else (tile or "registers")
    return f"load {tensor} -> {dst}"


def region_text(c: dict) -> str:
    """The copy's valid region as the analysis knows it before a launch (`valid_region`), and what
    is left to run time; "" when the analysis has none."""
    reg = c.get("valid_region") or {}
    if not reg.get("text"):
        return ""
    if c.get("direction") == "store":
        rest = "; of those, only the elements valid in the value are written (its region is known at run time)"
    else:
        rest = "; elements outside the tensor read as 0 and are invalid in the tile"
    return f"valid region (inside {c.get('tensor')}): {reg['text']}{rest}"


def fix_text(fix: dict) -> str:
    """The layout the analysis proposes against bank conflicts, in words."""
    if fix.get("kind") == "pad":
        how = f"pad each tile row by {_n(fix.get('pad'), 'element')} (rows of {fix.get('row_length')})"
    else:
        how = f"swizzle the tile (XOR, bits={fix.get('bits')}, base={fix.get('base')}, shift={fix.get('shift')})"
    vec = "" if fix.get("keeps_vectors", True) else "; vector accesses are lost"
    return (f"fix: {how}: {_n(fix.get('wavefronts'), 'wavefront')} (ideal {fix.get('ideal_wavefronts')}), "
            f"tile {int(fix.get('bytes', 0)):,} B{vec}")


def _count(n) -> str:
    return f"{int(n):,}"


def predicted_text(per_cta, predicted, ctas) -> str:
    """'256 per CTA x 10 CTAs = 2,560': a per-CTA prediction scaled to the whole launch (the
    scaled figure is "lo..hi" where partial CTAs make a range)."""
    total = _count(predicted) if isinstance(predicted, int) else str(predicted if predicted is not None else "-")
    if per_cta is None or not ctas:
        return total
    return f"{_count(per_cta)} per CTA x {_n(ctas, 'CTA')} = {total}"


def measured_verdict(m: dict) -> str:
    """'matches the prediction', or 'DIFFERS: <metric>: <why>; ...' (Profile.view_data's reasons)."""
    return "matches the prediction" if m.get("ok") else "DIFFERS: " + "; ".join(m.get("reasons") or [])


def measured_figures(m: dict, ctas) -> str:
    """A line's measured figures (Nsight Compute, whole launch) beside the predictions."""
    return (f"{_count(m.get('sectors', 0))} sectors in {_count(m.get('requests', 0))} requests (predicted "
            f"{predicted_text(m.get('per_cta_sectors'), m.get('predicted_sectors'), ctas)}), "
            f"{_count(m.get('wavefronts', 0))} shared wavefronts, {_count(m.get('bank_conflicts', 0))} from bank "
            f"conflicts (predicted {predicted_text(m.get('per_cta_wavefronts'), m.get('predicted_wavefronts'), ctas)}"
            f"{', ' + m['beyond_copies'] if m.get('beyond_copies') else ''})")


def _measured_text(m: dict, ctas=None) -> str:
    """A copy line's measured figures (Nsight Compute, whole launch) beside the prediction."""
    return f"  measured (Nsight Compute, whole launch): {measured_figures(m, ctas)}: {measured_verdict(m)}"


def _text_threadmap(s) -> str:
    labels = line_labels(s)
    threads = int(s.get("threads") or 0)
    copies = s.get("copies") or []
    dtypes = {t["name"]: t.get("dtype") for t in s.get("tiles") or []}
    head = (f"thread map of {s.get('kernel')}: {threads} threads per CTA "
            f"({(threads + 31) // 32} warps), {len(copies)} copy statement{'s' * (len(copies) != 1)}")
    out = [head]
    if s.get("note"):
        out.append(f"  note: {s['note']}")
    meas = s.get("measured") or {}
    ctas = meas.get("ctas")
    if meas:
        out.append(f"  measured beside predicted: Nsight Compute counted the whole launch ({_n(ctas, 'CTA')}); "
                   f"each prediction is the analysis' per-CTA figure x {_n(ctas, 'CTA')}")
    for c in copies:
        runs = c.get("runs") or []
        dt = dtypes.get(c.get("tile") or "", "")
        title = copy_title(c, dt)
        if dt and dt != (c.get("tensor_dtype") or dt):
            dt = ""     # the title names both dtypes
        out.append(f"line {_label(labels, c['line'])}: {title}, {_shape(c.get('slice_shape') or c.get('shape', []))}"
                   f"{' ' + dt if dt else ''}, vector width {c.get('vector_width')}, "
                   f"{len(runs)} run{'s' * (len(runs) != 1)} by {len({r[0] for r in runs})} threads")
        if c.get("is_view"):
            out.append(f"  coalescing: {_n(c.get('sectors'), 'sector')} (ideal {c.get('ideal_sectors')}); "
                       "no shared-memory side")
            if c.get("measured"):
                out.append(_measured_text(c["measured"], ctas))
            continue
        out.append(f"  coalescing: {_n(c.get('sectors'), 'sector')} (ideal {c.get('ideal_sectors')}); "
                   f"bank conflicts: {_n(c.get('wavefronts'), 'wavefront')} (ideal {c.get('ideal_wavefronts')})")
        reg = region_text(c)
        if reg:
            out.append(f"  {reg}")
        if c.get("measured"):
            out.append(_measured_text(c["measured"], ctas))
        groups: List[list] = []
        for w in c.get("warps") or []:
            key = (w["sectors"], w["ideal_sectors"], w["wavefronts"], w["ideal_wavefronts"])
            if groups and groups[-1][0] == key and groups[-1][1][-1] == w["warp"] - 1:
                groups[-1][1].append(w["warp"])
            else:
                groups.append([key, [w["warp"]]])
        fix = c.get("fix")
        if fix:
            out.append(f"  {fix_text(fix)}")
        if c.get("coalescing_note"):     # cause and fix, from the analysis (tilenb.analysis.copies)
            out.append(f"  uncoalesced: {c['coalescing_note']}")
        if c.get("conflict_note"):
            out.append(f"  bank conflicts: {c['conflict_note']}")
        for key, ws in groups:
            name = "warp" if len(ws) == 1 else "warps"
            flag = ""
            if key[0] > key[1]:
                flag += "  <- uncoalesced"
            if key[2] > key[3]:
                flag += "  <- bank conflicts"
            out.append(f"  {name} {_ranges(ws)}: {_n(key[0], 'sector')} (ideal {key[1]}), "
                       f"{_n(key[2], 'wavefront')} (ideal {key[3]}){flag}")
    with_copy = {int(c["line"]) for c in copies}
    rest = [m for m in meas.get("lines") or [] if int(m["line"]) not in with_copy]
    if rest:
        out.append("measured on lines with no copy statement (Nsight Compute, whole launch):")
        for m in rest:
            out.append(f"  line {_label(labels, m['line'])}: {measured_figures(m, ctas)}: {measured_verdict(m)}")
    for d in s.get("dot_reads") or []:
        out.append(f"line {_label(labels, d['line'])}: dot reads {d.get('tensor')} {_shape(d.get('shape') or [])} "
                   f"itself (operand {d.get('operand')}; no copy statement): {d.get('text')}")
    shared = s.get("shared") or []
    if shared:
        out.append("shared memory besides the copies (per CTA):")
        for r in shared:
            groups: List[list] = []
            for w, n in r.get("warps") or []:
                if groups and groups[-1][0] == n and groups[-1][1][-1] == w - 1:
                    groups[-1][1].append(w)
                else:
                    groups.append([n, [w]])
            per = "; ".join(f"warp {_ranges(ws)}: {n}" if len(ws) == 1 else f"warps {_ranges(ws)}: {n} each"
                            for n, ws in groups)
            held = " (kept in a register)" if r.get("in_registers") else ""
            out.append(f"  line {_label(labels, r['line'])}: {r.get('kind')} of {r.get('tile')}{held}, "
                       f"{'ld' if r.get('direction') == 'load' else 'st'}: {_n(r.get('requests'), 'request')}, "
                       f"{_n(r.get('wavefronts'), 'wavefront')} ({per})")
    tot = s.get("traffic") or {}
    if tot:
        out.append(f"per CTA: global {tot.get('global_ld_sectors')} load / {tot.get('global_st_sectors')} store sectors; "
                   f"shared {tot.get('shared_ld_wavefronts')} load / {tot.get('shared_st_wavefronts')} store wavefronts")
    return "\n".join(out)


STATIC_BUDGET = STATIC_SMEM   # bytes of static shared memory a CTA may have without @dynshared (tilenb.target)


def _text_ruler(s) -> str:
    labels = line_labels(s)
    fp, budget = int(s.get("footprint") or 0), int(s.get("budget") or 0)
    pct = f" ({100.0 * fp / budget:.1f}%)" if budget else ""
    kind = "static budget" if budget == STATIC_BUDGET else "dynamic shared-memory limit"
    out = [f"shared memory of {s.get('kernel')}: footprint {_bytes(fp)} of {_bytes(budget)} {kind}{pct}"]
    if s.get("note"):
        out.append(f"  note: {s['note']}")
    tiles = s.get("tiles") or []
    if tiles:
        w = max(len(t["name"]) for t in tiles)
        out.append("tiles:")
        for t in tiles:
            where = ("registers" if t.get("space") == "registers" or t.get("offset") is None
                     else f"{_bytes(t['bytes'])} at offset {t['offset']}")
            out.append(f"  {t['name']:<{w}}  {t['dtype']} {_shape(t['shape'])}  {where}, "
                       f"lines {_label(labels, t['first_line'])}-{_label(labels, t['last_line'])}")
    ruler = s.get("ruler") or []
    if ruler:
        out.append("live tiles after each line (name@offset+bytes; [bracketed]: what the compiler adds):")
        for r in ruler:
            live = r.get("tiles") or []
            total = sum(int(x["bytes"]) for x in live)
            parts = " ".join(f"{x['name']}@{x['offset']}+{x['bytes']}" if not x.get("kind")
                             else f"[{x['name']}]@{x['offset']}+{x['bytes']}" for x in live) or "-"
            out.append(f"  line {_label(labels, r['line'])}: {parts}  ({_bytes(total)})")
    loops = s.get("loops") or []
    if loops:
        out.append("loops:")
        for lp in loops:
            out.append(f"  line {_label(labels, lp['line'])}: {lp['lowering']}: {lp['why']}")
    return "\n".join(out)


def barrier_share_text(m: dict) -> str:
    """'measured: 12.5% of warp-stall samples here, 40 waiting at the barrier'."""
    return (f"measured: {100.0 * m['share']:.1f}% of warp-stall samples here, "
            f"{_count(m['barrier_samples'])} waiting at the barrier")


def _text_barriers(s) -> str:
    bars = s.get("barriers") or []
    out = [f"barriers of {s.get('kernel')}: {len(bars)} CTA barrier{'s' * (len(bars) != 1)} placed by the compiler"]
    if s.get("note"):
        out.append(f"  note: {s['note']}")
    lines = s.get("lines") or []
    width = max([len(str(lab)) for _, lab, _ in lines] + [1])
    before: Dict[int, list] = {}
    after: Dict[int, list] = {}
    for b in bars:
        (after if b.get("where") == "after" else before).setdefault(int(b["line"]), []).append(b)
    labels = line_labels(s)

    def mark(b):
        tile = f" ({b['tile']})" if b.get("tile") else ""
        m = b.get("measured")
        stall = f" [{barrier_share_text(m)}]" if m else ""
        return (f"{' ' * width}   ---- barrier {b.get('where') or 'before'} line {_label(labels, b['line'])}"
                f"{tile}: {b.get('reason', '')}{stall}")
    waits: Dict[int, list] = {}
    for w in s.get("waits") or []:
        waits.setdefault(int(w["line"]), []).append(w)
    if waits:
        n = sum(map(len, waits.values()))
        out.append(f"  and {n} wait{'s' * (n != 1)} of the generated code besides them (mbarriers, named barriers)")

    def wmark(w):
        return (f"{' ' * width}   .... {w.get('kind', 'wait')} wait {w.get('where') or 'within'} line "
                f"{_label(labels, w['line'])} ({w.get('who', '')}, {w.get('barrier', '')}): {w.get('reason', '')}")
    shown = set()
    prev = None
    meas = s.get("measured") or {}
    if meas:
        out.append(f"  measured: each barrier's share of the warp-stall samples Nsight Compute took over the "
                   f"whole launch ({_n(meas.get('ctas'), 'CTA')})")
    for line, label, text in lines:
        if prev is not None and line != prev + 1:
            out.append(f"{' ' * width}   ...")
        prev = line
        for b in before.get(line, []):
            out.append(mark(b))
        for w in waits.get(line, []):
            out.append(wmark(w))
        out.append(f"{label:>{width}} | {text}")
        for b in after.get(line, []):
            out.append(mark(b))
        shown.add(line)
    for b in bars:
        if int(b["line"]) not in shown:
            out.append(mark(b))
    for b in meas.get("internal") or []:
        out.append(f"  {internal_barrier_text(b, _label(labels, b['line']))}")
    return "\n".join(out)


def internal_barrier_text(b: dict, label: str) -> str:
    """A barrier the code generator added inside a line's code, and its measured stall share."""
    return (f"code-generator barrier inside line {label}: {100.0 * b['share']:.1f}% of warp-stall samples, "
            f"{_count(b['barrier_samples'])} waiting at the barrier")


def fmt_time(ms) -> str:
    if ms is None:
        return "n/a"
    ms = float(ms)
    if ms >= 1.0:
        return f"{ms:.3f} ms"
    return f"{ms * 1000:.1f} us"


def fmt_rate(x, unit) -> str:
    if x is None:
        return "not reported"
    x = float(x)
    for scale, p in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= scale:
            return f"{x / scale:.2f} {p}{unit}"
    return f"{x:.2f} {unit}"


def _text_timing(s) -> str:
    tm = s.get("timing") or {}
    name = s.get("kernel")
    out = []
    if tm.get("backend") != "cuda":
        out.append(f"timing of {name}: no GPU time exists: {tm.get('reason') or 'this kernel runs on the CPU backend (the numpy reference executor)'}.")
    elif not tm.get("kernel_ms"):
        out.append(f"timing of {name}: not launched on the GPU yet{': ' + tm['reason'] if tm.get('reason') else ''}.")
    else:
        out.append(f"timing of {name} on {tm.get('device') or 'the GPU'} ({tm.get('launches', 1)} launch"
                   f"{'es' if tm.get('launches', 1) != 1 else ''}, {tm.get('variant_label') or 'default variant'}):")
        out.append(f"  kernel time (CUDA events): {fmt_time(tm.get('kernel_ms'))}")
        out.append(f"  host time of the call beyond the kernel: {fmt_time(tm.get('host_ms'))}"
                   f"{' (' + tm['host_note'] + ')' if tm.get('host_note') else ''}")
        out.append(f"  achieved: {fmt_rate(tm.get('bytes_per_s'), 'B/s')}, {fmt_rate(tm.get('flops_per_s'), 'FLOP/s')}")
        peak = tm.get("peak")
        if peak:
            bw = tm.get("bytes_per_s")
            if bw:
                out.append(f"  {100.0 * bw / peak['bytes_per_s']:.1f}% of {peak['device']} memory bandwidth "
                           f"{fmt_rate(peak['bytes_per_s'], 'B/s')} ({peak['bytes_source']})")
            if tm.get("flops_per_s") and peak.get("flops_per_s"):
                out.append(f"  {100.0 * tm['flops_per_s'] / peak['flops_per_s']:.2f}% of peak "
                           f"{peak['flops_kind']} {fmt_rate(peak['flops_per_s'], 'FLOP/s')} ({peak['flops_source']})")
        else:
            out.append("  peak figures: not known for this device")
        for v in tm.get("variants") or []:
            if v.get("ms") is None:
                out.append(f"  variant {v['label']}: {v.get('note') or 'not timed'}")
                continue
            best = "  (fastest)" if v.get("best") else ""
            out.append(f"  variant {v['label']}: {fmt_time(v.get('ms'))}{best}")
        if tm.get("note"):
            out.append(f"  {tm['note']}")
    m = tm.get("measured")
    if m:
        out.extend("  " + x for x in measured_timing_lines(m))
    if s.get("note"):
        out.append(f"  note: {s['note']}")
    return "\n".join(out)


def _ratio(a, b) -> str:
    return f" ({a / b:.2f}x)" if b else ""


def measured_timing_lines(m: dict) -> List[str]:
    """The measured part of the timing view (build.measured_timing) in words: the lines the
    text form, the PNG and (by the same figures) the JS view give."""
    dev = f" on {m['device']}" if m.get("device") else ""
    head = f"measured by Nsight Compute (one launch, {_n(m.get('ctas'), 'CTA')}{dev})"
    if m.get("duration_ns"):
        head += f": duration {fmt_time(m['duration_ns'] / 1e6)} under ncu (caches flushed, clocks at base)"
    if m.get("achieved_occupancy_pct") is not None:
        head += f", achieved occupancy {m['achieved_occupancy_pct']:.1f}%"
    out = [head]
    rb, wb = m.get("minimal_read_bytes"), m.get("minimal_write_bytes")
    if rb is not None:
        out.append(f"DRAM read {_bytes(m.get('dram_read_bytes', 0))} against {_bytes(rb)} the launch must read"
                   f"{_ratio(m.get('dram_read_bytes', 0), rb)}; DRAM write {_bytes(m.get('dram_write_bytes', 0))} "
                   f"against {_bytes(wb)} it must write{_ratio(m.get('dram_write_bytes', 0), wb)}")
    out.append(f"DRAM {_bytes(m.get('dram_bytes', 0))} in all"
               + (f" against {_bytes(m['minimal_bytes'])} minimal{_ratio(m.get('dram_bytes', 0), m['minimal_bytes'])}"
                  if m.get("minimal_bytes") else "") + f"; L2 {_bytes(m.get('l2_bytes', 0))}")
    if m.get("dram_note"):
        out.append(m["dram_note"])
    bw, peak = m.get("dram_bytes_per_s"), m.get("peak") or {}
    if bw:
        out.append(f"DRAM bandwidth (DRAM bytes / duration under ncu) {fmt_rate(bw, 'B/s')}"
                   + (f", {100.0 * bw / peak['bytes_per_s']:.1f}% of the {peak['device']} peak "
                      f"{fmt_rate(peak['bytes_per_s'], 'B/s')}" if peak.get("bytes_per_s") else ""))
    r = m.get("roofline")
    if r:
        out.append(f"roofline from the measurement: {r['ai']:.3g} FLOP per DRAM byte at {fmt_rate(r['flops_per_s'], 'FLOP/s')}; "
                   f"predicted from the minimal bytes: {r['predicted_ai']:.3g} FLOP/B, at most "
                   f"{fmt_rate(r['predicted_flops_per_s'], 'FLOP/s')} ({_count(m.get('flops'))} FLOPs in dots)")
    elif m.get("roofline_note"):
        out.append(m["roofline_note"])
    return out


def _text_cuda(s) -> str:
    code = ["".join(tok for _, tok in line) for line in s.get("cuda") or []]
    out = [f"generated CUDA of {s.get('kernel')}: {len(code)} lines"]
    if s.get("note"):
        out.append(f"  note: {s['note']}")
    out.extend(code)
    return "\n".join(out)


_TEXT = {"threadmap": _text_threadmap, "ruler": _text_ruler, "barriers": _text_barriers,
         "timing": _text_timing, "cuda": _text_cuda}


def text(name: str, state: dict) -> str:
    """The deterministic plain-text summary of one view."""
    return _TEXT[name](state)
