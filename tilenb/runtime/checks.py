"""The launch checks both backends share, and the record a backend keeps of a launch.

Guarantees: `prepare` checks everything it can before anything runs, and raises a
`tilenb.LaunchError` naming the parameter and the dimension at fault; when it raises, no
argument has been written. The checks, in order:

1. `variant`: a dict of @autotune values (names the kernel has, values from its lists); names
   left out take their first value. Without `variant`, the first variant (in @autotune order)
   whose literal tensor dimensions fit the arguments is chosen.
2. The argument count.
3. Each tensor argument: an array (numpy, or anything with `__array__`, `__dlpack__` or
   `__cuda_array_interface__`; see `describe_array`) of the parameter's dtype (f16 = numpy
   float16, bf16 = ml_dtypes.bfloat16, per `tilenb.types.DTYPES`), rank, literal dimensions,
   C-contiguous; one value per symbolic dimension across all parameters (the message names
   both parameters); runtime row lengths (last dimensions) multiples of 4 elements.
4. Each scalar argument: convertible to the parameter's type without loss (`_bind_scalar`:
   Python, numpy and ml_dtypes numbers; an integral value inside an integer type's range; any
   real number for a float type, but no finite one beyond its range; True or False for bool).
5. The grid: an int or a tuple of 1 to 3 positive ints (no list, float or bool), or the
   kernel's @grid evaluated over the bound dimensions and scalars (an entry below 1 is refused
   naming the entry and what it read); within CUDA's limits (x < 2**31, y and z <= 65535).

The CPU dispatch (`tilenb.runtime.launch`) and the CUDA backend (`tilenb.runtime.gpu.cuda`)
both read `describe_array`, `bind_arguments`, `resolve_grid` and `prepare` as they are, and
record a `RunReport` in `kernel.last_run`; `written_tensors` names the arguments a kernel may
write. This module imports neither backend.
"""
from __future__ import annotations

import functools
import math
import numbers
from dataclasses import dataclass, field
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from .. import ir
from ..lang.diagnostics import LaunchError, TileError
from ..types import DTYPES, ELEMENT_DTYPES

@functools.lru_cache(maxsize=None)
def _by_numpy() -> dict:
    """numpy dtype -> tile dtype name (made on first use: bf16's needs ml_dtypes)."""
    return {DTYPES[n].numpy: n for n in ELEMENT_DTYPES}


_CUDA_GRID_LIMITS = (2 ** 31 - 1, 65535, 65535)
_AXES = "xyz"


# ---- array arguments ----------------------------------------------------------------------
@dataclass(frozen=True)
class ArrayArg:
    """A tensor argument as a backend sees it, whatever object the caller passed.

    shape: extents; dtype: numpy dtype (None if unknown); strides: in bytes (None: C order);
    device: "cpu" or "cuda"; host: a numpy array sharing the argument's memory when it is on
    the host (None on a GPU); ptr: the data pointer when known; readonly: True if not writable.
    """
    obj: object
    shape: Tuple[int, ...]
    dtype: Optional[np.dtype]
    strides: Optional[Tuple[int, ...]]
    device: str
    host: Optional[np.ndarray] = None
    ptr: Optional[int] = None
    readonly: bool = False

    @property
    def c_contiguous(self) -> bool:
        if self.host is not None:
            return bool(self.host.flags.c_contiguous)
        if self.strides is None or self.dtype is None or 0 in self.shape:
            return True
        expect, step = [], self.dtype.itemsize
        for ext in reversed(self.shape):
            expect.append(step)
            step *= ext
        expect = tuple(reversed(expect))
        return all(e == 1 or s == x for s, x, e in zip(self.strides, expect, self.shape))

    @property
    def type_name(self) -> str:
        return type(self.obj).__module__.split(".")[0] + "." + type(self.obj).__name__


def _np_dtype(spec):
    try:
        return np.dtype(spec)
    except TypeError:
        name = str(spec).split(".")[-1]
        for n in ELEMENT_DTYPES:
            if DTYPES[n].numpy.name == name:
                return DTYPES[n].numpy
        return None


def describe_array(x) -> Optional[ArrayArg]:
    """The array behind `x`, without copying, or None if `x` is not an array.

    numpy arrays are used as they are; objects with `__cuda_array_interface__` are described
    from it (device "cuda"); `__dlpack__` objects on the CPU become numpy views of the same
    memory (`np.from_dlpack`), on a GPU they are described from `.shape`/`.dtype`; anything
    else with `__array__` goes through `np.asarray` (which shares memory for torch CPU tensors).
    """
    if isinstance(x, np.ndarray):
        return ArrayArg(x, tuple(x.shape), x.dtype, tuple(x.strides), "cpu", x,
                        x.__array_interface__["data"][0], not x.flags.writeable)
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        try:
            shape = tuple(int(s) for s in cai["shape"])
            strides = tuple(int(s) for s in cai["strides"]) if cai.get("strides") else None
            dt = _np_dtype(cai["typestr"])
            ptr, ro = cai["data"]
        except (KeyError, TypeError, ValueError):
            return None
        # typestr '<V2' is how 2-byte types numpy lacks (bf16) appear; trust the object's dtype
        if dt is not None and dt.kind == "V":
            dt = _np_dtype(getattr(x, "dtype", dt))
        return ArrayArg(x, shape, dt, strides, "cuda", None, int(ptr), bool(ro))
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        try:
            dev = x.__dlpack_device__()[0]
        except Exception:  # a broken producer is "not an array" to us
            dev = None
        if dev == 1:  # kDLCPU
            try:
                a = np.from_dlpack(x)
                return ArrayArg(x, tuple(a.shape), a.dtype, tuple(a.strides), "cpu", a,
                                a.__array_interface__["data"][0], not a.flags.writeable)
            except (TypeError, ValueError, BufferError, RuntimeError):
                pass
        elif dev is not None:
            shape = tuple(int(s) for s in getattr(x, "shape", ()))
            return ArrayArg(x, shape, _np_dtype(getattr(x, "dtype", None)), None, "cuda")
    if hasattr(x, "__array__"):
        try:
            a = np.asarray(x)
        except (TypeError, ValueError, RuntimeError):
            return None
        return ArrayArg(x, tuple(a.shape), a.dtype, tuple(a.strides), "cpu", a,
                        a.__array_interface__["data"][0], not a.flags.writeable)
    return None


# ---- binding ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Bound:
    """The arguments of one launch, checked against one kernel variant.

    dims: runtime dim name -> extent; tensors: parameter name -> ArrayArg; scalars: parameter
    name -> numpy scalar of the parameter's type; order: parameter names in order."""
    dims: Dict[str, int]
    tensors: Dict[str, ArrayArg]
    scalars: Dict[str, object]
    order: Tuple[str, ...] = ()


def _type_text(sym: ir.Sym, ast_type=None) -> str:
    t = sym.type
    if isinstance(t, ir.TensorT):
        dims = ast_type.dims if ast_type is not None and len(getattr(ast_type, "dims", ())) == len(t.dims) else t.dims
        return f"tensor<{t.dtype}>[{', '.join(str(d) for d in dims)}]"
    return t.dtype


def _dtype_text(dt) -> str:
    if dt is None:
        return "an unknown dtype"
    if not dt.isnative:
        return f"{dt.name} in non-native byte order ({dt.str!r}; convert with .astype({dt.newbyteorder('=').str!r}))"
    name = _by_numpy().get(dt)
    return f"{dt.name} ({name})" if name else dt.name


def bind_arguments(kir: ir.KernelIR, args: Sequence, ast_params=None) -> Bound:
    """Check `args` against the parameters of `kir` and bind the runtime dimensions.

    ast_params: the kernel's parameters as written (for messages that show the symbolic
    names of @autotune dimensions). Raises LaunchError naming the parameter and dimension."""
    params = kir.params
    name = kir.name
    if len(args) != len(params):
        listed = ", ".join(p.sym.name for p in params) or "none"
        raise LaunchError(f"kernel '{name}' takes {len(params)} argument(s) ({listed}); got {len(args)}")
    ast_types = {}
    if ast_params is not None:
        ast_types = {p.name: p.type for p in ast_params}
    dims: Dict[str, int] = {}
    dim_source: Dict[str, Tuple[str, int]] = {}
    tensors: Dict[str, ArrayArg] = {}
    scalars: Dict[str, object] = {}
    for p, arg in zip(params, args):
        sym = p.sym
        tt = _type_text(sym, ast_types.get(sym.name))
        if isinstance(sym.type, ir.TensorT):
            tensors[sym.name] = _bind_tensor(name, sym, tt, arg, dims, dim_source, ast_types.get(sym.name))
        else:
            scalars[sym.name] = _bind_scalar(name, sym, arg)
    # Row lengths set the row pitch, which vector accesses rely on: a runtime dimension that is
    # some tensor's last (contiguous) dimension must be a multiple of 4 elements. Leading
    # dimensions (rows, batches) may be anything.
    for p in params:
        t = p.sym.type
        if isinstance(t, ir.TensorT) and isinstance(t.dims[-1], str):
            d = t.dims[-1]
            if d in dims and dims[d] % 4:
                raise LaunchError(f"kernel '{name}': dimension {d} = {dims[d]} (dimension {len(t.dims) - 1} of "
                                  f"'{p.sym.name}', its row length) is not a multiple of 4; a tensor's row length "
                                  f"must be a multiple of 4 elements (pad the rows)")
    return Bound(dims, tensors, scalars, tuple(p.sym.name for p in params))


def _bind_tensor(kname, sym, tt, arg, dims, dim_source, ast_type) -> ArrayArg:
    pname = sym.name
    t: ir.TensorT = sym.type
    a = describe_array(arg)
    if a is None:
        raise LaunchError(f"kernel '{kname}': argument '{pname}' ({tt}) must be an array, not "
                          f"{type(arg).__name__}")
    want = DTYPES[t.dtype].numpy
    if a.dtype != want:
        raise LaunchError(f"kernel '{kname}': argument '{pname}' ({tt}) has dtype {_dtype_text(a.dtype)}; it "
                          f"needs {want.name} ({t.dtype})")
    if len(a.shape) != len(t.dims):
        raise LaunchError(f"kernel '{kname}': argument '{pname}' ({tt}) has {len(a.shape)} dimension(s) "
                          f"{list(a.shape)}; it needs {len(t.dims)}")
    names = ast_type.dims if ast_type is not None and len(getattr(ast_type, "dims", ())) == len(t.dims) else t.dims
    for axis, (d, ext, shown) in enumerate(zip(t.dims, a.shape, names)):
        if isinstance(d, int):
            if ext != d:
                via = f" ({shown} = {d} in this variant)" if isinstance(shown, str) else ""
                err = LaunchError(f"kernel '{kname}': dimension {axis} of '{pname}' ({tt}) is {ext}; it must be "
                                  f"{d}{via}")
                err.extent_wanted = (pname, axis, tt, ext, d, shown)    # for the message over all variants
                raise err
        elif d in dims:
            if dims[d] != ext:
                other, oaxis = dim_source[d]
                raise LaunchError(f"kernel '{kname}': dimension {d} is {dims[d]} in '{other}' (dimension {oaxis}) "
                                  f"but {ext} in '{pname}' (dimension {axis}); one name is one extent")
        else:
            dims[d] = int(ext)
            dim_source[d] = (pname, axis)
    if not a.c_contiguous:
        raise LaunchError(f"kernel '{kname}': argument '{pname}' ({tt}) is not C-contiguous (strides "
                          f"{list(a.strides)} bytes); pass a row-major copy, such as np.ascontiguousarray({pname})")
    return a


def _bind_scalar(kname, sym, arg):
    """The scalar argument as a numpy scalar of the parameter's type, or a LaunchError.

    Accepted: Python numbers, numpy scalars (and 0-d arrays) of any numeric dtype, ml_dtypes
    scalars (bfloat16, the float8 and int4 types), Fractions and Decimals, when the value
    converts to the type without loss: an integer type takes an integral value inside its range
    (a float with an integral value counts; NaN, infinities and fractions do not); a float type
    takes any real number, rounded to nearest even, except a finite one beyond the type's range
    (it would become an infinity: pass inf for that); bool takes True or False only."""
    pname = sym.name
    dt = sym.type.dtype
    d = DTYPES[dt]
    v = arg
    if isinstance(v, np.ndarray) and v.ndim == 0:
        v = v[()]
    if dt == "bool":
        if isinstance(v, (bool, np.bool_)):
            return np.bool_(v)
        raise LaunchError(f"kernel '{kname}': argument '{pname}' (bool) must be True or False, not {v!r}"[:300])
    if isinstance(v, np.generic) and v.dtype.kind == "V":
        # ml_dtypes scalars (bfloat16, float8, int4: numpy dtype kind 'V'), each exact as a float
        try:
            v = float(v)
        except (TypeError, ValueError):
            pass
    if (isinstance(v, (bool, np.bool_, np.timedelta64, np.datetime64)) or not isinstance(v, numbers.Number)
            or isinstance(v, numbers.Complex) and not isinstance(v, numbers.Real)):
        if not isinstance(v, (str, bytes, np.generic)) and hasattr(v, "shape") and hasattr(v, "dtype"):
            # an array (a tensor given for a scalar, often an argument out of order): its shape
            # and dtype say which one it is; its repr would print its elements over many lines
            try:
                shape = tuple(int(n) for n in v.shape)
            except (TypeError, ValueError):
                shape = v.shape
            raise LaunchError(f"kernel '{kname}': argument '{pname}' ({dt}) must be a number, not "
                              f"{type(arg).__name__} of shape {shape} and dtype {v.dtype} (an array; a scalar "
                              f"parameter takes one value, such as a Python float or int)")
        raise LaunchError(f"kernel '{kname}': argument '{pname}' ({dt}) must be a number, not "
                          f"{type(arg).__name__} {arg!r}"[:300])
    if d.is_float:
        try:
            fv = float(v)
        except OverflowError:  # an int beyond every float
            raise LaunchError(f"kernel '{kname}': argument '{pname}', an integer of {len(str(abs(int(v))))} "
                              f"digits, is too large for {dt}") from None
        with np.errstate(over="ignore"):
            out = d.numpy.type(fv)
        finite = not (v != v) and abs(v) != math.inf     # of the value given (a longdouble, a Decimal)
        if finite and not np.isfinite(np.float32(out) if dt == "bf16" else out):
            big = float(_finfo_max(dt))
            shown = repr(v.item() if isinstance(v, np.generic) else v)
            raise LaunchError(f"kernel '{kname}': argument '{pname}' = {shown} is beyond the range of {dt} "
                              f"(largest finite value {big:g}): it would become an infinity; pass inf if "
                              f"that is meant, or use a wider type")
        return out
    # integers (and index-like): exact and in range
    if isinstance(v, (float, np.floating)):
        if not float(v).is_integer():
            raise LaunchError(f"kernel '{kname}': argument '{pname}' ({dt}) must be an integer, not {v!r}")
        v = int(v)
    info = np.iinfo(d.numpy)
    try:
        iv = int(v)
    except (OverflowError, ValueError):   # a Decimal infinity or NaN
        raise LaunchError(f"kernel '{kname}': argument '{pname}' ({dt}) must be an integer, not {v!r}") from None
    if iv != v:   # a Fraction or Decimal with a fractional part: int() would truncate it
        raise LaunchError(f"kernel '{kname}': argument '{pname}' ({dt}) must be an integer, not {v!r}")
    if not info.min <= iv <= info.max:
        raise LaunchError(f"kernel '{kname}': argument '{pname}' = {iv} does not fit in {dt} "
                          f"({info.min} to {info.max})")
    return d.numpy.type(iv)


def _finfo_max(dt: str):
    """The largest finite value of float IR type `dt`."""
    if dt == "bf16":
        import ml_dtypes  # noqa: PLC0415 (bf16 arrays need it anyway)
        return ml_dtypes.finfo(ml_dtypes.bfloat16).max
    return np.finfo(DTYPES[dt].numpy).max


# ---- grid and variants ----------------------------------------------------------------------
def resolve_grid(kir: ir.KernelIR, grid, bound: Bound, cluster: bool = True, source=None) -> Tuple[int, int, int]:
    """The launch grid as (x, y, z) CTA counts; from @grid when `grid` is None. With `cluster`,
    also the @cluster check (`check_cluster`). `source`: the program's `Source`, for quoting
    an @grid entry in a message (without it the entry is written from the IR).

    A grid given is an int or a tuple of 1 to 3 ints (numpy integers count; bools, floats and
    lists do not), each at least 1; an @grid entry must evaluate to at least 1, and the error
    for one that does not names the entry and the dimensions and scalars it was computed from.
    Every extent must be within CUDA's limits (x < 2**31, y and z <= 65535) on either backend."""
    name = kir.name
    from_attr = grid is None
    if from_attr:
        if not kir.grid:
            raise LaunchError(f"kernel '{name}' has no @grid; launch it with a grid, as in {name}[grid](...)")
        vals = []
        for axis, e in enumerate(kir.grid):
            try:
                v = _grid_int(e, bound)
                if v is None:   # beyond what _grid_int evaluates: the CPU executor's evaluator
                    from .cpu.executor import eval_uniform
                    v = int(eval_uniform(kir, e, bound.dims, bound.scalars))
            except TileError:
                raise
            except Exception as exc:  # noqa: BLE001 (reported as a launch error)
                raise LaunchError(f"kernel '{name}': its @grid entry {_AXES[axis]}, {_expr_text(e, source)}, cannot be "
                                  f"evaluated ({_grid_inputs(kir, e, bound)}): {exc}") from exc
            if v < 1:
                shown = _grid_inputs(kir, e, bound)
                raise LaunchError(f"kernel '{name}': its @grid gives {v} CTAs along {_AXES[axis]} ({shown}): the "
                                  f"entry {_expr_text(e, source)} must be at least 1; pass arguments for which it "
                                  f"is, or launch with a grid, as in {name}[grid](...)")
            vals.append(v)
        g = tuple(vals)
    else:
        if (isinstance(grid, (bool, np.bool_)) or not isinstance(grid, (tuple, numbers.Integral, np.integer))
                or isinstance(grid, tuple) and not 1 <= len(grid) <= 3):
            hint = f"; write the tuple {tuple(grid)!r}" if isinstance(grid, list) and 1 <= len(grid) <= 3 else ""
            raise LaunchError(f"kernel '{name}': the grid must be an int or a tuple of 1 to 3 ints, not "
                              f"{type(grid).__name__} {grid!r}{hint}"[:300])
        if not isinstance(grid, tuple):
            grid = (grid,)
        g = []
        for axis, v in enumerate(grid):
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Integral, np.integer)):
                raise LaunchError(f"kernel '{name}': grid dimension {_AXES[axis]} must be an int, not {v!r}"[:300])
            if int(v) < 1:
                raise LaunchError(f"kernel '{name}': grid dimension {_AXES[axis]} is {int(v)}; it must be at least 1")
            g.append(int(v))
        g = tuple(g)
    g = g + (1,) * (3 - len(g))
    for axis, (v, lim) in enumerate(zip(g, _CUDA_GRID_LIMITS)):
        if v > lim:
            via = ""
            if from_attr and axis < len(kir.grid):
                via = f" (its @grid entry {_expr_text(kir.grid[axis], source)}, {_grid_inputs(kir, kir.grid[axis], bound)})"
            raise LaunchError(f"kernel '{name}': grid dimension {_AXES[axis]} is {v}{via}; CUDA allows at most {lim}")
    if cluster:
        check_cluster(kir, g)
    return g


def _expr_text(e, source=None) -> str:
    """An expression as its source text (from `source` and its span), else written from the IR."""
    sp = getattr(e, "span", None)
    if source is not None and sp is not None and sp.end_line == sp.line and 1 <= sp.line <= len(source.lines):
        text = source.lines[sp.line - 1][sp.column - 1:sp.end_column - 1].strip()
        if text:
            return f"'{text}'"
    return f"'{_ir_text(e)}'"


def _ir_text(e) -> str:
    t = type(e)
    if t is ir.Const:
        return str(e.value)
    if t is ir.Ref:
        return e.sym.name
    if t is ir.Binary:
        return f"({_ir_text(e.a)} {e.op} {_ir_text(e.b)})"
    if t is ir.Unary:
        return f"{e.op}{_ir_text(e.x)}"
    if t is ir.Convert:
        return _ir_text(e.x)
    if t is ir.Math:
        return f"{e.fn}({', '.join(_ir_text(a) for a in e.args)})"
    return "..."


def _grid_inputs(kir: ir.KernelIR, e, bound: Bound) -> str:
    """'with M = 0, dimension 0 of 'X'; n = 3': the runtime dimensions (and the parameter and
    dimension each was bound from) and scalar parameters a @grid entry reads."""
    seen, parts = set(), []
    for x in ir.walk_expr(e):
        if type(x) is not ir.Ref or x.sym.name in seen:
            continue
        s = x.sym
        seen.add(s.name)
        if s.kind == "dim" and s.name in bound.dims:
            where = ""
            for p in kir.params:
                t = p.sym.type
                if isinstance(t, ir.TensorT) and s.name in t.dims:
                    where = f", dimension {t.dims.index(s.name)} of '{p.sym.name}'"
                    break
            parts.append(f"{s.name} = {bound.dims[s.name]}{where}")
        elif s.kind == "scalar_param" and s.name in bound.scalars:
            parts.append(f"argument {s.name} = {np.asarray(bound.scalars[s.name]).item()!r}"[:120])
    return "with " + "; ".join(parts) if parts else "from constants only"


def check_cluster(kir: ir.KernelIR, g: Tuple[int, int, int]) -> None:
    """LaunchError unless grid g's x extent is a multiple of the kernel's @cluster size."""
    if g[0] % kir.cluster:
        raise LaunchError(f"kernel '{kir.name}': grid dimension x is {g[0]}, not a multiple of the kernel's "
                          f"@cluster({kir.cluster}): clusters of {kir.cluster} CTAs along x must tile the grid")


_SMALL = 2 ** 62                          # |values| below this: no i64 arithmetic wraps
_INT_PARAMS = ("i8", "i16", "i32", "i64", "u8", "u16", "u32")


def _grid_int(e, bound: Bound) -> Optional[int]:
    """The value of a @grid entry built from index constants, runtime dims, integer scalar
    parameters (u64 aside), + - * / % (/ and % of a non-negative by a positive), cdiv (by a
    positive), min and max, where every value stays below 2**62 in magnitude: then the CPU executor's i64
    arithmetic (`tilenb.runtime.cpu.executor.eval_uniform`) gives the same int, computed here without
    setting up an executor. None for anything else (the caller then asks eval_uniform)."""
    t = type(e)
    if t is ir.Const:
        v = e.value
        ok = e.type.dtype == "index" and type(v) is int
    elif t is ir.Ref:
        s = e.sym
        if s.kind == "dim" and s.name in bound.dims:
            v = int(bound.dims[s.name])
        elif s.kind == "scalar_param" and e.type.dtype in _INT_PARAMS and s.name in bound.scalars:
            v = int(bound.scalars[s.name])    # exact in i64, as the executor widens it
        else:
            return None
        ok = True
    elif t is ir.Convert:
        x = e.x
        if (e.type.dtype != "index" or type(x) is not ir.Ref or x.sym.kind != "scalar_param"
                or x.type.dtype not in _INT_PARAMS or x.sym.name not in bound.scalars):
            return None
        v = int(bound.scalars[x.sym.name])
        ok = True
    elif t is ir.Binary:
        if e.type.dtype != "index" or not (_index_operand(e.a) and _index_operand(e.b)):
            return None
        a, b = _grid_int(e.a, bound), _grid_int(e.b, bound)
        if a is None or b is None:
            return None
        op = e.op
        if op == "+":
            v = a + b
        elif op == "-":
            v = a - b
        elif op == "*":
            v = a * b
        elif op in ("/", "%") and a >= 0 and b > 0:
            v = a // b if op == "/" else a % b
        else:
            return None
        ok = True
    elif t is ir.Math:
        if e.type.dtype != "index" or len(e.args) != 2 or not all(_index_operand(x) for x in e.args):
            return None
        a, b = _grid_int(e.args[0], bound), _grid_int(e.args[1], bound)
        if a is None or b is None:
            return None
        if e.fn == "cdiv" and b > 0:
            v = -(-a // b)
        elif e.fn == "min":
            v = min(a, b)
        elif e.fn == "max":
            v = max(a, b)
        else:
            return None
        ok = True
    else:
        return None
    return v if ok and -_SMALL < v < _SMALL else None


def _index_operand(x) -> bool:
    """An operand an index operation takes as it is: an index value, or an integer scalar
    parameter (widened exactly)."""
    return x.type.dtype == "index" or (type(x) is ir.Ref and x.sym.kind == "scalar_param")


@dataclass(frozen=True)
class Launch:
    """One variant ready to run: its @autotune values, IR, bound arguments and grid."""
    tune: Dict[str, int]
    kir: ir.KernelIR
    bound: Bound
    grid: Tuple[int, int, int]


@dataclass(frozen=True)
class Prepared:
    """A checked launch: `chosen` runs unless the backend picks another of `candidates`
    (every variant the arguments fit; only the named one when `explicit`)."""
    chosen: Launch
    candidates: Tuple[Launch, ...]
    explicit: bool


def _variant_tune(kernel, variant) -> Dict[str, int]:
    space = kernel.checked.tune_space
    names = [n for n, _ in space]
    if not isinstance(variant, dict):
        raise LaunchError(f"kernel '{kernel.name}': variant must be a dict of @autotune values, such as "
                          f"{ {n: v[0] for n, v in space} }, not {variant!r}")
    tune = {n: vals[0] for n, vals in space}
    for k, v in variant.items():
        if k not in tune:
            raise LaunchError(f"kernel '{kernel.name}': variant names '{k}', which is not an @autotune name of "
                              f"this kernel (it has: {', '.join(names) or 'none'})")
        vals = dict(space)[k]
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Integral, np.integer)) or int(v) not in vals:
            raise LaunchError(f"kernel '{kernel.name}': variant {k}={v!r} is not one of its @autotune values {list(vals)}"
                              + ("; @autotune values are ints" if not isinstance(v, (numbers.Integral, np.integer)) else ""))
        tune[k] = int(v)
    return tune


def prepare(kernel, grid, args, variant=None) -> Prepared:
    """All backend-independent launch checks (see the module docstring). A LaunchError names
    the kernel's source (its file, or the cell "In[4]" that defined it), whichever path
    launches: a call, a debug launch, `profile`, `measure`."""
    try:
        return _prepare(kernel, grid, args, variant)
    except LaunchError as e:
        e.filename = kernel.module.filename
        raise


def _prepare(kernel, grid, args, variant=None) -> Prepared:
    ast_params = kernel.checked.ast.params
    if variant is not None:
        tune = _variant_tune(kernel, variant)
        kir = kernel.checked.variant(**tune)
        bound = bind_arguments(kir, args, ast_params)
        one = Launch(tune, kir, bound, resolve_grid(kir, grid, bound, source=kernel.module.checked.source))
        return Prepared(one, (one,), True)
    fits, errors = [], []
    for key, kir in kernel.checked.variants.items():
        try:
            bound = bind_arguments(kir, args, ast_params)
        except LaunchError as e:
            errors.append(e)
            continue
        values = dict(key)
        fits.append(({n: values[n] for n, _ in kernel.checked.tune_space}, kir, bound))
    if not fits:
        first_error = errors[0]
        if len(kernel.checked.variants) > 1:
            wanted = [getattr(e, "extent_wanted", None) for e in errors]
            if all(w is not None and w[:4] == wanted[0][:4] for w in wanted):
                # every variant refused the same extent: say every extent some variant takes
                pname, axis, tt, ext, _, shown = wanted[0]
                takes = sorted({w[4] for w in wanted})
                listed = ", ".join(map(str, takes[:-1])) + f" or {takes[-1]}" if len(takes) > 1 else str(takes[0])
                via = f" ({shown} in {takes})" if isinstance(shown, str) else ""
                first_error = LaunchError(f"kernel '{kernel.name}': dimension {axis} of '{pname}' ({tt}) is {ext}; "
                                          f"the @autotune variants take {listed}{via}")
            else:
                first_error.message += " (no @autotune variant fits these arguments)"
                first_error.args = (first_error.message,)
        raise first_error
    launches, cluster_error = [], None
    for t, k, b in fits:
        g = resolve_grid(k, grid, b, cluster=False, source=kernel.module.checked.source)
        try:
            check_cluster(k, g)
        except LaunchError as e:   # a variant with another @cluster size may still tile this grid
            cluster_error = cluster_error or e
            continue
        launches.append(Launch(t, k, b, g))
    if not launches:
        if len(fits) > 1:
            cluster_error.message += " (no @autotune variant's cluster size divides it)"
            cluster_error.args = (cluster_error.message,)
        raise cluster_error
    return Prepared(launches[0], tuple(launches), False)


# ---- running ------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunReport:
    """What a backend says about a launch (kept in `kernel.last_run`)."""
    backend: str
    kernel: str
    variant: Dict[str, int]
    note: str
    grid: Tuple[int, int, int]
    threads: int
    ctas: int
    seconds: float
    debug: bool
    extra: Dict[str, object] = field(default_factory=dict)
    notes: Tuple[str, ...] = ()     # debug: elements tile stores left unwritten, and why (EdgeWarning)

    def __str__(self):
        v = ", ".join(f"{k}={x}" for k, x in self.variant.items()) or "no @autotune"
        return (f"{self.kernel} on {self.backend}: grid {self.grid} x {self.threads} threads, variant {v}; "
                f"{self.seconds * 1e3:.1f} ms{' (debug)' if self.debug else ''}. {self.note}"
                + "".join(f"\n  note: {n}" for n in self.notes))


def warn_edges(notes) -> None:
    """Each debug note as an `EdgeWarning`, attributed to the caller's line outside tilenb."""
    if not notes:
        return
    import os  # noqa: PLC0415
    import sys  # noqa: PLC0415
    import warnings  # noqa: PLC0415
    from ..lang.diagnostics import EdgeWarning  # noqa: PLC0415
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    level, f = 2, sys._getframe(1)
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(pkg + os.sep):
        f, level = f.f_back, level + 1
    for n in notes:
        warnings.warn(EdgeWarning(n), stacklevel=level)


def written_tensors(kir: ir.KernelIR):
    """Names of the tensor parameters the kernel may write (stores, atomics, through views)."""
    root = {}
    for s in ir.walk_stmts(kir.body):
        if isinstance(s, ir.Let) and s.sym.kind == "view":
            v = s.value
            base = v.base if isinstance(v, ir.Slice) else v.sym
            root[s.sym] = root.get(base, base)
    out = set()
    for s in ir.walk_stmts(kir.body):
        t = None
        if isinstance(s, ir.Assign) and isinstance(s.target, (ir.Slice, ir.Element)):
            t = s.target.base
        elif isinstance(s, ir.Atomic):
            t = s.target.base
        if t is not None:
            t = root.get(t, t)
            if t.kind == "tensor":
                out.add(t.name)
    return out
