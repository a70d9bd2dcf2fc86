"""The five views of a kernel as anywidget widgets: synced traits and nothing else.

Each class names the ES module that draws it (`widgets/<name>.js`, with `<name>.css`); the
front end reads the traits listed here and nothing more. Guarantees for every view:

- live in Jupyter: the anywidget front end runs the module with these traits;
- without a kernel (HTML exported by nbconvert, a plain frontend, nbval): `_repr_mimebundle_`
  also gives `text/html` (the same module and traits inlined in the page: no network needed),
  a deterministic `text/plain` summary (no memory addresses, no times unless measured), and,
  for the pictures (thread map, ruler, timing), an `image/png` drawn with matplotlib where it
  is installed (the listings, barriers and CUDA, are their text);
- `repr(view)` is that text summary.

Lines: every `line` in the traits is a line of the compiled source; `lines` maps the ones
shown to what the user sees ([line, label, text] triples, label being the line as counted in
the notebook cell, or "In[3]:7" for a function brought in from an earlier cell).
"""
from __future__ import annotations

import anywidget
import traitlets as t

from ..target import STATIC_SMEM
from . import assets, render


class TileView(anywidget.AnyWidget):
    """Traits every view has: the kernel's name, its source listing, and a note (shown when
    the data behind the view could not be made, e.g. an analysis error)."""

    _name = "view"
    kernel = t.Unicode("").tag(sync=True)
    lines = t.List().tag(sync=True)        # [[line, label, text], ...] in source order
    note = t.Unicode("").tag(sync=True)

    def state(self) -> dict:
        """The synced traits (those the front end reads), as plain JSON values."""
        return {k: getattr(self, k) for k in self.trait_names(sync=True)
                if not k.startswith("_") and k not in ("layout", "tabbable", "tooltip")}

    def __repr__(self) -> str:
        return render.text(self._name, self.state())

    def _repr_mimebundle_(self, **kwargs):
        data, meta = super()._repr_mimebundle_(**kwargs)
        state = self.state()
        data["text/plain"] = render.text(self._name, state)
        data["text/html"] = render.html(self._name, state)
        png = render.png(self._name, state)
        if png is not None:
            data["image/png"] = png
        meta = dict(meta or {})
        meta["tilenb"] = {"view": self._name, "kernel": self.kernel}
        return data, meta


class ThreadMap(TileView):
    """Per copy statement, which thread moves which elements: the tensor slice and the tile side
    by side, runs coloured by thread (hue by warp), and per-warp coalescing (32-byte sectors
    against the ideal) and bank conflicts (shared-memory wavefronts against the ideal)."""

    _name = "threadmap"
    _esm = assets.esm("threadmap")
    _css = assets.css("threadmap")
    threads = t.Int(0).tag(sync=True)          # threads per CTA
    copies = t.List().tag(sync=True)           # analysis "copies" records
    tiles = t.List().tag(sync=True)            # analysis "tiles" records (dtype of each tile)
    selected = t.Int(0).tag(sync=True)         # index of the copy shown


class LifetimeRuler(TileView):
    """For each source line, the bytes each live region of shared memory holds at its offset
    (tiles, and what the lowering adds: mma scratch, staging, rings, cluster slots, reduction
    partials: `Analysis.smem`), the footprint (the kernel's shared bytes) against the budget,
    and how each loop is lowered (`Analysis.loops`)."""

    _name = "ruler"
    _esm = assets.esm("ruler")
    _css = assets.css("ruler")
    footprint = t.Int(0).tag(sync=True)
    budget = t.Int(STATIC_SMEM).tag(sync=True)
    tiles = t.List().tag(sync=True)
    ruler = t.List().tag(sync=True)
    loops = t.List().tag(sync=True)            # analysis "loops" records: line, lowering, why


class BarrierView(TileView):
    """The kernel's source with a mark where the compiler puts each CTA barrier, and why."""

    _name = "barriers"
    _esm = assets.esm("barriers")
    _css = assets.css("barriers")
    barriers = t.List().tag(sync=True)


class TimingView(TileView):
    """GPU time of the latest launches: kernel time (CUDA events), host overhead, achieved
    bytes/s and FLOP/s against the device's peak (a roofline point), and each autotune
    variant's time. `timing` is the record made by `tilenb.notebook.build.timing_record`."""

    _name = "timing"
    _esm = assets.esm("timing")
    _css = assets.css("timing")
    timing = t.Dict().tag(sync=True)


class CudaView(TileView):
    """The generated CUDA C++, highlighted, each line linked to the tile-language line it
    comes from. `cuda` holds one list of [token class, text] pairs per generated line;
    `origin` the compiled-source line of each generated line (0: none)."""

    _name = "cuda"
    _esm = assets.esm("cuda")
    _css = assets.css("cuda")
    cuda = t.List().tag(sync=True)
    origin = t.List().tag(sync=True)


VIEWS = {"threads": ThreadMap, "lifetimes": LifetimeRuler, "barriers": BarrierView,
         "timing": TimingView, "cuda": CudaView}
