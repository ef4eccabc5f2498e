"""BERT for pretraining (MLM + NSP), forward and backward written out by hand.

`bert_forward(params, config, batch, ...)` returns the loss, the batch's metrics and a cache;
`bert_backward` is its line-by-line mirror in reverse and returns `grads` with exactly the keys
of `params`. The user-facing class over them, `BertForPreTraining`, is in minibert/bert.py: this
module holds the math only (no files, no tokenizer), so everything else can build on it.

Every function takes `ops`, the module of layer functions it runs: `minibert.layers` (the NumPy
reference, the default: "go to definition" lands on the code) or `minibert.kernels` (the same
names, Numba-compiled where it pays); `BertForPreTraining.ops` picks one (minibert/backend.py).
The reference encoder (`encoder_forward`) reads in (B, T, C) throughout; the fast path that
skips padding (`encoder_forward_unpadded`, used by `bert_forward` in training) is kept apart,
below it, and tested equal to it; `encoder_backward` mirrors both. ALBERT and ELECTRA run this
encoder too: `embeddings_forward` has their E -> C projection, and `blocks_forward` reads layer
l's block wherever the params put h{l}.* (ALBERT: one shared block for every l).

Shape legend:
    B   batch size              T   sequence length         C   hidden size
    NH  attention heads         HS  head size = C // NH     V   vocabulary size
    FF  intermediate size       P   predictions per sequence (masked positions)
    L   encoder layers          N   real (unpadded) tokens  M   real predictions (weight > 0)
    E   width of the embedding tables: C in BERT; ALBERT's and ELECTRA's embedding_size

Parameter names (a flat dict; weights are (C_in, C_out), PyTorch stores them transposed):
    tok_emb (V, C)  pos_emb (MAXPOS, C)  seg_emb (TV, C)  emb_ln.w/b (C,)
    h{l}.attn.qkv.w (C, 3C) .b (3C,)   h{l}.attn.out.w (C, C) .b   h{l}.ln1.w/b
    h{l}.ffn.in.w (C, FF) .b (FF,)     h{l}.ffn.out.w (FF, C) .b   h{l}.ln2.w/b
    pool.w (C, C) .b   mlm.dense.w (C, C) .b   mlm.ln.w/b   mlm.bias (V,)   nsp.w (C, 2) .b (2,)
The MLM decoder has no matrix of its own: it is tied to tok_emb (logits = t @ tok_emb.T + mlm.bias).

`bert_forward(..., objective=)` also computes the two pretraining ablations of the paper's
Table 5 with the same functions (OBJECTIVES): "mlm" (No NSP) and "ltr" (LTR & No NSP: causal
attention, next-token prediction through the MLM head).

The module reads in BERT's order, from the embeddings to the two heads, each backward right
below the forward it mirrors (and undoes).
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math
from typing import Any, NamedTuple

import numpy as np

from minibert import layers
from minibert.io.textio import shown_value
from minibert.native.malloc import available_memory
from minibert.text.tokenizer import MAX_VOCAB_SIZE

ACTIVATIONS = {"gelu": "none", "gelu_new": "tanh", "gelu_pytorch_tanh": "tanh"}
# the model sizes minibert trains (vocab_size comes from the vocabulary): `tiny` is the shape of
# Google's BERT-Tiny (L=2, H=128), `mini` of BERT-Mini (L=4, H=256)
MODEL_SIZES = {"tiny": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512),
               "mini": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024)}


# The largest model minibert builds, by config field: a config.json is untrusted input, and
# `"num_hidden_layers": 1000000` must be refused before a million layers of parameters are
# planned, not after (BERT-large's sizes beside them, for scale).
SIZE_LIMITS = {"vocab_size": MAX_VOCAB_SIZE, "hidden_size": 16384, "num_hidden_layers": 256, "num_attention_heads": 256,
               "intermediate_size": 65536, "max_position_embeddings": 65536, "type_vocab_size": 1024}
BERT_LARGE = {"vocab_size": 30522, "hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
              "intermediate_size": 4096, "max_position_embeddings": 512, "type_vocab_size": 2}


@dataclasses.dataclass
class BertConfig:
    """The fields are the keys of transformers' config.json (docs/bert-notes.md §4.1, §7.3)."""

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"  # "gelu" = exact erf GELU; "gelu_new" = tanh approximation
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12

    def __post_init__(self):
        """Every field of its type and in its range, checked before anything is built from it (a
        config.json is untrusted input): a bad one is a ValueError naming it."""
        for name, limit in SIZE_LIMITS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name}={shown_value(value)} must be a positive integer")
            if value > limit:
                raise ValueError(f"{name}={value} is more than minibert builds (at most {limit:,}; BERT-large has "
                                 f"{BERT_LARGE[name]:,})")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range", "layer_norm_eps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or not math.isfinite(value):
                raise ValueError(f"{name}={shown_value(value)} must be a finite number")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not divisible by "
                             f"num_attention_heads {self.num_attention_heads}")
        if not isinstance(self.hidden_act, str) or self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"hidden_act {shown_value(self.hidden_act)} is not supported; use one of "
                             f"{sorted(ACTIVATIONS)}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name}={getattr(self, name)} must be in [0, 1)")
        if not self.layer_norm_eps > 0:  # LayerNorm divides by sqrt(var + eps): eps <= 0 gives NaNs
            raise ValueError(f"layer_norm_eps={self.layer_norm_eps} must be > 0 (BERT: 1e-12)")
        if self.initializer_range < 0:
            raise ValueError(f"initializer_range={self.initializer_range} must be >= 0 (BERT: 0.02)")
        check_memory(self)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "BertConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)


# ---------------------------------------------------------------------------------------------
# parameters

def param_shapes(cfg: BertConfig) -> dict[str, tuple]:
    C, FF, V = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size
    shapes = {"tok_emb": (V, C), "pos_emb": (cfg.max_position_embeddings, C),
              "seg_emb": (cfg.type_vocab_size, C), "emb_ln.w": (C,), "emb_ln.b": (C,)}
    for l in range(cfg.num_hidden_layers):
        shapes.update({
            f"h{l}.attn.qkv.w": (C, 3 * C), f"h{l}.attn.qkv.b": (3 * C,),
            f"h{l}.attn.out.w": (C, C), f"h{l}.attn.out.b": (C,),
            f"h{l}.ln1.w": (C,), f"h{l}.ln1.b": (C,),
            f"h{l}.ffn.in.w": (C, FF), f"h{l}.ffn.in.b": (FF,),
            f"h{l}.ffn.out.w": (FF, C), f"h{l}.ffn.out.b": (C,),
            f"h{l}.ln2.w": (C,), f"h{l}.ln2.b": (C,),
        })
    shapes.update({"pool.w": (C, C), "pool.b": (C,), "mlm.dense.w": (C, C), "mlm.dense.b": (C,),
                   "mlm.ln.w": (C,), "mlm.ln.b": (C,), "mlm.bias": (V,), "nsp.w": (C, 2), "nsp.b": (2,)})
    return shapes


def check_memory(cfg: BertConfig) -> None:
    """Refuse a config whose parameters do not fit the memory available now, before anything is
    allocated: its float32 weights and init's float64 draw (with two temporaries) of the largest
    table. A config within SIZE_LIMITS can still ask for 512 GiB (vocab 4M x hidden 16384)."""
    shapes = param_shapes(cfg).values()
    n = sum(math.prod(s) for s in shapes)
    need = 4 * n + 3 * 8 * max(math.prod(s) for s in shapes)
    available = available_memory()
    if available is not None and need > available:
        raise ValueError(f"this config has {n:,} parameters: {need / 2**30:.1f} GiB to build, more than the "
                         f"{available / 2**30:.1f} GiB of memory available (vocab_size {cfg.vocab_size:,}, "
                         f"hidden_size {cfg.hidden_size:,}, {cfg.num_hidden_layers} layers)")


def check_params(params: dict, expected: dict[str, tuple], owner: str = "") -> None:
    """Every expected parameter present with its shape and nothing else, or a ValueError that
    names the first problem (the model classes check what they are given with this)."""
    who = f"{owner}: " if owner else ""
    for name, shape in expected.items():
        if name not in params:
            raise ValueError(f"{who}parameter {name!r} is missing")
        if params[name].shape != shape:
            raise ValueError(f"{who}parameter {name!r} has shape {params[name].shape}, expected {shape}")
    unknown = sorted(set(params) - set(expected))
    if unknown:
        raise ValueError(f"{who}unknown parameters {unknown[:5]}")


def truncated_normal(rng: np.random.Generator, shape, std: float) -> np.ndarray:
    """Normal(0, std) with values beyond 2 std redrawn, as TF's truncated_normal_initializer."""
    x = rng.standard_normal(shape)
    bad = np.abs(x) > 2.0
    while bad.any():
        x[bad] = rng.standard_normal(int(bad.sum()))
        bad = np.abs(x) > 2.0
    return x * std


def init_params(cfg: BertConfig, seed: int = 0, dtype=np.float32) -> dict[str, np.ndarray]:
    """The original init (docs/bert-notes.md §4.2): truncated normal(0.02) for every matrix and embedding
    table, zero biases, LayerNorm w = 1 and b = 0."""
    return init_from_shapes(param_shapes(cfg), cfg.initializer_range, seed, dtype)


def is_layernorm(name: str) -> bool:
    """A LayerNorm parameter: its owner (the name without `.w` / `.b`) is `ln*` or `*_ln`
    (h0.ln1.w, emb_ln.b, mlm.ln.w, dec.emb_ln.w, ...)."""
    owner = name.rpartition(".")[0].rpartition(".")[2]
    return owner.startswith("ln") or owner.endswith("_ln")


def init_from_shapes(shapes: dict[str, tuple], initializer_range: float, seed: int = 0,
                     dtype=np.float32) -> dict[str, np.ndarray]:
    """BERT's init for any parameter set (BERT and the family models share it): LayerNorm w = 1 and
    b = 0, every other bias 0, every matrix and table truncated normal(initializer_range), drawn in
    the order of `shapes`."""
    rng = np.random.default_rng(seed)
    params = {}
    for name, shape in shapes.items():
        last = name.rsplit(".", 1)[-1]
        if is_layernorm(name):
            params[name] = (np.ones if last == "w" else np.zeros)(shape, dtype=dtype)
        elif last in ("b", "bias"):
            params[name] = np.zeros(shape, dtype=dtype)
        else:
            params[name] = truncated_normal(rng, shape, initializer_range).astype(dtype)
    return params


# ---------------------------------------------------------------------------------------------
# input checks: clear errors that name the value and the limit

def as_int(name, a, shape=None):
    a = np.asarray(a)
    if a.dtype.kind not in "iub":
        raise ValueError(f"{name} must be integers, got dtype {a.dtype}")
    if shape is not None and a.shape != shape:
        raise ValueError(f"{name} has shape {a.shape}, expected {shape}")
    return a.astype(np.int64, copy=False)


def check_inputs(cfg: BertConfig, input_ids, token_type_ids=None, attention_mask=None):
    input_ids = np.asarray(input_ids)
    if input_ids.ndim != 2:
        raise ValueError(f"input_ids must be (batch, seq_len), got shape {input_ids.shape}")
    B, T = input_ids.shape
    input_ids = as_int("input_ids", input_ids)
    if T > cfg.max_position_embeddings:
        raise ValueError(f"sequence length {T} exceeds max_position_embeddings {cfg.max_position_embeddings}")
    if input_ids.size and (input_ids.min() < 0 or input_ids.max() >= cfg.vocab_size):
        bad = input_ids[(input_ids < 0) | (input_ids >= cfg.vocab_size)].flat[0]
        raise ValueError(f"token id {int(bad)} is outside the vocabulary [0, {cfg.vocab_size})")
    tt = np.zeros((B, T), np.int64) if token_type_ids is None else as_int("token_type_ids", token_type_ids, (B, T))
    if tt.size and (tt.min() < 0 or tt.max() >= cfg.type_vocab_size):
        raise ValueError(f"token type id {int(tt.max() if tt.max() >= cfg.type_vocab_size else tt.min())} "
                         f"is outside [0, {cfg.type_vocab_size}) (type_vocab_size)")
    am = np.ones((B, T), np.int64) if attention_mask is None else as_int("attention_mask", attention_mask, (B, T))
    return input_ids, tt, am


# ---------------------------------------------------------------------------------------------
# encoder: embeddings -> L post-LN blocks

class BlockCache(NamedTuple):
    qkv: Any  # linear cache, x (B, T, C) -> (B, T, 3C)
    attn: Any  # attention core cache
    out: Any  # linear cache of the attention output projection
    drop1: Any
    ln1: Any
    ffn_in: Any
    gelu: Any
    ffn_out: Any
    drop2: Any
    ln2: Any


def apply_dropout(ops, x, p, rng):
    return ops.dropout_forward(x, p if rng is not None else 0.0, rng)


class EmbeddingsCache(NamedTuple):
    emb: Any  # embedding-sum cache, (B, T) ids -> (B, T, E)
    rows: tuple | None  # (keep (N,), B, T) when the real tokens' rows were packed after the sum, else None
    ln: Any
    drop: Any
    map: Any  # linear cache of emb_map, E -> C; None without emb_map (E == C)


def embeddings_forward(params, cfg, input_ids, token_type_ids, rng=None, ops=layers, keep=None):
    """The input embedding: token + segment + position lookups -> LayerNorm -> dropout, then the
    projection E -> C when the params have one (`emb_map`: ALBERT's factorised embedding, ELECTRA's
    when E != C). Shapes: ids (B, T) -> x (B, T, C); with `keep` (N,) (the flat indices b * T + t
    of the real tokens) x (N, C), their rows packed right after the lookups (the fast path below).
    Dropout runs only when `rng` is given. BERT: E == C, no projection."""
    e, c_emb = ops.embedding_forward(input_ids, token_type_ids, params["tok_emb"], params["seg_emb"],
                                     params["pos_emb"])  # (B, T, E)
    rows = None
    if keep is not None:
        e, rows = _pack(e, keep), (keep, *input_ids.shape)  # (B, T, E) -> (N, E)
    e, c_ln = ops.layernorm_forward(e, params["emb_ln.w"], params["emb_ln.b"], cfg.layer_norm_eps)  # (B, T, E)/(N, E)
    e, c_drop = apply_dropout(ops, e, cfg.hidden_dropout_prob, rng)  # (B, T, E) or (N, E)
    if "emb_map.w" not in params:  # E == C: no projection
        return e, EmbeddingsCache(c_emb, rows, c_ln, c_drop, None)
    x, c_map = ops.linear_forward(e, params["emb_map.w"], params["emb_map.b"])  # (..., E) @ (E, C) -> (..., C)
    return x, EmbeddingsCache(c_emb, rows, c_ln, c_drop, c_map)


def embeddings_backward(dx, cache: EmbeddingsCache, grads, ops=layers):
    """Mirror of embeddings_forward: dx (B, T, C), or (N, C) -> fills `grads` with the embedding's
    gradients and returns it. grads["tok_emb"] may already hold the tied MLM decoder's part; the
    lookup's part is added to it."""
    de = dx
    if cache.map is not None:
        # forward was: x = e @ emb_map.w + emb_map.b
        de, grads["emb_map.w"], grads["emb_map.b"] = ops.linear_backward(dx, cache.map)  # (..., E)
    de = ops.dropout_backward(de, cache.drop)  # (B, T, E) or (N, E)
    de, grads["emb_ln.w"], grads["emb_ln.b"] = ops.layernorm_backward(de, cache.ln)  # (B, T, E) or (N, E)
    if cache.rows is not None:
        de = _unpack(de, *cache.rows)  # (N, E) -> (B, T, E), zero at padding
    dtok, grads["seg_emb"], grads["pos_emb"] = ops.embedding_backward(de, cache.emb)  # (V, E), (TV, E), (MAXPOS, E)
    grads["tok_emb"] = ops.add(grads["tok_emb"], dtok) if "tok_emb" in grads else dtok  # (V, E) gradients add up at forks
    return grads


def self_attention_forward(qkv, attention_mask, NH, p_attn, rng, ops, causal=False):
    """qkv (B, T, 3C) -> heads -> scaled dot-product attention -> merged heads (B, T, C), cache.
    causal=True: each position attends to itself and the positions before it only."""
    q, k, v = np.split(qkv, 3, axis=-1)  # 3 x (B, T, C)
    q, k, v = (ops.split_heads(t, NH) for t in (q, k, v))  # (B, T, C) -> (B, NH, T, HS)
    a, cache = ops.attention_forward(q, k, v, attention_mask, p_attn, rng, causal=causal)  # (B, NH, T, HS)
    return ops.merge_heads(a), cache  # (B, NH, T, HS) -> (B, T, C)


def self_attention_backward(da, cache, NH, ops):
    """Mirror of self_attention_forward: da (B, T, C) -> dqkv (B, T, 3C)."""
    da = ops.split_heads(da, NH)  # (B, T, C) -> (B, NH, T, HS)
    dq, dk, dv = ops.attention_backward(da, cache)  # 3 x (B, NH, T, HS)
    return ops.merge_qkv(dq, dk, dv)  # 3 x (B, NH, T, HS) -> (B, T, 3C)


def block_forward(params, cfg, l, x, attention_mask, rng, ops, attend=self_attention_forward):
    """One post-LN encoder block: x (B, T, C) -> (B, T, C), cache (docs/bert-notes.md §4.6).
    `attend` is the attention sublayer; the unpadded fast path passes its own."""
    p, NH, eps = f"h{l}.", cfg.num_attention_heads, cfg.layer_norm_eps
    p_h = cfg.hidden_dropout_prob
    p_a = cfg.attention_probs_dropout_prob if rng is not None else 0.0
    qkv, c_qkv = ops.linear_forward(x, params[p + "attn.qkv.w"], params[p + "attn.qkv.b"])  # (B, T, 3C)
    a, c_att = attend(qkv, attention_mask, NH, p_a, rng, ops)  # (B, T, C)
    a, c_out = ops.linear_forward(a, params[p + "attn.out.w"], params[p + "attn.out.b"])  # (B, T, C)
    a, c_d1 = apply_dropout(ops, a, p_h, rng)  # (B, T, C)
    x1, c_ln1 = ops.layernorm_forward(ops.add(a, x), params[p + "ln1.w"], params[p + "ln1.b"], eps)  # (B, T, C)
    h, c_in = ops.linear_forward(x1, params[p + "ffn.in.w"], params[p + "ffn.in.b"])  # (B, T, FF)
    h, c_gelu = ops.gelu_forward(h, ACTIVATIONS[cfg.hidden_act])  # (B, T, FF)
    h, c_fo = ops.linear_forward(h, params[p + "ffn.out.w"], params[p + "ffn.out.b"])  # (B, T, C)
    h, c_d2 = apply_dropout(ops, h, p_h, rng)  # (B, T, C)
    x, c_ln2 = ops.layernorm_forward(ops.add(h, x1), params[p + "ln2.w"], params[p + "ln2.b"], eps)  # (B, T, C)
    return x, BlockCache(c_qkv, c_att, c_out, c_d1, c_ln1, c_in, c_gelu, c_fo, c_d2, c_ln2)


def block_backward(dx, c: BlockCache, cfg, l, grads, ops, attend_backward=self_attention_backward):
    """Mirror of block_forward: dx (B, T, C) -> d(block input) (B, T, C); sets the block's grads."""
    p = f"h{l}."
    # forward was: x = LN(h + x1)
    dsum, grads[p + "ln2.w"], grads[p + "ln2.b"] = ops.layernorm_backward(dx, c.ln2)  # (B, T, C)
    dh = ops.dropout_backward(dsum, c.drop2)  # (B, T, C)
    dx1 = dsum  # residual branch; the FFN branch adds to it below
    dh, grads[p + "ffn.out.w"], grads[p + "ffn.out.b"] = ops.linear_backward(dh, c.ffn_out)  # (B, T, FF)
    dh = ops.gelu_backward(dh, c.gelu)  # (B, T, FF)
    dx1_ffn, grads[p + "ffn.in.w"], grads[p + "ffn.in.b"] = ops.linear_backward(dh, c.ffn_in)  # (B, T, C)
    dx1 = ops.add(dx1, dx1_ffn)  # gradients add up at forks (x1 feeds the FFN and the residual)
    # forward was: x1 = LN(a + x)
    dsum, grads[p + "ln1.w"], grads[p + "ln1.b"] = ops.layernorm_backward(dx1, c.ln1)  # (B, T, C)
    da = ops.dropout_backward(dsum, c.drop1)  # (B, T, C)
    da, grads[p + "attn.out.w"], grads[p + "attn.out.b"] = ops.linear_backward(da, c.out)  # (B, T, C)
    dqkv = attend_backward(da, c.attn, cfg.num_attention_heads, ops)  # (B, T, 3C)
    dx_attn, grads[p + "attn.qkv.w"], grads[p + "attn.qkv.b"] = ops.linear_backward(dqkv, c.qkv)  # (B, T, C)
    return ops.add(dsum, dx_attn)  # gradients add up at forks (x feeds attention and the residual)


def blocks_forward(params, cfg, x, attention_mask, rng=None, ops=layers, keep=None, causal=False, states=False):
    """The L post-LN blocks, block l reading h{l}.* from `params`: x (B, T, C) -> (B, T, C) and a
    list of L BlockCaches. With `keep` (N,), x and the output are the (N, C) rows of the real tokens
    (the fast path below). Layers that share one block get params whose h{l}.* are the same arrays
    for every l (ALBERT's family/albert.layer_view). causal=True: left-to-right attention.
    states=True: a third result, the hidden states, x and every block's output after it (L + 1
    arrays of x's shape; transformers' output_hidden_states), what feature-based use reads."""
    if keep is None:
        attend = functools.partial(self_attention_forward, causal=True) if causal else self_attention_forward
    else:
        attend = _UnpaddedAttention(keep, *attention_mask.shape, causal).forward
    blocks, hidden = [], [x]
    for l in range(cfg.num_hidden_layers):
        x, c = block_forward(params, cfg, l, x, attention_mask, rng, ops, attend)  # (B, T, C) or (N, C)
        blocks.append(c)
        hidden.append(x)
    return (x, blocks, hidden) if states else (x, blocks)


def blocks_backward(dx, blocks, cfg, grads, ops=layers, keep=None, grid=None):
    """Mirror of blocks_forward: dx (B, T, C), or (N, C) with `keep` and the (B, T) `grid` ->
    d(blocks' input) of the same shape; sets grads[h{l}.*] for every l."""
    attend_backward = self_attention_backward if keep is None else _UnpaddedAttention(keep, *grid).backward
    for l in reversed(range(cfg.num_hidden_layers)):
        dx = block_backward(dx, blocks[l], cfg, l, grads, ops, attend_backward)  # (B, T, C) or (N, C)
    return dx


class EncoderCache(NamedTuple):
    emb: EmbeddingsCache
    blocks: list  # L BlockCaches
    keep: np.ndarray | None  # (N,) flat indices b * T + t of the real tokens when padding was skipped
    grid: tuple  # (B, T)


def encoder_forward(params, cfg, input_ids, token_type_ids, attention_mask, rng=None, ops=layers, causal=False):
    """Embeddings -> L post-LN blocks: -> sequence_output (B, T, C), cache. Dropout runs only
    when `rng` is given. `ops` is the module of layer functions (layers, or kernels).
    causal=True: every block's attention is left-to-right (layers.attention_forward), so the
    output at position t depends on the tokens 0..t only, as in a GPT-style language model.
    encoder_backward needs no flag: the attention backward is the same for both masks."""
    x, c_emb = embeddings_forward(params, cfg, input_ids, token_type_ids, rng, ops)  # (B, T, C)
    x, blocks = blocks_forward(params, cfg, x, attention_mask, rng, ops, causal=causal)  # (B, T, C)
    return x, EncoderCache(c_emb, blocks, None, input_ids.shape)


def encoder_backward(dx, cache: EncoderCache, cfg, grads, ops=layers):
    """Mirror of encoder_forward, and of encoder_forward_unpadded (cache.keep says which ran):
    dx (B, T, C) -> fills `grads` (a dict) with every encoder gradient and returns it.
    grads["tok_emb"] may already hold the tied MLM decoder's part; the embedding's part is added."""
    keep, grid = cache.keep, cache.grid
    if keep is not None:
        dx = _pack(dx, keep)  # (B, T, C) -> (N, C)
    dx = blocks_backward(dx, cache.blocks, cfg, grads, ops, keep, grid)  # (B, T, C) or (N, C)
    if keep is not None and cache.emb.rows is None:  # the embedding ran on the whole grid
        dx = _unpack(dx, keep, *grid)  # (N, C) -> (B, T, C)
    return embeddings_backward(dx, cache.emb, grads, ops)


# ---------------------------------------------------------------------------------------------
# the fast path: the same encoder without the padding rows
#
# Padding tokens (input_mask 0) are never attended to and, in a pretraining batch, no loss reads
# them, so their rows in every per-token layer (linear, LayerNorm, GELU, dropout) are wasted work:
# 13.5% of the tokens in the tiny preset's data. These functions run the same blocks on the N real
# tokens only, packed as (N, C) rows (every per-token layer works row by row, so block_forward
# takes them as they are); attention alone needs the (B, T) grid, so `_UnpaddedAttention`
# scatters q, k, v back into it (zeros at padding, which the mask hides) and gathers the output
# again. The loss and every gradient equal the reference's (tests/test_model.py). With dropout on,
# the masks are drawn for the N real rows only, so they differ from the reference's masks.

def _pack(x, keep):
    """(B, T, D) -> (N, D): the rows of the real tokens."""
    return x.reshape(-1, x.shape[-1])[keep]


def _unpack(x, keep, B, T):
    """(N, D) -> (B, T, D) with zero rows at padding."""
    out = np.zeros((B * T, x.shape[-1]), dtype=x.dtype)  # (B*T, D)
    out[keep] = x
    return out.reshape(B, T, -1)


class _UnpaddedAttention:
    """The attention sublayer for (N, 3C) rows: onto the (B, T) grid, attend, back to rows
    (layers.attention_packed_forward; the Numba kernels attend on the rows themselves)."""

    def __init__(self, keep, B, T, causal=False):
        self.keep, self.B, self.T, self.causal = keep, B, T, causal

    def forward(self, qkv, attention_mask, NH, p_attn, rng, ops):
        return ops.attention_packed_forward(qkv, self.keep, (self.B, self.T), attention_mask, NH, p_attn, rng,
                                            self.causal)  # (N, 3C) -> (N, C)

    def backward(self, da, cache, NH, ops):
        return ops.attention_packed_backward(da, cache)  # (N, C) -> (N, 3C)


def encoder_forward_unpadded(params, cfg, input_ids, token_type_ids, attention_mask, rng=None, ops=layers,
                             causal=False, embed_padding=False):
    """encoder_forward on the real tokens only: -> sequence_output (B, T, C), zero at padding, and
    an EncoderCache with `keep`; encoder_backward is the mirror of both. The rows are packed right
    after the table lookups, so LayerNorm and dropout skip the padding too. `embed_padding` packs
    them after the whole embedding instead: ALBERT's and ELECTRA's order, whose embedding dropout
    masks are drawn on the (B, T) grid (their runs were made so)."""
    B, T = input_ids.shape
    keep = np.flatnonzero(attention_mask.reshape(-1))  # (N,)
    x, c_emb = embeddings_forward(params, cfg, input_ids, token_type_ids, rng, ops,
                                  None if embed_padding else keep)  # (N, C), or (B, T, C) with embed_padding
    if embed_padding:
        x = _pack(x, keep)  # (B, T, C) -> (N, C)
    x, blocks = blocks_forward(params, cfg, x, attention_mask, rng, ops, keep, causal)  # (N, C)
    return _unpack(x, keep, B, T), EncoderCache(c_emb, blocks, keep, (B, T))


# ---------------------------------------------------------------------------------------------
# heads and the pretraining loss

class Output(NamedTuple):
    sequence_output: np.ndarray  # (B, T, C)
    pooled_output: np.ndarray  # (B, C)
    mlm_logits: np.ndarray  # (B, T, V) from forward; (M, V) at the M real predictions from bert_forward
    nsp_logits: np.ndarray  # (B, 2)


class PoolerCache(NamedTuple):
    drop: Any  # dropout cache of x (N, C)
    linear: Any  # linear cache (N, C) -> (N, C')
    gelu: Any  # the GELU's cache, or None for tanh
    tanh: Any  # tanh's output (N, C') (its derivative is 1 - out^2), or None for a GELU


def dense_act_forward(x, w, b, p, rng, activation="tanh", ops=layers):
    """The pooler's layer on one position per row: x (N, C) -> dropout(p) -> x @ w + b ->
    activation -> (N, C'), cache. BERT's pooler is tanh without dropout (pooler_forward); the
    fine-tuning heads' pooled layers add a dropout or take a GELU (ELECTRA's classification head
    and sequence summary; finetune/heads.Pool). activation: "tanh" or a GELU by transformers'
    name (ACTIVATIONS). Dropout only when `rng` is given."""
    x, c_drop = ops.dropout_forward(x, p if rng is not None else 0.0, rng)  # (N, C)
    t, c_lin = ops.linear_forward(x, w, b)  # (N, C) @ (C, C') -> (N, C')
    if activation == "tanh":
        out = np.tanh(t)  # (N, C')
        return out, PoolerCache(c_drop, c_lin, None, out)
    out, c_gelu = ops.gelu_forward(t, ACTIVATIONS[activation])  # (N, C')
    return out, PoolerCache(c_drop, c_lin, c_gelu, None)


def dense_act_backward(dout, cache: PoolerCache, ops=layers):
    """Mirror of dense_act_forward: dout (N, C') -> dx (N, C), dw (C, C'), db (C',)."""
    if cache.tanh is not None:
        dt = dout * (1.0 - cache.tanh * cache.tanh)  # (N, C'): forward was out = tanh(t)
    else:
        dt = ops.gelu_backward(dout, cache.gelu)  # (N, C')
    dx, dw, db = ops.linear_backward(dt, cache.linear)  # (N, C)
    return ops.dropout_backward(dx, cache.drop), dw, db


def pooler_forward(params, seq, ops):
    """BERT's pooler, the [CLS] vector through dense and tanh (dense_act_forward, no dropout):
    seq (B, T, C) -> pooled (B, C), cache."""
    return dense_act_forward(seq[:, 0], params["pool.w"], params["pool.b"], 0.0, None, "tanh", ops)  # (B, C)


def pooler_backward(dpooled, cache: PoolerCache, grads, ops):
    """Mirror of pooler_forward: dpooled (B, C) -> d(seq[:, 0]) (B, C), which the caller adds at
    [CLS]; sets grads["pool.w"], grads["pool.b"]."""
    dcls, grads["pool.w"], grads["pool.b"] = dense_act_backward(dpooled, cache, ops)  # (B, C)
    return dcls


class MLMTransformCache(NamedTuple):
    dense: Any  # linear cache, h (M, C) -> (M, E)
    act: Any  # GELU cache
    ln: Any  # LayerNorm cache
    t: np.ndarray  # (M, E) the transformed vectors the decoder reads
    tok_emb: np.ndarray  # (V, E) the decoder's matrix: the word embeddings (tied)


def mlm_transform_forward(params, cfg, h, ops, act=None):
    """The MLM head: dense -> GELU -> LayerNorm, then logits against the tied word embeddings.
    Shapes: h (M, C) -> logits (M, V), cache. E is tok_emb's width: C for BERT and XLNet, the
    embedding size for ALBERT and ELECTRA's generator. `act` names the activation (an ACTIVATIONS
    key), cfg.hidden_act by default; ELECTRA's generator passes "gelu", the exact one, whatever
    its hidden_act (transformers' ElectraGeneratorPredictions)."""
    t, c_dense = ops.linear_forward(h, params["mlm.dense.w"], params["mlm.dense.b"])  # (M, E)
    t, c_act = ops.gelu_forward(t, ACTIVATIONS[act or cfg.hidden_act])  # (M, E)
    t, c_ln = ops.layernorm_forward(t, params["mlm.ln.w"], params["mlm.ln.b"], cfg.layer_norm_eps)  # (M, E)
    logits, _ = ops.linear_forward(t, params["tok_emb"].T, params["mlm.bias"])  # (M, E) @ (E, V) + (V,) -> (M, V)
    return logits, MLMTransformCache(c_dense, c_act, c_ln, t, params["tok_emb"])


def mlm_transform_backward(dlogits, cache: MLMTransformCache, grads, ops):
    """Mirror of mlm_transform_forward: dlogits (M, V) -> dh (M, C); sets the mlm.* grads and
    puts the decoder's side of the tie in grads["tok_emb"]. Every model runs it before the input
    embedding's backward, which adds the lookup's side: decoder + lookup, the order of the sum."""
    grads["mlm.bias"] = ops.column_sum(dlogits)  # (V,)
    # forward was: logits = t @ tok_emb.T + mlm.bias
    dt = dlogits @ cache.tok_emb  # (M, V) @ (V, E) -> (M, E)
    dtok = dlogits.T @ cache.t  # (V, M) @ (M, E) -> (V, E) the decoder side of the tie
    grads["tok_emb"] = ops.add(grads["tok_emb"], dtok) if "tok_emb" in grads else dtok  # (V, E) gradients add up at forks
    dt, grads["mlm.ln.w"], grads["mlm.ln.b"] = ops.layernorm_backward(dt, cache.ln)  # (M, E)
    dt = ops.gelu_backward(dt, cache.act)  # (M, E)
    dh, grads["mlm.dense.w"], grads["mlm.dense.b"] = ops.linear_backward(dt, cache.dense)  # (M, C)
    return dh


class MLMLossCache(NamedTuple):
    head: MLMTransformCache
    ce: Any  # cross-entropy cache
    flat_pos: np.ndarray  # (M,) b * T + t of the predicted positions (one may repeat)
    seq_shape: tuple  # (B, T, C)


def mlm_loss_forward(params, cfg, seq, flat_pos, targets, ops, act=None):
    """The MLM loss at M positions: their vectors through the MLM head (mlm_transform_forward,
    `act` as there), mean cross-entropy against `targets`. Shapes: seq (B, T, C), flat_pos (M,)
    = b * T + t, targets (M,) -> loss (), logits (M, V), cache."""
    B, T, C = seq.shape
    h = seq.reshape(B * T, C)[flat_pos]  # (M, C)
    logits, c_head = mlm_transform_forward(params, cfg, h, ops, act)  # (M, V)
    loss, c_ce = ops.cross_entropy_forward(logits, targets)
    return loss, logits, MLMLossCache(c_head, c_ce, flat_pos, seq.shape)


def mlm_loss_backward(dloss, cache: MLMLossCache, grads, ops):
    """Mirror of mlm_loss_forward: dloss = d(total)/d(MLM loss) -> dseq (B, T, C), zero at the
    positions no prediction reads; sets the head's grads (mlm_transform_backward)."""
    B, T, C = cache.seq_shape
    dlogits = ops.cross_entropy_backward(dloss, cache.ce)  # (M, V)
    dh = mlm_transform_backward(dlogits, cache.head, grads, ops)  # (M, C); grads["tok_emb"]: the decoder's side
    # forward was: h = seq.reshape(B*T, C)[flat_pos]; positions may repeat, so accumulate
    dseq = np.zeros((B * T, C), dtype=dh.dtype)  # (B*T, C)
    np.add.at(dseq, cache.flat_pos, dh)
    return dseq.reshape(B, T, C)  # (B, T, C)


class HeadsCache(NamedTuple):
    pool: PoolerCache | None  # pool, nsp, nsp_ce: None for the objectives without NSP
    nsp: Any
    nsp_ce: Any
    mlm: Any  # MLMLossCache at the M predicted positions (objective "ltr": every position that predicts)


def check_batch(cfg, batch):
    """Validate a pretraining batch (docs/bert-notes.md §3.7 names) and return it as int64/float arrays."""
    need = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
            "masked_lm_weights", "next_sentence_labels")
    missing = [k for k in need if k not in batch]
    if missing:
        raise ValueError(f"batch is missing {missing}; expected the features {list(need)}")
    ids, seg, mask = check_inputs(cfg, batch["input_ids"], batch["segment_ids"], batch["input_mask"])
    B, T = ids.shape
    pos = as_int("masked_lm_positions", batch["masked_lm_positions"])
    if pos.ndim != 2 or pos.shape[0] != B:
        raise ValueError(f"masked_lm_positions has shape {pos.shape}, expected ({B}, P)")
    P = pos.shape[1]
    if pos.size and (pos.min() < 0 or pos.max() >= T):
        raise ValueError(f"masked_lm_positions contains {int(pos.max() if pos.max() >= T else pos.min())}, "
                         f"outside the sequence [0, {T})")
    mlm_ids = as_int("masked_lm_ids", batch["masked_lm_ids"], (B, P))
    w = np.asarray(batch["masked_lm_weights"])
    if w.shape != (B, P):
        raise ValueError(f"masked_lm_weights has shape {w.shape}, expected {(B, P)}")
    if mlm_ids.size and (mlm_ids.min() < 0 or mlm_ids.max() >= cfg.vocab_size):
        raise ValueError(f"masked_lm_ids contains {int(mlm_ids.max())}, outside the vocabulary [0, {cfg.vocab_size})")
    nsp = as_int("next_sentence_labels", batch["next_sentence_labels"]).reshape(-1)
    if nsp.shape != (B,):
        raise ValueError(f"next_sentence_labels has {nsp.shape[0]} entries, expected {B}")
    if nsp.size and (nsp.min() < 0 or nsp.max() > 1):
        raise ValueError(f"next_sentence_labels must be 0 (IsNext) or 1 (random), got {int(nsp.max())}")
    # the losses read [CLS] and the masked tokens; none of them may be padding (unpadding skips it)
    if B and not mask[:, 0].all():
        b = int(np.flatnonzero(mask[:, 0] == 0)[0])
        raise ValueError(f"sequence {b} starts with padding (input_mask[{b}, 0] = 0); the NSP head reads "
                         f"position 0, which must be the real [CLS] token")
    bad = (w > 0) & (np.take_along_axis(mask, pos, axis=1) == 0)  # (B, P)
    if bad.any():
        b, j = (int(i[0]) for i in np.nonzero(bad))
        raise ValueError(f"masked_lm_positions[{b}, {j}] = {int(pos[b, j])} is padding (input_mask 0) but has "
                         f"masked_lm_weights {float(w[b, j]):g}; a prediction must be at a real token")
    return ids, seg, mask, pos, mlm_ids, w, nsp


class Metrics(NamedTuple):
    loss: float
    mlm_loss: float  # objective "ltr": the next-token loss (it runs through the same head)
    nsp_loss: float  # 0 (and the NSP counts 0) for the objectives without NSP
    mlm_correct: int  # argmax hits over the real predictions
    mlm_count: int  # real predictions (weight > 0); objective "ltr": next-token predictions
    nsp_correct: int
    nsp_count: int
    nsp_isnext_correct: int  # hits among the IsNext pairs (label 0): how often the model sees a real next
    nsp_isnext_count: int

    def sums(self) -> dict:
        """{name: (sum, count)}: each number and what it is a mean over, as the training loop logs
        them (loop/engine.py): the losses (each a mean already) over 1, the accuracies as hits
        over counted."""
        return {"loss": (self.loss, 1), "mlm_loss": (self.mlm_loss, 1), "nsp_loss": (self.nsp_loss, 1),
                "mlm_acc": (self.mlm_correct, self.mlm_count), "nsp_acc": (self.nsp_correct, self.nsp_count)}


class LossGradsMetrics(NamedTuple):
    loss: float
    grads: dict | None  # same keys as params
    metrics: Metrics


# ---------------------------------------------------------------------------------------------
# pretraining objectives: BERT's and the two ablations of the paper's Table 5 (docs/bert-notes.md §5.6)

OBJECTIVES = ("mlm_nsp", "mlm", "ltr")
# "mlm_nsp"  BERT: masked LM + next sentence prediction, loss = MLM loss + NSP loss.
# "mlm"      No NSP: the same masked pairs, loss = MLM loss alone (pooler and NSP head untrained).
# "ltr"      LTR & No NSP (OpenAI-GPT-like): causal attention, every real token t predicts token
#            t + 1 through the MLM head (dense -> GELU -> LayerNorm -> tied decoder), on the
#            token ids before masking; no NSP.


def check_objective(objective: str) -> None:
    if objective not in OBJECTIVES:
        raise ValueError(f"objective={objective!r} is not one of {OBJECTIVES}")


def trained_params(names, objective: str = "mlm_nsp") -> list[str]:
    """The parameters (of `names`, in that order) that the objective's loss reaches: every one for
    "mlm_nsp"; for "mlm" and "ltr" all but the pooler and the NSP head (pool.*, nsp.*), which get
    no gradient and are left as they are (not even weight-decayed)."""
    check_objective(objective)
    if objective == "mlm_nsp":
        return list(names)
    return [k for k in names if k.split(".", 1)[0] not in ("pool", "nsp")]


def ltr_inputs(cfg, batch):
    """A batch for the left-to-right LM -> ids, seg, mask (B, T) int64, with the token ids before
    masking: a pretraining batch's masked_lm_ids are put back at its masked_lm_positions (as
    pretraining_data.instances_to_features does for unmasked_input_ids), so static and dynamic
    batches give the same text; a batch without masked_lm_* features is taken as it is."""
    if "masked_lm_positions" in batch:
        ids, seg, mask, pos, mlm_ids, w, _ = check_batch(cfg, batch)
        ids = ids.copy()  # (B, T)
        b, j = np.nonzero(w > 0)  # (M,), (M,) the real predictions
        ids[b, pos[b, j]] = mlm_ids[b, j]
        return ids, seg, mask
    ids, seg, mask = check_inputs(cfg, batch["input_ids"], batch.get("segment_ids"), batch.get("input_mask"))
    if ids.shape[0] and not mask[:, 0].all():
        b = int(np.flatnonzero(mask[:, 0] == 0)[0])
        raise ValueError(f"sequence {b} starts with padding (input_mask[{b}, 0] = 0); a left-to-right "
                         f"model reads every sequence from its first real token at position 0")
    return ids, seg, mask


def mlm_targets(pos, mlm_ids, w, T):
    """The real predictions of a pretraining batch (weight > 0; an unused slot, weight 0, would add
    nothing to the loss, so it is skipped): pos, mlm_ids, w (B, P) -> flat_pos (M,) = b * T +
    position, targets (M,).

    >>> mlm_targets(np.array([[1, 3], [2, 0]]), np.array([[7, 8], [9, 0]]), np.array([[1., 1.], [1., 0.]]), 5)
    (array([1, 3, 7]), array([7, 8, 9]))
    """
    real = w.reshape(-1) > 0  # (B*P,)
    flat_pos = (np.arange(pos.shape[0])[:, None] * T + pos).reshape(-1)[real]  # (M,)
    return flat_pos, mlm_ids.reshape(-1)[real]  # (M,), (M,)


def ltr_targets(ids, mask):
    """Next-token prediction sites: position t predicts token t + 1 when both are real; the last
    real token and the padding predict nothing. -> flat_pos (M,) = b * T + t, targets (M,).

    >>> ltr_targets(np.array([[2, 7, 8, 3, 0]]), np.array([[1, 1, 1, 1, 0]]))
    (array([0, 1, 2]), array([7, 8, 3]))
    """
    B, T = ids.shape
    site = np.zeros((B, T), dtype=bool)  # (B, T)
    site[:, :-1] = (mask[:, :-1] > 0) & (mask[:, 1:] > 0)
    flat_pos = np.flatnonzero(site)  # (M,) b * T + t
    targets = ids.reshape(-1)[flat_pos + 1]  # (M,) the token at t + 1 (same row: t + 1 < T)
    return flat_pos, targets


def bert_forward(params, cfg, batch, rng=None, ops=layers, unpad=True, objective="mlm_nsp"):
    """Pretraining forward: -> (loss, metrics, cache). Loss = mean MLM cross-entropy over the real
    predictions (weight > 0) + mean NSP cross-entropy. Dropout only when `rng` is given.

    Google divides the MLM sum by (sum of weights + 1e-5); transformers, whose loss minibert
    matches to float precision, takes the plain mean. The difference is 1e-5 / n relative.
    `unpad`: run the encoder's fast path, encoder_forward_unpadded (same loss and gradients).
    `ops` is the module of layer functions: minibert.layers (the reference) or minibert.kernels.
    `objective` (OBJECTIVES): "mlm" drops the NSP loss (loss = MLM loss); "ltr" runs the encoder
    with causal attention and takes the mean next-token cross-entropy over every real token
    that has a real successor (ltr_targets), through the same MLM head and tied decoder.
    """
    check_objective(objective)
    if objective == "ltr":
        ids, seg, mask = ltr_inputs(cfg, batch)
    else:
        ids, seg, mask, pos, mlm_ids, w, nsp = check_batch(cfg, batch)
    B, T = ids.shape
    encoder = encoder_forward_unpadded if unpad and not mask.all() else encoder_forward
    seq, enc_cache = encoder(params, cfg, ids, seg, mask, rng, ops, causal=objective == "ltr")  # (B, T, C)
    pooled = nsp_logits = c_pool = c_nsp = c_nsp_ce = None  # no NSP head unless the objective has one
    if objective == "mlm_nsp":
        # NSP: pooler on [CLS], then a 2-way classifier
        pooled, c_pool = pooler_forward(params, seq, ops)  # (B, C)
        nsp_logits, c_nsp = ops.linear_forward(pooled, params["nsp.w"], params["nsp.b"])  # (B, 2)
        nsp_loss, c_nsp_ce = ops.cross_entropy_forward(nsp_logits, nsp)
    if objective == "ltr":
        # LTR: every real token that has a real successor predicts it (flat index b * T + t)
        flat_pos, targets = ltr_targets(ids, mask)  # (M,), (M,)
    else:
        # MLM: the M real predictions (weight > 0; flat index b * T + position)
        flat_pos, targets = mlm_targets(pos, mlm_ids, w, T)  # (M,), (M,)
    # transform and tied decoder at the M gathered positions
    mlm_loss, mlm_logits, c_mlm = mlm_loss_forward(params, cfg, seq, flat_pos, targets, ops)  # mlm_logits (M, V)
    mlm_hits = int((mlm_logits.argmax(-1) == targets).sum())
    if objective == "mlm_nsp":
        loss = mlm_loss + nsp_loss
        nsp_hit = nsp_logits.argmax(-1) == nsp  # (B,)
        metrics = Metrics(float(loss), float(mlm_loss), float(nsp_loss), mlm_hits, int(targets.size),
                          int(nsp_hit.sum()), int(B), int((nsp_hit & (nsp == 0)).sum()), int((nsp == 0).sum()))
    else:
        loss = mlm_loss
        metrics = Metrics(float(loss), float(mlm_loss), 0.0, mlm_hits, int(targets.size), 0, 0, 0, 0)
    heads = HeadsCache(c_pool, c_nsp, c_nsp_ce, c_mlm)
    out = Output(seq, pooled, mlm_logits, nsp_logits)
    return loss, metrics, (enc_cache, heads, out)


def bert_backward(params, cfg, cache, ops=layers, dmlm=1.0, dnsp=1.0):
    """Mirror of bert_forward, from the loss back to every parameter. -> grads with the keys of
    params that the objective trains (trained_params): all of them for "mlm_nsp"; without the
    pooler and NSP head for "mlm" and "ltr" (the cache tells: it has no NSP part then).
    `dmlm`, `dnsp`: the weights of the two losses in the loss differentiated, 1 for bert_forward's
    loss; a micro-batch of an accumulated step passes its share of the step's predictions and
    pairs (minibert/train/pretraining_step.py, docs/bert-notes.md §10.2)."""
    enc_cache, hc, _ = cache
    grads = {}
    # the chain rule starts here: loss = dmlm * mlm_loss (+ dnsp * nsp_loss), so d(loss)/d(mlm_loss)
    # = dmlm and d(loss)/d(nsp_loss) = dnsp (both 1 for the loss bert_forward returns)
    dseq = mlm_loss_backward(dmlm, hc.mlm, grads, ops)  # (B, T, C) MLM head; grads["tok_emb"]: the decoder's side
    if hc.nsp_ce is not None:  # NSP head (objective "mlm_nsp")
        dnsp_logits = ops.cross_entropy_backward(dnsp, hc.nsp_ce)  # (B, 2)
        dpooled, grads["nsp.w"], grads["nsp.b"] = ops.linear_backward(dnsp_logits, hc.nsp)  # (B, C)
        dcls = pooler_backward(dpooled, hc.pool, grads, ops)  # (B, C)
        dseq[:, 0] += dcls  # gradients add up at forks ([CLS] feeds the pooler and maybe the MLM head)
    grads = encoder_backward(dseq, enc_cache, cfg, grads, ops)  # the reference's or the fast path's mirror
    return {k: grads[k] for k in params if k in grads}  # params' keys and order (the trained ones)


HEAD_GROUPS = ("pool", "mlm", "nsp")  # parameter-name prefixes of the optional heads


def train_rng(train, rng):
    if not train:
        return None
    if rng is None:
        raise ValueError("train=True needs rng (a np.random.Generator) for dropout")
    return rng
