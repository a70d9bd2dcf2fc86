#!/usr/bin/env bash
# one device run: cluster GPU tests, then the long-row suite group (temporary helper script)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TILENB_CACHE_DIR=/tmp/tc BENCH_COMMIT=$1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -m pytest -o addopts="" -q -m gpu -p no:cacheprovider tests/test_cluster.py 2>&1 | tail -15
python3 bench/suite.py --out $OUT --tag cluster --only norms_wide --budget 300 2>&1 | tail -40
