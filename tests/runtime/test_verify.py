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
