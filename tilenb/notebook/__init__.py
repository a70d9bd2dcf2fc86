"""The notebook layer: the `%%tilekernel` magic and the widgets that show a kernel.

`%load_ext tilenb` registers the magic (see `tilenb.notebook.magic`). Outside the magic,
`show(kernel, "threads,lifetimes")` displays views of any compiled kernel, and `views(...)`
returns them without displaying. `demo()` shows the views of a bundled analysis record of
rms_norm, with no compilation.

Guarantees: this package only displays what the analyses, the code generator and the runtime
produced; it computes no analysis of its own. Each view renders live (anywidget), as
self-contained HTML with no network (nbconvert), as deterministic text (nbval, terminals) and as
a PNG (frontends without HTML).
"""
from __future__ import annotations

from typing import Optional, Sequence, Union

from .build import DEFAULT_VIEWS, VIEW_NAMES, parse_views  # noqa: F401


def views(kernel, show: Union[str, Sequence[str], None] = None, tune: Optional[dict] = None) -> list:
    """The views of `kernel` (a `tilenb.Kernel`) as widgets, for the @autotune values `tune`.

    show: "threads,lifetimes,barriers,timing,cuda" (any subset), "all", or a sequence of those
    names; None gives the default views. Raises TileError for an unknown view name."""
    from .build import make_views
    names = show if isinstance(show, (list, tuple)) else parse_views(show, kernel.module.backend)
    return make_views(kernel, tuple(names), tune)


def show(kernel, show: Union[str, Sequence[str], None] = None, tune: Optional[dict] = None) -> None:
    """Display the views of `kernel` (see `views`)."""
    from IPython.display import display
    for w in views(kernel, show, tune):
        display(w)


def demo(show: Sequence[str] = DEFAULT_VIEWS) -> list:
    """Widgets of the bundled rms_norm analysis record (`tilenb.notebook.fixture`)."""
    from .build import from_analysis
    from .fixture import RMS_NORM_SOURCE, rms_norm_analysis
    return from_analysis(rms_norm_analysis(), RMS_NORM_SOURCE, show)


def register(ipython):
    """Register the %%tilekernel magic on `ipython` (what `%load_ext tilenb` does)."""
    from .magic import register as _register
    return _register(ipython)
