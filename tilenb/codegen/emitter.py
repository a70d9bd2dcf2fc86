"""The C text of the CUDA generator: symbolic helpers and the emitter that writes the lines.

Guarantees:
- The helpers (`c_add`, `c_sub`, `c_max`, `c_min`, `c_max_ll`, `c_min_ll`, `c_clamp`, `swz_c`,
  `c_cond`) take ints known while generating or C text and return an int when every operand is
  one (folded here), else C text; they never read the kernel.
- `Emitter` holds one kernel body's lines: `emit` writes a line at the current indentation (two
  spaces a level) and, at a line that closes a block, forgets the values `memo` recorded inside
  it (they are out of scope in C); `new(prefix)` gives a fresh C name; `cname(sym)` the one C
  name of a symbol; `src_comment(s)` the `// line N: <source>` comment above each statement;
  `fail` raises `UnsupportedError` naming the source line (and column) at fault.
- User text reaches the C++ only through `c_comment_text` (inside a comment) and
  `c_string_literal` (a string literal, such as a `#line` file name): whatever the text holds
  (a backslash at its end, `*/`, `??/` and the other trigraphs, control characters, a carriage
  return, quotes), the comment ends at its own line and the literal is one token that denotes
  exactly the text's UTF-8 bytes, so no generated line is joined to it or lost.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional

from .. import ir
from ..lang.diagnostics import UnsupportedError


# ---- small symbolic helpers: ints stay ints, anything else is C text ------------------------
def is_int(x) -> bool:
    """Whether x is a Python int known while generating (not C text, not a bool)."""
    return isinstance(x, int) and not isinstance(x, bool)


def c_add(a, b):
    if is_int(a) and is_int(b):
        return a + b
    if a == 0:
        return b
    if b == 0:
        return a
    return f"({a} + {b})"


def c_sub(a, b):
    if is_int(a) and is_int(b):
        return a - b
    if b == 0:
        return a
    return f"({a} - {b})"


def c_max(a, b):
    if is_int(a) and is_int(b):
        return max(a, b)
    return f"max({a}, {b})"


def c_min(a, b):
    if is_int(a) and is_int(b):
        return min(a, b)
    return f"min({a}, {b})"


def c_max_ll(a, b):
    """max of two index values of any integer C type (as long long)."""
    if is_int(a) and is_int(b):
        return max(a, b)
    return f"tnb_max((long long)({a}), (long long)({b}))"


def c_min_ll(a, b):
    if is_int(a) and is_int(b):
        return min(a, b)
    return f"tnb_min((long long)({a}), (long long)({b}))"


def c_clamp(v, lo, hi):
    if is_int(v) and is_int(lo) and is_int(hi):
        return max(lo, min(hi, v))
    return f"(int)tnb_clamp({v}, {lo}, {hi})"


def swz_c(sw, idx):
    """The element offset `idx` of a shared tile (int or C text) relabelled by the tile's XOR
    swizzle `sw` (`tilenb.analysis.layout.Swizzle`; None: row-major, unchanged)."""
    if sw is None:
        return idx
    if is_int(idx):
        return int(sw(idx))
    return sw.c_expr(idx)


def c_cond(x) -> str:
    """A condition as C text: in_region / chunk_inside give True or False where the answer is
    known while generating, else a C expression."""
    return "true" if x is True else "false" if x is False else x


# ---- user text inside the C++ -----------------------------------------------------------------
_TRIGRAPH = re.compile(r"\?\?(?=[=/'()!<>-])")
_LINE_BREAKS = "\u2028\u2029"


def c_comment_text(text: str) -> str:
    """`text` (one line of the user's source) made safe to stand after `//` or inside `/* */`:
    control characters (a carriage return, form feed, NUL, ...), Unicode line separators and
    lone surrogates become `<U+XXXX>`; `*/` becomes `* /`; the `??` of a trigraph becomes `?\\?`; trailing
    blanks go; and a backslash left at the end (which would splice the next generated line
    into the comment) is followed by a note saying so. Everything else is kept as written."""
    out = []
    for ch in text:
        o = ord(ch)
        out.append(f"<U+{o:04X}>" if (o < 0x20 and ch != "\t") or 0x7f <= o <= 0x9f
                   or 0xD800 <= o <= 0xDFFF or ch in _LINE_BREAKS else ch)
    s = _TRIGRAPH.sub(lambda m: "?\\?", "".join(out).replace("*/", "* /")).rstrip()
    if s.endswith("\\"):
        s += " (the line ends in a backslash)"
    return s


def c_string_literal(text: str) -> str:
    """A C++ string literal, quotes included, holding `text`'s UTF-8 bytes: printable ASCII as
    itself except `\\`, `\"` and `?` (escaped, so no trigraph forms), every other byte as a
    three-digit octal escape (an octal escape stops after three digits, so a following digit
    stays a digit)."""
    out = []
    for b in text.encode("utf-8"):
        c = chr(b)
        if c in '\\"?':
            out.append("\\" + c)
        elif 0x20 <= b < 0x7f:
            out.append(c)
        else:
            out.append(f"\\{b:03o}")
    return '"' + "".join(out) + '"'


# ---- the emitter -------------------------------------------------------------------------------
class Emitter:
    """The lines of one kernel body, their indentation, fresh names and source comments."""

    def __init__(self, source_text: Optional[str], line_offset: int):
        # lines as the grammar counts them (only "\n" ends a line; a carriage return or form
        # feed inside a comment does not)
        self.lines_src = source_text.split("\n") if source_text else None
        self.line_offset = line_offset
        self.out: List[str] = []
        self.ind = 1
        self.tmp = 0
        self.names: Dict[int, str] = {}
        self.memo: Dict[tuple, tuple] = {}     # (structure, coordinates) -> (C variable, block depth)
        self.cur_stmt = None                   # the statement being written (for `fail`)

    def emit(self, line: str):
        if line.lstrip().startswith("}") and self.memo:
            # a block closed: values computed inside it are out of scope
            self.memo = {k: v for k, v in self.memo.items() if v[1] <= self.ind}
        self.out.append("  " * self.ind + line)

    def new(self, prefix="t") -> str:
        self.tmp += 1
        return f"{prefix}{self.tmp}"

    def close(self):
        self.ind -= 1
        self.emit("}")

    def fail(self, msg, node=None):
        span = getattr(node, "span", None) or getattr(self.cur_stmt, "span", None)
        line = span.line + self.line_offset if span is not None else None
        raise UnsupportedError(f"the CUDA backend cannot compile this yet: {msg}", line, span.column if span else None)

    def cname(self, sym: ir.Sym) -> str:
        n = self.names.get(id(sym))
        if n is None:
            n = f"{sym.name}_{sym.uid}"
            self.names[id(sym)] = n
        return n

    def src_comment(self, s):
        ln = s.span.line
        text = ""
        if self.lines_src and 1 <= ln <= len(self.lines_src):
            text = self.lines_src[ln - 1].strip()
        self.emit(f"// line {ln + self.line_offset}: {c_comment_text(text)}".rstrip())
