"""Kernel names that C++ or CUDA already claim get a C symbol that cannot clash.

A tile-language kernel may be called `int`, `main`, `class`, `threadIdx`, `printf`, `std`,
`tnb_stg`, ...; written as the `extern "C" __global__` function's name, NVRTC refuses them. Checked
here: each such name compiles with NVRTC for sm_90 and for any target (under the symbol
`tnb_kernel_<name>`, variants included), every other name keeps its symbol as written, the
launch (through the stand-in for CuPy) asks the module for the same symbol the generated code
defines, and the profile's job and ncu's kernel filter name it too. On a GPU (marked `gpu`): a
kernel named `main` launched against numpy at a length that is not a multiple of the tile.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import tilenb
from tilenb.codegen import kernel_symbol, nvrtc_available, nvrtc_compile
from tilenb.codegen.cnames import clashes

from support import fake_cupy

# names that fail NVRTC when used as written, one or more of each kind
PROBLEM_NAMES = [
    "int", "main", "new", "class", "and", "template", "this", "auto", "delete", "namespace",
    "threadIdx", "blockIdx", "warpSize", "std", "dim3", "size_t", "uint4", "float2", "printf",
    "malloc", "fabs", "powf", "clock64", "umin", "normcdf", "assert", "NULL", "_Pragma",
    "__syncthreads", "tnb_stg", "tnb_tid", "TILENB_PRELUDE", "TNB_SM90A",
]
# names kept as written (the shipped and tested kernels' symbols do not change)
ORDINARY = ["scale_rows", "gemm", "abc", "int_ops", "mainly", "new_rows", "classify", "tnbx", "Tnb_x",
            "printf2", "std_dev", "a__b", "_lower"]


def _source(name: str, tuned: bool = False) -> str:
    tune = "@autotune(T in [64, 128])\n@launch(T)\n" if tuned else "@launch(64)\n"
    return (tune + f"kernel {name}(X: tensor<f32>[N], Y: tensor<f32>[N]) {{\n"
            "  let i = ctx.block.x * 64\n"
            "  Y[i :+ 64] = X[i :+ 64] * 5.0\n"
            "}\n")


def _defined(cuda: str) -> str:
    m = re.search(r'^extern "C" __global__ void .*?__launch_bounds__\([^)]*\) (\w+)\(', cuda, re.M)
    assert m
    return m.group(1)


def test_which_names_are_escaped():
    for n in PROBLEM_NAMES:
        assert clashes(n), n
    for n in ORDINARY:
        assert not clashes(n), n


@pytest.mark.parametrize("name", ORDINARY[:4])
def test_other_symbols_are_unchanged(name):
    mod = tilenb.compile(_source(name) + _source(name + "_t", tuned=True), backend="cpu")
    assert _defined(getattr(mod, name).cuda_source(arch=None)) == name
    assert _defined(getattr(mod, name + "_t").cuda_source(arch=None, T=64)) == name + "_t__T64"


@pytest.mark.skipif(not nvrtc_available(), reason="NVRTC is not installed")
@pytest.mark.parametrize("name", PROBLEM_NAMES)
def test_problem_names_compile(name):
    mod = tilenb.compile(_source(name) + _source(name + "_v", tuned=True), backend="cpu")
    k = getattr(mod, name)
    for arch in ("sm_90", None):
        cuda = k.cuda_source(arch=arch)
        assert _defined(cuda) == "tnb_kernel_" + name
        nvrtc_compile(cuda, arch or "sm_80", use_cache=False)
    tuned = getattr(mod, name + "_v")
    cuda = tuned.cuda_source(arch="sm_90", T=128)
    want = ("tnb_kernel_" + name + "_v" if clashes(name + "_v") else name + "_v") + "__T128"
    assert _defined(cuda) == want
    nvrtc_compile(cuda, "sm_90", use_cache=False)


def test_launch_and_profile_read_the_same_symbol(monkeypatch, tmp_path):
    from tilenb.runtime.checks import prepare
    from tilenb.runtime.gpu import cuda as C
    from tilenb.runtime.gpu import profile as P
    with fake_cupy.installed(monkeypatch, tmp_path) as fake:
        launched = []
        fake.run = lambda name, grid, block, args, smem: launched.append(name)
        mod = tilenb.compile(_source("main"), backend="cuda")
        X = np.arange(100, dtype=np.float32)
        Xd, Yd = fake.asarray(X), fake.asarray(np.zeros(100, np.float32))
        mod.main[2](Xd, Yd)
        ch = prepare(mod.main, (2,), (Xd, Yd)).chosen
        ks = C.kernel_source(mod.main, ch.kir)
        assert launched and set(launched) == {"tnb_kernel_main"} == {ks.symbol, kernel_symbol(ch.kir)}
        assert _defined(ks.source) == "tnb_kernel_main"
        job = P.make_job(mod.main, ch)
        assert job["symbol"] == "tnb_kernel_main"
        assert "regex:^tnb_kernel_main$" in P.ncu_profile_args(job["symbol"])


@pytest.mark.gpu
def test_a_kernel_named_main_runs_on_the_gpu():
    mod = tilenb.compile(_source("main") + _source("int", tuned=True), backend="cuda")
    rng = np.random.default_rng(5)
    X = rng.standard_normal(1000).astype(np.float32)
    for k in (mod.main, getattr(mod, "int")):
        Y = np.zeros_like(X)
        k[(1000 + 63) // 64](X, Y)
        np.testing.assert_array_equal(Y, X * np.float32(5.0))
