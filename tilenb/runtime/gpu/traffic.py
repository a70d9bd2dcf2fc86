"""The least work a launch must do: bytes through device memory and arithmetic in dots.

Guarantees: `launch_traffic(kir, bound, grid)` returns (bytes, flops, dims). bytes counts each
tensor the kernel reads once and each tensor it writes once (a tensor both read and written
counts twice): the floor any implementation pays, the figure achieved GB/s is measured against.
flops counts 2*M*N*K per dot (or dot_t) executed, with loop trip counts evaluated from the
launch's runtime dims; it is None when a loop's bounds depend on more than constants, dims and
ctx.grid (then no FLOP rate is claimed). `tensor_bytes(kir, dims)` gives the same floor split
into bytes read and bytes written from the runtime dims alone, and `launch_flops(kir, dims,
grid)` the same FLOPs, for a launch known only by its extents (a profile's). Nothing here
raises for a well-formed launch.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

from ... import ir


def _tensor_use(kir: ir.KernelIR):
    """(read, written): names of tensor parameters read and written (through views too)."""
    view_base: Dict[int, ir.Sym] = {}
    for s in ir.walk_stmts(kir.body):
        if isinstance(s, ir.Let) and s.sym.kind == "view":
            v = s.value
            view_base[id(s.sym)] = v.base if isinstance(v, ir.Slice) else v.sym

    def root(sym):
        while id(sym) in view_base:
            sym = view_base[id(sym)]
        return sym

    read, written = set(), set()

    def reads(e):
        for x in ir.walk_expr(e):
            if isinstance(x, (ir.Slice, ir.Element)):
                r = root(x.base)
                if r.kind == "tensor":
                    read.add(r.name)
            elif isinstance(x, ir.Ref):
                r = root(x.sym)
                if r.kind == "tensor":
                    read.add(r.name)

    for s in ir.walk_stmts(kir.body):
        if isinstance(s, (ir.Assign, ir.Atomic)):
            t = s.target
            if isinstance(t, (ir.Slice, ir.Element)):
                r = root(t.base)
                if r.kind == "tensor":
                    written.add(r.name)
                    if isinstance(s, ir.Atomic) or s.op is not None:
                        read.add(r.name)
                for sub in ir.sub_exprs(t):
                    reads(sub)
            reads(s.value)
        elif isinstance(s, ir.Let) and s.sym.kind == "view":
            continue
        else:
            for e in ir.stmt_exprs(s):
                reads(e)
    return read, written


def _eval(e, dims, grid) -> Optional[int]:
    if isinstance(e, ir.Const):
        return int(e.value)
    if isinstance(e, ir.Ref) and e.sym.kind == "dim":
        return dims.get(e.sym.name)
    if isinstance(e, ir.Ctx) and e.field.startswith("grid."):
        return grid["xyz".index(e.field[-1])]
    if isinstance(e, ir.Binary) and e.op in ("+", "-", "*"):
        a, b = _eval(e.a, dims, grid), _eval(e.b, dims, grid)
        if a is None or b is None:
            return None
        return a + b if e.op == "+" else a - b if e.op == "-" else a * b
    if isinstance(e, ir.Math) and e.fn == "cdiv":
        a, b = _eval(e.args[0], dims, grid), _eval(e.args[1], dims, grid)
        return None if a is None or not b else -(-a // b)
    return None


def _dot_flops(body, dims, grid) -> Optional[int]:
    total = 0
    for s in body:
        for e in ir.stmt_exprs(s):
            for x in ir.walk_expr(e):
                if isinstance(x, ir.Dot):
                    m, k = x.a.type.shape
                    n = x.type.shape[1]
                    total += 2 * m * n * k
        if isinstance(s, ir.For):
            lo, hi = _eval(s.lo, dims, grid), _eval(s.hi, dims, grid)
            inner = _dot_flops(s.body, dims, grid)
            if inner is None:
                return None
            if inner:
                if lo is None or hi is None:
                    return None
                total += inner * max(0, -(-(hi - lo) // s.step))
        elif isinstance(s, ir.While):
            inner = _dot_flops(s.body, dims, grid)
            if inner:
                return None
        elif isinstance(s, ir.If):
            a, b = _dot_flops(s.then, dims, grid), _dot_flops(s.orelse, dims, grid)
            if a is None or b is None:
                return None
            total += max(a, b)
    return total


def tensor_bytes(kir: ir.KernelIR, dims: Dict[str, int]) -> Tuple[int, int]:
    """(bytes read, bytes written): the bytes of the tensors the kernel reads, and of those it
    writes, at the runtime dims (name -> extent), each tensor once per direction: the least
    DRAM traffic of one launch in each direction. Raises KeyError for a dim missing from
    `dims`."""
    from ...types import DTYPES
    read, written = _tensor_use(kir)
    rb = wb = 0
    for p in kir.params:
        t = p.sym.type
        if isinstance(t, ir.TensorT):
            n = DTYPES[t.dtype].itemsize
            for d in t.dims:
                n *= int(d) if isinstance(d, int) else int(dims[d])
            rb += n if p.sym.name in read else 0
            wb += n if p.sym.name in written else 0
    return rb, wb


def launch_flops(kir: ir.KernelIR, dims: Dict[str, int], grid: Tuple[int, int, int]) -> Optional[int]:
    """The FLOPs the dots of one launch do (2*M*N*K each, every CTA; 0 for a kernel with no
    dot), from its runtime dims (name -> extent) and grid; None where a loop's trip count is
    not known from them (see the module docstring)."""
    grid = tuple(grid) + (1,) * (3 - len(grid))
    per_cta = _dot_flops(kir.body, dims, grid)
    return None if per_cta is None else per_cta * grid[0] * grid[1] * grid[2]


def launch_traffic(kir: ir.KernelIR, bound, grid: Tuple[int, int, int]):
    """(bytes, flops, dims) of one launch; see the module docstring."""
    read, written = _tensor_use(kir)
    nbytes = 0
    for name, arr in bound.tensors.items():
        size = 1
        for d in arr.shape:
            size *= int(d)
        item = arr.dtype.itemsize if arr.dtype is not None else 0
        nbytes += size * item * ((name in read) + (name in written))
    return nbytes, launch_flops(kir, bound.dims, grid), dict(bound.dims)
