"""Typed tile IR -> readable CUDA C++ (one `extern "C" __global__` kernel per variant).

Guarantees, for every KernelIR the checker accepts (or an `UnsupportedError` naming the line):

- Every statement is preceded by `// line N: <source text>`; tensors are passed as pointers,
  scalar parameters by value, then each runtime dimension once as `long long` (see
  `KernelSource.params`). Shared memory is one 16-byte aligned byte array (static when it fits
  48 KB, the kernel has no @dynshared and no loop on wgmma, else `extern __shared__`) and the
  arrays of CTA-wide reductions' partials, all as the analysis' shared-memory map says
  (`tilenb.analysis.smem`: tiles at their planned offsets, then what the lowering adds); which
  path each loop and each tensor-core statement takes is the analysis' too
  (`tilenb.analysis.lowering`; `lowering()` reads both).
- Every tile value carries its valid region (rows [r0, r1), columns [c0, c1), uniform ints).
  Elementwise results take the intersection of their operands' regions after broadcasting,
  reductions skip invalid elements, dot reads invalid elements as 0; elements outside a tensor
  are never read (they load as 0) and never written; a store writes only the elements valid in
  the value (and inside the tensor or tile).
- Tile statements follow the canonical partition (`tilenb.analysis.partition`): chunk k of
  `vec` row elements of the statement's iteration space goes to thread k % threads, which
  evaluates the whole expression for those elements. Tiles in registers follow their own layout
  (the chunk partition, or the mma.sync fragment layout for tensor-core accumulators).
- Barriers are exactly the plan's (`tilenb.codegen.plan`), each with its reason in a comment;
  the generator adds one only for a statement whose target is also read by other threads in the
  same statement (it computes into registers, then `__syncthreads()`, then writes), and says so.
- A `for` whose body has tile statements and a break/continue taken by some threads only keeps
  running no-op turns (per-thread effects are skipped) so every thread reaches the same
  barriers; a `while` stops at its next test.
- Memory-bound paths (none changes which thread touches which element, so the barriers hold):
  a shared tile the analysis swizzles (`tilenb.analysis.copies.tile_swizzles`: read or written
  along a column) is addressed through its swizzle everywhere; a vector sweep loads a batch of
  a thread's chunks before computing any, and a copy into a whole shared tile with more chunks a
  thread than one batch starts them all as `cp.async`, waited for before the next statement
  (`async_copy`); a row reduction reads a tensor window as vectors where its alignment is proven
  (the analysis' `row_reductions`), equal windows of a statement are loaded once (`leaf_key`), and a [1, 1]
  tile broadcast to a vector statement is read once (`hoist_scalar_tiles`); a plain loop that
  writes no tensor loads its top-level tensor copy a turn ahead into registers
  (`prefetch_candidate`); f32 `exp` is `tnb_exp` and a
  division by a value shared by a chunk is a multiplication by its reciprocal where that is a
  normal number, 0 or inf, both within spec 17's f32 bound (relative error <= 6.7e-6 and
  <= 1.5 ulp), special values exact; the last reads of a tensor the kernel reads again after an
  earlier pass, and the stores such a kernel never reads back, carry an L2 evict_first policy
  (`tilenb.codegen.cache_hints`: the rule, decided from the program; results unchanged).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from .. import ir
from ..lang.diagnostics import UnsupportedError
from ..types import operand_dtype
from . import ctypes_ as C
from . import cache_hints, gemm_sm90, streamed_sm90
from .mma import MmaGen, MmaLayout, RowLayout
from .plan import Plan, contains_cta, is_tile_stmt, plan as make_plan
from .prelude import ASYNC_COPY_HELPERS, CLUSTER_HELPERS, PANEL_HELPERS, PRELUDE, VECTOR_HELPERS
from ..switches import SWITCHES
from ..target import STATIC_SMEM, Target, target as as_target
from ..analysis.layout import wgmma_panel_bytes
from ..analysis.lowering import CHUNKS, compound_value
from ..analysis.smem import identity_reductions
from ..analysis import analyze
from ..analysis.copies import tile_swizzles

STATIC_SMEM_LIMIT = STATIC_SMEM   # tilenb.target: the 48 KB of static shared memory a CTA may have
MAX_STAGED_SLOTS = 256        # registers per thread a two-phase statement may hold


# ---- small symbolic helpers: ints stay ints, anything else is C text ------------------------
def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def c_add(a, b):
    if _is_int(a) and _is_int(b):
        return a + b
    if a == 0:
        return b
    if b == 0:
        return a
    return f"({a} + {b})"


def c_sub(a, b):
    if _is_int(a) and _is_int(b):
        return a - b
    if b == 0:
        return a
    return f"({a} - {b})"


def c_max(a, b):
    if _is_int(a) and _is_int(b):
        return max(a, b)
    return f"max({a}, {b})"


def c_min(a, b):
    if _is_int(a) and _is_int(b):
        return min(a, b)
    return f"min({a}, {b})"


def c_max_ll(a, b):
    """max of two index values of any integer C type (as long long)."""
    if _is_int(a) and _is_int(b):
        return max(a, b)
    return f"tnb_max((long long)({a}), (long long)({b}))"


def c_min_ll(a, b):
    if _is_int(a) and _is_int(b):
        return min(a, b)
    return f"tnb_min((long long)({a}), (long long)({b}))"


def c_clamp(v, lo, hi):
    if _is_int(v) and _is_int(lo) and _is_int(hi):
        return max(lo, min(hi, v))
    return f"(int)tnb_clamp({v}, {lo}, {hi})"


def shape2(shape) -> Tuple[int, int]:
    if len(shape) == 0:
        return (1, 1)
    if len(shape) == 1:
        return (1, int(shape[0]))
    return (int(shape[0]), int(shape[1]))


Region = Tuple[object, object, object, object]   # r0, r1, c0, c1 (ints or C text)


def swz_c(sw, idx):
    """The element offset `idx` of a shared tile (int or C text) relabelled by the tile's XOR
    swizzle `sw` (`tilenb.analysis.layout.Swizzle`; None: row-major, unchanged)."""
    if sw is None:
        return idx
    if _is_int(idx):
        return int(sw(idx))
    return sw.c_expr(idx)


def c_cond(x) -> str:
    """A condition as C text: in_region / chunk_inside give True or False where the answer is
    known while generating, else a C expression."""
    return "true" if x is True else "false" if x is False else x




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
                    idx = f"({idx}) * {ext} + ({x})" if not (_is_int(idx) and _is_int(x)) else idx * ext + x
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
    tmaps: tuple = ()                    # gemm_sm90.TmaSpec: tensor maps passed after the dims, then int tnb_tma
    smem: object = None                  # the analysis' shared-memory map this code follows (`analysis.smem.SmemMap`)

    @property
    def smem_footprint(self) -> int:
        """Every shared byte the kernel declares: `smem_bytes` (its `tnb_smem` array, static or the
        launch's dynamic size) plus its own static `__shared__` arrays (`Analysis.footprint`)."""
        return self.smem.footprint if self.smem is not None else self.smem_bytes


def kernel_symbol(kir: ir.KernelIR) -> str:
    if not kir.tune:
        return kir.name
    parts = "_".join(f"{k}{v}" for k, v in kir.tune.items())
    return f"{kir.name}__{parts}".replace("-", "m")


def generate(kir: ir.KernelIR, source_text: Optional[str] = None, line_offset: int = 0,
             arch=None) -> KernelSource:
    """The CUDA of one kernel variant. arch: the target, in any spelling `tilenb.target.target`
    accepts ("sm_80", "sm_90", "sm_90a", 90, (9, 0), a Target, ...), or None for the code for
    any GPU. On an sm_90 target GEMM and attention loops are lowered to TMA + wgmma (gemm_sm90,
    streamed_sm90) and the source needs sm_90a (`KernelSource.arch` says so; `nvrtc_compile`
    compiles every sm_90 target that way). Raises UnsupportedError naming arch when it names
    no GPU target."""
    g = _Gen(kir, source_text, line_offset, as_target(arch))
    return g.run()


@dataclass(frozen=True)
class _Shaped:
    """Stands for an expression of a given type (the iteration space a value broadcasts to)."""
    type: object


# ---- the generator -----------------------------------------------------------------------------
class _Gen(MmaGen):
    def __init__(self, kir: ir.KernelIR, source_text, line_offset, target: Target):
        self.kir = kir
        self.target = target                    # tilenb.target: the machine, its features and limits
        self.gemm = None                        # gemm_sm90.Lowering of this kernel, if any
        self.lines_src = source_text.splitlines() if source_text else None
        self.line_offset = line_offset
        self.plan: Plan = make_plan(kir)
        self.T = kir.threads
        self.out: List[str] = []
        self.ind = 1
        self.tmp = 0
        self.names: Dict[int, str] = {}
        self.tiles: Dict[int, TileVar] = {}
        self.views: Dict[int, ViewInfo] = {}
        self.pre: Dict[int, str] = {}          # id(expr) -> C variable holding its value (coop reduce)
        self.pre_bcast: set = set()            # ids in pre valid at a broadcast's coordinates too
        # id(Binary '/') -> the reciprocal of its divisor: a variable of this chunk, or, on fragments,
        # a function of the element's At (mma.py: one reciprocal a row)
        self.fast_div: Dict[int, object] = {}
        self.memo: Dict[tuple, tuple] = {}     # (structure, coordinates) -> (C variable, block depth)
        self.skeys: Dict[int, tuple] = {}
        self.regions: Dict[int, Region] = {}   # id(expr) -> its region within one statement
        self.guards: List[str] = []            # flags that turn per-thread statements into no-ops
        self.loop_ctx: List[dict] = []
        self.ret_flag = False
        self.layouts: Dict[int, object] = {}
        self.dims: Dict[str, str] = {}
        self.cur_stmt = None
        self.wgmma_ok: Dict[int, bool] = {}    # id(tile Sym) -> wgmma_readable

    # ---- output
    def emit(self, line: str):
        if line.lstrip().startswith("}") and self.memo:
            # a block closed: values computed inside it are out of scope
            self.memo = {k: v for k, v in self.memo.items() if v[1] <= self.ind}
        self.out.append("  " * self.ind + line)

    def new(self, prefix="t") -> str:
        self.tmp += 1
        return f"{prefix}{self.tmp}"

    def fail(self, msg, node=None):
        span = getattr(node, "span", None) or getattr(self.cur_stmt, "span", None)
        line = span.line + self.line_offset if span is not None else None
        raise UnsupportedError(f"the CUDA backend cannot compile this yet: {msg}", line, span.column if span else None)

    def cname(self, sym: ir.Sym) -> str:
        n = self.names.get(id(sym))
        if n is None:
            n = f"{sym.name}_{sym.uid}"
            self.names[id(sym)] = n
        return n

    def src_comment(self, s):
        ln = s.span.line
        text = ""
        if self.lines_src and 1 <= ln <= len(self.lines_src):
            text = self.lines_src[ln - 1].strip()
        text = text.replace("*/", "* /").replace("\\", "\\\\")
        self.emit(f"// line {ln + self.line_offset}: {text}".rstrip())

    # ---- driver
    def run(self) -> KernelSource:
        kir = self.kir
        sym = kernel_symbol(kir)
        if kir.cluster > 1 and not self.target.clusters:
            raise UnsupportedError(f"kernel '{kir.name}' has @cluster({kir.cluster}): thread block clusters need "
                                   f"sm_90 or newer, and the target is {self.target}", kir.span.line + self.line_offset,
                                   kir.span.column)
        self.low, self.smem = self.lowering()   # the analysis' lowering and shared-memory map for this target
        self.gemm = gemm_sm90.prepare(self)
        self.hints = cache_hints.plan(kir)      # L2 evict_first for the last touch of re-read data
        self.swz = self.tile_swizzles()
        self.choose_layouts()
        self.mma_prepare()                      # tensor-core routes and their shared scratch (mma.py)
        params_c, params_meta = [], []
        prologue = []
        for p in kir.params:
            s = p.sym
            n = self.cname(s)
            if isinstance(s.type, ir.TensorT):
                params_c.append(f"{C.STORE_C[s.type.dtype]}* {n}")
                params_meta.append(("tensor", s.name, s.type.dtype))
            else:
                dt = s.type.dtype
                if C.STORE_C[dt] == C.VALUE_C[dt]:
                    params_c.append(f"{C.STORE_C[dt]} {n}")
                else:
                    params_c.append(f"{C.STORE_C[dt]} {n}_in")
                    prologue.append(f"const {C.VALUE_C[dt]} {n} = {C.load_value(n + '_in', dt)};")
                params_meta.append(("scalar", s.name, dt))
        for dname, dsym in kir.dims.items():
            n = self.cname(dsym)
            self.dims[dname] = n
            params_c.append(f"long long {n}")
            params_meta.append(("dim", dname, "index"))
        fp = self.smem.array_bytes              # tnb_smem: tiles, mma scratch, rings, cluster slots (analysis.smem)
        # loops on Hopper's wgmma (gemm_sm90, streamed_sm90): their functions and tensor maps
        tmaps, sm90_text = [], None
        if self.gemm is not None or self.stream is not None:
            fns = ""
            if self.gemm is not None:
                fns += "".join(self.gemm.functions.values())
                tmaps += self.gemm.tmaps
            if self.stream is not None:
                text, _ = streamed_sm90.source_parts(self.stream)
                fns += text
                tmaps += self.stream.tmaps
            sm90_text, sm90_params = gemm_sm90.source_parts(fns, tmaps)
            params_c.extend(sm90_params)
        # the copies cluster reductions publish lie after everything else (the map's "cluster slot"s)
        self.cluster_slot_at = {r.key: r.offset for r in self.smem.regions if r.kind == "cluster slot"}
        dynamic = self.smem.dynamic
        self.partial_copies: Dict[int, int] = {}   # id(Stmt) -> copies written so far (reduction partials)
        self.smem_bytes = fp
        body_start = len(self.out)
        self.ind = 1
        # uses of flags for a varying return
        self.ret_flag = self.needs_ret_flag()
        if self.ret_flag:
            self.emit("bool tnb_ret = false;  // set by a 'return' some threads take: they skip their per-thread work")
        self.cluster_last = None                # the last cluster reduction (its arrive is waited on at exit)
        self.cluster_pending = None             # (stmt, tile, slot) of a cluster reduction not yet combined
        for st in kir.body:
            if isinstance(st, ir.ClusterReduce):
                self.cluster_last = st
        self.block(kir.body)
        self.cluster_exit()
        body = self.out[body_start:]
        head = []
        head.append(f"// tilenb kernel '{kir.name}'" + (f", variant {', '.join(f'{k}={v}' for k, v in kir.tune.items())}" if kir.tune else ""))
        head.append(f"// {self.T} threads per CTA; shared memory {fp} bytes ({'dynamic' if dynamic else 'static'}); "
                    "barriers from analysis")
        for t in self.plan.tiles.values():
            where = f"shared [{t.offset}, {t.offset + t.bytes})" if t.space == "shared" else "registers"
            lay = self.layouts.get(id(t.sym))
            extra = ""
            if isinstance(lay, MmaLayout):
                extra = " (mma.sync accumulator fragments)"
            elif isinstance(lay, RowLayout):
                extra = " (the rows of mma.sync fragments, per lane)"
            head.append(f"//   tile {t.sym.name} (line {t.sym.line + self.line_offset}): {where}{extra}")
        cluster = f"__cluster_dims__({kir.cluster}, 1, 1) " if kir.cluster > 1 else ""
        head.append(f'extern "C" __global__ void {cluster}__launch_bounds__({self.T}{self.mma_min_blocks()}) {sym}({", ".join(params_c)}) {{')
        pro = []
        if fp > 0:
            if dynamic:
                pro.append("extern __shared__ __align__(16) unsigned char tnb_smem[];")
            else:
                pro.append(f"__shared__ __align__(16) unsigned char tnb_smem[{fp}];")
        pro.append("const int tnb_tid = threadIdx.x;")
        pro.append("const int tnb_warp = tnb_tid >> 5, tnb_lane = tnb_tid & 31;")
        pro.extend(prologue)
        if self.hints.any:
            pro.append(f"const unsigned long long {cache_hints.POLICY} = tnb_l2_first();  // L2 evict_first: the last "
                       f"reads of {', '.join(self.hints.reread)} (read again after an earlier pass) and stores "
                       f"this kernel never reads back (cache_hints.py)")
        prelude = (PRELUDE.lstrip("\n") + (sm90_text or "") + (cache_hints.HELPERS if self.hints.any else "")
                   + (CLUSTER_HELPERS if kir.cluster > 1 else "")
                   + (PANEL_HELPERS if any("tnb_pswz(" in line for line in body) else "")
                   + (ASYNC_COPY_HELPERS if any("tnb_cpa<" in line for line in body) else "")
                   + (VECTOR_HELPERS if any("tnb_stg(" in line or "tnb_sts(" in line for line in body) else ""))
        text = prelude + "\n" + "\n".join(head) + "\n" + "\n".join("  " + l for l in pro) + "\n" + "\n".join(body) + "\n}\n"
        if sm90_text is None:
            return KernelSource(text, sym, self.T, fp, dynamic, params_meta, smem=self.smem)
        return KernelSource(text, sym, self.T, fp, dynamic, params_meta, self.target.nvrtc_arch(), tuple(tmaps),
                            smem=self.smem)

    def lowering(self):
        """(lowering, shared-memory map) of this variant for the generator's target: the
        analysis' (`Analysis.lowering`, `Analysis.smem`)."""
        a = analyze(self.kir, arch=self.target)
        return a.lowering, a.smem

    def tile_swizzles(self) -> Dict[int, object]:
        """id(tile Sym) -> the XOR swizzle of the shared tiles the analysis lays out swizzled
        (`tilenb.analysis.copies.tile_swizzles`: tiles read or written along a column)."""
        return dict(tile_swizzles(analyze(self.kir).statements, self.T))

    def needs_ret_flag(self) -> bool:
        if not contains_cta(self.kir.body):
            return False
        for s in ir.walk_stmts(self.kir.body):
            if isinstance(s, ir.Return) and id(s) in self.plan.uni.varying_control:
                return True
        return False

    # ---- register layouts
    def choose_layouts(self):
        """The register layout of every register tile: the analysis' for tensor-core tiles (the
        wgmma accumulator, the mma row layout, the 2-D warp grid: `lowering.register_layouts`);
        the others take the partition's chunks at their declaration's width."""
        regs = {k for k, t in self.plan.tiles.items() if t.space == "registers"}
        decl_vec = {}
        for s in ir.walk_stmts(self.kir.body):
            if isinstance(s, (ir.VarDecl, ir.Let)) and id(s.sym) in regs:
                decl_vec[id(s.sym)] = (s.sym, self.plan.vec.get(id(s), 1))
        # a register tile's chunk width is its declaration's: the analysis gives every statement
        # that touches it the same width (`ownership.statement_plans`), so all keep one partition
        for k, (sym, v) in decl_vec.items():
            R, Cc = shape2(sym.type.shape)
            lay = self.low.layouts.get(k, CHUNKS)
            if lay is not CHUNKS:
                self.layouts[k] = lay
            else:
                self.layouts[k] = ChunkLayout(R, Cc, v, self.T)

    # ---- statements
    def block(self, body):
        early = self.mma_early_rings(body) if getattr(self, "mma_on", False) else {}
        top = body is self.kir.body
        for k, s in enumerate(body):
            for loop in early.get(k, ()):
                self.mma_ring_early(loop)       # a streamed loop's first copies, ahead (mma.py)
            if top and self.cluster_pending is not None and self.cluster_needs_finish(s):
                self.cluster_finish()           # the second half of a cluster reduction
            self.stmt(s)

    def guard(self) -> Optional[str]:
        g = list(self.guards)
        if self.ret_flag:
            g = ["tnb_ret"] + g
        if not g:
            return None
        return " || ".join(g)

    def barriers(self, s, where):
        p = self.plan.positions.get(id(s))
        for b in self.plan.barriers.get(p, ()):
            if b.where == where:
                self.emit(f"__syncthreads();  // barrier ({b.where} line {s.span.line + self.line_offset}): {b.reason}")

    def stmt(self, s):
        self.cur_stmt = s
        self.src_comment(s)
        self.barriers(s, "before")
        self.regions = {}
        self.memo = {}
        if is_tile_stmt(s) or (isinstance(s, ir.Let) and s.sym.kind == "view"):
            self.cta_stmt(s)
            self.async_proxy_fence(s)
        elif isinstance(s, (ir.For, ir.While, ir.If)) and contains_cta((s,)):
            self.control(s)
        else:
            self.thread_stmt(s)
        self.cur_stmt = s
        self.barriers(s, "after")

    # per-thread statements run under the no-op guard
    def thread_stmt(self, s):
        g = self.guard()
        pure = isinstance(s, (ir.Let,)) or (isinstance(s, ir.VarDecl))
        if g and not pure:
            self.emit(f"if (!({g})) {{")
            self.ind += 1
            self.plain_stmt(s)
            self.ind -= 1
            self.emit("}")
        else:
            self.plain_stmt(s)

    def plain_stmt(self, s):
        if isinstance(s, ir.Let):
            dt = s.sym.type.dtype
            self.emit(f"const {C.VALUE_C[dt]} {self.cname(s.sym)} = {self.scalar_as(s.value, dt)};")
        elif isinstance(s, ir.VarDecl):
            dt = s.sym.type.dtype
            init = self.scalar_as(s.value, dt) if s.value is not None else C.zero(dt)
            self.emit(f"{C.VALUE_C[dt]} {self.cname(s.sym)} = {init};")
        elif isinstance(s, ir.Assign):
            self.scalar_assign(s)
        elif isinstance(s, ir.For):
            self.for_stmt(s, cta=False)
        elif isinstance(s, ir.While):
            self.while_stmt(s, cta=False)
        elif isinstance(s, ir.If):
            self.if_stmt(s)
        elif isinstance(s, ir.Break):
            self.jump(s, "break")
        elif isinstance(s, ir.Continue):
            self.jump(s, "continue")
        elif isinstance(s, ir.Return):
            if self.ret_flag:
                self.emit("tnb_ret = true;")
            else:
                self.emit("return;")
        elif isinstance(s, ir.Atomic):
            self.atomic(s)
        else:
            self.fail(f"statement {type(s).__name__}", s)

    def if_stmt(self, s):
        """An if whose condition every thread that reaches it evaluates (both kinds of body)."""
        self.emit(f"if ({self.scalar(s.cond)}) {{")
        self.ind += 1
        self.block(s.then)
        self.ind -= 1
        if s.orelse:
            self.emit("} else {")
            self.ind += 1
            self.block(s.orelse)
            self.ind -= 1
        self.emit("}")

    def flag_body(self, s, brk, cnt):
        """A loop turn where threads may break or continue alone: each keeps a break and a continue
        flag, and the body's statements run under both (the turn goes on as a no-op)."""
        self.emit(f"bool {cnt} = false;")
        self.loop_ctx.append({"mode": "flag", "brk": brk, "cnt": cnt, "wrapped": False})
        self.guards.extend([brk, cnt])
        self.block(s.body)
        self.guards.pop()
        self.guards.pop()

    def jump(self, s, word):
        if not self.loop_ctx:
            self.fail(f"'{word}' outside a loop", s)
        lc = self.loop_ctx[-1]
        if lc["mode"] == "flag" and id(s) in self.plan.uni.varying_control:
            flag = lc["brk"] if word == "break" else lc["cnt"]
            self.emit(f"{flag} = true;  // this thread's remaining turns are no-ops")
            return
        if lc["wrapped"]:
            if word == "break":
                self.emit(f"{{ {lc['brk']} = true; break; }}")
            else:
                self.emit("break;  // to the end of this turn")
            return
        self.emit(f"{word};")

    def loop_path(self, s) -> str:
        """How loop `s` is lowered, as the analysis decided (`Analysis.loops`, one of
        `lowering.LOWERINGS`): "wgmma TMA pipeline" (gemm_sm90 writes the whole loop),
        "streamed attention on wgmma" (a native loop whose ring streamed_sm90 sets up before it,
        its dots on wgmma: mma.py), "mma.sync" (a native loop, its tensor-core dots on mma.sync,
        their slices double-buffered where the analysis says) or "generic"."""
        return self.low.lowering_of(s)

    def control(self, s):
        """A loop or if whose body holds tile statements (its condition is uniform)."""
        if isinstance(s, ir.If):
            self.if_stmt(s)
        elif isinstance(s, ir.For):
            if self.loop_path(s) == "wgmma TMA pipeline":
                gemm_sm90.emit(self, self.gemm, s)   # a GEMM loop on Hopper: TMA + wgmma pipeline
            else:
                self.for_stmt(s, cta=True)
        else:
            self.while_stmt(s, cta=True)

    def loop_mode(self, s, cta: bool) -> str:
        """'flag' when some thread may break/continue alone in a loop with tile statements."""
        if not cta:
            return "native"
        for t in self.own_jumps(s.body):
            if id(t) in self.plan.uni.varying_control:
                return "flag"
        return "native"

    def own_jumps(self, body):
        out = []
        for t in body:
            if isinstance(t, (ir.Break, ir.Continue)):
                out.append(t)
            elif isinstance(t, ir.If):
                out.extend(self.own_jumps(t.then))
                out.extend(self.own_jumps(t.orelse))
        return out

    def for_stmt(self, s: ir.For, cta: bool):
        v = self.cname(s.var)
        lo = self.scalar_as(s.lo, "index")
        hi = self.scalar_as(s.hi, "index")
        mode = self.loop_mode(s, cta)
        jumps = self.own_jumps(s.body)
        step = s.step
        self.emit("{")
        self.ind += 1
        hv = self.new("hi")
        self.emit(f"const long long {hv} = {hi};")
        if mode == "flag":
            brk, cnt = self.new("brk"), self.new("cnt")
            self.emit(f"bool {brk} = false;  // some threads may break alone: they run no-op turns")
            self.emit(f"for (long long {v} = {lo}; {v} < {hv}; {v} += {step}) {{")
            self.ind += 1
            self.flag_body(s, brk, cnt)
            self.loop_ctx.pop()
            self.ind -= 1
            self.emit("}")
        elif s.unroll <= 1 and cta and (cand := self.prefetch_candidate(s)) is not None:
            self.prefetch_loop(s, v, lo, hv, step, cand)     # a chunked loop: its copy loaded a turn ahead
        elif s.unroll <= 1:
            wrapped = any(isinstance(j, ir.Continue) for j in jumps) and False
            self.mma_loop_begin(s, v, lo, hv)    # double-buffered tensor-core operands (mma.py)
            self.emit(f"for (long long {v} = {lo}; {v} < {hv}; {v} += {step}) {{")
            self.ind += 1
            self.loop_ctx.append({"mode": "native", "wrapped": wrapped, "brk": None})
            self.block(s.body)
            self.loop_ctx.pop()
            self.ind -= 1
            self.emit("}")
            self.mma_loop_end(s)                 # a streamed loop's last deferred product (mma.py)
        else:
            n = s.unroll
            lov, mid, base = self.new("lo"), self.new("mid"), self.new("ib")
            brk = self.new("brk")
            self.emit(f"const long long {lov} = {lo};")
            self.emit(f"// for<unroll {n}>: whole turns of {n} copies, then the rest one at a time")
            self.emit(f"const long long {mid} = {hv} > {lov} ? {lov} + (({hv} - {lov}) / {n * step}) * {n * step} : {lov};")
            self.emit(f"bool {brk} = false;")
            wrap = bool(jumps)
            self.emit(f"for (long long {base} = {lov}; {base} < {mid}; {base} += {n * step}) {{")
            self.ind += 1
            for k in range(n):
                self.emit("do {" if wrap else "{")
                self.ind += 1
                self.emit(f"const long long {v} = {base} + {k * step};")
                self.loop_ctx.append({"mode": "native", "wrapped": wrap, "brk": brk})
                self.block(s.body)
                self.loop_ctx.pop()
                self.ind -= 1
                self.emit("} while (0);" if wrap else "}")
                if wrap:
                    self.emit(f"if ({brk}) break;")
            self.ind -= 1
            self.emit("}")
            self.emit(f"if (!{brk}) for (long long {v} = {mid}; {v} < {hv}; {v} += {step}) {{")
            self.ind += 1
            if wrap:
                self.emit("do {")
                self.ind += 1
            self.loop_ctx.append({"mode": "native", "wrapped": wrap, "brk": brk})
            self.block(s.body)
            self.loop_ctx.pop()
            if wrap:
                self.ind -= 1
                self.emit("} while (0);")
                self.emit(f"if ({brk}) break;")
            self.ind -= 1
            self.emit("}")
        self.ind -= 1
        self.emit("}")

    def while_stmt(self, s: ir.While, cta: bool):
        mode = self.loop_mode(s, cta)
        brk = cnt = None
        if mode == "flag":
            brk, cnt = self.new("brk"), self.new("cnt")
            self.emit(f"bool {brk} = false;  // some threads may break alone: they run no-op turns")
        self.emit("while (true) {  // the test is re-evaluated every turn")
        self.ind += 1
        self.emit(f"if (!({self.scalar(s.cond)})) break;")
        if mode == "flag":
            self.flag_body(s, brk, cnt)
        else:
            self.loop_ctx.append({"mode": "native", "wrapped": False, "brk": None})
            self.block(s.body)
        self.loop_ctx.pop()
        self.ind -= 1
        self.emit("}")

    # ---- scalar assignments and atomics
    def scalar_assign(self, s: ir.Assign):
        t = s.target
        if isinstance(t, ir.Ref):
            dt = t.type.dtype
            val = self.compound(s.op, t, s.value)
            self.emit(f"{self.cname(t.sym)} = {self.value_as(val, dt)};")
            return
        if isinstance(t, ir.Element):
            ptr, idx, inb, dt = self.element_addr(t)
            val = self.compound(s.op, t, s.value)
            store = C.store_bits(self.scalar(val), val.type.dtype, dt)
            if inb == "true":
                self.emit(f"{ptr}[{idx}] = {store};")
            else:
                self.emit(f"if ({inb}) {ptr}[{idx}] = {store};")
            return
        self.fail("this assignment", s)

    def compound(self, op, target, value):
        return compound_value(op, target, value)   # (analysis.lowering: the routes read the same value)

    def value_as(self, e, dt):
        """The value of a scalar expression as stored into a var of type dt (rounded)."""
        return C.convert(self.scalar(e), e.type.dtype, dt)

    def scalar_as(self, e, dt):
        return C.convert(self.scalar(e), e.type.dtype, dt)

    def atomic(self, s: ir.Atomic):
        ptr, idx, inb, dt = self.element_addr(s.target)
        call = self.atomic_call(s, f"&{ptr}[{idx}]", self.scalar(s.value), s.value.type.dtype, dt)
        if inb == "true":
            self.emit(call + ";")
        else:
            self.emit(f"if ({inb}) {call};")

    def atomic_call(self, s: ir.Atomic, addr: str, v: str, vdt: str, dt: str) -> str:
        """The call that applies atomic `s.op` of value `v` (C text of IR type vdt) to the element of
        storage type `dt` at `addr` (C text `&p[i]`): the hardware atomic where CUDA has one, else the prelude's
        compare-and-swap loop (f32/f64 max; f16/bf16 add, on the 32-bit word holding the element).
        A type without either is an UnsupportedError naming the statement."""
        if dt in ("f16", "bf16"):
            if s.op != "add":
                self.fail(f"atomic_{s.op} on a {dt} tensor (only atomic_add has a {dt} form)", s)
            return (f"tnb_atomic_add16((unsigned short*){addr}, {C.convert(v, vdt, 'f32')}, "
                    f"{'true' if dt == 'bf16' else 'false'})")
        cty = {"f32": "float", "f64": "double", "i32": "int", "u32": "unsigned", "i64": "long long"}.get(dt)
        if cty is None:
            self.fail(f"atomic_{s.op} on a {dt} tensor", s)
        return f"tnb_atomic_{s.op}(({cty}*){addr}, ({cty})({C.convert(v, vdt, dt)}))"

    def tile_atomic(self, s: ir.Atomic):
        """atomic_add / atomic_max of a tile into a tensor slice: the partition sweep of a store into
        that window (`assign_window`), each element valid in the value and inside the tensor
        updated by one atomic of the thread that owns it; never vectorized, never staged."""
        loc = self.loc_of(s.target)
        if loc is None or loc.kind != "global":
            self.fail("a tile atomic into something other than a tensor slice", s)
        value = s.value
        domain = shape2(loc.shape)
        bounds = self.loc_bounds(loc, False)
        if isinstance(value.type, ir.TileT):
            vr = self.broadcast_region(self.region(value), value.type.shape, loc.shape or (1,))
            mask = self.name_region(self.intersect(vr, bounds))
        else:
            mask = bounds
        lay = self.sweep_layout(s, None, value, domain)
        V = self.stmt_vec(s, domain)
        self.emit(f"// atomic_{s.op}: each element valid in the value and inside {loc.sym.name}, by the thread that owns it")

        def write(at: At, val: str, vdt: str):
            self.emit(self.atomic_call(s, f"&{loc.ptr}[{loc.index(at.i, at.j)}]", val, vdt, loc.dtype) + ";")

        self.run_sweep(s, domain, lay, V, value, write, mask, False, None)

    # ---- element addresses (per-thread accesses)
    def element_addr(self, e: ir.Element):
        """(pointer, index, in-bounds condition, storage dtype) of one element."""
        idx = [self.scalar_as(x, "index") for x in e.indices]
        base, flat, entries = self.resolve(e.base, e.flat)
        bounds = None
        if entries is not None:      # through a view: only inside its window (and its enclosing views')
            bounds = self.sub_bounds(entries, self.view_bounds(e.base), [ir.SubIndex(x) for x in e.indices],
                                     [k for k, en in enumerate(entries) if en[0] == "rng"])
        if base.kind == "tensor":
            exts = [self.dim_c(d) for d in base.type.dims]
            ptr = self.cname(base)
            dt = base.type.dtype
        else:
            tv = self.tiles.get(id(base))
            if tv is None or tv.space != "shared":
                self.fail(f"element access to '{base.name}', which is not in shared memory", e)
            exts = [1, tv.shape[0] * tv.shape[1]] if flat else ([tv.shape[1]] if tv.rank == 1 else list(tv.shape))
            ptr = tv.cname
            dt = tv.dtype
        swz = None if base.kind == "tensor" else self.tiles[id(base)].swz
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
            xv = self.new("e")
            self.emit(f"const long long {xv} = {x};")
            conds.append(f"{xv} >= 0 && {xv} < {ext}")
            if bounds is not None and bounds[k] is not None:
                blo, bhi = bounds[k]
                if not (_is_int(blo) and blo <= 0):
                    conds.append(f"{xv} >= {blo}")
                if str(bhi) != str(ext):
                    conds.append(f"{xv} < {bhi}")
            lin = xv if lin is None else f"({lin}) * {ext} + {xv}"
        return ptr, swz_c(swz, lin), " && ".join(conds) or "true", dt

    def dim_c(self, d):
        if isinstance(d, int):
            return d
        return self.dims.get(d) or self.cname(self.kir.dims[d])

    def resolve(self, sym: ir.Sym, flat: bool):
        """A view's base and entries (None: the symbol itself, indexed directly)."""
        if sym.kind == "view" and id(sym) in self.views and id(sym) not in self.tiles:
            v = self.views[id(sym)]
            return v.base, v.flat, v.entries
        return sym, flat, None

    def view_bounds(self, sym: ir.Sym):
        """ViewInfo.bounds of `sym` when `resolve` maps it to a view's base (else None)."""
        if sym.kind == "view" and id(sym) in self.views and id(sym) not in self.tiles:
            return self.views[id(sym)].bounds
        return None

    def sub_bounds(self, entries, bounds, subs, rng_idx):
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
            if isinstance(x, ir.Const) and _is_int(n) and 0 <= int(x.value) and int(x.value) + ln <= n:
                continue
            lo, hi = st, c_add(st, n)
            if out[k] is not None:
                lo, hi = c_max_ll(out[k][0], lo), c_min_ll(out[k][1], hi)
            out[k] = (self.hoist(lo), self.hoist(hi))
        return out if any(b is not None for b in out) else None

    # ---- scalar expressions
    def scalar(self, e) -> str:
        return self.ev(e, None)

    def ev(self, e, at: Optional[At]) -> str:
        """C value expression of `e` (at element `at` for tiles). May emit statements."""
        if at is not None and id(e) in self.pre and (at.ident or id(e) in self.pre_bcast):
            return self.pre[id(e)]
        if at is not None and self.mma_on:
            v = self.mma_value(e, at)         # fragments, scratch dots, hoisted row reductions (mma.py)
            if v is not None:
                return v
        if isinstance(e, ir.Const):
            return C.literal(e.value, e.type.dtype)
        if isinstance(e, ir.Ctx):
            f = e.field
            m = {"block.x": "(long long)blockIdx.x", "block.y": "(long long)blockIdx.y", "block.z": "(long long)blockIdx.z",
                 "grid.x": "(long long)gridDim.x", "grid.y": "(long long)gridDim.y", "grid.z": "(long long)gridDim.z",
                 "thread": "(long long)tnb_tid", "threads": f"{self.T}LL", "warp": "(long long)tnb_warp",
                 "lane": "(long long)tnb_lane", "cluster.rank": f"(long long)(blockIdx.x % {self.kir.cluster}u)",
                 "cluster.x": f"(long long)(blockIdx.x / {self.kir.cluster}u)"}
            return m[f]
        if isinstance(e, ir.Ref):
            s = e.sym
            if isinstance(s.type, ir.ScalarT):
                if s.kind == "dim":
                    return self.dim_c(s.name)
                return self.cname(s)
            return self.tile_read(e, at)
        if isinstance(e, ir.Element):
            ptr, idx, inb, dt = self.element_addr(e)
            val = C.load_value(f"{ptr}[{idx}]", dt)
            if inb == "true":
                return val
            return f"(({inb}) ? {val} : {C.zero(C_val_dt(dt))})"
        if isinstance(e, ir.Slice):
            return self.tile_read(e, at)
        if isinstance(e, ir.Unary):
            x = self.ev(e.x, self.child_at(e, e.x, at))
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
            return self.binary(e, at)
        if isinstance(e, ir.Convert):
            x = self.ev(e.x, self.child_at(e, e.x, at))
            return C.convert(x, e.x.type.dtype, e.type.dtype)
        if isinstance(e, ir.Math):
            return self.math(e, at)
        if isinstance(e, (ir.Reduce, ir.Dot)):
            # the same reduction or dot at the same coordinates is computed once per scope
            if isinstance(e, ir.Dot):
                coords = (str(at.i), str(at.j))
            elif len(e.x.type.shape) == 1:
                coords = (None, None)
            else:
                coords = (str(at.i), None) if e.axis == 1 else (None, str(at.j))
            key = (self.skey(e),) + coords
            hit = self.memo.get(key)
            if hit is not None:
                return hit[0]
            v = self.reduce_serial(e, at) if isinstance(e, ir.Reduce) else self.dot_serial(e, at)
            self.memo[key] = (v, self.ind)
            return v
        if isinstance(e, ir.Transpose):
            sub = At(at.j, at.i, None, None, False)
            return self.ev(e.x, sub)
        self.fail(f"expression {type(e).__name__}", e)

    def leaf_key(self, e, loc: "Loc"):
        """Equal for two operand reads that load the same elements: a shared tile's window by its
        location; a tensor window by its expression (spans ignored), since each read evaluates
        its window's position into names of its own."""
        return ("g", self.skey(e)) if loc.kind == "global" else loc.key

    def skey(self, e):
        """A key equal for structurally equal expressions (spans ignored)."""
        k = self.skeys.get(id(e))
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
                parts.append(tuple(self.skey(x) if hasattr(x, "__dataclass_fields__") or isinstance(x, ir.Sym) else x for x in v))
            elif hasattr(v, "__dataclass_fields__") or isinstance(v, ir.Sym):
                parts.append(self.skey(v))
            else:
                parts.append(v)
        k = tuple(parts)
        self.skeys[id(e)] = k
        return k

    def hoist_row_reductions(self, value, i, domain):
        """Evaluate once per chunk the row reductions an elementwise value broadcasts along the
        row (rowmax(x) in x - rowmax(x)): every element of a chunk shares its row. Only those
        whose rows are the sweep's (a value of one row broadcast to the `domain`'s rows is left
        to `elem_value`, which reads its row 0)."""
        if not isinstance(value.type, ir.TileT):
            return
        found = []

        def visit(e, rows_same):
            if isinstance(e, ir.Reduce):
                if rows_same and e.axis == 1 and len(e.x.type.shape) == 2:
                    found.append(e)
                return
            if isinstance(e, (ir.Dot, ir.Transpose)):
                return
            for c in ir.sub_exprs(e):
                if isinstance(c.type, ir.TileT):
                    visit(c, rows_same and shape2(c.type.shape)[0] == shape2(e.type.shape)[0])
        visit(value, shape2(value.type.shape)[0] == domain[0])
        for r in found:
            self.ev(r, At(i, 0, None, None, False))

    def child_at(self, parent, child, at: Optional[At]) -> Optional[At]:
        if at is None or not isinstance(child.type, ir.TileT):
            return None
        row = self.mma_child_at(parent, child, at)   # a [M, 1] operand of rows-mode fragments (mma.py)
        if row is not None:
            return row
        P = shape2(parent.type.shape)
        Q = shape2(child.type.shape)
        i = at.i if Q[0] == P[0] else 0
        j = at.j if Q[1] == P[1] else 0
        same = Q == P
        return At(i, j, at.slot if same else None, at.layout if same else None, at.ident and same)

    def binary(self, e: ir.Binary, at):
        a = self.ev(e.a, self.child_at(e, e.a, at))
        b = self.ev(e.b, self.child_at(e, e.b, at))
        op = e.op
        if op in ("&&", "||"):
            return f"({a} {op} {b})"
        ta, tb = e.a.type.dtype, e.b.type.dtype
        if op in ("==", "!=", "<", "<=", ">", ">="):
            ct = operand_dtype(ta, tb, isinstance(e.a, ir.Const), isinstance(e.b, ir.Const))
            return f"({C.convert(a, ta, ct)} {op} {C.convert(b, tb, ct)})"
        ct = e.type.dtype
        av, bv = C.convert(a, ta, ct), C.convert(b, tb, ct)
        if op == "/" and id(e) in self.fast_div:
            rcp = self.fast_div[id(e)]
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

    def math(self, e: ir.Math, at):
        args = [self.ev(x, self.child_at(e, x, at)) for x in e.args]
        dt = e.type.dtype
        fn = e.fn
        if fn == "where":
            c = args[0]
            return f"({c} ? {C.convert(args[1], e.args[1].type.dtype, dt)} : {C.convert(args[2], e.args[2].type.dtype, dt)})"
        if fn in ("min", "max"):
            a, b = (C.convert(x, y.type.dtype, dt) for x, y in zip(args, e.args))
            cty = C.VALUE_C[dt]
            return f"tnb_{fn}(({cty})({a}), ({cty})({b}))"
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
            self.fail(f"built-in {fn}", e)
        return f"{name}{'f' if f32 else ''}({x})"

    # ---- tiles: storage, regions, element reads
    def tile_of(self, sym) -> Optional[TileVar]:
        return self.tiles.get(id(sym))

    def loc_of(self, e) -> Optional[Loc]:
        """The Loc a Slice / Ref-to-tile-or-view reads or writes (None for register tiles)."""
        if isinstance(e, ir.Ref):
            sym, flat, subs = e.sym, False, None
        elif isinstance(e, ir.Slice):
            sym, flat, subs = e.base, e.flat, e.subs
        else:
            return None
        key = ("loc", id(e))
        if key in self.regions:
            return self.regions[key]
        base, bflat, entries = self.resolve(sym, flat)
        of_view = entries is not None
        bounds = self.view_bounds(sym) if of_view else None
        if base.kind == "tensor":
            exts = [self.dim_c(d) for d in base.type.dims]
            dt = base.type.dtype
            ptr = self.cname(base)
            kind = "global"
            tile_region = None
            if entries is None:
                entries = [("rng", 0, d) for d in base.type.dims]   # never happens for tensors
        else:
            tv = self.tile_of(base)
            if tv is None:
                self.fail(f"tile '{base.name}' is used before it is declared", e)
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
                bounds = self.sub_bounds(entries, bounds, subs, self.sub_dims(entries, subs))
            entries = self.apply_subs(entries, subs)
        loc = Loc(kind, base, dt, ptr, exts, entries, tile_region, tv.swz if kind == "shared" else None,
                  tv if kind == "shared" and bflat else None, bounds)
        self.regions[key] = loc
        return loc

    def flat_run(self, tv: TileVar):
        """flat(t)'s valid columns [start, end) as uniform ints (spec section 6; the CPU
        executor's `cpu_memory.flat_run`): from t's first valid element to the first invalid
        one after it, [0, 0) when t's region is empty."""
        r0, r1, c0, c1 = tv.region
        C = tv.shape[1]
        v = self.new("fl")
        empty = f"{r0} >= {r1} || {c0} >= {c1}"
        whole = f"({c0} <= 0 && {c1} >= {C}) || {r1} - {r0} <= 1"
        self.emit(f"const int {v}_a = ({empty}) ? 0 : {r0} * {C} + {c0};  // flat({tv.sym.name}): its valid run")
        self.emit(f"const int {v}_b = ({empty}) ? 0 : (({whole}) ? {r1} - 1 : {r0}) * {C} + {c1};")
        return (f"{v}_a", f"{v}_b")

    def sub_dims(self, entries, subs):
        """The base dimension each subscript of a window applies to (as apply_subs)."""
        rng_idx = [k for k, en in enumerate(entries) if en[0] == "rng"]
        if len(subs) != len(rng_idx):
            # a slice of the whole base (declared tile or tensor): one sub per dimension
            rng_idx = list(range(len(entries)))
        return rng_idx

    def apply_subs(self, entries, subs):
        out = list(entries)
        rng_idx = self.sub_dims(entries, subs)
        for k, sub in zip(rng_idx, subs):
            en = out[k]
            st = en[1] if en[0] == "rng" else 0
            if isinstance(sub, ir.SubIndex):
                out[k] = ("fix", self.hoist(c_add(st, self.idx_c(sub.index))))
            else:
                out[k] = ("rng", self.hoist(c_add(st, self.idx_c(sub.start))), sub.length)
        return out

    def idx_c(self, e):
        if isinstance(e, ir.Const):
            return int(e.value)
        return self.scalar_as(e, "index")

    def hoist(self, x):
        if _is_int(x):
            return x
        v = self.new("s")
        self.emit(f"const long long {v} = {x};")
        return v

    def loc_bounds(self, loc: Loc, with_tile_region: bool) -> Region:
        """Rows/cols of the window inside the base and the enclosing views' windows (and
        inside the tile's valid region)."""
        ok = []
        rngs = []
        tile_region = loc.tile_region
        if with_tile_region and loc.flat_of is not None:
            tile_region = [(0, 1), self.flat_run(loc.flat_of)]
        for k, en in enumerate(loc.entries):
            ext = loc.extents[k]
            lo_b, hi_b = 0, ext
            if with_tile_region and tile_region is not None:
                lo_b, hi_b = tile_region[k]
            if loc.bounds is not None and loc.bounds[k] is not None:   # inside the enclosing views
                lo_b, hi_b = c_max_ll(lo_b, loc.bounds[k][0]), c_min_ll(hi_b, loc.bounds[k][1])
            if en[0] == "fix":
                x = en[1]
                if _is_int(x) and _is_int(lo_b) and _is_int(hi_b):
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
        return self.name_region((r0, r1, c0, c1))

    def name_region(self, rg: Region) -> Region:
        if all(_is_int(x) for x in rg):
            return rg
        v = self.new("rg")
        names = []
        for x, suf in zip(rg, ("r0", "r1", "c0", "c1")):
            if _is_int(x) or (isinstance(x, str) and x.replace("_", "").isalnum()):
                names.append(x)
            else:
                self.emit(f"const int {v}_{suf} = {x};")
                names.append(f"{v}_{suf}")
        return tuple(names)

    def region(self, e) -> Region:
        """The valid region of a tile expression (emitted as uniform ints)."""
        if id(e) in self.regions:
            return self.regions[id(e)]
        r = self._region(e)
        self.regions[id(e)] = r
        return r

    def _region(self, e) -> Region:
        R, Cc = shape2(e.type.shape)
        full = (0, R, 0, Cc)
        if not isinstance(e.type, ir.TileT):
            return full
        if isinstance(e, (ir.Ref, ir.Slice)):
            sym = e.sym if isinstance(e, ir.Ref) else e.base
            tv = self.tile_of(sym)
            if isinstance(e, ir.Ref) and tv is not None:
                return tv.region
            loc = self.loc_of(e)
            if loc is None:
                return tv.region
            return self.loc_bounds(loc, True)
        if isinstance(e, (ir.Unary, ir.Convert, ir.Binary, ir.Math)):
            rg = full
            for c in ir.sub_exprs(e):
                if isinstance(c.type, ir.TileT):
                    rg = self.intersect(rg, self.broadcast_region(self.region(c), c.type.shape, e.type.shape))
            return self.name_region(rg)
        if isinstance(e, ir.Reduce):
            xr = self.region(e.x)
            if len(e.x.type.shape) == 1:
                return (0, 1, 0, 1)
            if e.axis == 1:
                return (xr[0], xr[1], 0, 1)
            return (0, 1, xr[2], xr[3])
        if isinstance(e, ir.Dot):
            ar, br = self.region(e.a), self.region(e.b)
            return (ar[0], ar[1], br[0], br[1]) if e.trans_b else (ar[0], ar[1], br[2], br[3])
        if isinstance(e, ir.Transpose):
            xr = self.region(e.x)
            return (xr[2], xr[3], xr[0], xr[1])
        return full

    def broadcast_region(self, rg: Region, shape, out_shape) -> Region:
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
            ok = True if len(shape) < 2 else self.cmp_lt(r0, 1, r1)
            r0, r1 = 0, (P[0] if ok is True else 0 if ok is False else f"(({ok}) ? {P[0]} : 0)")
        if Q[1] != P[1]:
            ok = True if len(shape) < 1 else self.cmp_lt(c0, 1, c1)
            c0, c1 = 0, (P[1] if ok is True else 0 if ok is False else f"(({ok}) ? {P[1]} : 0)")
        return (r0, r1, c0, c1)

    def cmp_lt(self, lo, one, hi):
        """lo <= 0 && hi > 0 (the one element of an extent-1 dimension is valid)."""
        if _is_int(lo) and _is_int(hi):
            return lo <= 0 < hi
        return f"{lo} <= 0 && {hi} > 0"

    def intersect(self, a: Region, b: Region) -> Region:
        return (c_max(a[0], b[0]), c_min(a[1], b[1]), c_max(a[2], b[2]), c_min(a[3], b[3]))

    def tile_read(self, e, at: At) -> str:
        if at is None:
            self.fail("a tile used where a scalar is needed", e)
        sym = e.sym if isinstance(e, ir.Ref) else e.base
        tv = self.tile_of(sym)
        if tv is not None and tv.space == "registers":
            if not isinstance(e, ir.Ref):
                self.fail(f"a window of the register tile '{sym.name}'", e)
            if not at.ident or at.layout != tv.layout or at.slot is None:
                self.fail(f"'{sym.name}' is kept in registers (each thread holds its own elements), but this "
                          f"statement reads elements of it that another thread holds", e)
            return f"{tv.cname}[{at.slot}]"
        loc = self.loc_of(e)
        b = self.loc_bounds(loc, False) if loc.kind == "shared" else self.region(e)
        idx = loc.index(at.i, at.j)
        val = C.load_value(f"{loc.ptr}[{idx}]", loc.dtype)
        cond = self.in_region(b, at.i, at.j, shape2(loc.shape))
        if cond is True:
            return val
        if cond is False:
            return C.zero(C_val_dt(loc.dtype))
        return f"(({cond}) ? {val} : {C.zero(C_val_dt(loc.dtype))})"

    def in_region(self, rg: Region, i, j, shape):
        """C condition (or True/False) that element (i, j) lies in region rg of a tile of shape."""
        R, Cc = shape
        conds = []
        for x, lo, hi, n in ((i, rg[0], rg[1], R), (j, rg[2], rg[3], Cc)):
            if _is_int(lo) and _is_int(hi) and lo <= 0 and hi >= n:
                continue
            if _is_int(lo) and _is_int(hi) and lo >= hi:
                return False
            if _is_int(x) and _is_int(lo) and _is_int(hi):
                if not (lo <= x < hi):
                    return False
                continue
            if not (_is_int(lo) and lo <= 0):
                conds.append(f"{x} >= {lo}")
            if not (_is_int(hi) and hi >= n):
                conds.append(f"{x} < {hi}")
        if not conds:
            return True
        return " && ".join(conds)

    # ---- reductions and dots, one output element at a time
    def reduce_ident(self, op, dt):
        if op == "sum":
            return C.zero(dt)
        if C.is_float(dt):
            inf = C.literal(float("inf"), dt)
            return f"(-{inf})" if op == "max" else inf
        info = {"i8": (-128, 127), "i32": (-(1 << 31), (1 << 31) - 1), "i64": (-(1 << 63), (1 << 63) - 1),
                "index": (-(1 << 63), (1 << 63) - 1), "u8": (0, 255), "u16": (0, 65535), "u32": (0, (1 << 32) - 1)}[dt]
        return C.literal(info[0] if op == "max" else info[1], dt)

    def reduce_combine(self, op, dt, acc, v):
        if op == "sum":
            if C.is_float(dt):
                return f"{acc} + {v}"
            return f"tnb_add(({C.VALUE_C[dt]}){acc}, ({C.VALUE_C[dt]})({v}))"
        return f"tnb_{op}(({C.VALUE_C[dt]}){acc}, ({C.VALUE_C[dt]})({v}))"

    def reduce_serial(self, e: ir.Reduce, at: At) -> str:
        xr = self.region(e.x)
        dt = e.type.dtype
        xdt = e.x.type.dtype
        acc = self.new("red")
        k = self.new("k")
        R, Cc = shape2(e.x.type.shape)
        self.emit(f"{C.VALUE_C[dt]} {acc} = {self.reduce_ident(e.op, dt)};")
        if len(e.x.type.shape) == 1 or e.axis == 1:
            row = at.i if len(e.x.type.shape) == 2 else 0
            cond = self.in_region((xr[0], xr[1], 0, 1), row, 0, (R, 1))
            lo, hi, pos = xr[2], xr[3], (row, k)
        else:
            col = at.j
            cond = self.in_region((0, 1, xr[2], xr[3]), 0, col, (1, Cc))
            lo, hi, pos = xr[0], xr[1], (k, col)
        if cond is False:
            return acc
        head = f"for (int {k} = {lo}; {k} < {hi}; ++{k}) {{"
        if cond is not True:
            head = f"if ({cond}) " + head
        self.emit(head)
        self.ind += 1
        v = self.ev(e.x, At(pos[0], pos[1], None, None, False))
        self.emit(f"{acc} = {self.reduce_combine(e.op, dt, acc, C.convert(v, xdt, dt))};")
        self.ind -= 1
        self.emit("}")
        return acc

    def dot_serial(self, e: ir.Dot, at: At) -> str:
        ar, br = self.region(e.a), self.region(e.b)
        dt = e.type.dtype
        acc = self.new("dot")
        k = self.new("k")
        self.emit(f"{C.VALUE_C[dt]} {acc} = {C.zero(dt)};")
        # k runs over a's valid columns and b's valid rows (dot) / columns (dot_t)
        klo = c_max(ar[2], br[2] if e.trans_b else br[0])
        khi = c_min(ar[3], br[3] if e.trans_b else br[1])
        ci = self.in_region((ar[0], ar[1], 0, 1), at.i, 0, (shape2(e.a.type.shape)[0], 1))
        bshape = shape2(e.b.type.shape)
        if e.trans_b:
            cj = self.in_region((br[0], br[1], 0, 1), at.j, 0, (bshape[0], 1))
        else:
            cj = self.in_region((0, 1, br[2], br[3]), 0, at.j, (1, bshape[1]))
        conds = [c for c in (ci, cj) if c is not True]
        if any(c is False for c in conds):
            return acc
        head = f"for (int {k} = {klo}; {k} < {khi}; ++{k}) {{"
        if conds:
            head = f"if ({' && '.join(conds)}) " + head
        self.emit(head)
        self.ind += 1
        a = self.ev(e.a, At(at.i, k, None, None, False))
        b = self.ev(e.b, At(at.j, k, None, None, False) if e.trans_b else At(k, at.j, None, None, False))
        av, bv = C.convert(a, e.a.type.dtype, dt), C.convert(b, e.b.type.dtype, dt)
        if C.is_float(dt):
            self.emit(f"{acc} += {av} * {bv};")
        else:
            self.emit(f"{acc} = tnb_add({acc}, tnb_mul(({C.VALUE_C[dt]})({av}), ({C.VALUE_C[dt]})({bv})));")
        self.ind -= 1
        self.emit("}")
        return acc

    # ---- tile statements
    def declare_tile(self, sym: ir.Sym) -> TileVar:
        place = self.plan.tiles.get(id(sym))
        if place is None:
            self.fail(f"the plan has no place for tile '{sym.name}'")
        R, Cc = shape2(sym.type.shape)
        n = self.cname(sym)
        dt = sym.type.dtype
        tv = TileVar(sym, n, dt, (R, Cc), len(sym.type.shape), place.space, self.layouts.get(id(sym)))
        if place.space == "shared":
            tv.swz = self.swz.get(id(sym))
            self.emit(f"{C.STORE_C[dt]}* const {n} = ({C.STORE_C[dt]}*)(tnb_smem + {place.offset});  // [{R}, {Cc}] {dt}, {place.bytes} bytes")
            if tv.swz is not None:
                self.emit(f"// {n} is swizzled: {tv.swz.describe()} (column reads spread over the banks; vectors "
                          f"stay whole)")
        elif self.mma_declare(tv):
            pass
        else:
            lay = tv.layout
            cty = C.VALUE_C[dt]
            what = ("mma.sync accumulator fragments" if isinstance(lay, MmaLayout) else lay.what
                    if isinstance(lay, gemm_sm90.WgmmaLayout) else f"chunks of {lay.V} by the partition")
            self.emit(f"{cty} {n}[{lay.slots}];  // [{R}, {Cc}] {dt} in registers: {what}")
        self.emit(f"int {n}_r0 = 0, {n}_r1 = {R}, {n}_c0 = 0, {n}_c1 = {Cc};  // valid region")
        self.tiles[id(sym)] = tv
        return tv

    def cta_stmt(self, s):
        if isinstance(s, ir.ClusterReduce):
            self.cluster_reduce(s)
            return
        if isinstance(s, ir.Barrier):
            self.emit("__syncthreads();  // barrier() written in the source")
            return
        if isinstance(s, ir.Let) and s.sym.kind == "view":
            self.let_view(s)
            return
        if isinstance(s, (ir.Let, ir.VarDecl)):
            tv = self.declare_tile(s.sym)
            if s.value is None:
                return
            self.emit("{")
            self.ind += 1
            if not self.mma_stmt(s, tv):          # tensor-core dots and fragment layouts (mma.py)
                self.assign_whole(s, tv, s.value)
            self.ind -= 1
            self.emit("}")
            return
        if isinstance(s, ir.Atomic):
            self.emit("{")
            self.ind += 1
            self.tile_atomic(s)
            self.ind -= 1
            self.emit("}")
            return
        if isinstance(s, ir.Assign):
            self.emit("{")
            self.ind += 1
            t = s.target
            tv = self.tile_of(t.sym) if isinstance(t, ir.Ref) else None
            if self.mma_stmt(s, tv):                # tensor-core dots and fragment layouts (mma.py)
                pass
            elif tv is not None:
                self.assign_whole(s, tv, self.compound(s.op, t, s.value))
            else:
                loc = self.loc_of(t)
                if loc is None:
                    self.fail("a store into a window of a register tile", s)
                self.assign_window(s, loc, t, self.compound(s.op, t, s.value))
            self.ind -= 1
            self.emit("}")
            return
        self.fail(f"statement {type(s).__name__}", s)

    def wgmma_readable(self, sym) -> bool:
        """Whether wgmma may read shared tile `sym` by descriptor: every write to it is a whole-tile
        statement (then `async_proxy_fence` follows each), none through a window, an element or
        a view, and no view of it exists."""
        hit = self.wgmma_ok.get(id(sym))
        if hit is None:
            hit = True
            for st in ir.walk_stmts(self.kir.body):
                if isinstance(st, ir.Let) and st.sym.kind == "view" and any(
                        ir.named_sym(x) is sym for x in ir.walk_expr(st.value)):
                    hit = False
                elif isinstance(st, (ir.Assign, ir.Atomic)) and not isinstance(st.target, ir.Ref) \
                        and ir.named_sym(st.target) is sym:
                    hit = False
                elif isinstance(st, ir.ClusterReduce) and st.target.sym is sym:
                    hit = False
            self.wgmma_ok[id(sym)] = hit
        return hit

    def async_proxy_fence(self, s):
        """After ordinary stores into a shared tile that wgmma may read by descriptor (a tile in
        its layout, on a streamed sm_90 loop: mma.py `wg_ss`): each writing thread's fence, so
        the tensor cores' reads (the async proxy) see them after the next barrier."""
        if getattr(self, "stream", None) is None:
            return
        sym = s.sym if isinstance(s, (ir.Let, ir.VarDecl)) else ir.named_sym(s.target) if isinstance(s, ir.Assign) else None
        sw = self.swz.get(id(sym)) if sym is not None else None
        if sw is None:
            return
        tv = self.tiles.get(id(sym))
        if wgmma_panel_bytes(sw, tv.shape[1] if tv is not None else 0) is not None:
            self.emit("tnb_fence_async_smem();  // ordinary stores, read next by the tensor cores by descriptor")

    def cluster_reduce(self, s: ir.ClusterReduce):
        """cluster_sum(t) (max, min) of a shared tile, in two halves with one cluster barrier.
        Here: a CTA barrier, then each element of t is published into a slot of this CTA's own
        (static shared memory, written once; an element outside the CTA's valid region as the
        identity), and the CTA arrives at the cluster barrier. `cluster_finish`, emitted just
        before the next top-level statement that names t (or a view, or is another cluster
        reduction), waits on the barrier and combines: the thread of each element loads the K
        CTAs' slots (distributed shared memory, all K loads in flight), rank 0 first, into the
        valid elements of t, then a CTA barrier. The statements in between (which neither read
        nor write t) run while the other CTAs of the cluster catch up. After the last cluster
        reduction the CTA arrives once more, and waits on that before it exits (`cluster_exit`):
        no CTA leaves while another may still read its slots."""
        K = self.kir.cluster
        tv = self.tile_of(s.target.sym)
        name = f"cluster_{s.op}({s.target.sym.name})"
        if tv is None or tv.space != "shared":
            self.fail(f"{name} of a tile in registers (it must live in shared memory)", s)
        R, Cc = tv.shape
        dt = tv.dtype
        ident = self.reduce_ident(s.op, dt)
        if K == 1:   # the cluster is this CTA: each valid element combined with the identity
            self.emit(f"__syncthreads();  // codegen-internal (cluster reduction): {s.target.sym.name} is complete")
            self.cluster_each(tv, [f"if (tnb_in) {tv.cname}[{swz_c(tv.swz, 'tnb_e')}] = "
                                   f"{self.reduce_combine(s.op, dt, ident, tv.cname + '[' + str(swz_c(tv.swz, 'tnb_e')) + ']')};"])
            self.emit(f"__syncthreads();  // codegen-internal (cluster reduction): {name} is read by other threads next")
            return
        slot = self.new("tnb_cls")
        self.emit(f"{C.STORE_C[dt]}* const {slot} = ({C.STORE_C[dt]}*)(tnb_smem + {self.cluster_slot_at[id(s)]});  "
                  f"// {name}: this CTA's published copy (an element outside its valid region as the identity)")
        self.emit(f"__syncthreads();  // codegen-internal (cluster reduction): {s.target.sym.name} is complete (any "
                  f"thread may have written an element)")
        self.cluster_each(tv, [f"{slot}[tnb_e] = tnb_in ? {tv.cname}[{swz_c(tv.swz, 'tnb_e')}] : {ident};"])
        self.cluster_pending = (s, tv, slot)
        later = self.kir.body[next(i for i, st in enumerate(self.kir.body) if st is s) + 1:]
        if not any(sym is s.target.sym for st in later for sym in self._named_syms(st)):
            # nothing reads t later: its bytes may go to another tile after this statement, so the
            # combination cannot wait (nor can anything else overlap it)
            self.emit(f"tnb_cluster_arrive();  // {name}: published")
            self.cluster_finish()
            return
        self.emit(f"tnb_cluster_arrive();  // {name}: published; the wait and the combination come just before "
                  f"the next statement that needs {s.target.sym.name}")

    def cluster_each(self, tv: TileVar, lines):
        """Per element e of tile tv (thread e % threads): `tnb_e`, and `tnb_in` (e lies in tv's
        valid region), then `lines`."""
        R, Cc = tv.shape
        total, T = R * Cc, self.T
        r0, r1, c0, c1 = tv.region
        self.emit("#pragma unroll")
        self.emit(f"for (int tnb_k = 0; tnb_k < {-(-total // T)}; ++tnb_k) {{")
        self.emit(f"  const int tnb_e = tnb_tid + tnb_k * {T};")
        self.emit(f"  const int tnb_i = tnb_e / {Cc}, tnb_j = tnb_e % {Cc};")
        self.emit(f"  const bool tnb_in = tnb_i >= {r0} && tnb_i < {r1} && tnb_j >= {c0} && tnb_j < {c1};")
        self.emit(f"  if (tnb_e < {total}) {{")
        for line in lines:
            self.emit("    " + line)
        self.emit("  }")
        self.emit("}")

    @staticmethod
    def _named_syms(st):
        """The symbols statement st (nested ones included) names: tiles, views, tensors."""
        for x in ir.walk_stmts((st,)):
            for e in ir.stmt_exprs(x):
                for y in ir.walk_expr(e):
                    sym = ir.named_sym(y)
                    if sym is not None:
                        yield sym

    def cluster_needs_finish(self, st) -> bool:
        """Whether top-level statement `st` must see the pending cluster reduction's result:
        it names its tile (or any view), or is a cluster reduction itself (the barrier's arrive
        and wait alternate)."""
        target = self.cluster_pending[0].target.sym
        if any(isinstance(x, ir.ClusterReduce) or (isinstance(x, ir.Let) and x.sym.kind == "view")
               for x in ir.walk_stmts((st,))):
            return True
        return any(sym is target or sym.kind == "view" for sym in self._named_syms(st))

    def cluster_finish(self):
        s, tv, slot = self.cluster_pending
        self.cluster_pending = None
        K, dt = self.kir.cluster, tv.dtype
        cty = C.VALUE_C[dt]
        name = f"cluster_{s.op}({s.target.sym.name})"
        a = self.new("tnb_cla")
        self.emit(f"{{  // {name}, continued (line {s.span.line + self.line_offset}): combined over the {K} CTAs "
                  f"of the cluster, rank 0 first")
        self.ind += 1
        self.emit("tnb_cluster_wait();  // every CTA of the cluster has published its copy")
        self.emit(f"const unsigned {a} = tnb_smem_addr({slot});")
        combine = self.reduce_combine(s.op, dt, "tnb_acc", "tnb_v[tnb_r]")
        self.cluster_each(tv, [
            f"{cty} tnb_v[{K}];",
            "#pragma unroll",
            f"for (int tnb_r = 0; tnb_r < {K}; ++tnb_r) tnb_v[tnb_r] = tnb_cluster_ld(tnb_cluster_addr({a} + "
            f"{C.itemsize(dt)} * tnb_e, tnb_r), {cty}());",
            f"{cty} tnb_acc = {self.reduce_ident(s.op, dt)};",
            "#pragma unroll",
            f"for (int tnb_r = 0; tnb_r < {K}; ++tnb_r) tnb_acc = {combine};",
            f"if (tnb_in) {tv.cname}[{swz_c(tv.swz, 'tnb_e')}] = tnb_acc;"])
        if s is self.cluster_last:
            self.emit("tnb_cluster_arrive();  // this CTA is done reading the cluster's slots (waited on at exit)")
        self.emit(f"__syncthreads();  // codegen-internal (cluster reduction): {name} is read by other threads next")
        self.ind -= 1
        self.emit("}")

    def cluster_exit(self):
        """Before the kernel ends: finish a pending cluster reduction, then wait until every CTA
        of the cluster has read the slots of the last one (its final `tnb_cluster_arrive`)."""
        if self.cluster_last is None or self.kir.cluster == 1:
            return
        if self.cluster_pending is not None:
            self.cluster_finish()
        self.emit("tnb_cluster_wait();  // no CTA exits while another may still read its slots")

    def let_view(self, s: ir.Let):
        v = s.value
        if isinstance(v, ir.Ref):
            base, flat, entries = self.resolve(v.sym, False)
            bounds = self.view_bounds(v.sym)
            if entries is None:
                tv = self.tile_of(base)
                if tv is not None and tv.space == "registers":
                    self.fail(f"a let view of the register tile '{base.name}'", s)
                exts = [tv.shape[1]] if tv.rank == 1 else list(tv.shape)
                entries = [("rng", 0, x) for x in exts]
            self.views[id(s.sym)] = ViewInfo(base, flat, entries, bounds)
        else:
            base, flat, entries = self.resolve(v.base, v.flat)
            bounds = None
            if entries is not None:      # a view of a view: it sees only the enclosing view's window
                bounds = self.sub_bounds(entries, self.view_bounds(v.base), v.subs, self.sub_dims(entries, v.subs))
            if entries is None:
                if base.kind == "tensor":
                    exts = list(base.type.dims)
                else:
                    tv = self.tile_of(base)
                    if tv is None:
                        self.fail(f"tile '{base.name}' is used before it is declared", s)
                    if tv.space == "registers":
                        self.fail(f"a let view of the register tile '{base.name}'", s)
                    exts = [1, tv.shape[0] * tv.shape[1]] if flat else ([tv.shape[1]] if tv.rank == 1 else list(tv.shape))
                entries = [("rng", 0, x) for x in exts]
            entries = self.apply_subs_named(entries, v.subs, s.sym)
            self.views[id(s.sym)] = ViewInfo(base, flat, entries, bounds)
        place = self.plan.tiles.get(id(s.sym))
        if id(s.sym) in self.streamed_views:
            self.emit("// read only by tensor-core dots, which stage it themselves (mma.py): no copy here")
        elif place is not None and place.space == "shared":
            # staged: a dot reads this view more than once, so it gets a shared-memory copy
            self.emit("// staged in shared memory: a dot reads this view")
            tv = self.declare_tile(s.sym)
            view_ref = ir.Ref(s.sym, s.sym.type, s.span)
            del self.tiles[id(s.sym)]
            self.emit("{")
            self.ind += 1
            self.regions = {}
            self.assign_whole(s, tv, view_ref)
            self.ind -= 1
            self.emit("}")
            self.tiles[id(s.sym)] = tv

    def apply_subs_named(self, entries, subs, sym):
        rng_idx = self.sub_dims(entries, subs)
        out = list(entries)
        n = self.cname(sym)
        for m, (k, sub) in enumerate(zip(rng_idx, subs)):
            en = out[k]
            st = en[1] if en[0] == "rng" else 0
            x = c_add(st, self.idx_c(sub.index if isinstance(sub, ir.SubIndex) else sub.start))
            if not _is_int(x):
                self.emit(f"const long long {n}_o{m} = {x};  // view start")
                x = f"{n}_o{m}"
            out[k] = ("fix", x) if isinstance(sub, ir.SubIndex) else ("rng", x, sub.length)
        return out

    # which layout a tile statement iterates over
    def sweep_layout(self, s, target_tv: Optional[TileVar], value, domain):
        if target_tv is not None and target_tv.space == "registers":
            return target_tv.layout
        found = []

        def visit(e, ident, shape):
            if isinstance(e, ir.Ref) and isinstance(e.type, ir.TileT):
                tv = self.tile_of(e.sym)
                if tv is not None and tv.space == "registers":
                    if not ident:
                        self.fail(f"'{e.sym.name}' is kept in registers (each thread holds its own elements), but this "
                                  f"statement reads elements of it that another thread holds", e)
                    found.append(tv.layout)
                return
            if isinstance(e, (ir.Reduce, ir.Dot, ir.Transpose)):
                for c in ir.sub_exprs(e):
                    visit(c, False, None)
                return
            for c in ir.sub_exprs(e):
                if isinstance(c.type, ir.TileT):
                    visit(c, ident and shape2(c.type.shape) == shape2(e.type.shape), None)
        visit(value, True, domain)
        if found:
            if any(f != found[0] for f in found):
                self.fail("tiles in registers with different layouts in one statement", s)
            lay = found[0]
            lshape = (lay.M, lay.N) if isinstance(lay, MmaLayout) else (lay.R, lay.C)
            if lshape != tuple(domain):
                self.fail("a register tile used with a shape other than the statement's", s)
            return lay
        return None

    def two_phase(self, s) -> bool:
        """Whether this statement must compute its value into registers, barrier, then write:
        the analysis' "within" barrier (a read of the target's own bytes at elements other
        threads write)."""
        p = self.plan.positions.get(id(s))
        return any(b.where == "within" for b in self.plan.barriers.get(p, ()))

    def stmt_vec(self, s, domain) -> int:
        """The statement's partition width, the analysis' (it divides the row length)."""
        return self.plan.vec.get(id(s), 1)

    def stmt_plan(self, s):
        """The analysis' StatementPlan of tile statement `s` (None without the analysis)."""
        return self.plan.statements.get(id(s))

    def access_vector(self, e) -> int:
        """Elements one memory instruction moves for expression `e` (a tile name or slice the
        current statement reads) in a whole chunk: the analysis' `Access.vector`."""
        sp = self.stmt_plan(self.cur_stmt)
        if sp is None:
            return 1
        a = sp.access_of(e)
        if a is None and isinstance(self.cur_stmt, ir.Let) and self.cur_stmt.sym.kind == "view" \
                and len(sp.accesses) > 1:
            a = sp.accesses[1]          # a staged view's copy reads the viewed window
        return a.vector if a is not None else 1

    def assign_whole(self, s, tv: TileVar, value):
        """tile = value: every element written; the tile takes the value's region."""
        domain = tv.shape
        if isinstance(value.type, ir.TileT):
            vr = self.broadcast_region(self.region(value), value.type.shape, (domain[0], domain[1]))
            vr = self.name_region(vr)
        else:
            vr = (0, domain[0], 0, domain[1])
        lay = self.sweep_layout(s, tv, value, domain)
        V = self.stmt_vec(s, domain)
        two_phase = tv.space == "shared" and self.two_phase(s)

        def write(at: At, val: str, vdt: str):
            if tv.space == "registers":
                self.emit(f"{tv.cname}[{at.slot}] = {C.convert(val, vdt, tv.dtype)};")
            else:
                idx = at.i * domain[1] + at.j if _is_int(at.i) and _is_int(at.j) else f"({at.i}) * {domain[1]} + ({at.j})"
                self.emit(f"{tv.cname}[{swz_c(tv.swz, idx)}] = {C.store_bits(val, vdt, tv.dtype)};")

        vt = None
        if tv.space == "shared":
            vt = (tv.cname, lambda i, j: swz_c(tv.swz, f"({i}) * {domain[1]} + ({j})"), tv.dtype, None, False, True,
                  "shared")
        self.run_sweep(s, domain, lay, V, value, write, None, two_phase, vt)
        self.emit(f"{tv.cname}_r0 = {vr[0]}; {tv.cname}_r1 = {vr[1]}; {tv.cname}_c0 = {vr[2]}; {tv.cname}_c1 = {vr[3]};")

    def assign_window(self, s, loc: Loc, target, value):
        """window = value: only elements valid in the value and inside the base are written."""
        domain = shape2(loc.shape)
        bounds = self.loc_bounds(loc, False)
        if isinstance(value.type, ir.TileT):
            vr = self.broadcast_region(self.region(value), value.type.shape, loc.shape or (1,))
            mask = self.name_region(self.intersect(vr, bounds))
        else:
            mask = bounds
        lay = self.sweep_layout(s, None, value, domain)
        if self.gemm is not None and gemm_sm90.staged_store(self, s, loc, value, mask, lay):
            return   # a wgmma accumulator's tile, stored through shared memory in 16-byte rows
        V = self.stmt_vec(s, domain)
        two_phase = self.two_phase(s)

        def write(at: At, val: str, vdt: str):
            idx = loc.index(at.i, at.j)
            self.emit(f"{loc.ptr}[{idx}] = {C.store_bits(val, vdt, loc.dtype)};")

        vt = (loc.ptr, loc.index, loc.dtype, mask, loc.kind == "global" and id(loc.sym) in self.hints.stores, False,
              loc.kind) if self.row_contiguous(loc) else None
        self.run_sweep(s, domain, lay, V, value, write, mask, two_phase, vt)

    def off_partition(self, s, lay, V) -> bool:
        """A statement that touches shared tiles by the partition but iterates over a register
        layout other than the partition at its planned width: the analysis' barriers assume the
        partition, so the generator fences this statement on both sides itself."""
        if lay is None or id(s) not in self.plan.shared_partition:
            return False
        if isinstance(lay, ChunkLayout) and lay.V == self.plan.vec.get(id(s), lay.V):
            return False
        return True

    def run_sweep(self, s, domain, lay, V, value, write, mask: Optional[Region], two_phase: bool, vt=None):
        fence = self.off_partition(s, lay, V)
        if fence:
            self.emit("__syncthreads();  // codegen-internal: this statement follows a register layout, not the partition "
                      "the barrier analysis assumes for its shared-memory operands")
        sp = self.stmt_plan(s)
        if sp is not None and sp.vector_path and vt is not None and lay is None and not two_phase:
            # the analysis moves this statement with vector accesses (`ownership`, with_vectors)
            self.prepare_regions(value)
            pre = getattr(self, "prefetched", None)
            self.vector_sweep(domain, V, value, vt, pre[1] if pre is not None and pre[0] == id(s) else None)
        else:
            self._run_sweep(s, domain, lay, V, value, write, mask, two_phase)
        if fence:
            self.emit("__syncthreads();  // codegen-internal: (the same, after the statement)")

    def _run_sweep(self, s, domain, lay, V, value, write, mask: Optional[Region], two_phase: bool):
        vdt = value.type.dtype
        # uniform values every element needs: regions of the operands
        self.prepare_regions(value)
        if two_phase:
            lay2 = lay or ChunkLayout(domain[0], domain[1], V, self.T)
            if lay2.slots > MAX_STAGED_SLOTS:
                self.fail("a statement that reads its own target at other elements, on a tile this large", s)
            stage = self.new("stage")
            self.emit(f"{C.VALUE_C[vdt]} {stage}[{lay2.slots}];  // the new values, written after every thread has read the old ones")

            def compute(at):
                v = self.elem_value(value, at, domain)
                self.emit(f"{stage}[{at.slot}] = {v};")

            self.sweep(domain, lay2, V, compute, mask=None)
            p = self.plan.positions.get(id(s))
            why = [b.reason for b in self.plan.barriers.get(p, ()) if b.where == "within"]
            if why:
                self.emit(f"__syncthreads();  // barrier (within line {s.span.line + self.line_offset}): {why[0]}")
            else:
                self.emit("__syncthreads();  // codegen-internal: this statement reads its own target at elements other threads write")

            def put(at):
                write(at, f"{stage}[{at.slot}]", vdt)
            self.sweep(domain, lay2, V, put, mask=mask)
            return
        coop = self.coop_reduces(value, domain, V, lay)
        if coop:
            widths = self.block_reduce_widths(domain, coop, s)
            if widths is not None:
                self.block_sweep(s, domain, value, coop, widths, write, mask)
            else:
                self.coop_sweep(domain, value, coop, write, mask)
            return

        def body(at):
            v = self.elem_value(value, at, domain)
            write(at, v, vdt)
        self.sweep(domain, lay, V, body, mask=mask, hoist=value)

    def row_contiguous(self, loc: Loc) -> bool:
        """The window's columns are consecutive elements of its base (vector accesses possible)."""
        return bool(loc.entries) and loc.entries[-1][0] == "rng"

    def vector_leaves(self, value, domain, bcast: bool = False):
        """Tile reads at the sweep's own coordinates whose chunk of V elements is contiguous; with
        `bcast`, also [1, C] reads broadcast along the rows of an [R, C] sweep (row 0 of them):
        the same column j for every row, so the chunk is contiguous there too."""
        out = []
        R, Cc = domain

        def visit(e, ident, cols):
            if isinstance(e, (ir.Ref, ir.Slice)) and isinstance(e.type, ir.TileT):
                shp = shape2(e.type.shape)
                if ident or (bcast and cols and R > 1 and shp == (1, Cc)):
                    loc = self.loc_of(e)
                    if loc is not None and self.row_contiguous(loc) and shape2(loc.shape) == shp:
                        out.append((e, loc))
                return
            if isinstance(e, (ir.Reduce, ir.Dot, ir.Transpose)):
                return
            for c in ir.sub_exprs(e):
                if isinstance(c.type, ir.TileT):
                    cs = shape2(c.type.shape)
                    visit(c, ident and cs == shape2(e.type.shape), cols and cs[1] == Cc)
        if isinstance(value.type, ir.TileT):
            vs = shape2(value.type.shape)
            visit(value, vs == (R, Cc), vs[1] == Cc)
        return out

    def invariant_divisions(self, value, domain):
        """f32-family divisions whose divisor is the same for every element of a chunk (a scalar,
        or a tile broadcast along the row): evaluated as x * (1 / d) with 1 / d computed once a
        chunk (`fast_div`), an error of at most 1.5 ulp, within spec 17's f32 bound."""
        out = []

        def visit(e):
            if isinstance(e, (ir.Reduce, ir.Dot, ir.Transpose)):
                return
            if (isinstance(e, ir.Binary) and e.op == "/" and e.type.dtype in C.F32_FAMILY
                    and e.b.type.dtype in C.F32_FAMILY
                    and (not isinstance(e.b.type, ir.TileT) or shape2(e.b.type.shape)[1] == 1)
                    and not self.has_reduce_or_dot(e.b)):
                out.append(e)
            for c in ir.sub_exprs(e):
                if isinstance(c.type, ir.TileT) and shape2(c.type.shape) == tuple(domain):
                    visit(c)      # only at the sweep's own coordinates: the divisor's row is the chunk's
        if isinstance(value.type, ir.TileT) and shape2(value.type.shape) == tuple(domain) and domain[1] > 1:
            visit(value)
        return out

    def vector_batch(self, nch: int, leaf_bytes: int) -> int:
        """Chunks a thread loads before it computes any of them: all of its chunks, up to 8 and
        up to 128 bytes of loaded vectors (32 registers), so their loads are in flight together."""
        steps = -(-nch // self.T)
        b = max(1, min(steps, 8, 128 // max(1, leaf_bytes)))
        while steps % b and b > 1 and steps > 8:
            b -= 1
        return b

    def vector_plan(self, value, domain, V):
        """The vector operands of a vector sweep: [(leaf, Loc, buffer name)] (equal windows share
        a buffer), the first of each buffer, and the bytes a chunk loads."""
        leaves, seen = [], {}
        for e, loc in self.vector_leaves(value, domain, bcast=True):
            if self.access_vector(e) != V:
                continue          # read element by element (the analysis' width for this access)
            key = self.leaf_key(e, loc)
            if key not in seen:
                seen[key] = self.new("vin")
            leaves.append((e, loc, seen[key]))
        uniq, firsts = [], set()
        for e, loc, b in leaves:
            if b not in firsts:
                firsts.add(b)
                uniq.append((e, loc, b))
        return leaves, uniq, sum(C.itemsize(loc.dtype) * V for _, loc, _ in uniq)

    def chunk_head(self, domain, V, base, q, guard):
        """Open chunk (base + q) * T + tid of the partition at width V; returns its (i, j0)."""
        R, Cc = domain
        nch, per_row = R * Cc // V, Cc // V
        k, i, j0 = self.new("k"), self.new("i"), self.new("j")
        self.emit(f"const int {k} = tnb_tid + ({base} + {q}) * {self.T};")
        self.emit(f"if ({k} < {nch}) {{" if guard else "{")
        self.ind += 1
        if R == 1:
            self.emit(f"const int {i} = 0, {j0} = {k} * {V};")
        else:
            self.emit(f"const int {i} = {k} / {per_row}, {j0} = ({k} % {per_row}) * {V};")
        return i, j0

    def close(self):
        self.ind -= 1
        self.emit("}")

    def vector_loads(self, uniq, domain, V, B, base, guard):
        """Phase 1 of a vector sweep: chunks base .. base + B - 1 of this thread, every vector
        operand loaded into its buffer (elements outside the operand's valid region read as 0)."""
        R, Cc = domain
        vtypes = {4: "unsigned", 8: "uint2", 16: "uint4"}
        q = self.new("q")
        self.emit("#pragma unroll")
        self.emit(f"for (int {q} = 0; {q} < {B}; ++{q}) {{")
        self.ind += 1
        i, j0 = self.chunk_head(domain, V, base, q, guard)
        for e, loc, buf in uniq:
            nbytes = C.itemsize(loc.dtype) * V
            row = i if shape2(loc.shape)[0] == R else 0
            b = self.loc_bounds(loc, False) if loc.kind == "shared" else self.region(e)
            load = f"*({vtypes[nbytes]}*){buf}[{q}] = *(const {vtypes[nbytes]}*)({loc.ptr} + {loc.index(row, j0)});"
            if loc.kind == "global" and id(e) in self.hints.loads:     # the last touch of re-read data
                load = cache_hints.load_text(vtypes[nbytes], f"{buf}[{q}]", f"{loc.ptr} + {loc.index(row, j0)}")
            self.chunk_load(load, loc, b, row, j0, V, lambda v, buf=buf: f"{buf}[{q}][{v}]")
        self.close()
        self.close()

    def chunk_load(self, load: str, loc: "Loc", b: Region, row, j0, V: int, dest) -> None:
        """Emit `load` (one vector access moving a chunk of V elements of `loc`'s row `row` from
        column j0) where the whole chunk lies in the valid region `b`; where it may not, the
        chunk's elements one by one into `dest(v)`, 0 outside the region (nothing is read there)."""
        shp = shape2(loc.shape)
        whole = self.chunk_inside(b, row, j0, V, shp)
        if whole is True:
            self.emit(load)
            return
        v = self.new("v")
        cond = self.in_region(b, row, f"{j0} + {v}", shp)
        zero = "0" if loc.dtype not in ("f16", "bf16") else "(unsigned short)0"
        self.emit(f"if ({c_cond(whole)}) {load}")
        self.emit(f"else for (int {v} = 0; {v} < {V}; ++{v}) {dest(v)} = ({c_cond(cond)}) ? "
                  f"{loc.ptr}[{loc.index(row, f'{j0} + {v}')}] : ({C.STORE_C[loc.dtype]}){zero};")

    def vector_sweep(self, domain, V, value, vt, preloaded=None):
        """The partition at width V with 4/8/16-byte vector loads and stores: the analysis chose V
        so that every contiguous operand's chunk starts on a multiple of V elements (tensors are
        16-byte aligned at their base, the launch guarantees it; tiles are 16-byte aligned).
        A chunk that crosses a tensor's edge or the valid region falls back to element accesses.
        Each thread first loads the vectors of a batch of its chunks (all of them when they fit,
        `vector_batch`), then computes and stores them: the loads are in flight together. A value
        that is one operand of the target's own type is moved as bits; 16-bit floats are widened
        from 32-bit words and rounded in pairs (cvt.rn.{bf16,f16}x2.f32). `preloaded`: the buffer
        a loop's prefetch already loaded this copy's chunks into (all of them; `prefetch_loop`)."""
        R, Cc = domain
        nch = R * Cc // V
        vtypes = {4: "unsigned", 8: "uint2", 16: "uint4"}
        optr, oindex, odt, omask = vt[:4]
        hint_store = len(vt) > 4 and vt[4]       # a store this kernel never reads back (cache_hints.py)
        whole_tile = len(vt) > 5 and vt[5]       # the destination is a whole shared tile
        leaves, uniq, leaf_bytes = self.vector_plan(value, domain, V)
        steps = -(-nch // self.T)
        B = steps if preloaded is not None else self.vector_batch(nch, leaf_bytes)
        guard = nch % self.T != 0 or steps % B != 0
        raw = (len(leaves) == 1 and leaves[0][0] is value and leaves[0][1].dtype == odt)
        if (SWITCHES.async_copy and raw and whole_tile and preloaded is None and steps > B and leaves[0][1].kind == "global"
                and id(value) not in self.hints.loads):
            self.async_copy(domain, V, leaves[0][0], leaves[0][1], vt)
            return
        if preloaded is not None:
            leaves = [(leaves[0][0], leaves[0][1], preloaded)]
            self.emit(f"// partition: chunk k of {V} row elements -> thread k % {self.T}, moved as vectors where whole; "
                      f"this thread's {B} chunks were loaded into {preloaded} ahead of this turn")
        else:
            self.emit(f"// partition: chunk k of {V} row elements -> thread k % {self.T}, moved as vectors where whole; "
                      f"each thread loads {B} of its chunks, then computes and stores them")
        hoisted = None if raw else self.hoist_scalar_tiles(value)
        sb = self.new("sb")
        outer = steps > B
        if outer:
            self.emit("#pragma unroll 1")
            self.emit(f"for (int {sb} = 0; {sb} < {steps}; {sb} += {B}) {{")
            self.ind += 1
        base = sb if outer else "0"
        if preloaded is None:
            for e, loc, b in uniq:
                self.emit(f"__align__(16) {C.STORE_C[loc.dtype]} {b}[{B}][{V}];")
            if uniq:
                self.vector_loads(uniq, domain, V, B, base, guard)
        # phase 2: compute and store
        q = self.new("q")
        self.emit("#pragma unroll")
        self.emit(f"for (int {q} = 0; {q} < {B}; ++{q}) {{")
        self.ind += 1
        i, j0 = self.chunk_head(domain, V, base, q, guard)
        out = self.new("vout")
        ost = C.STORE_C[odt]
        nbytes = C.itemsize(odt) * V
        if raw:
            self.emit(f"// the value is {leaves[0][1].sym.name}'s elements, stored as they are")
            out = f"{leaves[0][2]}[{q}]"
        else:
            self.hoist_row_reductions(value, i, domain)
            saved, saved_b, saved_d = dict(self.pre), set(self.pre_bcast), dict(self.fast_div)
            self.emit(f"__align__(16) {ost} {out}[{V}];")
            divs = self.invariant_divisions(value, domain)
            ok = None
            if divs:
                conds = []
                for d in divs:
                    bv = self.ev(d.b, self.child_at(d, d.b, At(i, 0, None, None, False)) if isinstance(d.b.type, ir.TileT) else None)
                    dv, rv = self.new("dv"), self.new("rcp")
                    self.emit(f"const float {dv} = {C.convert(bv, d.b.type.dtype, 'f32')};")
                    self.emit(f"const float {rv} = 1.0f / {dv};  // divisor shared by the chunk: x / d as x * (1 / d)")
                    self.fast_div[id(d)] = rv
                    conds.append(f"tnb_rcp_ok({dv})")
                ok = " && ".join(conds)
            pack = (odt in ("f16", "bf16") and value.type.dtype in C.F32_FAMILY and V % 2 == 0)

            def element_loop():
                vv = self.new("v")
                res = self.new("res") if pack else None
                if pack:
                    self.emit(f"float {res}[{V}];")
                self.emit("#pragma unroll")
                self.emit(f"for (int {vv} = 0; {vv} < {V}; ++{vv}) {{")
                self.ind += 1
                j = self.new("j")
                self.emit(f"const int {j} = {j0} + {vv};")
                for e, loc, buf in leaves:
                    self.pre[id(e)] = self.vector_elem(buf, q, vv, loc.dtype)
                    if shape2(loc.shape) != (R, Cc):
                        self.pre_bcast.add(id(e))
                val = self.elem_value(value, At(i, j, None, None, True), domain)
                if pack:
                    self.emit(f"{res}[{vv}] = {C.convert(val, value.type.dtype, 'f32')};")
                else:
                    self.emit(f"{out}[{vv}] = {C.store_bits(val, value.type.dtype, odt)};")
                self.close()
                if pack:
                    fn = C.pack2(odt)
                    p = self.new("p")
                    self.emit("#pragma unroll")
                    self.emit(f"for (int {p} = 0; {p} < {V // 2}; ++{p}) "
                              f"((unsigned*){out})[{p}] = {fn}({res}[2 * {p}], {res}[2 * {p} + 1]);")

            if ok:
                self.emit(f"if ({ok}) {{")
                self.ind += 1
                element_loop()
                self.ind -= 1
                self.emit("} else {  // a divisor whose reciprocal is not a normal number: divide")
                self.ind += 1
                self.fast_div = saved_d
                element_loop()
                self.close()
            else:
                element_loop()
            self.pre, self.pre_bcast, self.fast_div = saved, saved_b, saved_d
        store = f"*({vtypes[nbytes]}*)({optr} + {oindex(i, j0)}) = *(const {vtypes[nbytes]}*){out};"
        if hint_store:
            store = cache_hints.store_text(vtypes[nbytes], f"{optr} + {oindex(i, j0)}", out)
        whole = self.chunk_inside(omask, i, j0, V, domain) if omask is not None else True
        if whole is True:
            self.emit(store)
        else:
            if not hint_store:   # one instruction in inline PTX: the compiler would split a C++ store here
                helper = "tnb_stg" if vt[6] == "global" else "tnb_sts"
                store = f"{helper}(({vtypes[nbytes]}*)({optr} + {oindex(i, j0)}), *(const {vtypes[nbytes]}*){out});"
            v = self.new("v")
            cond = self.in_region(omask, i, f"{j0} + {v}", domain)
            self.emit(f"if ({c_cond(whole)}) {store}")
            self.emit(f"else for (int {v} = 0; {v} < {V}; ++{v}) if ({c_cond(cond)}) {optr}[{oindex(i, f'{j0} + {v}')}] = {out}[{v}];")
        self.close()
        self.close()
        if outer:
            self.close()
        if hoisted is not None:
            self.pre, self.pre_bcast = hoisted

    def hoist_scalar_tiles(self, value):
        """Read once, before a vector sweep, each [1, 1] shared tile the value broadcasts to every
        element (the scale of `x * inv * g`): one register instead of a shared load a chunk (and a
        reload after each store the compiler may not move it across). Returns the `pre` map and
        broadcast set to restore after the sweep."""
        saved = (dict(self.pre), set(self.pre_bcast))
        seen = {}

        def visit(e):
            if isinstance(e, ir.Ref) and isinstance(e.type, ir.TileT) and shape2(e.type.shape) == (1, 1):
                tv = self.tile_of(e.sym)
                if tv is not None and tv.space == "shared" and e.type.dtype in C.VALUE_C:
                    if id(e.sym) not in seen:
                        u = self.new("u")
                        self.emit(f"const {C.VALUE_C[e.type.dtype]} {u} = {self.ev(e, At(0, 0, None, None, True))};"
                                  f"  // {e.sym.name}, the same for every element")
                        seen[id(e.sym)] = u
                    self.pre[id(e)] = seen[id(e.sym)]
                    self.pre_bcast.add(id(e))
                return
            if isinstance(e, (ir.Reduce, ir.Dot, ir.Transpose)):
                return
            for c in ir.sub_exprs(e):
                visit(c)
        if isinstance(value.type, ir.TileT):
            visit(value)
        return saved

    def async_copy(self, domain, V, e, loc, vt):
        """A copy of a tensor window into a whole shared tile with more chunks a thread than one
        register batch (`vector_batch`): every whole chunk is started as an asynchronous copy
        (`tnb_cpa`, cp.async on sm_80+), so all of the thread's chunks are in flight at once
        instead of a batch at a time; a chunk that crosses the window's valid region is written
        element by element (0 outside it). The thread waits for its own copies before the next
        statement, so the statement means what the register path means (its barriers are the
        analysis' own)."""
        R, Cc = domain
        nch = R * Cc // V
        steps = -(-nch // self.T)
        optr, oindex, odt = vt[:3]
        nbytes = C.itemsize(odt) * V
        self.emit(f"// partition: chunk k of {V} row elements -> thread k % {self.T}; this thread's {steps} chunks "
                  f"are copied asynchronously (cp.async, {nbytes} bytes each), all in flight together")
        q = self.new("q")
        self.emit("#pragma unroll 4")
        self.emit(f"for (int {q} = 0; {q} < {steps}; ++{q}) {{")
        self.ind += 1
        i, j0 = self.chunk_head(domain, V, "0", q, nch % self.T != 0)
        row = i if shape2(loc.shape)[0] == R else 0
        cp = f"tnb_cpa<{nbytes}>({optr} + {oindex(i, j0)}, {loc.ptr} + {loc.index(row, j0)});"
        self.chunk_load(cp, loc, self.region(e), row, j0, V, lambda v: f"{optr}[{oindex(i, f'{j0} + {v}')}]")
        self.close()
        self.close()
        self.emit("tnb_cpa_wait_all();  // this thread's copies have landed")

    # ---- a loop's next turn copied ahead: the tensor copy at the top of a chunked loop
    PREFETCH_BYTES = 128        # registers a thread may hold for the next turn's chunks (32)

    def prefetch_candidate(self, s: ir.For):
        """The copy `var x = X[...]` of a loop body whose next turn can be loaded while this turn
        computes: a top-level statement of a plain loop that writes no tensor (so nothing the loop
        does can change what the copy reads) and has no break, continue, return or dot; the copy
        is a tensor window whose position depends only on the loop variable and values fixed
        before the loop, into a whole shared tile, moved as vectors, at most PREFETCH_BYTES a
        thread. Returns (statement, tile, window, V) or None."""
        if s.unroll > 1 or self.guards:
            return None
        if getattr(self, "gemm", None) is not None and id(s) in getattr(self.gemm, "loops", ()):
            return None
        assigned = set()
        for t in ir.walk_stmts(s.body):
            if isinstance(t, (ir.Break, ir.Continue, ir.Return, ir.Atomic, ir.Barrier)):
                return None
            if isinstance(t, ir.Assign) and not isinstance(t.target, ir.Ref):
                base = ir.named_sym(t.target)
                if base is None or base.kind == "tensor" or getattr(base, "kind", "") == "view":
                    return None           # a tensor (or a view, which may be one) written in the loop
            if isinstance(t, ir.Assign) and isinstance(t.target, ir.Ref):
                assigned.add(id(t.target.sym))
            if isinstance(t, (ir.Let, ir.VarDecl)):
                assigned.add(id(t.sym))
            if isinstance(t, ir.For):
                assigned.add(id(t.var))
            for e in ir.stmt_exprs(t):
                if any(isinstance(x, ir.Dot) for x in ir.walk_expr(e)):
                    return None
        for t in s.body:
            if not isinstance(t, (ir.Let, ir.VarDecl)) or not isinstance(t.value, ir.Slice):
                continue
            w = t.value
            if w.base.kind != "tensor" or w.flat or not isinstance(t.sym.type, ir.TileT):
                continue
            place = self.plan.tiles.get(id(t.sym))
            if place is None or place.space != "shared" or t.sym.type.dtype != w.base.type.dtype:
                continue
            if len(t.sym.type.shape) not in (1, 2):
                continue
            uses = [x for sub in w.subs for x in ir.walk_expr(sub.index if isinstance(sub, ir.SubIndex) else sub.start)]
            if any(isinstance(x, ir.Ref) and id(x.sym) in assigned for x in uses):
                continue
            if any(isinstance(x, (ir.Element, ir.Slice, ir.Reduce, ir.Dot)) for x in uses):
                continue
            domain = shape2(t.sym.type.shape)
            V = self.plan.vec.get(id(t), 1)
            sp = self.stmt_plan(t)
            src = sp.access_of(w) if sp is not None else None
            if sp is None or not sp.vector_path or src is None or src.vector != V:
                continue          # the analysis moves this copy element by element
            p = self.plan.positions.get(id(t))
            if any(b.where == "within" for b in self.plan.barriers.get(p, ())):
                continue
            steps = -(-(domain[0] * domain[1] // V) // self.T)
            if steps * C.itemsize(t.sym.type.dtype) * V > self.PREFETCH_BYTES:
                continue
            return t, w, V
        return None

    def emit_prefetch(self, cand, var_c, buf):
        """Load this thread's chunks of the candidate copy into `buf`, with the loop variable
        standing for the C expression `var_c` (a turn ahead)."""
        t, w, V = cand
        domain = shape2(t.sym.type.shape)
        saved_names, saved_regions = dict(self.names), self.regions
        self.names[id(self.prefetch_var)] = var_c
        self.regions = {}
        try:
            loc = self.loc_of(w)
            nch = domain[0] * domain[1] // V
            steps = -(-nch // self.T)
            self.prepare_regions(w)
            self.vector_loads([(w, loc, buf)], domain, V, steps, "0", nch % self.T != 0)
        finally:
            self.names, self.regions = saved_names, saved_regions

    def prefetch_loop(self, s: ir.For, v, lo, hv, step, cand):
        """A loop whose copy `cand` is loaded a turn ahead into registers: before the loop for
        the first turn, then right after each turn's copy for the next one (its loads are in
        flight while the rest of the turn computes). The turn's copy writes the registers into
        the shared tile; everything else is as without the prefetch."""
        t, w, V = cand
        buf, lov, nx = self.new("pf"), self.new("lo"), self.new("nx")
        domain = shape2(t.sym.type.shape)
        steps = -(-(domain[0] * domain[1] // V) // self.T)
        self.prefetch_var = s.var
        self.emit(f"// line {t.span.line + self.line_offset}'s copy of {w.base.name} is loaded a turn ahead, into "
                  f"registers ({steps} chunk(s) of {V} a thread), while the turn before it computes")
        self.emit(f"__align__(16) {C.STORE_C[t.sym.type.dtype]} {buf}[{steps}][{V}];")
        self.emit(f"const long long {lov} = {lo};")
        self.emit(f"if ({lov} < {hv}) {{")
        self.ind += 1
        self.emit_prefetch(cand, lov, buf)
        self.close()
        self.emit(f"for (long long {v} = {lov}; {v} < {hv}; {v} += {step}) {{")
        self.ind += 1
        self.loop_ctx.append({"mode": "native", "wrapped": False, "brk": None})
        for st in s.body:
            if st is t:
                self.prefetched = (id(t), buf)
                self.stmt(st)
                self.prefetched = None
                self.emit(f"// the next turn's chunks of {w.base.name}, in flight while this turn computes")
                self.emit(f"if ({v} + {step} < {hv}) {{")
                self.ind += 1
                self.emit(f"const long long {nx} = {v} + {step};")
                self.emit_prefetch(cand, nx, buf)
                self.close()
            else:
                self.stmt(st)
        self.loop_ctx.pop()
        self.close()

    def vector_elem(self, buf, q, v, dt):
        """Element v of a loaded vector (row q of the buffer; q None: a 1-D buffer) as a value:
        16-bit floats are read from the 32-bit word that holds them (one shift or mask to widen)."""
        b = buf if q is None else f"{buf}[{q}]"
        if dt == "bf16":
            return f"tnb_b2f_w(((const unsigned*){b})[{v} >> 1], {v} & 1)"
        if dt == "f16":
            return f"tnb_h2f_w(((const unsigned*){b})[{v} >> 1], {v} & 1)"
        return C.load_value(f"{b}[{v}]", dt)

    def chunk_inside(self, rg: Region, i, j0, V, domain):
        """C condition (or True) that elements (i, j0 .. j0 + V - 1) all lie in region rg."""
        R, Cc = domain
        conds = []
        if not (_is_int(rg[0]) and rg[0] <= 0):
            conds.append(f"{i} >= {rg[0]}")
        if not (_is_int(rg[1]) and rg[1] >= R):
            conds.append(f"{i} < {rg[1]}")
        if not (_is_int(rg[2]) and rg[2] <= 0):
            conds.append(f"{j0} >= {rg[2]}")
        if not (_is_int(rg[3]) and rg[3] >= Cc):
            conds.append(f"{j0} + {V} <= {rg[3]}")
        return " && ".join(conds) if conds else True

    def elem_value(self, value, at, domain=None):
        """The value at element `at` of a statement's iteration space `domain`; a value of a
        smaller shape ([1, C], [R, 1]) is broadcast to it, as operands are through child_at."""
        if not isinstance(value.type, ir.TileT):
            return self.scalar(value)
        if domain is not None and shape2(value.type.shape) != tuple(domain):
            whole = ir.TileT(value.type.dtype, tuple(domain))
            return self.ev(value, self.child_at(_Shaped(whole), value, at))
        return self.ev(value, at)

    def prepare_regions(self, e):
        if isinstance(e.type, ir.TileT):
            self.region(e)
        for c in ir.sub_exprs(e):
            if isinstance(c.type, ir.TileT):
                self.prepare_regions(c)

    def masked(self, mask: Optional[Region], at, domain, body):
        """Emit body(at) for one element, inside an `if` on the mask's valid region unless the
        region is known to hold it (nothing at all when it is known not to)."""
        cond = self.in_region(mask, at.i, at.j, domain) if mask is not None else True
        if cond is False:
            return
        if cond is not True:
            self.emit(f"if ({cond}) {{")
            self.ind += 1
        body(at)
        if cond is not True:
            self.ind -= 1
            self.emit("}")

    def sweep(self, domain, lay, V, body, mask: Optional[Region], hoist=None):
        """Run body(at) for every element of the domain this thread owns."""
        R, Cc = domain

        def with_mask(at):
            self.masked(mask, at, domain, body)

        if isinstance(lay, gemm_sm90.WgmmaLayout):
            gemm_sm90.emit_sweep(self, lay, with_mask)
            return
        if isinstance(lay, (MmaLayout, RowLayout)):
            self.emit("// elements of the mma.sync fragments this thread holds")
            self.frag_sweep(lay, with_mask)
            return
        if isinstance(lay, ChunkLayout):
            V = lay.V
            nch = lay.nchunks
            s, k = self.new("s"), self.new("k")
            self.emit(f"// partition: chunk k of {V} row element(s) -> thread k % {self.T} (register slots unrolled)")
            self.emit("#pragma unroll")
            self.emit(f"for (int {s} = 0; {s} < {lay.steps}; ++{s}) {{")
            self.ind += 1
            self.emit(f"const int {k} = tnb_tid + {s} * {self.T};")
            cond = f"if ({k} < {nch}) {{" if nch % self.T else "{"
            self.emit(cond)
            self.ind += 1
            self.chunk_body(domain, V, k, lambda at: with_mask(at), slot_base=f"{s} * {V}", layout=lay)
            self.ind -= 1
            self.emit("}")
            self.ind -= 1
            self.emit("}")
            return
        nch = R * Cc // V
        k = self.new("k")
        self.emit(f"// partition: chunk k of {V} row element(s) -> thread k % {self.T}")
        self.emit(f"for (int {k} = tnb_tid; {k} < {nch}; {k} += {self.T}) {{")
        self.ind += 1
        self.chunk_body(domain, V, k, lambda at: with_mask(at), slot_base=None, layout=None, hoist=hoist)
        self.ind -= 1
        self.emit("}")

    def chunk_body(self, domain, V, k, body, slot_base, layout, hoist=None):
        R, Cc = domain
        per_row = Cc // V
        i, j0 = self.new("i"), self.new("j")
        if R == 1:
            self.emit(f"const int {i} = 0, {j0} = {k} * {V};" if V > 1 else f"const int {i} = 0, {j0} = {k};")
        elif per_row == 1:
            self.emit(f"const int {i} = {k}, {j0} = 0;")
        else:
            self.emit(f"const int {i} = {k} / {per_row}, {j0} = ({k} % {per_row}) * {V};")
        if hoist is not None and V > 1:
            self.hoist_row_reductions(hoist, i, domain)
        if V == 1:
            body(At(i, j0, f"{slot_base}" if slot_base else None, layout, True))
            return
        v, j = self.new("v"), self.new("j")
        self.emit("#pragma unroll")
        self.emit(f"for (int {v} = 0; {v} < {V}; ++{v}) {{")
        self.ind += 1
        self.emit(f"const int {j} = {j0} + {v};")
        body(At(i, j, f"{slot_base} + {v}" if slot_base else None, layout, True))
        self.ind -= 1
        self.emit("}")

    # ---- cooperative reductions: a warp's lanes share the rows of the outputs it owns
    def coop_reduces(self, value, domain, V, lay):
        """The reductions a warp's lanes share (the analysis' rule, `smem.identity_reductions`,
        which also sizes their partials): element-wise chunks over an extent of 1 only."""
        if lay is not None or V != 1 or not isinstance(value.type, ir.TileT):
            return []
        R, Cc = domain
        if R != 1 and Cc != 1:
            return []
        return identity_reductions(value, domain)

    # ---- CTA-wide row reductions: every thread reduces the chunks it owns, then shuffles, then
    # one combine across warps through a small shared scratch
    def reduce_vector_leaves(self, x, xshape, V):
        """The leaves of a reduction's operand read as V-element vectors at the chunk's own
        coordinates: those the analysis gives vector V (`ownership`, row_reduce_widths: whole
        shared tiles, and tensor windows whose every chunk provably starts on a multiple of V
        elements; the vector load of a chunk that crosses the window's valid region falls back
        to element loads)."""
        return [(e, loc) for e, loc in self.vector_leaves(x, xshape)
                if V > 1 and loc.kind in ("global", "shared") and self.access_vector(e) == V]

    def block_reduce_widths(self, domain, reds, s) -> Optional[List[int]]:
        """Per reduction, the chunk width V of the CTA-wide path, or None when it does not apply;
        both are the analysis'. Whether it applies: its shared-memory map holds the partials'
        arrays of this copy of the statement (`analysis.smem`: row reductions whose row of Cx
        elements is a multiple of the CTA's threads, so that, by the partition rule, chunk
        k -> thread k % T, every thread owns the same number of chunks of every row and each warp
        works on one row at a time, within the kernel's shared-memory limit). The width: the
        statement plan's (`ownership`, row_reduce_widths: the widest V whose Cx / V chunks are
        still a multiple of the threads and whose operands read as V-element vectors)."""
        copies = self.smem.partials.get(id(s), ())
        k = self.partial_copies.get(id(s), 0)
        self.partial_copies[id(s)] = k + 1
        if k >= len(copies) or not copies[k]:
            return None
        sp = self.stmt_plan(s)
        if sp is None or not sp.row_reductions:
            return None
        out = []
        for red in reds:
            V = sp.reduce_width(red)
            if V is None:
                return None
            out.append(V)
        return out

    def in_loop(self, s) -> bool:
        ids = getattr(self, "_loop_ids", None)
        if ids is None:
            ids = set()
            for st in ir.walk_stmts(self.kir.body):
                if isinstance(st, (ir.For, ir.While)):
                    ids.update(id(x) for x in ir.walk_stmts(st.body))
            self._loop_ids = ids
        return id(s) in ids

    def has_reduce_or_dot(self, e) -> bool:
        if isinstance(e, (ir.Reduce, ir.Dot)):
            return True
        return any(self.has_reduce_or_dot(c) for c in ir.sub_exprs(e))

    def reduce_chunk(self, red, x, xr, xshape, dt, acc, row, j0, V, bufs, checked: bool):
        """acc <- acc combined with the chunk's V elements of x's row `row` from column j0
        (`checked`: skip elements outside x's valid columns)."""
        vv = self.new("v")
        if V > 1:
            self.emit("#pragma unroll")
            self.emit(f"for (int {vv} = 0; {vv} < {V}; ++{vv}) {{")
            self.ind += 1
            j = self.new("j")
            self.emit(f"const int {j} = {j0} + {vv};")
        else:
            j = j0
        saved = dict(self.pre)
        for e, loc, buf, b in bufs:
            val = self.vector_elem(buf, None, vv, loc.dtype) if V > 1 else C.load_value(f"{buf}[{vv}]", loc.dtype)
            cond = self.in_region(b, row, j, shape2(loc.shape))
            if cond is False:
                val = C.zero(C_val_dt(loc.dtype))
            elif cond is not True:
                val = f"(({cond}) ? {val} : {C.zero(C_val_dt(loc.dtype))})"
            self.pre[id(e)] = val
        cond = self.in_region((0, 1, xr[2], xr[3]), 0, j, (1, xshape[1])) if checked else True
        if cond is not False:
            if cond is not True:
                self.emit(f"if ({cond}) {{")
                self.ind += 1
            v = self.ev(x, At(row, j, None, None, True))
            self.emit(f"{acc} = {self.reduce_combine(red.op, dt, acc, C.convert(v, x.type.dtype, dt))};")
            if cond is not True:
                self.ind -= 1
                self.emit("}")
        self.pre = saved
        if V > 1:
            self.ind -= 1
            self.emit("}")

    def block_sweep(self, s, domain, value, reds, widths, write, mask):
        R, _ = domain
        NW = self.T // 32
        vtypes = {4: "unsigned", 8: "uint2", 16: "uint4"}
        p = self.plan.positions.get(id(s))
        before = any(b.where == "before" for b in self.plan.barriers.get(p, ()))
        if self.in_loop(s) and not before:   # (an analysis barrier right before the statement does the same)
            self.emit("__syncthreads();  // codegen-internal: the previous turn's owners have read this reduction's "
                      "scratch before the warps write it again")
        saved = dict(self.pre)
        accs = []
        for red, V in zip(reds, widths):
            x = red.x
            xr = self.region(x)
            dt = red.type.dtype
            vc = C.VALUE_C[dt]
            xshape = shape2(x.type.shape)
            per_row = xshape[1] // V
            steps = per_row // self.T
            sc = self.new("rsc")
            self.emit(f"__shared__ {vc} {sc}[{R * NW}];  // codegen-internal scratch: one partial per (row, warp)")
            self.emit(f"// {red.op} over each row: chunk k of {V} row elements -> thread k % {self.T} (the partition), "
                      f"{steps} chunk(s) a row per thread, reduced in registers,")
            self.emit("// then across the warp with shuffles; lane 0 leaves the warp's partial in the scratch")
            row = self.new("row")
            self.emit(f"for (int {row} = 0; {row} < {R}; ++{row}) {{")
            self.ind += 1
            acc = self.new("red")
            self.emit(f"{vc} {acc} = {self.reduce_ident(red.op, dt)};")
            rowok = self.in_region((xr[0], xr[1], 0, 1), row, 0, (R, 1))
            if rowok is not False:
                if rowok is not True:
                    self.emit(f"if ({rowok}) {{")
                    self.ind += 1
                st = self.new("s")
                self.emit("#pragma unroll")
                self.emit(f"for (int {st} = 0; {st} < {steps}; ++{st}) {{")
                self.ind += 1
                j0 = self.new("j")
                self.emit(f"const int {j0} = (tnb_tid + {st} * {self.T}) * {V};")
                inner = dict(self.pre)
                bufs = []
                if V > 1:
                    seen = {}
                    for e, loc in self.reduce_vector_leaves(x, xshape, V):
                        key = self.leaf_key(e, loc)
                        if key in seen:
                            bufs.append((e,) + seen[key][1:])
                            continue
                        buf = self.new("vin")
                        nb = C.itemsize(loc.dtype) * V
                        self.emit(f"__align__(16) {C.STORE_C[loc.dtype]} {buf}[{V}];")
                        load = f"*({vtypes[nb]}*){buf} = *(const {vtypes[nb]}*)({loc.ptr} + {loc.index(row, j0)});"
                        if loc.kind == "global":
                            b = self.region(e)
                            if id(e) in self.hints.loads:      # the last touch of re-read data
                                load = cache_hints.load_text(vtypes[nb], buf, f"{loc.ptr} + {loc.index(row, j0)}")
                            self.chunk_load(load, loc, b, row, j0, V, lambda v, buf=buf: f"{buf}[{v}]")
                        else:
                            self.emit(load)
                            b = self.loc_bounds(loc, False)
                        bufs.append((e, loc, buf, b))
                        seen[key] = bufs[-1]
                whole = self.chunk_inside((0, 1, xr[2], xr[3]), 0, j0, V, (1, xshape[1]))
                nested = self.has_reduce_or_dot(x)
                if whole is not True and not nested:
                    self.emit(f"if ({c_cond(whole)}) {{  // the whole chunk lies in the valid region")
                    self.ind += 1
                    self.reduce_chunk(red, x, xr, xshape, dt, acc, row, j0, V, bufs, checked=False)
                    self.ind -= 1
                    self.emit("} else {")
                    self.ind += 1
                    self.reduce_chunk(red, x, xr, xshape, dt, acc, row, j0, V, bufs, checked=True)
                    self.ind -= 1
                    self.emit("}")
                else:
                    self.reduce_chunk(red, x, xr, xshape, dt, acc, row, j0, V, bufs, checked=whole is not True)
                self.pre = inner
                self.ind -= 1
                self.emit("}")
                if rowok is not True:
                    self.ind -= 1
                    self.emit("}")
            off = self.new("off")
            comb = self.reduce_combine(red.op, dt, acc, f"__shfl_xor_sync(0xffffffffu, {acc}, {off})")
            self.emit("#pragma unroll")
            self.emit(f"for (int {off} = 16; {off} > 0; {off} >>= 1) {acc} = {comb};")
            self.emit(f"if (tnb_lane == 0) {sc}[{row} * {NW} + tnb_warp] = {acc};")
            self.ind -= 1
            self.emit("}")
            accs.append((red, sc, dt))
        self.emit("__syncthreads();  // codegen-internal: the warps' partials in the reduction scratch are read by the "
                  "owner of each output")
        o = self.new("o")
        self.emit(f"// output k -> thread k % {self.T} (the partition of the [{R}, 1] result): combine the {NW} warps' "
                  "partials in warp order")
        self.emit(f"for (int {o} = tnb_tid; {o} < {R}; {o} += {self.T}) {{")
        self.ind += 1
        for red, sc, dt in accs:
            acc = self.new("red")
            w = self.new("w")
            self.emit(f"{C.VALUE_C[dt]} {acc} = {sc}[{o} * {NW}];")
            comb = self.reduce_combine(red.op, dt, acc, f"{sc}[{o} * {NW} + {w}]")
            self.emit(f"for (int {w} = 1; {w} < {NW}; ++{w}) {acc} = {comb};")
            self.pre[id(red)] = acc
        self.masked(mask, At(o, 0, None, None, True), domain,
                    lambda at: write(at, self.elem_value(value, at), value.type.dtype))
        self.pre = saved
        self.ind -= 1
        self.emit("}")

    def coop_sweep(self, domain, value, reds, write, mask):
        R, Cc = domain
        n_out = R * Cc
        base, nw, S, o = self.new("base"), self.new("nw"), self.new("S"), self.new("o")
        self.emit(f"// outputs owned by the partition (output k -> thread k % {self.T}); the lanes of the owning")
        self.emit("// warp split each output's row, then combine with warp shuffles (no barrier needed)")
        self.emit(f"for (int {base} = 0; {base} < {n_out}; {base} += {self.T}) {{")
        self.ind += 1
        self.emit(f"const int {nw} = min(32, max(0, {n_out} - {base} - tnb_warp * 32));  // outputs this warp owns")
        self.emit(f"if ({nw} > 0) {{")
        self.ind += 1
        self.emit(f"int {S} = 1; while ({S} < {nw}) {S} <<= 1;  // lanes l, l + {S}, ... share output l")
        self.emit(f"const int {o} = {base} + tnb_warp * 32 + (tnb_lane & ({S} - 1));")
        self.emit(f"const bool {o}_mine = (tnb_lane & ({S} - 1)) < {nw};")
        saved = dict(self.pre)
        for red in reds:
            x = red.x
            xr = self.region(x)
            dt = red.type.dtype
            acc = self.new("red")
            kk = self.new("k")
            self.emit(f"{C.VALUE_C[dt]} {acc} = {self.reduce_ident(red.op, dt)};")
            if red.axis == 1:
                okc = f"{o}_mine && {o} >= {xr[0]} && {o} < {xr[1]}"
                lo, hi, pos = xr[2], xr[3], (o, kk)
            else:
                okc = f"{o}_mine && {o} >= {xr[2]} && {o} < {xr[3]}"
                lo, hi, pos = xr[0], xr[1], (kk, o)
            self.emit(f"if ({okc}) for (int {kk} = {lo} + tnb_lane / {S}; {kk} < {hi}; {kk} += 32 / {S}) {{")
            self.ind += 1
            v = self.ev(x, At(pos[0], pos[1], None, None, False))
            self.emit(f"{acc} = {self.reduce_combine(red.op, dt, acc, C.convert(v, x.type.dtype, dt))};")
            self.ind -= 1
            self.emit("}")
            off = self.new("off")
            comb = self.reduce_combine(red.op, dt, acc, f"__shfl_xor_sync(0xffffffffu, {acc}, {off})")
            self.emit(f"for (int {off} = {S}; {off} < 32; {off} <<= 1) {acc} = {comb};")
            self.pre[id(red)] = acc
        self.emit("if (tnb_lane < " + nw + ") {")
        self.ind += 1
        i, j = (o, 0) if Cc == 1 else (0, o)
        self.masked(mask, At(i, j, None, None, True), domain,
                    lambda at: write(at, self.elem_value(value, at), value.type.dtype))
        self.pre = saved
        self.ind -= 1
        self.emit("}")
        self.ind -= 1
        self.emit("}")
        self.ind -= 1
        self.emit("}")
    # (tensor cores: tilenb/codegen/mma.py, mixed into this class)

def C_val_dt(dt):
    return dt
