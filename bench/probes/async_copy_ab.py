"""Question: Are asynchronous tile copies (cp.async) faster than register-staged copies on the suite's
row kernels?

A/B of the asynchronous tile copy (`tnb_cpa`, cp.async) against register-staged copies, in one
process, on the suite's row kernels: for each kernel and shape, both forms are generated (the
switch `tilenb.switches.SWITCHES.async_copy`, TILENB_ASYNC_COPY), each autotuned on its own, checked against torch,
then timed in alternating rounds (median of each form's rounds). Prints ms and B/A.

    python bench/probes/async_copy_ab.py [--rounds 5] [--only REGEX]     # on a GPU (CuPy + torch)
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))              # tilenb
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "suite"))   # the suite's launch helpers
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

CASES = [(op, form, dt, shape)
         for shape, forms in (((4096, 131072), ("cluster", "wide")), ((16384, 16384), ("",)), ((32768, 4096), ("",)))
         for op in ("rms_norm", "layer_norm", "softmax") for form in forms for dt in ("f32", "bf16")]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default="")
    a = ap.parse_args(argv)
    import torch
    import tilenb
    from tilenb.switches import SWITCHES
    import tilenb.runtime.gpu.cuda as tc
    import suite as SU
    from tilenb.examples import suite_kernels as SK
    SU.S.torch = torch
    tc.PROGRESS = False
    text = SK.program()
    mods = {}
    for flag in (False, True):     # a different text per form: the generated-source cache is keyed by it
        mods[flag] = tilenb.compile(text + ("\n// async copies\n" if flag else ""), backend="cuda")
    F = torch.nn.functional
    print(f"{'kernel':<24} {'shape':<16} {'sync ms':>8} {'async ms':>9} {'async/sync':>10}  variants")
    for op, form, dt, (M, N) in CASES:
        kn = f"{op}_{form + '_' if form else ''}{dt}"
        if a.only and not re.search(a.only, f"{kn} {M}x{N}"):
            continue
        x, w, b = SU.randn((M, N), dt), SU.randn((1, N), dt), SU.randn((1, N), dt)
        y = torch.empty_like(x)
        args = {"rms_norm": (x, w, y, 1e-6), "layer_norm": (x, w, b, y, 1e-5), "softmax": (x, y)}[op]
        ref = {"rms_norm": lambda: F.rms_norm(x, (N,), w.view(N), 1e-6),
               "layer_norm": lambda: F.layer_norm(x, (N,), w.view(N), b.view(N), 1e-5),
               "softmax": lambda: torch.softmax(x, dim=-1)}[op]()
        go, var = {}, {}
        try:
            for flag in (False, True):
                SWITCHES.async_copy = flag
                go[flag], var[flag], _ = SU.tl_launch(getattr(mods[flag], kn), None, args, y)
                err = SU.rel_err(y, ref)
                assert err <= SU.tol_for(dt, "reduce"), f"{kn} async={flag}: rel err {err}"
        except Exception as e:  # one failure is one line
            print(f"{kn:<24} {M}x{N:<10} FAILED {type(e).__name__}: {str(e)[:200]}", flush=True)
            continue
        t = {False: [], True: []}
        for _ in range(a.rounds):
            for flag in (False, True):
                t[flag].append(SU.time_gpu(go[flag]))
        s, asy = statistics.median(t[False]), statistics.median(t[True])
        vs = " | ".join(",".join(f"{k}{v}" for k, v in sorted(var[f].items())) for f in (False, True))
        print(f"{kn:<24} {M}x{N:<10} {s * 1e3:8.3f} {asy * 1e3:9.3f} {asy / s:10.3f}  {vs}", flush=True)
        del x, w, b, y, args, ref, go
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
