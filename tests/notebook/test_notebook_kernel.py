"""%%tilekernel in a real Jupyter kernel (ipykernel, driven by nbclient as a front end drives it):
a failed cell names itself by its own prompt number, shows the diagnostics as an error output with
no Python frames, stops "Run All" there, and leaves earlier kernels working."""
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[2]

GOOD = """%%tilekernel --backend cpu --show none
@launch(64)
kernel twice(X: tensor<f32>[N], Y: tensor<f32>[N]) {
  let b = ctx.block.x * 64
  Y[b :+ 64] = X[b :+ 64] * 2.0
}
"""
BAD = """%%tilekernel --backend cpu --show none
@launch(64)
kernel thrice(X: tensor<f32>[N], Y: tensor<f32>[N]) {
  let b = ctx.block.x * 64
  Y[b :+ 64] = X[b :+ 64] * three
}
"""
AFTER = """import numpy as np
x = np.arange(100, dtype=np.float32); y = np.zeros_like(x)
twice[2](x, y)
print(bool((y == 2 * x).all()), 'thrice' in globals())
"""


def _notebook():
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(s) for s in
                ("%load_ext tilenb", "a = 1", GOOD, "b = 2", BAD, AFTER)]
    return nb


def _execute(nb, allow_errors):
    from tilenb.notebook.execute import execute
    return execute(nb, ROOT, timeout=120, allow_errors=allow_errors, pythonpath=[ROOT])


@pytest.fixture(scope="module")
def ran_past_the_error():
    return _execute(_notebook(), allow_errors=True)


def test_the_error_names_the_cell_by_its_own_prompt(ran_past_the_error):
    cell = ran_past_the_error.cells[4]
    assert cell.execution_count == 5
    (out,) = cell.outputs
    assert out.output_type == "error" and out.ename == "CellError"
    # `three` is on line 5 of the cell (the %%tilekernel line is line 1), column 29
    assert out.traceback[0] == f"In[{cell.execution_count}]:5:29: error: 'three' is not defined"
    assert out.traceback[1].strip() == "Y[b :+ 64] = X[b :+ 64] * three"
    assert out.traceback[2].strip() == "^" and len(out.traceback) == 3     # no Python frames
    assert out.evalue == "\n".join(out.traceback)


def test_earlier_kernels_keep_working_after_the_failed_cell(ran_past_the_error):
    (out,) = ran_past_the_error.cells[5].outputs
    assert out.output_type == "stream" and out.text == "True False\n"


def test_a_failed_cell_stops_run_all():
    nb = _notebook()
    with pytest.raises(nbclient.exceptions.CellExecutionError) as e:
        _execute(nb, allow_errors=False)
    assert "'three' is not defined" in str(e.value)
    assert nb.cells[4].execution_count == 5
    assert nb.cells[5].execution_count is None and nb.cells[5].outputs == []   # never ran


def test_a_cell_tagged_raises_exception_lets_run_all_go_on():
    nb = _notebook()
    nb.cells[4].metadata["tags"] = ["raises-exception"]
    _execute(nb, allow_errors=False)
    assert nb.cells[5].outputs[0].text == "True False\n"


def test_a_timing_view_in_the_saved_notebook_shows_the_last_launch():
    """The view displayed at definition is re-displayed in place (update_display) after a later
    cell launched the kernel: what the executed notebook saves is the last launch."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(s) for s in (
        "%load_ext tilenb",
        GOOD.replace("--show none", "--show timing").replace("--backend cpu", "--backend cuda"),
        # what a CUDA launch leaves (this machine may have no GPU): a 10 us kernel on an H200
        "from tilenb.runtime.checks import RunReport\n"
        "twice.last_run = RunReport('cuda', 'twice', {}, '', (2, 1, 1), 64, 2, 1e-5, False,\n"
        "    {'kernel_ms': 0.01, 'wall_s': 0.002, 'timings': [], 'device': 'NVIDIA H200'})")]
    _execute(nb, allow_errors=False)
    shown = [o for o in nb.cells[1].outputs if "tilenb" in o.get("metadata", {})]
    assert len(shown) == 1
    text = shown[0]["data"]["text/plain"]
    assert "kernel time (CUDA events): 10.0 us" in text and "not launched" not in text
    assert "10.0 us" in shown[0]["data"]["text/html"]
    assert nb.cells[2].outputs == []            # updated in place, not shown again below


@pytest.mark.gpu
def test_on_a_gpu_the_saved_timing_view_shows_the_real_last_launch():
    """A real CUDA launch in a later cell: the timing view saved at definition ends up showing
    that launch (kernel time by CUDA events, the device), and the kernel verified on the GPU."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(s) for s in (
        "%load_ext tilenb",
        GOOD.replace("--show none", "--show timing").replace("--backend cpu", "--backend cuda"),
        "import numpy as np, tilenb\n"
        "x = np.arange(1000, dtype=np.float32); y = np.zeros_like(x)\n"
        "twice[(1000 + 63) // 64](x, y)\n"
        "print(bool((y == 2 * x).all()))")]
    _execute(nb, allow_errors=False)
    assert nb.cells[2].outputs[-1]["text"] == "True\n"
    (shown,) = [o for o in nb.cells[1].outputs if "tilenb" in o.get("metadata", {})]
    text = shown["data"]["text/plain"]
    assert "kernel time (CUDA events): " in text and "not launched" not in text, text
