"""The complete shared-memory map and every loop's lowering, decided once in the analysis (issue 16).

What is checked, without a GPU, for the suite's GEMM, attention, cluster and head kernels and the
kernels of the GEMM, streamed, mma and cluster tests, every @autotune variant, for the code for
any GPU (arch None) and for sm_90:
- `Analysis.footprint` is the shared memory the generated kernel declares: its static
  `__shared__` arrays, read from the CUDA text, plus the dynamic size the launch passes
  (`runtime.gpu.cuda.dynamic_smem_bytes`); for a few kernels, also the size NVRTC's cubin gives its
  shared section.
- No two regions of the map share a byte while both are alive (checked here from the regions'
  offsets, sizes and live spans).
- `Analysis.loops` names the path the generated code takes for each loop (read from the code's
  own comments under each `// line N:` mark).
- Placement by hand-computed numbers: mma scratch, staging, GEMM and streamed rings with their
  mbarriers, cluster slots and reduction partials, and the budget check's device rule.
"""
from __future__ import annotations

import ast
import itertools
import re
import struct
from pathlib import Path

import pytest

import tilenb
from tilenb.analysis import analyze
from tilenb.codegen import generate, nvrtc_available, nvrtc_compile
from tilenb.lang.diagnostics import TileBudgetError, UnsupportedError
from tilenb.runtime.gpu.cuda import dynamic_smem_bytes

ROOT = Path(__file__).resolve().parents[2]
from tilenb.examples import suite_kernels  # noqa: E402

TEST_FILES = ("test_gemm_sm90", "test_gemm_sm90_edges", "test_streamed_sm90", "test_streamed_sm90_edges",
              "test_mma", "test_cluster")
SUITE_WORDS = ("gemm", "attention", "cluster", "head")
C_BYTES = {"unsigned char": 1, "bool": 1, "float": 4, "int": 4, "unsigned": 4, "double": 8, "long long": 8}
DECL = re.compile(r"(extern\s+)?__shared__\s+(?:__align__\(\d+\)\s+)?([A-Za-z_][\w ]*?)\s+(\w+)\[(\d*)\];")
MARK = re.compile(r"^\s*// line (\d+):", re.M)


def _kernels():
    """(tag, kernel) of the suite's GEMM / attention / cluster / head kernels and of every tile
    program written as a string in the test files above."""
    out = []
    suite = tilenb.compile(suite_kernels.program(), backend="cpu")
    out += [("suite", k) for n, k in suite.kernels.items() if any(w in n for w in SUITE_WORDS)]
    seen = set()
    for f in TEST_FILES:
        tree = ast.parse((ROOT / "tests" / "codegen" / f"{f}.py").read_text())
        for node in ast.walk(tree):
            text = node.value if isinstance(node, ast.Constant) else None
            if not (isinstance(text, str) and "kernel" in text and "{" in text) or text in seen:
                continue
            seen.add(text)
            try:
                mod = tilenb.compile(text, backend="cpu")
            except Exception:     # a template or a program meant to be refused
                continue
            out += [(f, k) for k in mod.kernels.values()]
    return out


def _variants(kernel):
    space = kernel.tune_space
    names = sorted(space)
    for combo in itertools.product(*(space[n] for n in names)) if names else [()]:
        tune = dict(zip(names, combo))
        key = tuple(sorted(tune.items()))
        if key in getattr(kernel.checked, "skipped", {}):
            continue
        yield tune


@pytest.fixture(scope="module")
def generated():
    """(label, kir, arch, KernelSource, Analysis) of every variant that generates, both targets."""
    out = []
    for tag, k in _kernels():
        for tune in _variants(k):
            kir = k.ir(**tune)
            for arch in (None, "sm_90"):
                a = analyze(kir, arch=arch)          # never raises for a checked kernel
                try:
                    ks = generate(kir, arch=arch)
                except UnsupportedError:
                    continue
                out.append((f"{tag}:{k.name}{tune}@{arch}", kir, arch, ks, a))
    return out


def declared_bytes(ks) -> int:
    """The shared bytes the generated CUDA declares: its static `__shared__` arrays (from the
    text), plus the dynamic size a launch of it passes."""
    total = 0
    extern = False
    for ext, ctype, _name, n in DECL.findall(ks.source):
        if ext:
            extern = True
            continue
        total += C_BYTES[ctype.strip()] * int(n)
    dyn = dynamic_smem_bytes(ks)
    assert dyn == (ks.smem_bytes if extern else 0)      # the launch sizes the extern array, and only it
    return total + dyn


def test_the_collection_covers_every_kind_of_region_and_loop(generated):
    kinds = {r.kind for *_, a in generated for r in a.smem.regions}
    assert kinds >= {"tile", "mma scratch", "staging", "double buffer", "ring stages", "mbarriers", "cluster slot",
                     "reduction partials", "tile (unused)"}, kinds
    lowerings = {lp.lowering for *_, a in generated for lp in a.loops}
    assert lowerings == {"wgmma TMA pipeline", "streamed attention on wgmma", "mma.sync", "generic"}
    assert len(generated) > 150


def test_footprint_is_the_shared_memory_the_kernel_declares(generated):
    for label, _kir, _arch, ks, a in generated:
        assert a.footprint == declared_bytes(ks), label
        assert ks.smem_footprint == a.footprint and ks.smem_bytes == a.smem.array_bytes, label
        assert ks.dynamic_smem == a.smem.dynamic, label
        assert ("extern __shared__" in ks.source) == (a.smem.dynamic and a.smem.array_bytes > 0), label


def test_regions_alive_together_never_share_a_byte(generated):
    for label, _kir, _arch, _ks, a in generated:
        rs = [r for r in a.smem.regions if r.spans]
        for i, x in enumerate(rs):
            assert x.bytes > 0 and x.offset >= 0, (label, x.name)
            if x.space == "tnb_smem":
                assert x.offset + x.bytes <= a.smem.array_bytes, (label, x.name)
            for y in rs[i + 1:]:
                if x.space != y.space:
                    continue
                together = any(p <= q2 and p2 <= q for p, q in x.spans for p2, q2 in y.spans)
                apart = x.offset + x.bytes <= y.offset or y.offset + y.bytes <= x.offset
                assert apart or not together, (label, x.name, y.name)
        assert not a.smem.collisions(), label


def _chunks(source):
    """source line -> the generated text under each `// line N:` mark (to the next mark)."""
    marks = [(m.start(), int(m.group(1))) for m in MARK.finditer(source)] + [(len(source), None)]
    out = {}
    for (p, line), (q, _) in zip(marks, marks[1:]):
        out.setdefault(line, []).append(source[p:q])
    return out


def _own_dot_lines(loop):
    from tilenb import ir
    from tilenb.analysis.mma_tiles import mma_dot
    lines = set()

    def own(body):
        for s in body:
            if isinstance(s, ir.If):
                own(s.then)
                own(s.orelse)
            elif not isinstance(s, (ir.For, ir.While)):
                for e in ir.stmt_exprs(s):
                    if any(mma_dot(x) for x in ir.walk_expr(e)):
                        lines.add(s.span.line)
    own(loop.body)
    return lines


def test_loops_name_the_path_the_generated_code_takes(generated):
    from tilenb import ir
    for label, kir, arch, ks, a in generated:
        code = ks.source
        chunks = _chunks(code)
        loops = {id(s): s for s in ir.walk_stmts(kir.body) if isinstance(s, (ir.For, ir.While))}
        by_pos = {p: s for p, s in a.lifetimes.positions}
        n_gemm = n_stream = 0
        for lp in a.loops:
            s = by_pos[lp.position]
            assert id(s) in loops and s.span.line == lp.line, label
            mine = "".join(chunks.get(lp.line, []))
            dots = ["".join(chunks.get(d, [])) for d in sorted(_own_dot_lines(s))]
            if lp.lowering == "wgmma TMA pipeline":
                n_gemm += 1
                assert arch == "sm_90" and "// GEMM loop on Hopper tensor cores" in mine, label
            elif lp.lowering == "streamed attention on wgmma":
                n_stream += 1
                assert arch == "sm_90", label
                assert ("its dots run on wgmma" in mine
                        or f"the ring of the loop at line {lp.line}, set up ahead" in code), label
                assert any("// tensor cores: wgmma" in d for d in dots), label
            elif lp.lowering == "mma.sync":
                assert dots and all("// tensor cores: mma.sync m16n8k16" in d and "wgmma" not in d for d in dots), label
                assert "GEMM loop on Hopper" not in mine and "its dots run on wgmma" not in mine, label
            else:
                assert lp.lowering == "generic", label
                assert not dots and "GEMM loop on Hopper" not in mine and "its dots run on wgmma" not in mine, label
        assert code.count("// GEMM loop on Hopper tensor cores") == n_gemm, label
        assert code.count("its dots run on wgmma") == n_stream, label
        assert ("#error \"this kernel has loops lowered to wgmma" in code) == bool(n_gemm or n_stream), label


# ---- placement, by numbers computed here ---------------------------------------------------------------
def _ceil(n, a):
    return -(-n // a) * a


def test_gemm_ring_lies_after_the_tiles_with_its_stages_and_mbarriers():
    src = """
@launch(128)
kernel mm(A: tensor<f16>[M, K], B: tensor<f16>[K, N], C: tensor<f32>[M, N], S: tensor<f32>[M, 1]) {
  let r = ctx.block.x * 64
  var acc: tile<f32>[64, 64] = 0.0
  for kt in range(0, K, 32) {
    let a = A[r :+ 64, kt :+ 32]
    let b = B[kt :+ 32, 0 :+ 64]
    acc += dot(a, b)
  }
  var s: tile<f32>[64, 1] = S[r :+ 64, :]
  C[r :+ 64, 0 :+ 64] = acc * s
}
"""
    k = tilenb.compile(src, backend="cpu").mm
    any_gpu, hopper = k.analysis(), k.analysis(arch="sm_90")
    assert [lp.lowering for lp in any_gpu.loops] == ["mma.sync"]
    assert [lp.lowering for lp in hopper.loops] == ["wgmma TMA pipeline"]
    assert "wgmma" in hopper.loop_at(6).why and "on sm_90" in any_gpu.loop_at(6).why
    s = hopper.tile("s")
    ring = [r for r in hopper.smem.regions if r.kind == "ring stages"]
    bars = [r for r in hopper.smem.regions if r.kind == "mbarriers"]
    assert len(ring) == len(bars) == 1
    stage = _ceil(64 * 32 * 2, 1024) + _ceil(32 * 64 * 2, 1024)
    ring, bars = ring[0], bars[0]
    assert ring.offset == s.offset + s.bytes == 64 * 4      # after every tile but the loop's own copies
    stages = (ring.bytes - 1024) // stage
    assert ring.bytes == 1024 + stages * stage and stages >= 2
    assert bars.offset == ring.offset + ring.bytes and bars.bytes == 16 * stages
    assert hopper.footprint == bars.offset + bars.bytes and hopper.smem.dynamic
    # the loop's views are read only by its tensor-core dots: like slices written in the dots,
    # they have no tile (mma_tiles.dot_staged_views), on every target
    for an in (any_gpu, hopper):
        assert not {"a", "b"} & {t.name for t in an.lifetimes.tiles}
        assert not {"a", "b"} & {r.name for r in an.smem.regions}
    code = k.cuda_source(arch="sm_90")
    assert f"(tnb_smem + {ring.offset}) + 1023) & ~1023ull" in code
    assert f"{stages} stages of {stage} bytes" in code


def test_dot_scratch_and_staging_follow_the_tiles_128_byte_aligned():
    src = """
@launch(128)
kernel rs(A: tensor<bf16>[M, 32], B: tensor<bf16>[32, 64], X: tensor<f32>[M, 3], Y: tensor<f32>[M, 1]) {
  let r = ctx.block.x * 32
  var x = X[r :+ 32, :]
  var a = A[r :+ 32, :]
  Y[r :+ 32, :] = rowsum(dot(a, B[0 :+ 32, :])) + x[:, 0 :+ 1]
}
"""
    a = tilenb.compile(src, backend="cpu").rs.analysis()
    assert a.lifetimes.footprint == 32 * 3 * 4 + 32 * 32 * 2     # x and a, alive together
    scratch, = [r for r in a.smem.regions if r.kind == "mma scratch"]
    staging = [r for r in a.smem.regions if r.kind == "staging"]
    base = _ceil(a.lifetimes.footprint, 128)
    # one statement: its local scratch from the base, the dot's f32 result first, then B's staging
    assert scratch.offset == base and scratch.bytes == _ceil(32 * 64 * 4, 128)
    assert len(staging) == 1 and staging[0].offset == base + scratch.bytes
    assert staging[0].bytes == _ceil(32 * (64 + 8) * 2, 128)        # rows padded to an odd number of 16 B units
    assert scratch.spans == staging[0].spans == ((a.lifetimes.positions[-1][0],) * 2,)
    assert [lp for lp in a.loops] == []
    assert a.footprint == staging[0].offset + staging[0].bytes + sum(
        r.bytes for r in a.smem.regions if r.kind == "reduction partials")


def test_reduction_partials_are_arrays_of_their_own_one_per_written_copy():
    src = """
@launch(128)
kernel rn(X: tensor<f32>[M, 256], Y: tensor<f32>[M, 1]) {
  for<unroll 2> i in range(0, 4, 1) {
    let r = ctx.block.x * 16 + i * 4
    var x = X[r :+ 4, :]
    Y[r :+ 4, :] = rowsum(x * x)
  }
  var z = X[0 :+ 2, :]
  Y[0 :+ 2, :] = rowmax(z)
}
"""
    k = tilenb.compile(src, backend="cpu").rn
    a = k.analysis()
    parts = [r for r in a.smem.regions if r.kind == "reduction partials"]
    # the unrolled loop writes its body twice and once more for the remainder: three arrays of
    # 4 rows x 4 warps f32, then the last statement's 2 rows x 4 warps
    assert [r.bytes for r in parts] == [4 * 4 * 4] * 3 + [2 * 4 * 4]
    assert all(r.space == "array" for r in parts)
    code = k.cuda_source()
    assert code.count("__shared__ float rsc") == 4
    assert a.footprint == a.smem.array_bytes + 3 * 64 + 32 == declared_bytes(generate(k.ir()))


def test_cluster_slots_lie_after_everything_else():
    src = """
@launch(128)
@cluster(2)
kernel cs(X: tensor<f32>[M, 64], Y: tensor<f32>[M, 64]) {
  var x = X[0 :+ 4, :]
  cluster_sum(x)
  Y[0 :+ 4, :] = x
}
"""
    a = tilenb.compile(src, backend="cpu").cs.analysis(arch="sm_90")
    slot, = [r for r in a.smem.regions if r.kind == "cluster slot"]
    x = a.tile("x")
    assert slot.offset == _ceil(x.offset + x.bytes, 16) and slot.bytes == 4 * 64 * 4
    assert a.smem.array_bytes == slot.offset + slot.bytes


def test_streamed_attention_ring_follows_the_scratch():
    k = tilenb.compile(suite_kernels.ATTENTION, backend="cpu").attention_bf16
    tune = dict(BR=64, BC=64, D=64, NT=128)
    any_gpu, hopper = k.analysis(**tune), k.analysis(arch="sm_90", **tune)
    assert [lp.lowering for lp in any_gpu.loops] == ["mma.sync"]
    assert [lp.lowering for lp in hopper.loops] == ["streamed attention on wgmma"]
    ring, = [r for r in hopper.smem.regions if r.kind == "ring stages"]
    bars, = [r for r in hopper.smem.regions if r.kind == "mbarriers"]
    stage = 2 * _ceil(64 * 64 * 2, 1024)              # a K and a V slice per stage
    stages = (ring.bytes - 1024) // stage
    assert ring.offset == hopper.lifetimes.footprint and ring.bytes == 1024 + stages * stage
    assert bars.offset == ring.offset + ring.bytes and bars.bytes == 8 * stages * 3
    assert stages == 2                                 # one warpgroup a CTA: two stages
    assert not [r for r in hopper.smem.regions if r.kind == "double buffer"]
    assert [r.kind for r in any_gpu.smem.regions] == ["double buffer", "double buffer"]


def test_the_budget_check_reads_the_map_for_what_the_tensor_cores_add():
    # the tiles fit the per-block limit, the staging of the dot's slices after them does not
    src = """
@dynshared
@launch(128)
kernel big(A: tensor<bf16>[M, 64], B: tensor<bf16>[64, 64], X: tensor<f32>[1, 53760], Y: tensor<f32>[M, 64]) {
  var t = X[0 :+ 1, :]
  var acc: tile<f32>[64, 64] = 0.0
  acc += dot(A[0 :+ 64, :], B[0 :+ 64, :])
  X[0 :+ 1, :] = t * 2.0
  Y[0 :+ 64, :] = acc
}
"""
    with pytest.raises(TileBudgetError) as e:
        tilenb.compile(src, backend="cpu")
    need = 53760 * 4 + 2 * _ceil(64 * 72 * 2, 128)
    assert need > 227 * 1024 >= 53760 * 4
    assert f"needs {need} bytes" in str(e.value) and "staging" in str(e.value)
    ok = tilenb.compile(src.replace("53760", "51200"), backend="cpu").big
    assert ok.analysis().footprint == 51200 * 4 + 2 * _ceil(64 * 72 * 2, 128)


def test_json_and_text_views_say_how_each_loop_runs():
    from tilenb.notebook.summary import _text_ruler
    k = tilenb.compile(suite_kernels.program(), backend="cpu").gemm_f16
    d = k.analysis(arch="sm_90").to_json()
    assert d["target"] == "sm_90" and [lp["lowering"] for lp in d["loops"]] == ["wgmma TMA pipeline"]
    kinds = {x.get("kind", "tile") for r in d["ruler"] for x in r["tiles"]}
    assert {"ring stages", "mbarriers"} <= kinds
    assert d["footprint"] == d["smem"]["array_bytes"] + sum(r["bytes"] for r in d["regions"] if r["space"] == "array")
    text = _text_ruler(dict(d, lines=[]))
    assert "wgmma TMA pipeline" in text and "[GEMM ring (loop line" in text and "[GEMM mbarriers (loop line" in text


# ---- the cubin's own count ------------------------------------------------------------------------------
def _shared_sections(cubin: bytes):
    """name -> size of the `.nv.shared*` sections of an ELF64 cubin."""
    shoff = struct.unpack_from("<Q", cubin, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    secs = [struct.unpack_from("<IIQQQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    strtab = secs[shstrndx][4]
    out = {}
    for name, _typ, _flags, _addr, _off, size in secs:
        n = cubin[strtab + name:cubin.index(b"\0", strtab + name)].decode()
        if n.startswith(".nv.shared"):
            out[n] = size
    return out


@pytest.mark.skipif(not nvrtc_available(), reason="NVRTC (the nvidia-cuda-nvrtc wheel) is not installed")
def test_the_cubin_holds_the_static_bytes_the_map_says():
    src = """
@launch(128)
kernel st(X: tensor<f32>[M, 256], Y: tensor<f32>[M, 1]) {
  let r = ctx.block.x * 4
  var x = X[r :+ 4, :]
  Y[r :+ 4, :] = rowsum(x * x)
}
"""
    cases = [(tilenb.compile(src, backend="cpu").st.ir(), None, "sm_80")]
    suite = tilenb.compile(suite_kernels.program(), backend="cpu")
    cases.append((suite.rms_norm_f32.ir(), None, "sm_80"))
    cases.append((suite.gemm_f16.ir(), "sm_90", "sm_90a"))
    for kir, arch, cc in cases:
        ks = generate(kir, arch=arch)
        a = analyze(kir, arch=arch)
        static = a.footprint - dynamic_smem_bytes(ks)
        sections = _shared_sections(nvrtc_compile(ks.source, cc))
        size = sections.get(f".nv.shared.{ks.symbol}", 0)
        # sm_90 cubins count the 1 KB the driver reserves per CTA in the kernel's section
        assert size == static + (1024 if cc.startswith("sm_90") and a.footprint else 0), (kir.name, sections)


@pytest.mark.gpu
def test_on_the_gpu_static_and_dynamic_bytes_are_the_footprint():
    """The driver's count of each kernel's static shared memory, plus the launch's dynamic bytes,
    is the map's footprint (and the 1 KB a CTA reserves on sm_80 and newer, where the driver
    counts it in the static size)."""
    cp = pytest.importorskip("cupy")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no GPU")
    except Exception:
        pytest.skip("no GPU")
    from tilenb.runtime.gpu.cuda import device_arch, load_kernel
    arch = device_arch()
    suite = tilenb.compile(suite_kernels.program(), backend="cpu")
    for name in ("rms_norm_f32", "softmax_f32", "gemm_f16", "softmax_head_f32", "attention_tc_bf16"):
        kir = suite.kernels[name].ir()
        ks = generate(kir, arch=arch)
        a = analyze(kir, arch=arch)
        static = int(load_kernel(ks, arch).attributes["shared_size_bytes"])
        reserved = static + dynamic_smem_bytes(ks) - a.footprint
        assert reserved in (0, 1024), (name, static, dynamic_smem_bytes(ks), a.footprint)
