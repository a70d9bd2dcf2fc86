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
from .mismatch import _explain, _reason, _with_ops

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
        the calling tile line and again under the helper's own line. Everything is summed over
        the line's instructions that are counted here, its warp-stall samples too (a line whose
        instructions were all counted elsewhere adds nothing); a page without SASS rows gives
        the line's own totals."""
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
            self._add_samples(v)
        for r in rows:
            self._add_samples(r.values)
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

    def _add_samples(self, values: Dict[str, float]):
        self.samples += int(values.get(N.COL_SAMPLES, 0))
        for k, x in N.stall_columns(values).items():
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
    full_ctas: Optional[int] = None     # CTAs wholly inside the tensors (count_full_ctas); None: unknown
    device: str = ""                  # the GPU ncu measured on, as it names it ("NVIDIA H200")
    helper_calls: Dict[str, List[int]] = field(default_factory=dict)   # prelude helper -> tile lines calling it
    # per-thread element accesses of tensors over the launch (analysis.thread_traffic.element_sectors
    # of the launch): line -> ElementTraffic; None where the analysis cannot follow them
    element_traffic: Optional[Dict[int, object]] = field(default_factory=dict)
    # where each tensor slice starts in a sector, per CTA (`start_bytes` of the launch); None: unknown
    start_bytes: Optional[list] = None
    element_unknown: str = ""         # what stopped analysis.thread_traffic where element_traffic is None
    # times each CTA runs each line inside a loop (analysis.thread_traffic.statement_turns of the
    # launch): line -> {turns: CTAs}; None where the loops cannot be followed (each line once a CTA)
    turns: Optional[Dict[int, Dict[int, int]]] = field(default_factory=dict)

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
        "predicted_upper", "measured", "ok", "reason", "beyond_copies"}. The prediction is the
        analysis' per-CTA figures of the line times the full CTAs (`full_ctas`, default every
        CTA) up to all CTAs: the copy plans' sectors; their wavefronts plus the line's
        `analysis.shared_traffic` (the shared reads and writes no copy plan counts: an [R, 1]
        operand broadcast along its rows, a reduction's passes and partials, ...), the same
        per-line split as `Analysis.traffic()`; "beyond_copies" lists those records as (kind,
        tile, wavefronts per CTA); a line's per-thread element accesses of tensors add their
        sectors over the launch (`Profile.element_traffic`, `analysis.thread_traffic`; the row's
        "elements"). `full_ctas` defaults to the Profile's own count
        (`count_full_ctas` of the launch, where it can tell; else every CTA). A measurement inside the range is ok; otherwise
        `reason` says what differs: the exact mechanism where the analysis' facts and the
        measurement establish one (`_explain`: a helper several lines call, per-thread element
        accesses, a runtime start that is sector-aligned at this launch, shared reads NVRTC serves
        from the registers just stored, a shared store the next write overwrites), with
        "accounted" True when the prediction corrected by that mechanism contains the
        measurement; else the general reason, naming the instructions ncu counted."""
        ctas = self.ctas
        if full_ctas is None:
            full_ctas = self.full_ctas
        measured = {ln for ln, f in self.lines.items() if f.sectors or f.wavefronts}
        # the slice starts' counts are over the Profile's own full CTAs: not for another count
        starts = self.start_bytes if full_ctas == self.full_ctas else None
        pred = predicted_lines(analysis, ctas, full_ctas, also_lines=measured, elements=self.element_traffic,
                               starts=starts, turns=self.turns)
        rows = []
        for r in pred:
            f = self.lines.get(r["line"], LineFigures(r["line"]))
            meas = f.sectors if r["metric"] == "global sectors" else f.wavefronts
            if not r["plans"] and not r["beyond_copies"] and not r["elements"] and not meas:
                continue
            lo, hi = r["predicted"], r["predicted_upper"]
            ok = lo <= meas <= hi
            reason, accounted = "", False
            if not ok:
                why, accounted = _explain(self, analysis, r, f, pred, ctas, full_ctas)
                reason = (_with_ops(why, r["metric"], f) if why
                          else _reason(r["metric"], r["plans"], f, lo, hi, r["beyond_copies"]))
            rows.append({"line": r["line"], "metric": r["metric"], "predicted": lo, "predicted_upper": hi,
                         "measured": meas, "ok": ok, "beyond_copies": r["beyond_copies"], "reason": reason,
                         "accounted": accounted, "elements": r["elements"]})
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
        "<metric>: <why>" per differing metric), and "beyond_copies" (what of the predicted
        wavefronts is not the copy plans': "with 160 for the broadcast read of s") where there is
        such}} for every line `compare` reports,
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
            if r.get("beyond_copies"):
                d["beyond_copies"] = _beyond_text(r["beyond_copies"], self.ctas).strip()[1:-1]
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
        full = self.full_ctas if full_ctas is None else full_ctas
        out = [f"profile of {self.kernel} (Nsight Compute; grid {self.grid}, {self.ctas} CTAs"
               f"{f', {full} of them full' if full is not None and full != self.ctas else ''}"
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
                pred += _beyond_text(r.get("beyond_copies"), self.ctas)
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


# ---- what the analysis predicts for one launch (no GPU needed) -----------------------------
def check_full_ctas(full_ctas, ctas: Optional[int] = None) -> int:
    """`full_ctas` as given by a user (`measure`, `Profile.text`/`compare`): an int (numpy
    integers count, a bool or float does not) from 0 to the launch's `ctas` CTAs (unchecked
    where `ctas` is None). Anything else raises LaunchError naming `full_ctas`: a count outside
    that range would print a predicted range whose low end exceeds its high end."""
    from ...lang.diagnostics import LaunchError
    if isinstance(full_ctas, (bool, np.bool_)) or not isinstance(full_ctas, (int, np.integer)):
        raise LaunchError(f"full_ctas (how many CTAs lie wholly inside the tensors) must be an int, not "
                          f"{type(full_ctas).__name__} {full_ctas!r}")
    if full_ctas < 0 or (ctas is not None and full_ctas > ctas):
        raise LaunchError(f"full_ctas is {int(full_ctas)}; it must lie from 0 to the launch's "
                          f"{ctas if ctas is not None else 'number of'} CTAs")
    return int(full_ctas)


def predicted_lines(analysis, ctas: int, full_ctas: Optional[int] = None, also_lines=(),
                    elements: Optional[Dict[int, object]] = None, starts=None, turns=None) -> List[dict]:
    """The analysis' figures for one launch of `ctas` CTAs, per tile line with a copy plan, shared
    traffic or per-thread element accesses (and per line of `also_lines`), two rows a line:
    {"line", "metric" ("global sectors" / "shared wavefronts"), "per_cta", "predicted" (per_cta x
    the full CTAs, `full_ctas`, default all), "predicted_upper" (per_cta x all CTAs), "plans" (the
    line's CopyPlans), "beyond_copies", "elements"}. Sectors are the copy plans' plus, where
    `elements` (`analysis.thread_traffic.element_sectors` of the launch: line -> ElementTraffic,
    whole-launch totals) has the line, its per-thread element accesses' sectors, added to both
    ends of the range ("elements": that ElementTraffic, else None); wavefronts are the copy
    plans' plus the line's `analysis.shared_traffic` records (the shared accesses no copy plan
    counts), listed in "beyond_copies" as (kind, tile, wavefronts per CTA): per line, the same
    split as `Analysis.traffic()`. Where `starts` (`start_bytes` of the launch) says where a copy's
    slice starts in a sector in each CTA, the copy counts its figure at that byte
    (`CopyPlan.sectors_by_start`) per CTA, over the full CTAs and over all, instead of its worst
    case times the CTAs. Where `turns` (`statement_turns` of the launch: line -> {turns: CTAs})
    has a line, the line runs that many times in each CTA (a copy in a loop moves its figure once
    a turn): its per-CTA figures count once per turn, over all CTAs for the upper end and over
    the `full_ctas` CTAs that run it fewest times for the lower end. Per-thread element
    accesses add their shared wavefronts to the wavefront rows, and their sectors (at least, at
    most: `ElementTraffic.sectors_upper` where an index is read from memory) to the sector
    rows. The one home of the prediction `Profile.compare` and `LaunchPrediction` show."""
    full = ctas if full_ctas is None else check_full_ctas(full_ctas, ctas)
    elements = elements or {}
    turns = turns or {}

    def executions(line) -> Tuple[int, int]:
        """(executions by the `full` CTAs that run the line fewest times, by all CTAs)."""
        per = turns.get(int(line))
        if not per:
            return full, ctas
        total, low, left = 0, 0, full
        for t in sorted(per):
            n = int(per[t])
            total += int(t) * n
            take = min(left, n)
            low += int(t) * take
            left -= take
        ran = sum(int(n) for n in per.values())     # CTAs that ran it at all; the others 0 times
        low = 0 if full > ran else low
        return low, total
    at_start = {(int(line), name): counts for line, name, counts in (starts or ())}

    def copy_sectors(p) -> Tuple[int, int]:
        counts = at_start.get((int(p.line), p.tensor))
        by = dict(p.sectors_by_start or ())
        if counts and by and all(int(r) in by for r in counts) and full_ctas is not None and int(p.line) not in turns:
            return (sum(n_full * by[int(r)] for r, (n_full, _) in counts.items()),
                    sum(n_all * by[int(r)] for r, (_, n_all) in counts.items()))
        lo_n, hi_n = executions(p.line)
        return int(p.sectors) * lo_n, int(p.sectors) * hi_n
    plans: Dict[int, list] = {}
    for cp in analysis.copies:
        plans.setdefault(int(cp.line), []).append(cp)
    extra: Dict[int, list] = {}
    for t in getattr(analysis, "shared_traffic", ()):
        extra.setdefault(int(t.line), []).append(t)
    rows = []
    for line in sorted(set(plans) | set(extra) | set(elements) | set(also_lines)):
        ps, ts = plans.get(line, []), extra.get(line, [])
        el = elements.get(line)
        for metric, per_cta, also in (
                ("global sectors", sum(int(p.sectors) for p in ps), []),
                ("shared wavefronts", sum(int(p.wavefronts) for p in ps) + sum(int(t.wavefronts) for t in ts),
                 [(t.kind, t.tile, int(t.wavefronts)) for t in ts if t.wavefronts])):
            if el is None:
                add = add_hi = 0
            elif metric == "global sectors":
                add, add_hi = int(el.sectors), int(el.sectors_upper)
            else:
                add = add_hi = int(el.wavefronts)
            if metric == "global sectors":
                lo = sum(copy_sectors(p)[0] for p in ps)
                hi = sum(copy_sectors(p)[1] for p in ps)
            else:
                lo_n, hi_n = executions(line)
                lo, hi = per_cta * lo_n, per_cta * hi_n
            shown = el if el is not None and (el.tensors if metric == "global sectors" else el.tiles) else None
            rows.append({"line": line, "metric": metric, "per_cta": per_cta, "predicted": lo + add,
                         "predicted_upper": hi + add_hi, "plans": ps, "beyond_copies": also,
                         "elements": shown})
    return rows


class _Unknown(Exception):
    pass


def count_full_ctas(kir, grid, dims: Dict[str, int], scalars: Optional[Dict[str, object]] = None) -> Optional[int]:
    """How many CTAs of `grid` (x, y, z) have every tensor slice the kernel's statements take
    wholly inside its tensor, with the launch's runtime extents `dims` and scalar arguments
    `scalars`: the CTAs the copy plans' figures describe exactly (the others are masked at an
    edge). Each slice start is evaluated per CTA from constants, dims, scalar parameters,
    `ctx.block.*` / `ctx.grid.*` and the `let`s before it (+, -, *, /, %, min, max), a chunk of
    CTAs at a time (bounded memory at any legal grid). None when that is not possible: a tensor
    slice under a loop or a branch, or a start that depends on anything else (a thread, a var)."""
    total = 0
    for chunk in _chunks(kir, grid, dims, scalars):
        if chunk is None:
            return None
        total += int(np.count_nonzero(chunk[0]))
    return total


def start_bytes(kir, grid, dims: Dict[str, int], scalars: Optional[Dict[str, object]] = None):
    """Where each tensor slice of the launch starts within a 32-byte sector: [(line, tensor,
    {byte: (full CTAs, all CTAs)})], one entry per (line, tensor) that one slice of the line
    takes (a line taking two slices of a tensor is left out), counting the CTAs whose slice
    starts that many bytes into a sector, among the full CTAs (`count_full_ctas`) and among all;
    None where the starts cannot be evaluated (as count_full_ctas). The copy plans' figure at
    each byte is `CopyPlan.sectors_by_start`."""
    seen: Dict[Tuple[int, str], int] = {}
    counts: Dict[Tuple[int, str], Dict[int, list]] = {}
    for chunk in _chunks(kir, grid, dims, scalars):
        if chunk is None:
            return None
        full, starts = chunk
        if not seen:
            for line, name, _, _ in starts:
                seen[(line, name)] = seen.get((line, name), 0) + 1
        for line, name, off, eb in starts:
            if seen[(line, name)] != 1:
                continue
            res = (np.broadcast_to(np.asarray(off, dtype=np.int64), full.shape) * eb) % 32
            c = counts.setdefault((int(line), name), {})
            for r in np.unique(res):
                at = res == r
                n = c.setdefault(int(r), [0, 0])
                n[0] += int(np.count_nonzero(at & full))
                n[1] += int(np.count_nonzero(at))
    return [(line, name, {r: tuple(n) for r, n in sorted(c.items())}) for (line, name), c in counts.items()]


_CTA_CHUNK = 1 << 20


def _chunks(kir, grid, dims: Dict[str, int], scalars: Optional[Dict[str, object]] = None):
    """Per chunk of at most _CTA_CHUNK CTAs of `grid` (x, y, z; linear index, x fastest), what
    _slice_starts_chunk finds there: (full: bool per CTA, [(line, tensor, element offset of the
    slice's first element per CTA, element bytes)]), or one None where the starts cannot be
    evaluated (see count_full_ctas). CTAs go a chunk at a time: a grid may hold up to 2**31 - 1
    CTAs along x alone, and one array of every CTA's index would then take 16 GB."""
    scalars = scalars or {}
    g = tuple(int(x) for x in tuple(grid) + (1,) * (3 - len(tuple(grid))))
    n = g[0] * g[1] * g[2]
    for first in range(0, n, _CTA_CHUNK):
        got = _slice_starts_chunk(kir, g, dims, scalars, np.arange(first, min(n, first + _CTA_CHUNK), dtype=np.int64))
        yield got
        if got is None:
            return


def _slice_starts_chunk(kir, g, dims, scalars, idx):
    """(full, starts) of the CTAs of linear indices `idx` (x fastest) of the grid g, or None
    (see _chunks)."""
    ctx = {"block.x": idx % g[0], "block.y": (idx // g[0]) % g[1], "block.z": idx // (g[0] * g[1]),
           "grid.x": g[0], "grid.y": g[1], "grid.z": g[2]}
    from ... import ir
    lets: Dict[int, object] = {}
    memo: Dict[int, object] = {}

    def ev(e):
        t = type(e)
        if t is ir.Const:
            if isinstance(e.value, bool) or not isinstance(e.value, (int, np.integer)):
                raise _Unknown
            return int(e.value)
        if t is ir.Ctx:
            if e.field not in ctx:
                raise _Unknown
            return ctx[e.field]
        if t is ir.Ref:
            sym = e.sym
            if sym.kind == "dim" and sym.name in dims:
                return int(dims[sym.name])
            if sym.kind == "scalar_param" and sym.name in scalars:
                return int(scalars[sym.name])
            if sym.kind == "let" and id(sym) in lets:
                if id(sym) not in memo:
                    memo[id(sym)] = ev(lets[id(sym)])
                return memo[id(sym)]
            raise _Unknown
        if t is ir.Binary and e.op in ("+", "-", "*", "/", "%"):
            a, b = ev(e.a), ev(e.b)
            if e.op == "+":
                return a + b
            if e.op == "-":
                return a - b
            if e.op == "*":
                return a * b
            if np.any(np.asarray(b) == 0):
                raise _Unknown
            q = np.trunc(np.asarray(a) / np.asarray(b)).astype(np.int64)   # the language truncates
            return q if e.op == "/" else a - q * b
        if t is ir.Math and e.fn in ("min", "max") and len(e.args) == 2:
            a, b = ev(e.args[0]), ev(e.args[1])
            return np.minimum(a, b) if e.fn == "min" else np.maximum(a, b)
        raise _Unknown

    def extent(d):
        if isinstance(d, int):
            return d
        if d in dims:
            return int(dims[d])
        raise _Unknown

    full = np.ones(len(idx), dtype=bool)
    starts = []

    def slices_of(stmt):
        for e in ir.stmt_exprs(stmt):
            for x in ir.walk_expr(e):
                if type(x) is ir.Slice and x.base.kind == "tensor":
                    yield x

    try:
        for stmt in kir.body:
            if ir.child_blocks(stmt):
                if any(True for s2 in ir.walk_stmts([stmt]) for _ in slices_of(s2)):
                    return None
                continue
            for sl in slices_of(stmt):
                tdims = sl.base.type.dims
                if len(sl.subs) != len(tdims):
                    return None
                off = np.zeros((), dtype=np.int64)
                for sub, d in zip(sl.subs, tdims):
                    if isinstance(sub, ir.SubRange):
                        lo = 0 if sub.full else ev(sub.start)
                        length = int(sub.length)
                    else:
                        lo, length = ev(sub.index), 1
                    off = off * extent(d) + np.asarray(lo, dtype=np.int64)
                    if isinstance(sub, ir.SubRange) and sub.full:
                        continue
                    full &= (np.asarray(lo) >= 0) & (np.asarray(lo) + length <= extent(d))
                from ...types import dtype as _dtype
                starts.append((stmt.span.line, sl.base.name, off, _dtype(sl.base.type.dtype).itemsize))
            if isinstance(stmt, ir.Let) and isinstance(stmt.sym.type, ir.ScalarT):
                lets[id(stmt.sym)] = stmt.value
    except _Unknown:
        return None
    finally:
        # ev is a recursive closure (a reference cycle): drop the chunk's arrays now rather
        # than at the next garbage collection, or every chunk's would pile up
        ctx.clear()
        memo.clear()
    return full, starts


@dataclass
class LaunchPrediction:
    """What the analysis predicts for one launch, before (or without) a measurement: the kernel,
    the launch's grid and runtime extents, the analysis made with those extents, and
    `rows` (`predicted_lines`, leaving out metrics with nothing predicted). `text()` is the table
    a Profile prints, without its measured column."""
    kernel: str
    grid: Tuple[int, int, int]
    dims: Dict[str, int]
    full_ctas: Optional[int]
    analysis: object
    rows: List[dict]

    @property
    def ctas(self) -> int:
        return int(np.prod(self.grid))

    def text(self) -> str:
        full = "" if self.full_ctas is None or self.full_ctas == self.ctas else f", {self.full_ctas} of them full"
        out = [f"predicted for {self.kernel} (grid {self.grid}, {self.ctas} CTA{'' if self.ctas == 1 else 's'}{full}; "
               f"{', '.join(f'{k} = {v}' for k, v in self.dims.items()) or 'no runtime dims'}):",
               "  line | metric | predicted for the launch (per CTA)"]
        for r in self.rows:
            pred = (str(r["predicted"]) if r["predicted"] == r["predicted_upper"]
                    else f"{r['predicted']}..{r['predicted_upper']}")
            el = r.get("elements")
            per = (f"{r['per_cta']}" if el is None else
                   f"{r['per_cta']}, and {el.sectors} for the per-thread element accesses of "
                   f"{', '.join(el.tensors)} over the launch")
            out.append(f"  {r['line']:>4} | {r['metric']} | {pred}{_beyond_text(r['beyond_copies'], self.ctas)} "
                       f"({per})")
        return "\n".join(out)

    __str__ = text

    def __repr__(self):
        return self.text()


def predict_launch(kernel, grid, args, tune: Optional[dict] = None, full_ctas: Optional[int] = None,
                   arch=None) -> LaunchPrediction:
    """The analysis' prediction for the launch `kernel[grid](*args)` at the @autotune values
    `tune`, on either backend and without a GPU: the launch's checks (bad arguments raise the
    launch's LaunchError), the variant and runtime extents it binds, and `predicted_lines` for
    its CTAs. Nothing is launched; the arguments are not touched."""
    from ...analysis import analyze
    from ..checks import prepare
    ch = prepare(kernel, grid, args, variant=dict(tune) if tune else None).chosen
    dims = {k: int(v) for k, v in ch.bound.dims.items()}
    a = analyze(kernel.ir(**dict(ch.tune)), extents=dims, arch=arch)
    g = tuple(int(x) for x in ch.grid)
    ctas = int(np.prod(g))
    if full_ctas is None:
        full_ctas = count_full_ctas(ch.kir, g, dims, ch.bound.scalars)
    from ...analysis.thread_traffic import element_sectors, statement_turns
    elements = element_sectors(ch.kir, g, dims, ch.bound.scalars)
    starts = start_bytes(ch.kir, g, dims, ch.bound.scalars)
    st = statement_turns(ch.kir, g, dims, ch.bound.scalars)
    turns = st.lines if st is not None else None
    if full_ctas is None and st is not None:
        full_ctas = st.full_ctas
    rows = [r for r in predicted_lines(a, ctas, full_ctas, elements=elements, starts=starts, turns=turns)
            if r["plans"] or r["beyond_copies"] or r["elements"]]
    rows = [r for r in rows if r["per_cta"] or r["elements"] or r["metric"] == "global sectors"]
    return LaunchPrediction(kernel.name, g, dims, full_ctas, a, rows)


def _beyond_text(also, ctas: int) -> str:
    """' (with 160 for the broadcast read of s)': the shared accesses beyond the copy plans in a
    prediction (`Profile.compare`'s "beyond_copies"), whole launch."""
    if not also:
        return ""
    return " (with " + ", ".join(f"{wf * ctas} for the {kind} of {tile}" for kind, tile, wf in also) + ")"


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
    at_barrier = [LineFigures(i + 1) for i in range(len(barriers))]
    seen: set = set()       # SASS addresses counted already (tile lines first: they hold inlined helpers too)
    srcs = [s for s in N.read_source(source_csv) if not (s.kernel and s.kernel != job["symbol"])]
    srcs.sort(key=lambda s: (s.file != N.TILE_FILE, s.file != N.BARRIER_FILE))
    for src in srcs:
        if src.file == N.TILE_FILE:
            lines.setdefault(src.line, LineFigures(src.line)).add(src, seen)
        elif src.file == N.BARRIER_FILE and 1 <= src.line <= len(barriers):
            at_barrier[src.line - 1].add(src, seen)
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
    # the kernel's samples and stall reasons: every instruction once (an inlined helper's
    # instructions are listed under the calling line and again under the helper's own line)
    counted = list(lines.values()) + list(other.values()) + at_barrier
    total = sum(f.samples for f in counted)
    stalls: Dict[str, int] = {}
    for f in counted:
        for k, x in f.stalls.items():
            stalls[k] = stalls.get(k, 0) + x
    for b, f in zip(barriers, at_barrier):
        b["samples"] = f.samples
        b["barrier_samples"] = int(f.stalls.get("barrier", 0))
        b["share"] = b["samples"] / total if total else 0.0
    return Profile(job["kernel"], job["symbol"], dict(job["variant"]), tuple(job["grid"]), dict(job["dims"]),
                   lines, barriers, km, sorted(stalls.items(), key=lambda kv: -kv[1]), other,
                   note=job.get("note", ""), full_ctas=job.get("full_ctas"),
                   device=raws[0].get("device", ""),
                   helper_calls={k: [int(x) for x in v] for k, v in calls.items()},
                   element_traffic=_elements_from_job(job.get("element_traffic", {})),
                   start_bytes=_starts_from_job(job.get("start_bytes")),
                   element_unknown=job.get("element_unknown", ""),
                   turns=_turns_from_job(job.get("turns", {})))


def _starts_from_job(d):
    if d is None:
        return None
    return [(int(line), name, {int(r): (int(v[0]), int(v[1])) for r, v in counts.items()})
            for line, name, counts in d]


def _elements_from_job(d) -> Optional[Dict[int, object]]:
    from ...analysis.thread_traffic import ElementTraffic
    if d is None:
        return None
    return {int(k): ElementTraffic(int(k), int(v["sectors"]), int(v["requests"]), tuple(v["tensors"]),
                                   int(v.get("sectors_upper", v["sectors"])), int(v.get("wavefronts", 0)),
                                   int(v.get("shared_requests", 0)), tuple(v.get("tiles", ())))
            for k, v in d.items()}


def _turns_from_job(d) -> Optional[Dict[int, Dict[int, int]]]:
    if d is None:
        return None
    return {int(line): {int(t): int(n) for t, n in per.items()} for line, per in d.items()}


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
    from ...analysis.thread_traffic import element_sectors, statement_turns
    dims = {k: int(v) for k, v in ch.bound.dims.items()}
    why: List[str] = []
    el = element_sectors(ch.kir, tuple(ch.grid), dims, ch.bound.scalars, why)
    st = statement_turns(ch.kir, tuple(ch.grid), dims, ch.bound.scalars)
    full = count_full_ctas(ch.kir, tuple(ch.grid), dims, ch.bound.scalars)
    if full is None and st is not None:
        full = st.full_ctas
    return {"kernel": kernel.name, "symbol": kernel_symbol(ch.kir), "variant": dict(ch.tune),
            "grid": list(ch.grid), "dims": dims,
            "full_ctas": full,
            "start_bytes": _starts_to_job(start_bytes(ch.kir, tuple(ch.grid), dims, ch.bound.scalars)),
            "element_unknown": why[0] if why else "",
            "turns": _turns_to_job(st.lines if st is not None else None),
            "element_traffic": None if el is None else {str(k): {"sectors": v.sectors, "requests": v.requests,
                                                                 "sectors_upper": v.sectors_upper,
                                                                 "wavefronts": v.wavefronts,
                                                                 "shared_requests": v.shared_requests,
                                                                 "tiles": list(v.tiles),
                                                                 "tensors": list(v.tensors)} for k, v in el.items()},
            "barriers": [list(b) for b in lined.barriers],
            "helper_calls": N.helper_calls(ks.source, off),
            "helper_lines": {str(k): v for k, v in N.helper_of_line(ks.source).items()}}


def _turns_to_job(turns):
    if turns is None:
        return None
    return {str(line): {str(t): n for t, n in per.items()} for line, per in turns.items()}


def _starts_to_job(starts):
    if starts is None:
        return None
    return [[line, name, {str(r): list(v) for r, v in counts.items()}] for line, name, counts in starts]


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
