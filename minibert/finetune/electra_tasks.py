"""Fine-tuning ELECTRA's discriminator: the four head shapes, laid out as transformers' Electra* classes.

Only the discriminator is kept after ELECTRA's pretraining (docs/bert-notes.md §10.3); its encoder
(embedding E -> C, L of BERT's blocks) gets a task head, as BERT's does (minibert/finetune/). Two of
the heads differ from BERT's, because transformers' ELECTRA has no pooler:

    ElectraForSequenceClassification  ElectraClassificationHead on the first token:
                                      seq[:, 0] -> dropout -> dense (C, C) -> GELU -> dropout -> out_proj (C, K)
    ElectraForMultipleChoice          ElectraSequenceSummary (summary_type "first", summary_use_proj)
                                      on the first token: seq[:, 0] -> summary (C, C) -> summary_activation
                                      -> dropout(summary_last_dropout) -> classifier (C, 1); (B*NC, 1) -> (B, NC)
    ElectraForTokenClassification     as BERT's: every position -> dropout -> classifier (C, K)
    ElectraForQuestionAnswering       as BERT's: every position -> qa_outputs (C, 2), no dropout

The classification head's GELU is always the exact one (transformers calls get_activation("gelu")
there, whatever hidden_act says); its dropout is classifier_dropout, or hidden_dropout_prob when
that is None. These are data for the shared heads (ELECTRA_HEADS: heads.Head, heads.Pool for the
dense -> GELU layer); the classes are finetune/models.py's TaskModel with ELECTRA_ENCODER below,
as BERT's and ALBERT's are with theirs. The losses are BERT's: cross-entropy, MSE for one output,
QA's (CE(start) + CE(end)) / 2 with out-of-window positions ignored.

Parameter names: the discriminator's encoder names (family/electra.py) plus the head
    sequence  cls.dense.w (C, C) .b (C,)  cls.out.w (C, K) .b (K,)   classifier.dense / classifier.out_proj
    token     cls.w (C, K) .b (K,)                                     classifier
    choice    summary.w (C, C) .b (C,)  cls.w (C, 1) .b (1,)           sequence_summary.summary / classifier
    qa        qa.w (C, 2) .b (2,)                                      qa_outputs

Shape legend: B batch, NC choices, T sequence length, C hidden size, K labels, N rows a head reads.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from minibert.family import electra
from minibert.family.electra import ElectraConfig
from minibert.finetune.heads import Encoder, Head, Pool, head_shapes
from minibert.finetune.models import (MultipleChoice, QuestionAnswering, SequenceClassification, TaskKeys,
                                      TokenClassification, TaskModel, read_checkpoint)
from minibert import checkpoint
from minibert.model import ACTIVATIONS, blocks_forward, embeddings_forward

# the new heads' names: minibert name -> transformers module
HEAD_NAMES = {
    "sequence": {"cls.dense": "classifier.dense", "cls.out": "classifier.out_proj"},
    "token": {"cls": "classifier"},
    "choice": {"summary": "sequence_summary.summary", "cls": "classifier"},
    "qa": {"qa": "qa_outputs"},
}
# ElectraTaskConfig's keys beyond TaskKeys: what the sequence and choice heads read
HEAD_KEYS = ("classifier_dropout", "summary_type", "summary_use_proj", "summary_activation", "summary_last_dropout")
# what a pretraining checkpoint may be (its encoder is loaded; its heads are not): architecture -> family/electra's head
SOURCES = {"ElectraForPreTraining": "disc", "ElectraForMaskedLM": "gen"}


@dataclasses.dataclass
class ElectraTaskConfig(TaskKeys, ElectraConfig):
    """ElectraConfig plus the fine-tuning keys of transformers' config.json (TaskKeys: labels and
    problem_type, as BERT's TaskConfig) and ELECTRA's head keys (their defaults are transformers')."""

    base = ElectraConfig
    # ElectraClassificationHead's activation: transformers calls get_activation("gelu") there,
    # whatever hidden_act says (a class attribute, not a config.json key; heads.Pool reads it by name)
    classifier_activation = "gelu"
    classifier_dropout: float | None = None  # None: hidden_dropout_prob
    summary_type: str = "first"  # multiple choice's ElectraSequenceSummary
    summary_use_proj: bool = True
    summary_activation: str | None = "gelu"
    summary_last_dropout: float = 0.1

    def __post_init__(self):
        super().__post_init__()  # ElectraConfig's checks, then the labels' (TaskKeys)
        if self.summary_type != "first" or self.summary_use_proj is not True:
            raise ValueError(f"summary_type={self.summary_type!r}, summary_use_proj={self.summary_use_proj!r}: "
                             f"minibert's ElectraForMultipleChoice supports 'first' with a projection only")
        if self.summary_activation not in ACTIVATIONS:
            raise ValueError(f"summary_activation={self.summary_activation!r} is not one of {sorted(ACTIVATIONS)}")
        for k in ("classifier_dropout", "summary_last_dropout"):
            p = getattr(self, k)
            if p is not None and not 0 <= p < 1:
                raise ValueError(f"{k}={p!r} must be in [0, 1)")

    @property
    def head_dropout(self) -> float:
        return self.hidden_dropout_prob if self.classifier_dropout is None else self.classifier_dropout

    def to_dict(self) -> dict[str, Any]:
        """TaskKeys' keys (ElectraConfig's, the labels, problem_type when set) and the head keys."""
        return {**super().to_dict(), **{k: getattr(self, k) for k in HEAD_KEYS}}

    @classmethod
    def from_electra(cls, config: ElectraConfig, **task) -> "ElectraTaskConfig":
        return cls.from_base(config, **task)


# ---------------------------------------------------------------------------------------------
# the encoder the heads sit on, and ELECTRA's heads (heads.Head): the dropouts and activations
# are ElectraTaskConfig's attributes, by name

ELECTRA_HEADS = {
    # ElectraClassificationHead: dropout -> dense -> GELU -> dropout -> out_proj, on the first token
    "sequence": Head("cls.out", "head_dropout", Pool("cls.dense", "classifier_activation", "head_dropout")),
    "token": Head("cls", "head_dropout"),
    # ElectraSequenceSummary (summary -> summary_activation -> dropout), then the classifier
    "choice": Head("cls", "summary_last_dropout", Pool("summary", "summary_activation")),
    "qa": Head("qa", None),
}


def electra_encoder_forward(params, cfg, ids, seg, mask, rng, ops, unpad=True):
    """heads.Encoder's forward for the discriminator: ids (B, T) -> sequence_output (B, T, C), cache;
    the blocks on the real tokens only when the batch has padding and `unpad`."""
    return electra.encoder_forward(params, cfg, ids, seg, mask, rng, ops, unpad and not mask.all())


def electra_layers(params, cfg, ids, seg, mask, ops):
    """Feature-based use (`finetune --frozen`): the embedding's output (after the E -> C
    projection) and every layer's, a list of L + 1 arrays (B, T, C), dropout off."""
    x, _ = embeddings_forward(params, cfg, ids, seg, None, ops)  # (B, T, C)
    return blocks_forward(params, cfg, x, mask, None, ops, states=True)[2]


def disc_init_params(cfg, seed, dtype) -> dict[str, np.ndarray]:
    return electra.init_params(cfg, "disc", seed, dtype)


def disc_param_shapes(cfg) -> dict[str, tuple]:
    return electra.param_shapes(cfg, "disc")


# ---------------------------------------------------------------------------------------------
# transformers' names, and reading a checkpoint directory

def encoder_shapes(cfg: ElectraConfig) -> dict[str, tuple]:
    """The discriminator's parameters without its RTD head."""
    return {k: s for k, s in electra.param_shapes(cfg, "disc").items() if not k.startswith("disc.")}


def to_hf_state_dict(params, cfg: ElectraConfig, head_shape: str) -> dict[str, np.ndarray]:
    """minibert params (or grads, or some of them) of a task model -> transformers' names and layouts."""
    ours = {}
    for module, theirs in HEAD_NAMES[head_shape].items():
        if module + ".w" in params:
            ours[theirs + ".weight"] = np.ascontiguousarray(params[module + ".w"].T)  # PyTorch stores (out, in)
        if module + ".b" in params:
            ours[theirs + ".bias"] = np.ascontiguousarray(params[module + ".b"])
    heads = {m + s for m in HEAD_NAMES[head_shape] for s in (".w", ".b")}
    return {**electra.to_hf_state_dict({k: v for k, v in params.items() if k not in heads}, cfg), **ours}


def from_hf_state_dict(state, cfg: ElectraConfig, shapes, head_shape: str | None, dtype) -> dict[str, np.ndarray]:
    """Inverse of to_hf_state_dict for the parameters named in `shapes` (the state may hold
    more; check_state has checked what must be there). head_shape None: the encoder's names and the
    pretraining heads' (family/electra.py's)."""
    names = electra.hf_names(cfg)
    for m, t in HEAD_NAMES.get(head_shape, {}).items():
        names.update({m + ".w": (t + ".weight", True), m + ".b": (t + ".bias", False)})
    return electra.gather_params(state, shapes, names, dtype)


def expected_hf_shapes(shapes, cfg, head_shape=None) -> dict[str, tuple]:
    """The transformers keys and shapes that to_hf_state_dict writes for parameters of these
    shapes (head_shape None: the encoder alone)."""
    empty = {n: np.empty(s, np.float32) for n, s in shapes.items()}
    state = electra.to_hf_state_dict(empty, cfg) if head_shape is None else to_hf_state_dict(empty, cfg, head_shape)
    return {k: a.shape for k, a in state.items()}


def _read_config(raw: dict) -> ElectraConfig:
    checkpoint.refuse_decoder_flags(raw, "config.json", "minibert's ELECTRA")
    return ElectraConfig.from_dict(raw)


def _params_from_state(tensors, config: ElectraConfig, arch: str, dtype) -> dict[str, np.ndarray]:
    state = {k: v for k, v in tensors.items() if not k.endswith(("position_ids", "token_type_ids"))}
    state.pop("generator_lm_head.weight", None)  # a generator's tied decoder: the word embeddings again
    enc = encoder_shapes(config)
    if arch in CLASSES:  # a task model: its encoder and head, every tensor checked
        head_shape = CLASSES[arch].head_shape
        out = HEAD_NAMES[head_shape][ELECTRA_HEADS[head_shape].out] + ".bias"
        K = state[out].shape[0] if out in state else 1  # (when it is missing, check_state says so)
        shapes = {**enc, **head_shapes(ELECTRA_HEADS[head_shape], config.hidden_size, K)}
        checkpoint.check_state(state, expected_hf_shapes(shapes, config, head_shape), f"minibert's {arch}")
        return from_hf_state_dict(state, config, shapes, head_shape, dtype)
    # a pretraining checkpoint: the encoder, checked, and the tensors of its head that the file has
    # (reported as not used)
    mine = {k: v for k, v in state.items() if k.startswith("electra.")}
    checkpoint.check_state(mine, expected_hf_shapes(enc, config), "an ELECTRA encoder")
    names = electra.hf_names(config)
    head = [n for n in electra.param_shapes(config, SOURCES[arch]) if n not in enc and names[n][0] in state]
    return from_hf_state_dict(state, config, [*enc, *head], None, dtype)


def read_pretrained(directory, dtype=np.float32, verify: bool = True) -> checkpoint.Pretrained:
    """An ELECTRA directory (a discriminator or generator checkpoint, or one of the four task
    classes, minibert's or transformers') -> checkpoint.Pretrained: config, params under minibert's
    names (the heads the file holds), architecture, vocab and casing, the config's fine-tuning and
    head keys."""
    return read_checkpoint(directory, dtype, verify, "electra", tuple(SOURCES) + tuple(CLASSES), _read_config,
                           _params_from_state, keys=checkpoint.TASK_CONFIG_KEYS + HEAD_KEYS)


def hf_config(model) -> dict:
    """ElectraTaskConfig's keys (the labels and head keys included), transformers' fixed ones."""
    hf = {**model.config.to_dict(), "architectures": [model.architecture], "model_type": "electra",
          "pad_token_id": 0, "tie_word_embeddings": True, "dtype": model.dtype.name}
    return dict(sorted(hf.items()))


ELECTRA_ENCODER = Encoder(
    forward=electra_encoder_forward, backward=electra.encoder_backward, heads=ELECTRA_HEADS, pool_last=False,
    layers=electra_layers, model_type="electra", config=ElectraTaskConfig, init_params=disc_init_params,
    param_shapes=disc_param_shapes, pretraining_heads=("disc",), read=read_pretrained, to_hf=to_hf_state_dict,
    hf_config=hf_config, carried_keys=HEAD_KEYS)


# ---------------------------------------------------------------------------------------------
# the classes

class ElectraForSequenceClassification(SequenceClassification, TaskModel):
    """Single sentences or pairs -> K classes (num_labels == 1: regression), from the first token
    through ElectraClassificationHead (no pooler).

    >>> cfg = ElectraConfig(vocab_size=50, embedding_size=4, hidden_size=8, num_hidden_layers=1,
    ...                     num_attention_heads=2, intermediate_size=16)
    >>> ElectraForSequenceClassification(cfg, num_labels=3).forward(np.array([[2, 7, 3]])).shape
    (1, 3)
    """

    architecture, encoder = "ElectraForSequenceClassification", ELECTRA_ENCODER


class ElectraForTokenClassification(TokenClassification, TaskModel):
    """A label for every token (NER); the loss skips positions labelled -100."""

    architecture, encoder = "ElectraForTokenClassification", ELECTRA_ENCODER


class ElectraForMultipleChoice(MultipleChoice, TaskModel):
    """(B, NC, T) inputs: each choice scored from its first token through ElectraSequenceSummary."""

    architecture, encoder = "ElectraForMultipleChoice", ELECTRA_ENCODER


class ElectraForQuestionAnswering(QuestionAnswering, TaskModel):
    """Span extraction: a start and an end score for every token (qa_outputs, no dropout)."""

    architecture, encoder = "ElectraForQuestionAnswering", ELECTRA_ENCODER


CLASSES = {c.architecture: c for c in (ElectraForSequenceClassification, ElectraForTokenClassification,
                                       ElectraForMultipleChoice, ElectraForQuestionAnswering)}
