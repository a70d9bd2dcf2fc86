"""Capture the Nsight Compute pages tests/runtime/test_profile.py reads, on a GPU with ncu.

    .venv/bin/python scripts/capture_ncu_fixture.py OUT_DIR

profiles the profile tests' `scale_rows` (tests/support/ncu_fixture.py) at M = 320 (grid 10) with
`kernel.profile(..., keep=...)` and writes into OUT_DIR: raw.csv (`--page raw`), source.csv
(`--page source --print-source cuda,sass`), job.json (what tilenb recorded about the launch) and
README.md (the device, ncu's version, the command); for fixing the parser should the format
differ, also the CUDA-only and SASS-only source pages and the details page, and the report
itself (report.ncu-rep). Copy raw.csv, source.csv, job.json and README.md to tests/runtime/data/ncu_h200/ (the
fixture the tests read). Prints the Profile beside the analysis.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import tilenb  # noqa: E402
from tilenb.runtime.gpu.profile import find_ncu  # noqa: E402
from support.ncu_fixture import SOURCE  # noqa: E402


def main(argv) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    out = Path(argv[0]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = out / "work"
    ncu = find_ncu()
    if ncu is None:
        print("no ncu here: install Nsight Compute or set TILENB_NCU")
        return 1
    mod = tilenb.compile(SOURCE, backend="cuda")
    rng = np.random.default_rng(3)
    m = 320
    X = rng.standard_normal((m, 64)).astype(np.float32)
    S = rng.standard_normal((m, 1)).astype(np.float32)
    Y = np.zeros_like(X)
    try:
        prof = mod.scale_rows.profile((m + 31) // 32, X, S, Y, keep=str(work))
        print(prof.text(prof.analysis(mod.scale_rows)))
        print("outputs equal X * S:", bool(np.allclose(Y, X * S)))
    except Exception as e:      # keep what ncu wrote, to fix the parser with
        print(f"kernel.profile failed: {type(e).__name__}: {e}")
    for name in ("raw.csv", "source.csv", "job.json", "ncu.log"):
        if (work / name).exists():
            shutil.copy(work / name, out / name)
    rep = work / "report.ncu-rep"
    if not rep.exists():
        print(f"no report; see {work / 'ncu.log'}")
        return 1
    shutil.copy(rep, out / "report.ncu-rep")
    for view, name in (("cuda", "source_cuda.csv"), ("sass", "source_sass.csv")):
        txt = subprocess.run([ncu, "--import", str(rep), "--csv", "--page", "source", "--print-source", view],
                             capture_output=True, text=True).stdout
        (out / name).write_text(txt)
    txt = subprocess.run([ncu, "--import", str(rep), "--csv", "--page", "details"], capture_output=True, text=True).stdout
    (out / "details.csv").write_text(txt)
    ver = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1:]
    try:
        import cupy as cp
        dev = cp.cuda.runtime.getDeviceProperties(0)["name"]
        dev = dev.decode() if isinstance(dev, bytes) else str(dev)
    except Exception:
        dev = "unknown GPU"
    job = json.loads((out / "job.json").read_text())
    (out / "README.md").write_text(
        f"Captured by scripts/capture_ncu_fixture.py on {dev} with {' '.join(ver)}: `scale_rows` of\n"
        f"tests/runtime/test_profile.py at M = {m}, grid {job['grid']}. raw.csv: `ncu --csv --page raw`;\n"
        "source.csv: `--page source --print-source cuda,sass`; source_cuda.csv / source_sass.csv:\n"
        "the other source views; details.csv: `--page details`; job.json: tilenb's record of the launch.\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
