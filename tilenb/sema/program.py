"""The checker's entry: a parsed program -> its checked kernels, or every static error found.

Guarantees: `check_program` either returns a `CheckedProgram` whose every kernel variant is a
consistent `tilenb.ir.KernelIR`, or raises the first `TileError` by position carrying every
error found (`.diagnostics`, sorted by position). Program-level rules live here: names of
functions and kernels (no built-in names, none defined twice), a statement function's jumps and
recursion (`functions`); each kernel is checked by `variants.check_kernel`.
"""
from __future__ import annotations

from typing import Dict, List, Tuple

from ..lang import ast as A
from ..lang.diagnostics import Source, TileError, TileNameError, TileSyntaxError, combine
from . import builtins as B
from .functions import _check_jumps, _check_recursion, _children
from .results import CheckedKernel, CheckedProgram
from .variants import _check_kernel


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
