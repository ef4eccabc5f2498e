"""Attention v3: v2 (kernels.attention_forward_fallback: np.matmul around one fused Numba softmax
pass) with each of its six matmuls one call of OpenBLAS's batched gemm (minibert/native/blas.py's
`matmul`, which takes np.matmul for small products and for a BLAS other than OpenBLAS >= 0.3.27).

A development version, a contender in `python -m minibert bench --only attention`: the model runs
v4 (kernels.attention_forward), which calls plain gemm per head from Numba's threads and keeps each
head's (T, T) scores in the core's cache, where v3 writes the whole (B, NH, T, T) block to memory
and reads it back twice (docs/speed.md tells the story with the numbers). Same contract as
layers.attention_forward / _backward, causal mask included, and the same dropout mask for the same
rng; the backward writes dq, dk, dv into one (B, T, 3, NH, HS) array, the layout of the qkv
projection's gradient.
"""
from __future__ import annotations

from minibert import kernels
from minibert.layers import AttentionCache
from minibert.native import blas


def attention_forward_v3(q, k, v, attn_mask, dropout_p=0.0, rng=None, causal=False):
    """v3. Same contract as layers.attention_forward. `out` is a (B, NH, T, HS) view of a
    (B, T, NH, HS) array, so merge_heads is a free reshape."""
    return kernels.attention_forward_fallback(q, k, v, attn_mask, dropout_p, rng, causal, matmul=blas.matmul)


def attention_backward_v3(dout, cache: AttentionCache):
    """v3. Same contract as layers.attention_backward: -> dq, dk, dv, each (B, NH, T, HS)."""
    return kernels.attention_backward_fallback(dout, cache, matmul=blas.matmul)
