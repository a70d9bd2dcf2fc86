"""Edges of the streamed sm_90 lowering (tilenb/codegen/sm90/streamed.py), checked without a GPU.

Each program of `CASES` is a flash-attention loop (or a near relative) at an edge of the
language or of the lowering: sequence lengths that are not multiples of the tiles (a partial
last turn), N not a multiple of BR, loops that run zero times, loop starts that are not 0 (nor a
multiple of 8, nor positive), a V column window whose start is or is not on 16 bytes (the copy
path), windows that run past the tensor's columns, 2-D / 3-D / 4-D tensors, a key/value head
outside its tensor, grouped heads, f16 and bf16, head dims 32 / 64 / 128, BC from 16 to 256, the
loop nested in another loop (re-entered: its mbarriers initialised again), two streamed loops in
one kernel, the three ways of writing the accumulation (`acc * r + dot`, `dot + acc * r`,
`acc += dot`), a first dot with B as [K, N] (`dot`), q in registers or in shared memory, 128 and
256 threads, and programs drawn by a small generator (`_random_cases`).

For every case:
- the lowering takes the loop, or leaves it, as the module docstring says (`Case.lowered`, with
  the reason in `Case.why`); what it takes compiles with NVRTC for sm_90a;
- the CPU executor (the semantics) gives the numpy result written here from the spec's rules
  (section 8: elements outside a tensor read as 0 and are invalid; a reduction skips invalid
  elements; a dot is valid over a's valid rows by b's valid columns, `dot_t` b's valid rows;
  elementwise results are valid on the intersection; stores write only valid elements);
- the generated sm_90 CUDA, run by the emulator of TMA, mbarriers and wgmma of
  tests/codegen/test_gemm_sm90_edges.py (every CUDA thread an OS thread), gives the numpy result on the
  tensor-map path and on the bounds-checked copy path, with copies landing late / products
  reading early and the reverse.

Outputs start as NaN, so an element written where the reference writes none (or the reverse)
fails the comparison.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Dict, List, Optional

import ml_dtypes
import numpy as np
import pytest

import tilenb
from tilenb.codegen import generate
from tilenb.codegen.nvrtc import nvrtc_available, nvrtc_compile

from test_gemm_sm90_edges import assert_close, build_sm90, case_params, needs_gxx, run_sm90  # noqa: E402

BF16 = ml_dtypes.bfloat16
NPDT = {"f16": np.float16, "bf16": BF16}
needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="NVRTC is not installed")


# ---- the programs ---------------------------------------------------------------------------------
@dataclass
class Case:
    """One attention-like program, described by knobs from which both its text and its numpy
    reference are made (so they cannot drift apart)."""
    why: str
    BR: int = 64
    BC: int = 64
    D: int = 64                   # q's columns = K's columns (the score dot's K)
    NT: int = 128
    T: str = "bf16"
    rank: int = 3                 # 2: [N, D]; 3: [H, N, D]; 4: [B, H, N, D]
    DV: Optional[int] = None      # columns of the V window (acc's columns); D when None
    VW: Optional[int] = None      # V's last extent; DV when None
    c0: object = 0                # V window's column start (an int, or language text over h, b, rb)
    lo: str = "0"                 # loop bounds (language text; also evaluated here over the dims)
    hi: str = "Nk"
    step: int = 0                 # the loop's step; BC when 0
    vname: str = "V"              # the tensor of the P V dot (K itself: keys as values)
    kvh: str = "h"                # K/V head index from the query head h
    form: str = "mul_add"         # mul_add: acc * r + dot; dot_first: dot + acc * r; pluseq: acc *= r; acc += dot
    first: str = "dot_t"          # dot_t: K [.., Nk, D]; dot_fixed: dot(q, KT[.., :, ck :+ BC]) with KT [.., D, W]
    ck: int = 0                   # dot_fixed: KT's column start
    nest: int = 1                 # row blocks per CTA: an outer loop around the whole body when > 1
    two: bool = False             # a second loop over K2, V2 (keys after the first loop's)
    lo2: str = "0"
    hi2: str = "Nk2"
    store: str = "div"            # div: O = acc / l; plus: O = acc + l (a loop of zero turns stores 0)
    dims: Dict[str, int] = field(default_factory=dict)
    lowered: bool = True
    bug: Dict[str, str] = field(default_factory=dict)   # aspect -> text: xfail(strict) of that test

    @property
    def dv(self):
        return self.DV or self.D

    @property
    def vw(self):
        return self.VW or self.dv


def _lead(case, kv: bool) -> List[str]:
    """The leading (fixed) index texts of a slice."""
    h = f"({case.kvh})" if kv else "h"
    return {2: [], 3: [h], 4: ["b", h]}[case.rank]


def _tdims(case, kv: bool, rows: str, cols) -> str:
    heads = "HK" if kv else "H"
    lead = {2: [], 3: [heads], 4: ["B", heads]}[case.rank]
    return ", ".join(lead + [str(rows), str(cols)])


def _sl(lead, rest) -> str:
    return ", ".join(lead + rest)


def _body(case, sfx: str, Kn: str, Vn: str, lo: str, hi: str) -> str:
    BR, BC, D, dv = case.BR, case.BC, case.D, case.dv
    lk = _lead(case, True)
    if case.first == "dot_t":
        sdot = f"dot_t(q, {Kn}[{_sl(lk, [f'kt :+ {BC}', ':'])}])"
    else:
        sdot = f"dot(q, {Kn}[{_sl(lk, [f'0 :+ {D}', f'{case.ck} :+ {BC}'])}])"
    Vn = Kn if case.vname == "K" else Vn
    vs = f"{Vn}[{_sl(lk, [f'kt :+ {BC}', f'{case.c0} :+ {dv}'])}]"
    acc = {"mul_add": [f"acc = acc * rescale + dot(p, {vs})"],
           "dot_first": [f"acc = dot(p, {vs}) + acc * rescale"],
           "pluseq": ["acc = acc * rescale", f"acc += dot(p, {vs})"]}[case.form]
    lines = [f"for kt in range({lo}, {hi}, {case.step or BC}) {{",
             f"  var s{sfx}: tile<f32>[{BR}, {BC}] = {sdot} * scale",
             f"  var m_new{sfx} = max(m, rowmax(s{sfx}))",
             f"  var p{sfx}: tile<{case.T}>[{BR}, {BC}] = exp(s{sfx} - m_new{sfx})",
             f"  var rescale{sfx} = exp(m - m_new{sfx})",
             f"  l = l * rescale{sfx} + rowsum(p{sfx})"]
    lines += ["  " + a.replace("rescale", f"rescale{sfx}").replace("(p,", f"(p{sfx},") for a in acc]
    lines += [f"  m = m_new{sfx}", "}"]
    return "\n".join(lines)


def text_of(case: Case) -> str:
    BR, D, dv, T = case.BR, case.D, case.dv, case.T
    grid = {2: "cdiv(N, {r})", 3: "cdiv(N, {r}), H", 4: "cdiv(N, {r}), H, B"}[case.rank].format(r=BR * case.nest)
    if case.first == "dot_t":
        kparam = f"K: tensor<{T}>[{_tdims(case, True, 'Nk', D)}]"
    else:
        kparam = f"K: tensor<{T}>[{_tdims(case, True, D, 'W')}]"
    params = [f"Q: tensor<{T}>[{_tdims(case, False, 'N', D)}]", kparam,
              f"V: tensor<{T}>[{_tdims(case, True, 'Nk', case.vw)}]"]
    if case.two:
        params += [kparam.replace("K:", "K2:").replace("Nk", "Nk2"),
                   f"V2: tensor<{T}>[{_tdims(case, True, 'Nk2', case.vw)}]"]
    params += [f"O: tensor<f32>[{_tdims(case, False, 'NO', dv)}]", "scale: f32"]
    lq = _lead(case, False)
    head = []
    if case.rank >= 3:
        head.append("let h = ctx.block.y")
    if case.rank == 4:
        head.append("let b = ctx.block.z")
    inner = [f"var q = Q[{_sl(lq, [f'row :+ {BR}', ':'])}]",
             f"var acc: tile<f32>[{BR}, {dv}] = 0.0",
             f"var m: tile<f32>[{BR}, 1] = -1.0e30",
             f"var l: tile<f32>[{BR}, 1] = 0.0",
             _body(case, "", "K", "V", case.lo, case.hi)]
    if case.two:
        inner.append(_body(case, "2", "K2", "V2", case.lo2, case.hi2))
    val = "acc / l" if case.store == "div" else "acc + l"
    inner.append(f"O[{_sl(lq, [f'row :+ {BR}', ':'])}] = {val}")
    if case.nest > 1:
        body = head + [f"for rb in range(0, {case.nest}) {{",
                       f"  let row = (ctx.block.x * {case.nest} + rb) * {BR}"] + \
               ["  " + x for y in inner for x in y.split("\n")] + ["}"]
    else:
        body = head + [f"let row = ctx.block.x * {BR}"] + inner
    return (f"@launch({case.NT})\n@dynshared\n@grid({grid})\n"
            f"kernel attn({', '.join(params)}) {{\n" + "\n".join("  " + x for y in body for x in y.split("\n")) + "\n}\n")


# ---- numpy: the spec's rules (section 8), written out --------------------------------------------
class Tv:
    """A tile value: float64 values and its valid rows and columns."""

    def __init__(self, v, rv=None, cv=None):
        self.v = np.asarray(v, np.float64)
        self.rv = np.ones(self.v.shape[0], bool) if rv is None else np.asarray(rv, bool)
        self.cv = np.ones(self.v.shape[1], bool) if cv is None else np.asarray(cv, bool)

    def masked(self):
        return np.where(self.rv[:, None] & self.cv[None, :], self.v, 0.0)


def ew(f, *xs) -> Tv:
    """An elementwise result: valid on the intersection after broadcasting (an extent-1
    dimension is valid along all of a longer one when its one element is)."""
    R = max(x.v.shape[0] for x in xs)
    C = max(x.v.shape[1] for x in xs)
    rv, cv = np.ones(R, bool), np.ones(C, bool)
    for x in xs:
        rv &= np.broadcast_to(x.rv, (R,))
        cv &= np.broadcast_to(x.cv, (C,))
    with np.errstate(all="ignore"):
        return Tv(f(*(x.v for x in xs)), rv, cv)


def window(X, fixed, r0, c0, R, C) -> Tv:
    """X[fixed..., r0 :+ R, c0 :+ C]: zeros and invalid outside X (all invalid when a fixed
    index lies outside)."""
    rows, cols = np.arange(r0, r0 + R), np.arange(c0, c0 + C)
    ok = all(0 <= f < X.shape[i] for i, f in enumerate(fixed))
    rv = (rows >= 0) & (rows < X.shape[-2]) & ok
    cv = (cols >= 0) & (cols < X.shape[-1]) & ok
    out = np.zeros((R, C))
    if ok and rv.any() and cv.any():
        sub = X[tuple(fixed)] if fixed else X
        out[np.ix_(rv, cv)] = sub[np.ix_(rows[rv], cols[cv])].astype(np.float64)
    return Tv(out, rv, cv)


def rowred(x: Tv, f, empty) -> Tv:
    with np.errstate(all="ignore"):
        v = np.where(x.cv[None, :], x.v, empty)
        return Tv(f(v, axis=1, keepdims=True) if x.cv.any() else np.full((x.v.shape[0], 1), empty), x.rv, [True])


def to_dtype(x: Tv, T: str) -> Tv:
    with np.errstate(all="ignore"):
        return Tv(x.v.astype(np.float32).astype(NPDT[T]).astype(np.float64), x.rv, x.cv)


def reference(case: Case, x: Dict[str, np.ndarray], grid) -> np.ndarray:
    """O as the spec computes it, CTA by CTA."""
    O = x["O"].astype(np.float64).copy()
    dims = _dims(case, x)
    scale = float(np.float32(x["scale"]))
    env = dict(dims)
    BR, BC, D, dv = case.BR, case.BC, case.D, case.dv
    for bz in range(grid[2] if len(grid) > 2 else 1):
        for by in range(grid[1] if len(grid) > 1 else 1):
            for bx in range(grid[0]):
                env.update(h=by, b=bz)
                kvh = eval(case.kvh.replace("/", "//"), {}, env)   # noqa: S307 (a case's own index text)
                fq = {2: [], 3: [by], 4: [bz, by]}[case.rank]
                fk = {2: [], 3: [kvh], 4: [bz, kvh]}[case.rank]
                for rb in range(case.nest):
                    row = (bx * case.nest + rb) * BR
                    env.update(rb=rb)
                    c0 = int(eval(str(case.c0).replace("/", "//"), {}, env))   # noqa: S307
                    q = window(x["Q"], fq, row, 0, BR, D)
                    acc, m = Tv(np.zeros((BR, dv))), Tv(np.full((BR, 1), np.float32(-1.0e30)))
                    l = Tv(np.zeros((BR, 1)))
                    loops = [("K", "V", case.lo, case.hi)] + ([("K2", "V2", case.lo2, case.hi2)] if case.two else [])
                    for Kn, Vn, lo, hi in loops:
                        lo, hi = (int(eval(e, {}, env)) for e in (lo, hi))   # noqa: S307
                        for kt in (range(lo, hi, case.step or BC) if hi > lo else []):
                            if case.first == "dot_t":
                                kw = window(x[Kn], fk, kt, 0, BC, D)
                                s = Tv(q.masked() @ kw.masked().T, q.rv, kw.rv)
                            else:
                                kw = window(x[Kn], fk, 0, case.ck, D, BC)
                                s = Tv(q.masked() @ kw.masked(), q.rv, kw.cv)
                            s = ew(lambda a: (a * scale).astype(np.float32).astype(np.float64), s)
                            m_new = ew(np.maximum, m, rowred(s, np.max, -np.inf))
                            p = to_dtype(ew(lambda a, b: np.exp(a - b), s, m_new), case.T)
                            r = ew(lambda a, b: np.exp(a - b), m, m_new)
                            l = ew(lambda a, b, c: a * b + c, l, r, rowred(p, np.sum, 0.0))
                            vw = window(x[Kn if case.vname == "K" else Vn], fk, kt, c0, BC, dv)
                            pv = Tv(p.masked() @ vw.masked(), p.rv, vw.cv)
                            acc = ew(lambda a, b, c: a * b + c, acc, r, pv)
                            m = m_new
                    val = ew((lambda a, b: a / b) if case.store == "div" else (lambda a, b: a + b), acc, l)
                    _put(O, fq, row, val)
    return O


def _put(Y, fixed, r0, val: Tv):
    """Y[fixed..., r0 :+ R, :] = val: only valid elements inside Y (spec 8.9)."""
    if not all(0 <= f < Y.shape[i] for i, f in enumerate(fixed)):
        return
    sub = Y[tuple(fixed)] if fixed else Y
    for i in range(val.v.shape[0]):
        r = r0 + i
        if val.rv[i] and 0 <= r < sub.shape[0]:
            cols = np.nonzero(val.cv[: sub.shape[1]])[0]
            sub[r, cols] = val.v[i, cols]


# ---- running a case -------------------------------------------------------------------------------
def _dims(case, x):
    d = dict(case.dims)
    d.setdefault("NO", d["N"])
    if "H" in d:
        d.setdefault("HK", d["H"])
    return d


def _arrays(case: Case, seed=0) -> Dict[str, object]:
    d = _dims(case, None)
    rng = np.random.default_rng(seed)
    T = NPDT[case.T]
    B, H, HK = d.get("B", 1), d.get("H", 1), d.get("HK", d.get("H", 1))
    lead_q = {2: (), 3: (H,), 4: (B, H)}[case.rank]
    lead_k = {2: (), 3: (HK,), 4: (B, HK)}[case.rank]

    def rnd(*shape):
        return rng.standard_normal(shape).astype(T)
    x = {"Q": rnd(*lead_q, d["N"], case.D)}
    for sfx, nk in (("", "Nk"), ("2", "Nk2")) if case.two else (("", "Nk"),):
        x["K" + sfx] = rnd(*lead_k, d[nk], case.D) if case.first == "dot_t" else rnd(*lead_k, case.D, d["W"])
        x["V" + sfx] = rnd(*lead_k, d[nk], case.vw)
    x["O"] = np.full(lead_q + (d["NO"], case.dv), np.nan, np.float32)
    x["scale"] = np.float32(1.0 / np.sqrt(case.D))
    return x


def _grid(case):
    d = _dims(case, None)
    gx = -(-d["N"] // (case.BR * case.nest))
    return (gx,) + tuple(d[k] for k in ("H", "B")[: case.rank - 2])


def _order(case):
    names = ["Q", "K", "V"] + (["K2", "V2"] if case.two else []) + ["O", "scale"]
    return names


def _tol(case):
    return (2e-2, 2e-2) if case.T == "bf16" else (4e-3, 4e-3)


def _check(case, got, want, what):
    rtol, atol = _tol(case)
    big = max(1.0, float(np.nanmax(np.abs(want))) if np.isfinite(want).any() else 1.0)
    assert_close(got, want, f"{what}\n{text_of(case)}", rtol, atol * big)


_KS = {}


def _kernel_source(case):
    text = text_of(case)
    if text not in _KS:
        mod = tilenb.compile(text, backend="cpu")
        _KS[text] = (mod, generate(mod.attn.ir(), text, 0, arch="sm_90"))
    return _KS[text]


CASES: Dict[str, Case] = {}


def add(name, why, **kw):
    kw.setdefault("dims", dict(H=2, N=70, Nk=100))
    CASES[name] = Case(why, **kw)


# -- tiles and lengths
add("partial_turn_and_rows", "Nk 100 over BC 64: a partial last turn; N 70 over BR 64: a partial row block",
    dims=dict(H=1, N=70, Nk=100))
add("single_partial_turn", "Nk 5: the only turn is mostly outside K and V (TMA fills zeros, rows invalid)",
    dims=dict(H=1, N=64, Nk=5))
add("zero_turns_empty_keys", "Nk 0: the loop runs zero times; acc + l stores zeros over the valid rows",
    dims=dict(H=1, N=70, Nk=0), store="plus")
add("zero_turns_lo_ge_hi", "range(Nk, 10): lo >= hi, zero turns; no copy may be issued or waited on",
    lo="Nk", hi="10", dims=dict(H=2, N=64, Nk=40), store="plus")
add("lo_3_not_multiple_of_8", "range(3, Nk): row starts 3, 67, ... (TMA takes any row start)",
    lo="3", dims=dict(H=1, N=64, Nk=150))
add("lo_negative", "range(0 - 5, Nk - 7): the first turn's rows start before the tensor",
    lo="0 - 5", hi="Nk - 7", dims=dict(H=1, N=64, Nk=140))
add("hi_past_the_tensor", "range(0, Nk + 70): whole turns past the tensor (all rows invalid)",
    hi="Nk + 70", dims=dict(H=1, N=64, Nk=60))
add("output_longer_than_q", "O has 30 rows more than Q: rows past N are invalid in acc / l and not stored",
    dims=dict(H=1, N=70, Nk=90, NO=100))
# -- V windows
add("v_window_c0_8", "V[h, kt :+ BC, 8 :+ 64] of 96 columns: column start on 16 bytes (tensor maps)",
    c0=8, VW=96, DV=64, dims=dict(H=1, N=64, Nk=100))
add("v_window_c0_4_copy_path", "V[h, kt :+ BC, 4 :+ 64]: column start not on 16 bytes: the copy path even "
    "with tensor maps", c0=4, VW=96, DV=64, dims=dict(H=1, N=64, Nk=300))
add("v_window_past_columns", "V[h, kt :+ BC, 40 :+ 64] of 96 columns: 8 columns past V are invalid, not "
    "stored", c0=40, VW=96, DV=64, dims=dict(H=1, N=64, Nk=100))
add("v_window_c0_12_past_columns", "column start 12 (copy path) and past the columns",
    c0=12, VW=72, DV=64, dims=dict(H=1, N=64, Nk=80))
# -- ranks and heads
add("rank2_no_head", "2-D tensors: no fixed index (2-D boxes)", rank=2, dims=dict(N=70, Nk=100))
add("rank4_batch_head", "4-D tensors [B, H, N, D]: two fixed indices (4-D boxes)", rank=4,
    dims=dict(B=2, H=2, N=40, Nk=70))
add("kv_head_outside_above", "K[h + 1, ...]: the last head's keys lie outside K: no valid column in s, "
    "acc's columns empty, nothing stored for it", kvh="h + 1", dims=dict(H=2, HK=2, N=64, Nk=70))
add("kv_head_negative", "K[h - 1, ...]: head 0 reads head -1 (outside), others the previous head",
    kvh="h - 1", rank=4, dims=dict(B=1, H=2, HK=2, N=64, Nk=70))
add("grouped_heads", "K[h / 2, ...]: two query heads share a key/value head (GQA)", kvh="h / 2",
    dims=dict(H=4, HK=2, N=64, Nk=70))
# -- dtypes, head dims, column tiles, threads
add("f16", "f16 operands (wgmma .f16)", T="f16", dims=dict(H=1, N=70, Nk=300))
add("d32_bc32", "head dim 32 (32-byte rows: 64-byte swizzle on K), BC 32", D=32, BC=32, dims=dict(H=1, N=64, Nk=200))
add("d128_bc64_256t", "head dim 128 on 256 threads, BR 128 (q in registers)", BR=128, D=128, NT=256,
    dims=dict(H=1, N=130, Nk=100))
add("d128_bc128_q_shared", "128 x 128 x 128 on 256 threads: q stays in shared memory (register budget)",
    BR=128, BC=128, D=128, NT=256, dims=dict(H=1, N=130, Nk=150))
add("bc16", "BC 16: wgmma n16 for the scores, k16 for P V (one K step); 10 turns wrap the ring three times", BC=16, dims=dict(H=1, N=64, Nk=150))
add("bc128_d64", "BC 128 at head dim 64 (128 threads)", BC=128, dims=dict(H=1, N=64, Nk=150))
add("bc256_d32_not_taken", "BC 256: s [64, 256] f32 and p take 192 registers a thread, over the row layout's "
    "budget (176): the tiles stay in shared memory and the loop keeps mma.sync", BC=256, D=32,
    dims=dict(H=1, N=64, Nk=300), lowered=False)
add("br128_128t", "BR 128 on 128 threads: two 16-row blocks per warp (MT 2)", BR=128, dims=dict(H=1, N=130, Nk=90))
add("f16_d128_bc32_256t", "f16, head dim 128, BC 32 on 256 threads", T="f16", BR=128, D=128, BC=32, NT=256,
    dims=dict(H=1, N=150, Nk=77))
# -- accumulation forms and the first dot
add("dot_first", "acc = dot(p, V[..]) + acc * rescale: the dot first in the sum", form="dot_first",
    dims=dict(H=1, N=70, Nk=100))
add("plus_eq", "acc = acc * rescale; acc += dot(p, V[..])", form="pluseq", dims=dict(H=1, N=70, Nk=100))
add("first_dot_b_k_by_n", "s = dot(q, KT[h, 0 :+ D, 8 :+ BC]): B as [K, N] (MN-major), the same "
    "slice every turn", first="dot_fixed", ck=8, dims=dict(H=1, N=64, Nk=100, W=80))
add("first_dot_b_k_by_n_past", "dot(q, KT[h, 0 :+ D, 40 :+ 64]) of 80 columns: s's columns past KT "
    "invalid", first="dot_fixed", ck=40, dims=dict(H=1, N=64, Nk=100, W=80))
# -- loops in loops, two loops
add("nested_reentered", "the loop inside `for rb in range(0, 3)`: entered three times per CTA (mbarriers "
    "initialised again, parities restart)", nest=3, dims=dict(H=1, N=150, Nk=270))
add("nested_bc16_odd", "re-entered with an odd number of turns (3 of BC 32): parities left mid-ring",
    nest=2, BC=32, dims=dict(H=1, N=128, Nk=70))
add("two_loops", "two streamed loops (two rings) in one kernel: the second continues the softmax over "
    "K2 / V2", two=True, dims=dict(H=1, N=70, Nk=100, Nk2=50))
add("two_loops_second_empty", "two loops, the second of zero turns", two=True, dims=dict(H=1, N=64, Nk=100, Nk2=0))
add("two_loops_nested", "two loops inside an outer loop", two=True, nest=2, BC=32,
    dims=dict(H=1, N=128, Nk=40, Nk2=70))

add("v_column_start_per_head", "V[h, kt :+ BC, h * 4 :+ 64]: head 0 on 16 bytes (tensor maps), head 1 not "
    "(the copy path): the path is chosen per CTA at run time", c0="h * 4", VW=72, DV=64,
    dims=dict(H=2, N=64, Nk=90))
add("keys_as_values", "dot(p, K[h, kt :+ BC, :]): one tensor in both dots (two tensor maps of it)", vname="K",
    dims=dict(H=1, N=64, Nk=100))
add("step_32_overlapping_slices", "range(0, Nk, 32) over slices of 64 rows: turns overlap", step=32,
    dims=dict(H=1, N=64, Nk=100))
add("step_100_gaps", "range(0, Nk, 100) over slices of 64 rows: rows skipped between turns", step=100,
    dims=dict(H=1, N=64, Nk=230))
add("nested_lo_moves", "re-entered with bounds from the outer loop: range(rb * 40, Nk - rb * 7), a different "
    "number of turns at each entry", nest=3, lo="rb * 40", hi="Nk - rb * 7", dims=dict(H=1, N=150, Nk=130))
add("three_warpgroups", "BR 192 on 384 threads: three warpgroups", BR=192, NT=384, dims=dict(H=1, N=200, Nk=100))
add("d16_bc32", "head dim 16: K rows of 32 bytes (32-byte swizzle)", D=16, BC=32, dims=dict(H=1, N=64, Nk=70))
add("d192_dv192", "head dim 192 (three 64-column boxes per K row, V of n192)", BR=128, NT=256, D=192, BC=32,
    DV=192, dims=dict(H=1, N=100, Nk=70))
add("dv96_not_taken", "V window 96 wide: 192-byte rows fit no swizzle span: the loop keeps mma.sync", DV=96,
    dims=dict(H=1, N=64, Nk=70), lowered=False)


def _random_cases(n: int, seed: int = 7):
    """Programs drawn from the knobs above (within what the lowering documents it takes)."""
    rng = random.Random(seed)
    out = {}
    for i in range(n):
        NT = rng.choice([128, 256])
        BR = 128 if NT == 256 else rng.choice([64, 128])
        D = rng.choice([32, 64, 128] if NT == 256 else [32, 64])
        BC = rng.choice([16, 32, 64])
        T = rng.choice(["bf16", "f16"])
        rank = rng.choice([2, 3, 4])
        c0 = rng.choice([0, 0, 8, 4])
        DV = rng.choice([32, 64]) if c0 or rng.random() < 0.3 else None
        VW = (DV or D) + rng.choice([8, 16, 40]) if c0 else None
        lo = rng.choice(["0", "0", "5", "0 - 9", "BCX"]).replace("BCX", str(BC))
        hi = rng.choice(["Nk", "Nk", "Nk - 3", "Nk + 17"])
        form = rng.choice(["mul_add", "dot_first", "pluseq"])
        nest = rng.choice([1, 1, 2])
        dims = dict(N=rng.randint(1, 140 // nest) if nest > 1 else rng.randint(1, 140), Nk=rng.randint(0, 130))
        if rank >= 3:
            dims["H"] = rng.randint(1, 2)
        if rank == 4:
            dims["B"] = rng.randint(1, 2)
        kvh = rng.choice(["h", "h", "h + 1"]) if rank >= 3 else "h"
        out[f"random_{i}"] = Case("random program", BR=BR, BC=BC, D=D, NT=NT, T=T, rank=rank, DV=DV, VW=VW, c0=c0,
                                  lo=lo, hi=hi, form=form, nest=nest, kvh=kvh, dims=dims, store="plus")
    return out


CASES.update(_random_cases(6))


# ---- tests ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", case_params(CASES, "lowering"))
def test_lowering_takes_the_loop(name):
    case = CASES[name]
    _, ks = _kernel_source(case)
    assert (ks.arch == "sm_90a") == case.lowered, case.why
    if case.lowered:
        assert "tnb_wgmma_rs_" in ks.source and ks.tmaps


@needs_nvrtc
@pytest.mark.parametrize("name", case_params(CASES, "nvrtc", only=lambda c: c.lowered))
def test_lowered_source_compiles_for_sm90a(name):
    _, ks = _kernel_source(CASES[name])
    assert nvrtc_compile(ks.source, "sm_90a")


def _run_args(case, x):
    return [x[n] if not isinstance(x[n], np.ndarray) else x[n].copy() for n in _order(case)]


@pytest.mark.parametrize("name", case_params(CASES, "cpu"))
def test_cpu_executor_matches_numpy(name):
    case = CASES[name]
    mod, _ = _kernel_source(case)
    x = _arrays(case)
    want = reference(case, x, _grid(case))
    args = _run_args(case, x)
    mod.attn[_grid(case)](*args)
    _check(case, args[_order(case).index("O")], want, f"CPU executor, {name}: {case.why}")


@needs_gxx
@pytest.mark.parametrize("name", case_params(CASES, "emulate", only=lambda c: c.lowered))
def test_emulated_sm90_matches_numpy(name, tmp_path):
    """Both copy paths; copies late / products early and the reverse."""
    case = CASES[name]
    _, ks = _kernel_source(case)
    assert ks.arch == "sm_90a"
    x = _arrays(case, seed=1)
    want = reference(case, x, _grid(case))
    args = _run_args(case, x)
    exe = build_sm90(ks, args, _dims(case, x), _grid(case), tmp_path)
    for tma in (1, 0):
        for early in (0, 1):
            got = _run_args(case, x)
            run_sm90(exe, got, tmp_path, tma, early)
            _check(case, got[_order(case).index("O")], want, f"emulated sm_90 (tma={tma}, early={early}), {name}")
