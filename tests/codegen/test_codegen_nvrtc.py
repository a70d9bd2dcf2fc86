"""The generated CUDA, without a GPU: it compiles with NVRTC for sm_80 and sm_90, and it says
what the analyses say (barriers exactly where they are placed, source lines quoted, tensor
cores for f16/bf16 GEMM loops, static or dynamic shared memory).

Runs in CI: needs only the `nvidia-cuda-nvrtc-cu12` wheel (the test extra). The compile tests
skip, saying why, only when libnvrtc cannot be loaded.
"""
from __future__ import annotations

import ast
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import tilenb
from tilenb import ir
from tilenb.analysis import analyze
from tilenb.codegen import generate, nvrtc_available, nvrtc_compile
from tilenb.codegen.nvrtc import CudaCompileError
from support.programs import PROGRAMS
from support.programs import EXTRA, SEED

TESTS = Path(__file__).resolve().parents[1]
needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="libnvrtc cannot be loaded (install nvidia-cuda-nvrtc-cu12)")


def _suite_programs():
    """Every kernel source in the test suite that checks without error (plus the seed file)."""
    out = {"seed": SEED}
    out.update({f"programs/{k}": v for k, v in PROGRAMS.items()})
    out.update({f"cuda/{k}": v for k, v in EXTRA.items()})
    seen = set(out.values())
    for path in sorted((p for p in TESTS.rglob("test_*.py") if "browser" not in p.parts), key=lambda p: p.name):
        try:
            tree = ast.parse(path.read_text())
        except SyntaxError:
            continue
        n = 0
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "kernel " in node.value and "{" in node.value:
                text = node.value
                if text in seen:
                    continue
                try:
                    tilenb.compile(text, backend="cpu")
                except Exception:  # error programs, fragments: not kernels to compile
                    continue
                seen.add(text)
                n += 1
                out[f"{path.stem}/{n}"] = text
    return out


PROGRAM_SOURCES = _suite_programs()
MAX_VARIANTS = 2


def _translation_unit(text: str, arch: str) -> str:
    """All kernels (up to MAX_VARIANTS variants each) of one program in one CUDA source; for
    compute_80, not those with @cluster (thread block clusters need sm_90: tests/codegen/test_cluster.py)."""
    mod = tilenb.compile(text, backend="cpu")
    parts = []
    for k in mod.kernels.values():
        for kir in list(k.checked.variants.values())[:MAX_VARIANTS]:
            if kir.cluster > 1 and arch == "compute_80":
                continue
            parts.append(generate(kir, text).source)
    return "\n".join(parts)


@needs_nvrtc
@pytest.mark.parametrize("arch", ["compute_80", "sm_90"])
def test_every_suite_kernel_compiles_with_nvrtc(arch):
    """sm_90: to a cubin (NVRTC and ptxas, inline PTX such as mma.sync included); sm_80: to PTX
    for compute_80 (NVRTC's front end and code generation; the machine code step is the same
    ptxas the sm_90 pass runs), which keeps CI's 2 cores under half a minute."""
    names = sorted(PROGRAM_SOURCES)
    units = {n: _translation_unit(PROGRAM_SOURCES[n], arch) for n in names}

    def build(n):
        try:
            nvrtc_compile(units[n], arch, use_cache=False)
            return None
        except CudaCompileError as e:
            return f"{n}: {e.log[:3000]}"
    with ThreadPoolExecutor(max_workers=2) as pool:
        failures = [f for f in pool.map(build, names) if f]
    assert not failures, "\n".join(failures)
    assert len(names) >= 20


def _mod(text):
    return tilenb.compile(text, backend="cpu")


def _statement_lines(src: str, needle: str) -> int:
    for i, line in enumerate(src.splitlines()):
        if line.strip().startswith("// line") and needle in line:
            return i
    raise AssertionError(f"no statement comment with {needle!r}")


def test_rms_norm_barrier_before_rowsum_and_none_between_elementwise_passes():
    src = _mod(SEED).rms_norm.cuda_source(D=256)
    lines = src.splitlines()
    copy_x = _statement_lines(src, "var x = X[r :+ 8, :]")
    rowsum = _statement_lines(src, "rowsum(x * x)")
    inv = _statement_lines(src, "var inv")
    g = _statement_lines(src, "var g = G")
    assert any("__syncthreads()" in l for l in lines[rowsum:inv]), "the rowsum reads x that other threads copied"
    assert not any("__syncthreads()" in l for l in lines[copy_x:rowsum]), "no barrier inside the copy of x"
    assert not any("__syncthreads()" in l for l in lines[inv:g]), "ss and inv are elementwise at one partition"


def test_every_statement_is_preceded_by_its_source_line():
    for text in (SEED, PROGRAMS["misc"], PROGRAMS["functions"], EXTRA["windows"]):
        mod = _mod(text)
        src_lines = text.splitlines()
        for k in mod.kernels.values():
            kir = k.ir()
            code = k.cuda_source()
            for s in ir.walk_stmts(kir.body):
                quoted = f"// line {s.span.line}: {src_lines[s.span.line - 1].strip()}"
                assert quoted in code, (k.name, quoted)


def _count_barriers(code: str):
    analysed = len(re.findall(r"__syncthreads\(\);  // barrier \((before|after|within) line", code))
    internal = len(re.findall(r"__syncthreads\(\);  // codegen-internal", code))
    user = len(re.findall(r"__syncthreads\(\);  // barrier\(\) written in the source", code))
    total = code.count("__syncthreads()")
    return analysed, internal, user, total


@pytest.mark.parametrize("name", sorted(PROGRAM_SOURCES))
def test_barriers_are_exactly_the_analysis(name):
    text = PROGRAM_SOURCES[name]
    mod = _mod(text)
    for k in mod.kernels.values():
        for kir in list(k.checked.variants.values())[:2]:
            code = generate(kir, text).source
            an = analyze(kir)
            analysed, internal, user, total = _count_barriers(code)
            unrolled = any(isinstance(s, ir.For) and s.unroll > 1 for s in ir.walk_stmts(kir.body))
            if not unrolled:
                assert analysed == len(an.barriers), (k.name, analysed, [(b.line, b.where) for b in an.barriers])
            assert total == analysed + internal + user
            assert user == sum(type(s) is ir.Barrier for s in ir.walk_stmts(kir.body))
            # beyond the analysis, only around tensor-core results written to shared memory
            # (their fragments are not the partition the analysis assumes)
            # and the one a CTA-wide row reduction needs between its per-warp partials in a shared
            # scratch and the outputs' owners (plus one before it inside a loop), marked as such
            mma_into_shared = "mma.sync accumulator fragments of the result" in code
            scratch = len(re.findall(r"__syncthreads\(\);  // codegen-internal: [^\n]*scratch", code))
            # a cluster reduction fences itself: before it publishes its copy and after it writes the result
            scratch += len(re.findall(r"__syncthreads\(\);  // codegen-internal \(cluster reduction\)", code))
            if not mma_into_shared:
                assert internal == scratch, f"{k.name}: barriers beyond the analysis"


def test_f16_and_bf16_gemm_loops_use_tensor_cores():
    hg = _mod(PROGRAMS["gemm_f16"]).hgemm
    code = hg.cuda_source(TM=128)
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in code
    assert "tnb_mma_f16(&acc_" in code
    code = _mod(EXTRA["gemm_bf16_t"]).gemm_bf16_t.cuda_source(TM=64)
    assert "tnb_mma_bf16(&acc_" in code
    # an f32 GEMM stays on the simple loop per output element
    assert "tnb_mma_" not in _mod(SEED).gemm.cuda_source().split("#endif  // TILENB_PRELUDE")[1]


def test_f16_dot_into_a_shared_tile_uses_tensor_cores_fenced():
    code = _mod(EXTRA["f16_dots"]).f16_dots.cuda_source()
    body = code.split("#endif  // TILENB_PRELUDE")[1]
    assert len(set(re.findall(r"tnb_mma_f16\(&(frag\d+)\[", body))) == 2   # both dots, each into its fragments
    assert re.search(r"tile acc \(line \d+\): shared", code)
    assert "codegen-internal: (the same, after the statement)" in code


def test_static_and_dynamic_shared_memory():
    code = _mod(SEED).rms_norm.cuda_source()
    assert "__shared__ __align__(16) unsigned char tnb_smem[9248];" in code
    big = _mod(EXTRA["dynshared"]).big_tile
    ks = generate(big.ir(), EXTRA["dynshared"])
    assert "extern __shared__ __align__(16) unsigned char tnb_smem[];" in ks.source
    assert ks.dynamic_smem and ks.smem_bytes >= 64 * 1024
    assert _mod(SEED).partial_sums.cuda_source().count("tnb_smem") == 0


def test_kernel_signature_lists_tensors_scalars_then_dims():
    ks = generate(_mod(SEED).gemm.ir(), SEED)
    assert ks.symbol == "gemm__TM64_TN64_TK16"
    assert [p[0] for p in ks.params] == ["tensor", "tensor", "tensor", "scalar", "scalar", "dim", "dim", "dim"]
    assert re.search(r'extern "C" __global__ void __launch_bounds__\(256\) gemm__TM64_TN64_TK16\(float\* A_\d+, '
                     r'float\* B_\d+, float\* C_\d+, float alpha_\d+, float beta_\d+, long long M_\d+, long long K_\d+, '
                     r'long long N_\d+\)', ks.source)


def test_cuda_source_needs_no_gpu_and_names_the_variant():
    mod = tilenb.compile(PROGRAMS["softmax"], backend="cpu")
    a, b = mod.softmax_rows.cuda_source(BLOCK=128), mod.softmax_rows.cuda_source(BLOCK=256)
    assert "softmax_rows__BLOCK128(" in a and "softmax_rows__BLOCK256(" in b


def test_gemm_accumulator_read_by_another_thread_stays_in_shared_memory():
    text = """
@launch(128)
kernel k(A: tensor<f16>[M, 32], B: tensor<f16>[32, 32], R: tensor<f32>[M, 1]) {
  var acc: tile<f32>[32, 32] = 0.0
  for kt in range(0, 32, 32) {
    var a = A[ctx.block.x * 32 :+ 32, kt :+ 32]
    var b = B[kt :+ 32, 0 :+ 32]
    acc += dot(a, b)
  }
  R[ctx.block.x * 32 :+ 32, :] = rowsum(acc)
}
"""
    code = _mod(text).k.cuda_source()
    assert re.search(r"tile acc \(line \d+\): shared", code)
    assert "tnb_mma_f16(&acc" not in code and "tnb_mma_f16(&frag" in code   # fragments, then shared


@needs_nvrtc
def test_nvrtc_compile_gives_cubin_or_ptx_and_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("TILENB_CACHE_DIR", str(tmp_path))
    src = _mod(SEED).act.cuda_source()
    cubin = nvrtc_compile(src, "sm_90")
    assert cubin[:4] == b"\x7fELF"
    assert list((tmp_path / "nvrtc").glob("*.cubin"))
    assert nvrtc_compile(src, "sm_90") == cubin
    ptx = nvrtc_compile(src, "compute_80", prefer="ctypes", use_cache=False)
    assert b".target sm_80" in ptx
    with pytest.raises(CudaCompileError) as e:
        nvrtc_compile("extern \"C\" __global__ void k() { undefined_thing(); }", "sm_80", use_cache=False)
    assert "undefined_thing" in e.value.log


def test_row_reductions_are_cta_wide_and_bf16_copies_convert_nothing():
    """rowsum / rowmax over a whole row: every thread reduces the chunks the partition gives it
    (16-byte vectors), warp shuffles, one combine through a shared scratch; a bf16 tile copied
    from a bf16 tensor moves its bits without converting them."""
    import sys
    from tilenb.examples import suite_kernels as sk
    mod = _mod(sk.program())
    code = mod.softmax_bf16.cuda_source(R=2, D=4096, NT=256)
    assert "__shfl_xor_sync" in code and "codegen-internal scratch: one partial per (row, warp)" in code
    assert "tnb_f2b(tnb_b2f(" not in code
    assert "cvt.rn.bf16.f32" in code
