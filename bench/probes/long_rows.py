"""Question: Which form of RMSNorm, LayerNorm and softmax over 4096 x 131072 rows (f32, bf16) reaches
90% of the copy bandwidth, and is it faster than torch.compile and Triton there?

Issue 19's long-row probe, in one process on one GPU (H200), in under 5 minutes. The candidates are
the suite's kernels (tilenb/examples/suite_kernels.py):

- `_cluster`: a row per cluster of K CTAs, one cluster meeting per statistic (LayerNorm and softmax
  meet twice);
- `_cluster1`: R rows per cluster, one meeting a row: each CTA reduces its slice completely and the
  cluster exchanges the slices' figures in one cluster_sum of an all-zero [R, 2K] tile (LayerNorm
  combines means and sums of squared deviations by the parallel-variance rule, softmax rescales each
  slice's sum to the row maximum; RMSNorm forms x * G while the cluster meets);
- `_cluster1e` (softmax only): `_cluster1` with each exponential taken once (x replaced by
  exp(x - slice max) before the meeting, the write only scales it);
- `_head`: a CTA a row, the head of the row in shared memory, the tail read twice;
- `_chead` (f32 RMSNorm only): the head form in each CTA of a cluster of 2, half a row each, one
  meeting;
- `_wide`: a CTA a row, two passes over chunks.

For each op and dtype: every form is autotuned by tilenb (each variant timed; the probe prints them
all), checked against torch (relative error within the suite's tolerance), and its winner timed
again in alternating rounds with the others (median of the rounds). Each cluster form's winner is
also generated with an experiment switch (tilenb/switches.py) and timed in the same rounds:
`+ef`, TILENB_STORE_EVICT_FIRST=1 (the stores of Y give up their L2 lines first, so the weight
rows stay), and `+b256`, TILENB_BATCH_BYTES=256 (a thread keeps twice the bytes of loads in flight
in a statement's register batch: the write reads x, W and B for twice as many chunks at once).
Then torch eager, torch.compile and the suite's two-sweep Triton kernel
(bench/suite/triton_peers.py) at the same arguments. The
rate counts the fewest bytes (X read once, Y written once, the weight rows once) against the
device-to-device copy bandwidth measured at the start (bench/suite/suite.py's `ceiling`).

    python bench/probes/long_rows.py [--rounds 3] [--only REGEX] [--no-compile] [--no-triton] [--no-ab] [--json FILE]

`--only` filters "op dtype form" (for example `--only 'layer_norm .*cluster'`). Needs CuPy and torch
(Triton for its peer); nothing is written unless `--json` names a file.
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

OPS = ("rms_norm", "layer_norm", "softmax")
DTYPES = ("f32", "bf16")
FORMS = ("cluster", "cluster1", "cluster1e", "head", "chead", "wide")
SHAPE = (4096, 131072)


def _args(SU, op, dt, M, N):
    torch = SU.S.torch
    F = torch.nn.functional
    x, w, b = SU.randn((M, N), dt), SU.randn((1, N), dt), SU.randn((1, N), dt)
    y = torch.empty_like(x)
    esz = x.element_size()
    if op == "rms_norm":
        return (dict(args=(x, w, y, 1e-6), out=y, nbytes=2 * M * N * esz + N * esz,
                     torch=lambda: F.rms_norm(x, (N,), w.view(N), 1e-6),
                     triton=lambda yt: SU.TP.rms_norm(x, w, yt, 1e-6)))
    if op == "layer_norm":
        return (dict(args=(x, w, b, y, 1e-5), out=y, nbytes=2 * M * N * esz + 2 * N * esz,
                     torch=lambda: F.layer_norm(x, (N,), w.view(N), b.view(N), 1e-5),
                     triton=lambda yt: SU.TP.layer_norm(x, w, b, yt, 1e-5)))
    return (dict(args=(x, y), out=y, nbytes=2 * M * N * esz, torch=lambda: torch.softmax(x, dim=-1),
                 triton=lambda yt: SU.TP.softmax(x, yt)))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile peer")
    ap.add_argument("--no-triton", action="store_true", help="skip the Triton peer")
    ap.add_argument("--no-ab", action="store_true", help="skip the experiment switches' A/B of the cluster forms")
    ap.add_argument("--json", default="", help="write every figure to this file")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 1), help="NVRTC processes")
    a = ap.parse_args(argv)
    t_start = time.perf_counter()
    os.environ.setdefault("TILENB_CACHE_DIR", tempfile.mkdtemp(prefix="tilenb-long-rows-"))
    import tilenb
    import tilenb.runtime.gpu.cuda as tc
    import suite as SU
    from tilenb.examples import suite_kernels as SK
    tc.PROGRESS = False
    cases = [(op, dt, form) for op in OPS for dt in DTYPES for form in FORMS
             if not a.only or re.search(a.only, f"{op} {dt} {form}")]
    SU.S.mod = mod = tilenb.compile(SK.program(), backend="cuda")
    cases = [(op, dt, form) for op, dt, form in cases if f"{op}_{form}_{dt}" in mod.kernels]
    names = {f"{op}_{form}_{dt}" for op, dt, form in cases}
    # the same program once per experiment switch (another text each: the generated-source cache is
    # keyed by it); their kernels are generated with the switch set, one variant each, below
    from tilenb.switches import SWITCHES
    ab = {label: (field, value, tilenb.compile(SK.program() + f"\n// {field} = {value}\n", backend="cuda"))
          for label, field, value in (("+ef", "store_evict_first", True), ("+b256", "batch_bytes", 256))}
    SU.precompile(mod, "sm_90", a.jobs, names)          # before CUDA starts in this process (fork)
    import cupy as cp
    import torch
    SU.S.cp, SU.S.torch = cp, torch
    SU.S.compile_peers = not a.no_compile
    SU.S.compile_budget = 1e9
    SU.S.use_triton = not a.no_triton
    SU.ceiling()
    copy = SU.S.copy_gbps
    M, N = SHAPE
    print(f"device {torch.cuda.get_device_name(0)}; copy bandwidth {copy:.0f} GB/s; shape {M} x {N}; "
          f"90% line = {0.9 * copy:.0f} GB/s", flush=True)
    record = {"copy_GBps": copy, "shape": [M, N], "rows": []}
    for op in OPS:
        for dt in DTYPES:
            forms = [f for o, d, f in cases if o == op and d == dt]
            if not forms:
                continue
            A = _args(SU, op, dt, M, N)
            ref = A["torch"]()
            torch.cuda.synchronize()
            tol = SU.tol_for(dt, "reduce")
            go, info = {}, {}
            for form in forms:
                kn = f"{op}_{form}_{dt}"
                try:
                    g, var, facts = SU.tl_launch(getattr(mod, kn), None, A["args"], A["out"])
                    err = SU.rel_err(A["out"], ref)
                    info[kn] = dict(variant=var, err=err, facts=facts)
                    if not err <= tol:
                        print(f"{kn:<32} WRONG: rel err {err:.2e} > {tol:.0e} ({var})", flush=True)
                        continue
                    go[kn] = g
                except Exception as e:   # one failure is one line
                    print(f"{kn:<32} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
            for kn, (label, (field, value, mod_ab)) in [(k, x) for k in list(go) if "_cluster" in k
                                                         for x in ab.items() if not a.no_ab]:
                old = getattr(SWITCHES, field)
                setattr(SWITCHES, field, value)
                try:
                    g, var, facts = SU.tl_launch(getattr(mod_ab, kn), None, A["args"], A["out"],
                                                 variant=info[kn]["variant"])
                    err = SU.rel_err(A["out"], ref)
                    if err <= tol:
                        go[kn + label] = g
                        info[kn + label] = dict(variant=var, err=err, facts=facts)
                    else:
                        print(f"{kn + label:<32} WRONG: rel err {err:.2e}", flush=True)
                except Exception as e:
                    print(f"{kn + label:<32} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
                finally:
                    setattr(SWITCHES, field, old)
            times = {kn: [] for kn in go}
            for _ in range(a.rounds):
                for kn, g in go.items():
                    times[kn].append(SU.time_gpu(g, target_s=0.1))
            peers = {}
            te, st, _ = SU.measure_peer(A["torch"])
            peers["torch eager"] = (te, st)
            cfn, why = SU.compiled(A["torch"])
            peers["torch.compile"] = (None, why) if cfn is None else SU.measure_peer(cfn, warm_compile=True)[:2]
            yt = torch.empty_like(A["out"])
            tt, st, _ = SU.triton_peer(lambda: A["triton"](yt), yt, ref, dt, "reduce")
            peers["Triton"] = (tt, st)
            print(f"-- {op} {dt}", flush=True)
            best = min(times, key=lambda k: statistics.median(times[k])) if times else None
            for kn in times:
                ms = statistics.median(times[kn])
                gbps = A["nbytes"] / ms / 1e9
                vs = "  ".join(f"{p} {ps / ms:.2f}x" for p, (ps, _) in peers.items() if ps)
                mark = " *" if kn == best else "  "
                v = ",".join(f"{k}{x}" for k, x in sorted(info[kn]["variant"].items()) if k != "D")
                print(f"{mark}{kn:<32} {ms * 1e3:7.3f} ms {gbps:6.0f} GB/s {100 * gbps / copy:5.1f}% of copy  "
                      f"err {info[kn]['err']:.1e}  [{v}]  peer time / ours: {vs}", flush=True)
                tuned = ", ".join(f"{t['variant'].replace('D=131072, ', '')}: "
                                  f"{'-' if t['ms'] is None else format(t['ms'], '.3f')}"
                                  for t in info[kn]["facts"].get("autotune", []))
                if tuned:
                    print(f"     autotune (ms): {tuned}", flush=True)
                record["rows"].append(dict(op=op, dtype=dt, kernel=kn, ms=ms * 1e3, rounds_ms=[t * 1e3 for t in times[kn]],
                                           frac_copy=gbps / copy, rel_err=info[kn]["err"], variant=info[kn]["variant"],
                                           autotune=info[kn]["facts"].get("autotune"),
                                           regs=info[kn]["facts"].get("num_regs"),
                                           smem=info[kn]["facts"].get("smem_bytes")))
            for p, (ps, pst) in peers.items():
                txt = f"{ps * 1e3:7.3f} ms {A['nbytes'] / ps / 1e9:6.0f} GB/s {100 * A['nbytes'] / ps / 1e9 / copy:5.1f}% of copy" \
                    if ps else pst
                print(f"   peer {p:<21} {txt}", flush=True)
                record["rows"].append(dict(op=op, dtype=dt, peer=p, ms=None if ps is None else ps * 1e3, status=pst))
            del A, ref, go, yt
            SU.free()
    print(f"probe wall time {time.perf_counter() - t_start:.0f} s", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
