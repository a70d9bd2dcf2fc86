"""The debugging and experiment switches: the only environment variables that change generated code.

Each switch turns one choice of the analysis' lowering or of the CUDA generator off or pins it,
so that a measurement can compare a kernel with and without it (docs/cuda-backend.md,
"Debugging and experiment switches"). Unset, every switch keeps the default path; the default
is what the tests, the corpus of generated CUDA and the benchmarks' records describe.

    TILENB_ASYNC_COPY=0     copies into whole shared tiles stay register-staged (no cp.async)
    TILENB_WGMMA_SS=0       a shared A operand of a streamed wgmma goes through ldmatrix and
                            registers (RS) instead of a shared-memory descriptor (SS)
    TILENB_GEMM_STAGES=n    a TMA + wgmma GEMM ring has at most n stages (at least 2)
    TILENB_STREAM_STAGES=n  a streamed-attention ring has n stages (where they fit)
    TILENB_STREAM_AHEAD=n   a streamed ring copies n turns ahead (1 .. stages - 1)
    TILENB_STREAM_DEFER=0   a streamed loop waits for every wgmma product in its own turn
    TILENB_STREAM_PINGPONG=0  the two warpgroups of a streamed-attention CTA never take turns at
                            the tensor cores (by default, 1, they take turns through a pair of
                            named barriers where the analysis finds it safe and paying:
                            `Ring.pingpong`); 2: wherever it is safe, paying or not (tests, probes)
    TILENB_BATCH_BYTES=n    a thread of a vector statement loads up to n bytes of vectors (and up to
                            8 * n / 128 chunks) before it computes any (the default: 128 bytes)
    TILENB_STORE_EVICT_FIRST=1  vector stores into a tensor the kernel never reads carry L2
                            evict_first in every kernel without a dot (by default only in
                            kernels that re-read a tensor: codegen/cache_hints.py)
    TILENB_GEMM_TMA_STORE=1 a wgmma accumulator's staged store leaves shared memory by TMA
                            (bulk tensor store, one thread) where the analysis lets it
                            (analysis/gemm_loops.plan_epilogue); threads store elsewhere
    TILENB_GEMM_WG_EPILOGUE=1  each warpgroup stages and stores its own part of a wgmma
                            accumulator's tile, synchronised by a named barrier of its 128
                            threads instead of CTA-wide barriers
    TILENB_GEMM_FULL_STAGE=0   a wgmma accumulator's staged store whose value reads only
                            registers tests each element's valid region as it stages it (by
                            default every element is staged without a test, 2-byte elements by
                            stmatrix: 1.5-3.1% faster at 4096³ on the H200,
                            bench/results/h200_gemm_epilogue.txt)
    TILENB_GEMM_LEAN_SYNC=1 a GEMM pipeline that nothing before it in the kernel touches memory
                            for starts without its entry barrier and proxy fence, and a staged
                            store right after its GEMM loop without its first barrier

Guarantees: the environment is read once, at import, into `SWITCHES`; every reader (the
analysis' `lowering` and the code generator) reads its field of that one object when it
decides, so a test or a probe may set a field for one generation (`monkeypatch.setattr`). A
value that is not an integer where one is expected raises `ValueError` naming the variable.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping


@dataclass
class Switches:
    """The switches' values (see the module doc); 0 for a count means "the analysis decides"."""
    async_copy: bool = True
    wgmma_ss: bool = True
    gemm_stages: int = 0
    stream_stages: int = 0
    stream_ahead: int = 0
    stream_defer: bool = True
    stream_pingpong: int = 1          # 0 never, 1 where safe and paying, 2 wherever safe
    store_evict_first: bool = False
    batch_bytes: int = 0
    gemm_tma_store: bool = False
    gemm_wg_epilogue: bool = False
    gemm_full_stage: bool = True
    gemm_lean_sync: bool = False


def _count(env: Mapping[str, str], name: str) -> int:
    text = env.get(name, "0") or "0"
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name}={text!r}: expected a whole number of stages or turns") from None


def from_environment(env: Mapping[str, str] = os.environ) -> Switches:
    """The switches that `env` (the process environment by default) sets."""
    return Switches(async_copy=env.get("TILENB_ASYNC_COPY", "1") != "0",
                    wgmma_ss=env.get("TILENB_WGMMA_SS", "1") != "0",
                    gemm_stages=_count(env, "TILENB_GEMM_STAGES"),
                    stream_stages=_count(env, "TILENB_STREAM_STAGES"),
                    stream_ahead=_count(env, "TILENB_STREAM_AHEAD"),
                    stream_defer=env.get("TILENB_STREAM_DEFER", "1") != "0",
                    stream_pingpong=_count(env, "TILENB_STREAM_PINGPONG") if env.get("TILENB_STREAM_PINGPONG") else 1,
                    store_evict_first=env.get("TILENB_STORE_EVICT_FIRST", "0") not in ("", "0"),
                    batch_bytes=_count(env, "TILENB_BATCH_BYTES"),
                    gemm_tma_store=env.get("TILENB_GEMM_TMA_STORE", "0") not in ("", "0"),
                    gemm_wg_epilogue=env.get("TILENB_GEMM_WG_EPILOGUE", "0") not in ("", "0"),
                    gemm_full_stage=env.get("TILENB_GEMM_FULL_STAGE", "1") != "0",
                    gemm_lean_sync=env.get("TILENB_GEMM_LEAN_SYNC", "0") not in ("", "0"))


SWITCHES = from_environment()
