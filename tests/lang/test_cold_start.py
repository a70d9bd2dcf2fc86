"""The cold-start shortcuts of the front end give what the long way gives.

- The parser's syntax tree built during Lark's LALR parse is the one the parse-tree path
  builds from the same callbacks, spans included, and literals out of range read as before.
- Lark's grammar cache (in $TILENB_CACHE_DIR/parser): a second build loads the saved analysis
  instead of analysing the grammar; a corrupt, stale, unreadable or unwritable cache never
  changes what `parse` returns or raises.
- The first launch: a @grid evaluated without the CPU executor (`launch._grid_int`) is the value
  the executor gives, or is left to it; the cubin file a launch loads is NVRTC's disk-cache entry
  (the named file for tools, made when asked for, is a hard link to it where possible), and a
  link never lets a write reach that entry.
"""
import os
import random
from pathlib import Path

import lark
import lark.lark
import numpy as np
import pytest

from support import fake_cupy
import tilenb
import tilenb.api
import tilenb.codegen.nvrtc as nv
import tilenb.runtime.gpu.cuda as tc
from tilenb.lang import parser as P
from tilenb.lang.diagnostics import TileError
from tilenb.runtime.cpu.executor import eval_uniform
import tilenb.runtime.checks as checks_module
from tilenb.runtime.checks import Bound, _grid_int, resolve_grid

from tilenb.examples import suite_kernels as SK  # noqa: E402

from test_parse_grammar import EVERYTHING  # noqa: E402

SEEDS = (Path(__file__).resolve().parents[2] / "tilenb" / "examples" / "seed_kernels.tile").read_text()
PROGRAMS = [EVERYTHING, SK.program(), SEEDS,
            "fn sq(x) = x * x\nkernel k(X: tensor<f32>[N]) { X[0] = sq(X[1]); if X[0] > 1.0 { return } else { X[1] = -X[1] } }\n",
            "kernel k(X: tensor<f32>[N]) {\r\n  // a comment\r\n  for<unroll 2> i in range(0, 4) {\r\n    X[i] = 0x1F\r\n  }\r\n}\r\n",
            "", "// only a comment", "\n\n"]


def _outcome(text, *, tree=False):
    """What `parse` gives: ("ok", Program) or ("error", class, message, line, column); with
    `tree`, the Program the parse-tree path (`_lark()` + `_ToAst`) builds from a text that parses."""
    try:
        if tree:
            kernels, fns = P._ToAst().transform(P._lark().parse(text))
            return ("ok", tilenb.lang.ast.Program(kernels, fns, text, "<cell>"))
        return ("ok", P.parse(text))
    except TileError as e:
        return ("error", type(e).__name__, str(e), e.line, e.column)


def _mutants(text, n, seed):
    rng = random.Random(seed)
    pieces = list("(){}[]<>=+-*/%,;:.\n @!~&|^0123456789xyz_") + ["let ", "var ", "else ", "in ", "range",
                                                                    "kernel ", "tile", "//", ":+", "<<", "1.5e3"]
    out = []
    for _ in range(n):
        s = list(text)
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(s) + 1)
            r = rng.random()
            if r < 0.4 and i < len(s):
                del s[i]
            elif r < 0.8:
                s.insert(i, rng.choice(pieces))
            elif i < len(s):
                s[i] = rng.choice(pieces)
        out.append("".join(s))
    return out


@pytest.mark.parametrize("i", range(len(PROGRAMS)))
def test_the_lalr_builder_gives_the_parse_tree_path_program(i):
    text = PROGRAMS[i]
    assert _outcome(text) == _outcome(text, tree=True)


def test_malformed_texts_get_lark_s_diagnostics():
    texts = _mutants(SK.kernel_text("attention_bf16"), 150, 1) + _mutants(EVERYTHING, 150, 2)
    errors = 0
    for t in texts:
        got = _outcome(t)
        errors += got[0] == "error"
        if got[0] == "ok":
            assert got == _outcome(t, tree=True), t
    assert errors > 100


def test_deep_programs_and_literals_out_of_range_read_as_before():
    deep = "kernel k(X: tensor<f32>[N]) {\n  X[0] = " + " + ".join(["X[1]"] * 150) + "\n}\n"
    huge = "kernel k(X: tensor<f32>[N]) {\n  X[0] = 1\n  X[1] = 1" + "9" * 45 + "\n}\n"
    assert _outcome(deep) == _outcome(deep, tree=True)
    assert _outcome(huge)[0] == "error" and "too long" in _outcome(huge)[2]


@pytest.fixture
def parser_in(monkeypatch):
    """Rebuild the parser (as at the first parse of a process) with TILENB_CACHE_DIR = dir."""
    def rebuild(cache_dir):
        monkeypatch.setenv("TILENB_CACHE_DIR", str(cache_dir))
        for f in (P._fast, P._lark):
            f.cache_clear()
    yield rebuild
    for f in (P._fast, P._lark):
        f.cache_clear()


def _no_grammar_analysis(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("the grammar was analysed again: the cache was not used")
    monkeypatch.setattr(lark.lark, "load_grammar", refuse)


def _same_parses(expected):
    for text, want in expected.items():
        assert _outcome(text) == want


def test_a_second_build_loads_the_saved_grammar_analysis(parser_in, tmp_path, monkeypatch):
    expected = {t: _outcome(t) for t in PROGRAMS[:3]}
    parser_in(tmp_path)
    P._fast()
    P._lark()
    files = sorted(p.name for p in (tmp_path / "parser").iterdir())
    assert [f.split("_")[1] for f in files] == ["fast", "tree"]
    parser_in(tmp_path)
    _no_grammar_analysis(monkeypatch)
    for t, want in expected.items():
        assert _outcome(t) == want
    assert _outcome(PROGRAMS[0], tree=True) == expected[PROGRAMS[0]]
    P._lark()


@pytest.mark.parametrize("damage", ["garbage", "truncated", "stale", "empty", "directory"])
def test_a_damaged_cache_file_is_rebuilt_and_parsing_is_unchanged(parser_in, tmp_path, monkeypatch, damage):
    expected = {t: _outcome(t) for t in PROGRAMS[:3]}
    parser_in(tmp_path)
    P._fast()
    path = next((tmp_path / "parser").glob("lark_fast_*"))
    data = path.read_bytes()
    if damage == "garbage":
        path.write_bytes(b"\x80\x04not a pickle at all" * 50)
    elif damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "stale":   # an analysis saved for another grammar, under this file's name
        head, _, body = data.partition(b"\n")
        path.write_bytes(b"0" * len(head) + b"\n" + body)
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        path.unlink()
        path.mkdir()
    parser_in(tmp_path)
    for t, want in expected.items():
        assert _outcome(t) == want
    _same_parses(expected)
    if damage != "directory":   # rewritten whole: the next build loads it
        parser_in(tmp_path)
        _no_grammar_analysis(monkeypatch)
        P._fast()


def test_an_unwritable_cache_directory_only_loses_the_saving(parser_in, tmp_path):
    expected = {t: _outcome(t) for t in PROGRAMS[:3]}
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    parser_in(blocker)                      # $TILENB_CACHE_DIR/parser cannot be made
    for t, want in expected.items():
        assert _outcome(t) == want
    _same_parses(expected)
    assert blocker.read_text() == "not a directory"


# ---- the first launch ----------------------------------------------------------------------------
GRIDS = """
@autotune(T in [64, 128])
@launch(128)
@grid(cdiv(N, T) * 2 - 1, max(M / 3, 1) % 5 + min(H, n), cdiv(M - 100, T) + (N - 3) / 2 + n)
kernel g(X: tensor<f32>[M, N], Y: tensor<f32>[H, 4], n: i32, s: u16, q: f32) {
  X[0, 0] = q
}
"""


def _grid_or_error(kir, b):
    try:
        return resolve_grid(kir, None, b)
    except TileError as e:
        return type(e).__name__, str(e)


@pytest.mark.parametrize("M, N, H, n", [(1, 1, 1, 1), (100, 3, 7, 2), (37, 4096, 2, 0), (1000, 9, 65535, 5),
                                        (2 ** 40, 2 ** 33, 3, 2 ** 31 - 1), (5, 2 ** 62, 1, 1), (99, 2, 3, -4)])
def test_a_grid_is_the_cpu_executor_s_value(M, N, H, n, monkeypatch):
    k = tilenb.compile(GRIDS, backend="cpu").g
    dims = {"M": M, "N": N, "H": H}
    scalars = {"n": np.int32(n), "s": np.uint16(3), "q": np.float32(1.0)}
    b = Bound(dims, {}, scalars)
    for kir in k.checked.variants.values():
        fast = [_grid_int(e, b) for e in kir.grid]
        want = [int(eval_uniform(kir, e, dims, scalars)) for e in kir.grid]
        assert all(v is None or v == w for v, w in zip(fast, want))
        if M >= 100 and 3 <= N < 2 ** 61:
            assert None not in fast         # all of it within what _grid_int evaluates
        got = _grid_or_error(kir, b)
        with monkeypatch.context() as m:   # every entry through the executor
            m.setattr(checks_module, "_grid_int", lambda e, b: None)
            assert _grid_or_error(kir, b) == got


CUBIN = b"\x7fELF" + bytes(range(256)) * 64


@pytest.fixture
def stub_nvrtc(monkeypatch, tmp_path):
    """fake_cupy for CuPy and the GPU, and an NVRTC whose compile returns CUBIN at once (the rest of
    nvrtc_compile, its caches included, runs as it is)."""
    class FakeNvrtc:
        @staticmethod
        def getVersion():
            return (12, 4)
    real = nv.nvrtc_compile
    with fake_cupy.installed(monkeypatch, tmp_path) as cp:
        monkeypatch.setattr(nv, "nvrtc_compile", real)
        monkeypatch.setattr(nv, "_cupy_nvrtc", lambda: FakeNvrtc)
        monkeypatch.setattr(nv, "_compile_cupy", lambda m, source, name, opts, want: (CUBIN, ""))
        yield cp


def test_the_loaded_cubin_file_holds_nvrtc_s_bytes(stub_nvrtc, tmp_path):
    """A cold launch writes the cubin once (NVRTC's disk-cache entry) and loads that file; the
    file of its own name (`cubin_path`, for tools) is made when asked for, a hard link to it."""
    cp = stub_nvrtc
    k = tilenb.compile(SK.kernel_text("add_f32"), backend="cuda").add_f32
    x, y, z = (cp.asarray(np.ones(4096, np.float32)) for _ in range(3))
    k(x, y, z, variant={"TILE": 4096, "NT": 256})
    cached = list((tmp_path / "nvrtc").glob("*.cubin"))
    assert len(cached) == 1 and cached[0].read_bytes() == CUBIN
    assert cp.loaded == [str(cached[0])]
    assert not (tmp_path / "cubin").exists()         # not written on the way to the launch
    assert not list(tmp_path.rglob("*.tmp"))
    ks = tc.kernel_source(k, k.ir(TILE=4096, NT=256), tc.device_target())
    named = tc.cubin_path(ks, tc.device_target())
    assert named.parent == tmp_path / "cubin" and named.read_bytes() == CUBIN
    assert os.path.samefile(named, cached[0])
    # a second process: NVRTC's entry is read from disk and loaded; the named file is kept as it is
    tilenb.api.clear_caches()
    before = os.stat(named).st_mtime_ns
    k2 = tilenb.compile(SK.kernel_text("add_f32"), backend="cuda").add_f32
    k2(x, y, z, variant={"TILE": 4096, "NT": 256})
    assert cp.loaded[-1] == str(cached[0]) and len(list((tmp_path / "nvrtc").glob("*.cubin"))) == 1
    assert tc.cubin_path(ks, tc.device_target()) == named
    assert named.read_bytes() == CUBIN and os.stat(named).st_mtime_ns == before


def test_without_a_disk_cache_entry_the_launch_loads_a_file_of_its_own(stub_nvrtc, tmp_path, monkeypatch):
    """NVRTC's result not kept on disk (its write failed): the launch writes the named file and
    loads it."""
    cp = stub_nvrtc
    monkeypatch.setattr(nv, "cached_file", lambda data: None)
    k = tilenb.compile(SK.kernel_text("add_f32"), backend="cuda").add_f32
    x, y, z = (cp.asarray(np.ones(4096, np.float32)) for _ in range(3))
    k(x, y, z, variant={"TILE": 4096, "NT": 256})
    named = list((tmp_path / "cubin").glob("*.cubin"))
    assert len(named) == 1 and named[0].read_bytes() == CUBIN and cp.loaded == [str(named[0])]


def test_a_file_is_never_written_through_a_link(tmp_path):
    same = tmp_path / "entry.cubin"
    same.write_bytes(b"other bytes")            # not the data: a link would be wrong
    path = tmp_path / "sub" / "k.cubin"
    tc._put_file(path, CUBIN, same)
    assert path.read_bytes() == CUBIN and same.read_bytes() == b"other bytes"
    same2 = tmp_path / "entry2.cubin"
    same2.write_bytes(CUBIN)
    tc._put_file(path, CUBIN, same2)            # the same bytes: a link (or a copy) of them
    assert path.read_bytes() == CUBIN and same2.read_bytes() == CUBIN
    tc._put_file(path, b"new", same2)
    assert path.read_bytes() == b"new" and same2.read_bytes() == CUBIN
    tc._put_file(path, CUBIN, tmp_path / "missing")
    assert path.read_bytes() == CUBIN
    assert not list(tmp_path.rglob("*.tmp"))
