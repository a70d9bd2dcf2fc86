"""The CUDA backend: generated CUDA C++, compiled by NVRTC, launched through CuPy.

Guarantees:
- `run_cuda(kernel, prepared, debug=False)` runs a launch that `tilenb.runtime.checks.prepare`
  checked. Tensor arguments may be numpy arrays (copied to the GPU; the tensors the kernel
  writes are copied back in place), CuPy arrays, or any GPU object with
  `__cuda_array_interface__` or DLPack (torch tensors): those are used in place, without a
  copy, unless their data pointer is not 16-byte aligned (then through an aligned copy, copied
  back if written). It returns None and records a `RunReport` in `kernel.last_run` (completed
  when read: its bytes and FLOPs, `traffic.launch_traffic`, are computed then, from the shapes
  and dims the launch had).
- Compilation is cached by generated source, options and architecture, in memory and on disk
  (`tilenb.codegen.nvrtc.cache_dir()`): a re-run cell does not recompile.
- @autotune: at the first call for a shape signature (runtime dims, dtypes, device), every
  variant the arguments fit is compiled and timed on the real arguments with CUDA events (the
  tensors the kernel writes are saved first and restored before every run, so the final result
  is that of exactly one run of the fastest variant). Variants that do not fit the device
  (shared memory, registers / threads per block) or that the backend cannot compile are skipped
  with a note. The choice is kept in memory and on disk; the per-variant timings are data in
  `kernel.timings[signature]` and `kernel.last_run.extra["timings"]`. A text progress line is
  printed per variant (`PROGRESS = False` silences it).
- Repeat launches: after a launch whose tensors are all GPU arrays (16-byte aligned, used in
  place) and whose other arguments are plain numbers, what the launch needed (the chosen
  variant's CuPy Function on that device, grid, block, shared memory, and the scalars and dims
  packed as CuPy passes them) is kept under a key of everything the launch checks depend on:
  the grid and variant asked for (with the type of each value that is not a plain int: a
  bool or a float grid is refused by the checks, so it never shares an int's entry), each
  argument's type, shape, strides, dtype and read-only flag, each scalar's type and value (and
  a zero's sign), and the device. A later call with an equal key (`run_cached`, straight from
  `Kernel.__call__` for a call without keywords, from `tilenb.runtime.launch.launch` for one
  with them) only passes the new arrays and launches exactly what the full path would (the
  same variant, grid, block, shared memory and packed arguments:
  tests/runtime/test_launch_fast_path.py); any other call takes the full path, every check
  included (a bad argument gets the same LaunchError as at a first call). A plain call
  `kernel(*arrays)` of CuPy arrays alone is first compared with the latest hit by a check
  written out for its number of arguments (`_straight`: the same comparison of that one entry,
  without building a key), which launches it or steps aside to `run_cached`. The cache is kept with the checked kernel, so a Module compiled again from the same
  text shares it. A repeat is queued on the current stream and the call returns, as a CuPy
  kernel launch does (full launches wait for the kernel): later work on that stream, a copy
  to the host or a synchronize sees its result; a fault in the kernel surfaces at the next
  synchronizing call. Its RunReport is built when `kernel.last_run` is read. Repeats are not
  timed unless `TIME_REPEATS` is True (then CUDA events are recorded around the launch, and
  reading `last_run` waits for the end event); untimed, `kernel_ms` is the one measured at the
  full launch that filled the cache entry, and the note says so.
- Errors reach the user as `TileError` subclasses (LaunchError, UnsupportedError).
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np

from ... import caches, ir
from ...lang.diagnostics import LaunchError, TileError, UnsupportedError
from ...target import STATIC_SMEM, Target, from_device, target as as_target
from ...types import DTYPES
from .tma import extra_args

PROGRESS = True
TIMING_REPEATS = 5
_lock = threading.Lock()
_generated: Dict[int, tuple] = {}        # id(kir) -> (kir, KernelSource)
_loaded: Dict[Tuple[str, str], object] = {}   # (sha of source, NVRTC arch) -> cupy RawKernel
_tuned: Dict[str, dict] = {}


def clear_cache() -> None:
    """Forget the generated sources, loaded kernels and autotune choices kept in memory (the
    choices saved on disk stay, and are read again at the next launch that needs them)."""
    _generated.clear()
    _loaded.clear()
    _tuned.clear()


caches.register(__name__, clear_cache)

_CP = None


def _cupy():
    global _CP
    if _CP is not None:
        return _CP
    try:
        import cupy  # noqa: PLC0415
        _CP = cupy
        return cupy
    except ImportError as e:
        raise TileError(f"the CUDA backend needs CuPy ({e}); install cupy-cuda12x or cupy-cuda13x, or compile "
                        f"with backend='cpu'") from None


def device_target() -> Target:
    """The current GPU's `tilenb.target.Target`: its compute capability and the shared-memory
    limits its driver reports (cached per device)."""
    cp = _cupy()
    return _target_of(cp.cuda.Device().id)


def device_arch() -> str:
    """The current GPU's target name ("sm_90")."""
    return device_target().name


@functools.lru_cache(maxsize=None)
def _target_of(device_id: int) -> Target:
    dev = _cupy().cuda.Device(device_id)
    cc = str(dev.compute_capability)             # "90", "100", "120"
    attrs = dev.attributes                       # one query of every attribute
    return from_device((int(cc[:-1]), int(cc[-1])), attrs.get("MaxSharedMemoryPerBlockOptin"),
                       attrs.get("MaxSharedMemoryPerMultiprocessor"), attrs.get("ReservedSharedMemoryPerBlock"))


def kernel_source(kernel, kir: ir.KernelIR, arch="device"):
    """The generated `KernelSource` of one variant, cached by what determines it: the source
    text, its line offset, the kernel, the @autotune values and the target (any spelling
    `tilenb.target.target` accepts, or a Target: sm_90 lowers GEMM loops to TMA + wgmma; None:
    code for any target; by default the current device's) (a re-run cell that compiles the same
    text again reuses it)."""
    from ...codegen import generate  # noqa: PLC0415
    if isinstance(arch, str) and arch == "device":   # the current GPU's, where there is one
        try:
            arch = device_target()
        except Exception:  # no CuPy or no device: code for any target
            arch = None
    arch = as_target(arch)
    src = kernel.module.checked.source
    key = (hashlib.sha256(src.text.encode()).hexdigest(), src.line_offset, kir.name,
           tuple(sorted(kir.tune.items())), arch)
    with _lock:
        hit = _generated.get(key)
    if hit is not None:
        return hit
    ks = generate(kir, src.text, src.line_offset, arch=arch)
    with _lock:
        _generated[key] = ks
    return ks


def compile_target(ks, arch) -> Target:
    """The Target a KernelSource is compiled for: the one its source names (`ks.arch`, sm_90a
    for wgmma), else `arch` (a Target or a spelling of one)."""
    return as_target(getattr(ks, "arch", None) or arch)


def cubin_path(ks, arch):
    """A file that holds the cubin of `ks` for target `arch` (compiled when no cache has it), under
    a name of its own (`cache_dir()/cubin/<sha of the source>_<arch>.cubin`, for tools such as
    cuobjdump); made when first asked for, not at the launch (`load_kernel` loads the NVRTC
    disk-cache file itself). Raises OSError where the cache directory cannot be written."""
    from ...codegen import nvrtc  # noqa: PLC0415
    tgt = compile_target(ks, arch)
    path = _cubin_name(hashlib.sha256(ks.source.encode()).hexdigest(), tgt)
    cubin = nvrtc.nvrtc_compile(ks.source, tgt)
    if not path.exists() or path.read_bytes() != cubin:
        _put_file(path, cubin, nvrtc.cached_file(cubin))
    return path


def _cubin_name(sha: str, tgt: Target):
    from ...codegen.nvrtc import cache_dir  # noqa: PLC0415
    return cache_dir() / "cubin" / f"{sha}_{tgt.nvrtc_arch()}.cubin"


def load_kernel(ks, arch):
    """The CuPy RawKernel of a KernelSource for the target `arch` (a Target or a spelling of
    one; compiled once, cached); a source that names its own target (`ks.arch`, e.g. sm_90a for
    wgmma) is compiled for that. The module is loaded from the file NVRTC's disk cache keeps the
    cubin in (`nvrtc.cached_file`), so a cold launch writes the cubin once; where there is no
    such file (an unwritable cache directory) from a file of its own (`cubin_path`), else a
    temporary file."""
    cp = _cupy()
    from ...codegen import nvrtc  # noqa: PLC0415
    tgt = compile_target(ks, arch)
    sha = hashlib.sha256(ks.source.encode()).hexdigest()
    key = (sha, tgt.nvrtc_arch())
    with _lock:
        fn = _loaded.get(key)
    if fn is not None:
        return fn
    cubin = nvrtc.nvrtc_compile(ks.source, tgt)
    path = nvrtc.cached_file(cubin)
    try:
        if path is None:
            path = _cubin_name(sha, tgt)
            if not path.exists() or path.read_bytes() != cubin:
                _put_file(path, cubin)
        mod = cp.RawModule(path=str(path))
    except OSError:
        import tempfile  # noqa: PLC0415
        with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
            f.write(cubin)
        mod = cp.RawModule(path=f.name)
    fn = mod.get_function(ks.symbol)
    with _lock:
        _loaded[key] = fn
    return fn


def _put_file(path, data: bytes, same=None):
    """Make `path` hold `data`, atomically (under a temporary name, then renamed): a hard link to
    `same`, a file that holds these bytes (NVRTC's disk-cache entry), where the file system
    allows one, else a copy. Raises OSError when the directory cannot be written."""
    if not path.parent.is_dir():
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    if same is not None:
        try:
            os.link(same, tmp)
            if os.stat(tmp).st_size == len(data):
                os.replace(tmp, path)
                return
        except OSError:   # another file system, no hard links, or `same` gone
            pass
    try:
        os.remove(tmp)    # never write through a link to another file
    except FileNotFoundError:
        pass
    tmp.write_bytes(data)
    os.replace(tmp, path)


# ---- arguments -----------------------------------------------------------------------------
@dataclass
class _DeviceArgs:
    args: tuple
    copy_back: List[tuple]          # (device array, host array view) to copy after the run
    keep: list                      # objects that must outlive the launch
    written_ptrs: List[Tuple[int, int]]   # (device pointer, bytes) of every written tensor
    tensors: Dict[str, Tuple[int, Tuple[int, ...]]] = None   # name -> (device pointer, extents)


def _ptr_of(a) -> int:
    if a.ptr is not None:
        return int(a.ptr)
    obj = a.obj
    if hasattr(obj, "data_ptr"):
        return int(obj.data_ptr())
    cp = _cupy()
    return int(cp.from_dlpack(obj).data.ptr)


def to_host(a) -> np.ndarray:
    """A host copy (numpy, C order, the argument's shape and dtype) of the GPU array behind the
    bound argument `a` (a `checks.ArrayArg` with no host view), taken after the device has
    finished the work queued before it (the argument's producers)."""
    cp = _cupy()
    cp.cuda.Device().synchronize()
    host = np.empty(a.shape, a.dtype)
    if host.nbytes:
        cp.cuda.runtime.memcpy(host.__array_interface__["data"][0], _ptr_of(a), host.nbytes, 2)  # device to host
    return host


def _nbytes(a, dt: str) -> int:
    n = 1
    for s in a.shape:
        n *= int(s)
    return n * DTYPES[dt].itemsize


def _device_args(kir: ir.KernelIR, bound, written) -> _DeviceArgs:
    cp = _cupy()
    args, back, keep, wptrs, tens = [], [], [], [], {}
    for p in kir.params:
        s = p.sym
        if isinstance(s.type, ir.TensorT):
            a = bound.tensors[s.name]
            dt = s.type.dtype
            nbytes = _nbytes(a, dt)
            if a.device == "cuda":
                ptr = _ptr_of(a)
                if ptr % 16 and nbytes:
                    tmp = cp.empty(nbytes, dtype=cp.uint8)
                    cp.cuda.runtime.memcpy(tmp.data.ptr, ptr, nbytes, 3)
                    keep.append(tmp)
                    if s.name in written:
                        back.append(("d2d", tmp, ptr, nbytes))
                    ptr = tmp.data.ptr
                keep.append(a.obj)
            else:
                host = a.host
                if s.name in written and a.readonly:
                    raise LaunchError(f"kernel '{kir.name}': argument '{s.name}' is read-only, but the kernel writes it")
                hv = host.view(np.uint16) if dt == "bf16" else host
                dev = cp.asarray(np.ascontiguousarray(hv))
                keep.append(dev)
                ptr = dev.data.ptr if dev.size else 0
                if s.name in written:
                    back.append(("d2h", dev, hv, nbytes))
            if s.name in written:
                wptrs.append((ptr, nbytes))
            tens[s.name] = (int(ptr), tuple(int(x) for x in a.shape))
            args.append(np.uint64(ptr))
        else:
            dt = s.type.dtype
            v = bound.scalars[s.name]
            if dt in ("f16", "bf16"):
                v = np.asarray(v, dtype=DTYPES[dt].numpy).view(np.uint16)[()]
            else:
                v = DTYPES[dt].numpy.type(v)
            args.append(v)
    for dname in kir.dims:
        args.append(np.int64(bound.dims[dname]))
    return _DeviceArgs(tuple(args), back, keep, wptrs, tens)


def _copy_back(da: _DeviceArgs):
    cp = _cupy()
    for kind, dev, dst, nbytes in da.copy_back:
        if kind == "d2h":
            if nbytes:
                dev.get(out=dst)
        else:
            cp.cuda.runtime.memcpy(dst, dev.data.ptr, nbytes, 3)


# ---- launching -------------------------------------------------------------------------------
def dynamic_smem_bytes(ks) -> int:
    """The dynamic shared memory a launch of `ks` passes: the `tnb_smem` array of the analysis'
    shared-memory map when it is dynamic (`Analysis.smem`, which the generated code follows), else 0."""
    m = getattr(ks, "smem", None)
    if m is not None:
        return m.array_bytes if m.dynamic else 0
    return ks.smem_bytes if ks.dynamic_smem else 0


def _launch(fn, ks, grid, da: _DeviceArgs):
    cp = _cupy()
    shared = dynamic_smem_bytes(ks)
    if ks.dynamic_smem and shared > STATIC_SMEM:     # beyond the static 48 KB: the launch opts in
        fn.max_dynamic_shared_size_bytes = shared
    args = da.args + extra_args(ks, da.tensors) if getattr(ks, "tmaps", ()) else da.args
    try:
        fn(tuple(grid), (ks.threads, 1, 1), args, shared_mem=shared)
    except cp.cuda.driver.CUDADriverError as e:
        raise LaunchError(f"kernel '{ks.symbol}': the CUDA launch failed: {e}") from None


def _fits(fn, ks) -> Optional[str]:
    """None if the variant can run on this device, else why not."""
    cp = _cupy()
    tgt = _target_of(cp.cuda.runtime.getDevice())
    optin = tgt.dynamic_smem
    need = getattr(ks, "smem_footprint", ks.smem_bytes)     # its static arrays too (Analysis.footprint)
    if need > optin or ks.smem_bytes > tgt.smem_limit(ks.dynamic_smem):
        return f"needs {need} bytes of shared memory; the device allows {optin} per block"
    try:
        mt = int(fn.max_threads_per_block)
        regs = int(fn.num_regs)
    except Exception:  # attribute query unsupported: let the launch decide
        return None
    if mt < ks.threads:
        return (f"uses {regs} registers per thread, so at most {mt} threads fit a CTA; the kernel has "
                f"@launch({ks.threads})")
    return None


@functools.lru_cache(maxsize=None)
def _device_name(device_id: int) -> str:
    """The device's name (cached: getDeviceProperties costs about a millisecond a call)."""
    cp = _cupy()
    try:
        name = cp.cuda.runtime.getDeviceProperties(device_id)["name"]
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # a name only labels cache entries; any failure gets a generic one
        return "gpu"


def _signature(kernel, launch, arch: str) -> str:
    cp = _cupy()
    name = _device_name(cp.cuda.Device().id)
    b = launch.bound
    dims = ",".join(f"{k}={v}" for k, v in sorted(b.dims.items()))
    src = hashlib.sha256(kernel.module.checked.source.text.encode()).hexdigest()[:16]
    return f"{kernel.name}|{src}|{name}|{arch}|{dims}"


def _tune_path():
    from ...codegen.nvrtc import cache_dir  # noqa: PLC0415
    return cache_dir() / "autotune.json"


def _tuned_get(sig: str) -> Optional[dict]:
    with _lock:
        if sig in _tuned:
            return _tuned[sig]
    try:
        data = json.loads(_tune_path().read_text())
        hit = data.get(sig)
    except (OSError, ValueError):
        hit = None
    if hit is not None:
        with _lock:
            _tuned[sig] = hit
    return hit


def _tuned_put(sig: str, entry: dict):
    with _lock:
        _tuned[sig] = entry
    p = _tune_path()
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        try:
            data = json.loads(p.read_text())
        except (OSError, ValueError):
            data = {}
        data[sig] = entry
        tmp = p.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, p)
    except OSError:
        pass


def _label(tune: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in tune.items()) or "the only variant"


def _say(msg: str):
    if PROGRESS:
        print(msg, file=sys.stdout, flush=True)


def _time_variant(fn, ks, grid, da, saved, repeats: int) -> float:
    """Median milliseconds of `repeats` runs, outputs restored before each."""
    cp = _cupy()
    times = []
    start, end = cp.cuda.Event(), cp.cuda.Event()
    for _ in range(repeats):
        _restore(saved)
        start.record()
        _launch(fn, ks, grid, da)
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end))
    times.sort()
    return float(times[len(times) // 2])


def _save(da: _DeviceArgs):
    cp = _cupy()
    out = []
    for ptr, nbytes in da.written_ptrs:
        if nbytes:
            buf = cp.empty(nbytes, dtype=cp.uint8)
            cp.cuda.runtime.memcpy(buf.data.ptr, ptr, nbytes, 3)
            out.append((ptr, buf, nbytes))
    return out


def _restore(saved):
    cp = _cupy()
    for ptr, buf, nbytes in saved:
        cp.cuda.runtime.memcpy(ptr, buf.data.ptr, nbytes, 3)


# ---- repeat launches: the minimum Python work for a call that repeats an earlier one -----------
REPEAT_CACHE_SIZE = 64       # keys kept per kernel (cleared when full)
TIME_REPEATS = False         # True: repeats record CUDA events around the launch (last_run's kernel_ms)
STRAIGHT = True              # False: no straight-line check is made for a hot entry (`_straight`; to compare)
_SCALAR_TYPES = (int, float, bool, np.integer, np.floating, np.bool_)
_ND = None                   # cupy.ndarray; set with the two below by _bind_cupy() on first use
_get_device = None           # cupy.cuda.runtime.getDevice
_prepack = None              # a packed numpy scalar -> the object CuPy's launch passes as it is


def _bind_cupy():
    """Bind the CuPy names the repeat path uses, once (again after a test swaps CuPy); returns the
    array type. `_prepack`: at every launch CuPy turns each numpy scalar argument into a
    `cupy._core._scalar.CScalar` (a `cupy.cuda.function.CPointer`: a pointer to the value's bytes)
    and passes a CPointer as it is, so a repeat's scalars and dims are made CScalars once, when
    the cache entry is made; where CuPy has no such class (another version, the tests' stand-in)
    they stay numpy scalars, which CuPy packs itself."""
    global _ND, _get_device, _prepack
    cp = _cupy()
    _prepack = _no_prepack
    if cp is sys.modules.get("cupy"):
        try:
            from cupy._core._scalar import CScalar  # noqa: PLC0415
            from cupy.cuda.function import CPointer  # noqa: PLC0415
            if issubclass(CScalar, CPointer):
                _prepack = CScalar
        except ImportError:
            pass
    _get_device = cp.cuda.runtime.getDevice
    _ND = cp.ndarray
    return _ND


def _no_prepack(v):
    return v


@dataclass
class _Repeat:
    """What a repeat of one launch needs, prepared by the full launch that made the entry."""
    fn: object                      # the chosen variant's CuPy Function on the key's device
    ks: object                      # its KernelSource
    grid: Tuple[int, int, int]
    block: Tuple[int, int, int]
    shared: int                     # dynamic shared-memory bytes of the launch
    fixed: Tuple[Tuple[int, object], ...]   # (argument index, packed value) of every scalar argument
    tail: tuple                     # packed runtime dims, after the arguments
    tune: Dict[str, int]
    note: str
    extra: dict
    events: tuple                   # (start, end) CUDA events, reused by every repeat
    others: tuple = ()              # argument index of each GPU array that is not a CuPy array
    tensors: tuple = ()             # (argument index, name, extents) of each tensor, for tensor maps
    tmaps: bool = False             # the kernel takes tensor maps (rebuilt per launch)
    timed: bool = False             # whether the latest launch from this entry recorded the events
    traffic: object = None          # the launch's `_Traffic` (its bytes and FLOPs, filled into extra when read)

    def report(self, kernel):
        """The RunReport of the latest launch from this entry (built when someone reads
        `kernel.last_run`; when timed, it waits for the launch's end event first)."""
        from ..checks import RunReport  # noqa: PLC0415
        if self.traffic is not None:
            self.traffic.fill(self.extra)
        extra = dict(self.extra)
        note = self.note
        if self.timed:
            cp = _cupy()
            try:
                self.events[1].synchronize()
            except cp.cuda.runtime.CUDARuntimeError as e:
                raise LaunchError(f"kernel '{kernel.name}' failed on the GPU: {e}") from None
            ms = cp.cuda.get_elapsed_time(*self.events)
            extra["kernel_ms"] = ms
        else:   # TIME_REPEATS off: the time of the launch this entry was made from
            ms = extra.get("kernel_ms") or 0.0
            note += ("; repeats are not timed (set tilenb.runtime.gpu.cuda.TIME_REPEATS = True to time each): "
                     "kernel_ms is that of the first launch with these arguments")
        g = self.grid
        return RunReport("cuda", kernel.name, dict(self.tune), note, g, self.ks.threads, g[0] * g[1] * g[2],
                         ms / 1e3, False, extra)


def _typed(v):
    """A grid or @autotune value as a key part that equals another only where the launch checks
    read both alike: a plain int stays as it is, anything else (a numpy integer, a bool, a float
    that the checks refuse) goes with its type, since 1 == True == 1.0 and they hash alike."""
    if type(v) is int:
        return v
    if type(v) is tuple:
        for x in v:
            if type(x) is not int:
                return tuple(x if type(x) is int else (type(x), x) for x in v)
        return v          # a tuple of plain ints (the common grid) as it is
    return (type(v), v)


def run_cached(kernel, grid, args, variant=None, debug=None, look=True):
    """`kernel[grid](*args, variant=variant)` from the cache when it repeats an earlier launch:
    True when it was launched; otherwise the call's key (key, args, pointers), for the full
    path to remember its launch under, or None when the call must take the full path and is
    not remembered (host arrays, misaligned pointers, a debug launch, unusual argument objects).
    debug: the launch's (None: the module's); look=False: only compute the key.

    The key holds every input of the launch checks: the grid and variant asked for (each value
    with its type unless it is a plain int: `_typed`), the device, and per argument: a CuPy
    array's shape, strides and dtype (three items: two tuples of ints and a dtype); another GPU
    array's type, shape, strides, typestr, read-only flag (and dtype for void typestrs); a
    scalar's type and value (and, for a zero, its sign). The key is flat (a nested one costs
    more to hash and compare), yet unambiguous: every argument but a CuPy array is one tuple
    that starts with a type. A CuPy array is passed to the kernel as it is (CuPy passes its
    data pointer); `pointers` lists the data pointers of the other GPU arrays, in argument order
    (None when there are none); a scalar's packed value is kept with the cache entry. The
    kernel's latest hit is compared first, as a list (no hashing): a loop that launches one
    signature again and again pays for reading each argument's shape, strides and dtype, and
    one comparison.

    A repeat is queued on the current stream and the call returns (as a CuPy kernel launch
    does); its RunReport is built when `kernel.last_run` is read."""
    if (kernel.module.debug if debug is None else debug) or kernel._repeat is None:   # not on CUDA: no cache
        return None
    nd = _ND
    ptrs = None
    try:
        if nd is None:
            nd = _bind_cupy()
        if type(args) is not tuple:
            args = tuple(args)
        if variant is not None:
            variant = (tuple((k, _typed(v)) for k, v in sorted(variant.items())) if isinstance(variant, dict)
                       else _typed(variant))
        key = [grid if grid is None or type(grid) is int else _typed(grid), variant, _get_device()]
        add = key.append
        for a in args:
            t = type(a)
            if t is nd:             # CuPy arrays: their own attributes (the interface dict costs more)
                if a.data.ptr & 15:
                    return None
                key += (a.shape, a.strides, a.dtype)
            elif t is float or t is int or t is bool or isinstance(a, _SCALAR_TYPES):
                # 0.0 == -0.0 (and they hash alike): a zero's sign is part of the key
                add((t, a) if a else (t, a, math.copysign(1.0, a)))
            elif isinstance(a, np.ndarray):
                return None
            else:
                cai = getattr(a, "__cuda_array_interface__", None)
                if cai is None:
                    return None
                ptr, ro = cai["data"]
                if ptr % 16:
                    return None
                ts = cai["typestr"]
                if ptrs is None:
                    ptrs = []
                ptrs.append(int(ptr))
                add((t, tuple(cai["shape"]), cai.get("strides"), ts, ro,
                     str(getattr(a, "dtype", "")) if "V" in ts else None))
    except Exception:   # no CuPy, or anything odd (a property that raises, no device): the full path decides
        return None
    if not look:
        return tuple(key), args, ptrs
    hot = kernel._hot
    if hot is not None and hot[0] == key:
        r = hot[1]
    else:
        try:
            r = kernel._repeat.get(tuple(key))
        except TypeError:   # an unhashable part (a list inside the grid tuple, say)
            return None
        if r is None:
            return tuple(key), args, ptrs
        kernel._hot = (key, r)
        kernel._fast = _straight(kernel, key, r)
    if r.fixed or ptrs or r.tmaps:
        _launch_entry(kernel, r, args, ptrs)
        return True
    try:                  # the common case inline: CuPy arrays only, no scalars, no tensor maps
        if TIME_REPEATS:
            start, end = r.events
            start.record()
            r.fn(r.grid, r.block, args + r.tail, r.shared)
            end.record()
            r.timed = True
        else:
            r.fn(r.grid, r.block, args + r.tail, r.shared)
            r.timed = False
    except _CP.cuda.driver.CUDADriverError as e:
        raise LaunchError(f"kernel '{r.ks.symbol}': the CUDA launch failed: {e}") from None
    kernel._pending = r
    return True


_STRAIGHT: Dict[int, object] = {}   # number of arguments -> the factory of its straight-line check


def _straight(kernel, key, r):
    """The straight-line check of `Kernel.__call__` (`kernel._fast`) for the hot entry `r` under
    `key`, or None where it does not apply: a call without a grid or variant whose arguments
    are all CuPy arrays (no scalars, no other GPU objects, no tensor maps). It is `run_cached`'s
    comparison with that one entry, unrolled for its number of arguments: a call launches from
    it only when every argument is a CuPy array (`type(a) is cupy.ndarray`), their data
    pointers are 16-byte aligned, the current device is the key's and each array's shape,
    strides and dtype equal those of the key (compared as one tuple, as the key's list is),
    with the module's debug off and TIME_REPEATS off; any other call returns False and takes
    `run_cached`, which decides as before. So it launches
    nothing that `run_cached` would not launch from the same entry (the hypothesis test in
    tests/runtime/test_launch_fast_path.py runs both against the full path)."""
    if not STRAIGHT or key[0] is not None or key[1] is not None or r.fixed or r.others or r.tmaps or TIME_REPEATS:
        return None
    n, extra = divmod(len(key) - 3, 3)
    if extra or not 1 <= n <= 32:
        return None
    make = _STRAIGHT.get(n)
    if make is None:
        make = _STRAIGHT[n] = _straight_factory(n)
    return make(_ND, tuple(key[3:]) + (key[2],), kernel.module, r, r.fn, r.grid, r.block, r.tail, r.shared)


def _straight_factory(n: int):
    """Compile the factory of the straight-line check for calls of `n` arguments (see
    `_straight`): Python source written out for that arity, so that the check is the arrays'
    types, then one comparison of a tuple of their shapes, strides and dtypes and the device with
    the entry's, then their alignment: no loop and no key built."""
    a = [f"a{i}" for i in range(n)]
    types = " or ".join(f"type({x}) is not ND" for x in a)
    facts = ", ".join(f"{x}.shape, {x}.strides, {x}.dtype" for x in a)
    aligned = " | ".join(f"{x}.data.ptr" for x in a)
    text = (f"def make(ND, SIG, M, R, FN, GRID, BLOCK, TAIL, SHARED):\n"
            f"    def fast(kernel, args):\n"
            f"        if TIME_REPEATS or M.debug or len(args) != {n}:\n"
            f"            return False\n"
            f"        {', '.join(a)}, = args\n"
            f"        if {types}:\n"
            f"            return False\n"
            f"        if ({facts}, _get_device()) != SIG or ({aligned}) & 15:\n"
            f"            return False\n"
            f"        try:\n"
            f"            FN(GRID, BLOCK, args + TAIL, SHARED)\n"
            f"        except _CP.cuda.driver.CUDADriverError as e:\n"
            f"            raise LaunchError(f\"kernel '{{R.ks.symbol}}': the CUDA launch failed: {{e}}\") from None\n"
            f"        R.timed = False\n"
            f"        kernel._pending = R\n"
            f"        return True\n"
            f"    return fast\n")
    space: dict = {}
    exec(compile(text, f"<tilenb straight-line launch check, {n} arguments>", "exec"), globals(), space)
    return space["make"]


def _launch_entry(kernel, r, args, ptrs):
    """Launch cache entry `r` with this call's arrays: its packed scalars and dims in place, the
    data pointers `ptrs` of GPU arrays that are not CuPy arrays, tensor maps rebuilt for the new
    pointers where the kernel takes them; queued on the current stream."""
    if r.fixed or ptrs:             # scalars: their packed values; other GPU arrays: their pointers
        a = list(args)
        for i, v in r.fixed:
            a[i] = v
        if ptrs:
            for i, p in zip(r.others, ptrs):
                a[i] = p
        args = tuple(a)
    if r.tmaps:   # tensor maps hold the data pointers: rebuilt (cached by pointer and shape)
        tens = {}
        for i, name, extents in r.tensors:
            p = args[i]
            tens[name] = (p if type(p) is int else p.data.ptr, extents)
        args = args + r.tail + extra_args(r.ks, tens)
    else:
        args += r.tail
    try:
        if TIME_REPEATS:
            start, end = r.events
            start.record()
            r.fn(r.grid, r.block, args, r.shared)
            end.record()
            r.timed = True
        else:
            r.fn(r.grid, r.block, args, r.shared)
            r.timed = False
    except _CP.cuda.driver.CUDADriverError as e:
        raise LaunchError(f"kernel '{r.ks.symbol}': the CUDA launch failed: {e}") from None
    kernel._pending = r


def _remember(kernel, rk, fn, ks, run, da, note, extra, traffic=None):
    """Keep what a repeat of this full launch needs, under the call's key (see `run_cached`);
    nothing when the launch copied data in or back, or the arguments do not line up with the
    parameters as the checks saw them."""
    if rk is None or da.copy_back:
        return
    key, args, _ = rk
    params = run.kir.params
    cache = getattr(kernel, "_repeat", None)
    if cache is None or len(params) != len(args):
        return
    _bind_cupy()
    fixed, others, tensors = [], [], []
    for i, (p, v) in enumerate(zip(params, args)):
        is_tensor = isinstance(p.sym.type, ir.TensorT)
        if is_tensor == isinstance(v, _SCALAR_TYPES):
            return
        if is_tensor:
            tensors.append((i, p.sym.name, da.tensors[p.sym.name][1]))
            if type(v) is not _ND:
                others.append(i)
        else:
            fixed.append((i, _prepack(da.args[i])))
    if len(cache) >= REPEAT_CACHE_SIZE:
        cache.clear()
    # A RawKernel call looks up its Function for the current device and passes keywords on
    # every launch; the key holds the device, so the entry keeps that device's Function.
    try:
        fn = fn.kernel
    except AttributeError:   # already a Function (the tests' stand-in)
        pass
    shared = dynamic_smem_bytes(ks)
    cp = _cupy()
    r = _Repeat(fn, ks, tuple(run.grid), (ks.threads, 1, 1), shared, tuple(fixed),
                tuple(_prepack(v) for v in da.args[len(params):]), dict(run.tune),
                note + " (a repeat of an earlier call: launched from the cache)", extra,
                (cp.cuda.Event(), cp.cuda.Event()), tuple(others), tuple(tensors), bool(getattr(ks, "tmaps", ())),
                traffic=traffic)
    try:
        cache[key] = r
    except TypeError:
        pass


def run_cuda(kernel, prepared, debug: bool = False, repeat=None):
    """Run a checked launch on the GPU (see the module docstring). Returns None.
    repeat: the key `run_cached(...)` gave for the call, to remember this launch for repeats (or None).
    debug: a debug launch (`tilenb.runtime.launch` then checks it on the reference executor):
    reported as one, and not remembered for repeats."""
    from ..checks import RunReport, written_tensors  # noqa: PLC0415
    cp = _cupy()
    tgt = device_target()
    arch = tgt.name                     # names the device in autotune signatures and the report
    chosen = prepared.chosen
    cands = (chosen,) if prepared.explicit or len(prepared.candidates) == 1 else tuple(prepared.candidates)
    written = written_tensors(chosen.kir)
    da = _device_args(chosen.kir, chosen.bound, written)
    timings: List[dict] = []
    note = ""
    t0 = time.perf_counter()
    loaded = None
    if len(cands) == 1:
        ks = kernel_source(kernel, chosen.kir, tgt)
        fn = load_kernel(ks, tgt)
        loaded = (ks, fn)
        why = _fits(fn, ks)
        if why:
            raise LaunchError(f"kernel '{kernel.name}' ({_label(chosen.tune)}) cannot run on this GPU: {why}")
        run = chosen
        note = "No @autotune: one variant." if not chosen.tune else (
            "The call named this variant." if prepared.explicit else "The only @autotune variant that fits.")
    else:
        sig = _signature(kernel, chosen, arch)
        hit = _tuned_get(sig)
        by_label = {_label(c.tune): c for c in cands}
        if hit is not None and hit.get("best") in by_label:
            run = by_label[hit["best"]]
            timings = list(hit.get("timings", []))
            note = f"@autotune: {hit['best']} (chosen earlier for these shapes on this device; cached)."
        else:
            saved = _save(da)
            n = len(cands)
            best, best_ms = None, None
            for i, c in enumerate(cands):
                lab = _label(c.tune)
                entry = {"variant": lab, "tune": dict(c.tune), "ms": None, "note": ""}
                try:
                    ks = kernel_source(kernel, c.kir, tgt)
                    fn = load_kernel(ks, tgt)
                    why = _fits(fn, ks)
                    if why:
                        entry["note"] = "skipped: " + why
                    else:
                        cda = da   # every variant takes the same arguments in the same order
                        _restore(saved)
                        _launch(fn, ks, c.grid, cda)      # warm-up (module load, caches)
                        cp.cuda.Device().synchronize()
                        ms = _time_variant(fn, ks, c.grid, cda, saved, TIMING_REPEATS)
                        entry["ms"] = ms
                        if best_ms is None or ms < best_ms:
                            best, best_ms = c, ms
                except (UnsupportedError, LaunchError) as e:
                    entry["note"] = f"skipped: {e.message}"
                timings.append(entry)
                shown = f"{entry['ms']:.4f} ms" if entry["ms"] is not None else entry["note"]
                _say(f"tilenb autotune {kernel.name} [{i + 1}/{n}] {lab}: {shown}")
            if best is None:
                raise LaunchError(f"kernel '{kernel.name}': no @autotune variant can run on this GPU: " +
                                  "; ".join(f"{t['variant']}: {t['note']}" for t in timings))
            _restore(saved)
            run = best
            _tuned_put(sig, {"best": _label(best.tune), "timings": timings})
            note = f"@autotune: timed {sum(t['ms'] is not None for t in timings)} variant(s); kept {_label(best.tune)} ({best_ms:.4f} ms)."
    if loaded is not None:   # the one candidate, loaded above
        ks, fn = loaded
    else:
        ks = kernel_source(kernel, run.kir, tgt)
        fn = load_kernel(ks, tgt)
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    _launch(fn, ks, run.grid, da)
    end.record()
    end.synchronize()
    try:
        cp.cuda.Device().synchronize()
    except cp.cuda.runtime.CUDARuntimeError as e:
        raise LaunchError(f"kernel '{kernel.name}' failed on the GPU: {e}") from None
    ms = cp.cuda.get_elapsed_time(start, end)
    _copy_back(da)
    ctas = run.grid[0] * run.grid[1] * run.grid[2]
    extra = {"arch": arch, "smem_bytes": ks.smem_bytes, "kernel_ms": ms, "timings": timings,
             "symbol": ks.symbol, "wall_s": time.perf_counter() - t0}
    traffic = _Traffic(run.kir, run.bound, tuple(run.grid))
    if timings:
        if not hasattr(kernel, "timings") or not isinstance(getattr(kernel, "timings", None), dict):
            kernel.timings = {}
        kernel.timings[_signature(kernel, chosen, arch)] = timings
    kernel.last_run = None
    kernel._pending = _Later(RunReport("cuda", kernel.name, dict(run.tune), note, tuple(run.grid), ks.threads, ctas,
                                       ms / 1e3, debug, extra), traffic)
    if not debug:
        _remember(kernel, repeat, fn, ks, run, da, note, extra, traffic)
    return None


class _Traffic:
    """The bytes, FLOPs and dims of a launch (`traffic.launch_traffic`), computed when a report
    first needs them, from the shapes, dtypes and dims the launch had (the arguments themselves are
    not kept). `fill(extra)` adds "bytes", "flops" and "dims" to a RunReport's extra dict."""

    __slots__ = ("kir", "bound", "grid", "done")

    def __init__(self, kir, bound, grid):
        from types import SimpleNamespace as NS  # noqa: PLC0415
        self.kir, self.grid, self.done = kir, grid, None
        self.bound = NS(tensors={n: NS(shape=tuple(a.shape), dtype=a.dtype) for n, a in bound.tensors.items()},
                        dims=dict(bound.dims))

    def fill(self, extra: dict) -> dict:
        if self.done is None:
            from .traffic import launch_traffic  # noqa: PLC0415
            self.done = launch_traffic(self.kir, self.bound, self.grid)
            self.kir = self.bound = None
        if "bytes" not in extra:
            nbytes, flops, dims = self.done
            extra.update(bytes=nbytes, flops=flops, dims=dict(dims))
        return extra


class _Later:
    """A full launch's RunReport, completed when `kernel.last_run` is read (its traffic figures
    are computed then, off the launch's way)."""

    __slots__ = ("run", "traffic")

    def __init__(self, run, traffic):
        self.run, self.traffic = run, traffic

    def report(self, kernel):
        self.traffic.fill(self.run.extra)
        return self.run
