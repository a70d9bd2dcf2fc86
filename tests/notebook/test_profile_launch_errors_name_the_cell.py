"""A launch refused under `%tileprofile` or `tilenb.notebook.measure` names the cell that defined
the kernel ("In[N]: error: ..."), as the same launch called directly does: the launch checks
(runtime/checks.prepare) name the source whichever path launches."""
import numpy as np
import pytest

pytest.importorskip("IPython")

from tilenb.lang.diagnostics import LaunchError  # noqa: E402
from tilenb.notebook.magic import CellCompiler  # noqa: E402

CELL = """%%tilekernel --backend cpu --show none
kernel pk(X: tensor<f32>[N], Y: tensor<f32>[N]) {
  Y[ctx.block.x * 64 :+ 64] = X[ctx.block.x * 64 :+ 64] * 2.0
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


@pytest.mark.parametrize("launch", ["pk[2](x)", "%tileprofile pk[2](x)", "__import__('tilenb.notebook').notebook.measure(pk, 2, x)",
                                    "%tileprofile pk[2](x.astype(np.float64), y)"])
def test_a_refused_launch_names_the_defining_cell_on_every_path(ip, capsys, launch):
    defined = ip.run_cell(CELL)
    assert defined.error_in_exec is None
    n = defined.execution_count
    ip.user_ns.update(np=np, x=np.arange(100, dtype=np.float32), y=np.zeros(100, np.float32))
    r = ip.run_cell(launch)
    capsys.readouterr()
    e = r.error_in_exec
    assert isinstance(e, LaunchError), repr(e)
    assert str(e).startswith(f"In[{n}]: error: kernel 'pk'"), str(e)
