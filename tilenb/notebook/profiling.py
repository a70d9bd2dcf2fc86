"""`measure(kernel, grid, *args)`: one launch measured by Nsight Compute beside the analysis'
prediction, as a notebook cell shows it; where nothing can measure, the prediction and one
sentence saying why. The one home of that behaviour: `tilenb.notebook.measure` and the
`%tileprofile` magic both call it."""
from __future__ import annotations

from typing import Optional, Sequence


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
    from .build import VIEW_NAMES, make_views
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
