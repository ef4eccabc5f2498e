"""A small T5-style encoder-decoder, forward and backward written out by hand (math, no I/O).

T5 (Raffel et al., 2019) reads a corrupted text with an encoder and writes the missing spans
with a decoder. This module keeps BERT's choices for everything that is not the encoder-decoder
idea itself, so the new parts stand out and the rest is code you have already read:

- the encoder is BERT's (model.encoder_forward / encoder_backward, post-LN blocks, GELU, learned
  absolute positions, one segment row), on the parameter names BERT uses (`tok_emb`, `h{l}.*`);
- the decoder blocks are post-LN too, with three sublayers instead of two: causal
  self-attention (the decoder sees the target tokens before it only), cross-attention (queries
  from the decoder, keys and values from the encoder output) and the feed-forward layer;
- one word-embedding table `tok_emb` serves the encoder input, the decoder input and the output
  layer (logits = y @ tok_emb.T + lm.bias), as T5 shares it.
What T5 does differently and this model does not: RMS LayerNorm before each sublayer (pre-norm),
relative position buckets added to the attention scores instead of position embeddings, ReLU,
no biases. None of these changes the encoder-decoder's data flow, which is what is taught here.
No dropout: the `t5-tiny` recipe trains without it, as minibert's `train-tiny` does.

The gradient of cross-attention flows two ways: into the decoder (through the queries) and into
the encoder output (through the keys and values of every decoder layer; the contributions add
up), and from there back through the whole encoder. gradcheck-style tests check each piece.

Shape legend: B batch, T encoder (input) length, S decoder (target) length, C hidden size,
NH heads, HS = C // NH, FF intermediate size, V vocabulary size (sentinels included), L layers.

Parameter names beyond BERT's encoder (weights are (C_in, C_out)):
    dec.pos_emb (MAXPOS, C)  dec.emb_ln.w/b (C,)
    dec.h{l}.self.qkv.w (C, 3C) .b   dec.h{l}.self.out.w (C, C) .b   dec.h{l}.ln1.w/b
    dec.h{l}.cross.q.w (C, C) .b     dec.h{l}.cross.kv.w (C, 2C) .b  dec.h{l}.cross.out.w (C, C) .b
    dec.h{l}.ln2.w/b   dec.h{l}.ffn.in.w (C, FF) .b   dec.h{l}.ffn.out.w (FF, C) .b   dec.h{l}.ln3.w/b
    lm.bias (V,)
"""
from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, NamedTuple

import numpy as np

from minibert import layers
from minibert.layers import MASK_VALUE
from minibert.model import (ACTIVATIONS, SIZE_LIMITS, BertConfig, encoder_backward, encoder_forward, init_from_shapes,
                            self_attention_backward, self_attention_forward)

IGNORE = -100  # label of a padded target position (no loss)


@dataclasses.dataclass
class T5Config:
    vocab_size: int = 8292  # the WordPiece vocabulary plus the sentinels
    hidden_size: int = 128
    num_layers: int = 2  # encoder blocks
    num_decoder_layers: int = 2
    num_heads: int = 2
    intermediate_size: int = 512
    max_position_embeddings: int = 128
    num_sentinels: int = 100  # <extra_id_0> ... <extra_id_99>, the last ids of the vocabulary
    hidden_act: str = "gelu"
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12

    def __post_init__(self):
        for name in ("vocab_size", "hidden_size", "num_layers", "num_decoder_layers", "num_heads",
                     "intermediate_size", "max_position_embeddings", "num_sentinels"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"T5Config: {name}={value!r} must be a positive integer")
        if self.hidden_size % self.num_heads:
            raise ValueError(f"T5Config: hidden_size {self.hidden_size} is not divisible by num_heads {self.num_heads}")
        if self.num_sentinels >= self.vocab_size:
            raise ValueError(f"T5Config: num_sentinels {self.num_sentinels} leaves no room in vocab_size {self.vocab_size}")
        if not isinstance(self.hidden_act, str) or self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"T5Config: hidden_act {self.hidden_act!r} is not one of {sorted(ACTIVATIONS)}")
        try:
            self.encoder_config()  # BertConfig checks the sizes the two share (and their limits)
        except ValueError as e:
            raise ValueError(f"T5Config: {e}") from None
        if self.num_decoder_layers > SIZE_LIMITS["num_hidden_layers"]:
            raise ValueError(f"T5Config: num_decoder_layers={self.num_decoder_layers} is more than minibert builds "
                             f"(at most {SIZE_LIMITS['num_hidden_layers']})")

    def encoder_config(self) -> BertConfig:
        """The BertConfig of the encoder (one segment type, no dropout)."""
        return BertConfig(vocab_size=self.vocab_size, hidden_size=self.hidden_size, num_hidden_layers=self.num_layers,
                          num_attention_heads=self.num_heads, intermediate_size=self.intermediate_size,
                          hidden_act=self.hidden_act, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                          max_position_embeddings=self.max_position_embeddings, type_vocab_size=1,
                          initializer_range=self.initializer_range, layer_norm_eps=self.layer_norm_eps)

    def to_json(self) -> str:
        return json.dumps({"model_type": "minibert-t5", **dataclasses.asdict(self)}, indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict) -> "T5Config":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def param_shapes(cfg: T5Config) -> dict[str, tuple]:
    C, FF, V = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size
    shapes = {"tok_emb": (V, C), "pos_emb": (cfg.max_position_embeddings, C), "seg_emb": (1, C),
              "emb_ln.w": (C,), "emb_ln.b": (C,)}
    for l in range(cfg.num_layers):  # BERT's encoder blocks, BERT's names
        shapes.update({f"h{l}.attn.qkv.w": (C, 3 * C), f"h{l}.attn.qkv.b": (3 * C,), f"h{l}.attn.out.w": (C, C),
                       f"h{l}.attn.out.b": (C,), f"h{l}.ln1.w": (C,), f"h{l}.ln1.b": (C,),
                       f"h{l}.ffn.in.w": (C, FF), f"h{l}.ffn.in.b": (FF,), f"h{l}.ffn.out.w": (FF, C),
                       f"h{l}.ffn.out.b": (C,), f"h{l}.ln2.w": (C,), f"h{l}.ln2.b": (C,)})
    shapes.update({"dec.pos_emb": (cfg.max_position_embeddings, C), "dec.emb_ln.w": (C,), "dec.emb_ln.b": (C,)})
    for l in range(cfg.num_decoder_layers):
        p = f"dec.h{l}."
        shapes.update({p + "self.qkv.w": (C, 3 * C), p + "self.qkv.b": (3 * C,), p + "self.out.w": (C, C),
                       p + "self.out.b": (C,), p + "ln1.w": (C,), p + "ln1.b": (C,),
                       p + "cross.q.w": (C, C), p + "cross.q.b": (C,), p + "cross.kv.w": (C, 2 * C),
                       p + "cross.kv.b": (2 * C,), p + "cross.out.w": (C, C), p + "cross.out.b": (C,),
                       p + "ln2.w": (C,), p + "ln2.b": (C,), p + "ffn.in.w": (C, FF), p + "ffn.in.b": (FF,),
                       p + "ffn.out.w": (FF, C), p + "ffn.out.b": (C,), p + "ln3.w": (C,), p + "ln3.b": (C,)})
    shapes["lm.bias"] = (V,)
    return shapes


def init_params(cfg: T5Config, seed: int = 0, dtype=np.float32) -> dict[str, np.ndarray]:
    """BERT's init: truncated normal(0.02) matrices and tables, zero biases, LayerNorm w = 1, b = 0."""
    return init_from_shapes(param_shapes(cfg), cfg.initializer_range, seed, dtype)


# ---------------------------------------------------------------------------------------------
# cross-attention core: S decoder queries attend over T encoder keys (padded keys get no weight)
#   preatt = q @ k^T / sqrt(HS) + (1 - enc_mask) * MASK_VALUE ; att = softmax(preatt) ; out = att @ v
# The same math as layers.attention_forward, but q and k have different lengths (S and T), so
# there is no causal mask and no (T, T) kernel: this NumPy version serves both backends.

class CrossAttentionCache(NamedTuple):
    q: np.ndarray  # (B, NH, S, HS)
    k: np.ndarray  # (B, NH, T, HS)
    v: np.ndarray  # (B, NH, T, HS)
    att: np.ndarray  # (B, NH, S, T) softmax probabilities
    scale: float  # 1 / sqrt(HS)


def cross_attention_forward(q, k, v, enc_mask):
    """Shapes: q (B, NH, S, HS); k, v (B, NH, T, HS); enc_mask (B, T) 1 = real encoder token
    -> out (B, NH, S, HS)."""
    B, NH, S, HS = q.shape
    if k.shape[:2] != (B, NH) or k.shape[3] != HS or v.shape != k.shape:
        raise ValueError(f"cross-attention shapes do not fit: q {q.shape}, k {k.shape}, v {v.shape}")
    if enc_mask.shape != (B, k.shape[2]):
        raise ValueError(f"enc_mask has shape {enc_mask.shape}, expected {(B, k.shape[2])}")
    scale = 1.0 / math.sqrt(HS)
    adder = ((1.0 - enc_mask) * MASK_VALUE).astype(q.dtype)[:, None, None, :]  # (B, 1, 1, T)
    preatt = (q @ k.swapaxes(-1, -2)) * q.dtype.type(scale) + adder  # (B, NH, S, T)
    preatt = preatt - preatt.max(axis=-1, keepdims=True)  # (B, NH, S, T) for a stable exp
    e = np.exp(preatt)  # (B, NH, S, T)
    att = e / e.sum(axis=-1, keepdims=True)  # (B, NH, S, T)
    out = att @ v  # (B, NH, S, T) @ (B, NH, T, HS) -> (B, NH, S, HS)
    return out, CrossAttentionCache(q, k, v, att, scale)


def cross_attention_backward(dout, cache: CrossAttentionCache):
    """Returns dq (B, NH, S, HS), dk, dv (B, NH, T, HS). dk and dv sum over the S queries: this
    is the gradient that reaches the encoder."""
    q, k, v, att, scale = cache
    # forward was: out = att @ v
    dv = att.swapaxes(-1, -2) @ dout  # (B, NH, T, S) @ (B, NH, S, HS) -> (B, NH, T, HS)
    datt = dout @ v.swapaxes(-1, -2)  # (B, NH, S, HS) @ (B, NH, HS, T) -> (B, NH, S, T)
    # forward was: att = softmax(preatt)
    dpreatt = att * (datt - (datt * att).sum(axis=-1, keepdims=True))  # (B, NH, S, T)
    # forward was: preatt = q @ k^T * scale + adder
    dpreatt = dpreatt * q.dtype.type(scale)  # (B, NH, S, T)
    dq = dpreatt @ k  # (B, NH, S, T) @ (B, NH, T, HS) -> (B, NH, S, HS)
    dk = dpreatt.swapaxes(-1, -2) @ q  # (B, NH, T, S) @ (B, NH, S, HS) -> (B, NH, T, HS)
    return dq, dk, dv


# ---------------------------------------------------------------------------------------------
# decoder embedding: out = tok_emb[ids] + dec.pos_emb[0..S-1] (the table shared with the encoder)

class DecoderEmbeddingCache(NamedTuple):
    ids: np.ndarray  # (B, S) int
    tok_shape: tuple  # (V, C)
    pos_shape: tuple  # (MAXPOS, C)


def decoder_embedding_forward(ids, tok_emb, pos_emb):
    """Shapes: ids (B, S) int, tok_emb (V, C), pos_emb (MAXPOS, C) -> (B, S, C)."""
    S = ids.shape[1]
    if S > pos_emb.shape[0]:
        raise ValueError(f"target length {S} exceeds max_position_embeddings {pos_emb.shape[0]}")
    out = tok_emb[ids] + pos_emb[:S]  # (B, S, C)
    return out, DecoderEmbeddingCache(ids, tok_emb.shape, pos_emb.shape)


def decoder_embedding_backward(dout, cache: DecoderEmbeddingCache):
    """Returns dtok_emb (V, C), dpos_emb (MAXPOS, C); repeated ids accumulate (np.add.at)."""
    ids, tok_shape, pos_shape = cache
    C = dout.shape[-1]
    dtok = np.zeros(tok_shape, dtype=dout.dtype)  # (V, C)
    np.add.at(dtok, ids.reshape(-1), dout.reshape(-1, C))
    dpos = np.zeros(pos_shape, dtype=dout.dtype)  # (MAXPOS, C)
    dpos[:ids.shape[1]] = dout.sum(axis=0)  # (S, C)
    return dtok, dpos


# ---------------------------------------------------------------------------------------------
# one post-LN decoder block: causal self-attention, cross-attention, feed-forward

class DecoderBlockCache(NamedTuple):
    qkv: Any
    self_attn: Any  # the attention core's cache (causal)
    self_out: Any
    ln1: Any
    cross_q: Any
    cross_kv: Any  # linear cache on the encoder output (B, T, C) -> (B, T, 2C)
    cross_attn: CrossAttentionCache
    cross_out: Any
    ln2: Any
    ffn_in: Any
    gelu: Any
    ffn_out: Any
    ln3: Any


def decoder_block_forward(params, cfg: T5Config, l, y, dec_mask, enc_out, enc_mask, ops=layers):
    """y (B, S, C), dec_mask (B, S), enc_out (B, T, C), enc_mask (B, T) -> (B, S, C), cache."""
    p, NH, eps = f"dec.h{l}.", cfg.num_heads, cfg.layer_norm_eps
    qkv, c_qkv = ops.linear_forward(y, params[p + "self.qkv.w"], params[p + "self.qkv.b"])  # (B, S, 3C)
    a, c_self = self_attention_forward(qkv, dec_mask, NH, 0.0, None, ops, causal=True)  # (B, S, C)
    a, c_so = ops.linear_forward(a, params[p + "self.out.w"], params[p + "self.out.b"])  # (B, S, C)
    y1, c_ln1 = ops.layernorm_forward(a + y, params[p + "ln1.w"], params[p + "ln1.b"], eps)  # (B, S, C)
    q, c_q = ops.linear_forward(y1, params[p + "cross.q.w"], params[p + "cross.q.b"])  # (B, S, C)
    kv, c_kv = ops.linear_forward(enc_out, params[p + "cross.kv.w"], params[p + "cross.kv.b"])  # (B, T, 2C)
    k, v = np.split(kv, 2, axis=-1)  # 2 x (B, T, C)
    q, k, v = (ops.split_heads(t, NH) for t in (q, k, v))  # (B, S|T, C) -> (B, NH, S|T, HS)
    c, c_cross = cross_attention_forward(q, k, v, enc_mask)  # (B, NH, S, HS)
    c, c_co = ops.linear_forward(ops.merge_heads(c), params[p + "cross.out.w"], params[p + "cross.out.b"])  # (B, S, C)
    y2, c_ln2 = ops.layernorm_forward(c + y1, params[p + "ln2.w"], params[p + "ln2.b"], eps)  # (B, S, C)
    h, c_in = ops.linear_forward(y2, params[p + "ffn.in.w"], params[p + "ffn.in.b"])  # (B, S, FF)
    h, c_gelu = ops.gelu_forward(h, ACTIVATIONS[cfg.hidden_act])  # (B, S, FF)
    h, c_fo = ops.linear_forward(h, params[p + "ffn.out.w"], params[p + "ffn.out.b"])  # (B, S, C)
    y3, c_ln3 = ops.layernorm_forward(h + y2, params[p + "ln3.w"], params[p + "ln3.b"], eps)  # (B, S, C)
    return y3, DecoderBlockCache(c_qkv, c_self, c_so, c_ln1, c_q, c_kv, c_cross, c_co, c_ln2, c_in, c_gelu,
                                 c_fo, c_ln3)


def decoder_block_backward(dy, c: DecoderBlockCache, cfg: T5Config, l, grads, ops=layers):
    """Mirror of decoder_block_forward: dy (B, S, C) -> (d block input (B, S, C), d enc_out (B, T, C));
    sets the block's grads."""
    p, NH = f"dec.h{l}.", cfg.num_heads
    # forward was: y3 = LN3(h + y2)
    dsum, grads[p + "ln3.w"], grads[p + "ln3.b"] = ops.layernorm_backward(dy, c.ln3)  # (B, S, C)
    dh, grads[p + "ffn.out.w"], grads[p + "ffn.out.b"] = ops.linear_backward(dsum, c.ffn_out)  # (B, S, FF)
    dh = ops.gelu_backward(dh, c.gelu)  # (B, S, FF)
    dy2, grads[p + "ffn.in.w"], grads[p + "ffn.in.b"] = ops.linear_backward(dh, c.ffn_in)  # (B, S, C)
    dy2 = dy2 + dsum  # gradients add up at forks (y2 feeds the FFN and the residual)
    # forward was: y2 = LN2(c + y1)
    dsum, grads[p + "ln2.w"], grads[p + "ln2.b"] = ops.layernorm_backward(dy2, c.ln2)  # (B, S, C)
    dc, grads[p + "cross.out.w"], grads[p + "cross.out.b"] = ops.linear_backward(dsum, c.cross_out)  # (B, S, C)
    dq, dk, dv = cross_attention_backward(ops.split_heads(dc, NH), c.cross_attn)  # (B, NH, S|T, HS)
    dq, dk, dv = (ops.merge_heads(t) for t in (dq, dk, dv))  # (B, NH, S|T, HS) -> (B, S|T, C)
    # forward was: kv = enc_out @ cross.kv.w + b: the encoder's share of this block's gradient
    denc, grads[p + "cross.kv.w"], grads[p + "cross.kv.b"] = ops.linear_backward(
        np.concatenate([dk, dv], axis=-1), c.cross_kv)  # (B, T, 2C) -> (B, T, C)
    dy1, grads[p + "cross.q.w"], grads[p + "cross.q.b"] = ops.linear_backward(dq, c.cross_q)  # (B, S, C)
    dy1 = dy1 + dsum  # gradients add up at forks (y1 feeds the queries and the residual)
    # forward was: y1 = LN1(a + y)
    dsum, grads[p + "ln1.w"], grads[p + "ln1.b"] = ops.layernorm_backward(dy1, c.ln1)  # (B, S, C)
    da, grads[p + "self.out.w"], grads[p + "self.out.b"] = ops.linear_backward(dsum, c.self_out)  # (B, S, C)
    dqkv = self_attention_backward(da, c.self_attn, NH, ops)  # (B, S, 3C)
    dy_attn, grads[p + "self.qkv.w"], grads[p + "self.qkv.b"] = ops.linear_backward(dqkv, c.qkv)  # (B, S, C)
    return dsum + dy_attn, denc  # gradients add up at forks (y feeds self-attention and the residual)


# ---------------------------------------------------------------------------------------------
# the whole model: encoder -> decoder -> tied output layer -> cross-entropy over target tokens

class T5Cache(NamedTuple):
    encoder: Any
    enc_mask: np.ndarray  # (B, T)
    emb: DecoderEmbeddingCache
    emb_ln: Any
    blocks: list
    logits: Any  # linear cache of y @ tok_emb.T + lm.bias
    loss: Any  # cross-entropy cache


def check_batch(cfg: T5Config, batch: dict) -> None:
    """A ValueError naming the first bad key, shape or id of a batch."""
    for key in ("input_ids", "attention_mask", "decoder_input_ids", "decoder_attention_mask", "labels"):
        if key not in batch:
            raise ValueError(f"batch lacks {key!r}")
    B, T = np.shape(batch["input_ids"])
    S = np.shape(batch["decoder_input_ids"])[1]
    for key, shape in (("attention_mask", (B, T)), ("decoder_attention_mask", (B, S)), ("labels", (B, S))):
        if np.shape(batch[key]) != shape:
            raise ValueError(f"batch[{key!r}] has shape {np.shape(batch[key])}, expected {shape}")
    for key in ("input_ids", "decoder_input_ids"):
        ids = np.asarray(batch[key])
        if ids.size and (ids.min() < 0 or ids.max() >= cfg.vocab_size):
            raise ValueError(f"batch[{key!r}] holds id {int(ids.max() if ids.max() >= cfg.vocab_size else ids.min())}, "
                             f"outside the vocabulary [0, {cfg.vocab_size})")
    if max(T, S) > cfg.max_position_embeddings:
        raise ValueError(f"sequence length {max(T, S)} exceeds max_position_embeddings {cfg.max_position_embeddings}")


def encode(params, cfg: T5Config, input_ids, attention_mask, ops=layers):
    """The encoder alone: (B, T) ids -> enc_out (B, T, C), cache."""
    return encoder_forward(params, cfg.encoder_config(), input_ids, np.zeros_like(input_ids), attention_mask,
                           None, ops)


def decode(params, cfg: T5Config, dec_ids, dec_mask, enc_out, enc_mask, ops=layers):
    """The decoder and the tied output layer: dec_ids (B, S) -> logits (B, S, V), caches."""
    e, c_emb = decoder_embedding_forward(dec_ids, params["tok_emb"], params["dec.pos_emb"])  # (B, S, C)
    y, c_ln = ops.layernorm_forward(e, params["dec.emb_ln.w"], params["dec.emb_ln.b"], cfg.layer_norm_eps)
    blocks = []
    for l in range(cfg.num_decoder_layers):
        y, c = decoder_block_forward(params, cfg, l, y, dec_mask, enc_out, enc_mask, ops)  # (B, S, C)
        blocks.append(c)
    logits, c_logits = ops.linear_forward(y, params["tok_emb"].T, params["lm.bias"])  # (B, S, V)
    return logits, (c_emb, c_ln, blocks, c_logits)


def t5_forward(params, cfg: T5Config, batch: dict, ops=layers):
    """Teacher-forced loss: the decoder reads [start] + target[:-1] and predicts the target.
    Returns loss (mean over target tokens whose label is not IGNORE), metrics, cache."""
    check_batch(cfg, batch)
    enc_mask = np.asarray(batch["attention_mask"])
    enc_out, c_enc = encode(params, cfg, np.asarray(batch["input_ids"]), enc_mask, ops)  # (B, T, C)
    logits, (c_emb, c_ln, blocks, c_logits) = decode(params, cfg, np.asarray(batch["decoder_input_ids"]),
                                                     np.asarray(batch["decoder_attention_mask"]), enc_out, enc_mask,
                                                     ops)  # (B, S, V)
    labels = np.asarray(batch["labels"])
    loss, c_loss = ops.cross_entropy_forward(logits, labels, ignore_index=IGNORE)  # ()
    counted = labels != IGNORE  # (B, S)
    n = int(counted.sum())
    correct = int(((logits.argmax(-1) == labels) & counted).sum())
    metrics = {"loss": float(loss), "acc": correct / max(n, 1), "tokens": n}
    return loss, metrics, T5Cache(c_enc, enc_mask, c_emb, c_ln, blocks, c_logits, c_loss)


def t5_backward(cache: T5Cache, params, cfg: T5Config, ops=layers) -> dict[str, np.ndarray]:
    """Mirror of t5_forward -> grads with exactly the keys of params."""
    grads: dict[str, np.ndarray] = {}
    dlogits = ops.cross_entropy_backward(1.0, cache.loss)  # (B, S, V) the chain rule starts: dloss = 1
    # forward was: logits = y @ tok_emb.T + lm.bias
    dy, dtok_t, grads["lm.bias"] = ops.linear_backward(dlogits, cache.logits)  # (B, S, C), (C, V), (V,)
    tok_grad = dtok_t.T  # (V, C) the output layer's share of tok_emb
    denc = None
    for l in reversed(range(cfg.num_decoder_layers)):
        dy, denc_l = decoder_block_backward(dy, cache.blocks[l], cfg, l, grads, ops)  # (B, S, C), (B, T, C)
        denc = denc_l if denc is None else denc + denc_l  # gradients add up at forks (every layer reads enc_out)
    de, grads["dec.emb_ln.w"], grads["dec.emb_ln.b"] = ops.layernorm_backward(dy, cache.emb_ln)  # (B, S, C)
    dtok_dec, grads["dec.pos_emb"] = decoder_embedding_backward(de, cache.emb)
    grads["tok_emb"] = tok_grad + dtok_dec  # gradients add up at forks (output layer, decoder input)
    encoder_backward(denc, cache.encoder, cfg.encoder_config(), grads, ops)  # adds the encoder input's share
    return {k: grads[k] for k in params}


def t5_loss_and_grads(params, cfg: T5Config, batch: dict, ops=layers):
    loss, metrics, cache = t5_forward(params, cfg, batch, ops)
    return loss, metrics, t5_backward(cache, params, cfg, ops)


# ---------------------------------------------------------------------------------------------
# greedy decoding

def greedy_decode(params, cfg: T5Config, input_ids, attention_mask, start_id: int, eos_id: int, max_len: int,
                  ops=layers) -> np.ndarray:
    """The most likely token at each step, fed back as the next input, until every row has
    written `eos_id` or `max_len` tokens. The encoder runs once; the decoder reruns on the
    growing prefix (no key/value cache: short targets, readable code).
    Returns (B, max_len) ids; positions after a row's EOS hold eos_id."""
    input_ids, attention_mask = np.asarray(input_ids), np.asarray(attention_mask)
    if max_len + 1 > cfg.max_position_embeddings:
        raise ValueError(f"max_len {max_len} exceeds what max_position_embeddings {cfg.max_position_embeddings} allows")
    B = input_ids.shape[0]
    enc_out, _ = encode(params, cfg, input_ids, attention_mask, ops)  # (B, T, C)
    dec = np.full((B, 1), start_id, dtype=np.int64)  # (B, 1)
    done = np.zeros(B, dtype=bool)
    out = np.full((B, max_len), eos_id, dtype=np.int64)  # (B, max_len)
    for s in range(max_len):
        logits, _ = decode(params, cfg, dec, np.ones_like(dec), enc_out, attention_mask, ops)  # (B, s+1, V)
        nxt = logits[:, -1].argmax(-1)  # (B,)
        nxt = np.where(done, eos_id, nxt)
        out[:, s] = nxt
        done |= nxt == eos_id
        if done.all():
            break
        dec = np.concatenate([dec, nxt[:, None]], axis=1)  # (B, s+2)
    return out
