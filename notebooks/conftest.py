"""pytest over the tutorials: `python -m pytest` (testpaths include notebooks/) runs every
notebook here with nbval, in a fresh kernel of this Python, on the CPU backend, and compares each
cell's outputs with the saved ones after masking run-to-run values (nbval_sanitize.cfg).

The saved outputs were made on the CPU backend (`python notebooks/build.py`), so the kernels here
run there too (TILENB_BACKEND=cpu) even on a machine with a GPU. Only the notebooks' kernels get
that setting (and this checkout first on their PYTHONPATH): it is in the environment while an
nbval item is set up, which is when nbval starts a notebook's kernel, and taken away after each
item, so that the rest of the run (`python -m pytest -m gpu` from the root) keeps its backend.
"""
import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def pytest_configure(config):
    opt = config.option
    if not hasattr(opt, "nbval"):           # nbval missing: the .ipynb files are not collected
        return
    if not (opt.nbval or opt.nbval_lax):
        opt.nbval = True
    if not opt.nbval_sanitize_with:
        opt.nbval_sanitize_with = str(HERE / "nbval_sanitize.cfg")
    if not getattr(opt, "nbval_kernel_name", None):
        opt.nbval_current_env = True        # the kernel runs this interpreter (the venv's)


def _is_notebook_item(item) -> bool:
    return Path(str(item.fspath)).suffix == ".ipynb" and HERE in Path(str(item.fspath)).resolve().parents


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    if not _is_notebook_item(item):
        yield
        return
    saved = {k: os.environ.get(k) for k in ("TILENB_BACKEND", "PYTHONPATH")}
    os.environ["TILENB_BACKEND"] = "cpu"
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(ROOT) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + paths)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


collect_ignore = ["build.py"]
collect_ignore_glob = ["src/*"]
