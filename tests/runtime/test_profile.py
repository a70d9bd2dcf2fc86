"""kernel.profile: the profiled variant's #line mapping, reading Nsight Compute's pages into a
Profile beside the analysis, and the one-sentence refusals (no ncu, CPU backend, counters
refused). The page files under data/ncu_h200 are a saved capture from the H200
(scripts/capture_ncu_fixture.py).
"""
import csv
import json
import os
import stat
from pathlib import Path

import numpy as np
import pytest

import tilenb
from tilenb.analysis import analyze
from tilenb.runtime.gpu import ncu as N
from tilenb.runtime.module import Module
from tilenb.runtime.gpu.profile import ProfileUnavailable, build_profile, find_ncu

from support.ncu_fixture import DATA, SOURCE, fixture_dir  # noqa: F401  (DATA: the saved pages)


def _args(m, rng):
    X = rng.standard_normal((m, 64)).astype(np.float32)
    S = rng.standard_normal((m, 1)).astype(np.float32)
    return X, S, np.zeros_like(X)


# ---- the profiled variant's source ---------------------------------------------------------
def test_lined_source_only_adds_line_directives():
    m = tilenb.compile(SOURCE, backend="cpu")
    plain = m.scale_rows.cuda_source(arch="sm_90")
    lined = N.lined_source(plain)
    body = [ln for ln in lined.text.splitlines() if not ln.startswith("#line ")]
    assert body == plain.splitlines()
    # every line of the plain text is preceded by exactly one directive
    lines = lined.text.splitlines()
    assert all(lines[i].startswith("#line ") for i in range(0, len(lines), 2))
    # each statement comment is mapped to its own tile line, and so is the code below it
    for i in range(1, len(lines), 2):
        c = lines[i].strip()
        if c.startswith("// line ") and ":" in c:
            n = int(c[len("// line "):c.index(":")])
            assert lines[i - 1] == f'#line {n} "{N.TILE_FILE}"'
    # the barriers, in code order, are those the analysis placed
    a = analyze(m.scale_rows.ir(), arch="sm_90")
    assert [b for b in lined.barriers if b[0] != "internal"] == [(b.where, b.line) for b in a.barriers]
    assert f'#line 1 "{N.BARRIER_FILE}"' in lines[lines.index(next(ln for ln in lines if "__syncthreads();  // barrier" in ln)) - 1]


def test_lined_source_compiles_with_nvrtc():
    from tilenb.codegen import nvrtc_available, nvrtc_compile
    if not nvrtc_available():
        pytest.skip("no NVRTC library here")
    m = tilenb.compile(SOURCE, backend="cpu")
    lined = N.lined_source(m.scale_rows.cuda_source(arch="sm_90"))
    assert len(nvrtc_compile(lined.text, "sm_90")) > 0


def test_helper_calls_name_the_calling_line():
    m = tilenb.compile(SOURCE, backend="cpu")
    plain = m.scale_rows.cuda_source()
    calls = N.helper_calls(plain)
    assert calls["tnb_stg"] == [7]          # the vector store of Y at line 7
    of = N.helper_of_line(plain)
    stg_lines = [i for i, name in of.items() if name == "tnb_stg"]
    assert stg_lines and "tnb_stg" in plain.splitlines()[stg_lines[0] - 1]


# ---- reading the pages -----------------------------------------------------------------------
def _independent_sums(path: Path):
    """Per (file base name, line): the sums of the SASS rows' sectors and wavefronts, read with
    the csv module alone."""
    sums, fname, header, line = {}, None, None, None
    for row in csv.reader(path.read_text().splitlines()):
        if not row:
            continue
        if row[0] in ("File Name", "File Path"):
            fname, header = os.path.basename(row[1]), None
            continue
        if row[0] == "Line No":
            header = row
            continue
        if header is None or row[0] in ("Kernel Name", "Function Name"):
            continue
        if row[0].isdigit():
            line = int(row[0])
            continue
        rec = dict(zip(header[4:], row[4:]))
        s = sums.setdefault((fname, line), [0, 0])
        for k, col in ((0, N.COL_SECTORS), (1, N.COL_WAVEFRONTS)):
            cell = rec.get(col, "0").replace(",", "").strip()
            s[k] += int(float(cell)) if cell not in ("", "-") else 0       # '-': not applicable
    return sums


def test_profile_from_saved_pages_maps_to_tile_lines():
    d = fixture_dir()
    job = json.loads((d / "job.json").read_text())
    prof = build_profile((d / "raw.csv").read_text(), (d / "source.csv").read_text(), job)
    sums = _independent_sums(d / "source.csv")
    # a tile line's own rows already hold the instructions of the helpers inlined there (ncu
    # lists them again under the helper's own line, which must not count twice)
    for (f, ln), (sec, wf) in sums.items():
        if f == N.TILE_FILE:
            assert prof.lines[ln].sectors == sec and prof.lines[ln].wavefronts == wf
    # every global sector of the launch is on exactly one line: the per-line sums equal the
    # kernel's own counters (read independently from the raw page)
    raw = N.read_raw((d / "raw.csv").read_text())[0]["values"]
    lines = list(prof.lines.values()) + list(prof.other.values())
    assert sum(f.sectors for f in lines) == raw["memory_l2_theoretical_sectors_global"]
    assert sum(f.st_sectors for f in lines) == raw["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"]
    # the store of Y runs in the prelude's tnb_stg, called from line 7 only
    assert "tnb_stg" in prof.lines[7].via and prof.lines[7].st_sectors > 0
    # the barrier's samples
    bars = [(f, ln) for f, ln in sums if f == N.BARRIER_FILE]
    assert len(prof.barriers) == len(job["barriers"]) and len(bars) <= len(prof.barriers)
    assert all(0.0 <= b["share"] <= 1.0 for b in prof.barriers)
    assert prof.kernel_metrics["duration_ns"] > 0 and prof.dram_bytes > 0


def test_profile_beside_the_analysis():
    d = fixture_dir()
    job = json.loads((d / "job.json").read_text())
    prof = build_profile((d / "raw.csv").read_text(), (d / "source.csv").read_text(), job)
    m = tilenb.compile(job.get("source") or SOURCE, backend="cpu")
    a = prof.analysis(m.scale_rows)
    rows = {(r["line"], r["metric"]): r for r in prof.compare(a)}
    ctas = prof.ctas
    for cp in a.copies:
        r = rows[(cp.line, "global sectors")]
        assert r["predicted"] == cp.sectors * ctas
        assert r["measured"] == prof.lines[cp.line].sectors
        assert r["ok"] == (r["measured"] == r["predicted"])
        if not r["ok"]:
            assert r["reason"]
    # line 7 reads x (the copy plan of the store) and also s, the [32, 1] operand broadcast along
    # the rows: 32 x 64 elements in 4-element chunks are 512 chunks, 2 per thread, each reading
    # its row's s once (one LDS); a warp's 32 lanes cover 2 rows (16 chunks a row), so each
    # request touches 2 words: 1 wavefront, 2 requests a warp, 16 a CTA. The prediction is the
    # copy plan's wavefronts plus those (it was the copy plan's alone: 640 against 800 measured)
    r7 = rows[(7, "shared wavefronts")]
    store = next(cp for cp in a.copies if cp.line == 7)
    warps = 256 // 32
    assert r7["predicted"] == (store.wavefronts + warps * 2) * ctas
    assert r7["beyond_copies"] == [("broadcast read", "s", warps * 2)]
    f7 = prof.lines[7]
    assert f7.ops["LDS"][0] == warps * 2 * ctas           # the broadcast reads, as the SASS counts them
    assert r7["measured"] == f7.ops["LDS.128"][2] + f7.ops["LDS"][2]
    assert r7["ok"] and r7["measured"] == r7["predicted"], r7
    text = prof.text(a)
    assert "for the broadcast read of s" in text
    assert "line | metric | predicted | measured" in text and "barrier before line 7" in text


# ncu's names of the stall reasons on the raw page, for the source page's stall_* columns
_PCSAMP = {"barrier": "barrier", "imc": "imc_miss", "math": "math_pipe_throttle", "no_inst": "no_instructions",
           "selected": "selected", "wait": "wait", "short_sb": "short_scoreboard", "long_sb": "long_scoreboard",
           "mio": "mio_throttle", "lg": "lg_throttle", "not_selected": "not_selected", "branch_resolving":
           "branch_resolving", "dispatch": "dispatch_stall", "drain": "drain", "membar": "membar", "misc": "misc",
           "sleep": "sleeping", "tex": "tex_throttle"}


def test_stall_samples_count_each_instruction_once():
    """ncu lists an inlined helper's instructions (tnb_clamp, tnb_stg) under the calling tile line
    and again under the helper's own line: the kernel's samples and stall reasons count each
    instruction once, and equal the raw page's own launch totals."""
    d = fixture_dir()
    job = json.loads((d / "job.json").read_text())
    prof = build_profile((d / "raw.csv").read_text(), (d / "source.csv").read_text(), job)
    raw = N.read_raw((d / "raw.csv").read_text())[0]["values"]
    figs = list(prof.lines.values()) + list(prof.other.values())
    total = sum(f.samples for f in figs) + sum(b["samples"] for b in prof.barriers)
    assert total == raw["smsp__pcsamp_sample_count"]
    for reason, n in prof.stalls:
        assert n == raw[f"smsp__pcsamp_warps_issue_stalled_{_PCSAMP[reason]}"], reason
    assert sum(n for _, n in prof.stalls) == total
    # the helpers' own lines, read independently: their samples are all on the calling lines
    per_addr = {}
    for src in N.read_source((d / "source.csv").read_text()):
        for r in src.sass:
            per_addr[r.address] = int(r.values.get(N.COL_SAMPLES, 0))
    assert sum(per_addr.values()) == total
    assert prof.other.get("tnb_clamp") is None or prof.other["tnb_clamp"].samples == 0


def test_source_lines_with_quotes_are_read_whole():
    """ncu does not double the quotes inside a cell: the tnb_stg line (`asm volatile("st.global...")`)
    and the kernel's `extern "C"` line keep their text, and their counters stay in their columns."""
    d = fixture_dir()
    srcs = {(s.file, s.line): s for s in N.read_source((d / "source.csv").read_text())}
    stg = next(s for (f, _), s in srcs.items() if f == N.CUDA_FILE and "st.global.v4.b32" in s.text)
    assert stg.text.startswith('asm volatile("st.global.v4.b32 [%0], {%1,%2,%3,%4};" :: "l"(p)')
    assert stg.values[N.COL_SECTORS] == sum(r.values.get(N.COL_SECTORS, 0) for r in stg.sass)
    assert stg.values[N.COL_SAMPLES] == sum(r.values.get(N.COL_SAMPLES, 0) for r in stg.sass)
    head = next(s for (f, _), s in srcs.items() if f == N.CUDA_FILE and "__global__" in s.text)
    assert head.text.startswith('extern "C" __global__ void')
    assert head.values[N.COL_EXECUTED] == sum(r.values.get(N.COL_EXECUTED, 0) for r in head.sass)
    # a cell holding '","' itself is joined back too
    text = ('"File Path","x/generated.cu"\n"Function Name","k"\n"Line No","Source","Address","Source","L1 Wavefronts Shared"\n'
            '"3","f("a","b");","-","-","7"\n"","","0x10","  LDS R1, [R2]","7"\n')
    (line,) = N.read_source(text)
    assert line.text == 'f("a","b");' and line.values["L1 Wavefronts Shared"] == 7 and len(line.sass) == 1


# ---- refusals ------------------------------------------------------------------------------
def _cuda_module():
    return Module(tilenb.compile(SOURCE, backend="cpu").checked, "cuda")


def _one_sentence(msg: str):
    assert msg.endswith(".") and ". " not in msg, msg


def test_cpu_backend_says_why():
    m = tilenb.compile(SOURCE, backend="cpu")
    with pytest.raises(ProfileUnavailable) as e:
        m.scale_rows.profile(10, *_args(320, np.random.default_rng(0)))
    assert "CPU backend" in str(e.value)
    _one_sentence(str(e.value))


def test_missing_ncu_says_what_to_install(monkeypatch):
    monkeypatch.delenv("TILENB_NCU", raising=False)
    monkeypatch.setenv("PATH", "")
    monkeypatch.setattr("tilenb.runtime.gpu.profile.TOOLKIT_NCU", "/nonexistent/ncu")
    assert find_ncu() is None
    X, S, Y = _args(320, np.random.default_rng(1))
    with pytest.raises(ProfileUnavailable) as e:
        _cuda_module().scale_rows.profile(10, X, S, Y)
    msg = str(e.value)
    assert "ncu" in msg and "install Nsight Compute" in msg
    _one_sentence(msg)
    assert not Y.any()          # nothing ran


def test_counters_refused_says_what_to_do(tmp_path):
    fake = tmp_path / "ncu"
    fake.write_text("#!/bin/sh\necho '==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access "
                    "NVIDIA GPU Performance Counters on the target device 0.'\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    X, S, Y = _args(300, np.random.default_rng(2))
    with pytest.raises(ProfileUnavailable) as e:
        _cuda_module().scale_rows.profile(10, X, S, Y, ncu=str(fake))
    msg = str(e.value)
    assert "ERR_NVGPUCTRPERM" in msg and "root" in msg
    _one_sentence(msg)


def test_the_profiled_process_imports_the_package_not_its_modules(tmp_path):
    """The process ncu starts (`python -m tilenb.runtime.gpu.profile_child`) gets the folder that
    holds the tilenb package on its path, not the package itself (whose types.py would shadow
    the standard library's): a stand-in ncu runs the same interpreter with the same environment."""
    fake = tmp_path / "ncu"
    fake.write_text('#!/bin/sh\nwhile [ "$1" != "-m" ]; do prev="$1"; shift; done\n'
                    '"$prev" -c "import types, tilenb.runtime.gpu.profile_child; types.MappingProxyType; '
                    'print(\'child imports ok\')" 2>&1\nexit 1\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    X, S, Y = _args(300, np.random.default_rng(3))
    with pytest.raises(ProfileUnavailable) as e:
        _cuda_module().scale_rows.profile(10, X, S, Y, ncu=str(fake))
    assert "child imports ok" in str(e.value), str(e.value)


# ---- on the GPU, under ncu -----------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("m, full", [(320, 10), (300, 9)])   # 300: the last CTA holds 12 of 32 rows
def test_profile_copy_kernel_on_gpu(m, full):
    if find_ncu() is None:
        pytest.skip("Nsight Compute (ncu) is not installed here")
    mod = tilenb.compile(SOURCE, backend="cuda")
    X, S, Y = _args(m, np.random.default_rng(3))
    grid = (m + 31) // 32
    try:
        prof = mod.scale_rows.profile(grid, X, S, Y)
    except ProfileUnavailable as e:
        if "ERR_NVGPUCTRPERM" in str(e):
            pytest.skip(str(e))
        raise
    np.testing.assert_allclose(Y, X * S, rtol=1e-6)        # the outputs are one launch's
    a = prof.analysis(mod.scale_rows)
    rows = {(r["line"], r["metric"]): r for r in prof.compare(a, full_ctas=full)}
    for cp in a.copies:                 # loads of X and S, the store of Y
        r = rows[(cp.line, "global sectors")]
        assert r["ok"], (r, prof.text(a))
        if m == 320:
            assert r["measured"] == cp.sectors * grid
    # the whole launch's global sectors equal the per-line sums (nothing left unattributed)
    total = prof.kernel_metrics["global_ld_sectors"] + prof.kernel_metrics["global_st_sectors"]
    assert total == sum(f.ld_sectors + f.st_sectors for f in prof.lines.values())
    assert len([b for b in prof.barriers if b["where"] != "internal"]) == len(a.barriers)


# ---- which CTAs the prediction describes exactly -----------------------------------------------
def test_full_ctas_counted_from_the_slice_starts():
    from tilenb.runtime.gpu.profile import count_full_ctas, predict_launch
    m = tilenb.compile(SOURCE, backend="cpu")
    for rows, grid in ((320, 10), (300, 10), (33, 2)):
        X, S, Y = _args(rows, np.random.default_rng(4))
        p = predict_launch(m.scale_rows, grid, (X, S, Y))
        starts = 32 * np.arange(grid)                       # r = ctx.block.x * 32, windows of 32 rows
        assert p.full_ctas == int(np.count_nonzero(starts + 32 <= rows))
        lo = {(r["line"], r["metric"]): r for r in p.rows}
        for cp in p.analysis.copies:
            r = lo[(cp.line, "global sectors")]
            assert (r["predicted"], r["predicted_upper"]) == (cp.sectors * p.full_ctas, cp.sectors * grid)
    # a start that depends on a scalar argument and a 2-D grid
    src = '''
@launch(128)
kernel shifted(X: tensor<f32>[M, N], Y: tensor<f32>[M, N], s: i32) {
  let r = ctx.block.y * 8 + s
  let c = ctx.block.x * 64
  Y[r :+ 8, c :+ 64] = X[r :+ 8, c :+ 64]
}'''
    k = tilenb.compile(src, backend="cpu").shifted
    M_, N_, s = 50, 200, 3
    X = np.zeros((M_, N_), np.float32)
    gx, gy = -(-N_ // 64), -(-M_ // 8)
    bx, by = np.meshgrid(np.arange(gx), np.arange(gy))
    want = int(np.count_nonzero((by * 8 + s + 8 <= M_) & (bx * 64 + 64 <= N_)))
    assert predict_launch(k, (gx, gy), (X, X.copy(), np.int32(s))).full_ctas == want
    # a slice under a loop: not known
    loop = '''
@launch(128)
kernel rows_loop(X: tensor<f32>[M, 64], Y: tensor<f32>[M, 64]) {
  for i in range(0, 4) {
    let r = (ctx.block.x * 4 + i) * 8
    Y[r :+ 8, :] = X[r :+ 8, :]
  }
}'''
    k = tilenb.compile(loop, backend="cpu").rows_loop
    kir = k.ir()
    assert count_full_ctas(kir, (3, 1, 1), {"M": 90}) is None


def test_full_ctas_of_a_large_grid_are_counted_a_chunk_at_a_time():
    """count_full_ctas (and so measure() and the prediction of any launch) evaluates the slice
    starts of every CTA; it built arrays of all of them at once, kept them alive through its
    recursive evaluator, so 2**28 CTAs took 2.4 GB and a legal grid of 2**31 - 1 CTAs raised
    numpy's MemoryError. Counted in chunks, a 2-D grid of 2**23 CTAs whose chunks split its y
    rows gives the exact count in bounded memory."""
    import tracemalloc

    from tilenb.runtime.gpu.profile import count_full_ctas
    src = '''
@launch(128)
kernel blocks(X: tensor<f32>[M, N], Y: tensor<f32>[M, N]) {
  let r = ctx.block.y * 16
  let c = ctx.block.x * 32
  Y[r :+ 16, c :+ 32] = X[r :+ 16, c :+ 32]
}'''
    kir = tilenb.compile(src, backend="cpu").blocks.ir()
    gx, gy = 3 * 2 ** 11 + 5, 2 ** 10 + 7           # 6,305,733 CTAs: several chunks, none aligned to rows
    M_, N_ = 16 * 700 + 5, 32 * 5000 + 1
    want = min(gy, M_ // 16) * min(gx, N_ // 32)      # the CTAs whose two windows lie inside
    tracemalloc.start()
    try:
        got = count_full_ctas(kir, (gx, gy, 1), {"M": M_, "N": N_})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got == want
    assert peak < 150 * 2 ** 20, f"counting took {peak / 2 ** 20:.0f} MB"
