"""Launching a kernel: the shared checks (`tilenb.runtime.checks`), then dispatch to the
module's backend.

Guarantees: `launch` runs the checks of `checks.prepare` (and its own of `debug` and
`cpu_limit`: a bool, and a positive int or None) before anything runs, and raises a
`tilenb.LaunchError` naming the parameter and the dimension at fault; when it raises, no
argument has been written.

On the CPU backend a launch of more than `CPU_LIMIT` thread-instances (CTAs x threads per CTA)
is refused with a LaunchError naming the grid, since the numpy executor would run it for
minutes or hours; `cpu_limit=None` (or a larger int) at the launch lifts that limit.

Then the module's backend runs it: "cpu" -> `tilenb.runtime.cpu.executor.run_cpu` on host arrays in
place (it records a `RunReport` in `kernel.last_run`, naming the variant it ran); "cuda" ->
`tilenb.runtime.gpu.cuda.run_cuda(kernel, prepared, debug=...)` with the `Prepared` launch
made here
(every variant that fits, for autotuning); a TileError says so when that backend is missing.
A debug launch on the CUDA backend is then checked by the reference executor, on host copies of
the arguments taken before the GPU ran, with the variant and grid the GPU ran
(`_run_on_cuda_checked`; bounded by `cpu_limit` like a CPU launch): what the check finds is
raised (RaceError, OutOfBoundsError), and the outputs keep the GPU's results.
"""
from __future__ import annotations

import numbers
from typing import Dict

import numpy as np

from ..lang.diagnostics import LaunchError, TileError
from .checks import Bound, Launch, Prepared, RunReport, prepare, warn_edges, written_tensors

CPU_LIMIT = 2 ** 26    # thread-instances (CTAs x threads) one CPU-backend launch runs by default


def launch(kernel, grid, args, debug=False, variant=None, cpu_limit=CPU_LIMIT):
    """Check and run one launch of `kernel` (a tilenb Kernel) on its module's backend.

    grid: None (use @grid), an int, or a tuple of 1 to 3 ints; args: the kernel's arguments in
    order; debug: True or False: detect shared-tile races and out-of-bounds element accesses
    with the reference executor (on the CUDA backend it checks the same launch on copies of the
    arguments after the GPU has run it: see `_run_on_cuda_checked`); variant: a dict of
    @autotune values; cpu_limit: the most thread-instances (CTAs x threads) the CPU executor
    runs in this launch (None: no limit; on the CUDA backend it bounds only the debug check).
    Raises LaunchError before anything runs if a check fails; a debug launch raises RaceError
    or OutOfBoundsError (LaunchError subclasses) for what its check finds."""
    try:
        if not isinstance(debug, (bool, np.bool_)):
            raise LaunchError(f"kernel '{kernel.name}': debug must be True or False, not {debug!r}"[:300])
        debug = bool(debug)
        if cpu_limit is not None and (isinstance(cpu_limit, (bool, np.bool_))
                                      or not isinstance(cpu_limit, (numbers.Integral, np.integer))
                                      or cpu_limit < 1):
            raise LaunchError(f"kernel '{kernel.name}': cpu_limit must be a positive int (thread-instances "
                              f"per launch) or None for no limit, not {cpu_limit!r}")
        repeat = None
        if kernel.module.backend == "cuda":   # a repeat of an earlier call skips the checks it passed
            from .gpu.cuda import run_cached
            repeat = run_cached(kernel, grid, args, variant, debug)
            if repeat is True:
                return None
        prepared = prepare(kernel, grid, tuple(args), variant)
        if debug and kernel.module.backend == "cuda":
            for c in prepared.candidates:
                _check_cpu_limit(c, cpu_limit, " (debug=True checks a CUDA launch on the reference executor)")
    except LaunchError as e:
        e.filename = kernel.module.filename     # "file.tile: error: kernel 'k': ..."
        raise
    backend = kernel.module.backend
    if backend == "cuda":
        try:
            from .gpu.cuda import run_cuda
        except ImportError as e:
            raise TileError(f"the CUDA backend is unavailable ({e}); compile with backend='cpu' to run on "
                            f"the CPU reference executor") from None
        from .gpu import gpu_available
        if not gpu_available():   # CuPy imports, but no device or driver answers
            err = TileError(f"kernel '{kernel.name}': the CUDA backend has no usable GPU here (CuPy finds no "
                            f"device, or the driver cannot start); compile with backend='cpu' (or 'auto') to "
                            f"run on the CPU reference executor", filename=kernel.module.filename)
            raise err
        if debug:
            return _run_on_cuda_checked(kernel, prepared, repeat)
        return run_cuda(kernel, prepared, debug=False, repeat=repeat)
    if backend != "cpu":
        raise TileError(f"unknown backend {backend!r}")
    return _run_on_cpu(kernel, prepared, debug, cpu_limit)


def _check_cpu_limit(ch: "Launch", cpu_limit, why: str = ""):
    """LaunchError when launch `ch` is more thread-instances than the CPU executor runs."""
    ctas = ch.grid[0] * ch.grid[1] * ch.grid[2]
    threads = ch.kir.threads
    if cpu_limit is not None and ctas * threads > cpu_limit:
        raise LaunchError(f"kernel '{ch.kir.name}': the grid {ch.grid} is {ctas:,} CTAs x {threads} threads = "
                          f"{ctas * threads:,} thread-instances, more than the CPU backend runs in one launch "
                          f"({int(cpu_limit):,}){why}: the numpy executor would take very long; use a GPU "
                          f"(backend='cuda') or a smaller problem, or pass cpu_limit=None to run it anyway")


def _host_snapshot(bound: Bound) -> Dict[str, np.ndarray]:
    """A host copy of every tensor argument as it is now (GPU arrays copied to the host)."""
    snap = {}
    for pname, a in bound.tensors.items():
        if a.host is not None:
            snap[pname] = np.array(a.host, order="C", copy=True)
            continue
        from .gpu.cuda import to_host  # noqa: PLC0415
        snap[pname] = to_host(a)
    return snap


def _reference_check(kernel, ch: "Launch", snap: Dict[str, np.ndarray], after: str):
    """Run launch `ch` on the reference executor with debug checks, on copies of `snap`; a
    RaceError or OutOfBoundsError it raises says that it came from the check of a CUDA launch
    (`after`: what the outputs hold)."""
    from ..lang.diagnostics import OutOfBoundsError, RaceError  # noqa: PLC0415
    from .cpu.executor import run_cpu  # noqa: PLC0415
    src = kernel.module.checked.source
    host = {k: v.copy() for k, v in snap.items()}
    try:
        stats = run_cpu(ch.kir, ch.bound.dims, host, ch.bound.scalars, ch.grid, debug=True,
                        source=(src.lines, src.line_offset, src.filename))
    except (RaceError, OutOfBoundsError) as e:
        e.message += (f" (debug=True on the CUDA backend: found by the reference executor, which ran this "
                      f"launch on copies of the arguments; {after})")
        e.args = (e.message,)
        raise
    return stats.notes


def _run_on_cuda_checked(kernel, prepared: Prepared, repeat):
    """A debug launch on the CUDA backend: the GPU runs the launch as usual (the outputs hold
    its results), then the reference executor runs the same launch (the variant the GPU ran,
    its grid, the arguments as they were before the GPU ran) on host copies with its race and
    bounds checks, and raises what they find. When the GPU launch fails, the check still runs
    (on the first candidate variant) and its finding, if any, is raised from the GPU's error."""
    from dataclasses import replace  # noqa: PLC0415
    from .gpu.cuda import run_cuda  # noqa: PLC0415
    snap = _host_snapshot(prepared.chosen.bound)
    try:
        run_cuda(kernel, prepared, debug=True, repeat=repeat)
    except TileError as gpu_error:
        try:
            _reference_check(kernel, prepared.chosen, snap, "the GPU launch failed: " + gpu_error.message)
        except LaunchError as found:
            found.filename = kernel.module.filename
            raise found from gpu_error
        raise
    report = kernel.last_run
    ran = prepared.chosen
    if report is not None:
        for c in prepared.candidates:
            if dict(c.tune) == dict(report.variant):
                ran = c
    try:
        notes = _reference_check(kernel, ran, snap, "the outputs hold the GPU's results")
    except LaunchError as e:
        e.filename = kernel.module.filename
        raise
    if report is not None:
        kernel.last_run = replace(report, debug=True, notes=notes, note=report.note + (
            " debug=True: the reference executor ran this launch on copies of the arguments and found no "
            "shared-tile race and no out-of-bounds element access."))
    warn_edges(notes)
    return None


def _run_on_cpu(kernel, prepared: Prepared, debug: bool, cpu_limit=CPU_LIMIT):
    from .cpu.executor import run_cpu
    ch = prepared.chosen
    kir, bound = ch.kir, ch.bound
    try:
        _check_cpu_limit(ch, cpu_limit)
    except LaunchError as err:
        err.filename = kernel.module.filename
        raise
    written = written_tensors(kir)
    host = {}
    for pname, a in bound.tensors.items():
        if a.host is None:
            raise LaunchError(f"kernel '{kir.name}': argument '{pname}' is a GPU array ({a.type_name}); the CPU "
                              f"backend needs host arrays (numpy); copy it to the host first")
        if pname in written and a.readonly:
            raise LaunchError(f"kernel '{kir.name}': argument '{pname}' is read-only, but the kernel writes it")
        host[pname] = a.host
    src = kernel.module.checked.source
    source = (src.lines, src.line_offset, src.filename)
    stats = run_cpu(kir, bound.dims, host, bound.scalars, ch.grid, debug=debug, source=source)
    if not ch.tune:
        note = "No @autotune: one variant."
    elif prepared.explicit:
        note = "The CPU backend ran the variant named by the call (no timing on the CPU)."
    else:
        note = ("The CPU backend does not time variants: it ran the first @autotune variant that fits the "
                "arguments; name another with variant={...}.")
    kernel.last_run = RunReport("cpu", kir.name, dict(ch.tune), note, ch.grid, kir.threads, stats.ctas,
                                stats.seconds, debug, {"batch": stats.batch}, stats.notes)
    warn_edges(stats.notes)
    return None
