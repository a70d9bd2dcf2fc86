"""The bundled example checks, and the command line reports errors with a position."""
import subprocess
import sys
from pathlib import Path

import tilenb
from tilenb.__main__ import EXAMPLE


def test_example_file_compiles_with_all_kernels():
    mod = tilenb.compile(EXAMPLE.read_text(), backend="cpu")
    assert set(mod.kernels) == {"scale_rows", "partial_sums", "act", "rms_norm", "flash_attention",
                                "quantize", "gemm"}
    assert mod.rms_norm is mod.kernels["rms_norm"]


def test_check_command_exit_codes(tmp_path: Path):
    good = tmp_path / "good.tile"
    good.write_text("kernel k(X: tensor<f32>[N]) {\n  X[0] = 1.0\n}\n")
    bad = tmp_path / "bad.tile"
    bad.write_text("kernel k(X: tensor<f32>[N]) {\n  X[0] = y\n}\n")
    r = subprocess.run([sys.executable, "-m", "tilenb", "check", str(good)], capture_output=True, text=True)
    assert r.returncode == 0
    r = subprocess.run([sys.executable, "-m", "tilenb", "check", str(bad)], capture_output=True, text=True)
    assert r.returncode == 1
    assert f"{bad}:2:10: error: 'y' is not defined" in r.stderr
    assert "^" in r.stderr


def test_compile_arguments_of_the_wrong_type_are_tile_errors():
    import pytest
    for kw in ({"line_offset": "1"}, {"line_offset": -1}, {"filename": 3}, {"backend": "tpu"}):
        with pytest.raises(tilenb.TileError):
            tilenb.compile("kernel k(X: tensor<f32>[N]) {\n  X[0] = 1.0\n}\n", **kw)
    with pytest.raises(tilenb.TileError, match="source must be a str"):
        tilenb.compile(b"kernel")


def test_the_readme_quick_start_runs_as_written(capsys):
    # a newcomer copies the README's first Python block into a fresh interpreter
    import re
    from pathlib import Path
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = re.search(r"```python\n(.*?)```", readme, re.S).group(1)
    exec(compile(block, "README.md", "exec"), {})
    assert "verified against numpy: scale_rows (max abs error 0)" in capsys.readouterr().out
