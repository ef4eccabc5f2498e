"""The fine-tuning classes, named and laid out as transformers' (docs/bert-notes.md §9.1):

    model = BertForSequenceClassification.from_pretrained("runs/tiny", num_labels=2)
    logits = model.forward(input_ids, token_type_ids, attention_mask)       # (B, 2)
    loss, grads = model.loss_and_grads(batch, train=True, rng=rng)          # grads: keys of .params
    model.save_pretrained("runs/sst2")   # transformers loads it with the class of the same name

    BertForSequenceClassification  pooled [CLS] -> dropout -> classifier   (B, K); K = 1: regression
    BertForTokenClassification     every position -> dropout -> classifier (B, T, K)
    BertForMultipleChoice          (B, NC, T) inputs -> one score per choice (B, NC)
    BertForQuestionAnswering       every position -> qa_outputs -> (start, end), each (B, T)

`from_pretrained` reads a pretraining checkpoint (minibert's or any transformers BERT directory:
the encoder and, for the pooled heads, the pooler are loaded, the head is new and a warning names
the new tensors) or a checkpoint of the same class (everything loaded). The math lives in
minibert/finetune/heads.py; this module holds parameters, checkpoints and labels.

Every encoder's task classes are `TaskModel` with a head shape's behaviour (SequenceClassification,
... below) and an `encoder`, a heads.Encoder: BERT's here, ALBERT's and ELECTRA's in
finetune/albert_tasks.py and electra_tasks.py. It holds, as data and small functions, all that
differs between encoders: running it, its heads, its parameters, checkpoints and transformers' names.

Here are the one TaskModel every task class of BERT, ALBERT and ELECTRA is built on (forward,
backward, checkpoint in and out), BERT's four classes and the checkpoint reader the other
encoders share.
"""
from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from minibert.backend import get_ops
from minibert.finetune.bilstm import bilstm_params, bilstm_shapes
from minibert.finetune.heads import (Encoder, causal_encoder_layers, encoder_layers, head_shapes, pooler_heads,
                                     run_bilstm_encoder_backward, run_causal_bilstm_encoder, run_causal_encoder,
                                     run_encoder, head_backward, head_forward, head_logits)
from minibert import checkpoint
from minibert.io import atomic, tensorfile
from minibert.io.textio import shown_value
from minibert.model import (HEAD_GROUPS, BertConfig, train_rng, check_inputs, check_params, encoder_backward,
                            init_params, param_shapes, truncated_normal)


PROBLEM_TYPES = (None, "single_label_classification", "regression")  # config.json's problem_type minibert computes


@dataclasses.dataclass
class TaskKeys:
    """The fine-tuning keys of transformers' config.json on top of a pretraining config class
    `base`: `class TaskConfig(TaskKeys, BertConfig)` with base = BertConfig (finetune/albert_tasks.py's
    and electra_tasks.py's task configs likewise). `id2label` maps class ids to names (default LABEL_0,
    LABEL_1, ...); `num_labels` is its length."""

    base = None  # the pretraining config class (a class attribute, not a field)
    pooler_activation = "tanh"  # BertPooler's, fixed in transformers too (heads.Pool reads it by name)
    num_labels: int = 2
    id2label: dict | None = None
    label2id: dict | None = None
    problem_type: str | None = None  # "single_label_classification" or "regression" (sequence heads)
    # minibert's own keys, written only when true: fine-tuned left to right (an "ltr" model, the
    # paper's Table 5; CAUSAL_ENCODER below), and with a BiLSTM on top (its "+ BiLSTM" row; the
    # lstm.* tensors are saved as bilstm.*). transformers ignores both and would run the plain
    # bidirectional encoder.
    causal: bool = False
    bilstm: bool = False

    def __post_init__(self):
        super().__post_init__()
        check_labels(self)
        if self.problem_type not in PROBLEM_TYPES:
            # transformers' multi_label_classification scores each label with its own sigmoid; minibert's heads
            # take a softmax over the labels, so its predictions would be silently wrong: refused when loaded
            raise ValueError(f"problem_type is {self.problem_type!r:.200}; minibert's heads compute "
                             f"{', '.join(t for t in PROBLEM_TYPES if t)} (a softmax over the labels, or one score), "
                             f"not multi-label classification (a sigmoid per label)")

    def to_dict(self) -> dict[str, Any]:
        """config.json's keys: the base config's, id2label / label2id (string keys, as JSON has
        them) and problem_type when set (transformers derives num_labels from id2label)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self.base)}
        d.update(id2label={str(k): v for k, v in self.id2label.items()}, label2id=dict(self.label2id))
        if self.problem_type is not None:
            d["problem_type"] = self.problem_type
        if self.causal:
            d["causal"] = True
        if self.bilstm:
            d["bilstm"] = True
        return d

    @classmethod
    def from_base(cls, config, **task):
        """A pretraining config (of class `base`) plus the task keys given (None: the default)."""
        base = {f.name: getattr(config, f.name) for f in dataclasses.fields(cls.base)}
        return cls(**base, **{k: v for k, v in task.items() if v is not None})


@dataclasses.dataclass
class TaskConfig(TaskKeys, BertConfig):
    """BertConfig plus the fine-tuning keys of transformers' config.json (TaskKeys)."""

    base = BertConfig

    @classmethod
    def from_bert(cls, config: BertConfig, **task) -> "TaskConfig":
        return cls.from_base(config, **task)


def check_labels(config) -> None:
    """A task config's labels (TaskConfig, AlbertTaskConfig, ElectraTaskConfig), in place:
    id2label keys 0..K-1 (JSON gives strings), num_labels = K, label2id its inverse."""
    if config.id2label is not None:
        if not isinstance(config.id2label, dict) or not all(str(k).isdigit() for k in config.id2label):
            raise ValueError(f"id2label is {shown_value(config.id2label)}; it must map class ids 0..K-1 to label names, "
                             f"e.g. {{\"0\": \"negative\", \"1\": \"positive\"}}")
        config.id2label = {int(k): str(v) for k, v in config.id2label.items()}
        if sorted(config.id2label) != list(range(len(config.id2label))):
            raise ValueError(f"id2label keys must be 0..K-1, got {sorted(config.id2label)}")
        config.num_labels = len(config.id2label)
        seen: dict[str, int] = {}
        for k in sorted(config.id2label):  # one name a class: a name twice makes two classes one
            if config.id2label[k] in seen:
                raise ValueError(f"id2label names {shown_value(config.id2label[k], 60)} twice (classes "
                                 f"{seen[config.id2label[k]]} and {k}); every class needs its own name")
            seen[config.id2label[k]] = k
    if isinstance(config.num_labels, bool) or not isinstance(config.num_labels, (int, np.integer)) \
            or not 1 <= config.num_labels <= 1 << 20:
        raise ValueError(f"num_labels={shown_value(config.num_labels)} must be a positive integer (at most 2**20)")
    if config.id2label is None:
        config.id2label = {i: f"LABEL_{i}" for i in range(config.num_labels)}
    if config.label2id is not None and (not isinstance(config.label2id, dict)
                                        or not all(isinstance(v, int) and not isinstance(v, bool)
                                                   for v in config.label2id.values())):
        raise ValueError(f"label2id is {shown_value(config.label2id)}; it must map label names to class ids")
    if config.problem_type is not None and (not isinstance(config.problem_type, str)
                                            or not 0 < len(config.problem_type) <= 100):
        raise ValueError(f"problem_type is {shown_value(config.problem_type)}; it must be a name such as "
                         f"\"single_label_classification\" or \"regression\" (or absent)")
    inverse = {v: k for k, v in config.id2label.items()}
    if config.label2id is not None and {str(k): v for k, v in config.label2id.items()} != inverse:
        raise ValueError(f"label2id {shown_value(config.label2id, 120)} is not the inverse of id2label "
                         f"{shown_value({str(k): v for k, v in config.id2label.items()}, 120)}; which one names the "
                         f"classes? Fix one (transformers writes label2id as id2label's inverse)")
    config.label2id = inverse


# ---------------------------------------------------------------------------------------------
# BERT's encoder, for the heads (heads.Encoder)

def _bert_to_hf(params, config, task) -> dict[str, np.ndarray]:
    return checkpoint.to_hf_state_dict(params)  # the heads' names included (checkpoint.TASK_HEADS)


def _bert_hf_config(model) -> dict:
    """BertConfig's keys, transformers' fixed ones, the labels and problem_type (and minibert's causal, bilstm)."""
    hf = checkpoint.config_to_hf_dict(model.config, model.architecture, model.dtype)
    hf.update(model.task_config())
    return hf


BERT_ENCODER = Encoder(
    forward=run_encoder, backward=encoder_backward, heads=pooler_heads("hidden_dropout_prob"), pool_last=False,
    layers=encoder_layers, model_type="bert", config=TaskConfig, init_params=init_params, param_shapes=param_shapes,
    pretraining_heads=HEAD_GROUPS, read=checkpoint.read_pretrained, to_hf=_bert_to_hf, hf_config=_bert_hf_config)
# make_causal's: left to right, the pooled heads on the last real token (heads.run_causal_encoder);
# and with a BiLSTM on top, the pooled heads on [CLS] again
CAUSAL_ENCODER = BERT_ENCODER._replace(forward=run_causal_encoder, pool_last=True, layers=causal_encoder_layers)
CAUSAL_BILSTM_ENCODER = BERT_ENCODER._replace(forward=run_causal_bilstm_encoder, backward=run_bilstm_encoder_backward,
                                              layers=causal_encoder_layers)


def read_checkpoint(directory, dtype, verify, model_type: str, architectures, read_config, read_params,
                    keys=checkpoint.TASK_CONFIG_KEYS, hint: str = "") -> checkpoint.Pretrained:
    """A directory of another encoder's family (ALBERT's, ELECTRA's: a pretraining model or one of
    its task classes) -> checkpoint.Pretrained, as checkpoint.read_pretrained reads BERT's:
    read_config(config.json's dict) -> the pretraining config; read_params(tensors, config,
    architecture, dtype) -> params under minibert's names (the heads the file holds); `keys`: the
    config.json keys kept as task_config."""
    directory = checkpoint.model_directory(directory)
    config_path = directory / checkpoint.CONFIG_NAME
    checkpoint.weight_files(directory)  # a missing weight file is named before the config is read
    raw = checkpoint.read_config_json(config_path)
    if checkpoint.config_text(raw, "model_type", None, config_path) != model_type:
        raise ValueError(f"{config_path}: model_type {raw.get('model_type')!r} is not {model_type!r}{hint}")
    archs = checkpoint.config_architectures(raw, config_path)
    if len(archs) != 1 or archs[0] not in architectures:
        raise ValueError(f"{config_path}: architecture {archs} is not supported; minibert's {model_type.upper()} "
                         f"task classes read {list(architectures)}")
    try:
        config = read_config(raw)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{config_path}: {e}") from None
    tensors, weights = checkpoint.read_weights(directory, config.num_hidden_layers, verify)
    try:
        params = read_params(tensors, config, archs[0], dtype)
    except ValueError as e:
        raise ValueError(f"{weights}: {e}") from None
    vocab = directory / checkpoint.VOCAB_NAME
    return checkpoint.Pretrained(config, params, archs[0], vocab if vocab.is_file() else None,
                                 checkpoint.read_casing(directory), checkpoint.task_config(raw, keys, config_path))


# ---------------------------------------------------------------------------------------------
# the task classes of every encoder

class TaskModel:
    """What every task class shares; each names its transformers architecture, its head shape
    (heads.SHAPES) and its `encoder` (heads.Encoder: BERT's here, ALBERT's and ELECTRA's in their
    modules), which holds everything that differs between encoders."""

    architecture = ""
    head_shape = ""
    encoder = BERT_ENCODER

    def __init__(self, config, num_labels: int = 2, seed: int = 0, dtype=np.float32, params=None):
        self.config = self._task_config(config, num_labels=num_labels)
        self.dtype = np.dtype(dtype)
        self.params = self._init_params(seed) if params is None else params
        if self.config.causal:
            self.make_causal(bilstm=self.config.bilstm, seed=seed)
        self._check_params()
        self.vocab_path = None  # set by from_pretrained; predict() builds its tokenizer from it
        self.do_lower_case = True

    @property
    def head_outputs(self) -> int:
        return self.config.num_labels

    def make_causal(self, bilstm: bool = False, seed: int = 0):
        """Fine-tune and predict with left-to-right attention, as an "ltr" model was pretrained
        (the pooled heads then read the last real token); config.json records it. bilstm=True:
        a new BiLSTM on top (the paper's "LTR & No NSP + BiLSTM"), initialised here unless the
        parameters already hold it (a fine-tuned checkpoint)."""
        if type(self).encoder is not BERT_ENCODER:
            raise ValueError(f"{type(self).__name__}: causal (left-to-right) fine-tuning is for BERT's encoder only")
        if bilstm and self.config.hidden_size % 2:
            raise ValueError(f"bilstm: hidden_size {self.config.hidden_size} must be even (C/2 each way)")
        self.encoder = CAUSAL_BILSTM_ENCODER if bilstm else CAUSAL_ENCODER
        self.config.causal, self.config.bilstm = True, bool(bilstm)
        if bilstm and "lstm.fwd.wx" not in self.params:
            C = self.config.hidden_size
            self.params.update(bilstm_params(np.random.default_rng([seed, 2]), C, C // 2, "lstm", self.dtype))
        return self

    def _bilstm_shapes(self) -> dict[str, tuple]:
        if not getattr(self.config, "bilstm", False):
            return {}
        return bilstm_shapes(self.config.hidden_size, self.config.hidden_size // 2, "lstm")

    # -- config and parameters --------------------------------------------------------------
    @classmethod
    def _task_config(cls, config, **task):
        """A pretraining config plus the task keys (a task config is kept as it is)."""
        task_config = cls.encoder.config
        if isinstance(config, task_config):
            return config
        if not isinstance(config, task_config.base):
            base = task_config.base.__name__
            raise TypeError(f"{cls.__name__} needs {'an' if base[0] in 'AEIOU' else 'a'} {base}, "
                            f"got {type(config).__name__}")
        return task_config.from_base(config, **task)

    def _kept(self, name: str) -> bool:
        """Whether a parameter of the pretraining model is kept: the encoder's, and a pretrained
        pooled layer (BERT's pooler) when the head reads it."""
        pool = self.encoder.heads[self.head_shape].pool
        return (name.split(".", 1)[0] not in self.encoder.pretraining_heads
                or (pool is not None and pool.pretrained and name.startswith(pool.dense + ".")))

    def head_shapes(self) -> dict[str, tuple]:
        """The task head's new tensors (names and shapes), initialised here, not read from a
        pretraining checkpoint."""
        return head_shapes(self.encoder.heads[self.head_shape], self.config.hidden_size, self.head_outputs)

    def _init_params(self, seed: int) -> dict[str, np.ndarray]:
        """The encoder (and pooler) as the pretraining model's init; the head truncated
        normal(initializer_range) with zero biases, as google-research/bert initialises its output
        layers, from a stream of its own (the encoder's init does not depend on the head)."""
        params = {k: v for k, v in self.encoder.init_params(self.config, seed, self.dtype).items() if self._kept(k)}
        rng = np.random.default_rng([seed, 1])
        for name, shape in self.head_shapes().items():
            params[name] = (np.zeros(shape, self.dtype) if name.endswith(".b") else
                            truncated_normal(rng, shape, self.config.initializer_range).astype(self.dtype))
        return params

    def expected_shapes(self) -> dict[str, tuple]:
        shapes = {k: s for k, s in self.encoder.param_shapes(self.config).items() if self._kept(k)}
        shapes.update(self.head_shapes())
        shapes.update(self._bilstm_shapes())
        return shapes

    def _check_params(self):
        check_params(self.params, self.expected_shapes(), type(self).__name__)

    @property
    def num_parameters(self) -> int:
        return sum(p.size for p in self.params.values())

    @property
    def ops(self):
        """minibert.kernels (Numba) by default, minibert.layers with MINIBERT_BACKEND=numpy."""
        return get_ops()

    def task_config(self) -> dict:
        """config.json's fine-tuning keys, as transformers writes them."""
        return {k: v for k, v in self.config.to_dict().items() if k in checkpoint.TASK_CONFIG_KEYS}

    # -- forward and loss ------------------------------------------------------------------
    def logits(self, input_ids, token_type_ids=None, attention_mask=None, train=False, rng=None):
        out, _ = head_logits(self.params, self.config, self.head_shape, input_ids, token_type_ids, attention_mask,
                             train_rng(train, rng), self.ops, unpad=False,
                             encoder=self.encoder)  # every position, padding too
        return out

    def eval_logits(self, input_ids, token_type_ids=None, attention_mask=None):
        """Logits for scoring (dropout off); the unpadded fast path where only real positions are
        read (QA's logits at padding are kept, as forward's)."""
        out, _ = head_logits(self.params, self.config, self.head_shape, input_ids, token_type_ids, attention_mask,
                             None, self.ops, unpad=self.head_shape != "qa", encoder=self.encoder)
        return out

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, train=False, rng=None):
        """-> logits: (B, K) sequence, (B, T, K) token, (B, NC) multiple choice; QA returns
        (start_logits, end_logits), each (B, T)."""
        return self.logits(input_ids, token_type_ids, attention_mask, train, rng)

    __call__ = forward

    def loss_grads_logits(self, batch, train=False, rng=None, compute_grads=True):
        """-> (loss, grads, logits) for a batch with keys input_ids, input_mask, segment_ids and
        the labels (`labels`; QA: `start_positions`, `end_positions`). Token classification's
        logits at padding positions are the bias only here (the encoder skips padding rows)."""
        ops = self.ops
        # the unpadded fast path where no loss reads a padding position (QA's softmax spans all T)
        loss, logits, cache = head_forward(self.params, self.config, self.head_shape, batch, train_rng(train, rng), ops,
                                           unpad=self.head_shape != "qa", encoder=self.encoder)
        grads = head_backward(self.params, self.config, cache, ops) if compute_grads else None
        return float(loss), grads, logits

    def loss_grads_metrics(self, batch, train=False, rng=None, compute_grads=True):
        """The training step's interface (the fine-tuning run's, finetune/run.py): -> (loss, grads,
        {name: (sum, count)}): the loss, and the batch's accuracy where it has one (step_metrics)."""
        loss, grads, logits = self.loss_grads_logits(batch, train, rng, compute_grads)
        return loss, grads, step_metrics(loss, logits, batch)

    def loss_and_grads(self, batch, train=False, rng=None, compute_grads=True):
        """-> (loss, grads): grads has the keys of .params; encoder.to_hf(grads, config, head_shape)
        gives them transformers' names."""
        loss, grads, _ = self.loss_grads_logits(batch, train, rng, compute_grads)
        return loss, grads

    def hidden_states(self, input_ids, token_type_ids=None, attention_mask=None):
        """Feature-based use (paper §5.3): the embedding's output (mapped to C where the encoder
        factorises it) and every layer's, a list of L + 1 arrays (B, T, C), with dropout off.
        [-4:] are the last four layers."""
        ids, seg, mask = check_inputs(self.config, input_ids, token_type_ids, attention_mask)
        return self.encoder.layers(self.params, self.config, ids, seg, mask, self.ops)

    # -- checkpoints -----------------------------------------------------------------------
    def read_params(self, directory) -> dict:
        """The parameters of a checkpoint of this class (the fine-tuning loop's resume)."""
        return type(self).from_pretrained(directory, dtype=self.dtype).params

    def save_pretrained(self, directory, vocab=None) -> Path:
        """config.json (architectures, id2label, label2id, problem_type and the encoder's keys),
        model.safetensors in transformers' names and the vocabulary: what transformers loads with
        the class of the same name."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        tensorfile.save_tensors_atomic(self.encoder.to_hf(self.params, self.config, self.head_shape),
                                       directory / checkpoint.WEIGHTS_NAME, {"format": "pt"})
        atomic.write_text_atomic(directory / checkpoint.CONFIG_NAME,
                                 json.dumps(self.encoder.hf_config(self), indent=2) + "\n")
        checkpoint.save_vocab_files(self, directory, vocab)
        return directory

    @classmethod
    def _load(cls, directory, num_labels=None, dtype=np.float32, verify=True, seed=0, **kw):
        """A checkpoint of this class (everything), or a pretraining / other task checkpoint of the
        same encoder (its encoder and pooler; the head new, and a warning names the new tensors and
        the heads not used)."""
        loaded = cls.encoder.read(directory, dtype, verify)
        if loaded.architecture == cls.architecture:  # a fine-tuned model of this class: all of it
            config = cls._loaded_config(directory, loaded.config, loaded.task_config)
            K = loaded.params[cls.encoder.heads[cls.head_shape].out + ".b"].shape[0]
            if cls.head_shape in ("sequence", "token"):
                if config.num_labels != K:
                    raise ValueError(f"{directory}: config.json has {config.num_labels} labels but the "
                                     f"classifier has {K} outputs")
                if num_labels is not None and num_labels != K:
                    raise ValueError(f"{directory} is a {cls.architecture} with {K} labels, not {num_labels}")
            model = cls._from_parts(config, loaded.params, dtype)
        else:  # a pretraining (or another task's) checkpoint: the encoder, and a new head
            task = {k: v for k, v in loaded.task_config.items() if k in cls.encoder.carried_keys}
            task.update({k: v for k, v in kw.items() if v is not None})
            if num_labels is not None:
                task["num_labels"] = num_labels
            config = cls._loaded_config(directory, loaded.config, task)
            model = cls._from_parts(config, None, dtype, seed)
            head, new = model.head_shapes(), []
            for name in model.params:
                if name in loaded.params and name not in head:
                    model.params[name] = loaded.params[name]
                else:
                    new.append(name)
            unused = sorted({n.split(".", 1)[0] for n in loaded.params} - {n.split(".", 1)[0] for n in model.params})
            hf = sorted(cls.encoder.to_hf({n: model.params[n] for n in new}, config, cls.head_shape))
            warnings.warn(f"{directory} ({loaded.architecture or 'no architecture'}) -> {cls.architecture}: "
                          f"newly initialised {hf}"
                          + (f"; not used: the {', '.join(unused)} head(s)" if unused else "")
                          + "; fine-tune the model before using its predictions", stacklevel=3)
        model.vocab_path, model.do_lower_case = loaded.vocab_path, loaded.do_lower_case
        return model

    @classmethod
    def _loaded_config(cls, directory, config, task: dict):
        try:
            return cls._task_config(config, **task)
        except ValueError as e:
            raise ValueError(f"{Path(directory) / checkpoint.CONFIG_NAME}: {e}") from None

    @classmethod
    def _from_parts(cls, config, params, dtype, seed=0):
        model = cls.__new__(cls)
        TaskModel.__init__(model, config, config.num_labels, seed, dtype, params)
        return model


# -- the four head shapes' behaviour, mixed into TaskModel by every encoder's classes ----------
class SequenceClassification:
    """Labels (num_labels of them; one: a regression score) and problem_type, as transformers sets it."""

    head_shape = "sequence"

    def __init__(self, config, num_labels: int = 2, seed: int = 0, dtype=np.float32, params=None):
        super().__init__(config, num_labels, seed, dtype, params)
        if self.config.problem_type is None:
            self.config.problem_type = "regression" if self.config.num_labels == 1 else "single_label_classification"

    @classmethod
    def from_pretrained(cls, directory, num_labels=None, dtype=np.float32, verify: bool = True, id2label=None,
                        seed: int = 0):
        model = cls._load(directory, num_labels, dtype, verify, seed, id2label=id2label)
        if model.config.problem_type is None:
            model.config.problem_type = "regression" if model.config.num_labels == 1 else "single_label_classification"
        return model


class TokenClassification:
    """Labels (num_labels of them) for every token."""

    head_shape = "token"

    @classmethod
    def from_pretrained(cls, directory, num_labels=None, dtype=np.float32, verify: bool = True, id2label=None,
                        seed: int = 0):
        return cls._load(directory, num_labels, dtype, verify, seed, id2label=id2label)


class MultipleChoice:
    """One score per choice: a head of one output, no labels."""

    head_shape = "choice"

    def __init__(self, config, seed: int = 0, dtype=np.float32, params=None):
        super().__init__(config, 2, seed, dtype, params)

    @property
    def head_outputs(self) -> int:
        return 1

    @classmethod
    def from_pretrained(cls, directory, dtype=np.float32, verify: bool = True, seed: int = 0):
        return cls._load(directory, None, dtype, verify, seed)


class QuestionAnswering:
    """A start and an end score for every token: the qa head of two outputs, no labels."""

    head_shape = "qa"

    def __init__(self, config, seed: int = 0, dtype=np.float32, params=None):
        super().__init__(config, 2, seed, dtype, params)

    @property
    def head_outputs(self) -> int:
        return 2

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, train=False, rng=None):
        """-> (start_logits, end_logits), each (B, T)."""
        logits = self.logits(input_ids, token_type_ids, attention_mask, train, rng)  # (B, T, 2)
        return logits[..., 0], logits[..., 1]

    __call__ = forward

    @classmethod
    def from_pretrained(cls, directory, dtype=np.float32, verify: bool = True, seed: int = 0):
        return cls._load(directory, None, dtype, verify, seed)


class BertForSequenceClassification(SequenceClassification, TaskModel):
    """Single sentences or sentence pairs -> K classes (num_labels == 1: a regression score).

    >>> cfg = BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
    ...                  intermediate_size=16)
    >>> BertForSequenceClassification(cfg, num_labels=3).forward(np.array([[2, 7, 3]])).shape
    (1, 3)
    """

    architecture = "BertForSequenceClassification"


class BertForTokenClassification(TokenClassification, TaskModel):
    """A label for every token (NER); the loss skips positions labelled -100."""

    architecture = "BertForTokenClassification"


class BertForMultipleChoice(MultipleChoice, TaskModel):
    """(B, NC, T) inputs: each choice scored from its pooled [CLS], softmax over the NC choices."""

    architecture = "BertForMultipleChoice"


class BertForQuestionAnswering(QuestionAnswering, TaskModel):
    """Span extraction: a start and an end score for every token (qa_outputs, no dropout)."""

    architecture = "BertForQuestionAnswering"


CLASSES = {c.architecture: c for c in (BertForSequenceClassification, BertForTokenClassification,
                                       BertForMultipleChoice, BertForQuestionAnswering)}


def step_metrics(loss: float, logits, batch: dict) -> dict:
    """{name: (sum, count)} of a training batch: the loss (a mean) over 1, and "train_acc": the
    argmax's hits over the counted labels; regression and QA count nothing (no train_acc)."""
    labels = batch.get("labels")
    if labels is None or logits.shape[-1] == 1 or labels.dtype.kind == "f":
        return {"loss": (loss, 1)}
    counted = labels != -100
    hits, n = int(((logits.argmax(-1) == labels) & counted).sum()), int(counted.sum())
    return {"loss": (loss, 1), **({"train_acc": (hits, n)} if n else {})}
