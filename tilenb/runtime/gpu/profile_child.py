"""The process Nsight Compute profiles: `python -m tilenb.runtime.gpu.profile_child WORKDIR`.

It reads the job `tilenb.runtime.gpu.profile.profile` wrote into WORKDIR (job.json: the program's
source, the kernel, the variant, the grid; args.npz: the arguments), compiles the profiled variant
(the generated CUDA with `#line` directives naming tile-language lines), launches it once and
saves the outputs back into WORKDIR. It is a module of its own because it compiles a whole program
(`tilenb.api.compile`): the profiler the API reaches must not import the API back.
"""
import json
import sys
from pathlib import Path

import numpy as np

from . import ncu as N
from .profile import _load_args

# ---- the subprocess ncu runs -----------------------------------------------------------------
def child(work: Path) -> int:
    """Compile the profiled variant and launch it once with the saved arguments; save the
    outputs (run by ncu: `python -m tilenb.runtime.gpu.profile_child WORKDIR`)."""
    from ...api import compile as compile_program
    from ...codegen import nvrtc
    from . import cuda as C
    from ..checks import prepare
    job = json.loads((work / "job.json").read_text())
    mod = compile_program(job["source"], backend="cuda", filename=str(job["filename"]), line_offset=int(job["line_offset"]))
    kernel = getattr(mod, job["kernel"])
    args = _load_args(work / "args.npz", job["dtypes"])
    ch = prepare(kernel, tuple(job["grid"]), args, variant=job["variant"] or None).chosen
    tgt = C.device_target()
    ks = C.kernel_source(kernel, ch.kir, tgt)
    files = (str(work / N.TILE_FILE), str(work / N.CUDA_FILE), str(work / N.BARRIER_FILE))
    lined = N.lined_source(ks.source, job["line_offset"], *files)
    cubin = nvrtc.nvrtc_compile(lined.text, C.compile_target(ks, tgt), use_cache=False)
    path = work / "profiled.cubin"
    path.write_bytes(cubin)
    cp = C._cupy()
    fn = cp.RawModule(path=str(path)).get_function(ks.symbol)
    from ..checks import written_tensors
    da = C._device_args(ch.kir, ch.bound, written_tensors(ch.kir))
    C._launch(fn, ks, ch.grid, da)
    cp.cuda.Device().synchronize()
    C._copy_back(da)
    outs = {}
    for i in job["written"]:
        a = args[i]
        outs[f"a{i}"] = a.view(np.uint16) if a.dtype.name == "bfloat16" else a
    np.savez(work / "outputs.npz", **outs)
    return 0


if __name__ == "__main__":
    raise SystemExit(child(Path(sys.argv[1])))
