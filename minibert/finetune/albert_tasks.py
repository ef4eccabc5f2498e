"""Fine-tuning ALBERT: the four task shapes on ALBERT's encoder, laid out as transformers' Albert* classes.

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

Each class is the BERT class of the same task (its task behaviour: labels, problem_type, QA's
(start, end) output) with ALBERT's encoder, parameters and checkpoints (_AlbertTaskModel below).
Parameter names: ALBERT's (family/albert.py) without the MLM and SOP heads, the pooler for the
pooled classes, and the head `cls.w` (C, K) / `cls.b` (K,) (transformers: `classifier`) or `qa.w`
(C, 2) / `qa.b` (2,) (`qa_outputs`).
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from minibert.family import albert
from minibert.family.albert import AlbertConfig
from minibert.finetune.heads import Encoder
from minibert.finetune.models import (BertForMultipleChoice, BertForQuestionAnswering, BertForSequenceClassification,
                                      BertForTokenClassification, TaskKeys, _TaskModel)
from minibert.io import atomic, checkpoint, tensorfile
from minibert.model import block_forward, check_inputs

HEAD_GROUPS = ("pool", "mlm", "sop")  # ALBERT's pretraining heads (the pooler stays for the pooled classes)
HF_HEADS = {"cls": "classifier", "qa": "qa_outputs"}  # the task head: minibert prefix -> transformers module


@dataclasses.dataclass
class AlbertTaskConfig(TaskKeys, AlbertConfig):
    """AlbertConfig plus the fine-tuning keys of transformers' config.json (TaskKeys, as TaskConfig for BERT)."""

    base = AlbertConfig

    @classmethod
    def from_albert(cls, config: AlbertConfig, **task) -> "AlbertTaskConfig":
        return cls.from_base(config, **task)


# ---------------------------------------------------------------------------------------------
# the encoder the heads sit on

def albert_encoder_forward(params, cfg, ids, seg, mask, rng, ops, unpad=True):
    """heads.Encoder's forward for ALBERT: ids (B, T) -> sequence_output (B, T, C), cache; the
    unpadded blocks when the batch has padding and `unpad` (as heads.run_encoder does for BERT)."""
    return albert.encoder_forward(params, cfg, ids, seg, mask, rng, ops, unpad and not mask.all())


ALBERT_ENCODER = Encoder(albert_encoder_forward, albert.encoder_backward, "classifier_dropout_prob")


# ---------------------------------------------------------------------------------------------
# transformers' names, and reading a checkpoint directory

def to_hf_state_dict(params) -> dict[str, np.ndarray]:
    """A task model's params (or grads) -> transformers' Albert* names and layouts: the encoder
    and pooler as family/albert.py names them, the head as classifier.* / qa_outputs.*."""
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
    directory = Path(directory)
    if directory.is_file():
        raise ValueError(f"{directory} is a file; pass the checkpoint directory")
    if not directory.is_dir():
        raise FileNotFoundError(f"checkpoint directory {directory} does not exist")
    weights, config_path = directory / checkpoint.WEIGHTS_NAME, directory / checkpoint.CONFIG_NAME
    if not weights.is_file():
        raise FileNotFoundError(f"{directory} has no {checkpoint.WEIGHTS_NAME}")
    raw = checkpoint.read_config_json(config_path)
    if raw.get("model_type") != "albert":
        raise ValueError(f"{config_path}: model_type {raw.get('model_type')!r} is not 'albert' (load BERT "
                         f"checkpoints with the Bert* classes of minibert.finetune.models)")
    archs = raw.get("architectures") or []
    if len(archs) != 1 or archs[0] not in SOURCES + tuple(CLASSES):
        raise ValueError(f"{config_path}: architecture {archs} is not supported; minibert's ALBERT task classes "
                         f"read {list(SOURCES + tuple(CLASSES))}")
    try:
        config = AlbertConfig.from_dict(raw)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{config_path}: {e}") from None
    tensors, _ = tensorfile.load_tensors(weights, verify=verify)
    if verify:
        tensorfile.check_finite(tensors, weights)
    try:
        params = _params_from_state(tensors, config, archs[0], dtype)
    except ValueError as e:
        raise ValueError(f"{weights}: {e}") from None
    vocab = directory / checkpoint.VOCAB_NAME
    return checkpoint.Pretrained(config, params, archs[0], vocab if vocab.is_file() else None,
                                 checkpoint.read_do_lower_case(directory / checkpoint.TOKENIZER_CONFIG_NAME),
                                 {k: raw[k] for k in checkpoint.TASK_CONFIG_KEYS if k in raw})


def _params_from_state(tensors, config: AlbertConfig, arch: str, dtype) -> dict[str, np.ndarray]:
    state = {k: v for k, v in tensors.items() if not k.endswith("position_ids")}
    if arch in SOURCES:  # every tensor, the MLM and SOP heads included (they are reported as not used)
        return albert.from_hf_state_dict(state, config, dtype)
    head = checkpoint._pop_task_heads(state, dtype)  # classifier.* / qa_outputs.* -> cls.* / qa.*
    wanted = CLASSES[arch].head
    if wanted + ".w" not in head:
        raise ValueError(f"config.json says {arch} but the file has no {HF_HEADS[wanted]} tensors")
    names = [n for n in albert.param_shapes(config) if n.split(".", 1)[0] not in HEAD_GROUPS]
    if any(k.startswith("albert.pooler.") for k in state):
        names += ["pool.w", "pool.b"]
    return {**albert.from_hf_state_dict(state, config, dtype, names), **head}


# ---------------------------------------------------------------------------------------------
# the classes

class _AlbertTaskModel(_TaskModel):
    """What makes a BERT task class an ALBERT one: the encoder, the parameters, the checkpoints."""

    encoder = ALBERT_ENCODER
    head_groups = HEAD_GROUPS

    @classmethod
    def _task_config(cls, config, **task) -> AlbertTaskConfig:
        if isinstance(config, AlbertTaskConfig):
            return config
        if not isinstance(config, AlbertConfig):
            raise TypeError(f"{cls.__name__} needs an AlbertConfig, got {type(config).__name__}")
        return AlbertTaskConfig.from_albert(config, **task)

    def _base_params(self, seed: int) -> dict[str, np.ndarray]:
        return albert.init_params(self.config, seed, self.dtype)

    def _base_shapes(self) -> dict[str, tuple]:
        return albert.param_shapes(self.config)

    @staticmethod
    def _read(directory, dtype, verify):
        return read_pretrained(directory, dtype, verify)

    @staticmethod
    def _hf_names(params) -> list[str]:
        return sorted(to_hf_state_dict(params))

    def save_pretrained(self, directory, vocab=None) -> Path:
        """config.json (architectures, id2label, label2id, problem_type), model.safetensors in
        transformers' names and the vocabulary: what transformers loads with the class of the same name."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        tensorfile.save_tensors_atomic(to_hf_state_dict(self.params), directory / checkpoint.WEIGHTS_NAME,
                                       {"format": "pt"})
        hf = albert.config_to_hf_dict(self.config, self.dtype)  # AlbertConfig's keys + the task keys
        hf["architectures"] = [self.architecture]
        atomic.write_text_atomic(directory / checkpoint.CONFIG_NAME, json.dumps(hf, indent=2) + "\n")
        checkpoint.save_vocab_files(self, directory, vocab)
        return directory

    def hidden_states(self, input_ids, token_type_ids=None, attention_mask=None):
        """Feature-based use: the factorised embedding's output (already mapped to C) and every
        application of the shared block, a list of L + 1 arrays (B, T, C), dropout off."""
        ops, p, cfg = self.ops, self.params, self.config
        ids, seg, mask = check_inputs(cfg, input_ids, token_type_ids, attention_mask)
        x, _ = albert.factorized_embedding_forward(p, cfg, ids, seg, None, ops)  # (B, T, C)
        shared = albert.shared_block_view(p)
        states = [x]
        for _ in range(cfg.num_hidden_layers):
            x, _ = block_forward(shared, cfg, 0, x, mask, None, ops)  # (B, T, C): the same block every time
            states.append(x)
        return states


class AlbertForSequenceClassification(_AlbertTaskModel, BertForSequenceClassification):
    """Single sentences or pairs -> K classes (num_labels == 1: a regression score).

    >>> cfg = AlbertConfig(vocab_size=50, embedding_size=4, hidden_size=8, num_hidden_layers=2,
    ...                    num_attention_heads=2, intermediate_size=16)
    >>> AlbertForSequenceClassification(cfg, num_labels=3).forward(np.array([[2, 7, 3]])).shape
    (1, 3)
    """

    architecture = "AlbertForSequenceClassification"


class AlbertForTokenClassification(_AlbertTaskModel, BertForTokenClassification):
    """A label for every token (NER); the loss skips positions labelled -100."""

    architecture = "AlbertForTokenClassification"


class AlbertForMultipleChoice(_AlbertTaskModel, BertForMultipleChoice):
    """(B, NC, T) inputs: each choice scored from its pooled [CLS], softmax over the NC choices."""

    architecture = "AlbertForMultipleChoice"


class AlbertForQuestionAnswering(_AlbertTaskModel, BertForQuestionAnswering):
    """Span extraction: a start and an end score for every token (qa_outputs, no dropout)."""

    architecture = "AlbertForQuestionAnswering"


CLASSES = {c.architecture: c for c in (AlbertForSequenceClassification, AlbertForTokenClassification,
                                       AlbertForMultipleChoice, AlbertForQuestionAnswering)}
