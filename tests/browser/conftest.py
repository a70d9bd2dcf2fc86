"""Browser tests (marked `browser`) skip cleanly where chromium or a package is missing; see
browser_env.py for the list."""
import pytest

from browser_env import missing


def pytest_configure(config):
    config.addinivalue_line("markers", "browser: drives headless chromium (skipped without it)")


def pytest_collection_modifyitems(config, items):
    gone = missing()
    if not gone:
        return
    skip = pytest.mark.skip(reason=f"browser tests need {', '.join(gone)}")
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(skip)
