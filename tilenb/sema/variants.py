"""A kernel's attributes and @autotune variants: which variants exist, which share a walk,
and how their errors are reported.

Guarantees: `_check_kernel` checks the kernel's attributes once, then every @autotune
combination (at most MAX_VARIANTS), sharing one walk of the body between combinations that
differ only in names the parameters, body and functions never mention (`_body_names`). A
variant whose tiles do not fit in shared memory is skipped while another fits; errors that
depend on the variant name it. The part of a variant's budget check that needs its whole
analysis is left to when the variant is asked for (`results.CheckedKernel`), except that
variants are settled in order here until one fits.
"""
from __future__ import annotations

import itertools
from typing import Dict, List, Optional, Tuple

from .. import ir
from ..lang import ast as A
from ..lang.diagnostics import TileBudgetError, TileError, TileNameError, TileRuleError
from . import builtins as B
from .kernel import _KernelChecker, _Shared
from .results import CheckedKernel, _label
from .values import _const_int

MAX_VARIANTS = 256


def _check_attributes(k: A.Kernel, src, errors: List[TileError]):
    """The kernel's attributes on their own (names, argument forms, the @autotune space):
    (tune_space, whether the whole space was read, the attributes by name). Errors are
    appended to `errors`; an attribute given twice or malformed is left out."""
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
                repeated = False
                for v in arg.values:
                    c = _const_int(v, src, errors, f"an @autotune value of {arg.name}")
                    if c is not None and c in vals:
                        # a repeated value would be one variant listed twice (a mistyped list)
                        errors.append(src.error(TileRuleError, f"@autotune name '{arg.name}' lists the value {c} twice; "
                                                f"give each value once", v.span.line, v.span.column))
                        repeated = True
                    elif c is not None:
                        vals.append(c)
                if len(vals) == len(arg.values) and not repeated:
                    tune_space.append((arg.name, tuple(vals)))
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
    return tune_space, tune_ok, seen_attrs


def _check_kernel(k: A.Kernel, fns, recursive, src) -> Tuple[Optional[CheckedKernel], List[TileError]]:
    """A kernel's attributes, then each of its @autotune variants (see the module docstring)."""
    errors: List[TileError] = []
    tune_space, tune_ok, seen_attrs = _check_attributes(k, src, errors)
    if not tune_ok:
        return None, errors  # without the whole @autotune space there is no variant to check
    combos = list(itertools.product(*[vals for _, vals in tune_space]))
    if len(combos) > MAX_VARIANTS:
        at = seen_attrs["autotune"]
        return None, errors + [src.error(TileRuleError, f"@autotune makes {len(combos)} variants; at most {MAX_VARIANTS} are allowed", at.span.line, at.span.column)]
    variants: Dict[tuple, ir.KernelIR] = {}
    skipped: Dict[tuple, str] = {}
    pending: Dict[tuple, object] = {}   # key -> the budget check left for when the variant is asked for
    budget_errors: Dict[tuple, list] = {}   # key -> the budget errors of a variant skipped here
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
            checker = _KernelChecker(k, fns, recursive, src, tune, seen_attrs, grid_key)
            res = checker.run_shared(shared[group])
        if res is None:
            checker = _KernelChecker(k, fns, recursive, src, tune, seen_attrs, grid_key)
            res = checker.run()
            if checker.shared is not None and group not in shared:
                shared[group] = checker.shared
        kir, errs = res
        if errs and all(isinstance(e, TileBudgetError) for e in errs):
            # a variant that needs too much shared memory is skipped while another one fits
            skipped[key] = errs[0].message
            budget_errors[key] = errs
            continue
        if errs:
            failed.append((tune, errs))
            if len(failed) > 1 and _error_keys(errs) != _error_keys(failed[0][1]):
                break  # the errors depend on the variant: the first failing one is reported
            continue
        variants[key] = kir
        if checker.pending_budget is not None:
            pending[key] = checker.pending_budget
    if failed:
        tune, errs = failed[0]
        same_everywhere = len(failed) == len(combos) and all(_error_keys(e) == _error_keys(errs) for _, e in failed)
        if len(combos) > 1 and not same_everywhere:
            for e in errs:
                e.message += f" (in the variant {_label(tune.items())})"
        return None, errors + errs
    order = [tuple(sorted(zip(names, combo))) for combo in combos]
    ck = CheckedKernel(k, tuple(tune_space), variants, skipped, pending, order)
    # the budget checks left pending run in order until one variant fits: none fitting is an
    # error now, as it would be had every check run here
    if ck.first_variant() is None and (budget_errors or ck.budget_errors):
        key = next(x for x in order if x in budget_errors or x in ck.budget_errors)
        errs = budget_errors.get(key) or [ck.budget_errors[key]]
        if len(combos) > 1:
            for e in errs:
                e.message += f" (in the variant {_label((n, dict(key)[n]) for n in names)}; no @autotune variant fits)"
        return None, errors + errs
    if errors:
        return None, errors
    return ck, []


def _error_keys(errs):
    return sorted((e.line or 0, e.column or 0, e.message) for e in errs)


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
