"""Tutorial 10's kernels, taken from the saved notebook, on each backend: the halo that loses its
edges (and the debug launch's EdgeWarning), the fill-and-window fix, the column statistics
combined across CTAs by tile atomics, the cluster softmax and the per-thread loop with break and
continue. Expected values come from numpy at sizes that are not multiples of the tiles; on the
GPU the CUDA backend must agree with them as the CPU executor does."""
import warnings
from pathlib import Path

import numpy as np
import pytest

import tilenb
from tilenb.puzzles import coverage

NB = Path(__file__).resolve().parents[2] / "notebooks" / "10_halos_and_reductions_across_ctas.ipynb"
BACKENDS = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def _module(backend):
    return tilenb.compile("\n".join(coverage.notebook_programs(NB)), backend=backend)


def _padded_avg(x):
    p = np.pad(x.astype(np.float64), 1)
    return (p[:-2] + p[1:-1] + p[2:]) / 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_halo_loses_its_edges_and_the_fill_keeps_them(backend):
    m = _module(backend)
    rng = np.random.default_rng(1)
    for n in (300, 1000, 1500):                       # one CTA smaller than a tile, ragged ends
        x = rng.standard_normal(n).astype(np.float32)
        y = np.full(n, np.nan, np.float32)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            m.avg3_naive(x, y, debug=True)
        assert list(np.flatnonzero(np.isnan(y))) == [0, n - 1]
        inner = slice(1, n - 1)
        np.testing.assert_allclose(y[inner], _padded_avg(x)[inner], rtol=1e-6, atol=1e-6)
        notes = [str(w.message) for w in caught if issubclass(w.category, tilenb.EdgeWarning)]
        assert len(notes) == 1 and f"Y[0] and Y[{n - 1}] not written" in notes[0]
        assert "`X[s - 1 :+ 514]`" in notes[0]
        y = np.full(n, np.nan, np.float32)
        m.avg3(x, y)
        np.testing.assert_allclose(y, _padded_avg(x), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_column_statistics_combine_across_ctas(backend):
    m = _module(backend)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5003, 132)).astype(np.float32)     # 79 x 3 CTAs, ragged both ways
    pos = np.zeros((1, 132), np.float32)
    top = np.full((1, 132), -np.inf, np.float32)
    m.column_stats(x, pos, top)
    np.testing.assert_allclose(pos[0], np.where(x > 0, x, 0).sum(axis=0, dtype=np.float64), rtol=1e-4, atol=1e-3)
    np.testing.assert_array_equal(top[0], x.max(axis=0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_cluster_softmax_and_the_early_exit_loop(backend):
    m = _module(backend)
    rng = np.random.default_rng(3)
    s = (3.0 * rng.standard_normal((5, 4096))).astype(np.float32)
    y = np.zeros_like(s)
    m.softmax_cluster(s, y)
    e = np.exp(s.astype(np.float64) - s.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-7)
    b = rng.standard_normal((130, 20)).astype(np.float32)
    f = np.zeros((130, 1), np.int32)
    m.first_over(b, f, 3.0)
    run = np.cumsum(np.where(b > 0, b, 0), axis=1, dtype=np.float32)
    past = run > 3.0
    want = np.where(past.any(axis=1), past.argmax(axis=1), -1)
    assert (want >= 0).any() and (want == -1).any()
    np.testing.assert_array_equal(f[:, 0], want)
