"""tilenb.verify passes close arrays and names the first mismatch."""
import numpy as np
import pytest

import tilenb


def test_verify_passes_within_tolerance_and_reports_error(capsys):
    a = np.array([1.0, 2.0, np.nan], dtype=np.float32)
    err = tilenb.verify(a + np.float32(1e-7), a, what="row sums")
    assert 0 < err < 1e-6
    assert "verified against numpy: row sums" in capsys.readouterr().out


def test_verify_names_first_mismatch():
    with pytest.raises(tilenb.VerificationError) as ei:
        tilenb.verify(np.array([[1.0, 2.0], [3.0, 4.5]]), np.array([[1.0, 2.0], [3.0, 4.0]]), what="Y")
    msg = str(ei.value)
    assert "Y: 1 of 4 elements" in msg and "(1, 1)" in msg and "4.5" in msg


def test_verify_rejects_shape_mismatch():
    with pytest.raises(tilenb.VerificationError, match="shape"):
        tilenb.verify(np.zeros(3), np.zeros(4))


def test_verdict_is_the_max_error_as_a_float_and_reprs_as_the_line(capsys):
    a = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    v = tilenb.verify(a + np.array([0.0, 2e-6, -5e-6], np.float32), a, what="Y", rtol=0, atol=1e-5)
    want = float(np.abs((a + np.array([0.0, 2e-6, -5e-6], np.float32)).astype(np.float64) - a).max())
    assert float(v) == want and v.max_error == want and type(v.max_error) is float
    assert v == want and v < 1e-5 and v > 0 and v + 1.0 == want + 1.0
    line = capsys.readouterr().out.strip()
    assert repr(v) == line == f"verified against numpy: Y (max abs error {want:.3g})"
    assert str(v) == repr(want) and f"{v:.2e}" == f"{want:.2e}" and f"{v}" == str(want)


def test_a_cell_ending_in_verify_shows_the_verdict_once(capsys):
    IPython = pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    shown = []
    shell.display_pub.publish = lambda data, metadata=None, **kw: shown.append(data)
    try:
        shell.user_ns.update(tilenb=tilenb, np=np)
        shell.run_cell("v = tilenb.verify(np.zeros(3), np.zeros(3), what='zeros')\n"
                       "fmt = get_ipython().display_formatter.format(v)[0]\nv", store_history=True)
        first = capsys.readouterr().out
        fmt = shell.user_ns["fmt"]
        shell.run_cell("v", store_history=True)          # a later cell asks for it: shown
        later = capsys.readouterr().out
    finally:
        InteractiveShell.clear_instance()
    # in the cell that printed it, the verdict has nothing to display: Jupyter sends no Out[] at all
    assert fmt == {} and first.count("verified against numpy: zeros (max abs error 0)") == 1
    assert "0.0" not in first
    assert [d.get("text/plain") for d in shown] == ["verified against numpy: zeros (max abs error 0)"]
    assert "0.0" not in later
