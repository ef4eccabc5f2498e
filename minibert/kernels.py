"""Numba versions of the hot layers, with the same signatures and caches as `minibert.layers`.

`OPS` is the namespace the model gets from `minibert.backend.get_ops()` when
MINIBERT_BACKEND=numba (the default): every name of `minibert.layers` the model uses, where the
ones that pay are replaced by the compiled versions below and the rest are the NumPy reference.
`minibert/layers.py` stays the source of truth; tests/test_kernels.py checks every kernel here
against it (float64 to 1e-10 relative, float32 scaled to magnitude).

Versions of the attention core (numbers: `python -m minibert bench --only attention`):
    v0  the NumPy reference (batched matmul; q @ k^T on a non-contiguous view is NumPy's slow
        non-BLAS loop)
    v1  `prange` over b*NH; per head, K and V are copied to small contiguous buffers (K
        transposed) so every inner loop is a contiguous axpy `c[n] += a * b[n]`, which LLVM
        vectorizes without fastmath; 4 output rows per pass share each loaded row of the right
        operand. The probabilities are kept for backward (cache = layers.AttentionCache).
    (Recomputing the probabilities from a saved row max / sum, the flash-attention trick, was
    measured: at T = 128 the (T, T) matrix per head fits in L2, so recomputing q @ k^T costs
    more than reading `att` back; see the bench notes in the final report.)

Rules: no fastmath (everything here is gradient-checked), `cache=True` (the second run does not
compile again; the cache lives in __pycache__), parallel loops only over independent outputs
(each (b, h) owns its rows of att, out, dq, dk, dv). Sums that would be serial reductions are
split into 8 partial sums so they vectorize; this changes the summation order, not the math.

Threads: Numba uses NUMBA_NUM_THREADS (default: the number of cores). For debugging, run with
NUMBA_DISABLE_JIT=1: every kernel then runs as plain Python (slow) and can be stepped through.
"""
from __future__ import annotations

import math
import types

import numba
import numpy as np

from minibert import layers
from minibert.layers import MASK_VALUE, AttentionCache

# ---------------------------------------------------------------------------------------------
# small building blocks (compiled into the kernels that call them)


@numba.njit(cache=True)
def _mm_rows(A, Bm, C):
    """C = A @ Bm with Bm and the rows of C contiguous. A (M, K) may have any strides.

    The inner loop is `c[n] += a * b[n]` over a contiguous row (no reduction, so it vectorizes
    without fastmath); 4 rows of C share each loaded row of Bm.
    """
    M, K = A.shape
    N = Bm.shape[1]
    i = 0
    while i + 4 <= M:
        c0, c1, c2, c3 = C[i], C[i + 1], C[i + 2], C[i + 3]
        for n in range(N):
            c0[n] = 0.0
            c1[n] = 0.0
            c2[n] = 0.0
            c3[n] = 0.0
        for kk in range(K):
            a0, a1, a2, a3 = A[i, kk], A[i + 1, kk], A[i + 2, kk], A[i + 3, kk]
            b = Bm[kk]
            for n in range(N):
                bn = b[n]
                c0[n] += a0 * bn
                c1[n] += a1 * bn
                c2[n] += a2 * bn
                c3[n] += a3 * bn
        i += 4
    while i < M:
        c0 = C[i]
        for n in range(N):
            c0[n] = 0.0
        for kk in range(K):
            a0 = A[i, kk]
            b = Bm[kk]
            for n in range(N):
                c0[n] += a0 * b[n]
        i += 1


@numba.njit(cache=True)
def _row_sum(x):
    """sum(x) over a contiguous row, as 8 partial sums (vectorizable; summation order differs)."""
    n = x.shape[0]
    acc = np.zeros(8, dtype=x.dtype)
    j = 0
    while j + 8 <= n:
        for u in range(8):
            acc[u] += x[j + u]
        j += 8
    s = acc[0] + acc[1] + acc[2] + acc[3] + acc[4] + acc[5] + acc[6] + acc[7]
    while j < n:
        s += x[j]
        j += 1
    return s


@numba.njit(cache=True)
def _row_max(x):
    """max(x) over a contiguous row, as 8 partial maxima."""
    n = x.shape[0]
    acc = np.full(8, x[0])
    j = 0
    while j + 8 <= n:
        for u in range(8):
            acc[u] = max(acc[u], x[j + u])
        j += 8
    m = acc.max()
    while j < n:
        m = max(m, x[j])
        j += 1
    return m


@numba.njit(cache=True)
def _row_dot(x, y):
    """sum(x * y) over contiguous rows, as 8 partial sums."""
    n = x.shape[0]
    acc = np.zeros(8, dtype=x.dtype)
    j = 0
    while j + 8 <= n:
        for u in range(8):
            acc[u] += x[j + u] * y[j + u]
        j += 8
    s = acc[0] + acc[1] + acc[2] + acc[3] + acc[4] + acc[5] + acc[6] + acc[7]
    while j < n:
        s += x[j] * y[j]
        j += 1
    return s


@numba.njit(cache=True)
def _copy_head(src, dst):
    """dst (T, HS) contiguous <- src (T, HS) with any strides."""
    T, HS = src.shape
    for t in range(T):
        for d in range(HS):
            dst[t, d] = src[t, d]


@numba.njit(cache=True)
def _copy_head_t(src, dst):
    """dst (HS, T) contiguous <- src (T, HS)^T."""
    T, HS = src.shape
    for t in range(T):
        for d in range(HS):
            dst[d, t] = src[t, d]


# ---------------------------------------------------------------------------------------------
# attention: preatt = q @ k^T * scale + adder ; att = softmax(preatt) ; out = (att * drop) @ v


@numba.njit(parallel=True, cache=True)
def _attention_forward_kernel(q, k, v, adder, drop, use_drop, scale, att, out):
    """q, k, v (B, NH, T, HS); adder (B, T) additive key mask; drop (B, NH, T, T) mask or a dummy;
    scale: scalar of q's dtype. Writes att (B, NH, T, T) contiguous and out (B, NH, T, HS)."""
    B, NH, T, HS = q.shape
    for bh in numba.prange(B * NH):
        b, h = bh // NH, bh % NH
        kt = np.empty((HS, T), dtype=q.dtype)  # (HS, T) k^T, contiguous
        _copy_head_t(k[b, h], kt)
        vh = np.empty((T, HS), dtype=q.dtype)  # (T, HS)
        _copy_head(v[b, h], vh)
        qh = np.empty((T, HS), dtype=q.dtype)  # (T, HS)
        _copy_head(q[b, h], qh)
        a = att[b, h]  # (T, T) view
        _mm_rows(qh, kt, a)  # (T, HS) @ (HS, T) -> (T, T) raw scores
        ad_row = np.empty(T, dtype=q.dtype)  # (T,) one row of att * drop
        o = np.empty((T, HS), dtype=q.dtype)  # (T, HS)
        for i in range(T):
            row = a[i]
            for j in range(T):
                row[j] = row[j] * scale + adder[b, j]
            m = _row_max(row)
            for j in range(T):
                row[j] = math.exp(row[j] - m)
            s = _row_sum(row)
            for j in range(T):
                row[j] /= s
        if use_drop:
            ad = np.empty((T, T), dtype=q.dtype)  # (T, T) att * drop
            for i in range(T):
                for j in range(T):
                    ad[i, j] = a[i, j] * drop[b, h, i, j]
            _mm_rows(ad, vh, o)  # (T, T) @ (T, HS) -> (T, HS)
        else:
            _mm_rows(a, vh, o)  # (T, T) @ (T, HS) -> (T, HS)
        oh = out[b, h]
        for i in range(T):
            for d in range(HS):
                oh[i, d] = o[i, d]


@numba.njit(parallel=True, cache=True)
def _attention_backward_kernel(dout, q, k, v, att, drop, use_drop, scale, dq, dk, dv):
    """Mirror of the forward kernel. Each (b, h) owns its rows of dq, dk, dv (B, NH, T, HS)."""
    B, NH, T, HS = q.shape
    for bh in numba.prange(B * NH):
        b, h = bh // NH, bh % NH
        qh = np.empty((T, HS), dtype=q.dtype)  # (T, HS)
        _copy_head(q[b, h], qh)
        kh = np.empty((T, HS), dtype=q.dtype)  # (T, HS)
        _copy_head(k[b, h], kh)
        vt = np.empty((HS, T), dtype=q.dtype)  # (HS, T) v^T
        _copy_head_t(v[b, h], vt)
        doh = np.empty((T, HS), dtype=q.dtype)  # (T, HS)
        _copy_head(dout[b, h], doh)
        a = att[b, h]  # (T, T)
        if use_drop:
            ad = np.empty((T, T), dtype=q.dtype)  # (T, T) att * drop: what multiplied v
            for i in range(T):
                for j in range(T):
                    ad[i, j] = a[i, j] * drop[b, h, i, j]
        else:
            ad = a
        tmp = np.empty((T, HS), dtype=q.dtype)  # (T, HS)
        # forward was: out = ad @ v  ->  dv = ad^T @ dout
        _mm_rows(ad.T, doh, tmp)  # (T, T) @ (T, HS) -> (T, HS)
        dv[b, h] = tmp
        # datt = dout @ v^T
        datt = np.empty((T, T), dtype=q.dtype)  # (T, T)
        _mm_rows(doh, vt, datt)  # (T, HS) @ (HS, T) -> (T, T)
        # forward was: att = softmax(preatt); dpreatt = att * (datt - sum(datt * att)) * scale
        for i in range(T):
            drow = datt[i]
            arow = a[i]
            if use_drop:
                for j in range(T):
                    drow[j] *= drop[b, h, i, j]
            s = _row_dot(drow, arow)
            for j in range(T):
                drow[j] = arow[j] * (drow[j] - s) * scale
        # forward was: preatt = q @ k^T * scale + adder
        _mm_rows(datt, kh, tmp)  # (T, T) @ (T, HS) -> (T, HS)
        dq[b, h] = tmp
        _mm_rows(datt.T, qh, tmp)  # (T, T) @ (T, HS) -> (T, HS)
        dk[b, h] = tmp


# The same kernels compiled without threads: small problems (gradient checks, T=1 tests) would
# spend more time waking the thread pool than computing.
_attention_forward_serial = numba.njit(cache=True)(_attention_forward_kernel.py_func)
_attention_backward_serial = numba.njit(cache=True)(_attention_backward_kernel.py_func)
PARALLEL_MIN_WORK = 1 << 18  # B * NH * T * T * HS below this runs on one thread


def _pick(parallel_kernel, serial_kernel, shape):
    B, NH, T, HS = shape
    return parallel_kernel if B * NH * T * T * HS >= PARALLEL_MIN_WORK and B * NH > 1 else serial_kernel


def attention_forward(q, k, v, attn_mask, dropout_p=0.0, rng=None):
    """Same contract as layers.attention_forward (and the same dropout mask for the same rng).

    `out` is returned as a (B, NH, T, HS) view of a (B, T, NH, HS) array, so that
    merge_heads is a free reshape.
    """
    B, NH, T, HS = q.shape
    if k.shape != q.shape or v.shape != q.shape:
        raise ValueError(f"q, k, v shapes differ: {q.shape}, {k.shape}, {v.shape}")
    if attn_mask.shape != (B, T):
        raise ValueError(f"attn_mask has shape {attn_mask.shape}, expected {(B, T)}")
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout probability {dropout_p} must be in [0, 1)")
    dt = q.dtype
    k, v = k.astype(dt, copy=False), v.astype(dt, copy=False)
    scale = 1.0 / math.sqrt(HS)
    adder = np.ascontiguousarray((1.0 - attn_mask) * MASK_VALUE, dtype=dt)  # (B, T)
    drop = None
    if dropout_p > 0.0:
        # exactly layers.dropout_forward's draw, so the same rng gives the same mask
        keep = rng.random((B, NH, T, T), dtype=np.float32) >= dropout_p  # (B, NH, T, T) bool
        drop = keep.astype(dt) * dt.type(1.0 / (1.0 - dropout_p))  # (B, NH, T, T)
    att = np.empty((B, NH, T, T), dtype=dt)  # (B, NH, T, T)
    out = np.empty((B, T, NH, HS), dtype=dt).transpose(0, 2, 1, 3)  # (B, T, NH, HS) -> (B, NH, T, HS)
    dummy = np.empty((1, 1, 1, 1), dtype=dt)
    kernel = _pick(_attention_forward_kernel, _attention_forward_serial, q.shape)
    kernel(q, k, v, adder, dummy if drop is None else drop, drop is not None,
                              dt.type(scale), att, out)
    return out, AttentionCache(q, k, v, att, drop, scale)


def attention_backward(dout, cache: AttentionCache):
    """Same contract as layers.attention_backward: -> dq, dk, dv, each (B, NH, T, HS)."""
    q, k, v, att, drop, scale = cache
    dt = q.dtype
    B, NH, T, HS = q.shape
    dout = dout.astype(dt, copy=False)
    dq, dk, dv = (np.empty((B, NH, T, HS), dtype=dt) for _ in range(3))  # 3 x (B, NH, T, HS)
    dummy = np.empty((1, 1, 1, 1), dtype=dt)
    kernel = _pick(_attention_backward_kernel, _attention_backward_serial, q.shape)
    kernel(dout, q, k, v, att, dummy if drop is None else drop, drop is not None,
                               dt.type(scale), dq, dk, dv)
    return dq, dk, dv


# ---------------------------------------------------------------------------------------------
# the namespace the model uses: the reference everywhere, compiled versions where they pay

_REFERENCE_NAMES = [n for n in dir(layers) if n.endswith(("_forward", "_backward"))] + [
    "split_heads", "merge_heads", "MASK_VALUE"]
OPS = types.SimpleNamespace(**{n: getattr(layers, n) for n in _REFERENCE_NAMES})
OPS.attention_forward = attention_forward
OPS.attention_backward = attention_backward
OPS.name = "numba"
