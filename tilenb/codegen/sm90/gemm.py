"""GEMM loops on Hopper tensor cores (sm_90a): TMA copies into swizzled shared stages, wgmma.

A *GEMM loop* is a CTA loop of this form (the order of its three statements is free, the
lets may be `var` tiles copied from the tensors, or be written inline in the dot)::

    for kt in range(lo, hi, TK) {
      let a = A[..., r0 :+ TM, kt :+ TK]          // f16 or bf16 tensor, last two dims sliced
      let b = B[..., kt :+ TK, c0 :+ TN]          // or, with dot_t(a, b): B[..., c0 :+ TN, kt :+ TK]
      acc += dot(a, b)                            // acc: a [TM, TN] f32 register tile
    }

where r0, c0 and the fixed leading indices do not change inside the loop. On sm_90 the code
generator hands such a loop to this module, which emits a software pipeline instead of the
statement-by-statement code: thread 0 issues bulk tensor copies (TMA, `cp.async.bulk.tensor`)
of the next tiles of A and B, up to STAGES - 1 ahead, into a ring of shared-memory stages laid
out in the swizzled form the tensor cores read, each stage completing on an mbarrier; every
warpgroup of the CTA multiplies the stage in hand with `wgmma.mma_async` (m64nNk16, f32
accumulators in registers) while the copies of the next stages are in flight, and releases the
stage on an "empty" mbarrier once its wgmma group has retired.

Guarantees:
- The result is the language's: acc += sum over the loop of dot(a, b) in f32, with the elements
  of a and b outside their valid regions (outside the tensor) read as 0 (TMA fills them with
  zeros), and acc's valid region narrowed to a's rows and b's columns when the loop runs at
  least once, exactly as the statement-by-statement code does.
- acc lives in `WgmmaLayout`, the wgmma accumulator layout; every other statement that touches
  acc sweeps that layout (`accumulators.emit_sweep`), so the rest of the kernel is unchanged.
- A launch whose tensors cannot be described by a tensor map (row stride not a multiple of 16
  bytes, say; kernel parameter `tnb_tma` = 0), or whose boxes would not start on a 16-byte
  boundary of the contiguous dimension (the loop's start, or B's first column when B is
  [K, N]: on the H200 such a box stops the kernel with an illegal instruction), takes a second
  path of the same kernel: all threads copy each stage with bounds checks into the same
  swizzled layout, then wgmma; slower, equally exact.
- Which loops take this path is the analysis' decision (`tilenb.analysis.lowering`, shown as
  `Analysis.loops`): every copy coordinate uniform (thread 0 issues the copies for the CTA), the
  accumulator combined with no other register tile, its registers within the thread count
  (`plan_shape`); anything else keeps mma.sync. `prepare` reads it, `emit` writes it.
- The pipeline's shared memory (stages and mbarriers) lies after every tile of the lifetime
  analysis except the loop's own copies, which this lowering does not use, at the offset the
  analysis' shared-memory map gives (`Analysis.smem`, kinds "ring stages" and "mbarriers"); the
  kernel's dynamic shared memory is that map's (`KernelSource.smem_bytes`).
- Only sm_90 (compiled as sm_90a) takes this path; other targets keep mma.sync.
- The store of the accumulator's tile to a tensor (`staged_store`) goes through the ring's
  shared memory and leaves in 16-byte rows. The experiment switches TILENB_GEMM_TMA_STORE,
  TILENB_GEMM_WG_EPILOGUE, TILENB_GEMM_FULL_STAGE and TILENB_GEMM_LEAN_SYNC (`tilenb.switches`,
  off by default) change how, for the stores the analysis plans (`KernelLowering.epilogues`,
  `tilenb.analysis.gemm_loops.EpiloguePlan`; written by `planned_store`): bulk tensor stores
  (TMA) of swizzled boxes where the launch allows (C's tensor map built: flag `tnb_tma_st`; the
  box 16-byte aligned; the valid region the tile's part inside the tensor), each warpgroup its
  own part between named barriers, every element staged without a test (by stmatrix for 2-byte
  elements), no barrier before a store right after its loop. Each writes exactly the elements
  the default path writes. TILENB_GEMM_LEAN_SYNC also drops a pipeline's entry barrier and
  proxy fence where nothing before it touches memory (`KernelLowering.lean_entries`).

Hardware facts used (PTX ISA 8.x, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"
and "Tensor copy" sections): wgmma m64nNk16 for f16/bf16 with N a multiple of 8 up to 256;
shared-memory matrix descriptors (start address, leading and stride byte offsets >> 4, swizzle
mode in bits 62-63: 1 = 128-byte, 2 = 64-byte, 3 = 32-byte); TMA boxes of at most 256 elements
a side whose innermost extent in bytes is at most the swizzle span; swizzling XORs byte-address
bits [4, 4 + log2(span / 16)) with the bits 3 above them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ... import ir
from ...analysis.lowering import GemmLoop, Operand, Shape, WgmmaLayout

from .. import ctypes_ as C
from ..values import At
from ..generic import exprs, masks, reductions, sweeps

# The recognition of GEMM loops, their pipeline shapes and the ring offsets are the analysis'
# (tilenb/analysis/lowering.py); this module writes the code for what it decided.


def swizzle_mode(span: int) -> int:
    return {128: 1, 64: 2, 32: 3}[span]


# ---- the emitted pipeline ----------------------------------------------------------------------
PRELUDE_SM90 = r"""
// ---- Hopper tensor cores: TMA, mbarriers and wgmma (sm_90a only) ----
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TNB_SM90A 1
#endif
struct __align__(64) tnb_tmap { unsigned long long v[16]; };   // a CUtensorMap, opaque
__device__ __forceinline__ unsigned tnb_smem_u32(const void* p) {
  unsigned r; asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p)); return r;
}
#ifdef TNB_SM90A
__device__ __forceinline__ void tnb_mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void tnb_mbar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void tnb_mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void tnb_mbar_wait(unsigned bar, unsigned parity) {
  asm volatile("{\n .reg .pred p;\n tnb_wait_%=:\n"
               " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
               " @!p bra tnb_wait_%=;\n}" :: "r"(bar), "r"(parity) : "memory");
}
__device__ __forceinline__ void tnb_fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
__device__ __forceinline__ void tnb_fence_async_global() { asm volatile("fence.proxy.async.global;" ::: "memory"); }
__device__ __forceinline__ void tnb_tma_2d(unsigned dst, const tnb_tmap* map, int c0, int c1, unsigned bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
               :: "r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(bar) : "memory");
}
__device__ __forceinline__ void tnb_tma_3d(unsigned dst, const tnb_tmap* map, int c0, int c1, int c2, unsigned bar) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];"
               :: "r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(bar) : "memory");
}
__device__ __forceinline__ void tnb_tma_4d(unsigned dst, const tnb_tmap* map, int c0, int c1, int c2, int c3, unsigned bar) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];"
               :: "r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar) : "memory");
}
__device__ __forceinline__ void tnb_tma_5d(unsigned dst, const tnb_tmap* map, int c0, int c1, int c2, int c3, int c4, unsigned bar) {
  asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5, %6}], [%7];"
               :: "r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(bar) : "memory");
}
// a shared-memory matrix descriptor: start, leading and stride byte offsets, swizzle mode
__device__ __forceinline__ unsigned long long tnb_gdesc(unsigned addr, unsigned lbo, unsigned sbo, unsigned swz) {
  return (unsigned long long)((addr & 0x3FFFFu) >> 4) | ((unsigned long long)((lbo >> 4) & 0x3FFFu) << 16)
       | ((unsigned long long)((sbo >> 4) & 0x3FFFu) << 32) | ((unsigned long long)swz << 62);
}
__device__ __forceinline__ void tnb_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void tnb_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> __device__ __forceinline__ void tnb_wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory"); }
#endif
"""

def wgmma_function(kind: str, n: int, trans_b: int, a_in_registers: bool = False) -> Tuple[str, str]:
    """(name, C++ text) of a device function issuing one wgmma m64n{n}k16 with f32
    accumulators d[0 .. n/2) and B from shared memory by descriptor; A from shared memory by
    descriptor too, or (a_in_registers) from four .b32 registers of this thread (wgmma's
    register form, which has no transpose flag for A)."""
    nregs = n // 2
    regs = ", ".join(f"%{i}" for i in range(nregs))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(nregs))
    if a_in_registers:
        name = f"tnb_wgmma_rs_{kind}_n{n}_t{trans_b}"
        params = "unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned long long db"
        a = "{" + ", ".join(f"%{nregs + i}" for i in range(4)) + "}"
        operands, pred, trans = f"{a}, %{nregs + 4}", nregs + 5, f"{trans_b}"
        ins = '"r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(db), "r"(1)'
    else:
        name = f"tnb_wgmma_{kind}_n{n}_t{trans_b}"
        params = "unsigned long long da, unsigned long long db"
        operands, pred, trans = f"%{nregs}, %{nregs + 1}", nregs + 2, f"0, {trans_b}"
        ins = '"l"(da), "l"(db), "r"(1)'
    text = (f"#ifdef TNB_SM90A\n__device__ __forceinline__ void {name}(float* d, {params}) {{\n"
            f'  asm volatile("{{\\n .reg .pred p;\\n setp.ne.b32 p, %{pred}, 0;\\n"\n'
            f'    " wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{kind}.{kind} {{{regs}}}, {operands}, p, 1, 1, {trans};\\n}}\\n"\n'
            f"    : {outs}\n    : {ins} : \"memory\");\n}}\n#endif\n")
    return name, text


def tensor_dims(g, sym: ir.Sym) -> List[str]:
    """C expressions of a tensor's extents, outermost first."""
    return [str(exprs.dim_c(g, d)) for d in sym.type.dims]


def emit_gemm_loop(g, m: GemmLoop, shp: Shape, ring_off: int, tmap_a: str, tmap_b: str, fn_name: str):
    """Write the pipelined loop (see the module docstring) in place of `m.loop`.

    It reads better whole: it writes one C block (the descriptors, the TMA path's prologue,
    steady state and drain, then the bounds-checked copy path) whose parts share about twenty
    five C names and layout constants set at its top; apart, each part would take them all as
    arguments (the two helpers it repeats, `mma_stage` and `tma_issue`, are nested in it)."""
    s = m.loop
    acc_tv = g.tiles[id(m.acc)]
    accn = acc_tv.cname
    lay: WgmmaLayout = acc_tv.layout
    S = shp.stages
    lo = exprs.scalar_as(g, s.lo, "index")
    hi = exprs.scalar_as(g, s.hi, "index")
    TM, TN, TK = m.TM, m.TN, m.TK
    a, b = m.a, m.b
    W = g.T // 32
    nw = W  # arrivals on an empty barrier: one per warp
    g.emit("{")
    g.ind += 1
    g.emit(f"// GEMM loop on Hopper tensor cores: TMA copies of A [{TM}, {TK}] and B "
           f"{'[%d, %d]' % (TN, TK) if b.k_inner else '[%d, %d]' % (TK, TN)} into {S} swizzled shared stages, "
           f"wgmma m64n{lay.WN}k16 by {g.T // 128} warpgroup(s)")
    lov, hv, nk = g.new("lo"), g.new("hi"), g.new("nk")
    g.emit(f"const long long {lov} = {lo}, {hv} = {hi};")
    g.emit(f"const long long {nk} = {hv} > {lov} ? ({hv} - {lov} + {TK - 1}) / {TK} : 0;  // turns of the loop")
    a_fixed = [exprs.scalar_as(g, e, "index") for e in a.fixed]
    b_fixed = [exprs.scalar_as(g, e, "index") for e in b.fixed]
    a_row = g.new("ar")
    g.emit(f"const long long {a_row} = {exprs.scalar_as(g, a.outer, 'index')};  // first row of a")
    b_n = g.new("bn")
    nstart = b.outer if b.k_inner else b.inner
    g.emit(f"const long long {b_n} = {exprs.scalar_as(g, nstart, 'index')};  // first column of b (its N)")
    # valid region of acc after the loop: a's rows, b's columns (and nothing if a fixed index is out)
    adims, bdims = tensor_dims(g, a.tensor), tensor_dims(g, b.tensor)
    ok_a = " && ".join(f"({x}) >= 0 && ({x}) < {d}" for x, d in zip(a_fixed, adims)) or "true"
    ok_b = " && ".join(f"({x}) >= 0 && ({x}) < {d}" for x, d in zip(b_fixed, bdims)) or "true"
    nb_ext = bdims[-2] if b.k_inner else bdims[-1]
    base = g.new("ring")
    g.emit(f"unsigned char* const {base} = (unsigned char*)(((unsigned long long)(tnb_smem + {ring_off}) + 1023) & ~1023ull);"
           f"  // {S} stages of {shp.stage_bytes} bytes, 1024-aligned (the 128-byte swizzle repeats every 1024)")
    bars = g.new("bar")
    g.emit(f"const unsigned {bars} = tnb_smem_u32({base} + {S * shp.stage_bytes});  // full[s] at 8 s, empty[s] at 8 ({S} + s)")
    ring = g.new("ringu")
    g.emit(f"const unsigned {ring} = tnb_smem_u32({base});")
    g.emit("#ifdef TNB_SM90A")
    # --- descriptors: the per-thread constant parts
    wg = g.new("wg")
    g.emit(f"const int {wg} = tnb_warp >> 2;  // this thread's warpgroup")
    arow0, bcol0 = g.new("arow"), g.new("bcol")
    g.emit(f"const int {arow0} = ({wg} / {lay.GN}) * {lay.WM};  // its first row of the tile")
    g.emit(f"const int {bcol0} = ({wg} % {lay.GN}) * {lay.WN};  // its first column")
    swa, swb = shp.sw_a, shp.sw_b
    # k16 step offsets (bytes) and the descriptors' offsets
    if b.k_inner:
        b_start = f"{bcol0} * {swb}"
        b_kstep, b_lbo, b_sbo = 32, 16, 8 * swb
    else:
        b_start = f"({bcol0} / {shp.chunk_b}) * {TK * swb}"
        b_kstep, b_lbo, b_sbo = 16 * swb, TK * swb, 8 * swb
    a_pad = -(-shp.a_bytes // 1024) * 1024

    def mma_stage(stage_addr: str):
        """Issue the wgmmas of one stage (all K steps, all m64 parts) and commit them."""
        g.emit("tnb_wgmma_fence();")
        ks = g.new("ks")
        g.emit("#pragma unroll")
        g.emit(f"for (int {ks} = 0; {ks} < {TK // 16}; ++{ks}) {{")
        g.ind += 1
        db = g.new("db")
        g.emit(f"const unsigned long long {db} = tnb_gdesc({stage_addr} + {a_pad} + {b_start} + {ks} * {b_kstep}, "
               f"{b_lbo}, {b_sbo}, {swizzle_mode(swb)});")
        for mm in range(lay.mi):
            da = g.new("da")
            g.emit(f"const unsigned long long {da} = tnb_gdesc({stage_addr} + ({arow0} + {mm * 64}) * {swa} + {ks} * 32, "
                   f"16, {8 * swa}, {swizzle_mode(swa)});")
            g.emit(f"{fn_name}(&{accn}[{mm * (lay.WN // 2)}], {da}, {db});")
        g.ind -= 1
        g.emit("}")
        g.emit("tnb_wgmma_commit();")

    def tma_issue(turn: str):
        """Thread 0: expect the stage's bytes and start the copies of turn `turn`."""
        st = g.new("st")
        g.emit(f"const unsigned {st} = (unsigned)({turn} % {S});")
        g.emit(f"const int {st}k = (int)({lov} + ({turn}) * {TK});")
        g.emit(f"tnb_mbar_expect_tx({bars} + 8 * {st}, {shp.a_bytes + shp.b_bytes});")
        dst = f"{ring} + {st} * {shp.stage_bytes}"
        bar = f"{bars} + 8 * {st}"
        emit_tma(g, tmap_a, dst, f"{st}k", a_row, a_fixed, bar, k_inner=True)
        if b.k_inner:
            emit_tma(g, tmap_b, f"{dst} + {a_pad}", f"{st}k", b_n, b_fixed, bar, k_inner=True)
        else:
            for c in range(TN // shp.chunk_b):
                emit_tma(g, tmap_b, f"{dst} + {a_pad} + {c * TK * swb}", f"{st}k",
                         f"{b_n} + {c * shp.chunk_b}", b_fixed, bar, k_inner=False)

    # a box must start on a 16-byte boundary of the contiguous dim (H200: an illegal instruction
    # otherwise): K's start (then every turn, TK * 2 being 32, 64 or 128 bytes) and, for B as
    # [K, N], its first column; elsewhere the copy path takes the loop
    inner = [f"(({lov}) & 7) == 0"] + ([] if b.k_inner else [f"(({b_n}) & 7) == 0"])
    g.emit(f"if (tnb_tma && {' && '.join(inner)}) {{")
    g.ind += 1
    if id(s) in g.low.lean_entries:      # TILENB_GEMM_LEAN_SYNC (analysis.gemm_loops.entry_free)
        g.emit("// nothing before this loop touches memory: no barrier or proxy fence before the mbarriers are set up")
    else:
        g.emit("tnb_fence_async_global();  // this thread's earlier global stores are seen by the copy engine's reads")
        g.emit("__syncthreads();  // codegen-internal: earlier users of these bytes are done")
    g.emit("if (tnb_tid == 0) {")
    g.ind += 1
    g.emit(f"for (int s = 0; s < {S}; ++s) {{ tnb_mbar_init({bars} + 8 * s, 1); tnb_mbar_init({bars} + 8 * ({S} + s), {nw}); }}")
    g.emit("tnb_fence_async_smem();  // the barriers are visible to the copy engine")
    g.emit(f"for (long long t = 0; t < {nk} && t < {S - 1}; ++t) {{")
    g.ind += 1
    tma_issue("t")
    g.ind -= 1
    g.emit("}")
    g.ind -= 1
    g.emit("}")
    g.emit("__syncthreads();  // codegen-internal: the mbarriers are initialised")
    it = g.new("it")
    g.emit(f"for (long long {it} = 0; {it} < {nk}; ++{it}) {{")
    g.ind += 1
    sv = g.new("s")
    g.emit(f"const unsigned {sv} = (unsigned)({it} % {S});")
    g.emit(f"tnb_mbar_wait({bars} + 8 * {sv}, (unsigned)(({it} / {S}) & 1));  // stage {sv} has landed")
    mma_stage(f"({ring} + {sv} * {shp.stage_bytes})")
    g.emit("tnb_wgmma_wait<1>();  // the previous turn's products are done: its stage is free")
    g.emit(f"if ({it} > 0 && tnb_lane == 0) tnb_mbar_arrive({bars} + 8 * ({S} + (unsigned)(({it} - 1) % {S})));")
    g.emit(f"if (tnb_tid == 0 && {it} + {S - 1} < {nk}) {{")
    g.ind += 1
    nxt = g.new("nx")
    g.emit(f"const long long {nxt} = {it} + {S - 1};")
    g.emit(f"if ({nxt} >= {S}) tnb_mbar_wait({bars} + 8 * ({S} + (unsigned)({nxt} % {S})), (unsigned)((({nxt} / {S}) + 1) & 1));"
           f"  // every warp released it")
    tma_issue(nxt)
    g.ind -= 1
    g.emit("}")
    g.ind -= 1
    g.emit("}")
    g.emit("tnb_wgmma_wait<0>();")
    g.emit("__syncthreads();  // codegen-internal: no thread still waits on the mbarriers")
    g.ind -= 1
    g.emit("} else {")
    g.ind += 1
    g.emit("// no tensor map for these tensors (e.g. a row stride not a multiple of 16 bytes): every thread")
    g.emit("// copies the stage with bounds checks into the same swizzled layout")
    it2 = g.new("it")
    g.emit(f"for (long long {it2} = 0; {it2} < {nk}; ++{it2}) {{")
    g.ind += 1
    k0 = g.new("k0")
    g.emit(f"const long long {k0} = {lov} + {it2} * {TK};")
    g.emit("__syncthreads();  // codegen-internal: the last turn's products have read the stage")
    emit_manual_copy(g, a, base, "0", (TM, TK), swa, a_row, k0, a_fixed, adims, m.dtype, k_inner=True, chunk=TK)
    if b.k_inner:
        emit_manual_copy(g, b, base, str(a_pad), (TN, TK), swb, b_n, k0, b_fixed, bdims, m.dtype, k_inner=True, chunk=TK)
    else:
        emit_manual_copy(g, b, base, str(a_pad), (TK, TN), swb, k0, b_n, b_fixed, bdims, m.dtype, k_inner=False,
                         chunk=shp.chunk_b)
    g.emit("tnb_fence_async_smem();  // ordinary stores, read next by the tensor cores")
    g.emit("__syncthreads();")
    mma_stage(ring)
    g.emit("tnb_wgmma_wait<0>();")
    g.ind -= 1
    g.emit("}")
    g.emit("__syncthreads();")
    g.ind -= 1
    g.emit("}")
    g.emit("#endif")
    # acc's valid region: a's rows and b's columns, when the loop ran
    n = accn
    ar0, ar1 = f"(int)tnb_clamp(-{a_row}, 0, {TM})", f"(int)tnb_clamp({adims[-2]} - {a_row}, 0, {TM})"
    bc0, bc1 = f"(int)tnb_clamp(-{b_n}, 0, {TN})", f"(int)tnb_clamp({nb_ext} - {b_n}, 0, {TN})"
    g.emit(f"if ({nk} > 0) {{")
    g.ind += 1
    if ok_a != "true":
        g.emit(f"if (!({ok_a})) {{ {n}_r1 = {n}_r0; }}  // a's fixed index outside A: none of a's rows is valid")
    if ok_b != "true":
        g.emit(f"if (!({ok_b})) {{ {n}_c1 = {n}_c0; }}  // b's fixed index outside B: none of b's columns is valid")
    g.emit(f"{n}_r0 = max({n}_r0, {ar0}); {n}_r1 = min({n}_r1, {ar1}); "
           f"{n}_c0 = max({n}_c0, {bc0}); {n}_c1 = min({n}_c1, {bc1});")
    g.ind -= 1
    g.emit("}")
    g.ind -= 1
    g.emit("}")


def emit_tma(g, tmap: str, dst: str, k: str, other: str, fixed: List[str], bar: str, k_inner: bool):
    """One bulk tensor copy of a box into shared `dst`, completing on mbarrier `bar`:
    coordinates innermost first (K is innermost when `k_inner`)."""
    if k_inner:
        inner, outer = k, other
    else:
        inner, outer = other, k
    cs = [f"(int)({inner})", f"(int)({outer})"] + [f"(int)({x})" for x in reversed(fixed)]
    rank = len(cs)
    g.emit(f"tnb_tma_{rank}d({dst}, &{tmap}, {', '.join(cs)}, {bar});")


def emit_manual_copy(g, op: Operand, base: str, off: str, box: Tuple[int, int], span: int, r0: str, c0: str,
                     fixed: List[str], dims: List[str], dt: str, k_inner: bool, chunk: int):
    """Every thread: copy op's [rows, cols] box starting at (r0, c0) into the swizzled stage,
    zeros outside the tensor (two bytes at a time; the slow path only)."""
    rows, cols = box
    mask = span // 16 - 1
    ptr = g.cname(op.tensor)
    e = g.new("e")
    g.emit(f"for (int {e} = tnb_tid; {e} < {rows * cols}; {e} += {g.T}) {{")
    g.ind += 1
    r, c = g.new("r"), g.new("c")
    g.emit(f"const int {r} = {e} / {cols}, {c} = {e} % {cols};")
    gr, gc = g.new("gr"), g.new("gc")
    g.emit(f"const long long {gr} = {r0} + {r}, {gc} = {c0} + {c};")
    conds = [f"{gr} >= 0", f"{gr} < {dims[-2]}", f"{gc} >= 0", f"{gc} < {dims[-1]}"]
    conds += [f"({x}) >= 0 && ({x}) < {d}" for x, d in zip(fixed, dims)]
    idx = None
    for x, d in zip(fixed + [gr, gc], dims):
        idx = f"({x})" if idx is None else f"({idx}) * {d} + ({x})"
    v = g.new("v")
    g.emit(f"const unsigned short {v} = ({' && '.join(conds)}) ? {ptr}[{idx}] : (unsigned short)0;")
    # position in the stage: chunks of `chunk` columns, each [rows, chunk] with rows of `span` bytes
    o = g.new("o")
    if k_inner:
        g.emit(f"const unsigned {o} = (unsigned)({r} * {span} + {c} * 2);")
    else:
        g.emit(f"const unsigned {o} = (unsigned)(({c} / {chunk}) * {rows * span} + {r} * {span} + ({c} % {chunk}) * 2);")
    g.emit(f"*(unsigned short*)({base} + {off} + ({o} ^ ((({o} >> 7) & {mask}u) << 4))) = {v};")
    g.ind -= 1
    g.emit("}")


# ---- the generator's entry points ---------------------------------------------------------------
@dataclass(frozen=True)
class TmaSpec:
    """A tensor map the launcher builds (`tilenb.runtime.tma`) and passes by value: the tensor
    (its parameter name), its dtype, the copy's box in elements (innermost dimension first, one
    entry per tensor dimension) and the swizzle span in bytes (32, 64 or 128); `flag`: the int
    kernel parameter that says whether every map of that flag was built (`tnb_tma` for the GEMM
    loops' copies; `tnb_tma_st` for the bulk tensor stores of TILENB_GEMM_TMA_STORE)."""
    tensor: str
    dtype: str
    box: Tuple[int, ...]
    swizzle: int
    param: str
    flag: str = "tnb_tma"


def tma_flags(tmaps) -> List[str]:
    """The int flags a kernel with these tensor maps takes after them, in order: `tnb_tma`,
    then the others in the order of their first map."""
    return ["tnb_tma"] + [f for f in dict.fromkeys(t.flag for t in tmaps) if f != "tnb_tma"]


@dataclass
class Lowered:
    loop: GemmLoop
    shape: Shape
    ring_off: int
    tmap_a: str
    tmap_b: str
    fn: str


@dataclass
class Lowering:
    """What the generator needs from this module for one kernel variant."""
    loops: Dict[int, Lowered]          # id(For) -> its lowering
    layouts: Dict[int, WgmmaLayout]    # id(acc Sym) -> its register layout
    tmaps: List[TmaSpec]
    functions: Dict[str, str]          # device function name -> C++ text
    smem_end: int                      # bytes of shared memory the pipelines need, from 0
    stores: Dict[int, str] = field(default_factory=dict)   # id(tile Assign) -> its bulk tensor store's map


def prepare(g) -> Optional[Lowering]:
    """The code-side record of the GEMM loops the analysis put on TMA + wgmma (`g.low.gemm`,
    tilenb/analysis/lowering.py: recognition, pipeline shapes, ring offsets): their tensor maps
    and wgmma functions; None when there is none (or the target is not sm_90)."""
    low = g.low
    if not low.gemm:
        return None
    loops: Dict[int, Lowered] = {}
    tmaps: List[TmaSpec] = []
    fns: Dict[str, str] = {}
    for ch in low.gemm_tried:      # in the order taken (a loop given back later keeps its function)
        m, shp, k = ch.loop, ch.shape, ch.index
        ta, tb = f"tnb_tm{k}a", f"tnb_tm{k}b"
        nfa, nfb = len(m.a.fixed), len(m.b.fixed)
        tmaps.append(TmaSpec(m.a.tensor.name, m.dtype, (m.TK, m.TM) + (1,) * nfa, shp.sw_a, ta))
        if m.b.k_inner:
            tmaps.append(TmaSpec(m.b.tensor.name, m.dtype, (m.TK, m.TN) + (1,) * nfb, shp.sw_b, tb))
        else:
            tmaps.append(TmaSpec(m.b.tensor.name, m.dtype, (shp.chunk_b, m.TK) + (1,) * nfb, shp.sw_b, tb))
        name, text = wgmma_function(m.dtype, m.TN // shp.GN, 0 if m.b.k_inner else 1)
        fns[name] = text
        if id(m.loop) in low.gemm:
            loops[id(m.loop)] = Lowered(m, shp, ch.ring_off, ta, tb, name)
    used = {lw.tmap_a for lw in loops.values()} | {lw.tmap_b for lw in loops.values()}
    tmaps = [t for t in tmaps if t.param in used]
    stores: Dict[int, str] = {}
    if loops:
        for sid, plan in low.epilogues.items():     # TILENB_GEMM_TMA_STORE: C's tensor maps
            if plan.tma:
                param = f"tnb_st{len(stores)}"
                tmaps.append(TmaSpec(plan.tensor, plan.dtype, (plan.box_cols, plan.rows) + (1,) * plan.fixed,
                                     plan.span, param, "tnb_tma_st"))
                stores[sid] = param
                fns.update(tma_store_functions(plan.fixed + 2))
        if any(p.stmatrix for p in low.epilogues.values()):
            fns["tnb_stmatrix_x4"] = ("#ifdef TNB_SM90A\n__device__ __forceinline__ void tnb_stmatrix_x4(unsigned a, unsigned r0, "
                                      "unsigned r1, unsigned r2, unsigned r3) {\n"
                                      '  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};"\n'
                                      '               :: "r"(a), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");\n}\n#endif\n')
        for p in low.epilogues.values():
            if p.stmatrix:     # two f32 values to one word of 2-byte elements (cvt's first source: the high half)
                fns[f"tnb_cvt2_{p.dtype}"] = (
                    f"#ifdef TNB_SM90A\n__device__ __forceinline__ unsigned tnb_cvt2_{p.dtype}(float lo, float hi) {{\n"
                    f'  unsigned r; asm("cvt.rn.{p.dtype}x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r;\n}}\n#endif\n')
        if any(p.per_warpgroup for p in low.epilogues.values()):
            fns["tnb_named_sync"] = ('__device__ __forceinline__ void tnb_named_sync(unsigned id, unsigned n) '
                                     '{ asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(n) : "memory"); }\n')
    return Lowering(loops, dict(low.gemm_layouts), tmaps, fns, low.gemm_end, stores)


def source_parts(functions: str, tmaps: List[TmaSpec]) -> Tuple[str, List[str]]:
    """(text placed after the prelude, extra kernel parameters in C) of a kernel with loops on
    wgmma (this module's and `streamed`'s): their device functions and tensor maps."""
    text = PRELUDE_SM90 + functions
    text += ('#if defined(__CUDA_ARCH__) && !defined(TNB_SM90A)\n'
             '#error "this kernel has loops lowered to wgmma: compile it for sm_90a"\n#endif\n')
    params = [f"const __grid_constant__ tnb_tmap {t.param}" for t in tmaps] + [f"int {f}" for f in tma_flags(tmaps)]
    return text, params


def emit(g, low: Lowering, s: ir.For):
    lw = low.loops[id(s)]
    emit_gemm_loop(g, lw.loop, lw.shape, lw.ring_off, lw.tmap_a, lw.tmap_b, lw.fn)


# ---- the store of a wgmma accumulator to a tensor ----------------------------------------------
def staged_store(g, s, loc, value, mask, lay) -> bool:
    """`T[..., r :+ TM, c :+ TN] = value(acc)` with acc in WgmmaLayout: each thread writes its
    elements of the value (converted to T's type) into the GEMM ring's shared memory, free once
    the loop has ended, then the CTA stores whole rows with 16-byte vectors (per element at the
    valid region's edges and where the rows are not 16-byte aligned). The accumulator layout
    alone would write 2 or 4 bytes a thread, 8 rows a warp: a quarter of each 32-byte sector
    per instruction. Returns False (nothing emitted) when the statement does not qualify."""
    low = g.gemm
    if low is None or not isinstance(lay, WgmmaLayout) or loc.kind != "global" or not loc.entries:
        return False
    if loc.entries[-1][0] != "rng" or tuple(loc.shape) != (lay.M, lay.N):
        return False
    if not isinstance(value.type, ir.TileT) or tuple(value.type.shape) != (lay.M, lay.N):
        return False
    if any(isinstance(x, (ir.Dot, ir.Reduce)) for x in ir.walk_expr(value)):
        return False     # a dot or reduction of the value may use shared scratch of its own
    if sweeps.two_phase(g, s) or reductions.coop_reduces(g, value, (lay.M, lay.N), 1, lay):
        return False
    isz = C.itemsize(loc.dtype)
    if isz not in (2, 4):
        return False
    pitch = lay.N * isz + 16                       # 16 bytes of padding: rows start in different banks
    ring = min(low.loops.values(), key=lambda lw: lw.ring_off)
    room = ring.shape.stages * ring.shape.stage_bytes
    plan = g.low.epilogues.get(id(s))
    if plan is not None and plan.layout == lay:      # an experiment switch's epilogue (analysis.gemm_loops)
        return planned_store(g, s, loc, value, mask, lay, plan, ring, low.stores.get(id(s)))
    if lay.M * pitch > room:
        return False
    M, N = lay.M, lay.N
    V = 16 // isz
    st = C.STORE_C[loc.dtype]
    buf = g.new("stg")
    g.emit("// the tile goes through shared memory (the GEMM ring, free now) and leaves in 16-byte rows")
    g.emit(f"unsigned char* const {buf} = (unsigned char*)(((unsigned long long)(tnb_smem + {ring.ring_off}) + 1023) & ~1023ull);")
    g.emit("__syncthreads();  // codegen-internal: every thread is past the GEMM loop's last use of these bytes")
    exprs.prepare_regions(g, value)
    vdt = value.type.dtype

    def put(at):
        v = exprs.elem_value(g, value, at, (M, N))
        g.emit(f"*({st}*)({buf} + ({at.i}) * {pitch} + ({at.j}) * {isz}) = {C.store_bits(v, vdt, loc.dtype)};")

    # a where the analysis decides per tile (analysis.masks): one sweep per case
    masks.split(g, s, value, lambda: sweeps.sweep(g, (M, N), lay, 1, put, mask=mask))
    g.emit("__syncthreads();  // codegen-internal: the staged tile is complete")
    mr0, mr1, mc0, mc1 = mask if mask is not None else (0, M, 0, N)
    k, r, c = g.new("k"), g.new("r"), g.new("c")
    move = g.low.moves.get(id(s))          # the analysis' proof (analysis/tc_moves): a run-time test only where short
    al = g.new("al")
    if move is not None and not move.checked:
        al = None
        g.emit(f"// every row starts 16-byte aligned ({move.describe()})")
    else:
        idx00 = loc.index(0, 0)
        g.emit(f"const bool {al} = ((unsigned long long)(&{loc.ptr}[{idx00}]) % 16 == 0) && "
               f"((unsigned long long)(&{loc.ptr}[{loc.index(1, 0)}]) % 16 == 0);  // every row 16-byte aligned")
    g.emit(f"for (int {k} = tnb_tid; {k} < {M * N // V}; {k} += {g.T}) {{")
    g.ind += 1
    g.emit(f"const int {r} = {k} / {N // V}, {c} = ({k} % {N // V}) * {V};")
    g.emit(f"if ({r} < {mr0} || {r} >= {mr1}) continue;")
    g.emit(f"if ({al + ' && ' if al else ''}{c} >= {mc0} && {c} + {V} <= {mc1}) {{")
    g.ind += 1
    g.emit(f"*(uint4*)(&{loc.ptr}[{loc.index(r, c)}]) = *(const uint4*)({buf} + {r} * {pitch} + {c} * {isz});")
    g.ind -= 1
    g.emit("} else {")
    g.ind += 1
    e = g.new("e")
    g.emit(f"for (int {e} = {c}; {e} < {c} + {V}; ++{e}) if ({e} >= {mc0} && {e} < {mc1}) "
           f"{loc.ptr}[{loc.index(r, e)}] = *(const {st}*)({buf} + {r} * {pitch} + {e} * {isz});")
    g.ind -= 1
    g.emit("}")
    g.ind -= 1
    g.emit("}")
    g.emit("__syncthreads();  // codegen-internal: the staging bytes may be reused")
    return True


# ---- the experiment switches' epilogues (TILENB_GEMM_TMA_STORE, _WG_EPILOGUE, _FULL_STAGE, _LEAN_SYNC)
def tma_store_functions(rank: int) -> Dict[str, str]:
    """Device functions of a bulk tensor store (shared -> global, TMA) of rank `rank`, its
    commit and its waits (PTX ISA: cp.async.bulk.tensor, cp.async.bulk.commit_group,
    cp.async.bulk.wait_group[.read])."""
    cs = ", ".join(f"int c{i}" for i in range(rank))
    ops = ", ".join(f"%{i + 1}" for i in range(rank))
    ins = ", ".join(f'"r"(c{i})' for i in range(rank))
    name = f"tnb_tma_store_{rank}d"
    return {
        name: (f"#ifdef TNB_SM90A\n__device__ __forceinline__ void {name}(const tnb_tmap* map, unsigned src, {cs}) {{\n"
               f'  asm volatile("cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group [%0, {{{ops}}}], [%{rank + 1}];"\n'
               f'               :: "l"(map), {ins}, "r"(src) : "memory");\n}}\n#endif\n'),
        "tnb_bulk_wait": ("#ifdef TNB_SM90A\n"
                          '__device__ __forceinline__ void tnb_bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }\n'
                          '__device__ __forceinline__ void tnb_bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }\n'
                          '__device__ __forceinline__ void tnb_bulk_wait() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }\n'
                          "#endif\n"),
    }


def planned_store(g, s, loc, value, mask, lay, plan, ring, tmap: Optional[str]) -> bool:
    """The staged store of `staged_store` as the analysis' `EpiloguePlan` says (its docstring):
    the tile, or each warpgroup's part of it, staged in the GEMM ring (swizzled TMA boxes or rows
    padded by 16 bytes), then stored by bulk tensor stores where the launch allows, else by the
    part's threads in 16-byte vectors (elements at the valid region's edges)."""
    M, N = lay.M, lay.N
    st = C.STORE_C[loc.dtype]
    wgp = plan.per_warpgroup
    tma = plan.tma and tmap is not None
    buf = g.new("stg")
    g.emit("// the tile goes through shared memory (the GEMM ring, free now) and leaves "
           + ("by TMA where the launch allows, else " if tma else "") + "in 16-byte rows"
           + (f"; each warpgroup its own [{plan.rows}, {plan.cols}] part, between named barriers of its 128 threads"
              if wgp else ""))
    g.emit(f"unsigned char* const {buf} = (unsigned char*)(((unsigned long long)(tnb_smem + {ring.ring_off}) + 1023) & ~1023ull);")
    if plan.after_loop:
        g.emit("// right after the GEMM loop, whose last barrier every thread has passed: the ring's bytes are free")
    else:
        g.emit("__syncthreads();  // codegen-internal: every thread is past the GEMM loop's last use of these bytes")

    def addr(i, j) -> str:
        return stage_offset(plan, lay, tma, i, j)

    exprs.prepare_regions(g, value)
    vdt = value.type.dtype

    def put(at):
        v = exprs.elem_value(g, value, at, (M, N))
        g.emit(f"*({st}*)({buf} + {addr(at.i, at.j)}) = {C.store_bits(v, vdt, loc.dtype)};")

    if plan.stmatrix:
        masks.split(g, s, value, lambda: stmatrix_stage(g, value, lay, loc.dtype, buf, addr))
    else:
        smask = None if plan.full_stage else mask      # full_stage: any element may be staged (a register value)
        masks.split(g, s, value, lambda: sweeps.sweep(g, (M, N), lay, 1, put, mask=smask))
    wg = g.new("wg")
    if wgp:
        g.emit(f"const int {wg} = tnb_warp >> 2;  // this thread's warpgroup: its part of the tile")
    ok = tma_condition(g, s, loc, plan, lay, mask) if tma else None
    sync = f"tnb_named_sync(1 + {wg}, 128);" if wgp else "__syncthreads();"     # barrier 0 is __syncthreads
    g.emit(f"{sync}  // codegen-internal: the staged {'part' if wgp else 'tile'} is complete")
    if tma:
        g.emit("#ifdef TNB_SM90A")
        g.emit(f"if ({ok}) {{")
        g.ind += 1
        tma_issue(g, loc, plan, lay, tmap, buf, wg)
        g.ind -= 1
        g.emit("} else")
        g.emit("#endif")
    g.emit("{")
    g.ind += 1
    threads_store(g, s, loc, plan, lay, buf, addr, mask, wg)
    g.ind -= 1
    g.emit("}")
    if not plan.last:
        g.emit("__syncthreads();  // codegen-internal: the staging bytes may be reused")
    return True


def stage_offset(plan, lay, tma: bool, i, j) -> str:
    """C expression of the byte offset in the staging area of tile element (i, j): rows padded
    by 16 bytes, or (tma) the part's TMA boxes one after the other, each `span`-byte rows
    swizzled as TMA reads them (16-byte chunk c of row r at c ^ (r % 8) within 128 bytes)."""
    isz = plan.itemsize
    if not tma:
        return f"({i}) * {lay.N * isz + 16} + ({j}) * {isz}"
    PR, PC, E = plan.rows, plan.cols, plan.box_cols
    i, j = f"(unsigned)({i})", f"(unsigned)({j})"       # tile coordinates, never negative
    part = f"(({i}) / {PR}) * {lay.N // PC} + ({j}) / {PC}" if plan.per_warpgroup else "0"
    li, lj = (f"(({i}) % {PR})", f"(({j}) % {PC})") if plan.per_warpgroup else (f"({i})", f"({j})")
    lin = (f"(({part}) * {PR * PC * isz} + ({lj} / {E}) * {PR * plan.span} + {li} * {plan.span} "
           f"+ ({lj} % {E}) * {isz})")
    return f"({lin} ^ ((({lin} >> 7) & {plan.span // 16 - 1}) << 4))"


def stmatrix_stage(g, value, lay, dtype: str, buf: str, addr):
    """Stage the value's [M, N] tile (2-byte `dtype`) with stmatrix: each warp writes its 16 rows
    16 columns at a time (stmatrix .x4: four 8 x 8 matrices of 2-byte elements, lane l giving the
    address of row l % 8 of matrix l / 8; the fragment a lane holds of each is the accumulator's:
    row l / 4, columns 2 (l % 4) and + 1). `addr(i, j)`: the staging offset of element (i, j)."""
    m, n2, iw, jw, li, lj = g.new("m"), g.new("n2"), g.new("iw"), g.new("jw"), g.new("li"), g.new("lj")
    nbs = lay.WN // 8
    vdt = value.type.dtype
    g.emit("// the staged tile written by stmatrix: a warp's 16 rows and 16 columns an instruction")
    g.emit(f"const int {iw} = ((tnb_warp >> 2) / {lay.GN}) * {lay.WM} + (tnb_warp & 3) * 16;  // the warp's first row")
    g.emit(f"const int {jw} = ((tnb_warp >> 2) % {lay.GN}) * {lay.WN};  // its first column")
    g.emit(f"const int {li} = ((tnb_lane >> 3) & 1) * 8 + (tnb_lane & 7), {lj} = (tnb_lane >> 4) * 8;  "
           "// the row this lane addresses, of matrix tnb_lane / 8")
    g.emit("#pragma unroll")
    g.emit(f"for (int {m} = 0; {m} < {lay.mi}; ++{m}) {{")
    g.ind += 1
    g.emit("#pragma unroll")
    g.emit(f"for (int {n2} = 0; {n2} < {nbs // 2}; ++{n2}) {{")
    g.ind += 1
    regs = []
    pair = vdt in C.F32_FAMILY      # f32 values: both elements of a word converted by one cvt (f16x2 / bf16x2)
    for q in range(4):
        vals = []
        for e in range(2):
            i = f"{iw} + (tnb_lane >> 2) + {m} * 64 + {(q & 1) * 8}"
            j = f"{jw} + (tnb_lane & 3) * 2 + (2 * {n2} + {q >> 1}) * 8 + {e}"
            slot = f"({m} * {nbs} + 2 * {n2} + {q >> 1}) * 4 + {(q & 1) * 2 + e}"
            vals.append(exprs.elem_value(g, value, At(i, j, slot, lay, True), (lay.M, lay.N)))
        r = g.new("sm")
        if pair:
            g.emit(f"const unsigned {r} = tnb_cvt2_{dtype}({vals[0]}, {vals[1]});")
        else:
            bits = [C.store_bits(v, vdt, dtype) for v in vals]
            g.emit(f"const unsigned {r} = (unsigned)({bits[0]}) | ((unsigned)({bits[1]}) << 16);")
        regs.append(r)
    g.emit(f"tnb_stmatrix_x4(tnb_smem_u32({buf}) + {addr(f'{iw} + {m} * 64 + {li}', f'{jw} + {n2} * 16 + {lj}')}, "
           f"{', '.join(regs)});")
    g.ind -= 1
    g.emit("}")
    g.ind -= 1
    g.emit("}")


def tma_condition(g, s, loc, plan, lay, mask) -> str:
    """Emit (and return the name of) the CTA-uniform test that the bulk tensor stores may write
    this tile: C's tensor map built, the box's first column 16-byte aligned (unless proven), the
    fixed indices inside the tensor and the valid region `mask` exactly the tile's part inside
    the tensor; then, where it holds, each thread's proxy fence for its staged elements."""
    M, N = lay.M, lay.N
    mr0, mr1, mc0, mc1 = mask if mask is not None else (0, M, 0, N)
    ok = g.new("tok")
    col, row = loc.entries[-1][1], loc.entries[-2][1]
    fixed = [e[1] for e in loc.entries[:-2]]
    exts = loc.extents
    conds = ["tnb_tma_st"]
    move = g.low.moves.get(id(s))
    if move is None or move.checked:
        conds.append(f"(({col}) & {16 // plan.itemsize - 1}) == 0")
    conds += [f"({x}) >= 0 && ({x}) < {d}" for x, d in zip(fixed, exts)]
    conds += [f"{mr0} == (int)tnb_clamp(-({row}), 0, {M})", f"{mr1} == (int)tnb_clamp({exts[-2]} - ({row}), 0, {M})",
              f"{mc0} == (int)tnb_clamp(-({col}), 0, {N})", f"{mc1} == (int)tnb_clamp({exts[-1]} - ({col}), 0, {N})"]
    g.emit(f"const bool {ok} = {' && '.join(conds)};  // a tensor map of {loc.sym.name} with a 16-byte aligned box, "
           "and the valid region is the tile's part inside the tensor (what TMA writes)")
    g.emit("#ifdef TNB_SM90A")
    g.emit(f"if ({ok}) tnb_fence_async_smem();  // this thread's staged elements are seen by the copy engine")
    g.emit("#endif")
    return ok


def tma_issue(g, loc, plan, lay, tmap: str, buf: str, wg: str):
    """The part's first thread: the bulk tensor stores of its boxes, their commit and the wait
    (for the reads of shared memory; inside a loop, for the writes)."""
    wgp = plan.per_warpgroup
    PR, PC = plan.rows, plan.cols
    col, row = loc.entries[-1][1], loc.entries[-2][1]
    fixed = [e[1] for e in loc.entries[:-2]]
    g.emit(f"if ({'(tnb_tid & 127)' if wgp else 'tnb_tid'} == 0) {{")
    g.ind += 1
    r0 = f"({wg} / {lay.GN}) * {PR}" if wgp else "0"
    c0 = f"({wg} % {lay.GN}) * {PC}" if wgp else "0"
    base = f"tnb_smem_u32({buf})" + (f" + {wg} * {PR * PC * plan.itemsize}" if wgp else "")
    rank = plan.fixed + 2
    for q in range(PC // plan.box_cols):
        cs = [f"(int)({col} + {c0} + {q * plan.box_cols})", f"(int)({row} + {r0})"] + [f"(int)({x})" for x in reversed(fixed)]
        g.emit(f"tnb_tma_store_{rank}d(&{tmap}, {base} + {q * PR * plan.span}, {', '.join(cs)});")
    g.emit("tnb_bulk_commit();")
    if plan.in_loop:
        g.emit("tnb_bulk_wait();  // inside a loop: the writes are done before a later turn's store")
    else:
        g.emit("tnb_bulk_wait_read();  // the copy engine has read the staged bytes (they may be reused)")
    g.ind -= 1
    g.emit("}")


def threads_store(g, s, loc, plan, lay, buf: str, addr, mask, wg: str):
    """The part's threads store its staged rows: 16-byte vectors where the row is aligned and the
    vector inside the valid region `mask`, element by element at its edges."""
    M, N = lay.M, lay.N
    V = 16 // plan.itemsize
    st = C.STORE_C[loc.dtype]
    wgp = plan.per_warpgroup
    PR, PC = plan.rows, plan.cols
    mr0, mr1, mc0, mc1 = mask if mask is not None else (0, M, 0, N)
    k, r, c = g.new("k"), g.new("r"), g.new("c")
    move = g.low.moves.get(id(s))
    al = g.new("al")
    if move is not None and not move.checked:
        al = None
        g.emit(f"// every row starts 16-byte aligned ({move.describe()})")
    else:
        g.emit(f"const bool {al} = ((unsigned long long)(&{loc.ptr}[{loc.index(0, 0)}]) % 16 == 0) && "
               f"((unsigned long long)(&{loc.ptr}[{loc.index(1, 0)}]) % 16 == 0);  // every row 16-byte aligned")
    first = "(tnb_tid & 127)" if wgp else "tnb_tid"
    T = 128 if wgp else g.T
    g.emit(f"for (int {k} = {first}; {k} < {PR * PC // V}; {k} += {T}) {{")
    g.ind += 1
    if wgp:
        g.emit(f"const int {r} = ({wg} / {lay.GN}) * {PR} + {k} / {PC // V}, {c} = ({wg} % {lay.GN}) * {PC} + ({k} % {PC // V}) * {V};")
    else:
        g.emit(f"const int {r} = {k} / {PC // V}, {c} = ({k} % {PC // V}) * {V};")
    g.emit(f"if ({r} < {mr0} || {r} >= {mr1}) continue;")
    g.emit(f"if ({al + ' && ' if al else ''}{c} >= {mc0} && {c} + {V} <= {mc1}) {{")
    g.ind += 1
    g.emit(f"*(uint4*)(&{loc.ptr}[{loc.index(r, c)}]) = *(const uint4*)({buf} + {addr(r, c)});")
    g.ind -= 1
    g.emit("} else {")
    g.ind += 1
    e = g.new("e")
    g.emit(f"for (int {e} = {c}; {e} < {c} + {V}; ++{e}) if ({e} >= {mc0} && {e} < {mc1}) "
           f"{loc.ptr}[{loc.index(r, e)}] = *(const {st}*)({buf} + {addr(r, e)});")
    g.ind -= 1
    g.emit("}")
    g.ind -= 1
    g.emit("}")
