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
        tile, wavefronts per CTA). `full_ctas` defaults to the Profile's own count
        (`count_full_ctas` of the launch, where it can tell; else every CTA). A measurement inside the range is ok; otherwise
        `reason` says what differs."""
        ctas = self.ctas
        if full_ctas is None:
            full_ctas = self.full_ctas
        measured = {ln for ln, f in self.lines.items() if f.sectors or f.wavefronts}
        rows = []
        for r in predicted_lines(analysis, ctas, full_ctas, also_lines=measured):
            f = self.lines.get(r["line"], LineFigures(r["line"]))
            meas = f.sectors if r["metric"] == "global sectors" else f.wavefronts
            if not r["plans"] and not r["beyond_copies"] and not meas:
                continue
            lo, hi = r["predicted"], r["predicted_upper"]
            ok = lo <= meas <= hi
            rows.append({"line": r["line"], "metric": r["metric"], "predicted": lo, "predicted_upper": hi,
                         "measured": meas, "ok": ok, "beyond_copies": r["beyond_copies"],
                         "reason": "" if ok else _reason(r["metric"], r["plans"], f, lo, hi, r["beyond_copies"])})
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


def predicted_lines(analysis, ctas: int, full_ctas: Optional[int] = None, also_lines=()) -> List[dict]:
    """The analysis' figures for one launch of `ctas` CTAs, per tile line with a copy plan or
    shared traffic (and per line of `also_lines`), two rows a line: {"line", "metric" ("global
    sectors" / "shared wavefronts"), "per_cta", "predicted" (per_cta x the full CTAs,
    `full_ctas`, default all), "predicted_upper" (per_cta x all CTAs), "plans" (the line's
    CopyPlans), "beyond_copies"}. Sectors are the copy plans'; wavefronts are the copy plans'
    plus the line's `analysis.shared_traffic` records (the shared accesses no copy plan counts),
    listed in "beyond_copies" as (kind, tile, wavefronts per CTA): per line, the same split as
    `Analysis.traffic()`. The one home of the prediction `Profile.compare` and
    `LaunchPrediction` show."""
    full = ctas if full_ctas is None else check_full_ctas(full_ctas, ctas)
    plans: Dict[int, list] = {}
    for cp in analysis.copies:
        plans.setdefault(int(cp.line), []).append(cp)
    extra: Dict[int, list] = {}
    for t in getattr(analysis, "shared_traffic", ()):
        extra.setdefault(int(t.line), []).append(t)
    rows = []
    for line in sorted(set(plans) | set(extra) | set(also_lines)):
        ps, ts = plans.get(line, []), extra.get(line, [])
        for metric, per_cta, also in (
                ("global sectors", sum(int(p.sectors) for p in ps), []),
                ("shared wavefronts", sum(int(p.wavefronts) for p in ps) + sum(int(t.wavefronts) for t in ts),
                 [(t.kind, t.tile, int(t.wavefronts)) for t in ts if t.wavefronts])):
            rows.append({"line": line, "metric": metric, "per_cta": per_cta, "predicted": per_cta * full,
                         "predicted_upper": per_cta * ctas, "plans": ps, "beyond_copies": also})
    return rows


class _Unknown(Exception):
    pass


def count_full_ctas(kir, grid, dims: Dict[str, int], scalars: Optional[Dict[str, object]] = None) -> Optional[int]:
    """How many CTAs of `grid` (x, y, z) have every tensor slice the kernel's statements take
    wholly inside its tensor, with the launch's runtime extents `dims` and scalar arguments
    `scalars`: the CTAs the copy plans' figures describe exactly (the others are masked at an
    edge). Each slice start is evaluated per CTA from constants, dims, scalar parameters,
    `ctx.block.*` / `ctx.grid.*` and the `let`s before it (+, -, *, /, %, min, max). None when
    that is not possible: a tensor slice under a loop or a branch, or a start that depends on
    anything else (a thread, a var)."""
    scalars = scalars or {}
    g = tuple(int(x) for x in tuple(grid) + (1,) * (3 - len(tuple(grid))))
    n = g[0] * g[1] * g[2]
    total = 0
    # CTAs a chunk at a time: a grid may hold up to 2**31 - 1 CTAs along x alone, and one array
    # of every CTA's index would then take 16 GB
    for first in range(0, n, _CTA_CHUNK):
        count = _count_full_chunk(kir, g, dims, scalars, np.arange(first, min(n, first + _CTA_CHUNK), dtype=np.int64))
        if count is None:
            return None
        total += count
    return total


_CTA_CHUNK = 1 << 20


def _count_full_chunk(kir, g, dims, scalars, idx) -> Optional[int]:
    """count_full_ctas over the CTAs of linear indices `idx` (x fastest) of the grid g."""
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
                for sub, d in zip(sl.subs, tdims):
                    if isinstance(sub, ir.SubRange):
                        if sub.full:
                            continue
                        lo, length = ev(sub.start), int(sub.length)
                    else:
                        lo, length = ev(sub.index), 1
                    full &= (np.asarray(lo) >= 0) & (np.asarray(lo) + length <= extent(d))
            if isinstance(stmt, ir.Let) and isinstance(stmt.sym.type, ir.ScalarT):
                lets[id(stmt.sym)] = stmt.value
    except _Unknown:
        return None
    finally:
        # ev is a recursive closure (a reference cycle): drop the chunk's arrays now rather
        # than at the next garbage collection, or every chunk's would pile up
        ctx.clear()
        memo.clear()
    return int(np.count_nonzero(full))


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
            out.append(f"  {r['line']:>4} | {r['metric']} | {pred}{_beyond_text(r['beyond_copies'], self.ctas)} "
                       f"({r['per_cta']})")
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
    rows = [r for r in predicted_lines(a, ctas, full_ctas) if r["plans"] or r["beyond_copies"]]
    rows = [r for r in rows if r["per_cta"] or r["metric"] == "global sectors"]
    return LaunchPrediction(kernel.name, g, dims, full_ctas, a, rows)


def _beyond_text(also, ctas: int) -> str:
    """' (with 160 for the broadcast read of s)': the shared accesses beyond the copy plans in a
    prediction (`Profile.compare`'s "beyond_copies"), whole launch."""
    if not also:
        return ""
    return " (with " + ", ".join(f"{wf * ctas} for the {kind} of {tile}" for kind, tile, wf in also) + ")"


def _reason(metric, plans, f: LineFigures, lo, hi, also=()) -> str:
    why = _reason_text(metric, plans, f, lo, hi, also)
    k = 1 if metric == "global sectors" else 2
    ops = [f"{op} {v[k]}" for op, v in f.ops.items() if v[k]]
    return why + (f" (by instruction: {', '.join(ops)})" if ops else "")


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
                   device=raws[0].get("device", ""))


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
    dims = {k: int(v) for k, v in ch.bound.dims.items()}
    return {"kernel": kernel.name, "symbol": kernel_symbol(ch.kir), "variant": dict(ch.tune),
            "grid": list(ch.grid), "dims": dims,
            "full_ctas": count_full_ctas(ch.kir, tuple(ch.grid), dims, ch.bound.scalars),
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
