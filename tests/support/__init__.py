"""Helpers the tests of several stages share; not tests themselves (pytest collects nothing here).

- `programs`: tile programs used by more than one stage's tests (and by bench/probes).
- `cuda_emulator`: the generated CUDA compiled with g++ and run on the CPU, one OS thread per
  CUDA thread, for checking the generator's output without a GPU.
- `fake_cupy`: a stand-in for CuPy and the GPU, for the host side of a CUDA launch.
- `windows`: numpy references of window reads and stores (values, valid masks, flat()'s run).
- `notebooks`: the notebooks' sources split as notebooks/build.py splits them, a tutorial's
  `%%tilekernel` cells (lines as the notebook numbers them), and the text of a saved output.
- `sass_widths`: NVRTC cubins disassembled with nvdisasm, each memory instruction's width read
  back against the analysis.

Imported as `from support import ...`: pyproject.toml puts tests/ on pytest's sys.path
(`pythonpath`), which also makes `fuzz` (the differential fuzzer's program generator) importable.
"""
