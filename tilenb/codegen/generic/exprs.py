"""Expressions of the generic lowering: C values at an element, windows, valid regions, addresses.

Guarantees:
- `ev(g, e, at)` is the C value of expression `e` at element `at` (None: a scalar); it may emit
  statements (loads, hoisted values, serial reductions and dots) before the line that uses it,
  and reuses a value computed earlier in the same block (`g.memo`). Values on tensor-core
  fragments come from `mma.fragments.mma_value`.
- `loc_of(g, e)` is the tile-shaped window (`Loc`) a slice, view or tile names; `element_addr`
  the address and bounds test of one element; `region(g, e)` the valid region of a tile value
  (spec 8: intersections after broadcasting), named as C variables where not known while
  generating (`name_region`).
- Elements outside a tensor or a tile's valid region are never read: they read as 0
  (`tile_read`, `in_region`); reductions skip them, dots read them as 0.
"""
from __future__ import annotations

import copy
from typing import Optional

from ... import ir
from ...analysis.mma_tiles import shape2
from ...analysis.ownership import own_reductions
from ...types import operand_dtype

from .. import ctypes_ as C
from ..emitter import c_add, c_clamp, c_max, c_max_ll, c_min, c_min_ll, c_sub, is_int, swz_c
from ..mma import fragments as frags
from ..values import At, Loc, Region, Shaped, TileVar


def scalar_as(g, e, dt):
    """The value of a scalar expression as stored into a var of type dt (rounded)."""
    return C.convert(scalar(g, e), e.type.dtype, dt)


def element_addr(g, e: ir.Element):
    """(pointer, index, in-bounds condition, storage dtype) of one element."""
    idx = [scalar_as(g, x, "index") for x in e.indices]
    base, flat, entries = resolve(g, e.base, e.flat)
    bounds = None
    if entries is not None:      # through a view: only inside its window (and its enclosing views')
        bounds = sub_bounds(g, entries, view_bounds(g, e.base), [ir.SubIndex(x) for x in e.indices],
                                 [k for k, en in enumerate(entries) if en[0] == "rng"])
    if base.kind == "tensor":
        exts = [dim_c(g, d) for d in base.type.dims]
        ptr = g.cname(base)
        dt = base.type.dtype
    else:
        tv = g.tiles.get(id(base))
        if tv is None or tv.space != "shared":
            g.fail(f"element access to '{base.name}', which is not in shared memory", e)
        exts = [1, tv.shape[0] * tv.shape[1]] if flat else ([tv.shape[1]] if tv.rank == 1 else list(tv.shape))
        ptr = tv.cname
        dt = tv.dtype
    swz = None if base.kind == "tensor" else g.tiles[id(base)].swz
    coords = []
    k = 0
    if entries is None:
        coords = list(idx)
    else:
        for en in entries:
            if en[0] == "fix":
                coords.append(en[1])
            else:
                coords.append(c_add(en[1], idx[k]))
                k += 1
    conds = []
    lin = None
    for k, (x, ext) in enumerate(zip(coords, exts)):
        xv = g.new("e")
        g.emit(f"const long long {xv} = {x};")
        conds.append(f"{xv} >= 0 && {xv} < {ext}")
        if bounds is not None and bounds[k] is not None:
            blo, bhi = bounds[k]
            if not (is_int(blo) and blo <= 0):
                conds.append(f"{xv} >= {blo}")
            if str(bhi) != str(ext):
                conds.append(f"{xv} < {bhi}")
        lin = xv if lin is None else f"({lin}) * {ext} + {xv}"
    return ptr, swz_c(swz, lin), " && ".join(conds) or "true", dt


def dim_c(g, d):
    if isinstance(d, int):
        return d
    return g.dims.get(d) or g.cname(g.kir.dims[d])


def resolve(g, sym: ir.Sym, flat: bool):
    """A view's base and entries (None: the symbol itself, indexed directly)."""
    if sym.kind == "view" and id(sym) in g.views and id(sym) not in g.tiles:
        v = g.views[id(sym)]
        return v.base, v.flat, v.entries
    return sym, flat, None


def view_bounds(g, sym: ir.Sym):
    """ViewInfo.bounds of `sym` when `resolve` maps it to a view's base (else None)."""
    if sym.kind == "view" and id(sym) in g.views and id(sym) not in g.tiles:
        return g.views[id(sym)].bounds
    return None


def sub_bounds(g, entries, bounds, subs, rng_idx):
    """The bounds (ViewInfo.bounds) of a window `subs` of a view with `entries` and
    `bounds`, subscript m applying to base dimension rng_idx[m]: a subscript whose start
    (index) is a constant inside the view keeps the view's bound (the checker refuses a
    constant window that leaves it); any other is bounded by the view's window as well."""
    out = list(bounds) if bounds is not None else [None] * len(entries)
    for k, sub in zip(rng_idx, subs):
        en = entries[k]
        if en[0] != "rng":
            continue
        st, n = en[1], en[2]
        if isinstance(sub, ir.SubIndex):
            x, ln = sub.index, 1
        else:
            x, ln = sub.start, sub.length
        if isinstance(x, ir.Const) and is_int(n) and 0 <= int(x.value) and int(x.value) + ln <= n:
            continue
        lo, hi = st, c_add(st, n)
        if out[k] is not None:
            lo, hi = c_max_ll(out[k][0], lo), c_min_ll(out[k][1], hi)
        out[k] = (hoist(g, lo), hoist(g, hi))
    return out if any(b is not None for b in out) else None


def scalar(g, e) -> str:
    return ev(g, e, None)


def ev(g, e, at: Optional[At]) -> str:
    """C value expression of `e` (at element `at` for tiles). May emit statements."""
    if at is not None and id(e) in g.pre and (at.ident or id(e) in g.pre_bcast):
        return g.pre[id(e)]
    if at is not None:
        v = frags.mma_value(g, e, at)         # fragments, scratch dots, hoisted row reductions (mma.fragments)
        if v is not None:
            return v
    if isinstance(e, ir.Const):
        return C.literal(e.value, e.type.dtype)
    if isinstance(e, ir.Ctx):
        f = e.field
        m = {"block.x": "(long long)blockIdx.x", "block.y": "(long long)blockIdx.y", "block.z": "(long long)blockIdx.z",
             "grid.x": "(long long)gridDim.x", "grid.y": "(long long)gridDim.y", "grid.z": "(long long)gridDim.z",
             "thread": "(long long)tnb_tid", "threads": f"{g.T}LL", "warp": "(long long)tnb_warp",
             "lane": "(long long)tnb_lane", "cluster.rank": f"(long long)(blockIdx.x % {g.kir.cluster}u)",
             "cluster.x": f"(long long)(blockIdx.x / {g.kir.cluster}u)"}
        return m[f]
    if isinstance(e, ir.Ref):
        s = e.sym
        if isinstance(s.type, ir.ScalarT):
            if s.kind == "dim":
                return dim_c(g, s.name)
            return g.cname(s)
        return tile_read(g, e, at)
    if isinstance(e, ir.Element):
        ptr, idx, inb, dt = element_addr(g, e)
        val = C.load_value(f"{ptr}[{idx}]", dt)
        if inb == "true":
            return val
        return f"(({inb}) ? {val} : {C.zero(dt)})"
    if isinstance(e, ir.Slice):
        return tile_read(g, e, at)
    if isinstance(e, ir.Unary):
        x = ev(g, e.x, child_at(g, e, e.x, at))
        dt = e.type.dtype
        if e.op == "!":
            return f"(!{x})"
        xv = C.convert(x, e.x.type.dtype, dt)
        if e.op == "~":
            return f"(~{xv})"
        if C.is_float(dt):
            return f"(-{xv})"
        return f"tnb_neg({xv})"
    if isinstance(e, ir.Binary):
        return binary(g, e, at)
    if isinstance(e, ir.Convert):
        x = ev(g, e.x, child_at(g, e, e.x, at))
        return C.convert(x, e.x.type.dtype, e.type.dtype)
    if isinstance(e, ir.Math):
        return math(g, e, at)
    if isinstance(e, (ir.Reduce, ir.Dot)):
        # the same reduction or dot at the same coordinates is computed once per scope
        if isinstance(e, ir.Dot):
            coords = (str(at.i), str(at.j))
        elif len(e.x.type.shape) == 1:
            coords = (None, None)
        else:
            coords = (str(at.i), None) if e.axis == 1 else (None, str(at.j))
        key = (skey(g, e),) + coords
        hit = g.memo.get(key)
        if hit is not None:
            return hit[0]
        v = reduce_serial(g, e, at) if isinstance(e, ir.Reduce) else dot_serial(g, e, at)
        g.memo[key] = (v, g.ind)
        return v
    if isinstance(e, ir.Transpose):
        sub = At(at.j, at.i, None, None, False)
        return ev(g, e.x, sub)
    g.fail(f"expression {type(e).__name__}", e)


def leaf_key(g, e, loc: "Loc"):
    """Equal for two operand reads that load the same elements: a shared tile's window by its
    location; a tensor window by its expression (spans ignored), since each read evaluates
    its window's position into names of its own."""
    return ("g", skey(g, e)) if loc.kind == "global" else loc.key


def skey(g, e):
    """A key equal for structurally equal expressions (spans ignored)."""
    k = g.skeys.get(id(e))
    if k is not None:
        return k
    if isinstance(e, ir.Sym):
        return ("sym", id(e))
    parts = [type(e).__name__]
    for f in e.__dataclass_fields__:
        if f == "span":
            continue
        v = getattr(e, f)
        if isinstance(v, tuple):
            parts.append(tuple(skey(g, x) if hasattr(x, "__dataclass_fields__") or isinstance(x, ir.Sym) else x for x in v))
        elif hasattr(v, "__dataclass_fields__") or isinstance(v, ir.Sym):
            parts.append(skey(g, v))
        else:
            parts.append(v)
    k = tuple(parts)
    g.skeys[id(e)] = k
    return k


def hoist_row_reductions(g, value, i, domain):
    """Evaluate once per chunk the row reductions an elementwise value broadcasts along the
    row (rowmax(x) in x - rowmax(x)): every element of a chunk shares its row. Only those
    whose rows are the sweep's (a value of one row broadcast to the `domain`'s rows is left
    to `elem_value`, which reads its row 0)."""
    if not isinstance(value.type, ir.TileT):
        return
    rows_same = shape2(value.type.shape)[0] == domain[0]
    found = [r for r in own_reductions(value, rows_same, rows_only=True) if r.axis == 1]
    for r in found:
        ev(g, r, At(i, 0, None, None, False))


def child_at(g, parent, child, at: Optional[At]) -> Optional[At]:
    if at is None or not isinstance(child.type, ir.TileT):
        return None
    row = frags.mma_child_at(g, parent, child, at)   # a [M, 1] operand of rows-mode fragments (mma.fragments)
    if row is not None:
        return row
    P = shape2(parent.type.shape)
    Q = shape2(child.type.shape)
    i = at.i if Q[0] == P[0] else 0
    j = at.j if Q[1] == P[1] else 0
    same = Q == P
    return At(i, j, at.slot if same else None, at.layout if same else None, at.ident and same)


def binary(g, e: ir.Binary, at):
    a = ev(g, e.a, child_at(g, e, e.a, at))
    b = ev(g, e.b, child_at(g, e, e.b, at))
    op = e.op
    if op in ("&&", "||"):
        return f"({a} {op} {b})"
    ta, tb = e.a.type.dtype, e.b.type.dtype
    if op in ("==", "!=", "<", "<=", ">", ">="):
        ct = operand_dtype(ta, tb, isinstance(e.a, ir.Const), isinstance(e.b, ir.Const))
        return f"({C.convert(a, ta, ct)} {op} {C.convert(b, tb, ct)})"
    ct = e.type.dtype
    av, bv = C.convert(a, ta, ct), C.convert(b, tb, ct)
    if op == "/" and id(e) in g.fast_div:
        rcp = g.fast_div[id(e)]
        return f"({av} * {rcp(at) if callable(rcp) else rcp})"
    if C.is_float(ct):
        if op == "%":
            return f"{'fmodf' if ct != 'f64' else 'fmod'}({av}, {bv})"
        return f"({av} {op} {bv})"
    fn = {"+": "tnb_add", "-": "tnb_sub", "*": "tnb_mul", "/": "tnb_div", "%": "tnb_mod",
          "<<": "tnb_shl", ">>": "tnb_shr"}.get(op)
    cty = C.VALUE_C[ct]
    if fn:
        return f"{fn}(({cty})({av}), ({cty})({bv}))"
    return f"({av} {op} {bv})"


def math(g, e: ir.Math, at):
    dt = e.type.dtype
    fn = e.fn
    if fn == "where":
        pick = g.where_pick.get(id(e))
        if pick:   # the analysis decided its condition for the whole tile (generic.masks): one value, no select
            x = e.args[1] if pick == 1 else e.args[2]
            return C.convert(ev(g, x, child_at(g, e, x, at)), x.type.dtype, dt)
    args = [ev(g, x, child_at(g, e, x, at)) for x in e.args]
    if fn == "where":
        c = args[0]
        return f"({c} ? {C.convert(args[1], e.args[1].type.dtype, dt)} : {C.convert(args[2], e.args[2].type.dtype, dt)})"
    if fn in ("min", "max"):
        a, b = (C.convert(x, y.type.dtype, dt) for x, y in zip(args, e.args))
        cty = C.VALUE_C[dt]
        return f"tnb_{fn}(({cty})({a}), ({cty})({b}))"
    if fn in ("rows", "cols"):
        # the element's own row (column) index plus the start: at.i / at.j are its coordinates
        # in this tile on every sweep (generic elements, mma.sync and wgmma fragments)
        x = at.i if fn == "rows" else at.j
        start = e.args[0]                 # an i32 value (the checker stored it so)
        if isinstance(start, ir.Const) and start.value == 0:
            return f"((int)({x}))"
        return f"tnb_add({args[0]}, (int)({x}))"
    if fn == "cdiv":
        a, b = (C.convert(x, y.type.dtype, dt) for x, y in zip(args, e.args))
        cty = C.VALUE_C[dt]
        return f"tnb_cdiv(({cty})({a}), ({cty})({b}))"
    x = C.convert(args[0], e.args[0].type.dtype, dt)
    if fn == "abs" and not C.is_float(dt):
        return f"tnb_abs(({C.VALUE_C[dt]})({x}))"
    f32 = dt != "f64"
    if fn == "exp" and f32:
        return f"tnb_exp({x})"
    if fn == "exp2" and f32:
        return f"tnb_exp2({x})"
    if fn == "rsqrt":
        return f"(1.0f / sqrtf({x}))" if f32 else f"(1.0 / sqrt({x}))"
    name = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sqrt": "sqrt", "abs": "fabs",
            "floor": "floor", "ceil": "ceil", "round": "rint", "tanh": "tanh", "sin": "sin", "cos": "cos",
            "erf": "erf"}.get(fn)
    if name is None:
        g.fail(f"built-in {fn}", e)
    return f"{name}{'f' if f32 else ''}({x})"


def _inline_slice(g, ref: ir.Ref, sl: ir.Slice) -> ir.Slice:
    """The slice a read `ref` of an inline view stands for: one object per read, as a slice
    written in each dot is (regions are cached by object): the one its staging copies
    (`lowering.Stage.src`), so that the copy and the dot share its region, as they do for a
    slice written in the dot."""
    st = g.low.stages.get(id(ref))
    if st is not None and st.src is not None:
        return st.src
    hit = g.inline_slices.get(id(ref))
    if hit is None:
        hit = g.inline_slices[id(ref)] = (copy.copy(sl), ref)     # the Ref kept: its id stays its own
    return hit[0]


def loc_of(g, e) -> Optional[Loc]:
    """The Loc a Slice / Ref-to-tile-or-view reads or writes (None for register tiles). A view
    only tensor-core dots read (`KernelLowering.inline_views`) reads as its slice written here."""
    if isinstance(e, ir.Ref) and e.sym.kind == "view":
        inline = getattr(getattr(g, "low", None), "inline_views", {}).get(id(e.sym))
        if inline is not None:
            key = ("loc", id(e))
            if key not in g.regions:
                g.regions[key] = loc_of(g, _inline_slice(g, e, inline))
            return g.regions[key]
    if isinstance(e, ir.Ref):
        sym, flat, subs = e.sym, False, None
    elif isinstance(e, ir.Slice):
        sym, flat, subs = e.base, e.flat, e.subs
    else:
        return None
    key = ("loc", id(e))
    if key in g.regions:
        return g.regions[key]
    base, bflat, entries = resolve(g, sym, flat)
    of_view = entries is not None
    bounds = view_bounds(g, sym) if of_view else None
    if base.kind == "tensor":
        exts = [dim_c(g, d) for d in base.type.dims]
        dt = base.type.dtype
        ptr = g.cname(base)
        kind = "global"
        tile_region = None
        if entries is None:
            entries = [("rng", 0, d) for d in base.type.dims]   # never happens for tensors
    else:
        tv = g.tile_of(base)
        if tv is None:
            g.fail(f"tile '{base.name}' is used before it is declared", e)
        if tv.space == "registers":
            return None
        dt = tv.dtype
        ptr = tv.cname
        kind = "shared"
        if bflat:
            exts = [1, tv.shape[0] * tv.shape[1]]
            tile_region = None
        elif tv.rank == 1:
            exts = [tv.shape[1]]
            r = tv.region
            tile_region = [(r[2], r[3])]
        else:
            exts = list(tv.shape)
            r = tv.region
            tile_region = [(r[0], r[1]), (r[2], r[3])]
        if entries is None:
            entries = [("rng", 0, x) for x in exts]
    if subs is not None:
        if of_view:
            bounds = sub_bounds(g, entries, bounds, subs, sub_dims(g, entries, subs))
        entries = apply_subs(g, entries, subs)
    loc = Loc(kind, base, dt, ptr, exts, entries, tile_region, tv.swz if kind == "shared" else None,
              tv if kind == "shared" and bflat else None, bounds)
    g.regions[key] = loc
    return loc


def flat_run(g, tv: TileVar):
    """flat(t)'s valid columns [start, end) as uniform ints (spec section 6; the CPU
    executor's `cpu_memory.flat_run`): from t's first valid element to the first invalid
    one after it, [0, 0) when t's region is empty."""
    r0, r1, c0, c1 = tv.region
    C = tv.shape[1]
    v = g.new("fl")
    empty = f"{r0} >= {r1} || {c0} >= {c1}"
    whole = f"({c0} <= 0 && {c1} >= {C}) || {r1} - {r0} <= 1"
    g.emit(f"const int {v}_a = ({empty}) ? 0 : {r0} * {C} + {c0};  // flat({tv.sym.name}): its valid run")
    g.emit(f"const int {v}_b = ({empty}) ? 0 : (({whole}) ? {r1} - 1 : {r0}) * {C} + {c1};")
    return (f"{v}_a", f"{v}_b")


def sub_dims(g, entries, subs):
    """The base dimension each subscript of a window applies to (as apply_subs)."""
    rng_idx = [k for k, en in enumerate(entries) if en[0] == "rng"]
    if len(subs) != len(rng_idx):
        # a slice of the whole base (declared tile or tensor): one sub per dimension
        rng_idx = list(range(len(entries)))
    return rng_idx


def apply_subs(g, entries, subs):
    out = list(entries)
    rng_idx = sub_dims(g, entries, subs)
    for k, sub in zip(rng_idx, subs):
        en = out[k]
        st = en[1] if en[0] == "rng" else 0
        if isinstance(sub, ir.SubIndex):
            out[k] = ("fix", hoist(g, c_add(st, idx_c(g, sub.index))))
        else:
            out[k] = ("rng", hoist(g, c_add(st, idx_c(g, sub.start))), sub.length)
    return out


def idx_c(g, e):
    if isinstance(e, ir.Const):
        return int(e.value)
    return scalar_as(g, e, "index")


def hoist(g, x):
    if is_int(x):
        return x
    v = g.new("s")
    g.emit(f"const long long {v} = {x};")
    return v


def loc_bounds(g, loc: Loc, with_tile_region: bool) -> Region:
    """Rows/cols of the window inside the base and the enclosing views' windows (and
    inside the tile's valid region)."""
    ok = []
    rngs = []
    tile_region = loc.tile_region
    if with_tile_region and loc.flat_of is not None:
        tile_region = [(0, 1), flat_run(g, loc.flat_of)]
    for k, en in enumerate(loc.entries):
        ext = loc.extents[k]
        lo_b, hi_b = 0, ext
        if with_tile_region and tile_region is not None:
            lo_b, hi_b = tile_region[k]
        if loc.bounds is not None and loc.bounds[k] is not None:   # inside the enclosing views
            lo_b, hi_b = c_max_ll(lo_b, loc.bounds[k][0]), c_min_ll(hi_b, loc.bounds[k][1])
        if en[0] == "fix":
            x = en[1]
            if is_int(x) and is_int(lo_b) and is_int(hi_b):
                if not (lo_b <= x < hi_b):
                    ok.append("false")
            else:
                ok.append(f"({x} >= {lo_b} && {x} < {hi_b})")
        else:
            st, n = en[1], en[2]
            lo = c_clamp(c_sub(lo_b, st), 0, n)
            hi = c_clamp(c_sub(hi_b, st), 0, n)
            rngs.append((lo, hi))
    if len(rngs) == 1:
        rngs = [(0, 1)] + rngs
    (r0, r1), (c0, c1) = rngs
    if ok:
        cond = " && ".join(ok)
        if cond == "false":
            return (0, 0, 0, 0)
        r1 = f"(({cond}) ? {r1} : 0)"      # a fixed index outside the base: no row
        c1 = f"(({cond}) ? {c1} : 0)"      # and no column is valid (a dot takes b's columns)
    return name_region(g, (r0, r1, c0, c1))


def name_region(g, rg: Region) -> Region:
    if all(is_int(x) for x in rg):
        return rg
    v = g.new("rg")
    names = []
    for x, suf in zip(rg, ("r0", "r1", "c0", "c1")):
        if is_int(x) or (isinstance(x, str) and x.replace("_", "").isalnum()):
            names.append(x)
        else:
            g.emit(f"const int {v}_{suf} = {x};")
            names.append(f"{v}_{suf}")
    return tuple(names)


def region(g, e) -> Region:
    """The valid region of a tile expression (emitted as uniform ints)."""
    if id(e) in g.regions:
        return g.regions[id(e)]
    r = _region(g, e)
    g.regions[id(e)] = r
    return r


def _region(g, e) -> Region:
    R, Cc = shape2(e.type.shape)
    full = (0, R, 0, Cc)
    if not isinstance(e.type, ir.TileT):
        return full
    if isinstance(e, (ir.Ref, ir.Slice)):
        sym = e.sym if isinstance(e, ir.Ref) else e.base
        tv = g.tile_of(sym)
        if isinstance(e, ir.Ref) and tv is not None:
            return tv.region
        loc = loc_of(g, e)
        if loc is None:
            return tv.region
        return loc_bounds(g, loc, True)
    if isinstance(e, (ir.Unary, ir.Convert, ir.Binary, ir.Math)):
        rg = full
        for c in ir.sub_exprs(e):
            if isinstance(c.type, ir.TileT):
                rg = intersect(g, rg, broadcast_region(g, region(g, c), c.type.shape, e.type.shape))
        return name_region(g, rg)
    if isinstance(e, ir.Reduce):
        xr = region(g, e.x)
        if len(e.x.type.shape) == 1:
            return (0, 1, 0, 1)
        if e.axis == 1:
            return (xr[0], xr[1], 0, 1)
        return (0, 1, xr[2], xr[3])
    if isinstance(e, ir.Dot):
        ar, br = region(g, e.a), region(g, e.b)
        return (ar[0], ar[1], br[0], br[1]) if e.trans_b else (ar[0], ar[1], br[2], br[3])
    if isinstance(e, ir.Transpose):
        xr = region(g, e.x)
        return (xr[2], xr[3], xr[0], xr[1])
    return full


def broadcast_region(g, rg: Region, shape, out_shape) -> Region:
    """rg, the region of a value of `shape`, seen broadcast to `out_shape` (spec 8 rule 4),
    dimension by dimension as the CPU executor's `cpu_values.broadcast_region`: an extent-1
    dimension broadcast along a longer one is valid along all of it when its one element
    is valid, else empty along it, and the other dimension keeps its own range; a rank-1
    value broadcast to rank 2 gains a row dimension that is valid all along (its region's
    row part, [0, 1) or emptied by a fixed index outside the tensor, is no dimension of it:
    that emptiness is in its columns too)."""
    Q, P = shape2(shape), shape2(out_shape)
    r0, r1, c0, c1 = rg
    if Q[0] != P[0]:
        ok = True if len(shape) < 2 else cmp_lt(g, r0, 1, r1)
        r0, r1 = 0, (P[0] if ok is True else 0 if ok is False else f"(({ok}) ? {P[0]} : 0)")
    if Q[1] != P[1]:
        ok = True if len(shape) < 1 else cmp_lt(g, c0, 1, c1)
        c0, c1 = 0, (P[1] if ok is True else 0 if ok is False else f"(({ok}) ? {P[1]} : 0)")
    return (r0, r1, c0, c1)


def cmp_lt(g, lo, one, hi):
    """lo <= 0 && hi > 0 (the one element of an extent-1 dimension is valid)."""
    if is_int(lo) and is_int(hi):
        return lo <= 0 < hi
    return f"{lo} <= 0 && {hi} > 0"


def intersect(g, a: Region, b: Region) -> Region:
    return (c_max(a[0], b[0]), c_min(a[1], b[1]), c_max(a[2], b[2]), c_min(a[3], b[3]))


def tile_read(g, e, at: At) -> str:
    if at is None:
        g.fail("a tile used where a scalar is needed", e)
    sym = e.sym if isinstance(e, ir.Ref) else e.base
    tv = g.tile_of(sym)
    if tv is not None and tv.space == "registers":
        if not isinstance(e, ir.Ref):
            g.fail(f"a window of the register tile '{sym.name}'", e)
        if not at.ident or at.layout != tv.layout or at.slot is None:
            g.fail(f"'{sym.name}' is kept in registers (each thread holds its own elements), but this "
                      f"statement reads elements of it that another thread holds", e)
        return f"{tv.cname}[{at.slot}]"
    loc = loc_of(g, e)
    b = loc_bounds(g, loc, False) if loc.kind == "shared" else region(g, e)
    idx = loc.index(at.i, at.j)
    val = C.load_value(f"{loc.ptr}[{idx}]", loc.dtype)
    cond = in_region(g, b, at.i, at.j, shape2(loc.shape))
    if cond is True:
        return val
    if cond is False:
        return C.zero(loc.dtype)
    return f"(({cond}) ? {val} : {C.zero(loc.dtype)})"


def in_region(g, rg: Region, i, j, shape):
    """C condition (or True/False) that element (i, j) lies in region rg of a tile of shape."""
    R, Cc = shape
    conds = []
    for x, lo, hi, n in ((i, rg[0], rg[1], R), (j, rg[2], rg[3], Cc)):
        if is_int(lo) and is_int(hi) and lo <= 0 and hi >= n:
            continue
        if is_int(lo) and is_int(hi) and lo >= hi:
            return False
        if is_int(x) and is_int(lo) and is_int(hi):
            if not (lo <= x < hi):
                return False
            continue
        if not (is_int(lo) and lo <= 0):
            conds.append(f"{x} >= {lo}")
        if not (is_int(hi) and hi >= n):
            conds.append(f"{x} < {hi}")
    if not conds:
        return True
    return " && ".join(conds)


def reduce_ident(g, op, dt):
    if op == "sum":
        return C.zero(dt)
    if C.is_float(dt):
        inf = C.literal(float("inf"), dt)
        return f"(-{inf})" if op == "max" else inf
    info = {"i8": (-128, 127), "i32": (-(1 << 31), (1 << 31) - 1), "i64": (-(1 << 63), (1 << 63) - 1),
            "index": (-(1 << 63), (1 << 63) - 1), "u8": (0, 255), "u16": (0, 65535), "u32": (0, (1 << 32) - 1)}[dt]
    return C.literal(info[0] if op == "max" else info[1], dt)


def reduce_combine(g, op, dt, acc, v):
    if op == "sum":
        if C.is_float(dt):
            return f"{acc} + {v}"
        return f"tnb_add(({C.VALUE_C[dt]}){acc}, ({C.VALUE_C[dt]})({v}))"
    return f"tnb_{op}(({C.VALUE_C[dt]}){acc}, ({C.VALUE_C[dt]})({v}))"


def reduce_serial(g, e: ir.Reduce, at: At) -> str:
    xr = region(g, e.x)
    dt = e.type.dtype
    xdt = e.x.type.dtype
    acc = g.new("red")
    k = g.new("k")
    R, Cc = shape2(e.x.type.shape)
    g.emit(f"{C.VALUE_C[dt]} {acc} = {reduce_ident(g, e.op, dt)};")
    if len(e.x.type.shape) == 1 or e.axis == 1:
        row = at.i if len(e.x.type.shape) == 2 else 0
        cond = in_region(g, (xr[0], xr[1], 0, 1), row, 0, (R, 1))
        lo, hi, pos = xr[2], xr[3], (row, k)
    else:
        col = at.j
        cond = in_region(g, (0, 1, xr[2], xr[3]), 0, col, (1, Cc))
        lo, hi, pos = xr[0], xr[1], (k, col)
    if cond is False:
        return acc
    head = f"for (int {k} = {lo}; {k} < {hi}; ++{k}) {{"
    if cond is not True:
        head = f"if ({cond}) " + head
    g.emit(head)
    g.ind += 1
    v = ev(g, e.x, At(pos[0], pos[1], None, None, False))
    g.emit(f"{acc} = {reduce_combine(g, e.op, dt, acc, C.convert(v, xdt, dt))};")
    g.ind -= 1
    g.emit("}")
    return acc


def dot_serial(g, e: ir.Dot, at: At) -> str:
    ar, br = region(g, e.a), region(g, e.b)
    dt = e.type.dtype
    acc = g.new("dot")
    k = g.new("k")
    g.emit(f"{C.VALUE_C[dt]} {acc} = {C.zero(dt)};")
    # k runs over a's valid columns and b's valid rows (dot) / columns (dot_t)
    klo = c_max(ar[2], br[2] if e.trans_b else br[0])
    khi = c_min(ar[3], br[3] if e.trans_b else br[1])
    ci = in_region(g, (ar[0], ar[1], 0, 1), at.i, 0, (shape2(e.a.type.shape)[0], 1))
    bshape = shape2(e.b.type.shape)
    if e.trans_b:
        cj = in_region(g, (br[0], br[1], 0, 1), at.j, 0, (bshape[0], 1))
    else:
        cj = in_region(g, (0, 1, br[2], br[3]), 0, at.j, (1, bshape[1]))
    conds = [c for c in (ci, cj) if c is not True]
    if any(c is False for c in conds):
        return acc
    head = f"for (int {k} = {klo}; {k} < {khi}; ++{k}) {{"
    if conds:
        head = f"if ({' && '.join(conds)}) " + head
    g.emit(head)
    g.ind += 1
    a = ev(g, e.a, At(at.i, k, None, None, False))
    b = ev(g, e.b, At(at.j, k, None, None, False) if e.trans_b else At(k, at.j, None, None, False))
    av, bv = C.convert(a, e.a.type.dtype, dt), C.convert(b, e.b.type.dtype, dt)
    if C.is_float(dt):
        g.emit(f"{acc} += {av} * {bv};")
    else:
        g.emit(f"{acc} = tnb_add({acc}, tnb_mul(({C.VALUE_C[dt]})({av}), ({C.VALUE_C[dt]})({bv})));")
    g.ind -= 1
    g.emit("}")
    return acc


def row_contiguous(g, loc: Loc) -> bool:
    """The window's columns are consecutive elements of its base (vector accesses possible)."""
    return bool(loc.entries) and loc.entries[-1][0] == "rng"


def vector_elem(g, buf, q, v, dt):
    """Element v of a loaded vector (row q of the buffer; q None: a 1-D buffer) as a value:
    16-bit floats are read from the 32-bit word that holds them (one shift or mask to widen)."""
    b = buf if q is None else f"{buf}[{q}]"
    if dt == "bf16":
        return f"tnb_b2f_w(((const unsigned*){b})[{v} >> 1], {v} & 1)"
    if dt == "f16":
        return f"tnb_h2f_w(((const unsigned*){b})[{v} >> 1], {v} & 1)"
    return C.load_value(f"{b}[{v}]", dt)


def chunk_inside(g, rg: Region, i, j0, V, domain):
    """C condition (or True) that elements (i, j0 .. j0 + V - 1) all lie in region rg."""
    R, Cc = domain
    conds = []
    if not (is_int(rg[0]) and rg[0] <= 0):
        conds.append(f"{i} >= {rg[0]}")
    if not (is_int(rg[1]) and rg[1] >= R):
        conds.append(f"{i} < {rg[1]}")
    if not (is_int(rg[2]) and rg[2] <= 0):
        conds.append(f"{j0} >= {rg[2]}")
    if not (is_int(rg[3]) and rg[3] >= Cc):
        conds.append(f"{j0} + {V} <= {rg[3]}")
    return " && ".join(conds) if conds else True


def elem_value(g, value, at, domain=None):
    """The value at element `at` of a statement's iteration space `domain`; a value of a
    smaller shape ([1, C], [R, 1]) is broadcast to it, as operands are through child_at."""
    if not isinstance(value.type, ir.TileT):
        return scalar(g, value)
    if domain is not None and shape2(value.type.shape) != tuple(domain):
        whole = ir.TileT(value.type.dtype, tuple(domain))
        return ev(g, value, child_at(g, Shaped(whole), value, at))
    return ev(g, value, at)


def prepare_regions(g, e):
    if isinstance(e.type, ir.TileT):
        region(g, e)
    for c in ir.sub_exprs(e):
        if isinstance(c.type, ir.TileT):
            prepare_regions(g, c)


def has_reduce_or_dot(g, e) -> bool:
    if isinstance(e, (ir.Reduce, ir.Dot)):
        return True
    return any(has_reduce_or_dot(g, c) for c in ir.sub_exprs(e))
