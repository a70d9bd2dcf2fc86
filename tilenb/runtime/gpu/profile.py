"""`kernel.profile(grid, *args, **tune)`: one launch measured by Nsight Compute, per tile line.

Guarantees:

- `profile(kernel, grid, args, tune)` runs the launch once under Nsight Compute (`ncu`: the
  `ncu=` argument, else the TILENB_NCU environment variable, else `ncu` on PATH, else
  /usr/local/cuda/bin/ncu) in a subprocess that compiles the same variant from the profiled
  source (`tilenb.runtime.gpu.ncu.lined_source`: `#line` directives naming tile lines, NVRTC
  `-lineinfo`) and launches it with the same arguments (saved to an .npz). It returns a
  `Profile`: per tile line the global sectors and requests and the shared wavefronts and bank
  conflicts the hardware counted; per kernel the duration, DRAM and L2 bytes, achieved
  occupancy and the top warp-stall reasons, with the barrier stalls per barrier the compiler
  placed. The outputs the launch writes are copied back into the caller's arrays, as a launch
  would write them (ncu saves and restores device memory between its replays of the kernel, so
  they hold one launch's result).
- Where it cannot measure (the CPU backend, no ncu, a GPU that refuses its counters with
  ERR_NVGPUCTRPERM, ncu failing) it raises `ProfileUnavailable` (a TileError) whose message is
  one sentence saying why and what to do; nothing else changes (the arguments are untouched).
- Overhead: ncu replays the kernel once per group of counters (tens of passes), with caches
  flushed and clocks locked to base, in a new Python process: a profile takes seconds, and its
  duration figure is the kernel's time under those conditions, not an ordinary launch's.
- `Profile.compare(analysis)` puts the analysis' predictions (copy plans' sectors and
  wavefronts times the CTAs) beside the measurement per copy line, with a flag and a reason
  where they differ; `Profile.text()` is the static text form.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...lang.diagnostics import TileError
from . import ncu as N

PERM_HELP = ("the GPU refuses its performance counters to this user (ERR_NVGPUCTRPERM): run as root, or "
             "let every user read them (driver option NVreg_RestrictProfilingToAdminUsers=0, "
             "https://developer.nvidia.com/ERR_NVGPUCTRPERM)")


class ProfileUnavailable(TileError):
    """The launch cannot be measured here; the message says why and what to install or do."""


TOOLKIT_NCU = "/usr/local/cuda/bin/ncu"


def find_ncu(ncu: Optional[str] = None) -> Optional[str]:
    """The ncu program to run: `ncu`, else $TILENB_NCU, else `ncu` on PATH, else the CUDA
    toolkit's (TOOLKIT_NCU); None when none exists."""
    for cand in (ncu, os.environ.get("TILENB_NCU"), shutil.which("ncu"), TOOLKIT_NCU):
        if cand and (shutil.which(cand) or (os.path.isfile(cand) and os.access(cand, os.X_OK))):
            return shutil.which(cand) or cand
    return None


# ---- what was measured ---------------------------------------------------------------------
def _width(op: str) -> int:
    """Bytes per thread of a SASS global / shared access opcode (LDG.E.128 -> 16)."""
    for suf, w in ((".128", 16), (".64", 8), (".U16", 2), (".S16", 2), (".U8", 1), (".S8", 1)):
        if suf in op:
            return w
    return 4


@dataclass
class LineFigures:
    """What the hardware counted for the instructions of one tile line (whole launch).

    sectors: global 32-byte sectors ("L2 Theoretical Sectors Global"), split by instruction
    into loads (LDG), stores (STG) and cp.async (LDGSTS); requests: warp-level global memory
    instructions executed. wavefronts: shared-memory wavefronts, split into loads (LDS, LDSM)
    and stores (STS); bank_conflicts: wavefronts beyond the ideal ones. store_widths /
    load_widths: bytes per thread of its global stores / loads. via: prelude helpers whose
    instructions were attributed here (each called from this line only)."""
    line: int
    sectors: int = 0
    ld_sectors: int = 0
    st_sectors: int = 0
    ldgsts_sectors: int = 0
    requests: int = 0
    wavefronts: int = 0
    ld_wavefronts: int = 0
    st_wavefronts: int = 0
    ideal_wavefronts: int = 0
    shared_requests: int = 0
    samples: int = 0
    stalls: Dict[str, int] = field(default_factory=dict)
    store_widths: List[int] = field(default_factory=list)
    load_widths: List[int] = field(default_factory=list)
    via: List[str] = field(default_factory=list)
    ops: Dict[str, List[int]] = field(default_factory=dict)   # opcode -> [executed, sectors, wavefronts]

    @property
    def bank_conflicts(self) -> int:
        return max(0, self.wavefronts - self.ideal_wavefronts)

    def add(self, src: N.SourceLine, seen: Optional[set] = None):
        """Add a source line's counters; with `seen` (SASS addresses already counted on some
        line), an instruction is counted once: ncu lists an inlined helper's instructions under
        the calling tile line and again under the helper's own line."""
        rows = src.sass or []
        if rows and seen is not None:
            rows = [r for r in rows if r.address not in seen]
            seen.update(r.address for r in rows)
            if not rows:                  # every instruction counted on another line already
                return
        if not src.sass:                  # a CUDA-only page: the line's totals
            v = src.values
            self.sectors += int(v.get(N.COL_SECTORS, 0))
            self.wavefronts += int(v.get(N.COL_WAVEFRONTS, 0))
            self.ideal_wavefronts += int(v.get(N.COL_WAVEFRONTS_IDEAL, v.get(N.COL_WAVEFRONTS, 0)))
        for r in rows:
            op, v = r.opcode, r.values
            sec = int(v.get(N.COL_SECTORS, 0))
            wf = int(v.get(N.COL_WAVEFRONTS, 0))
            ex = int(v.get(N.COL_EXECUTED, 0))
            self.sectors += sec
            self.wavefronts += wf
            self.ideal_wavefronts += int(v.get(N.COL_WAVEFRONTS_IDEAL, wf))
            if sec or wf:
                o = self.ops.setdefault(op, [0, 0, 0])
                o[0] += ex
                o[1] += sec
                o[2] += wf
            if op.startswith("LDGSTS"):
                self.ldgsts_sectors += sec
                self.requests += ex
            elif op.startswith("LDG"):
                self.ld_sectors += sec
                self.requests += ex
                if ex and _width(op) not in self.load_widths:
                    self.load_widths.append(_width(op))
            elif op.startswith("STG"):
                self.st_sectors += sec
                self.requests += ex
                if ex and _width(op) not in self.store_widths:
                    self.store_widths.append(_width(op))
            elif op.startswith(("LDS", "LDSM")):
                self.ld_wavefronts += wf
                self.shared_requests += ex
            elif op.startswith("STS"):
                self.st_wavefronts += wf
                self.shared_requests += ex
        self.samples += int(src.values.get(N.COL_SAMPLES, 0))
        for k, x in N.stall_columns(src.values).items():
            self.stalls[k] = self.stalls.get(k, 0) + int(x)


@dataclass
class Profile:
    """One launch measured by Nsight Compute (see the module docstring). Figures are whole-launch
    totals (all CTAs). `lines`: tile line -> LineFigures; `barriers`: per CTA barrier in the
    code, in code order, {"where" ("before" / "after" / "within" a line: placed by the analysis;
    "internal": added by the code generator inside that line's code), "line", "samples"
    (warp-stall samples at it), "barrier_samples" (those stalled on the barrier), "share" (of
    the kernel's samples)}; `kernel_metrics`: duration_ns,
    dram_read_bytes, dram_write_bytes, l2_bytes, achieved_occupancy_pct and the launch totals
    of `ncu.METRICS`; `stalls`: (reason, samples) most first; `other`: counters on lines that are
    no tile line ("set-up" code, or a helper called from several lines); `device`: the GPU's
    name from ncu's page ("" where it has none)."""
    kernel: str
    symbol: str
    variant: Dict[str, int]
    grid: Tuple[int, int, int]
    dims: Dict[str, int]
    lines: Dict[int, LineFigures]
    barriers: List[dict]
    kernel_metrics: Dict[str, float]
    stalls: List[Tuple[str, int]]
    other: Dict[str, LineFigures] = field(default_factory=dict)
    seconds: float = 0.0
    note: str = ""
    device: str = ""                  # the GPU ncu measured on, as it names it ("NVIDIA H200")

    @property
    def ctas(self) -> int:
        return int(np.prod(self.grid))

    @property
    def dram_bytes(self) -> int:
        m = self.kernel_metrics
        return int(m.get("dram_read_bytes", 0) + m.get("dram_write_bytes", 0))

    # -- predicted beside measured
    def compare(self, analysis, full_ctas: Optional[int] = None) -> List[dict]:
        """Per copy line of `analysis` (an `Analysis` of the profiled variant, best made with the
        launch's extents: `Profile.analysis(kernel)`), and per line where the hardware counted
        memory traffic: {"line", "metric" ("global sectors" / "shared wavefronts"), "predicted",
        "predicted_upper", "measured", "ok", "reason"}. The prediction is the copy plans'
        per-CTA figures times the full CTAs (`full_ctas`, default every CTA) up to all CTAs; a
        measurement inside that range is ok; otherwise `reason` says what differs."""
        ctas = self.ctas
        full = ctas if full_ctas is None else int(full_ctas)
        plans: Dict[int, list] = {}
        for cp in analysis.copies:
            plans.setdefault(int(cp.line), []).append(cp)
        rows = []
        for line in sorted(set(plans) | {ln for ln, f in self.lines.items() if f.sectors or f.wavefronts}):
            ps = plans.get(line, [])
            f = self.lines.get(line, LineFigures(line))
            for metric, per_cta, meas in (
                    ("global sectors", sum(int(p.sectors) for p in ps), f.sectors),
                    ("shared wavefronts", sum(int(p.wavefronts) for p in ps), f.wavefronts)):
                lo, hi = per_cta * full, per_cta * ctas
                if not ps and not meas:
                    continue
                ok = lo <= meas <= hi
                rows.append({"line": line, "metric": metric, "predicted": lo, "predicted_upper": hi,
                             "measured": meas, "ok": ok, "reason": "" if ok else _reason(metric, ps, f, lo, hi)})
        return rows

    def analysis(self, kernel, arch=None):
        """The analysis of the profiled variant with the launch's runtime extents."""
        from ...analysis import analyze
        return analyze(kernel.ir(**self.variant), extents=self.dims, arch=arch)

    def view_data(self, analysis, full_ctas: Optional[int] = None) -> dict:
        """The measured figures the notebook views show beside their predictions (one home for
        the thread map, barriers and timing views; measured figures are whole-launch totals):
        {"lines": {line: {"line", "sectors", "requests", "wavefronts", "bank_conflicts",
        "predicted_sectors", "predicted_wavefronts" (the per-CTA figure times the CTAs, "lo..hi"
        where partial CTAs make a range), "per_cta_sectors", "per_cta_wavefronts" (the copy
        plans' per-CTA figures, summed over the line's copies), "ok", "reasons" (one
        "<metric>: <why>" per differing metric)}} for every line `compare` reports,
        "barriers": {(where, line): {"share", "barrier_samples"}} for the analysis' barriers,
        "internal_barriers": [{"line", "share", "barrier_samples"}] for those the code generator
        added inside a line's code, "timing": {"duration_ns", "dram_bytes", "dram_read_bytes",
        "dram_write_bytes", "l2_bytes", "achieved_occupancy_pct", "dram_bytes_per_s", "device"},
        "ctas"}. Shares are fractions (0..1) of the kernel's warp-stall samples."""
        lines: Dict[int, dict] = {}
        ctas = self.ctas
        for r in self.compare(analysis, full_ctas):
            f = self.lines.get(r["line"], LineFigures(r["line"]))
            d = lines.setdefault(r["line"], {"line": r["line"], "sectors": f.sectors, "requests": f.requests,
                                             "wavefronts": f.wavefronts, "bank_conflicts": f.bank_conflicts,
                                             "ok": True, "reasons": []})
            key = "sectors" if r["metric"] == "global sectors" else "wavefronts"
            d[f"predicted_{key}"] = (r["predicted"] if r["predicted"] == r["predicted_upper"]
                                     else f"{r['predicted']}..{r['predicted_upper']}")
            d[f"per_cta_{key}"] = r["predicted_upper"] // ctas if ctas else 0
            if not r["ok"]:
                d["ok"] = False
                d["reasons"].append(f"{r['metric']}: {r['reason']}")
        m = self.kernel_metrics
        dur = m.get("duration_ns")
        timing = {"duration_ns": dur, "dram_bytes": self.dram_bytes,
                  "dram_read_bytes": int(m.get("dram_read_bytes", 0)), "dram_write_bytes": int(m.get("dram_write_bytes", 0)),
                  "l2_bytes": int(m.get("l2_bytes", 0)), "achieved_occupancy_pct": m.get("achieved_occupancy_pct"),
                  "dram_bytes_per_s": self.dram_bytes / (dur * 1e-9) if dur else None, "device": self.device}
        bars: Dict[tuple, dict] = {}
        internal: List[dict] = []
        for b in self.barriers:         # the analysis' barriers (a line may have two in code: both)
            if b["where"] != "internal":
                d = bars.setdefault((b["where"], int(b["line"])), {"share": 0.0, "barrier_samples": 0})
                d["share"] += b["share"]
                d["barrier_samples"] += b["barrier_samples"]
            else:
                internal.append({"line": int(b["line"]), "share": b["share"], "barrier_samples": b["barrier_samples"]})
        return {"lines": lines, "barriers": bars, "internal_barriers": internal, "timing": timing, "ctas": ctas}

    def measured_for(self, line: int) -> Optional[LineFigures]:
        return self.lines.get(int(line))

    def text(self, analysis=None, full_ctas: Optional[int] = None) -> str:
        """The static text form: the kernel's figures, the per-line table (predicted beside
        measured when `analysis` is given) and the barriers' stall shares."""
        m = self.kernel_metrics
        out = [f"profile of {self.kernel} (Nsight Compute; grid {self.grid}, {self.ctas} CTAs"
               f"{', ' + ', '.join(f'{k}={v}' for k, v in self.variant.items()) if self.variant else ''}):"]
        if "duration_ns" in m:
            out.append(f"  duration {m['duration_ns'] / 1e3:.2f} us (under ncu: caches flushed, clocks at base)")
        out.append(f"  DRAM {self.dram_bytes} bytes (read {int(m.get('dram_read_bytes', 0))}, write "
                   f"{int(m.get('dram_write_bytes', 0))}), L2 {int(m.get('l2_bytes', 0))} bytes"
                   + (f", achieved occupancy {m['achieved_occupancy_pct']:.1f}%" if "achieved_occupancy_pct" in m else ""))
        tot = sum(n for _, n in self.stalls) or 0
        if self.stalls:
            out.append("  top warp stalls: " + ", ".join(f"{r} {100.0 * n / tot:.0f}%" for r, n in self.stalls[:3] if tot))
        if analysis is not None:
            out.append("  line | metric | predicted | measured | verdict")
            for r in self.compare(analysis, full_ctas):
                pred = str(r["predicted"]) if r["predicted"] == r["predicted_upper"] else f"{r['predicted']}..{r['predicted_upper']}"
                out.append(f"  {r['line']:>4} | {r['metric']} | {pred} | {r['measured']} | "
                           + ("matches" if r["ok"] else "DIFFERS: " + r["reason"]))
        else:
            for ln in sorted(self.lines):
                f = self.lines[ln]
                if f.sectors or f.wavefronts:
                    out.append(f"  line {ln}: {f.sectors} sectors in {f.requests} requests, {f.wavefronts} shared "
                               f"wavefronts ({f.bank_conflicts} from bank conflicts)")
        for b in self.barriers:
            what = (f"code-generator barrier inside line {b['line']}" if b["where"] == "internal"
                    else f"barrier {b['where']} line {b['line']}")
            out.append(f"  {what}: {100.0 * b['share']:.1f}% of warp-stall samples "
                       f"({b['barrier_samples']} stalled at the barrier)")
        if self.note:
            out.append("  " + self.note)
        return "\n".join(out)

    predicted: object = None          # the analysis profile() attaches (the launch's extents)

    def __str__(self):
        return self.text(self.predicted)

    def __repr__(self):
        return self.text(self.predicted)


def _reason(metric, plans, f: LineFigures, lo, hi) -> str:
    why = _reason_text(metric, plans, f, lo, hi)
    k = 1 if metric == "global sectors" else 2
    ops = [f"{op} {v[k]}" for op, v in f.ops.items() if v[k]]
    return why + (f" (by instruction: {', '.join(ops)})" if ops else "")


def _reason_text(metric, plans, f: LineFigures, lo, hi) -> str:
    meas = f.sectors if metric == "global sectors" else f.wavefronts
    if not plans:
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
    return "more wavefronts than predicted: other shared accesses on this line (reductions, partials) or bank conflicts"


def _bytes_of(dt) -> int:
    from ...types import DTYPES
    try:
        return int(DTYPES[dt].itemsize)
    except Exception:
        return 4


# ---- turning ncu's pages into a Profile ----------------------------------------------------
def build_profile(raw_csv: str, source_csv: str, job: dict) -> Profile:
    """A Profile from ncu's raw page and source page (`--print-source cuda,sass`) of the
    profiled variant, and the job that launched it (kernel, symbol, variant, grid, dims,
    barriers, helper calls, helper lines; `tilenb.runtime.gpu.profile.make_job`)."""
    raws = [r for r in N.read_raw(raw_csv) if r["name"] == job["symbol"]] or N.read_raw(raw_csv)
    if not raws:
        raise ProfileUnavailable(f"kernel '{job['kernel']}': Nsight Compute's report has no launch of "
                                 f"{job['symbol']}; run the capture again")
    vals = raws[0]["values"]
    km = {k: vals[m] for k, m in list(N.KERNEL_METRICS.items()) + list(N.METRICS.items()) if m in vals}
    if N.LDGSTS in vals:
        km["ldgsts_sectors"] = vals[N.LDGSTS]
    lines: Dict[int, LineFigures] = {}
    other: Dict[str, LineFigures] = {}
    barriers = [{"where": w, "line": ln, "samples": 0, "barrier_samples": 0, "share": 0.0} for w, ln in job["barriers"]]
    helper_of = {int(k): v for k, v in job["helper_lines"].items()}
    calls = job["helper_calls"]
    total = 0
    stalls: Dict[str, int] = {}
    seen: set = set()       # SASS addresses counted already (tile lines first: they hold inlined helpers too)
    srcs = [s for s in N.read_source(source_csv) if not (s.kernel and s.kernel != job["symbol"])]
    srcs.sort(key=lambda s: s.file != N.TILE_FILE)
    for src in srcs:
        total += int(src.values.get(N.COL_SAMPLES, 0))
        for k, x in N.stall_columns(src.values).items():
            stalls[k] = stalls.get(k, 0) + int(x)
        if src.file == N.TILE_FILE:
            lines.setdefault(src.line, LineFigures(src.line)).add(src, seen)
        elif src.file == N.BARRIER_FILE and 1 <= src.line <= len(barriers):
            b = barriers[src.line - 1]
            b["samples"] += int(src.values.get(N.COL_SAMPLES, 0))
            b["barrier_samples"] += int(N.stall_columns(src.values).get("barrier", 0))
        else:
            name = helper_of.get(src.line) if src.file == N.CUDA_FILE else None
            at = calls.get(name, []) if name else []
            if len(at) == 1:
                f = lines.setdefault(at[0], LineFigures(at[0]))
                f.add(src, seen)
                if name not in f.via:
                    f.via.append(name)
            else:
                key = name or "set-up"
                other.setdefault(key, LineFigures(0)).add(src, seen)
    for b in barriers:
        b["share"] = b["samples"] / total if total else 0.0
    return Profile(job["kernel"], job["symbol"], dict(job["variant"]), tuple(job["grid"]), dict(job["dims"]),
                   lines, barriers, km, sorted(stalls.items(), key=lambda kv: -kv[1]), other,
                   note=job.get("note", ""), device=raws[0].get("device", ""))


# ---- running ncu -----------------------------------------------------------------------------
def ncu_profile_args(symbol: str) -> List[str]:
    """ncu's options for the profiled launch (one launch of `symbol`, the sections and metrics
    the Profile reads, the sources embedded)."""
    metrics = ",".join(list(N.KERNEL_METRICS.values()) + list(N.METRICS.values()) + list(N.EXTRA_METRICS))
    out = ["--target-processes", "all", "-f", "--import-source", "yes", "-k", f"regex:^{symbol}$", "-c", "1",
           "--metrics", metrics]
    for s in N.SECTIONS:
        out += ["--section", s]
    return out


def _host(a):
    """A caller's argument as a numpy value (a CuPy or torch array copied to the host)."""
    if isinstance(a, np.ndarray) or np.isscalar(a) or isinstance(a, (int, float, bool)):
        return np.asarray(a)
    if hasattr(a, "get") and type(a).__module__.startswith("cupy"):
        return a.get()
    if hasattr(a, "detach") and hasattr(a, "cpu"):
        return a.detach().cpu().numpy()
    return np.asarray(a)


def _save_args(path: Path, args) -> List[str]:
    arrays, dtypes = {}, []
    for i, a in enumerate(args):
        h = _host(a)
        dtypes.append(h.dtype.name)
        if h.dtype.name == "bfloat16":
            h = h.view(np.uint16)
        arrays[f"a{i}"] = h
    np.savez(path, **arrays)
    return dtypes


def _load_args(path: Path, dtypes: Sequence[str]) -> list:
    z = np.load(path)
    out = []
    for i, dt in enumerate(dtypes):
        a = z[f"a{i}"]
        if dt == "bfloat16":
            import ml_dtypes
            a = a.view(ml_dtypes.bfloat16)
        out.append(a[()] if a.ndim == 0 else np.array(a))
    return out


def _unavailable(kernel, why: str) -> ProfileUnavailable:
    e = ProfileUnavailable(f"kernel '{kernel.name}' cannot be profiled: {why}.")
    e.filename = getattr(kernel.module, "filename", None)
    return e


def profile(kernel, grid, args, tune: Optional[dict] = None, ncu: Optional[str] = None,
            timeout: float = 600.0, keep: Optional[str] = None) -> Profile:
    """See the module docstring. `keep`: a folder to leave ncu's report and pages in."""
    if kernel.module.backend != "cuda":
        raise _unavailable(kernel, "the module runs on the CPU backend, which has no hardware counters; compile it "
                           "with backend=\"cuda\" on a machine with an NVIDIA GPU and Nsight Compute")
    exe = find_ncu(ncu)
    if exe is None:
        raise _unavailable(kernel, "Nsight Compute's `ncu` was not found (not on PATH, TILENB_NCU unset, no "
                           "/usr/local/cuda/bin/ncu); install Nsight Compute (part of the CUDA toolkit, or "
                           "`apt install nsight-compute`) and pass ncu= or set TILENB_NCU to its path")
    from ..checks import prepare, written_tensors
    prepared = prepare(kernel, grid, args, variant=dict(tune) if tune else None)
    ch = prepared.chosen
    job = make_job(kernel, ch)
    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="tilenb-profile-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    try:
        job["dtypes"] = _save_args(work / "args.npz", args)
        job["written"] = [i for i, p in enumerate(ch.kir.params) if p.sym.name in written_tensors(ch.kir)]
        write_job_files(kernel, ch, job, work)
        rep = work / "report"
        cmd = [exe] + ncu_profile_args(job["symbol"]) + ["-o", str(rep), sys.executable, "-m",
                                                          "tilenb.runtime.gpu.profile_child", str(work)]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[3])] +
                                            ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        said = (p.stdout or "") + (p.stderr or "")
        (work / "ncu.log").write_text(said)
        if "ERR_NVGPUCTRPERM" in said:
            raise _unavailable(kernel, PERM_HELP)
        report = rep.with_suffix(".ncu-rep")
        if p.returncode or not report.exists():
            tail = " ".join(said.strip().splitlines()[-3:])[-400:]
            raise _unavailable(kernel, f"ncu exited with status {p.returncode} without a report ({tail})")
        raw = subprocess.run([exe, "--import", str(report), "--csv", "--page", "raw"], capture_output=True,
                             text=True, timeout=timeout).stdout
        src = subprocess.run([exe, "--import", str(report), "--csv", "--page", "source", "--print-source",
                              "cuda,sass"], capture_output=True, text=True, timeout=timeout).stdout
        (work / "raw.csv").write_text(raw)
        (work / "source.csv").write_text(src)
        prof = build_profile(raw, src, job)
        outs = np.load(work / "outputs.npz") if (work / "outputs.npz").exists() else None
        if outs is not None:
            for i in job["written"]:
                a, h = args[i], outs[f"a{i}"]
                if isinstance(a, np.ndarray):
                    np.copyto(a.view(np.uint16) if a.dtype.name == "bfloat16" else a, h)
                elif hasattr(a, "set") and type(a).__module__.startswith("cupy"):
                    a.set(h.view(a.dtype) if a.dtype.name != h.dtype.name else h)
                elif hasattr(a, "copy_") and h.dtype.kind != "V":      # a torch tensor
                    import torch
                    a.copy_(torch.from_numpy(np.ascontiguousarray(h)).to(a.device))
        try:                # for the GPU that ran it (its loops and shared-memory map are that target's)
            from .cuda import device_target
            prof.predicted = prof.analysis(kernel, arch=device_target())
        except TileError:
            prof.predicted = None
        prof.seconds = time.perf_counter() - t0
        prof.note = (f"ncu replayed the kernel in a separate process ({prof.seconds:.1f} s in all); it restores "
                     "device memory between replays, and the outputs were written back as one launch writes them")
        return prof
    except subprocess.TimeoutExpired:
        raise _unavailable(kernel, f"ncu did not finish within {timeout:.0f} s") from None
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def make_job(kernel, ch) -> dict:
    """What the profiled launch and its reading need (JSON-able; see build_profile)."""
    from ...codegen import kernel_symbol
    from .cuda import kernel_source
    ks = kernel_source(kernel, ch.kir)
    off = kernel.module.checked.source.line_offset
    lined = N.lined_source(ks.source, off)
    return {"kernel": kernel.name, "symbol": kernel_symbol(ch.kir), "variant": dict(ch.tune),
            "grid": list(ch.grid), "dims": {k: int(v) for k, v in ch.bound.dims.items()},
            "barriers": [list(b) for b in lined.barriers],
            "helper_calls": N.helper_calls(ks.source, off),
            "helper_lines": {str(k): v for k, v in N.helper_of_line(ks.source).items()}}


def write_job_files(kernel, ch, job: dict, work: Path):
    src = kernel.module.checked.source
    job["source"] = src.text
    job["filename"] = getattr(kernel.module, "filename", None) or "<profile>"
    job["line_offset"] = src.line_offset
    (work / N.TILE_FILE).write_text(src.text)
    from .cuda import kernel_source
    ks = kernel_source(kernel, ch.kir)
    (work / N.CUDA_FILE).write_text(ks.source)
    (work / N.BARRIER_FILE).write_text("".join(f"barrier {w} line {ln}\n" for w, ln in job["barriers"]) or "\n")
    (work / "job.json").write_text(json.dumps(job))
