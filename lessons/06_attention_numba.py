# %% [markdown]
# # Lesson 06: making attention fast with Numba
#
# **Goal.** Lesson 05's attention is a few NumPy lines, and it is the *source of truth*. But
# NumPy runs each line over the whole `(B, NH, T, T)` array, writing big temporaries, and some
# of its batched matmuls on transposed views take a slow path. **Numba** compiles a Python
# function with plain loops into machine code. This lesson writes a simple Numba attention
# kernel, then uses minibert's tuned one (`minibert.kernels`), and checks both against the
# NumPy reference.
#
# **Finish line.** Both kernels equal `minibert.layers.attention_forward` / `_backward` to
# float64 round-off (relative error below 1e-10), padded keys still get exactly zero weight,
# and the timings of reference and kernels are printed (medians of several runs; this lesson
# does **not** assert a speed-up, because shared machines are noisy).

# %% [markdown]
# ## Setup
# Shape legend as in lesson 05: `B` batch, `NH` heads, `T` tokens, `HS` head size.
# `attn_mask` is `(B, T)`: 1 = real token, 0 = padding.

# %%
import math
import os
import time

import numba
import numpy as np

from minibert import kernels, layers

FAST = os.environ.get("MINIBERT_FAST") == "1"  # smaller timing problem in CI
rng = np.random.default_rng(6)


def make_inputs(B, NH, T, HS, dtype=np.float64):
    shape = (B, NH, T, HS)
    q, k, v = (rng.standard_normal(shape).astype(dtype) for _ in range(3))  # 3 x (B, NH, T, HS)
    lengths = rng.integers(T // 2, T + 1, size=B)  # (B,) real tokens per sequence
    attn_mask = (np.arange(T)[None, :] < lengths[:, None]).astype(dtype)  # (B, T)
    return q, k, v, attn_mask


def max_rel(a, b):
    """Largest |a - b| relative to the largest |b|: the size of the disagreement (0 if equal)."""
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


# %% [markdown]
# ## A first kernel: loops, compiled
# Inside `@numba.njit` we write the loops NumPy hides. For each `(batch, head)` pair and each
# query row `i`, we compute the scores against every key, a stable softmax, and the weighted
# sum of values: exactly lesson 05's math, one row at a time, without any `(T, T)` temporary
# except the probabilities we keep for backward.
#
# - `numba.prange` says "the iterations of this loop are independent, run them on several
#   threads". We parallelise over the `B * NH` (batch, head) pairs: each pair writes only its
#   own slice of `att` and `out`, so threads never write the same memory. (Backward is harder:
#   `dk` and `dv` of a key collect contributions from *every* query. The library kernel keeps
#   them correct by giving each thread a whole (batch, head), so all those contributions are
#   summed by one thread.)
# - **No `fastmath=True`.** Fastmath lets the compiler reorder sums and assume no NaN/inf.
#   That can change results in the last bits, or break the `-10000` mask trick, and
#   everything here is gradient-checked against the reference, so we keep IEEE semantics.
# - `cache=True` stores the compiled machine code next to the source (in `__pycache__`), so
#   the second run of this file does not pay the compile time again.
# - To debug a kernel, run with `NUMBA_DISABLE_JIT=1`: the decorators do nothing, the
#   function runs as plain (slow) Python, and you can step through it or print inside it.

# %%
@numba.njit(parallel=True, cache=True)
def my_attention_forward_kernel(q, k, v, attn_mask, att, out):
    """q, k, v (B, NH, T, HS); attn_mask (B, T). Writes att (B, NH, T, T), out (B, NH, T, HS)."""
    B, NH, T, HS = q.shape
    scale = 1.0 / math.sqrt(HS)
    for bh in numba.prange(B * NH):  # independent (batch, head) pairs, one per thread at a time
        b, h = bh // NH, bh % NH
        for i in range(T):  # query row
            row_max = -np.inf
            for j in range(T):  # preatt[i, j] = q[i] . k[j] * scale + adder[j]
                s = 0.0
                for d in range(HS):
                    s += q[b, h, i, d] * k[b, h, j, d]
                s = s * scale + (1.0 - attn_mask[b, j]) * layers.MASK_VALUE
                att[b, h, i, j] = s
                row_max = max(row_max, s)
            total = 0.0
            for j in range(T):  # softmax, shifted by the row max for a stable exp
                e = math.exp(att[b, h, i, j] - row_max)
                att[b, h, i, j] = e
                total += e
            for j in range(T):
                att[b, h, i, j] /= total
            for d in range(HS):  # out[i] = sum_j att[i, j] * v[j]
                acc = 0.0
                for j in range(T):
                    acc += att[b, h, i, j] * v[b, h, j, d]
                out[b, h, i, d] = acc


def my_attention_forward(q, k, v, attn_mask):
    """Allocate the outputs, run the kernel: -> out (B, NH, T, HS), att (B, NH, T, T)."""
    B, NH, T, HS = q.shape
    att = np.empty((B, NH, T, T), dtype=q.dtype)  # (B, NH, T, T)
    out = np.empty((B, NH, T, HS), dtype=q.dtype)  # (B, NH, T, HS)
    my_attention_forward_kernel(q, k, v, attn_mask, att, out)
    return out, att


# %% [markdown]
# ## Check 1: the loop kernel equals the reference
# The first call compiles (or loads the cache); we time it separately. Float64, random inputs,
# sequences of different lengths. The results agree to round-off, not bit for bit: the loops
# sum in a different order than NumPy's matrix multiply.

# %%
q, k, v, attn_mask = make_inputs(2, 3, 17, 8)
t0 = time.perf_counter()
out_mine, att_mine = my_attention_forward(q, k, v, attn_mask)
print(f"first call (compile or load from cache): {time.perf_counter() - t0:.2f} s")
out_ref, cache_ref = layers.attention_forward(q, k, v, attn_mask)
print(f"out: max rel diff {max_rel(out_mine, out_ref):.1e}, "
      f"att: {max_rel(att_mine, cache_ref.att):.1e}")
assert max_rel(out_mine, out_ref) < 1e-10 and max_rel(att_mine, cache_ref.att) < 1e-10
padded = attn_mask[:, None, None, :] == 0  # (B, 1, 1, T) broadcast over heads and queries
assert np.all(att_mine[np.broadcast_to(padded, att_mine.shape)] == 0.0)  # exactly zero weight

# %% [markdown]
# ## Check 2: minibert's kernels, forward and backward
# `minibert.kernels.attention_forward` / `attention_backward` have **the same signatures and
# caches** as the NumPy versions, so the model can use either (`MINIBERT_BACKEND=numpy|numba`).
# They split the work the way the measurements said to: the matrix products go to BLAS (as in
# NumPy), and everything between them (scale, mask, softmax, dropout, and the softmax backward)
# is one fused Numba pass per row, with `prange` over `b * NH`. Small problems run on one thread
# (waking threads costs more than it saves). We compare every output and every gradient with
# the reference.

# %%
for shape in [(2, 3, 17, 8), (1, 1, 1, 4), (4, 2, 64, 16)]:
    q, k, v, attn_mask = make_inputs(*shape)
    dout = rng.standard_normal(q.shape)  # (B, NH, T, HS) random upstream gradient
    out_ref, cache_ref = layers.attention_forward(q, k, v, attn_mask)
    out_nb, cache_nb = kernels.attention_forward(q, k, v, attn_mask)
    grads_ref = layers.attention_backward(dout, cache_ref)  # dq, dk, dv
    grads_nb = kernels.attention_backward(dout, cache_nb)
    errors = [max_rel(out_nb, out_ref), max_rel(cache_nb.att, cache_ref.att)]
    errors += [max_rel(a, b) for a, b in zip(grads_nb, grads_ref)]
    print(f"B, NH, T, HS = {shape}: out, att, dq, dk, dv max rel diff "
          + ", ".join(f"{e:.0e}" for e in errors))
    assert all(e < 1e-10 for e in errors), (shape, errors)  # (T = 1: dq = dk = 0 exactly)

# %% [markdown]
# ## Timing
# A BERT-sized attention problem in float32 (training runs in float32): `T = 128`, `HS = 64`.
# Each function runs several times; we print the **median** (robust to a run that got
# interrupted by another program). The speed-up depends on the machine, the number of cores
# (`NUMBA_NUM_THREADS`) and what else is running, so it is printed, not asserted.

# %%
def median_seconds(fn, repeats):
    fn()  # warm up (compile, caches)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


shape = (4, 4, 128, 64) if FAST else (16, 4, 128, 64)
repeats = 3 if FAST else 7
q, k, v, attn_mask = (a.astype(np.float32) for a in make_inputs(*shape))
dout = rng.standard_normal(q.shape).astype(np.float32)  # (B, NH, T, HS)
_, cache_ref = layers.attention_forward(q, k, v, attn_mask)
_, cache_nb = kernels.attention_forward(q, k, v, attn_mask)
candidates = {
    "forward, NumPy reference": lambda: layers.attention_forward(q, k, v, attn_mask),
    "forward, lesson loop kernel": lambda: my_attention_forward(q, k, v, attn_mask),
    "forward, minibert.kernels": lambda: kernels.attention_forward(q, k, v, attn_mask),
    "backward, NumPy reference": lambda: layers.attention_backward(dout, cache_ref),
    "backward, minibert.kernels": lambda: kernels.attention_backward(dout, cache_nb),
}
timings = {name: median_seconds(fn, repeats) for name, fn in candidates.items()}
print(f"B, NH, T, HS = {shape}, float32, {numba.get_num_threads()} Numba threads, "
      f"median of {repeats}:")
for name, seconds in timings.items():
    print(f"  {name:28} {1000 * seconds:8.2f} ms")
for part in ("forward", "backward"):
    speedup = timings[f"{part}, NumPy reference"] / timings[f"{part}, minibert.kernels"]
    print(f"{part}: minibert.kernels is {speedup:.1f}x the speed of the NumPy reference here")
# float32 results agree with the reference to float32 round-off, scaled to the output size
out32_ref, _ = layers.attention_forward(q, k, v, attn_mask)
out32_nb, _ = kernels.attention_forward(q, k, v, attn_mask)
assert max_rel(out32_nb, out32_ref) < 1e-5

# %% [markdown]
# ## Discussion
# - Read the printed speed-up honestly. On this project's 2-core machine `make bench` measured
#   the library kernel at 27 ms against 34 ms for the NumPy reference at (32, 2, 128, 64),
#   forward + backward, and PyTorch at 21 ms. An all-Numba version (`kernels.attention_forward_v1`,
#   every matrix product as loops) took 32 ms: hand-written loops reach about half of BLAS's
#   speed, and the matrix products are most of the work. What Numba adds is the fused softmax
#   pass, where NumPy makes five passes and five temporaries. A kernel is only "fast" next to a
#   reference measured in the same run.
# - Why is the lesson's simple loop kernel slower still? Its inner loop over `d` walks
#   `k[b, h, j, :]` for every `(i, j)`, and the `out` loop walks `v` column by column (a stride
#   of `HS` elements): poor memory access. `attention_forward_v1` copies each head into
#   contiguous buffers and arranges loops as `c[n] += a * b[n]` over contiguous rows, which the
#   compiler turns into SIMD instructions without needing fastmath.
# - The cache keeps `att` (T x T per head) for backward; recomputing it from `q` and `k` (the
#   FlashAttention idea) saves memory but costs another `q k^T`; at `T = 128` reading it back
#   is cheaper.
# - The NumPy version stays in the repository as the reference: every kernel is tested against
#   it (`tests/test_kernels.py`), never against itself.

# %% [markdown]
# ## Try it yourself
# Each function ships with a working answer; replace the body with your own and re-run.
#
# 1. `my_row_softmax(x)`: a Numba kernel for a stable softmax over the last axis of a 2-D array,
#    `prange` over rows. It must match the reference to 1e-12.
# 2. `my_dv(att, dout)`: the backward line `dv = att^T @ dout` for one head, as loops in Numba
#    (`att` (T, T), `dout` (T, HS) -> (T, HS)). Compare with `kernels.attention_backward`'s dv.

# %%
@numba.njit(parallel=True, cache=True)
def my_row_softmax(x):
    out = np.empty_like(x)  # (N, T)
    for i in numba.prange(x.shape[0]):  # replace this body with your own
        m = x[i].max()
        e = np.exp(x[i] - m)  # (T,)
        out[i] = e / e.sum()
    return out


@numba.njit(cache=True)
def my_dv(att, dout):
    T, HS = dout.shape
    dv = np.zeros((T, HS))  # (T, HS)
    for i in range(T):  # replace this body: dv[j] += att[i, j] * dout[i]
        for j in range(T):
            for d in range(HS):
                dv[j, d] += att[i, j] * dout[i, d]
    return dv


# %%
x = rng.standard_normal((7, 11)) * 5  # (N, T)
ref = np.exp(x - x.max(-1, keepdims=True))
ref /= ref.sum(-1, keepdims=True)  # (N, T)
assert np.allclose(my_row_softmax(x), ref, rtol=1e-12, atol=1e-15)
q, k, v, attn_mask = make_inputs(2, 2, 9, 4)
dout = rng.standard_normal(q.shape)  # (B, NH, T, HS)
_, cache = kernels.attention_forward(q, k, v, attn_mask)
_, _, dv = kernels.attention_backward(dout, cache)
for b in range(2):
    for h in range(2):
        assert max_rel(my_dv(cache.att[b, h], dout[b, h]), dv[b, h]) < 1e-12, (b, h)

# %% [markdown]
# ## Recap
# - Numba compiles loops; `prange` parallelises over independent work, here the (batch, head)
#   pairs, each owning its own output slice.
# - No fastmath on checked math; `cache=True` to skip recompiling; `NUMBA_DISABLE_JIT=1` to
#   debug as plain Python.
# - A kernel is only trusted after it matches the NumPy reference (float64, tight tolerance);
#   speed is measured with medians and never asserted.
#
# **Next: lesson 07**, the post-LN encoder block: attention, a feed-forward network,
# residual connections and layer norms.

# %%
print("lesson 06 passed")
