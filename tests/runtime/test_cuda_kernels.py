"""Every kernel the CUDA backend is held to, run on the GPU and compared with the CPU executor.

`CASES` lists each kernel with random arguments at shapes that are not multiples of its tiles,
the grid, and the tolerance (integers exactly; f32 1e-5 elementwise, about 1e-4 relative for
reductions and dots, scaled with K; f16/bf16 by the storage type's epsilon); the programs are
those of tests/support/programs.py. The same corpus is compile-checked with NVRTC without a GPU
in tests/codegen/test_codegen_nvrtc.py. GPU tests are marked `gpu` and skip where no CUDA GPU is
usable (tests/conftest.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, Optional, Sequence

import ml_dtypes
import numpy as np
import pytest

import tilenb
from support.programs import EXTRA, PROGRAMS, SEED


# ---- launch specifications ------------------------------------------------------------------------
def _f32(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


@dataclass
class Case:
    program: str          # key into SOURCES
    kernel: str
    make: Callable        # rng -> list of arguments (numpy)
    grid: Optional[object] = None
    variant: Optional[dict] = None
    rtol: float = 1e-5
    atol: float = 1e-5
    skip: Dict[str, object] = field(default_factory=dict)   # output name -> index expression to ignore


SOURCES = dict(PROGRAMS)
SOURCES["seed"] = SEED
SOURCES.update(EXTRA)


def _cases():
    c = []
    c.append(Case("seed", "scale_rows", lambda r: [_f32(r, 99, 64), _f32(r, 99, 1), np.zeros((99, 64), np.float32)], grid=4))
    c.append(Case("seed", "partial_sums", lambda r: [_f32(r, 1, 1000), np.zeros((1, 256), np.float32)], grid=1, rtol=1e-4))
    c.append(Case("seed", "act", lambda r: [_f32(r, 3000), np.zeros(3000, np.float32)], grid=3))
    c.append(Case("seed", "rms_norm", lambda r: [_f32(r, 53, 256), _f32(r, 1, 256), np.zeros((53, 256), np.float32)], grid=7, rtol=1e-4))
    c.append(Case("seed", "flash_attention", lambda r: [_f32(r, 100, 64), _f32(r, 76, 64), _f32(r, 76, 64),
                                                        np.zeros((100, 64), np.float32)], grid=4, rtol=1e-4, atol=1e-5))
    c.append(Case("seed", "quantize", lambda r: [_f32(r, 68, 32, scale=100.0), np.zeros((68, 32), np.int8)], grid=3))
    c.append(Case("seed", "gemm", lambda r: [_f32(r, 70, 52), _f32(r, 52, 100), _f32(r, 70, 100), np.float32(1.5),
                                             np.float32(-0.5)], rtol=1e-4, atol=1e-4))
    c.append(Case("softmax", "softmax_rows", lambda r: [_f32(r, 10, 200), np.zeros((10, 200), np.float32)],
                  variant={"BLOCK": 256}, rtol=1e-5, atol=1e-6))
    c.append(Case("layernorm", "layernorm", lambda r: [_f32(r, 7, 512).astype(np.float16), _f32(r, 1, 512), _f32(r, 1, 512),
                                                       np.zeros((7, 512), np.float16), np.float32(1e-5)], grid=4, rtol=2e-3, atol=2e-3))
    c.append(Case("stencil", "laplace", lambda r: [_f32(r, 20, 72), np.zeros((20, 72), np.float32)]))
    c.append(Case("stencil", "blur3", lambda r: [_f32(r, 600), np.zeros(600, np.float32)], grid=3))
    c.append(Case("nibbles", "unpack_nibbles", lambda r: [r.integers(0, 256, 300).astype(np.uint8), _f32(r, 1, 1),
                                                          np.zeros((300, 2), np.float32)], grid=2))
    c.append(Case("nibbles", "unpack_tile", lambda r: [r.integers(0, 256, (7, 64)).astype(np.uint8), np.zeros((7, 64), np.int8),
                                                       np.zeros((7, 64), np.int8)], grid=7))
    c.append(Case("scan", "block_scan", lambda r: [r.integers(-100, 100, 520).astype(np.int32), np.zeros(520, np.int32)], grid=3))
    c.append(Case("functions", "act_and_scale", lambda r: [_f32(r, 40, 64), np.zeros((40, 64), np.float32), np.float32(0.75)],
                  grid=3, rtol=1e-5, atol=1e-6))
    c.append(Case("breaks", "first_above", lambda r: [_f32(r, 100, 36), np.zeros((100, 1), np.int32), np.float32(1.5)], grid=2))
    c.append(Case("breaks", "count_until_zero", lambda r: [r.integers(-3, 6, (64, 20)).astype(np.int32), np.zeros(64, np.int64)], grid=2))
    c.append(Case("breaks", "sum_positive", lambda r: [_f32(r, 1, 1000), np.zeros((1, 128), np.float32)], grid=1, rtol=1e-5))
    c.append(Case("gemm_f16", "hgemm", lambda r: [_f32(r, 101, 72).astype(np.float16), _f32(r, 72, 92).astype(np.float16),
                                                  _f32(r, 101, 92), np.float32(1.25), np.float32(0.5)], rtol=2e-3, atol=2e-3))
    c.append(Case("gemm_f16", "qk_i8", lambda r: [r.integers(-128, 128, (40, 64)).astype(np.int8),
                                                 r.integers(-128, 128, (40, 64)).astype(np.int8), np.zeros((40, 40), np.int32)], grid=(2, 2)))
    c.append(Case("tiles_reuse", "phases", lambda r: [_f32(r, 128, 64), np.zeros((128, 64), np.float32)], grid=1))
    c.append(Case("misc", "misc", _misc_args, grid=2, rtol=1e-6, atol=1e-6, skip={"F": 0, "L": 0}))
    bf = ml_dtypes.bfloat16
    c.append(Case("gemm_bf16_t", "gemm_bf16_t", lambda r: [_f32(r, 69, 40).astype(bf), _f32(r, 52, 40).astype(bf),
                                                          np.zeros((69, 52), bf)], rtol=1e-2, atol=1e-2))
    c.append(Case("reductions", "reductions", lambda r: [_f32(r, 37, 48), np.zeros((37, 48), np.float32), np.zeros((37, 2), np.float32),
                                                        np.zeros((1, 48), np.float32), np.zeros((2, 48), np.float32)],
                  grid=3, rtol=1e-4, atol=1e-5))
    c.append(Case("int_ops", "int_ops", _int_args, grid=2))
    c.append(Case("float_math", "float_math", _float_args, grid=2, rtol=2e-5, atol=2e-5))
    c.append(Case("transpose_dot", "transpose_dot", _td_args, grid=1, rtol=1e-4, atol=1e-4))
    c.append(Case("registers", "reg_acc", lambda r: [_f32(r, 53, 64), np.zeros((16, 64), np.float32)], grid=1, rtol=1e-5))
    c.append(Case("dynshared", "big_tile", lambda r: [_f32(r, 201, 128), np.zeros((201, 128), np.float32)], grid=2, rtol=1e-4, atol=1e-5))
    c.append(Case("atomics", "atomics", _atomic_args, grid=3, rtol=1e-4, atol=1e-4))
    c.append(Case("f16_dots", "f16_dots", lambda r: [_f32(r, 70, 32).astype(np.float16), _f32(r, 32, 48).astype(np.float16),
                                                    np.zeros((70, 1), np.float32), np.zeros((70, 48), np.float32),
                                                    np.zeros((70, 32), np.float32)], grid=3, rtol=1e-4, atol=1e-4))
    c.append(Case("early_return", "early_return", lambda r: [_f32(r, 300), np.zeros(300, np.float32)], grid=3))
    c.append(Case("unroll_break", "unroll_break", lambda r: [r.integers(0, 9, (64, 40)).astype(np.int32), np.zeros(64, np.int32)], grid=2))
    c.append(Case("windows", "windows", lambda r: [_f32(r, 69, 32), np.zeros((69, 32), np.float32), np.zeros((32, 32), np.float32)], grid=3))
    return c


def _misc_args(r):
    M = 300
    return [r.integers(-50, 50, (M, 8)).astype(np.int32), r.standard_normal(M), _f32(r, M).astype(ml_dtypes.bfloat16),
            r.integers(0, 65536, M).astype(np.uint16), r.integers(0, 2 ** 32, M, dtype=np.uint64).astype(np.uint32),
            r.integers(-128, 128, M).astype(np.int8), r.integers(-1000, 1000, M).astype(np.int64), np.zeros((4, 4, M), np.float32)]


def _int_args(r):
    N = 100
    a = r.integers(-2 ** 31, 2 ** 31, N, dtype=np.int64).astype(np.int32)
    b = r.integers(-5, 6, N).astype(np.int32)
    b[:3] = [0, -1, 0]
    a[1] = -2 ** 31
    f = (r.standard_normal(N) * 1e3).astype(np.float32)
    f[:6] = [np.nan, np.inf, -np.inf, 2.5, -2.5, 3e10]
    return [a, b, f, r.integers(0, 256, N).astype(np.uint8), np.zeros((8, N), np.int32), np.zeros((2, N), np.int8),
            np.zeros(N, np.uint8), np.zeros(N, np.int64)]


def _float_args(r):
    N = 200
    x = _f32(r, N, scale=2.0)
    x[:3] = [0.5, -0.5, 1.5]
    return [x, r.standard_normal(N), _f32(r, N).astype(np.float16), np.zeros((9, N), np.float32), np.zeros((2, N), np.float64),
            np.zeros(N, np.float16)]


def _td_args(r):
    M = 28
    return [_f32(r, M, 24), _f32(r, 24, 40), np.zeros((24, M), np.float32), np.zeros((M, 40), np.float32),
            np.zeros((M, M), np.float32), r.integers(-128, 128, (M, 24)).astype(np.int8), np.zeros((M, M), np.int32),
            r.standard_normal((M, 24)), np.zeros((M, M), np.float64)]


def _atomic_args(r):
    N = 300
    S = np.array([0.0, -1e30, -1e30, 0.0], np.float32)
    return [_f32(r, N), r.integers(-1000, 1000, N).astype(np.int32), S, np.zeros(8, np.int32),
            np.array([-2 ** 31, 0], np.int32), np.zeros(2, np.float16)]


CASES = _cases()


def case_id(c: Case) -> str:
    return f"{c.program}-{c.kernel}"


# ---- comparison ---------------------------------------------------------------------------------
def _tol(c: Case, dt):
    if dt == np.float16:
        return max(c.rtol, 2e-3), max(c.atol, 2e-3)
    if dt == ml_dtypes.bfloat16:
        return max(c.rtol, 1.6e-2), max(c.atol, 1.6e-2)
    return c.rtol, c.atol


def run_case(c: Case, backend: str, seed: int = 0):
    """Run a case on a backend; returns (module, kernel, the argument list after the run)."""
    rng = np.random.default_rng(seed)
    args = c.make(rng)
    mod = tilenb.compile(SOURCES[c.program], backend=backend, filename=f"{c.program}.tile")
    k = mod.kernels[c.kernel]
    launcher = k[c.grid] if c.grid is not None else k
    launcher(*args, variant=c.variant)
    return mod, k, args


def compare(c: Case, cpu_args, gpu_args, names):
    for name, a, b in zip(names, cpu_args, gpu_args):
        if not isinstance(a, np.ndarray):
            continue
        a = a.copy()
        b = b.copy()
        if name in c.skip:
            a.reshape(-1)[c.skip[name]] = 0
            b.reshape(-1)[c.skip[name]] = 0
        if a.dtype.kind in "iub":
            np.testing.assert_array_equal(b, a, err_msg=f"{case_id(c)}: output {name}")
        else:
            rtol, atol = _tol(c, a.dtype)
            np.testing.assert_allclose(b.astype(np.float64), a.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True,
                                       err_msg=f"{case_id(c)}: output {name}")


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_cuda_matches_cpu(case: Case):
    mod, k, cpu_args = run_case(case, "cpu", seed=1)
    _, kg, gpu_args = run_case(case, "cuda", seed=1)
    assert kg.last_run.backend == "cuda"
    names = [p.sym.name for p in k.ir().params]
    compare(case, cpu_args, gpu_args, names)


@pytest.mark.gpu
def test_torch_tensors_run_in_place():
    torch = pytest.importorskip("torch")
    mod = tilenb.compile(SEED, backend="cuda")
    x = torch.randn(100, 64, device="cuda")
    s = torch.randn(100, 1, device="cuda")
    y = torch.zeros(100, 64, device="cuda")
    mod.scale_rows[4](x, s, y)
    torch.cuda.synchronize()
    np.testing.assert_allclose(y.cpu().numpy(), (x * s).cpu().numpy(), rtol=1e-6)


@pytest.mark.gpu
def test_cupy_arrays_and_autotune_timings():
    cp = pytest.importorskip("cupy")
    mod = tilenb.compile(PROGRAMS["gemm_f16"], backend="cuda")
    rng = np.random.default_rng(3)
    a = rng.standard_normal((132, 72)).astype(np.float16)
    b = rng.standard_normal((72, 68)).astype(np.float16)
    c = cp.zeros((132, 68), dtype=cp.float32)
    mod.hgemm(cp.asarray(a), cp.asarray(b), c, 1.0, 0.0)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(cp.asnumpy(c), ref, rtol=2e-3, atol=2e-3)
    rep = mod.hgemm.last_run
    timings = rep.extra["timings"]
    assert {t["variant"] for t in timings} == {"TM=64, TN=64, TK=32", "TM=128, TN=64, TK=32"}
    assert all(t["ms"] is None or t["ms"] > 0 for t in timings)
    assert mod.hgemm.timings


@pytest.mark.gpu
def test_gpu_gemm_f16_uses_tensor_cores_at_large_random_shapes():
    mod = tilenb.compile(PROGRAMS["gemm_f16"], backend="cuda")
    assert "mma.sync" in mod.hgemm.cuda_source(TM=64)
    rng = np.random.default_rng(5)
    M, K, N = 332, 264, 196
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = rng.standard_normal((M, N)).astype(np.float32)
    ref = 0.5 * (a.astype(np.float64) @ b.astype(np.float64)) + 2.0 * c
    mod.hgemm(a, b, c, 0.5, 2.0)
    err = np.linalg.norm(c - ref) / np.linalg.norm(ref)
    assert err < 1e-3, err
