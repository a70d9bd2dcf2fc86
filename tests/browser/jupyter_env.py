"""A private Jupyter server (JupyterLab or Notebook 7) for the browser tests, on 127.0.0.1.

`JupyterServer(app, root)` starts `python -m jupyterlab` or `python -m notebook` of this
interpreter on a free local port with a random token, serving `root`, with its own config, data
and runtime folders (no user settings, no trust database, no news pop-up), the page's app object
exposed as `window.jupyterapp`, and this checkout first on the kernels' PYTHONPATH with the CPU
backend. `stop()` ends it (and its kernels). Nothing listens beyond 127.0.0.1.

`APP`, `PANEL`, `NB`, `IDLE`: page expressions for the app, the current notebook panel, its
notebook widget and "the kernel is idle"; `run_all(server, name, failing, ready)` opens a notebook
in headless chromium and runs all its cells up to the failed one (a context manager: the page)."""
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
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APPS = {"jupyterlab": ("jupyterlab", "LabApp", "lab/tree/{}"),
        "notebook": ("notebook", "JupyterNotebookApp", "notebooks/{}")}


APP = "window.jupyterapp"
PANEL = f"({APP} && {APP}.shell.currentWidget)"
NB = f"{PANEL}.content"
IDLE = (f"() => {{ const p = {PANEL}; return !!(p && p.context && p.context.isReady && p.sessionContext && "
        "p.sessionContext.session && p.sessionContext.session.kernel && "
        "p.sessionContext.session.kernel.status === 'idle'); }")


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


@contextmanager
def run_all(server, name, failing, ready, failing_ms=120000):
    """A headless chromium page (1280 x 1000) on notebook `name` of `server` after Run All: the
    cell at index `failing` has run (Run All stops at its error, within `failing_ms`), the kernel
    is idle again and the page expression `ready` holds. `page.errors` lists the page's uncaught
    errors (message and stack). The browser closes when the block ends."""
    from playwright.sync_api import sync_playwright

    from browser_env import CHROMIUM, CHROMIUM_ARGS
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.set_default_timeout(60000)
        page.errors = []
        page.on("pageerror", lambda e: page.errors.append(f"{e}\n{e.stack or ''}"))
        page.goto(server.page_url(name))
        page.wait_for_function(IDLE, timeout=120000)
        page.evaluate(f"{APP}.commands.execute('notebook:run-all-cells')")
        page.wait_for_function(f"() => {NB}.widgets[{failing}].model.executionCount !== null", timeout=failing_ms)
        page.wait_for_function(IDLE, timeout=120000)
        page.wait_for_function(ready)
        yield page
        browser.close()
