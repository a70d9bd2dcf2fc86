"""An error on a very long source line shows the stretch of the line around its column (120
characters, "..." where cut) with the caret under the column, not the whole line."""
import pytest

import tilenb
from tilenb import TileError


def shown(line):
    src = "kernel u(X: tensor<f32>[N]) {\n" + line + "\n}\n"
    with pytest.raises(TileError) as info:
        tilenb.compile(src, backend="cpu")
    e = info.value
    head, text, caret = str(e).split("\n")
    return e, text[4:], caret[4:]


@pytest.mark.parametrize("pre,post", [(" " * 3000, ""), ("", " + X[0 :+ 4]" * 40), ("  ", " + X[0 :+ 4]" * 40),
                                      (" " * 3000, " + X[0 :+ 4]" * 40), (" " * 70, " + X[0 :+ 4]" * 9)])
def test_the_caret_sits_under_the_column_in_a_window_of_the_line(pre, post):
    line = pre + "X[0 :+ 4] = qq" + post
    e, text, caret = shown(line)
    assert e.column == len(pre) + 13 and e.message == "'qq' is not defined"
    assert len(text) <= 120 + 6
    assert caret.strip() == "^" and text[len(caret) - 1:len(caret) + 1] == "qq", (text, caret)
    assert text.startswith("...") == (len(line) > 120 and e.column > 61)
    assert text.endswith("...") == (len(line) > 120 and len(line) - e.column > 60)
    if len(line) <= 120:
        assert text == line


def test_a_short_line_is_shown_whole():
    line = "  X[0 :+ 4] = qq"
    e, text, caret = shown(line)
    assert text == line and caret == " " * 14 + "^"
