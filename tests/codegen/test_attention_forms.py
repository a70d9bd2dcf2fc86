"""Flash attention in its two written forms is one program to the code generator (issue 19).

`suite_kernels.ATTENTION` computes each dot inside a larger expression, on slices written in the
dot (`acc = acc * rescale + dot(p, V[h, kt :+ BC, :])`); `suite_kernels.ATTENTION_TC` writes each
dot as a statement of its own (`let k = K[...]`, `var s = dot_t(q, k)`, `acc = acc * rescale`
then `acc += dot(p, v)`), with the same arithmetic and @autotune space. The analysis treats a
`let` view only tensor-core dots read as the slice written in the dot
(`mma_tiles.dot_staged_views`, `KernelLowering.inline_views`) and a rescale followed by an
accumulated dot as one statement (`lowering._Lower.fold_pairs`), so a user need not know which
form the generator prefers.

Checked without a GPU:
- in every variant of the space, for sm_90 (streamed on wgmma where the variant allows, else
  mma.sync), sm_80 and any GPU, both forms take the same lowering for the same reasons
  (`Analysis.loops`) and the generated CUDA is the same up to the names of symbols and
  temporaries (`same_up_to_names`, which does tell different programs apart: the natural-base
  form differs);
- other forms written naturally (`let` for `var`, `acc *= rescale`, one slice inline and one
  view) give the same CUDA; a `var` copy of the slices stays on mma.sync, and the view says why;
- both forms on the CPU executor agree with numpy (float64) and with each other, at sequence
  lengths that are not multiples of the tiles; NVRTC compiles the view form for sm_90a.
On a GPU (marked `gpu`): both forms against numpy at the same shapes, and bit for bit against
each other where their CUDA is the same.
"""
from __future__ import annotations

import itertools
import math
import re

import ml_dtypes
import numpy as np
import pytest

import tilenb
from tilenb.codegen.nvrtc import nvrtc_available, nvrtc_compile
from tilenb.examples import suite_kernels as SK

BF16 = ml_dtypes.bfloat16
STREAMED = "streamed attention on wgmma"
needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="needs NVRTC")

_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")


def same_up_to_names(src: str) -> str:
    """A generated CUDA source with its comments and blank lines dropped and every name the
    kernel body makes up (a symbol's `name_uid`, a temporary `prefixN`: any identifier with a
    digit that the helper functions before the kernel do not define) renamed `vN` in the order of
    its first appearance. Two sources with equal results are the same program, statement for
    statement, up to a renaming of the kernel's own variables."""
    src = re.sub(r"//[^\n]*", "", src)
    at = src.index('extern "C" __global__')
    prelude, body = src[:at], src[at:]
    known = set(_IDENT.findall(prelude))
    names = {}

    def rename(m):
        w = m.group(0)
        if w in known or not any(c.isdigit() for c in w):
            return w
        return names.setdefault(w, f"v{len(names)}")
    body = _IDENT.sub(rename, body)
    return "\n".join(line.rstrip() for line in (prelude + body).splitlines() if line.strip())


def _lines_out(text: str) -> str:
    return re.sub(r"\blines? [\d, ]+", "line(s) N", text)


def _kernels():
    return tilenb.compile(SK.ATTENTION).attention_bf16, tilenb.compile(SK.ATTENTION_TC).attention_tc_bf16


SPACE = [dict(BR=br, BC=bc, D=d, NT=nt) for br, bc, d, nt in itertools.product((64, 128), (64, 128), (64, 128), (128, 256))]


def _label(v):
    return "BR{BR}_BC{BC}_D{D}_NT{NT}".format(**v)


def test_both_forms_have_one_autotune_space():
    written, statements = _kernels()
    assert written.tune_space == statements.tune_space


@pytest.mark.parametrize("tune", SPACE, ids=_label)
def test_both_forms_take_one_path_and_are_the_same_cuda(tune):
    written, statements = _kernels()
    for arch in ("sm_90", "sm_80", None):
        a, b = written.analysis(arch=arch, **tune), statements.analysis(arch=arch, **tune)
        assert [(lp.lowering, _lines_out(lp.why)) for lp in a.loops] == \
            [(lp.lowering, _lines_out(lp.why)) for lp in b.loops], arch
        ca, cb = written.cuda_source(arch=arch, **tune), statements.cuda_source(arch=arch, **tune)
        if arch == "sm_90" and a.loops[0].lowering == STREAMED:
            assert "tnb_wgmma_rs_bf16" in ca and "tnb_tma_3d" in ca
        assert same_up_to_names(ca) == same_up_to_names(cb), arch


def test_the_benchmarks_variants_stream_in_both_forms():
    """The suite's winners at head dim 64 and 128 (docs/benchmarks.md) are streamed variants."""
    for k in _kernels():
        for d in (64, 128):
            assert k.analysis(arch="sm_90", BR=128, BC=64, D=d, NT=256).loops[0].lowering == STREAMED, (k.name, d)


def test_the_normal_form_tells_programs_apart():
    """Different arithmetic (natural base, the scale after the dot) is a different program."""
    natural = (SK.ATTENTION.replace("dot_t(q, K[h, kt :+ BC, :])", "dot_t(q, K[h, kt :+ BC, :]) * scale")
               .replace("rowmax(s) * qs", "rowmax(s)").replace("exp2(s * qs - m_new)", "exp(s - m_new)")
               .replace("exp2(m - m_new)", "exp(m - m_new)"))
    tune = dict(BR=128, BC=64, D=64, NT=256)
    k = tilenb.compile(natural).attention_bf16
    assert k.analysis(arch="sm_90", **tune).loops[0].lowering == STREAMED
    assert same_up_to_names(k.cuda_source(arch="sm_90", **tune)) != \
        same_up_to_names(_kernels()[0].cuda_source(arch="sm_90", **tune))


NATURAL = {
    "let for var": lambda t: (t.replace("var s: tile", "let s: tile").replace("var p: tile", "let p: tile")
                              .replace("var m_new", "let m_new").replace("var rescale", "let rescale")),
    "acc *= rescale": lambda t: t.replace("acc = acc * rescale\n", "acc *= rescale\n"),
    "acc = acc + dot": lambda t: t.replace("acc += dot(p, v)", "acc = acc + dot(p, v)"),
    "K inline, V a view": lambda t: t.replace("    let k = K[h, kt :+ BC, :]\n", "")
                                     .replace("dot_t(q, k)", "dot_t(q, K[h, kt :+ BC, :])"),
}


@pytest.mark.parametrize("form", sorted(NATURAL))
def test_other_natural_forms_give_the_same_cuda(form):
    tune = dict(BR=128, BC=64, D=128, NT=256)
    want = same_up_to_names(_kernels()[0].cuda_source(arch="sm_90", **tune))
    k = tilenb.compile(NATURAL[form](SK.ATTENTION_TC)).attention_tc_bf16
    assert k.analysis(arch="sm_90", **tune).loops[0].lowering == STREAMED
    assert same_up_to_names(k.cuda_source(arch="sm_90", **tune)) == want


def test_a_var_copy_of_the_slices_keeps_mma_sync_and_the_view_says_why():
    src = SK.ATTENTION_TC.replace("let k = K", "var k = K").replace("let v = V", "var v = V")
    lp = tilenb.compile(src).attention_tc_bf16.analysis(arch="sm_90", BR=128, BC=64, D=128, NT=256).loops[0]
    assert lp.lowering == "mma.sync"
    assert "not on wgmma: its dots read tiles k, v, not tensor slices" in lp.why and "`let` view" in lp.why


def test_the_thread_map_lists_the_same_dot_reads_for_both_forms():
    """The views' K and V are read by the dots themselves, as the slices written in the dots are:
    by TMA into the ring on sm_90, by cp.async staging elsewhere; no copy statement of their own."""
    tune = dict(BR=128, BC=64, D=128, NT=256)
    for arch, how in (("sm_90", "wgmma"), (None, "mma.sync")):
        got = [[(r.tensor, r.operand, r.shape, r.how) for r in k.analysis(arch=arch, **tune).dot_reads] for k in _kernels()]
        assert got[0] == got[1] == [("K", "b", (64, 128), how), ("V", "b", (64, 128), how)], arch
        assert not [c for c in _kernels()[1].analysis(arch=arch, **tune).copies if c.tensor in ("K", "V")]


def test_views_read_only_by_tensor_core_dots_have_no_tile():
    _, statements = _kernels()
    for arch in ("sm_90", None):
        an = statements.analysis(arch=arch, BR=128, BC=64, D=128, NT=256)
        assert not {"k", "v"} & {t.name for t in an.lifetimes.tiles}
        assert not an.barriers      # no copy into a tile, so nothing to wait for


GEMM = """
@launch(128)
@grid(cdiv(M, 64))
kernel kloop(A: tensor<f16>[M, K], B: tensor<f16>[N, K], Y: tensor<f16>[M, N]) {
  var acc: tile<f32>[64, 32] = 0.0
  for k0 in range(0, K, 32) {
    acc += dot_t(A[ctx.block.x * 64 :+ 64, k0 :+ 32], B[0 :+ 32, k0 :+ 32])
  }
  Y[ctx.block.x * 64 :+ 64, 0 :+ 32] = acc
}
"""


@pytest.mark.parametrize("form", ["acc = acc + dot_t", "acc = dot_t + acc", "let views"])
def test_a_gemm_loop_is_one_program_in_every_form(form):
    """`acc = acc + dot(...)` is the GEMM loop `acc += dot(...)` (spec section 12), on the wgmma
    TMA pipeline on sm_90 and mma.sync elsewhere, with the same CUDA; so are its slices named by
    `let` views."""
    text = {"acc = acc + dot_t": GEMM.replace("acc += dot_t(A[ctx.block.x * 64 :+ 64, k0 :+ 32], B[0 :+ 32, k0 :+ 32])",
                                              "acc = acc + dot_t(A[ctx.block.x * 64 :+ 64, k0 :+ 32], B[0 :+ 32, k0 :+ 32])"),
            "acc = dot_t + acc": GEMM.replace("acc += dot_t(A[ctx.block.x * 64 :+ 64, k0 :+ 32], B[0 :+ 32, k0 :+ 32])",
                                              "acc = dot_t(A[ctx.block.x * 64 :+ 64, k0 :+ 32], B[0 :+ 32, k0 :+ 32]) + acc"),
            "let views": GEMM.replace("    acc += dot_t(A[ctx.block.x * 64 :+ 64, k0 :+ 32], B[0 :+ 32, k0 :+ 32])",
                                      "    let a = A[ctx.block.x * 64 :+ 64, k0 :+ 32]\n    let b = B[0 :+ 32, k0 :+ 32]\n"
                                      "    acc += dot_t(a, b)")}[form]
    assert text != GEMM
    want, got = tilenb.compile(GEMM).kloop, tilenb.compile(text).kloop
    for arch, lowering in (("sm_90", "wgmma TMA pipeline"), (None, "mma.sync")):
        assert [lp.lowering for lp in got.analysis(arch=arch).loops] == [lowering]
        # (`dot + acc` intersects the valid regions in the other order: the same path, other text)
        if form != "acc = dot_t + acc":
            assert same_up_to_names(got.cuda_source(arch=arch)) == same_up_to_names(want.cuda_source(arch=arch)), arch


# ---- what they compute ------------------------------------------------------------------------------------
def _inputs(H, N, Nk, D, seed):
    r = np.random.default_rng(seed)
    q, k, v = (r.standard_normal(s).astype(BF16) for s in ((H, N, D), (H, Nk, D), (H, Nk, D)))
    return q, k, v


def _ref(q, k, v, scale):
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = np.einsum("hnd,hmd->hnm", q, k) * scale
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return np.einsum("hnm,hmd->hnd", p / p.sum(axis=-1, keepdims=True), v)


def _run(kern, q, k, v, scale, tune):
    o = np.full(q.shape, np.nan, BF16)
    kern(q, k, v, o, np.float32(scale), variant=tune)
    assert not np.isnan(o.astype(np.float32)).any(), f"{kern.name}: an output element left unwritten"
    return o


@pytest.mark.parametrize("tune,shape", [(dict(BR=64, BC=64, D=64, NT=128), (2, 100, 150)),
                                        (dict(BR=128, BC=64, D=128, NT=256), (1, 70, 200))],
                         ids=["64x64x64_N100_Nk150", "128x64x128_N70_Nk200"])
def test_both_forms_compute_attention_on_the_cpu_executor(tune, shape):
    H, N, Nk = shape
    q, k, v = _inputs(H, N, Nk, tune["D"], seed=N + Nk)
    scale = 1.0 / math.sqrt(tune["D"])
    want = _ref(q, k, v, scale)
    outs = []
    for kern in _kernels():
        o = _run(kern, q, k, v, scale, tune)
        np.testing.assert_allclose(o.astype(np.float64), want, rtol=2e-2, atol=2e-2, err_msg=kern.name)
        outs.append(o)
    # the same arithmetic in the same order: the reference executor gives the same bits
    assert np.array_equal(outs[0].view(np.uint16), outs[1].view(np.uint16))


@needs_nvrtc
def test_the_view_form_compiles_for_sm_90a():
    src = _kernels()[1].cuda_source(arch="sm_90", BR=128, BC=64, D=64, NT=256)
    assert nvrtc_compile(src, "sm_90a")


@pytest.mark.gpu
@pytest.mark.parametrize("tune", [dict(BR=128, BC=64, D=64, NT=256), dict(BR=128, BC=64, D=128, NT=256),
                                  dict(BR=64, BC=64, D=64, NT=128), dict(BR=128, BC=128, D=128, NT=256)],
                         ids=_label)
def test_gpu_both_forms_match_numpy_and_each_other(tune):
    H, N, Nk = 2, 300, 333
    q, k, v = _inputs(H, N, Nk, tune["D"], seed=3)
    scale = 1.0 / math.sqrt(tune["D"])
    want = _ref(q, k, v, scale)
    mods = (tilenb.compile(SK.ATTENTION, backend="cuda").attention_bf16,
            tilenb.compile(SK.ATTENTION_TC, backend="cuda").attention_tc_bf16)
    outs = []
    for kern in mods:
        o = _run(kern, q, k, v, scale, tune)
        assert kern.last_run.backend == "cuda"
        np.testing.assert_allclose(o.astype(np.float64), want, rtol=3e-2, atol=3e-2, err_msg=kern.name)
        outs.append(o)
    # the same CUDA up to names for the device's target: the same bits
    from tilenb.runtime.gpu.cuda import device_target
    arch = device_target()
    if same_up_to_names(mods[0].cuda_source(arch=arch, **tune)) == same_up_to_names(
            mods[1].cuda_source(arch=arch, **tune)):
        assert np.array_equal(outs[0].view(np.uint16), outs[1].view(np.uint16))
