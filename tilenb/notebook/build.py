"""From a compiled kernel to the traits of its views (pure data; no display here).

Guarantees: `make_views(kernel, show, tune)` returns one widget per requested view, in the
order `VIEW_NAMES` lists them; it never raises for a failed analysis, code generation or timing
read-out: the view carries the reason in its `note` and shows what it can. It raises
`TileError` only for a bad request (an unknown view name).

Lines: the analyses number lines of the compiled source. A `Labels` maps each to the text the
user sees: by default the line plus the module's `line_offset`; the notebook magic gives its
own (cell lines, and "In[3]:7" for functions brought in from earlier cells).
"""
from __future__ import annotations

import re
from typing import Callable, Iterable, List, Optional, Sequence, Tuple

from ..lang.diagnostics import TileError
from ..target import STATIC_SMEM
from . import hardware

VIEW_NAMES = ("threads", "lifetimes", "barriers", "timing", "cuda")
DEFAULT_VIEWS = ("threads", "lifetimes", "barriers")

Labels = Callable[[int], str]


def parse_views(spec: Optional[str], backend: str = "cpu") -> Tuple[str, ...]:
    """'threads,cuda' -> ('threads', 'cuda'); 'none' -> (); 'all' -> every view; None -> the
    default views (and timing on the CUDA backend). Raises TileError naming an unknown view."""
    if spec is None:
        return DEFAULT_VIEWS + (("timing",) if backend == "cuda" else ())
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if names == ["none"]:
        return ()
    if names == ["all"]:
        return VIEW_NAMES
    bad = [n for n in names if n not in VIEW_NAMES]
    if bad and bad[0] in ("all", "none"):
        raise TileError(f"{bad[0]!r} stands alone in --show ('--show {bad[0]}'); otherwise list views from "
                        f"{', '.join(VIEW_NAMES)}")
    if bad:
        raise TileError(f"unknown view {bad[0]!r} in --show: choose from {', '.join(VIEW_NAMES)}, or all, or none")
    return tuple(n for n in VIEW_NAMES if n in names)


def default_labels(kernel) -> Labels:
    off = kernel.module.checked.source.line_offset
    return lambda line: str(line + off)


def _source_lines(kernel) -> List[str]:
    return kernel.module.source.split("\n")       # lines end at "\n" only, as the lexer counts them


def _spans(kernel) -> List[Tuple[int, int]]:
    """(first, last) line of the kernel, then of each function of the module."""
    out = [(kernel.checked.ast.span.line, kernel.checked.ast.span.end_line or kernel.checked.ast.span.line)]
    for f in kernel.module.checked.functions.values():
        out.append((f.span.line, f.span.end_line or f.span.line))
    return out


def listing(kernel, wanted: Iterable[int], labels: Labels) -> List[list]:
    """[[line, label, text]] of the kernel's lines, plus the lines of each function whose lines
    are in `wanted` (statements inlined from functions carry the function's lines)."""
    src = _source_lines(kernel)
    spans = _spans(kernel)
    keep = set(range(spans[0][0], spans[0][1] + 1))
    for line in wanted:
        if line in keep or not 1 <= line <= len(src):
            continue
        for a, b in spans[1:]:
            if a <= line <= b:
                keep.update(range(a, b + 1))
                break
        else:
            keep.add(line)
    return [[n, labels(n), src[n - 1]] for n in sorted(keep) if 1 <= n <= len(src)]


def analysis_record(kernel, tune: Optional[dict] = None) -> Tuple[Optional[dict], str]:
    """(the analysis as JSON, '') or (None, why it could not be made): for the GPU the kernel's
    module runs on, when there is one (its loops and shared memory are that target's), else for
    any GPU."""
    try:
        arch = _device_arch(kernel)
        a = kernel.analysis(arch=arch, **(tune or {})) if arch is not None else kernel.analysis(**(tune or {}))
        return (a.to_json() if hasattr(a, "to_json") else dict(a)), ""
    except TileError as e:
        return None, str(e)
    except ImportError:
        return None, "the analyses (tilenb.analysis.analyze) are not available in this build"
    except Exception as e:  # a bug in a later stage must not take the notebook down
        return None, f"internal error while analysing {kernel.name}: {type(e).__name__}: {e}"


def worst_copy(copies: Sequence[dict]) -> int:
    """Index of the copy furthest from its ideal (extra sectors plus extra wavefronts), so the
    thread map opens on a problem when there is one; 0 when every copy is ideal."""
    def excess(c):
        return (max(0, c.get("sectors", 0) - c.get("ideal_sectors", 0))
                + max(0, c.get("wavefronts", 0) - c.get("ideal_wavefronts", 0)))
    best = max(range(len(copies)), key=lambda i: (excess(copies[i]), -i), default=0)
    return best if copies and excess(copies[best]) > 0 else 0


def _lines_in(a: dict) -> List[int]:
    out = [t["first_line"] for t in a.get("tiles", [])] + [t["last_line"] for t in a.get("tiles", [])]
    out += [r["line"] for r in a.get("ruler", [])] + [b["line"] for b in a.get("barriers", [])]
    out += [w["line"] for w in a.get("waits", [])]
    out += [c["line"] for c in a.get("copies", [])] + [d["line"] for d in a.get("dot_reads", [])]
    return out


_LINE_WORD = re.compile(r"\bline (\d+)\b")


def relabel(text: str, labels: Labels) -> str:
    """'... at line 5 ...' -> '... at line 6 ...': line numbers that the analyses and the code
    generator write into their texts (compiled-source lines) as the user counts them."""
    return _LINE_WORD.sub(lambda m: f"line {labels(int(m.group(1)))}", text)


# ---- CUDA source ------------------------------------------------------------------------
_LINE_MARK = re.compile(r"//\s*line\s+(\d+)\b")


def cuda_origins(code: str) -> List[int]:
    """For each line of generated CUDA, the tile-language line it comes from (0: none).

    A `// line N:` comment starts the code of line N; the lines after it belong to N until the
    next such comment or a line indented less than the comment (the end of its block)."""
    out = []
    cur, indent = 0, 0
    for text in code.splitlines():
        m = _LINE_MARK.search(text)
        ind = len(text) - len(text.lstrip())
        if m:
            cur, indent = int(m.group(1)), ind
        elif cur and text.strip() and ind < indent:
            cur = 0
        out.append(cur)
    return out


def cuda_tokens(code: str, labels: Optional[Labels] = None) -> List[List[List[str]]]:
    """Highlighted CUDA: one list of [Pygments short class, text] per line (no newlines).
    With `labels`, the line numbers in comments are relabelled (see `relabel`)."""
    try:
        from pygments.lexers.c_like import CudaLexer
        from pygments.token import STANDARD_TYPES
    except ImportError:
        return [[["", line]] for line in code.splitlines()]
    lines: List[List[List[str]]] = [[]]
    for tok, text in CudaLexer().get_tokens(code):
        cls = ""
        t = tok
        while t is not None and not cls:
            cls = STANDARD_TYPES.get(t, "")
            t = t.parent
        if labels is not None and cls.startswith("c"):     # comments only
            text = relabel(text, labels)
        parts = text.split("\n")
        for i, part in enumerate(parts):
            if i:
                lines.append([])
            if part:
                lines[-1].append([cls, part])
    n = len(code.splitlines())
    return lines[:n]


# ---- timing ----------------------------------------------------------------------------
def _get(obj, *names, default=None):
    for n in names:
        if isinstance(obj, dict) and obj.get(n) is not None:
            return obj[n]
        if not isinstance(obj, dict) and getattr(obj, n, None) is not None:
            return getattr(obj, n)
    return default


def flops_kind(kernel) -> str:
    """The arithmetic a kernel's dots use: tensor-core BF16/FP16 when a dot reads such tiles."""
    from .. import ir
    try:
        kir = kernel.ir()
        for s in ir.walk_stmts(kir.body):
            for e in ir.stmt_exprs(s):
                for x in ir.walk_expr(e):
                    if isinstance(x, ir.Dot):
                        dt = x.a.type.dtype
                        if dt == "bf16":
                            return "BF16 tensor core (dense)"
                        if dt == "f16":
                            return "FP16 tensor core (dense)"
    except Exception:  # the kind only picks a roof; never fail the view over it
        pass
    return "FP32"


def _device_name() -> Optional[str]:
    try:
        import cupy
        name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # no CuPy or no device: the view says the device is unknown
        return None


def compulsory_bytes(kernel, variant: Optional[dict], dims: Optional[dict]) -> Optional[int]:
    """Bytes every tensor argument occupies, summed: the traffic of a kernel that moves each
    tensor once (a lower bound; a tensor read and written counts once). None without `dims`
    (runtime dim name -> extent) or when a dim is missing."""
    from .. import ir
    from ..types import DTYPES
    if not dims:
        return None
    try:
        kir = kernel.ir(**(variant or {}))
        total = 0
        for p in kir.params:
            t = p.sym.type
            if isinstance(t, ir.TensorT):
                n = 1
                for d in t.dims:
                    n *= int(d) if isinstance(d, int) else int(dims[d])
                total += n * DTYPES[t.dtype].itemsize
        return total
    except (KeyError, TileError):
        return None


def timing_record(kernel) -> dict:
    """What the timing view shows, from `kernel.module.backend` and `kernel.last_run` (a
    `tilenb.runtime.checks.RunReport`: `seconds`, `variant`, `note`, and in `extra` the CUDA
    backend's `kernel_ms` (CUDA events), `wall_s`, `timings` per autotune variant, and where
    reported `device`, `bytes`, `flops`, `dims`).

    Keys: backend, reason (why there is no GPU time), device, launches, variant_label,
    kernel_ms (CUDA-event time of the launch), host_ms (host time of the call beyond the
    kernel: checks, compilation on first use, copies, and autotuning when it ran), host_note,
    bytes, flops, bytes_per_s, flops_per_s, peak (see `hardware.peak_for`), variants ([{label,
    ms, best, note}]: each autotune variant's time, ms None when it was skipped)."""
    backend = kernel.module.backend
    if backend != "cuda":
        return {"backend": backend, "reason": "this kernel runs on the CPU backend (the numpy reference "
                "executor), which measures no GPU time; compile with --backend cuda on a machine with a GPU"}
    run = kernel.last_run
    if run is None or _get(run, "backend", default="cuda") != "cuda":
        return {"backend": "cuda", "reason": ""}
    extra = _get(run, "extra", default={}) or {}
    seconds = _get(run, "seconds")
    kernel_ms = _get(extra, "kernel_ms") or _get(run, "kernel_ms") or (seconds * 1e3 if seconds else None)
    wall_s = _get(extra, "wall_s")
    host_ms = max(0.0, wall_s * 1e3 - kernel_ms) if (wall_s and kernel_ms) else _get(run, "host_ms")
    note = str(_get(run, "note", default="") or "")
    variant = _get(run, "variant", "tune")
    nbytes = _get(extra, "bytes") or _get(run, "bytes") or compulsory_bytes(kernel, variant, _get(extra, "dims"))
    flops = _get(extra, "flops") or _get(run, "flops")
    device = _get(extra, "device") or _get(run, "device") or _device_name()
    rec = {"backend": "cuda", "reason": "", "device": device, "launches": int(_get(run, "launches", default=1)),
           "variant_label": _tune_label(variant), "kernel_ms": kernel_ms, "host_ms": host_ms,
           "host_note": "argument checks, copies between host and GPU, compilation on first use"
                        + (", timing every @autotune variant" if note.startswith("@autotune: timed") else ""),
           "bytes": nbytes, "flops": flops, "bytes_per_s": None, "flops_per_s": None,
           "peak": hardware.peak_for(device, flops_kind(kernel)), "variants": [], "note": note}
    if kernel_ms:
        sec = float(kernel_ms) / 1e3
        rec["bytes_per_s"] = float(nbytes) / sec if nbytes else None
        rec["flops_per_s"] = float(flops) / sec if flops else None
    rows = []
    for v in _get(extra, "timings", default=None) or _get(run, "variants", default=[]) or []:
        if isinstance(v, (tuple, list)) and len(v) == 2:
            label, ms, why = _tune_label(v[0]), v[1], ""
        else:
            label = _get(v, "variant") or _tune_label(_get(v, "tune"))
            ms, why = _get(v, "ms", "kernel_ms"), str(_get(v, "note", default="") or "")
        rows.append({"label": str(label), "ms": None if ms is None else float(ms), "best": False, "note": why})
    timed = [r for r in rows if r["ms"] is not None]
    if timed:
        min(timed, key=lambda r: r["ms"])["best"] = True
    rec["variants"] = rows
    return rec


def _tune_label(tune) -> str:
    if not tune:
        return "default"
    if isinstance(tune, dict):
        return ", ".join(f"{k}={v}" for k, v in tune.items())
    return str(tune)


# ---- the views -------------------------------------------------------------------------
def make_views(kernel, show: Sequence[str] = DEFAULT_VIEWS, tune: Optional[dict] = None,
               labels: Optional[Labels] = None, profile=None) -> list:
    """One widget per name in `show` (see VIEW_NAMES) for `kernel` at the @autotune values
    `tune` (default: the first of each). profile: a `tilenb.runtime.gpu.profile.Profile` of the
    kernel; its measured figures (`Profile.view_data`) go beside the predictions: each copy of
    the thread map gains `measured` and the thread map a `measured` table of every line
    (`measured_lines`), each barrier `measured` (its share of the warp-stall samples) and the
    barrier view a `measured` record (the code generator's own barriers), the timing record
    `measured` (`measured_timing`: DRAM bytes against the minimal bytes, L2 bytes, duration,
    occupancy, a roofline point). Raises TileError for an unknown view name."""
    if profile is not None:
        tune = dict(profile.variant)
    from . import widgets as W
    bad = [s for s in show if s not in VIEW_NAMES]
    if bad:
        raise TileError(f"unknown view {bad[0]!r}: choose from {', '.join(VIEW_NAMES)}")
    labels = labels or default_labels(kernel)
    a, why = (analysis_record(kernel, tune) if set(show) & {"threads", "lifetimes", "barriers"}
              else (None, ""))
    measured = None
    if profile is not None:
        measured = profile.view_data(profile.predicted if profile.predicted is not None else profile.analysis(kernel))
        if a:
            a = dict(a, copies=[dict(c, measured=measured["lines"].get(int(c["line"])))
                                for c in a.get("copies", [])],
                     barriers=[dict(b, measured=measured["barriers"].get((b.get("where") or "before", int(b["line"]))))
                               for b in a.get("barriers", [])])
    wanted = (_lines_in(a) if a else []) + (list(measured["lines"]) if measured else [])
    lines = listing(kernel, wanted, labels)
    name = kernel.name
    out = []
    for view in VIEW_NAMES:
        if view not in show:
            continue
        if view == "threads":
            copies = (a or {}).get("copies", [])
            out.append(W.ThreadMap(kernel=name, lines=lines, note=why, threads=int((a or {}).get("threads", 0)),
                                   copies=copies, tiles=(a or {}).get("tiles", []), selected=worst_copy(copies),
                                   shared=(a or {}).get("shared_traffic", []), traffic=(a or {}).get("traffic", {}),
                                   dot_reads=(a or {}).get("dot_reads", []),
                                   measured=measured_lines(measured) if measured else {}))
        elif view == "lifetimes":
            out.append(W.LifetimeRuler(kernel=name, lines=lines, note=why, footprint=int((a or {}).get("footprint", 0)),
                                       budget=int((a or {}).get("budget", STATIC_SMEM)), tiles=(a or {}).get("tiles", []),
                                       ruler=(a or {}).get("ruler", []),
                                       loops=[dict(lp, why=relabel(str(lp.get("why", "")), labels))
                                              for lp in (a or {}).get("loops", [])]))
        elif view == "barriers":
            bars = [dict(b, reason=relabel(str(b.get("reason", "")), labels)) for b in (a or {}).get("barriers", [])]
            waits = [dict(w, reason=relabel(str(w.get("reason", "")), labels)) for w in (a or {}).get("waits", [])]
            out.append(W.BarrierView(kernel=name, lines=lines, note=why, barriers=bars, waits=waits,
                                     measured=({"ctas": measured["ctas"], "internal": measured["internal_barriers"]}
                                               if measured else {})))
        elif view == "timing":
            rec = timing_record(kernel)
            if measured is not None:
                rec = dict(rec, measured=measured_timing(kernel, profile, measured, rec))
                if not rec.get("bytes"):    # the minimal bytes of the profiled launch
                    rec["bytes"] = rec["measured"]["minimal_bytes"]
            out.append(W.TimingView(kernel=name, lines=[], timing=rec))
        elif view == "cuda":
            code, note = "", ""
            try:
                # compiled-source line numbers throughout, relabelled below like every view's
                from ..codegen import cuda_source
                code = cuda_source(kernel.ir(**(tune or {})), kernel.module.source, 0, arch=_device_arch(kernel))
            except TileError as e:
                note = str(e)
            except ImportError:
                note = "the CUDA code generator (tilenb.codegen) is not available in this build"
            except Exception as e:  # a code generator bug must not take the notebook down
                note = f"internal error while generating CUDA for {name}: {type(e).__name__}: {e}"
            out.append(W.CudaView(kernel=name, lines=lines, note=note, cuda=cuda_tokens(code, labels),
                                  origin=cuda_origins(code)))
    return out


def measured_lines(measured: dict) -> dict:
    """The thread map's `measured` trait: {"ctas", "lines": [the `Profile.view_data` record of
    each line, in line order]}: every line where the analysis plans a copy or the hardware
    counted global or shared traffic, so a differing line with no copy statement shows too."""
    return {"ctas": measured["ctas"], "lines": [measured["lines"][k] for k in sorted(measured["lines"])]}


def measured_timing(kernel, profile, measured: dict, rec: dict) -> dict:
    """The timing record's `measured` part (one home for the JS view, the text and the PNG):
    `Profile.view_data`'s "timing" (duration_ns under ncu, dram_bytes, dram_read_bytes,
    dram_write_bytes, l2_bytes, achieved_occupancy_pct, dram_bytes_per_s, device) plus ctas;
    minimal_read_bytes / minimal_write_bytes / minimal_bytes (the bytes of the tensors the
    profiled launch reads / writes, each once, at the profile's extents: the least DRAM
    traffic; `traffic.tensor_bytes`), None where unknown; dram_note (why DRAM writes may read
    below the minimal: ncu counts only the traffic during the kernel); peak (the launch
    record's, else `hardware.peak_for` of the GPU ncu measured on); flops (the dots' FLOPs at
    the profile's extents, `traffic.launch_flops`: 0 with no dot, None where unknown); and
    roofline: {"ai" (FLOP per measured DRAM byte), "flops_per_s" (FLOPs over the duration under
    ncu), "predicted_ai" (FLOP per minimal byte), "predicted_flops_per_s" (the roof at that
    intensity: the fastest the minimal traffic allows)} or None, with roofline_note saying why."""
    t = dict(measured["timing"], ctas=measured["ctas"])
    flops, rb, wb = None, None, None
    try:
        from ..runtime.gpu.traffic import launch_flops, tensor_bytes
        kir = kernel.ir(**profile.variant)
        rb, wb = tensor_bytes(kir, profile.dims)
        flops = launch_flops(kir, profile.dims, profile.grid)
    except (TileError, ImportError, KeyError):
        pass
    t["minimal_read_bytes"], t["minimal_write_bytes"] = rb, wb
    t["minimal_bytes"] = None if rb is None else rb + wb
    t["dram_note"] = ""
    if wb and t.get("dram_write_bytes", 0) < wb:
        t["dram_note"] = ("ncu counts the DRAM traffic during the kernel only: stores the L2 still holds when the "
                          "kernel ends are written to DRAM after it, uncounted")
    t["peak"] = rec.get("peak") or hardware.peak_for(t.get("device"), flops_kind(kernel))
    t["flops"] = flops
    t["roofline"], t["roofline_note"] = None, ""
    dur, dram, peak, minimal = t.get("duration_ns"), t.get("dram_bytes"), t["peak"], t["minimal_bytes"]
    if not flops:
        t["roofline_note"] = ("no roofline point: the kernel has no dot, so it claims no FLOPs; its DRAM bandwidth "
                              "under ncu places it against the memory roof" if flops == 0 else
                              "no roofline point: the FLOPs of its dots are not known from the launch's extents")
    elif not peak or not peak.get("flops_per_s"):
        t["roofline_note"] = "no roofline: peak figures are not known for this device"
    elif not dur or not dram or not minimal:
        t["roofline_note"] = "no roofline point: ncu reported no duration or no DRAM traffic"
    else:
        pai = flops / minimal
        t["roofline"] = {"ai": flops / dram, "flops_per_s": flops / (dur * 1e-9), "predicted_ai": pai,
                         "predicted_flops_per_s": min(peak["flops_per_s"], pai * peak["bytes_per_s"])}
    return t


def _device_arch(kernel):
    """The GPU's `tilenb.target.Target` when the kernel's module runs on CUDA and one is usable:
    the CUDA view then shows the code that GPU runs. None otherwise."""
    if getattr(kernel.module, "backend", None) != "cuda":
        return None
    try:
        from ..runtime.gpu.cuda import device_target
        return device_target()
    except Exception:  # no CuPy or no device: the code for any target
        return None


def from_analysis(record: dict, source: str, show: Sequence[str] = DEFAULT_VIEWS,
                  labels: Optional[Labels] = None) -> list:
    """Views of an analysis record (`Analysis.to_json()` shape) over `source`, with no kernel:
    for records saved earlier, and for the tests. Timing and CUDA views are not made here."""
    from . import widgets as W
    labels = labels or str
    src = source.split("\n")
    lines = [[n, labels(n), t] for n, t in enumerate(src, 1) if n < len(src) or t]
    name = record.get("kernel", "")
    out = []
    for view in show:
        if view == "threads":
            out.append(W.ThreadMap(kernel=name, lines=lines, threads=int(record.get("threads", 0)),
                                   copies=record.get("copies", []), tiles=record.get("tiles", []),
                                   shared=record.get("shared_traffic", []), traffic=record.get("traffic", {})))
        elif view == "lifetimes":
            out.append(W.LifetimeRuler(kernel=name, lines=lines, footprint=int(record.get("footprint", 0)),
                                       budget=int(record.get("budget", STATIC_SMEM)), tiles=record.get("tiles", []),
                                       ruler=record.get("ruler", []), loops=record.get("loops", [])))
        elif view == "barriers":
            out.append(W.BarrierView(kernel=name, lines=lines, barriers=record.get("barriers", []),
                                     waits=record.get("waits", [])))
    return out


__all__ = ["VIEW_NAMES", "DEFAULT_VIEWS", "parse_views", "make_views", "from_analysis", "timing_record",
           "cuda_tokens", "cuda_origins", "listing", "analysis_record"]
