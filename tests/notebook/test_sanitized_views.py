"""A view's saved output after an HTML sanitizer of the kind GitHub's notebook viewer uses: an
allowlist with no <script>, no <style>, no class or style attribute; scripts removed with their
contents, every other unknown tag stripped with its text kept (bleach, strip=True). What is left
must read as the view: the PNG inline (data: images allowed), the text summary visible (not only
inside a closed <details>), and none of the view's CSS or code as stray text."""
import base64
import html
import re

import pytest

bleach = pytest.importorskip("bleach")

import tilenb  # noqa: E402
from tilenb.notebook import assets, render, views  # noqa: E402

# close to GitHub's (html-pipeline's SanitizationFilter): the tags and attributes it keeps
TAGS = {"h1", "h2", "h3", "h4", "h5", "h6", "br", "b", "i", "strong", "em", "a", "pre", "code", "img", "tt",
        "div", "ins", "del", "sup", "sub", "p", "ol", "ul", "table", "thead", "tbody", "tfoot", "blockquote",
        "dl", "dt", "dd", "kbd", "q", "samp", "var", "hr", "li", "tr", "td", "th", "s", "strike", "summary",
        "details", "caption", "figure", "figcaption", "abbr", "cite", "mark", "small", "span", "time"}
ATTRS = {"a": ["href"], "img": ["src", "alt", "longdesc"], "details": ["open"], "*": ["title", "align"]}

KERNEL = """@autotune(D in [200])
@launch(128)
kernel scale_rows(X: tensor<f32>[M, D], Y: tensor<f32>[M, D]) {
  let r = ctx.block.x * 4
  var x = X[r :+ 4, :]
  Y[r :+ 4, :] = x * 2.0
}
"""


def github_like(page: str) -> str:
    # scripts go with their contents (the view's scripts never contain '</script')
    page = re.sub(r"<script\b[^>]*>.*?</script\s*>", "", page, flags=re.S | re.I)
    return bleach.clean(page, tags=TAGS, attributes=ATTRS, protocols={"http", "https", "data"}, strip=True)


def visible(clean: str) -> str:
    """The text a reader sees without opening anything: closed <details> bodies taken out."""
    shown = re.sub(r"<details>.*?</details>", "", clean, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", shown))


@pytest.fixture(scope="module")
def bundles():
    k = tilenb.compile(KERNEL, backend="cpu").scale_rows
    return [w._repr_mimebundle_()[0] | {"name": w._name, "text": repr(w)}
            for w in views(k, "threads,lifetimes,barriers,cuda")]


def test_the_sanitized_output_shows_the_picture_and_the_summary_and_no_css(bundles):
    assert [b["name"] for b in bundles] == ["threadmap", "ruler", "barriers", "cuda"]
    for b in bundles:
        raw = b["text/html"]
        assert "<style" not in raw            # the CSS rides in the module's script
        clean = github_like(raw)
        shown = visible(clean)
        css_rules = [ln.strip() for ln in assets.css(b["name"]).splitlines() if "{" in ln or ":" in ln]
        assert css_rules and not [r for r in css_rules if r in clean], b["name"]
        assert "addEventListener" not in clean and "__tilenbViews" not in clean
        first = b["text"].splitlines()[0]
        assert first and first in shown, (b["name"], shown[:300])
        if b["name"] in render.PICTURES:
            # the picture kept, as the same PNG as the image/png entry of the bundle
            src = re.search(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', clean).group(1)
            assert base64.b64decode(src) == b["image/png"]
        if b["name"] != "cuda":
            # the whole summary is on show, each of its lines
            for ln in b["text"].splitlines():
                assert ln in shown, (b["name"], ln)


def test_the_unsanitized_output_still_carries_the_css_for_its_script(bundles):
    for b in bundles:
        assert render.module_script(b["name"]) in b["text/html"]
        assert assets.css(b["name"]).splitlines()[1].strip() in render.module_script(b["name"]).replace("\\n", "\n")
