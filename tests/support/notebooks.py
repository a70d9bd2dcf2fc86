"""The project's notebooks as tests read them: their sources split into cells the way
notebooks/build.py builds them, a tutorial's kernel cells, and the text of a saved output. One
reader, so a change to a tutorial reaches every test of its kernels (no test checks a pasted
copy) and every notebook test reads saved outputs alike.

Guarantees:
- `parse(text)` is notebooks/build.py's own splitter: [(kind, source, tags)] of percent-format
  text; `saved_cells(nb)` gives a saved notebook's cells in the same form, so the two compare.
- `kernel_cells` / `kernel_cell`: a tutorial's `%%tilekernel` cells, each as the magic compiles
  it, the magic line replaced by an empty line (tilenb.notebook.magic.CellCompiler.HEADER_LINES):
  a line number in it is the line as the notebook shows it and as the tutorials' profiles record
  it (line 1: the `%%tilekernel` line). A tutorial number or kernel name with no such cell raises
  LookupError naming it.
- `output_text(out)`: what a reader sees of one saved output: a stream's text, an error as
  "ename: evalue", else the text/plain part ("" where there is none).
"""
from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path
from typing import List, Tuple

ROOT = Path(__file__).resolve().parents[2]
_KERNEL = re.compile(r"^kernel\s+(\w+)\s*\(", re.M)


@functools.lru_cache(maxsize=None)
def _build():
    spec = importlib.util.spec_from_file_location("tilenb_notebooks_build", ROOT / "notebooks" / "build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def parse(text: str) -> List[Tuple[str, str, list]]:
    """Percent-format text -> [(kind, source, tags)], as notebooks/build.py splits it."""
    return _build().parse(text)


def saved_cells(nb: dict) -> List[Tuple[str, str, list]]:
    """A saved notebook's (nbformat JSON) cells as (kind, source, tags), the form of `parse`."""
    return [(c["cell_type"], "".join(c["source"]), c.get("metadata", {}).get("tags", [])) for c in nb["cells"]]


def output_text(out: dict) -> str:
    """The text of one saved output (see the module docstring)."""
    if out.get("output_type") == "stream":
        t = out.get("text", "")
    elif out.get("output_type") == "error":
        t = out.get("ename", "") + ": " + out.get("evalue", "")
    else:
        t = out.get("data", {}).get("text/plain", "")
    return "".join(t) if isinstance(t, list) else t


def kernel_cells(number: str) -> List[str]:
    """Every `%%tilekernel` cell of tutorial `number` ("04"), in the tutorial's order, each as the
    magic compiles it (see the module docstring)."""
    found = sorted((ROOT / "notebooks" / "src").glob(f"{number}_*.py"))
    if len(found) != 1:
        raise LookupError(f"no single tutorial source notebooks/src/{number}_*.py (found {len(found)})")
    return ["\n" + src.split("\n", 1)[1] + "\n" for kind, src, _ in parse(found[0].read_text(encoding="utf-8"))
            if kind == "code" and src.startswith("%%tilekernel") and "\n" in src]


def kernel_cell(number: str, name: str) -> str:
    """The `%%tilekernel` cell of tutorial `number` that defines `kernel name(...)`."""
    hits = [c for c in kernel_cells(number) if name in _KERNEL.findall(c)]
    if len(hits) != 1:
        raise LookupError(f"tutorial {number} has {len(hits)} %%tilekernel cells defining kernel '{name}', not one")
    return hits[0]
