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
