"""Every access the analysis calls an N-byte vector is one N-byte instruction in the machine code.

Without a GPU: NVRTC compiles the generated CUDA for sm_90, `nvdisasm` (the nvidia-cuda-nvdisasm
wheel, in the `test` extra) disassembles it with line information, and `sass_widths.compare`
maps every global and shared-memory instruction back to its statement of the tile program and
checks its width against the statement's accesses (`Access.vector`; the rules are in
tests/support/sass_widths.py). The memory-bound kernels of the suite (tilenb/examples/suite_kernels.py), the
shipped examples, the tutorials and the tests (the sources of scripts/cuda_corpus.py) are
checked, one default variant each; kernels with dots (tensor-core paths, which stage their
operands with ldmatrix, cp.async and TMA by rules of their own) and cluster kernels (which read
other CTAs' shared memory) are left out.

The first tests pin the case that made this file: a guarded vector store (`Y[r :+ 8, :] = x *
2.0`: every chunk is stored whole unless it crosses the tensor's last row) that NVRTC once turned
into four predicated 4-byte stores, in f32, bf16, i8-to-i32 and an offset window.
"""
from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

import tilenb
from tilenb import ir
from tilenb.codegen import nvrtc_available, nvrtc_compile

from support import sass_widths as SW

ROOT = Path(__file__).resolve().parents[2]
NVDISASM = SW.nvdisasm_path()
pytestmark = pytest.mark.skipif(not nvrtc_available() or NVDISASM is None,
                                reason="needs NVRTC and nvdisasm (pip install nvidia-cuda-nvdisasm)")

STORES = """
@launch(256)
@grid(cdiv(M, 8))
kernel scale_f32(X: tensor<f32>[M, 256], Y: tensor<f32>[M, 256]) {
  let r = ctx.block.x * 8
  let x = X[r :+ 8, :]
  Y[r :+ 8, :] = x * 2.0
}

@launch(256)
@grid(cdiv(M, 8))
kernel scale_bf16(X: tensor<bf16>[M, 256], Y: tensor<bf16>[M, 256]) {
  let r = ctx.block.x * 8
  let x = X[r :+ 8, :]
  Y[r :+ 8, :] = bf16(x * 2.0)
}

@launch(256)
@grid(cdiv(M, 8))
kernel widen_i8(X: tensor<i8>[M, 256], Y: tensor<i32>[M, 256]) {
  let r = ctx.block.x * 8
  let x = X[r :+ 8, :]
  Y[r :+ 8, :] = i32(x) * 3
}

@launch(128)
@grid(cdiv(M, 8), 2)
kernel offset_window(X: tensor<f32>[M, N], Y: tensor<f32>[M, N]) {
  let r = ctx.block.x * 8
  let c = 4 + ctx.block.y * 128
  Y[r :+ 8, c :+ 128] = X[r :+ 8, c :+ 128] * 2.0
}
"""

# (file the source comes from, kernel, statement) -> why the machine code legitimately differs
EXEMPT = {
    ("test_window_reduce", "past_edge", None): "windows wholly past the tensor's edge: the compiler sees the valid "
                                               "region is empty and removes the moves",
    ("test_cpu_kernels", "k", "the copy of X into none"): "X[0 :+ 4, N :+ 4] has no valid column (N - N folds to 0): "
                                                          "the compiler removes the loads",
    ("test_check_rules", "k", "the copy of X into b"): "the window of the copy before, copied again: the compiler "
                                                       "loads it once",
}


def _machine_code(kernel, **tune):
    cuda = kernel.cuda_source(arch="sm_90", **tune)
    return cuda, SW.disassemble(nvrtc_compile(cuda, "sm_90"), NVDISASM)


def _store_line(kernel):
    return next(sp for sp in kernel.analysis().statements if sp.kind == "tile" and sp.what.startswith("the store"))


@pytest.mark.parametrize("name,nbytes", [("scale_f32", 16), ("scale_bf16", 16), ("widen_i8", 16),
                                         ("offset_window", 16)])
def test_a_guarded_vector_store_is_one_instruction(name, nbytes):
    kernel = getattr(tilenb.compile(STORES, backend="cpu"), name)
    sp = _store_line(kernel)
    assert sp.accesses[0].space == "global" and sp.accesses[0].vector_bytes == nbytes   # what the analysis says
    cuda, sass = _machine_code(kernel)
    where = SW.statement_lines(cuda)
    stores = Counter(nb for line, space, d, nb, _ in SW.memory_instructions(sass)
                     if space == "global" and d == "store" and where.get(line) == sp.line)
    assert stores[nbytes] >= 1, f"no {nbytes}-byte global store for line {sp.line}: {dict(stores)}"
    # the element stores of a chunk that crosses the last row stay; nothing else
    assert set(stores) <= {nbytes, sp.accesses[0].elem_bytes}
    assert SW.compare(kernel.analysis(), cuda, sass) == []


def test_the_store_counts_of_the_issue_kernel():
    # 256 threads, 8 rows of 256 f32 a CTA: 512 chunks of 16 bytes, 2 a thread, both whole but
    # for the CTA holding the tensor's last rows: two 16-byte stores in the machine code, in the
    # branch taken for whole chunks
    kernel = tilenb.compile(STORES, backend="cpu").scale_f32
    cuda, sass = _machine_code(kernel)
    sp = _store_line(kernel)
    where = SW.statement_lines(cuda)
    wide = [op for line, space, d, nb, op in SW.memory_instructions(sass)
            if space == "global" and d == "store" and nb == 16 and where.get(line) == sp.line]
    assert len(wide) >= 2 and all(op.startswith("STG.E.128") for op in wide)


def _groups():
    out = ["suite", "examples", "tutorials"]
    out += sorted(f.stem for f in (ROOT / "tests").rglob("test_*.py") if "browser" not in f.parts)
    return out


def _sources(group):
    sys.path.insert(0, str(ROOT / "scripts"))
    import cuda_corpus
    for tag, text in cuda_corpus._sources():
        g = ("suite" if tag == "suite" else "examples" if tag.startswith("example-")
             else tag.rsplit("-", 1)[0] if tag.startswith("test_") else "tutorials")
        if g == group:
            yield tag, text


def _has_dot(kir):
    return any(isinstance(x, ir.Dot) for s in ir.walk_stmts(kir.body) for e in ir.stmt_exprs(s)
               for x in ir.walk_expr(e))


@pytest.mark.parametrize("group", _groups())
def test_the_machine_code_has_the_analysis_widths(group):
    checked, failures, seen = 0, [], set()
    for tag, text in _sources(group):
        if text in seen:
            continue
        seen.add(text)
        try:
            mod = tilenb.compile(text, backend="cpu")
        except Exception:
            continue                    # a program a test expects to be refused
        for name, kernel in mod.kernels.items():
            try:
                kir = kernel.ir()
            except Exception:
                continue
            if _has_dot(kir) or kir.cluster > 1:
                continue
            try:
                cuda, sass = _machine_code(kernel)
            except Exception:
                continue                # refused by the generator: tests/codegen/test_codegen_nvrtc.py covers that
            if (group, name, None) in EXEMPT:
                continue
            problems = [p for p in SW.compare(kernel.analysis(), cuda, sass)
                        if not any((group, name, what) in EXEMPT and f"({what})" in p
                                   for what in {k[2] for k in EXEMPT if k[:2] == (group, name)})]
            checked += 1
            failures += [f"{tag}.{name}: {p}" for p in problems]
    assert not failures, "\n".join(failures[:40])
    if group in ("suite", "examples", "tutorials"):
        assert checked > 0
