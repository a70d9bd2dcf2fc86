"""Question: for every kernel of the tiles (02), barriers (04), coalescing (05) and measured-beside-
predicted (11) tutorials and the benchmark suite's memory-bound kernels, do the sectors and
wavefronts Nsight Compute counts per tile line equal the analysis' prediction, or differ by a
reason the profile states?

    .venv/bin/python bench/probes/ncu_tutorials.py --out DIR                 # on a GPU with ncu
    .venv/bin/python bench/probes/ncu_tutorials.py --out DIR --predict-only  # no GPU: predictions only

Each kernel is profiled once, at an awkward shape (not a multiple of its tiles): a tutorial
kernel at the first launch its tutorial makes (the tutorials choose such shapes), a suite kernel
at the shape `bench/probes/ncu_vs_analysis.py` uses (its "edge" case where it has one: a
ragged last CTA). The launches of a tutorial are recorded by running its source
(notebooks/src/NN_*.py) cell by cell in an IPython shell on the CPU backend, with
`tilenb.runtime.launch.launch` wrapped to keep a copy of the arguments of each kernel's first
launch; the kernel is then profiled on the CUDA backend from the same checked program
(`kernel.profile`, one ncu process a launch: seconds each). The verdict per (line, metric) is
`Profile.compare` (the prediction `predicted_lines` makes: the copy plans plus the shared traffic
beyond them, times the CTAs, a range when some CTAs are partial, plus the per-thread element
accesses over the launch): "matches" inside the range; "accounted" where it differs by a
mechanism the reason names and the prediction corrected by it contains the measurement (a
helper several lines call, shared reads NVRTC serves from registers, a runtime start that is
sector-aligned at this launch, ...); else "DIFFERS" with the reason. A suite case knows its full CTAs; a tutorial launch is compared
with every CTA counted full, so a ragged edge reads as "fewer than predicted: ... masked edge
CTAs" (the reason says so).

Writes DIR/ncu_tutorials.md (the table: source, kernel, line, metric, predicted, measured,
verdict / reason), DIR/ncu_tutorials.json (the same rows), DIR/profiles.txt (each Profile's
text) and, per profiled kernel, DIR/pages/<kernel>/ (ncu's raw and source pages and the job:
what tests/runtime/data/ncu_h200 holds for scale_rows). `--budget-s` (default 330) bounds the
profiling: kernels not reached are listed as "not profiled (time budget)". Everything but the
ncu runs works without a GPU (`--predict-only`, and the CI test of the table on the saved
capture: tests/runtime/test_ncu_tutorials_probe.py).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

TUTORIALS = ("11", "05", "02", "04")
MEMORY_BOUND = ("copy_f32", "add_f32", "scale_rows_f32", "transpose_f32", "rms_norm_f32", "rms_norm_bf16",
                "layer_norm_f32", "layer_norm_bf16", "softmax_f32", "softmax_bf16")


@dataclass
class Launch:
    """One launch to profile: where it comes from ("tutorial 05" / "suite"), the kernel (on the
    backend it was recorded on), the grid (None: the kernel's @grid), copies of the arguments,
    the @autotune values and, where known, the CTAs wholly inside the tensors."""
    source: str
    kernel: object
    grid: object
    args: tuple
    tune: Dict[str, int] = field(default_factory=dict)
    full_ctas: Optional[int] = None

    @property
    def name(self) -> str:
        return self.kernel.name


def _copy(a):
    return np.array(a, copy=True) if isinstance(a, np.ndarray) else a


# ---- the tutorials' launches ------------------------------------------------------------------
MINILM_HIDDEN, MINILM_VOCAB = 384, 30522      # all-MiniLM-L6-v2's widths (its config.json)


def _standin_datasets():
    """Stand-ins for the `tilenb.datasets` functions the profiled tutorials call, used only where
    the MiniLM package is not installed (the device machine has no network): arrays of the real
    shapes and dtypes (weights [384, 384] f32, the embedding table [30522, 384] f32, int64 token
    ids), seeded random values, and the tokenizer's word split without the vocabulary (the real
    wordpieces of the tutorials' texts have the same counts: 41 ids with [CLS]/[SEP], 28
    pieces). The launches' shapes, which are all the probe needs, are the tutorial's own."""
    import tilenb.datasets as D
    rng = np.random.default_rng(0)
    cache: Dict[str, np.ndarray] = {}

    class Weights(dict):
        def __missing__(self, key):
            shape = (MINILM_VOCAB, MINILM_HIDDEN) if "word_embeddings" in key else (MINILM_HIDDEN, MINILM_HIDDEN)
            self[key] = (0.05 * rng.standard_normal(shape)).astype(np.float32)
            return self[key]

    weights = Weights()

    def table():
        if "table" not in cache:
            cache["table"] = (0.05 * rng.standard_normal((MINILM_VOCAB, MINILM_HIDDEN))).astype(np.float32)
        return cache["table"]

    def ids(text):
        words = ["[CLS]"] + D._words(text) + ["[SEP]"]
        return np.array([sum(map(ord, w)) * 7919 % MINILM_VOCAB for w in words], dtype=np.int64)

    return {"minilm_weights": lambda: weights, "token_embedding_table": table,
            "token_ids": ids, "tokenize": D._words}


def record_tutorial(number: str) -> Tuple[List[Launch], List[str]]:
    """Run tutorial `number`'s source on the CPU backend in an IPython shell and return the first
    launch of each kernel it launches, and the cells that failed (a cell whose error is the
    lesson fails too; the run goes on)."""
    sys.path.insert(0, str(ROOT / "notebooks"))
    import importlib.util
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output
    import tilenb.runtime.launch as L

    spec = importlib.util.spec_from_file_location("tilenb_notebooks_build", ROOT / "notebooks" / "build.py")
    nb_build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nb_build)
    src = next((ROOT / "notebooks" / "src").glob(f"{number}_*.py"))
    cells = [c for kind, c, _ in nb_build.parse(src.read_text(encoding="utf-8")) if kind == "code"]
    saved_backend = os.environ.get("TILENB_BACKEND")
    os.environ["TILENB_BACKEND"] = "cpu"
    shell = InteractiveShell.instance()
    shell.user_ns.clear()
    shell.init_user_ns()
    seen: Dict[int, Launch] = {}
    original = L.launch

    def recording(kernel, grid, args, *a, **kw):
        if id(kernel) not in seen:
            tune = kw.get("variant") or {}
            seen[id(kernel)] = Launch(f"tutorial {number}", kernel, grid, tuple(_copy(x) for x in args), dict(tune))
        return original(kernel, grid, args, *a, **kw)

    failed = []
    here = os.getcwd()
    L.launch = recording
    import tilenb.datasets as D
    saved_datasets = {}
    try:
        D.model_dir()
    except D.DatasetError:          # no MiniLM package here: stand-ins of the same shapes
        for name, fn in _standin_datasets().items():
            saved_datasets[name] = getattr(D, name)
            setattr(D, name, fn)
    try:
        os.chdir(ROOT / "notebooks")          # where the tutorials run (their data paths)
        for i, code in enumerate(cells):
            with capture_output():
                res = shell.run_cell(code, silent=True)
            if not res.success:
                failed.append(f"cell {i + 1}: {type(res.error_in_exec or res.error_before_exec).__name__}")
    finally:
        L.launch = original
        for name, fn in saved_datasets.items():
            setattr(D, name, fn)
        os.chdir(here)
        if saved_backend is None:
            os.environ.pop("TILENB_BACKEND", None)
        else:
            os.environ["TILENB_BACKEND"] = saved_backend
    return list(seen.values()), failed


# ---- the suite's memory-bound kernels ---------------------------------------------------------
def suite_launches() -> List[Launch]:
    """The memory-bound suite kernels at the shapes of ncu_vs_analysis.py (its edge case where it
    has one), with their full CTAs."""
    sys.path.insert(0, str(ROOT / "bench" / "probes"))
    import ncu_vs_analysis as V
    import tilenb
    mod = tilenb.compile(V.sources()["suite"], backend="cpu")
    chosen: Dict[str, object] = {}
    for c in V.cases():
        if c.module == "suite" and c.name in MEMORY_BOUND and (c.name not in chosen or c.kind == "edge"):
            chosen[c.name] = c
    rng = np.random.default_rng(0)
    out = []
    for name in MEMORY_BOUND:
        c = chosen.get(name)
        if c is not None:
            out.append(Launch("suite", getattr(mod, c.name), c.grid, tuple(c.make(rng)), dict(c.tune), c.full_ctas))
    return out


# ---- profiling and the table ------------------------------------------------------------------
def on_cuda(kernel):
    """The same kernel (the same checked program) on the CUDA backend."""
    from tilenb.runtime.module import Module
    if kernel.module.backend == "cuda":
        return kernel
    return Module(kernel.module.checked, "cuda").kernels[kernel.name]


def _pred_text(r) -> str:
    from tilenb.runtime.gpu.profile import _beyond_text
    lo, hi = r["predicted"], r["predicted_upper"]
    return (str(lo) if lo == hi else f"{lo}..{hi}") + (_beyond_text(r.get("beyond_copies"), r.get("ctas", 1))
                                                        if r.get("beyond_copies") else "")


def table_rows(source: str, name: str, prof=None, analysis=None, full_ctas=None, why: str = "",
               prediction=None) -> List[dict]:
    """The table's rows for one kernel: with a Profile, one per `prof.compare(analysis,
    full_ctas)` row (verdict "matches" / "DIFFERS" and the reason); without one, the
    prediction's rows (a `LaunchPrediction`, if any) with measured "-" and verdict "not
    measured: why", or one row saying why."""
    out = []
    if prof is not None:
        for r in prof.compare(analysis, full_ctas):
            out.append({"source": source, "kernel": name, "line": r["line"], "metric": r["metric"],
                        "predicted": r["predicted"], "predicted_upper": r["predicted_upper"],
                        "beyond_copies": r["beyond_copies"], "ctas": prof.ctas, "measured": r["measured"],
                        "verdict": "matches" if r["ok"] else "accounted" if r.get("accounted") else "DIFFERS",
                        "reason": r["reason"]})
        return out
    rows = prediction.rows if prediction is not None else []
    for r in rows:
        out.append({"source": source, "kernel": name, "line": r["line"], "metric": r["metric"],
                    "predicted": r["predicted"], "predicted_upper": r["predicted_upper"],
                    "beyond_copies": r["beyond_copies"], "ctas": prediction.ctas, "measured": None,
                    "verdict": "not measured", "reason": why})
    if not out:
        out.append({"source": source, "kernel": name, "line": None, "metric": "", "predicted": None,
                    "predicted_upper": None, "beyond_copies": [], "ctas": None, "measured": None,
                    "verdict": "not measured", "reason": why})
    return out


def markdown(rows: List[dict], header: str = "") -> str:
    """The rows as a markdown table (kernel, line, metric, predicted, measured, verdict / reason)
    and a count of the verdicts."""
    out = [header] if header else []
    out += ["| source | kernel | line | metric | predicted | measured | verdict / reason |",
            "|---|---|---:|---|---:|---:|---|"]
    for r in rows:
        pred = "" if r["predicted"] is None else _pred_text(r)
        meas = "-" if r["measured"] is None else str(r["measured"])
        verdict = r["verdict"] + (f": {r['reason']}" if r["reason"] else "")
        out.append(f"| {r['source']} | {r['kernel']} | {'' if r['line'] is None else r['line']} | {r['metric']} | "
                   f"{pred} | {meas} | {verdict.replace('|', '/')} |")
    counts: Dict[str, int] = {}
    for r in rows:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    out += ["", "verdicts: " + ", ".join(f"{v} {n}" for v, n in sorted(counts.items()))]
    return "\n".join(out) + "\n"


def profile_one(launch: Launch, pages: Optional[Path], predict_only: bool):
    """(rows, Profile or None, seconds) for one launch."""
    from tilenb.lang.diagnostics import TileError
    from tilenb.runtime.gpu.profile import ProfileUnavailable, predict_launch
    t0 = time.perf_counter()
    k = launch.kernel
    try:
        pred = predict_launch(k, launch.grid, launch.args, launch.tune or None, launch.full_ctas)
    except TileError as e:
        return table_rows(launch.source, launch.name, why=f"the launch does not bind: {e.message}"), None, 0.0
    if predict_only:
        return table_rows(launch.source, launch.name, why="--predict-only", prediction=pred), None, 0.0
    keep = None
    if pages is not None:
        keep = pages / f"{launch.source.replace(' ', '')}-{launch.name}"
    try:
        kc = on_cuda(k)
        args = tuple(_copy(a) for a in launch.args)
        prof = kc.profile(launch.grid, *args, keep=str(keep) if keep else None, **(launch.tune or {}))
    except ProfileUnavailable as e:
        return table_rows(launch.source, launch.name, why=e.message, prediction=pred), None, time.perf_counter() - t0
    except TileError as e:
        return (table_rows(launch.source, launch.name, why=f"{type(e).__name__}: {e.message}", prediction=pred),
                None, time.perf_counter() - t0)
    finally:
        if keep is not None:
            for junk in ("args.npz", "outputs.npz"):
                (keep / junk).unlink(missing_ok=True)
    a = prof.predicted if prof.predicted is not None else prof.analysis(kc)
    return table_rows(launch.source, launch.name, prof, a, launch.full_ctas), prof, time.perf_counter() - t0


def collect(tutorials, with_suite: bool, only=None) -> Tuple[List[Launch], List[str]]:
    launches, notes = [], []
    for n in tutorials:
        t0 = time.perf_counter()
        got, failed = record_tutorial(n)
        notes.append(f"tutorial {n}: {len(got)} kernels launched ({time.perf_counter() - t0:.1f} s on the CPU "
                     f"backend){'; cells that failed: ' + ', '.join(failed) if failed else ''}")
        launches += got
    if with_suite:
        launches += suite_launches()
    if only:
        launches = [x for x in launches if x.name in only]
    return launches, notes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="the directory to write the table and pages into")
    ap.add_argument("--budget-s", type=float, default=330.0, help="stop starting profiles after this many seconds")
    ap.add_argument("--predict-only", action="store_true", help="no ncu: the predictions and why nothing is measured")
    ap.add_argument("--tutorials", default=",".join(TUTORIALS), help="tutorial numbers, comma-separated")
    ap.add_argument("--no-suite", action="store_true", help="leave out the suite's memory-bound kernels")
    ap.add_argument("--only", default="", help="kernel names, comma-separated")
    ns = ap.parse_args(argv)
    t_start = time.perf_counter()
    out: Path = ns.out
    out.mkdir(parents=True, exist_ok=True)
    pages = None if ns.predict_only else out / "pages"
    tutorials = [t for t in ns.tutorials.split(",") if t]
    launches, notes = collect(tutorials, not ns.no_suite, {x for x in ns.only.split(",") if x} or None)
    rows, texts = [], []
    for i, launch in enumerate(launches):
        if time.perf_counter() - t_start > ns.budget_s:
            for rest in launches[i:]:
                rows += table_rows(rest.source, rest.name, why="not profiled (time budget)")
            notes.append(f"time budget of {ns.budget_s:.0f} s reached: {len(launches) - i} kernels not profiled")
            break
        got, prof, secs = profile_one(launch, pages, ns.predict_only)
        rows += got
        if prof is not None:
            texts.append(prof.text(prof.predicted, launch.full_ctas))
        print(f"{launch.source:12} {launch.name:24} {secs:6.1f} s  "
              f"{sum(r['verdict'] == 'matches' for r in got)} match, {sum(r['verdict'] == 'DIFFERS' for r in got)} differ",
              flush=True)
    try:
        from tilenb.runtime.gpu.cuda import device_target
        device = str(device_target())
    except Exception:           # no GPU here
        device = "no GPU"
    header = (f"Measured (Nsight Compute) beside predicted (the analysis), per tile line: "
              f"bench/probes/ncu_tutorials.py on {device}, {time.perf_counter() - t_start:.0f} s.\n\n"
              + "\n".join(f"- {n}" for n in notes) + "\n")
    (out / "ncu_tutorials.md").write_text(markdown(rows, header))
    (out / "ncu_tutorials.json").write_text(json.dumps(rows, indent=1, default=str))
    (out / "profiles.txt").write_text("\n\n".join(texts) + "\n")
    print(f"wrote {out / 'ncu_tutorials.md'} ({len(rows)} rows) in {time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
