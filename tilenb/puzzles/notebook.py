"""The learner's puzzle notebook, written from the puzzles themselves (one home: `catalog.py`).

    source() -> the notebook as percent-format text (the format of notebooks/src/*.py)

`notebooks/build_puzzles.py` executes it and saves `notebooks/puzzles.ipynb` with its outputs.

The pattern. Each puzzle is a markdown cell (task, goals, shapes, hint), a `%%tilekernel` cell
holding the stub (the signature and an empty body: it compiles, binds the kernel and shows no
view), and a check cell, `puzzles.check("name", kernel)`. The notebook ships with the stubs, so
every check cell reports "not solved yet" and raises nothing: the notebook runs top to bottom
(under nbval in CI, or Run All) before any puzzle is solved. A learner edits a stub cell, runs
it, then runs the check below it. The warm-up is solved in the notebook, once right and once
wrong, to show what a check says; the other solutions live in `tilenb/puzzles/solutions.tile`.

Guarantees: `source()` is a pure function of `PUZZLES`; its text has no solution but the
warm-up's.
"""
from __future__ import annotations

from .catalog import PUZZLES, Puzzle

INTRO = """\
# %% [markdown]
# # Puzzles
#
# Exercises in rising difficulty, from a map over a vector to a small flash attention. Each one
# gives a task, the kernel's signature and a stub to fill in. The check below each stub runs
# your kernel on the CPU reference executor with random inputs, at several sizes that are not
# multiples of the tile sizes (some smaller than one tile), compares every output with numpy,
# and says what is wrong in terms of your kernel: the first wrong element and the thread that
# wrote it, elements never written and why, races between threads, out-of-bounds accesses,
# and the figures the puzzle asks for (barriers, coalescing, bank conflicts). When your kernel
# is right it says so, and shows the compiler's views of your kernel: the thread map, the tile
# lifetimes and the barriers. On a GPU (a kernel compiled for the CUDA backend) it also runs
# there and shows the time.
#
# How to work: edit a stub cell, run it (it compiles your kernel; errors point at the line),
# then run the check cell below it. The language is defined in `docs/spec.md`: section 10
# lists the built-ins (`exp`, `rowsum`, `where`, `dot`, ...), section 8 what happens at the
# edges of a tensor. Before any puzzle is solved every check says "not solved yet".

# %%
%load_ext tilenb
import numpy as np
import tilenb
from tilenb import puzzles

print(puzzles.list())
"""

WARM_UP = """\
# %% [markdown]
# ## 0. Warm-up, solved: double every element
#
# {task}
#
# A solution: the CTA's first element is `ctx.block.x * 1024`, and one tile statement copies,
# doubles and stores 1024 elements. The last CTA's slice runs past the end of the vector; the
# elements outside are masked (never read, never written).

# %%
%%tilekernel --show none
{solution}

# %% [markdown]
# The check runs it at N = 4, 100 and 2052, compares with numpy, checks the goal (16-byte
# vectors: 16 sectors of 32 bytes per warp request), and shows the views of the kernel.

# %%
puzzles.check("warm_up", warm_up)

# %% [markdown]
# You can always run a kernel yourself, too: outputs are written in place, and `tilenb.verify`
# compares with numpy.

# %%
X = np.random.default_rng(0).standard_normal(3000).astype(np.float32)
Y = np.zeros_like(X)
warm_up(X, Y)                     # the grid comes from @grid
err = tilenb.verify(Y, 2 * X, what="warm_up at N=3000")

# %% [markdown]
# What a wrong answer looks like: here the slice of `X` starts one element late.

# %%
%%tilekernel --show none
{wrong}

# %%
puzzles.check("warm_up", warm_up)
"""

WARM_UP_SOLUTION = """\
@launch(256)
@grid(cdiv(N, 1024))
kernel warm_up(X: tensor<f32>[N], Y: tensor<f32>[N]) {
  let i = ctx.block.x * 1024
  Y[i :+ 1024] = 2.0 * X[i :+ 1024]
}"""

WARM_UP_WRONG = WARM_UP_SOLUTION.replace("X[i :+ 1024]", "X[i + 1 :+ 1024]")


def _shapes(p: Puzzle) -> str:
    return "; ".join(", ".join(f"{k} = {v}" for k, v in d.items()) for d in p.shapes)


def _cell(p: Puzzle) -> str:
    goals = "".join(f"\n# - {g.text}" for g in p.goals)
    goal_text = f"\n#\n# Goals:{goals}" if goals else ""
    stub = p.stub.rstrip("\n")
    return f"""\
# %% [markdown]
# ## {p.number}. {p.title}
#
# {p.task}
#
# Checked at: {_shapes(p)}.{goal_text}
#
# Hint: {p.hint}

# %%
%%tilekernel --show none
{stub}

# %%
puzzles.check("{p.name}", {p.kernel})
"""


def source() -> str:
    """The puzzle notebook as percent-format text."""
    warm = next(p for p in PUZZLES if p.name == "warm_up")
    parts = [INTRO, WARM_UP.format(task=warm.task, solution=WARM_UP_SOLUTION, wrong=WARM_UP_WRONG)]
    parts += [_cell(p) for p in PUZZLES if p.name != "warm_up"]
    parts.append("""\
# %% [markdown]
# ## Where next
#
# The tutorials (`notebooks/01_...` to `09_...`) explain each view the checks show. The
# solutions are in `tilenb/puzzles/solutions.tile`, for after you have tried.
""")
    return "\n".join(parts)
