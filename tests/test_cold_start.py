"""The cold-start shortcuts of the front end give what the long way gives.

- The parser's own LALR loop (`tilenb.lang.parser._Driver`, over Lark's tables, lexers and
  callbacks) gives the Program Lark's loop gives, spans included, and every malformed text
  reaches Lark, so its diagnostic is the one Lark's loop gives.
- Lark's grammar cache (in $TILENB_CACHE_DIR/parser): a second build loads the saved analysis
  instead of analysing the grammar; a corrupt, stale, unreadable or unwritable cache never
  changes what `parse` returns or raises.
"""
import random
import sys
from pathlib import Path

import lark
import lark.lark
import pytest

from tilenb.lang import parser as P
from tilenb.lang.diagnostics import TileError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import suite_kernels as SK  # noqa: E402

from test_parse_grammar import EVERYTHING  # noqa: E402

SEEDS = (Path(__file__).resolve().parents[1] / "tilenb" / "examples" / "seed_kernels.tile").read_text()
PROGRAMS = [EVERYTHING, SK.program(), SEEDS,
            "fn sq(x) = x * x\nkernel k(X: tensor<f32>[N]) { X[0] = sq(X[1]); if X[0] > 1.0 { return } else { X[1] = -X[1] } }\n",
            "kernel k(X: tensor<f32>[N]) {\r\n  // a comment\r\n  for<unroll 2> i in range(0, 4) {\r\n    X[i] = 0x1F\r\n  }\r\n}\r\n",
            "", "// only a comment", "\n\n"]


def _outcome(text, *, fast=True):
    """What `parse` gives: ("ok", Program) or ("error", class, message, line, column)."""
    saved = P._driver
    if not fast:
        P._driver = lambda: None          # every parse through Lark's own loop
    try:
        return ("ok", P.parse(text))
    except TileError as e:
        return ("error", type(e).__name__, str(e), e.line, e.column)
    finally:
        P._driver = saved


def _mutants(text, n, seed):
    rng = random.Random(seed)
    pieces = list("(){}[]<>=+-*/%,;:.\n @!~&|^0123456789xyz_") + ["let ", "var ", "else ", "in ", "range",
                                                                    "kernel ", "tile", "//", ":+", "<<", "1.5e3"]
    out = []
    for _ in range(n):
        s = list(text)
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(s) + 1)
            r = rng.random()
            if r < 0.4 and i < len(s):
                del s[i]
            elif r < 0.8:
                s.insert(i, rng.choice(pieces))
            elif i < len(s):
                s[i] = rng.choice(pieces)
        out.append("".join(s))
    return out


@pytest.mark.parametrize("i", range(len(PROGRAMS)))
def test_the_driver_builds_the_program_lark_builds(i):
    text = PROGRAMS[i]
    fast, slow = _outcome(text), _outcome(text, fast=False)
    assert fast == slow
    if text.strip() and not text.startswith("//"):
        parser, builder = P._fast()
        builder.reset()
        try:
            assert P._driver().run(text) is not P._FAILED    # well-formed: no fallback to Lark
        finally:
            builder.reset()


def test_malformed_texts_get_lark_s_diagnostics():
    texts = _mutants(SK.kernel_text("attention_bf16"), 150, 1) + _mutants(EVERYTHING, 150, 2)
    errors = 0
    for t in texts:
        fast, slow = _outcome(t), _outcome(t, fast=False)
        assert fast == slow, t
        errors += fast[0] == "error"
    assert errors > 100


def test_deep_programs_and_literals_out_of_range_read_as_before():
    deep = "kernel k(X: tensor<f32>[N]) {\n  X[0] = " + " + ".join(["X[1]"] * 150) + "\n}\n"
    huge = "kernel k(X: tensor<f32>[N]) {\n  X[0] = 1\n  X[1] = 1" + "9" * 45 + "\n}\n"
    for t in (deep, huge):
        assert _outcome(t) == _outcome(t, fast=False)
    assert _outcome(huge)[0] == "error"


@pytest.fixture
def parser_in(monkeypatch):
    """Rebuild the parser (as at the first parse of a process) with TILENB_CACHE_DIR = dir."""
    def rebuild(cache_dir):
        monkeypatch.setenv("TILENB_CACHE_DIR", str(cache_dir))
        for f in (P._fast, P._driver, P._lark):
            f.cache_clear()
    yield rebuild
    for f in (P._fast, P._driver, P._lark):
        f.cache_clear()


def _no_grammar_analysis(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("the grammar was analysed again: the cache was not used")
    monkeypatch.setattr(lark.lark, "load_grammar", refuse)


def _same_parses():
    for text in PROGRAMS[:3] + _mutants(SK.kernel_text("gemm_f16"), 20, 3):
        assert _outcome(text) == _outcome(text, fast=False)


def test_a_second_build_loads_the_saved_grammar_analysis(parser_in, tmp_path, monkeypatch):
    expected = {t: _outcome(t) for t in PROGRAMS[:3]}
    parser_in(tmp_path)
    P._fast()
    P._lark()
    files = sorted(p.name for p in (tmp_path / "parser").iterdir())
    assert [f.split("_")[1] for f in files] == ["fast", "tree"]
    parser_in(tmp_path)
    _no_grammar_analysis(monkeypatch)
    for t, want in expected.items():
        assert _outcome(t) == want
    assert _outcome(PROGRAMS[0], fast=False) == expected[PROGRAMS[0]]
    P._lark()


@pytest.mark.parametrize("damage", ["garbage", "truncated", "stale", "empty", "directory"])
def test_a_damaged_cache_file_is_rebuilt_and_parsing_is_unchanged(parser_in, tmp_path, monkeypatch, damage):
    expected = {t: _outcome(t) for t in PROGRAMS[:3]}
    parser_in(tmp_path)
    P._fast()
    path = next((tmp_path / "parser").glob("lark_fast_*"))
    data = path.read_bytes()
    if damage == "garbage":
        path.write_bytes(b"\x80\x04not a pickle at all" * 50)
    elif damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "stale":   # an analysis saved for another grammar, under this file's name
        head, _, body = data.partition(b"\n")
        path.write_bytes(b"0" * len(head) + b"\n" + body)
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        path.unlink()
        path.mkdir()
    parser_in(tmp_path)
    for t, want in expected.items():
        assert _outcome(t) == want
    _same_parses()
    if damage != "directory":   # rewritten whole: the next build loads it
        parser_in(tmp_path)
        _no_grammar_analysis(monkeypatch)
        P._fast()


def test_an_unwritable_cache_directory_only_loses_the_saving(parser_in, tmp_path):
    expected = {t: _outcome(t) for t in PROGRAMS[:3]}
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    parser_in(blocker)                      # $TILENB_CACHE_DIR/parser cannot be made
    for t, want in expected.items():
        assert _outcome(t) == want
    _same_parses()
    assert blocker.read_text() == "not a directory"


def test_lark_internals_the_driver_does_not_know_mean_lark_parses(monkeypatch):
    def broken(parser):
        raise TypeError("unknown Lark internals")
    monkeypatch.setattr(P, "_Driver", broken)
    P._driver.cache_clear()
    try:
        assert P._driver() is None
        _same_parses()
    finally:
        monkeypatch.undo()
        P._driver.cache_clear()
    assert P._driver() is not None
