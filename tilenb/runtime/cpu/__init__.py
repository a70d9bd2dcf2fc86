"""The numpy reference executor, which defines what a tile program computes (docs/spec.md).

`executor.run_cpu` runs one launch on host arrays in place, CTA by CTA (several CTAs of one
uniform path at once); `values` holds the numeric semantics (dtypes, rounding, valid regions of
values), `memory` the tensors, tiles, windows and views, `debug` the race and bounds checks of
a debug launch, and `unwritten` the record of elements a store leaves unwritten, and why.
This package imports nothing at import time: each module is loaded where it is used.
"""
