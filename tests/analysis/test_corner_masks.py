"""Which wheres the analysis decides per tile at their corners (tilenb/analysis/masks.py), and what
it records: the statement, the where, its tile shape, its condition as affine forms and the i32
nodes that must not wrap. The generated code's test and its exactness are checked in
tests/codegen/test_corner_mask_sweeps.py."""
from __future__ import annotations

import json

import pytest

import tilenb
from tilenb.analysis.masks import Affine, Compare, Logic
from tilenb.examples import suite_kernels as SK

HEAD = """
@launch(128)
@grid(cdiv(N, 16), cdiv(M, 32))
kernel k(X: tensor<f32>[N, M], O: tensor<f32>[N, M], a: i32, f: f32) {
  let r = ctx.block.x * 16
  let c = ctx.block.y * 32
  var x = X[r :+ 16, c :+ 32]
  O[r :+ 16, c :+ 32] = @VALUE@
}
"""


def masks_of(value: str):
    k = tilenb.compile(HEAD.replace("@VALUE@", value), backend="cpu").k
    return k.analysis().masks


def test_the_causal_mask_is_decided_at_its_corners_on_every_variant():
    k = tilenb.compile(SK.ATTENTION_CAUSAL, backend="cpu").attention_causal_bf16
    for variant in (dict(BR=64, BC=64, D=64, NT=128), dict(BR=128, BC=64, D=128, NT=256)):
        for arch in (None, "sm_90"):
            a = k.analysis(arch=arch, **variant)
            assert len(a.masks) == 1
            m = a.masks[0]
            assert m.shape == (variant["BR"], variant["BC"])
            assert m.stmt.sym.name == "s" and m.where.fn == "where"
            # cols(BR, BC, kt) <= rows(BR, BC, row): kt + j on the left, row + i on the right
            assert isinstance(m.cond, Compare) and m.cond.op == "<="
            assert (m.cond.left.ci, m.cond.left.cj, m.cond.right.ci, m.cond.right.cj) == (0, 1, 1, 0)
            assert len(m.guards) == 2                 # each index tile's start + index stays in i32
            js = a.to_json()["masks"]
            assert js == [m.to_json()] and js[0]["line"] == m.line and js[0]["shape"] == list(m.shape)
            assert "corners" in js[0]["why"]
            json.dumps(js)


@pytest.mark.parametrize("value,op", [
    ("where(cols(16, 32, c) <= rows(16, 32, r), x, 0.0)", "<="),
    ("where(rows(16, 32, r) - cols(16, 32, c) < a && cols(16, 32, c) <= rows(16, 32, r), x, 0.0)", "&&"),
    ("where(!(cols(16, 32, c) > rows(16, 32, r) + 3 * a) || rows(16, 1, r) == cols(1, 32, c), x, 0.0)", "||"),
    ("where(cols(16, 32, c) < M - a, x, 0.0)", "<"),             # an i64 side, compared whole
    ("where(-cols(16, 32, c) >= -rows(16, 32, 5), x, 0.0)", ">="),
    ("where(cols(16, 32, c) != 7, x, 0.0) * 2.0", "!="),        # inside a larger expression
], ids=["causal", "window", "or_not_broadcast", "i64_side", "negated", "nested"])
def test_affine_index_conditions_are_recorded(value, op):
    ms = masks_of(value)
    assert len(ms) == 1 and ms[0].shape == (16, 32)
    cond = ms[0].cond
    assert (cond.op if isinstance(cond, (Compare, Logic)) else None) == op


def test_the_forms_hold_the_coefficients_and_the_uniform_terms():
    (m,) = masks_of("where(rows(16, 32, r) * 2 - cols(16, 32, c) + a < 9, x, 0.0)")
    left, right = m.cond.left, m.cond.right
    assert (left.ci, left.cj, left.k) == (2, -1, 0)
    assert [(c, w) for c, _, w in left.terms] == [(2, "i32"), (-1, "i32"), (1, "i32")]
    assert right == Affine(0, 0, 9)
    assert Affine(2, -1, 0).span((16, 32)) == (-31, 30)
    # rows, rows * 2, cols, the difference and the sum: each an i32 node that could wrap
    assert len(m.guards) == 5


@pytest.mark.parametrize("value", [
    "where(x > 0.0, x, 0.0)",                                     # a data-dependent condition
    "where(rows(16, 32, r) * cols(16, 32, c) < a, x, 0.0)",       # not affine
    "where(rows(16, 32, r) % 2 == 0, x, 0.0)",                    # not affine
    "where(f32(cols(16, 32, c)) < f, x, 0.0)",                    # compared as floats
    "where(rows(16, 32, r) < cols(16, 32, c) && x > 0.0, x, 0.0)",   # a data-dependent part
    "x + 1.0",                                                    # no where
], ids=["data", "product", "modulo", "float_compare", "mixed_data", "none"])
def test_other_conditions_stay_per_element(value):
    assert masks_of(value) == ()


def test_one_where_a_statement_the_first_in_pre_order():
    ms = masks_of("where(cols(16, 32, c) <= rows(16, 32, r), where(cols(16, 32, c) < a, x, 1.0), 0.0)")
    assert len(ms) == 1
    assert ms[0].where.args[0].op == "<="


def test_the_loop_entry_says_its_mask_is_decided_per_tile():
    k = tilenb.compile(SK.ATTENTION_CAUSAL, backend="cpu").attention_causal_bf16
    for arch in (None, "sm_90"):
        a = k.analysis(arch=arch, BR=64, BC=64, D=64, NT=128)
        (lp,) = a.loops
        assert a.masks[0].describe() in lp.why and "[64, 64] tile from its corners" in lp.why
        assert a.lowering.by_loop and list(a.lowering.by_loop.values()) == [lp]
    plain = tilenb.compile(SK.ATTENTION, backend="cpu").attention_bf16.analysis(arch="sm_90")
    assert plain.masks == () and all("corners" not in lp.why for lp in plain.loops)
