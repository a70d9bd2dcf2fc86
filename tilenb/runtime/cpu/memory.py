"""Memory of the CPU reference executor: tensors, tile storage, windows (slices and views).

Guarantees:

* A `TileStore` holds one declared tile's bytes for every CTA of the batch, `data` of shape
  (B, *shape) in the tile's storage dtype (always C-contiguous), and its valid region.
* A `Window` is a slice of a tensor, of a tile, or of another window (a `let` view): per base
  dimension a start, a length (None: a scalar index, which drops the dimension) and the bounds
  [lo, hi) in base coordinates that the window may touch: the base's extent, narrowed by every
  enclosing view's window. A window has no bytes: reading it reads the base's current contents.
* `read_window` never reads outside the bounds: those elements load as 0 and are invalid in
  the result. Elements inside the bounds of a tile base keep the tile's bytes, valid only where
  the tile's own region says so. `flat(t)` sees a [R, C] tile as [1, R*C] of the same bytes; its
  region is `flat_run` of t's: the run of valid elements from t's first one, so flat(t) never
  makes an element valid that t holds invalid.
* `write_window` writes exactly the elements that are valid in the value, inside the bounds,
  and in a CTA whose mask is set; the tile's own region is left unchanged.
* `atomic_window` applies a tile atomic to exactly the elements `write_window` would write,
  one update per element and CTA, in CTA order.
* `element_address` maps per-thread scalar subscripts through views to base coordinates and
  says which lanes are inside the bounds; reads outside load 0, writes outside are skipped.
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from .values import TileVal, broadcast_region, region_mask, store_cast, tile_data, npdt


class TileStore:
    """The bytes of one declared tile (var, or let of a tile value) for each CTA of the batch."""
    __slots__ = ("sym", "name", "dtype", "shape", "data", "region", "shadow")

    def __init__(self, sym, batch: int):
        self.sym = sym
        self.name = sym.name
        self.dtype = sym.type.dtype
        self.shape = tuple(sym.type.shape)
        self.data = np.zeros((batch,) + self.shape, npdt(self.dtype))
        self.region = None          # None: wholly valid; else (lo, hi), each (B, rank)
        self.shadow = None          # debug-mode access records (debug.Shadow)

    def flat_data(self):
        return self.data.reshape(self.data.shape[0], 1, -1)

    def region_per_dim(self, flat: bool):
        """Per base dimension (lo, hi) arrays of shape (B,), or None when wholly valid."""
        if self.region is None:
            return None
        lo, hi = self.region
        if not flat or len(self.shape) == 1:
            return [(lo[:, d], hi[:, d]) for d in range(lo.shape[1])]
        start, end = flat_run(lo, hi, self.shape[1])
        return [(np.zeros_like(start), np.ones_like(start)), (start, end)]


def flat_run(lo, hi, cols: int):
    """flat(t)'s valid region (spec section 6) from t's region rows [lo[:, 0], hi[:, 0]) by
    columns [lo[:, 1], hi[:, 1]) (arrays of shape (B, 2)) in a tile of `cols` columns: the run
    [start, end) of flat positions that begins at t's first valid element and ends at the first
    invalid one after it. That is every valid element when they are contiguous in row-major
    order (whole rows valid, or a single valid row); otherwise it is the first valid row's valid
    part. Empty regions give [0, 0)."""
    r0, c0, r1, c1 = lo[:, 0], lo[:, 1], hi[:, 0], hi[:, 1]
    empty = (r0 >= r1) | (c0 >= c1)
    whole = ((c0 <= 0) & (c1 >= cols)) | (r1 - r0 <= 1)
    start = r0 * cols + c0
    end = np.where(whole, r1 - 1, r0) * cols + c1
    return np.where(empty, 0, start), np.where(empty, 0, end)


class TensorRef:
    """A tensor argument: its host array (C-contiguous) and name."""
    __slots__ = ("name", "array", "dtype")

    def __init__(self, name, array, dtype):
        self.name = name
        self.array = array
        self.dtype = dtype


class Window:
    """A slice of a tensor or a tile (see the module docstring)."""
    __slots__ = ("base", "flat", "starts", "lengths", "lo", "hi", "name")

    def __init__(self, base, flat, starts, lengths, lo, hi, name):
        self.base = base          # TensorRef or TileStore
        self.flat = flat
        self.starts: List[np.ndarray] = starts    # per base dim: (B,) int64 or ()
        self.lengths: List[Optional[int]] = lengths
        self.lo: List[np.ndarray] = lo
        self.hi: List[np.ndarray] = hi
        self.name = name          # how messages name it

    @property
    def shape(self):
        return tuple(n for n in self.lengths if n is not None)

    @property
    def is_tile(self):
        return isinstance(self.base, TileStore)

    @property
    def dtype(self):
        return self.base.dtype


def base_extents(base, flat: bool):
    if isinstance(base, TensorRef):
        return tuple(base.array.shape)
    if flat and len(base.shape) == 2:
        return (1, base.shape[0] * base.shape[1])
    return base.shape


def base_array(base, flat: bool):
    if isinstance(base, TensorRef):
        return base.array
    return base.flat_data() if flat and len(base.shape) == 2 else base.data


def whole_window(base, flat: bool, name: str) -> Window:
    ext = base_extents(base, flat)
    zero = np.zeros((), np.int64)
    return Window(base, flat, [zero] * len(ext), list(ext), [zero] * len(ext),
                  [np.asarray(e, np.int64) for e in ext], name)


def sub_window(parent: Window, subs) -> Window:
    """A slice of `parent`: `subs` gives, per tile axis of parent, (start, length-or-None)."""
    starts, lengths, lo, hi = [], [], [], []
    it = iter(subs)
    for d, n in enumerate(parent.lengths):
        s0, l0, b0, b1 = parent.starts[d], n, parent.lo[d], parent.hi[d]
        if n is None:               # already a scalar index of the base: unchanged
            starts.append(s0)
            lengths.append(None)
            lo.append(b0)
            hi.append(b1)
            continue
        start, length = next(it)
        starts.append(s0 + start)
        lengths.append(length)
        # the new window may touch only what the parent could, inside the parent's window
        lo.append(np.maximum(b0, s0))
        hi.append(np.minimum(b1, s0 + l0))
    return Window(parent.base, parent.flat, starts, lengths, lo, hi, parent.name)


def _shaped(a, p):
    """(B,) or () -> broadcastable against (B, *tile axes) with p tile axes."""
    a = np.asarray(a)
    if a.ndim == 0:
        return a
    return a.reshape((a.shape[0],) + (1,) * p)


def _index_arrays(win: Window, upto=None):
    """Per base dim (the first `upto`) an index array broadcastable to (B, *their tile axes),
    and the in-bounds mask."""
    dims = win.lengths if upto is None else win.lengths[:upto]
    p = sum(1 for n in dims if n is not None)
    idx, valid = [], None
    k = 0
    for d, n in enumerate(dims):
        s = _shaped(win.starts[d], p)
        if n is None:
            ix = s
        else:
            shp = [1] * (p + 1)
            shp[1 + k] = n
            ix = s + np.arange(n, dtype=np.int64).reshape(shp)
            k += 1
        v = (ix >= _shaped(win.lo[d], p)) & (ix < _shaped(win.hi[d], p))
        valid = v if valid is None else valid & v
        idx.append(ix)
    return idx, valid


def _split(win: Window):
    """(k, slices, trim): base dims k.. can be addressed by basic slicing (the same start in
    every CTA, inside the bounds); dims ..k-1 need a gather. The last dim may run partly past
    the bounds: its slice covers the part inside, `trim` = (t0, t1) is that part in window
    coordinates (None when the whole window is inside)."""
    sl = []
    trim = None
    k = len(win.lengths)
    while k > 0:
        d = k - 1
        s, lo, hi, n = win.starts[d], win.lo[d], win.hi[d], win.lengths[d]
        if np.ndim(s) or np.ndim(lo) or np.ndim(hi):
            break
        s, lo, hi = int(s), int(lo), int(hi)
        if n is None:
            if not lo <= s < hi:
                break
            sl.append(s)
        elif lo <= s and s + n <= hi:
            sl.append(slice(s, s + n))
        elif d == len(win.lengths) - 1 and max(s, lo) < min(s + n, hi):
            a, b = max(s, lo), min(s + n, hi)
            sl.append(slice(a, b))
            trim = (a - s, b - s)
        else:
            break
        k -= 1
    if k == len(win.lengths):
        trim = None
    return k, tuple(reversed(sl)), trim


def _batch_index(nb, p):
    return np.arange(nb, dtype=np.int64).reshape((nb,) + (1,) * p)


def read_window(win: Window, nb: int) -> TileVal:
    """The window's current contents as a tile value (see the module docstring)."""
    shape = win.shape
    p = len(shape)
    ext = base_extents(win.base, win.flat)
    src = base_array(win.base, win.flat)
    k, basic, trim = _split(win)
    lead = (slice(None),) if win.is_tile else ()
    if k == 0:                                  # no gather at all
        data = src[lead + basic]
        if not win.is_tile:
            data = data[None]
    elif any(e == 0 for e in ext):              # an empty base: every element is outside
        data = np.zeros((1,) + shape, src.dtype)
        trim = None
    else:
        # gather the leading dims, slice the trailing ones (runs of contiguous elements)
        idx, valid = _index_arrays(win, k)
        pp = p - sum(1 for n in win.lengths[k:] if n is not None)
        cl = tuple(np.clip(ix, 0, e - 1) for ix, e in zip(idx, ext))
        if win.is_tile:
            cl = (_batch_index(src.shape[0], pp),) + cl
        data = src[cl + basic]
        if not win.is_tile and all(np.ndim(c) == 0 for c in cl):
            data = data[None]                   # uniform indices only: the batch axis is kept
        if not valid.all():
            valid = valid.reshape(valid.shape + (1,) * (p - pp))
            data = np.where(valid, data, np.zeros((), data.dtype))
    if trim is not None:                        # the part of the last dim past the bounds: 0
        full = np.zeros(data.shape[:-1] + (shape[-1],), data.dtype)
        full[..., trim[0]:trim[1]] = data
        data = full
    if data.shape[1:] != shape:
        data = np.broadcast_to(data, (data.shape[0],) + shape)
    # the region: the bounds, narrowed by a tile base's own region
    bounds = list(zip(win.lo, win.hi))
    if win.is_tile:
        reg = win.base.region_per_dim(win.flat)
        if reg is not None:
            bounds = [(np.maximum(a, r0), np.minimum(b, r1)) for (a, b), (r0, r1) in zip(bounds, reg)]
    region = _window_region(win, bounds, nb)
    if win.is_tile and data.shape[0] == 1 and nb > 1:
        data = np.broadcast_to(data, (nb,) + shape)
    return TileVal(data, region)


def _window_region(win: Window, bounds, nb):
    shape = win.shape
    p = len(shape)
    if p == 0:
        return None
    lo_l, hi_l = [], []
    ok = None
    full = True
    for d, n in enumerate(win.lengths):
        s = np.asarray(win.starts[d])
        b0, b1 = bounds[d]
        if n is None:
            o = (s >= b0) & (s < b1)
            ok = o if ok is None else ok & o
            if not np.all(o):
                full = False
            continue
        lo = np.clip(b0 - s, 0, n)
        hi = np.clip(b1 - s, 0, n)
        if np.any(lo != 0) or np.any(hi != n):
            full = False
        lo_l.append(lo)
        hi_l.append(hi)
    if full:
        return None
    rows = nb
    lo = np.zeros((rows, p), np.int64)
    hi = np.zeros((rows, p), np.int64)
    for k in range(p):
        lo[:, k] = lo_l[k]
        hi[:, k] = hi_l[k]
    if ok is not None:
        ok = np.broadcast_to(ok, (rows,))
        hi = np.where(ok[:, None], hi, lo)
    return lo, hi


def write_window(win: Window, value, value_dtype: str, cta: np.ndarray, nb: int):
    """Store `value` (TileVal or scalar of IR type value_dtype) into the window (module doc)."""
    shape = win.shape
    p = len(shape)
    ext = base_extents(win.base, win.flat)
    if any(e == 0 for e in ext):
        return
    dst = base_array(win.base, win.flat)
    vdata = np.asarray(store_cast(np.asarray(tile_data(value, p)), value_dtype, win.dtype))
    vregion = None
    if isinstance(value, TileVal) and value.region is not None:
        vregion = broadcast_region(value.region, value.shape, shape)
    all_cta = bool(cta.all())
    k, basic, trim = _split(win)
    pp = p - sum(1 for n in win.lengths[k:] if n is not None)
    if k < len(win.lengths) and vregion is not None:
        # slicing the trailing axes needs the value valid along all of them in every CTA
        # (along the last one: over the part that is written)
        lo, hi = vregion
        need_lo = np.zeros(p - pp, np.int64)
        need_hi = np.asarray(shape[pp:], np.int64).copy()
        if trim is not None:
            need_lo[-1], need_hi[-1] = trim
        if not (np.all(lo[:, pp:] <= need_lo) and np.all(hi[:, pp:] >= need_hi)):
            k = len(win.lengths)
    if k == 0 and (vregion is not None or not all_cta):
        k = len(win.lengths)                       # masked everywhere: element by element
    if k == len(win.lengths):
        basic, trim, pp = (), None, p
    if trim is not None:
        if vdata.ndim and vdata.shape[-1] != 1:     # (an extent-1 last axis is broadcast: kept)
            vdata = vdata[..., trim[0]:trim[1]]
        shape = shape[:-1] + (trim[1] - trim[0],)
    if k == 0:
        if win.is_tile:
            dst[(slice(None),) + basic] = vdata
        else:   # every CTA of the batch writes the same window: the last CTA's value stays
            dst[basic] = vdata[-1] if vdata.ndim == p + 1 else vdata
        return
    # gather positions along the leading dims; the trailing ones (if any) are sliced
    idx, valid = _index_arrays(win, k)
    mask = valid
    if vregion is not None:
        vmask = region_mask((vregion[0][:, :pp], vregion[1][:, :pp]), win.shape[:pp])
        if vmask is not None:
            mask = mask & vmask
    if not all_cta:
        mask = mask & cta.reshape((nb,) + (1,) * pp)
    full = (nb,) + shape[:pp]
    mask = np.broadcast_to(mask, full)
    if not mask.any():
        return
    sel = [np.broadcast_to(ix, full)[mask] for ix in idx]
    if win.is_tile:
        sel = [np.broadcast_to(_batch_index(nb, pp), full)[mask]] + sel
    vals = np.broadcast_to(vdata, (nb,) + shape)[mask]
    dst[tuple(sel) + basic] = vals


def window_positions(win: Window, value, nb: int, cta: Optional[np.ndarray] = None):
    """Where a store of `value` (TileVal or scalar) into `win` lands: (mask, index) with mask the
    elements of the window, per CTA, shape (nb, *win.shape), that lie inside the bounds, are
    valid in the value and belong to a CTA in `cta` (None: every CTA), and index one
    base-coordinate array per base dimension, broadcast to the same shape."""
    shape = win.shape
    p = len(shape)
    idx, mask = _index_arrays(win)
    if isinstance(value, TileVal) and value.region is not None:
        vmask = region_mask(broadcast_region(value.region, value.shape, shape), shape)
        if vmask is not None:
            mask = mask & vmask
    if cta is not None:
        mask = mask & cta.reshape((nb,) + (1,) * p)
    full = (nb,) + shape
    return np.broadcast_to(mask, full), [np.broadcast_to(ix, full) for ix in idx]


def atomic_window(win: Window, value, value_dtype: str, op: str, cta: np.ndarray, nb: int):
    """A tile atomic: `op` ("add" or "max") of `value` into every element of the tensor window
    that is valid in the value and inside the tensor, in CTA order, then row-major within the
    CTA's slice, each update rounded to the tensor's type (floats: max ignores a NaN operand).
    The value is first stored into the tensor's type, as for an element atomic."""
    ext = base_extents(win.base, win.flat)
    if any(e == 0 for e in ext):
        return
    p = len(win.shape)
    full = (nb,) + win.shape
    mask, idx = window_positions(win, value, nb, cta)
    if not mask.any():
        return
    vdata = np.asarray(store_cast(np.asarray(tile_data(value, p)), value_dtype, win.dtype))
    vals = np.broadcast_to(vdata, full)[mask]
    lin = np.zeros(len(vals), np.int64)
    for ix, e in zip(idx, ext):
        lin = lin * e + ix[mask]
    dst = base_array(win.base, win.flat).reshape(-1)
    if op == "add":
        np.add.at(dst, lin, vals)
    elif dst.dtype.kind == "f":
        np.fmax.at(dst, lin, vals)
    else:
        np.maximum.at(dst, lin, vals)


class ElementAddress:
    """Where a per-thread element access lands: the base, base-coordinate index arrays (each of
    a scalar value's shape), and which lanes are inside the bounds."""
    __slots__ = ("base", "flat", "index", "inside", "name", "view")

    def __init__(self, base, flat, index, inside, name, view):
        self.base = base
        self.flat = flat
        self.index = index
        self.inside = inside
        self.name = name
        self.view = view


def _lane(a):
    """A window's per-CTA array (B,) as a scalar value shape (B, 1)."""
    a = np.asarray(a)
    return a if a.ndim == 0 else a.reshape(-1, 1)


def element_address(target, indices, flat: bool) -> ElementAddress:
    """`target` is a TensorRef, TileStore or Window; indices are index-typed scalar values."""
    if isinstance(target, Window):
        win = target
        base_idx, inside = [], None
        it = iter(indices)
        for d, n in enumerate(win.lengths):
            s = _lane(win.starts[d])
            if n is None:
                ix = s
                v = True
            else:
                i = next(it)
                ix = s + i
                v = (i >= 0) & (i < n)          # inside the view's own window
            v = v & (ix >= _lane(win.lo[d])) & (ix < _lane(win.hi[d]))
            inside = v if inside is None else inside & v
            base_idx.append(ix)
        return ElementAddress(win.base, win.flat, base_idx, inside, win.name, True)
    ext = base_extents(target, flat)
    inside = None
    for ix, e in zip(indices, ext):
        v = (ix >= 0) & (ix < e)
        inside = v if inside is None else inside & v
    return ElementAddress(target, flat, list(indices), inside, target.name, False)


def read_element(addr: ElementAddress, nb: int):
    """The element each lane addresses (0 outside the bounds)."""
    ext = base_extents(addr.base, addr.flat)
    src = base_array(addr.base, addr.flat)
    if any(e == 0 for e in ext):
        return np.zeros((), src.dtype)
    cl = tuple(np.clip(ix, 0, e - 1) for ix, e in zip(addr.index, ext))
    if isinstance(addr.base, TileStore):
        cl = (np.arange(nb, dtype=np.int64).reshape(nb, 1),) + cl
    val = src[cl]
    inside = addr.inside
    if inside is not None and not np.all(inside):
        val = np.where(inside, val, np.zeros((), val.dtype))
    return val


def lanes_of(addr: ElementAddress, value, act, nb, nthreads):
    """Flattened (CTA-major, then thread) arrays of the lanes that write: base-coordinate
    indices, values, CTA and thread ids. Only active lanes inside the bounds are kept."""
    full = (nb, nthreads)
    m = np.broadcast_to(act, full)
    if addr.inside is not None:
        m = m & np.broadcast_to(addr.inside, full)
    m = m.ravel()
    idx = [np.broadcast_to(ix, full).ravel()[m] for ix in addr.index]
    vals = np.broadcast_to(value, full).ravel()[m]
    lane = np.nonzero(m)[0]
    return idx, vals, lane // nthreads, lane % nthreads


def linear(addr: ElementAddress, idx, cta_ids):
    """Flat positions of the addressed elements in the base array (including the CTA axis)."""
    ext = base_extents(addr.base, addr.flat)
    lin = np.zeros(len(cta_ids), np.int64)
    for ix, e in zip(idx, ext):
        lin = lin * e + ix
    if isinstance(addr.base, TileStore):
        size = int(np.prod(ext))
        lin = cta_ids * size + lin
    return lin


def write_element(addr: ElementAddress, value, act, nb, nthreads, uniform: bool):
    """Store one value per active lane. Several lanes writing one element: the highest thread
    (of the last CTA) wins, as if the threads ran in order."""
    src = base_array(addr.base, addr.flat)
    if uniform:
        # every active thread of a CTA writes the same value to the same element: once per CTA
        def one(a):
            return a if a is None or np.ndim(a) == 0 else np.asarray(a)[:, :1]
        act = np.asarray(act)
        if act.ndim == 2 and act.shape[1] > 1:
            act = act.any(axis=1, keepdims=True)
        nthreads = 1
        value = one(np.asarray(value))
        addr = ElementAddress(addr.base, addr.flat, [one(ix) for ix in addr.index], one(addr.inside),
                              addr.name, addr.view)
    idx, vals, cta_ids, _ = lanes_of(addr, value, act, nb, nthreads)
    if len(vals) == 0:
        return
    flatdst = src.reshape(-1)
    lin = linear(addr, idx, cta_ids)
    if len(lin) > 1 and not np.all(lin[1:] > lin[:-1]):   # rising positions: no two lanes meet
        rev = lin[::-1]
        _, first = np.unique(rev, return_index=True)
        if len(first) < len(lin):
            keep = len(lin) - 1 - first
            lin, vals = lin[keep], vals[keep]
    flatdst[lin] = vals
