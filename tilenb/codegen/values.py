"""The values the CUDA generator reasons about while it writes a kernel, and what it returns.

Guarantees: these are plain records (no C text is written here): `Region` (a valid region,
rows [r0, r1) and columns [c0, c1), ints or C text), `ChunkLayout` (a register tile on the
canonical partition's chunks), `At` (where an element is evaluated), `TileVar` (a declared tile
and its C names), `Loc` (a tile-shaped window of a tensor or shared tile, and the index of an
element in it, through the tile's swizzle), `ViewInfo` (a `let` view resolved to its base),
`Shaped` (stands for an expression of a given type) and `KernelSource` (the generated kernel
and what a launch needs). `kernel_symbol(kir)` is the C symbol of a kernel variant, the one
place that decides it (a name that clashes with C++ or CUDA is escaped: `cnames.py`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

from .. import ir
from .cnames import kernel_base
from .emitter import c_add, is_int, swz_c

Region = Tuple[object, object, object, object]   # r0, r1, c0, c1 (ints or C text)


# ---- register layouts --------------------------------------------------------------------------
@dataclass(frozen=True)
class ChunkLayout:
    """Registers: thread t holds chunks t, t + T, ... of the canonical partition at width V."""
    R: int
    C: int
    V: int
    T: int

    @property
    def nchunks(self):
        return self.R * self.C // self.V

    @property
    def steps(self):
        return -(-self.nchunks // self.T)

    @property
    def slots(self):
        return self.steps * self.V


@dataclass(frozen=True)
class At:
    """Where an element is evaluated: coordinates (C text) in the expression's own shape."""
    i: object
    j: object
    slot: Optional[str] = None     # the register slot, when sweeping a register layout
    layout: object = None
    ident: bool = True             # coordinates are the sweep's own (no broadcast/transpose)


@dataclass
class TileVar:
    sym: ir.Sym
    cname: str
    dtype: str
    shape: Tuple[int, int]       # normalized 2-D
    rank: int
    space: str                   # shared / registers
    layout: object = None        # registers: ChunkLayout or MmaLayout
    swz: object = None           # shared: the XOR swizzle of its 16-byte units (None: row-major)

    @property
    def region(self) -> Region:
        n = self.cname
        return (f"{n}_r0", f"{n}_r1", f"{n}_c0", f"{n}_c1")


@dataclass
class Loc:
    """A tile-shaped window of a tensor or a shared tile."""
    kind: str                    # global / shared
    sym: ir.Sym                  # the tensor or declared tile
    dtype: str
    ptr: str
    extents: List[object]        # per base dimension
    entries: List[tuple]         # per base dimension: ("fix", x) or ("rng", start, n)
    tile_region: Optional[List[Tuple[object, object]]]   # shared: (lo, hi) per base dim, or None
    swz: object = None           # shared: the tile's XOR swizzle (None: row-major)
    flat_of: object = None       # shared, through flat(t): t's TileVar (its region is flat_run's)
    bounds: Optional[List[Optional[Tuple[object, object]]]] = None   # see ViewInfo.bounds

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(e[2] for e in self.entries if e[0] == "rng")

    @property
    def key(self):
        return (id(self.sym), tuple((e[0], str(e[1])) + tuple(e[2:]) for e in self.entries))

    def index(self, i, j) -> str:
        rngs = [k for k, e in enumerate(self.entries) if e[0] == "rng"]
        coords = []
        for k, e in enumerate(self.entries):
            if e[0] == "fix":
                coords.append(e[1])
            else:
                sub = j if (k == rngs[-1]) else i
                coords.append(c_add(e[1], sub))
        idx = None
        for k, x in enumerate(coords):
            if idx is None:
                idx = x
            else:
                ext = self.extents[k]
                if self.kind == "global":
                    idx = f"({idx}) * {ext} + ({x})"
                else:
                    idx = f"({idx}) * {ext} + ({x})" if not (is_int(idx) and is_int(x)) else idx * ext + x
        if self.kind == "shared":
            idx = swz_c(self.swz, idx)
        return str(idx)


@dataclass
class ViewInfo:
    """A `let` view resolved to its base: per base dimension an entry ("fix", x) or
    ("rng", start, n), and `bounds`: per base dimension None or (lo, hi), the part [lo, hi) of
    the base (base coordinates) that windows of the view may touch, the view's own window
    narrowed by every enclosing view's (spec 8 rule 7; `cpu_memory.Window.lo/hi`). None
    throughout when nothing narrows the base's extents; an entry is set only where a window
    at a start not proved inside its view (a runtime start) can reach past the view."""
    base: ir.Sym
    flat: bool
    entries: List[tuple]
    bounds: Optional[List[Optional[Tuple[object, object]]]] = None


@dataclass
class KernelSource:
    """The generated CUDA of one kernel variant, and what the launcher needs to know."""
    source: str
    symbol: str
    threads: int
    smem_bytes: int
    dynamic_smem: bool
    params: List[Tuple[str, str, str]]   # (kind, name, dtype): kind tensor / scalar / dim
    arch: Optional[str] = None           # "sm_90a" when it needs Hopper's arch-specific features, else None
    tmaps: tuple = ()                    # sm90.gemm.TmaSpec: tensor maps passed after the dims, then int tnb_tma
    smem: object = None                  # the analysis' shared-memory map this code follows (`analysis.smem.SmemMap`)

    @property
    def smem_footprint(self) -> int:
        """Every shared byte the kernel declares: `smem_bytes` (its `tnb_smem` array, static or the
        launch's dynamic size) plus its own static `__shared__` arrays (`Analysis.footprint`)."""
        return self.smem.footprint if self.smem is not None else self.smem_bytes


def kernel_symbol(kir: ir.KernelIR) -> str:
    """The C symbol of a kernel variant, the one place that decides it (the generated
    `extern "C" __global__` function, the launch, the profile's job and ncu's kernel filter all
    read it, through `KernelSource.symbol` or this function): the kernel's name, or
    `tnb_kernel_<name>` where the name clashes with C++ or CUDA (`cnames.kernel_base`), then
    for an @autotune variant `__` and its values (`T8_NW4`; a minus sign as `m`)."""
    base = kernel_base(kir.name)
    if not kir.tune:
        return base
    parts = "_".join(f"{k}{v}" for k, v in kir.tune.items())
    return f"{base}__{parts}".replace("-", "m")


@dataclass(frozen=True)
class Shaped:
    """Stands for an expression of a given type (the iteration space a value broadcasts to)."""
    type: object
