"""The differences between the analysis and Nsight Compute that the first H200 run of
bench/probes/ncu_tutorials.py found (bench/results/h200_ncu_tutorials_first.md): each is now
either predicted by the analysis or explained by `Profile.compare` with its exact mechanism.

The measured side is the H200's own counts (tests/runtime/data/ncu_h200_lines.json, read from
the probe's pages); the first-principles tests derive the wavefronts of a pattern by counting, per
request, the distinct 4-byte words each bank serves (32 banks of 4 bytes), never from the
analysis. Shapes are not multiples of the tiles (ragged last CTAs)."""
import json
from pathlib import Path

import numpy as np
import pytest
import tilenb
from tilenb.analysis.thread_traffic import element_sectors
from tilenb.runtime.gpu.profile import LineFigures, Profile, start_bytes

DATA = Path(__file__).resolve().parent / "data" / "ncu_h200_lines.json"


def _kernels():
    return json.loads(DATA.read_text())["kernels"]


def _figures(line, d) -> LineFigures:
    f = LineFigures(int(line), **{k: v for k, v in d.items() if k not in ("ops", "via")})
    f.ops = {op: list(v) for op, v in d["ops"].items()}
    f.via = list(d.get("via", []))
    return f


SCALARS = {"tutorial05-add_from": {"start": 8}}      # the tutorial's launch: add_from(A, B, Y, start) with start = 8


def _profile(name, scalars=True):
    """(Profile of the saved counts, the kernel's analysis at the launch's extents); with `scalars`
    the launch's scalar arguments are known (the slice starts it evaluates), else not."""
    k = _kernels()[name]
    kern = getattr(tilenb.compile(k["source"], backend="cpu"), k["kernel"])
    p = Profile(k["kernel"], k["symbol"], dict(k["variant"]), tuple(k["grid"]), dict(k["dims"]),
                {int(ln): _figures(ln, d) for ln, d in k["lines"].items()}, [], {}, [],
                other={h: _figures(0, d) for h, d in k["other"].items()}, full_ctas=k["full_ctas"],
                helper_calls={h: list(v) for h, v in k["helper_calls"].items()},
                element_traffic=element_sectors(kern.ir(**k["variant"]), k["grid"], k["dims"]),
                start_bytes=start_bytes(kern.ir(**k["variant"]), k["grid"], k["dims"],
                                        SCALARS.get(name, {}) if scalars else {}))
    return p, p.analysis(kern)


def _row(rows, line, metric):
    (r,) = [r for r in rows if r["line"] == line and r["metric"] == metric]
    return r


def _ops(name, line, prefix):
    """(warp instructions, wavefronts) of the SASS opcodes starting with `prefix` at a line."""
    ops = _kernels()[name]["lines"][str(line)]["ops"]
    sel = [v for op, v in ops.items() if op.split(".")[0] == prefix]
    return sum(v[0] for v in sel), sum(v[2] for v in sel)


def _bank_wavefronts(word_addrs):
    """Wavefronts of one warp request of 4-byte accesses: the most distinct words any bank serves."""
    per_bank = {}
    for w in set(int(x) for x in word_addrs):
        per_bank.setdefault(w % 32, set()).add(w)
    return max(len(v) for v in per_bank.values())


# ---- predicted now: the analysis counts what the H200 counted ---------------------------------
def test_warp_reduction_reads_center_rows():
    # rowsum of x [8, 64] f32, 128 threads: warp 0 owns the 8 outputs, 4 lanes a row (S = 8:
    # lane l reads row l % 8, column l // 8 + 4 i), 16 steps; the H200: 16 LDS a CTA
    p, a = _profile("tutorial04-center_rows")
    rows = [l % 8 for l in range(32)]
    per_step = [_bank_wavefronts([rows[l] * 64 + l // 8 + 4 * i for l in range(32)]) for i in range(16)]
    full = sum(per_step)                                      # 8 rows share each bank: 8 x 16
    edge = sum(_bank_wavefronts([rows[l] * 64 + l // 8 + 4 * i for l in range(32) if rows[l] < 4])
               for i in range(16))                            # the last CTA: rows 40..43 of M = 44
    n_lds, lds_wf = _ops("tutorial04-center_rows", 7, "LDS")
    assert n_lds == 16 * 6 and lds_wf == 5 * full + edge == 704
    r = _row(p.compare(a), 7, "shared wavefronts")
    assert r["ok"] and r["predicted"] <= 704 + 6 <= r["predicted_upper"]
    assert ("warp reduction pass", "x", full) in r["beyond_copies"]


def test_warp_reduction_reads_stack_halves():
    # rowsum(t * t) of t [8, 32]: t read once a step (the product's two reads are one load);
    # 8 steps of 4 columns, every 8 lanes of a column in one bank
    p, a = _profile("tutorial02-stack_halves")
    per_cta = sum(_bank_wavefronts([(l % 8) * 32 + l // 8 + 4 * i for l in range(32)]) for i in range(8))
    n_lds, lds_wf = _ops("tutorial02-stack_halves", 9, "LDS")
    assert (n_lds, lds_wf) == (8 * 4, 4 * per_cta)
    r = _row(p.compare(a), 9, "shared wavefronts")
    assert r["ok"] and r["measured"] == r["predicted"] == 4 * (per_cta + 1)     # + the one store of sums


def test_swizzled_transposed_read_add_blocks():
    # Y = transpose(a + b): b [32, 128] f32 read along columns through its XOR swizzle of 4-element
    # units by row bits: lane l of a step reads element (4m + v, i) at (4m + v) * 128 + (i ^ 4m)
    def swz(o):
        return o ^ (((o >> 9) & 7) << 2)
    per_cta = 0
    for w in range(4):
        for q in range(8):
            for v in range(4):
                addrs = []
                for lane in range(32):
                    k = w * 32 + lane + q * 128
                    i, j = k // 8, (k % 8) * 4 + v
                    addrs.append(swz(j * 128 + i))
                per_cta += _bank_wavefronts(addrs)
    assert per_cta == 128                                     # 1 wavefront a request, a and b alike
    n_lds, lds_wf = _ops("tutorial05-add_blocks", 8, "LDS")
    assert lds_wf == 3 * 2 * per_cta
    r = _row(_profile("tutorial05-add_blocks")[0].compare(_profile("tutorial05-add_blocks")[1]), 8, "shared wavefronts")
    assert r["ok"] and r["measured"] == r["predicted_upper"] == 3 * 2 * per_cta


@pytest.mark.parametrize("name, line, steps", [("suite-layer_norm_f32", 65, 4), ("suite-layer_norm_bf16", 105, 2)])
def test_hoisted_mean_broadcast_layer_norm(name, line, steps):
    # rowsum((x - mean) * (x - mean)): mean [1, 1] is the same element at every chunk step, read
    # once per thread (one LDS a warp), not once a step; 300 CTAs of 8 warps
    p, a = _profile(name)
    n_lds, lds_wf = _ops(name, line, "LDS")
    ops = _kernels()[name]["lines"][str(line)]["ops"]
    assert ops["LDS"] == [300 * 8, 0, 300 * 8]
    r = _row(p.compare(a), line, "shared wavefronts")
    assert r["ok"] and r["measured"] == r["predicted"]
    (b,) = [x for x in r["beyond_copies"] if x[0] == "broadcast in a pass"]
    assert b == ("broadcast in a pass", "mean", 8) and steps > 1


# ---- explained: the mechanism is stated and checked ------------------------------------------
def test_helper_called_from_two_lines_stack_halves():
    p, a = _profile("tutorial02-stack_halves")
    rows = p.compare(a)
    helper = _kernels()["tutorial02-stack_halves"]["other"]["tnb_sts"]["ops"]["STS.128"]
    assert helper[0] == 2 * 4                                 # one STS.128 a line a CTA (one warp's 4 rows)
    for line in (7, 8):
        r = _row(rows, line, "shared wavefronts")
        assert r["measured"] == 0 and not r["ok"] and r["accounted"]
        assert "helper tnb_sts" in r["reason"] and "lines 7 and 8" in r["reason"]
        assert f"helper's {helper[2]} make {helper[2]}" in r["reason"]


def test_reads_served_from_registers_blend_and_center_rows():
    p, a = _profile("tutorial02-blend")
    r = _row(p.compare(a), 7, "shared wavefronts")
    assert _ops("tutorial02-blend", 7, "LDS") == (0, 0) and r["measured"] == 0 and r["accounted"]
    assert "x from line 5" in r["reason"] and "no shared load" in r["reason"]
    p, a = _profile("tutorial04-center_rows")
    rows = p.compare(a)
    r6 = _row(rows, 6, "shared wavefronts")
    n_sts, sts_wf = _ops("tutorial04-center_rows", 6, "STS")
    assert r6["measured"] == sts_wf == 6 * 16 and r6["accounted"] and "x from line 5" in r6["reason"]
    r5 = _row(rows, 5, "shared wavefronts")
    assert r5["measured"] == 0 and r5["accounted"] and "x at line 6" in r5["reason"]
    assert "drops this line's shared store" in r5["reason"]


def test_register_reuse_needs_the_same_threads():
    # a transposed read of a tile: other threads wrote the elements (and a barrier is between),
    # so compare does not claim register reuse for it
    src = """
@launch(64)
kernel tr(X: tensor<f32>[M, 32], Y: tensor<f32>[32, M]) {
  let r = ctx.block.x * 32
  var x = X[r :+ 32, :]
  Y[:, r :+ 32] = transpose(x)
}
"""
    from tilenb.analysis import analyze
    from tilenb.runtime.gpu.mismatch import _forwarded_reads, _overwritten_stores
    a = analyze(tilenb.compile(src, backend="cpu").tr.ir(), extents={"M": 70})
    assert _forwarded_reads(a, 6) == [] and _overwritten_stores(a, 5) == []
    # the same copy read back untransposed: the same threads, no barrier: register reuse holds
    same = src.replace("Y: tensor<f32>[32, M]", "Y: tensor<f32>[M, 32]").replace(
        "Y[:, r :+ 32] = transpose(x)", "Y[r :+ 32, :] = x * 2.0")
    a = analyze(tilenb.compile(same, backend="cpu").tr.ir(), extents={"M": 70})
    assert _forwarded_reads(a, 6) == [("x", 5)] and _overwritten_stores(a, 5) == []


def test_runtime_start_add_from():
    # start = 8 elements (32 bytes): every warp's 128 bytes lie in 4 sectors, not the plans'
    # worst case of 5; the launch moves (N - start) elements of A, B and Y once each
    N, start, TILE = 10016, 8, 1024
    full = (N - start) // TILE                                  # 9 CTAs wholly inside, the 10th partial
    p, a = _profile("tutorial05-add_from")
    r = _row(p.compare(a), 7, "global sectors")
    assert r["measured"] == 3 * ((N - start) * 4 // 32)
    assert r["ok"] and (r["predicted"], r["predicted_upper"]) == (3 * full * TILE * 4 // 32, 3 * 10 * TILE * 4 // 32)
    # with the start unknown (no scalar), the plans' worst case; the reason says why it differs
    p, a = _profile("tutorial05-add_from", scalars=False)
    r = _row(p.compare(a), 7, "global sectors")
    assert not r["ok"] and r["accounted"]
    assert "sector-aligned" in r["reason"] and "byte 4 of a 32-byte sector" in r["reason"]


# the per-thread element accesses, counted from first principles: the H200's sectors
PER_THREAD = [("tutorial05-add_per_thread", 7, 3 * 10016),   # lanes 128 bytes apart: a sector an element, N of each
              ("tutorial02-row_max", 8, 100 * 20),           # rows 80 bytes apart: a sector an element of X
              ("tutorial02-row_max", 10, 3 * 4 + 1)]         # Out[row]: 3 warps of 32 rows (4 sectors), 4 rows (1)


@pytest.mark.parametrize("name, line, sectors", PER_THREAD)
def test_per_thread_element_accesses(name, line, sectors):
    p, a = _profile(name)
    r = _row(p.compare(a), line, "global sectors")
    assert r["measured"] == sectors
    assert r["ok"] and r["predicted"] == r["predicted_upper"] == sectors and r["elements"] is not None


def test_element_sectors_by_hand():
    # thread t of CTA b reads X[i, 3 * t % 5] for i < M, t < 50: 70 rows of 7 f32 (28 bytes);
    # the figure is counted here by listing each warp request's sectors
    src = """
@launch(64)
kernel pick(X: tensor<f32>[M, 7], Out: tensor<f32>[M]) {
  let t = ctx.thread
  let i = ctx.block.x * 50 + t
  if t < 50 && i < M {
    Out[i] = X[i, 3 * t % 5]
  }
}
"""
    M, grid = 70, 2
    el = element_sectors(tilenb.compile(src, backend="cpu").pick.ir(), (grid, 1, 1), {"M": M})
    want_x = want_out = 0
    for b in range(grid):
        for w in range(2):
            ts = [t for t in range(w * 32, w * 32 + 32) if t < 50 and b * 50 + t < M]
            want_x += len({((b * 50 + t) * 7 + 3 * t % 5) * 4 // 32 for t in ts})
            want_out += len({(b * 50 + t) * 4 // 32 for t in ts})
    (line,) = el
    assert el[line].sectors == want_x + want_out and el[line].tensors == ("X", "Out")
    # a while loop on a var it can follow changes nothing; a break it cannot: unknown, never a guess
    loop = src.replace("if t < 50 && i < M {", "var k = 0\n  while k < 3 {\n    k = k + 1\n  }\n  if t < 50 && i < M {")
    el2 = element_sectors(tilenb.compile(loop, backend="cpu").pick.ir(), (grid, 1, 1), {"M": M})
    assert [e.sectors for e in el2.values()] == [want_x + want_out]
    brk = src.replace("if t < 50 && i < M {", "for q in range(0, 2) {\n    if t > 3 { break }\n  }\n  if t < 50 && i < M {")
    why = []
    assert element_sectors(tilenb.compile(brk, backend="cpu").pick.ir(), (grid, 1, 1), {"M": M}, {}, why) is None
    assert why == ["the break at line 7"]


def test_every_row_of_the_saved_kernels_matches_or_is_accounted():
    # of the 14 rows the first run flagged, every one is predicted or accounted for now
    unpredicted = set()
    left = set()
    for name in _kernels():
        p, a = _profile(name)
        for r in p.compare(a):
            if not (r["ok"] or r["accounted"]):
                left.add((name, r["line"]))
    assert left == unpredicted


# ---- on the GPU, under ncu: the same kernels at other ragged shapes -------------------------------
TUTORIAL_KERNELS = {
    "center_rows": ("tutorial04-center_rows", lambda rng: (rng.standard_normal((37, 64)).astype(np.float32),
                                                           np.zeros((37, 64), np.float32), 2.0), 5),
    "stack_halves": ("tutorial02-stack_halves", lambda rng: (rng.standard_normal((28, 32)).astype(np.float32),
                                                             np.zeros((7, 256), np.float32),
                                                             np.zeros((7, 8), np.float32)), 7),
    "add_per_thread": ("tutorial05-add_per_thread", lambda rng: tuple(
        rng.standard_normal(9000).astype(np.float32) for _ in range(2)) + (np.zeros(9000, np.float32),), 3),
    "row_max": ("tutorial02-row_max", lambda rng: (rng.standard_normal((76, 12)).astype(np.float32),
                                                   np.zeros(76, np.float32)), 2),
    "add_blocks": ("tutorial05-add_blocks", lambda rng: tuple(
        rng.standard_normal((290, 32)).astype(np.float32) for _ in range(2)) + (np.zeros((290, 32), np.float32),), 3),
}


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", sorted(TUTORIAL_KERNELS))
def test_measured_rows_match_or_are_accounted_on_gpu(kernel):
    from tilenb.runtime.gpu.profile import ProfileUnavailable, find_ncu
    if find_ncu() is None:
        pytest.skip("Nsight Compute (ncu) is not installed here")
    name, make, grid = TUTORIAL_KERNELS[kernel]
    k = _kernels()[name]
    mod = tilenb.compile(k["source"], backend="cuda")
    args = make(np.random.default_rng(5))
    try:
        prof = getattr(mod, kernel).profile(grid, *args, **k["variant"])
    except ProfileUnavailable as e:
        if "ERR_NVGPUCTRPERM" in str(e):
            pytest.skip(str(e))
        raise
    a = prof.predicted if prof.predicted is not None else prof.analysis(getattr(mod, kernel))
    rows = prof.compare(a)
    assert rows
    bad = [r for r in rows if not (r["ok"] or r["accounted"])]
    assert not bad, prof.text(a)
