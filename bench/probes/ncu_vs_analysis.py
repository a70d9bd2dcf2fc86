"""Does the analysis count the memory traffic of the memory-bound suite kernels the way the GPU does?

The question, per kernel and per launch: do Nsight Compute's global load / store sectors and
shared load / store wavefronts equal the totals the copy plans (`kernel.analysis().copies`,
tilenb/analysis/copies.py) predict? Three modes:

    python3 bench/probes/ncu_vs_analysis.py --json            # predictions only, no GPU needed
    python3 bench/probes/ncu_vs_analysis.py --run             # launch each kernel once (under ncu)
    python3 bench/probes/ncu_vs_analysis.py --compare CSV     # ncu's CSV (--csv --page raw) vs predictions
    python3 bench/probes/ncu_vs_analysis.py --ncu-command     # the ncu command line to run --run under

How a prediction is made (one launch). A copy plan's figures are per CTA: `CopyPlan.warps` holds,
for each busy warp, its sectors and wavefronts summed over the warp's requests; their sum over the
warps is the CTA's figure (it equals `CopyPlan.sectors` / `.wavefronts`). Times the CTAs of the
grid gives the launch's total. A "load" plan adds its sectors to global loads and its wavefronts
(the shared tile it fills; 0 for a register tile or a let view) to shared stores; a "store" plan
adds its sectors to global stores and its wavefronts (the shared tile it reads) to shared loads.
The analysis is run with the launch's real extents for the runtime dims (`analyze(kir,
extents=...)`), so row pitches are the real ones; the sector figure is the worst over the slice
start's possible positions in a sector, which for these kernels is the actual start (their slices
start at multiples of 32 bytes).

Full tiles. The copy plans describe a CTA whose window is wholly inside the tensor: they do not
model the guarded edge CTAs (fewer sectors and wavefronts). So every case is one of two kinds:
- "exact": the shape is a multiple of the tile along every tiled dimension (but not along the
  others, nor a power of two where the kernel allows), so every CTA is full and the prediction
  is exact: measured must equal predicted;
- "edge": some CTAs are partial; the prediction is then given as a range, from the full CTAs only
  (lower) to all CTAs counted as full (upper), and the measurement should fall inside it.

The shared-memory accesses that are not a tensor copy's shared side are added from
`kernel.analysis().shared_traffic` (tilenb/analysis/shared_traffic.py): a CTA-wide reduction's
passes over its shared tiles (`rowsum(x * x)` reads x), a tile broadcast in a pass, the partials'
stores and loads, the result's store, and the [1, 1] tiles a vector statement reads once into a
register; the totals are `Analysis.traffic()`. Tensors read inline by a reduction (no copy plan)
are still not counted.

Copies into a whole shared tile may be issued as cp.async (LDGSTS; tilenb/codegen/generic/vectors.py
`async_copy`): Nsight Compute counts their global sectors under ..._op_ldgsts, not ..._op_ld, and
their shared side not among shared store wavefronts. `--compare` adds the ldgsts sectors to the
measured global loads when the CSV has that metric, and says so.

Autotune: every launch passes `variant=` explicitly, so no variant is timed and each kernel runs
exactly once; the ncu command also filters kernels by the generated symbols (`-k regex:`), so
nothing else (CuPy, copies) is profiled. Rows of the CSV are matched to cases by kernel symbol
(`tilenb.codegen.kernel_symbol`, ncu's "Kernel Name"); a symbol launched twice (an exact and an
edge shape) is matched in launch order. Host (numpy) arrays are passed; the runtime copies them
to and from the device with memcpy, which is not a kernel.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "suite"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "codegen"))

import tilenb  # noqa: E402
from tilenb.analysis import analyze  # noqa: E402
from tilenb.codegen import kernel_symbol  # noqa: E402

from tilenb.examples import suite_kernels  # noqa: E402

# the metric names and the raw-page reader live in the package (kernel.profile reads the same)
from tilenb.runtime.gpu.ncu import EXTRA_METRICS, LDGSTS, METRICS, read_raw  # noqa: E402


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass
class Case:
    """One launch: kernel `name` of module `module` ("suite" or "stores"), variant `tune`, runtime
    dims `dims`, grid (x, y) and how many of its CTAs are full tiles; `make` builds the arguments."""
    module: str
    name: str
    tune: Dict[str, int]
    dims: Dict[str, int]
    grid: Tuple[int, int]
    full_ctas: int
    make: Callable[[np.random.Generator], tuple]
    symbol: str = ""
    notes: List[str] = field(default_factory=list)

    @property
    def ctas(self) -> int:
        return self.grid[0] * self.grid[1]

    @property
    def kind(self) -> str:
        return "exact" if self.full_ctas == self.ctas else "edge"


def _arr(rng, shape, dt):
    import ml_dtypes
    a = rng.standard_normal(shape).astype(np.float32)
    return a.astype(ml_dtypes.bfloat16) if dt == "bf16" else a


def _zeros(shape, dt):
    import ml_dtypes
    return np.zeros(shape, ml_dtypes.bfloat16 if dt == "bf16" else np.float32)


def cases() -> List[Case]:
    out: List[Case] = []
    # elementwise, 1-D: TILE 4096 per CTA
    T = 4096
    for n, tag in ((T * 300, "exact"), (T * 300 + 1000, "edge")):      # 4.9 MB f32 each
        out.append(Case("suite", "copy_f32", {"TILE": T, "NT": 256}, {"N": n}, (cdiv(n, T), 1), n // T,
                        lambda rng, n=n: (_arr(rng, (n,), "f32"), _zeros((n,), "f32"))))
    n = T * 300
    out.append(Case("suite", "add_f32", {"TILE": T, "NT": 256}, {"N": n}, (cdiv(n, T), 1), n // T,
                    lambda rng, n=n: (_arr(rng, (n,), "f32"), _arr(rng, (n,), "f32"), _zeros((n,), "f32"))))
    # scale_rows: R rows of D = 4096 per CTA; M = 300 rows (not a power of two)
    m = 300
    out.append(Case("suite", "scale_rows_f32", {"R": 2, "D": 4096, "NT": 256}, {"M": m}, (cdiv(m, 2), 1), m // 2,
                    lambda rng, m=m: (_arr(rng, (m, 4096), "f32"), _arr(rng, (m, 1), "f32"),
                                      _zeros((m, 4096), "f32"))))
    # transpose: T x T tiles; M = 1216 = 19 * 64, N = 1472 = 23 * 64 (multiples of 64, not of 128)
    for (mm, nn), tag in (((1216, 1472), "exact"), ((1200, 1500), "edge")):
        t = 64
        g = (cdiv(nn, t), cdiv(mm, t))
        out.append(Case("suite", "transpose_f32", {"T": t, "NT": 256}, {"M": mm, "N": nn}, g,
                        (nn // t) * (mm // t),
                        lambda rng, mm=mm, nn=nn: (_arr(rng, (mm, nn), "f32"), _zeros((nn, mm), "f32"))))
    # row kernels: one row of D = 4096 per CTA (R = 1), M = 300 rows
    m, d = 300, 4096
    for dt in ("f32", "bf16"):
        tune = {"R": 1, "D": d, "NT": 256}
        out.append(Case("suite", f"rms_norm_{dt}", tune, {"M": m}, (m, 1), m,
                        lambda rng, dt=dt, m=m: (_arr(rng, (m, d), dt), _arr(rng, (1, d), dt), _zeros((m, d), dt),
                                            np.float32(1e-5))))
        out.append(Case("suite", f"layer_norm_{dt}", tune, {"M": m}, (m, 1), m,
                        lambda rng, dt=dt, m=m: (_arr(rng, (m, d), dt), _arr(rng, (1, d), dt), _arr(rng, (1, d), dt),
                                            _zeros((m, d), dt), np.float32(1e-5))))
        out.append(Case("suite", f"softmax_{dt}", tune, {"M": m}, (m, 1), m,
                        lambda rng, dt=dt, m=m: (_arr(rng, (m, d), dt), _zeros((m, d), dt))))
    # the store-width probes (tests/codegen/test_sass_widths.py STORES): rows of 8 per CTA, M = 1000 rows
    if (ROOT / "bench" / "probes" / "store_width_probe.py").exists():
        m = 1000
        out.append(Case("stores", "scale_f32", {}, {"M": m}, (m // 8, 1), m // 8,
                        lambda rng: (_arr(rng, (m, 256), "f32"), _zeros((m, 256), "f32"))))
        out.append(Case("stores", "scale_bf16", {}, {"M": m}, (m // 8, 1), m // 8,
                        lambda rng: (_arr(rng, (m, 256), "bf16"), _zeros((m, 256), "bf16"))))
        out.append(Case("stores", "widen_i8", {}, {"M": m}, (m // 8, 1), m // 8,
                        lambda rng: (rng.integers(-128, 128, (m, 256)).astype(np.int8),
                                     np.zeros((m, 256), np.int32))))
        out.append(Case("stores", "offset_window", {}, {"M": m, "N": 260}, (m // 8, 2), (m // 8) * 2,
                        lambda rng: (_arr(rng, (m, 260), "f32"), _zeros((m, 260), "f32"))))
    return out


def sources() -> Dict[str, str]:
    src = {"suite": suite_kernels.program()}
    if (ROOT / "bench" / "probes" / "store_width_probe.py").exists():
        from test_sass_widths import STORES
        src["stores"] = STORES
    return src


def predict(case: Case, module) -> dict:
    """The analysis's totals for one launch of `case` (see the module docstring), with the per-CTA
    figures of each copy plan."""
    k = getattr(module, case.name)
    kir = k.ir(**case.tune)
    case.symbol = kernel_symbol(kir)
    a = analyze(kir, extents=case.dims)
    per_cta = dict.fromkeys(METRICS, 0)
    plans = []
    for cp in a.copies:
        sec = sum(w.sectors for w in cp.warps)
        wf = sum(w.wavefronts for w in cp.warps)
        assert sec == cp.sectors and wf == cp.wavefronts, (case.name, cp.line)
        if cp.direction == "load":
            per_cta["global_ld_sectors"] += sec
            per_cta["shared_st_wavefronts"] += wf
        else:
            per_cta["global_st_sectors"] += sec
            per_cta["shared_ld_wavefronts"] += wf
        plans.append({"line": cp.line, "direction": cp.direction, "tensor": cp.tensor, "tile": cp.tile,
                      "shape": list(cp.shape), "vector_width": cp.vector_width, "warps": len(cp.warps),
                      "sectors_per_cta": sec, "wavefronts_per_cta": wf, "is_view": cp.is_view, "worst_start_byte": cp.worst_start_byte,
                      "swizzle": None if cp.swizzle is None else str(cp.swizzle)})
    extra = []
    for t in a.shared_traffic:      # reductions' passes and partials, broadcasts, register scalars
        per_cta["shared_ld_wavefronts" if t.direction == "load" else "shared_st_wavefronts"] += t.wavefronts
        extra.append(t.to_json())
    assert per_cta == a.traffic(), case.name
    low = dict(per_cta)
    high = dict(per_cta)
    for m in METRICS:
        low[m] = per_cta[m] * case.full_ctas
        high[m] = per_cta[m] * case.ctas
    return {"kernel": case.name, "symbol": case.symbol, "module": case.module, "tune": case.tune,
            "dims": case.dims, "grid": list(case.grid), "ctas": case.ctas, "full_ctas": case.full_ctas,
            "kind": case.kind, "threads": a.threads, "per_cta": per_cta, "predicted": low,
            "predicted_upper": high, "copies": plans, "shared_traffic": extra, "notes": case.notes}


def predictions(backend: str = "cpu"):
    mods = {k: tilenb.compile(s, backend=backend) for k, s in sources().items()}
    cs = cases()
    return cs, mods, [predict(c, mods[c.module]) for c in cs]


def run() -> int:
    """Launch every case once on the GPU (the caller runs this under ncu)."""
    cs, mods, _ = predictions("cuda")
    rng = np.random.default_rng(0)
    for c in cs:
        args = c.make(rng)
        getattr(mods[c.module], c.name)(*args, variant=dict(c.tune) if c.tune else None)
        print(f"# launched {c.symbol} grid={c.grid}", file=sys.stderr)
    return 0


def ncu_command() -> str:
    cs, _, _ = predictions()
    regex = "|".join(sorted({c.symbol for c in cs}))
    metrics = ",".join(list(METRICS.values()) + list(EXTRA_METRICS))
    return (f"ncu --csv --page raw --clock-control none -k 'regex:^({regex})$' --metrics {metrics} "
            f".venv/bin/python bench/probes/ncu_vs_analysis.py --run > /tmp/ncu.csv")


def read_ncu(path: Path) -> List[dict]:
    """Rows of ncu's raw-page CSV (one per profiled kernel launch), metric values as floats."""
    return read_raw(path.read_text(errors="replace"))


def compare(path: Path) -> int:
    _, _, preds = predictions()
    rows = read_ncu(path)
    by_name: Dict[str, List[dict]] = {}
    for r in rows:
        by_name.setdefault(r["name"], []).append(r)
    used: Dict[str, int] = {}
    print("| kernel | kind | metric | predicted | measured | ratio | verdict |")
    print("|---|---|---|---:|---:|---:|---|")
    exact = checked = in_range = edge_checked = 0
    ldgsts_seen = False
    for p in preds:
        i = used.get(p["symbol"], 0)
        got = by_name.get(p["symbol"], [])
        if i >= len(got):
            print(f"| {p['symbol']} | {p['kind']} | (all) | | not in the CSV | | missing |")
            continue
        used[p["symbol"]] = i + 1
        vals = got[i]["values"]
        for m, metric in METRICS.items():
            if metric not in vals:
                continue
            meas = vals[metric]
            if m == "global_ld_sectors" and LDGSTS in vals and vals[LDGSTS]:
                meas += vals[LDGSTS]
                ldgsts_seen = True
            lo, hi = p["predicted"][m], p["predicted_upper"][m]
            ratio = f"{meas / lo:.3f}" if lo else ("-" if meas == 0 else "inf")
            if p["kind"] == "exact":
                checked += 1
                ok = meas == lo
                exact += ok
                verdict = "exact" if ok else "differs"
                shown = f"{lo}"
            else:
                edge_checked += 1
                ok = lo <= meas <= hi
                in_range += ok
                verdict = "in range" if ok else "outside"
                shown = f"{lo}..{hi}"
            print(f"| {p['symbol']} | {p['kind']} | {m} | {shown} | {int(meas)} | {ratio} | {verdict} |")
    print()
    print(f"exact cases: {exact} of {checked} metric figures equal the prediction; "
          f"edge cases: {in_range} of {edge_checked} within [full CTAs only, all CTAs as full].")
    if ldgsts_seen:
        print("(measured global loads include cp.async (LDGSTS) sectors: "
              f"{METRICS['global_ld_sectors']} + {LDGSTS})")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--json", action="store_true", help="print the predictions as JSON (no GPU needed)")
    g.add_argument("--run", action="store_true", help="launch each kernel once (run under ncu)")
    g.add_argument("--compare", type=Path, metavar="NCU_CSV", help="compare ncu's raw CSV with the predictions")
    g.add_argument("--ncu-command", action="store_true", help="print the ncu command line")
    ns = ap.parse_args(argv)
    if ns.json:
        _, _, preds = predictions()
        print(json.dumps(preds, indent=1))
        return 0
    if ns.run:
        return run()
    if ns.ncu_command:
        print(ncu_command())
        return 0
    return compare(ns.compare)


if __name__ == "__main__":
    raise SystemExit(main())
