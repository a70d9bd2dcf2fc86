"""Question: How long does one call of a torch-driven probe take on the GPU? (helpers of the probes)

GPU timing for the probes that time tilenb's kernels beside torch peers (cuBLAS, SDPA) in one
process (bench/probes/causal_order.py, gemm_order.py, gemm_sm90.py), with torch's CUDA events on
torch's current stream; the hand-written CUDA probes time with CuPy alone (cupy_timing.py).

Guarantees: `time_ms` runs `fn` WARMUPS times untimed, waits for the device, then records a pair
of events around each of `reps` back-to-back calls and returns the median interval in
milliseconds; it waits for the device once, after the last call, so the calls queue without
host gaps between them.
"""
from __future__ import annotations

import statistics

WARMUPS = 3     # untimed calls before the timed ones: first-launch costs (module load, caches) fall here


def time_ms(torch, fn, reps: int) -> float:
    """Median milliseconds of one call of `fn` (launches on torch's current stream) over `reps`
    calls between CUDA events, after WARMUPS untimed calls. `torch` is the imported module (the
    probes import it only after compiling, before CUDA starts in the process)."""
    for _ in range(WARMUPS):
        fn()
    torch.cuda.synchronize()
    evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for s, e in evs:
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in evs)
