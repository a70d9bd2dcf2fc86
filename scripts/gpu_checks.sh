#!/usr/bin/env bash
# The device checks of issue 16 in one call, on a GPU machine whose python3 has CuPy (the
# workplace's H200 image), from the project root; the Python wheels the image lacks travel in
# .whl (../shared/tools/device-wheels). Writes its logs under $OUT (default out/gpu_checks).
#   bash scripts/gpu_checks.sh [tests|fuzz|sanitizers|ncu|profile|causal|all]
# causal: causal attention on each lowering (scripts/causal_checks.py), plain and under
# compute-sanitizer memcheck, racecheck and synccheck.
# ncu: Nsight Compute's sectors and wavefronts of the memory-bound suite kernels against the
# analysis (bench/probes/ncu_vs_analysis.py); profile: a real capture of the pages
# kernel.profile reads (scripts/capture_ncu_fixture.py), then the profile tests on it.
set -u
OUT=${OUT:-out/gpu_checks}; mkdir -p "$OUT"
what=${1:-all}
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TILENB_CACHE_DIR=/tmp/tnb-cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/machine.txt"
git log -1 --format=%h 2>/dev/null | tee -a "$OUT/machine.txt"
t0=$(date +%s)
if [ "$what" = tests ] || [ "$what" = all ]; then
  timeout ${TESTS_TIMEOUT:-300} python3 -m pytest -o addopts="" -q -m gpu -p no:cacheprovider --ignore=tests/browser tests/ \
    > "$OUT/pytest_gpu.txt" 2>&1; echo "pytest -m gpu rc $? in $(( $(date +%s) - t0 )) s"; tail -4 "$OUT/pytest_gpu.txt"
fi
if [ "$what" = fuzz ] || [ "$what" = all ]; then
  t1=$(date +%s)
  timeout ${FUZZ_TIMEOUT:-300} python3 scripts/fuzz_gpu.py --programs ${PROGRAMS:-2000} --workers 16 --out /tmp/fuzz > "$OUT/fuzz.txt" 2>&1
  echo "fuzz rc $? in $(( $(date +%s) - t1 )) s"; tail -25 "$OUT/fuzz.txt"
  tar -czf "$OUT/fuzz_fails.tgz" -C /tmp fuzz 2>/dev/null
fi
if [ "$what" = sanitizers ] || [ "$what" = all ]; then
  for tool in memcheck racecheck synccheck; do
    t1=$(date +%s)
    timeout ${SAN_TIMEOUT:-150} python3 scripts/fuzz_gpu.py --programs ${SAN_PROGRAMS:-300} --sanitizer $tool --out /tmp/fuzz_$tool \
      > "$OUT/fuzz_$tool.txt" 2>&1
    echo "$tool rc $? in $(( $(date +%s) - t1 )) s"; tail -6 "$OUT/fuzz_$tool.txt"
  done
  tar -czf "$OUT/sanitizer_logs.tgz" -C /tmp fuzz_memcheck fuzz_racecheck fuzz_synccheck 2>/dev/null
fi
if [ "$what" = causal ] || [ "$what" = all ]; then
  SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  t1=$(date +%s)
  timeout ${CAUSAL_TIMEOUT:-300} python3 scripts/causal_checks.py > "$OUT/causal.txt" 2>&1
  echo "causal rc $? in $(( $(date +%s) - t1 )) s"; tail -1 "$OUT/causal.txt"
  for tool in memcheck racecheck synccheck; do
    t1=$(date +%s)
    timeout ${SAN_TIMEOUT:-300} "$SAN" --tool $tool --error-exitcode 9 --print-limit 100 python3 scripts/causal_checks.py \
      > "$OUT/causal_$tool.txt" 2>&1
    echo "causal $tool rc $? in $(( $(date +%s) - t1 )) s"; grep -h "ERROR SUMMARY\|causal checks" "$OUT/causal_$tool.txt" | tail -2
  done
fi
if [ "$what" = ncu ] || [ "$what" = all ]; then
  t1=$(date +%s)
  cmd=$(python3 bench/probes/ncu_vs_analysis.py --ncu-command | sed 's#[^ ]*bin/python#python3#; s# > [^ ]*$##')
  timeout ${NCU_TIMEOUT:-240} bash -c "$cmd" > "$OUT/ncu_raw.csv" 2> "$OUT/ncu_stderr.txt"
  echo "ncu rc $? in $(( $(date +%s) - t1 )) s"
  python3 bench/probes/ncu_vs_analysis.py --compare "$OUT/ncu_raw.csv" > "$OUT/ncu_vs_analysis.md" 2>&1
  tail -3 "$OUT/ncu_vs_analysis.md"
fi
if [ "$what" = profile ] || [ "$what" = all ]; then
  t1=$(date +%s)
  timeout ${PROFILE_TIMEOUT:-180} python3 scripts/capture_ncu_fixture.py /tmp/ncu_h200 > "$OUT/profile_capture.txt" 2>&1
  echo "capture rc $? in $(( $(date +%s) - t1 )) s"; tail -5 "$OUT/profile_capture.txt"
  mkdir -p tests/runtime/data/ncu_h200
  cp /tmp/ncu_h200/raw.csv /tmp/ncu_h200/source.csv /tmp/ncu_h200/job.json /tmp/ncu_h200/README.md tests/runtime/data/ncu_h200/ 2>/dev/null
  timeout 180 python3 -m pytest -o addopts="" -q -p no:cacheprovider -rs tests/runtime/test_profile.py tests/notebook/test_profile_views.py \
    > "$OUT/profile_tests.txt" 2>&1; echo "profile tests rc $?"; tail -3 "$OUT/profile_tests.txt"
  tar -czf "$OUT/ncu_h200.tgz" -C /tmp ncu_h200 2>/dev/null
fi
