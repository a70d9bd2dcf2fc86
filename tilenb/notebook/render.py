"""Kernel-free renderings of a view's traits: a text summary, a self-contained HTML page
fragment, and a PNG.

Guarantees:
- `text(name, state)` (made by `summary`, re-exported here) is deterministic: the same traits
  give the same string, with no memory addresses, ids or clock readings.
- `html(name, state, png)` needs no network and no kernel: a static picture any HTML sanitizer
  keeps (the PNG inline, the text), then the widget's module, CSS and traits inline, whose
  scripts, where they may run, replace the picture by the interactive view. It has no
  `</script` inside a script.
- `png(name, state)` is PNG bytes drawn with matplotlib for the views that are pictures
  (thread map, ruler, timing), or None (the listings, or no matplotlib).
"""
from __future__ import annotations

import base64
import hashlib
import html as _html
import json
import re
from typing import Optional

from . import assets
from .summary import text  # noqa: F401  (the text form, also `render.text` for callers)


# ---- self-contained HTML ---------------------------------------------------------------
# A view's HTML has two parts. The picture is plain markup that any sanitizer keeps (an <img>
# with the PNG inline, <pre> text, <details>): an untrusted notebook in JupyterLab or Notebook 7,
# GitHub's viewer or any page without scripts shows it. Where scripts run (outputs of a live
# kernel, a trusted notebook reopened with no kernel, an exported page, VS Code), two classic
# inline scripts replace the picture by the interactive view: the first defines the view's
# module once per page (the ES module's code with its `export` lines removed, so no import(),
# blob: URL or eval is needed), the second draws it in its own box with a read-only model
# over the inlined traits. Nothing comes from a network or a kernel.
_BOOT = """(function () {
  var box = document.currentScript && document.currentScript.parentNode;
  if (!box || box.getAttribute("data-tilenb-started")) return;
  box.setAttribute("data-tilenb-started", "1");
  try {
    var data = JSON.parse(box.querySelector("script.tilenb-data").textContent);
    var make = (window.__tilenbViews || {})[data.view + ":" + data.hash];
    if (!make) throw new Error("the module of the " + data.view + " view did not load");
    var handlers = {};
    var model = {
      get: function (k) { return data.state[k]; },
      set: function (k, v) { data.state[k] = v; (handlers["change:" + k] || []).forEach(function (f) { f(); }); },
      save_changes: function () {},
      on: function (ev, f) { (handlers[ev] = handlers[ev] || []).push(f); },
      off: function (ev, f) { if (handlers[ev]) handlers[ev] = f ? handlers[ev].filter(function (g) { return g !== f; }) : []; },
      send: function () {}
    };
    var root = box.querySelector(".tilenb-root");
    make().render({model: model, el: root});
    root.hidden = false;
    box.querySelector(".tilenb-picture").hidden = true;
    box.setAttribute("data-tilenb-ready", "1");
  } catch (e) {
    box.setAttribute("data-tilenb-error", String(e && e.message || e));
  }
})();"""

_EXPORTS = re.compile(r"^export default \{[^}]*\};?\s*$|^export (?=(?:async )?function|const|let|class)", re.M)


def module_script(name: str) -> str:
    """The view's ES module (`assets.esm`) as a classic script that registers a function
    returning the module's default export under window.__tilenbViews["<view>:<hash>"], once.
    The text never contains '</script'."""
    esm = assets.esm(name)
    key = f"{name}:{module_hash(name)}"
    body = _EXPORTS.sub("", esm).replace("</", "<\\/")
    return (f"(function () {{ var v = window.__tilenbViews = window.__tilenbViews || {{}}; "
            f"if (v[{json.dumps(key)}]) return; v[{json.dumps(key)}] = function () {{\n"
            f"\"use strict\";\n{body}\nreturn {{ render: render }};\n}}; }})();")


def module_hash(name: str) -> str:
    return hashlib.sha256(assets.esm(name).encode()).hexdigest()[:16]


def _script_json(obj) -> str:
    """JSON safe inside <script>: no '<', '>' or '&' appear literally."""
    s = json.dumps(obj, separators=(",", ":"), sort_keys=True)
    return s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def picture(name: str, state: dict, png_bytes: Optional[bytes] = None) -> str:
    """The sanitizer-safe static form: the PNG inline (pictures) and the text summary (the
    listings show it whole; the pictures and the CUDA listing keep it folded in <details>)."""
    summary = text(name, state)
    first, _, rest = summary.partition("\n")
    esc = _html.escape
    # wrapped at spaces, never inside a word (JupyterLab's output text breaks anywhere)
    pre = ('<pre style="font-size:12px;line-height:1.3;margin:4px 0;white-space:pre-wrap;'
           'word-break:normal;overflow-wrap:break-word">')
    if png_bytes:
        img = (f'<img src="data:image/png;base64,{base64.b64encode(png_bytes).decode()}" '
               f'alt="{esc(first)}" style="max-width:100%;height:auto" />')
        return (f"{img}<details><summary>{esc(first)}</summary>{pre}{esc(summary)}</pre></details>")
    if name == "cuda" and rest:
        return f"<details><summary>{esc(first)}</summary>{pre}{esc(rest)}</pre></details>"
    return f"{pre}{esc(summary)}</pre>"


def html(name: str, state: dict, png_bytes: Optional[bytes] = None) -> str:
    """A page fragment that shows the view with no kernel and no network: the picture (see
    `picture`; `png_bytes` the view's PNG, if any), upgraded to the interactive view where
    scripts run."""
    payload = _script_json({"view": name, "hash": module_hash(name), "state": state})
    return (f'<div class="tilenb-view" data-tilenb-view="{name}">'
            f'<div class="tilenb-picture">{picture(name, state, png_bytes)}</div>'
            f'<div class="tilenb-root" hidden></div>'
            f"<style>{assets.css(name)}</style>"
            f'<script type="application/json" class="tilenb-data">{payload}</script>'
            f"<script>{module_script(name)}</script>"
            f"<script>{_BOOT}</script></div>")


# Views that are pictures get a PNG; the listings (barriers, CUDA) are text, and their
# text/plain is already their static form (a PNG of 250 lines of code costs 1.5 s and 200 KB).
PICTURES = ("threadmap", "ruler", "timing")


def png(name: str, state: dict) -> Optional[bytes]:
    """The view as a PNG image (bytes); None for the listings (see PICTURES) and where
    matplotlib is not installed."""
    if name not in PICTURES:
        return None
    try:
        from . import png as _png
    except ImportError:
        return None
    return _png.draw(name, state)
