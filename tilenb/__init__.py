"""tilenb: write, run and inspect GPU kernels in a tile language, in Jupyter.

`tilenb.compile(source, backend="auto")` returns a Module whose kernels launch as
`module.kernel[grid](*arrays)`; static errors raise `tilenb.TileError`.
"""
from .lang.diagnostics import (EdgeWarning, LaunchError, TileBudgetError, TileError,  # noqa: F401
                               TileNameError, TileRuleError, TileShapeError, TileSyntaxError,
                               TileTypeError, UnsupportedError)
from .api import compile  # noqa: F401,A001
from .runtime.module import Kernel, Module  # noqa: F401
from .verify import VerificationError, verify  # noqa: F401

__version__ = "0.1.0"


def load_ipython_extension(ipython):
    """`%load_ext tilenb`: registers the %%tilekernel cell magic."""
    from .notebook.magic import register
    register(ipython)
