"""XLNet (Yang et al., 2019) at lesson scale: a permutation language model with two-stream attention.

The idea in four lines:
  1. per sequence, sample a factorisation order z (a permutation of its real positions) and
     predict the tokens in that order: p(x) = prod_t p(x_{z_t} | x_{z_<t});
  2. nothing is moved: the order is expressed as attention masks over the sequence as it is;
  3. two streams run through the same blocks (same weights): the CONTENT stream h_i sees the
     tokens up to and including z-step of i (itself and earlier in the order), the QUERY stream
     g_i sees the content of the tokens strictly earlier in the order and knows only its own
     POSITION, not its token; the prediction of x_i reads g_i at the last layer;
  4. partial prediction: only the last 1/K of the order is predicted (K = pred_k = 6, the
     paper's value for its base models), so every target has most of the sequence as context.

Choices of this lesson-scale version (docs/family.md "XLNet" says the same):
  - absolute position embeddings, added to the tokens (content stream) and to a learned query
    vector `query_emb` (query stream, g_i^(0) = LN(query_emb + pos_emb[i])); no relative
    positional encoding, no segment recurrence (Transformer-XL memory), no segments;
  - the "pure" order of the paper's equations: a non-target token also sees only its own
    prefix of the order (the released code lets the non-targets see each other);
  - BERT's post-LN block (model.block_forward's layout and parameter names); the two streams
    share every weight, so each weight's gradient is the sum of the two streams' parts;
  - the query stream is computed at every position (the released code computes it at the
    targets only); the head reads it at the targets;
  - no dropout.

A row that may see no key at all (the first token of the order in the query stream, padding)
reads nothing: its attention weights are all 0 and its output is 0 (masked_attention_forward).

Shape legend (as in model.py):
    B   batch size      T   sequence length     C   hidden size     NH  heads    HS  head size
    V   vocabulary      FF  intermediate size   L   layers          M   targets (predicted tokens)

Parameter names (a flat dict; weights are (C_in, C_out), PyTorch stores them transposed):
    tok_emb (V, C)  pos_emb (MAXPOS, C)  query_emb (C,)  emb_ln.w/b (C,)   (LN shared by both streams)
    h{l}.*   BERT's block names and shapes (model.py), used by both streams
    mlm.dense.w (C, C) .b  mlm.ln.w/b  mlm.bias (V,)   decoder tied to tok_emb (model.mlm_transform_forward/backward)
"""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from minibert import layers
from minibert.backend import get_ops
from minibert import checkpoint
from minibert.io import atomic, tensorfile
from minibert.layers import MASK_VALUE
from minibert.model import (ACTIVATIONS, BertConfig, LossGradsMetrics, check_params, init_from_shapes,
                            mlm_transform_backward, mlm_transform_forward)
from minibert.model import param_shapes as bert_param_shapes

MODEL_TYPE = "minibert-xlnet"  # config.json's model_type: not a transformers XLNet checkpoint
BATCH_KEYS = ("input_ids", "input_mask", "perm_rank", "target_mask")


@dataclasses.dataclass
class XLNetConfig:
    vocab_size: int = 8192
    hidden_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 2
    intermediate_size: int = 512
    hidden_act: str = "gelu"
    max_position_embeddings: int = 512
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pred_k: int = 6  # partial prediction: the last 1/K of each order is predicted

    def __post_init__(self):
        self.encoder_config()  # BertConfig checks the fields the two share, naming the bad one
        if not isinstance(self.pred_k, (int, np.integer)) or self.pred_k < 1:
            raise ValueError(f"pred_k={self.pred_k!r} must be a positive integer (predict the last 1/K of the order)")

    def encoder_config(self) -> BertConfig:
        names = {f.name for f in dataclasses.fields(BertConfig)}
        return BertConfig(**{k: v for k, v in dataclasses.asdict(self).items() if k in names},
                          hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, type_vocab_size=1)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "XLNetConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def param_shapes(cfg: XLNetConfig) -> dict[str, tuple]:
    C, V = cfg.hidden_size, cfg.vocab_size
    shapes = {"tok_emb": (V, C), "pos_emb": (cfg.max_position_embeddings, C), "query_emb": (C,),
              "emb_ln.w": (C,), "emb_ln.b": (C,)}
    bert = bert_param_shapes(cfg.encoder_config())
    shapes.update({k: s for k, s in bert.items() if k.startswith("h") or k.startswith("mlm.")})
    return shapes


def init_params(cfg: XLNetConfig, seed: int = 0, dtype=np.float32) -> dict[str, np.ndarray]:
    """As BERT's: truncated normal(initializer_range) for matrices, tables and query_emb, zero
    biases, LayerNorm 1/0."""
    return init_from_shapes(param_shapes(cfg), cfg.initializer_range, seed, dtype)


# ---------------------------------------------------------------------------------------------
# 1. factorisation orders and the two masks

def sample_orders(input_mask, rng: np.random.Generator) -> np.ndarray:
    """A random factorisation order per sequence, as ranks: rank[b, t] = the step of the order at
    which position t is predicted (0 first). The real tokens get 0..n-1 in a random order;
    padding gets T (after everything; the masks exclude it anyway). -> (B, T) int64."""
    B, T = input_mask.shape
    rank = np.full((B, T), T, dtype=np.int64)  # (B, T)
    for b in range(B):
        real = np.flatnonzero(input_mask[b])  # (n,)
        rank[b, real] = rng.permutation(real.size)
    return rank


def partial_targets(rank, input_mask, pred_k: int) -> np.ndarray:
    """Partial prediction: the last n // K real tokens of each order are predicted (at least 1, and
    never the first of the order, which would see no context). -> (B, T) bool.

    >>> partial_targets(np.array([[3, 0, 5, 1, 2, 4, 6]]), np.ones((1, 7)), 3).astype(int).tolist()
    [[0, 0, 1, 0, 0, 0, 1]]
    """
    n = (input_mask > 0).sum(axis=1)  # (B,) real tokens
    n_pred = np.minimum(np.maximum(n // pred_k, 1), n - 1)  # (B,) 0 when n <= 1
    return (input_mask > 0) & (rank >= (n - n_pred)[:, None])  # (B, T)


def two_stream_masks(rank, input_mask) -> tuple[np.ndarray, np.ndarray]:
    """The order as attention masks: -> content_visible, query_visible, (B, T, T) bool, entry
    [b, i, j] True when query position i may read key position j.

    content stream: j is real and comes in the order no later than i (i sees itself);
    query stream:   j is real and comes strictly earlier than i (i never sees its own content).
    Padding rows see nothing and padding keys are seen by no one.
    """
    real = input_mask > 0  # (B, T)
    before = rank[:, None, :] < rank[:, :, None]  # (B, T, T) [b, i, j]: j is earlier in the order than i
    pair = real[:, :, None] & real[:, None, :]  # (B, T, T) both real
    query = before & pair  # (B, T, T)
    content = (before | np.eye(rank.shape[1], dtype=bool)) & pair  # (B, T, T)
    return content, query


# ---------------------------------------------------------------------------------------------
# 2. attention with an arbitrary (B, T, T) mask; a row with no visible key reads nothing
#   preatt = q @ k^T / sqrt(HS) + (1 - visible) * MASK_VALUE
#   att = exp(preatt - max) * visible / (its row sum, or 1 when the row sees nothing) ; out = att @ v

class MaskedAttentionCache(NamedTuple):
    q: np.ndarray  # (B, NH, T, HS)
    k: np.ndarray  # (B, NH, T, HS)
    v: np.ndarray  # (B, NH, T, HS)
    att: np.ndarray  # (B, NH, T, T) the weights; rows that see nothing are 0
    scale: float  # 1 / sqrt(HS)


def masked_attention_forward(q, k, v, visible):
    """Shapes: q, k, v (B, NH, T, HS); visible (B, T, T) bool -> out (B, NH, T, HS), cache.

    Multiplying exp by `visible` changes nothing where a row sees some key (exp(MASK_VALUE)
    underflows to 0 anyway) and makes a row that sees none all 0 instead of uniform over every
    key: without it, the first token of the order would read the whole sequence, itself included."""
    B, NH, T, HS = q.shape
    if visible.shape != (B, T, T):
        raise ValueError(f"visible has shape {visible.shape}, expected {(B, T, T)}")
    scale = 1.0 / math.sqrt(HS)
    vis = visible[:, None].astype(q.dtype)  # (B, 1, T, T)
    preatt = (q @ k.swapaxes(-1, -2)) * q.dtype.type(scale) + (1.0 - vis) * q.dtype.type(MASK_VALUE)  # (B, NH, T, T)
    preatt = preatt - preatt.max(axis=-1, keepdims=True)  # (B, NH, T, T) for a stable exp
    e = np.exp(preatt) * vis  # (B, NH, T, T)
    s = e.sum(axis=-1, keepdims=True)  # (B, NH, T, 1)
    att = e / np.where(s > 0, s, 1.0)  # (B, NH, T, T)
    out = att @ v  # (B, NH, T, T) @ (B, NH, T, HS) -> (B, NH, T, HS)
    return out, MaskedAttentionCache(q, k, v, att, scale)


def masked_attention_backward(dout, cache: MaskedAttentionCache):
    """Returns dq, dk, dv, each (B, NH, T, HS). As layers.attention_backward: an invisible key
    has att 0, so its dpreatt is 0; a row that sees nothing has att 0 everywhere and passes no
    gradient at all."""
    q, k, v, att, scale = cache
    # forward was: out = att @ v
    dv = att.swapaxes(-1, -2) @ dout  # (B, NH, T, T) @ (B, NH, T, HS) -> (B, NH, T, HS)
    datt = dout @ v.swapaxes(-1, -2)  # (B, NH, T, HS) @ (B, NH, HS, T) -> (B, NH, T, T)
    # forward was: att = softmax over the visible keys
    dpreatt = att * (datt - (datt * att).sum(axis=-1, keepdims=True))  # (B, NH, T, T)
    # forward was: preatt = q @ k^T * scale + constant
    dpreatt = dpreatt * q.dtype.type(scale)  # (B, NH, T, T)
    dq = dpreatt @ k  # (B, NH, T, HS)
    dk = dpreatt.swapaxes(-1, -2) @ q  # (B, NH, T, HS)
    return dq, dk, dv


# ---------------------------------------------------------------------------------------------
# 3. two-stream self-attention: one set of weights, queries from both streams, keys and values
#    from the content stream only
#   content: a_h = Attn(q = h Wq, k = h Wk, v = h Wv; content_visible) Wo + bo
#   query:   a_g = Attn(q = g Wq, k = h Wk, v = h Wv; query_visible)   Wo + bo

class TwoStreamAttentionCache(NamedTuple):
    qkv: Any  # linear cache, h (B, T, C) -> (B, T, 3C)
    q_g: Any  # linear cache, g (B, T, C) -> (B, T, C) with Wq = w_qkv[:, :C]
    content: MaskedAttentionCache
    query: MaskedAttentionCache
    out_h: Any  # linear caches of the output projection, one per stream
    out_g: Any


def two_stream_attention_forward(h, g, w_qkv, b_qkv, w_out, b_out, content_visible, query_visible, num_heads,
                                 ops=layers):
    """Shapes: h, g (B, T, C); w_qkv (C, 3C), b_qkv (3C,), w_out (C, C), b_out (C,); the masks
    (B, T, T) -> (a_h, a_g) each (B, T, C), cache. The query stream's keys and values are the
    content stream's: g_i learns about the tokens it may see only through h."""
    C = h.shape[-1]
    qkv, c_qkv = ops.linear_forward(h, w_qkv, b_qkv)  # (B, T, 3C)
    q_h, k, v = np.split(qkv, 3, axis=-1)  # 3 x (B, T, C)
    q_g, c_qg = ops.linear_forward(g, w_qkv[:, :C], b_qkv[:C])  # (B, T, C) the same Wq, bq
    q_h, k, v, q_g = (layers.split_heads(t, num_heads) for t in (q_h, k, v, q_g))  # (B, T, C) -> (B, NH, T, HS)
    o_h, c_content = masked_attention_forward(q_h, k, v, content_visible)  # (B, NH, T, HS)
    o_g, c_query = masked_attention_forward(q_g, k, v, query_visible)  # (B, NH, T, HS)
    a_h, c_oh = ops.linear_forward(layers.merge_heads(o_h), w_out, b_out)  # (B, T, C)
    a_g, c_og = ops.linear_forward(layers.merge_heads(o_g), w_out, b_out)  # (B, T, C)
    return (a_h, a_g), TwoStreamAttentionCache(c_qkv, c_qg, c_content, c_query, c_oh, c_og)


def two_stream_attention_backward(da_h, da_g, cache: TwoStreamAttentionCache, num_heads, ops=layers):
    """Mirror of two_stream_attention_forward -> dh, dg, dw_qkv, db_qkv, dw_out, db_out.
    Every weight is used by both streams, so its gradient is the sum of the two parts; k and v
    are read by both attentions, so their gradients add up too."""
    # forward was: a = merge(o) @ w_out + b_out, for each stream
    do_h, dw_out, db_out = ops.linear_backward(da_h, cache.out_h)  # (B, T, C)
    do_g, dw_out_g, db_out_g = ops.linear_backward(da_g, cache.out_g)  # (B, T, C)
    dw_out, db_out = dw_out + dw_out_g, db_out + db_out_g  # gradients add up at forks (shared Wo)
    do_h, do_g = layers.split_heads(do_h, num_heads), layers.split_heads(do_g, num_heads)  # (B, NH, T, HS)
    dq_h, dk, dv = masked_attention_backward(do_h, cache.content)  # (B, NH, T, HS) each
    dq_g, dk_g, dv_g = masked_attention_backward(do_g, cache.query)  # (B, NH, T, HS) each
    dk, dv = dk + dk_g, dv + dv_g  # gradients add up at forks (both streams read h's k and v)
    # forward was: q_h, k, v = split(h @ w_qkv + b_qkv)
    dqkv = np.concatenate([layers.merge_heads(t) for t in (dq_h, dk, dv)], axis=-1)  # (B, T, 3C)
    dh, dw_qkv, db_qkv = ops.linear_backward(dqkv, cache.qkv)  # (B, T, C)
    # forward was: q_g = g @ w_qkv[:, :C] + b_qkv[:C]
    dg, dwq_g, dbq_g = ops.linear_backward(layers.merge_heads(dq_g), cache.q_g)  # (B, T, C)
    C = dg.shape[-1]
    dw_qkv[:, :C] += dwq_g  # gradients add up at forks (shared Wq)
    db_qkv[:C] += dbq_g
    return dh, dg, dw_qkv, db_qkv, dw_out, db_out


# ---------------------------------------------------------------------------------------------
# 4. the block: two-stream attention, then BERT's residual + LayerNorm and FFN on each stream

class StreamCache(NamedTuple):
    ln1: Any
    ffn_in: Any
    gelu: Any
    ffn_out: Any
    ln2: Any


class TwoStreamBlockCache(NamedTuple):
    attn: TwoStreamAttentionCache
    h: StreamCache
    g: StreamCache


def _stream_forward(params, cfg, l, x, a, ops):
    """The rest of a post-LN block for one stream: x1 = LN(a + x); out = LN(FFN(x1) + x1)."""
    p, eps = f"h{l}.", cfg.layer_norm_eps
    x1, c_ln1 = ops.layernorm_forward(a + x, params[p + "ln1.w"], params[p + "ln1.b"], eps)  # (B, T, C)
    f, c_in = ops.linear_forward(x1, params[p + "ffn.in.w"], params[p + "ffn.in.b"])  # (B, T, FF)
    f, c_gelu = ops.gelu_forward(f, ACTIVATIONS[cfg.hidden_act])  # (B, T, FF)
    f, c_out = ops.linear_forward(f, params[p + "ffn.out.w"], params[p + "ffn.out.b"])  # (B, T, C)
    out, c_ln2 = ops.layernorm_forward(f + x1, params[p + "ln2.w"], params[p + "ln2.b"], eps)  # (B, T, C)
    return out, StreamCache(c_ln1, c_in, c_gelu, c_out, c_ln2)


def _add(grads, name, g):
    grads[name] = grads[name] + g if name in grads else g  # the two streams share the weight


def _stream_backward(dout, c: StreamCache, l, grads, ops):
    """Mirror of _stream_forward: -> (dx, da), adding this stream's part to the block's grads."""
    p = f"h{l}."
    # forward was: out = LN(f + x1)
    dsum, dw, db = ops.layernorm_backward(dout, c.ln2)  # (B, T, C)
    _add(grads, p + "ln2.w", dw)
    _add(grads, p + "ln2.b", db)
    df, dw, db = ops.linear_backward(dsum, c.ffn_out)  # (B, T, FF)
    _add(grads, p + "ffn.out.w", dw)
    _add(grads, p + "ffn.out.b", db)
    df = ops.gelu_backward(df, c.gelu)  # (B, T, FF)
    dx1, dw, db = ops.linear_backward(df, c.ffn_in)  # (B, T, C)
    _add(grads, p + "ffn.in.w", dw)
    _add(grads, p + "ffn.in.b", db)
    dx1 = dx1 + dsum  # gradients add up at forks (x1 feeds the FFN and the residual)
    # forward was: x1 = LN(a + x)
    dsum, dw, db = ops.layernorm_backward(dx1, c.ln1)  # (B, T, C)
    _add(grads, p + "ln1.w", dw)
    _add(grads, p + "ln1.b", db)
    return dsum, dsum  # d(x) through the residual, d(a)


def two_stream_block_forward(params, cfg, l, h, g, content_visible, query_visible, ops=layers):
    """(h, g) (B, T, C) each -> (h, g) of the next layer, cache."""
    p = f"h{l}."
    (a_h, a_g), c_att = two_stream_attention_forward(h, g, params[p + "attn.qkv.w"], params[p + "attn.qkv.b"],
                                                     params[p + "attn.out.w"], params[p + "attn.out.b"],
                                                     content_visible, query_visible, cfg.num_attention_heads, ops)
    h, c_h = _stream_forward(params, cfg, l, h, a_h, ops)  # (B, T, C)
    g, c_g = _stream_forward(params, cfg, l, g, a_g, ops)  # (B, T, C)
    return (h, g), TwoStreamBlockCache(c_att, c_h, c_g)


def two_stream_block_backward(dh, dg, c: TwoStreamBlockCache, cfg, l, grads, ops=layers):
    """Mirror of two_stream_block_forward: -> (dh, dg) of the block's inputs; adds to grads."""
    p = f"h{l}."
    dh_res, da_h = _stream_backward(dh, c.h, l, grads, ops)  # (B, T, C) each
    dg_res, da_g = _stream_backward(dg, c.g, l, grads, ops)  # (B, T, C) each
    dh_att, dg_att, dw_qkv, db_qkv, dw_out, db_out = two_stream_attention_backward(
        da_h, da_g, c.attn, cfg.num_attention_heads, ops)
    for name, grad in (("attn.qkv.w", dw_qkv), ("attn.qkv.b", db_qkv), ("attn.out.w", dw_out),
                       ("attn.out.b", db_out)):
        _add(grads, p + name, grad)
    return dh_res + dh_att, dg_res + dg_att  # gradients add up at forks (residual and attention)


# ---------------------------------------------------------------------------------------------
# 5. the model: embeddings -> L two-stream blocks -> the MLM head on the query stream at the targets

def check_batch(cfg: XLNetConfig, batch) -> tuple[np.ndarray, ...]:
    """-> ids, mask, rank, target (B, T) arrays, or a ValueError naming the problem."""
    missing = [k for k in BATCH_KEYS if k not in batch]
    if missing:
        raise ValueError(f"batch is missing {missing}; an XLNet batch has {list(BATCH_KEYS)}")
    ids = np.asarray(batch["input_ids"])
    if ids.ndim != 2 or ids.dtype.kind not in "iu":
        raise ValueError(f"input_ids must be (batch, seq_len) integers, got {ids.dtype} {ids.shape}")
    B, T = ids.shape
    if T > cfg.max_position_embeddings:
        raise ValueError(f"sequence length {T} exceeds max_position_embeddings {cfg.max_position_embeddings}")
    if ids.size and (ids.min() < 0 or ids.max() >= cfg.vocab_size):
        raise ValueError(f"input_ids holds {int(ids.max() if ids.max() >= cfg.vocab_size else ids.min())}, "
                         f"outside the vocabulary [0, {cfg.vocab_size})")
    out = [ids.astype(np.int64)]
    for name in BATCH_KEYS[1:]:
        a = np.asarray(batch[name])
        if a.shape != (B, T):
            raise ValueError(f"{name} has shape {a.shape}, expected {(B, T)} like input_ids")
        out.append(a)
    mask, rank, target = out[1] > 0, out[2].astype(np.int64), out[3] > 0
    for b in range(B):
        if not np.array_equal(np.sort(rank[b][mask[b]]), np.arange(mask[b].sum())):
            raise ValueError(f"perm_rank[{b}] is not an order of the sequence's {int(mask[b].sum())} real tokens "
                             f"(its real entries must be a permutation of 0..n-1)")
    if (target & ~mask).any():
        b, t = (int(i[0]) for i in np.nonzero(target & ~mask))
        raise ValueError(f"target_mask[{b}, {t}] marks a padding position as a target")
    first = target & (rank == 0)
    if first.any():
        b = int(np.nonzero(first)[0][0])
        raise ValueError(f"sequence {b}: the first token of the order is a target, but it has no context")
    return out[0], mask.astype(np.int64), rank, target


class XLNetCache(NamedTuple):
    ln_h: Any  # embedding LayerNorm caches, one per stream
    ln_g: Any
    emb: tuple  # (input_ids (B, T), T): what the embedding backward needs
    blocks: list  # L TwoStreamBlockCaches
    flat_pos: np.ndarray  # (M,) b * T + t of the targets
    head: Any  # model.MLMTransformCache
    ce: Any
    shape: tuple  # (B, T, C)


class XLNetMetrics(NamedTuple):
    loss: float  # mean cross-entropy over the predicted tokens
    correct: int  # argmax hits among them
    count: int  # predicted tokens

    def sums(self) -> dict:
        """{name: (sum, count)}, as the training loop logs them (loop/engine.py)."""
        return {"loss": (self.loss, 1), "acc": (self.correct, self.count)}


def xlnet_forward(params, cfg: XLNetConfig, batch, ops=layers, want_streams=False):
    """-> (loss, metrics, cache); with want_streams also the last layer's (h, g), (B, T, C) each."""
    ids, mask, rank, target = check_batch(cfg, batch)
    B, T = ids.shape
    C = cfg.hidden_size
    content_visible, query_visible = two_stream_masks(rank, mask)  # (B, T, T) each
    e = params["tok_emb"][ids] + params["pos_emb"][:T]  # (B, T, C) token + position
    q0 = np.broadcast_to(params["query_emb"] + params["pos_emb"][:T], (B, T, C))  # (B, T, C) position only
    h, c_ln_h = ops.layernorm_forward(e, params["emb_ln.w"], params["emb_ln.b"], cfg.layer_norm_eps)  # (B, T, C)
    g, c_ln_g = ops.layernorm_forward(np.ascontiguousarray(q0), params["emb_ln.w"], params["emb_ln.b"],
                                      cfg.layer_norm_eps)  # (B, T, C)
    blocks = []
    for l in range(cfg.num_hidden_layers):
        (h, g), c = two_stream_block_forward(params, cfg, l, h, g, content_visible, query_visible, ops)
        blocks.append(c)
    flat_pos = np.flatnonzero(target)  # (M,) b * T + t
    labels = ids.reshape(-1)[flat_pos]  # (M,) the tokens to predict
    logits, head = mlm_transform_forward(params, cfg, g.reshape(B * T, C)[flat_pos], ops)  # (M, V)
    loss, c_ce = ops.cross_entropy_forward(logits, labels)
    metrics = XLNetMetrics(float(loss), int((logits.argmax(-1) == labels).sum()), int(labels.size))
    cache = XLNetCache(c_ln_h, c_ln_g, (ids, T), blocks, flat_pos, head, c_ce, (B, T, C))
    return (loss, metrics, cache, (h, g)) if want_streams else (loss, metrics, cache)


def xlnet_backward(params, cfg: XLNetConfig, cache: XLNetCache, ops=layers, dloss=1.0):
    """Mirror of xlnet_forward -> grads with the keys of params."""
    B, T, C = cache.shape
    grads: dict[str, np.ndarray] = {}
    # the chain rule starts here: d(loss)/d(loss) = dloss
    dlogits = ops.cross_entropy_backward(dloss, cache.ce)  # (M, V)
    dx = mlm_transform_backward(dlogits, cache.head, grads, ops)  # (M, C); grads["tok_emb"]: the decoder's side
    # forward was: x = g.reshape(B*T, C)[flat_pos] (distinct positions)
    dg = np.zeros((B * T, C), dtype=dx.dtype)  # (B*T, C)
    dg[cache.flat_pos] = dx
    dg = dg.reshape(B, T, C)  # (B, T, C)
    dh = np.zeros_like(dg)  # (B, T, C) the last content stream feeds no loss
    for l in reversed(range(cfg.num_hidden_layers)):
        dh, dg = two_stream_block_backward(dh, dg, cache.blocks[l], cfg, l, grads, ops)  # (B, T, C) each
    # forward was: h = LN(e), g = LN(q0) with one LayerNorm
    de, dw_h, db_h = ops.layernorm_backward(dh, cache.ln_h)  # (B, T, C)
    dq0, dw_g, db_g = ops.layernorm_backward(dg, cache.ln_g)  # (B, T, C)
    grads["emb_ln.w"], grads["emb_ln.b"] = dw_h + dw_g, db_h + db_g  # gradients add up at forks
    ids, _ = cache.emb
    # forward was: e = tok_emb[ids] + pos_emb[:T]; q0 = query_emb + pos_emb[:T]
    np.add.at(grads["tok_emb"], ids.reshape(-1), de.reshape(-1, C))  # tied: embedding side added
    grads["pos_emb"] = np.zeros_like(params["pos_emb"])  # (MAXPOS, C)
    grads["pos_emb"][:T] = de.sum(axis=0) + dq0.sum(axis=0)  # both streams carry the positions
    grads["query_emb"] = dq0.sum(axis=(0, 1))  # (C,)
    return {k: grads[k] for k in params}


# ---------------------------------------------------------------------------------------------
# the model class the training step and the lesson use

class XLNetForPermutationLM:
    """Parameters + config + backend; `loss_grads_metrics(batch)` is what
    the training loop calls (train/xlnet.py's XLNetRun). A batch: input_ids, input_mask, perm_rank, target_mask
    (B, T) (sample_orders and partial_targets make the last two)."""

    def __init__(self, config: XLNetConfig, seed: int = 0, dtype=np.float32, params=None):
        self.config = config
        self.params = init_params(config, seed, dtype) if params is None else params
        check_params(self.params, param_shapes(config), "XLNetForPermutationLM")
        self.ops = get_ops()

    @property
    def num_parameters(self) -> int:
        return int(sum(p.size for p in self.params.values()))

    def loss_grads_metrics(self, batch, train: bool = False, rng=None, compute_grads: bool = True,
                           loss_weights=None) -> LossGradsMetrics:
        """(loss, grads, XLNetMetrics). No dropout: `train` and `rng` change nothing."""
        if loss_weights is not None:
            raise ValueError("XLNetForPermutationLM has no gradient accumulation (loss_weights)")
        loss, metrics, cache = xlnet_forward(self.params, self.config, batch, self.ops)
        grads = xlnet_backward(self.params, self.config, cache, self.ops) if compute_grads else None
        return LossGradsMetrics(float(loss), grads, metrics)

    def loss_and_grads(self, batch, compute_grads: bool = True):
        loss, grads, _ = self.loss_grads_metrics(batch, compute_grads=compute_grads)
        return loss, grads

    def save_pretrained(self, directory: str | Path) -> Path:
        """config.json (model_type minibert-xlnet) and model.safetensors, each written atomically."""
        directory = Path(directory)
        d = {"model_type": MODEL_TYPE, **self.config.to_dict()}
        atomic.write_text_atomic(directory / checkpoint.CONFIG_NAME, json.dumps(d, indent=2) + "\n")
        tensorfile.save_tensors_atomic(self.params, directory / checkpoint.WEIGHTS_NAME, {"format": "np"})
        return directory

    @classmethod
    def from_pretrained(cls, directory: str | Path, dtype=np.float32) -> "XLNetForPermutationLM":
        directory = Path(directory)
        d = checkpoint.read_config_json(directory / checkpoint.CONFIG_NAME)
        if d.get("model_type") != MODEL_TYPE:
            raise ValueError(f"{directory / checkpoint.CONFIG_NAME}: model_type {d.get('model_type')!r}, "
                             f"expected {MODEL_TYPE!r}")
        tensors, _ = tensorfile.load_tensors(directory / checkpoint.WEIGHTS_NAME)
        cfg = XLNetConfig.from_dict(d)
        return cls(cfg, dtype=dtype, params={k: np.asarray(v, dtype=dtype) for k, v in tensors.items()})
