"""The element-wise and row-wise kernels of the linear layer and the FFN: the bias added and
summed in parallel (`linear_forward`, `linear_backward`, `column_sum`), GELU (its cache keeps the
derivative), and add and multiply in parallel."""
from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np

from minibert import layers
from minibert.kernels.runtime import CHUNK, ROWS_MIN, kernel_jit
from minibert.kernels.vector_math import _add_into, _copy_into, _erf, _erf_gauss, _exp


# ---------------------------------------------------------------------------------------------
# linear: the reference, with the leading axes flattened first. x (B, T, C_in) @ w as one
# (B*T, C_in) @ (C_in, C_out) BLAS call instead of NumPy's loop of B small calls; the bias added
# in place by a parallel pass, and db summed by one (NumPy's `+=` and `sum(axis=0)` run on one
# thread whatever the core count). Both do each element's float operations in NumPy's order
# (db: the rows one after the other, as NumPy's axis-0 sum), so the results are NumPy's bits.

_COLS_SUM = 128  # columns per work item of the column sums (512 bytes of float32)


@kernel_jit(parallel=True)
def _add_bias_kernel(out, b):
    """out (N, C) += b (C,), in place, chunks of rows in parallel."""
    N, C = out.shape
    per = max(1, ROWS_MIN // max(C, 1))
    for c in numba.prange((N + per - 1) // per):
        for r in range(c * per, min(N, (c + 1) * per)):
            orow = out[r]
            for j in range(C):
                orow[j] += b[j]


@kernel_jit(parallel=True)
def _column_sum_kernel(x, out):
    """out (C,) = x (N >= 1, C).sum(axis=0) as NumPy sums it: the first row, plus each next row in
    order. Blocks of _COLS_SUM columns in parallel; each reads its part of every row, long enough
    (512 bytes) to keep the reads streaming."""
    N, C = x.shape
    for c in numba.prange((C + _COLS_SUM - 1) // _COLS_SUM):
        lo, hi = c * _COLS_SUM, min(C, (c + 1) * _COLS_SUM)
        acc = out[lo:hi]
        _copy_into(acc, x[0, lo:hi])
        for r in range(1, N):
            _add_into(acc, x[r, lo:hi])


def column_sum(x):
    """x (N, C) -> x.sum(axis=0) (C,), the same bits, in parallel when it is big enough to pay."""
    if x.size < ROWS_MIN or not x.flags.c_contiguous or x.shape[1] < 2 * _COLS_SUM:
        return x.sum(axis=0)  # small, or too few columns to split
    out = np.empty(x.shape[1], dtype=x.dtype)  # (C,)
    _column_sum_kernel(x, out)
    return out


def add_bias(out, b):
    """out (N, C) += b (C,) in place (out C-contiguous), in parallel when it pays."""
    if out.size < ROWS_MIN:
        out += b
    else:
        _add_bias_kernel(out, b.astype(out.dtype, copy=False))
    return out


def linear_forward(x, w, b):
    """Same contract as layers.linear_forward."""
    c_in, c_out = w.shape
    out = x.reshape(-1, c_in) @ w  # (N, C_in) @ (C_in, C_out) -> (N, C_out)
    add_bias(out, b)
    return out.reshape(*x.shape[:-1], c_out), layers.LinearCache(x, w)


def linear_backward(dout, cache):
    """Same contract as layers.linear_backward: -> dx, dw, db."""
    x, w = cache
    c_in, c_out = w.shape
    d2 = dout.reshape(-1, c_out)  # (N, C_out)
    dx = (d2 @ w.T).reshape(x.shape)  # (N, C_in) -> (..., C_in)
    dw = x.reshape(-1, c_in).T @ d2  # (C_in, N) @ (N, C_out) -> (C_in, C_out)
    db = column_sum(d2)  # (C_out,)
    return dx, dw, db


# ---------------------------------------------------------------------------------------------
# GELU, elementwise: one pass instead of NumPy's five temporaries. Constants arrive typed as the
# array's dtype so float32 stays float32 (a Python float literal would promote to float64).
#
# The one place where a kernel's cache differs from the reference's: `gelu_forward` keeps the
# derivative gelu'(x) (`GeluGradCache`) instead of x (`layers.GeluCache`). The forward pass has
# x in a register anyway, so one more exp there makes the backward a single multiply instead of
# a second erf + exp per element; the cache is still one array of x's size (x itself is not kept).
# Tiny training step, 2 cores: GELU forward + backward ~24 ms -> ~13 ms. `gelu_backward` takes
# either cache, so the reference's cache still works here.



class GeluGradCache(NamedTuple):
    dgelu: np.ndarray  # (...,) gelu'(x), computed by the forward pass
    approximate: str  # "none" (erf) or "tanh"


# Each kernel hands its prange chunk to an inlined helper as slices: indexing the whole arrays
# inside the prange loop kept LLVM from vectorizing the loop (as for AdamW, optimizer.py). Measured on one
# thread, GELU forward over 3543 x 512 float32 (the tiny step's FFN): 6.9 ms before, 1.8 ms after.

@kernel_jit(inline="always")
def _gelu_erf_forward_chunk(x, out, dgelu, half, one, inv_sqrt2, inv_sqrt_2pi):
    for i in range(x.shape[0]):
        xi = x[i]
        e, g = _erf_gauss(xi * inv_sqrt2)  # erf(x / sqrt 2), exp(-x^2 / 2)
        cdf = half * (one + e)  # Phi(x)
        pdf = g * inv_sqrt_2pi  # phi(x)
        out[i] = xi * cdf  # 0.5 x (1 + erf(x / sqrt 2))
        dgelu[i] = cdf + xi * pdf


@kernel_jit(inline="always")
def _gelu_erf_backward_chunk(dout, x, dx, half, one, inv_sqrt2, inv_sqrt_2pi):
    for i in range(x.shape[0]):
        xi = x[i]
        cdf = half * (one + _erf(xi * inv_sqrt2))  # Phi(x)
        pdf = _exp(-half * xi * xi) * inv_sqrt_2pi  # phi(x)
        dx[i] = dout[i] * (cdf + xi * pdf)


@kernel_jit(inline="always")
def _gelu_tanh_forward_chunk(x, out, dgelu, half, one, c0, c1, three):
    for i in range(x.shape[0]):
        xi = x[i]
        t = math.tanh(c0 * (xi + c1 * xi * xi * xi))
        du = c0 * (one + three * c1 * xi * xi)
        out[i] = half * xi * (one + t)
        dgelu[i] = half * (one + t) + half * xi * (one - t * t) * du


@kernel_jit(inline="always")
def _gelu_tanh_backward_chunk(dout, x, dx, half, one, c0, c1, three):
    for i in range(x.shape[0]):
        xi = x[i]
        t = math.tanh(c0 * (xi + c1 * xi * xi * xi))
        du = c0 * (one + three * c1 * xi * xi)
        dx[i] = dout[i] * (half * (one + t) + half * xi * (one - t * t) * du)


@kernel_jit(parallel=True)
def _gelu_erf_forward_kernel(x, out, dgelu, half, one, inv_sqrt2, inv_sqrt_2pi):
    n = x.shape[0]
    for c in numba.prange((n + CHUNK - 1) // CHUNK):
        lo, hi = c * CHUNK, min(n, (c + 1) * CHUNK)
        _gelu_erf_forward_chunk(x[lo:hi], out[lo:hi], dgelu[lo:hi], half, one, inv_sqrt2, inv_sqrt_2pi)


@kernel_jit(parallel=True)
def _gelu_erf_backward_kernel(dout, x, dx, half, one, inv_sqrt2, inv_sqrt_2pi):
    n = x.shape[0]
    for c in numba.prange((n + CHUNK - 1) // CHUNK):
        lo, hi = c * CHUNK, min(n, (c + 1) * CHUNK)
        _gelu_erf_backward_chunk(dout[lo:hi], x[lo:hi], dx[lo:hi], half, one, inv_sqrt2, inv_sqrt_2pi)


@kernel_jit(parallel=True)
def _gelu_tanh_forward_kernel(x, out, dgelu, half, one, c0, c1, three):
    n = x.shape[0]
    for c in numba.prange((n + CHUNK - 1) // CHUNK):
        lo, hi = c * CHUNK, min(n, (c + 1) * CHUNK)
        _gelu_tanh_forward_chunk(x[lo:hi], out[lo:hi], dgelu[lo:hi], half, one, c0, c1, three)


@kernel_jit(parallel=True)
def _gelu_tanh_backward_kernel(dout, x, dx, half, one, c0, c1, three):
    n = x.shape[0]
    for c in numba.prange((n + CHUNK - 1) // CHUNK):
        lo, hi = c * CHUNK, min(n, (c + 1) * CHUNK)
        _gelu_tanh_backward_chunk(dout[lo:hi], x[lo:hi], dx[lo:hi], half, one, c0, c1, three)


@kernel_jit(inline="always")
def _multiply_chunk(a, b, out):
    for i in range(a.shape[0]):
        out[i] = a[i] * b[i]


@kernel_jit(parallel=True)
def _multiply_kernel(a, b, out):
    n = a.shape[0]
    for c in numba.prange((n + CHUNK - 1) // CHUNK):
        lo, hi = c * CHUNK, min(n, (c + 1) * CHUNK)
        _multiply_chunk(a[lo:hi], b[lo:hi], out[lo:hi])


@kernel_jit(inline="always")
def _add_chunk(a, b, out):
    for i in range(a.shape[0]):
        out[i] = a[i] + b[i]


@kernel_jit(parallel=True)
def _add_kernel(a, b, out):
    n = a.shape[0]
    for c in numba.prange((n + CHUNK - 1) // CHUNK):
        lo, hi = c * CHUNK, min(n, (c + 1) * CHUNK)
        _add_chunk(a[lo:hi], b[lo:hi], out[lo:hi])


def add(a, b):
    """Same contract as layers.add (a + b, one shape and dtype), in parallel when it pays: NumPy's bits."""
    if a.shape != b.shape or a.dtype != b.dtype or a.size < ROWS_MIN:
        return a + b
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    out = np.empty_like(a)
    _add_kernel(a.reshape(-1), b.reshape(-1), out.reshape(-1))
    return out


def multiply(a, b):
    """a * b elementwise in b's dtype (a and b of one shape), a parallel pass: NumPy's bits."""
    a = np.ascontiguousarray(a, dtype=b.dtype)
    b = np.ascontiguousarray(b)
    out = np.empty_like(b)
    if b.size < ROWS_MIN:
        np.multiply(a, b, out=out)
    else:
        _multiply_kernel(a.reshape(-1), b.reshape(-1), out.reshape(-1))
    return out


def _gelu_constants(f, approximate):
    if approximate == "none":
        return f(0.5), f(1.0), f(1.0 / math.sqrt(2.0)), f(1.0 / math.sqrt(2.0 * math.pi))
    return f(0.5), f(1.0), f(math.sqrt(2.0 / math.pi)), f(0.044715), f(3.0)


def gelu_forward(x, approximate="none"):
    """Same contract as layers.gelu_forward; the cache is a GeluGradCache (see above)."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate={approximate!r}: expected 'none' (erf) or 'tanh'")
    x = np.ascontiguousarray(x)
    out = np.empty_like(x)  # (...)
    dgelu = np.empty_like(x)  # (...)
    kernel = _gelu_erf_forward_kernel if approximate == "none" else _gelu_tanh_forward_kernel
    kernel(x.reshape(-1), out.reshape(-1), dgelu.reshape(-1), *_gelu_constants(x.dtype.type, approximate))
    return out, GeluGradCache(dgelu, approximate)


def gelu_backward(dout, cache):
    """Same contract as layers.gelu_backward, for a GeluGradCache or the reference's GeluCache."""
    if isinstance(cache, GeluGradCache):
        return multiply(dout, cache.dgelu)  # (...) dout * gelu'(x)
    x, approximate = cache
    dout = np.ascontiguousarray(dout, dtype=x.dtype)
    dx = np.empty_like(x)  # (...)
    kernel = _gelu_erf_backward_kernel if approximate == "none" else _gelu_tanh_backward_kernel
    kernel(dout.reshape(-1), x.reshape(-1), dx.reshape(-1), *_gelu_constants(x.dtype.type, approximate))
    return dx


