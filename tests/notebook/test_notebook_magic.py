"""%%tilekernel through IPython's own shell: names bound, errors counted in cell lines with a
caret and no traceback, a failed cell failing (CellError) while earlier kernels and functions
survive it, options; and through a real Jupyter kernel (nbclient): the error names the cell by
its own prompt number and stops the run."""
import re

import numpy as np
import pytest

pytest.importorskip("IPython")

import tilenb  # noqa: E402
from tilenb.notebook.magic import CellCompiler, CellError, parse_options, parse_tune  # noqa: E402


@pytest.fixture
def ip():
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "tilenb")
    shell._tilenb_magics.cells = CellCompiler()      # each test starts with no functions
    added = set()
    before = set(shell.user_ns)
    yield shell
    added = set(shell.user_ns) - before
    for name in added:
        shell.user_ns.pop(name, None)


def run(ip, capsys, cell):
    result = ip.run_cell(cell)
    out = capsys.readouterr()
    return result, out.out, out.err


def fail(ip, capsys, cell):
    """Run a cell that must fail: -> (the CellError, what the shell showed for it)."""
    result = ip.run_cell(cell)
    out = capsys.readouterr()
    assert isinstance(result.error_in_exec, CellError), (result.error_in_exec, out.err)
    assert result.success is False
    shown = out.out + out.err
    assert "Traceback" not in shown and 'File "' not in shown   # the diagnostics, no frames
    return result.error_in_exec, shown


SCALE = """%%tilekernel --backend cpu --show none
@launch(256)
kernel scale_rows(X: tensor<f32>[M, 64], S: tensor<f32>[M, 1], Y: tensor<f32>[M, 64]) {
  let r = ctx.block.x * 32
  var x = X[r :+ 32, :]
  var s = S[r :+ 32, :]
  Y[r :+ 32, :] = x * s
}

kernel fill(Y: tensor<f32>[N]) {
  Y[ctx.block.x] = 1.0
}
"""


def test_cell_binds_every_kernel_and_shows_nothing_with_show_none(ip, capsys):
    result, out, err = run(ip, capsys, SCALE)
    assert result.error_in_exec is None and result.error_before_exec is None
    assert err == "" and out == ""
    assert isinstance(ip.user_ns["scale_rows"], tilenb.Kernel)
    assert ip.user_ns["fill"].name == "fill"
    assert ip.user_ns["scale_rows"].module is ip.user_ns["fill"].module
    assert ip.user_ns["scale_rows"].module.backend == "cpu"


def test_module_option_binds_the_module(ip, capsys):
    result, _, err = run(ip, capsys, SCALE.replace("--show none", "--show none --module mod1 --debug"))
    assert err == ""
    assert isinstance(ip.user_ns["mod1"], tilenb.Module)
    assert ip.user_ns["mod1"].debug is True and ip.user_ns["mod1"].backend == "cpu"
    assert set(ip.user_ns["mod1"].kernels) == {"scale_rows", "fill"}


def test_compile_error_is_counted_in_cell_lines_with_a_caret_and_no_traceback(ip, capsys):
    cell = "%%tilekernel --backend cpu\nkernel k(X: tensor<f32>[N]) {\n  X[0] = y\n}\n"
    error, err = fail(ip, capsys, cell)
    assert error._render_traceback_() == str(error).split("\n")
    assert (error.line, error.column) == (3, 10) and error.diagnostics[0].message == "'y' is not defined"
    lines = err.splitlines()
    head = next(i for i, l in enumerate(lines) if "error:" in l)
    # `X[0] = y` is line 3 of the cell (the %%tilekernel line is line 1); y at column 10
    assert re.fullmatch(r"In\[\d+\]:3:10: error: 'y' is not defined", lines[head])
    assert lines[head + 1].strip() == "X[0] = y"
    src, caret = lines[head + 1], lines[head + 2]
    assert caret.strip() == "^"
    assert src[caret.index("^")] == "y"
    assert "k" not in ip.user_ns or not isinstance(ip.user_ns.get("k"), tilenb.Kernel)


def test_earlier_kernels_survive_a_failed_cell(ip, capsys):
    run(ip, capsys, SCALE)
    first = ip.user_ns["scale_rows"]
    broken = SCALE.replace("Y[r :+ 32, :] = x * s", "Y[r :+ 32, :] = x * t")
    _, err = fail(ip, capsys, broken)
    assert "'t' is not defined" in err
    assert re.search(r"In\[\d+\]:7:23: error", err)       # cell line 7
    assert ip.user_ns["scale_rows"] is first
    assert first.ir().name == "scale_rows"
    M = 68                          # not a multiple of the 32 rows a CTA takes (extents are multiples of 4)
    X = np.random.default_rng(1).standard_normal((M, 64)).astype(np.float32)
    S = np.random.default_rng(2).standard_normal((M, 1)).astype(np.float32)
    Y = np.zeros_like(X)
    first[(M + 31) // 32](X, S, Y)
    np.testing.assert_allclose(Y, X * S, rtol=1e-6)


def test_functions_of_earlier_cells_are_visible_to_later_cells(ip, capsys):
    result, out, err = run(ip, capsys, "%%tilekernel --backend cpu\nfn silu(x) = x / (1.0 + exp(-x))\n")
    assert err == ""
    assert "defines no kernel (functions: silu)" in out
    cell = """%%tilekernel --backend cpu --show none
@autotune(TILE in [1024])
kernel act(X: tensor<f32>[N], Y: tensor<f32>[N]) {
  let base = ctx.block.x * TILE
  var x = X[base :+ TILE]
  Y[base :+ TILE] = silu(x)
}
"""
    result, out, err = run(ip, capsys, cell)
    assert err == ""
    assert isinstance(ip.user_ns["act"], tilenb.Kernel)
    assert "silu" not in ip.user_ns           # functions are not Python names


def test_a_cell_redefining_a_function_shadows_the_earlier_one(ip, capsys):
    run(ip, capsys, "%%tilekernel --backend cpu\nfn twice(x) = x * 2.0\n")
    cell = "%%tilekernel --backend cpu --show none\nfn twice(x) = x + x\nkernel k2(Y: tensor<f32>[N]) {\n  Y[0] = twice(1.0)\n}\n"
    _, _, err = run(ip, capsys, cell)
    assert err == ""
    cells = ip._tilenb_magics.cells
    assert cells.functions["twice"].text == "fn twice(x) = x + x"


def test_error_inside_a_function_from_an_earlier_cell_names_that_cell(ip, capsys):
    ip.execution_count = 40
    run(ip, capsys, "%%tilekernel --backend cpu\n\nfn bad(t) = t + nothere\n")
    ip.execution_count = 41
    cell = "%%tilekernel --backend cpu\nkernel k3(Y: tensor<f32>[N]) {\n  Y[0] = bad(1.0)\n}\n"
    _, err = fail(ip, capsys, cell)
    # bad is line 3 of In[40]; `nothere` starts at column 17
    assert "In[40]:3:17: error: 'nothere' is not defined" in err
    assert "fn bad(t) = t + nothere" in err


def test_bad_options_are_reported_without_a_traceback_and_bind_nothing(ip, capsys):
    for opts, expect in [("--bogus", "unknown option '--bogus'"), ("--backend gpu", "unknown backend 'gpu'"),
                         ("--show pictures", "unknown view 'pictures'"), ("--tune TILE", "NAME=VALUE"),
                         ("--tune TILE=x", "'x' is not a number")]:
        _, err = fail(ip, capsys, SCALE.replace("--backend cpu --show none", opts).replace("scale_rows", "sr_bad"))
        assert expect in err, (opts, err)
        assert "sr_bad" not in ip.user_ns


def test_tune_is_checked_against_the_kernels_of_the_cell(ip, capsys):
    cell = """%%tilekernel --backend cpu --tune TILE=512
@autotune(TILE in [1024, 2048])
kernel act4(X: tensor<f32>[N], Y: tensor<f32>[N]) {
  var x = X[ctx.block.x * TILE :+ TILE]
  Y[ctx.block.x * TILE :+ TILE] = x
}
"""
    _, err = fail(ip, capsys, cell)
    assert "TILE=512 is not one of its @autotune values [1024, 2048]" in err
    _, err = fail(ip, capsys, cell.replace("TILE=512", "TILES=1024"))
    assert "no kernel of this cell has an @autotune name 'TILES'" in err


def test_views_are_displayed_with_a_header_per_kernel(ip, capsys):
    cell = SCALE.replace("--show none", "--show lifetimes,timing")
    result, out, err = run(ip, capsys, cell)
    assert err == ""
    assert "kernel scale_rows(X: tensor<f32>[M, 64], S: tensor<f32>[M, 1], Y: tensor<f32>[M, 64]) on cpu" in out
    assert "shared memory of scale_rows" in out
    assert "timing of fill: no GPU time exists" in out
    assert "0x" not in out                     # no memory addresses in the text


def test_cell_compiler_labels_cell_lines_and_imported_function_lines():
    cc = CellCompiler()
    cc.compile("\n\nfn sq(x) = x * x\n", "In[1]", "cpu", False)
    module, labels = cc.compile("kernel k(Y: tensor<f32>[N]) {\n  Y[0] = sq(2.0)\n}", "In[2]", "cpu", False)
    # compiled lines are cell lines: the compiled text starts with an empty line for %%tilekernel
    assert [labels(n) for n in (2, 3, 4)] == ["2", "3", "4"]
    assert module.kernels["k"].ir().body[0].span.line == 3   # what kernel.analysis() reports too
    assert labels(5) == "In[1]:4"            # sq sits on line 4 of In[1] (after the magic line)
    assert module.source.splitlines()[4] == "fn sq(x) = x * x"


def test_option_parsing():
    o = parse_options("--backend=cuda --tune TILE=64,D=256 --show threads,cuda --debug --module m")
    assert (o.backend, o.tune, o.show, o.debug, o.module) == ("cuda", {"TILE": 64, "D": 256}, "threads,cuda", True, "m")
    assert parse_tune("A=0x10, B=1.5") == {"A": 16, "B": 1.5}
    with pytest.raises(tilenb.TileError):
        parse_options("--module 3x")


def test_timing_views_follow_later_launches(ip, capsys):
    from tilenb.runtime.checks import RunReport
    cell = SCALE.replace("--backend cpu --show none", "--backend cuda --show timing")
    _, out, err = run(ip, capsys, cell)
    assert err == ""
    assert "timing of scale_rows: not launched on the GPU yet." in out
    k = ip.user_ns["scale_rows"]
    view = next(w for w, kern, _ in ip._tilenb_magics._timing if kern is k)
    k.last_run = RunReport("cuda", "scale_rows", {}, "No @autotune: one variant.", (4, 1, 1), 256, 4, 1e-5, False,
                           {"kernel_ms": 0.01, "wall_s": 0.002, "timings": [], "device": "NVIDIA H200"})
    run(ip, capsys, "x_after_launch = 1")           # any later cell refreshes the view
    assert view.timing["kernel_ms"] == 0.01
    assert "kernel time (CUDA events): 10.0 us" in repr(view)


def test_magic_help_names_every_option(ip):
    doc = ip.find_cell_magic("tilekernel").__doc__
    for opt in ("--backend", "--tune", "--show", "--debug", "--module"):
        assert opt in doc


def test_cell_lines_are_counted_by_newlines_only():
    """A form feed or a lone carriage return inside a comment is not a line break for the
    lexer, so it is not one for the labels either."""
    cc = CellCompiler()
    module, labels = cc.compile("// a\x0cb\r c\nkernel k(Y: tensor<f32>[N]) {\n  Y[0] = 1.0\n}\n", "In[1]", "cpu", False)
    assert module.kernels["k"].checked.ast.span.line == 3    # cell line 3 (line 1: %%tilekernel)
    assert labels(3) == "3"
    with pytest.raises(tilenb.TileError) as e:
        cc.compile("// \x0c\nkernel k(Y: tensor<f32>[N]) {\n  Y[0] = q\n}\n", "In[2]", "cpu", False)
    assert (e.value.filename, e.value.line) == ("In[2]", 4)
