"""Where the browser tests find chromium and what they need; shared by conftest and the tests.

The browser tests skip cleanly unless all of these are present: /usr/bin/chromium (apt:
chromium; another path through TILENB_CHROMIUM), and the Python packages playwright,
nbformat, nbclient, nbconvert, ipykernel, PIL (never `playwright install`: the system
chromium is used). The live-server tests also need jupyterlab and notebook (jupyter_env.py)."""
import importlib.util
import os

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
