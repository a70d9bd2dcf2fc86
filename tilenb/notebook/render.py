"""Kernel-free renderings of a view's traits: a text summary, a self-contained HTML page
fragment, and a PNG.

Guarantees:
- `text(name, state)` (made by `summary`, re-exported here) is deterministic: the same traits
  give the same string, with no memory addresses, ids or clock readings.
- `html(name, state, png)` needs no network and no kernel: a static picture any HTML sanitizer
  keeps (the PNG inline, the text summary visible), then the widget's module (its CSS inside it)
  and traits inline, whose scripts, where they may run, replace the picture by the interactive
  view. It has no <style> element, no `</script` inside a script, and its starter script finds
  its box by id, wherever the host puts the script.
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
# with the PNG inline, the text summary in a visible <pre>): an untrusted notebook in JupyterLab
# or Notebook 7, GitHub's viewer or any page without scripts shows it. Nothing outside a
# <script> carries code or CSS, so a sanitizer that drops scripts with their contents but keeps
# the text of the tags it does not know (GitHub's) shows no stray text: the view's CSS travels
# inside the module's script and goes into the page only when that script runs. Where scripts
# run (outputs of a live kernel, a trusted notebook reopened with no kernel, an exported page,
# VS Code), two classic inline scripts replace the picture by the interactive view: the first
# defines the view's module (and its CSS) once per page (the ES module's code with its `export`
# lines removed, so no import(), blob: URL or eval is needed), the second finds its own box by
# the box's id (`data-tilenb-id`, written into the script; hosts such as VS Code re-create the
# scripts elsewhere in the page, so the script's parent need not be the box) and draws the view
# there with a read-only model over the inlined traits. Nothing comes from a network or a kernel.
_BOOT = """(function () {
  var sel = '.tilenb-view[data-tilenb-id="%(id)s"]';
  var me = document.currentScript, box = me && me.closest ? me.closest(sel) : null;
  if (!box) {
    var all = document.querySelectorAll(sel);
    for (var i = 0; i < all.length && !box; i++) if (!all[i].getAttribute("data-tilenb-started")) box = all[i];
  }
  if (!box || box.getAttribute("data-tilenb-started")) return;
  box.setAttribute("data-tilenb-started", "1");
  try {
    var data = JSON.parse(box.querySelector("script.tilenb-data").textContent);
    var make = (window.__tilenbViews || {})[data.view + ":" + data.hash];
    if (!make) throw new Error("the module of the " + data.view + " view did not load");
    var style = document.createElement("style");
    style.textContent = make.css || "";
    box.appendChild(style);
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


def _js_string(text: str) -> str:
    """A JavaScript string literal of `text` that never contains '</' (safe inside <script>)."""
    return json.dumps(text).replace("</", "<\\/")


def module_script(name: str) -> str:
    """The view's ES module (`assets.esm`) as a classic script that registers a function
    returning the module's default export under window.__tilenbViews["<view>:<hash>"], once;
    the function's `css` property is the view's CSS (`assets.css`), which the starter script
    puts into the view's box. The text never contains '</script'."""
    esm = assets.esm(name)
    key = f"{name}:{module_hash(name)}"
    body = _EXPORTS.sub("", esm).replace("</", "<\\/")
    return (f"(function () {{ var v = window.__tilenbViews = window.__tilenbViews || {{}}; "
            f"if (v[{json.dumps(key)}]) return; v[{json.dumps(key)}] = function () {{\n"
            f"\"use strict\";\n{body}\nreturn {{ render: render }};\n}};\n"
            f"v[{json.dumps(key)}].css = {_js_string(assets.css(name))}; }})();")


def module_hash(name: str) -> str:
    """16 hex digits naming the view's module and CSS (two pages with the same module share it)."""
    return hashlib.sha256((assets.esm(name) + "\0" + assets.css(name)).encode()).hexdigest()[:16]


def _script_json(obj) -> str:
    """JSON safe inside <script>: no '<', '>' or '&' appear literally."""
    s = json.dumps(obj, separators=(",", ":"), sort_keys=True)
    return s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def picture(name: str, state: dict, png_bytes: Optional[bytes] = None) -> str:
    """The sanitizer-safe static form: the PNG inline (pictures), then the text summary in a
    visible <pre> (the CUDA listing shows its first line and folds the code in <details>).
    Only <img>, <pre>, <details> and <summary>, with no class attribute and no CSS a sanitizer
    could leave as text; the inline style attributes only tidy it where they are kept."""
    summary = text(name, state)
    first, _, rest = summary.partition("\n")
    esc = _html.escape
    # wrapped at spaces, never inside a word (JupyterLab's output text breaks anywhere)
    pre = ('<pre style="font-size:12px;line-height:1.3;margin:4px 0;white-space:pre-wrap;'
           'word-break:normal;overflow-wrap:break-word">')
    if name == "cuda" and rest:
        return (f"{pre}{esc(first)}</pre><details><summary>the generated code</summary>"
                f"{pre}{esc(rest)}</pre></details>")
    img = ""
    if png_bytes:
        img = (f'<img src="data:image/png;base64,{base64.b64encode(png_bytes).decode()}" '
               f'alt="{esc(first)}" style="max-width:100%;height:auto" />')
    return f"{img}{pre}{esc(summary)}</pre>"


def view_id(name: str, payload: str) -> str:
    """The id of one view's box: a hash of its view, module and traits (deterministic, so a
    re-executed notebook's outputs do not change; two identical views in a page share it, and
    each starter script takes the first box of that id not yet started)."""
    return hashlib.sha256(f"{name}\0{payload}".encode()).hexdigest()[:16]


def html(name: str, state: dict, png_bytes: Optional[bytes] = None) -> str:
    """A page fragment that shows the view with no kernel and no network: the picture (see
    `picture`; `png_bytes` the view's PNG, if any), upgraded to the interactive view where
    scripts run. It has no <style> element (the CSS is in the module's script)."""
    payload = _script_json({"view": name, "hash": module_hash(name), "state": state})
    vid = view_id(name, payload)
    return (f'<div class="tilenb-view" data-tilenb-view="{name}" data-tilenb-id="{vid}">'
            f'<div class="tilenb-picture">{picture(name, state, png_bytes)}</div>'
            f'<div class="tilenb-root" hidden></div>'
            f'<script type="application/json" class="tilenb-data">{payload}</script>'
            f"<script>{module_script(name)}</script>"
            f"<script>{_BOOT % {'id': vid}}</script></div>")


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
