"""Dropout's random stream: the keep/drop decisions of every dropout mask, in NumPy.

`layers.dropout_forward` (the reference) and `kernels` (the Numba backend) both take their masks
from here, so that the two backends drop the very same elements for the same `rng`.

The bits come from a counter-based generator, Philox4x32-10 (Salmon et al., "Parallel random
numbers: as easy as 1, 2, 3", SC 2011; the generator of cuRAND and of PyTorch's CUDA dropout):
32 random bits for element i of the flattened array are a pure function of (key, i), ten rounds
of multiplications and xors. Each dropout call draws a fresh 64-bit key from the caller's `rng`
(one draw, so seeds and bit-exact resume work as with any other draw), and the bits of element i
are then the same whoever computes them, in any order, on any thread: `minibert.kernels`
computes them in parallel inside its kernels, element by element, without a random array
(`kernels.dropout._philox_block`, with the constants below), and gets the very masks that
`dropout_mask` below gets. Why not `rng.random(x.shape) >= p`: that array is drawn in one serial
pass, in one order, and a kernel that makes its mask on many threads could not reproduce it.
"""
from __future__ import annotations

import math

import numpy as np

PHILOX_M0, PHILOX_M1 = 0xD2511F53, 0xCD9E8D57  # the round multipliers
PHILOX_W0, PHILOX_W1 = 0x9E3779B9, 0xBB67AE85  # the key schedule's increments (golden ratio, sqrt(3) - 1)
PHILOX_ROUNDS = 10
_LOW32 = np.uint64(0xFFFFFFFF)


def philox4x32(counters, key):
    """Philox4x32-10: counters (n, 4) of 32-bit words, key two 32-bit ints -> (n, 4) uint32, four
    random 32-bit words per counter (Random123's known answers are in tests/test_philox.py).

    One round, on the four words (c0, c1, c2, c3) with key (k0, k1):
        c0 * M0 = (hi0, lo0) and c2 * M1 = (hi1, lo1) as 64-bit products
        (c0, c1, c2, c3) <- (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0);  then k += (W0, W1)
    The words are held in uint64 so that a 32 x 32-bit product is exact.
    """
    c0, c1, c2, c3 = np.asarray(counters, dtype=np.uint64).T  # 4 x (n,)
    k0, k1 = (np.uint64(int(k) & 0xFFFFFFFF) for k in key)
    for r in range(PHILOX_ROUNDS):
        p0 = c0 * np.uint64(PHILOX_M0)  # (n,) 64-bit product
        p1 = c2 * np.uint64(PHILOX_M1)  # (n,)
        c0, c1, c2, c3 = (p1 >> np.uint64(32)) ^ c1 ^ k0, p1 & _LOW32, (p0 >> np.uint64(32)) ^ c3 ^ k1, p0 & _LOW32
        k0 = (k0 + np.uint64(PHILOX_W0)) & _LOW32  # the key schedule: Weyl sequences
        k1 = (k1 + np.uint64(PHILOX_W1)) & _LOW32
    return np.stack([c0, c1, c2, c3], axis=-1).astype(np.uint32)  # (n, 4)


def random_bits(key, n):
    """32 random bits for each of the elements 0..n-1 -> (n,) uint32: element i is word i % 4
    of the Philox output for the counter (j, 0, 0, 0), j = i // 4 (as two 32-bit words)."""
    j = np.arange((n + 3) // 4, dtype=np.uint64)  # (ceil(n/4),) block numbers
    counters = np.zeros((j.size, 4), dtype=np.uint64)  # (ceil(n/4), 4)
    counters[:, 0], counters[:, 1] = j & _LOW32, j >> np.uint64(32)
    return philox4x32(counters, key).reshape(-1)[:n]  # (n,)


def dropout_threshold(p):
    """The 32-bit threshold t of keep probability 1 - p: an element is kept when its bits >= t,
    which happens for 2**32 - t of the 2**32 values (t = round(p * 2**32), exact to 2**-33)."""
    return min(int(round(p * 2.0**32)), 2**32 - 1)


def draw_dropout_key(rng):
    """The per-call key: two 32-bit words from the caller's Generator (one draw)."""
    return rng.integers(0, 2**32, size=2, dtype=np.uint64)


def dropout_mask(key, shape, p, dtype):
    """The mask (0 or 1/(1-p), in `dtype`) of the elements of an array of `shape` under `key`."""
    n = math.prod(shape)
    keep = random_bits(key, n) >= np.uint32(dropout_threshold(p))  # (n,) bool
    return (keep.astype(dtype) * np.dtype(dtype).type(1.0 / (1.0 - p))).reshape(shape)  # (...)
