"""`import tilenb` leaves out what a program may never need: ml_dtypes (bf16's numpy dtype) is
imported the first time bf16 storage is asked for, not before."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=str(ROOT)).stdout.split()


def test_import_and_an_f32_kernel_do_not_load_ml_dtypes():
    out = _run("import sys, numpy as np, tilenb\n"
               "m = tilenb.compile('kernel k(X: tensor<f32>[N]) {\\n  X[0] = 2.0\\n}\\n', backend='cpu')\n"
               "x = np.zeros(4, np.float32); m.k[1](x)\n"
               "print(x[0], 'ml_dtypes' in sys.modules)")
    assert out == ["2.0", "False"]


def test_bf16_storage_loads_it_on_first_use():
    out = _run("import sys, tilenb.types as T\n"
               "print('ml_dtypes' in sys.modules)\n"
               "import ml_dtypes\n"
               "print(T.DTYPES['bf16'].numpy == ml_dtypes.bfloat16, T.DTYPES['bf16'].numpy is T.DTYPES['bf16'].numpy)")
    assert out == ["False", "True", "True"]
