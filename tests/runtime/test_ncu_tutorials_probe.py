"""bench/probes/ncu_tutorials.py without a GPU: it imports and collects, and its table of
predicted beside measured, written from the saved H200 capture (data/ncu_h200), holds what
`Profile.compare` says line by line."""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tilenb
from tilenb.runtime.gpu.profile import build_profile, predict_launch

from support.ncu_fixture import SOURCE, fixture_dir
from support.notebooks import kernel_cells

ROOT = Path(__file__).resolve().parents[2]


def _probe():
    spec = importlib.util.spec_from_file_location("ncu_tutorials", ROOT / "bench" / "probes" / "ncu_tutorials.py")
    mod = sys.modules.get("ncu_tutorials")
    if mod is None:
        mod = importlib.util.module_from_spec(spec)
        sys.modules["ncu_tutorials"] = mod          # its dataclasses look their module up
        spec.loader.exec_module(mod)
    return mod


def test_table_from_the_saved_capture():
    P = _probe()
    d = fixture_dir()
    job = json.loads((d / "job.json").read_text())
    prof = build_profile((d / "raw.csv").read_text(), (d / "source.csv").read_text(), job)
    m = tilenb.compile(SOURCE, backend="cpu")
    a = prof.analysis(m.scale_rows)
    rows = P.table_rows("fixture", "scale_rows", prof, a)
    cmp = prof.compare(a)
    assert [(r["line"], r["metric"], r["predicted"], r["measured"]) for r in rows] == \
        [(r["line"], r["metric"], r["predicted"], r["measured"]) for r in cmp]
    md = P.markdown(rows)
    lines = md.splitlines()
    assert lines[0].startswith("| source | kernel | line | metric | predicted | measured | verdict")
    for r in cmp:
        f = prof.lines[r["line"]]
        meas = f.sectors if r["metric"] == "global sectors" else f.wavefronts
        assert any(ln.startswith(f"| fixture | scale_rows | {r['line']} | {r['metric']} | {r['predicted']}")
                   and f"| {meas} | " in ln for ln in lines), (r, md)
    # the broadcast of s is part of line 7's prediction, and every line agrees on this capture
    assert "| 7 | shared wavefronts | 800 (with 160 for the broadcast read of s) | 800 | matches |" in md
    assert lines[-1] == f"verdicts: matches {len(cmp)}"


def test_rows_without_a_measurement_say_why():
    P = _probe()
    m = tilenb.compile(SOURCE, backend="cpu")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 64)).astype(np.float32)
    pred = predict_launch(m.scale_rows, 10, (X, X[:, :1].copy(), np.zeros_like(X)))
    rows = P.table_rows("tutorial 11", "scale_rows", why="no ncu here", prediction=pred)
    assert {r["verdict"] for r in rows} == {"not measured"} and all(r["measured"] is None for r in rows)
    md = P.markdown(rows)
    assert "| tutorial 11 | scale_rows | 5 | global sectors | 2304..2560 | - | not measured: no ncu here |" in md
    (row,) = P.table_rows("suite", "k", why="not profiled (time budget)")
    assert row["line"] is None and "time budget" in P.markdown([row])


def test_probe_records_the_tutorial_launches_and_predicts_them(tmp_path):
    # in a process of its own: the probe runs the tutorial in IPython's one shell of a process
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "probes" / "ncu_tutorials.py"), "--out", str(tmp_path),
                        "--predict-only", "--tutorials", "11", "--no-suite"], capture_output=True, text=True,
                       timeout=600, cwd=str(ROOT))
    assert p.returncode == 0, p.stdout + p.stderr
    md = (tmp_path / "ncu_tutorials.md").read_text()
    rows = json.loads((tmp_path / "ncu_tutorials.json").read_text())
    assert {r["kernel"] for r in rows} == {"copy_rows", "copy_column", "transpose96", "transpose96_pad", "transpose64"}
    # the tutorial's launch: 1,000 rows, 32 CTAs of which 31 are full (found from the slice starts)
    assert "| tutorial 11 | transpose96 | 6 | shared wavefronts | 23808..24576 | - | not measured" in md


# ---- on the GPU, under ncu -----------------------------------------------------------------
@pytest.mark.gpu
def test_probe_measures_tutorial_11_on_gpu(tmp_path):
    from tilenb.runtime.gpu.profile import find_ncu
    if find_ncu() is None:
        pytest.skip("Nsight Compute (ncu) is not installed here")
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "probes" / "ncu_tutorials.py"), "--out", str(tmp_path),
                        "--tutorials", "11", "--no-suite"], capture_output=True, text=True, timeout=600, cwd=str(ROOT))
    assert p.returncode == 0, p.stdout + p.stderr
    rows = json.loads((tmp_path / "ncu_tutorials.json").read_text())
    if any("ERR_NVGPUCTRPERM" in (r["reason"] or "") for r in rows):
        pytest.skip("the GPU refuses its counters to this user")
    assert all(r["measured"] is not None for r in rows), [r for r in rows if r["measured"] is None]
    got = {(r["kernel"], r["line"], r["metric"]): r["measured"] for r in rows}
    M = 1000
    # the hardware's own figures, against numpy-free arithmetic on the launch: a column of X read
    # one 4-byte element a sector (1,000 rows), the row copy at 16 sectors per 512 bytes
    assert got[("copy_column", 5, "global sectors")] >= M
    assert got[("copy_rows", 5, "global sectors")] == 2 * M * 64 * 4 // 32
    # the conflicting transpose takes several times the wavefronts of its padded and swizzled forms
    conflicts = got[("transpose96", 6, "shared wavefronts")]
    assert conflicts >= 6 * got[("transpose96_pad", 7, "shared wavefronts")]
    assert got[("transpose64", 6, "shared wavefronts")] * 96 < conflicts * 64
    assert (tmp_path / "pages").is_dir() and "| tutorial 11 | transpose96 |" in (tmp_path / "ncu_tutorials.md").read_text()


def test_tutorial_11_profiled_variants_compile_with_nvrtc():
    """The profiled variant of each tutorial-11 kernel (its CUDA with #line directives naming
    tile lines) compiles for the H200's target, and maps its copy lines to the tile lines."""
    from tilenb.codegen import nvrtc_available, nvrtc_compile
    from tilenb.runtime.gpu import ncu as N
    if not nvrtc_available():
        pytest.skip("no NVRTC library here")
    cells = kernel_cells("11")
    assert len(cells) == 5
    for text in cells:
        mod = tilenb.compile(text, backend="cpu")
        (k,) = mod.kernels.values()
        lined = N.lined_source(k.cuda_source(arch="sm_90"))
        named = {int(ln.split()[1]) for ln in lined.text.splitlines()
                 if ln.startswith("#line ") and ln.endswith(f'"{N.TILE_FILE}"')}
        assert {cp.line for cp in k.analysis().copies} <= named, k.name
        assert len(nvrtc_compile(lined.text, "sm_90")) > 0


def test_probe_records_every_kernel_of_tutorial_04_without_the_dataset(tmp_path):
    # the device machine has no MiniLM package: tutorial 04's datasets cells get stand-ins of the
    # same shapes, so its later cells run and every kernel it launches is recorded
    import os
    env = dict(os.environ, TILENB_MINILM_DIR=str(tmp_path / "no-model-here"))
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "probes" / "ncu_tutorials.py"), "--out", str(tmp_path),
                        "--predict-only", "--tutorials", "04", "--no-suite"], capture_output=True, text=True,
                       timeout=600, cwd=str(ROOT), env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = json.loads((tmp_path / "ncu_tutorials.json").read_text())
    assert {r["kernel"] for r in rows} == {"center_rows", "project", "inclusive_scan", "length_histogram",
                                           "racy_scan"}
    md = (tmp_path / "ncu_tutorials.md").read_text()
    assert "DatasetError" not in md and "NameError" not in md
    assert "cell 11: RaceError" in md          # the lesson's race (debug=True), the only failing cell
