"""Whether a CUDA GPU is usable from this process (through CuPy).

Guarantees: `gpu_available()` never raises; it answers False without CuPy or a device.
"""
from __future__ import annotations

import functools


@functools.lru_cache(maxsize=1)
def gpu_available() -> bool:
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, no driver, no device: all mean "no GPU"
        return False
