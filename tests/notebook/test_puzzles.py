"""The puzzles (tilenb.puzzles): every solution solves its puzzle through the checker, every stub
is reported "not solved yet" without raising, the wrong answers a newcomer writes get a message
that names the mistake (an off-by-one window, a halo that loses its edges, a forgotten barrier in
the scan, a conflicting transpose, ...), the thread the checker names as a wrong element's owner
is the one the canonical partition gives, the learner's notebook is the build of the catalog,
and between the tutorials and the puzzles every construct of the language is executed."""
import json
import re
from pathlib import Path

import numpy as np
import pytest

import tilenb
from tilenb import puzzles
from tilenb.puzzles import coverage, notebook as puzzle_notebook
from tilenb.puzzles.checker import describe_set
from tilenb.verify import MARK

from support.notebooks import output_text, parse, saved_cells

ROOT = Path(__file__).resolve().parents[2]
NB = ROOT / "notebooks"
SOLUTIONS = puzzles.SOLUTIONS.read_text(encoding="utf-8")
NAMES = [p.name for p in puzzles.PUZZLES]


@pytest.fixture(scope="module")
def solved():
    return puzzles.solutions()


# ---- the catalog ------------------------------------------------------------------------------------
def test_at_least_fifteen_puzzles_in_order_with_unique_names():
    ps = puzzles.PUZZLES
    assert len([p for p in ps if p.name != "warm_up"]) >= 15
    assert [p.number for p in ps] == list(range(len(ps)))
    assert len(set(NAMES)) == len(NAMES)
    for p in ps:
        assert p.task and p.hint and p.title and p.outputs
        assert puzzles.get(p.name) is p


def test_each_solution_keeps_its_puzzles_signature():
    for p in puzzles.PUZZLES:
        assert p.signature + " {" in SOLUTIONS, f"{p.name}: solutions.tile does not start the kernel with its signature"


def test_shapes_are_awkward_and_some_smaller_than_a_tile():
    for p in puzzles.PUZZLES:
        assert len(p.shapes) >= 3, p.name
        for d in p.shapes:
            assert any(v % 16 for v in d.values()), f"{p.name} {d}: every extent a multiple of 16"
        assert any(all(v <= 8 for v in d.values()) for d in p.shapes), f"{p.name}: no shape smaller than a tile"


@pytest.mark.parametrize("name", NAMES)
def test_solution_solves_its_puzzle(name, solved):
    p = puzzles.get(name)
    r = puzzles.check(name, solved.kernels[p.kernel])
    assert r.status == "solved", r.report
    assert r.solved and r.report.startswith(f"puzzle {p.number} ({name}): solved")
    assert r.report.count(MARK) == len(p.shapes)
    assert all(g.met for g in r.goals) and len(r.goals) == len(p.goals)


@pytest.mark.parametrize("name", NAMES)
def test_stub_is_not_solved_yet_and_raises_nothing(name):
    p = puzzles.get(name)
    r = puzzles.check(name, p.stub)
    assert r.status == "not solved yet", r.report
    assert "not solved yet" in r.report and not r.solved


def test_reference_is_independent_of_the_kernel():
    # the checker compares with numpy computed from the inputs it passes: recompute one by hand
    dims, inputs, expected = puzzles.get("moving_average").case(1)
    x = np.concatenate([[0.0], inputs["X"].astype(np.float64), [0.0]])
    np.testing.assert_allclose(expected["Y"], (x[:-2] + x[1:-1] + x[2:]) / 3.0)


# ---- wrong answers: each gets a message naming its mistake --------------------------------------------
def _src(name, body):
    return puzzles.get(name).signature + " {\n" + body.strip("\n") + "\n}\n"


def _line_of(text, needle, nth=1):
    """1-based line of the nth line of `text` containing `needle`."""
    hits = [i + 1 for i, l in enumerate(text.split("\n")) if needle in l]
    return hits[nth - 1]


def test_off_by_one_window_is_named():
    src = _src("add_ten", """
  let i = ctx.block.x * 1024
  Y[i :+ 1024] = X[i + 1 :+ 1024] + 10.0""")
    r = puzzles.check("add_ten", src)
    assert r.status == "wrong"
    assert "Y is shifted by 1: an off-by-1 window" in r.summary
    # the last element has no X[i + 1] to read: named as never written, with the operand
    assert "Y[3]: this element was never written" in r.report
    line = _line_of(src, "X[i + 1 :+ 1024]")
    assert f"`X[i + 1 :+ 1024]` (line {line}) reaches X[4], outside X (shape [4])" in r.report


def test_halo_that_loses_its_edges_is_named():
    src = _src("moving_average", """
  let b = ctx.block.x * 256
  Y[b :+ 256] = (X[b - 1 :+ 256] + X[b :+ 256] + X[b + 1 :+ 256]) / 3.0""")
    r = puzzles.check("moving_average", src)
    assert r.status == "wrong"
    line = _line_of(src, "X[b - 1 :+ 256]")
    assert f"Y[0] and Y[3] never written: `X[b - 1 :+ 256]` (line {line}) reaches outside X" in r.summary
    assert "reaches X[-1], outside X" in r.report and "spec section 8" in r.report
    assert "zero padding" in r.report and "h[:] = X[...]" in r.report


def test_halo_assigned_whole_over_a_filled_tile_is_named():
    src = _src("moving_average", """
  let b = ctx.block.x * 256
  var h: tile<f32>[258] = 0.0
  h = X[b - 1 :+ 258]
  Y[b :+ 256] = (h[0 :+ 256] + h[1 :+ 256] + h[2 :+ 256]) / 3.0""")
    r = puzzles.check("moving_average", src)
    assert r.status == "wrong"
    line = _line_of(src, "h = X[")
    assert f"`h = X[b - 1 :+ 258]` (line {line}) gave tile `h` the valid region" in r.summary
    assert "`h[:] = ...`" in r.report


def _scan_without_a_barrier(which):
    """block_scan's solution with one of its loop's two barriers left out, the one after the read
    `add = buf[t - step]` (`which="read"`) or after the write `buf[t] = v` ("write"): the source
    and the lines of that read and write."""
    sig = puzzles.get("block_scan").signature + " {\n"
    lines = SOLUTIONS[SOLUTIONS.index(sig) + len(sig):].split("\n}\n", 1)[0].split("\n")
    barriers = [i for i, l in enumerate(lines) if l.strip() == "barrier()"]
    assert len(barriers) == 3, "block_scan's solution: one barrier before the loop, two in it"
    del lines[barriers[1 if which == "read" else 2]]
    src = _src("block_scan", "\n".join(lines))
    return src, _line_of(src, "add = buf[t - step]"), _line_of(src, "buf[t] = v", 2)


def test_missing_barrier_in_the_scan_is_named_with_its_lines():
    src, read, write = _scan_without_a_barrier("read")
    r = puzzles.check("block_scan", src)
    assert r.status == "wrong"
    assert f"a race: a barrier() is missing between line {read} and line {write}" in r.summary
    assert "RaceError" not in r.report and "data race on tile 'buf'" in r.report


def test_loop_carried_missing_barrier_in_the_scan_names_the_next_turn():
    # the barrier after the write is gone: the write races with the next turn's read, on an earlier line
    src, read, write = _scan_without_a_barrier("write")
    assert read < write
    r = puzzles.check("block_scan", src)
    assert r.status == "wrong"
    assert f"a race: a barrier() is missing between line {write} and line {read} of the next turn" in r.summary
    assert f"between line {read} and line {write}" not in r.report      # there is a barrier there
    assert "loop-carried" in r.report


def test_swapped_block_axes_in_broadcast_add_are_caught():
    # ctx.block.x picks the rows and ctx.block.y the columns: right only on a square grid
    src = _src("broadcast_add", """
  let r = ctx.block.x * 16
  let c = ctx.block.y * 64
  C[r :+ 16, c :+ 64] = A[r :+ 16, :] + B[:, c :+ 64]""")
    p = puzzles.get("broadcast_add")
    assert any(-(-d["N"] // 64) != -(-d["M"] // 16) for d in p.shapes)
    r = puzzles.check("broadcast_add", src)
    assert r.status == "wrong", r.report
    assert "wrong at M=37, N=260: C[0..36, 192..259] never written: no store covers it" in r.summary
    assert ("cdiv(260, 64) = 5 CTAs along y (ctx.block.y), which has 3. The grid has 5 along x: if ctx.block.y "
            "picks the columns, ctx.block.y and ctx.block.x may be swapped") in r.report


def test_every_two_d_grid_puzzle_has_a_shape_with_unequal_grid_extents():
    # swapped ctx.block.x / ctx.block.y go unnoticed when every shape gives a square grid
    for p in puzzles.PUZZLES:
        m = re.search(r"@grid\(cdiv\((\w+), (\d+)\), cdiv\((\w+), (\d+)\)\)", p.signature)
        if m is None:
            continue
        dx, tx, dy, ty = m.group(1), int(m.group(2)), m.group(3), int(m.group(4))
        assert any(-(-d[dx] // tx) != -(-d[dy] // ty) for d in p.shapes), p.name


def test_conflicting_transpose_is_named_with_the_fix():
    src = _src("transpose_f16", """
  let r = ctx.block.y * 64
  let c = ctx.block.x * 32
  var t = X[r :+ 64, c :+ 32]
  Y[c :+ 32, r :+ 64] = transpose(t)""")
    r = puzzles.check("transpose_f16", src)
    assert r.status == "goals missed", r.report        # the numbers are right
    a = tilenb.compile(src, backend="cpu").transpose_f16.analysis()
    store = next(c for c in a.copies if c.direction == "store")
    assert store.wavefronts > store.ideal_wavefronts
    assert (f"bank conflicts: the store into Y at line {store.line} takes {store.wavefronts} shared-memory "
            f"wavefronts where {store.ideal_wavefronts} would do") in r.summary
    assert "pad each row of `t` by 1 element (rows of 33)" in r.report


def _padded_transpose(row):
    return _src("transpose_f16", f"""
  let r = ctx.block.y * 64
  let c = ctx.block.x * 32
  var t: tile<f16>[64, {row}]
  t[:, 0 :+ 32] = X[r :+ 64, c :+ 32]
  Y[c :+ 32, r :+ 64] = transpose(t[:, 0 :+ 32])""")


@pytest.mark.parametrize("row", [34, 36])
def test_a_transpose_padded_by_the_wrong_amount_gets_a_fix_that_works(row):
    # rows of 34 cost the load its 16-byte vectors (the load conflicts, and has no fix of its own):
    # the fix named is the tile's, from the store's, worded for the window the copies use
    r = puzzles.check("transpose_f16", _padded_transpose(row))
    assert r.status == "goals missed", r.report
    m = re.search(r"fix: pad each row of `t` by (\d+) more elements? \(rows of (\d+), not (\d+)\) "
                  r"and keep the window `\[:, 0 :\+ 32\]`", r.report)
    assert m, r.report
    pad, new, now = (int(g) for g in m.groups())
    assert now == row and new == row + pad
    assert puzzles.check("transpose_f16", _padded_transpose(new)).solved      # the fix reaches the goal


def test_uncoalesced_transpose_is_named():
    src = _src("transpose_f16", """
  let r = ctx.block.y * 64
  let c = ctx.block.x * 32
  Y[c :+ 32, r :+ 64] = transpose(X[r :+ 64, c :+ 32])""")
    r = puzzles.check("transpose_f16", src)
    assert r.status == "goals missed"
    line = _line_of(src, "transpose(X[")
    assert re.search(rf"the load of X at line {line} touches \d+ sectors where 128 would do", r.summary)


def test_a_tile_narrower_than_the_row_is_named():
    # the newcomer's softmax: a 1024-wide tile over rows of 1100
    src = _src("log_softmax", """
  let r = ctx.block.x
  var x = X[r :+ 1, 0 :+ 1024]
  var m = rowmax(x)
  Y[r :+ 1, 0 :+ 1024] = x - m - log(rowsum(exp(x - m)))""")
    r = puzzles.check("log_softmax", src)
    assert r.status == "wrong"
    assert "wrong at M=3, N=1100: Y[0..2, 1024..1099]" in r.summary and "no store covers it" in r.summary
    assert "columns 1024..1099 of every row" in r.report
    assert "cover Y[0..2, 0..1023]" in r.report


def test_every_thread_adding_into_one_element_is_named():
    src = _src("sum_and_max", """
  let i = ctx.block.x * 1024
  var x = X[i :+ 1024]
  var s = rowsum(x)
  var m = rowmax(abs(x))
  atomic_add(Out[0], s[0])
  atomic_max(Out[1], m[0])""")
    r = puzzles.check("sum_and_max", src)
    assert r.status == "wrong"
    assert "every thread of a CTA adds into Out[0], not one" in r.summary
    assert "256 threads of CTA (0, 0, 0) (threads 0..255) each add into it" in r.report
    # the fix it points to: the tile form, one statement for the CTA
    assert "with a tile atomic into a slice of the tensor (`atomic_add(Out[0 :+ 1], s)`" in r.report


def test_unguarded_per_thread_access_is_named():
    src = _src("classify", """
  let i = ctx.block.x * ctx.threads + ctx.thread
  C[i] = where(X[i] < lo, -1, where(X[i] > hi, 1, 0))""")
    r = puzzles.check("classify", src)
    assert r.status == "wrong"
    assert f"an out-of-bounds element access at line {_line_of(src, 'C[i] = where')}" in r.summary
    assert "thread 4 of CTA (0, 0, 0) reads tensor X[4]" in r.report and "if i >= N { return }" in r.report


def test_a_missed_barrier_goal_names_the_barriers():
    src = _src("row_sums", """
  let r = ctx.block.x * 4
  var x = X[r :+ 4, 0 :+ 256]
  var y = x * 2.0
  var t = transpose(y)
  S[r :+ 4, :] = rowsum(transpose(t)) / 2.0""")
    r = puzzles.check("row_sums", src)
    n = len(tilenb.compile(src, backend="cpu").row_sums.analysis().barriers)
    assert n > 1
    assert r.status == "goals missed" and f"{n} barriers placed" in r.summary


def test_a_guard_that_skips_the_last_element_is_named():
    src = _src("classify", """
  let i = ctx.block.x * ctx.threads + ctx.thread
  if i >= N - 1 {
    return
  }
  C[i] = where(X[i] < lo, -1, where(X[i] > hi, 1, 0))""")
    r = puzzles.check("classify", src)
    assert "wrong at N=4: C[3] never written: no thread stores there" in r.summary
    assert "address C[0..2] (3 elements)" in r.report and "`if` guards" in r.report


def test_a_grid_that_skips_part_of_the_output_is_named():
    src = _src("add_ten", """
  let i = ctx.block.x * 2048
  Y[i :+ 1024] = X[i :+ 1024] + 10.0""")
    r = puzzles.check("add_ten", src)
    assert "wrong at N=2052: Y[1024..2047] never written: no store covers it" in r.summary
    assert "cover Y[0..1023] and Y[2048..2051] (1028 elements), over the grid (3, 1, 1)" in r.report


# ---- the owner of a wrong element ---------------------------------------------------------------------
def _first_failing(p, wrong_at):
    for si in range(len(p.shapes)):
        dims, inputs, _ = p.case(si)
        hits = np.flatnonzero(wrong_at(inputs))
        if len(hits):
            return dims, int(hits[0])
    raise AssertionError("no shape fails")


def test_owner_of_a_wrong_element_in_a_tile_store_is_its_runs_thread():
    src = _src("add_ten", """
  let i = ctx.block.x * 1024
  var x = X[i :+ 1024]
  Y[i :+ 1024] = where(x > 1.0, x, x + 10.0)""")
    p = puzzles.get("add_ten")
    dims, j = _first_failing(p, lambda inp: inp["X"] > 1.0)
    r = puzzles.check("add_ten", src)
    # canonical partition (tilenb.analysis.partition): 4-element runs, run k to thread k % 256
    cta, pos = divmod(j, 1024)
    thread = (pos // 4) % 256
    assert f"the first is Y[{j}]" in r.report
    line = _line_of(src, "Y[i :+ 1024] =")
    assert f"thread {thread} of CTA ({cta}, 0, 0) writes it, in the store at line {line}" in r.report
    assert f"element {pos} of the stored slice, in the run of 4 elements that thread moves" in r.report
    assert "chunk" not in r.report


def test_owner_of_a_wrong_element_in_per_thread_code_is_the_thread_whose_index_lands_there():
    src = _src("classify", """
  let i = ctx.block.x * ctx.threads + ctx.thread
  if i >= N {
    return
  }
  let x = X[i]
  if x < lo {
    C[i] = -1
  } else if x > hi {
    C[i] = 2
  } else {
    C[i] = 0
  }""")
    p = puzzles.get("classify")
    dims, j = _first_failing(p, lambda inp: inp["X"] > inp["hi"])
    r = puzzles.check("classify", src)
    assert f"the first is C[{j}] = 2, where numpy gives 1" in r.report
    line = _line_of(src, "C[i] = 2")
    assert f"thread {j % 128} of CTA ({j // 128}, 0, 0) writes it, in the store at line {line}" in r.report


def test_owner_through_while_loops_over_a_3d_grid():
    start = SOLUTIONS.index(puzzles.get("grid_stride").signature)
    src = SOLUTIONS[start:SOLUTIONS.index("\n}\n", start) + 3].replace(
        "2.0 * X[b, r :+ 8, c :+ 64]", "where(X[b, r :+ 8, c :+ 64] > 1.0, X[b, r :+ 8, c :+ 64], 2.0 * X[b, r :+ 8, c :+ 64])")
    p = puzzles.get("grid_stride")
    for si in range(len(p.shapes)):
        dims, inputs, _ = p.case(si)
        hits = np.argwhere(inputs["X"] > 1.0)
        if len(hits):
            b, row, col = (int(v) for v in hits[0])
            break
    r = puzzles.check("grid_stride", src)
    cta = ((col // 64) % 2, (row // 8) % 2, b % 2)                 # CTA (x, y, z) of a 2 x 2 x 2 grid
    thread = (((row % 8) * 64 + col % 64) // 4) % 128             # 4-element chunks of [8, 64], 128 threads
    assert f"the first is Y[{b}, {row}, {col}]" in r.report
    assert f"thread {thread} of CTA {cta} writes it, in the store at line" in r.report


# ---- what check() accepts --------------------------------------------------------------------------------
def test_check_takes_a_kernel_a_module_or_source_and_never_raises(solved):
    p = puzzles.get("softmax")
    one = tilenb.compile(SOLUTIONS, backend="cpu")
    assert puzzles.check("softmax", one).solved                  # a module: the kernel of that name
    assert puzzles.check("softmax", one.softmax).solved
    r = puzzles.check("softmax", "kernel softmax(")
    assert r.status == "does not compile" and "error" in r.report
    r = puzzles.check("softmax", 42)
    assert r.status == "wrong" and "takes a kernel, a module or source text" in r.summary
    r = puzzles.check("no_such_puzzle", p.stub)
    assert r.status == "wrong" and "no puzzle 'no_such_puzzle'" in r.summary
    changed = p.stub.replace("Y: tensor<f32>[M, N]", "Y: tensor<f32>[M, 256]")
    r = puzzles.check("softmax", changed)
    assert r.status == "wrong" and "differ from the puzzle's signature" in r.summary


def test_a_cuda_kernel_without_a_gpu_is_checked_on_the_cpu():
    from tilenb.runtime.gpu import gpu_available
    if gpu_available():
        pytest.skip("a GPU is usable here: the GPU test covers this")
    r = puzzles.check("softmax", tilenb.compile(SOLUTIONS, backend="cuda"))
    assert r.solved and "no GPU is usable here: checked on the CPU reference executor only" in r.report


def test_result_shows_report_then_views_in_ipython(solved):
    pytest.importorskip("IPython")
    pytest.importorskip("anywidget")
    from IPython.core.interactiveshell import InteractiveShell
    shown = []
    shell = InteractiveShell.instance()
    shell.display_pub.publish = lambda data, metadata=None, **kw: shown.append(data)
    try:
        r = puzzles.check("row_sums", solved.row_sums)
        r._ipython_display_()
    finally:
        InteractiveShell.clear_instance()
    texts = [d.get("text/plain", "") for d in shown]
    assert texts[0].startswith("puzzle 6 (row_sums): solved")
    assert any(t.startswith("thread map of row_sums") for t in texts)
    assert any(t.startswith("barriers of row_sums") for t in texts)


def test_describe_set_names_boxes_and_elements():
    m = np.zeros(10, bool)
    m[[0, 9]] = True
    assert describe_set(m, "Y") == "Y[0] and Y[9]"
    m = np.zeros((3, 8), bool)
    m[:, 5:] = True
    assert describe_set(m, "Y") == "Y[0..2, 5..7] (9 elements: columns 5..7 of every row)"


# ---- the learner's notebook ----------------------------------------------------------------------------
def _nb():
    return json.loads((NB / "puzzles.ipynb").read_text(encoding="utf-8"))


def test_saved_notebook_is_the_build_of_the_puzzles():
    assert saved_cells(_nb()) == parse(puzzle_notebook.source()), \
        "notebooks/puzzles.ipynb is stale: run python notebooks/build_puzzles.py"


def test_notebook_ran_in_order_without_errors_and_each_stub_is_not_solved_yet():
    code = [c for c in _nb()["cells"] if c["cell_type"] == "code"]
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1))
    for c in code:
        assert not [o for o in c["outputs"] if o["output_type"] == "error" or o.get("name") == "stderr"]
    checks = {}
    for c in code:
        m = re.match(r'puzzles\.check\("(\w+)"', "".join(c["source"]))
        if m:
            checks.setdefault(m.group(1), []).append("\n".join(output_text(o) for o in c["outputs"]))
    assert set(checks) == set(NAMES)
    for name, outs in checks.items():
        if name != "warm_up":
            assert len(outs) == 1 and "not solved yet" in outs[0], name
    assert "solved: right at every shape" in checks["warm_up"][0]
    assert "off-by-1 window" in checks["warm_up"][1]
    views = [o for c in code for o in c["outputs"] if "tilenb" in o.get("metadata", {})]
    assert views, "the warm-up's check shows the views of its kernel"
    streams = "".join(output_text(o) for c in code for o in c["outputs"] if o["output_type"] == "stream")
    assert MARK in streams            # the main job counts the notebook as verified


def test_notebook_holds_no_solution_but_the_warm_ups():
    text = "\n".join("".join(c["source"]) for c in _nb()["cells"])
    shown = puzzle_notebook.WARM_UP_SOLUTION + "\n".join(p.hint for p in puzzles.PUZZLES)   # meant to be seen
    for p in puzzles.PUZZLES:
        if p.name == "warm_up":
            continue
        start = SOLUTIONS.index(p.signature + " {")
        body = SOLUTIONS[start:SOLUTIONS.index("\n}\n", start)].split("\n")[p.signature.count("\n") + 1:]
        lines = [l.strip() for l in body if l.strip() and not l.strip().startswith("//")]
        leaked = [l for l in lines if len(l) > 12 and l in text and l not in shown]
        assert not leaked, f"{p.name}: the notebook shows its solution's lines {leaked}"


# ---- every construct executed somewhere ----------------------------------------------------------------
def test_constructs_follow_the_spec():
    spec = (ROOT / "docs" / "spec.md").read_text(encoding="utf-8")
    for name in coverage.BUILTINS:
        assert f"`{name}" in spec or f" {name}" in spec, name
    for attr in coverage.ATTRIBUTES:
        assert attr in spec, attr


def test_every_construct_is_executed_in_a_tutorial_or_a_puzzle():
    tutorials = sorted(NB.glob("[0-9][0-9]_*.ipynb"))
    assert tutorials
    programs = [t for path in tutorials for t in coverage.notebook_programs(path)]
    used_tutorials = coverage.executed_constructs(programs)
    used_puzzles = coverage.constructs_in(SOLUTIONS) | coverage.executed_constructs(
        coverage.notebook_programs(NB / "puzzles.ipynb"))
    missing = sorted(coverage.CONSTRUCTS - used_tutorials - used_puzzles)
    assert not missing, f"constructs no tutorial or puzzle executes: {missing}"


def test_puzzles_cover_what_the_tutorials_leave_out():
    # the puzzles alone cover the constructs a newcomer found missing from the tutorials
    used = coverage.constructs_in(SOLUTIONS)
    for name in ("where", "break", "continue", "colmax", "exp2", "@cluster", "cluster_sum", "log", "atomic_max",
                 "else if", "return", "fn statement"):
        assert name in used, name


# ---- on a GPU --------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_solution_solves_its_puzzle_on_the_gpu_too(name):
    mod = puzzles.solutions(backend="cuda")
    p = puzzles.get(name)
    r = puzzles.check(name, mod.kernels[p.kernel])
    assert r.status == "solved", r.report
    assert r.report.count("on the GPU at ") == len(p.shapes) and " ms" in r.report
