"""The attention core in Numba (docs/speed.md tells the story of the versions v1-v4, with the
measurements; the development versions the model does not run, v1 and v3, are in minibert/dev/):
    `attention_forward` / `attention_backward` (v4, the default): one Numba pass per (b, h) head
        that calls OpenBLAS's cblas_?gemm itself (its address is a kernel argument, `_gemm_call`),
        with OpenBLAS at one thread while the kernel runs (`blas.single_threaded`): q @ k^T, the
        softmax while the head's (T, T) block is in the core's cache, att @ v.
        `attention_packed_forward` is v4 on the unpadded encoder's (N, 3C) rows: each sequence's
        block of rows as it is, L x L scores, no grid.
    `attention_forward_fallback` / `attention_backward_fallback` (v2), what attention_forward runs
        without OpenBLAS (NumPy built on MKL or Apple's Accelerate) or with MINIBERT_BLAS_BATCH=0:
        the matmuls through np.matmul over the b*NH stack, everything between them (scale, mask,
        softmax, dropout; the softmax backward) one fused Numba pass, `prange` over b*NH, with the
        vectorizing `_exp` of vector_math.
    Every version takes `causal=True` (the "ltr" objective's mask) as one more argument of the
    fused softmax pass. The probabilities are kept, not recomputed flash-style: at T = 128 a
    head's (T, T) block fits in L2, and recomputing q @ k^T would add a third matmul.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np
from llvmlite import ir
from numba.extending import intrinsic

from minibert import layers
from minibert.kernels.dropout import _NO_DROP, DropoutKey, _dropout_args, _draw_dropout, _drop_mask_into
from minibert.kernels.runtime import kernel_jit, serial_version
from minibert.kernels.vector_math import _row_dot, masked_softmax_row
from minibert.layers import MASK_VALUE, AttentionCache
from minibert.native import blas


@kernel_jit
def times_drop(a, drop, b, h):
    """One head's att * drop: a (T, T), drop (B, NH, T, T) -> a new (T, T) array."""
    T = a.shape[0]
    ad = np.empty((T, T), dtype=a.dtype)  # (T, T)
    for i in range(T):
        for j in range(T):
            ad[i, j] = a[i, j] * drop[b, h, i, j]
    return ad


@kernel_jit
def softmax_backward_head(datt, a, drop, b, h, use_drop, scale):
    """In place on one head's datt (T, T), the gradient of att * drop:
    datt <- a * (datt*drop - sum(datt*drop * a)) * scale, row by row (a = att (T, T); drop
    (B, NH, T, T) read at [b, h] only when use_drop). The gradient of the scaled scores."""
    T = a.shape[0]
    for i in range(T):
        drow = datt[i]
        arow = a[i]
        if use_drop:
            for j in range(T):
                drow[j] *= drop[b, h, i, j]
        s = _row_dot(drow, arow)
        for j in range(T):
            drow[j] = arow[j] * (drow[j] - s) * scale

PARALLEL_MIN_WORK = 1 << 18  # B * NH * T * T * HS below this runs on one thread


def pick_kernel(parallel_kernel, serial_kernel, shape):
    B, NH, T, HS = shape
    return parallel_kernel if B * NH * T * T * HS >= PARALLEL_MIN_WORK and B * NH > 1 else serial_kernel


def attention_inputs(q, k, v, attn_mask, dropout_p):
    """The argument checks of layers.attention_forward, and what both versions below need:
    -> (k, v in q's dtype, scale 1/sqrt(HS), adder (B, T) = (1 - mask) * MASK_VALUE)."""
    B, NH, T, HS = q.shape
    if k.shape != q.shape or v.shape != q.shape:
        raise ValueError(f"q, k, v shapes differ: {q.shape}, {k.shape}, {v.shape}")
    if attn_mask.shape != (B, T):
        raise ValueError(f"attn_mask has shape {attn_mask.shape}, expected {(B, T)}")
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout probability {dropout_p} must be in [0, 1)")
    dt = q.dtype
    adder = np.ascontiguousarray((1.0 - attn_mask) * MASK_VALUE, dtype=dt)  # (B, T)
    return k.astype(dt, copy=False), v.astype(dt, copy=False), 1.0 / math.sqrt(HS), adder


def attention_dropout_mask(rng, shape, dropout_p, dt):
    """The attention dropout mask (keep / (1 - p), in dtype dt) of `shape`, or None for p = 0:
    exactly layers.dropout_forward's mask, so the same rng gives the same mask (the fallback and
    minibert/dev's versions keep it as an array; v4 keeps the key and computes the mask inside
    its kernels)."""
    drop = _draw_dropout(rng, dropout_p)
    return None if drop is None else drop.mask(shape, dt)


def mask_array(drop, shape, dtype):
    """An attention cache's `drop` as an array: None, the array itself (the reference, the
    fallback, minibert/dev's versions) or a DropoutKey's mask (v4)."""
    return drop.mask(shape, dtype) if isinstance(drop, DropoutKey) else drop


@kernel_jit(parallel=True)
def _softmax_rows_kernel(a, adder, drop, use_drop, scale, att_d, causal, masked):
    """In place on a (B, NH, T, T): a <- softmax(a * scale + adder[b]); att_d <- a * drop.
    causal: row i also gets `masked` (MASK_VALUE) at the keys j > i."""
    B, NH, T, _ = a.shape
    for bh in numba.prange(B * NH):
        b, h = bh // NH, bh % NH
        for i in range(T):
            row = a[b, h, i]
            masked_softmax_row(row, adder[b], scale, i if causal else T - 1, masked)
            if use_drop:
                drow = att_d[b, h, i]
                for j in range(T):
                    drow[j] = row[j] * drop[b, h, i, j]


@kernel_jit(parallel=True)
def _softmax_rows_backward_kernel(datt, att, drop, use_drop, scale):
    """In place on datt (B, NH, T, T): datt <- att * (datt*drop - sum(datt*drop * att)) * scale."""
    B, NH, T, _ = att.shape
    for bh in numba.prange(B * NH):
        b, h = bh // NH, bh % NH
        softmax_backward_head(datt[b, h], att[b, h], drop, b, h, use_drop, scale)


_softmax_rows_serial = serial_version(_softmax_rows_kernel)
_softmax_rows_backward_serial = serial_version(_softmax_rows_backward_kernel)


def attention_forward_fallback(q, k, v, attn_mask, dropout_p=0.0, rng=None, causal=False, matmul=np.matmul):
    """Attention where v4 cannot call OpenBLAS (see attention_forward): the two matmuls by
    `matmul` over the b*NH stack, scale, mask, softmax and dropout between them one fused Numba
    pass (v2 of docs/speed.md; minibert/dev/attention_v3.py passes OpenBLAS's batched gemm as
    `matmul`). Same contract as layers.attention_forward, and the same dropout mask for the
    same rng.

    `out` is a (B, NH, T, HS) view of a (B, T, NH, HS) array, so merge_heads is a free reshape.
    """
    B, NH, T, HS = q.shape
    dt = q.dtype
    k, v, scale, adder = attention_inputs(q, k, v, attn_mask, dropout_p)
    att = np.empty((B, NH, T, T), dtype=dt)  # (B, NH, T, T)
    matmul(q, k.swapaxes(-1, -2), out=att)  # (B, NH, T, HS) @ (B, NH, HS, T) -> (B, NH, T, T) raw scores
    drop = attention_dropout_mask(rng, (B, NH, T, T), dropout_p, dt)  # (B, NH, T, T) or None
    att_d = att if drop is None else np.empty_like(att)  # (B, NH, T, T)
    dummy = np.empty((1, 1, 1, 1), dtype=dt)
    softmax = pick_kernel(_softmax_rows_kernel, _softmax_rows_serial, q.shape)
    softmax(att, adder, dummy if drop is None else drop, drop is not None, dt.type(scale), att_d,
            bool(causal), dt.type(MASK_VALUE))
    out = np.empty((B, T, NH, HS), dtype=dt).transpose(0, 2, 1, 3)  # (B, T, NH, HS) -> (B, NH, T, HS)
    matmul(att_d, v, out=out)  # (B, NH, T, T) @ (B, NH, T, HS) -> (B, NH, T, HS)
    return out, AttentionCache(q, k, v, att, drop, scale)


def merge_qkv(dq, dk, dv):
    """Same contract as layers.merge_qkv; when dq, dk, dv are the views of one (B, T, 3, NH, HS)
    array that the attention backward passes return (_qkv_gradient_views), that array is already
    the (B, T, 3C) result: it is returned reshaped, no copy."""
    base = dq.base
    B, NH, T, HS = dq.shape
    isz = dq.itemsize
    if (isinstance(base, np.ndarray) and base.shape == (B, T, 3, NH, HS) and base.flags.c_contiguous
            and dk.base is base and dv.base is base and dq.dtype == base.dtype
            and [x.ctypes.data - base.ctypes.data for x in (dq, dk, dv)] == [0, NH * HS * isz, 2 * NH * HS * isz]
            and dq.strides == dk.strides == dv.strides == base[:, :, 0].transpose(0, 2, 1, 3).strides):
        return base.reshape(B, T, 3 * NH * HS)
    return layers.merge_qkv(dq, dk, dv)


def _qkv_gradient_views(B, NH, T, HS, dt):
    """dq, dk, dv (B, NH, T, HS) as views of one new (B, T, 3, NH, HS) array, side by side: the
    (B, T, 3C) layout of the qkv projection whose gradient they are, so the caller's merge is a
    copy of contiguous rows."""
    dqkv = np.empty((B, T, 3, NH, HS), dtype=dt)  # (B, T, 3, NH, HS)
    return tuple(dqkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))  # 3 x (B, NH, T, HS) views


def attention_backward_fallback(dout, cache: AttentionCache, matmul=np.matmul):
    """Mirror of attention_forward_fallback. Same contract as layers.attention_backward: -> dq,
    dk, dv, each (B, NH, T, HS), views of one (B, T, 3, NH, HS) array. The causal mask needs
    nothing here: the future keys' att is exactly 0, as the padded keys'."""
    q, k, v, att, drop, scale = cache
    B, NH, T, HS = q.shape
    dt = q.dtype
    drop = mask_array(drop, att.shape, dt)  # (B, NH, T, T) or None
    dout = dout.astype(dt, copy=False)
    att_d = att if drop is None else att * drop  # (B, NH, T, T) what multiplied v
    dq, dk, dv = _qkv_gradient_views(B, NH, T, HS, dt)  # 3 x (B, NH, T, HS)
    # forward was: out = att_d @ v
    matmul(att_d.swapaxes(-1, -2), dout, out=dv)  # (B, NH, T, T) @ (B, NH, T, HS) -> (B, NH, T, HS)
    datt = np.empty((B, NH, T, T), dtype=dt)  # (B, NH, T, T)
    matmul(dout, v.swapaxes(-1, -2), out=datt)  # (B, NH, T, HS) @ (B, NH, HS, T) -> (B, NH, T, T)
    # forward was: att = softmax(q @ k^T * scale + adder), then att_d = att * drop
    dummy = np.empty((1, 1, 1, 1), dtype=dt)
    softmax_backward = pick_kernel(_softmax_rows_backward_kernel, _softmax_rows_backward_serial, q.shape)
    softmax_backward(datt, att, dummy if drop is None else drop, drop is not None, dt.type(scale))
    matmul(datt, k, out=dq)  # (B, NH, T, T) @ (B, NH, T, HS) -> (B, NH, T, HS)
    matmul(datt.swapaxes(-1, -2), q, out=dk)  # (B, NH, T, T) @ (B, NH, T, HS) -> (B, NH, T, HS)
    return dq, dk, dv


# ---------------------------------------------------------------------------------------------
# attention v4 (the default): one pass per (b, h) head, in Numba's threads, that calls OpenBLAS's
# plain gemm itself (OpenBLAS at one thread, so each call runs on the Numba thread that makes
# it): q @ k^T into the head's (T, T) block, the softmax on that block while it is still in the
# core's cache, then att @ v. The backward likewise: four gemms and the softmax backward per
# head. v3 (minibert/dev/attention_v3.py) made the same products in batched calls, but wrote the
# (B, NH, T, T) scores to memory, read them back for the softmax, wrote them again and read them
# for att @ v.

_NO_TRANS, _TRANS, _ROW_MAJOR = blas.NO_TRANS, blas.TRANS, blas.ROW_MAJOR


@intrinsic
def _gemm_call(typingctx, address, like, order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    """cblas_?gemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) through its
    `address` (an integer, so kernels that use it stay cacheable: the address is an argument,
    not a constant of the compiled code). The enums go as C ints, m..ldc as OpenBLAS's integer
    (the type of `like`: int64 or int32 by build), a, b, c are addresses, alpha and beta
    float32 for sgemm, float64 for dgemm."""
    sig = numba.types.void(address, like, order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
    enums, ints, pointers = (2, 3, 4), (5, 6, 7, 10, 12, 15), (9, 11, 14)  # positions in the signature

    def codegen(context, builder, signature, args):
        tys = signature.args
        voidp = ir.IntType(8).as_pointer()
        vals, lltypes = [], []
        for i in range(2, len(args)):
            if i in enums:
                vals.append(context.cast(builder, args[i], tys[i], numba.types.int32))
                lltypes.append(ir.IntType(32))
            elif i in ints:
                vals.append(context.cast(builder, args[i], tys[i], tys[1]))
                lltypes.append(context.get_value_type(tys[1]))
            elif i in pointers:
                vals.append(builder.inttoptr(args[i], voidp))
                lltypes.append(voidp)
            else:  # alpha, beta: the gemm's float type
                vals.append(args[i])
                lltypes.append(context.get_value_type(tys[i]))
        fnty = ir.FunctionType(ir.VoidType(), lltypes)
        builder.call(builder.inttoptr(args[0], fnty.as_pointer()), vals)
        return context.get_dummy_value()

    return sig, codegen


_GEMM_SMALL = blas.SMALL_LIMIT  # m * n * k up to this: OpenBLAS's small-matrix kernels (no packing)


@kernel_jit(inline="always")
def _gemm(gemm, like, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, one):
    """c (m, n) = op(a) @ op(b), row-major; op(x) = x, or x^T when its flag is _TRANS. a, b, c
    are the arrays (views) whose first element starts each matrix, with row strides lda, ldb,
    ldc in elements. Inlined, it only takes the addresses: `_gemm_at` makes the product, one
    compiled function for every kernel that calls it."""
    _gemm_at(gemm, like, ta, tb, m, n, k, a.ctypes.data, lda, b.ctypes.data, ldb, c.ctypes.data, ldc, c.itemsize,
             one)


@kernel_jit(nogil=True)
def _gemm_at(gemm, like, ta, tb, m, n, k, a_at, lda, b_at, ldb, c_at, ldc, isz, one):
    """`_gemm` on addresses (isz: the bytes of an element).

    A product above OpenBLAS's small-matrix size (m * n * k > 100**3, e.g. a head's 128 x 128 x 64)
    is made as row blocks of op(a) and c that are each within it: OpenBLAS then runs its
    small-matrix kernels, which skip packing the operands into its buffers (10-20% faster per
    call at these sizes on one core, measured) and take no lock on its buffer pool, which every
    thread calling gemm at once would otherwise share. Each output element is the same sum over k."""
    pieces = max(1, (m * n * k + _GEMM_SMALL - 1) // _GEMM_SMALL)
    step = (m + pieces - 1) // pieces
    for i0 in range(0, m, step):
        rows = min(step, m - i0)
        a_i0 = a_at + (i0 * lda if ta == _NO_TRANS else i0) * isz  # row i0 of op(a)
        _gemm_call(gemm, like, _ROW_MAJOR, ta, tb, rows, n, k, one, a_i0, lda, b_at, ldb,
                   one - one, c_at + i0 * ldc * isz, ldc)


@kernel_jit
def _head_drop_mask(use_drop, bh, T, k0, k1, threshold, keep_scale, dtype_like):
    """Head bh's dropout mask (1, 1, T, T): its T*T elements of the (B, NH, T, T) mask, from
    their Philox words (element bh*T*T + i*T + j), or a (1, 1, 1, 1) dummy when not use_drop."""
    m = np.empty(T * T if use_drop else 1, dtype=dtype_like.dtype)
    if use_drop:
        _drop_mask_into(m, bh * T * T, k0, k1, threshold, keep_scale)
        return m.reshape((1, 1, T, T))
    return m.reshape((1, 1, 1, 1))


@kernel_jit(nogil=True)
def _attention_forward_gemm_head(bh, gemm, like, q, k, v, ld, adder, use_drop, k0, k1, threshold, keep_scale, scale,
                                 att, out, causal, masked, one):
    """Head bh (= b * NH + h) of `_attention_forward_gemm_kernel`."""
    B, NH, T, HS = q.shape
    b, h = bh // NH, bh % NH
    a = att[b, h]  # (T, T) this head's block, contiguous
    # raw scores: (T, HS) @ (HS, T) -> (T, T)
    _gemm(gemm, like, _NO_TRANS, _TRANS, T, T, HS, q[b, h], ld[0], k[b, h], ld[1], a, T, one)
    for i in range(T):
        masked_softmax_row(a[i], adder[b], scale, i if causal else T - 1, masked)
    m = _head_drop_mask(use_drop, bh, T, k0, k1, threshold, keep_scale, a)  # (1, 1, T, T)
    src = times_drop(a, m, 0, 0) if use_drop else a  # (T, T) att * drop: what multiplies v
    # (T, T) @ (T, HS) -> (T, HS)
    _gemm(gemm, like, _NO_TRANS, _NO_TRANS, T, HS, T, src, T, v[b, h], ld[2], out[b, h], ld[3], one)


@kernel_jit(parallel=True)
def _attention_forward_gemm_kernel(gemm, like, q, k, v, ld, adder, use_drop, k0, k1, threshold, keep_scale, scale,
                                   att, out, causal, masked, one):
    """q, k, v (B, NH, T, HS) with unit-stride rows whose row strides are ld[0..2] elements, out
    likewise (ld[3]); adder (B, T); dropout (use_drop) with Philox key (k0, k1), threshold and
    keep scale (DropoutKey); att (B, NH, T, T) contiguous.
    Writes att (the probabilities, before dropout) and out, one head per call of
    `_attention_forward_gemm_head` (runtime.py, "Compile time")."""
    B, NH, T, HS = q.shape
    for bh in numba.prange(B * NH):
        _attention_forward_gemm_head(np.int64(bh), gemm, like, q, k, v, ld, adder, use_drop, k0, k1, threshold,
                                     keep_scale, scale, att, out, causal, masked, one)


@kernel_jit(nogil=True)
def _attention_backward_gemm_head(bh, gemm, like, dout, q, k, v, ld, att, use_drop, k0, k1, threshold, keep_scale,
                                  scale, dq, dk, dv, one):
    """Head bh of `_attention_backward_gemm_kernel`."""
    B, NH, T, HS = q.shape
    b, h = bh // NH, bh % NH
    a = att[b, h]  # (T, T)
    m = _head_drop_mask(use_drop, bh, T, k0, k1, threshold, keep_scale, a)  # (1, 1, T, T)
    ad = times_drop(a, m, 0, 0) if use_drop else a  # (T, T) att * drop: what multiplied v
    # forward was: out = ad @ v  ->  dv = ad^T @ dout, (T, T)^T @ (T, HS) -> (T, HS)
    _gemm(gemm, like, _TRANS, _NO_TRANS, T, HS, T, ad, T, dout[b, h], ld[0], dv[b, h], ld[4], one)
    # datt = dout @ v^T, (T, HS) @ (HS, T) -> (T, T)
    datt = np.empty((T, T), dtype=q.dtype)
    _gemm(gemm, like, _NO_TRANS, _TRANS, T, T, HS, dout[b, h], ld[0], v[b, h], ld[3], datt, T, one)
    # forward was: att = softmax(preatt); dpreatt = att * (datt - sum(datt * att)) * scale
    softmax_backward_head(datt, a, m, 0, 0, use_drop, scale)
    # forward was: preatt = q @ k^T * scale + adder
    _gemm(gemm, like, _NO_TRANS, _NO_TRANS, T, HS, T, datt, T, k[b, h], ld[2], dq[b, h], ld[4], one)
    _gemm(gemm, like, _TRANS, _NO_TRANS, T, HS, T, datt, T, q[b, h], ld[1], dk[b, h], ld[4], one)


@kernel_jit(parallel=True)
def _attention_backward_gemm_kernel(gemm, like, dout, q, k, v, ld, att, use_drop, k0, k1, threshold, keep_scale,
                                    scale, dq, dk, dv, one):
    """Mirror of the forward kernel (the dropout mask made again from its key). ld: row strides
    of dout, q, k, v and of dq, dk, dv (one stride: they are slices of one array). Each (b, h)
    owns its rows of dq, dk, dv."""
    B, NH, T, HS = q.shape
    for bh in numba.prange(B * NH):
        _attention_backward_gemm_head(np.int64(bh), gemm, like, dout, q, k, v, ld, att, use_drop, k0, k1, threshold,
                                      keep_scale, scale, dq, dk, dv, one)


_attention_forward_gemm_serial = serial_version(_attention_forward_gemm_kernel)
_attention_backward_gemm_serial = serial_version(_attention_backward_gemm_kernel)


def _row_stride(x):
    """The row stride of x (..., T, HS) in elements if its rows can go to BLAS as they are (unit
    stride within a row, rows at least HS apart, forward), else None."""
    isz = x.itemsize
    *_, T, HS = x.shape
    s_row, s_col = x.strides[-2:]
    if HS > 1 and s_col != isz:
        return None
    if T == 1:
        return max(1, HS)  # one row: BLAS never steps over it
    if s_row % isz or s_row < max(1, HS) * isz:
        return None
    return s_row // isz


def _blas_rows(x):
    """x with BLAS-usable rows and its row stride: x itself when it has them, else a copy."""
    ld = _row_stride(x)
    if ld is None:
        x = np.ascontiguousarray(x)
        ld = _row_stride(x)
    return x, ld


def attention_forward(q, k, v, attn_mask, dropout_p=0.0, rng=None, causal=False):
    """v4 (the default). Same contract as layers.attention_forward (and the same dropout mask for
    the same rng), causal mask included. Without a usable OpenBLAS (another BLAS, or
    MINIBERT_BLAS_BATCH=0) it is attention_forward_fallback.

    `out` is a (B, NH, T, HS) view of a (B, T, NH, HS) array, so merge_heads is a free reshape.
    """
    gemm = blas.gemm_for_kernels(q.dtype)
    if gemm is None:
        return attention_forward_fallback(q, k, v, attn_mask, dropout_p, rng, causal)
    B, NH, T, HS = q.shape
    dt = q.dtype
    k, v, scale, adder = attention_inputs(q, k, v, attn_mask, dropout_p)
    (q, lq), (k, lk), (v, lv) = (_blas_rows(x) for x in (q, k, v))
    drop = _draw_dropout(rng, dropout_p)  # DropoutKey or None: the mask is made inside the kernels
    att = np.empty((B, NH, T, T), dtype=dt)  # (B, NH, T, T)
    out = np.empty((B, T, NH, HS), dtype=dt).transpose(0, 2, 1, 3)  # (B, T, NH, HS) -> (B, NH, T, HS)
    ld = np.array([lq, lk, lv, _row_stride(out)], dtype=np.int64)
    kernel = pick_kernel(_attention_forward_gemm_kernel, _attention_forward_gemm_serial, q.shape)
    with blas.single_threaded():
        kernel(gemm[0], gemm[1], q, k, v, ld, adder, drop is not None, *_dropout_args(drop or _NO_DROP, dt),
               dt.type(scale), att, out, bool(causal), dt.type(MASK_VALUE), dt.type(1.0))
    return out, AttentionCache(q, k, v, att, drop, scale)


def attention_backward(dout, cache: AttentionCache):
    """v4. Same contract as layers.attention_backward: -> dq, dk, dv, each (B, NH, T, HS), views
    of one (B, T, 3, NH, HS) array (the layout of the qkv projection's gradient, so the model's
    merge is one copy). The causal mask needs nothing here: the future keys' att is exactly 0."""
    q, k, v, att, drop, scale = cache
    gemm = blas.gemm_for_kernels(q.dtype)
    if gemm is None:
        return attention_backward_fallback(dout, cache)
    B, NH, T, HS = q.shape
    dt = q.dtype
    (dout, ldo), (q, lq), (k, lk), (v, lv) = (_blas_rows(x) for x in (dout.astype(dt, copy=False), q, k, v))
    dq, dk, dv = _qkv_gradient_views(B, NH, T, HS, dt)  # 3 x (B, NH, T, HS)
    ld = np.array([ldo, lq, lk, lv, _row_stride(dq)], dtype=np.int64)
    kernel = pick_kernel(_attention_backward_gemm_kernel, _attention_backward_gemm_serial, q.shape)
    with blas.single_threaded():
        kernel(gemm[0], gemm[1], dout, q, k, v, ld, att, drop is not None, *_dropout_args(drop or _NO_DROP, dt),
               dt.type(scale), dq, dk, dv, dt.type(1.0))
    return dq, dk, dv


# ---------------------------------------------------------------------------------------------
# attention on packed rows (layers.attention_packed_forward): v4 on the rows of the real tokens.
# When every sequence's real tokens come first (a padded tail, the only padding a BERT batch
# has), sequence b's rows are the contiguous block starts[b]:starts[b + 1] of the (N, 3C) qkv
# projection, so each head's q, k and v are (L_b, HS) blocks of it with row stride 3C and go to
# gemm as they are: no grid, no copies in or out, and neither padded queries nor padded keys
# computed (L_b x L_b scores instead of T x T). The output rows and, backward, dq, dk, dv are
# written straight into their (N, C) and (N, 3C) places. The dropout mask of element (i, j) of
# head (b, h) is the grid's element ((b * NH + h) * T + i) * T + j, the reference's. Other masks
# take the grid path (kernels.attention_forward between the copies).


class PackedHeadsCache(NamedTuple):
    qkv: np.ndarray  # (N, 3C)
    starts: np.ndarray  # (B + 1,) the first row of each sequence, and N
    att: np.ndarray  # the heads' (L_b, L_b) probabilities, one after another
    att_at: np.ndarray  # (B * NH,) where each head's block starts in att
    drop: object  # DropoutKey or None
    scale: float
    num_heads: int
    T: int  # the grid's length (the dropout masks' element numbers)


@kernel_jit
def _drop_rows(use_drop, bh, T, L, k0, k1, threshold, keep_scale, like):
    """Head bh's dropout mask for its (L, L) block: row i is the grid's row ((bh * T) + i) * T, its
    first L elements. A (1, 1, L, L) array, or a (1, 1, 1, 1) dummy when not use_drop."""
    m = np.empty(L * L if use_drop else 1, dtype=like.dtype)
    if use_drop:
        for i in range(L):
            _drop_mask_into(m[i * L:(i + 1) * L], (bh * T + i) * T, k0, k1, threshold, keep_scale)
        return m.reshape((1, 1, L, L))
    return m.reshape((1, 1, 1, 1))


@kernel_jit(nogil=True)
def _attention_packed_forward_head(bh, gemm, like, qkv, starts, NH, HS, T, use_drop, k0, k1, threshold, keep_scale,
                                   scale, att, att_at, out, causal, masked, one, zero_adder):
    """Head bh (= b * NH + h) of `_attention_packed_forward_kernel`: its (L, L) block of att and its
    rows' columns of out."""
    C = NH * HS
    ld = qkv.shape[1]  # 3C
    b, h = bh // NH, bh % NH
    s, L = starts[b], starts[b + 1] - starts[b]
    if L == 0:
        return
    a = att[att_at[bh]:att_at[bh] + L * L].reshape((L, L))  # this head's block
    # raw scores: (L, HS) @ (HS, L) -> (L, L)
    _gemm(gemm, like, _NO_TRANS, _TRANS, L, L, HS, qkv[s, h * HS:], ld, qkv[s, C + h * HS:], ld, a, L, one)
    for i in range(L):
        masked_softmax_row(a[i], zero_adder, scale, i if causal else L - 1, masked)
    m = _drop_rows(use_drop, bh, T, L, k0, k1, threshold, keep_scale, a)  # (1, 1, L, L)
    src = times_drop(a, m, 0, 0) if use_drop else a  # (L, L) att * drop: what multiplies v
    # (L, L) @ (L, HS) -> (L, HS), into the rows' columns of head h
    _gemm(gemm, like, _NO_TRANS, _NO_TRANS, L, HS, L, src, L, qkv[s, 2 * C + h * HS:], ld, out[s, h * HS:], C, one)


@kernel_jit(parallel=True)
def _attention_packed_forward_kernel(gemm, like, qkv, starts, NH, HS, T, use_drop, k0, k1, threshold, keep_scale,
                                     scale, att, att_at, out, causal, masked, one):
    """Every head of the packed rows, in parallel: one call of `_attention_packed_forward_head`
    each (runtime.py, "Compile time", says why the head is a function of its own)."""
    B = starts.shape[0] - 1
    zero_adder = np.zeros(T, dtype=qkv.dtype)  # every key of a block is real
    for bh in numba.prange(B * NH):
        _attention_packed_forward_head(np.int64(bh), gemm, like, qkv, starts, NH, HS, T, use_drop, k0, k1, threshold,
                                       keep_scale, scale, att, att_at, out, causal, masked, one, zero_adder)


@kernel_jit(nogil=True)
def _attention_packed_backward_head(bh, gemm, like, dout, qkv, starts, NH, HS, T, att, att_at, use_drop, k0, k1,
                                    threshold, keep_scale, scale, dqkv, one):
    """Head bh of `_attention_packed_backward_kernel`: its rows' columns of dq, dk, dv in dqkv."""
    C = NH * HS
    ld = qkv.shape[1]  # 3C
    b, h = bh // NH, bh % NH
    s, L = starts[b], starts[b + 1] - starts[b]
    if L == 0:
        return
    a = att[att_at[bh]:att_at[bh] + L * L].reshape((L, L))
    m = _drop_rows(use_drop, bh, T, L, k0, k1, threshold, keep_scale, a)
    ad = times_drop(a, m, 0, 0) if use_drop else a  # (L, L) what multiplied v
    q, k, v = qkv[s, h * HS:], qkv[s, C + h * HS:], qkv[s, 2 * C + h * HS:]
    do = dout[s, h * HS:]
    # dv = ad^T @ dout: (L, L)^T @ (L, HS)
    _gemm(gemm, like, _TRANS, _NO_TRANS, L, HS, L, ad, L, do, C, dqkv[s, 2 * C + h * HS:], ld, one)
    datt = np.empty((L, L), dtype=qkv.dtype)  # dout @ v^T
    _gemm(gemm, like, _NO_TRANS, _TRANS, L, L, HS, do, C, v, ld, datt, L, one)
    softmax_backward_head(datt, a, m, 0, 0, use_drop, scale)
    _gemm(gemm, like, _NO_TRANS, _NO_TRANS, L, HS, L, datt, L, k, ld, dqkv[s, h * HS:], ld, one)  # dq
    _gemm(gemm, like, _TRANS, _NO_TRANS, L, HS, L, datt, L, q, ld, dqkv[s, C + h * HS:], ld, one)  # dk


@kernel_jit(parallel=True)
def _attention_packed_backward_kernel(gemm, like, dout, qkv, starts, NH, HS, T, att, att_at, use_drop, k0, k1,
                                      threshold, keep_scale, scale, dqkv, one):
    """Every head, in parallel: one call of `_attention_packed_backward_head` each."""
    B = starts.shape[0] - 1
    for bh in numba.prange(B * NH):
        _attention_packed_backward_head(np.int64(bh), gemm, like, dout, qkv, starts, NH, HS, T, att, att_at, use_drop, k0,
                                        k1, threshold, keep_scale, scale, dqkv, one)


_attention_packed_forward_serial = serial_version(_attention_packed_forward_kernel)
_attention_packed_backward_serial = serial_version(_attention_packed_backward_kernel)


def _prefix_starts(keep, grid, attn_mask):
    """(B + 1,) first rows of the sequences when `keep` holds each sequence's first L_b positions
    (real tokens first, then padding) and attn_mask agrees; else None."""
    B, T = grid
    mask = np.asarray(attn_mask).reshape(B, T) != 0
    lengths = mask.sum(axis=1)  # (B,)
    if not (mask == (np.arange(T)[None, :] < lengths[:, None])).all():
        return None  # padding before a real token: the grid path
    starts = np.zeros(B + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    expected = (np.arange(B)[:, None] * T + np.arange(T)[None, :])[mask]  # (N,) the real positions, in order
    if keep.shape != expected.shape or not np.array_equal(keep, expected):
        return None
    return starts


def attention_packed_forward(qkv, keep, grid, attn_mask, num_heads, dropout_p=0.0, rng=None, causal=False):
    """Same contract as layers.attention_packed_forward (the same masks for the same rng); the
    cache is a PackedHeadsCache on the fast path, the reference's on the grid path."""
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout probability {dropout_p} must be in [0, 1)")
    B, T = grid
    qkv = np.ascontiguousarray(qkv)
    gemm = blas.gemm_for_kernels(qkv.dtype)
    starts = None if gemm is None else _prefix_starts(np.asarray(keep), grid, attn_mask)
    if starts is None:  # the grid: the reference's copies around kernels.attention_forward
        x = np.zeros((B * T, qkv.shape[-1]), dtype=qkv.dtype)  # (B*T, 3C)
        x[keep] = qkv
        q, k, v = (layers.split_heads(t, num_heads) for t in np.split(x.reshape(B, T, -1), 3, axis=-1))
        out, cache = attention_forward(q, k, v, attn_mask, dropout_p, rng, causal)  # (B, NH, T, HS)
        return layers.merge_heads(out).reshape(B * T, -1)[keep], layers.PackedAttentionCache(cache, keep, grid)
    N, C3 = qkv.shape
    C = C3 // 3
    HS = C // num_heads
    dt = qkv.dtype
    lengths = np.diff(starts)  # (B,)
    att_at = np.zeros(B * num_heads + 1, dtype=np.int64)
    np.cumsum(np.repeat(lengths * lengths, num_heads), out=att_at[1:])
    att = np.empty(att_at[-1], dtype=dt)  # every head's (L_b, L_b) block
    out = np.empty((N, C), dtype=dt)  # (N, C)
    drop = _draw_dropout(rng, dropout_p)
    scale = 1.0 / math.sqrt(HS)
    kernel = pick_kernel(_attention_packed_forward_kernel, _attention_packed_forward_serial, (B, num_heads, T, HS))
    with blas.single_threaded():
        kernel(gemm[0], gemm[1], qkv, starts, num_heads, HS, T, drop is not None,
               *_dropout_args(drop or _NO_DROP, dt), dt.type(scale), att, att_at, out, bool(causal),
               dt.type(MASK_VALUE), dt.type(1.0))
    return out, PackedHeadsCache(qkv, starts, att, att_at, drop, scale, num_heads, T)


def attention_packed_backward(dout, cache):
    """Same contract as layers.attention_packed_backward: dout (N, C) -> dqkv (N, 3C)."""
    if not isinstance(cache, PackedHeadsCache):  # the grid path's cache
        attn, keep, (B, T) = cache
        d = np.zeros((B * T, dout.shape[-1]), dtype=dout.dtype)  # (B*T, C)
        d[keep] = dout
        grads = attention_backward(layers.split_heads(d.reshape(B, T, -1), attn.q.shape[1]), attn)  # 3 x (B, NH, T, HS)
        return merge_qkv(*grads).reshape(B * T, -1)[keep]  # (N, 3C)
    qkv, starts, att, att_at, drop, scale, NH, T = cache
    dt = qkv.dtype
    gemm = blas.gemm_for_kernels(dt)
    B = starts.shape[0] - 1
    HS = qkv.shape[1] // 3 // NH
    dout = np.ascontiguousarray(dout, dtype=dt)
    dqkv = np.empty_like(qkv)  # (N, 3C): every row and column is written by its head
    kernel = pick_kernel(_attention_packed_backward_kernel, _attention_packed_backward_serial, (B, NH, T, HS))
    with blas.single_threaded():
        kernel(gemm[0], gemm[1], dout, qkv, starts, NH, HS, T, att, att_at, drop is not None,
               *_dropout_args(drop or _NO_DROP, dt), dt.type(scale), dqkv, dt.type(1.0))
    return dqkv


