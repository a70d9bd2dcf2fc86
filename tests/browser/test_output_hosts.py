"""A view's output in hosts other than Jupyter's, as far as this machine can stand them in: a
VS Code-like notebook output (the HTML inserted with innerHTML and its scripts re-created, as
VS Code's HTML renderer does: only type, src, nonce, noModule and async carried over, and the new
script appended outside the view, here to the one element that holds every output, then removed;
in a page that carries only the editor theme's --vscode-* variables, dark here), with every
network request refused. The view draws, follows that theme,
and keeps the CUDA tokens at 4.5:1 contrast or more."""
import pytest

from browser_env import CONTRAST, open_page, output_page, views_ready

pytestmark = pytest.mark.browser

RMS = """@autotune(D in [256])
@launch(256)
kernel rms_norm(X: tensor<f32>[M, D], G: tensor<f32>[1, D], Y: tensor<f32>[M, D]) {
  let r = ctx.block.x * 8
  var x = X[r :+ 8, :]
  var ss: tile<f32>[8, 1] = rowsum(x * x)
  Y[r :+ 8, :] = x * rsqrt(ss / 256.0 + 0.000001)
}
"""

# what VS Code's dark theme gives a notebook output's page (a few of its variables)
THEME = """<style>
:root { --vscode-editor-background: #1e1e1e; --vscode-editor-foreground: #d4d4d4;
        --vscode-descriptionForeground: #a0a0a0; --vscode-editorWidget-background: #252526;
        --vscode-panel-border: #3c3c3c; --vscode-textLink-foreground: #3794ff; }
body { background: var(--vscode-editor-background); color: var(--vscode-editor-foreground); margin: 8px; }
</style>"""


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    import tilenb
    from tilenb.notebook import views
    k = tilenb.compile(RMS, backend="cpu").rms_norm
    outputs = [w._repr_mimebundle_()[0]["text/html"] for w in views(k, "threads,lifetimes,barriers,cuda")]
    html = output_page(outputs, "vscode-outside", head=THEME, body_class="vscode-dark")
    with open_page(html, tmp_path_factory.mktemp("host"), views_ready(4)) as page:
        yield page


def test_the_views_draw_with_no_error_and_no_request(host):
    boxes = host.eval_on_selector_all(".tilenb-view", "bs => bs.map(b => [b.dataset.tilenbView, b.dataset.tilenbError || null])")
    assert boxes == [["threadmap", None], ["ruler", None], ["barriers", None], ["cuda", None]]
    assert host.errors == [] and host.refused == []


def test_the_views_follow_the_hosts_dark_theme(host):
    colours = host.evaluate("() => { const r = getComputedStyle(document.querySelector('.tn-root')); "
                            "return [r.color, r.backgroundColor]; }")
    assert colours == ["rgb(212, 212, 212)", "rgb(30, 30, 30)"]


def test_cuda_tokens_keep_4_5_to_1_on_the_dark_background(host):
    got = host.evaluate(CONTRAST)
    assert {"k", "kt", "mi", "c1"} <= set(got)
    assert min(r for r, _ in got.values()) >= 4.5, got
