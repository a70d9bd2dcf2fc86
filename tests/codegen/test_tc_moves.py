"""The tensor-core paths' 16-byte operand moves follow the analysis (issue 16): `analysis/tc_moves`
proves each move's alignment from the spec's rules (tensor bases 16-byte aligned, runtime row
lengths multiples of 4 elements) and divisibility, the lowering records it (`Stage.move` for the
mma.sync staging copies, `KernelLowering.moves` for a wgmma accumulator's 16-byte row stores),
and the generated CUDA tests an address at run time exactly where the record says the proof is
short. Checked for a GEMM and an attention kernel at a row length that is a multiple of 16 bytes
(264 bf16 elements: no test) and one that is not (260: 8 bytes proven, a test remains).
"""
import pytest

import tilenb

GEMM = """
@launch(256)
@grid(cdiv(M, 128), cdiv({N}, 128))
kernel g(A: tensor<bf16>[M, {N}], B: tensor<bf16>[{N}, {N}], C: tensor<bf16>[M, {N}]) {{
  let pm = ctx.block.x
  let pn = ctx.block.y
  var acc: tile<f32>[128, 128] = 0.0
  for kt in range(0, {N}, 64) {{
    let a = A[pm * 128 :+ 128, kt :+ 64]
    let b = B[kt :+ 64, pn * 128 :+ 128]
    acc += dot(a, b)
  }}
  C[pm * 128 :+ 128, pn * 128 :+ 128] = acc
}}
"""

ATTN = """
@launch(128)
@grid(cdiv(S, 64), H)
kernel at(Q: tensor<bf16>[H, S, 64], K: tensor<bf16>[H, Nk, {N}], V: tensor<bf16>[H, Nk, {N}],
          O: tensor<bf16>[H, S, 64], c: i32) {{
  let h = ctx.block.y
  let row = ctx.block.x * 64
  var q = Q[h, row :+ 64, :]
  var acc: tile<f32>[64, 64] = 0.0
  var m: tile<f32>[64, 1] = -1.0e30
  var l: tile<f32>[64, 1] = 0.0
  for kt in range(0, Nk, 64) {{
    var s: tile<f32>[64, 64] = dot_t(q, K[h, kt :+ 64, {C0} :+ 64])
    var m_new = max(m, rowmax(s) * 0.125)
    var p: tile<bf16>[64, 64] = exp(s * 0.125 - m_new)
    var rescale = exp(m - m_new)
    l = l * rescale + rowsum(p)
    acc = acc * rescale + dot(p, V[h, kt :+ 64, {C0} :+ 64])
    m = m_new
  }}
  O[h, row :+ 64, :] = acc / l
}}
"""
TEST16 = "& 15) == 0"


def _kernel(src, n, c0="0"):
    mod = tilenb.compile(src.format(N=n, C0=c0), backend="cpu", filename="k.tile")
    return next(iter(mod.kernels.values()))


@pytest.mark.parametrize("src", [GEMM, ATTN], ids=["gemm", "attention"])
@pytest.mark.parametrize("n,proved", [(264, 16), (260, 8)])
def test_mma_staging_moves_follow_the_analysis(src, n, proved):
    k = _kernel(src, n)
    low = k.analysis().lowering
    stages = [st for st in low.stages.values() if not st.ring]
    assert stages, "the dots' operands are staged by cp.async"
    moves = {st.move.tensor: st.move.proved for st in stages}
    assert all(p == proved for p in moves.values()), moves
    code = k.cuda_source()
    assert (TEST16 in code) == (proved < 16), moves
    # the views say it: the shared-memory map's staging regions name the moves
    says = [r.what for r in k.analysis().smem.regions if "16-byte moves of" in r.what]
    assert len(says) == len(stages) and all(("tested at run time" in w) == (proved < 16) for w in says), says


@pytest.mark.parametrize("n,proved", [(264, 16), (260, 8)])
def test_wgmma_store_rows_follow_the_analysis(n, proved):
    k = _kernel(GEMM, n)
    low = k.analysis(arch="sm_90").lowering
    assert low.gemm, "the loop is a wgmma GEMM on sm_90"
    (move,) = low.moves.values()
    assert move.tensor == "C" and move.proved == proved
    code = k.cuda_source(arch="sm_90")
    assert "16-byte rows" in code
    assert ("every row 16-byte aligned" in code and "const bool al" in code) == move.checked


@pytest.mark.parametrize("c0,proved", [("0", True), ("8", True), ("c", False), ("4", False)])
def test_streamed_tma_box_starts_follow_the_analysis(c0, proved):
    """On sm_90 the attention loop streams K and V by TMA; a box must start on a 16-byte boundary
    of the contiguous dimension: tested at run time (`(c0 & 7) == 0`) only where not proven."""
    k = _kernel(ATTN, 264, c0)
    low = k.analysis(arch="sm_90").lowering
    assert low.rings, "the loop streams its operands on sm_90"
    ops = [rop for ring in low.rings.values() for rop in ring.ops]
    assert ops and all(rop.col_aligned == proved for rop in ops)
    code = k.cuda_source(arch="sm_90")
    line = next(ln for ln in code.splitlines() if "each thread copies with bounds checks" in ln)
    assert ("& 7) == 0" in line) == (not proved), line
