"""Question: What does a run of the suite say, as the tables and the figure of docs/benchmarks.md?

Turn the suite's results (bench/results/<gpu>.json, from bench/suite/suite.py) into the report.

Usage: python bench/suite/report.py [RESULTS.json ...] [--md docs/benchmarks.md] [--png docs/benchmarks.png]
(default: bench/results/h200.json). Several files (the two calls of a split run, see
docs/benchmarks.md) are merged: a later file's row replaces an earlier row of the same (workload,
shape, dtype, peer, headline or not), except that a row whose tilenb or peer was not run never
replaces a measured one (the table then pairs times from two runs: the machine lines name both).

Guarantees (no GPU, torch or Triton needed; matplotlib for the plot):
- Rewrites only two marked blocks of the Markdown file: between `<!-- BEGIN TARGETS -->` and
  `<!-- END TARGETS -->` the targets summary (one line per workload, shape and dtype: tilenb's
  figure in issue 8's metric, the target, met or the gap, and tilenb's time over the best peer of
  each kind; a workload of issue 8 missing from the files is a line that says so), and between `<!-- BEGIN RESULTS -->` and `<!-- END RESULTS -->` the machine line,
  one table per family of workloads against the best peer of each kind, every row of the JSON in
  a folded table (with each failed peer's reason), and the link to the plot. The text around
  them (the diagnosis) is left as it is; a missing block is added (targets before results).
- A row timed in several runs of one process (the GEMM rows' `gemm_runs`) gives its figure from
  the runs' median times, followed by the spread of the runs' own speeds ("3 runs: 95.1-97.3%").
- Ratios are always tilenb time / peer time (below 1: tilenb is faster), the JSON's `ratio`.
  "Best peer of a kind" is the fastest row of that kind that ran and passed its check (the SDPA
  cell names the backend). A row marked `headline: false` counts for its kind only when its kind
  differs from the headline row's (so GEMM's Triton row counts, the launch rows without a
  synchronize do not).
- The plot (PNG): memory-bound rows as the fraction of the copy bandwidth measured in the same
  run (tilenb's bar, a marker per peer kind), and the matrix and overhead rows as measured over
  target (right of 1 meets issue 8's target).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BEGIN, END = "<!-- BEGIN RESULTS -->", "<!-- END RESULTS -->"
TBEGIN, TEND = "<!-- BEGIN TARGETS -->", "<!-- END TARGETS -->"

# families of workloads, in report order, with the peer kinds their tables show (in this order)
FAMILIES = [
    ("Elementwise and data movement", ["copy", "add", "scale_rows", "transpose"],
     ["cudaMemcpy", "torch eager", "CuPy"]),
    ("Row reductions", ["rms_norm", "layer_norm", "softmax"], ["torch eager", "torch.compile", "Triton"]),
    ("GEMM", ["gemm"], ["cuBLAS", "Triton"]),
    ("Flash-attention forward", ["attention", "attention_tc", "attention_causal"], ["SDPA", "Triton"]),
    ("Overheads", ["launch_overhead", "cold_compile", "warm_rerun"], ["CuPy RawKernel", "NVRTC"]),
]
LABEL = {"copy": "copy", "add": "add", "scale_rows": "scale_rows", "transpose": "transpose",
         "rms_norm": "RMSNorm", "layer_norm": "LayerNorm", "softmax": "softmax", "gemm": "GEMM",
         "attention": "flash attention (as written)", "attention_tc": "flash attention (each dot a statement)",
         "attention_causal": "causal flash attention (as written)",
         "launch_overhead": "launch overhead (public call)", "cold_compile": "cold compile",
         "warm_rerun": "warm re-run of a cell"}
ORDER = [w for _, ws, _ in FAMILIES for w in ws]
# every (workload, shape, dtype) issue 8 asks for, as bench/suite/suite.py names them: the targets table
# lists the ones a set of results lacks, so a gap in a run shows
ISSUE8 = ([("copy", (1 << 28,), "f32"), ("add", (1 << 28,), "f32"), ("scale_rows", (32768, 4096), "f32"),
           ("transpose", (8192, 8192), "f32")] +
          [(op, sh, dt) for op in ("rms_norm", "layer_norm", "softmax")
           for sh in ((32768, 4096), (16384, 16384), (4096, 131072)) for dt in ("f32", "bf16")] +
          [("gemm", (n, n, n), dt) for n in (4096, 8192) for dt in ("f16", "bf16")] +
          [(w, (b, 16, n, d), "bf16") for w in ("attention", "attention_tc", "attention_causal")
           for b, n in ((2, 4096), (1, 16384))
           for d in (64, 128)] +
          [("launch_overhead", (4096,), "f32"), ("warm_rerun", (64, 4096), "f32")])


def peer_kind(peer):
    """The kind of a peer, from its name in the JSON (torch eager, torch.compile, Triton, ...)."""
    if not peer:
        return None
    p = peer.lower()
    if p.startswith("triton"):
        return "Triton"
    if "torch.compile" in p:
        return "torch.compile"
    if "cublas" in p:
        return "cuBLAS"
    if p.startswith("sdpa"):
        return "SDPA"
    if "rawkernel" in p:
        return "CuPy RawKernel"
    if p.startswith("cupy"):
        return "CuPy"
    if "nvrtc" in p:
        return "NVRTC"
    if "memcpy" in p:
        return "cudaMemcpy"
    if p.startswith("torch"):
        return "torch eager"
    return peer


# ---- formatting ---------------------------------------------------------------------------------
def _fmt_s(s):
    if s is None:
        return "-"
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.1f} µs"


def _shape(r):
    sh = r.get("shape")
    return "×".join(str(x) for x in sh) if sh else "-"


def _rate(r, who):
    if r.get(f"{who}_GBps"):
        return f"{r[f'{who}_GBps']:.0f} GB/s"
    if r.get(f"{who}_TFLOPs"):
        return f"{r[f'{who}_TFLOPs']:.1f} TFLOP/s"
    return "-"


def _pct(v):
    return f"{v * 100:.0f}%" if v >= 0.1 else f"{v * 100:.2g}%"


def _short(text, n=90):
    text = " ".join(str(text).split()).replace("|", "/")
    return text if len(text) <= n else text[:n - 1] + "…"


def _ok_t(r):
    return r.get("tilenb_status") == "ok" and r.get("tilenb_s") is not None


def _ok_p(r):
    return r.get("peer_status") == "ok" and r.get("peer_s") is not None


def _vs(r):
    m, v = r.get("metric"), r.get("metric_value")
    if v is None:
        return "-"
    if m == "frac_copy_bw":
        return f"{_pct(v)} of copy BW"
    if m == "speed_vs_peer":
        return f"{_pct(v)} of peer speed{_runs(r)}"
    if m == "time_ratio":
        return f"{v:.2f}× peer time"
    return _fmt_s(v)


def _runs(r):
    """' (3 runs: 95-97%)' for a row timed in several runs of one process (the GEMM rows'
    `gemm_runs`: the row's figure is of the median times; this is the spread of the runs' own
    speeds), else ''."""
    runs = r.get("gemm_runs") or {}
    sp = [x for x in runs.get("speed_vs_peer") or [] if x is not None]
    if len(sp) < 2:
        return ""
    lo, hi = min(sp) * 100, max(sp) * 100
    return f" ({len(sp)} runs: {lo:.1f}-{hi:.1f}%)"


def _target(r):
    m, t = r.get("metric"), r.get("target")
    if t is None:
        return "-"
    if m in ("frac_copy_bw", "speed_vs_peer"):
        return f"≥ {t * 100:.0f}%"
    if m == "time_ratio":
        return f"≤ {t}×"
    return f"< {_fmt_s(t)}"


def _x(v):
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def _gap(r):
    m, v, t, met = r.get("metric"), r.get("metric_value"), r.get("target"), r.get("meets_target")
    if v is None or met is None:
        return "-"
    if met:
        return "met"
    if m == "frac_copy_bw":
        return f"**−{(t - v) * 100:.0f} points**"
    if m == "speed_vs_peer":
        return f"**{_x(t / v)}× short**"
    return f"**{_x(v / t)}× over**"


# ---- merging and grouping -------------------------------------------------------------------------
def _key(r):
    # headline too: the launch rows time the public call and the prepared launch against one peer
    return (r.get("workload"), tuple(r.get("shape") or ()), r.get("dtype"), r.get("peer"),
            r.get("headline", True) is not False)


def _not_run(r):
    """True for a row that measured nothing new: tilenb or its peer was not run (a skipped
    group, --no-compile-peers, --no-triton)."""
    return (str(r.get("tilenb_status", "")).startswith("not run") or
            str(r.get("peer_status", "")).startswith("not run"))


def merge(datas):
    """One results dict from several runs' (in order): rows keyed by (workload, shape, dtype,
    peer), later runs winning except with rows that were not run; `runs` lists every file's
    machine and copy bandwidth."""
    rows, order = {}, []
    for d in datas:
        for r in d.get("rows", []):
            r = dict(r, peer_kind=r.get("peer_kind") or peer_kind(r.get("peer")))
            k = _key(r)
            if k in rows and _not_run(r) and not _not_run(rows[k]):
                continue
            if k not in rows:
                order.append(k)
            rows[k] = r
    return {"machine": datas[0].get("machine", {}), "copy_bandwidth_GBps": datas[0].get("copy_bandwidth_GBps"),
            "runs": [{"machine": d.get("machine", {}), "copy_bandwidth_GBps": d.get("copy_bandwidth_GBps"),
                      "file": d.get("_file", "")} for d in datas],
            "rows": [rows[k] for k in order]}


def groups(rows):
    """[(workload, shape, dtype), rows of it] in report order (family, workload, first seen)."""
    seen = {}
    for r in rows:
        seen.setdefault((r.get("workload"), tuple(r.get("shape") or ()), r.get("dtype")), []).append(r)
    rank = {w: i for i, w in enumerate(ORDER)}
    keys = sorted(seen, key=lambda k: (rank.get(k[0], len(ORDER)), list(seen).index(k)))
    return [(k, seen[k]) for k in keys]


def headline(rs):
    """The row that carries the target: the first without `headline: false` (else the first)."""
    for r in rs:
        if r.get("headline", True):
            return r
    return rs[0]


def best_by_kind(rs):
    """{kind: (best row or None, why not)}: the fastest peer of each kind that ran and passed."""
    h = headline(rs)
    out = {}
    for r in rs:
        kind = r.get("peer_kind") or peer_kind(r.get("peer"))
        if kind is None:
            continue
        if r.get("headline", True) is False and kind == h.get("peer_kind") and r is not h:
            continue
        best, why = out.get(kind, (None, None))
        if _ok_p(r):
            if best is None or r["peer_s"] < best["peer_s"]:
                best = r
        elif why is None:
            why = str(r.get("peer_status") or "-")
        out[kind] = (best, why)
    return out


def _peer_name(r):
    p = r.get("peer") or ""
    if p.startswith("SDPA best ("):
        return p[len("SDPA best ("):-1].replace("SDPA ", "")
    return ""


def _ratio_of(h, p):
    if _ok_t(h) and _ok_p(p):
        return h["tilenb_s"] / p["peer_s"]
    return None


def _tilenb_cell(h):
    if _ok_t(h):
        s = _fmt_s(h["tilenb_s"])
        if h.get("verified") is False:
            s += f" (**differs: {h.get('rel_err'):.1e}**)"
        return s
    return _short(h.get("tilenb_status", "-"), 70)


def _why_short(why):
    if why is None:
        return "-"
    if why.startswith("not run"):
        return "not run"
    return "failed"


# ---- the targets summary --------------------------------------------------------------------------
def targets_table(data) -> str:
    out = ["| workload | shape | dtype | tilenb | target | gap | tilenb time / best peer time, per kind |",
           "|" + " --- |" * 7]
    compile_rows = []
    have = {(r.get("workload"), tuple(r.get("shape") or ()), r.get("dtype")) for r in data["rows"]}
    missing = [{"workload": w, "shape": list(sh), "dtype": dt, "peer": None,
                "tilenb_status": "not in these results"} for w, sh, dt in ISSUE8 if (w, sh, dt) not in have]
    for (w, shape, dt), rs in groups(data["rows"] + missing):
        h = headline(rs)
        if w == "cold_compile":
            compile_rows.append(h)
            continue
        fig = _vs(h) if _ok_t(h) else _short(h.get("tilenb_status", "-"), 60)
        if _ok_t(h) and h.get("metric") == "speed_vs_peer":
            fig = f"{_pct(h['metric_value'])} of {_peer_label(h)} ({_rate(h, 'tilenb')}){_runs(h)}"
        elif _ok_t(h) and h.get("metric") == "time_ratio":
            fig = f"{h['metric_value']:.2f}× {_peer_label(h)} ({_fmt_s(h['tilenb_s'])} vs {_fmt_s(h.get('peer_s'))})"
        if _ok_t(h) and h.get("verified") is False:
            fig += f" (**differs from the peer: {h.get('rel_err'):.1e}**)"
        peers = []
        for kind, (best, why) in best_by_kind(rs).items():
            if best is None:
                peers.append(f"{kind} {_why_short(why)}")
            else:
                ratio = _ratio_of(h, best)
                nm = _peer_name(best)
                peers.append(f"{kind}{' ' + nm if nm else ''} {ratio:.2f}" if ratio is not None
                             else f"{kind} {_fmt_s(best['peer_s'])}")
        out.append(f"| {LABEL.get(w, w)} | {'×'.join(map(str, shape)) or '-'} | {dt} | {fig} | {_target(h)} | "
                   f"{_gap(h)} | {'; '.join(peers) or '-'} |")
    if compile_rows:
        ok = [r for r in compile_rows if _ok_t(r) and r.get("metric_value") is not None]
        names = ", ".join(r["dtype"] for r in compile_rows)
        if ok:
            vals = [r["metric_value"] for r in ok]
            met = sum(bool(r.get("meets_target")) for r in ok)
            fig = f"{min(vals):.2f}× to {max(vals):.2f}× NVRTC + load + launch of the same CUDA"
            gap = "met" if met == len(ok) else f"**met for {met} of {len(ok)}**"
            nv = [r.get("nvrtc_only_s") for r in ok if r.get("nvrtc_only_s")]
            side = f"NVRTC alone {_fmt_s(min(nv))} to {_fmt_s(max(nv))} a kernel" if nv else "-"
        else:
            fig, gap, side = "failed", "-", "-"
        fails = [f"{r['dtype']}: {_short(r.get('tilenb_status'), 40)}" for r in compile_rows if not _ok_t(r)]
        if fails:
            side += "; " + "; ".join(fails)
        out.append(f"| cold compile | {len(compile_rows)} kernels ({names}) | - | {fig} | {_target(compile_rows[0])} | "
                   f"{gap} | {side} |")
    return "\n".join(out)


def _peer_label(h):
    kind = h.get("peer_kind") or peer_kind(h.get("peer"))
    nm = _peer_name(h)
    if kind == "SDPA":
        return f"SDPA ({nm})" if nm else "SDPA"
    if kind == "CuPy RawKernel":
        return h.get("peer") or kind
    return kind or "peer"


# ---- the per-family tables ----------------------------------------------------------------------------
def family_tables(data) -> str:
    grouped = groups(data["rows"])
    parts = []
    for title, members, kinds in FAMILIES:
        gs = [(k, rs) for k, rs in grouped if k[0] in members]
        if not gs:
            continue
        present = []
        for _, rs in gs:
            for kind in best_by_kind(rs):
                if kind not in present:
                    present.append(kind)
        cols = [k for k in kinds if k in present] + [k for k in present if k not in kinds]
        head = ["workload", "shape", "dtype", "tilenb", "tilenb rate", "vs target", "met"] + \
            [f"{k}: time (tilenb / peer)" for k in cols]
        lines = [f"**{title}**", "", "| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        for (w, shape, dt), rs in gs:
            h = headline(rs)
            bk = best_by_kind(rs)
            cells = []
            for k in cols:
                best, why = bk.get(k, (None, None))
                if best is None:
                    cells.append(_short(why, 60) if why else "")
                    continue
                ratio = _ratio_of(h, best)
                nm = _peer_name(best)
                cells.append(f"{_fmt_s(best['peer_s'])}{' ' + nm if nm else ''}"
                             f"{f' ({ratio:.2f})' if ratio is not None else ''}")
            met = {True: "yes", False: "**no**", None: "-"}[h.get("meets_target")]
            lines.append(f"| {LABEL.get(w, w)} | {'×'.join(map(str, shape)) or '-'} | {dt} | {_tilenb_cell(h)} | "
                         f"{_rate(h, 'tilenb')} | {_vs(h)} | {met} | " + " | ".join(cells) + " |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def table(data) -> str:
    """Every row of the JSON, one per (workload, shape, dtype, peer)."""
    out = ["| workload | shape | dtype | tilenb | peer | peer time | tilenb / peer time | tilenb rate | peer rate | "
           "vs target | target | met | notes |", "|" + " --- |" * 13]
    for r in data["rows"]:
        met = {True: "yes", False: "**no**", None: "-"}[r.get("meets_target")]
        tl = _tilenb_cell(r)
        ps = _fmt_s(r.get("peer_s")) if r.get("peer_status") == "ok" else _short(r.get("peer_status") or "-", 200)
        ratio = f"{r['ratio']:.2f}" if r.get("ratio") is not None else "-"
        notes = "; ".join(str(x) for x in (r.get("notes"), r.get("peer_notes")) if x)
        if r.get("peer_config"):
            notes += ("; " if notes else "") + "config " + ", ".join(f"{k}={v}" for k, v in r["peer_config"].items())
        if r.get("timing_reps") == 1:
            notes += ("; " if notes else "") + "timed once (over 1 s a launch)"
        out.append(f"| {r['workload']} | {_shape(r)} | {r['dtype']} | {tl} | {r.get('peer') or '-'} | {ps} | {ratio} | "
                   f"{_rate(r, 'tilenb')} | {_rate(r, 'peer')} | {_vs(r)} | {_target(r)} | {met} | "
                   f"{_short(notes, 240) or ''} |")
    return "\n".join(out)


def machine_line(data) -> str:
    lines = []
    runs = data.get("runs") or [{"machine": data.get("machine", {}),
                                 "copy_bandwidth_GBps": data.get("copy_bandwidth_GBps")}]
    for i, run in enumerate(runs):
        m = run["machine"]
        bits = [m.get("gpu", "?"), f"{m.get('sms', '?')} SMs", m.get("arch", "?"), f"driver {m.get('driver', '?')}",
                f"torch {m.get('torch', '?')}", f"CuPy {m.get('cupy', '?')}", f"NVRTC {m.get('nvrtc', '?')}"]
        if m.get("triton"):
            bits.append(f"Triton {m['triton']}")
        bits += [f"tilenb commit {m.get('commit') or '?'}", m.get("date_utc", "?") + " UTC"]
        opts = m.get("options") or {}
        head = "Machine" if len(runs) == 1 else f"Run {i + 1}"
        if opts.get("only") and len(runs) > 1:
            head += f" ({', '.join(opts['only'])})"
        line = f"{head}: " + ", ".join(bits) + "."
        cb = run.get("copy_bandwidth_GBps")
        if cb:
            line += (f" Device-to-device copy bandwidth in the same run: **{cb:.0f} GB/s** (read + write; "
                     f"{m.get('copy_bandwidth_note', '')}).")
        wall = m.get("wall_s") or {}
        if wall.get("total_s"):
            line += (f" Wall time {wall['total_s']:.0f} s (precompile {wall.get('precompile_s', '?')} s; groups: " +
                     ", ".join(f"{g} {t:.0f} s" for g, t in (wall.get("groups") or {}).items()) + ").")
        if opts.get("quick"):
            line += " **--quick: a smoke test (few repeats), not a measurement.**"
        lines.append(line)
    return "\n\n".join(lines)


# ---- the plot ----------------------------------------------------------------------------------------
MARKERS = {"torch eager": ("o", "#ff7f0e"), "torch.compile": ("s", "#2ca02c"), "Triton": ("D", "#9467bd"),
           "CuPy": ("^", "#8c564b"), "cudaMemcpy": ("v", "#7f7f7f")}


def plot(data, png: Path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    mem, rel = [], []
    for (w, shape, dt), rs in groups(data["rows"]):
        h = headline(rs)
        if h.get("metric") == "frac_copy_bw":
            peers = {}
            for kind, (best, _) in best_by_kind(rs).items():
                if best is not None and best.get("peer_frac_copy_bw") is not None:
                    peers[kind] = best["peer_frac_copy_bw"]
            mem.append((f"{LABEL.get(w, w)} {'×'.join(map(str, shape))} {dt}", h.get("frac_copy_bw"), peers))
        elif w == "cold_compile" or h.get("metric_value") is None:
            continue
        else:
            v = h["metric_value"]
            frac = v / h["target"] if h["metric"] == "speed_vs_peer" else h["target"] / v
            sh = "×".join(map(str, shape))
            rel.append((f"{LABEL.get(w, w)} {dt} {sh}\nvs {_peer_label(h) if h.get('peer') else 'target'}", frac))
    fig, axes = plt.subplots(1, 2, figsize=(16, max(6, 0.3 * max(len(mem), len(rel)) + 2)),
                             gridspec_kw={"width_ratios": [1.1, 1]})
    ax = axes[0]
    ys = list(range(len(mem)))
    ax.barh(ys, [m[1] or 0 for m in mem], height=0.6, color="#1f77b4", label="tilenb")
    for kind, (mk, col) in MARKERS.items():
        pts = [(m[2][kind], i) for i, m in enumerate(mem) if kind in m[2]]
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=mk, color=col, s=22, zorder=3, label=kind)
    ax.axvline(0.9, color="red", ls="--", lw=1, label="target 90% (transpose 85%)")
    ax.set_yticks(ys)
    ax.set_yticklabels([m[0] for m in mem], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("fraction of the device-to-device copy bandwidth (same run)")
    ax.set_xlim(0, 1.15)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title("memory-bound workloads (bar: tilenb; markers: best peer of each kind)", fontsize=10)
    ax = axes[1]
    if rel:
        ax.barh(range(len(rel)), [v for _, v in rel], color=["#2ca02c" if v >= 1 else "#d62728" for _, v in rel])
        ax.set_yticks(range(len(rel)))
        ax.set_yticklabels([n for n, _ in rel], fontsize=6)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.axvline(1.0, color="black", lw=1)
    ax.set_xlabel("measured / target (log; right of 1 meets issue 8's target)")
    ax.set_title("GEMM, attention (speed vs peer), launch and re-run (time vs peer)", fontsize=10)
    gpu = data.get("machine", {}).get("gpu", "")
    fig.suptitle(f"tilenb vs peers on {gpu}, one process per run", fontsize=11)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


# ---- writing the Markdown -------------------------------------------------------------------------------
def _replace_block(text, begin, end, block, before=None):
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        return head + block + tail
    if before and before in text:
        head, tail = text.split(before, 1)
        return head + block + "\n\n" + before + tail
    return text.rstrip() + "\n\n" + block + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("json", nargs="*", default=[str(ROOT / "bench" / "results" / "h200.json")])
    ap.add_argument("--md", default=str(ROOT / "docs" / "benchmarks.md"))
    ap.add_argument("--png", default=str(ROOT / "docs" / "benchmarks.png"))
    a = ap.parse_args(argv)
    datas = []
    for f in a.json:
        d = json.loads(Path(f).read_text())
        d["_file"] = f
        datas.append(d)
    data = merge(datas)
    png, md = Path(a.png), Path(a.md)
    plot(data, png)
    try:
        rel_png = png.relative_to(md.parent)
    except ValueError:
        rel_png = png
    src = ", ".join(f"`{Path(f).name}`" for f in a.json)
    tblock = "\n".join([TBEGIN, "", f"Generated by `bench/suite/report.py` from {src}; the figures and the machine are in "
                        "the results section below. tilenb time / best peer time per kind: below 1, tilenb is "
                        "faster.", "", targets_table(data), "", TEND])
    block = "\n".join([BEGIN, "", machine_line(data), "", family_tables(data), "",
                       "<details><summary>Every row of the run (one per peer, with each failed peer's reason)"
                       "</summary>", "", table(data), "", "</details>", "",
                       f"![tilenb against its peers]({rel_png})", "", END])
    text = md.read_text() if md.exists() else f"# Benchmarks\n\n{TBEGIN}\n{TEND}\n\n{BEGIN}\n{END}\n"
    text = _replace_block(text, BEGIN, END, block)
    text = _replace_block(text, TBEGIN, TEND, tblock, before=BEGIN)
    md.write_text(text)
    print(f"wrote {md} and {png}")


if __name__ == "__main__":
    main()
