"""Running a generated program on each backend, and classifying what happened: the one place the
CPU tests (tests/e2e/test_fuzz_differential.py) and the GPU script (scripts/fuzz_gpu.py) share.

Guarantees: every function returns a `Result`, never raises for anything the program or a
backend does: `status` is one of
- "ok": outputs agree (with the oracle, or with the reference backend), within `model.close`;
- "mismatch": an output differs (`diffs` says which elements, expected and got);
- "check_error": the checker refused a generated program (a generator bug: programs are valid);
- "oracle_error": the fuzzer's own oracle failed (a fuzzer bug);
- "internal_error": a TileError that says "internal error", or any non-TileError exception from
  tilenb (a compiler or executor bug);
- "unsupported": an UnsupportedError from the CUDA backend (a documented limit, counted apart);
- "compile_error": NVRTC or g++ rejected the generated CUDA;
- "fault": the GPU or the emulated kernel failed at run time (a CUDA error, a crash).
"""
from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

from .programs import Diff, Program, compare

STATUSES = ("ok", "mismatch", "check_error", "oracle_error", "internal_error", "unsupported", "compile_error",
            "fault")


@dataclass
class Result:
    status: str
    stage: str = ""                 # "check", "oracle", "cpu", "nvrtc", "emulator", "cuda", ...
    detail: str = ""
    diffs: List[Diff] = field(default_factory=list)
    variant: Optional[dict] = None

    def line(self) -> str:
        d = f" {self.diffs[0]}" if self.diffs else ""
        v = f" variant {self.variant}" if self.variant else ""
        return f"{self.status} at {self.stage}{v}:{d} {self.detail}".rstrip()


def _classify(e: BaseException, stage: str) -> Result:
    import tilenb
    from tilenb.codegen import CudaCompileError
    if isinstance(e, tilenb.UnsupportedError):
        return Result("unsupported", stage, str(e).splitlines()[0][:300])
    if isinstance(e, CudaCompileError):
        return Result("compile_error", stage, (str(e) + "\n" + getattr(e, "log", ""))[:3000])
    if isinstance(e, tilenb.TileError):
        msg = str(e)
        if stage.startswith("cuda") and any(w in msg for w in ("failed on the GPU", "CUDA launch failed",
                                                                 "cudaError", "CUDA_ERROR")):
            return Result("fault", stage, msg[:2000])
        if "internal error" in msg:
            return Result("internal_error", stage, msg[:2000])
        if stage == "check":
            return Result("check_error", stage, msg[:2000])
        return Result("internal_error", stage, "a TileError for a valid program: " + msg[:2000])
    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-6:])
    return Result("internal_error", stage, f"{type(e).__name__}: {e}\n{tb}"[:3000])


def compile_module(prog: Program, backend: str):
    import tilenb
    return tilenb.compile(prog.text, backend=backend)


def oracle(prog: Program, variant=None):
    """(values, errors) by output name, or a Result saying why the oracle failed."""
    try:
        exp = prog.expected(variant)
    except Exception as e:  # noqa: BLE001 - a fuzzer bug, reported as such
        return Result("oracle_error", "oracle", f"{type(e).__name__}: {e}\n{traceback.format_exc()[-1500:]}")
    return {n: a for n, (a, _) in exp.items()}, {n: e for n, (_, e) in exp.items()}


def run_cpu(prog: Program, variant=None, module=None):
    """The CPU executor's outputs (dict), or a Result."""
    try:
        mod = module or compile_module(prog, "cpu")
    except Exception as e:  # noqa: BLE001
        return _classify(e, "check")
    try:
        return prog.launch(mod, variant=variant)
    except Exception as e:  # noqa: BLE001
        return _classify(e, "cpu")


def check_cpu(prog: Program) -> Result:
    """Every variant on the CPU executor against the oracle (outputs the oracle cannot say are
    left out)."""
    try:
        mod = compile_module(prog, "cpu")
    except Exception as e:  # noqa: BLE001
        return _classify(e, "check")
    for v in prog.variants():
        o = oracle(prog, v)
        if isinstance(o, Result):
            return o
        ref, err = o
        got = run_cpu(prog, v or None, mod)
        if isinstance(got, Result):
            got.variant = v or None
            return got
        diffs = [d for d in compare(prog, ref, got, err) if d.output not in prog.unknown]
        if diffs:
            return Result("mismatch", "cpu vs oracle", diffs=diffs, variant=v or None)
    return Result("ok", "cpu")


def tolerances(prog: Program, variant=None) -> Optional[Dict[str, np.ndarray]]:
    o = oracle(prog, variant)
    return None if isinstance(o, Result) else o[1]


def cuda_sources(prog: Program, arch: Optional[str]):
    """[(variant, KernelSource)] of every variant for `arch`, or a Result."""
    from tilenb.codegen import generate
    try:
        mod = compile_module(prog, "cpu")
        k = getattr(mod, prog.kernel)
    except Exception as e:  # noqa: BLE001
        return _classify(e, "check")
    out = []
    for v in prog.variants():
        try:
            kir = k.ir(**v)
            out.append((v, generate(kir, prog.text, arch=arch)))
        except Exception as e:  # noqa: BLE001
            r = _classify(e, f"codegen {arch or 'any'}")
            r.variant = v or None
            return r
    return out


def check_nvrtc(prog: Program, arch: str) -> Result:
    """The generated CUDA of every variant compiles with NVRTC for `arch`."""
    from tilenb.codegen import nvrtc_compile
    srcs = cuda_sources(prog, arch)
    if isinstance(srcs, Result):
        return srcs
    for v, ks in srcs:
        try:
            nvrtc_compile(ks.source, arch)
        except Exception as e:  # noqa: BLE001
            r = _classify(e, f"nvrtc {arch}")
            r.variant = v or None
            return r
    return Result("ok", f"nvrtc {arch}")


def check_emulated(prog: Program, workdir, variant=None) -> Result:
    """The generated CUDA (code for any target) run on the CPU by tests/support/cuda_emulator.py, against
    the CPU executor, within the oracle's tolerances."""
    from support import cuda_emulator as EMU
    if "cluster" in prog.features:
        return Result("unsupported", "emulator", "the emulator has no thread block clusters (distributed shared memory)")
    srcs = cuda_sources(prog, None)
    if isinstance(srcs, Result):
        return srcs
    variant = variant if variant is not None else prog.variants()[0]
    ks = dict((tuple(sorted(v.items())), s) for v, s in srcs)[tuple(sorted(variant.items()))]
    ref = run_cpu(prog, variant or None)
    if isinstance(ref, Result):
        return ref
    err = tolerances(prog, variant)
    args = prog.args()
    try:
        EMU.run(ks, args, prog.dims, prog.launch_grid(variant), workdir=str(workdir), timeout=300)
    except RuntimeError as e:
        kind = "compile_error" if "g++ failed" in str(e) else "fault"
        return Result(kind, "emulator", str(e)[:3000])
    names = [n for _, n, _ in prog.params]
    got = {n: args[names.index(n)] for n in prog.outputs}
    diffs = compare(prog, ref, got, err)
    if diffs:
        return Result("mismatch", "emulator vs cpu", diffs=diffs, variant=variant or None)
    return Result("ok", "emulator")


def check_cuda(prog: Program) -> Result:
    """The CUDA backend (`tilenb.compile(text, backend="cuda")`) against the CPU executor, for
    every variant given explicitly and, with @autotune, once more letting the backend choose
    (every variant of a generated @autotune program computes the same result). A CUDA error
    is a "fault"; the caller should assume the CUDA context is lost after one."""
    import tilenb
    try:
        mod = compile_module(prog, "cuda")
    except Exception as e:  # noqa: BLE001
        return _classify(e, "check")
    runs = [(v, v or None) for v in prog.variants()]
    if prog.tune:
        runs.append((prog.variants()[0], None))
    cpu_cache = {}
    for ref_variant, launch_variant in runs:
        key = tuple(sorted(ref_variant.items()))
        if key not in cpu_cache:
            ref = run_cpu(prog, ref_variant or None)
            if isinstance(ref, Result):
                return ref
            cpu_cache[key] = (ref, tolerances(prog, ref_variant))
        ref, err = cpu_cache[key]
        try:
            got = prog.launch(mod, variant=launch_variant)
        except tilenb.UnsupportedError as e:
            return Result("unsupported", "cuda", str(e).splitlines()[0][:300], variant=launch_variant)
        except Exception as e:  # noqa: BLE001
            r = _classify(e, "cuda")
            if r.status == "internal_error" and _is_cuda_error(e):
                r.status = "fault"
            if r.status == "compile_error":
                return r
            r.variant = launch_variant
            return r
        diffs = compare(prog, ref, got, err)
        if diffs:
            return Result("mismatch", "cuda vs cpu", diffs=diffs, variant=launch_variant)
    return Result("ok", "cuda")


def _is_cuda_error(e: BaseException) -> bool:
    text = f"{type(e).__module__}.{type(e).__name__}: {e}"
    return any(w in text for w in ("cuda", "CUDA", "cupy"))
