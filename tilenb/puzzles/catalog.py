"""The puzzles: each a task in a learner's words, the kernel's signature, a stub, the numpy
reference, the shapes it is checked at and the figures it should reach.

Guarantees: `PUZZLES` is in rising difficulty and every name is unique; each puzzle's signature
is the header of its solution in `solutions.tile` (a test holds them together); every shape of
every puzzle is random-input data whose extents are not multiples of the tile sizes the
signature suggests, and at least one shape is smaller than one tile. References compute in
float64 (or exactly, for integer results) from the same inputs the kernel gets.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Dict, Tuple

import numpy as np

# ---- goals ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Goal:
    """A figure the solution should reach, checked against `kernel.analysis()` or the source.

    kind:
      "barriers"        at most `value` barriers placed by the compiler (analysis.barriers)
      "coalesced"       every copy between a tensor and a tile touches no more 32-byte sectors
                        than the bytes it moves need (CopyPlan.sectors <= ideal_sectors)
      "sectors"         every copy of 4-byte elements moves 16-byte vectors: `value` sectors
                        per full warp request (32 lanes x 16 bytes = 16 sectors)
      "no_bank_conflicts"  every copy's shared-memory side takes its ideal wavefronts
      "shared_bytes"    the shared-memory footprint is at most `value` bytes
      "uses"            the kernel uses each construct named in `names` (tilenb.puzzles.coverage
                        names: "barrier", "atomic_add", "@cluster", ...)
    text: the goal as the learner reads it ("one barrier")."""
    kind: str
    text: str
    value: int = 0
    names: Tuple[str, ...] = ()


def barriers(n: int) -> Goal:
    words = {0: "no barrier", 1: "one barrier", 2: "two barriers", 3: "three barriers", 4: "four barriers"}
    return Goal("barriers", f"at most {words.get(n, f'{n} barriers')} placed by the compiler"
                if n else "no barrier placed by the compiler", n)


COALESCED = Goal("coalesced", "coalesced copies: no more sectors than the bytes need")
SECTORS16 = Goal("sectors", "16 sectors per warp: every lane moves a 16-byte vector", 16)
NO_CONFLICTS = Goal("no_bank_conflicts", "no bank conflicts: every copy at its ideal wavefronts")


def uses(*names: str) -> Goal:
    return Goal("uses", "uses " + ", ".join(f"`{n}`" for n in names), 0, tuple(names))


def shared_at_most(nbytes: int) -> Goal:
    return Goal("shared_bytes", f"at most {nbytes} bytes of shared memory", nbytes)


# ---- puzzles --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Puzzle:
    """One exercise.

    signature: the attributes and kernel header the learner's kernel keeps (`{` excluded);
    stub: the signature with an empty body holding `hint`; shapes: the runtime extents it is
    checked at (dicts of dimension -> extent); make(rng, dims) -> the input arrays and scalars by
    parameter name; reference(inputs, dims) -> the expected output arrays by parameter name
    (float64 or exact integers); outputs: output parameter -> element type ("f32", "i32", ...);
    zeroed: outputs that start as zeros (atomics add into them) instead of a poison value;
    rtol/atol: tolerances of the comparison (per output where a dict)."""
    number: int
    name: str
    title: str
    task: str
    signature: str
    hint: str
    shapes: Tuple[Dict[str, int], ...]
    make: Callable[[np.random.Generator, Dict[str, int]], Dict[str, object]]
    reference: Callable[[Dict[str, object], Dict[str, int]], Dict[str, np.ndarray]]
    outputs: Dict[str, str]
    goals: Tuple[Goal, ...] = ()
    zeroed: Tuple[str, ...] = ()
    rtol: float = 1e-5
    atol: float = 1e-5
    teaches: str = ""
    extra_tol: Dict[str, Tuple[float, float]] = field(default_factory=dict)

    @property
    def kernel(self) -> str:
        """The kernel's name (from the signature)."""
        return re.search(r"\bkernel\s+([A-Za-z_]\w*)", self.signature).group(1)

    @property
    def stub(self) -> str:
        lines = "\n".join(f"  // {h}" for h in self.hint.split("\n"))
        return f"{self.signature} {{\n{lines}\n}}\n"

    def case(self, shape_index: int):
        """(dims, inputs, expected) of one shape: the random inputs the checker gives the kernel
        there (numpy's default generator seeded with number * 100 + shape_index) and numpy's
        outputs for them."""
        dims = dict(self.shapes[shape_index])
        inputs = self.make(np.random.default_rng(self.number * 100 + shape_index), dims)
        return dims, inputs, self.reference(inputs, dims)

    def tolerance(self, output: str) -> Tuple[float, float]:
        return self.extra_tol.get(output, (self.rtol, self.atol))


def _f32(rng, *shape, scale=1.0, shift=0.0):
    return (rng.standard_normal(shape) * scale + shift).astype(np.float32)


def _f64(a):
    return np.asarray(a, dtype=np.float64)


def _softmax(x):
    x = _f64(x)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _gelu(x):
    x = _f64(x)
    return 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


def _layer_norm(x, g, b, eps):
    x = _f64(x)
    mu = x.mean(axis=1, keepdims=True)
    d = x - mu
    return d / np.sqrt((d * d).mean(axis=1, keepdims=True) + eps) * _f64(g) + _f64(b)


def _rope(x):
    x = _f64(x)
    L = x.shape[0]
    pos = np.arange(L, dtype=np.float64)[:, None]
    freq = 2.0 ** (np.arange(32, dtype=np.float64) * (-np.log2(10000.0) / 32.0))
    th = pos * freq[None, :]
    x1, x2 = x[:, :32], x[:, 32:]
    return np.concatenate([x1 * np.cos(th) - x2 * np.sin(th), x1 * np.sin(th) + x2 * np.cos(th)], axis=1)


def _attention(q, k, v, scale):
    s = _f64(q) @ _f64(k).T * scale
    return _softmax(s) @ _f64(v)


def _scan_blocks(x, block):
    x = np.asarray(x, dtype=np.int64)
    out = np.empty_like(x)
    for b in range(0, len(x), block):
        out[b:b + block] = np.cumsum(x[b:b + block])
    return out.astype(np.int32)


def _first_negative(x):
    neg = np.asarray(x) < 0
    idx = np.where(neg.any(axis=1), neg.argmax(axis=1), -1)
    return idx.astype(np.int32)[:, None]


def _quarters_and_noise(rng, m, n):
    """Values of which about half are whole multiples of 1/8 (so 4x is sometimes whole)."""
    grid = np.round(rng.standard_normal((m, n)) * 24.0) / 8.0
    noise = rng.standard_normal((m, n)) * 0.01 * (rng.random((m, n)) < 0.5)
    return (grid + noise).astype(np.float32)


def _bf16_error(x):
    import ml_dtypes
    return _f64(x.astype(ml_dtypes.bfloat16).astype(np.float32)) - _f64(x)


PUZZLES: Tuple[Puzzle, ...] = (
    Puzzle(
        0, "warm_up", "Warm-up: double every element",
        "Write `Y[i] = 2 * X[i]`. Each CTA of 256 threads takes 1024 consecutive elements: the slice "
        "`X[i :+ 1024]` of the CTA's part is a tile, `2.0 * tile` doubles it, and assigning a tile to "
        "a slice of `Y` stores it. (This one is solved in the notebook, as an example.)",
        "@launch(256)\n@grid(cdiv(N, 1024))\nkernel warm_up(X: tensor<f32>[N], Y: tensor<f32>[N])",
        "let i = ctx.block.x * 1024, then one store",
        ({"N": 4}, {"N": 100}, {"N": 2052}),
        lambda rng, d: {"X": _f32(rng, d["N"])},
        lambda i, d: {"Y": 2.0 * _f64(i["X"])},
        {"Y": "f32"}, (SECTORS16,), teaches="tensor slices, one tile statement"),
    Puzzle(
        1, "add_ten", "Map: add ten to every element",
        "Write `Y[i] = X[i] + 10` for every element of a vector. Each CTA of 256 threads handles "
        "1024 consecutive elements with one tile statement: slice `X` from the CTA's first element, "
        "add, and store the slice of `Y`. The vector's length is not a multiple of 1024; the slices "
        "that run past the end are masked for you.",
        "@launch(256)\n@grid(cdiv(N, 1024))\nkernel add_ten(X: tensor<f32>[N], Y: tensor<f32>[N])",
        "this CTA's first element is ctx.block.x * 1024; a slice is X[start :+ length]",
        ({"N": 4}, {"N": 100}, {"N": 2052}),
        lambda rng, d: {"X": _f32(rng, d["N"])},
        lambda i, d: {"Y": _f64(i["X"]) + 10.0},
        {"Y": "f32"}, (SECTORS16,), teaches="tensor slices `:+`, tile statements, masking at the end"),
    Puzzle(
        2, "broadcast_add", "Broadcast: a column plus a row",
        "`A` is a column of M numbers, `B` a row of N; write `C[i, j] = A[i] + B[j]`. Each CTA owns a "
        "block of 16 rows by 64 columns of `C` (`ctx.block.y` picks the rows, `ctx.block.x` the "
        "columns). A `[16, 1]` tile plus a `[1, 64]` tile broadcasts to `[16, 64]`, as in numpy.",
        "@launch(256)\n@grid(cdiv(N, 64), cdiv(M, 16))\n"
        "kernel broadcast_add(A: tensor<f32>[M, 1], B: tensor<f32>[1, N], C: tensor<f32>[M, N])",
        "rows ctx.block.y * 16, columns ctx.block.x * 64; `:` takes a whole dimension of length 1",
        ({"M": 1, "N": 4}, {"M": 5, "N": 60}, {"M": 37, "N": 132}, {"M": 37, "N": 260}),
        lambda rng, d: {"A": _f32(rng, d["M"], 1), "B": _f32(rng, 1, d["N"])},
        lambda i, d: {"C": _f64(i["A"]) + _f64(i["B"])},
        {"C": "f32"}, (COALESCED,), teaches="2-D grids, broadcasting"),
    Puzzle(
        3, "activations", "Partial tiles: two activations",
        "Each row of `X` has N <= 128 elements, fewer than the 128 columns of the tile. Write "
        "the leaky ReLU `L = x if x > 0 else 0.1 * x` and the tanh form of GELU "
        "`G = 0.5 x (1 + tanh(0.7978845608 (x + 0.044715 x^3)))`, 8 rows per CTA. Use one 128-wide "
        "slice for the whole row: the columns past N are invalid and are never stored. `where(c, a, b)` "
        "picks elementwise; a `fn` can hold the GELU formula.",
        "@launch(256)\n@grid(cdiv(M, 8))\n"
        "kernel activations(X: tensor<f32>[M, N], L: tensor<f32>[M, N], G: tensor<f32>[M, N])",
        "let x = X[r :+ 8, 0 :+ 128] views 8 rows; where(x > 0.0, x, 0.1 * x) is the leaky ReLU",
        ({"M": 1, "N": 4}, {"M": 13, "N": 100}, {"M": 70, "N": 124}),
        lambda rng, d: {"X": _f32(rng, d["M"], d["N"], scale=2.0)},
        lambda i, d: {"L": np.where(_f64(i["X"]) > 0, _f64(i["X"]), 0.1 * _f64(i["X"])), "G": _gelu(i["X"])},
        {"L": "f32", "G": "f32"}, (COALESCED,), teaches="valid regions, `where`, `tanh`, `fn`"),
    Puzzle(
        4, "classify", "Per-thread code: one element per thread",
        "Write `C[i] = -1` where `X[i] < lo`, `1` where `X[i] > hi`, and `0` otherwise, with one "
        "thread per element: `ctx.block.x * ctx.threads + ctx.thread` is this thread's element, and "
        "single-element subscripts (`X[i]`) are read and written by each thread on its own. A thread "
        "whose element is past the end must not touch memory (`return` ends it).",
        "@launch(128)\n@grid(cdiv(N, 128))\n"
        "kernel classify(X: tensor<f32>[N], C: tensor<i32>[N], lo: f32, hi: f32)",
        "if i >= N { return }, then if / else if / else on X[i]",
        ({"N": 4}, {"N": 100}, {"N": 300}),
        lambda rng, d: {"X": _f32(rng, d["N"]), "lo": np.float32(-0.5), "hi": np.float32(0.7)},
        lambda i, d: {"C": np.where(i["X"] < i["lo"], -1, np.where(i["X"] > i["hi"], 1, 0)).astype(np.int32)},
        {"C": "i32"}, (), teaches="ctx.thread, scalar code, `if`/`else if`/`else`, `return`"),
    Puzzle(
        5, "moving_average", "A halo: a 3-point moving average",
        "Write `Y[i] = (X[i - 1] + X[i] + X[i + 1]) / 3`, where `X` outside the vector counts as 0 "
        "(zero padding). Each CTA writes 256 outputs and needs 258 inputs: its 256 and one more on "
        "each side, the halo. Careful: a slice that starts at -1 is invalid there, and an invalid "
        "value is never stored (spec section 8): `Y[0]` must still be written.",
        "@launch(256)\n@grid(cdiv(N, 256))\nkernel moving_average(X: tensor<f32>[N], Y: tensor<f32>[N])",
        "a tile filled with 0.0 stays valid when you store a slice into a window of it: h[:] = X[...]",
        ({"N": 4}, {"N": 100}, {"N": 1000}),
        lambda rng, d: {"X": _f32(rng, d["N"])},
        lambda i, d: {"Y": np.convolve(np.pad(_f64(i["X"]), 1), np.ones(3) / 3.0, mode="valid")},
        {"Y": "f32"}, (), teaches="halos, filled tiles, window stores"),
    Puzzle(
        6, "row_sums", "Row reduction: the sum of each row",
        "Write `S[r, 0] = X[r, 0] + ... + X[r, N - 1]` for rows of at most 256 elements, 4 rows "
        "per CTA. `rowsum` of a `[4, 256]` tile is a `[4, 1]` tile; it skips the invalid columns past N.",
        "@launch(256)\n@grid(cdiv(M, 4))\nkernel row_sums(X: tensor<f32>[M, N], S: tensor<f32>[M, 1])",
        "copy 4 rows into a tile, then store rowsum of it",
        ({"M": 1, "N": 4}, {"M": 9, "N": 100}, {"M": 30, "N": 252}),
        lambda rng, d: {"X": _f32(rng, d["M"], d["N"])},
        lambda i, d: {"S": _f64(i["X"]).sum(axis=1, keepdims=True)},
        {"S": "f32"}, (barriers(1),), teaches="`rowsum`, barriers placed by the compiler"),
    Puzzle(
        7, "column_range", "Column reduction with a loop: the spread of each column",
        "Write `R[0, j] = max over rows of X[:, j] - min over rows of X[:, j]`. There are more rows "
        "than a tile holds, so each CTA owns 64 columns and walks down them 32 rows at a time, "
        "keeping a running maximum and minimum (`colmax`, `colmin` give `[1, 64]`).",
        "@launch(256)\n@grid(cdiv(N, 64))\nkernel column_range(X: tensor<f32>[M, N], R: tensor<f32>[1, N])",
        "start from tiles filled with -1.0e30 and 1.0e30; for r in range(0, M, 32) { ... }",
        ({"M": 1, "N": 4}, {"M": 5, "N": 100}, {"M": 100, "N": 68}),
        lambda rng, d: {"X": _f32(rng, d["M"], d["N"])},
        lambda i, d: {"R": (_f64(i["X"]).max(axis=0) - _f64(i["X"]).min(axis=0))[None, :]},
        {"R": "f32"}, (COALESCED,), teaches="`for`, `colmax`, `colmin`, loop-carried tiles"),
    Puzzle(
        8, "grid_stride", "A fixed grid: loops that stride by the grid",
        "Write `Y = 2 * X` for a batch of matrices, with a grid of only 2 x 2 x 2 CTAs whatever the "
        "sizes. Each CTA starts at its own block (8 rows by 64 columns of batch `ctx.block.z`) and "
        "strides by the grid (`ctx.grid.x`, `ctx.grid.y`, `ctx.grid.z` blocks) until it runs off the "
        "end. A `for` step must be a constant, so stride with `while` loops.",
        "@launch(128)\n@grid(2, 2, 2)\nkernel grid_stride(X: tensor<f32>[B, M, N], Y: tensor<f32>[B, M, N])",
        "var b = ctx.block.z; while b < B { ...; b += ctx.grid.z }, and the same for rows and columns",
        ({"B": 1, "M": 1, "N": 4}, {"B": 3, "M": 20, "N": 68}, {"B": 5, "M": 9, "N": 200}),
        lambda rng, d: {"X": _f32(rng, d["B"], d["M"], d["N"])},
        lambda i, d: {"Y": 2.0 * _f64(i["X"])},
        {"Y": "f32"}, (), teaches="`while`, 3-D grids, `ctx.grid.*`"),
    Puzzle(
        9, "sum_and_max", "A reduction across CTAs: the sum and the largest magnitude",
        "Write `Out[0] = sum of X` and `Out[1] = max of |X|` over the whole vector, which many CTAs "
        "share (1024 elements each). A CTA reduces its own part to a `[1]` tile with `rowsum` / "
        "`rowmax`; then it adds that tile into the one-element slice `Out[0 :+ 1]` with `atomic_add` "
        "(and `atomic_max` into `Out[1 :+ 1]`), since no barrier orders different CTAs. Given a slice, "
        "an atomic is a tile statement: one line, and each element of the slice is updated once, by "
        "the thread that owns it. `Out` starts as zeros.",
        "@launch(256)\n@grid(cdiv(N, 1024))\nkernel sum_and_max(X: tensor<f32>[N], Out: tensor<f32>[2])",
        "atomic_add(Out[0 :+ 1], rowsum(x)) adds a [1] tile into a [1] slice; atomic_add(Out[0], v) would "
        "add once per thread",
        ({"N": 4}, {"N": 100}, {"N": 5000}),
        lambda rng, d: {"X": _f32(rng, d["N"])},
        lambda i, d: {"Out": np.array([_f64(i["X"]).sum(), np.abs(_f64(i["X"])).max()])},
        {"Out": "f32"}, (uses("atomic_add", "atomic_max"),), zeroed=("Out",), rtol=1e-5, atol=1e-4,
        teaches="tile atomics: `atomic_add`, `atomic_max` into a tensor slice; `abs`"),
    Puzzle(
        10, "histogram", "Per-thread loops: a histogram",
        "Count the values of `X` that fall in each of 16 equal bins of [0, 1): `H[b]` is the number of "
        "x with `b / 16 <= x < (b + 1) / 16`; values outside [0, 1) are skipped. The grid is fixed at "
        "4 CTAs of 128 threads: thread `t` of CTA `c` takes elements `c * 128 + t`, then 512 further "
        "on, and so on. Many threads hit the same bin: `atomic_add(H[bin], 1)`. `H` starts as zeros.",
        "@launch(128)\n@grid(4)\nkernel histogram(X: tensor<f32>[N], H: tensor<i32>[16])",
        "for i in range(ctx.block.x * 128 + ctx.thread, N, 512) { ... continue ... }; floor(x * 16.0)",
        ({"N": 4}, {"N": 100}, {"N": 3000}),
        lambda rng, d: {"X": rng.uniform(-0.2, 1.2, d["N"]).astype(np.float32)},
        lambda i, d: {"H": np.histogram(i["X"][(i["X"] >= 0) & (i["X"] < 1)],
                                        bins=16, range=(0.0, 1.0))[0].astype(np.int32)},
        {"H": "i32"}, (uses("atomic_add", "continue"),), zeroed=("H",),
        teaches="per-thread `for`, `continue`, `floor`, conversions to `i32`"),
    Puzzle(
        11, "first_negative", "Per-thread search: the first negative element of each row",
        "One thread per row: write `F[r, 0]` = the column of the first negative element of row r, or "
        "-1 if it has none. Walk the row with a `for` loop and leave it with `break` at the first hit.",
        "@launch(64)\n@grid(cdiv(M, 64))\nkernel first_negative(X: tensor<f32>[M, N], F: tensor<i32>[M, 1])",
        "var found = -1; for j in range(0, N) { if X[row, j] < 0.0 { found = i32(j); break } }",
        ({"M": 1, "N": 4}, {"M": 50, "N": 20}, {"M": 70, "N": 8}),
        lambda rng, d: {"X": (rng.standard_normal((d["M"], d["N"])) + 1.2).astype(np.float32)},
        lambda i, d: {"F": _first_negative(i["X"])},
        {"F": "i32"}, (uses("break"),), teaches="`break`, index to integer conversion"),
    Puzzle(
        12, "pack_halves", "Bits: pack two 16-bit codes into one 32-bit word",
        "`A` and `B` hold unsigned 16-bit codes; write `P = A | (B << 16)` as unsigned 32-bit words, and "
        "`S = A + B` wrapped to 16 bits (the low 16 bits of the sum). Unsigned types are storage only (no "
        "arithmetic): convert to a signed type first (`i64(...)`, `i32(...)`), compute, and convert the "
        "result back (`u32(...)`, `u16(...)`: integer conversions keep the low bits).",
        "@launch(256)\n@grid(cdiv(N, 1024))\n"
        "kernel pack_halves(A: tensor<u16>[N], B: tensor<u16>[N], P: tensor<u32>[N], S: tensor<u16>[N])",
        "i64(A[i :+ 1024]) converts a tile; << and | work on integers",
        ({"N": 4}, {"N": 100}, {"N": 2052}),
        lambda rng, d: {"A": rng.integers(0, 1 << 16, d["N"]).astype(np.uint16),
                        "B": rng.integers(0, 1 << 16, d["N"]).astype(np.uint16)},
        lambda i, d: {"P": (i["A"].astype(np.uint32) | (i["B"].astype(np.uint32) << np.uint32(16))),
                      "S": (i["A"].astype(np.uint32) + i["B"].astype(np.uint32)).astype(np.uint16)},
        {"P": "u32", "S": "u16"}, (COALESCED,), teaches="`u16`, `u32`, `i32`, `i64`, shifts and bitwise operators"),
    Puzzle(
        13, "rounding", "Conversions: what rounding does",
        "For rows of at most 64 elements (4 rows per CTA) write four results of each element x: "
        "`H = f16(x)` (stored as f16), `E = f32(bf16(x)) - x` (the error of rounding to bf16), "
        "`Q = ceil(4x) / 4 - floor(4x) / 4` (1/4 unless 4x is a whole number), and the row sums "
        "`S` accumulated in f64.",
        "@launch(128)\n@grid(cdiv(M, 4))\n"
        "kernel rounding(X: tensor<f32>[M, N], H: tensor<f16>[M, N], E: tensor<f32>[M, N],\n"
        "                Q: tensor<f32>[M, N], S: tensor<f64>[M, 1])",
        "f16(x), bf16(x), f32(...), f64(x) convert elementwise; rowsum(f64(x)) sums in f64",
        ({"M": 1, "N": 4}, {"M": 9, "N": 36}, {"M": 30, "N": 60}),
        lambda rng, d: {"X": _quarters_and_noise(rng, d["M"], d["N"])},
        lambda i, d: {"H": i["X"].astype(np.float16).astype(np.float64), "E": _bf16_error(i["X"]),
                      "Q": np.ceil(4 * _f64(i["X"])) / 4 - np.floor(4 * _f64(i["X"])) / 4,
                      "S": _f64(i["X"]).sum(axis=1, keepdims=True)},
        {"H": "f16", "E": "f32", "Q": "f32", "S": "f64"}, (),
        extra_tol={"H": (0.0, 0.0), "E": (0.0, 1e-7), "Q": (0.0, 1e-7), "S": (1e-12, 1e-12)},
        teaches="conversions `f16`, `bf16`, `f32`, `f64`; `ceil`, `floor`"),
    Puzzle(
        14, "block_scan", "A scan with barrier(): prefix sums of each block",
        "Write the inclusive prefix sums of each block of 128 elements: `Y[i]` is the sum of "
        "`X[b .. i]`, where b is the first element of i's block. One thread per element, holding its "
        "running value, in 7 rounds: in round k every thread adds the value 2^k places to its left, "
        "through a shared tile. Threads read elements other threads wrote, so you place `barrier()` "
        "yourself: before anyone reads what others wrote, and before anyone overwrites what others "
        "still read. The checker runs your kernel with `debug=True`, which reports a race.",
        "@launch(128)\n@grid(cdiv(N, 128))\nkernel block_scan(X: tensor<i32>[N], Y: tensor<i32>[N])",
        "var buf: tile<i32>[128]; buf[t] = v; barrier(); while step < 128 { ... }",
        ({"N": 4}, {"N": 100}, {"N": 300}),
        lambda rng, d: {"X": rng.integers(-50, 50, d["N"]).astype(np.int32)},
        lambda i, d: {"Y": _scan_blocks(i["X"], 128)},
        {"Y": "i32"}, (uses("barrier"),), teaches="`barrier()`, per-thread tile elements, races"),
    Puzzle(
        15, "transpose_f16", "A transpose without bank conflicts",
        "Write `Y = X^T` for an f16 matrix. Each CTA moves a block of 64 rows by 32 columns through "
        "a shared tile, so that both the read of `X` and the write of `Y` go along rows (coalesced). "
        "The write reads the tile down its columns: with 32 f16 per row, the rows of a column share "
        "banks, and the lanes of a warp queue up. Lay the tile out so they do not (the thread map's "
        "fix says how), and reach the ideal wavefronts.",
        "@launch(256)\n@grid(cdiv(N, 32), cdiv(M, 64))\n"
        "kernel transpose_f16(X: tensor<f16>[M, N], Y: tensor<f16>[N, M])",
        "var t: tile<f16>[64, 32] = X[...] works but conflicts; a window t[:, 0 :+ 32] of a wider tile is still [64, 32]",
        ({"M": 4, "N": 4}, {"M": 68, "N": 36}, {"M": 100, "N": 132}),
        lambda rng, d: {"X": _f32(rng, d["M"], d["N"]).astype(np.float16)},
        lambda i, d: {"Y": _f64(i["X"]).T},
        {"Y": "f16"}, (COALESCED, NO_CONFLICTS), rtol=0.0, atol=0.0,
        teaches="`transpose`, bank conflicts, padded tiles"),
    Puzzle(
        16, "matmul", "A matrix product with a K loop",
        "Write `C = A @ B`. Each CTA computes a 32 x 32 block of C: it walks the inner dimension "
        "K 16 at a time, copying a 32 x 16 block of A and a 16 x 32 block of B per turn and "
        "accumulating `dot` of them into a tile that starts at 0.",
        "@launch(128)\n@grid(cdiv(N, 32), cdiv(M, 32))\n"
        "kernel matmul(A: tensor<f32>[M, K], B: tensor<f32>[K, N], C: tensor<f32>[M, N])",
        "var acc: tile<f32>[32, 32] = 0.0; for k in range(0, K, 16) { ... acc += dot(a, b) }",
        ({"M": 1, "K": 4, "N": 4}, {"M": 20, "K": 44, "N": 36}, {"M": 70, "K": 52, "N": 100}),
        lambda rng, d: {"A": _f32(rng, d["M"], d["K"]), "B": _f32(rng, d["K"], d["N"])},
        lambda i, d: {"C": _f64(i["A"]) @ _f64(i["B"])},
        {"C": "f32"}, (barriers(2), COALESCED, shared_at_most(8192)), rtol=1e-4, atol=1e-4,
        teaches="`dot`, loops over K, loop-carried barriers"),
    Puzzle(
        17, "softmax", "Softmax of short rows",
        "Write the softmax of each row, `Y[r, j] = exp(X[r, j] - m) / sum_k exp(X[r, k] - m)` with "
        "`m` the row's maximum, for rows of at most 256 elements, 4 rows per CTA.",
        "@launch(256)\n@grid(cdiv(M, 4))\nkernel softmax(X: tensor<f32>[M, N], Y: tensor<f32>[M, N])",
        "rowmax and rowsum give [4, 1] tiles that broadcast against [4, 256]",
        ({"M": 1, "N": 4}, {"M": 9, "N": 100}, {"M": 30, "N": 252}),
        lambda rng, d: {"X": _f32(rng, d["M"], d["N"], scale=3.0)},
        lambda i, d: {"Y": _softmax(i["X"])},
        {"Y": "f32"}, (barriers(2),), teaches="`exp`, `rowmax`, `rowsum`, masking in reductions"),
    Puzzle(
        18, "log_softmax", "Log-softmax of rows longer than a tile",
        "Write `Y[r, j] = X[r, j] - m - log(sum_k exp(X[r, k] - m))` for rows of any length (here up "
        "to 1100 elements) with one CTA per row and tiles of 256 columns. One tile no longer holds a "
        "row: loop over the row one tile at a time, keeping the running maximum m and the running sum l of "
        "`exp(x - m)` (rescale l by `exp(m_old - m_new)` when the maximum grows), then loop again to "
        "write. A tile narrower than the row silently leaves the rest unwritten: the checker says so.",
        "@launch(256)\n@grid(M)\nkernel log_softmax(X: tensor<f32>[M, N], Y: tensor<f32>[M, N])",
        "var m: tile<f32>[1, 1] = -1.0e30; var l: tile<f32>[1, 1] = 0.0; for c in range(0, N, 256) { ... }",
        ({"M": 1, "N": 4}, {"M": 3, "N": 1100}, {"M": 10, "N": 300}),
        lambda rng, d: {"X": _f32(rng, d["M"], d["N"], scale=3.0)},
        lambda i, d: {"Y": np.log(_softmax(i["X"]))},
        {"Y": "f32"}, (), rtol=1e-5, atol=1e-4, teaches="online softmax, `log`, loops over a row"),
    Puzzle(
        19, "layer_norm", "Layer norm",
        "Write `Y = (x - mean) / sqrt(var + eps) * G + Bias` for each row x of at most 256 elements, "
        "with mean and var (the mean of squared deviations) over the row's N elements, 2 rows per "
        "CTA. `f32(N)` converts the row length; a statement function (`fn name(x, eps) { ... }`) "
        "can hold the normalization and change the tile it is given.",
        "@launch(256)\n@grid(cdiv(M, 2))\n"
        "kernel layer_norm(X: tensor<f32>[M, N], G: tensor<f32>[N], Bias: tensor<f32>[N], Y: tensor<f32>[M, N], eps: f32)",
        "mean = rowsum(x) / f32(N); the invalid columns are skipped by rowsum, and by the store",
        ({"M": 1, "N": 4}, {"M": 7, "N": 100}, {"M": 20, "N": 252}),
        lambda rng, d: {"X": _f32(rng, d["M"], d["N"], scale=2.0, shift=1.0), "G": _f32(rng, d["N"]),
                        "Bias": _f32(rng, d["N"]), "eps": np.float32(1e-5)},
        lambda i, d: {"Y": _layer_norm(i["X"], i["G"], i["Bias"], float(i["eps"]))},
        {"Y": "f32"}, (), rtol=1e-4, atol=1e-4, teaches="`sqrt`, statement functions, `f32(N)`"),
    Puzzle(
        20, "rope", "Rotary embedding: per-thread tiles, then tile code",
        "Rotate each row of `X` (64 features: two halves x1, x2 of 32) by angles that depend on the "
        "row's position p and the pair j: `theta = p * 2^(-j log2(10000) / 32)`, "
        "`Y = [x1 cos - x2 sin, x1 sin + x2 cos]`. Compute the angles' cosines and sines into two "
        "[16, 32] tiles with per-thread code (each thread a few elements), then rotate with tile "
        "statements. You write no barrier: the compiler cannot tell which thread wrote which element "
        "of a tile in per-thread code, so it places one before the first tile statement that reads them "
        "(the barriers view shows it).",
        "@launch(128)\n@grid(cdiv(L, 16))\nkernel rope(X: tensor<f32>[L, 64], Y: tensor<f32>[L, 64])",
        "for e in range(ctx.thread, 512, 128) { let i = e / 32; let j = e % 32; ... cs[i, j] = cos(theta) }",
        ({"L": 1}, {"L": 20}, {"L": 45}),
        lambda rng, d: {"X": _f32(rng, d["L"], 64)},
        lambda i, d: {"Y": _rope(i["X"])},
        {"Y": "f32"}, (barriers(1),), rtol=1e-4, atol=1e-4,
        teaches="`sin`, `cos`, `exp2`, `log2`, per-thread code feeding tile code"),
    Puzzle(
        21, "cluster_normalize", "A row held by a cluster of CTAs",
        "Each row has 2048 elements; a cluster of 4 CTAs holds one row, 512 columns per CTA "
        "(`ctx.cluster.x` is the row, `ctx.cluster.rank` the CTA's quarter). Write "
        "`Y = (x - mean) / (max - min)` over the whole row. Each CTA reduces its quarter; "
        "`cluster_sum`, `cluster_max` and `cluster_min` combine a tile across the cluster.",
        "@launch(128)\n@cluster(4)\n@grid(M * 4)\n"
        "kernel cluster_normalize(X: tensor<f32>[M, 2048], Y: tensor<f32>[M, 2048])",
        "var s = rowsum(x); cluster_sum(s) leaves the whole row's sum in every CTA",
        ({"M": 1}, {"M": 3}, {"M": 5}),
        lambda rng, d: {"X": _f32(rng, d["M"], 2048)},
        lambda i, d: {"Y": (_f64(i["X"]) - _f64(i["X"]).mean(axis=1, keepdims=True))
                      / (_f64(i["X"]).max(axis=1, keepdims=True) - _f64(i["X"]).min(axis=1, keepdims=True))},
        {"Y": "f32"}, (uses("@cluster", "cluster_sum", "cluster_max", "cluster_min"),), rtol=1e-4, atol=1e-5,
        teaches="`@cluster`, `cluster_sum`, `cluster_max`, `cluster_min`, `rowmin`"),
    Puzzle(
        22, "flash_attention", "A small flash attention",
        "Write `O = softmax(Q K^T * scale) V` for one head (32 features) without ever holding the "
        "whole score matrix: each CTA takes 16 queries and walks the keys 16 at a time, keeping the "
        "running row maximum m, the running sum l and the running output acc; when m grows, "
        "rescale l and acc by `exp(m_old - m_new)`. `dot_t(a, b)` is `a` times `b` transposed.",
        "@launch(128)\n@grid(cdiv(Lq, 16))\n"
        "kernel flash_attention(Q: tensor<f32>[Lq, 32], K: tensor<f32>[Lk, 32], V: tensor<f32>[Lk, 32],\n"
        "                       O: tensor<f32>[Lq, 32], scale: f32)",
        "s = dot_t(q, K[kt :+ 16, :]) * scale is [16, 16]; acc = acc * rescale + dot(p, V[kt :+ 16, :])",
        ({"Lq": 1, "Lk": 1}, {"Lq": 20, "Lk": 37}, {"Lq": 40, "Lk": 100}),
        lambda rng, d: {"Q": _f32(rng, d["Lq"], 32), "K": _f32(rng, d["Lk"], 32), "V": _f32(rng, d["Lk"], 32),
                        "scale": np.float32(1.0 / np.sqrt(32.0))},
        lambda i, d: {"O": _attention(i["Q"], i["K"], i["V"], float(i["scale"]))},
        {"O": "f32"}, (), rtol=1e-4, atol=1e-5, teaches="`dot_t`, online softmax, loop-carried tiles"),
)

BY_NAME: Dict[str, Puzzle] = {p.name: p for p in PUZZLES}


def get(name: str) -> Puzzle:
    """The puzzle of that name. Raises KeyError listing the names."""
    p = BY_NAME.get(name)
    if p is None:
        raise KeyError(f"no puzzle {name!r}; the puzzles are: {', '.join(BY_NAME)}")
    return p


def numbered(puzzle: Puzzle) -> str:
    return f"{puzzle.number:02d} {puzzle.name}"

