"""A private Jupyter server (JupyterLab or Notebook 7) for the browser tests, on 127.0.0.1.

`JupyterServer(app, root)` starts `python -m jupyterlab` or `python -m notebook` of this
interpreter on a free local port with a random token, serving `root`, with its own config, data
and runtime folders (no user settings, no trust database, no news pop-up), the page's app object
exposed as `window.jupyterapp`, and this checkout first on the kernels' PYTHONPATH with the CPU
backend. `stop()` ends it (and its kernels). Nothing listens beyond 127.0.0.1."""
import importlib.util
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APPS = {"jupyterlab": ("jupyterlab", "LabApp", "lab/tree/{}"),
        "notebook": ("notebook", "JupyterNotebookApp", "notebooks/{}")}


def missing(app):
    """Why this front end cannot be tested here ('' when it can)."""
    return "" if importlib.util.find_spec(APPS[app][0]) else f"the {app} package (pip install {app})"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JupyterServer:
    def __init__(self, app, root, start_timeout=120):
        module, cls, self._path = APPS[app]
        self.app, self.root = app, Path(root)
        self.home = Path(tempfile.mkdtemp(prefix="tilenb-jupyter-"))
        settings = self.home / "config" / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
        settings.mkdir(parents=True)
        (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
        self.port, self.token = _free_port(), secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}"
        old = os.environ.get("PYTHONPATH", "")
        env = dict(os.environ, JUPYTER_CONFIG_DIR=str(self.home / "config"), JUPYTER_DATA_DIR=str(self.home / "data"),
                   JUPYTER_RUNTIME_DIR=str(self.home / "runtime"), TILENB_BACKEND="cpu",
                   PYTHONPATH=os.pathsep.join([str(ROOT)] + ([old] if old else [])))
        cmd = [sys.executable, "-m", module, "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1",
               f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}",
               f"--ServerApp.root_dir={self.root}", f"--{cls}.expose_app_in_browser=True",
               ]
        self.log = open(self.home / "server.log", "w")
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT, cwd=str(self.root))
        deadline = time.time() + start_timeout
        while True:
            try:
                self.api("status")
                break
            except Exception:
                if self.proc.poll() is not None or time.time() > deadline:
                    self.stop()
                    raise RuntimeError(f"{app} did not start:\n{(self.home / 'server.log').read_text()[-3000:]}")
                time.sleep(0.5)

    def api(self, path, method="GET"):
        req = urllib.request.Request(f"{self.url}/api/{path}", method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=20) as r:
            body = r.read()
        return json.loads(body) if body else None

    def page_url(self, name):
        return f"{self.url}/{self._path.format(name)}?token={self.token}"

    def stop_kernels(self):
        """Shut down every kernel (what a user's closed session leaves: a notebook, no kernel)."""
        for k in self.api("kernels"):
            self.api(f"kernels/{k['id']}", method="DELETE")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()
        shutil.rmtree(self.home, ignore_errors=True)
