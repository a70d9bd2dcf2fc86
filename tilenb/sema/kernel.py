"""The checker of one kernel variant: its parameters, @launch, @cluster and @grid, its body
(through `statements` and `expressions`), then the whole-kernel rules (@registers, the
shared-memory budget of `budget`).

Guarantees: `_KernelChecker.run` returns (KernelIR, []) or (None, errors), and leaves in
`pending_budget` the part of the budget check that needs the variant's whole analysis (None
where a bound settled it; `budget.check_budget`). In the IR it
returns every `Const` holds a value representable in its type, and `KernelIR.uniformity` /
`KernelIR.scalar_uniformity` are the one record of section 11's rules (read later through
`tilenb.analysis.uniformity`). Uniformity of scalar `var`s and of loops that threads leave early
is found by re-walking until nothing rises (values only go up, so this ends). `run_shared`
gives a variant the walk of another that would check the same way.

The checker is one object whose rules are grouped by concern in mixin classes: statements
(`statements.StatementRules`), expressions and types (`expressions.ExpressionRules`); the
built-ins' typing rules are functions in `builtins`, handed the checker.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .. import ir
from .. import types as T
from ..lang import ast as A
from ..lang.diagnostics import Source, TileError, TileNameError, TileRuleError, TileShapeError, TileTypeError
from . import builtins as B
from . import budget
from .expressions import ExpressionRules
from .scope import _Abort, _Env, _Tune, _Unavailable
from .statements import StatementRules
from .values import _const_int, _type_str


@dataclass
class _Shared:
    """What a checked variant lends the variants whose body would check the same way."""
    params: Tuple[ir.Param, ...]
    dims: Dict[str, ir.Sym]
    body: Tuple[ir.Stmt, ...]
    registers: Tuple[ir.Sym, ...]
    uniformity: Dict[int, int]
    sym_uni: Dict[int, int]
    inlined: int        # function bodies inlined by @launch and @grid
    scalar_uniformity: Dict[ir.Sym, int]   # the record KernelIR.scalar_uniformity
    # @grid of the variants sharing this walk, by the values of the @autotune names it can reach
    # (`_grid_names`): (grid, function bodies it inlined); and the budget check's tile sizes
    grids: Dict[tuple, tuple] = field(default_factory=dict)
    memo: dict = field(default_factory=dict)


class _KernelChecker(StatementRules, ExpressionRules):
    """Checks one kernel for one set of @autotune values (see the module docstring)."""

    def __init__(self, k: A.Kernel, fns, recursive, src: Source, tune: Dict[str, int], attrs, grid_key=None):
        self.k = k
        # the values of the @autotune names @grid can reach (`_grid_names`): variants sharing a
        # walk with equal ones have the same @grid (None: not worked out, always checked)
        self.grid_key = grid_key
        self.budget_memo = None   # the shared walk's memo of tile sizes (`check_budget`)
        self.pending_budget = None   # the budget check left for when the variant is asked for
        self.fns = fns
        self.recursive = recursive
        self.src = src
        self.tune = tune
        self.attrs = attrs
        self.errors: List[TileError] = []
        self.uid = 0
        # Uniformity that later statements can raise, kept across walks: of scalar vars (per
        # declaration site) and of loops that some threads leave early (per loop site).
        self.var_uni: Dict[tuple, int] = {}
        self.loop_div: Dict[tuple, tuple] = {}
        self.sym_uni: Dict[int, int] = {}
        self.sym_key: Dict[int, tuple] = {}
        self.inline_path: Tuple[tuple, ...] = ()
        self.call_stack: List[str] = []
        self.call_sites: List[Tuple[str, A.Span]] = []

    # ---- errors
    def err(self, cls, msg, span):
        if self.call_sites:
            name, site = self.call_sites[-1]
            msg += f" (in '{name}', called at line {site.line + self.src.line_offset})"
        self.errors.append(self.src.error(cls, msg, span.line, span.column))

    def fail(self, cls, msg, span):
        self.err(cls, msg, span)
        raise _Abort()

    def new_sym(self, name, kind, typ, span):
        self.uid += 1
        return ir.Sym(name, kind, typ, span.line, self.uid)

    # ---- driver
    def run(self):
        while True:
            before = (dict(self.var_uni), dict(self.loop_div))
            self.errors = []
            self.uid = 0
            self.sym_uni = {}
            self.sym_key = {}
            kir = self.check_kernel()
            if (self.var_uni, self.loop_div) == before:
                break
        if self.errors:
            return None, self.errors
        return kir, []

    def check_kernel(self) -> ir.KernelIR:
        k = self.k
        self.shared = None
        self.pending_budget = None
        self.inlined = 0
        self.kernel_stmt = None
        env = _Env()
        for n, v in self.tune.items():
            env.names[n] = _Tune(v)
        params = []
        dims: Dict[str, ir.Sym] = {}
        for p in k.params:
            prior = env.lookup(p.name)
            if isinstance(prior, _Tune) or p.name in [q.sym.name for q in params]:
                self.err(TileNameError, f"parameter '{p.name}' is defined twice (or has the name of an @autotune value)", p.span)
                continue
            if p.name in B.all_names() or p.name in B.CONSTANTS or p.name == "ctx":
                self.err(TileNameError, f"parameter '{p.name}' has a built-in name; choose another", p.span)
                continue
            if isinstance(prior, ir.Sym) and prior.kind == "dim":
                self.err(TileNameError, f"parameter '{p.name}' has the name of a dimension", p.span)
                continue
            t = p.type
            if isinstance(t, A.TileTypeExpr):
                self.err(TileRuleError, f"parameter '{p.name}' is a tile; kernels receive tensors (tensor<{t.dtype}>[...]) and make their own tiles", t.span)
                continue
            if isinstance(t, A.TensorTypeExpr):
                if t.dtype not in T.ELEMENT_DTYPES:
                    self.err(TileTypeError, f"'{t.dtype}' is not an element type (one of {', '.join(T.ELEMENT_DTYPES)})", t.span)
                    continue
                if not 1 <= len(t.dims) <= 4:
                    self.err(TileShapeError, f"tensor '{p.name}' has {len(t.dims)} dimensions; tensors have 1 to 4", t.span)
                    continue
                tdims = []
                for axis, (d, ds) in enumerate(zip(t.dims, t.dim_spans)):
                    if isinstance(d, int):
                        if d <= 0 or d >= 2 ** 62:
                            self.err(TileShapeError, f"dimension {axis} of '{p.name}' has the extent {d}; an extent "
                                     f"must be a positive size below 2**62", ds)
                        tdims.append(d)
                    elif d in self.tune:
                        if self.tune[d] <= 0:
                            self.err(TileShapeError, f"dimension {d}={self.tune[d]} of '{p.name}' must be positive", ds)
                        tdims.append(self.tune[d])
                    else:
                        b = env.lookup(d)
                        if b is not None and not (isinstance(b, ir.Sym) and b.kind == "dim"):
                            self.err(TileNameError, f"dimension name '{d}' is already the name of a parameter", ds)
                            continue
                        if d in B.all_names() or d in B.CONSTANTS or d == "ctx":
                            self.err(TileNameError, f"dimension name '{d}' is a built-in name; choose another", ds)
                            continue
                        if d not in dims:
                            dims[d] = self.new_sym(d, "dim", ir.ScalarT("index"), ds)
                            env.names[d] = dims[d]
                            self.sym_uni[id(dims[d])] = ir.UNIFORM
                        tdims.append(d)
                sym = self.new_sym(p.name, "tensor", ir.TensorT(t.dtype, tuple(tdims)), p.span)
            else:
                if t.name not in T.DTYPES or t.name == "index":
                    self.err(TileTypeError, f"unknown type '{t.name}' (scalar parameters are one of {', '.join(n for n in T.DTYPES if n != 'index')})", t.span)
                    continue
                sym = self.new_sym(p.name, "scalar_param", ir.ScalarT(t.name), p.span)
                self.sym_uni[id(sym)] = ir.UNIFORM
            env.names[p.name] = sym
            params.append(ir.Param(sym, p.span))
        threads, grid = self.launch_and_grid(env, params, dims)
        grid_inlined = self.inlined
        self.dynshared = "dynshared" in self.attrs
        self.register_names = []
        if "registers" in self.attrs:
            self.register_names = [(a.id, a.span) for a in self.attrs["registers"].args]
        self.tile_decls: Dict[str, List[ir.Sym]] = {}
        self.stmt_uni: Dict[int, int] = {}
        self.loop_depth = 0
        self.returned: Optional[int] = None      # line of the first 'return' checked so far
        self.cluster_reduced = None               # span of the last cluster reduction checked so far
        self.control: List[Tuple[int, A.Span, str]] = []
        self.diverged: List[Optional[tuple]] = [None]  # per loop frame (0: the kernel body)
        self.loop_keys: List[tuple] = []
        self.fn_frames: List[dict] = []
        inlined = self.inlined
        body = self.block(k.body, env.child())
        regs = []
        for name, span in self.register_names:
            syms = self.tile_decls.get(name)
            if not syms:
                self.err(TileNameError, f"@registers names '{name}', but the kernel declares no tile of that name", span)
            else:
                regs.extend(syms)
        scalar_uni = self.scalar_levels(params, dims, body)
        kir = ir.KernelIR(k.name, tuple(params), dims, dict(self.tune), threads, grid, self.dynshared,
                          tuple(regs), body, k.span, dict(self.stmt_uni), self.cluster, scalar_uni)
        if not self.errors:
            self.check_registers(kir)
        if not self.errors:
            self.shared = _Shared(tuple(params), dims, body, tuple(regs), dict(self.stmt_uni), dict(self.sym_uni),
                                  inlined, scalar_uni)
            if self.grid_key is not None:
                self.shared.grids[self.grid_key] = (grid, grid_inlined)
            self.budget_memo = self.shared.memo
            self.check_budget(kir)
        return kir

    def run_shared(self, shared: "_Shared"):
        """This variant, with the parameters and the checked body of another whose @autotune
        values differ only in names that the parameters, the body and the functions never
        mention (`_body_names`), so that checking them again would make the same IR (same
        Syms and uids) and no error. Only what such names can reach is checked for this variant:
        @launch, @grid and the shared-memory budget (which counts threads through the mma
        tiles). Returns (kir, errors) as `run` does, or None where @launch or @grid has an error
        or inlines a different number of calls (the caller then checks the variant in full)."""
        self.errors = []
        self.pending_budget = None
        self.sym_uni = dict(shared.sym_uni)
        self.sym_key = {}
        self.inlined = 0
        self.kernel_stmt = None
        env = _Env()
        for n, v in self.tune.items():
            env.names[n] = _Tune(v)
        for n, sym in shared.dims.items():
            env.names[n] = sym
        for p in shared.params:
            env.names[p.sym.name] = p.sym
        threads, grid = self.launch_and_grid(env, list(shared.params), shared.dims, shared.grids)
        if self.errors or self.inlined != shared.inlined:
            return None
        self.dynshared = "dynshared" in self.attrs
        kir = ir.KernelIR(self.k.name, shared.params, dict(shared.dims), dict(self.tune), threads, grid,
                          self.dynshared, shared.registers, shared.body, self.k.span, dict(shared.uniformity),
                          self.cluster, dict(shared.scalar_uniformity))
        self.budget_memo = shared.memo
        self.check_budget(kir)
        if self.errors:
            return None, self.errors
        return kir, []

    def launch_and_grid(self, env, params, dims, grids=None):
        """The attributes that need the environment: (threads per CTA, @grid extents or None).
        grids: the shared walk's @grid by `grid_key` (variants whose @grid reaches the same
        @autotune values over the same parameters get the same one), filled and read here."""
        threads = 256
        if "launch" in self.attrs:
            at = self.attrs["launch"]
            n = _const_int(at.args[0], self.src, self.errors, "@launch's thread count", env)
            if n is not None:
                if not (32 <= n <= 1024 and n % 32 == 0):
                    self.err(TileRuleError, f"@launch({n}): threads per CTA must be a multiple of 32 (whole warps) from 32 to 1024", at.args[0].span)
                else:
                    threads = n
        self.threads = threads
        self.cluster = 1
        if "cluster" in self.attrs:
            at = self.attrs["cluster"]
            n = _const_int(at.args[0], self.src, self.errors, "@cluster's CTA count", env)
            if n is not None:
                if not 1 <= n <= B.MAX_CLUSTER:
                    self.err(TileRuleError, f"@cluster({n}): a thread block cluster holds 1 to {B.MAX_CLUSTER} CTAs "
                             f"(CUDA's portable limit)", at.args[0].span)
                else:
                    self.cluster = n
        grid = None
        if "grid" in self.attrs and grids is not None and self.grid_key in grids:
            grid, n = grids[self.grid_key]
            self.inlined += n
        elif "grid" in self.attrs:
            inlined, nerr = self.inlined, len(self.errors)
            genv = _Env()
            for n, v in self.tune.items():
                genv.names[n] = _Tune(v)
            for n, s in dims.items():
                genv.names[n] = s
            for p in params:
                if p.sym.kind == "scalar_param":
                    genv.names[p.sym.name] = p.sym
                elif p.sym.kind == "tensor":
                    genv.names[p.sym.name] = _Unavailable(
                        f"@grid takes expressions over runtime dimensions, @autotune names and scalar "
                        f"parameters; '{p.sym.name}' is a tensor (use one of its dimensions instead)")
            gl = []
            for a in self.attrs["grid"].args:
                try:
                    e = self.expr(a, genv, allow_ctx=False)
                    if not isinstance(e.type, ir.ScalarT) or not T.DTYPES[e.type.dtype].is_int:
                        self.fail(TileTypeError, f"@grid's extents must be integers, not {_type_str(e.type)}", a.span)
                    g = self.fin(self.to_index(e, a.span))
                    if isinstance(g, ir.Const) and int(g.value) < 1:
                        # known while checking: refused here, at the extent, not at every launch
                        # (an extent over runtime dimensions is checked at launch: checks.resolve_grid)
                        self.fail(TileRuleError, f"@grid gives {int(g.value)} CTAs along {'xyz'[len(gl)]}; a grid has "
                                  f"at least 1 CTA along each axis", a.span)
                    gl.append(g)
                except _Abort:
                    pass
            grid = tuple(gl)
            if grids is not None and self.grid_key is not None and len(self.errors) == nerr:
                grids[self.grid_key] = (grid, self.inlined - inlined)
        return threads, grid

    # ---- whole-kernel checks
    def check_registers(self, kir):
        """A @registers tile may be updated elementwise, accumulate a dot and be stored."""
        regs = set(id(s) for s in kir.registers)
        if not regs:
            return
        for s in ir.walk_stmts(kir.body):
            if isinstance(s, (ir.Let,)) and isinstance(s.value, ir.Ref) and id(s.value.sym) in regs:
                self.err(TileRuleError, f"'{s.value.sym.name}' is kept in registers (@registers) and cannot be viewed by a let", s.span)
            if isinstance(s, ir.ClusterReduce) and id(s.target.sym) in regs:
                self.err(TileRuleError, f"'{s.target.sym.name}' is kept in registers (@registers); cluster_{s.op} "
                         f"combines tiles in shared memory (drop it from @registers)", s.target.span)

    def check_budget(self, kir):
        """The shared-memory budget (spec section 12): `budget.check_budget`. The part that needs
        the variant's whole analysis, where there is one, is kept in `self.pending_budget` (a
        function of no arguments returning a TileBudgetError or None), for `results.CheckedKernel`
        to call when the variant is first asked for."""
        self.pending_budget = budget.check_budget(kir, self.src, self.budget_memo, self.errors)
