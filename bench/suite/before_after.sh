#!/usr/bin/env bash
# Question: Does a change to the code generator or the launch path keep the GPU checks clean, and
# how does it move the suite's times?
# One device call for a change to the code generator or the launch path, from the project root:
#   1. bench/gpu_check.sh (pytest -m gpu, then compute-sanitizer memcheck / racecheck / synccheck),
#      its logs packed into $OUT/check.tgz;
#   2. bench/suite/suite.py --only $WORKLOADS on this tree ("after") and on the tree in $BEFORE (a copy of
#      the last commit, e.g. `git archive HEAD | tar -x -C .gpu/old`, carried with the call) ("before"),
#      on the same GPU, one after the other: $OUT/{after,before}.json and their logs.
# Env: OUT (default out), WORKLOADS (default norms,norms_wide,launch), BEFORE (default .gpu/old),
#      SUITE_FLAGS (default --no-compile-peers: torch eager is the peer; torch.compile costs minutes).
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"
WORKLOADS=${WORKLOADS:-norms,norms_wide,launch}; BEFORE=${BEFORE:-.gpu/old}
SUITE_FLAGS=${SUITE_FLAGS:---no-compile-peers}
export PYTHONUNBUFFERED=1
t0=$(date +%s)
OUT=/tmp/chk BENCH_TIMEOUT=${BENCH_TIMEOUT:-1} bash bench/gpu_check.sh > /tmp/chk_stdout.txt 2>&1
echo "gpu_check rc $? in $(( $(date +%s) - t0 )) s"
cp /tmp/chk_stdout.txt /tmp/chk/ 2>/dev/null; tar -czf "$OUT/check.tgz" -C /tmp chk
grep -E "passed|failed|ERROR SUMMARY|RACECHECK SUMMARY|^exit" /tmp/chk_stdout.txt | tail -12
export PYTHONPATH=/tmp/site:$PWD
for side in after before; do
  t1=$(date +%s)
  if [ $side = before ]; then dir=$BEFORE; else dir=.; fi
  [ -d "$dir" ] || { echo "no $dir"; continue; }
  suite=bench/suite/suite.py; [ -f "$dir/$suite" ] || suite=bench/suite.py   # a "before" tree may predate bench/suite/
  (cd "$dir" && PYTHONPATH=/tmp/site:$PWD TILENB_CACHE_DIR=/tmp/tnb-$side timeout ${SUITE_TIMEOUT:-240} \
     python3 $suite --out /tmp/suite-$side --only "$WORKLOADS" $SUITE_FLAGS > /tmp/suite-$side.out 2>&1)
  echo "suite $side rc $? in $(( $(date +%s) - t1 )) s"
  cp /tmp/suite-$side/*.json "$OUT/$side.json" 2>/dev/null; cp /tmp/suite-$side/suite.log "$OUT/${side}_suite.log" 2>/dev/null
  tail -3 /tmp/suite-$side.out
done
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
try:
    a, b = (json.load(open(f"{out}/{s}.json"))["rows"] for s in ("after", "before"))
except Exception as e:
    print("no comparison:", e); sys.exit()
def key(r): return (r["workload"], str(r.get("shape")), r.get("dtype"), r.get("peer"))
bb = {key(r): r for r in b}
print(f"{'workload':16} {'shape':14} {'dtype':6} {'before':>11} {'after':>11}  peer")
for r in a:
    o = bb.get(key(r), {})
    f = lambda x: "-" if x is None else (f"{x*1e6:9.1f}us")
    print(f"{r['workload']:16} {str(r.get('shape')):14} {str(r.get('dtype')):6} {f(o.get('tilenb_s')):>11} {f(r.get('tilenb_s')):>11}  {r.get('peer')} {f(r.get('peer_s'))}")
PY
