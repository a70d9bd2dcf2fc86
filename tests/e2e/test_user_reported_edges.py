"""Rough edges a user ran into, each with what the user should see now: a TileError that says
what is wrong (not a misleading one, and never silence), views whose labels are true, and a
CPU launch that refuses to run for hours instead of showing no sign of life."""
import json
import re
import shutil
import subprocess

import numpy as np
import pytest

import tilenb


def compile_error(src):
    with pytest.raises(tilenb.TileError) as e:
        tilenb.compile(src, backend="cpu")
    return e.value


# ---- 1. @grid over a tensor ----------------------------------------------------------------
@pytest.mark.parametrize("grid, column", [("X", 7), ("X[0]", 7), ("cdiv(M, X)", 15)])
def test_grid_over_a_tensor_says_what_grid_takes_and_that_it_is_a_tensor(grid, column):
    """It said "'X' is not defined", though X is a parameter of the kernel."""
    e = compile_error(f"@grid({grid})\nkernel k(X: tensor<f32>[M], n: i32) {{\n  X[0] = 1.0\n}}\n")
    assert isinstance(e, tilenb.TileRuleError)
    assert (e.line, e.column) == (1, column)
    assert "not defined" not in e.message
    assert ("@grid takes expressions over runtime dimensions, @autotune names and scalar parameters"
            in e.message)
    assert "'X' is a tensor" in e.message


def test_grid_over_dimensions_and_scalars_still_launches():
    mod = tilenb.compile("@grid(cdiv(M, 32) + n)\nkernel k(X: tensor<f32>[M], n: i32) {\n"
                         "  X[ctx.block.x] = 1.0\n}\n", backend="cpu")
    x = np.zeros(100, np.float32)
    mod.k(x, 2)
    assert mod.k.last_run.grid == (6, 1, 1)
    np.testing.assert_array_equal(x, np.r_[np.ones(6), np.zeros(94)].astype(np.float32))


# ---- 2. @autotune values are ints, in analysis() and at a launch alike ---------------------
TUNED = "@autotune(TM in [32, 64])\n@grid(1)\nkernel k(X: tensor<f32>[N]) {\n  X[0] = f32(TM)\n}\n"


@pytest.mark.parametrize("value", [64.0, True, "64"])
def test_a_non_int_autotune_value_is_refused_by_analysis_and_launch_alike(value):
    """kernel.analysis(TM=64.0) ran (64.0 hashes as 64) while variant={'TM': 64.0} was refused."""
    mod = tilenb.compile(TUNED, backend="cpu")
    for call in (lambda: mod.k.analysis(TM=value), lambda: mod.k.ir(TM=value),
                 lambda: mod.k(np.zeros(4, np.float32), variant={"TM": value})):
        with pytest.raises(tilenb.TileError) as e:
            call()
        assert f"TM={value!r} is not one of its @autotune values [32, 64]" in e.value.message


def test_int_autotune_values_work_in_analysis_and_launch():
    mod = tilenb.compile(TUNED, backend="cpu")
    assert mod.k.ir(TM=np.int64(64)).tune == {"TM": 64}
    x = np.zeros(4, np.float32)
    mod.k(x, variant={"TM": np.int64(64)})
    assert x[0] == 64.0


# ---- 3. the magic says which Python name a kernel replaced ---------------------------------
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


# ---- 4. a constant element index outside a tile --------------------------------------------
@pytest.mark.parametrize("shape, use, column, index, dim, extent", [
    ("[32]", "let v = t[99999999999999]", 13, 99999999999999, 0, 32),
    ("[32, 32]", "let v = t[40, 0]", 13, 40, 0, 32),
    ("[32, 32]", "let v = t[0, -1]", 16, -1, 1, 32),
    ("[32, 32]", "t[0, 32] = 1.0", 8, 32, 1, 32),
    ("[4, 8]", "let v = flat(t)[0, 32]", 22, 32, 1, 32),
])
def test_a_constant_element_index_outside_a_tile_is_a_shape_error_there(shape, use, column, index, dim, extent):
    e = compile_error(f"kernel k(X: tensor<f32>[N]) {{\n  var t: tile<f32>{shape} = 0.0\n  {use}\n"
                      f"  X[0] = t[0{', 0' if ',' in shape else ''}]\n}}\n")
    assert isinstance(e, tilenb.TileShapeError)
    assert (e.line, e.column) == (3, column)
    assert (f"the index {index} is outside tile 't': dimension {dim} has the extent {extent}, "
            f"so its indices run from 0 to {extent - 1}") in e.message


def test_element_indices_inside_a_tile_and_past_a_tensor_are_accepted():
    """The last element of a tile is fine; a tensor is runtime-sized, so its constant indices
    stay unchecked until a launch (and past its end they are masked)."""
    mod = tilenb.compile("kernel k(X: tensor<f32>[N], Y: tensor<f32>[N]) {\n"
                         "  var t: tile<f32>[3, 5] = 0.0\n  t[2, 4] = 7.0\n"
                         "  Y[0] = t[2, 4] + X[1000000]\n}\n", backend="cpu")
    y = np.zeros(8, np.float32)
    mod.k[1](np.ones(8, np.float32), y)
    assert y[0] == 7.0


# ---- 5. the thread map names both dtypes of a converting copy ------------------------------
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


# ---- 6. the CPU backend refuses a launch that would run for hours -------------------------
ONE = "kernel k(X: tensor<f32>[N]) {\n  X[0] = 1.0\n}\n"


def test_a_huge_grid_on_the_cpu_is_refused_naming_the_grid():
    mod = tilenb.compile(ONE, backend="cpu")
    x = np.zeros(4, np.float32)
    with pytest.raises(tilenb.LaunchError) as e:
        mod.k[2 ** 31 - 1](x)
    m = e.value.message
    assert "the grid (2147483647, 1, 1) is 2,147,483,647 CTAs x 256 threads" in m
    assert "use a GPU (backend='cuda') or a smaller problem" in m and "cpu_limit=None" in m
    assert x[0] == 0.0                                        # nothing ran


def test_the_cpu_limit_is_2_to_the_26_thread_instances_and_can_be_lifted():
    mod = tilenb.compile(ONE, backend="cpu")
    x = np.zeros(4, np.float32)
    with pytest.raises(tilenb.LaunchError):
        mod.k[2 ** 18 + 1](x)                                 # 256 threads per CTA
    mod.k[2, 3](x, cpu_limit=None)
    assert x[0] == 1.0 and mod.k.last_run.ctas == 6
    with pytest.raises(tilenb.LaunchError, match="more than the CPU backend runs in one launch \\(1,024\\)"):
        mod.k[5](x, cpu_limit=1024)
    with pytest.raises(tilenb.LaunchError, match="cpu_limit must be a positive int"):
        mod.k[1](x, cpu_limit="lots")


# ---- 7. the ruler writes kilobytes one way --------------------------------------------------
@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the widget's code")
def test_ruler_kilobytes_have_one_format():
    """18,440 B was '18.0 KB' beside 18,432 B as '18 KB'."""
    from tilenb.notebook.assets import asset
    line = next(l for l in asset("ruler.js").splitlines() if l.startswith("const kb = "))
    sizes = [18432, 18440, 18944, 49152, 1000, 232448]
    out = subprocess.run(["node", "-e", line + f"\nfor (const n of {sizes}) console.log(kb(n));"],
                         capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["18 KB", "18 KB", "18.5 KB", "48 KB", "1000 B", "227 KB"]
