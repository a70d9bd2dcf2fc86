"""NVRTC: CUDA C++ text -> cubin (or PTX), with or without CuPy and a GPU.

Guarantees:
- `nvrtc_compile(source, arch)` returns the cubin (arch "sm_80", "sm_90", 90, a
  `tilenb.target.Target`, ...: any spelling `tilenb.target.target` accepts) or PTX (arch spelled
  "compute_80", ..., or ptx=True) as bytes, or raises `CudaCompileError` carrying NVRTC's log.
  The option NVRTC gets is the target's (`Target.nvrtc_arch`: an sm_90 target compiles as sm_90a,
  so the source `cuda_source(arch=a)` generates compiles with `nvrtc_compile(source, a)`). It uses
  CuPy's NVRTC binding when CuPy imports, else loads libnvrtc with ctypes: from the
  `nvidia-cuda-nvrtc-cu12` wheel (nvidia/cuda_nvrtc/lib/libnvrtc.so.12), the cu13 wheel
  layout, $CUDA_PATH / $CUDA_HOME, /usr/local/cuda, or the loader's search path. No GPU and no
  header is needed: the generated code includes none.
- Results are cached in memory and on disk (`cache_dir()`, default ~/.cache/tilenb, or
  $TILENB_CACHE_DIR), keyed by the SHA-256 of source, options, architecture and NVRTC version;
  a re-run cell never recompiles.
- `nvrtc_available()` never raises; `NvrtcUnavailable` says where it looked.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import hashlib
import os
import threading
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from .. import caches
from ..lang.diagnostics import UnsupportedError
from ..target import target

DEFAULT_OPTIONS = ("-std=c++17", "-lineinfo")


class CudaCompileError(UnsupportedError):
    """NVRTC rejected the generated CUDA (a code-generator bug, or an unsupported target).

    `.log` holds NVRTC's messages; `.source` the CUDA text."""

    def __init__(self, message, log: str = "", source: str = ""):
        super().__init__(message)
        self.log = log
        self.source = source


class NvrtcUnavailable(UnsupportedError):
    """No NVRTC library could be loaded (install the `nvidia-cuda-nvrtc-cu12` wheel)."""


_lock = threading.Lock()
_mem_cache: Dict[str, bytes] = {}
_files: Dict[int, Tuple[bytes, Path]] = {}   # id(result) -> (result, the disk-cache file holding it)


def clear_cache() -> None:
    """Forget the NVRTC results kept in memory (the disk cache, `cache_dir()`, stays)."""
    _mem_cache.clear()
    _files.clear()


caches.register(__name__, clear_cache)
_lib = None
_lib_error: Optional[str] = None


def cache_dir() -> Path:
    d = os.environ.get("TILENB_CACHE_DIR")
    return Path(d) if d else Path.home() / ".cache" / "tilenb"


def _candidates() -> List[str]:
    out = []
    env = os.environ.get("TILENB_NVRTC")
    if env:
        out.append(env)
    try:
        import nvidia  # namespace package of NVIDIA's wheels
        for root in list(getattr(nvidia, "__path__", [])):
            for pat in ("cuda_nvrtc/lib/libnvrtc.so*", "cu13/lib/libnvrtc.so*", "cuda_nvrtc/lib/libnvrtc.so.*",
                        "cu12/lib/libnvrtc.so*", "cuda_nvrtc/bin/nvrtc64*.dll"):
                out.extend(sorted(glob.glob(os.path.join(root, pat)), reverse=True))
    except ImportError:
        pass
    for var in ("CUDA_PATH", "CUDA_HOME"):
        if os.environ.get(var):
            out.extend(sorted(glob.glob(os.path.join(os.environ[var], "lib64", "libnvrtc.so*")), reverse=True))
    out.extend(sorted(glob.glob("/usr/local/cuda/lib64/libnvrtc.so*"), reverse=True))
    out.extend(sorted(glob.glob("/usr/local/cuda-*/lib64/libnvrtc.so*"), reverse=True))
    found = ctypes.util.find_library("nvrtc")
    if found:
        out.append(found)
    # builtins libraries are not NVRTC itself
    return [p for p in dict.fromkeys(out) if "builtins" not in os.path.basename(p) and ".alt." not in os.path.basename(p)]


def _load():
    global _lib, _lib_error
    if _lib is not None or _lib_error is not None:
        return _lib
    tried = []
    for p in _candidates():
        try:
            lib = ctypes.CDLL(p)
            lib.nvrtcVersion  # noqa: B018 (probe the symbol)
            _lib = lib
            return lib
        except (OSError, AttributeError) as e:
            tried.append(f"{p}: {e}")
    _lib_error = ("could not load libnvrtc (install the nvidia-cuda-nvrtc-cu12 wheel, or set TILENB_NVRTC to "
                  "the library's path); tried: " + ("; ".join(tried) or "no candidate found"))
    return None


def nvrtc_available() -> bool:
    try:
        return _load() is not None or _cupy_nvrtc() is not None
    except Exception:  # never raise from a probe
        return False


def nvrtc_version() -> Tuple[int, int]:
    lib = _load()
    if lib is None:
        m = _cupy_nvrtc()
        if m is None:
            raise NvrtcUnavailable(_lib_error or "no NVRTC")
        return tuple(m.getVersion())
    a, b = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(a), ctypes.byref(b))
    return (a.value, b.value)


def _cupy_nvrtc():
    try:
        from cupy_backends.cuda.libs import nvrtc as m  # noqa: PLC0415
        return m
    except Exception:  # CuPy absent or unusable: the ctypes path is used
        return None


def _compile_ctypes(lib, source: str, name: str, options: Sequence[str], want_cubin: bool) -> Tuple[bytes, str]:
    prog = ctypes.c_void_p()
    r = lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None)
    if r != 0:
        raise CudaCompileError(f"nvrtcCreateProgram failed with status {r}", "", source)
    try:
        opts = [o.encode() for o in options]
        arr = (ctypes.c_char_p * len(opts))(*opts)
        status = lib.nvrtcCompileProgram(prog, len(opts), arr)
        n = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
        buf = ctypes.create_string_buffer(max(1, n.value))
        lib.nvrtcGetProgramLog(prog, buf)
        log = buf.value.decode(errors="replace")
        if status != 0:
            raise CudaCompileError(f"NVRTC could not compile the generated CUDA:\n{log}", log, source)
        if want_cubin:
            lib.nvrtcGetCUBINSize(prog, ctypes.byref(n))
            out = ctypes.create_string_buffer(n.value)
            if lib.nvrtcGetCUBIN(prog, out) != 0:
                raise CudaCompileError("nvrtcGetCUBIN failed", log, source)
        else:
            lib.nvrtcGetPTXSize(prog, ctypes.byref(n))
            out = ctypes.create_string_buffer(n.value)
            if lib.nvrtcGetPTX(prog, out) != 0:
                raise CudaCompileError("nvrtcGetPTX failed", log, source)
        return out.raw[: n.value], log
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def _compile_cupy(m, source: str, name: str, options: Sequence[str], want_cubin: bool) -> Tuple[bytes, str]:
    prog = m.createProgram(source, name, (), ())
    try:
        try:
            m.compileProgram(prog, list(options))
        except Exception as e:  # NVRTCError: report NVRTC's own log
            try:
                log = m.getProgramLog(prog)
            except Exception:
                log = str(e)
            raise CudaCompileError(f"NVRTC could not compile the generated CUDA:\n{log}", log, source) from None
        log = m.getProgramLog(prog)
        out = m.getCUBIN(prog) if want_cubin else m.getPTX(prog)
        if isinstance(out, str):
            out = out.encode()
        return bytes(out), log
    finally:
        m.destroyProgram(prog)


def nvrtc_compile(source: str, arch="sm_80", options: Sequence[str] = DEFAULT_OPTIONS,
                  name: str = "tilenb_kernel.cu", use_cache: bool = True, prefer: str = "auto",
                  ptx: Optional[bool] = None) -> bytes:
    """Compile CUDA C++ `source` for the target `arch` (any spelling `tilenb.target.target`
    accepts, or a Target): a cubin, or PTX when ptx is True (by default: when arch is a string
    spelled "compute_..."). NVRTC's --gpu-architecture is `Target.nvrtc_arch` (sm_90 targets:
    sm_90a / compute_90a).

    prefer: "auto" (CuPy's NVRTC if CuPy imports, else ctypes), "ctypes" or "cupy".
    Raises UnsupportedError naming arch when it names no GPU target (None included),
    CudaCompileError (with `.log`) if NVRTC rejects the code, NvrtcUnavailable if no NVRTC
    library can be loaded."""
    if ptx is None:
        ptx = isinstance(arch, str) and arch.strip().lower().startswith("compute")
    want_cubin = not ptx
    arch = target(arch).nvrtc_arch(ptx=ptx)
    opts = [f"--gpu-architecture={arch}"] + list(options)
    m = _cupy_nvrtc() if prefer in ("auto", "cupy") else None
    lib = None if m is not None else _load()
    if m is None and lib is None:
        raise NvrtcUnavailable(_lib_error or "no NVRTC library")
    if use_cache:
        try:
            ver = nvrtc_version() if lib is not None else tuple(m.getVersion())
        except Exception:
            ver = (0, 0)
        key = hashlib.sha256("\0".join([source, " ".join(opts), arch, f"{ver}", "cupy" if m else "ctypes"]).encode()).hexdigest()
        with _lock:
            hit = _mem_cache.get(key)
        if hit is not None:
            return hit
        path = cache_dir() / "nvrtc" / f"{key}.{'cubin' if want_cubin else 'ptx'}"
        try:
            data = path.read_bytes()
            with _lock:
                _mem_cache[key] = data
                _files[id(data)] = (data, path)
            return data
        except OSError:
            pass
    data = None
    if m is not None:
        try:
            data, _ = _compile_cupy(m, source, name, opts, want_cubin)
        except CudaCompileError:
            raise
        except Exception:  # CuPy imports but its NVRTC does not load: try the wheel's library
            lib = _load()
            if lib is None:
                raise NvrtcUnavailable(_lib_error or "CuPy's NVRTC failed and no libnvrtc could be loaded") from None
    if data is None:
        data, _ = _compile_ctypes(lib, source, name, opts, want_cubin)
    if use_cache:
        with _lock:
            _mem_cache[key] = data
        try:
            if not path.parent.is_dir():
                path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(path.suffix + f".{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
            with _lock:
                _files[id(data)] = (data, path)
        except OSError:
            pass  # a read-only home: the memory cache still works
    return data


def cached_file(data: bytes) -> Optional[Path]:
    """The disk-cache file that held `data` (this very bytes object, as `nvrtc_compile` returned
    it) when `nvrtc_compile` wrote or read it, or None. For a caller that wants the same bytes
    in a file of its own name (a hard link costs less than writing them again)."""
    with _lock:
        hit = _files.get(id(data))
    return hit[1] if hit is not None and hit[0] is data else None
