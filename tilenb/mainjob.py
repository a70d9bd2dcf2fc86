"""The main job: execute every tutorial, write each as a standalone HTML page, print a table.

Guarantees: `run(notebooks_dir, out_dir)` executes each `*.ipynb` under `notebooks_dir` in
name order in a fresh Jupyter kernel (the backend is the best available: CUDA when a GPU is
usable, else the CPU executor; `TILENB_BACKEND` forces one), writes `<out_dir>/<name>.html`
with the widgets' state and JavaScript embedded (readable offline), and returns one `Row` per
tutorial. A tutorial that fails still gets a page (with the error) and a row saying so; the
return value of `main` is 0 only when every tutorial ran and verified at least one result.
"""
from __future__ import annotations

import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from .verify import MARK


@dataclass(frozen=True)
class Row:
    tutorial: str
    kernels: int          # %%tilekernel cells executed
    backend: str
    verified: int         # results checked against numpy (tilenb.verify lines)
    seconds: float
    error: Optional[str]  # the first line of the failure, or None


def _count_outputs(nb):
    kernels = verified = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if cell.source.lstrip().startswith("%%tilekernel"):
            kernels += 1
        for out in cell.get("outputs", []):
            text = out.get("text", "")
            if isinstance(text, list):
                text = "".join(text)
            verified += text.count(MARK)
    return kernels, verified


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _first_line(text: str) -> str:
    lines = _ANSI.sub("", text).strip().splitlines()
    return lines[-1] if lines else "a cell failed"


def run_one(path: Path, out_dir: Path, backend: str, timeout: int = 900) -> Row:
    import nbformat
    from nbclient.exceptions import CellExecutionError

    from .notebook.execute import execute
    from .notebook.export import to_html

    nb = nbformat.read(str(path), as_version=4)
    error = None
    t0 = time.perf_counter()
    try:
        execute(nb, path.parent, timeout=timeout)     # local sockets: no TCP warning per tutorial
    except CellExecutionError as e:
        error = _first_line(str(e))
    except Exception as e:  # the kernel died or timed out: report it in the table
        error = f"{type(e).__name__}: {e}".splitlines()[0]
    seconds = time.perf_counter() - t0
    try:
        html = to_html(nb)     # tilenb views as their own inlined HTML; no MathJax or require.js fetched
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / (path.stem + ".html")).write_text(html, encoding="utf-8")
    except Exception as e:  # nbconvert missing its templates, an unwritable folder: say so in the table
        error = error or f"no HTML page: {type(e).__name__}: {e}".splitlines()[0]
    kernels, verified = _count_outputs(nb)
    return Row(path.stem, kernels, backend, verified, seconds, error)


def format_table(rows: List[Row]) -> str:
    head = ("tutorial", "kernels", "backend", "verified against numpy", "time")
    body = [(r.tutorial, str(r.kernels), r.backend,
             (f"yes ({r.verified})" if r.verified and not r.error else "NO" + (f": {r.error}" if r.error else "")),
             f"{r.seconds:.1f} s") for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths))  # noqa: E731
    return "\n".join([line(head), line(tuple("-" * w for w in widths))] + [line(b) for b in body])


def main(notebooks_dir: str = "notebooks", out_dir: str = "out/tutorials") -> int:
    from .runtime.module import choose_backend
    backend = os.environ.get("TILENB_BACKEND") or choose_backend("auto")
    os.environ["TILENB_BACKEND"] = backend
    nbs = sorted(Path(notebooks_dir).glob("*.ipynb"))
    if not nbs:
        print(f"no tutorials found under {notebooks_dir}", file=sys.stderr)
        return 1
    rows = []
    for p in nbs:
        print(f"running {p.name} on {backend} ...", flush=True)
        rows.append(run_one(p, Path(out_dir), backend))
    print()
    print(format_table(rows))
    print(f"\nHTML pages: {Path(out_dir).resolve()}")
    return 0 if all(r.verified and not r.error for r in rows) else 1
