"""The generated CUDA of every kernel the project ships or tests, written to one folder, so that a
change to the code generator can be compared byte for byte before and after.

    python scripts/cuda_corpus.py OUT_DIR          # writes OUT_DIR/<source>.<kernel>.<variant>.<arch>.cu
    diff -r BEFORE_DIR AFTER_DIR                   # what the change altered
    python scripts/cuda_corpus.py --same BEFORE_DIR AFTER_DIR   # the same, ignoring where sources live

`--same` compares what was generated, not where its source lives: each file counts as its
<kernel>.<variant>.<arch> and its bytes, so a kernel text that moved to another file (a test
moved or renamed, a pasted copy replaced by an import) compares equal. It prints each generated
file found on one side only and exits 1 when there is any.

Sources: the suite's program (tilenb/examples/suite_kernels.py), the shipped examples (tilenb/examples),
the notebook fixture's rms_norm kernel compiled alone (tilenb/notebook/fixture.py),
every `%%tilekernel` cell of the tutorials (notebooks/*.ipynb), and every string constant in
tests/**/*.py that compiles as a tile program. Each kernel is generated for every @autotune variant
(at most 64 per kernel) and for the targets None (any GPU) and "sm_90". A kernel whose generation
raises is written as a file holding the error's type and message, so a change in what is refused
shows too. Prints the number of files written.
"""
from __future__ import annotations

import ast
import hashlib
import itertools
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import tilenb  # noqa: E402

ARCHES = (None, "sm_90")
MAX_VARIANTS = 64


def _sources():
    from tilenb.examples import suite_kernels
    yield "suite", suite_kernels.program()
    for f in sorted((ROOT / "tilenb" / "examples").glob("*.tile")):
        yield f"example-{f.stem}", f.read_text()
    from tilenb.notebook.fixture import RMS_NORM_SOURCE   # the widgets' record kernel, alone
    yield "fixture-rms_norm", RMS_NORM_SOURCE
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        for i, c in enumerate(cells):
            text = "".join(c.get("source", ""))
            if c.get("cell_type") == "code" and text.startswith("%%tilekernel"):
                yield f"{nb.stem}-cell{i}", text.split("\n", 1)[1] if "\n" in text else ""
    for f in sorted((ROOT / "tests").rglob("*.py")):
        try:
            tree = ast.parse(f.read_text())
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "kernel" in node.value \
                    and "{" in node.value:
                digest = hashlib.sha1(node.value.encode()).hexdigest()[:10]
                yield f"{f.stem}-{digest}", node.value


def main(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    written = 0
    seen = set()
    for tag, text in _sources():
        if text in seen:
            continue
        seen.add(text)
        try:
            mod = tilenb.compile(text, backend="cpu")
        except Exception:
            continue
        for name, kern in mod.kernels.items():
            space = kern.tune_space
            names = sorted(space)
            combos = list(itertools.islice(itertools.product(*(space[n] for n in names)), MAX_VARIANTS))
            for combo in combos or [()]:
                tune = dict(zip(names, combo))
                vtag = "-".join(f"{k}{v}" for k, v in tune.items()) or "default"
                for arch in ARCHES:
                    try:
                        code = kern.cuda_source(arch=arch, **tune)
                    except Exception as e:   # what is refused is part of the corpus too
                        code = f"// {type(e).__name__}: {e}\n"
                    (out / f"{tag}.{name}.{vtag}.{arch or 'any'}.cu").write_text(code)
                    written += 1
    print(f"{written} CUDA sources written to {out}")
    return 0


def same(before: Path, after: Path) -> int:
    """0 when both corpora hold the same generated files up to their source tag, else 1."""
    import collections

    def load(d: Path):
        return collections.Counter((f.name.split(".", 1)[1], hashlib.sha1(f.read_bytes()).hexdigest())
                                   for f in d.iterdir() if f.suffix == ".cu")
    a, b = load(before), load(after)
    for side, only in ((before, a - b), (after, b - a)):
        for (name, digest), n in sorted(only.items()):
            print(f"only in {side}: {name} ({digest[:10]}){f' x{n}' if n > 1 else ''}")
    print(f"{sum(a.values())} and {sum(b.values())} files; "
          f"{'the same generated CUDA' if a == b else 'they differ'}")
    return 0 if a == b else 1


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--same":
        sys.exit(same(Path(sys.argv[2]), Path(sys.argv[3])))
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1])))
