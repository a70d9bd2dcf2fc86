"""The tutorials' kernel cells, read from their sources (notebooks/src/NN_*.py), for the tests that
check a tutorial's kernels outside the notebook: one reader, so a change to a tutorial reaches
every test of its kernels and no test checks a stale copy.

Guarantees: a cell's text is what the `%%tilekernel` magic compiles for it, the magic line
replaced by an empty line (tilenb.notebook.magic.CellCompiler.HEADER_LINES), so a line number in
it is the line as the notebook shows it and as the tutorials' profiles record it (line 1: the
`%%tilekernel` line). Cells are split as notebooks/build.py splits them when it builds the
notebooks. A tutorial number or kernel name with no such cell raises LookupError naming it.
"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parents[2]
_KERNEL = re.compile(r"^kernel\s+(\w+)\s*\(", re.M)


def _build():
    spec = importlib.util.spec_from_file_location("tilenb_notebooks_build", ROOT / "notebooks" / "build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def kernel_cells(number: str) -> List[str]:
    """Every `%%tilekernel` cell of tutorial `number` ("04"), in the tutorial's order, each as the
    magic compiles it (see the module docstring)."""
    found = sorted((ROOT / "notebooks" / "src").glob(f"{number}_*.py"))
    if len(found) != 1:
        raise LookupError(f"no single tutorial source notebooks/src/{number}_*.py (found {len(found)})")
    cells = _build().parse(found[0].read_text(encoding="utf-8"))
    return ["\n" + src.split("\n", 1)[1] + "\n" for kind, src, _ in cells
            if kind == "code" and src.startswith("%%tilekernel") and "\n" in src]


def kernel_cell(number: str, name: str) -> str:
    """The `%%tilekernel` cell of tutorial `number` that defines `kernel name(...)`."""
    hits = [c for c in kernel_cells(number) if name in _KERNEL.findall(c)]
    if len(hits) != 1:
        raise LookupError(f"tutorial {number} has {len(hits)} %%tilekernel cells defining kernel '{name}', not one")
    return hits[0]
