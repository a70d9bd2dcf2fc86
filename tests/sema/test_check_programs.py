"""Whole programs of our own that exercise the language together, and what the checker makes of them.

Each program is one a user could plausibly write (a softmax, a layer norm, a stencil with a
halo, nibble unpacking, a block scan with barrier(), functions of both kinds, per-thread loops
with break). The property pinned: each checks without error, and the typed IR has the types,
shapes and statements the spec says it should. `PROGRAMS` lives in tests/support/programs.py:
it is also the seed corpus of the front-end fuzz test (tests/sema/test_fuzz_frontend.py) and
of the NVRTC and GPU runs.
"""
import pytest

import tilenb
from tilenb import ir
from support.programs import PROGRAMS


def _compile(name):
    return tilenb.compile(PROGRAMS[name], backend="cpu", filename=f"{name}.tile")


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_checks(name):
    mod = _compile(name)
    assert mod.kernels


def _stmts(kir, cls):
    return [s for s in ir.walk_stmts(kir.body) if isinstance(s, cls)]


def test_softmax_variants_and_shapes():
    k = _compile("softmax").softmax_rows
    assert k.tune_space == {"BLOCK": (128, 256)}
    for block in (128, 256):
        kir = k.ir(BLOCK=block)
        decls = {s.sym.name: s.sym.type for s in _stmts(kir, ir.VarDecl)}
        assert decls["x"] == ir.TileT("f32", (4, block))
        assert decls["m"] == ir.TileT("f32", (4, 1))
        assert decls["e"] == ir.TileT("f32", (4, block))
        assert kir.threads == 128 and len(kir.grid) == 1


def test_layernorm_computes_in_f32_and_stores_f16():
    kir = _compile("layernorm").layernorm.ir()
    decls = {s.sym.name: s.sym.type for s in _stmts(kir, ir.VarDecl)}
    assert decls["x"] == ir.TileT("f32", (2, 512))
    assert decls["mu"] == ir.TileT("f32", (2, 1))
    store = _stmts(kir, ir.Assign)[-1]
    assert isinstance(store.target, ir.Slice) and store.target.base.name == "Y"
    assert store.value.type == ir.TileT("f16", (2, 512))


def test_stencil_halo_slices():
    mod = _compile("stencil")
    kir = mod.laplace.ir()
    (u,) = [s for s in _stmts(kir, ir.VarDecl) if s.sym.name == "u"]
    assert u.sym.type == ir.TileT("f32", (10, 34))
    kir = mod.blur3.ir()
    (h,) = _stmts(kir, ir.Let)[1:]
    assert h.sym.kind == "view" and h.sym.type == ir.TileT("f32", (258,))


def test_nibbles_types():
    mod = _compile("nibbles")
    kir = mod.unpack_nibbles.ir()
    b = [s for s in _stmts(kir, ir.Let) if s.sym.name == "b"][0]
    assert b.sym.type == ir.ScalarT("i32")
    kir = mod.unpack_tile.ir()
    p = [s for s in _stmts(kir, ir.VarDecl) if s.sym.name == "p"][0]
    assert p.sym.type == ir.TileT("u8", (1, 64))


def test_scan_has_barriers_and_uniform_loop():
    kir = _compile("scan").block_scan.ir()
    assert len(_stmts(kir, ir.Barrier)) == 2
    (loop,) = _stmts(kir, ir.While)
    (branch,) = [s for s in loop.body if isinstance(s, ir.If)]
    # the loop runs under uniform control (off and src are uniform vars); the `if t >= off`
    # body runs under varying control, and both barriers under uniform control
    assert kir.uniformity[id(loop)] == ir.UNIFORM
    assert kir.uniformity[id(branch)] == ir.UNIFORM
    assert kir.uniformity[id(branch.then[0])] == ir.VARYING
    assert all(kir.uniformity[id(b)] == ir.UNIFORM for b in _stmts(kir, ir.Barrier))


def test_functions_inline_with_hygiene():
    kir = _compile("functions").act_and_scale.ir()
    # both calls of scale_rows_by inline a loop; the function's `tmp` is a var of its own,
    # distinct from the kernel's `let tmp = 3` that the first call passes as `times`.
    loops = _stmts(kir, ir.For)
    assert len(loops) == 2
    tmps = [s.sym for s in ir.walk_stmts(kir.body) if isinstance(s, (ir.Let, ir.VarDecl)) and s.sym.name == "tmp"]
    assert [t.kind for t in tmps] == ["let", "var", "var"]
    assert len({id(t) for t in tmps}) == 3
    assert isinstance(loops[0].hi, ir.Ref) and loops[0].hi.sym is tmps[0]
    # the aliased tile `t` is what the first call's body assigns
    t_sym = [s.sym for s in _stmts(kir, ir.VarDecl) if s.sym.name == "t"][0]
    assigns = [s for s in ir.walk_stmts(loops[0].body) if isinstance(s, ir.Assign)]
    assert assigns[0].target.sym is t_sym


def test_breaks_in_per_thread_loops():
    mod = _compile("breaks")
    assert len(_stmts(mod.first_above.ir(), ir.Break)) == 1
    kir = mod.count_until_zero.ir()
    assert len(_stmts(kir, ir.Break)) == 1 and len(_stmts(kir, ir.Continue)) == 1
    (loop,) = _stmts(mod.sum_positive.ir(), ir.For)
    assert loop.unroll == 4 and loop.step == 128


def test_gemm_dot_types():
    mod = _compile("gemm_f16")
    assert set(mod.hgemm.tune_space["TM"]) == {64, 128}
    kir = mod.hgemm.ir(TM=128)
    acc = [s for s in _stmts(kir, ir.Assign) if s.op == "+"][0]
    assert isinstance(acc.value, ir.Dot) and acc.value.type == ir.TileT("f32", (128, 64))
    kir = mod.qk_i8.ir()
    store = _stmts(kir, ir.Assign)[-1]
    assert isinstance(store.value, ir.Dot) and store.value.trans_b
    assert store.value.type == ir.TileT("i32", (32, 32))


def test_tiles_reuse_fits_without_dynshared():
    from tilenb.analysis.lifetimes import tile_lifetimes
    kir = _compile("tiles_reuse").phases.ir()
    lt = tile_lifetimes(kir)
    assert sum(t.bytes for t in lt.tiles) == 3 * 32768
    assert lt.footprint == 32768


def test_misc_statement_forms():
    kir = _compile("misc").misc.ir()
    ops = [s.op for s in _stmts(kir, ir.Assign) if s.op is not None]
    assert ops == ["+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>"]
    assert len(_stmts(kir, ir.Atomic)) == 2 and len(_stmts(kir, ir.Return)) == 1
    flag = [s for s in _stmts(kir, ir.Let) if s.sym.name == "flag"][0]
    assert flag.sym.type == ir.ScalarT("bool")
