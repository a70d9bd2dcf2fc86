"""Turn the suite's results (bench/results/<gpu>.json, from bench/suite.py) into the report.

Usage: python bench/report.py [bench/results/h200.json] [--md docs/benchmarks.md] [--png docs/benchmarks.png]

Guarantees: rewrites only the part of the Markdown file between `<!-- BEGIN RESULTS -->` and
`<!-- END RESULTS -->` (the machine line, the ratio table, the link to the plot); the text
around it (the diagnosis) is left as it is, and a missing file is created with the markers.
The plot (matplotlib, PNG) has one bar per tilenb row against issue 8's target: memory-bound
rows as the fraction of the device-to-device copy bandwidth measured in the same run (peers
beside them), matrix rows as speed relative to the peer, overheads as time relative to the peer.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- BEGIN RESULTS -->", "<!-- END RESULTS -->"


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


def _status(r):
    st = r.get("tilenb_status", "ok")
    if st != "ok":
        return st
    if r.get("verified") is False:
        return f"ok, but differs from the peer (rel. err {r.get('rel_err'):.1e})"
    return "ok"


def _pct(v):
    return f"{v * 100:.0f}%" if v >= 0.1 else f"{v * 100:.2g}%"


METRIC_TEXT = {"frac_copy_bw": "of copy BW", "speed_vs_peer": "of peer speed", "time_ratio": "× peer time",
               "seconds": "s"}


def table(data) -> str:
    out = ["| workload | shape | dtype | tilenb | peer | peer time | tilenb / peer time | tilenb rate | peer rate | "
           "vs target | target | met |", "|" + " --- |" * 12]
    for r in data["rows"]:
        m, v, tgt = r.get("metric"), r.get("metric_value"), r.get("target")
        if v is None:
            vs = "-"
        elif m == "frac_copy_bw":
            vs = f"{_pct(v)} of copy BW"
        elif m == "speed_vs_peer":
            vs = f"{_pct(v)} of peer speed"
        elif m == "time_ratio":
            vs = f"{v:.2f}× peer time"
        else:
            vs = _fmt_s(v)
        if m == "frac_copy_bw" or m == "speed_vs_peer":
            ts = f"≥ {tgt * 100:.0f}%"
        elif m == "time_ratio":
            ts = f"≤ {tgt}×"
        else:
            ts = f"< {_fmt_s(tgt)}"
        met = {True: "yes", False: "**no**", None: "-"}[r.get("meets_target")]
        tl = _fmt_s(r.get("tilenb_s")) if r.get("tilenb_status") == "ok" else _status(r)
        if r.get("tilenb_status") == "ok" and r.get("verified") is False:
            tl += f" (differs: {r.get('rel_err'):.1e})"
        ps = _fmt_s(r.get("peer_s")) if r.get("peer_status") == "ok" else (r.get("peer_status") or "-")
        ratio = f"{r['ratio']:.2f}" if r.get("ratio") is not None else "-"
        out.append(f"| {r['workload']} | {_shape(r)} | {r['dtype']} | {tl} | {r.get('peer') or '-'} | {ps} | {ratio} | "
                   f"{_rate(r, 'tilenb')} | {_rate(r, 'peer')} | {vs} | {ts} | {met} |")
    return "\n".join(out)


def machine_line(data) -> str:
    m = data.get("machine", {})
    bits = [m.get("gpu", "?"), f"{m.get('sms', '?')} SMs", m.get("arch", "?"), f"driver {m.get('driver', '?')}",
            f"torch {m.get('torch', '?')}", f"CuPy {m.get('cupy', '?')}", f"NVRTC {m.get('nvrtc', '?')}",
            f"tilenb commit {m.get('commit', '?')}", m.get("date_utc", "?") + " UTC"]
    cb = data.get("copy_bandwidth_GBps")
    line = "Machine: " + ", ".join(bits) + "."
    if cb:
        line += (f" Device-to-device copy bandwidth in the same run: **{cb:.0f} GB/s** (read + write; "
                 f"{m.get('copy_bandwidth_note', '')}).")
    return line


def plot(data, png: Path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = data["rows"]
    mem, rel = {}, []
    for r in rows:
        if r.get("metric") == "frac_copy_bw":
            key = f"{r['workload']} {_shape(r)} {r['dtype']}"
            e = mem.setdefault(key, {"tilenb": None, "peers": {}})
            if r.get("frac_copy_bw") is not None:
                e["tilenb"] = r["frac_copy_bw"]
            if r.get("peer_frac_copy_bw") is not None:
                e["peers"][r["peer"]] = r["peer_frac_copy_bw"]
            e["target"] = r["target"]
        elif r.get("metric_value") is not None and r.get("headline", True):
            v = r["metric_value"]
            # as "fraction of the target": above 1 meets it
            frac = v / r["target"] if r["metric"] == "speed_vs_peer" else r["target"] / v
            rel.append((f"{r['workload']} {r['dtype']} {_shape(r) if r.get('shape') else ''}\nvs {r['peer'] or 'target'}",
                        frac))
    fig, axes = plt.subplots(1, 2, figsize=(15, max(6, 0.32 * max(len(mem), len(rel)) + 2)),
                             gridspec_kw={"width_ratios": [1.1, 1]})
    ax = axes[0]
    names = list(mem)
    y = range(len(names))
    ax.barh([i + 0.2 for i in y], [mem[n]["tilenb"] or 0 for n in names], height=0.4, color="#1f77b4", label="tilenb")
    ax.barh([i - 0.2 for i in y], [max(mem[n]["peers"].values()) if mem[n]["peers"] else 0 for n in names],
            height=0.4, color="#aaaaaa", label="best peer")
    ax.axvline(0.9, color="red", ls="--", lw=1, label="target 90% (transpose 85%)")
    ax.set_yticks(list(y))
    ax.set_yticklabels(names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("fraction of the device-to-device copy bandwidth (same run)")
    ax.set_xlim(0, 1.1)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title("memory-bound workloads", fontsize=10)
    ax = axes[1]
    if rel:
        ax.barh(range(len(rel)), [v for _, v in rel], color=["#2ca02c" if v >= 1 else "#d62728" for _, v in rel])
        ax.set_yticks(range(len(rel)))
        ax.set_yticklabels([n for n, _ in rel], fontsize=6)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.axvline(1.0, color="black", lw=1)
    ax.set_xlabel("measured / target (log; right of 1 meets issue 8's target)")
    ax.set_title("GEMM, attention (speed vs peer), launch and compile (time vs peer)", fontsize=10)
    gpu = data.get("machine", {}).get("gpu", "")
    fig.suptitle(f"tilenb vs peers on {gpu}, one process per run", fontsize=11)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("json", nargs="?", default=str(ROOT / "bench" / "results" / "h200.json"))
    ap.add_argument("--md", default=str(ROOT / "docs" / "benchmarks.md"))
    ap.add_argument("--png", default=str(ROOT / "docs" / "benchmarks.png"))
    a = ap.parse_args(argv)
    data = json.loads(Path(a.json).read_text())
    png, md = Path(a.png), Path(a.md)
    plot(data, png)
    try:
        rel_png = png.relative_to(md.parent)
    except ValueError:
        rel_png = png
    block = "\n".join([BEGIN, "", machine_line(data), "", table(data), "", f"![tilenb against its peers]({rel_png})", "",
                       END])
    text = md.read_text() if md.exists() else f"# Benchmarks\n\n{BEGIN}\n{END}\n"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        text = head + block + tail
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    md.write_text(text)
    print(f"wrote {md} and {png}")


if __name__ == "__main__":
    main()
