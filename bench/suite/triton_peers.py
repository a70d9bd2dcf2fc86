"""Question: What does Triton reach on the suite's workloads when written the way its tutorials write
kernels?

Triton peers of the benchmark suite (bench/suite/suite.py): row softmax, RMSNorm and LayerNorm, a
blocked matmul with @triton.autotune, and a flash-attention forward, written for this project in
the style of Triton's tutorials (their structure, not their code).

Guarantees:
- Importing this module imports neither Triton nor torch; `load()` imports Triton and defines
  the kernels (ImportError or a Triton error if that fails: the suite then records every Triton
  peer as failed, with the reason, and goes on).
- Every entry point takes C-contiguous tensors of one dtype (f32, f16 or bf16: torch CUDA tensors
  in the suite), writes `out` (same shape and dtype, allocated by the caller) and returns it.
  Reductions and softmax accumulate in f32; matmul and attention multiply on tensor cores
  (`tl.dot`) with f32 accumulators and round once, at the store.
- Row operations over X[M, N]: one program per row. A row of at most `FUSED_MAX_ELEMS` elements
  is held whole in registers (the form of the tutorials' fused softmax); a longer row is swept
  twice in chunks of `chunk_elems(esize)` columns, per-lane partial statistics in registers
  during the first sweep, the output in the second (the form the layer-norm tutorial takes
  when a row does not fit). `row_form(N, esize)` names the form, for the suite's notes.
- matmul(A[M, K], B[K, N]) -> C[M, N]: one program per BLOCK_M x BLOCK_N tile of C, programs
  ordered in groups of GROUP_M tile rows so neighbours share B tiles in L2; @triton.autotune over
  `MATMUL_CONFIGS` keyed on (M, N, K) (`quick=True`: the first two configs only).
- attention(Q, K, V [BH, N, D]) -> O: softmax(Q K^T * scale) V without a mask, one program per
  (BLOCK_M query rows, head), an online softmax over BLOCK_N keys at a time in base 2 (exp2 of
  logits pre-scaled by log2 e); @triton.autotune over `ATTENTION_CONFIGS` keyed on (N, D).
- `python bench/suite/triton_peers.py --interpret` runs every kernel through Triton's interpreter
  (TRITON_INTERPRET=1, on the CPU: needs triton and numpy, not torch nor a GPU) at ragged shapes
  against float64 numpy references, and exits 1 on any mismatch.
"""
from __future__ import annotations

import math
import os
import sys

FUSED_MAX_ELEMS = 16384
LOG2E = 1.4426950408889634

# (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_stages, num_warps): the usual Hopper-sized tiles
MATMUL_CONFIGS = [
    (128, 256, 64, 8, 3, 8),
    (128, 128, 64, 8, 4, 4),
    (256, 128, 64, 8, 3, 8),
    (128, 256, 64, 8, 4, 8),
    (128, 128, 64, 8, 4, 8),
    (64, 256, 64, 8, 4, 4),
]
# (BLOCK_M, BLOCK_N, num_stages, num_warps)
ATTENTION_CONFIGS = [
    (128, 64, 3, 4),
    (128, 128, 3, 8),
    (128, 64, 3, 8),
    (64, 64, 4, 4),
]

_K = None  # the kernels, once load() ran


def chunk_elems(esize: int) -> int:
    """Columns per chunk of the two-sweep row kernels: 16 KB of the input's elements."""
    return 16384 // esize


def row_form(n: int, esize: int) -> str:
    if n <= FUSED_MAX_ELEMS:
        return f"whole row in registers (block {_pow2(n)})"
    return f"two sweeps over chunks of {chunk_elems(esize)} columns"


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _row_warps(block: int) -> int:
    return 4 if block <= 1024 else 8 if block <= 4096 else 16


def _bench_fast(kernel_call, quantiles):
    """The autotuner's benchmark, shortened (10 ms warm-up, 40 ms of repeats per config)."""
    import triton.testing
    return triton.testing.do_bench(kernel_call, warmup=10, rep=40, quantiles=quantiles)


def load():
    """Import Triton and define the kernels (once); returns the namespace holding them."""
    global _K
    if _K is not None:
        return _K
    import triton
    import triton.language as tl

    @triton.jit
    def softmax_row(X, Y, N, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64) * N
        cols = tl.arange(0, BLOCK)
        inside = cols < N
        x = tl.load(X + row + cols, mask=inside, other=-float("inf")).to(tl.float32)
        e = tl.exp(x - tl.max(x, axis=0))
        inv = 1.0 / tl.sum(e, axis=0)
        tl.store(Y + row + cols, (e * inv).to(Y.dtype.element_ty), mask=inside)

    @triton.jit
    def softmax_chunked(X, Y, N, CHUNK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64) * N
        cols = tl.arange(0, CHUNK)
        # per lane: the running maximum and the sum of exp(x - maximum) of the values it saw
        m = tl.full([CHUNK], -float("inf"), tl.float32)
        s = tl.zeros([CHUNK], tl.float32)
        for c in range(0, N, CHUNK):
            x = tl.load(X + row + c + cols, mask=c + cols < N, other=-float("inf")).to(tl.float32)
            m_new = tl.maximum(m, x)
            ref = tl.where(m_new == -float("inf"), 0.0, m_new)   # a lane that saw only padding
            s = s * tl.exp(m - ref) + tl.exp(x - ref)
            m = m_new
        big = tl.max(m, axis=0)
        inv = 1.0 / tl.sum(s * tl.exp(m - big), axis=0)
        for c in range(0, N, CHUNK):
            inside = c + cols < N
            x = tl.load(X + row + c + cols, mask=inside, other=0.0).to(tl.float32)
            tl.store(Y + row + c + cols, (tl.exp(x - big) * inv).to(Y.dtype.element_ty), mask=inside)

    @triton.jit
    def rms_norm_row(X, W, Y, N, eps, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64) * N
        cols = tl.arange(0, BLOCK)
        inside = cols < N
        x = tl.load(X + row + cols, mask=inside, other=0.0).to(tl.float32)
        w = tl.load(W + cols, mask=inside, other=0.0).to(tl.float32)
        rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
        tl.store(Y + row + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=inside)

    @triton.jit
    def rms_norm_chunked(X, W, Y, N, eps, CHUNK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64) * N
        cols = tl.arange(0, CHUNK)
        sq = tl.zeros([CHUNK], tl.float32)
        for c in range(0, N, CHUNK):
            x = tl.load(X + row + c + cols, mask=c + cols < N, other=0.0).to(tl.float32)
            sq += x * x
        rstd = tl.rsqrt(tl.sum(sq, axis=0) / N + eps)
        for c in range(0, N, CHUNK):
            inside = c + cols < N
            x = tl.load(X + row + c + cols, mask=inside, other=0.0).to(tl.float32)
            w = tl.load(W + c + cols, mask=inside, other=0.0).to(tl.float32)
            tl.store(Y + row + c + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=inside)

    @triton.jit
    def layer_norm_row(X, W, B, Y, N, eps, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64) * N
        cols = tl.arange(0, BLOCK)
        inside = cols < N
        x = tl.load(X + row + cols, mask=inside, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=0) / N
        xc = tl.where(inside, x - mean, 0.0)
        rstd = tl.rsqrt(tl.sum(xc * xc, axis=0) / N + eps)
        w = tl.load(W + cols, mask=inside, other=0.0).to(tl.float32)
        b = tl.load(B + cols, mask=inside, other=0.0).to(tl.float32)
        tl.store(Y + row + cols, (xc * rstd * w + b).to(Y.dtype.element_ty), mask=inside)

    @triton.jit
    def layer_norm_chunked(X, W, B, Y, N, eps, CHUNK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64) * N
        cols = tl.arange(0, CHUNK)
        s1 = tl.zeros([CHUNK], tl.float32)
        s2 = tl.zeros([CHUNK], tl.float32)
        for c in range(0, N, CHUNK):
            x = tl.load(X + row + c + cols, mask=c + cols < N, other=0.0).to(tl.float32)
            s1 += x
            s2 += x * x
        mean = tl.sum(s1, axis=0) / N
        var = tl.maximum(tl.sum(s2, axis=0) / N - mean * mean, 0.0)
        rstd = tl.rsqrt(var + eps)
        for c in range(0, N, CHUNK):
            inside = c + cols < N
            x = tl.load(X + row + c + cols, mask=inside, other=0.0).to(tl.float32)
            w = tl.load(W + c + cols, mask=inside, other=0.0).to(tl.float32)
            b = tl.load(B + c + cols, mask=inside, other=0.0).to(tl.float32)
            tl.store(Y + row + c + cols, ((x - mean) * rstd * w + b).to(Y.dtype.element_ty), mask=inside)

    @triton.jit
    def matmul(A, B, C, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
               GROUP_M: tl.constexpr):
        pid = tl.program_id(0)
        tiles_m = tl.cdiv(M, BLOCK_M)
        tiles_n = tl.cdiv(N, BLOCK_N)
        # GROUP_M consecutive tile rows walk the tile columns together (B tiles reused from L2)
        in_group = GROUP_M * tiles_n
        first_m = (pid // in_group) * GROUP_M
        rows_here = tl.minimum(tiles_m - first_m, GROUP_M)
        tm = first_m + (pid % in_group) % rows_here
        tn = (pid % in_group) // rows_here
        om = tm * BLOCK_M + tl.arange(0, BLOCK_M)
        on = tn * BLOCK_N + tl.arange(0, BLOCK_N)
        ok = tl.arange(0, BLOCK_K)
        # rows / columns past the edge read a valid row instead (their results are never stored)
        am = tl.max_contiguous(tl.multiple_of(om % M, BLOCK_M), BLOCK_M)
        bn = tl.max_contiguous(tl.multiple_of(on % N, BLOCK_N), BLOCK_N)
        a_at = A + am[:, None] * K + ok[None, :]
        b_at = B + ok[:, None] * N + bn[None, :]
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kt in range(0, tl.cdiv(K, BLOCK_K)):
            k_left = K - kt * BLOCK_K
            a = tl.load(a_at, mask=ok[None, :] < k_left, other=0.0)
            b = tl.load(b_at, mask=ok[:, None] < k_left, other=0.0)
            acc = tl.dot(a, b, acc)
            a_at += BLOCK_K
            b_at += BLOCK_K * N
        tl.store(C + om[:, None] * N + on[None, :], acc.to(C.dtype.element_ty),
                 mask=(om[:, None] < M) & (on[None, :] < N))

    @triton.jit
    def attention(Q, Kt, V, O, N, NK, qk_scale, D: tl.constexpr, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr, EVEN_K: tl.constexpr):
        head = tl.program_id(1).to(tl.int64)
        om = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        on = tl.arange(0, BLOCK_N)
        od = tl.arange(0, D)
        q_rows = head * N * D + om[:, None] * D + od[None, :]
        q = tl.load(Q + q_rows, mask=om[:, None] < N, other=0.0)
        k_at = Kt + head * NK * D + on[:, None] * D + od[None, :]
        v_at = V + head * NK * D + on[:, None] * D + od[None, :]
        m = tl.full([BLOCK_M], -float("inf"), tl.float32)      # running row maximum (base-2 logits)
        l = tl.zeros([BLOCK_M], tl.float32)                     # running row sum of exp2(s - m)
        acc = tl.zeros([BLOCK_M, D], tl.float32)
        for start in range(0, NK, BLOCK_N):
            if EVEN_K:
                k = tl.load(k_at + start * D)
                v = tl.load(v_at + start * D)
            else:
                valid = start + on < NK
                k = tl.load(k_at + start * D, mask=valid[:, None], other=0.0)
                v = tl.load(v_at + start * D, mask=valid[:, None], other=0.0)
            s = tl.dot(q, tl.trans(k)) * qk_scale
            if not EVEN_K:
                s = tl.where((start + on < NK)[None, :], s, -float("inf"))
            m_new = tl.maximum(m, tl.max(s, axis=1))
            p = tl.math.exp2(s - m_new[:, None])
            alpha = tl.math.exp2(m - m_new)
            l = l * alpha + tl.sum(p, axis=1)
            acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
            m = m_new
        out = acc / l[:, None]
        tl.store(O + q_rows, out.to(O.dtype.element_ty), mask=om[:, None] < N)

    class NS:
        pass
    ns = NS()
    ns.triton, ns.tl = triton, tl
    for f in (softmax_row, softmax_chunked, rms_norm_row, rms_norm_chunked, layer_norm_row, layer_norm_chunked,
              matmul, attention):
        setattr(ns, f.fn.__name__ if hasattr(f, "fn") else f.__name__, f)

    def tuned(fn, configs, key):
        return triton.autotune(configs=configs, key=key, do_bench=_bench_fast)(fn)

    mm = [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": g}, num_stages=st, num_warps=w)
          for bm, bn, bk, g, st, w in MATMUL_CONFIGS]
    at = [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_stages=st, num_warps=w)
          for bm, bn, st, w in ATTENTION_CONFIGS]
    ns.matmul_tuned = {False: tuned(matmul, mm, ["M", "N", "K"]), True: tuned(matmul, mm[:2], ["M", "N", "K"])}
    ns.attention_tuned = {False: tuned(attention, at, ["N", "NK", "D"]),
                          True: tuned(attention, at[:2], ["N", "NK", "D"])}
    _K = ns
    return ns


# ---- entry points -------------------------------------------------------------------------------
def _rows(x):
    n = x.shape[-1]
    m = 1
    for d in x.shape[:-1]:
        m *= d
    return m, n


def _esize(x) -> int:
    return x.element_size() if hasattr(x, "element_size") else x.dtype.itemsize


def softmax(x, out):
    """out[i, :] = softmax(x[i, :]) over the last dimension."""
    k = load()
    m, n = _rows(x)
    if n <= FUSED_MAX_ELEMS:
        b = _pow2(n)
        k.softmax_row[(m,)](x, out, n, BLOCK=b, num_warps=_row_warps(b))
    else:
        k.softmax_chunked[(m,)](x, out, n, CHUNK=chunk_elems(_esize(x)), num_warps=16)
    return out


def rms_norm(x, w, out, eps):
    """out[i, :] = x[i, :] / sqrt(mean(x[i, :]^2) + eps) * w; w has N elements."""
    k = load()
    m, n = _rows(x)
    if n <= FUSED_MAX_ELEMS:
        b = _pow2(n)
        k.rms_norm_row[(m,)](x, w, out, n, eps, BLOCK=b, num_warps=_row_warps(b))
    else:
        k.rms_norm_chunked[(m,)](x, w, out, n, eps, CHUNK=chunk_elems(_esize(x)), num_warps=16)
    return out


def layer_norm(x, w, b, out, eps):
    """out[i, :] = (x[i, :] - mean) / sqrt(var + eps) * w + b (biased variance)."""
    k = load()
    m, n = _rows(x)
    if n <= FUSED_MAX_ELEMS:
        blk = _pow2(n)
        k.layer_norm_row[(m,)](x, w, b, out, n, eps, BLOCK=blk, num_warps=_row_warps(blk))
    else:
        k.layer_norm_chunked[(m,)](x, w, b, out, n, eps, CHUNK=chunk_elems(_esize(x)), num_warps=16)
    return out


def matmul(a, b, out, quick=False, config=None):
    """out[M, N] = a[M, K] @ b[K, N] (f32 accumulation). `config`: one of MATMUL_CONFIGS, run
    without autotuning (the interpreter check); otherwise @triton.autotune picks."""
    k = load()
    (M, K), (_, N) = a.shape, b.shape
    if config is not None:
        bm, bn, bk, g, st, w = config
        grid = (math.ceil(M / bm) * math.ceil(N / bn),)
        k.matmul[grid](a, b, out, M, N, K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=g, num_stages=st,
                       num_warps=w)
        return out
    grid = lambda meta: (math.ceil(M / meta["BLOCK_M"]) * math.ceil(N / meta["BLOCK_N"]),)  # noqa: E731
    k.matmul_tuned[quick][grid](a, b, out, M, N, K)
    return out


def matmul_choice(quick=False):
    """The config the autotuner chose last (a dict), or None."""
    t = load().matmul_tuned[quick]
    return _config_dict(getattr(t, "best_config", None))


def attention(q, k_, v, out, scale, quick=False, config=None):
    """out[h] = softmax(q[h] k[h]^T * scale) v[h] for q, k, v, out of shape [BH, N, D]."""
    kk = load()
    bh, n, d = q.shape
    nk = k_.shape[1]
    qk_scale = scale * LOG2E
    if config is not None:
        bm, bn, st, w = config
        kk.attention[(math.ceil(n / bm), bh)](q, k_, v, out, n, nk, qk_scale, D=d, BLOCK_M=bm, BLOCK_N=bn,
                                              EVEN_K=nk % bn == 0, num_stages=st, num_warps=w)
        return out
    tuned = kk.attention_tuned[quick]
    # EVEN_K depends on the chosen BLOCK_N: every config's BLOCK_N divides 64-multiples
    even = nk % 128 == 0
    if not even:
        # a ragged key count: the untuned path with the masked loop
        return attention(q, k_, v, out, scale, config=ATTENTION_CONFIGS[0])
    grid = lambda meta: (math.ceil(n / meta["BLOCK_M"]), bh)  # noqa: E731
    tuned[grid](q, k_, v, out, n, nk, qk_scale, D=d, EVEN_K=True)
    return out


def attention_choice(quick=False):
    t = load().attention_tuned[quick]
    return _config_dict(getattr(t, "best_config", None))


def _config_dict(c):
    if c is None:
        return None
    return dict(c.kwargs, num_warps=c.num_warps, num_stages=c.num_stages)


# ---- the interpreter check (CPU, numpy only) -------------------------------------------------------
class _HostStorage:
    def __init__(self, t):
        self.t = t

    def data_ptr(self):
        return self.t.a.ctypes.data

    def cpu(self):
        return self

    def copy_(self, other):
        return self


class HostTensor:
    """A numpy array posing as a host tensor for Triton's interpreter (which reads and writes the
    memory through data_ptr(); it needs nothing else of torch)."""

    def __init__(self, a):
        self.a = a
        self.dtype = a.dtype
        self.shape = a.shape

    def data_ptr(self):
        return self.a.ctypes.data

    def element_size(self):
        return self.a.itemsize

    def untyped_storage(self):
        return _HostStorage(self)

    def new_empty(self, *args, **kwargs):
        return self

    def set_(self, *args):
        return self

    def copy_(self, other):
        return self

    def storage_offset(self):
        return 0

    def size(self):
        return self.a.shape

    def stride(self, dim=None):
        st = tuple(s // self.a.itemsize for s in self.a.strides)
        return st if dim is None else st[dim]


def interpret_check() -> int:
    import numpy as np
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))   # tilenb
    from tilenb.examples import suite_kernels as SK
    from numpy_check import Check        # beside this file: numpy and ml_dtypes only
    ck = Check(seed=1, prefix="triton ", width=40)
    arr, check = ck.arr, ck.check

    H = HostTensor
    global FUSED_MAX_ELEMS
    for dt in ("f32", "bf16"):
        tol = 1e-5 if dt == "f32" else 1.5e-2
        for M, N, fused_max in ((5, 300, FUSED_MAX_ELEMS), (3, 9000, 4096)):
            saved, FUSED_MAX_ELEMS = FUSED_MAX_ELEMS, fused_max        # the chunked form at a small N
            try:
                form = "row" if N <= FUSED_MAX_ELEMS else "chunked"
                x, w, b = arr((M, N), dt), arr((N,), dt), arr((N,), dt)
                y = np.full((M, N), np.nan, np.float32).astype(x.dtype)
                softmax(H(x), H(y))
                check(f"softmax {form} {dt} {(M, N)}", y, SK.ref_softmax(x), tol)
                rms_norm(H(x), H(w), H(y), 1e-6)
                check(f"rms_norm {form} {dt} {(M, N)}", y, SK.ref_rms_norm(x, w[None, :], 1e-6), tol)
                layer_norm(H(x), H(w), H(b), H(y), 1e-5)
                check(f"layer_norm {form} {dt} {(M, N)}", y, SK.ref_layer_norm(x, w[None, :], b[None, :], 1e-5), tol)
            finally:
                FUSED_MAX_ELEMS = saved
    # Triton 3.6's interpreter multiplies bf16 operands of tl.dot as their raw 16-bit patterns, so
    # the two tl.dot kernels are checked in f16 here (the same code); bf16 is checked against torch
    # on the GPU by the suite before any timing.
    small_mm = (32, 32, 32, 2, 1, 4)
    for dt in ("f16",):
        a, b = arr((70, 52), dt), arr((52, 36), dt)
        c = np.full((70, 36), np.nan, np.float32).astype(a.dtype)
        matmul(H(a), H(b), H(c), config=small_mm)
        check(f"matmul {dt} 70x36x52", c, a.astype(np.float64) @ b.astype(np.float64), 1e-2)
    for nk, cfg in ((128, (32, 32, 1, 4)), (70, (32, 32, 1, 4))):
        q, k_, v = arr((2, 45, 64), "f16"), arr((2, nk, 64), "f16"), arr((2, nk, 64), "f16")
        o = np.full((2, 45, 64), np.nan, np.float32).astype(q.dtype)
        attention(H(q), H(k_), H(v), H(o), 0.125, config=cfg)
        check(f"attention f16 H=2 N=45 Nk={nk} D=64", o, SK.ref_attention(q, k_, v, 0.125), 2e-2)
    print(f"triton interpreter check: {ck.failures} failure(s)")
    return 1 if ck.failures else 0


if __name__ == "__main__":
    if "--interpret" in sys.argv[1:]:
        os.environ["TRITON_INTERPRET"] = "1"
        sys.exit(interpret_check())
    print(__doc__)
