"""The debugging switches (tilenb.switches): parsed from an environment, and the only way an
environment variable reaches generated code (docs/cuda-backend.md)."""
from __future__ import annotations

import pytest

from tilenb.switches import Switches, from_environment


def test_an_empty_environment_keeps_every_default_path():
    assert from_environment({}) == Switches()


def test_each_variable_sets_its_field():
    sw = from_environment({"TILENB_ASYNC_COPY": "0", "TILENB_WGMMA_SS": "0", "TILENB_GEMM_STAGES": "3",
                           "TILENB_STREAM_STAGES": "2", "TILENB_STREAM_AHEAD": "1", "TILENB_STREAM_DEFER": "0",
                           "TILENB_STREAM_PINGPONG": "2",
                           "TILENB_STORE_EVICT_FIRST": "1", "TILENB_BATCH_BYTES": "256",
                           "TILENB_GEMM_TMA_STORE": "1", "TILENB_GEMM_WG_EPILOGUE": "1", "TILENB_GEMM_FULL_STAGE": "1",
                           "TILENB_GEMM_LEAN_SYNC": "1"})
    assert sw == Switches(async_copy=False, wgmma_ss=False, gemm_stages=3, stream_stages=2, stream_ahead=1,
                          stream_defer=False, stream_pingpong=2, store_evict_first=True, batch_bytes=256,
                          gemm_tma_store=True, gemm_wg_epilogue=True, gemm_full_stage=True, gemm_lean_sync=True)
    assert from_environment({"TILENB_GEMM_TMA_STORE": "0", "TILENB_GEMM_WG_EPILOGUE": ""}) == Switches()


def test_pingpong_is_on_where_it_pays_unless_turned_off():
    assert from_environment({}).stream_pingpong == 1
    assert from_environment({"TILENB_STREAM_PINGPONG": "0"}).stream_pingpong == 0
    assert from_environment({"TILENB_STREAM_PINGPONG": ""}).stream_pingpong == 1


def test_a_count_that_is_not_a_number_names_the_variable():
    with pytest.raises(ValueError, match="TILENB_GEMM_STAGES"):
        from_environment({"TILENB_GEMM_STAGES": "four"})


LN_SLICE = """
@launch(128)
@dynshared
@grid(M)
kernel ln(X: tensor<f32>[M, 8192], W: tensor<f32>[1, 8192], B: tensor<f32>[1, 8192], Y: tensor<f32>[M, 8192]) {
  let r = ctx.block.x
  var x = X[r :+ 1, :]
  let mean = rowsum(x) / 8192.0
  Y[r :+ 1, :] = (x - mean) * W[0 :+ 1, :] + B[0 :+ 1, :]
}
"""


def test_batch_bytes_widens_the_register_batch_and_keeps_the_copy_asynchronous(monkeypatch):
    # the store reads three 16-byte vectors a chunk (x, W, B): 2 chunks a batch by default (128
    # bytes), 5 -> 4 (a divisor of the thread's 16 chunks) with TILENB_BATCH_BYTES=256; the copy of
    # the row into x stays a cp.async copy either way
    import re
    import tilenb
    from tilenb.switches import SWITCHES

    def batches(text):
        src = tilenb.compile(text, backend="cpu").ln.cuda_source(arch="sm_90")
        return re.findall(r"each thread loads (\d+) of its chunks", src), src.count("tnb_cpa<16>")
    assert batches(LN_SLICE) == (["2"], 1)
    monkeypatch.setattr(SWITCHES, "batch_bytes", 256)
    assert batches(LN_SLICE + "\n// batch 256\n") == (["4"], 1)
