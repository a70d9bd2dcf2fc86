"""`python -m tilenb.notebook.export` on a file it cannot use says so in one line naming the file
(exit status 1), as `python -m tilenb check` does, instead of a Python traceback."""
import pytest

pytest.importorskip("nbformat")

from tilenb.notebook.export import main  # noqa: E402


@pytest.mark.parametrize("make,says", [
    (lambda d: d / "missing.ipynb", "error: cannot read: No such file or directory"),
    (lambda d: d, "error: cannot read: Is a directory"),
    (lambda d: (d / "a.ipynb").write_text("{}") and d / "a.ipynb", "error: not a Jupyter notebook (ValidationError"),
    (lambda d: (d / "b.ipynb").write_text("{not json") and d / "b.ipynb", "error: not a Jupyter notebook ("),
    (lambda d: (d / "c.ipynb").write_bytes(b"\xff\xfe") and d / "c.ipynb", "error: not a Jupyter notebook (UnicodeDecodeError"),
])
def test_an_unusable_notebook_is_one_line_naming_it(tmp_path, capsys, make, says):
    src = make(tmp_path)
    assert main([str(src), str(tmp_path / "out.html")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{src}: {says}") and err.count("\n") == 1 and "Traceback" not in err, err
    assert not (tmp_path / "out.html").exists()


def test_an_unwritable_output_is_one_line_naming_it(tmp_path, capsys):
    import nbformat
    src = tmp_path / "ok.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("hello")]), str(src))
    out = tmp_path / "no" / "such" / "dir.html"
    assert main([str(src), str(out)]) == 1
    err = capsys.readouterr().err
    assert err == f"{out}: error: cannot write: No such file or directory\n"
    assert main([str(src), str(tmp_path / "ok.html")]) == 0
    assert "hello" in (tmp_path / "ok.html").read_text()
