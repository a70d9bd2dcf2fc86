"""The code generator's layout (issue 17): its modules import one another without a circle; and
in the whole tilenb package no module is over 1,000 lines and no function over 120 unless its
docstring says why it reads better whole. Read from the source files (nothing is imported), so a circle that Python would
tolerate at run time (an import inside a function) counts too."""
from __future__ import annotations

import ast
from pathlib import Path

import tilenb.codegen

PKG = Path(tilenb.codegen.__file__).resolve().parent
NAME = "tilenb.codegen"
ROOT = PKG.parent            # the tilenb package: the size rules hold for all of it


def _modules(pkg: Path = PKG, name: str = NAME):
    """module name -> its file, for every module of the package (the code generator unless told)."""
    out = {}
    for f in sorted(pkg.rglob("*.py")):
        parts = list(f.relative_to(pkg).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join([name, *parts])] = f
    return out


def _all_modules():
    return _modules(ROOT, "tilenb")


def _imports(mod: str, path: Path, modules) -> set:
    """The package's modules that `mod` imports (anywhere in its file)."""
    is_pkg = path.name == "__init__.py"
    here = mod if is_pkg else mod.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for a in node.names:      # `from . import exprs` names a module; `from .values import At` a name
                found.add(f"{target}.{a.name}" if f"{target}.{a.name}" in modules else target)
    return {m for m in found if m in modules and m != mod}


def _graph():
    modules = _modules()
    return {m: _imports(m, f, modules) for m, f in modules.items()}


def _cycle(graph):
    """One import circle as a list of modules, or None."""
    state = {}
    stack = []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == "open":
                return stack[stack.index(n):] + [n]
            if n not in state:
                c = visit(n)
                if c:
                    return c
        stack.pop()
        state[m] = "done"
        return None

    for m in sorted(graph):
        if m not in state:
            c = visit(m)
            if c:
                return c
    return None


def test_the_walk_sees_the_package_and_its_imports():
    g = _graph()
    assert f"{NAME}.kernel" in g and f"{NAME}.generic.exprs" in g
    assert f"{NAME}.generic.exprs" in g[f"{NAME}.generic.statements"]     # `from . import exprs`
    assert f"{NAME}.emitter" in g[f"{NAME}.values"]                       # `from .emitter import ...`


def test_the_cycle_finder_finds_a_circle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_circle_in_the_code_generator():
    c = _cycle(_graph())
    assert c is None, "import circle: " + " -> ".join(c)


def test_the_size_rules_walk_the_whole_package():
    mods = _all_modules()
    assert "tilenb.analysis.lowering" in mods and "tilenb.codegen.kernel" in mods and "tilenb.api" in mods


def test_no_module_over_1000_lines():
    long = {m: n for m, f in _all_modules().items() if (n := len(f.read_text().splitlines())) > 1000}
    assert not long, long


def test_no_function_over_120_lines_unless_its_docstring_says_why():
    long = []
    for m, f in _all_modules().items():
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > 120 and "reads better whole" not in (ast.get_docstring(node) or ""):
                    long.append(f"{m}.{node.name}: {n} lines")
    assert not long, long
