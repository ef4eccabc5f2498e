"""Softmax cross-entropy in Numba, class weights included: the reference's contract and cache."""
from __future__ import annotations

import math

import numba
import numpy as np

from minibert import layers
from minibert.kernels.vector_math import _softmax_row
from minibert.kernels.runtime import kernel_jit


# ---------------------------------------------------------------------------------------------
# softmax cross-entropy: one parallel pass per row over the (N, K) logits (K = V for the MLM)


@kernel_jit(parallel=True)
def _softmax_xent_kernel(z, t, probs, logp_t):
    """probs = softmax(z) row by row; logp_t[r] = log softmax(z)[r, t[r]]."""
    for r in numba.prange(z.shape[0]):
        m, s = _softmax_row(z[r], probs[r])
        logp_t[r] = (z[r, t[r]] - m) - math.log(s)


@kernel_jit(parallel=True)
def _xent_backward_kernel(probs, t, scale, dz):
    """dz = scale[r] * (probs - onehot(t)) row by row."""
    N, K = probs.shape
    for r in numba.prange(N):
        sr = scale[r]
        pr = probs[r]
        dr = dz[r]
        for j in range(K):
            dr[j] = pr[j] * sr
        dr[t[r]] -= sr


def cross_entropy_forward(logits, targets, ignore_index=-100, class_weights=None):
    """Same contract (and cache) as layers.cross_entropy_forward."""
    K = logits.shape[-1]
    if targets.shape != logits.shape[:-1]:
        raise ValueError(f"targets have shape {targets.shape}, expected {logits.shape[:-1]}")
    z = np.ascontiguousarray(logits).reshape(-1, K)  # (N, K)
    t = targets.reshape(-1)  # (N,)
    valid = t != ignore_index  # (N,)
    bad = valid & ((t < 0) | (t >= K))
    if bad.any():
        raise ValueError(f"target {int(t[bad][0])} is outside [0, {K}) (and is not ignore_index {ignore_index})")
    layers.check_class_weights(class_weights, K)
    t = np.where(valid, t, 0).astype(np.int64)  # (N,)
    probs = np.empty_like(z)  # (N, K)
    logp_t = np.empty(z.shape[0], dtype=z.dtype)  # (N,)
    _softmax_xent_kernel(z, t, probs, logp_t)
    weight = layers.target_weights(valid, t, class_weights, logits.dtype)  # (N,)
    loss = -(logp_t * weight).sum()  # ()
    return logits.dtype.type(loss), layers.CrossEntropyCache(probs, t, weight, logits.shape)


def cross_entropy_backward(dloss, cache):
    """Same contract as layers.cross_entropy_backward: -> dlogits."""
    probs, t, weight, shape = cache
    dz = np.empty_like(probs)  # (N, K)
    _xent_backward_kernel(probs, t.astype(np.int64, copy=False), (weight * dloss).astype(probs.dtype), dz)
    return dz.reshape(shape)


