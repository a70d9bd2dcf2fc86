"""The suite's long-row cluster forms that meet once a row (`_cluster1` in
tilenb/examples/suite_kernels.py, issue 19) against float64 numpy.

Each CTA of a cluster reduces its own slice of the row completely and the cluster exchanges the
slices' figures in one cluster_sum of an all-zero [R, 2K] tile; each CTA then combines them
itself (LayerNorm: parallel variance; softmax: each slice's sum rescaled to the row maximum).
Checked on the reference executor at row counts that are not multiples of R (the last cluster's
second row lies outside the tensor), with data that would expose a wrong combine: LayerNorm rows
whose mean is far larger than their spread (the variance taken as E[x^2] - mean^2 loses every
digit there), softmax rows whose slices have very different maxima and a slice that is all -inf.
The f32 RMSNorm that runs the head form in both CTAs of a cluster of 2 (`rms_norm_chead_f32`:
each half row's first H columns in shared memory, the rest read twice) is checked the same way.
On a GPU (marked `gpu`) the same kernels, every variant the autotuner would try.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tilenb
from tilenb.examples import suite_kernels as SK

N = 131072
NAMES = [f"{op}_cluster1_{dt}" for op in ("rms_norm", "layer_norm", "softmax") for dt in ("f32", "bf16")] + \
    ["softmax_cluster1e_f32", "softmax_cluster1e_bf16", "rms_norm_chead_f32"]
NP = {"f32": np.float32, "bf16": ml_dtypes.bfloat16}
TOL = {"f32": 2e-6, "bf16": 1e-2}
# LayerNorm's rows have mean 1000 in f32: a slice's f32 sum of 16384 such values alone is off by
# about 1e-5 of the spread; the suite's tolerance for f32 reductions
TOL_LN_F32 = 1e-4


def _tol(op, dt):
    return TOL_LN_F32 if (op, dt) == ("layer_norm", "f32") else TOL[dt]


def _module(backend):
    return tilenb.compile("\n".join(SK.kernel_text(n) for n in NAMES), backend=backend)


def _err(y, ref):
    y = np.asarray(y, np.float64)
    assert np.isfinite(y).all(), "the kernel left non-finite values"
    return float(np.linalg.norm(y - ref) / np.linalg.norm(ref))


def _data(M, dt, seed, mean=0.0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((M, N)) + mean
    return x.astype(NP[dt]), rng.standard_normal((1, N)).astype(NP[dt]), rng.standard_normal((1, N)).astype(NP[dt])


def _run(mod, op, dt, v, M, seed, form="cluster1"):
    if op == "layer_norm":
        x, w, b = _data(M, dt, seed, mean=1000.0 if dt == "f32" else 300.0)
        y = np.full((M, N), np.nan, NP[dt])
        getattr(mod, f"layer_norm_cluster1_{dt}")(x, w, b, y, 1e-5, variant=v)
        return y, SK.ref_layer_norm(x, w, b, 1e-5)
    x, w, _ = _data(M, dt, seed)
    if op == "rms_norm":
        y = np.full((M, N), np.nan, NP[dt])
        getattr(mod, f"rms_norm_cluster1_{dt}")(x, w, y, 1e-6, variant=v)
        return y, SK.ref_rms_norm(x, w, 1e-6)
    x = x.astype(np.float32)
    x[0, 5000:9000] += 30.0                  # the row maximum in one slice (of every K)
    x[-1, 3 * N // 4:] -= 60.0               # the last slices of a row far below the others
    x[M // 2, : N // 8] = -np.inf            # a whole slice (K = 8) masked out
    x = x.astype(NP[dt])
    y = np.full((M, N), np.nan, NP[dt])
    getattr(mod, f"softmax_{form}_{dt}")(x, y, variant=v)
    return y, SK.ref_softmax(x)


@pytest.fixture(scope="module")
def cpu_mod():
    return _module("cpu")


@pytest.mark.parametrize("dt", ["f32", "bf16"])
@pytest.mark.parametrize("op", ["rms_norm", "layer_norm", "softmax"])
@pytest.mark.parametrize("v,M", [({"K": 8, "R": 2, "NT": 256}, 3), ({"K": 4, "R": 1, "NT": 128}, 2)])
def test_cpu_one_meeting_forms_match_f64(cpu_mod, op, dt, v, M):
    y, ref = _run(cpu_mod, op, dt, v, M, seed=M + v["K"])
    assert _err(y, ref) <= _tol(op, dt)


@pytest.mark.parametrize("dt", ["f32", "bf16"])
@pytest.mark.parametrize("v,M", [({"K": 8, "R": 2, "NT": 256}, 3), ({"K": 4, "R": 1, "NT": 128}, 2)])
def test_cpu_softmax_taking_each_exponential_once_matches_f64(cpu_mod, dt, v, M):
    # (bf16: the exponentials are rounded to bf16 in x before they are scaled and rounded again)
    y, ref = _run(cpu_mod, "softmax", dt, v, M, seed=M, form="cluster1e")
    assert _err(y, ref) <= TOL[dt]


def test_cpu_layer_norm_one_meeting_keeps_the_variance_at_a_large_mean(cpu_mod):
    # mean 2000, spread 1: the parallel-variance combine keeps the f32 result within the suite's
    # tolerance of the f64 one; the same rows through E[x^2] - mean^2 in f32 (the head form's
    # rule, with numpy's pairwise sums) are off by several times that tolerance
    x, w, b = _data(3, "f32", 7, mean=2000.0)
    y = np.zeros_like(x)
    cpu_mod.layer_norm_cluster1_f32(x, w, b, y, 1e-5, variant={"K": 8, "R": 2, "NT": 256})
    ref = SK.ref_layer_norm(x, w, b, 1e-5)
    assert _err(y, ref) <= TOL_LN_F32
    x32 = x.astype(np.float32)
    m = x32.sum(axis=1, keepdims=True, dtype=np.float32) / np.float32(N)
    v = (x32 * x32).sum(axis=1, keepdims=True, dtype=np.float32) / np.float32(N) - m * m
    naive = (x32 - m) / np.sqrt(np.abs(v) + np.float32(1e-5)) * w + b
    assert _err(naive, ref) > 10 * TOL_LN_F32


@pytest.mark.parametrize("H", SK.CHEAD_SIZES)
def test_cpu_rms_norm_cluster_of_two_heads_matches_f64(cpu_mod, H):
    x, w, _ = _data(3, "f32", H)
    x[1, N // 2 - 7:N // 2 + 5] *= 50.0         # large values where the two halves (and head, tail) meet
    y = np.full_like(x, np.nan)
    cpu_mod.rms_norm_chead_f32(x, w, y, 1e-6, variant={"H": H, "NT": 512})
    assert _err(y, SK.ref_rms_norm(x, w, 1e-6)) <= TOL["f32"]


@pytest.mark.gpu
def test_gpu_rms_norm_cluster_of_two_heads_matches_f64():
    mod = _module("cuda")
    for key in mod.rms_norm_chead_f32.checked.variants:
        v = {k: x for k, x in dict(key).items() if k != "D"}
        x, w, _ = _data(5, "f32", 1)
        y = np.full_like(x, np.nan)
        mod.rms_norm_chead_f32(x, w, y, 1e-6, variant=v)
        assert _err(y, SK.ref_rms_norm(x, w, 1e-6)) <= TOL["f32"], v


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["f32", "bf16"])
def test_gpu_softmax_taking_each_exponential_once_matches_f64(dt):
    mod = _module("cuda")
    for key in getattr(mod, f"softmax_cluster1e_{dt}").checked.variants:
        v = {k: x for k, x in dict(key).items() if k != "D"}
        for M in (3, 5):
            y, ref = _run(mod, "softmax", dt, v, M, seed=M, form="cluster1e")
            assert _err(y, ref) <= TOL[dt], (dt, v, M)


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["rms_norm", "layer_norm", "softmax"])
@pytest.mark.parametrize("dt", ["f32", "bf16"])
def test_gpu_one_meeting_forms_match_f64(op, dt):
    mod = _module("cuda")
    kern = getattr(mod, f"{op}_cluster1_{dt}")
    for key in kern.checked.variants:
        v = {k: x for k, x in dict(key).items() if k != "D"}
        for M in (3, 5):
            y, ref = _run(mod, op, dt, v, M, seed=M)
            assert _err(y, ref) <= _tol(op, dt), (op, dt, v, M)
