"""Question: How long does one launch of a hand-written probe take, and what copy bandwidth is it
measured against? (helpers of the probes)

GPU timing for the hand-written CUDA probes (bench/probes/wide_ceiling.py, wide_probe.py,
head_probe.py), with CuPy alone: the time of a launch, the device-to-device copy bandwidth the
probes report their kernels against, and f32 -> bf16 bits on the GPU.

Guarantees: `time_s` is the median over `reps` CUDA-event intervals after `warm` untimed calls,
in seconds; `copy_bandwidth_GBps` times a 1 GiB `cudaMemcpyAsync` device to device and counts the
bytes read and written (GB/s, 1e9 bytes); `to_bf16_bits` rounds to nearest even (uint16 bits).
"""
from __future__ import annotations

import statistics


def time_s(fn, reps: int = 10, warm: int = 2) -> float:
    """Median seconds of one call of `fn` (launches on the current stream), by CUDA events."""
    import cupy as cp
    for _ in range(warm):
        fn()
    ev = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(reps)]
    for a, b in ev:
        a.record()
        fn()
        b.record()
    ev[-1][1].synchronize()
    return statistics.median(cp.cuda.get_elapsed_time(a, b) for a, b in ev) / 1e3


def copy_bandwidth_GBps() -> float:
    """Read + write GB/s of a 1 GiB device-to-device cudaMemcpyAsync (f32 buffers, freed after)."""
    import cupy as cp
    n = 1 << 28
    src, dst = cp.random.standard_normal(n, dtype=cp.float32), cp.empty(n, cp.float32)
    s = time_s(lambda: cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, n * 4, 3, 0))
    del src, dst
    return 2 * n * 4 / s / 1e9


def to_bf16_bits(a):
    """The bf16 bit patterns (uint16, round to nearest even) of a CuPy f32 array."""
    import cupy as cp
    u = a.view(cp.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(cp.uint16)
