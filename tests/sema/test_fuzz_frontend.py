"""No input, however broken, gets anything out of the front end but a checked module or a
TileError positioned inside the source.

Valid programs (tests/sema/test_check_programs.py and the bundled examples) are mutated the ways
editing goes wrong: tokens dropped, doubled, swapped or replaced, text cut short, stray
characters typed, lines dropped, doubled or moved, names and operators swapped for others.
`tilenb.compile` must then return a Module, or raise a TileError each of whose diagnostics has
a 1-based line and column inside the text and a message that names no compiler file.

The example count is kept small for CI; set TILENB_FUZZ_EXAMPLES=3000 to search harder.
"""
import os
import re

import pytest

pytest.importorskip("hypothesis")  # a test extra (pyproject [test]); the GPU image lacks it
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import tilenb
from tilenb import TileError
from tilenb.__main__ import EXAMPLE

from support.programs import PROGRAMS

SEEDS = sorted(PROGRAMS.values()) + [EXAMPLE.read_text()]
EXAMPLES = int(os.environ.get("TILENB_FUZZ_EXAMPLES", "120"))
DERANDOMIZE = "TILENB_FUZZ_EXAMPLES" not in os.environ   # a local search explores new inputs each run

TOKEN = re.compile(r"//[^\n]*|\s+|:\+|<<=|>>=|[-+*/%&|^]=|&&|\|\||==|!=|<=|>=|<<|>>"
                   r"|\d+\.\d*(?:[eE][+-]?\d+)?|\d+|[A-Za-z_]\w*|.", re.S)
NAME = re.compile(r"[A-Za-z_]\w*")
KEYWORDS = {"kernel", "fn", "let", "var", "for", "in", "while", "if", "else", "break", "continue",
            "return", "tile", "tensor", "range", "unroll"}
VOCAB = sorted(KEYWORDS) + [
    "<", ">", "[", "]", "(", ")", "{", "}", ":+", ":", ",", ";", "\n", "=", "+=", "<<=", "@", ".",
    "ctx", "thread", "lane", "f32", "f16", "u8", "bool", "i8", "i64", "dot", "dot_t", "rowsum",
    "colmax", "barrier", "flat", "transpose", "where", "exp", "min", "cdiv", "atomic_add", "true",
    "0", "1", "-1", "1.5", "1e40", "0x10", "99999999999999999999", "65536", "M", "N",
    "autotune", "launch", "grid", "registers", "dynshared"]
OPERATORS = ["+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", "<", ">", "==", "!=", "&&", "||",
             "=", "+=", ":+", ":", ","]
NOISE = st.one_of(st.characters(min_codepoint=32, max_codepoint=126),
                  st.sampled_from(["\t", "\n", "\r", "\x00", "\x0c", "é", "€", "\u2028"]))


@st.composite
def mutated_program(draw):
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["drop", "dup", "swap", "cut", "char", "replace", "insert",
                                     "operator", "rename", "line_drop", "line_dup", "line_move"]))
        if kind.startswith("line_"):
            lines = text.split("\n")
            i = draw(st.integers(0, len(lines) - 1))
            j = draw(st.integers(0, len(lines) - 1))
            if kind == "line_drop":
                del lines[i]
            elif kind == "line_dup":
                lines.insert(j, lines[i])
            else:
                lines.insert(j, lines.pop(i))
            text = "\n".join(lines)
            continue
        toks = TOKEN.findall(text)
        if not toks:
            break
        i = draw(st.integers(0, len(toks) - 1))
        if kind == "drop":
            del toks[i]
        elif kind == "dup":
            toks.insert(i, toks[i])
        elif kind == "swap":
            j = draw(st.integers(0, len(toks) - 1))
            toks[i], toks[j] = toks[j], toks[i]
        elif kind == "cut":
            toks = toks[:i]
        elif kind == "char":
            toks.insert(i, draw(NOISE))
        elif kind == "replace":
            toks[i] = draw(st.sampled_from(VOCAB))
        elif kind == "insert":
            toks.insert(i, " " + draw(st.sampled_from(VOCAB)) + " ")
        elif kind == "operator":
            ops = [k for k, t in enumerate(toks) if t in OPERATORS]
            if ops:
                toks[draw(st.sampled_from(ops))] = draw(st.sampled_from(OPERATORS))
        else:  # rename: a name becomes another name of the program or a built-in
            names = [k for k, t in enumerate(toks) if NAME.fullmatch(t) and t not in KEYWORDS]
            if names:
                pool = sorted({toks[k] for k in names}) + ["exp", "ctx", "rowsum", "f16", "u8", "M"]
                toks[draw(st.sampled_from(names))] = draw(st.sampled_from(pool))
        text = "".join(toks)
    return text


def assert_compiles_or_positioned_error(text):
    try:
        tilenb.compile(text, backend="cpu")
    except TileError as e:
        lines = text.split("\n")
        assert e.diagnostics and e.diagnostics[0] is e
        for d in e.diagnostics:
            assert isinstance(d, TileError)
            assert d.message and not re.search(r"\.py\b|tilenb/|Traceback", d.message), d.message
            assert d.line is not None and 1 <= d.line <= len(lines), (d.line, d.message)
            assert 1 <= d.column <= len(lines[d.line - 1]) + 1, (d.line, d.column, d.message)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=DERANDOMIZE,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated_program())
def test_mutated_programs_compile_or_raise_positioned_tile_errors(text):
    assert_compiles_or_positioned_error(text)


@settings(max_examples=max(20, EXAMPLES // 3), deadline=None, derandomize=DERANDOMIZE,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(VOCAB), NOISE), max_size=40).map(" ".join))
def test_token_soup_raises_positioned_tile_errors(text):
    assert_compiles_or_positioned_error(text)


def test_seeds_themselves_compile():
    for text in SEEDS:
        tilenb.compile(text, backend="cpu")
