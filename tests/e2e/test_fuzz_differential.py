"""The differential fuzzer's CPU half: random valid programs (tests/fuzz/programs.py), each with a
numpy oracle written from docs/spec.md, run through the checker, the CPU executor, NVRTC and the
C++ emulator of the generated CUDA (tests/support/cuda_emulator.py). The GPU half is scripts/fuzz_gpu.py
(and `test_gpu_matches_the_cpu_executor`, marked `gpu`).

What each test holds (SEED's first PROGRAMS programs; program i of a seed is always the same):
- every generated program checks (a refusal is a generator bug), runs on the CPU executor with
  no internal error, and its outputs equal the oracle's (integers exactly, floats within the
  spec's tolerances propagated through each expression: tests/fuzz/model.py), every @autotune
  variant included;
- the generated CUDA of a feature-covering subset compiles with NVRTC for sm_80 and sm_90;
- a smaller subset runs on the CPU through the emulator and agrees with the CPU executor;
- programs that touch a bug known and being fixed elsewhere (KNOWN_BUGS; tests/fuzz/FINDINGS.md)
  run in tests of their own, marked xfail with the finding as the reason, so the main tests stay
  green and honest and the xfails turn into XPASS when a fix lands.

Set TILENB_FUZZ_SEED / TILENB_FUZZ_PROGRAMS to search elsewhere or harder (CI uses the defaults).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from fuzz import backends as B  # noqa: E402
from fuzz import programs as P  # noqa: E402
from support import cuda_emulator as EMU  # noqa: E402
from tilenb.codegen import nvrtc_available  # noqa: E402

SEED = int(os.environ.get("TILENB_FUZZ_SEED", "20250101"))
PROGRAMS = int(os.environ.get("TILENB_FUZZ_PROGRAMS", "240"))
NVRTC_PROGRAMS = int(os.environ.get("TILENB_FUZZ_NVRTC", "8"))
EMULATED = int(os.environ.get("TILENB_FUZZ_EMULATED", "3"))

# Known bugs (programs.KNOWN_BUGS, empty while every finding is fixed) are left out of the main
# runs below; the features of the bugs fixed last keep tests of their own.
CPU_KNOWN = tuple(P.KNOWN_BUGS)
EMU_KNOWN = CPU_KNOWN
# Features whose programs once hit a bug on the CPU executor (K3, K5) or in the CUDA (K2).
CPU_FIXED = ("zero_extent", "flat_partial")


def _programs():
    return [P.program(SEED, i) for i in range(PROGRAMS)]


_CACHE = {}


def programs():
    if "all" not in _CACHE:
        _CACHE["all"] = _programs()
    return _CACHE["all"]


def covering(progs, n, exclude=(), without=()):
    """Up to n programs chosen greedily to cover the most features (deterministic)."""
    pool = [p for p in progs if not set(p.known) & set(exclude) and not p.features & set(without)]
    seen, out = set(), []
    while pool and len(out) < n:
        best = max(pool, key=lambda p: (len(p.features - seen), -p.index))
        out.append(best)
        seen |= best.features
        pool.remove(best)
    return out


def _report(bad):
    return "\n".join(f"program {p.name} ({', '.join(sorted(p.features))}): {r.line()}" for p, r in bad[:10])


def test_programs_are_reproducible():
    a, b = P.program(SEED, 7), P.program(SEED, 7)
    assert a.text == b.text and a.grid == b.grid and a.dims == b.dims
    for (_, n, _), (_, m, _) in zip(a.params, b.params):
        va, vb = a.values[n], b.values[m]
        if isinstance(va, np.ndarray):
            assert va.dtype == vb.dtype and np.array_equal(va, vb, equal_nan=True)
        else:
            assert va == vb
    assert P.program(SEED, 8).text != a.text


def test_generator_covers_every_feature_it_documents():
    seen = set().union(*(p.features for p in programs()))
    documented = {"rt_start", "neg_start", "halo", "partial", "view", "tile_view", "tile_window", "rt_tile_window",
                  "fill_window", "flat", "reduce", "gemm_loop", "transpose", "where", "convert", "math", "int_ops",
                  "uniform_elem", "fn", "loop_carry", "if", "thread", "tile_elems", "gmem_hazard",
                  "scalar_param", "bcast_store", "autotune", "registers", "multi_cta", "dt_f16", "dt_bf16",
                  "dt_f32", "dt_f64", "dt_i8", "dt_i32", "dt_i64", "dt_u8", "dot_f16", "dot_bf16", "dot_f32",
                  "dot_f64", "dot_i8", "atomic_f32", "big", "whole_rows", "attention", "loop_read_other",
                  "thread_reads_tile", "gmem_raw", "gmem_war", "gmem_inplace", "gmem_elem", "cluster",
                  "index_tile"}
    assert documented <= seen, sorted(documented - seen)


def test_cpu_executor_matches_the_oracle():
    """Every program that touches no known CPU-executor bug: checks, runs without internal
    error, and equals the oracle in every variant."""
    bad = []
    for p in programs():
        if set(p.known) & set(CPU_KNOWN):
            continue
        r = B.check_cpu(p)
        if r.status != "ok":
            bad.append((p, r))
    assert not bad, f"{len(bad)} programs fail:\n{_report(bad)}"


@pytest.mark.parametrize("label", CPU_FIXED)
def test_cpu_executor_on_the_features_of_fixed_bugs(label):
    """K3 (flat of a partly valid tile) and K5 (zero extents), fixed: every program with the
    feature equals the oracle."""
    progs = [p for p in programs() if label in p.features]
    assert progs, f"no program of the first {PROGRAMS} has {label}"
    bad = [(p, r) for p in progs for r in [B.check_cpu(p)] if r.status != "ok"]
    assert not bad, f"{len(bad)} of {len(progs)} programs fail:\n{_report(bad)}"


def test_comparison_catches_a_wrong_element_and_an_unwritten_one():
    """The comparison the fuzzer relies on can fail: one element changed, or left at the
    sentinel, is reported."""
    p = next(p for p in programs() if not p.known and any(P.M.is_float(p.tensor_types()[n]) for n in p.outputs))
    ref = B.run_cpu(p)
    exp = p.expected()
    err = {n: e for n, (_, e) in exp.items()}
    assert not P.compare(p, ref, ref, err)
    n = next(n for n in p.outputs if P.M.is_float(p.tensor_types()[n]))
    written = np.argwhere(ref[n].astype(np.float64) != P.SENTINEL["float"])
    assert written.size, "the program writes nothing"
    idx = tuple(written[0])
    for wrong in (ref[n][idx].astype(np.float64) + 0.25 + abs(float(ref[n][idx])) * 0.01, P.SENTINEL["float"]):
        got = {k: v.copy() for k, v in ref.items()}
        got[n][idx] = wrong
        d = P.compare(p, ref, got, err)
        assert d and d[0].output == n and d[0].first == idx


def test_reproducer_script_rebuilds_the_program():
    p = next(p for p in programs() if p.tune == {} and not p.known)
    ns = {"__name__": "reproducer"}
    exec(compile(p.reproducer("note"), "reproducer.py", "exec"), ns)
    got = ns["run"]("cpu")
    ref = B.run_cpu(p)
    for n in p.outputs:
        assert np.array_equal(np.asarray(got[n]), ref[n], equal_nan=True)


@pytest.mark.skipif(not nvrtc_available(), reason="libnvrtc cannot be loaded")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_generated_cuda_compiles_with_nvrtc(arch):
    bad = []
    for p in covering(programs(), NVRTC_PROGRAMS, exclude=CPU_KNOWN):
        r = B.check_nvrtc(p, arch)
        if r.status not in ("ok", "unsupported"):
            bad.append((p, r))
    assert not bad, f"{len(bad)} programs fail:\n{_report(bad)}"


@pytest.mark.skipif(not EMU.available(), reason="g++ (C++20) is needed to emulate CUDA on the CPU")
def test_emulated_cuda_matches_the_cpu_executor(tmp_path):
    bad = []
    for p in covering(programs(), EMULATED, exclude=EMU_KNOWN, without=("cluster",)):
        r = B.check_emulated(p, tmp_path)
        if r.status not in ("ok", "unsupported"):
            bad.append((p, r))
    assert not bad, f"{len(bad)} programs fail:\n{_report(bad)}"


@pytest.mark.skipif(not EMU.available(), reason="g++ (C++20) is needed to emulate CUDA on the CPU")
def test_emulated_cuda_global_read_back(tmp_path):
    """Programs that read back, in the same CTA, a tensor they wrote (K2, fixed: the barriers
    through global memory; F1 and F2 have tests of their own below, from their reproducers: few
    generated programs meet them)."""
    label = "gmem_hazard"
    progs = [p for p in programs() if label in p.features and "cluster" not in p.features][:2]
    assert progs, f"no program of the first {PROGRAMS} has {label} alone"
    bad = [(p, r) for p in progs for r in [B.check_emulated(p, tmp_path)] if r.status != "ok"]
    assert not bad, f"{len(bad)} of {len(progs)} programs fail:\n{_report(bad)}"


F1 = """
@launch(32)
kernel bcast(X: tensor<f32>[4, 8], Y: tensor<f32>[4, 8]) {
  Y[0 :+ 4, 0 :+ 8] = X[0 :+ 4, 3 :+ 1]
}
"""

F2 = """
@launch(32)
kernel shift(X: tensor<f32>[2, 16], Y: tensor<f32>[2, 16], s: i32) {
  var t = X[0 :+ 2, 0 :+ 12]
  Y[0 :+ 2, 0 :+ 12] = t[0 :+ 2, s :+ 12]
}
"""


@pytest.mark.skipif(not EMU.available(), reason="g++ (C++20) is needed to emulate CUDA on the CPU")
def test_finding_f1_store_of_an_extent_one_slice_broadcasts(tmp_path):
    import tilenb
    from tilenb.codegen import generate
    mod = tilenb.compile(F1, backend="cpu")
    X = np.arange(32, dtype=np.float32).reshape(4, 8)
    Y = np.zeros((4, 8), np.float32)
    EMU.run(generate(mod.bcast.ir(), F1), [X, Y], {}, (1,), workdir=str(tmp_path))
    np.testing.assert_array_equal(Y, np.repeat(X[:, 3:4], 8, axis=1))


def test_finding_f2_full_length_window_at_a_runtime_start_has_its_barrier():
    """The window moves elements between threads (the copy into t gave each thread its own),
    so a barrier must separate the two statements, as it does for `s :+ 11`."""
    import tilenb
    short = tilenb.compile(F2.replace("s :+ 12]", "s :+ 11]").replace("0 :+ 12] = t", "0 :+ 11] = t"), backend="cpu")
    assert len(short.shift.analysis().barriers) == 1
    assert len(tilenb.compile(F2, backend="cpu").shift.analysis().barriers) == 1


F3 = """
@launch(32)
kernel k(X: tensor<f32>[4, 8], Y: tensor<f32>[4, 8], s: i32) {
  Y[0 :+ 1, :] = colmax(X[0 :+ 2, :] + X[s :+ 1, :])
}
"""


@pytest.mark.skipif(not EMU.available(), reason="g++ (C++20) is needed to emulate CUDA on the CPU")
def test_finding_f3_invalid_broadcast_row_empties_only_the_rows(tmp_path):
    # spec 8 rules 2 and 4: row s outside X empties the rows of the sum, its columns stay
    # valid, so colmax writes the max of no element, -inf, on every column (both backends)
    import tilenb
    from tilenb.codegen import generate
    mod = tilenb.compile(F3, backend="cpu")
    X = np.arange(32, dtype=np.float32).reshape(4, 8)
    want = np.full((4, 8), -7, np.float32)
    want[0] = -np.inf
    cpu, emu = np.full((4, 8), -7, np.float32), np.full((4, 8), -7, np.float32)
    mod.k[1](X, cpu, 10)
    np.testing.assert_array_equal(cpu, want)
    EMU.run(generate(mod.k.ir(), F3), [X, emu, 10], {}, (1,), workdir=str(tmp_path))
    np.testing.assert_array_equal(emu, want)


F4 = """
@launch(256)
kernel k(X: tensor<f32>[32, 32], Y: tensor<f32>[32, 32]) {
  var dead: tile<f16>[8, 24] = 1.0
  var v: tile<f32>[32, 32] = 2.0
  Y[0 :+ 32, :] = transpose(v * X[0 :+ 32, :])
}
"""


@pytest.mark.skipif(not EMU.available(), reason="g++ (C++20) is needed to emulate CUDA on the CPU")
def test_finding_f4_a_dead_tile_does_not_clobber_a_live_one(tmp_path):
    import tilenb
    from tilenb.codegen import generate
    mod = tilenb.compile(F4, backend="cpu")
    X = np.ones((32, 32), np.float32)
    Y = np.zeros((32, 32), np.float32)
    EMU.run(generate(mod.k.ir(), F4), [X, Y], {}, (1,), workdir=str(tmp_path))
    np.testing.assert_array_equal(Y, 2.0)


F5 = """
@launch(32)
kernel vwin(X: tensor<f32>[5, 13], Y: tensor<f32>[2, 3], T: tensor<f32>[2, 3], W: tensor<f32>[3, 11],
            Z: tensor<f32>[4], E: tensor<f32>[2], s: i32) {
  let v = X[0 :+ 5, 4 :+ 6]
  var w = v[1 :+ 2, s :+ 3]
  Y[0 :+ 2, 0 :+ 3] = w
  var t: tile<f32>[5, 13] = 2.0
  let tv = t[0 :+ 5, 4 :+ 6]
  T[0 :+ 2, 0 :+ 3] = tv[1 :+ 2, s :+ 3] + X[0 :+ 2, 0 :+ 3]
  let o = W[0 :+ 3, 2 :+ 5]
  o[0 :+ 3, s :+ 4] = X[0 :+ 3, 0 :+ 4]
  let vv = v[1 :+ 4, 1 :+ 4]
  Z[0 :+ 4] = vv[2, s :+ 4]
  E[0] = v[1, s] + 0.5
  E[1] = vv[0, s]
}
"""


def _f5_expected(X, s):
    """F5's outputs from spec 8 (rule 7: a window of a view sees only the view's window, here
    at the runtime start s), computed with numpy: Y, T, W, Z, E, each filled with -7 first."""
    Y, T, W = np.full((2, 3), -7, np.float32), np.full((2, 3), -7, np.float32), np.full((3, 11), -7, np.float32)
    Z, E = np.full(4, -7, np.float32), np.zeros(2, np.float32)
    for j in range(3):
        if 0 <= s + j < 6:                       # inside v (X's columns 4 .. 9)
            Y[:, j] = X[1:3, 4 + s + j]
            T[:, j] = 2.0 + X[0:2, j]            # t is wholly valid: only tv's window limits it
    for j in range(4):
        if 0 <= s + j < 5:                       # inside o (W's columns 2 .. 6)
            W[:, 2 + s + j] = X[0:3, j]
        if 0 <= s + j < 4:                       # inside vv (X's rows 1 .. 4, columns 5 .. 8)
            Z[j] = X[3, 5 + s + j]
    E[0] = (X[1, 4 + s] if 0 <= s < 6 else 0.0) + 0.5   # an element read outside the view is 0
    E[1] = X[1, 5 + s] if 0 <= s < 4 else 0.0
    return Y, T, W, Z, E


@pytest.mark.skipif(not EMU.available(), reason="g++ (C++20) is needed to emulate CUDA on the CPU")
@pytest.mark.parametrize("s", [-2, 1, 3, 5])
def test_finding_f5_window_of_a_view_at_a_runtime_start_stays_inside_the_view(s, tmp_path):
    """tests/fuzz/FINDINGS.md F5: a window (or element) of a `let` view at a runtime start was
    bounded by the base's extent only, so it read, and stored, the base's elements past the
    view. Reduced from the fuzzer's program 1:71 (and five more of the GPU run)."""
    import tilenb
    from tilenb.codegen import generate
    mod = tilenb.compile(F5, backend="cpu")
    X = np.arange(65, dtype=np.float32).reshape(5, 13) + 1.0
    want = _f5_expected(X, s)
    for backend in ("cpu", "emulated"):
        outs = [np.full(w.shape, -7, np.float32) for w in want]
        if backend == "cpu":
            mod.vwin[1](X, *outs, s)
        else:
            EMU.run(generate(mod.vwin.ir(), F5), [X, *outs, s], {}, (1,), workdir=str(tmp_path))
        for name, got, exp in zip("YTWZE", outs, want):
            np.testing.assert_array_equal(got, exp, err_msg=f"{backend}: {name} at s = {s}")


@pytest.mark.gpu
def test_gpu_matches_the_cpu_executor():
    """A sample of programs with no known bug on the CUDA backend (the full run is
    scripts/fuzz_gpu.py, which also survives faults)."""
    bad = []
    for p in [p for p in programs() if not p.known][:60]:
        r = B.check_cuda(p)
        if r.status not in ("ok", "unsupported"):
            bad.append((p, r))
    assert not bad, f"{len(bad)} programs fail:\n{_report(bad)}"


def test_gpu_script_pool_survives_crashes_faults_and_hangs():
    """scripts/fuzz_gpu.py's worker pool (no GPU needed: its self-test backend answers ok,
    crashes, reports a fault or hangs, by index): every program gets exactly one result, a
    crashed or faulted or hung worker is replaced and the run goes on."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    import fuzz_gpu as fg
    got = []
    fg.run_pool(1, range(9), 2, 4.0, got.append, backend="selftest")
    by = {r["index"]: r for r in got}
    assert sorted(by) == list(range(9)) and len(got) == 9
    for i, r in by.items():
        want = ["ok", "fault", "fault", "fault"][i % 4]
        assert r["status"] == want, (i, r)
    assert by[1]["stage"] == "worker" and by[3]["stage"] == "timeout"


FAKE_SANITIZER = r'''#!/usr/bin/env python3
# A stand-in for compute-sanitizer: runs the command, then writes a log that reports one error
# in the kernel of the batch's first program (and one that names no kernel, in a later block).
import subprocess, sys
args = sys.argv[1:]
log = args[args.index("--log-file") + 1]
cmd = args[args.index("--log-file") + 2:]
first = cmd[cmd.index("--indices") + 1].split(",")[0]
seed = cmd[cmd.index("--seed") + 1]
r = subprocess.run(cmd)
with open(log, "w") as f:
    f.write("========= COMPUTE-SANITIZER\n")
    f.write("========= Invalid __global__ read of size 4 bytes\n=========     at fz%s_%s+0x10\n" % (seed, first))
    f.write("========= ERROR SUMMARY: 1 error\n")
sys.exit(r.returncode)
'''


def test_gpu_script_sanitizer_mode_attributes_errors_and_restarts_batches(tmp_path, monkeypatch):
    """--sanitizer with a stand-in for compute-sanitizer (no GPU needed): batches that die in a
    program go on after it, and the log's errors are counted for the program whose kernel the
    log names."""
    fake = tmp_path / "fake-sanitizer"
    fake.write_text(FAKE_SANITIZER.replace("#!/usr/bin/env python3", f"#!{sys.executable}"))
    fake.chmod(0o755)
    monkeypatch.setenv("TILENB_COMPUTE_SANITIZER", str(fake))
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    import fuzz_gpu as fg
    out = tmp_path / "out"
    rc = fg.main(["--sanitizer", "memcheck", "--backend", "selftest", "--seed", "1", "--only", "0,1,2,4,5,6",
                  "--batch", "3", "--parallel", "2", "--out", str(out)])
    summary = __import__("json").loads((out / "summary.json").read_text())
    by = {r["index"]: r for r in summary["results"]}
    assert sorted(by) == [0, 1, 2, 4, 5, 6]
    assert [by[i]["status"] for i in (0, 1, 2, 4, 5, 6)] == ["ok", "fault", "fault", "ok", "fault", "fault"]
    # batches [0, 1, 2] -> dies at 1, restarted as [2]; [4, 5, 6] -> dies at 5, restarted as [6]
    errs = {i: r["sanitizer_errors"] for i, r in by.items() if r["sanitizer_errors"]}
    assert errs == {0: 1, 2: 1, 4: 1, 6: 1}
    assert rc == 1 and (out / "fail_1_0.txt").exists()


def test_gpu_script_sanitizer_mode_a_clean_run_passes(tmp_path, monkeypatch):
    """A batch whose log holds only compute-sanitizer's banner and "ERROR SUMMARY: 0 errors" is
    clean: no error is counted, none is left unattributed, and the exit status is 0 (the H200's
    runs once counted every summary line as an error naming no kernel)."""
    fake = tmp_path / "clean-sanitizer"
    fake.write_text(f"#!{sys.executable}\n" + """import subprocess, sys
args = sys.argv[1:]
log = args[args.index("--log-file") + 1]
r = subprocess.run(args[args.index("--log-file") + 2:])
open(log, "w").write("========= COMPUTE-SANITIZER\\n========= ERROR SUMMARY: 0 errors\\n")
sys.exit(r.returncode)
""")
    fake.chmod(0o755)
    monkeypatch.setenv("TILENB_COMPUTE_SANITIZER", str(fake))
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    import fuzz_gpu as fg
    out = tmp_path / "out"
    rc = fg.main(["--sanitizer", "memcheck", "--backend", "selftest", "--seed", "1", "--only", "0,4",
                  "--batch", "2", "--parallel", "1", "--out", str(out)])
    text = (out / "summary.txt").read_text() if (out / "summary.txt").exists() else ""
    assert rc == 0, text
    assert "unattributed: 0" in text, text
