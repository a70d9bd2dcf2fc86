"""Where the browser tests find chromium and what they need, and the page they show saved outputs
in; shared by conftest and the tests.

The browser tests skip cleanly unless all of these are present: /usr/bin/chromium (apt:
chromium; another path through TILENB_CHROMIUM), and the Python packages playwright,
nbformat, nbclient, nbconvert, ipykernel, PIL (never `playwright install`: the system
chromium is used). The live-server tests also need jupyterlab and notebook (jupyter_env.py).

`output_page` is a page that inserts views' HTML outputs as a front end does (Jupyter's way or
VS Code's), `open_page` shows one in headless chromium with the network refused, and
`views_ready(n)` is the page expression that holds once n views have drawn."""
import importlib.util
import json
import os
from contextlib import contextmanager

CHROMIUM = os.environ.get("TILENB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
NEEDED = ("playwright", "nbformat", "nbclient", "nbconvert", "ipykernel", "PIL")


def missing():
    """What is missing for the browser tests (empty when they can run)."""
    gone = [m for m in NEEDED if importlib.util.find_spec(m) is None]
    if not os.path.exists(CHROMIUM):
        gone.append(CHROMIUM)
    return gone


# the contrast of every highlighted token of the CUDA view against what is behind it
CONTRAST = """() => {
  const rgba = (c) => { const m = /rgba?\\(([^)]+)\\)/.exec(c); const p = m[1].split(/[ ,/]+/).filter(Boolean).map(Number);
                        return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
  const over = (c, b) => [0, 1, 2].map((i) => c[i] * c[3] + b[i] * (1 - c[3]));
  const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
                       return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const back = (n) => { const layers = []; for (; n && n.nodeType === 1; n = n.parentElement) {
      const c = rgba(getComputedStyle(n).backgroundColor); if (c[3] > 0) { layers.push(c); if (c[3] >= 1) break; } }
    let b = [255, 255, 255]; for (const c of layers.reverse()) b = over(c, b); return b; };
  const out = {};
  for (const span of document.querySelectorAll('.tilenb-view[data-tilenb-view=cuda] .tn-ccode span[class]')) {
    const b = back(span), c = over(rgba(getComputedStyle(span).color), b);
    const x = lum(c), y = lum(b), r = (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05);
    const k = span.className;
    if (!(k in out) || r < out[k][0]) out[k] = [r, getComputedStyle(span).color];
  }
  return out;
}"""


# How a host re-creates the scripts of one output's HTML, inserted into `cell` with innerHTML (so
# that they have not run); `out` holds every output.
_RECREATE = {
    # JupyterLab and Notebook: each script made anew where it stood, with all its attributes
    "jupyter": """
      const s = document.createElement("script");
      for (const a of old.attributes) s.setAttribute(a.name, a.value);
      s.textContent = old.textContent;
      old.replaceWith(s);""",
    # VS Code's built-in HTML output renderer (extensions/notebook-renderers): the text from
    # innerText, only type, src, nonce, noModule and async carried over (not class), the script
    # appended to the output's element rather than where it stood, and removed again
    "vscode": """
      const fresh = document.createElement("script");
      fresh.text = old.innerText;
      for (const k of carried) { const v = old[k] || old.getAttribute(k); if (v) fresh.setAttribute(k, v); }
      cell.appendChild(fresh);
      cell.removeChild(fresh);""",
}
# as VS Code, but with the script appended to the one element that holds every output: a view's
# script cannot find its view by where the script stands
_RECREATE["vscode-outside"] = _RECREATE["vscode"].replace("cell.", "out.")

_PAGE = """<!doctype html><html><head><meta charset="utf-8">{head}</head><body{body_class}>{before}<div id="out"></div>{after}
<script type="application/json" id="outputs">{outputs}</script><script>
  const out = document.getElementById("out");
  const carried = ["type", "src", "nonce", "noModule", "async"];
  for (const html of JSON.parse(document.getElementById("outputs").textContent)) {{
    const cell = document.createElement("div");
    out.append(cell);
    cell.innerHTML = html;
    for (const old of [...cell.getElementsByTagName("script")]) {{{recreate}
    }}
  }}
</script></body></html>"""


def output_page(outputs, host="jupyter", *, head="", body_class="", before="", after=""):
    """A page (HTML text) that puts each of `outputs` (a list of text/html outputs) into its own
    element inside `div#out`, in order, the way `host` does: "jupyter" (JupyterLab, Notebook 7),
    "vscode" (VS Code's HTML output renderer) or "vscode-outside" (VS Code's, each re-created
    script appended to div#out rather than to its output's element). `head` goes into the head
    (a style sheet), `body_class` onto the body, `before` and `after` around div#out (elements
    to move the focus to and from). Raises KeyError for an unknown host."""
    data = json.dumps(list(outputs)).replace("</", "<\\/")
    return _PAGE.format(head=head, body_class=f' class="{body_class}"' if body_class else "", before=before,
                        after=after, outputs=data, recreate=_RECREATE[host])


def views_ready(n):
    """The page expression that holds once `n` views (.tilenb-view) have drawn."""
    return f"document.querySelectorAll('.tilenb-view[data-tilenb-ready]').length === {n}"


@contextmanager
def open_page(html, folder, ready, *, width=1200, height=900, timeout_ms=20000):
    """A with-block's page: headless chromium, its viewport `width` x `height` CSS pixels, on the
    page `html` (written to `folder`/page.html, `folder` a pathlib.Path, and opened from the
    file), every request for other than a file: URL refused, handed over once the page
    expression `ready` holds (playwright's TimeoutError after `timeout_ms`). The page's `errors`
    lists its uncaught errors' messages, `refused` the URLs it was refused. The browser closes
    when the block ends."""
    from playwright.sync_api import sync_playwright
    path = folder / "page.html"
    path.write_text(html, encoding="utf-8")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": width, "height": height})
        page.errors, page.refused = [], []
        page.on("pageerror", lambda e: page.errors.append(str(e)))

        def refuse(route):
            if route.request.url.startswith("file:"):
                return route.continue_()
            page.refused.append(route.request.url)
            return route.abort()
        page.route("**/*", refuse)
        try:
            page.goto(path.as_uri())
            page.wait_for_function(ready, timeout=timeout_ms)
            yield page
        finally:
            browser.close()
