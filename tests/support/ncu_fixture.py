"""The profiled kernel and the saved Nsight Compute pages the profile tests read (runtime and
notebook stages): data/ncu_h200 under tests/runtime, a capture from the H200 by
scripts/capture_ncu_fixture.py."""
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "runtime" / "data"

SOURCE = '''
@launch(256)
kernel scale_rows(X: tensor<f32>[M, 64], S: tensor<f32>[M, 1], Y: tensor<f32>[M, 64]) {
  let r = ctx.block.x * 32
  var x = X[r :+ 32, :]
  var s = S[r :+ 32, :]
  Y[r :+ 32, :] = x * s
}
'''


def fixture_dir() -> Path:
    real = DATA / "ncu_h200"
    return real


def profile_with_a_differing_line():
    """(the scale_rows kernel on the CPU backend, the capture's Profile with its prediction), with
    the Y store's (line 7 of SOURCE) measured sectors made four times the capture's: what the H200
    counted before issue 16, when the generated code stored 4 bytes a thread where the analysis
    planned 16. The capture itself matches the analysis on every line, so the views' differing-line
    flag is tested on this one."""
    import json
    import tilenb
    from tilenb.runtime.gpu.profile import build_profile
    d = fixture_dir()
    prof = build_profile((d / "raw.csv").read_text(), (d / "source.csv").read_text(),
                         json.loads((d / "job.json").read_text()))
    kernel = tilenb.compile(SOURCE, backend="cpu").scale_rows
    prof.predicted = prof.analysis(kernel)
    f = next(f for f in prof.lines.values() if f.st_sectors)      # the Y store's line
    f.sectors += 3 * f.st_sectors
    f.st_sectors *= 4
    return kernel, prof
