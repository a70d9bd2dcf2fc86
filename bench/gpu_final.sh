#!/usr/bin/env bash
# The device run of record for a stop (one call, ~5 minutes): every GPU test, compute-sanitizer on
# the cluster kernels and the streamed attention, then the suite groups given in $2.
#   bash bench/gpu_final.sh <commit> <groups>      (with the run tool: carry [".whl"])
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TILENB_CACHE_DIR=/tmp/tc BENCH_COMMIT=$1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/machine.txt
python3 -m pytest -o addopts="" -q -m gpu -p no:cacheprovider tests/ > $OUT/pytest_gpu.txt 2>&1; tail -3 $OUT/pytest_gpu.txt
for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool python3 -m pytest -o addopts="" -q -m gpu -p no:cacheprovider tests/test_cluster.py \
    > $OUT/${tool}_cluster.txt 2>&1; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" $OUT/${tool}_cluster.txt | tail -3
done
compute-sanitizer --tool memcheck python3 bench/attention_sm90.py --shapes 1x2x200 --dims 64,128 \
  --variants 128.128.256,128.64.256,64.128.128 --no-sdpa > $OUT/memcheck_attention.txt 2>&1; tail -2 $OUT/memcheck_attention.txt
python3 bench/suite.py --out $OUT --tag final3 --only $2 --budget 400 2>&1 | grep -E "tilenb|copy ceiling|done in|total" | grep -v "torch.compile\|flash\|Triton\|efficient"
