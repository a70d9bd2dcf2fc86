"""Exporting a notebook with tilenb views to HTML that works with no network.

The views are self-contained `text/html` outputs (their ES module inlined), which nbconvert
copies into the page as they are. Notebooks saved by earlier tilenb versions also carried a
live anywidget part in each view's output, which nbconvert draws only from saved widget state,
loading the widget manager from a CDN; `OfflineViews` drops that part (and the saved state of
those widgets) from tilenb views and leaves every other output alone.

    python -m tilenb.notebook.export NOTEBOOK.ipynb [OUT.html]

(exit status 0 when written; 1, with one line `FILE: error: ...` on stderr, when NOTEBOOK cannot be
read or is not a notebook, or OUT cannot be written; 2 for a bad command line)

Guarantees: `to_html(nb)` returns the HTML nbconvert's HTMLExporter makes (its `lab` template)
after `OfflineViews`; in it every tilenb view is drawn by JavaScript inlined in the page, and the
page asks the network for nothing: the template's require.js, MathJax and mermaid loaders are
left out (the tutorials use no TeX math or diagrams; a formula in markdown shows as written).
The notebook given is not changed (a copy is exported).
"""
from __future__ import annotations

import copy
import sys
from pathlib import Path

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"

try:
    from nbconvert.preprocessors import Preprocessor
except ImportError:  # nbconvert is optional: only exporting needs it
    Preprocessor = object


def strip_live_views(nb) -> int:
    """Remove the live-widget part of tilenb views (in place); return how many were removed."""
    ids = set()
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []) or []:
            if out.get("output_type") not in ("display_data", "execute_result"):
                continue
            data = out.get("data", {})
            if "tilenb" in (out.get("metadata") or {}) and "text/html" in data and WIDGET_VIEW in data:
                ids.add(data.pop(WIDGET_VIEW).get("model_id"))
    widgets = nb.get("metadata", {}).get("widgets")
    if widgets and WIDGET_STATE in widgets:
        state = widgets[WIDGET_STATE].get("state", {})
        for i in ids:
            model = state.pop(i, None) or {}
            layout = str((model.get("state") or {}).get("layout", ""))
            if layout.startswith("IPY_MODEL_"):            # the view's own Layout model
                state.pop(layout[len("IPY_MODEL_"):], None)
        if not state:
            del widgets[WIDGET_STATE]
        if not widgets:
            del nb["metadata"]["widgets"]
    return len(ids)


class OfflineViews(Preprocessor):
    """nbconvert preprocessor: tilenb views export as their self-contained HTML."""

    def preprocess(self, nb, resources):
        strip_live_views(nb)
        return nb, resources


# nbconvert's lab page without the blocks that load scripts from a CDN
_OFFLINE_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
"""


def offline_exporter():
    """An nbconvert HTMLExporter (lab template) whose pages load nothing from the network."""
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter
    return HTMLExporter(extra_loaders=[DictLoader({"tilenb_offline.html.j2": _OFFLINE_TEMPLATE})],
                        template_file="tilenb_offline.html.j2")


def to_html(nb) -> str:
    """HTML of a notebook (a NotebookNode) that needs no network: tilenb views inlined, no CDN
    scripts."""
    nb = copy.deepcopy(nb)
    strip_live_views(nb)
    body, _ = offline_exporter().from_notebook_node(nb)
    return body


def main(argv=None) -> int:
    import nbformat
    argv = sys.argv[1:] if argv is None else argv
    if not argv or len(argv) > 2:
        print("usage: python -m tilenb.notebook.export NOTEBOOK.ipynb [OUT.html]", file=sys.stderr)
        return 2
    src = Path(argv[0])
    out = Path(argv[1]) if len(argv) > 1 else src.with_suffix(".html")
    try:
        nb = nbformat.read(src, as_version=4)
    except OSError as e:
        print(f"{src}: error: cannot read: {e.strerror or e}", file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001 (JSON, encoding and schema errors: not a notebook)
        print(f"{src}: error: not a Jupyter notebook ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})",
              file=sys.stderr)
        return 1
    html = to_html(nb)
    try:
        out.write_text(html, encoding="utf-8")
    except OSError as e:
        print(f"{out}: error: cannot write: {e.strerror or e}", file=sys.stderr)
        return 1
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
