"""What the views' flags say (issue 21): every uncoalesced or conflicting copy names the lanes at
fault, the cause and the fix; a 1-D slice keeps its rank; a barrier after a loop names the `+=`
in the loop (the write a reader expects), with the fill before the loop as the other path."""
import tilenb
from tilenb.notebook import build

SRC = """
@launch(128)
kernel avg3(X: tensor<f32>[N], Y: tensor<f32>[N]) {
  let s = ctx.block.x * 512
  var x = X[s - 1 :+ 514]
  Y[s :+ 512] = (x[0 :+ 512] + x[1 :+ 512] + x[2 :+ 512]) / 3.0
}
@launch(128)
kernel add_blocks(A: tensor<f32>[M, 32], Y: tensor<f32>[M, 32]) {
  let r = ctx.block.x * 128
  var a: tile<f32>[32, 128] = transpose(A[r :+ 128, :])
  Y[r :+ 128, :] = transpose(a)
}
@launch(128)
kernel narrow(A: tensor<f32>[M, 100], Y: tensor<f32>[M, 4]) {
  let r = ctx.block.x * 64
  var a = A[r :+ 64, 0 :+ 4]
  Y[r :+ 64, :] = a
}
@launch(256)
kernel transpose_f16(X: tensor<f16>[M, N], Y: tensor<f16>[N, M]) {
  let r = ctx.block.y * 64
  let c = ctx.block.x * 32
  var t: tile<f16>[64, 32] = X[r :+ 64, c :+ 32]
  Y[c :+ 32, r :+ 64] = transpose(t)
}
@launch(256)
kernel col_total(X: tensor<f32>[M, N], Out: tensor<f32>[1, N]) {
  let c = ctx.block.x * 64
  var acc: tile<f32>[32, 64] = 0.0
  for i in range(0, M, 32) {
    acc += X[i :+ 32, c :+ 64]
  }
  Out[0 :+ 1, c :+ 64] = colsum(acc)
}
"""


def _mod():
    return tilenb.compile(SRC, backend="cpu")


def _copy(k, line, direction):
    return next(c for c in k.analysis().copies if c.line == line and c.direction == direction)


def test_a_1d_slice_shows_at_its_rank():
    k = _mod().avg3
    assert [c.slice_shape for c in k.analysis().copies] == [(514,), (512,)]
    text = repr(build.make_views(k, ["threads"])[0])
    assert "line 5: load X -> x, [514] f32" in text and "line 6: store x -> Y, [512] f32" in text
    assert "[1, 514]" not in text


def test_unaligned_start_names_the_sector_and_the_fix():
    c = _copy(_mod().avg3, 5, "load")
    assert c.sectors > c.ideal_sectors
    assert "may start 28 B into a 32-byte sector" in c.coalescing_note       # s - 1: 4 B short of a sector
    assert "multiple of 8 elements" in c.coalescing_note
    text = repr(build.make_views(_mod().avg3, ["threads"])[0])
    assert "  uncoalesced: warp 0, step 0: the slice of X may start" in text


def test_lanes_down_a_column_say_make_the_fastest_index_last():
    c = _copy(_mod().add_blocks, 11, "load")
    assert c.sectors == 8 * c.ideal_sectors
    assert "lanes 0 and 1 read 4 B each, 128 B apart" in c.coalescing_note   # rows of 32 f32
    assert "make the fastest-moving index the last one" in c.coalescing_note
    assert "transpose through a tile" in c.coalescing_note
    assert _copy(_mod().add_blocks, 12, "store").coalescing_note == ""


def test_short_rows_say_so():
    c = _copy(_mod().narrow, 17, "load")
    assert c.sectors > c.ideal_sectors
    assert "lanes 0 and 1 read elements [0, 0] and [1, 0] of the slice of A, 400 B apart" in c.coalescing_note
    assert "rows longer" in c.coalescing_note


def test_bank_conflicts_name_the_lanes_and_the_padding():
    k = _mod().transpose_f16
    c = _copy(k, 25, "store")
    assert c.wavefronts > c.ideal_wavefronts and c.fix is not None and c.fix.kind == "pad"
    # lane 0 reads t[0:4, 0], lane 4 t[16:20, 0]: rows 16 * 64 B = 1024 B apart, the same bank
    assert "lanes 0 and 4 touch bank 0 at different words (t[0, 0] and t[16, 0])" in c.conflict_note
    assert f"pad t's row by 1 element (rows of {c.fix.row_length})" in c.conflict_note
    assert _copy(k, 24, "load").conflict_note == ""
    text = repr(build.make_views(k, ["threads"])[0])
    assert "  bank conflicts: warp 0, step 0: 16 wavefronts where 4 would do" in text


def test_barrier_after_a_loop_names_the_accumulation_in_it():
    bars = _mod().col_total.analysis().barriers
    assert len(bars) == 1
    r = bars[0].reason
    assert r.startswith("acc: the += into acc at line 32 wrote acc"), r
    assert "(and the fill of acc at line 30 wrote acc when the loop at line 31 runs no turn)" in r
