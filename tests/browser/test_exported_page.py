"""A notebook made with nbformat, executed with nbclient and exported with nbconvert, opened in
headless chromium with every network request refused: the views draw from the JavaScript
inlined in the page, hovering a run shows the thread the analysis gives it, arrow keys and
Tab move between runs, the ruler and barrier marks explain themselves, and the page is not
blank."""
import io
import os
from pathlib import Path

import pytest

from browser_env import CHROMIUM, CHROMIUM_ARGS
from tilenb.examples import kernel_source

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
RMS = kernel_source("rms_norm")   # the shipped example (tilenb/examples/seed_kernels.tile)


def _notebook():
    import nbformat
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext tilenb"),
        nbformat.v4.new_code_cell("%%tilekernel --backend cpu --show threads,lifetimes,barriers\n" + RMS),
        nbformat.v4.new_code_cell("from tilenb.notebook import demo\nfor w in demo():\n    display(w)"),
    ]
    return nb


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    from nbclient import NotebookClient
    nb = _notebook()
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = f"{ROOT}{os.pathsep}{env_path}" if env_path else str(ROOT)
    try:
        NotebookClient(nb, timeout=180, kernel_name="python3",
                       resources={"metadata": {"path": str(ROOT)}}).execute()
    finally:
        if env_path:
            os.environ["PYTHONPATH"] = env_path
        else:
            os.environ.pop("PYTHONPATH", None)
    return nb


@pytest.fixture(scope="module")
def page(executed, tmp_path_factory):
    from playwright.sync_api import sync_playwright
    from tilenb.notebook.export import to_html
    out = tmp_path_factory.mktemp("page") / "exported.html"
    out.write_text(to_html(executed), encoding="utf-8")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        pg = browser.new_page(viewport={"width": 1200, "height": 900})
        errors, refused = [], []
        pg.on("pageerror", lambda e: errors.append(str(e)))

        def refuse(route):
            if route.request.url.startswith(("http:", "https:")):
                refused.append(route.request.url)
                return route.abort()
            return route.continue_()
        pg.route("**/*", refuse)
        pg.goto(out.as_uri())
        pg.wait_for_function("document.querySelectorAll('.tilenb-view').length > 0 && "
                             "[...document.querySelectorAll('.tilenb-view')].every("
                             "b => b.getAttribute('data-tilenb-ready') || b.getAttribute('data-tilenb-error'))",
                             timeout=20000)
        pg.errors, pg.refused, pg.html_path = errors, refused, out
        yield pg
        browser.close()


def test_every_view_draws_without_network_or_script_errors(page):
    boxes = page.eval_on_selector_all(".tilenb-view", "bs => bs.map(b => [b.dataset.tilenbView, b.dataset.tilenbReady, b.dataset.tilenbError])")
    assert [b[0] for b in boxes] == ["threadmap", "ruler", "barriers"] * 2
    assert all(b[1] == "1" and b[2] is None for b in boxes), boxes
    assert page.errors == []
    assert "unpkg.com" not in page.html_path.read_text() and "jsdelivr" not in page.html_path.read_text()
    # the page asks the network for nothing at all: not the views, nor the template (its MathJax,
    # require.js and mermaid loaders are left out)
    assert page.refused == []


def _thread_map(page, index):
    return page.locator(".tilenb-view[data-tilenb-view=threadmap]").nth(index)


def test_hovering_a_run_shows_the_thread_the_analysis_gives_it(page):
    from tilenb.notebook.fixture import rms_norm_analysis
    runs = rms_norm_analysis()["copies"][0]["runs"]
    tm = _thread_map(page, 1)                        # the bundled record (demo cell)
    tile_side = tm.locator("svg.tn-grid").nth(1)
    for i in (0, 37, 300, 511):
        tile_side.locator(f'g.tn-run[data-run="{i}"]').hover()
        info = tm.locator(".tn-info")
        thread = runs[i][0]
        assert info.get_attribute("data-thread") == str(thread)
        assert f"thread {thread} · warp {thread // 32} · lane {thread % 32}" in info.inner_text()
        # the same run is lit on the tensor side
        assert "tn-twin" in tm.locator("svg.tn-grid").nth(0).locator(f'g.tn-run[data-run="{i}"]').get_attribute("class")


def test_real_analysis_in_the_page_matches_the_kernel(page):
    import tilenb
    k = tilenb.compile(RMS, backend="cpu", line_offset=1).rms_norm
    try:
        record = k.analysis().to_json()
    except ImportError:
        pytest.skip("tilenb.analysis.analyze is not in this tree yet")
    copy = record["copies"][0]
    tm = _thread_map(page, 0)
    i = len(copy["runs"]) // 3
    tm.locator("svg.tn-grid").nth(0).locator(f'g.tn-run[data-run="{i}"]').hover()
    assert tm.locator(".tn-info").get_attribute("data-thread") == str(copy["runs"][i][0])


def test_arrow_keys_and_tab_move_between_runs(page):
    from tilenb.notebook.fixture import rms_norm_analysis
    runs = rms_norm_analysis()["copies"][0]["runs"]
    tm = _thread_map(page, 1)
    tensor = tm.locator("svg.tn-grid").nth(0)
    tensor.locator('g.tn-run[data-run="0"]').click()
    active = "() => [document.activeElement.dataset.run, document.activeElement.closest('svg') === " \
             "document.querySelectorAll('.tilenb-view[data-tilenb-view=threadmap]')[1].querySelectorAll('svg.tn-grid')[%d]]"
    assert page.evaluate(active % 0) == ["0", True]
    page.keyboard.press("ArrowRight")                 # row 0, columns 4-7
    i = next(k for k, r in enumerate(runs) if r[1] == 0 and r[2] == 4)
    assert page.evaluate(active % 0) == [str(i), True]
    page.keyboard.press("ArrowDown")                  # row 1, columns 4-7
    j = next(k for k, r in enumerate(runs) if r[1] == 1 and r[2] == 4)
    assert page.evaluate(active % 0) == [str(j), True]
    assert tm.locator(".tn-info").get_attribute("data-thread") == str(runs[j][0])
    page.keyboard.press("End")
    assert page.evaluate(active % 0)[0] == str(max(range(len(runs)), key=lambda k: (runs[k][1], runs[k][2])))
    page.keyboard.press("Tab")                        # on to the same run in the tile
    assert page.evaluate(active % 1)[1] is True
    label = page.evaluate("document.activeElement.getAttribute('aria-label')")
    assert label.startswith("tile: thread ") and "row 7" in label


def test_ruler_and_barrier_marks_explain_themselves(page):
    ruler = page.locator(".tilenb-view[data-tilenb-view=ruler]").nth(1)
    ruler.locator('rect.tn-seg[data-tile="g"]').first.hover()
    tip = ruler.locator(".tn-tip")
    assert tip.is_visible() and tip.inner_text().startswith("g: f32 [1, 256], 1,024 B at offset 8192")
    bars = page.locator(".tilenb-view[data-tilenb-view=barriers]").nth(1)
    bars.locator(".tn-bmark").first.focus()
    assert "rowsum reads rows of x" in bars.locator(".tn-tip").inner_text()
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.getAttribute('aria-label')").startswith("barrier before line 7")


def test_ruler_scaled_to_the_footprint_stays_inside_its_width(page):
    ruler = page.locator(".tilenb-view[data-tilenb-view=ruler]").nth(1)
    ruler.locator("button.tn-chip", has_text="scale: footprint").click()
    widths = ruler.locator("rect.tn-track").evaluate_all("rs => rs.map(r => r.getBBox().width)")
    totals = ruler.locator("text.tn-total").evaluate_all("ts => ts.map(t => t.getBBox().x + t.getBBox().width)")
    bars = ruler.locator("svg.tn-bar").evaluate_all("ss => ss.map(s => s.getBoundingClientRect().width)")
    assert widths and max(widths) <= 380 and max(totals) <= max(bars)      # the totals stay in view
    segs = ruler.locator("rect.tn-seg").evaluate_all("rs => rs.map(r => r.getBBox().x + r.getBBox().width)")
    assert max(segs) == pytest.approx(380, abs=1)     # the footprint spans the drawn width
    # the ruler was drawn anew at the new scale: the focus (and the keys) stayed on its button
    assert page.evaluate("document.activeElement.textContent").startswith("scale: footprint")
    ruler.locator("button.tn-chip", has_text="scale: whole budget").click()


def test_picking_another_copy_keeps_the_focus_in_the_view(page):
    tm = _thread_map(page, 1)
    tm.locator("button.tn-chip").nth(1).click()
    assert page.evaluate("[document.activeElement.tagName, document.activeElement.getAttribute('aria-pressed'), "
                         "!!document.activeElement.closest('.tn-threadmap')]") == ["BUTTON", "true", True]
    assert tm.locator("button.tn-chip").nth(1).get_attribute("aria-pressed") == "true"
    tm.locator("button.tn-chip").nth(0).click()


def test_a_barrier_tip_leaves_its_line_visible_and_stays_in_the_view(page):
    bars = page.locator(".tilenb-view[data-tilenb-view=barriers]").nth(1)
    for i in range(bars.locator(".tn-bmark").count()):
        mark = bars.locator(".tn-bmark").nth(i)
        mark.focus()
        line = mark.get_attribute("data-line")
        tip = bars.locator(".tn-tip").bounding_box()
        text = bars.locator(f'.tn-sline[data-line="{line}"]').bounding_box()
        root = bars.locator(".tn-root").bounding_box()
        overlap = min(tip["y"] + tip["height"], text["y"] + text["height"]) - max(tip["y"], text["y"])
        assert overlap <= 0, (i, tip, text)              # the line the barrier explains stays visible
        assert tip["x"] >= root["x"] - 1 and tip["x"] + tip["width"] <= root["x"] + root["width"] + 1


def test_screenshot_is_not_blank(page, tmp_path):
    from PIL import Image
    shot = page.screenshot(full_page=True)
    (Path(os.environ.get("TILENB_SCREENSHOT_DIR", tmp_path)) / "exported-page.png").write_bytes(shot)
    img = Image.open(io.BytesIO(shot)).convert("RGB")
    colours = img.getcolors(maxcolors=1 << 20)
    assert img.size[0] >= 1000 and img.size[1] > 1500
    assert len(colours) > 200                          # thread colours, text, bars: not a blank page
