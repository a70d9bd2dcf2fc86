"""Question: does the warpgroup ping-pong of streamed attention (TILENB_STREAM_PINGPONG, and
TILENB_STREAM_OVERLAP where it exists) bring the suite's attention kernels closer to SDPA's best
backend on the H200?

For each of the suite's attention kernels (tilenb/examples/suite_kernels.py: ATTENTION,
ATTENTION_TC, ATTENTION_CAUSAL), at 2 x 16 x 4096 and 1 x 16 x 16384, head dim 64 and 128, bf16,
every autotune variant is built with the switches off, with the ping-pong, and with the ping-pong
and the softmax/Q K^T overlap (when `tilenb.switches.Switches` has `stream_overlap`), and timed
beside SDPA's cuDNN and flash backends in the same process.

    python bench/probes/attention_sched.py [--budget-s 400] [--shapes 2x16x4096,1x16x16384]
                                           [--dims 64,128] [--kernels attention_bf16,...]
                                           [--runs 2] [--reps 10] [--jobs N] [--out DIR]

What it guarantees:
- Each setting's kernels are generated with `tilenb.switches.SWITCHES` set for it, from a module
  of their own (a distinct comment in the text, after `tilenb.api.clear_caches()`), so that no
  cache serves one setting's code for another's; every launch closure is checked to hold the
  ping-pong's named barriers (`tnb_pp_sync`) exactly where the analysis says the setting applies.
- Every variant runs once through the public call with its output poisoned with NaN and is
  compared with SDPA's output (relative Frobenius error; over 2e-2 it is reported, not timed).
- Times: the median of `--reps` CUDA-event timings after warm-up, the median over `--runs` runs
  (SDPA timed in each run too); a setting's variants that its switches leave unchanged (the same
  CUDA) are timed once, as "off". The table gives, per kernel, shape and head dim, the best
  variant of each setting, its time and its share of SDPA's best backend, and for the variants
  the switches change, off against on.
- `--budget-s` bounds the wall time: compiling stops adding settings and timing stops adding
  cases when the budget would be passed (what was skipped is printed), so the probe ends in
  time; the default keeps it under 7 minutes on the H200.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))              # tilenb
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "suite"))   # the suite's launch helpers

from tilenb.examples import suite_kernels as SK  # noqa: E402

KERNELS = {"attention_bf16": SK.ATTENTION, "attention_tc_bf16": SK.ATTENTION_TC,
           "attention_causal_bf16": SK.ATTENTION_CAUSAL}


def settings():
    """(label, {SWITCHES field: value}) of each setting measured."""
    from tilenb.switches import Switches
    out = [("off", {"stream_pingpong": 0}), ("pingpong", {"stream_pingpong": 2})]
    if "stream_overlap" in Switches.__dataclass_fields__:
        out[0][1]["stream_overlap"] = False
        out[1][1]["stream_overlap"] = False
        out.append(("pingpong+overlap", {"stream_pingpong": 2, "stream_overlap": True}))
    return out


def time_ms(torch, fn, reps):
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for s, e in evs:
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in evs)


def vlabel(v):
    return f"BR{v['BR']} BC{v['BC']} NT{v['NT']}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budget-s", type=float, default=400.0)
    ap.add_argument("--shapes", default="2x16x4096,1x16x16384")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 4)
    ap.add_argument("--out", default="")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    left = lambda: a.budget_s - (time.perf_counter() - t0)  # noqa: E731
    os.environ.setdefault("TILENB_CACHE_DIR", tempfile.mkdtemp(prefix="tilenb-attention-sched-"))
    import tilenb
    import tilenb.api
    import suite
    from tilenb.switches import SWITCHES
    dims = [int(x) for x in a.dims.split(",")]
    names = a.kernels.split(",")
    sets = settings()
    saved = {f: getattr(SWITCHES, f) for _, fs in sets for f in fs}

    # ---- generate and compile each setting's variants with its switches set
    mods, applies = {}, {}      # (setting, kernel) -> module, its variants at the head dims asked for
    for label, fields in sets:
        if left() < 0.6 * a.budget_s and mods:
            print(f"budget: setting {label} not compiled", flush=True)
            continue
        for f, v in fields.items():
            setattr(SWITCHES, f, v)
        tilenb.api.clear_caches()
        for name in names:
            mod = tilenb.compile(KERNELS[name] + f"\n// attention_sched setting {label}\n", backend="cuda")
            k = mod.kernels[name]
            mods[(label, name)] = mod
            applies[(label, name)] = [tuple(sorted(dict(key).items())) for key in k.checked.variants
                                      if dict(key)["D"] in dims]
            suite.precompile(mod, "sm_90", a.jobs, only={name})
        for f, v in saved.items():
            setattr(SWITCHES, f, v)
    print(f"compiled {len(mods)} modules in {time.perf_counter() - t0:.0f} s", flush=True)

    import torch
    suite.S.torch = torch
    import cupy as cp
    suite.S.cp = cp
    from suite import GpuArray
    from torch.nn.attention import SDPBackend, sdpa_kernel
    F = torch.nn.functional
    props = torch.cuda.get_device_properties(0)
    from tilenb.runtime.gpu.cuda import device_target
    dev = device_target()
    print(f"{props.name}, {props.multi_processor_count} SMs; {a.runs} runs of {a.reps} launches; "
          f"settings: {', '.join(lab for lab, _ in sets)}", flush=True)
    table, rows, skipped = [], [], []
    longest = 0.0
    for shp in a.shapes.split(","):
        B, H, N = map(int, shp.split("x"))
        for D in dims:
            torch.manual_seed(N + D)
            q, k, v = (torch.randn((B, H, N, D), device="cuda").to(torch.bfloat16) for _ in range(3))
            o = torch.empty_like(q)
            scale = 1.0 / math.sqrt(D)
            flat = (B * H, N, D)
            args = [GpuArray(x.view(flat)) for x in (q, k, v, o)] + [scale]
            for causal in (False, True):
                kern_names = [n for n in names if ("causal" in n) == causal]
                if not kern_names:
                    continue
                if left() < max(20.0, 1.5 * longest):     # the longest case so far, and a margin
                    skipped += [f"{n} {shp} d{D}" for n in kern_names]
                    continue
                t_case = time.perf_counter()
                flops = 4 * B * H * N * N * D // (2 if causal else 1)
                peers, ref = {}, None
                for pname, be in (("SDPA cuDNN", SDPBackend.CUDNN_ATTENTION), ("SDPA flash", SDPBackend.FLASH_ATTENTION)):
                    def call(be=be):
                        with sdpa_kernel([be]):
                            return F.scaled_dot_product_attention(q, k, v, scale=scale, is_causal=causal)
                    try:
                        out = call()
                        ref = out if ref is None else ref
                        peers[pname] = call
                    except Exception as e:  # a backend this build lacks
                        print(f"  {pname}: unavailable ({type(e).__name__})", flush=True)
                gos = {}
                for name in kern_names:
                    for label, fields in sets:
                        mod = mods.get((label, name))
                        if mod is None:
                            continue
                        kern = mod.kernels[name]
                        # the launch generates and analyses for the device's own Target: with this
                        # setting's switches, as the module's own text keeps its caches apart
                        for f, val in fields.items():
                            setattr(SWITCHES, f, val)
                        for vkey in applies[(label, name)]:
                            var = dict(vkey)
                            if var["D"] != D:
                                continue
                            # the analysis for this device's own Target (its limits), as the launch makes it
                            pp = any(r.pingpong for r in kern.analysis(arch=dev, **var).lowering.rings.values())
                            if label != "off" and not pp:
                                continue        # a variant the setting leaves alone is the "off" one
                            o.fill_(float("nan"))
                            kern(*args, variant=var)
                            torch.cuda.synchronize()
                            err = suite.rel_err(o, ref) if ref is not None else 0.0
                            go, ks, fn = suite.prepared_launch(kern, None, args, var)
                            if ("tnb_pp_sync" in ks.source) != pp:
                                raise SystemExit(f"{name} {var} {label}: the launched code does not match the "
                                                 f"analysis' ping-pong decision ({pp}): a cache served another setting")
                            if not err <= 2e-2:
                                print(f"  {name} {shp} d{D} {label} {vlabel(var)}: differs from SDPA ({err:.2e}); "
                                      "not timed", flush=True)
                                continue
                            gos[(name, label, vlabel(var))] = (go, err, pp, fn.num_regs)
                        for f, val in saved.items():
                            setattr(SWITCHES, f, val)
                times = {n: [] for n in list(peers) + list(gos)}
                for _ in range(a.runs):
                    for n, fn in peers.items():
                        times[n].append(time_ms(torch, fn, a.reps))
                    for n, (go, *_rest) in gos.items():
                        times[n].append(time_ms(torch, go, a.reps))
                med = {n: statistics.median(ts) for n, ts in times.items() if ts}
                best_peer = min((n for n in peers if n in med), key=lambda n: med[n], default=None)
                peer_ms = med.get(best_peer)
                for n in peers:
                    print(f"{shp} d{D} {'causal ' if causal else ''}{n}: {med[n]:.4f} ms "
                          f"{flops / med[n] / 1e9:.0f} TFLOP/s", flush=True)
                for name in kern_names:
                    for label, _ in sets:
                        mine = {key[2] for key in gos if key[0] == name and key[1] == label}
                        cands = [(med[key], key) for key in gos if key[0] == name and
                                 (key[1] == label or (key[1] == "off" and key[2] not in mine))]
                        if not cands:
                            continue
                        ms, key = min(cands)
                        pct = peer_ms / ms * 100 if peer_ms else float("nan")
                        table.append((name, shp, D, label, key[2], ms, flops / ms / 1e9, pct, best_peer))
                    # the variants the switches change: off against each setting
                    for key in sorted(k2 for k2 in gos if k2[0] == name and gos[k2][2]):
                        off = med.get((name, "off", key[2]))
                        if off:
                            print(f"  {name} {shp} d{D} {key[2]}: off {off:.4f} ms, {key[1]} {med[key]:.4f} ms "
                                  f"({(off / med[key] - 1) * 100:+.1f}%, regs {gos[key][3]})", flush=True)
                longest = max(longest, time.perf_counter() - t_case)
                for key, ms in med.items():
                    if key in gos:
                        rows.append({"kernel": key[0], "setting": key[1], "variant": key[2], "shape": [B, H, N, D],
                                     "ms": times[key], "median_ms": ms, "peer": best_peer, "peer_ms": peer_ms,
                                     "err": gos[key][1], "pingpong": gos[key][2]})
            del q, k, v, o, args
            torch.cuda.empty_cache()

    print("\nbest variant per setting (% of SDPA's best backend in the same process):", flush=True)
    print(f"{'kernel':22s} {'shape':11s} {'D':>3s} {'setting':17s} {'variant':17s} {'ms':>8s} {'TFLOP/s':>8s} {'%SDPA':>6s}")
    for name, shp, D, label, var, ms, tf, pct, peer in table:
        print(f"{name:22s} {shp:11s} {D:3d} {label:17s} {var:17s} {ms:8.4f} {tf:8.0f} {pct:6.1f}  ({peer})")
    for s in skipped:
        print(f"budget: not timed: {s}")
    if a.out:
        Path(a.out).mkdir(parents=True, exist_ok=True)
        (Path(a.out) / "attention_sched.json").write_text(json.dumps({"gpu": props.name, "rows": rows}, indent=1))
    print(f"done in {time.perf_counter() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
