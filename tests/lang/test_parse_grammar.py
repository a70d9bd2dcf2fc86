"""The grammar of record (tilenb/lang/grammar.lark) and the parser: every construct of the
language parses to the AST it should, with 1-based spans, and syntax errors say where and what.
"""
import textwrap

import pytest

from tilenb import TileSyntaxError
from tilenb.lang import ast as A
from tilenb.lang.parser import _lark, parse

# One program that uses every rule of the grammar (checked below against the grammar itself).
EVERYTHING = textwrap.dedent("""
    // a comment on its own line
    fn silu(x) = x / (1.0 + exp(-x))
    fn bump(t, s) {
      t += s
    }

    @autotune(TM in [32, 64], TK in [8])
    @launch(128)
    @dynshared
    @registers(acc)
    @grid(cdiv(M, TM), 1,)
    kernel everything(A: tensor<f32>[M, K], B: tensor<i8>[K, 4096], s: f32,) {
      let r = ctx.block.x * TM; let q: i32 = 7
      var acc: tile<f32>[TM, 16] = 0.0
      var u: tile<f32>[TM, 16]
      var v = A[r :+ TM, 0 :+ 16]
      u = v
      u[0 :+ 1, :] = 1.5e-3
      acc += v * s
      bump(acc, 2.0)
      for kt in range(0, K, TK) {
        if kt == 0 && !(q != 7) || q >= 8 {
          continue
        } else if kt > 8 {
          break
        } else {
          acc = acc + silu(v)
        }
      }
      for<unroll 2> i in range(0, 8) { A[i, 0] = f32(B[i, 0]) }
      while q < 100 { q <<= 1 }
      A[0, 0] = f32((q >> 1) & 15 | 2 ^ 3) - 0x10 % 3 + ~q * 1
      A[r :+ TM, 0 :+ 16] = acc
      return
    }
""")


def test_every_grammar_rule_is_exercised():
    parser = _lark()
    rules = set()
    for r in parser.rules:
        name = str(r.alias or r.origin.name)
        inlined = r.options.expand1 and not r.alias
        if not name.startswith("_") and not inlined:
            rules.add(name)
    seen = {t.data for t in parser.parse(EVERYTHING).iter_subtrees()}
    assert rules - {str(s) for s in seen} == set()


def test_everything_parses_to_the_ast():
    prog = parse(EVERYTHING)
    (k,) = prog.kernels
    assert [f.name for f in prog.functions] == ["silu", "bump"]
    silu, bump = prog.functions
    assert silu.is_expr and isinstance(silu.body, A.Binary) and silu.params == ("x",)
    assert not bump.is_expr and isinstance(bump.body[0], A.Assign) and bump.body[0].op == "+"
    assert [a.name for a in k.attributes] == ["autotune", "launch", "dynshared", "registers", "grid"]
    tune = k.attributes[0].args
    assert [(t.name, [v.value for v in t.values]) for t in tune] == [("TM", [32, 64]), ("TK", [8])]
    assert not k.attributes[2].has_parens and len(k.attributes[4].args) == 2
    a, b, s = k.params
    assert a.type.dtype == "f32" and a.type.dims == ("M", "K")
    assert b.type.dims == ("K", 4096) and isinstance(s.type, A.ScalarTypeExpr)
    kinds = [type(st).__name__ for st in k.body]
    assert kinds == ["Let", "Let", "VarDecl", "VarDecl", "VarDecl", "Assign", "Assign", "Assign",
                     "ExprStmt", "For", "For", "While", "Assign", "Assign", "Return"]
    loop = k.body[9]
    assert loop.var == "kt" and len(loop.args) == 3 and loop.unroll is None
    chain = loop.body[0]
    assert isinstance(chain.orelse[0], A.If) and isinstance(chain.orelse[0].orelse[0], A.Assign)
    assert isinstance(chain.then[0], A.Continue) and isinstance(chain.orelse[0].then[0], A.Break)
    assert k.body[10].unroll == 2 and k.body[11].body[0].op == "<<"
    assert k.body[4].value.subs[0].__class__ is A.RangeSub
    assert isinstance(k.body[6].target.subs[1], A.FullSub)
    assert k.body[3].value is None and k.body[3].type.dims[0].id == "TM"


def test_spans_are_one_based_lines_and_columns():
    prog = parse("kernel k(X: tensor<f32>[N]) {\n  let a = X[0]\n    X[1] = a + 2.5\n}\n")
    let, assign = prog.kernels[0].body
    assert (let.span.line, let.span.column) == (2, 3)
    assert (assign.span.line, assign.span.column) == (3, 5)
    assert (assign.value.right.span.line, assign.value.right.span.column) == (3, 16)
    assert prog.kernels[0].name_span.column == 8


@pytest.mark.parametrize("text, value", [
    ("7", 7), ("007", 7), ("0x1F", 31), ("0X10", 16), ("1.5", 1.5), ("2.", 2.0), ("1e3", 1000.0),
    ("1.5e-2", 0.015), ("3E+2", 300.0)])
def test_number_literals(text, value):
    prog = parse(f"kernel k(X: tensor<f32>[N]) {{\n  X[0] = {text}\n}}")
    lit = prog.kernels[0].body[0].value
    assert lit.value == value and type(lit.value) is type(value)


def test_shifts_and_comparisons_lex_apart():
    prog = parse("kernel k(X: tensor<i32>[N]) {\n  X[0] = (X[1] >> 4) << 2 < 3\n  X[0] >>= 1\n  X[0] <<= 2\n}")
    e = prog.kernels[0].body[0].value
    assert e.op == "<" and e.left.op == "<<" and e.left.left.op == ">>"
    assert [s.op for s in prog.kernels[0].body[1:]] == [">>", "<<"]


def test_operator_precedence():
    e = parse("kernel k(X: tensor<i32>[N]) {\n  X[0] = 1 + 2 * 3 << 1 & 7 ^ 2 | 1\n}").kernels[0].body[0].value
    # | binds loosest, then ^, &, shifts, +, *
    assert e.op == "|" and e.left.op == "^" and e.left.left.op == "&"
    assert e.left.left.left.op == "<<" and e.left.left.left.left.op == "+"
    assert e.left.left.left.left.right.op == "*"
    e = parse("kernel k(X: tensor<i32>[N]) {\n  if (1 < 2) == true || false && 1 + 1 > 2 { }\n}").kernels[0].body[0].cond
    assert e.op == "||" and e.right.op == "&&" and e.left.op == "==" and e.right.right.op == ">"
    assert e.right.right.left.op == "+"


def test_statement_separators_and_newlines():
    prog = parse(textwrap.dedent("""
        kernel k(X: tensor<f32>[N],
                 Y: tensor<f32>[N]) {
          X[0] = 1.0; X[1] = 2.0;
          ;;
          X[2] = (1.0 +
                  2.0)
          X[3] = Y[
            3]
          if true { X[4] = 1.0 } else { X[4] = 2.0 }   // comment after code
        }
        @launch(32) kernel j(X: tensor<f32>[N]) { X[0] = 1.0 }
    """))
    k, j = prog.kernels
    assert len(k.body) == 5 and len(k.params) == 2
    assert j.attributes[0].name == "launch"


def test_contextual_words_are_names_elsewhere():
    prog = parse("kernel k(X: tensor<f32>[N]) {\n  let tile = 1\n  let tensor = 2\n  let range = 3\n  let unroll = 4\n}")
    assert [s.name for s in prog.kernels[0].body] == ["tile", "tensor", "range", "unroll"]


@pytest.mark.parametrize("word", ["let", "var", "for", "in", "while", "if", "else", "break",
                                  "continue", "return", "kernel", "fn"])
def test_keywords_are_reserved(word):
    with pytest.raises(TileSyntaxError) as info:
        parse(f"kernel k(X: tensor<f32>[N]) {{\n  let {word} = 1\n}}")
    assert (info.value.line, info.value.column) == (2, 7)


@pytest.mark.parametrize("text, line, column, phrase", [
    ("kernel k(X: tensor<f32>[N]) {\n  if X[0] > 0.0 {\n  }\n  else {\n  }\n}", 4, 3, "'else' must follow the '}' of its 'if' on the same line"),
    ("kernel k(X: tensor<f32>[N]) {\n  X[0] = 1.0\n", 1, 29, "'{' is never closed; add '}'"),
    ("kernel k(X: tensor<f32>[N] {\n}", 1, 9, "'(' is not closed: a '{' comes first"),
    ("kernel k(X: tensor<f32>[N]) {\n  X[0] = (1.0 + 2.0\n}", 2, 10, "'(' is not closed: a '}' comes first, at line 3, column 1"),
    # a keyword argument in a closed call is named as such, not as an unclosed '('
    ("kernel k(X: tensor<i32>[4, 4]) {\n  X[0 :+ 4, :] = rows(4, 4, s = 2)\n}", 2, 31, "'=' inside a call: calls take their arguments by position"),
    ("kernel k(X: tensor<f32>[N]) {\n  let a = (b = 2)\n}", 2, 11, "'(' is not closed before the error at line 2, column 14"),
    ("kernel k(X: tensor<f32>[N]) {\n  X[0] = 1.0)\n}", 2, 13, "')' does not match the '{' at line 1, column 29"),
    ("kernel k(X: tensor<f32>[N]) {\n  X[0] = 1.0\n}\n}", 4, 1, "'}' closes nothing"),
    ("kernel k(X: tensor<f32>[N]) {\n  if 1 < 2 < 3 { }\n}", 2, 12, "comparisons do not chain"),
    ("kernel k(X: tensor<f32>[N]) {\n  X[0) = 1.0\n}", 2, 6, "')' does not match the '[' at line 2, column 4"),
    ("kernel k(X: tensor<f32>[N]) {\n  X[0] = 1.0 X[1] = 2.0\n}", 2, 14, "a statement ends at a newline or ';'"),
    ("kernel k(X: tensor<f32>[N]) {\n  X[0] = \n}", 2, 10, "unexpected end of line; expected an expression"),
    ("kernel k(X: tensor<f32>[N]) {\n  X[0] = 1 $ 2\n}", 2, 12, "unexpected character '$'"),
    ("kernel k(X: tensor<f32>[N]) {\n  for i range(0, 4) { }\n}", 2, 9, "expected 'in'"),
    ("kernel k(X: tensor<f32>[N]) {\n  for i in range(4) { }\n}", 2, 19, "expected ','"),
    ("kernel k(X: tensor<f32>[N]) {\n  X[0] = 123456789012345678901234567890123456789012345\n}", 2, 10, "too long"),
    ("kernel k(X: tensor[N]) {}", 1, 19, "expected '<'"),
    ("@launch 256\nkernel k(X: tensor<f32>[N]) {}", 1, 9, "unexpected '256'"),
])
def test_syntax_errors(text, line, column, phrase):
    with pytest.raises(TileSyntaxError) as info:
        parse(text)
    e = info.value
    assert phrase in e.message, e.message
    assert (e.line, e.column) == (line, column), (e.line, e.column, e.message)


def test_syntax_error_messages_use_words_not_grammar_names():
    for text in ["kernel k(X: tensor<f32>[N]) {\n  let a = -\n}", "fn f(x) = \nkernel",
                 "kernel k(X: tensor<f32>[N]) {\n  for<unroll> i in range(0, 2) {}\n}"]:
        with pytest.raises(TileSyntaxError) as info:
            parse(text)
        msg = info.value.message
        assert not any(w in msg for w in ("UNOP", "unop", "$END", "__ANON", "_NL", "RPAR", "NAME"))


def test_empty_and_blank_programs():
    assert parse("").kernels == () and parse("\n  // only a comment\n").kernels == ()
