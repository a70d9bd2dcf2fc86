"""The repeat-launch fast path (`tilenb.runtime.gpu.cuda.run_cached`) against the full path it
stands in for, on the CPU with the stand-in for CuPy (tests/support/fake_cupy.py).

Two kernels are compiled from one text: one launches repeats from its cache, the other has no
cache, so every call takes the full path (every check, then `run_cuda`). Random sequences of
calls (hypothesis) go to both in lockstep, from a small pool of arguments so that signatures
repeat: CuPy-like arrays of two lengths and three dtypes, a strided view, a misaligned view,
a GPU object known only by `__cuda_array_interface__`, host arrays, scalars of many types
(-0.0, NaN, a string, values beyond f32), grids and variants (bools, floats, numpy integers,
lists, zeros) and in-place reshapes of an array between calls; most calls repeat the one before,
unchanged or with one part drawn anew, so that keys equal or nearly equal an entry's. Each call must do the same on
both: raise the same LaunchError, or launch the same variant with the same grid, block,
shared memory and packed arguments (a CuPy array passed as itself is the same argument as its
data pointer; a copy the full path makes of a host or misaligned array is any new pointer).
"""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from support import fake_cupy
from support.programs import AXPY as SRC
import tilenb
import tilenb.api
import tilenb.runtime.gpu.cuda as tc
from tilenb import TileError

# Values that equal one another under == (and hash alike) but that the checks treat differently
# (a bool, a float or a numpy scalar where an int is asked for; a zero's sign) are kept in
# groups, and a repeated call often swaps a value for another of its group.
SCALARS = [1.0, 1, True, np.float32(1.0), np.float64(1.0), 0.0, -0.0, np.float64(-0.0), 0, False, 2.5,
           np.float32(2.5), np.float16(2.5), math.nan, math.inf, 1e300, 2 ** 70, "1.0", None, [2.5]]
SCALAR_GROUPS = [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11, 12]]
GRIDS = ["@grid", 1, True, 1.0, np.int64(1), (1,), (True,), 4, np.int64(4), (4,), (4, 1), (4, 1, 1), 4.0,
         (np.int32(4), 1), (4, True), [4], 0, -1, (0,), 2 ** 31, ()]
GRID_GROUPS = [[1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12, 13, 14]]
VARIANTS = [None, {"TILE": 256}, {"TILE": 256.0}, {"TILE": np.int64(256)}, {"TILE": np.float32(256)},
            {"TILE": 512}, {"TILE": True}, {"TILE": 128}, {"X": 1}, "TILE=256", {}]
VARIANT_GROUPS = [[1, 2, 3, 4]]


@pytest.fixture
def cp(monkeypatch, tmp_path):
    with fake_cupy.installed(monkeypatch, tmp_path) as fake:
        yield fake


class _Gpu:
    """A GPU array known only by __cuda_array_interface__ (as a torch tensor is)."""

    def __init__(self, a):
        self.a = a

    @property
    def __cuda_array_interface__(self):
        return self.a.__cuda_array_interface__


def _pool(cp, rng):
    f32 = lambda n: rng.standard_normal(n).astype(np.float32)   # noqa: E731
    base = np.zeros(1001, np.float32)
    out = [cp.asarray(f32(1000)), cp.asarray(f32(1000)), cp.asarray(f32(1000)), cp.asarray(f32(2004)),
           cp.asarray(f32(2004)), cp.asarray(f32(1000).astype(np.float64)), cp.asarray(f32(1000).astype(np.float16)),
           cp.ndarray(np.zeros(2000, np.float32)[::2]), _Gpu(cp.asarray(f32(1000))), f32(1000), f32(2004)]
    mis = cp.ndarray(base[1:])
    if mis.data.ptr % 16:
        out.append(mis)
    return out


def _pointer(a):
    if isinstance(a, _Gpu):
        a = a.a
    return a.data.ptr if hasattr(a, "data") and hasattr(a.data, "ptr") else None


def _normal(value, known):
    """A packed launch argument as a comparable value: a data pointer of one of the pool's GPU
    arrays (passed as itself or as its pointer), 'copy' for any other pointer, or a scalar's
    type and bytes."""
    if hasattr(value, "data") and hasattr(value.data, "ptr"):
        return ("ptr", value.data.ptr)
    if isinstance(value, (int, np.uint64)) and int(value) in known:
        return ("ptr", int(value))
    if isinstance(value, np.uint64):
        return "copy"
    if isinstance(value, np.generic):
        return (type(value).__name__, np.asarray(value).tobytes())
    return (type(value).__name__, value)


def _outcome(cp, k, grid, args, variant, known):
    n = len(cp.launches)
    kw = {} if variant is None else {"variant": variant}
    try:
        if isinstance(grid, str):
            k(*args, **kw)
        else:
            k[grid](*args, **kw)
    except TileError as e:
        return ("error", type(e).__name__, str(e))
    assert len(cp.launches) > n, "a call that returned launched nothing"
    g, block, packed, shared = cp.launches[-1]
    run = k.last_run
    return ("ok", tuple(g), tuple(block), shared, tuple(_normal(v, known) for v in packed), dict(run.variant),
            tuple(run.grid))


STEPS = 30
TRIPLES = [[0, 1, 2], [3, 4, 3], [8, 0, 1], [1, 1, 8]]   # the pool's indices: 0-2 and 8 are length 1000, 3-4 2004


def _pick(rnd, i, groups, n):
    """Another value for index i: mostly one of its group where it has one, else any."""
    for g in groups:
        if i in g and rnd.random() < 0.75:
            return rnd.choice(g)
    return rnd.randrange(n)


def _next_call(rnd, last, plain=0.0):
    """A call: mostly the latest again, unchanged or with one part drawn anew (an array, or the
    scalar, grid or variant swapped for one of its group), so that keys equal or nearly equal
    an entry's; else a new call, mostly of arguments that launch; with probability `plain` a
    new call is a plain `k(*args)` (@grid, no variant: the calls the straight-line check takes)
    and a call repeats the latest unchanged more often."""
    if last is None or rnd.random() < 0.2:
        picks = list(rnd.choice(TRIPLES)) if rnd.random() < 0.7 else [rnd.randrange(12) for _ in range(3)]
        si = rnd.choice([0, 5, 6, 10]) if rnd.random() < 0.6 else rnd.randrange(len(SCALARS))
        gi = rnd.choice([0, 1, 7]) if rnd.random() < 0.6 else rnd.randrange(len(GRIDS))
        vi = rnd.choice([0, 1, 5]) if rnd.random() < 0.6 else rnd.randrange(len(VARIANTS))
        if rnd.random() < plain:
            gi, vi = 0, 0
        return picks, si, gi, vi
    picks, si, gi, vi = last
    if rnd.random() < plain / 2:                # plain: repeats more often (the hot entry's own calls)
        return picks, si, gi, vi
    part = rnd.randrange(6)
    if part == 0:
        picks = list(picks)
        picks[rnd.randrange(3)] = rnd.randrange(12)
    elif part == 1:
        si = _pick(rnd, si, SCALAR_GROUPS, len(SCALARS))
    elif part == 2:
        gi = _pick(rnd, gi, GRID_GROUPS, len(GRIDS))
    elif part == 3:
        vi = _pick(rnd, vi, VARIANT_GROUPS, len(VARIANTS))
    return picks, si, gi, vi                    # parts 4 and 5: the same call again


# The same kernel without the scalar: calls of CuPy arrays alone launch a repeat through the
# straight-line check of `Kernel.__call__` (`tc._straight`), which these tests run too.
SRC_ARRAYS = """
@autotune(TILE in [256, 512])
@launch(128)
@grid(cdiv(N, TILE))
kernel axpy(X: tensor<f32>[N], Y: tensor<f32>[N], Z: tensor<f32>[N]) {
  let b = ctx.block.x * TILE
  Z[b :+ TILE] = X[b :+ TILE] * 2.0 + Y[b :+ TILE]
}
"""


@pytest.mark.parametrize("src", [SRC, SRC_ARRAYS], ids=["with-scalar", "arrays-only"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rnd=st.randoms(use_true_random=False), seed=st.integers(0, 3))
def test_the_fast_path_launches_what_the_full_path_would_and_raises_its_errors(cp, src, rnd, seed):
    tilenb.api.clear_caches()
    fast = tilenb.compile(src, backend="cuda").axpy
    tilenb.api.clear_caches()
    slow = tilenb.compile(src, backend="cuda").axpy
    scalar = src is SRC
    assert fast._repeat is not slow._repeat
    slow._repeat = None                  # no cache: every call takes the full path
    pool = _pool(cp, np.random.default_rng(seed))
    known = {p for p in map(_pointer, pool) if p is not None}
    last = None
    for _ in range(STEPS):
        if rnd.random() < 0.1:           # the same array object, another shape (the cache must not care whose)
            a = pool[rnd.randrange(5)]
            a._host = a._host.reshape(2, -1) if a._host.ndim == 1 else a._host.reshape(-1)
            continue
        last = _next_call(rnd, last, plain=0.0 if scalar else 0.6)
        picks, si, gi, vi = last
        args = [pool[i % len(pool)] for i in picks] + ([SCALARS[si]] if scalar else [])
        grid, variant = GRIDS[gi], VARIANTS[vi]
        entries = len(fast._repeat)
        got = _outcome(cp, fast, grid, args, variant, known)
        want = _outcome(cp, slow, grid, args, variant, known)
        assert got == want, (last, got, want)
        if got[0] == "ok" and "launched from the cache" in fast.last_run.note:
            assert len(fast._repeat) == entries     # a repeat adds no entry
    assert slow._repeat is None
    assert slow._fast is None


def test_the_straight_line_check_launches_only_exact_repeats_of_its_entry(cp):
    """`Kernel.__call__`'s straight-line check (made for a hot entry of CuPy arrays alone): an
    exact repeat launches from it; an array of another shape, dtype or strides, a misaligned
    one, a host array, the wrong number of arguments, another device, debug on or TIME_REPEATS
    on make it step aside (False) without launching, and the call then does what the full path
    does: launch another entry, or raise its LaunchError."""
    k = tilenb.compile(SRC_ARRAYS, backend="cuda").axpy
    a, b = (cp.asarray(np.zeros(n, np.float32)) for n in (1000, 2004))
    k(a, a, a)
    assert k._fast is None           # a first launch: no hot entry yet
    k(a, a, a)
    f = k._fast
    assert f is not None and "launched from the cache" in k.last_run.note
    n = len(cp.launches)
    assert f(k, (a, a, a)) is True and len(cp.launches) == n + 1
    g, block, packed, shared = cp.launches[-1]
    assert packed[:3] == (a, a, a) and int(packed[3]) == 1000 and "launched from the cache" in k.last_run.note
    base = np.zeros(1001, np.float32)
    mis = cp.ndarray(base[1:])
    others = [(b, a, a), (a, a, cp.asarray(np.zeros(1000, np.float64))), (a, cp.ndarray(np.zeros(2000, np.float32)[::2]), a),
              (a, a, np.zeros(1000, np.float32)), (a, a), (a, a, a, a)]
    if mis.data.ptr % 16:
        others.append((a, mis, a))
    for args in others:
        n = len(cp.launches)
        assert f(k, args) is False and len(cp.launches) == n, args
    r = k._repeat[next(iter(k._repeat))]
    a2 = cp.asarray(np.zeros(1000, np.float32).reshape(2, 500))
    assert f(k, (a2, a, a)) is False
    with pytest.raises(tilenb.LaunchError, match="has dtype float64"):
        k(a, a, cp.asarray(np.zeros(1000, np.float64)))
    k(a, cp.ndarray(np.zeros(2000, np.float32)[::2]), a)      # a strided view: the full path (a copy)
    assert "launched from the cache" not in k.last_run.note
    k.module.debug = True
    assert f(k, (a, a, a)) is False
    k.module.debug = False
    cp.cuda.runtime.getDevice = lambda: 1
    tc._get_device = cp.cuda.runtime.getDevice
    assert f(k, (a, a, a)) is False
    cp.cuda.runtime.getDevice = lambda: 0
    tc._get_device = cp.cuda.runtime.getDevice
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tc, "TIME_REPEATS", True)
        assert f(k, (a, a, a)) is False
    assert f(k, (a, a, a)) is True and r.timed is False
    with pytest.MonkeyPatch.context() as mp:         # switched off: repeats go through run_cached alone
        mp.setattr(tc, "STRAIGHT", False)
        k._hot = k._fast = None
        k(a, a, a)
        assert k._fast is None and "launched from the cache" in k.last_run.note


def test_a_hot_entry_is_checked_in_full_and_other_entries_still_hit(cp):
    """The latest hit is compared first, then the cache: alternating signatures each keep
    their own entry, and a call that differs from the hot one in one dtype misses both."""
    k = tilenb.compile(SRC, backend="cuda").axpy
    a, b = (cp.asarray(np.zeros(n, np.float32)) for n in (1000, 2004))
    k(a, a, a, 1.0)
    k(b, b, b, 1.0)
    for _ in range(3):
        k(a, a, a, 1.0)
        assert "launched from the cache" in k.last_run.note and cp.launches[-1][2][4] == 1000
        k(b, b, b, 1.0)
        assert "launched from the cache" in k.last_run.note and cp.launches[-1][2][4] == 2004
    with pytest.raises(tilenb.LaunchError, match="has dtype float64"):
        k(b, b, cp.asarray(np.zeros(2004, np.float64)), 1.0)
    with pytest.raises(tilenb.LaunchError, match="the grid must be an int or a tuple"):
        k[True](b, b, b, 1.0)            # True == 1, but a bool grid is refused, never launched
    k[1](b, b, b, 1.0)
    with pytest.raises(tilenb.LaunchError, match="the grid must be an int or a tuple"):
        k[True](b, b, b, 1.0)            # ... even once the grid 1 has an entry
    with pytest.raises(tilenb.LaunchError, match="@autotune values are ints"):
        k(b, b, b, 1.0, variant={"TILE": 256.0})


@pytest.mark.gpu
def test_on_the_gpu_repeats_with_values_equal_to_an_entrys_give_the_full_paths_results_and_errors():
    """Real CuPy arrays and launches: calls whose grid, scalar or variant equals (==) an earlier
    call's but is another type or sign give the results and errors of a kernel without the cache."""
    cupy = pytest.importorskip("cupy")
    tilenb.api.clear_caches()
    fast = tilenb.compile(SRC, backend="cuda").axpy
    tilenb.api.clear_caches()
    slow = tilenb.compile(SRC, backend="cuda").axpy
    slow._repeat = None
    rng = np.random.default_rng(11)
    n = 1000
    x, y = (cupy.asarray(rng.standard_normal(n).astype(np.float32)) for _ in range(2))
    calls = [("@grid", 1.0, None), ("@grid", 1.0, None), ("@grid", True, None), ("@grid", np.float32(1.0), None),
             ("@grid", -0.0, None), ("@grid", 0.0, None), (4, 2.5, None), (4, 2.5, None), (True, 2.5, None),
             (np.int64(4), 2.5, None), (4.0, 2.5, None), ((4,), 2.5, None), ((4, 1), 2.5, None),
             ("@grid", 2.5, {"TILE": 512}), ("@grid", 2.5, {"TILE": 512}), ("@grid", 2.5, {"TILE": 512.0}),
             ("@grid", 2.5, {"TILE": np.int64(512)}), ("@grid", math.nan, None), ("@grid", 1e300, None)]
    hits = 0
    for grid, a, variant in calls:
        outs = []
        for k in (fast, slow):
            z = cupy.full(n, cupy.nan, dtype=cupy.float32)
            kw = {} if variant is None else {"variant": variant}
            try:
                (k if isinstance(grid, str) else k[grid])(x, y, z, a, **kw)
                cupy.cuda.Device().synchronize()
                outs.append(("ok", cupy.asnumpy(z).view(np.uint32).tobytes(), dict(k.last_run.variant)))
                hits += k is fast and "launched from the cache" in k.last_run.note
            except TileError as e:
                outs.append(("error", str(e)))
        assert outs[0] == outs[1], (grid, a, variant, outs[0][:1], outs[1][:1])
    assert hits == 3        # the second (@grid, 1.0), (4, 2.5) and (@grid, 2.5, TILE=512): the only exact repeats


@pytest.mark.gpu
def test_on_the_gpu_the_straight_line_check_launches_new_arrays_and_steps_aside_for_a_reshape():
    """Real CuPy arrays: repeats of `k(x, y, z)` with new arrays of the same signature launch from
    the straight-line check and give numpy's result (at a length not a multiple of TILE); an
    array reshaped in place between calls is refused as at a first call."""
    cupy = pytest.importorskip("cupy")
    tilenb.api.clear_caches()
    k = tilenb.compile(SRC_ARRAYS, backend="cuda").axpy
    rng = np.random.default_rng(5)
    n = 1000
    for i in range(4):
        x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
        dx, dy = cupy.asarray(x), cupy.asarray(y)
        dz = cupy.full(n, cupy.nan, dtype=cupy.float32)
        k(dx, dy, dz)
        np.testing.assert_allclose(cupy.asnumpy(dz), x * np.float32(2.0) + y, rtol=1e-6, atol=1e-6)
        assert (i == 0) == ("launched from the cache" not in k.last_run.note)
    assert k._fast is not None
    dz.shape = (2, 500)
    with pytest.raises(tilenb.LaunchError, match="'Z'"):
        k(dx, dy, dz)
