"""The checker's expression and type rules (spec sections 4 to 8, 10 and 11): names, literals
(open until their context types them), operators, conversions and broadcasting, subscripts and
slices, and calls (functions inlined; built-ins typed through `builtins.BUILTINS`).

Guarantees: every expression checks to an IR expression whose type is known, or fails with
the `TileError` of its first fault, at that subexpression.
"""
from __future__ import annotations

import math
from typing import Dict

import numpy as np

from .. import ir
from .. import types as T
from ..analysis.uniformity import expr_level
from ..lang import ast as A
from ..lang.diagnostics import TileNameError, TileRuleError, TileShapeError, TileTypeError
from . import builtins as B
from .builtins import BUILTINS
from .scope import _Abort, _Lit, _MacroArg, _Poison, _Tune, _Unavailable
from .values import (_NotConst, _broadcast, _cdiv_trunc, _convert_const, _finalize, _fits, _fold, _int_range,
                     _lit_type, _round_float, _shape_str, _type_str)


class ExpressionRules:
    """Mixed into `kernel._KernelChecker`: the expression rules (they use its state and helpers)."""

    # ---- types written in the source
    def type_expr(self, t, env) -> ir.Type:
        if isinstance(t, A.ScalarTypeExpr):
            if t.name not in T.DTYPES or t.name == "index":
                self.fail(TileTypeError, f"unknown type '{t.name}'", t.span)
            return ir.ScalarT(t.name)
        if isinstance(t, A.TensorTypeExpr):
            self.fail(TileTypeError, "only kernel parameters are tensors; declare a tile, as in tile<f32>[64, 64]", t.span)
        if t.dtype not in T.ELEMENT_DTYPES:
            self.fail(TileTypeError, f"'{t.dtype}' is not a tile element type (one of {', '.join(T.ELEMENT_DTYPES)})", t.span)
        if not 1 <= len(t.dims) <= 2:
            self.fail(TileShapeError, f"a tile has 1 or 2 dimensions, not {len(t.dims)}", t.span)
        shape = []
        for d in t.dims:
            shape.append(self.const_extent(d, env, "a tile's dimension"))
        return ir.TileT(t.dtype, tuple(shape))

    def const_extent(self, d, env, what) -> int:
        try:
            v = _fold(d, env)
        except _NotConst:
            if isinstance(d, A.Name):
                b = env.lookup(d.id)
                if isinstance(b, _Poison):
                    raise _Abort()
                if b is None and d.id in BUILTINS:
                    self.fail(TileNameError, f"'{d.id}' is a built-in function, not a constant; {what} must be a "
                              f"literal or an @autotune name", d.span)
                if b is None:
                    self.fail(TileNameError, f"'{d.id}' is not defined; {what} must be a literal or an @autotune name", d.span)
                if isinstance(b, ir.Sym) and b.kind == "dim":
                    self.fail(TileShapeError, f"{what} must be a constant, but '{d.id}' is a runtime dimension; bind it with @autotune({d.id} in [...]) or use a literal", d.span)
                if isinstance(b, _MacroArg):
                    with self.at_call_site(b):
                        return self.const_extent(b.expr, b.env, what)
            if _divides_by_zero(d, env):
                self.fail(TileRuleError, f"{what} divides by zero: '{self.text(d)}'", d.span)
            self.fail(TileShapeError, f"{what} must be a constant: a literal, an @autotune name, or arithmetic "
                      f"on them, not '{self.text(d)}'", d.span)
        if isinstance(v, int) and v > T.MAX_EXTENT:
            self.fail(TileShapeError, f"{what} is {v}, more than the largest extent, 2**31 = {T.MAX_EXTENT}", d.span)
        if not isinstance(v, int) or v <= 0:
            self.fail(TileShapeError, f"{what} must be a positive integer, not {v}", d.span)
        return v

    # ---- expressions
    def text(self, e) -> str:
        sp = e.span
        if sp.line == sp.end_line and 1 <= sp.line <= len(self.src.lines):
            return self.src.lines[sp.line - 1][sp.column - 1:sp.end_column - 1]
        return "expression"

    def sym_level(self, s: ir.Sym) -> int:
        """The uniformity of a symbol as far as the walks have found it (section 11)."""
        if s.kind == "var" and isinstance(s.type, ir.ScalarT):
            return self.var_uni.get(self.sym_key.get(id(s)), ir.UNIFORM)
        return self.sym_uni.get(id(s), ir.UNIFORM)

    def uni(self, e) -> int:
        return expr_level(e, self.sym_level)

    def scalar_levels(self, params, dims, body) -> Dict[ir.Sym, int]:
        """The level of every scalar symbol of the variant (the record `KernelIR.scalar_uniformity`
        that later stages read through `tilenb.analysis.uniformity`)."""
        syms = [p.sym for p in params] + list(dims.values())
        for st in ir.walk_stmts(body):
            if isinstance(st, (ir.Let, ir.VarDecl)):
                syms.append(st.sym)
            elif isinstance(st, ir.For):
                syms.append(st.var)
        return {s: self.sym_level(s) for s in syms if isinstance(s.type, ir.ScalarT)}

    def cond(self, e, env, what):
        c = self.expr(e, env)
        if c.type != ir.ScalarT("bool"):
            self.fail(TileTypeError, f"{what} must be a bool scalar (a comparison), not {_type_str(c.type)}", e.span)
        return self.fin(c)

    def to_index(self, x, span):
        if isinstance(x, ir.Const):
            return self.fit_const(x, "index", span) if isinstance(x, _Lit) else ir.Const(int(x.value), ir.ScalarT("index"), x.span)
        return x

    def index_expr(self, e, env, what):
        x = self.expr(e, env)
        if not isinstance(x.type, ir.ScalarT) or not T.DTYPES[x.type.dtype].is_int:
            extra = "; convert it, as in i32(x)" if isinstance(x.type, ir.ScalarT) and x.type.dtype in ("u8", "u16", "u32") else ""
            self.fail(TileTypeError, f"{what} must be an integer, not {_type_str(x.type)}{extra}", e.span)
        return self.to_index(x, e.span)

    def target(self, e, env) -> ir.Expr:
        if isinstance(e, A.Name):
            b = env.lookup(e.id)
            if isinstance(b, _Poison):
                raise _Abort()
            if isinstance(b, _MacroArg):
                with self.at_call_site(b):
                    return self.target(b.expr, b.env)
            if b is None:
                self.fail(TileNameError, f"'{e.id}' is not defined; declare it with 'var {e.id} = ...'", e.span)
            if isinstance(b, _Tune):
                self.fail(TileRuleError, f"'{e.id}' is an @autotune constant and cannot be assigned", e.span)
            s = b
            if s.kind == "var":
                return ir.Ref(s, s.type, e.span)
            if s.kind in ("let", "view"):
                self.fail(TileRuleError, f"'{e.id}' is a let and cannot be rebound; declare it with 'var' to change it" + (" (a let view can be written through a slice, as in x[...] = e)" if s.kind == "view" else ""), e.span)
            if s.kind == "tensor":
                self.fail(TileRuleError, f"tensor '{e.id}' cannot be assigned whole; write a slice, as in {e.id}[r :+ 8, :] = t", e.span)
            self.fail(TileRuleError, f"'{e.id}' ({'a loop variable' if s.kind == 'loop' else 'a parameter' if s.kind == 'scalar_param' else 'a dimension'}) cannot be assigned", e.span)
        if isinstance(e, A.Index):
            return self.index(e, env)
        if isinstance(e, A.Call) and e.func == "flat":
            return self.expr(e, env)
        self.fail(TileRuleError, f"'{self.text(e)}' cannot be assigned; assign a var, a slice or an element", e.span)

    def expr(self, e, env, allow_ctx=True) -> ir.Expr:
        t = type(e)
        if t is A.Name:       # the common cases first, by exact class (the chain below: subclasses)
            return self.name(e, env, allow_ctx)
        if t is A.Binary:
            a = self.expr(e.left, env, allow_ctx)
            b = self.expr(e.right, env, allow_ctx)
            return self.binary(e.op, a, b, e.span)
        if t is A.Call:
            return self.call(e, env, allow_ctx)
        if t is A.Index:
            return self.index(e, env)
        if isinstance(e, A.IntLit):
            if e.value > 2 ** 63:
                self.fail(TileTypeError, f"the integer {e.value} does not fit in 64 bits", e.span)
            return _Lit(e.value, _lit_type(e.value), e.span)
        if isinstance(e, A.FloatLit):
            if not math.isfinite(e.value):
                self.fail(TileTypeError, f"the float literal {self.text(e)} is out of the range of every float type", e.span)
            return _Lit(e.value, ir.ScalarT("f32"), e.span)
        if isinstance(e, A.Name):
            return self.name(e, env, allow_ctx)
        if isinstance(e, A.Field):
            path = []
            x = e
            while isinstance(x, A.Field):
                path.append(x.name)
                x = x.base
            if isinstance(x, A.Name) and x.id == "ctx" and env.lookup("ctx") is None:
                f = ".".join(reversed(path))
                if f not in B.CTX_FIELDS:
                    self.fail(TileNameError, f"ctx has no field '{f}' (it has: {', '.join(B.CTX_FIELDS)})", e.span)
                if not allow_ctx:
                    self.fail(TileRuleError, "ctx is not available here: @grid is computed on the host, before any CTA runs", e.span)
                return ir.Ctx(f, ir.ScalarT("index"), e.span)
            self.fail(TileNameError, f"'{self.text(e)}': only ctx has fields (ctx.block.x, ctx.thread, ...)", e.span)
        if isinstance(e, A.Unary):
            x = self.expr(e.operand, env, allow_ctx)
            return self.unary(e, x)
        if isinstance(e, A.Binary):
            a = self.expr(e.left, env, allow_ctx)
            b = self.expr(e.right, env, allow_ctx)
            return self.binary(e.op, a, b, e.span)
        if isinstance(e, A.Index):
            return self.index(e, env)
        if isinstance(e, A.Call):
            return self.call(e, env, allow_ctx)
        self.fail(TileRuleError, "unsupported expression", e.span)

    def name(self, e: A.Name, env, allow_ctx=True):
        b = env.lookup(e.id)
        if type(b) is ir.Sym:   # the common case (none of the binding classes below)
            if b.kind == "tensor":
                self.fail(TileRuleError, f"tensor '{e.id}' cannot be used whole; take a slice such as {e.id}[r :+ 64, :] or an element {e.id}[i, j]", e.span)
            return ir.Ref(b, b.type, e.span)
        if isinstance(b, _Poison):
            raise _Abort()
        if isinstance(b, _Unavailable):
            self.fail(TileRuleError, b.message, e.span)
        if isinstance(b, _MacroArg):
            with self.at_call_site(b):
                return self.expr(b.expr, b.env, allow_ctx)
        if isinstance(b, _Tune):
            return _Lit(b.value, _lit_type(b.value), e.span)
        if b is None:
            if e.id in B.CONSTANTS:
                return ir.Const(B.CONSTANTS[e.id], ir.ScalarT("bool"), e.span)
            if e.id == "ctx":
                self.fail(TileRuleError, "ctx alone is not a value; use a field such as ctx.thread or ctx.block.x", e.span)
            if e.id in B.all_names() or e.id in self.fns:
                self.fail(TileNameError, f"'{e.id}' is a function; call it, as in {e.id}(...)", e.span)
            self.fail(TileNameError, f"'{e.id}' is not defined", e.span)
        s = b
        if s.kind == "tensor":
            self.fail(TileRuleError, f"tensor '{e.id}' cannot be used whole; take a slice such as {e.id}[r :+ 64, :] or an element {e.id}[i, j]", e.span)
        return ir.Ref(s, s.type, e.span)

    def unary(self, e, x):
        t = x.type
        dt = self.scalar_dtype(t, e.span)
        if e.op == "-":
            self.require_arith(dt, e.span)
            if dt == "bool":
                self.fail(TileTypeError, "'-' does not apply to bool values; use '!'", e.span)
            if isinstance(x, _Lit):
                return _Lit(-x.value, _lit_type(-x.value), e.span)
            rt = self.with_dtype(t, T.compute_type(dt))
            if isinstance(x, ir.Const):
                return ir.Const(_convert_const(-x.value, rt.dtype), rt, e.span)
            return ir.Unary("-", x, rt, e.span)
        if e.op == "!":
            if dt != "bool":
                self.fail(TileTypeError, f"'!' needs a bool, not {dt}; compare first, as in x != 0", e.span)
            if isinstance(x, ir.Const):
                return ir.Const(not x.value, x.type, e.span)
            return ir.Unary("!", x, t, e.span)
        self.require_arith(dt, e.span)
        if not T.DTYPES[dt].is_int:
            self.fail(TileTypeError, f"'~' needs an integer, not {dt}", e.span)
        if isinstance(x, _Lit):
            return _Lit(~x.value, _lit_type(~x.value), e.span)
        rt = self.with_dtype(t, T.compute_type(dt))
        if isinstance(x, ir.Const):
            return ir.Const(_convert_const(~x.value, rt.dtype), rt, e.span)
        return ir.Unary("~", x, rt, e.span)

    def scalar_dtype(self, t, span):
        if isinstance(t, ir.TensorT):
            self.fail(TileRuleError, "a tensor cannot be used whole; slice it", span)
        return t.dtype

    def with_dtype(self, t, dt):
        if isinstance(t, ir.TileT):
            return ir.TileT(dt, t.shape)
        return ir.ScalarT(dt)

    def require_arith(self, dt, span):
        if T.DTYPES[dt].storage_only:
            self.fail(TileTypeError, f"no arithmetic on {dt}: it is a storage type; convert first, as in i32(x)", span)

    # ---- literals
    def fit_const(self, c: ir.Const, dtype: str, span) -> ir.Const:
        """`c` as a constant of type `dtype`. A literal must fit (a float literal in a float type,
        an integer literal in range); a typed constant converts (wrapping or rounding)."""
        if not isinstance(c, _Lit):
            return ir.Const(_convert_const(c.value, dtype), ir.ScalarT(dtype), c.span)
        v = c.value
        d = T.DTYPES[dtype]
        if dtype == "bool":
            self.fail(TileTypeError, f"cannot use the number {self.lit_text(c)} as a bool; compare, as in x != 0", span)
        if d.is_float:
            r = _round_float(float(v), dtype)
            if not math.isfinite(r):
                big = float(np.finfo(d.numpy).max) if dtype != "bf16" else 3.3895313892515355e38
                self.fail(TileTypeError, f"the constant {self.lit_text(c)} is out of the range of {dtype} (largest finite value about {big:.3g})", c.span)
            return ir.Const(r, ir.ScalarT(dtype), c.span)
        if isinstance(v, float):
            self.fail(TileTypeError, f"the float literal {self.lit_text(c)} cannot be {'an index' if dtype == 'index' else 'an ' + dtype}; convert it, as in {('i32' if dtype == 'index' else dtype)}(x)", span)
        lo, hi = _int_range("i64" if dtype == "index" else dtype)
        if not lo <= v <= hi:
            self.fail(TileTypeError, f"the constant {v} does not fit in {dtype} ({lo} to {hi})", c.span)
        return ir.Const(int(v), ir.ScalarT(dtype), c.span)

    def lit_text(self, c):
        if c.span.line and c.span.end_line == c.span.line:
            t = self.text(c)
            if t and t != "expression":
                return t
        return repr(c.value)

    def fin(self, e):
        """`e` with every open literal given its own type (f32, i32 or i64): see `_finalize`."""
        return _finalize(e, self.fit_const)

    # ---- operators
    def binary(self, op, a, b, span):
        t, opdt = self.binary_types(op, a, b, span)
        la, lb = isinstance(a, _Lit), isinstance(b, _Lit)
        if la and not lb:
            a = self.fit_const(a, opdt, span)
        elif lb and not la:
            b = self.fit_const(b, opdt, span)
        a, b = self.typed_const_operand(a, b, opdt), self.typed_const_operand(b, a, opdt)
        if op in ("<<", ">>") and isinstance(b, ir.Const) and not isinstance(b, _Lit):
            bits = T.DTYPES[opdt].bits
            if not 0 <= b.value < bits:
                self.fail(TileRuleError, f"a shift by {b.value} is out of range for {opdt}: shift counts run from 0 to {bits - 1}", b.span)
        if isinstance(a, ir.Const) and isinstance(b, ir.Const) and isinstance(t, ir.ScalarT):
            folded = self.fold_binary(op, a, b, t, opdt, span)
            if folded is not None:
                return folded
        return ir.Binary(op, a, b, t, span)

    @staticmethod
    def typed_const_operand(x, other, opdt):
        """A typed constant (say f64(0.1)) next to a value whose arithmetic type is narrower
        (an f32) decides the operand type itself. The backends take a `Const` operand to have
        adapted to the other side, as literals do, so such a constant is given as a conversion."""
        if (isinstance(x, ir.Const) and not isinstance(x, _Lit) and not isinstance(other, ir.Const)
                and isinstance(x.type, ir.ScalarT) and opdt != "bool"
                and T.compute_type(other.type.dtype) != opdt):
            return ir.Convert(x, ir.ScalarT(opdt), x.span)
        return x

    def fold_binary(self, op, a, b, t, opdt, span):
        """Fold an operator on two constants. Open literals fold exactly and stay open; typed
        constants fold in their type (left alone where the result would wrap or is IEEE-special)."""
        x, y = a.value, b.value
        both_lit = isinstance(a, _Lit) and isinstance(b, _Lit)
        is_int = isinstance(x, int) and isinstance(y, int) and not isinstance(x, bool) and not isinstance(y, bool)
        if op in ("/", "%") and y == 0:
            if is_int or opdt and T.DTYPES[opdt].is_int:
                self.fail(TileRuleError, f"{'division' if op == '/' else 'remainder'} by zero in a constant expression", span)
            return None
        if op in ("&&", "||"):
            v = (x and y) if op == "&&" else (x or y)
            return ir.Const(bool(v), t, span)
        if op in ("==", "!=", "<", "<=", ">", ">="):
            if not both_lit and T.DTYPES[opdt].is_float:
                x, y = _round_float(x, opdt), _round_float(y, opdt)
            v = {"==": x == y, "!=": x != y, "<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]
            return ir.Const(bool(v), t, span)
        if is_int:
            if op == "+":
                v = x + y
            elif op == "-":
                v = x - y
            elif op == "*":
                v = x * y
            elif op == "/":
                v = _cdiv_trunc(x, y)
            elif op == "%":
                v = x - _cdiv_trunc(x, y) * y
            elif op == "&":
                v = x & y
            elif op == "|":
                v = x | y
            elif op == "^":
                v = x ^ y
            elif op in ("<<", ">>"):
                if not 0 <= y < 64:
                    if both_lit:
                        self.fail(TileRuleError, f"a shift by {y} is out of range: shift counts run from 0 to 63", b.span)
                    return None
                v = x << y if op == "<<" else x >> y
            else:
                return None
            if both_lit:
                if not -(2 ** 63) <= v < 2 ** 63:
                    self.fail(TileTypeError, f"the constant expression '{self.text_span(span)}' is {v}, which does not fit in 64 bits", span)
                return _Lit(v, _lit_type(v), span)
            lo, hi = _int_range("i64" if t.dtype == "index" else t.dtype)
            return ir.Const(v, t, span) if lo <= v <= hi else None
        if op not in ("+", "-", "*", "/", "%"):
            return None
        fx, fy = float(x), float(y)
        if both_lit:
            with np.errstate(all="ignore"):
                v = {"+": fx + fy, "-": fx - fy, "*": fx * fy, "/": fx / fy if fy else math.nan,
                     "%": math.fmod(fx, fy) if fy else math.nan}[op]
            if not math.isfinite(v):
                return None
            return _Lit(v, ir.ScalarT("f32"), span)
        npdt = T.DTYPES[t.dtype].numpy
        with np.errstate(all="ignore"):
            xa, ya = np.asarray(fx, npdt), np.asarray(fy, npdt)
            r = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide, "%": np.fmod}[op](xa, ya)
        v = float(r)
        if not math.isfinite(v):
            return None
        return ir.Const(v, t, span)

    def text_span(self, span):
        if span.line == span.end_line and 1 <= span.line <= len(self.src.lines):
            return self.src.lines[span.line - 1][span.column - 1:span.end_column - 1]
        return "..."

    def operand_types(self, a, b, span, what):
        """The type a and b are combined in: an open literal takes the other side's
        arithmetic type; two values must promote (no int with float, nothing with bool)."""
        ta, tb = a.type.dtype, b.type.dtype
        for dt in (ta, tb):
            self.require_arith(dt, span)
        la, lb = isinstance(a, _Lit), isinstance(b, _Lit)
        if ta == "bool" or tb == "bool":
            if ta == tb:
                return "bool"
            other = tb if ta == "bool" else ta
            self.fail(TileTypeError, f"{what} mixes bool and {other}; bool converts to and from nothing (compare first, or use where(c, a, b))", span)
        if la and not lb:
            return self.literal_adapts(a, tb, span, what)
        if lb and not la:
            return self.literal_adapts(b, ta, span, what)
        if la and lb:
            if "f32" in (ta, tb):
                return "f32"
            return "i64" if "i64" in (ta, tb) else "i32"
        r = T.promote(ta, tb)
        if r is None:
            fix = "f32" if T.DTYPES[ta].is_float or T.DTYPES[tb].is_float else "i32"
            self.fail(TileTypeError, f"{what} mixes {ta} and {tb}; convert one side first, as in {fix}(x)", span)
        return r

    def literal_adapts(self, lit, other, span, what):
        if T.DTYPES[other].is_float:
            return T.compute_type(other)
        if isinstance(lit.value, float):
            self.fail(TileTypeError, f"{what} mixes {other} and the float literal {self.lit_text(lit)}; convert first, as in f32(x)", span)
        return T.compute_type(other)

    def combine_shapes(self, types, span, what):
        tiles = [t for t in types if isinstance(t, ir.TileT)]
        if not tiles:
            return None
        shape = tiles[0].shape
        for t in tiles[1:]:
            s = _broadcast(shape, t.shape)
            if s is None:
                self.fail(TileShapeError, f"{what}: shapes {_shape_str(shape)} and {_shape_str(t.shape)} do not broadcast (each dimension must match or be 1)", span)
            shape = s
        return shape

    def require_uniform_scalars_with_tiles(self, operands, span):
        if any(isinstance(o.type, ir.TileT) for o in operands):
            for o in operands:
                if isinstance(o.type, ir.ScalarT) and self.uni(o) > ir.UNIFORM:
                    self.fail(TileRuleError, "a per-thread (varying) value cannot be combined with a tile; tile expressions need values every thread agrees on", span)

    def binary_types(self, op, a, b, span, what=None):
        """(result type, operand type) of `a op b`; `what` names it in errors (default 'op')."""
        what = what or f"'{op}'"
        for x in (a, b):
            self.scalar_dtype(x.type, span)
        self.require_uniform_scalars_with_tiles((a, b), span)
        shape = self.combine_shapes((a.type, b.type), span, what)
        if op in ("&&", "||"):
            if a.type.dtype != "bool" or b.type.dtype != "bool":
                self.fail(TileTypeError, f"{what} needs bool operands, not {a.type.dtype} and {b.type.dtype}", span)
            dt = opdt = "bool"
        elif op in ("==", "!=", "<", "<=", ">", ">="):
            opdt = self.operand_types(a, b, span, what)
            if opdt == "bool" and op not in ("==", "!="):
                self.fail(TileTypeError, f"{what} does not order bools", span)
            dt = "bool"
        else:
            dt = opdt = self.operand_types(a, b, span, what)
            if dt == "bool":
                self.fail(TileTypeError, f"{what} does not apply to bool values", span)
            if op in ("&", "|", "^", "<<", ">>") and not T.DTYPES[dt].is_int:
                self.fail(TileTypeError, f"{what} needs integers, not {dt}", span)
        return (ir.TileT(dt, shape) if shape is not None else ir.ScalarT(dt)), opdt

    def coerce(self, value, want, span):
        """`value` as stored into something of type `want`: within a kind (int, float) values
        convert on store; across kinds, or to or from bool, a conversion call is needed."""
        vt = value.type
        if isinstance(vt, ir.TensorT):
            self.fail(TileRuleError, "a tensor cannot be used whole; slice it", span)
        if isinstance(want, ir.TensorT):
            self.fail(TileRuleError, "a tensor cannot be assigned whole; assign a slice of it", span)
        if isinstance(want, ir.ScalarT) and isinstance(vt, ir.TileT):
            self.fail(TileTypeError, f"cannot store a tile {_type_str(vt)} into a scalar of type {want.dtype}", span)
        vd, wd = vt.dtype, want.dtype
        if vd != wd:
            if "bool" in (vd, wd):
                self.fail(TileTypeError, f"cannot store {vd} into {wd}: bool converts to and from nothing" + (" (use where(c, 1, 0))" if vd == "bool" else " (compare instead, as in x != 0)"), span)
            fv, fw = T.DTYPES[vd].is_float, T.DTYPES[wd].is_float
            if fv != fw and not (isinstance(value, _Lit) and fw):
                if isinstance(value, _Lit):
                    self.fail(TileTypeError, f"cannot store the float literal {self.lit_text(value)} into {wd}; write an integer, or {wd}(...)", span)
                self.fail(TileTypeError, f"cannot store {vd} into {wd} without a conversion; write {wd}(...)", span)
        if isinstance(want, ir.TileT):
            if isinstance(vt, ir.TileT):
                if not _fits(vt.shape, want.shape):
                    self.fail(TileShapeError, f"a tile of shape {_shape_str(vt.shape)} does not fit {_shape_str(want.shape)}", span)
            elif self.uni(value) > ir.UNIFORM:
                self.fail(TileRuleError, "a tile cannot be filled with a per-thread (varying) value; every thread must agree on it", span)
        if isinstance(value, ir.Const):
            return self.fit_const(value, wd, span)
        return value

    # ---- subscripts
    def resolve_base(self, base_ast, env):
        """The Sym a subscript's base names (through function parameters), and whether it is
        flat(...). The subscripts themselves stay in the caller's scope."""
        flat = False
        while True:
            if isinstance(base_ast, A.Call) and base_ast.func == "flat" and env.lookup("flat") is None:
                if flat:
                    self.fail(TileRuleError, "flat(flat(t)) is just flat(t)", base_ast.span)
                if len(base_ast.args) != 1:
                    self.fail(TileRuleError, "flat(t) takes one tile", base_ast.span)
                flat = True
                base_ast = base_ast.args[0]
                continue
            if isinstance(base_ast, A.Name):
                b = env.lookup(base_ast.id)
                if isinstance(b, _MacroArg):
                    base_ast, env = b.expr, b.env
                    continue
            break
        if not isinstance(base_ast, A.Name):
            self.fail(TileRuleError, f"only a tensor, a tile or a view can be subscripted, not '{self.text(base_ast)}'; bind it to a var first", base_ast.span)
        b = env.lookup(base_ast.id)
        if isinstance(b, _Poison):
            raise _Abort()
        if isinstance(b, _Unavailable):
            self.fail(TileRuleError, b.message, base_ast.span)
        if b is None:
            self.fail(TileNameError, f"'{base_ast.id}' is not defined", base_ast.span)
        if isinstance(b, _Tune):
            self.fail(TileTypeError, f"'{base_ast.id}' is a constant and cannot be subscripted", base_ast.span)
        return b, flat, base_ast

    def index(self, e: A.Index, env):
        sym, flat, base_ast = self.resolve_base(e.base, env)
        t = sym.type
        if isinstance(t, ir.ScalarT):
            self.fail(TileTypeError, f"'{sym.name}' is a scalar and cannot be subscripted", base_ast.span)
        if isinstance(t, ir.TensorT):
            if flat:
                self.fail(TileRuleError, "flat() applies to a declared tile, not a tensor", e.base.span)
            extents = list(t.dims)
            what = f"tensor '{sym.name}'"
        else:
            extents = list(t.shape)
            if flat:
                if sym.kind == "view":
                    self.fail(TileRuleError, "flat() applies to a declared tile (var or let), not a view", e.base.span)
                if len(t.shape) != 2:
                    self.fail(TileShapeError, f"flat() takes a 2-D tile; '{sym.name}' is {_shape_str(t.shape)}, already one row", e.base.span)
                extents = [1, t.size]
            what = f"tile '{sym.name}'"
        if len(e.subs) != len(extents):
            self.fail(TileShapeError, f"{what} has {len(extents)} dimension(s) but {len(e.subs)} subscript(s) are given", e.span)
        subs = []
        shape = []
        for i, (s, ext) in enumerate(zip(e.subs, extents)):
            if isinstance(s, A.IndexSub):
                subs.append(ir.SubIndex(self.fin(self.index_expr(s.index, env, "a subscript"))))
            elif isinstance(s, A.FullSub):
                if not isinstance(ext, int):
                    self.fail(TileShapeError, f"':' over dimension {i} of {what}, a runtime dimension ('{ext}'); a tile's shape must be constant, so write a slice such as 0 :+ 64", s.span)
                subs.append(ir.SubRange(ir.Const(0, ir.ScalarT("index"), s.span), ext, True))
                shape.append(ext)
            else:
                start = self.fin(self.index_expr(s.start, env, "a slice's start"))
                n = self.const_extent(s.length, env, "a slice's length")
                if self.uni(start) > ir.UNIFORM:
                    self.fail(TileRuleError, f"the slice start '{self.text(s.start)}' differs between threads; a slice makes a tile that all threads share, so its start must be the same in every thread (uniform)", s.start.span)
                subs.append(ir.SubRange(start, n))
                shape.append(n)
        if shape:
            # a scalar index of a slice selects the tile all threads share, as its starts do
            for s, sub in zip(e.subs, subs):
                if isinstance(sub, ir.SubIndex) and self.uni(sub.index) > ir.UNIFORM:
                    self.fail(TileRuleError, f"the index '{self.text(s.index)}' differs between threads; a slice makes a tile that all threads share, so its scalar indices must be the same in every thread (uniform), like its starts", s.index.span)
        if not shape:
            indices = tuple(x.index for x in subs)
            if sym.kind != "tensor":
                # a constant element index must lie inside the tile (tensors are runtime-sized)
                for i, (s, idx, ext) in enumerate(zip(e.subs, indices, extents)):
                    if isinstance(idx, ir.Const) and not 0 <= idx.value < ext:
                        self.fail(TileShapeError, f"the index {idx.value} is outside {what}: dimension {i} "
                                  f"has the extent {ext}, so its indices run from 0 to {ext - 1}", s.span)
            if sym.name in [n for n, _ in self.register_names] and sym.kind != "tensor":
                self.fail(TileRuleError, f"'{sym.name}' is kept in registers (@registers): it cannot be indexed, since each thread holds only its own elements", e.span)
            return ir.Element(sym, indices, flat, ir.ScalarT(t.dtype), e.span)
        if len(shape) > 2:
            self.fail(TileShapeError, f"a slice makes a tile of at most 2 dimensions, not {len(shape)}; select the others with scalar indices", e.span)
        if sym.kind != "tensor":
            # a slice of a tile must stay inside it
            for s, sub, ext in zip(e.subs, subs, extents):
                if isinstance(sub, ir.SubRange) and sub.length > ext:
                    self.fail(TileShapeError, f"a slice of length {sub.length} does not fit in {what}, whose extent is {ext}", s.span)
                if isinstance(sub, ir.SubRange) and isinstance(sub.start, ir.Const):
                    if sub.start.value < 0 or sub.start.value + sub.length > ext:
                        self.fail(TileShapeError, f"the slice {sub.start.value} :+ {sub.length} runs outside {what}, whose extent is {ext}", s.span)
            if sym.name in [n for n, _ in self.register_names]:
                self.fail(TileRuleError, f"'{sym.name}' is kept in registers (@registers): it cannot be sliced, since each thread holds only its own elements", e.span)
        return ir.Slice(sym, tuple(subs), flat, ir.TileT(t.dtype, tuple(shape)), e.span)

    # ---- calls
    def call(self, e: A.Call, env, allow_ctx=True):
        """A call as a value: a function's body inlined, or a built-in typed by its rule in the
        table (`tilenb.sema.builtins.BUILTINS`)."""
        f = e.func
        b = env.lookup(f)
        if isinstance(b, _Poison):
            raise _Abort()
        if b is not None and not isinstance(b, _Tune):
            self.fail(TileNameError, f"'{f}' is not a function", e.func_span)
        if f in self.fns:
            fn = self.fns[f]
            if not fn.is_expr:
                self.fail(TileRuleError, f"'{f}' is a statement function and has no value; call it on a line of its own", e.span)
            fenv = self.bind_args(fn, e, env)
            with self.inside(fn, e):
                return self.expr(fn.body, fenv, allow_ctx)
        builtin = BUILTINS.get(f)
        if builtin is None:
            if f == "bool":
                self.fail(TileTypeError, "there is no conversion to bool; compare instead, as in x != 0", e.span)
            self.fail(TileNameError, f"'{f}' is not defined: no function or built-in of that name", e.func_span)
        if builtin.statement:
            self.fail(TileRuleError, builtin.as_value, e.span)
        if builtin.syntax:
            wrong = builtin.arity_error(len(e.args))
            if wrong:
                self.fail(TileRuleError, wrong, e.span)
            return builtin.rule(self, e, env)
        args = [self.expr(a, env, allow_ctx) for a in e.args]
        for a, aa in zip(args, e.args):
            if isinstance(a.type, ir.TensorT):
                self.fail(TileRuleError, "a tensor cannot be used whole; slice it", aa.span)
        wrong = builtin.arity_error(len(args))
        if wrong:
            self.fail(TileRuleError, wrong, e.span)
        return builtin.rule(self, e, args)

    def tile_arg(self, x, ast, f):
        if not isinstance(x.type, ir.TileT):
            self.fail(TileTypeError, f"{f}() takes a tile, not a {_type_str(x.type)}", ast.span)
        if not self.register_names:
            return x
        regs = [n for n, _ in self.register_names]
        for sub in ir.walk_expr(x):
            if isinstance(sub, ir.Ref) and sub.sym.name in regs and isinstance(sub.sym.type, ir.TileT):
                self.fail(TileRuleError, f"'{sub.sym.name}' is kept in registers (@registers), so {f}() cannot read it: {f} needs elements other threads hold", ast.span)
        return x


def _divides_by_zero(e, env) -> bool:
    """Whether the constant expression `e` (which did not fold) divides by a zero it folds to:
    `8 / 0`, `T % (T - T)`, `cdiv(64, 0)`, at any depth."""
    def zero(x):
        try:
            return _fold(x, env) == 0
        except _NotConst:
            return False
    if isinstance(e, A.Binary):
        if e.op in ("/", "%") and zero(e.right):
            return True
        return _divides_by_zero(e.left, env) or _divides_by_zero(e.right, env)
    if isinstance(e, A.Unary):
        return _divides_by_zero(e.operand, env)
    if isinstance(e, A.Call):
        if e.func == "cdiv" and len(e.args) == 2 and zero(e.args[1]):
            return True
        return any(_divides_by_zero(a, env) for a in e.args)
    return False
