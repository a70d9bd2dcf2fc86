"""Measured beside predicted, drawn: the thread map, timing and barriers views of the saved H200
capture (tests/runtime/data/ncu_h200) in a plain page (their HTML inserted as a front end does,
scripts re-created), in headless chromium. The per-line table and the shown copy carry Nsight
Compute's figures beside the per-CTA prediction times the CTAs, the differing line (and only it)
is flagged with compare()'s reason, the timing view gives DRAM bytes against the minimal bytes,
the duration under ncu and the occupancy, each barrier mark its stall share; the flag stays
readable in a dark theme."""
import pytest

from browser_env import open_page, output_page, views_ready

pytestmark = pytest.mark.browser

def _profile():
    from support import ncu_fixture as T
    return T.profile_with_a_differing_line()


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    from tilenb.notebook import build
    kernel, prof = _profile()
    views = build.make_views(kernel, ("threads", "barriers", "timing"), profile=prof)
    # the same barriers with one the code generator adds inside line 7 (none in the capture)
    internal = dict(where="internal", line=7, samples=3, barrier_samples=2, share=0.25)
    plain = prof.barriers
    prof.barriers = plain + [internal]
    views.append(build.make_views(kernel, ("barriers",), profile=prof)[0])
    prof.barriers = plain
    html = output_page([w._repr_mimebundle_()[0]["text/html"] for w in views])
    with open_page(html, tmp_path_factory.mktemp("measured"), views_ready(4), width=1300) as pg:
        pg.prof, pg.views = prof, views
        yield pg


def _view(page, i):
    return page.locator(".tilenb-view").nth(i)


def _bad_lines(prof):
    return sorted({r["line"] for r in prof.compare(prof.predicted) if not r["ok"]})


def _line_wavefronts(prof, line):
    """The analysis' shared wavefronts of one line, per CTA: its copy plans' and its other shared
    accesses' (analysis.shared_traffic: scale_rows' broadcast read of s on line 7)."""
    return (sum(c.wavefronts for c in prof.predicted.copies if c.line == line)
            + sum(t.wavefronts for t in prof.predicted.shared_traffic if t.line == line))


def _expected_rows(prof):
    """Per line: (label, sectors predicted, measured, requests, wavefronts predicted, measured,
    bank conflicts, verdict), as the page must print them (en-US thousands separators)."""
    plans = {}
    for cp in prof.predicted.copies:
        plans.setdefault(cp.line, []).append(cp)
    counted = {ln for ln, f in prof.lines.items() if f.sectors or f.wavefronts}
    rows = prof.compare(prof.predicted)
    out = []
    for line in sorted(set(plans) | counted):
        f = prof.lines[line]
        why = [f"{r['metric']}: {r['reason']}" for r in rows if r["line"] == line and not r["ok"]]
        out.append([str(line), f"{sum(c.sectors for c in plans[line]) * prof.ctas:,}", f"{f.sectors:,}",
                    f"{f.requests:,}", f"{_line_wavefronts(prof, line) * prof.ctas:,}", f"{f.wavefronts:,}",
                    f"{max(0, f.wavefronts - f.ideal_wavefronts):,}",
                    "DIFFERS: " + "; ".join(why) if why else "matches the prediction"])
    return out


def test_the_views_draw_with_no_error(page):
    boxes = page.eval_on_selector_all(".tilenb-view", "bs => bs.map(b => [b.dataset.tilenbView, b.dataset.tilenbError || null])")
    assert boxes == [["threadmap", None], ["barriers", None], ["timing", None], ["barriers", None]]
    assert page.errors == []


def test_the_per_line_table_shows_measured_beside_predicted_and_flags_the_differing_line(page):
    tm = _view(page, 0)
    table = tm.locator("table.tn-measured")
    cells = table.locator("tbody tr").evaluate_all(
        "trs => trs.map(tr => [...tr.cells].map(td => td.textContent))")
    want = _expected_rows(page.prof)
    assert [[c[0]] + c[2:] for c in cells] == want
    bad = _bad_lines(page.prof)
    assert bad and table.locator('tbody tr[data-ok="false"]').evaluate_all("trs => trs.map(t => +t.dataset.line)") == bad
    assert table.locator("tbody tr .tn-flagbadge").count() == len(bad)
    assert "(10 CTAs)" in table.locator("caption").inner_text() and "per-CTA figure × 10 CTAs" in table.locator("caption").inner_text()
    summary = tm.locator(".tn-measured-summary").inner_text()
    assert summary.startswith(f"Measured (Nsight Compute, 10 CTAs): {len(bad)} line of {len(want)} differs")


def test_the_shown_copy_and_its_warp_table_carry_its_lines_measurement(page):
    tm = _view(page, 0)
    prof = page.prof
    bad = _bad_lines(prof)[0]
    i = next(k for k, c in enumerate(page.views[0].copies) if c["line"] == bad)
    tm.locator("button.tn-chip").nth(i).click()
    cp = next(c for c in prof.predicted.copies if c.line == bad)
    f = prof.lines[bad]
    box = tm.locator(".tn-measured-copy")
    assert box.get_attribute("data-ok") == "false"
    assert (f"{f.sectors:,} sectors in {f.requests:,} requests (predicted {cp.sectors:,} per CTA × 10 CTAs = "
            f"{cp.sectors * 10:,}), {f.wavefronts:,} shared wavefronts") in box.inner_text()
    reasons = [f"{r['metric']}: {r['reason']}" for r in prof.compare(prof.predicted) if r["line"] == bad and not r["ok"]]
    assert box.locator(".tn-flag").text_content() == "DIFFERS: " + "; ".join(reasons)
    foot = tm.locator("table.tn-warps tfoot tr")
    assert foot.evaluate_all("trs => trs.map(t => [...t.children].map(c => c.textContent))") == [
        ["per CTA (all warps of this copy)", f"{cp.sectors:,}", f"{cp.ideal_sectors:,}", f"{cp.wavefronts:,}", f"{cp.ideal_wavefronts:,}"],
        [f"line {bad}, predicted (per CTA × 10 CTAs)", f"{cp.sectors * 10:,}", "", f"{_line_wavefronts(prof, bad) * 10:,}", ""],
        [f"line {bad}, measured (Nsight Compute, whole launch)", f"{f.sectors:,}", "", f"{f.wavefronts:,}", ""]]
    # the figure the analysis missed is the one marked
    assert foot.nth(2).locator("td.tn-badcell").all_text_contents() == [f"{f.sectors:,}"]
    # the keys stay in the view: the chip keeps the focus
    assert page.evaluate("!!document.activeElement.closest('.tn-threadmap')")


def test_the_timing_view_shows_dram_against_the_minimal_bytes_duration_and_occupancy(page):
    from tilenb.notebook.summary import fmt_rate
    tv = _view(page, 2)
    m = page.prof.kernel_metrics
    M = page.prof.dims["M"]
    read, write, minr, minw = int(m["dram_read_bytes"]), int(m["dram_write_bytes"]), 4 * (M * 64 + M), 4 * M * 64
    dl = tv.locator("section.tn-measured dl.tn-metrics")
    pairs = dict(zip(dl.locator("dt").all_text_contents(), dl.locator("dd").all_text_contents()))
    assert pairs["DRAM read"] == f"{read:,} B against {minr:,} B the launch must read ({read / minr:.2f}×)"
    assert pairs["DRAM write"] == f"{write:,} B against {minw:,} B it must write ({write / minw:.2f}×)"
    assert pairs["DRAM in all"] == f"{read + write:,} B against {minr + minw:,} B minimal ({(read + write) / (minr + minw):.2f}×)"
    assert pairs["L2"] == f"{int(m['l2_bytes']):,} B"
    assert pairs["duration under ncu"].startswith(f"{m['duration_ns'] / 1e3:.1f} µs")
    assert pairs["achieved occupancy"] == f"{m['achieved_occupancy_pct']:.1f}%"
    bw = (read + write) / (m["duration_ns"] * 1e-9)
    assert pairs["DRAM bandwidth (DRAM bytes / duration under ncu)"].startswith(fmt_rate(bw, "B/s"))
    labels = tv.locator("svg.tn-bytes g").evaluate_all("gs => gs.map(g => g.getAttribute('aria-label'))")
    assert labels[:4] == [f"read: minimal: {minr:,} B (the bytes of the tensors the launch reads, each once)",
                          f"read: DRAM measured: {read:,} B (Nsight Compute: dram__bytes_read.sum)",
                          f"write: minimal: {minw:,} B (the bytes of the tensors the launch writes, each once)",
                          f"write: DRAM measured: {write:,} B (Nsight Compute: dram__bytes_write.sum)"]
    # the DRAM bandwidth under ncu against the memory roof (the kernel has no dot: no FLOP point)
    assert tv.locator("svg.tn-bw g").first.get_attribute("aria-label").startswith(f"DRAM under ncu: {fmt_rate(bw, 'B/s')}")
    assert "has no dot" in tv.locator(".tn-roofline-text").inner_text()


def test_each_barrier_mark_shows_its_stall_share_and_the_generators_barriers_are_listed(page):
    bars = _view(page, 1)
    for i, b in enumerate(page.prof.barriers):
        want = f"measured: {100 * b['share']:.1f}% of warp-stall samples here, {b['barrier_samples']:,} waiting at the barrier"
        mark = bars.locator(".tn-bmark").nth(i)
        assert mark.locator(".tn-bshare").inner_text() == want
        assert mark.get_attribute("aria-label").endswith("; " + want)
        mark.focus()
        assert bars.locator(".tn-tip").inner_text().endswith(want)
    assert bars.locator("ul.tn-internal").count() == 0
    extra = _view(page, 3).locator("ul.tn-internal li")
    assert extra.all_text_contents() == ["code-generator barrier inside line 7: 25.0% of warp-stall samples, 2 waiting at the barrier"]


def test_the_flag_stays_readable_in_a_dark_theme(page):
    page.evaluate("""() => { const r = document.documentElement.style;
      r.setProperty('--vscode-editor-background', '#1e1e1e'); r.setProperty('--vscode-editor-foreground', '#d4d4d4'); }""")
    try:
        got = page.evaluate("""() => { const b = document.querySelector('.tn-measured .tn-flagbadge');
          const why = b.parentElement.querySelector('.tn-reason'); const root = document.querySelector('.tn-root');
          return [getComputedStyle(b).color, getComputedStyle(b).backgroundColor, getComputedStyle(why).color,
                  getComputedStyle(root).backgroundColor]; }""")
        assert got == ["rgb(255, 255, 255)", "rgb(194, 65, 12)", "rgb(212, 212, 212)", "rgb(30, 30, 30)"]
    finally:
        page.evaluate("() => document.documentElement.removeAttribute('style')")
