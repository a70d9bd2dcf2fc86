"""The CUDA backend's code generator: typed tile IR -> CUDA C++ source, compiled by NVRTC.

Guarantees: `cuda_source(kir)` returns the CUDA C++ of one kernel variant as text and needs no
GPU and no CUDA installation; `generate(kir)` returns it with what a launch needs
(`KernelSource`: symbol, threads, shared-memory bytes, parameter order). `nvrtc_compile`
compiles such text with NVRTC (through CuPy, or the `nvidia-cuda-nvrtc-cu12` wheel alone).
An IR construct the generator cannot handle raises `tilenb.UnsupportedError` naming the line.

The pipeline (docs/cuda-backend.md, "Where the generator's code lives"): `kernel.generate` makes
the generation state (`context.Gen`, an `emitter.Emitter`), `paths.choose` reads the analysis'
lowering and sets up every path, and the lowering modules write the body, each receiving that
state: `generic/` (every GPU), `mma/` (tensor-core dots), `sm90/` (TMA + wgmma on Hopper).
"""
from __future__ import annotations

from typing import Optional

from .kernel import generate  # noqa: F401
from .values import KernelSource, kernel_symbol  # noqa: F401
from .nvrtc import CudaCompileError, NvrtcUnavailable, nvrtc_available, nvrtc_compile  # noqa: F401


def cuda_source(kir, source_text: Optional[str] = None, line_offset: int = 0, arch=None) -> str:
    """The CUDA C++ of one kernel variant (`kir`: a `tilenb.ir.KernelIR`).

    source_text: the tile-language source, to quote each statement's line in a comment.
    arch: the target, any spelling `tilenb.target.target` accepts (sm_90 in any spelling: GEMM
    loops as TMA + wgmma pipelines, docs/cuda-backend.md); None: the code every target runs.
    Raises UnsupportedError for a construct the CUDA backend cannot compile yet, or an arch
    that names no GPU target."""
    return generate(kir, source_text, line_offset, arch=arch).source
