"""Every launch check, one test each: the LaunchError names the parameter and the dimension at
fault, and no output has been touched. Also: argument adapters, grids, variants, last_run.
"""
import textwrap

import ml_dtypes
import numpy as np
import pytest

import tilenb
from tilenb import LaunchError, TileError
from tilenb.runtime.checks import Bound, bind_arguments, describe_array, prepare

SRC = textwrap.dedent("""
@autotune(D in [16, 32])
@launch(64)
@grid(cdiv(M, 4))
kernel k(X: tensor<f32>[M, D], S: tensor<f16>[M, 1], Y: tensor<f32>[M, D], W: tensor<i8>[4, N], a: f32, n: i32) {
  let r = ctx.block.x * 4
  Y[r :+ 4, :] = X[r :+ 4, :] * f32(S[r :+ 4, :]) * a + f32(n)
  W[0 :+ 4, 0 :+ 4] = i8(n)
}

@launch(32)
kernel nogrid(X: tensor<f32>[N]) {
  X[ctx.thread] = 1.0
}

kernel flag(X: tensor<f32>[4], b: bool, u: u8) {
  if b { X[0] = f32(i32(u)) }
}
""")


@pytest.fixture(scope="module")
def mod():
    return tilenb.compile(SRC, backend="cpu")


def args(M=12, D=16, N=8):
    X = np.ones((M, D), np.float32)
    S = np.ones((M, 1), np.float16)
    Y = np.full((M, D), -1.0, np.float32)
    W = np.zeros((4, N), np.int8)
    return [X, S, Y, W, 2.0, 3]


def refused(mod, a, *phrases, grid=None, **kw):
    outs = [x.copy() for x in a if isinstance(x, np.ndarray)]
    k = mod.k if grid is None else mod.k[grid]
    with pytest.raises(LaunchError) as info:
        k(*a, **kw)
    msg = str(info.value)
    for p in phrases:
        assert p in msg, msg
    for before, x in zip(outs, [x for x in a if isinstance(x, np.ndarray)]):
        np.testing.assert_array_equal(before, x)       # nothing written
    return msg


def test_a_good_launch_runs_and_reports(mod):
    a = args()
    mod.k(*a)
    np.testing.assert_array_equal(a[2], 2.0 * 1 + 3)
    np.testing.assert_array_equal(a[3][:, :4], 3)
    run = mod.k.last_run
    assert run.backend == "cpu" and run.variant == {"D": 16} and run.grid == (3, 1, 1)
    assert "first @autotune variant that fits" in run.note and run.threads == 64
    a = args(D=32)                                   # only D = 32 fits: chosen without being named
    mod.k(*a)
    assert mod.k.last_run.variant == {"D": 32}
    np.testing.assert_array_equal(a[2], 5.0)


def test_argument_count(mod):
    refused(mod, args()[:5], "kernel 'k' takes 6 argument(s) (X, S, Y, W, a, n); got 5")


def test_tensor_argument_not_an_array(mod):
    a = args()
    a[0] = [[1.0] * 16] * 12
    refused(mod, a, "argument 'X' (tensor<f32>[M, D]) must be an array, not list")


def test_dtype(mod):
    a = args()
    a[1] = a[1].astype(np.float32)
    refused(mod, a, "argument 'S' (tensor<f16>[M, 1]) has dtype float32 (f32); it needs float16 (f16)")


def test_rank(mod):
    a = args()
    a[0] = np.ones((12, 16, 1), np.float32)
    refused(mod, a, "argument 'X' (tensor<f32>[M, D]) has 3 dimension(s) [12, 16, 1]; it needs 2")


def test_literal_dimension(mod):
    a = args()
    a[3] = np.zeros((5, 8), np.int8)
    refused(mod, a, "dimension 0 of 'W' (tensor<i8>[4, N]) is 5; it must be 4")


def test_autotune_dimension_named_in_the_message(mod):
    a = args(D=24)
    # every variant refuses the same extent: the message lists what each takes, not the first's alone
    refused(mod, a, "dimension 1 of 'X' (tensor<f32>[M, D]) is 24; the @autotune variants take 16 or 32 (D in [16, 32])")
    refused(mod, a, "it must be 32 (D = 32 in this variant)", variant={"D": 32})


def test_one_extent_per_symbolic_dimension_names_both_parameters(mod):
    a = args()
    a[1] = np.ones((16, 1), np.float16)
    refused(mod, a, "dimension M is 12 in 'X' (dimension 0) but 16 in 'S' (dimension 0)")


def test_runtime_row_length_multiple_of_four(mod):
    a = args(N=6)
    refused(mod, a, "dimension N = 6 (dimension 1 of 'W', its row length) is not a multiple of 4")


def test_leading_runtime_extent_need_not_be_multiple_of_four(mod):
    """Only row lengths set the pitch vector accesses need; M (rows) may be odd."""
    a = args(M=13)
    mod.k[1](*a)


def test_c_contiguous(mod):
    a = args()
    a[2] = np.asfortranarray(np.ones((12, 16), np.float32))
    refused(mod, a, "argument 'Y' (tensor<f32>[M, D]) is not C-contiguous")
    a = args()
    a[0] = np.ones((12, 32), np.float32)[:, ::2]
    refused(mod, a, "argument 'X'", "not C-contiguous")


def test_scalar_not_a_number(mod):
    a = args()
    a[4] = "2.0"
    refused(mod, a, "argument 'a' (f32) must be a number, not str")


def test_scalar_int_must_be_integral_and_fit(mod):
    a = args()
    a[5] = 2.5
    refused(mod, a, "argument 'n' (i32) must be an integer, not 2.5")
    a[5] = 2 ** 31
    refused(mod, a, "argument 'n' = 2147483648 does not fit in i32")
    a[5] = np.int64(7)                     # a numpy integer that fits is fine
    mod.k(*a)


def test_bool_and_unsigned_scalars(mod):
    X = np.zeros(4, np.float32)
    with pytest.raises(LaunchError, match="argument 'b' \\(bool\\) must be True or False, not 1"):
        mod.flag[1](X, 1, 3)
    with pytest.raises(LaunchError, match="argument 'u' = -1 does not fit in u8"):
        mod.flag[1](X, True, -1)
    assert X[0] == 0
    mod.flag[1](X, True, 200)
    assert X[0] == 200


def test_grid_must_be_positive_ints(mod):
    refused(mod, args(), "grid dimension y is 0; it must be at least 1", grid=(3, 0))
    refused(mod, args(), "the grid must be an int or a tuple of 1 to 3 ints", grid=(1, 1, 1, 1))
    refused(mod, args(), "grid dimension x must be an int, not 2.0", grid=(2.0,))
    refused(mod, args(), "grid dimension x is -1", grid=-1)
    refused(mod, args(), "grid dimension z is 70000; CUDA allows at most 65535", grid=(1, 1, 70000))


def test_no_grid_and_no_grid_attribute(mod):
    X = np.zeros(32, np.float32)
    with pytest.raises(LaunchError, match=r"kernel 'nogrid' has no @grid; launch it with a grid, as in nogrid\[grid\]"):
        mod.nogrid(X)
    assert not X.any()


def test_grid_attribute_evaluating_to_zero(mod):
    a = args(M=0)
    refused(mod, a, "its @grid gives 0 CTAs along x (with M = 0")


def test_variant_checks(mod):
    refused(mod, args(), "variant names 'E', which is not an @autotune name of this kernel (it has: D)", variant={"E": 1})
    refused(mod, args(), "variant D=64 is not one of its @autotune values [16, 32]", variant={"D": 64})
    refused(mod, args(), "variant must be a dict", variant=16)
    a = args(D=32)
    mod.k(*a, variant={"D": 32})
    assert mod.k.last_run.variant == {"D": 32} and "named by the call" in mod.k.last_run.note


def test_read_only_output(mod):
    a = args()
    a[2].flags.writeable = False
    refused(mod, a, "argument 'Y' is read-only, but the kernel writes it")
    a = args()
    a[0].flags.writeable = False                 # read-only inputs are fine
    mod.k(*a)


class FakeGpuArray:
    """Looks like a CuPy array to the adapter: only __cuda_array_interface__."""

    def __init__(self, shape, typestr):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (1234, False),
                                         "strides": None, "version": 3}


def test_gpu_array_on_the_cpu_backend(mod):
    a = args()
    a[0] = FakeGpuArray((12, 16), "<f4")
    refused(mod, a, "argument 'X' is a GPU array", "the CPU backend needs host arrays")


def test_adapter_describes_every_kind_of_array():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    d = describe_array(x)
    assert d.host is x and d.shape == (3, 4) and d.c_contiguous and d.device == "cpu"
    g = describe_array(FakeGpuArray((3, 4), "<f2"))
    assert g.device == "cuda" and g.dtype == np.float16 and g.ptr == 1234 and g.host is None and g.c_contiguous

    class HasArray:
        def __array__(self, dtype=None, copy=None):
            return x

    assert describe_array(HasArray()).host is x

    class HasDlpack:
        def __dlpack__(self, **kw):
            return x.__dlpack__(**kw)

        def __dlpack_device__(self):
            return x.__dlpack_device__()

    d = describe_array(HasDlpack())
    assert d.host is not None and np.shares_memory(d.host, x)
    assert describe_array(3.0) is None and describe_array([1, 2]) is None


def test_array_like_arguments_are_written_in_place():
    mod = tilenb.compile("@launch(32)\nkernel k(X: tensor<f32>[N]) {\n  X[ctx.thread] = 2.0\n}\n", backend="cpu")
    x = np.zeros(32, np.float32)

    class Wrapper:
        def __array__(self, dtype=None, copy=None):
            return x

    mod.k[1](Wrapper())
    assert (x == 2.0).all()


def test_bind_arguments_for_other_backends(mod):
    kir = mod.k.ir(D=16)
    b = bind_arguments(kir, args())
    assert isinstance(b, Bound)
    assert b.dims == {"M": 12, "N": 8} and set(b.tensors) == {"X", "S", "Y", "W"}
    assert b.scalars["a"].dtype == np.float32 and b.scalars["n"].dtype == np.int32
    p = prepare(mod.k, None, args(D=32))
    assert p.chosen.tune == {"D": 32} and len(p.candidates) == 1 and p.chosen.grid == (3, 1, 1)


def test_bf16_dtype_is_ml_dtypes():
    mod = tilenb.compile("@launch(32)\nkernel k(X: tensor<bf16>[N], Y: tensor<f32>[N]) {\n  Y[ctx.thread] = f32(X[ctx.thread])\n}\n", backend="cpu")
    Y = np.zeros(32, np.float32)
    with pytest.raises(LaunchError, match=r"argument 'X' \(tensor<bf16>\[N\]\) has dtype float16 \(f16\); it needs bfloat16 \(bf16\)"):
        mod.k[1](np.zeros(32, np.float16), Y)
    mod.k[1](np.full(32, 1.5, ml_dtypes.bfloat16), Y)
    assert (Y == 1.5).all()


def test_cuda_backend_without_a_gpu_is_a_tile_error(monkeypatch):
    """A module compiled for CUDA, launched where no GPU answers (no CuPy, no driver, no device:
    simulated, so that this runs on every machine): a TileError that says so and names the way
    out, and nothing runs. (It used to skip wherever tilenb.runtime.gpu.cuda exists, i.e. always.)"""
    from tilenb.runtime import gpu
    mod = tilenb.compile("@launch(32)\nkernel k(X: tensor<f32>[N]) {\n  X[ctx.thread] = 2.0\n}\n", backend="cuda")
    monkeypatch.setattr(gpu, "gpu_available", lambda: False)
    x = np.zeros(32, np.float32)
    with pytest.raises(TileError, match="kernel 'k': the CUDA backend has no usable GPU here") as e:
        mod.k[1](x)
    assert "backend='cpu'" in e.value.message
    assert not x.any()
