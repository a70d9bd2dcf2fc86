"""%%tilekernel as a newcomer uses it: a cell that fails, for any reason, binds nothing and
leaves the kernels and functions of earlier cells working."""
import numpy as np
import pytest

pytest.importorskip("IPython")

from tilenb.notebook.magic import CellCompiler  # noqa: E402

CELL = """%%tilekernel --backend cpu --show none{opts}
fn scaled(x) = x * {factor}
@autotune(T in [64, 128])
kernel k(X: tensor<f32>[N], Y: tensor<f32>[N]) {{
  let b = ctx.block.x * T
  Y[b :+ T] = scaled(X[b :+ T])
}}
"""

USES_SCALED = """%%tilekernel --backend cpu --show none
kernel user(X: tensor<f32>[N], Y: tensor<f32>[N]) {
  Y[0 :+ 64] = scaled(X[0 :+ 64])
}
"""


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


def run(ip, capsys, cell):
    """-> (stdout, stderr); a failed cell's error (shown by the shell on stdout) counts as stderr."""
    result = ip.run_cell(cell)
    out = capsys.readouterr()
    if result.error_in_exec is not None:
        return "", out.out + out.err
    return out.out, out.err


def launch(kernel):
    x = np.arange(64, dtype=np.float32)
    y = np.zeros_like(x)
    kernel[1](x, y)
    return y / np.maximum(x, 1)


@pytest.mark.parametrize("bad_tune", ["T=7", "T=64.5", "Q=1"])
def test_a_bad_tune_option_binds_nothing(ip, capsys, bad_tune):
    """The kernels of a cell were bound (replacing the earlier ones) and its functions recorded
    before --tune was checked, so a cell reported as failed still changed the namespace."""
    _, err = run(ip, capsys, CELL.format(opts="", factor="2.0"))
    assert err == ""
    first = ip.user_ns["k"]
    _, err = run(ip, capsys, CELL.format(opts=f" --tune {bad_tune}", factor="3.0"))
    assert "%%tilekernel --tune" in err
    assert ip.user_ns["k"] is first
    assert launch(ip.user_ns["k"])[5] == 2.0
    run(ip, capsys, USES_SCALED)                 # the function is still the earlier cell's
    assert launch(ip.user_ns["user"])[5] == 2.0


def test_module_option_may_not_hide_a_kernel_of_the_cell(ip, capsys):
    """--module k bound the Module over the kernel k of the same cell, silently."""
    _, err = run(ip, capsys, CELL.format(opts="", factor="2.0"))
    first = ip.user_ns["k"]
    _, err = run(ip, capsys, CELL.format(opts=" --module k", factor="3.0"))
    assert "--module k" in err and "kernel" in err
    assert ip.user_ns["k"] is first


def test_syntax_error_message_names_cell_lines(ip, capsys):
    """The bracket hint inside the message counted lines from the body, not the cell."""
    _, err = run(ip, capsys, "%%tilekernel --backend cpu --show none\nkernel bad( {\n")
    assert "In[" in err and ":2:11: error:" in err
    assert "a '{' comes first, at line 2, column 13" in err


def test_a_failed_cell_leaves_earlier_definitions_working(ip, capsys):
    run(ip, capsys, CELL.format(opts="", factor="2.0"))
    for bad in ["kernel k(X: tensor<f32>[N]) {\n  X[0] = nope\n}",       # name
                "kernel k(X: tensor<f32>[N]) {",                            # syntax
                "fn scaled(x) = x * 5.0\nkernel k(X: tensor<f32>[N]) {\n  X[0] = 1.0 + 1\n  var t: tile<f32>[512, 512] = 0.0\n}"]:
        _, err = run(ip, capsys, "%%tilekernel --backend cpu --show none\n" + bad)
        assert "error" in err
        assert launch(ip.user_ns["k"])[5] == 2.0
    run(ip, capsys, USES_SCALED)
    assert launch(ip.user_ns["user"])[5] == 2.0
