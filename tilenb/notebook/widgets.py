"""The five views of a kernel: traits (plain JSON data) and their renderings.

Each class names the ES module that draws it (`widgets/<name>.js`, with `<name>.css`); the
module reads the traits tagged `sync` here and nothing more. A view is displayed as one output
bundle that needs no kernel, no widget manager and no network, so that a saved notebook shows
it the same with or without its kernel, trusted or not:

- `text/html`: a static picture any sanitizer keeps (the PNG inline, the text summary visible;
  no <style> element, so no CSS is left as text where scripts are stripped), and the module
  (its CSS inside) with its traits inlined, whose scripts replace the picture by the interactive
  view wherever the front end runs an output's scripts (a live kernel's outputs and trusted
  notebooks in JupyterLab and Notebook 7, VS Code, nbconvert's pages);
- `image/png` for the pictures (thread map, ruler, timing), drawn with matplotlib where it is
  installed (the listings, barriers and CUDA, are their text);
- `text/plain`: a deterministic summary (no memory addresses, no times unless measured);
  `repr(view)` is that text.

There is no live widget model (no comm): a saved notebook reopened after its kernel is gone
has nothing to miss ("model not found"). A view that must change later (the timing view after
a launch) is re-displayed in place through its display handle (`update_display`), so the
notebook saves its latest state too.

Lines: every `line` in the traits is a line of the compiled source; `lines` maps the ones
shown to what the user sees ([line, label, text] triples, label being the line as counted in
the notebook cell, or "In[3]:7" for a function brought in from an earlier cell).
"""
from __future__ import annotations

import traitlets as t

from ..target import STATIC_SMEM
from . import render


class TileView(t.HasTraits):
    """Traits every view has: the kernel's name, its source listing, and a note (shown when
    the data behind the view could not be made, e.g. an analysis error)."""

    _name = "view"
    kernel = t.Unicode("").tag(sync=True)
    lines = t.List().tag(sync=True)        # [[line, label, text], ...] in source order
    note = t.Unicode("").tag(sync=True)

    def state(self) -> dict:
        """The synced traits (those the front end reads), as plain JSON values."""
        return {k: getattr(self, k) for k in self.trait_names(sync=True) if not k.startswith("_")}

    def __repr__(self) -> str:
        return render.text(self._name, self.state())

    def _repr_mimebundle_(self, include=None, exclude=None):
        """{text/plain, text/html, image/png (pictures)}, and metadata {"tilenb": {view, kernel}}."""
        state = self.state()
        png = render.png(self._name, state)
        data = {"text/plain": render.text(self._name, state), "text/html": render.html(self._name, state, png)}
        if png is not None:
            data["image/png"] = png
        return data, {"tilenb": {"view": self._name, "kernel": self.kernel}}


class ThreadMap(TileView):
    """Per copy statement, which thread moves which elements: the tensor slice and the tile side
    by side, runs coloured by thread (hue by warp), and per-warp coalescing (32-byte sectors
    against the ideal) and bank conflicts (shared-memory wavefronts against the ideal); then the
    shared-memory accesses that are not a copy's tile side (`Analysis.shared_traffic`), the
    tensor slices dots read inline with no copy plan and how (`Analysis.dot_reads`), and the
    kernel's per-CTA totals (`Analysis.traffic()`)."""

    _name = "threadmap"
    threads = t.Int(0).tag(sync=True)          # threads per CTA
    copies = t.List().tag(sync=True)           # analysis "copies" records
    tiles = t.List().tag(sync=True)            # analysis "tiles" records (dtype of each tile)
    selected = t.Int(0).tag(sync=True)         # index of the copy shown
    shared = t.List().tag(sync=True)           # analysis "shared_traffic" records (besides the copies)
    traffic = t.Dict().tag(sync=True)          # analysis "traffic": the per-CTA totals
    dot_reads = t.List().tag(sync=True)        # analysis "dot_reads": tensor slices a dot reads with no copy plan
    measured = t.Dict().tag(sync=True)         # with a profile: {"ctas", "lines"} (build.measured_lines); else {}


class LifetimeRuler(TileView):
    """For each source line, the bytes each live region of shared memory holds at its offset
    (tiles, and what the lowering adds: mma scratch, staging, rings, cluster slots, reduction
    partials: `Analysis.smem`), the footprint (the kernel's shared bytes) against the budget,
    and how each loop is lowered (`Analysis.loops`)."""

    _name = "ruler"
    footprint = t.Int(0).tag(sync=True)
    budget = t.Int(STATIC_SMEM).tag(sync=True)
    tiles = t.List().tag(sync=True)
    ruler = t.List().tag(sync=True)
    loops = t.List().tag(sync=True)            # analysis "loops" records: line, lowering, why


class BarrierView(TileView):
    """The kernel's source with a mark where the compiler puts each CTA barrier, and why; with a
    profile, each barrier's `measured` share of the warp-stall samples, and `measured` holds
    {"ctas", "internal": [{"line", "share", "barrier_samples"}]} (the barriers the code
    generator adds inside a line's code), else {}. `waits`: the other waits of the target's code
    (the analysis' "waits": a streamed loop's mbarrier waits and its warpgroup ping-pong's named
    barriers, each with line, where, kind, who, barrier and reason), marked like the barriers."""

    _name = "barriers"
    barriers = t.List().tag(sync=True)
    waits = t.List().tag(sync=True)
    measured = t.Dict().tag(sync=True)


class TimingView(TileView):
    """GPU time of the latest launches: kernel time (CUDA events), host overhead, achieved
    bytes/s and FLOP/s against the device's peak (a roofline point), and each autotune
    variant's time. `timing` is the record made by `tilenb.notebook.build.timing_record`."""

    _name = "timing"
    timing = t.Dict().tag(sync=True)


class CudaView(TileView):
    """The generated CUDA C++, highlighted, each line linked to the tile-language line it
    comes from. `cuda` holds one list of [token class, text] pairs per generated line;
    `origin` the compiled-source line of each generated line (0: none)."""

    _name = "cuda"
    cuda = t.List().tag(sync=True)
    origin = t.List().tag(sync=True)


VIEWS = {"threads": ThreadMap, "lifetimes": LifetimeRuler, "barriers": BarrierView,
         "timing": TimingView, "cuda": CudaView}
