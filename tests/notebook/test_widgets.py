"""The views without a browser: their traits, text summaries, offline HTML and PNG, the CUDA
line links, the timing record, and that the ES modules ship with the package."""
import json
import re
import types

import pytest

pytest.importorskip("traitlets")

import tilenb  # noqa: E402
from tilenb.notebook import assets, build, demo, hardware, render, widgets  # noqa: E402
from tilenb.notebook.fixture import RMS_NORM_SOURCE, rms_norm_analysis  # noqa: E402

VIEWS = {"threadmap": widgets.ThreadMap, "ruler": widgets.LifetimeRuler, "barriers": widgets.BarrierView,
         "timing": widgets.TimingView, "cuda": widgets.CudaView}


def test_every_view_has_its_es_module_and_css_in_the_package():
    for name in assets.WIDGETS:
        js = assets.esm(name)
        assert js.startswith(assets.asset("common.js"))   # the shared DOM helpers come first
        assert "function render(" in js and js.rstrip().endswith("export default { render };")
        # anywidget's preferred form: the default export only (a named `render` export draws a
        # deprecation warning in the browser console)
        assert re.findall(r"^export .*", js, re.M) == ["export default { render };"]
        assert "http://" not in js.replace("http://www.w3.org/2000/svg", "") and "https://" not in js
        assert assets.css(name).startswith(assets.asset("common.css"))
    # the package reaches the same files through tilenb/widgets (a link in a checkout, a copy in a wheel)
    assert (assets._PACKAGE / "widgets" / "threadmap.js").is_file()


def test_fixture_is_consistent_with_its_source():
    a = rms_norm_analysis()
    tilenb.compile(RMS_NORM_SOURCE, backend="cpu")
    src = RMS_NORM_SOURCE.splitlines()
    for c in a["copies"]:
        assert c["tensor"] + "[" in src[c["line"] - 1]
        covered = sorted((r[1], r[2] + k) for r in c["runs"] for k in range(r[3]))
        rows, cols = c["shape"]
        assert covered == [(i, j) for i in range(rows) for j in range(cols)]   # every element once


def test_thread_map_text_names_copies_and_per_warp_figures():
    tm = demo(["threads"])[0]
    text = repr(tm)
    assert text.splitlines()[0] == "thread map of rms_norm: 256 threads per CTA (8 warps), 3 copy statements"
    assert "line 5: load X -> x, [8, 256] f32, vector width 4, 512 runs by 256 threads" in text
    assert "warps 0-7: 32 sectors (ideal 32), 8 wavefronts (ideal 8)" in text
    assert "0x" not in text and text == repr(demo(["threads"])[0])      # deterministic


def test_thread_map_text_flags_uncoalesced_warps_and_views():
    a = rms_norm_analysis()
    c = a["copies"][0]
    c["warps"][3]["sectors"] = 64
    c["warps"][5]["wavefronts"] = 32
    view = dict(c, line=6, tile="c_old", is_view=True, wavefronts=0, ideal_wavefronts=0)
    w = widgets.ThreadMap(kernel="k", threads=256, copies=[c, view], tiles=a["tiles"],
                          lines=[[5, "6", "  var x = X[r :+ 8, :]"], [6, "7", "  let k = K[0 :+ 8, :]"]])
    text = repr(w)
    assert "line 6: load X -> x" in text                       # labels are the cell's lines
    assert "warp 3: 64 sectors (ideal 32), 8 wavefronts (ideal 8)  <- uncoalesced" in text
    assert "warp 5: 32 sectors (ideal 32), 32 wavefronts (ideal 8)  <- bank conflicts" in text
    assert "line 7: let c_old views X (no tile is made; read into registers)" in text
    assert "256 sectors (ideal 256); no shared-memory side" in text
    fix = {"kind": "pad", "pad": 1, "row_length": 257, "bytes": 8224, "wavefronts": 8, "ideal_wavefronts": 8,
           "keeps_vectors": False}
    w.copies = [dict(c, fix=fix)]
    assert ("fix: pad each tile row by 1 element (rows of 257): 8 wavefronts (ideal 8), tile 8,224 B; "
            "vector accesses are lost") in repr(w)
    w.copies = [dict(c, fix=dict(fix, pad=2, wavefronts=1))]
    assert "pad each tile row by 2 elements (rows of 257): 1 wavefront (ideal 8)" in repr(w)


def test_ruler_text_gives_footprint_budget_and_live_tiles_per_line():
    text = repr(demo(["lifetimes"])[0])
    assert text.splitlines()[0] == "shared memory of rms_norm: footprint 9,248 B of 49,152 B static budget (18.8%)"
    assert "  line 8: x@0+8192 inv@9216+32 g@8192+1024  (9,248 B)" in text


def test_barrier_text_puts_each_mark_before_its_line():
    lines = repr(demo(["barriers"])[0]).splitlines()
    i = next(k for k, l in enumerate(lines) if "rowsum(x * x)" in l)
    assert "barrier before line 6 (x): rowsum reads rows of x" in lines[i - 1]


def test_mimebundle_has_every_kernel_free_rendering_and_no_live_widget():
    import base64
    for w in demo(["threads", "lifetimes", "barriers"]):
        data, meta = w._repr_mimebundle_()
        # no widget-view part: a reopened notebook would show "model not found" in its place,
        # since JupyterLab's widget renderer outranks every other mimetype and has no fallback
        assert set(data) == ({"text/plain", "text/html", "image/png"} if w._name in render.PICTURES
                             else {"text/plain", "text/html"})
        assert data["text/plain"] == repr(w)
        static = data["text/html"].split('<div class="tilenb-root"')[0]
        if w._name in render.PICTURES:
            assert data["image/png"][:8] == b"\x89PNG\r\n\x1a\n"
            # the same picture inline in the static part, for front ends that take the HTML
            src = re.search(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', static).group(1)
            assert base64.b64decode(src) == data["image/png"]
        else:
            assert "<img" not in static and "image/png" not in data   # a listing: its text is its picture
        assert "<script" not in static and "<style" not in static
        assert meta["tilenb"]["view"] == w._name


def test_offline_html_carries_module_css_and_traits_and_no_network():
    w = demo(["threads"])[0]
    page = render.html("threadmap", w.state())
    assert not re.search(r"""(src|href)\s*=\s*["']?https?:""", page)
    # classic inline scripts only: no import(), no blob: URL, no eval (strict front-end policies)
    assert "import(" not in page and "blob:" not in page and "eval(" not in page and "cdn" not in page.lower()
    scripts = re.findall(r"<script[^>]*>(.*?)</script>", page, flags=re.S)
    assert len(scripts) == 3 and all("</script" not in s for s in scripts)
    data = json.loads(re.search(r'<script type="application/json" class="tilenb-data">(.*?)</script>', page, re.S).group(1))
    assert data["state"] == json.loads(json.dumps(w.state()))
    assert data["hash"] == render.module_hash("threadmap")
    module = render.module_script("threadmap")
    assert module in page and not re.search(r"^export ", module, re.M)
    assert "thread map of rms_norm" in page            # the text summary, shown without scripts


@pytest.mark.skipif(__import__("shutil").which("node") is None, reason="needs node to parse the scripts")
def test_inline_scripts_are_valid_javascript(tmp_path):
    import subprocess
    for name in assets.WIDGETS:
        page = render.html(name, VIEWS[name](kernel="k").state())
        for i, code in enumerate(re.findall(r"<script>(.*?)</script>", page, flags=re.S)):
            f = tmp_path / f"{name}{i}.js"
            f.write_text(code)
            subprocess.run(["node", "--check", str(f)], check=True, capture_output=True)


def test_html_escapes_source_text_that_looks_like_markup():
    w = widgets.BarrierView(kernel="k", lines=[[1, "2", "  </script><b>x</b> & y"]], barriers=[])
    page = render.html("barriers", w.state())
    assert "</script><b>" not in page.split('class="tilenb-data">')[1].split("</script>")[0]
    assert "&lt;/script&gt;" in page                   # in the fallback text


def test_views_render_with_no_data_at_all():
    for name, cls in VIEWS.items():
        w = cls(kernel="empty")
        assert repr(w).strip()
        if name in render.PICTURES:
            assert render.png(name, w.state())[:4] == b"\x89PNG"
        assert "tilenb-root" in render.html(name, w.state())


def test_cuda_lines_link_to_their_tile_lines():
    code = ("extern \"C\" __global__ void k(float* X) {\n"
            "  // line 4: var x = X[r :+ 8, :]\n"
            "  for (int i = threadIdx.x; i < 512; i += 256) {\n"
            "    x[i] = X[i];\n"
            "  }\n"
            "  __syncthreads();\n"
            "  // line 6: rowsum\n"
            "  float s = 0.0f;\n"
            "}\n")
    assert build.cuda_origins(code) == [0, 4, 4, 4, 4, 4, 6, 6, 0]
    toks = build.cuda_tokens(code)
    assert len(toks) == 9
    assert ["".join(t for _, t in line) for line in toks] == code.splitlines()
    classes = {c for line in toks for c, _ in line}
    assert "c1" in classes and "kt" in classes         # comments and types are highlighted
    w = widgets.CudaView(kernel="k", cuda=toks, origin=build.cuda_origins(code), lines=[[4, "5", "var x"]])
    assert repr(w).splitlines()[0] == "generated CUDA of k: 9 lines"


def _fake_kernel(backend, last_run=None):
    module = types.SimpleNamespace(backend=backend)
    return types.SimpleNamespace(module=module, last_run=last_run, name="k", ir=lambda: None)


def test_timing_on_the_cpu_says_no_gpu_time_exists():
    rec = build.timing_record(_fake_kernel("cpu"))
    w = widgets.TimingView(kernel="k", timing=rec)
    assert repr(w).startswith("timing of k: no GPU time exists: this kernel runs on the CPU backend")


def test_timing_record_from_a_gpu_launch_uses_the_device_peaks():
    run = {"kernel_ms": 0.5, "host_ms": 0.02, "bytes": 2_000_000_000, "flops": 1e9, "device": "NVIDIA H200",
           "variant": {"TILE": 64}, "variants": [({"TILE": 64}, 0.5), ({"TILE": 128}, 0.7)]}
    rec = build.timing_record(_fake_kernel("cuda", run))
    assert rec["bytes_per_s"] == pytest.approx(4e12)
    assert rec["flops_per_s"] == pytest.approx(2e12)
    assert rec["peak"]["bytes_per_s"] == 4.8e12 and "datasheet" in rec["peak"]["bytes_source"]
    assert [v["best"] for v in rec["variants"]] == [True, False]
    text = repr(widgets.TimingView(kernel="k", timing=rec))
    assert "kernel time (CUDA events): 500.0 us" in text
    assert "83.3% of H200 memory bandwidth" in text
    assert "variant TILE=64: 500.0 us  (fastest)" in text
    assert render.png("timing", {"kernel": "k", "timing": rec})[:4] == b"\x89PNG"


def test_peak_table_knows_h200_and_refuses_to_guess():
    p = hardware.peak_for("NVIDIA H200", "BF16 tensor core (dense)")
    assert p["flops_per_s"] == pytest.approx(989.5e12) and p["copy_bytes_per_s"] == 4.3e12
    assert hardware.peak_for("NVIDIA H200")["flops_per_s"] == 67e12
    assert hardware.peak_for("Some Other GPU") is None and hardware.peak_for(None) is None


def test_views_of_a_compiled_kernel_list_its_lines_as_the_user_counts_them():
    mod = tilenb.compile(RMS_NORM_SOURCE, backend="cpu", line_offset=1)
    k = mod.rms_norm
    lines = build.listing(k, [], build.default_labels(k))
    assert lines[0] == [1, "2", "@autotune(D in [256])"]
    assert len(lines) == 10
    ws = build.make_views(k, ("threads", "lifetimes", "barriers", "timing", "cuda"))
    assert [w._name for w in ws] == ["threadmap", "ruler", "barriers", "timing", "cuda"]
    for w in ws:
        assert repr(w).strip()             # whatever the later stages can or cannot do yet
    with pytest.raises(tilenb.TileError):
        build.make_views(k, ("pictures",))


def test_parse_views():
    assert build.parse_views(None, "cpu") == ("threads", "lifetimes", "barriers")
    assert build.parse_views(None, "cuda")[-1] == "timing"
    assert build.parse_views("none") == ()
    assert build.parse_views("cuda, threads") == ("threads", "cuda")
    assert build.parse_views("all") == build.VIEW_NAMES


def test_timing_record_reads_the_cuda_backends_run_report():
    from tilenb.runtime.checks import RunReport
    mod = tilenb.compile(RMS_NORM_SOURCE, backend="cuda")
    k = mod.rms_norm
    timings = [{"variant": "D=256", "tune": {"D": 256}, "ms": 0.02, "note": ""}]
    k.last_run = RunReport("cuda", "rms_norm", {"D": 256}, "@autotune: timed 1 variant(s); kept D=256 (0.0200 ms).",
                           (125, 1, 1), 256, 125, 2e-5, False,
                           {"kernel_ms": 0.02, "wall_s": 0.0005, "timings": timings, "device": "NVIDIA H200",
                            "dims": {"M": 1000}})
    rec = build.timing_record(k)
    # X and Y are [1000, 256] f32, G is [1, 256] f32: every tensor once
    assert rec["bytes"] == (2 * 1000 * 256 + 256) * 4
    assert rec["bytes_per_s"] == pytest.approx(rec["bytes"] / 2e-5)
    assert rec["host_ms"] == pytest.approx(0.48)
    assert rec["host_note"].endswith("compilation on first use, timing every @autotune variant")
    assert rec["variants"] == [{"label": "D=256", "ms": 0.02, "best": True, "note": ""}]
    assert rec["peak"]["device"] == "H200" and rec["peak"]["flops_kind"] == "FP32"
    k.last_run = None
    assert repr(widgets.TimingView(kernel="rms_norm", timing=build.timing_record(k))) == \
        "timing of rms_norm: not launched on the GPU yet."


def test_line_numbers_inside_texts_are_the_cells_lines():
    """The analyses and the code generator count lines of the compiled source; every view
    relabels them, inside reasons and CUDA comments too, as the user counts them."""
    mod = tilenb.compile(RMS_NORM_SOURCE, backend="cpu", line_offset=1)
    labels = build.default_labels(mod.rms_norm)
    assert build.relabel("the copy at line 5 and line 6; lines", labels) == "the copy at line 6 and line 7; lines"
    ws = build.make_views(mod.rms_norm, ("barriers", "cuda"))
    bars, cuda = ws
    if bars.barriers:
        first = bars.barriers[0]
        assert first["line"] == 6                   # still a compiled-source line, for the listing
        text = repr(bars)
        assert "barrier before line 7" in text         # rowsum is line 7 of the cell
    if cuda.cuda:
        code = ["".join(t for _, t in line) for line in cuda.cuda]
        marks = [(i, l.strip()) for i, l in enumerate(code) if l.strip().startswith("// line ")]
        for i, text in marks:
            n = int(text.split()[2].rstrip(":"))
            src = RMS_NORM_SOURCE.splitlines()[cuda.origin[i] - 1].strip()
            assert n == cuda.origin[i] + 1 and text.endswith(src)


def _legacy_notebook(views_, with_state):
    """A notebook as earlier tilenb versions saved it: each view's output also carried a live
    anywidget part (widget-view mimetype), and nbclient may have saved the widgets' state."""
    nbformat = pytest.importorskip("nbformat")
    import base64
    from tilenb.notebook.export import WIDGET_STATE, WIDGET_VIEW
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("show()")
    state = {}
    for i, w in enumerate(views_):
        data, meta = w._repr_mimebundle_()
        data = {k: (v if isinstance(v, str) else base64.b64encode(v).decode()) for k, v in data.items()}
        model = f"{i:032x}"
        data[WIDGET_VIEW] = {"model_id": model, "version_major": 2, "version_minor": 1}
        cell.outputs.append(nbformat.v4.new_output("display_data", data=data, metadata=meta))
        state[model] = {"model_name": "AnyModel", "state": {"layout": "IPY_MODEL_L" + model}}
        state["L" + model] = {"model_name": "LayoutModel", "state": {}}
    nb.cells.append(cell)
    if with_state:
        nb.metadata["widgets"] = {WIDGET_STATE: {"state": state, "version_major": 2, "version_minor": 0}}
    return nb


def test_nbconvert_draws_the_inlined_views():
    nbformat = pytest.importorskip("nbformat")
    exporter = pytest.importorskip("nbconvert").HTMLExporter()
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("show()")
    for w in demo():
        data, meta = w._repr_mimebundle_()
        data = {k: (v if isinstance(v, str) else __import__("base64").b64encode(v).decode()) for k, v in data.items()}
        cell.outputs.append(nbformat.v4.new_output("display_data", data=data, metadata=meta))
    nb.cells.append(cell)
    page, _ = exporter.from_notebook_node(nb)
    assert page.count('class="tilenb-view"') == 3
    assert "application/vnd.jupyter.widget-view+json" not in page.split("<body")[1]


def test_export_strips_the_live_part_and_state_of_legacy_tilenb_views_only():
    from tilenb.notebook.export import WIDGET_VIEW, strip_live_views, to_html
    pytest.importorskip("nbconvert")
    nb = _legacy_notebook(demo(), with_state=True)
    nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]["other"] = {"model_name": "IntSliderModel"}
    page = to_html(nb)
    assert page.count('class="tilenb-view"') == 3 and "IntSliderModel" in page
    assert WIDGET_VIEW in nb.cells[0].outputs[0]["data"]          # to_html copies the notebook
    assert strip_live_views(nb) == 3
    assert list(nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]) == ["other"]
    nb2 = _legacy_notebook(demo(["threads"]), with_state=True)
    strip_live_views(nb2)
    assert "widgets" not in nb2.metadata              # nothing left: no widget manager is loaded at all
    assert "unpkg.com" not in to_html(nb2)


def test_exported_page_asks_the_network_for_nothing():
    nbformat = pytest.importorskip("nbformat")
    from tilenb.notebook.export import to_html
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# A title"), nbformat.v4.new_code_cell("1")]
    page = to_html(nb)
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page)
    assert "mathjax" not in page.lower() and "require.js" not in page and "import(\"http" not in page


def test_thread_map_opens_on_the_copy_furthest_from_ideal():
    a = rms_norm_analysis()
    assert build.worst_copy(a["copies"]) == 0                  # all ideal: the first
    a["copies"][2]["wavefronts"] += 8
    a["copies"][1]["sectors"] += 4
    assert build.worst_copy(a["copies"]) == 2
    assert build.worst_copy([]) == 0
