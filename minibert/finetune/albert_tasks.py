"""Fine-tuning ALBERT: the four head shapes on ALBERT's encoder, laid out as transformers' Albert* classes.

    model = AlbertForSequenceClassification.from_pretrained("runs/albert-tiny", num_labels=2)
    logits = model.forward(input_ids, token_type_ids, attention_mask)       # (B, 2)
    loss, grads = model.loss_and_grads(batch, train=True, rng=rng)          # grads: keys of .params
    model.save_pretrained("runs/sst2-albert")   # transformers loads it with the class of the same name

The heads are BERT's (minibert/finetune/heads.py, the same forward and backward): only the encoder
under them changes, to ALBERT's factorised embedding and its one shared block (family/albert.py),
whose backward sums the L applications' gradients into the shared tensors. transformers' Albert*
task classes have exactly BERT's head layout (docs/bert-notes.md §10.1):

    AlbertForSequenceClassification  pooled [CLS] (albert.pooler) -> dropout -> classifier   (B, K); K = 1: MSE
    AlbertForTokenClassification     every position (no pooler) -> dropout -> classifier     (B, T, K)
    AlbertForMultipleChoice          (B, NC, T) -> pooled [CLS] -> dropout -> classifier (C, 1) -> (B, NC)
    AlbertForQuestionAnswering       every position (no pooler) -> qa_outputs (C, 2), no dropout

One difference from BERT's classes: the dropout before the classifier is ALBERT's
`classifier_dropout_prob` (transformers' AlbertForSequenceClassification, ...ForTokenClassification
and ...ForMultipleChoice all read it), not `hidden_dropout_prob`.

Each class is finetune/models.py's TaskModel with the task's behaviour (labels, problem_type, QA's
(start, end) output), as the Bert* classes, and ALBERT_ENCODER below: ALBERT's encoder, heads,
parameters and checkpoints, as data for the shared class.
Parameter names: ALBERT's (family/albert.py) without the MLM and SOP heads, the pooler for the
pooled classes, and the head `cls.w` (C, K) / `cls.b` (K,) (transformers: `classifier`) or `qa.w`
(C, 2) / `qa.b` (2,) (`qa_outputs`).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from minibert.family import albert
from minibert.family.albert import AlbertConfig
from minibert.finetune.heads import Encoder, pooler_heads
from minibert.finetune.models import (MultipleChoice, QuestionAnswering, SequenceClassification, TaskKeys,
                                      TokenClassification, TaskModel, read_checkpoint)
from minibert import checkpoint
from minibert.model import blocks_forward, embeddings_forward

HEAD_GROUPS = ("pool", "mlm", "sop")  # ALBERT's pretraining heads (the pooler stays for the pooled classes)
HF_HEADS = {"cls": "classifier", "qa": "qa_outputs"}  # the task head: minibert prefix -> transformers module


@dataclasses.dataclass
class AlbertTaskConfig(TaskKeys, AlbertConfig):
    """AlbertConfig plus the fine-tuning keys of transformers' config.json (TaskKeys, as TaskConfig for BERT)."""

    base = AlbertConfig


# ---------------------------------------------------------------------------------------------
# the encoder the heads sit on

def albert_encoder_forward(params, cfg, ids, seg, mask, rng, ops, unpad=True):
    """heads.Encoder's forward for ALBERT: ids (B, T) -> sequence_output (B, T, C), cache; the
    unpadded blocks when the batch has padding and `unpad` (as heads.run_encoder does for BERT)."""
    return albert.encoder_forward(params, cfg, ids, seg, mask, rng, ops, unpad and not mask.all())


def albert_layers(params, cfg, ids, seg, mask, ops):
    """Feature-based use: the factorised embedding's output (already mapped to C) and every
    application of the shared block, a list of L + 1 arrays (B, T, C), dropout off."""
    x, _ = embeddings_forward(params, cfg, ids, seg, None, ops)  # (B, T, C)
    return blocks_forward(albert.layer_view(params, cfg), cfg, x, mask, None, ops, states=True)[2]


# ---------------------------------------------------------------------------------------------
# transformers' names, and reading a checkpoint directory

def to_hf_state_dict(params, config=None, head_shape=None) -> dict[str, np.ndarray]:
    """A task model's params (or grads) -> transformers' Albert* names and layouts: the encoder
    and pooler as family/albert.py names them, the head as classifier.* / qa_outputs.* (the names
    do not depend on the config or the task: heads.Encoder's to_hf passes them)."""
    head = {n: a for n, a in params.items() if n.split(".", 1)[0] in HF_HEADS}
    state = albert.to_hf_state_dict({n: a for n, a in params.items() if n not in head})
    for name, a in head.items():
        prefix, kind = name.split(".")
        key = f"{HF_HEADS[prefix]}.{'weight' if kind == 'w' else 'bias'}"
        state[key] = np.ascontiguousarray(a.T if kind == "w" else a)  # (C, K) here, (K, C) in transformers
    return state


SOURCES = ("AlbertForPreTraining",)  # a pretraining checkpoint: its encoder (and pooler) are loaded


def read_pretrained(directory, dtype=np.float32, verify: bool = True) -> checkpoint.Pretrained:
    """An ALBERT directory (AlbertForPreTraining or one of the four task classes, minibert's or
    transformers') -> checkpoint.Pretrained: config, params under minibert's names (the heads the
    file holds), architecture, vocab and casing, the config's fine-tuning keys."""
    return read_checkpoint(directory, dtype, verify, "albert", SOURCES + tuple(CLASSES), AlbertConfig.from_dict,
                           _params_from_state,
                           hint=" (load BERT checkpoints with the Bert* classes of minibert.finetune.models)")


def _params_from_state(tensors, config: AlbertConfig, arch: str, dtype) -> dict[str, np.ndarray]:
    state = {k: v for k, v in tensors.items() if not k.endswith("position_ids")}
    if arch in SOURCES:  # every tensor, the MLM and SOP heads included (they are reported as not used)
        return albert.from_hf_state_dict(state, config, dtype)
    head = checkpoint._pop_task_heads(state, dtype)  # classifier.* / qa_outputs.* -> cls.* / qa.*
    wanted = ALBERT_ENCODER.heads[CLASSES[arch].head_shape].out
    if wanted + ".w" not in head:
        raise ValueError(f"config.json says {arch} but the file has no {HF_HEADS[wanted]} tensors")
    names = [n for n in albert.param_shapes(config) if n.split(".", 1)[0] not in HEAD_GROUPS]
    if any(k.startswith("albert.pooler.") for k in state):
        names += ["pool.w", "pool.b"]
    return {**albert.from_hf_state_dict(state, config, dtype, names), **head}


def hf_config(model) -> dict:
    """AlbertConfig's keys, transformers' fixed ones, the task keys and the architecture."""
    hf = albert.config_to_hf_dict(model.config, model.dtype)
    hf["architectures"] = [model.architecture]
    return hf


# the dropout before every classifier is classifier_dropout_prob, as transformers' Albert* classes read it
ALBERT_ENCODER = Encoder(
    forward=albert_encoder_forward, backward=albert.encoder_backward, heads=pooler_heads("classifier_dropout_prob"),
    pool_last=False, layers=albert_layers, model_type="albert", config=AlbertTaskConfig,
    init_params=albert.init_params, param_shapes=albert.param_shapes, pretraining_heads=HEAD_GROUPS,
    read=read_pretrained, to_hf=to_hf_state_dict, hf_config=hf_config)


# ---------------------------------------------------------------------------------------------
# the classes

class AlbertForSequenceClassification(SequenceClassification, TaskModel):
    """Single sentences or pairs -> K classes (num_labels == 1: a regression score).

    >>> cfg = AlbertConfig(vocab_size=50, embedding_size=4, hidden_size=8, num_hidden_layers=2,
    ...                    num_attention_heads=2, intermediate_size=16)
    >>> AlbertForSequenceClassification(cfg, num_labels=3).forward(np.array([[2, 7, 3]])).shape
    (1, 3)
    """

    architecture, encoder = "AlbertForSequenceClassification", ALBERT_ENCODER


class AlbertForTokenClassification(TokenClassification, TaskModel):
    """A label for every token (NER); the loss skips positions labelled -100."""

    architecture, encoder = "AlbertForTokenClassification", ALBERT_ENCODER


class AlbertForMultipleChoice(MultipleChoice, TaskModel):
    """(B, NC, T) inputs: each choice scored from its pooled [CLS], softmax over the NC choices."""

    architecture, encoder = "AlbertForMultipleChoice", ALBERT_ENCODER


class AlbertForQuestionAnswering(QuestionAnswering, TaskModel):
    """Span extraction: a start and an end score for every token (qa_outputs, no dropout)."""

    architecture, encoder = "AlbertForQuestionAnswering", ALBERT_ENCODER


CLASSES = {c.architecture: c for c in (AlbertForSequenceClassification, AlbertForTokenClassification,
                                       AlbertForMultipleChoice, AlbertForQuestionAnswering)}
