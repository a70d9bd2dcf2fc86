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
    from ..runtime.gpu.profile import ProfileUnavailable, predict_launch
    from .build import make_views
    try:
        prof = kernel.profile(grid, *args, **tune)
    except ProfileUnavailable as e:
        print(predict_launch(kernel, grid, args, tune or None, full_ctas).text())
        print(f"measured: nothing here. {getattr(e, 'message', str(e))}")
        return None
    print(prof.text(prof.predicted if prof.predicted is not None else prof.analysis(kernel), full_ctas))
    for w in make_views(kernel, tuple(show), profile=prof):
        display(w)
    return prof
