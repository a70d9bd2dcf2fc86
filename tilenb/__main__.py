"""Command line: `python -m tilenb check FILE...` and `python -m tilenb main`.

check: prints every diagnostic of each file and exits 1 if any file has an error, else 0.
list:  checks the files and lists their kernels (parameters, @autotune space, shared memory: the kernel's, and its tiles').
main:  the main job: checks the bundled example file, then executes every tutorial in
       notebooks/ (tilenb.mainjob), writes HTML pages to out/tutorials/ and prints a table.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import compile as tile_compile
from .lang.diagnostics import TileError

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
    except TileError as e:
        print(e, file=sys.stderr)
        return None, False


def _list(mod) -> None:
    from .analysis import analyze
    for name, k in mod.kernels.items():
        kir = k.ir()
        params = ", ".join(f"{p.sym.name}: {_ty(p.sym.type)}" for p in kir.params)
        tune = k.tune_space
        a = analyze(kir)        # the shared-memory map of the code for any GPU (its footprint: every byte)
        tune_txt = f"  @autotune {', '.join(f'{n} in {list(v)}' for n, v in tune.items())}" if tune else ""
        print(f"  {name}({params})")
        print(f"      {kir.threads} threads/CTA, {len(a.tiles)} tile(s), shared memory {a.footprint} B "
              f"(tiles {a.lifetimes.footprint} B){tune_txt}")


def _ty(t):
    from .runtime.module import _type_text
    return _type_text(t)


def main(argv=None) -> int:
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
