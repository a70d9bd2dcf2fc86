"""The front end's shortcuts (issue 8's cold compile) give what the long way gives.

- The parser builds the AST during Lark's LALR parse; the parse-tree path (`_lark()` +
  `_ToAst`, kept for programs nested deeper than `_DEEP`) gives the same Program, spans included.
- @autotune variants that differ only in names the body never mentions share one check of the
  body: each such variant's IR is the IR a check of that variant alone gives, and errors in
  @launch are reported as a full check reports them.
- The budget check's lifetimes are kept on the KernelIR and reused.
- A scalar let, var or assignment in a loop next to a 2-D tile compiles and runs (it once
  raised AttributeError from the mma-tile analysis).
"""
import dataclasses
import re

import numpy as np
import pytest

import tilenb
from tilenb import ir
from tilenb.analysis.lifetimes import tile_lifetimes
from tilenb.lang import parser as P
from tilenb.lang.diagnostics import Source
from tilenb.sema.check import check_program

from tilenb.examples import suite_kernels as SK  # noqa: E402

from test_parse_grammar import EVERYTHING  # noqa: E402


def _canon(x, pos=None):
    """A KernelIR (or part) as nested tuples: Syms by (name, kind, type, line, uid), the
    uniformity map by statement position (the scalar uniformity map is keyed by Syms, canonical
    too), so that two separately built IRs can be compared."""
    if isinstance(x, ir.Sym):
        return ("Sym", x.name, x.kind, _canon(x.type), x.line, x.uid)
    if isinstance(x, ir.KernelIR):
        pos = {id(s): i for i, s in enumerate(ir.walk_stmts(x.body))}
        out = []
        for f in dataclasses.fields(x):
            v = getattr(x, f.name)
            out.append(sorted((pos[k], lv) for k, lv in v.items()) if f.name == "uniformity" else _canon(v))
        return tuple(out)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return (type(x).__name__,) + tuple(_canon(getattr(x, f.name)) for f in dataclasses.fields(x))
    if isinstance(x, (list, tuple)):
        return tuple(_canon(c) for c in x)
    if isinstance(x, dict):
        return tuple((_canon(k) if isinstance(k, ir.Sym) else k, _canon(v)) for k, v in x.items())
    return (type(x).__name__, repr(x))


def _checked(text):
    return check_program(P.parse(text), Source(text, "<cell>", 0))


def _one_variant(text, space, key):
    """`text` with its @autotune line narrowed to one value of each name (in the order written)."""
    values = dict(key)
    line = "@autotune(" + ", ".join(f"{n} in [{values[n]}]" for n, _ in space) + ")"
    return re.sub(r"@autotune\(.*\)", line, text, count=1)


@pytest.mark.parametrize("text", [EVERYTHING, SK.program()])
def test_the_fast_parse_gives_the_parse_tree_path_program(text):
    kernels, fns = P._ToAst().transform(P._lark().parse(text))
    assert P.parse(text) == tilenb.lang.ast.Program(kernels, fns, text, "<cell>")


def test_parentheses_widen_an_operand_span_as_before():
    text = "kernel k(X: tensor<f32>[4]) {\n  X[(0)] = ((X[1]) + (2)) * -(3)\n  (X[0]) = 1\n}\n"
    kernels, fns = P._ToAst().transform(P._lark().parse(text))
    prog = P.parse(text)
    assert prog.kernels == kernels
    assign = prog.kernels[0].body[0]
    assert (assign.value.span.column, assign.value.span.end_column) == (12, 33)   # the whole product
    assert assign.value.left.span.column == 13                                    # X[1] + 2, inside
    assert prog.kernels[0].body[1].span.column == 3                               # from its '('


def test_a_program_deeper_than_the_fast_path_limit_parses_the_same():
    text = "kernel k(X: tensor<f32>[4]) {\n  X[0] = " + " + ".join(["X[1]"] * (P._DEEP + 20)) + "\n}\n"
    prog = P.parse(text)
    body = prog.kernels[0].body[0]
    depth, e = 0, body.value
    while isinstance(e, tilenb.lang.ast.Binary):
        depth, e = depth + 1, e.left
    assert depth == P._DEEP + 19 and body.span.end_column == len(text.split("\n")[1]) + 1


@pytest.mark.parametrize("name", ["add_f32", "rms_norm_f32", "softmax_bf16", "attention_bf16"])
def test_variants_sharing_a_body_have_the_ir_of_their_own_check(name):
    text = SK.kernel_text(name)
    ck = _checked(text).kernels[name]
    assert len(ck.variants) > 1
    for key, kir in ck.variants.items():
        alone = _checked(_one_variant(text, ck.tune_space, key)).kernels[name].variants[key]
        assert _canon(kir) == _canon(alone), key
        # one Sym per parameter: the body reads the variant's own parameters
        params = {id(p.sym) for p in kir.params}
        for s in ir.walk_stmts(kir.body):
            for e in ir.stmt_exprs(s):
                for x in ir.walk_expr(e):
                    if isinstance(x, (ir.Slice, ir.Element)) and x.base.kind == "tensor":
                        assert id(x.base) in params


def test_a_launch_error_in_one_variant_is_reported_as_by_a_full_check():
    text = """
@autotune(T in [64], NT in [64, 48])
@launch(NT)
@grid(cdiv(N, T))
kernel k(X: tensor<f32>[N]) {
  let b = ctx.block.x * T
  X[b :+ T] = X[b :+ T] * 2.0
}
"""
    with pytest.raises(tilenb.TileRuleError) as e:
        _checked(text)
    assert e.value.message == ("@launch(48): threads per CTA must be a multiple of 32 (whole warps) from 32 "
                               "to 1024 (in the variant T=64, NT=48)")
    assert e.value.line == 3


def test_a_grid_that_names_the_cta_size_is_checked_per_variant():
    text = """
@autotune(NT in [64, 128])
@launch(NT)
@grid(cdiv(N, NT))
kernel k(X: tensor<f32>[N]) {
  let i = ctx.block.x * ctx.threads + ctx.thread
  if i < N {
    X[i] = X[i] + 1.0
  }
}
"""
    ck = _checked(text).kernels["k"]
    a, b = ck.variants[(("NT", 64),)], ck.variants[(("NT", 128),)]
    assert a.body is b.body and (a.threads, b.threads) == (64, 128)
    assert a.grid[0].args[1].value == 64 and b.grid[0].args[1].value == 128
    mod = tilenb.compile(text, backend="cpu")
    x = np.arange(200, dtype=np.float32)
    mod.k(x, variant={"NT": 128})
    tilenb.verify(x, np.arange(200, dtype=np.float32) + 1.0, what="per-variant grid")


def test_variants_over_the_budget_are_skipped_as_before():
    ck = _checked(SK.kernel_text("rms_norm_f32")).kernels["rms_norm_f32"]
    skipped = sorted(dict(k)["NT"] for k in ck.skipped)
    assert skipped == [128, 256, 512]
    assert all(dict(k)["R"] == 4 and dict(k)["D"] == 16384 for k in ck.skipped)
    assert all("does not fit" in why for why in ck.skipped.values())


def test_lifetimes_are_computed_once_per_variant():
    ck = _checked(SK.kernel_text("gemm_f16")).kernels["gemm_f16"]
    kir = next(iter(ck.variants.values()))
    assert tile_lifetimes(kir) is tile_lifetimes(kir)


def test_scalar_statements_in_a_loop_beside_a_tile_compile_and_run():
    text = """
@launch(128)
kernel k(X: tensor<f32>[64, 64], Y: tensor<f32>[64, 64]) {
  var acc: tile<f32>[64, 64] = 0.0
  var n = 0
  for i in range(0, 4) {
    let s = i * 2
    n = n + s
    acc = acc + X[0 :+ 64, :]
  }
  Y[0 :+ 64, :] = acc * f32(n)
}
"""
    mod = tilenb.compile(text, backend="cpu")
    x = np.random.default_rng(0).random((64, 64), dtype=np.float32)
    y = np.zeros_like(x)
    mod.k[1](x, y)
    tilenb.verify(y, x.astype(np.float64) * 4 * 12, what="scalar statements in a loop", rtol=1e-5)
