"""What a name is bound to while the checker walks a kernel: scopes and their bindings.

Guarantees: `_Env` is a chain of scopes, innermost first; a lookup returns the nearest binding
or None. A binding is an `ir.Sym` (a parameter, dimension, loop variable, var or let), a `_Tune`
(an @autotune value), a `_MacroArg` (a function parameter: the argument's syntax, checked at
each use where the call is), `_POISON` (a declaration that failed: uses stay quiet) or an
`_Unavailable` (a name that may not be used here). `_Lit` is the checker's open literal, never
left in the IR it returns; `_Abort` stops checking one statement after its error is recorded.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional

from .. import ir
from ..lang import ast as A


class _Abort(Exception):
    """Stops checking one statement after its error has been recorded."""


# ---- bindings in scope -----------------------------------------------------------------------
@dataclass
class _Tune:
    value: int


@dataclass
class _MacroArg:
    """A function parameter: the argument's syntax, checked where and when the call is."""
    expr: A.Expr
    env: "_Env"
    fn: str
    caller: tuple  # (call_stack, call_sites) of the caller, restored while the argument is checked


class _Poison:
    """The binding of a name whose declaration failed: uses of it abort without a new error."""


_POISON = _Poison()


@dataclass
class _Unavailable:
    """A name that exists but may not be used here (a tensor inside @grid): using it is a
    TileRuleError with `message`."""
    message: str


_UNBOUND = object()


class _Env:
    def __init__(self, parent: Optional["_Env"] = None):
        self.parent = parent
        self.names: Dict[str, object] = {}

    def lookup(self, name):
        e = self
        while e is not None:
            v = e.names.get(name, _UNBOUND)
            if v is not _UNBOUND:
                return v
            e = e.parent
        return None

    def child(self):
        return _Env(self)


@dataclass(frozen=True)
class _Lit(ir.Const):
    """A literal (or constant arithmetic on literals and @autotune names) whose type is still
    open: it takes the type its context gives it. Never left in the IR: see `_finalize`."""
