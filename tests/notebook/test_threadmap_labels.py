"""What the thread map calls each memory access: a tile atomic by its operation and value, and
the tensor slices a dot reads itself (no copy statement) named with how the generated code reads
them, in the text form, the analysis record the live view reads, and the static picture's title."""
import pytest

import tilenb
from tilenb.notebook import render, views

from support.programs import GEMM_32

COLSUMS = """@launch(256)
@grid(cdiv(M, 64))
kernel colsums(X: tensor<f32>[M, 64], Out: tensor<f32>[1, 64], Big: tensor<f32>[1, 64]) {
  var x = X[ctx.block.x * 64 :+ 64, :]
  var t = colmax(x)
  atomic_add(Out[0 :+ 1, :], colsum(x))
  atomic_max(Big[0 :+ 1, :], t)
}
"""

def _gemm(dt):
    """GEMM_32 with its operands A and B in dtype `dt` (C stays f32)."""
    return GEMM_32.replace("A: tensor<f32>", f"A: tensor<{dt}>").replace("B: tensor<f32>", f"B: tensor<{dt}>")


def threadmap(src, name):
    return views(getattr(tilenb.compile(src, backend="cpu"), name), "threads")[0]


def test_tile_atomics_are_named_by_their_operation_and_value():
    w = threadmap(COLSUMS, "colsums")
    stores = [c for c in w.copies if c["direction"] == "store"]
    assert [(c["op"], c["value"], c["tensor"]) for c in stores] == [("atomic_add", "colsum(x)", "Out"),
                                                                   ("atomic_max", "t", "Big")]
    text = repr(w)
    assert "line 6: atomic_add colsum(x) -> Out, [1, 64]" in text
    assert "line 7: atomic_max t -> Big, [1, 64]" in text
    assert "store an expression" not in text and "store t" not in text
    # the thread map's live view words the same title (threadmap.js copyTitle)
    js = render.module_script("threadmap")
    assert "c.op || \"store\"" in js and "c.value" in js


@pytest.mark.parametrize("dt,how", [("f32", "registers"), ("f16", "mma.sync")])
def test_a_dots_inline_tensor_operands_are_listed_with_how_they_are_read(dt, how):
    w = threadmap(_gemm(dt), "gemm")
    assert [c["tensor"] for c in w.copies] == ["C"]           # the only copy statement
    assert [(d["line"], d["tensor"], d["operand"], d["shape"], d["how"]) for d in w.dot_reads] == [
        (8, "A", "a", [32, 16], how), (8, "B", "b", [16, 32], how)]
    text = repr(w)
    assert "line 8: dot reads A [32, 16] itself (operand a; no copy statement): " in text
    assert ("tensor cores (mma.sync" in text) == (how == "mma.sync")
    assert ("straight from global memory into registers" in text) == (how == "registers")
    # the static form carries the same lines, visible
    assert "dot reads B [16, 32]" in render.picture("threadmap", w.state())


def test_a_staged_view_read_by_a_dot_keeps_its_copy_and_is_not_listed_twice():
    src = GEMM_32.replace(
        "    acc += dot(A[i :+ 32, k :+ 16], B[k :+ 16, j :+ 32])",
        "    let a = A[i :+ 32, k :+ 16]\n    acc += dot(a, B[k :+ 16, j :+ 32])")
    w = threadmap(src, "gemm")
    assert [(c["direction"], c["tensor"], c["tile"]) for c in w.copies] == [("load", "A", "a"), ("store", "C", "acc")]
    assert [(d["tensor"], d["operand"]) for d in w.dot_reads] == [("B", "b")]
