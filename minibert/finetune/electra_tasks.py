"""Fine-tuning ELECTRA's discriminator: the four task shapes, laid out as transformers' Electra* classes.

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
that is None. The losses are BERT's (minibert/finetune/heads.py, whose pieces are reused here):
cross-entropy, MSE for one output, QA's (CE(start) + CE(end)) / 2 with out-of-window positions ignored.

Parameter names: the discriminator's encoder names (family/electra.py) plus the head
    sequence  cls.dense.w (C, C) .b (C,)  cls.out.w (C, K) .b (K,)   classifier.dense / classifier.out_proj
    token     cls.w (C, K) .b (K,)                                     classifier
    choice    summary.w (C, C) .b (C,)  cls.w (C, 1) .b (1,)           sequence_summary.summary / classifier
    qa        qa.w (C, 2) .b (2,)                                      qa_outputs

Shape legend: B batch, NC choices, T sequence length, C hidden size, K labels, N rows a head reads.
"""
from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from minibert import layers
from minibert.backend import get_ops
from minibert.family import electra
from minibert.family.electra import ElectraConfig
from minibert.finetune.heads import classifier_backward, classifier_forward, task_inputs, task_loss, task_loss_backward
from minibert.finetune.models import (MultipleChoice, QuestionAnswering, SequenceClassification, TaskKeys,
                                      TokenClassification)
from minibert.io import atomic, checkpoint, tensorfile
from minibert.model import ACTIVATIONS, _train_rng, block_forward, check_inputs, check_params, truncated_normal

# the new heads' names: minibert name -> (transformers key, transpose?)
HEAD_NAMES = {
    "sequence": {"cls.dense": "classifier.dense", "cls.out": "classifier.out_proj"},
    "token": {"cls": "classifier"},
    "choice": {"summary": "sequence_summary.summary", "cls": "classifier"},
    "qa": {"qa": "qa_outputs"},
}
# ElectraTaskConfig's keys beyond TaskKeys: what the sequence and choice heads read
HEAD_KEYS = ("classifier_dropout", "summary_type", "summary_use_proj", "summary_activation", "summary_last_dropout")
# what a pretraining checkpoint may be (its encoder is loaded; its heads are not)
SOURCES = ("ElectraForPreTraining", "ElectraForMaskedLM")


@dataclasses.dataclass
class ElectraTaskConfig(TaskKeys, ElectraConfig):
    """ElectraConfig plus the fine-tuning keys of transformers' config.json (TaskKeys: labels and
    problem_type, as BERT's TaskConfig) and ELECTRA's head keys (their defaults are transformers')."""

    base = ElectraConfig
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

    def electra_config(self) -> ElectraConfig:
        names = {f.name for f in dataclasses.fields(ElectraConfig)}
        return ElectraConfig(**{k: getattr(self, k) for k in names})

    def to_dict(self) -> dict[str, Any]:
        """TaskKeys' keys (ElectraConfig's, the labels, problem_type when set) and the head keys."""
        return {**super().to_dict(), **{k: getattr(self, k) for k in HEAD_KEYS}}

    @classmethod
    def from_electra(cls, config: ElectraConfig, **task) -> "ElectraTaskConfig":
        return cls.from_base(config, **task)


# ---------------------------------------------------------------------------------------------
# the new layer: dropout -> dense -> GELU (ElectraClassificationHead's first half; the summary)

class DenseActCache(NamedTuple):
    drop: Any  # dropout cache of x (N, C)
    linear: Any  # linear cache (N, C) -> (N, C')
    act: Any  # GELU cache (N, C')


def dense_act_forward(x, w, b, p, rng, approximate="none", ops=layers):
    """x (N, C) -> dropout(p) -> x @ w + b -> GELU -> (N, C'), cache. Dropout only when `rng` is given."""
    x, c_drop = ops.dropout_forward(x, p if rng is not None else 0.0, rng)  # (N, C)
    t, c_lin = ops.linear_forward(x, w, b)  # (N, C) @ (C, C') -> (N, C')
    t, c_act = ops.gelu_forward(t, approximate)  # (N, C')
    return t, DenseActCache(c_drop, c_lin, c_act)


def dense_act_backward(dout, cache: DenseActCache, ops=layers):
    """Mirror of dense_act_forward: dout (N, C') -> dx (N, C), dw (C, C'), db (C',)."""
    dt = ops.gelu_backward(dout, cache.act)  # (N, C')
    dx, dw, db = ops.linear_backward(dt, cache.linear)  # (N, C)
    return ops.dropout_backward(dx, cache.drop), dw, db


# ---------------------------------------------------------------------------------------------
# the four task shapes on the discriminator's encoder

class ElectraTaskCache(NamedTuple):
    task: str
    seq_shape: tuple  # (B', T, C) of the encoder's output (B' = B * NC for multiple choice)
    enc: Any  # electra.ElectraEncoderCache
    first: Any  # DenseActCache of the first-token heads (sequence, choice), else None
    head: Any  # heads.ClassifierCache of the last dropout -> linear
    loss: Any  # cross-entropy / MSE cache(s)


def task_logits(params, cfg: ElectraTaskConfig, task, input_ids, token_type_ids=None, attention_mask=None, rng=None,
                ops=layers, unpad=True):
    """-> (logits, partial cache). Shapes: sequence (B, K), token (B, T, K), choice (B, NC),
    qa (B, T, 2). With `unpad` and padding in the batch, the encoder runs on the real tokens only."""
    ids, seg, mask, grid = task_inputs(cfg, task, input_ids, token_type_ids, attention_mask)
    seq, enc = electra.encoder_forward(params, cfg, ids, seg, mask, rng, ops, unpad and not mask.all())  # (B', T, C)
    B_, T, C = seq.shape
    first = None
    if task == "sequence":  # ElectraClassificationHead: dropout -> dense -> GELU -> dropout -> out_proj
        p = cfg.head_dropout
        h, first = dense_act_forward(seq[:, 0], params["cls.dense.w"], params["cls.dense.b"], p, rng,
                                     ACTIVATIONS["gelu"], ops)  # (B, C)
        logits, head = classifier_forward(h, params["cls.out.w"], params["cls.out.b"], p, rng, ops)  # (B, K)
    elif task == "choice":  # ElectraSequenceSummary -> classifier
        h, first = dense_act_forward(seq[:, 0], params["summary.w"], params["summary.b"], 0.0, None,
                                     ACTIVATIONS[cfg.summary_activation], ops)  # (B*NC, C)
        logits, head = classifier_forward(h, params["cls.w"], params["cls.b"], cfg.summary_last_dropout, rng,
                                          ops)  # (B*NC, 1)
        logits = logits.reshape(grid)  # (B*NC, 1) -> (B, NC)
    elif task == "token":
        logits, head = classifier_forward(seq.reshape(B_ * T, C), params["cls.w"], params["cls.b"], cfg.head_dropout,
                                          rng, ops)  # (B*T, K)
        logits = logits.reshape(B_, T, -1)  # (B, T, K)
    else:  # qa: no dropout before qa_outputs
        logits, head = classifier_forward(seq.reshape(B_ * T, C), params["qa.w"], params["qa.b"], 0.0, None, ops)
        logits = logits.reshape(B_, T, 2)  # (B, T, 2)
    return logits, ElectraTaskCache(task, (B_, T, C), enc, first, head, None)


def task_forward(params, cfg, task, batch, rng=None, ops=layers, unpad=True):
    """Batch (input_ids, input_mask, segment_ids and the labels, as finetune/heads.task_forward)
    -> (loss, logits, cache)."""
    logits, c = task_logits(params, cfg, task, batch["input_ids"], batch.get("segment_ids"),
                            batch.get("input_mask"), rng, ops, unpad)
    return task_loss(logits, c, batch, ops)


def task_backward(params, cfg, cache: ElectraTaskCache, ops=layers):
    """Mirror of task_forward: from the loss back to every parameter -> grads (keys of params)."""
    B_, T, C = cache.seq_shape
    grads = {}
    last = {"sequence": "cls.out", "token": "cls", "choice": "cls", "qa": "qa"}[cache.task]
    dx, grads[f"{last}.w"], grads[f"{last}.b"] = classifier_backward(task_loss_backward(cache, ops), cache.head, ops)
    if cache.first is not None:  # sequence and choice: dx is d(h) (B', C), h from the first token
        dense = "cls.dense" if cache.task == "sequence" else "summary"
        # forward was: h = GELU(dropout(seq[:, 0]) @ w + b)
        dfirst, grads[f"{dense}.w"], grads[f"{dense}.b"] = dense_act_backward(dx, cache.first, ops)  # (B', C)
        dseq = np.zeros((B_, T, C), dtype=dfirst.dtype)  # (B', T, C): only the first token feeds the head
        dseq[:, 0] = dfirst
    else:  # token and qa: every position feeds the head
        dseq = dx.reshape(B_, T, C)  # (B, T, C)
    grads = electra.encoder_backward(dseq, cache.enc, cfg, grads, ops)
    return {k: grads[k] for k in params}


# ---------------------------------------------------------------------------------------------
# transformers' names

def head_shapes(task: str, C: int, K: int) -> dict[str, tuple]:
    if task == "sequence":
        return {"cls.dense.w": (C, C), "cls.dense.b": (C,), "cls.out.w": (C, K), "cls.out.b": (K,)}
    if task == "choice":
        return {"summary.w": (C, C), "summary.b": (C,), "cls.w": (C, 1), "cls.b": (1,)}
    return {f"{'qa' if task == 'qa' else 'cls'}.w": (C, K), f"{'qa' if task == 'qa' else 'cls'}.b": (K,)}


def encoder_shapes(cfg: ElectraConfig) -> dict[str, tuple]:
    """The discriminator's parameters without its RTD head."""
    return {k: s for k, s in electra.param_shapes(cfg, "disc").items() if not k.startswith("disc.")}


def to_hf_state_dict(params, cfg: ElectraConfig, task: str) -> dict[str, np.ndarray]:
    """minibert params (or grads) of a task model -> transformers' names and layouts."""
    ours = {}
    for module, theirs in HEAD_NAMES[task].items():
        ours[theirs + ".weight"] = np.ascontiguousarray(params[module + ".w"].T)  # PyTorch stores (out, in)
        ours[theirs + ".bias"] = np.ascontiguousarray(params[module + ".b"])
    heads = {m + s for m in HEAD_NAMES[task] for s in (".w", ".b")}
    return {**electra.to_hf_state_dict({k: v for k, v in params.items() if k not in heads}, cfg), **ours}


def from_hf_state_dict(state, cfg: ElectraConfig, shapes: dict, task: str, dtype) -> dict[str, np.ndarray]:
    """Inverse of to_hf_state_dict for the parameters named in `shapes` (the state may hold
    more; check_state has checked what must be there)."""
    names = electra.hf_names(cfg)
    names.update({m + ".w": (t + ".weight", True) for m, t in HEAD_NAMES[task].items()})
    names.update({m + ".b": (t + ".bias", False) for m, t in HEAD_NAMES[task].items()})
    params = {}
    for name in shapes:
        if name in names:
            key, transpose = names[name]
            params[name] = np.ascontiguousarray(state[key].T if transpose else state[key], dtype=dtype)
        else:  # fused qkv: query | key | value side by side, (C, 3C) / (3C,)
            kind = ".weight" if name.endswith(".w") else ".bias"
            parts = [state[key + kind].T for key in electra._qkv(int(name[1:].split(".", 1)[0]))]  # .T: no-op on (C,)
            params[name] = np.ascontiguousarray(np.concatenate(parts, axis=-1), dtype=dtype)
    return params


def expected_hf_shapes(shapes, cfg, task=None) -> dict[str, tuple]:
    """The transformers keys and shapes that to_hf_state_dict writes for parameters of these
    shapes (task None: the encoder alone)."""
    empty = {n: np.empty(s, np.float32) for n, s in shapes.items()}
    state = electra.to_hf_state_dict(empty, cfg) if task is None else to_hf_state_dict(empty, cfg, task)
    return {k: a.shape for k, a in state.items()}


# ---------------------------------------------------------------------------------------------
# the classes

class _ElectraTaskModel:
    """What the four classes share (the interface of minibert.finetune.models' Bert* classes)."""

    architecture = ""
    task = ""

    def __init__(self, config: ElectraConfig, num_labels: int = 2, seed: int = 0, dtype=np.float32, params=None):
        if not isinstance(config, ElectraTaskConfig):
            config = ElectraTaskConfig.from_electra(config, num_labels=num_labels)
        self.config = config
        self.dtype = np.dtype(dtype)
        self.params = self._init_params(seed) if params is None else params
        check_params(self.params, self.expected_shapes(), type(self).__name__)
        self.vocab_path = None
        self.do_lower_case = True

    @property
    def head_outputs(self) -> int:
        return self.config.num_labels

    def expected_shapes(self) -> dict[str, tuple]:
        return {**encoder_shapes(self.config), **head_shapes(self.task, self.config.hidden_size, self.head_outputs)}

    def _init_params(self, seed: int) -> dict[str, np.ndarray]:
        """The encoder as electra.init_params; the head truncated normal(initializer_range), zero
        biases, from a stream of its own (the encoder's init does not depend on the head)."""
        params = {k: v for k, v in electra.init_params(self.config, "disc", seed, self.dtype).items()
                  if not k.startswith("disc.")}
        rng = np.random.default_rng([seed, 1])
        for name, shape in head_shapes(self.task, self.config.hidden_size, self.head_outputs).items():
            params[name] = (np.zeros(shape, self.dtype) if name.endswith(".b") else
                            truncated_normal(rng, shape, self.config.initializer_range).astype(self.dtype))
        return params

    @property
    def num_parameters(self) -> int:
        return sum(p.size for p in self.params.values())

    @property
    def ops(self):
        """minibert.kernels (Numba) by default, minibert.layers with MINIBERT_BACKEND=numpy."""
        return get_ops()

    # -- forward and loss ------------------------------------------------------------------
    def logits(self, input_ids, token_type_ids=None, attention_mask=None, train=False, rng=None):
        out, _ = task_logits(self.params, self.config, self.task, input_ids, token_type_ids, attention_mask,
                             _train_rng(train, rng), self.ops, unpad=False)  # every position, padding too
        return out

    def eval_logits(self, input_ids, token_type_ids=None, attention_mask=None):
        """Logits for scoring (dropout off), skipping padding where only real positions are read."""
        out, _ = task_logits(self.params, self.config, self.task, input_ids, token_type_ids, attention_mask,
                             None, self.ops, unpad=self.task != "qa")
        return out

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, train=False, rng=None):
        """-> logits: (B, K) sequence, (B, T, K) token, (B, NC) multiple choice."""
        return self.logits(input_ids, token_type_ids, attention_mask, train, rng)

    __call__ = forward

    def loss_grads_logits(self, batch, train=False, rng=None, compute_grads=True):
        """-> (loss, grads, logits); the batch as BertFor*'s (input_ids, input_mask, segment_ids, labels)."""
        ops = self.ops
        loss, logits, cache = task_forward(self.params, self.config, self.task, batch, _train_rng(train, rng), ops,
                                           unpad=self.task != "qa")
        grads = task_backward(self.params, self.config, cache, ops) if compute_grads else None
        return float(loss), grads, logits

    def loss_grads_metrics(self, batch, train=False, rng=None, compute_grads=True):
        """The training step's interface: -> (loss, grads, metrics = logits)."""
        return self.loss_grads_logits(batch, train, rng, compute_grads)

    def loss_and_grads(self, batch, train=False, rng=None, compute_grads=True):
        """-> (loss, grads); to_hf_state_dict(grads, config, task) gives them transformers' names."""
        loss, grads, _ = self.loss_grads_logits(batch, train, rng, compute_grads)
        return loss, grads

    def hidden_states(self, input_ids, token_type_ids=None, attention_mask=None):
        """Feature-based use (`finetune --frozen`): the embedding's output (after the E -> C
        projection) and every layer's, a list of L + 1 arrays (B, T, C), dropout off."""
        ids, seg, mask = check_inputs(self.config, input_ids, token_type_ids, attention_mask)
        x, _ = electra.embedding_forward(self.params, self.config, ids, seg, None, self.ops)  # (B, T, C)
        states = [x]
        for l in range(self.config.num_hidden_layers):
            x, _ = block_forward(self.params, self.config, l, x, mask, None, self.ops)  # (B, T, C)
            states.append(x)
        return states

    # -- checkpoints -----------------------------------------------------------------------
    def task_config(self) -> dict:
        return {k: v for k, v in self.config.to_dict().items() if k in checkpoint.TASK_CONFIG_KEYS}

    def read_params(self, directory) -> dict:
        return type(self).from_pretrained(directory, dtype=self.dtype).params

    def save_pretrained(self, directory, vocab=None) -> Path:
        """config.json (architectures, labels, the summary keys), model.safetensors, vocab: what
        transformers loads with the class of the same name."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        tensorfile.save_tensors_atomic(to_hf_state_dict(self.params, self.config, self.task),
                                       directory / checkpoint.WEIGHTS_NAME, {"format": "pt"})
        hf = {**self.config.to_dict(), "architectures": [self.architecture], "model_type": "electra",
              "pad_token_id": 0, "tie_word_embeddings": True, "dtype": self.dtype.name}
        atomic.write_text_atomic(directory / checkpoint.CONFIG_NAME,
                                     json.dumps(dict(sorted(hf.items())), indent=2) + "\n")
        checkpoint.save_vocab_files(self, directory, vocab)
        return directory

    @classmethod
    def _load(cls, directory, num_labels=None, dtype=np.float32, verify=True, seed=0, **task):
        """A checkpoint of this class (everything), or an ELECTRA pretraining / other task checkpoint
        (its encoder; the head new, and a warning names the new tensors and the unused ones)."""
        directory = Path(directory)
        if not directory.is_dir():
            raise FileNotFoundError(f"checkpoint directory {directory} does not exist")
        path = directory / checkpoint.CONFIG_NAME
        d = checkpoint.read_config_json(path)
        if d.get("model_type") != "electra":
            raise ValueError(f"{path}: model_type {d.get('model_type')!r} is not 'electra'")
        archs = d.get("architectures") or []
        known = SOURCES + tuple(CLASSES)
        if len(archs) != 1 or archs[0] not in known:
            raise ValueError(f"{path}: architecture {archs} is not one of {list(known)}")
        for flag in ("is_decoder", "add_cross_attention"):
            if d.get(flag):
                raise ValueError(f"{path}: {flag}=true is not supported (minibert's ELECTRA is an encoder)")
        same = archs[0] == cls.architecture
        try:
            base = electra.ElectraConfig.from_dict(d)
            extra = {k: d[k] for k in HEAD_KEYS if k in d}
            if same:
                extra.update({k: d[k] for k in checkpoint.TASK_CONFIG_KEYS if k in d})
            else:
                extra.update({k: v for k, v in task.items() if v is not None})
                if num_labels is not None:
                    extra["num_labels"] = num_labels
            config = ElectraTaskConfig.from_electra(base, **extra)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{path}: {e}") from None
        weights = directory / checkpoint.WEIGHTS_NAME
        state, _ = tensorfile.load_tensors(weights, verify=verify)
        if verify:
            tensorfile.check_finite(state, weights)
        state = {k: v for k, v in state.items() if not k.endswith(("position_ids", "token_type_ids"))}
        state.pop("generator_lm_head.weight", None)  # a generator's tied decoder: the word embeddings again
        model = cls.__new__(cls)
        _ElectraTaskModel.__init__(model, config, config.num_labels, seed, dtype)  # a fresh head
        shapes = model.expected_shapes()
        if same:
            last = {"sequence": "cls.out", "token": "cls"}.get(cls.task)
            key = HEAD_NAMES[cls.task][last] + ".bias" if last else None
            if key in state:  # (if it is missing, check_state below says so)
                K = state[key].shape[0]
                if K != config.num_labels:
                    raise ValueError(f"{directory}: config.json has {config.num_labels} labels but the classifier "
                                     f"has {K} outputs")
                if num_labels is not None and num_labels != K:
                    raise ValueError(f"{directory} is a {cls.architecture} with {K} labels, not {num_labels}")
            try:
                checkpoint.check_state(state, expected_hf_shapes(shapes, config, cls.task),
                                       f"minibert's {cls.architecture}")
            except ValueError as e:
                raise ValueError(f"{weights}: {e}") from None
            model.params = from_hf_state_dict(state, config, shapes, cls.task, np.dtype(dtype))
        else:
            enc = encoder_shapes(config)
            mine = {k: v for k, v in state.items() if k.startswith("electra.")}
            try:
                checkpoint.check_state(mine, expected_hf_shapes(enc, config), "an ELECTRA encoder")
            except ValueError as e:
                raise ValueError(f"{weights}: {e}") from None
            model.params.update(from_hf_state_dict(mine, config, enc, cls.task, np.dtype(dtype)))
            new = sorted(k for k in expected_hf_shapes(shapes, config, cls.task) if not k.startswith("electra."))
            unused = sorted({k.split(".", 1)[0] for k in state if not k.startswith("electra.")})
            warnings.warn(f"{directory} ({archs[0]}) -> {cls.architecture}: newly initialised {new}"
                          + (f"; not used: {', '.join(unused)}" if unused else "")
                          + "; fine-tune the model before using its predictions", stacklevel=3)
        check_params(model.params, shapes, cls.architecture)
        vocab = directory / checkpoint.VOCAB_NAME
        model.vocab_path = vocab if vocab.is_file() else None
        model.do_lower_case = checkpoint.read_do_lower_case(directory / checkpoint.TOKENIZER_CONFIG_NAME)
        return model


class ElectraForSequenceClassification(SequenceClassification, _ElectraTaskModel):
    """Single sentences or pairs -> K classes (num_labels == 1: regression), from the first token
    through ElectraClassificationHead (no pooler).

    >>> cfg = ElectraConfig(vocab_size=50, embedding_size=4, hidden_size=8, num_hidden_layers=1,
    ...                     num_attention_heads=2, intermediate_size=16)
    >>> ElectraForSequenceClassification(cfg, num_labels=3).forward(np.array([[2, 7, 3]])).shape
    (1, 3)
    """

    architecture = "ElectraForSequenceClassification"


class ElectraForTokenClassification(TokenClassification, _ElectraTaskModel):
    """A label for every token (NER); the loss skips positions labelled -100."""

    architecture = "ElectraForTokenClassification"


class ElectraForMultipleChoice(MultipleChoice, _ElectraTaskModel):
    """(B, NC, T) inputs: each choice scored from its first token through ElectraSequenceSummary."""

    architecture = "ElectraForMultipleChoice"


class ElectraForQuestionAnswering(QuestionAnswering, _ElectraTaskModel):
    """Span extraction: a start and an end score for every token (qa_outputs, no dropout)."""

    architecture = "ElectraForQuestionAnswering"


CLASSES = {c.architecture: c for c in (ElectraForSequenceClassification, ElectraForTokenClassification,
                                       ElectraForMultipleChoice, ElectraForQuestionAnswering)}
