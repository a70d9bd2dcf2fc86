"""User text inside the generated C++: a tile-language line copied into its `// line N:` comment,
and a file name in a `#line` directive, can hold anything the grammar or the file system allows.

Checked here without a GPU: a line ending in a backslash (which C++ would splice with the next
generated line, losing a statement or breaking the compile), `*/`, trigraphs (`??/` is a
backslash where trigraphs are read), a carriage return, form feed or NUL inside a comment, and a
Unicode line separator. Each kernel's CUDA compiles with NVRTC, keeps both statements (the
second statement's comment and code are still there after C++'s line splicing), and the CPU
reference executor gives numpy's answer at a length that is not a multiple of the tile. The
string literal helper is checked byte for byte through the PTX NVRTC writes for a constant
array initialised from it.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import tilenb
from tilenb.codegen import nvrtc_available, nvrtc_compile
from tilenb.codegen.emitter import c_comment_text, c_string_literal
from tilenb.runtime.gpu import ncu

needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="NVRTC is not installed")

# what the first statement's comment ends with (the rest of its tile line is ordinary code)
TAILS = {
    "backslash": "\\",
    "two_backslashes": "\\\\",
    "backslash_blank": "\\   ",
    "trigraph_backslash": "??/",
    "more_trigraphs": "??= ??( ??) ??' ??< ??> ??! ??- ???/",
    "block_end": "*/ and /* and */",
    "carriage_return": "a\rY[0 :+ 1] = X[0 :+ 1]",
    "form_feed": "a\x0cb",
    "nul": "a\x00b",
    "line_separator": "a\u2028b\u2029c\x85d",
    "quote": "\"'\\\"",
}


def _source(tail: str) -> str:
    return ("@launch(64)\n"
            "kernel bs(X: tensor<f32>[N], Y: tensor<f32>[N]) {\n"
            f"  Y[0 :+ 64] = X[0 :+ 64] * 5.0 // ends with {tail}\n"
            "  Y[64 :+ 64] = X[64 :+ 64] * 7.0\n"
            "}\n")


def _spliced(cuda: str) -> str:
    """The text after C++'s translation phases 1-2 as a compiler that still reads trigraphs does
    them: `??/` is a backslash, then every backslash-newline (blanks allowed between, as GCC and
    EDG accept with a warning) is deleted."""
    return re.sub(r"\\[ \t]*\n", "", cuda.replace("??/", "\\"))


@pytest.mark.parametrize("tail", sorted(TAILS))
def test_a_comment_keeps_the_next_statement(tail):
    mod = tilenb.compile(_source(TAILS[tail]), backend="cpu")
    for arch in (None, "sm_90"):
        cuda = mod.bs.cuda_source(arch=arch)
        assert _spliced(cuda) == cuda, "a generated line would be joined to the one before"
        lines = cuda.split("\n")
        first = [ln for ln in lines if ln.strip().startswith("// line 3: ")]
        second = [i for i, ln in enumerate(lines) if ln.strip().startswith("// line 4: ")]
        assert len(first) == 1 and len(second) == 1
        assert first[0].strip().startswith("// line 3: Y[0 :+ 64] = X[0 :+ 64] * 5.0 // ends with")
        assert lines[second[0]].strip() == "// line 4: Y[64 :+ 64] = X[64 :+ 64] * 7.0"
        # both statements' arithmetic is code, not comment
        code = [ln.split("//")[0] for ln in lines]
        assert any("* 5.0f" in c for c in code[:second[0]]) and any("* 7.0f" in c for c in code[second[0]:])
        for ch in "\r\x00\x0c\u2028\u2029\x85":
            assert ch not in cuda


@needs_nvrtc
@pytest.mark.parametrize("tail", sorted(TAILS))
def test_nvrtc_compiles_it(tail):
    mod = tilenb.compile(_source(TAILS[tail]), backend="cpu")
    nvrtc_compile(mod.bs.cuda_source(arch="sm_90"), "sm_90", use_cache=False)
    ptx = nvrtc_compile(mod.bs.cuda_source(arch=None), "compute_80", use_cache=False).decode()
    # both stores are in the machine code: one multiply by 5 and one by 7 (f32 immediates)
    assert "0f40A00000" in ptx and "0f40E00000" in ptx


@pytest.mark.parametrize("tail", ["backslash", "trigraph_backslash", "carriage_return"])
def test_cpu_executor_agrees_with_numpy(tail):
    mod = tilenb.compile(_source(TAILS[tail]), backend="cpu")
    rng = np.random.default_rng(3)
    X = rng.standard_normal(100).astype(np.float32)
    Y = np.full(100, -7.0, np.float32)
    mod.bs[1](X, Y)
    want = np.concatenate([X[:64] * 5.0, X[64:] * 7.0]).astype(np.float32)
    np.testing.assert_array_equal(Y, want)


def test_comment_text_rules():
    assert c_comment_text("a \\") == "a \\ (the line ends in a backslash)"
    assert c_comment_text("a \\  ") == "a \\ (the line ends in a backslash)"
    assert c_comment_text("x */ y") == "x * / y"
    assert c_comment_text("what??/") == "what?\\?/"
    assert c_comment_text("a\rb\x00c") == "a<U+000D>b<U+0000>c"
    assert c_comment_text("tab\there ok?? yes") == "tab\there ok?? yes"


LITERALS = ["plain.tile", "C:\\Users\\me\\kernel.tile", 'say "hi"??/ ??=', "tab\there\nnew", "déjà 7\x01" + "9",
            "\\", ""]


@needs_nvrtc
def test_string_literal_bytes_through_nvrtc():
    decls = "\n".join(f"__device__ const char s{i}[] = {c_string_literal(t)};" for i, t in enumerate(LITERALS))
    uses = " + ".join(f"s{i}[0]" for i in range(len(LITERALS)))
    src = decls + f'\nextern "C" __global__ void k(char* o) {{ o[0] = {uses}; }}\n'
    ptx = nvrtc_compile(src, "compute_80", use_cache=False).decode()
    for i, t in enumerate(LITERALS):
        m = re.search(rf"\.b8 s{i}\[(\d+)\](?: = \{{([^}}]*)\}})?;", ptx)
        assert m, f"s{i} not in the PTX"
        given = bytes(int(v) for v in m.group(2).split(",")) if m.group(2) else b""
        got = given + bytes(int(m.group(1)) - len(given))     # PTX leaves out trailing zero bytes
        assert got == t.encode("utf-8") + b"\0"


@needs_nvrtc
def test_line_directives_with_odd_file_names_compile():
    mod = tilenb.compile(_source("\\"), backend="cpu")
    cuda = mod.bs.cuda_source(arch="sm_90")
    names = ("C:\\tmp\\a \"b\"??/\\kernel.tile", "d\u00e9j\u00e0.cu", "bars\\.txt")
    lined = ncu.lined_source(cuda, 0, *names)
    assert lined.text.count("#line 3 " + c_string_literal(names[0].replace('"', "'"))) > 0
    nvrtc_compile(lined.text, "sm_90", use_cache=False)


def test_helper_calls_reads_its_own_directives():
    src = """
@launch(64)
kernel h(X: tensor<f32>[N], Y: tensor<f32>[N]) {
  Y[0 :+ 64] = X[0 :+ 64] * 2.0 // \\
}
"""
    cuda = tilenb.compile(src, backend="cpu").h.cuda_source(arch="sm_90")
    calls = ncu.helper_calls(cuda)
    assert calls and all(lines == [4] for lines in calls.values())


def test_comment_lines_are_counted_by_newlines_only():
    """A form feed or a lone carriage return inside a tile comment is no line break for the
    grammar, so the `// line N:` comment shows line N as the grammar counts it (it showed a
    piece of the comment line instead)."""
    src = "// a\x0cb\r c\nkernel k(Y: tensor<f32>[N]) {\n  Y[0] = 1.0\n}\n"
    cuda = tilenb.compile(src, backend="cpu").k.cuda_source(arch=None)
    assert "  // line 3: Y[0] = 1.0\n" in cuda
