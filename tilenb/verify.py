"""`tilenb.verify`: compare a kernel's output with a numpy reference, and say so.

Guarantees: `verify(actual, expected, what=...)` returns the maximum absolute error (float) when
every element is within `atol + rtol * |expected|` (NaN only where expected is NaN) and prints
one line `verified against numpy: <what> (max abs error E)`; otherwise it raises
`VerificationError` naming `what`, the number of mismatches, the first mismatching index and
both values. Shapes must match exactly. The tutorials' main job counts those lines.
"""
from __future__ import annotations

import numpy as np

from .lang.diagnostics import TileError

MARK = "verified against numpy:"


class VerificationError(TileError):
    """A kernel's output differs from its numpy reference."""

    def format_one(self) -> str:
        return f"verification failed: {self.message}"


def _host(a):
    if hasattr(a, "get") and callable(a.get) and not isinstance(a, np.ndarray):  # CuPy
        a = a.get()
    elif hasattr(a, "detach") and hasattr(a, "cpu"):  # torch
        a = a.detach().cpu().numpy()
    return np.asarray(a)


def verify(actual, expected, what: str = "output", rtol: float = 1e-5, atol: float = 1e-5) -> float:
    """Check `actual` (numpy, CuPy or torch array) against `expected` (numpy), elementwise.

    rtol, atol: relative and absolute tolerance (compared in float64).
    Returns the largest absolute difference. Raises VerificationError on a mismatch."""
    a = _host(actual)
    e = _host(expected)
    if a.shape != e.shape:
        raise VerificationError(f"{what}: shape {a.shape} differs from the reference's {e.shape}")
    a64 = a.astype(np.float64)
    e64 = e.astype(np.float64)
    both_nan = np.isnan(a64) & np.isnan(e64)
    diff = np.where(both_nan, 0.0, np.abs(a64 - e64))
    bad = ~((diff <= atol + rtol * np.abs(e64)) | both_nan)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise VerificationError(
            f"{what}: {int(bad.sum())} of {bad.size} elements differ from numpy beyond rtol={rtol}, atol={atol}; "
            f"first at {idx}: got {a[idx].item()!r}, expected {e[idx].item()!r}")
    err = float(diff.max()) if diff.size else 0.0
    print(f"{MARK} {what} (max abs error {err:.3g})")
    return err
