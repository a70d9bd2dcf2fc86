"""`tilenb.verify`: compare a kernel's output with a numpy reference, and say so.

Guarantees: `verify(actual, expected, what=...)`, when every element is within
`atol + rtol * |expected|` (NaN only where expected is NaN), prints one line
`verified against numpy: <what> (max abs error E)` and returns a `Verdict`: a float equal to the
maximum absolute error (it compares, converts and formats as that number, and `max_error` holds
it as a plain float) whose repr is the printed line. A notebook cell that ends in a `verify` call
shows the line once: IPython does not display the verdict again in the cell that printed it.
Otherwise `verify` raises `VerificationError` naming `what`, the number of mismatches, the first
mismatching index and both values. Shapes must match exactly. The tutorials' main job counts the
printed lines.
"""
from __future__ import annotations

import numpy as np

from .lang.diagnostics import TileError

MARK = "verified against numpy:"


class VerificationError(TileError):
    """A kernel's output differs from its numpy reference."""

    def format_one(self) -> str:
        return f"verification failed: {self.message}"


class Verdict(float):
    """What `verify` found: the float value is the largest absolute difference (as `max_error`, a
    plain float); `what` names the output checked. `repr` gives the one-line verdict; `str` and
    formatting give the number."""

    def __new__(cls, max_error: float, what: str):
        self = super().__new__(cls, max_error)
        self.what = what
        self._cell = _cell_now()
        return self

    @property
    def max_error(self) -> float:
        return float(self)

    def __repr__(self):
        return f"{MARK} {self.what} (max abs error {float(self):.3g})"

    __str__ = float.__repr__

    def __reduce__(self):
        return (Verdict, (float(self), self.what))

    def _ipython_display_(self):
        # the cell that called verify printed the verdict already: an Out[] of it would repeat it
        if self._cell is not None and self._cell == _cell_now():
            return
        from IPython.display import display
        display({"text/plain": repr(self)}, raw=True)


def _cell_now():
    """The running IPython cell's execution count (None outside IPython)."""
    import sys
    if "IPython" not in sys.modules:
        return None
    try:
        from IPython import get_ipython
        shell = get_ipython()
    except Exception:
        return None
    return getattr(shell, "execution_count", None) if shell is not None else None


def _host(a):
    if hasattr(a, "get") and callable(a.get) and not isinstance(a, np.ndarray):  # CuPy
        a = a.get()
    elif hasattr(a, "detach") and hasattr(a, "cpu"):  # torch
        a = a.detach().cpu().numpy()
    return np.asarray(a)


def verify(actual, expected, what: str = "output", rtol: float = 1e-5, atol: float = 1e-5) -> Verdict:
    """Check `actual` (numpy, CuPy or torch array) against `expected` (numpy), elementwise.

    rtol, atol: relative and absolute tolerance (compared in float64).
    Prints the verdict line and returns it as a `Verdict` (a float: the largest absolute
    difference). Raises VerificationError on a mismatch or a shape difference."""
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
    verdict = Verdict(err, what)
    print(repr(verdict))
    return verdict
