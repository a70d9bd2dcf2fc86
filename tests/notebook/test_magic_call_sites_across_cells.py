"""An error inside a function of an earlier %%tilekernel cell names the cell and line of the call
that brought it there ("called at In[2]:4"), where the checker's line would count lines of the
text the magic compiles (cell plus brought-in functions); a cell of functions alone lists only
its own functions."""
import pytest

pytest.importorskip("IPython")

from tilenb.notebook.magic import CellCompiler  # noqa: E402

F = "%%tilekernel --backend cpu --show none\nfn f(x) = x * q\n"
G = "%%tilekernel --backend cpu --show none\n\n\nfn g(x) = f(x) + 1.0\n"
USE_G = "%%tilekernel --backend cpu --show none\nkernel c(X: tensor<f32>[N], Y: tensor<f32>[N]) {\n  Y[0 :+ 64] = g(X[0 :+ 64])\n}\n"
USE_F = "%%tilekernel --backend cpu --show none\nkernel c(X: tensor<f32>[N], Y: tensor<f32>[N]) {\n\n  Y[0 :+ 64] = f(X[0 :+ 64])\n}\n"
OWN = ("%%tilekernel --backend cpu --show none\nfn h(x) = x * p\nkernel c(X: tensor<f32>[N], Y: tensor<f32>[N]) {\n"
       "  Y[0 :+ 64] = h(X[0 :+ 64])\n}\n")


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


def cell(ip, capsys, src):
    r = ip.run_cell(src)
    out = capsys.readouterr()
    return r, out.out + out.err


def test_the_call_site_is_named_by_its_own_cell(ip, capsys):
    rf, _ = cell(ip, capsys, F)
    rg, out = cell(ip, capsys, G)
    assert "(functions: g)" in out                       # f came from In[rf], g is this cell's
    r, _ = cell(ip, capsys, USE_G)                       # the error is in f, called from g's line 4
    e = str(r.error_in_exec)
    assert e.startswith(f"In[{rf.execution_count}]:2:15: error: 'q' is not defined "
                        f"(in 'f', called at In[{rg.execution_count}]:4)"), e
    r, _ = cell(ip, capsys, USE_F)                       # called from this cell's line 4
    e = str(r.error_in_exec)
    assert e.startswith(f"In[{rf.execution_count}]:2:15: error: 'q' is not defined "
                        f"(in 'f', called at In[{r.execution_count}]:4)"), e


def test_a_call_in_the_cell_of_its_function_keeps_its_line(ip, capsys):
    r, _ = cell(ip, capsys, OWN)
    e = str(r.error_in_exec)
    assert e.startswith(f"In[{r.execution_count}]:2:15: error: 'p' is not defined (in 'h', called at line 4)"), e
