"""The differential fuzzer of tilenb (tests/fuzz/programs.py): random valid tile-language
programs with their inputs and a numpy oracle, shared by the CPU tests
(tests/e2e/test_fuzz_differential.py) and the GPU script (scripts/fuzz_gpu.py)."""
