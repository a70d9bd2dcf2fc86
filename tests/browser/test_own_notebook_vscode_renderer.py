"""The newcomer notebook's outputs (tests/notebook/data/newcomer.ipynb, executed headless on the
CPU backend) in a page that handles them as VS Code's built-in HTML output renderer does: every
view of every kernel draws in place of its picture, with no script error and no network request.
(VS Code itself is not installed here; its default display order puts text/html ahead of
image/png, so this is the output it shows. A separate module from the live front-end tests, whose
playwright session must end first.)"""
import os

import pytest

from browser_env import open_page, output_page
from jupyter_env import ROOT
from test_own_notebook_in_both_front_ends import KERNELS, NOTEBOOK, VIEWS

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def vscode_page(tmp_path_factory):
    import nbclient
    import nbformat
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
    # VS Code's built-in HTML output renderer: each script made anew and appended to its output's
    # element (test_output_hosts.py appends it to the element of every output, in a dark theme)
    html = output_page(outputs, "vscode", body_class="vscode-light")
    drawn = f"document.querySelectorAll('.tilenb-view .tn-root').length === {len(KERNELS) * len(VIEWS)}"
    with open_page(html, tmp_path_factory.mktemp("vscode"), drawn, timeout_ms=30000) as page:
        yield page


def test_in_vscodes_html_renderer_every_view_draws_instead_of_its_picture(vscode_page):
    shown = vscode_page.evaluate("""() => [...document.querySelectorAll('.tilenb-view')].map(v => {
        const root = v.querySelector('.tilenb-root'), pic = v.querySelector('.tilenb-picture');
        return [v.dataset.tilenbView, !!root && !root.hidden && root.getBoundingClientRect().height > 50, pic.hidden]; })""")
    assert shown == [[v, True, True] for _ in KERNELS for v in VIEWS]
    assert vscode_page.errors == [] and vscode_page.refused == []
