"""Random valid tile-language programs, their inputs and their numpy oracle: the differential
fuzzer's generator.

`program(seed, index)` is always the same `Program` (text, inputs, grid, oracle) for the same
two numbers and the same version of this file: everything is drawn from
`numpy.random.default_rng([seed, index])`. A program is one kernel made of independent
*snippets*; each writes its own output tensors (pre-filled with a sentinel, so an element
written where it should not be, or not written where it should, shows) and the CTAs of the grid
write disjoint parts of them (so the result does not depend on the order the CTAs run in).

What the snippets cover (the names are the `features` a program lists, counted by the GPU
script): tile windows of tensors with constant, runtime and negative starts (`rt_start`,
`neg_start`), halos (`halo`), partial tiles (`partial`: shapes that are multiples of nothing,
tensors with runtime dimensions), tiles in every element type (`dt_<type>`), `var`/`let` tiles
and `let` views of tensors and of tiles (`view`, `tile_view`), windows of tiles with constant
and runtime starts (`tile_window`, `rt_tile_window`), filled tiles written through windows
(`fill_window`), `flat` (`flat`, `flat_partial`), row and column reductions (`reduce`),
`dot`/`dot_t` in f16, bf16, f32, f64 and i8 (`dot_<type>`), K loops that accumulate dots
(`gemm_loop`), `transpose`, `where`, conversions (`convert`), math functions (`math`),
integer wraparound, shifts and C division (`int_ops`), uniform element reads (`uniform_elem`),
expression and statement functions (`fn`), loops that carry tiles (`loop_carry`, `while`,
`unroll`), uniform `if` (`if`), per-thread code with element reads and writes, loops with break
and continue (`thread`), per-thread writes of tile elements with `barrier()` (`tile_elems`),
global read-back within a CTA (`gmem_hazard`), atomics (`atomic_<type>`), scalar parameters
(`scalar_param`), broadcast stores (`bcast_store`, `bcast_store_neg`), `@autotune`
(`autotune`), `@registers` (`registers`), several CTAs (`grid2d`, `multi_cta`); large tiles
with `@dynshared` (`big`), whole-row `:` slices (`whole_rows`), an online-softmax attention
loop (`attention`), loops reading the carried tile at other elements (`loop_read_other`),
per-thread reads of a tile a tile statement writes (`thread_reads_tile`), the forms of global
read-back (`gmem_raw`, `gmem_war`, `gmem_inplace`, `gmem_elem`, `gmem_atomic`), thread block
clusters with cluster reductions (`cluster`), reductions and dots of broadcast slices
(`reduce_bcast`), tiles written and never read (`dead_tile`), the index tiles `rows` / `cols`
(`index_tile`).

The oracle (`Program.expected`) runs the program with tests/fuzz/model.py, written from
docs/spec.md without the CPU executor; it also gives each output element an error bound (the
spec's per-operation tolerances propagated through the expression), which every comparison of
two backends uses (`compare`).
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import model as M
from .nodes import (CTX_BX, CTX_BY, Bin, Bind, Call, Conv, Dot, Elem, Env, For, If, IndexTile, Ix, IxVal, LetIx, Lit,
                    Load, Node, Param, Raw, Red, Ref, Slot, Store, Stmt, Tr, Un, Where, While, Win)

GENERATOR_VERSION = 2   # 2: index tiles (rows / cols) among the i32 leaves
SENTINEL = {"float": -1024.0, "int": 77}

# Features whose programs hit a known bug (tests/fuzz/FINDINGS.md): K* were known before the
# fuzzer and are being fixed elsewhere, F* are the fuzzer's own findings.
KNOWN_BUGS: dict = {
    # Every bug the fuzzer found is fixed (tests/fuzz/FINDINGS.md). A new finding gets a label here,
    # "name": "Fn: one line", until its fix lands; programs touching it then xfail (not strict).
}


# ---- the program ----------------------------------------------------------------------------
@dataclass
class Program:
    """One generated program: its text, inputs and oracle (see the module docstring)."""
    seed: int
    index: int
    kernel: str
    text: str
    threads: int
    grid: Optional[Tuple[int, ...]]             # None: the kernel's @grid
    tune: Dict[str, List[int]]
    params: List[Tuple[str, str, str]]          # (kind, name, dtype), kind "tensor" or "scalar"
    values: Dict[str, object]
    dims: Dict[str, int]
    outputs: List[str]
    unknown: List[str]                          # outputs the oracle cannot say (compared backend to backend)
    features: frozenset
    stmts: List[Stmt]
    grid_of: object = None                      # variant -> grid, for @grid kernels
    idempotent: bool = True

    @property
    def name(self) -> str:
        return f"{self.seed}:{self.index}"

    @property
    def known(self) -> List[str]:
        """The known-bug labels (KNOWN_BUGS) this program's features touch."""
        return sorted(f for f in self.features if f in KNOWN_BUGS)

    def variants(self) -> List[dict]:
        """Every @autotune combination, in the kernel's order ([{}] without @autotune)."""
        out = [{}]
        for k, vals in self.tune.items():
            out = [dict(d, **{k: v}) for d in out for v in vals]
        return out

    def args(self) -> list:
        """Fresh copies of the launch arguments, in parameter order."""
        out = []
        for kind, name, _ in self.params:
            v = self.values[name]
            out.append(v.copy() if isinstance(v, np.ndarray) else v)
        return out

    def tensor_types(self) -> Dict[str, str]:
        return {n: dt for k, n, dt in self.params if k == "tensor"}

    def launch_grid(self, variant: Optional[dict] = None) -> Tuple[int, ...]:
        if self.grid is not None:
            return self.grid
        return self.grid_of(variant or self.variants()[0])

    def expected(self, variant: Optional[dict] = None) -> Dict[str, Tuple[np.ndarray, np.ndarray]]:
        """The oracle: each output's values and per-element error bound, for `variant`."""
        variant = variant or self.variants()[0]
        grid = tuple(self.launch_grid(variant)) + (1, 1)
        scal = {n: v for n, v in self.values.items() if not isinstance(v, np.ndarray)}
        scal.update(self.dims)
        tensors = {n: self.values[n].copy() for k, n, _ in self.params if k == "tensor"}
        terr = {n: np.zeros(a.shape) for n, a in tensors.items()}
        tty = self.tensor_types()
        with np.errstate(all="ignore"):
            for bz in range(grid[2]):
                for by in range(grid[1]):
                    for bx in range(grid[0]):
                        env = Env(scal, (bx, by, bz), grid[:3], self.threads, variant)
                        env.tensors, env.terr, env.tty = tensors, terr, tty
                        for s in self.stmts:
                            s.run(env)
        return {n: (tensors[n], terr[n]) for n in self.outputs}

    def launch(self, module, variant: Optional[dict] = None, **kw) -> Dict[str, np.ndarray]:
        """Run on a compiled module's backend with fresh arguments; the outputs by name."""
        args = self.args()
        k = getattr(module, self.kernel)
        if variant is not None:
            kw["variant"] = variant
        if self.grid is not None:
            k[self.grid](*args, **kw)
        else:
            k(*args, **kw)
        names = [n for _, n, _ in self.params]
        return {n: np.asarray(args[names.index(n)]) for n in self.outputs}

    def reproducer(self, note: str = "") -> str:
        """A standalone Python script that rebuilds this program's inputs (no fuzzer needed),
        runs it on the CPU executor and on the CUDA backend where one is usable, and prints
        each output's largest difference."""
        lines = ['"""A tilenb differential-fuzzer reproducer: program %s (generator version %d).' % (self.name, GENERATOR_VERSION)]
        if note:
            lines += [textwrap.fill(note, 96)]
        lines += ['Features: ' + ", ".join(sorted(self.features)), '"""',
                  "import numpy as np, ml_dtypes, tilenb", "", f"SOURCE = r'''{self.text}'''", "", "ARGS = {"]
        for kind, name, dt in self.params:
            v = self.values[name]
            if isinstance(v, np.ndarray):
                lines.append(f"    {name!r}: np.array({_list_text(v)}, dtype={_np_name(dt)}).reshape({tuple(v.shape)!r}),")
            else:
                lines.append(f"    {name!r}: {v!r},")
        lines += ["}", f"OUTPUTS = {self.outputs!r}",
                  f"GRID = {self.grid!r}  # None: the kernel's @grid", "",
                  "def run(backend, variant=None):",
                  "    mod = tilenb.compile(SOURCE, backend=backend)",
                  "    args = [a.copy() if isinstance(a, np.ndarray) else a for a in ARGS.values()]",
                  f"    k = mod.{self.kernel}",
                  "    kw = {} if variant is None else {'variant': variant}",
                  "    (k[GRID] if GRID is not None else k)(*args, **kw)",
                  "    return dict(zip(ARGS, args))", "",
                  "if __name__ == '__main__':",
                  "    cpu = run('cpu')",
                  "    try:",
                  "        gpu = run('cuda')",
                  "    except Exception as e:  # no GPU here, or the GPU run failed",
                  "        print('cuda:', type(e).__name__, e)",
                  "        gpu = None",
                  "    for n in OUTPUTS:",
                  "        print(n, 'cpu:', cpu[n].ravel()[:16])",
                  "        if gpu is not None:",
                  "            d = np.abs(cpu[n].astype(np.float64) - gpu[n].astype(np.float64))",
                  "            print(n, 'gpu:', gpu[n].ravel()[:16], 'max |cpu - gpu|:', np.nanmax(d) if d.size else 0)",
                  ""]
        return "\n".join(lines)


def _np_name(dt):
    return "ml_dtypes.bfloat16" if dt == "bf16" else f"np.{M.NP[dt].name}"


def _list_text(v: np.ndarray) -> str:
    flat = v.ravel()
    if v.dtype == M.NP["bf16"]:
        flat = flat.astype(np.float32)
    if np.issubdtype(flat.dtype, np.floating):
        return "[" + ", ".join(repr(float(x)) for x in flat) + "]"
    return "[" + ", ".join(str(int(x)) for x in flat) + "]"


# ---- comparison ---------------------------------------------------------------------------
@dataclass
class Diff:
    output: str
    count: int
    total: int
    first: tuple
    ref: object
    got: object
    excess: float

    def __str__(self):
        return (f"{self.output}: {self.count} of {self.total} elements differ; first at {self.first}: "
                f"expected {self.ref}, got {self.got}")


def compare(prog: Program, ref: Dict[str, np.ndarray], got: Dict[str, np.ndarray],
            err: Optional[Dict[str, np.ndarray]] = None) -> List[Diff]:
    """The outputs of `got` that differ from `ref` beyond tolerance (model.close): integers
    exactly; floats within twice the oracle's error bound `err` plus the spec's elementwise
    tolerance."""
    out = []
    tys = prog.tensor_types()
    for n in prog.outputs:
        r, g = np.asarray(ref[n]), np.asarray(got[n])
        ok, bad, excess = M.close(r, g, tys[n], None if err is None else err.get(n))
        if not ok:
            if bad is None:
                out.append(Diff(n, -1, r.size, (), r.shape, g.shape, excess))
                continue
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            out.append(Diff(n, int(bad.sum()), r.size, idx, r[idx], g[idx], excess))
    return out


# ---- the generator ------------------------------------------------------------------------
FLOAT_FAMS = ("f32", "f64")
INT_FAMS = ("i32", "i64")


@dataclass
class TileVar:
    name: str
    ty: str
    shape: tuple
    exact: bool
    mag: float
    kind: str              # "var", "let", "view", "reg"
    view: Optional[Node] = None


class Gen:
    """Builds one program; see `program`."""

    def __init__(self, seed: int, index: int):
        self.seed, self.index = seed, index
        self.rng = np.random.default_rng([seed, index])
        self.kernel = f"fz{seed}_{index}"
        self.params: List[Tuple[str, str, str]] = []
        self.decls: List[str] = []
        self.values: Dict[str, object] = {}
        self.dims: Dict[str, int] = {}
        self.outputs: List[str] = []
        self.unknown: List[str] = []
        self.features = set()
        self.stmts: List[Stmt] = []
        self.fns: List[str] = []
        self.registers: List[str] = []
        self.tune: Dict[str, List[int]] = {}
        self.idempotent = True
        # a quarter of the programs use large tiles (vector accesses, asynchronous copies, tensor
        # cores, @dynshared); the others small, odd ones
        self.big = self.chance(0.25)
        if self.big:
            self.T = int(self.pick([128, 256, 512, 1024], [2, 3, 1, 1]))
            self.G = int(self.pick([1, 2, 3], [2, 2, 1]))
            self.features.add("big")
        else:
            self.T = int(self.pick([32, 64, 128, 256], [1, 2, 2, 2]))
            self.G = int(self.pick([1, 2, 3, 4], [2, 3, 2, 1]))
        self.GY = 1
        self.readback_ok = True

    # -- random helpers
    def pick(self, items, weights=None):
        if weights is not None:
            w = np.asarray(weights, float)
            return items[int(self.rng.choice(len(items), p=w / w.sum()))]
        return items[int(self.rng.integers(len(items)))]

    def chance(self, p):
        return bool(self.rng.random() < p)

    def ri(self, lo, hi):
        """An int in [lo, hi]."""
        return int(self.rng.integers(lo, hi + 1))

    # -- parameters
    def dim(self, base: str, value: int, row_length=False) -> str:
        name = f"{base}{len(self.dims)}"
        if row_length:
            value = max(4, -(-value // 4) * 4)
        self.dims[name] = int(value)
        return name

    def data(self, dt, shape):
        r = self.rng
        if dt in ("f16", "bf16", "f32", "f64"):
            a = r.uniform(-2.0, 2.0, shape)
            if self.chance(0.3):
                a = np.round(a * 4) / 4          # exact in every float type: ties and equal values
            return a.astype(M.NP[dt])
        lo, hi = {"i8": (-100, 100), "i32": (-1000, 1000), "i64": (-10 ** 6, 10 ** 6), "u8": (0, 255),
                  "u16": (0, 65535), "u32": (0, 10 ** 6)}[dt]
        a = r.integers(lo, hi + 1, shape)
        if dt in ("i32", "i64") and self.chance(0.2):
            info = np.iinfo(M.NP[dt])
            flat = a.reshape(-1)
            if flat.size:
                flat[r.integers(flat.size, size=max(1, flat.size // 8))] = r.choice([info.max, info.min, info.max - 1])
        return a.astype(M.NP[dt])

    def tensor(self, prefix, dt, dims: Sequence, role="in", fill=None) -> str:
        """A tensor parameter; `dims` entries are ints (literal extents) or dim names."""
        name = f"{prefix}{len(self.params)}"
        shape = tuple(self.dims[d] if isinstance(d, str) else d for d in dims)
        spec = ", ".join(str(d) for d in dims)
        self.params.append(("tensor", name, dt))
        self.decls.append(f"{name}: tensor<{dt}>[{spec}]")
        if role in ("in", "inout"):
            self.values[name] = self.data(dt, shape)
            if role == "inout":         # read and written: compared as an output
                self.outputs.append(name)
        else:
            kind = "float" if M.is_float(dt) else "int"
            v = SENTINEL[kind] if fill is None else fill
            self.values[name] = np.full(shape, v).astype(M.NP[dt])
            self.outputs.append(name)
        self.features.add(f"dt_{dt}")
        if any(isinstance(d, str) for d in dims):
            self.features.add("partial")
        if 0 in shape:
            self.features.add("zero_extent")
        return name

    def scalar(self, dt, value) -> str:
        name = f"s{len(self.params)}"
        self.params.append(("scalar", name, dt))
        self.decls.append(f"{name}: {dt}")
        self.values[name] = value
        self.features.add("scalar_param")
        return name

    # -- text
    def text(self) -> str:
        out = []
        for f in self.fns:
            out.append(f)
        if self.fns:
            out.append("")
        if self.tune:
            out.append("@autotune(" + ", ".join(f"{k} in [{', '.join(map(str, v))}]" for k, v in self.tune.items()) + ")")
        out.append(f"@launch({self.T})")
        if self.cluster:
            out.append(f"@cluster({self.cluster})")
        if self.big:
            out.append("@dynshared")
        if self.registers:
            out.append(f"@registers({', '.join(self.registers)})")
        if self.grid_text:
            out.append(f"@grid({self.grid_text})")
        sig = ",\n    ".join(self.decls)
        out.append(f"kernel {self.kernel}(\n    {sig}) {{")
        for s in self.stmts:
            out += s.lines("  ")
        out.append("}")
        return "\n".join(out) + "\n"

    grid_text = None
    cluster = 0

    def build(self) -> Program:
        form = self.pick(["snippets", "autotune", "gemm", "cluster"], [12, 1.5, 1.5, 1])
        if form == "autotune":
            self.autotune_program()
        elif form == "cluster":
            self.cluster_program()
        elif form == "gemm":
            self.gemm_loop(0)
        else:
            n = self.pick([1, 2, 3], [3, 3, 1])
            kinds = ["expr", "expr", "expr", "tilewin", "loop", "thread", "tile_elems", "atomic", "readback", "flat",
                     "views", "gemm", "if", "attention", "loop2", "thread_tiles"]
            weights = [3, 3, 3, 2, 2, 2, 1.5, 1.5, 1.5, 1, 1.5, 1, 1, 1, 1.5, 1.2]
            chosen = [self.pick(kinds, weights) for _ in range(n)]
            if set(chosen) <= {"expr", "tilewin", "views", "if"} and self.chance(0.2):
                self.GY = 2
                self.features.add("grid2d")
            for k, kind in enumerate(chosen):
                getattr(self, "snip_" + kind)(k)
        if self.G * self.GY > 1:
            self.features.add("multi_cta")
        grid = None if self.grid_text else ((self.G,) if self.GY == 1 else (self.G, self.GY))
        return Program(self.seed, self.index, self.kernel, self.text(), self.T, grid, dict(self.tune), self.params,
                       self.values, self.dims, self.outputs, self.unknown, frozenset(self.features), self.stmts,
                       getattr(self, "grid_of", None), self.idempotent)

    # ---- snippet: a tile expression stored into tensors -------------------------------------
    def row_base(self, k, R, axis_ix=CTX_BX, axis="x"):
        """`let r = ctx.block.x * R + shift`: the first row of this CTA's block."""
        shift = self.pick(["zero", "const", "param"], [5, 2, 2])
        if shift == "zero":
            ix = axis_ix * R
        elif shift == "const":
            v = self.ri(-3, 3)
            ix = axis_ix * R + Ix.const(v)
            if v < 0:
                self.features.add("neg_start")
        else:
            v = self.ri(-3, 3)
            ix = axis_ix * R + Ix.name(self.scalar("i32", v))
            self.features.add("rt_start")
            if v < 0:
                self.features.add("neg_start")
        name = f"r{k}{axis}"
        self.stmts.append(LetIx(name, ix))
        return Ix.name(name)

    def snip_expr(self, k, body: Optional[List[Stmt]] = None):
        """Tile expressions (loads, windows, reductions, dots, ...) stored into new tensors."""
        S = ExprScope(self, k)
        S.setup()
        target = self.stmts if body is None else body
        # bindings: var / let tiles, views, typed tiles, filled tiles written through windows
        for _ in range(self.pick([0, 1, 2, 3], [2, 3, 2, 1])):
            S.bind(target)
        for _ in range(self.pick([1, 2, 3], [3, 2, 1])):
            S.store(target)
        S.finish(target)

    def snip_if(self, k):
        """A uniform if/else around tile statements (on a scalar parameter)."""
        v = self.ri(-2, 2)
        p = self.scalar("i32", v)
        then, other = [], []
        self.features.add("if")
        S = ExprScope(self, k)
        S.setup()
        for _ in range(self.pick([1, 2])):
            S.store(then)
        for _ in range(self.pick([0, 1])):
            S.store(other)
        self.stmts.append(If(f"{p} > 0", lambda env, p=p: env.scal[p] > 0, then, other))

    def snip_views(self, k):
        """let views of tensors and tiles, read through windows and written through."""
        S = ExprScope(self, k)
        S.setup()
        S.bind(self.stmts, force="view")
        S.bind(self.stmts, force=self.pick(["tile_view", "var", "view"]))
        for _ in range(self.pick([1, 2])):
            S.store(self.stmts)
        S.finish(self.stmts)

    def snip_tilewin(self, k):
        """A filled tile written through windows at constant or runtime starts, then read."""
        S = ExprScope(self, k)
        S.setup()
        S.bind(self.stmts, force="fill")
        if self.chance(0.5):
            S.bind(self.stmts, force="fill")
        for _ in range(self.pick([1, 2])):
            S.store(self.stmts)
        S.finish(self.stmts)

    def snip_flat(self, k):
        """flat(t): a [R, C] tile seen as one row, written and read through windows."""
        S = ExprScope(self, k)
        S.setup(rank=2)
        R, C = S.R, S.C
        name = f"f{k}"
        ty = self.pick(["f32", "f16", "i32"], [3, 1, 1])
        fam = "f32" if M.is_float(ty) else "i32"
        partial = self.chance(0.25)
        if partial:
            v = S.leaf_load((R, C), fam, force_dt=ty)
            self.stmts.append(Bind("var", name, v))
            tv = TileVar(name, ty, (R, C), True, v.mag, "var")
            self.features.add("flat_partial")
        else:
            fill = 0.0 if M.is_float(ty) else 0
            self.stmts.append(Bind("var", name, None, decl=ty, shape=(R, C), fill=fill))
            tv = TileVar(name, ty, (R, C), True, 0.0, "var")
        self.features.add("flat")
        n = self.ri(1, R * C)
        a = self.ri(0, R * C - n)
        val = S.gen((1, n), fam, 2)
        if M.is_float(ty) and not M.is_float(val.ty) or (not M.is_float(ty) and M.is_float(val.ty)):
            val = Conv(ty, val)
        if ty == "f16" and val.mag > 6e4:
            val = Un("tanh", val)
        self.stmts.append(Store(name, "flat", [Ix.const(0), Ix.const(a)], [1, n], val))
        tv.exact = tv.exact and val.exact
        tv.mag = max(tv.mag, val.mag)
        S.vars.append(tv)
        # read back: the whole tile, and a window of the flat row
        out = S.out_tensor(ty, (R, C))
        self.stmts.append(Store(out, "tensor", [S.r, S.c], [R, C], Ref(name, ty, (R, C), tv.exact, tv.mag)))
        m = self.ri(1, R * C)
        b = self.ri(0, R * C - m)
        o2 = self.tensor("Y", ty, [S.rows, max(m, 1) + self.ri(0, 3)], role="out")
        self.stmts.append(Store(o2, "tensor", [CTX_BX * 1, Ix.const(0)], [1, m],
                                Win(Ref(name, ty, (R, C), tv.exact, tv.mag), [Ix.const(0), Ix.const(b)], [1, m],
                                    flat=True)))

    # ---- snippet: loops that carry tiles ---------------------------------------------------
    def snip_loop(self, k):
        """acc = f(acc, X[.., j ..]) over a for / unrolled for / while loop."""
        S = ExprScope(self, k)
        S.setup(rank=2)
        R, C = S.R, S.C
        fam = self.pick(["f32", "f64", "i32"], [3, 1, 1])
        ty = {"f32": "f32", "f64": "f64", "i32": "i32"}[fam]
        name = f"acc{k}"
        L = self.ri(1, 4)
        jn = f"j{k}"
        init = self.pick(["fill", "load"], [2, 1])
        if init == "fill":
            self.stmts.append(Bind("var", name, None, decl=ty, shape=(R, C), fill=0 if fam == "i32" else 0.5))
            mag0 = 0.5
        else:
            v = S.leaf_load((R, C), fam, force_dt=ty)
            self.stmts.append(Bind("var", name, v))
            mag0 = v.mag
        self.features.add("loop_carry")
        acc = Ref(name, ty, (R, C), True, mag0)
        # the loop variable moves the window along the columns
        jix = Ix.name(jn)
        col = S.c + Ix(f"{jn} * {C}", lambda env, jn=jn, C=C: env.scal[jn] * C)
        cols = C * L + self.ri(-C, 2)
        xdt = self.pick([ty, "f16"] if fam == "f32" else [ty])
        X = self.tensor("X", xdt, [S.rows, max(1, cols)])
        load = Load(X, xdt, [S.r, col], [R, C], 2.0 if fam != "i32" else 2.0 ** 31)
        form = self.pick(["decay", "add", "max"])
        if fam == "i32":
            newv = Bin(self.pick(["+", "^", "max"]), acc, load)
            exact = True
        elif form == "decay":
            newv = Bin("+", Bin("*", acc, Lit(0.5, ty)), load)
            exact = False
        elif form == "add":
            newv = Bin("+", acc, Un("tanh", load) if self.chance(0.5) else load)
            exact = False
        else:
            newv = Bin("max", acc, load)
            exact = True
        acc.exact = exact
        acc.mag = mag0 + 2.0 * L if fam != "i32" else 1e9
        if newv.op == "+" and newv.a is acc and self.chance(0.5):
            body = [Store(name, "whole", [], [], newv.b, op="+")]       # acc += e
        else:
            body = [Store(name, "whole", [], [], newv)]
        loop = self.pick(["for", "unroll", "while", "nested"], [3, 1, 1, 1])
        reg = fam != "i32" and init == "fill" and self.chance(0.3) and not self.tune
        if loop == "for":
            st = For(jn, Ix.const(0), Ix.const(L), 1, body)
        elif loop == "unroll":
            st = For(jn, Ix.const(0), Ix.const(L), 1, body, unroll=self.ri(2, 3))
            self.features.add("unroll")
        elif loop == "while":
            st = While(jn, 0, Ix.const(L), 1, body)
            self.features.add("while")
        else:
            inner = f"i{k}"
            body2 = [Store(name, "whole", [], [], Bin("+", acc, Lit(1 if fam == "i32" else 0.25, ty)))]
            st = For(jn, Ix.const(0), Ix.const(L), 1, body + [For(inner, Ix.const(0), Ix.const(2), 1, body2)])
            acc.mag += 0.5 * L
        self.stmts.append(st)
        if reg:
            self.registers.append(name)
            self.features.add("registers")
        out = S.out_tensor(self.pick([ty] * 3 + (["f16"] if fam == "f32" else [])), (R, C))
        val = Ref(name, ty, (R, C), exact, acc.mag)
        self.stmts.append(Store(out, "tensor", [S.r, S.c], [R, C], val))
        if not reg and self.chance(0.5):
            o2 = S.out_tensor(ty if fam != "i32" else "i32", (R, 1))
            self.stmts.append(Store(o2, "tensor", [S.r, Ix.const(0)], [R, 1],
                                    Red(self.pick(["sum", "max"]), 1, val)))
            self.features.add("reduce")

    # ---- snippet: an online-softmax attention loop ----------------------------------------
    def snip_attention(self, k):
        """Flash attention as a user writes it: q against key tiles, the row max and sum carried
        across the key loop, the accumulator rescaled and fed by dot(p, V) (f16/bf16)."""
        dt = self.pick(["bf16", "f16"])
        BR = int(self.pick([16, 32, 64] if self.big else [8, 16, 5]))
        BC = int(self.pick([16, 32, 64] if self.big else [8, 16, 12]))
        D = int(self.pick([16, 32, 64] if self.big else [8, 16, 24]))
        self.features.update({"attention", f"dot_{dt}", "loop_carry", "reduce", "math"})
        Mn = self.dim("M", max(1, self.G * BR + self.ri(-BR + 1, 2)))
        Nk = self.dim("K", max(1, self.ri(1, 3) * BC + self.ri(-BC + 1, BC)))
        Q = self.tensor("Q", dt, [Mn, D])
        Kt = self.tensor("Kt", dt, [Nk, D])
        V = self.tensor("V", dt, [Nk, D])
        O = self.tensor("O", self.pick([dt, "f32"]), [Mn, D], role="out")
        scale = 1.0 / D
        rn, kt = f"r{k}", f"kt{k}"
        self.stmts.append(LetIx(rn, CTX_BX * BR))
        r, kix = Ix.name(rn), Ix.name(kt)
        n = lambda s: f"at{k}_{s}"  # noqa: E731
        q = n("q")
        self.stmts.append(Bind("var", q, Load(Q, dt, [r, Ix.const(0)], [BR, D], 2.0, full=(False, True))))
        self.stmts.append(Bind("var", n("m"), None, decl="f32", shape=(BR, 1), fill=-1e30))
        self.stmts.append(Bind("var", n("l"), None, decl="f32", shape=(BR, 1), fill=0.0))
        self.stmts.append(Bind("var", n("acc"), None, decl="f32", shape=(BR, D), fill=0.0))
        R = lambda name, shape, ty="f32", mag=4.0: Ref(name, ty, shape, False, mag)  # noqa: E731
        kload = Load(Kt, dt, [kix, Ix.const(0)], [BC, D], 2.0, full=(False, True))
        vload = Load(V, dt, [kix, Ix.const(0)], [BC, D], 2.0, full=(False, True))
        s_ = Bin("*", Dot(Ref(q, dt, (BR, D), True, 2.0), kload, True), Lit(scale, "f32"))
        body = [Bind("var", n("s"), s_),
                Bind("var", n("mn"), Bin("max", R(n("m"), (BR, 1)), Red("max", 1, R(n("s"), (BR, BC))))),
                Bind("var", n("p"), Un("exp", Bin("-", R(n("s"), (BR, BC)), R(n("mn"), (BR, 1))))),
                Bind("var", n("al"), Un("exp", Bin("-", R(n("m"), (BR, 1)), R(n("mn"), (BR, 1))))),
                Store(n("l"), "whole", [], [], Bin("+", Bin("*", R(n("l"), (BR, 1)), R(n("al"), (BR, 1))),
                                                  Red("sum", 1, R(n("p"), (BR, BC), mag=1.0)))),
                Store(n("acc"), "whole", [], [], Bin("+", Bin("*", R(n("acc"), (BR, D)), R(n("al"), (BR, 1))),
                                                    Dot(Conv(dt, R(n("p"), (BR, BC), mag=1.0)), vload, False))),
                Store(n("m"), "whole", [], [], R(n("mn"), (BR, 1)))]
        self.stmts.append(For(kt, Ix.const(0), Ix.name(Nk), BC, body))
        res = Bin("/", R(n("acc"), (BR, D), mag=100.0), R(n("l"), (BR, 1), mag=100.0))
        self.stmts.append(Store(O, "tensor", [r, Ix.const(0)], [BR, D], res))

    # ---- snippet: loops whose body reads the carried tile at other elements -----------------
    def snip_loop2(self, k):
        """A carried tile read at other elements inside the loop (a reduction of it, a shifted
        window of it, its transpose), then written: the barriers between turns."""
        S = ExprScope(self, k)
        S.setup(rank=2)
        R, C = S.R, S.C
        if self.big:
            R, C = min(R, 16), min(C, 64)
        sq = R == C and self.chance(0.4)
        if sq is False and self.chance(0.3):
            C = R
            sq = True
        ty = self.pick(["f32", "i32"], [3, 1])
        flt = ty == "f32"
        name = f"w{k}"
        L = self.ri(1, 4)
        jn = f"j{k}"
        X = self.tensor("X", ty, [S.rows, C * L + self.ri(0, 3)])
        self.stmts.append(Bind("var", name, Load(X, ty, [S.r, Ix.const(0)], [R, C], 2.0 if flt else 1000.0)))
        self.features.update({"loop_carry", "loop_read_other"})
        cur = Ref(name, ty, (R, C), not flt, 8.0 if flt else 2.0 ** 31)
        col = Ix(f"{jn} * {C}", lambda env, jn=jn, C=C: env.scal[jn] * C)
        load = Load(X, ty, [S.r, col], [R, C], 2.0 if flt else 1000.0)
        half = Lit(0.5, ty) if flt else Lit(3, ty)
        forms = ["rowred", "shift", "colred"] + (["transpose"] if sq else [])
        form = self.pick(forms)
        if form == "rowred":
            other = Red("max" if not flt else self.pick(["sum", "max"]), 1, cur)
            if flt and other.op == "sum":
                other = Un("tanh", other)
        elif form == "colred":
            other = Red("max", 0, cur)
        elif form == "transpose":
            other = Tr(cur)
            self.features.add("transpose")
        else:
            d = self.ri(1, max(1, C - 1)) if C > 1 else 0
            other = Win(cur, [Ix.const(0), Ix.const(d)], [R, C - d]) if d else cur
            if d:      # a window of the carried tile written from its own shifted elements
                body_extra = [Store(name, "tile", [Ix.const(0), Ix.const(0)], [R, C - d], Bin("+", other, half))]
            else:
                body_extra = []
        if flt:
            newv = Bin("+", Un("tanh", Bin("*", cur, half)), Bin("+", load, other)) if form != "shift" else Bin("+", Un("tanh", cur), load)
        else:
            newv = Bin("^", Bin("+", cur, load), other) if form != "shift" else Bin("+", cur, load)
        body = [Store(name, "whole", [], [], newv)]
        if form == "shift":
            body = body_extra + body if self.chance(0.5) else body + body_extra
        self.stmts.append(For(jn, Ix.const(0), Ix.const(L), 1, body))
        out = S.out_tensor(ty, (R, C))
        self.stmts.append(Store(out, "tensor", [S.r, S.c], [R, C], Ref(name, ty, (R, C), not flt, 8.0)))

    # ---- snippet: GEMM loop ----------------------------------------------------------------
    def snip_gemm(self, k):
        self.gemm_loop(k)

    def gemm_loop(self, k):
        """acc += dot(A[.., k0 :+ TK], B[k0 :+ TK, ..]) over K (f16/bf16: the tensor-core loop)."""
        dt = self.pick(["f16", "bf16", "f32", "f64", "i8"], [3, 3, 1.5, 1, 1])
        trans = self.chance(0.35)
        if self.big:        # tile shapes of the tensor-core paths (mma.sync; wgmma on sm_90)
            TM = self.pick([64, 128, 64, 32])
            TN = self.pick([64, 128, 32, 96])
            TK = self.pick([16, 32, 64])
            budget = 160000
        else:
            TM = self.pick([8, 16, 24, 32, 64, 5, 13], [1, 2, 1, 2, 1, 1, 1])
            TN = self.pick([8, 16, 32, 64, 7, 20], [1, 2, 2, 1, 1, 1])
            TK = self.pick([8, 16, 32, 12], [1, 3, 2, 1])
            budget = 40000
        while TM * TN * 4 + (TM + TN) * TK * 8 > budget:
            TM = max(4, TM // 2)
        self.features.update({"gemm_loop", f"dot_{dt}", "loop_carry"})
        Mv = self.G * TM + self.ri(-TM + 1, 3)
        Mn = self.dim("M", max(1, Mv))
        Kn = self.dim("K", self.ri(1, 3) * TK + self.ri(-TK + 1, TK), row_length=True)
        Nv = TN + self.ri(-3, 4) if not self.chance(0.3) else TN
        Nn = self.dim("N", max(1, Nv), row_length=True) if trans or self.chance(0.5) else None
        ncol = Nn if Nn else max(1, Nv)
        A = self.tensor("A", dt, [Mn, Kn])
        B = self.tensor("B", dt, [ncol, Kn] if trans else [Kn, ncol])
        acc_t = {"f16": "f32", "bf16": "f32", "f32": "f32", "f64": "f64", "i8": "i32"}[dt]
        out_t = self.pick({"f32": ["f32", "f16", "bf16"], "f64": ["f64", "f32"], "i32": ["i32", "i64"]}[acc_t])
        C = self.tensor("C", out_t, [Mn, ncol], role="out")
        rn = f"r{k}"
        self.stmts.append(LetIx(rn, CTX_BX * TM))
        r = Ix.name(rn)
        acc = f"acc{k}"
        k0 = f"k{k}"
        self.stmts.append(Bind("var", acc, None, decl=acc_t, shape=(TM, TN), fill=0 if acc_t == "i32" else 0.0))
        kix = Ix.name(k0)
        mag = 2.0 if dt != "i8" else 100.0
        a = Load(A, dt, [r, kix], [TM, TK], mag)
        b = Load(B, dt, [Ix.const(0), kix], [TN, TK], mag) if trans else Load(B, dt, [kix, Ix.const(0)], [TK, TN], mag)
        body = []
        if self.chance(0.3):        # through let views (staged by the dot)
            body += [Bind("let", f"a{k}", a, view=True), Bind("let", f"b{k}", b, view=True)]
            a = Ref(f"a{k}", dt, a.shape, True, mag, view=a)
            b = Ref(f"b{k}", dt, b.shape, True, mag, view=b)
            self.features.add("view")
        elif self.chance(0.3):      # copied into tiles first
            body += [Bind("var", f"a{k}", a), Bind("var", f"b{k}", b)]
            a = Ref(f"a{k}", dt, a.shape, True, mag)
            b = Ref(f"b{k}", dt, b.shape, True, mag)
        d = Dot(a, b, trans)
        accr = Ref(acc, acc_t, (TM, TN), False, 0.0)
        if self.chance(0.7):
            body.append(Store(acc, "whole", [], [], d, op="+"))
        else:
            body.append(Store(acc, "whole", [], [], Bin("+", accr, d)))
        self.stmts.append(For(k0, Ix.const(0), Ix.name(Kn), TK, body))
        if acc_t != "i32" and self.chance(0.2) and not self.registers:
            self.registers.append(acc)
            self.features.add("registers")
        accr = Ref(acc, acc_t, (TM, TN), acc_t == "i32", 4.0 * self.dims[Kn] * mag * mag)
        val = accr
        if acc_t != "i32" and self.chance(0.4):
            val = Bin("+", Bin("*", accr, Lit(0.5, acc_t)), Lit(1.0, acc_t))
        self.stmts.append(Store(C, "tensor", [r, Ix.const(0)], [TM, TN], val))

    # ---- snippet: per-thread code ---------------------------------------------------------
    def snip_thread(self, k):
        """Each thread an element (i = ctx.block.x * T + ctx.thread): element reads around i,
        scalar arithmetic, a loop with continue and break, element writes."""
        self.features.add("thread")
        T, G = self.T, self.G
        n = self.dim("N", max(1, G * T + self.ri(-T, 5)), row_length=True)
        fam = self.pick(["f32", "i32", "f64"], [3, 2, 1])
        dt = {"f32": self.pick(["f32", "f16", "bf16"], [3, 1, 1]), "i32": self.pick(["i32", "i8"]), "f64": "f64"}[fam]
        X = self.tensor("X", dt, [n])
        W = self.ri(1, 6)
        X2 = self.tensor("X", dt, [n, W])
        out_t = {"f32": self.pick(["f32", "f16"]), "i32": self.pick(["i32", "i64"]), "f64": "f64"}[fam]
        O = self.tensor("O", out_t, [n], role="out")
        O2 = self.tensor("O", "i32", [n], role="out")
        ar = fam
        i = f"i{k}"
        mode = self.pick(["plain", "rev", "lane"])
        iix = {"plain": f"ctx.block.x * {T} + ctx.thread", "rev": f"ctx.block.x * {T} + ({T - 1} - ctx.thread)",
               "lane": f"ctx.block.x * {T} + ctx.warp * 32 + ctx.lane"}[mode]
        d1 = int(self.pick([-1, 1, 2, -3]))
        guard = self.chance(0.6)
        flt = M.is_float(fam)
        thr = float(self.pick([0.0, 0.5, -0.5])) if flt else int(self.pick([0, 10, -10]))
        lim = self.ri(1, W)
        w = 0.5 if flt else 3

        def lit(v):
            t = repr(float(v)) if flt else str(int(v))
            return f"({t})" if t.startswith("-") else t
        near = f"{i} + {d1}" if d1 > 0 else f"{i} - {-d1}"
        body = [f"let a{k} = {X}[{i}]",
                f"let b{k} = {X}[{near}]",
                f"var acc{k}: {ar} = {lit(0)}",
                f"var cnt{k}: i32 = 0",
                f"for j{k} in range(0, {W}) {{",
                f"  let v{k} = {X2}[{i}, j{k}]",
                f"  if v{k} < {lit(thr)} {{ continue }}",
                f"  acc{k} += v{k} * {lit(w)}",
                f"  cnt{k} += 1",
                f"  if cnt{k} >= {lim} {{ break }}",
                "}",
                f"{O}[{i}] = a{k} * b{k} + acc{k}" if flt else f"{O}[{i}] = (a{k} * b{k}) ^ acc{k}",
                f"{O2}[{i}] = cnt{k} + i32({i} % 7)"]
        lines = [f"let {i} = {iix}"]
        if guard:
            lines += [f"if {i} < {n} {{"] + ["  " + ln for ln in body] + ["}"]
        else:
            lines += body
        art = M.NP[ar]

        def rd(arr, idx, col=None):
            ok = (idx >= 0) & (idx < arr.shape[0])
            if not arr.shape[0]:
                return np.zeros(idx.shape, art)
            cl = np.clip(idx, 0, arr.shape[0] - 1)
            v = arr[cl] if col is None else arr[cl, col]
            return np.where(ok, M.convert(v, dt, ar), art.type(0)).astype(art)

        def run(env):
            idx = env.block[0] * T + (np.arange(T) if mode != "rev" else T - 1 - np.arange(T))
            idx = idx.astype(np.int64)
            N = env.scal[n]
            x, x2 = env.tensors[X], env.tensors[X2]
            active = (idx < N) if guard else np.ones(T, bool)
            a, b = rd(x, idx), rd(x, idx + d1)
            acc = np.zeros(T, art)
            cnt = np.zeros(T, np.int32)
            err = np.zeros(T)
            live = active.copy()
            with np.errstate(all="ignore"):
                for j in range(W):
                    v = rd(x2, idx, j)
                    take = live & ~(v < art.type(thr))
                    acc = np.where(take, (acc + v * art.type(w)).astype(art), acc)
                    if flt:
                        err = np.where(take, err + 2 * M.EPS[ar] * (1 + np.abs(acc.astype(np.float64))), err)
                    cnt = np.where(take, cnt + 1, cnt).astype(np.int32)
                    live &= ~(take & (cnt >= lim))
                if flt:
                    res = (a * b + acc).astype(art)
                    err = err + 2 * M.EPS[ar] * (1 + np.abs(res.astype(np.float64)))
                else:
                    res = ((a * b).astype(np.int32) ^ acc).astype(np.int32)
            c2 = (cnt + (idx % 7).astype(np.int32)).astype(np.int32)
            o, o2 = env.tensors[O], env.tensors[O2]
            wr = active & (idx >= 0) & (idx < o.shape[0])
            vals = M.convert(res, ar, out_t)
            if out_t in ("f16", "bf16"):
                err = err + 2 * M.EPS[out_t] * np.abs(vals.astype(np.float32).astype(np.float64))
            o[idx[wr]] = vals[wr]
            env.terr[O][idx[wr]] = err[wr]
            o2[idx[wr]] = c2[wr]
        self.stmts.append(Raw(lines, run))

    # ---- snippet: per-thread writes of tile elements -----------------------------------------
    def snip_tile_elems(self, k):
        """Each thread writes tile elements one by one (a per-thread loop over the tile), then
        barrier() and element reads of other threads' elements, and a tile statement reading it."""
        self.features.update({"tile_elems", "thread"})
        T = self.T
        R, C = self.ri(1, 9), self.ri(1, 40)
        while R * C > 1024:
            C //= 2
        ty = self.pick(["f32", "i32", "f16"], [2, 1, 1])
        rows = self.dim("M", max(1, self.G * R + self.ri(-R, 2)))
        X = self.tensor("X", ty, [rows, C])
        O = self.tensor("O", ty, [rows, C], role="out")
        Ot = self.tensor("O", ty, [C, self.G * R + 4], role="out")
        name = f"t{k}"
        rn = f"r{k}"
        ar = M.ARITH[ty]
        two = "2.0" if M.is_float(ty) else "2"
        one = "1.0" if M.is_float(ty) else "1"
        fill = self.chance(0.5)
        lines = [f"let {rn} = ctx.block.x * {R}",
                 f"var {name}: tile<{ty}>[{R}, {C}]" + (f" = {one}" if fill else "")]
        lines += [f"for e{k} in range(ctx.thread, {R * C}, {T}) {{",
                  f"  {name}[e{k} / {C}, e{k} % {C}] = {X}[{rn} + e{k} / {C}, e{k} % {C}] * {two}",
                  "}"]
        explicit = self.chance(0.6)     # else only a tile statement reads: the compiler's barrier
        if explicit:
            lines += ["barrier()",
                      f"for e{k} in range(ctx.thread, {R * C}, {T}) {{",
                      f"  {Ot}[e{k} % {C}, {rn} + e{k} / {C}] = {name}[e{k} / {C}, e{k} % {C}] + {name}[{R - 1} - e{k} / {C}, e{k} % {C}]",
                      "}"]
        lines += [f"{O}[{rn} :+ {R}, :] = {name} + {one}"]

        def run(env, X=X, O=O, Ot=Ot, R=R, C=C, ty=ty):
            r = env.block[0] * R
            x = env.tensors[X]
            ar_ = M.NP[ar]
            t = np.zeros((R, C), ar_)
            for i in range(R):
                src = x[r + i] if 0 <= r + i < x.shape[0] else np.zeros(C, x.dtype)
                with np.errstate(all="ignore"):
                    t[i] = M.convert(M.convert(src, ty, ar) * ar_.type(2), ar, ty)
            t_ty = M.convert(t.astype(ar_), ar, ty)
            tw = M.convert(t_ty, ty, ar)
            ot = env.tensors[Ot]
            for i in range(R if explicit else 0):
                col = r + i
                if 0 <= col < ot.shape[1]:
                    with np.errstate(all="ignore"):
                        ot[:, col] = M.convert((tw[i] + tw[R - 1 - i]).astype(ar_), ar, ty)
                    if ty == "f16":
                        env.terr[Ot][:, col] = 2 * M.EPS["f16"] * np.abs(ot[:, col].astype(np.float64))
            o = env.tensors[O]
            for i in range(R):
                if 0 <= r + i < o.shape[0]:
                    with np.errstate(all="ignore"):
                        o[r + i] = M.convert((tw[i] + ar_.type(1)).astype(ar_), ar, ty)
                    if ty == "f16":
                        env.terr[O][r + i] = 2 * M.EPS["f16"] * np.abs(o[r + i].astype(np.float64))
        self.stmts.append(Raw(lines, run))

    # ---- snippet: per-thread reads of a tile a tile statement writes, in a loop --------------
    def snip_thread_tiles(self, k):
        """Each turn a tile statement writes u, then every thread reads elements of u that other
        threads wrote (the compiler's barrier after the write, and before the next turn's)."""
        self.features.update({"thread", "thread_reads_tile", "loop_carry"})
        T = self.T
        R, C = self.ri(1, 8), self.pick([4, 8, 13, 16, 32])
        ty = self.pick(["i32", "f32"])
        flt = ty == "f32"
        L = self.ri(1, 3)
        # the windows stay inside X: an element read of a tile element a slice left invalid would
        # read what the spec leaves open
        rows = self.dim("M", self.G * R + self.ri(0, 2))
        X = self.tensor("X", ty, [rows, C * L + self.ri(0, 3)])
        n = self.G * T
        O = self.tensor("O", ty, [n], role="out")
        shift = self.ri(1, max(1, R * C - 1))
        u, acc, j, e = f"u{k}", f"acc{k}", f"j{k}", f"e{k}"
        two = "2.0" if flt else "3"
        zero = "0.0" if flt else "0"
        lines = [f"let r{k} = ctx.block.x * {R}",
                 f"var {u}: tile<{ty}>[{R}, {C}] = {zero}",
                 f"var {acc}: {ty} = {zero}",
                 f"for {j} in range(0, {L}) {{",
                 f"  {u} = {X}[r{k} :+ {R}, {j} * {C} :+ {C}] * {two}",
                 f"  for {e} in range(ctx.thread, {R * C}, {T}) {{",
                 f"    let q{k} = ({e} + {shift}) % {R * C}",
                 f"    {acc} = {acc} * {two} + {u}[q{k} / {C}, q{k} % {C}]" if not flt else
                 f"    {acc} += {u}[q{k} / {C}, q{k} % {C}]",
                 "  }",
                 "}",
                 f"{O}[ctx.block.x * {T} + ctx.thread] = {acc}"]

        def run(env):
            r = env.block[0] * R
            x = env.tensors[X]
            art = M.NP[ty]
            acc_v = np.zeros(T, art)
            err = np.zeros(T)
            with np.errstate(all="ignore"):
                for jj in range(L):
                    t = M.load(x, ty, [r, jj * C], [R, C])
                    # u = X[...] * 2: the whole tile takes the slice's region; elements outside read 0
                    uu = (t.data.astype(art) * art.type(2 if flt else 3)).astype(art).reshape(-1)
                    for tid in range(T):
                        for ee in range(tid, R * C, T):
                            q = (ee + shift) % (R * C)
                            if flt:
                                acc_v[tid] = art.type(acc_v[tid] + uu[q])
                                err[tid] += 2e-5 * (1 + abs(float(acc_v[tid])))
                            else:
                                acc_v[tid] = art.type(acc_v[tid] * art.type(3) + uu[q])
            o = env.tensors[O]
            base = env.block[0] * T
            o[base:base + T] = acc_v
            env.terr[O][base:base + T] = err
        self.stmts.append(Raw(lines, run))

    # ---- snippet: atomics -------------------------------------------------------------------
    def snip_atomic(self, k):
        """Per-thread atomic_add / atomic_max of element reads into a few elements, from every
        thread of every CTA."""
        T, G = self.T, self.G
        op = self.pick(["add", "max"], [2, 1])
        dt = self.pick(["f32", "f64", "i32", "i64", "u32"] + (["f16", "bf16"] if op == "add" else []))
        self.features.add(f"atomic_{dt}")
        self.features.add("thread")
        self.idempotent = False
        n = self.dim("N", max(1, G * T + self.ri(-T, 3)), row_length=True)
        src_t = {"u32": "u32"}.get(dt, "i32" if dt in ("i32", "i64") else "f32")
        X = self.tensor("X", src_t, [n])
        S = self.ri(1, 5)
        init = self.data(dt, (S,)) if op == "max" else np.zeros(S, M.NP[dt])
        A = f"A{len(self.params)}"
        self.params.append(("tensor", A, dt))
        self.decls.append(f"{A}: tensor<{dt}>[{S}]")
        self.values[A] = init
        self.outputs.append(A)
        iname = f"i{k}"
        conv = "" if (src_t == dt or (src_t == "f32" and dt in ("f16", "bf16", "f64")) or (src_t == "i32" and dt == "i64")) else dt
        v = f"{X}[{iname}]"
        if src_t == "u32":
            v = f"u32(i64({X}[{iname}]) * 3)"
        elif conv:
            v = f"{conv}({v})"
        lines = [f"let {iname} = ctx.block.x * {T} + ctx.thread",
                 f"if {iname} < {n} {{",
                 f"  atomic_{op}({A}[{iname} % {S}], {v})",
                 "}"]

        def run(env, X=X, A=A, n=n, S=S, op=op, dt=dt, src_t=src_t):
            i = env.block[0] * T + np.arange(T)
            i = i[i < env.scal[n]]
            x = env.tensors[X][i]
            if src_t == "u32":
                x = (x.astype(np.int64) * 3).astype(np.uint32)
            a = env.tensors[A]
            e = env.terr[A]
            for j in range(S):
                vals = x[i % S == j]
                if not vals.size:
                    continue
                if op == "add":
                    if M.is_float(dt):
                        acc = M.ARITH.get(dt, dt)
                        s = np.float64(a[j]) + np.sum(vals.astype(np.float64))
                        unit = M.EPS[dt] * 2 if dt in ("f16", "bf16") else M.ACC_UNIT.get(dt, 2 ** -23)
                        e[j] += (len(vals) + 1) * unit * (np.sum(np.abs(vals.astype(np.float64))) + abs(float(a[j])) + abs(s))
                        a[j] = np.asarray(s).astype(M.NP[dt])
                    else:
                        with np.errstate(all="ignore"):
                            a[j] = (np.int64(a[j]) + np.sum(vals.astype(np.int64))).astype(M.NP[dt]) if dt != "u32" else \
                                np.uint32((int(a[j]) + int(np.sum(vals.astype(np.uint64)))) % 2 ** 32)
                else:
                    a[j] = max(a[j], vals.astype(M.NP[dt]).max())
        self.stmts.append(Raw(lines, run))

    # ---- snippet: global read-back ---------------------------------------------------------
    def snip_readback(self, k):
        """A tensor written and read by different threads of one CTA (spec 13's hazards through
        global memory): a tile store read back at other elements (RAW), a tensor read then
        overwritten (WAR), a statement that reads and writes one tensor shifted (in place),
        per-thread element writes read back by a tile statement, atomics read back."""
        self.features.add("gmem_hazard")
        S = ExprScope(self, k)
        S.setup(rank=2)
        R, C = S.R, S.C
        fam = self.pick(["f32", "i32"])
        ty = fam
        one = Lit(1 if fam == "i32" else 1.0, ty)
        mag = 2.0 if fam == "f32" else 1000.0
        d = self.ri(0, 2)
        form = self.pick(["raw", "war", "inplace", "elem", "atomic"], [2, 2, 2, 2, 1])
        self.features.add(f"gmem_{form}")
        if form == "raw":
            Y = S.out_tensor(ty, (R, C + 2))
            val = S._fit(S.gen((R, C), fam, 2), ty)
            self.stmts.append(Store(Y, "tensor", [S.r, S.c], [R, C], val))
            Z = S.out_tensor(ty, (R, C))
            back = Load(Y, ty, [S.r, S.c + d], [R, C], val.mag, exact=val.exact)
            self.stmts.append(Store(Z, "tensor", [S.r, S.c], [R, C], Bin("+", back, one)))
            if self.chance(0.5):        # the transposed read: every thread reads another's elements
                Z2 = self.tensor("Y", ty, [C + 1, self.G * R + 2], role="out")
                self.stmts.append(Store(Z2, "tensor", [Ix.const(0), S.r], [C, R],
                                        Tr(Load(Y, ty, [S.r, S.c], [R, C], val.mag, exact=val.exact))))
            return
        # Y is read and written; its columns past the CTA's window are read, never written
        Y = self.tensor("Y", ty, [S.rows, S.ncols(C + d)], role="inout")
        if form == "war":
            Z = S.out_tensor(ty, (R, C))
            if self.chance(0.5):
                self.stmts.append(Bind("var", f"t{k}", Load(Y, ty, [S.r, S.c + d], [R, C], mag)))
                read = Ref(f"t{k}", ty, (R, C), True, mag)
            else:
                read = Load(Y, ty, [S.r, S.c + d], [R, C], mag)
            self.stmts.append(Store(Z, "tensor", [S.r, S.c], [R, C], Bin("+", read, one)))
            self.stmts.append(Store(Y, "tensor", [S.r, S.c], [R, C], S._fit(S.gen((R, C), fam, 1), ty)))
        elif form == "inplace":
            shifted = Load(Y, ty, [S.r, S.c + d], [R, C], mag)
            if self.chance(0.5):
                self.stmts.append(Store(Y, "tensor", [S.r, S.c], [R, C], Bin("+", shifted, one)))
            else:
                self.stmts.append(Store(Y, "tensor", [S.r, S.c], [R, C], Tr(Load(Y, ty, [S.r, S.c], [C, R], mag))
                                        if R == C else Bin("*", shifted, Lit(3 if fam == "i32" else 0.5, ty))))
        elif form == "elem":
            X = S.in_tensor(ty, (R, C))[0]
            T = self.T
            e = f"e{k}"
            two = "2" if fam == "i32" else "2.0"
            r_, c_ = S.r, S.c
            lines = [f"for {e} in range(ctx.thread, {R * C}, {T}) {{",
                     f"  {Y}[{r_.text} + {e} / {C}, {c_.text} + {e} % {C}] = {X}[{r_.text} + {e} / {C}, {c_.text} + {e} % {C}] * {two}",
                     "}"]

            def run(env, X=X, Y=Y, r_=r_, c_=c_):
                r0, c0 = int(r_(env)), int(c_(env))
                x, y = env.tensors[X], env.tensors[Y]
                art = M.NP[ty]
                with np.errstate(all="ignore"):
                    for i in range(R):
                        for j in range(C):
                            if 0 <= r0 + i < y.shape[0] and 0 <= c0 + j < y.shape[1]:
                                xv = x[r0 + i, c0 + j] if 0 <= r0 + i < x.shape[0] and 0 <= c0 + j < x.shape[1] else 0
                                y[r0 + i, c0 + j] = art.type(xv) * art.type(2)
            self.stmts.append(Raw(lines, run))
            Z = S.out_tensor(ty, (R, C))
            self.stmts.append(Store(Z, "tensor", [S.r, S.c], [R, C], Bin("+", Load(Y, ty, [S.r, S.c + d], [R, C], mag),
                                                                      one)))
        else:   # atomics into this CTA's row of A, then read back whole
            T = self.T
            n = self.ri(1, 3) * T + self.ri(0, T)
            Sz = self.ri(1, 8)
            A = f"A{len(self.params)}"
            self.params.append(("tensor", A, "i32"))
            self.decls.append(f"{A}: tensor<i32>[{self.G}, {Sz}]")
            self.values[A] = np.zeros((self.G, Sz), np.int32)
            self.outputs.append(A)
            e = f"e{k}"
            lines = [f"for {e} in range(ctx.thread, {n}, {T}) {{",
                     f"  atomic_add({A}[ctx.block.x, {e} % {Sz}], i32({e}) + 1)",
                     "}"]

            def run(env, A=A, n=n, Sz=Sz):
                a = env.tensors[A]
                for ee in range(n):
                    a[env.block[0], ee % Sz] += ee + 1
            self.stmts.append(Raw(lines, run))
            Z = self.tensor("Y", "i32", [self.G, Sz], role="out")
            self.stmts.append(Store(Z, "tensor", [CTX_BX * 1, Ix.const(0)], [1, Sz],
                                    Bin("*", Load(A, "i32", [CTX_BX * 1, Ix.const(0)], [1, Sz], 1e6), Lit(2, "i32"))))
            self.idempotent = False
            self.features.add("atomic_i32")

    # ---- program form: a thread block cluster --------------------------------------------
    def cluster_program(self):
        """A row split over the n CTAs of a cluster, each holding a slice, combining a row
        statistic with cluster_sum / cluster_max / cluster_min (sm_90: distributed shared
        memory), then using it; rank 0 stores the statistic."""
        n = int(self.pick([2, 4, 8], [3, 2, 1]))
        self.cluster = n
        self.features.update({"cluster", "reduce"})
        RB = self.ri(1, 4)
        P = int(self.pick([8, 16, 32, 13] if not self.big else [64, 128, 256]))
        W = n * P - self.pick([0, 0, self.ri(1, P - 1)])       # the last slice may be cut short
        G = self.G
        Mn = self.dim("M", G * RB + self.ri(-RB + 1, 1))
        dt = self.pick(["f32", "f16", "bf16"])
        op = self.pick(["sum", "max", "min"], [3, 1, 1])
        X = self.tensor("X", dt, [Mn, W])
        Y = self.tensor("Y", "f32", [Mn, W], role="out")
        Sx = self.tensor("Y", "f32", [Mn, 1], role="out")
        lines = [f"let r = ctx.cluster.x * {RB}",
                 f"let c = ctx.cluster.rank * {P}",
                 f"var x = f32({X}[r :+ {RB}, c :+ {P}])",
                 f"var st: tile<f32>[{RB}, 1] = row{op}({'x * x' if op == 'sum' else 'x'})",
                 f"cluster_{op}(st)",
                 f"{Y}[r :+ {RB}, c :+ {P}] = x * st" if op == "sum" else f"{Y}[r :+ {RB}, c :+ {P}] = x - st",
                 "if ctx.cluster.rank == 0 {",
                 f"  {Sx}[r :+ {RB}, 0 :+ 1] = st",
                 "}"]

        def part(env, q):
            cl = env.block[0] // n
            x = M.assign("f32", (RB, P), M.load(env.tensors[X], dt, [cl * RB, q * P], [RB, P]))
            e = M.binop("*", x, x) if op == "sum" else x
            return x, M.assign("f32", (RB, 1), M.reduce(op, 1, e))

        def run(env):
            rank = env.block[0] % n
            cl = env.block[0] // n
            x, mine = part(env, rank)
            ident = {"sum": 0.0, "max": -np.inf, "min": np.inf}[op]
            acc = np.full((RB, 1), ident)
            err = np.zeros((RB, 1))
            absum = np.zeros((RB, 1))
            for q in range(n):
                v = part(env, q)[1]
                m = v.mask()
                d = v.data.astype(np.float64)
                with np.errstate(all="ignore"):
                    acc = np.where(m, acc + d if op == "sum" else (np.maximum(acc, d) if op == "max" else np.minimum(acc, d)), acc)
                err = np.where(m, err + np.broadcast_to(v.err, (RB, 1)), err)
                absum = np.where(m, absum + np.abs(d), absum)
            if op == "sum":
                err = err + n * 2.0 ** -23 * absum + M.EPS["f32"] * (1 + np.abs(acc))
            data = np.where(mine.mask(), acc.astype(np.float32), mine.data)
            st = M.TV(data, "f32", mine.lo, mine.hi, np.where(mine.mask(), err, 0.0))
            val = M.binop("*", x, st) if op == "sum" else M.binop("-", x, st)
            M.store(env.tensors[Y], "f32", env.terr[Y], [cl * RB, rank * P], [RB, P], val)
            if rank == 0:
                M.store(env.tensors[Sx], "f32", env.terr[Sx], [cl * RB, 0], [RB, 1], st)
        self.stmts.append(Raw(lines, run))
        self.grid_text = None
        self.G = G * n

    # ---- program form: @autotune ----------------------------------------------------------
    def autotune_program(self):
        """Row blocks of TR rows and TC columns, both @autotune names, over a @grid; every
        variant computes the same result."""
        self.features.add("autotune")
        trs = sorted({self.ri(1, 8) for _ in range(2)})
        tcs = sorted({self.pick([8, 16, 32, 12, 20]) for _ in range(2)})
        self.tune = {"TR": trs, "TC": tcs}
        Mn = self.dim("M", self.ri(1, 30))
        # the row's statistic must not depend on the variant: every TC covers the whole row
        Nn = self.dim("N", 4 * self.ri(1, min(tcs) // 4), row_length=True)
        dt = self.pick(["f32", "f16", "bf16"])
        X = self.tensor("X", dt, [Mn, Nn])
        Y = self.tensor("Y", "f32", [Mn, Nn], role="out")
        Sx = self.tensor("Y", "f32", [Mn, Nn], role="out")
        scale = self.scalar("f32", float(self.pick([0.5, 2.0, -1.5])))
        self.grid_text = f"cdiv({Mn}, TR), cdiv({Nn}, TC)"
        self.grid_of = lambda v, Mn=Mn, Nn=Nn, d=self.dims: (-(-d[Mn] // v["TR"]), -(-d[Nn] // v["TC"]))
        self.GY = 2
        red = self.pick(["sum", "max"])
        lines = ["let r = ctx.block.x * TR", "let c = ctx.block.y * TC",
                 f"var x: tile<f32>[TR, TC] = f32({X}[r :+ TR, c :+ TC])",
                 f"{Y}[r :+ TR, c :+ TC] = x * {scale} + 1.0",
                 f"{Sx}[r :+ TR, c :+ TC] = x - row{red}(x)"]

        def run(env, X=X, Y=Y, Sx=Sx, red=red, scale=scale):
            TR, TC = env.scal["TR"], env.scal["TC"]
            r, c = env.block[0] * TR, env.block[1] * TC
            t = M.assign("f32", (TR, TC), M.load(env.tensors[X], dt, [r, c], [TR, TC]))
            M.store(env.tensors[Y], "f32", env.terr[Y], [r, c], [TR, TC],
                    M.binop("+", M.binop("*", t, M.scalar(env.scal[scale], "f32")), M.scalar(1.0, "f32")))
            M.store(env.tensors[Sx], "f32", env.terr[Sx], [r, c], [TR, TC], M.binop("-", t, M.reduce(red, 1, t)))
        self.stmts.append(Raw(lines, run))


def _kids(n):
    """The operand nodes of an expression node."""
    out = [getattr(n, a) for a in ("a", "b", "c", "base") if isinstance(getattr(n, a, None), Node)]
    return out + list(getattr(n, "args", None) or [])


class ExprScope:
    """One snippet's row block, tensors and tile variables, and its expression generator."""

    def __init__(self, g: Gen, k: int):
        self.g, self.k = g, k
        self.vars: List[TileVar] = []
        self.inputs: Dict[str, List[str]] = {}
        self.widths: Dict[str, object] = {}
        self.bcast_vars = set()          # tile vars whose value broadcast one row along more (F3)
        self.used = set()                # tile vars something reads
        self.nfn = 0

    def use(self, name):
        """Mark tile variable `name` read (and what a view of it views)."""
        self.used.add(name)
        for v in self.vars:
            if v.name == name and isinstance(v.view, Win) and isinstance(v.view.base, Ref):
                self.used.add(v.view.base.name)

    def finish(self, out: List[Stmt]):
        """Tiles nothing read are stored out, each into a tensor of its own (a few stay dead:
        a tile written and never read, `dead_tile`, F4)."""
        g = self.g
        for v in self.vars:
            if v.name in self.used or v.kind in ("view",):
                continue
            if g.chance(0.15):
                g.features.add("dead_tile")
                continue
            ty = v.ty
            if len(v.shape) == 2:
                # each CTA its own block of the output (the tile may be larger than the CTA's window)
                rows, cols = v.shape
                Y = g.tensor("Y", ty, [g.G * rows + g.ri(0, 2), cols * g.GY + g.ri(0, 2)], role="out")
                st = [CTX_BX * rows, CTX_BY * cols if g.GY > 1 else Ix.const(0)]
            else:
                Y = g.tensor("Y", ty, [g.dim("N", g.G * v.shape[0] + g.ri(0, 3), row_length=True)], role="out")
                st = [CTX_BX * v.shape[0]]
            self.use(v.name)
            out.append(Store(Y, "tensor", st, list(v.shape), Ref(v.name, ty, v.shape, v.exact, v.mag, view=v.view)))

    def setup(self, readback=False, rank=None):
        g = self.g
        self.rank = rank or (1 if (g.chance(0.15) and not readback) else 2)
        if self.rank == 2 and g.big:
            self.C = int(g.pick([32, 64, 96, 128, 256, 60]))
            self.R = int(g.pick([r for r in (2, 4, 8, 16, 32, 5) if r * self.C <= 4096]))
        elif self.rank == 2:
            self.R = int(g.pick([1, 2, 3, 4, 5, 7, 8, 12, 16], [1, 2, 2, 2, 2, 2, 2, 1, 1]))
            self.C = int(g.pick([1, 3, 4, 8, 13, 16, 17, 24, 32, 40], [1, 2, 1, 2, 2, 2, 2, 1, 2, 1]))
        elif g.big:
            self.R = 1
            self.C = int(g.pick([256, 512, 1024, 1000]))
        else:
            self.R = 1
            self.C = int(g.pick([3, 8, 13, 32, 37, 64, 100]))
        R, C = self.R, self.C
        if self.rank == 2:
            self.r = g.row_base(self.k, R)
            if g.GY > 1:
                self.c = g.row_base(self.k, C, CTX_BY, "y")
            else:
                self.c = self._col_start()
            rows = g.G * R + g.ri(-R, 3)
            if g.chance(0.03):
                rows = 0
            self.rows = g.dim("M", max(0, rows)) if g.chance(0.8) else max(1, rows)
            self.cols_total = (g.GY if g.GY > 1 else 1) * C
        else:
            self.r = g.row_base(self.k, C)
            self.c = None
            self.rows = g.dim("N", max(1, g.G * C + g.ri(-C, 3)), row_length=True)
            self.cols_total = 0

    def _col_start(self):
        g = self.g
        kind = g.pick(["zero", "const", "param"], [5, 2, 1])
        if kind == "zero":
            return Ix.const(0)
        v = g.ri(-3, 3)
        if v < 0:
            g.features.add("neg_start")
        if kind == "const":
            return Ix.const(v)
        g.features.add("rt_start")
        return Ix.name(g.scalar("i32", v))

    def ncols(self, need):
        """Columns of a new tensor: around what the windows need, runtime (a multiple of 4) or literal."""
        g = self.g
        n = max(1, need + g.ri(-3, 4))
        if g.chance(0.4):
            return g.dim("N", n, row_length=True)
        return n

    # -- tensors
    def in_tensor(self, dt, shape):
        """An input tensor whose windows cover `shape` around (r, c)."""
        g = self.g
        if self.rank == 1 or len(shape) == 1 and g.chance(0.5):
            key = (dt, 1)
            if key not in self.inputs or g.chance(0.3):
                n = self.rows if self.rank == 1 else g.dim("N", max(1, g.G * self.C + 3), row_length=True)
                self.inputs.setdefault(key, []).append(g.tensor("X", dt, [n]))
            return self.inputs[key][-1], 1
        key = (dt, 2)
        if key not in self.inputs or g.chance(0.3):
            cols = self.ncols(max(self.cols_total, shape[-1]) + 2)
            self.inputs.setdefault(key, []).append(g.tensor("X", dt, [self.rows, cols]))
            self.widths[self.inputs[key][-1]] = cols
        return self.inputs[key][-1], 2

    def whole_rows(self, dt, C2):
        """A tensor with exactly C2 literal columns, read with ':' (whole rows)."""
        key = (dt, "whole", C2)
        if key not in self.inputs or self.g.chance(0.3):
            self.inputs.setdefault(key, []).append(self.g.tensor("X", dt, [self.rows, C2]))
        return self.inputs[key][-1]

    def out_tensor(self, dt, shape):
        g = self.g
        if len(shape) == 1:
            return g.tensor("Y", dt, [self.rows], role="out")
        cols = self.ncols(max(self.cols_total, shape[-1]))
        return g.tensor("Y", dt, [self.rows, cols], role="out")

    # -- leaves
    def _shift(self):
        g = self.g
        d = int(g.pick([0, -1, 1, -2, 2, 4, -8], [6, 1, 1, 1, 1, 0, 0] if not g.big else [12, 1, 1, 0, 0, 1, 1]))
        if d:
            g.features.add("halo")
        return d

    def leaf_load(self, shape, fam, force_dt=None):
        g = self.g
        dt = force_dt or self._leaf_dt(fam)
        name, trank = self.in_tensor(dt, shape)
        mag = 2.0 if M.is_float(dt) else {"i8": 100.0, "i32": 2.0 ** 31, "i64": 2.0 ** 63, "u8": 255.0}[dt]
        if trank == 1:
            if self.rank == 1:
                start = self.r + self._shift()
            else:
                start = self.c + self._shift() if len(shape) == 1 else self.c
            n = shape[-1] if shape else 1
            node = Load(name, dt, [start], [n], mag)
        elif len(shape) == 1:
            row = self.r + g.ri(0, max(0, self.R - 1)) if self.rank == 2 else Ix.const(0)
            node = Load(name, dt, [row, self.c + self._shift() if self.c is not None else Ix.const(0)], [None, shape[0]], mag)
        else:
            R2, C2 = shape
            rs = self.r + self._shift() if R2 == self.R else (self.r + g.ri(0, self.R - 1) if R2 == 1 else self.r + self._shift())
            if g.GY == 1 and g.chance(0.15):          # whole rows: X[r :+ R, :]
                name = self.whole_rows(dt, C2)
                node = Load(name, dt, [rs, Ix.const(0)], [R2, C2], mag, full=(False, True))
                g.features.add("whole_rows")
            else:
                node = Load(name, dt, [rs, self.c + self._shift()], [R2, C2], mag)
        if dt == "u8":
            node = Conv("i32", node)
            g.features.add("convert")
        return node

    def _leaf_dt(self, fam):
        g = self.g
        if fam == "f32":
            return g.pick(["f32", "f16", "bf16"], [4, 1, 1])
        if fam == "f64":
            return "f64"
        if fam == "i32":
            return g.pick(["i32", "i8", "u8"], [3, 1, 1])
        return "i64"

    def scalar_leaf(self, fam, exact_only=False):
        g = self.g
        kind = g.pick(["lit", "param", "elem", "ix"], [4, 2, 1, 1])
        ty = fam
        if kind == "lit" or (kind == "ix" and exact_only):
            if M.is_float(ty):
                return Lit(float(g.pick([0.5, 2.0, -1.5, 0.25, 3.0, -0.75])), ty)
            return Lit(int(g.pick([1, 2, 3, -5, 7, 255])), ty)
        if kind == "param":
            if M.is_float(ty):
                return Param(g.scalar(ty, float(g.pick([0.5, -1.25, 1.75, 2.0]))), ty, 2.0)
            return Param(g.scalar(ty, int(g.ri(-9, 9))), ty, 9.0)
        if kind == "elem":
            tv = [v for v in self.vars if v.kind in ("var", "let") and M.ARITH.get(v.ty, v.ty) == M.ARITH[fam]
                  and v.ty == fam and (v.exact or not exact_only)]
            if tv and g.chance(0.6):
                v = g.pick(tv)
                g.features.add("uniform_elem")
                idx = [Ix.const(g.ri(0, n - 1)) for n in v.shape]
                self.use(v.name)
                return Elem(v.name, v.ty, idx, True, v.mag, v.exact)
            dt = fam
            name, trank = self.in_tensor(dt, (1,))
            g.features.add("uniform_elem")
            rows = g.dims.get(self.rows, self.rows) if isinstance(self.rows, str) else self.rows
            if trank == 1:
                return Elem(name, dt, [Ix.const(g.ri(0, 3))], False, 2.0 if M.is_float(dt) else 2.0 ** 31)
            return Elem(name, dt, [Ix.const(g.ri(0, 2)), Ix.const(g.ri(0, 2))], False, 2.0 if M.is_float(dt) else 2.0 ** 31)
        # an index value converted
        g.features.add("convert")
        ix = self.r if g.chance(0.5) else CTX_BX
        return IxVal(ix, ty, 100.0)

    def var_leaf(self, shape, fam, exact_only=False):
        """A tile variable read whole or through a window of `shape`, or None."""
        g = self.g
        cands = [v for v in self.vars if M.ARITH.get(v.ty, v.ty) == M.ARITH[fam] and (v.exact or not exact_only)
                 and len(v.shape) == len(shape) and all(a >= b for a, b in zip(v.shape, shape)) and v.kind != "reg"]
        if not cands:
            return None
        v = g.pick(cands)
        self.use(v.name)
        base = Ref(v.name, v.ty, v.shape, v.exact, v.mag, view=v.view)
        if tuple(v.shape) == tuple(shape) and g.chance(0.6):
            return base
        starts = []
        for n, m in zip(v.shape, shape):
            if g.chance(0.1) and v.kind != "tile_view":
                val = g.ri(-2, n - m + 2)
                starts.append(Ix.name(g.scalar("i32", val)))
                g.features.add("rt_tile_window")
                if v.kind == "view":
                    g.features.add("rt_view_window")
            else:
                starts.append(Ix.const(g.ri(0, n - m)))
        g.features.add("tile_window")
        return Win(base, starts, list(shape))

    # -- expressions
    def gen(self, shape, fam, depth, exact_only=False) -> Node:
        g = self.g
        shape = tuple(shape)
        if depth <= 0 or g.chance(0.2):
            return self.leaf(shape, fam, exact_only)
        opts = ["bin", "un", "where", "conv", "red", "dot", "tr", "fn"]
        w = [5, 2.5 if M.is_float(fam) else 1, 1, 0.7, 1.5, 1, 0.6, 0.4]
        if exact_only:
            w = [5, 1, 1, 0.5, 0.8, 0.0 if M.is_float(fam) else 0.5, 0.6, 0]
        if len(shape) != 2:
            w[6] = 0
            w[5] = 0
        if not (len(shape) == 2 and (shape[0] == 1 or shape[1] == 1) or shape == (1,)):
            w[4] = 0
        kind = g.pick(opts, w)
        node = getattr(self, "gen_" + kind)(shape, fam, depth, exact_only)
        assert node.shape == shape, (kind, node.shape, shape, node.text())
        return node

    def leaf(self, shape, fam, exact_only=False):
        g = self.g
        if not shape:
            return self.scalar_leaf(fam, exact_only)
        if fam == "i32" and len(shape) == 2 and g.chance(0.15):
            return self.index_leaf(shape)
        v = self.var_leaf(shape, fam, exact_only) if g.chance(0.5) else None
        if v is None:
            v = self.leaf_load(shape, fam)
        assert v.shape == shape, (v.shape, shape, v.text())
        return v

    def index_leaf(self, shape):
        """rows / cols of the leaf's shape, with no start, a constant or a scalar parameter."""
        g = self.g
        g.features.add("index_tile")
        fn = g.pick(["rows", "cols"])
        how = g.pick(["none", "const", "param"], [1, 1, 1])
        val = g.ri(-50, 50)
        start = None if how == "none" else Ix.const(val) if how == "const" else Ix.name(g.scalar("i32", val))
        return IndexTile(fn, shape, start, abs(val))

    def subshape(self, shape):
        g = self.g
        if len(shape) == 2:
            R, C = shape
            return tuple(g.pick([shape, (R, 1), (1, C), (C,), ()], [5, 1.5, 1.5, 0.7, 2]))
        if len(shape) == 1:
            return tuple(g.pick([shape, (1,), ()], [5, 1, 2]))
        return ()

    def gen_bin(self, shape, fam, depth, exact_only):
        g = self.g
        sub = self.subshape(shape)
        a = self.gen(shape, fam, depth - 1, exact_only)
        b = self.gen(sub, fam, depth - 1, exact_only)
        if isinstance(a, Lit) and isinstance(b, Lit):     # literals fold; keep them from overflowing
            b = self.as_param(b)
        full = a
        if g.chance(0.5):
            a, b = b, a
        if M.is_float(fam):
            ops = ["+", "-", "*", "/", "min", "max", "%"]
            w = [4, 3, 3, 1, 1, 1, 0.5 if (a.exact and b.exact) else 0]
            if exact_only:
                w = [3, 3, 0, 0, 1, 1, 0.5]
            op = g.pick(ops, w)
            if op in ("/", "%"):
                b = Bin("+", Un("abs", self.as_param(b)), Lit(1.0, M.ARITH[b.ty] if M.is_float(b.ty) else fam))
                g.features.add("math")
            node = Bin(op, a, b)
            if node.mag > 1e6:       # keep magnitudes where f16 stores and exp stay finite
                big, small = (a, b) if a.mag >= b.mag else (b, a)
                squashed = Bin("min", Bin("max", big, Lit(-4.0, M.ARITH[big.ty])), Lit(4.0, M.ARITH[big.ty]))
                node = Bin(op, squashed, small) if big is a else Bin(op, small, squashed)
            return node
        ops = ["+", "-", "*", "&", "|", "^", "<<", ">>", "/", "%", "min", "max"]
        op = g.pick(ops, [3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1])
        g.features.add("int_ops")
        if op in ("<<", ">>"):
            a = full
            bits = 64 if M.ARITH[a.ty] == "i64" else 32
            a = self.as_param(a)
            return Bin(op, a, Lit(g.ri(0, bits - 1), M.ARITH[a.ty]))
        return Bin(op, a, b)

    def as_param(self, node):
        """A literal replaced by a scalar parameter of its value (a literal alone, as a function's
        argument, is an f32 or i32 whatever the expression's family: spec 4.3)."""
        if isinstance(node, Lit):
            return Param(self.g.scalar(node.ty, float(node.value) if M.is_float(node.ty) else int(node.value)),
                         node.ty, node.mag)
        return node

    def gen_un(self, shape, fam, depth, exact_only):
        g = self.g
        a = self.as_param(self.gen(shape, fam, depth - 1, exact_only))
        if not M.is_float(fam):
            return Un(g.pick(["neg", "abs", "~"]), a)
        g.features.add("math")
        if exact_only:
            fn = g.pick(["neg", "abs", "floor", "ceil", "round"])
            return Un(fn, a)
        fns = ["neg", "abs", "exp", "exp2", "tanh", "sin", "cos", "sqrt", "log", "rsqrt", "erf", "floor", "ceil", "round"]
        ok_disc = a.exact
        w = [2, 2, 1.5 if a.mag <= 10 else 0, 0.5 if a.mag <= 10 else 0, 1.5, 1, 1, 1, 1, 1, 0.5,
             0.5 * ok_disc, 0.5 * ok_disc, 0.5 * ok_disc]
        fn = g.pick(fns, w)
        if fn in ("sqrt", "log", "rsqrt"):
            a = Bin("+", Un("abs", a), Lit(1.0, M.ARITH[a.ty]))
        return Un(fn, a)

    def gen_where(self, shape, fam, depth, exact_only):
        g = self.g
        cfam = g.pick([fam, "i32" if M.is_float(fam) else "f32"], [3, 1])
        c = self.cond(self.subshape(shape), cfam, depth - 1)
        a = self.gen(shape, fam, depth - 1, exact_only)
        b = self.gen(self.subshape(shape), fam, depth - 1, exact_only)
        if isinstance(a, Lit) and isinstance(b, Lit):
            b = self.as_param(b)
        g.features.add("where")
        return Where(c, a, b) if g.chance(0.5) else Where(c, b, a)

    def cond(self, shape, fam, depth):
        g = self.g
        x = self.gen(shape, fam, min(depth, 1), exact_only=True)
        y = self.gen(self.subshape(shape) if shape else (), fam, 0, exact_only=True)
        c = Bin(g.pick(["<", "<=", ">", ">=", "==", "!="]), x, y)
        r = g.rng.random()
        if r < 0.15:
            return Un("!", c)
        if r < 0.3:
            d = Bin(g.pick(["<", ">"]), self.gen(shape, fam, 0, exact_only=True), self.gen((), fam, 0, exact_only=True))
            return Bin(g.pick(["&&", "||"]), c, d)
        return c

    def gen_conv(self, shape, fam, depth, exact_only):
        g = self.g
        g.features.add("convert")
        if M.is_float(fam):
            src = g.pick(["int", "float"])
            if src == "int":
                return Conv(fam, self.gen(shape, "i32", depth - 1))
            a = self.gen(shape, fam, depth - 1, exact_only)
            if fam == "f32":
                to = g.pick(["f16", "bf16", "f64"])
                if to == "f16" and a.mag > 6e4:
                    to = "bf16"
                if to == "bf16" and a.mag > 1e30:
                    return a
                return Conv(to, a)
            return Conv(g.pick(["f32", "f16"]) if a.mag < 6e4 else "f32", a)
        # integers: from an exact float, or narrowing / widening between integer types
        if g.chance(0.4):
            a = self.gen(shape, "f32", depth - 1, exact_only=True)
            return Conv(fam, a)
        a = self.gen(shape, fam, depth - 1, exact_only)
        to = g.pick(["i8", "u8", "i64" if fam == "i32" else "i32"])
        return Conv(fam, Conv(to, a))        # wraps to the narrower type, widens back

    def gen_red(self, shape, fam, depth, exact_only):
        g = self.g
        g.features.add("reduce")
        op = g.pick(["sum", "max", "min"], [2, 1.5, 1]) if not exact_only or not M.is_float(fam) else g.pick(["max", "min"])
        if shape == (1,):
            n = g.ri(1, 40)
            a = self.gen((n,), fam, depth - 1, exact_only)
            return self._red_fix(Red(op, 1, a), fam)
        R, C = shape
        if C == 1:
            n = g.pick([1, 3, 8, 13, 32, 40, 64])
            a = self.gen((R, n), fam, depth - 1, exact_only)
            return self._red_fix(Red(op, 1, a), fam)
        n = g.pick([1, 2, 5, 8, 16])
        a = self.gen((n, C), fam, depth - 1, exact_only)
        return self._red_fix(Red(op, 0, a), fam)

    def broadcasts(self, node) -> bool:
        """Whether `node` broadcasts a slice (or a tile made from one) along a dimension it
        lacks or has extent 1 in: when that slice is wholly invalid, the CPU executor and the
        generated CUDA disagree on which dimensions of the empty region stay (F3)."""
        def has_slice(n):
            if isinstance(n, (Load, Win)):
                return True
            if isinstance(n, Ref):
                return n.name in self.bcast_vars or n.view is not None
            if isinstance(n, Red):
                return False
            return any(has_slice(k) for k in _kids(n))

        def walk(n):
            if isinstance(n, Ref):
                return n.name in self.bcast_vars
            if isinstance(n, (Bin, Where, Call)):
                ops = _kids(n)
                if any(k.shape and k.shape != n.shape and has_slice(k) for k in ops):
                    return True
            return any(walk(k) for k in _kids(n))
        return walk(node)

    def _red_fix(self, node, fam):
        if self.broadcasts(node.a):
            self.g.features.add("reduce_bcast")
        # rowmax of an i8 tile is i8: widen so the expression stays in its family
        if not M.is_float(fam) and node.ty != fam:
            return Conv(fam, node)
        return node

    def gen_dot(self, shape, fam, depth, exact_only):
        g = self.g
        R, C = shape
        K = int(g.pick([1, 4, 8, 13, 16, 24, 32]))
        dt = {"f32": g.pick(["f16", "bf16", "f32"]), "f64": "f64", "i32": "i8", "i64": "i8"}[fam]
        g.features.add(f"dot_{dt}")
        trans = g.chance(0.4)
        a = self.dot_operand((R, K), dt, depth - 1)
        b = self.dot_operand((C, K) if trans else (K, C), dt, depth - 1)
        d = Dot(a, b, trans)
        if self.broadcasts(a) or self.broadcasts(b):
            g.features.add("reduce_bcast")
        if fam == "i64":
            return Conv("i64", d)
        if d.mag > 1e6 and M.is_float(fam):
            return Un("tanh", d)
        return d

    def dot_operand(self, shape, dt, depth):
        g = self.g
        fam = {"f16": "f32", "bf16": "f32", "f32": "f32", "f64": "f64", "i8": "i32"}[dt]
        if depth > 0 and g.chance(0.35):
            e = self.gen(shape, fam, depth - 1)
            if dt == "f16" and e.mag > 6e4:
                e = Un("tanh", e)
            if e.ty == dt:
                return e
            return Conv(dt, e)
        v = self.var_leaf(shape, fam)
        if v is not None and v.ty == dt:
            return v
        n = self.leaf_load(shape, fam, force_dt=dt)
        return n

    def gen_tr(self, shape, fam, depth, exact_only):
        self.g.features.add("transpose")
        R, C = shape
        return Tr(self.gen((C, R), fam, depth - 1, exact_only))

    def gen_fn(self, shape, fam, depth, exact_only):
        """An expression function f(a, b) = body(a, b), called here."""
        g = self.g
        a = self.gen(shape, fam, depth - 1, exact_only)
        b = self.gen(self.subshape(shape), fam, depth - 1, exact_only)
        sa = Slot("a", a.ty, a.shape, a.exact, a.mag)
        sb = Slot("b", b.ty, b.shape, b.exact, b.mag)
        if M.is_float(fam):
            ops = [("*", "+"), ("-", "*"), ("max", "-")]
            o1, o2 = g.pick(ops)
            body = Bin(o2, Bin(o1, sa, sb), sa) if not exact_only else Bin("max", sa, sb)
        else:
            body = Bin("^", Bin("+", sa, sb), sa)
        if body.mag > 1e6 and M.is_float(fam):
            body = Un("tanh", body)
        name = f"fz_f{self.k}_{self.nfn}"
        self.nfn += 1
        g.fns.append(f"fn {name}(a, b) = {body.text()}")
        g.features.add("fn")
        return Call(name, body, [a, b], [sa, sb])

    # -- statements
    def shape_main(self):
        return (self.R, self.C) if self.rank == 2 else (self.C,)

    def bind(self, out: List[Stmt], force=None):
        """A tile binding: var, typed var, let, let view of a tensor or tile, or a filled tile
        written through windows."""
        g = self.g
        kind = force or g.pick(["var", "typed", "let", "view", "fill", "tile_view"], [3, 1.5, 1.5, 1.5, 1.5, 1.5])
        fam = g.pick(["f32", "f64", "i32", "i64"], [6, 1, 2, 1])
        name = f"v{self.k}_{len(self.vars)}"
        main = self.shape_main()
        if kind == "view":
            ext = tuple(n + g.ri(0, 3) for n in main)
            node = self.leaf_load(ext, fam)
            if not isinstance(node, Load):
                node = self.leaf_load(ext, fam, force_dt={"f32": "f32", "f64": "f64", "i32": "i32", "i64": "i64"}[fam])
            out.append(Bind("let", name, node, view=True))
            self.vars.append(TileVar(name, node.ty, node.shape, True, node.mag, "view", view=node))
            g.features.add("view")
            return
        if kind == "tile_view":
            bases = [v for v in self.vars if v.kind == "var" and len(v.shape) == 2]
            if not bases:
                return self.bind(out, "var")
            b = g.pick(bases)
            R0, C0 = b.shape
            n0, n1 = g.ri(1, R0), g.ri(1, C0)
            s0, s1 = g.ri(0, R0 - n0), g.ri(0, C0 - n1)
            node = Win(Ref(b.name, b.ty, b.shape, b.exact, b.mag), [Ix.const(s0), Ix.const(s1)], [n0, n1])
            out.append(Bind("let", name, node, view=True))
            tv = TileVar(name, b.ty, (n0, n1), b.exact, b.mag, "tile_view", view=node)
            self.vars.append(tv)
            g.features.add("tile_view")
            # written through
            bfam = "f32" if M.is_float(b.ty) and b.ty != "f64" else ("f64" if b.ty == "f64" else ("i64" if b.ty == "i64" else "i32"))
            m0, m1 = g.ri(1, n0), g.ri(1, n1)
            a0, a1 = g.ri(0, n0 - m0), g.ri(0, n1 - m1)
            v = self.gen((m0, m1), bfam, 2)
            v = self._fit(v, b.ty)
            out.append(Store(name, "view", [Ix.const(a0), Ix.const(a1)], [m0, m1], v, view_base=b.name,
                             view_starts=(s0, s1)))
            b.exact = b.exact and v.exact
            b.mag = max(b.mag, v.mag)
            tv.exact, tv.mag = b.exact, b.mag
            # the view re-reads its base: refresh its node's flags
            node.exact, node.mag = b.exact, b.mag
            node.base.exact, node.base.mag = b.exact, b.mag
            return
        if kind == "fill":
            ty = {"f32": g.pick(["f32", "f16", "bf16"], [3, 1, 1]), "f64": "f64", "i32": g.pick(["i32", "i8"]), "i64": "i64"}[fam]
            ext = tuple(n + g.ri(0, 4) for n in main)
            fill = float(g.pick([0.0, 1.0, -2.5])) if M.is_float(ty) else int(g.pick([0, 1, -3]))
            out.append(Bind("var", name, None, decl=ty, shape=ext, fill=fill))
            tv = TileVar(name, ty, ext, True, abs(fill), "var")
            g.features.add("fill_window")
            for _ in range(g.pick([1, 2])):
                sub = tuple(g.ri(1, n) for n in ext)
                starts = []
                for n, m in zip(ext, sub):
                    if g.chance(0.15):
                        starts.append(Ix.name(g.scalar("i32", g.ri(-m, n + 1))))
                        g.features.add("rt_tile_window")
                    else:
                        starts.append(Ix.const(g.ri(0, n - m)))
                v = self._fit(self.gen(sub, fam, 2) if g.chance(0.5) else self.leaf_load(sub, fam), ty)
                out.append(Store(name, "tile", starts, list(sub), v))
                tv.exact = tv.exact and v.exact
                tv.mag = max(tv.mag, v.mag)
                g.features.add("tile_window")
            self.vars.append(tv)
            return
        shape = main if g.chance(0.7) else tuple(n + g.ri(1, 3) for n in main)
        v = self.gen(shape, fam, g.ri(1, 3))
        if self.broadcasts(v):
            self.bcast_vars.add(name)
        if kind == "typed":
            ty = {"f32": g.pick(["f32", "f16", "bf16", "f64"]), "f64": g.pick(["f64", "f32"]), "i32": g.pick(["i32", "i8", "i64"]),
                  "i64": g.pick(["i64", "i32"])}[fam]
            v = self._fit(v, ty)
            out.append(Bind("var", name, v, decl=ty, shape=shape))
            self.vars.append(TileVar(name, ty, shape, v.exact and not v.is_mul, v.mag, "var"))
        elif kind == "let" and isinstance(v, (Load, Ref, Win)):
            # a let of a slice (or of a tile by name) is a view: it reads what it views when read
            out.append(Bind("let", name, v, view=True))
            self.vars.append(TileVar(name, v.ty, v.shape, v.exact, v.mag, "view" if isinstance(v, Load) else "tile_view",
                                     view=v))
            g.features.add("view" if isinstance(v, Load) else "tile_view")
        else:
            out.append(Bind(kind, name, v))
            self.vars.append(TileVar(name, v.ty, v.shape, v.exact and not v.is_mul, v.mag, kind))
        if kind == "var" and g.chance(0.4):        # then changed: compound, whole or window assignment
            tv = self.vars[-1]
            form = g.pick(["aug", "whole", "window", "stmt_fn"])
            vfam = fam
            if form == "stmt_fn":      # a statement function assigning the tile handed to it
                fname = f"fz_s{self.k}_{self.nfn}"
                self.nfn += 1
                lit = Lit(0.5, M.ARITH[tv.ty]) if M.is_float(tv.ty) else Lit(3, M.ARITH[tv.ty])
                g.fns.append(f"fn {fname}(t, s) {{\n  t = t * s + s\n}}")
                st = Store(name, "whole", [], [], Bin("+", Bin("*", Ref(name, tv.ty, shape, tv.exact, tv.mag), lit), lit))
                out.append(Raw([f"{fname}({name}, {lit.text()})"], st.run))
                g.features.add("fn")
                tv.exact = tv.exact and not M.is_float(tv.ty)
                tv.mag = tv.mag * 3 + 3
            elif form == "window" and len(shape) == 2:
                sub = (g.ri(1, shape[0]), shape[1])
                st = [Ix.const(g.ri(0, shape[0] - sub[0])), Ix.const(0)]
                w = self._fit(self.gen(sub, vfam, 2), tv.ty)
                out.append(Store(name, "tile", st, list(sub), w))
                g.features.add("tile_window")
                tv.exact = tv.exact and w.exact
                tv.mag = max(tv.mag, w.mag)
            else:
                w = self.gen(self.subshape(shape), vfam, 1)
                op = g.pick(["+", "-", "max"] if M.is_float(fam) else ["+", "^", "-"])
                if form == "aug" and op != "max":
                    out.append(Store(name, "whole", [], [], w, op=op))
                else:
                    out.append(Store(name, "whole", [], [], Bin(op, Ref(name, tv.ty, shape, tv.exact, tv.mag), w)))
                tv.exact = tv.exact and w.exact and M.ARITH[tv.ty] == tv.ty or not M.is_float(tv.ty)
                if M.is_float(tv.ty):
                    tv.exact = False
                tv.mag = tv.mag + w.mag

    def _fit(self, v: Node, ty: str) -> Node:
        """v made storable into `ty` (a conversion across kinds; f16 needs |v| < 65504)."""
        if M.is_float(ty) and not M.is_float(v.ty):
            v = Conv("f64" if ty == "f64" else "f32", v)
        elif not M.is_float(ty) and M.is_float(v.ty):
            if v.exact:
                return Conv(ty, v)
            return Conv(ty, self.gen(v.shape, "f32", 1, exact_only=True)) if v.shape else Lit(1, ty)
        if ty == "f16" and v.mag > 6e4:
            return Un("tanh", v)
        return v

    def store(self, out: List[Stmt]):
        """Y[r :+ R, c :+ C] = e (or a reduction's [R, 1] / [1, C] result, or a broadcast)."""
        g = self.g
        fam = g.pick(["f32", "f64", "i32", "i64"], [6, 1, 2, 1])
        main = self.shape_main()
        form = g.pick(["main", "rowred", "colred", "bcast"], [5, 1.5, 1, 0.7])
        if self.rank == 1 and form == "colred":
            form = "main"
        if form == "main":
            shape = main
            v = self.gen(shape, fam, g.ri(1, 4))
            starts, lens = ([self.r, self.c] if self.rank == 2 else [self.r]), list(shape)
        elif form == "rowred":
            shape = (self.R, 1) if self.rank == 2 else (1,)
            v = self.gen_red(shape, fam, g.ri(1, 3), False)
            if self.rank == 2:
                # with a 2-D grid each column block writes its own column
                col = CTX_BY * 1 if g.GY > 1 else Ix.const(g.ri(0, 2))
                starts, lens = [self.r, col], [self.R, 1]
            else:
                starts, lens = [CTX_BX * 1], [1]
        elif form == "colred":
            shape = (1, self.C)
            v = self.gen_red(shape, fam, g.ri(1, 3), False)
            starts, lens = [CTX_BX * 1, self.c], [1, self.C]
        else:   # a broadcast store: a [R, 1] (or [1]) value into the whole window
            shape = (self.R, 1) if self.rank == 2 else (1,)
            v = self.gen(shape, fam, g.ri(0, 2))
            starts, lens = ([self.r, self.c] if self.rank == 2 else [self.r]), list(main)
            g.features.add("bcast_store")
            if "neg_start" in g.features or "rt_start" in g.features:
                g.features.add("bcast_store_neg")
        ty = {"f32": g.pick(["f32", "f16", "bf16", "f64"], [5, 1, 1, 1]), "f64": g.pick(["f64", "f32"]),
              "i32": g.pick(["i32", "i8", "i64", "u8"], [4, 1, 1, 1]), "i64": g.pick(["i64", "i32"])}[fam]
        v = self._fit(v, ty)
        if form == "rowred" and self.rank == 2:
            Y = self.g.tensor("Y", ty, [self.rows, lens[1] + g.ri(1, 3)], role="out")
        elif form == "colred":
            Y = self.g.tensor("Y", ty, [g.G + g.ri(0, 2), self.ncols(max(self.cols_total, self.C))], role="out")
        elif self.rank == 1 and form == "rowred":
            Y = self.g.tensor("Y", ty, [g.G + g.ri(0, 3)], role="out")
        else:
            Y = self.out_tensor(ty, main)
        out.append(Store(Y, "tensor", starts, lens, v))


def program(seed: int, index: int) -> Program:
    """Program `index` of `seed` (always the same for the same numbers)."""
    return Gen(seed, index).build()
