"""Attention v1: the all-Numba attention core, every matrix product a hand-written loop.

A development version, kept as the readable all-Numba attention (lesson 06 points at it) and as a
contender in `python -m minibert bench --only attention`: its hand-written matmul runs at about
half of OpenBLAS's speed, and matmuls are most of attention's work, so the model runs
minibert/kernels/attention.py's v4 instead
(docs/speed.md tells the v1 -> v4 story with the numbers). `prange` over b*NH; per head, K and V
are copied to small contiguous buffers (K transposed) so every inner loop is a contiguous axpy
`c[n] += a * b[n]`, which LLVM vectorizes without fastmath; 4 output rows per pass share each
loaded row of the right operand. Same contract as layers.attention_forward / _backward.
"""
from __future__ import annotations

import numba
import numpy as np

from minibert.kernels import (attention_dropout_mask, attention_inputs, kernel_jit, masked_softmax_row, pick_kernel, serial_version,
                              softmax_backward_head, times_drop, mask_array)
from minibert.layers import MASK_VALUE, AttentionCache


@kernel_jit
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


@kernel_jit
def _copy_head(src, dst):
    """dst (T, HS) contiguous <- src (T, HS) with any strides."""
    T, HS = src.shape
    for t in range(T):
        for d in range(HS):
            dst[t, d] = src[t, d]


@kernel_jit
def _copy_head_t(src, dst):
    """dst (HS, T) contiguous <- src (T, HS)^T."""
    T, HS = src.shape
    for t in range(T):
        for d in range(HS):
            dst[d, t] = src[t, d]


# ---------------------------------------------------------------------------------------------
# attention: preatt = q @ k^T * scale + adder ; att = softmax(preatt) ; out = (att * drop) @ v


@kernel_jit(parallel=True)
def _attention_forward_kernel(q, k, v, adder, drop, use_drop, scale, att, out, causal, masked):
    """q, k, v (B, NH, T, HS); adder (B, T) additive key mask; drop (B, NH, T, T) mask or a dummy;
    scale: scalar of q's dtype; causal: also mask the keys after each query with `masked`
    (MASK_VALUE in q's dtype). Writes att (B, NH, T, T) contiguous and out (B, NH, T, HS)."""
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
        o = np.empty((T, HS), dtype=q.dtype)  # (T, HS)
        for i in range(T):
            masked_softmax_row(a[i], adder[b], scale, i if causal else T - 1, masked)
        if use_drop:
            _mm_rows(times_drop(a, drop, b, h), vh, o)  # (T, T) @ (T, HS) -> (T, HS)
        else:
            _mm_rows(a, vh, o)  # (T, T) @ (T, HS) -> (T, HS)
        oh = out[b, h]
        for i in range(T):
            for d in range(HS):
                oh[i, d] = o[i, d]


@kernel_jit(parallel=True)
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
        ad = times_drop(a, drop, b, h) if use_drop else a  # (T, T) att * drop: what multiplied v
        tmp = np.empty((T, HS), dtype=q.dtype)  # (T, HS)
        # forward was: out = ad @ v  ->  dv = ad^T @ dout
        _mm_rows(ad.T, doh, tmp)  # (T, T) @ (T, HS) -> (T, HS)
        dv[b, h] = tmp
        # datt = dout @ v^T
        datt = np.empty((T, T), dtype=q.dtype)  # (T, T)
        _mm_rows(doh, vt, datt)  # (T, HS) @ (HS, T) -> (T, T)
        # forward was: att = softmax(preatt); dpreatt = att * (datt - sum(datt * att)) * scale
        softmax_backward_head(datt, a, drop, b, h, use_drop, scale)
        # forward was: preatt = q @ k^T * scale + adder
        _mm_rows(datt, kh, tmp)  # (T, T) @ (T, HS) -> (T, HS)
        dq[b, h] = tmp
        _mm_rows(datt.T, qh, tmp)  # (T, T) @ (T, HS) -> (T, HS)
        dk[b, h] = tmp


# The same kernels compiled without threads: small problems (gradient checks, T=1 tests) would
# spend more time waking the thread pool than computing.
_attention_forward_serial = serial_version(_attention_forward_kernel)


_attention_backward_serial = serial_version(_attention_backward_kernel)


def attention_forward_v1(q, k, v, attn_mask, dropout_p=0.0, rng=None, causal=False):
    """v1 (all loops in Numba). Same contract as layers.attention_forward (and the same dropout
    mask for the same rng), causal mask included.

    `out` is returned as a (B, NH, T, HS) view of a (B, T, NH, HS) array, so that
    merge_heads is a free reshape.
    """
    B, NH, T, HS = q.shape
    dt = q.dtype
    k, v, scale, adder = attention_inputs(q, k, v, attn_mask, dropout_p)
    drop = attention_dropout_mask(rng, (B, NH, T, T), dropout_p, dt)  # (B, NH, T, T) or None
    att = np.empty((B, NH, T, T), dtype=dt)  # (B, NH, T, T)
    out = np.empty((B, T, NH, HS), dtype=dt).transpose(0, 2, 1, 3)  # (B, T, NH, HS) -> (B, NH, T, HS)
    dummy = np.empty((1, 1, 1, 1), dtype=dt)
    kernel = pick_kernel(_attention_forward_kernel, _attention_forward_serial, q.shape)
    kernel(q, k, v, adder, dummy if drop is None else drop, drop is not None,
                              dt.type(scale), att, out, bool(causal), dt.type(MASK_VALUE))
    return out, AttentionCache(q, k, v, att, drop, scale)


def attention_backward_v1(dout, cache: AttentionCache):
    """v1 (all loops in Numba). Same contract as layers.attention_backward (which needs no
    causal flag: the future keys' att is exactly 0, as the padded keys')."""
    q, k, v, att, drop, scale = cache
    dt = q.dtype
    B, NH, T, HS = q.shape
    drop = mask_array(drop, att.shape, dt)  # (B, NH, T, T) or None
    dout = dout.astype(dt, copy=False)
    dq, dk, dv = (np.empty((B, NH, T, HS), dtype=dt) for _ in range(3))  # 3 x (B, NH, T, HS)
    dummy = np.empty((1, 1, 1, 1), dtype=dt)
    kernel = pick_kernel(_attention_backward_kernel, _attention_backward_serial, q.shape)
    kernel(dout, q, k, v, att, dummy if drop is None else drop, drop is not None,
                               dt.type(scale), dq, dk, dv)
    return dq, dk, dv
