"""The checker's public face: a parsed program -> typed tile IR per kernel and @autotune variant.

Guarantees: `check_program` either returns a `CheckedProgram` whose every kernel variant is a
consistent `tilenb.ir.KernelIR`, or raises the first `TileError` by position carrying every
error found (`.diagnostics`, sorted by position). It enforces the language's static rules
(docs/spec.md): names, functions (inlining, hygiene, aliasing, recursion, jumps), types,
literal ranges, shapes, constants, uniformity of tile statements and barriers, @registers, and
the shared-memory budget (from tile lifetimes).

Where each rule lives (tilenb/sema/):
  program.py      the entry: function and kernel names, then each kernel
  functions.py    recursion, jumps and written parameters of functions (syntax alone)
  variants.py     attributes, the @autotune space, variants sharing one walk of the body
  kernel.py       one variant: parameters, @launch/@cluster/@grid, whole-kernel rules
  statements.py   statements, scopes, control uniformity, inlining of statement functions
  expressions.py  expressions, literals, operators, subscripts, calls
  builtins.py     the table of built-ins: arity and typing rule of each
  budget.py       the shared-memory budget, read from the analysis' shared-memory map
  values.py       constant folding and conversion, literals, broadcasting, type names
  scope.py        scopes and what a name can be bound to
  results.py      CheckedProgram and CheckedKernel
"""
from .program import check_program  # noqa: F401
from .results import CheckedKernel, CheckedProgram  # noqa: F401
from .statements import MAX_INLINED_CALLS  # noqa: F401
from .variants import MAX_VARIANTS  # noqa: F401
