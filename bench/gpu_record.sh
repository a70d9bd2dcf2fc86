#!/usr/bin/env bash
# one device run for the record: GPU tests of what changed, then the suite groups it touches
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TILENB_CACHE_DIR=/tmp/tc BENCH_COMMIT=$1
python3 -m pytest -o addopts="" -q -m gpu -p no:cacheprovider tests/test_cluster.py tests/test_streamed_sm90.py tests/test_mma.py 2>&1 | tail -4 | tee $OUT/pytest_gpu.txt
python3 bench/suite.py --out $OUT --tag $2 --only $3 --budget 400 2>&1 | grep -E "tilenb|copy ceiling|done in|total" | grep -v "torch.compile\|flash\|Triton" 
