"""Bad input a newcomer can give tilenb, and what they should get back: a TileError that names
the thing at fault (file:line:col for source; the parameter for a launch), never an internal
exception, a hang or a silently wrong value. Each test here reproduces a problem found by
trying things out; the ones not fixed yet are xfail(strict=True) with the reason."""
import fractions

import numpy as np
import pytest

import tilenb

K = "kernel k(X: tensor<f32>[N], Y: tensor<f32>[N]) {\n%s\n}\n"


def compile_error(src, **kw):
    with pytest.raises(tilenb.TileError) as e:
        tilenb.compile(src, backend="cpu", **kw)
    return e.value


# ---- source --------------------------------------------------------------------------------
def test_bracket_message_counts_lines_with_the_line_offset():
    """The notebook compiles a cell with line_offset=1 (the %%tilekernel line); the position
    was shifted but the line named inside the message was not ('at line 1' for the cell's
    line 2)."""
    e = compile_error("kernel bad( {\n", line_offset=1)
    assert (e.line, e.column) == (2, 11)
    assert "a '{' comes first, at line 2, column 13" in e.message
    e = compile_error(K % "  Y[0] = (X[0] + ", line_offset=3)
    assert e.line == 5
    assert "a '}' comes first, at line 6, column 1" in e.message


@pytest.mark.parametrize("body", [
    "  Y[0] = " + " + ".join(["X[0]"] * 20000),
    "  Y[0] = " + "exp(" * 5000 + "1.0" + ")" * 5000,
    "  Y[0] = " + "-" * 20000 + "1.0",
])
def test_a_statement_too_deep_is_refused_at_that_statement(body):
    """Such statements were reported as 'the program nests too deeply' at 1:1, far from the
    statement at fault (and, at some stack depths, escaped as lark's VisitError). Where the
    limit lies depends on Python's recursion limit (1000 in a script; IPython raises it to
    3000, so a 500-term sum fails in a script and compiles in a notebook); these are deeper."""
    e = compile_error(K % ("  let a = X[0]\n" + body))
    assert isinstance(e, tilenb.TileSyntaxError)
    assert (e.line, e.column) == (3, 3)
    assert "nests too deeply" in e.message and "let" in e.message


def test_blocks_nested_too_deep_are_refused_inside_the_nest():
    e = compile_error(K % ("  " + "if true {\n" * 3000 + "}\n" * 3000))
    assert isinstance(e, tilenb.TileSyntaxError)
    assert e.line > 2 and "nests too deeply" in e.message


def test_a_300_term_sum_still_compiles_and_runs():
    mod = tilenb.compile(K % ("  Y[0] = " + " + ".join(["X[0]"] * 300)), backend="cpu")
    x = np.full(4, 0.5, np.float32)
    y = np.zeros(4, np.float32)
    mod.k[1](x, y)
    assert y[0] == 150.0


@pytest.mark.parametrize("fn_src,call", [
    # each level calls the next twice: 2**20 bodies
    ("\n".join(f"fn g{i}(x) = g{i + 1}(x) + g{i + 1}(x)" for i in range(20)) + "\nfn g20(x) = x\n", "g0(X[0])"),
    # an argument is substituted wherever its parameter appears: sq(sq(...)) doubles per level
    ("fn sq(x) = x * x\n", "sq(" * 30 + "X[0]" + ")" * 30),
])
def test_exponential_inlining_is_an_error_not_minutes_of_checking(fn_src, call):
    """Function bodies are inlined and arguments substituted, so a 20-level chain of functions
    that each call the next twice made the checker expand 2**20 bodies (minutes, looking like
    a hang). It now stops at a bound with an error at the kernel's statement."""
    src = fn_src + K % f"  Y[0] = {call}"
    line = src.split("\n").index(f"  Y[0] = {call}") + 1
    e = compile_error(src)
    assert isinstance(e, tilenb.TileRuleError)
    assert (e.line, e.column) == (line, 3)
    assert "inlines more than" in e.message and "let" in e.message
    assert len(e.diagnostics) == 1


def test_modest_inlining_still_compiles():
    src = "fn sq(x) = x * x\n" + K % ("  let b = ctx.block.x * 4\n  Y[b :+ 4] = " + "sq(" * 5 + "X[b :+ 4]" + ")" * 5)
    mod = tilenb.compile(src, backend="cpu")
    x = np.linspace(0.5, 1.0, 8).astype(np.float32)
    y = np.zeros_like(x)
    mod.k[2](x, y)
    np.testing.assert_allclose(y, x.astype(np.float64) ** 32, rtol=1e-5)


@pytest.mark.parametrize("extent", ["0", "99999999999999999999999"])
def test_bad_literal_extent_message_says_which_dimension(extent):
    """'dimension 0 of 'X' must be a positive size' read as if the first dimension were at
    fault whatever it was, and put the huge extent where the axis number goes."""
    e = compile_error(f"kernel k(X: tensor<f32>[4, {extent}]) {{}}")
    assert isinstance(e, tilenb.TileShapeError)
    assert (e.line, e.column) == (1, 28)
    assert f"dimension 1 of 'X' has the extent {extent}" in e.message


# ---- launches ------------------------------------------------------------------------------
LAUNCH = r"""
@launch(64)
kernel add(X: tensor<f32>[M, N], Y: tensor<f32>[M, N], s: f32) {
  let r = ctx.block.x * 4
  Y[r :+ 4, 0 :+ 64] = X[r :+ 4, 0 :+ 64] + s
}
kernel ints(Y: tensor<i32>[N], a: i32) {
  Y[0] = a
}
@autotune(TM in [32, 64])
@grid(cdiv(M, TM))
kernel tuned(A: tensor<f32>[M, 16], C: tensor<f32>[M, 16]) {
  C[ctx.block.x * TM :+ TM, :] = A[ctx.block.x * TM :+ TM, :] * 2.0
}
"""


@pytest.fixture(scope="module")
def lmod():
    return tilenb.compile(LAUNCH, backend="cpu")


def launch_error(f):
    with pytest.raises(tilenb.LaunchError) as e:
        f()
    return e.value


def test_keyword_arguments_are_a_launch_error_naming_the_keyword(lmod):
    """`add[2](X=x, Y=y, s=1.0)` raised TypeError from inside Kernel._launch."""
    x = np.ones((5, 64), np.float32)
    y = np.zeros_like(x)
    e = launch_error(lambda: lmod.add[2](X=x, Y=y, s=1.0))
    assert "keyword argument 'X'" in e.message and "positional" in e.message
    e = launch_error(lambda: lmod.add[2](x, y, 1.0, frobnicate=True))
    assert "'frobnicate'" in e.message
    assert (y == 0).all()


def test_an_int_too_large_for_a_float_scalar_is_a_launch_error(lmod):
    """10**400 for an f32 parameter raised OverflowError from float()."""
    x = np.ones((5, 64), np.float32)
    e = launch_error(lambda: lmod.add[2](x, np.zeros_like(x), 10 ** 400))
    assert "'s'" in e.message and "f32" in e.message


@pytest.mark.parametrize("value", [fractions.Fraction(1, 2), fractions.Fraction(7, 3)])
def test_a_fraction_for_an_integer_scalar_is_refused_not_truncated(lmod, value):
    """Fraction(1, 2) for an i32 parameter was silently truncated to 0 by int()."""
    y = np.full(4, 9, np.int32)
    e = launch_error(lambda: lmod.ints[1](y, value))
    assert "'a'" in e.message and "integer" in e.message
    assert (y == 9).all()
    lmod.ints[1](y, fractions.Fraction(6, 2))      # a whole Fraction is an integer
    assert y[0] == 3


def test_non_native_byte_order_is_named_in_the_dtype_message(lmod):
    """A big-endian float32 array got 'has dtype float32; it needs float32 (f32)'."""
    x = np.ones((5, 64), ">f4")
    e = launch_error(lambda: lmod.add[2](x, np.zeros((5, 64), np.float32), 1.0))
    assert "'X'" in e.message and "byte order" in e.message and "'>f4'" in e.message


@pytest.mark.parametrize("method", ["ir", "analysis", "cuda_source"])
def test_unhashable_autotune_value_is_a_tile_error(lmod, method):
    """kernel.analysis(TM=[32]) raised TypeError: unhashable type: 'list'."""
    with pytest.raises(tilenb.TileError) as e:
        getattr(lmod.tuned, method)(TM=[32])
    assert "TM=[32] is not one of its @autotune values [32, 64]" in e.value.message


def test_autotune_value_of_the_wrong_type_is_shown_as_given(lmod):
    with pytest.raises(tilenb.TileError) as e:
        lmod.tuned.analysis(TM="64")
    assert "TM='64'" in e.value.message


@pytest.mark.parametrize("body,what", [
    ("  Y[0] = min(X[0], A[0])", "min() mixes f32 and i32"),
    ("  var a: tile<f32>[8, 64] = 1.0\n  var b: tile<f32>[8, 32] = 1.0\n  var c = max(a, b)", "max(): shapes [8, 64] and [8, 32]"),
])
def test_min_max_errors_name_the_call_not_plus(body, what):
    """min(f32, i32) was reported as "'+' mixes f32 and i32": the checker typed min/max as a '+'."""
    e = compile_error("kernel k(X: tensor<f32>[N], Y: tensor<f32>[N], A: tensor<i32>[N]) {\n%s\n}\n" % body)
    assert what in e.message and "'+'" not in e.message


def test_launching_on_cuda_without_a_usable_gpu_is_a_tile_error():
    """With CuPy installed but no device (or an old driver), compile(backend='cuda') works (the
    CUDA source needs no GPU) but a launch raised CuPy's CUDARuntimeError."""
    from tilenb.runtime.gpu import gpu_available
    if gpu_available():
        pytest.skip("a GPU is usable here")
    mod = tilenb.compile(K % "  Y[0] = X[0]", backend="cuda")
    assert "__global__" in mod.k.cuda_source()
    x = np.ones(4, np.float32)
    with pytest.raises(tilenb.TileError) as e:
        mod.k[1](x, np.zeros_like(x))
    assert "backend='cpu'" in e.value.message
