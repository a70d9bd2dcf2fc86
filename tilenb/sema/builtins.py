"""The built-ins of the tile language: one table, `BUILTINS`, of every built-in call with the
number of arguments it takes and its typing rule.

Guarantees: `BUILTINS` is the one list of built-in calls. The checker dispatches every call of
a built-in through it (value built-ins in `expressions.ExpressionRules.call`, statement built-ins
in `statements.StatementRules.expr_stmt`), after checking the argument count against the entry;
the rule then types the call and returns its IR (or fails with a `TileError` naming the argument
at fault). The backends implement each name: the numpy reference (`tilenb.runtime.cpu*`) and the
CUDA generator (`tilenb.codegen`). docs/spec.md section 10 lists every name of the table and no
other (tests/sema check both ways).

Adding a built-in: one `Builtin(...)` entry below, with its rule, plus its CPU and CUDA
implementations and its row in the spec's section 10.

A rule is `rule(ck, call, args)` for a value built-in, where `ck` is the kernel checker
(`tilenb.sema.kernel._KernelChecker`, whose helpers the rules use: `fail`, `fit_const`,
`binary_types`, ...), `call` the `ast.Call` and `args` its arguments already checked (IR, none of
them a whole tensor); `rule(ck, call, env)` for one that takes its arguments as syntax (`flat`)
and `rule(ck, call, env, span)` for a statement built-in (`span`: the statement's), which check
their arguments themselves.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Optional

from .. import ir
from .. import types as T
from ..lang import ast as A
from ..lang.diagnostics import TileRuleError, TileShapeError, TileTypeError
from .scope import _Lit
from .values import _convert_const, _fits, _lit_type, _shape_str, _type_str


@dataclass(frozen=True)
class Builtin:
    """One built-in call.

    name: what the program calls. arity: how many arguments it takes, at most (checked before the
    rule runs; `min_arity`: at least, when the last ones are optional; `usage` is the message when
    the count is wrong, else "f() takes n argument(s), not m").
    rule: the typing rule (see the module docstring). statement: a statement built-in (no value:
    written on a line of its own; `as_value` is the error for using it as a value). syntax: the
    rule receives the arguments unchecked (the call's environment instead of checked values).
    group: the family in the spec's section 10 (for readers and `tilenb.puzzles.coverage`)."""
    name: str
    arity: int
    rule: Callable
    group: str
    min_arity: Optional[int] = None     # fewer arguments accepted (the last ones optional)
    statement: bool = False
    syntax: bool = False
    usage: Optional[str] = None
    as_value: Optional[str] = None

    def arity_error(self, given: int) -> Optional[str]:
        """The error message for `given` arguments, or None when that is the right count."""
        least = self.arity if self.min_arity is None else self.min_arity
        if least <= given <= self.arity:
            return None
        if self.usage:
            return self.usage
        count = f"{least} or {self.arity}" if least == self.arity - 1 else (
            str(self.arity) if least == self.arity else f"{least} to {self.arity}")
        return f"{self.name}() takes {count} argument(s), not {given}"


# ---- typing rules of the value built-ins -----------------------------------------------------
def _conversion(ck, e: A.Call, args):
    """f16(x) ... u32(x): a value of that type (section 4.4); a constant converts at once."""
    f = e.func
    x = args[0]
    if x.type.dtype == "bool":
        ck.fail(TileTypeError, f"cannot convert a bool to {f}; bool converts to and from nothing (use where(c, 1, 0))", e.span)
    if isinstance(x, ir.Const):  # a conversion call converts, even a literal that does not fit
        return ir.Const(_convert_const(x.value, f), ir.ScalarT(f), e.span)
    return ir.Convert(x, ck.with_dtype(x.type, f), e.span)


def _unary_math(ck, e: A.Call, args):
    """exp(x) ... erf(x): a float scalar or tile (abs also integers), same shape, arithmetic type."""
    f = e.func
    x = args[0]
    dt = x.type.dtype
    ck.require_arith(dt, e.span)
    if dt == "bool":
        ck.fail(TileTypeError, f"{f}() does not take a bool", e.span)
    if f == "abs" and T.DTYPES[dt].is_int:
        if isinstance(x, _Lit):
            return _Lit(abs(x.value), _lit_type(abs(x.value)), e.span)
        return ir.Math(f, (ck.fin(x),), ck.with_dtype(x.type, T.compute_type(dt)), e.span)
    if not T.DTYPES[dt].is_float:
        if isinstance(x, _Lit):
            x = ck.fit_const(x, "f32", e.span)
            dt = "f32"
        else:
            ck.fail(TileTypeError, f"{f}() needs a float, not {dt}; convert first, as in f32(x)", e.span)
    if isinstance(x, _Lit):
        x = ck.fit_const(x, "f32", e.span)
    return ir.Math(f, (x,), ck.with_dtype(x.type, T.compute_type(dt)), e.span)


def _binary_math(ck, e: A.Call, args):
    """min(a, b), max(a, b): numbers, broadcast, in the promoted type; two literals fold."""
    f = e.func
    a, bb = args
    t, opdt = ck.binary_types("+", a, bb, e.span, f"{f}()")
    if isinstance(a, _Lit) and isinstance(bb, _Lit):
        v = (min if f == "min" else max)(a.value, bb.value)
        return _Lit(v, _lit_type(v), e.span) if not (isinstance(a.value, float) or isinstance(bb.value, float)) else _Lit(float(v), ir.ScalarT("f32"), e.span)
    if isinstance(a, _Lit):
        a = ck.fit_const(a, opdt, e.span)
    if isinstance(bb, _Lit):
        bb = ck.fit_const(bb, opdt, e.span)
    return ir.Math(f, (a, bb), t, e.span)


def _where(ck, e: A.Call, args):
    """where(c, a, b): a bool c and numbers a, b, broadcast to one shape."""
    c, a, bb = args
    if c.type.dtype != "bool":
        ck.fail(TileTypeError, f"where()'s first argument must be a bool (a comparison), not {c.type.dtype}", e.args[0].span)
    ck.require_uniform_scalars_with_tiles(args, e.span)
    shape = ck.combine_shapes([x.type for x in args], e.span, "where()")
    dt = ck.operand_types(a, bb, e.span, "where()")
    if isinstance(a, _Lit):
        a = ck.fit_const(a, dt, e.span)
    if isinstance(bb, _Lit):
        bb = ck.fit_const(bb, dt, e.span)
    return ir.Math("where", (c, a, bb), ir.TileT(dt, shape) if shape else ir.ScalarT(dt), e.span)


def _cdiv(ck, e: A.Call, args):
    """cdiv(a, b): integer scalars, the quotient rounded up; constants fold."""
    for a, aa in zip(args, e.args):
        if not isinstance(a.type, ir.ScalarT) or not T.DTYPES[a.type.dtype].is_int:
            ck.fail(TileTypeError, f"cdiv() takes integer scalars, not {_type_str(a.type)}", aa.span)
    dt = ck.operand_types(args[0], args[1], e.span, "cdiv()")
    a, bb = args
    if isinstance(a, ir.Const) and isinstance(bb, ir.Const):
        if bb.value == 0:
            ck.fail(TileRuleError, "cdiv() by zero in a constant expression", e.span)
        v = -(-a.value // bb.value)
        if isinstance(a, _Lit) and isinstance(bb, _Lit):
            return _Lit(v, _lit_type(v), e.span)
        return ck.fit_const(_Lit(v, _lit_type(v), e.span), dt, e.span)
    if isinstance(a, _Lit):
        a = ck.fit_const(a, dt, e.span)
    if isinstance(bb, _Lit):
        bb = ck.fit_const(bb, dt, e.span)
    return ir.Math("cdiv", (a, bb), ir.ScalarT(dt), e.span)


def _reduction(ck, e: A.Call, args):
    """rowsum(t) ... colmin(t): a tile [R, C] (rows also [C]) to [R, 1] or [1, C] (section 10)."""
    f = e.func
    op, axis = REDUCTIONS[f]
    x = ck.tile_arg(args[0], e.args[0], f)
    dt = x.type.dtype
    ck.require_arith(dt, e.span)
    if dt == "bool":
        ck.fail(TileTypeError, f"{f}() does not take bool tiles; use where(c, 1, 0) to count", e.span)
    shape = x.type.shape
    if len(shape) == 1:
        if axis == 0:
            ck.fail(TileShapeError, f"{f}() needs a 2-D tile; this one is {_shape_str(shape)}", e.span)
        out = (1,)
    else:
        out = (shape[0], 1) if axis == 1 else (1, shape[1])
    rdt = T.compute_type(dt) if op == "sum" else dt
    if op != "sum" and dt in ("f16", "bf16"):
        rdt = "f32"
    return ir.Reduce(op, axis, x, ir.TileT(rdt, out), e.span)


def _dot(ck, e: A.Call, args):
    """dot(a, b) [M, K] x [K, N] and dot_t(a, b) [M, K] x [N, K]: [M, N] in the accumulator type."""
    f = e.func
    a = ck.tile_arg(args[0], e.args[0], f)
    bb = ck.tile_arg(args[1], e.args[1], f)
    if len(a.type.shape) != 2 or len(bb.type.shape) != 2:
        ck.fail(TileShapeError, f"{f}() takes 2-D tiles, not {_shape_str(a.type.shape)} and {_shape_str(bb.type.shape)}", e.span)
    if a.type.dtype != bb.type.dtype:
        ck.fail(TileTypeError, f"{f}() needs operands of one type, not {a.type.dtype} and {bb.type.dtype}; convert one", e.span)
    dt = a.type.dtype
    if dt not in ("f16", "bf16", "f32", "f64", "i8"):
        ck.fail(TileTypeError, f"{f}() takes f16, bf16, f32, f64 or i8 tiles, not {dt}", e.span)
    (m, k1) = a.type.shape
    (n, k2) = (bb.type.shape[1], bb.type.shape[0]) if f == "dot" else bb.type.shape
    if k1 != k2:
        form = "[M, K] x [K, N]" if f == "dot" else "[M, K] x [N, K]"
        ck.fail(TileShapeError, f"{f}(): the inner dimensions differ ({_shape_str(a.type.shape)} and {_shape_str(bb.type.shape)}); {f} takes {form}", e.span)
    acc = {"i8": "i32", "f64": "f64"}.get(dt, "f32")
    return ir.Dot(a, bb, f == "dot_t", ir.TileT(acc, (m, n)), e.span)


def _transpose(ck, e: A.Call, args):
    """transpose(t): [R, C] to [C, R]."""
    x = ck.tile_arg(args[0], e.args[0], e.func)
    if len(x.type.shape) != 2:
        ck.fail(TileShapeError, f"transpose() takes a 2-D tile, not {_shape_str(x.type.shape)}", e.span)
    r, c = x.type.shape
    return ir.Transpose(x, ir.TileT(x.type.dtype, (c, r)), e.span)


def _flat(ck, e: A.Call, env):
    """flat(t): a declared tile [R, C] seen as its [1, R*C] window (a subscript of the tile)."""
    sym, _, _ = ck.resolve_base(e.args[0], env)
    if not (isinstance(sym, ir.Sym) and isinstance(sym.type, ir.TileT)):
        ck.fail(TileRuleError, "flat(t) takes one declared tile (a var or let tile)", e.span)
    full = A.FullSub(e.span)
    return ck.index(A.Index(e, (full, full), e.span), env)


def _index_tile(ck, e: A.Call, args):
    """rows(R, C[, start]) / cols(R, C[, start]): the i32 tile [R, C] whose element (i, j) is
    start + i (rows) or start + j (cols); R and C are constants (literals, @autotune names or
    arithmetic on those, as tile shapes are), the start a uniform integer scalar (0 when left
    out) stored into i32. Typed as an elementwise built-in of no tile operand (`ir.Math` with
    the start as its one argument), so every lowering evaluates it at an element's own
    coordinates and never stores it."""
    f = e.func
    shape = []
    for a, aa, what in zip(args[:2], e.args[:2], ("row count R", "column count C")):
        if not isinstance(a, _Lit):
            ck.fail(TileShapeError, f"{f}(R, C, ...): the {what} must be a constant (a literal or an @autotune "
                    f"name), as a tile shape is; '{ck.text(aa)}' is not", aa.span)
        if not isinstance(a.value, int) or isinstance(a.value, bool):
            ck.fail(TileTypeError, f"{f}(R, C, ...): the {what} must be an integer, not {ck.text(aa)}", aa.span)
        if a.value < 1:
            ck.fail(TileShapeError, f"{f}(R, C, ...): the {what} must be at least 1, not {a.value}", aa.span)
        if a.value > T.MAX_EXTENT:
            ck.fail(TileShapeError, f"{f}(R, C, ...): the {what} must be at most {T.MAX_EXTENT} (2**31), as any "
                    f"tile dimension, not {a.value}", aa.span)
        shape.append(int(a.value))
    if len(args) == 3:
        start, sa = args[2], e.args[2]
        if not isinstance(start.type, ir.ScalarT) or not T.DTYPES[start.type.dtype].is_int:
            hint = (f" ({start.type.dtype} is a storage type: convert it first, as in i32(x))"
                    if isinstance(start.type, ir.ScalarT) and T.DTYPES[start.type.dtype].kind == "uint" else "")
            ck.fail(TileTypeError, f"{f}()'s start (its third argument) must be a signed integer or index "
                    f"scalar, not {_type_str(start.type)}{hint}", sa.span)
        ck.require_arith(start.type.dtype, sa.span)
        if ck.uni(start) > ir.UNIFORM:
            per = "a per-warp" if ck.uni(start) == ir.WARP else "a per-thread"
            ck.fail(TileRuleError, f"{f}()'s start must be the same in every thread of the CTA (a tile is the "
                    f"CTA's); '{ck.text(sa)}' is {per} value", sa.span)
        start = ck.fit_const(start, "i32", sa.span) if isinstance(start, ir.Const) else \
            (start if start.type.dtype == "i32" else ir.Convert(ck.fin(start), ir.ScalarT("i32"), sa.span))
    else:
        start = ir.Const(0, ir.ScalarT("i32"), e.span)
    return ir.Math(f, (start,), ir.TileT("i32", tuple(shape)), e.span)


# ---- typing rules of the statement built-ins -------------------------------------------------
def _barrier(ck, e: A.Call, env, span):
    """barrier(): every thread of the CTA, so only under uniform control."""
    ck.require_uniform_control("barrier() (it would hang)", "barrier()", e.span)
    return ir.Barrier(span)


def _atomic(ck, e: A.Call, env, span):
    """atomic_add / atomic_max of one tensor element (per-thread code, any control) or of a
    tensor slice (a tile atomic: a tile statement, so under uniform control; each element
    valid in the value and inside the tensor is updated once, by its owner thread)."""
    f = e.func
    target = ck.target(e.args[0], env)
    tile = isinstance(target, ir.Slice)
    if not isinstance(target, (ir.Element, ir.Slice)) or target.base.kind != "tensor":
        what = ("a slice of a tile" if isinstance(target, ir.Slice) else "an element of a tile"
                if isinstance(target, ir.Element) else f"'{ck.text(e.args[0])}'")
        if isinstance(target, (ir.Element, ir.Slice)) and target.base.kind == "view":
            what = f"'{ck.text(e.args[0])}', through the let view '{target.base.name}'"
        ck.fail(TileRuleError, f"the first argument of {f} must be one element of a tensor, as in T[i, j], "
                f"or a slice of a tensor, as in T[r :+ 1, c :+ 64] (a tile atomic), not {what}; atomics "
                f"update global memory (name the tensor itself)", e.args[0].span)
    value = ck.expr(e.args[1], env)
    if isinstance(value.type, ir.TensorT):
        ck.fail(TileRuleError, "a tensor cannot be used whole; slice it", e.args[1].span)
    if not tile and not isinstance(value.type, ir.ScalarT):
        ck.fail(TileTypeError, f"{f} of one element takes one scalar value, not {_type_str(value.type)}; to "
                f"update a tile of elements at once, give a slice of the tensor of that shape, as in "
                f"{f}(T[r :+ 1, c :+ 64], t)", e.args[1].span)
    dt = target.type.dtype
    if dt not in ("f32", "f64", "i32", "i64", "u32", "f16", "bf16"):
        ck.fail(TileTypeError, f"{f} works on f16, bf16, f32, f64, i32, i64 and u32 tensors, not {dt}", e.args[0].span)
    if f == "atomic_max" and dt in ("f16", "bf16"):
        ck.fail(TileTypeError, "atomic_max works on f32, f64, i32, i64 and u32 tensors", e.args[0].span)
    if tile:
        ck.require_uniform_control(f"a tile atomic ({f} into a tensor slice, which updates each element "
                                   f"once: it needs no `if ctx.thread == 0`)", "a tile statement", e.span)
        if isinstance(value.type, ir.TileT) and not _fits(value.type.shape, target.type.shape):
            ck.fail(TileShapeError, f"{f} into a slice of shape {_shape_str(target.type.shape)} takes a tile of "
                    f"that shape (or one that broadcasts to it), not {_shape_str(value.type.shape)}", e.args[1].span)
    value = ck.coerce(value, target.type, e.args[1].span)
    return ir.Atomic(ATOMICS[f], ck.fin(target), ck.fin(value), e.span)


def _cluster_reduce(ck, e: A.Call, env, span):
    """cluster_sum(t) / cluster_max(t) / cluster_min(t): a tile var combined across the CTAs
    of the cluster. Every CTA of the cluster must reach it exactly once (a CTA missing from
    a cluster barrier hangs the others), hence: top level of the kernel body only, and no
    `return` before it."""
    f = e.func
    if "cluster" not in ck.attrs:
        ck.fail(TileRuleError, f"{f} combines a tile across the CTAs of a thread block cluster; give the "
                f"kernel @cluster(n) (n CTAs along x form a cluster)", e.span)
    if ck.loop_depth or ck.control:
        ck.fail(TileRuleError, f"{f} must be at the top level of the kernel body, not inside a loop or an "
                f"if: every CTA of the cluster has to reach it exactly once", e.span)
    if ck.returned is not None:
        ck.fail(TileRuleError, f"{f} comes after the 'return' at line {ck.returned}: a CTA that returned "
                f"would leave the others of its cluster waiting forever", e.span)
    ck.cluster_reduced = e.span
    arg = e.args[0]
    target = ck.target(arg, env)
    if not isinstance(target, ir.Ref) or not isinstance(target.type, ir.TileT):
        ck.fail(TileTypeError, f"{f} takes a tile var, not {_type_str(target.type)}", arg.span)
    dt = target.type.dtype
    if dt not in CLUSTER_DTYPES:
        ck.fail(TileTypeError, f"{f} works on f32 and f64 tiles; '{target.sym.name}' is {dt} (declare it as "
                f"tile<f32>[...])", arg.span)
    size = target.type.size * T.DTYPES[dt].itemsize
    if size > MAX_CLUSTER_TILE_BYTES:
        ck.fail(TileRuleError, f"{f} of '{target.sym.name}' ({_type_str(target.type)}, {size} bytes): a cluster "
                f"reduction combines tiles of at most {MAX_CLUSTER_TILE_BYTES} bytes", arg.span)
    return ir.ClusterReduce(e.span, CLUSTER_REDUCTIONS[f], ck.fin(target))


# ---- what some rules read ----------------------------------------------------------------------
REDUCTIONS = {  # name -> (op, axis)
    "rowsum": ("sum", 1), "rowmax": ("max", 1), "rowmin": ("min", 1),
    "colsum": ("sum", 0), "colmax": ("max", 0), "colmin": ("min", 0),
}
ATOMICS = {"atomic_add": "add", "atomic_max": "max"}
# the index tiles: element (i, j) of rows(R, C, s) is s + i, of cols(R, C, s) s + j
INDEX_TILES = ("rows", "cols")
# statements: combine a tile var across the CTAs of a thread block cluster (@cluster), in place
CLUSTER_REDUCTIONS = {"cluster_sum": "sum", "cluster_max": "max", "cluster_min": "min"}
CLUSTER_DTYPES = ("f32", "f64")
MAX_CLUSTER = 8          # CUDA's portable cluster size limit (CUDA C++ Programming Guide, clusters)
MAX_CLUSTER_TILE_BYTES = 16 * 1024   # a cluster reduction publishes its tile in static shared memory
_IS_A_STATEMENT = "{f}() is a statement (it has no value); write it on a line of its own"


# ---- the table -------------------------------------------------------------------------------------
def _table():
    rows = []
    for f in T.CONVERSIONS:
        rows.append(Builtin(f, 1, _conversion, "conversion"))
    for f in ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs", "floor", "ceil", "round",
              "tanh", "sin", "cos", "erf"):
        rows.append(Builtin(f, 1, _unary_math, "unary math"))
    for f in ("min", "max"):
        rows.append(Builtin(f, 2, _binary_math, "binary math"))
    rows.append(Builtin("where", 3, _where, "select"))
    for f in REDUCTIONS:
        rows.append(Builtin(f, 1, _reduction, "reduction"))
    rows.append(Builtin("dot", 2, _dot, "matrix"))
    rows.append(Builtin("dot_t", 2, _dot, "matrix"))
    rows.append(Builtin("transpose", 1, _transpose, "matrix"))
    rows.append(Builtin("flat", 1, _flat, "view", syntax=True, usage="flat(t) takes one declared tile"))
    rows.append(Builtin("cdiv", 2, _cdiv, "integer"))
    for f in INDEX_TILES:
        rows.append(Builtin(f, 3, _index_tile, "index", min_arity=2,
                            usage=f"{f}(R, C) or {f}(R, C, start) takes a tile shape (two constants) and "
                                  f"an optional start"))
    rows.append(Builtin("barrier", 0, _barrier, "synchronization", statement=True, usage="barrier() takes no arguments",
                        as_value="barrier() is a statement; write it on a line of its own"))
    for f in ATOMICS:
        rows.append(Builtin(f, 2, _atomic, "atomic", statement=True,
                            usage=f"{f}(T[i, ...], v) takes a tensor element (or a tensor slice) and a value",
                            as_value=_IS_A_STATEMENT.format(f=f)))
    for f in CLUSTER_REDUCTIONS:
        rows.append(Builtin(f, 1, _cluster_reduce, "cluster reduction", statement=True,
                            usage=f"{f}(t) takes one argument: a tile var, as in {f}(s)",
                            as_value=_IS_A_STATEMENT.format(f=f)))
    return {b.name: b for b in rows}


BUILTINS: Dict[str, Builtin] = _table()


def _group(name):
    return tuple(b.name for b in BUILTINS.values() if b.group == name)


# Views of the table by family (read by `tilenb.puzzles.coverage`).
UNARY_MATH = _group("unary math")
BINARY_MATH = _group("binary math")
OTHER = tuple(b.name for b in BUILTINS.values()
              if b.group not in ("conversion", "unary math", "binary math", "reduction", "atomic", "cluster reduction"))
_ALL_NAMES = frozenset(BUILTINS)


def all_names() -> frozenset:
    """Every built-in function name (conversions included)."""
    return _ALL_NAMES


# ---- other names the language gives a meaning ------------------------------------------------
CTX_FIELDS = ("block.x", "block.y", "block.z", "grid.x", "grid.y", "grid.z", "thread", "threads",
              "warp", "lane", "cluster.rank", "cluster.x")
ATTRIBUTES = ("launch", "autotune", "dynshared", "registers", "grid", "cluster")
CONSTANTS = {"true": True, "false": False}
