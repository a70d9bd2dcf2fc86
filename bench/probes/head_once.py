"""Question: What does Nsight Compute see in one launch of a long-row head kernel at a given head size
and CTA size?

Launch one of the suite's long-row head kernels once, at 4096 x 131072, with a given head size
and CTA size (for Nsight Compute):   python bench/probes/head_once.py NAME K NT"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))              # tilenb
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "suite"))   # the suite's launch helpers
import torch  # noqa: E402

import suite as SU  # noqa: E402
from tilenb.examples import suite_kernels as SK  # noqa: E402
import tilenb  # noqa: E402

name, K, NT = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
SU.S.torch = torch
dt = "bf16" if name.endswith("bf16") else "f32"
mod = tilenb.compile(SK.program(), backend="cuda")
x, g, b, y = (SU.randn(s, dt) for s in ((4096, 131072), (1, 131072), (1, 131072), (4096, 131072)))
arrays = {"rms": (x, g, y), "lay": (x, g, b, y), "sof": (x, y)}[name[:3]]
scalars = () if name.startswith("softmax") else (1e-6,)
getattr(mod, name)(*(SU.GpuArray(a) for a in arrays), *scalars, variant={"K": K, "D": 131072, "NT": NT})
torch.cuda.synchronize()
print("ran", name, K, NT)
