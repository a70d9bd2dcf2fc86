"""The widths of a kernel's memory instructions in the machine code, next to the analysis' widths.

NVRTC compiles the generated CUDA for sm_90 with line information (`-lineinfo`, on by default in
`tilenb.codegen.nvrtc_compile`); `nvdisasm -gi` (the `nvidia-cuda-nvdisasm` wheel) prints every
SASS instruction under the CUDA source line it came from (for an inlined prelude helper, the line
that called it). The generated CUDA puts `// line N: <source>` before the code of each statement
of the tile program, so each memory instruction maps to one statement of the source. For each
tile statement, `compare` checks, per memory space (global, shared) and direction (load, store):

- global memory: every access the analysis says moves a whole chunk with one N-byte vector
  (`Access.vector` > 1) has at least one N-byte instruction there (the compiler did not split
  it), and every instruction has a width some access of the statement accounts for: its vector
  width, or its element width (accesses of width 1, and the element-by-element fallback of a
  chunk that crosses the valid region or a tensor's edge; a tensor element read inside the
  statement, `x * S[0]`);
- shared memory: every instruction has a width the analysis accounts for, as above; the code
  generator's scratch of a CTA row reduction (one partial per (row, warp), which the compiler
  may read two or four side by side) counts too. Two things the compiler does on its own are
  allowed here and not yet in the analysis' figures: consecutive elements that the generated
  code moves one by one (a chunk of a statement whose destination is a register tile, of one
  split by a "within" barrier, of an operand read through transposes; a row a reduction reads
  serially) may be merged into one vector access where the alignment is visible to it; and loads
  of values the same thread has just stored (no barrier between) may be taken from registers,
  so a predicted shared load may be missing.

Instructions: LDG/STG (global), LDS/STS (shared), LDGSTS (cp.async: a global load and a shared
store of the same width), LD/ST (generic: neither space could be proved; reported as such).
Atomics (ATOMG/RED) are not counted; the load that starts a compare-and-swap loop of a tile
atomic (an element, or the 32-bit word of a 16-bit one) is allowed.
Widths: no suffix 4 bytes, .U8/.S8 1, .U16/.S16 2, .64 8, .128 16. Not counted: instructions
predicated @!PT (never executed; the assembler pads LDGSTS with them) and LDG.E.CONSTANT (the
math library's tables, e.g. sin/cos range reduction; tensors are never read that way).
"""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from tilenb.types import DTYPES

_WIDTH = {"U8": 1, "S8": 1, "U16": 2, "S16": 2, "64": 8, "128": 16}
_OPS = {"LDG": (("global", "load"),), "STG": (("global", "store"),), "LDS": (("shared", "load"),),
        "STS": (("shared", "store"),), "LDGSTS": (("global", "load"), ("shared", "store")),
        "LD": (("generic", "load"),), "ST": (("generic", "store"),)}
_LINE = re.compile(r"//## File .*")
_INSN = re.compile(r"/\*[0-9a-f]+\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9]*)((?:\.[A-Z0-9_]+)*)")
_STMT = re.compile(r"^\s*// line (\d+): ")
_PREFETCH = re.compile(r"^\s*// line (\d+)'s copy of \w+ is loaded a turn ahead")


def nvdisasm_path() -> Optional[str]:
    """The nvdisasm executable: from the nvidia-cuda-nvdisasm wheel, else on PATH, else None."""
    try:
        import nvidia
        for root in list(getattr(nvidia, "__path__", [])):
            for pat in ("cu13/bin/nvdisasm", "cu12/bin/nvdisasm", "cuda_nvdisasm/bin/nvdisasm"):
                hits = sorted(glob.glob(os.path.join(root, pat)))
                if hits:
                    return hits[-1]
    except ImportError:
        pass
    return shutil.which("nvdisasm")


def disassemble(cubin: bytes, nvdisasm: str) -> str:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        out = subprocess.run([nvdisasm, "-gi", "-c", path], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"nvdisasm failed: {out.stderr.strip()}")
    return out.stdout


def memory_instructions(sass: str) -> List[Tuple[int, str, str, int, str]]:
    """(CUDA source line, space, direction, bytes, mnemonic) of every memory instruction."""
    out = []
    line = 0
    for text in sass.splitlines():
        if _LINE.search(text):
            nums = re.findall(r"line (\d+)", text)
            if nums:
                line = int(nums[-1])        # the outermost call site of an inlined helper
            continue
        m = _INSN.search(text)
        if not m:
            continue
        pred, op, mods = (m.group(1) or "").strip(), m.group(2), [x for x in m.group(3).split(".") if x]
        if op not in _OPS or pred == "@!PT" or (op == "LDG" and "CONSTANT" in mods):
            continue                    # never executed (assembler padding) / the math library's tables
        nbytes = 4
        for x in mods:
            if x in _WIDTH:
                nbytes = _WIDTH[x]
        for space, direction in _OPS[op]:
            out.append((line, space, direction, nbytes, op + "".join("." + x for x in mods)))
    return out


def statement_lines(cuda: str) -> Dict[int, int]:
    """CUDA source line (1-based) -> the tile program line of the statement it belongs to."""
    out = {}
    cur = 0
    for k, text in enumerate(cuda.splitlines(), 1):
        m = _STMT.match(text) or _PREFETCH.match(text)
        if m:
            cur = int(m.group(1))
        out[k] = cur
    return out


@dataclass
class StatementWidths:
    line: int
    what: str
    required: Dict[Tuple[str, str], set] = field(default_factory=dict)   # (space, dir) -> bytes
    allowed: Dict[Tuple[str, str], set] = field(default_factory=dict)
    seen: Counter = field(default_factory=Counter)                        # (space, dir, bytes) -> count


def expected(analysis, line_offset: int = 0) -> Dict[int, StatementWidths]:
    """Per program line, what the analysis says its tile statements' memory instructions are."""
    from tilenb import ir
    out: Dict[int, StatementWidths] = {}
    for sp in analysis.statements:
        if sp.kind != "tile":
            continue
        sw = out.setdefault(sp.line + line_offset, StatementWidths(sp.line + line_offset, sp.what))
        V = sp.vector_width
        for a in sp.accesses:
            if a.space not in ("global", "shared"):
                continue
            key = (a.space, "load" if a.rw == "read" else "store")
            allowed = sw.allowed.setdefault(key, set())
            allowed.add(a.elem_bytes)
            if a.atomic:
                # a tile atomic: ATOM/RED are not counted; a compare-and-swap loop (f32/f64 max,
                # 16-bit adds on their 32-bit word) first loads the element (the word)
                sw.allowed.setdefault(("global", "load"), set()).update({a.elem_bytes, max(4, a.elem_bytes)})
            if a.vector > 1:
                allowed.add(a.vector_bytes)
                if a.space == "global":
                    sw.required.setdefault(key, set()).add(a.vector_bytes)
            elif a.space == "shared":
                # the compiler's own merge of consecutive elements moved one by one: a chunk's (a
                # partition access: read, or written by a statement not on the vector path), or
                # a row's (a reduction reading its operand serially)
                if (a.mode == "partition" and a.contiguous and V > 1 and V * a.elem_bytes in (4, 8, 16)
                        and (a.rw == "read" or not sp.vector_path)):
                    allowed.add(V * a.elem_bytes)
                elif a.mode == "any" and a.rw == "read":
                    allowed.update(n * a.elem_bytes for n in (2, 4, 8) if n * a.elem_bytes <= 16)
        for e in ir.stmt_exprs(sp.stmt):
            for x in ir.walk_expr(e):
                if isinstance(x, ir.Element) and x.base.kind == "tensor":
                    sw.allowed.setdefault(("global", "load"), set()).add(DTYPES[x.base.type.dtype].itemsize)
        if sp.row_reductions:   # the code generator's per-(row, warp) partials, read side by side
            for red, _ in sp.row_reductions:
                nb = DTYPES[red.type.dtype].itemsize
                sw.allowed.setdefault(("shared", "store"), set()).add(nb)
                sw.allowed.setdefault(("shared", "load"), set()).update(x for x in (nb, 2 * nb, 4 * nb) if x <= 16)
    return out


def compare(analysis, cuda: str, sass: str, line_offset: int = 0) -> List[str]:
    """The disagreements between the analysis and the machine code (empty: they agree)."""
    exp = expected(analysis, line_offset)
    where = statement_lines(cuda)
    problems = []
    for cline, space, direction, nbytes, op in memory_instructions(sass):
        pline = where.get(cline, 0)
        sw = exp.get(pline)
        if sw is None:
            continue                    # not a tile statement (scalar code, loop control, prologue)
        sw.seen[(space, direction, nbytes)] += 1
        if space == "generic":
            problems.append(f"line {pline} ({sw.what}): {op} is a generic-space access")
            continue
        if nbytes not in sw.allowed.get((space, direction), set()):
            problems.append(f"line {pline} ({sw.what}): {op} moves {nbytes} bytes of {space} memory "
                            f"({direction}); the analysis has {sorted(sw.allowed.get((space, direction), ()))}")
    for sw in exp.values():
        for (space, direction), widths in sw.required.items():
            for nb in widths:
                if not sw.seen[(space, direction, nb)]:
                    problems.append(f"line {sw.line} ({sw.what}): the analysis has {nb}-byte {space} {direction}s, "
                                    f"the machine code none (it has {_seen(sw, space, direction)})")
    return problems


def _seen(sw: StatementWidths, space: str, direction: str) -> str:
    got = {nb: n for (s, d, nb), n in sw.seen.items() if s == space and d == direction}
    return ", ".join(f"{n} of {nb} bytes" for nb, n in sorted(got.items())) or "no such instruction"
