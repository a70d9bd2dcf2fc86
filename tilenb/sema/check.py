"""The checker: a parsed program -> typed tile IR per kernel and @autotune variant.

Guarantees: `check_program` either returns a `CheckedProgram` whose every kernel variant is a
consistent `tilenb.ir.KernelIR`, or raises the first `TileError` by position carrying every
error found (`.diagnostics`, sorted by position). It enforces the language's static rules
(docs/spec.md): names, functions (inlining, hygiene, aliasing, recursion, jumps), types,
literal ranges, shapes, constants, uniformity of tile statements and barriers, @registers, and
the shared-memory budget (from tile lifetimes).

In the IR it returns: every `Const` holds a value representable in its type (a literal has
taken the type its context gives it: in `x * 2` with x an f64, the 2 is an f64 `Const`), and
`KernelIR.uniformity` maps `id(stmt)` to the uniformity of the control the statement runs under
and `KernelIR.scalar_uniformity` every scalar Sym to its uniformity: the one record of section 11's
rules, which later stages read through `tilenb.analysis.uniformity` (whose `expr_level` is the
value rule applied here too).
Variants whose walk is shared (below) share their parameter Syms and statement objects (the
IR is immutable); anything kept per variant is keyed by the KernelIR, not by a statement or Sym.

How it works: one `_KernelChecker` walks a kernel's body once per @autotune combination,
inlining function calls as it goes (combinations that differ only in names the parameters, the
body and the functions never mention, such as a CTA size used by @launch alone, share one walk:
`_KernelChecker.run_shared`). An error inside a statement is recorded and abandons that
statement only; a name whose declaration failed is "poisoned" so that its later uses stay
quiet instead of cascading. Uniformity of scalar `var`s and of loops that threads leave early
is found by re-walking until nothing rises (values only go up, so this ends).
"""
from __future__ import annotations

import contextlib
import itertools
import math
import numbers
from dataclasses import dataclass, field, fields, replace
from typing import Dict, List, Optional, Tuple

import numpy as np

from .. import ir
from .. import types as T
from ..lang import ast as A
from ..lang.diagnostics import (Source, TileBudgetError, TileError, TileNameError, TileRuleError,
                                TileShapeError, TileSyntaxError, TileTypeError, combine)
from ..target import ANY as ANY_TARGET
from ..analysis.uniformity import expr_level
from . import builtins as B

MAX_VARIANTS = 256
# Function bodies inlined into one kernel variant, at most. Arguments are substituted, so calls
# nested in arguments multiply (fn sq(x) = x * x; sq(sq(sq(...)))): past this the checker stops
# with an error instead of expanding for minutes.
MAX_INLINED_CALLS = 10000


class _Abort(Exception):
    """Stops checking one statement after its error has been recorded."""


# ---- bindings in scope -----------------------------------------------------------------------
@dataclass
class _Tune:
    value: int


@dataclass
class _MacroArg:
    """A function parameter: the argument's syntax, checked where and when the call is."""
    expr: A.Expr
    env: "_Env"
    fn: str
    caller: tuple  # (call_stack, call_sites) of the caller, restored while the argument is checked


class _Poison:
    """The binding of a name whose declaration failed: uses of it abort without a new error."""


_POISON = _Poison()


@dataclass
class _Unavailable:
    """A name that exists but may not be used here (a tensor inside @grid): using it is a
    TileRuleError with `message`."""
    message: str


_UNBOUND = object()


class _Env:
    def __init__(self, parent: Optional["_Env"] = None):
        self.parent = parent
        self.names: Dict[str, object] = {}

    def lookup(self, name):
        e = self
        while e is not None:
            v = e.names.get(name, _UNBOUND)
            if v is not _UNBOUND:
                return v
            e = e.parent
        return None

    def child(self):
        return _Env(self)


@dataclass(frozen=True)
class _Lit(ir.Const):
    """A literal (or constant arithmetic on literals and @autotune names) whose type is still
    open: it takes the type its context gives it. Never left in the IR: see `_finalize`."""


# ---- results ----------------------------------------------------------------------------------
@dataclass
class CheckedKernel:
    """A kernel's syntax, its @autotune space, and its checked variants (IR per tune values).

    `variants` maps a sorted tuple of (name, value) pairs to the variant's KernelIR. A variant
    whose tiles do not fit in shared memory is not an error while another variant fits: it is
    left out of `variants` and `skipped` maps its key to the reason."""
    ast: A.Kernel
    tune_space: Tuple[Tuple[str, Tuple[int, ...]], ...]
    variants: Dict[Tuple[Tuple[str, int], ...], ir.KernelIR]
    skipped: Dict[Tuple[Tuple[str, int], ...], str] = field(default_factory=dict)

    def variant(self, **tune) -> ir.KernelIR:
        """The IR for one set of @autotune values. Raises TileNameError for names or values
        not in the space, or for a variant that was skipped (saying why). Values are ints (a
        Python or numpy integer, not a bool); anything else, 64.0 included, is refused by name,
        as a launch's `variant=` refuses it."""
        space = dict(self.tune_space)
        for n, v in tune.items():
            if n in space and (isinstance(v, bool) or not isinstance(v, numbers.Integral)):
                raise TileNameError(f"kernel {self.ast.name}: {n}={v!r} is not one of its @autotune values "
                                    f"{list(space[n])}; @autotune values are ints")
        key = tuple(sorted(tune.items()))
        try:
            if key in self.variants:
                return self.variants[key]
        except TypeError:  # an unhashable value (a list, say): refused below, by name
            pass
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
                raise TileNameError(f"kernel {self.ast.name}: {n}={tune[n]!r} is not one of its @autotune values {list(vals)}")
        if key in self.skipped:
            raise TileNameError(f"kernel {self.ast.name}: the variant {_label(key)} was skipped: {self.skipped[key]}")
        raise TileNameError(f"kernel {self.ast.name}: no variant {tune}")

    def default_tune(self) -> Dict[str, int]:
        """The first variant that checked (in the order the @autotune values are written)."""
        for key in self.variants:
            return dict(key)
        return {n: vals[0] for n, vals in self.tune_space}


@dataclass
class CheckedProgram:
    kernels: Dict[str, CheckedKernel]
    functions: Dict[str, A.Function]
    source: Source


def _label(key) -> str:
    return ", ".join(f"{n}={v}" for n, v in key)


# ---- the program -------------------------------------------------------------------------------
def check_program(prog: A.Program, src: Source) -> CheckedProgram:
    """Check every function and kernel of `prog`. Raises the first TileError by position,
    carrying all of them in `.diagnostics`. A statement nested too deeply for the checker's
    recursion is a TileSyntaxError at that statement."""
    try:
        return _check_program(prog, src)
    except RecursionError:
        line, col = _too_deep_at(prog)
        raise src.error(TileSyntaxError, "this statement nests too deeply (hundreds of levels of operators, "
                        "calls or blocks); split it up, binding parts of a long expression with let", line, col) from None


_STATEMENTS = (A.Let, A.VarDecl, A.Assign, A.For, A.While, A.If, A.ExprStmt, A.Attribute, A.Function)


def _too_deep_at(prog: A.Program, depth: int = 150) -> Tuple[int, int]:
    """(line, column) of the statement of `prog` in which the syntax tree first grows `depth`
    levels deep, walked without recursion; (1, 1) if none does (deep only through inlining)."""
    stack = [(prog, 0, None)]
    while stack:
        node, d, stmt = stack.pop()
        if isinstance(node, _STATEMENTS):
            stmt = node.span
        if d >= depth and stmt is not None:
            return stmt.line, stmt.column
        kids = node if isinstance(node, tuple) else _children(node) if not isinstance(node, str) else ()
        stack.extend((c, d + 1, stmt) for c in reversed(kids))
    return 1, 1


def _check_program(prog: A.Program, src: Source) -> CheckedProgram:
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
        for p in f.params:
            if p in reserved:
                errors.append(src.error(TileNameError, f"parameter '{p}' of function '{f.name}' is a built-in name; choose another", f.span.line, f.span.column))
        if not f.is_expr:
            errors.extend(_check_jumps(f, src))
    rec_errors, recursive = _check_recursion(fns, src)
    errors.extend(rec_errors)
    for k in prog.kernels:
        if k.name in kernels or k.name in fns:
            errors.append(src.error(TileNameError, f"'{k.name}' is defined twice", k.name_span.line, k.name_span.column))
            continue
        if k.name in reserved:
            errors.append(src.error(TileNameError, f"'{k.name}' is a built-in name; choose another name for this kernel", k.name_span.line, k.name_span.column))
            continue
        ck, errs = _check_kernel(k, fns, recursive, src)
        errors.extend(errs)
        if ck is not None:
            kernels[k.name] = ck
    if errors:
        raise combine(errors)
    return CheckedProgram(kernels, fns, src)


def _children(n):
    if isinstance(n, tuple):
        return n
    if hasattr(n, "__dataclass_fields__") and not isinstance(n, A.Span):
        return tuple(getattr(n, f) for f in n.__dataclass_fields__)
    return ()


def _calls_in(node):
    """Names of every call in an AST subtree."""
    out = []

    def visit(n):
        if isinstance(n, A.Call):
            out.append((n.func, n.span))
        for c in _children(n):
            visit(c)
    visit(node)
    return out


def _check_recursion(fns, src):
    """Errors for functions that call themselves, directly or through others (one per cycle),
    and the set of every function on such a cycle."""
    errors = []
    graph = {name: [c for c, _ in _calls_in(f.body) if c in fns] for name, f in fns.items()}
    reported = set()
    recursive = set()
    for start in fns:
        stack = [(start, [start])]
        seen = set()
        while stack:
            node, path = stack.pop()
            for nxt in graph[node]:
                if nxt == start:
                    recursive.update(path)
                    cycle = frozenset(path)
                    if cycle not in reported:
                        reported.add(cycle)
                        f = fns[start]
                        chain = " -> ".join(path + [start])
                        errors.append(src.error(TileRuleError, f"function '{start}' calls itself ({chain}); functions are inlined, so recursion is not allowed", f.span.line, f.span.column))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, path + [nxt]))
    return errors, recursive


def _check_jumps(f: A.Function, src):
    """A statement function's body is spliced into its caller: it may not `return`, and its
    `break`/`continue` must sit inside one of its own loops."""
    errors = []

    def visit(stmts, loops):
        for s in stmts:
            if isinstance(s, A.Return):
                errors.append(src.error(TileRuleError, f"'return' is not allowed in a statement function (the body of '{f.name}' is spliced into its caller); restructure with if/else", s.span.line, s.span.column))
            elif isinstance(s, (A.Break, A.Continue)) and loops == 0:
                word = "break" if isinstance(s, A.Break) else "continue"
                errors.append(src.error(TileRuleError, f"'{word}' in a statement function must be inside a loop of that function ('{f.name}' is spliced into its caller, whose loops it cannot leave)", s.span.line, s.span.column))
            elif isinstance(s, (A.For, A.While)):
                visit(s.body, loops + 1)
            elif isinstance(s, A.If):
                visit(s.then, loops)
                visit(s.orelse, loops)
    visit(f.body, 0)
    return errors


# ---- constants in attributes ------------------------------------------------------------------------
class _NotConst(Exception):
    pass


def _const_int(expr, src, errors, what, env=None) -> Optional[int]:
    """Fold an attribute argument (literal, or arithmetic on literals and tune names)."""
    try:
        v = _fold(expr, env)
    except _NotConst:
        errors.append(src.error(TileRuleError, f"{what} must be a constant: an integer literal or an @autotune name", expr.span.line, expr.span.column))
        return None
    if not isinstance(v, int) or isinstance(v, bool):
        errors.append(src.error(TileTypeError, f"{what} must be an integer, not {v}", expr.span.line, expr.span.column))
        return None
    if not -(2 ** 63) <= v < 2 ** 63:
        errors.append(src.error(TileTypeError, f"{what} does not fit in 64 bits", expr.span.line, expr.span.column))
        return None
    return v


def _fold(e, env):
    """The value of a constant expression over literals and @autotune names (exact), or _NotConst."""
    if isinstance(e, A.IntLit):
        return e.value
    if isinstance(e, A.FloatLit):
        return e.value
    if isinstance(e, A.Name) and env is not None:
        b = env.lookup(e.id)
        if isinstance(b, _Tune):
            return b.value
        raise _NotConst()
    if isinstance(e, A.Unary) and e.op == "-":
        return -_fold(e.operand, env)
    if isinstance(e, A.Binary) and e.op in ("+", "-", "*", "/", "%"):
        a, b = _fold(e.left, env), _fold(e.right, env)
        if max(abs(a), abs(b)) > 2 ** 64:
            raise _NotConst()
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if e.op == "*":
            return a * b
        if isinstance(a, int) and isinstance(b, int):
            if b == 0:
                raise _NotConst()
            q = _cdiv_trunc(a, b)
            return q if e.op == "/" else a - q * b
        if e.op == "/" and b != 0:
            return a / b
        raise _NotConst()
    if isinstance(e, A.Call) and e.func == "cdiv" and len(e.args) == 2:
        a, b = _fold(e.args[0], env), _fold(e.args[1], env)
        if not isinstance(a, int) or not isinstance(b, int) or b == 0:
            raise _NotConst()
        return -(-a // b)
    raise _NotConst()


def _cdiv_trunc(a: int, b: int) -> int:
    """Integer division truncating toward zero (C's `/`)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


# ---- a kernel -----------------------------------------------------------------------------------------
def _check_kernel(k: A.Kernel, fns, recursive, src) -> Tuple[Optional[CheckedKernel], List[TileError]]:
    errors: List[TileError] = []
    tune_space: List[Tuple[str, Tuple[int, ...]]] = []
    tune_ok = True
    seen_attrs = {}
    for at in k.attributes:
        if at.name not in B.ATTRIBUTES:
            errors.append(src.error(TileRuleError, f"unknown attribute '@{at.name}' (known: {', '.join('@' + a for a in B.ATTRIBUTES)})", at.span.line, at.span.column))
            continue
        if at.name in seen_attrs:
            errors.append(src.error(TileRuleError, f"'@{at.name}' is given twice; merge them into one", at.span.line, at.span.column))
            continue
        ok = True
        if at.name == "autotune":
            if not at.args:
                errors.append(src.error(TileRuleError, "@autotune needs at least one 'NAME in [values]'", at.span.line, at.span.column))
                tune_ok = False
            for arg in at.args:
                if not isinstance(arg, A.TuneArg):
                    errors.append(src.error(TileRuleError, "@autotune takes entries of the form 'NAME in [v1, v2]'", arg.span.line, arg.span.column))
                    tune_ok = False
                    continue
                if any(arg.name == n for n, _ in tune_space):
                    errors.append(src.error(TileNameError, f"@autotune names '{arg.name}' twice", arg.span.line, arg.span.column))
                    tune_ok = False
                    continue
                if arg.name in B.all_names() or arg.name in B.CONSTANTS or arg.name == "ctx":
                    errors.append(src.error(TileNameError, f"'{arg.name}' is a built-in name; choose another @autotune name", arg.span.line, arg.span.column))
                    tune_ok = False
                    continue
                if not arg.values:
                    errors.append(src.error(TileRuleError, f"@autotune name '{arg.name}' needs at least one value", arg.span.line, arg.span.column))
                    tune_ok = False
                    continue
                vals = []
                for v in arg.values:
                    c = _const_int(v, src, errors, f"an @autotune value of {arg.name}")
                    if c is not None:
                        vals.append(c)
                if len(vals) == len(arg.values):
                    tune_space.append((arg.name, tuple(dict.fromkeys(vals))))
                else:
                    tune_ok = False
        elif at.name == "dynshared":
            if at.args:
                errors.append(src.error(TileRuleError, "@dynshared takes no arguments", at.span.line, at.span.column))
        elif at.name == "launch":
            if len(at.args) != 1 or isinstance(at.args[0], A.TuneArg):
                errors.append(src.error(TileRuleError, "@launch takes one argument: the number of threads per CTA, as in @launch(256)", at.span.line, at.span.column))
                ok = False
        elif at.name == "cluster":
            if len(at.args) != 1 or isinstance(at.args[0], A.TuneArg):
                errors.append(src.error(TileRuleError, "@cluster takes one argument: the CTAs of a thread block cluster along x, as in @cluster(4)", at.span.line, at.span.column))
                ok = False
        elif at.name == "registers":
            if not at.args or not all(isinstance(a, A.Name) for a in at.args):
                errors.append(src.error(TileRuleError, "@registers takes the names of tiles, as in @registers(acc, m)", at.span.line, at.span.column))
                ok = False
        elif at.name == "grid":
            if not 1 <= len(at.args) <= 3 or any(isinstance(a, A.TuneArg) for a in at.args):
                errors.append(src.error(TileRuleError, "@grid takes one to three expressions (CTAs along x, y, z)", at.span.line, at.span.column))
                ok = False
        if ok:
            seen_attrs[at.name] = at
    if not tune_ok:
        return None, errors  # without the whole @autotune space there is no variant to check
    combos = list(itertools.product(*[vals for _, vals in tune_space]))
    if len(combos) > MAX_VARIANTS:
        at = seen_attrs["autotune"]
        return None, errors + [src.error(TileRuleError, f"@autotune makes {len(combos)} variants; at most {MAX_VARIANTS} are allowed", at.span.line, at.span.column)]
    variants: Dict[tuple, ir.KernelIR] = {}
    skipped: Dict[tuple, str] = {}
    first_budget_errors = None
    failed = []  # (tune, errors) of variants with errors other than the budget
    names = [n for n, _ in tune_space]
    # Variants whose @autotune values differ only in names the parameters, the body and the
    # functions never mention (a CTA size used by @launch alone, say) check the body the same
    # way: it is checked once per group of them and shared (see `_KernelChecker.run_shared`).
    mentioned = _body_names(k, fns) if len(combos) > 1 else set()
    in_grid = _grid_names(k, fns) if len(combos) > 1 and "grid" in seen_attrs else None
    shared: Dict[tuple, _Shared] = {}
    for combo in combos:
        tune = dict(zip(names, combo))
        key = tuple(sorted(tune.items()))
        group = tuple(v for n, v in zip(names, combo) if n in mentioned)
        grid_key = tuple(v for n, v in zip(names, combo) if n in in_grid) if in_grid is not None else None
        res = None
        if group in shared:
            res = _KernelChecker(k, fns, recursive, src, tune, seen_attrs, grid_key).run_shared(shared[group])
        if res is None:
            checker = _KernelChecker(k, fns, recursive, src, tune, seen_attrs, grid_key)
            res = checker.run()
            if checker.shared is not None and group not in shared:
                shared[group] = checker.shared
        kir, errs = res
        if errs and all(isinstance(e, TileBudgetError) for e in errs):
            # a variant that needs too much shared memory is skipped while another one fits
            skipped[key] = errs[0].message
            if first_budget_errors is None:
                first_budget_errors = (tune, errs)
            continue
        if errs:
            failed.append((tune, errs))
            if len(failed) > 1 and _error_keys(errs) != _error_keys(failed[0][1]):
                break  # the errors depend on the variant: the first failing one is reported
            continue
        variants[key] = kir
    if failed:
        tune, errs = failed[0]
        same_everywhere = len(failed) == len(combos) and all(_error_keys(e) == _error_keys(errs) for _, e in failed)
        if len(combos) > 1 and not same_everywhere:
            for e in errs:
                e.message += f" (in the variant {_label(tune.items())})"
        return None, errors + errs
    if not variants and first_budget_errors is not None:
        tune, errs = first_budget_errors
        if len(combos) > 1:
            for e in errs:
                e.message += f" (in the variant {_label(tune.items())}; no @autotune variant fits)"
        return None, errors + errs
    if errors:
        return None, errors
    return CheckedKernel(k, tuple(tune_space), variants, skipped), []


def _error_keys(errs):
    return sorted((e.line or 0, e.column or 0, e.message) for e in errs)


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


def _int_range(dtype: str) -> Tuple[int, int]:
    d = T.DTYPES[dtype]
    if d.kind == "uint":
        return 0, (1 << d.bits) - 1
    return -(1 << (d.bits - 1)), (1 << (d.bits - 1)) - 1


def _lit_type(value) -> ir.ScalarT:
    """The type of a literal its context leaves open: f32 for a float, i32 for an integer that
    fits, else i64."""
    if isinstance(value, float):
        return ir.ScalarT("f32")
    lo, hi = _int_range("i32")
    return ir.ScalarT("i32" if lo <= value <= hi else "i64")


def _round_float(v: float, dtype: str) -> float:
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.asarray(v, dtype=np.float64).astype(T.DTYPES[dtype].numpy).astype(np.float64))


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


def _body_names(k: A.Kernel, fns) -> set:
    """Every string in the kernel's parameters, body and attributes other than @autotune,
    @launch and @grid, and in every function: a superset of the names that checking the
    parameters and the body can look up (walked without recursion)."""
    return _strings_in([k.params, k.body, tuple(fns.values()),
                        tuple(a for a in k.attributes if a.name not in ("autotune", "launch", "grid"))])


def _grid_names(k: A.Kernel, fns) -> set:
    """Every string in the kernel's @grid and in every function: a superset of the names that
    checking @grid can look up (a function's free names resolve where it is called)."""
    return _strings_in([tuple(a for a in k.attributes if a.name == "grid"), tuple(fns.values())])


_FIELDS: Dict[type, Tuple[str, ...]] = {}   # AST class -> its field names (`_children`, faster)


def _strings_in(roots) -> set:
    """Every str reachable from `roots` through tuples and dataclass fields (not Spans), as
    `_children` walks them, without recursion."""
    out = set()
    stack = list(roots)
    pop, push, extend = stack.pop, stack.append, stack.extend
    fields_of = _FIELDS
    while stack:
        n = pop()
        t = type(n)
        if t is str:
            out.add(n)
            continue
        if t is tuple:
            extend(n)
            continue
        names = fields_of.get(t)
        if names is None:
            if isinstance(n, str):
                out.add(n)
                continue
            names = tuple(getattr(t, "__dataclass_fields__", ())) if t is not A.Span else ()
            if not isinstance(n, tuple):
                fields_of[t] = names
            else:
                extend(n)
                continue
        for f in names:
            push(getattr(n, f))
    return out


class _KernelChecker:
    def __init__(self, k: A.Kernel, fns, recursive, src: Source, tune: Dict[str, int], attrs, grid_key=None):
        self.k = k
        # the values of the @autotune names @grid can reach (`_grid_names`): variants sharing a
        # walk with equal ones have the same @grid (None: not worked out, always checked)
        self.grid_key = grid_key
        self.budget_memo = None   # the shared walk's memo of tile sizes (`check_budget`)
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
                    gl.append(self.fin(self.to_index(e, a.span)))
                except _Abort:
                    pass
            grid = tuple(gl)
            if grids is not None and self.grid_key is not None and len(self.errors) == nerr:
                grids[self.grid_key] = (grid, self.inlined - inlined)
        return threads, grid

    # ---- control uniformity
    def control_reason(self):
        """The (level, span, clause) of the least uniform control around the current statement."""
        worst = None
        for c in self.control:
            if c[0] > ir.UNIFORM and (worst is None or c[0] > worst[0]):
                worst = c
        for c in self.diverged:
            if c is not None and c[0] > ir.UNIFORM and (worst is None or c[0] > worst[0]):
                worst = c
        return worst

    def control_level(self):
        r = self.control_reason()
        return r[0] if r is not None else ir.UNIFORM

    def require_uniform_control(self, what, short, span):
        r = self.control_reason()
        if r is not None:
            lvl, _, clause = r
            self.fail(TileRuleError, f"{what} under {ir.UNIFORMITY_NAMES[lvl]} control: {clause}, but {short} needs every thread of the CTA; move it where all threads run it", span)

    def clause(self, kind, node, span):
        line = span.line + self.src.line_offset
        if kind == "if":
            return f"the condition '{self.text(node)}' at line {line} differs between threads"
        if kind == "while":
            return f"the while condition '{self.text(node)}' at line {line} differs between threads"
        if kind == "for":
            return f"the loop bounds at line {line} differ between threads"
        return f"the '{kind}' at line {line} is taken by some threads only"

    # ---- statements
    def block(self, stmts, env) -> Tuple[ir.Stmt, ...]:
        out = []
        scope_names: Dict[str, int] = {}
        for s in stmts:
            level = self.control_level()      # the control this statement runs under
            try:
                r = self.stmt(s, env, scope_names)
            except _Abort:
                if isinstance(s, (A.Let, A.VarDecl)) and s.name not in scope_names:
                    env.names[s.name] = _POISON
                    scope_names[s.name] = s.span.line
                continue
            if r is None:
                continue
            if isinstance(r, list):
                out.extend(r)
            else:
                self.stmt_uni[id(r)] = level
                out.append(r)
        return tuple(out)

    def declare(self, env, scope_names, name, binding, span):
        if name in scope_names:
            self.fail(TileNameError, f"'{name}' is already defined in this block (line {scope_names[name] + self.src.line_offset}); use another name, or assign with '{name} = ...' if it is a var", span)
        if name in B.all_names() or name == "ctx" or name in B.CONSTANTS:
            self.fail(TileNameError, f"'{name}' is a built-in name; choose another", span)
        prior = env.lookup(name)
        if isinstance(prior, _Tune):
            self.fail(TileNameError, f"'{name}' is an @autotune name; choose another", span)
        if isinstance(prior, _MacroArg) and self.call_stack and prior.fn == self.call_stack[-1]:
            self.fail(TileNameError, f"'{name}' is a parameter of function '{prior.fn}'; choose another name", span)
        if isinstance(prior, ir.Sym) and prior.kind in ("tensor", "dim", "scalar_param"):
            self.fail(TileNameError, f"'{name}' is a kernel {'parameter' if prior.kind != 'dim' else 'dimension'}; choose another name", span)
        scope_names[name] = span.line
        env.names[name] = binding

    def decl_key(self, span):
        return (self.inline_path, span.line, span.column)

    def stmt(self, s, env, scope_names):
        if not self.call_sites:
            self.kernel_stmt = s      # the kernel's own statement (not one of an inlined body)
        if isinstance(s, A.Let):
            return self.let_stmt(s, env, scope_names)
        if isinstance(s, A.VarDecl):
            return self.var_stmt(s, env, scope_names)
        if isinstance(s, A.Assign):
            return self.assign_stmt(s, env)
        if isinstance(s, A.For):
            return self.for_stmt(s, env)
        if isinstance(s, A.While):
            return self.while_stmt(s, env)
        if isinstance(s, A.If):
            return self.if_stmt(s, env)
        if isinstance(s, (A.Break, A.Continue)):
            word = "break" if isinstance(s, A.Break) else "continue"
            if self.fn_frames and self.fn_frames[-1]["loops"] == 0:
                raise _Abort()  # reported once, at the function's definition (_check_jumps)
            if self.loop_depth == 0:
                self.fail(TileRuleError, f"'{word}' outside a loop; it leaves (or skips a turn of) the innermost for or while", s.span)
            self.note_divergence(word, s.span)
            return ir.Break(s.span) if word == "break" else ir.Continue(s.span)
        if isinstance(s, A.Return):
            if self.fn_frames:
                raise _Abort()  # reported once, at the function's definition (_check_jumps)
            if self.returned is None:
                self.returned = s.span.line + self.src.line_offset
            if self.cluster_reduced is not None:
                self.fail(TileRuleError, f"'return' after the cluster reduction at line "
                          f"{self.cluster_reduced.line + self.src.line_offset}: a kernel with cluster reductions runs "
                          f"to its end (every CTA of the cluster waits there until the others have read its "
                          f"copy); put the rest of the kernel under an if instead", s.span)
            self.note_divergence("return", s.span)
            return ir.Return(s.span)
        if isinstance(s, A.ExprStmt):
            return self.expr_stmt(s, env)
        self.fail(TileRuleError, "unsupported statement", s.span)

    def note_divergence(self, word, span):
        """After a jump taken under non-uniform control, some threads are gone: the rest of the
        block runs under that control, and a `break` or `return` also leaves the threads that
        took it out of every later turn of the loop(s) it leaves, so the whole loop body does."""
        lvl = self.control_level()
        if lvl == ir.UNIFORM:
            return
        reason = (lvl, span, self.clause(word, None, span))
        frames = [len(self.diverged) - 1] if word != "return" else list(range(len(self.diverged)))
        for f in frames:
            cur = self.diverged[f]
            if cur is None or cur[0] < lvl:
                self.diverged[f] = reason
        loops = self.loop_keys[-1:] if word == "break" else self.loop_keys if word == "return" else []
        for key in loops:
            cur = self.loop_div.get(key)
            if cur is None or cur[0] < lvl:
                self.loop_div[key] = reason

    def loop_body(self, key, body, env):
        self.loop_depth += 1
        self.diverged.append(self.loop_div.get(key))
        self.loop_keys.append(key)
        if self.fn_frames:
            self.fn_frames[-1]["loops"] += 1
        try:
            return self.block(body, env)
        finally:
            self.loop_depth -= 1
            self.diverged.pop()
            self.loop_keys.pop()
            if self.fn_frames:
                self.fn_frames[-1]["loops"] -= 1

    def while_stmt(self, s: A.While, env):
        cond, u = None, ir.UNIFORM
        try:
            cond = self.cond(s.cond, env, "a while condition")
            u = self.uni(cond)
        except _Abort:
            pass
        self.control.append((u, s.cond.span, self.clause("while", s.cond, s.cond.span)))
        try:
            body = self.loop_body(self.decl_key(s.span), s.body, env.child())
        finally:
            self.control.pop()
        if cond is None:
            raise _Abort()
        return ir.While(cond, body, s.span)

    def if_stmt(self, s: A.If, env):
        cond, u = None, ir.UNIFORM
        try:
            cond = self.cond(s.cond, env, "an if condition")
            u = self.uni(cond)
        except _Abort:
            pass
        self.control.append((u, s.cond.span, self.clause("if", s.cond, s.cond.span)))
        try:
            then = self.block(s.then, env.child())
            orelse = self.block(s.orelse, env.child())
        finally:
            self.control.pop()
        if cond is None:
            raise _Abort()
        return ir.If(cond, then, orelse, s.span)

    def let_stmt(self, s: A.Let, env, scope_names):
        value = self.expr(s.value, env)
        typ = value.type
        if isinstance(typ, ir.TensorT):
            self.fail(TileRuleError, "a tensor cannot be bound whole; bind a slice, as in let v = A[r :+ 64, :]", s.value.span)
        if s.type is not None:
            want = self.type_expr(s.type, env)
            value = self.coerce(value, want, s.value.span)
            typ = want
        elif isinstance(value, ir.Const):
            value = self.fin(value)
            typ = value.type
        if isinstance(typ, ir.TileT):
            is_view = isinstance(value, ir.Slice) or (isinstance(value, ir.Ref) and value.sym.kind in ("var", "let", "view") and isinstance(value.sym.type, ir.TileT))
            if not is_view:
                self.require_uniform_control("a tile statement (let of a tile)", "a tile statement", s.span)
            if is_view and value.type != typ:
                is_view = False  # a converting let makes a tile of its own
                self.require_uniform_control("a tile statement (let of a tile)", "a tile statement", s.span)
            sym = self.new_sym(s.name, "view" if is_view else "let", typ, s.span)
            self.sym_uni[id(sym)] = ir.UNIFORM
            if not is_view:
                self.tile_decls.setdefault(s.name, []).append(sym)
        else:
            sym = self.new_sym(s.name, "let", typ, s.span)
            self.sym_uni[id(sym)] = max(self.uni(value), self.control_level())
        self.declare(env, scope_names, s.name, sym, s.span)
        return ir.Let(sym, self.fin(value), s.span)

    def var_stmt(self, s: A.VarDecl, env, scope_names):
        want = self.type_expr(s.type, env) if s.type is not None else None
        value = self.expr(s.value, env) if s.value is not None else None
        if want is None and value is None:
            self.fail(TileTypeError, f"var '{s.name}' needs a type or an initial value, as in 'var {s.name}: f32 = 0.0'", s.span)
        if value is not None and isinstance(value.type, ir.TensorT):
            self.fail(TileRuleError, "a tensor cannot be copied whole; copy a slice, as in var t = A[r :+ 64, :]", s.value.span)
        if want is None:
            if isinstance(value, ir.Const):
                value = self.fin(value)
            want = value.type
        if value is not None:
            value = self.coerce(value, want, s.value.span)
        if isinstance(want, ir.TileT):
            self.require_uniform_control("a tile statement (var of a tile)", "a tile statement", s.span)
        sym = self.new_sym(s.name, "var", want, s.span)
        key = self.decl_key(s.span)
        self.sym_key[id(sym)] = key
        if isinstance(want, ir.ScalarT):
            u = max(self.uni(value) if value is not None else ir.UNIFORM, self.control_level())
            self.var_uni[key] = max(self.var_uni.get(key, ir.UNIFORM), u)
        else:
            self.tile_decls.setdefault(s.name, []).append(sym)
        self.declare(env, scope_names, s.name, sym, s.span)
        return ir.VarDecl(sym, self.fin(value) if value is not None else None, s.span)

    def assign_stmt(self, s: A.Assign, env):
        target = self.target(s.target, env)
        value = self.expr(s.value, env)
        if isinstance(value.type, ir.TensorT):
            self.fail(TileRuleError, "a tensor cannot be assigned whole; assign a slice of it", s.value.span)
        ttype = target.type
        if s.op is not None:
            combined, opdt = self.binary_types(s.op, target, value, s.span)
            if isinstance(value, _Lit):
                value = self.fit_const(value, opdt, s.value.span)
            value = self.typed_const_operand(value, target, opdt)
            if isinstance(ttype, ir.TileT) and isinstance(combined, ir.TileT) and not _fits(combined.shape, ttype.shape):
                self.fail(TileShapeError, f"'{self.text(s.value)}' of shape {_shape_str(combined.shape)} does not fit the target of shape {_shape_str(ttype.shape)}", s.value.span)
            self.coerce(ir.Binary(s.op, target, value, combined, s.span), ttype, s.value.span)
        else:
            value = self.coerce(value, ttype, s.value.span)
        if isinstance(ttype, ir.TileT):
            self.require_uniform_control("a tile statement (assignment to a tile)", "a tile statement", s.span)
        elif isinstance(target, ir.Ref):
            key = self.sym_key.get(id(target.sym))
            if key is not None:
                u = max(self.uni(value), self.control_level())
                self.var_uni[key] = max(self.var_uni.get(key, ir.UNIFORM), u)
        return ir.Assign(self.fin(target), self.fin(value), s.op, s.span)

    def for_stmt(self, s: A.For, env):
        lo = hi = None
        step, unroll, u = 1, 1, ir.UNIFORM
        ok = True
        if len(s.args) == 1:
            lo_ast, hi_ast, step_ast = None, s.args[0], None
        else:
            lo_ast, hi_ast = s.args[0], s.args[1]
            step_ast = s.args[2] if len(s.args) == 3 else None
        try:
            lo = self.index_expr(lo_ast, env, "the loop's start") if lo_ast is not None else ir.Const(0, ir.ScalarT("index"), s.span)
            hi = self.index_expr(hi_ast, env, "the loop's end")
            u = max(self.uni(lo), self.uni(hi))
        except _Abort:
            ok = False
        try:
            if step_ast is not None:
                try:
                    step = _fold(step_ast, env)
                except _NotConst:
                    self.fail(TileRuleError, "a for loop's step must be a constant (a literal or an @autotune name); for a step known only at run time, use a while loop", step_ast.span)
                if not isinstance(step, int) or step <= 0 or step >= 2 ** 62:
                    self.fail(TileRuleError, f"a for loop's step must be a positive integer, not {step}; to count down, count up and compute the index", step_ast.span)
        except _Abort:
            ok = False
        try:
            if s.unroll is not None:
                if isinstance(s.unroll, str):
                    b = env.lookup(s.unroll)
                    if not isinstance(b, _Tune):
                        self.fail(TileRuleError, f"the unroll count '{s.unroll}' must be a constant: an integer literal or an @autotune name", s.unroll_span)
                    unroll = b.value
                else:
                    unroll = s.unroll
                if not 1 <= unroll <= 1024:
                    self.fail(TileRuleError, f"the unroll count must be at least 1 (and at most 1024), not {unroll}", s.unroll_span)
        except _Abort:
            ok = False
        if s.var in B.all_names() or s.var == "ctx" or s.var in B.CONSTANTS:
            self.err(TileNameError, f"'{s.var}' is a built-in name; choose another loop variable", s.span)
            raise _Abort()
        prior = env.lookup(s.var)
        if isinstance(prior, _MacroArg) and self.call_stack and prior.fn == self.call_stack[-1]:
            self.err(TileNameError, f"'{s.var}' is a parameter of function '{prior.fn}'; choose another loop variable", s.span)
            raise _Abort()
        if isinstance(prior, _Tune) or (isinstance(prior, ir.Sym) and prior.kind in ("tensor", "dim", "scalar_param")):
            what = "an @autotune name" if isinstance(prior, _Tune) else "a kernel parameter" if prior.kind != "dim" else "a dimension"
            self.err(TileNameError, f"'{s.var}' is {what}; choose another loop variable", s.span)
            raise _Abort()
        var = self.new_sym(s.var, "loop", ir.ScalarT("index"), s.span)
        self.sym_uni[id(var)] = max(u, self.control_level())
        benv = env.child()
        benv.names[s.var] = var
        self.control.append((u, s.span, self.clause("for", None, s.span)))
        try:
            body = self.loop_body(self.decl_key(s.span), s.body, benv.child())
        finally:
            self.control.pop()
        if not ok:
            raise _Abort()
        return ir.For(var, self.fin(lo), self.fin(hi), step, unroll, body, s.span)

    def expr_stmt(self, s: A.ExprStmt, env):
        e = s.expr
        if isinstance(e, A.Call):
            b = env.lookup(e.func)
            if isinstance(b, _Poison):
                raise _Abort()
            if isinstance(b, _MacroArg):
                self.fail(TileRuleError, f"'{e.func}' is a parameter, not a function", e.func_span)
            if b is not None and not isinstance(b, _Tune):
                self.fail(TileNameError, f"'{e.func}' is not a function", e.func_span)
            if e.func == "barrier":
                if e.args:
                    self.fail(TileRuleError, "barrier() takes no arguments", e.span)
                self.require_uniform_control("barrier() (it would hang)", "barrier()", e.span)
                return ir.Barrier(s.span)
            if e.func in B.ATOMICS:
                return self.atomic(e, env)
            if e.func in B.CLUSTER_REDUCTIONS:
                return self.cluster_reduce(e, env)
            if e.func in self.fns and not self.fns[e.func].is_expr:
                return self.inline_stmt_fn(self.fns[e.func], e, env)
        # any other expression: its value would be dropped
        self.expr(e, env)
        self.fail(TileRuleError, f"the value of '{self.text(e)}' is not used; assign it, or call a statement function", e.span)

    def atomic(self, e: A.Call, env):
        """atomic_add / atomic_max of one tensor element (per-thread code, any control) or of a
        tensor slice (a tile atomic: a tile statement, so under uniform control; each element
        valid in the value and inside the tensor is updated once, by its owner thread)."""
        f = e.func
        if len(e.args) != 2:
            self.fail(TileRuleError, f"{f}(T[i, ...], v) takes a tensor element (or a tensor slice) and a value", e.span)
        target = self.target(e.args[0], env)
        tile = isinstance(target, ir.Slice)
        if not isinstance(target, (ir.Element, ir.Slice)) or target.base.kind != "tensor":
            what = ("a slice of a tile" if isinstance(target, ir.Slice) else "an element of a tile"
                    if isinstance(target, ir.Element) else f"'{self.text(e.args[0])}'")
            if isinstance(target, (ir.Element, ir.Slice)) and target.base.kind == "view":
                what = f"'{self.text(e.args[0])}', through the let view '{target.base.name}'"
            self.fail(TileRuleError, f"the first argument of {f} must be one element of a tensor, as in T[i, j], "
                      f"or a slice of a tensor, as in T[r :+ 1, c :+ 64] (a tile atomic), not {what}; atomics "
                      f"update global memory (name the tensor itself)", e.args[0].span)
        value = self.expr(e.args[1], env)
        if isinstance(value.type, ir.TensorT):
            self.fail(TileRuleError, "a tensor cannot be used whole; slice it", e.args[1].span)
        if not tile and not isinstance(value.type, ir.ScalarT):
            self.fail(TileTypeError, f"{f} of one element takes one scalar value, not {_type_str(value.type)}; to "
                      f"update a tile of elements at once, give a slice of the tensor of that shape, as in "
                      f"{f}(T[r :+ 1, c :+ 64], t)", e.args[1].span)
        dt = target.type.dtype
        if dt not in ("f32", "f64", "i32", "i64", "u32", "f16", "bf16"):
            self.fail(TileTypeError, f"{f} works on f16, bf16, f32, f64, i32, i64 and u32 tensors, not {dt}", e.args[0].span)
        if f == "atomic_max" and dt in ("f16", "bf16"):
            self.fail(TileTypeError, "atomic_max works on f32, f64, i32, i64 and u32 tensors", e.args[0].span)
        if tile:
            self.require_uniform_control(f"a tile atomic ({f} into a tensor slice, which updates each element "
                                         f"once: it needs no `if ctx.thread == 0`)", "a tile statement", e.span)
            if isinstance(value.type, ir.TileT) and not _fits(value.type.shape, target.type.shape):
                self.fail(TileShapeError, f"{f} into a slice of shape {_shape_str(target.type.shape)} takes a tile of "
                          f"that shape (or one that broadcasts to it), not {_shape_str(value.type.shape)}", e.args[1].span)
        value = self.coerce(value, target.type, e.args[1].span)
        return ir.Atomic(B.ATOMICS[f], self.fin(target), self.fin(value), e.span)

    def cluster_reduce(self, e: A.Call, env):
        """cluster_sum(t) / cluster_max(t) / cluster_min(t): a tile var combined across the CTAs
        of the cluster. Every CTA of the cluster must reach it exactly once (a CTA missing from
        a cluster barrier hangs the others), hence: top level of the kernel body only, and no
        `return` before it."""
        f = e.func
        if len(e.args) != 1:
            self.fail(TileRuleError, f"{f}(t) takes one argument: a tile var, as in {f}(s)", e.span)
        if "cluster" not in self.attrs:
            self.fail(TileRuleError, f"{f} combines a tile across the CTAs of a thread block cluster; give the "
                      f"kernel @cluster(n) (n CTAs along x form a cluster)", e.span)
        if self.loop_depth or self.control:
            self.fail(TileRuleError, f"{f} must be at the top level of the kernel body, not inside a loop or an "
                      f"if: every CTA of the cluster has to reach it exactly once", e.span)
        if self.returned is not None:
            self.fail(TileRuleError, f"{f} comes after the 'return' at line {self.returned}: a CTA that returned "
                      f"would leave the others of its cluster waiting forever", e.span)
        self.cluster_reduced = e.span
        arg = e.args[0]
        target = self.target(arg, env)
        if not isinstance(target, ir.Ref) or not isinstance(target.type, ir.TileT):
            self.fail(TileTypeError, f"{f} takes a tile var, not {_type_str(target.type)}", arg.span)
        dt = target.type.dtype
        if dt not in B.CLUSTER_DTYPES:
            self.fail(TileTypeError, f"{f} works on f32 and f64 tiles; '{target.sym.name}' is {dt} (declare it as "
                      f"tile<f32>[...])", arg.span)
        size = target.type.size * T.DTYPES[dt].itemsize
        if size > B.MAX_CLUSTER_TILE_BYTES:
            self.fail(TileRuleError, f"{f} of '{target.sym.name}' ({_type_str(target.type)}, {size} bytes): a cluster "
                      f"reduction combines tiles of at most {B.MAX_CLUSTER_TILE_BYTES} bytes", arg.span)
        return ir.ClusterReduce(e.span, B.CLUSTER_REDUCTIONS[f], self.fin(target))

    # ---- functions
    @contextlib.contextmanager
    def at_call_site(self, m: _MacroArg):
        """Check a function argument as the caller would: its call stack and call sites."""
        saved = (self.call_stack, self.call_sites)
        self.call_stack, self.call_sites = list(m.caller[0]), list(m.caller[1])
        try:
            yield
        finally:
            self.call_stack, self.call_sites = saved

    def bind_args(self, f: A.Function, call: A.Call, env):
        if len(call.args) != len(f.params):
            self.fail(TileRuleError, f"function '{f.name}' takes {len(f.params)} argument(s), not {len(call.args)}", call.span)
        if f.name in self.recursive:
            raise _Abort()  # reported once, at the function's definition
        if f.name in self.call_stack:
            self.fail(TileRuleError, f"function '{f.name}' calls itself; recursion is not allowed", call.span)
        self.inlined += 1
        if self.inlined > MAX_INLINED_CALLS:
            if self.inlined == MAX_INLINED_CALLS + 1:   # reported once, at the kernel's own statement
                site = self.kernel_stmt.span if self.kernel_stmt is not None else call.span
                self.errors.append(self.src.error(
                    TileRuleError, f"with this statement, kernel '{self.k.name}' inlines more than "
                    f"{MAX_INLINED_CALLS} function bodies: an argument is substituted wherever its parameter "
                    "appears, so calls nested in arguments multiply; bind such an argument with let first",
                    site.line, site.column))
            raise _Abort()
        written = _written_params(f)
        for p, a in zip(f.params, call.args):
            if p in written and not isinstance(a, A.Name):
                self.fail(TileRuleError, f"function '{f.name}' indexes or assigns its parameter '{p}', so it must be passed a name, not '{self.text(a)}'", a.span)
        caller = (tuple(self.call_stack), tuple(self.call_sites))
        fenv = env.child()
        for p, a in zip(f.params, call.args):
            fenv.names[p] = _MacroArg(a, env, f.name, caller)
        return fenv

    @contextlib.contextmanager
    def inside(self, f: A.Function, call: A.Call):
        self.call_stack.append(f.name)
        self.call_sites.append((f.name, call.span))
        try:
            yield
        finally:
            self.call_stack.pop()
            self.call_sites.pop()

    def inline_stmt_fn(self, f: A.Function, call: A.Call, env):
        fenv = self.bind_args(f, call, env)
        self.fn_frames.append({"loops": 0})
        saved_path = self.inline_path
        self.inline_path = self.inline_path + ((call.span.line, call.span.column),)
        try:
            with self.inside(f, call):
                body = self.block(f.body, fenv.child())
        finally:
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
            self.fail(TileTypeError, "only kernel parameters are tensors; declare a tile, as in tile<f32>[64, 64]", t.span)
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
                if isinstance(b, _Poison):
                    raise _Abort()
                if b is None:
                    self.fail(TileNameError, f"'{d.id}' is not defined; {what} must be a literal or an @autotune name", d.span)
                if isinstance(b, ir.Sym) and b.kind == "dim":
                    self.fail(TileShapeError, f"{what} must be a constant, but '{d.id}' is a runtime dimension; bind it with @autotune({d.id} in [...]) or use a literal", d.span)
                if isinstance(b, _MacroArg):
                    with self.at_call_site(b):
                        return self.const_extent(b.expr, b.env, what)
            self.fail(TileShapeError, f"{what} must be a constant: a literal or an @autotune name, not '{self.text(d)}'", d.span)
        if not isinstance(v, int) or v <= 0 or v > 2 ** 31:
            self.fail(TileShapeError, f"{what} must be a positive integer, not {v}", d.span)
        return v

    # ---- expressions
    def text(self, e) -> str:
        sp = e.span
        if sp.line == sp.end_line and 1 <= sp.line <= len(self.src.lines):
            return self.src.lines[sp.line - 1][sp.column - 1:sp.end_column - 1]
        return "expression"

    def sym_level(self, s: ir.Sym) -> int:
        """The uniformity of a symbol as far as the walks have found it (section 11)."""
        if s.kind == "var" and isinstance(s.type, ir.ScalarT):
            return self.var_uni.get(self.sym_key.get(id(s)), ir.UNIFORM)
        return self.sym_uni.get(id(s), ir.UNIFORM)

    def uni(self, e) -> int:
        return expr_level(e, self.sym_level)

    def scalar_levels(self, params, dims, body) -> Dict[ir.Sym, int]:
        """The level of every scalar symbol of the variant (the record `KernelIR.scalar_uniformity`
        that later stages read through `tilenb.analysis.uniformity`)."""
        syms = [p.sym for p in params] + list(dims.values())
        for st in ir.walk_stmts(body):
            if isinstance(st, (ir.Let, ir.VarDecl)):
                syms.append(st.sym)
            elif isinstance(st, ir.For):
                syms.append(st.var)
        return {s: self.sym_level(s) for s in syms if isinstance(s.type, ir.ScalarT)}

    def cond(self, e, env, what):
        c = self.expr(e, env)
        if c.type != ir.ScalarT("bool"):
            self.fail(TileTypeError, f"{what} must be a bool scalar (a comparison), not {_type_str(c.type)}", e.span)
        return self.fin(c)

    def to_index(self, x, span):
        if isinstance(x, ir.Const):
            return self.fit_const(x, "index", span) if isinstance(x, _Lit) else ir.Const(int(x.value), ir.ScalarT("index"), x.span)
        return x

    def index_expr(self, e, env, what):
        x = self.expr(e, env)
        if not isinstance(x.type, ir.ScalarT) or not T.DTYPES[x.type.dtype].is_int:
            extra = "; convert it, as in i32(x)" if isinstance(x.type, ir.ScalarT) and x.type.dtype in ("u8", "u16", "u32") else ""
            self.fail(TileTypeError, f"{what} must be an integer, not {_type_str(x.type)}{extra}", e.span)
        return self.to_index(x, e.span)

    def target(self, e, env) -> ir.Expr:
        if isinstance(e, A.Name):
            b = env.lookup(e.id)
            if isinstance(b, _Poison):
                raise _Abort()
            if isinstance(b, _MacroArg):
                with self.at_call_site(b):
                    return self.target(b.expr, b.env)
            if b is None:
                self.fail(TileNameError, f"'{e.id}' is not defined; declare it with 'var {e.id} = ...'", e.span)
            if isinstance(b, _Tune):
                self.fail(TileRuleError, f"'{e.id}' is an @autotune constant and cannot be assigned", e.span)
            s = b
            if s.kind == "var":
                return ir.Ref(s, s.type, e.span)
            if s.kind in ("let", "view"):
                self.fail(TileRuleError, f"'{e.id}' is a let and cannot be rebound; declare it with 'var' to change it" + (" (a let view can be written through a slice, as in x[...] = e)" if s.kind == "view" else ""), e.span)
            if s.kind == "tensor":
                self.fail(TileRuleError, f"tensor '{e.id}' cannot be assigned whole; write a slice, as in {e.id}[r :+ 8, :] = t", e.span)
            self.fail(TileRuleError, f"'{e.id}' ({'a loop variable' if s.kind == 'loop' else 'a parameter' if s.kind == 'scalar_param' else 'a dimension'}) cannot be assigned", e.span)
        if isinstance(e, A.Index):
            return self.index(e, env)
        if isinstance(e, A.Call) and e.func == "flat":
            return self.expr(e, env)
        self.fail(TileRuleError, f"'{self.text(e)}' cannot be assigned; assign a var, a slice or an element", e.span)

    def expr(self, e, env, allow_ctx=True) -> ir.Expr:
        t = type(e)
        if t is A.Name:       # the common cases first, by exact class (the chain below: subclasses)
            return self.name(e, env, allow_ctx)
        if t is A.Binary:
            a = self.expr(e.left, env, allow_ctx)
            b = self.expr(e.right, env, allow_ctx)
            return self.binary(e.op, a, b, e.span)
        if t is A.Call:
            return self.call(e, env, allow_ctx)
        if t is A.Index:
            return self.index(e, env)
        if isinstance(e, A.IntLit):
            if e.value > 2 ** 63:
                self.fail(TileTypeError, f"the integer {e.value} does not fit in 64 bits", e.span)
            return _Lit(e.value, _lit_type(e.value), e.span)
        if isinstance(e, A.FloatLit):
            if not math.isfinite(e.value):
                self.fail(TileTypeError, f"the float literal {self.text(e)} is out of the range of every float type", e.span)
            return _Lit(e.value, ir.ScalarT("f32"), e.span)
        if isinstance(e, A.Name):
            return self.name(e, env, allow_ctx)
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
                    self.fail(TileRuleError, "ctx is not available here: @grid is computed on the host, before any CTA runs", e.span)
                return ir.Ctx(f, ir.ScalarT("index"), e.span)
            self.fail(TileNameError, f"'{self.text(e)}': only ctx has fields (ctx.block.x, ctx.thread, ...)", e.span)
        if isinstance(e, A.Unary):
            x = self.expr(e.operand, env, allow_ctx)
            return self.unary(e, x)
        if isinstance(e, A.Binary):
            a = self.expr(e.left, env, allow_ctx)
            b = self.expr(e.right, env, allow_ctx)
            return self.binary(e.op, a, b, e.span)
        if isinstance(e, A.Index):
            return self.index(e, env)
        if isinstance(e, A.Call):
            return self.call(e, env, allow_ctx)
        self.fail(TileRuleError, "unsupported expression", e.span)

    def name(self, e: A.Name, env, allow_ctx=True):
        b = env.lookup(e.id)
        if type(b) is ir.Sym:   # the common case (none of the binding classes below)
            if b.kind == "tensor":
                self.fail(TileRuleError, f"tensor '{e.id}' cannot be used whole; take a slice such as {e.id}[r :+ 64, :] or an element {e.id}[i, j]", e.span)
            return ir.Ref(b, b.type, e.span)
        if isinstance(b, _Poison):
            raise _Abort()
        if isinstance(b, _Unavailable):
            self.fail(TileRuleError, b.message, e.span)
        if isinstance(b, _MacroArg):
            with self.at_call_site(b):
                return self.expr(b.expr, b.env, allow_ctx)
        if isinstance(b, _Tune):
            return _Lit(b.value, _lit_type(b.value), e.span)
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
            if dt == "bool":
                self.fail(TileTypeError, "'-' does not apply to bool values; use '!'", e.span)
            if isinstance(x, _Lit):
                return _Lit(-x.value, _lit_type(-x.value), e.span)
            rt = self.with_dtype(t, T.compute_type(dt))
            if isinstance(x, ir.Const):
                return ir.Const(_convert_const(-x.value, rt.dtype), rt, e.span)
            return ir.Unary("-", x, rt, e.span)
        if e.op == "!":
            if dt != "bool":
                self.fail(TileTypeError, f"'!' needs a bool, not {dt}; compare first, as in x != 0", e.span)
            if isinstance(x, ir.Const):
                return ir.Const(not x.value, x.type, e.span)
            return ir.Unary("!", x, t, e.span)
        self.require_arith(dt, e.span)
        if not T.DTYPES[dt].is_int:
            self.fail(TileTypeError, f"'~' needs an integer, not {dt}", e.span)
        if isinstance(x, _Lit):
            return _Lit(~x.value, _lit_type(~x.value), e.span)
        rt = self.with_dtype(t, T.compute_type(dt))
        if isinstance(x, ir.Const):
            return ir.Const(_convert_const(~x.value, rt.dtype), rt, e.span)
        return ir.Unary("~", x, rt, e.span)

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

    # ---- literals
    def fit_const(self, c: ir.Const, dtype: str, span) -> ir.Const:
        """`c` as a constant of type `dtype`. A literal must fit (a float literal in a float type,
        an integer literal in range); a typed constant converts (wrapping or rounding)."""
        if not isinstance(c, _Lit):
            return ir.Const(_convert_const(c.value, dtype), ir.ScalarT(dtype), c.span)
        v = c.value
        d = T.DTYPES[dtype]
        if dtype == "bool":
            self.fail(TileTypeError, f"cannot use the number {self.lit_text(c)} as a bool; compare, as in x != 0", span)
        if d.is_float:
            r = _round_float(float(v), dtype)
            if not math.isfinite(r):
                big = float(np.finfo(d.numpy).max) if dtype != "bf16" else 3.3895313892515355e38
                self.fail(TileTypeError, f"the constant {self.lit_text(c)} is out of the range of {dtype} (largest finite value about {big:.3g})", c.span)
            return ir.Const(r, ir.ScalarT(dtype), c.span)
        if isinstance(v, float):
            self.fail(TileTypeError, f"the float literal {self.lit_text(c)} cannot be {'an index' if dtype == 'index' else 'an ' + dtype}; convert it, as in {('i32' if dtype == 'index' else dtype)}(x)", span)
        lo, hi = _int_range("i64" if dtype == "index" else dtype)
        if not lo <= v <= hi:
            self.fail(TileTypeError, f"the constant {v} does not fit in {dtype} ({lo} to {hi})", c.span)
        return ir.Const(int(v), ir.ScalarT(dtype), c.span)

    def lit_text(self, c):
        if c.span.line and c.span.end_line == c.span.line:
            t = self.text(c)
            if t and t != "expression":
                return t
        return repr(c.value)

    def fin(self, e):
        """`e` with every open literal given its own type (f32, i32 or i64): see `_finalize`."""
        return _finalize(e, self.fit_const)

    # ---- operators
    def binary(self, op, a, b, span):
        t, opdt = self.binary_types(op, a, b, span)
        la, lb = isinstance(a, _Lit), isinstance(b, _Lit)
        if la and not lb:
            a = self.fit_const(a, opdt, span)
        elif lb and not la:
            b = self.fit_const(b, opdt, span)
        a, b = self.typed_const_operand(a, b, opdt), self.typed_const_operand(b, a, opdt)
        if op in ("<<", ">>") and isinstance(b, ir.Const) and not isinstance(b, _Lit):
            bits = T.DTYPES[opdt].bits
            if not 0 <= b.value < bits:
                self.fail(TileRuleError, f"a shift by {b.value} is out of range for {opdt}: shift counts run from 0 to {bits - 1}", b.span)
        if isinstance(a, ir.Const) and isinstance(b, ir.Const) and isinstance(t, ir.ScalarT):
            folded = self.fold_binary(op, a, b, t, opdt, span)
            if folded is not None:
                return folded
        return ir.Binary(op, a, b, t, span)

    @staticmethod
    def typed_const_operand(x, other, opdt):
        """A typed constant (say f64(0.1)) next to a value whose arithmetic type is narrower
        (an f32) decides the operand type itself. The backends take a `Const` operand to have
        adapted to the other side, as literals do, so such a constant is given as a conversion."""
        if (isinstance(x, ir.Const) and not isinstance(x, _Lit) and not isinstance(other, ir.Const)
                and isinstance(x.type, ir.ScalarT) and opdt != "bool"
                and T.compute_type(other.type.dtype) != opdt):
            return ir.Convert(x, ir.ScalarT(opdt), x.span)
        return x

    def fold_binary(self, op, a, b, t, opdt, span):
        """Fold an operator on two constants. Open literals fold exactly and stay open; typed
        constants fold in their type (left alone where the result would wrap or is IEEE-special)."""
        x, y = a.value, b.value
        both_lit = isinstance(a, _Lit) and isinstance(b, _Lit)
        is_int = isinstance(x, int) and isinstance(y, int) and not isinstance(x, bool) and not isinstance(y, bool)
        if op in ("/", "%") and y == 0:
            if is_int or opdt and T.DTYPES[opdt].is_int:
                self.fail(TileRuleError, f"{'division' if op == '/' else 'remainder'} by zero in a constant expression", span)
            return None
        if op in ("&&", "||"):
            v = (x and y) if op == "&&" else (x or y)
            return ir.Const(bool(v), t, span)
        if op in ("==", "!=", "<", "<=", ">", ">="):
            if not both_lit and T.DTYPES[opdt].is_float:
                x, y = _round_float(x, opdt), _round_float(y, opdt)
            v = {"==": x == y, "!=": x != y, "<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]
            return ir.Const(bool(v), t, span)
        if is_int:
            if op == "+":
                v = x + y
            elif op == "-":
                v = x - y
            elif op == "*":
                v = x * y
            elif op == "/":
                v = _cdiv_trunc(x, y)
            elif op == "%":
                v = x - _cdiv_trunc(x, y) * y
            elif op == "&":
                v = x & y
            elif op == "|":
                v = x | y
            elif op == "^":
                v = x ^ y
            elif op in ("<<", ">>"):
                if not 0 <= y < 64:
                    if both_lit:
                        self.fail(TileRuleError, f"a shift by {y} is out of range: shift counts run from 0 to 63", b.span)
                    return None
                v = x << y if op == "<<" else x >> y
            else:
                return None
            if both_lit:
                if not -(2 ** 63) <= v < 2 ** 63:
                    self.fail(TileTypeError, f"the constant expression '{self.text_span(span)}' is {v}, which does not fit in 64 bits", span)
                return _Lit(v, _lit_type(v), span)
            lo, hi = _int_range("i64" if t.dtype == "index" else t.dtype)
            return ir.Const(v, t, span) if lo <= v <= hi else None
        if op not in ("+", "-", "*", "/", "%"):
            return None
        fx, fy = float(x), float(y)
        if both_lit:
            with np.errstate(all="ignore"):
                v = {"+": fx + fy, "-": fx - fy, "*": fx * fy, "/": fx / fy if fy else math.nan,
                     "%": math.fmod(fx, fy) if fy else math.nan}[op]
            if not math.isfinite(v):
                return None
            return _Lit(v, ir.ScalarT("f32"), span)
        npdt = T.DTYPES[t.dtype].numpy
        with np.errstate(all="ignore"):
            xa, ya = np.asarray(fx, npdt), np.asarray(fy, npdt)
            r = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide, "%": np.fmod}[op](xa, ya)
        v = float(r)
        if not math.isfinite(v):
            return None
        return ir.Const(v, t, span)

    def text_span(self, span):
        if span.line == span.end_line and 1 <= span.line <= len(self.src.lines):
            return self.src.lines[span.line - 1][span.column - 1:span.end_column - 1]
        return "..."

    def operand_types(self, a, b, span, what):
        """The type a and b are combined in: an open literal takes the other side's
        arithmetic type; two values must promote (no int with float, nothing with bool)."""
        ta, tb = a.type.dtype, b.type.dtype
        for dt in (ta, tb):
            self.require_arith(dt, span)
        la, lb = isinstance(a, _Lit), isinstance(b, _Lit)
        if ta == "bool" or tb == "bool":
            if ta == tb:
                return "bool"
            other = tb if ta == "bool" else ta
            self.fail(TileTypeError, f"{what} mixes bool and {other}; bool converts to and from nothing (compare first, or use where(c, a, b))", span)
        if la and not lb:
            return self.literal_adapts(a, tb, span, what)
        if lb and not la:
            return self.literal_adapts(b, ta, span, what)
        if la and lb:
            if "f32" in (ta, tb):
                return "f32"
            return "i64" if "i64" in (ta, tb) else "i32"
        r = T.promote(ta, tb)
        if r is None:
            fix = "f32" if T.DTYPES[ta].is_float or T.DTYPES[tb].is_float else "i32"
            self.fail(TileTypeError, f"{what} mixes {ta} and {tb}; convert one side first, as in {fix}(x)", span)
        return r

    def literal_adapts(self, lit, other, span, what):
        if T.DTYPES[other].is_float:
            return T.compute_type(other)
        if isinstance(lit.value, float):
            self.fail(TileTypeError, f"{what} mixes {other} and the float literal {self.lit_text(lit)}; convert first, as in f32(x)", span)
        return T.compute_type(other)

    def combine_shapes(self, types, span, what):
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

    def binary_types(self, op, a, b, span, what=None):
        """(result type, operand type) of `a op b`; `what` names it in errors (default 'op')."""
        what = what or f"'{op}'"
        for x in (a, b):
            self.scalar_dtype(x.type, span)
        self.require_uniform_scalars_with_tiles((a, b), span)
        shape = self.combine_shapes((a.type, b.type), span, what)
        if op in ("&&", "||"):
            if a.type.dtype != "bool" or b.type.dtype != "bool":
                self.fail(TileTypeError, f"{what} needs bool operands, not {a.type.dtype} and {b.type.dtype}", span)
            dt = opdt = "bool"
        elif op in ("==", "!=", "<", "<=", ">", ">="):
            opdt = self.operand_types(a, b, span, what)
            if opdt == "bool" and op not in ("==", "!="):
                self.fail(TileTypeError, f"{what} does not order bools", span)
            dt = "bool"
        else:
            dt = opdt = self.operand_types(a, b, span, what)
            if dt == "bool":
                self.fail(TileTypeError, f"{what} does not apply to bool values", span)
            if op in ("&", "|", "^", "<<", ">>") and not T.DTYPES[dt].is_int:
                self.fail(TileTypeError, f"{what} needs integers, not {dt}", span)
        return (ir.TileT(dt, shape) if shape is not None else ir.ScalarT(dt)), opdt

    def coerce(self, value, want, span):
        """`value` as stored into something of type `want`: within a kind (int, float) values
        convert on store; across kinds, or to or from bool, a conversion call is needed."""
        vt = value.type
        if isinstance(vt, ir.TensorT):
            self.fail(TileRuleError, "a tensor cannot be used whole; slice it", span)
        if isinstance(want, ir.TensorT):
            self.fail(TileRuleError, "a tensor cannot be assigned whole; assign a slice of it", span)
        if isinstance(want, ir.ScalarT) and isinstance(vt, ir.TileT):
            self.fail(TileTypeError, f"cannot store a tile {_type_str(vt)} into a scalar of type {want.dtype}", span)
        vd, wd = vt.dtype, want.dtype
        if vd != wd:
            if "bool" in (vd, wd):
                self.fail(TileTypeError, f"cannot store {vd} into {wd}: bool converts to and from nothing" + (" (use where(c, 1, 0))" if vd == "bool" else " (compare instead, as in x != 0)"), span)
            fv, fw = T.DTYPES[vd].is_float, T.DTYPES[wd].is_float
            if fv != fw and not (isinstance(value, _Lit) and fw):
                if isinstance(value, _Lit):
                    self.fail(TileTypeError, f"cannot store the float literal {self.lit_text(value)} into {wd}; write an integer, or {wd}(...)", span)
                self.fail(TileTypeError, f"cannot store {vd} into {wd} without a conversion; write {wd}(...)", span)
        if isinstance(want, ir.TileT):
            if isinstance(vt, ir.TileT):
                if not _fits(vt.shape, want.shape):
                    self.fail(TileShapeError, f"a tile of shape {_shape_str(vt.shape)} does not fit {_shape_str(want.shape)}", span)
            elif self.uni(value) > ir.UNIFORM:
                self.fail(TileRuleError, "a tile cannot be filled with a per-thread (varying) value; every thread must agree on it", span)
        if isinstance(value, ir.Const):
            return self.fit_const(value, wd, span)
        return value

    # ---- subscripts
    def resolve_base(self, base_ast, env):
        """The Sym a subscript's base names (through function parameters), and whether it is
        flat(...). The subscripts themselves stay in the caller's scope."""
        flat = False
        while True:
            if isinstance(base_ast, A.Call) and base_ast.func == "flat" and env.lookup("flat") is None:
                if flat:
                    self.fail(TileRuleError, "flat(flat(t)) is just flat(t)", base_ast.span)
                if len(base_ast.args) != 1:
                    self.fail(TileRuleError, "flat(t) takes one tile", base_ast.span)
                flat = True
                base_ast = base_ast.args[0]
                continue
            if isinstance(base_ast, A.Name):
                b = env.lookup(base_ast.id)
                if isinstance(b, _MacroArg):
                    base_ast, env = b.expr, b.env
                    continue
            break
        if not isinstance(base_ast, A.Name):
            self.fail(TileRuleError, f"only a tensor, a tile or a view can be subscripted, not '{self.text(base_ast)}'; bind it to a var first", base_ast.span)
        b = env.lookup(base_ast.id)
        if isinstance(b, _Poison):
            raise _Abort()
        if isinstance(b, _Unavailable):
            self.fail(TileRuleError, b.message, base_ast.span)
        if b is None:
            self.fail(TileNameError, f"'{base_ast.id}' is not defined", base_ast.span)
        if isinstance(b, _Tune):
            self.fail(TileTypeError, f"'{base_ast.id}' is a constant and cannot be subscripted", base_ast.span)
        return b, flat, base_ast

    def index(self, e: A.Index, env):
        sym, flat, base_ast = self.resolve_base(e.base, env)
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
                if len(t.shape) != 2:
                    self.fail(TileShapeError, f"flat() takes a 2-D tile; '{sym.name}' is {_shape_str(t.shape)}, already one row", e.base.span)
                extents = [1, t.size]
            what = f"tile '{sym.name}'"
        if len(e.subs) != len(extents):
            self.fail(TileShapeError, f"{what} has {len(extents)} dimension(s) but {len(e.subs)} subscript(s) are given", e.span)
        subs = []
        shape = []
        for i, (s, ext) in enumerate(zip(e.subs, extents)):
            if isinstance(s, A.IndexSub):
                subs.append(ir.SubIndex(self.fin(self.index_expr(s.index, env, "a subscript"))))
            elif isinstance(s, A.FullSub):
                if not isinstance(ext, int):
                    self.fail(TileShapeError, f"':' over dimension {i} of {what}, a runtime dimension ('{ext}'); a tile's shape must be constant, so write a slice such as 0 :+ 64", s.span)
                subs.append(ir.SubRange(ir.Const(0, ir.ScalarT("index"), s.span), ext, True))
                shape.append(ext)
            else:
                start = self.fin(self.index_expr(s.start, env, "a slice's start"))
                n = self.const_extent(s.length, env, "a slice's length")
                if self.uni(start) > ir.UNIFORM:
                    self.fail(TileRuleError, f"the slice start '{self.text(s.start)}' differs between threads; a slice makes a tile that all threads share, so its start must be the same in every thread (uniform)", s.start.span)
                subs.append(ir.SubRange(start, n))
                shape.append(n)
        if shape:
            # a scalar index of a slice selects the tile all threads share, as its starts do
            for s, sub in zip(e.subs, subs):
                if isinstance(sub, ir.SubIndex) and self.uni(sub.index) > ir.UNIFORM:
                    self.fail(TileRuleError, f"the index '{self.text(s.index)}' differs between threads; a slice makes a tile that all threads share, so its scalar indices must be the same in every thread (uniform), like its starts", s.index.span)
        if not shape:
            indices = tuple(x.index for x in subs)
            if sym.kind != "tensor":
                # a constant element index must lie inside the tile (tensors are runtime-sized)
                for i, (s, idx, ext) in enumerate(zip(e.subs, indices, extents)):
                    if isinstance(idx, ir.Const) and not 0 <= idx.value < ext:
                        self.fail(TileShapeError, f"the index {idx.value} is outside {what}: dimension {i} "
                                  f"has the extent {ext}, so its indices run from 0 to {ext - 1}", s.span)
            if sym.name in [n for n, _ in self.register_names] and sym.kind != "tensor":
                self.fail(TileRuleError, f"'{sym.name}' is kept in registers (@registers): it cannot be indexed, since each thread holds only its own elements", e.span)
            return ir.Element(sym, indices, flat, ir.ScalarT(t.dtype), e.span)
        if len(shape) > 2:
            self.fail(TileShapeError, f"a slice makes a tile of at most 2 dimensions, not {len(shape)}; select the others with scalar indices", e.span)
        if sym.kind != "tensor":
            # a slice of a tile must stay inside it
            for s, sub, ext in zip(e.subs, subs, extents):
                if isinstance(sub, ir.SubRange) and sub.length > ext:
                    self.fail(TileShapeError, f"a slice of length {sub.length} does not fit in {what}, whose extent is {ext}", s.span)
                if isinstance(sub, ir.SubRange) and isinstance(sub.start, ir.Const):
                    if sub.start.value < 0 or sub.start.value + sub.length > ext:
                        self.fail(TileShapeError, f"the slice {sub.start.value} :+ {sub.length} runs outside {what}, whose extent is {ext}", s.span)
            if sym.name in [n for n, _ in self.register_names]:
                self.fail(TileRuleError, f"'{sym.name}' is kept in registers (@registers): it cannot be sliced, since each thread holds only its own elements", e.span)
        return ir.Slice(sym, tuple(subs), flat, ir.TileT(t.dtype, tuple(shape)), e.span)

    # ---- calls
    def call(self, e: A.Call, env, allow_ctx=True):
        f = e.func
        b = env.lookup(f)
        if isinstance(b, _Poison):
            raise _Abort()
        if b is not None and not isinstance(b, _Tune):
            self.fail(TileNameError, f"'{f}' is not a function", e.func_span)
        if f in self.fns:
            fn = self.fns[f]
            if not fn.is_expr:
                self.fail(TileRuleError, f"'{f}' is a statement function and has no value; call it on a line of its own", e.span)
            fenv = self.bind_args(fn, e, env)
            with self.inside(fn, e):
                return self.expr(fn.body, fenv, allow_ctx)
        if f == "flat":
            if len(e.args) != 1:
                self.fail(TileRuleError, "flat(t) takes one declared tile", e.span)
            sym, _, _ = self.resolve_base(e.args[0], env)
            if not (isinstance(sym, ir.Sym) and isinstance(sym.type, ir.TileT)):
                self.fail(TileRuleError, "flat(t) takes one declared tile (a var or let tile)", e.span)
            full = A.FullSub(e.span)
            return self.index(A.Index(e, (full, full), e.span), env)
        if f == "bool":
            self.fail(TileTypeError, "there is no conversion to bool; compare instead, as in x != 0", e.span)
        if f == "barrier":
            self.fail(TileRuleError, "barrier() is a statement; write it on a line of its own", e.span)
        if f in B.ATOMICS or f in B.CLUSTER_REDUCTIONS:
            self.fail(TileRuleError, f"{f}() is a statement (it has no value); write it on a line of its own", e.span)
        if not (f in B.all_names()):
            self.fail(TileNameError, f"'{f}' is not defined: no function or built-in of that name", e.func_span)
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
            if isinstance(x, ir.Const):  # a conversion call converts, even a literal that does not fit
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
                if isinstance(x, _Lit):
                    return _Lit(abs(x.value), _lit_type(abs(x.value)), e.span)
                return ir.Math(f, (self.fin(x),), self.with_dtype(x.type, T.compute_type(dt)), e.span)
            if not T.DTYPES[dt].is_float:
                if isinstance(x, _Lit):
                    x = self.fit_const(x, "f32", e.span)
                    dt = "f32"
                else:
                    self.fail(TileTypeError, f"{f}() needs a float, not {dt}; convert first, as in f32(x)", e.span)
            if isinstance(x, _Lit):
                x = self.fit_const(x, "f32", e.span)
            return ir.Math(f, (x,), self.with_dtype(x.type, T.compute_type(dt)), e.span)
        if f in B.BINARY_MATH:
            nargs(2)
            a, bb = args
            t, opdt = self.binary_types("+", a, bb, e.span, f"{f}()")
            if isinstance(a, _Lit) and isinstance(bb, _Lit):
                v = (min if f == "min" else max)(a.value, bb.value)
                return _Lit(v, _lit_type(v), e.span) if not (isinstance(a.value, float) or isinstance(bb.value, float)) else _Lit(float(v), ir.ScalarT("f32"), e.span)
            if isinstance(a, _Lit):
                a = self.fit_const(a, opdt, e.span)
            if isinstance(bb, _Lit):
                bb = self.fit_const(bb, opdt, e.span)
            return ir.Math(f, (a, bb), t, e.span)
        if f == "where":
            nargs(3)
            c, a, bb = args
            if c.type.dtype != "bool":
                self.fail(TileTypeError, f"where()'s first argument must be a bool (a comparison), not {c.type.dtype}", e.args[0].span)
            self.require_uniform_scalars_with_tiles(args, e.span)
            shape = self.combine_shapes([x.type for x in args], e.span, "where()")
            dt = self.operand_types(a, bb, e.span, "where()")
            if isinstance(a, _Lit):
                a = self.fit_const(a, dt, e.span)
            if isinstance(bb, _Lit):
                bb = self.fit_const(bb, dt, e.span)
            return ir.Math("where", (c, a, bb), ir.TileT(dt, shape) if shape else ir.ScalarT(dt), e.span)
        if f == "cdiv":
            nargs(2)
            for a, aa in zip(args, e.args):
                if not isinstance(a.type, ir.ScalarT) or not T.DTYPES[a.type.dtype].is_int:
                    self.fail(TileTypeError, f"cdiv() takes integer scalars, not {_type_str(a.type)}", aa.span)
            dt = self.operand_types(args[0], args[1], e.span, "cdiv()")
            a, bb = args
            if isinstance(a, ir.Const) and isinstance(bb, ir.Const):
                if bb.value == 0:
                    self.fail(TileRuleError, "cdiv() by zero in a constant expression", e.span)
                v = -(-a.value // bb.value)
                if isinstance(a, _Lit) and isinstance(bb, _Lit):
                    return _Lit(v, _lit_type(v), e.span)
                return self.fit_const(_Lit(v, _lit_type(v), e.span), dt, e.span)
            if isinstance(a, _Lit):
                a = self.fit_const(a, dt, e.span)
            if isinstance(bb, _Lit):
                bb = self.fit_const(bb, dt, e.span)
            return ir.Math("cdiv", (a, bb), ir.ScalarT(dt), e.span)
        if f in B.REDUCTIONS:
            nargs(1)
            op, axis = B.REDUCTIONS[f]
            x = self.tile_arg(args[0], e.args[0], f)
            dt = x.type.dtype
            self.require_arith(dt, e.span)
            if dt == "bool":
                self.fail(TileTypeError, f"{f}() does not take bool tiles; use where(c, 1, 0) to count", e.span)
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
                self.fail(TileShapeError, f"{f}() takes 2-D tiles, not {_shape_str(a.type.shape)} and {_shape_str(bb.type.shape)}", e.span)
            if a.type.dtype != bb.type.dtype:
                self.fail(TileTypeError, f"{f}() needs operands of one type, not {a.type.dtype} and {bb.type.dtype}; convert one", e.span)
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
                self.fail(TileShapeError, f"transpose() takes a 2-D tile, not {_shape_str(x.type.shape)}", e.span)
            r, c = x.type.shape
            return ir.Transpose(x, ir.TileT(x.type.dtype, (c, r)), e.span)
        self.fail(TileNameError, f"'{f}' is not defined: no function or built-in of that name", e.func_span)

    def tile_arg(self, x, ast, f):
        if not isinstance(x.type, ir.TileT):
            self.fail(TileTypeError, f"{f}() takes a tile, not a {_type_str(x.type)}", ast.span)
        if not self.register_names:
            return x
        regs = [n for n, _ in self.register_names]
        for sub in ir.walk_expr(x):
            if isinstance(sub, ir.Ref) and sub.sym.name in regs and isinstance(sub.sym.type, ir.TileT):
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
            if isinstance(s, ir.ClusterReduce) and id(s.target.sym) in regs:
                self.err(TileRuleError, f"'{s.target.sym.name}' is kept in registers (@registers); cluster_{s.op} "
                         f"combines tiles in shared memory (drop it from @registers)", s.target.span)

    def check_budget(self, kir):
        """The shared-memory budget (spec section 12), in two parts that read the analysis'
        shared-memory map (`tilenb.analysis.smem`): the language's regions (the tiles, as the
        lifetimes pack them, and the cluster slots) within 48 KB, or the per-block limit with
        @dynshared; and the whole map of the kernel for any GPU (with the tensor cores' scratch
        and staging, which the generator adds after the tiles) within the per-block limit."""
        if self.check_tile_budget(kir):
            return
        self.check_device_budget(kir)

    def check_tile_budget(self, kir) -> bool:
        """Whether the tiles and cluster slots are over the budget (then the error is recorded)."""
        from ..analysis.lifetimes import ALIGN, cluster_slot_bytes, gemm_accumulators, tile_lifetimes
        # the checker knows no device: the limits of code for any GPU (tilenb.target.ANY, the
        # largest GPUs' per-block opt-in with @dynshared); a launch checks its device's own
        limit = ANY_TARGET.smem_limit(bool(kir.dynshared))
        # The footprint never exceeds the sum of the shared tiles (tilenb.analysis.lifetimes): when
        # every tile declared fits at once, or every one but those surely kept in registers
        # (@registers, GEMM-loop accumulators), the variant fits without computing its lifetimes.
        # the sums depend on the body alone: variants sharing a walk share them (`budget_memo`)
        memo = self.budget_memo if self.budget_memo is not None else {}
        slots = memo.get(("cluster_slots", kir.cluster))   # variants sharing a walk may differ in @cluster
        if slots is None:   # each cluster reduction publishes its tile in shared memory (codegen/cuda.py)
            slots = memo[("cluster_slots", kir.cluster)] = cluster_slot_bytes(kir)
        limit -= slots
        note = f" (after the {slots} bytes its cluster reductions publish)" if slots else ""
        total = memo.get("total")
        if total is None:
            sizes = []
            for s in ir.walk_stmts(kir.body):
                if type(s) in (ir.Let, ir.VarDecl) and type(s.sym.type) is ir.TileT:
                    t = s.sym.type
                    sizes.append((s.sym, (t.size * T.DTYPES[t.dtype].itemsize + ALIGN - 1) // ALIGN * ALIGN))
            total = memo["total"] = sum(n for _, n in sizes)
            memo["sizes"] = sizes
        if total <= limit:
            return False
        outside = memo.get("outside_registers")
        if outside is None:
            in_regs = {id(x) for x in kir.registers} | {id(x) for x in gemm_accumulators(kir)}
            outside = memo["outside_registers"] = sum(n for sym, n in memo["sizes"] if id(sym) not in in_regs)
        if outside <= limit:
            return False
        lt = tile_lifetimes(kir, self.budget_memo)
        if lt.footprint <= limit:
            return False
        shared = [t for t in lt.tiles if t.space == "shared"]
        alone = [t for t in shared if t.bytes > limit]
        if alone:   # one tile is too large by itself: it is the culprit, whatever else is alive
            first = max(alone, key=lambda t: (t.bytes, -t.start))
            what = f"it alone needs {first.bytes} bytes of shared memory"
        else:
            over = [t for t in shared if t.offset + t.bytes > limit] or shared
            first = min(over, key=lambda t: t.start)
            live = [t for t in shared if t.start <= first.start <= t.end]
            need = sum(t.bytes for t in live)
            if need <= limit:  # the packing, not one live set, overflows: name the largest set
                live, need = list(lt.live_at_peak), lt.largest_live_set
            names = ", ".join(f"{t.name} ({t.bytes} B)" for t in live)
            packed = f"; {lt.footprint} bytes as packed with the kernel's other tiles" if lt.footprint > need else ""
            what = f"the tiles alive here need {need} bytes of shared memory ({names}{packed})"
        decl = [s for _, s in lt.positions if isinstance(s, (ir.VarDecl, ir.Let)) and s.sym is first.sym]
        span = decl[0].span if decl else kir.span
        if kir.dynshared:
            msg = (f"tile '{first.name}' does not fit: {what}, more than the {limit}-byte per-block limit of the "
                   f"largest GPUs{note}; use smaller tiles")
        else:
            msg = (f"tile '{first.name}' does not fit: {what}, more than the static budget of {limit} bytes "
                   f"({ANY_TARGET.static_smem // 1024} KB)"
                   f"{note}; use smaller tiles, or add @dynshared to size shared memory at launch")
        self.errors.append(self.src.error(TileBudgetError, msg, span.line, span.column))
        return True

    def check_device_budget(self, kir):
        """The whole shared-memory map for any GPU (`Analysis.smem`) within the per-block limit:
        computed only when an upper bound of what the tensor cores add (`smem.lowering_bound`)
        could take the tiles past it."""
        from ..analysis.lifetimes import cluster_slot_bytes
        from ..analysis.smem import lowering_bound
        if self.errors:
            return
        memo = self.budget_memo if self.budget_memo is not None else {}
        extra = memo.get("lowering_bound")
        if extra is None:
            extra = memo["lowering_bound"] = lowering_bound(kir)
        if not extra:
            return
        tiles = memo.get("total")
        if tiles is None:
            tiles = sum((t.size * T.DTYPES[t.dtype].itemsize + 15) // 16 * 16 for t in
                        (s.sym.type for s in ir.walk_stmts(kir.body)
                         if type(s) in (ir.Let, ir.VarDecl) and type(s.sym.type) is ir.TileT))
        if tiles + cluster_slot_bytes(kir) + extra <= ANY_TARGET.dynamic_smem:
            return
        from ..analysis import analyze
        # the map of the code for any GPU, and of Hopper's (whose rings are sized to fit): over the
        # limit on both, no GPU runs the variant
        m = min((analyze(kir, arch=a).smem for a in (None, "sm_90")), key=lambda x: x.footprint)
        if m.footprint <= ANY_TARGET.dynamic_smem:
            return
        own = max([r.end for r in m.regions if r.kind in ("tile", "tile (unused)", "cluster slot")] + [0])
        added = sorted((r for r in m.regions if r.kind not in ("tile", "tile (unused)", "cluster slot")),
                       key=lambda r: -r.bytes)
        names = ", ".join(f"{r.name} ({r.bytes} B)" for r in added[:4]) + (", ..." if len(added) > 4 else "")
        line = added[0].lines[0] if added and added[0].lines else kir.span.line
        msg = (f"kernel '{kir.name}' needs {m.footprint} bytes of shared memory: its tiles and cluster slots "
               f"({own} B) and, after them, what its tensor-core dots need ({names}), more than the "
               f"{ANY_TARGET.dynamic_smem}-byte per-block limit of the largest GPUs; use smaller tiles")
        self.errors.append(self.src.error(TileBudgetError, msg, line, 1))


def _written_params(f: A.Function):
    """The parameters a function assigns or indexes: those must be passed names."""
    out = set()
    params = set(f.params)

    def base_name(t):
        while isinstance(t, A.Call) and t.func == "flat" and t.args:
            t = t.args[0]
        return t.id if isinstance(t, A.Name) and t.id in params else None

    def visit(n):
        if isinstance(n, A.Assign):
            t = n.target
            name = base_name(t.base if isinstance(t, A.Index) else t)
            if name:
                out.add(name)
        if isinstance(n, A.Index):
            name = base_name(n.base)
            if name:
                out.add(name)
        if isinstance(n, A.Call) and n.func == "flat" and n.args:
            name = base_name(n.args[0])
            if name:
                out.add(name)
        for c in _children(n):
            visit(c)
    visit(f.body)
    return out


def _convert_const(v, dt):
    """A constant converted as the language converts values: float -> int truncates toward
    zero and saturates (NaN -> 0); int -> narrower int wraps; to a float rounds."""
    d = T.DTYPES[dt]
    if dt == "bool":
        return bool(v)
    if d.is_float:
        return _round_float(float(v), dt)
    lo, hi = _int_range("i64" if dt == "index" else dt)
    if isinstance(v, float):
        if v != v:
            return 0
        return int(max(lo, min(hi, math.trunc(v)))) if math.isfinite(v) else (hi if v > 0 else lo)
    v = int(v)
    span = hi - lo + 1
    return (v - lo) % span + lo


_IR_NODES = (ir.Unary, ir.Binary, ir.Math, ir.Convert, ir.Reduce, ir.Dot, ir.Transpose, ir.Slice,
             ir.Element, ir.SubIndex, ir.SubRange)
# Per IR node class, the names of its fields that can hold an expression (dataclasses.fields()
# is slow on this path: `fin` runs on every statement and nested subscript). The others hold a
# type, a span, a Sym, an operator or function name, a flag or an int, never an open literal.
_NOT_EXPR_FIELDS = {"type", "span", "op", "fn", "sym", "base", "flat", "trans_b", "axis", "length", "full"}
_NODE_FIELDS = {cls: tuple(f.name for f in fields(cls) if f.name not in _NOT_EXPR_FIELDS) for cls in _IR_NODES}


def _finalize(e, fit):
    """`e` with every open literal (`_Lit`) replaced by a plain `Const` of its own type."""
    cls = type(e)
    if cls is _Lit:
        return fit(e, e.type.dtype, e.span)
    if cls is tuple:
        new = tuple([_finalize(x, fit) for x in e])
        for a, b in zip(new, e):
            if a is not b:
                return new
        return e
    names = _NODE_FIELDS.get(cls)
    if names is None:
        if isinstance(e, _IR_NODES + (tuple,)):   # a subclass: the general path
            return _finalize_slow(e, fit)
        return e
    changes = None
    for name in names:
        v = getattr(e, name)
        t = type(v)
        if t is tuple or t is _Lit or t in _NODE_FIELDS:
            nv = _finalize(v, fit)
            if nv is not v:
                if changes is None:
                    changes = {}
                changes[name] = nv
        elif t is not ir.Const and isinstance(v, (tuple, ir.Const) + _IR_NODES):
            nv = _finalize_slow(v, fit)
            if nv is not v:
                if changes is None:
                    changes = {}
                changes[name] = nv
    return replace(e, **changes) if changes else e


def _finalize_slow(e, fit):
    """`_finalize` for instances of subclasses of the IR node classes (none today)."""
    if isinstance(e, _Lit):
        return fit(e, e.type.dtype, e.span)
    if isinstance(e, tuple):
        new = tuple(_finalize(x, fit) for x in e)
        return new if any(a is not b for a, b in zip(new, e)) else e
    if isinstance(e, _IR_NODES):
        changes = {}
        for f in fields(e):
            v = getattr(e, f.name)
            if isinstance(v, (tuple, ir.Const) + _IR_NODES):
                nv = _finalize(v, fit)
                if nv is not v:
                    changes[f.name] = nv
        return replace(e, **changes) if changes else e
    return e
