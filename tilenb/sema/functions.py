"""Rules about functions (spec section 14) that read the syntax tree alone.

Guarantees: `_check_recursion` reports each cycle of calls once and names every function on a
cycle; `_check_jumps` reports `return`, and `break`/`continue` outside the function's own loops,
in statement functions (their bodies are spliced into the caller); `_written_params` names the
parameters a function assigns or indexes (those must be passed names). `_children` and
`_calls_in` walk the syntax tree.
"""
from __future__ import annotations

from ..lang import ast as A
from ..lang.diagnostics import TileRuleError


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
