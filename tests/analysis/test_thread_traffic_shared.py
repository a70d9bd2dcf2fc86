"""Per-thread follower (analysis.thread_traffic) beyond global element reads: shared-tile element
accesses (bank-model wavefronts per warp request), per-thread atomics, and the turns each CTA runs
the lines of a loop (with the CTAs whose slices stay inside, through the loop). Every expected
figure is counted here by listing each warp request's words / sectors, independently of the
follower, at ragged shapes; tutorial 04's scans are checked against the H200's counts
(bench/results/h200_ncu_tutorials_second.json: STS 4, LDS 25, STS 28)."""
import numpy as np
import tilenb
from tilenb.analysis.thread_traffic import element_sectors, statement_turns
from tilenb.runtime.gpu.profile import predicted_lines

from support.notebooks import kernel_cell

SCAN = kernel_cell("04", "inclusive_scan")      # the tutorial's own text, its lines as the notebook shows them


def _wavefronts(words_per_warp):
    """Wavefronts of one request: the most distinct 4-byte words any of the 32 banks holds."""
    banks = {}
    for w in set(words_per_warp):
        banks.setdefault(w % 32, set()).add(w)
    return max(len(s) for s in banks.values())


def _line(src, text):
    return next(i for i, l in enumerate(src.splitlines(), 1) if text in l)


def test_scan_shared_element_wavefronts_match_h200():
    k = tilenb.compile(SCAN, backend="cpu").inclusive_scan
    el = element_sectors(k.ir(), (1, 1, 1), {"N": 28})
    first, read, write = _line(SCAN, "buf[0, t] = v"), _line(SCAN, "add = buf"), _line(SCAN, "    buf[0, t] = v")
    # by hand: the rounds step = 1, 2, ..., 64; a warp requests when one of its lanes runs the line
    want_read = 0
    step = 1
    while step < 128:
        for w in range(4):
            ts = [t for t in range(32 * w, 32 * w + 32) if t >= step]
            if ts:
                want_read += _wavefronts([t - step for t in ts])
        step *= 2
    assert want_read == 25                       # the H200 counted LDS 25 (tutorial 04, N = 28)
    assert el[first].wavefronts == 4 and el[first].tiles == ("buf",)
    assert el[read].wavefronts == want_read and el[read].shared_requests == 25
    assert el[write].wavefronts == 7 * 4 == 28   # STS 28 on the H200
    assert el[write].sectors == 0 and el[write].tensors == ()


def test_bank_conflicts_of_a_strided_shared_column():
    # thread t writes column t % 7 of row t // 7 of a [19, 32] tile, then reads row (t * 5) % 19
    # of column 0: the words and their banks are listed here, per warp
    src = """
@launch(96)
kernel strided(X: tensor<f32>[N], Y: tensor<f32>[N]) {
  let t = ctx.thread
  var s: tile<f32>[19, 32]
  if t < 91 { s[t / 7, t % 7] = 1.0 }
  barrier()
  if t < N { Y[t] = s[(t * 5) % 19, 0] }
}
"""
    k = tilenb.compile(src, backend="cpu").strided
    N = 77
    el = element_sectors(k.ir(), (1, 1, 1), {"N": N})
    wl, rl = _line(src, "s[t / 7"), _line(src, "Y[t] = s")
    want_w = sum(_wavefronts([(t // 7) * 32 + t % 7 for t in range(32 * w, 32 * w + 32) if t < 91])
                 for w in range(3) if 32 * w < 91)
    want_r = sum(_wavefronts([((t * 5) % 19) * 32 for t in range(32 * w, 32 * w + 32) if t < N])
                 for w in range(3) if 32 * w < N)
    assert el[wl].wavefronts == want_w
    assert el[rl].wavefronts == want_r and want_r > 3       # conflicts: rows of 32 words, column 0 in bank 0
    assert el[rl].sectors == len({t * 4 // 32 for t in range(0, 32)}) * 2 + len({t * 4 // 32 for t in range(64, N)})


def test_per_thread_atomic_counts_an_l2_request_and_a_bin_range():
    src = kernel_cell("04", "length_histogram")
    k = tilenb.compile(src, backend="cpu").length_histogram
    N = 150
    (line, rec), = element_sectors(k.ir(), (2, 1, 1), {"N": N}).items()
    # L[i]: the sectors of each warp's lanes; Hist[bin]: a bin read from memory, so at least one
    # sector and at most min(lanes, the 2 sectors of 16 i32) a request
    warps = [[i for i in range(32 * w, 32 * w + 32) if i < N] for w in range(8)]
    warps = [w for w in warps if w]
    sec_l = sum(len({i * 4 // 32 for i in w}) for w in warps)
    assert rec.sectors == sec_l + len(warps)
    assert rec.sectors_upper == sec_l + sum(min(len(w), 2) for w in warps)
    assert rec.requests == 2 * len(warps) and rec.tensors == ("L", "Hist")


def test_loop_turns_and_full_ctas_of_tutorial_04_project():
    src = kernel_cell("04", "project")            # TM = TK = 16, its one variant
    k = tilenb.compile(src, backend="cpu").project
    M, K = 40, 70                                 # 3 CTAs, the last one 8 rows; 5 turns, the last 6 columns
    grid = (-(-M // 16), 1, 1)
    st = statement_turns(k.ir(), grid, {"M": M, "K": K})
    la, lb, lc = _line(src, "var a = A"), _line(src, "var b = W"), _line(src, "C[r")
    turns = -(-K // 16)
    assert st.lines[la] == {turns: 3} and st.lines[lb] == {turns: 3} and lc not in st.lines
    # a CTA is full when every slice, every turn, is inside: rows r..r+16 <= M and k+16 <= K
    full = sum(all(b * 16 + 16 <= M and kk + 16 <= K for kk in range(0, K, 16)) for b in range(grid[0]))
    assert st.full_ctas == full == 0              # K = 70: the last turn's A slice is ragged
    st2 = statement_turns(k.ir(), grid, {"M": M, "K": 64})
    assert st2.full_ctas == 2
    from tilenb.analysis import analyze
    a = analyze(k.ir(), extents={"M": M, "K": 64})
    rows = {(r["line"], r["metric"]): r for r in predicted_lines(a, 3, st2.full_ctas, turns=st2.lines)}
    per = {int(p.line): int(p.sectors) for p in a.copies}
    # the copy of W at line lb: its per-CTA figure once a turn (4 turns), over 2 full CTAs to all 3
    r = rows[(lb, "global sectors")]
    assert (r["predicted"], r["predicted_upper"]) == (per[lb] * 4 * 2, per[lb] * 4 * 3)
    assert per[lb] == 16 * 64 * 4 // 32           # 16 rows of 64 f32, sector-aligned
    r = rows[(lc, "global sectors")]              # the store runs once a CTA
    assert (r["predicted"], r["predicted_upper"]) == (per[lc] * 2, per[lc] * 3)


def test_no_loop_no_turns():
    src = """
@launch(64)
kernel cp(X: tensor<f32>[N], Y: tensor<f32>[N]) {
  let i = ctx.block.x * 64
  Y[i :+ 64] = X[i :+ 64]
}
"""
    k = tilenb.compile(src, backend="cpu").cp
    assert statement_turns(k.ir(), (3, 1, 1), {"N": 150}) is None
