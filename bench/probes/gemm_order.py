"""Question: Which tile order (GM) and tile shape brings tilenb's sm_90 GEMM closest to cuBLAS at
4096³ and 8192³ in f16 and bf16, and does the 4096³ winner lose anything at 8192³?

The suite's GEMM kernel (tilenb/examples/suite_kernels.py, GEMM: tiles in a grouped order, GM
rows of tiles walked column by column) over a wider space than the suite's own: TM x TN of
128 x 128, 128 x 256 and 256 x 128 (NT 256, TK 64) and GM in 1, 4, 8, 16, 32, 64 (GM 1: row by
row; GM of the tile rows or more: column by column, the order before the grouped one); and the
persistent candidate (tilenb/examples/suite_kernels.py, GEMM_PERSISTENT: one CTA an SM, each
taking the tiles of the same order in turn) at 128 x 256 and 128 x 128. Against cuBLAS through
torch.matmul in the same process, on the GPU this runs on. As a diagnostic, the 128 x 256 kernels
once more with C's store skipped at run time: how much of the time the epilogue (the staged
store of the accumulator) takes, the most that overlapping it with the next tile could win; and
the first shape's winner and cuBLAS at K = 1024 .. 8192 (M = N = 4096): a line through the
times splits each into a cost per unit of K (the GEMM loop's throughput) and a fixed cost (the
prologue and epilogue of each CTA's tile, the partial last wave).

    python bench/probes/gemm_order.py [--shapes 4096,8192] [--dtypes f16,bf16] [--runs 5]
                                      [--gm 1,4,8,16,32,64] [--tiles 128x128,128x256,256x128]
                                      [--persistent 128x256,128x128] [--no-store 128x256]
                                      [--ksweep 1024,2048,4096,8192] [--out DIR] [--jobs N]

What it guarantees:
- Every variant is compiled first (NVRTC in `--jobs` processes, into tilenb's disk cache), then
  run once through the public call with its output poisoned with NaN and compared with cuBLAS's
  (relative Frobenius error in float64; a variant that differs by more than 2e-2 is reported
  and not timed).
- Times: `--runs` runs (default 5); each run times cuBLAS and then every variant, each as the
  median of CUDA-event timings of `--reps` launches after warm-up (torch_timing.py), so drift in the GPU's clocks
  falls on all of them alike. A variant's figure is the median over the runs of its time, its %
  of cuBLAS is cuBLAS's median over its median, and the spread is the range of the runs' own
  ratios (cuBLAS of that run over the variant of that run).
- Prints one line per variant and shape, the best variant per shape, and at the larger shapes
  what the smallest shape's winner reaches there. With --out, writes DIR/gemm_order.json with
  every run's times. At the defaults it takes under 5 minutes on an H200 (most of it NVRTC).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))              # tilenb
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "suite"))   # the suite's launch helpers
sys.path.insert(0, str(Path(__file__).resolve().parent))                 # the probes' helpers (torch_timing)

from tilenb.examples import suite_kernels as SK  # noqa: E402
from torch_timing import time_ms  # noqa: E402


STORE = "  C[pm * TM :+ TM, pn * TN :+ TN] = acc\n"


def kernel_text(dt: str, tms, tns, gms, persistent: bool = False, no_store: bool = False) -> str:
    """The suite's GEMM (or its persistent candidate) for dtype `dt` with its @autotune line set
    to these values; with `no_store`, the store of C under a condition false at run time
    (K < 0), so the kernel's time is its GEMM loop's without the epilogue (a diagnostic: its
    output is not checked)."""
    text = (SK.GEMM_PERSISTENT if persistent else SK.GEMM).replace("{T}", dt)
    if no_store:
        assert text.count(STORE) == 1, "the suite's GEMM stores C in one statement"
        text = text.replace(STORE, "  if K < 0 {\n  " + STORE + "  }\n")
    line = (f"@autotune(TM in [{', '.join(map(str, tms))}], TN in [{', '.join(map(str, tns))}], TK in [64], "
            f"GM in [{', '.join(map(str, gms))}], NT in [256])")
    new, n = re.subn(r"@autotune\([^\n]*\)", line, text)
    assert n == 1, "the suite's GEMM has one @autotune line"
    return new


def label(v, kind="") -> str:
    return f"{v['TM']}x{v['TN']} GM{v['GM']}{' ' + kind if kind else ''}"


def ksweep(a, torch, suite, GpuArray, tdt, mods, first_best, sms):
    """The first shape's winner and cuBLAS at M = N = that shape and each K of --ksweep: a least
    squares line t = fixed + per_k * K through the medians. `fixed` is what a launch costs
    whatever the length of the GEMM loop (each CTA's prologue and epilogue, the last partial
    wave); its share of the time at K = M is printed beside cuBLAS's."""
    n = int(a.shapes.split(",")[0])
    ks = [int(x) for x in a.ksweep.split(",")]
    out = {}
    for dt, v in first_best.items():
        kind = "" if v["kind"] == "grouped" else v["kind"]
        k = getattr(mods[(dt, v["TM"], v["TN"], kind)], f"gemm_persistent_{dt}" if kind == "persistent" else f"gemm_{dt}")
        tune = {x: v[x] for x in ("TM", "TN", "TK", "GM", "NT")}
        times = {"tilenb": [], "cuBLAS": []}
        for K in ks:
            A = torch.randn(n, K, device="cuda", dtype=torch.float32).to(tdt[dt])
            B = torch.randn(K, n, device="cuda", dtype=torch.float32).to(tdt[dt])
            C = torch.empty(n, n, device="cuda", dtype=tdt[dt])
            ref = torch.empty(n, n, device="cuda", dtype=tdt[dt])
            args = [GpuArray(A), GpuArray(B), GpuArray(C)]
            grid, call = ((sms,), args + [sms]) if kind == "persistent" else (None, args)
            (k[grid] if grid else k)(*call, variant=tune)
            go = suite.prepared_launch(k, grid, call, tune)[0]

            def cublas():
                torch.matmul(A, B, out=ref)
            tl, cb = [], []
            for _ in range(a.runs):
                cb.append(time_ms(torch, cublas, a.reps))
                tl.append(time_ms(torch, go, a.reps))
            times["tilenb"].append(statistics.median(tl))
            times["cuBLAS"].append(statistics.median(cb))
            del A, B, C, ref, args, go
        fits = {}
        for who, ts in times.items():
            mk, mt = statistics.fmean(ks), statistics.fmean(ts)
            per_k = sum((x - mk) * (y - mt) for x, y in zip(ks, ts)) / sum((x - mk) ** 2 for x in ks)
            fixed = mt - per_k * mk
            at_n = fixed + per_k * n
            fits[who] = {"fixed_ms": fixed, "per_k_ms": per_k, "fixed_share_at_K_eq_M": fixed / at_n}
        print(f"{dt} M = N = {n}, K in {ks}: tilenb ({label(v, kind)}) {[round(t, 4) for t in times['tilenb']]} ms, "
              f"cuBLAS {[round(t, 4) for t in times['cuBLAS']]} ms", flush=True)
        print(f"  fixed cost: tilenb {fits['tilenb']['fixed_ms'] * 1e3:.1f} us "
              f"({fits['tilenb']['fixed_share_at_K_eq_M'] * 100:.1f}% at K = {n}), cuBLAS "
              f"{fits['cuBLAS']['fixed_ms'] * 1e3:.1f} us ({fits['cuBLAS']['fixed_share_at_K_eq_M'] * 100:.1f}%); "
              f"per 1024 of K: tilenb {fits['tilenb']['per_k_ms'] * 1024:.4f} ms, cuBLAS {fits['cuBLAS']['per_k_ms'] * 1024:.4f} ms",
              flush=True)
        out[dt] = {"variant": v, "K": ks, "times_ms": times, "fit": fits}
        torch.cuda.empty_cache()
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="4096,8192")
    ap.add_argument("--dtypes", default="f16,bf16")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--reps", type=int, default=20, help="launches a timing (the median is kept)")
    ap.add_argument("--gm", default="1,4,8,16,32,64")
    ap.add_argument("--tiles", default="128x128,128x256,256x128", help="TMxTN,...")
    ap.add_argument("--persistent", default="128x256,128x128",
                    help="tiles TMxTN,... of the persistent candidate (SK.GEMM_PERSISTENT, one CTA an SM); '' for none")
    ap.add_argument("--no-store", default="128x256",
                    help="tiles TMxTN,... also timed without their epilogue (C's store skipped at run time: "
                         "the epilogue's share of the time); '' for none")
    ap.add_argument("--ksweep", default="1024,2048,4096,8192",
                    help="K values for the fixed-cost fit at M = N = the first shape ('' for none)")
    ap.add_argument("--out", default="")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 4)
    a = ap.parse_args(argv)
    os.environ.setdefault("TILENB_CACHE_DIR", tempfile.mkdtemp(prefix="tilenb-gemm-order-"))
    t_start = time.perf_counter()
    import tilenb
    import suite
    tiles = [tuple(map(int, t.split("x"))) for t in a.tiles.split(",")]
    gms = [int(x) for x in a.gm.split(",")]
    dts = a.dtypes.split(",")
    # one module per dtype and tile shape (TM x TN), its @autotune space the GM values alone
    ptiles = [tuple(map(int, t.split("x"))) for t in a.persistent.split(",") if t]
    ntiles = [tuple(map(int, t.split("x"))) for t in a.no_store.split(",") if t]
    mods = {(dt, tm, tn, ""): tilenb.compile(kernel_text(dt, [tm], [tn], gms), backend="cuda")
            for dt in dts for tm, tn in tiles}
    mods.update({(dt, tm, tn, "persistent"): tilenb.compile(kernel_text(dt, [tm], [tn], gms, True), backend="cuda")
                 for dt in dts for tm, tn in ptiles})
    mods.update({(dt, tm, tn, "no epilogue"): tilenb.compile(kernel_text(dt, [tm], [tn], gms, no_store=True),
                                                             backend="cuda")
                 for dt in dts for tm, tn in ntiles})
    # compile every variant before CUDA starts in this process (the pool forks)
    for mod in mods.values():
        suite.precompile(mod, "sm_90", a.jobs)
    print(f"compiled in {time.perf_counter() - t_start:.0f} s", flush=True)
    import torch
    suite.S.torch = torch
    import cupy as cp
    suite.S.cp = cp
    from suite import GpuArray
    tdt = {"bf16": torch.bfloat16, "f16": torch.float16}
    props = torch.cuda.get_device_properties(0)
    results = {"gpu": props.name, "sms": props.multi_processor_count, "torch": torch.__version__,
               "runs": a.runs, "reps": a.reps, "rows": []}
    print(f"{props.name}, {props.multi_processor_count} SMs; {a.runs} runs of {a.reps} launches each", flush=True)
    first_best = {}       # dtype -> the variant that won at the first shape (for --ksweep)
    for dt in dts:
        winners = {}
        for n in map(int, a.shapes.split(",")):
            torch.manual_seed(n)
            A = torch.randn(n, n, device="cuda", dtype=torch.float32).to(tdt[dt])
            B = torch.randn(n, n, device="cuda", dtype=torch.float32).to(tdt[dt])
            ref = torch.empty(n, n, device="cuda", dtype=tdt[dt])
            C = torch.empty(n, n, device="cuda", dtype=tdt[dt])

            def cublas():
                torch.matmul(A, B, out=ref)
            cublas()
            torch.cuda.synchronize()
            refd = ref.double()
            args = [GpuArray(A), GpuArray(B), GpuArray(C)]
            gos = {}
            sms = props.multi_processor_count
            for (mdt, tm, tn, kind), mod in mods.items():
                if mdt != dt:
                    continue
                pers = kind == "persistent"
                k = getattr(mod, f"gemm_persistent_{dt}" if pers else f"gemm_{dt}")
                grid, call = ((sms,), args + [sms]) if pers else (None, args)
                for gm in gms:
                    v = dict(TM=tm, TN=tn, TK=64, GM=gm, NT=256)
                    lab = label(v, kind)
                    try:
                        C.fill_(float("nan"))
                        (k[grid] if grid else k)(*call, variant=v)
                        torch.cuda.synchronize()
                        err = ((C.double() - refd).norm() / refd.norm()).item() if kind != "no epilogue" else 0.0
                        if not err <= 2e-2:
                            print(f"  {dt} {n}^3 {lab}: differs from cuBLAS ({err:.2e}); not timed", flush=True)
                            continue
                        go, ks, fn = suite.prepared_launch(k, grid, call, v)
                        gos[lab] = (dict(v, kind=kind or "grouped"), go, err, ks.arch, int(fn.num_regs))
                    except Exception as e:  # report and go on
                        print(f"  {dt} {n}^3 {lab} FAILED: {type(e).__name__}: {str(e)[:300]}", flush=True)
            runs = {"cuBLAS": []}
            runs.update({lab: [] for lab in gos})
            for _ in range(a.runs):
                runs["cuBLAS"].append(time_ms(torch, cublas, a.reps))
                for lab, (_, go, *_rest) in gos.items():
                    runs[lab].append(time_ms(torch, go, a.reps))
            tc = statistics.median(runs["cuBLAS"])
            flop = 2.0 * n ** 3
            print(f"{dt} {n}^3 cuBLAS {tc:.4f} ms ({flop / tc / 1e9:.0f} TFLOP/s), runs "
                  f"{min(runs['cuBLAS']):.4f}-{max(runs['cuBLAS']):.4f} ms", flush=True)
            best = None
            for lab, (v, _, err, arch, regs) in gos.items():
                t = statistics.median(runs[lab])
                if v["kind"] == "no epilogue":    # a diagnostic, not a candidate
                    full = runs.get(label(v))
                    share = f"; the epilogue: {(1 - t / statistics.median(full)) * 100:.1f}% of the full kernel's time" if full else ""
                    print(f"  {lab:27s} {t:.4f} ms (no output){share}", flush=True)
                    results["rows"].append({"dtype": dt, "n": n, "variant": v, "ms": runs[lab], "median_ms": t})
                    continue
                ratios = [c / x for c, x in zip(runs["cuBLAS"], runs[lab])]
                pct = tc / t * 100
                print(f"  {lab:27s} {t:.4f} ms {flop / t / 1e9:4.0f} TFLOP/s {pct:5.1f}% of cuBLAS "
                      f"(runs {min(ratios) * 100:.1f}-{max(ratios) * 100:.1f}%)  {arch} regs={regs} err={err:.1e}",
                      flush=True)
                results["rows"].append({"dtype": dt, "n": n, "variant": v, "ms": runs[lab], "cublas_ms": runs["cuBLAS"],
                                        "median_ms": t, "pct_of_cublas": pct, "rel_err": err, "arch": arch, "regs": regs})
                if best is None or t < best[1]:
                    best = (lab, t)
            if best is None:
                continue
            winners[n] = best[0]
            if n == min(winners):
                first_best[dt] = gos[best[0]][0]
            first = min(winners)
            line = f"  best at {dt} {n}^3: {best[0]} {tc / best[1] * 100:.1f}% of cuBLAS"
            if n != first and winners[first] in gos:
                tw = statistics.median(runs[winners[first]])
                line += (f"; the {first}^3 winner {winners[first]} here: {tc / tw * 100:.1f}% "
                         f"({(tw / best[1] - 1) * 100:+.1f}% time against the best)")
            print(line, flush=True)
            del A, B, C, ref, refd, args, gos
            torch.cuda.empty_cache()
    if a.ksweep:
        results["ksweep"] = ksweep(a, torch, suite, GpuArray, tdt, mods, first_best, props.multi_processor_count)
    results["wall_s"] = round(time.perf_counter() - t_start, 1)
    print(f"done in {results['wall_s']} s", flush=True)
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "gemm_order.json").write_text(json.dumps(results, indent=1))
        print(f"wrote {out / 'gemm_order.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
