"""The views beside a Profile: the measured figures in the thread map, barriers and timing views'
traits, in their HTML and text forms and in the PNG pictures, read from a saved Nsight Compute
capture (tests/runtime/data/ncu_h200); the differing-line flag exactly where `Profile.compare`
says not ok; and %tileprofile's refusals.

Expected figures come from the fixture's pages read here with the csv module (the kernel
metrics), from the Profile's per-line counters (their parsing is tested in tests/runtime), from
the analysis' per-CTA copy figures times the CTAs, and from the tensors' shapes (minimal bytes)."""
import csv
import html as H
import json
from types import SimpleNamespace
import re
from collections import defaultdict

import numpy as np
import pytest

import tilenb
from tilenb.notebook import build, render
from tilenb.runtime.gpu.profile import Profile, build_profile

from support import ncu_fixture as T
from support.programs import GEMM_32


def _profile():
    kernel, prof = T.profile_with_a_differing_line()
    return SimpleNamespace(scale_rows=kernel), prof


def _raw_metric(name):
    """A kernel metric of the fixture's raw page, in bytes / ns (its units row read here)."""
    rows = list(csv.reader((T.fixture_dir() / "raw.csv").read_text().splitlines()))
    head, units, vals = rows[0], rows[1], rows[2]
    i = head.index(name)
    scale = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "usecond": 1e3, "us": 1e3, "nsecond": 1, "%": 1, "": 1}[units[i]]
    return float(vals[i].replace(",", "")) * scale


def _views(m, prof):
    return {w._name: w for w in build.make_views(m.scale_rows, ("threads", "barriers", "timing"), profile=prof)}


def _not_ok_lines(prof):
    return sorted({r["line"] for r in prof.compare(prof.predicted) if not r["ok"]})


def test_thread_map_carries_each_lines_measured_figures_beside_the_prediction():
    m, prof = _profile()
    tm = _views(m, prof)["threadmap"]
    meas = tm.measured
    assert meas["ctas"] == 10 == prof.grid[0]
    plans = defaultdict(list)
    for cp in prof.predicted.copies:
        plans[cp.line].append(cp)
    counted = {ln for ln, f in prof.lines.items() if f.sectors or f.wavefronts}
    assert [r["line"] for r in meas["lines"]] == sorted(set(plans) | counted)
    for r in meas["lines"]:
        f = prof.lines[r["line"]]
        assert (r["sectors"], r["requests"], r["wavefronts"], r["bank_conflicts"]) == \
            (f.sectors, f.requests, f.wavefronts, max(0, f.wavefronts - f.ideal_wavefronts))
        per_s = sum(cp.sectors for cp in plans[r["line"]])
        per_w = (sum(cp.wavefronts for cp in plans[r["line"]])
                 + sum(t.wavefronts for t in prof.predicted.shared_traffic if t.line == r["line"]))
        assert (r["per_cta_sectors"], r["per_cta_wavefronts"]) == (per_s, per_w)
        assert (r["predicted_sectors"], r["predicted_wavefronts"]) == (per_s * 10, per_w * 10)
        assert r["ok"] == (r["line"] not in _not_ok_lines(prof))
    # each copy of the map carries its line's record
    for c in tm.copies:
        assert c["measured"] == next(r for r in meas["lines"] if r["line"] == c["line"])


def test_the_differing_flag_is_exactly_on_the_lines_compare_rejects_with_its_reasons():
    m, prof = _profile()
    rows = prof.compare(prof.predicted)
    bad = _not_ok_lines(prof)
    assert bad == [7], "the store line, its sectors made 4x (support.ncu_fixture)"
    tm = _views(m, prof)["threadmap"]
    for r in tm.measured["lines"]:
        want = [f"{x['metric']}: {x['reason']}" for x in rows if x["line"] == r["line"] and not x["ok"]]
        assert r["reasons"] == want and r["ok"] == (not want)
    text = render.text("threadmap", tm.state())
    differs = [ln for ln in text.splitlines() if "DIFFERS" in ln]
    assert len(differs) == len(bad)
    for line, ln in zip(bad, differs):
        r = next(x for x in tm.measured["lines"] if x["line"] == line)
        assert ln.endswith("DIFFERS: " + "; ".join(r["reasons"]))
        assert f"{r['wavefronts']:,} shared wavefronts" in ln
        assert f"(predicted {r['per_cta_sectors']:,} per CTA x 10 CTAs = {r['predicted_sectors']:,})" in ln


def test_a_line_with_traffic_but_no_copy_statement_is_listed_and_flagged():
    from tilenb.runtime.gpu.profile import LineFigures
    m, prof = _profile()
    # as a reduction reading a tile would show: counters on line 4, where the analysis plans no copy
    prof.lines[4] = LineFigures(4, sectors=0, wavefronts=30, ideal_wavefronts=20, requests=0)
    tm = _views(m, prof)["threadmap"]
    r = next(x for x in tm.measured["lines"] if x["line"] == 4)
    assert (r["wavefronts"], r["bank_conflicts"], r["ok"]) == (30, 10, False)
    assert r["reasons"] == [f"shared wavefronts: {x['reason']}" for x in prof.compare(prof.predicted)
                            if x["line"] == 4 and not x["ok"]]
    text = render.text("threadmap", tm.state())
    head = "measured on lines with no copy statement (Nsight Compute, whole launch):"
    assert head in text
    after = text.split(head, 1)[1].splitlines()[1]
    assert after.startswith("  line 4: 0 sectors in 0 requests") and "30 shared wavefronts, 10 from bank conflicts" in after
    assert after.endswith("DIFFERS: " + "; ".join(r["reasons"]))
    assert text.count("DIFFERS") == len(_not_ok_lines(prof))


def test_the_html_carries_the_measured_traits_and_the_static_text():
    m, prof = _profile()
    for name, w in _views(m, prof).items():
        page = w._repr_mimebundle_()[0]["text/html"]
        data = re.search(r'<script type="application/json" class="tilenb-data">(.*?)</script>', page, re.S).group(1)
        state = json.loads(data)["state"]
        assert state == json.loads(json.dumps(w.state()))       # the interactive view reads these traits
        pre = re.search(r"<pre[^>]*>(.*?)</pre>", page, re.S).group(1)
        assert H.unescape(pre) == render.text(name, w.state())  # and the picture carries the text form
    tm = _views(m, prof)["threadmap"].state()
    assert tm["measured"]["lines"] and all("sectors" in r for r in tm["measured"]["lines"])


def test_barriers_carry_each_barriers_stall_share_and_the_generators_own():
    m, prof = _profile()
    bv = _views(m, prof)["barriers"]
    assert [(b["where"], b["line"]) for b in bv.barriers] == [(b["where"], b["line"]) for b in prof.barriers]
    for b, p in zip(bv.barriers, prof.barriers):
        assert b["measured"] == {"share": p["share"], "barrier_samples": p["barrier_samples"]}
    text = render.text("barriers", bv.state())
    for p in prof.barriers:
        assert f"{100.0 * p['share']:.1f}% of warp-stall samples here, {p['barrier_samples']} waiting" in text
    assert bv.measured == {"ctas": 10, "internal": []}
    # a barrier the code generator adds inside a line's code (none in this capture): listed with its share
    extra = dict(line=7, where="internal", samples=3, barrier_samples=2, share=3 / 9)
    prof.barriers = prof.barriers + [extra]
    bv = _views(m, prof)["barriers"]
    assert bv.measured["internal"] == [{"line": 7, "share": 3 / 9, "barrier_samples": 2}]
    assert "code-generator barrier inside line 7: 33.3% of warp-stall samples, 2 waiting at the barrier" in \
        render.text("barriers", bv.state())


def test_timing_carries_dram_against_the_minimal_bytes_duration_and_occupancy():
    m, prof = _profile()
    tv = _views(m, prof)["timing"]
    t = tv.timing["measured"]
    M = prof.dims["M"]
    read, write = _raw_metric("dram__bytes_read.sum"), _raw_metric("dram__bytes_write.sum")
    dur = _raw_metric("gpu__time_duration.sum")
    assert (t["dram_read_bytes"], t["dram_write_bytes"], t["dram_bytes"]) == (read, write, read + write)
    assert t["l2_bytes"] == _raw_metric("lts__t_bytes.sum")
    assert t["duration_ns"] == pytest.approx(dur)
    assert t["achieved_occupancy_pct"] == pytest.approx(_raw_metric("sm__warps_active.avg.pct_of_peak_sustained_active"))
    assert t["dram_bytes_per_s"] == pytest.approx((read + write) / (dur * 1e-9))
    # X and S are read, Y is written: f32 at M rows
    assert (t["minimal_read_bytes"], t["minimal_write_bytes"]) == (4 * (M * 64 + M), 4 * M * 64)
    assert t["device"] == "NVIDIA H200" and t["peak"]["device"] == "H200" and t["ctas"] == 10
    assert t["flops"] == 0 and t["roofline"] is None and "no dot" in t["roofline_note"]
    text = render.text("timing", tv.state())
    assert f"DRAM read {int(read):,} B against {4 * (M * 64 + M):,} B the launch must read ({read / (4 * (M * 64 + M)):.2f}x)" in text
    assert f"DRAM write {int(write):,} B against {4 * M * 64:,} B it must write" in text
    assert f"duration {dur / 1e3:.1f} us under ncu" in text and \
        f"achieved occupancy {_raw_metric('sm__warps_active.avg.pct_of_peak_sustained_active'):.1f}%" in text
    # the capture's writes stayed in the L2 when the kernel ended: the view says why DRAM write reads low
    assert write < 4 * M * 64 and "written to DRAM after it" in text


def test_a_dot_kernels_roofline_point_is_placed_from_the_measurement():
    # a Profile as build_profile makes it, for a GEMM at M=100, N=70, K=48 (grid 3 x 4); only
    # its kernel figures are set: the roofline reads those and the launch's FLOPs
    k = tilenb.compile(GEMM_32, backend="cpu").gemm
    dims, grid = {"M": 100, "N": 70, "K": 48}, (3, 4, 1)
    km = {"duration_ns": 5000.0, "dram_read_bytes": 60000.0, "dram_write_bytes": 28000.0, "l2_bytes": 200000.0,
          "achieved_occupancy_pct": 40.0}
    prof = Profile("gemm", "gemm", {}, grid, dims, {}, [], km, [], device="NVIDIA H200")
    prof.predicted = prof.analysis(k)
    tv = build.make_views(k, ("timing",), profile=prof)[0]
    t = tv.timing["measured"]
    flops = 2 * 32 * 32 * 16 * 3 * 12       # each CTA: 3 steps of k (48 / 16) of a 32x16 by 16x32 dot
    assert t["flops"] == flops
    minimal = 4 * (100 * 48 + 48 * 70 + 100 * 70)
    assert t["minimal_bytes"] == minimal
    r = t["roofline"]
    assert r["ai"] == pytest.approx(flops / 88000.0) and r["flops_per_s"] == pytest.approx(flops / 5e-6)
    assert r["predicted_ai"] == pytest.approx(flops / minimal)
    assert r["predicted_flops_per_s"] == pytest.approx(min(67e12, flops / minimal * 4.8e12))
    assert f"{r['ai']:.3g} FLOP per DRAM byte" in render.text("timing", tv.state())


def _drawn_text(monkeypatch, name, state):
    """Every string the PNG drawing of a view puts on its figure."""
    from matplotlib.figure import Figure
    seen = []
    real = Figure.text

    def text(self, x, y, s, *a, **kw):
        seen.append(str(s))
        return real(self, x, y, s, *a, **kw)
    monkeypatch.setattr(Figure, "text", text)
    png = render.png(name, state)
    assert png[:4] == b"\x89PNG"
    return "\n".join(seen)


def test_the_pictures_carry_the_same_measured_figures(monkeypatch):
    pytest.importorskip("matplotlib")
    import textwrap
    m, prof = _profile()
    views = _views(m, prof)
    drawn = " ".join(_drawn_text(monkeypatch, "threadmap", views["threadmap"].state()).split())
    text = render.text("threadmap", views["threadmap"].state())
    for ln in text.splitlines():
        if ln.startswith("  measured (Nsight Compute"):
            figures = ln.split("whole launch): ", 1)[1]
            assert " ".join(figures.split()) in drawn                  # the same words, wrapped
    assert drawn.count("DIFFERS") == len(_not_ok_lines(prof))
    drawn = " ".join(_drawn_text(monkeypatch, "timing", views["timing"].state()).split())
    from tilenb.notebook.summary import measured_timing_lines
    for ln in measured_timing_lines(views["timing"].timing["measured"]):
        assert " ".join(textwrap.fill(ln, 120).split()) in drawn


@pytest.mark.gpu
def test_views_of_a_profile_taken_on_this_gpu():
    from tilenb.runtime.gpu.profile import ProfileUnavailable, find_ncu
    if find_ncu() is None:
        pytest.skip("Nsight Compute (ncu) is not installed here")
    mod = tilenb.compile(T.SOURCE, backend="cuda")
    rng = np.random.default_rng(5)
    X = rng.standard_normal((300, 64)).astype(np.float32)     # 300 rows: the last CTA holds 12 of 32
    S = rng.standard_normal((300, 1)).astype(np.float32)
    Y = np.zeros_like(X)
    try:
        prof = mod.scale_rows.profile(10, X, S, Y)
    except ProfileUnavailable as e:
        if "ERR_NVGPUCTRPERM" in str(e):
            pytest.skip(str(e))
        raise
    np.testing.assert_allclose(Y, X * S, rtol=1e-6)
    views = {w._name: w for w in build.make_views(mod.scale_rows, ("threads", "barriers", "timing"), profile=prof)}
    rows = prof.compare(prof.predicted if prof.predicted is not None else prof.analysis(mod.scale_rows))
    for r in views["threadmap"].measured["lines"]:
        f = prof.lines.get(r["line"])
        assert (r["sectors"], r["wavefronts"]) == ((f.sectors, f.wavefronts) if f else (0, 0))
        assert r["ok"] == all(x["ok"] for x in rows if x["line"] == r["line"])
    t = views["timing"].timing["measured"]
    assert prof.device and t["device"] == prof.device
    assert t["dram_read_bytes"] == int(prof.kernel_metrics["dram_read_bytes"])
    assert (t["minimal_read_bytes"], t["minimal_write_bytes"]) == (4 * (300 * 64 + 300), 4 * 300 * 64)
    for name, w in views.items():
        assert "measured" in render.text(name, w.state())
        assert w._repr_mimebundle_()[0]["text/html"]


def test_views_without_profile_are_unchanged():
    m = tilenb.compile(T.SOURCE, backend="cpu")
    ws = build.make_views(m.scale_rows, ("threads", "barriers", "timing"))
    for w in ws:
        assert "measured" not in render.text(w._name, w.state())
    assert ws[0].measured == {} and ws[1].measured == {} and "measured" not in ws[2].timing


def test_tileprofile_magic_on_cpu_shows_the_prediction_and_why_without_an_error(capsys):
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell
    ip = InteractiveShell.instance()    # the one shell the other magic tests share (one singleton a process)
    ip.run_line_magic("load_ext", "tilenb")
    m = tilenb.compile(T.SOURCE, backend="cpu")
    X = np.ones((40, 64), np.float32)
    ip.user_ns.update(k=m.scale_rows, X=X, S=np.ones((40, 1), np.float32), Y=np.zeros_like(X))
    from tilenb.notebook.magic import CellError
    try:
        Y = ip.user_ns["Y"]
        assert ip.run_line_magic("tileprofile", "k[2](X, S, Y)") is None
        out = capsys.readouterr().out
        assert "CPU backend" in out.splitlines()[-1] and out.splitlines()[-1].startswith("measured: nothing here.")
        # the launch's prediction: 2 CTAs of 32 rows for M = 40, one full; X's load is 32 rows x
        # 256 bytes = 256 sectors a CTA, so 256 (the full CTA) to 512
        assert "5 | global sectors | 256..512 (256)" in out
        assert (Y == 0).all()           # nothing ran: the arguments are untouched
        with pytest.raises(CellError) as e:
            ip.run_line_magic("tileprofile", "k(X, S, Y)")
        assert "KERNEL[GRID](ARGS)" in str(e.value)
    finally:        # the shell is shared with other tests: leave its namespace as found
        for name in ("k", "X", "S", "Y"):
            ip.user_ns.pop(name, None)


def test_measure_shows_the_prediction_and_why_on_cpu(capsys):
    pytest.importorskip("IPython")
    from tilenb.notebook import measure
    m = tilenb.compile(T.SOURCE, backend="cpu")
    X = np.random.default_rng(0).standard_normal((300, 64)).astype(np.float32)
    S, Y = X[:, :1].copy(), np.zeros_like(X)
    assert measure(m.scale_rows, 10, X, S, Y) is None
    out = capsys.readouterr().out
    assert not Y.any()                          # nothing launched, nothing written
    # 300 rows: 9 full CTAs of 32 and one of 12; the load of X is 256 sectors a CTA
    assert "predicted for scale_rows (grid (10, 1, 1), 10 CTAs, 9 of them full; M = 300)" in out
    assert "5 | global sectors | 2304..2560 (256)" in out
    assert "7 | shared wavefronts | 720..800 (with 160 for the broadcast read of s) (80)" in out
    last = out.strip().splitlines()[-1]
    assert last.startswith("measured: nothing here. kernel 'scale_rows' cannot be profiled: the module runs on the "
                           "CPU backend") and "Traceback" not in out


@pytest.mark.parametrize("what,call,words", [
    ("full_ctas_negative", dict(full_ctas=-3), "full_ctas is -3; it must lie from 0"),
    ("full_ctas_past_the_grid", dict(full_ctas=11), "full_ctas is 11; it must lie from 0 to the launch's 10 CTAs"),
    ("full_ctas_text", dict(full_ctas="x"), "full_ctas (how many CTAs lie wholly inside the tensors) must be an int"),
    ("full_ctas_bool", dict(full_ctas=True), "must be an int, not bool"),
    ("unknown_view", dict(show=("nope",)), "unknown view 'nope' in show"),
])
def test_measure_refuses_bad_options_naming_them(what, call, words, capsys):
    """A count of full CTAs outside 0..CTAs printed a predicted range whose low end exceeded its
    high end (-360..360, 12000..360) and a string one an internal ValueError; an unknown view
    was ignored on the CPU (and failed only after the ncu run on a GPU)."""
    pytest.importorskip("IPython")
    from tilenb.notebook import measure
    m = tilenb.compile(T.SOURCE, backend="cpu")
    X = np.ones((300, 64), np.float32)
    with pytest.raises(tilenb.TileError) as e:
        measure(m.scale_rows, 10, X, X[:, :1].copy(), np.zeros_like(X), **call)
    assert words in e.value.message
    assert "predicted" not in capsys.readouterr().out


def test_measure_refuses_what_is_not_a_kernel():
    pytest.importorskip("IPython")
    from tilenb.notebook import measure
    m = tilenb.compile(T.SOURCE, backend="cpu")
    X = np.ones((40, 64), np.float32)
    for thing, name in ((m, "Module"), (print, "builtin_function_or_method")):
        with pytest.raises(tilenb.LaunchError) as e:
            measure(thing, 2, X, X[:, :1].copy(), np.zeros_like(X))
        assert "measure() takes a kernel" in e.value.message and name in e.value.message


def test_tileprofile_reports_a_failing_part_of_the_launch_as_that_part(capsys):
    """The launch's Python parts fail as themselves (an undefined name, 1/0), without the magic's
    frames, and `*args` / `**options` spread as in a launch (they raised SyntaxError and
    TypeError from inside the magic)."""
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell
    from tilenb.notebook.magic import CellError
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "tilenb")
    m = tilenb.compile(T.SOURCE, backend="cpu")
    X = np.ones((40, 64), np.float32)
    ip.user_ns.update(k=m.scale_rows, X=X, S=np.ones((40, 1), np.float32), Y=np.zeros_like(X),
                      xs=[X, np.ones((40, 1), np.float32), np.zeros_like(X)], opts={"full_ctas": 1})
    try:
        for line, words in (("k[2](X, Z, Y)", "evaluating 'Z' raised NameError"),
                            ("k[1 // 0](X, S, Y)", "evaluating '1 // 0' raised ZeroDivisionError"),
                            ("k[2](*X.shape)", None), ("k[2](X, S, Y, **xs)", "must be a dict of names"),
                            ("k[2](*3)", "*3 is not iterable")):
            with pytest.raises(tilenb.TileError) as e:
                ip.run_line_magic("tileprofile", line)
            if words is None:
                assert isinstance(e.value, tilenb.LaunchError)      # spread: 2 arguments of 3
            else:
                assert isinstance(e.value, CellError) and words in str(e.value) and line in str(e.value)
        capsys.readouterr()
        assert ip.run_line_magic("tileprofile", "k[2](*xs, **opts)") is None
        out = capsys.readouterr().out
        assert "2 CTAs, 1 of them full" in out and out.strip().splitlines()[-1].startswith("measured: nothing here.")
    finally:
        for name in ("k", "X", "S", "Y", "xs", "opts"):
            ip.user_ns.pop(name, None)


def test_measure_shows_the_profile_beside_the_prediction(monkeypatch, capsys):
    pytest.importorskip("IPython")
    from tilenb.notebook import measure
    m, prof = _profile()
    shown = []
    monkeypatch.setattr(m.scale_rows, "profile", lambda grid, *args, **tune: prof, raising=False)
    monkeypatch.setattr("IPython.display.display", lambda w, **kw: shown.append(w))
    X = np.zeros((320, 64), np.float32)
    assert measure(m.scale_rows, 10, X, X[:, :1].copy(), X.copy()) is prof
    out = capsys.readouterr().out
    assert "7 | shared wavefronts | 800 (with 160 for the broadcast read of s) | 800 | matches" in out
    assert [w._name for w in shown] == ["threadmap", "barriers", "timing"]
    assert "measured (Nsight Compute, whole launch)" in render.text("threadmap", shown[0].state())
