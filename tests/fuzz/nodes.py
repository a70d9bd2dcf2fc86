"""The fuzzer's expression and statement trees: each node renders as tile-language text and
evaluates, for one CTA, with the numpy model of tests/fuzz/model.py.

Guarantees: a node's text and its evaluation describe the same computation; `ty` is the node's
IR type (a load of an f16 tensor is f16, arithmetic on it f32), `shape` its tile shape (() for
a scalar), `exact` says whether every correct backend must produce bit-identical values (no
reordered sum, no multiply that may fuse into an add, no approximate function, spec 17), and
`mag` bounds |value| given the generator's input ranges. The generator keeps comparisons,
float-to-integer conversions and discontinuous functions (floor, ceil, round, %) on exact
operands, so that a legitimate rounding difference can never flip a branch.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence

import numpy as np

from . import model as M


class Env:
    """One CTA's state while the oracle runs a program."""

    def __init__(self, prog_values, block, grid, threads, tune):
        self.block = block                  # (bx, by, bz)
        self.grid = grid
        self.T = threads
        self.scal = dict(prog_values)       # scalar params, dims, tune names, lets (uniform)
        self.scal.update(tune)
        self.tensors = {}                   # name -> array (shared across CTAs)
        self.terr = {}                      # name -> float64 error bound per element
        self.tty = {}                       # name -> IR element type
        self.tiles = {}                     # name -> model.TV
        self.views = {}                     # name -> node re-evaluated at each read
        self.thread = {}                    # per-thread scalars: name -> (T,) array


# ---- uniform (or per-thread) integer scalar expressions --------------------------------------
class Ix:
    """An integer scalar expression: `text` and `fn(env)` -> int (uniform) or a (T,) int64 array
    (per thread)."""

    def __init__(self, text: str, fn: Callable, varying: bool = False):
        self.text = text
        self.fn = fn
        self.varying = varying

    def __call__(self, env):
        return self.fn(env)

    @staticmethod
    def const(v: int) -> "Ix":
        return Ix(str(v) if v >= 0 else f"({v})", lambda env, v=v: v)

    @staticmethod
    def name(n: str, varying: bool = False) -> "Ix":
        if varying:
            return Ix(n, lambda env, n=n: env.thread[n], True)
        return Ix(n, lambda env, n=n: env.scal[n])

    def __add__(self, o):
        o = o if isinstance(o, Ix) else Ix.const(o)
        if o.text == "0":
            return self
        if o.text.startswith("(-"):
            return Ix(f"{self.text} - {o.text[2:-1]}", lambda env: self(env) + o(env), self.varying or o.varying)
        return Ix(f"{self.text} + {o.text}", lambda env: self(env) + o(env), self.varying or o.varying)

    def __mul__(self, k: int):
        return Ix(f"{self.text} * {k}", lambda env: self(env) * k, self.varying)


CTX_BX = Ix("ctx.block.x", lambda env: env.block[0])
CTX_BY = Ix("ctx.block.y", lambda env: env.block[1])
CTX_T = Ix("ctx.thread", lambda env: np.arange(env.T, dtype=np.int64), True)


# ---- tile / scalar value nodes ------------------------------------------------------------
class Node:
    ty: str
    shape: tuple
    exact: bool = True
    mag: float = 1.0
    is_mul: bool = False

    def text(self) -> str:
        raise NotImplementedError

    def ev(self, env) -> M.TV:
        """This node's value for the CTA of `env`; an exact node's error bound is 0 (every
        correct backend computes the same bits)."""
        v = self._ev(env)
        if self.exact and np.any(v.err):
            v = M.TV(v.data, v.ty, v.lo, v.hi, np.zeros(()))
        return v

    def _ev(self, env) -> M.TV:
        raise NotImplementedError


class Lit(Node):
    def __init__(self, value, ty):
        self.value, self.ty, self.shape = value, ty, ()
        self.mag = abs(float(value))

    def text(self):
        if M.is_float(self.ty):
            s = repr(float(self.value))
            return s if not s.startswith("-") else f"({s})"
        return str(int(self.value)) if self.value >= 0 else f"({int(self.value)})"

    def _ev(self, env):
        return M.scalar(self.value, self.ty)


class Param(Node):
    """A scalar kernel parameter (uniform)."""

    def __init__(self, name, ty, mag):
        self.name, self.ty, self.shape, self.mag = name, ty, (), mag

    def text(self):
        return self.name

    def _ev(self, env):
        v = env.scal[self.name]
        return M.scalar(v, self.ty)


class IxVal(Node):
    """An index expression used as a value (converted: f32(i) or i32(i))."""

    def __init__(self, ix: Ix, ty: str, mag: float):
        self.ix, self.ty, self.shape, self.mag = ix, ty, (), mag

    def text(self):
        return f"{self.ty}({self.ix.text})"

    def _ev(self, env):
        v = self.ix(env)
        return M.TV(M.convert(np.asarray(v, np.int64), "i64", self.ty), self.ty, (), (), np.zeros(()))


class Load(Node):
    """A slice of a tensor: `X[s0 :+ n0, s1 :+ n1]`, a length None for a scalar index."""

    def __init__(self, tensor, ty, starts: Sequence[Ix], lens: Sequence[Optional[int]], mag, exact=True, full=()):
        self.tensor, self.ty, self.starts, self.lens = tensor, ty, list(starts), list(lens)
        self.shape = tuple(n for n in lens if n is not None)
        self.mag, self.exact = mag, exact
        self.full = tuple(full) or (False,) * len(lens)      # ':' (start 0, the whole literal extent)

    def text(self):
        subs = [":" if f else s.text if n is None else f"{s.text} :+ {n}" for s, n, f in zip(self.starts, self.lens, self.full)]
        return f"{self.tensor}[{', '.join(subs)}]"

    def _ev(self, env):
        st = [int(s(env)) for s in self.starts]
        return M.load(env.tensors[self.tensor], env.tty[self.tensor], st, self.lens, env.terr.get(self.tensor))


class Ref(Node):
    """A tile variable, value-let or view read whole."""

    def __init__(self, name, ty, shape, exact, mag, view: Optional[Node] = None):
        self.name, self.ty, self.shape, self.exact, self.mag, self.view = name, ty, tuple(shape), exact, mag, view

    def text(self):
        return self.name

    def _ev(self, env):
        if self.view is not None:
            return self.view.ev(env)
        return env.tiles[self.name]


class Win(Node):
    """A window of a tile (or view): `t[s0 :+ n0, ...]`; starts may be runtime values."""

    def __init__(self, base: Node, starts: Sequence[Ix], lens, flat=False):
        self.base, self.starts, self.lens, self.flat = base, list(starts), list(lens), flat
        self.ty = base.ty
        self.shape = tuple(n for n in lens if n is not None)
        self.exact, self.mag = base.exact, base.mag

    def text(self):
        subs = [s.text if n is None else f"{s.text} :+ {n}" for s, n in zip(self.starts, self.lens)]
        b = f"flat({self.base.text()})" if self.flat else self.base.text()
        return f"{b}[{', '.join(subs)}]"

    def _ev(self, env):
        t = self.base.ev(env)
        if self.flat:
            t = flatten(t)
        return M.window(t, [int(s(env)) for s in self.starts], self.lens)


def flatten(t: M.TV) -> M.TV:
    """flat(t) of an [R, C] tile: one row [1, R*C] of the same elements. Its valid region is a
    run (docs/spec.md section 6): from t's first valid element in row-major order up to the first
    invalid element after it (all of t's valid elements when they are contiguous)."""
    r, c = t.shape
    err = np.broadcast_to(t.err, t.shape).reshape(1, r * c)
    (r0, c0), (r1, c1) = t.lo, t.hi
    if r1 <= r0 or c1 <= c0:
        lo = hi = 0
    elif c0 == 0 and c1 == c:
        lo, hi = r0 * c, r1 * c
    else:
        lo, hi = r0 * c + c0, r0 * c + c1
    return M.TV(t.data.reshape(1, r * c), t.ty, (0, lo), (1 if hi > lo else 0, hi), err)


class Bin(Node):
    def __init__(self, op, a: Node, b: Node):
        self.op, self.a, self.b = op, a, b
        cmp = op in ("==", "!=", "<", "<=", ">", ">=", "&&", "||")
        self.ty = "bool" if cmp else M.promote(a.ty, b.ty)
        self.shape = tuple(np.broadcast_shapes(a.shape, b.shape))
        self.is_mul = op == "*"
        ex = a.exact and b.exact
        if M.is_float(self.ty):
            if op in ("+", "-"):
                ex = ex and not a.is_mul and not b.is_mul
            elif op == "/":
                ex = False
        self.exact = ex
        ma, mb = a.mag, b.mag
        self.mag = {"+": ma + mb, "-": ma + mb, "*": ma * mb, "/": ma, "%": min(ma, mb), "min": max(ma, mb),
                    "max": max(ma, mb)}.get(op, max(ma, mb) if op in ("&", "|", "^") else 1.0)
        if op == "<<":
            self.mag = ma * 2.0 ** 31
        if op == ">>":
            self.mag = ma

    def text(self):
        if self.op in ("min", "max"):
            return f"{self.op}({self.a.text()}, {self.b.text()})"
        return f"({self.a.text()} {self.op} {self.b.text()})"

    def _ev(self, env):
        return M.binop(self.op, self.a.ev(env), self.b.ev(env))


class Un(Node):
    def __init__(self, fn, a: Node):
        self.fn, self.a = fn, a
        self.ty = "bool" if fn == "!" else M.ARITH[a.ty]
        self.shape = a.shape
        self.exact = a.exact and fn in ("neg", "abs", "~", "!", "floor", "ceil", "round")
        m = a.mag
        self.mag = {"exp": float(np.exp(min(m, 80.0))), "exp2": float(2.0 ** min(m, 120.0)), "tanh": 1.0, "sin": 1.0,
                    "cos": 1.0, "erf": 1.0, "sqrt": float(np.sqrt(m)), "rsqrt": 1.0, "log": float(np.log(m + 1.0)),
                    "log2": float(np.log2(m + 1.0))}.get(fn, m + 1.0)

    def text(self):
        if self.fn == "neg":
            return f"(-{self.a.text()})"
        if self.fn in ("~", "!"):
            return f"({self.fn}{self.a.text()})"
        return f"{self.fn}({self.a.text()})"

    def _ev(self, env):
        return M.unop(self.fn, self.a.ev(env))


class Conv(Node):
    def __init__(self, ty, a: Node):
        self.to, self.a = ty, a
        self.ty, self.shape = ty, a.shape
        self.exact = a.exact
        self.mag = a.mag

    def text(self):
        return f"{self.to}({self.a.text()})"

    def _ev(self, env):
        v = self.a.ev(env)
        if not M.is_float(self.to) and M.is_float(v.ty) and np.any(np.asarray(v.err) > 0):
            raise AssertionError("float -> integer of an inexact value (a generator bug)")
        return M.conv(v, self.to)


class Where(Node):
    def __init__(self, c: Node, a: Node, b: Node):
        self.c, self.a, self.b = c, a, b
        self.ty = M.promote(a.ty, b.ty)
        self.shape = tuple(np.broadcast_shapes(c.shape, a.shape, b.shape))
        self.exact = a.exact and b.exact
        self.mag = max(a.mag, b.mag)

    def text(self):
        return f"where({self.c.text()}, {self.a.text()}, {self.b.text()})"

    def _ev(self, env):
        return M.where(self.c.ev(env), self.a.ev(env), self.b.ev(env))


class IndexTile(Node):
    """rows(R, C[, start]) / cols(R, C[, start]): element (i, j) is start + i (start + j), an i32
    tile, wholly valid (spec section 10); `start` a uniform Ix (None: left out) whose values
    lie within +-`bound`."""

    def __init__(self, fn, shape, start: Optional[Ix], bound: int):
        self.fn, self.shape, self.start = fn, tuple(shape), start
        self.ty = "i32"
        self.mag = float(bound + max(shape))

    def text(self):
        R, C = self.shape
        return f"{self.fn}({R}, {C})" if self.start is None else f"{self.fn}({R}, {C}, {self.start.text})"

    def _ev(self, env):
        R, C = self.shape
        s = 0 if self.start is None else int(self.start(env))
        idx = np.arange(R).reshape(R, 1) if self.fn == "rows" else np.arange(C).reshape(1, C)
        data = np.broadcast_to(s + idx, (R, C)).astype(np.int32)
        return M.TV(data, "i32", (0, 0), (R, C), np.zeros(()))


class Red(Node):
    def __init__(self, op, axis, a: Node):
        self.op, self.axis, self.a = op, axis, a
        if op == "sum" or M.is_float(a.ty):
            self.ty = M.ARITH[a.ty]
        else:
            self.ty = a.ty
        sh = list(a.shape)
        if len(sh) == 2:
            sh[axis] = 1
        else:
            sh = [1]
        self.shape = tuple(sh)
        n = a.shape[axis] if len(a.shape) == 2 else a.shape[0]
        self.exact = a.exact and (op != "sum" or not M.is_float(self.ty))
        self.mag = a.mag * n if op == "sum" else a.mag

    def text(self):
        return f"{'row' if self.axis == 1 or len(self.a.shape) == 1 else 'col'}{self.op}({self.a.text()})"

    def _ev(self, env):
        return M.reduce(self.op, self.axis if len(self.a.shape) == 2 else 0, self.a.ev(env))


class Dot(Node):
    def __init__(self, a: Node, b: Node, trans: bool):
        self.a, self.b, self.trans = a, b, trans
        self.ty = {"f16": "f32", "bf16": "f32", "f32": "f32", "f64": "f64", "i8": "i32"}[a.ty]
        self.shape = (a.shape[0], b.shape[0] if trans else b.shape[1])
        self.exact = not M.is_float(self.ty)
        self.mag = a.mag * b.mag * a.shape[1]

    def text(self):
        return f"{'dot_t' if self.trans else 'dot'}({self.a.text()}, {self.b.text()})"

    def _ev(self, env):
        return M.dot(self.a.ev(env), self.b.ev(env), self.trans)


class Tr(Node):
    def __init__(self, a: Node):
        self.a, self.ty, self.shape = a, a.ty, (a.shape[1], a.shape[0])
        self.exact, self.mag = a.exact, a.mag

    def text(self):
        return f"transpose({self.a.text()})"

    def _ev(self, env):
        return M.transpose(self.a.ev(env))


class Elem(Node):
    """One element read at uniform subscripts (of a tensor or a tile): a uniform scalar."""

    def __init__(self, base: str, ty, idx: Sequence[Ix], is_tile: bool, mag, exact=True):
        self.base, self.ty, self.idx, self.is_tile = base, ty, list(idx), is_tile
        self.shape, self.mag, self.exact = (), mag, exact

    def text(self):
        return f"{self.base}[{', '.join(i.text for i in self.idx)}]"

    def _ev(self, env):
        ix = [int(i(env)) for i in self.idx]
        if self.is_tile:
            t = env.tiles[self.base]
            if all(0 <= i < n for i, n in zip(ix, t.shape)):
                e = np.broadcast_to(t.err, t.shape)[tuple(ix)]
                return M.TV(np.asarray(t.data[tuple(ix)]), t.ty, (), (), np.asarray(e))
            return M.scalar(0, t.ty)
        a = env.tensors[self.base]
        if all(0 <= i < n for i, n in zip(ix, a.shape)):
            e = env.terr[self.base][tuple(ix)] if self.base in env.terr else 0.0
            return M.TV(np.asarray(a[tuple(ix)]), self.ty, (), (), np.asarray(e))
        return M.scalar(0, self.ty)


class Call(Node):
    """A call of an expression function `fn name(p...) = body`: the body with the arguments
    substituted (spec 14), evaluated as such."""

    def __init__(self, name, body: Node, args: Sequence[Node], argslots):
        self.name, self.body, self.args, self.slots = name, body, list(args), argslots
        self.ty, self.shape, self.exact, self.mag = body.ty, body.shape, body.exact, body.mag

    def text(self):
        return f"{self.name}({', '.join(a.text() for a in self.args)})"

    def _ev(self, env):
        for slot, a in zip(self.slots, self.args):
            slot.bound = a
        return self.body.ev(env)


class Slot(Node):
    """A parameter of an expression function: the argument bound at the call."""

    def __init__(self, name, ty, shape, exact, mag):
        self.name, self.ty, self.shape, self.exact, self.mag = name, ty, tuple(shape), exact, mag
        self.bound = None

    def text(self):
        return self.name

    def _ev(self, env):
        return self.bound.ev(env)


# ---- statements -----------------------------------------------------------------------------
class Stmt:
    def lines(self, ind: str) -> List[str]:
        raise NotImplementedError

    def run(self, env):
        raise NotImplementedError


@dataclass
class Raw(Stmt):
    """Lines with an oracle of their own."""
    text: List[str]
    fn: Optional[Callable] = None

    def lines(self, ind):
        return [ind + t for t in self.text]

    def run(self, env):
        if self.fn is not None:
            self.fn(env)


@dataclass
class LetIx(Stmt):
    name: str
    ix: Ix

    def lines(self, ind):
        return [f"{ind}let {self.name} = {self.ix.text}"]

    def run(self, env):
        if self.ix.varying:
            env.thread[self.name] = np.broadcast_to(np.asarray(self.ix(env), np.int64), (env.T,))
        else:
            env.scal[self.name] = int(self.ix(env))


@dataclass
class Bind(Stmt):
    """`var name = e`, `var name: tile<T>[...] = e`, `let name = e` (own bytes), or a `let` view."""
    kw: str
    name: str
    value: Optional[Node]
    decl: Optional[str] = None          # element type when declared
    shape: tuple = ()
    fill: Optional[float] = None
    view: bool = False

    def lines(self, ind):
        t = f": tile<{self.decl}>[{', '.join(map(str, self.shape))}]" if self.decl else ""
        if self.value is None and self.fill is None:
            return [f"{ind}{self.kw} {self.name}{t}"]
        v = self.value.text() if self.value is not None else Lit(self.fill, self.decl).text()
        return [f"{ind}{self.kw} {self.name}{t} = {v}"]

    def run(self, env):
        if self.view:
            env.views[self.name] = self.value
            return
        if self.value is None:
            env.tiles[self.name] = M.full(self.shape, 0 if self.fill is None else self.fill, self.decl)
            return
        v = self.value.ev(env)
        ty = self.decl or v.ty
        shape = self.shape or v.shape
        env.tiles[self.name] = M.assign(ty, shape, v)


@dataclass
class Store(Stmt):
    """`X[window] = e` (a tensor), `t[window] = e` / `flat(t)[...] = e` (a tile), `t = e`,
    and the compound `op=` forms."""
    target: str
    kind: str                       # "tensor", "tile", "whole", "flat", "view"
    starts: Sequence[Ix]
    lens: Sequence[Optional[int]]
    value: Node
    op: Optional[str] = None        # compound assignment operator
    view_base: Optional[str] = None
    view_starts: Sequence[int] = ()

    def target_text(self):
        if self.kind == "whole":
            return self.target
        subs = [s.text if n is None else f"{s.text} :+ {n}" for s, n in zip(self.starts, self.lens)]
        b = f"flat({self.target})" if self.kind == "flat" else self.target
        return f"{b}[{', '.join(subs)}]"

    def lines(self, ind):
        eq = f"{self.op}=" if self.op else "="
        return [f"{ind}{self.target_text()} {eq} {self.value.text()}"]

    def run(self, env):
        v = self.value.ev(env)
        if self.op:
            cur = self._read(env)
            v = M.binop(self.op, cur, v)
        st = [int(s(env)) for s in self.starts]
        if self.kind == "tensor":
            M.store(env.tensors[self.target], env.tty[self.target], env.terr.get(self.target), st, self.lens, v)
        elif self.kind == "whole":
            t = env.tiles[self.target]
            env.tiles[self.target] = M.assign(t.ty, t.shape, v)
        elif self.kind == "tile":
            env.tiles[self.target] = M.store_tile(env.tiles[self.target], st, self.lens, v)
        elif self.kind == "flat":
            t = env.tiles[self.target]
            f = flatten(M.TV(t.data, t.ty, (0, 0), t.shape, t.err))
            f = M.store_tile(f, st, self.lens, v)
            env.tiles[self.target] = M.TV(f.data.reshape(t.shape), t.ty, t.lo, t.hi,
                                          np.broadcast_to(f.err, f.shape).reshape(t.shape))
        elif self.kind == "view":     # a let view of a tile, written through at constant starts
            t = env.tiles[self.view_base]
            st2 = [a + b for a, b in zip(self.view_starts, st)]
            env.tiles[self.view_base] = M.store_tile(t, st2, self.lens, v)
        else:
            raise AssertionError(self.kind)

    def _read(self, env):
        if self.kind == "whole":
            return env.tiles[self.target]
        st = [int(s(env)) for s in self.starts]
        if self.kind == "tensor":
            return M.load(env.tensors[self.target], env.tty[self.target], st, self.lens, env.terr.get(self.target))
        if self.kind == "tile":
            return M.window(env.tiles[self.target], st, self.lens)
        raise AssertionError(self.kind)


@dataclass
class If(Stmt):
    cond_text: str
    cond: Callable
    then: List[Stmt]
    other: List[Stmt] = field(default_factory=list)

    def lines(self, ind):
        out = [f"{ind}if {self.cond_text} {{"]
        for s in self.then:
            out += s.lines(ind + "  ")
        if self.other:
            out.append(f"{ind}}} else {{")
            for s in self.other:
                out += s.lines(ind + "  ")
        out.append(f"{ind}}}")
        return out

    def run(self, env):
        for s in (self.then if self.cond(env) else self.other):
            s.run(env)


@dataclass
class For(Stmt):
    var: str
    lo: Ix
    hi: Ix
    step: int
    body: List[Stmt]
    unroll: Optional[int] = None

    def lines(self, ind):
        u = f"<unroll {self.unroll}> " if self.unroll else ""
        st = f", {self.step}" if self.step != 1 else ""
        out = [f"{ind}for {u}{self.var} in range({self.lo.text}, {self.hi.text}{st}) {{"]
        for s in self.body:
            out += s.lines(ind + "  ")
        out.append(f"{ind}}}")
        return out

    def run(self, env):
        for i in range(int(self.lo(env)), int(self.hi(env)), self.step):
            env.scal[self.var] = i
            for s in self.body:
                s.run(env)


@dataclass
class While(Stmt):
    """`var j = lo; while j < hi { body; j += step }` with a uniform counter."""
    var: str
    lo: int
    hi: Ix
    step: int
    body: List[Stmt]

    def lines(self, ind):
        out = [f"{ind}var {self.var} = {self.lo}", f"{ind}while {self.var} < {self.hi.text} {{"]
        for s in self.body:
            out += s.lines(ind + "  ")
        out += [f"{ind}  {self.var} += {self.step}", f"{ind}}}"]
        return out

    def run(self, env):
        j = self.lo
        while j < int(self.hi(env)):
            env.scal[self.var] = j
            for s in self.body:
                s.run(env)
            j += self.step
