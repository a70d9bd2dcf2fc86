"""numpy references for windows (spec section 6), shared by the tests of several stages.

- `window(a, starts, lens, view=None)`: what a window read gives, its values (0 outside) and its
  valid mask; with `view=(origin, extent)` the window is relative to a view of `a` and is valid
  only inside both the view and `a`.
- `store(dst, starts, val, ok)`: a window store into a copy of `dst`: the elements of `val` that
  are valid (`ok`) and land inside `dst`.
- `first_run(valid)`: where `flat()` of a tile is valid: the run of the row-major flattened mask
  from its first True up to the next False.
These compute expected values independently of tilenb; shapes and starts are any integers
(negative starts and windows past an edge included).
"""
from __future__ import annotations

import numpy as np


def window(a, starts, lens, view=None):
    """(values of a's dtype shaped `lens`, bool mask): a[starts :+ lens], 0 and invalid outside
    `a` (and outside the view `view = (origin, extent)` when given, `starts` relative to it)."""
    org, ext = view if view is not None else ((0,) * len(lens), a.shape)
    val = np.zeros(lens, a.dtype)
    ok = np.zeros(lens, bool)
    for idx in np.ndindex(*lens):
        rel = tuple(s + k for s, k in zip(starts, idx))
        src = tuple(o + c for o, c in zip(org, rel))
        if all(0 <= c < n for c, n in zip(rel, ext)) and all(0 <= c < n for c, n in zip(src, a.shape)):
            val[idx], ok[idx] = a[src], True
    return val, ok


def store(dst, starts, val, ok=None):
    """A copy of `dst` with dst[starts :+ val.shape] = val where `ok` (default: everywhere) and
    inside `dst` (any broadcast already applied to `val` and `ok`)."""
    out = dst.copy()
    for idx in np.ndindex(*val.shape):
        d = tuple(s + k for s, k in zip(starts, idx))
        if (ok is None or ok[idx]) and all(0 <= c < n for c, n in zip(d, dst.shape)):
            out[d] = val[idx]
    return out


def first_run(valid) -> np.ndarray:
    """The flat bool mask (valid.size elements) that is True from the first True of the
    row-major flattened `valid` up to (not including) the next False; all False if none."""
    m = np.asarray(valid, bool).ravel()
    run = np.zeros(m.size, bool)
    if m.any():
        a = int(np.argmax(m))
        b = a
        while b < m.size and m[b]:
            b += 1
        run[a:b] = True
    return run
