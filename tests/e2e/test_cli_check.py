"""`python -m tilenb check FILE...`: every diagnostic of every file, exit status 1 on any error."""
import subprocess
import sys
from pathlib import Path

from tilenb.__main__ import EXAMPLE, main

GOOD = "kernel k(X: tensor<f32>[N]) {\n  X[0] = 1.0\n}\n"
TWO_ERRORS = "kernel k(X: tensor<f32>[N]) {\n  X[0] = y\n  let t = X\n}\n"
SYNTAX = "kernel k(X: tensor<f32>[N]) {\n  X[0] = = 1.0\n}\n"


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text) if isinstance(text, str) else p.write_bytes(text)
    return str(p)


def test_good_file_exits_0(tmp_path, capsys):
    f = write(tmp_path, "good.tile", GOOD)
    assert main(["check", f]) == 0
    out = capsys.readouterr()
    assert f"{f}: ok, 1 kernel(s): k" in out.out and out.err == ""


def test_every_error_is_printed_in_order_and_exit_is_1(tmp_path, capsys):
    f = write(tmp_path, "bad.tile", TWO_ERRORS)
    assert main(["check", f]) == 1
    err = capsys.readouterr().err
    first = err.index(f"{f}:2:10: error: 'y' is not defined")
    second = err.index(f"{f}:3:11: error: tensor 'X' cannot be used whole")
    assert first < second
    assert "      let t = X\n" in err and "Traceback" not in err


def test_syntax_error(tmp_path, capsys):
    f = write(tmp_path, "syntax.tile", SYNTAX)
    assert main(["check", f]) == 1
    assert f"{f}:2:10: error: unexpected '='" in capsys.readouterr().err


def test_several_files_one_bad(tmp_path, capsys):
    good = write(tmp_path, "a.tile", GOOD)
    bad = write(tmp_path, "b.tile", TWO_ERRORS)
    assert main(["check", good, bad, good]) == 1
    out = capsys.readouterr()
    assert out.out.count(": ok, 1 kernel(s)") == 2
    assert out.err.count(": error: ") == 2


def test_unreadable_files(tmp_path, capsys):
    missing = str(tmp_path / "missing.tile")
    binary = write(tmp_path, "binary.tile", b"\xff\xfe\x00kernel")
    assert main(["check", missing]) == 1
    assert f"{missing}: error: cannot read" in capsys.readouterr().err
    assert main(["check", binary]) == 1
    assert f"{binary}: error: cannot read" in capsys.readouterr().err
    assert main(["check", str(tmp_path)]) == 1


def test_bundled_examples_check_and_list(capsys):
    assert main(["check", str(EXAMPLE)]) == 0
    assert main(["list", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "flash_attention(" in out and "shared memory" in out


def test_module_entry_point(tmp_path):
    bad = write(tmp_path, "bad.tile", TWO_ERRORS)
    good = write(tmp_path, "good.tile", GOOD)
    r = subprocess.run([sys.executable, "-m", "tilenb", "check", good, bad], capture_output=True, text=True,
                       cwd=Path(__file__).resolve().parents[2])
    assert r.returncode == 1
    assert f"{bad}:2:10: error: 'y' is not defined" in r.stderr and "^" in r.stderr
    assert f"{good}: ok" in r.stdout


MANY = """fn sq(x) = x * x

@launch(64)
kernel a(X: tensor<f32>[N]) {
  X[0] = = 1.0
}

kernel b(X: tensor<f32>[N]) {
  X[0] = sq(y)
}

@autotune(T in [64])
@launch(64)
kernel c(X: tensor<f32>[N]) {
  X[0 = 2.0
}
kernel d(X: tensor<f32>[N]) {
  X[0] = sq(2.0)
}
"""


def test_a_syntax_error_does_not_hide_the_other_errors(tmp_path, capsys):
    """The parser stops at the first syntax error; check still reports each declaration's own
    syntax error and every other error of the declarations that parse (which see each other's
    functions: d's call of sq is fine)."""
    f = write(tmp_path, "many.tile", MANY)
    assert main(["check", f]) == 1
    err = capsys.readouterr().err
    heads = [l for l in err.splitlines() if ": error: " in l]
    assert [h.split(": error: ")[0] for h in heads] == [f"{f}:5:10", f"{f}:9:13", f"{f}:15:4"]
    assert "unexpected '='" in heads[0] and "'y' is not defined" in heads[1] and "'[' is not closed" in heads[2]


def test_list_into_a_pipe_that_closes_early_ends_quietly(tmp_path):
    files = [str(EXAMPLE)] * 200                     # far more than a pipe holds
    r = subprocess.run(f"{sys.executable} -m tilenb list {' '.join(files)} | head -n 1", shell=True,
                       capture_output=True, text=True, cwd=str(Path(__file__).resolve().parents[2]))
    assert r.stdout.startswith(f"{EXAMPLE}: ") and r.stdout.count("\n") == 1
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr, r.stderr
