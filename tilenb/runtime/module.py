"""The public objects a user holds: `Module` (a compiled source) and `Kernel` (one kernel).

Guarantees: a Module is only made from a program that checked without error; its kernels are
attributes and entries of `module.kernels`. `kernel[grid](*args)` launches on the module's
backend after the launch checks (`tilenb.runtime.launch`), so a bad launch raises a
`LaunchError` before anything runs. On the CUDA backend a call without keywords that repeats an
earlier launch (same shapes, dtypes, scalars, grid, device) goes straight to the launch cache
(`tilenb.runtime.gpu.cuda.run_cached`; for a call of CuPy arrays alone, first the straight-line
check of the latest repeat, `cuda._straight`): it is queued on the current stream like a CuPy kernel launch
(a first launch, with its checks, waits for the kernel), and `kernel.last_run` is built when read.
"""
from __future__ import annotations

from typing import Dict, Optional

from .. import ir
from ..lang.diagnostics import LaunchError, TileError, UnsupportedError
from ..sema.check import CheckedKernel, CheckedProgram

_UNSET = object()   # cpu_limit not given: the launch uses tilenb.runtime.launch.CPU_LIMIT


class Kernel:
    """One kernel of a compiled module.

    `kernel[grid](*args, debug=False, variant=None, cpu_limit=...)` launches it; `grid` is an
    int or a tuple of 1 to 3 positive ints (CTAs along x, y, z). Without `[grid]`, `kernel(*args)` uses the kernel's
    @grid attribute. `variant` picks the @autotune values (a dict); by default the backend
    chooses (the CPU backend takes the first value of each name). `debug` (a bool; None: the
    module's) checks for shared-tile races and out-of-bounds element accesses, raising
    RaceError / OutOfBoundsError; on the CUDA backend the reference executor checks the same
    launch on copies of the arguments after the GPU has run it. On the CPU backend (and for
    that check) a launch of more than `tilenb.runtime.launch.CPU_LIMIT` (2**26)
    thread-instances (CTAs x threads) is a LaunchError unless `cpu_limit` allows it (an int, or
    None for no limit).
    """

    def __init__(self, module: "Module", checked: CheckedKernel):
        self.module = module
        self.checked = checked
        self.name = checked.ast.name
        self._last_run = None
        self._pending = None   # a repeat launch whose RunReport is built when last_run is read
        # The CUDA backend's repeat-launch cache, kept with the checked kernel: a Module compiled
        # again from the same text (a re-run cell) shares it (tilenb.runtime.gpu.cuda.run_cached).
        self._repeat = checked.__dict__.setdefault("_tilenb_repeat", {}) if module.backend == "cuda" else None
        self._hot = None       # (key, entry) of this kernel's latest repeat, compared first (run_cached)
        self._fast = None      # the straight-line check of that entry for a plain call (cuda._straight)

    @property
    def last_run(self):
        """What the backend reports about the latest launch (a `tilenb.runtime.checks.RunReport`),
        or None before the first."""
        if self._pending is not None:
            p, self._pending = self._pending, None
            self._last_run = p.report(self)
        return self._last_run

    @last_run.setter
    def last_run(self, report):
        self._pending = None
        self._last_run = report

    # -- introspection
    @property
    def tune_space(self) -> Dict[str, tuple]:
        """@autotune names and their candidate values."""
        return dict(self.checked.tune_space)

    @property
    def params(self):
        """(name, type) of each parameter, in order, for the default variant."""
        return [(p.sym.name, p.sym.type) for p in self.ir().params]

    def ir(self, **tune) -> ir.KernelIR:
        """The typed tile IR of one variant (default: the first value of each @autotune name)."""
        t = self.checked.default_tune()
        t.update(tune)
        return self.checked.variant(**t)

    def analysis(self, arch: Optional[str] = None, **tune):
        """The machine's view of one variant: see `tilenb.analysis.analyze`. arch: the target its
        loops and shared-memory map are for ("sm_90": Hopper's TMA + wgmma loops; None: any GPU)."""
        from ..analysis import analyze
        return analyze(self.ir(**tune), arch=arch)

    def cuda_source(self, arch=None, **tune) -> str:
        """The CUDA C++ generated for one variant (works without a GPU). arch: the target to
        generate for, in any spelling `tilenb.target.target` accepts ("sm_80", "sm_90",
        "sm_90a", "compute_90", 90, "9.0", (9, 0), a Target, ...; an sm_90 target shows GEMM and
        attention loops as the TMA + wgmma pipelines an H100/H200 runs; None: the code for any
        target). Compile it with `tilenb.codegen.nvrtc_compile(source, arch)` for the same arch
        (the nvidia-cuda-nvrtc wheel, no GPU needed). Raises UnsupportedError (a TileError)
        naming arch when it names no GPU target (compute capability 5.0 or newer)."""
        from ..codegen import cuda_source
        from ..target import target
        try:
            tgt = target(arch)
        except UnsupportedError as e:
            err = UnsupportedError(f"kernel '{self.name}': cuda_source(arch={arch!r}) names no GPU target: "
                                   f"{getattr(e, 'reason', e.message)}; use one such as 'sm_80' or 'sm_90', or None "
                                   f"for code for any target")
            err.filename = self.module.filename
            raise err from None
        src = self.module.checked.source
        return cuda_source(self.ir(**tune), src.text, src.line_offset, arch=tgt)

    def profile(self, grid, *args, ncu: Optional[str] = None, keep: Optional[str] = None, **tune):
        """Run one launch of `grid` (as `kernel[grid](*args)`, at the @autotune values `tune`)
        under Nsight Compute and return a `tilenb.runtime.gpu.profile.Profile`: per tile-language
        line the global sectors and requests and shared wavefronts and bank conflicts the GPU
        counted, per kernel duration, DRAM / L2 bytes, achieved occupancy and warp stalls (with
        the barriers' share). `profile.compare(profile.analysis(kernel))` sets them beside the
        prediction. ncu: the ncu program (default $TILENB_NCU, then PATH); keep: a folder to
        leave ncu's report in. The outputs are written as by one launch; ncu replays the kernel
        tens of times in a new process, so a profile takes seconds. Raises ProfileUnavailable
        (a TileError, one sentence) on the CPU backend, without ncu, or where the GPU refuses
        its counters (ERR_NVGPUCTRPERM)."""
        from .gpu.profile import profile
        return profile(self, grid, args, tune or None, ncu=ncu, keep=keep)

    # -- launching
    def __getitem__(self, grid):
        def launch(*args, **kw):
            if not kw and self._repeat and _run_cached(self, grid, args) is True:
                return None
            return self._launch(grid, args, **kw)
        return launch

    def __call__(self, *args, **kw):
        f = self._fast   # the latest repeat, checked in one straight line: True when it launched
        if f is not None and not kw and f(self, args):
            return None
        if not kw and self._repeat and _run_cached(self, None, args) is True:   # a repeat: no checks to redo
            return None
        return self._launch(None, args, **kw)

    def _launch(self, grid, args, debug: Optional[bool] = None, variant: Optional[dict] = None,
                cpu_limit=_UNSET, **unknown):
        from .launch import CPU_LIMIT, launch
        if unknown:
            word = next(iter(unknown))
            params = [p.sym.name for p in self.ir().params]
            what = (f"arguments are positional, one per parameter ({', '.join(params)}): pass '{word}' by position"
                    if word in params else f"a launch takes only debug=, variant= and cpu_limit= by keyword")
            err = LaunchError(f"kernel '{self.name}': unexpected keyword argument '{word}'; {what}")
            err.filename = self.module.filename
            raise err
        return launch(self, grid, args, debug=self.module.debug if debug is None else debug, variant=variant,
                      cpu_limit=CPU_LIMIT if cpu_limit is _UNSET else cpu_limit)

    def __repr__(self):
        ps = ", ".join(f"{n}: {_type_text(t)}" for n, t in self.params)
        return f"<tilenb kernel {self.name}({ps}) on {self.module.backend}>"


def _run_cached(kernel, grid, args):
    """tilenb.runtime.gpu.cuda.run_cached (True when it launched from the cache), imported on first
    use (this name is then rebound to it)."""
    global _run_cached
    from .gpu.cuda import run_cached
    _run_cached = run_cached
    return run_cached(kernel, grid, args)


def _type_text(t):
    if isinstance(t, ir.TensorT):
        return f"tensor<{t.dtype}>[{', '.join(str(d) for d in t.dims)}]"
    if isinstance(t, ir.TileT):
        return f"tile<{t.dtype}>[{', '.join(str(d) for d in t.shape)}]"
    return t.dtype


class Module:
    """A compiled tile-language source: `module.<kernel name>` and `module.kernels`."""

    def __init__(self, checked: CheckedProgram, backend: str, debug: bool = False):
        if not isinstance(debug, bool):
            import numpy as np  # noqa: PLC0415
            if not isinstance(debug, np.bool_):
                raise TileError(f"debug must be True or False, not {debug!r}"[:300])
            debug = bool(debug)
        self.checked = checked
        self.backend = backend
        self.backend_note = f"backend {backend}"  # set by tilenb.compile: which backend and why
        self.debug = debug
        self.source = checked.source.text
        self.filename = checked.source.filename
        self.kernels: Dict[str, Kernel] = {n: Kernel(self, ck) for n, ck in checked.kernels.items()}

    def __getattr__(self, name):
        kernels = self.__dict__.get("kernels", {})
        if name in kernels:
            return kernels[name]
        raise AttributeError(f"module has no kernel '{name}' (it has: {', '.join(kernels) or 'none'})")

    def __dir__(self):
        return list(super().__dir__()) + list(self.kernels)

    def __repr__(self):
        return f"<tilenb module {self.filename}: {', '.join(self.kernels) or 'no kernels'} on {self.backend}>"


def backend_note(requested: str, chosen: str) -> str:
    """One sentence saying which backend runs a module and why (for displays and logs)."""
    if requested != "auto":
        return f"backend {chosen}, as requested"
    import os
    if os.environ.get("TILENB_BACKEND", "").strip():
        return f"backend {chosen}, from TILENB_BACKEND"
    if chosen == "cuda":
        return "backend cuda: auto found a usable GPU"
    return "backend cpu (the numpy reference executor): auto found no usable CUDA GPU"


def choose_backend(backend: str) -> str:
    """'auto' -> the TILENB_BACKEND environment variable if set, else 'cuda' when CuPy sees a
    usable GPU, else 'cpu'. Raises TileError for unknown names."""
    import os
    if backend not in ("auto", "cpu", "cuda"):
        raise TileError(f"unknown backend {backend!r}: use 'auto', 'cpu' or 'cuda'")
    if backend != "auto":
        return backend
    forced = os.environ.get("TILENB_BACKEND", "").strip()
    if forced:
        if forced not in ("cpu", "cuda"):
            raise TileError(f"TILENB_BACKEND={forced!r}: use 'cpu' or 'cuda'")
        return forced
    from .gpu import gpu_available
    return "cuda" if gpu_available() else "cpu"
