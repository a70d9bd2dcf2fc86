"""Tensor-core dots over register rows on Hopper (sm_90a): tensor tiles streamed by TMA, wgmma.

Flash attention's loop is the model::

    for kt in range(0, Nk, BC) {
      var s: tile<f32>[BR, BC] = dot_t(q, K[h, kt :+ BC, :]) * scale     // q: [BR, D]
      ...                                                                 // row max, exp, row sum
      acc = acc * rescale + dot(p, V[h, kt :+ BC, :])                    // p: bf16 [BR, BC]
    }

Its tiles live on the mma row layout (`tilenb.codegen.mma`: each warp owns 16-row blocks, the
same registers as wgmma's m64 accumulators when four warps form a warpgroup), and every tensor
slice its dots read is double-buffered by cp.async on the generic path. On sm_90 this module
takes such a loop instead when every staged slice qualifies (`prepare`): the slices of all its
dots are copied by TMA (thread 0) into a ring of swizzled shared stages, each slice of a stage
completing on its own mbarrier, one or two turns fewer ahead than the ring has stages; each dot
runs as `wgmma.mma_async` m64nNk16 with A from registers (the row tile itself, or fragments
loaded from shared memory as mma.sync would; a shared tile already in wgmma's layout is read by
descriptor instead, mma.accumulate `wg_ss`) and B from the stage; a stage is freed on an
"empty" mbarrier (one arrival per warp) after the turn's last dot. With three stages or more,
a last dot that accumulates in place into a register tile nothing else touches until the next
turn's first dot (`acc = acc * r + dot(p, V)`) is not waited for in its turn: the next turn's
first wait retires it too (wgmma groups retire in order), its stage is freed then, and the loop
waits once after its last turn; the tensor cores run P V and the next Q K^T back to back. The
statements around the dots are unchanged.

Ping-pong (`Ring.pingpong`, the analysis' decision; TILENB_STREAM_PINGPONG=1): in a CTA of two
warpgroups, each owning 64 rows of every dot's result, with a deferred last dot, the warpgroups
take turns at the tensor cores. A warpgroup's "unit" u is what it issues back to back: unit 0
is turn 0's Q K^T; unit u (0 < u < n, n the loop's turns) is turn u - 1's P V then turn u's Q K^T;
unit n is the last turn's P V. Warpgroup w waits at named barrier B[w] (`bar.sync B[w], 256`)
right before a unit's first wgmma and arrives at the other's, B[1 - w] (`bar.arrive`), right
after its last commit (before thread 0 refills the ring); warpgroup 1 arrives at B[0] once
before the loop (when n > 0) and not after its unit n. So while one warpgroup computes the
softmax of a turn, the other's P V and next Q K^T keep the tensor cores busy.

Why no wait can hang, for any n >= 0 (the same in every thread: the loop's bounds are uniform),
any stages S >= 3 and ahead 1 <= A <= S - 2 (what `Ring.defer` requires):
1. The named barriers alone order the units: B[0] completes its generation g when warpgroup 1's
   g-th arrival (g = 0: the one before the loop; else after its unit g - 1) meets warpgroup 0's
   wait before its unit g; B[1] completes g when warpgroup 0's arrival after its unit g meets
   warpgroup 1's wait before its unit g. Warpgroup 1 cannot arrive twice at B[0] before
   warpgroup 0 waited there once (its next arrival follows its own wait at B[1], which needs
   warpgroup 0's arrival after its unit g, past its wait at B[0]), nor warpgroup 0 twice at
   B[1]: no generation mixes arrivals of two rounds. Arrivals and waits balance (n + 1 each at
   either barrier), so the loop ends with both barriers empty (another loop, or this one again,
   starts clean), and for n = 0 nothing is issued at all. The order of unit starts is the
   chain 0@wg0 < 0@wg1 < 1@wg0 < 1@wg1 < ... (u@w: warpgroup w's unit u).
2. Every other wait of the loop depends only on earlier links of that chain or on hardware:
   - a "full" wait for turn t (K before unit t's Q K^T; V before unit t + 1's P V): thread 0
     issued turn t before the loop (t < A) or right after its unit t - A's arrival, so before
     it waited at B[0] for unit t - A + 1 <= t; a warp of warpgroup 0 waits for turn t only
     after its own wait at B[0] for unit t, which completed only once warp 0 had reached its
     wait there (after that issue), and warpgroup 1's unit t (or its V wait after it) starts
     after warpgroup 0's arrival after unit t, later still; the copy then lands by itself;
   - thread 0's "empty" wait in the tail of warpgroup 0's unit i, for the stage of turn
     r = i + A - S <= i - 2: every warp frees turn r right after its own wait that closes
     unit r + 1 <= i - 1 (the deferred retire), with nothing but its own wgmma groups in
     between; warpgroup 0's other warps did so before they waited at B[0] for unit i, and
     warpgroup 1 has passed its arrival after unit i - 1 (B[0]'s generation i completed), so
     it frees turn r without waiting for anyone;
   - `wgmma.wait_group` waits for the warpgroup's own products only; the loop body holds no
     CTA barrier and no statement that would wait for the whole CTA (the analysis checks),
     and on the bounds-checked copy path (`tnb_tma` = 0, with its __syncthreads) no ping-pong
     instruction runs at all.
   So each wait is released by events that precede it in the chain: no cycle of waits exists.

Guarantees:
- Results are the language's, as on the mma.sync path: elements of a slice outside its tensor
  read as 0 (TMA fills zeros), A's fragments are masked to the K range valid in both operands,
  and the rest of each statement is evaluated on the same fragments.
- Which loops stream is the analysis' decision (`tilenb.analysis.lowering`, `Analysis.loops`).
  A slice qualifies when it is B of a dot whose result is on the mma row layout of a CTA of a
  multiple of 128 threads; its leading indices and row/column starts are the same in every
  thread (thread 0 copies for the CTA); its column start (the contiguous dimension) does not
  change in the loop; its shape fits a wgmma (N <= 256, a multiple of 8; K a multiple of 16;
  with B as [K, N], N a multiple of 64 or 16, 32 or 64 elements of 2 bytes; with B as [N, K], K
  a multiple of 64 or 16 or 32). A loop is taken when all its staged slices qualify and two
  stages fit in shared memory; otherwise it keeps cp.async + mma.sync.
- A launch whose tensors no tensor map describes (`tnb_tma` = 0), or whose column start is not
  on a 16-byte boundary, takes a second path of the same code: every thread copies the slice
  into the stage with bounds checks before its dot (slower, equally exact).
- The ring lies after the mma scratch, at the offset of the analysis' shared-memory map
  (`Analysis.smem`, kinds "ring stages" and "mbarriers"); its mbarriers are
  initialised at each entry to the loop, after a CTA barrier.

Hardware facts used are sm90.gemm's (PTX ISA 8.x): the register form of wgmma
(`d, a, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-b`; A as four .b32 registers a
thread in the m16n8k16 A-fragment order per warp), shared-memory matrix descriptors, TMA boxes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ... import ir
from ...analysis.lowering import PINGPONG_BARRIERS, Operand, Ring, RingOp

from ..generic import exprs

from . import gemm as G

# Which loops stream, their rings' stages and offsets are the analysis' decisions
# (tilenb/analysis/lowering.py); this module writes the code for them.


@dataclass
class Streaming:
    """What the generator needs for one kernel variant: the analysis' rings, and the tensor maps
    and wgmma functions written for them."""
    rings: Dict[int, Ring]                        # id(For) -> its ring
    by_op: Dict[int, Tuple[Ring, RingOp]] = field(default_factory=dict)   # id(operand) -> its ring
    tmaps: List[G.TmaSpec] = field(default_factory=list)
    functions: Dict[str, str] = field(default_factory=dict)


def streaming(g, low) -> Optional[Streaming]:
    """The code-side record of the loops the analysis streams on wgmma (`low.rings`, placed in
    its shared-memory map): their tensor maps and device functions; None when there is none."""
    if not low.rings:
        return None
    st = Streaming(low.rings, dict(low.by_op))
    for ring in low.rings.values():
        for rop in ring.ops:
            st.tmaps.append(G.TmaSpec(rop.slice.base.name, rop.dtype, (rop.chunk, rop.rows) + (1,) * len(rop.fixed),
                                      rop.span, rop.tmap))
    functions_for(g, st)
    return st


def functions_for(g, st: Streaming):
    """Register the wgmma device functions the rings' dots need."""
    for ring in st.rings.values():
        for rop in ring.ops:
            n = rop.rows if rop.k_inner else rop.cols
            name, text = G.wgmma_function(rop.dtype, n, 0 if rop.k_inner else 1, a_in_registers=True)
            st.functions[name] = text
            if rop.k_inner:
                # A from shared memory by descriptor, for a shared tile in wgmma's layout (mma.accumulate)
                name, text = G.wgmma_function(rop.dtype, n, 0)
                st.functions[name] = text


# ---- emitted code -------------------------------------------------------------------------------
def _coords(g, rop: RingOp) -> Tuple[List[str], str, str]:
    fixed = [exprs.scalar_as(g, e, "index") for e in rop.fixed]
    return fixed, exprs.scalar_as(g, rop.row0, "index"), exprs.scalar_as(g, rop.col0, "index")


def _issue(g, ring: Ring, live: dict, turn: str):
    """Thread 0: start the copies of every slice of turn `turn` into its stage."""
    S = ring.stages
    stv = g.new("st")
    g.emit("{")
    g.ind += 1
    g.emit(f"const unsigned {stv} = (unsigned)(({turn}) % {S});")
    g.emit(f"const long long {live['var']} = {live['lo']} + ({turn}) * {live['step']};  // the loop variable of that turn")
    saved = g.regions
    g.regions = {}
    for j, rop in enumerate(ring.ops):
        fixed, r0, c0 = _coords(g, rop)
        bar = f"{live['bars']} + 8 * ({stv} * {len(ring.ops)} + {j})"
        g.emit(f"tnb_mbar_expect_tx({bar}, {rop.nbytes});")
        dst = f"{live['ringu']} + {stv} * {ring.stage_bytes} + {rop.off}"
        for b in range(rop.boxes):
            # boxes of `chunk` contiguous elements, each [rows, chunk] with rows of `span` bytes
            G.emit_tma(g, rop.tmap, f"{dst} + {b * rop.rows * rop.span}", f"{c0} + {b * rop.chunk}", r0, fixed, bar,
                       k_inner=True)
    g.regions = saved
    g.ind -= 1
    g.emit("}")


def loop_begin(g, s: ir.For, ring: Ring, var: str, lo: str, hi: str) -> dict:
    """Before the loop: the ring's addresses, its mbarriers and the first copies (thread 0);
    returns the loop's state for the dots inside it."""
    S = ring.stages
    live = {"var": var, "step": s.step, "hi": hi, "ring": ring}
    names = ", ".join(f"{r.slice.base.name} [{r.rows}, {r.cols}]" for r in ring.ops)
    g.emit(f"// the tensor-core operands of this loop ({names}) stream into {S} swizzled shared stages by TMA "
           f"(thread 0, {ring.ahead} turn(s) ahead); its dots run on wgmma")
    base = g.new("ring")
    g.emit(f"unsigned char* const {base} = (unsigned char*)(((unsigned long long)(tnb_smem + {ring.off}) + 1023) & ~1023ull);")
    ringu, bars = g.new("ringu"), g.new("bar")
    g.emit(f"const unsigned {ringu} = tnb_smem_u32({base});")
    g.emit(f"const unsigned {bars} = {ringu} + {S * ring.stage_bytes};  // full[s][op] at 8 (s * {len(ring.ops)} + op), "
           f"empty[s] at 8 ({S * len(ring.ops)} + s)")
    lov, nk, it, use = g.new("lo"), g.new("nk"), g.new("tnb_it"), g.new("tma")
    g.emit(f"const long long {lov} = {lo};")
    g.emit(f"const long long {nk} = {hi} > {lov} ? ({hi} - {lov} + {s.step - 1}) / {s.step} : 0;  // turns of the loop")
    live.update(lo=lov, nk=nk, it=it, use=use, base=base, ringu=ringu, bars=bars)
    aligned = ["tnb_tma"]
    for rop in ring.ops:
        if not rop.col_aligned:      # the analysis did not prove the box start 16-byte aligned: test it
            _, _, c0 = _coords(g, rop)
            aligned.append(f"(({c0}) & 7) == 0")
    g.emit(f"const bool {use} = {' && '.join(aligned)};  // else: each thread copies with bounds checks")
    g.emit(f"long long {it} = 0;  // turns done")
    g.emit(f"if ({use}) {{")
    g.ind += 1
    g.emit("tnb_fence_async_global();  // this thread's earlier global stores are seen by the copy engine's reads")
    g.emit("__syncthreads();  // codegen-internal: earlier users of the ring's bytes and barriers are done")
    g.emit("if (tnb_tid == 0) {")
    g.ind += 1
    nops = len(ring.ops)
    g.emit(f"for (int s = 0; s < {S * nops}; ++s) tnb_mbar_init({bars} + 8 * s, 1);")
    g.emit(f"for (int s = 0; s < {S}; ++s) tnb_mbar_init({bars} + 8 * ({S * nops} + s), {g.T // 32});")
    g.emit("tnb_fence_async_smem();  // the barriers are visible to the copy engine")
    t = g.new("t")
    g.emit(f"for (long long {t} = 0; {t} < {nk} && {t} < {ring.ahead}; ++{t}) {{")
    g.ind += 1
    _issue(g, ring, live, t)
    g.ind -= 1
    g.emit("}")
    g.ind -= 1
    g.emit("}")
    g.emit("__syncthreads();  // codegen-internal: the mbarriers are initialised")
    g.ind -= 1
    g.emit("}")
    return live


def acquire(g, live: dict, rop: RingOp) -> str:
    """Before a dot: wait for this turn's slice (or copy it, on the bounds-checked path);
    returns the C expression of its stage address (32-bit shared)."""
    ring = live["ring"]
    S, j = ring.stages, ring.ops.index(rop)
    sv = g.new("s")
    addr = g.new("sa")
    g.emit(f"const unsigned {sv} = {live['use']} ? (unsigned)({live['it']} % {S}) : 0u;")
    g.emit(f"const unsigned {addr} = {live['ringu']} + {sv} * {ring.stage_bytes} + {rop.off};  "
           f"// {rop.slice.base.name}[...] of this turn, swizzled by {rop.span} bytes")
    g.emit(f"if ({live['use']}) {{")
    g.emit(f"  tnb_mbar_wait({live['bars']} + 8 * ({sv} * {len(ring.ops)} + {j}), (unsigned)(({live['it']} / {S}) & 1));"
           "  // it has landed")
    g.emit("} else {")
    g.ind += 1
    g.emit("__syncthreads();  // codegen-internal: every warp is done with the stage's previous contents")
    fixed, r0, c0 = _coords(g, rop)
    dims = G.tensor_dims(g, rop.slice.base)
    operand = Operand(rop.slice.base, rop.fixed, rop.row0, rop.col0, (rop.rows, rop.cols), rop.k_inner)
    G.emit_manual_copy(g, operand, live["base"], f"{rop.off}", (rop.rows, rop.cols), rop.span, r0, c0, fixed, dims,
                       rop.dtype, k_inner=False, chunk=rop.chunk)
    g.emit("tnb_fence_async_smem();  // ordinary stores, read next by the tensor cores")
    g.emit("__syncthreads();")
    g.ind -= 1
    g.emit("}")
    return addr


def b_desc(rop: RingOp, addr: str) -> str:
    """The descriptor (a C expression) of B's first k16 step of the slice at `addr`; step kk's
    is this plus `b_desc_step(rop, kk)` (the start address field, bits 0-13, holds address / 16:
    a shared address below 256 KB plus an offset within the stage cannot carry out of it)."""
    sw = G.swizzle_mode(rop.span)
    if rop.k_inner:   # [N, K]: boxes of `chunk` K columns, each N rows of `span` bytes
        return f"tnb_gdesc({addr}, 16, {8 * rop.span}, {sw})"
    # [K, N]: boxes of `chunk` N columns, each K rows of `span` bytes; LBO steps along N
    return f"tnb_gdesc({addr}, {rop.rows * rop.span}, {8 * rop.span}, {sw})"


def b_desc_step(rop: RingOp, kk: str) -> str:
    """What k16 step `kk` adds to the descriptor: its byte offset in the stage, / 16."""
    if rop.k_inner:
        per = rop.span // 32               # k16 steps per box
        return f"(unsigned long long)(((({kk}) / {per}) * {rop.rows * rop.span} + (({kk}) % {per}) * 32) >> 4)"
    return f"(unsigned long long)((({kk}) * {16 * rop.span}) >> 4)"


def _pp_ids(ring: Ring) -> Tuple[int, int]:
    return PINGPONG_BARRIERS


def loop_pingpong_start(g, live: dict):
    """Just before a ping-pong loop's `for` (`Ring.pingpong`): warpgroup 1 arrives once at
    warpgroup 0's named barrier, so that warpgroup 0 issues first; not when the loop runs no
    turn (nothing would consume the arrival)."""
    ring = live["ring"]
    if not ring.pingpong:
        return
    b0, _ = _pp_ids(ring)
    g.emit(f"if ({live['use']} && {live['nk']} > 0 && tnb_warp >= 4) tnb_pp_arrive({b0});  "
           "// ping-pong: warpgroup 0 issues its products first")


def before_issue(g, live: dict, rop: RingOp):
    """Right before a dot's wgmma group in a ping-pong loop: this warpgroup waits for its turn at
    the tensor cores (its named barrier). The first dot waits only in turn 0: later turns' first
    dots issue in the same turn at the tensor cores as the previous turn's last dot."""
    ring = live["ring"]
    if not ring.pingpong:
        return
    b0, b1 = _pp_ids(ring)
    when = f" && {live['it']} == 0" if rop is ring.ops[0] else ""
    g.emit(f"if ({live['use']}{when}) tnb_pp_sync(tnb_warp < 4 ? {b0} : {b1});  "
           "// ping-pong: this warpgroup's turn at the tensor cores")


def _pp_pass(g, live: dict, rop: RingOp):
    """Right after a dot's wgmma group is committed in a ping-pong loop: the turn at the tensor
    cores passes to the other warpgroup after each turn's first dot, and after the last turn's last
    dot (warpgroup 0 only: warpgroup 1 has no later turn to hand on)."""
    ring = live["ring"]
    if not ring.pingpong:
        return
    b0, b1 = _pp_ids(ring)
    if rop is ring.ops[0]:
        g.emit(f"if ({live['use']}) tnb_pp_arrive(tnb_warp < 4 ? {b1} : {b0});  "
               "// ping-pong: the other warpgroup's turn")
    elif rop is ring.ops[-1]:
        g.emit(f"if ({live['use']} && {live['it']} + 1 == {live['nk']} && tnb_warp < 4) tnb_pp_arrive({b1});  "
               "// ping-pong: warpgroup 1's last turn")


def after_issue(g, live: dict, rop: RingOp):
    """After a dot is issued: in a ping-pong loop, the turn at the tensor cores passes
    (`_pp_pass`); after the first dot of a turn, thread 0 starts the copies of turn it + ahead,
    into the stage freed `STAGES - ahead` turns before (waiting until every warp freed it)."""
    ring = live["ring"]
    _pp_pass(g, live, rop)
    if ring.ops[0] is not rop:
        return
    S, A = ring.stages, ring.ahead
    nx = g.new("nx")
    g.emit(f"if ({live['use']} && tnb_tid == 0 && {live['it']} + {A} < {live['nk']}) {{")
    g.ind += 1
    g.emit(f"const long long {nx} = {live['it']} + {A};")
    g.emit(f"if ({nx} >= {S}) tnb_mbar_wait({live['bars']} + 8 * ({S * len(ring.ops)} + (unsigned)({nx} % {S})), "
           f"(unsigned)((({nx} / {S}) + 1) & 1));  // every warp released it")
    _issue(g, ring, live, nx)
    g.ind -= 1
    g.emit("}")


def release(g, live: dict, rop: RingOp):
    """After the last dot of a turn has retired: this warp frees the stage; the turn ends. (A
    deferred last dot has not retired yet: `retire_previous` frees its stage next turn.)"""
    ring = live["ring"]
    if ring.ops[-1] is not rop:
        return
    S = ring.stages
    if not ring.defer:
        g.emit(f"if ({live['use']} && tnb_lane == 0) tnb_mbar_arrive({live['bars']} + 8 * ({S * len(ring.ops)} + "
               f"(unsigned)({live['it']} % {S})));  // this warp is done with the stage")
    g.emit(f"++{live['it']};")


def deferred_fence(g, ring: Ring) -> str:
    """The register fence of the deferred last dot's accumulator (after a wait that retires it:
    no read of it moves above that wait); '' when the ring defers nothing. (P's registers are
    the next turn's to rewrite after the same wait; ptxas keeps a wgmma's A registers until it
    retires.)"""
    if not ring.defer or ring.defer_acc is None:
        return ""
    tv = g.tile_of(ring.defer_acc)
    if tv is None or tv.layout is None:
        return ""
    return f"tnb_reg_fence<{tv.layout.slots}>({tv.cname});"


def retire_previous(g, live: dict, rop: RingOp):
    """After the first dot of a turn has waited: the previous turn's last dot has retired with it;
    this warp frees that turn's stage."""
    ring = live["ring"]
    if not ring.defer or ring.ops[0] is not rop:
        return
    S = ring.stages
    g.emit(f"if ({live['use']} && tnb_lane == 0 && {live['it']} > 0) tnb_mbar_arrive({live['bars']} + 8 * "
           f"({S * len(ring.ops)} + (unsigned)(({live['it']} - 1) % {S})));  "
           "// the last turn's products have retired: this warp is done with its stage")


def loop_end(g, live: dict):
    """After the loop: its last turn's deferred product retires before anything reads it."""
    ring = live["ring"]
    if ring.defer:
        g.emit(f"tnb_wgmma_wait<0>(); {deferred_fence(g, ring)}  // the last turn's deferred product")


REG_FENCES = r"""
#ifdef TNB_SM90A
// an empty asm that reads and writes each register: no use of them moves above an earlier wgmma wait
template <int N> __device__ __forceinline__ void tnb_reg_fence(float* d) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}
template <int N> __device__ __forceinline__ void tnb_reg_fence_u(unsigned* d) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(d[i]) :: "memory");
}
#endif
"""


PINGPONG_FUNCS = r"""
#ifdef TNB_SM90A
// the warpgroup ping-pong of a streamed loop (two warpgroups, 256 threads): bar.sync waits at a
// named barrier until the 128 threads of the other warpgroup have arrived there (bar.arrive)
__device__ __forceinline__ void tnb_pp_sync(int id) { asm volatile("bar.sync %0, 256;" :: "r"(id) : "memory"); }
__device__ __forceinline__ void tnb_pp_arrive(int id) { asm volatile("bar.arrive %0, 256;" :: "r"(id) : "memory"); }
#endif
"""


def source_parts(st: Streaming) -> Tuple[str, List[str]]:
    """(device functions, tensor-map kernel parameters) of the rings."""
    pp = PINGPONG_FUNCS if any(r.pingpong for r in st.rings.values()) else ""
    return (REG_FENCES + pp + "".join(st.functions.values()),
            [f"const __grid_constant__ tnb_tmap {t.param}" for t in st.tmaps])
