#!/usr/bin/env bash
# The device checks of stop 14 (one call): every GPU test, compute-sanitizer on the asynchronous
# copies, the window reductions and the cluster kernels.   bash bench/gpu_record5.sh <commit>   (run tool: carry [".whl"])
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TILENB_CACHE_DIR=/tmp/tc BENCH_COMMIT=$1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/machine.txt
python3 -m pytest -o addopts="" -q -m gpu -p no:cacheprovider tests/ > $OUT/pytest_gpu.txt 2>&1; tail -3 $OUT/pytest_gpu.txt
for tool in memcheck racecheck synccheck; do
  compute-sanitizer --tool $tool python3 -m pytest -o addopts="" -q -m gpu -p no:cacheprovider tests/test_async_copy.py tests/test_window_reduce.py \
    > $OUT/${tool}_async_copy.txt 2>&1; echo "$tool async copy + window reductions:"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" $OUT/${tool}_async_copy.txt | tail -3
done
compute-sanitizer --tool memcheck python3 -m pytest -o addopts="" -q -m gpu -p no:cacheprovider tests/test_cluster.py \
  > $OUT/memcheck_cluster.txt 2>&1; echo "memcheck cluster:"; grep -E "ERROR SUMMARY|passed|failed" $OUT/memcheck_cluster.txt | tail -2
