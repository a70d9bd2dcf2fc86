"""The views in a live JupyterLab and a live Notebook 7 (each a server started here on 127.0.0.1),
driven by headless chromium as a user drives them: Run All stops at a failed %%tilekernel cell
whose error names the cell's own prompt; hovering a run names its thread; keys pressed in a view
move the view and never the notebook, until Escape hands them back; the CUDA view opens on the
kernel and keeps every token at 4.5:1 contrast or more in the light and the dark theme; the
notebook saved and reopened with its kernel gone shows the views again, interactive where it is
trusted and as pictures where it is not."""
import json
import re
import time

import pytest

from browser_env import CONTRAST
from jupyter_env import APP, NB, PANEL, ROOT, JupyterServer, missing, run_all
from tilenb.examples import kernel_source

pytestmark = pytest.mark.browser

RMS = kernel_source("rms_norm")   # the shipped example (tilenb/examples/seed_kernels.tile)
VIEWS = "--show threads,lifetimes,barriers,cuda"
CELLS = ["%load_ext tilenb",
         "a = 1",
         f"%%tilekernel --backend cpu {VIEWS}\n" + RMS,
         "%%tilekernel --backend cpu --show none\nkernel broken(X: tensor<f32>[N]) {\n  X[0] = nothere\n}\n",
         "after_the_error = 1"]
FAILING = 3


@pytest.fixture(scope="module", params=["jupyterlab", "notebook"])
def live(request, tmp_path_factory):
    why = missing(request.param)
    if why:
        pytest.skip(f"needs {why}")
    import nbformat
    root = tmp_path_factory.mktemp(request.param)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    nbformat.write(nb, str(root / "views.ipynb"))
    server = JupyterServer(request.param, root)
    try:
        with run_all(server, "views.ipynb", FAILING, "document.querySelectorAll('.tilenb-view[data-tilenb-ready]').length === 4") as page:
            yield server, page, root
    finally:
        server.stop()


def _counts(page):
    return page.evaluate(f"() => {NB}.widgets.map(c => c.model.type === 'code' ? c.model.executionCount : null)")


def test_run_all_stops_at_the_failed_cell_whose_error_names_its_prompt(live):
    from playwright.sync_api import expect
    _, page, _ = live
    counts = _counts(page)
    assert counts[:FAILING + 1] == [1, 2, 3, 4]
    assert counts[FAILING + 1] is None                    # Run All stopped at the failed cell
    cell = page.locator(".jp-Notebook .jp-CodeCell").nth(FAILING)
    # Read the cell as a user does, scrolled to it: the views above push it below the fold, where
    # the front end's windowing (content-visibility: auto on each cell) leaves it unrendered and
    # its innerText empty, though the model holds the output.
    cell.scroll_into_view_if_needed()
    expect(cell.locator(".jp-InputPrompt")).to_have_text(re.compile(r"\[\d+\]"), use_inner_text=True)
    expect(cell.locator(".jp-OutputArea-output")).to_have_text(re.compile(r"\S"), use_inner_text=True)
    prompt = cell.locator(".jp-InputPrompt").inner_text()
    error = cell.locator(".jp-OutputArea-output").inner_text()
    assert re.search(r"\[(\d+)\]", prompt).group(1) == "4"
    assert re.match(r"In\[(\d+)\]:3:10: error: 'nothere' is not defined", error.strip()).group(1) == "4"
    assert "Traceback" not in error and "File " not in error


def test_the_views_draw_live_with_no_script_error(live):
    _, page, _ = live
    boxes = page.eval_on_selector_all(".tilenb-view", "bs => bs.map(b => [b.dataset.tilenbView, b.dataset.tilenbReady, "
                                      "b.dataset.tilenbError, b.querySelector('.tilenb-picture').hidden])")
    assert boxes == [[v, "1", None, True] for v in ("threadmap", "ruler", "barriers", "cuda")]
    # (errors inside the front end's own bundles, such as Notebook 7 reading a settings schema
    # that this private server lacks, are not the views'; theirs would come from the page)
    assert [e for e in page.errors if "/static/" not in e] == []
    assert "model not found" not in page.inner_text("body")


def test_hovering_a_run_shows_the_thread_the_analysis_gives_it(live):
    import tilenb
    _, page, _ = live
    runs = tilenb.compile(RMS, backend="cpu").rms_norm.analysis().to_json()["copies"][0]["runs"]
    tm = page.locator(".tilenb-view[data-tilenb-view=threadmap]")
    for i in (0, 300):
        tm.locator("svg.tn-grid").nth(1).locator(f'g.tn-run[data-run="{i}"]').hover()
        thread = runs[i][0]
        assert tm.locator(".tn-info").get_attribute("data-thread") == str(thread)
        assert f"thread {thread} · warp {thread // 32} · lane {thread % 32}" in tm.locator(".tn-info").inner_text()


def test_keys_in_a_view_move_the_view_and_not_the_notebook(live):
    import tilenb
    _, page, _ = live
    runs = tilenb.compile(RMS, backend="cpu").rms_norm.analysis().to_json()["copies"][0]["runs"]
    tm = page.locator(".tilenb-view[data-tilenb-view=threadmap]")
    tm.locator("svg.tn-grid").nth(0).locator('g.tn-run[data-run="0"]').click()
    state = f"() => [{NB}.activeCellIndex, {NB}.widgets.length, {NB}.mode, document.activeElement.dataset.run || null]"
    active, ncells, _, run = page.evaluate(state)
    assert run == "0"
    right = str(next(k for k, r in enumerate(runs) if r[1] == 0 and r[2] == 4))
    down = str(next(k for k, r in enumerate(runs) if r[1] == 1 and r[2] == 4))
    for key, expect in [("ArrowRight", right), ("ArrowDown", down), ("j", down), ("k", down), ("a", down),
                        ("b", down), ("m", down), ("ArrowUp", right)]:
        page.keyboard.press(key)
        now = page.evaluate(state)
        assert now == [active, ncells, "command", expect], (key, now)
    # Escape hands the keys back to the notebook: its arrow keys move between cells again
    page.keyboard.press("Escape")
    assert page.evaluate("() => !document.activeElement.closest('.tn-root')")
    page.keyboard.press("ArrowUp")
    assert page.evaluate(f"() => {NB}.activeCellIndex") == active - 1
    assert page.evaluate(f"() => {NB}.widgets.length") == ncells


def test_the_cuda_view_opens_on_the_kernel(live):
    _, page, _ = live
    first = page.evaluate("""() => {
      const pane = document.querySelector('.tilenb-view[data-tilenb-view=cuda] .tn-cpane');
      const line = [...pane.querySelectorAll('.tn-cline')].find(n => n.offsetTop - pane.offsetTop >= pane.scrollTop);
      return [pane.scrollTop, line.textContent]; }""")
    assert first[0] > 0 and "__global__" in first[1], first


def _theme(page, name, light):
    page.evaluate(f"{APP}.commands.execute('apputils:change-theme', {{theme: {json.dumps(name)}}})")
    page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{str(light).lower()}'", timeout=60000)


def _min_contrast(page, timeout=15.0):
    """The lowest token contrast once the view has followed the theme (it rechecks after the
    theme's style sheet loads)."""
    deadline = time.time() + timeout
    while True:
        got = page.evaluate(CONTRAST)
        low = min(r for r, _ in got.values())
        if low >= 4.5 or time.time() > deadline:
            return low, got
        time.sleep(0.5)


def test_cuda_colours_follow_the_theme_at_4_5_to_1(live):
    _, page, _ = live
    low, light = _min_contrast(page)
    assert low >= 4.5, light
    assert {"k", "kt", "mi", "c1"} <= set(light)
    _theme(page, "JupyterLab Dark", False)
    try:
        low, dark = _min_contrast(page)
        assert low >= 4.5, dark
        assert dark["k"][1] != light["k"][1]          # the theme's colours, not fixed ones
        assert page.evaluate("() => getComputedStyle(document.querySelector('.tilenb-view .tn-root')).color") \
            != "rgb(31, 35, 40)"                      # the view's text follows the theme too
    finally:
        _theme(page, "JupyterLab Light", True)


def test_saved_notebook_reopened_without_its_kernel_shows_the_views(live):
    import nbformat
    server, page, root = live
    page.evaluate(f"{APP}.commands.execute('docmanager:save')")
    page.wait_for_function(f"() => !{PANEL}.context.model.dirty")
    server.stop_kernels()
    # a trusted notebook (saved by its user): the views are interactive again, with no kernel
    page.goto(server.page_url("views.ipynb"))
    page.wait_for_function(f"() => {PANEL} && {PANEL}.context && {PANEL}.context.path === 'views.ipynb' && "
                           f"{PANEL}.node.querySelectorAll('.tilenb-view[data-tilenb-ready]').length === 4", timeout=120000)
    assert "model not found" not in page.inner_text("body")
    # the same notebook untrusted (written elsewhere, as the shipped tutorials are): the pictures
    # (trust goes with the content's signature: a changed copy is not trusted)
    saved = nbformat.read(str(root / "views.ipynb"), as_version=4)
    saved.cells.insert(0, nbformat.v4.new_markdown_cell("A copy from somewhere else."))
    nbformat.write(saved, str(root / "untrusted.ipynb"))
    page.goto(server.page_url("untrusted.ipynb"))
    # (JupyterLab may restore the first notebook beside it: look inside the current one only;
    # the sanitizer also drops the data- attributes, so the views go by their order)
    page.wait_for_function(f"() => {PANEL} && {PANEL}.context && {PANEL}.context.path === 'untrusted.ipynb' && "
                           f"{PANEL}.node.querySelectorAll('.tilenb-view').length === 4", timeout=120000)
    # the pictures decode and lay out after the boxes appear (slowly on a loaded machine): wait
    # for them, then look (a picture that never shows still fails the assertions below)
    try:
        page.wait_for_function(f"""() => [...{PANEL}.node.querySelectorAll('.tilenb-view .tilenb-picture img')]
            .every(i => i.complete && i.naturalWidth > 100 && i.getBoundingClientRect().width > 100)""", timeout=60000)
    except Exception:
        pass
    shown = page.evaluate(f"""() => [...{PANEL}.node.querySelectorAll('.tilenb-view')].map(b => {{
        const img = b.querySelector('.tilenb-picture img'), pre = b.querySelector('.tilenb-picture pre');
        return [!!b.querySelector('script'), !!b.dataset.tilenbStarted,
                img ? [img.complete && img.naturalWidth > 100, img.getBoundingClientRect().width > 100] : null,
                pre ? getComputedStyle(pre).wordBreak : null, b.innerText]; }})""")
    assert not any(s[0] or s[1] for s in shown)       # untrusted: the scripts are gone, none ran
    assert shown[0][2] == [True, True] and shown[1][2] == [True, True]     # the pictures show
    assert shown[2][3] == "normal"                    # the listing wraps between words, not inside one
    assert "---- barrier before line 7 (x)" in shown[2][4]
    assert "generated CUDA of rms_norm" in shown[3][4]
    assert "model not found" not in page.evaluate(f"() => {PANEL}.node.innerText")
