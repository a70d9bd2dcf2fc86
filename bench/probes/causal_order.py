"""Question: how much of the causal attention's time is the tail of its launch, and which CTA order
and tile shape (BR, BC, NT) bring it closest to SDPA's best causal backend at the suite's shapes?

The suite's causal kernel (tilenb/examples/suite_kernels.py, ATTENTION_CAUSAL: heads along x,
query blocks along y from the last, so that the heaviest block of every head starts first) against
two orders of the same kernel: "per head" (query blocks along x from the last, heads along y: the
order before, each head's blocks heaviest first, so the last heads' heavy blocks start near the
end of the launch) and "forward" (query blocks along x from the first). A list-scheduling model
of 132 SMs (the blocks' work in key blocks, started in launch order) puts the per-head order's
tail at 14-31% of the time at 2 x 16 x 4096 (1-8% at 1 x 16 x 16384) and the heaviest-first
order's at 1-3% (under 1%); this measures it.

    python bench/probes/causal_order.py [--shapes 2x16x4096,1x16x16384] [--dims 64,128]
                                        [--orders suite,per_head,forward] [--space all|winners]
                                        [--runs 3] [--reps 10] [--out DIR] [--jobs N]

What it guarantees:
- Every variant is compiled first (NVRTC in `--jobs` processes, into tilenb's disk cache), then
  run once through the public call with its output poisoned with NaN and compared with SDPA's
  (relative Frobenius error; a variant that differs by more than 2e-2 is reported, not timed).
- `--space winners` times the suite's first-run winners (d64: BR 64, BC 128, NT 128; d128: BR
  128, BC 128, NT 256); `all` every BR, BC in {64, 128} and NT in {128, 256}.
- Times: `--runs` runs, each timing SDPA (cuDNN, flash) and then every candidate as the median
  of CUDA-event timings of `--reps` launches after warm-up (torch_timing.py); a figure is the median over the runs,
  its % the best SDPA backend's median over it. With --out, writes DIR/causal_order.json.
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
sys.path.insert(0, str(Path(__file__).resolve().parent))                 # the probes' helpers (torch_timing)

from tilenb.examples import suite_kernels as SK  # noqa: E402
from torch_timing import time_ms  # noqa: E402

SUITE_ORDER = ("@grid(H, cdiv(N, BR))", "let h = ctx.block.x", "let row = (ctx.grid.y - 1 - ctx.block.y) * BR")
ORDERS = {
    "suite": {},
    "per_head": {"@grid(H, cdiv(N, BR))": "@grid(cdiv(N, BR), H)", "let h = ctx.block.x": "let h = ctx.block.y",
                 "let row = (ctx.grid.y - 1 - ctx.block.y) * BR": "let row = (ctx.grid.x - 1 - ctx.block.x) * BR"},
    "forward": {"@grid(H, cdiv(N, BR))": "@grid(cdiv(N, BR), H)", "let h = ctx.block.x": "let h = ctx.block.y",
                "let row = (ctx.grid.y - 1 - ctx.block.y) * BR": "let row = ctx.block.x * BR"},
}
WINNERS = {64: [(64, 128, 128)], 128: [(128, 128, 256)]}


def kernel_text(order: str, D: int, tiles) -> str:
    """The suite's causal kernel in CTA order `order`, its @autotune line set to head dim D and
    the (BR, BC, NT) of `tiles` (one module a tile shape: BR, BC and NT each a one-value list)."""
    text = SK.ATTENTION_CAUSAL
    for old in SUITE_ORDER:
        assert text.count(old) == 1, f"the suite's causal kernel has no '{old}'"
    for old, new in ORDERS[order].items():
        text = text.replace(old, new)
    br, bc, nt = tiles
    line = f"@autotune(BR in [{br}], BC in [{bc}], D in [{D}], NT in [{nt}])"
    head = "@autotune(BR in [64, 128], BC in [64, 128], D in [64, 128], NT in [128, 256])"
    assert text.count(head) == 1
    return text.replace(head, line)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="2x16x4096,1x16x16384")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--orders", default="suite,per_head,forward")
    ap.add_argument("--space", default="winners", choices=("winners", "all"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out", default="")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 4)
    a = ap.parse_args(argv)
    os.environ.setdefault("TILENB_CACHE_DIR", tempfile.mkdtemp(prefix="tilenb-causal-order-"))
    t0 = time.perf_counter()
    import tilenb
    import suite
    dims = [int(x) for x in a.dims.split(",")]
    orders = a.orders.split(",")
    space = {D: ([(br, bc, nt) for br in (64, 128) for bc in (64, 128) for nt in (128, 256)]
                 if a.space == "all" else WINNERS[D]) for D in dims}
    mods = {(o, D, t): tilenb.compile(kernel_text(o, D, t), backend="cuda") for o in orders for D in dims for t in space[D]}
    for mod in mods.values():
        suite.precompile(mod, "sm_90", a.jobs)
    print(f"compiled {len(mods)} variants in {time.perf_counter() - t0:.0f} s", flush=True)
    import torch
    suite.S.torch = torch
    import cupy as cp
    suite.S.cp = cp
    from suite import GpuArray
    from torch.nn.attention import SDPBackend, sdpa_kernel
    F = torch.nn.functional
    props = torch.cuda.get_device_properties(0)
    print(f"{props.name}, {props.multi_processor_count} SMs; {a.runs} runs of {a.reps} launches", flush=True)
    rows = []
    for shp in a.shapes.split(","):
        B, H, N = map(int, shp.split("x"))
        for D in dims:
            torch.manual_seed(N + D)
            q, k, v = (torch.randn((B, H, N, D), device="cuda").to(torch.bfloat16) for _ in range(3))
            o = torch.empty_like(q)
            scale = 1.0 / math.sqrt(D)
            flops = 4 * B * H * N * N * D // 2
            peers = {}
            ref = None
            for name, be in (("SDPA cuDNN", SDPBackend.CUDNN_ATTENTION), ("SDPA flash", SDPBackend.FLASH_ATTENTION)):
                def call(be=be):
                    with sdpa_kernel([be]):
                        return F.scaled_dot_product_attention(q, k, v, scale=scale, is_causal=True)
                try:
                    out = call()
                    ref = out if ref is None else ref
                    peers[name] = call
                except Exception as e:  # a backend this build lacks
                    print(f"  {name}: unavailable ({type(e).__name__})", flush=True)
            flat = (B * H, N, D)
            args = [GpuArray(x.view(flat)) for x in (q, k, v, o)] + [scale]
            gos = {}
            for (order, d, t), mod in mods.items():
                if d != D:
                    continue
                kern = mod.attention_causal_bf16
                var = dict(BR=t[0], BC=t[1], D=D, NT=t[2])
                lab = f"{order:9s} BR{t[0]} BC{t[1]} NT{t[2]}"
                o.fill_(float("nan"))
                kern(*args, variant=var)
                torch.cuda.synchronize()
                err = suite.rel_err(o, ref) if ref is not None else 0.0
                if not err <= 2e-2:
                    print(f"  {shp} d{D} {lab}: differs from SDPA ({err:.2e}); not timed", flush=True)
                    continue
                gos[lab] = (order, var, suite.prepared_launch(kern, None, args, var)[0], err)
            times = {n: [] for n in list(peers) + list(gos)}
            for _ in range(a.runs):
                for n, fn in peers.items():
                    times[n].append(time_ms(torch, fn, a.reps))
                for n, (_, _, go, _) in gos.items():
                    times[n].append(time_ms(torch, go, a.reps))
            med = {n: statistics.median(ts) for n, ts in times.items() if ts}
            best_peer = min((n for n in peers if n in med), key=lambda n: med[n], default=None)
            for n in peers:
                print(f"{shp} d{D} {n:26s} {med[n]:.4f} ms {flops / med[n] / 1e9:5.0f} TFLOP/s", flush=True)
            for n, (order, var, _, err) in sorted(gos.items(), key=lambda x: med[x[0]]):
                pct = med[best_peer] / med[n] * 100 if best_peer else float("nan")
                print(f"{shp} d{D} {n:26s} {med[n]:.4f} ms {flops / med[n] / 1e9:5.0f} TFLOP/s "
                      f"{pct:5.1f}% of {best_peer} (runs {min(times[n]):.4f}-{max(times[n]):.4f}) err={err:.1e}",
                      flush=True)
                rows.append({"shape": [B, H, N, D], "order": order, "variant": var, "ms": times[n],
                             "median_ms": med[n], "peer": best_peer, "peer_ms": med.get(best_peer), "pct": pct})
            del q, k, v, o, ref, args, gos
            torch.cuda.empty_cache()
    if a.out:
        Path(a.out).mkdir(parents=True, exist_ok=True)
        (Path(a.out) / "causal_order.json").write_text(json.dumps({"gpu": props.name, "rows": rows}, indent=1))
    print(f"done in {time.perf_counter() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
