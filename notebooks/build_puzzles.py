"""Build the puzzle notebook: tilenb/puzzles (the catalog) -> notebooks/puzzles.ipynb, executed
on the CPU backend with its outputs saved, as nbval compares them.

    python notebooks/build_puzzles.py

The notebook's text comes from `tilenb.puzzles.notebook.source()`; it is executed exactly as the
tutorials are (`notebooks/build.py`: a fresh kernel, TILENB_BACKEND=cpu, this checkout first on
PYTHONPATH, no live-widget state saved). tests/notebook/test_puzzles.py fails on a saved notebook that is
not the build of the current puzzles.
"""
from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from tilenb.puzzles.notebook import source
    spec = importlib.util.spec_from_file_location("tilenb_notebooks_build", HERE / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "puzzles.py"
        src.write_text(source(), encoding="utf-8")
        out = build.build(src)
    print(f"{out.name}: {out.stat().st_size // 1024} KB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
