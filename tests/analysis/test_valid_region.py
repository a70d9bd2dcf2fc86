"""The valid region each copy statement's record carries (tilenb.analysis.valid_region): the
slice's elements inside its tensor, resolved where start and extent are fixed before a launch,
written as a condition where they are not; and the resolved ranges agree with what the
reference executor writes."""
import numpy as np

import tilenb

EDGE = """@launch(64)
kernel edge(X: tensor<f32>[8, 60], Y: tensor<f32>[8, 60]) {
  var x = X[0 :+ 8, 0 :+ 64]
  Y[-2 :+ 8, 0 :+ 64] = x
}
"""
BLUR = """@launch(256)
@grid(cdiv(N, 256))
kernel blur(X: tensor<f32>[1, N], Y: tensor<f32>[1, N]) {
  let c = ctx.block.x * 256
  var h: tile<f32>[1, 258] = 0.0
  h[0 :+ 1, :] = X[0 :+ 1, c - 1 :+ 258]
  Y[0 :+ 1, c :+ 256] = (h[0 :+ 1, 0 :+ 256] + h[0 :+ 1, 1 :+ 256] + h[0 :+ 1, 2 :+ 256]) / 3.0
}
"""


def _inside(start, n, extent):
    idx = start + np.arange(n)
    ok = np.flatnonzero((idx >= 0) & (idx < extent))
    return (int(ok[0]), int(ok[-1]) + 1) if len(ok) else (0, 0)


def test_fixed_starts_and_extents_resolve_to_ranges_the_executor_agrees_with():
    k = tilenb.compile(EDGE, backend="cpu").edge
    load, store = k.analysis().copies
    assert load.region.known == (_inside(0, 8, 8), _inside(0, 64, 60)) == ((0, 8), (0, 60))
    assert store.region.known == (_inside(-2, 8, 8), _inside(0, 64, 60)) == ((2, 8), (0, 60))
    assert "rows 2..7 inside, 0..1 outside (Y's 8)" in store.region.text
    assert "columns 0..59 inside, 60..63 outside (Y's 60)" in store.region.text
    # the executor writes exactly the tile rows the region keeps: tile row i lands on Y row i - 2
    X = np.arange(8 * 60, dtype=np.float32).reshape(8, 60)
    Y = np.full((8, 60), -1.0, np.float32)
    k[1](X, Y)
    (r0, r1), (c0, c1) = store.region.known
    expect = np.full((8, 60), -1.0, np.float32)
    expect[r0 - 2:r1 - 2, c0:c1] = X[r0:r1, c0:c1]
    np.testing.assert_array_equal(Y, expect)


def test_starts_known_at_run_time_are_written_as_conditions():
    a = tilenb.compile(BLUR, backend="cpu").blur.analysis()
    load, store = [c for c in a.copies if c.tensor in ("X", "Y")]
    assert load.region.known == ((0, 1), None) and store.region.known == ((0, 1), None)
    assert load.region.text == "row i = 0: all inside (X's 1); columns j in 0..257 where 0 <= c - 1 + j < N"
    assert store.region.text == "row i = 0: all inside (Y's 1); columns j in 0..255 where 0 <= c + j < N"
    rec = a.to_json()["copies"]
    assert [c["valid_region"]["known"] for c in rec if c["tensor"] == "Y"] == [[[0, 1], None]]
