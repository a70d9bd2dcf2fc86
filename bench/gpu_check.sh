#!/usr/bin/env bash
# Question: Do all GPU tests pass, and does compute-sanitizer find nothing in any kernel of the
# CUDA test corpus?
# The CUDA backend's whole GPU check in one command, from the project root on a GPU machine:
#   pytest -m gpu, then compute-sanitizer memcheck, racecheck and synccheck on a script that
#   launches every kernel of the CUDA test corpus once. Logs go to ${OUT:-out}/.
# Needs: python3 with cupy (cupy-cuda12x or 13x), numpy, ml_dtypes, pytest; lark and the notebook
# packages are installed from ./.whl when present (see ../shared/tools/device-wheels).
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TILENB_CACHE_DIR=${TILENB_CACHE_DIR:-/tmp/tilenb-cache}
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; python3 -c "import cupy; print('cupy', cupy.__version__, 'cuda runtime', cupy.cuda.runtime.runtimeGetVersion())"; compute-sanitizer --version | head -2; date -u; } 2>&1 | tee "$OUT/env.txt"
rc=0
timeout ${PYTEST_TIMEOUT:-300} python3 -m pytest -o addopts="" -q -m gpu -p no:cacheprovider tests/ -rs 2>&1 | tee "$OUT/pytest_gpu.txt" | tail -40 || rc=1
for tool in memcheck racecheck synccheck; do
  echo "== compute-sanitizer --tool $tool"
  extra=""
  [ "$tool" = racecheck ] && extra="--racecheck-report all"
  timeout ${SANITIZER_TIMEOUT:-200} compute-sanitizer --tool $tool $extra --show-backtrace no --print-limit 100000 \
    python3 bench/probes/cuda_launch_all.py > "$OUT/sanitizer_$tool.txt" 2>&1
  echo "exit $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed, .* failed|^FAIL" "$OUT/sanitizer_$tool.txt" | tail -8
  echo "reports per kernel:"; grep -oE "at [A-Za-z_0-9]+\+0x" "$OUT/sanitizer_$tool.txt" | sort | uniq -c | sort -rn | head -20
  gzip -f "$OUT/sanitizer_$tool.txt"
done
echo "== timings"; timeout ${BENCH_TIMEOUT:-120} python3 bench/probes/cuda_bench.py 2>&1 | tee "$OUT/bench.txt" | tail -12
exit $rc
