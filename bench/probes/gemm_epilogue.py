"""Question: Do the GEMM epilogue switches (tilenb/switches.py: TILENB_GEMM_TMA_STORE,
TILENB_GEMM_WG_EPILOGUE, TILENB_GEMM_FULL_STAGE, TILENB_GEMM_LEAN_SYNC) bring the suite's sm_90
GEMM closer to cuBLAS at 4096³ and 8192³, f16 and bf16, and which combination wins?

The suite's GEMM (tilenb/examples/suite_kernels.py, GEMM) at the tile shape and tile orders that
won before (128 x 256, NT 256, TK 64; GM from --gm, by default the best of each shape in
docs/benchmarks.md, "Records of issue 19": GM 4 and 8 at 4096³, GM 16 and 32 at 8192³) under each
switch set of --sets: none (the default code), each switch alone, TMA store + warpgroup epilogue,
all four. Against cuBLAS through torch.matmul in the same process, on the GPU this runs on.

    python bench/probes/gemm_epilogue.py [--shapes 4096,8192] [--dtypes f16,bf16] [--runs 5]
        [--gm 4096:4,8/8192:16,32] [--sets none,tma,wg,full,lean,tma+wg,tma+wg+full+lean]
        [--ksweep 1024,2048,4096,8192] [--budget-s 400] [--out DIR] [--jobs N]

What it guarantees:
- Each switch set's module is generated with exactly those switches set (the one `SWITCHES`
  object the analysis and the generator read; its own source text, so no cache hands one set's
  code to another) and compiled first (NVRTC in `--jobs` processes); every variant then runs once
  through the public call with its output poisoned with NaN and is compared with cuBLAS's
  (relative Frobenius error in float64; more than 2e-2 is reported and the variant not timed),
  and the CUDA it launched must carry the marks of exactly its switches (`code_matches`).
- Times: `--runs` runs (default 5) per shape and dtype; each run times cuBLAS and then every
  variant, each the median of CUDA-event timings of `--reps` launches after warm-up, so a drift
  of the clocks falls on all alike. A variant's figure is the median over the runs, its % of
  cuBLAS is cuBLAS's median over its median, the spread the range of the runs' own ratios.
- With --ksweep, the first shape's winner, the same variant with the switches off and cuBLAS at
  M = N = that shape and each K listed: a line through the times splits each into a cost per
  unit of K and a fixed cost (the prologue and epilogue of each CTA's tile, the last partial
  wave), the cost these switches are after.
- `--budget-s` (default 400 s, compile included): no run (nor K of the sweep) starts past it (the figures then
  cover the runs done, and the lines say how many); the defaults end well inside 7 minutes on
  an H200. With --out, writes DIR/gemm_epilogue.json with every run's times.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))              # tilenb
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "suite"))   # the suite's launch helpers
sys.path.insert(0, str(Path(__file__).resolve().parent))                 # gemm_order's helpers

from gemm_order import kernel_text, time_ms  # noqa: E402

SWITCH_OF = {"tma": "gemm_tma_store", "wg": "gemm_wg_epilogue", "full": "gemm_full_stage", "lean": "gemm_lean_sync"}
# what each switch puts in the generated CUDA of the suite's GEMM (tests/codegen/test_gemm_epilogue.py)
MARK_OF = {"tma": "tnb_tma_store_2d(", "wg": "tnb_named_sync(1 + ", "full": "tnb_stmatrix_x4(tnb_smem_u32",
           "lean": "nothing before this loop touches memory"}


def code_matches(name: str, source: str) -> bool:
    """Whether generated CUDA carries the marks of exactly the switches of set `name`."""
    on = set() if name == "none" else set(name.split("+"))
    return all((mark in source) == (x in on) for x, mark in MARK_OF.items())


@contextlib.contextmanager
def switches(name: str):
    """SWITCHES with the switches of set `name` ("none", or names of SWITCH_OF joined by +) on."""
    from tilenb.switches import SWITCHES
    on = [] if name == "none" else name.split("+")
    old = {f: getattr(SWITCHES, f) for f in SWITCH_OF.values()}
    try:
        for f in SWITCH_OF.values():
            setattr(SWITCHES, f, False)
        for x in on:
            setattr(SWITCHES, SWITCH_OF[x], True)
        yield
    finally:
        for f, v in old.items():
            setattr(SWITCHES, f, v)


def parse_gm(text: str):
    """'4096:4,8/8192:16,32' -> {4096: [4, 8], 8192: [16, 32]}."""
    out = {}
    for part in text.split("/"):
        n, gms = part.split(":")
        out[int(n)] = [int(x) for x in gms.split(",")]
    return out


def ksweep(a, torch, suite, GpuArray, tdt, mods, first_best, n, t_start):
    """The first shape's winner, the same variant with the switches off, and cuBLAS at M = N = n
    and each K of --ksweep: a least-squares line t = fixed + per_k * K through each one's medians.
    `fixed` is what a launch costs whatever the GEMM loop's length (each CTA's prologue and
    epilogue, the last partial wave): the part of the time these switches address."""
    ks = [int(x) for x in a.ksweep.split(",")]
    out = {}
    for dt, (v, _) in first_best.items():
        who = {"cuBLAS": None, "switches off": (v, "none"), v["switches"]: (v, v["switches"])}
        times = {w: [] for w in who}
        for K in ks:
            if time.perf_counter() - t_start > a.budget_s:
                print(f"  (budget reached: K sweep of {dt} stops before K = {K})", flush=True)
                break
            A = torch.randn(n, K, device="cuda", dtype=torch.float32).to(tdt[dt])
            B = torch.randn(K, n, device="cuda", dtype=torch.float32).to(tdt[dt])
            C = torch.empty(n, n, device="cuda", dtype=tdt[dt])
            ref = torch.empty(n, n, device="cuda", dtype=tdt[dt])
            args = [GpuArray(A), GpuArray(B), GpuArray(C)]
            gos = {}
            for w, spec in who.items():
                if spec is None:
                    gos[w] = lambda: torch.matmul(A, B, out=ref)
                    continue
                vv, name = spec
                k = getattr(mods[(dt, name)], f"gemm_{dt}")
                tune = {x: vv[x] for x in ("TM", "TN", "TK", "GM", "NT")}
                with switches(name):
                    k(*args, variant=tune)
                    gos[w] = suite.prepared_launch(k, None, args, tune)[0]
            per = {w: [] for w in gos}
            for _ in range(a.runs):
                for w, go in gos.items():
                    per[w].append(time_ms(torch, go, a.reps))
            for w in gos:
                times[w].append(statistics.median(per[w]))
            del A, B, C, ref, args, gos
        done = ks[:min(len(t) for t in times.values())]
        if len(done) < 2:
            continue
        fits = {}
        for w, ts in times.items():
            ts = ts[:len(done)]
            mk, mt = statistics.fmean(done), statistics.fmean(ts)
            per_k = sum((x - mk) * (y - mt) for x, y in zip(done, ts)) / sum((x - mk) ** 2 for x in done)
            fits[w] = {"fixed_ms": mt - per_k * mk, "per_k_ms": per_k, "times_ms": ts}
        print(f"{dt} M = N = {n}, K in {done}: " + "; ".join(
            f"{w} fixed {f['fixed_ms'] * 1e3:.1f} us, per 1024 of K {f['per_k_ms'] * 1024:.4f} ms" for w, f in fits.items()),
            flush=True)
        out[dt] = {"variant": v, "K": done, "fit": fits}
        torch.cuda.empty_cache()
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="4096,8192")
    ap.add_argument("--dtypes", default="f16,bf16")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--reps", type=int, default=20, help="launches a timing (the median is kept)")
    ap.add_argument("--tile", default="128x256", help="TMxTN")
    ap.add_argument("--gm", default="4096:4,8/8192:16,32", help="SHAPE:GM,GM/SHAPE:GM,...")
    ap.add_argument("--sets", default="none,tma,wg,full,lean,tma+wg,tma+wg+full+lean")
    ap.add_argument("--budget-s", type=float, default=400.0, help="no run starts later than this (compile included)")
    ap.add_argument("--ksweep", default="1024,2048,4096,8192",
                    help="K values of the fixed-cost fit at M = N = the first shape ('' for none)")
    ap.add_argument("--out", default="")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 4)
    a = ap.parse_args(argv)
    os.environ.setdefault("TILENB_CACHE_DIR", tempfile.mkdtemp(prefix="tilenb-gemm-epilogue-"))
    t_start = time.perf_counter()
    import tilenb
    import suite
    tm, tn = map(int, a.tile.split("x"))
    shapes = [int(x) for x in a.shapes.split(",")]
    gm_of = parse_gm(a.gm)
    dts = a.dtypes.split(",")
    sets = a.sets.split(",")
    all_gms = sorted({g for n in shapes for g in gm_of.get(n, [8])})
    mods = {}
    for dt in dts:
        for name in sets:
            with switches(name):
                text = kernel_text(dt, [tm], [tn], all_gms) + f"\n// switch set: {name}\n"
                mods[(dt, name)] = tilenb.compile(text, backend="cuda")
                suite.precompile(mods[(dt, name)], "sm_90", a.jobs)
    print(f"compiled {len(mods)} modules in {time.perf_counter() - t_start:.0f} s", flush=True)
    import torch
    suite.S.torch = torch
    import cupy as cp
    suite.S.cp = cp
    from suite import GpuArray
    tdt = {"bf16": torch.bfloat16, "f16": torch.float16}
    props = torch.cuda.get_device_properties(0)
    results = {"gpu": props.name, "sms": props.multi_processor_count, "torch": torch.__version__,
               "runs": a.runs, "reps": a.reps, "tile": a.tile, "rows": []}
    print(f"{props.name}, {props.multi_processor_count} SMs; up to {a.runs} runs of {a.reps} launches each", flush=True)
    first_best = {}       # dtype -> (the variant that won at the first shape, its speed over switches off)
    for n in shapes:
        for dt in dts:
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
            for name in sets:
                k = getattr(mods[(dt, name)], f"gemm_{dt}")
                for gm in gm_of.get(n, [8]):
                    v = dict(TM=tm, TN=tn, TK=64, GM=gm, NT=256)
                    lab = f"GM{gm} {name}"
                    try:
                        with switches(name):
                            C.fill_(float("nan"))
                            k(*args, variant=v)
                            torch.cuda.synchronize()
                            err = ((C.double() - refd).norm() / refd.norm()).item()
                            if not err <= 2e-2:
                                print(f"  {dt} {n}^3 {lab}: differs from cuBLAS ({err:.2e}); not timed", flush=True)
                                continue
                            go, ks, fn = suite.prepared_launch(k, None, args, v)
                        if not code_matches(name, ks.source):
                            print(f"  {dt} {n}^3 {lab}: its CUDA is not that of its switches; not timed", flush=True)
                            continue
                        gos[lab] = (dict(v, switches=name), go, err, int(fn.num_regs), ks.source.count("__syncthreads();"))
                    except Exception as e:  # report and go on
                        print(f"  {dt} {n}^3 {lab} FAILED: {type(e).__name__}: {str(e)[:300]}", flush=True)
            runs = {"cuBLAS": []}
            runs.update({lab: [] for lab in gos})
            for _ in range(a.runs):
                if time.perf_counter() - t_start > a.budget_s and runs["cuBLAS"]:
                    print(f"  (budget of {a.budget_s:.0f} s reached: {len(runs['cuBLAS'])} run(s))", flush=True)
                    break
                runs["cuBLAS"].append(time_ms(torch, cublas, a.reps))
                for lab, (_, go, *_rest) in gos.items():
                    runs[lab].append(time_ms(torch, go, a.reps))
            tc = statistics.median(runs["cuBLAS"])
            flop = 2.0 * n ** 3
            print(f"{dt} {n}^3 cuBLAS {tc:.4f} ms ({flop / tc / 1e9:.0f} TFLOP/s), {len(runs['cuBLAS'])} runs "
                  f"{min(runs['cuBLAS']):.4f}-{max(runs['cuBLAS']):.4f} ms", flush=True)
            best = None
            for lab, (v, _, err, regs, syncs) in gos.items():
                t = statistics.median(runs[lab])
                ratios = [c / x for c, x in zip(runs["cuBLAS"], runs[lab])]
                pct = tc / t * 100
                base = runs.get(f"GM{v['GM']} none")
                vs = f" {(statistics.median(base) / t - 1) * 100:+5.1f}% speed vs switches off" if base else ""
                print(f"  {lab:20s} {t:.4f} ms {flop / t / 1e9:4.0f} TFLOP/s {pct:5.1f}% of cuBLAS "
                      f"(runs {min(ratios) * 100:.1f}-{max(ratios) * 100:.1f}%){vs}  regs={regs} err={err:.1e}",
                      flush=True)
                results["rows"].append({"dtype": dt, "n": n, "variant": v, "ms": runs[lab], "cublas_ms": runs["cuBLAS"],
                                        "median_ms": t, "pct_of_cublas": pct, "rel_err": err, "regs": regs,
                                        "syncthreads_in_source": syncs})
                if best is None or t < best[1]:
                    best = (lab, t)
            if best is not None:
                print(f"  best at {dt} {n}^3: {best[0]} {tc / best[1] * 100:.1f}% of cuBLAS", flush=True)
                if n == shapes[0]:
                    first_best[dt] = (gos[best[0]][0], statistics.median(runs[f"GM{gos[best[0]][0]['GM']} none"]) /
                                      best[1] if f"GM{gos[best[0]][0]['GM']} none" in runs else None)
            del A, B, C, ref, refd, args, gos
            torch.cuda.empty_cache()
    if a.ksweep and time.perf_counter() - t_start < a.budget_s:
        results["ksweep"] = ksweep(a, torch, suite, GpuArray, tdt, mods, first_best, shapes[0], t_start)
    results["wall_s"] = round(time.perf_counter() - t_start, 1)
    print(f"done in {results['wall_s']} s", flush=True)
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "gemm_epilogue.json").write_text(json.dumps(results, indent=1))
        print(f"wrote {out / 'gemm_epilogue.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
