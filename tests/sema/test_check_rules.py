"""Every static rule of the language, as a pair of programs: one that keeps the rule and
checks, one that breaks it and is refused with a positioned error.

For each failing program the test pins the error class, the 1-based line and column of the
thing at fault, and a phrase of the message that tells the user what to do. Programs are
written in the tile language itself; line 1 is the first line of the program text.
"""
import textwrap

import pytest

import tilenb
from tilenb import (TileBudgetError, TileError, TileNameError, TileRuleError, TileShapeError,
                    TileSyntaxError, TileTypeError)


def src(text):
    return textwrap.dedent(text).lstrip("\n")


def ok(text):
    return tilenb.compile(src(text), backend="cpu")


def fails(text, cls, line, column, phrase):
    with pytest.raises(TileError) as info:
        tilenb.compile(src(text), backend="cpu")
    errs = info.value.diagnostics
    hit = [e for e in errs if phrase in e.message]
    assert hit, f"no error mentions {phrase!r}: {[e.message for e in errs]}"
    e = hit[0]
    assert isinstance(e, cls), (type(e).__name__, e.message)
    assert (e.line, e.column) == (line, column), (e.line, e.column, e.message)
    return e


# ---- tiles are sized by constants -----------------------------------------------------------
def test_tile_sized_by_autotune_name_or_literal():
    ok("""
    @autotune(R in [8])
    kernel k(X: tensor<f32>[M, 64]) {
      var a: tile<f32>[R, 64] = 0.0
      X[0 :+ R, :] = a
    }
    """)


def test_runtime_dim_cannot_size_a_tile():
    fails("""
    kernel k(X: tensor<f32>[M, 64]) {
      var a: tile<f32>[M, 64] = 0.0
      X[0 :+ 8, :] = a[0 :+ 8, :]
    }
    """, TileShapeError, 2, 20, "bind it with @autotune(M in [...])")


def test_runtime_dim_cannot_be_a_slice_length():
    fails("""
    kernel k(X: tensor<f32>[M, 64]) {
      var a = X[0 :+ M, :]
    }
    """, TileShapeError, 2, 18, "'M' is a runtime dimension")


def test_colon_over_a_runtime_dim_is_refused():
    fails("""
    kernel k(X: tensor<f32>[M, 64]) {
      var a = X[:, 0 :+ 4]
    }
    """, TileShapeError, 2, 13, "a runtime dimension")


def test_slice_length_from_a_let_is_refused():
    fails("""
    kernel k(X: tensor<f32>[M, 64]) {
      let n = 4
      var a = X[0 :+ n, :]
    }
    """, TileShapeError, 3, 18, "must be a constant")


# ---- parameters ---------------------------------------------------------------------------
def test_tensor_and_scalar_parameters():
    ok("""
    kernel k(A: tensor<f32>[M, K], B: tensor<i8>[K, 4096], G: tensor<f32>[N, 1], alpha: f32, n: i32) {
      A[0, 0] = alpha * f32(n) + f32(B[0, 0]) + G[0, 0]
    }
    """)


def test_tile_parameter_is_refused():
    fails("""
    kernel k(X: tensor<f32>[M, 64], T: tile<f32>[8, 8]) {
      X[0, 0] = 1.0
    }
    """, TileRuleError, 1, 36, "kernels receive tensors")


def test_same_dim_name_is_one_value():
    m = ok("""
    kernel k(A: tensor<f32>[M, K], B: tensor<f32>[K, N]) {
      for k in range(0, K) {
        A[0, k] = B[k, 0]
      }
    }
    """)
    assert list(m.k.ir().dims) == ["M", "K", "N"]


# ---- tensors are used through subscripts --------------------------------------------------
def test_tensor_slices_and_elements():
    ok("""
    kernel k(A: tensor<f32>[M, 64]) {
      let v = A[0 :+ 4, :]
      var t = A[4 :+ 4, 0 :+ 64]
      A[8 :+ 4, :] = v + t
      A[0, 1] = A[1, 0]
    }
    """)


def test_tensor_named_alone_is_refused():
    fails("""
    kernel k(A: tensor<f32>[M, 64]) {
      let x = A
    }
    """, TileRuleError, 2, 11, "take a slice such as A[")


def test_tensor_in_an_expression_is_refused():
    fails("""
    kernel k(A: tensor<f32>[M, 64], B: tensor<f32>[M, 64]) {
      B[0 :+ 4, :] = A * 2.0
    }
    """, TileRuleError, 2, 18, "cannot be used whole")


def test_tensor_assigned_whole_is_refused():
    fails("""
    kernel k(A: tensor<f32>[M, 64]) {
      A = 1.0
    }
    """, TileRuleError, 2, 3, "write a slice")


# ---- let, var and views -----------------------------------------------------------------------
def test_let_var_with_and_without_types():
    ok("""
    kernel k(X: tensor<f32>[M, 64]) {
      let a = 1
      let b: f32 = 2.0
      var c = 3.0
      var d: i32 = a
      var t: tile<f32>[4, 64] = 0.0
      var u: tile<f32>[4, 64]
      var w: tile<f32>[4, 64] = exp(t - 1.0)
      c = c + b
      d += 1
      u = t + w
      X[0 :+ 4, :] = u * c
    }
    """)


def test_rebinding_a_let_is_refused():
    fails("""
    kernel k(X: tensor<f32>[M, 64]) {
      let a = 1.0
      a = 2.0
    }
    """, TileRuleError, 3, 3, "declare it with 'var'")


def test_redeclaring_in_one_block_is_refused():
    fails("""
    kernel k(X: tensor<f32>[M, 64]) {
      let a = 1.0
      let a = 2.0
    }
    """, TileNameError, 3, 3, "already defined in this block")


def test_shadowing_in_an_inner_block_is_allowed():
    ok("""
    kernel k(X: tensor<f32>[M, 64]) {
      let a = 1.0
      for i in range(0, 2) {
        let a = 2.0
        X[0, i] = a
      }
    }
    """)


def test_a_view_writes_through_but_does_not_rebind():
    ok("""
    kernel k(C: tensor<f32>[M, 64]) {
      let c = C[0 :+ 8, :]
      c[0 :+ 4, :] = c[4 :+ 4, :] * 2.0
    }
    """)
    fails("""
    kernel k(C: tensor<f32>[M, 64]) {
      let c = C[0 :+ 8, :]
      c = c * 2.0
    }
    """, TileRuleError, 3, 3, "written through a slice")


def test_var_needs_a_type_or_a_value():
    fails("""
    kernel k(X: tensor<f32>[M, 64]) {
      var a
    }
    """, TileTypeError, 2, 3, "needs a type or an initial value")


# ---- types ------------------------------------------------------------------------------------
def test_every_scalar_type():
    ok("""
    kernel k(A: tensor<f16>[N], B: tensor<bf16>[N], C: tensor<f32>[N], D: tensor<f64>[N],
             E: tensor<i8>[N], F: tensor<i32>[N], G: tensor<i64>[N], H: tensor<u8>[N],
             I: tensor<u16>[N], J: tensor<u32>[N]) {
      let i = ctx.thread
      let b: bool = i < 4
      C[i] = f32(A[i]) + f32(B[i]) + f32(D[i]) + f32(E[i]) + f32(F[i]) + f32(G[i])
             + f32(H[i]) + f32(i32(I[i])) + f32(i64(J[i]))
      H[i] = u8(F[i])
      I[i] = u16(F[i])
      J[i] = u32(F[i])
    }
    """.replace("\n             + f32(H", " + f32(H"))


def test_storage_types_take_no_arithmetic():
    ok("""
    kernel k(P: tensor<u8>[N], O: tensor<i32>[N]) {
      let i = ctx.thread
      O[i] = (i32(P[i]) >> 4) & 15
    }
    """)
    fails("""
    kernel k(P: tensor<u8>[N], O: tensor<i32>[N]) {
      let i = ctx.thread
      O[i] = i32(P[i] >> 4)
    }
    """, TileTypeError, 3, 14, "convert first")
    fails("""
    kernel k(P: tensor<u16>[N], O: tensor<u16>[N]) {
      var t = P[0 :+ 64]
      O[0 :+ 64] = t + t
    }
    """, TileTypeError, 3, 16, "no arithmetic on u16")
    fails("""
    kernel k(P: tensor<u32>[4, 64], O: tensor<u32>[4, 1]) {
      var t = P[0 :+ 4, :]
      O[0 :+ 4, :] = rowsum(t)
    }
    """, TileTypeError, 3, 18, "no arithmetic on u32")


def test_bool_converts_to_and_from_nothing():
    ok("""
    kernel k(X: tensor<f32>[N], O: tensor<i32>[N]) {
      let i = ctx.thread
      let c = X[i] > 0.0
      O[i] = where(c, 1, 0)
    }
    """)
    fails("""
    kernel k(X: tensor<f32>[N], O: tensor<i32>[N]) {
      let c = X[0] > 0.0
      O[0] = i32(c)
    }
    """, TileTypeError, 3, 10, "cannot convert a bool")
    fails("""
    kernel k(X: tensor<f32>[N], O: tensor<i32>[N]) {
      let c = bool(X[0])
    }
    """, TileTypeError, 2, 11, "no conversion to bool")
    fails("""
    kernel k(X: tensor<f32>[N], O: tensor<i32>[N]) {
      O[0] = X[0] > 0.0
    }
    """, TileTypeError, 2, 10, "bool converts to and from nothing")


def test_int_and_float_do_not_mix():
    ok("""
    kernel k(X: tensor<f32>[N], O: tensor<i32>[N]) {
      let i = ctx.thread
      X[i] = X[i] * 2 + f32(O[i])
      O[i] = O[i] * 3 + i32(X[i])
    }
    """)
    fails("""
    kernel k(X: tensor<f32>[N], O: tensor<i32>[N]) {
      let i = ctx.thread
      X[i] = X[i] * O[i]
    }
    """, TileTypeError, 3, 10, "convert one side first")
    fails("""
    kernel k(X: tensor<f32>[N], O: tensor<i32>[N]) {
      O[0] = O[0] * 2.5
    }
    """, TileTypeError, 2, 10, "the float literal 2.5")
    fails("""
    kernel k(X: tensor<f32>[N], O: tensor<i32>[N]) {
      O[0] = X[0]
    }
    """, TileTypeError, 2, 10, "write i32(...)")
    # a conversion call makes a typed value, not a literal that adapts
    fails("""
    kernel k(X: tensor<f32>[N]) {
      X[0] = X[1] + i32(2)
    }
    """, TileTypeError, 2, 10, "mixes f32 and i32")


def test_declared_type_must_match():
    fails("""
    kernel k(X: tensor<f32>[N]) {
      let a: i32 = 1.5
    }
    """, TileTypeError, 2, 16, "cannot store the float literal 1.5 into i32")
    fails("""
    kernel k(X: tensor<f32>[N]) {
      let a: i32 = X[0]
    }
    """, TileTypeError, 2, 16, "cannot store f32 into i32 without a conversion")
    fails("""
    kernel k(X: tensor<f32>[N]) {
      var t: tile<f32>[4, 4] = 0.0
      let s: f32 = t
    }
    """, TileTypeError, 3, 16, "cannot store a tile")


def test_conditions_are_bool():
    fails("""
    kernel k(X: tensor<f32>[N]) {
      if X[0] { X[1] = 0.0 }
    }
    """, TileTypeError, 2, 6, "must be a bool scalar")


def test_literals_must_fit():
    ok("""
    kernel k(X: tensor<i8>[N], Y: tensor<f16>[N], Z: tensor<i64>[N]) {
      X[0] = 127
      X[1] = -128
      Y[0] = 65504.0
      Z[0] = 9223372036854775807
    }
    """)
    fails("""
    kernel k(X: tensor<i8>[N]) {
      X[0] = 300
    }
    """, TileTypeError, 2, 10, "300 does not fit in i8")
    fails("""
    kernel k(X: tensor<f32>[N]) {
      X[0] = 1.0e40
    }
    """, TileTypeError, 2, 10, "out of the range of f32")
    fails("""
    kernel k(X: tensor<i32>[N]) {
      X[0] = 7 / 0
    }
    """, TileRuleError, 2, 10, "division by zero")


# ---- statements ---------------------------------------------------------------------------
def test_every_statement_form():
    ok("""
    kernel k(X: tensor<i32>[N]) {
      var x = X[ctx.thread]; x += 1; x -= 1; x *= 2; x /= 2; x %= 7
      x &= 3; x |= 4; x ^= 1; x <<= 2; x >>= 1
      for i in range(0, 8) { x += i32(i) }
      for i in range(0, 8, 2) { if i == 2 { continue } }
      for<unroll 2> i in range(0, 8, 2) { x += 1 }
      while x > 0 { x -= 1; if x == 3 { break } }
      if x == 0 { x = 1 } else if x == 1 { x = 2 } else { x = 3 }
      X[ctx.thread] = x;
      if x > 100 { return }
    }
    """)


def test_else_on_the_next_line_is_refused():
    fails("""
    kernel k(X: tensor<f32>[N]) {
      if X[0] > 0.0 {
        X[1] = 1.0
      }
      else {
        X[1] = 2.0
      }
    }
    """, TileSyntaxError, 5, 3, "'else' must follow the '}'")


def test_break_and_continue_need_a_loop():
    fails("""
    kernel k(X: tensor<f32>[N]) {
      if X[0] > 0.0 { break }
    }
    """, TileRuleError, 2, 19, "'break' outside a loop")
    fails("""
    kernel k(X: tensor<f32>[N]) {
      continue
    }
    """, TileRuleError, 2, 3, "'continue' outside a loop")


def test_unroll_count_is_a_constant():
    ok("""
    @autotune(U in [2, 4])
    kernel k(X: tensor<f32>[N]) {
      for<unroll U> i in range(0, N) { X[i] = 0.0 }
      for<unroll 1> i in range(0, N) { X[i] = 0.0 }
    }
    """)
    fails("""
    kernel k(X: tensor<f32>[N]) {
      let u = 4
      for<unroll u> i in range(0, N) { X[i] = 0.0 }
    }
    """, TileRuleError, 3, 14, "the unroll count 'u' must be a constant")
    fails("""
    kernel k(X: tensor<f32>[N]) {
      for<unroll 0> i in range(0, N) { X[i] = 0.0 }
    }
    """, TileRuleError, 2, 14, "at least 1")


def test_loop_step_is_a_positive_constant():
    ok("""
    @autotune(S in [16])
    kernel k(X: tensor<f32>[N]) {
      for i in range(0, N, S) { X[i] = 0.0 }
      for i in range(0, N, 2 * S) { X[i] = 0.0 }
    }
    """)
    fails("""
    kernel k(X: tensor<f32>[N]) {
      for i in range(0, N, N) { X[i] = 0.0 }
    }
    """, TileRuleError, 2, 24, "step must be a constant")
    fails("""
    kernel k(X: tensor<f32>[N]) {
      for i in range(N, 0, -1) { X[i] = 0.0 }
    }
    """, TileRuleError, 2, 24, "positive")


def test_unused_value_is_refused():
    fails("""
    kernel k(X: tensor<f32>[N]) {
      X[0] + 1.0
    }
    """, TileRuleError, 2, 3, "is not used")


# ---- shapes ---------------------------------------------------------------------------------
def test_broadcasting_shapes():
    ok("""
    kernel k(X: tensor<f32>[M, 64]) {
      var a = X[0 :+ 8, :]
      var col: tile<f32>[8, 1] = 1.0
      var row: tile<f32>[1, 64] = 2.0
      X[0 :+ 8, :] = a * col + row + 1.0
    }
    """)
    fails("""
    kernel k(X: tensor<f32>[M, 64]) {
      var a = X[0 :+ 8, :]
      var b = X[0 :+ 8, 0 :+ 32]
      X[0 :+ 8, :] = a + b
    }
    """, TileShapeError, 4, 18, "do not broadcast")
    fails("""
    kernel k(X: tensor<f32>[M, 64]) {
      var a: tile<f32>[8, 64] = 0.0
      a = X[0 :+ 4, :]
    }
    """, TileShapeError, 3, 7, "does not fit [8, 64]")


def test_dot_inner_dimensions():
    ok("""
    kernel k(A: tensor<f32>[M, 16], B: tensor<f32>[16, 32], C: tensor<f32>[M, 32]) {
      var a = A[0 :+ 8, :]
      var b = B[0 :+ 16, :]
      var bt = transpose(b)
      C[0 :+ 8, :] = dot(a, b) + dot_t(a, bt)
    }
    """)
    fails("""
    kernel k(A: tensor<f32>[M, 16], B: tensor<f32>[16, 32], C: tensor<f32>[M, 32]) {
      var a = A[0 :+ 8, :]
      var b = B[0 :+ 8, :]
      C[0 :+ 8, :] = dot(a, b)
    }
    """, TileShapeError, 4, 18, "inner dimensions differ")
    fails("""
    kernel k(A: tensor<f32>[M, 16], B: tensor<f32>[16, 32], C: tensor<f32>[M, 32]) {
      var a = A[0 :+ 8, :]
      var b = B[0 :+ 16, :]
      C[0 :+ 8, 0 :+ 16] = dot_t(a, b)
    }
    """, TileShapeError, 4, 24, "dot_t takes [M, K] x [N, K]")


def test_tile_window_stays_inside_the_tile():
    fails("""
    kernel k(X: tensor<f32>[M, 64]) {
      var a: tile<f32>[8, 64] = 0.0
      X[0 :+ 8, :] = a[4 :+ 8, :]
    }
    """, TileShapeError, 3, 20, "runs outside tile 'a'")


def test_subscript_count():
    fails("""
    kernel k(X: tensor<f32>[M, 64]) {
      X[0] = 1.0
    }
    """, TileShapeError, 2, 3, "2 dimension(s) but 1 subscript(s)")


# ---- shared memory budget -------------------------------------------------------------------
def test_budget_counts_tiles_alive_together():
    # 3 x 32 KB = 96 KB declared, but never two alive at once: fits the 48 KB static budget.
    ok("""
    kernel k(X: tensor<f32>[128, 64], Y: tensor<f32>[128, 64]) {
      var a = X[0 :+ 128, :]
      Y[0 :+ 128, :] = a
      var b = X[0 :+ 128, :]
      Y[0 :+ 128, :] = b * 2.0
      var c = X[0 :+ 128, :]
      Y[0 :+ 128, :] = c * 3.0
    }
    """)


def test_budget_exceeded_without_dynshared():
    e = fails("""
    kernel k(X: tensor<f32>[128, 64], Y: tensor<f32>[128, 64]) {
      var a = X[0 :+ 128, :]
      var b = X[0 :+ 128, :]
      Y[0 :+ 128, :] = a + b
    }
    """, TileBudgetError, 3, 3, "add @dynshared")
    assert "65536 bytes" in e.message and "a (32768 B)" in e.message


def test_budget_with_dynshared():
    ok("""
    @dynshared
    kernel k(X: tensor<f32>[128, 64], Y: tensor<f32>[128, 64]) {
      var a = X[0 :+ 128, :]
      var b = X[0 :+ 128, :]
      Y[0 :+ 128, :] = a + b
    }
    """)


def test_budget_counts_tiles_live_across_a_loop():
    # q is declared before the loop and read after it: it stays alive through the loop.
    fails("""
    kernel k(X: tensor<f32>[M, 64], Y: tensor<f32>[128, 64]) {
      var q = X[0 :+ 128, :]
      for i in range(0, 4) {
        var s = X[i :+ 128, :]
        Y[0 :+ 128, :] = s
      }
      Y[0 :+ 128, :] = q
    }
    """, TileBudgetError, 4, 5, "static budget")


# ---- uniformity -------------------------------------------------------------------------------
def test_tile_statements_under_uniform_control():
    ok("""
    kernel k(X: tensor<f32>[M, 64], n: i32) {
      if ctx.block.x < 4 && n > 0 {
        var a = X[0 :+ 8, :]
        X[8 :+ 8, :] = a
      }
      for i in range(0, M, 8) {
        X[i :+ 8, :] = 0.0
      }
    }
    """)


def test_tile_statement_under_varying_if():
    fails("""
    kernel k(X: tensor<f32>[M, 64]) {
      if ctx.thread < 32 {
        var a = X[0 :+ 8, :]
      }
    }
    """, TileRuleError, 3, 5, "the condition 'ctx.thread < 32' at line 2")


def test_tile_statement_under_warp_uniform_control():
    fails("""
    kernel k(X: tensor<f32>[M, 64]) {
      if ctx.warp == 0 {
        X[0 :+ 8, :] = 0.0
      }
    }
    """, TileRuleError, 3, 5, "under warp-uniform control")


def test_tile_statement_in_a_varying_loop():
    fails("""
    kernel k(X: tensor<f32>[M, 64]) {
      for i in range(0, ctx.lane) {
        X[0 :+ 8, :] = 0.0
      }
    }
    """, TileRuleError, 3, 5, "the loop bounds")
    fails("""
    kernel k(X: tensor<f32>[M, 64]) {
      var n = X[ctx.thread, 0]
      while n > 0.0 {
        X[0 :+ 8, :] = 0.0
        n -= 1.0
      }
    }
    """, TileRuleError, 4, 5, "the while condition 'n > 0.0'")


def test_tile_statement_after_a_varying_break():
    fails("""
    kernel k(X: tensor<f32>[M, 64]) {
      for i in range(0, 4) {
        if ctx.thread == 3 { break }
        X[0 :+ 8, :] = 0.0
      }
    }
    """, TileRuleError, 4, 5, "the 'break' at line 3 is taken by some threads only")


def test_var_assigned_a_varying_value_makes_control_varying():
    fails("""
    kernel k(X: tensor<f32>[M, 64]) {
      var n = 0
      n = i32(ctx.thread)
      if n > 2 {
        X[0 :+ 8, :] = 0.0
      }
    }
    """, TileRuleError, 5, 5, "the condition 'n > 2' at line 4")


def test_barrier_under_varying_control():
    ok("""
    kernel k(X: tensor<f32>[M, 64]) {
      var t: tile<f32>[1, 256]
      t[0, ctx.thread] = 1.0
      barrier()
      X[0, 0] = t[0, 255 - ctx.thread]
    }
    """)
    fails("""
    kernel k(X: tensor<f32>[M, 64]) {
      if ctx.lane == 0 {
        barrier()
      }
    }
    """, TileRuleError, 3, 5, "barrier() (it would hang) under varying control: the condition 'ctx.lane == 0'")


def test_tile_slice_start_must_be_uniform():
    fails("""
    kernel k(X: tensor<f32>[M, 64]) {
      var a = X[ctx.thread :+ 8, :]
    }
    """, TileRuleError, 2, 13, "the slice start 'ctx.thread' differs between threads")


def test_tile_slice_scalar_index_must_be_uniform():
    ok("""
    kernel k(X: tensor<f32>[B, M, 64], Y: tensor<f32>[M, 64]) {
      var a = X[ctx.block.x, 0 :+ 8, :]
      Y[0, ctx.thread % 64] = X[ctx.thread % 4, 0, ctx.thread % 64]
    }
    """)
    fails("""
    kernel k(X: tensor<f32>[B, M, 64]) {
      var a = X[ctx.thread % 4, 0 :+ 8, :]
    }
    """, TileRuleError, 2, 13, "the index 'ctx.thread % 4' differs between threads")


def test_tile_filled_with_varying_value():
    fails("""
    kernel k(X: tensor<f32>[M, 64]) {
      var a: tile<f32>[8, 64] = X[ctx.thread, 0]
    }
    """, TileRuleError, 2, 29, "per-thread (varying) value")


# ---- names ---------------------------------------------------------------------------------------
def test_undefined_names():
    fails("""
    kernel k(X: tensor<f32>[M, 64]) {
      X[0, 0] = y
    }
    """, TileNameError, 2, 13, "'y' is not defined")
    fails("""
    kernel k(X: tensor<f32>[M, 64]) {
      X[0, 0] = frobnicate(1.0)
    }
    """, TileNameError, 2, 13, "'frobnicate' is not defined")
    fails("""
    kernel k(X: tensor<f32>[M, 64]) {
      let a = ctx.block.w
    }
    """, TileNameError, 2, 11, "ctx has no field 'block.w'")


def test_every_ctx_field():
    ok("""
    kernel k(X: tensor<i64>[N]) {
      X[0] = i64(ctx.block.x + ctx.block.y + ctx.block.z + ctx.grid.x + ctx.grid.y + ctx.grid.z)
      X[1] = i64(ctx.thread + ctx.threads + ctx.warp + ctx.lane)
    }
    """)


def test_keywords_are_reserved():
    fails("""
    kernel k(X: tensor<f32>[N]) {
      let for = 1.0
    }
    """, TileSyntaxError, 2, 7, "unexpected 'for'")


def test_builtin_names_are_reserved():
    fails("""
    kernel k(X: tensor<f32>[N]) {
      let exp = 1.0
    }
    """, TileNameError, 2, 3, "'exp' is a built-in name")


# ---- functions -----------------------------------------------------------------------------------
def test_expression_and_statement_functions():
    ok("""
    fn silu(x) = x / (1.0 + exp(-x))
    fn twice(x) = silu(silu(x))
    fn scale_in_place(t, s) {
      t = t * s
    }
    kernel k(X: tensor<f32>[N]) {
      var acc = X[0 :+ 64]
      scale_in_place(acc, 0.5)
      X[0 :+ 64] = twice(acc)
    }
    """)


def test_function_hygiene_own_names_never_meet_the_callers():
    m = ok("""
    fn bump(t) {
      let one = 1.0
      for i in range(0, 2) {
        t += one
      }
    }
    kernel k(X: tensor<f32>[N]) {
      let one = 100.0
      var i = 5.0
      bump(i)
      X[0] = i + one
    }
    """)
    from tilenb import ir
    kir = m.k.ir()
    loop = [s for s in ir.walk_stmts(kir.body) if isinstance(s, ir.For)][0]
    inc = loop.body[0]
    assert inc.target.sym.name == "i" and inc.target.sym.kind == "var"   # the caller's i
    assert inc.value.sym.name == "one" and inc.value.sym.type == ir.ScalarT("f32")
    assert inc.value.sym is not kir.body[0].sym                            # bump's own `one`


def test_function_free_names_resolve_at_the_call():
    ok("""
    fn store_scaled(v) {
      Y[0] = v * scale
    }
    kernel k(Y: tensor<f32>[N], scale: f32) {
      store_scaled(2.0)
    }
    """)
    fails("""
    fn store_scaled(v) {
      Y[0] = v * scale
    }
    kernel k(Y: tensor<f32>[N]) {
      store_scaled(2.0)
    }
    """, TileNameError, 2, 14, "'scale' is not defined")


def test_statement_function_assigns_a_tile_passed_by_name():
    ok("""
    fn zero_rows(t, n) {
      t[0 :+ n, :] = 0.0
    }
    kernel k(X: tensor<f32>[M, 64]) {
      var a = X[0 :+ 8, :]
      zero_rows(a, 4)
      X[0 :+ 8, :] = a
    }
    """)
    fails("""
    fn scale_in_place(t, s) {
      t = t * s
    }
    kernel k(X: tensor<f32>[M, 64]) {
      var a = X[0 :+ 8, :]
      scale_in_place(a * 2.0, 0.5)
    }
    """, TileRuleError, 6, 18, "must be passed a name")


def test_function_parameter_it_subscripts_must_be_passed_a_name():
    ok("""
    fn first(t) = t[0, 0]
    fn put(dst, v) {
      dst[0, 0] = v
    }
    kernel k(X: tensor<f32>[M, 64]) {
      var a = X[0 :+ 4, :]
      put(X, first(a) + first(X))
    }
    """)
    fails("""
    fn first(t) = t[0, 0]
    kernel k(X: tensor<f32>[M, 64]) {
      var a = X[0 :+ 4, :]
      X[0, 0] = first(a * 2.0)
    }
    """, TileRuleError, 4, 19, "indexes or assigns its parameter 't', so it must be passed a name, not 'a * 2.0'")


def test_direct_recursion():
    fails("""
    fn f(x) = f(x) + 1.0
    kernel k(X: tensor<f32>[N]) {
      X[0] = 1.0
    }
    """, TileRuleError, 1, 1, "recursion is not allowed")


def test_indirect_recursion():
    e = fails("""
    fn f(x) = g(x) * 2.0
    fn g(x) {
      let y = f(x)
    }
    kernel k(X: tensor<f32>[N]) {
      X[0] = f(1.0)
    }
    """, TileRuleError, 1, 1, "f -> g -> f")
    assert len([d for d in e.diagnostics if "recursion" in d.message]) == 1


def test_statement_function_may_not_return():
    fails("""
    fn f(t) {
      if t > 0.0 { return }
    }
    kernel k(X: tensor<f32>[N]) {
      X[0] = 1.0
    }
    """, TileRuleError, 2, 16, "'return' is not allowed in a statement function")


def test_statement_function_jumps_stay_in_its_own_loops():
    ok("""
    fn first_neg(X, out) {
      for i in range(0, 8) {
        if X[i] < 0.0 { out = i32(i); break }
        if X[i] == 0.0 { continue }
      }
    }
    kernel k(X: tensor<f32>[N], O: tensor<i32>[N]) {
      var o = -1
      first_neg(X, o)
      O[0] = o
    }
    """)
    fails("""
    fn stop(t) {
      if t > 0.0 { break }
    }
    kernel k(X: tensor<f32>[N]) {
      for i in range(0, 4) { stop(X[i]) }
    }
    """, TileRuleError, 2, 16, "'break' in a statement function must be inside a loop of that function")
    fails("""
    fn skip() {
      continue
    }
    kernel k(X: tensor<f32>[N]) {
      X[0] = 1.0
    }
    """, TileRuleError, 2, 3, "'continue' in a statement function")


def test_function_arity_and_kinds():
    fails("""
    fn f(a, b) = a + b
    kernel k(X: tensor<f32>[N]) {
      X[0] = f(1.0)
    }
    """, TileRuleError, 3, 10, "takes 2 argument(s), not 1")
    fails("""
    fn f(t) {
      t = t * 2.0
    }
    kernel k(X: tensor<f32>[N]) {
      X[0] = f(1.0)
    }
    """, TileRuleError, 5, 10, "has no value")


# ---- attributes ----------------------------------------------------------------------------------
def test_every_attribute():
    m = ok("""
    @autotune(TM in [32, 64], TK in [8, 16])
    @launch(128)
    @dynshared
    @registers(acc)
    @grid(cdiv(M, TM), 1)
    kernel k(A: tensor<f32>[M, K], C: tensor<f32>[M, 16]) {
      var acc: tile<f32>[TM, 16] = 0.0
      for kt in range(0, K, TK) {
        acc += A[ctx.block.x * TM :+ TM, kt :+ 16]
      }
      C[ctx.block.x * TM :+ TM, :] = acc
    }
    """)
    assert m.k.tune_space == {"TM": (32, 64), "TK": (8, 16)}
    kir = m.k.ir(TM=64, TK=8)
    assert kir.threads == 128 and kir.dynshared and kir.registers[0].name == "acc"


def test_unknown_and_repeated_attributes():
    fails("""
    @lanch(128)
    kernel k(X: tensor<f32>[N]) { X[0] = 1.0 }
    """, TileRuleError, 1, 1, "unknown attribute '@lanch'")
    fails("""
    @launch(128)
    @launch(256)
    kernel k(X: tensor<f32>[N]) { X[0] = 1.0 }
    """, TileRuleError, 2, 1, "given twice")


def test_launch_threads_are_whole_warps():
    fails("""
    @launch(100)
    kernel k(X: tensor<f32>[N]) { X[0] = 1.0 }
    """, TileRuleError, 1, 9, "multiple of 32")


def test_registers_tiles_stay_private():
    fails("""
    @registers(acc)
    kernel k(X: tensor<f32>[8, 64], Y: tensor<f32>[8, 1]) {
      var acc = X[0 :+ 8, :]
      Y[0 :+ 8, :] = rowsum(acc)
    }
    """, TileRuleError, 4, 25, "kept in registers")
    fails("""
    @registers(nope)
    kernel k(X: tensor<f32>[8, 64]) { X[0, 0] = 1.0 }
    """, TileNameError, 1, 12, "declares no tile of that name")


def test_autotune_values_are_constants():
    fails("""
    @autotune(T in [4, x])
    kernel k(X: tensor<f32>[N]) { X[0] = 1.0 }
    """, TileRuleError, 1, 20, "must be a constant")
    fails("""
    @autotune(T in [4], T in [8])
    kernel k(X: tensor<f32>[N]) { X[0] = 1.0 }
    """, TileNameError, 1, 21, "names 'T' twice")


def test_variant_that_does_not_fit_is_skipped():
    # TM=256 makes a 64 KB tile: that variant is skipped (with the reason), the other is kept.
    m = ok("""
    @autotune(TM in [32, 256])
    kernel k(X: tensor<f32>[M, 64]) {
      var a = X[0 :+ TM, :]
      X[0 :+ TM, :] = a
    }
    """)
    ck = m.k.checked
    assert list(ck.variants) == [(("TM", 32),)]
    assert "static budget" in ck.skipped[(("TM", 256),)]
    with pytest.raises(TileNameError, match="TM=256 was skipped"):
        m.k.ir(TM=256)


def test_no_variant_fits():
    fails("""
    @autotune(TM in [256, 512])
    kernel k(X: tensor<f32>[M, 64]) {
      var a = X[0 :+ TM, :]
      X[0 :+ TM, :] = a
    }
    """, TileBudgetError, 3, 3, "(in the variant TM=256; no @autotune variant fits)")


def test_variant_errors_name_the_variant():
    fails("""
    @autotune(C in [64, 32])
    kernel k(X: tensor<f32>[M, 64]) {
      var a = X[0 :+ 4, :]
      var b = X[0 :+ 4, 0 :+ C]
      X[0 :+ 4, :] = a + b
    }
    """, TileShapeError, 5, 18, "(in the variant C=32)")


def test_function_body_may_not_redeclare_a_parameter():
    fails("""
    fn f(t) {
      let t = 1.0
    }
    kernel k(X: tensor<f32>[N]) {
      var a = 1.0
      f(a)
    }
    """, TileNameError, 2, 3, "'t' is a parameter of function 'f'")


def test_loop_variable_may_not_shadow_a_parameter_or_dimension():
    fails("""
    kernel k(X: tensor<f32>[N]) {
      for N in range(0, 4) { X[N] = 1.0 }
    }
    """, TileNameError, 2, 3, "'N' is a dimension")
    fails("""
    kernel k(X: tensor<f32>[N]) {
      let X = 1.0
    }
    """, TileNameError, 2, 3, "'X' is a kernel parameter")


def test_flat_takes_a_declared_2d_tile():
    ok("""
    kernel k(X: tensor<f32>[N]) {
      var t: tile<f32>[4, 8] = 0.0
      flat(t)[0, 0 :+ 16] = 1.0
      X[0 :+ 32] = flat(t)[0, :]
    }
    """)
    fails("""
    kernel k(X: tensor<f32>[N]) {
      var t: tile<f32>[32] = 0.0
      X[0 :+ 32] = flat(t)[0, :]
    }
    """, TileShapeError, 3, 16, "flat() takes a 2-D tile")


def test_errors_every_variant_shares_are_not_labelled():
    e = fails("""
    @autotune(T in [4, 8])
    kernel k(X: tensor<f32>[N]) {
      X[0] = nope
    }
    """, TileNameError, 3, 10, "'nope' is not defined")
    assert "variant" not in e.message and len(e.diagnostics) == 1


def test_a_tile_too_large_by_itself_is_named_alone():
    """The budget error named a kernel-wide total when one tile alone was over the budget."""
    e = fails("""
    kernel k(X: tensor<f32>[M, 64], Y: tensor<f32>[M, 64]) {
      var small = X[0 :+ 8, :]
      var big = X[0 :+ 256, :]
      Y[0 :+ 256, :] = big + small[0 :+ 1, :]
    }
    """, TileBudgetError, 3, 3, "tile 'big' does not fit: it alone needs 65536 bytes of shared memory, more than "
                               "the static budget of 49152 bytes")
    assert "'small'" not in e.message and "small (" not in e.message
