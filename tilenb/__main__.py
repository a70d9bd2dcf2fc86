"""Command line: `python -m tilenb check FILE...` and `python -m tilenb main`.

check: prints every diagnostic of each file and exits 1 if any file has an error, else 0. A
       syntax error stops the parser, so then each kernel and function of the file is checked on
       its own as well: every declaration with a syntax error reports it, and the others are
       checked together for every other error.
list:  checks the files and lists their kernels (parameters, @autotune space, shared memory: the kernel's, and its tiles').
main:  the main job: checks the bundled example file, then executes every tutorial in
       notebooks/ (tilenb.mainjob), writes HTML pages to out/tutorials/ and prints a table.

Output to a pipe that closes early (`tilenb list FILE | head`) ends the command quietly, with
exit status 141 (as a process killed by SIGPIPE), not a traceback.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import List

from . import compile as tile_compile
from .lang.diagnostics import TileError, TileSyntaxError, combine

EXAMPLE = Path(__file__).parent / "examples" / "seed_kernels.tile"


def _load(path: str):
    try:
        text = Path(path).read_text()
    except OSError as e:
        print(f"{path}: error: cannot read: {e.strerror}", file=sys.stderr)
        return None, False
    except UnicodeDecodeError:
        print(f"{path}: error: cannot read: not UTF-8 text", file=sys.stderr)
        return None, False
    try:
        return tile_compile(text, backend="cpu", filename=path), True
    except TileSyntaxError as e:
        print(combine(every_error(text, path, e)), file=sys.stderr)
        return None, False
    except TileError as e:
        print(e, file=sys.stderr)
        return None, False


# a top-level declaration starts at column 1: its attributes, `kernel` or `fn`
_DECL = re.compile(r"(?:@|kernel\b|fn\b)")


def _declarations(lines: List[str]) -> List[range]:
    """Line ranges (0-based) of the file's top-level declarations, each with its attributes; the
    lines before the first one form a range of their own."""
    starts = []
    for i, line in enumerate(lines):
        if not _DECL.match(line):
            continue
        prev = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        if starts and prev.startswith("@") and _DECL.match(prev):
            continue                              # the kernel line of the attributes above it
        starts.append(i)
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    return [range(a, b) for a, b in zip(starts, starts[1:] + [len(lines)])]


def every_error(text: str, path: str, first: TileSyntaxError) -> List[TileError]:
    """All errors of a file whose parse failed with `first`: the first syntax error of each
    declaration, then every error the checker finds in the declarations that parse (checked
    together, so that they see each other's functions). Line numbers are the file's."""
    lines = text.split("\n")
    parts = _declarations(lines)
    if len(parts) < 2:
        return list(first.diagnostics)

    def only(keep) -> str:
        return "\n".join(l if i in keep else "" for i, l in enumerate(lines))
    errors: List[TileError] = []
    good = set()
    for part in parts:
        try:
            tile_compile(only(set(part)), backend="cpu", filename=path)
        except TileSyntaxError as e:
            errors.append(e.diagnostics[0])
            continue
        except TileError:
            pass                                  # judged below, with the other declarations
        good.update(part)
    if good:
        try:
            tile_compile(only(good), backend="cpu", filename=path)
        except TileError as e:
            errors.extend(e.diagnostics)
    return errors or list(first.diagnostics)


def _list(mod) -> None:
    from .analysis import analyze
    for name, k in mod.kernels.items():
        kir = k.ir()
        params = ", ".join(f"{p.sym.name}: {_ty(p.sym.type)}" for p in kir.params)
        tune = k.tune_space
        a = analyze(kir)        # the shared-memory map of the code for any GPU (its footprint: every byte)
        tune_txt = f"  @autotune {', '.join(f'{n} in {list(v)}' for n, v in tune.items())}" if tune else ""
        if any(len(v) > 1 for v in tune.values()):
            # the figures are of one variant (the first that fits), and variants over the budget are left out
            def named(values):     # in @autotune order
                return ", ".join(f"{n}={values[n]}" for n in tune)
            at = named(k.checked.default_tune())
            left = [named(dict(key)) for key in k.checked.skipped]
            tune_txt += f" (figures at {at}" + (f"; skipped, over the shared-memory budget: {'; '.join(left)}"
                                                 if left else "") + ")"
        print(f"  {name}({params})")
        print(f"      {kir.threads} threads/CTA, {len(a.tiles)} tile(s), shared memory {a.footprint} B "
              f"(tiles {a.lifetimes.footprint} B){tune_txt}")


def _ty(t):
    from .runtime.module import _type_text
    return _type_text(t)


def main(argv=None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        # the reader went away (`| head`): stop writing, and say nothing more
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


def _main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="tilenb", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="check tile-language files; exit 1 on any error")
    c.add_argument("files", nargs="+")
    li = sub.add_parser("list", help="check files and list their kernels")
    li.add_argument("files", nargs="+")
    mj = sub.add_parser("main", help="the main job: run the tutorials, write HTML, print a table")
    mj.add_argument("--notebooks", default="notebooks", help="folder of tutorials (default: notebooks)")
    mj.add_argument("--out", default="out/tutorials", help="folder for the HTML pages (default: out/tutorials)")
    a = ap.parse_args(argv)
    if a.cmd in ("check", "list"):
        ok = True
        for f in a.files:
            mod, good = _load(f)
            ok &= good
            if good and a.cmd == "list":
                print(f"{f}: {len(mod.kernels)} kernel(s)")
                _list(mod)
            elif good:
                print(f"{f}: ok, {len(mod.kernels)} kernel(s): {', '.join(mod.kernels)}")
        return 0 if ok else 1
    if a.cmd == "main":
        print(f"Checking {EXAMPLE.name}")
        mod, good = _load(str(EXAMPLE))
        if not good:
            return 1
        _list(mod)
        print()
        from .mainjob import main as run_tutorials
        return run_tutorials(a.notebooks, a.out)
    return 2


if __name__ == "__main__":
    sys.exit(main())
