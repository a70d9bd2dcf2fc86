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
                           "TILENB_STORE_EVICT_FIRST": "1"})
    assert sw == Switches(async_copy=False, wgmma_ss=False, gemm_stages=3, stream_stages=2, stream_ahead=1,
                          stream_defer=False, store_evict_first=True)


def test_a_count_that_is_not_a_number_names_the_variable():
    with pytest.raises(ValueError, match="TILENB_GEMM_STAGES"):
        from_environment({"TILENB_GEMM_STAGES": "four"})
