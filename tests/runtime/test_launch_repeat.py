"""Repeat launches on the CUDA backend (tilenb.runtime.gpu.cuda.run_cached): a call that
repeats an earlier one (same shapes, dtypes, scalars, grid) launches from the cache with new data
pointers; a call that differs in anything the launch checks look at takes the full path and is
checked again. GPU tests (marker `gpu`); without a GPU they skip."""
import numpy as np
import pytest

from support.programs import AXPY as SRC
import tilenb
from tilenb import LaunchError


@pytest.mark.gpu
def test_repeat_calls_use_new_pointers_and_values_and_new_shapes_are_checked():
    cp = pytest.importorskip("cupy")
    k = tilenb.compile(SRC, backend="cuda").axpy
    rng = np.random.default_rng(7)
    a_of = {}                                  # scalar values are part of the key: one per shape
    for n in (1000, 1000, 1000, 2004, 2004):   # repeats, then a new shape, then its repeat
        x, y = (cp.asarray(rng.standard_normal(n).astype(np.float32)) for _ in range(2))
        z = cp.full(n, cp.nan, dtype=cp.float32)
        a = a_of.setdefault(n, float(rng.standard_normal()))
        k(x, y, z, a)
        np.testing.assert_allclose(cp.asnumpy(z), cp.asnumpy(x) * np.float32(a) + cp.asnumpy(y), rtol=1e-6, atol=1e-6)
    assert "launched from the cache" in k.last_run.note
    x = cp.zeros(1000, dtype=cp.float32)
    with pytest.raises(LaunchError):        # a length that disagrees: checked, never cached
        k(x, cp.zeros(1004, dtype=cp.float32), cp.zeros(1000, dtype=cp.float32), 1.0)
    with pytest.raises(LaunchError):        # a dtype the kernel does not take
        k(x.astype(cp.float64), x, x, 1.0)
    with pytest.raises(LaunchError):        # a row length that is not a multiple of 4
        y = cp.zeros(1001, dtype=cp.float32)
        k(y, y, y, 1.0)
