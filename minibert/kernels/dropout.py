"""Dropout in the kernels: the Philox4x32-10 bits computed element by element inside the passes
that use them (`_philox_block`, `_drop_mask_into`: the attention kernels draw their masks with
them too), the cache's record of a mask (`DropoutKey`: the key, not the mask), and
dropout_forward / dropout_backward."""
from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np

from minibert import layers, philox
from minibert.kernels.runtime import CHUNK, kernel_jit


# ---------------------------------------------------------------------------------------------
# dropout's random bits: Philox4x32-10, the counter-based stream of philox.philox4x32, element
# by element inside the kernels (no random array, no serial draw). Word i of a call is a pure
# function of (key, i), so every thread computes its own elements' bits, and they equal the
# reference's bit for bit (a test). The 32-bit words are held in uint64 (exact 32 x 32 products).

_U64 = np.uint64
_PM0, _PM1 = _U64(philox.PHILOX_M0), _U64(philox.PHILOX_M1)
_PW0, _PW1 = _U64(philox.PHILOX_W0), _U64(philox.PHILOX_W1)
_LOW32, _S32 = _U64(0xFFFFFFFF), _U64(32)


@kernel_jit(inline="always")
def _philox_block(j, k0, k1):
    """The four 32-bit words of Philox4x32-10 at counter (j low, j high, 0, 0), key (k0, k1)."""
    c0, c1, c2, c3 = j & _LOW32, j >> _S32, _U64(0), _U64(0)
    for r in range(philox.PHILOX_ROUNDS):
        p0 = c0 * _PM0
        p1 = c2 * _PM1
        c0, c1, c2, c3 = (p1 >> _S32) ^ c1 ^ k0, p1 & _LOW32, (p0 >> _S32) ^ c3 ^ k1, p0 & _LOW32
        k0 = (k0 + _PW0) & _LOW32
        k1 = (k1 + _PW1) & _LOW32
    return c0, c1, c2, c3


@kernel_jit(inline="always")
def _philox_word(i, k0, k1):
    """Word i of the stream: word i % 4 of block i // 4 (the head and tail of unaligned ranges)."""
    w = _philox_block(_U64(i) >> _U64(2), k0, k1)
    lane = i & 3
    return w[0] if lane == 0 else (w[1] if lane == 1 else (w[2] if lane == 2 else w[3]))


@kernel_jit(inline="always")
def _random_bits_into(bits, start, k0, k1):
    """bits[:] (uint32) <- the words start .. start + len(bits) - 1 (philox.random_bits)."""
    n = bits.shape[0]
    i = 0
    while i < n and (start + i) & 3:  # up to the first whole block
        bits[i] = np.uint32(_philox_word(start + i, k0, k1))
        i += 1
    j0 = (start + i) >> 2
    for jj in range((n - i) >> 2):  # whole blocks: four words each
        w0, w1, w2, w3 = _philox_block(_U64(j0 + jj), k0, k1)
        o = i + 4 * jj
        bits[o] = np.uint32(w0)
        bits[o + 1] = np.uint32(w1)
        bits[o + 2] = np.uint32(w2)
        bits[o + 3] = np.uint32(w3)
    i += 4 * ((n - i) >> 2)
    while i < n:  # the rest of the last block
        bits[i] = np.uint32(_philox_word(start + i, k0, k1))
        i += 1


@kernel_jit(inline="always")
def _drop_mask_into(m, start, k0, k1, threshold, keep_scale):
    """m[:] <- the dropout mask (0 or keep_scale = 1/(1-p), m's dtype) of the elements start ..
    start + len(m) - 1: kept where the element's bits >= threshold (philox.dropout_mask)."""
    n = m.shape[0]
    bits = np.empty(n, dtype=np.uint32)
    _random_bits_into(bits, start, k0, k1)
    zero = keep_scale - keep_scale
    for i in range(n):
        m[i] = keep_scale if bits[i] >= threshold else zero


class DropoutKey(NamedTuple):
    """The kernels' record of a dropout mask: the Philox key it was drawn with and p. The mask
    itself (philox.dropout_mask(key, shape, p, dtype)) is recomputed where it is needed instead
    of being kept: a (B, T, C) or (B, NH, T, T) array less per dropout in the step's memory."""
    key: np.ndarray  # (2,) uint64, two 32-bit words
    p: float

    def mask(self, shape, dtype):
        """The mask as an array (0 or 1/(1-p)), computed in parallel: philox.dropout_mask."""
        m = np.empty(math.prod(shape), dtype=dtype)
        _dropout_mask_kernel(m, *_dropout_args(self, dtype))
        return m.reshape(shape)


def _dropout_args(d: DropoutKey, dtype):
    """(k0, k1, threshold, keep scale) as the kernels take them."""
    dt = np.dtype(dtype)
    return (_U64(d.key[0]), _U64(d.key[1]), np.uint32(philox.dropout_threshold(d.p)),
            dt.type(1.0 / (1.0 - d.p)))


_NO_DROP = DropoutKey(np.zeros(2, dtype=np.uint64), 0.0)  # the arguments of a kernel that drops nothing


def _draw_dropout(rng, dropout_p):
    """None for p = 0, else a DropoutKey with a fresh key from `rng` (philox.draw_dropout_key:
    the reference's one draw, so the same rng gives the same masks)."""
    if dropout_p == 0.0:
        return None
    return DropoutKey(philox.draw_dropout_key(rng), float(dropout_p))


# ---------------------------------------------------------------------------------------------
# dropout: the mask of layers.dropout_forward (Philox bits, see _philox_block), made and applied
# in one parallel pass; the cache keeps the key (DropoutKey), and the backward makes the mask
# again instead of reading a stored one. Same bits as the reference: x * mask, mask 0 or 1/(1-p).


@kernel_jit(inline="always")
def _dropout_chunk(x, out, start, k0, k1, threshold, keep_scale):
    m = np.empty(x.shape[0], dtype=x.dtype)
    _drop_mask_into(m, start, k0, k1, threshold, keep_scale)
    for i in range(x.shape[0]):
        out[i] = x[i] * m[i]


@kernel_jit(parallel=True)
def _dropout_kernel(x, out, k0, k1, threshold, keep_scale):
    """out = x * mask, element i's mask from its Philox word i."""
    n = x.shape[0]
    for c in numba.prange((n + CHUNK - 1) // CHUNK):
        lo, hi = c * CHUNK, min(n, (c + 1) * CHUNK)
        _dropout_chunk(x[lo:hi], out[lo:hi], lo, k0, k1, threshold, keep_scale)


@kernel_jit(parallel=True)
def _dropout_mask_kernel(m, k0, k1, threshold, keep_scale):
    """m = the mask itself (DropoutKey.mask)."""
    n = m.shape[0]
    for c in numba.prange((n + CHUNK - 1) // CHUNK):
        lo, hi = c * CHUNK, min(n, (c + 1) * CHUNK)
        _drop_mask_into(m[lo:hi], lo, k0, k1, threshold, keep_scale)


def dropout_forward(x, p, rng):
    """Same contract as layers.dropout_forward, and the same output for the same rng; the cache is
    a DropoutKey (the mask is recomputed in the backward, not kept)."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability {p} must be in [0, 1)")
    if p == 0.0:
        return x, layers.DropoutCache(None)
    drop = _draw_dropout(rng, p)
    x = np.ascontiguousarray(x)
    out = np.empty_like(x)  # (...)
    _dropout_kernel(x.reshape(-1), out.reshape(-1), *_dropout_args(drop, x.dtype))
    return out, drop


def dropout_backward(dout, cache):
    """Same contract as layers.dropout_backward, for a DropoutKey or the reference's DropoutCache."""
    if not isinstance(cache, DropoutKey):
        return layers.dropout_backward(dout, cache)
    dout = np.ascontiguousarray(dout)
    dx = np.empty_like(dout)  # (...)
    _dropout_kernel(dout.reshape(-1), dx.reshape(-1), *_dropout_args(cache, dout.dtype))
    return dx


