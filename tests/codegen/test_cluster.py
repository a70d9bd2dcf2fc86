"""Thread block clusters: `@cluster(n)` and the cluster reductions `cluster_sum`, `cluster_max`,
`cluster_min` (spec sections 9, 10, 15).

Checked here without a GPU: the checker's rules (each error names the statement or attribute at
fault), the CPU executor against numpy at shapes that are not multiples of the chunks (a CTA's
chunk partly or wholly outside the row), the rank order of the combination, the launch's grid
check, and the generated CUDA (sm_90 only, compiled by NVRTC). On a GPU (marked `gpu`): the same
kernels against numpy, and the combination bit for bit against the CPU executor.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import tilenb
from tilenb.codegen import nvrtc_available, nvrtc_compile
from tilenb.lang.diagnostics import LaunchError, TileError, UnsupportedError

ROWS = """
// A row per cluster of K CTAs, C columns each (K * C >= N): RMSNorm, LayerNorm and softmax.
@autotune(K in [2, 4], C in [256, 512])
@launch(128)
@cluster(K)
@grid(M * K)
kernel rms(X: tensor<f32>[M, N], Y: tensor<f32>[M, N], eps: f32) {
  let r = ctx.block.x / K
  let c = (ctx.block.x % K) * C
  var x = X[r :+ 1, c :+ C]
  var ss = rowsum(x * x)
  cluster_sum(ss)
  Y[r :+ 1, c :+ C] = x * rsqrt(ss / f32(N) + eps)
}

@autotune(K in [2, 4], C in [256, 512])
@launch(128)
@cluster(K)
@grid(M * K)
kernel layer_norm(X: tensor<bf16>[M, N], Y: tensor<bf16>[M, N], eps: f32) {
  let r = ctx.block.x / K
  let c = (ctx.block.x % K) * C
  var x = X[r :+ 1, c :+ C]
  var s = rowsum(x)
  cluster_sum(s)
  let mean = s / f32(N)
  var ss = rowsum((x - mean) * (x - mean))
  cluster_sum(ss)
  Y[r :+ 1, c :+ C] = (x - mean) * rsqrt(ss / f32(N) + eps)
}

@autotune(K in [2, 4], C in [256, 512])
@launch(128)
@cluster(K)
@grid(M * K)
kernel softmax(X: tensor<f32>[M, N], Y: tensor<f32>[M, N]) {
  let r = ctx.block.x / K
  let c = (ctx.block.x % K) * C
  var x = X[r :+ 1, c :+ C]
  var m = rowmax(x)
  cluster_max(m)
  var l = rowsum(exp(x - m))
  cluster_sum(l)
  Y[r :+ 1, c :+ C] = exp(x - m) / l
}

// Two rows per CTA and a [2, 1] statistic: with M odd the last row is outside the tensor, so its
// element is invalid in every CTA of the cluster; cluster_min of the row minimums.
@autotune(K in [4])
@launch(64)
@cluster(K)
@grid(cdiv(M, 2) * K)
kernel row_min(X: tensor<f32>[M, N], Y: tensor<f32>[M, 1]) {
  let r = (ctx.block.x / K) * 2
  let c = (ctx.block.x % K) * 64
  var x = X[r :+ 2, c :+ 64]
  var m = rowmin(x)
  cluster_min(m)
  if ctx.block.x % K == 0 {
    Y[r :+ 2, :] = m
  }
}

// The combination itself: each CTA contributes one element of P; every CTA of a cluster writes
// the cluster's sum (rank 0 first) to its own slot.
@launch(32)
@cluster(4)
@grid(G)
kernel partials(P: tensor<f32>[G], S: tensor<f32>[G]) {
  var t: tile<f32>[1] = P[ctx.block.x :+ 1]
  cluster_sum(t)
  S[ctx.block.x :+ 1] = t
}
"""


def _mod(backend="cpu"):
    return tilenb.compile(ROWS, backend=backend)


def _rms_ref(x, eps):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(1, keepdims=True) + eps)


def _ln_ref(x, eps):
    x = x.astype(np.float64)
    mu = x.mean(1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(1, keepdims=True) + eps)


def _softmax_ref(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


# N = 1000: the last CTA's chunk of 256 (K = 4) is partly outside the row; N = 700 with K = 4 and
# C = 256: the last CTA's chunk is wholly outside (its partial is the identity).
SHAPES = [(5, 1000, 4, 256), (3, 700, 4, 256), (7, 1000, 2, 512), (2, 516, 2, 512)]


def _run_rows(mod, M, N, K, C, rng, **kw):
    import ml_dtypes
    x = (rng.standard_normal((M, N)) * 3 + 1).astype(np.float32)
    out = {}
    y = np.full_like(x, np.nan)
    mod.rms(x, y, np.float32(1e-6), variant={"K": K, "C": C}, **kw)
    out["rms"] = (y, _rms_ref(x, 1e-6), 1e-5)
    xb = x.astype(ml_dtypes.bfloat16)
    yb = np.zeros_like(xb)
    mod.layer_norm(xb, yb, np.float32(1e-5), variant={"K": K, "C": C}, **kw)
    out["layer_norm"] = (yb, _ln_ref(xb, 1e-5), 2e-2)
    y = np.full_like(x, np.nan)
    mod.softmax(x, y, variant={"K": K, "C": C}, **kw)
    out["softmax"] = (y, _softmax_ref(x), 1e-5)
    return out


@pytest.mark.parametrize("M,N,K,C", SHAPES)
def test_cpu_cluster_rows_match_numpy(M, N, K, C):
    rng = np.random.default_rng(M * N + K)
    for name, (got, ref, tol) in _run_rows(_mod(), M, N, K, C, rng).items():
        got = got.astype(np.float64)
        assert not np.isnan(got).any(), name
        err = np.abs(got - ref).max() / np.abs(ref).max()
        assert err <= tol, (name, err)


def test_ctx_cluster_fields():
    src = """
@autotune(K in [1, 4])
@launch(32)
@grid(G)
@cluster(K)
kernel where_am_i(R: tensor<i32>[G], X: tensor<i32>[G]) {
  if ctx.thread == 0 {
    R[ctx.block.x] = i32(ctx.cluster.rank)
    X[ctx.block.x] = i32(ctx.cluster.x)
  }
}
"""
    mod = tilenb.compile(src, backend="cpu")
    for K in (1, 4):
        r, x = np.full(12, -1, np.int32), np.full(12, -1, np.int32)
        mod.where_am_i(r, x, variant={"K": K})
        np.testing.assert_array_equal(r, np.arange(12) % K)
        np.testing.assert_array_equal(x, np.arange(12) // K)
    code = mod.where_am_i.cuda_source(arch="sm_90", K=4)
    assert "(blockIdx.x % 4u)" in code and "(blockIdx.x / 4u)" in code
    if nvrtc_available():
        nvrtc_compile(code, "sm_90", use_cache=False)


def test_cpu_cluster_min_skips_invalid_elements():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 256)).astype(np.float32)
    y = np.full((5, 1), np.nan, np.float32)
    _mod().row_min(x, y)
    np.testing.assert_array_equal(y, x.min(1, keepdims=True))


def test_cluster_sum_combines_in_rank_order():
    # f32 partials whose sum depends on the order: ((0 + 1e8) + 1) - 1e8 + 1 = 1 in rank order
    # (numpy's pairwise sum of the same four values gives 2)
    p = np.array([1e8, 1, -1e8, 1, 5, 6, 7, 8], np.float32)
    s = np.zeros_like(p)
    _mod().partials(p, s)
    np.testing.assert_array_equal(s, [1, 1, 1, 1, 26, 26, 26, 26])


def test_launch_grid_must_be_a_multiple_of_the_cluster():
    p = np.zeros(12, np.float32)
    with pytest.raises(LaunchError, match=r"grid dimension x is 6, not a multiple of the kernel's @cluster\(4\)"):
        _mod().partials[(6,)](p, np.zeros_like(p))
    x = np.zeros((3, 100), np.float32)
    with pytest.raises(LaunchError, match=r"grid dimension x is 5"):
        _mod().rms[(5,)](x, np.zeros_like(x), np.float32(1e-6), variant={"K": 4, "C": 256})


BAD = [
    ("no @cluster", """
kernel k(X: tensor<f32>[M, 64]) {
  var s = rowsum(X[0 :+ 1, :])
  cluster_sum(s)
}""", r"4:3: .*cluster_sum combines a tile across the CTAs of a thread block cluster; give the kernel @cluster\(n\)"),
    ("in a loop", """
@cluster(2)
kernel k(X: tensor<f32>[M, 64]) {
  var s = rowsum(X[0 :+ 1, :])
  for i in range(0, 3) {
    cluster_max(s)
  }
}""", r"6:5: .*cluster_max must be at the top level of the kernel body"),
    ("in an if", """
@cluster(2)
kernel k(X: tensor<f32>[M, 64]) {
  var s = rowsum(X[0 :+ 1, :])
  if ctx.block.x == 0 {
    cluster_sum(s)
  }
}""", r"6:5: .*must be at the top level"),
    ("after a return", """
@cluster(2)
kernel k(X: tensor<f32>[M, 64]) {
  if ctx.block.x >= 4 {
    return
  }
  var s = rowsum(X[0 :+ 1, :])
  cluster_sum(s)
}""", r"8:3: .*cluster_sum comes after the 'return' at line 5"),
    ("a return after", """
@cluster(2)
kernel k(X: tensor<f32>[M, 64]) {
  var s = rowsum(X[0 :+ 1, :])
  cluster_sum(s)
  if ctx.block.x >= 4 {
    return
  }
}""", r"7:5: .*'return' after the cluster reduction at line 5: a kernel with cluster reductions runs to its end"),
    ("a let", """
@cluster(2)
kernel k(X: tensor<f32>[M, 64]) {
  let s = rowsum(X[0 :+ 1, :])
  cluster_sum(s)
}""", r"5:15: .*'s' is a let and cannot be rebound"),
    ("a scalar", """
@cluster(2)
kernel k(X: tensor<f32>[M, 64]) {
  var s = 1.0
  cluster_sum(s)
}""", r"5:15: .*cluster_sum takes a tile var, not f32"),
    ("a bf16 tile", """
@cluster(2)
kernel k(X: tensor<bf16>[M, 64]) {
  var s = X[0 :+ 1, 0 :+ 4]
  cluster_min(s)
}""", r"5:15: .*cluster_min works on f32 and f64 tiles; 's' is bf16"),
    ("a register tile", """
@cluster(2)
@registers(s)
@launch(32)
kernel k(X: tensor<f32>[M, 64]) {
  var s: tile<f32>[1, 64] = X[0 :+ 1, :]
  cluster_sum(s)
  X[0 :+ 1, :] = s
}""", r"7:15: .*'s' is kept in registers \(@registers\); cluster_sum combines tiles in shared memory"),
    ("a big tile", """
@cluster(2)
@dynshared
kernel k(X: tensor<f32>[M, 64]) {
  var s: tile<f32>[128, 64] = X[0 :+ 128, :]
  cluster_max(s)
}""", r"6:15: .*cluster_max of 's' \(tile<f32>\[128, 64\], 32768 bytes\): a cluster reduction combines tiles of at "
      r"most 16384 bytes"),
    ("two arguments", """
@cluster(2)
kernel k(X: tensor<f32>[M, 64]) {
  var s = rowsum(X[0 :+ 1, :])
  cluster_sum(s, s)
}""", r"5:3: .*cluster_sum\(t\) takes one argument"),
    ("cluster too big", """
@cluster(16)
kernel k(X: tensor<f32>[M, 64]) {
}""", r"2:10: .*@cluster\(16\): a thread block cluster holds 1 to 8 CTAs"),
    ("cluster of zero", """
@autotune(K in [0, 2])
@cluster(K)
kernel k(X: tensor<f32>[M, 64]) {
}""", r"@cluster\(0\)"),
    ("two cluster arguments", """
@cluster(2, 1)
kernel k(X: tensor<f32>[M, 64]) {
}""", r"2:1: .*@cluster takes one argument"),
]


@pytest.mark.parametrize("label,src,pattern", BAD, ids=[b[0] for b in BAD])
def test_checker_rejects_misplaced_cluster_reductions(label, src, pattern):
    with pytest.raises(TileError, match=pattern):
        tilenb.compile(src, backend="cpu")


def test_a_failed_cell_keeps_nothing_half_defined():
    # the error is the checker's, before anything runs: no internal exception
    with pytest.raises(TileError):
        tilenb.compile(BAD[1][1], backend="cpu")


def test_generated_cuda_needs_sm90_and_declares_the_cluster():
    mod = _mod()
    src = mod.rms.cuda_source(arch="sm_90", K=4, C=256)
    assert "__cluster_dims__(4, 1, 1)" in src
    # one cluster barrier per reduction (arrive when published, wait before the result is needed)
    # and one before exit
    assert src.count("tnb_cluster_arrive();") == 2 and src.count("tnb_cluster_wait();") == 2
    assert "mapa.shared::cluster" in src
    with pytest.raises(UnsupportedError, match=r"@cluster\(4\): thread block clusters need sm_90 or newer, and the "
                                               r"target is sm_80"):
        mod.rms.cuda_source(arch="sm_80", K=4, C=256)


def test_cuda_source_names_a_bad_target():
    mod = _mod()
    assert "__cluster_dims__(4, 1, 1)" in mod.rms.cuda_source(arch=90, K=4, C=256)
    assert "__cluster_dims__(4, 1, 1)" in mod.rms.cuda_source(arch="sm90", K=4, C=256)
    for bad in ("garbage", "sm_7"):
        with pytest.raises(UnsupportedError, match=rf"cuda_source\(arch='{bad}'\) names no GPU target"):
            mod.rms.cuda_source(arch=bad, K=4, C=256)


def test_the_wait_moves_to_the_first_statement_that_needs_the_result():
    # rows a and b of two clusters' worth of work in one CTA: b's copy and partial sum run while the
    # other CTAs of the cluster finish a's; a is combined just before the next cluster reduction
    src = """
@launch(64)
@cluster(2)
@grid(cdiv(M, 2) * 2)
kernel two_rows(X: tensor<f32>[M, 128], Y: tensor<f32>[M, 128]) {
  let r = (ctx.block.x / 2) * 2
  let c = (ctx.block.x % 2) * 64
  var xa = X[r :+ 1, c :+ 64]
  var sa = rowsum(xa)
  cluster_sum(sa)
  var xb = X[r + 1 :+ 1, c :+ 64]
  var sb = rowsum(xb)
  cluster_sum(sb)
  Y[r :+ 1, c :+ 64] = xa - sa / 128.0
  Y[r + 1 :+ 1, c :+ 64] = xb - sb / 128.0
}
"""
    mod = tilenb.compile(src, backend="cpu")
    code = mod.two_rows.cuda_source(arch="sm_90")
    lines = [l.strip() for l in code.splitlines()]
    at = {k: next(i for i, l in enumerate(lines) if l.startswith(k)) for k in
          ("// line 11: var xb", "// line 13: cluster_sum(sb)", "// line 14: Y[r :+ 1", "// line 15: Y[r + 1")}
    fin_a = next(i for i, l in enumerate(lines) if "cluster_sum(sa), continued" in l)
    fin_b = next(i for i, l in enumerate(lines) if "cluster_sum(sb), continued" in l)
    assert at["// line 11: var xb"] < fin_a < at["// line 13: cluster_sum(sb)"]
    # row a's store does not need sb: b's combination waits until row b's store
    assert at["// line 14: Y[r :+ 1"] < fin_b < at["// line 15: Y[r + 1"]
    x = np.random.default_rng(2).standard_normal((5, 128)).astype(np.float32)
    y = np.full_like(x, np.nan)
    mod.two_rows(x, y)
    np.testing.assert_allclose(y[:5], x - x.sum(1, keepdims=True) / 128, rtol=1e-5, atol=1e-6)
    if nvrtc_available():
        nvrtc_compile(code, "sm_90", use_cache=False)


DEAD_AFTER = """
@launch(32)
@cluster(2)
@grid(G)
kernel dead_after(P: tensor<f32>[G], S: tensor<f32>[G]) {
  var a: tile<f32>[1] = P[ctx.block.x :+ 1]
  cluster_sum(a)
  var b: tile<f32>[1] = P[ctx.block.x :+ 1] + 10.0
  cluster_sum(b)
  S[ctx.block.x :+ 1] = b
}
"""


def test_a_tile_nothing_reads_later_is_combined_at_once():
    # a is dead after its reduction, so b may take its bytes: a's combination must not wait
    # until b's reduction (a review found it then wrote a's sum into b on the H200)
    mod = tilenb.compile(DEAD_AFTER, backend="cpu")
    p = np.arange(1, 9, dtype=np.float32)
    s = np.zeros_like(p)
    mod.dead_after[(8,)](p, s)
    np.testing.assert_array_equal(s, [23, 23, 27, 27, 31, 31, 35, 35])
    lines = [l.strip() for l in mod.dead_after.cuda_source(arch="sm_90").splitlines()]
    fin_a = next(i for i, l in enumerate(lines) if "cluster_sum(a), continued" in l)
    decl_b = next(i for i, l in enumerate(lines) if l.startswith("// line 8: var b"))
    assert fin_a < decl_b


def test_variants_that_share_a_walk_budget_their_own_cluster_size():
    # K is named only by @cluster, so both variants share one check of the body; the 16 KB tile's
    # published copy fits the 48 KB static budget with the other tiles only when nothing is
    # published (K = 1)
    src = """
@autotune(K in [1, 2])
@launch(128)
@cluster(K)
kernel k(X: tensor<f32>[M, 64], Y: tensor<f32>[M, 64]) {
  var a = X[0 :+ 64, :]
  var b = X[64 :+ 64, :]
  var s: tile<f32>[64, 64] = a + b
  cluster_sum(s)
  Y[0 :+ 64, :] = s + a + b
}
"""
    k = tilenb.compile(src, backend="cpu").k
    assert ("K", 1) in {kv for key in k.checked.variants for kv in key}
    skipped = {kv for key in k.checked.skipped for kv in key}
    assert ("K", 2) in skipped
    assert "after the 16384 bytes its cluster reductions publish" in next(iter(k.checked.skipped.values()))


def test_a_tile_written_through_a_view_is_not_read_by_descriptor():
    # q written whole only: read by wgmma by descriptor (fenced after its copy); q also written
    # through a view: ldmatrix and the register form, whose reads need no proxy fence
    import sys
    from pathlib import Path
    from tilenb.examples import suite_kernels as SK
    text = SK.kernel_text("attention_bf16")
    tune = dict(BR=128, BC=128, D=128, NT=256)
    plain = tilenb.compile(text, backend="cpu").attention_bf16.cuda_source(arch="sm_90", **tune)
    assert "A by descriptor" in plain and "read next by the tensor cores by descriptor" in plain
    viewed = text.replace("  var acc: tile<f32>[BR, D] = 0.0\n",
                          "  let qv = q[0 :+ 64, :]\n  qv[0 :+ 64, :] = qv * 2.0\n  var acc: tile<f32>[BR, D] = 0.0\n")
    assert viewed != text
    src = tilenb.compile(viewed, backend="cpu").attention_bf16.cuda_source(arch="sm_90", **tune)
    assert "A by descriptor" not in src and "tnb_ldsm_x4(" in src


def test_published_copies_count_against_the_shared_memory_budget():
    # three 16 KB tiles fill the 48 KB static budget; the copy the reduction publishes does not fit
    src = """
@launch(128)
@cluster(2)
kernel k(X: tensor<f32>[M, 64], Y: tensor<f32>[M, 64]) {
  var a = X[0 :+ 64, :]
  var b = X[64 :+ 64, :]
  var s: tile<f32>[64, 64] = a + b
  cluster_sum(s)
  Y[0 :+ 64, :] = s + a + b
}
"""
    with pytest.raises(TileError, match=r"more than the static budget of 32768 bytes \(48 KB\) \(after the 16384 "
                                        r"bytes its cluster reductions publish\)"):
        tilenb.compile(src, backend="cpu")
    code = tilenb.compile(src.replace("@launch(128)", "@launch(128)\n@dynshared"), backend="cpu").k.cuda_source(arch="sm_90")
    assert "shared memory 65536 bytes (dynamic)" in code
    if nvrtc_available():
        nvrtc_compile(code, "sm_90", use_cache=False)


SPLITK = """
@launch(128)
@cluster(2)
@dynshared
kernel splitk(A: tensor<bf16>[M, K], B: tensor<bf16>[K, N], C: tensor<f32>[M, N]) {
  let half = (ctx.block.x % 2) * 256
  var acc: tile<f32>[64, 64] = 0.0
  for kt in range(half, half + 256, 64) {
    acc += dot(A[0 :+ 64, kt :+ 64], B[kt :+ 64, 0 :+ 64])
  }
  var s: tile<f32>[64, 64] = acc
  cluster_sum(s)
  C[0 :+ 64, 0 :+ 64] = s
}
"""


def test_published_copies_lie_after_a_gemm_pipeline_ring():
    # split-K: each CTA of a cluster of 2 multiplies half of K (on sm_90 a TMA + wgmma ring after
    # the tiles), then the cluster sums the two partial products
    src = SPLITK
    import ml_dtypes
    mod = tilenb.compile(src, backend="cpu")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 512)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((512, 64)).astype(ml_dtypes.bfloat16)
    c = np.zeros((64, 64), np.float32)
    mod.splitk[(2,)](a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-3)
    from tilenb.codegen import generate
    ks = generate(mod.splitk.ir(), src, arch="sm_90")
    ring = re.search(r"ring\d+ = \(unsigned char\*\)\(\(\(unsigned long long\)\(tnb_smem \+ (\d+)\) \+ 1023\) & ~1023ull\);"
                     r"  // (\d+) stages of (\d+) bytes", ks.source)
    slot = int(re.search(r"tnb_cls\d+ = \(float\*\)\(tnb_smem \+ (\d+)\)", ks.source).group(1))
    ring_end = int(ring.group(1)) + 1023 + int(ring.group(2)) * int(ring.group(3))
    assert slot >= ring_end and slot + 64 * 64 * 4 <= ks.smem_bytes
    if nvrtc_available():
        nvrtc_compile(ks.source, ks.arch or "sm_90", use_cache=False)


def test_a_cluster_of_one_folds_with_the_identity_on_both_backends():
    src = """
@launch(32)
@cluster(1)
kernel k(P: tensor<f32>[4], S: tensor<f32>[4]) {
  var t = P[0 :+ 4]
  cluster_max(t)
  S[0 :+ 4] = t
}
"""
    mod = tilenb.compile(src, backend="cpu")
    p = np.array([np.nan, -0.0, 1.0, -np.inf], np.float32)
    s = np.zeros_like(p)
    mod.k[(1,)](p, s)
    np.testing.assert_array_equal(s, [-np.inf, -0.0, 1.0, -np.inf])   # fmax(-inf, NaN) = -inf (spec 10)
    code = mod.k.cuda_source(arch="sm_80")                           # no cluster hardware needed
    assert re.search(r"if \(tnb_in\) t_\d+\[tnb_e\] = tnb_max\(\(float\)\(-__int_as_float\(0x7f800000\)\)", code)
    assert "__cluster_dims__" not in code


def test_cluster_reductions_have_no_value():
    for text in ("var u = cluster_sum(s)", "let u = cluster_max(s) + 1.0"):
        src = f"""
@cluster(2)
kernel k(X: tensor<f32>[M, 64]) {{
  var s = rowsum(X[0 :+ 1, :])
  {text}
}}"""
        with pytest.raises(TileError, match=r"5:\d+: .*cluster_(sum|max)\(\) is a statement \(it has no value\)"):
            tilenb.compile(src, backend="cpu")


def test_autotune_drops_cluster_sizes_that_do_not_divide_the_grid():
    src = """
@autotune(K in [2, 4])
@launch(32)
@cluster(K)
kernel k(P: tensor<f32>[G], S: tensor<f32>[G]) {
  var t: tile<f32>[1] = P[ctx.block.x :+ 1]
  cluster_sum(t)
  S[ctx.block.x :+ 1] = t
}
"""
    mod = tilenb.compile(src, backend="cpu")
    p = np.arange(8, dtype=np.float32)
    s = np.zeros_like(p)
    mod.k[(6,)](p, s)                      # only K = 2 tiles a grid of 6
    assert mod.k.last_run.variant == {"K": 2}
    np.testing.assert_array_equal(s[:6], [1, 1, 5, 5, 9, 9])
    with pytest.raises(LaunchError, match=r"grid dimension x is 5.*no @autotune variant's cluster size divides it"):
        mod.k[(5,)](p, s)


@pytest.mark.skipif(not nvrtc_available(), reason="NVRTC not installed")
def test_generated_cuda_compiles_for_sm90():
    mod = _mod()
    for name, tune in (("rms", {"K": 4, "C": 256}), ("layer_norm", {"K": 2, "C": 512}),
                       ("softmax", {"K": 4, "C": 512}), ("row_min", {}), ("partials", {})):
        nvrtc_compile(getattr(mod, name).cuda_source(arch="sm_90", **tune), "sm_90", use_cache=False)


# ---- on the GPU ------------------------------------------------------------------------------
def _sm90():
    try:
        import cupy as cp
        return cp.cuda.Device().compute_capability >= "90"
    except Exception:  # noqa: BLE001
        return False


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K,C", SHAPES)
def test_gpu_cluster_rows_match_numpy(M, N, K, C):
    if not _sm90():
        pytest.skip("thread block clusters need sm_90")
    rng = np.random.default_rng(M * N + K)
    for name, (got, ref, tol) in _run_rows(_mod("cuda"), M, N, K, C, rng).items():
        got = got.astype(np.float64)
        assert not np.isnan(got).any(), name
        err = np.abs(got - ref).max() / np.abs(ref).max()
        assert err <= tol, (name, err)


@pytest.mark.gpu
def test_gpu_cluster_combination_matches_the_cpu_executor_bit_for_bit():
    if not _sm90():
        pytest.skip("thread block clusters need sm_90")
    rng = np.random.default_rng(5)
    p = (rng.standard_normal(4096) * 10.0 ** rng.integers(-6, 8, 4096)).astype(np.float32)
    s_gpu, s_cpu = np.zeros_like(p), np.zeros_like(p)
    _mod("cuda").partials(p, s_gpu)
    _mod("cpu").partials(p, s_cpu)
    np.testing.assert_array_equal(s_gpu, s_cpu)
    x = rng.standard_normal((9, 256)).astype(np.float32)
    y = np.full((9, 1), np.nan, np.float32)
    _mod("cuda").row_min(x, y)
    np.testing.assert_array_equal(y, x.min(1, keepdims=True))


@pytest.mark.gpu
def test_gpu_split_k_through_a_cluster_matches_numpy():
    if not _sm90():
        pytest.skip("thread block clusters need sm_90")
    import ml_dtypes
    rng = np.random.default_rng(4)
    a = rng.standard_normal((64, 512)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((512, 64)).astype(ml_dtypes.bfloat16)
    c = np.full((64, 64), np.nan, np.float32)
    tilenb.compile(SPLITK, backend="cuda").splitk[(2,)](a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3, atol=1e-2)


@pytest.mark.gpu
def test_gpu_a_tile_nothing_reads_later_is_combined_at_once():
    if not _sm90():
        pytest.skip("thread block clusters need sm_90")
    p = np.arange(1, 9, dtype=np.float32)
    s = np.zeros_like(p)
    tilenb.compile(DEAD_AFTER, backend="cuda").dead_after[(8,)](p, s)
    np.testing.assert_array_equal(s, [23, 23, 27, 27, 31, 31, 35, 35])
