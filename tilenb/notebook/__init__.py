"""The notebook layer: the `%%tilekernel` magic and the widgets that show a kernel.

`%load_ext tilenb` registers the magic (see `tilenb.notebook.magic`). Outside the magic,
`show(kernel, "threads,lifetimes")` displays views of any compiled kernel, and `views(...)`
returns them without displaying; `measure(kernel, grid, *args)` shows one launch measured by
Nsight Compute beside the prediction (or, where nothing can measure, the prediction and why).
`demo()` shows the views of a bundled analysis record of
rms_norm, with no compilation.

Guarantees: this package only displays what the analyses, the code generator and the runtime
produced; it computes no analysis of its own. Each view is one output that needs no kernel and
no network: interactive HTML where the front end runs an output's scripts (JupyterLab, Notebook
7, VS Code, nbconvert's pages), a static picture where it does not (an untrusted notebook,
GitHub's viewer), deterministic text (nbval, terminals) and a PNG (see `widgets`). Timing views
that `show` or the magic displayed follow later launches in place.
"""
from __future__ import annotations

from typing import Optional, Sequence, Union

from .build import DEFAULT_VIEWS, VIEW_NAMES, parse_views  # noqa: F401


def views(kernel, show: Union[str, Sequence[str], None] = None, tune: Optional[dict] = None,
          profile=None) -> list:
    """The views of `kernel` (a `tilenb.Kernel`) as widgets, for the @autotune values `tune`.

    show: "threads,lifetimes,barriers,timing,cuda" (any subset), "all", or a sequence of those
    names; None gives the default views. profile: a `Profile` of the kernel
    (`kernel.profile(...)`): the thread map, barriers and timing views then show its measured
    figures beside the predictions (docs/profiling.md). Raises TileError for an unknown view name."""
    from .build import make_views
    names = show if isinstance(show, (list, tuple)) else parse_views(show, kernel.module.backend)
    return make_views(kernel, tuple(names), tune, profile=profile)


def show(kernel, show: Union[str, Sequence[str], None] = None, tune: Optional[dict] = None,
         profile=None) -> None:
    """Display the views of `kernel` (see `views`). In a shell where `%load_ext tilenb` ran, a
    timing view is re-displayed in place after each later cell that launched the kernel (not
    one drawn from a `profile`: it keeps the measurement)."""
    from IPython import get_ipython
    from IPython.display import display
    magics = getattr(get_ipython(), "_tilenb_magics", None)
    for w in views(kernel, show, tune, profile=profile):
        if w._name == "timing" and magics is not None and profile is None:
            magics.track(w, kernel, display(w, display_id=True))
        else:
            display(w)


def measure(kernel, grid, *args, full_ctas: Optional[int] = None,
            show: Sequence[str] = ("threads", "barriers", "timing"), **tune):
    """Measured beside predicted for one launch `kernel[grid](*args)` (the @autotune values by
    keyword), as a notebook cell shows it on either backend. Where Nsight Compute can measure
    (`kernel.profile`: a GPU, the CUDA backend, ncu), it prints the per-line table, predicted
    beside measured (`Profile.text`; `full_ctas`: how many CTAs lie wholly inside the tensors,
    the rest count as a range), displays the views `show` with the measured figures, and returns
    the Profile; the outputs hold one launch's result. Where it cannot (the CPU backend, no ncu,
    counters refused) it prints the analysis' prediction for this launch
    (`tilenb.runtime.gpu.profile.predict_launch`) and the one sentence saying why nothing was
    measured (`ProfileUnavailable`'s message), leaves the arguments untouched, and returns
    None. A bad launch raises the
    launch's LaunchError."""
    from IPython.display import display
    from ..lang.diagnostics import LaunchError, TileError
    from ..runtime.gpu.profile import ProfileUnavailable, check_full_ctas, predict_launch
    from ..runtime.module import Kernel
    from .build import make_views
    # refuse what would only fail after seconds under ncu (or, on the CPU, be ignored)
    if not isinstance(kernel, Kernel):
        raise LaunchError(f"measure() takes a kernel of a compiled module (as in mod.name, or the name a "
                          f"%%tilekernel cell defines), not {type(kernel).__name__}")
    if full_ctas is not None:
        check_full_ctas(full_ctas)
    show = (show,) if isinstance(show, str) else tuple(show)
    bad = [v for v in show if v not in VIEW_NAMES]
    if bad:
        raise TileError(f"measure(): unknown view {bad[0]!r} in show; choose from {', '.join(VIEW_NAMES)}")
    try:
        prof = kernel.profile(grid, *args, **tune)
    except ProfileUnavailable as e:
        print(predict_launch(kernel, grid, args, tune or None, full_ctas).text())
        print(f"measured: nothing here. {getattr(e, 'message', str(e))}")
        return None
    print(prof.text(prof.predicted if prof.predicted is not None else prof.analysis(kernel), full_ctas))
    for w in make_views(kernel, show, profile=prof):
        display(w)
    return prof


def demo(show: Sequence[str] = DEFAULT_VIEWS) -> list:
    """Widgets of the bundled rms_norm analysis record (`tilenb.notebook.fixture`)."""
    from .build import from_analysis
    from .fixture import RMS_NORM_SOURCE, rms_norm_analysis
    return from_analysis(rms_norm_analysis(), RMS_NORM_SOURCE, show)


def register(ipython):
    """Register the %%tilekernel magic on `ipython` (what `%load_ext tilenb` does)."""
    from .magic import register as _register
    return _register(ipython)
