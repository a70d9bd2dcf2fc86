"""The newcomer notebook's outputs (tests/notebook/data/newcomer.ipynb, executed headless on the
CPU backend) in a page that handles them as VS Code's built-in HTML output renderer does: every
view of every kernel draws in place of its picture, with no script error and no network request.
(VS Code itself is not installed here; its default display order puts text/html ahead of
image/png, so this is the output it shows. A separate module from the live front-end tests, whose
playwright session must end first.)"""
import json
import os

import pytest

from jupyter_env import ROOT
from test_own_notebook_in_both_front_ends import KERNELS, NOTEBOOK, VIEWS

pytestmark = pytest.mark.browser


# VS Code's built-in HTML output renderer, as its source reads (extensions/notebook-renderers):
# each output item gets its own element; the HTML goes in through innerHTML; then every script in
# it is made anew (its text from innerText; only type, src, nonce, noModule and async carried
# over, not class), appended to the output's element rather than where it stood, and removed
# again. Stricter than test_output_hosts.py's host, which puts each new script in the old one's
# place with all its attributes.
VSCODE = """<!doctype html><html><head><meta charset="utf-8"></head><body class="vscode-light"><div id="cells"></div><script>
const carried = ["type", "src", "nonce", "noModule", "async"];
for (const html of JSON.parse(document.getElementById("outputs").textContent)) {
  const item = document.createElement("div");
  document.getElementById("cells").append(item);
  const el = document.createElement("div");
  el.innerHTML = html;
  item.append(el);
  for (const old of Array.from(el.getElementsByTagName("script"))) {
    const fresh = document.createElement("script");
    fresh.text = old.innerText;
    for (const k of carried) { const v = old[k] || old.getAttribute(k); if (v) fresh.setAttribute(k, v); }
    el.appendChild(fresh);
    el.removeChild(fresh);
  }
}
</script></body></html>"""


@pytest.fixture(scope="module")
def vscode_page(tmp_path_factory):
    import nbclient
    import nbformat
    from playwright.sync_api import sync_playwright

    from browser_env import CHROMIUM, CHROMIUM_ARGS
    nb = nbformat.read(str(NOTEBOOK), as_version=4)
    env_backend = os.environ.get("TILENB_BACKEND")
    os.environ["TILENB_BACKEND"] = "cpu"
    try:
        nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                                resources={"metadata": {"path": str(ROOT)}}).execute()
    finally:
        if env_backend is None:
            os.environ.pop("TILENB_BACKEND", None)
        else:
            os.environ["TILENB_BACKEND"] = env_backend
    # VS Code's default display order puts text/html before image/png and text/plain
    outputs = [o["data"]["text/html"] for c in nb.cells if c.cell_type == "code"
               for o in c.get("outputs", []) if "text/html" in o.get("data", {})]
    data = json.dumps(outputs).replace("</", "<\\/")
    path = tmp_path_factory.mktemp("vscode") / "outputs.html"
    path.write_text(VSCODE.replace("<script>", f'<script type="application/json" id="outputs">{data}</script><script>', 1),
                    encoding="utf-8")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.errors, page.refused = [], []
        page.on("pageerror", lambda e: page.errors.append(str(e)))

        def refuse(route):
            if route.request.url.startswith("file:"):
                return route.continue_()
            page.refused.append(route.request.url)
            return route.abort()
        page.route("**/*", refuse)
        page.goto(path.as_uri())
        page.wait_for_function(f"document.querySelectorAll('.tilenb-view .tn-root').length === {len(KERNELS) * len(VIEWS)}",
                               timeout=30000)
        yield page
        browser.close()


def test_in_vscodes_html_renderer_every_view_draws_instead_of_its_picture(vscode_page):
    shown = vscode_page.evaluate("""() => [...document.querySelectorAll('.tilenb-view')].map(v => {
        const root = v.querySelector('.tilenb-root'), pic = v.querySelector('.tilenb-picture');
        return [v.dataset.tilenbView, !!root && !root.hidden && root.getBoundingClientRect().height > 50, pic.hidden]; })""")
    assert shown == [[v, True, True] for _ in KERNELS for v in VIEWS]
    assert vscode_page.errors == [] and vscode_page.refused == []
