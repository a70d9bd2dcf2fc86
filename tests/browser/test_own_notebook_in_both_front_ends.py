"""A newcomer's own notebook (tests/notebook/data/newcomer.ipynb: five kernels written from the
README and the spec alone, each checked against numpy inside the notebook, then a cell with a
mistake) in a live JupyterLab and a live Notebook 7, driven by headless chromium as its author
drives it: Run All runs every kernel, each verification passes in the kernel, and the run stops at
the failed cell, whose error names its own prompt; every view of every kernel draws; hovering and
arrow keys move the GEMM's thread map and never the notebook; the dark theme recolours the views;
the notebook saved, its kernel stopped and reopened shows all the views again (VS Code:
test_own_notebook_vscode_renderer.py)."""
import shutil

import pytest

from jupyter_env import APP, NB, PANEL, ROOT, JupyterServer, missing, run_all

pytestmark = pytest.mark.browser

NOTEBOOK = ROOT / "tests" / "notebook" / "data" / "newcomer.ipynb"
KERNELS = ["axpy", "softmax", "colsums", "gemm", "blur"]
VIEWS = ["threadmap", "ruler", "barriers"]              # the magic's default --show on the CPU

COUNTS = f"() => {NB}.widgets.map(c => c.model.type === 'code' ? c.model.executionCount : null)"
READY = "document.querySelectorAll('.tilenb-view[data-tilenb-ready]').length"


def _cells():
    import nbformat
    nb = nbformat.read(str(NOTEBOOK), as_version=4)
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    failing = next(i for i, c in enumerate(nb.cells) if "kernel mistake" in c.source)
    return nb, code, failing


@pytest.fixture(scope="module", params=["jupyterlab", "notebook"])
def live(request, tmp_path_factory):
    why = missing(request.param)
    if why:
        pytest.skip(f"needs {why}")
    root = tmp_path_factory.mktemp(f"newcomer-{request.param}")
    shutil.copy(NOTEBOOK, root / "newcomer.ipynb")
    _, _, failing = _cells()
    server = JupyterServer(request.param, root)
    try:
        with run_all(server, "newcomer.ipynb", failing, f"{READY} === {len(KERNELS) * len(VIEWS)}", failing_ms=180000) as page:
            yield server, page, root
    finally:
        server.stop()


def test_run_all_verifies_every_kernel_and_stops_at_the_mistake_naming_its_prompt(live):
    import re
    _, page, _ = live
    nb, code, failing = _cells()
    counts = page.evaluate(COUNTS)
    ran = [i for i in code if i <= failing]
    assert [counts[i] for i in ran] == list(range(1, len(ran) + 1))
    assert all(counts[i] is None for i in code if i > failing)          # Run All stopped there
    cells = page.locator(".jp-Notebook .jp-Cell")
    # (from the cell models: cells scrolled out of view are not laid out, so have no innerText)
    text = page.evaluate(f"() => JSON.stringify([{','.join(map(str, ran[:-1]))}].map(i => {NB}.widgets[i].model.outputs.toJSON()))")
    # each check is numpy's, computed in the kernel beside the tile kernel's result
    assert sorted(re.findall(r"verified against numpy: (\w+)", text)) == sorted(KERNELS)
    assert "VerificationError" not in text and "Traceback" not in text
    prompt = cells.nth(failing).locator(".jp-InputPrompt").inner_text()
    cells.nth(failing).scroll_into_view_if_needed()
    error = cells.nth(failing).locator(".jp-OutputArea-output").inner_text().strip()
    n = re.search(r"\[(\d+)\]", prompt).group(1)
    assert n == str(counts[failing])
    assert re.match(rf"In\[{n}\]:5:18: error: '\+': shapes \[8, 64\] and \[8, 32\] do not broadcast", error), error
    assert "Traceback" not in error


def test_every_view_of_every_kernel_draws_with_no_script_error(live):
    _, page, _ = live
    boxes = page.eval_on_selector_all(".tilenb-view", "bs => bs.map(b => [b.dataset.tilenbView, b.dataset.tilenbReady, "
                                      "b.dataset.tilenbError || null])")
    assert boxes == [[v, "1", None] for _ in KERNELS for v in VIEWS]
    assert [e for e in page.errors if "/static/" not in e] == []
    assert "model not found" not in page.inner_text("body")


def test_the_gemm_thread_map_follows_the_mouse_and_the_keys_not_the_notebook(live):
    _, page, _ = live
    import tilenb
    nb, _, _ = _cells()
    src = next(c.source for c in nb.cells if "kernel gemm" in c.source).split("\n", 1)[1]
    runs = tilenb.compile(src, backend="cpu").gemm.analysis().to_json()["copies"][0]["runs"]
    tm = page.locator(".tilenb-view[data-tilenb-view=threadmap]").nth(KERNELS.index("gemm"))
    tm.scroll_into_view_if_needed()
    grid = tm.locator("svg.tn-grid").nth(0)
    for i in (0, 77):
        grid.locator(f'g.tn-run[data-run="{i}"]').hover()
        assert tm.locator(".tn-info").get_attribute("data-thread") == str(runs[i][0])
    grid.locator('g.tn-run[data-run="0"]').click()
    state = f"() => [{NB}.activeCellIndex, {NB}.widgets.length, document.activeElement.dataset.run || null]"
    active, ncells, run = page.evaluate(state)
    assert run == "0"
    # the run one row down: same column, next row (runs are [thread, row, column, ...])
    down = str(next(k for k, r in enumerate(runs) if r[1] == 1 and r[2] == 0))
    for key, expect in [("ArrowDown", down), ("j", down), ("ArrowUp", "0")]:
        page.keyboard.press(key)
        assert page.evaluate(state) == [active, ncells, expect], key
    # no keyboard trap: Tab walks on through the view's controls (the other grid, the warp
    # table, one Tab stop however many warps) and out of the thread map in three presses, with
    # the notebook left as it was
    inside = "() => !!document.activeElement.closest('.tilenb-view[data-tilenb-view=threadmap]')"
    for _ in range(3):
        page.keyboard.press("Tab")
        if not page.evaluate(inside):
            break
    assert not page.evaluate(inside)
    assert page.evaluate(f"() => [{NB}.activeCellIndex, {NB}.widgets.length]") == [active, ncells]
    page.keyboard.press("Escape")


def _theme(page, name, light):
    page.evaluate(f"{APP}.commands.execute('apputils:change-theme', {{theme: '{name}'}})")
    page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{str(light).lower()}'", timeout=60000)


def test_the_views_follow_the_dark_theme(live):
    _, page, _ = live
    colour = "() => [...document.querySelectorAll('.tilenb-view .tn-root')].map(r => getComputedStyle(r).color)"
    light = page.evaluate(colour)
    _theme(page, "JupyterLab Dark", False)
    try:
        page.wait_for_function(f"() => ({colour})().every(c => c !== {light[0]!r})", timeout=15000)
        assert len(set(page.evaluate(colour))) == 1
    finally:
        _theme(page, "JupyterLab Light", True)


def test_saved_and_reopened_with_its_kernel_stopped_every_view_shows(live):
    server, page, _ = live
    page.evaluate(f"{APP}.commands.execute('docmanager:save')")
    page.wait_for_function(f"() => !{PANEL}.context.model.dirty")
    server.stop_kernels()
    page.goto(server.page_url("newcomer.ipynb"))
    page.wait_for_function(f"() => {PANEL} && {PANEL}.context && {PANEL}.context.path === 'newcomer.ipynb' && "
                           f"{PANEL}.node.querySelectorAll('.tilenb-view[data-tilenb-ready]').length === "
                           f"{len(KERNELS) * len(VIEWS)}", timeout=120000)
    assert "model not found" not in page.inner_text("body")
    _, code, failing = _cells()
    counts = page.evaluate(COUNTS)
    assert counts[failing] is not None and all(counts[i] is None for i in code if i > failing)

