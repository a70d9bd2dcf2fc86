"""The CUDA generator's driver: one kernel variant's typed IR -> its CUDA C++ source.

`generate(kir, ...)` makes the generation state (`context.Gen`), lets `paths.choose` read the
analysis' decisions and set up every path, writes the body statement by statement
(`generic.statements.block`, which hands each loop and tile statement to the lowering the
analysis chose), then puts the prelude, the kernel's signature and its prologue around it.

Guarantees, for every KernelIR the checker accepts (or an `UnsupportedError` naming the line):

- The source is the prelude (`prelude.PRELUDE`, then only the helpers the body uses), a comment
  naming the kernel, its threads, shared memory and the place of every tile, then one
  `extern "C" __global__` function named `kernel_symbol(kir)`.
- Parameters: tensors as pointers, scalar parameters by value, then each runtime dimension once
  as `long long`, then (sm_90 GEMM and streamed loops) the tensor maps and `int tnb_tma`; that
  order is `KernelSource.params` (and `KernelSource.tmaps`).
- Shared memory is one 16-byte aligned byte array `tnb_smem` of the analysis' map's size
  (`Analysis.smem`): static when the map allows, else `extern __shared__` (dynamic).
- Every statement is preceded by `// line N: <source text>`; barriers are exactly the
  analysis' (`tilenb.codegen.plan`), each with its reason in a comment.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from .. import ir
from ..analysis.mma_tiles import MmaLayout, RowLayout
from ..lang.diagnostics import UnsupportedError
from ..target import target as as_target
from . import cache_hints
from . import ctypes_ as C
from .context import Gen
from .generic import cluster, statements
from .mma import statements as mma
from .paths import choose
from .plan import contains_cta
from .prelude import ASYNC_COPY_HELPERS, CLUSTER_HELPERS, PANEL_HELPERS, PRELUDE, VECTOR_HELPERS
from .sm90 import gemm, streamed
from .values import KernelSource, kernel_symbol


def generate(kir: ir.KernelIR, source_text: Optional[str] = None, line_offset: int = 0,
             arch=None) -> KernelSource:
    """The CUDA of one kernel variant. arch: the target, in any spelling `tilenb.target.target`
    accepts ("sm_80", "sm_90", "sm_90a", 90, (9, 0), a Target, ...), or None for the code for
    any GPU. On an sm_90 target GEMM and attention loops are lowered to TMA + wgmma (sm90.gemm,
    sm90.streamed) and the source needs sm_90a (`KernelSource.arch` says so; `nvrtc_compile`
    compiles every sm_90 target that way). Raises UnsupportedError naming arch when it names
    no GPU target."""
    g = Gen(kir, source_text, line_offset, as_target(arch))
    kir = g.kir
    sym = kernel_symbol(kir)
    if kir.cluster > 1 and not g.target.clusters:
        raise UnsupportedError(f"kernel '{kir.name}' has @cluster({kir.cluster}): thread block clusters need "
                               f"sm_90 or newer, and the target is {g.target}", kir.span.line + g.line_offset,
                               kir.span.column)
    choose(g)
    params_c, params_meta, prologue = _parameters(g)
    tmaps, sm90_text = _sm90_parts(g, params_c)
    fp = g.smem.array_bytes              # tnb_smem: tiles, mma scratch, rings, cluster slots (analysis.smem)
    dynamic = g.smem.dynamic
    body = _body(g)
    head = _head(g, sym, fp, dynamic, params_c)
    pro = _prologue(g, fp, dynamic, prologue)
    prelude = (PRELUDE.lstrip("\n") + (sm90_text or "") + (cache_hints.HELPERS if g.hints.any else "")
               + (CLUSTER_HELPERS if kir.cluster > 1 else "")
               + (PANEL_HELPERS if any("tnb_pswz(" in line for line in body) else "")
               + (ASYNC_COPY_HELPERS if any("tnb_cpa<" in line for line in body) else "")
               + (VECTOR_HELPERS if any("tnb_stg(" in line or "tnb_sts(" in line for line in body) else ""))
    text = prelude + "\n" + "\n".join(head) + "\n" + "\n".join("  " + l for l in pro) + "\n" + "\n".join(body) + "\n}\n"
    if sm90_text is None:
        return KernelSource(text, sym, g.T, fp, dynamic, params_meta, smem=g.smem)
    return KernelSource(text, sym, g.T, fp, dynamic, params_meta, g.target.nvrtc_arch(), tuple(tmaps),
                        smem=g.smem)


def _parameters(g) -> Tuple[List[str], List[Tuple[str, str, str]], List[str]]:
    """(C parameters, KernelSource.params, prologue lines) of the tensors, scalars and dims."""
    params_c, params_meta, prologue = [], [], []
    for p in g.kir.params:
        s = p.sym
        n = g.cname(s)
        if isinstance(s.type, ir.TensorT):
            params_c.append(f"{C.STORE_C[s.type.dtype]}* {n}")
            params_meta.append(("tensor", s.name, s.type.dtype))
        else:
            dt = s.type.dtype
            if C.STORE_C[dt] == C.VALUE_C[dt]:
                params_c.append(f"{C.STORE_C[dt]} {n}")
            else:
                params_c.append(f"{C.STORE_C[dt]} {n}_in")
                prologue.append(f"const {C.VALUE_C[dt]} {n} = {C.load_value(n + '_in', dt)};")
            params_meta.append(("scalar", s.name, dt))
    for dname, dsym in g.kir.dims.items():
        n = g.cname(dsym)
        g.dims[dname] = n
        params_c.append(f"long long {n}")
        params_meta.append(("dim", dname, "index"))
    return params_c, params_meta, prologue


def _sm90_parts(g, params_c: List[str]):
    """(tensor maps, the functions' text or None) of the loops on Hopper's wgmma (sm90.gemm,
    sm90.streamed); their parameters are appended to params_c."""
    tmaps, sm90_text = [], None
    if g.gemm is not None or g.stream is not None:
        fns = ""
        if g.gemm is not None:
            fns += "".join(g.gemm.functions.values())
            tmaps += g.gemm.tmaps
        if g.stream is not None:
            text, _ = streamed.source_parts(g.stream)
            fns += text
            tmaps += g.stream.tmaps
        sm90_text, sm90_params = gemm.source_parts(fns, tmaps)
        params_c.extend(sm90_params)
    return tmaps, sm90_text


def _body(g) -> List[str]:
    """The lines of the kernel's body."""
    kir = g.kir
    # the copies cluster reductions publish lie after everything else (the map's "cluster slot"s)
    g.cluster_slot_at = {r.key: r.offset for r in g.smem.regions if r.kind == "cluster slot"}
    g.partial_copies: Dict[int, int] = {}   # id(Stmt) -> copies written so far (reduction partials)
    body_start = len(g.out)
    g.ind = 1
    # uses of flags for a varying return
    g.ret_flag = _needs_ret_flag(g)
    if g.ret_flag:
        g.emit("bool tnb_ret = false;  // set by a 'return' some threads take: they skip their per-thread work")
    g.cluster_last = None                # the last cluster reduction (its arrive is waited on at exit)
    g.cluster_pending = None             # (stmt, tile, slot) of a cluster reduction not yet combined
    for st in kir.body:
        if isinstance(st, ir.ClusterReduce):
            g.cluster_last = st
    statements.block(g, kir.body)
    cluster.cluster_exit(g)
    return g.out[body_start:]


def _head(g, sym: str, fp: int, dynamic: bool, params_c: List[str]) -> List[str]:
    """The comment naming the kernel and its tiles' places, then the function's signature."""
    kir = g.kir
    head = []
    head.append(f"// tilenb kernel '{kir.name}'" + (f", variant {', '.join(f'{k}={v}' for k, v in kir.tune.items())}" if kir.tune else ""))
    head.append(f"// {g.T} threads per CTA; shared memory {fp} bytes ({'dynamic' if dynamic else 'static'}); "
                "barriers from analysis")
    for t in g.plan.tiles.values():
        where = f"shared [{t.offset}, {t.offset + t.bytes})" if t.space == "shared" else "registers"
        lay = g.layouts.get(id(t.sym))
        extra = ""
        if isinstance(lay, MmaLayout):
            extra = " (mma.sync accumulator fragments)"
        elif isinstance(lay, RowLayout):
            extra = " (the rows of mma.sync fragments, per lane)"
        head.append(f"//   tile {t.sym.name} (line {t.sym.line + g.line_offset}): {where}{extra}")
    dims = f"__cluster_dims__({kir.cluster}, 1, 1) " if kir.cluster > 1 else ""
    head.append(f'extern "C" __global__ void {dims}__launch_bounds__({g.T}{mma.mma_min_blocks(g)}) {sym}({", ".join(params_c)}) {{')
    return head


def _prologue(g, fp: int, dynamic: bool, prologue: List[str]) -> List[str]:
    """The shared array, the thread's indices, scalar conversions and the L2 policy."""
    pro = []
    if fp > 0:
        if dynamic:
            pro.append("extern __shared__ __align__(16) unsigned char tnb_smem[];")
        else:
            pro.append(f"__shared__ __align__(16) unsigned char tnb_smem[{fp}];")
    pro.append("const int tnb_tid = threadIdx.x;")
    pro.append("const int tnb_warp = tnb_tid >> 5, tnb_lane = tnb_tid & 31;")
    pro.extend(prologue)
    if g.hints.any and not g.hints.reread:   # TILENB_STORE_EVICT_FIRST=1 (an experiment switch)
        pro.append(f"const unsigned long long {cache_hints.POLICY} = tnb_l2_first();  // L2 evict_first: stores "
                   f"this kernel never reads back (TILENB_STORE_EVICT_FIRST, cache_hints.py)")
    elif g.hints.any:
        pro.append(f"const unsigned long long {cache_hints.POLICY} = tnb_l2_first();  // L2 evict_first: the last "
                   f"reads of {', '.join(g.hints.reread)} (read again after an earlier pass) and stores "
                   f"this kernel never reads back (cache_hints.py)")
    return pro


def _needs_ret_flag(g) -> bool:
    """Whether some threads may take a `return` alone in a kernel with CTA statements."""
    if not contains_cta(g.kir.body):
        return False
    for s in ir.walk_stmts(g.kir.body):
        if isinstance(s, ir.Return) and id(s) in g.plan.uni.varying_control:
            return True
    return False
