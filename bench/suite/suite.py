"""Question: How fast is each workload of the suite in tilenb against its peers (torch, Triton,
cuBLAS, cuDNN) on this GPU, and is every output right?

The performance suite of issue 8: each workload in tilenb and its peers, in one process.

Usage, from the project root:
    python bench/suite/suite.py --out DIR            # on a CUDA GPU with CuPy, torch and Triton
    python bench/suite/suite.py --out DIR --tag memory --only memory,overheads   # the final run, call 1
    python bench/suite/suite.py --out DIR --tag matrix --only matrix             # the final run, call 2
    python bench/suite/suite.py --out DIR --tag causal --only causal             # causal attention (call 3)
                                               # (docs/benchmarks.md gives the exact device commands)
    python bench/suite/suite.py --cpu-check          # here, without a GPU: every kernel of the suite on
                                               # the CPU executor at small shapes against numpy,
                                               # every @autotune variant through NVRTC, and (when
                                               # triton is installed) the Triton peers through
                                               # Triton's interpreter
Options: --only NAME[,NAME] (workload or group names, see WORKLOADS and GROUPS), --skip NAME[,NAME],
--tag TAG (outputs DIR/<gpu>_TAG.json and DIR/suite_TAG.log, for the calls of a split run),
--budget SECONDS (the whole run; workloads that would start after it are recorded as not run),
--no-compile-peers (skip torch.compile), --no-triton (skip the Triton peers), --quick (fewer
repeats, one GEMM run, two Triton autotune configs: a smoke test, not a measurement), --full-autotune
(tilenb autotunes attention at 16k too instead of reusing the 4k winner), --jobs N
(parallel NVRTC processes for the warm-up compile).

What it guarantees:
- Every number is a GPU time from CUDA events (torch.cuda.Event) around one launch, after
  warm-up runs, the median of repeats (repeats enough for about 0.2 s, 5 to 50; a launch that
  takes over a second is timed once after its warm-up and says so in `timing_reps`), inputs drawn
  at random on the GPU (normal; never zeros), outputs distinct per implementation. The tilenb rows
  time the generated kernel's launch alone (the argument checks of the public call are timed
  separately, in the launch-overhead row).
- Before a tilenb kernel is timed, its output is poisoned with NaN, it runs once through the
  public call (`module.kernel[grid](...)`, which also autotunes), and the result is compared with
  the first peer's (relative error ||tilenb - peer|| / ||peer|| in float64, NaN fails). A
  mismatch is recorded (`verified: false`) and the row kept. The Triton peers (bench/suite/triton_peers.py)
  are checked the same way against torch's output before they are timed; one that differs, fails
  to compile or fails to run is a row with `peer_status: "failed: ..."` and is not timed.
- A workload that tilenb cannot express or that fails records its reason in `tilenb_status`;
  nothing is dropped silently. Peers that fail (a torch.compile error, an SDPA backend missing,
  Triton) record theirs in `peer_status`. Every workload runs under a guard: one failure is one
  recorded row, and the run goes on.
- GEMM rows (issue 19): tilenb autotunes at every shape (8192^3 included: the space is 8 variants,
  about a second), then three runs in one process each time cuBLAS and tilenb's choice; the row
  holds the medians and `gemm_runs` every run and the spread of tilenb's speed over cuBLAS. At
  8192^3 the 4096^3 winner, where it differs, is timed in the same runs (`gemm_runs.reused_s`,
  and the row's `notes`): what reusing the smaller shape's winner would cost.
- Time boxes: at attention sequence 16k, tilenb launches the @autotune variant that won at
  sequence 4k in the same run (same head dim) instead of timing every variant at the big shape
  (the row's `notes` say so; --full-autotune turns this off).
- Results: DIR/<gpu>[_TAG].json (`machine`, `copy_bandwidth_GBps`, `rows`: one row per (workload, shape,
  dtype, peer), written after every row; `machine.wall_s`: seconds per workload and per group)
  and DIR/suite[_TAG].log. Every run measures the copy bandwidth it compares against at its start, so
  the JSON files of a split run stand alone; `bench/suite/report.py` merges them into
  docs/benchmarks.md's tables and plot.
- Ratios: `ratio` = tilenb seconds / peer seconds (above 1: tilenb is slower). `peer_kind` groups
  peers (torch eager, torch.compile, Triton, cuBLAS, SDPA, CuPy, ...). `metric` and `target`
  restate issue 8's target for the row: `frac_copy_bw` (tilenb GB/s over the device-to-device
  copy bandwidth measured in the same run), `speed_vs_peer` (peer s / tilenb s), `time_ratio`
  (tilenb s / peer s), or `seconds`; `meets_target` says whether it is met. `headline: false`
  marks a row that does not carry the target (e.g. GEMM against Triton: the target is cuBLAS).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import tilenb  # noqa: E402
from tilenb.examples import suite_kernels as SK  # noqa: E402
import triton_peers as TP  # noqa: E402
from report import peer_kind  # noqa: E402

GiB = 1 << 30
TARGETS = {"memory": ("frac_copy_bw", 0.90), "transpose": ("frac_copy_bw", 0.85),
           "gemm": ("speed_vs_peer", 0.80), "attention": ("speed_vs_peer", 0.70),
           "launch": ("time_ratio", 1.3), "compile": ("time_ratio", 1.5), "rerun": ("seconds", 0.005)}


# ---- small helpers ----------------------------------------------------------------------------
def log(msg: str):
    print(msg, flush=True)
    if S.logf is not None:
        S.logf.write(msg + "\n")
        S.logf.flush()


class State:
    def __init__(self):
        self.logf = None
        self.rows = []
        self.out = None
        self.json_path = None
        self.machine = {}
        self.copy_gbps = None
        self.copy_times = {}
        self.t0 = time.perf_counter()
        self.budget = 1e9
        self.mod = None
        self.torch = None
        self.cp = None
        self.compile_peers = True
        self.compile_spent = 0.0
        self.compile_budget = 60.0
        self.use_triton = True
        self.triton_error = None        # why Triton could not be loaded, once tried
        self.quick = False
        self.full_autotune = False
        self.winners = {}               # (kernel, dtype, extra) -> the @autotune variant that won
        self.wall = {"workloads": {}, "groups": {}}
        self.timing_reps = None         # repeats of the last time_gpu call
        self.tag = ""                   # "_TAG" of --tag, in the output names

    def left(self) -> float:
        return self.budget - (time.perf_counter() - self.t0)


S = State()


def save():
    if S.json_path is None:
        return
    data = {"machine": S.machine, "copy_bandwidth_GBps": S.copy_gbps, "rows": S.rows,
            "elapsed_s": round(time.perf_counter() - S.t0, 1)}
    tmp = S.json_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, S.json_path)


def row(workload, shape, dtype, kind, *, tilenb_s=None, tilenb_status="ok", peer=None, peer_s=None,
        peer_status="ok", nbytes=None, flops=None, verified=None, rel_err=None, variant=None, notes="", extra=None):
    """Record one (workload, shape, dtype, peer) result with its rates and its target."""
    r = {"workload": workload, "shape": list(shape) if shape is not None else None, "dtype": dtype, "kind": kind,
         "tilenb_s": tilenb_s, "tilenb_status": tilenb_status, "tilenb_variant": variant,
         "peer": peer, "peer_kind": peer_kind(peer), "peer_s": peer_s, "peer_status": peer_status,
         "verified": verified, "rel_err": rel_err, "bytes": nbytes, "flops": flops, "notes": notes}
    ok_t = tilenb_s is not None and tilenb_status == "ok"
    ok_p = peer_s is not None and peer_status == "ok"
    r["ratio"] = tilenb_s / peer_s if ok_t and ok_p else None
    r["speed_vs_peer"] = peer_s / tilenb_s if ok_t and ok_p else None
    for who, sec in (("tilenb", tilenb_s if ok_t else None), ("peer", peer_s if ok_p else None)):
        r[f"{who}_GBps"] = nbytes / sec / 1e9 if nbytes and sec else None
        r[f"{who}_TFLOPs"] = flops / sec / 1e12 if flops and sec else None
    metric, target = TARGETS[kind]
    r["metric"], r["target"] = metric, target
    if metric == "frac_copy_bw":
        val = r["tilenb_GBps"] / S.copy_gbps if r["tilenb_GBps"] and S.copy_gbps else None
        r["frac_copy_bw"] = val
        r["peer_frac_copy_bw"] = r["peer_GBps"] / S.copy_gbps if r["peer_GBps"] and S.copy_gbps else None
        r["meets_target"] = None if val is None else bool(val >= target)
    elif metric == "speed_vs_peer":
        val = r["speed_vs_peer"]
        r["meets_target"] = None if val is None else bool(val >= target)
    elif metric == "time_ratio":
        val = r["ratio"]
        r["meets_target"] = None if val is None else bool(val <= target)
    else:
        val = tilenb_s if ok_t else None
        r["meets_target"] = None if val is None else bool(val < target)
    r["metric_value"] = val
    if extra:
        r.update(extra)
    S.rows.append(r)
    save()
    t = f"{tilenb_s * 1e3:9.4f} ms" if ok_t else f"tilenb {tilenb_status[:60]}"
    p = f"{peer_s * 1e3:9.4f} ms" if ok_p else f"{peer_status[:60]}"
    v = f"{val:.3f}" if isinstance(val, float) else "-"
    log(f"ROW {workload:16s} {str(tuple(shape) if shape else ''):22s} {dtype:5s} tilenb {t} | {peer}: {p} | "
        f"{metric} {v} (target {target})")
    return r


# ---- timing ----------------------------------------------------------------------------------
def time_gpu(fn, warmup=3, min_reps=5, max_reps=50, target_s=0.2, slow_s=1.0):
    """Median seconds of `fn()` (which only enqueues GPU work) between CUDA events. A launch that
    takes over `slow_s` is timed once after its warm-ups (S.timing_reps says how many)."""
    torch = S.torch
    if S.quick:
        target_s, max_reps, warmup = min(target_s, 0.05), min(max_reps, 10), min(warmup, 1)
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    e.synchronize()
    est = max(s.elapsed_time(e) / 1e3, 1e-6)
    if est > slow_s:
        S.timing_reps = 1
        return est
    reps = int(max(min_reps, min(max_reps, target_s / est)))
    evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for a, b in evs:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    ts = sorted(a.elapsed_time(b) / 1e3 for a, b in evs)
    S.timing_reps = reps
    return statistics.median(ts)


class GpuArray:
    """A torch CUDA tensor seen through __cuda_array_interface__ with a numpy dtype that names
    bf16 too (torch refuses the interface for bf16): how tilenb receives torch memory in place."""

    def __init__(self, t):
        import ml_dtypes
        torch = S.torch
        self.t = t
        self.shape = tuple(t.shape)
        self.dtype = {torch.float32: np.dtype(np.float32), torch.float16: np.dtype(np.float16),
                      torch.bfloat16: np.dtype(ml_dtypes.bfloat16)}[t.dtype]
        typestr = "<V2" if t.dtype == torch.bfloat16 else self.dtype.str
        self.__cuda_array_interface__ = {"shape": self.shape, "typestr": typestr,
                                         "data": (t.data_ptr(), False), "version": 3, "strides": None}


def prepared_launch(kernel, grid, args, variant):
    """The generated kernel of one variant, launched from prepared arguments (no launch checks):
    (a closure that launches it once, its KernelSource, its loaded CuPy function). `args` are
    what the public call took (GpuArray for torch tensors); the kernel must have run once with
    them (its source compiled and loaded)."""
    import tilenb.runtime.gpu.cuda as tc
    from tilenb.runtime.checks import prepare, written_tensors
    ch = prepare(kernel, grid, tuple(args), variant=dict(variant)).chosen
    da = tc._device_args(ch.kir, ch.bound, written_tensors(ch.kir))
    ks = tc.kernel_source(kernel, ch.kir)
    fn = tc.load_kernel(ks, tc.device_arch())

    def go():
        tc._launch(fn, ks, ch.grid, da)
    go.keep = (args, da, ch)
    return go, ks, fn


def tl_launch(kernel, grid, args, out, variant=None):
    """Poison `out` (torch), run the public call once (autotuning on a first signature unless
    `variant` names one), and return (a closure that launches the chosen variant's kernel alone,
    the variant, facts about it)."""
    import tilenb.runtime.gpu.cuda as tc
    torch = S.torch
    if out.dtype.is_floating_point:
        out.fill_(float("nan"))
    wrapped = [GpuArray(a) if hasattr(a, "data_ptr") else a for a in args]
    t0 = time.perf_counter()
    if variant is None:
        kernel[grid](*wrapped)
    else:
        kernel[grid](*wrapped, variant=dict(variant))
    torch.cuda.synchronize()
    first_s = time.perf_counter() - t0
    run = kernel.last_run
    go, ks, fn = prepared_launch(kernel, grid, wrapped, run.variant)
    facts = {"first_call_s": round(first_s, 4), "smem_bytes": ks.smem_bytes, "threads": ks.threads,
             "grid": list(run.grid), "symbol": ks.symbol,
             "autotune": [{"variant": t["variant"], "ms": t["ms"], "note": t["note"]} for t in run.extra.get("timings", [])]}
    # the target load_kernel compiled for (a kernel may name its own, sm_90a) and the file it keeps
    facts["arch"] = tc.compile_target(ks, tc.device_target()).nvrtc_arch()
    facts["cubin"] = str(tc.cubin_path(ks, tc.device_target()))
    for attr in ("num_regs", "local_size_bytes"):
        try:
            facts[attr] = int(getattr(fn, attr))
        except Exception:
            pass
    return go, dict(run.variant), facts


def rel_err(got, ref) -> float:
    torch = S.torch
    g, r = got.double(), ref.double()
    den = torch.linalg.vector_norm(r).item()
    num = torch.linalg.vector_norm(g - r).item()
    return num / den if den else num


def tol_for(dtype: str, kind: str = "") -> float:
    if dtype in ("bf16", "f16"):
        return 2e-2
    return 1e-4 if kind == "reduce" else 1e-6


def tdt(name):
    torch = S.torch
    return {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[name]


def randn(shape, dtype="f32"):
    torch = S.torch
    return torch.randn(shape, device="cuda", dtype=torch.float32).to(tdt(dtype))


def free():
    S.torch.cuda.synchronize()
    S.torch.cuda.empty_cache()
    S.cp.get_default_memory_pool().free_all_blocks()


def compiled(fn):
    """torch.compile'd `fn`, or the reason why not (within the run's compile budget)."""
    torch = S.torch
    if not S.compile_peers:
        return None, "not run: --no-compile-peers"
    if S.compile_spent > S.compile_budget:
        return None, f"not run: torch.compile budget of {S.compile_budget:.0f} s spent"
    return torch.compile(fn, dynamic=False), None


def measure_peer(call, out_ref_fn=None, warm_compile=False):
    """(seconds, status, output) of a peer; for torch.compile the first call's compile time is
    added to the run's compile budget."""
    try:
        t0 = time.perf_counter()
        out = call()
        S.torch.cuda.synchronize()
        if warm_compile:
            S.compile_spent += time.perf_counter() - t0
        sec = time_gpu(call)
        return sec, "ok", out
    except Exception as e:  # a peer that cannot run is recorded, not fatal
        return None, f"failed: {type(e).__name__}: {str(e)[:300]}", None


def triton_peer(call, out, ref, dt, kind="", choice=None):
    """(seconds, status, extra) of a Triton peer: load Triton, poison `out`, run `call` once
    (compile, and autotune where the kernel has configs), compare `out` with torch's `ref`, and
    time it only if it agrees. Never raises: every failure is a status."""
    if not S.use_triton:
        return None, "not run: --no-triton", {}
    if S.triton_error is None:
        try:
            TP.load()
            S.triton_error = ""
            import triton
            S.machine.setdefault("triton", triton.__version__)
        except Exception as e:
            S.triton_error = f"failed: Triton unavailable: {type(e).__name__}: {str(e)[:300]}"
    if S.triton_error:
        return None, S.triton_error, {}
    extra = {}
    try:
        if out.dtype.is_floating_point:
            out.fill_(float("nan"))
        t0 = time.perf_counter()
        call()
        S.torch.cuda.synchronize()
        extra["peer_first_call_s"] = round(time.perf_counter() - t0, 3)
        if choice is not None:
            extra["peer_config"] = choice()
        if ref is None:
            return None, "failed: no torch output to check it against", extra
        err = rel_err(out, ref)
        extra["peer_rel_err"] = err
        tol = tol_for(dt, kind)
        if not err <= tol:
            return None, f"failed: differs from torch (rel err {err:.2e} > {tol:.0e})", extra
        sec = time_gpu(call)
        return sec, "ok", extra
    except Exception as e:  # a compile error, out of resources, a launch failure: one failed row
        log(f"triton peer failed: {type(e).__name__}: {e}\n{traceback.format_exc()[-3000:]}")
        return None, f"failed: {type(e).__name__}: {str(e)[:300]}", extra


def ceiling():
    """The device-to-device copy bandwidth this run compares with (measured once per process)."""
    if S.copy_gbps is not None:
        return
    torch, cp = S.torch, S.cp
    n = GiB // 4
    x = randn((n,))
    y = torch.empty_like(x)
    nbytes = 2 * x.numel() * 4
    t_torch = time_gpu(lambda: y.copy_(x))
    stream = cp.cuda.get_current_stream().ptr
    t_memcpy = time_gpu(lambda: cp.cuda.runtime.memcpyAsync(y.data_ptr(), x.data_ptr(), x.numel() * 4, 3, stream))
    S.copy_gbps = max(nbytes / t_torch, nbytes / t_memcpy) / 1e9
    S.copy_times = {"torch copy_": t_torch, "cudaMemcpyAsync D2D": t_memcpy}
    S.machine["copy_bandwidth_note"] = (f"max of torch copy_ ({nbytes / t_torch / 1e9:.0f} GB/s) and cudaMemcpyAsync "
                                        f"D2D ({nbytes / t_memcpy / 1e9:.0f} GB/s) on {x.numel() * 4 / GiB:.0f} GiB, "
                                        f"read + write counted")
    log(f"copy ceiling: {S.copy_gbps:.0f} GB/s ({S.machine['copy_bandwidth_note']})")
    del x, y
    free()
    save()


# ---- workloads ---------------------------------------------------------------------------------
def w_copy():
    """tilenb's copy against cudaMemcpyAsync and torch copy_ (the ceiling's own measurements)."""
    torch = S.torch
    ceiling()
    n = GiB // 4
    x = randn((n,))
    nbytes = 2 * x.numel() * 4
    y2 = torch.empty_like(x)
    go, var, facts = tl_launch(S.mod.copy_f32, None, (x, y2), y2)
    err = rel_err(y2, x)
    t = time_gpu(go)
    ok = err == 0.0
    for peer in ("cudaMemcpyAsync D2D", "torch copy_"):
        row("copy", (n,), "f32", "memory", tilenb_s=t, peer=peer, peer_s=S.copy_times[peer], nbytes=nbytes,
            verified=ok, rel_err=err, variant=var, extra={"tilenb_facts": facts})
    del x, y2
    free()


def w_add():
    ceiling()
    torch, cp = S.torch, S.cp
    n = GiB // 4
    x, y = randn((n,)), randn((n,))
    z = torch.empty_like(x)
    nbytes = 3 * n * 4
    zt = torch.empty_like(x)
    tp, st, _ = measure_peer(lambda: torch.add(x, y, out=zt))
    go, var, facts = tl_launch(S.mod.add_f32, None, (x, y, z), z)
    err = rel_err(z, zt)
    t = time_gpu(go)
    xc, yc, zc = cp.from_dlpack(x), cp.from_dlpack(y), cp.from_dlpack(torch.empty_like(x))
    tc_, sc, _ = measure_peer(lambda: cp.add(xc, yc, out=zc))
    for peer, ps, pst in (("torch add", tp, st), ("cupy add", tc_, sc)):
        row("add", (n,), "f32", "memory", tilenb_s=t, peer=peer, peer_s=ps, peer_status=pst, nbytes=nbytes,
            verified=err <= tol_for("f32"), rel_err=err, variant=var, extra={"tilenb_facts": facts})
    del x, y, z, zt, xc, yc, zc
    free()


def w_scale_rows():
    ceiling()
    torch, cp = S.torch, S.cp
    M, D = 32768, 4096
    x, s = randn((M, D)), randn((M, 1))
    y, yt = torch.empty_like(x), torch.empty_like(x)
    nbytes = 2 * M * D * 4 + M * 4
    tp, st, _ = measure_peer(lambda: torch.mul(x, s, out=yt))
    go, var, facts = tl_launch(S.mod.scale_rows_f32, None, (x, s, y), y)
    err = rel_err(y, yt)
    t = time_gpu(go)
    xc, sc_, yc = cp.from_dlpack(x), cp.from_dlpack(s), cp.from_dlpack(torch.empty_like(x))
    tcp, scp, _ = measure_peer(lambda: cp.multiply(xc, sc_, out=yc))
    for peer, ps, pst in (("torch mul", tp, st), ("cupy multiply", tcp, scp)):
        row("scale_rows", (M, D), "f32", "memory", tilenb_s=t, peer=peer, peer_s=ps, peer_status=pst, nbytes=nbytes,
            verified=err <= tol_for("f32"), rel_err=err, variant=var, extra={"tilenb_facts": facts})
    del x, s, y, yt, xc, sc_, yc
    free()


ROW_OPS = ("rms_norm", "layer_norm", "softmax")
ROW_SHAPES = {"norms": (32768, 4096), "norms_mid": (16384, 16384), "norms_wide": (4096, 131072)}


CLUSTER_ROWS = (131072,)


def _row_kernel(op: str, N: int, dt: str) -> str:
    """The tilenb kernel for a row op: the whole-row kernels are written for D = 4096 and
    16384 (@autotune values: the launch picks the variants whose D is the row length), the
    `_cluster` kernels (a row held by a thread block cluster) for D = 131072, and every other
    row length takes the chunked two-pass `_wide` kernel (runtime N)."""
    if N in (4096, 16384):
        return f"{op}_{dt}"
    return f"{op}_{'cluster' if N in CLUSTER_ROWS else 'wide'}_{dt}"


def _row_kernels(op: str, N: int, dt: str):
    """The tilenb forms of a row op timed at row length N: where the row does not fit one CTA,
    the row held by a cluster (meeting per statistic, and meeting once a row with R rows a
    cluster: `_cluster1`), the two-pass chunked kernel, the row's head kept on chip, and where
    the suite has them the softmax that takes each exponential once (`_cluster1e`) and f32
    RMSNorm's two head forms in a cluster of 2 (`_chead`); the fastest is the figure of record.
    Else one."""
    k = _row_kernel(op, N, dt)
    if "_cluster" not in k:
        return [k]
    forms = [k, f"{op}_cluster1_{dt}", f"{op}_wide_{dt}", f"{op}_head_{dt}"]
    text = SK.program()
    return forms + [f"{op}_{f}_{dt}" for f in ("cluster1e", "chead") if f"kernel {op}_{f}_{dt}(" in text]


def _rows_workload(op: str, M: int, N: int, dt: str):
    """rms_norm / layer_norm / softmax over [M, N] in dt: tilenb against torch eager,
    torch.compile and the Triton kernel of bench/suite/triton_peers.py."""
    torch = S.torch
    F = torch.nn.functional
    ceiling()
    kname = _row_kernel(op, N, dt)
    x = randn((M, N), dt)
    eps = 1e-6 if op == "rms_norm" else 1e-5
    w, b = randn((1, N), dt), randn((1, N), dt)
    y = torch.empty_like(x)
    yt = torch.empty_like(x)
    esz = x.element_size()
    if op == "rms_norm":
        args = (x, w, y, eps)
        fn = lambda: F.rms_norm(x, (N,), w.view(N), eps)  # noqa: E731
        tfn = lambda: TP.rms_norm(x, w, yt, eps)  # noqa: E731
        nbytes = 2 * M * N * esz + N * esz
    elif op == "layer_norm":
        args = (x, w, b, y, eps)
        fn = lambda: F.layer_norm(x, (N,), w.view(N), b.view(N), eps)  # noqa: E731
        tfn = lambda: TP.layer_norm(x, w, b, yt, eps)  # noqa: E731
        nbytes = 2 * M * N * esz + 2 * N * esz
    else:
        args = (x, y)
        fn = lambda: torch.softmax(x, dim=-1)  # noqa: E731
        tfn = lambda: TP.softmax(x, yt)  # noqa: E731
        nbytes = 2 * M * N * esz
    te, se, ref = measure_peer(fn)
    peers = [("torch eager", te, se, {})]
    forms = {}     # kernel name -> (seconds, variant, facts, rel err) of each tilenb form that ran
    for kn in _row_kernels(op, N, dt):
        try:
            go, var, facts = tl_launch(getattr(S.mod, kn), None, args, y)
            err = rel_err(y, ref) if ref is not None else None
            forms[kn] = (time_gpu(go), var, facts, err)
        except Exception as e:
            forms[kn] = (None, None, {}, None)
            status = f"failed: {type(e).__name__}: {str(e)[:400]}"
            log(traceback.format_exc())
    timed = {kn: f for kn, f in forms.items() if f[0] is not None}
    if timed:
        kname = min(timed, key=lambda kn: timed[kn][0])   # the faster of tilenb's forms of this op
        t, var, facts, err = timed[kname]
        status = "ok"
        if len(forms) > 1:
            facts = dict(facts, forms={kn: (None if f[0] is None else f[0] * 1e3) for kn, f in forms.items()})
    else:
        t, var, facts, err = None, None, {}, None
    cfn, why = compiled(fn)
    if cfn is None:
        peers.append(("torch.compile", None, why, {}))
    else:
        tcc, scc, _ = measure_peer(cfn, warm_compile=True)
        peers.append(("torch.compile", tcc, scc, {}))
    form = TP.row_form(N, esz)
    tt, st, tx = triton_peer(tfn, yt, ref, dt, "reduce")
    tx["peer_notes"] = f"Triton: {form}"
    peers.append((f"Triton ({'whole row' if N <= TP.FUSED_MAX_ELEMS else 'two sweeps'})", tt, st, tx))
    verified = None if err is None else bool(err <= tol_for(dt, "reduce"))
    notes = f"tilenb kernel {kname}"
    if len(forms) > 1:
        notes += " (the faster of " + ", ".join(
            f"{kn} {'failed' if f[0] is None else f'{f[0] * 1e3:.3f} ms'}" for kn, f in forms.items()) + ")"
    if "_wide" in kname:
        notes += " (two passes over chunks of C columns)"
    elif "_cluster" in kname:
        notes += " (the row held by a thread block cluster of K CTAs, statistics combined in distributed shared memory)"
    elif "_chead" in kname:
        notes += (" (a row per cluster of 2 CTAs: each keeps the first H columns of its half row in shared"
                  " memory and reads the rest for the statistics and again to write)")
    elif "_head" in kname:
        notes += (" (a CTA a row: the first K columns kept in shared memory, the rest read for the statistics"
                  " and again to write)")
    for peer, ps, pst, px in peers:
        row(op, (M, N), dt, "memory", tilenb_s=t, tilenb_status=status, peer=peer, peer_s=ps, peer_status=pst,
            nbytes=nbytes, verified=verified, rel_err=err, variant=var, notes=notes,
            extra=dict(px, tilenb_facts=facts))
    del x, y, yt, w, b, ref
    free()


def _rows_group(M, N):
    for op in ROW_OPS:
        for dt in ("f32", "bf16"):
            _guard(f"{op} {dt} {(M, N)}", lambda op=op, dt=dt: _rows_workload(op, M, N, dt), op, (M, N), dt,
                   "memory")


def w_norms():
    _rows_group(*ROW_SHAPES["norms"])


def w_norms_mid():
    _rows_group(*ROW_SHAPES["norms_mid"])


def w_norms_wide():
    _rows_group(*ROW_SHAPES["norms_wide"])


def w_transpose():
    ceiling()
    torch, cp = S.torch, S.cp
    M = N = 8192
    x = randn((M, N))
    y = torch.empty((N, M), device="cuda")
    yt = torch.empty((N, M), device="cuda")
    nbytes = 2 * M * N * 4
    xc, yc = cp.from_dlpack(x), cp.from_dlpack(torch.empty((N, M), device="cuda"))

    def cupy_t():
        yc[...] = xc.T
    tcp, scp, _ = measure_peer(cupy_t)
    ttp, stp, _ = measure_peer(lambda: yt.copy_(x.t()))
    go, var, facts = tl_launch(S.mod.transpose_f32, None, (x, y), y)
    err = rel_err(y, yt)
    t = time_gpu(go)
    for peer, ps, pst in (("cupy (y[...] = x.T)", tcp, scp), ("torch copy_(x.t())", ttp, stp)):
        row("transpose", (M, N), "f32", "transpose", tilenb_s=t, peer=peer, peer_s=ps, peer_status=pst,
            nbytes=nbytes, verified=err == 0.0, rel_err=err, variant=var, extra={"tilenb_facts": facts})
    del x, y, yt, xc, yc
    free()


def _big_variant(kernel_name, key, what):
    """(variant, note) for a big shape: the winner of the smaller shape in this run (time box), or
    None (autotune here) when there is none or --full-autotune asks for it."""
    if S.full_autotune:
        return None, "tilenb autotuned at this shape (--full-autotune)"
    v = S.winners.get((kernel_name,) + key)
    if v is None:
        return None, f"tilenb autotuned at this shape (no {what} winner in this run to reuse)"
    return v, (f"tilenb variant: the {what} winner {v}, reused without autotuning at this shape "
               f"(time box; --full-autotune times every variant)")


GEMM_RUNS = 3     # issue 19: each GEMM row is the median of three runs in one process, the spread kept


def _gemm_one(n, dt):
    """One GEMM shape: tilenb autotuned at this shape (the GEMM space is 8 variants: about a
    second at 8192³, the time box), checked against cuBLAS, then GEMM_RUNS runs, each timing
    cuBLAS, tilenb's choice and (at a shape above 4096³, when it differs) the 4096³ winner
    reused, so the row records what reusing it would have cost. The row's times are the medians
    of the runs; `gemm_runs` holds every run's times and speeds and their spread."""
    torch = S.torch
    kname = f"gemm_{dt}"
    kernel = getattr(S.mod, kname)
    a, b = randn((n, n), dt), randn((n, n), dt)
    c, ct, cx, cr = (torch.empty((n, n), device="cuda", dtype=tdt(dt)) for _ in range(4))
    cublas = lambda: torch.matmul(a, b, out=ct)  # noqa: E731
    _, st, ref = measure_peer(cublas)
    go, var, facts = tl_launch(kernel, None, (a, b, c), c)          # autotunes at this shape
    notes = f"tilenb autotuned at this shape ({len(facts['autotune'])} variants, {facts['first_call_s']:.2f} s)"
    if n == 4096:
        S.winners[(kname,)] = dict(var)
    err = rel_err(c, ct)
    reused = S.winners.get((kname,)) if n > 4096 else None
    go_r, err_r = None, None
    if reused is not None and reused != var:
        go_r, _, _ = tl_launch(kernel, None, (a, b, cr), cr, variant=reused)
        err_r = rel_err(cr, ct)
    elif reused is not None:
        notes += "; the 4096³ winner is the same variant"
    # both against float64 on 256 rows (so that agreement with cuBLAS is not shared error)
    r64 = a[:256].double() @ b.double()
    e64 = {"tilenb": rel_err(c[:256], r64), "cublas": rel_err(ct[:256], r64)}
    runs = {"tilenb_s": [], "peer_s": [], "speed_vs_peer": []}
    if go_r is not None:
        runs.update(reused_variant=dict(reused), reused_s=[], reused_speed_vs_peer=[], reused_rel_err=err_r)
    for _ in range(GEMM_RUNS if not S.quick else 1):
        p = time_gpu(cublas) if st == "ok" else None
        t = time_gpu(go, warmup=1)
        runs["tilenb_s"].append(t)
        runs["peer_s"].append(p)
        runs["speed_vs_peer"].append(p / t if p else None)
        if go_r is not None:
            tr = time_gpu(go_r, warmup=1)
            runs["reused_s"].append(tr)
            runs["reused_speed_vs_peer"].append(p / tr if p else None)
    reps = S.timing_reps
    t = statistics.median(runs["tilenb_s"])
    tp = statistics.median(runs["peer_s"]) if st == "ok" else None
    sp = [x for x in runs["speed_vs_peer"] if x is not None]
    if sp:
        runs["spread"] = [min(sp), max(sp)]
    if go_r is not None:
        tr = statistics.median(runs["reused_s"])
        notes += (f"; the 4096³ winner {dict(reused)} reused here: {tr * 1e3:.3f} ms "
                  f"({(tr / t - 1) * 100:+.1f}% against the choice)")
    tt, tst, tx = triton_peer(lambda: TP.matmul(a, b, cx, quick=S.quick), cx, ref, dt,
                              choice=lambda: TP.matmul_choice(S.quick))
    if tst == "ok":
        e64["triton"] = rel_err(cx[:256], r64)
    flops = 2 * n ** 3
    common = dict(tilenb_s=t, flops=flops, verified=err <= tol_for(dt), rel_err=err, variant=var, notes=notes)
    row("gemm", (n, n, n), dt, "gemm", peer="torch matmul (cuBLAS)", peer_s=tp, peer_status=st,
        extra={"tilenb_facts": facts, "rel_err_vs_f64_256_rows": e64, "timing_reps": reps, "gemm_runs": runs},
        **common)
    row("gemm", (n, n, n), dt, "gemm", peer="Triton matmul (autotuned)", peer_s=tt, peer_status=tst,
        extra=dict(tx, tilenb_facts=facts, headline=False, timing_reps=reps), **common)
    del a, b, c, ct, cx, cr, r64
    free()


def _gemm_sizes(sizes):
    for n in sizes:
        for dt in ("f16", "bf16"):
            _guard(f"gemm {dt} {n}", lambda n=n, dt=dt: _gemm_one(n, dt), "gemm", (n, n, n), dt, "gemm")


def w_gemm():
    _gemm_sizes((4096,))


def w_gemm_big():
    _gemm_sizes((8192,))


ATTN_SHAPES = {"attention": (2, 16, 4096), "attention_long": (1, 16, 16384),
               "attention_causal": (2, 16, 4096), "attention_causal_long": (1, 16, 16384)}


def _attention_one(B, H, N, D, causal=False):
    """One shape of flash attention, non-causal (the as-written and each-dot-a-statement kernels
    against SDPA's backends and Triton's tutorial kernel) or causal (attention_causal_bf16 against
    SDPA's backends with is_causal=True; query i sees key j <= i; the flops counted are half the
    non-causal ones, the work a kernel that skips the masked half does)."""
    torch = S.torch
    F = torch.nn.functional
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v = (randn((B, H, N, D), "bf16") for _ in range(3))
    o, ox = torch.empty_like(q), torch.empty_like(q)
    scale = 1.0 / math.sqrt(D)
    flops = 4 * B * H * N * N * D // (2 if causal else 1)
    peers, ref = [], None
    for name, be in (("SDPA flash", SDPBackend.FLASH_ATTENTION), ("SDPA cuDNN", SDPBackend.CUDNN_ATTENTION),
                     ("SDPA efficient", SDPBackend.EFFICIENT_ATTENTION)):
        def call(be=be):
            with sdpa_kernel([be]):
                return F.scaled_dot_product_attention(q, k, v, scale=scale, is_causal=causal)
        ps, pst, out = measure_peer(call)
        if ref is None and out is not None:
            ref = out
        peers.append((name, ps, pst, {"headline": False}))
    ok = [p for p in peers if p[1] is not None]
    if ok:
        best = min(ok, key=lambda p: p[1])
        peers.append((f"SDPA best ({best[0]})", best[1], "ok", {"headline": True}))
    shp = (B * H, N, D)
    if not causal:    # (the Triton peer is the tutorial's non-causal kernel)
        tt, tst, tx = triton_peer(lambda: TP.attention(q.view(shp), k.view(shp), v.view(shp), ox.view(shp), scale,
                                                       quick=S.quick), ox, ref, "bf16",
                                  choice=lambda: TP.attention_choice(S.quick))
        peers.append(("Triton flash attention (autotuned)", tt, tst, dict(tx, headline=False)))
    kernels = ((("attention_causal", S.mod.attention_causal_bf16),) if causal else
               (("attention", S.mod.attention_bf16), ("attention_tc", S.mod.attention_tc_bf16)))
    for wname, kern in kernels:
        variant, notes = (None, "") if N <= 4096 else _big_variant(kern.name, (D,), "sequence-4k")
        if N > 4096:
            notes += "; batch 1 at sequence 16k (batch 2 at 4k), 16 heads in both"
        try:
            go, var, facts = tl_launch(kern, None, (q.view(shp), k.view(shp), v.view(shp), o.view(shp), scale), o,
                                       variant=variant)
            if N <= 4096:
                S.winners[(kern.name, D)] = dict(var)
            err = rel_err(o, ref) if ref is not None else None
            t = time_gpu(go, warmup=1 if N <= 4096 else 0, min_reps=3)   # the public call warmed it up
            reps = S.timing_reps
            status = "ok"
        except Exception as e:
            t, var, facts, err, status, reps = None, None, {}, None, f"failed: {type(e).__name__}: {str(e)[:400]}", None
            log(traceback.format_exc())
        for name, ps, pst, px in peers:
            row(wname, (B, H, N, D), "bf16", "attention", tilenb_s=t, tilenb_status=status, peer=name,
                peer_s=ps, peer_status=pst, flops=flops,
                verified=None if err is None else err <= tol_for("bf16"), rel_err=err, variant=var, notes=notes,
                extra=dict(px, tilenb_facts=facts, tilenb_kernel=kern.name, timing_reps=reps))
    del q, k, v, o, ox, ref
    free()


def _attention_group(B, H, N, causal=False):
    what = "attention_causal" if causal else "attention"
    for D in (64, 128):
        _guard(f"{what} D={D} N={N}", lambda D=D: _attention_one(B, H, N, D, causal), what, (B, H, N, D), "bf16",
               "attention")


def w_attention():
    _attention_group(*ATTN_SHAPES["attention"])


def w_attention_long():
    _attention_group(*ATTN_SHAPES["attention_long"])


def w_attention_causal():
    _attention_group(*ATTN_SHAPES["attention_causal"], causal=True)


def w_attention_causal_long():
    _attention_group(*ATTN_SHAPES["attention_causal_long"], causal=True)


def _clear_tilenb_caches(cache_dir: str):
    import tilenb.api
    os.environ["TILENB_CACHE_DIR"] = cache_dir
    # every in-memory cache: checked programs (and the launch caches kept with them), analyses,
    # generated CUDA, loaded kernels, autotune choices, NVRTC results
    tilenb.api.clear_caches()


COMPILE_CASES = [
    # kernel, args builder (small tensors: the kernel's run time is negligible), variant, repeats
    # (timed after one untimed round: the first cold compile of a kernel in a process can take
    # 5-15x the others; the median is kept)
    ("add_f32", lambda: (randn((4096,)), randn((4096,)), randn((4096,))), {"TILE": 4096, "NT": 256}, 5),
    ("rms_norm_f32", lambda: (randn((64, 4096)), randn((1, 4096)), randn((64, 4096)), 1e-6), {"R": 1, "D": 4096, "NT": 256}, 5),
    ("softmax_bf16", lambda: (randn((64, 4096), "bf16"), randn((64, 4096), "bf16")), {"R": 1, "D": 4096, "NT": 256}, 5),
    ("gemm_f16", lambda: (randn((256, 256), "f16"), randn((256, 256), "f16"), randn((256, 256), "f16")),
     {"TM": 128, "TN": 128, "TK": 64, "GM": 8, "NT": 256}, 5),
    ("attention_bf16", lambda: tuple(randn((2, 128, 64), "bf16") for _ in range(4)) + (0.125,),
     {"BR": 64, "BC": 64, "D": 64, "NT": 128}, 5),
]


def w_compile():
    """Cold compile (parse, check, generate, NVRTC, load, first launch; empty caches) against raw
    NVRTC + module load + launch of the same CUDA source; then a warm re-run of the cell."""
    import tilenb.runtime.gpu.cuda as tc
    from tilenb.codegen.nvrtc import nvrtc_compile
    from tilenb.runtime.checks import prepare, written_tensors
    torch, cp = S.torch, S.cp
    arch = tc.device_arch()
    saved_dir = os.environ.get("TILENB_CACHE_DIR")
    tmp_root = tempfile.mkdtemp(prefix="tilenb-cold-")
    for name, mk, variant, reps in COMPILE_CASES:
        def one(name=name, mk=mk, variant=variant, reps=reps):
            src = SK.kernel_text(name)
            space = tilenb.compile(src, backend="cpu").kernels[name].tune_space
            if set(space) != set(variant):   # a partial variant autotunes the rest: not one compile
                raise ValueError(f"{name}: the compile variant {variant} must name every @autotune value {sorted(space)}")
            args = [GpuArray(a) if hasattr(a, "data_ptr") else a for a in mk()]

            def tilenb_once():
                _clear_tilenb_caches(tempfile.mkdtemp(dir=tmp_root))
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                mod = tilenb.compile(src, backend="cuda")
                t1 = time.perf_counter()
                k = getattr(mod, name)
                ks = tc.kernel_source(k, k.ir(**variant))
                t2 = time.perf_counter()
                k(*args, variant=variant)
                torch.cuda.synchronize()
                t3 = time.perf_counter()
                return t3 - t0, {"front_end_s": t1 - t0, "codegen_s": t2 - t1, "nvrtc_load_launch_s": t3 - t2}, k, ks

            def peer_once(i, ks, ch, da):
                # the peer: NVRTC alone on the same source, then load and launch it
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                cubin = nvrtc_compile(ks.source, getattr(ks, "arch", None) or arch, use_cache=False)
                t1 = time.perf_counter()
                path = Path(tmp_root) / f"peer_{name}_{i}.cubin"
                path.write_bytes(cubin)
                fn = cp.RawModule(path=str(path)).get_function(ks.symbol)
                tc._launch(fn, ks, ch.grid, da)
                torch.cuda.synchronize()
                t2 = time.perf_counter()
                return t2 - t0, t1 - t0

            # one untimed round of each first (the first compile of a kernel in a process takes
            # 5-15x the next), then tilenb and the peer alternately, so that both see the same
            # state of NVRTC, the driver and the machine
            _, _, k, ks = tilenb_once()
            prep = prepare(k, None, tuple(args), variant=variant)
            ch = prep.chosen
            da = tc._device_args(ch.kir, ch.bound, written_tensors(ch.kir))
            peer_once(-1, ks, ch, da)
            tl, parts, pt, nv_only = [], [], [], []
            for i in range(reps):
                t, part, _, _ = tilenb_once()
                tl.append(t)
                parts.append(part)
                t, nv = peer_once(i, ks, ch, da)
                pt.append(t)
                nv_only.append(nv)
            t, p = statistics.median(tl), statistics.median(pt)
            row("cold_compile", None, name, "compile", tilenb_s=t, peer="NVRTC + load + launch (same CUDA)", peer_s=p,
                variant=variant, notes=f"median of {reps}, alternating with the peer, after one untimed round of each",
                extra={"tilenb_parts": parts, "nvrtc_only_s": statistics.median(nv_only), "cuda_lines": ks.source.count("\n")})
            if name == "rms_norm_f32":
                # warm re-run of the cell: compile the same text again and launch (caches warm)
                k2 = tilenb.compile(src, backend="cuda")
                getattr(k2, name)(*args)          # autotunes once for this signature
                torch.cuda.synchronize()
                ws = []
                for _ in range(10):
                    t0 = time.perf_counter()
                    m2 = tilenb.compile(src, backend="cuda")
                    getattr(m2, name)(*args)
                    torch.cuda.synchronize()
                    ws.append(time.perf_counter() - t0)
                w = statistics.median(ws)
                row("warm_rerun", (64, 4096), "f32", "rerun", tilenb_s=w, peer=None, peer_s=None, peer_status="n/a",
                    notes="tilenb.compile of the cell's text + launch (autotune choice cached), median of 10",
                    extra={"all_s": ws})
        _guard(f"compile {name}", one, "cold_compile", None, name, "compile")
    if saved_dir is None:
        os.environ.pop("TILENB_CACHE_DIR", None)
    else:
        os.environ["TILENB_CACHE_DIR"] = saved_dir
    _clear_tilenb_caches(os.environ.get("TILENB_CACHE_DIR", saved_dir or ""))


def w_launch():
    """Launch overhead: the public tilenb call (checks + launch + its synchronize) on a tiny
    tensor, against a CuPy RawKernel of the same generated source (call + synchronize)."""
    import tilenb.runtime.gpu.cuda as tc
    cp = S.cp
    n = 4096
    x, y, z = (cp.random.standard_normal(n, dtype=cp.float32) for _ in range(3))
    k = S.mod.add_f32
    k(x, y, z)                              # autotunes for this size
    var = dict(k.last_run.variant)
    ks = tc.kernel_source(k, k.ir(**var))
    raw = cp.RawKernel(ks.source, ks.symbol, options=("-std=c++17",))
    grid = tuple(k.last_run.grid)
    rargs = (x, y, z, np.int64(n))
    raw(grid, (ks.threads, 1, 1), rargs)
    cp.cuda.Device().synchronize()
    if not bool(cp.allclose(z, x + y)):
        log("launch: RawKernel result differs")

    def per_call(f, calls=200, sync_each=True):
        out = []
        for _ in range(5):
            cp.cuda.Device().synchronize()
            t0 = time.perf_counter()
            for _ in range(calls):
                f()
                if sync_each:
                    cp.cuda.Device().synchronize()
            cp.cuda.Device().synchronize()
            out.append((time.perf_counter() - t0) / calls)
        return statistics.median(out)
    t_tl = per_call(lambda: k(x, y, z))
    t_raw_sync = per_call(lambda: raw(grid, (ks.threads, 1, 1), rargs))
    t_raw_async = per_call(lambda: raw(grid, (ks.threads, 1, 1), rargs), sync_each=False)
    t_tl_kernel = per_call(tl_fast_cupy(k, (x, y, z)))
    # the same public call without the straight-line check of the latest repeat (every repeat
    # through run_cached's key), in this process, to compare (absent in trees without it)
    t_tl_keyed = None
    if hasattr(tc, "STRAIGHT"):
        tc.STRAIGHT, k._fast = False, None
        k(x, y, z)
        t_tl_keyed = per_call(lambda: k(x, y, z))
        tc.STRAIGHT = True
        k._hot = k._fast = None          # the next hit makes the straight-line check anew
    import cProfile
    import io
    import pstats
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(100):
        k(x, y, z)
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(18)
    log("profile of 100 public calls (sorted by own time):\n" + buf.getvalue()[-6000:])
    note = "host wall time per call, median of 5 x 200 calls; tilenb's call synchronizes, so the peer does too"
    row("launch_overhead", (n,), "f32", "launch", tilenb_s=t_tl, peer="cupy RawKernel call + synchronize",
        peer_s=t_raw_sync, variant=var, notes=note)
    row("launch_overhead", (n,), "f32", "launch", tilenb_s=t_tl, peer="cupy RawKernel call (async, no sync)",
        peer_s=t_raw_async, variant=var, notes="peer without a synchronize per call", extra={"headline": False})
    if t_tl_keyed is not None:
        row("launch_overhead", (n,), "f32", "launch", tilenb_s=t_tl_keyed, peer="cupy RawKernel call + synchronize",
            peer_s=t_raw_sync, variant=var, notes="tilenb row: the public call with the straight-line check off "
            "(tilenb.runtime.gpu.cuda.STRAIGHT = False: each repeat through run_cached's key), to compare",
            extra={"headline": False})
    row("launch_overhead", (n,), "f32", "launch", tilenb_s=t_tl_kernel, peer="cupy RawKernel call + synchronize",
        peer_s=t_raw_sync, variant=var, notes="tilenb row: the generated kernel launched from its prepared arguments "
        "(no checks): the floor of a launch through tilenb's CuPy Function", extra={"headline": False})


def tl_fast_cupy(kernel, args):
    return prepared_launch(kernel, None, args, kernel.last_run.variant)[0]


WORKLOADS = {"copy": w_copy, "add": w_add, "scale_rows": w_scale_rows, "transpose": w_transpose, "norms": w_norms,
             "norms_mid": w_norms_mid, "norms_wide": w_norms_wide, "gemm": w_gemm, "gemm_big": w_gemm_big,
             "attention": w_attention, "attention_long": w_attention_long, "attention_causal": w_attention_causal,
             "attention_causal_long": w_attention_causal_long, "launch": w_launch, "compile": w_compile}
# the final run is two device calls of under 8 minutes each: --only memory,overheads and --only matrix
GROUPS = {"memory": ["copy", "add", "scale_rows", "transpose", "norms", "norms_mid", "norms_wide"],
          "matrix": ["gemm", "gemm_big", "attention", "attention_long"],
          "overheads": ["launch", "compile"],
          "causal": ["attention_causal", "attention_causal_long"]}
KIND = {"transpose": "transpose", "gemm": "gemm", "gemm_big": "gemm", "attention": "attention",
        "attention_long": "attention", "attention_causal": "attention", "attention_causal_long": "attention",
        "launch": "launch", "compile": "compile"}
# rough seconds each needs once the kernels are compiled (to skip what the budget cannot hold)
NEEDS = {"copy": 3, "add": 3, "scale_rows": 3, "norms": 30, "norms_mid": 30, "norms_wide": 30, "transpose": 3,
         "gemm": 20, "gemm_big": 20, "attention": 30, "attention_long": 20, "attention_causal": 20,
         "attention_causal_long": 15, "launch": 5, "compile": 25}


def kernels_of(workload: str):
    """The suite kernels a workload launches (to precompile only those), or None for all."""
    if workload in ROW_SHAPES:
        n = ROW_SHAPES[workload][1]
        return [k for op in ROW_OPS for dt in ("f32", "bf16") for k in _row_kernels(op, n, dt)]
    return {"copy": ["copy_f32"], "add": ["add_f32"], "scale_rows": ["scale_rows_f32"],
            "transpose": ["transpose_f32"], "gemm": ["gemm_f16", "gemm_bf16"], "gemm_big": ["gemm_f16", "gemm_bf16"],
            "attention": ["attention_bf16", "attention_tc_bf16"],
            "attention_long": ["attention_bf16", "attention_tc_bf16"],
            "attention_causal": ["attention_causal_bf16"], "attention_causal_long": ["attention_causal_bf16"],
            "launch": ["add_f32"], "compile": []}.get(workload)


def expand(names):
    """Workload names from a list of workload and group names, in order, each once."""
    out = []
    for n in names:
        for w in GROUPS.get(n, [n]):
            if w not in WORKLOADS:
                raise SystemExit(f"suite.py: unknown workload or group '{w}' (workloads: {', '.join(WORKLOADS)}; "
                                 f"groups: {', '.join(GROUPS)})")
            if w not in out:
                out.append(w)
    return out


def _guard(label, fn, workload, shape, dtype, kind):
    try:
        fn()
    except Exception as e:
        log(f"FAILED {label}: {type(e).__name__}: {e}\n{traceback.format_exc()}")
        row(workload, shape, dtype, kind, tilenb_status=f"failed: {type(e).__name__}: {str(e)[:400]}",
            peer=None, peer_status="n/a")
        try:
            free()
        except Exception:
            pass


# ---- what the chosen kernels compiled to ---------------------------------------------------------
SASS_OPS = ("HGMMA", "HMMA", "LDSM", "LDGSTS", "UBLKCP", "UTMALDG", "LDG.E.128", "LDG.E.64", "LDG.E ", "LDG.E.U16",
            "STG.E.128", "STG.E.64", "STG.E ", "STG.E.U16", "LDS.128", "LDS.64", "LDS ", "LDS.U16", "STS.128", "STS.64",
            "STS ", "LDL", "STL", "BAR.SYNC", "SHFL", "MUFU")


def sass_summary():
    """Opcode counts (static, in the SASS text) of every chosen tilenb kernel, and the SASS of all
    of them in OUT/sass[_TAG].txt.gz (cuobjdump from the CUDA toolkit; skipped when it is missing)."""
    import gzip
    import shutil
    tool = shutil.which("cuobjdump") or next((p for p in ("/usr/local/cuda/bin/cuobjdump",) if os.path.exists(p)), None)
    if tool is None:
        log("sass: no cuobjdump")
        return
    seen, texts, out, failed = set(), [], {}, []
    for r in S.rows:
        f = r.get("tilenb_facts") or {}
        cub = f.get("cubin")
        if not cub or f.get("symbol") in seen or not os.path.exists(cub):
            continue
        seen.add(f["symbol"])
        try:
            pr = subprocess.run([tool, "--dump-sass", cub], capture_output=True, text=True, timeout=60)
            txt = pr.stdout
            if "/*0000*/" not in txt:
                nd = shutil.which("nvdisasm") or "/usr/local/cuda/bin/nvdisasm"
                pr2 = subprocess.run([nd, "-c", cub], capture_output=True, text=True, timeout=60)
                txt = pr2.stdout
                if "/*0000*/" not in txt:
                    failed.append(f"cuobjdump: {pr.stderr.strip()[:200]}; nvdisasm: {pr2.stderr.strip()[:200]}")
                    continue
        except Exception as e:
            log(f"sass: {f['symbol']}: {e}")
            continue
        lines = [ln for ln in txt.splitlines() if "/*" in ln and ";" in ln]
        counts = {op.strip(): sum(1 for ln in lines if f" {op}" in ln) for op in SASS_OPS}
        counts["instructions"] = len(lines)
        out[f["symbol"]] = counts
        texts.append(f"==== {f['symbol']}\n{txt}")
    if failed:
        # seen on the H200 image (CUDA 13.0): both tools refuse the cubins NVRTC wrote
        log(f"sass: no disassembly for {len(failed)} kernel(s), e.g. {failed[0]}")
    S.machine["sass_counts"] = out
    with gzip.open(S.out / f"sass{S.tag}.txt.gz", "wt") as g:
        g.write("\n".join(texts))
    for sym, c in out.items():
        log(f"sass {sym}: " + ", ".join(f"{k} {v}" for k, v in c.items() if v))
    save()


# ---- warm-up compile of every variant, in parallel (before CUDA is initialized) ----------------
def _nvrtc_one(job):
    from tilenb.codegen.nvrtc import nvrtc_compile
    src, arch = job
    t0 = time.perf_counter()
    try:
        nvrtc_compile(src, arch)
        return time.perf_counter() - t0, None
    except Exception as e:
        return time.perf_counter() - t0, f"{type(e).__name__}: {str(e)[:2000]}"


def precompile(mod, arch: str, jobs: int, only=None):
    """Generate the CUDA of every variant of the kernels named in `only` (all when None) and
    compile them with NVRTC in `jobs` processes; the cubins land in tilenb's disk cache, where
    the timed run finds them."""
    import concurrent.futures as cf
    import multiprocessing as mp
    import tilenb.runtime.gpu.cuda as tc
    t0 = time.perf_counter()
    work, names = [], []
    # the slow ones first (tensor-core kernels unroll the most), so the pool ends together
    order = sorted(mod.kernels.items(), key=lambda kv: ("attention_tc" not in kv[0], "gemm" not in kv[0]))
    for name, k in order:
        if only is not None and name not in only:
            continue
        for key, kir in k.checked.variants.items():
            # generated for `arch` without touching CUDA (fork-safe); compiled for the target the
            # source names where it names one (sm_90a for wgmma), as the runtime's load_kernel does
            ks = tc.kernel_source(k, kir, arch=arch)
            work.append((ks.source, getattr(ks, "arch", None) or arch))
            names.append(f"{name} {dict(key)}")
    t1 = time.perf_counter()
    errors, cpu = [], 0.0
    with cf.ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("fork")) as ex:
        for nm, (sec, err) in zip(names, ex.map(_nvrtc_one, work, chunksize=1)):
            cpu += sec
            if err:
                errors.append(f"{nm}: {err}")
    log(f"precompile: {len(work)} variants, codegen {t1 - t0:.1f} s, NVRTC {time.perf_counter() - t1:.1f} s wall "
        f"({cpu:.1f} s in {jobs} processes), {len(errors)} failed")
    for e in errors:
        log("  NVRTC FAILED " + e[:3000])
    return len(work), errors


# ---- the CPU check (no GPU): kernels against numpy at small shapes ------------------------------
def cpu_check(jobs: int):
    from numpy_check import Check
    mod = tilenb.compile(SK.program(), backend="cpu")
    ck = Check(seed=0)
    arr, check = ck.arr, ck.check

    n = 70004
    x, y = arr(n), arr(n)
    z = np.full(n, np.nan, np.float32)
    mod.copy_f32(x, z)
    check("copy_f32 N=70004", z, x, 0)
    mod.add_f32(x, y, z)
    check("add_f32 N=70004", z, x.astype(np.float64) + y, 1e-7)
    x, s = arr((7, 4096)), arr((7, 1))
    z = np.full((7, 4096), np.nan, np.float32)
    mod.scale_rows_f32(x, s, z, variant={"R": 2})
    check("scale_rows_f32 (7, 4096) R=2", z, x.astype(np.float64) * s, 1e-7)
    x = arr((68, 100))
    z = np.full((100, 68), np.nan, np.float32)
    mod.transpose_f32(x, z)
    check("transpose_f32 (68, 100)", z, x.T, 0)
    for dt in ("f32", "bf16"):
        tol = 1e-5 if dt == "f32" else 1.5e-2
        # whole rows, two passes over chunks, rows held by a cluster (CPU: clusters run batched),
        # and rows whose head is kept on chip
        for suf, (M, N), v in (("", (5, 4096), {"R": 2}), ("_wide", (3, 10004), {"C": 2048}),
                               ("_cluster", (3, CLUSTER_ROWS[0]), {"K": 4, "NT": 512}),
                               ("_cluster1", (3, CLUSTER_ROWS[0]), {"K": 8, "R": 2, "NT": 256}),
                               ("_head", (3, CLUSTER_ROWS[0]), {"NT": 512, "K": SK.HEAD_SIZES[dt][0]})):
            x, w, b = arr((M, N), dt), arr((1, N), dt), arr((1, N), dt)
            yv = np.zeros((M, N), x.dtype)
            getattr(mod, f"rms_norm{suf}_{dt}")(x, w, yv, 1e-6, variant=v)
            check(f"rms_norm{suf}_{dt} {(M, N)}", yv, SK.ref_rms_norm(x, w, 1e-6), tol)
            getattr(mod, f"layer_norm{suf}_{dt}")(x, w, b, yv, 1e-5, variant=v)
            check(f"layer_norm{suf}_{dt} {(M, N)}", yv, SK.ref_layer_norm(x, w, b, 1e-5), tol)
            getattr(mod, f"softmax{suf}_{dt}")(x, yv, variant=v)
            check(f"softmax{suf}_{dt} {(M, N)}", yv, SK.ref_softmax(x), tol)
    for dt in ("f32", "bf16"):
        x = arr((3, CLUSTER_ROWS[0]), dt)
        yv = np.zeros((3, CLUSTER_ROWS[0]), x.dtype)
        getattr(mod, f"softmax_cluster1e_{dt}")(x, yv, variant={"K": 8, "R": 2, "NT": 256})
        check(f"softmax_cluster1e_{dt} {x.shape}", yv, SK.ref_softmax(x), 1e-5 if dt == "f32" else 1.5e-2)
    x, w = arr((3, CLUSTER_ROWS[0])), arr((1, CLUSTER_ROWS[0]))
    yv = np.zeros_like(x)
    mod.rms_norm_chead_f32(x, w, yv, 1e-6, variant={"H": SK.CHEAD_SIZES[0], "NT": 512})
    check(f"rms_norm_chead_f32 {x.shape}", yv, SK.ref_rms_norm(x, w, 1e-6), 1e-5)
    for dt in ("f16", "bf16"):
        a, b = arr((70, 52), dt), arr((52, 36), dt)
        c = np.zeros((70, 36), a.dtype)
        getattr(mod, f"gemm_{dt}")(a, b, c)
        check(f"gemm_{dt} 70x36x52", c, a.astype(np.float64) @ b.astype(np.float64), 1e-2)
    for D in (64,):
        q, k, v = (arr((2, 70, D), "bf16") for _ in range(3))
        o = np.zeros((2, 70, D), q.dtype)
        for kn in ("attention_bf16", "attention_tc_bf16"):
            o[...] = 0
            getattr(mod, kn)(q, k, v, o, 1.0 / math.sqrt(D), variant={"D": D})
            check(f"{kn} H=2 N=70 D={D}", o, SK.ref_attention(q, k, v, 1.0 / math.sqrt(D)), 2e-2)
        # causal, with more keys than queries and fewer (top-left aligned, as SDPA's is_causal)
        for nq, nk in ((70, 45), (45, 130)):
            q, k, v = arr((2, nq, D), "bf16"), arr((2, nk, D), "bf16"), arr((2, nk, D), "bf16")
            o = np.full((2, nq, D), np.nan, q.dtype)
            mod.attention_causal_bf16(q, k, v, o, 1.0 / math.sqrt(D), variant={"D": D})
            check(f"attention_causal_bf16 H=2 N={nq} Nk={nk} D={D}", o,
                  SK.ref_attention(q, k, v, 1.0 / math.sqrt(D), causal=True), 2e-2)
    for name in ("add_f32", "rms_norm_f32", "gemm_f16", "attention_bf16"):
        tilenb.compile(SK.kernel_text(name), backend="cpu")   # each compile case stands alone
    bad = ck.failures
    # the Triton peers through Triton's interpreter, where triton is installed (the GPU machine;
    # not the project's environment here): same kernels, CPU, ragged shapes, numpy references
    import importlib.util
    if importlib.util.find_spec("triton") is None:
        print("skip triton peers: triton is not installed here "
              "(where it is: python bench/suite/triton_peers.py --interpret)", flush=True)
    else:
        pr = subprocess.run([sys.executable, str(ROOT / "bench" / "suite" / "triton_peers.py"), "--interpret"],
                            capture_output=True, text=True, timeout=600)
        print(pr.stdout + pr.stderr[-3000:], end="", flush=True)
        bad += pr.returncode != 0
    # every variant through NVRTC (sm_90)
    os.environ.setdefault("TILENB_CACHE_DIR", tempfile.mkdtemp(prefix="tilenb-suite-"))
    cmod = tilenb.compile(SK.program(), backend="cuda")
    _, errors = precompile(cmod, "sm_90", jobs)
    bad += len(errors)
    print(f"cpu check: {bad} failure(s)")
    return 1 if bad else 0


# ---- main ---------------------------------------------------------------------------------------
def gpu_slug(name: str) -> str:
    s = name.lower().replace("nvidia", "").strip()
    return "".join(c if c.isalnum() else "_" for c in s).strip("_") or "gpu"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--only", default="")
    ap.add_argument("--tag", default="", help="name the outputs <gpu>_<tag>.json and suite_<tag>.log")
    ap.add_argument("--skip", default="")
    ap.add_argument("--budget", type=float, default=1e9)
    ap.add_argument("--compile-budget", type=float, default=180.0)
    ap.add_argument("--no-compile-peers", action="store_true")
    ap.add_argument("--no-triton", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--full-autotune", action="store_true")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 4)
    ap.add_argument("--cpu-check", action="store_true")
    a = ap.parse_args(argv)
    if a.cpu_check:
        return cpu_check(a.jobs)
    S.budget = a.budget
    S.compile_budget = a.compile_budget
    S.compile_peers = not a.no_compile_peers
    S.use_triton = not a.no_triton
    S.quick = a.quick
    S.full_autotune = a.full_autotune
    skip = set(expand([w for w in a.skip.split(",") if w]))
    only = [w for w in expand([w for w in a.only.split(",") if w] or list(WORKLOADS)) if w not in skip]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    S.out = out
    tag = S.tag = f"_{a.tag}" if a.tag else ""
    S.logf = open(out / f"suite{tag}.log", "w")
    os.environ.setdefault("TILENB_CACHE_DIR", tempfile.mkdtemp(prefix="tilenb-suite-"))
    import tilenb.runtime.gpu.cuda as tc
    tc.PROGRESS = False
    S.mod = tilenb.compile(SK.program(), backend="cuda")
    # compile everything before CUDA is initialized in this process (fork-safe)
    try:
        arch = "sm_" + subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                                      capture_output=True, text=True, timeout=30).stdout.split()[0].replace(".", "")
    except Exception:
        arch = "sm_90"
    wanted = [kernels_of(w) for w in only]
    n_var, errs = precompile(S.mod, arch, a.jobs,
                             None if any(k is None for k in wanted) else {k for ks in wanted for k in ks})
    S.wall["precompile_s"] = round(time.perf_counter() - S.t0, 1)
    import cupy as cp
    import torch
    S.cp, S.torch = cp, torch
    if tc.device_arch() != arch:
        log(f"note: the device is {tc.device_arch()}, precompiled for {arch}")
    props = torch.cuda.get_device_properties(0)
    S.machine = {"gpu": props.name, "sms": props.multi_processor_count, "arch": tc.device_arch(),
                 "memory_GiB": round(props.total_memory / GiB, 1), "torch": torch.__version__, "cupy": cp.__version__,
                 "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(), "python": platform.python_version(),
                 "nvrtc": ".".join(map(str, __import__("tilenb.codegen.nvrtc", fromlist=["x"]).nvrtc_version())),
                 "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
                 "precompiled_variants": n_var, "precompile_failures": errs}
    try:
        S.machine["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                             capture_output=True, text=True, timeout=30).stdout.strip()
        # BENCH_COMMIT: the commit the tree was sent at (the device's git, where there is one, may
        # not know it); else git's HEAD here
        S.machine["commit"] = os.environ.get("BENCH_COMMIT") or subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT, timeout=30).stdout.strip()
    except Exception:
        pass
    S.json_path = out / f"{gpu_slug(props.name)}{tag}.json"
    log(f"machine: {json.dumps(S.machine)}")
    torch.manual_seed(0)
    S.machine["options"] = {"only": only, "quick": S.quick, "compile_peers": S.compile_peers,
                            "triton": S.use_triton, "full_autotune": S.full_autotune}
    S.machine["wall_s"] = S.wall
    log(f"workloads: {', '.join(only)}")
    for name in only:
        kind = KIND.get(name, "memory")
        if S.left() < NEEDS.get(name, 5):
            log(f"SKIP {name}: {S.left():.0f} s left of the budget")
            row(name, None, "-", kind, tilenb_status="not run: the run's time budget was spent", peer=None,
                peer_status="not run")
            continue
        t0 = time.perf_counter()
        log(f"== {name}")
        _guard(name, WORKLOADS[name], name, None, "-", kind)
        S.wall["workloads"][name] = round(time.perf_counter() - t0, 1)
        log(f"== {name} done in {time.perf_counter() - t0:.1f} s")
        save()
    for g, members in GROUPS.items():
        ran = [w for w in members if w in S.wall["workloads"]]
        if ran:
            S.wall["groups"][g] = round(sum(S.wall["workloads"][w] for w in ran), 1)
    log("wall time per workload (s): " + ", ".join(f"{w} {t}" for w, t in S.wall["workloads"].items()))
    log(f"wall time per group (s, workloads only; precompile {S.wall['precompile_s']} s before them): " +
        ", ".join(f"{g} {t}" for g, t in S.wall["groups"].items()))
    try:
        sass_summary()
    except Exception as e:
        log(f"sass summary failed: {e}")
    S.wall["total_s"] = round(time.perf_counter() - S.t0, 1)
    log(f"total {time.perf_counter() - S.t0:.1f} s (from the start of the process); results in {S.json_path}")
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
