"""How errors reach the user: all of them, sorted by position, each with a file, line, column,
source line and caret, never naming a compiler file, and without cascades from one mistake."""
import re
import textwrap

import pytest

import tilenb
from tilenb import TileError, TileNameError, TileRuleError, TileShapeError, TileTypeError
from tilenb.lang.diagnostics import combine


def errors_of(text, **kw):
    with pytest.raises(TileError) as info:
        tilenb.compile(textwrap.dedent(text).lstrip("\n"), backend="cpu", **kw)
    return info.value


THREE_IN_ONE = """
kernel k(X: tensor<f32>[M, 64], O: tensor<i32>[M]) {
  var t: tile<f32>[M, 4] = 0.0
  let a = 1.0
  O[0] = X[0, 0]
  a = 2.0
}
"""


def test_three_independent_errors_in_one_kernel_all_reported_in_order():
    e = errors_of(THREE_IN_ONE)
    got = [(type(d), d.line, d.column) for d in e.diagnostics]
    assert got == [(tilenb.TileShapeError, 2, 20), (TileTypeError, 4, 10), (TileRuleError, 5, 3)]
    assert e is e.diagnostics[0]                       # the raised error is the first by position
    assert isinstance(e, TileShapeError)


def test_errors_across_kernels_and_functions_are_merged_and_sorted():
    e = errors_of("""
    kernel b(X: tensor<f32>[N]) {
      X[0] = undefined_b
    }
    fn f(x) {
      return
    }
    kernel a(X: tensor<f32>[N]) {
      X[0] = 1
      X[1] = undefined_a
    }
    """)
    assert [(d.line, d.column) for d in e.diagnostics] == [(2, 10), (5, 3), (9, 10)]
    assert "undefined_b" in e.diagnostics[0].message and "undefined_a" in e.diagnostics[2].message


def test_str_shows_every_error_with_position_source_and_caret():
    e = errors_of(THREE_IN_ONE)
    text = str(e)
    lines = text.split("\n")
    assert lines[0].startswith("<cell>:2:20: error: a tile's dimension must be a constant")
    assert lines[1] == "      var t: tile<f32>[M, 4] = 0.0"
    assert lines[2] == "    " + " " * 19 + "^"
    assert sum(1 for ln in lines if ": error: " in ln) == 3


def test_filename_and_line_offset():
    e = errors_of("kernel k(X: tensor<f32>[N]) {\n  X[0] = y\n}\n", filename="cell.tile", line_offset=1)
    assert (e.filename, e.line, e.column) == ("cell.tile", 3, 10)
    assert str(e).startswith("cell.tile:3:10: error: 'y' is not defined")
    assert "X[0] = y" in str(e)


def test_combine_sorts_and_drops_duplicates():
    a = TileNameError("late", 5, 2)
    b = TileTypeError("early", 1, 9)
    c = TileTypeError("early", 1, 9)
    first = combine([a, b, c])
    assert first is b and first.diagnostics == [b, a]


def test_a_failed_declaration_does_not_cascade():
    e = errors_of("""
    kernel k(X: tensor<f32>[N]) {
      let a = undefined_thing * 2.0
      let b = a + 1.0
      X[0] = a + b
      var t: tile<f32>[N, 4] = 0.0
      t = t * 2.0
    }
    """)
    assert [(d.line, d.column) for d in e.diagnostics] == [(2, 11), (5, 20)]


def test_bodies_are_checked_when_a_header_fails():
    e = errors_of("""
    kernel k(X: tensor<f32>[N]) {
      if X[0] {
        X[1] = nope1
      }
      for i in range(0, 4, N) {
        X[i] = nope2
      }
      while 1.0 {
        X[2] = nope3
      }
    }
    """)
    assert [d.line for d in e.diagnostics] == [2, 3, 5, 6, 8, 9]


def test_an_error_inside_a_function_names_the_call():
    e = errors_of("""
    fn store(v) {
      X[0] = v
    }
    kernel k(X: tensor<i32>[N]) {
      store(1)
      store(2.5)
    }
    """)
    (d,) = e.diagnostics
    assert (d.line, d.column) == (2, 10)
    assert "(in 'store', called at line 6)" in d.message


def test_an_argument_error_points_at_the_argument():
    e = errors_of("""
    fn twice(x) = x * 2.0
    kernel k(X: tensor<f32>[N]) {
      X[0] = twice(nope)
    }
    """)
    (d,) = e.diagnostics
    assert (d.line, d.column) == (3, 16) and "'nope' is not defined" in d.message


# Programs that fail in many different ways: none of their messages may name a compiler file.
FAILING = [
    "kernel k(X: tensor<f32>[N]) { X[0] = }",
    "kernel k(X: tensor<f32>[N]) { let x = X }",
    "kernel k(X: tensor<q7>[N]) { }",
    "fn f(x) = f(x)\nkernel k(X: tensor<f32>[N]) { X[0] = f(1.0) }",
    "kernel k(X: tensor<f32>[N]) { var t: tile<f32>[N, 4] = 0.0 }",
    "kernel k(X: tensor<f32>[N]) { X[0] = dot(X[0 :+ 4], X[0 :+ 4]) }",
    "kernel k(X: tensor<u8>[N]) { X[0] = X[1] + X[2] }",
    "@autotune(T in [1e3])\nkernel k(X: tensor<f32>[N]) { }",
    "kernel k(X: tensor<f32>[N]) { var a: tile<f32>[128, 128] = 0.0\n X[0 :+ 4] = a[0, 0 :+ 4] }",
    "kernel k(X: tensor<f32>[N]) {\n if ctx.thread < 2 { barrier() } }",
    "kernel k(X: tensor<f32>[N]) { X[0] = 99999999999999999999999 }",
    "kernel k(X: tensor<f32>[N]) { X[0] = 1.0e999 }",
    "kernel k(X: tensor<f32>[N]) { X[0] = " + "exp(" * 3000 + "1.0" + ")" * 3000 + " }",
    "kernel k(X: tensor<f32>[N]) { let a = " + "-" * 5000 + "1.0 }",
    "\x00\x01",
    "kernel k(X: tensor<f32>[N]) {\r\n  X[0] = y\r\n}",
]


@pytest.mark.parametrize("text", FAILING, ids=[f"failing{i}" for i in range(len(FAILING))])
def test_messages_never_name_compiler_files(text):
    with pytest.raises(TileError) as info:
        tilenb.compile(text, backend="cpu")
    lines = text.split("\n")
    for d in info.value.diagnostics:
        assert not re.search(r"\.py\b|tilenb/|site-packages|Traceback|lark", str(d.message))
        assert d.line is not None and 1 <= d.line <= len(lines)
        assert 1 <= d.column <= len(lines[d.line - 1]) + 1
