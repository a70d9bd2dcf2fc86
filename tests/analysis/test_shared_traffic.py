"""Shared-memory traffic outside the copy plans (tilenb/analysis/shared_traffic.py), the per-element
sector requests of a broadcast tensor operand (analysis/copies.py), and tile atomics of one op
needing no barrier between them (analysis/barriers.py).

Expected figures are computed here independently: a small bank model of its own (32 banks of 4
bytes; phases of 32 / 16 / 8 lanes for 4 / 8 / 16-byte accesses; distinct words per bank), and
sectors as distinct 32-byte blocks of each warp request's addresses, at shapes that are not powers
of two or multiples of the CTA's work.
"""
from __future__ import annotations


import numpy as np
import pytest

import tilenb
from tilenb.analysis import analyze
from tilenb.codegen import generate

from support import cuda_emulator as EMU
from support.cuda_emulator import needs_gxx


def bank_wavefronts(addrs, nbytes):
    """Wavefronts of one warp request: addrs[lane] (None: lane idle), each lane nbytes bytes."""
    per_phase = 32 if nbytes <= 4 else 16 if nbytes <= 8 else 8
    total = 0
    for ph in range(32 // per_phase):
        words = set()
        for lane in range(ph * per_phase, (ph + 1) * per_phase):
            a = addrs[lane]
            if a is None:
                continue
            for w in range(a // 4, (a + nbytes - 1) // 4 + 1):
                words.add(w)
        if words:
            banks = {}
            for w in words:
                banks[w % 32] = banks.get(w % 32, 0) + 1
            total += max(banks.values())
    return total


def expected_rms(R, D, T, V):
    """By hand, the shared accesses of `var x = X[...]; let inv = rsqrt(rowsum(x * x) ...);
    Y[...] = x * inv * G[...]` (f32) beyond the copy plans: (loads, stores) wavefronts per CTA."""
    NW = T // 32
    steps = D // V // T
    ld = st = 0
    for row in range(R):                 # the pass: thread t reads chunk (t + s*T) * V of the row
        for s in range(steps):
            for w in range(NW):
                addrs = [(row * D + ((w * 32 + lane) + s * T) * V) * 4 for lane in range(32)]
                ld += bank_wavefronts(addrs, V * 4)
    st += R * NW                         # lane 0 of every warp, every row: one lane, one wavefront
    # the owner of output o (thread o) reads its row's NW partials in the widest loads that divide them
    vb = 16 if NW % 4 == 0 else 8 if NW % 2 == 0 else 4
    for q in range(NW * 4 // vb):
        for w in range(-(-R // 32)):
            addrs = [(o * NW * 4 + q * vb) if (o := w * 32 + lane) < R else None for lane in range(32)]
            ld += bank_wavefronts(addrs, vb)
    inv_base = R * D * 4
    for w in range(-(-R // 32)):         # the result: thread o writes inv[o]
        addrs = [(inv_base + o * 4) if (o := w * 32 + lane) < R else None for lane in range(32)]
        st += bank_wavefronts(addrs, 4)
    return ld, st


RMS = """
@launch({T})
@dynshared
@grid(cdiv(M, {R}))
kernel rms(X: tensor<f32>[M, {D}], G: tensor<f32>[1, {D}], Y: tensor<f32>[M, {D}], eps: f32) {{
  let r = ctx.block.x * {R}
  var x = X[r :+ {R}, :]
  let inv = rsqrt(rowsum(x * x) / f32({D}) + eps)
  Y[r :+ {R}, :] = x * inv * G[0 :+ 1, :]
}}
"""


@pytest.mark.parametrize("R,D,T", [(1, 1536, 128), (3, 1536, 128), (1, 2560, 64), (5, 1152, 96)])
def test_reduction_passes_partials_and_result(R, D, T):
    a = tilenb.compile(RMS.format(R=R, D=D, T=T), backend="cpu").rms.analysis()
    plan = next(p for p in a.statements if p.row_reductions)
    red = [t for t in a.shared_traffic if t.position == plan.position]
    V = plan.row_reductions[0][1]
    ld, st = expected_rms(R, D, T, V)
    assert sum(t.wavefronts for t in red if t.direction == "load") == ld
    assert sum(t.wavefronts for t in red if t.direction == "store") == st
    kinds = {t.kind for t in red}
    assert kinds == {"reduction pass", "partials store", "partials load", "reduction result"}
    for t in a.shared_traffic:
        assert t.wavefronts == sum(w for _, w in t.warps)


@pytest.mark.parametrize("R,D,T", [(1, 1536, 128), (3, 1536, 128)])
def test_the_scalar_kept_in_a_register_is_read_once_per_thread(R, D, T):
    k = tilenb.compile(RMS.format(R=R, D=D, T=T), backend="cpu").rms
    a = k.analysis()
    held = [t for t in a.shared_traffic if t.kind == "register scalar"]
    if R == 1:
        # one request per warp, every lane the same word: one wavefront each
        assert [(t.tile, t.requests, t.wavefronts, t.in_registers) for t in held] == [("inv", T // 32, T // 32, True)]
        assert "const float u" in k.cuda_source() and "// inv, the same for every element" in k.cuda_source()
    else:
        assert held == []        # inv is [R, 1]: read per chunk, a broadcast read
        b = [t for t in a.shared_traffic if t.kind == "broadcast read"]
        assert [t.tile for t in b] == ["inv"]
        # the store's partition: chunk k of V elements -> thread k % T; one element a chunk
        V = next(p for p in a.statements if p.what.startswith("the store")).vector_width
        nch = R * D // V
        want = 0
        for step in range(-(-nch // T)):
            for w in range(T // 32):
                addrs = []
                for lane in range(32):
                    kk = step * T + w * 32 + lane
                    addrs.append(R * D * 4 + (kk * V // D) * 4 if kk < nch else None)
                if any(x is not None for x in addrs):
                    want += bank_wavefronts(addrs, 4)
        assert b[0].wavefronts == want


def test_traffic_totals_add_copy_plans_and_shared_traffic():
    a = tilenb.compile(RMS.format(R=1, D=1536, T=128), backend="cpu").rms.analysis()
    tot = a.traffic()
    assert tot["shared_st_wavefronts"] == sum(c.wavefronts for c in a.copies if c.direction == "load") + \
        sum(t.wavefronts for t in a.shared_traffic if t.direction == "store")
    assert tot["shared_ld_wavefronts"] == sum(c.wavefronts for c in a.copies if c.direction == "store") + \
        sum(t.wavefronts for t in a.shared_traffic if t.direction == "load")
    j = a.to_json()
    assert j["traffic"] == tot and len(j["shared_traffic"]) == len(a.shared_traffic)


SCALE = """
@launch({T})
@grid(cdiv(M, {R}))
kernel sr(X: tensor<f32>[M, {D}], S: tensor<f32>[M, 1], Y: tensor<f32>[M, {D}]) {{
  let r = ctx.block.x * {R}
  Y[r :+ {R}, :] = X[r :+ {R}, :] * S[r :+ {R}, :]
}}
"""


@pytest.mark.parametrize("R,D,T", [(2, 1000, 128), (3, 328, 64)])
def test_a_broadcast_tensor_operand_is_a_request_per_element(R, D, T):
    a = analyze(tilenb.compile(SCALE.format(R=R, D=D, T=T), backend="cpu").sr.ir(), extents={"M": 700})
    cp = next(c for c in a.copies if c.tensor == "S")
    V = cp.vector_width
    assert V > 1
    nch = R * D // V
    # S's rows r + i sit 4 bytes apart; the start r is a multiple of R rows, so its byte offset a
    # multiple of 4R: the worst over its positions in a sector
    from math import gcd
    worst = 0
    for res in range(0, 32, gcd(4 * R, 32)):
        n = 0
        for step in range(-(-nch // T)):
            for w in range(-(-T // 32)):
                rows = {(step * T + w * 32 + lane) * V // D for lane in range(32) if step * T + w * 32 + lane < nch}
                n += V * len({(res + i * 4) // 32 for i in rows})   # each element of the chunk: a load
        worst = max(worst, n)
    assert cp.sectors == worst


TWICE = """
@launch(64)
@grid(cdiv(M, 3))
kernel twice(X: tensor<f32>[M, 70], Out: tensor<f32>[2, 70]) {
  let r = ctx.block.x * 3
  atomic_add(Out[0 :+ 2, 0 :+ 64], X[r :+ 2, 0 :+ 64])
  atomic_add(Out[1 :+ 1, 4 :+ 64], X[r :+ 1, 6 :+ 64])
  atomic_max(Out[0 :+ 1, 2 :+ 64], X[r :+ 1, 0 :+ 64])
}
"""


def _twice_numpy(X):
    M = X.shape[0]
    out = np.zeros((2, 70), np.float32)
    for b in range(-(-M // 3)):
        r = 3 * b
        blk = np.zeros((2, 70), np.float32)
        rows = X[r:r + 2]
        blk[:rows.shape[0], 0:64] = rows[:, 0:64]
        out[:, 0:64] += blk[:, 0:64]
        if r < M:
            out[1, 4:68] += X[r, 6:70]
    # the max runs last in every CTA but the CTAs' order is free: it is applied against the sums
    return out


def test_two_atomics_of_one_op_need_no_barrier_an_atomic_of_another_op_does():
    k = tilenb.compile(TWICE, backend="cpu").twice
    a = k.analysis()
    lines = {p.line: p.what for p in a.statements}
    add2 = next(ln for ln, w in lines.items() if w == "the atomic_add into Out" and ln == 7)
    mx = next(ln for ln, w in lines.items() if w == "the atomic_max into Out")
    got = {b.line for b in a.barriers if b.tile == "Out"}
    assert add2 not in got           # the two adds commute: no barrier between them
    assert mx in got                 # the max does not commute with the adds before it
    src = k.cuda_source()
    assert src.count("__syncthreads()") == len(a.barriers)


@needs_gxx
def test_two_atomics_emulated_cuda_agrees_with_the_cpu_executor(tmp_path):
    mod = tilenb.compile(TWICE.replace("  atomic_max(Out[0 :+ 1, 2 :+ 64], X[r :+ 1, 0 :+ 64])\n", ""), backend="cpu")
    M = 7
    X = np.random.default_rng(3).integers(-8, 8, (M, 70)).astype(np.float32)
    Out = np.zeros((2, 70), np.float32)
    got = Out.copy()
    mod.twice(X, Out)
    np.testing.assert_array_equal(Out, _twice_numpy(X))
    EMU.run(generate(mod.twice.ir()), [X, got], {"M": M}, (-(-M // 3), 1, 1), workdir=tmp_path)
    np.testing.assert_array_equal(got, Out)


@pytest.mark.filterwarnings("ignore::tilenb.EdgeWarning")
@pytest.mark.parametrize("M", [1, 7, 20])
def test_two_atomics_cpu_gives_numpys_result(M):
    mod = tilenb.compile(TWICE.replace("  atomic_max(Out[0 :+ 1, 2 :+ 64], X[r :+ 1, 0 :+ 64])\n", ""), backend="cpu")
    X = np.random.default_rng(M).integers(-8, 8, (M, 70)).astype(np.float32)
    Out = np.zeros((2, 70), np.float32)
    mod.twice(X, Out, debug=True)
    np.testing.assert_array_equal(Out, _twice_numpy(X))


def test_the_thread_map_view_shows_the_shared_traffic_and_the_totals():
    from tilenb.notebook import build, render
    k = tilenb.compile(RMS.format(R=1, D=1536, T=128), backend="cpu").rms
    a = k.analysis()
    (view,) = build.make_views(k, show=("threads",))
    assert view.shared == [t.to_json() for t in a.shared_traffic] and view.traffic == a.traffic()
    text = render.text("threadmap", view.state())
    ld, st = expected_rms(1, 1536, 128, next(p for p in a.statements if p.row_reductions).row_reductions[0][1])
    assert "reduction pass of x, ld" in text and "register scalar of inv (kept in a register)" in text
    tot = a.traffic()
    assert f"shared {tot['shared_ld_wavefronts']} load / {tot['shared_st_wavefronts']} store wavefronts" in text
    # the totals: the copies' shared sides (x written once, read once by the store) plus these
    copy_wf = sum(c.wavefronts for c in a.copies if c.tile == "x")
    assert tot["shared_ld_wavefronts"] == copy_wf // 2 + ld + 128 // 32
    assert tot["shared_st_wavefronts"] == copy_wf // 2 + st
