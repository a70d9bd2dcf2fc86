"""Peak figures of the GPUs the timing view compares a launch against, each with its source.

Guarantees: `peak_for(device_name, flops_kind)` returns a dict with `device`, `bytes_per_s`,
`bytes_source`, `copy_bytes_per_s` and `copy_source` (or None), `flops_per_s`, `flops_kind`
and `flops_source`, or None for a device this table does not know (the view then draws no
roofline rather than guess). Units: bytes per second and FLOP per second (not TB/s, TFLOP/s).

Where the numbers come from:
- H200 SXM: NVIDIA H200 Tensor Core GPU datasheet: HBM3e 4.8 TB/s; FP32 67 TFLOP/s; BF16/FP16
  tensor core 1,979 TFLOP/s *with sparsity*, so about 990 TFLOP/s dense; TF32 tensor core
  989 TFLOP/s with sparsity, about 495 dense. A device-to-device copy measured on an H200
  reaches about 4.3 TB/s, the practical ceiling for a streaming kernel.
- H100 SXM: NVIDIA H100 Tensor Core GPU datasheet: HBM3 3.35 TB/s; FP32 67 TFLOP/s; BF16/FP16
  tensor core 1,979 TFLOP/s with sparsity (about 990 dense).
"""
from __future__ import annotations

from typing import Optional

_H200_SHEET = "NVIDIA H200 Tensor Core GPU datasheet"
_H100_SHEET = "NVIDIA H100 Tensor Core GPU datasheet (SXM)"

# kind of arithmetic -> (FLOP/s, how the figure is read from the datasheet)
_TABLE = {
    "H200": {
        "bytes_per_s": 4.8e12,
        "bytes_source": f"{_H200_SHEET}: 4.8 TB/s HBM3e",
        "copy_bytes_per_s": 4.3e12,
        "copy_source": "measured device-to-device copy on an H200, about 4.3 TB/s",
        "flops": {
            "FP32": (67e12, f"{_H200_SHEET}: FP32 67 TFLOPS"),
            "BF16 tensor core (dense)": (989.5e12, f"{_H200_SHEET}: BF16 1,979 TFLOPS with sparsity, half of it dense"),
            "FP16 tensor core (dense)": (989.5e12, f"{_H200_SHEET}: FP16 1,979 TFLOPS with sparsity, half of it dense"),
        },
    },
    "H100": {
        "bytes_per_s": 3.35e12,
        "bytes_source": f"{_H100_SHEET}: 3.35 TB/s HBM3",
        "copy_bytes_per_s": None,
        "copy_source": None,
        "flops": {
            "FP32": (67e12, f"{_H100_SHEET}: FP32 67 TFLOPS"),
            "BF16 tensor core (dense)": (989.5e12, f"{_H100_SHEET}: BF16 1,979 TFLOPS with sparsity, half of it dense"),
            "FP16 tensor core (dense)": (989.5e12, f"{_H100_SHEET}: FP16 1,979 TFLOPS with sparsity, half of it dense"),
        },
    },
}


def peak_for(device_name: Optional[str], flops_kind: str = "FP32") -> Optional[dict]:
    """Peak figures for a device named like "NVIDIA H200" (matched on the model number), for
    arithmetic of `flops_kind` ("FP32", "BF16 tensor core (dense)", "FP16 tensor core (dense)")."""
    if not device_name:
        return None
    for model in ("H200", "H100"):   # H200 first: its name never contains "H100"
        if model in device_name.upper():
            row = _TABLE[model]
            flops, src = row["flops"].get(flops_kind, row["flops"]["FP32"])
            kind = flops_kind if flops_kind in row["flops"] else "FP32"
            return {"device": model, "bytes_per_s": row["bytes_per_s"], "bytes_source": row["bytes_source"],
                    "copy_bytes_per_s": row["copy_bytes_per_s"], "copy_source": row["copy_source"],
                    "flops_per_s": flops, "flops_kind": kind, "flops_source": src}
    return None
