"""Question: Which way of writing the row ops, and which L2 eviction hints, let the second read of a
long row come from L2?

Probe for rows longer than shared memory (issue 8, 4096 x 131072): which way of writing the
row ops, and which L2 eviction hints, let the second read of a row come from L2.

Two steps, so that the GPU call spends no time compiling:
    python bench/probes/wide_probe.py gen DIR      # here: tile-language candidates -> CUDA (sm_90) -> cubins
                                            # in DIR, with DIR/manifest.json (NVRTC, no GPU)
    python bench/probes/wide_probe.py run DIR      # on the GPU (CuPy): each cubin checked against float64
                                            # numpy on sampled rows, then timed with CUDA events
                                            # (median of 10 after 2 warm-ups); a table of ms, GB/s
                                            # and % of the device-to-device copy bandwidth measured
                                            # in the same process

Candidates (each op in RMSNorm, LayerNorm, softmax; f32 and bf16): `base` = the suite's kernel as
it was (forward second pass); `rev` = the second pass walks the chunks in reverse (the chunks
read last in the first pass are read first in the second); `head` = the row's first K columns
are kept in a shared tile across both passes (one CTA an SM), the rest streamed twice, the second
time in reverse, the head written last. `patch_hints` (used for the first measurement,
bench/results/h200_wide_probe_before.txt, its `_hint` rows) patched L2 eviction priorities into
the CUDA (first pass evict_last, last reads of X and stores of Y evict_first) to measure a
generator change before building it; the generator now adds its own (tilenb/codegen/cache_hints.py),
so `candidates()` no longer asks for patched variants.
"""
from __future__ import annotations

import json
import re
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

M, N = 4096, 131072

OPS = {
    "rms": dict(
        params="X: tensor<{T}>[M, N], G: tensor<{T}>[1, N], Y: tensor<{T}>[M, N], eps: f32",
        init="  var ss: tile<f32>[1, 1] = 0.0\n",
        head_init="  var h = X[r :+ 1, 0 :+ K]\n  var ss = rowsum(h * h)\n",
        acc="    var x = X[r :+ 1, c :+ C]\n    ss = ss + rowsum(x * x)\n",
        stats="  let inv = rsqrt(ss / f32(N) + eps)\n",
        out="X[r :+ 1, c :+ C] * inv * G[0 :+ 1, c :+ C]",
        head_out="h * inv * G[0 :+ 1, 0 :+ K]"),
    "ln": dict(
        params="X: tensor<{T}>[M, N], W: tensor<{T}>[1, N], B: tensor<{T}>[1, N], Y: tensor<{T}>[M, N], eps: f32",
        init="  var s: tile<f32>[1, 1] = 0.0\n  var ss: tile<f32>[1, 1] = 0.0\n",
        head_init="  var h = X[r :+ 1, 0 :+ K]\n  var s = rowsum(h)\n  var ss = rowsum(h * h)\n",
        acc="    var x = X[r :+ 1, c :+ C]\n    s = s + rowsum(x)\n    ss = ss + rowsum(x * x)\n",
        stats="  let mean = s / f32(N)\n  let rstd = rsqrt(ss / f32(N) - mean * mean + eps)\n",
        out="(X[r :+ 1, c :+ C] - mean) * rstd * W[0 :+ 1, c :+ C] + B[0 :+ 1, c :+ C]",
        head_out="(h - mean) * rstd * W[0 :+ 1, 0 :+ K] + B[0 :+ 1, 0 :+ K]"),
    "sm": dict(
        params="X: tensor<{T}>[M, N], Y: tensor<{T}>[M, N]",
        init="  var m: tile<f32>[1, 1] = -1.0e30\n  var l: tile<f32>[1, 1] = 0.0\n",
        head_init="  var h = X[r :+ 1, 0 :+ K]\n  var m = rowmax(h)\n  var l = rowsum(exp(h - m))\n",
        acc="    var x = X[r :+ 1, c :+ C]\n    var m_new = max(m, rowmax(x))\n"
            "    l = l * exp(m - m_new) + rowsum(exp(x - m_new))\n    m = m_new\n",
        stats="",
        out="exp(X[r :+ 1, c :+ C] - m) / l",
        head_out="exp(h - m) / l"),
}


def kernel_text(op: str, form: str, T: str, tune: dict) -> str:
    o = OPS[op]
    at = ", ".join(f"{k} in [{v}]" for k, v in tune.items())
    name = f"{op}_{form}_{T}"
    head = f"@autotune({at})\n@launch(NT)\n@dynshared\n@grid(M)\nkernel {name}({o['params'].replace('{T}', T)}) {{\n  let r = ctx.block.x\n"
    if form in ("base", "rev"):
        body = o["init"] + "  for c in range(0, N, C) {\n" + o["acc"] + "  }\n" + o["stats"]
        if form == "base":
            body += "  for c in range(0, N, C) {\n    Y[r :+ 1, c :+ C] = " + o["out"] + "\n  }\n"
        else:
            body += ("  let n = cdiv(N, C)\n  for i in range(0, n) {\n    let c = (n - 1 - i) * C\n"
                     "    Y[r :+ 1, c :+ C] = " + o["out"] + "\n  }\n")
    else:   # head: C is the first pass's chunk, C2 (if tuned) the second pass's
        c2 = "C2" if "C2" in tune else "C"
        body = (o["head_init"] + "  for c in range(K, N, C) {\n" + o["acc"] + "  }\n" + o["stats"]
                + f"  let n = cdiv(max(N - K, 0), {c2})\n  for i in range(0, n) {{\n    let c = K + (n - 1 - i) * {c2}\n"
                "    Y[r :+ 1, c :+ C] = ".replace(":+ C]", f":+ {c2}]") + o["out"].replace(":+ C]", f":+ {c2}]")
                + "\n  }\n  Y[r :+ 1, 0 :+ K] = " + o["head_out"] + "\n")
    return head + body + "}\n", name


def candidates_head2():
    """bf16 head forms with the second pass in larger chunks (C2), with and without an L2
    evict_first hint patched onto the head's loads (hint = "head")."""
    out = []
    for op in OPS:
        for C, C2 in ((8192, 8192), (8192, 32768), (16384, 32768), (16384, 16384)):
            for hint in (False, "head"):
                out.append((op, "head", "bf16", dict(K=98304, C=C, C2=C2, NT=1024), hint))
        out.append((op, "head", "bf16", dict(K=98304, C=16384, C2=32768, NT=512), "head"))
    return out


def candidates():
    out = []
    for op in OPS:
        for T in ("f32", "bf16"):
            e = 4 if T == "f32" else 2
            for C in (4096, 16384) + ((65536,) if T == "bf16" else ()):
                for NT in (512, 1024):
                    out.append((op, "base", T, dict(C=C, NT=NT), False))
            for C in (4096, 16384):
                for NT in (512, 1024):
                    out.append((op, "rev", T, dict(C=C, NT=NT), False))
            for K in (196608 // e, 98304 // e):
                for NT in (512, 1024):
                    out.append((op, "head", T, dict(K=K, C=4096 if T == "f32" else 8192, NT=NT), False))
    return out


HINT_PRELUDE = r"""
// ---- probe: L2 eviction priorities (createpolicy + .L2::cache_hint, sm_80+) ----
__device__ __forceinline__ unsigned long long tnb_pol_last() { unsigned long long p; asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p)); return p; }
__device__ __forceinline__ unsigned long long tnb_pol_first() { unsigned long long p; asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p)); return p; }
__device__ __forceinline__ uint4 tnb_ldh(const uint4* a, unsigned long long p) { uint4 v; asm volatile("ld.global.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(a), "l"(p)); return v; }
__device__ __forceinline__ uint2 tnb_ldh(const uint2* a, unsigned long long p) { uint2 v; asm volatile("ld.global.L2::cache_hint.v2.u32 {%0,%1}, [%2], %3;" : "=r"(v.x), "=r"(v.y) : "l"(a), "l"(p)); return v; }
__device__ __forceinline__ void tnb_sth(uint4* a, uint4 v, unsigned long long p) { asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1,%2,%3,%4}, %5;" :: "l"(a), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "l"(p) : "memory"); }
__device__ __forceinline__ void tnb_sth(uint2* a, uint2 v, unsigned long long p) { asm volatile("st.global.L2::cache_hint.v2.u32 [%0], {%1,%2}, %3;" :: "l"(a), "r"(v.x), "r"(v.y), "l"(p) : "memory"); }
"""

LINE = re.compile(r"^\s*// line \d+: (.*)$")
LOAD = re.compile(r"\*\((uint4|uint2)\*\)(\w+\[\w+\]) = \*\(const (uint4|uint2)\*\)\((X_\d+ \+ .*)\);$")
STORE = re.compile(r"\*\((uint4|uint2)\*\)\((Y_\d+ \+ .*)\) = \*\(const (uint4|uint2)\*\)(\w+);$")


def patch_hints(src: str) -> str:
    """Loads of X in the first loop (`for c in range`): evict_last; loads of X elsewhere (the head,
    read once; the second loop, the last read): evict_first; stores of Y: evict_first."""
    out, section = [], "other"
    body_at = src.index('extern "C" __global__')
    lines = src.split("\n")
    for ln in lines:
        m = LINE.match(ln)
        if m:
            t = m.group(1)
            if t.startswith("for c in range"):
                section = "pass1"
            elif t.startswith("for i in range") or t.startswith("Y[") or t.startswith("var h"):
                section = "last"
        mm = LOAD.search(ln)
        if mm:
            ty, buf, _, ptr = mm.groups()
            pol = "tnb_pol_last()" if section == "pass1" else "tnb_pol_first()"
            ln = ln[:mm.start()] + f"*({ty}*){buf} = tnb_ldh((const {ty}*)({ptr}), {pol});"
        ms = STORE.search(ln)
        if ms:
            ty, ptr, _, buf = ms.groups()
            ln = ln[:ms.start()] + f"tnb_sth(({ty}*)({ptr}), *(const {ty}*){buf}, tnb_pol_first());"
        out.append(ln)
    text = "\n".join(out)
    i = text.index('extern "C" __global__')
    i = text.rfind("// tilenb kernel", 0, i)
    return text[:i] + HINT_PRELUDE + text[i:]


HEAD_LOAD = re.compile(r"\*\((uint4|uint2)\*\)(\w+\[\w+\]) = \*\(const (uint4|uint2)\*\)\((X_\d+ \+ [^;]*)\);")


def patch_head_hint(src: str) -> str:
    """The head's loads (the statement `var h = X[...]`) with the kernel's evict_first policy."""
    out, inside = [], False
    for ln in src.split("\n"):
        m = LINE.match(ln)
        if m:
            inside = m.group(1).startswith("var h")
        if inside:
            ln = HEAD_LOAD.sub(lambda mm: f"*({mm.group(1)}*){mm.group(2)} = tnb_ld_ef((const {mm.group(1)}*)({mm.group(4)}), tnb_l2ef);", ln)
        out.append(ln)
    return "\n".join(out)


def _gen_one(args):
    op, form, T, tune, hint, outdir = args
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    import tilenb
    from tilenb.codegen import generate, nvrtc_compile
    text, name = kernel_text(op, form, T, tune)
    mod = tilenb.compile(text, backend="cpu")
    kir = list(mod.kernels[name].checked.variants.values())[0]
    ks = generate(kir, text, arch="sm_90")
    if hint == "head":
        src = patch_head_hint(ks.source)     # (unchanged where the head is copied by cp.async)
    else:
        src = patch_hints(ks.source) if hint else ks.source
    if hint is True:
        assert "tnb_ldh(" in src and "tnb_sth(" in src, name
    tag = f"{name}_" + "_".join(f"{k}{v}" for k, v in tune.items()) + ({True: "_hint", "head": "_hh"}.get(hint, ""))
    cubin = nvrtc_compile(src, "sm_90", name=tag + ".cu", use_cache=False)
    Path(outdir, tag + ".cubin").write_bytes(cubin)
    Path(outdir, tag + ".cu").write_text(src)
    return dict(tag=tag, op=op, form=form, T=T, tune=tune, hint=hint, symbol=ks.symbol,
                threads=ks.threads, smem=ks.smem_bytes, dynamic=ks.dynamic_smem)


def gen(outdir: Path, jobs: int = 2, which: str = ""):
    outdir.mkdir(parents=True, exist_ok=True)
    cands = candidates_head2() if which == "head2" else candidates()
    todo = [(op, f, T, tune, h, str(outdir)) for op, f, T, tune, h in cands]
    with ProcessPoolExecutor(jobs) as ex:
        manifest = list(ex.map(_gen_one, todo))
    Path(outdir, "manifest.json").write_text(json.dumps(manifest, indent=1))
    print(len(manifest), "cubins in", outdir)


# ---- on the GPU ---------------------------------------------------------------------------------
def run(outdir: Path, only: str = ""):
    import cupy as cp
    import numpy as np
    import ml_dtypes
    from cupy_timing import copy_bandwidth_GBps, time_s, to_bf16_bits
    manifest = json.loads(Path(outdir, "manifest.json").read_text())
    if only:
        manifest = [m for m in manifest if re.search(only, m["tag"])]

    bw = copy_bandwidth_GBps()
    print(f"copy bandwidth {bw:.0f} GB/s (1 GiB cudaMemcpyAsync D2D, read + write)")

    rng_rows = np.array([0, 1, 2, 131, 132, 2047, 4094, 4095])
    data = {}
    for T in ("f32", "bf16"):
        x = cp.random.standard_normal((M, N), dtype=cp.float32) * 2 + 0.5
        g = cp.random.standard_normal((1, N), dtype=cp.float32)
        b = cp.random.standard_normal((1, N), dtype=cp.float32)
        if T == "bf16":
            x, g, b = to_bf16_bits(x), to_bf16_bits(g), to_bf16_bits(b)
            y = cp.empty((M, N), cp.uint16)
        else:
            y = cp.empty((M, N), cp.float32)
        data[T] = (x, g, b, y)

    def host(a, T):
        a = cp.asnumpy(a)
        return a.view(ml_dtypes.bfloat16).astype(np.float64) if T == "bf16" else a.astype(np.float64)

    refs = {}
    for T in data:
        x, g, b, _ = data[T]
        xs, gs, bs = host(x[rng_rows], T), host(g, T), host(b, T)
        mu = xs.mean(1, keepdims=True)
        e = np.exp(xs - xs.max(1, keepdims=True))
        refs[T] = dict(rms=xs / np.sqrt((xs * xs).mean(1, keepdims=True) + 1e-5) * gs,
                       ln=(xs - mu) / np.sqrt(((xs - mu) ** 2).mean(1, keepdims=True) + 1e-5) * gs + bs,
                       sm=e / e.sum(1, keepdims=True))
    rows = []
    for m in manifest:
        T, op = m["T"], m["op"]
        x, g, b, y = data[T]
        try:
            mod = cp.RawModule(path=str(Path(outdir, m["tag"] + ".cubin")))
            fn = mod.get_function(m["symbol"])
            if m["dynamic"]:
                fn.max_dynamic_shared_size_bytes = m["smem"]
            sh = m["smem"] if m["dynamic"] else 0
            eps, Mi, Ni = np.float32(1e-5), np.int64(M), np.int64(N)
            args = {"rms": (x, g, y, eps, Mi, Ni), "ln": (x, g, b, y, eps, Mi, Ni), "sm": (x, y, Mi, Ni)}[op]
            launch = lambda: fn((M,), (m["threads"],), args, shared_mem=sh)
            if T == "f32":
                y.fill(np.nan)
            else:
                y.fill(0x7FC0)         # a bf16 NaN
            launch(); cp.cuda.runtime.deviceSynchronize()
            got = host(y[rng_rows], T)
            ref = refs[T][op]
            err = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
            ok = bool(np.isfinite(got).all() and err < (1e-4 if T == "f32" else 2e-2))
            s = time_s(launch)
            nbytes = 2 * M * N * (4 if T == "f32" else 2)
            rate = nbytes / s / 1e9
            rows.append(dict(m, seconds=s, GBps=rate, frac=rate / bw, rel_err=err, ok=ok))
            print(f"{m['tag']:<48} {s * 1e3:8.3f} ms {rate:7.0f} GB/s {100 * rate / bw:5.1f}%  err {err:.1e} {'ok' if ok else 'WRONG'}", flush=True)
        except Exception as exc:  # one failure is one row
            rows.append(dict(m, error=repr(exc)[:300]))
            print(f"{m['tag']:<48} FAILED {exc!r}"[:300], flush=True)
    return bw, rows


if __name__ == "__main__":
    cmd, d = sys.argv[1], Path(sys.argv[2])
    if cmd == "gen":
        gen(d, int(sys.argv[3]) if len(sys.argv) > 3 else 2, sys.argv[4] if len(sys.argv) > 4 else "")
    else:
        import os
        bw, rows = run(d, sys.argv[3] if len(sys.argv) > 3 else "")
        out = Path(os.environ.get("OUT", "."))
        (out / "wide_probe.json").write_text(json.dumps(dict(copy_bandwidth_GBps=bw, rows=rows), indent=1))
        print("\nbest per op/dtype/form:")
        best = {}
        for r in rows:
            if "frac" in r and r["ok"]:
                k = (r["op"], r["T"], r["form"] + ({True: "+hint", "head": "+hh"}.get(r["hint"], "")))
                if k not in best or r["seconds"] < best[k]["seconds"]:
                    best[k] = r
        for k in sorted(best):
            r = best[k]
            print(f"{k[0]:>4} {k[1]:>5} {k[2]:<10} {100 * r['frac']:5.1f}%  {r['tag']}")
