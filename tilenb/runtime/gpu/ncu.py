"""Reading Nsight Compute (ncu) output, and the source the profiled variant is compiled from.

Guarantees (no GPU and no ncu needed for anything here):

- `METRICS` / `KERNEL_METRICS` name the ncu metrics tilenb compares with the analysis: global
  load / store sectors and shared load / store wavefronts per launch (the figures
  `Analysis.copies` predicts per CTA), and per kernel the duration, DRAM and L2 bytes and the
  achieved occupancy.
- `read_raw(text)` reads the CSV of `ncu --csv --page raw` (one row per profiled launch).
- `read_source(text)` reads the CSV of `ncu --csv --page source --print-source cuda,sass`: per
  source file and line the counters Nsight Compute attributes to it (its SASS instructions'
  totals), and each SASS instruction with its opcode.
- `lined_source(cuda, ...)` turns generated CUDA into the profiled variant's source: the same
  text, each line preceded by a `#line` directive that names the tile-language line the code
  generator wrote it for (from its `// line N:` statement comments), or, for a CTA barrier the
  compiler placed, a line of a barrier list, or, for the prelude and the kernel's set-up code,
  its own line of the plain generated CUDA. The machine code compiled from it (NVRTC with
  `-lineinfo`, tilenb's default option) therefore carries tile-language lines, and ncu's
  source page reports its counters per tile line: the mapping is the compiler's line table,
  not a guess. Only the profiled variant is compiled from this text; the plain generated CUDA
  is unchanged.

The source-page CSV format follows Nsight Compute's documented CLI output (`--page source
--csv --print-source cuda,sass`): rows naming the kernel ("Kernel Name" / "Function Name") and
the file ("File Name" / "File Path"), then a header row ("Line No", "Source", "Address",
"Source", metrics...), source-line rows (a line number first) and SASS rows (an address).
"""
from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ...codegen.emitter import c_string_literal

# the launch totals the analysis predicts (bench/ncu_vs_analysis.py compares the same)
METRICS = {
    "global_ld_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "global_st_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "shared_ld_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "shared_st_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
}
LDGSTS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum"
EXTRA_METRICS = ("smsp__inst_executed_op_global_st.sum", "smsp__inst_executed_op_global_ld.sum",
                 LDGSTS, "smsp__inst_executed_op_ldgsts.sum")
# per kernel: duration (ns), DRAM and L2 bytes, achieved occupancy (% of the SM's warp slots)
KERNEL_METRICS = {
    "duration_ns": "gpu__time_duration.sum",
    "dram_read_bytes": "dram__bytes_read.sum",
    "dram_write_bytes": "dram__bytes_write.sum",
    "l2_bytes": "lts__t_bytes.sum",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
}
# the ncu sections whose counters the source page and the stall reasons need
SECTIONS = ("SourceCounters", "WarpStateStats", "Occupancy", "SpeedOfLight", "MemoryWorkloadAnalysis")

# source-page columns (Nsight Compute's labels)
COL_SECTORS = "L2 Theoretical Sectors Global"
COL_SECTORS_IDEAL = "L2 Theoretical Sectors Global Ideal"
COL_WAVEFRONTS = "L1 Wavefronts Shared"
COL_WAVEFRONTS_IDEAL = "L1 Wavefronts Shared Ideal"
COL_EXECUTED = "Instructions Executed"
COL_SAMPLES = "Warp Stall Sampling (All Samples)"

# the pseudo-files of the profiled variant's #line directives
TILE_FILE = "kernel.tile"
CUDA_FILE = "generated.cu"
BARRIER_FILE = "barriers.txt"


def number(v) -> Optional[float]:
    """A CSV cell as a float ('1,234' -> 1234.0), or None when it is not a number."""
    try:
        return float(str(v).replace(",", "").strip())
    except (TypeError, ValueError):
        return None


# ---- the raw page --------------------------------------------------------------------------
# ncu prints each metric in a unit of its own choosing (its units row): scaled to bytes,
# nanoseconds and bytes per second here, as the metric names in KERNEL_METRICS promise
_UNIT_SCALE = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
               "byte/s": 1.0, "Kbyte/s": 1e3, "Mbyte/s": 1e6, "Gbyte/s": 1e9, "Tbyte/s": 1e12,
               "nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6,
               "second": 1e9, "s": 1e9}


def read_raw(text: str) -> List[dict]:
    """Rows of ncu's raw-page CSV (one per profiled launch, in launch order):
    `{"name": the kernel's symbol, "values": {metric name: float}, "device": the GPU's name
    ("NVIDIA H200"; "" where the page has none)}`, each value scaled by the units row to bytes,
    nanoseconds or bytes per second (ncu prints "89.344 Kbyte", "3.07 us"); a unit it does not
    know (sector, %, inst) leaves the number as printed. ncu's own `==PROF==` lines are skipped."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    out = []
    units: Dict[str, str] = {}
    for r in csv.DictReader(lines):
        name = (r.get("Kernel Name") or "").split("(")[0].strip()
        vals = {k: x for k, x in ((k, number(v)) for k, v in r.items() if k) if x is not None}
        if not name or name == "Kernel Name" or not vals:
            if not out and not units:   # the units row comes first, under the header
                units = {k: (v or "").strip() for k, v in r.items() if k}
            continue
        vals = {k: x * _UNIT_SCALE.get(units.get(k, ""), 1.0) for k, x in vals.items()}
        out.append({"name": name, "values": vals,
                    "device": (r.get("device__attribute_display_name") or "").strip()})
    return out


# ---- the source page -----------------------------------------------------------------------
@dataclass
class SassRow:
    """One SASS instruction of the source page: its address, text, opcode and counters."""
    address: str
    text: str
    values: Dict[str, float]

    @property
    def opcode(self) -> str:
        parts = self.text.split()
        if parts and parts[0].startswith("@"):      # a predicate guard
            parts = parts[1:]
        return parts[0] if parts else ""


@dataclass
class SourceLine:
    """One source line of the source page: the file (its base name), the line number, its text,
    the counters ncu attributes to it (its instructions' totals) and its SASS instructions."""
    kernel: str
    file: str
    line: int
    text: str
    values: Dict[str, float]
    sass: List[SassRow] = field(default_factory=list)


def _base(path: str) -> str:
    return re.split(r"[\\/]", path.strip())[-1]


def _source_rows(text: str):
    """The rows of ncu's source-page CSV as lists of cells. ncu quotes every cell but does not
    double a quote inside one, so a source line that holds quotes (`asm volatile("st.global...")`,
    `extern "C"`) is not valid CSV: a line that starts and ends with a quote is cut at the `","`
    between cells instead, and, under a header, cells beyond the header's count are joined back
    into the source text (the second cell of a source-line row, the fourth of a SASS row), the
    only cells that hold free text. Other lines are read as CSV."""
    header_len = 0
    for ln in text.splitlines():
        if not ln.strip():
            continue
        if len(ln) >= 2 and ln[0] == '"' and ln[-1] == '"':
            row = ln[1:-1].split('","')
        else:
            row = next(csv.reader([ln]), [])
        if row and row[0].strip() in ("Line No", "# Line", "Line"):
            header_len = len(row)
        elif header_len and len(row) > header_len:
            at = 1 if row[0].strip() else 3         # the source text of a line / of a SASS row
            extra = len(row) - header_len
            row = row[:at] + ['","'.join(row[at:at + extra + 1])] + row[at + extra + 1:]
        yield row


def read_source(text: str) -> List[SourceLine]:
    """The source lines of ncu's source-page CSV (`--print-source cuda,sass`; see the module
    docstring), each with its SASS instructions, in the order ncu prints them. A source line's
    text is read whole even where it holds quotes (`_source_rows`)."""
    out: List[SourceLine] = []
    kernel = fname = ""
    header: Optional[List[str]] = None
    for row in _source_rows(text):
        if not row:
            continue
        head = row[0].strip()
        if len(row) >= 2 and head in ("Kernel Name", "Function Name"):
            kernel, header = row[1].split("(")[0].strip(), None
            continue
        if len(row) >= 2 and head in ("File Name", "File Path", "File"):
            fname, header = _base(row[1]), None
            continue
        if head in ("Line No", "# Line", "Line"):
            header = [c.strip() for c in row]
            continue
        if header is None:
            continue
        cells = list(zip(header, row))
        srcs = [v for h, v in cells if h == "Source"]
        vals = {h: x for h, v in cells if h not in ("Source", "Address", "Line No", "# Line", "Line")
                for x in [number(v)] if x is not None}
        if head.isdigit():
            out.append(SourceLine(kernel, fname, int(head), srcs[0].strip() if srcs else "", vals))
            continue
        addr = dict(cells).get("Address", "").strip()
        if addr.startswith("0x") and out:
            out[-1].sass.append(SassRow(addr, (srcs[1] if len(srcs) > 1 else srcs[-1] if srcs else "").strip(), vals))
    return out


def stall_columns(values: Dict[str, float]) -> Dict[str, float]:
    """The warp-stall sample counts of a row by reason ("stall_barrier" -> "barrier"), leaving
    out the not-issued variants."""
    return {k[len("stall_"):]: v for k, v in values.items()
            if k.startswith("stall_") and "(" not in k and "not_issued" not in k.lower() and "Not Issued" not in k}


# ---- the profiled variant's source ---------------------------------------------------------
_STMT = re.compile(r"^\s*// line (\d+): ")
_AHEAD = re.compile(r"^\s*// line (\d+)'s copy of ")
_BARRIER = re.compile(r"__syncthreads\(\);\s*// barrier \((before|after|within) line (\d+)\)")
_KERNEL = re.compile(r'^extern "C" __global__ ')


@dataclass(frozen=True)
class LinedSource:
    """The profiled variant's CUDA (`text`), and what its pseudo-files hold: `barriers`, one
    (where, tile line) per line of the barrier list in the order the code has them; `where` is
    "before" / "after" / "within" for a barrier the analysis placed, "internal" for one the
    code generator adds inside a statement's code (its tile line is the statement's)."""
    text: str
    barriers: Tuple[Tuple[str, int], ...]
    files: Tuple[str, str, str]          # the names the #line directives use: tile, CUDA, barriers


def _line_file(path: str) -> str:
    """A file name as a `#line` directive writes it: a C string literal (a path may hold a
    backslash, `??/` or any byte), with each `"` written as `'`: NVVM copies the name into the
    PTX `.file` directive unescaped, and ptxas cannot read a quote there. ncu's rows are matched
    to the files by base name (`_base`), and the files tilenb names hold no quote."""
    return c_string_literal(path.replace('"', "'"))


def lined_source(cuda: str, line_offset: int = 0, tile_file: str = TILE_FILE, cuda_file: str = CUDA_FILE,
                 barrier_file: str = BARRIER_FILE) -> LinedSource:
    """The profiled variant of generated CUDA `cuda` (see the module docstring). Tile lines are
    the analysis' lines (the generator's comment numbers less `line_offset`); a barrier is line
    k of `barrier_file` (k from 1, in code order); other lines keep their own line number in
    `cuda_file` (the plain generated text). Returns a LinedSource."""
    out: List[str] = []
    bars: List[Tuple[str, int]] = []
    names = [_line_file(f) for f in (tile_file, cuda_file, barrier_file)]
    current: Optional[int] = None        # the tile line the code below belongs to
    in_kernel = False
    for i, ln in enumerate(cuda.splitlines(), start=1):
        if _KERNEL.match(ln):
            in_kernel, current = True, None
        m = _STMT.match(ln) or _AHEAD.match(ln)
        if in_kernel and m:
            current = int(m.group(1)) - line_offset
        b = _BARRIER.search(ln) if in_kernel else None
        if b or (in_kernel and "__syncthreads();" in ln):
            # a barrier the analysis placed (before / after / within a line), or one the code
            # generator adds inside a statement's own code ("internal", at the current line)
            bars.append((b.group(1), int(b.group(2)) - line_offset) if b else ("internal", current or 0))
            out.append(f'#line {len(bars)} {names[2]}')
        elif in_kernel and current is not None and current > 0:
            out.append(f'#line {current} {names[0]}')
        else:
            out.append(f'#line {i} {names[1]}')
        out.append(ln)
    return LinedSource("\n".join(out) + "\n", tuple(bars), (tile_file, cuda_file, barrier_file))


def helper_calls(cuda: str, line_offset: int = 0) -> Dict[str, List[int]]:
    """Which tile lines call each `__device__` helper of the prelude (by name), from the plain
    generated CUDA: the instructions of an inlined helper are attributed by ncu to the helper's
    own line, and this says which tile line they came from when only one calls it."""
    helpers: Dict[str, List[int]] = {}
    names = set(re.findall(r"__device__ __forceinline__ [\w:<> ]*?[\s*&](tnb_\w+)\(", cuda))
    lined = lined_source(cuda, line_offset)
    current = None
    for ln in lined.text.splitlines():
        if ln.startswith("#line "):
            parts = ln.split(None, 2)
            current = int(parts[1]) if parts[2] == _line_file(lined.files[0]) else None
            continue
        if current is None:
            continue
        for n in re.findall(r"\b(tnb_\w+)\(", ln):
            if n in names:
                lst = helpers.setdefault(n, [])
                if current not in lst:
                    lst.append(current)
    return helpers


def helper_of_line(cuda: str) -> Dict[int, str]:
    """The prelude helper each line of the plain generated CUDA belongs to (line -> name), for
    the lines inside a `__device__` helper's definition."""
    out: Dict[int, str] = {}
    name, depth = None, 0
    for i, ln in enumerate(cuda.splitlines(), start=1):
        if _KERNEL.match(ln):
            break
        m = re.match(r"(?:template <[^>]*> )?__device__ __forceinline__ [\w:<> ]*?[\s*&](tnb_\w+)\(", ln)
        if m and depth == 0:
            name = m.group(1)
        if name is not None:
            out[i] = name
            depth += ln.count("{") - ln.count("}")
            if depth <= 0:
                name, depth = None, 0
    return out
