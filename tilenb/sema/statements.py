"""The checker's statement rules (spec sections 9, 11 and 14): declarations and scopes,
assignments, loops and ifs, jumps, statement built-ins and statement functions (inlined).

Guarantees: each statement checks to IR statements or records its error and abandons that
statement only (`_Abort`), poisoning a name whose declaration failed; tile statements and
barriers are refused under non-uniform control, naming the clause that makes it so.
"""
from __future__ import annotations

import contextlib
from typing import Dict, Tuple

from .. import ir
from ..lang import ast as A
from ..lang.diagnostics import TileNameError, TileRuleError, TileShapeError, TileTypeError
from . import builtins as B
from .builtins import BUILTINS
from .functions import _written_params
from .scope import _POISON, _Abort, _Lit, _MacroArg, _Poison, _Tune
from .values import _fits, _fold, _NotConst, _shape_str

MAX_INLINED_CALLS = 10000   # function bodies inlined into one kernel variant, at most (see below)
# Arguments are substituted, so calls nested in arguments multiply (fn sq(x) = x * x;
# sq(sq(sq(...)))): past this the checker stops with an error instead of expanding for minutes.


class StatementRules:
    """Mixed into `kernel._KernelChecker`: the statement rules (they use its state and helpers)."""

    # ---- control uniformity
    def control_reason(self):
        """The (level, span, clause) of the least uniform control around the current statement."""
        worst = None
        for c in self.control:
            if c[0] > ir.UNIFORM and (worst is None or c[0] > worst[0]):
                worst = c
        for c in self.diverged:
            if c is not None and c[0] > ir.UNIFORM and (worst is None or c[0] > worst[0]):
                worst = c
        return worst

    def control_level(self):
        r = self.control_reason()
        return r[0] if r is not None else ir.UNIFORM

    def require_uniform_control(self, what, short, span):
        r = self.control_reason()
        if r is not None:
            lvl, _, clause = r
            self.fail(TileRuleError, f"{what} under {ir.UNIFORMITY_NAMES[lvl]} control: {clause}, but {short} needs every thread of the CTA; move it where all threads run it", span)

    def clause(self, kind, node, span):
        line = span.line + self.src.line_offset
        if kind == "if":
            return f"the condition '{self.text(node)}' at line {line} differs between threads"
        if kind == "while":
            return f"the while condition '{self.text(node)}' at line {line} differs between threads"
        if kind == "for":
            return f"the loop bounds at line {line} differ between threads"
        return f"the '{kind}' at line {line} is taken by some threads only"

    # ---- statements
    def block(self, stmts, env) -> Tuple[ir.Stmt, ...]:
        out = []
        scope_names: Dict[str, int] = {}
        for s in stmts:
            level = self.control_level()      # the control this statement runs under
            try:
                r = self.stmt(s, env, scope_names)
            except _Abort:
                if isinstance(s, (A.Let, A.VarDecl)) and s.name not in scope_names:
                    env.names[s.name] = _POISON
                    scope_names[s.name] = s.span.line
                continue
            if r is None:
                continue
            if isinstance(r, list):
                out.extend(r)
            else:
                self.stmt_uni[id(r)] = level
                out.append(r)
        return tuple(out)

    def declare(self, env, scope_names, name, binding, span):
        if name in scope_names:
            self.fail(TileNameError, f"'{name}' is already defined in this block (line {scope_names[name] + self.src.line_offset}); use another name, or assign with '{name} = ...' if it is a var", span)
        if name in B.all_names() or name == "ctx" or name in B.CONSTANTS:
            self.fail(TileNameError, f"'{name}' is a built-in name; choose another", span)
        prior = env.lookup(name)
        if isinstance(prior, _Tune):
            self.fail(TileNameError, f"'{name}' is an @autotune name; choose another", span)
        if isinstance(prior, _MacroArg) and self.call_stack and prior.fn == self.call_stack[-1]:
            self.fail(TileNameError, f"'{name}' is a parameter of function '{prior.fn}'; choose another name", span)
        if isinstance(prior, ir.Sym) and prior.kind in ("tensor", "dim", "scalar_param"):
            self.fail(TileNameError, f"'{name}' is a kernel {'parameter' if prior.kind != 'dim' else 'dimension'}; choose another name", span)
        scope_names[name] = span.line
        env.names[name] = binding

    def decl_key(self, span):
        return (self.inline_path, span.line, span.column)

    def stmt(self, s, env, scope_names):
        if not self.call_sites:
            self.kernel_stmt = s      # the kernel's own statement (not one of an inlined body)
        if isinstance(s, A.Let):
            return self.let_stmt(s, env, scope_names)
        if isinstance(s, A.VarDecl):
            return self.var_stmt(s, env, scope_names)
        if isinstance(s, A.Assign):
            return self.assign_stmt(s, env)
        if isinstance(s, A.For):
            return self.for_stmt(s, env)
        if isinstance(s, A.While):
            return self.while_stmt(s, env)
        if isinstance(s, A.If):
            return self.if_stmt(s, env)
        if isinstance(s, (A.Break, A.Continue)):
            word = "break" if isinstance(s, A.Break) else "continue"
            if self.fn_frames and self.fn_frames[-1]["loops"] == 0:
                raise _Abort()  # reported once, at the function's definition (_check_jumps)
            if self.loop_depth == 0:
                self.fail(TileRuleError, f"'{word}' outside a loop; it leaves (or skips a turn of) the innermost for or while", s.span)
            self.note_divergence(word, s.span)
            return ir.Break(s.span) if word == "break" else ir.Continue(s.span)
        if isinstance(s, A.Return):
            if self.fn_frames:
                raise _Abort()  # reported once, at the function's definition (_check_jumps)
            if self.returned is None:
                self.returned = s.span.line + self.src.line_offset
            if self.cluster_reduced is not None:
                self.fail(TileRuleError, f"'return' after the cluster reduction at line "
                          f"{self.cluster_reduced.line + self.src.line_offset}: a kernel with cluster reductions runs "
                          f"to its end (every CTA of the cluster waits there until the others have read its "
                          f"copy); put the rest of the kernel under an if instead", s.span)
            self.note_divergence("return", s.span)
            return ir.Return(s.span)
        if isinstance(s, A.ExprStmt):
            return self.expr_stmt(s, env)
        self.fail(TileRuleError, "unsupported statement", s.span)

    def note_divergence(self, word, span):
        """After a jump taken under non-uniform control, some threads are gone: the rest of the
        block runs under that control, and a `break` or `return` also leaves the threads that
        took it out of every later turn of the loop(s) it leaves, so the whole loop body does."""
        lvl = self.control_level()
        if lvl == ir.UNIFORM:
            return
        reason = (lvl, span, self.clause(word, None, span))
        frames = [len(self.diverged) - 1] if word != "return" else list(range(len(self.diverged)))
        for f in frames:
            cur = self.diverged[f]
            if cur is None or cur[0] < lvl:
                self.diverged[f] = reason
        loops = self.loop_keys[-1:] if word == "break" else self.loop_keys if word == "return" else []
        for key in loops:
            cur = self.loop_div.get(key)
            if cur is None or cur[0] < lvl:
                self.loop_div[key] = reason

    def loop_body(self, key, body, env):
        self.loop_depth += 1
        self.diverged.append(self.loop_div.get(key))
        self.loop_keys.append(key)
        if self.fn_frames:
            self.fn_frames[-1]["loops"] += 1
        try:
            return self.block(body, env)
        finally:
            self.loop_depth -= 1
            self.diverged.pop()
            self.loop_keys.pop()
            if self.fn_frames:
                self.fn_frames[-1]["loops"] -= 1

    def while_stmt(self, s: A.While, env):
        cond, u = None, ir.UNIFORM
        try:
            cond = self.cond(s.cond, env, "a while condition")
            u = self.uni(cond)
        except _Abort:
            pass
        self.control.append((u, s.cond.span, self.clause("while", s.cond, s.cond.span)))
        try:
            body = self.loop_body(self.decl_key(s.span), s.body, env.child())
        finally:
            self.control.pop()
        if cond is None:
            raise _Abort()
        return ir.While(cond, body, s.span)

    def if_stmt(self, s: A.If, env):
        cond, u = None, ir.UNIFORM
        try:
            cond = self.cond(s.cond, env, "an if condition")
            u = self.uni(cond)
        except _Abort:
            pass
        self.control.append((u, s.cond.span, self.clause("if", s.cond, s.cond.span)))
        try:
            then = self.block(s.then, env.child())
            orelse = self.block(s.orelse, env.child())
        finally:
            self.control.pop()
        if cond is None:
            raise _Abort()
        return ir.If(cond, then, orelse, s.span)

    def let_stmt(self, s: A.Let, env, scope_names):
        value = self.expr(s.value, env)
        typ = value.type
        if isinstance(typ, ir.TensorT):
            self.fail(TileRuleError, "a tensor cannot be bound whole; bind a slice, as in let v = A[r :+ 64, :]", s.value.span)
        if s.type is not None:
            want = self.type_expr(s.type, env)
            value = self.coerce(value, want, s.value.span)
            typ = want
        elif isinstance(value, ir.Const):
            value = self.fin(value)
            typ = value.type
        if isinstance(typ, ir.TileT):
            is_view = isinstance(value, ir.Slice) or (isinstance(value, ir.Ref) and value.sym.kind in ("var", "let", "view") and isinstance(value.sym.type, ir.TileT))
            if not is_view:
                self.require_uniform_control("a tile statement (let of a tile)", "a tile statement", s.span)
            if is_view and value.type != typ:
                is_view = False  # a converting let makes a tile of its own
                self.require_uniform_control("a tile statement (let of a tile)", "a tile statement", s.span)
            sym = self.new_sym(s.name, "view" if is_view else "let", typ, s.span)
            self.sym_uni[id(sym)] = ir.UNIFORM
            if not is_view:
                self.tile_decls.setdefault(s.name, []).append(sym)
        else:
            sym = self.new_sym(s.name, "let", typ, s.span)
            self.sym_uni[id(sym)] = max(self.uni(value), self.control_level())
        self.declare(env, scope_names, s.name, sym, s.span)
        return ir.Let(sym, self.fin(value), s.span)

    def var_stmt(self, s: A.VarDecl, env, scope_names):
        want = self.type_expr(s.type, env) if s.type is not None else None
        value = self.expr(s.value, env) if s.value is not None else None
        if want is None and value is None:
            self.fail(TileTypeError, f"var '{s.name}' needs a type or an initial value, as in 'var {s.name}: f32 = 0.0'", s.span)
        if value is not None and isinstance(value.type, ir.TensorT):
            self.fail(TileRuleError, "a tensor cannot be copied whole; copy a slice, as in var t = A[r :+ 64, :]", s.value.span)
        if want is None:
            if isinstance(value, ir.Const):
                value = self.fin(value)
            want = value.type
        if value is not None:
            value = self.coerce(value, want, s.value.span)
        if isinstance(want, ir.TileT):
            self.require_uniform_control("a tile statement (var of a tile)", "a tile statement", s.span)
        sym = self.new_sym(s.name, "var", want, s.span)
        key = self.decl_key(s.span)
        self.sym_key[id(sym)] = key
        if isinstance(want, ir.ScalarT):
            u = max(self.uni(value) if value is not None else ir.UNIFORM, self.control_level())
            self.var_uni[key] = max(self.var_uni.get(key, ir.UNIFORM), u)
        else:
            self.tile_decls.setdefault(s.name, []).append(sym)
        self.declare(env, scope_names, s.name, sym, s.span)
        return ir.VarDecl(sym, self.fin(value) if value is not None else None, s.span)

    def assign_stmt(self, s: A.Assign, env):
        target = self.target(s.target, env)
        value = self.expr(s.value, env)
        if isinstance(value.type, ir.TensorT):
            self.fail(TileRuleError, "a tensor cannot be assigned whole; assign a slice of it", s.value.span)
        ttype = target.type
        if s.op is not None:
            combined, opdt = self.binary_types(s.op, target, value, s.span)
            if isinstance(value, _Lit):
                value = self.fit_const(value, opdt, s.value.span)
            value = self.typed_const_operand(value, target, opdt)
            if isinstance(ttype, ir.TileT) and isinstance(combined, ir.TileT) and not _fits(combined.shape, ttype.shape):
                self.fail(TileShapeError, f"'{self.text(s.value)}' of shape {_shape_str(combined.shape)} does not fit the target of shape {_shape_str(ttype.shape)}", s.value.span)
            self.coerce(ir.Binary(s.op, target, value, combined, s.span), ttype, s.value.span)
        else:
            value = self.coerce(value, ttype, s.value.span)
        if isinstance(ttype, ir.TileT):
            self.require_uniform_control("a tile statement (assignment to a tile)", "a tile statement", s.span)
        elif isinstance(target, ir.Ref):
            key = self.sym_key.get(id(target.sym))
            if key is not None:
                u = max(self.uni(value), self.control_level())
                self.var_uni[key] = max(self.var_uni.get(key, ir.UNIFORM), u)
        return ir.Assign(self.fin(target), self.fin(value), s.op, s.span)

    def for_stmt(self, s: A.For, env):
        lo = hi = None
        step, unroll, u = 1, 1, ir.UNIFORM
        ok = True
        if len(s.args) == 1:
            lo_ast, hi_ast, step_ast = None, s.args[0], None
        else:
            lo_ast, hi_ast = s.args[0], s.args[1]
            step_ast = s.args[2] if len(s.args) == 3 else None
        try:
            lo = self.index_expr(lo_ast, env, "the loop's start") if lo_ast is not None else ir.Const(0, ir.ScalarT("index"), s.span)
            hi = self.index_expr(hi_ast, env, "the loop's end")
            u = max(self.uni(lo), self.uni(hi))
        except _Abort:
            ok = False
        try:
            if step_ast is not None:
                try:
                    step = _fold(step_ast, env)
                except _NotConst:
                    self.fail(TileRuleError, "a for loop's step must be a constant (a literal or an @autotune name); for a step known only at run time, use a while loop", step_ast.span)
                if not isinstance(step, int) or step <= 0 or step >= 2 ** 62:
                    self.fail(TileRuleError, f"a for loop's step must be a positive integer, not {step}; to count down, count up and compute the index", step_ast.span)
        except _Abort:
            ok = False
        try:
            if s.unroll is not None:
                if isinstance(s.unroll, str):
                    b = env.lookup(s.unroll)
                    if not isinstance(b, _Tune):
                        self.fail(TileRuleError, f"the unroll count '{s.unroll}' must be a constant: an integer literal or an @autotune name", s.unroll_span)
                    unroll = b.value
                else:
                    unroll = s.unroll
                if not 1 <= unroll <= 1024:
                    self.fail(TileRuleError, f"the unroll count must be at least 1 (and at most 1024), not {unroll}", s.unroll_span)
        except _Abort:
            ok = False
        if s.var in B.all_names() or s.var == "ctx" or s.var in B.CONSTANTS:
            self.err(TileNameError, f"'{s.var}' is a built-in name; choose another loop variable", s.span)
            raise _Abort()
        prior = env.lookup(s.var)
        if isinstance(prior, _MacroArg) and self.call_stack and prior.fn == self.call_stack[-1]:
            self.err(TileNameError, f"'{s.var}' is a parameter of function '{prior.fn}'; choose another loop variable", s.span)
            raise _Abort()
        if isinstance(prior, _Tune) or (isinstance(prior, ir.Sym) and prior.kind in ("tensor", "dim", "scalar_param")):
            what = "an @autotune name" if isinstance(prior, _Tune) else "a kernel parameter" if prior.kind != "dim" else "a dimension"
            self.err(TileNameError, f"'{s.var}' is {what}; choose another loop variable", s.span)
            raise _Abort()
        var = self.new_sym(s.var, "loop", ir.ScalarT("index"), s.span)
        self.sym_uni[id(var)] = max(u, self.control_level())
        benv = env.child()
        benv.names[s.var] = var
        self.control.append((u, s.span, self.clause("for", None, s.span)))
        try:
            body = self.loop_body(self.decl_key(s.span), s.body, benv.child())
        finally:
            self.control.pop()
        if not ok:
            raise _Abort()
        return ir.For(var, self.fin(lo), self.fin(hi), step, unroll, body, s.span)

    def expr_stmt(self, s: A.ExprStmt, env):
        e = s.expr
        if isinstance(e, A.Call):
            b = env.lookup(e.func)
            if isinstance(b, _Poison):
                raise _Abort()
            if isinstance(b, _MacroArg):
                self.fail(TileRuleError, f"'{e.func}' is a parameter, not a function", e.func_span)
            if b is not None and not isinstance(b, _Tune):
                self.fail(TileNameError, f"'{e.func}' is not a function", e.func_span)
            builtin = BUILTINS.get(e.func)
            if builtin is not None and builtin.statement:
                wrong = builtin.arity_error(len(e.args))
                if wrong:
                    self.fail(TileRuleError, wrong, e.span)
                return builtin.rule(self, e, env, s.span)
            if e.func in self.fns and not self.fns[e.func].is_expr:
                return self.inline_stmt_fn(self.fns[e.func], e, env)
        # any other expression: its value would be dropped
        self.expr(e, env)
        self.fail(TileRuleError, f"the value of '{self.text(e)}' is not used; assign it, or call a statement function", e.span)

    # ---- functions
    @contextlib.contextmanager
    def at_call_site(self, m: _MacroArg):
        """Check a function argument as the caller would: its call stack and call sites."""
        saved = (self.call_stack, self.call_sites)
        self.call_stack, self.call_sites = list(m.caller[0]), list(m.caller[1])
        try:
            yield
        finally:
            self.call_stack, self.call_sites = saved

    def bind_args(self, f: A.Function, call: A.Call, env):
        if len(call.args) != len(f.params):
            self.fail(TileRuleError, f"function '{f.name}' takes {len(f.params)} argument(s), not {len(call.args)}", call.span)
        if f.name in self.recursive:
            raise _Abort()  # reported once, at the function's definition
        if f.name in self.call_stack:
            self.fail(TileRuleError, f"function '{f.name}' calls itself; recursion is not allowed", call.span)
        self.inlined += 1
        if self.inlined > MAX_INLINED_CALLS:
            if self.inlined == MAX_INLINED_CALLS + 1:   # reported once, at the kernel's own statement
                site = self.kernel_stmt.span if self.kernel_stmt is not None else call.span
                self.errors.append(self.src.error(
                    TileRuleError, f"with this statement, kernel '{self.k.name}' inlines more than "
                    f"{MAX_INLINED_CALLS} function bodies: an argument is substituted wherever its parameter "
                    "appears, so calls nested in arguments multiply; bind such an argument with let first",
                    site.line, site.column))
            raise _Abort()
        written = _written_params(f)
        for p, a in zip(f.params, call.args):
            if p in written and not isinstance(a, A.Name):
                self.fail(TileRuleError, f"function '{f.name}' indexes or assigns its parameter '{p}', so it must be passed a name, not '{self.text(a)}'", a.span)
        caller = (tuple(self.call_stack), tuple(self.call_sites))
        fenv = env.child()
        for p, a in zip(f.params, call.args):
            fenv.names[p] = _MacroArg(a, env, f.name, caller)
        return fenv

    @contextlib.contextmanager
    def inside(self, f: A.Function, call: A.Call):
        self.call_stack.append(f.name)
        self.call_sites.append((f.name, call.span))
        try:
            yield
        finally:
            self.call_stack.pop()
            self.call_sites.pop()

    def inline_stmt_fn(self, f: A.Function, call: A.Call, env):
        fenv = self.bind_args(f, call, env)
        self.fn_frames.append({"loops": 0})
        saved_path = self.inline_path
        self.inline_path = self.inline_path + ((call.span.line, call.span.column),)
        try:
            with self.inside(f, call):
                body = self.block(f.body, fenv.child())
        finally:
            self.fn_frames.pop()
            self.inline_path = saved_path
        return list(body)
