"""The checker's entry: a parsed program -> its checked kernels, or every static error found.

Guarantees: `check_program` either returns a `CheckedProgram` whose every kernel variant is a
consistent `tilenb.ir.KernelIR`, or raises the first `TileError` by position carrying every
error found (`.diagnostics`, sorted by position). Program-level rules live here: names of
functions and kernels (no built-in names, none defined twice), a statement function's jumps and
recursion (`functions`); each kernel is checked by `variants.check_kernel`.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ..lang import ast as A
from ..lang.diagnostics import Source, TileError, TileNameError, TileRuleError, TileSyntaxError, combine
from . import builtins as B
from .functions import _check_jumps, _check_recursion, _children
from .results import CheckedKernel, CheckedProgram
from .variants import _check_kernel


def check_program(prog: A.Program, src: Source) -> CheckedProgram:
    """Check every function and kernel of `prog`. Raises the first TileError by position,
    carrying all of them in `.diagnostics`. A statement nested too deeply for the checker's
    recursion is a TileSyntaxError at that statement; a chain of functions calling one another
    too long to inline is a TileRuleError at the kernel's call that starts it, naming the chain."""
    try:
        return _check_program(prog, src)
    except RecursionError:
        at = _too_deep_at(prog)
        if at is None:        # the text is shallow: inlining a long chain of function calls made it deep
            chain, span = _deepest_chain(prog)
            if chain:
                shown = " -> ".join(chain[:4]) + (f" -> ... -> {chain[-1]}" if len(chain) > 4 else "")
                raise src.error(TileRuleError, f"this call inlines {len(chain)} functions inside one another "
                                f"({shown}), too deep to check; functions are inlined at every call, so "
                                f"shorten the chain", span.line, span.column) from None
            at = (1, 1)
        raise src.error(TileSyntaxError, "this statement nests too deeply (hundreds of levels of operators, "
                        "calls or blocks); split it up, binding parts of a long expression with let", *at) from None


_STATEMENTS = (A.Let, A.VarDecl, A.Assign, A.For, A.While, A.If, A.ExprStmt, A.Attribute, A.Function)


def _too_deep_at(prog: A.Program, depth: int = 150) -> Optional[Tuple[int, int]]:
    """(line, column) of the statement of `prog` in which the syntax tree first grows `depth`
    levels deep, walked without recursion; None if none does (deep only through inlining)."""
    stack = [(prog, 0, None)]
    while stack:
        node, d, stmt = stack.pop()
        if isinstance(node, _STATEMENTS):
            stmt = node.span
        if d >= depth and stmt is not None:
            return stmt.line, stmt.column
        kids = node if isinstance(node, tuple) else _children(node) if not isinstance(node, str) else ()
        stack.extend((c, d + 1, stmt) for c in reversed(kids))
    return None


def _shallow_calls(node) -> List[A.Call]:
    """Every call in an AST subtree, walked without recursion."""
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        if isinstance(n, A.Call):
            out.append(n)
        if not isinstance(n, str):
            stack.extend(n if isinstance(n, tuple) else _children(n))
    return out


def _deepest_chain(prog: A.Program) -> Tuple[List[str], Optional[A.Span]]:
    """The longest chain of function calls one call in a kernel starts (names, outermost first)
    and that call's span; without recursion (a cycle, reported elsewhere, is cut)."""
    fns = {f.name: f for f in prog.functions}
    callees = {n: [c.func for c in _shallow_calls(f.body) if c.func in fns] for n, f in fns.items()}
    longest: Dict[str, List[str]] = {}
    for root in fns:                       # depth-first, post-order, with an explicit stack
        if root in longest:
            continue
        stack, on_path = [(root, iter(callees[root]))], {root}
        while stack:
            name, it = stack[-1]
            nxt = next((c for c in it if c not in longest and c not in on_path), None)
            if nxt is not None:
                stack.append((nxt, iter(callees[nxt])))
                on_path.add(nxt)
                continue
            best = max((longest[c] for c in callees[name] if c in longest), key=len, default=[])
            longest[name] = [name] + best
            on_path.discard(name)
            stack.pop()
    best_chain, best_span = [], None
    for k in prog.kernels:
        for c in _shallow_calls(k.body):
            if c.func in longest and len(longest[c.func]) > len(best_chain):
                best_chain, best_span = longest[c.func], c.span
    return best_chain, best_span


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
