"""L2 eviction priorities for the memory-bound paths: the last touch of data a kernel re-reads.

The rule, decided from the checked program alone (a hint changes no result, only which lines the
L2 cache gives up first):

1. A tensor is **re-read** when the kernel reads it in two or more statements, never writes it
   (no store, atomic or write through a view), and no loop encloses both the last of those
   statements (in source order) and an earlier one. The windows of the tensor that the last
   statement reads directly (`X[...]` in its expressions) are then the last touch of that data in
   the kernel: their vector loads carry an L2 `evict_first` policy. Only windows whose position
   depends on the CTA (`ctx.block` or `ctx.cluster`, directly or through lets and vars) are hinted: a window every
   CTA reads (a weight row `G[0 :+ 1, c :+ C]`) is shared through L2 and keeps its priority. So the second pass of a row
   kernel (statistics in a first loop over the row's chunks, the scaled write in a second) marks
   the lines it has finished with as the first to go, and lines the second pass has still to
   read stay in L2 longer.
2. In a kernel with a re-read tensor, the vector stores into a tensor the kernel never reads carry
   `evict_first` too: the kernel does not read them back, and kept in L2 they would push out the
   lines still to be re-read.
3. Nothing else is hinted (but see the experiment switch below). A kernel with a `dot` is left alone (its operands are shared between
   CTAs through L2; a rule about one CTA's last touch says nothing there), and kernels without a
   re-read tensor (elementwise, whole rows on chip, GEMM, attention) generate the CUDA they did
   before. Element-wise fallbacks at the edges of a tensor stay plain loads and stores.

The experiment switch `TILENB_STORE_EVICT_FIRST=1` (`SWITCHES.store_evict_first`, off by default)
applies rule 2 to every kernel without a `dot`, re-read tensor or not: the stores of a row held on
chip (the cluster forms of the long-row kernels) then give up their L2 lines first, so the weight
rows every CTA reads stay (bench/probes/long_rows.py measures it against the default).

The policy is made once per kernel (`createpolicy.fractional.L2::evict_first`, sm_80+) and used
by `ld.global.L2::cache_hint` / `st.global.L2::cache_hint`; before sm_80 the same accesses are
plain. Measured on the H200 (docs/benchmarks.md, long rows): a hand-written two-pass RMSNorm over
4096 x 131072 bf16 rows went from 70-76% to 80-83% of the copy bandwidth with these two hints;
tilenb's RMSNorm from 69% to 79% (bf16) and 63% to 70% (f32); softmax bf16 lost 3-6 points.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, FrozenSet, List, Set, Tuple

from .. import ir
from ..switches import SWITCHES


@dataclass
class CacheHints:
    """What gets evict_first: `loads` (ids of ir.Slice nodes read directly on a tensor) and
    `stores` (ids of tensor Syms whose vector stores are hinted)."""
    loads: Set[int] = field(default_factory=set)
    stores: Set[int] = field(default_factory=set)
    reread: Tuple[str, ...] = ()          # names of the re-read tensors, for the CUDA's comments

    @property
    def any(self) -> bool:
        return bool(self.loads or self.stores)


def _tensor_of(sym, views: Dict[int, object]):
    """The tensor Sym a tensor / view Sym stands for (None for tiles and views of tiles)."""
    seen = 0
    while sym is not None and getattr(sym, "kind", None) == "view" and seen < 64:
        sym = views.get(id(sym))
        seen += 1
    return sym if sym is not None and getattr(sym, "kind", None) == "tensor" else None


def _per_cta(field: str) -> bool:
    """Whether a ctx field differs between CTAs: ctx.block.*, and ctx.cluster.x / ctx.cluster.rank
    (ctx.block.x / n and ctx.block.x % n under @cluster(n))."""
    return field.startswith("block") or field.startswith("cluster.")


def _block_dependent(body) -> Set[int]:
    """ids of the scalar Syms whose value depends on the CTA (ctx.block, ctx.cluster: through lets,
    vars, loop bounds)."""
    dep: Set[int] = set()

    def depends(e) -> bool:
        for x in ir.walk_expr(e):
            if isinstance(x, ir.Ctx) and _per_cta(x.field):
                return True
            if isinstance(x, ir.Ref) and id(x.sym) in dep:
                return True
        return False

    changed = True
    while changed:
        changed = False
        for s in ir.walk_stmts(body):
            sym, vals = None, ()
            if isinstance(s, (ir.Let, ir.VarDecl)) and s.value is not None:
                sym, vals = s.sym, (s.value,)
            elif isinstance(s, ir.Assign) and isinstance(s.target, ir.Ref):
                sym, vals = s.target.sym, (s.value,)
            elif isinstance(s, ir.For):
                sym, vals = s.var, (s.lo, s.hi)
            if sym is not None and id(sym) not in dep and any(depends(v) for v in vals):
                dep.add(id(sym))
                changed = True
    return dep


def plan(kir: ir.KernelIR) -> CacheHints:
    """The evict_first loads and stores of one kernel variant (rules 1-3 of the module doc)."""
    body = kir.body
    per_cta = _block_dependent(body)

    def cta_window(sl) -> bool:
        return any((isinstance(x, ir.Ctx) and _per_cta(x.field)) or (isinstance(x, ir.Ref) and id(x.sym) in per_cta)
                   for sub in ir.sub_exprs(sl) for x in ir.walk_expr(sub))
    views: Dict[int, object] = {}
    for s in ir.walk_stmts(body):
        if isinstance(s, ir.Let) and s.sym.kind == "view" and isinstance(s.value, (ir.Slice, ir.Ref)):
            views[id(s.sym)] = s.value.base if isinstance(s.value, ir.Slice) else s.value.sym
    written: Set[int] = set()
    readers: Dict[int, List[Tuple[int, FrozenSet[int], list]]] = {}   # tensor -> [(order, loops, direct slices)]
    tensors: Dict[int, object] = {}
    order = [0]
    has_dot = [False]

    def note_reads(exprs, loops, skip=None):
        found: Dict[int, list] = {}
        for top in exprs:
            for e in ir.walk_expr(top):
                if isinstance(e, ir.Dot):
                    has_dot[0] = True
                if e is skip or not isinstance(e, (ir.Slice, ir.Element, ir.Ref)):
                    continue
                base = e.sym if isinstance(e, ir.Ref) else e.base
                t = _tensor_of(base, views)
                if t is None:
                    continue
                tensors[id(t)] = t
                lst = found.setdefault(id(t), [])
                if isinstance(e, ir.Slice) and e.base is t:
                    lst.append(e)
        for tid, sl in found.items():
            readers.setdefault(tid, []).append((order[0], loops, sl))
        order[0] += 1

    def walk(block, loops: FrozenSet[int]):
        for s in block:
            if isinstance(s, ir.Assign):
                tgt = s.target
                if isinstance(tgt, (ir.Slice, ir.Element)):
                    t = _tensor_of(tgt.base, views)
                    if t is not None:
                        written.add(id(t))
                        tensors[id(t)] = t
                    note_reads([s.value] + list(ir.sub_exprs(tgt)), loops)
                else:
                    note_reads([s.value], loops)
            elif isinstance(s, ir.Atomic):
                tgt = s.target
                t = _tensor_of(getattr(tgt, "base", None), views)
                if t is not None:
                    written.add(id(t))
                note_reads([s.value] + list(ir.sub_exprs(tgt)), loops)
            elif isinstance(s, ir.Let) and s.sym.kind == "view":
                note_reads([x for x in ir.sub_exprs(s.value)], loops)   # the view's starts, not its window
            else:
                note_reads(list(ir.stmt_exprs(s)), loops)
            inner = loops | {id(s)} if isinstance(s, (ir.For, ir.While)) else loops
            for b in ir.child_blocks(s):
                walk(b, inner)

    walk(body, frozenset())
    out = CacheHints()
    if has_dot[0]:
        return out
    names = []
    for tid, rs in readers.items():
        if tid in written or len(rs) < 2:
            continue
        last = max(rs, key=lambda r: r[0])
        if any(r is not last and (r[1] & last[1]) for r in rs):
            continue          # a loop around both: its next turn may read the same lines again
        mine = [e for e in last[2] if cta_window(e)]
        if not mine:
            continue
        out.loads.update(id(e) for e in mine)
        names.append(tensors[tid].name)
    if out.loads:
        out.stores = {tid for tid in written if tid not in readers}
        out.reread = tuple(sorted(names))
    elif SWITCHES.store_evict_first:
        out.stores = {tid for tid in written if tid not in readers}
    return out


# ---- the CUDA text ------------------------------------------------------------------------------
HELPERS = r"""
// ---- L2 evict_first for the last touch of re-read data (tilenb/codegen/cache_hints.py) ----
#ifndef TILENB_CACHE_HINTS
#define TILENB_CACHE_HINTS
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
__device__ __forceinline__ unsigned long long tnb_l2_first() { unsigned long long p; asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p)); return p; }
__device__ __forceinline__ uint4 tnb_ld_ef(const uint4* a, unsigned long long p) { uint4 v; asm volatile("ld.global.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(a), "l"(p)); return v; }
__device__ __forceinline__ uint2 tnb_ld_ef(const uint2* a, unsigned long long p) { uint2 v; asm volatile("ld.global.L2::cache_hint.v2.u32 {%0,%1}, [%2], %3;" : "=r"(v.x), "=r"(v.y) : "l"(a), "l"(p)); return v; }
__device__ __forceinline__ unsigned tnb_ld_ef(const unsigned* a, unsigned long long p) { unsigned v; asm volatile("ld.global.L2::cache_hint.u32 %0, [%1], %2;" : "=r"(v) : "l"(a), "l"(p)); return v; }
__device__ __forceinline__ void tnb_st_ef(uint4* a, uint4 v, unsigned long long p) { asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1,%2,%3,%4}, %5;" :: "l"(a), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "l"(p) : "memory"); }
__device__ __forceinline__ void tnb_st_ef(uint2* a, uint2 v, unsigned long long p) { asm volatile("st.global.L2::cache_hint.v2.u32 [%0], {%1,%2}, %3;" :: "l"(a), "r"(v.x), "r"(v.y), "l"(p) : "memory"); }
__device__ __forceinline__ void tnb_st_ef(unsigned* a, unsigned v, unsigned long long p) { asm volatile("st.global.L2::cache_hint.u32 [%0], %1, %2;" :: "l"(a), "r"(v), "l"(p) : "memory"); }
#else
__device__ __forceinline__ unsigned long long tnb_l2_first() { return 0ull; }
template <class V> __device__ __forceinline__ V tnb_ld_ef(const V* a, unsigned long long) { return *a; }
template <class V> __device__ __forceinline__ void tnb_st_ef(V* a, V v, unsigned long long) { *a = v; }
#endif
#endif  // TILENB_CACHE_HINTS
"""

POLICY = "tnb_l2ef"


def load_text(vtype: str, dst: str, src_ptr: str) -> str:
    """`dst = *(const vtype*)(src_ptr)` with the evict_first policy."""
    return f"*({vtype}*){dst} = tnb_ld_ef((const {vtype}*)({src_ptr}), {POLICY});"


def store_text(vtype: str, dst_ptr: str, src: str) -> str:
    """`*(vtype*)(dst_ptr) = *(const vtype*)src` with the evict_first policy."""
    return f"tnb_st_ef(({vtype}*)({dst_ptr}), *(const {vtype}*){src}, {POLICY});"
