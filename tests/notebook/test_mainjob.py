"""The main job's table and its failure rows (the notebooks themselves run under nbval)."""
from pathlib import Path

import nbformat
import pytest

from tilenb import mainjob


def test_table_lists_each_tutorial_and_failures():
    rows = [mainjob.Row("01_intro", 3, "cpu", 4, 1.25, None),
            mainjob.Row("02_tiles", 2, "cpu", 0, 0.5, "VerificationError: Y differs")]
    text = mainjob.format_table(rows)
    lines = text.splitlines()
    assert lines[0].split() == ["tutorial", "kernels", "backend", "verified", "against", "numpy", "time"]
    assert "01_intro" in lines[2] and "yes (4)" in lines[2] and "1.2 s" in lines[2]
    assert "NO: VerificationError: Y differs" in lines[3]


def test_run_one_counts_kernels_and_verifications(tmp_path: Path, monkeypatch):
    pytest.importorskip("nbclient")
    # the notebook's kernel runs in tmp_path: let it import this checkout's tilenb
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))
    pytest.importorskip("ipykernel")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext tilenb"),
        nbformat.v4.new_code_cell("%%tilekernel --backend cpu --show none\n"
                                  "kernel twice(X: tensor<f32>[N], Y: tensor<f32>[N]) {\n"
                                  "  let b = ctx.block.x * 64\n"
                                  "  Y[b :+ 64] = X[b :+ 64] * 2.0\n}\n"),
        nbformat.v4.new_code_cell("import numpy as np, tilenb\n"
                                  "X = np.arange(100, dtype=np.float32); Y = np.zeros_like(X)\n"
                                  "twice[2](X, Y)\n"
                                  "err = tilenb.verify(Y, 2 * X, what='twice')"),
    ]
    path = tmp_path / "t.ipynb"
    nbformat.write(nb, str(path))
    row = mainjob.run_one(path, tmp_path / "html", "cpu", timeout=120)
    assert row.error is None, row.error
    assert (row.kernels, row.verified) == (1, 1)
    assert (tmp_path / "html" / "t.html").read_text().count("twice") > 0
