"""The complete shared-memory map of a kernel variant for a target: every byte the generated
kernel declares, what holds it, when, and for which source lines.

    m = kernel.analysis(arch="sm_90").smem     # or analyze(kir, arch=...).smem
    m.regions      Region: name, kind, offset, bytes, lines, live statement positions, space
    m.array_bytes  bytes of the kernel's `tnb_smem` array (static, or the launch's dynamic size)
    m.dynamic      whether `tnb_smem` is dynamic (`extern __shared__`, sized at launch)
    m.footprint    every shared byte the kernel declares: `tnb_smem` plus its own arrays

Regions (`Region.kind`), all in `tnb_smem` unless said:
    "tile"                a shared tile of the lifetime analysis (`lifetimes.tile_lifetimes`)
    "tile (unused)"       a tile's bytes that this lowering never touches (a GEMM loop's copies,
                          which its TMA pipeline reads from the tensors)
    "mma scratch"         the f32 scratch tile of a tensor-core dot computed away from the
                          statement's own coordinates (`lowering.Route.scratch`)
    "staging"             a tensor slice a dot reads, copied into a padded tile where the dot is
    "double buffer"       the same, double-buffered by cp.async across the turns of its loop
    "ring stages"         a TMA ring of a loop on wgmma (a GEMM pipeline, or a streamed loop): its
                          stages start at the first 1024-byte boundary at or after the offset
    "mbarriers"           that ring's mbarrier words (full and empty barriers), after its stages
    "cluster slot"        the copy a cluster reduction publishes to the other CTAs of the cluster
    "reduction partials"  one partial per (row, warp) of a CTA-wide row reduction: an array of its
                          own (`space` "array", a `__shared__` declaration the compiler places);
                          its offset here is after `tnb_smem`, in declaration order

Guarantees (for every checked kernel; `tests/analysis/test_smem_map.py` checks them against the generated
CUDA for the suite's and the tests' kernels):
- `footprint` equals the shared memory the generated kernel declares: the size of its static
  `tnb_smem` array, or the dynamic size its launch passes (`KernelSource.smem_bytes`), plus its
  static `__shared__` arrays. The CUDA generator takes every offset it writes from this map.
- Regions alive at one statement position (`Region.alive_at`) never share a byte.
- Placement follows the generator's rules: tiles at the lifetime analysis' offsets; the mma scratch
  128-byte aligned after the tiles, double buffers first, then the largest statement's local
  scratch; the streamed rings after that; a GEMM ring after every tile but its loop's own copies;
  cluster slots 16-byte aligned after everything; `tnb_smem` is dynamic with @dynshared, beyond
  48 KB, or with a loop on wgmma.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .. import ir
from ..target import STATIC_SMEM
from .lifetimes import Lifetimes, cluster_slots
from .lowering import KernelLowering, tile_statement, compound_value, early_rings
from .mma_tiles import shape2
from .ownership import own_reductions

STATIC_LIMIT = STATIC_SMEM   # bytes of static shared memory a CTA may declare (tilenb.target)
# bytes of the register type a reduction partial is held in (the generator's ctypes_.VALUE_C)
VALUE_BYTES = {"f16": 4, "bf16": 4, "f32": 4, "f64": 8, "i8": 4, "i32": 4, "i64": 8, "index": 8, "u8": 4,
               "u16": 4, "u32": 4, "bool": 1}


@dataclass(frozen=True)
class Region:
    """Bytes [offset, offset + bytes) of shared memory, held by one thing (`kind`, `name`) during
    the statement positions of `spans` ((first, last) pairs; none: never touched) for the source
    `lines` it serves. `space`: "tnb_smem" (the kernel's byte array) or "array" (a `__shared__`
    array of its own). `what`: a sentence for the views."""
    name: str
    kind: str
    offset: int
    bytes: int
    lines: Tuple[int, ...]
    spans: Tuple[Tuple[int, int], ...]
    space: str = "tnb_smem"
    what: str = ""
    key: int = 0            # id() of the IR object it stands for (a Sym, Dot, operand, For or Stmt)

    @property
    def end(self) -> int:
        return self.offset + self.bytes

    def alive_at(self, position: int) -> bool:
        return any(a <= position <= b for a, b in self.spans)

    def meets(self, other: "Region") -> bool:
        """Whether the two share a byte while both are alive."""
        if self.space != other.space or self.offset >= other.end or other.offset >= self.end:
            return False
        return any(a <= d and c <= b for a, b in self.spans for c, d in other.spans)

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "offset": self.offset, "bytes": self.bytes,
                "lines": list(self.lines), "spans": [list(s) for s in self.spans], "space": self.space,
                "what": self.what}


@dataclass(frozen=True)
class SmemMap:
    """The shared-memory map of one kernel variant for one target (see the module doc)."""
    target: object            # the tilenb.target.Target it is for
    regions: Tuple[Region, ...]
    array_bytes: int
    dynamic: bool
    # id(Stmt) -> per copy of the statement the generator writes, its partials' arrays (or none)
    partials: Dict[int, Tuple[Tuple[Region, ...], ...]] = field(default_factory=dict, compare=False, repr=False)

    @property
    def own_array_bytes(self) -> int:
        """Bytes of the kernel's `__shared__` arrays besides `tnb_smem` (the reduction partials)."""
        return sum(r.bytes for r in self.regions if r.space == "array")

    @property
    def footprint(self) -> int:
        return self.array_bytes + self.own_array_bytes

    def region(self, kind: str, key: int) -> Region:
        """The region of that kind standing for the IR object of id `key`; KeyError otherwise."""
        for r in self.regions:
            if r.kind == kind and r.key == key:
                return r
        raise KeyError(f"no {kind} region for that object")

    def alive_at(self, position: int) -> Tuple[Region, ...]:
        return tuple(r for r in self.regions if r.alive_at(position))

    def collisions(self) -> List[Tuple[Region, Region]]:
        """Pairs of regions sharing a byte while both alive (none, by the module's guarantee)."""
        out = []
        rs = list(self.regions)
        for i, a in enumerate(rs):
            for b in rs[i + 1:]:
                if a.meets(b):
                    out.append((a, b))
        return out

    def to_json(self) -> dict:
        return {"target": None if self.target is None or self.target.cc is None else str(self.target), "array_bytes": self.array_bytes, "dynamic": self.dynamic,
                "footprint": self.footprint, "regions": [r.to_json() for r in self.regions]}


# ---- building the map ---------------------------------------------------------------------------
def build(kir: ir.KernelIR, lt: Lifetimes, low: KernelLowering, facts) -> SmemMap:
    """The map of `kir` with tile lifetimes `lt`, lowering `low` (for its target) and the facts it
    was decided from (`lowering.Facts`)."""
    loop_end = {first: last for first, last in lt.loops}
    pos = facts.positions

    def loop_span(loop) -> Tuple[int, int]:
        p = pos[id(loop)]
        return (p, loop_end.get(p, p))

    regions: List[Region] = []
    # tiles
    unused: Dict[int, str] = {}
    for ch in low.gemm.values():
        for v in ch.loop.views:
            unused[id(v)] = (f"the GEMM loop at line {ch.loop.loop.span.line} runs as a TMA + wgmma pipeline, which "
                             f"reads {ch.loop.a.tensor.name} and {ch.loop.b.tensor.name} straight into its ring")
    for t in lt.tiles:
        if t.space != "shared":
            continue
        lines = tuple(sorted({t.first_line, t.last_line}))
        shape = "x".join(map(str, t.shape)) or "1"
        if id(t.sym) in unused:
            regions.append(Region(t.name, "tile (unused)", t.offset, t.bytes, lines, (), what=unused[id(t.sym)],
                                  key=id(t.sym)))
        else:
            regions.append(Region(t.name, "tile", t.offset, t.bytes, lines, ((t.start, t.end),),
                                  what=f"tile {t.name}: {t.dtype} [{shape}]", key=id(t.sym)))
    # mma scratch and staging
    for s in ir.walk_stmts(kir.body):
        r = low.routes.get(id(s))
        if r is None:
            continue
        p = pos[id(s)]
        for d in r.scratch + r.frag:
            if id(d) in low.scratch_local and any(d is x for x in r.scratch):
                M, N = shape2(d.type.shape)
                regions.append(Region(f"dot scratch (line {d.span.line})", "mma scratch", low.scratch_off(d),
                                      _align(M * N * 4, 128), (d.span.line,), ((p, p),),
                                      what=f"the f32 [{M}, {N}] result of the dot at line {d.span.line} (mma.sync), "
                                           "read by its statement", key=id(d)))
            for op in (d.a, d.b):
                st = low.stages.get(id(op))
                if st is None or st.ring or low.stage_dots.get(id(op), (None,))[0] is not d:
                    continue
                name = (st.src or op).base.name if isinstance(st.src or op, ir.Slice) else "operand"
                moves = f"; {st.move.describe()}" if st.move is not None else ""   # analysis/tc_moves
                if st.loop is None:
                    regions.append(Region(f"{name} staging (line {d.span.line})", "staging", low.stage_off(st), st.bytes,
                                          (d.span.line,), ((p, p),),
                                          what=f"{name}[...] [{st.rows}, {st.cols}] copied by cp.async for the dot at "
                                               f"line {d.span.line} (rows padded to {st.pitch} elements){moves}", key=id(op)))
                else:
                    regions.append(Region(f"{name} double buffer (line {d.span.line})", "double buffer",
                                          low.stage_off(st), 2 * st.bytes, tuple(sorted({d.span.line, st.loop.span.line})),
                                          (loop_span(st.loop),),
                                          what=f"{name}[...] [{st.rows}, {st.cols}] for the dot at line {d.span.line}, two "
                                               f"buffers of {st.bytes} bytes: the next turn's copy (cp.async) lands in "
                                               f"one while this turn reads the other (loop at line {st.loop.span.line}){moves}",
                                          key=id(op)))
    # streamed rings (set up early, maybe, before the statements ahead of their loop)
    early_at: Dict[int, int] = {}

    def scan(body):
        for i, loops in early_rings(body, low.rings).items():
            for L in loops:
                early_at[id(L)] = pos[id(body[i])]
        for s in body:
            for b in ir.child_blocks(s):
                scan(b)
    if low.rings:
        scan(kir.body)
    for ring in low.rings.values():
        a, b = loop_span(ring.loop)
        span = ((early_at.get(id(ring.loop), a), b),)
        line = ring.loop.span.line
        names = ", ".join(f"{r.slice.base.name} [{r.rows}, {r.cols}]" for r in ring.ops)
        stages_bytes = 1024 + ring.stages * ring.stage_bytes
        regions.append(Region(f"ring (loop line {line})", "ring stages", ring.off, stages_bytes,
                              (line,) + tuple(sorted({r.dot.span.line for r in ring.ops if r.dot is not None})), span,
                              what=f"{ring.stages} stages of {ring.stage_bytes} bytes ({names}, streamed by TMA for "
                                   f"wgmma), from the first 1024-byte boundary in these bytes", key=id(ring.loop)))
        regions.append(Region(f"mbarriers (loop line {line})", "mbarriers", ring.off + stages_bytes,
                              ring.barrier_bytes, (line,), span,
                              what=f"{ring.barrier_bytes // 8} mbarrier words of the ring (a full barrier per slice "
                                   f"and stage, an empty one per stage), right after its stages", key=id(ring.loop)))
    # GEMM rings
    for ch in low.gemm.values():
        shp, line = ch.shape, ch.loop.loop.span.line
        span = (loop_span(ch.loop.loop),)
        stages_bytes = 1024 + shp.stages * shp.stage_bytes
        regions.append(Region(f"GEMM ring (loop line {line})", "ring stages", ch.ring_off, stages_bytes, (line,), span,
                              what=f"{shp.stages} stages of {shp.stage_bytes} bytes ({ch.loop.a.tensor.name} and "
                                   f"{ch.loop.b.tensor.name} tiles by TMA, swizzled for wgmma), from the first 1024-byte "
                                   "boundary in these bytes; after the loop a store of the accumulator may stage its "
                                   "rows here", key=id(ch.loop.loop)))
        regions.append(Region(f"GEMM mbarriers (loop line {line})", "mbarriers", ch.ring_off + stages_bytes,
                              16 * shp.stages, (line,), span,
                              what=f"{2 * shp.stages} mbarrier words (full and empty per stage), right after the stages",
                              key=id(ch.loop.loop)))
    end = low.smem_end
    # cluster slots, after everything
    slots = cluster_slots(kir)
    if slots:
        base = (end + 15) // 16 * 16
        last = max(p for p, _ in lt.positions) if lt.positions else 0
        for st, off, n in slots:
            p = pos[id(st)]
            regions.append(Region(f"cluster slot (line {st.span.line})", "cluster slot", base + off, n, (st.span.line,),
                                  ((p, last),),
                                  what=f"the copy of {st.target.sym.name} that cluster_{st.op} at line {st.span.line} "
                                       f"publishes to the {kir.cluster} CTAs of the cluster", key=id(st)))
        end = base + sum(n for _, _, n in slots)
    dynamic = bool(kir.dynshared) or end > STATIC_LIMIT or bool(low.gemm) or bool(low.rings)
    partials, arrays = _reduction_partials(kir, low, facts, end, dynamic)
    regions.extend(arrays)
    return SmemMap(low.target, tuple(regions), end, dynamic, partials)


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


# ---- CTA-wide row reductions: their partials ------------------------------------------------------
def _reduction_partials(kir, low: KernelLowering, facts, array_bytes: int, dynamic: bool):
    """(id(Stmt) -> per emitted copy of it, the arrays of its CTA-wide row reductions or none;
    those arrays as regions). A statement writing an [R, 1] shared tile or window whose value
    reduces rows of [R, C] operands at its own coordinates (C a multiple of the CTA's threads,
    the CTA a multiple of 32 threads, no register tile, no fragments, no "within" barrier) keeps
    one partial per (row, warp) in a `__shared__` array of its own per reduction, as long as the
    kernel's shared memory stays within its limit (48 KB static, the target's opt-in limit dynamic); else its
    reductions run warp by warp with no shared memory. Every copy of the statement the generator
    writes (an unrolled loop writes its body once per unrolled turn and once for the rest)
    declares its own arrays."""
    T = kir.threads
    NW = T // 32
    regs = {k for k, t in facts.tiles.items() if t.space == "registers"}
    limit = low.target.dynamic_smem if dynamic else STATIC_LIMIT
    out: Dict[int, list] = {}
    arrays: List[Region] = []
    used = [array_bytes]

    def reductions(s):
        if not tile_statement(s) or T % 32:
            return None
        if isinstance(s, (ir.Let, ir.VarDecl)):
            if s.value is None or id(s.sym) in regs:
                return None
            value, shape = s.value, s.sym.type.shape
        else:
            t = s.target
            base = ir.named_sym(t)
            if base is None or id(base) in regs:
                return None
            value, shape = compound_value(s.op, t, s.value), t.type.shape
        r = low.route(s)
        if r.lay is not None or r.error is not None or not isinstance(value.type, ir.TileT):
            return None
        if any(isinstance(x, ir.Ref) and id(x.sym) in regs for x in ir.walk_expr(value)):
            return None
        R, Cc = shape2(shape)
        if Cc != 1 or facts.within(s):
            return None
        reds = identity_reductions(value, (R, Cc))
        if not reds:
            return None
        for red in reds:
            xr, xc = shape2(red.x.type.shape)
            if red.axis != 1 or len(red.x.type.shape) != 2 or xr != R or xc % T:
                return None
        return R, reds

    def emit(body):
        for s in body:
            if isinstance(s, ir.For):
                if id(s) in low.gemm:
                    continue
                turns = 1
                if s.unroll > 1 and not _flag_loop(s, facts.uni):
                    turns = s.unroll + 1
                for _ in range(turns):
                    emit(s.body)
                continue
            if isinstance(s, ir.While):
                emit(s.body)
                continue
            if isinstance(s, ir.If):
                emit(s.then)
                emit(s.orelse)
                continue
            got = reductions(s)
            if got is None:
                continue
            R, reds = got
            sizes = [R * NW * VALUE_BYTES[red.type.dtype] for red in reds]
            copies = out.setdefault(id(s), [])
            if used[0] + sum(sizes) > limit:
                copies.append(())
                continue
            mine = []
            for red, n in zip(reds, sizes):
                off = used[0]
                used[0] += n
                mine.append(Region(f"row{red.op} partials (line {red.span.line})", "reduction partials", off, n,
                                   (s.span.line,), ((facts.positions[id(s)],) * 2,), space="array",
                                   what=f"one {red.type.dtype} partial per (row, warp) of row{red.op} at line "
                                        f"{red.span.line}: [{R} rows x {NW} warps], a __shared__ array of its own",
                                   key=id(s)))
            copies.append(tuple(mine))
            arrays.extend(mine)
    emit(kir.body)
    return {k: tuple(v) for k, v in out.items()}, arrays


def identity_reductions(value, domain) -> List[ir.Reduce]:
    """Reductions of `value` evaluated at the statement's own coordinates (through elementwise
    nodes of the same shape) whose axis runs along the statement's extent of 1."""
    R, Cc = domain
    return [e for e in own_reductions(value) if (e.axis == 1 and Cc == 1) or (e.axis == 0 and R == 1)]


def _flag_loop(s: ir.For, uni) -> bool:
    """A loop some threads may leave alone (a break or continue under varying control): the
    generator runs its turns as no-ops for them and writes its body once, unrolled or not."""
    def jumps(body):
        for t in body:
            if isinstance(t, (ir.Break, ir.Continue)):
                yield t
            elif isinstance(t, ir.If):
                yield from jumps(t.then)
                yield from jumps(t.orelse)
    return any(id(t) in uni.varying_control for t in jumps(s.body))


def lowering_bound(kir: ir.KernelIR) -> int:
    """An upper bound, from the IR alone, of the bytes the lowering for any GPU adds to the tiles
    and cluster slots in `tnb_smem`: every tensor-core dot's f32 scratch tile and a double buffer
    for each of its operands that is a tensor slice or a let view (alignment included). The
    budget check computes the whole map only when this could take a kernel past its limit."""
    from .mma_tiles import mma_dot  # noqa: PLC0415
    total = 0
    for s in ir.walk_stmts(kir.body):
        for e in ir.stmt_exprs(s):
            for d in ir.walk_expr(e):
                if not mma_dot(d):
                    continue
                M, N = shape2(d.type.shape)
                total += _align(M * N * 4, 128)
                for op in (d.a, d.b):
                    if isinstance(op, ir.Slice) or (isinstance(op, ir.Ref) and op.sym.kind == "view"):
                        R, Cc = shape2(op.type.shape)
                        pitch = Cc + (8 if (Cc // 8) % 2 == 0 else 0)
                        total += 2 * _align(R * pitch * 2, 128)
    return total + (128 if total else 0)
