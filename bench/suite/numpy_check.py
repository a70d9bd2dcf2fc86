"""The numpy check of the suite's kernels on the CPU, shared by `suite.py --cpu-check` (tilenb's
CPU executor) and `triton_peers.py --interpret` (Triton's interpreter): random inputs and a
relative-error verdict against a float64 reference, one printed line per check.

Guarantees:
- Needs numpy and ml_dtypes only (no torch, no Triton, no GPU, no tilenb), so triton_peers.py
  keeps running alone; both scripts find this module beside them (a script's folder is on
  sys.path).
- `Check(seed).arr(shape, dt)` draws standard-normal values in f32 and rounds them once to `dt`
  ("f32", "f16" or "bf16"): a given seed gives the same arrays in the same order.
- `check(label, got, ref, tol)` passes when ||got - ref|| / ||ref|| (2-norms in float64, a zero
  reference counted as 1e-300) is at most `tol` and `got` holds no NaN (outputs are filled with
  NaN beforehand, so an element never written fails); `failures` counts the checks that did not
  pass.
"""
from __future__ import annotations

import numpy as np


class Check:
    """Random inputs and relative-error checks; `prefix` and `width` lay out each printed line
    ("ok  " or "FAIL", prefix, the label padded to `width`, the error and the tolerance)."""

    def __init__(self, seed: int, prefix: str = "", width: int = 44):
        import ml_dtypes
        self.rng = np.random.default_rng(seed)
        self.prefix, self.width = prefix, width
        self.failures = 0
        self.dtypes = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}

    def arr(self, shape, dt: str = "f32") -> np.ndarray:
        """Standard-normal values of `shape`, drawn in f32 and rounded to `dt`."""
        return self.rng.standard_normal(shape).astype(np.float32).astype(self.dtypes[dt])

    def check(self, label: str, got, ref, tol: float) -> bool:
        """Whether `got` is within relative error `tol` of `ref` and has no NaN; prints one line."""
        g, r = np.asarray(got, np.float64), np.asarray(ref, np.float64)
        err = np.linalg.norm(g - r) / max(np.linalg.norm(r), 1e-300)
        ok = bool(err <= tol) and not np.isnan(g).any()
        self.failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {self.prefix}{label:{self.width}s} rel err {err:.2e} (tol {tol:.0e})",
              flush=True)
        return ok
