"""The views beside a Profile: measured columns in the thread map, barriers and timing views
(static text form), read from a saved Nsight Compute capture; and %tileprofile's refusals."""
import json

import numpy as np
import pytest

import tilenb
from tilenb.notebook import build, render
from tilenb.runtime.gpu.profile import build_profile

from support import ncu_fixture as T


def _profile():
    d = T.fixture_dir()
    job = json.loads((d / "job.json").read_text())
    prof = build_profile((d / "raw.csv").read_text(), (d / "source.csv").read_text(), job)
    m = tilenb.compile(T.SOURCE, backend="cpu")
    prof.predicted = prof.analysis(m.scale_rows)
    return m, prof


def test_views_carry_measured_figures():
    m, prof = _profile()
    views = {w._name: w for w in build.make_views(m.scale_rows, ("threads", "barriers", "timing"), profile=prof)}
    tm = render.text("threadmap", views["threadmap"].state())
    for cp in prof.predicted.copies:
        f = prof.lines[cp.line]
        assert f"{f.sectors} sectors in {f.requests} requests (predicted {cp.sectors * prof.ctas})" in tm
    flagged = [r for r in prof.compare(prof.predicted) if not r["ok"]]
    assert tm.count("DIFFERS") == len({r["line"] for r in flagged})
    bt = render.text("barriers", views["barriers"].state())
    for b in prof.barriers:
        assert f"{100.0 * b['share']:.1f}% of warp-stall samples" in bt
    tt = render.text("timing", views["timing"].state())
    assert f"DRAM {prof.dram_bytes} bytes" in tt
    # the minimal bytes of the launch: X and S read, Y written, at M rows
    M = prof.dims["M"]
    assert f"against {4 * (M * 64 + M + M * 64)} bytes" in tt


def test_views_without_profile_are_unchanged():
    m = tilenb.compile(T.SOURCE, backend="cpu")
    tm = render.text("threadmap", build.make_views(m.scale_rows, ("threads",))[0].state())
    assert "measured" not in tm


def test_tileprofile_magic_refuses_on_cpu():
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell
    ip = InteractiveShell.instance()    # the one shell the other magic tests share (one singleton a process)
    ip.run_line_magic("load_ext", "tilenb")
    m = tilenb.compile(T.SOURCE, backend="cpu")
    X = np.ones((40, 64), np.float32)
    ip.user_ns.update(k=m.scale_rows, X=X, S=np.ones((40, 1), np.float32), Y=np.zeros_like(X))
    from tilenb.notebook.magic import CellError
    try:
        with pytest.raises(CellError) as e:
            ip.run_line_magic("tileprofile", "k[2](X, S, Y)")
        assert "CPU backend" in str(e.value)
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
