"""What tilenb keeps in memory between compiles and launches, and the one switch that forgets it.

Guarantees:
- `register(name, clear)`: a module that keeps a cache calls this once, when it is imported,
  with a function that empties that cache. A module never imported has nothing cached, so
  nothing needs to reach it; `clear_all()` calls every registered function, in the order they
  were registered, and never imports a module.
- `per_kernel(kir)`: a dict kept for one `tilenb.ir.KernelIR` object (by identity, not by
  equality: two variants with equal fields are two kernels here) for as long as that object
  lives, where the stages that derive something from a variant keep it (the tile lifetimes,
  the GEMM accumulators, the register tiles, the analyses per target, the origins of the
  debug notes). The IR itself stays immutable: nothing is stored on it. Each user keeps its
  values under its own key (a string or a tuple starting with one). A value must not refer to
  its KernelIR (it would keep it alive); it may refer to the IR's statements and symbols.
  `clear_all()` empties every kernel's dict.
This module imports nothing from tilenb, so any stage can use it.
"""
from __future__ import annotations

import weakref
from typing import Callable, Dict, List, Tuple

_CLEARS: List[Tuple[str, Callable[[], None]]] = []


def register(name: str, clear: Callable[[], None]) -> None:
    """Have `clear_all()` call `clear` (no arguments) to empty the cache called `name` (a
    dotted module name, for the reader). Registering the same name again replaces it."""
    for i, (n, _) in enumerate(_CLEARS):
        if n == name:
            _CLEARS[i] = (name, clear)
            return
    _CLEARS.append((name, clear))


def registered() -> Tuple[str, ...]:
    """The names of the registered caches, in registration order."""
    return tuple(n for n, _ in _CLEARS)


def clear_all() -> None:
    """Empty every registered cache (see `register`) and every KernelIR's `per_kernel` dict."""
    for _, clear in list(_CLEARS):
        clear()


# id(KernelIR) -> (a weak reference to it, its dict). The weak reference's callback drops the
# entry when the KernelIR is collected, so an id reused by a later object never finds it.
_PER_KERNEL: Dict[int, Tuple["weakref.ref", dict]] = {}


def per_kernel(kir) -> dict:
    """The dict kept for the KernelIR object `kir` (made empty on the first call for it)."""
    kid = id(kir)
    hit = _PER_KERNEL.get(kid)
    if hit is not None and hit[0]() is kir:
        return hit[1]
    table: dict = {}

    def _drop(ref, kid=kid, entries=_PER_KERNEL):    # (the dict itself: the module may be gone at exit)
        held = entries.get(kid)
        if held is not None and held[0] is ref:
            del entries[kid]
    _PER_KERNEL[kid] = (weakref.ref(kir, _drop), table)
    return table


register("tilenb.caches.per_kernel", _PER_KERNEL.clear)
