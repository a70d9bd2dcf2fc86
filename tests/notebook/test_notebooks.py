"""The tutorials as committed: built from their sources, executed, verified, and deterministic.

nbval (notebooks/conftest.py) re-runs every notebook and compares outputs; these tests pin what
nbval cannot see: that each saved notebook is the current build of its source (a source edited
without `python notebooks/build.py` fails here), that every code cell ran in order, that every
tutorial verifies its kernels against numpy, that errors appear only where a cell is tagged to
show one, that the views' saved text is deterministic, and that each lesson shows what it
promises (the thread map's uncoalesced warps, the planted race, the budget error, ...).
"""
import json
import re
from pathlib import Path

import pytest

from tilenb.verify import MARK

from support.notebooks import output_text, parse, saved_cells

ROOT = Path(__file__).resolve().parents[2]
NB_DIR = ROOT / "notebooks"
SOURCES = sorted((NB_DIR / "src").glob("*.py"))
NAMES = [s.stem for s in SOURCES]


def load(name):
    return json.loads((NB_DIR / f"{name}.ipynb").read_text(encoding="utf-8"))


def all_text(nb):
    return "\n".join(output_text(o) for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", []))


def test_there_are_nine_tutorials_numbered_in_order():
    assert len(SOURCES) >= 9
    assert [n[:2] for n in NAMES] == [f"{i:02d}" for i in range(1, len(NAMES) + 1)]
    assert sorted(p.stem for p in NB_DIR.glob("[0-9][0-9]_*.ipynb")) == NAMES   # puzzles.ipynb: tests/notebook/test_puzzles.py


@pytest.mark.parametrize("name", NAMES)
def test_saved_notebook_is_the_build_of_its_source(name):
    nb = load(name)
    assert saved_cells(nb) == parse((NB_DIR / "src" / f"{name}.py").read_text(encoding="utf-8")), \
        f"notebooks/{name}.ipynb is stale: run python notebooks/build.py {name[:2]}"


@pytest.mark.parametrize("name", NAMES)
def test_every_code_cell_ran_in_order_and_errors_only_where_tagged(name):
    nb = load(name)
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1))
    for c in code:
        tags = c.get("metadata", {}).get("tags", [])
        errors = [o for o in c["outputs"] if o["output_type"] == "error"]
        stderr = [o for o in c["outputs"] if o["output_type"] == "stream" and o["name"] == "stderr"]
        assert bool(errors) == ("raises-exception" in tags), "".join(c["source"])[:80]
        assert bool(stderr) == ("diagnostic" in tags), "".join(c["source"])[:80]
        for e in errors:                                  # what a user sees: tilenb's own errors
            assert e["ename"] in ("LaunchError", "RaceError", "OutOfBoundsError", "CellError")
            if e["ename"] == "CellError":                 # a failed %%tilekernel cell: its diagnostics
                assert e["traceback"] == e["evalue"].split("\n")
                assert re.match(rf"In\[{c['execution_count']}\]:\d+:\d+: error: ", e["evalue"]), e["evalue"]
            else:
                assert e["traceback"] == [f"{e['ename']}: {e['evalue']}"]


@pytest.mark.parametrize("name", NAMES)
def test_every_tutorial_verifies_against_numpy_and_shows_views(name):
    nb = load(name)
    text = all_text(nb)
    assert text.count(MARK) >= 2, "each tutorial checks its kernels with tilenb.verify"
    views = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c["outputs"]
             if "tilenb" in o.get("metadata", {})]
    assert views, "each tutorial shows the magic's views"
    for o in views:
        assert "application/vnd.jupyter.widget-view+json" not in o["data"]   # saved self-contained
        assert {"text/plain", "text/html"} <= set(o["data"])
        html = "".join(o["data"]["text/html"])
        if "image/png" in o["data"]:      # a picture: shown inline even where no script may run
            png = "".join(o["data"]["image/png"]).replace("\n", "")
            assert f'<img src="data:image/png;base64,{png}"' in html
        plain = o["data"]["text/plain"]
        plain = "".join(plain) if isinstance(plain, list) else plain
        assert not re.search(r"0x[0-9a-f]{6,}|\bIPY_MODEL|\d\.\d+ ?ms\b", plain), plain[:200]


def test_real_data_from_the_minilm_package_in_at_least_two_tutorials():
    users = [n for n in NAMES if "tilenb import datasets" in "".join(
        "".join(c["source"]) for c in load(n)["cells"] if c["cell_type"] == "code")]
    assert len(users) >= 2, users


LESSONS = {
    "01": ["LaunchError", "has dtype float64", "has no @grid", "error: 'betta' is not defined"],
    "02": ["no tile is made", "<- bank conflicts", "fix: pad each tile row"],
    "03": ["does not fit", "static budget", "dynamic shared-memory limit"],
    "04": ["barrier before line 7", "barrier after line", "RaceError", "with no barrier() between",
           "length_histogram with atomic_add"],
    "05": ["vector width 1", "<- uncoalesced", "no GPU time", "vector width 4"],
    "06": ["softmax over 30,522 vocabulary logits", "rms_norm on 36 real token vectors"],
    "07": ["linear {'TM': 64, 'TN': 64, 'TK': 32}", "registers", "linear_bf16", "defines no kernel (functions: gelu)",
           "linear_gelu: MiniLM layer-0 feed-forward"],
    "08": ["flash_attention, 12 heads", "MiniLM layer-0 attention context", "acc      f32 [16, 32]  registers",
           "verified against numpy: causal_attention, 12 heads", "causal, 36 queries x 12 keys",
           "causal, 12 queries x 36 keys", "key blocks loaded per CTA: [1, 2, 3, 4] of 4"],
    "09": ["i8 weights, exactly", "packed bytes, exactly", "relative (Frobenius)"],
    "10": ["elements never written: [  0 999]", "EdgeWarning: Y[0] and Y[999] not written",
           "`X[s - 1 :+ 514]` (line 6) reaches X[-1]", "edge warnings: 0", "load X -> x, [514] f32",
           "uncoalesced: warp 0, step 0: the slice of X may start 28 B into a 32-byte sector",
           "avg3 with zero padding", "30,522 rows in 477 x 6 CTAs", "softmax_cluster, 7 rows", "first_over"],
    "11": ["<- uncoalesced", "<- bank conflicts", "fix: pad each tile row by 1 element (rows of 97)",
           "6 | shared wavefronts | 23808..24576 (768)", "7 | shared wavefronts | 2976..3072 (96)",
           "measured: nothing here. kernel 'copy_rows' cannot be profiled: the module runs on the CPU backend",
           "transpose64                  512                128           4  swizzled"],
}


def test_the_tutorials_alone_use_what_a_newcomer_missed():
    # issue 21: constructs the tutorials never used, now each in an executed cell of one
    from tilenb.puzzles import coverage
    used = coverage.executed_constructs(t for n in NAMES for t in coverage.notebook_programs(NB_DIR / f"{n}.ipynb"))
    for name in ("where", "break", "continue", "colmax", "exp2", "@cluster", "cluster_sum", "cluster_max",
                 "atomic_add", "atomic_max", "ctx.cluster.x", "ctx.cluster.rank"):
        assert name in used, name


def test_the_first_tutorial_points_to_the_builtins_table():
    first = "".join("".join(c["source"]) for c in load(NAMES[0])["cells"] if c["cell_type"] == "markdown")
    assert "spec.md#10-built-ins" in first
    spec = (ROOT / "docs" / "spec.md").read_text(encoding="utf-8")
    assert "\n## 10. Built-ins\n" in spec                 # the anchor GitHub makes of that heading


@pytest.mark.parametrize("number", sorted(LESSONS))
def test_each_tutorial_shows_its_lesson(number):
    name = next(n for n in NAMES if n.startswith(number))
    text = all_text(load(name))
    for phrase in LESSONS[number]:
        assert phrase in text, f"{name}: {phrase!r} not in its outputs"
