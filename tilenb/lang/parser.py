"""Source text -> `tilenb.lang.ast.Program`, using the grammar of record (grammar.lark).

Guarantees: `parse` returns a Program whose every node has a span, or raises a
`TileSyntaxError` at the offending token's line and column. No other exception escapes for
any input string.

How: Lark's LALR parser over the grammar of record builds the syntax tree directly, one
callback per reduction (`_Builder`, given to Lark as its `transformer=`), with spans computed
from the tokens each rule consumed (the spans Lark's propagate_positions gives: a node spans the
tokens of its own derivation, its operands' enclosing parentheses included). `_Builder` is the
one syntax-tree builder. A program nested deeper than `_DEEP` levels (long operator chains) is
parsed again into Lark's parse tree, which `_ToAst` hands to the same callbacks through Lark's
recursive `Transformer`, so that nesting too deep for Python's recursion is reported at the
statement where it lies. Only Lark's public API is used (`Lark`, `Transformer`, `Token`, the
`lark.exceptions` classes, a post-lexer); a text Lark refuses is reported from Lark's exception.
Lark's analysis of the grammar (~70 ms, the first parse of a process) is kept on disk through
Lark's `cache=` option (`_build`); a missing, stale, corrupt or unwritable cache file only costs
that time again.
"""
from __future__ import annotations

import functools
import hashlib
import os
import sys
import threading
from pathlib import Path
from typing import Optional, Tuple

import lark
from lark import Token, Transformer

from . import ast as A
from .diagnostics import Source, TileSyntaxError

_GRAMMAR = Path(__file__).with_name("grammar.lark")


# Words the grammar uses to begin or join constructs. They are reserved: Lark's contextual
# lexer would otherwise read `let else = 1` or a stray `else` at the start of a line as a name.
# `tile`, `tensor`, `range` and `unroll` only mean something in one place (a type, a for
# header) and stay usable as names elsewhere.
KEYWORDS = ("kernel", "fn", "let", "var", "for", "in", "while", "if", "else", "break", "continue",
            "return")


class _Newlines:
    """Drop newlines inside ( ) and [ ], and between top-level items, where they end nothing;
    turn a reserved word lexed as a NAME into its keyword token."""

    always_accept = ("_NL",)

    def process(self, stream):
        parens = 0
        braces = 0
        for tok in stream:
            t = tok.type
            if t == "NAME" and tok.value in KEYWORDS:
                tok = Token.new_borrow_pos(tok.value.upper(), tok.value, tok)
                t = tok.type
            if t == "_NL":
                if parens == 0 and braces > 0:
                    yield tok
                continue
            if t in ("LPAR", "LSQB"):
                parens += 1
            elif t in ("RPAR", "RSQB"):
                parens = max(0, parens - 1)
            elif t == "LBRACE":
                braces += 1
            elif t == "RBRACE":
                braces = max(0, braces - 1)
            yield tok


def _cache_file(kind: str, grammar: str) -> Optional[Path]:
    """Where Lark keeps its analysis of the grammar (LALR tables, lexers) for the parser `kind`:
    under tilenb's cache directory ($TILENB_CACHE_DIR, else ~/.cache/tilenb, as
    `tilenb.codegen.nvrtc.cache_dir`), named after the grammar and Lark's and Python's versions;
    None where there is no home directory."""
    tag = hashlib.sha256(repr((kind, grammar, lark.__version__, sys.version)).encode()).hexdigest()[:16]
    try:
        d = os.environ.get("TILENB_CACHE_DIR")
        root = Path(d) if d else Path.home() / ".cache" / "tilenb"
    except (RuntimeError, OSError, KeyError):   # no home directory
        return None
    return root / "parser" / f"lark_{kind}_{tag}.cache"


def _build(kind: str, **options) -> lark.Lark:
    """`lark.Lark(grammar of record, parser="lalr", postlex=_Newlines(), **options)` through
    Lark's grammar cache (`cache=`): once a build has saved its analysis, the first parse of a
    process loads it in milliseconds instead of analysing the grammar (~70 ms). Lark checks the
    file's first line against a hash of the grammar, options and versions and builds afresh
    (saving again) when it differs or the file cannot be loaded; it ignores a failure to save.
    Any other failure builds without the cache."""
    grammar = _GRAMMAR.read_text()
    options = dict(parser="lalr", postlex=_Newlines(), **options)
    path = _cache_file(kind, grammar)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError:   # unwritable: Lark's save fails quietly
            pass
        try:
            return lark.Lark(grammar, cache=str(path), **options)
        except Exception:  # the cache is only a saving
            pass
    return lark.Lark(grammar, **options)


@functools.lru_cache(maxsize=1)
def _lark() -> lark.Lark:
    """The grammar of record as a parse-tree builder (positions on every node), keeping every
    token as `_fast()` does, so that each tree node holds the children its `_Builder` callback
    takes."""
    return _build("tree", propagate_positions=True, maybe_placeholders=False, keep_all_tokens=True)


@functools.lru_cache(maxsize=1)
def _fast() -> Tuple[lark.Lark, "_Builder"]:
    """The same grammar and LALR tables, reducing straight to AST nodes through `_Builder`
    (every token kept, so that spans can start and end at keywords and brackets)."""
    builder = _Builder()
    parser = _build("fast", propagate_positions=False, maybe_placeholders=False, keep_all_tokens=True,
                    transformer=builder)
    return parser, builder


_fast_lock = threading.Lock()   # _Builder keeps per-parse state
# Parse-tree depth past which `parse` takes the parse-tree path (see the module docstring). The
# suite's kernels are 13 levels deep; the tree path's recursion needs about 2 frames a level.
_DEEP = 100


def _span(tok: Token) -> A.Span:
    """The span of one token."""
    return A.Span(tok.line, tok.column, tok.end_line or tok.line, tok.end_column or tok.column)


class _ToAst(Transformer):
    """`_lark()`'s parse tree -> what `_fast()` builds during its parse: each tree node, its
    children transformed first (Lark's recursive walk), goes to the `_Builder` callback of its
    rule. A literal out of range is left in `builder.bad`, as during the LALR parse."""

    def __init__(self, builder: Optional["_Builder"] = None):
        super().__init__(visit_tokens=False)
        self.builder = builder if builder is not None else _Builder()

    def __default__(self, data, children, meta):
        return getattr(self.builder, data)(children)


class _Block:
    """A block while it is being parsed: its statements and the span from '{' to '}'."""
    __slots__ = ("stmts", "span")

    def __init__(self, stmts, span):
        self.stmts = stmts
        self.span = span


class _Builder:
    """Lark callbacks (one per rule, named after it) that build the AST during the LALR parse.

    Each receives every child of its reduction: tokens (keywords and brackets included) and the
    values of sub-rules, with the `_`-rules spliced in and no placeholders for what is absent.
    A node's span runs from the start of its first child to the end of its last, where a child
    expression written in parentheses extends over them (`paren`), as with propagate_positions.
    `depth` records each node's parse-tree depth; `bad` the first literal out of range (raised
    after the parse, so that a syntax error anywhere still comes first). Lark calls these
    during its LALR parse (`_fast()`); `_ToAst` calls them over a parse tree."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.paren = {}    # id(expr) -> (line, column, end_line, end_column) of its parentheses
        self.depth = {}    # id(value) -> parse-tree depth
        self.keep = []     # every value made: no id is reused while the tables hold it
        self.bad = None

    def _span(self, ch) -> A.Span:
        a, b = ch[0], ch[-1]
        if isinstance(a, Token):
            line, col = a.line, a.column
        else:
            p = self.paren.get(id(a))
            if p is None:
                sp = a.span
                line, col = sp.line, sp.column
            else:
                line, col = p[0], p[1]
        if isinstance(b, Token):
            eline, ecol = b.end_line, b.end_column
        else:
            p = self.paren.get(id(b))
            if p is None:
                sp = b.span
                eline, ecol = sp.end_line, sp.end_column
            else:
                eline, ecol = p[2], p[3]
        return A.Span(line, col, eline, ecol)

    def _done(self, value, ch):
        get = self.depth.get
        m = 0
        for c in ch:
            d = get(id(c))
            if d is not None and d > m:
                m = d
        self.depth[id(value)] = m + 1
        self.keep.append(value)
        return value

    def _int(self, tok):
        try:
            return _int(tok)
        except _BadLiteral as e:
            if self.bad is None:
                self.bad = e
            return 0

    # ---- top level
    def start(self, ch):
        kernels = tuple(i for i in ch if isinstance(i, A.Kernel))
        fns = tuple(i for i in ch if isinstance(i, A.Function))
        return self._done((kernels, fns), ch)

    def kernel_def(self, ch):
        attrs = tuple(c for c in ch if type(c) is A.Attribute)
        name = next(c for c in ch if isinstance(c, Token) and c.type == "NAME")
        params = tuple(c for c in ch if type(c) is A.Param)
        return self._done(A.Kernel(str(name), attrs, params, ch[-1].stmts, self._span(ch), _span(name)), ch)

    def attribute(self, ch):
        args = tuple(c for c in ch[2:] if not isinstance(c, Token))
        return self._done(A.Attribute(str(ch[1]), args, len(args) > 0, self._span(ch)), ch)

    def tune_arg(self, ch):
        vals = tuple(c for c in ch[1:] if not isinstance(c, Token))
        return self._done(A.TuneArg(str(ch[0]), vals, self._span(ch)), ch)

    def param(self, ch):
        return self._done(A.Param(str(ch[0]), ch[-1], self._span(ch)), ch)

    def _fn(self, ch, is_expr):
        names = [str(c) for c in ch if isinstance(c, Token) and c.type == "NAME"]
        body = ch[-1] if is_expr else ch[-1].stmts
        return self._done(A.Function(names[0], tuple(names[1:]), body, is_expr, self._span(ch)), ch)

    def expr_fn(self, ch):
        return self._fn(ch, True)

    def stmt_fn(self, ch):
        return self._fn(ch, False)

    # ---- types
    def tensor_type(self, ch):
        toks = [c for c in ch if isinstance(c, Token) and c.type in ("NAME", "INT")]
        dims = tuple(self._int(d) if d.type == "INT" else str(d) for d in toks[1:])
        spans = tuple(_span(d) for d in toks[1:])
        return self._done(A.TensorTypeExpr(str(toks[0]), dims, spans, self._span(ch)), ch)

    def tile_type(self, ch):
        dims = tuple(c for c in ch if not isinstance(c, Token))
        return self._done(A.TileTypeExpr(str(ch[2]), dims, self._span(ch)), ch)

    def scalar_type(self, ch):
        return self._done(A.ScalarTypeExpr(str(ch[0]), self._span(ch)), ch)

    # ---- statements
    def block(self, ch):
        return self._done(_Block(tuple(c for c in ch if not isinstance(c, Token)), self._span(ch)), ch)

    def let_stmt(self, ch):
        typ = ch[3] if len(ch) > 4 else None
        return self._done(A.Let(str(ch[1]), typ, ch[-1], self._span(ch)), ch)

    def var_stmt(self, ch):
        n = len(ch)
        has_type = n > 2 and isinstance(ch[2], Token) and ch[2].type == "COLON"
        has_value = isinstance(ch[-2], Token) and ch[-2].type == "EQUAL"
        return self._done(A.VarDecl(str(ch[1]), ch[3] if has_type else None, ch[-1] if has_value else None,
                                    self._span(ch)), ch)

    def assign(self, ch):
        return self._done(A.Assign(ch[0], None, ch[-1], self._span(ch)), ch)

    def aug_assign(self, ch):
        return self._done(A.Assign(ch[0], str(ch[1])[:-1], ch[2], self._span(ch)), ch)

    def unroll(self, ch):
        t = ch[2]
        return self._done(((self._int(t) if t.type == "INT" else str(t)), _span(t)), ch)

    def for_stmt(self, ch):
        unroll = ch[1] if type(ch[1]) is tuple else None
        name = next(c for c in ch if isinstance(c, Token) and c.type == "NAME")
        args = tuple(c for c in ch[:-1] if not isinstance(c, (Token, tuple)))
        n, nspan = unroll if unroll is not None else (None, None)
        return self._done(A.For(str(name), args, n, nspan, ch[-1].stmts, self._span(ch)), ch)

    def while_stmt(self, ch):
        return self._done(A.While(ch[1], ch[2].stmts, self._span(ch)), ch)

    def if_stmt(self, ch):
        if len(ch) > 3:
            o = ch[4]
            orelse = (o,) if isinstance(o, A.If) else o.stmts
        else:
            orelse = ()
        return self._done(A.If(ch[1], ch[2].stmts, orelse, self._span(ch)), ch)

    def break_stmt(self, ch):
        return self._done(A.Break(self._span(ch)), ch)

    def continue_stmt(self, ch):
        return self._done(A.Continue(self._span(ch)), ch)

    def return_stmt(self, ch):
        return self._done(A.Return(self._span(ch)), ch)

    def expr_stmt(self, ch):
        return self._done(A.ExprStmt(ch[0], self._span(ch)), ch)

    # ---- expressions
    def atom(self, ch):
        """`( expr )`: the expression itself, its parentheses recorded for its parent's span."""
        e = ch[1]
        a, b = ch[0], ch[-1]
        self.paren[id(e)] = (a.line, a.column, b.end_line, b.end_column)
        return e

    def binop(self, ch):
        return self._done(A.Binary(str(ch[1]), ch[0], ch[2], self._span(ch)), ch)

    def unop(self, ch):
        return self._done(A.Unary(str(ch[0]), ch[1], self._span(ch)), ch)

    def index(self, ch):
        subs = []
        for c in ch[1:]:
            if isinstance(c, Token):
                continue
            if isinstance(c, (A.RangeSub, A.FullSub)):
                subs.append(c)
            else:
                subs.append(A.IndexSub(c, c.span))
        return self._done(A.Index(ch[0], tuple(subs), self._span(ch)), ch)

    def range_sub(self, ch):
        return self._done(A.RangeSub(ch[0], ch[2], self._span(ch)), ch)

    def full_sub(self, ch):
        return self._done(A.FullSub(self._span(ch)), ch)

    def field(self, ch):
        return self._done(A.Field(ch[0], str(ch[2]), self._span(ch)), ch)

    def call(self, ch):
        args = tuple(c for c in ch[2:] if not isinstance(c, Token))
        return self._done(A.Call(str(ch[0]), args, self._span(ch), _span(ch[0])), ch)

    def name(self, ch):
        return self._done(A.Name(str(ch[0]), _span(ch[0])), ch)

    def int_lit(self, ch):
        return self._done(A.IntLit(self._int(ch[0]), _span(ch[0])), ch)

    def float_lit(self, ch):
        return self._done(A.FloatLit(float(ch[0]), _span(ch[0])), ch)


class _BadLiteral(Exception):
    def __init__(self, tok, why):
        super().__init__(why)
        self.tok = tok


def _int(tok) -> int:
    """An INT token's value: hexadecimal after 0x, else decimal (leading zeros allowed)."""
    text = str(tok)
    if len(text) > 40:  # far past 64 bits; also keeps int() clear of its digit limit
        raise _BadLiteral(tok, f"the integer literal {text[:20]}... is too long")
    return int(text[2:], 16) if text[:2] in ("0x", "0X") else int(text, 10)


# How an expected terminal reads in a message (the others are quoted as written).
_TOKEN_WORDS = {
    "_NL": "end of line", "$END": "end of input", "NAME": "a name", "INT": "an integer",
    "FLOAT": "a number", "AUGOP": "an assignment operator such as +=", "CMPOP": "a comparison",
    "ADDOP": "'+' or '-'", "MULOP": "'*', '/' or '%'", "UNOP": "'-', '!' or '~'",
    "SHIFTOP": "'<<' or '>>'", "RANGEOP": "':+'",
}
# Terminals that can start an expression: when all are expected, say "an expression".
_EXPR_START = {"NAME", "INT", "FLOAT", "LPAR", "UNOP"}
_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = {v: k for k, v in _OPEN.items()}


def _word(term: str) -> str:
    if term in _TOKEN_WORDS:
        return _TOKEN_WORDS[term]
    try:
        pattern = _fast()[0].get_terminal(term).pattern
    except KeyError:
        return term.lower()
    return f"'{pattern.value}'" if pattern.type == "str" else term.lower()


def _describe(tok) -> str:
    if tok is None or tok.type == "$END":
        return "end of input"
    if tok.type == "_NL":
        return "end of line"
    return f"'{tok}'"


def _expected(terms) -> str:
    terms = {t for t in terms if not t.startswith("__")}
    words = []
    if _EXPR_START <= terms:
        words.append("an expression")
        terms -= _EXPR_START
    if words or len(terms) > 1:
        terms.discard("_NL")  # a newline is acceptable in many states; it rarely helps to say so
    words += sorted(_word(t) for t in terms)
    if not words or len(words) > 5:
        return ""
    return "; expected " + (words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1])


def _bracket_problem(text: str, upto: int, token: str = "", line_offset: int = 0):
    """A bracket mismatch that explains a parse error at offset `upto`: a closer that matches
    nothing or the wrong opener, a brace while ( or [ is open, an opener never closed, or a
    ( or [ still open at the error when the error is on a later line or is a token that cannot
    appear inside them (`token`). Returns (message, offset) or None. Lines named in the message
    count `line_offset` in, as the error's own position does."""
    stack = []  # (char, offset)
    i, n = 0, len(text)

    def where(offset):
        line = text.count("\n", 0, offset) + 1 + line_offset
        return f"line {line}, column {offset - (text.rfind(chr(10), 0, offset) + 1) + 1}"

    def mismatch(c, i):
        """The problem a bracket `c` at offset i reveals, or None (pushing/popping as it goes)."""
        if c in _OPEN:
            if c == "{" and stack and stack[-1][0] in "([":
                o, at = stack[-1]
                return f"'{o}' is not closed: a '{{' comes first, at {where(i)}; add '{_OPEN[o]}'", at
            stack.append((c, i))
        elif c in _CLOSE:
            if not stack:
                return f"'{c}' closes nothing; remove it", i
            o, at = stack[-1]
            if o != _CLOSE[c]:
                if c == "}" and o in "([":
                    return f"'{o}' is not closed: a '}}' comes first, at {where(i)}; add '{_OPEN[o]}'", at
                return f"'{c}' does not match the '{o}' at {where(at)}; expected '{_OPEN[o]}'", i
            stack.pop()
        return None

    while i < n and i < upto:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        found = mismatch(c, i)
        if found:
            return found
        i += 1
    if upto >= n:
        if stack:
            o, at = stack[-1]
            return f"'{o}' is never closed; add '{_OPEN[o]}'", at
        return None
    found = mismatch(text[upto], upto)
    if found:
        return found
    if text[upto] in _OPEN and stack:
        stack.pop()
    if stack and stack[-1][0] in "([":
        o, at = stack[-1]
        called = at > 0 and (text[at - 1].isalnum() or text[at - 1] == "_")
        if o == "(" and called and token == "=" and text.count("\n", at, upto) == 0 and _closes_on_line(text, upto):
            # `f(a, s = 2)`: the bracket is closed; what is wrong is the keyword argument
            return ("'=' inside a call: calls take their arguments by position (no keyword arguments), "
                    "as in rows(16, 32, s); to compare, write '=='"), upto
        if text.count("\n", at, upto) > 0 or token in ("=", ";") or token.endswith("="):
            return f"'{o}' is not closed before the error at {where(upto)}; add '{_OPEN[o]}'", at
    return None


def _closes_on_line(text: str, start: int) -> bool:
    """Whether the '(' open at `start` (inside it) is closed before the end of its line."""
    depth = 1
    for c in text[start:text.find("\n", start) if "\n" in text[start:] else len(text)]:
        depth += c in "([{"
        depth -= c in ")]}"
        if depth == 0:
            return True
    return False


def parse(text: str, filename: str = "<cell>", line_offset: int = 0) -> A.Program:
    """Parse `text`; raise TileSyntaxError (with line and column) if it is not a program."""
    src = Source(text, filename, line_offset)

    def error_at(message, offset):
        line = text.count("\n", 0, offset) + 1
        column = offset - (text.rfind("\n", 0, offset) + 1) + 1
        return src.error(TileSyntaxError, message, line, column)

    def syntax(parse_with):
        """`parse_with(text)`, its failures turned into TileSyntaxErrors."""
        try:
            return parse_with(text)
        except lark.exceptions.UnexpectedToken as e:
            tok = e.token
            line, col = _token_pos(tok, text)
            at_end = tok is None or tok.type == "$END"
            offset = len(text) if at_end or getattr(tok, "start_pos", None) is None else tok.start_pos
            bracket = _bracket_problem(text, offset, "" if at_end else str(tok), line_offset)
            if bracket is not None:
                raise error_at(*bracket) from None
            if tok.type == "ELSE" and _after_close_brace(text, tok):
                raise src.error(TileSyntaxError, "'else' must follow the '}' of its 'if' on the same line",
                                line, col) from None
            expected = set(e.expected or ())
            if (not at_end and (tok.type == "NAME" or str(tok) in KEYWORDS) and "SEMICOLON" in expected
                    and _same_line_as_previous(text, tok)):
                hint = "; a statement ends at a newline or ';', so put one before this"
            elif tok.type == "CMPOP":
                hint = "; comparisons do not chain: write a < b && b < c, or add parentheses"
            else:
                hint = _expected(expected)
            raise src.error(TileSyntaxError, f"unexpected {_describe(tok)}{hint}", line, col) from None
        except lark.exceptions.UnexpectedCharacters as e:
            ch = text[e.pos_in_stream] if 0 <= e.pos_in_stream < len(text) else "?"
            raise src.error(TileSyntaxError, f"unexpected character {ch!r}{_character_hint(ch)}", e.line,
                            e.column) from None
        except lark.exceptions.UnexpectedEOF:
            bracket = _bracket_problem(text, len(text), line_offset=line_offset)
            if bracket is not None:
                raise error_at(*bracket) from None
            lines = text.split("\n")
            raise src.error(TileSyntaxError, "unexpected end of input", len(lines), len(lines[-1]) + 1) from None
        except lark.exceptions.LarkError as e:  # any other parser failure is still a syntax error
            raise src.error(TileSyntaxError, f"cannot parse: {e.__class__.__name__}", 1, 1) from None
        except RecursionError:
            raise src.error(TileSyntaxError, "the program nests too deeply to parse", 1, 1) from None

    parser, builder = _fast()
    with _fast_lock:
        builder.reset()
        try:
            result = syntax(parser.parse)
            depth, bad = builder.depth.get(id(result), 0), builder.bad
        finally:
            builder.reset()
    if depth <= _DEEP:
        if bad is not None:
            raise src.error(TileSyntaxError, str(bad), bad.tok.line, bad.tok.column) from None
        kernels, fns = result
        return A.Program(kernels, fns, text, filename)
    # Deeply nested: through the parse tree, whose recursive transformation reports (at the
    # statement) nesting too deep for Python's recursion limit.
    tree = syntax(_lark().parse)

    def too_deep():
        line, col = _too_deep_at(tree)
        return src.error(TileSyntaxError, "this statement nests too deeply (hundreds of levels of operators, "
                         "calls or blocks); split it up, binding parts of a long expression with let", line, col)
    to_ast = _ToAst()
    try:
        kernels, fns = to_ast.transform(tree)
    except RecursionError:
        raise too_deep() from None
    except lark.exceptions.VisitError as e:
        if isinstance(e.orig_exc, RecursionError):   # the limit hit inside one of our callbacks
            raise too_deep() from None
        raise
    bad = to_ast.builder.bad
    if bad is not None:
        raise src.error(TileSyntaxError, str(bad), bad.tok.line, bad.tok.column) from None
    return A.Program(kernels, fns, text, filename)


_STATEMENTS = {"let_stmt", "var_stmt", "assign", "aug_assign", "for_stmt", "while_stmt", "if_stmt",
               "expr_stmt", "kernel_def", "expr_fn", "stmt_fn", "attribute"}


def _too_deep_at(tree, depth: int = 150):
    """(line, column) of the statement in which the parse tree first grows `depth` levels deep:
    walked without recursion, for a tree too deep to transform recursively."""
    stack = [(tree, 0, None)]
    while stack:
        node, d, stmt = stack.pop()
        if not isinstance(node, lark.Tree):
            continue
        meta = node.meta
        if node.data in _STATEMENTS and not getattr(meta, "empty", True):
            stmt = (meta.line, meta.column)
        if d >= depth and stmt is not None:
            return stmt
        stack.extend((c, d + 1, stmt) for c in reversed(node.children))
    return 1, 1


def _same_line_as_previous(text, tok) -> bool:
    """Whether something other than blanks precedes `tok` on its line."""
    pos = getattr(tok, "start_pos", None)
    if pos is None:
        return False
    return text[text.rfind("\n", 0, pos) + 1:pos].strip() != ""


def _after_close_brace(text, tok) -> bool:
    """Whether the source before `tok` ends (past blanks, newlines and comments) with '}'."""
    pos = getattr(tok, "start_pos", None)
    if pos is None:
        return False
    for line in reversed(text[:pos].split("\n")):
        code = line.split("//", 1)[0].strip()
        if code:
            return code.endswith("}")
    return False


def _token_pos(tok, text):
    if tok is None or getattr(tok, "line", None) is None or tok.type == "$END":
        lines = text.split("\n")
        return len(lines), len(lines[-1]) + 1
    return tok.line, tok.column


# Characters that text pasted from documents, chats or other editors brings in, looking like
# (or hiding as) ASCII the language uses: the hint names the ASCII to write instead.
_LOOKALIKE = {"\u2212": "-", "\u2013": "-", "\u2014": "-", "\u00d7": "*", "\u2217": "*", "\u00f7": "/",
              "\u2264": "<=", "\u2265": ">=", "\u2260": "!=", "\uff0b": "+", "\uff0d": "-", "\uff1d": "=",
              "\uff08": "(", "\uff09": ")", "\uff1a": ":", "\uff0c": ",", "\uff1b": ";", "\uff3b": "[",
              "\uff3d": "]"}


def _character_hint(ch: str) -> str:
    """What an unexpected non-ASCII character is, by its Unicode name (invisible ones print as
    escapes), and the ASCII to write where it looks like one."""
    import unicodedata
    if ch.isascii():
        return ""
    name = unicodedata.name(ch, "")
    what = f" (U+{ord(ch):04X}{' ' + name if name else ''}"
    if ch == "\ufeff":
        return what + ", a byte-order mark: save the source as UTF-8 without one)"
    if ch in _LOOKALIKE:
        return what + f"; write {_LOOKALIKE[ch]!r})"
    if unicodedata.category(ch) in ("Zl", "Zp"):
        return what + "; write a newline)"
    if unicodedata.category(ch) in ("Zs", "Cf"):
        return what + "; write an ordinary space, or nothing)"
    if ch.isidentifier():
        return what + "; names are ASCII letters, digits and '_')"
    return what + ")"
