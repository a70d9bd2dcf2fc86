"""The CUDA backend (`cuda`: compile through NVRTC, autotune, launch through CuPy; `tma`: the
tensor maps of Hopper's bulk copies; `traffic`: the bytes and FLOPs a launch must move), and
whether a CUDA GPU is usable from this process.

Guarantees: `gpu_available()` never raises; it answers False without CuPy or a device.
Importing this package loads neither CuPy nor the backend's modules.
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
