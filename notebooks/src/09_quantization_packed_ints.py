# %% [markdown]
# # 9. Quantization and packed integer types
#
# Model weights are often stored in fewer bits than `f32`: 8-bit integers (`i8`) at a quarter of
# the memory, or 4-bit values packed two to a byte (`u8`) at an eighth. Each row keeps one `f32`
# **scale**; a weight is `q * scale`. This tutorial quantizes real weight matrices of MiniLM,
# reports the error that costs, multiplies with `i8` inputs (accumulating in `i32`), and packs and
# unpacks 4-bit values.
#
# The integer types, as the language defines them:
#
# | type | range | arithmetic |
# | --- | --- | --- |
# | `i8` | -128 .. 127 | loads sign-extend; `dot` of `i8` tiles accumulates in `i32` |
# | `i32` | 32-bit signed | wraps on overflow; `>>` is arithmetic |
# | `u8` | 0 .. 255 | storage only: convert first (`i32(b)`), reads zero-extend |
#
# Converting a float to an integer (`i8(x)`) truncates toward zero and **saturates** at the type's
# range; converting between integer types wraps. `round` rounds half to even.

# %%
%load_ext tilenb
import numpy as np
import tilenb
from tilenb import datasets

weights = datasets.minilm_weights()
W = weights["encoder.layer.0.intermediate.dense.weight"]        # [1536, 384]: the first feed-forward layer
bias = weights["encoder.layer.0.intermediate.dense.bias"].reshape(1, -1).copy()
print("W:", W.shape, W.dtype, f"{W.nbytes / 1e6:.2f} MB, values in [{W.min():.3f}, {W.max():.3f}]")

# %% [markdown]
# ## 8-bit weights, one scale per row
#
# Symmetric quantization maps each row's largest magnitude to 127:
# `scale = max|w| / 127`, `q = round(w / scale)`. The kernel does a row block at a time: a
# reduction (`rowmax(abs(w))`), a broadcast division, a conversion to `i8`. (`max(..., 1e-30)`
# keeps an all-zero row from dividing by zero.)

# %%
%%tilekernel
@autotune(R in [8], C in [384])
@launch(256)
@grid(cdiv(M, R))
kernel quantize_rows(X: tensor<f32>[M, C], Q: tensor<i8>[M, C], S: tensor<f32>[M, 1]) {
  let r = ctx.block.x * R
  var x = X[r :+ R, :]
  var scale = max(rowmax(abs(x)), 1.0e-30) / 127.0
  S[r :+ R, :] = scale
  Q[r :+ R, :] = i8(round(x / scale))
}

# %%
def quantize_reference(x, top):
    """numpy, in f32 like the kernel: per-row scale and rounded integers."""
    scale = (np.maximum(np.abs(x).max(axis=1, keepdims=True), np.float32(1e-30)) / np.float32(top)).astype(np.float32)
    return np.rint(x / scale), scale


Wq = np.zeros(W.shape, np.int8)
Ws = np.zeros((W.shape[0], 1), np.float32)
quantize_rows(W, Wq, Ws)
q_ref, s_ref = quantize_reference(W, 127)
err = tilenb.verify(Ws, s_ref, what="quantize_rows: 1536 row scales", rtol=1e-6, atol=0)
err = tilenb.verify(Wq, q_ref, what="quantize_rows: 1536 x 384 i8 weights, exactly", rtol=0, atol=0)

# %% [markdown]
# What the 8 bits cost, on this real matrix:

# %%
def report(name, approx, exact, nbytes):
    e = approx.astype(np.float64) - exact
    rel = np.linalg.norm(e) / np.linalg.norm(exact)
    print(f"{name:26} {nbytes / 1e6:5.2f} MB   max |error| {np.abs(e).max():.2e}   relative (Frobenius) {rel:.2e}")


W64 = W.astype(np.float64)
report("f32 (original)", W, W64, W.nbytes)
report("i8 + f32 row scales", Wq * Ws, W64, Wq.nbytes + Ws.nbytes)
print("every error is at most half a step:", bool((np.abs(Wq * Ws - W64) <= Ws / 2 * 1.0001).all()))

# %% [markdown]
# ## A linear layer in `i8`
#
# Quantize the activations too (the token vectors of a real sentence, one scale per token, with the
# same kernel), and the layer's product becomes an integer product: `dot_t` of two `i8` tiles
# accumulates exactly in `i32`. One multiplication by both scales at the end turns it back into
# floats: `y = (q_x q_w^T) * s_x * s_w^T + b`.

# %%
%%tilekernel --show lifetimes
@autotune(TM in [32], TN in [64], TK in [64])
@launch(256)
@grid(cdiv(M, TM), cdiv(N, TN))
kernel linear_i8(Xq: tensor<i8>[M, K], Sx: tensor<f32>[M, 1], Wq: tensor<i8>[N, K], Sw: tensor<f32>[1, N],
                 Bias: tensor<f32>[1, N], Y: tensor<f32>[M, N]) {
  let r = ctx.block.x * TM
  let c = ctx.block.y * TN
  var acc: tile<i32>[TM, TN] = 0
  for k in range(0, K, TK) {
    var a = Xq[r :+ TM, k :+ TK]
    var w = Wq[c :+ TN, k :+ TK]
    acc += dot_t(a, w)                          // i8 x i8, summed in i32: exact
  }
  Y[r :+ TM, c :+ TN] = f32(acc) * Sx[r :+ TM, :] * Sw[0 :+ 1, c :+ TN] + Bias[0 :+ 1, c :+ TN]
}

# %%
X = datasets.sentence_embeddings()                                # [36, 384]
Xq = np.zeros(X.shape, np.int8)
Xs = np.zeros((X.shape[0], 1), np.float32)
quantize_rows(X, Xq, Xs)
Y = np.zeros((X.shape[0], W.shape[0]), np.float32)
linear_i8(Xq, Xs, Wq, Ws.reshape(1, -1), bias, Y)

exact_int = Xq.astype(np.int64) @ Wq.astype(np.int64).T           # what the i32 accumulator must hold
err = tilenb.verify(Y, exact_int * Xs.astype(np.float64) * Ws.reshape(1, -1) + bias,
                    what="linear_i8 against the same integer arithmetic", rtol=1e-5, atol=1e-5)
y_f32 = X.astype(np.float64) @ W64.T + bias
rel = np.linalg.norm(Y - y_f32) / np.linalg.norm(y_f32)
print(f"i8 layer output vs the f32 layer: relative error {rel:.2e}, max |error| {np.abs(Y - y_f32).max():.3f}")

# %% [markdown]
# ## 4 bits, two to a byte
#
# With 4 bits the symmetric range is -7 .. 7 (`scale = max|w| / 7`). Adding 8 gives a **nibble**
# 1 .. 15 that fits in 4 unsigned bits, and two nibbles share a `u8`. This packing puts column `j`
# of a row in the low nibble of byte `j` and column `j + 192` in the high nibble: both halves are
# plain slices, so packing is two elementwise statements over `i32` tiles. `u8` is storage only,
# so the bytes are built in `i32` (`|`, `<<`) and converted at the store.

# %%
%%tilekernel --show threads
@autotune(R in [8])
@launch(256)
@grid(cdiv(M, R))
kernel pack_int4(X: tensor<f32>[M, 384], P: tensor<u8>[M, 192], S: tensor<f32>[M, 1]) {
  let r = ctx.block.x * R
  var x = X[r :+ R, :]
  var scale = max(rowmax(abs(x)), 1.0e-30) / 7.0
  S[r :+ R, :] = scale
  var nib: tile<i32>[R, 384] = i32(round(x / scale)) + 8          // 1 .. 15
  P[r :+ R, :] = u8(nib[0 :+ R, 0 :+ 192] | (nib[0 :+ R, 192 :+ 192] << 4))
}

@autotune(R in [8])
@launch(256)
@grid(cdiv(M, R))
kernel unpack_int4(P: tensor<u8>[M, 192], S: tensor<f32>[M, 1], X: tensor<f32>[M, 384]) {
  let r = ctx.block.x * R
  var b: tile<i32>[R, 192] = i32(P[r :+ R, :])                    // u8 reads zero-extend
  var s = S[r :+ R, :]
  X[r :+ R, 0 :+ 192] = f32((b & 15) - 8) * s
  X[r :+ R, 192 :+ 192] = f32(((b >> 4) & 15) - 8) * s
}

# %%
P = np.zeros((W.shape[0], 192), np.uint8)
S4 = np.zeros((W.shape[0], 1), np.float32)
pack_int4(W, P, S4)
q4, s4_ref = quantize_reference(W, 7)
nib = (q4 + 8).astype(np.int64)
P_ref = (nib[:, :192] | (nib[:, 192:] << 4)).astype(np.uint8)
err = tilenb.verify(S4, s4_ref, what="pack_int4: row scales", rtol=1e-6, atol=0)
err = tilenb.verify(P, P_ref, what="pack_int4: 1536 x 192 packed bytes, exactly", rtol=0, atol=0)

W4 = np.zeros(W.shape, np.float32)
unpack_int4(P, S4, W4)
lo, hi = (P & 15).astype(np.int64) - 8, (P >> 4).astype(np.int64) - 8
err = tilenb.verify(W4, np.concatenate([lo, hi], axis=1) * S4.astype(np.float64), what="unpack_int4 (exact inverse of the packing)", rtol=1e-6, atol=0)

# %% [markdown]
# The three storage formats of the same real matrix side by side:

# %%
report("f32 (original)", W, W64, W.nbytes)
report("i8 + f32 row scales", Wq * Ws, W64, Wq.nbytes + Ws.nbytes)
report("4-bit packed + row scales", W4, W64, P.nbytes + S4.nbytes)

# %% [markdown]
# Four bits cost about 18 times the error of eight on this matrix, for half the bytes. Real 4-bit
# schemes shrink the error with one scale per small group of columns (32 or 64) instead of per
# row: in the kernels above that is a `[R, 384 / 32]` scale tile and `rowmax` over `[R, 32]`
# windows, the same statements over smaller slices.
#
# On a GPU, the same kernels quantize whole models: only the grid grows. The `i8` product is where
# a GPU's integer tensor cores come in; this executor computes it exactly as the language defines
# it (exact `i32` sums), which is what the check above compares against.
