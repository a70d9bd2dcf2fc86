import pytest


def pytest_collection_modifyitems(config, items):
    """Tests marked `gpu` skip cleanly where no CUDA GPU is usable."""
    from tilenb.runtime.gpu import gpu_available
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
