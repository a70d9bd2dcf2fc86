"""Causal attention on the GPU, each lowering once, against the CPU executor: a short run meant
for compute-sanitizer (memcheck, racecheck, synccheck: scripts/gpu_checks.sh causal).

    python scripts/causal_checks.py            # on a CUDA GPU (H100/H200 for the wgmma cases)
    compute-sanitizer --tool racecheck --error-exitcode 9 python scripts/causal_checks.py

The cases: tilenb/examples/suite_kernels.py ATTENTION_CAUSAL on the streamed-attention (TMA +
wgmma) loop at two tile shapes and on mma.sync (16 rows a warp), the same over every key block
(no block skipped: the mask's all-false branch runs too), and its f32 form on the generic path, each with more queries than keys and the reverse (lengths that are not tile multiples).
Prints one line a case with the largest difference from the CPU executor's result; exits 1
when a case differs by more than the bf16 / f32 tolerance, or a case's lowering is not the one
named.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tilenb  # noqa: E402
from tilenb.examples import suite_kernels as SK  # noqa: E402

F32 = SK.ATTENTION_CAUSAL.replace("bf16", "f32").replace(
    "@autotune(BR in [64, 128], BC in [64, 128], D in [64, 128], NT in [128, 256])",
    "@autotune(BR in [16], BC in [16], D in [32], NT in [128])")
# the loop over every key block, none skipped: the blocks wholly above the diagonal run, and their
# masks are decided all false at the tile's corners (tilenb/analysis/masks.py), so every branch of
# the split sweep runs (all true below the diagonal, per element across it, all false above)
EVERY_BLOCK = SK.ATTENTION_CAUSAL.replace("range(0, min(Nk, row + BR), BC)", "range(0, Nk, BC)")
assert EVERY_BLOCK != SK.ATTENTION_CAUSAL, "the suite kernel's loop bound changed: update EVERY_BLOCK"
CASES = [  # (what, text, kernel, variant, lowering on sm_90, dtype, tolerance)
    ("wgmma 64x64 d64", SK.ATTENTION_CAUSAL, "attention_causal_bf16", dict(BR=64, BC=64, D=64, NT=128),
     "streamed attention on wgmma", "bf16", 2e-2),
    ("wgmma 128x64 d128", SK.ATTENTION_CAUSAL, "attention_causal_bf16", dict(BR=128, BC=64, D=128, NT=256),
     "streamed attention on wgmma", "bf16", 2e-2),
    ("mma.sync 64x64 d64", SK.ATTENTION_CAUSAL, "attention_causal_bf16", dict(BR=64, BC=64, D=64, NT=256),
     "mma.sync", "bf16", 2e-2),
    ("wgmma 64x64 d64, every key block", EVERY_BLOCK, "attention_causal_bf16", dict(BR=64, BC=64, D=64, NT=128),
     "streamed attention on wgmma", "bf16", 2e-2),
    ("mma.sync 64x64 d64, every key block", EVERY_BLOCK, "attention_causal_bf16", dict(BR=64, BC=64, D=64, NT=256),
     "mma.sync", "bf16", 2e-2),
    ("generic f32 16x16 d32", F32, "attention_causal_f32", dict(BR=16, BC=16, D=32, NT=128), "generic", "f32", 1e-4),
]
SHAPES = [(2, 200, 130), (1, 130, 200)]     # (heads, queries, keys)


def main() -> int:
    import cupy
    import ml_dtypes
    bad = 0
    for what, text, name, variant, lowering, dt, tol in CASES:
        npdt = ml_dtypes.bfloat16 if dt == "bf16" else np.float32
        cpu = tilenb.compile(text, backend="cpu").kernels[name]
        gpu = tilenb.compile(text, backend="cuda").kernels[name]
        got_low = [lp.lowering for lp in cpu.analysis(arch="sm_90", **variant).loops]
        if got_low != [lowering]:
            print(f"FAIL {what}: lowering {got_low}, expected {lowering}")
            bad += 1
        for H, N, Nk in SHAPES:
            r = np.random.default_rng(N * 7 + Nk)
            D = variant["D"]
            q, k, v = (r.standard_normal((H, n, D)).astype(npdt) for n in (N, Nk, Nk))
            scale = np.float32(1.0 / math.sqrt(D))
            want = np.full((H, N, D), np.nan, npdt)
            cpu(q, k, v, want, scale, variant=variant)
            dev = [cupy.asarray(x) for x in (q, k, v)] + [cupy.full((H, N, D), np.nan, dtype=want.dtype)]
            gpu(*dev, scale, variant=variant)
            got = cupy.asnumpy(dev[3]).astype(np.float64)
            ref = want.astype(np.float64)
            diff = float(np.nanmax(np.abs(got - ref))) if not np.isnan(got).any() else float("inf")
            ok = diff <= tol * (1 + float(np.abs(ref).max()))
            bad += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {what} H={H} N={N} Nk={Nk}: max |GPU - CPU| {diff:.3g}", flush=True)
    print(f"causal checks: {bad} failure(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
