"""The checker: a parsed program -> typed tile IR per kernel and @autotune variant.

Guarantees: `check_program` either returns a `CheckedProgram` whose every kernel variant is a
consistent `tilenb.ir.KernelIR`, or raises the first `TileError` by position carrying every
error found (`.diagnostics`). It enforces the language's static rules: names, functions
(inlining, hygiene, aliasing, recursion, jumps), types, shapes, constants, uniformity of tile
statements and barriers, @registers, and the shared-memory budget (from tile lifetimes).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

from .. import ir
from .. import types as T
from ..lang import ast as A
from ..lang.diagnostics import (Source, TileBudgetError, TileError, TileNameError, TileRuleError,
                                TileShapeError, TileTypeError, combine)
from . import builtins as B

STATIC_SMEM_BYTES = 48 * 1024
# The opt-in per-block shared memory limit of sm_90 (H100/H200): 227 KB, CUDA C Programming
# Guide, "Compute Capabilities", table "Technical Specifications per Compute Capability".
DYNAMIC_SMEM_BYTES = 227 * 1024
MAX_VARIANTS = 256


class _Abort(Exception):
    """Stops checking one expression after its error has been recorded."""


# ---- bindings in scope -----------------------------------------------------------------------
@dataclass
class _Tune:
    value: int


@dataclass
class _MacroArg:
    """A function parameter: the argument's syntax, checked where the call is."""
    expr: A.Expr
    env: "_Env"
    fn: str


class _Env:
    def __init__(self, parent: Optional["_Env"] = None):
        self.parent = parent
        self.names: Dict[str, object] = {}

    def lookup(self, name):
        e = self
        while e is not None:
            if name in e.names:
                return e.names[name]
            e = e.parent
        return None

    def child(self):
        return _Env(self)


@dataclass
class CheckedKernel:
    """A kernel's syntax, its @autotune space, and its checked variants (IR per tune values)."""
    ast: A.Kernel
    tune_space: Tuple[Tuple[str, Tuple[int, ...]], ...]
    variants: Dict[Tuple[Tuple[str, int], ...], ir.KernelIR]

    def variant(self, **tune) -> ir.KernelIR:
        key = tuple(sorted(tune.items()))
        if key in self.variants:
            return self.variants[key]
        names = [n for n, _ in self.tune_space]
        missing = [n for n in names if n not in tune]
        extra = [n for n in tune if n not in names]
        if extra:
            raise TileNameError(f"kernel {self.ast.name} has no @autotune name {extra[0]!r}"
                                f" (it has: {', '.join(names) or 'none'})")
        if missing:
            raise TileNameError(f"kernel {self.ast.name}: give a value for @autotune name {missing[0]!r}")
        for n, vals in self.tune_space:
            if tune[n] not in vals:
                raise TileNameError(f"kernel {self.ast.name}: {n}={tune[n]} is not one of its @autotune values {list(vals)}")
        raise TileNameError(f"kernel {self.ast.name}: no variant {tune}")

    def default_tune(self) -> Dict[str, int]:
        return {n: vals[0] for n, vals in self.tune_space}


@dataclass
class CheckedProgram:
    kernels: Dict[str, CheckedKernel]
    functions: Dict[str, A.Function]
    source: Source


def check_program(prog: A.Program, src: Source) -> CheckedProgram:
    errors: List[TileError] = []
    fns: Dict[str, A.Function] = {}
    kernels: Dict[str, CheckedKernel] = {}
    reserved = B.all_names() | set(B.CONSTANTS) | {"ctx", "range"}
    for f in prog.functions:
        if f.name in reserved:
            errors.append(src.error(TileNameError, f"'{f.name}' is a built-in name; choose another name for this function", f.span.line, f.span.column))
        elif f.name in fns:
            errors.append(src.error(TileNameError, f"function '{f.name}' is defined twice (first at line {fns[f.name].span.line + src.line_offset})", f.span.line, f.span.column))
        else:
            fns[f.name] = f
        if len(set(f.params)) != len(f.params):
            errors.append(src.error(TileNameError, f"function '{f.name}' names a parameter twice", f.span.line, f.span.column))
    errors.extend(_check_recursion(fns, src))
    for k in prog.kernels:
        if k.name in kernels or k.name in fns:
            errors.append(src.error(TileNameError, f"'{k.name}' is defined twice", k.name_span.line, k.name_span.column))
            continue
        if k.name in reserved:
            errors.append(src.error(TileNameError, f"'{k.name}' is a built-in name; choose another name for this kernel", k.name_span.line, k.name_span.column))
            continue
        ck, errs = _check_kernel(k, fns, src)
        errors.extend(errs)
        if ck is not None:
            kernels[k.name] = ck
    if errors:
        raise combine(errors)
    return CheckedProgram(kernels, fns, src)


def _calls_in(node):
    """Names of every call in an AST subtree."""
    out = []

    def visit(n):
        if isinstance(n, A.Call):
            out.append((n.func, n.span))
        if isinstance(n, tuple):
            for c in n:
                visit(c)
            return
        if hasattr(n, "__dataclass_fields__"):
            for f in n.__dataclass_fields__:
                visit(getattr(n, f))
    visit(node)
    return out


def _check_recursion(fns, src):
    errors = []
    graph = {name: [c for c, _ in _calls_in(f.body) if c in fns] for name, f in fns.items()}
    reported = set()
    for start in fns:
        # depth-first search for a path back to `start`
        stack = [(start, [start])]
        seen = set()
        while stack:
            node, path = stack.pop()
            for nxt in graph[node]:
                if nxt == start:
                    cycle = frozenset(path)
                    if cycle not in reported:
                        reported.add(cycle)
                        f = fns[start]
                        chain = " -> ".join(path + [start])
                        errors.append(src.error(TileRuleError, f"function '{start}' calls itself ({chain}); functions are inlined, so recursion is not allowed", f.span.line, f.span.column))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, path + [nxt]))
    return errors


def _const_int(expr, src, errors, what, env=None) -> Optional[int]:
    """Fold an attribute argument (literal, or arithmetic on literals and tune names)."""
    try:
        v = _fold(expr, env)
    except _NotConst:
        errors.append(src.error(TileRuleError, f"{what} must be a constant: an integer literal or an @autotune name", expr.span.line, expr.span.column))
        return None
    if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
        errors.append(src.error(TileTypeError, f"{what} must be an integer", expr.span.line, expr.span.column))
        return None
    return int(v)


class _NotConst(Exception):
    pass


def _fold(e, env):
    if isinstance(e, A.IntLit):
        return e.value
    if isinstance(e, A.FloatLit):
        return float(np.float32(e.value))
    if isinstance(e, A.Name) and env is not None:
        b = env.lookup(e.id)
        if isinstance(b, _Tune):
            return b.value
        raise _NotConst()
    if isinstance(e, A.Unary) and e.op == "-":
        return -_fold(e.operand, env)
    if isinstance(e, A.Binary) and e.op in ("+", "-", "*", "/", "%"):
        a, b = _fold(e.left, env), _fold(e.right, env)
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if e.op == "*":
            return a * b
        if isinstance(a, int) and isinstance(b, int):
            if b == 0:
                raise _NotConst()
            q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
            return q if e.op == "/" else a - q * b
        if e.op == "/":
            if b == 0:
                raise _NotConst()
            return a / b
        raise _NotConst()
    if isinstance(e, A.Call) and e.func == "cdiv" and len(e.args) == 2:
        a, b = _fold(e.args[0], env), _fold(e.args[1], env)
        if not isinstance(a, int) or not isinstance(b, int) or b == 0:
            raise _NotConst()
        return -(-a // b)
    raise _NotConst()


def _check_kernel(k: A.Kernel, fns, src) -> Tuple[Optional[CheckedKernel], List[TileError]]:
    errors: List[TileError] = []
    tune_space: List[Tuple[str, Tuple[int, ...]]] = []
    seen_attrs = {}
    for at in k.attributes:
        if at.name not in B.ATTRIBUTES:
            errors.append(src.error(TileRuleError, f"unknown attribute '@{at.name}' (known: {', '.join('@' + a for a in B.ATTRIBUTES)})", at.span.line, at.span.column))
            continue
        if at.name in seen_attrs:
            errors.append(src.error(TileRuleError, f"'@{at.name}' is given twice", at.span.line, at.span.column))
            continue
        seen_attrs[at.name] = at
        if at.name == "autotune":
            if not at.args:
                errors.append(src.error(TileRuleError, "@autotune needs at least one 'NAME in [values]'", at.span.line, at.span.column))
            for arg in at.args:
                if not isinstance(arg, A.TuneArg):
                    errors.append(src.error(TileRuleError, "@autotune takes entries of the form 'NAME in [v1, v2]'", arg.span.line, arg.span.column))
                    continue
                if any(arg.name == n for n, _ in tune_space):
                    errors.append(src.error(TileNameError, f"@autotune names '{arg.name}' twice", arg.span.line, arg.span.column))
                    continue
                if not arg.values:
                    errors.append(src.error(TileRuleError, f"@autotune name '{arg.name}' needs at least one value", arg.span.line, arg.span.column))
                    continue
                vals = []
                for v in arg.values:
                    c = _const_int(v, src, errors, f"an @autotune value of {arg.name}")
                    if c is not None:
                        vals.append(c)
                if len(vals) == len(arg.values):
                    tune_space.append((arg.name, tuple(dict.fromkeys(vals))))
        elif at.name == "dynshared":
            if at.args:
                errors.append(src.error(TileRuleError, "@dynshared takes no arguments", at.span.line, at.span.column))
        elif at.name == "launch":
            if len(at.args) != 1 or isinstance(at.args[0], A.TuneArg):
                errors.append(src.error(TileRuleError, "@launch takes one argument: the number of threads per CTA", at.span.line, at.span.column))
        elif at.name == "registers":
            if not at.args or not all(isinstance(a, A.Name) for a in at.args):
                errors.append(src.error(TileRuleError, "@registers takes the names of tiles, as in @registers(acc, m)", at.span.line, at.span.column))
        elif at.name == "grid":
            if not 1 <= len(at.args) <= 3 or any(isinstance(a, A.TuneArg) for a in at.args):
                errors.append(src.error(TileRuleError, "@grid takes one to three expressions (x, y, z)", at.span.line, at.span.column))
    if errors:
        return None, errors
    combos = list(itertools.product(*[vals for _, vals in tune_space]))
    if len(combos) > MAX_VARIANTS:
        at = seen_attrs["autotune"]
        return None, [src.error(TileRuleError, f"@autotune makes {len(combos)} variants; at most {MAX_VARIANTS} are allowed", at.span.line, at.span.column)]
    variants = {}
    names = [n for n, _ in tune_space]
    for i, combo in enumerate(combos):
        tune = dict(zip(names, combo))
        kir, errs = _KernelChecker(k, fns, src, tune, seen_attrs).run()
        if errs:
            if i > 0:
                label = ", ".join(f"{n}={v}" for n, v in tune.items())
                for e in errs:
                    e.message += f" (in the variant {label})"
            return None, errs
        variants[tuple(sorted(tune.items()))] = kir
    return CheckedKernel(k, tuple(tune_space), variants), []


def _broadcast(a: Tuple[int, ...], b: Tuple[int, ...]) -> Optional[Tuple[int, ...]]:
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + a
    b = (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            return None
    return tuple(out)


def _fits(value: Tuple[int, ...], target: Tuple[int, ...]) -> bool:
    """Whether a value of shape `value` broadcasts to exactly `target`."""
    return _broadcast(value, target) == tuple(target) and len(value) <= len(target)


def _shape_str(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _type_str(t):
    if isinstance(t, ir.ScalarT):
        return t.dtype
    if isinstance(t, ir.TileT):
        return f"tile<{t.dtype}>{_shape_str(t.shape)}"
    if isinstance(t, ir.TensorT):
        return f"tensor<{t.dtype}>{_shape_str(t.dims)}"
    return "?"


class _KernelChecker:
    def __init__(self, k: A.Kernel, fns, src: Source, tune: Dict[str, int], attrs):
        self.k = k
        self.fns = fns
        self.src = src
        self.tune = tune
        self.attrs = attrs
        self.errors: List[TileError] = []
        self.uid = 0
        # uniformity: of lets/loop vars/views per Sym; of vars per declaration site, found by
        # re-running the walk until nothing rises (values can only go up, so this ends).
        self.var_uni: Dict[tuple, int] = {}
        self.sym_uni: Dict[int, int] = {}
        self.sym_key: Dict[int, tuple] = {}
        self.inline_path: Tuple[tuple, ...] = ()
        self.call_stack: List[str] = []

    # ---- errors
    def err(self, cls, msg, span):
        self.errors.append(self.src.error(cls, msg, span.line, span.column))

    def fail(self, cls, msg, span):
        self.err(cls, msg, span)
        raise _Abort()

    def new_sym(self, name, kind, typ, span):
        self.uid += 1
        return ir.Sym(name, kind, typ, span.line, self.uid)

    # ---- driver
    def run(self):
        for _ in range(6):
            before = dict(self.var_uni)
            self.errors = []
            self.uid = 0
            self.sym_uni = {}
            kir = self.check_kernel()
            if self.var_uni == before:
                break
        if self.errors:
            return None, self.errors
        return kir, []

    def check_kernel(self) -> Optional[ir.KernelIR]:
        k = self.k
        env = _Env()
        for n, v in self.tune.items():
            env.names[n] = _Tune(v)
        params = []
        dims: Dict[str, ir.Sym] = {}
        for p in k.params:
            if env.lookup(p.name) is not None and not isinstance(env.lookup(p.name), ir.Sym) or p.name in [q.sym.name for q in params]:
                self.err(TileNameError, f"parameter '{p.name}' is defined twice (or clashes with an @autotune name)", p.span)
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
                for d, ds in zip(t.dims, t.dim_spans):
                    if isinstance(d, int):
                        if d <= 0:
                            self.err(TileShapeError, f"dimension {d} of '{p.name}' must be positive", ds)
                        tdims.append(d)
                    elif d in self.tune:
                        tdims.append(self.tune[d])
                    else:
                        b = env.lookup(d)
                        if b is not None and not (isinstance(b, ir.Sym) and b.kind == "dim"):
                            self.err(TileNameError, f"dimension name '{d}' is already the name of a parameter", ds)
                            continue
                        if d not in dims:
                            dims[d] = self.new_sym(d, "dim", ir.ScalarT("index"), ds)
                            env.names[d] = dims[d]
                            self.sym_uni[id(dims[d])] = ir.UNIFORM
                        tdims.append(d)
                sym = self.new_sym(p.name, "tensor", ir.TensorT(t.dtype, tuple(tdims)), p.span)
            else:
                if t.name not in T.DTYPES or t.name == "index":
                    self.err(TileTypeError, f"unknown type '{t.name}'", t.span)
                    continue
                sym = self.new_sym(p.name, "scalar_param", ir.ScalarT(t.name), p.span)
                self.sym_uni[id(sym)] = ir.UNIFORM
            if isinstance(env.lookup(p.name), ir.Sym) and env.lookup(p.name).kind == "dim":
                self.err(TileNameError, f"parameter '{p.name}' has the name of a dimension", p.span)
                continue
            env.names[p.name] = sym
            params.append(ir.Param(sym, p.span))
        # attributes that need the environment
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
        grid = None
        if "grid" in self.attrs:
            genv = _Env()
            for n, v in self.tune.items():
                genv.names[n] = _Tune(v)
            for n, s in dims.items():
                genv.names[n] = s
            for p in params:
                if p.sym.kind == "scalar_param":
                    genv.names[p.sym.name] = p.sym
            gl = []
            for a in self.attrs["grid"].args:
                try:
                    e = self.expr(a, genv, allow_ctx=False)
                    if not isinstance(e.type, ir.ScalarT) or not T.DTYPES[e.type.dtype].is_int:
                        self.fail(TileTypeError, "@grid's extents must be integers", a.span)
                    gl.append(e)
                except _Abort:
                    pass
            grid = tuple(gl)
        self.dynshared = "dynshared" in self.attrs
        self.register_names = []
        if "registers" in self.attrs:
            self.register_names = [(a.id, a.span) for a in self.attrs["registers"].args]
        self.tile_decls: Dict[str, List[ir.Sym]] = {}
        self.loop_depth = 0
        self.control: List[Tuple[int, A.Span, str]] = []
        self.diverged: List[Optional[Tuple[int, A.Span, str]]] = [None]  # per loop frame (0: kernel)
        self.fn_frames: List[dict] = []
        body = self.block(k.body, env.child())
        regs = []
        for name, span in self.register_names:
            syms = self.tile_decls.get(name)
            if not syms:
                self.err(TileNameError, f"@registers names '{name}', but the kernel declares no tile of that name", span)
            else:
                regs.extend(syms)
        kir = ir.KernelIR(k.name, tuple(params), dims, dict(self.tune), threads, grid, self.dynshared,
                          tuple(regs), body, k.span)
        if not self.errors:
            self.check_registers(kir)
        if not self.errors:
            self.check_budget(kir)
        return kir

    # ---- control uniformity
    def control_level(self):
        lvl = max([c[0] for c in self.control] + [ir.UNIFORM])
        for d in self.diverged:
            if d is not None:
                lvl = max(lvl, d[0])
        return lvl

    def control_reason(self):
        worst = None
        for c in list(self.control) + [d for d in self.diverged if d is not None]:
            if c[0] > ir.UNIFORM and (worst is None or c[0] > worst[0]):
                worst = c
        return worst

    def require_uniform_control(self, what, span):
        lvl = self.control_level()
        if lvl > ir.UNIFORM:
            _, rspan, desc = self.control_reason()
            self.fail(TileRuleError, f"{what} under {ir.UNIFORMITY_NAMES[lvl]} control: {desc} at line {rspan.line + self.src.line_offset} differs between threads, but {what.split(' (')[0]} needs every thread of the CTA", span)

    # ---- statements
    def block(self, stmts, env) -> Tuple[ir.Stmt, ...]:
        out = []
        scope_names = {}
        for s in stmts:
            try:
                r = self.stmt(s, env, scope_names)
            except _Abort:
                continue
            if r is None:
                continue
            if isinstance(r, list):
                out.extend(r)
            else:
                out.append(r)
        return tuple(out)

    def declare(self, env, scope_names, name, sym_or_binding, span):
        if name in scope_names:
            self.fail(TileNameError, f"'{name}' is already defined in this block (line {scope_names[name] + self.src.line_offset}); use another name, or assign with '{name} = ...' if it is a var", span)
        if name in B.all_names() or name in ("ctx",) or name in B.CONSTANTS:
            self.fail(TileNameError, f"'{name}' is a built-in name; choose another", span)
        if isinstance(env.lookup(name), _Tune):
            self.fail(TileNameError, f"'{name}' is an @autotune name; choose another", span)
        scope_names[name] = span.line
        env.names[name] = sym_or_binding

    def decl_key(self, span):
        return (self.inline_path, span.line, span.column)

    def stmt(self, s, env, scope_names):
        if isinstance(s, A.Let):
            return self.let_stmt(s, env, scope_names)
        if isinstance(s, A.VarDecl):
            return self.var_stmt(s, env, scope_names)
        if isinstance(s, A.Assign):
            return self.assign_stmt(s, env)
        if isinstance(s, A.For):
            return self.for_stmt(s, env, scope_names)
        if isinstance(s, A.While):
            cond = self.cond(s.cond, env, "a while condition")
            u = self.uni(cond)
            self.control.append((u, s.cond.span, f"the while condition '{self.text(s.cond)}'"))
            self.loop_depth += 1
            self.diverged.append(None)
            if self.fn_frames:
                self.fn_frames[-1]["loops"] += 1
            try:
                body = self.block(s.body, env.child())
            finally:
                self.control.pop()
                self.loop_depth -= 1
                self.diverged.pop()
                if self.fn_frames:
                    self.fn_frames[-1]["loops"] -= 1
            return ir.While(cond, body, s.span)
        if isinstance(s, A.If):
            cond = self.cond(s.cond, env, "an if condition")
            u = self.uni(cond)
            self.control.append((u, s.cond.span, f"the condition '{self.text(s.cond)}'"))
            try:
                then = self.block(s.then, env.child())
                orelse = self.block(s.orelse, env.child())
            finally:
                self.control.pop()
            return ir.If(cond, then, orelse, s.span)
        if isinstance(s, (A.Break, A.Continue)):
            word = "break" if isinstance(s, A.Break) else "continue"
            if self.fn_frames and self.fn_frames[-1]["loops"] == 0:
                self.fail(TileRuleError, f"'{word}' in a statement function must be inside a loop of that function", s.span)
            if self.loop_depth == 0:
                self.fail(TileRuleError, f"'{word}' outside a loop", s.span)
            self.note_divergence(len(self.diverged) - 1, word, s.span)
            return ir.Break(s.span) if word == "break" else ir.Continue(s.span)
        if isinstance(s, A.Return):
            if self.fn_frames:
                self.fail(TileRuleError, "'return' is not allowed in a statement function (its body is spliced into the caller)", s.span)
            for i in range(len(self.diverged)):
                self.note_divergence(i, "return", s.span)
            return ir.Return(s.span)
        if isinstance(s, A.ExprStmt):
            return self.expr_stmt(s, env)
        raise AssertionError(s)

    def note_divergence(self, frame, word, span):
        lvl = self.control_level()
        if lvl > ir.UNIFORM:
            cur = self.diverged[frame]
            if cur is None or cur[0] < lvl:
                self.diverged[frame] = (lvl, span, f"the '{word}' taken by some threads only")

    def let_stmt(self, s: A.Let, env, scope_names):
        value = self.expr(s.value, env)
        typ = value.type
        if s.type is not None:
            want = self.type_expr(s.type, env)
            value = self.coerce(value, want, s.value.span, "let")
            typ = want
        if isinstance(typ, ir.TileT):
            is_view = isinstance(value, ir.Slice) or (isinstance(value, ir.Ref) and value.sym.kind in ("var", "let", "view") and isinstance(value.sym.type, ir.TileT))
            if is_view:
                self.require_slice_uniform(value, s.span)
            else:
                self.require_uniform_control("a tile statement (let of a tile)", s.span)
            sym = self.new_sym(s.name, "view" if is_view else "let", typ, s.span)
            self.sym_uni[id(sym)] = ir.UNIFORM
            if not is_view:
                self.tile_decls.setdefault(s.name, []).append(sym)
        else:
            sym = self.new_sym(s.name, "let", typ, s.span)
            self.sym_uni[id(sym)] = max(self.uni(value), self.control_level())
        self.declare(env, scope_names, s.name, sym, s.span)
        return ir.Let(sym, value, s.span)

    def var_stmt(self, s: A.VarDecl, env, scope_names):
        want = self.type_expr(s.type, env) if s.type is not None else None
        value = self.expr(s.value, env) if s.value is not None else None
        if want is None and value is None:
            self.fail(TileTypeError, f"var '{s.name}' needs a type or an initial value", s.span)
        if isinstance(want, ir.TensorT):
            self.fail(TileTypeError, "a var cannot be a tensor; tensors are kernel parameters", s.type.span)
        if want is None:
            want = value.type
            if isinstance(want, ir.ScalarT) and want.dtype == "bool":
                pass
            if isinstance(value, ir.Const) and isinstance(want, ir.ScalarT) and want.dtype == "i32" and isinstance(value.value, (int, np.integer)):
                want = ir.ScalarT("i32")
        if value is not None:
            value = self.coerce(value, want, s.value.span, "var")
        if isinstance(want, ir.TileT):
            self.require_uniform_control("a tile statement (var of a tile)", s.span)
        sym = self.new_sym(s.name, "var", want, s.span)
        key = self.decl_key(s.span)
        self.sym_key[id(sym)] = key
        if isinstance(want, ir.ScalarT):
            u = max(self.uni(value) if value is not None else ir.UNIFORM, self.control_level())
            self.var_uni[key] = max(self.var_uni.get(key, ir.UNIFORM), u)
        else:
            self.tile_decls.setdefault(s.name, []).append(sym)
        self.declare(env, scope_names, s.name, sym, s.span)
        return ir.VarDecl(sym, value, s.span)

    def assign_stmt(self, s: A.Assign, env):
        target = self.target(s.target, env)
        value = self.expr(s.value, env)
        op = s.op
        ttype = target.type
        if op is not None:
            combined = self.binary_types(op, target, value, s.span)
            if isinstance(ttype, ir.TileT) and isinstance(combined, ir.TileT) and not _fits(combined.shape, ttype.shape):
                self.fail(TileShapeError, f"'{self.text(s.value)}' of shape {_shape_str(combined.shape)} does not fit the target of shape {_shape_str(ttype.shape)}", s.value.span)
            check_val = ir.Binary(op, target, value, combined, s.span)
            self.coerce(check_val, ttype, s.value.span, "assign")
            if not isinstance(ttype, ir.TileT):
                value = self.coerce(value, combined if isinstance(combined, ir.ScalarT) else ttype, s.value.span, "assign") if isinstance(value, ir.Const) else value
        else:
            value = self.coerce(value, ttype, s.value.span, "assign")
        if isinstance(ttype, ir.TileT):
            self.require_uniform_control("a tile statement (assignment to a tile)", s.span)
            if isinstance(target, ir.Slice):
                self.require_slice_uniform(target, s.span)
        elif isinstance(target, ir.Ref):
            key = self.sym_key.get(id(target.sym))
            if key is not None:
                u = max(self.uni(value), self.control_level())
                self.var_uni[key] = max(self.var_uni.get(key, ir.UNIFORM), u)
        if isinstance(value, ir.Ref) and isinstance(value.type, ir.TensorT):
            self.fail(TileRuleError, "a tensor cannot be assigned whole; slice it", s.value.span)
        return ir.Assign(target, value, op, s.span)

    def for_stmt(self, s: A.For, env, scope_names):
        if len(s.args) == 1:
            lo_ast, hi_ast, step_ast = None, s.args[0], None
        else:
            lo_ast, hi_ast = s.args[0], s.args[1]
            step_ast = s.args[2] if len(s.args) == 3 else None
        lo = self.index_expr(lo_ast, env, "the loop's start") if lo_ast is not None else ir.Const(0, ir.ScalarT("index"), s.span)
        hi = self.index_expr(hi_ast, env, "the loop's end")
        step = 1
        if step_ast is not None:
            try:
                step = _fold(step_ast, env)
            except _NotConst:
                self.fail(TileRuleError, "a for loop's step must be a constant (a literal or an @autotune name)", step_ast.span)
            if not isinstance(step, int) or step <= 0:
                self.fail(TileRuleError, f"a for loop's step must be a positive integer, not {step}", step_ast.span)
        unroll = 1
        if s.unroll is not None:
            if isinstance(s.unroll, str):
                b = env.lookup(s.unroll)
                if not isinstance(b, _Tune):
                    self.fail(TileRuleError, f"the unroll count '{s.unroll}' must be a constant: an integer literal or an @autotune name", s.unroll_span)
                unroll = b.value
            else:
                unroll = s.unroll
            if unroll < 1:
                self.fail(TileRuleError, f"the unroll count must be at least 1, not {unroll}", s.unroll_span)
        u = max(self.uni(lo), self.uni(hi))
        var = self.new_sym(s.var, "loop", ir.ScalarT("index"), s.span)
        self.sym_uni[id(var)] = max(u, self.control_level())
        benv = env.child()
        if s.var in B.all_names() or s.var == "ctx":
            self.fail(TileNameError, f"'{s.var}' is a built-in name; choose another loop variable", s.span)
        benv.names[s.var] = var
        self.control.append((u, s.span, "the loop bounds"))
        self.loop_depth += 1
        self.diverged.append(None)
        if self.fn_frames:
            self.fn_frames[-1]["loops"] += 1
        try:
            body = self.block(s.body, benv.child())
        finally:
            self.control.pop()
            self.loop_depth -= 1
            self.diverged.pop()
            if self.fn_frames:
                self.fn_frames[-1]["loops"] -= 1
        return ir.For(var, lo, hi, step, unroll, body, s.span)

    def expr_stmt(self, s: A.ExprStmt, env):
        e = s.expr
        if isinstance(e, A.Call):
            if e.func == "barrier":
                if e.args:
                    self.fail(TileRuleError, "barrier() takes no arguments", e.span)
                self.require_uniform_control("barrier() (it would hang)", e.span)
                return ir.Barrier(s.span)
            if e.func in B.ATOMICS:
                return self.atomic(e, env)
            b = env.lookup(e.func)
            if isinstance(b, _MacroArg):
                self.fail(TileRuleError, f"'{e.func}' is a parameter, not a function", e.func_span)
            if e.func in self.fns and not self.fns[e.func].is_expr:
                return self.inline_stmt_fn(self.fns[e.func], e, env)
        # any other expression: its value would be dropped
        self.expr(e, env)
        self.fail(TileRuleError, f"the value of '{self.text(e)}' is not used; assign it, or call a statement function", e.span)

    def atomic(self, e: A.Call, env):
        if len(e.args) != 2:
            self.fail(TileRuleError, f"{e.func}(T[i, ...], v) takes a tensor element and a value", e.span)
        target = self.target(e.args[0], env)
        if not isinstance(target, ir.Element) or target.base.kind != "tensor":
            self.fail(TileRuleError, f"the first argument of {e.func} must be one element of a tensor, as in T[i, j]", e.args[0].span)
        value = self.expr(e.args[1], env)
        if not isinstance(value.type, ir.ScalarT):
            self.fail(TileTypeError, f"{e.func} adds one scalar value", e.args[1].span)
        dt = target.type.dtype
        if dt not in ("f32", "f64", "i32", "i64", "u32", "f16", "bf16"):
            self.fail(TileTypeError, f"{e.func} works on f16, bf16, f32, f64, i32, i64 and u32 tensors, not {dt}", e.args[0].span)
        if e.func == "atomic_max" and dt in ("f16", "bf16"):
            self.fail(TileTypeError, "atomic_max works on f32, f64, i32, i64 and u32 tensors", e.args[0].span)
        value = self.coerce(value, target.type, e.args[1].span, "atomic")
        return ir.Atomic(B.ATOMICS[e.func], target, value, e.span)

    def inline_stmt_fn(self, f: A.Function, call: A.Call, env):
        if len(call.args) != len(f.params):
            self.fail(TileRuleError, f"function '{f.name}' takes {len(f.params)} argument(s), not {len(call.args)}", call.span)
        if f.name in self.call_stack:
            self.fail(TileRuleError, f"function '{f.name}' calls itself; recursion is not allowed", call.span)
        written = _written_params(f)
        for p, a in zip(f.params, call.args):
            if p in written and not isinstance(a, A.Name):
                self.fail(TileRuleError, f"function '{f.name}' indexes or assigns its parameter '{p}', so it must be passed a name, not '{self.text(a)}'", a.span)
        fenv = env.child()
        for p, a in zip(f.params, call.args):
            fenv.names[p] = _MacroArg(a, env, f.name)
        self.call_stack.append(f.name)
        self.fn_frames.append({"loops": 0})
        saved_path = self.inline_path
        self.inline_path = self.inline_path + ((call.span.line, call.span.column),)
        try:
            body = self.block(f.body, fenv.child())
        finally:
            self.call_stack.pop()
            self.fn_frames.pop()
            self.inline_path = saved_path
        return list(body)

    # ---- types written in the source
    def type_expr(self, t, env) -> ir.Type:
        if isinstance(t, A.ScalarTypeExpr):
            if t.name not in T.DTYPES or t.name == "index":
                self.fail(TileTypeError, f"unknown type '{t.name}'", t.span)
            return ir.ScalarT(t.name)
        if isinstance(t, A.TensorTypeExpr):
            self.fail(TileTypeError, "only kernel parameters are tensors", t.span)
        if t.dtype not in T.ELEMENT_DTYPES:
            self.fail(TileTypeError, f"'{t.dtype}' is not a tile element type (one of {', '.join(T.ELEMENT_DTYPES)})", t.span)
        if not 1 <= len(t.dims) <= 2:
            self.fail(TileShapeError, f"a tile has 1 or 2 dimensions, not {len(t.dims)}", t.span)
        shape = []
        for d in t.dims:
            shape.append(self.const_extent(d, env, "a tile's dimension"))
        return ir.TileT(t.dtype, tuple(shape))

    def const_extent(self, d, env, what) -> int:
        try:
            v = _fold(d, env)
        except _NotConst:
            if isinstance(d, A.Name):
                b = env.lookup(d.id)
                if isinstance(b, ir.Sym) and b.kind == "dim":
                    self.fail(TileShapeError, f"{what} must be a constant, but '{d.id}' is a runtime dimension; bind it with @autotune({d.id} in [...]) or use a literal", d.span)
                if isinstance(b, _MacroArg):
                    return self.const_extent(b.expr, b.env, what)
            self.fail(TileShapeError, f"{what} must be a constant: a literal or an @autotune name, not '{self.text(d)}'", d.span)
        if not isinstance(v, int) or v <= 0:
            self.fail(TileShapeError, f"{what} must be a positive integer, not {v}", d.span)
        return v

    # ---- expressions
    def text(self, e) -> str:
        sp = e.span
        if sp.line == sp.end_line and 1 <= sp.line <= len(self.src.lines):
            return self.src.lines[sp.line - 1][sp.column - 1:sp.end_column - 1]
        return "expression"

    def uni(self, e) -> int:
        if e is None or isinstance(e, ir.Const):
            return ir.UNIFORM
        if isinstance(e, ir.Ctx):
            if e.field == "warp":
                return ir.WARP
            if e.field in ("thread", "lane"):
                return ir.VARYING
            return ir.UNIFORM
        if isinstance(e, ir.Ref):
            s = e.sym
            if s.kind == "var" and isinstance(s.type, ir.ScalarT):
                return self.var_uni.get(self.sym_key.get(id(s)), ir.UNIFORM)
            return self.sym_uni.get(id(s), ir.UNIFORM)
        if isinstance(e, ir.Element):
            u = max([self.uni(i) for i in e.indices] + [ir.UNIFORM])
            if e.base.kind in ("var", "let", "view") and e.base.kind != "tensor":
                return u
            return u
        return max([self.uni(c) for c in ir.sub_exprs(e)] + [ir.UNIFORM])

    def require_slice_uniform(self, sl, span):
        if isinstance(sl, ir.Slice):
            for sub in sl.subs:
                x = sub.index if isinstance(sub, ir.SubIndex) else sub.start
                if self.uni(x) > ir.UNIFORM:
                    self.fail(TileRuleError, "a tile slice's start differs between threads; a tile statement's slices must be the same in every thread (uniform)", span)

    def cond(self, e, env, what):
        c = self.expr(e, env)
        if c.type != ir.ScalarT("bool"):
            self.fail(TileTypeError, f"{what} must be a bool scalar (a comparison), not {_type_str(c.type)}", e.span)
        return c

    def index_expr(self, e, env, what):
        x = self.expr(e, env)
        if not isinstance(x.type, ir.ScalarT) or not T.DTYPES[x.type.dtype].is_int:
            self.fail(TileTypeError, f"{what} must be an integer, not {_type_str(x.type)}", e.span)
        if isinstance(x, ir.Const):
            return ir.Const(int(x.value), ir.ScalarT("index"), x.span)
        return x

    def target(self, e, env) -> ir.Expr:
        if isinstance(e, A.Name):
            b = env.lookup(e.id)
            if isinstance(b, _MacroArg):
                return self.target(b.expr, b.env)
            if b is None:
                self.fail(TileNameError, f"'{e.id}' is not defined", e.span)
            if isinstance(b, _Tune):
                self.fail(TileRuleError, f"'{e.id}' is an @autotune constant and cannot be assigned", e.span)
            s = b
            if not isinstance(s, ir.Sym):
                self.fail(TileRuleError, f"'{e.id}' cannot be assigned", e.span)
            if s.kind == "var":
                return ir.Ref(s, s.type, e.span)
            if s.kind in ("let", "view"):
                self.fail(TileRuleError, f"'{e.id}' is a let and cannot be rebound; declare it with 'var' to change it" + (" (a let view can be written through a slice, as in x[...] = e)" if s.kind == "view" else ""), e.span)
            if s.kind == "tensor":
                self.fail(TileRuleError, f"tensor '{e.id}' cannot be assigned whole; write a slice, as in {e.id}[r :+ 8, :] = t", e.span)
            self.fail(TileRuleError, f"'{e.id}' ({'a loop variable' if s.kind == 'loop' else 'a parameter' if s.kind == 'scalar_param' else 'a dimension'}) cannot be assigned", e.span)
        if isinstance(e, A.Index):
            return self.index(e, env, as_target=True)
        if isinstance(e, A.Call) and e.func == "flat":
            return self.expr(e, env)
        self.fail(TileRuleError, f"'{self.text(e)}' cannot be assigned; assign a var, a slice or an element", e.span)

    def expr(self, e, env, allow_ctx=True) -> ir.Expr:
        if isinstance(e, A.IntLit):
            if not -(2 ** 63) <= e.value < 2 ** 63:
                self.fail(TileTypeError, f"the integer {e.value} does not fit in 64 bits", e.span)
            return ir.Const(e.value, ir.ScalarT("i32"), e.span)
        if isinstance(e, A.FloatLit):
            return ir.Const(float(np.float32(e.value)), ir.ScalarT("f32"), e.span)
        if isinstance(e, A.Name):
            return self.name(e, env)
        if isinstance(e, A.Field):
            path = []
            x = e
            while isinstance(x, A.Field):
                path.append(x.name)
                x = x.base
            if isinstance(x, A.Name) and x.id == "ctx" and env.lookup("ctx") is None:
                f = ".".join(reversed(path))
                if f not in B.CTX_FIELDS:
                    self.fail(TileNameError, f"ctx has no field '{f}' (it has: {', '.join(B.CTX_FIELDS)})", e.span)
                if not allow_ctx:
                    self.fail(TileRuleError, "ctx is not available here", e.span)
                return ir.Ctx(f, ir.ScalarT("index"), e.span)
            self.fail(TileNameError, f"'{self.text(e)}': only ctx has fields", e.span)
        if isinstance(e, A.Unary):
            x = self.expr(e.operand, env, allow_ctx)
            return self.unary(e, x)
        if isinstance(e, A.Binary):
            a = self.expr(e.left, env, allow_ctx)
            b = self.expr(e.right, env, allow_ctx)
            t = self.binary_types(e.op, a, b, e.span)
            folded = _fold_binary(e.op, a, b, t, e.span)
            return folded if folded is not None else ir.Binary(e.op, a, b, t, e.span)
        if isinstance(e, A.Index):
            return self.index(e, env)
        if isinstance(e, A.Call):
            return self.call(e, env, allow_ctx)
        self.fail(TileRuleError, "unsupported expression", e.span)

    def name(self, e: A.Name, env):
        b = env.lookup(e.id)
        if isinstance(b, _MacroArg):
            return self.expr(b.expr, b.env)
        if isinstance(b, _Tune):
            return ir.Const(b.value, ir.ScalarT("i32"), e.span)
        if b is None:
            if e.id in B.CONSTANTS:
                return ir.Const(B.CONSTANTS[e.id], ir.ScalarT("bool"), e.span)
            if e.id == "ctx":
                self.fail(TileRuleError, "ctx alone is not a value; use a field such as ctx.thread or ctx.block.x", e.span)
            if e.id in B.all_names() or e.id in self.fns:
                self.fail(TileNameError, f"'{e.id}' is a function; call it, as in {e.id}(...)", e.span)
            self.fail(TileNameError, f"'{e.id}' is not defined", e.span)
        s = b
        if s.kind == "tensor":
            self.fail(TileRuleError, f"tensor '{e.id}' cannot be used whole; take a slice such as {e.id}[r :+ 64, :] or an element {e.id}[i, j]", e.span)
        return ir.Ref(s, s.type, e.span)

    def unary(self, e, x):
        t = x.type
        dt = self.scalar_dtype(t, e.span)
        if e.op == "-":
            self.require_arith(dt, e.span)
            rt = self.with_dtype(t, T.compute_type(dt) if dt != "index" else dt)
            if isinstance(x, ir.Const):
                return ir.Const(-x.value, x.type, e.span)
            return ir.Unary("-", x, rt, e.span)
        if e.op == "!":
            if dt != "bool":
                self.fail(TileTypeError, f"'!' needs a bool, not {dt}", e.span)
            if isinstance(x, ir.Const):
                return ir.Const(not x.value, x.type, e.span)
            return ir.Unary("!", x, t, e.span)
        self.require_arith(dt, e.span)
        if not T.DTYPES[dt].is_int:
            self.fail(TileTypeError, f"'~' needs an integer, not {dt}", e.span)
        if isinstance(x, ir.Const):
            return ir.Const(~x.value, x.type, e.span)
        return ir.Unary("~", x, self.with_dtype(t, T.compute_type(dt)), e.span)

    def scalar_dtype(self, t, span):
        if isinstance(t, ir.TensorT):
            self.fail(TileRuleError, "a tensor cannot be used whole; slice it", span)
        return t.dtype

    def with_dtype(self, t, dt):
        if isinstance(t, ir.TileT):
            return ir.TileT(dt, t.shape)
        return ir.ScalarT(dt)

    def require_arith(self, dt, span):
        if T.DTYPES[dt].storage_only:
            self.fail(TileTypeError, f"no arithmetic on {dt}: it is a storage type; convert first, as in i32(x)", span)
        if dt == "bool" and False:
            pass

    def operand_types(self, a, b, span, what):
        """Result dtype of combining a and b (literals adapt to the other side)."""
        ta, tb = a.type.dtype, b.type.dtype
        for dt in (ta, tb):
            self.require_arith(dt, span)
        ca, cb = isinstance(a, ir.Const), isinstance(b, ir.Const)
        if ta == "bool" or tb == "bool":
            if ta == tb:
                return "bool"
            self.fail(TileTypeError, f"{what} mixes bool and {tb if ta == 'bool' else ta}; bool converts to nothing", span)
        if ca and not cb:
            return self.literal_adapts(a, tb, span, what)
        if cb and not ca:
            return self.literal_adapts(b, ta, span, what)
        if ca and cb:
            return "f32" if "f32" in (ta, tb) else ta
        r = T.promote(ta, tb)
        if r is None:
            self.fail(TileTypeError, f"{what} mixes {ta} and {tb}; convert one side first, as in {('f32' if T.DTYPES[ta].is_float or T.DTYPES[tb].is_float else 'i32')}(x)", span)
        return r

    def literal_adapts(self, lit, other, span, what):
        if T.DTYPES[other].is_float:
            return T.compute_type(other)
        if isinstance(lit.value, float) and lit.type.dtype == "f32":
            self.fail(TileTypeError, f"{what} mixes {other} and the float literal {lit.value}; convert first, as in f32(x)", span)
        return T.compute_type(other)

    def combine_shapes(self, types, span, what):
        shape = None
        tiles = [t for t in types if isinstance(t, ir.TileT)]
        if not tiles:
            return None
        shape = tiles[0].shape
        for t in tiles[1:]:
            s = _broadcast(shape, t.shape)
            if s is None:
                self.fail(TileShapeError, f"{what}: shapes {_shape_str(shape)} and {_shape_str(t.shape)} do not broadcast (each dimension must match or be 1)", span)
            shape = s
        return shape

    def require_uniform_scalars_with_tiles(self, operands, span):
        if any(isinstance(o.type, ir.TileT) for o in operands):
            for o in operands:
                if isinstance(o.type, ir.ScalarT) and self.uni(o) > ir.UNIFORM:
                    self.fail(TileRuleError, "a per-thread (varying) value cannot be combined with a tile; tile expressions need values every thread agrees on", span)

    def binary_types(self, op, a, b, span):
        for x in (a, b):
            self.scalar_dtype(x.type, span)
        self.require_uniform_scalars_with_tiles((a, b), span)
        shape = self.combine_shapes((a.type, b.type), span, f"'{op}'")
        what = f"'{op}'"
        if op in ("&&", "||"):
            if a.type.dtype != "bool" or b.type.dtype != "bool":
                self.fail(TileTypeError, f"{what} needs bool operands, not {a.type.dtype} and {b.type.dtype}", span)
            dt = "bool"
        elif op in ("==", "!=", "<", "<=", ">", ">="):
            cdt = self.operand_types(a, b, span, what)
            if cdt == "bool" and op not in ("==", "!="):
                self.fail(TileTypeError, f"{what} does not order bools", span)
            dt = "bool"
        else:
            dt = self.operand_types(a, b, span, what)
            if dt == "bool":
                self.fail(TileTypeError, f"{what} does not apply to bool values", span)
            if op in ("&", "|", "^", "<<", ">>") and not T.DTYPES[dt].is_int:
                self.fail(TileTypeError, f"{what} needs integers, not {dt}", span)
        return ir.TileT(dt, shape) if shape is not None else ir.ScalarT(dt)

    def coerce(self, value, want, span, ctx):
        """Check that `value` may be stored into something of type `want`."""
        vt = value.type
        if isinstance(vt, ir.TensorT):
            self.fail(TileRuleError, "a tensor cannot be used whole; slice it", span)
        vd, wd = vt.dtype, want.dtype
        if vd != wd:
            if "bool" in (vd, wd):
                self.fail(TileTypeError, f"cannot store {vd} into {wd}: bool converts to and from nothing", span)
            fv, fw = T.DTYPES[vd].is_float, T.DTYPES[wd].is_float
            if fv != fw:
                if isinstance(value, ir.Const) and not fv and fw:
                    value = ir.Const(float(value.value), ir.ScalarT(wd), value.span)
                else:
                    self.fail(TileTypeError, f"cannot store {vd} into {wd} without a conversion; write {wd}(...)", span)
        if isinstance(want, ir.ScalarT) and isinstance(vt, ir.TileT):
            self.fail(TileTypeError, f"cannot store a tile {_type_str(vt)} into the scalar of type {wd}", span)
        if isinstance(want, ir.TileT):
            if isinstance(vt, ir.TileT):
                if not _fits(vt.shape, want.shape):
                    self.fail(TileShapeError, f"a tile of shape {_shape_str(vt.shape)} does not fit {_shape_str(want.shape)}", span)
            elif self.uni(value) > ir.UNIFORM:
                self.fail(TileRuleError, "a tile cannot be filled with a per-thread (varying) value", span)
        if isinstance(value, ir.Const) and isinstance(want, ir.ScalarT):
            return ir.Const(value.value, want, value.span)
        return value

    # ---- subscripts
    def index(self, e: A.Index, env, as_target=False):
        base_ast = e.base
        flat = False
        if isinstance(base_ast, A.Call) and base_ast.func == "flat":
            if len(base_ast.args) != 1:
                self.fail(TileRuleError, "flat(t) takes one tile", base_ast.span)
            base_ast = base_ast.args[0]
            flat = True
        while isinstance(base_ast, A.Name) and isinstance(env.lookup(base_ast.id), _MacroArg):
            m = env.lookup(base_ast.id)
            base_ast, env_b = m.expr, m.env
            return self.index(A.Index(base_ast, e.subs, e.span), env_b, as_target) if not flat else self.index(A.Index(A.Call("flat", (base_ast,), e.span, e.span), e.subs, e.span), env_b, as_target)
        if not isinstance(base_ast, A.Name):
            self.fail(TileRuleError, "only a tensor, a tile or a view can be subscripted", e.base.span)
        b = env.lookup(base_ast.id)
        if b is None or isinstance(b, _Tune):
            self.fail(TileNameError, f"'{base_ast.id}' is not defined" if b is None else f"'{base_ast.id}' is a constant and cannot be subscripted", base_ast.span)
        sym: ir.Sym = b
        t = sym.type
        if isinstance(t, ir.ScalarT):
            self.fail(TileTypeError, f"'{sym.name}' is a scalar and cannot be subscripted", base_ast.span)
        if isinstance(t, ir.TensorT):
            if flat:
                self.fail(TileRuleError, "flat() applies to a declared tile, not a tensor", e.base.span)
            extents = list(t.dims)
            what = f"tensor '{sym.name}'"
        else:
            extents = list(t.shape)
            if flat:
                if sym.kind == "view":
                    self.fail(TileRuleError, "flat() applies to a declared tile (var or let), not a view", e.base.span)
                extents = [1, t.size] if len(t.shape) == 2 else list(t.shape)
            what = f"tile '{sym.name}'"
        if len(e.subs) != len(extents):
            self.fail(TileShapeError, f"{what} has {len(extents)} dimension(s) but {len(e.subs)} subscript(s) are given", e.span)
        subs = []
        shape = []
        for i, (s, ext) in enumerate(zip(e.subs, extents)):
            if isinstance(s, A.IndexSub):
                subs.append(ir.SubIndex(self.index_expr(s.index, env, "a subscript")))
            elif isinstance(s, A.FullSub):
                if not isinstance(ext, int):
                    self.fail(TileShapeError, f"':' over dimension {i} of {what}, a runtime dimension ('{ext}'); a tile's shape must be constant, so write a slice such as 0 :+ 64", s.span)
                subs.append(ir.SubRange(ir.Const(0, ir.ScalarT("index"), s.span), ext, True))
                shape.append(ext)
            else:
                start = self.index_expr(s.start, env, "a slice's start")
                n = self.const_extent(s.length, env, "a slice's length")
                subs.append(ir.SubRange(start, n))
                shape.append(n)
        if not shape:
            indices = tuple(x.index for x in subs)
            return ir.Element(sym, indices, flat, ir.ScalarT(t.dtype), e.span)
        if len(shape) > 2:
            self.fail(TileShapeError, f"a slice makes a tile of at most 2 dimensions, not {len(shape)}; select the others with scalar indices", e.span)
        if sym.kind != "tensor":
            # a slice of a tile must stay inside it
            for s, sub, ext in zip(e.subs, subs, extents):
                if isinstance(sub, ir.SubRange) and isinstance(sub.start, ir.Const):
                    if sub.start.value < 0 or sub.start.value + sub.length > ext:
                        self.fail(TileShapeError, f"the slice {sub.start.value} :+ {sub.length} runs outside {what}, whose extent is {ext}", s.span)
                if isinstance(sub, ir.SubRange) and sub.length > ext:
                    self.fail(TileShapeError, f"a slice of length {sub.length} does not fit in {what}, whose extent is {ext}", s.span)
            if sym.name in [n for n, _ in self.register_names]:
                self.fail(TileRuleError, f"'{sym.name}' is kept in registers (@registers): it cannot be sliced or indexed, since each thread holds only its own elements", e.span)
        return ir.Slice(sym, tuple(subs), flat, ir.TileT(t.dtype, tuple(shape)), e.span)

    # ---- calls
    def call(self, e: A.Call, env, allow_ctx=True):
        f = e.func
        b = env.lookup(f)
        if b is not None and not isinstance(b, _Tune):
            self.fail(TileNameError, f"'{f}' is not a function", e.func_span)
        if f in self.fns:
            fn = self.fns[f]
            if not fn.is_expr:
                self.fail(TileRuleError, f"'{f}' is a statement function and has no value; call it on a line of its own", e.span)
            if len(e.args) != len(fn.params):
                self.fail(TileRuleError, f"function '{f}' takes {len(fn.params)} argument(s), not {len(e.args)}", e.span)
            if f in self.call_stack:
                self.fail(TileRuleError, f"function '{f}' calls itself; recursion is not allowed", e.span)
            fenv = env.child()
            for p, a in zip(fn.params, e.args):
                fenv.names[p] = _MacroArg(a, env, f)
            self.call_stack.append(f)
            try:
                return self.expr(fn.body, fenv, allow_ctx)
            finally:
                self.call_stack.pop()
        if f == "flat":
            sl = self.index(A.Index(A.Call("flat", e.args, e.span, e.func_span), (A.FullSub(e.span), A.FullSub(e.span)), e.span), env) if len(e.args) == 1 and self._is_2d_tile(e.args[0], env) else None
            if sl is None:
                self.fail(TileRuleError, "flat(t) takes one declared 2-D tile", e.span)
            return sl
        args = [self.expr(a, env, allow_ctx) for a in e.args]
        for a, aa in zip(args, e.args):
            if isinstance(a.type, ir.TensorT):
                self.fail(TileRuleError, "a tensor cannot be used whole; slice it", aa.span)

        def nargs(n):
            if len(args) != n:
                self.fail(TileRuleError, f"{f}() takes {n} argument(s), not {len(args)}", e.span)

        if f in T.CONVERSIONS:
            nargs(1)
            x = args[0]
            if x.type.dtype == "bool":
                self.fail(TileTypeError, f"cannot convert a bool to {f}; bool converts to and from nothing (use where(c, 1, 0))", e.span)
            if isinstance(x, ir.Const):
                return ir.Const(_convert_const(x.value, f), ir.ScalarT(f), e.span)
            return ir.Convert(x, self.with_dtype(x.type, f), e.span)
        if f in B.UNARY_MATH:
            nargs(1)
            x = args[0]
            dt = x.type.dtype
            self.require_arith(dt, e.span)
            if dt == "bool":
                self.fail(TileTypeError, f"{f}() does not take a bool", e.span)
            if f == "abs" and T.DTYPES[dt].is_int:
                return ir.Math(f, (x,), self.with_dtype(x.type, T.compute_type(dt)), e.span)
            if not T.DTYPES[dt].is_float:
                if isinstance(x, ir.Const):
                    x = ir.Const(float(x.value), ir.ScalarT("f32"), x.span)
                    dt = "f32"
                else:
                    self.fail(TileTypeError, f"{f}() needs a float, not {dt}; convert first, as in f32(x)", e.span)
            return ir.Math(f, (x,), self.with_dtype(x.type, T.compute_type(dt)), e.span)
        if f in B.BINARY_MATH:
            nargs(2)
            t = self.binary_types("+", args[0], args[1], e.span)
            if all(isinstance(a, ir.Const) for a in args):
                v = (min if f == "min" else max)(args[0].value, args[1].value)
                return ir.Const(v, t, e.span)
            return ir.Math(f, tuple(args), t, e.span)
        if f == "where":
            nargs(3)
            c, a, bb = args
            if c.type.dtype != "bool":
                self.fail(TileTypeError, f"where()'s first argument must be a bool (a comparison), not {c.type.dtype}", e.args[0].span)
            self.require_uniform_scalars_with_tiles(args, e.span)
            shape = self.combine_shapes([x.type for x in args], e.span, "where()")
            dt = self.operand_types(a, bb, e.span, "where()")
            return ir.Math("where", tuple(args), ir.TileT(dt, shape) if shape else ir.ScalarT(dt), e.span)
        if f == "cdiv":
            nargs(2)
            for a, aa in zip(args, e.args):
                if not isinstance(a.type, ir.ScalarT) or not T.DTYPES[a.type.dtype].is_int:
                    self.fail(TileTypeError, "cdiv() takes integer scalars", aa.span)
            dt = self.operand_types(args[0], args[1], e.span, "cdiv()")
            if all(isinstance(a, ir.Const) for a in args):
                if args[1].value == 0:
                    self.fail(TileTypeError, "cdiv() by zero", e.span)
                return ir.Const(-(-args[0].value // args[1].value), ir.ScalarT(dt), e.span)
            return ir.Math("cdiv", tuple(args), ir.ScalarT(dt), e.span)
        if f in B.REDUCTIONS:
            nargs(1)
            op, axis = B.REDUCTIONS[f]
            x = self.tile_arg(args[0], e.args[0], f)
            dt = x.type.dtype
            self.require_arith(dt, e.span)
            if dt == "bool":
                self.fail(TileTypeError, f"{f}() does not take bool tiles", e.span)
            shape = x.type.shape
            if len(shape) == 1:
                if axis == 0:
                    self.fail(TileShapeError, f"{f}() needs a 2-D tile; this one is {_shape_str(shape)}", e.span)
                out = (1,)
            else:
                out = (shape[0], 1) if axis == 1 else (1, shape[1])
            rdt = T.compute_type(dt) if op == "sum" else dt
            if op != "sum" and dt in ("f16", "bf16"):
                rdt = "f32"
            return ir.Reduce(op, axis, x, ir.TileT(rdt, out), e.span)
        if f in ("dot", "dot_t"):
            nargs(2)
            a = self.tile_arg(args[0], e.args[0], f)
            bb = self.tile_arg(args[1], e.args[1], f)
            if len(a.type.shape) != 2 or len(bb.type.shape) != 2:
                self.fail(TileShapeError, f"{f}() takes 2-D tiles", e.span)
            if a.type.dtype != bb.type.dtype:
                self.fail(TileTypeError, f"{f}() needs operands of one type, not {a.type.dtype} and {bb.type.dtype}", e.span)
            dt = a.type.dtype
            if dt not in ("f16", "bf16", "f32", "f64", "i8"):
                self.fail(TileTypeError, f"{f}() takes f16, bf16, f32, f64 or i8 tiles, not {dt}", e.span)
            (m, k1) = a.type.shape
            (n, k2) = (bb.type.shape[1], bb.type.shape[0]) if f == "dot" else bb.type.shape
            if k1 != k2:
                form = "[M, K] x [K, N]" if f == "dot" else "[M, K] x [N, K]"
                self.fail(TileShapeError, f"{f}(): the inner dimensions differ ({_shape_str(a.type.shape)} and {_shape_str(bb.type.shape)}); {f} takes {form}", e.span)
            acc = {"i8": "i32", "f64": "f64"}.get(dt, "f32")
            return ir.Dot(a, bb, f == "dot_t", ir.TileT(acc, (m, n)), e.span)
        if f == "transpose":
            nargs(1)
            x = self.tile_arg(args[0], e.args[0], f)
            if len(x.type.shape) != 2:
                self.fail(TileShapeError, "transpose() takes a 2-D tile", e.span)
            r, c = x.type.shape
            return ir.Transpose(x, ir.TileT(x.type.dtype, (c, r)), e.span)
        if f == "barrier":
            self.fail(TileRuleError, "barrier() is a statement; write it on a line of its own", e.span)
        if f in B.ATOMICS:
            self.fail(TileRuleError, f"{f}() is a statement; write it on a line of its own", e.span)
        self.fail(TileNameError, f"'{f}' is not defined: no function or built-in of that name", e.func_span)

    def _is_2d_tile(self, a, env):
        while isinstance(a, A.Name) and isinstance(env.lookup(a.id), _MacroArg):
            m = env.lookup(a.id)
            a, env = m.expr, m.env
        if isinstance(a, A.Name):
            b = env.lookup(a.id)
            return isinstance(b, ir.Sym) and isinstance(b.type, ir.TileT) and len(b.type.shape) == 2
        return False

    def tile_arg(self, x, ast, f):
        if not isinstance(x.type, ir.TileT):
            self.fail(TileTypeError, f"{f}() takes a tile, not a {_type_str(x.type)}", ast.span)
        regs = [n for n, _ in self.register_names]
        for sub in ir.walk_expr(x):
            if isinstance(sub, ir.Ref) and sub.sym.name in regs and isinstance(sub.sym.type, ir.TileT):
                if f not in ():
                    self.fail(TileRuleError, f"'{sub.sym.name}' is kept in registers (@registers), so {f}() cannot read it: {f} needs elements other threads hold", ast.span)
        return x

    # ---- whole-kernel checks
    def check_registers(self, kir):
        """A @registers tile may be updated elementwise, accumulate a dot and be stored."""
        regs = set(id(s) for s in kir.registers)
        if not regs:
            return
        for s in ir.walk_stmts(kir.body):
            if isinstance(s, (ir.Let,)) and isinstance(s.value, ir.Ref) and id(s.value.sym) in regs:
                self.err(TileRuleError, f"'{s.value.sym.name}' is kept in registers (@registers) and cannot be viewed by a let", s.span)

    def check_budget(self, kir):
        from ..analysis.lifetimes import tile_lifetimes
        lt = tile_lifetimes(kir)
        limit = DYNAMIC_SMEM_BYTES if kir.dynshared else STATIC_SMEM_BYTES
        if lt.footprint > limit:
            peak = lt.peak_line
            live = ", ".join(f"{t.name} ({t.bytes} B)" for t in lt.live_at_peak)
            if kir.dynshared:
                msg = (f"the tiles alive at once need {lt.footprint} bytes of shared memory ({live}), more than the "
                       f"{limit}-byte per-block limit of the largest GPUs; use smaller tiles")
            else:
                msg = (f"the tiles alive at once need {lt.footprint} bytes of shared memory ({live}), more than the "
                       f"static budget of {limit} bytes (48 KB); use smaller tiles, or add @dynshared to size shared memory at launch")
            self.errors.append(self.src.error(TileBudgetError, msg, peak, 1))


def _written_params(f: A.Function):
    """The parameters a statement function assigns or indexes: those must be passed names."""
    out = set()
    params = set(f.params)

    def visit(n):
        if isinstance(n, A.Assign):
            t = n.target
            base = t.base if isinstance(t, A.Index) else t
            if isinstance(base, A.Call) and base.func == "flat" and base.args:
                base = base.args[0]
            if isinstance(base, A.Name) and base.id in params:
                out.add(base.id)
        if isinstance(n, A.Index):
            base = n.base
            if isinstance(base, A.Call) and base.func == "flat" and base.args:
                base = base.args[0]
            if isinstance(base, A.Name) and base.id in params:
                out.add(base.id)
        if isinstance(n, A.Call) and n.func in B.ATOMICS and n.args:
            visit(n.args[0])
        if isinstance(n, tuple):
            for c in n:
                visit(c)
            return
        if hasattr(n, "__dataclass_fields__"):
            for fld in n.__dataclass_fields__:
                visit(getattr(n, fld))
    visit(f.body)
    return out


def _convert_const(v, dt):
    d = T.DTYPES[dt]
    if d.is_float:
        return float(np.asarray(v, dtype=np.float64).astype(d.numpy).astype(np.float64))
    # float -> int truncates toward zero and saturates; int -> narrower int wraps
    info = np.iinfo(d.numpy)
    if isinstance(v, float):
        if v != v:
            return 0
        v = int(max(info.min, min(info.max, np.trunc(v))))
        return v
    return int(np.asarray(int(v) & ((1 << 64) - 1), dtype=np.uint64).astype(d.numpy)) if d.bits < 64 else int(np.int64(np.uint64(int(v) & ((1 << 64) - 1))))


def _fold_binary(op, a, b, t, span):
    """Fold arithmetic on two literals (Python ints are exact; the result keeps literal typing)."""
    if not (isinstance(a, ir.Const) and isinstance(b, ir.Const)) or not isinstance(t, ir.ScalarT):
        return None
    x, y = a.value, b.value
    try:
        if op == "+":
            v = x + y
        elif op == "-":
            v = x - y
        elif op == "*":
            v = x * y
        elif op == "/":
            if y == 0:
                return None
            if isinstance(x, float) or isinstance(y, float):
                v = float(np.float32(x) / np.float32(y))
            else:
                v = int(x / y) if abs(x) < 2 ** 52 and abs(y) < 2 ** 52 else None
                if v is None:
                    return None
        elif op in ("<", "<=", ">", ">=", "==", "!="):
            v = {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y, "==": x == y, "!=": x != y}[op]
        elif op == "&&":
            v = x and y
        elif op == "||":
            v = x or y
        else:
            return None
    except (OverflowError, TypeError):
        return None
    if isinstance(v, float):
        v = float(np.float32(v))
    elif isinstance(v, int) and not isinstance(v, bool) and not -(2 ** 63) <= v < 2 ** 63:
        return None
    return ir.Const(v, t, span)
