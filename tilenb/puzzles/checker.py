"""`check(name, answer)`: run a learner's kernel for a puzzle and say, in a learner's terms, what
is right and what is wrong.

The answer may be a `tilenb.Kernel` (as the `%%tilekernel` magic binds it), a `tilenb.Module`
(its kernel named as in the puzzle's signature, or its only kernel), or source text (compiled
here on the CPU backend).

What a check does, for every shape of the puzzle (random inputs from a fixed seed, extents that
are not tile multiples, some smaller than one tile):

1. fills every output with a poison value (NaN for floats, the type's minimum for signed
   integers, its maximum for unsigned ones; zeros for outputs that atomics add into), launches the
   kernel on the CPU reference executor with `debug=True` (races between threads and out-of-bounds
   element accesses raise there, with their lines), and compares each output with numpy;
2. for an element left holding the poison, says why: no store's window covers it (and which
   part of the output the stores do cover), or a store covers it but the value is invalid there,
   naming the operand that reaches outside its tensor (spec section 8), as `tilenb.puzzles.explain`
   traces it;
3. for a wrong element, names the first one, the value it holds and numpy's, the CTA and thread
   that wrote it (the owner of its run in the store's canonical partition, from
   `kernel.analysis()`), and notices an output shifted by one or two elements (an off-by-one
   window);
4. checks the puzzle's goals (barriers, coalescing, sectors per warp, bank conflicts, shared
   memory, constructs used) against `kernel.analysis()` and the kernel's source;
5. on a kernel compiled for the CUDA backend, also runs it on the GPU at every shape, compares
   with numpy and reports the time of each launch.

Guarantees: `check` never raises for any answer (a compile error, a launch refused, a race, an
internal failure while explaining: all are reported in the result); it returns a `CheckResult`
whose `status` is "solved", "not solved yet" (nothing written: the stub), "wrong", "goals missed"
or "does not compile", whose `report` is plain text, and which shows itself in IPython as that
text followed by the compiler's views of the learner's kernel (`tilenb.notebook.views`). The
report is deterministic (no times on the CPU backend), so a notebook that shows it can be
compared by nbval.
"""
from __future__ import annotations

import html
import re
import warnings
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

from .. import ir
from ..lang.diagnostics import EdgeWarning, LaunchError, OutOfBoundsError, RaceError, TileError
from ..types import DTYPES
from ..verify import MARK
from . import catalog as C
from .coverage import constructs_of
from .explain import Trace
# the words for element sets and invalid values are shared with a debug launch's notes
from ..runtime.cpu.unwritten import covers_text, describe_set, elem_text as _elem, invalid_text as _invalid_text  # noqa: F401
from ..runtime.cpu.unwritten import runs_text as _runs

SPEC_8 = "spec section 8"


# ---- results ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Problem:
    """One thing wrong at one shape: `headline` names the mistake in a few words, `text` says
    where and why in full."""
    headline: str
    text: str
    rank: int = 5             # which problem names the mistake best (lower first)


@dataclass
class ShapeRun:
    """One shape's run: the dims, what went wrong there (empty: right), and on a GPU its time."""
    dims: Dict[str, int]
    problems: List[Problem] = field(default_factory=list)
    error: Optional[str] = None            # the exception's kind: "race", "out of bounds", "launch", "error"
    unwritten: Dict[str, int] = field(default_factory=dict)
    wrong: Dict[str, int] = field(default_factory=dict)
    written_any: bool = False
    gpu_seconds: Optional[float] = None
    gpu_problem: Optional[str] = None

    @property
    def ok(self) -> bool:
        return not self.problems and self.error is None


@dataclass
class GoalResult:
    """A goal, whether it is met, the figures (`detail`) and, when missed, the miss in a few words."""
    goal: C.Goal
    met: bool
    detail: str
    headline: str = ""


@dataclass
class CheckResult:
    """What `check` found. `status`: "solved", "not solved yet", "wrong", "goals missed" or "does
    not compile"; `summary`: one line; `details`: paragraphs; `goals`: each goal and whether it is
    met; `runs`: one per shape; `kernel`: the learner's kernel (None if it did not compile)."""
    puzzle: C.Puzzle
    status: str
    summary: str
    details: List[str] = field(default_factory=list)
    goals: List[GoalResult] = field(default_factory=list)
    runs: List[ShapeRun] = field(default_factory=list)
    kernel: object = None
    views: Optional[str] = None

    @property
    def solved(self) -> bool:
        return self.status == "solved"

    @property
    def report(self) -> str:
        p = self.puzzle
        out = [f"puzzle {p.number} ({p.name}): {self.summary}"]
        for d in self.details:
            out.append("")
            out.append(d)
        if self.goals:
            out.append("")
            out.append("goals:")
            for g in self.goals:
                out.append(f"  [{'x' if g.met else ' '}] {g.goal.text}: {g.detail}")
        return "\n".join(out)

    def __str__(self):
        return self.report

    def __repr__(self):
        return self.report

    def _repr_html_(self):
        colour = {"solved": "#1a7f37", "not solved yet": "#6e7781"}.get(self.status, "#cf222e")
        return (f'<div style="border-left:4px solid {colour};padding:2px 10px;margin:4px 0">'
                f'<pre style="white-space:pre-wrap;margin:0">{html.escape(self.report)}</pre></div>')

    def _ipython_display_(self):
        from IPython.display import display
        display({"text/plain": self.report, "text/html": self._repr_html_()}, raw=True)
        if self.kernel is None or self.status in ("not solved yet", "does not compile"):
            return
        try:
            from ..notebook import views
            for w in views(self.kernel, self.views):
                display(w)
        except ImportError:      # no anywidget: the report alone
            pass


# ---- helpers --------------------------------------------------------------------------------------
def _poison(dtype: np.dtype):
    if dtype.kind == "f" or dtype.name == "bfloat16":
        return np.nan
    if dtype.kind == "i":
        return np.iinfo(dtype).min
    return np.iinfo(dtype).max


def _unwritten_mask(arr: np.ndarray) -> np.ndarray:
    a = np.asarray(arr)
    if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
        return np.isnan(a.astype(np.float64))
    return a == _poison(a.dtype)


def _dims_text(dims: Dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in dims.items())


def _num(v) -> str:
    v = float(v)
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.6g}"


def _close(a: np.ndarray, e: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    a64 = np.asarray(a).astype(np.float64)
    e64 = np.asarray(e).astype(np.float64)
    both_nan = np.isnan(a64) & np.isnan(e64)
    with np.errstate(invalid="ignore"):
        return both_nan | (np.abs(a64 - e64) <= atol + rtol * np.abs(e64))


def _shift(actual, expected, wrong, rtol, atol) -> Optional[Tuple[int, int, int]]:
    """(axis, k, matched) when most wrong elements hold numpy's value k places along `axis`."""
    idx = np.argwhere(wrong)
    if len(idx) == 0:
        return None
    best = None
    a = np.asarray(actual).astype(np.float64)
    e = np.asarray(expected).astype(np.float64)
    for axis in range(a.ndim):
        for k in (1, -1, 2, -2):
            j = idx.copy()
            j[:, axis] += k
            inside = (j[:, axis] >= 0) & (j[:, axis] < a.shape[axis])
            if inside.sum() == 0:
                continue
            got = a[tuple(idx[inside].T)]
            want = e[tuple(j[inside].T)]
            ok = np.abs(got - want) <= atol + rtol * np.abs(want)
            matched = int(ok.sum())
            if matched >= max(1, int(0.9 * len(idx))) and (best is None or matched > best[2]):
                best = (axis, k, matched)
    return best


def _kernel_constructs(kernel) -> set:
    """The constructs (tilenb.puzzles.coverage names) the kernel's own source uses, with the
    functions of its module."""
    from ..lang import ast as A
    fns = tuple(kernel.module.checked.functions.values())
    return constructs_of(A.Program((kernel.checked.ast,), fns, "", ""))


# ---- the check --------------------------------------------------------------------------------------
_EXPECTED_PARAMS: Dict[str, list] = {}


def _expected_params(p: C.Puzzle):
    hit = _EXPECTED_PARAMS.get(p.name)
    if hit is None:
        import tilenb
        from ..runtime.module import _type_text
        k = tilenb.compile(p.stub, backend="cpu", filename=f"<puzzle {p.name}>").kernels[p.kernel]
        hit = [(n, _type_text(t)) for n, t in k.params]
        _EXPECTED_PARAMS[p.name] = hit
    return hit


def _resolve(p: C.Puzzle, answer):
    """-> (kernel, None) or (None, CheckResult for an answer that cannot run)."""
    import tilenb
    from ..runtime.module import Kernel, Module
    if isinstance(answer, str):
        try:
            answer = tilenb.compile(answer, backend="cpu", filename=f"<{p.name}>")
        except TileError as e:
            return None, CheckResult(p, "does not compile", "the source does not compile", [str(e)])
    if isinstance(answer, Module):
        ks = answer.kernels
        if p.kernel in ks:
            return ks[p.kernel], None
        if len(ks) == 1:
            return next(iter(ks.values())), None
        return None, CheckResult(p, "wrong", f"the module has no kernel named '{p.kernel}'",
                                 [f"its kernels: {', '.join(ks) or 'none'}; name yours as in the signature"])
    if isinstance(answer, Kernel):
        return answer, None
    return None, CheckResult(p, "wrong", f"check() takes a kernel, a module or source text, not {type(answer).__name__}",
                             [f"in a notebook: run the %%tilekernel cell, then check('{p.name}', {p.kernel})"])


def _cpu_twin(kernel):
    """The same kernel compiled for the CPU backend (the kernel itself when it is)."""
    if kernel.module.backend == "cpu":
        return kernel
    import tilenb
    src = kernel.module.checked.source
    mod = tilenb.compile(src.text, backend="cpu", filename=src.filename, line_offset=src.line_offset)
    return mod.kernels[kernel.name]


def _arguments(p: C.Puzzle, kernel, shape_index):
    _, inputs, expected = p.case(shape_index)
    outs = {}
    for name, t in p.outputs.items():
        dt = DTYPES[t].numpy
        shape = np.shape(expected[name])
        outs[name] = np.zeros(shape, dt) if name in p.zeroed else np.full(shape, _poison(np.dtype(dt)), dt)
    args = [inputs[n] if n in inputs else outs[n] for n, _ in kernel.params]
    return inputs, expected, outs, args


def check(name: str, answer, *, show: Optional[str] = None) -> CheckResult:
    """Check `answer` (a Kernel, Module or source text) for the puzzle `name` (see the module
    docstring). show: the views to display in IPython ("threads,lifetimes,barriers", "all", ...;
    None: the default views). Never raises; an unknown puzzle name gives a result saying so."""
    try:
        p = C.get(name)
    except KeyError as e:
        dummy = C.Puzzle(0, str(name), "", "", "kernel unknown()", "", (), None, None, {})
        return CheckResult(dummy, "wrong", str(e.args[0]))
    try:
        result = _check(p, answer)
    except Exception as e:  # never let the checker's own failure hide the learner's kernel
        result = CheckResult(p, "wrong", f"the checker could not finish ({type(e).__name__}: {e})")
    result.views = show
    return result


def _check(p: C.Puzzle, answer) -> CheckResult:
    kernel, early = _resolve(p, answer)
    if early is not None:
        return early
    from ..runtime.module import _type_text
    got = [(n, _type_text(t)) for n, t in kernel.params]
    want = _expected_params(p)
    if got != want:
        return CheckResult(p, "wrong", "the kernel's parameters differ from the puzzle's signature",
                           ["expected: " + ", ".join(f"{n}: {t}" for n, t in want),
                            "got:      " + ", ".join(f"{n}: {t}" for n, t in got)], kernel=kernel)
    try:
        cpu = _cpu_twin(kernel)
    except TileError as e:
        return CheckResult(p, "does not compile", "the source does not compile for the CPU backend", [str(e)])
    runs: List[ShapeRun] = []
    detailed = None
    variant = None
    for si, dims in enumerate(p.shapes):
        run = ShapeRun(dict(dims))
        runs.append(run)
        inputs, expected, outs, args = _arguments(p, cpu, si)
        try:
            with warnings.catch_warnings():      # the checker explains unwritten elements itself, in
                warnings.simplefilter("ignore", EdgeWarning)   # more detail (the same words: runtime.cpu.unwritten)
                cpu(*args, debug=True)
        except RaceError as e:
            run.error = "race"
            run.problems.append(_race_problem(e))
        except OutOfBoundsError as e:
            run.error = "out of bounds"
            run.problems.append(_oob_problem(e))
        except LaunchError as e:
            run.error = "launch"
            run.problems.append(Problem("the launch was refused", f"the launch was refused: {e.message}", 0))
        except TileError as e:
            run.error = "error"
            run.problems.append(Problem("the run failed", str(e), 0))
        if run.error is None:
            variant = dict(cpu.last_run.variant)
            _compare(p, cpu, run, dims, inputs, expected, outs, explain=detailed is None)
        if run.problems and detailed is None:
            detailed = run
    goals = _goals(p, cpu, variant)
    return _verdict(p, kernel, runs, goals, detailed)


def _verdict(p, kernel, runs, goals, detailed) -> CheckResult:
    if all(r.ok for r in runs):
        details = []
        if kernel.module.backend == "cuda":
            details += _gpu(p, kernel, runs)
        shapes = "; ".join(_dims_text(r.dims) for r in runs)
        lines = [f"{MARK} puzzle {p.name} at {_dims_text(r.dims)}" for r in runs]
        missed = [g for g in goals if not g.met]
        gpu_bad = [r for r in runs if r.gpu_problem]
        if gpu_bad:
            return CheckResult(p, "wrong", "right on the CPU, wrong on the GPU", details + ["\n".join(lines)],
                               goals, runs, kernel)
        if missed:
            return CheckResult(p, "goals missed", f"the numbers are right at every shape ({shapes}), but the goal "
                               f"'{missed[0].goal.text.split(':')[0]}' is not met: {missed[0].headline or missed[0].detail}"
                               + (f" (and {len(missed) - 1} more goal{'s' if len(missed) > 2 else ''})" if len(missed) > 1 else ""),
                               details + ["\n".join(lines)], goals, runs, kernel)
        return CheckResult(p, "solved", f"solved: right at every shape ({shapes})"
                           + (", and every goal met" if goals else ""), details + ["\n".join(lines)], goals, runs, kernel)
    if all(r.error is None and not r.written_any for r in runs):
        outs = ", ".join(n for n in p.outputs if n not in p.zeroed) or ", ".join(p.outputs)
        return CheckResult(p, "not solved yet", f"not solved yet: the kernel writes nothing into {outs}",
                           ["fill in the kernel's body, run its cell, then this check again"], [], runs, kernel)
    bad = [r for r in runs if not r.ok]
    others = [_dims_text(r.dims) for r in bad if r is not detailed]
    best = min(detailed.problems, key=lambda q: q.rank)
    summary = f"wrong at {_dims_text(detailed.dims)}: {best.headline}"
    if others:
        summary += f" (wrong also at {'; '.join(others)})"
    ordered = sorted(detailed.problems, key=lambda q: q.rank)
    details = [f"at {_dims_text(detailed.dims)}: " + ordered[0].text] + [q.text for q in ordered[1:]]
    return CheckResult(p, "wrong", summary, details, goals, runs, kernel)


# ---- comparing and explaining -------------------------------------------------------------------------
def _compare(p, cpu, run, dims, inputs, expected, outs, explain):
    trace = None
    for name in p.outputs:
        a = outs[name]
        e = np.asarray(expected[name])
        rtol, atol = p.tolerance(name)
        unwritten = _unwritten_mask(a) if name not in p.zeroed else np.zeros(a.shape, bool)
        if name in p.zeroed:
            if np.any(a != 0):
                run.written_any = True
        elif not unwritten.all():
            run.written_any = True
        wrong = ~unwritten & ~_close(a, e, rtol, atol)
        if unwritten.any():
            run.unwritten[name] = int(unwritten.sum())
        if wrong.any():
            run.wrong[name] = int(wrong.sum())
        if not (unwritten.any() or wrong.any()):
            continue
        if not explain:
            what = ([f"{int(unwritten.sum())} elements never written"] if unwritten.any() else []) \
                + ([f"{int(wrong.sum())} elements wrong"] if wrong.any() else [])
            run.problems.append(Problem(f"{name}: {', '.join(what)}", f"{name}: {', '.join(what)}"))
            continue
        if trace is None:
            trace = _trace(cpu, dims, inputs, p)
        if unwritten.all():
            run.problems.append(Problem(f"nothing is written into {name}", _explain_unwritten(trace, name, unwritten, a.shape)[1], 4))
        elif unwritten.any():
            run.problems.append(Problem(*_explain_unwritten(trace, name, unwritten, a.shape)))
        if wrong.any():
            run.problems.append(Problem(*_explain_wrong(trace, name, a, e, wrong, rtol, atol)))


def _trace(cpu, dims, inputs, p):
    try:
        variant = dict(cpu.last_run.variant)
        kir = cpu.ir(**variant)
        a = cpu.analysis(**variant)
        scalars = {k: v for k, v in inputs.items() if not isinstance(v, np.ndarray) or v.ndim == 0}
        arrays = {k: v for k, v in inputs.items() if isinstance(v, np.ndarray) and v.ndim > 0}
        src = cpu.module.checked.source
        return Trace(kir, a, dims, scalars, arrays, cpu.last_run.grid, src.lines, src.line_offset)
    except Exception:
        return None


def _owner_text(o, would=False) -> str:
    where = f"CTA ({o.cta[0]}, {o.cta[1]}, {o.cta[2]})"
    if o.atomic:
        verb = "would add into it" if would else "adds into it"
        what = "the atomic"
    else:
        verb = "would write it" if would else "writes it"
        what = "the store"
    if o.thread is None:
        return f"{what} at line {o.line} (`{o.text}`) in {where} {verb}"
    if o.atomic and len(o.threads) > 1:
        return (f"{len(o.threads)} threads of {where} (threads {_runs(np.asarray(o.threads))}) each add into it, in "
                f"{what} at line {o.line} (`{o.text}`): every thread that runs an atomic of one element adds its "
                f"value, so the CTA's value is added {len(o.threads)} times. Add the CTA's tile in one statement "
                f"instead, with a tile atomic into a slice of the tensor ({_tile_form(o.text)}: each element of "
                f"the slice is updated once, spec section 9), or let one thread do it (`if ctx.thread == 0 "
                f"{{ ... }}`)")
    s = f"thread {o.thread} of {where} {verb}, in {what} at line {o.line} (`{o.text}`)"
    if o.chunk is not None:
        r, c, v = o.chunk
        at = "element " + (str(o.position[0]) if len(o.position) == 1 else "(" + ", ".join(map(str, o.position)) + ")")
        s += f": {at} of the stored slice" + (f", in the run of {v} elements that thread moves" if v > 1 else "")
    elif len(o.threads) > 1:
        s += (f" (threads {_runs(np.asarray(o.threads))} all write it; the highest wins on the CPU, any one may on a "
              f"GPU)")
    return s


def _tile_form(text: str) -> str:
    """The tile form of an element atomic, from its source text: `atomic_add(Out[0], s[0])` ->
    `atomic_add(Out[0 :+ 1], s)` (a tile's element becomes the tile; another value stays)."""
    m = re.match(r"\s*(atomic_\w+)\(\s*(\w+)\[([^\]]*)\]\s*,\s*(.+)\)\s*$", text or "")
    if m is None:
        return "`atomic_add(T[r :+ 1, c :+ n], t)` with t a tile of shape [1, n]"
    fn, tensor, idx, value = m.groups()
    subs = ", ".join(f"{i.strip()} :+ 1" for i in idx.split(","))
    el = re.fullmatch(r"(\w+)\[[^\]]*\]", value.strip())
    return f"`{fn}({tensor}[{subs}], {el.group(1) if el else value.strip()})`"


def _explain_unwritten(trace, name, unwritten, shape) -> Tuple[str, str, int]:
    """-> (headline, text, rank)."""
    n, total = int(unwritten.sum()), unwritten.size
    where = describe_set(unwritten, name)
    head = (f"{where}: " + ("this element was never written (it still holds" if n == 1 else
                            f"{n} of {total} elements were never written (they still hold")
            + " the poison value the checker put there).")
    short = describe_set(unwritten, name, short=True)
    headline = f"{short} never written"
    if trace is None:
        return headline, head, 3
    stmts = trace.store_statements(name)
    if not stmts:
        return f"the kernel has no store into {name}", head + f" The kernel has no store into {name}.", 3
    last = trace.covered(name, shape)
    uncovered = unwritten & (last < 0)
    covered = unwritten & (last >= 0)
    parts = [head]
    rank = 3
    if covered.any():
        coord = tuple(int(c) for c in np.argwhere(covered)[0])
        inst = trace.instances[int(last[coord])]
        o = trace.owner(inst, coord)
        why = trace.why_invalid(inst, coord)
        owner = _owner_text(o, would=True)
        if why is None:
            parts.append(f"{_elem(name, coord)}: {owner}, but did not: its value is invalid there, or the "
                         f"statement did not run for that thread.")
        else:
            parts.append(f"{_elem(name, coord)}: {owner}, but the value is invalid there: {_invalid_text(why)}")
            whole = [v for v in why.via if v[2].startswith("assigned whole")]
            if whole:
                tname, wline, how = whole[-1]
                rhs = how.split("`", 1)[1].rstrip("`") if "`" in how else "..."
                headline = (f"{short} never written: `{tname} = {rhs}` (line {wline}) gave tile `{tname}` the valid "
                            f"region of a slice reaching outside {why.target}, fill and all")
            else:
                headline = (f"{short} never written: `{why.operand}` (line {why.line}) reaches outside {why.target}, "
                            f"where its value is invalid")
            rank = 2
    if uncovered.any() and trace.complete:
        cov = last >= 0
        covers = describe_set(cov, name) if cov.any() else "nothing"
        lines = ", ".join(sorted({str(trace.line(s)) for s in stmts}, key=int))
        ls = f"line{'s' if ',' in lines else ''} {lines}"
        per_thread = all(isinstance(s.target, ir.Element) for s in stmts)
        if per_thread:
            parts.append(f"No thread stores into {describe_set(uncovered, name)}: the threads that run the element "
                         f"stores into {name} ({ls}) address {covers}, over the grid {trace.grid} of "
                         f"{trace.T} threads each. Check the index each thread computes and the `if` guards "
                         f"around the store.")
        else:
            parts.append(f"No store covers {describe_set(uncovered, name)}: "
                         + covers_text(name, cov, ls, trace.grid, _window_lengths(trace, name, len(shape))))
        if rank > 2:
            headline = (f"{describe_set(uncovered, name, short=True)} never written: "
                        + ("no thread stores there" if per_thread else "no store covers it"))
    elif uncovered.any():
        parts.append(f"The checker could not replay every store (a while loop, or a start computed "
                     f"in a loop), so it cannot say which store should have written {describe_set(uncovered, name)}.")
    return headline, "\n".join(parts), rank


def _window_lengths(trace, name, ndim):
    """Per dimension of tensor `name`, the longest window one store instance gives a CTA there
    (an index counts 1), from the trace's tile-store instances; None where none has a window."""
    lens = [0] * ndim
    for inst in trace.instances:
        if inst.stmt.target.base.name != name or inst.window is None:
            continue
        for d, (_, length) in enumerate(inst.window[:ndim]):
            lens[d] = max(lens[d], 1 if length is None else int(length))
    return lens if any(lens) else None


def _explain_wrong(trace, name, a, e, wrong, rtol, atol) -> Tuple[str, str, int]:
    n = int(wrong.sum())
    coord = tuple(int(c) for c in np.argwhere(wrong)[0])
    got = np.asarray(a)[coord]
    want = np.asarray(e)[coord]
    s = (f"{n} of {wrong.size} elements of {name} are wrong; the first is {_elem(name, coord)} = {_num(got)}, "
         f"where numpy gives {_num(want)}.")
    headline = f"{_elem(name, coord)} = {_num(got)} where numpy gives {_num(want)} ({n} wrong)"
    rank = 4
    sh = _shift(a, e, wrong, rtol, atol)
    if sh is not None:
        axis, k, matched = sh
        along = "" if np.ndim(a) == 1 else f" along dimension {axis}"
        s += (f" {name} looks shifted by {abs(k)}{along}: {matched} of the {n} wrong elements hold the value numpy "
              f"gives {abs(k)} element{'s' if abs(k) > 1 else ''} {'further on' if k > 0 else 'earlier'}. "
              f"A slice starts {abs(k)} off (an off-by-{abs(k)} window?).")
        headline = f"{name} is shifted by {abs(k)}{along}: an off-by-{abs(k)} window"
        rank = 1
    if trace is not None:
        last = trace.covered(name, np.shape(a))
        k = int(last[coord])
        if k >= 0:
            o = trace.owner(trace.instances[k], coord)
            s += " " + _owner_text(o) + "."
            if o.atomic and len(o.threads) > 1:
                headline = f"every thread of a CTA adds into {_elem(name, coord)}, not one"
                rank = 1
    return headline, s, rank


def _race_problem(e: RaceError) -> Problem:
    """The debug run's race, with where the missing barrier goes. The message names the access
    that found the race first, then the earlier access it conflicts with (runtime.cpu.debug); an
    earlier access on a later line (or the same line) ran in a previous turn of a loop."""
    import re
    lines = [int(x) for x in re.findall(r"at line (\d+)", e.message)]
    fix = ""
    headline = "a race between threads"
    if len(lines) >= 2:
        later, earlier = lines[:2]
        if earlier < later:
            where = f"between line {earlier} and line {later}"
            order = "after the earlier access and before the later"
        else:
            where = f"between line {earlier} and line {later} of the next turn"
            order = (f"after line {earlier} and before the loop comes round to line {later} again "
                     f"(the race is loop-carried)")
        fix = (f" A barrier() is missing {where}: put one where every thread of the CTA reaches it (not inside an "
               f"`if` on ctx.thread), {order}.")
        headline = f"a race: a barrier() is missing {where}"
    return Problem(headline, f"a race between threads, found by the debug run: {e.message}.{fix}", 0)


def _oob_problem(e: OutOfBoundsError) -> Problem:
    return Problem(f"an out-of-bounds element access at line {e.line}",
                   f"an out-of-bounds element access, found by the debug run: {e.message}. A single-element "
                   f"subscript is not masked (only slices are): guard it (`if i < N {{ ... }}`) or end the thread "
                   f"before it (`if i >= N {{ return }}`).", 0)


# ---- goals ---------------------------------------------------------------------------------------------
def _requests(c, threads: int) -> int:
    k = len(c.runs)
    full, rem = divmod(k, threads)
    return full * -(-threads // 32) + -(-rem // 32)


def _goals(p: C.Puzzle, cpu, variant) -> List[GoalResult]:
    if not p.goals:
        return []
    try:
        a = cpu.analysis(**(variant or {}))
    except TileError:
        return [GoalResult(g, False, "no analysis") for g in p.goals]
    out = []
    for g in p.goals:
        out.append(_goal(g, a, cpu))
    return out


def _goal(g: C.Goal, a, cpu) -> GoalResult:
    if g.kind == "barriers":
        n = len(a.barriers)
        if n <= g.value:
            return GoalResult(g, True, f"{n} placed")
        why = "; ".join(f"line {b.line} ({b.where}): {b.reason}" for b in a.barriers)
        return GoalResult(g, False, f"{n} placed, {n - g.value} too many: {why}", f"{n} barriers placed")
    if g.kind == "coalesced":
        bad = [c for c in a.copies if c.sectors > c.ideal_sectors]
        if not bad:
            return GoalResult(g, True, f"{len(a.copies)} cop{'y' if len(a.copies) == 1 else 'ies'}, each at its ideal sectors")
        c = max(bad, key=lambda c: c.sectors / max(1, c.ideal_sectors))
        head = (f"the {c.direction} of {c.tensor} at line {c.line} touches {c.sectors} sectors "
                f"where {c.ideal_sectors} would do")
        return GoalResult(g, False, f"{head} (vector width {c.vector_width}): the lanes of a warp "
                          f"reach elements far apart; make consecutive lanes move consecutive elements of a row", head)
    if g.kind == "sectors":
        bad = []
        figs = []
        for c in a.copies:
            eb = DTYPES[c.tensor_dtype].itemsize if c.tensor_dtype in DTYPES else 4
            per = c.sectors / max(1, _requests(c, a.threads))
            figs.append(per)
            if c.vector_width * eb < 16 or c.sectors > c.ideal_sectors:
                bad.append((c, per))
        if not a.copies:
            return GoalResult(g, False, "no copy between a tensor and a tile: use tile slices")
        if not bad:
            return GoalResult(g, True, f"{max(figs):.0f} sectors per warp request, 16-byte vectors")
        c, per = bad[0]
        head = (f"the {c.direction} of {c.tensor} at line {c.line} moves vectors of "
                f"{c.vector_width} element{'s' if c.vector_width > 1 else ''} ({per:.1f} sectors per warp request)")
        return GoalResult(g, False, f"{head}: start slices on multiples of 4 elements so lanes move 16 bytes each", head)
    if g.kind == "no_bank_conflicts":
        bad = [c for c in a.copies if c.wavefronts > c.ideal_wavefronts]
        if not bad:
            return GoalResult(g, True, "every copy at its ideal wavefronts")
        c = max(bad, key=lambda c: c.wavefronts / max(1, c.ideal_wavefronts))
        fix = _bank_fix_text(c, a.copies)
        head = (f"the {c.direction} {'into' if c.direction == 'store' else 'of'} {c.tensor} at line {c.line} takes "
                f"{c.wavefronts} shared-memory wavefronts where {c.ideal_wavefronts} would do")
        return GoalResult(g, False, f"bank conflicts: {head} (tile `{c.tile}`){fix}", "bank conflicts: " + head)
    if g.kind == "shared_bytes":
        ok = a.footprint <= g.value
        return GoalResult(g, ok, f"{a.footprint} bytes", f"{a.footprint} bytes of shared memory")
    if g.kind == "uses":
        used = _kernel_constructs(cpu)
        missing = [n for n in g.names if n not in used]
        if not missing:
            return GoalResult(g, True, "used")
        miss = "not used: " + ", ".join(f"`{n}`" for n in missing)
        return GoalResult(g, False, miss, miss)
    return GoalResult(g, False, f"unknown goal {g.kind!r}")


def _bank_fix_text(c, copies) -> str:
    """The layout fix for the conflicting copy `c`, as "; fix: ..." ("" when the analysis has none).
    The analysis proposes a fix per copy; one layout serves every copy of a tile, so a copy with no
    fix of its own (a load whose rows lost their 16-byte vectors, say) takes that of another
    conflicting copy of the same tile. A pad is worded from the tile's present rows: the copies keep
    the window they use now (the columns the loads into the tile fill)."""
    fix = c.fix
    if fix is None:
        fix = next((o.fix for o in copies if o.tile == c.tile and o.fix is not None
                    and o.wavefronts > o.ideal_wavefronts), None)
    if fix is None:
        return ""
    if fix.kind != "pad":
        return f"; fix: {fix.kind} (thread map)"
    now = fix.row_length - fix.pad
    used = [o.shape[-1] for o in copies if o.tile == c.tile and o.direction == "load" and not o.is_view]
    width = max(used) if used else now
    s = "s" if fix.pad > 1 else ""
    if width == now:
        return (f"; fix: pad each row of `{c.tile}` by {fix.pad} element{s} (rows of {fix.row_length}) and use the "
                f"window `[:, 0 :+ {width}]`")
    return (f"; fix: pad each row of `{c.tile}` by {fix.pad} more element{s} (rows of {fix.row_length}, not {now}) "
            f"and keep the window `[:, 0 :+ {width}]`")


# ---- the GPU ---------------------------------------------------------------------------------------------
def _gpu(p: C.Puzzle, kernel, runs: List[ShapeRun]) -> List[str]:
    """Run a CUDA-backend kernel at every shape; returns report lines (times included). Without a
    usable GPU, one line saying the check ran on the CPU only."""
    from ..runtime.gpu import gpu_available
    if not gpu_available():
        return ["the kernel is compiled for the CUDA backend, but no GPU is usable here: checked on the CPU "
                "reference executor only"]
    lines = []
    for si, run in enumerate(runs):
        inputs, expected, outs, args = _arguments(p, kernel, si)
        try:
            kernel(*args)
            rep = kernel.last_run
            run.gpu_seconds = float(rep.seconds) if rep is not None else None
        except TileError as e:
            run.gpu_problem = f"the GPU launch failed: {e}"
            lines.append(f"on the GPU at {_dims_text(run.dims)}: {run.gpu_problem}")
            continue
        for name in p.outputs:
            rtol, atol = p.tolerance(name)
            bad = ~_close(outs[name], expected[name], max(rtol, 1e-5), max(atol, 1e-5))
            if bad.any():
                coord = tuple(int(c) for c in np.argwhere(bad)[0])
                run.gpu_problem = (f"{int(bad.sum())} elements of {name} differ from numpy on the GPU; the first is "
                                   f"{_elem(name, coord)} = {_num(outs[name][coord])}, numpy {_num(expected[name][coord])}")
                break
        t = f"{run.gpu_seconds * 1e3:.3f} ms" if run.gpu_seconds is not None else "no time"
        lines.append(f"on the GPU at {_dims_text(run.dims)}: " + (run.gpu_problem or f"right, {t}"))
    return ["\n".join(lines)] if lines else []

