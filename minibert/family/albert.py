"""ALBERT for pretraining (MLM + SOP): BERT's encoder block on a factorised embedding, one block for all layers.

ALBERT (Lan et al., 2019) changes three things in BERT, and this file writes each one out:
  1. factorised embedding: the lookup tables are E wide (E << C), then one linear maps E -> C;
     the MLM head maps back C -> E, so the tied decoder is (V, E) too;
  2. cross-layer sharing: ONE encoder block (minibert.model.block_forward, BERT's) is applied L
     times; its backward runs L times and the L gradients of each shared tensor add up;
  3. sentence-order prediction (SOP) in place of NSP: the same 2-way classifier on the pooled
     [CLS] vector, label 0 = the two segments in their original order, 1 = swapped.

Like minibert/model.py, every function takes `ops` (minibert.layers or minibert.kernels).

Shape legend (as in model.py, plus E):
    B   batch size      T   sequence length     C   hidden size     E   embedding size
    V   vocabulary      FF  intermediate size   L   layers          M   real predictions
    N   real (unpadded) tokens

Parameter names (a flat dict; weights are (C_in, C_out), PyTorch stores them transposed):
    tok_emb (V, E)  pos_emb (MAXPOS, E)  seg_emb (TV, E)  emb_ln.w/b (E,)  emb_map.w (E, C) .b (C,)
    block.attn.qkv.w (C, 3C) .b   block.attn.out.w (C, C) .b   block.ln1.w/b
    block.ffn.in.w (C, FF) .b     block.ffn.out.w (FF, C) .b   block.ln2.w/b   (shared by all L layers)
    pool.w (C, C) .b   mlm.dense.w (C, E) .b (E,)   mlm.ln.w/b (E,)   mlm.bias (V,)   sop.w (C, 2) .b (2,)
The MLM decoder is tied to tok_emb: logits = t @ tok_emb.T + mlm.bias, t (M, E).

Where the two reference codes differ in training (docs/bert-notes.md §10.1), with dropout only:
transformers' AlbertSOPHead drops out the pooled vector (classifier_dropout_prob) before the SOP
classifier and google-research/albert does not: minibert follows transformers (0 gives Google's
head). transformers' AlbertLayer has no dropout after its FFN output and Google's has: minibert
reuses BERT's block, so it follows Google. In eval mode (and with ALBERT's default dropout 0)
all three agree.
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
from minibert.model import (BertConfig, EncoderCache, LossGradsMetrics, Metrics, Output, apply_dropout, train_rng,
                            check_batch, check_inputs, check_params)
from minibert.model import encoder_backward as bert_encoder_backward
from minibert.model import encoder_forward as bert_encoder_forward
from minibert.model import (encoder_forward_unpadded, init_from_shapes, mlm_loss_backward, mlm_loss_forward,
                            mlm_targets, mlm_transform_forward, pooler_backward, pooler_forward)

ARCHITECTURE = "AlbertForPreTraining"


@dataclasses.dataclass
class AlbertConfig:
    """The fields and defaults are transformers' AlbertConfig (its config.json keys)."""

    vocab_size: int = 30000
    embedding_size: int = 128
    hidden_size: int = 4096
    num_hidden_layers: int = 12
    num_hidden_groups: int = 1
    num_attention_heads: int = 64
    intermediate_size: int = 16384
    inner_group_num: int = 1
    hidden_act: str = "gelu_new"  # "gelu_new" = tanh approximation; "gelu" = exact erf GELU
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    classifier_dropout_prob: float = 0.1  # dropout on the pooled vector before the SOP classifier

    def __post_init__(self):
        self.encoder_config()  # BertConfig checks the fields the two share, naming the bad one
        if not isinstance(self.embedding_size, (int, np.integer)) or self.embedding_size < 1:
            raise ValueError(f"embedding_size={self.embedding_size!r} must be a positive integer")
        if self.num_hidden_groups != 1 or self.inner_group_num != 1:
            raise ValueError(f"num_hidden_groups={self.num_hidden_groups} and inner_group_num={self.inner_group_num}: "
                             f"minibert's ALBERT shares one block across all layers, which needs both to be 1")
        if not 0.0 <= self.classifier_dropout_prob < 1.0:
            raise ValueError(f"classifier_dropout_prob={self.classifier_dropout_prob} must be in [0, 1)")

    def encoder_config(self) -> BertConfig:
        """BertConfig with the fields the two share; building it validates them."""
        names = {f.name for f in dataclasses.fields(BertConfig)}
        return BertConfig(**{k: v for k, v in dataclasses.asdict(self).items() if k in names})

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "AlbertConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


# ---------------------------------------------------------------------------------------------
# parameters

BLOCK = "block."  # prefix of the shared block's tensors
BLOCK_PARTS = ("attn.qkv.w", "attn.qkv.b", "attn.out.w", "attn.out.b", "ln1.w", "ln1.b",
               "ffn.in.w", "ffn.in.b", "ffn.out.w", "ffn.out.b", "ln2.w", "ln2.b")


def param_shapes(cfg: AlbertConfig) -> dict[str, tuple]:
    V, E, C, FF = cfg.vocab_size, cfg.embedding_size, cfg.hidden_size, cfg.intermediate_size
    block = {"attn.qkv.w": (C, 3 * C), "attn.qkv.b": (3 * C,), "attn.out.w": (C, C), "attn.out.b": (C,),
             "ln1.w": (C,), "ln1.b": (C,), "ffn.in.w": (C, FF), "ffn.in.b": (FF,), "ffn.out.w": (FF, C),
             "ffn.out.b": (C,), "ln2.w": (C,), "ln2.b": (C,)}
    return {"tok_emb": (V, E), "pos_emb": (cfg.max_position_embeddings, E), "seg_emb": (cfg.type_vocab_size, E),
            "emb_ln.w": (E,), "emb_ln.b": (E,), "emb_map.w": (E, C), "emb_map.b": (C,),
            **{BLOCK + k: block[k] for k in BLOCK_PARTS},
            "pool.w": (C, C), "pool.b": (C,), "mlm.dense.w": (C, E), "mlm.dense.b": (E,),
            "mlm.ln.w": (E,), "mlm.ln.b": (E,), "mlm.bias": (V,), "sop.w": (C, 2), "sop.b": (2,)}


def init_params(cfg: AlbertConfig, seed: int = 0, dtype=np.float32) -> dict[str, np.ndarray]:
    """As BERT's: truncated normal(initializer_range) for matrices and tables, zero biases, LayerNorm 1/0."""
    return init_from_shapes(param_shapes(cfg), cfg.initializer_range, seed, dtype)


def layer_view(params, cfg) -> dict[str, np.ndarray]:
    """params plus BERT's per-layer names for the shared block: h{l}.<part> is block.<part> for
    every l (the same arrays, not copies), so model's encoder runs the one block L times."""
    return {**params, **{f"h{l}.{part}": params[BLOCK + part]
                         for l in range(cfg.num_hidden_layers) for part in BLOCK_PARTS}}


# ---------------------------------------------------------------------------------------------
# 1. the factorised embedding: (V, E) tables -> LayerNorm(E) -> dropout -> E -> C is
#    model.embeddings_forward / embeddings_backward, which project E -> C when the params have
#    emb_map (ELECTRA's embedding is the same function).


# ---------------------------------------------------------------------------------------------
# 2. the encoder: model's encoder on the factorised embedding, each layer reading the one
#    shared block (layer_view); its gradient is the sum of the L layers' parts

def encoder_forward(params, cfg, input_ids, token_type_ids, attention_mask, rng=None, ops=layers, unpad=False):
    """-> sequence_output (B, T, C), model.EncoderCache. With `unpad` the blocks run on the N real
    tokens only (model.encoder_forward_unpadded; the padding rows of the output are then 0)."""
    view = layer_view(params, cfg)
    if unpad:  # packed after the embedding: its dropout masks are drawn on the (B, T) grid
        return encoder_forward_unpadded(view, cfg, input_ids, token_type_ids, attention_mask, rng, ops,
                                        embed_padding=True)
    return bert_encoder_forward(view, cfg, input_ids, token_type_ids, attention_mask, rng, ops)


def encoder_backward(dx, cache: EncoderCache, cfg, grads, ops=layers):
    """Mirror of encoder_forward: dx (B, T, C) -> grads. Each application of the shared block
    gives a gradient for every shared tensor (model's backward names them h{l}.*); the L of them
    are summed, in the order the backward ran (layer L-1 first)."""
    grads = bert_encoder_backward(dx, cache, cfg, grads, ops)
    for part in BLOCK_PARTS:
        name = BLOCK + part
        for l in reversed(range(cfg.num_hidden_layers)):
            g = grads.pop(f"h{l}.{part}")  # layer l's part
            grads[name] = grads[name] + g if name in grads else g  # gradients add up at forks (one tensor, L uses)
    return grads


# ---------------------------------------------------------------------------------------------
# 3. heads (pooler + SOP classifier, MLM) and the pretraining loss

class AlbertHeadsCache(NamedTuple):
    pool: Any  # PoolerCache
    sop_drop: Any
    sop: Any
    sop_ce: Any
    mlm: Any  # MLMLossCache, the head's t (M, E)


def albert_forward(params, cfg, batch, rng=None, ops=layers, unpad=True):
    """Pretraining forward: -> (loss, metrics, cache). Loss = mean MLM cross-entropy over the real
    predictions + mean SOP cross-entropy (`next_sentence_labels`: 0 in order, 1 swapped)."""
    ids, seg, mask, pos, mlm_ids, w, sop = check_batch(cfg, batch)
    B, T = ids.shape
    seq, enc_cache = encoder_forward(params, cfg, ids, seg, mask, rng, ops, unpad and not mask.all())  # (B, T, C)
    # SOP: pooler on [CLS], dropout, a 2-way classifier
    pooled, c_pool = pooler_forward(params, seq, ops)  # (B, C)
    dropped, c_sop_drop = apply_dropout(ops, pooled, cfg.classifier_dropout_prob, rng)  # (B, C)
    sop_logits, c_sop = ops.linear_forward(dropped, params["sop.w"], params["sop.b"])  # (B, 2)
    sop_loss, c_sop_ce = ops.cross_entropy_forward(sop_logits, sop)
    # MLM at the M real predictions: dense C -> E, activation, LayerNorm(E), tied decoder E -> V
    flat_pos, targets = mlm_targets(pos, mlm_ids, w, T)  # (M,), (M,)
    mlm_loss, mlm_logits, c_mlm = mlm_loss_forward(params, cfg, seq, flat_pos, targets, ops)  # mlm_logits (M, V)
    loss = mlm_loss + sop_loss
    hit = sop_logits.argmax(-1) == sop  # (B,)
    metrics = Metrics(float(loss), float(mlm_loss), float(sop_loss),
                      int((mlm_logits.argmax(-1) == targets).sum()), int(targets.size),
                      int(hit.sum()), int(B), int((hit & (sop == 0)).sum()), int((sop == 0).sum()))
    heads = AlbertHeadsCache(c_pool, c_sop_drop, c_sop, c_sop_ce, c_mlm)
    return loss, metrics, (enc_cache, heads, Output(seq, pooled, mlm_logits, sop_logits))


def albert_backward(params, cfg, cache, ops=layers, dmlm=1.0, dsop=1.0):
    """Mirror of albert_forward, from the loss back to every parameter. -> grads (keys of params).
    `dmlm`, `dsop`: the weights of the two losses in the loss differentiated (1 for albert_forward's
    loss; gradient accumulation passes a micro-batch's share of the step's predictions and pairs)."""
    enc_cache, hc, _ = cache
    grads = {}
    # the chain rule starts here: loss = dmlm * mlm_loss + dsop * sop_loss (both weights 1 for
    # the loss albert_forward returns)
    dseq = mlm_loss_backward(dmlm, hc.mlm, grads, ops)  # (B, T, C) MLM head; grads["tok_emb"]: the decoder's side
    # SOP head
    dsop_logits = ops.cross_entropy_backward(dsop, hc.sop_ce)  # (B, 2)
    ddropped, grads["sop.w"], grads["sop.b"] = ops.linear_backward(dsop_logits, hc.sop)  # (B, C)
    dpooled = ops.dropout_backward(ddropped, hc.sop_drop)  # (B, C)
    dcls = pooler_backward(dpooled, hc.pool, grads, ops)  # (B, C)
    dseq[:, 0] += dcls  # gradients add up at forks ([CLS] feeds the pooler and maybe the MLM head)
    grads = encoder_backward(dseq, enc_cache, cfg, grads, ops)
    return {k: grads[k] for k in params}  # same keys, same order as params


# ---------------------------------------------------------------------------------------------
# transformers' names and config.json

HF_LAYER = "albert.encoder.albert_layer_groups.0.albert_layers.0."
# minibert owner -> (transformers module, dense?): .w/.b are its .weight/.bias, dense weights transposed
HF_MODULES = {
    "emb_ln": ("albert.embeddings.LayerNorm", False), "emb_map": ("albert.encoder.embedding_hidden_mapping_in", True),
    "block.attn.out": (HF_LAYER + "attention.dense", True), "block.ln1": (HF_LAYER + "attention.LayerNorm", False),
    "block.ffn.in": (HF_LAYER + "ffn", True), "block.ffn.out": (HF_LAYER + "ffn_output", True),
    "block.ln2": (HF_LAYER + "full_layer_layer_norm", False), "pool": ("albert.pooler", True),
    "mlm.dense": ("predictions.dense", True), "mlm.ln": ("predictions.LayerNorm", False),
    "sop": ("sop_classifier.classifier", True)}  # sop.w (C, 2) here, (2, C) in transformers
HF_NAMES = {  # minibert name -> (transformers key, transpose?), all but the fused qkv
    "tok_emb": ("albert.embeddings.word_embeddings.weight", False),
    "pos_emb": ("albert.embeddings.position_embeddings.weight", False),
    "seg_emb": ("albert.embeddings.token_type_embeddings.weight", False), "mlm.bias": ("predictions.bias", False),
    **{f"{ours}.w": (f"{theirs}.weight", dense) for ours, (theirs, dense) in HF_MODULES.items()},
    **{f"{ours}.b": (f"{theirs}.bias", False) for ours, (theirs, _) in HF_MODULES.items()}}
HF_QKV = [HF_LAYER + f"attention.{part}" for part in ("query", "key", "value")]  # fused q|k|v order
TIED_KEYS = {"predictions.decoder.weight": "albert.embeddings.word_embeddings.weight",
             "predictions.decoder.bias": "predictions.bias"}


def to_hf_state_dict(params) -> dict[str, np.ndarray]:
    """minibert params (or grads) -> transformers' AlbertForPreTraining names and layouts (the
    tied decoder keys are not emitted, as transformers' own save leaves them out)."""
    state = {}
    for name, a in params.items():
        if name in HF_NAMES:
            key, transpose = HF_NAMES[name]
            state[key] = np.ascontiguousarray(a.T if transpose else a)
        elif name == BLOCK + "attn.qkv.w":
            for key, part in zip(HF_QKV, np.split(a, 3, axis=1)):  # (C, 3C) -> 3 x (C, C)
                state[key + ".weight"] = np.ascontiguousarray(part.T)  # (C_in, C_out) -> (C_out, C_in)
        elif name == BLOCK + "attn.qkv.b":
            for key, part in zip(HF_QKV, np.split(a, 3)):  # (3C,) -> 3 x (C,)
                state[key + ".bias"] = np.ascontiguousarray(part)
        else:
            raise ValueError(f"parameter {name!r} has no transformers name")
    return state


def from_hf_state_dict(state, cfg: AlbertConfig, dtype=np.float32, names=None) -> dict[str, np.ndarray]:
    """transformers' AlbertForPreTraining state dict -> minibert params in `dtype`. The tied
    decoder keys are accepted when they equal their targets; anything else unknown is an error.
    `names`: the minibert params the state holds (default all; the fine-tuning classes read the
    encoder and maybe the pooler, finetune/albert_tasks.py)."""
    state = {k: np.asarray(v) for k, v in state.items() if not k.endswith("position_ids")}
    for tied, target in TIED_KEYS.items():  # a missing target is reported below, by name
        if tied in state and target in state and not np.array_equal(state.pop(tied), state[target]):
            raise ValueError(f"{tied!r} differs from {target!r}; minibert ties the MLM decoder to them")
    shapes = param_shapes(cfg)
    if names is not None:
        shapes = {n: shapes[n] for n in names}
    expected = {HF_NAMES[n][0]: (s[::-1] if HF_NAMES[n][1] else s) for n, s in shapes.items() if n in HF_NAMES}
    C = cfg.hidden_size
    if BLOCK + "attn.qkv.w" in shapes:
        expected.update({key + ".weight": (C, C) for key in HF_QKV} | {key + ".bias": (C,) for key in HF_QKV})
    checkpoint.check_state(state, expected, "minibert's ALBERT")
    params = {}
    for name in shapes:
        if name in HF_NAMES:
            key, transpose = HF_NAMES[name]
            params[name] = np.ascontiguousarray(state[key].T if transpose else state[key], dtype=dtype)
        else:  # fused qkv: query | key | value side by side
            kind = "weight" if name.endswith(".w") else "bias"
            parts = [state[f"{key}.{kind}"] for key in HF_QKV]
            params[name] = np.ascontiguousarray(np.concatenate([p.T for p in parts], axis=1) if kind == "weight"
                                                else np.concatenate(parts), dtype=dtype)  # (C, 3C) / (3C,)
    return params


def config_to_hf_dict(cfg: AlbertConfig, dtype) -> dict:
    d = cfg.to_dict()
    d.update({"architectures": [ARCHITECTURE], "model_type": "albert", "pad_token_id": 0, "bos_token_id": 2,
              "eos_token_id": 3, "tie_word_embeddings": True, "dtype": np.dtype(dtype).name})
    return dict(sorted(d.items()))


def read_config(path: Path) -> AlbertConfig:
    """An ALBERT config.json -> AlbertConfig; clear errors for what minibert cannot run."""
    d = checkpoint.read_config_json(path)
    if d.get("model_type") != "albert":
        got = d.get("model_type")
        raise ValueError(f"{path}: model_type {got!r} is not 'albert'" +
                         (" (load BERT checkpoints with minibert.BertForPreTraining)" if got == "bert" else ""))
    archs = d.get("architectures") or [ARCHITECTURE]
    if archs != [ARCHITECTURE]:
        raise ValueError(f"{path}: architecture {archs} is not supported; minibert reads {ARCHITECTURE}")
    try:
        return AlbertConfig.from_dict(d)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{path}: {e}") from None


# ---------------------------------------------------------------------------------------------
# the class a user holds

class AlbertForPreTraining:
    """ALBERT with the MLM and SOP heads; BertForPreTraining's interface. SOP logits are `nsp_logits`.

    >>> model = AlbertForPreTraining(AlbertConfig(vocab_size=100, embedding_size=8, hidden_size=16,
    ...     num_hidden_layers=2, num_attention_heads=2, intermediate_size=32))
    >>> out = model.forward(np.array([[2, 7, 3]]))
    >>> out.mlm_logits.shape, out.nsp_logits.shape
    ((1, 3, 100), (1, 2))
    """

    encoder_forward = staticmethod(encoder_forward)  # one shared block, applied L times (inspect.attention_maps)

    def __init__(self, config: AlbertConfig, seed: int = 0, dtype=np.float32, params=None):
        self.config = config
        self.dtype = np.dtype(dtype)
        self.params = init_params(config, seed, self.dtype) if params is None else params
        expected = param_shapes(config)
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

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, train=False, rng=None):
        """-> Output(sequence_output (B,T,C), pooled_output (B,C), mlm_logits (B,T,V), nsp_logits (B,2) = SOP)."""
        ops, p, cfg = self.ops, self.params, self.config
        ids, tt, am = check_inputs(cfg, input_ids, token_type_ids, attention_mask)
        rng = train_rng(train, rng)
        seq, _ = encoder_forward(p, cfg, ids, tt, am, rng, ops)  # (B, T, C)
        pooled, _ = pooler_forward(p, seq, ops)  # (B, C)
        dropped, _ = apply_dropout(ops, pooled, cfg.classifier_dropout_prob, rng)  # (B, C)
        sop_logits, _ = ops.linear_forward(dropped, p["sop.w"], p["sop.b"])  # (B, 2)
        B, T, C = seq.shape
        mlm_logits, _ = mlm_transform_forward(p, cfg, seq.reshape(B * T, C), ops)  # (B*T, V)
        return Output(seq, pooled, mlm_logits.reshape(B, T, -1), sop_logits)  # mlm_logits (B, T, V)

    __call__ = forward

    def loss_grads_metrics(self, batch, train=False, rng=None, compute_grads=True, objective: str = "mlm_nsp",
                           loss_weights=(1.0, 1.0)) -> LossGradsMetrics:
        """-> (loss, grads, metrics) for a pretraining batch (BERT's feature names; the SOP label
        is `next_sentence_labels`: 0 in order, 1 swapped). `objective` is BertForPreTraining's
        argument; ALBERT's one loss is "mlm_nsp" (MLM + SOP). `loss_weights` (MLM, SOP): the grads
        are those of w_mlm * mlm_loss + w_sop * sop_loss (gradient accumulation); the loss and
        metrics are unweighted."""
        if objective != "mlm_nsp":
            raise ValueError(f"objective={objective!r}: ALBERT pretrains with MLM + SOP, objective 'mlm_nsp'")
        ops = self.ops
        loss, metrics, cache = albert_forward(self.params, self.config, batch, train_rng(train, rng), ops)
        grads = albert_backward(self.params, self.config, cache, ops, *loss_weights) if compute_grads else None
        return LossGradsMetrics(loss, grads, metrics)

    def loss_and_grads(self, batch, train=False, rng=None, compute_grads=True, objective: str = "mlm_nsp"):
        loss, grads, _ = self.loss_grads_metrics(batch, train, rng, compute_grads, objective)
        return loss, grads

    def save_pretrained(self, directory, vocab=None) -> Path:
        """Write config.json, model.safetensors (transformers' AlbertForPreTraining names) and the vocab."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        tensorfile.save_tensors_atomic(to_hf_state_dict(self.params), directory / checkpoint.WEIGHTS_NAME,
                                       {"format": "pt"})
        hf = config_to_hf_dict(self.config, self.dtype)
        atomic.write_text_atomic(directory / checkpoint.CONFIG_NAME, json.dumps(hf, indent=2) + "\n")
        checkpoint.save_vocab_files(self, directory, vocab)
        return directory

    @classmethod
    def from_pretrained(cls, directory, dtype=np.float32, verify: bool = True) -> "AlbertForPreTraining":
        """Read a transformers AlbertForPreTraining directory. With `verify` the weights must be
        finite and match the digest minibert recorded (if any)."""
        directory = checkpoint.model_directory(directory)
        checkpoint.weight_files(directory)  # a missing weight file is named before the config is read
        config = read_config(directory / checkpoint.CONFIG_NAME)
        tensors, weights = checkpoint.read_weights(directory, config.num_hidden_layers, verify)
        try:
            params = from_hf_state_dict(tensors, config, dtype)
        except ValueError as e:
            raise ValueError(f"{weights}: {e}") from None
        model = cls(config, dtype=dtype, params=params)
        vocab = directory / checkpoint.VOCAB_NAME
        model.vocab_path = vocab if vocab.is_file() else None
        model.do_lower_case = checkpoint.read_casing(directory)
        return model
