"""The fine-tuning heads: forward and backward of the four head shapes (paper Fig. 4).

Every head is the same small stack on top of the encoder:

    encoder -> (one position per row -> dropout -> dense -> activation) -> dropout -> linear -> loss

and its backward runs the stack in reverse, then hands d(sequence_output) to the encoder's
backward. What differs between encoders is data, an `Encoder` (below): how to run and backprop
it, and the `Head` of each shape on it (BERT's and ALBERT's pooled heads read their
pretrained pooler, tanh(dense); ELECTRA's read the first token through a new dense -> GELU).
The head shapes differ only in what the last linear layer reads and how its logits meet the labels:

    sequence classification  pooled (B, C) -> (B, K)     cross-entropy; K = 1: regression, MSE
    token classification     sequence (B, T, C) -> (B, T, K)  cross-entropy, -100 ignored
    multiple choice          (B, NC, T) flattened to (B*NC, T); pooled -> (B*NC, 1) -> (B, NC), CE
    question answering       sequence (B, T, C) -> (B, T, 2) = start, end; (CE(start) + CE(end)) / 2

Parameters use minibert's names (the encoder's, e.g. model.param_shapes, and its pooler) plus the
head: `cls.w` (C, K) / `cls.b` (K,) for the classifiers (transformers: `classifier`), `qa.w` (C, 2)
/ `qa.b` (2,) for span extraction (transformers: `qa_outputs`, which has no dropout); ELECTRA's
dense layers are `cls.dense` / `summary`, its out_proj `cls.out` (finetune/electra_tasks.py). The
losses match transformers' to float precision: mean cross-entropy over the counted targets, mean
squared error for regression, and for QA start/end positions outside the window are clamped to T
and ignored, as transformers does.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, NamedTuple

import numpy as np

from minibert import layers
from minibert.finetune.bilstm import bilstm_backward, bilstm_forward
from minibert.model import (blocks_forward, check_inputs, dense_act_backward, dense_act_forward, embeddings_forward,
                            encoder_backward, encoder_forward, encoder_forward_unpadded)

SHAPES = ("sequence", "token", "choice", "qa")  # the four head shapes, by what their linear layer reads


# ---------------------------------------------------------------------------------------------
# the classifier: dropout -> linear

class ClassifierCache(NamedTuple):
    drop: Any
    linear: Any


def classifier_forward(x, w, b, p, rng, ops=layers):
    """x (N, C) -> logits (N, K), cache. Dropout with probability p only when `rng` is given."""
    x, c_drop = ops.dropout_forward(x, p if rng is not None else 0.0, rng)  # (N, C)
    logits, c_lin = ops.linear_forward(x, w, b)  # (N, C) @ (C, K) -> (N, K)
    return logits, ClassifierCache(c_drop, c_lin)


def classifier_backward(dlogits, cache: ClassifierCache, ops=layers):
    """Mirror of classifier_forward: dlogits (N, K) -> dx (N, C), dw (C, K), db (K,)."""
    dx, dw, db = ops.linear_backward(dlogits, cache.linear)  # (N, C)
    return ops.dropout_backward(dx, cache.drop), dw, db


# ---------------------------------------------------------------------------------------------
# mean squared error (regression, num_labels == 1, as STS-B)

class MSECache(NamedTuple):
    diff: np.ndarray  # (N,) prediction - target


def mse_forward(pred, target):
    """pred (N,), target (N,) -> mean((pred - target)^2) (a scalar in pred's dtype), cache."""
    if pred.shape != target.shape:
        raise ValueError(f"regression targets have shape {target.shape}, expected {pred.shape}")
    diff = pred - target.astype(pred.dtype)  # (N,)
    return pred.dtype.type(np.mean(diff * diff)), MSECache(diff)


def mse_backward(dloss, cache: MSECache):
    """-> dpred (N,) = dloss * 2 (pred - target) / N."""
    return cache.diff * (2.0 * dloss / max(cache.diff.size, 1))


# ---------------------------------------------------------------------------------------------
# the encoder a head sits on, and each task's head on it, as data

class Pool(NamedTuple):
    """The pooled heads' layer (sequence, choice) on one position of each row:
    h = activation(dropout(x) @ w + b), model.dense_act_forward (BERT's pooler's layer)."""

    dense: str  # its tensors' prefix: pool (BERT's pretrained pooler), cls.dense / summary (ELECTRA's, new)
    activation: str  # the config attribute naming its activation: "tanh" or a GELU (model.ACTIVATIONS)
    dropout: str | None = None  # the config attribute of the dropout before the dense (None: none)
    pretrained: bool = False  # its tensors come with the pretraining checkpoint (BERT's pooler)


class Head(NamedTuple):
    """A task's head on an encoder, as data: [Pool on one position per row ->] dropout -> out."""

    out: str  # the last linear's prefix: cls (transformers: classifier), cls.out (out_proj), qa (qa_outputs)
    dropout: str | None  # the config attribute of the dropout before it (None: none, as before qa_outputs)
    pool: Pool | None = None  # sequence, choice: the layer on one position; None: every position feeds `out`


def pooler_heads(dropout: str) -> dict[str, Head]:
    """BERT's four heads (transformers' BertFor*) on an encoder with BERT's pooler (BERT's, ALBERT's):
    sequence and choice read the pooled [CLS], token and qa every position; `dropout` is the config
    attribute of the dropout before the classifier."""
    pooled = Head("cls", dropout, Pool("pool", "pooler_activation", pretrained=True))
    return {"sequence": pooled, "token": Head("cls", dropout), "choice": pooled, "qa": Head("qa", None)}


def head_shapes(head: Head, C: int, K: int) -> dict[str, tuple]:
    """A task head's new tensors (the task class initialises them; a pretraining checkpoint has
    none): its pooled layer unless pretrained (ELECTRA's dense (C, C)), then the last linear (C, K)."""
    shapes = {}
    if head.pool is not None and not head.pool.pretrained:
        shapes.update({f"{head.pool.dense}.w": (C, C), f"{head.pool.dense}.b": (C,)})
    shapes.update({f"{head.out}.w": (C, K), f"{head.out}.b": (K,)})
    return shapes


class Encoder(NamedTuple):
    """Everything a task class (finetune/models.py's TaskModel) needs of the encoder under its
    head, as data and small functions: BERT's (models.BERT_ENCODER and its causal variants),
    ALBERT's (finetune/albert_tasks.py), ELECTRA's discriminator (finetune/electra_tasks.py). The
    heads' math below uses the first four fields; TaskModel the rest."""

    # running it
    forward: Callable  # (params, cfg, ids, seg, mask, rng, ops, unpad) -> sequence_output (B, T, C), cache
    backward: Callable  # (dseq (B, T, C), cache, cfg, grads, ops) -> grads, the encoder's added
    heads: Mapping[str, Head]  # the Head of each shape (SHAPES) on this encoder
    pool_last: bool  # the pooled heads read the last real token instead of [CLS] (position 0)
    layers: Callable  # (params, cfg, ids, seg, mask, ops) -> L + 1 hidden states (B, T, C), dropout off
    # its parameters and checkpoints
    model_type: str  # config.json's model_type; with the task, the key of finetune/registry.py's TASK_CLASSES
    config: type  # the task config class: TaskKeys + the pretraining config class (`config.base`)
    init_params: Callable  # (config, seed, dtype) -> the pretraining model's parameters
    param_shapes: Callable  # (config) -> their names and shapes
    pretraining_heads: tuple  # parameter groups of the pretraining heads, dropped (a pretrained Pool is kept)
    read: Callable  # (directory, dtype, verify) -> checkpoint.Pretrained, params under minibert's names
    to_hf: Callable  # (params or grads, config, head shape) -> transformers' names and layouts
    hf_config: Callable  # (task model) -> its config.json as a dict
    carried_keys: tuple = ()  # config.json keys any checkpoint of the family passes on (ELECTRA's head keys)


# BERT's encoder, padded or not, and its two left-to-right variants (the Encoders made of these
# are in finetune/models.py, beside BERT's task config)
def run_encoder(params, cfg, ids, seg, mask, rng, ops, unpad=True, causal=False):
    """-> sequence_output (B, T, C), cache. With padding in the batch and `unpad`, the fast path
    (encoder_forward_unpadded: same outputs at the real tokens, zeros at padding). causal=True:
    left-to-right attention (position t sees 0..t), as an "ltr" model was pretrained."""
    if unpad and not mask.all():
        return encoder_forward_unpadded(params, cfg, ids, seg, mask, rng, ops, causal=causal)
    return encoder_forward(params, cfg, ids, seg, mask, rng, ops, causal=causal)


# The paper's "LTR & No NSP" model fine-tuned as it was pretrained, left to right (its Table 5;
# lifting the mask hurt, the paper says). Under that mask [CLS] sees only itself, so the pooled
# heads read the last real token, the one that has seen the whole input, as OpenAI GPT does
# (Encoder.pool_last). The backward is BERT's: the attention backward is the same for both masks.
def run_causal_encoder(params, cfg, ids, seg, mask, rng, ops, unpad=True):
    return run_encoder(params, cfg, ids, seg, mask, rng, ops, unpad, causal=True)




# The paper's "LTR & No NSP + BiLSTM" row: a randomly initialised BiLSTM (C/2 each way, so the
# heads still read C numbers per position) on top of the left-to-right encoder, trained with it.
# Its backward direction gives every position the right-hand context back; the pooled heads read
# [CLS] again (the BiLSTM's backward half there has read the whole input).
def run_causal_bilstm_encoder(params, cfg, ids, seg, mask, rng, ops, unpad=True):
    seq, enc = run_encoder(params, cfg, ids, seg, mask, rng, ops, unpad, causal=True)  # (B, T, C)
    out, lstm = bilstm_forward(seq, mask, params, "lstm")  # (B, T, C)
    return out, (enc, lstm)


def run_bilstm_encoder_backward(dseq, cache, cfg, grads, ops):
    enc, lstm = cache
    dx, lstm_grads = bilstm_backward(dseq, lstm)  # dx (B, T, C)
    grads.update(lstm_grads)
    return encoder_backward(dx, enc, cfg, grads, ops)


# ---------------------------------------------------------------------------------------------
# the four head shapes: logits, then loss, then backward

class HeadCache(NamedTuple):
    shape: str  # the head shape (SHAPES)
    seq_shape: tuple  # (B', T, C) of the encoder's output (B' = B * NC for multiple choice)
    enc: Any
    pool: Any  # PoolerCache of the pooled heads' layer (sequence, choice), or None
    head: ClassifierCache  # the last dropout -> linear
    loss: Any  # cross-entropy / MSE cache(s)
    encoder: Encoder  # the encoder that ran: its backward undoes it, its heads name the tensors
    pool_at: Any = None  # (B',) the position each row's pooled layer read (None: [CLS], position 0)


def _flatten_choices(a, name):
    a = np.asarray(a)
    if a.ndim != 3:
        raise ValueError(f"multiple choice {name} must be (batch, choices, seq_len), got shape {a.shape}")
    return a.reshape(-1, a.shape[-1])  # (B, NC, T) -> (B*NC, T)


def head_inputs(cfg, shape, input_ids, token_type_ids=None, attention_mask=None):
    """The inputs of a head shape, checked -> (ids, seg, mask) (B', T) and grid: multiple choice's (B, NC)
    inputs flattened to B' = B*NC rows (grid (B, NC)), the other tasks' as they are (grid None)."""
    if shape not in SHAPES:
        raise ValueError(f"head shape {shape!r} is not one of {SHAPES}")
    grid = None
    if shape == "choice":
        grid = np.shape(input_ids)[:2]  # (B, NC)
        input_ids = _flatten_choices(input_ids, "input_ids")
        token_type_ids = None if token_type_ids is None else _flatten_choices(token_type_ids, "token_type_ids")
        attention_mask = None if attention_mask is None else _flatten_choices(attention_mask, "attention_mask")
    return (*check_inputs(cfg, input_ids, token_type_ids, attention_mask), grid)


def _dropout_p(cfg, attribute: str | None) -> float:
    """A head's dropout probability: the config attribute a Head or Pool names (None: no dropout)."""
    return 0.0 if attribute is None else getattr(cfg, attribute)


def head_logits(params, cfg, shape, input_ids, token_type_ids=None, attention_mask=None, rng=None,
                ops=layers, unpad=True, *, encoder: Encoder):
    """The head's logits -> (logits, partial cache). Shapes: sequence (B, K), token (B, T, K),
    choice (B, NC), qa (B, T, 2) (start in [..., 0], end in [..., 1])."""
    ids, seg, mask, grid = head_inputs(cfg, shape, input_ids, token_type_ids, attention_mask)
    seq, enc = encoder.forward(params, cfg, ids, seg, mask, rng, ops, unpad)  # (B', T, C)
    head = encoder.heads[shape]
    B_, T, C = seq.shape
    pool = pool_at = None
    if head.pool is not None:  # sequence, choice: one position of each row
        if encoder.pool_last:  # the last real token of each row
            pool_at = mask.sum(axis=1).astype(np.int64) - 1  # (B',)
            x = seq[np.arange(B_), pool_at]  # (B', C)
        else:
            x = seq[:, 0]  # (B', C) [CLS], the first token
        d = head.pool.dense
        x, pool = dense_act_forward(x, params[d + ".w"], params[d + ".b"], _dropout_p(cfg, head.pool.dropout), rng,
                                    getattr(cfg, head.pool.activation), ops)  # (B', C)
    else:  # token, qa: every position
        x = seq.reshape(B_ * T, C)  # (B', T, C) -> (B'*T, C)
    logits, c_out = classifier_forward(x, params[head.out + ".w"], params[head.out + ".b"],
                                       _dropout_p(cfg, head.dropout), rng, ops)  # (B', K) or (B'*T, K)
    if shape == "choice":
        logits = logits.reshape(grid)  # (B*NC, 1) -> (B, NC)
    elif head.pool is None:
        logits = logits.reshape(B_, T, -1)  # (B, T, K); qa: (B, T, 2)
    return logits, HeadCache(shape, (B_, T, C), enc, pool, c_out, None, encoder, pool_at)


def _labels(batch, key, shape=None):
    if key not in batch:
        raise ValueError(f"batch is missing {key!r}")
    a = np.asarray(batch[key])
    if shape is not None and a.shape != shape:
        raise ValueError(f"{key} has shape {a.shape}, expected {shape}")
    return a


def head_forward(params, cfg, shape, batch, rng=None, ops=layers, unpad=True, *, encoder: Encoder):
    """Batch (input_ids, input_mask, segment_ids and the labels) -> (loss, logits, cache).

    Labels: `labels` (B,) class ids, or float targets when the head has one output (regression);
    token: `labels` (B, T) with -100 where no loss is taken; choice: `labels` (B,) in [0, NC);
    qa: `start_positions`, `end_positions` (B,), positions outside [0, T) are ignored.
    """
    logits, c = head_logits(params, cfg, shape, batch["input_ids"], batch.get("segment_ids"),
                            batch.get("input_mask"), rng, ops, unpad, encoder=encoder)
    return head_loss(logits, c, batch, ops)


def head_loss(logits, c, batch, ops=layers):
    """The loss of a head's logits (head_logits') -> (loss, logits, the cache `c` with its loss
    cache): CE for classes and choices (a sequence classifier's weighted by class when the batch
    has `class_weights` (K,)), MSE for one output, QA's (CE(start) + CE(end)) / 2 with
    out-of-window positions ignored."""
    shape = c.shape
    if shape == "qa":
        B, T, _ = logits.shape
        losses = []
        for i, key in enumerate(("start_positions", "end_positions")):
            pos = np.clip(_labels(batch, key, (B,)).astype(np.int64), 0, T)  # (B,) T = out of window
            loss_i, c_i = ops.cross_entropy_forward(np.ascontiguousarray(logits[..., i]), pos, ignore_index=T)
            losses.append((loss_i, c_i))
        loss = (losses[0][0] + losses[1][0]) / 2
        return logits.dtype.type(loss), logits, c._replace(loss=(losses[0][1], losses[1][1]))
    if shape == "sequence" and logits.shape[-1] == 1:  # regression
        target = _labels(batch, "labels", (logits.shape[0],)).astype(logits.dtype)
        loss, c_loss = mse_forward(logits[:, 0], target)
        return loss, logits, c._replace(loss=c_loss)
    labels = _labels(batch, "labels", logits.shape[:-1]).astype(np.int64)
    class_weights = batch.get("class_weights")  # (K,): a classifier's loss weighted by class, as torch's weight=
    if class_weights is not None and shape != "sequence":
        raise ValueError(f"class weights are for sequence classification, not a {shape} head")
    loss, c_loss = ops.cross_entropy_forward(logits, labels, class_weights=class_weights)
    return loss, logits, c._replace(loss=c_loss)


def head_backward(params, cfg, cache: HeadCache, ops=layers):
    """Mirror of head_forward: from the loss back to every parameter -> grads (keys of params)."""
    B_, T, C = cache.seq_shape
    head = cache.encoder.heads[cache.shape]
    grads = {}
    dx, grads[head.out + ".w"], grads[head.out + ".b"] = classifier_backward(head_loss_backward(cache, ops),
                                                                             cache.head, ops)  # (N, C)
    if head.pool is not None:  # sequence and choice: dx is d(h) (B', C), h from one position per row
        d = head.pool.dense
        # forward was: h = activation(dropout(seq[:, 0]) @ w + b)
        dx, grads[d + ".w"], grads[d + ".b"] = dense_act_backward(dx, cache.pool, ops)  # (B', C)
        dseq = np.zeros((B_, T, C), dtype=dx.dtype)  # (B', T, C): only that position feeds the head
        if cache.pool_at is None:
            dseq[:, 0] = dx
        else:  # the causal encoder's pooled position: each row's last real token
            dseq[np.arange(B_), cache.pool_at] = dx
    else:  # token and qa: every position feeds the head
        dseq = dx.reshape(B_, T, C)  # (B, T, C)
    grads = cache.encoder.backward(dseq, cache.enc, cfg, grads, ops)
    return {k: grads[k] for k in params}


def head_loss_backward(cache, ops=layers):
    """Mirror of head_loss: -> dlogits as the rows the last classifier produced, (N, K)."""
    B_, T, _ = cache.seq_shape
    if cache.shape == "qa":
        dstart = ops.cross_entropy_backward(0.5, cache.loss[0])  # (B, T): loss = (CE_s + CE_e) / 2
        dend = ops.cross_entropy_backward(0.5, cache.loss[1])  # (B, T)
        dlogits = np.stack([dstart, dend], axis=-1).reshape(B_ * T, 2)  # (B*T, 2)
    elif isinstance(cache.loss, MSECache):
        dlogits = mse_backward(1.0, cache.loss)[:, None]  # (B, 1)
    else:
        dlogits = ops.cross_entropy_backward(1.0, cache.loss)  # (B, K), (B, T, K) or (B, NC)
    K = 1 if cache.shape == "choice" else dlogits.shape[-1]  # choice: (B, NC) was (B*NC, 1)
    return dlogits.reshape(-1, K)  # (N, K)


def encoder_layers(params, cfg, ids, seg, mask, ops=layers, causal=False):
    """The hidden states after the embeddings and after every block (no dropout):
    a list of L + 1 arrays (B, T, C); [-1] is the last layer's output (feature-based use).
    causal=True: left-to-right attention, as run_encoder's."""
    x, _ = embeddings_forward(params, cfg, ids, seg, None, ops)  # (B, T, C), no dropout
    return blocks_forward(params, cfg, x, mask, None, ops, causal=causal, states=True)[2]


def causal_encoder_layers(params, cfg, ids, seg, mask, ops=layers):
    return encoder_layers(params, cfg, ids, seg, mask, ops, causal=True)
