"""%%tilekernel messages a newcomer met: a kernel named by a Python keyword (valid in the tile
language) is bound, but Python code cannot name it, so the cell says so on stderr and how to
reach it; `--module` refuses a keyword, which would bind a module no code can name; 'all' or
'none' among views in --show is refused as standing alone."""
import numpy as np
import pytest

pytest.importorskip("IPython")

from tilenb.notebook.magic import CellCompiler  # noqa: E402


@pytest.fixture
def ip():
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "tilenb")
    shell._tilenb_magics.cells = CellCompiler()
    before = set(shell.user_ns)
    yield shell
    for name in set(shell.user_ns) - before:
        shell.user_ns.pop(name, None)


def cell(name, opts=""):
    return (f"%%tilekernel --backend cpu --show none {opts}\n@launch(32)\nkernel {name}(X: tensor<f32>[N]) {{\n"
            f"  X[0 :+ 4] = X[0 :+ 4] + 1.0\n}}\n")


@pytest.mark.parametrize("name", ["lambda", "None", "class"])
def test_a_keyword_kernel_says_how_to_reach_it(ip, capsys, name):
    r = ip.run_cell(cell(name, "--module m"))
    err = capsys.readouterr().err
    assert r.error_in_exec is None
    assert (f"%%tilekernel: kernel '{name}' is a Python keyword, so Python code cannot name it; rename it, "
            f"or reach it through --module NAME as NAME.kernels['{name}']") in err, err
    X = np.arange(8, dtype=np.float32)
    ip.user_ns["m"].kernels[name][1](X)                      # the way the message gives works
    np.testing.assert_array_equal(X, [1, 2, 3, 4, 4, 5, 6, 7])


def test_an_ordinary_kernel_name_says_nothing(ip, capsys):
    assert ip.run_cell(cell("lambda_")).error_in_exec is None
    assert capsys.readouterr().err == ""


def test_module_refuses_a_keyword(ip, capsys):
    r = ip.run_cell(cell("k", "--module class"))
    capsys.readouterr()
    assert str(r.error_in_exec) == "%%tilekernel: --module needs a Python name, not 'class' (a Python keyword)"
    assert "k" not in ip.user_ns


@pytest.mark.parametrize("show,word", [("all,threads", "all"), ("none,threads", "none"), ("threads,all", "all")])
def test_all_or_none_among_views_is_refused_as_standing_alone(ip, capsys, show, word):
    """'all' and 'none' are whole values of --show; among views the message said 'unknown view
    'all'' and then offered 'all' as a choice."""
    r = ip.run_cell(cell("k", f"--show {show}").replace("--show none ", ""))
    capsys.readouterr()
    assert str(r.error_in_exec) == (f"%%tilekernel: '{word}' stands alone in --show ('--show {word}'); otherwise "
                                    f"list views from threads, lifetimes, barriers, timing, cuda")
    assert "k" not in ip.user_ns
