"""The thread map in a plain page (its HTML as a front end inserts it, scripts re-created), driven
by the keyboard: a 1-row slice drawn as one strip whose bands are labelled by their columns, the
per-warp table a single Tab stop whose rows the arrow keys walk, Tab and Escape leaving the view
(README: keys stay in a view until Escape or Tab), and two copies of one view in a page both
drawing; the part of a slice known to lie outside its tensor greyed."""
import pytest

from browser_env import open_page, output_page, views_ready
from support.programs import GEMM_32

pytestmark = pytest.mark.browser

ROW = """@launch(256)
@grid(cdiv(N, 256))
kernel scale(X: tensor<f32>[1, N], Y: tensor<f32>[1, N]) {
  let c = ctx.block.x * 256
  Y[0 :+ 1, c :+ 256] = X[0 :+ 1, c :+ 256] * 2.0
}
"""

EDGE = """@launch(64)
kernel edge(X: tensor<f32>[8, 60], Y: tensor<f32>[8, 60]) {
  var x = X[0 :+ 8, 0 :+ 64]
  Y[-2 :+ 8, 0 :+ 64] = x
}
"""

def _threadmap(src, name):
    import tilenb
    from tilenb.notebook import views
    return views(getattr(tilenb.compile(src, backend="cpu"), name), "threads")[0]


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    row, gemm = _threadmap(ROW, "scale"), _threadmap(GEMM_32, "gemm")
    html = [w._repr_mimebundle_()[0]["text/html"] for w in (row, gemm)]
    html.append(html[1])                                 # the same view twice in one page
    html.append(_threadmap(EDGE, "edge")._repr_mimebundle_()[0]["text/html"])
    # a button before the outputs and one after, for the focus to leave the views to
    page_html = output_page(html, before='<button id="before">before</button>\n', after='<button id="after">after</button>')
    with open_page(page_html, tmp_path_factory.mktemp("keys"), views_ready(4)) as pg:
        pg.row_runs, pg.gemm = row.copies[row.selected]["runs"], gemm.copies[gemm.selected]
        yield pg


def view(page, i):
    return page.locator(".tilenb-view").nth(i)


ACTIVE = "() => [document.activeElement.dataset.run || null, document.activeElement.tagName === 'TR' ? document.activeElement.dataset.warp : null, " \
         "[...document.querySelectorAll('.tilenb-view')].indexOf(document.activeElement.closest('.tilenb-view'))]"


def test_the_same_view_twice_in_a_page_draws_twice(page):
    assert page.errors == []
    assert view(page, 2).get_attribute("data-tilenb-id") == view(page, 1).get_attribute("data-tilenb-id")
    assert view(page, 2).locator(".tn-root").count() == 1 and view(page, 1).locator(".tn-root").count() == 1


def test_a_one_row_slice_is_one_strip_with_bands_labelled_by_columns(page):
    grid = view(page, 0).locator("svg.tn-grid").nth(0)
    assert grid.locator("text.tn-bandtick").all_text_contents() == ["0–63", "64–127", "128–191", "192–255"]
    assert grid.locator("text.tn-rowtick:not(.tn-bandtick)").count() == 0     # no "row 1, 2, 3"
    # inside or not is known only at run time here (c + j < N): nothing greyed, and the text says why
    assert grid.locator("rect.tn-outside").count() == 0
    region = view(page, 0).locator(".tn-region").inner_text()
    assert "columns j in 0..255 where 0 <= c + j < N" in region and "greyed" not in region
    runs = page.row_runs
    first = next(k for k, r in enumerate(runs) if r[2] == 0)
    grid.locator(f'g.tn-run[data-run="{first}"]').click()
    label = page.evaluate("document.activeElement.getAttribute('aria-label')")
    assert "elements 0–3" in label and "row" not in label
    page.keyboard.press("ArrowDown")                     # the band below: column 64
    below = next(k for k, r in enumerate(runs) if r[2] == 64)
    assert page.evaluate(ACTIVE) == [str(below), None, 0]
    page.keyboard.press("ArrowUp")
    assert page.evaluate(ACTIVE) == [str(first), None, 0]


def test_the_warp_table_is_one_tab_stop_walked_by_the_arrows_and_tab_leaves(page):
    tm = view(page, 1)
    table = tm.locator("table.tn-warps").first
    nwarps = len(page.gemm["warps"])
    assert nwarps == 8 and table.locator("tbody tr").count() == nwarps
    assert table.locator('tbody tr[tabindex="0"]').count() == 1
    tm.locator("svg.tn-grid").nth(1).locator('g.tn-run[data-run="0"]').click()    # the tile side's first run
    page.keyboard.press("Tab")
    assert page.evaluate(ACTIVE) == [None, "0", 1]
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    assert page.evaluate(ACTIVE) == [None, "2", 1]
    # the focused warp's runs light up: as many as the analysis gives warp 2
    hot = tm.locator("svg.tn-grid").nth(0).locator("g.tn-run.tn-hot").count()
    assert hot == sum(1 for r in page.gemm["runs"] if r[0] // 32 == 2) > 0
    page.keyboard.press("Tab")                           # one press leaves the table and the view
    assert page.evaluate(ACTIVE)[2] != 1
    page.keyboard.press("Shift+Tab")                     # back onto the row last focused
    assert page.evaluate(ACTIVE) == [None, "2", 1]


def test_escape_leaves_the_view(page):
    grid = view(page, 1).locator("svg.tn-grid").nth(0)
    grid.locator('g.tn-run[data-run="3"]').click()
    page.keyboard.press("ArrowRight")
    assert page.evaluate(ACTIVE)[2] == 1
    page.keyboard.press("Escape")
    assert page.evaluate(ACTIVE)[2] == -1


def test_the_part_known_outside_the_tensor_is_greyed_and_said(page):
    tm = view(page, 3)
    tm.locator("button.tn-chip").nth(1).click()          # the store Y[-2 :+ 8, 0 :+ 64] = x
    assert "rows 2..7 inside, 0..1 outside (Y's 8)" in tm.locator(".tn-region").inner_text()
    grid = tm.locator("svg.tn-grid").nth(0)
    # outside: tile rows 0-1 whole, and columns 60-63 of rows 2-7 (one rectangle each, no wrap)
    assert grid.locator("rect.tn-outside").count() == 2 + 6
    cells = grid.locator("rect.tn-outside").evaluate_all("rs => rs.reduce((n, r) => n + r.width.baseVal.value * r.height.baseVal.value, 0)")
    cell = grid.locator("rect.tn-outside").first.evaluate("r => r.height.baseVal.value")
    assert round(cells / cell / cell) == 2 * 64 + 6 * 4
