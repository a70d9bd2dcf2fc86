"""The host side of a CUDA launch, on the CPU with a stand-in for CuPy (tests/support/fake_cupy.py): what
a repeat call launches (the new arrays, the packed scalars, the dims), what makes a call take the
full path again, a repeat queued without a synchronize and its RunReport built only when
`last_run` is read (timed with events only when TIME_REPEATS asks), and a re-compiled identical
text launching from the first compile's cache. One GPU test (marker `gpu`, sm_90): repeats of a
kernel with tensor maps and two scalars give numpy's result with new arrays."""
import numpy as np
import pytest

from support import fake_cupy
from support.programs import AXPY as SRC
import tilenb
import tilenb.api
import tilenb.runtime.gpu.cuda as tc
from tilenb import LaunchError


@pytest.fixture
def cp(monkeypatch, tmp_path):
    with fake_cupy.installed(monkeypatch, tmp_path) as fake:
        yield fake


def _arrays(cp, n, k=3, seed=0):
    rng = np.random.default_rng(seed)
    return [cp.asarray(rng.standard_normal(n).astype(np.float32)) for _ in range(k)]


def _ptrs(args):
    return [a.data.ptr if hasattr(a, "data") else int(a) for a in args[:3]]


def test_a_repeat_launches_the_new_arrays_with_the_packed_scalar_and_dims(cp):
    k = tilenb.compile(SRC, backend="cuda").axpy
    x, y, z = _arrays(cp, 1000)
    k(x, y, z, 2.5)
    first = len(cp.launches)            # autotune: warm-up and timed runs of both variants, then the run
    assert first > 2 and "launched from the cache" not in k.last_run.note
    grid, block, args, shared = cp.launches[-1]
    x2, y2, z2 = _arrays(cp, 1000, seed=1)
    k(x2, y2, z2, 2.5)
    assert len(cp.launches) == first + 1
    grid2, block2, args2, shared2 = cp.launches[-1]
    assert (grid2, block2, shared2) == (tuple(grid), tuple(block), shared)
    assert _ptrs(args2) == [x2.data.ptr, y2.data.ptr, z2.data.ptr]
    assert type(args2[3]) is np.float32 and args2[3] == np.float32(2.5)
    assert type(args2[4]) is np.int64 and args2[4] == 1000        # the runtime dim N
    assert len(args2) == len(args)
    assert "launched from the cache" in k.last_run.note
    assert k.last_run.grid == tuple(grid)


def test_anything_the_checks_read_takes_the_full_path(cp):
    k = tilenb.compile(SRC, backend="cuda").axpy
    x, y, z = _arrays(cp, 1000)
    k(x, y, z, 1.0)
    n_entries = len(k._repeat)
    k(x, y, z, 1.0)
    assert len(k._repeat) == n_entries                  # a repeat adds nothing
    k(x, y, z, 3.0)                                     # another scalar value: checked again, kept too
    k(x, y, z, -0.0)
    k(x, y, z, 0.0)                                     # 0.0 == -0.0, but the sign is part of the key
    assert cp.launches[-1][2][3] == 0.0 and not np.signbit(cp.launches[-1][2][3])
    assert np.signbit(cp.launches[-2][2][3])
    k[8](x, y, z, 1.0)                                  # another grid
    assert cp.launches[-1][0] == (8, 1, 1)
    assert len(k._repeat) == n_entries + 4
    with pytest.raises(LaunchError):                    # a length that disagrees: checked, never cached
        k(x, cp.asarray(np.zeros(1004, np.float32)), z, 1.0)
    with pytest.raises(LaunchError):                    # a dtype the kernel does not take
        k(x.astype(np.float64), y, z, 1.0)
    with pytest.raises(LaunchError):                    # a row length that is not a multiple of 4
        w = cp.asarray(np.zeros(1001, np.float32))
        k(w, w, w, 1.0)
    with pytest.raises(LaunchError):                    # a scalar that does not convert
        k(x, y, z, "1.0")
    with pytest.raises(LaunchError):                    # host arrays are checked (and copied) every time
        k(x, y, np.zeros(1000, np.float64), 1.0)
    x._host = x._host.reshape(10, 100)                  # the same array object, reshaped in place
    with pytest.raises(LaunchError):
        k(x, y, z, 1.0)


def test_a_repeat_is_queued_without_a_synchronize_or_events_and_reports_when_read(cp):
    k = tilenb.compile(SRC, backend="cuda").axpy
    x, y, z = _arrays(cp, 1000)
    k(x, y, z, 1.0)
    full = k.last_run
    first_ms = full.extra["kernel_ms"]
    cp.calls.clear()
    for _ in range(5):
        k(x, y, z, 1.0)
    assert cp.calls["launch"] == 5
    assert not any(cp.calls[c] for c in ("Event", "Event.record", "Event.synchronize", "deviceSynchronize",
                                         "Device.synchronize", "get_elapsed_time", "getDeviceProperties"))
    run = k.last_run
    assert run is k.last_run                            # built once
    assert "launched from the cache" in run.note and "not timed" in run.note
    assert run.extra["kernel_ms"] == first_ms and run.seconds == pytest.approx(first_ms / 1e3)
    assert run.variant == full.variant and run.backend == "cuda" and not run.debug
    assert run.ctas == run.grid[0] * run.grid[1] * run.grid[2]
    k.last_run = None                                   # a backend (or a user) sets it
    assert k.last_run is None
    k(x, y, z, 1.0)
    assert k.last_run is not None and "launched from the cache" in k.last_run.note


def test_timed_repeats_record_events_and_wait_for_them_only_when_read(cp, monkeypatch):
    monkeypatch.setattr(tc, "TIME_REPEATS", True)
    k = tilenb.compile(SRC, backend="cuda").axpy
    x, y, z = _arrays(cp, 1000)
    k(x, y, z, 1.0)
    cp.calls.clear()
    for _ in range(5):
        k(x, y, z, 1.0)
    assert cp.calls["launch"] == 5 and cp.calls["Event.record"] == 10 and cp.calls["Event"] == 0
    assert cp.calls["Event.synchronize"] == 0 and cp.calls["get_elapsed_time"] == 0
    run = k.last_run
    assert cp.calls["Event.synchronize"] == 1 and cp.calls["get_elapsed_time"] == 1
    assert run.extra["kernel_ms"] == 0.0125 and run.seconds == pytest.approx(0.0125e-3)
    assert "not timed" not in run.note


def test_a_recompiled_text_launches_from_the_first_compiles_cache(cp):
    x, y, z = _arrays(cp, 1000)
    tilenb.compile(SRC, backend="cuda").axpy(x, y, z, 1.0)
    n = len(cp.launches)
    k2 = tilenb.compile(SRC, backend="cuda").axpy       # a re-run cell: a new Module, same text
    k2(x, y, z, 1.0)
    assert len(cp.launches) == n + 1                    # no autotuning, no checks: one launch
    assert "launched from the cache" in k2.last_run.note
    k3 = tilenb.compile(SRC + "\n", backend="cuda").axpy   # another text: its own full launch
    k3(x, y, z, 1.0)
    assert "launched from the cache" not in k3.last_run.note
    tilenb.api.clear_caches()
    k4 = tilenb.compile(SRC, backend="cuda").axpy
    k4(x, y, z, 1.0)
    assert "launched from the cache" not in k4.last_run.note


def test_debug_keywords_and_host_arrays(cp):
    x, y, z = _arrays(cp, 1000)
    kd = tilenb.compile(SRC, backend="cuda", debug=True).axpy
    kd(x, y, z, 1.0)
    kd(x, y, z, 1.0)
    assert "launched from the cache" not in kd.last_run.note and not kd._repeat
    k = tilenb.compile(SRC, backend="cuda").axpy
    k(x, y, z, 1.0, variant={"TILE": 512})              # keywords: the launch() path, cached there too
    k(x, y, z, 1.0, variant={"TILE": 512})
    assert "launched from the cache" in k.last_run.note and k.last_run.variant == {"TILE": 512}
    assert cp.launches[-1][0] == (2, 1, 1)
    k(x, y, z, 1.0, variant={"TILE": 256})
    assert k.last_run.variant == {"TILE": 256} and "launched from the cache" not in k.last_run.note
    h = [np.zeros(1000, np.float32) for _ in range(3)]
    k(*h, 1.0)
    k(*h, 1.0)                                          # host arrays: copied each time, never cached
    assert "launched from the cache" not in k.last_run.note


def test_a_misaligned_array_goes_through_an_aligned_copy_every_time(cp):
    k = tilenb.compile(SRC, backend="cuda").axpy
    x, y, z = _arrays(cp, 1000)
    base = np.zeros(1001, np.float32)
    off = cp.ndarray(base[1:])                          # 4 bytes past a 16-byte boundary (numpy aligns to 16+)
    if off.data.ptr % 16 == 0:
        pytest.skip("numpy's allocation is not 16-byte aligned here")
    k(x, y, off, 1.0)
    k(x, y, off, 1.0)
    assert "launched from the cache" not in k.last_run.note
    assert cp.launches[-1][2][2] != off.data.ptr        # the kernel wrote an aligned copy


def test_a_new_shape_or_dtype_on_the_fast_path_is_checked_and_launched_with_its_own_dims(cp):
    k = tilenb.compile(SRC, backend="cuda").axpy
    x, y, z = _arrays(cp, 1000)
    k(x, y, z, 2.5)
    k(x, y, z, 2.5)
    assert "launched from the cache" in k.last_run.note
    x2, y2, z2 = _arrays(cp, 2004)                      # another length: the full path, autotuned again
    k(x2, y2, z2, 2.5)
    assert "launched from the cache" not in k.last_run.note
    assert cp.launches[-1][2][4] == 2004 and cp.launches[-1][0] == k.last_run.grid
    k(x2, y2, z2, 2.5)                                  # ... and then its own cache entry
    assert "launched from the cache" in k.last_run.note and cp.launches[-1][2][4] == 2004
    k(x, y, z, 2.5)                                     # the first entry is still there
    assert "launched from the cache" in k.last_run.note and cp.launches[-1][2][4] == 1000
    with pytest.raises(LaunchError, match=r"argument 'Y' \(tensor<f32>\[N\]\) has dtype float64"):
        k(x, y.astype(np.float64), z, 2.5)
    with pytest.raises(LaunchError, match=r"dimension N is 1000 in 'X' \(dimension 0\) but 2004 in 'Z'"):
        k(x, y, z2, 2.5)
    with pytest.raises(LaunchError, match=r"takes 4 argument\(s\) \(X, Y, Z, a\); got 3"):
        k(x, y, z)
    with pytest.raises(LaunchError, match=r"argument 'a' \(f32\) must be a number"):
        k(x, y, z, [2.5])
    strided = cp.ndarray(np.zeros(2000, np.float32)[::2])   # the same shape and dtype, other strides
    assert strided.shape == z.shape and strided.strides != z.strides
    k(x, y, strided, 2.5)       # never the contiguous array's entry (the stand-in's interface reports
    assert "launched from the cache" not in k.last_run.note     # no strides, so the checks pass it)


def test_gpu_arrays_that_are_not_cupy_arrays_pass_their_pointers_in_argument_order(cp):
    class Gpu:
        """A GPU array known only by __cuda_array_interface__ (as a torch tensor is)."""
        def __init__(self, a):
            self.a = a
            self.__cuda_array_interface__ = a.__cuda_array_interface__

    k = tilenb.compile(SRC, backend="cuda").axpy
    x, y, z = _arrays(cp, 1000)
    k(Gpu(x), y, Gpu(z), -1.5)
    k(Gpu(x), y, Gpu(z), -1.5)
    assert "launched from the cache" in k.last_run.note
    x2, y2, z2 = _arrays(cp, 1000, seed=3)
    k(Gpu(x2), y2, Gpu(z2), -1.5)
    args = cp.launches[-1][2]
    assert "launched from the cache" in k.last_run.note
    assert args[0] == x2.data.ptr and args[1] is y2 and args[2] == z2.data.ptr
    assert args[3] == np.float32(-1.5) and args[4] == 1000
    k(x2, y2, z2, -1.5)                                 # CuPy arrays where the key had others: the full path
    assert "launched from the cache" not in k.last_run.note
    assert cp.launches[-1][2][0] == x2.data.ptr


def test_a_repeat_calls_the_devices_function_with_positional_arguments(cp, monkeypatch):
    """CuPy's RawModule.get_function gives a RawKernel, whose call looks up the Function of the
    current device and passes keywords on: a cache entry keeps that Function and calls it."""
    fn_type = type(cp.RawModule(path="x").get_function("f"))
    direct = []

    def kernel(self):                                   # what RawKernel.kernel gives: the device's Function
        return lambda grid, block, args, shared_mem=0: direct.append((grid, block, args, shared_mem))
    monkeypatch.setattr(fn_type, "kernel", property(kernel), raising=False)
    k = tilenb.compile(SRC, backend="cuda").axpy
    x, y, z = _arrays(cp, 1000)
    k(x, y, z, 1.0)
    n = len(cp.launches)
    k(x, y, z, 1.0)
    assert len(cp.launches) == n and len(direct) == 1   # not through the RawKernel-like call
    grid, block, args, shared = direct[0]
    assert grid == tuple(k.last_run.grid) and block == (128, 1, 1) and shared == 0
    assert args[:3] == (x, y, z) and args[3] == np.float32(1.0) and args[4] == 1000


def test_scalars_and_dims_are_packed_once_as_cupy_would_where_cupy_can(cp, monkeypatch):
    k = tilenb.compile(SRC, backend="cuda").axpy
    x, y, z = _arrays(cp, 1000)
    k(x, y, z, 2.5)
    k(x, y, z, 2.5)
    args = cp.launches[-1][2]                           # the stand-in: numpy scalars, which CuPy packs itself
    assert type(args[3]) is np.float32 and type(args[4]) is np.int64
    cupy = pytest.importorskip("cupy")
    from cupy.cuda.function import CPointer
    monkeypatch.setattr(tc, "_CP", cupy)
    tc._bind_cupy()                                     # the real CuPy (no device needed to bind)
    for v in (np.float32(-2.5), np.uint16(0x3C00), np.int64(1000), np.int32(-7)):
        p = tc._prepack(v)                              # what CuPy's launch makes of v, made once
        assert isinstance(p, CPointer) and p.dtype == v.dtype and p.value == v


GEMM_S = """
@autotune(TM in [128], TN in [128], TK in [64], NT in [256])
@launch(NT)
@grid(cdiv(M, TM), cdiv(N, TN))
kernel gemm_s(A: tensor<f16>[M, K], B: tensor<f16>[N, K], Bias: tensor<f32>[M, N], C: tensor<f32>[M, N],
              K0: i32, s: f32) {
  var acc: tile<f32>[TM, TN] = Bias[ctx.block.x * TM :+ TM, ctx.block.y * TN :+ TN] * 2.0
  for kt in range(K0, K, TK) {
    var a = A[ctx.block.x * TM :+ TM, kt :+ TK]
    var b = B[ctx.block.y * TN :+ TN, kt :+ TK]
    acc += dot_t(a, b)
  }
  C[ctx.block.x * TM :+ TM, ctx.block.y * TN :+ TN] = acc * s
}
"""


@pytest.mark.gpu
def test_on_the_gpu_repeats_with_tensor_maps_and_scalars_give_numpys_result():
    cupy = pytest.importorskip("cupy")
    if cupy.cuda.Device().compute_capability != "90":
        pytest.skip("tensor maps (the sm_90 GEMM lowering) need compute capability 9.0")
    k = tilenb.compile(GEMM_S, backend="cuda").gemm_s
    M, N, K = 190, 140, 200                             # rows of 400 bytes: operands through tensor maps
    rng = np.random.default_rng(5)
    for i, (k0, s) in enumerate([(8, 0.5), (8, 0.5), (8, 0.5), (0, -1.25), (0, -1.25)]):
        a = rng.standard_normal((M, K)).astype(np.float16)
        b = rng.standard_normal((N, K)).astype(np.float16)
        bias = rng.standard_normal((M, N)).astype(np.float32)
        c = cupy.full((M, N), cupy.nan, dtype=cupy.float32)
        k(cupy.asarray(a), cupy.asarray(b), cupy.asarray(bias), c, k0, s)
        want = s * (2.0 * bias.astype(np.float64) + a[:, k0:].astype(np.float64) @ b[:, k0:].T.astype(np.float64))
        got = cupy.asnumpy(c)
        assert np.abs(got - want).max() / np.abs(want).max() < 2e-3, (i, k0, s)
        assert ("launched from the cache" in k.last_run.note) == (i in (1, 2, 4)), i
    assert any(r.tmaps for r in k._repeat.values())


@pytest.mark.parametrize("read_first", [True, False])
def test_the_first_launch_s_bytes_and_flops_are_computed_when_its_report_is_read(cp, read_first):
    """The full launch leaves its RunReport to be completed when `last_run` is read: the bytes,
    FLOPs and dims then are launch_traffic's for the launch as it was (numbers computed here by
    hand: three f32 tensors of 1000, X and Y read, Z written), whether the first report is read
    before the repeats or never; the pending report holds none of the arguments."""
    import gc
    k = tilenb.compile(SRC, backend="cuda").axpy
    x, y, z = _arrays(cp, 1000)
    k(x, y, z, 2.5)
    pending = k._pending
    assert pending is not None and not any(r is x for r in gc.get_referents(*gc.get_referents(pending)))
    want = {"bytes": 3 * 1000 * 4, "flops": 0, "dims": {"N": 1000}}
    if read_first:
        first = k.last_run
        assert {n: first.extra[n] for n in want} == want and "launched from the cache" not in first.note
    x2, y2, z2 = _arrays(cp, 1000, seed=1)
    k(x2, y2, z2, 2.5)
    rep = k.last_run
    assert "launched from the cache" in rep.note and {n: rep.extra[n] for n in want} == want
