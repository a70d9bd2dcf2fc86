"""The machine's view as data: lifetimes, barriers, copy plans and their figures, checked against
the seed document's claims and against numbers worked out by hand in each test."""
import json

import numpy as np
import pytest

import tilenb
from tilenb import ir
from tilenb.__main__ import EXAMPLE
from tilenb.analysis import analyze, layout as L, partition as P
from tilenb.analysis.divisibility import Divisibility

SEED = EXAMPLE.read_text()


def line_of(src: str, text: str, nth: int = 0) -> int:
    """1-based line of the nth line of `src` that contains `text`."""
    hits = [i + 1 for i, ln in enumerate(src.splitlines()) if text in ln]
    return hits[nth]


@pytest.fixture(scope="module")
def seed():
    return tilenb.compile(SEED, backend="cpu")


def compile1(src: str):
    """The one kernel of `src` (its first line is line 1 once the leading newline is dropped)."""
    mod = tilenb.compile(src.lstrip("\n"), backend="cpu")
    (k,) = mod.kernels.values()
    return k


# ---- the seed document's claims --------------------------------------------------------------
def test_rms_norm_lifetimes_reuse_and_barriers(seed):
    a = seed.rms_norm.analysis()
    x, ss, inv, g = (a.tile(n) for n in ("x", "ss", "inv", "g"))
    last = line_of(SEED, "Y[r :+ 8, :] = x * inv * g")
    # x is 8 KB and lives to the last line
    assert (x.bytes, x.shape, x.space) == (8 * 1024, (8, 256), "shared")
    assert x.last_line == last
    # ss is last used when inv is computed, so g takes its bytes
    assert ss.last_line == line_of(SEED, "var inv: tile<f32>[8, 1]")
    assert g.offset == ss.offset
    assert a.lifetimes.footprint == 8192 + 32 + 1024   # x, inv and g alive at once; ss shares g's bytes
    # the kernel's shared memory: those tiles, and the partials of the CTA-wide rowsum (8 rows x 8 warps, f32)
    assert a.footprint == 8192 + 32 + 1024 + 8 * 8 * 4
    # a barrier precedes the rowsum: it reads elements of x that other threads copied
    rowsum = line_of(SEED, "rowsum(x * x)")
    before_rowsum = [b for b in a.barriers if b.line == rowsum]
    assert len(before_rowsum) == 1 and before_rowsum[0].where == "before" and before_rowsum[0].tile == "x"
    assert "rowsum" in before_rowsum[0].reason
    # inv's elementwise pass reads ss with the same threads that wrote it: no barrier there
    assert not [b for b in a.barriers if b.line == ss.last_line]
    # the two elementwise passes over x (copy in, final store) are at the same vector width, so
    # no barrier ever names x after the rowsum
    assert [b.tile for b in a.barriers if b.line > rowsum and b.tile == "x"] == []
    load_x = [c for c in a.copies if c.tensor == "X"][0]
    store_y = [c for c in a.copies if c.tensor == "Y"][0]
    assert load_x.vector_width == store_y.vector_width == 4
    # g's copy reuses bytes ss's readers used, and the store broadcasts g over the rows: both
    # need a barrier, and that is all (3 in total)
    assert sorted((b.line, b.tile) for b in a.barriers) == [(rowsum, "x"), (line_of(SEED, "var g = G"), "g"),
                                                          (last, "g")]


def test_flash_attention_tiles_across_the_key_loop(seed):
    a = seed.flash_attention.analysis()
    kir = seed.flash_attention.ir()
    loop = [s for s in kir.body if isinstance(s, ir.For)][0]
    pos = {id(s): p for p, s in a.lifetimes.positions}
    lo = pos[id(loop)]
    hi = lo + sum(1 for _ in ir.walk_stmts(loop.body))
    for name in ("q", "acc", "m", "l"):
        t = a.tile(name)
        assert t.start < lo and t.end > hi or (t.start < lo and t.end >= hi), name
    for name in ("k", "v"):
        t = a.tile(name)
        assert lo < t.start and t.end <= hi, name
        assert loop.span.line < t.first_line <= t.last_line <= loop.span.end_line
    assert a.tile("q").first_line == line_of(SEED, "let q = Q[row :+ BR, :]")
    # q and k are let views read by dot_t: staged tiles, each made by a copy
    assert {c.tile for c in a.copies if c.direction == "load"} == {"q", "k", "v"}
    assert not any(c.is_view for c in a.copies)
    # tiles that live at once never share bytes
    _assert_no_overlap(a)


def test_gemm_loop_barriers_before_the_dot_and_at_the_end_of_the_turn(seed):
    a = seed.gemm.analysis()
    dot_line = line_of(SEED, "acc += dot(a, b)")
    assert [(b.line, b.where, b.carried) for b in a.barriers] == [(dot_line, "before", False),
                                                                 (dot_line, "after", True)]
    assert "from one turn to the next" in a.barriers[1].reason
    # the let view c_old is read where it is used, by the store's threads, with no tile made
    view = [c for c in a.copies if c.is_view]
    assert len(view) == 1 and view[0].tile == "c_old" and view[0].tensor == "C"
    assert view[0].line == line_of(SEED, "= acc + beta * c_old")
    assert view[0].wavefronts == view[0].ideal_wavefronts == 0


def test_analysis_json_shape_and_size(seed):
    for k in seed.kernels.values():
        d = k.analysis().to_json()
        json.dumps(d)
        assert set(d) == {"kernel", "threads", "footprint", "budget", "target", "tiles", "ruler", "regions", "smem",
                          "loops", "barriers", "waits", "copies", "shared_traffic", "traffic", "dot_reads", "masks"}
        for r in d["regions"]:
            assert set(r) == {"name", "kind", "offset", "bytes", "lines", "spans", "space", "what"}
        for lp in d["loops"]:
            assert set(lp) == {"line", "position", "lowering", "why"}
        for t in d["tiles"]:
            assert set(t) == {"name", "dtype", "shape", "bytes", "offset", "space", "first_line", "last_line"}
        for b in d["barriers"]:
            assert set(b) == {"line", "position", "where", "tile", "reason"}
            assert isinstance(b["position"], int) and b["where"] in ("before", "after", "within")
        for c in d["copies"]:
            assert {"line", "direction", "tensor", "tile", "shape", "vector_width", "runs", "sectors",
                    "ideal_sectors", "wavefronts", "ideal_wavefronts", "warps", "is_view"} <= set(c)
            for w in c["warps"]:
                assert set(w) == {"warp", "sectors", "ideal_sectors", "wavefronts", "ideal_wavefronts"}
        assert len(k.analysis().json_text()) < 64 * 1024


def test_analysis_is_cached_per_ir_and_takes_extents(seed):
    kir = seed.gemm.ir()
    assert analyze(kir) is analyze(kir)
    assert seed.gemm.analysis() is analyze(kir)
    other = analyze(kir, extents={"K": 1028, "N": 1028})
    assert other is not analyze(kir)
    assert dict(other.extents)["K"] == 1028
    with pytest.raises(TypeError):
        analyze("not ir")


def test_ruler_lists_tiles_alive_at_each_statement_line(seed):
    a = seed.rms_norm.analysis()
    rows = {r.line: [t.name for t in r.tiles] for r in a.ruler}
    assert rows[line_of(SEED, "let r = ctx.block.x * 8")] == []
    assert sorted(rows[line_of(SEED, "var inv: tile")]) == ["inv", "ss", "x"]
    assert sorted(rows[line_of(SEED, "var g = G")]) == ["g", "inv", "x"]


# ---- copies: figures worked out by hand ------------------------------------------------------
def test_one_warp_reading_128_contiguous_f32():
    # 32 threads, 16-byte vectors: one request of 32 x 16 B = 512 contiguous bytes = 16 sectors
    # (four 128-byte lines, 4 sectors each); 4 phases of 8 lanes, 128 B each: 4 wavefronts.
    k = compile1("""
@launch(32)
kernel k(X: tensor<f32>[M, 128], Y: tensor<f32>[M, 128]) {
  var x = X[ctx.block.x :+ 1, :]
  Y[ctx.block.x :+ 1, :] = x
}""")
    c = k.analysis().copies[0]
    assert (c.vector_width, c.sectors, c.ideal_sectors, c.wavefronts, c.ideal_wavefronts) == (4, 16, 16, 4, 4)
    assert [tuple(r) for r in c.runs[:2]] == [(0, 0, 0, 4), (1, 0, 4, 4)]


def test_column_write_of_a_tile_reads_the_tensor_in_vectors_and_is_swizzled():
    # a column of a shared tile is written element by element, but the tensor side still moves
    # 4-element vectors: 8 lanes x 16 B = 128 B = 4 sectors, the ideal. The tile t is written
    # along a column, so it is swizzled (16-byte units XOR row bits 2-4): lane m writes rows
    # 4m .. 4m + 3 of column 0, one element position at a time; rows 4m + v of the 8 lanes land
    # in units m ^ 0 = 8 different banks: 1 wavefront for each of the 4 positions, the ideal
    # (row-major, all 8 would hit bank 0: 8 wavefronts a position).
    k = compile1("""
@launch(32)
kernel k(X: tensor<f32>[M, 32], Y: tensor<f32>[M, 32]) {
  var t: tile<f32>[32, 32] = 0.0
  t[:, 0] = X[ctx.block.x, 0 :+ 32]
  Y[ctx.block.x * 32 :+ 32, :] = t
}""")
    c = [c for c in k.analysis().copies if c.tensor == "X"][0]
    assert (c.vector_width, c.sectors, c.ideal_sectors) == (4, 4, 4)
    assert (c.swizzle.bits, c.swizzle.base, c.swizzle.base + c.swizzle.shift) == (3, 2, 7)
    assert (c.wavefronts, c.ideal_wavefronts, c.fix) == (4, 4, None)


def test_misaligned_start_costs_a_sector_per_request():
    # the start ctx.block.x * 2 + 1 is odd: 1-element accesses, 4 requests of 128 B; in the worst
    # case each starts 4 bytes into a sector and touches 5 sectors: 20 against 16.
    k = compile1("""
@launch(32)
kernel k(X: tensor<f32>[1, N], Y: tensor<f32>[1, 128]) {
  var x = X[0 :+ 1, ctx.block.x * 2 + 1 :+ 128]
  Y[0 :+ 1, :] = x
}""")
    c = [c for c in k.analysis().copies if c.tensor == "X"][0]
    assert c.vector_width == 1
    assert (c.sectors, c.ideal_sectors) == (20, 16)
    assert len(c.runs) == 128 and c.worst_start_byte % 4 == 0 and c.worst_start_byte != 0


def test_column_read_of_32x32_f32_tile_is_a_32_way_conflict():
    k = compile1("""
@launch(32)
kernel k(X: tensor<f32>[M, 32], Y: tensor<f32>[M, 32]) {
  var t = X[ctx.block.x * 32 :+ 32, :]
  Y[0 :+ 32, ctx.block.x] = t[:, 5]
  Y[0 :+ 32, ctx.block.x * 32 :+ 32] = transpose(t)
}""")
    col, tr = [c for c in k.analysis().copies if c.direction == "store"]
    # row-major, the column would be lanes 0..31 reading words 5, 37, 69, ...: all in bank 5, 32
    # wavefronts. t is swizzled (read along columns): 16-byte units XOR row bits 2-4, so rows l
    # of column 5 lie in banks 4 * (1 ^ ((l >> 2) & 7)) + 1: 8 banks, 4 lanes each: 4 wavefronts
    assert (col.swizzle.bits, col.swizzle.base, col.swizzle.base + col.swizzle.shift) == (3, 2, 7)
    assert (col.wavefronts, col.ideal_wavefronts) == (4, 1)
    assert (col.sectors, col.ideal_sectors) == (32, 4)     # one sector per row of Y
    # padding rows to 33 elements would reach 1, at the cost of the tile's 16-byte vectors
    assert (col.fix.kind, col.fix.row_length, col.fix.wavefronts, col.fix.keeps_vectors) == ("pad", 33, 1, False)
    # the transpose stores 4-element vectors into Y (a transposed tile is read element by element,
    # which asks nothing of the vector width): 8 requests of 4 element positions; lane l reads
    # rows 4 (l % 8) + v of column l // 8: with the swizzle, 8 units x 4 columns = 32 banks, 1
    # wavefront each, the ideal (row-major: 4 banks, 8 wavefronts each)
    assert (tr.vector_width, tr.wavefronts, tr.ideal_wavefronts, tr.fix) == (4, 32, 32, None)


def test_wavefront_and_sector_model_by_hand():
    lanes = np.arange(32)
    req = np.zeros(32, dtype=np.int64)
    # 4-byte accesses, stride 2 words: banks 0, 2, ..., 30 twice each: 2-way conflict
    assert L.wavefronts_per_request(req, lanes, lanes * 8, 4).tolist() == [2]
    # same address for every lane: a broadcast, 1 wavefront
    assert L.wavefronts_per_request(req, lanes, np.zeros(32, dtype=np.int64), 4).tolist() == [1]
    # 16-byte accesses, contiguous: 4 phases of 128 B, 1 wavefront each
    assert L.wavefronts_per_request(req, lanes, lanes * 16, 16).tolist() == [4]
    # 8-byte accesses at stride 256 B: in each half-warp all 16 lanes use banks 0-1: 16 + 16
    assert L.wavefronts_per_request(req, lanes, lanes * 256, 8).tolist() == [32]
    # sectors: 32 x 4 B contiguous from byte 0 -> 4; from byte 16 -> 5
    assert L.sectors_per_request(req, lanes * 4, 4).tolist() == [4]
    assert L.sectors_per_request(req, 16 + lanes * 4, 4).tolist() == [5]


# ---- the partition, layouts, divisibility ---------------------------------------------------
def test_partition_rule():
    ch = P.chunks((3, 8), 4, 4)
    # chunk k: row k // 2, col (k % 2) * 4, thread k % 4, step k // 4
    assert ch.row.tolist() == [0, 0, 1, 1, 2, 2]
    assert ch.col.tolist() == [0, 4, 0, 4, 0, 4]
    assert ch.thread.tolist() == [0, 1, 2, 3, 0, 1]
    assert ch.step.tolist() == [0, 0, 0, 0, 1, 1]
    assert P.thread_chunks((3, 8), 4, 4, 1) == [(0, 4), (2, 4)]
    own = P.owners((3, 8), 4, 4)
    assert own[2, 5] == 1 and own[1, 3] == 2
    assert P.vector_width(12, [(4, 0)]) == 4
    assert P.vector_width(6, [(4, 0)]) == 2
    assert P.vector_width(64, [(2, 4)]) == 4          # f16, but only 4-element alignment provable
    assert P.vector_width(64, [(1, 0)]) == 16
    assert P.vector_width(64, [(4, 0), (4, 1)]) == 1   # a column access forces scalars
    with pytest.raises(ValueError):
        P.chunks((2, 6), 4, 32)


def test_layout_algebra():
    a = L.row_major((64, 32))                 # a tensor [64, 32]
    s = a.slice((8, 4), (16, 8))              # A[8 :+ 16, 4 :+ 8]
    assert s(0, 0) == 8 * 32 + 4 and s(1, 2) == 9 * 32 + 6
    row = s.select(0, 3)                      # A[11, 4 :+ 8]
    assert row.shape == (8,) and row(0) == 11 * 32 + 4
    t = L.row_major((4, 8)).transpose()
    assert t.shape == (8, 4) and t(2, 3) == 3 * 8 + 2
    assert L.row_major((4, 8)).flat()(0, 13) == 13
    col = L.row_major((8, 1))
    b = col.compose_map((8, 16), (0, None))   # [8, 1] broadcast over [8, 16]
    assert b.stride == (1, 0) and b(5, 9) == 5
    assert L.row_major((4, 8), pad=1).stride == (9, 1)
    assert (a.offsets() == np.arange(64 * 32).reshape(64, 32)).all()
    sw = L.Swizzle(5, 0, 5)
    offs = np.arange(32 * 32)
    assert (sw(sw(offs)) == offs).all() and sorted(sw(offs).tolist()) == offs.tolist()
    assert len({int(sw(r * 32 + 3)) % 32 for r in range(32)}) == 32    # a column over 32 banks
    with pytest.raises(ValueError):
        a.slice((60, 0), (8, 32))


def test_divisibility_of_index_expressions():
    k = compile1("""
@launch(64)
kernel k(X: tensor<f32>[M, K], Y: tensor<f32>[M, 20]) {
  let r = ctx.block.x * 32
  var i: i32 = 8
  i += 24
  for kt in range(0, K, 16) {
    var a = X[r :+ 16, kt :+ 16]
    Y[r + 3 :+ 16, 0 :+ 16] = a
    Y[r :+ 16, 3 :+ 16] = a
  }
  Y[i :+ 1, 0 :+ 16] = X[r + M :+ 1, 0 :+ 16]
}""")
    kir = k.ir()
    d = Divisibility(kir)
    lets = {s.sym.name: s for s in ir.walk_stmts(kir.body) if isinstance(s, ir.Let)}
    loop = [s for s in ir.walk_stmts(kir.body) if isinstance(s, ir.For)][0]
    assert d.of(lets["r"].value) == 32
    assert d.sym_div[id(loop.var)] == 16
    assigns = [s for s in ir.walk_stmts(kir.body) if isinstance(s, ir.Assign)]
    var_i = [s for s in ir.walk_stmts(kir.body) if isinstance(s, ir.VarDecl) and s.sym.name == "i"][0]
    assert d.sym_div[id(var_i.sym)] == 8
    a = k.analysis()
    vw = {c.line: c.vector_width for c in a.copies}
    src = k.module.source
    assert vw[line_of(src, "var a = X")] == 4            # kt % 16 == 0, K % 4 == 0
    assert vw[line_of(src, "Y[r + 3")] == 4              # (r + 3) * 20 is a multiple of 4
    assert vw[line_of(src, "Y[r :+ 16, 3")] == 1         # r * 20 + 3 is odd
    assert vw[line_of(src, "Y[i :+ 1")] == 4             # i * 20 and (r + M) * K: multiples of 4
    assert assigns


# ---- barriers: rules one by one ---------------------------------------------------------------
def test_in_place_softmax_needs_a_barrier_within_the_statement():
    k = compile1("""
@launch(128)
kernel softmax(X: tensor<f32>[M, 64], Y: tensor<f32>[M, 64]) {
  var p = X[ctx.block.x * 16 :+ 16, :]
  p = exp(p - rowmax(p))
  p = p / rowsum(p)
  Y[ctx.block.x * 16 :+ 16, :] = p
}""")
    bars = [(b.line, b.where) for b in k.analysis().barriers]
    assert bars == [(4, "before"), (4, "within"), (5, "before"), (5, "within")]


def test_same_width_elementwise_passes_need_no_barrier():
    k = compile1("""
@launch(64)
kernel k(X: tensor<f32>[M, 64], Y: tensor<f32>[M, 64]) {
  var x = X[ctx.block.x * 8 :+ 8, :]
  var y = x * 2.0
  x = y + x
  Y[ctx.block.x * 8 :+ 8, :] = x * y
}""")
    assert k.analysis().barriers == ()


def test_different_vector_widths_need_a_barrier():
    # x is copied in 4 elements at a time; the store's start ctx.block.x * 8 + 1 only allows
    # scalars, so the elements of x change threads
    k = compile1("""
@launch(64)
kernel k(X: tensor<f32>[M, 64], Y: tensor<f32>[M, 65]) {
  var x = X[ctx.block.x * 8 :+ 8, :]
  Y[ctx.block.x * 8 :+ 8, 1 :+ 64] = x
}""")
    (b,) = k.analysis().barriers
    assert (b.line, b.where, b.tile) == (4, "before", "x")
    assert "vector width changes from 4 to 1" in b.reason


def test_per_thread_writes_then_tile_statement_and_user_barrier():
    k = compile1("""
@launch(64)
kernel k(X: tensor<f32>[N], Y: tensor<f32>[N]) {
  var t = X[0 :+ 64]
  if ctx.thread < 10 {
    t[ctx.thread] = t[ctx.thread + 1] * 2.0
  }
  var s: tile<f32>[1] = rowsum(t)
  Y[0 :+ 64] = t
}""")
    a = k.analysis()
    # the per-thread access inside the varying if gets its barrier before the if itself
    assert [(b.line, b.where) for b in a.barriers] == [(4, "before"), (7, "before")]
    k2 = compile1("""
@launch(64)
kernel k(X: tensor<f32>[N], Y: tensor<f32>[N]) {
  var t: tile<f32>[64] = 0.0
  barrier()
  t[ctx.thread] = 1.0
  barrier()
  Y[0 :+ 64] = t
}""")
    assert k2.analysis().barriers == ()


def test_reused_bytes_in_a_loop_get_a_barrier_at_the_end_of_the_turn():
    k = compile1("""
@launch(64)
kernel k(X: tensor<f32>[M, 64], Y: tensor<f32>[M, 1]) {
  for i in range(0, M, 8) {
    var x = X[i :+ 8, :]
    var s: tile<f32>[8, 1] = rowsum(x)
    Y[i :+ 8, :] = s
  }
}""")
    a = k.analysis()
    assert [(b.line, b.where, b.tile) for b in a.barriers] == [(5, "before", "x"), (6, "after", "x")]
    assert a.barriers[1].carried


def test_while_condition_keeps_its_tile_alive_across_the_loop():
    # lim is only read by the condition, which runs again after every turn: it must outlive z
    k = compile1("""
@launch(32)
kernel k(Y: tensor<f32>[1, 32]) {
  var lim: tile<i32>[1, 1] = 3
  var y: tile<f32>[1, 32] = 0.0
  var i: i32 = 0
  while i < lim[0, 0] {
    var z: tile<f32>[1, 32] = y * 2.0
    y = z + 1.0
    i += 1
  }
  Y[0 :+ 1, :] = y
}""")
    a = k.analysis()
    lim, z = a.tile("lim"), a.tile("z")
    assert lim.last_line == 9 and lim.end >= z.end
    _assert_no_overlap(a)


def test_gemm_accumulator_in_registers_unless_another_use_needs_other_threads():
    src = """
@launch(128)
kernel k(A: tensor<f16>[M, K], B: tensor<f16>[K, N], C: tensor<f32>[M, N], S: tensor<f32>[M, 1]) {
  var acc: tile<f32>[64, 64] = 0.0
  for kt in range(0, K, 32) {
    var a = A[ctx.block.x * 64 :+ 64, kt :+ 32]
    var b = B[kt :+ 32, ctx.block.y * 64 :+ 64]
    acc += dot(a, b)
  }
  C[ctx.block.x * 64 :+ 64, ctx.block.y * 64 :+ 64] = acc * 2.0
  EXTRA
}"""
    a = compile1(src.replace("EXTRA", "")).analysis()
    assert a.tile("acc").space == "registers" and a.tile("acc").bytes == 0
    assert a.footprint == 64 * 32 * 2 + 32 * 64 * 2
    b = compile1(src.replace("EXTRA", "S[ctx.block.x * 64 :+ 64, :] = rowsum(acc)")).analysis()
    assert b.tile("acc").space == "shared"


def _assert_no_overlap(a):
    sh = [t for t in a.tiles if t.space == "shared"]
    for i, x in enumerate(sh):
        for y in sh[i + 1:]:
            if x.start <= y.end and y.start <= x.end:
                assert x.offset + x.bytes <= y.offset or y.offset + y.bytes <= x.offset, (x.name, y.name)


def test_statements_touching_a_register_tile_share_one_vector_width():
    # the store's start column 1 only allows scalars; acc is held in registers by one partition
    # for its whole life, so its fill and its update take width 1 too, and x (copied in 4 at a
    # time) changes threads before the update: a barrier
    k = compile1("""
@registers(acc)
@launch(64)
kernel k(X: tensor<f32>[M, 64], Y: tensor<f32>[M, 65]) {
  var acc: tile<f32>[8, 64] = 0.0
  var x = X[ctx.block.x * 8 :+ 8, :]
  acc = acc + x
  Y[ctx.block.x * 8 :+ 8, 1 :+ 64] = acc
}""")
    a = k.analysis()
    assert a.tile("acc").space == "registers"
    widths = {sp.line: sp.vector_width for sp in a.statements if sp.kind == "tile"}
    assert widths == {4: 1, 5: 4, 6: 1, 7: 1}
    assert [(b.line, b.tile) for b in a.barriers] == [(6, "x")]


def test_only_row_length_dims_are_assumed_multiples_of_four():
    """The launch checks only row lengths (last dims) for multiples of 4; a leading runtime
    dimension such as M may be odd, so it proves no alignment."""
    import tilenb
    from tilenb import ir
    from tilenb.analysis.divisibility import Divisibility
    mod = tilenb.compile("""
kernel k(X: tensor<f32>[M, N], Y: tensor<f32>[M, N]) {
  let a = M
  let b = N
  Y[0, 0] = X[a, b]
}
""", backend="cpu")
    kir = mod.k.ir()
    div = Divisibility(kir)
    lets = {s.sym.name: s for s in ir.walk_stmts(kir.body) if isinstance(s, ir.Let)}
    assert div.of(lets["a"].value) == 1
    assert div.of(lets["b"].value) == 4
