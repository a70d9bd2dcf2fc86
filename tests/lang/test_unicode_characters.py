"""A non-ASCII character outside a comment is a syntax error at its column that says which
character it is (invisible ones print as escapes such as '\\xa0') and, for one that stands in for
ASCII (a pasted minus sign, a no-break space, a byte-order mark), what to write instead.
Non-ASCII text in comments is fine."""
import numpy as np
import pytest

import tilenb
from tilenb import TileSyntaxError

KERNEL = "kernel k(X: tensor<f32>[N]) {{\n  {body}\n}}\n"


@pytest.mark.parametrize("body,col,says", [
    ("X[0 :+ 4] = \u22121.0", 15, "(U+2212 MINUS SIGN; write '-')"),
    ("X[0 :+ 4] = 2.0 \u00d7 X[0 :+ 4]", 19, "(U+00D7 MULTIPLICATION SIGN; write '*')"),
    ("X[0 :+ 4]\u00a0= 1.0", 12, "(U+00A0 NO-BREAK SPACE; write an ordinary space, or nothing)"),
    ("X[0 :+ 4]\u200b = 1.0", 12, "(U+200B ZERO WIDTH SPACE; write an ordinary space, or nothing)"),
    ("let \u00e9 = 1", 7, "(U+00E9 LATIN SMALL LETTER E WITH ACUTE; names are ASCII letters, digits and '_')"),
    ("X[0 :+ 4] = 1.0 \U0001F680", 19, "(U+1F680 ROCKET)"),
])
def test_an_unexpected_character_is_named_with_what_to_write(body, col, says):
    with pytest.raises(TileSyntaxError) as info:
        tilenb.compile(KERNEL.format(body=body), backend="cpu")
    e = info.value
    assert (e.line, e.column) == (2, col), str(e)
    assert e.message.startswith("unexpected character ") and e.message.endswith(says), e.message


def test_a_leading_byte_order_mark_is_named():
    with pytest.raises(TileSyntaxError) as info:
        tilenb.compile("\ufeff" + KERNEL.format(body="X[0 :+ 4] = 1.0"), backend="cpu")
    assert (info.value.line, info.value.column) == (1, 1)
    assert "a byte-order mark: save the source as UTF-8 without one" in info.value.message


def test_non_ascii_comments_compile_and_run():
    mod = tilenb.compile(KERNEL.format(body="X[0 :+ 4] = 1.0  // \u00e9t\u00e9 \u2212 \u6f22\u5b57 \U0001F680"),
                         backend="cpu")
    X = np.zeros(8, np.float32)
    mod.k[1](X)
    np.testing.assert_array_equal(X, [1, 1, 1, 1, 0, 0, 0, 0])
