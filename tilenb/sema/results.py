"""What the checker returns: a program's checked kernels, each with its @autotune variants.

Guarantees: every variant in `CheckedKernel.variants` is a consistent `tilenb.ir.KernelIR`;
`CheckedKernel.variant` refuses, by name, values outside the @autotune space and variants that
were skipped (saying why).
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Dict, Tuple

from .. import ir
from ..lang import ast as A
from ..lang.diagnostics import Source, TileNameError


@dataclass
class CheckedKernel:
    """A kernel's syntax, its @autotune space, and its checked variants (IR per tune values).

    `variants` maps a sorted tuple of (name, value) pairs to the variant's KernelIR. A variant
    whose tiles do not fit in shared memory is not an error while another variant fits: it is
    left out of `variants` and `skipped` maps its key to the reason."""
    ast: A.Kernel
    tune_space: Tuple[Tuple[str, Tuple[int, ...]], ...]
    variants: Dict[Tuple[Tuple[str, int], ...], ir.KernelIR]
    skipped: Dict[Tuple[Tuple[str, int], ...], str] = field(default_factory=dict)

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
            if key in self.variants:
                return self.variants[key]
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
        if key in self.skipped:
            raise TileNameError(f"kernel {self.ast.name}: the variant {_label(key)} was skipped: {self.skipped[key]}")
        raise TileNameError(f"kernel {self.ast.name}: no variant {tune}")

    def default_tune(self) -> Dict[str, int]:
        """The first variant that checked (in the order the @autotune values are written)."""
        for key in self.variants:
            return dict(key)
        return {n: vals[0] for n, vals in self.tune_space}


@dataclass
class CheckedProgram:
    kernels: Dict[str, CheckedKernel]
    functions: Dict[str, A.Function]
    source: Source


def _label(key) -> str:
    return ", ".join(f"{n}={v}" for n, v in key)
