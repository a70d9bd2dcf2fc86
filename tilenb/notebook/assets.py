"""Where the widgets' ES modules and CSS are, in a checkout and in an installed package.

Guarantees: `asset(name)` returns the text of `widgets/<name>` as shipped with the package
(`tilenb/widgets` is a link to the top-level `widgets/` folder in the repository, and a copy of
it in a built wheel), falling back to the repository's `widgets/` folder beside the package.
It raises FileNotFoundError naming both places when neither has the file. Nothing is fetched
from a network: the notebook front end and exported pages get the JavaScript from here.
"""
from __future__ import annotations

import functools
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent
_PLACES = (_PACKAGE / "widgets", _PACKAGE.parent / "widgets")

# one ES module (and its CSS, beside it) per widget
WIDGETS = ("threadmap", "ruler", "barriers", "timing", "cuda")


def path(name: str) -> Path:
    """The file `widgets/<name>` (e.g. "threadmap.js"). Raises FileNotFoundError."""
    for base in _PLACES:
        p = base / name
        if p.is_file():
            return p
    raise FileNotFoundError(f"tilenb widget file {name!r} is in neither {_PLACES[0]} nor {_PLACES[1]}")


@functools.lru_cache(maxsize=None)
def asset(name: str) -> str:
    """The text of `widgets/<name>` (cached for the life of the process)."""
    return path(name).read_text(encoding="utf-8")


def esm(widget: str) -> str:
    """The ES module a view runs: the shared DOM helpers (common.js), then its own module."""
    return asset("common.js") + "\n" + asset(f"{widget}.js")


def css(widget: str) -> str:
    """The CSS a widget needs: the shared rules, then its own."""
    return asset("common.css") + "\n" + asset(f"{widget}.css")
