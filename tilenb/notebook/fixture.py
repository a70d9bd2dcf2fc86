"""A hand-made analysis record of the rms_norm kernel, in the shape `Analysis.to_json()` returns.

Guarantees: `RMS_NORM_SOURCE` (the rms_norm kernel of tilenb/examples/seed_kernels.tile) compiles
with `tilenb.compile`; `rms_norm_analysis()` returns a fresh dict with every key the widgets read ("kernel", "threads", "footprint", "budget", "tiles",
"ruler", "barriers", "copies"), with lines counted in `RMS_NORM_SOURCE` (line 1 = its first
line). The numbers follow the documented rules (256 threads, 4-wide f32 vector copies, 32-byte
sectors, 128-byte shared-memory wavefronts) but are written here, not computed by
`tilenb.analysis`: the widget tests use this record so they do not depend on the analyses, and
it renders the widgets for anyone without a compiled kernel (`tilenb.notebook.demo()`).
"""
from __future__ import annotations

from ..examples import kernel_source
from ..target import STATIC_SMEM

# the rms_norm kernel of the language documents, as shipped (line 1 = its "@autotune" line)
RMS_NORM_SOURCE = kernel_source("rms_norm")

_THREADS = 256
_VEC = 4            # f32 elements per 16-byte vector access


def _runs(rows: int, cols: int):
    """Vector i of the row-major tile goes to thread i % 256: [thread, row, col, length]."""
    out = []
    per_row = cols // _VEC
    for i in range(rows * per_row):
        out.append([i % _THREADS, i // per_row, (i % per_row) * _VEC, _VEC])
    return out


def _copy(line, direction, tensor, tile, rows, cols):
    runs = _runs(rows, cols)
    vectors = len(runs)
    warps = []
    nwarps = _THREADS // 32
    for w in range(nwarps):
        mine = [r for r in runs if r[0] // 32 == w]
        if not mine:
            continue
        # each warp-wide vector access covers 32 * 16 B = 512 B: 16 sectors, 4 wavefronts
        accesses = (len(mine) + 31) // 32
        sectors = sum(min(32, len(mine) - 32 * a) * 16 // 32 for a in range(accesses))
        wavefronts = sum(max(1, min(32, len(mine) - 32 * a) * 16 // 128) for a in range(accesses))
        warps.append({"warp": w, "sectors": sectors, "ideal_sectors": sectors,
                      "wavefronts": wavefronts, "ideal_wavefronts": wavefronts})
    return {
        "line": line, "direction": direction, "tensor": tensor, "tile": tile,
        "shape": [rows, cols], "vector_width": _VEC, "runs": runs,
        "sectors": sum(w["sectors"] for w in warps),
        "ideal_sectors": vectors * 16 // 32,
        "wavefronts": sum(w["wavefronts"] for w in warps),
        "ideal_wavefronts": sum(w["ideal_wavefronts"] for w in warps),
        "warps": warps, "is_view": False, "fix": None,
    }


def rms_norm_analysis() -> dict:
    """The analysis record of `rms_norm` in `RMS_NORM_SOURCE` (a new dict on each call)."""
    tiles = [
        {"name": "x", "dtype": "f32", "shape": [8, 256], "bytes": 8192, "offset": 0,
         "space": "shared", "first_line": 5, "last_line": 9},
        {"name": "ss", "dtype": "f32", "shape": [8, 1], "bytes": 32, "offset": 8192,
         "space": "shared", "first_line": 6, "last_line": 7},
        {"name": "inv", "dtype": "f32", "shape": [8, 1], "bytes": 32, "offset": 9216,
         "space": "shared", "first_line": 7, "last_line": 9},
        {"name": "g", "dtype": "f32", "shape": [1, 256], "bytes": 1024, "offset": 8192,
         "space": "shared", "first_line": 8, "last_line": 9},
    ]
    live = {4: [], 5: ["x"], 6: ["x", "ss"], 7: ["x", "ss", "inv"], 8: ["x", "inv", "g"],
            9: ["x", "inv", "g"]}
    by_name = {t["name"]: t for t in tiles}
    ruler = [{"line": line, "tiles": [{"name": n, "offset": by_name[n]["offset"],
                                       "bytes": by_name[n]["bytes"]} for n in names]}
             for line, names in live.items()]
    barriers = [
        {"line": 6, "position": 2, "where": "before", "tile": "x",
         "reason": "rowsum reads rows of x that other threads copied in"},
        {"line": 7, "position": 3, "where": "before", "tile": "ss",
         "reason": "ss was written one element per row by the reduction; every thread reads it"},
        {"line": 9, "position": 5, "where": "before", "tile": "g",
         "reason": "the store reads g and inv at a different vector width than they were written"},
    ]
    copies = [
        _copy(5, "load", "X", "x", 8, 256),
        _copy(8, "load", "G", "g", 1, 256),
        _copy(9, "store", "Y", "x", 8, 256),
    ]
    return {"kernel": "rms_norm", "threads": _THREADS, "footprint": 9248, "budget": STATIC_SMEM,
            "tiles": tiles, "ruler": ruler, "barriers": barriers, "copies": copies}
