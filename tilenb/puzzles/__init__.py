"""Puzzles for learning the tile language, and a checker that says what went wrong.

    from tilenb import puzzles
    puzzles.list()                       # the puzzles, in rising difficulty
    print(puzzles.get("add_ten").stub)   # the task's kernel signature with an empty body
    result = puzzles.check("add_ten", kernel_or_module_or_source)
    result.solved, result.status, print(result.report)

In a notebook, a check result shows its report and the compiler's views of the learner's kernel
(thread map, lifetimes, barriers). `notebooks/puzzles.ipynb` is the learner's notebook, built from
this package by `python -m tilenb.puzzles.notebook`; the solutions (`solutions.tile` here) stay
out of it.

Guarantees: `check` never raises (see `tilenb.puzzles.checker`); `PUZZLES` is ordered by
difficulty; `solutions()` compiles the solutions on the CPU backend (every one solves its
puzzle: CI checks it).
"""
from __future__ import annotations

from pathlib import Path

from .catalog import BY_NAME, PUZZLES, Goal, Puzzle, get  # noqa: F401
from .checker import CheckResult, check  # noqa: F401

SOLUTIONS = Path(__file__).with_name("solutions.tile")


def list() -> str:  # noqa: A001  (the learner's word)
    """One line per puzzle: number, name, title."""
    return "\n".join(f"{p.number:2d}  {p.name:18s} {p.title}" for p in PUZZLES)


def solutions(backend: str = "cpu"):
    """The solutions as one compiled module (kernels named as the puzzles' signatures)."""
    import tilenb
    return tilenb.compile(SOLUTIONS.read_text(encoding="utf-8"), backend=backend, filename="solutions.tile")
