"""Edges of the sm_90 GEMM-loop lowering (tilenb/codegen/sm90/gemm.py), checked without a GPU.

For each program of `CASES` (a GEMM loop at an edge of the language: valid regions, loops that
run 0 times, loop starts that are not 0, fixed leading indices, dot_t, var tiles, accumulators
used afterwards, nested loops, loops inside ifs and other loops, several loops in one kernel,
two loops sharing one accumulator, operand starts that move with the loop variable in other
ways, steps that differ from the slice length, f32/i8 operands, thread counts of 1 to 3
warpgroups):

- the lowering takes the loop, or leaves it, as the spec and the module docstring say it must
  (`Case.lowered`, with the reason in `Case.why`);
- generating for None, sm_80 and sm_90 raises nothing but a TileError, and sm_90 raises nothing
  the other targets do not;
- what the lowering takes compiles with NVRTC for sm_90a;
- the CPU executor (the semantics) gives the numpy result, computed here from the spec's rules
  (elements outside a tensor read as 0, a dot is valid over a's valid rows by b's valid
  columns, stores write only valid elements);
- the generated sm_90 CUDA, run by an emulator of TMA, mbarriers and wgmma (`run_sm90`, built on
  tests/support/cuda_emulator.py: every CUDA thread an OS thread), gives the CPU executor's result on the
  tensor-map path and on the bounds-checked copy path, once with the copies landing as late as
  the mbarriers allow and the products reading shared memory at issue, once with copies landing
  at issue and products reading as late as wgmma.wait_group allows: a missing wait or an early
  release of a stage shows as wrong data (test_emulator_catches_broken_pipelines proves it).

The emulator reads wgmma descriptors the way the PTX ISA describes them ("Matrix Descriptor
Format"; K-major: rows of the swizzle span, 8-row groups SBO apart; MN-major: atoms of span / 2
elements LBO apart along N, 8-row groups SBO apart along K; swizzle = XOR of byte-address bits
[4, 4 + log2(span / 16)) with the bits 3 above) and the accumulator fragment of m64nNk16 (lane l
of warp w: rows 16 w + l / 4 (+ 8), columns 2 (l % 4) (+ 1) of each 8-column block).

The bugs these tests found are listed below with the cases that guard them; tests marked `gpu`
run the same programs on an H100/H200 against numpy at shapes that are not multiples of the
tiles, on both copy paths.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import random
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Optional

import ml_dtypes
import numpy as np
import pytest

from support import cuda_emulator as EMU
from support.cuda_emulator import needs_gxx
import tilenb
from tilenb import ir
from tilenb.codegen import generate
from tilenb.codegen.nvrtc import nvrtc_available, nvrtc_compile
from tilenb.codegen.sm90.gemm import tma_flags

BF16 = ml_dtypes.bfloat16
NPDT = {"f16": np.float16, "bf16": BF16, "f32": np.float32, "f64": np.float64, "i8": np.int8, "i32": np.int32}
needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="NVRTC is not installed")

# ---- bugs these tests found (all fixed: eb94c90, c92fd93), and the cases that guard them ----------
# - a `var a: tile<f16>[..] = A_bf16[..]` tile (its declared type converts) was lowered on the tensor's
#   unconverted elements: typed_var_converts
# - an accumulator combined with a register tile that keeps mma.sync got the wgmma layout: UnsupportedError
#   on sm_90 only: acc_with_mma_sync_acc
# - the staged store of `acc + dot(..)` staged over the dot's own shared scratch: store_value_with_a_dot
# - a value of a smaller shape ([1, N]) swept over a register layout was not broadcast (wgmma accumulators
#   read rows past a bias row, @registers tiles got zeros): acc_starts_from_a_row,
#   test_generic_register_tile_from_a_broadcast_row
# - b's fixed index outside B emptied acc's rows, not its columns: b_fixed_index_outside (and on the generic
#   path test_generic_dot_with_b_fixed_index_outside_stores_nothing)
# - 128 accumulator registers a thread at 512/1024 threads: ptxas could not allocate a wgmma's registers:
#   regs_512_threads, regs_1024_threads
# - the CPU executor lost the batch axis for a uniform fixed index outside the tensor:
#   test_cpu_executor_slice_with_a_fixed_index_outside_the_tensor
# - a TMA read of rows the CTA stored earlier had no proxy fence: layers_read_back_in_one_kernel (GPU)
# A new bug goes in as Case.bug = {aspect: text} (aspects: lowering, generate, nvrtc, emulate, cpu, gpu),
# which makes that aspect's test xfail(strict) with the text as its reason.


# ---- numpy: the spec's rules, written out -------------------------------------------------------
def win(X, fixed, r0, c0, R, C):
    """X[fixed..., r0 :+ R, c0 :+ C] in float64 with elements outside X as 0, and the valid rows
    and columns (spec 8: inside the tensor; none when a fixed index lies outside)."""
    rows, cols = np.arange(r0, r0 + R), np.arange(c0, c0 + C)
    ok = all(0 <= f < X.shape[i] for i, f in enumerate(fixed))
    rv = (rows >= 0) & (rows < X.shape[-2]) & ok
    cv = (cols >= 0) & (cols < X.shape[-1]) & ok
    out = np.zeros((R, C))
    if ok and rv.any() and cv.any():
        sub = X[tuple(fixed)] if fixed else X
        out[np.ix_(rv, cv)] = sub[np.ix_(rows[rv], cols[cv])].astype(np.float64)
    return out, rv, cv


def put(Y, fixed, r0, c0, val, rv, cv):
    """Y[fixed..., r0 :+ R, c0 :+ C] = val, writing only valid elements inside Y (spec 8.9)."""
    R, C = val.shape
    if not all(0 <= f < Y.shape[i] for i, f in enumerate(fixed)):
        return
    sub = Y[tuple(fixed)] if fixed else Y
    for i in range(R):
        r = r0 + i
        if not rv[i] or not 0 <= r < sub.shape[0]:
            continue
        for j in range(C):
            c = c0 + j
            if cv[j] and 0 <= c < sub.shape[1]:
                sub[r, c] = val[i, j]


class Acc:
    """A tile value with its valid rows and columns (spec 8.2)."""

    def __init__(self, v, rv=None, cv=None):
        self.v = np.asarray(v, np.float64)
        self.rv = np.ones(self.v.shape[0], bool) if rv is None else rv.copy()
        self.cv = np.ones(self.v.shape[1], bool) if cv is None else cv.copy()

    def add_dot(self, a, b, trans=False):
        """acc += dot(a, b) (or dot_t): a, b are (values, valid rows, valid cols) from `win`."""
        av, arv, acv = a
        bv, brv, bcv = b
        am = av * (arv[:, None] & acv[None, :])
        bm = bv * (brv[:, None] & bcv[None, :])
        self.v = self.v + am @ (bm.T if trans else bm)
        self.rv &= arv
        self.cv &= brv if trans else bcv


def gemm_turns(lo, hi, step):
    return list(range(lo, hi, step)) if hi > lo else []


# ---- the programs ----------------------------------------------------------------------------
@dataclass
class Case:
    text: str
    lowered: bool
    why: str
    dims: Dict[str, int]
    grid: tuple
    ref: Callable                      # (x: name -> array or scalar) -> {output name: expected array}
    outs: tuple = ("C",)
    scalars: Dict[str, object] = field(default_factory=dict)
    tune: Dict[str, int] = field(default_factory=dict)
    inputs: Optional[Callable] = None  # (rng, dims) -> {name: array}, for inputs random normals do not suit
    bug: Dict[str, str] = field(default_factory=dict)   # aspect -> bug: lowering, generate, nvrtc, emulate, cpu
    gpu_dims: tuple = ()               # more shapes for the GPU test (the first of dims is used too)
    gpu: bool = True                   # whether the GPU test runs it


def _std_gemm(A, B, TM, TN, TK, lo, hi, bx, by, roff=0, coff=0, trans=False, acc=None, fa=(), fb=()):
    """One CTA of the plain GEMM loop, stored at the same offsets (numpy, the spec's rules)."""
    r, c = bx * TM + roff, by * TN + coff
    a_acc = acc if acc is not None else Acc(np.zeros((TM, TN)))
    for kt in gemm_turns(lo, hi, TK):
        a = win(A, list(fa), r, kt, TM, TK)
        b = win(B, list(fb), c, kt, TN, TK) if trans else win(B, list(fb), kt, c, TK, TN)
        a_acc.add_dot(a, b, trans)
    return a_acc, r, c


CASES: Dict[str, Case] = {}

# -- taken: every variation of the form the module docstring allows -------------------------------
CASES["plain_odd_shapes"] = Case("""
@launch(256)
@grid(cdiv(M, 128), cdiv(N, 128))
kernel g(A: tensor<bf16>[M, K], B: tensor<bf16>[K, N], C: tensor<f32>[M, N]) {
  var acc: tile<f32>[128, 128] = 0.0
  for kt in range(0, K, 64) {
    let a = A[ctx.block.x * 128 :+ 128, kt :+ 64]
    let b = B[kt :+ 64, ctx.block.y * 128 :+ 128]
    acc += dot(a, b)
  }
  C[ctx.block.x * 128 :+ 128, ctx.block.y * 128 :+ 128] = acc
}""", True, "the documented form: lets, B [K, N], 2 warpgroups split along M",
    dict(M=130, N=100, K=72), (2, 1),
    lambda x: {"C": x["A"].astype(np.float64) @ x["B"].astype(np.float64)},
    gpu_dims=(dict(M=257, N=132, K=200), dict(M=64, N=20, K=100)))


def _ref_neg_lo(x):
    C = x["C"].copy()
    M, N = C.shape
    for bx in range(-(-M // 64)):
        for by in range(-(-N // 64)):
            acc, r, c = _std_gemm(x["A"], x["B"], 64, 64, 32, -5, x["A"].shape[1] + 7, bx, by, roff=-3, coff=5)
            put(C, [], r, c, acc.v, acc.rv, acc.cv)
    return {"C": C}


CASES["neg_lo_offsets"] = Case("""
@launch(128)
@grid(cdiv(M, 64), cdiv(N, 64))
kernel g(A: tensor<f16>[M, K], B: tensor<f16>[K, N], C: tensor<f32>[M, N]) {
  var acc: tile<f32>[64, 64] = 0.0
  for kt in range(0 - 5, K + 7, 32) {
    acc += dot(A[ctx.block.x * 64 - 3 :+ 64, kt :+ 32], B[kt :+ 32, ctx.block.y * 64 + 5 :+ 64])
  }
  C[ctx.block.x * 64 - 3 :+ 64, ctx.block.y * 64 + 5 :+ 64] = acc
}""", True, "a start below 0 and an end past K: the turns read zeros there; starts off the tile grid",
    dict(M=70, N=100, K=40), (2, 2), _ref_neg_lo, gpu_dims=(dict(M=200, N=132, K=104),))


def _ref_zero_trip(x):
    C = x["C"].copy()
    acc = Acc(np.full((64, 64), 3.0))
    put(C, [], 0, 0, acc.v, acc.rv, acc.cv)
    return {"C": C}


CASES["zero_trip"] = Case("""
@launch(128)
kernel g(A: tensor<bf16>[M, K], B: tensor<bf16>[K, N], C: tensor<f32>[M, N]) {
  var acc: tile<f32>[64, 64] = 3.0
  for kt in range(K, 0, 32) {
    acc += dot(A[0 - 10 :+ 64, kt :+ 32], B[kt :+ 32, 5 :+ 64])
  }
  C[0 :+ 64, 0 :+ 64] = acc
}""", True, "a loop that runs 0 times: acc and its valid region unchanged (no narrowing to a's rows)",
    dict(M=50, N=60, K=40), (1,), _ref_zero_trip)


def _ref_k0(x):
    A, B, Bias, C = x["A"], x["B"], x["Bias"], x["C"].copy()
    M, N = C.shape
    for bx in range(-(-M // 128)):
        for by in range(-(-N // 128)):
            init = win(Bias, [], bx * 128, by * 128, 128, 128)
            acc = Acc(init[0] * 2.0, init[1], init[2])
            acc, r, c = _std_gemm(A, B, 128, 128, 32, x["k0"], A.shape[1], bx, by, trans=True, acc=acc)
            put(C, [], r, c, acc.v * 0.5, acc.rv, acc.cv)
    return {"C": C}


CASES["k0_start_var_tiles_dot_t_bias"] = Case("""
@launch(256)
@grid(cdiv(M, 128), cdiv(N, 128))
kernel g(A: tensor<bf16>[M, K], B: tensor<bf16>[N, K], Bias: tensor<f32>[M, N], C: tensor<f32>[M, N], k0: i32) {
  var acc: tile<f32>[128, 128] = Bias[ctx.block.x * 128 :+ 128, ctx.block.y * 128 :+ 128] * 2.0
  for kt in range(k0, K, 32) {
    var b = B[ctx.block.y * 128 :+ 128, kt :+ 32]
    var a = A[ctx.block.x * 128 :+ 128, kt :+ 32]
    acc += dot_t(a, b)
  }
  C[ctx.block.x * 128 :+ 128, ctx.block.y * 128 :+ 128] = acc * 0.5
}""", True, "var tiles (in either order), dot_t, a start from a scalar, an accumulator that starts from a tensor",
    dict(M=150, N=140, K=76), (2, 2), _ref_k0, scalars=dict(k0=12), gpu_dims=(dict(M=190, N=140, K=200),))


def _ref_batched(x):
    A, B, C = x["A"], x["B"], x["C"].copy()
    Z, M, N = C.shape
    for z in range(Z):
        for bx in range(-(-M // 64)):
            for by in range(-(-N // 128)):
                acc, r, c = _std_gemm(A, B, 64, 128, 64, 0, A.shape[2], bx, by, fa=(z,), fb=(Z - 1 - z,))
                put(C, [z], r, c, acc.v, acc.rv, acc.cv)
    return {"C": C}


CASES["batched_fixed_index"] = Case("""
@launch(128)
@grid(cdiv(M, 64), cdiv(N, 128), Z)
kernel g(A: tensor<f16>[Z, M, K], B: tensor<f16>[Z, K, N], C: tensor<f32>[Z, M, N]) {
  let z = ctx.block.z
  var acc: tile<f32>[64, 128] = 0.0
  for kt in range(0, K, 64) {
    acc += dot(A[z, ctx.block.x * 64 :+ 64, kt :+ 64], B[Z - 1 - z, kt :+ 64, ctx.block.y * 128 :+ 128])
  }
  C[z, ctx.block.x * 64 :+ 64, ctx.block.y * 128 :+ 128] = acc
}""", True, "3-D operands sliced with a fixed leading index (an expression, not the loop variable)",
    dict(Z=2, M=70, N=136, K=72), (2, 2, 2), _ref_batched, gpu_dims=(dict(Z=3, M=100, N=200, K=100),))


def _ref_4d(x):
    A, B, C = x["A"], x["B"], x["C"].copy()
    P, Q, M, N = C.shape
    for q in range(Q):
        for bx in range(-(-M // 64)):
            acc, r, c = _std_gemm(A, B, 64, 64, 64, 0, A.shape[3], bx, 0, trans=True, fa=(1, q), fb=(0, q))
            put(C, [1, q], r, c, acc.v, acc.rv, acc.cv)
    return {"C": C}


CASES["four_d_two_fixed"] = Case("""
@launch(128)
@grid(cdiv(M, 64), Q)
kernel g(A: tensor<bf16>[P, Q, M, K], B: tensor<bf16>[P, Q, N, K], C: tensor<f32>[P, Q, M, N]) {
  var acc: tile<f32>[64, 64] = 0.0
  for kt in range(0, K, 64) {
    acc += dot_t(A[1, ctx.block.y, ctx.block.x * 64 :+ 64, kt :+ 64], B[0, ctx.block.y, 0 :+ 64, kt :+ 64])
  }
  C[1, ctx.block.y, ctx.block.x * 64 :+ 64, 0 :+ 64] = acc
}""", True, "4-D operands with two fixed indices (tensor maps of rank 4)",
    dict(P=2, Q=3, M=70, N=40, K=72), (2, 3), _ref_4d)


def _ref_two_loops(x):
    A, B, A2, B2, C = x["A"], x["B"], x["A2"], x["B2"], x["C"].copy()
    acc = Acc(np.zeros((64, 128)))
    for kt in gemm_turns(0, A.shape[1], 32):
        acc.add_dot(win(A, [], 0, kt, 64, 32), win(B, [], kt, 0, 32, 128))
    for kt in gemm_turns(0, A2.shape[1], 64):
        acc.add_dot(win(A2, [], 0, kt, 64, 64), win(B2, [], 0, kt, 128, 64), True)
    put(C, [], 0, 0, acc.v, acc.rv, acc.cv)
    return {"C": C}


CASES["two_loops_one_acc"] = Case("""
@launch(128)
kernel g(A: tensor<f16>[M, K], B: tensor<f16>[K, N], A2: tensor<f16>[M, K2], B2: tensor<f16>[N, K2], C: tensor<f32>[M, N]) {
  var acc: tile<f32>[64, 128] = 0.0
  for kt in range(0, K, 32) {
    acc += dot(A[0 :+ 64, kt :+ 32], B[kt :+ 32, 0 :+ 128])
  }
  for kt in range(0, K2, 64) {
    acc += dot_t(A2[0 :+ 64, kt :+ 64], B2[0 :+ 128, kt :+ 64])
  }
  C[0 :+ 64, 0 :+ 128] = acc
}""", True, "two GEMM loops (K tiles 32 and 64, B [K, N] and [N, K]) into one accumulator: one layout",
    dict(M=50, N=100, K=40, K2=100), (1,), _ref_two_loops)


def _ref_two_accs(x):
    A, B, C = x["A"], x["B"], x["C"].copy()
    a1, a2 = Acc(np.zeros((64, 64))), Acc(np.full((64, 64), 1.0))
    for kt in gemm_turns(0, A.shape[1], 32):
        a1.add_dot(win(A, [], 0, kt, 64, 32), win(B, [], kt, 0, 32, 64))
    for kt in gemm_turns(8, A.shape[1], 16):
        a2.add_dot(win(A, [], 0, kt, 64, 16), win(B, [], kt, 64, 16, 64))
    put(C, [], 0, 0, a1.v - a2.v * 0.5, a1.rv & a2.rv, a1.cv & a2.cv)
    return {"C": C}


CASES["two_accs_combined"] = Case("""
@launch(128)
kernel g(A: tensor<bf16>[M, K], B: tensor<bf16>[K, N], C: tensor<f32>[M, N]) {
  var acc: tile<f32>[64, 64] = 0.0
  var acc2: tile<f32>[64, 64] = 1.0
  for kt in range(0, K, 32) {
    acc += dot(A[0 :+ 64, kt :+ 32], B[kt :+ 32, 0 :+ 64])
  }
  for kt in range(8, K, 16) {
    acc2 += dot(A[0 :+ 64, kt :+ 16], B[kt :+ 16, 64 :+ 64])
  }
  C[0 :+ 64, 0 :+ 64] = acc - acc2 * 0.5
}""", True, "two accumulators, both lowered (the same layout), combined in one store",
    dict(M=70, N=100, K=72), (1,), _ref_two_accs)


def _ref_used_after(x):
    A, B, C, D, S = x["A"], x["B"], x["C"].copy(), x["D"].copy(), x["S"].copy()
    acc = Acc(np.zeros((64, 64)))
    for kt in gemm_turns(0, A.shape[1], 32):
        acc.add_dot(win(A, [], 3, kt, 64, 32), win(B, [], kt, 0, 32, 64))
    acc.v = acc.v * 0.5 + 1.0
    y = acc.v * 2.0
    put(C, [], 0, 0, y, acc.rv, acc.cv)
    rs = (y * acc.cv[None, :]).sum(axis=1, keepdims=True)
    put(S, [], 0, 0, rs, acc.rv, np.ones(1, bool))
    put(D, [], 0, 0, np.where(acc.v > 0.0, acc.v, 0.0), acc.rv, acc.cv)
    return {"C": C, "D": D, "S": S}


CASES["acc_used_afterwards"] = Case("""
@launch(128)
kernel g(A: tensor<f16>[M, K], B: tensor<f16>[K, N], C: tensor<f32>[M, N], D: tensor<f16>[M, N], S: tensor<f32>[M, 4]) {
  var acc: tile<f32>[64, 64] = 0.0
  for kt in range(0, K, 32) {
    acc += dot(A[3 :+ 64, kt :+ 32], B[kt :+ 32, 0 :+ 64])
  }
  acc = acc * 0.5
  acc += 1.0
  var y = acc * 2.0
  C[0 :+ 64, 0 :+ 64] = y
  S[0 :+ 64, 0 :+ 1] = rowsum(y)
  D[0 :+ 64, 0 :+ 64] = where(acc > 0.0, acc, 0.0)
}""", True, "elementwise updates of acc, a shared copy reduced by rows, an f16 store of an expression",
    dict(M=50, N=60, K=40), (1,), _ref_used_after, outs=("C", "D", "S"))


def _ref_nested(x):
    A, B, C = x["A"], x["B"], x["C"].copy()
    acc = Acc(np.zeros((64, 64)))
    for ko in gemm_turns(0, A.shape[1], 64):
        for kt in gemm_turns(ko, ko + 64, 32):
            acc.add_dot(win(A, [], 0, kt, 64, 32), win(B, [], kt, 0, 32, 64))
        acc.v = acc.v * 0.5
    put(C, [], 0, 0, acc.v, acc.rv, acc.cv)
    return {"C": C}


CASES["nested_split_k"] = Case("""
@launch(128)
kernel g(A: tensor<f16>[M, K], B: tensor<f16>[K, N], C: tensor<f32>[M, N]) {
  var acc: tile<f32>[64, 64] = 0.0
  for ko in range(0, K, 64) {
    for kt in range(ko, ko + 64, 32) {
      acc += dot(A[0 :+ 64, kt :+ 32], B[kt :+ 32, 0 :+ 64])
    }
    acc = acc * 0.5
  }
  C[0 :+ 64, 0 :+ 64] = acc
}""", True, "a GEMM loop inside another loop whose variable gives its bounds; acc changed between",
    dict(M=70, N=60, K=136), (1,), _ref_nested)


def _ref_if(x):
    A, B, C = x["A"], x["B"], x["C"].copy()
    acc = Acc(np.zeros((64, 64)))
    if A.shape[1] > 40:
        for kt in gemm_turns(0, A.shape[1], 32):
            acc.add_dot(win(A, [], 0, kt, 64, 32), win(B, [], kt, 0, 32, 64))
    else:
        acc = Acc(np.ones((64, 64)))
    put(C, [], 0, 0, acc.v, acc.rv, acc.cv)
    return {"C": C}


CASES["inside_if"] = Case("""
@launch(128)
kernel g(A: tensor<bf16>[M, K], B: tensor<bf16>[K, N], C: tensor<f32>[M, N]) {
  var acc: tile<f32>[64, 64] = 0.0
  if K > 40 {
    for kt in range(0, K, 32) {
      acc += dot(A[0 :+ 64, kt :+ 32], B[kt :+ 32, 0 :+ 64])
    }
  } else {
    acc = 1.0
  }
  C[0 :+ 64, 0 :+ 64] = acc
}""", True, "a GEMM loop under uniform control", dict(M=70, N=60, K=72), (1,), _ref_if,
    gpu_dims=(dict(M=70, N=60, K=36),))


def _ref_outer_rows(x):
    A, B, C = x["A"], x["B"], x["C"].copy()
    M = C.shape[0]
    for r in gemm_turns(0, M, 64):
        acc = Acc(np.zeros((64, 64)))
        for kt in gemm_turns(r, A.shape[1], 16):
            acc.add_dot(win(A, [], r, kt, 64, 16), win(B, [], kt, 0, 16, 64))
        put(C, [], r, 0, acc.v, acc.rv, acc.cv)
    return {"C": C}


CASES["outer_loop_rows"] = Case("""
@launch(128)
kernel g(A: tensor<f16>[M, K], B: tensor<f16>[K, N], C: tensor<f32>[M, N]) {
  for r in range(0, M, 64) {
    var acc: tile<f32>[64, 64] = 0.0
    for kt in range(r, K, 16) {
      acc += dot(A[r :+ 64, kt :+ 16], B[kt :+ 16, 0 :+ 64])
    }
    C[r :+ 64, 0 :+ 64] = acc
  }
}""", True, "a GEMM loop run once per turn of an outer loop whose variable starts it and its rows",
    dict(M=150, N=60, K=200), (1,), _ref_outer_rows)


def _ref_fn_twice(x):
    A, B, C = x["A"], x["B"], x["C"].copy()
    M = C.shape[0]
    for bx in range(-(-M // 64)):
        acc = Acc(np.zeros((64, 64)))
        for c0 in (0, 64):
            for kt in gemm_turns(0, A.shape[1], 32):
                acc.add_dot(win(A, [], bx * 64, kt, 64, 32), win(B, [], kt, c0, 32, 64))
        put(C, [], bx * 64, 0, acc.v, acc.rv, acc.cv)
    return {"C": C}


CASES["statement_function_twice"] = Case("""
fn mm(acc, X, Y, r, c, K) {
  for kt in range(0, K, 32) {
    let a = X[r :+ 64, kt :+ 32]
    let b = Y[kt :+ 32, c :+ 64]
    acc += dot(a, b)
  }
}
@launch(128)
@grid(cdiv(M, 64))
kernel g(A: tensor<f16>[M, K], B: tensor<f16>[K, N], C: tensor<f32>[M, N]) {
  var acc: tile<f32>[64, 64] = 0.0
  mm(acc, A, B, ctx.block.x * 64, 0, K)
  mm(acc, A, B, ctx.block.x * 64, 64, K)
  C[ctx.block.x * 64 :+ 64, 0 :+ 64] = acc
}""", True, "the loop inside a statement function called twice (two lowered loops, one accumulator)",
    dict(M=100, N=100, K=40), (2,), _ref_fn_twice)


def _ref_aat(x):
    A, C = x["A"], x["C"].copy()
    M = C.shape[0]
    for bx in range(-(-M // 64)):
        acc = Acc(np.zeros((64, 64)))
        for kt in gemm_turns(0, A.shape[1], 32):
            a = win(A, [], bx * 64, kt, 64, 32)
            acc.add_dot(a, a, True)
        put(C, [], bx * 64, bx * 64, acc.v, acc.rv, acc.cv)
    return {"C": C}


CASES["same_let_both_operands"] = Case("""
@launch(128)
@grid(cdiv(M, 64))
kernel g(A: tensor<f16>[M, K], C: tensor<f32>[M, M]) {
  var acc: tile<f32>[64, 64] = 0.0
  for kt in range(0, K, 32) {
    let a = A[ctx.block.x * 64 :+ 64, kt :+ 32]
    acc += dot_t(a, a)
  }
  C[ctx.block.x * 64 :+ 64, ctx.block.x * 64 :+ 64] = acc
}""", True, "one let as both operands of dot_t (A A^T blocks): two tensor maps of one tensor",
    dict(M=100, K=72), (2,), _ref_aat)


def _ref_f16_out(x):
    A, B, D = x["A"], x["B"], x["D"].copy()
    M, N = D.shape
    for bx in range(-(-M // 128)):
        for by in range(-(-N // 64)):
            acc, r, c = _std_gemm(A, B, 128, 64, 64, 0, A.shape[1], bx, by, roff=-3, coff=-5, trans=True)
            put(D, [], bx * 128 + 1, by * 64 + 3, acc.v, acc.rv, acc.cv)
    return {"D": D}


CASES["bf16_store_misaligned"] = Case("""
@launch(256)
@grid(cdiv(M, 128), cdiv(N, 64))
kernel g(A: tensor<bf16>[M, K], B: tensor<bf16>[N, K], D: tensor<bf16>[M, N]) {
  var acc: tile<f32>[128, 64] = 0.0
  for kt in range(0, K, 64) {
    acc += dot_t(A[ctx.block.x * 128 - 3 :+ 128, kt :+ 64], B[ctx.block.y * 64 - 5 :+ 64, kt :+ 64])
  }
  D[ctx.block.x * 128 + 1 :+ 128, ctx.block.y * 64 + 3 :+ 64] = acc
}""", True, "a staged store of 16-bit elements to rows that are not 16-byte aligned (the per-element path)",
    dict(M=140, N=100, K=72), (2, 2), _ref_f16_out, outs=("D",))


def _ref_k100(x):
    return {"C": x["A"].astype(np.float64)[:, :100] @ x["B"].astype(np.float64)[:100, :]}


CASES["row_stride_200_bytes"] = Case("""
@launch(128)
@grid(cdiv(M, 64), cdiv(N, 64))
kernel g(A: tensor<f16>[M, 100], B: tensor<f16>[100, N], C: tensor<f32>[M, N]) {
  var acc: tile<f32>[64, 64] = 0.0
  for kt in range(0, 100, 32) {
    acc += dot(A[ctx.block.x * 64 :+ 64, kt :+ 32], B[kt :+ 32, ctx.block.y * 64 :+ 64])
  }
  C[ctx.block.x * 64 :+ 64, ctx.block.y * 64 :+ 64] = acc
}""", True, "a literal K whose 200-byte rows no tensor map describes: the same kernel, copy path at launch",
    dict(M=70, N=68), (2, 2), _ref_k100)


def _ref_two_stages(x):
    A, B, X, C = x["A"], x["B"], x["X"], x["C"].copy()
    acc = Acc(np.zeros((64, 64)))
    for kt in gemm_turns(0, A.shape[1], 64):
        acc.add_dot(win(A, [], 0, kt, 64, 64), win(B, [], kt, 0, 64, 64))
    xv, xr, xc = win(X, [], 0, 0, 1, 64)
    put(C, [], 0, 0, acc.v + xv, acc.rv & xr[0], acc.cv & xc)
    return {"C": C}


CASES["ring_of_two_stages"] = Case("""
@dynshared
@launch(128)
kernel g(A: tensor<f16>[M, K], B: tensor<f16>[K, N], X: tensor<f32>[R, 4096], C: tensor<f32>[M, N]) {
  var x = X[0 :+ 12, :]
  var acc: tile<f32>[64, 64] = 0.0
  for kt in range(0, K, 64) {
    acc += dot(A[0 :+ 64, kt :+ 64], B[kt :+ 64, 0 :+ 64])
  }
  C[0 :+ 64, 0 :+ 64] = acc + x[0 :+ 1, 0 :+ 64]
}""", True, "a 192 KB tile alive across the loop leaves room for 2 stages (10 turns: the ring wraps 5 times)",
    dict(M=70, N=68, K=600, R=12), (1,), _ref_two_stages)


def _layers_inputs(rng, d):
    H = np.full((d["L"], d["M"], 128), np.nan, np.float32).astype(np.float16)
    H[0] = rng.standard_normal((d["M"], 128))
    return {"H": H, "W": (rng.standard_normal((d["L"] - 1, 128, 128)) / 11.3).astype(np.float16)}


def _ref_layers(x):
    H, W = x["H"].copy(), x["W"]
    for layer in range(H.shape[0] - 1):
        H[layer + 1] = (H[layer].astype(np.float64) @ W[layer].astype(np.float64)).astype(np.float32).astype(np.float16)
    return {"H": H}


CASES["layers_read_back_in_one_kernel"] = Case("""
@launch(128)
@grid(cdiv(M, 64))
kernel g(H: tensor<f16>[L, M, 128], W: tensor<f16>[L1, 128, 128]) {
  let r = ctx.block.x * 64
  for layer in range(0, L - 1, 1) {
    var acc: tile<f32>[64, 128] = 0.0
    for kt in range(0, 128, 64) {
      acc += dot(H[layer, r :+ 64, kt :+ 64], W[layer, kt :+ 64, 0 :+ 128])
    }
    H[layer + 1, r :+ 64, 0 :+ 128] = acc
  }
}""", True, "each layer's GEMM loop reads (by tensor map) the rows this CTA stored the layer before: on the GPU "
    "the copies must see the CTA's own earlier stores", dict(L=3, L1=2, M=100), (2,), _ref_layers, outs=(),
    inputs=_layers_inputs)


def _plain(TM, TN, TK, trans):
    def ref(x):
        A, B = x["A"].astype(np.float64), x["B"].astype(np.float64)
        C = x["C"].copy()
        M, N = C.shape
        want = A @ (B.T if trans else B)
        r, c = min(M, TM), min(N, TN)
        C[:r, :c] = want[:r, :c]
        return {"C": C}
    return ref


_SHAPES = """
@launch({NT})
kernel g(A: tensor<f16>[M, K], B: tensor<f16>[{BD}], C: tensor<f32>[M, N]) {{
  var acc: tile<f32>[{TM}, {TN}] = 0.0
  for kt in range(0, K, {TK}) {{
    acc += {DOT}
  }}
  C[0 :+ {TM}, 0 :+ {TN}] = acc
}}"""


def _shape_case(NT, TM, TN, TK, trans, why, dims, lowered=True, **kw):
    dot = (f"dot_t(A[0 :+ {TM}, kt :+ {TK}], B[0 :+ {TN}, kt :+ {TK}])" if trans
           else f"dot(A[0 :+ {TM}, kt :+ {TK}], B[kt :+ {TK}, 0 :+ {TN}])")
    text = _SHAPES.format(NT=NT, TM=TM, TN=TN, TK=TK, BD="N, K" if trans else "K, N", DOT=dot)
    return Case(text, lowered, why, dims, (1,), _plain(TM, TN, TK, trans), **kw)


CASES["three_warpgroups"] = _shape_case(384, 192, 64, 32, False, "384 threads: 3 warpgroups along M",
                                        dict(M=200, N=60, K=72))
CASES["split_n_dot_t"] = _shape_case(256, 64, 128, 16, True, "2 warpgroups split along N (B [N, K])",
                                     dict(M=50, N=120, K=40))
CASES["mn_major_swizzle_32"] = _shape_case(128, 64, 16, 16, False, "B [K, N] 16 columns wide: 32-byte swizzle",
                                           dict(M=70, N=12, K=40))
CASES["mn_major_swizzle_64"] = _shape_case(128, 128, 32, 64, False, "B [K, N] 32 columns wide: 64-byte swizzle",
                                           dict(M=70, N=36, K=136))
CASES["mn_major_three_chunks"] = _shape_case(128, 64, 192, 32, False, "B [K, N] 192 wide: three 64-column atoms",
                                             dict(M=50, N=200, K=72))
CASES["n_24_dot_t"] = _shape_case(128, 64, 24, 64, True, "wgmma n24 (N a multiple of 8, B [N, K])",
                                  dict(M=70, N=20, K=100))

# -- left to mma.sync: the loop is not of the form, or cannot be laid out -----------------------
CASES["step_differs_from_slice"] = Case("""
@launch(128)
kernel g(A: tensor<bf16>[M, K], B: tensor<bf16>[K, N], C: tensor<f32>[M, N]) {
  var acc: tile<f32>[64, 64] = 0.0
  for kt in range(0, K, 64) {
    acc += dot(A[0 :+ 64, kt :+ 32], B[kt :+ 32, 0 :+ 64])
  }
  C[0 :+ 64, 0 :+ 64] = acc
}""", False, "step 64 over slices of 32: the turns skip half of K", dict(M=70, N=60, K=136), (1,),
    lambda x: {"C": _skip_ref(x)})


def _skip_ref(x):
    A, B, C = x["A"], x["B"], x["C"].copy()
    acc = Acc(np.zeros((64, 64)))
    for kt in gemm_turns(0, A.shape[1], 64):
        acc.add_dot(win(A, [], 0, kt, 64, 32), win(B, [], kt, 0, 32, 64))
    put(C, [], 0, 0, acc.v, acc.rv, acc.cv)
    return C


def _shifted_ref(x):
    A, B, C = x["A"], x["B"], x["C"].copy()
    acc = Acc(np.zeros((64, 64)))
    for kt in gemm_turns(0, A.shape[1], 32):
        acc.add_dot(win(A, [], 0, kt + 8, 64, 32), win(B, [], kt + 8, 0, 32, 64))
    put(C, [], 0, 0, acc.v, acc.rv, acc.cv)
    return {"C": C}


CASES["k_start_shifted"] = Case("""
@launch(128)
kernel g(A: tensor<bf16>[M, K], B: tensor<bf16>[K, N], C: tensor<f32>[M, N]) {
  var acc: tile<f32>[64, 64] = 0.0
  for kt in range(0, K, 32) {
    acc += dot(A[0 :+ 64, kt + 8 :+ 32], B[kt + 8 :+ 32, 0 :+ 64])
  }
  C[0 :+ 64, 0 :+ 64] = acc
}""", False, "K slices start at kt + 8, not the loop variable", dict(M=70, N=60, K=72), (1,), _shifted_ref)


def _rows_move_ref(x):
    A, B, C = x["A"], x["B"], x["C"].copy()
    acc = Acc(np.zeros((64, 64)))
    for kt in gemm_turns(0, A.shape[1], 32):
        acc.add_dot(win(A, [], kt // 4, kt, 64, 32), win(B, [], kt, 0, 32, 64))
    put(C, [], 0, 0, acc.v, acc.rv, acc.cv)
    return {"C": C}


CASES["rows_move_with_kt"] = Case("""
@launch(128)
kernel g(A: tensor<bf16>[M, K], B: tensor<bf16>[K, N], C: tensor<f32>[M, N]) {
  var acc: tile<f32>[64, 64] = 0.0
  for kt in range(0, K, 32) {
    acc += dot(A[kt / 4 :+ 64, kt :+ 32], B[kt :+ 32, 0 :+ 64])
  }
  C[0 :+ 64, 0 :+ 64] = acc
}""", False, "a's rows start at kt / 4: they move with the loop", dict(M=90, N=60, K=72), (1,), _rows_move_ref)


def _fixed_moves_ref(x):
    A, B, C = x["A"], x["B"], x["C"].copy()
    acc = Acc(np.zeros((64, 64)))
    for kt in gemm_turns(0, A.shape[2], 32):
        acc.add_dot(win(A, [kt // 32], 0, kt, 64, 32), win(B, [], kt, 0, 32, 64))
    put(C, [], 0, 0, acc.v, acc.rv, acc.cv)
    return {"C": C}


CASES["fixed_index_moves_with_kt"] = Case("""
@launch(128)
kernel g(A: tensor<bf16>[Z, M, K], B: tensor<bf16>[K, N], C: tensor<f32>[M, N]) {
  var acc: tile<f32>[64, 64] = 0.0
  for kt in range(0, K, 32) {
    acc += dot(A[kt / 32, 0 :+ 64, kt :+ 32], B[kt :+ 32, 0 :+ 64])
  }
  C[0 :+ 64, 0 :+ 64] = acc
}""", False, "a fixed index that moves with the loop variable", dict(Z=3, M=70, N=60, K=72), (1,),
    _fixed_moves_ref)


def _loop_ref(x, tk=32):
    A, B, C = x["A"], x["B"], x["C"].copy()
    acc = Acc(np.zeros((64, 64)))
    for kt in gemm_turns(0, A.shape[1], tk):
        acc.add_dot(win(A, [], 0, kt, 64, tk), win(B, [], kt, 0, tk, 64))
    put(C, [], 0, 0, acc.v, acc.rv, acc.cv)
    return {"C": C}


_BODY = """
{ATTR}@launch({NT})
kernel g(A: tensor<{T}>[M, K], B: tensor<{T}>[K, N], C: tensor<{OT}>[M, N]) {{
  var acc: tile<{OT}>[64, 64] = 0
  {HEAD} kt in range(0, K, {TK}) {{
    {STMT}
  }}
  {TAIL}
}}"""


def _variant(why, T="bf16", OT="f32", NT=128, TK=32, HEAD="for", STMT=None, TAIL=None, ATTR="", lowered=False, **kw):
    stmt = STMT or f"acc += dot(A[0 :+ 64, kt :+ {TK}], B[kt :+ {TK}, 0 :+ 64])"
    tail = TAIL or "C[0 :+ 64, 0 :+ 64] = acc"
    text = _BODY.format(ATTR=ATTR, NT=NT, T=T, OT=OT, TK=TK, HEAD=HEAD, STMT=stmt, TAIL=tail)
    return Case(text, lowered, why, dict(M=70, N=60, K=72), (1,), lambda x: _loop_ref(x, TK), **kw)


CASES["plain_assign_not_plus_eq"] = _variant("acc = acc + dot(..): the GEMM loop of the += form (spec 12)",
                                             STMT="acc = acc + dot(A[0 :+ 64, kt :+ 32], B[kt :+ 32, 0 :+ 64])",
                                             lowered=True)
CASES["unrolled"] = _variant("for<unroll 2>: never a GEMM loop (spec 9)", HEAD="for<unroll 2>")
CASES["f32_operands"] = _variant("f32 operands: wgmma here takes f16/bf16 only", T="f32", TK=16)
CASES["i8_operands"] = _variant("i8 operands accumulate in i32", T="i8", OT="i32",
                                inputs=lambda rng, d: {"A": rng.integers(-4, 5, (d["M"], d["K"])).astype(np.int8),
                                                       "B": rng.integers(-4, 5, (d["K"], d["N"])).astype(np.int8)})
CASES["acc_reduced_directly"] = _variant("rowsum(acc) needs other threads' elements: acc stays in shared memory",
                                         TAIL="C[0 :+ 64, 0 :+ 1] = rowsum(acc)",
                                         gpu=True)
CASES["k_tile_8"] = _variant("a K tile of 8 (16 bytes) is below every swizzle span", TK=8)
CASES["threads_64"] = _variant("64 threads: less than a warpgroup", NT=64)
CASES["unused_let"] = _variant("a let in the body the dot does not read",
                               STMT="let x = A[0 :+ 64, kt :+ 32]\n    acc += dot(A[0 :+ 64, kt :+ 32], B[kt :+ 32, 0 :+ 64])")


def _ref_rowsum(x):
    A, B, C = x["A"], x["B"], x["C"].copy()
    acc = Acc(np.zeros((64, 64)))
    for kt in gemm_turns(0, A.shape[1], 32):
        acc.add_dot(win(A, [], 0, kt, 64, 32), win(B, [], kt, 0, 32, 64))
    rs = (acc.v * acc.cv[None, :]).sum(axis=1, keepdims=True)
    put(C, [], 0, 0, rs, acc.rv, np.ones(1, bool))
    return {"C": C}


CASES["acc_reduced_directly"].ref = _ref_rowsum
CASES["tile_32_rows"] = Case(CASES["plain_odd_shapes"].text.replace("128", "32"), False,
                             "32-row tiles: below wgmma's 64 (and the grid is 32-row tiles)",
                             dict(M=70, N=60, K=72), (3, 2),
                             lambda x: {"C": x["A"].astype(np.float64) @ x["B"].astype(np.float64)})
CASES["mixed_majors_256_threads"] = Case("""
@launch(256)
kernel g(A: tensor<bf16>[M, K], B: tensor<bf16>[K, N], Bt: tensor<bf16>[N, K], C: tensor<f32>[M, N]) {
  var acc: tile<f32>[64, 64] = 0.0
  for kt in range(0, K, 32) {
    acc += dot(A[0 :+ 64, kt :+ 32], B[kt :+ 32, 0 :+ 64])
  }
  for kt in range(0, K, 32) {
    acc += dot_t(A[0 :+ 64, kt :+ 32], Bt[0 :+ 64, kt :+ 32])
  }
  C[0 :+ 64, 0 :+ 64] = acc
}""", False, "64 x 64 on 2 warpgroups needs 32-column halves, which B [K, N] (64-column atoms) cannot give: "
    "the accumulator's other loop goes back to mma.sync with it", dict(M=70, N=60, K=72), (1,),
    lambda x: {"C": _mixed_ref(x)})


def _mixed_ref(x):
    A, B, Bt = (x[k].astype(np.float64) for k in ("A", "B", "Bt"))
    C = x["C"].copy()
    want = A @ B + A @ Bt.T
    r, c = min(64, C.shape[0]), min(64, C.shape[1])
    C[:r, :c] = want[:r, :c]
    return C


# -- bugs ---------------------------------------------------------------------------------------
def _typed_inputs(rng, d):
    A = rng.uniform(0.5, 1.0, (d["M"], d["K"])).astype(BF16)
    A[5, 3] = 1e5                                   # no f16 holds it: the declared f16 tile makes it inf
    return {"A": A, "B": rng.uniform(0.5, 1.0, (d["K"], d["N"])).astype(BF16)}


def _typed_ref(x):
    A = x["A"].astype(np.float16).astype(np.float64)   # the var tile's type converts (spec 4.5)
    B = x["B"].astype(np.float16).astype(np.float64)
    C = x["C"].copy()
    with np.errstate(invalid="ignore"):
        want = A @ B
    r, c = min(64, C.shape[0]), min(64, C.shape[1])
    C[:r, :c] = want[:r, :c]
    return {"C": C}


CASES["typed_var_converts"] = Case("""
@launch(128)
kernel g(A: tensor<bf16>[M, K], B: tensor<bf16>[K, N], C: tensor<f32>[M, N]) {
  var acc: tile<f32>[64, 64] = 0.0
  for kt in range(0, K, 32) {
    var a: tile<f16>[64, 32] = A[0 :+ 64, kt :+ 32]
    var b: tile<f16>[32, 64] = B[kt :+ 32, 0 :+ 64]
    acc += dot(a, b)
  }
  C[0 :+ 64, 0 :+ 64] = acc
}""", False, "the tiles' declared f16 converts the bf16 tensor's elements: wgmma bf16 would skip that",
    dict(M=70, N=60, K=72), (1,), _typed_ref, inputs=_typed_inputs)


def _mixed_layout_ref(x):
    A, B, C = x["A"], x["B"], x["C"].copy()
    a1, a2 = Acc(np.zeros((64, 64))), Acc(np.zeros((64, 64)))
    for kt in gemm_turns(0, A.shape[1], 32):
        a1.add_dot(win(A, [], 0, kt, 64, 32), win(B, [], kt, 0, 32, 64))
        a2.add_dot(win(A, [], 0, kt, 64, 16), win(B, [], kt, 0, 16, 64))
    put(C, [], 0, 0, a1.v + a2.v, a1.rv & a2.rv, a1.cv & a2.cv)
    return {"C": C}


CASES["acc_with_mma_sync_acc"] = Case("""
@launch(128)
kernel g(A: tensor<bf16>[M, K], B: tensor<bf16>[K, N], C: tensor<f32>[M, N]) {
  var acc: tile<f32>[64, 64] = 0.0
  var acc2: tile<f32>[64, 64] = 0.0
  for kt in range(0, K, 32) {
    acc += dot(A[0 :+ 64, kt :+ 32], B[kt :+ 32, 0 :+ 64])
  }
  for kt in range(0, K, 32) {
    acc2 += dot(A[0 :+ 64, kt :+ 16], B[kt :+ 16, 0 :+ 64])
  }
  C[0 :+ 64, 0 :+ 64] = acc + acc2
}""", False, "acc2's loop (slices of 16, step 32) stays on mma.sync; acc + acc2 needs one register layout",
    dict(M=70, N=60, K=72), (1,), _mixed_layout_ref)


def _dot_store_ref(x):
    A, B, X, Y, C = x["A"], x["B"], x["X"], x["Y"], x["C"].copy()
    acc = Acc(np.zeros((64, 64)))
    for kt in gemm_turns(0, A.shape[1], 32):
        acc.add_dot(win(A, [], 0, kt, 64, 32), win(B, [], kt, 0, 32, 64))
    d = Acc(np.zeros((64, 64)))
    d.add_dot(win(X, [], 0, 0, 64, 16), win(Y, [], 0, 0, 16, 64))
    put(C, [], 0, 0, acc.v + d.v, acc.rv & d.rv, acc.cv & d.cv)
    return {"C": C}


CASES["store_value_with_a_dot"] = Case("""
@launch(128)
kernel g(A: tensor<f16>[M, K], B: tensor<f16>[K, N], X: tensor<f16>[M, K], Y: tensor<f16>[K, N], C: tensor<f32>[M, N]) {
  var acc: tile<f32>[64, 64] = 0.0
  for kt in range(0, K, 32) {
    acc += dot(A[0 :+ 64, kt :+ 32], B[kt :+ 32, 0 :+ 64])
  }
  C[0 :+ 64, 0 :+ 64] = acc + dot(X[0 :+ 64, 0 :+ 16], Y[0 :+ 16, 0 :+ 64])
}""", True, "taken; the store of acc + dot(..) must not stage over the dot's scratch",
    dict(M=70, N=68, K=100), (1,), _dot_store_ref)


def _bcast_ref(x):
    A, B, Bias, C = x["A"], x["B"], x["Bias"], x["C"].copy()
    M, N = C.shape
    for by in range(-(-N // 32)):
        bv, brv, bcv = win(Bias, [], 0, by * 32, 1, 32)
        acc = Acc(np.repeat(bv * 2.0, 64, axis=0), np.ones(64, bool) & brv[0], bcv)
        for kt in gemm_turns(0, A.shape[1], 32):
            acc.add_dot(win(A, [], 0, kt, 64, 32), win(B, [], kt, by * 32, 32, 32))
        put(C, [], 0, by * 32, acc.v, acc.rv, acc.cv)
    return {"C": C}


CASES["acc_starts_from_a_row"] = Case("""
@launch(128)
@grid(1, cdiv(N, 32))
kernel g(A: tensor<bf16>[M, K], B: tensor<bf16>[K, N], Bias: tensor<f32>[M, N], C: tensor<f32>[M, N]) {
  var acc: tile<f32>[64, 32] = Bias[0 :+ 1, ctx.block.y * 32 :+ 32] * 2.0
  for kt in range(0, K, 32) {
    acc += dot(A[0 :+ 64, kt :+ 32], B[kt :+ 32, ctx.block.y * 32 :+ 32])
  }
  C[0 :+ 64, ctx.block.y * 32 :+ 32] = acc
}""", True, "taken; acc starts from one row of Bias broadcast down its 64 rows",
    dict(M=70, N=100, K=72), (1, 4), _bcast_ref)


def _fixed_b_ref(x):
    A, B, S, C = x["A"], x["B"], x["S"].copy(), x["C"].copy()
    for bx in range(2):
        acc = Acc(np.zeros((64, 64)))
        for kt in gemm_turns(0, A.shape[1], 32):
            acc.add_dot(win(A, [], 0, kt, 64, 32), win(B, [bx + 1], kt, 0, 32, 64))
        y = acc.v * 1.0
        put(S, [bx], 0, 0, (y * acc.cv[None, :]).sum(axis=1, keepdims=True), acc.rv, np.ones(1, bool))
        put(C, [bx], 0, 0, acc.v, acc.rv, acc.cv)
    return {"S": S, "C": C}


CASES["b_fixed_index_outside"] = Case("""
@launch(128)
kernel g(A: tensor<bf16>[M, K], B: tensor<bf16>[Z, K, N], S: tensor<f32>[G, M, 4], C: tensor<f32>[G, M, N]) {
  var acc: tile<f32>[64, 64] = 0.0
  for kt in range(0, K, 32) {
    acc += dot(A[0 :+ 64, kt :+ 32], B[ctx.block.x + 1, kt :+ 32, 0 :+ 64])
  }
  var y = acc * 1.0
  S[ctx.block.x, 0 :+ 64, 0 :+ 1] = rowsum(y)
  C[ctx.block.x, 0 :+ 64, 0 :+ 64] = acc
}""", True, "taken; CTA 1 reads B[2] of 2: b invalid, so acc's columns empty and its rows a's (spec 8.6)",
    dict(M=50, K=40, N=60, Z=2, G=2), (2,), _fixed_b_ref, outs=("S", "C"))

CASES["regs_512_threads"] = _shape_case(512, 256, 256, 64, False, "256 x 256 on 512 threads: 128 accumulators "
                                        "a thread, all the registers a thread has there", dict(M=200, N=260, K=72),
                                        lowered=False)
CASES["regs_1024_threads"] = _shape_case(1024, 256, 192, 32, True, "256 x 192 on 1024 threads: wgmma n96 needs 48 "
                                         "of a thread's 64 registers", dict(M=200, N=196, K=72),
                                         lowered=False)


# ---- running a case -----------------------------------------------------------------------------
def _module(case):
    return tilenb.compile(case.text, backend="cpu")


def _gen(case, arch):
    mod = _module(case)
    return generate(mod.g.ir(**case.tune), mod.checked.source.text, arch=arch)


def _args(case, dims, seed=0):
    """The launch's arguments in parameter order (outputs NaN, so unwritten elements show) and
    a dict of them by name."""
    kir = _module(case).g.ir(**case.tune)
    rng = np.random.default_rng(seed)
    given = case.inputs(rng, dims) if case.inputs else {}
    args, named = [], {}
    for p in kir.params:
        t, name = p.sym.type, p.sym.name
        if isinstance(t, ir.TensorT):
            shape = tuple(d if isinstance(d, int) else dims[d] for d in t.dims)
            if name in case.outs:
                a = np.full(shape, np.nan, np.float64).astype(NPDT[t.dtype]) if t.dtype not in ("i32", "i8") \
                    else np.full(shape, -7, NPDT[t.dtype])
            elif name in given:
                a = given[name]
            elif t.dtype in ("i8", "i32"):
                a = rng.integers(-4, 5, shape).astype(NPDT[t.dtype])
            else:
                a = rng.standard_normal(shape).astype(NPDT[t.dtype])
        else:
            a = case.scalars[name]
        args.append(a)
        named[name] = a
    return args, named


def _dims_of(case, args):
    kir = _module(case).g.ir(**case.tune)
    dims = {}
    for p, a in zip(kir.params, args):
        if isinstance(p.sym.type, ir.TensorT):
            for d, n in zip(p.sym.type.dims, a.shape):
                if isinstance(d, str):
                    dims[d] = n
    return dims


def _tol(dt):
    return {"f16": (2 ** -9, 2 ** -9), "bf16": (2 ** -6, 2 ** -6)}.get(dt, (1e-4, 1e-4))


def assert_close(got, want, what, rtol=1e-4, atol=1e-4):
    g, w = np.asarray(got).astype(np.float64), np.asarray(want).astype(np.float64)
    assert g.shape == w.shape, what
    gn, wn = np.isnan(g), np.isnan(w)
    assert (gn == wn).all(), f"{what}: {int((gn != wn).sum())} elements written where the reference is not, or back"
    fin = np.isfinite(w) & ~gn
    assert (g[~fin & ~wn] == w[~fin & ~wn]).all(), f"{what}: infinities differ"
    d = np.abs(g[fin] - w[fin])
    bad = d > atol + rtol * np.abs(w[fin])
    assert not bad.any(), f"{what}: {int(bad.sum())} elements differ, worst {d.max():.4g}"


def _check_outputs(case, kir_params, got_args, want, label):
    for p, a in zip(kir_params, got_args):
        name = p.sym.name
        if name in want:
            rtol, atol = _tol(p.sym.type.dtype)
            assert_close(a, want[name], f"{label}: {name}", rtol, atol)


def case_params(cases, aspect, only=None):
    """pytest params of the cases (name -> case with a `bug` dict of aspect -> reason) for one
    aspect: a case whose bug names the aspect is a strict xfail."""
    out = []
    for name, case in cases.items():
        if only is not None and not only(case):
            continue
        marks = [pytest.mark.xfail(reason=case.bug[aspect], strict=True)] if aspect in case.bug else []
        out.append(pytest.param(name, marks=marks, id=name))
    return out


# ---- CPU-only tests -----------------------------------------------------------------------------
@pytest.mark.parametrize("name", case_params(CASES, "lowering"))
def test_lowering_takes_exactly_the_loops_it_preserves(name):
    case = CASES[name]
    ks = _gen(case, "sm_90")
    assert (ks.arch == "sm_90a") == case.lowered, case.why
    if case.lowered:
        assert "wgmma.mma_async" in ks.source and ks.tmaps
    else:
        assert not ks.tmaps and "wgmma" not in ks.source


@pytest.mark.parametrize("name", case_params(CASES, "generate"))
def test_generating_for_every_target_raises_nothing_internal(name):
    """No internal exception for any target; sm_90 refuses nothing the generic code takes."""
    case = CASES[name]
    generic = _gen(case, None)
    assert generic.arch is None
    assert _gen(case, "sm_80").source == generic.source
    ks = _gen(case, "sm_90")
    if ks.arch is None:
        assert ks.source == generic.source       # only GEMM loops change on sm_90
    mod = _module(case)
    assert mod.g.cuda_source(arch="sm_90", **case.tune) == ks.source


@needs_nvrtc
@pytest.mark.parametrize("name", case_params(CASES, "nvrtc", only=lambda c: c.lowered or "nvrtc" in c.bug))
def test_what_is_lowered_compiles_for_sm90a(name):
    case = CASES[name]
    ks = _gen(case, "sm_90")
    if ks.arch != "sm_90a":
        return                                    # left to mma.sync (regs_*): nothing to compile
    assert nvrtc_compile(ks.source, "sm_90a")


@pytest.mark.parametrize("name", case_params(CASES, "cpu"))
def test_cpu_executor_matches_numpy(name):
    """At the case's shapes and at the GPU test's (so a GPU failure is never the reference's)."""
    case = CASES[name]
    mod = _module(case)
    for seed, dims in enumerate(_gpu_shapes(case)):
        args, named = _args(case, dims, seed=seed)
        want = case.ref(dict(named, **case.scalars))
        if dims is case.dims:
            mod.g[case.grid](*args)
        else:
            mod.g(*args)
        _check_outputs(case, mod.g.ir(**case.tune).params, args, want, f"CPU executor at {dims}")


@needs_gxx
@pytest.mark.parametrize("name", case_params(CASES, "emulate", only=lambda c: c.lowered or "emulate" in c.bug))
def test_emulated_sm90_kernel_matches_the_cpu_executor(name, tmp_path):
    """Both copy paths, copies late / products early and copies early / products late."""
    case = CASES[name]
    ks = _gen(case, "sm_90")
    if ks.arch != "sm_90a":
        assert not case.lowered
        return                                    # left to mma.sync: nothing of the lowering to run
    args, named = _args(case, case.dims, seed=1)
    ref = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    _module(case).g[case.grid](*ref)
    want = {p.sym.name: r for p, r in zip(_module(case).g.ir(**case.tune).params, ref) if p.sym.name in case.outs}
    exe = build_sm90(ks, args, _dims_of(case, args), case.grid, tmp_path)
    for tma in (1, 0):
        for late_products in (0, 1):
            got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
            run_sm90(exe, got, tmp_path, tma, late_products)
            _check_outputs(case, _module(case).g.ir(**case.tune).params, got, want,
                           f"emulated sm_90 (tma={tma}, late products={late_products})")


@needs_gxx
def test_emulator_catches_broken_pipelines(tmp_path):
    """The emulation is strict enough to matter: a stage released one turn early, a missing wait
    for a stage's copies, a wrong stride between 8-row groups, a wrong swizzle on the copy path
    each give wrong results (19 turns over 8 stages: the ring wraps twice)."""
    case = _shape_case(256, 128, 128, 16, False, "", {})
    ks = _gen(case, "sm_90")
    M, N, K = 130, 128, 300
    r = np.random.default_rng(3)
    a, b = r.standard_normal((M, K)).astype(np.float16), r.standard_normal((K, N)).astype(np.float16)
    want = np.full((M, N), np.nan)
    want[:128, :] = (a.astype(np.float64) @ b.astype(np.float64))[:128, :]

    def err(src, tma, early):
        k2 = dataclasses.replace(ks, source=src)
        c = np.full((M, N), np.nan, np.float32)
        d = tmp_path / hashlib.sha256(src.encode()).hexdigest()[:8]
        try:
            run_sm90(build_sm90(k2, [a, b, c], dict(M=M, N=N, K=K), (1,), d), [a, b, c], d, tma, early)
        except RuntimeError:
            return np.inf                         # a deadlock or a bad address counts as caught
        return np.nanmax(np.abs(c - want)) if (np.isnan(c) == np.isnan(want)).all() else np.inf

    for tma in (1, 0):
        for early in (0, 1):
            assert err(ks.source, tma, early) < 1e-3
    early_release = ks.source.replace("tnb_wgmma_wait<1>();", "tnb_wgmma_wait<2>();")
    assert early_release != ks.source and err(early_release, 1, 1) > 0.1
    no_wait = re.sub(r"tnb_mbar_wait\((bar\d+) \+ 8 \* (s\d+),", r"if (0) tnb_mbar_wait(\1 + 8 * \2,", ks.source)
    assert no_wait != ks.source and err(no_wait, 1, 0) > 0.1
    sbo = ks.source.replace(", 16, 256, 3)", ", 16, 512, 3)")
    assert sbo != ks.source and err(sbo, 1, 0) > 0.1 and err(sbo, 0, 0) > 0.1
    swz = ks.source.replace("& 7u) << 4)", "& 3u) << 4)")
    assert swz != ks.source and err(swz, 0, 0) > 0.1


# ---- the copy path's swizzle against the tensor map's --------------------------------------------
def _copy_offsets(src):
    """The bounds-checked copies of the copy path: for each, its [rows, cols] box and the byte
    each element lands on, evaluated from the generated C (the offset and the XOR swizzle)."""
    fb = src[src.index("no tensor map for these tensors"):]
    pat = (r"for \(int (e\d+) = tnb_tid; \1 < (\d+);.*?\n\s*const int (r\d+) = \1 / (\d+), (c\d+) = \1 % \4;"
           r".*?const unsigned (o\d+) = \(unsigned\)\((.*?)\);\n\s*\*\(unsigned short\*\)\((ring\d+) \+ (\d+) \+ "
           r"\(\6 \^ \(\(\(\6 >> 7\) & (\d+)u\) << 4\)\)\)")
    out = []
    for m in re.finditer(pat, fb, re.S):
        total, cols = int(m.group(2)), int(m.group(4))
        r, c = np.meshgrid(np.arange(total // cols), np.arange(cols), indexing="ij")
        expr = m.group(7).replace(m.group(3), "r").replace(m.group(5), "c").replace("/", "//")
        o = np.asarray(eval(expr, {"r": r, "c": c}), np.int64)   # noqa: S307 (generated arithmetic only)
        mask = int(m.group(10))
        out.append((total // cols, cols, int(m.group(9)) + (o ^ (((o >> 7) & mask) << 4))))
    return out


def tma_box_offsets(inner, outer, span, dst):
    """Where a TMA copy of a box (`outer` rows of `inner` 2-byte elements, dense) lands with the
    swizzle of `span` bytes: the 16-byte chunks of each 128-byte line of shared memory permuted by
    XOR with the line number modulo span / 16 (CUDA's SWIZZLE_32B/64B/128B), from `dst` (aligned
    to the pattern's repeat)."""
    y, x = np.meshgrid(np.arange(outer), np.arange(inner), indexing="ij")
    lin = dst + (y * inner + x) * 2
    line, chunk, n = lin // 128, (lin % 128) // 16, span // 16
    return line * 128 + ((chunk & ~(n - 1)) | ((chunk ^ line) & (n - 1))) * 16 + lin % 16


@pytest.mark.parametrize("NT,TM,TN,TK,trans", [
    (128, 64, 16, 16, 0), (128, 64, 32, 32, 0), (128, 128, 64, 64, 0), (256, 128, 192, 32, 0), (128, 64, 256, 16, 0),
    (128, 64, 8, 16, 1), (256, 64, 128, 64, 1), (128, 192, 40, 32, 1), (384, 192, 64, 16, 0)])
def test_copy_path_lays_stages_out_as_the_tensor_maps_do(NT, TM, TN, TK, trans):
    case = _shape_case(NT, TM, TN, TK, bool(trans), "", {})
    ks = _gen(case, "sm_90")
    assert ks.arch == "sm_90a"
    (ra, ca, got_a), (rb, cb, got_b) = _copy_offsets(ks.source)
    ta, tb = ks.tmaps
    assert (ra, ca) == (TM, TK) and ta.box == (TK, TM)
    np.testing.assert_array_equal(got_a, tma_box_offsets(TK, TM, ta.swizzle, 0))
    a_pad = -(-TM * TK * 2 // 1024) * 1024
    if trans:
        assert (rb, cb) == (TN, TK) and tb.box == (TK, TN)
        np.testing.assert_array_equal(got_b, tma_box_offsets(TK, TN, tb.swizzle, a_pad))
    else:
        chunk = tb.box[0]
        assert (rb, cb) == (TK, TN) and tb.box == (chunk, TK) and TN % chunk == 0
        want = np.concatenate([tma_box_offsets(chunk, TK, tb.swizzle, a_pad + q * TK * tb.swizzle)
                               for q in range(TN // chunk)], axis=1)
        np.testing.assert_array_equal(got_b, want)


# ---- the same bugs outside the lowering (the CPU executor, the generic path) -------------------------
def test_cpu_executor_slice_with_a_fixed_index_outside_the_tensor():
    mod = tilenb.compile("""
@launch(128)
kernel g(B: tensor<f32>[Z, K, N], C: tensor<f32>[K, N], z: i32) {
  var y = B[z, 0 :+ 8, 0 :+ 16]
  C[0 :+ 8, 0 :+ 16] = y
}""", backend="cpu")
    C = np.full((40, 64), np.nan, np.float32)
    mod.g[1](np.ones((2, 40, 64), np.float32), C, 2)
    assert np.isnan(C).all()                      # nothing valid: nothing stored


@needs_gxx
def test_generic_dot_with_b_fixed_index_outside_stores_nothing(tmp_path):
    text = """
@launch(128)
kernel g(A: tensor<f32>[M, K], B: tensor<f32>[Z, K, N], C: tensor<f32>[G, M, N]) {
  C[ctx.block.x, 0 :+ 16, 0 :+ 16] = dot(A[0 :+ 16, 0 :+ 16], B[ctx.block.x + 1, 0 :+ 16, 0 :+ 16])
}"""
    mod = tilenb.compile(text, backend="cpu")
    r = np.random.default_rng(0)
    A, B = r.standard_normal((16, 16)).astype(np.float32), r.standard_normal((2, 16, 16)).astype(np.float32)
    C = np.full((2, 16, 16), np.nan, np.float32)
    EMU.run(generate(mod.g.ir(), text), [A, B, C], dict(M=16, K=16, N=16, Z=2, G=2), (2,), workdir=str(tmp_path))
    np.testing.assert_allclose(C[0], A.astype(np.float64) @ B[1], rtol=1e-5, atol=1e-5)
    assert np.isnan(C[1]).all()                   # CTA 1's B[2] is outside B: nothing valid


@needs_gxx
def test_generic_register_tile_from_a_broadcast_row(tmp_path):
    """The same root cause as acc_starts_from_a_row, on the generic path: a @registers tile."""
    text = """
@registers(t)
@launch(128)
kernel g(Bias: tensor<f32>[M, N], C: tensor<f32>[M, N]) {
  var t: tile<f32>[64, 32] = Bias[0 :+ 1, 0 :+ 32] * 2.0
  C[0 :+ 64, 0 :+ 32] = t
}"""
    mod = tilenb.compile(text, backend="cpu")
    bias = np.random.default_rng(0).standard_normal((70, 68)).astype(np.float32)
    C = np.full((70, 68), np.nan, np.float32)
    EMU.run(generate(mod.g.ir(), text), [bias, C], dict(M=70, N=68), (1,), workdir=str(tmp_path))
    np.testing.assert_allclose(C[:64, :32], np.repeat(bias[:1, :32] * 2.0, 64, axis=0))


# ---- random GEMM-loop programs ----------------------------------------------------------------------
FUZZ_PROGRAMS = int(os.environ.get("TILENB_GEMM_FUZZ", "60"))


def random_gemm_program(rnd: random.Random) -> str:
    """A GEMM loop with random dtype, threads, tile shape, B's major, operand form, ranks, bounds,
    starts, accumulator start and use, and surrounding control."""
    dt = rnd.choice(["f16", "bf16", "bf16", "f16", "f32"])
    NT, TM = rnd.choice([128, 128, 256, 256, 384]), rnd.choice([64, 64, 128, 192])
    TN, TK = rnd.choice([16, 32, 64, 64, 96, 128, 192]), rnd.choice([16, 32, 64])
    trans, form = rnd.random() < 0.4, rnd.choice(["inline", "let", "var"])
    a3, b3 = rnd.random() < 0.3, rnd.random() < 0.3
    lo, hi = rnd.choice(["0", "0", "k0", "0 - 5", "K"]), rnd.choice(["K", "K", "K + 7", "k0 + 40", "K - 9"])
    r = f"ctx.block.x * {TM}" + rnd.choice(["", "", " - 3", " + 5"])
    c = f"ctx.block.y * {TN}" + rnd.choice(["", "", " - 4", " + 2"])
    init, post = rnd.choice(["zero", "zero", "bias", "uninit"]), rnd.choice(["store", "store16", "expr", "rowsum", "twice", "scale"])
    ctl = rnd.choice(["plain", "plain", "if", "outer"])
    A = f"A: tensor<{dt}>[Z, M, K]" if a3 else f"A: tensor<{dt}>[M, K]"
    bd = "N, K" if trans else "K, N"
    B = f"B: tensor<{dt}>[Z, {bd}]" if b3 else f"B: tensor<{dt}>[{bd}]"
    asl = f"A[{'ctx.block.z, ' if a3 else ''}{r} :+ {TM}, kt :+ {TK}]"
    zb = "Z - 1 - ctx.block.z, " if b3 else ""
    bsl = f"B[{zb}{c} :+ {TN}, kt :+ {TK}]" if trans else f"B[{zb}kt :+ {TK}, {c} :+ {TN}]"
    fn = "dot_t" if trans else "dot"
    body = (f"    acc += {fn}({asl}, {bsl})" if form == "inline"
            else f"    {form} a = {asl}\n    {form} b = {bsl}\n    acc += {fn}(a, b)")
    loop = f"  for kt in range({lo}, {hi}, {TK}) {{\n{body}\n  }}"
    if ctl == "if":
        loop = f"  if K > 40 {{\n{loop}\n  }}"
    st = f"C[ctx.block.z, {r} :+ {TM}, {c} :+ {TN}]"
    decl = {"zero": f"  var acc: tile<f32>[{TM}, {TN}] = 0.0",
            "bias": f"  var acc: tile<f32>[{TM}, {TN}] = 0.0\n  acc = acc + Bias[0 :+ 1, {c} :+ {TN}] * 2.0",
            "uninit": f"  var acc: tile<f32>[{TM}, {TN}]\n  acc = 1.5"}[init]
    tail = {"store": f"  {st} = acc", "store16": f"  {st} = acc",
            "expr": f"  {st} = max(acc * 0.5 + Bias[0 :+ 1, {c} :+ {TN}], 0.0)",
            "rowsum": f"  var y = acc * 2.0\n  {st} = y\n  S[ctx.block.z, {r} :+ {TM}, ctx.block.y :+ 1] = rowsum(y)",
            "twice": f"{loop}\n  {st} = acc",
            "scale": f"  acc = acc * 0.25\n  acc += 1.0\n  {st} = acc"}[post]
    inner = f"{decl}\n{loop}\n{tail}"
    if ctl == "outer":
        inner = f"  for o in range(0, 2, 1) {{\n{inner}\n  }}"
    odt = "f16" if post == "store16" else "f32"
    return (f"@launch({NT})\n@grid(cdiv(M, {TM}), cdiv(N, {TN}), Z)\n"
            f"kernel g({A}, {B}, Bias: tensor<f32>[1, N], C: tensor<{odt}>[Z, M, N], S: tensor<f32>[Z, M, G], k0: i32) {{\n"
            f"{inner}\n}}\n")


def _random_programs():
    out = []
    for seed in range(FUZZ_PROGRAMS):
        text = random_gemm_program(random.Random(seed))
        try:
            mod = tilenb.compile(text, backend="cpu")
        except tilenb.TileError:
            continue                              # e.g. a 192-row tile over 256 threads' budget
        out.append((seed, text, mod))
    return out


def test_random_gemm_programs_generate_and_compile():
    """No internal exception for any target, sm_90 changes only lowered kernels, and a sample of
    the lowered ones compiles for sm_90a."""
    lowered = []
    for seed, text, mod in _random_programs():
        generic = generate(mod.g.ir(), text)
        ks = generate(mod.g.ir(), text, arch="sm_90")
        if ks.arch is None:
            assert ks.source == generic.source, seed
        else:
            lowered.append((seed, ks))
    assert len(lowered) >= FUZZ_PROGRAMS // 4
    if nvrtc_available():
        for seed, ks in lowered[::4]:
            assert nvrtc_compile(ks.source, "sm_90a"), seed


@needs_gxx
def test_random_gemm_programs_emulated_match_the_cpu_executor(tmp_path):
    n = 0
    for seed, text, mod in _random_programs()[:: max(1, FUZZ_PROGRAMS // 8)]:
        ks = generate(mod.g.ir(), text, arch="sm_90")
        if ks.arch != "sm_90a":
            continue
        rnd = np.random.default_rng(seed)
        M, N, K = int(rnd.choice([64, 70, 130])), int(rnd.choice([16, 40, 100, 196])), int(rnd.choice([8, 36, 64, 100]))
        kir = mod.g.ir()
        TM, TN = next(s.sym.type.shape for s in ir.walk_stmts(kir.body) if isinstance(s, ir.VarDecl) and s.sym.name == "acc")
        G = -(-(-(-N // TN)) // 4) * 4
        grid = (-(-M // TM), -(-N // TN), 2)
        args = []
        for p in kir.params:
            t = p.sym.type
            if not isinstance(t, ir.TensorT):
                args.append(8)
                continue
            shape = tuple(d if isinstance(d, int) else dict(M=M, N=N, K=K, Z=2, G=G)[d] for d in t.dims)
            if p.sym.name in ("C", "S"):
                args.append(np.full(shape, np.nan, np.float32).astype(NPDT[t.dtype]))
            else:
                args.append(rnd.standard_normal(shape).astype(NPDT[t.dtype]))
        ref = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        mod.g[grid](*ref)
        exe = build_sm90(ks, args, dict(M=M, N=N, K=K, Z=2, G=G), grid, tmp_path / str(seed))
        for tma, late in ((1, 0), (0, 1)):
            got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
            run_sm90(exe, got, tmp_path / str(seed), tma, late)
            for p, g_, r_ in zip(kir.params, got, ref):
                if p.sym.name in ("C", "S"):
                    rtol, atol = _tol(p.sym.type.dtype)
                    assert_close(g_, r_, f"seed {seed} {p.sym.name} tma={tma} late={late}", rtol, max(atol, 1e-3))
        n += 1
    assert n >= 2


# ---- on the GPU ------------------------------------------------------------------------------------
def _on_hopper():
    import cupy as cp
    return cp.cuda.Device().compute_capability == "90"


def _gpu_shapes(case):
    """The case's shapes, every runtime dim 4 larger (row strides then switch between multiples of
    16 bytes, which tensor maps need, and not: both copy paths), and its own GPU shapes; only
    kernels with an @grid follow the shapes, the others cover a fixed tile."""
    out = [case.dims]
    if "@grid" in case.text:
        out.append({k: v + 4 for k, v in case.dims.items()})
        out.extend(case.gpu_dims)
    return out


@pytest.mark.gpu
@pytest.mark.parametrize("name", case_params(CASES, "gpu", only=lambda c: c.gpu))
def test_on_hopper_matches_numpy(name):
    if not _on_hopper():
        pytest.skip("the wgmma lowering runs on compute capability 9.0 only")
    case = CASES[name]
    mod = tilenb.compile(case.text, backend="cuda")
    for seed, dims in enumerate(_gpu_shapes(case)):
        args, named = _args(case, dims, seed=seed)
        want = case.ref(dict(named, **case.scalars))
        if "@grid" in case.text:
            mod.g(*args)
        else:
            mod.g[case.grid](*args)
        assert "sm_90" in str(mod.g.last_run.extra.get("arch"))
        _check_outputs(case, mod.g.ir(**case.tune).params, args, want, f"H100/H200 at {dims}")


# ---- the emulator ------------------------------------------------------------------------------------
SM90_EMU = r"""
#include <chrono>
#include <condition_variable>
#include <functional>
#include <barrier>
#include <map>
#include <memory>
#include <mutex>
#define TNB_SM90A 1
#define __grid_constant__
static int g_tma_early = 0;        // 1: copies land at issue and products read at wait_group; 0: the reverse
struct tnb_tmap { const unsigned char* base; int rank; long long dims[5]; long long strides[5]; int box[5]; int swz; int esz; };
inline unsigned tnb_smem_u32(const void* p) { return tnb_saddr(p); }
struct TnbMBar { unsigned expected = 0, pending = 0; long long tx = 0; unsigned phase = 0; std::vector<std::function<void()>> jobs; };
static std::mutex g_mb_mu;
static std::condition_variable g_mb_cv;
static std::map<unsigned, TnbMBar> g_mbars;
static void tnb_die(const char* m, unsigned a = 0) { std::fprintf(stderr, "%s (%u)\n", m, a); std::abort(); }
static inline void mb_check(TnbMBar& b) {
  if (b.pending == 0 && b.tx == 0) { b.phase++; b.pending = b.expected; g_mb_cv.notify_all(); }
}
static inline TnbMBar& mb_get(unsigned bar) {
  auto it = g_mbars.find(bar);
  if (it == g_mbars.end()) tnb_die("mbarrier used before its init", bar);
  return it->second;
}
inline void tnb_mbar_init(unsigned bar, unsigned count) {
  std::lock_guard<std::mutex> lk(g_mb_mu);
  if (bar % 8) tnb_die("mbarrier not 8-byte aligned", bar);
  TnbMBar b; b.expected = b.pending = count; g_mbars[bar] = b;
  std::memset(g_smem + bar, 0, 8);
}
static void mb_arrive(unsigned bar, long long tx) {
  std::lock_guard<std::mutex> lk(g_mb_mu);
  TnbMBar& b = mb_get(bar);
  b.tx += tx;
  if (b.pending == 0) tnb_die("mbarrier: an arrival beyond its count", bar);
  b.pending--; mb_check(b);
}
inline void tnb_mbar_expect_tx(unsigned bar, unsigned bytes) { mb_arrive(bar, bytes); }
inline void tnb_mbar_arrive(unsigned bar) { mb_arrive(bar, 0); }
inline void tnb_mbar_wait(unsigned bar, unsigned parity) {
  std::unique_lock<std::mutex> lk(g_mb_mu);
  TnbMBar& b = mb_get(bar);
  auto jobs = std::move(b.jobs); b.jobs.clear();     // late copies land when a thread first waits for them
  for (auto& j : jobs) j();
  mb_check(b);
  if (!g_mb_cv.wait_for(lk, std::chrono::seconds(60), [&] { return (mb_get(bar).phase & 1u) != (parity & 1u); }))
    tnb_die("deadlock: an mbarrier phase never completes", bar);
}
inline void tnb_fence_async_smem() {}
inline void tnb_fence_async_global() {}
// named barriers (bar.sync / bar.arrive id, 256: the warpgroup ping-pong of a streamed loop):
// a generation completes when 256 threads arrived, waiting or not; a CTA must end with every
// named barrier empty (an arrival left over would corrupt the next use of the barrier)
struct TnbNBar { int count = 0; unsigned long long gen = 0; };
static std::map<int, TnbNBar> g_nbars;
static void tnb_nbar(int id, bool wait) {
  std::unique_lock<std::mutex> lk(g_mb_mu);
  if (id <= 0 || id >= 16) tnb_die("named barrier: an id outside 1..15", (unsigned)id);
  TnbNBar& b = g_nbars[id];
  unsigned long long gen = b.gen;
  if (++b.count == 256) { b.count = 0; b.gen++; g_mb_cv.notify_all(); return; }
  if (wait && !g_mb_cv.wait_for(lk, std::chrono::seconds(60), [&] { return g_nbars[id].gen != gen; }))
    tnb_die("deadlock: a named barrier never completes", (unsigned)id);
}
inline void tnb_pp_sync(int id) { tnb_nbar(id, true); }
inline void tnb_pp_arrive(int id) { tnb_nbar(id, false); }
static void tnb_nbars_empty() {
  for (auto& kv : g_nbars) if (kv.second.count) tnb_die("named barrier: arrivals left over at the end of a CTA", (unsigned)kv.first);
  g_nbars.clear();
}
static struct TnbNBarsAtExit { ~TnbNBarsAtExit() { tnb_nbars_empty(); } } g_nbars_at_exit;
static inline unsigned tnb_emu_swz(unsigned a, int span) {
  int mask = span == 128 ? 7 : span == 64 ? 3 : span == 32 ? 1 : 0;
  return a ^ (((a >> 7) & mask) << 4);
}
static void tnb_tma(unsigned dst, const tnb_tmap* map, const int* c, int rank, unsigned bar) {
  tnb_tmap m = *map;
  if (m.rank != rank) tnb_die("TMA: a copy of another rank than its map's", rank);
  if (dst % (m.swz == 128 ? 1024 : m.swz == 64 ? 512 : 256)) tnb_die("TMA: destination off its swizzle pattern", dst);
  if (m.box[0] * m.esz > m.swz) tnb_die("TMA: box rows wider than the swizzle span", m.box[0]);
  int cc[5]; for (int i = 0; i < rank; ++i) cc[i] = c[i];
  long long total = 1; for (int i = 0; i < rank; ++i) total *= m.box[i];
  auto job = [=]() {
    for (long long idx = 0; idx < total; ++idx) {
      long long r = idx, off = 0; bool oob = false;
      for (int i = 0; i < rank; ++i) {
        long long g = cc[i] + r % m.box[i]; r /= m.box[i];
        if (g < 0 || g >= m.dims[i]) oob = true; else off += g * m.strides[i];
      }
      unsigned a = tnb_emu_swz(dst + (unsigned)(idx * m.esz), m.swz);
      if (a + m.esz > SMEM) tnb_die("TMA: a write outside shared memory", a);
      if (oob) std::memset(g_smem + a, 0, m.esz); else std::memcpy(g_smem + a, m.base + off, m.esz);
    }
    mb_get(bar).tx -= total * m.esz;
  };
  std::lock_guard<std::mutex> lk(g_mb_mu);
  TnbMBar& b = mb_get(bar);
  if (g_tma_early) { job(); mb_check(b); } else b.jobs.push_back(job);
}
inline void tnb_tma_2d(unsigned d, const tnb_tmap* m, int c0, int c1, unsigned bar) { int c[] = {c0, c1}; tnb_tma(d, m, c, 2, bar); }
inline void tnb_tma_3d(unsigned d, const tnb_tmap* m, int c0, int c1, int c2, unsigned bar) { int c[] = {c0, c1, c2}; tnb_tma(d, m, c, 3, bar); }
inline void tnb_tma_4d(unsigned d, const tnb_tmap* m, int c0, int c1, int c2, int c3, unsigned bar) { int c[] = {c0, c1, c2, c3}; tnb_tma(d, m, c, 4, bar); }
inline void tnb_tma_5d(unsigned d, const tnb_tmap* m, int c0, int c1, int c2, int c3, int c4, unsigned bar) { int c[] = {c0, c1, c2, c3, c4}; tnb_tma(d, m, c, 5, bar); }
inline unsigned long long tnb_gdesc(unsigned addr, unsigned lbo, unsigned sbo, unsigned swz) {
  return (unsigned long long)((addr & 0x3FFFFu) >> 4) | ((unsigned long long)((lbo >> 4) & 0x3FFFu) << 16)
       | ((unsigned long long)((sbo >> 4) & 0x3FFFu) << 32) | ((unsigned long long)swz << 62);
}
struct TnbWg { float* d; unsigned long long da, db; int n, tb; bool bf; int tid; bool rs = false; float a[2][16] = {}; };
template <int N> inline void tnb_reg_fence(float*) {}
template <int N> inline void tnb_reg_fence_u(unsigned*) {}
thread_local std::vector<std::vector<TnbWg>> t_wg_groups;
thread_local std::vector<TnbWg> t_wg_open;
static inline int tnb_span(unsigned long long desc) {
  int m = (int)(desc >> 62);
  if (m == 0) tnb_die("wgmma: a descriptor without swizzle");
  return m == 1 ? 128 : m == 2 ? 64 : 32;
}
static inline float tnb_ld_half(unsigned a, bool bf) {
  if (a + 2 > SMEM || (a & 1)) tnb_die("wgmma: an operand address outside shared memory", a);
  unsigned short h; std::memcpy(&h, g_smem + a, 2); return bf ? tnb_b2f(h) : tnb_h2f(h);
}
static void tnb_wg_exec(const TnbWg& o) {
  unsigned sa = (unsigned)(o.da & 0x3FFF) << 4, sboa = (unsigned)((o.da >> 32) & 0x3FFF) << 4;
  unsigned sb = (unsigned)(o.db & 0x3FFF) << 4, lbob = (unsigned)((o.db >> 16) & 0x3FFF) << 4;
  unsigned sbob = (unsigned)((o.db >> 32) & 0x3FFF) << 4;
  int spa = o.rs ? 0 : tnb_span(o.da), spb = tnb_span(o.db);
  int w = (o.tid >> 5) & 3, l = o.tid & 31;
  for (int nb = 0; nb < o.n / 8; ++nb) for (int e = 0; e < 4; ++e) {
    int row = 16 * w + l / 4 + 8 * (e >> 1), col = nb * 8 + 2 * (l % 4) + (e & 1);
    float acc = o.d[nb * 4 + e];
    for (int k = 0; k < 16; ++k) {
      float av = 0.0f;
      if (o.rs) av = o.a[e >> 1][k];
      else av = tnb_ld_half(tnb_emu_swz(sa + (row % 8) * spa + (row / 8) * sboa + 2 * k, spa), o.bf);
      unsigned ba;
      if (o.tb == 0) ba = tnb_emu_swz(sb + (col % 8) * spb + (col / 8) * sbob + 2 * k, spb);
      else { int C = spb / 2; ba = tnb_emu_swz(sb + (col % C) * 2 + (col / C) * lbob + (k % 8) * spb + (k / 8) * sbob, spb); }
      acc += av * tnb_ld_half(ba, o.bf);
    }
    o.d[nb * 4 + e] = acc;
  }
}
// fence, commit and wait_group are .sync.aligned: the warp runs them together; a wait returns once
// the whole warpgroup operation (every lane's products) is done
inline void tnb_wgmma_fence() { my_warp().bar.arrive_and_wait(); }
inline void tnb_wgmma_commit() { my_warp().bar.arrive_and_wait(); t_wg_groups.push_back(t_wg_open); t_wg_open.clear(); }
template <int N> inline void tnb_wgmma_wait() {
  my_warp().bar.arrive_and_wait();
  while ((int)t_wg_groups.size() > N) {
    for (auto& o : t_wg_groups.front()) tnb_wg_exec(o);
    t_wg_groups.erase(t_wg_groups.begin());
  }
  my_warp().bar.arrive_and_wait();
}
static inline void tnb_wg_issue(float* d, unsigned long long da, unsigned long long db, int n, int tb, bool bf) {
  t_wg_open.push_back(TnbWg{d, da, db, n, tb, bf, t_tid});
  if (!g_tma_early) { tnb_wg_exec(t_wg_open.back()); t_wg_open.pop_back(); }
}
// A from registers: the quad's four lanes hold a row's 16 k values (the m16n8k16 A-fragment order:
// words 0 / 1 rows l/4 and l/4 + 8 at k 2 (l%4) .. + 1, words 2 / 3 the same at k + 8); read at issue
static inline void tnb_wg_issue_rs(float* d, const unsigned* a, unsigned long long db, int n, int tb, bool bf) {
  Warp& w = my_warp(); int l = my_lane();
  for (int q = 0; q < 4; ++q) w.u[l][q] = a[q];
  w.bar.arrive_and_wait();
  TnbWg o{d, 0, db, n, tb, bf, t_tid};
  o.rs = true;
  for (int h = 0; h < 2; ++h) for (int k = 0; k < 16; ++k) {
    unsigned word = w.u[(l & ~3) + (k % 8) / 2][(k >= 8 ? 2 : 0) + h];
    o.a[h][k] = bf ? tnb_b2f_w(word, k & 1) : tnb_h2f_w(word, k & 1);
  }
  w.bar.arrive_and_wait();
  t_wg_open.push_back(o);
  if (!g_tma_early) { tnb_wg_exec(t_wg_open.back()); t_wg_open.pop_back(); }
}
// bulk tensor stores (shared -> global): elements outside the tensor are not written; the copy
// engine reads shared memory at issue (g_tma_early) or as late as the thread's wait allows
thread_local std::vector<std::function<void()>> t_bulk;
static void tnb_tma_st(const tnb_tmap* map, unsigned src, const int* c, int rank) {
  tnb_tmap m = *map;
  if (m.rank != rank) tnb_die("TMA store: another rank than its map's", rank);
  if (src % (m.swz == 128 ? 1024 : m.swz == 64 ? 512 : 256)) tnb_die("TMA store: source off its swizzle pattern", src);
  if (m.box[0] * m.esz > m.swz) tnb_die("TMA store: box rows wider than the swizzle span", m.box[0]);
  int cc[5]; for (int i = 0; i < rank; ++i) cc[i] = c[i];
  long long total = 1; for (int i = 0; i < rank; ++i) total *= m.box[i];
  auto job = [=]() {
    for (long long idx = 0; idx < total; ++idx) {
      long long r = idx, off = 0; bool oob = false;
      for (int i = 0; i < rank; ++i) {
        long long g = cc[i] + r % m.box[i]; r /= m.box[i];
        if (g < 0 || g >= m.dims[i]) oob = true; else off += g * m.strides[i];
      }
      unsigned a = tnb_emu_swz(src + (unsigned)(idx * m.esz), m.swz);
      if (a + m.esz > SMEM) tnb_die("TMA store: a read outside shared memory", a);
      if (!oob) std::memcpy(const_cast<unsigned char*>(m.base) + off, g_smem + a, m.esz);
    }
  };
  if (g_tma_early) job(); else t_bulk.push_back(job);
}
inline void tnb_tma_store_2d(const tnb_tmap* m, unsigned s, int c0, int c1) { int c[] = {c0, c1}; tnb_tma_st(m, s, c, 2); }
inline void tnb_tma_store_3d(const tnb_tmap* m, unsigned s, int c0, int c1, int c2) { int c[] = {c0, c1, c2}; tnb_tma_st(m, s, c, 3); }
inline void tnb_tma_store_4d(const tnb_tmap* m, unsigned s, int c0, int c1, int c2, int c3) { int c[] = {c0, c1, c2, c3}; tnb_tma_st(m, s, c, 4); }
inline void tnb_tma_store_5d(const tnb_tmap* m, unsigned s, int c0, int c1, int c2, int c3, int c4) { int c[] = {c0, c1, c2, c3, c4}; tnb_tma_st(m, s, c, 5); }
inline void tnb_bulk_commit() {}
inline void tnb_bulk_wait_read() { for (auto& j : t_bulk) j(); t_bulk.clear(); }
inline void tnb_bulk_wait() { tnb_bulk_wait_read(); }
// stmatrix .x4 (a warp together): lane l names row l % 8 of matrix l / 8 and holds, of each matrix
// q, the two elements of row l / 4 at columns 2 (l % 4), + 1 in its register q
inline void tnb_stmatrix_x4(unsigned a, unsigned r0, unsigned r1, unsigned r2, unsigned r3) {
  Warp& w = my_warp(); int l = my_lane();
  w.u[l][0] = r0; w.u[l][1] = r1; w.u[l][2] = r2; w.u[l][3] = r3;
  w.bar.arrive_and_wait();
  if (a % 16 || a + 16 > SMEM) tnb_die("stmatrix: a row address off 16 bytes or outside shared memory", a);
  for (int c = 0; c < 4; ++c) { unsigned word = w.u[(l & 7) * 4 + c][l >> 3]; std::memcpy(g_smem + a + 4 * c, &word, 4); }
  w.bar.arrive_and_wait();
}
inline unsigned tnb_cvt2_f16(float lo, float hi) { return (unsigned)tnb_f2h(lo) | ((unsigned)tnb_f2h(hi) << 16); }
inline unsigned tnb_cvt2_bf16(float lo, float hi) { return (unsigned)tnb_f2b(lo) | ((unsigned)tnb_f2b(hi) << 16); }
// named barriers (bar.sync id, n): n threads of the CTA meet at barrier id
static std::mutex g_nb_mu;
static std::map<unsigned, std::shared_ptr<std::barrier<>>> g_named;
inline void tnb_named_sync(unsigned id, unsigned n) {
  std::shared_ptr<std::barrier<>> b;
  { std::lock_guard<std::mutex> lk(g_nb_mu); auto& p = g_named[id]; if (!p) p = std::make_shared<std::barrier<>>((std::ptrdiff_t)n); b = p; }
  b->arrive_and_wait();
}
"""

EMU_MAIN = EMU.main_template({
    "ARGS": "  const int use_tma = std::atoi(argv[2]);\n  g_tma_early = std::atoi(argv[3]);",
    "MAPS": "@MAPS@",
    "CTA_START": "    g_mbars.clear(); tnb_nbars_empty(); g_named.clear();",
    "THREAD_START": " t_wg_groups.clear(); t_wg_open.clear(); t_bulk.clear();",
    "THREAD_END": ('      if (!t_wg_groups.empty() || !t_wg_open.empty()) tnb_die("wgmma groups left unretired at the end");\n'
                   '      if (!t_bulk.empty()) tnb_die("bulk tensor stores never waited for");'),
})

_CTYPE = {"f16": "tnb_f16", "bf16": "tnb_bf16", "f32": "float", "f64": "double", "i8": "signed char", "i32": "int",
          "i64": "long long", "u8": "unsigned char", "u16": "unsigned short", "u32": "unsigned int"}


def sm90_emulated_source(ks) -> str:
    """The kernel's sm_90 CUDA with the emulation prelude in place of the real one and of the
    inline-assembly wgmma functions."""
    head, sep, body = ks.source.partition("#endif  // TILENB_PRELUDE")
    assert sep, "no prelude marker in the generated source"
    i = body.index("// ---- Hopper tensor cores")
    j = body.index('#error "this kernel has loops lowered to wgmma')
    j = body.index("#endif", j) + len("#endif")
    names = sorted(set(re.findall(r"tnb_wgmma_(f16|bf16)_n(\d+)_t(\d)\b", body[i:j])))
    fns = "".join(f"inline void tnb_wgmma_{k}_n{n}_t{t}(float* d, unsigned long long da, unsigned long long db) "
                  f"{{ tnb_wg_issue(d, da, db, {n}, {t}, {'true' if k == 'bf16' else 'false'}); }}\n"
                  for k, n, t in names)
    rs = sorted(set(re.findall(r"tnb_wgmma_rs_(f16|bf16)_n(\d+)_t(\d)\b", body[i:j])))
    fns += "".join(f"inline void tnb_wgmma_rs_{k}_n{n}_t{t}(float* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, "
                   f"unsigned long long db) {{ unsigned a[4] = {{a0, a1, a2, a3}}; "
                   f"tnb_wg_issue_rs(d, a, db, {n}, {t}, {'true' if k == 'bf16' else 'false'}); }}\n"
                   for k, n, t in rs)
    body = body[:i] + fns + body[j:]
    body = body.replace("extern __shared__ __align__(16) unsigned char tnb_smem[];", "unsigned char* const tnb_smem = g_smem;")
    body = re.sub(r"__shared__ __align__\(16\) unsigned char tnb_smem\[\d+\];", "unsigned char* const tnb_smem = g_smem;", body)
    return EMU.EMU_PRELUDE + SM90_EMU + body.replace("__shared__ ", "static ")


def build_sm90(ks, args, dims, grid, workdir) -> Path:
    """Compile the emulation of a lowered kernel for these arguments (their shapes, the runtime
    `dims` by name, the grid); returns the binary, which run_sm90 runs."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    grid = tuple(grid) + (1,) * (3 - len(tuple(grid)))
    tensors, call, shapes = [], [], {}
    ai = 0
    for kind, name, dt in ks.params:
        if kind == "tensor":
            a = args[ai]
            ai += 1
            shapes[name] = (len(tensors), a.shape, a.itemsize)
            call.append(f"({_CTYPE[dt]}*)t{len(tensors)}.data()")
            tensors.append(a)
        elif kind == "scalar":
            cty, npt = EMU._C_SCALAR[dt]
            call.append(f"({cty}){repr(npt(args[ai]).item())}")
            ai += 1
        else:
            call.append(f"(long long){int(dims[name])}LL")
    maps = []
    for q, t in enumerate(ks.tmaps):
        k, shape, isz = shapes[t.tensor]
        inner, st, strides = list(reversed(shape)), isz, []
        for d in inner:
            strides.append(st)
            st *= d
        maps.append(f"  tnb_tmap map{q}; map{q}.base = t{k}.data(); map{q}.rank = {len(inner)}; "
                    f"map{q}.swz = {t.swizzle}; map{q}.esz = {isz};")
        for i in range(len(inner)):
            maps.append(f"  map{q}.dims[{i}] = {inner[i]}; map{q}.strides[{i}] = {strides[i]}; map{q}.box[{i}] = {t.box[i]};")
        call.append(f"map{q}")
    call += ["use_tma"] * len(tma_flags(ks.tmaps))     # tnb_tma (and tnb_tma_st: the same choice)
    loads = [f'  std::snprintf(path, sizeof path, "%s/in{k}.bin", dir); auto t{k} = load(path, {a.nbytes});'
             for k, a in enumerate(tensors)]
    saves = [f'  std::snprintf(path, sizeof path, "%s/out{k}.bin", dir); save(path, t{k}, {a.nbytes});'
             for k, a in enumerate(tensors)]
    main = (EMU_MAIN.replace("@LOADS@", "\n".join(loads)).replace("@SAVES@", "\n".join(saves))
            .replace("@MAPS@", "\n".join(maps)).replace("@T@", str(ks.threads)).replace("@GX@", str(grid[0]))
            .replace("@GY@", str(grid[1])).replace("@GZ@", str(grid[2]))
            .replace("@CALL@", f"{ks.symbol}({', '.join(call)})"))
    text = sm90_emulated_source(ks) + main
    exe = workdir / f"k_{hashlib.sha256(text.encode()).hexdigest()[:16]}"
    if not exe.exists():
        (workdir / (exe.name + ".cpp")).write_text(text)
        r = subprocess.run(["g++", "-std=c++20", "-O1", "-w", "-pthread", "-o", str(exe), str(workdir / (exe.name + ".cpp"))],
                           capture_output=True, text=True, timeout=900)
        if r.returncode:
            raise RuntimeError(f"g++ failed:\n{r.stderr[:6000]}")
    return exe


def run_sm90(exe: Path, args, workdir, use_tma: int, tma_early: int):
    """Run an emulation built by build_sm90; tensors in `args` are updated in place."""
    workdir = Path(workdir)
    tensors = [a for a in args if isinstance(a, np.ndarray)]
    for k, a in enumerate(tensors):
        np.ascontiguousarray(a).tofile(workdir / f"in{k}.bin")
    r = subprocess.run([str(exe), str(workdir), str(use_tma), str(tma_early)], capture_output=True, text=True, timeout=900)
    if r.returncode:
        raise RuntimeError(f"the emulated kernel failed ({r.returncode}):\n{r.stderr[:4000]}")
    for k, a in enumerate(tensors):
        a[...] = np.fromfile(workdir / f"out{k}.bin", dtype=a.dtype).reshape(a.shape)
