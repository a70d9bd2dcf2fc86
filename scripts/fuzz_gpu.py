#!/usr/bin/env python3
"""The differential fuzzer's GPU half: generated programs (tests/fuzz/programs.py) on the CUDA
backend against the CPU executor, on many worker processes, surviving faults.

    python scripts/fuzz_gpu.py --programs 2000 --workers 16 --out out/fuzz
    python scripts/fuzz_gpu.py --programs 300 --sanitizer memcheck --out out/fuzz_memcheck

What it guarantees:
- program i of --seed is the same program on every machine (text, inputs, grid), so a failure
  reproduces anywhere; every failing program is written to --out as a standalone script
  (fail_<seed>_<i>.py: its source, inputs, and a CPU-vs-CUDA run) with what went wrong
  (fail_<seed>_<i>.txt);
- each program runs in a worker process with its own CUDA context; a worker whose program
  faulted (a sticky CUDA error), crashed or ran past --timeout is replaced, and the run goes
  on with the next program;
- it prints, and writes to --out/summary.json, the counts of programs by outcome (ok, mismatch,
  fault, internal_error, compile_error, unsupported, check_error, oracle_error), for the
  programs that touch no known bug and for those that do (tests/fuzz/FINDINGS.md), and a
  table per feature;
- with --sanitizer memcheck|racecheck|synccheck, the programs run in batches under
  compute-sanitizer (several batches at once, a batch restarted after the program where it
  died); errors are counted per program from the kernel names in the sanitizer's log
  (kernel fz<seed>_<i> is program i).
Exit status: 0 when no program without a known bug had a mismatch, fault, internal error,
compile error, check error or oracle error (and, under a sanitizer, no sanitizer error); 1
otherwise; 2 for bad usage.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

BAD = ("mismatch", "fault", "internal_error", "compile_error", "check_error", "oracle_error")


# ---- one program, in a worker --------------------------------------------------------------
def run_one(seed: int, index: int, backend: str = "cuda") -> dict:
    if backend == "selftest":      # the pool's own test: ok, a crash, a fault, a hang, by index % 4
        kind = index % 4
        if kind == 1:
            os._exit(11)
        if kind == 3:
            time.sleep(3600)
        return dict(index=index, status="fault" if kind == 2 else "ok", stage="selftest", line="", features=["selftest"],
                    known=[], seconds=0.0)
    from fuzz import backends as B
    from fuzz import programs as P
    t0 = time.time()
    try:
        prog = P.program(seed, index)
    except Exception as e:  # noqa: BLE001 - a generator bug, reported as such
        return dict(index=index, status="oracle_error", stage="generate", line=f"{type(e).__name__}: {e}",
                    features=[], known=[], seconds=time.time() - t0)
    if backend == "emulate":       # the same pipeline without a GPU: the C++ emulator of the CUDA
        work = Path(os.environ.get("TMPDIR", "/tmp")) / f"tilenb-fuzz-emu-{os.getpid()}"
        r = B.check_emulated(prog, work)
    else:
        r = B.check_cuda(prog)
    return dict(index=index, status=r.status, stage=r.stage, line=r.line()[:4000], detail=r.detail[:4000],
                features=sorted(prog.features), known=prog.known, seconds=round(time.time() - t0, 3))


def worker_main(conn, seed: int, backend: str = "cuda"):
    """A worker: runs the indices it is sent, answers each with its result; exits after a fault
    (the CUDA context is gone) so that the parent starts a fresh one."""
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    while True:
        try:
            index = conn.recv()
        except EOFError:
            return
        if index is None:
            return
        res = run_one(seed, index, backend)
        conn.send(res)
        if res["status"] == "fault":
            return


# ---- the pool of workers ------------------------------------------------------------------
def run_pool(seed, indices, workers, timeout, on_result, backend="cuda"):
    import multiprocessing as mp
    from multiprocessing.connection import wait
    ctx = mp.get_context("spawn")
    todo = list(indices)[::-1]
    slots = {}          # conn -> [process, index or None, started]

    def start():
        a, b = ctx.Pipe()
        p = ctx.Process(target=worker_main, args=(b, seed, backend), daemon=True)
        p.start()
        b.close()
        slots[a] = [p, None, 0.0]

    for _ in range(min(workers, len(todo))):
        start()
    while slots:
        for conn, slot in list(slots.items()):
            if slot[1] is None:
                if todo:
                    slot[1], slot[2] = todo.pop(), time.time()
                    conn.send(slot[1])
                else:
                    conn.send(None)
                    slot[0].join(5)
                    del slots[conn]
        if not slots:
            break
        ready = wait(list(slots), timeout=1.0)
        for conn in ready:
            proc, index, _ = slots[conn]
            try:
                res = conn.recv()
            except (EOFError, OSError):
                proc.join(1)
                res = dict(index=index, status="fault", stage="worker",
                           line=f"the worker died (exit code {proc.exitcode}) running this program",
                           features=[], known=[], seconds=0.0)
                del slots[conn]
                on_result(res)
                if todo or any(s[1] is not None for s in slots.values()):
                    start()
                continue
            on_result(res)
            slots[conn][1] = None
            if res["status"] == "fault":
                proc.join(10)
                del slots[conn]
                if todo:
                    start()
        now = time.time()
        for conn, (proc, index, started) in list(slots.items()):
            if index is not None and now - started > timeout:
                proc.kill()
                proc.join(5)
                del slots[conn]
                on_result(dict(index=index, status="fault", stage="timeout",
                               line=f"ran past {timeout} s (a hang?)", features=[], known=[], seconds=timeout))
                if todo:
                    start()


# ---- reporting ------------------------------------------------------------------------------
def _fill_features(res: dict, seed: int):
    """Features and known labels for results that lost them (a worker that died)."""
    if not res.get("features"):
        from fuzz import programs as P
        try:
            prog = P.program(seed, res["index"])
            res["features"], res["known"] = sorted(prog.features), prog.known
        except Exception:  # noqa: BLE001
            pass


def save_failure(out: Path, seed: int, res: dict, extra: str = ""):
    from fuzz import programs as P
    prog = P.program(seed, res["index"])
    stem = out / f"fail_{seed}_{res['index']}"
    note = f"{res['status']} at {res.get('stage', '')}: {res.get('line', '')[:600]}"
    stem.with_suffix(".py").write_text(prog.reproducer(note))
    stem.with_suffix(".txt").write_text(
        f"program {seed}:{res['index']}\nstatus: {res['status']}\nstage: {res.get('stage')}\n"
        f"known bugs touched: {', '.join(res.get('known') or []) or 'none'}\n"
        f"features: {', '.join(res.get('features') or [])}\n\n{res.get('line', '')}\n\n{res.get('detail', '')}\n{extra}\n"
        f"\n---- source ----\n{prog.text}")


def summarize(results, seed, out: Path, extra_counts=None, title="CUDA backend vs CPU executor"):
    clean = Counter()
    known = Counter()
    per_feature = defaultdict(Counter)
    per_known = defaultdict(Counter)
    for r in results:
        (known if r.get("known") else clean)[r["status"]] += 1
        for f in r.get("features") or []:
            per_feature[f][r["status"]] += 1
        for k in r.get("known") or []:
            per_known[k][r["status"]] += 1
    lines = [f"== {title}: seed {seed}, {len(results)} programs",
             f"programs touching no known bug: {sum(clean.values())}  " + _counts(clean),
             f"programs touching a known bug:  {sum(known.values())}  " + _counts(known)]
    for k, c in sorted(per_known.items()):
        lines.append(f"   known {k:16s} {sum(c.values()):5d}  " + _counts(c))
    if extra_counts:
        lines += extra_counts
    cols = ["ok", "mismatch", "fault", "internal_error", "compile_error", "unsupported", "check_error", "oracle_error"]
    lines.append(f"  {'feature':18s}{'programs':>10s}" + "".join(f"{c[:10]:>11s}" for c in cols))
    for f in sorted(per_feature):
        c = per_feature[f]
        lines.append(f"  {f:18s}" + f"{sum(c.values()):>10d}" + "".join(f"{c[k]:>11d}" for k in cols))
    text = "\n".join(lines)
    print(text, flush=True)
    (out / "summary.txt").write_text(text + "\n")
    (out / "summary.json").write_text(json.dumps(dict(seed=seed, programs=len(results), clean=clean, known=known,
                                                      per_known=per_known, per_feature=per_feature,
                                                      results=results), indent=1, default=dict))
    return clean


def _counts(c: Counter) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(c.items(), key=lambda x: (x[0] != "ok", x[0]))) or "-"


# ---- sanitizer mode -------------------------------------------------------------------------
SAN_ERROR = re.compile(r"^=+ (?!ERROR SUMMARY|RACECHECK SUMMARY)(?:Invalid|Misaligned|Out-of-range|Race|Barrier|Uninitialized|Program hit|Error|"
                       r"Warp|Cuda|Unspecified|Address|Divergent|Illegal|Malloc|Leaked|Host API)", re.I)
SAN_KERNEL = re.compile(r"\b(fz\d+_\d+)\b")
# (the summary lines, "ERROR SUMMARY: 0 errors" among them, are counts, not errors: case-insensitive
# "Error" would otherwise take each one for an error that names no kernel)


def batch_main(seed: int, indices, backend="cuda"):
    """Under compute-sanitizer: run the indices in order, one line per program on stdout."""
    for i in indices:
        print(f"@@BEGIN {i}", flush=True)
        res = run_one(seed, i, backend)
        print("@@END " + json.dumps(res), flush=True)
        if res["status"] == "fault":
            return 3


def run_sanitizer(args, out: Path):
    tool = args.sanitizer
    exe = os.environ.get("TILENB_COMPUTE_SANITIZER") or shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    if not Path(exe).exists() and not shutil.which(exe):
        print("compute-sanitizer not found (PATH or /usr/local/cuda/bin)", file=sys.stderr)
        return 2
    indices = [int(x) for x in args.only.split(",") if x] if args.only else list(range(args.start, args.start + args.programs))
    chunks = [indices[i:i + args.batch] for i in range(0, len(indices), args.batch)]
    results = {}
    san_errors = Counter()          # program index -> sanitizer errors attributed to it
    unattributed = 0
    summaries = []
    running = []
    logs = out / f"sanitizer_{tool}"
    logs.mkdir(parents=True, exist_ok=True)
    extra = ["--racecheck-report", "all"] if tool == "racecheck" else []
    serial = 0

    def launch(chunk):
        nonlocal serial
        serial += 1
        log = logs / f"batch_{serial:04d}.log"
        cmd = [exe, "--tool", tool, *extra, "--print-limit", "100000", "--show-backtrace", "no", "--log-file", str(log),
               sys.executable, str(Path(__file__).resolve()), "--batch-run", "--seed", str(args.seed),
               "--indices", ",".join(map(str, chunk)), "--backend", args.backend]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=str(ROOT))
        running.append((p, chunk, log, time.time()))

    pending = list(chunks)[::-1]
    while pending or running:
        while pending and len(running) < args.parallel:
            launch(pending.pop())
        time.sleep(0.5)
        for item in list(running):
            p, chunk, log, started = item
            if p.poll() is None and time.time() - started < args.timeout * len(chunk) + 120:
                continue
            if p.poll() is None:
                p.kill()
            text = p.stdout.read() if p.stdout else ""
            p.wait()
            running.remove(item)
            done, begun = set(), None
            for line in text.splitlines():
                if line.startswith("@@BEGIN "):
                    begun = int(line.split()[1])
                elif line.startswith("@@END "):
                    res = json.loads(line[6:])
                    results[res["index"]] = res
                    done.add(res["index"])
                    begun = None
            if begun is not None and begun not in done:      # it died inside this program
                results[begun] = dict(index=begun, status="fault", stage=f"under {tool}",
                                      line=f"the process died (exit {p.returncode}) under compute-sanitizer",
                                      features=[], known=[], seconds=0.0)
                done.add(begun)
            rest = [i for i in chunk if i not in done]
            if rest and done and (begun is not None or p.returncode not in (0, None)):
                pending.append(rest)          # it died in the middle: go on after that program
            elif rest:
                for i in rest:
                    results[i] = dict(index=i, status="fault", stage=f"under {tool}",
                                      line=f"never ran (the batch exited with {p.returncode} before it): "
                                           f"{text[-500:]}", features=[], known=[], seconds=0.0)
            try:
                log_text = log.read_text(errors="replace")
            except OSError:
                log_text = ""
            cur = None
            for line in log_text.splitlines():
                if SAN_ERROR.match(line):
                    m = SAN_KERNEL.search(line)
                    cur = "pending"
                    if m:
                        san_errors[int(m.group(1).split("_")[1])] += 1
                        cur = None
                    else:
                        unattributed += 1
                elif cur == "pending":
                    m = SAN_KERNEL.search(line)
                    if m:
                        san_errors[int(m.group(1).split("_")[1])] += 1
                        unattributed -= 1
                        cur = None
                m = re.search(r"(ERROR SUMMARY: \d+ errors?|RACECHECK SUMMARY: .*)", line)
                if m:
                    summaries.append(m.group(1))
    res_list = [results[i] for i in sorted(results)]
    for r in res_list:
        _fill_features(r, args.seed)
        r["sanitizer_errors"] = san_errors.get(r["index"], 0)
        if r["sanitizer_errors"]:
            save_failure(out, args.seed, r, extra=f"{tool}: {r['sanitizer_errors']} errors attributed to this kernel "
                                                  f"(logs in {logs})")
        elif r["status"] in BAD:
            save_failure(out, args.seed, r)
    clean_err = sum(r["sanitizer_errors"] for r in res_list if not r.get("known"))
    known_err = sum(r["sanitizer_errors"] for r in res_list if r.get("known"))
    total_err = sum(int(re.search(r"\d+", s).group()) for s in summaries if s.startswith("ERROR"))
    race_err = sum(int(m.group(1)) for s in summaries for m in [re.search(r"\((\d+) errors?", s)] if m)
    extra_counts = [f"compute-sanitizer {tool}: {total_err} errors in its ERROR SUMMARY lines"
                    + (f", {race_err} in its RACECHECK SUMMARY lines" if tool == "racecheck" else "")
                    + f" ({len(summaries)} summaries); attributed to programs touching no known bug: {clean_err}, "
                    f"touching a known bug: {known_err}, unattributed: {max(unattributed, 0)}"]
    for i, n in sorted(san_errors.items()):
        extra_counts.append(f"   program {args.seed}:{i}: {n} {tool} errors")
    clean = summarize(res_list, args.seed, out, extra_counts, title=f"under compute-sanitizer {tool}")
    bad = sum(clean[k] for k in BAD) + clean_err + max(unattributed, 0)
    return 1 if bad else 0


# ---- main -----------------------------------------------------------------------------------
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--programs", type=int, default=2000)
    ap.add_argument("--start", type=int, default=0, help="first program index")
    ap.add_argument("--only", default="", help="comma-separated program indices (instead of --start/--programs)")
    ap.add_argument("--workers", type=int, default=max(1, min(16, os.cpu_count() or 1)))
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds one program may take")
    ap.add_argument("--out", default="out/fuzz")
    ap.add_argument("--sanitizer", choices=["memcheck", "racecheck", "synccheck"])
    ap.add_argument("--backend", choices=["cuda", "emulate", "selftest"], default="cuda",
                    help="emulate: the generated CUDA on the CPU (tests/support/cuda_emulator.py), for a machine without a GPU")
    ap.add_argument("--batch", type=int, default=25, help="programs per compute-sanitizer process")
    ap.add_argument("--parallel", type=int, default=8, help="compute-sanitizer processes at once")
    ap.add_argument("--batch-run", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--indices", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.batch_run:
        return batch_main(args.seed, [int(x) for x in args.indices.split(",") if x], args.backend)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TILENB_CACHE_DIR", str(Path(os.environ.get("TMPDIR", "/tmp")) / "tilenb-cache"))
    if args.sanitizer:
        return run_sanitizer(args, out)
    indices = [int(x) for x in args.only.split(",") if x] if args.only else list(range(args.start, args.start + args.programs))
    results = []
    t0 = time.time()
    progress = {"n": 0}

    def on_result(res):
        _fill_features(res, args.seed)
        results.append(res)
        progress["n"] += 1
        if res["status"] in BAD:
            save_failure(out, args.seed, res)
            print(f"[{progress['n']}/{len(indices)}] program {args.seed}:{res['index']} {res['status']} "
                  f"({', '.join(res.get('known') or []) or 'no known bug'}): {res.get('line', '')[:300]}", flush=True)
        elif progress["n"] % 100 == 0:
            print(f"[{progress['n']}/{len(indices)}] {time.time() - t0:.0f} s", flush=True)

    run_pool(args.seed, indices, args.workers, args.timeout, on_result, args.backend)
    results.sort(key=lambda r: r["index"])
    print(f"{len(results)} programs in {time.time() - t0:.0f} s on {args.workers} workers")
    clean = summarize(results, args.seed, out, title=("emulated CUDA" if args.backend == "emulate" else "CUDA backend")
                      + " vs CPU executor")
    return 1 if any(clean[k] for k in BAD) else 0


if __name__ == "__main__":
    sys.exit(main())
