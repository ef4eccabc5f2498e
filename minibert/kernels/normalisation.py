"""LayerNorm in Numba: one row per work item, forward and backward, the reference's cache."""
from __future__ import annotations

import math

import numba
import numpy as np

from minibert import layers
from minibert.kernels.runtime import kernel_jit
from minibert.kernels.vector_math import _row_dot, _row_sum


# ---------------------------------------------------------------------------------------------
# layernorm over the last axis, one row per work item; the same cache as the reference


@kernel_jit
def _layernorm_forward_row(xr, w, b, eps, inv_c, one, nr, orow):
    """One row of `_layernorm_forward_kernel`: nr <- the normalized row, orow <- nr * w + b
    -> the row's rstd."""
    C = xr.shape[0]
    mean = _row_sum(xr) * inv_c
    for j in range(C):
        nr[j] = xr[j] - mean
    var = _row_dot(nr, nr) * inv_c
    rs = one / math.sqrt(var + eps)
    for j in range(C):
        nr[j] = nr[j] * rs
        orow[j] = nr[j] * w[j] + b[j]
    return rs


@kernel_jit(parallel=True)
def _layernorm_forward_kernel(x, w, b, eps, inv_c, one, out, norm, rstd):
    for r in numba.prange(x.shape[0]):
        rstd[r, 0] = _layernorm_forward_row(x[r], w, b, eps, inv_c, one, norm[r], out[r])


@kernel_jit
def _layernorm_backward_rows(dout, norm, w, rstd, inv_c, dx, dwp, dbp, lo, hi):
    """Rows lo..hi-1 of `_layernorm_backward_kernel`: their dx, their sums added into dwp, dbp."""
    C = dout.shape[1]
    g = np.empty(C, dtype=dout.dtype)  # (C,)
    for r in range(lo, hi):
        dr = dout[r]
        nr = norm[r]
        for j in range(C):
            dbp[j] += dr[j]
            dwp[j] += dr[j] * nr[j]
            g[j] = dr[j] * w[j]
        gmean = _row_sum(g) * inv_c
        gnmean = _row_dot(g, nr) * inv_c
        rs = rstd[r, 0]
        dxr = dx[r]
        for j in range(C):
            dxr[j] = rs * (g[j] - gmean - nr[j] * gnmean)


@kernel_jit(parallel=True)
def _layernorm_backward_kernel(dout, norm, w, rstd, inv_c, dx, dw_parts, db_parts):
    """dx row by row; dw, db as per-chunk partial sums (rows are split into dw_parts.shape[0]
    chunks, each chunk owns its row of dw_parts), summed by the caller."""
    N = dout.shape[0]
    n_chunks = dw_parts.shape[0]
    per = (N + n_chunks - 1) // n_chunks
    for c in numba.prange(n_chunks):
        _layernorm_backward_rows(dout, norm, w, rstd, inv_c, dx, dw_parts[c], db_parts[c], c * per,
                                 min(N, (c + 1) * per))


def layernorm_forward(x, w, b, eps=1e-12):
    """Same contract (and cache) as layers.layernorm_forward."""
    C = x.shape[-1]
    x2 = np.ascontiguousarray(x).reshape(-1, C)  # (N, C)
    dt = x.dtype
    out = np.empty_like(x2)  # (N, C)
    norm = np.empty_like(x2)  # (N, C)
    rstd = np.empty((x2.shape[0], 1), dtype=dt)  # (N, 1)
    _layernorm_forward_kernel(x2, w.astype(dt, copy=False), b.astype(dt, copy=False), dt.type(eps),
                              dt.type(1.0 / C), dt.type(1.0), out, norm, rstd)
    lead = x.shape[:-1]
    return out.reshape(x.shape), layers.LayerNormCache(norm.reshape(x.shape), w, rstd.reshape(*lead, 1))


def layernorm_backward(dout, cache):
    """Same contract as layers.layernorm_backward: -> dx, dw, db."""
    norm, w, rstd = cache
    C = norm.shape[-1]
    dt = norm.dtype
    d2 = np.ascontiguousarray(dout, dtype=dt).reshape(-1, C)  # (N, C)
    n2 = norm.reshape(-1, C)  # (N, C)
    N = d2.shape[0]
    n_chunks = max(1, min(4 * numba.get_num_threads(), N // 64))
    dw_parts = np.zeros((n_chunks, C), dtype=dt)  # (chunks, C)
    db_parts = np.zeros((n_chunks, C), dtype=dt)  # (chunks, C)
    dx = np.empty_like(d2)  # (N, C)
    _layernorm_backward_kernel(d2, n2, w.astype(dt, copy=False), rstd.reshape(-1, 1), dt.type(1.0 / C),
                               dx, dw_parts, db_parts)
    return dx.reshape(norm.shape), dw_parts.sum(axis=0), db_parts.sum(axis=0)


