"""Valid regions dimension by dimension (spec 8 rules 2, 4-6): a region empty in one dimension
keeps the other dimensions' ranges, so a reduction keeps the input's rows (row*) or columns
(col*) even when none of their elements is valid (sum 0, max -inf, min +inf), and a dot keeps
a's rows by b's columns; a broadcast of an extent-1 dimension whose one element is invalid is
empty along that dimension only. Both the CPU executor and the generated CUDA (run by
tests/support/cuda_emulator.py) are checked. Fuzzer finding F3 (label `reduce_bcast`): the CPU executor
once emptied every dimension of such a broadcast (a column reduction or a dot of it wrote
nothing), and the generated CUDA put a column broadcast's emptiness in the rows and emptied the
row dimension of a rank-1 slice at a row outside the tensor (a row reduction of it wrote
nothing).

Every expected value is computed here with numpy from the inputs, at a [5, 7] tensor (tiles of
4 and 8 cut by both edges), for starts inside, across and past both edges.
"""
import textwrap

import numpy as np
import pytest

import tilenb

from support import cuda_emulator as EMU
from support.cuda_emulator import needs_gxx


M, N = 5, 7
HEAD = "@launch(32)\nkernel k(X: tensor<f32>[M, 7], Y: tensor<f32>[M, 7], s: i32) {\n"


def rows_in(lo, n, ext):
    """The indices of [lo, lo + n) inside [0, ext)."""
    return [i for i in range(lo, lo + n) if 0 <= i < ext]


# each case: its body, and numpy's result from (X, Y, s) (Y is a copy to change)
def colmax_bcast_row(X, Y, s):
    # rows [0, 2) valid only if row s is; the 7 columns always valid: colmax of no row is -inf
    Y[0, :] = np.maximum(X[0] + X[s], X[1] + X[s]) if 0 <= s < M else -np.inf
    return Y


def colsum_bcast_row(X, Y, s):
    Y[0, :] = (X[0] + X[s]) + (X[1] + X[s]) if 0 <= s < M else 0.0
    return Y


def rowsum_bcast_row(X, Y, s):
    # the rows are the broadcast dimension: none is valid when row s is not
    if 0 <= s < M:
        Y[:2, 0] = (X[:2, :] + X[s]).sum(axis=1)
    return Y


def colsum_bcast_col(X, Y, s):
    # the columns are the broadcast dimension: none is valid when column s is not
    if 0 <= s < N:
        Y[0, :4] = (X[:4, :4] + X[:4, s:s + 1]).sum(axis=0)
    return Y


def rowsum_bcast_col(X, Y, s):
    # the 4 rows stay valid: a row of no valid element sums to 0
    Y[:4, 0] = (X[:4, :4] + X[:4, s:s + 1]).sum(axis=1) if 0 <= s < N else 0.0
    return Y


def dot_bcast_row(X, Y, s):
    # b's rows (dot's k) valid only if row s is; a's rows by b's columns always valid
    Y[:4, :4] = X[:4, :4] @ (X[:4, :4] + X[s, :4]) if 0 <= s < M else 0.0
    return Y


def rowsum_rank1_past(X, Y, s):
    # a rank-1 slice of row s: its columns are empty when row s lies outside X; the rows of
    # the [4, 4] sum are X's rows 0..3, all valid
    Y[:4, 0] = (X[:4, :4] + X[s, :4]).sum(axis=1) if 0 <= s < M else 0.0
    return Y


def colsum_rank1_past(X, Y, s):
    if 0 <= s < M:
        Y[0, :4] = (X[:4, :4] + X[s, :4]).sum(axis=0)
    return Y


def colsum_rows_past(X, Y, s):
    rows = rows_in(s, 4, M)
    Y[0, :] = X[rows, :].sum(axis=0) if rows else 0.0
    return Y


def rowmin_cols_past(X, Y, s):
    cols = rows_in(s, 4, N)
    Y[:3, 0] = X[:3, cols].min(axis=1) if cols else np.inf
    return Y


def dot_k_past(X, Y, s):
    # k runs over a's valid columns that are b's valid rows; a's 4 rows by b's 4 columns valid
    out = np.zeros((4, 4), np.float32)
    for k in rows_in(s, 4, N):
        if k in rows_in(s, 4, M):
            out += np.outer(X[:4, k], X[k, :4])
    Y[:4, :4] = out
    return Y


CASES = {
    "colmax_bcast_row": ("Y[0 :+ 1, 0 :+ 8] = colmax(X[0 :+ 2, 0 :+ 8] + X[s :+ 1, 0 :+ 8])", colmax_bcast_row),
    "colsum_bcast_row": ("var a = X[0 :+ 2, 0 :+ 8] + X[s :+ 1, 0 :+ 8]\n  Y[0 :+ 1, 0 :+ 8] = colsum(a)",
                         colsum_bcast_row),
    "rowsum_bcast_row": ("Y[0 :+ 2, 0 :+ 1] = rowsum(X[0 :+ 2, 0 :+ 8] + X[s :+ 1, 0 :+ 8])", rowsum_bcast_row),
    "colsum_bcast_col": ("Y[0 :+ 1, 0 :+ 4] = colsum(X[0 :+ 4, 0 :+ 4] + X[0 :+ 4, s :+ 1])", colsum_bcast_col),
    "rowsum_bcast_col": ("var t: tile<f32>[4, 4] = 1.0\n  t = X[0 :+ 4, 0 :+ 4] + X[0 :+ 4, s :+ 1]\n"
                         "  Y[0 :+ 4, 0 :+ 1] = rowsum(t)", rowsum_bcast_col),
    "dot_bcast_row": ("Y[0 :+ 4, 0 :+ 4] = dot(X[0 :+ 4, 0 :+ 4], X[0 :+ 4, 0 :+ 4] + X[s :+ 1, 0 :+ 4])",
                      dot_bcast_row),
    "rowsum_rank1_past": ("var v = X[0 :+ 4, 0 :+ 4] + X[s, 0 :+ 4]\n  Y[0 :+ 4, 0 :+ 1] = rowsum(v)",
                          rowsum_rank1_past),
    "colsum_rank1_past": ("Y[0 :+ 1, 0 :+ 4] = colsum(X[0 :+ 4, 0 :+ 4] + X[s, 0 :+ 4])", colsum_rank1_past),
    "colsum_rows_past": ("Y[0 :+ 1, 0 :+ 8] = colsum(X[s :+ 4, 0 :+ 8])", colsum_rows_past),
    "rowmin_cols_past": ("Y[0 :+ 3, 0 :+ 1] = rowmin(X[0 :+ 3, s :+ 4])", rowmin_cols_past),
    "dot_k_past": ("Y[0 :+ 4, 0 :+ 4] = dot(X[0 :+ 4, s :+ 4], X[s :+ 4, 0 :+ 4])", dot_k_past),
}
STARTS = [-5, -4, -3, -1, 0, 1, 3, 4, 5, 6, 7, 10]


def source(name):
    return HEAD + "  " + CASES[name][0] + "\n}\n"


def inputs(s):
    X = np.random.default_rng(3).uniform(-1, 1, (M, N)).astype(np.float32)
    Y = np.full((M, N), -7.0, np.float32)
    return X, Y


def expected(name, X, Y, s):
    return CASES[name][1](X, Y.copy(), s).astype(np.float32)


@pytest.mark.parametrize("name", sorted(CASES))
def test_cpu_executor_regions_dimension_by_dimension(name):
    mod = tilenb.compile(source(name), backend="cpu", filename="k.tile")
    for s in STARTS:
        X, Y = inputs(s)
        want = expected(name, X, Y, s)
        mod.k[1](X, Y, s)
        np.testing.assert_allclose(Y, want, rtol=1e-5, atol=1e-5, err_msg=f"{name} s={s}")


@needs_gxx
@pytest.mark.parametrize("name", sorted(CASES))
def test_generated_cuda_regions_dimension_by_dimension(name, tmp_path):
    from tilenb.codegen import generate
    mod = tilenb.compile(source(name), backend="cpu", filename="k.tile")
    ks = generate(mod.k.ir(), source(name))
    for s in STARTS:
        X, Y = inputs(s)
        want = expected(name, X, Y, s)
        EMU.run(ks, [X, Y, s], {"M": M}, (1, 1, 1), workdir=tmp_path)
        np.testing.assert_allclose(Y, want, rtol=1e-5, atol=1e-5, err_msg=f"{name} s={s}")


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_on_the_gpu_regions_dimension_by_dimension(name):
    mod = tilenb.compile(source(name), backend="cuda", filename="k.tile")
    for s in STARTS:
        X, Y = inputs(s)
        want = expected(name, X, Y, s)
        mod.k[1](X, Y, s)
        np.testing.assert_allclose(Y, want, rtol=1e-5, atol=1e-5, err_msg=f"{name} s={s}")
