"""Running a notebook headless in a fresh Jupyter kernel, as the main job, the tutorial build and
the tests do.

Guarantees: `execute(nb, path, ...)` runs every code cell of `nb` (a NotebookNode, changed in
place) top to bottom in a new `python3` kernel whose working directory is `path`, with nbclient,
and shuts the kernel down afterwards, whatever happened. The kernel talks to this process over
local IPC sockets in a private temporary folder (removed afterwards), not TCP: ipykernel warns
on stderr about unencrypted TCP once per kernel, and nothing here needs a network port. It
raises what nbclient raises (`CellExecutionError` for a failed cell that is not tagged
`raises-exception`, when `allow_errors` is false; a timeout; a dead kernel).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Optional, Sequence


def execute(nb, path, timeout: int = 600, allow_errors: bool = False, store_widget_state: bool = False,
            record_timing: bool = False, pythonpath: Optional[Sequence[str]] = None, env: Optional[dict] = None):
    """Execute `nb` in place in a fresh kernel started in folder `path`; returns `nb`.

    pythonpath: folders put first on the kernel's PYTHONPATH (a checkout, so that its tilenb is
    the one imported); env: further environment variables for the kernel."""
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient
    sockets = tempfile.mkdtemp(prefix="tilenb-kernel-")
    saved = dict(os.environ)
    try:
        if pythonpath:
            old = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
            os.environ["PYTHONPATH"] = os.pathsep.join([str(p) for p in pythonpath] + old)
        os.environ.update(env or {})
        class LocalKernel(KernelManager):
            """A kernel on IPC sockets in `sockets`; nbclient starts it and shuts it down."""

            def __init__(self, **kw):
                kw.setdefault("transport", "ipc")
                kw.setdefault("ip", os.path.join(sockets, "k"))
                super().__init__(**kw)
        client = NotebookClient(nb, kernel_manager_class=LocalKernel, timeout=timeout, kernel_name="python3",
                                allow_errors=allow_errors,
                                store_widget_state=store_widget_state, record_timing=record_timing,
                                resources={"metadata": {"path": str(Path(path))}})
        client.execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(sockets, ignore_errors=True)
    return nb
