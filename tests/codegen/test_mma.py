"""Tensor cores for every f16/bf16 dot (tilenb/codegen/mma/, tilenb/analysis/mma_tiles.py).

Flash attention as a user writes it (tilenb/examples/suite_kernels.py ATTENTION: dots inside larger
expressions), dots inside stores, row reductions and transposes, and a K loop written as an
expression with a K that is no multiple of the step, at shapes that are multiples of nothing:

- without a GPU: the generated CUDA compiles with NVRTC (PTX for compute_80, a cubin for sm_90);
  it says what it does (tiles on the mma row layout in registers, ldmatrix, cp.async double
  buffering, no per-element dot loop); and, where g++ is available, it runs on the CPU through
  tests/support/cuda_emulator.py (threads, warps, ldmatrix, mma.sync, deferred cp.async emulated) and
  agrees with the CPU executor, which defines the semantics;
- on a GPU (marked `gpu`): the same kernels against the CPU executor, every @autotune variant.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import tilenb
from tilenb.codegen import generate, nvrtc_available, nvrtc_compile

ROOT = Path(__file__).resolve().parents[2]
from tilenb.examples import suite_kernels as SK  # noqa: E402
from support import cuda_emulator as EMU  # noqa: E402
from support.cuda_emulator import needs_gxx  # noqa: E402

BF = ml_dtypes.bfloat16
needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="libnvrtc cannot be loaded")

DOTS = """
// bf16 dots inside expressions: at the store's coordinates (fragments, an odd number of 8-column
// blocks per warp), inside a row reduction and under a transpose (a shared scratch tile).
@launch(128)
@grid(cdiv(M, 64))
kernel dot_exprs(A: tensor<bf16>[M, 32], B: tensor<bf16>[32, 48], C: tensor<f32>[M, 48],
                 Y: tensor<f32>[M, 48], R: tensor<f32>[M, 1], T: tensor<f32>[48, M]) {
  let r = ctx.block.x * 64
  var a = A[r :+ 64, :]
  Y[r :+ 64, :] = dot(a, B[0 :+ 32, :]) * 0.5 + C[r :+ 64, :]
  R[r :+ 64, :] = rowsum(dot(a, B[0 :+ 32, :])) + 1.0
  T[0 :+ 48, r :+ 64] = transpose(dot(a, B[0 :+ 32, :]))
}
"""

KLOOP = """
// A K loop written as an expression (not +=), the same GEMM loop as `acc += dot_t(...)`: acc in
// registers on the warp grid, both operands tensor slices staged by cp.async (double-buffered
// across turns; on sm_90 the wgmma TMA pipeline); K, a row length,
// is no multiple of the step (the last step is masked) nor of 8 (rows not 16-byte aligned).
@launch(128)
@grid(cdiv(M, 64))
kernel kloop(A: tensor<f16>[M, K], B: tensor<f16>[N, K], Y: tensor<f16>[M, N]) {
  var acc: tile<f32>[64, 32] = 0.0
  for k0 in range(0, K, 32) {
    acc = acc + dot_t(A[ctx.block.x * 64 :+ 64, k0 :+ 32], B[0 :+ 32, k0 :+ 32])
  }
  Y[ctx.block.x * 64 :+ 64, 0 :+ 32] = acc
}
"""

ATTENTION_VARIANTS = [dict(BR=br, BC=bc, D=d, NT=nt) for d in (64, 128) for bc in (64, 128)
                      for br, nt in ((64, 128), (64, 256), (128, 128), (128, 256))]


def _attention_args(rng, H, N, Nk, D):
    q, k, v = (rng.standard_normal(shape).astype(BF) for shape in ((H, N, D), (H, Nk, D), (H, Nk, D)))
    return [q, k, v, np.full((H, N, D), np.nan, BF), 1.0 / math.sqrt(D)]


def _dots_args(rng, M):
    return [rng.standard_normal((M, 32)).astype(BF), rng.standard_normal((32, 48)).astype(BF),
            rng.standard_normal((M, 48)).astype(np.float32), np.full((M, 48), np.nan, np.float32),
            np.full((M, 1), np.nan, np.float32), np.full((48, M), np.nan, np.float32)]


def _kloop_args(rng, M, N, K):
    return [rng.standard_normal((M, K)).astype(np.float16), rng.standard_normal((N, K)).astype(np.float16),
            np.full((M, N), np.nan, np.float16)]


def _close(got, ref, rtol, atol, what):
    g, r = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    assert not np.isnan(g).any(), f"{what}: NaN in the output (an element not written)"
    np.testing.assert_allclose(g, r, rtol=rtol, atol=atol, err_msg=what)


def _mod(text, backend="cpu"):
    return tilenb.compile(text, backend=backend)


# ---- what the generated code does (no GPU) ----------------------------------------------------------
def test_attention_as_written_keeps_its_tiles_in_registers_on_the_mma_row_layout():
    k = _mod(SK.ATTENTION).attention_bf16
    an = k.analysis(BR=64, BC=64, D=64, NT=128)
    for name in ("q", "acc", "m", "l", "s", "m_new", "p", "rescale"):
        assert an.tile(name).space == "registers", name
    assert an.lifetimes.footprint == 0 and not an.barriers
    # the kernel's shared memory is the K and V slices' cp.async double buffers alone (rows of 64 + 8)
    assert an.footprint == 2 * 2 * 64 * (64 + 8) * 2
    assert [r.kind for r in an.smem.regions] == ["double buffer", "double buffer"]
    code = k.cuda_source(BR=64, BC=64, D=64, NT=128)
    body = code.split("#endif  // TILENB_PRELUDE")[1]
    for name in ("s", "p", "acc", "m", "l"):
        assert re.search(rf"tile {name} \(line \d+\): registers", code), name
    assert "tnb_ldsm_x4(" in body and "tnb_ldsm_x4_t(" in body        # K by ldmatrix, V by ldmatrix.trans
    assert "tnb_cp16u(" in body and "tnb_cp_wait<1>()" in body          # staged by cp.async, double-buffered
    assert "a from the registers of q" in body and "a from the registers of p" in body
    assert re.search(r"float dot\d+ = ", body) is None                   # no per-element dot on CUDA cores
    assert "__shfl_xor_sync(0xffffffffu, rr" in body                     # row statistics in the quad
    # the only barriers: one per staged operand and turn (K, V), and one each on the first turn
    assert body.count("__syncthreads()") == 4


def test_big_variants_keep_tiles_in_shared_memory_and_still_use_tensor_cores():
    k = _mod(SK.ATTENTION).attention_bf16
    an = k.analysis(BR=128, BC=64, D=128, NT=128)          # [128, 128] f32 per 4 warps: over the register budget
    # of the row layout: the row tiles stay in shared memory; acc, the accumulator of a GEMM loop
    # (`acc = acc * rescale + dot(p, V)`, spec section 12), is in registers on the 2-D warp grid
    assert [an.tile(n).space for n in ("s", "p", "m", "l")] == ["shared"] * 4
    assert an.tile("acc").space == "registers"
    body = k.cuda_source(BR=128, BC=64, D=128, NT=128).split("#endif  // TILENB_PRELUDE")[1]
    assert "tnb_mma_bf16(" in body and re.search(r"float dot\d+ = ", body) is None
    an = k.analysis(BR=128, BC=64, D=64, NT=128)           # q is given up first: read by ldmatrix each turn
    assert an.tile("q").space == "shared" and an.tile("s").space == "registers"


def test_dots_inside_expressions_use_tensor_cores_and_scratch_tiles():
    body = _mod(DOTS).dot_exprs.cuda_source().split("#endif  // TILENB_PRELUDE")[1]
    assert body.count("// tensor cores: mma.sync m16n8k16 bf16") == 3
    assert body.count("shared f32 scratch tile") == 2                    # rowsum(dot) and transpose(dot)
    assert "tnb_ldsm_x2_t(" in body                                      # 3 column blocks a warp: one x2
    assert re.search(r"float dot\d+ = ", body) is None


@needs_nvrtc
@pytest.mark.parametrize("arch", ["compute_80", "sm_90"])
def test_every_attention_and_dot_variant_compiles_with_nvrtc(arch):
    for text in (SK.ATTENTION, SK.ATTENTION_TC, DOTS, KLOOP):
        mod = _mod(text)
        for k in mod.kernels.values():
            for kir in k.checked.variants.values():
                nvrtc_compile(generate(kir, text).source, arch, use_cache=False)


# ---- the CUDA emulated on the CPU against the CPU executor -------------------------------------------
def _emulate(text, name, args, grid, dims, variant=None):
    mod = _mod(text)
    k = mod.kernels[name]
    kir = k.ir(**(variant or {}))
    EMU.run(generate(kir, text), args, dims, grid)
    return args


@needs_gxx
@pytest.mark.parametrize("variant", [dict(BR=64, BC=64, D=64, NT=128), dict(BR=128, BC=64, D=64, NT=128),
                                     dict(BR=64, BC=64, D=64, NT=256), dict(BR=128, BC=128, D=64, NT=256)],
                         ids=lambda v: "-".join(f"{a}{b}" for a, b in v.items()))
def test_emulated_attention_matches_the_cpu_executor(variant, tmp_path):
    rng = np.random.default_rng(1)
    H, N, Nk, D = 2, 77, 200, variant["D"]
    args = _attention_args(rng, H, N, Nk, D)
    cpu = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    _mod(SK.ATTENTION).attention_bf16(*cpu, variant=variant)
    _emulate(SK.ATTENTION, "attention_bf16", args, (-(-N // variant["BR"]), H), {"H": H, "N": N, "Nk": Nk}, variant)
    _close(args[3], cpu[3], 1.6e-2, 1.6e-2, f"attention {variant}")
    ref = SK.ref_attention(args[0], args[1], args[2], args[4])
    assert np.linalg.norm(args[3].astype(np.float64) - ref) / np.linalg.norm(ref) < 1e-2


@needs_gxx
@pytest.mark.parametrize("variant", [dict(BR=64, BC=64, D=64, NT=256), dict(BR=128, BC=64, D=64, NT=256)],
                         ids=lambda v: "-".join(f"{a}{b}" for a, b in v.items()))
def test_emulated_attention_with_let_views_matches_the_cpu_executor(variant, tmp_path):
    """`let k = K[h, kt :+ BC, :]` read only by a dot: the dot stages the view (double-buffered
    cp.async) and the let copies nothing (the view has no tile)."""
    kern = _mod(SK.ATTENTION_TC).attention_tc_bf16
    src = kern.cuda_source(**variant)
    assert "stages K[...] itself" in src and "stages V[...] itself" in src and "double-buffered staging scratch" in src
    assert "staged in shared memory: a dot reads this view" not in src
    assert not {"k", "v"} & {t.name for t in kern.analysis(**variant).lifetimes.tiles}
    rng = np.random.default_rng(7)
    H, N, Nk, D = 2, 77, 200, variant["D"]
    args = _attention_args(rng, H, N, Nk, D)
    cpu = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    _mod(SK.ATTENTION_TC).attention_tc_bf16(*cpu, variant=variant)
    _emulate(SK.ATTENTION_TC, "attention_tc_bf16", args, (-(-N // variant["BR"]), H), {"H": H, "N": N, "Nk": Nk},
             variant)
    _close(args[3], cpu[3], 1.6e-2, 1.6e-2, f"attention_tc {variant}")
    ref = SK.ref_attention(args[0], args[1], args[2], args[4])
    assert np.linalg.norm(args[3].astype(np.float64) - ref) / np.linalg.norm(ref) < 1e-2


@needs_gxx
def test_emulated_dots_in_expressions_match_the_cpu_executor():
    rng = np.random.default_rng(2)
    M = 148             # T's row length: a multiple of 4, of nothing else here
    args = _dots_args(rng, M)
    cpu = [a.copy() for a in args]
    _mod(DOTS).dot_exprs(*cpu)
    _emulate(DOTS, "dot_exprs", args, (3,), {"M": M})
    for got, ref, what in zip(args[3:], cpu[3:], ("Y", "R", "T")):
        _close(got, ref, 1e-4, 1e-4, what)


@needs_gxx
def test_emulated_k_loop_with_masked_last_step_matches_the_cpu_executor():
    rng = np.random.default_rng(3)
    M, N, K = 130, 24, 44
    args = _kloop_args(rng, M, N, K)
    cpu = [a.copy() for a in args]
    _mod(KLOOP).kloop(*cpu)
    _emulate(KLOOP, "kloop", args, (3,), {"M": M, "N": N, "K": K})
    _close(args[2], cpu[2], 2e-3, 2e-3, "Y")


def test_a_shared_tile_read_whole_by_dots_is_swizzled_for_ldmatrix():
    """q in shared memory (BR 128, BC 128): its rows are 256 bytes, so ldmatrix's eight rows of
    16 bytes would share banks; the analysis lays it out in two panels of 64 columns (128-byte
    rows) with 16-byte units XORed by the row's low three bits (the layout wgmma reads by
    descriptor), the copy into it and the dots' ldmatrix both apply that, and the emulated kernel
    still matches (test_emulated_attention_matches_the_cpu_executor, BR128-BC128)."""
    from tilenb.analysis import analyze
    from tilenb.analysis.copies import tile_swizzles
    from tilenb.analysis.layout import PanelSwizzle
    kir = _mod(SK.ATTENTION).attention_bf16.ir(BR=128, BC=128, D=128, NT=256)
    sw = {s.name: v for s in ir_syms(kir) for k, v in tile_swizzles(analyze(kir).statements, 256).items() if k == id(s)}
    assert isinstance(sw.get("q"), PanelSwizzle) and (sw["q"].rows, sw["q"].cols) == (128, 128)
    # element (r, c) -> panel c // 64, row r of 64 elements, 16-byte unit (c % 64) // 8 XOR r % 8
    p = sw["q"]
    for r, c in ((0, 0), (1, 0), (9, 70), (127, 127)):
        assert p(r * 128 + c) == (c // 64) * 128 * 64 + r * 64 + ((c % 64) ^ ((r % 8) * 8))
    src = _mod(SK.ATTENTION).attention_bf16.cuda_source(BR=128, BC=128, D=128, NT=256)
    assert "tile q (line" in src and "shared" in src.split("tile q (line")[1].split("\n")[0]
    assert "tnb_pswz(" in src.split("var q = Q[h, row :+ BR, :]")[1].split("// line")[0]  # the copy into q
    assert "tnb_ldsm_x4(" in src and "(tnb_pswz((la" in src                                # ldmatrix of q
    # a tile that a dot statement also reads otherwise keeps its row-major layout
    other = SK.ATTENTION.replace("dot_t(q, K[h, kt :+ BC, :])\n", "dot_t(q, K[h, kt :+ BC, :]) + q[0, 0]\n")
    assert other != SK.ATTENTION
    kir2 = _mod(other).attention_bf16.ir(BR=128, BC=128, D=128, NT=256)
    names = {id(s): s.name for s in ir_syms(kir2)}
    assert "q" not in {names.get(k) for k in tile_swizzles(analyze(kir2).statements, 256)}


def ir_syms(kir):
    from tilenb import ir as IR
    out = {}
    for s in IR.walk_stmts(kir.body):
        sym = getattr(s, "sym", None)
        if sym is not None:
            out[id(sym)] = sym
    return list(out.values())


SCALED_STORE = """
// Fragments divided by a per-row divisor held in registers, stored into a bf16 window whose
// column start c0 is a kernel argument (odd: the fragment pairs are not 4-byte aligned) and whose
// columns run past Y's last one (c0 = 5: the last pair half outside).
@launch(128)
@grid(cdiv(M, 64))
kernel scaled_store(A: tensor<bf16>[M, 32], B: tensor<bf16>[32, 32], L: tensor<f32>[M, 1],
                    Y: tensor<bf16>[M, N], c0: i32) {
  let r = ctx.block.x * 64
  var acc: tile<f32>[64, 32] = dot(A[r :+ 64, :], B[0 :+ 32, :])
  var l: tile<f32>[64, 1] = rowmax(acc) * 0.0 + L[r :+ 64, :]
  Y[r :+ 64, c0 :+ 32] = acc / l
}
"""


def test_fragment_store_divides_by_a_row_reciprocal_and_stores_pairs():
    src = _mod(SCALED_STORE).scaled_store.cuda_source()
    store = src[src.index(": Y[r :+ 64, c0 :+ 32] = acc / l"):]
    assert "tnb_rcp_ok" in store and "1.0f / " in store      # one reciprocal a row, checked
    assert "*(unsigned*)" in store and "tnb_pack_b2(" in store  # a pair as one 4-byte store
    assert "& 3ull) == 0" in store                            # only where 4-byte aligned


@needs_gxx
@pytest.mark.parametrize("c0", [0, 1, 5])
def test_emulated_fragment_store_with_row_divisors_matches_the_cpu_executor(c0):
    """Even and odd column starts; divisors that are ordinary, 0 (inf and nan), negative, and
    subnormal (1 / d overflows: the rows of that warp take x / d)."""
    rng = np.random.default_rng(11 + c0)
    M, N = 150, 36
    L = rng.uniform(0.5, 4.0, (M, 1)).astype(np.float32)
    L[3] = 0.0
    L[70] = -2.5
    L[140] = 1e-39          # subnormal: tnb_rcp_ok is false for it
    args = [rng.standard_normal((M, 32)).astype(BF), rng.standard_normal((32, 32)).astype(BF), L,
            np.full((M, N), 7.0, BF), c0]
    cpu = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    _mod(SCALED_STORE).scaled_store(*cpu)
    _emulate(SCALED_STORE, "scaled_store", args, (3,), {"M": M, "N": N})
    got, ref = args[3].astype(np.float64), cpu[3].astype(np.float64)
    assert (got[:, :c0] == 7.0).all(), "a column left of the window was written"
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))
    fin = np.isfinite(ref)
    np.testing.assert_allclose(got[fin], ref[fin], rtol=2 ** -7, atol=1e-30)


@needs_gxx
@pytest.mark.parametrize("c", [0, 1])
def test_emulated_attention_with_q_at_a_column_offset_matches_the_cpu_executor(c):
    """q, a register tile of fragment pairs, read from Q at column c of rows of D + 4: at c = 0
    each pair is one 4-byte load; at c = 1 no pair is 4-byte aligned (element by element)."""
    text = SK.ATTENTION.replace("Q: tensor<bf16>[H, N, D]", "Q: tensor<bf16>[H, N, DQ]") \
                       .replace("var q = Q[h, row :+ BR, :]", "var q = Q[h, row :+ BR, c0 :+ D]") \
                       .replace("O: tensor<bf16>[H, N, D], scale: f32)", "O: tensor<bf16>[H, N, D], scale: f32, c0: i32)")
    variant = dict(BR=128, BC=64, D=64, NT=256)
    assert "the pair as one 4-byte load" in _mod(text).attention_bf16.cuda_source(**variant)
    rng = np.random.default_rng(5)
    H, N, Nk, D = 2, 77, 136, 64
    args = _attention_args(rng, H, N, Nk, D)
    args[0] = rng.standard_normal((H, N, D + 4)).astype(BF)
    args.append(c)
    cpu = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    _mod(text).attention_bf16(*cpu, variant=variant)
    _emulate(text, "attention_bf16", args, (-(-N // 128), H), {"H": H, "N": N, "Nk": Nk, "DQ": D + 4}, variant)
    _close(args[3], cpu[3], 1.6e-2, 1.6e-2, f"attention with q at column {c}")
    ref = SK.ref_attention(np.ascontiguousarray(args[0][:, :, c:c + D]), args[1], args[2], args[4])
    assert np.linalg.norm(args[3].astype(np.float64) - ref) / np.linalg.norm(ref) < 1e-2


# ---- on the GPU against the CPU executor ------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(2, 77, 200), (1, 200, 77), (1, 64, 64)], ids=lambda s: "x".join(map(str, s)))
def test_gpu_attention_every_variant_matches_the_cpu_executor(shape):
    H, N, Nk = shape
    gpu_mod, cpu_mod = _mod(SK.ATTENTION, "cuda"), _mod(SK.ATTENTION)
    skipped = cpu_mod.attention_bf16.checked.skipped    # variants no GPU can hold (the checker says why)
    for variant in ATTENTION_VARIANTS:
        if tuple(sorted(variant.items())) in skipped:
            continue
        rng = np.random.default_rng(4)
        args = _attention_args(rng, H, N, Nk, variant["D"])
        cpu = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        cpu_mod.attention_bf16(*cpu, variant=variant)
        try:
            gpu_mod.attention_bf16(*args, variant=variant)
        except tilenb.LaunchError as e:   # a variant over this device's shared memory per CTA
            assert "cannot run on this GPU" in str(e), e
            continue
        assert gpu_mod.attention_bf16.last_run.backend == "cuda"
        _close(args[3], cpu[3], 1.6e-2, 1.6e-2, f"attention {shape} {variant}")


@pytest.mark.gpu
def test_gpu_attention_tc_matches_the_cpu_executor():
    gpu_mod, cpu_mod = _mod(SK.ATTENTION_TC, "cuda"), _mod(SK.ATTENTION_TC)
    for variant in (dict(BR=64, D=64), dict(BR=128, D=64), dict(BR=128, D=128)):
        rng = np.random.default_rng(5)
        args = _attention_args(rng, 2, 77, 200, variant["D"])
        cpu = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        cpu_mod.attention_tc_bf16(*cpu, variant=variant)
        gpu_mod.attention_tc_bf16(*args, variant=variant)
        _close(args[3], cpu[3], 1.6e-2, 1.6e-2, f"attention_tc {variant}")


@pytest.mark.gpu
def test_gpu_dots_in_expressions_and_k_loop_match_the_cpu_executor():
    rng = np.random.default_rng(6)
    args = _dots_args(rng, 148)
    cpu = [a.copy() for a in args]
    _mod(DOTS).dot_exprs(*cpu)
    _mod(DOTS, "cuda").dot_exprs(*args)
    for got, ref, what in zip(args[3:], cpu[3:], ("Y", "R", "T")):
        _close(got, ref, 1e-4, 1e-4, what)
    args = _kloop_args(rng, 130, 24, 44)
    cpu = [a.copy() for a in args]
    _mod(KLOOP).kloop(*cpu)
    _mod(KLOOP, "cuda").kloop(*args)
    _close(args[2], cpu[2], 2e-3, 2e-3, "kloop Y")
