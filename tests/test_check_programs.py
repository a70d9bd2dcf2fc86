"""Whole programs of our own that exercise the language together, and what the checker makes of them.

Each program is one a user could plausibly write (a softmax, a layer norm, a stencil with a
halo, nibble unpacking, a block scan with barrier(), functions of both kinds, per-thread loops
with break). The property pinned: each checks without error, and the typed IR has the types,
shapes and statements the spec says it should. `PROGRAMS` is also the seed corpus of the
front-end fuzz test (tests/test_fuzz_frontend.py).
"""
import pytest

import tilenb
from tilenb import ir

PROGRAMS = {
    "softmax": """
// Row softmax: each CTA takes 4 rows; BLOCK covers the row, the edge past N is masked.
@autotune(BLOCK in [128, 256])
@launch(128)
@grid(cdiv(M, 4))
kernel softmax_rows(X: tensor<f32>[M, N], Y: tensor<f32>[M, N]) {
  let r = ctx.block.x * 4
  var x = X[r :+ 4, 0 :+ BLOCK]
  var m = rowmax(x)
  var e = exp(x - m)
  var s = rowsum(e)
  Y[r :+ 4, 0 :+ BLOCK] = e / s
}
""",
    "layernorm": """
fn mean_of(t, n) = rowsum(t) / n

@autotune(D in [512])
@launch(256)
kernel layernorm(X: tensor<f16>[M, D], G: tensor<f32>[1, D], B: tensor<f32>[1, D],
                 Y: tensor<f16>[M, D], eps: f32) {
  let r = ctx.block.x * 2
  var x: tile<f32>[2, D] = f32(X[r :+ 2, :])
  var mu = mean_of(x, f32(D))
  var xc = x - mu
  var variance = rowsum(xc * xc) / f32(D)
  var inv = rsqrt(variance + eps)
  Y[r :+ 2, :] = f16(xc * inv * G[0 :+ 1, :] + B[0 :+ 1, :])
}
""",
    "stencil": """
// A five-point Laplacian. The tile reaches one row and column past the block on every side
// (starts of -1 at the first block); elements outside U read as 0.
@autotune(TR in [8], TC in [32])
@launch(256)
@grid(cdiv(H, TR), cdiv(W, TC))
kernel laplace(U: tensor<f32>[H, W], V: tensor<f32>[H, W]) {
  let r = ctx.block.x * TR
  let c = ctx.block.y * TC
  var u = U[r - 1 :+ TR + 2, c - 1 :+ TC + 2]
  // a newline ends a statement, except inside ( ) and [ ]
  V[r :+ TR, c :+ TC] = (u[0 :+ TR, 1 :+ TC] + u[2 :+ TR, 1 :+ TC]
                         + u[1 :+ TR, 0 :+ TC] + u[1 :+ TR, 2 :+ TC] - 4.0 * u[1 :+ TR, 1 :+ TC])
}

@autotune(T in [256])
kernel blur3(X: tensor<f32>[N], Y: tensor<f32>[N]) {
  let base = ctx.block.x * T
  let h = X[base - 1 :+ T + 2]       // a view: read once, no copy
  Y[base :+ T] = (h[0 :+ T] + h[1 :+ T] + h[2 :+ T]) / 3.0
}
""",
    "nibbles": """
// Two 4-bit values per byte, low nibble first, offset by 8 and scaled.
@launch(256)
kernel unpack_nibbles(P: tensor<u8>[N], S: tensor<f32>[1, 1], O: tensor<f32>[N, 2]) {
  let scale = S[0, 0]
  let i = ctx.block.x * 256 + ctx.thread
  if i < N {
    let b = i32(P[i])
    O[i, 0] = f32((b & 15) - 8) * scale
    O[i, 1] = f32(((b >> 4) & 15) - 8) * scale
  }
}

// The same with tiles: one row of 64 packed bytes per CTA.
@launch(64)
kernel unpack_tile(P: tensor<u8>[R, 64], Lo: tensor<i8>[R, 64], Hi: tensor<i8>[R, 64]) {
  let row = ctx.block.x
  var p = P[row :+ 1, :]
  var w: tile<i32>[1, 64] = i32(p)
  Lo[row :+ 1, :] = i8((w & 15) - 8)
  Hi[row :+ 1, :] = i8((i32(p) >> 4) & 15 - 8)
}
""",
    "scan": """
// An inclusive block scan (Hillis-Steele) in per-thread code: each thread owns one element and
// the two halves of buf take turns; barrier() separates the rounds.
@launch(256)
kernel block_scan(X: tensor<i32>[N], Y: tensor<i32>[N]) {
  let base = ctx.block.x * 256
  let t = ctx.thread
  var buf: tile<i32>[2, 256]
  buf[0, t] = X[base + t]
  barrier()
  var src = 0
  var off = 1
  while off < 256 {
    var v = buf[src, t]
    if t >= off {
      v += buf[src, t - off]
    }
    buf[1 - src, t] = v
    barrier()
    src = 1 - src
    off = off * 2
  }
  Y[base + t] = buf[src, t]
}
""",
    "functions": """
fn gelu(x) = 0.5 * x * (1.0 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)))
fn sq(x) = x * x
fn norm2(a, b) = sqrt(sq(a) + sq(b))

// A statement function: its own `tmp` and loop variable `i` never meet the caller's.
fn scale_rows_by(t, s, times) {
  var tmp = s
  for i in range(0, times) {
    t = t * tmp
  }
}

fn clamp_in_place(t, lo, hi) {
  t = min(max(t, lo), hi)
}

@autotune(TM in [16], TN in [64])
kernel act_and_scale(X: tensor<f32>[M, TN], Y: tensor<f32>[M, TN], s: f32) {
  let tmp = 3
  let i = ctx.block.x
  var t = X[i * TM :+ TM, :]
  t = gelu(t)
  scale_rows_by(t, s, tmp)
  var u = sq(t)
  scale_rows_by(u, 0.5, 1)
  clamp_in_place(u, -1.0, 1.0)
  Y[i * TM :+ TM, :] = norm2(t, u)
}
""",
    "breaks": """
// Per-thread loops that leave early: one thread per row.
@launch(64)
kernel first_above(X: tensor<f32>[M, N], O: tensor<i32>[M, 1], thr: f32) {
  let row = ctx.block.x * 64 + ctx.thread
  var found: i32 = -1
  for j in range(0, N) {
    if X[row, j] > thr {
      found = i32(j)
      break
    }
  }
  O[row, 0] = found
}

@launch(32)
kernel count_until_zero(X: tensor<i32>[M, N], O: tensor<i64>[M]) {
  let row = ctx.block.x * 32 + ctx.lane
  var j = 0
  var n: i64 = 0
  while j < 1000000 {
    let v = X[row, j]
    j += 1
    if v == 0 {
      break
    } else if v < 0 {
      continue
    }
    n += i64(v)
  }
  O[row] = n
}

@launch(128)
kernel sum_positive(X: tensor<f32>[1, N], O: tensor<f32>[1, 128]) {
  var acc: f32 = 0.0
  for<unroll 4> i in range(ctx.thread, N, 128) {
    let v = X[0, i]
    if v <= 0.0 { continue }
    acc += v
  }
  O[0, ctx.thread] = acc
}
""",
    "gemm_f16": """
// A GEMM with f16 inputs (tensor-core loop) and a fused epilogue through a let view of C.
@autotune(TM in [64, 128], TN in [64], TK in [32])
@launch(128)
@grid(cdiv(M, TM), cdiv(N, TN))
kernel hgemm(A: tensor<f16>[M, K], B: tensor<f16>[K, N], C: tensor<f32>[M, N], alpha: f32, beta: f32) {
  let pm = ctx.block.x
  let pn = ctx.block.y
  var acc: tile<f32>[TM, TN] = 0.0
  for kt in range(0, K, TK) {
    let a = A[pm * TM :+ TM, kt :+ TK]
    let b = B[kt :+ TK, pn * TN :+ TN]
    acc += dot(a, b)
  }
  let c_old = C[pm * TM :+ TM, pn * TN :+ TN]
  C[pm * TM :+ TM, pn * TN :+ TN] = alpha * acc + beta * c_old
}

// Q K^T with i8 inputs accumulates in i32.
@launch(128)
kernel qk_i8(Q: tensor<i8>[N, 64], Kt: tensor<i8>[N, 64], S: tensor<i32>[N, N]) {
  let i = ctx.block.x * 32
  let j = ctx.block.y * 32
  var q = Q[i :+ 32, :]
  var k = Kt[j :+ 32, :]
  S[i :+ 32, j :+ 32] = dot_t(q, k)
}
""",
    "tiles_reuse": """
// Three 32 KB tiles, 96 KB in all, never alive together: the footprint is 32 KB, so no
// @dynshared is needed. Flat views and tile windows on the way.
@launch(256)
kernel phases(X: tensor<f32>[128, 64], Y: tensor<f32>[128, 64]) {
  var a = X[0 :+ 128, :]
  Y[0 :+ 128, :] = a * 2.0
  var b: tile<f32>[128, 64] = X[0 :+ 128, :] + 1.0
  Y[0 :+ 128, :] = transpose(transpose(b))
  var c: tile<f32>[128, 64]
  c[0 :+ 64, :] = 0.0
  c[64 :+ 64, :] = 1.0
  flat(c)[0, 0 :+ 16] = 2.0
  Y[0 :+ 128, :] = c
}
""",
    "misc": """
// Every statement form and operator in one place.
@launch(256)
kernel misc(X: tensor<i32>[M, 8], F: tensor<f64>[M], B: tensor<bf16>[M], U: tensor<u16>[M],
            W: tensor<u32>[M], I8: tensor<i8>[M], L: tensor<i64>[M], Z: tensor<f32>[4, 4, M]) {
  let i = ctx.block.x * ctx.threads + ctx.thread; var x = X[i, 0]
  x += 1; x -= 2; x *= 3; x /= 4; x %= 5; x &= 6; x |= 7; x ^= 8; x <<= 1; x >>= 1
  let w = ctx.warp + ctx.lane + ctx.block.y + ctx.block.z + ctx.grid.x + ctx.grid.y + ctx.grid.z
  var d: f64 = F[i] * 0.5
  d = d + f64(B[i]) + f64(i32(U[i])) + f64(i64(W[i])) + f64(I8[i] * 2) + f64(L[i])
  let h: bf16 = bf16(d)
  let flag: bool = x > 3 && !(d < 0.0) || x == -1
  if flag { F[i] = d } else if x != 0 { F[i] = -d } else { F[i] = f64(h) }
  X[i, 1] = ~x ^ (x << 2) | (x >> 1) & 0xff
  Z[1, 2, i] = f32(i64(w) % 7)
  for k in range(0, 8, 2) {
    if k == 4 { continue }
    X[i, k] = i32(k)
  }
  if i > 1000000 { return }
  atomic_add(L[0], i64(1))
  atomic_max(F[0], d)
}
""",
}


def _compile(name):
    return tilenb.compile(PROGRAMS[name], backend="cpu", filename=f"{name}.tile")


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_checks(name):
    mod = _compile(name)
    assert mod.kernels


def _stmts(kir, cls):
    return [s for s in ir.walk_stmts(kir.body) if isinstance(s, cls)]


def test_softmax_variants_and_shapes():
    k = _compile("softmax").softmax_rows
    assert k.tune_space == {"BLOCK": (128, 256)}
    for block in (128, 256):
        kir = k.ir(BLOCK=block)
        decls = {s.sym.name: s.sym.type for s in _stmts(kir, ir.VarDecl)}
        assert decls["x"] == ir.TileT("f32", (4, block))
        assert decls["m"] == ir.TileT("f32", (4, 1))
        assert decls["e"] == ir.TileT("f32", (4, block))
        assert kir.threads == 128 and len(kir.grid) == 1


def test_layernorm_computes_in_f32_and_stores_f16():
    kir = _compile("layernorm").layernorm.ir()
    decls = {s.sym.name: s.sym.type for s in _stmts(kir, ir.VarDecl)}
    assert decls["x"] == ir.TileT("f32", (2, 512))
    assert decls["mu"] == ir.TileT("f32", (2, 1))
    store = _stmts(kir, ir.Assign)[-1]
    assert isinstance(store.target, ir.Slice) and store.target.base.name == "Y"
    assert store.value.type == ir.TileT("f16", (2, 512))


def test_stencil_halo_slices():
    mod = _compile("stencil")
    kir = mod.laplace.ir()
    (u,) = [s for s in _stmts(kir, ir.VarDecl) if s.sym.name == "u"]
    assert u.sym.type == ir.TileT("f32", (10, 34))
    kir = mod.blur3.ir()
    (h,) = _stmts(kir, ir.Let)[1:]
    assert h.sym.kind == "view" and h.sym.type == ir.TileT("f32", (258,))


def test_nibbles_types():
    mod = _compile("nibbles")
    kir = mod.unpack_nibbles.ir()
    b = [s for s in _stmts(kir, ir.Let) if s.sym.name == "b"][0]
    assert b.sym.type == ir.ScalarT("i32")
    kir = mod.unpack_tile.ir()
    p = [s for s in _stmts(kir, ir.VarDecl) if s.sym.name == "p"][0]
    assert p.sym.type == ir.TileT("u8", (1, 64))


def test_scan_has_barriers_and_uniform_loop():
    kir = _compile("scan").block_scan.ir()
    assert len(_stmts(kir, ir.Barrier)) == 2
    (loop,) = _stmts(kir, ir.While)
    (branch,) = [s for s in loop.body if isinstance(s, ir.If)]
    # the loop runs under uniform control (off and src are uniform vars); the `if t >= off`
    # body runs under varying control, and both barriers under uniform control
    assert kir.uniformity[id(loop)] == ir.UNIFORM
    assert kir.uniformity[id(branch)] == ir.UNIFORM
    assert kir.uniformity[id(branch.then[0])] == ir.VARYING
    assert all(kir.uniformity[id(b)] == ir.UNIFORM for b in _stmts(kir, ir.Barrier))


def test_functions_inline_with_hygiene():
    kir = _compile("functions").act_and_scale.ir()
    # both calls of scale_rows_by inline a loop; the function's `tmp` is a var of its own,
    # distinct from the kernel's `let tmp = 3` that the first call passes as `times`.
    loops = _stmts(kir, ir.For)
    assert len(loops) == 2
    tmps = [s.sym for s in ir.walk_stmts(kir.body) if isinstance(s, (ir.Let, ir.VarDecl)) and s.sym.name == "tmp"]
    assert [t.kind for t in tmps] == ["let", "var", "var"]
    assert len({id(t) for t in tmps}) == 3
    assert isinstance(loops[0].hi, ir.Ref) and loops[0].hi.sym is tmps[0]
    # the aliased tile `t` is what the first call's body assigns
    t_sym = [s.sym for s in _stmts(kir, ir.VarDecl) if s.sym.name == "t"][0]
    assigns = [s for s in ir.walk_stmts(loops[0].body) if isinstance(s, ir.Assign)]
    assert assigns[0].target.sym is t_sym


def test_breaks_in_per_thread_loops():
    mod = _compile("breaks")
    assert len(_stmts(mod.first_above.ir(), ir.Break)) == 1
    kir = mod.count_until_zero.ir()
    assert len(_stmts(kir, ir.Break)) == 1 and len(_stmts(kir, ir.Continue)) == 1
    (loop,) = _stmts(mod.sum_positive.ir(), ir.For)
    assert loop.unroll == 4 and loop.step == 128


def test_gemm_dot_types():
    mod = _compile("gemm_f16")
    assert set(mod.hgemm.tune_space["TM"]) == {64, 128}
    kir = mod.hgemm.ir(TM=128)
    acc = [s for s in _stmts(kir, ir.Assign) if s.op == "+"][0]
    assert isinstance(acc.value, ir.Dot) and acc.value.type == ir.TileT("f32", (128, 64))
    kir = mod.qk_i8.ir()
    store = _stmts(kir, ir.Assign)[-1]
    assert isinstance(store.value, ir.Dot) and store.value.trans_b
    assert store.value.type == ir.TileT("i32", (32, 32))


def test_tiles_reuse_fits_without_dynshared():
    from tilenb.analysis.lifetimes import tile_lifetimes
    kir = _compile("tiles_reuse").phases.ir()
    lt = tile_lifetimes(kir)
    assert sum(t.bytes for t in lt.tiles) == 3 * 32768
    assert lt.footprint == 32768


def test_misc_statement_forms():
    kir = _compile("misc").misc.ir()
    ops = [s.op for s in _stmts(kir, ir.Assign) if s.op is not None]
    assert ops == ["+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>"]
    assert len(_stmts(kir, ir.Atomic)) == 2 and len(_stmts(kir, ir.Return)) == 1
    flag = [s for s in _stmts(kir, ir.Let) if s.sym.name == "flag"][0]
    assert flag.sym.type == ir.ScalarT("bool")
