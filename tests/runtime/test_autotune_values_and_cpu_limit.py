"""Launch edges users met: @autotune values are ints alike in analysis(), ir() and a launch's
variant (a float, bool or str is refused naming the value and the choices); the CPU backend
refuses a launch that would run for hours, naming the grid, and `cpu_limit` lifts or sets the
limit."""
import numpy as np
import pytest

import tilenb


# ---- @autotune values are ints, in analysis() and at a launch alike ---------------------
TUNED = "@autotune(TM in [32, 64])\n@grid(1)\nkernel k(X: tensor<f32>[N]) {\n  X[0] = f32(TM)\n}\n"


@pytest.mark.parametrize("value", [64.0, True, "64"])
def test_a_non_int_autotune_value_is_refused_by_analysis_and_launch_alike(value):
    """kernel.analysis(TM=64.0) ran (64.0 hashes as 64) while variant={'TM': 64.0} was refused."""
    mod = tilenb.compile(TUNED, backend="cpu")
    for call in (lambda: mod.k.analysis(TM=value), lambda: mod.k.ir(TM=value),
                 lambda: mod.k(np.zeros(4, np.float32), variant={"TM": value})):
        with pytest.raises(tilenb.TileError) as e:
            call()
        assert f"TM={value!r} is not one of its @autotune values [32, 64]" in e.value.message


def test_int_autotune_values_work_in_analysis_and_launch():
    mod = tilenb.compile(TUNED, backend="cpu")
    assert mod.k.ir(TM=np.int64(64)).tune == {"TM": 64}
    x = np.zeros(4, np.float32)
    mod.k(x, variant={"TM": np.int64(64)})
    assert x[0] == 64.0


# ---- the CPU backend refuses a launch that would run for hours -------------------------
ONE = "kernel k(X: tensor<f32>[N]) {\n  X[0] = 1.0\n}\n"


def test_a_huge_grid_on_the_cpu_is_refused_naming_the_grid():
    mod = tilenb.compile(ONE, backend="cpu")
    x = np.zeros(4, np.float32)
    with pytest.raises(tilenb.LaunchError) as e:
        mod.k[2 ** 31 - 1](x)
    m = e.value.message
    assert "the grid (2147483647, 1, 1) is 2,147,483,647 CTAs x 256 threads" in m
    assert "use a GPU (backend='cuda') or a smaller problem" in m and "cpu_limit=None" in m
    assert x[0] == 0.0                                        # nothing ran


def test_the_cpu_limit_is_2_to_the_26_thread_instances_and_can_be_lifted():
    mod = tilenb.compile(ONE, backend="cpu")
    x = np.zeros(4, np.float32)
    with pytest.raises(tilenb.LaunchError):
        mod.k[2 ** 18 + 1](x)                                 # 256 threads per CTA
    mod.k[2, 3](x, cpu_limit=None)
    assert x[0] == 1.0 and mod.k.last_run.ctas == 6
    with pytest.raises(tilenb.LaunchError, match="more than the CPU backend runs in one launch \\(1,024\\)"):
        mod.k[5](x, cpu_limit=1024)
    with pytest.raises(tilenb.LaunchError, match="cpu_limit must be a positive int"):
        mod.k[1](x, cpu_limit="lots")
