"""Build the tutorials: notebooks/src/NN_name.py (percent format) -> notebooks/NN_name.ipynb,
executed on the CPU backend with outputs saved, as nbval compares them.

    python notebooks/build.py            # every tutorial
    python notebooks/build.py 03 05      # those whose name starts so

Source format: `# %% [markdown]` starts a markdown cell (each line's leading "# " is removed),
`# %%` a code cell; `# %% tags=["raises-exception"]` marks a cell whose error is the lesson, and
`tags=["diagnostic"]` a cell whose output on stderr (a compile error shown by the magic) is.

Guarantees: the notebook is executed top to bottom in a fresh kernel with TILENB_BACKEND=cpu and
this checkout first on PYTHONPATH; a cell failing without the raises-exception tag, or writing to
stderr without the diagnostic tag, stops the build with the error (the notebook is still written,
to look at). The saved outputs keep each view's text, HTML and PNG but not its live-widget
part (as the main job exports them), and no execution timestamps.
"""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
_HEAD = re.compile(r"^# %%(?P<md> \[markdown\])?(?:\s+tags=(?P<tags>\[.*\]))?\s*$")


def parse(text: str):
    """Percent-format text -> [(kind, source, tags)]."""
    cells, kind, tags, buf = [], None, [], []

    def flush():
        if kind is None:
            return
        lines = buf[:]
        while lines and not lines[-1].strip():
            lines.pop()
        while lines and not lines[0].strip():
            lines.pop(0)
        if kind == "markdown":
            lines = [l[2:] if l.startswith("# ") else l.lstrip("#") for l in lines]
        cells.append((kind, "\n".join(lines), tags))
    for line in text.splitlines():
        m = _HEAD.match(line)
        if m:
            flush()
            kind = "markdown" if m.group("md") else "code"
            tags = json.loads(m.group("tags")) if m.group("tags") else []
            buf = []
        else:
            buf.append(line)
    flush()
    return cells


def build(src: Path, execute: bool = True) -> Path:
    import nbformat
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    for i, (kind, source, tags) in enumerate(parse(src.read_text(encoding="utf-8"))):
        cell = nbformat.v4.new_markdown_cell(source) if kind == "markdown" else nbformat.v4.new_code_cell(source)
        cell["id"] = f"{src.stem[:2]}-{i:02d}"
        if tags:
            cell.metadata["tags"] = tags
        nb.cells.append(cell)
    out = HERE / (src.stem + ".ipynb")
    if execute:
        sys.path.insert(0, str(ROOT))
        from tilenb.notebook.execute import execute as run
        try:
            run(nb, HERE, timeout=600, pythonpath=[ROOT], env={"TILENB_BACKEND": "cpu"})
        finally:
            nbformat.write(nb, str(out))
        for cell in nb.cells:
            if cell.cell_type != "code" or "diagnostic" in cell.metadata.get("tags", []):
                continue
            for o in cell.get("outputs", []):
                if o.get("output_type") == "stream" and o.get("name") == "stderr":
                    raise SystemExit(f"{out.name}: unexpected stderr in cell {cell['id']}:\n{o['text']}")
        from tilenb.notebook.export import strip_live_views
        strip_live_views(nb)
    nbformat.write(nb, str(out))
    return out


def main(argv) -> int:
    srcs = sorted((HERE / "src").glob("*.py"))
    if argv:
        srcs = [s for s in srcs if any(s.stem.startswith(a) for a in argv)]
    for s in srcs:
        import time
        t = time.perf_counter()
        out = build(s)
        print(f"{out.name}: {time.perf_counter() - t:.1f} s, {out.stat().st_size // 1024} KB", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
