"""A stand-in for the few parts of CuPy that tilenb's CUDA launch path uses, for tests and CPU
profiling without a GPU.

Guarantees: `FakeCupy()` is a module-like object with `ndarray` (device arrays backed by numpy
host memory: `.data.ptr`, `.shape`, `.strides`, `.dtype`, `__cuda_array_interface__`),
`asarray`, `empty`, `cuda.Device`, `cuda.Event`, `cuda.get_elapsed_time`, `cuda.runtime`
(`getDevice`, `getDeviceCount`, `getDeviceProperties`, `memcpy`, `deviceSynchronize`, error
classes), `cuda.driver.CUDADriverError` and `RawModule(path=...).get_function(name)`. Nothing runs on a
device: a launched function records `(grid, block, args, shared_mem)` in `FakeCupy.launches`
and, when `run` is set, calls it with the same arguments (a test can compute the result there).
Every CUDA API call is counted in `FakeCupy.calls[name]`. `install` puts one in place of CuPy for a
test; `installed` does so for a with-block (a fixture's yield) and leaves no cache behind it.
"""
from __future__ import annotations

import collections
import contextlib
import ctypes
import types

import numpy as np


class _Ptr:
    def __init__(self, ptr):
        self.ptr = ptr


class FakeCupy:
    def __init__(self):
        self.launches = []
        self.loaded = []          # the path of each RawModule made (the cubin files loaded)
        self.run = None
        self.calls = collections.Counter()
        cp = self

        class ndarray:
            """A 'device' array: numpy memory, seen as the GPU's."""

            def __init__(self, host):
                self._host = host
                self.data = _Ptr(host.__array_interface__["data"][0])

            @property
            def shape(self):
                return self._host.shape

            @property
            def strides(self):
                return self._host.strides

            @property
            def dtype(self):
                return self._host.dtype

            @property
            def size(self):
                return self._host.size

            @property
            def __cuda_array_interface__(self):
                return {"shape": self._host.shape, "typestr": self._host.dtype.str,
                        "data": (self.data.ptr, False), "version": 3, "strides": None}

            def get(self, out=None):
                if out is None:
                    return self._host.copy()
                out[...] = self._host.view(out.dtype).reshape(out.shape)
                return out

            def astype(self, dt):
                return ndarray(self._host.astype(dt))

        self.ndarray = ndarray
        self.uint8 = np.uint8
        self.float32 = np.float32

        class CUDADriverError(RuntimeError):
            pass

        class CUDARuntimeError(RuntimeError):
            pass

        def memcpy(dst, src, nbytes, kind):
            cp.calls["memcpy"] += 1
            ctypes.memmove(dst, src, nbytes)

        def props(i):
            cp.calls["getDeviceProperties"] += 1
            return {"name": b"Fake GPU"}

        def get_device():
            cp.calls["getDevice"] += 1
            return 0

        def device_sync():
            cp.calls["deviceSynchronize"] += 1

        runtime = types.SimpleNamespace(getDevice=get_device, getDeviceCount=lambda: 1,
                                        getDeviceProperties=props, memcpy=memcpy, deviceSynchronize=device_sync,
                                        CUDARuntimeError=CUDARuntimeError)

        class Device:
            def __init__(self, i=None):
                self.id = 0 if i is None else i
                self.compute_capability = "90"
                self.attributes = {"MaxSharedMemoryPerBlockOptin": 232448}

            def synchronize(self):
                cp.calls["Device.synchronize"] += 1

        class Event:
            def __init__(self):
                cp.calls["Event"] += 1
                self.t = 0.0

            def record(self, stream=None):
                cp.calls["Event.record"] += 1
                self.t = len(cp.launches) * 0.001

            def synchronize(self):
                cp.calls["Event.synchronize"] += 1

        def elapsed(a, b):
            cp.calls["get_elapsed_time"] += 1
            return 0.0125

        class Stream:
            def synchronize(self):
                cp.calls["Stream.synchronize"] += 1

        stream = Stream()
        self.cuda = types.SimpleNamespace(Device=Device, Event=Event, get_elapsed_time=elapsed,
                                          runtime=runtime, driver=types.SimpleNamespace(CUDADriverError=CUDADriverError),
                                          get_current_stream=lambda: stream)

        class Function:
            max_threads_per_block = 1024
            num_regs = 32

            def __init__(self, name):
                self.name = name

            def __call__(self, grid, block, args, shared_mem=0):
                cp.calls["launch"] += 1
                cp.launches.append((grid, block, args, shared_mem))
                if cp.run is not None:
                    cp.run(self.name, grid, block, args, shared_mem)

        class RawModule:
            def __init__(self, path=None, code=None, options=()):
                cp.calls["RawModule"] += 1
                cp.loaded.append(path)

            def get_function(self, name):
                return Function(name)

        self.RawModule = RawModule

    def asarray(self, a):
        return self.ndarray(np.ascontiguousarray(a))

    def empty(self, n, dtype=np.uint8):
        return self.ndarray(np.empty(n, dtype=dtype))

    def from_dlpack(self, obj):
        raise TypeError("no DLPack in the fake")


def install(monkeypatch, cache_dir, cupy=None):
    """Make tilenb's CUDA backend use a FakeCupy (returned): CuPy, the GPU probe and NVRTC
    (which returns an empty 'cubin') are replaced, and every cache starts empty in `cache_dir`."""
    import tilenb.api
    import tilenb.codegen.nvrtc as nv
    import tilenb.runtime.gpu.cuda as tc
    import tilenb.runtime.gpu as gpu
    cp = cupy or FakeCupy()
    monkeypatch.setenv("TILENB_CACHE_DIR", str(cache_dir))
    monkeypatch.setattr(tc, "_CP", cp)
    monkeypatch.setattr(tc, "_ND", None)
    monkeypatch.setattr(gpu, "gpu_available", lambda: True)
    monkeypatch.setattr(nv, "nvrtc_compile", lambda source, arch="sm_90", *a, **k: b"")
    tilenb.api.clear_caches()
    tc._target_of.cache_clear()
    tc._device_name.cache_clear()
    return cp


@contextlib.contextmanager
def installed(monkeypatch, cache_dir, cupy=None):
    """`install` (the FakeCupy is what the block receives) for the length of a with-block, the way
    the tests of the launch path use it: tilenb's compile progress lines off, the launch helpers
    that `install` would rebind with `_ND` (`_get_device`, `_prepack`) restored with the monkeypatch,
    and, on leaving, every cache emptied (tilenb's and the device probes'), so that nothing the
    stand-in made serves a later launch on a real GPU."""
    import tilenb.api
    import tilenb.runtime.gpu.cuda as tc
    monkeypatch.setattr(tc, "PROGRESS", False)
    for name in ("_get_device", "_prepack"):
        monkeypatch.setattr(tc, name, getattr(tc, name))
    cp = install(monkeypatch, cache_dir, cupy)
    try:
        yield cp
    finally:
        tilenb.api.clear_caches()
        tc._target_of.cache_clear()
        tc._device_name.cache_clear()
