"""Divisibility of index expressions: what every value of an expression is provably a multiple of.

`Divisibility(kir).of(e)` is a non-negative integer d such that every value `e` takes, in every
run of the kernel, is a multiple of d; d = 0 means e is always 0 (a multiple of everything). It is
what vector widths are chosen from: a slice whose first element offset is a multiple of 4 f32
elements may be moved with 16-byte vector accesses.

Rules (gcd is the greatest common divisor, gcd(0, n) = n):
- an integer literal c: |c|; a float or bool: 1;
- a runtime dimension that is some tensor's row length (last dimension): 4, by the launch rule
  that row lengths are multiples of 4 elements; any other runtime dimension: 1
  elements (the launch checks it); `ctx.threads`: the @launch count; other ctx fields: 1;
- a + b, a - b, min(a, b), max(a, b): gcd(d(a), d(b)); a * b: d(a) * d(b); -a: d(a);
  a << k (k a literal): d(a) * 2**k; a / c (c a literal dividing d(a)): d(a) / c;
  a % b: gcd(d(a), d(b)) (a % b = a - q * b); conversions between integer types: d(a);
- a `let`: d(its value); a loop variable of `range(lo, hi, step)`: gcd(d(lo), step);
- a scalar `var`: gcd of d over its initial value and every value assigned to it (for `v += e`,
  gcd(d(v), d(e)); for `v *= e`, d(v) * d(e)), solved as a fixpoint from "always 0" downwards;
- anything else (element reads, other operators, scalar parameters): 1.

Guarantees: sound for the integer semantics of the language (wrapping aside); never raises.
"""
from __future__ import annotations

from math import gcd
from typing import Dict

from .. import ir

RUNTIME_DIM_MULTIPLE = 4   # the launch rule: a runtime row length (last dim) is a multiple of 4 elements
CAP = 1 << 20              # larger divisors are kept as this power of two (enough for alignment)


def _cap(d: int) -> int:
    if d == 0 or d <= CAP:
        return d
    return gcd(d, CAP)


def _mul(a: int, b: int) -> int:
    if a == 0 or b == 0:
        return 0
    return _cap(a * b)


def row_length_dims(kir: ir.KernelIR):
    """Names of the runtime dims that are some tensor's last dimension (multiples of 4)."""
    return {p.sym.type.dims[-1] for p in kir.params
            if isinstance(p.sym.type, ir.TensorT) and isinstance(p.sym.type.dims[-1], str)}


def stride_divisors(kir: ir.KernelIR, dims) -> tuple:
    """Per dimension of a row-major tensor of `dims` (ints or runtime dim names), a number its
    stride (in elements) is always a multiple of: the product over the later dimensions of a
    literal extent, RUNTIME_DIM_MULTIPLE for a runtime row length, 1 for another runtime dim."""
    rows = row_length_dims(kir)
    out, acc = [], 1
    for d in reversed(dims):
        out.append(acc)
        acc *= d if isinstance(d, int) else RUNTIME_DIM_MULTIPLE if d in rows else 1
    return tuple(reversed(out))


class Divisibility:
    """Divisibility facts of one kernel variant."""

    def __init__(self, kir: ir.KernelIR):
        self.kir = kir
        self.sym_div: Dict[int, int] = {}
        self.row_length_dims = row_length_dims(kir)
        lets, loops, var_defs = [], [], {}
        for s in ir.walk_stmts(kir.body):
            if isinstance(s, ir.Let) and isinstance(s.sym.type, ir.ScalarT):
                lets.append(s)
            elif isinstance(s, ir.For):
                loops.append(s)
            elif isinstance(s, ir.VarDecl) and isinstance(s.sym.type, ir.ScalarT):
                var_defs.setdefault(id(s.sym), []).append((None, s.value))
            elif isinstance(s, ir.Assign) and isinstance(s.target, ir.Ref) and isinstance(s.target.sym.type, ir.ScalarT):
                var_defs.setdefault(id(s.target.sym), []).append((s.op, s.value))
        # Every scalar name starts at 0 ("always 0", the top of the divisibility order) and only
        # moves down (to divisors) until nothing changes; each step is a gcd, so this ends.
        for s in lets:
            self.sym_div[id(s.sym)] = 0
        for s in loops:
            self.sym_div[id(s.var)] = 0
        for k in var_defs:
            self.sym_div[k] = 0
        for _ in range(64):
            changed = False
            for s in lets:
                changed |= self._set(s.sym, self.of(s.value))
            for s in loops:
                changed |= self._set(s.var, gcd(self.of(s.lo), s.step))
            for k, defs in var_defs.items():
                d = 0
                for op, value in defs:
                    if value is None:            # uninitialized: any value
                        d = gcd(d, 1)
                    elif op is None:
                        d = gcd(d, self.of(value))
                    elif op in ("+", "-"):
                        d = gcd(d, gcd(self.sym_div[k], self.of(value)))
                    elif op == "*":
                        d = gcd(d, _mul(self.sym_div[k], self.of(value)))
                    else:
                        d = gcd(d, 1)
                old = self.sym_div[k]
                new = d if old == 0 else gcd(old, d)
                if new != old:
                    self.sym_div[k] = new
                    changed = True
            if not changed:
                break
        else:  # pragma: no cover - the chain is short; be safe anyway
            for k in self.sym_div:
                self.sym_div[k] = 1

    def _set(self, sym, d) -> bool:
        old = self.sym_div.get(id(sym), 0)
        new = d if old == 0 else gcd(old, d)
        if new != old:
            self.sym_div[id(sym)] = new
            return True
        return False

    def of(self, e) -> int:
        """d such that every value of index expression `e` is a multiple of d (0: always 0)."""
        if isinstance(e, ir.Const):
            v = e.value
            if isinstance(v, bool) or not isinstance(v, int):
                return 1
            return _cap(abs(v))
        if isinstance(e, ir.Ctx):
            return _cap(self.kir.threads) if e.field == "threads" else 1
        if isinstance(e, ir.Ref):
            s = e.sym
            if s.kind == "dim":
                return RUNTIME_DIM_MULTIPLE if s.name in self.row_length_dims else 1
            if id(s) in self.sym_div:
                return self.sym_div[id(s)]
            return 1
        if isinstance(e, ir.Unary):
            return self.of(e.x) if e.op == "-" else 1
        if isinstance(e, ir.Convert):
            if isinstance(e.type, ir.ScalarT) and e.type.dtype in ("i32", "i64", "index") \
                    and isinstance(e.x.type, ir.ScalarT) and e.x.type.dtype in ("i32", "i64", "index"):
                return self.of(e.x)
            return 1
        if isinstance(e, ir.Math):
            if e.fn in ("min", "max") and len(e.args) == 2:
                return gcd(self.of(e.args[0]), self.of(e.args[1]))
            return 1
        if isinstance(e, ir.Binary):
            a, b = e.a, e.b
            if e.op in ("+", "-"):
                return gcd(self.of(a), self.of(b))
            if e.op == "*":
                return _mul(self.of(a), self.of(b))
            if e.op == "%":
                return gcd(self.of(a), self.of(b))
            if e.op == "<<" and isinstance(b, ir.Const) and isinstance(b.value, int) and 0 <= b.value < 32:
                return _mul(self.of(a), 1 << b.value)
            if e.op == "/" and isinstance(b, ir.Const) and isinstance(b.value, int) and b.value != 0:
                da = self.of(a)
                if da == 0:
                    return 0
                if da % b.value == 0:
                    return _cap(abs(da // b.value))
            return 1
        return 1
