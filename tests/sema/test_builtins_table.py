"""The table of built-ins (`tilenb.sema.builtins.BUILTINS`) is the one list: the spec's section 10
names every entry and no other, each entry's arity is what the checker enforces, and the
checker's call handling reaches each rule through the table."""
import re
from pathlib import Path

import numpy as np
import pytest

import tilenb
from tilenb.sema import builtins as B

SPEC = Path(__file__).resolve().parents[2] / "docs" / "spec.md"


def _spec_section_10_names():
    text = SPEC.read_text()
    section = text[text.index("\n## 10. Built-ins"):text.index("\n## 11.")]
    names = set()
    for line in section.splitlines():
        if not line.startswith("| ") or line.startswith("| call") or line.startswith("| ---"):
            continue
        first = line.split("|")[1]
        for span in re.findall(r"`([^`]*)`", first):
            span = re.sub(r"\([^()]*\)", "", span)      # the arguments: not names of built-ins
            names.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", span))
    return names


def test_the_spec_names_every_builtin_and_no_other():
    spec = _spec_section_10_names()
    table = set(B.BUILTINS)
    assert table - spec == set(), "built-ins missing from docs/spec.md section 10"
    assert spec - table == set(), "docs/spec.md section 10 names calls the table does not have"


def test_every_name_the_checker_reserves_is_a_table_entry():
    assert B.all_names() == frozenset(B.BUILTINS)
    for f in B.UNARY_MATH + B.BINARY_MATH + tuple(B.REDUCTIONS) + tuple(B.ATOMICS) + tuple(B.CLUSTER_REDUCTIONS):
        assert f in B.BUILTINS


K = """kernel k(X: tensor<f32>[N], Y: tensor<f32>[N]) {
  let i = ctx.block.x * 64
  Y[i :+ 64] = %s
}
"""


@pytest.mark.parametrize("name", sorted(b.name for b in B.BUILTINS.values() if not b.statement))
def test_a_wrong_argument_count_is_refused_with_the_table_s_arity(name):
    entry = B.BUILTINS[name]
    given = entry.arity + 1
    call = f"{name}(" + ", ".join(["X[i :+ 64]"] * given) + ")"
    with pytest.raises(tilenb.TileRuleError) as e:
        tilenb.compile(K % call, backend="cpu")
    assert entry.arity_error(given) in e.value.message
    assert (e.value.line, e.value.column) == (3, 16)


@pytest.mark.parametrize("name", sorted(b.name for b in B.BUILTINS.values() if b.statement))
def test_a_statement_builtin_used_as_a_value_is_refused(name):
    with pytest.raises(tilenb.TileRuleError) as e:
        tilenb.compile(K % f"X[i :+ 64] + {name}(X[i :+ 64])", backend="cpu")
    assert B.BUILTINS[name].as_value in e.value.message


def test_rules_reached_through_the_table_compute_what_numpy_computes():
    text = """kernel k(X: tensor<f32>[N], Y: tensor<f32>[N]) {
  let i = ctx.block.x * 64
  let t = X[i :+ 64]
  Y[i :+ 64] = where(t > 0.5, sqrt(t), max(t, 0.25)) + f32(cdiv(7, 2))
}
"""
    mod = tilenb.compile(text, backend="cpu")
    x = np.random.default_rng(0).random(100, dtype=np.float32)
    y = np.zeros(100, np.float32)
    mod.k[2](x, y)
    want = np.where(x > 0.5, np.sqrt(x), np.maximum(x, 0.25)) + 4.0
    np.testing.assert_allclose(y, want, rtol=1e-6)
