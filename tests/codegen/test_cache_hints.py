"""L2 eviction hints (tilenb/codegen/cache_hints.py), without a GPU:

- the rule picks exactly the last reads of a re-read tensor and the stores never read back, and
  nothing in kernels that read each tensor once, write what they re-read, re-read inside one loop,
  or have a dot;
- the hinted CUDA compiles with NVRTC for sm_90 (cubin) and compute_80 (PTX), and a kernel the
  rule leaves alone generates no hint at all;
- the long-row kernels written with a reverse second pass (tilenb/examples/suite_kernels.py's form) compute
  what numpy computes, on the CPU executor, at shapes that are not multiples of the chunk.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tilenb
from tilenb.codegen import generate, nvrtc_available, nvrtc_compile
from tilenb.codegen import cache_hints

needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="libnvrtc cannot be loaded (install nvidia-cuda-nvrtc-cu12)")

WIDE = """
// RMSNorm over long rows, the second pass from the last chunk to the first.
@autotune(C in [64, 256], NT in [32, 128])
@launch(NT)
@grid(M)
kernel rms_wide(X: tensor<{T}>[M, N], G: tensor<{T}>[1, N], Y: tensor<{T}>[M, N], eps: f32) {
  let r = ctx.block.x
  var ss: tile<f32>[1, 1] = 0.0
  for c in range(0, N, C) {
    var x = X[r :+ 1, c :+ C]
    ss = ss + rowsum(x * x)
  }
  let inv = rsqrt(ss / f32(N) + eps)
  let n = cdiv(N, C)
  for i in range(0, n) {
    let c = (n - 1 - i) * C
    Y[r :+ 1, c :+ C] = X[r :+ 1, c :+ C] * inv * G[0 :+ 1, c :+ C]
  }
}

// Softmax over long rows (online first pass), the second pass from the last chunk to the first.
@autotune(C in [64, 256], NT in [32, 128])
@launch(NT)
@grid(M)
kernel softmax_wide(X: tensor<{T}>[M, N], Y: tensor<{T}>[M, N]) {
  let r = ctx.block.x
  var m: tile<f32>[1, 1] = -1.0e30
  var l: tile<f32>[1, 1] = 0.0
  for c in range(0, N, C) {
    var x = X[r :+ 1, c :+ C]
    var m_new = max(m, rowmax(x))
    l = l * exp(m - m_new) + rowsum(exp(x - m_new))
    m = m_new
  }
  let n = cdiv(N, C)
  for i in range(0, n) {
    let c = (n - 1 - i) * C
    Y[r :+ 1, c :+ C] = exp(X[r :+ 1, c :+ C] - m) / l
  }
}

// LayerNorm with the row's head kept in a shared tile across both passes.
@autotune(K in [128], C in [64], NT in [32])
@launch(NT)
@grid(M)
kernel ln_head(X: tensor<{T}>[M, N], W: tensor<{T}>[1, N], B: tensor<{T}>[1, N], Y: tensor<{T}>[M, N], eps: f32) {
  let r = ctx.block.x
  var h = X[r :+ 1, 0 :+ K]
  var s = rowsum(h)
  var ss = rowsum(h * h)
  for c in range(K, N, C) {
    var x = X[r :+ 1, c :+ C]
    s = s + rowsum(x)
    ss = ss + rowsum(x * x)
  }
  let mean = s / f32(N)
  let rstd = rsqrt(ss / f32(N) - mean * mean + eps)
  let n = cdiv(max(N - K, 0), C)
  for i in range(0, n) {
    let c = K + (n - 1 - i) * C
    Y[r :+ 1, c :+ C] = (X[r :+ 1, c :+ C] - mean) * rstd * W[0 :+ 1, c :+ C] + B[0 :+ 1, c :+ C]
  }
  Y[r :+ 1, 0 :+ K] = (h - mean) * rstd * W[0 :+ 1, 0 :+ K] + B[0 :+ 1, 0 :+ K]
}
"""

UNHINTED = """
// X read once (whole row on chip): nothing to keep in L2.
@launch(64)
@grid(M)
kernel once(X: tensor<f32>[M, 256], Y: tensor<f32>[M, 256]) {
  let r = ctx.block.x
  var x = X[r :+ 1, :]
  Y[r :+ 1, :] = x / rowsum(x)
}

// X written by the kernel itself: its later reads are not the last touch of constant data.
@launch(64)
@grid(M)
kernel writes_x(X: tensor<f32>[M, 256], Y: tensor<f32>[M, 256]) {
  let r = ctx.block.x
  let s = rowsum(X[r :+ 1, :])
  X[r :+ 1, :] = X[r :+ 1, :] * 2.0
  Y[r :+ 1, :] = X[r :+ 1, :] / s
}

// Both reads inside one loop: the next turn reads the same lines again.
@launch(64)
@grid(M)
kernel one_loop(X: tensor<f32>[M, 256], Y: tensor<f32>[M, 256]) {
  let r = ctx.block.x
  for k in range(0, 3) {
    var x = X[r :+ 1, :]
    Y[r :+ 1, :] = X[r :+ 1, :] + x * f32(k)
  }
}

// A dot: operands shared between CTAs through L2.
@launch(128)
@grid(cdiv(M, 32))
kernel with_dot(A: tensor<f32>[M, 32], B: tensor<f32>[32, 32], C: tensor<f32>[M, 32]) {
  let r = ctx.block.x * 32
  var s = rowsum(A[r :+ 32, :])
  C[r :+ 32, :] = dot(A[r :+ 32, :], B[:, :]) + s
}
"""


def _all_slices(kir):
    from tilenb import ir
    return [e for st in ir.walk_stmts(kir.body) for top in ir.stmt_exprs(st) for e in ir.walk_expr(top)
            if isinstance(e, ir.Slice)]


def _variants(text):
    mod = tilenb.compile(text, backend="cpu")
    return mod, {name: list(k.checked.variants.values()) for name, k in mod.kernels.items()}


def test_rule_hints_the_second_pass_and_the_output():
    _, ks = _variants(WIDE.replace("{T}", "f32"))
    for name in ("rms_wide", "softmax_wide", "ln_head"):
        kir = ks[name][0]
        h = cache_hints.plan(kir)
        assert h.reread == ("X",), name
        assert {p.sym.name for p in kir.params if id(p.sym) in h.stores} == {"Y"}, name
        # the hinted windows are those of the last statement reading X (the second pass)
        last_line = max(s.span.line for s in _reading_stmts(kir, "X"))
        lines = {sl.span.line for sl in _slices(kir, "X") if id(sl) in h.loads}
        assert lines == {last_line}, (name, lines, last_line)
        src = generate(kir, WIDE.replace("{T}", "f32"), arch="sm_90").source
        assert "tnb_ld_ef((const uint4*)(X_" in src and "tnb_st_ef((uint4*)(Y_" in src, name
        # the first pass and the head keep plain loads
        assert src.count("tnb_ld_ef((const") < src.count("*(const uint4*)(X_") + src.count("tnb_ld_ef((const"), name


def _slices(kir, tensor):
    from tilenb import ir
    for s in ir.walk_stmts(kir.body):
        for top in ir.stmt_exprs(s):
            for e in ir.walk_expr(top):
                if isinstance(e, ir.Slice) and e.base.kind == "tensor" and e.base.name == tensor:
                    yield e


def _reading_stmts(kir, tensor):
    from tilenb import ir
    for s in ir.walk_stmts(kir.body):
        exprs = list(ir.stmt_exprs(s))
        if isinstance(s, ir.Assign):
            exprs = [s.value]
        if any(isinstance(e, ir.Slice) and e.base.name == tensor for top in exprs for e in ir.walk_expr(top)):
            yield s


@pytest.mark.parametrize("name", ["once", "writes_x", "one_loop", "with_dot"])
def test_rule_leaves_other_kernels_alone(name):
    _, ks = _variants(UNHINTED)
    kir = ks[name][0]
    h = cache_hints.plan(kir)
    assert not h.any, (name, h)
    src = generate(kir, UNHINTED, arch="sm_90").source
    assert "tnb_l2_first" not in src and "cache_hint" not in src


CLUSTER_HEAD = """
// the head form in each CTA of a cluster of 2: the tail's window is placed by ctx.cluster alone
@launch(64)
@cluster(2)
@grid(M * 2)
kernel chead(X: tensor<f32>[M, 1024], G: tensor<f32>[1, 1024], Y: tensor<f32>[M, 1024]) {
  let r = ctx.cluster.x
  let c = ctx.cluster.rank * 512
  var h = X[r :+ 1, c :+ 256]
  var ss = rowsum(h * h) + rowsum(X[r :+ 1, c + 256 :+ 256] * X[r :+ 1, c + 256 :+ 256])
  cluster_sum(ss)
  Y[r :+ 1, c + 256 :+ 256] = X[r :+ 1, c + 256 :+ 256] * ss * G[0 :+ 1, c + 256 :+ 256]
  Y[r :+ 1, c :+ 256] = h * ss
}
"""


def test_a_window_placed_by_the_cluster_is_per_cta():
    # ctx.cluster.x and ctx.cluster.rank differ between CTAs as ctx.block does: the tail's second
    # read is the last touch of X (hinted), G's window (every cluster reads it) is not
    _, ks = _variants(CLUSTER_HEAD)
    kir = ks["chead"][0]
    h = cache_hints.plan(kir)
    hinted = {e.base.name for e in _all_slices(kir) if id(e) in h.loads}
    assert hinted == {"X"} and h.reread == ("X",)
    assert {p.sym.name for p in kir.params if id(p.sym) in h.stores} == {"Y"}


def test_store_switch_hints_the_output_of_a_row_held_on_chip(monkeypatch):
    # TILENB_STORE_EVICT_FIRST=1: the kernel that reads X once gets evict_first on its stores of Y
    # (and no load hint); X, which writes_x writes and reads, is never hinted; a kernel with a dot
    # still gets nothing
    from tilenb.switches import SWITCHES
    monkeypatch.setattr(SWITCHES, "store_evict_first", True)
    _, ks = _variants(UNHINTED)
    h = cache_hints.plan(ks["once"][0])
    assert not h.loads and [t for t in h.stores] and not h.reread
    src = generate(ks["once"][0], UNHINTED, arch="sm_90").source
    assert "tnb_st_ef(" in src and "tnb_ld_ef(" not in src.split("// tilenb kernel")[1]
    kir = ks["writes_x"][0]
    hinted = {p.sym.name for p in kir.params if id(p.sym) in cache_hints.plan(kir).stores}
    assert hinted == {"Y"}
    assert not cache_hints.plan(ks["with_dot"][0]).any
    if nvrtc_available():
        nvrtc_compile(src, "sm_90")


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_90", "compute_80"])
@pytest.mark.parametrize("T", ["f32", "bf16"])
def test_hinted_cuda_compiles(arch, T):
    text = WIDE.replace("{T}", T)
    _, ks = _variants(text)
    parts = []
    for name, vs in ks.items():
        for kir in vs:
            src = generate(kir, text, arch="sm_90").source
            assert "tnb_l2ef" in src, name
            parts.append(src)
    nvrtc_compile("\n".join(parts), arch)


def _as(a, T):
    return a.astype(np.float32) if T == "f32" else a.astype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("T", ["f32", "bf16"])
@pytest.mark.parametrize("shape", [(3, 1000), (2, 100), (4, 260)])
def test_long_row_kernels_match_numpy(T, shape):
    """Every variant, rows shorter than, equal to and longer than a chunk or the head."""
    rng = np.random.default_rng(7)
    M, N = shape
    mod, ks = _variants(WIDE.replace("{T}", T))
    x = _as(rng.standard_normal((M, N)) * 2 + 0.5, T)
    g, b = _as(rng.standard_normal((1, N)), T), _as(rng.standard_normal((1, N)), T)
    xd, gd, bd = (a.astype(np.float64) for a in (x, g, b))
    ref_rms = xd / np.sqrt((xd * xd).mean(1, keepdims=True) + 1e-5) * gd
    mu = xd.mean(1, keepdims=True)
    ref_ln = (xd - mu) / np.sqrt(((xd - mu) ** 2).mean(1, keepdims=True) + 1e-5) * gd + bd
    e = np.exp(xd - xd.max(1, keepdims=True))
    ref_sm = e / e.sum(1, keepdims=True)
    tol = 1e-5 if T == "f32" else 1.5e-2
    for name in ks:
        k = mod.kernels[name]
        for key in k.checked.variants:
            v = dict(key)
            y = np.full((M, N), np.nan, x.dtype)
            if name == "rms_wide":
                k(x, g, y, np.float32(1e-5), variant=v)
                ref = ref_rms
            elif name == "softmax_wide":
                k(x, y, variant=v)
                ref = ref_sm
            else:
                k(x, g, b, y, np.float32(1e-5), variant=v)
                ref = ref_ln
            got = y.astype(np.float64)
            assert np.isfinite(got).all(), (name, v)
            err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
            assert err < tol, (name, v, err)
