"""The notebook side of edges users met: the magic says which Python name or built-in a kernel
replaces (and says nothing when it rebinds its own kernel), the thread map names both dtypes of
a converting copy (text view and widget), and the ruler writes kilobytes one way."""
import json
import re
import shutil
import subprocess

import numpy as np
import pytest

import tilenb


# ---- the magic says which Python name a kernel replaced ---------------------------------
CELL = "%%tilekernel --backend cpu --show none\nkernel {name}(X: tensor<f32>[N]) {{\n  X[0] = 2.0\n}}\n"


@pytest.fixture
def ip():
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell
    from tilenb.notebook.magic import CellCompiler
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "tilenb")
    shell._tilenb_magics.cells = CellCompiler()
    before = dict(shell.user_ns)
    yield shell
    for name in set(shell.user_ns) - set(before):
        shell.user_ns.pop(name, None)
    shell.user_ns.update(before)


def run(ip, capsys, cell):
    ip.run_cell(cell)
    return capsys.readouterr().err


def test_the_magic_says_when_a_kernel_replaces_a_python_name(ip, capsys):
    ip.user_ns["np"] = np
    err = run(ip, capsys, CELL.format(name="np"))
    assert err.splitlines() == ["%%tilekernel: kernel 'np' replaces the existing name 'np' (module) "
                                "in the notebook's namespace"]
    assert isinstance(ip.user_ns["np"], tilenb.Kernel)       # still bound


def test_the_magic_says_when_a_kernel_hides_a_builtin(ip, capsys):
    err = run(ip, capsys, CELL.format(name="sum"))
    assert err.splitlines() == ["%%tilekernel: kernel 'sum' replaces the built-in 'sum' "
                                "(builtin_function_or_method) in the notebook's namespace"]
    assert isinstance(ip.user_ns["sum"], tilenb.Kernel)


def test_rebinding_a_kernel_of_an_earlier_cell_is_silent(ip, capsys):
    assert run(ip, capsys, CELL.format(name="polish_k")) == ""
    first = ip.user_ns["polish_k"]
    assert run(ip, capsys, CELL.format(name="polish_k")) == ""
    assert ip.user_ns["polish_k"] is not first


# ---- the thread map names both dtypes of a converting copy ------------------------------
def test_thread_map_label_names_the_tile_and_tensor_dtypes_where_they_differ():
    from tilenb.notebook import render
    mod = tilenb.compile("kernel q(X: tensor<f32>[M, 384], Q: tensor<i8>[M, 384]) {\n"
                         "  let r = ctx.block.x * 8\n  var x = X[r :+ 8, :]\n"
                         "  Q[r :+ 8, :] = i8(round(x))\n}\n", backend="cpu")
    a = mod.q.analysis().to_json()
    assert [c["tensor_dtype"] for c in a["copies"]] == ["f32", "i8"]
    text = render.text("threadmap", dict(a, lines=[]))
    assert "line 3: load X -> x, [8, 384] f32, vector width" in text
    assert "line 4: store x (f32) -> Q (i8), [8, 384], vector width" in text


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the widget's code")
def test_thread_map_widget_label_names_both_dtypes():
    from tilenb.notebook.assets import asset
    js = asset("threadmap.js")
    code = "\n".join(m.group(0) for m in re.finditer(r"^function (copyTitle|tileDtypeOf)\(.*?^}", js, re.M | re.S))
    copies = [{"direction": "store", "tile": "x", "tensor": "Q", "tensor_dtype": "i8"},
              {"direction": "load", "tile": "x", "tensor": "X", "tensor_dtype": "f32"}]
    prog = (code + "\nconst model = {get: () => [{name: 'x', dtype: 'f32'}]};\n"
            f"for (const c of {json.dumps(copies)}) console.log(copyTitle(c, tileDtypeOf(model, c)));\n")
    out = subprocess.run(["node", "-e", prog], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["store x (f32) → Q (i8)", "load X → x"]


# ---- the ruler writes kilobytes one way --------------------------------------------------
@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the widget's code")
def test_ruler_kilobytes_have_one_format():
    """18,440 B was '18.0 KB' beside 18,432 B as '18 KB'."""
    from tilenb.notebook.assets import asset
    line = next(l for l in asset("ruler.js").splitlines() if l.startswith("const kb = "))
    sizes = [18432, 18440, 18944, 49152, 1000, 232448]
    out = subprocess.run(["node", "-e", line + f"\nfor (const n of {sizes}) console.log(kb(n));"],
                         capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["18 KB", "18 KB", "18.5 KB", "48 KB", "1000 B", "227 KB"]
