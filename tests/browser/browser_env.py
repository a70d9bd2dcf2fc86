"""Where the browser tests find chromium and what they need; shared by conftest and the tests.

The browser tests skip cleanly unless all of these are present: /usr/bin/chromium (apt:
chromium; another path through TILENB_CHROMIUM), and the Python packages playwright,
nbformat, nbclient, nbconvert, ipykernel, PIL (never `playwright install`: the system
chromium is used). The live-server tests also need jupyterlab and notebook (jupyter_env.py)."""
import importlib.util
import os

CHROMIUM = os.environ.get("TILENB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
NEEDED = ("playwright", "nbformat", "nbclient", "nbconvert", "ipykernel", "PIL")


def missing():
    """What is missing for the browser tests (empty when they can run)."""
    gone = [m for m in NEEDED if importlib.util.find_spec(m) is None]
    if not os.path.exists(CHROMIUM):
        gone.append(CHROMIUM)
    return gone
