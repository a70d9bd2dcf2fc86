"""Question: Are guarded vector stores wide stores on the GPU (Nsight Compute's instruction and sector
counts)?

Launch the guarded-vector-store kernels of tests/codegen/test_sass_widths.py once each, for Nsight Compute.

    ncu -k regex:'scale_f32|scale_bf16|widen_i8|offset_window' \\
        --metrics smsp__inst_executed_op_global_st.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,\\
smsp__inst_executed_op_global_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum \\
        .venv/bin/python bench/probes/store_width_probe.py

Each kernel runs over [4096, 256] (offset_window over [4096, 260]) and is checked against numpy.
Before launching, it prints what the analysis predicts for the store of each kernel: the bytes
one store instruction moves, the warp-level store instructions (a warp's 32 lanes each store one
chunk) and the 32-byte sectors of the whole grid; Nsight Compute's counts should equal them
(`Y[r :+ 8, :] = x * 2.0` in f32: 16-byte stores, 8,192 instructions, 131,072 sectors).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "codegen"))

import ml_dtypes  # noqa: E402

import tilenb  # noqa: E402
from test_sass_widths import STORES  # noqa: E402

M = 4096


def main() -> int:
    cpu = tilenb.compile(STORES, backend="cpu")
    gpu = tilenb.compile(STORES, backend="cuda")
    rng = np.random.default_rng(0)
    cases = {
        "scale_f32": (rng.standard_normal((M, 256)).astype(np.float32), np.zeros((M, 256), np.float32)),
        "scale_bf16": (rng.standard_normal((M, 256)).astype(ml_dtypes.bfloat16),
                       np.zeros((M, 256), ml_dtypes.bfloat16)),
        "widen_i8": (rng.integers(-128, 128, (M, 256)).astype(np.int8), np.zeros((M, 256), np.int32)),
        "offset_window": (rng.standard_normal((M, 260)).astype(np.float32), np.zeros((M, 260), np.float32)),
    }
    for name, (x, y) in cases.items():
        sp = next(p for p in getattr(cpu, name).analysis().statements if p.kind == "tile" and p.what.startswith("the store"))
        dest = sp.accesses[0]
        nbytes_total = M * 256 * dest.elem_bytes      # offset_window: two CTA columns of 128
        per_thread = dest.vector_bytes
        print(f"{name}: the analysis stores {per_thread}-byte vectors: {nbytes_total // per_thread // 32} warp store "
              f"instructions, {nbytes_total // 32} sectors (line {sp.line}: {sp.what})")
        yc = y.copy()
        getattr(gpu, name)(x, y)          # the grid is the kernel's @grid
        getattr(cpu, name)(x, yc)
        np.testing.assert_array_equal(np.asarray(y).astype(np.float64), np.asarray(yc).astype(np.float64))
    print("all four agree with the CPU executor")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
