"""No import circles through the front end: no module of tilenb.sema or tilenb.lang lies on a
cycle of imports among tilenb's modules (module-level and deferred imports inside functions
both count; the import of a package's __init__ that importing a submodule implies does not)."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "tilenb"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph():
    files = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        out = set()
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[:len(base) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                # `from pkg import mod` imports the submodule; `from mod import name`, the module
                targets = [mod + "." + a.name if mod + "." + a.name in files else mod for a in node.names]
            for t in targets:
                if t in files and t != name:
                    out.add(t)
        graph[name] = out
    return graph


def _cycles(graph):
    """Strongly connected components of more than one module (Tarjan, without recursion)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_no_front_end_module_is_on_an_import_cycle():
    bad = [c for c in _cycles(_graph()) if any(m.startswith(("tilenb.sema", "tilenb.lang")) for m in c)]
    assert bad == []


def test_the_walk_finds_a_cycle_where_there_is_one():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
