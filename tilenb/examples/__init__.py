"""The tile programs the project ships, in one place: tests, benchmarks, the notebook fixture and
the command line read their kernel texts from here instead of keeping copies.

- `seed_kernels.tile`: the kernels of the language documents (`python -m tilenb check` checks
  it; the CPU and GPU tests run every kernel of it).
- `suite_kernels`: the kernels of the benchmark suite (bench/suite), written once per template
  and instantiated per element type, with float64 numpy references.

Guarantees: `source(stem)` is the text of `<stem>.tile` here, byte for byte; `kernel_source`
returns one kernel of a program with its attributes and the comment lines directly above it,
ending with the kernel's closing brace and a newline, byte-identical to that part of the file.
"""
from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED_KERNELS = HERE / "seed_kernels.tile"


def source(stem: str = "seed_kernels") -> str:
    """The text of the shipped program `<stem>.tile`. Raises FileNotFoundError for no such file."""
    return (HERE / f"{stem}.tile").read_text()


def kernel_block(text: str, name: str) -> str:
    """The part of the program `text` that defines kernel `name`: from the first line after the
    blank line above it (its comment and attributes) to its closing brace at column 0, with the
    newline after it. Raises ValueError when `text` defines no kernel `name`."""
    at = text.index(f"kernel {name}(")
    start = text.rfind("\n\n", 0, at) + 2
    end = text.find("\n}\n", at) + 3
    return text[start:end]


def kernel_source(name: str, stem: str = "seed_kernels") -> str:
    """One kernel of the shipped program `<stem>.tile` (see `kernel_block`), e.g.
    `kernel_source("rms_norm")`. Raises ValueError when the program has no such kernel."""
    return kernel_block(source(stem), name)
