"""What the checker returns: a program's checked kernels, each with its @autotune variants.

Guarantees: every variant in `CheckedKernel.variants` is a consistent `tilenb.ir.KernelIR`;
`CheckedKernel.variant` refuses, by name, values outside the @autotune space and variants that
were skipped (saying why); a variant's budget check that needs its whole analysis runs when
the variant is first asked for, with the outcome of running it at once.
"""
from __future__ import annotations

import numbers
import threading
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Sequence, Tuple

from .. import ir
from ..lang import ast as A
from ..lang.diagnostics import Source, TileError, TileNameError


class CheckedKernel:
    """A kernel's syntax, its @autotune space, and its checked variants (IR per tune values).

    `variants` maps a sorted tuple of (name, value) pairs to the variant's KernelIR, in
    @autotune order. A variant whose tiles do not fit in shared memory is not an error while
    another variant fits: it is left out of `variants` and `skipped` maps its key to the
    reason.

    Where only a variant's whole analysis can tell whether it fits (what its tensor-core dots
    add to the tiles, `tilenb.sema.budget`), that check runs when the variant is first asked
    for: by `variant()`, `default_tune()`, or reading `variants` or `skipped` (which settle every
    variant). The checker settles variants in order until one fits, so a program in which none
    does is still an error at compile time; the outcome of every check, and the order of both
    mappings, are those of checking every variant at once."""

    def __init__(self, ast: A.Kernel, tune_space: Tuple[Tuple[str, Tuple[int, ...]], ...],
                 variants: Dict[Tuple[Tuple[str, int], ...], ir.KernelIR],
                 skipped: Optional[Dict[Tuple[Tuple[str, int], ...], str]] = None,
                 pending: Optional[Dict[Tuple[Tuple[str, int], ...], Callable[[], Optional[TileError]]]] = None,
                 order: Sequence[Tuple[Tuple[str, int], ...]] = ()):
        """variants: every variant that checked, in @autotune order, those with a pending budget
        check included; skipped: key -> why, for those the checker already left out; pending:
        key -> a function of no arguments returning the variant's TileBudgetError or None;
        order: every key of the @autotune space in order (`skipped` is kept in it)."""
        self.ast = ast
        self.tune_space = tune_space
        self._variants = variants
        self._skipped = dict(skipped or {})
        self._pending = dict(pending or {})
        self._order = tuple(order)
        self.budget_errors: Dict[Tuple[Tuple[str, int], ...], TileError] = {}   # of the pending checks that failed

    def __repr__(self):
        return f"<CheckedKernel {self.ast.name}: {len(self._variants)} variant(s)>"

    def _settle(self, key) -> bool:
        """Run `key`'s pending budget check, if any; whether `key` is a variant."""
        if key in self._pending:
            with _settle_lock:
                check = self._pending.pop(key, None)
                if check is not None:
                    err = check()
                    if err is not None:
                        del self._variants[key]
                        self._skipped[key] = err.message
                        self.budget_errors[key] = err
                    if not self._pending and self.budget_errors:   # all settled: skipped in @autotune order
                        self._skipped = {k: self._skipped[k] for k in self._order if k in self._skipped}
        return key in self._variants

    def _settle_all(self) -> None:
        for key in list(self._pending):
            self._settle(key)

    @property
    def variants(self) -> Dict[Tuple[Tuple[str, int], ...], ir.KernelIR]:
        """Every variant that fits, in @autotune order (settles every pending check)."""
        if self._pending:
            self._settle_all()
        return self._variants

    @property
    def skipped(self) -> Dict[Tuple[Tuple[str, int], ...], str]:
        """key -> why, for every variant left out for its shared memory (settles every pending check)."""
        if self._pending:
            self._settle_all()
        return self._skipped

    def first_variant(self):
        """The key of the first variant that fits, in @autotune order (settling pending checks
        in order until one passes), or None when none does."""
        for key in list(self._variants):
            if self._settle(key):
                return key
        return None

    def variant(self, **tune) -> ir.KernelIR:
        """The IR for one set of @autotune values. Raises TileNameError for names or values
        not in the space, or for a variant that was skipped (saying why). Values are ints (a
        Python or numpy integer, not a bool); anything else, 64.0 included, is refused by name,
        as a launch's `variant=` refuses it."""
        space = dict(self.tune_space)
        for n, v in tune.items():
            if n in space and (isinstance(v, bool) or not isinstance(v, numbers.Integral)):
                raise TileNameError(f"kernel {self.ast.name}: {n}={v!r} is not one of its @autotune values "
                                    f"{list(space[n])}; @autotune values are ints")
        key = tuple(sorted(tune.items()))
        try:
            if key in self._variants and self._settle(key):
                return self._variants[key]
        except TypeError:  # an unhashable value (a list, say): refused below, by name
            pass
        names = [n for n, _ in self.tune_space]
        missing = [n for n in names if n not in tune]
        extra = [n for n in tune if n not in names]
        if extra:
            raise TileNameError(f"kernel {self.ast.name} has no @autotune name {extra[0]!r}"
                                f" (it has: {', '.join(names) or 'none'})")
        if missing:
            raise TileNameError(f"kernel {self.ast.name}: give a value for @autotune name {missing[0]!r}")
        for n, vals in self.tune_space:
            if tune[n] not in vals:
                raise TileNameError(f"kernel {self.ast.name}: {n}={tune[n]!r} is not one of its @autotune values {list(vals)}")
        if key in self._skipped:
            raise TileNameError(f"kernel {self.ast.name}: the variant {_label(key)} was skipped: {self._skipped[key]}")
        raise TileNameError(f"kernel {self.ast.name}: no variant {tune}")

    def default_tune(self) -> Dict[str, int]:
        """The first variant that checked (in the order the @autotune values are written)."""
        key = self.first_variant()
        if key is not None:
            return dict(key)
        return {n: vals[0] for n, vals in self.tune_space}


_settle_lock = threading.RLock()   # one pending budget check at a time (they fill shared caches)


@dataclass
class CheckedProgram:
    kernels: Dict[str, CheckedKernel]
    functions: Dict[str, A.Function]
    source: Source


def _label(key) -> str:
    return ", ".join(f"{n}={v}" for n, v in key)
