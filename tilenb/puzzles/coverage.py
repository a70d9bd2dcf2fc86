"""Which constructs of the language a set of tile programs uses: the built-ins of spec section 10
(from `tilenb.sema.builtins`, the one list the checker types), the statements of section 9, the
attributes of section 15.1, functions (section 14) and the `ctx` fields of section 3.

    used = constructs_in(source_text)          # a set of construct names, e.g. {"exp", "for", "@grid"}
    missing = CONSTRUCTS - used

Construct names: each built-in by its name ("rowsum", "f16", "atomic_add", "cluster_sum", ...);
statements as "let", "var" (with a value), "var uninitialized", "var typed", "assign",
"assign window" (a tile or tensor slice), "assign element", "compound assign" (any `op=`),
"for", "for unroll", "while", "if", "else", "else if", "break", "continue", "return";
"fn expression" and "fn statement" (a function of each form), "call statement" (a statement
function called); attributes as "@launch", "@autotune", ...; `ctx` fields as "ctx.block.x", ....

Guarantees: `constructs_in` only parses (no checking), so it reads a cell that calls functions
defined in another cell; it raises `tilenb.TileSyntaxError` for text that does not parse.
`notebook_programs` pulls the tile programs out of a notebook's code cells: the body of every
`%%tilekernel` cell and every triple-quoted Python string that parses as a program with a kernel
or function.
"""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Iterable, Iterator, List, Set

from ..lang import ast as A
from ..lang.diagnostics import TileError
from ..lang.parser import parse
from ..sema import builtins as B
from ..types import CONVERSIONS

BUILTINS = tuple(B.UNARY_MATH) + tuple(B.BINARY_MATH) + tuple(B.REDUCTIONS) + tuple(B.ATOMICS) \
    + tuple(B.CLUSTER_REDUCTIONS) + tuple(B.OTHER) + tuple(CONVERSIONS)
STATEMENTS = ("let", "var", "var uninitialized", "var typed", "assign", "assign window", "assign element",
              "compound assign", "for", "for unroll", "while", "if", "else", "else if", "break", "continue",
              "return", "fn expression", "fn statement", "call statement")
ATTRIBUTES = tuple("@" + a for a in B.ATTRIBUTES)
CTX = tuple("ctx." + f for f in B.CTX_FIELDS)
CONSTRUCTS = frozenset(BUILTINS + STATEMENTS + ATTRIBUTES + CTX)


def _nodes(x) -> Iterator[object]:
    """Every syntax-tree node under x (dataclass instances and tuples of them), pre-order."""
    stack = [x]
    while stack:
        n = stack.pop()
        if isinstance(n, (tuple, list)):
            stack.extend(reversed(n))
        elif dataclasses.is_dataclass(n) and not isinstance(n, type):
            yield n
            stack.extend(reversed([getattr(n, f.name) for f in dataclasses.fields(n)]))


def _ctx_field(node) -> str:
    """'block.x' for the Field node of ctx.block.x, '' when the node is not a ctx field."""
    parts = []
    while isinstance(node, A.Field):
        parts.append(node.name)
        node = node.base
    if isinstance(node, A.Name) and node.id == "ctx" and parts:
        return ".".join(reversed(parts))
    return ""


def constructs_of(program: A.Program) -> Set[str]:
    """The constructs a parsed program uses (see the module docstring)."""
    used: Set[str] = set()
    statement_fns = {f.name for f in program.functions if not f.is_expr}
    for f in program.functions:
        used.add("fn expression" if f.is_expr else "fn statement")
    for k in program.kernels:
        for a in k.attributes:
            used.add("@" + a.name)
    for n in _nodes((program.kernels, program.functions)):
        if isinstance(n, A.Call):
            used.add(n.func)
        elif isinstance(n, A.Field):
            f = _ctx_field(n)
            if f:
                used.add("ctx." + f)
        elif isinstance(n, A.Let):
            used.add("let")
        elif isinstance(n, A.VarDecl):
            used.add("var" if n.value is not None else "var uninitialized")
            if n.type is not None:
                used.add("var typed")
        elif isinstance(n, A.Assign):
            if n.op is not None:
                used.add("compound assign")
            elif isinstance(n.target, A.Index):
                ranged = any(isinstance(s, (A.RangeSub, A.FullSub)) for s in n.target.subs)
                used.add("assign window" if ranged else "assign element")
            else:
                used.add("assign")
        elif isinstance(n, A.For):
            used.add("for unroll" if n.unroll is not None else "for")
        elif isinstance(n, A.While):
            used.add("while")
        elif isinstance(n, A.If):
            used.add("if")
            if len(n.orelse) == 1 and isinstance(n.orelse[0], A.If):
                used.add("else if")
            elif n.orelse:
                used.add("else")
        elif isinstance(n, A.Break):
            used.add("break")
        elif isinstance(n, A.Continue):
            used.add("continue")
        elif isinstance(n, A.Return):
            used.add("return")
        elif isinstance(n, A.ExprStmt) and isinstance(n.expr, A.Call) and n.expr.func in statement_fns:
            used.add("call statement")
    return used & CONSTRUCTS


def constructs_in(source: str, filename: str = "<puzzle>") -> Set[str]:
    """The constructs a program text uses. Raises TileSyntaxError if it does not parse."""
    return constructs_of(parse(source, filename))


_TRIPLE = re.compile(r'(?:r|R)?("""|\'\'\')(.*?)\1', re.S)
_PROGRAM = re.compile(r"\b(?:kernel|fn)\s+[A-Za-z_]\w*\s*\(")


def notebook_programs(path) -> List[str]:
    """The tile programs in a notebook's code cells (see the module docstring), in cell order."""
    nb = json.loads(Path(path).read_text(encoding="utf-8"))
    out = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        src = cell.get("source", "")
        src = "".join(src) if isinstance(src, list) else src
        if src.lstrip().startswith("%%tilekernel"):
            out.append(src.lstrip().split("\n", 1)[1] if "\n" in src.lstrip() else "")
            continue
        for m in _TRIPLE.finditer(src):
            if _PROGRAM.search(m.group(2)):
                out.append(m.group(2))
    return out


def executed_constructs(programs: Iterable[str]) -> Set[str]:
    """The union of the constructs of programs that parse (the others are skipped: a cell that
    shows a syntax error on purpose teaches no construct)."""
    used: Set[str] = set()
    for text in programs:
        try:
            used |= constructs_in(text)
        except TileError:
            continue
    return used
