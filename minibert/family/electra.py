"""ELECTRA (Clark et al., 2020): a small generator fills the masks, a discriminator finds the fakes.

Pretraining runs two BERT encoders on one batch (docs/bert-notes.md §10.3):
  1. the generator (a small masked LM) reads the masked text and predicts the masked tokens;
  2. at every masked position a token is SAMPLED from its softmax (no gradient flows through
     the sampling: the samples are integer ids);
  3. the discriminator reads the original text with the samples put in, and says for EVERY real
     token whether it was replaced (label 1) or is original (0). A sample that happens to equal
     the original token is labelled original;
  4. loss = MLM loss (generator) + lam * RTD loss (discriminator, replaced-token detection), lam 50.
Only the discriminator is kept for fine-tuning.

Both networks are BERT's blocks (model.block_forward/block_backward) on an E-wide embedding,
projected E -> C by `emb_map` (transformers' embeddings_project) when E != C. SHARED between them,
as in google-research/electra: the word, position and token-type tables and the embedding
LayerNorm; each network keeps its own projection. How their gradients add up: electra_backward.

Shape legend (as in model.py, plus E):
    B   batch size      T   sequence length     C   hidden size     E   embedding size
    V   vocabulary      FF  intermediate size   L   layers          M   real predictions

Parameter names (flat dicts; weights are (C_in, C_out), PyTorch stores them transposed):
    tok_emb (V, E)  pos_emb (MAXPOS, E)  seg_emb (TV, E)  emb_ln.w/b (E,)      (SHARED in pretraining)
    emb_map.w (E, C) .b (C,)   only when E != C
    h{l}.*                     BERT's block names and shapes (model.py)
    discriminator: disc.dense.w (C, C) .b (C,)   disc.out.w (C, 1) .b (1,)
    generator:     mlm.dense.w (C, E) .b (E,)    mlm.ln.w/b (E,)   mlm.bias (V,)   decoder tied to tok_emb

ELECTRA is two models trained as one, so both live here: the generator and the discriminator,
their joint step (sampling between them) and their checkpoints, which name each other's tensors.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from minibert import layers
from minibert.backend import get_ops
from minibert import checkpoint
from minibert.io import atomic, tensorfile
from minibert.model import (ACTIVATIONS, BertConfig, LossGradsMetrics, MLMLossCache, as_int, train_rng, check_batch,
                            check_inputs, check_params)
from minibert.model import encoder_backward as bert_encoder_backward
from minibert.model import encoder_forward as bert_encoder_forward
from minibert.model import (encoder_forward_unpadded, init_from_shapes, mlm_loss_backward, mlm_loss_forward,
                            mlm_targets, mlm_transform_forward)
from minibert.model import param_shapes as bert_param_shapes

HEADS = {"disc": "ElectraForPreTraining", "gen": "ElectraForMaskedLM"}  # head -> transformers architecture
SHARED = ("tok_emb", "pos_emb", "seg_emb", "emb_ln.w", "emb_ln.b")  # tied between generator and discriminator
PAIR_FIELDS = ("vocab_size", "embedding_size", "max_position_embeddings", "type_vocab_size", "layer_norm_eps")


@dataclasses.dataclass
class ElectraConfig:
    """The fields and defaults are transformers' ElectraConfig (its config.json keys)."""

    vocab_size: int = 30522
    embedding_size: int = 128
    hidden_size: int = 256
    num_hidden_layers: int = 12
    num_attention_heads: int = 4
    intermediate_size: int = 1024
    hidden_act: str = "gelu"  # the encoder's and the discriminator head's; the generator head's is always "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12

    def __post_init__(self):
        self.encoder_config()  # BertConfig checks the fields the two share, naming the bad one
        if not isinstance(self.embedding_size, (int, np.integer)) or self.embedding_size < 1:
            raise ValueError(f"embedding_size={self.embedding_size!r} must be a positive integer")

    @property
    def factorized(self) -> bool:
        """True when E != C: the embedding is projected E -> C (emb_map)."""
        return self.embedding_size != self.hidden_size

    def encoder_config(self) -> BertConfig:
        names = {f.name for f in dataclasses.fields(BertConfig)}
        return BertConfig(**{k: v for k, v in dataclasses.asdict(self).items() if k in names})

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ElectraConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def check_pair(gen_cfg: ElectraConfig, disc_cfg: ElectraConfig) -> None:
    """The shared embedding needs the two configs to agree on its sizes (and LayerNorm eps)."""
    bad = [f"{k}: generator {getattr(gen_cfg, k)} vs discriminator {getattr(disc_cfg, k)}"
           for k in PAIR_FIELDS if getattr(gen_cfg, k) != getattr(disc_cfg, k)]
    if bad:
        raise ValueError("the generator and discriminator share their embeddings, so these must agree: "
                         + "; ".join(bad))


# ---------------------------------------------------------------------------------------------
# parameters

def param_shapes(cfg: ElectraConfig, head: str) -> dict[str, tuple]:
    """Names and shapes of the discriminator's ("disc") or the generator's ("gen") parameters."""
    if head not in HEADS:
        raise ValueError(f"head={head!r} is not one of {sorted(HEADS)}")
    V, E, C = cfg.vocab_size, cfg.embedding_size, cfg.hidden_size
    shapes = {"tok_emb": (V, E), "pos_emb": (cfg.max_position_embeddings, E), "seg_emb": (cfg.type_vocab_size, E),
              "emb_ln.w": (E,), "emb_ln.b": (E,)}
    if cfg.factorized:
        shapes.update({"emb_map.w": (E, C), "emb_map.b": (C,)})
    blocks = bert_param_shapes(cfg.encoder_config())  # BERT's h{l}.* names and shapes
    shapes.update({k: s for k, s in blocks.items() if k.startswith("h")})
    if head == "disc":
        shapes.update({"disc.dense.w": (C, C), "disc.dense.b": (C,), "disc.out.w": (C, 1), "disc.out.b": (1,)})
    else:
        shapes.update({"mlm.dense.w": (C, E), "mlm.dense.b": (E,), "mlm.ln.w": (E,), "mlm.ln.b": (E,),
                       "mlm.bias": (V,)})
    return shapes


def init_params(cfg: ElectraConfig, head: str, seed: int = 0, dtype=np.float32) -> dict[str, np.ndarray]:
    """As BERT's: truncated normal(initializer_range) for matrices and tables, zero biases, LayerNorm 1/0."""
    return init_from_shapes(param_shapes(cfg, head), cfg.initializer_range, seed, dtype)


# ---------------------------------------------------------------------------------------------
# 1. the embedding: (V, E) tables -> LayerNorm(E) -> dropout -> (E -> C when E != C): it is
#    model.embeddings_forward / embeddings_backward, which project when the params have emb_map
#    (param_shapes gives them emb_map only when E != C)


# ---------------------------------------------------------------------------------------------
# 2. the encoder: model's, the embedding then L of BERT's blocks (optionally on the real tokens only)

def encoder_forward(params, cfg, input_ids, token_type_ids, attention_mask, rng=None, ops=layers, unpad=False):
    """-> sequence_output (B, T, C), model.EncoderCache. With `unpad` the blocks run on the N real
    tokens only (model.encoder_forward_unpadded; the padding rows of the output are then 0)."""
    if unpad:  # packed after the embedding: its dropout masks are drawn on the (B, T) grid
        return encoder_forward_unpadded(params, cfg, input_ids, token_type_ids, attention_mask, rng, ops,
                                        embed_padding=True)
    return bert_encoder_forward(params, cfg, input_ids, token_type_ids, attention_mask, rng, ops)


encoder_backward = bert_encoder_backward  # the cache says whether padding was skipped


# ---------------------------------------------------------------------------------------------
# 3. the heads and their losses (the generator's are BERT's MLM head and loss, model.mlm_loss_forward,
#    with the exact GELU whatever hidden_act, as transformers' ElectraGeneratorPredictions)

class BCECache(NamedTuple):
    probs: np.ndarray  # (...) sigmoid(logits)
    labels: np.ndarray  # (...) 0 or 1, logits' dtype
    weight: np.ndarray  # (...) mask / (number of real tokens)


def bce_with_logits_forward(logits, labels, mask):
    """Mean binary cross-entropy over the real tokens (mask 1), as torch's BCEWithLogitsLoss on them.
    Shapes: logits, labels, mask (...) -> loss (). Per token, for z = logit and y = label,
    -[y log s(z) + (1 - y) log(1 - s(z))] = max(z, 0) - z y + log(1 + exp(-|z|)) (no overflow)."""
    y = labels.astype(logits.dtype)  # (...)
    weight = mask.astype(logits.dtype) / max(int(mask.sum()), 1)  # (...)
    per_token = np.maximum(logits, 0) - logits * y + np.log1p(np.exp(-np.abs(logits)))  # (...)
    probs = 0.5 * (1 + np.tanh(0.5 * logits))  # (...) sigmoid, without exp overflow
    return logits.dtype.type((per_token * weight).sum()), BCECache(probs, y, weight)


def bce_with_logits_backward(dloss, cache: BCECache):
    """-> dlogits (...): d/dz of the per-token loss is s(z) - y."""
    return dloss * (cache.probs - cache.labels) * cache.weight  # (...)


def disc_head_forward(params, cfg, h, ops=layers):
    """transformers' ElectraDiscriminatorPredictions: h (..., C) -> dense -> hidden_act -> 1 logit (...)."""
    t, c_dense = ops.linear_forward(h, params["disc.dense.w"], params["disc.dense.b"])  # (..., C)
    t, c_act = ops.gelu_forward(t, ACTIVATIONS[cfg.hidden_act])  # (..., C)
    z, c_out = ops.linear_forward(t, params["disc.out.w"], params["disc.out.b"])  # (..., 1)
    return z[..., 0], (c_dense, c_act, c_out)  # (...)


def disc_head_backward(dz, cache, grads, ops=layers):
    c_dense, c_act, c_out = cache
    dt, grads["disc.out.w"], grads["disc.out.b"] = ops.linear_backward(dz[..., None], c_out)  # (..., C)
    dt = ops.gelu_backward(dt, c_act)  # (..., C)
    dh, grads["disc.dense.w"], grads["disc.dense.b"] = ops.linear_backward(dt, c_dense)  # (..., C)
    return dh


# ---------------------------------------------------------------------------------------------
# 4. each network's loss, forward and backward

def discriminator_forward(params, cfg, ids, seg, mask, labels, rng=None, ops=layers, unpad=True):
    """-> (RTD loss, cache, logits (B, T)): mean BCE over the real tokens; label 1 = replaced."""
    seq, c_enc = encoder_forward(params, cfg, ids, seg, mask, rng, ops, unpad and not mask.all())  # (B, T, C)
    logits, c_head = disc_head_forward(params, cfg, seq, ops)  # (B, T)
    loss, c_bce = bce_with_logits_forward(logits, labels, mask)
    return loss, (c_enc, c_head, c_bce), logits


def discriminator_backward(params, cfg, cache, dloss=1.0, ops=layers):
    """Mirror of discriminator_forward; `dloss` is d(total)/d(RTD loss). -> grads (keys of params)."""
    c_enc, c_head, c_bce = cache
    grads = {}
    dlogits = bce_with_logits_backward(dloss, c_bce)  # (B, T)
    dseq = disc_head_backward(dlogits, c_head, grads, ops)  # (B, T, C)
    grads = encoder_backward(dseq, c_enc, cfg, grads, ops)
    return {k: grads[k] for k in params}


def generator_forward(params, cfg, ids, seg, mask, flat_pos, targets, rng=None, ops=layers, unpad=True):
    """-> (MLM loss, cache, logits (M, V)): mean cross-entropy at the M positions flat_pos = b * T + t."""
    seq, c_enc = encoder_forward(params, cfg, ids, seg, mask, rng, ops, unpad and not mask.all())  # (B, T, C)
    loss, logits, c_mlm = mlm_loss_forward(params, cfg, seq, flat_pos, targets, ops, act="gelu")  # logits (M, V)
    return loss, (c_enc, *c_mlm), logits  # the encoder's cache, then MLMLossCache's fields: [2] is the
    # cross-entropy cache, as [2] of the discriminator's is its BCE cache (lesson 20 reads both)


def generator_backward(params, cfg, cache, dloss=1.0, ops=layers):
    """Mirror of generator_forward. -> grads (keys of params)."""
    c_enc, c_mlm = cache[0], MLMLossCache(*cache[1:])
    grads = {}
    dseq = mlm_loss_backward(dloss, c_mlm, grads, ops)  # (B, T, C); grads["tok_emb"]: the decoder's side
    grads = encoder_backward(dseq, c_enc, cfg, grads, ops)
    return {k: grads[k] for k in params}


# ---------------------------------------------------------------------------------------------
# 5. the joint pretraining step: generator -> sampling -> replaced-token detection

def sample_tokens(logits, rng):
    """One token per row from softmax(logits) (M, V) -> ids (M,), by inverse CDF: draw u ~ U(0, 1)
    and take the first token whose cumulative probability reaches u. Integers: no gradient."""
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))  # (M, V)
    cdf = np.cumsum(e, axis=-1)  # (M, V) unnormalised
    u = rng.random(logits.shape[0])[:, None] * cdf[:, -1:]  # (M, 1)
    return np.minimum((cdf < u).sum(axis=-1), logits.shape[-1] - 1)  # (M,)


def replace_tokens(ids, flat_pos, originals, sampled):
    """The discriminator's input and labels. ids (B, T) the masked input, flat_pos (M,) b * T + t,
    originals (M,) the tokens there before masking, sampled (M,) -> corrupted (B, T), labels (B, T):
    the original text with the samples put in; 1 where a token differs from the original, else 0
    (a sample equal to the original token is "original", as the paper).

    >>> replace_tokens(np.array([[2, 4, 4, 3]]), np.array([1, 2]), np.array([7, 8]), np.array([9, 8]))
    (array([[2, 9, 8, 3]]), array([[0, 1, 0, 0]]))
    """
    original = ids.reshape(-1).copy()  # (B*T,)
    original[flat_pos] = originals  # the text before masking
    corrupted = original.copy()  # (B*T,)
    corrupted[flat_pos] = sampled
    labels = (corrupted != original).astype(np.int64)  # (B*T,)
    return corrupted.reshape(ids.shape), labels.reshape(ids.shape)


class ElectraMetrics(NamedTuple):
    loss: float  # mlm_loss + lam * rtd_loss
    mlm_loss: float
    rtd_loss: float
    mlm_correct: int  # generator argmax hits over the real predictions
    mlm_count: int
    disc_correct: int  # discriminator hits (logit > 0 means "replaced") over the real tokens
    disc_count: int
    replaced_flagged: int  # replaced tokens the discriminator flagged (true positives)
    replaced_count: int  # tokens labelled replaced
    flagged_count: int  # tokens the discriminator flagged as replaced

    def sums(self) -> dict:
        """{name: (sum, count)}, as the training loop logs them (loop/engine.py): the losses over 1,
        the rates as hits over counted."""
        return {"loss": (self.loss, 1), "mlm_loss": (self.mlm_loss, 1), "rtd_loss": (self.rtd_loss, 1),
                "mlm_acc": (self.mlm_correct, self.mlm_count), "disc_acc": (self.disc_correct, self.disc_count),
                "replaced_recall": (self.replaced_flagged, self.replaced_count),
                "replaced_precision": (self.replaced_flagged, self.flagged_count)}

    def rates(self) -> dict[str, float]:
        """Generator MLM accuracy, discriminator accuracy, replaced-token recall and precision."""
        ratio = lambda a, b: a / max(b, 1)  # noqa: E731
        return {"mlm_accuracy": ratio(self.mlm_correct, self.mlm_count),
                "disc_accuracy": ratio(self.disc_correct, self.disc_count),
                "replaced_recall": ratio(self.replaced_flagged, self.replaced_count),
                "replaced_precision": ratio(self.replaced_flagged, self.flagged_count)}


class ElectraCache(NamedTuple):
    gen: tuple  # generator_forward's cache
    disc: tuple  # discriminator_forward's cache
    lam: float
    sampled: np.ndarray  # (M,) the generator's samples
    corrupted: np.ndarray  # (B, T) the discriminator's input
    labels: np.ndarray  # (B, T) 1 = replaced


def tie_embeddings(gen_params, disc_params) -> dict[str, np.ndarray]:
    """The generator's params with the SHARED tensors replaced by the discriminator's arrays
    (the same objects, so an in-place update of one is an update of both)."""
    for k in SHARED:
        if gen_params[k].shape != disc_params[k].shape:
            raise ValueError(f"{k}: generator {gen_params[k].shape} vs discriminator {disc_params[k].shape}")
    return {**gen_params, **{k: disc_params[k] for k in SHARED}}


def _check_tied(gen_params, disc_params):
    untied = [k for k in SHARED if gen_params.get(k) is not disc_params[k]]
    if untied:
        raise ValueError(f"the generator's {untied} are not the discriminator's arrays; "
                         f"tie them first: gen_params = tie_embeddings(gen_params, disc_params)")


def joint_params(gen_params, disc_params) -> dict[str, np.ndarray]:
    """One flat dict for the optimizer: the discriminator's names (the shared tensors among them,
    once) and the generator's other tensors under "gen.<name>". The same arrays, not copies."""
    _check_tied(gen_params, disc_params)
    return {**disc_params, **{"gen." + k: v for k, v in gen_params.items() if k not in SHARED}}


def split_params(joint) -> tuple[dict, dict]:
    """Inverse of joint_params: -> (gen_params, disc_params), tied, the same arrays."""
    disc = {k: v for k, v in joint.items() if not k.startswith("gen.")}
    gen = {k[len("gen."):]: v for k, v in joint.items() if k.startswith("gen.")}
    return {**{k: disc[k] for k in SHARED}, **gen}, disc


def electra_forward(gen_params, disc_params, gen_cfg, disc_cfg, batch, rng, lam=50.0, train=False, ops=layers,
                    unpad=True):
    """The pretraining forward on a pretraining batch (input_ids already masked, masked_lm_*; no NSP
    label needed): -> (loss, ElectraMetrics, ElectraCache). `rng` draws the samples (and, with
    `train`, the dropout masks). Loss = mean MLM cross-entropy + lam * mean RTD BCE."""
    check_pair(gen_cfg, disc_cfg)
    _check_tied(gen_params, disc_params)
    B = np.shape(batch["input_ids"])[0]
    ids, seg, mask, pos, mlm_ids, w, _ = check_batch(disc_cfg, {"next_sentence_labels": np.zeros(B, int), **batch})
    flat_pos, originals = mlm_targets(pos, mlm_ids, w, ids.shape[1])  # (M,) b * T + position, (M,)
    drop_rng = rng if train else None
    # 1. the generator predicts the masked tokens
    mlm_loss, c_gen, gen_logits = generator_forward(gen_params, gen_cfg, ids, seg, mask, flat_pos, originals,
                                                    drop_rng, ops, unpad)  # gen_logits (M, V)
    # 2. sample a replacement at each masked position (ids: the gradient stops here)
    sampled = sample_tokens(gen_logits, rng)  # (M,)
    # 3. the corrupted text and its labels
    corrupted, labels = replace_tokens(ids, flat_pos, originals, sampled)  # (B, T), (B, T)
    # 4. the discriminator finds the replaced tokens
    rtd_loss, c_disc, disc_logits = discriminator_forward(disc_params, disc_cfg, corrupted, seg, mask, labels,
                                                          drop_rng, ops, unpad)  # disc_logits (B, T)
    loss = mlm_loss + lam * rtd_loss
    real_tok, flagged, replaced = mask > 0, disc_logits > 0, labels == 1  # (B, T) each
    metrics = ElectraMetrics(float(loss), float(mlm_loss), float(rtd_loss),
                             int((gen_logits.argmax(-1) == originals).sum()), int(originals.size),
                             int(((flagged == replaced) & real_tok).sum()), int(real_tok.sum()),
                             int((flagged & replaced & real_tok).sum()), int((replaced & real_tok).sum()),
                             int((flagged & real_tok).sum()))
    return loss, metrics, ElectraCache(c_gen, c_disc, lam, sampled, corrupted, labels)


def electra_backward(gen_params, disc_params, gen_cfg, disc_cfg, cache: ElectraCache, ops=layers):
    """Mirror of electra_forward. -> grads with the keys of joint_params(gen_params, disc_params).

    The chain rule starts at loss = mlm_loss + lam * rtd_loss: d/d(mlm_loss) = 1, d/d(rtd_loss) = lam.
    Nothing flows from the discriminator into the generator except through the shared tensors:
    the corrupted input is made of sampled integer ids. For each SHARED tensor
        grad = generator part (its embedding; for tok_emb also its tied decoder) + discriminator part (x lam).
    """
    gen_grads = generator_backward(gen_params, gen_cfg, cache.gen, 1.0, ops)
    disc_grads = discriminator_backward(disc_params, disc_cfg, cache.disc, cache.lam, ops)
    grads = dict(disc_grads)
    for k in SHARED:
        grads[k] = disc_grads[k] + gen_grads[k]  # gradients add up at forks: one tensor, two networks
    grads.update({"gen." + k: g for k, g in gen_grads.items() if k not in SHARED})
    return grads


def electra_forward_backward(gen_params, disc_params, gen_cfg, disc_cfg, batch, rng, lam=50.0, train=False,
                             ops=layers, compute_grads=True) -> LossGradsMetrics:
    """-> (loss, grads keyed as joint_params, ElectraMetrics): one ELECTRA pretraining step's math."""
    loss, metrics, cache = electra_forward(gen_params, disc_params, gen_cfg, disc_cfg, batch, rng, lam, train, ops)
    grads = electra_backward(gen_params, disc_params, gen_cfg, disc_cfg, cache, ops) if compute_grads else None
    return LossGradsMetrics(loss, grads, metrics)


# ---------------------------------------------------------------------------------------------
# transformers' names and config.json

def hf_names(cfg: ElectraConfig) -> dict[str, tuple[str, bool]]:
    """minibert name -> (transformers key, transpose?) for every tensor of both heads but the fused qkv."""
    names = {"tok_emb": ("electra.embeddings.word_embeddings.weight", False),
             "pos_emb": ("electra.embeddings.position_embeddings.weight", False),
             "seg_emb": ("electra.embeddings.token_type_embeddings.weight", False),
             "mlm.bias": ("generator_lm_head.bias", False)}
    modules = {"emb_ln": "electra.embeddings.LayerNorm", "emb_map": "electra.embeddings_project",
               "disc.dense": "discriminator_predictions.dense",
               "disc.out": "discriminator_predictions.dense_prediction",
               "mlm.dense": "generator_predictions.dense", "mlm.ln": "generator_predictions.LayerNorm"}
    for l in range(cfg.num_hidden_layers):
        for ours, theirs in (("attn.out", "attention.output.dense"), ("ln1", "attention.output.LayerNorm"),
                             ("ffn.in", "intermediate.dense"), ("ffn.out", "output.dense"),
                             ("ln2", "output.LayerNorm")):
            modules[f"h{l}.{ours}"] = f"electra.encoder.layer.{l}.{theirs}"
    for ours, theirs in modules.items():
        dense = "ln" not in ours.split(".")[-1]  # PyTorch stores dense weights (out, in)
        names[ours + ".w"], names[ours + ".b"] = (theirs + ".weight", dense), (theirs + ".bias", False)
    return names


def _qkv(l: int) -> list[str]:
    return [f"electra.encoder.layer.{l}.attention.self.{part}" for part in ("query", "key", "value")]


TIED_KEYS = {"generator_lm_head.weight": "electra.embeddings.word_embeddings.weight"}


def to_hf_state_dict(params, cfg: ElectraConfig) -> dict[str, np.ndarray]:
    """minibert params (or grads) -> transformers' names and layouts (the tied decoder is not written)."""
    names, state = hf_names(cfg), {}
    for name, a in params.items():
        if name in names:
            key, transpose = names[name]
            state[key] = np.ascontiguousarray(a.T if transpose else a)
        elif name.endswith(".attn.qkv.w") or name.endswith(".attn.qkv.b"):
            l, weight = int(name[1:].split(".", 1)[0]), name.endswith(".w")
            for key, part in zip(_qkv(l), np.split(a, 3, axis=-1)):  # (C, 3C) -> 3 x (C, C); (3C,) -> 3 x (C,)
                state[key + (".weight" if weight else ".bias")] = np.ascontiguousarray(part.T if weight else part)
        else:
            raise ValueError(f"parameter {name!r} has no transformers name")
    return state


def from_hf_state_dict(state, cfg: ElectraConfig, head: str, dtype=np.float32) -> dict[str, np.ndarray]:
    """transformers' ElectraForPreTraining ("disc") / ElectraForMaskedLM ("gen") state dict ->
    minibert params in `dtype`. The tied decoder key is accepted when it equals the word embeddings."""
    state = {k: np.asarray(v) for k, v in state.items() if not k.endswith(("position_ids", "token_type_ids"))}
    for tied, target in TIED_KEYS.items():
        if tied in state and target in state and not np.array_equal(state.pop(tied), state[target]):
            raise ValueError(f"{tied!r} differs from {target!r}; minibert ties the MLM decoder to them")
    shapes, names = param_shapes(cfg, head), hf_names(cfg)
    # the keys and shapes to expect: those that to_hf_state_dict writes for params of the right shapes
    expected = {k: a.shape for k, a in to_hf_state_dict({n: np.empty(s, np.float32) for n, s in shapes.items()},
                                                        cfg).items()}
    checkpoint.check_state(state, expected, f"minibert's {HEADS[head]}")
    return gather_params(state, shapes, names, dtype)


def gather_params(state, shapes: dict, names: dict, dtype) -> dict[str, np.ndarray]:
    """The minibert parameters named in `shapes`, read from a (checked) transformers state:
    `names` maps each to (transformers key, transpose); the fused qkv is put together from
    query, key and value (the task classes' reader uses it too, with their heads' names)."""
    params = {}
    for name in shapes:
        if name in names:
            key, transpose = names[name]
            params[name] = np.ascontiguousarray(state[key].T if transpose else state[key], dtype=dtype)
        else:  # fused qkv: query | key | value side by side, (C, 3C) / (3C,)
            kind = ".weight" if name.endswith(".w") else ".bias"
            parts = [state[key + kind].T for key in _qkv(int(name[1:].split(".", 1)[0]))]  # .T: no-op on biases
            params[name] = np.ascontiguousarray(np.concatenate(parts, axis=-1), dtype=dtype)
    return params


def read_config(path: Path, architecture: str) -> ElectraConfig:
    """An ELECTRA config.json -> ElectraConfig; clear errors for what minibert cannot run."""
    d = checkpoint.read_config_json(path)
    if d.get("model_type") != "electra":
        got = d.get("model_type")
        raise ValueError(f"{path}: model_type {got!r} is not 'electra'")
    archs = d.get("architectures") or [architecture]
    if archs != [architecture]:
        hint = {v: f" (load it with minibert.{v})" for v in HEADS.values()}.get(archs[0], "")
        raise ValueError(f"{path}: architecture {archs} is not {architecture}{hint}")
    checkpoint.refuse_decoder_flags(d, path, "minibert's ELECTRA")
    try:
        return ElectraConfig.from_dict(d)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{path}: {e}") from None


# ---------------------------------------------------------------------------------------------
# the classes a user holds

class _ElectraModel:
    head = ""  # "disc" or "gen"

    def __init__(self, config: ElectraConfig, seed: int = 0, dtype=np.float32, params=None):
        self.config = config
        self.dtype = np.dtype(dtype)
        self.params = init_params(config, self.head, seed, self.dtype) if params is None else params
        expected = param_shapes(config, self.head)
        check_params(self.params, expected)
        self.vocab_path = None  # set by from_pretrained; save_pretrained copies it
        self.do_lower_case = True

    @property
    def num_parameters(self) -> int:
        return sum(p.size for p in self.params.values())

    @property
    def ops(self):
        """minibert.kernels by default, minibert.layers with MINIBERT_BACKEND=numpy (read once per process)."""
        return get_ops()

    def _encode(self, input_ids, token_type_ids, attention_mask, train, rng):
        ids, tt, am = check_inputs(self.config, input_ids, token_type_ids, attention_mask)
        return encoder_forward(self.params, self.config, ids, tt, am, train_rng(train, rng), self.ops)[0]

    def loss_and_grads(self, batch, train=False, rng=None, compute_grads=True):
        """-> (loss, grads) for a batch of input_ids, input_mask, segment_ids and labels (B, T)."""
        ops, p, cfg = self.ops, self.params, self.config
        ids, seg, mask = check_inputs(cfg, batch["input_ids"], batch.get("segment_ids"), batch.get("input_mask"))
        labels = as_int("labels", batch["labels"], ids.shape)
        loss, cache = self._loss(ids, seg, mask, labels, train_rng(train, rng), ops)
        backward = discriminator_backward if self.head == "disc" else generator_backward
        return loss, (backward(p, cfg, cache, 1.0, ops) if compute_grads else None)

    def save_pretrained(self, directory, vocab=None) -> Path:
        """Write config.json, model.safetensors (transformers' names) and the vocab."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        tensorfile.save_tensors_atomic(to_hf_state_dict(self.params, self.config),
                                       directory / checkpoint.WEIGHTS_NAME, {"format": "pt"})
        hf = {**self.config.to_dict(), "architectures": [HEADS[self.head]], "model_type": "electra",
              "pad_token_id": 0, "tie_word_embeddings": True, "dtype": self.dtype.name}
        atomic.write_text_atomic(directory / checkpoint.CONFIG_NAME, json.dumps(dict(sorted(hf.items())),
                                                                                    indent=2) + "\n")
        checkpoint.save_vocab_files(self, directory, vocab)
        return directory

    @classmethod
    def from_pretrained(cls, directory, dtype=np.float32, verify: bool = True):
        """Read a transformers directory of this class. With `verify` the weights must be finite
        and match the digest minibert recorded (if any)."""
        directory = checkpoint.model_directory(directory)
        checkpoint.weight_files(directory)  # a missing weight file is named before the config is read
        config = read_config(directory / checkpoint.CONFIG_NAME, HEADS[cls.head])
        tensors, weights = checkpoint.read_weights(directory, config.num_hidden_layers, verify)
        try:
            params = from_hf_state_dict(tensors, config, cls.head, dtype)
        except ValueError as e:
            raise ValueError(f"{weights}: {e}") from None
        model = cls(config, dtype=dtype, params=params)
        vocab = directory / checkpoint.VOCAB_NAME
        model.vocab_path = vocab if vocab.is_file() else None
        model.do_lower_case = checkpoint.read_casing(directory)
        return model


class ElectraForPreTraining(_ElectraModel):
    """The discriminator: per-token logits, > 0 means "replaced". transformers' ElectraForPreTraining.

    >>> model = ElectraForPreTraining(ElectraConfig(vocab_size=100, embedding_size=8, hidden_size=16,
    ...     num_hidden_layers=1, num_attention_heads=2, intermediate_size=32))
    >>> model.forward(np.array([[2, 7, 3]])).shape
    (1, 3)
    """

    head = "disc"

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, train=False, rng=None):
        """-> logits (B, T)."""
        seq = self._encode(input_ids, token_type_ids, attention_mask, train, rng)  # (B, T, C)
        return disc_head_forward(self.params, self.config, seq, self.ops)[0]  # (B, T)

    __call__ = forward

    def _loss(self, ids, seg, mask, labels, rng, ops):
        if ((labels != 0) & (labels != 1) & (mask > 0)).any():
            raise ValueError("labels must be 0 (original) or 1 (replaced) at the real tokens")
        loss, cache, _ = discriminator_forward(self.params, self.config, ids, seg, mask, labels, rng, ops)
        return loss, cache


class ElectraForMaskedLM(_ElectraModel):
    """The generator: a masked LM with the factorised, tied head. transformers' ElectraForMaskedLM.

    >>> model = ElectraForMaskedLM(ElectraConfig(vocab_size=100, embedding_size=8, hidden_size=16,
    ...     num_hidden_layers=1, num_attention_heads=2, intermediate_size=32))
    >>> model.forward(np.array([[2, 7, 3]])).shape
    (1, 3, 100)
    """

    head = "gen"

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, train=False, rng=None):
        """-> logits (B, T, V)."""
        seq = self._encode(input_ids, token_type_ids, attention_mask, train, rng)  # (B, T, C)
        B, T, C = seq.shape
        logits, _ = mlm_transform_forward(self.params, self.config, seq.reshape(B * T, C), self.ops,
                                          act="gelu")  # (B*T, V)
        return logits.reshape(B, T, -1)  # (B*T, V) -> (B, T, V)

    __call__ = forward

    def _loss(self, ids, seg, mask, labels, rng, ops):
        """Mean cross-entropy over the labels != -100 (as transformers); they must be at real tokens."""
        if ((labels != -100) & (mask == 0)).any():
            raise ValueError("labels are set at padding (input_mask 0); use -100 there")
        flat_pos = np.flatnonzero(labels.reshape(-1) != -100)  # (M,)
        loss, cache, _ = generator_forward(self.params, self.config, ids, seg, mask, flat_pos,
                                           labels.reshape(-1)[flat_pos], rng, ops)
        return loss, cache
