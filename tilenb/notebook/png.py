"""Static PNG pictures of the views that are pictures (thread map, ruler, timing), for
frontends that show no HTML (matplotlib, Agg).

Guarantees: `draw(name, state)` returns PNG bytes for any traits the widget accepts (empty
lists included) without touching pyplot's global figure list, so it is safe inside a kernel
that also plots. Colours match the ES modules: a thread's hue comes from its warp, its shade
from its lane. With a profile (the `measured` traits), the thread map's picture prints each
line's measured figures and verdict, and the timing picture the measured part (its text lines,
the bytes minimal beside measured, the roofline points or the DRAM bandwidth against the memory
roof), in the words of the text form (`summary`). Importing this module raises ImportError
where matplotlib is missing.
"""
from __future__ import annotations

import colorsys
import io
import textwrap

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .summary import (copy_title, fmt_rate, fmt_time, line_labels, measured_figures, measured_timing_lines,
                      measured_verdict, region_text, text as summary_text)

_MONO = "DejaVu Sans Mono"
_PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
            "#ff9da7", "#9c755f", "#8cd17d", "#499894", "#d37295"]
_WRAP = 64


def thread_rgb(thread: int):
    """The RGB colour (0..1) of a thread, as threadmap.js computes it."""
    warp, lane = divmod(int(thread), 32)
    hue = ((warp * 137.508 + 200) % 360) / 360.0
    light = (34 + lane / 31 * 34) / 100.0
    return colorsys.hls_to_rgb(hue, light, 0.68)


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    FigureCanvasAgg(fig)
    fig.savefig(buf, format="png", dpi=80, metadata={"Software": None})
    return buf.getvalue()


def _text_figure(title: str, rows, marks=()) -> bytes:
    """A few lines of text: rows of (label, text); marks: indices of rows drawn as marks."""
    n = max(1, len(rows))
    fig = Figure(figsize=(9, 0.5 + 0.2 * n))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    ax.set_xlim(0, 1)
    ax.set_ylim(n + 1.5, 0)
    ax.text(0.01, 0.8, title, fontsize=11, weight="bold", va="center")
    for i, (label, text) in enumerate(rows):
        y = i + 1.8
        if i in marks:
            ax.axhline(y - 0.45, 0.06, 0.99, color="#c2410c", lw=1.5)
            ax.text(0.07, y, text, fontsize=8, color="#c2410c", va="center")
        else:
            ax.text(0.055, y, label, fontsize=8, family=_MONO, color="#59636e", ha="right", va="center")
            ax.text(0.07, y, text, fontsize=8, family=_MONO, va="center")
    return _png(fig)


def _threadmap(s) -> bytes:
    copies = s.get("copies") or []
    if not copies:
        return _text_figure(f"Thread map of {s.get('kernel')}", [("", "no copy statement")])
    c = copies[max(0, min(len(copies) - 1, int(s.get("selected") or 0)))]
    shape = list(c.get("shape") or [1, 1])
    rows, cols = (1, shape[0]) if len(shape) == 1 else shape[:2]
    width = min(cols, _WRAP)
    segs = -(-cols // width)
    img = np.ones((rows * segs, width, 3))
    for thread, row, col, length in c.get("runs") or []:
        rgb = thread_rgb(thread)
        for k in range(col, col + length):
            img[row * segs + k // width, k % width] = rgb
    # what the analysis knows lies outside the tensor before any launch: greyed
    kr, kc = ((c.get("valid_region") or {}).get("known") or [None, None])[:2]
    r0, r1 = kr or (0, rows)
    c0, c1 = kc or (0, cols)
    outside = (r0, r1, c0, c1) != (0, rows, 0, cols)
    if outside:
        grey = np.array([0.55, 0.55, 0.55])
        for r in range(rows):
            for k in range(cols):
                if not (r0 <= r < r1 and c0 <= k < c1):
                    y, x = r * segs + k // width, k % width
                    img[y, x] = 0.45 * img[y, x] + 0.55 * grey
    # each flag's cause and fix (tilenb.analysis.copies), printed between the figures and the map
    notes = [textwrap.fill(f"{what}: {c[key]}", 140) for what, key in
             (("uncoalesced", "coalescing_note"), ("bank conflicts", "conflict_note")) if c.get(key)]
    region = region_text(c)
    if region:
        notes.append(textwrap.fill(region + (" (grey: outside the tensor)" if outside else ""), 140))
    notes = "\n".join(notes)
    # with a profile: what Nsight Compute counted per line beside the prediction (summary's words)
    meas = s.get("measured") or {}
    mrows = []
    if meas.get("lines"):
        ctas = meas.get("ctas")
        titles = {}
        for cc in copies:
            titles.setdefault(int(cc["line"]), []).append(copy_title(cc))
        mrows.append(f"measured beside predicted: Nsight Compute counted the whole launch ({ctas} CTAs); "
                     f"each prediction is the analysis' per-CTA figure x {ctas} CTAs")
        for mm in meas["lines"]:
            what = "; ".join(titles.get(int(mm["line"]), [])) or "no copy statement"
            mrows.append(textwrap.fill(f"line {line_labels(s).get(int(mm['line']), mm['line'])} ({what}): "
                                       f"{measured_figures(mm, ctas)}: {measured_verdict(mm)}", 150,
                                       subsequent_indent="    "))
    mtext = "\n".join(mrows)
    m_in = 0.105 * (mtext.count("\n") + 1) + 0.08 if mtext else 0.0
    head_in = 0.55 + (0.11 * (notes.count("\n") + 1) if notes else 0.0) + m_in   # inches above the map
    map_in = min(6.0, 0.09 * rows * segs + 0.6)
    foot_in = 0.5                       # the x label and its ticks stay inside the figure
    H = foot_in + map_in + head_in
    fig = Figure(figsize=(7, H))
    strip = rows == 1 and segs > 1      # a 1-row (or 1-D) slice: one strip cut into bands
    left = 0.13 if strip else 0.08
    ax = fig.add_axes((left, foot_in / H, 0.98 - left, map_in / H))
    ax.imshow(img, aspect="auto", interpolation="nearest")
    if strip:
        # the bands are columns of the one row, labelled as such (never as rows 0..segs-1)
        ax.set_yticks(range(segs), [f"{b * width}-{min(cols, (b + 1) * width) - 1}" for b in range(segs)])
        ax.set_ylabel("columns", fontsize=8)
        ax.set_xlabel(f"column within the band (the row wraps every {width})", fontsize=8)
    else:
        ax.set_xlabel("column" + (f" (each row wraps every {width})" if segs > 1 else ""), fontsize=8)
        ax.set_ylabel("row", fontsize=8)
        if segs > 1:
            # one tick per tile row, at its first band
            step = max(1, rows // 16)
            ax.set_yticks([r * segs for r in range(0, rows, step)], [str(r) for r in range(0, rows, step)])
    ax.tick_params(labelsize=7)
    labels = line_labels(s)
    line = labels.get(int(c["line"]), str(c["line"]))
    tile_dt = next((t.get("dtype") or "" for t in s.get("tiles") or [] if t.get("name") == c.get("tile")), "")
    fig.text(0.01, 1 - 0.2 / H, f"Thread map of {s.get('kernel')}, line {line}: {copy_title(c, tile_dt)} "
             f"[{', '.join(str(x) for x in (c.get('slice_shape') or shape))}], vector width {c.get('vector_width')}",
             fontsize=10, weight="bold")
    fig.text(0.01, 1 - 0.38 / H, f"coalescing: {c.get('sectors')} sectors (ideal {c.get('ideal_sectors')}); "
             f"bank conflicts: {c.get('wavefronts')} wavefronts (ideal {c.get('ideal_wavefronts')}); "
             "colour = thread (hue by warp)", fontsize=8)
    if notes:
        fig.text(0.01, 1 - 0.46 / H, notes, fontsize=6.5, va="top", color="#a00000" if c.get("coalescing_note")
                 or c.get("conflict_note") else "#333333")
    if mtext:
        differs = any(not mm.get("ok") for mm in meas["lines"])
        fig.text(0.01, 1 - (head_in - m_in + 0.02) / H, mtext, fontsize=6.5, va="top",
                 color="#a00000" if differs else "#15603d")
    return _png(fig)


def _ruler(s) -> bytes:
    ruler = s.get("ruler") or []
    tiles = s.get("tiles") or []
    colour = {t["name"]: _PALETTE[i % len(_PALETTE)] for i, t in enumerate(tiles)}
    fp, budget = int(s.get("footprint") or 0), int(s.get("budget") or 0)
    labels = line_labels(s)
    n = max(1, len(ruler))
    fig = Figure(figsize=(7, 1.2 + 0.28 * n))
    ax = fig.add_axes((0.1, 0.18 if n > 3 else 0.3, 0.86, 0.6 if n > 3 else 0.4))
    for i, r in enumerate(ruler):
        for t in r.get("tiles") or []:
            ax.broken_barh([(t["offset"], t["bytes"])], (i - 0.4, 0.8), facecolors=colour.get(t["name"], "#888"),
                           edgecolors="white")
            if t["bytes"] > 0.06 * max(budget, fp, 1):
                ax.text(t["offset"] + t["bytes"] * 0.02, i, t["name"], fontsize=7, color="white", va="center")
    ax.axvline(fp, color="#0b63c5", ls="--", lw=1)
    ax.axvline(budget, color="#c2410c", lw=1)
    ax.set_xlim(0, max(budget, fp, 16) * 1.02)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_yticks(range(len(ruler)), [f"line {labels.get(int(r['line']), r['line'])}" for r in ruler], fontsize=7)
    ax.set_xlabel("shared-memory offset (bytes)", fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    fig.text(0.01, 0.93, f"Shared memory of {s.get('kernel')}: footprint {fp:,} B of {budget:,} B "
             "(dashed: footprint, red: budget)", fontsize=10, weight="bold")
    return _png(fig)


def _timing(s) -> bytes:
    tm = s.get("timing") or {}
    m = tm.get("measured") or {}
    launched = tm.get("backend") == "cuda" and tm.get("kernel_ms")
    if not launched and not m:
        return _text_figure(f"Timing of {s.get('kernel')}", [("", x) for x in summary_text("timing", s).splitlines()[:1]])
    variants = [v for v in tm.get("variants") or [] if v.get("ms") is not None] if launched else []
    peak = tm.get("peak")
    mlines = [textwrap.fill(x, 120, subsequent_indent="    ") for x in measured_timing_lines(m)] if m else []
    nrows = sum(x.count("\n") + 1 for x in mlines)
    hb = (2.4 + 0.2 * len(variants)) if launched else 0.5          # inches: the launch's part
    hm = (0.3 + 0.16 * nrows + 1.5 + 0.5) if m else 0.0            # inches: the measured part, below it
    H = hb + hm
    fig = Figure(figsize=(8, H))
    if launched:
        ax = fig.add_axes((0.14, (hm + 0.2 * hb) / H, 0.32 if variants else 0.8, 0.5 * hb / H))
        names, vals, cols = ["achieved"], [tm.get("bytes_per_s") or 0], ["#0b63c5"]
        if peak:
            if peak.get("copy_bytes_per_s"):
                names.append("measured copy"), vals.append(peak["copy_bytes_per_s"]), cols.append("#8fb4e3")
            names.append(f"{peak['device']} peak"), vals.append(peak["bytes_per_s"]), cols.append("#b8c2cc")
        ax.barh(range(len(names)), [v / 1e9 for v in vals], color=cols)
        ax.set_yticks(range(len(names)), names, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("memory bandwidth (GB/s)", fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
        if variants:
            ax2 = fig.add_axes((0.64, (hm + 0.2 * hb) / H, 0.33, 0.5 * hb / H))
            ax2.barh(range(len(variants)), [v["ms"] for v in variants],
                     color=["#0b63c5" if v.get("best") else "#b8c2cc" for v in variants])
            ax2.set_yticks(range(len(variants)), [v["label"] for v in variants], fontsize=7)
            ax2.invert_yaxis()
            ax2.set_xlabel("kernel time per variant (ms)", fontsize=8)
            ax2.tick_params(axis="x", labelsize=7)
        fig.text(0.01, (hm + 0.9 * hb) / H, f"Timing of {s.get('kernel')} on {tm.get('device')}: {fmt_time(tm.get('kernel_ms'))} "
                 f"(host {fmt_time(tm.get('host_ms'))}), {fmt_rate(tm.get('bytes_per_s'), 'B/s')}, "
                 f"{fmt_rate(tm.get('flops_per_s'), 'FLOP/s')}", fontsize=9, weight="bold")
    else:
        first = summary_text("timing", s).splitlines()[0]
        fig.text(0.01, 1 - 0.25 / H, textwrap.shorten(first, 105), fontsize=9, weight="bold", va="center")
    if m:
        _measured_timing(fig, m, H, hm, mlines)
    return _png(fig)


def _measured_timing(fig: Figure, m: dict, H: float, hm: float, lines) -> None:
    """The measured part of the timing picture (build.measured_timing), in the bottom `hm`
    inches of a figure `H` inches tall: its lines of text (summary.measured_timing_lines), the
    bytes minimal beside measured, and the roofline points (or the DRAM bandwidth against the
    memory roof where the kernel claims no FLOPs)."""
    top = hm - 0.12
    fig.text(0.01, top / H, "\n".join(lines), fontsize=7.5, va="top", family=_MONO)
    chart_h = 1.5 / H
    bottom = 0.45 / H
    rows = []
    if m.get("minimal_read_bytes") is not None:
        rows.append(("read: minimal", m["minimal_read_bytes"], "#b8c2cc"))
    rows.append(("read: DRAM measured", m.get("dram_read_bytes", 0), "#0b63c5"))
    if m.get("minimal_write_bytes") is not None:
        rows.append(("write: minimal", m["minimal_write_bytes"], "#b8c2cc"))
    rows.append(("write: DRAM measured", m.get("dram_write_bytes", 0), "#0b63c5"))
    rows.append(("L2 measured", m.get("l2_bytes", 0), "#8fb4e3"))
    ax = fig.add_axes((0.17, bottom, 0.3, chart_h))
    ax.barh(range(len(rows)), [r[1] / 1e3 for r in rows], color=[r[2] for r in rows])
    ax.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("kB of the launch (minimal beside measured)", fontsize=7)
    ax.tick_params(axis="x", labelsize=7)
    peak, r = m.get("peak") or {}, m.get("roofline")
    if r and peak.get("flops_per_s"):
        ax2 = fig.add_axes((0.62, bottom, 0.35, chart_h))
        ridge = peak["flops_per_s"] / peak["bytes_per_s"]
        lo = min(r["ai"], r["predicted_ai"], ridge) / 16
        hi = max(r["ai"], r["predicted_ai"], ridge) * 16
        ax2.loglog([lo, ridge, hi], [lo * peak["bytes_per_s"], peak["flops_per_s"], peak["flops_per_s"]], color="#1f2328", lw=1.5)
        ax2.loglog([r["predicted_ai"]], [r["predicted_flops_per_s"]], "o", mfc="white", mec="#c2410c", label="predicted")
        ax2.loglog([r["ai"]], [r["flops_per_s"]], "o", color="#0b63c5", label="measured")
        ax2.legend(fontsize=6, loc="lower right")
        ax2.set_xlabel("FLOP per byte", fontsize=7)
        ax2.set_ylabel("FLOP/s", fontsize=7)
        ax2.tick_params(labelsize=6)
    elif m.get("dram_bytes_per_s") and peak.get("bytes_per_s"):
        ax2 = fig.add_axes((0.66, bottom, 0.31, chart_h))
        copy = [("measured copy", peak["copy_bytes_per_s"], "#8fb4e3")] if peak.get("copy_bytes_per_s") else []
        bars = [("DRAM under ncu", m["dram_bytes_per_s"], "#0b63c5")] + copy + [(f"{peak['device']} peak", peak["bytes_per_s"], "#b8c2cc")]
        names = [b[0] for b in bars]
        ax2.barh(range(len(bars)), [b[1] / 1e9 for b in bars], color=[b[2] for b in bars])
        ax2.set_yticks(range(len(names)), names, fontsize=7)
        ax2.invert_yaxis()
        ax2.set_xlabel("DRAM bandwidth (GB/s) against the memory roof", fontsize=7)
        ax2.tick_params(axis="x", labelsize=7)


_DRAW = {"threadmap": _threadmap, "ruler": _ruler, "timing": _timing}


def draw(name: str, state: dict) -> bytes:
    """PNG bytes of one view."""
    return _DRAW[name](state)
