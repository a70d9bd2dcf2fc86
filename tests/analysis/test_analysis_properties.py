"""Properties of the analyses over random kernels built from templates (hypothesis).

For every generated kernel: every element of a copied slice is moved by exactly one thread,
exactly once; tiles alive at once never share bytes; the footprint never exceeds the sum of the
tiles and is the largest live set (whenever such a packing exists, which an exhaustive search
here decides); and every cross-thread hazard has a barrier between its two sides. The last is
checked by a brute-force simulator written here, independently of tilenb.analysis: it expands
the program into traces (loops run 0, 1 or 2 times, both sides of each uniform if), derives each
statement's element accesses from the template that made it and the canonical partition rule
(chunk k of `vec` elements goes to thread k % threads), and tracks, byte by byte, which threads
touched what since the last barrier. From the analysis it takes only the placement facts it is
checking: tile offsets, vector widths, the XOR swizzle the generated code lays a tile out with
(`tilenb.analysis.copies.tile_swizzles`: a tile read along its columns keeps its bytes, but a
thread's chunk of it is at other bytes than the row-major layout gives it, so a tile placed in
a dead one's bytes may meet it at other threads) and the barriers."""
from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from hypothesis import HealthCheck, given, settings, strategies as st

import tilenb
from tilenb.analysis import analyze
from tilenb.analysis.copies import tile_swizzles

DTYPES = {"float": ["f32", "f16"], "int": ["i32", "i8"]}
EB = {"f32": 4, "f16": 2, "i32": 4, "i8": 1}
ROWS = [1, 2, 3, 4, 8, 16]
COLS = [1, 2, 3, 4, 6, 8, 16, 32, 64]
MULTI = "*"   # several threads
MAX_TRACES = 400


def _compute(dt):
    return "f32" if dt in ("f32", "f16") else "i32"


@dataclass
class Op:
    """An operand read by a tile statement: elementwise ("elem", with its window and a transpose
    flag) or by any thread ("all")."""
    kind: str
    tile: str
    ro: object = 0
    co: object = 0
    h: int = 0
    w: int = 0
    transposed: bool = False


@dataclass
class Node:
    kind: str                     # tile, pt, barrier, loop, if, vif, let
    pos: int
    dest: Optional[Tuple] = None  # ("tile", name, ro, co, h, w) or ("tensor", h, w)
    ops: List[Op] = field(default_factory=list)
    pt: Optional[Tuple] = None    # per-thread: (rw, tile, fn(thread) -> (r, c) or None)
    body: List["Node"] = field(default_factory=list)
    orelse: List["Node"] = field(default_factory=list)
    turns: Tuple[int, ...] = ()   # loop: the trip counts to try
    var: Optional[str] = None


class Gen:
    """Draws a random kernel: source text and a model of every statement."""

    def __init__(self, data, exact_only=False):
        self.d = data
        # exact_only: no per-thread code, no tile window starts known only as a set, and no tensor
        # store whose row moves with a loop variable: the places where the analysis must assume
        # more threads than the program uses (a store window that moves with a loop is compared
        # with the loop's other turns only by its step and length, and with windows of another
        # form, such as one outside the loop, not at all: docs/spec.md 13.1, analysis/global_memory.py)
        self.exact_only = exact_only
        self.T = data.draw(st.sampled_from([32, 64, 128, 256]), label="threads")
        self.family = data.draw(st.sampled_from(["float", "int"]), label="family")
        self.lines: List[str] = []
        self.pos = 0
        self.n = 0
        self.bytes = 0
        self.visible = {}          # name -> (dtype, (R, C))
        self.loop_vars = []        # (name, max value) of enclosing constant loops
        self.ifs = 0

    def draw(self, strat, label=None):
        return self.d.draw(strat, label=label)

    def lit(self):
        return "2.0" if self.family == "float" else "2"

    def dt(self):
        return self.draw(st.sampled_from(DTYPES[self.family]))

    def shape(self):
        while True:
            r, c = self.draw(st.sampled_from(ROWS)), self.draw(st.sampled_from(COLS))
            if r * c <= 512:
                return r, c

    def new(self, dt, shape):
        name = f"t{self.n}"
        self.n += 1
        self.visible[name] = (dt, shape)
        self.bytes += (shape[0] * shape[1] * EB.get(dt, 4) + 15) // 16 * 16
        return name

    def emit(self, text, indent):
        self.lines.append("  " * indent + text)

    def take(self):
        p = self.pos
        self.pos += 1
        return p

    def rowexpr(self, moving=True):
        a = self.draw(st.sampled_from(["0", "1", "3", "8"]))
        if moving and self.loop_vars and self.draw(st.booleans()):
            a = self.loop_vars[-1][0] + " + " + a
        return f"r0 + {a}"

    # ---- statements
    def block(self, indent, depth, n):
        nodes = []
        for _ in range(n):
            nodes.extend(self.stmt(indent, depth))
        return nodes

    def stmt(self, indent, depth):
        tiles = list(self.visible)
        kinds = ["load", "fill"]
        if tiles:
            kinds += ["ew", "ew", "reduce", "transpose", "update", "inplace", "window", "wcopy", "store"]
            if not self.exact_only:
                kinds += ["pt_write", "pt_read", "vif"]
        kinds += ["dot", "barrier"]
        if depth < 2:
            kinds += ["loop", "loop"]
            if self.ifs == 0:
                kinds += ["if"]
        if self.bytes > 30000:
            kinds = [k for k in kinds if k not in ("load", "fill", "ew", "reduce", "transpose", "dot")] or ["barrier"]
        k = self.draw(st.sampled_from(kinds), label="stmt")
        return getattr(self, "s_" + k)(indent, depth)

    def pick(self, pred=lambda n, v: True):
        names = [n for n, v in self.visible.items() if pred(n, v)]
        return self.draw(st.sampled_from(names)) if names else None

    def s_load(self, indent, depth):
        dt = self.dt()
        r, c = self.shape()
        col = self.draw(st.sampled_from(["0", "1", "4", "16"]))
        p = self.take()
        name = self.new(dt, (r, c))
        self.emit(f"var {name} = X_{dt}[{self.rowexpr()} :+ {r}, {col} :+ {c}]", indent)
        return [Node("tile", p, ("tile", name, 0, 0, r, c))]

    def s_fill(self, indent, depth):
        dt = self.dt()
        r, c = self.shape()
        p = self.take()
        name = self.new(dt, (r, c))
        self.emit(f"var {name}: tile<{dt}>[{r}, {c}] = {self.lit()}", indent)
        return [Node("tile", p, ("tile", name, 0, 0, r, c))]

    def operand_for(self, shape):
        """A tile operand broadcastable to `shape`: (text, Op) or None for a literal."""
        r, c = shape
        opts = [n for n, (_, s) in self.visible.items() if s in ((r, c), (r, 1), (1, c), (1, 1))]
        if not opts or self.draw(st.integers(0, 4)) == 0:
            return self.lit(), None
        b = self.draw(st.sampled_from(opts))
        _, (br, bc) = self.visible[b]
        return b, Op("elem", b, 0, 0, br, bc)

    def s_ew(self, indent, depth):
        a = self.pick()
        adt, shape = self.visible[a]
        btxt, bop = self.operand_for(shape)
        op = self.draw(st.sampled_from(["+", "-", "*"]))
        dt = self.dt()
        p = self.take()
        name = self.new(dt, shape)
        self.emit(f"var {name}: tile<{dt}>[{shape[0]}, {shape[1]}] = {dt}({a} {op} {btxt})", indent)
        ops = [Op("elem", a, 0, 0, *shape)] + ([bop] if bop else [])
        return [Node("tile", p, ("tile", name, 0, 0, *shape), ops)]

    def s_reduce(self, indent, depth):
        a = self.pick()
        adt, (r, c) = self.visible[a]
        fn = self.draw(st.sampled_from(["rowsum", "rowmax", "colsum", "colmin"]))
        if fn.endswith("sum"):
            dt = _compute(adt)
        else:
            dt = "f32" if adt == "f16" else adt
        shape = (r, 1) if fn.startswith("row") else (1, c)
        p = self.take()
        name = self.new(dt, shape)
        self.emit(f"var {name} = {fn}({a})", indent)
        return [Node("tile", p, ("tile", name, 0, 0, *shape), [Op("all", a)])]

    def s_transpose(self, indent, depth):
        a = self.pick()
        adt, (r, c) = self.visible[a]
        p = self.take()
        name = self.new(adt, (c, r))
        self.emit(f"var {name} = transpose({a})", indent)
        return [Node("tile", p, ("tile", name, 0, 0, c, r), [Op("elem", a, 0, 0, r, c, True)])]

    def s_update(self, indent, depth):
        a = self.pick()
        adt, shape = self.visible[a]
        btxt, bop = self.operand_for(shape)
        op = self.draw(st.sampled_from(["+", "*"]))
        p = self.take()
        self.emit(f"{a} = {adt}({a} {op} {btxt})", indent)
        ops = [Op("elem", a, 0, 0, *shape)] + ([bop] if bop else [])
        return [Node("tile", p, ("tile", a, 0, 0, *shape), ops)]

    def s_inplace(self, indent, depth):
        a = self.pick()
        adt, (r, c) = self.visible[a]
        fn = self.draw(st.sampled_from(["rowmax", "rowsum", "colsum"]))
        p = self.take()
        self.emit(f"{a} = {adt}({a} - {fn}({a}))", indent)
        return [Node("tile", p, ("tile", a, 0, 0, r, c), [Op("elem", a, 0, 0, r, c), Op("all", a)])]

    def window(self, shape):
        r, c = shape
        h = self.draw(st.integers(1, r))
        w = self.draw(st.integers(1, c))
        ro = self.draw(st.integers(0, r - h))
        co = self.draw(st.integers(0, c - w))
        if self.loop_vars and h < r and not self.exact_only and self.draw(st.booleans()):
            var, top = self.loop_vars[-1]
            if top + h <= r:
                ro = var
        return ro, co, h, w

    def s_window(self, indent, depth):
        a = self.pick()
        adt, shape = self.visible[a]
        ro, co, h, w = self.window(shape)
        p = self.take()
        self.emit(f"{a}[{ro} :+ {h}, {co} :+ {w}] = {self.lit()}", indent)
        return [Node("tile", p, ("tile", a, ro, co, h, w))]

    def s_wcopy(self, indent, depth):
        a = self.pick()
        adt, shape = self.visible[a]
        ro, co, h, w = self.window(shape)
        b = self.pick(lambda n, v: v[1][0] >= h and v[1][1] >= w)
        _, (br, bc) = self.visible[b]
        ro2 = self.draw(st.integers(0, br - h))
        co2 = self.draw(st.integers(0, bc - w))
        p = self.take()
        self.emit(f"{a}[{ro} :+ {h}, {co} :+ {w}] = {adt}({b}[{ro2} :+ {h}, {co2} :+ {w}])", indent)
        return [Node("tile", p, ("tile", a, ro, co, h, w), [Op("elem", b, ro2, co2, h, w)])]

    def s_store(self, indent, depth):
        a = self.pick()
        adt, shape = self.visible[a]
        btxt, bop = self.operand_for(shape)
        dt = self.dt()
        col = self.draw(st.sampled_from(["0", "1", "4"]))
        row = self.rowexpr(moving=not self.exact_only)
        p = self.take()
        self.emit(f"Y_{dt}[{row} :+ {shape[0]}, {col} :+ {shape[1]}] = {dt}({a} * {btxt})", indent)
        ops = [Op("elem", a, 0, 0, *shape)] + ([bop] if bop else [])
        # the window, relative to r0 (a CTA's rows): a store of another thread may meet it
        terms = row.split(" + ")[1:]
        return [Node("tile", p, ("tensor",) + shape + (dt, tuple(terms), int(col)), ops)]

    def s_dot(self, indent, depth):
        dt = "i8" if self.family == "int" else self.draw(st.sampled_from(["f32", "f16"]))
        m, k, n = (self.draw(st.sampled_from([1, 2, 4, 8, 16])) for _ in range(3))
        trans = self.draw(st.booleans())
        nodes = []
        p = self.take()
        a = self.new(dt, (m, k))
        self.emit(f"var {a} = X_{dt}[{self.rowexpr()} :+ {m}, 0 :+ {k}]", indent)
        nodes.append(Node("tile", p, ("tile", a, 0, 0, m, k)))
        bshape = (n, k) if trans else (k, n)
        p = self.take()
        b = self.new(dt, bshape)
        self.emit(f"var {b} = X_{dt}[{self.rowexpr()} :+ {bshape[0]}, 0 :+ {bshape[1]}]", indent)
        nodes.append(Node("tile", p, ("tile", b, 0, 0) + bshape))
        p = self.take()
        name = self.new("i32" if dt == "i8" else "f32", (m, n))
        self.emit(f"var {name} = {'dot_t' if trans else 'dot'}({a}, {b})", indent)
        nodes.append(Node("tile", p, ("tile", name, 0, 0, m, n), [Op("all", a), Op("all", b)]))
        return nodes

    def s_pt_write(self, indent, depth):
        a = self.pick()
        _, (r, c) = self.visible[a]
        p = self.take()
        self.emit(f"{a}[ctx.thread % {r}, ctx.thread / {r} % {c}] = {self.lit()}", indent)
        return [Node("pt", p, pt=("w", a, lambda t, r=r, c=c: (t % r, (t // r) % c)))]

    def s_pt_read(self, indent, depth):
        a = self.pick()
        adt, (r, c) = self.visible[a]
        p = self.take()
        self.emit(f"Y_{adt}[0, ctx.thread] = {a}[ctx.thread % {r}, 0]", indent)
        return [Node("pt", p, pt=("r", a, lambda t, r=r: (t % r, 0)))]

    def s_vif(self, indent, depth):
        a = self.pick()
        _, (r, c) = self.visible[a]
        lim = self.draw(st.sampled_from([1, 5, 40]))
        p = self.take()
        self.emit(f"if ctx.thread < {lim} {{", indent)
        q = self.take()
        self.emit(f"{a}[0, ctx.thread % {c}] = {self.lit()}", indent + 1)
        self.emit("}", indent)
        inner = Node("pt", q, pt=("w", a, lambda t, c=c, lim=lim: (0, t % c) if t < lim else None))
        return [Node("vif", p, body=[inner])]

    def s_barrier(self, indent, depth):
        p = self.take()
        self.emit("barrier()", indent)
        return [Node("barrier", p)]

    def s_loop(self, indent, depth):
        const = self.draw(st.booleans())
        var = f"i{depth}"
        p = self.take()
        if const:
            self.emit(f"for {var} in range(0, 2) {{", indent)
            self.loop_vars.append((var, 1))
        else:
            self.emit(f"for {var} in range(0, K, 16) {{", indent)
        saved = dict(self.visible)
        body = self.block(indent + 1, depth + 1, self.draw(st.integers(1, 4)))
        self.visible = saved
        if const:
            self.loop_vars.pop()
        self.emit("}", indent)
        return [Node("loop", p, body=body, turns=(2,) if const else (0, 1, 2), var=var if const else None)]

    def s_if(self, indent, depth):
        self.ifs += 1
        p = self.take()
        self.emit("if ctx.block.x > 0 {", indent)
        saved = dict(self.visible)
        then = self.block(indent + 1, depth + 1, self.draw(st.integers(1, 3)))
        self.visible = dict(saved)
        self.emit("} else {", indent)
        orelse = self.block(indent + 1, depth + 1, self.draw(st.integers(0, 2)))
        self.visible = saved
        self.emit("}", indent)
        return [Node("if", p, body=then, orelse=orelse)]

    def kernel(self):
        params = ", ".join(f"X_{d}: tensor<{d}>[M, K]" for d in EB) + ", " + \
            ", ".join(f"Y_{d}: tensor<{d}>[M, K]" for d in EB)
        self.emit(f"@launch({self.T})", 0)
        self.emit(f"kernel k({params}) {{", 0)
        p = self.take()
        self.emit("let r0 = ctx.block.x * 16", 1)
        nodes = [Node("let", p)] + self.block(1, 0, self.draw(st.integers(1, 9), label="length"))
        self.emit("}", 0)
        return "\n".join(self.lines) + "\n", nodes


# ---- the brute-force hazard checker ----------------------------------------------------------
def traces(nodes, env=None):
    """Every execution path: a list of (node, env) and ("barrier-slot", ...) events."""
    env = env or {}
    out = [[]]
    for nd in nodes:
        if nd.kind == "loop":
            alts = []
            for turns in nd.turns:
                seqs = [[("enter", nd, env)]]
                for i in range(turns):
                    e2 = dict(env)
                    if nd.var:
                        e2[nd.var] = i
                    seqs = [s + t + [("turn_end", nd, e2)] for s in seqs for t in traces(nd.body, e2)]
                alts.extend(s + [("exit", nd, env)] for s in seqs)
        elif nd.kind == "if":
            alts = [[("enter", nd, env)] + t + [("exit", nd, env)] for t in traces(nd.body, env)] + \
                   [[("enter", nd, env)] + t + [("exit", nd, env)] for t in traces(nd.orelse, env)]
        elif nd.kind == "vif":
            alts = [[("enter", nd, env), ("stmt", nd.body[0], env), ("exit", nd, env)]]
        else:
            alts = [[("stmt", nd, env)]]
        out = [o + a for o in out for a in alts]
        if len(out) > MAX_TRACES:   # keep a random spread of the paths (fixed seed: reproducible)
            out = random.Random(len(out)).sample(out, MAX_TRACES)
    return out


def tile_table(a):
    """name -> (byte offset, element bytes, [rows, cols], space, swizzle or None) of every tile."""
    swz = tile_swizzles(a.statements, a.threads)
    sw = {t.name: swz.get(id(t.sym)) for t in a.lifetimes.tiles}
    return {t.name: (t.offset, EB.get(t.dtype, 4), t.shape if len(t.shape) == 2 else (1, t.shape[0]), t.space,
                     sw.get(t.name)) for t in a.tiles}


def element_accesses(nd, env, a, T, tiles):
    """(reads, writes): dict byte -> thread id or MULTI, for one statement."""
    reads, writes = {}, {}

    def add(d, tile, r, c, who):
        off, eb, (_, tc), space, sw = tiles[tile]
        if space != "shared":
            return
        o = r * tc + c
        base = off + (int(sw(o)) if sw is not None else o) * eb
        for b in range(base, base + eb):
            old = d.get(b)
            if old is None or old == who:
                d[b] = who
            else:   # several threads: per-thread code stays per-thread
                d[b] = ("pt", MULTI) if isinstance(old, tuple) and isinstance(who, tuple) else MULTI

    def val(x):
        return env[x] if isinstance(x, str) else x

    if nd.kind == "pt":
        rw, tile, fn = nd.pt
        for t in range(T):
            rc = fn(t)
            if rc is not None:
                add(writes if rw == "w" else reads, tile, rc[0], rc[1], ("pt", t))
        return reads, writes
    vec = a.statements[nd.pos].vector_width
    if nd.dest[0] == "tile":
        _, dname, ro, co, h, w = nd.dest
        ro, co = val(ro), val(co)
    else:
        h, w = nd.dest[1], nd.dest[2]
    owner = [[((i * w + j) // vec) % T for j in range(w)] for i in range(h)]
    for op in nd.ops:
        if op.kind == "all":
            _, _, (tr, tc), _, _ = tiles[op.tile]
            for i in range(tr):
                for j in range(tc):
                    add(reads, op.tile, i, j, MULTI)
            continue
        for i in range(h):
            for j in range(w):
                if op.transposed:
                    r, c = j, i
                else:
                    r = i if op.h > 1 else 0
                    c = j if op.w > 1 else 0
                add(reads, op.tile, val(op.ro) + r, val(op.co) + c, owner[i][j])
    if nd.dest[0] == "tile":
        for i in range(h):
            for j in range(w):
                add(writes, dname, ro + i, co + j, owner[i][j])
    else:   # a store into a tensor: its elements, relative to the CTA's first row r0
        dt, terms, col = nd.dest[3:]
        row = sum(val(t) if not t.isdigit() else int(t) for t in terms)
        for i in range(h):
            for j in range(w):
                writes[("Y", dt, row + i, col + j)] = owner[i][j]
    return reads, writes


def _clash(x, y):
    """Two accesses of a byte by `x` and `y` come from different threads, and not both per-thread."""
    if isinstance(x, tuple) and isinstance(y, tuple):
        return False
    return not (x == y and x != MULTI)


def check_trace(trace, a, T, tiles, src):
    bars = {(b.position, b.where) for b in a.barriers}
    state = defaultdict(list)     # byte -> [(who, rw, line)]

    def access(d, rw, pos):
        for b, who in d.items():
            for (w0, rw0, p0) in state[b]:
                if (rw == "w" or rw0 == "w") and _clash(w0, who):
                    raise AssertionError(
                        f"hazard on byte {b}: statement {p0} ({rw0}, by {w0}) then statement {pos} ({rw}, by {who})"
                        f" with no barrier between; barriers {sorted(bars)}\n{src}")

    def record(d, rw, pos):
        for b, who in d.items():
            state[b].append((who, rw, pos))

    for kind, nd, env in trace:
        if kind in ("enter", "stmt") and (nd.pos, "before") in bars:
            state.clear()
        if kind == "stmt":
            if nd.kind == "barrier":
                state.clear()
                continue
            if nd.kind not in ("tile", "pt"):
                continue
            reads, writes = element_accesses(nd, env, a, T, tiles)
            access(reads, "r", nd.pos)
            access(writes, "w", nd.pos)
            record(reads, "r", nd.pos)
            if (nd.pos, "within") in bars:
                state.clear()
            access(writes, "w", nd.pos)      # against this statement's own reads
            record(writes, "w", nd.pos)
            if (nd.pos, "after") in bars:
                state.clear()
        elif kind == "turn_end":
            last = _last_pos(nd.body)
            if last is not None and (last, "after") in bars and not _is_simple(nd.body[-1]):
                state.clear()
        elif kind == "exit" and (nd.pos, "after") in bars:
            state.clear()


def _last_pos(body):
    return body[-1].pos if body else None


def _is_simple(nd):
    return nd.kind in ("tile", "pt", "barrier", "let")


# ---- the exhaustive packing check -------------------------------------------------------------
def best_packing(items, limit):
    """Whether the intervals (start, end, size) pack into `limit` bytes at 16-byte offsets."""
    items = sorted(items, key=lambda t: -t[2])
    offs = []

    def fits(i, o):
        s, e, z = items[i]
        for j, oj in enumerate(offs):
            s2, e2, z2 = items[j]
            if s <= e2 and s2 <= e and o < oj + z2 and oj < o + z:
                return False
        return True

    def go(i):
        if i == len(items):
            return True
        for o in range(0, limit - items[i][2] + 1, 16):
            if fits(i, o):
                offs.append(o)
                if go(i + 1):
                    return True
                offs.pop()
        return False
    return go(0)


# ---- the properties ---------------------------------------------------------------------------
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_random_kernels(data):
    g = Gen(data)
    src, nodes = g.kernel()
    mod = tilenb.compile(src, backend="cpu")
    kir = mod.k.ir()
    a = analyze(kir)
    assert a.notes == (), a.notes
    T = g.T

    # copies: every element of the slice once, by one thread; all threads take chunks
    for c in a.copies:
        r, cc = c.shape
        seen = [[0] * cc for _ in range(r)]
        threads = set()
        for t, row, col, n in c.runs:
            assert 0 <= t < T and n == c.vector_width
            threads.add(t)
            for j in range(col, col + n):
                seen[row][j] += 1
        assert all(v == 1 for line in seen for v in line), src
        assert len(threads) == min(T, r * cc // c.vector_width)
        assert c.sectors >= c.ideal_sectors and c.wavefronts >= c.ideal_wavefronts

    # lifetimes: no two tiles alive at once share bytes; footprint bounds
    shared = [t for t in a.tiles if t.space == "shared"]
    for i, x in enumerate(shared):
        assert x.offset % 16 == 0 and x.bytes % 16 == 0
        for y in shared[i + 1:]:
            if x.start <= y.end and y.start <= x.end:
                assert x.offset + x.bytes <= y.offset or y.offset + y.bytes <= x.offset, (x, y, src)
    # (the tiles' packing: `a.lifetimes.footprint`; `a.footprint` is the whole shared-memory map,
    # which adds what the compiler places after the tiles and is checked in test_smem_map)
    packed = a.lifetimes.footprint
    assert packed <= sum(t.bytes for t in shared)
    live = max([sum(t.bytes for t in shared if t.start <= p <= t.end) for p, _ in a.lifetimes.positions] + [0])
    assert packed >= live and a.footprint >= packed
    if packed > live:
        items = [(t.start, t.end, t.bytes) for t in shared]
        assert not best_packing(items, live), f"the packer missed a packing in {live} bytes\n{src}"

    # the generator's statement positions are the IR's (pre-order)
    def walk(ns):
        for nd in ns:
            yield nd
            yield from walk(nd.body)
            yield from walk(nd.orelse)
    for nd in walk(nodes):
        want = {"tile": "tile", "pt": "per_thread", "barrier": "barrier"}.get(nd.kind)
        if want:
            assert a.statements[nd.pos].kind == want, (nd.pos, src)

    # barriers: every hazard on every path is separated
    tiles = tile_table(a)
    for tr in traces(nodes):
        check_trace(tr, a, T, tiles, src)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_random_kernels_need_every_barrier(data):
    """Minimality: with no per-thread code, no tile window whose start is known only as a set and
    no tensor store that moves with a loop (where the analysis must assume unknown threads),
    taking away any one barrier leaves a hazard on some path of the brute-force simulation."""
    g = Gen(data, exact_only=True)
    src, nodes = g.kernel()
    check_every_barrier_needed(src, nodes, g.T)


def check_every_barrier_needed(src, nodes, T):
    """The analysis' barriers of `src` separate every hazard of the simulation, and each one is
    needed: without it, some path of `nodes` has a hazard."""
    import dataclasses
    a = analyze(tilenb.compile(src, backend="cpu").k.ir())
    tiles = tile_table(a)
    paths = traces(nodes)
    for tr in paths:
        check_trace(tr, a, T, tiles, src)
    for i, b in enumerate(a.barriers):
        fewer = dataclasses.replace(a, barriers=a.barriers[:i] + a.barriers[i + 1:])
        try:
            for tr in paths:
                check_trace(tr, fewer, T, tiles, src)
        except AssertionError:
            continue
        raise AssertionError(f"the barrier {b} is not needed\n{src}")
    return a


# ---- explicit kernels the random search found ---------------------------------------------------
def _params():
    return ", ".join(f"X_{d}: tensor<{d}>[M, K]" for d in EB) + ", " + \
        ", ".join(f"Y_{d}: tensor<{d}>[M, K]" for d in EB)


def test_swizzled_tile_in_the_bytes_of_loop_tiles_needs_its_barrier():
    """Issue 16: [3, 16] f32 tiles loaded in a loop die there; after the loop a [3, 16] f32 tile is filled in
    their bytes and then transposed. The transpose reads it along columns, so the generated code
    lays it out with an XOR swizzle of its 16-byte units by row: the fill's thread k writes other
    bytes than the dead tile's thread k wrote in the loop's last turn (the row-major layout would
    give both the same bytes). So the barrier before the fill is needed (as is the one before the
    transpose), and a simulator that ignored the swizzle called it unneeded."""
    T = 32
    loads = [("f32", 3, 16)] * 4
    lines = [f"@launch({T})", f"kernel k({_params()}) {{", "  let r0 = ctx.block.x * 16",
             "  for i0 in range(0, K, 16) {"]
    body = []
    for n, (dt, r, c) in enumerate(loads):
        lines.append(f"    var t{n} = X_{dt}[r0 + 0 :+ {r}, 0 :+ {c}]")
        body.append(Node("tile", 2 + n, ("tile", f"t{n}", 0, 0, r, c)))
    lines += ["  }", "  var t4: tile<f32>[3, 16] = 2.0", "  var t5 = transpose(t4)", "}"]
    src = "\n".join(lines) + "\n"
    nodes = [Node("let", 0), Node("loop", 1, body=body, turns=(0, 1, 2)),
             Node("tile", 6, ("tile", "t4", 0, 0, 3, 16)),
             Node("tile", 7, ("tile", "t5", 0, 0, 16, 3), [Op("elem", "t4", 0, 0, 3, 16, True)])]
    a = check_every_barrier_needed(src, nodes, T)
    t4 = next(t for t in a.lifetimes.tiles if t.name == "t4")
    assert tile_swizzles(a.statements, a.threads).get(id(t4.sym)) is not None, "t4 is laid out swizzled"
    assert [(b.line, b.where, b.tile) for b in a.barriers] == [(10, "before", "t4"), (11, "before", "t4")]
    # the fill's thread 0 writes, swizzled, bytes that the last load into t4's bytes gave another thread
    tiles = tile_table(a)
    t3 = tiles["t3"]
    assert t3[0] == tiles["t4"][0] and t3[4] is None
    (fill_w,) = [element_accesses(nd, {}, a, T, tiles)[1] for nd in nodes[2:3]]
    (load_w,) = [element_accesses(nd, {}, a, T, tiles)[1] for nd in body[3:4]]
    assert any(load_w.get(b, w) != w for b, w in fill_w.items())
