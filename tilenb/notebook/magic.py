"""The `%%tilekernel` cell magic and the `%tileprofile` line magic (`%load_ext tilenb` registers them).

    %%tilekernel [--backend cpu|cuda|auto] [--tune NAME=V,...] [--show VIEWS] [--debug] [--module NAME]
    <tile-language source>

Guarantees:
- On success every kernel of the cell is bound by name in the user namespace (a `tilenb.Kernel`;
  launch it as `name[grid](*arrays)`), `--module NAME` also binds the `tilenb.Module`; binding
  over a Python name that holds something other than a tilenb kernel or module (an import such
  as `np`, a variable, a built-in such as `sum`) prints one line to stderr naming it, and the
  requested views are displayed (default: threads, lifetimes, barriers, and timing on the CUDA
  backend; `--show none` shows none; `--show all` all five). A kernel named by a Python keyword
  (`lambda`, `None`) is bound too, but no Python code can name it: one line on stderr says so and
  how to reach it (`--module NAME`, then `NAME.kernels['lambda']`); `--module` refuses a keyword.
- Functions (`fn`) are visible to later `%%tilekernel` cells: a cell may call any function an
  earlier successful cell defined (the latest definition wins; a cell's own definitions shadow
  earlier ones). Functions are not bound as Python names: they are not callable from Python.
- A static error fails the cell: the magic raises `CellError`, which IPython shows as the
  diagnostics alone (each with the cell's own prompt number and the line as counted in the cell,
  the `%%tilekernel` line being line 1, then the source line and a caret), with no Python
  traceback, as it shows a `SyntaxError`; "Run All" stops there, as it does at a Python error.
  Nothing is bound: kernels and functions from earlier cells keep working. An error inside a
  function brought in from an earlier cell names that cell ("In[3]:7"), and the call that
  brought it there by its cell too ("called at In[5]:2"). A notebook cell that
  fails on purpose carries the `raises-exception` tag (nbval, nbclient's allow_errors per cell).
- Bad options (an unknown backend or view, a malformed --tune) fail the cell the same way.
- "In[N]" is the cell's own execution count (the number in its prompt), whichever IPython
  runs it (IPython 9 advances `shell.execution_count` before the cell runs, IPython 8 after).
- After every cell, timing views shown by this magic refresh from their kernel's `last_run`:
  each is re-displayed in place (its display handle), so a saved or exported notebook shows the
  last launch, not the state at definition.
"""
from __future__ import annotations

import keyword
import re
import shlex
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from ..lang.diagnostics import TileError

_NAME_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
_DEFINES = re.compile(r"\b(?:fn|kernel)\s+([A-Za-z_]\w*)")


@dataclass(frozen=True)
class FnDef:
    """A function defined by an earlier cell: its text, the cell ("In[3]") and its first line
    there (as counted in that cell)."""
    name: str
    text: str
    origin: str
    line: int


@dataclass
class Options:
    backend: str = "auto"
    tune: Optional[Dict[str, object]] = None
    show: Optional[str] = None
    debug: bool = False
    module: Optional[str] = None


USAGE = ("usage: %%tilekernel [--backend cpu|cuda|auto] [--tune NAME=VALUE,...] "
         "[--show threads,lifetimes,barriers,timing,cuda|all|none] [--debug] [--module NAME]")


def parse_options(line: str) -> Options:
    """The magic's options. Raises TileError (with the usage line) for anything unknown."""
    try:
        words = shlex.split(line)
    except ValueError as e:
        raise TileError(f"cannot read the options: {e}\n{USAGE}") from None
    o = Options()
    i = 0

    def value(flag):
        nonlocal i
        if "=" in words[i] and words[i].startswith("--"):
            return words[i].split("=", 1)[1]
        if i + 1 >= len(words):
            raise TileError(f"{flag} needs a value\n{USAGE}")
        i += 1
        return words[i]
    while i < len(words):
        w = words[i]
        flag = w.split("=", 1)[0]
        if flag == "--backend":
            o.backend = value(flag)
            if o.backend not in ("cpu", "cuda", "auto"):
                raise TileError(f"unknown backend {o.backend!r}: use cpu, cuda or auto")
        elif flag == "--tune":
            o.tune = parse_tune(value(flag))
        elif flag == "--show":
            o.show = value(flag)
        elif flag == "--module":
            o.module = value(flag)
            if not o.module.isidentifier() or keyword.iskeyword(o.module):
                raise TileError(f"--module needs a Python name, not {o.module!r}"
                                + (" (a Python keyword)" if keyword.iskeyword(o.module) else ""))
        elif w == "--debug":
            o.debug = True
        elif w in ("-h", "--help"):
            raise TileError(USAGE)
        else:
            raise TileError(f"unknown option {w!r}\n{USAGE}")
        i += 1
    return o


def parse_tune(text: str) -> Dict[str, object]:
    """'TILE=64,D=256' -> {'TILE': 64, 'D': 256}. Raises TileError for a malformed item."""
    out: Dict[str, object] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        name, eq, val = item.partition("=")
        name, val = name.strip(), val.strip()
        if not eq or not name.isidentifier() or not val:
            raise TileError(f"--tune takes NAME=VALUE pairs separated by commas, not {item!r}")
        try:
            out[name] = int(val, 0)
        except ValueError:
            try:
                out[name] = float(val)
            except ValueError:
                raise TileError(f"--tune {name}: {val!r} is not a number") from None
    return out


def _fn_text(source_lines: List[str], span) -> str:
    """The exact text of a function from its span (1-based lines and columns)."""
    first, last = span.line, span.end_line or span.line
    chunk = source_lines[first - 1:last]
    if not chunk:
        return ""
    if span.end_column:
        chunk[-1] = chunk[-1][:span.end_column - 1]
    chunk[0] = chunk[0][span.column - 1:]
    return "\n".join(chunk)


class CellCompiler:
    """Compiles cell bodies, bringing in functions of earlier cells, and remembers the functions
    each successful cell defines. One per IPython shell."""

    # The %%tilekernel line: the compiled text starts with that many empty lines, so body line 1
    # is compiled line 2, the same number the cell shows (analyses, errors and CUDA comments agree).
    HEADER_LINES = 1

    def __init__(self):
        self.functions: Dict[str, FnDef] = {}

    def _needed(self, body: str) -> List[FnDef]:
        own = set(_DEFINES.findall(body))
        todo = [n for n in _NAME_CALL.findall(body)]
        picked: Dict[str, FnDef] = {}
        while todo:
            n = todo.pop()
            if n in own or n in picked or n not in self.functions:
                continue
            picked[n] = self.functions[n]
            todo.extend(_NAME_CALL.findall(picked[n].text))
        return [f for n, f in self.functions.items() if n in picked]   # in definition order

    def compile(self, body: str, origin: str, backend: str, debug: bool, remember: bool = True):
        """-> (module, labels). Raises TileError with lines as the user sees them.
        remember=False leaves the cell's functions unrecorded until `remember(module)`: the
        magic records them only once the whole cell (its options too) has succeeded."""
        from ..api import compile as compile_program  # noqa: PLC0415
        # lines end at "\n" only, as the lexer counts them
        body_lines = body.split("\n")
        if body_lines and body_lines[-1] == "":
            body_lines.pop()
        nbody = len(body_lines)
        text = "\n" * self.HEADER_LINES + "\n".join(body_lines)
        blocks: List[Tuple[int, FnDef]] = []     # (first compiled line, function)
        for f in self._needed(body):
            text += "\n"
            blocks.append((text.count("\n") + 1, f))
            text += f.text
        text += "\n"

        def where(line: int) -> Tuple[Optional[str], int]:
            """compiled line -> (origin cell or None for this cell, line as seen there)."""
            if line <= nbody + self.HEADER_LINES:
                return None, line
            for start, f in reversed(blocks):
                if line >= start:
                    return f.origin, f.line + (line - start)
            return None, line

        def labels(line: int) -> str:
            cell, n = where(line)
            return str(n) if cell is None else f"{cell}:{n}"
        try:
            module = compile_program(text, backend=backend, filename=origin, debug=debug,
                                     line_offset=0)
        except TileError as e:
            for d in e.diagnostics:
                moved = False
                if d.line is not None and d.line > nbody + self.HEADER_LINES:
                    cell, n = where(d.line)
                    if cell is not None:
                        d.filename, d.line, moved = cell, n, True
                d.message = _CALLED_AT.sub(lambda m: _called_at(m, where, origin, moved), d.message)
                d.args = (d.message,)
            raise
        module._tilenb_cell = (nbody, origin)
        if remember:
            self.remember(module)
        return module, labels

    def remember(self, module) -> None:
        """Record the functions a cell compiled by `compile` defines, for later cells."""
        nbody, origin = module._tilenb_cell
        src_lines = module.source.split("\n")
        for f in module.checked.functions.values():
            if f.span.line <= nbody + self.HEADER_LINES:
                self.functions[f.name] = FnDef(f.name, _fn_text(src_lines, f.span), origin,
                                               f.span.line)


_CALLED_AT = re.compile(r"\(in '(\w+)', called at line (\d+)\)")


def _called_at(m, where, origin: str, moved: bool) -> str:
    """The checker's "(in 'f', called at line N)", N a line of the compiled text, as the user
    sees it: a call in a function brought in from an earlier cell names that cell, and a call in
    this cell names this cell when the error itself is shown in another one."""
    cell, n = where(int(m.group(2)))
    if cell is None and not moved:
        return f"(in '{m.group(1)}', called at line {n})"
    return f"(in '{m.group(1)}', called at {cell or origin}:{n})"


class CellError(TileError):
    """A `%%tilekernel` cell failed (a static error in its source, or bad options): nothing of
    the cell was bound. `str()` is the diagnostics as the cell shows them; `.diagnostics` holds
    the errors (TileError), the first one's `line`, `column` and `filename` ("In[4]") are this
    error's. IPython displays it through `_render_traceback_`: the diagnostics, no frames."""

    def __init__(self, text: str, cause: Optional[TileError] = None):
        super().__init__(text)
        if cause is not None:
            self.diagnostics = list(cause.diagnostics)
            self.line, self.column, self.filename = cause.line, cause.column, cause.filename
            self.source_line = cause.source_line

    def __str__(self) -> str:
        return self.message

    def _render_traceback_(self) -> List[str]:
        return self.message.split("\n")

    def __reduce__(self):
        return (type(self), (self.message,))


def cell_number(shell) -> int:
    """The execution count of the cell running now: the number in its prompt, In[N].

    IPython keeps the running cell's ExecutionResult on its display hook; its execution_count is
    the cell's own number in every IPython version. Outside a cell (a magic called from code),
    `shell.execution_count` is the best there is."""
    result = getattr(getattr(shell, "displayhook", None), "exec_result", None)
    n = getattr(result, "execution_count", None)
    return int(n) if n is not None else int(shell.execution_count)


def _error(message: str) -> None:
    print(message, file=sys.stderr)


def _note_replaced(ns: dict, name: str, what: str) -> None:
    """One line on stderr when binding `name` replaces a Python name of the notebook (a variable,
    an import, or a built-in such as sum) that is not a tilenb kernel or module; silent otherwise."""
    import builtins
    from ..runtime.module import Kernel, Module
    if name in ns:
        old = ns[name]
    elif hasattr(builtins, name):
        old = getattr(builtins, name)
    else:
        return
    if isinstance(old, (Kernel, Module)):
        return
    kind = "the built-in" if name not in ns else "the existing name"
    _error(f"%%tilekernel: {what} '{name}' replaces {kind} '{name}' ({type(old).__name__}) in the "
           f"notebook's namespace")


class TileMagics:
    """Holds the shell's state: the cell compiler and the timing views to refresh."""

    TRACKED = 64      # the latest timing views followed (older ones keep what they last showed)

    def __init__(self, shell):
        self.shell = shell
        self.cells = CellCompiler()
        self._timing: List[Tuple[object, object, object]] = []   # (view, kernel, DisplayHandle)

    # -- the cell magic
    def tilekernel(self, line: str, cell: str):
        """%%tilekernel [--backend cpu|cuda|auto] [--tune NAME=V,...] [--show VIEWS] [--debug] [--module NAME]

        Compile the cell's tile-language source, bind each kernel by name (launch it as
        `name[grid](*arrays)`), and show its views.

        --backend   cpu (numpy reference executor), cuda (CuPy + NVRTC) or auto (default:
                    cuda when a GPU is usable)
        --tune      @autotune values the views analyse, e.g. TILE=64,D=256 (default: the
                    first value of each name)
        --show      any of threads,lifetimes,barriers,timing,cuda; all; or none (default:
                    threads,lifetimes,barriers, and timing on the CUDA backend)
        --debug     launches check shared-memory races and out-of-bounds accesses
        --module    also bind the compiled module under this name

        Functions (fn) defined in earlier %%tilekernel cells can be called here. A static
        error fails the cell (CellError: the diagnostics, with lines counted in this cell, and no
        traceback) and binds nothing.
        """
        from IPython.display import display
        from . import build
        try:
            opts = parse_options(line)
            build.parse_views(opts.show)          # refuse a bad --show before compiling
        except TileError as e:
            raise CellError(f"%%tilekernel: {e.message}") from None
        origin = f"In[{cell_number(self.shell)}]"
        try:
            module, labels = self.cells.compile(cell, origin, opts.backend, opts.debug, remember=False)
        except TileError as e:
            raise CellError(str(e), e) from None
        if opts.module and opts.module in module.kernels:
            raise CellError(f"%%tilekernel: --module {opts.module} would hide the kernel of that name; "
                            f"choose another name for the module")
        tunes = self._tunes(module, opts.tune)   # a bad --tune fails the cell: nothing is bound
        self.cells.remember(module)
        ns = self.shell.user_ns
        for name, k in module.kernels.items():
            if keyword.iskeyword(name):
                _error(f"%%tilekernel: kernel '{name}' is a Python keyword, so Python code cannot name it; "
                       f"rename it, or reach it through --module NAME as NAME.kernels['{name}']")
            else:
                _note_replaced(ns, name, "kernel")
            ns[name] = k
        if opts.module:
            _note_replaced(ns, opts.module, "--module")
            ns[opts.module] = module
        show = build.parse_views(opts.show, module.backend)
        if not module.kernels:
            nbody = module._tilenb_cell[0] + self.cells.HEADER_LINES
            own = sorted(n for n, f in module.checked.functions.items() if f.span.line <= nbody)
            display({"text/plain": "%%tilekernel: this cell defines no kernel"
                     + (f" (functions: {', '.join(own)})" if own else "")},
                    raw=True)
            return None
        if not show:
            return None
        for name, k in module.kernels.items():
            display(_header(k, tunes[name], show), raw=True)
            for w in build.make_views(k, show, tunes[name], labels):
                if w._name == "timing":      # shown under a display id, to be updated in place
                    self.track(w, k, display(w, display_id=True))
                else:
                    display(w)
        return None

    # -- the line magic: one launch under Nsight Compute
    def tileprofile(self, line: str):
        """%tileprofile KERNEL[GRID](ARGS, NAME=V, ...)

        Run the launch once under Nsight Compute (`kernel.profile(GRID, *ARGS, NAME=V...)`; the
        keywords are @autotune values) and show the thread map, barriers and timing views with
        the measured figures beside the predictions. Returns the `Profile` (`p = %tileprofile
        ...`). The outputs are written as by one launch; a profile takes seconds (ncu replays
        the kernel). Where it cannot measure (CPU backend, no ncu, counters refused) it shows the
        analysis' prediction for the launch and one sentence saying why nothing was measured and
        what to do, and returns None: no error cell, so Run All goes on (`tilenb.notebook.measure`,
        which this magic calls, is the one home of both behaviours)."""
        import ast
        from .profiling import measure
        text = line.strip()
        try:
            node = ast.parse(text, mode="eval").body
        except SyntaxError:
            node = None
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)):
            raise CellError("%tileprofile takes one launch, written as KERNEL[GRID](ARGS), such as "
                            "%tileprofile scale_rows[10](X, S, Y)")
        ns = self.shell.user_ns

        def value(n):
            # the launch's parts are the user's Python: a failure among them (an undefined
            # name, a bad *args) is reported as the part that failed, not as this magic's frames
            try:
                return eval(compile(ast.Expression(n), "<tileprofile>", "eval"), ns)   # noqa: S307
            except Exception as e:  # noqa: BLE001
                raise CellError(f"%tileprofile {text}: evaluating {ast.unparse(n)!r} raised "
                                f"{type(e).__name__}: {e}") from None
        kernel = value(node.func.value)
        if not hasattr(kernel, "profile"):
            raise CellError(f"%tileprofile: {ast.unparse(node.func.value)} is not a tilenb kernel")
        grid = value(node.func.slice)
        args = []
        for a in node.args:                                  # *xs spreads, as in a launch
            if isinstance(a, ast.Starred):
                xs = value(a.value)
                try:
                    args.extend(xs)
                except TypeError:
                    raise CellError(f"%tileprofile {text}: *{ast.unparse(a.value)} is not iterable") from None
            else:
                args.append(value(a))
        tune = {}
        for k in node.keywords:                              # NAME=V, or **mapping
            if k.arg is not None:
                tune[k.arg] = value(k.value)
                continue
            kw = value(k.value)
            if not (isinstance(kw, dict) and all(isinstance(n, str) for n in kw)):
                raise CellError(f"%tileprofile {text}: **{ast.unparse(k.value)} must be a dict of names "
                                f"(@autotune values, full_ctas, show)")
            tune.update(kw)
        return measure(kernel, grid, *args, **tune)

    def track(self, view, kernel, handle) -> None:
        """Keep the timing view `view` of `kernel` (displayed under the DisplayHandle `handle`)
        up to date: after every cell it is re-displayed in place when the kernel's latest launch
        changed, so the saved notebook shows the last launch too."""
        self._timing.append((view, kernel, handle))
        del self._timing[:-self.TRACKED]

    def _tunes(self, module, tune) -> Dict[str, dict]:
        """The @autotune values each kernel is analysed at. Raises CellError for a bad --tune."""
        tune = tune or {}
        known = set()
        out = {}
        for name, k in module.kernels.items():
            space = k.tune_space
            known.update(space)
            mine = {n: v for n, v in tune.items() if n in space}
            try:
                k.ir(**mine)
            except TileError as e:
                raise CellError(f"%%tilekernel --tune: {e.message}") from None
            out[name] = mine
        unknown = [n for n in tune if n not in known]
        if unknown:
            raise CellError(f"%%tilekernel --tune: no kernel of this cell has an @autotune name {unknown[0]!r}"
                            f" (they have: {', '.join(sorted(known)) or 'none'})")
        return out

    # -- after each cell: timing views follow their kernel's latest launch
    def refresh_timing(self, *args, **kw) -> None:
        from .build import timing_record
        for w, k, handle in self._timing:
            rec = timing_record(k)
            if rec != w.timing:
                w.timing = rec
                if handle is not None:
                    handle.update(w)


def _header(kernel, tune: dict, show) -> dict:
    import html
    from ..runtime.module import _type_text
    params = ", ".join(f"{n}: {_type_text(t)}" for n, t in kernel.params)
    full = dict(kernel.checked.default_tune())
    full.update(tune)
    tune_txt = ", ".join(f"{n}={v}" for n, v in full.items())
    text = (f"kernel {kernel.name}({params}) on {kernel.module.backend}"
            + (f", analysed at {tune_txt}" if tune_txt else ""))
    return {"text/plain": text,
            "text/html": f'<div style="font-size:13px;margin:8px 0 2px 0"><b>kernel {html.escape(kernel.name)}</b>'
                         f'<span style="opacity:.75">({html.escape(params)}) on {html.escape(kernel.module.backend)}'
                         f'{", analysed at " + html.escape(tune_txt) if tune_txt else ""}</span></div>'}


def register(ipython) -> TileMagics:
    """Register %%tilekernel (and its after-cell hook) on an IPython shell; idempotent."""
    old = getattr(ipython, "_tilenb_magics", None)
    if old is not None:
        try:
            ipython.events.unregister("post_run_cell", old.refresh_timing)
        except ValueError:
            pass
    magics = TileMagics(ipython)
    if old is not None:
        magics.cells = old.cells            # keep the functions earlier cells defined
    ipython._tilenb_magics = magics
    ipython.register_magic_function(magics.tilekernel, magic_kind="cell", magic_name="tilekernel")
    ipython.register_magic_function(magics.tileprofile, magic_kind="line", magic_name="tileprofile")
    ipython.events.register("post_run_cell", magics.refresh_timing)
    return magics
