"""Question: What do Nsight Compute's sections say about the suite's chosen kernels?

Launch a few of the suite's chosen tilenb kernels once each, for a profiler (Nsight Compute).

Usage (on the GPU machine, after bench/suite/suite.py wrote its results):
    ncu --clock-control none -k regex:'^(rms_norm|softmax|transpose|gemm|attention)' \
        --section SpeedOfLight --section Occupancy --section WarpStateStats \
        python bench/probes/profile_kernels.py RESULTS.json [RESULTS2.json ...] [NAME ...]

Guarantees: each kernel runs exactly once, with the @autotune variant the suite chose (read from
the RESULTS files; the first variant when the suite has none) and at the suite's shapes (attention
with fewer heads, to keep the profiler's replays short), on random inputs; nothing is timed or
checked here (bench/suite/suite.py does that). Prints one line per launch.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "suite"))

import tilenb  # noqa: E402
from tilenb.examples import suite_kernels as SK  # noqa: E402


def chosen_variants(results: Path):
    out = {}
    try:
        rows = json.loads(results.read_text())["rows"]
    except (OSError, ValueError, KeyError):
        return out
    for r in rows:
        sym = (r.get("tilenb_facts") or {}).get("symbol")
        if sym and r.get("tilenb_variant"):
            out.setdefault(sym.split("__")[0] + f"|{r.get('shape')}", r["tilenb_variant"])
    return out


def main(argv):
    import torch
    import suite as SU
    files = [Path(a) for a in argv if a.endswith(".json")] or [ROOT / "bench" / "results" / "h200.json"]
    want = set(a for a in argv if not a.endswith(".json"))
    SU.S.torch = torch
    mod = tilenb.compile(SK.program(), backend="cuda")
    import tilenb.runtime.gpu.cuda as tc
    tc.PROGRESS = False
    var = {}
    for f in files:          # the JSON files of a split run: each names the variants it chose
        var.update(chosen_variants(f))
    r = SU.randn
    cases = [
        ("rms_norm_f32", [32768, 4096], lambda: (r((32768, 4096)), r((1, 4096)), r((32768, 4096)), 1e-6)),
        ("rms_norm_bf16", [32768, 4096], lambda: (r((32768, 4096), "bf16"), r((1, 4096), "bf16"),
                                                  r((32768, 4096), "bf16"), 1e-6)),
        ("softmax_bf16", [32768, 4096], lambda: (r((32768, 4096), "bf16"), r((32768, 4096), "bf16"))),
        ("transpose_f32", [8192, 8192], lambda: (r((8192, 8192)), r((8192, 8192)))),
        ("softmax_wide_f32", [4096, 131072], lambda: (r((4096, 131072)), r((4096, 131072)))),
        ("softmax_wide_bf16", [16384, 16384], lambda: (r((16384, 16384), "bf16"), r((16384, 16384), "bf16"))),
        ("rms_norm_cluster_f32", [4096, 131072], lambda: (r((4096, 131072)), r((1, 131072)), r((4096, 131072)), 1e-6)),
        ("rms_norm_wide_bf16", [4096, 131072], lambda: (r((4096, 131072), "bf16"), r((1, 131072), "bf16"),
                                                        r((4096, 131072), "bf16"), 1e-6)),
        ("softmax_cluster_bf16", [4096, 131072], lambda: (r((4096, 131072), "bf16"), r((4096, 131072), "bf16"))),
        ("gemm_f16", [8192, 8192, 8192], lambda: tuple(r((8192, 8192), "f16") for _ in range(3))),
        ("gemm_f16", [4096, 4096, 4096], lambda: tuple(r((4096, 4096), "f16") for _ in range(3))),
        ("attention_bf16", [2, 16, 4096, 64], lambda: tuple(r((8, 4096, 64), "bf16") for _ in range(4)) + (0.125,)),
        ("attention_tc_bf16", [2, 16, 4096, 64], lambda: tuple(r((8, 4096, 64), "bf16") for _ in range(4)) + (0.125,)),
    ]
    for name, shape, mk in cases:
        if want and name not in want:
            continue
        k = getattr(mod, name)
        v = var.get(f"{name}|{shape}") or k.checked.default_tune()
        if name.startswith("attention"):
            v = dict(v, D=64)
        args = [SU.GpuArray(a) if hasattr(a, "data_ptr") else a for a in mk()]
        try:
            k(*args, variant=v)
            torch.cuda.synchronize()
            print(f"profiled {name} {v}: {k.last_run.extra['symbol']} grid {k.last_run.grid}", flush=True)
        except Exception as e:  # report and go on
            print(f"FAILED {name} {v}: {type(e).__name__}: {e}", flush=True)
        del args
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
