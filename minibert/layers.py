"""Every layer of BERT as a pure forward/backward pair, in NumPy. The readable reference.

Each `<layer>_forward(...)` returns `(out, cache)`; the matching `<layer>_backward(dout, cache)`
sits directly below it and returns the gradients in the order of the forward's array arguments.
Functions are pure: forward never mutates its inputs, backward never mutates the cache.
All keep the caller's dtype: float32 for training, float64 for gradient checks.

Shape legend (also in model.py):
    B   batch size              T   sequence length         C   hidden size (H in the paper)
    NH  attention heads         HS  head size = C // NH     V   vocabulary size
    FF  intermediate size       P   predictions per sequence (masked positions)

`minibert.kernels` provides Numba versions of the hot layers with the same signatures; this
file stays the source of truth they are tested against. It needs NumPy and Python alone.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from minibert import philox

# Added to the attention scores of padded keys, as google-research/bert does (docs/bert-notes.md §4.4).
# exp(-10000) underflows to exactly 0, so padded keys get no weight.
MASK_VALUE = -10000.0


# ---------------------------------------------------------------------------------------------
# linear: out = x @ w + b
# (w is (C_in, C_out), so the code reads x @ w; PyTorch's nn.Linear stores it transposed.)

class LinearCache(NamedTuple):
    x: np.ndarray  # (..., C_in)
    w: np.ndarray  # (C_in, C_out)


def linear_forward(x, w, b):
    """Shapes: x (..., C_in), w (C_in, C_out), b (C_out,) -> out (..., C_out)."""
    out = x @ w + b  # (..., C_out)
    return out, LinearCache(x, w)


def linear_backward(dout, cache: LinearCache):
    """Returns dx (..., C_in), dw (C_in, C_out), db (C_out,)."""
    x, w = cache
    c_in, c_out = w.shape
    dx = dout @ w.T  # (..., C_in)
    dw = x.reshape(-1, c_in).T @ dout.reshape(-1, c_out)  # (C_in, N) @ (N, C_out) -> (C_in, C_out)
    db = dout.reshape(-1, c_out).sum(axis=0)  # (C_out,)
    return dx, dw, db


# ---------------------------------------------------------------------------------------------
# two plain array operations the model does between layers, here so that minibert.kernels can run
# them in parallel: the sum at a fork (a residual, a tied weight's two gradients) and a bias's
# gradient (the sum over rows)

def add(a, b):
    """a + b (same shape): where a gradient or a residual branch joins another."""
    return a + b


def column_sum(x):
    """x (N, D) -> (D,): the sum over the rows, as a bias's gradient."""
    return x.sum(axis=0)


# ---------------------------------------------------------------------------------------------
# embedding sum: out = tok_emb[input_ids] + seg_emb[segment_ids] + pos_emb[0..T-1]

class EmbeddingCache(NamedTuple):
    input_ids: np.ndarray  # (B, T) int
    segment_ids: np.ndarray  # (B, T) int
    tok_shape: tuple  # (V, C)
    seg_shape: tuple  # (TV, C)
    pos_shape: tuple  # (MAXPOS, C)


def _check_ids(name, ids, limit):
    if ids.size and (ids.min() < 0 or ids.max() >= limit):
        bad = ids[(ids < 0) | (ids >= limit)].flat[0]
        raise ValueError(f"{name} contains {int(bad)}, outside [0, {limit}) (table size {limit})")


def embedding_forward(input_ids, segment_ids, tok_emb, seg_emb, pos_emb):
    """The sum of the three lookups, before LayerNorm (docs/bert-notes.md §4.3).

    Shapes: input_ids, segment_ids (B, T) int; tok_emb (V, C); seg_emb (TV, C);
    pos_emb (MAXPOS, C) -> out (B, T, C). Positions are 0..T-1.
    """
    B, T = input_ids.shape
    if segment_ids.shape != (B, T):
        raise ValueError(f"segment_ids has shape {segment_ids.shape}, expected {(B, T)} like input_ids")
    if T > pos_emb.shape[0]:
        raise ValueError(f"sequence length {T} exceeds max_position_embeddings {pos_emb.shape[0]}")
    _check_ids("input_ids", input_ids, tok_emb.shape[0])
    _check_ids("segment_ids", segment_ids, seg_emb.shape[0])
    out = tok_emb[input_ids] + seg_emb[segment_ids] + pos_emb[:T]  # (B, T, C)
    cache = EmbeddingCache(input_ids, segment_ids, tok_emb.shape, seg_emb.shape, pos_emb.shape)
    return out, cache


def embedding_backward(dout, cache: EmbeddingCache):
    """Returns dtok_emb (V, C), dseg_emb (TV, C), dpos_emb (MAXPOS, C).

    Repeated ids must accumulate, so the scatter uses np.add.at (fancy-index `+=` would keep
    only the last write for a repeated id).
    """
    input_ids, segment_ids, tok_shape, seg_shape, pos_shape = cache
    T = input_ids.shape[1]
    C = dout.shape[-1]
    dtok = np.zeros(tok_shape, dtype=dout.dtype)  # (V, C)
    np.add.at(dtok, input_ids.reshape(-1), dout.reshape(-1, C))
    dseg = np.zeros(seg_shape, dtype=dout.dtype)  # (TV, C)
    np.add.at(dseg, segment_ids.reshape(-1), dout.reshape(-1, C))
    dpos = np.zeros(pos_shape, dtype=dout.dtype)  # (MAXPOS, C)
    dpos[:T] = dout.sum(axis=0)  # every sequence uses positions 0..T-1 once
    return dtok, dseg, dpos


# ---------------------------------------------------------------------------------------------
# layernorm over the last axis: out = w * (x - mean) / sqrt(var + eps) + b   (w, b are gamma, beta)

class LayerNormCache(NamedTuple):
    norm: np.ndarray  # (..., C) (x - mean) * rstd
    w: np.ndarray  # (C,)
    rstd: np.ndarray  # (..., 1) 1 / sqrt(var + eps)


def layernorm_forward(x, w, b, eps=1e-12):
    """Shapes: x (..., C), w (C,), b (C,) -> out (..., C). Population variance, eps 1e-12."""
    mean = x.mean(axis=-1, keepdims=True)  # (..., 1)
    xc = x - mean  # (..., C)
    var = (xc * xc).mean(axis=-1, keepdims=True)  # (..., 1)
    rstd = 1.0 / np.sqrt(var + eps)  # (..., 1)
    norm = xc * rstd  # (..., C)
    out = norm * w + b  # (..., C)
    return out, LayerNormCache(norm, w, rstd.astype(x.dtype, copy=False))


def layernorm_backward(dout, cache: LayerNormCache):
    """Returns dx (..., C), dw (C,), db (C,).

    With g = dout * w:  dx = rstd * (g - mean(g) - norm * mean(g * norm)).
    The cache keeps `norm` and `rstd` rather than x, mean: that is all backward needs.
    """
    norm, w, rstd = cache
    C = norm.shape[-1]
    db = dout.reshape(-1, C).sum(axis=0)  # (C,)
    dw = (dout * norm).reshape(-1, C).sum(axis=0)  # (C,)
    g = dout * w  # (..., C)
    dx = rstd * (g - g.mean(axis=-1, keepdims=True) - norm * (g * norm).mean(axis=-1, keepdims=True))  # (..., C)
    return dx, dw, db


# ---------------------------------------------------------------------------------------------
# GELU. hidden_act="gelu" means the exact form x * Phi(x) = 0.5 x (1 + erf(x / sqrt(2)));
# approximate="tanh" gives the tanh form ("gelu_new" in transformers). See docs/bert-notes.md §4.8.

def _erf(z):
    """erf elementwise, in z's dtype. NumPy has no erf: this is Python's math.erf (the C library's)
    on each element, in float64. One Python call per element is slow on big arrays, which is why
    the Numba backend has its own (kernels.vector_math._erf_gauss32); here it is just a math function."""
    return np.vectorize(math.erf, otypes=[np.float64])(z).astype(z.dtype, copy=False)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_C = 0.044715


class GeluCache(NamedTuple):
    x: np.ndarray  # (...,) the input; backward recomputes Phi(x) or tanh(u) from it
    approximate: str  # "none" (erf) or "tanh"


def gelu_forward(x, approximate="none"):
    """Shapes: x (...) -> out (...). approximate: "none" (exact erf) or "tanh"."""
    if approximate == "none":
        out = 0.5 * x * (1.0 + _erf(x * (1.0 / math.sqrt(2.0))))  # (...)
    elif approximate == "tanh":
        u = _SQRT_2_OVER_PI * (x + _GELU_C * x**3)  # (...)
        out = 0.5 * x * (1.0 + np.tanh(u))  # (...)
    else:
        raise ValueError(f"approximate={approximate!r}: expected 'none' (erf) or 'tanh'")
    return out.astype(x.dtype, copy=False), GeluCache(x, approximate)


def gelu_backward(dout, cache: GeluCache):
    """Returns dx. Exact: Phi(x) + x phi(x). Tanh: 0.5(1+t) + 0.5 x (1-t^2) du/dx."""
    x, approximate = cache
    if approximate == "none":
        cdf = 0.5 * (1.0 + _erf(x * (1.0 / math.sqrt(2.0))))  # (...) Phi(x)
        pdf = np.exp(-0.5 * x * x) * (1.0 / math.sqrt(2.0 * math.pi))  # (...) phi(x)
        dx = dout * (cdf + x * pdf)  # (...)
    else:
        u = _SQRT_2_OVER_PI * (x + _GELU_C * x**3)  # (...)
        t = np.tanh(u)  # (...)
        du = _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_C * x * x)  # (...)
        dx = dout * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du)  # (...)
    return dx.astype(dout.dtype, copy=False)


# ---------------------------------------------------------------------------------------------
# dropout (inverted): keep with probability 1 - p and scale kept values by 1 / (1 - p)
#
# The mask: which elements are kept is decided by the random stream of minibert/philox.py (one
# key drawn from `rng` per call, 32 random bits per element), so that the Numba backend, which
# makes its masks inside its parallel kernels, drops exactly the same elements.

class DropoutCache(NamedTuple):
    mask: np.ndarray | None  # (...) 0 or 1/(1-p); None when p == 0 (identity)


def dropout_forward(x, p, rng):
    """Shapes: x (...) -> out (...). `rng` is a np.random.Generator; p == 0 is the identity."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability {p} must be in [0, 1)")
    if p == 0.0:
        return x, DropoutCache(None)
    mask = philox.dropout_mask(philox.draw_dropout_key(rng), x.shape, p, x.dtype)  # (...) 0 or 1/(1-p)
    return x * mask, DropoutCache(mask)


def dropout_backward(dout, cache: DropoutCache):
    """Returns dx: the same mask applied to the upstream gradient."""
    return dout if cache.mask is None else dout * cache.mask


# ---------------------------------------------------------------------------------------------
# scaled dot-product attention with a key padding mask
#   preatt = q @ k^T / sqrt(HS) + (1 - mask) * MASK_VALUE ; att = softmax(preatt) ; out = att @ v
# and, with causal=True, a left-to-right (causal) mask as well: query i sees key j only if j <= i
#   preatt = q @ k^T / sqrt(HS) + (1 - visible) * MASK_VALUE,  visible[b, i, j] = mask[b, j] * (j <= i)

class AttentionCache(NamedTuple):
    q: np.ndarray  # (B, NH, T, HS)
    k: np.ndarray  # (B, NH, T, HS)
    v: np.ndarray  # (B, NH, T, HS)
    att: np.ndarray  # (B, NH, T, T) softmax probabilities (before dropout)
    drop: np.ndarray | None  # (B, NH, T, T) dropout mask on att, or None
    scale: float  # 1 / sqrt(HS)


def causal_visible(attn_mask):
    """The keys each query may see under a causal mask: key j is visible to query i if it is a
    real token and j <= i (no looking ahead). Shapes: attn_mask (B, T) -> visible (B, 1, T, T).

    >>> causal_visible(np.array([[1, 1, 0]]))[0, 0].astype(int).tolist()
    [[1, 0, 0], [1, 1, 0], [1, 1, 0]]
    """
    T = attn_mask.shape[-1]
    left = np.tril(np.ones((T, T), dtype=attn_mask.dtype))  # (T, T) left[i, j] = 1 if j <= i
    return attn_mask[:, None, None, :] * left  # (B, 1, 1, T) * (T, T) -> (B, 1, T, T)


def attention_forward(q, k, v, attn_mask, dropout_p=0.0, rng=None, causal=False):
    """Shapes: q, k, v (B, NH, T, HS); attn_mask (B, T) 1 = real token, 0 = padding
    -> out (B, NH, T, HS). Padded keys get no weight; padded query rows are still computed.
    Dropout (p > 0, needs `rng`) drops individual attention weights, as BERT does.
    causal=True adds the left-to-right mask of a GPT-style language model: query i attends to
    the real keys j <= i only, so out[:, :, i] depends on positions 0..i alone. A key that is
    both padding and in the future gets MASK_VALUE once, as one that is only either. (A row
    with no visible key at all, in a sequence that starts with padding, spreads its weight over
    every key, as an all-padding row does without the causal mask; the model rejects such input.)
    """
    B, NH, T, HS = q.shape
    if k.shape != q.shape or v.shape != q.shape:
        raise ValueError(f"q, k, v shapes differ: {q.shape}, {k.shape}, {v.shape}")
    if attn_mask.shape != (B, T):
        raise ValueError(f"attn_mask has shape {attn_mask.shape}, expected {(B, T)}")
    scale = 1.0 / math.sqrt(HS)
    if causal:
        adder = ((1.0 - causal_visible(attn_mask)) * MASK_VALUE).astype(q.dtype)  # (B, 1, T, T)
    else:
        adder = ((1.0 - attn_mask) * MASK_VALUE).astype(q.dtype)[:, None, None, :]  # (B, 1, 1, T)
    preatt = (q @ k.swapaxes(-1, -2)) * q.dtype.type(scale) + adder  # (B, NH, T, T)
    preatt = preatt - preatt.max(axis=-1, keepdims=True)  # (B, NH, T, T) for a stable exp
    e = np.exp(preatt)  # (B, NH, T, T)
    att = e / e.sum(axis=-1, keepdims=True)  # (B, NH, T, T)
    drop = None
    if dropout_p > 0.0:
        att_d, drop_cache = dropout_forward(att, dropout_p, rng)  # (B, NH, T, T)
        drop = drop_cache.mask
    else:
        att_d = att
    out = att_d @ v  # (B, NH, T, T) @ (B, NH, T, HS) -> (B, NH, T, HS)
    return out, AttentionCache(q, k, v, att, drop, scale)


def attention_backward(dout, cache: AttentionCache):
    """Returns dq, dk, dv, each (B, NH, T, HS).

    Softmax backward needs only the probabilities: dpreatt = att * (datt - sum(datt * att)).
    Masked keys need no special case, padded ones nor (causal=True) future ones: the mask is a
    constant added to preatt (no gradient of its own), and their att is exactly 0 (exp of
    about MASK_VALUE underflows), so their dpreatt is 0 and no gradient flows from query i into
    the k and v of a key it could not see. The same backward serves both masks.
    """
    q, k, v, att, drop, scale = cache
    att_d = att if drop is None else att * drop  # (B, NH, T, T) what multiplied v
    # forward was: out = att_d @ v
    dv = att_d.swapaxes(-1, -2) @ dout  # (B, NH, T, T) @ (B, NH, T, HS) -> (B, NH, T, HS)
    datt = dout @ v.swapaxes(-1, -2)  # (B, NH, T, HS) @ (B, NH, HS, T) -> (B, NH, T, T)
    if drop is not None:
        datt = datt * drop  # (B, NH, T, T) forward was: att_d = att * drop
    # forward was: att = softmax(preatt)
    dpreatt = att * (datt - (datt * att).sum(axis=-1, keepdims=True))  # (B, NH, T, T)
    # forward was: preatt = q @ k^T * scale + adder
    dpreatt = dpreatt * q.dtype.type(scale)  # (B, NH, T, T)
    dq = dpreatt @ k  # (B, NH, T, HS)
    dk = dpreatt.swapaxes(-1, -2) @ q  # (B, NH, T, HS)
    return dq, dk, dv


# ---------------------------------------------------------------------------------------------
# head split / merge: (B, T, C) <-> (B, NH, T, HS). Pure reshapes; backward is the inverse.

def split_heads(x, num_heads):
    """(B, T, C) -> (B, NH, T, HS)."""
    B, T, C = x.shape
    return x.reshape(B, T, num_heads, C // num_heads).transpose(0, 2, 1, 3)


def merge_heads(x):
    """(B, NH, T, HS) -> (B, T, C)."""
    B, NH, T, HS = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, T, NH * HS)


def merge_qkv(dq, dk, dv):
    """3 x (B, NH, T, HS) -> (B, T, 3C): the heads merged, side by side (the qkv projection's layout)."""
    return np.concatenate([merge_heads(t) for t in (dq, dk, dv)], axis=-1)


# ---------------------------------------------------------------------------------------------
# attention on packed rows: the unpadded encoder (model.encoder_forward_unpadded) keeps only the
# N real tokens of a batch, as rows (N, 3C) of the qkv projection; `keep` (N,) holds their flat
# positions b * T + t in the (B, T) grid. Here: onto the grid (zeros at padding), split heads,
# attention_forward, merge heads, back to rows. minibert.kernels runs the same math on the rows
# themselves, head by head, without the grid copies.

class PackedAttentionCache(NamedTuple):
    attn: AttentionCache  # the grid attention's cache
    keep: np.ndarray  # (N,) flat positions b * T + t of the rows
    grid: tuple  # (B, T)


def attention_packed_forward(qkv, keep, grid, attn_mask, num_heads, dropout_p=0.0, rng=None, causal=False):
    """Shapes: qkv (N, 3C) rows of the real tokens at flat positions keep (N,) of the grid (B, T);
    attn_mask (B, T) -> out (N, C): attention_forward's output at those positions, and a
    PackedAttentionCache. The same dropout masks as attention_forward on the grid."""
    B, T = grid
    x = np.zeros((B * T, qkv.shape[-1]), dtype=qkv.dtype)  # (B*T, 3C) zeros at padding
    x[keep] = qkv
    q, k, v = (split_heads(t, num_heads) for t in np.split(x.reshape(B, T, -1), 3, axis=-1))  # 3 x (B, NH, T, HS)
    out, cache = attention_forward(q, k, v, attn_mask, dropout_p, rng, causal)  # (B, NH, T, HS)
    return merge_heads(out).reshape(B * T, -1)[keep], PackedAttentionCache(cache, keep, grid)  # (N, C)


def attention_packed_backward(dout, cache: PackedAttentionCache):
    """Mirror of attention_packed_forward: dout (N, C) -> dqkv (N, 3C)."""
    attn, keep, (B, T) = cache
    d = np.zeros((B * T, dout.shape[-1]), dtype=dout.dtype)  # (B*T, C)
    d[keep] = dout
    dq, dk, dv = attention_backward(split_heads(d.reshape(B, T, -1), attn.q.shape[1]), attn)  # 3 x (B, NH, T, HS)
    return merge_qkv(dq, dk, dv).reshape(B * T, -1)[keep]  # (N, 3C)


# ---------------------------------------------------------------------------------------------
# softmax cross-entropy, mean over the targets that are not `ignore_index`

class CrossEntropyCache(NamedTuple):
    probs: np.ndarray  # (N, K) softmax of the logits
    targets: np.ndarray  # (N,) with ignored entries set to 0
    weight: np.ndarray  # (N,) 1/n for counted targets (w[t] / sum of w[t] with class weights), 0 for ignored ones
    shape: tuple  # the logits' original shape (..., K)


def target_weights(valid, t, class_weights, dtype):
    """Each row's share of the loss (N,): 1/n for the n counted targets; with class_weights (K,)
    w[t] / sum of w[t] over them, torch's CrossEntropyLoss(weight=w), so a batch of one class has
    the plain mean and only the mix of classes is reweighted. 0 for ignored rows."""
    if class_weights is None:
        return valid.astype(dtype) / max(int(valid.sum()), 1)
    w = np.where(valid, np.asarray(class_weights, dtype=dtype)[t], 0)  # (N,) each row's class weight
    return w / max(w.sum(), np.finfo(dtype).tiny)


def cross_entropy_forward(logits, targets, ignore_index=-100, class_weights=None):
    """Shapes: logits (..., K), targets (...) int, class_weights (K,) or None -> loss (scalar,
    logits' dtype).

    Mean of -log softmax(logits)[target] over the targets != ignore_index (0 if there are none);
    with class_weights, the mean weighted by each target's class weight (`target_weights`).
    """
    K = logits.shape[-1]
    if targets.shape != logits.shape[:-1]:
        raise ValueError(f"targets have shape {targets.shape}, expected {logits.shape[:-1]}")
    z = logits.reshape(-1, K)  # (N, K)
    t = targets.reshape(-1)  # (N,)
    valid = t != ignore_index  # (N,)
    bad = valid & ((t < 0) | (t >= K))
    if bad.any():
        raise ValueError(f"target {int(t[bad][0])} is outside [0, {K}) (and is not ignore_index {ignore_index})")
    check_class_weights(class_weights, K)
    t = np.where(valid, t, 0)  # (N,)
    z = z - z.max(axis=-1, keepdims=True)  # (N, K)
    e = np.exp(z)  # (N, K)
    s = e.sum(axis=-1, keepdims=True)  # (N, 1)
    probs = e / s  # (N, K)
    logp_t = z[np.arange(z.shape[0]), t] - np.log(s[:, 0])  # (N,) log p(target)
    weight = target_weights(valid, t, class_weights, logits.dtype)  # (N,)
    loss = -(logp_t * weight).sum()  # ()
    return logits.dtype.type(loss), CrossEntropyCache(probs, t, weight, logits.shape)


def check_class_weights(class_weights, K: int) -> None:
    if class_weights is not None and np.shape(class_weights) != (K,):
        raise ValueError(f"class_weights have shape {np.shape(class_weights)}, expected ({K},): one per class")


def cross_entropy_backward(dloss, cache: CrossEntropyCache):
    """Returns dlogits (..., K) = dloss * weight * (probs - onehot(target))."""
    probs, t, weight, shape = cache
    dz = probs.copy()  # (N, K)
    dz[np.arange(dz.shape[0]), t] -= 1.0
    dz *= (weight * dloss)[:, None]  # (N, K)
    return dz.reshape(shape)
