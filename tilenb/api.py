"""`tilenb.compile`: source text -> a checked `Module`.

Guarantees: returns a Module, or raises a `TileError` (the first by position, carrying every
error found in `.diagnostics`). No other exception escapes for any source string. A text
compiled again (same text, filename and line offset) reuses the checked program, and through
it the generated CUDA, the loaded kernels, the autotune choice and the repeat-launch cache of
the earlier compile; `clear_caches()` forgets all of them.
"""
from __future__ import annotations

import functools

from . import caches
from .lang.diagnostics import Source, TileError, TileSyntaxError
from .lang.parser import parse
from .runtime.module import Module, backend_note, choose_backend
from .sema.check import check_program


@functools.lru_cache(maxsize=64)
def _checked(source: str, filename: str, line_offset: int):
    """Parse and check once per distinct text: a re-run cell skips straight to its kernels.
    (A TileError is not cached; it is raised afresh each time.)"""
    src = Source(source, filename, line_offset)
    return check_program(parse(source, filename, line_offset), src)


def compile(source: str, *, backend: str = "auto", filename: str = "<cell>", debug: bool = False,
            line_offset: int = 0) -> Module:
    """Parse and check `source`; return a Module whose kernels run on `backend`.

    backend: "auto" (CUDA when a GPU is usable, else the CPU reference executor), "cpu" or
    "cuda". debug: launches check shared-memory races and out-of-bounds element accesses.
    line_offset: added to reported line numbers (the notebook magic's header line, say).
    Raises TileError (TileSyntaxError, TileNameError, TileTypeError, ...) on any static error.
    """
    if not isinstance(source, str):
        raise TileError(f"source must be a str, not {type(source).__name__}")
    if not isinstance(filename, str):
        raise TileError(f"filename must be a str, not {type(filename).__name__}")
    if not isinstance(line_offset, int) or isinstance(line_offset, bool) or line_offset < 0:
        raise TileError(f"line_offset must be a non-negative int, not {line_offset!r}")
    chosen = choose_backend(backend)
    try:
        checked = _checked(source, filename, line_offset)
    except TileError:
        raise
    except RecursionError:
        src = Source(source, filename, line_offset)
        raise src.error(TileSyntaxError, "the program nests too deeply", 1, 1) from None
    module = Module(checked, chosen, debug)
    module.backend_note = backend_note(backend, chosen)
    return module


def clear_caches():
    """Forget everything tilenb keeps in memory between compiles and launches: checked programs,
    analyses, generated CUDA, loaded kernels, autotune choices read from disk, NVRTC results,
    and (with the checked programs) the repeat-launch caches. The next compile and launch start
    cold, as in a fresh process with the same disk cache (`tilenb.codegen.nvrtc.cache_dir()`,
    which this does not touch). Modules compiled before keep working. Each module that keeps a
    cache registers how to empty it with `tilenb.caches` when it is imported; this calls them."""
    caches.clear_all()


caches.register(__name__, _checked.cache_clear)
