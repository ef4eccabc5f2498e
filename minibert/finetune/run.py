"""The fine-tuning loop: the paper's recipe (§4, A.3) on any task with a batch source and a scorer.

    run = FinetuneRun(cfg, model, source, tokenizer, info)   # checks everything; writes nothing
    outcome = launch(Job(out, "finetune"), lambda: run)      # loop/launch.py: the run's whole life

Recipe: AdamW as in pretraining (BERT's: no bias correction, eps 1e-6, decay 0.01 except
LayerNorm and biases), warm-up over the first 10% of the steps then linear decay to 0, gradient
clipping at 1.0, dropout 0.1, a few epochs. Each epoch visits the training features in a new
order drawn from (seed, epoch), so the batch of step s is a function of s alone: a resumed run
takes exactly the batches the uninterrupted run would have taken.

The output directory:
    config.json, model.safetensors, vocab.txt   the BEST model so far (by the task's main dev
                                                metric), in transformers' format
    run.json                                    the command, the settings, the task, its labels, the best step
                                                (and the class weights, the recipe's choices, an early stop)
    dev_report.json                             a classifier's per-class precision/recall/F1/support,
                                                macro-F1 and confusion matrix at the best model
    metrics.jsonl, curves.png                   training loss and dev metrics; their plot
    checkpoints/step-NNNNNN/                    the latest state for --resume (model, optimizer,
                                                trainer_state.json), written atomically

The loop is pretraining's (loop/engine.run: logging, checkpoints, resume, Ctrl-C); FinetuneRun
is the run it trains. It knows nothing about task formats: a `DataSource` gives it
the training features (a dict of arrays with one row per feature), the label keys, and an
`evaluate(model)` that returns the dev metrics. Classification, token tagging and multiple
choice use `ClassifierSource` below; SQuAD brings its own (minibert/finetune/squad_run.py).
"""
from __future__ import annotations

import dataclasses
import math
import sys
import warnings
from pathlib import Path
from typing import Callable

import numpy as np

from minibert.checkpoint import (CONFIG_NAME, model_directory, model_tokenizer, read_casing, read_config,
                                 read_config_json)
from minibert.data.corpus import ensure_default_corpus
from minibert.finetune.features import IGNORE_INDEX, trim
from minibert.finetune.frozen import TAGGERS
from minibert.finetune.metrics import class_report
from minibert.finetune.registry import task_class
from minibert.finetune.task_data import score
from minibert.io.jsonfile import read_json
from minibert.loop import rundir
from minibert.loop.curves import Panel, Series
from minibert.loop.settings import RunSettings, read_float
from minibert.loop.state import Curves, LoopSettings
from minibert.model import MODEL_SIZES, BertConfig
from minibert.optim import AdamW
from minibert.text.tokenizer import BertTokenizer

COMMAND = "finetune"  # run.json's "command"
# fewer optimizer steps than this and a run warns that it has too few to learn from (160 examples
# at 3 epochs were 15 steps, and the tiny model stayed at one class)
FEW_STEPS = 100
DEV_REPORT = "dev_report.json"  # a classifier's per-class dev scores and confusion matrix at the best model


@dataclasses.dataclass(kw_only=True)
class FinetuneConfig(RunSettings):
    """The settings of one fine-tuning run (run.json records them). The schedule is counted in
    epochs: `steps` 0 (the default) makes it `epochs` passes over the training data, and
    `warmup_steps`, `eval_interval` and `checkpoint_interval` are not used (validate refuses
    them): `warmup_proportion` and `eval_per_epoch` say them instead. `steps` > 0 is the run's
    length in optimizer steps, as for every command (`epochs` is then unused)."""

    unused = ("warmup_steps", "eval_interval", "checkpoint_interval")

    task: str
    init: str  # a checkpoint directory, or "none" (random init: the control)
    out: str
    data: str | None = None
    train_file: str | None = None  # your own files named one by one (--train, --dev) instead of --data DIR
    dev_file: str | None = None
    format: str | None = None  # your own files: glue-single | glue-pair | conll | swag (default: found from them)
    # your own tables: the columns by name (--text-column ...; default: found by name, readers.table_layout)
    text_column: str | None = None
    text_pair_column: str | None = None
    label_column: str | None = None
    vocab: str | None = None  # --init none: the vocabulary (default: the default corpus's)
    like: str | None = None  # --init none: the architecture and vocabulary of this model (default: tiny's)
    epochs: float = 3.0
    lr: float = 1e-4
    batch_size: int = 32
    max_seq_length: int = 128
    warmup_proportion: float = 0.1  # fraction of the steps (BERT's run_classifier.py name)
    eval_interval: int = 0  # unused: eval_per_epoch
    checkpoint_interval: int = 0  # unused: a checkpoint after each evaluation
    hidden_dropout_prob: float = 0.1  # BertConfig's names; --dropout sets both (ALBERT's classifier: hidden's)
    attention_probs_dropout_prob: float = 0.1
    weight_decay: float = 0.01
    clip_norm: float = 1.0
    seed: int = 0
    minutes: float = 0.0  # wall-clock budget (0 = none)
    eval_per_epoch: int = 1  # dev evaluations per epoch
    log_interval: int = 20
    max_train_examples: int = 0  # use only the first N training features (0 = all)
    doc_stride: int = 128  # SQuAD
    # SQuAD 2.0: the share of training windows without the answer that are kept (1 = all, as
    # run_squad.py); the rest are dropped once, drawn by the seed (docs/finetuning.md)
    null_windows: float = 1.0
    frozen: str | None = None  # feature-based token tagging: last | second_to_last | embeddings | sum4 | concat4
    frozen_tagger: str = "linear"  # on the frozen features: linear | bilstm (the paper's, one layer)
    max_query_length: int = 64  # SQuAD
    strict_length: bool = False  # an example longer than max_seq_length is an error instead of cut
    causal: bool = False  # left-to-right attention, as an "ltr" model was pretrained (heads.CAUSAL_ENCODER)
    bilstm: bool = False  # with causal: a new BiLSTM on top, the paper's "LTR & No NSP + BiLSTM"
    verify: bool = True  # --init's weights must be finite and match their recorded sha256 (--no-verify: off)
    # early stopping: stop after this many dev evaluations in a row without a better main metric (0: off)
    patience: int = 0
    # a classifier's loss weighted by class: "balanced" (n / (K * count of the class), as scikit-learn's)
    # or per label, "negative:1,positive:3" (a label not named weighs 1); None: unweighted
    class_weights: str | None = None
    # the dev metric the best checkpoint is kept by and patience watches (None: the task's own); each
    # task's names: finetune/task_data.main_metrics (accuracy, macro_f1, mcc, f1:LABEL, entity f1, ...)
    main_metric: str | None = None
    # --dev-split: this share of the training file is the dev set, stratified by label, drawn with
    # the seed (0: a dev file is given)
    dev_split: float = 0.0

    def validate(self) -> None:
        if self.like and self.init.lower() != "none":
            raise ValueError(f"--like goes with --init none (the random-init control of a model); --init {self.init} "
                             f"is the model itself")
        for k in ("batch_size", "max_seq_length", "log_interval", "eval_per_epoch"):
            if getattr(self, k) < 1:
                raise ValueError(f"{k}={getattr(self, k)} must be at least 1")
        if not 0 < self.epochs < math.inf or not 0 < self.lr < math.inf:  # NaN fails both comparisons
            raise ValueError(f"epochs ({self.epochs}) and lr ({self.lr}) must be positive finite numbers")
        if not 0 < self.null_windows <= 1:  # NaN fails too
            raise ValueError(f"null_windows={self.null_windows} must be in (0, 1]: the share of SQuAD windows "
                             f"without the answer that are kept")
        dropouts = (self.hidden_dropout_prob, self.attention_probs_dropout_prob)
        if not 0 <= self.warmup_proportion < 1 or not all(0 <= p < 1 for p in dropouts):
            raise ValueError(f"warmup_proportion ({self.warmup_proportion}) and the dropouts {dropouts} must be in "
                             f"[0, 1)")
        for k in self.unused:
            if getattr(self, k) != 0:
                raise ValueError(f"{k}={getattr(self, k)}: fine-tuning counts in epochs; use warmup_proportion and "
                                 f"eval_per_epoch")
        if self.steps < 0:
            raise ValueError(f"steps={self.steps} must be >= 0 (0: epochs passes over the training data)")
        if not 0 <= self.minutes < math.inf or self.max_train_examples < 0:
            raise ValueError(f"minutes ({self.minutes}) must be a finite number >= 0 and max_train_examples "
                             f"({self.max_train_examples}) >= 0")
        if not 0 < self.clip_norm < math.inf or not 0 <= self.weight_decay < math.inf:  # checked by the first step before
            raise ValueError(f"clip_norm ({self.clip_norm}) must be > 0 (the largest global gradient norm) and "
                             f"weight_decay ({self.weight_decay}) >= 0")
        if self.seed < 0:  # NumPy's own error named no setting
            raise ValueError(f"seed={self.seed} must be >= 0")
        if self.frozen_tagger not in TAGGERS:
            raise ValueError(f"frozen_tagger={self.frozen_tagger!r} must be one of {TAGGERS}")
        if self.bilstm and not self.causal:
            raise ValueError("--bilstm goes with --causal (the paper's LTR & No NSP + BiLSTM)")
        if self.patience < 0:
            raise ValueError(f"patience={self.patience} must be >= 0: the dev evaluations in a row without a better "
                             f"score before the run stops (0: never stop early)")
        if self.class_weights is not None:
            parse_class_weights(self.class_weights)  # the syntax; the labels are checked against the data's
        if not 0 <= self.dev_split < 1:  # NaN fails too
            raise ValueError(f"dev_split={self.dev_split} must be in [0, 1): the share of the training file kept "
                             f"for dev (0: a dev file is given)")
        if self.main_metric is not None and not self.main_metric.strip():
            raise ValueError("main_metric is empty: name a dev metric (accuracy, macro_f1, mcc, f1:LABEL, ...)")
        if self.frozen_tagger != "linear" and not self.frozen:
            raise ValueError(f"--frozen-tagger {self.frozen_tagger} goes with --frozen (the feature-based approach)")



# ---------------------------------------------------------------------------------------------
# class weights: a classifier's loss that counts a rare class more

BALANCED = "balanced"


def parse_class_weights(text: str) -> dict[str, float] | str:
    """--set class_weights=... -> "balanced", or {label: weight} from "negative:1,positive:3"
    (the weight after a label's last colon, so a label may hold one). Every weight must be a
    positive finite number; a label may be named once."""
    if text.strip() == BALANCED:
        return BALANCED
    weights: dict[str, float] = {}
    for item in (part.strip() for part in text.split(",")):
        label, sep, raw = item.rpartition(":")
        try:
            value = read_float(raw)  # not float(): "1_0" would be 10
        except ValueError:
            value = None
        if not sep or not label:
            raise ValueError(f"class_weights={text!r}: {item!r} is not LABEL:WEIGHT; write `balanced` or "
                             f"weights per label, e.g. class_weights=negative:1,positive:3")
        if value is None or not 0 < value < math.inf:  # NaN fails too
            raise ValueError(f"class_weights={text!r}: the weight of {label!r} is {raw!r}; a weight must be a "
                             f"positive finite number")
        if label in weights:
            raise ValueError(f"class_weights={text!r}: {label!r} is named twice")
        weights[label] = value
    return weights


def class_weight_vector(text: str, labels: list, train_labels: np.ndarray) -> np.ndarray:
    """The weight of each class, in label-id order (K,) float64, for the labels of the data.
    "balanced": n_samples / (n_classes * count of the class) over the training features, as
    scikit-learn's compute_class_weight; per label: the weights given, 1 for a label not named.

    >>> class_weight_vector("balanced", ["neg", "pos"], np.array([0, 0, 0, 1]))
    array([0.66666667, 2.        ])
    """
    parsed = parse_class_weights(text)
    if parsed == BALANCED:
        counts = np.bincount(train_labels, minlength=len(labels))  # (K,)
        missing = [labels[k] for k in range(len(labels)) if counts[k] == 0]
        if missing:
            raise ValueError(f"class_weights=balanced: label(s) {missing} have no training example, so no "
                             f"balanced weight; give the weights per label instead")
        return len(train_labels) / (len(labels) * counts.astype(np.float64))
    unknown = [label for label in parsed if label not in labels]
    if unknown:
        raise ValueError(f"class_weights={text!r}: unknown label(s) {unknown}; the data's labels are {list(labels)}")
    return np.array([parsed.get(label, 1.0) for label in labels], dtype=np.float64)


# ---------------------------------------------------------------------------------------------
# the data a run trains on and is scored on: training features and a dev scorer

class DataSource:
    """Training features and a dev scorer. Subclasses set `train` (dict of arrays, N rows),
    `label_keys` (the batch keys that hold labels), `main_metric`, and implement evaluate."""

    train: dict
    dev: dict  # the dev features (the same keys as train's)
    label_keys: tuple = ("labels",)
    main_metric: str = "accuracy"
    report: dict | None = None  # a classifier's per-class scores at the latest evaluation (metrics.ClassReport's)

    @property
    def num_train(self) -> int:
        return len(self.train["input_ids"])

    @property
    def num_dev(self) -> int:
        return len(self.dev["input_ids"])

    def batch(self, rows: np.ndarray) -> dict:
        """The training batch of these feature rows, padding columns that no row uses cut."""
        keys = ("input_ids", "input_mask", "segment_ids", *self.label_keys)
        return trim({k: self.train[k][rows] for k in keys})

    def evaluate(self, model) -> dict[str, float]:
        raise NotImplementedError

    def longest(self) -> int:
        """The most real tokens of a training or dev feature (`dev`: the dev features, where the
        source keeps them): what the model's position table must hold."""
        splits = [self.train, getattr(self, "dev", None)]
        return max(int(f["input_mask"].sum(-1).max(initial=0)) for f in splits if f is not None)

    def on_best(self, out: Path) -> None:
        """What the source writes beside a new best model (SQuAD: its predictions and scores)."""


def predict_logits(model, features: dict, batch_size: int = 128) -> list[np.ndarray]:
    """Logits of every feature row, batch by batch (padding columns trimmed, dropout off)."""
    out = []
    for start in range(0, len(features["input_ids"]), batch_size):
        b = trim({k: features[k][start:start + batch_size] for k in ("input_ids", "input_mask", "segment_ids")})
        out.append(model.eval_logits(b["input_ids"], b["segment_ids"], b["input_mask"]))
    return out


class ClassifierSource(DataSource):
    """Sequence classification / regression, token tagging and multiple choice (finetune.task_data)."""

    def __init__(self, data):
        self.data, self._score = data, score
        self.train, self.dev = data.train, data.dev
        self.main_metric = data.task.main_metric

    def evaluate(self, model) -> dict[str, float]:
        logits = predict_logits(model, self.data.dev)
        if self.data.task.kind == "token":
            T = self.data.dev["input_ids"].shape[-1]  # batches were trimmed: pad the ids back to T
            pred = np.concatenate([np.pad(l.argmax(-1), ((0, 0), (0, T - l.shape[1])), constant_values=IGNORE_INDEX)
                                   for l in logits])
        elif self.data.task.kind == "regression":
            pred = np.concatenate([l[:, 0] for l in logits])
        else:
            pred = np.concatenate([l.argmax(-1) for l in logits])
        if self.data.task.kind == "classification":  # per-class scores: what dev_report.json keeps of the best
            self.report = class_report(pred, self.data.dev["labels"], self.data.labels)._asdict()
        return self._score(self.data, pred)


# ---------------------------------------------------------------------------------------------
# the model to start from

def load_model(cfg: FinetuneConfig, kind: str, num_labels: int | None, id2label: dict | None, notes: bool = True):
    """-> (model, tokenizer). --init DIR: its encoder and vocabulary; --init none: the tiny
    preset's architecture, randomly initialised, with --vocab or the default corpus's vocabulary.
    cfg.causal: the model attends left to right (make_causal). `notes`: show what loading warned
    of (a resumed run has shown them once)."""
    model, tokenizer = _load_model(cfg, kind, num_labels, id2label, notes)
    if cfg.causal:
        model.make_causal(bilstm=cfg.bilstm, seed=cfg.seed)
    return model, tokenizer


def _load_model(cfg: FinetuneConfig, kind: str, num_labels: int | None, id2label: dict | None, notes: bool = True):
    extra = {} if kind in ("choice", "qa") else {"num_labels": num_labels, "id2label": id2label}
    if cfg.init.lower() == "none":
        vocab, do_lower, bert = control_model(cfg)
        tokenizer = BertTokenizer(vocab, do_lower_case=do_lower)
        bert = bert or BertConfig(vocab_size=len(tokenizer), **MODEL_SIZES["tiny"])
        cls = task_class("bert", kind)
        model = cls(_with_dropout(bert, cfg), **({} if kind in ("choice", "qa") else
                                                         {"num_labels": num_labels}), seed=cfg.seed)
        if id2label and kind not in ("choice", "qa"):
            model.config.id2label, model.config.label2id = id2label, {v: k for k, v in id2label.items()}
        return model, tokenizer
    init = Path(cfg.init)
    if init.is_file():
        raise ValueError(f"--init {init} is a file; pass the model directory (config.json, model.safetensors, vocab.txt)")
    if not (init / "vocab.txt").is_file():
        raise ValueError(f"--init {init} has no vocab.txt: the model's vocabulary is needed to tokenize the task")
    model_type = "bert"  # without config.json, from_pretrained says what is missing
    if (init / "config.json").is_file():
        model_type = read_config_json(init / "config.json").get("model_type", "bert")
    try:
        cls = task_class(model_type, kind)
    except ValueError as e:
        raise ValueError(f"--init {init}: {e}") from None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = cls.from_pretrained(init, **extra, seed=cfg.seed, verify=cfg.verify)
    for w in caught:
        if notes:
            print(f"note: {w.message}")
    tokenizer = model_tokenizer(init, model.config, model.do_lower_case, f"--init {init}")
    if cfg.vocab and Path(cfg.vocab).resolve() != (init / "vocab.txt").resolve():
        other = BertTokenizer(cfg.vocab)
        if other.ids_to_tokens != tokenizer.ids_to_tokens:
            raise ValueError(f"--vocab {cfg.vocab} differs from the vocabulary of --init {init}; a pretrained model "
                             f"only understands its own vocabulary (leave --vocab out)")
    model.config.hidden_dropout_prob = cfg.hidden_dropout_prob
    model.config.attention_probs_dropout_prob = cfg.attention_probs_dropout_prob
    if hasattr(model.config, "classifier_dropout_prob"):  # ALBERT's classifiers read their own dropout
        model.config.classifier_dropout_prob = cfg.hidden_dropout_prob
    return model, tokenizer


def control_model(cfg: FinetuneConfig) -> tuple[Path, bool, BertConfig | None]:
    """--init none -> (vocabulary, lower-casing, architecture or None for the tiny preset's).
    With --like DIR the control is DIR's model with fresh weights: its config.json, its
    vocabulary and casing, so the only difference from fine-tuning DIR is the pretraining."""
    if cfg.like:
        like = model_directory(cfg.like)
        raw = read_config_json(like / CONFIG_NAME)
        if raw.get("model_type", "bert") != "bert":
            raise ValueError(f"--like {cfg.like}: a {raw.get('model_type')!r} model; the random-init control is "
                             f"built for BERT models")
        if not (like / "vocab.txt").is_file():
            raise ValueError(f"--like {cfg.like} has no vocab.txt")
        if cfg.vocab:
            raise ValueError("--like takes the vocabulary of its model; leave --vocab out")
        config, _ = read_config(like / CONFIG_NAME, raw)
        return like / "vocab.txt", read_casing(like), config

    return (Path(cfg.vocab) if cfg.vocab else ensure_default_corpus().vocab), True, None


def _with_dropout(bert, cfg: FinetuneConfig):
    return dataclasses.replace(bert, hidden_dropout_prob=cfg.hidden_dropout_prob,
                               attention_probs_dropout_prob=cfg.attention_probs_dropout_prob)


# ---------------------------------------------------------------------------------------------
# the run

class FinetuneRun:
    """Model, optimizer, task source and the output directory of one fine-tuning run, as a run of
    loop/engine.run: the task source is the batch source and the evaluator, and the best model
    by the dev metric is kept at the run's top level beside the checkpoints."""

    def __init__(self, cfg: FinetuneConfig, model, source: DataSource, tokenizer, task_info: dict,
                 verbose: bool = True, recipe: dict | None = None,
                 closing: Callable[["FinetuneRun"], list[str]] | None = None, dir: Path | None = None):
        check_positions(cfg, model, source)
        self.cfg, self.model, self.source, self.tokenizer = cfg, model, source, tokenizer
        self.task_info = task_info
        self.dir = Path(dir or cfg.out)  # where it writes (loop/launch.py may build it beside cfg.out)
        n = source.num_train if not cfg.max_train_examples else min(cfg.max_train_examples, source.num_train)
        self.num_train = n
        self.steps_per_epoch = max(1, math.ceil(n / cfg.batch_size))
        self.total_steps = cfg.steps or max(1, int(round(cfg.epochs * self.steps_per_epoch)))  # steps 0: the epochs
        self.warmup_steps = int(cfg.warmup_proportion * self.total_steps)
        self.optimizer = AdamW(model.params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.best: dict | None = None  # {"step", main metric, ...} of the best evaluation
        self.class_weights = self._class_weights(cfg, source, task_info, n)  # (K,) or None
        # what the recipe chose, not the user: {"name", "settings", "epochs_raised_from"?} (run.json keeps it)
        self.recipe = recipe
        self.closing = closing  # a finished run's closing work (the command's: the model card) -> its lines
        self.early_stop: dict | None = None  # where patience ended the run (run.json keeps it)
        if cfg.patience and not source.num_dev:
            raise ValueError(f"patience={cfg.patience} stops on the dev score, and the run has no dev examples; "
                             f"give a dev file (--dev FILE, or dev.* in --data) or leave patience out")
        main = source.main_metric
        self.settings = LoopSettings.of(
            cfg, dir=self.dir, vocab=tokenizer.ids_to_tokens, command=COMMAND, home=Path(cfg.out), verbose=verbose,
            total_steps=self.total_steps, warmup_steps=self.warmup_steps, clip_norm=cfg.clip_norm,  # steps 0: the epochs
            dropout=max(cfg.hidden_dropout_prob, cfg.attention_probs_dropout_prob) > 0,
            steps_per_epoch=self.steps_per_epoch, eval_per_epoch=cfg.eval_per_epoch,
            checkpoint_after_eval=True, publish_checkpoints=False,  # the top level holds the best model, not the newest
            patience=cfg.patience, patience_metric=main,  # early stopping on the metric the best model is kept by
            show_train={"loss": "loss", "train_acc": "acc"}, eval_label="dev",
            curves=Curves((Panel("training loss", (Series("loss", label=""),)),  # drawing costs ~0.5 s
                           Panel(f"accuracy / dev {main}", (Series("train_acc", label="train (batch)"),
                                                             Series(main, "eval", f"dev {main}"))),
                           Panel("learning rate", (Series("lr", label=""),))), (("epoch", "epoch"),), every=30.0))

    @staticmethod
    def _class_weights(cfg: FinetuneConfig, source: DataSource, task_info: dict, n: int) -> np.ndarray | None:
        """--set class_weights -> the weight of each class (K,), for a classifier only."""
        if cfg.class_weights is None:
            return None
        if task_info.get("kind") != "classification":
            raise ValueError(f"class_weights weigh the classes of a classifier's loss; {task_info.get('name')} is a "
                             f"{task_info.get('kind', 'question answering')} task: leave class_weights out")
        return class_weight_vector(cfg.class_weights, list(task_info["labels"]), source.train["labels"][:n])

    def weights_shown(self) -> str:
        """The class weights in use, as the start-up line shows them: label=weight, and how made."""
        shown = " ".join(f"{label}={w:.3g}" for label, w in zip(self.task_info["labels"], self.class_weights))
        return shown + (" (balanced)" if self.cfg.class_weights == "balanced" else "")

    def stopped_early(self, step: int, total_steps: int) -> None:
        """Record in run.json that patience ended the run at `step` of `total_steps`."""
        self.early_stop = {"step": step, "total_steps": total_steps, "patience": self.cfg.patience,
                           "metric": self.source.main_metric, "best_step": (self.best or {}).get("step")}
        self._write_run_file()

    # -- its life (loop/launch.py) ----------------------------------------------------------------
    def start(self) -> None:
        """A fresh run: run.json (what an earlier run left cleared)."""
        rundir.start_run(self.dir, COMMAND, self.cfg.to_dict())
        self._write_run_file()

    def moved(self, to: Path) -> None:
        """The launcher swapped the run into `to` (it was built beside the run it replaces)."""
        self.dir, self.settings = to, dataclasses.replace(self.settings, dir=to)

    def opening(self, loop, resumed: bool) -> list[str]:
        """A fresh run's lines: what the recipe chose, the model and the schedule (and, on stderr, a
        warning when the steps are few to learn from)."""
        if resumed:
            return []
        cfg, m = self.cfg, self.model
        lines = [recipe_line(self.recipe, self)] if self.recipe else []
        epochs = cfg.epochs if not cfg.steps else round(self.total_steps / self.steps_per_epoch, 2)  # --steps: its epochs
        lines.append(f"{m.architecture}: {m.num_parameters:,} parameters, init {cfg.init}; {self.num_train:,} "
                     f"training features, batch {cfg.batch_size}, {self.total_steps} steps ({epochs:g} epochs), "
                     f"lr {cfg.lr:g}, warmup {self.warmup_steps}, dropout {cfg.hidden_dropout_prob:g}"
                     + (f" (attention {cfg.attention_probs_dropout_prob:g})"
                        if cfg.attention_probs_dropout_prob != cfg.hidden_dropout_prob else "")
                     + (f", class weights {self.weights_shown()}" if self.class_weights is not None else "")
                     + (f", patience {cfg.patience} on dev {self.source.main_metric}" if cfg.patience else "")
                     + (f", budget {cfg.minutes:g} min" if cfg.minutes else ""))
        if not cfg.steps and self.total_steps < FEW_STEPS:
            epochs_needed = math.ceil(FEW_STEPS / max(self.steps_per_epoch, 1))
            print(f"warning: {self.total_steps} optimizer steps ({self.num_train:,} training features, batch "
                  f"{cfg.batch_size}, {cfg.epochs:g} epochs) are few to learn from; a small data set needs more "
                  f"passes: --epochs {epochs_needed} gives about {FEW_STEPS} steps (or --steps N)", file=sys.stderr,
                  flush=True)
        return lines

    def finish(self, loop) -> list[str]:
        """Where patience ended the run (run.json), a finished run's closing work, and the done line."""
        if loop.out_of_patience(self.settings) and self.early_stop is None:
            self.stopped_early(loop.step, loop.total_steps)
        lines = self.closing(self) if self.closing is not None and loop.status in rundir.FINISHED else []
        return [*(lines if self.settings.verbose else []), done_line(self, loop.status)]

    def _write_run_file(self) -> None:
        extra = {}
        if self.class_weights is not None:  # the weights the loss used, by label
            extra["class_weights"] = dict(zip(self.task_info["labels"], self.class_weights.tolist()))
        if self.recipe is not None:
            extra["recipe"] = self.recipe
        if self.early_stop is not None:
            extra["early_stop"] = self.early_stop
        rundir.write_run(self.dir, COMMAND, self.cfg.to_dict(), task=self.task_info,
                         architecture=self.model.architecture, total_steps=self.total_steps, best=self.best, **extra)

    # -- batches: a function of the step alone ------------------------------------------------
    def rows_at(self, step: int) -> np.ndarray:
        epoch, i = divmod(step, self.steps_per_epoch)
        order = np.random.default_rng([self.cfg.seed, epoch]).permutation(self.num_train)  # (n,)
        return np.sort(order[i * self.cfg.batch_size:(i + 1) * self.cfg.batch_size])

    def next_batch(self, step: int, short: bool = False) -> dict:
        return self.source.batch(self.rows_at(step))

    def loss_grads_metrics(self, batch: dict, rng) -> tuple:
        """The task model's loss, gradients and metrics (loss; accuracy of the batch), with the real tokens."""
        if self.class_weights is not None:  # the loss weighs each row by its class (layers.target_weights)
            batch = {**batch, "class_weights": self.class_weights}
        loss, grads, metrics = self.model.loss_grads_metrics(batch, train=rng is not None, rng=rng)
        return loss, grads, {**metrics, "tokens": (int(batch["input_mask"].sum()), 1)}

    # -- evaluation and the best model ----------------------------------------------------------
    def evaluate(self, step: int) -> dict:
        """The dev scores; when the main one is the best so far, the model (and the source's own
        files, e.g. SQuAD's predictions) at the run's top level."""
        scores = self.source.evaluate(self.model)
        main = self.source.main_metric
        if self.best is None or scores[main] > self.best[main]:
            self.best = {"step": step, **{k: v for k, v in scores.items() if isinstance(v, (int, float))}}
            self.model.save_pretrained(self.dir, vocab=self.tokenizer.ids_to_tokens)  # each file atomic
            self.source.on_best(self.dir)
            if self.source.report is not None:  # a classifier's per-class scores and confusion matrix at the best
                rundir.write_json(self.dir / DEV_REPORT, {"step": step, **self.source.report})
            self._write_run_file()
        return scores

    # -- checkpoints ------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"best": self.best}

    def load_state_dict(self, state: dict, ckpt: Path) -> None:
        if "best" not in state:
            raise ValueError(f"{ckpt / rundir.STATE_FILE} has no best (the best dev scores so far, or null)")
        best = state["best"]
        numbers = isinstance(best, dict) and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                 for v in best.values())
        if best is not None and not (numbers and {"step", self.source.main_metric} <= set(best)):
            raise ValueError(f"{ckpt / rundir.STATE_FILE}: best is {best!r:.200}, expected null or the best dev "
                             f"scores ({{\"step\": ..., \"{self.source.main_metric}\": ...}})")
        saved = self.model.read_params(ckpt)
        for k, p in self.model.params.items():
            np.copyto(p, saved[k])
        self.best = best
        info = rundir.read_run(self.dir)  # what run.json records of the recipe's choices and of an early stop
        extra = info.extra if info is not None else {}
        self.recipe = extra.get("recipe") if isinstance(extra.get("recipe"), dict) else None
        self.early_stop = extra.get("early_stop") if isinstance(extra.get("early_stop"), dict) else None


def recipe_line(recipe: dict, run: FinetuneRun) -> str:
    """The line that says what the recipe chose (the settings the command line left out)."""
    raised_from = recipe.get("epochs_raised_from")

    def shown(k, v):
        if k == "epochs" and raised_from is not None:
            return (f"epochs {v:g} (the recipe's {raised_from:g}, raised for {run.num_train:,} training features: "
                    f"{run.total_steps} steps; --epochs or --steps wins)")
        if k == "patience" and raised_from is not None:
            return (f"patience {v:g} (a small data set stops after {v:g} dev evaluations without a better "
                    f"{run.source.main_metric}; --epochs or --steps runs the length given)")
        return f"{k} {v:g}"
    return f"recipe ({recipe['name']}; docs/finetuning.md): " + ", ".join(shown(k, v) for k, v in recipe["settings"].items())


def done_line(run: FinetuneRun, status: str) -> str:
    """The last line of a run: how it ended, its best dev scores (a classifier's macro-F1 among
    them) and where the model is."""
    best = run.best or {}
    main = run.source.main_metric
    scores = {k: v for k, v in best.items() if k != "step" and isinstance(v, float)}
    scores = {k: scores[k] for k in sorted(scores, key=lambda k: k != main)}  # the main metric first: it kept the model
    report = read_dev_report(run.dir) if best else None
    if isinstance(report, dict) and "macro_f1" not in scores and isinstance(report.get("macro_f1"), float):
        scores["macro_f1"] = report["macro_f1"]
    shown = ", ".join(f"{'macro-F1' if k == 'macro_f1' else k} {v:.4f}" + (" (kept by it)" if k == main else "")
                      for k, v in scores.items())
    early = (f" (early stop at step {run.early_stop['step']} of {run.early_stop['total_steps']}, patience "
             f"{run.early_stop['patience']})" if run.early_stop else "")
    return (f"{status}{early}: best dev {shown} at step {best.get('step')}; model in {run.dir} "
            f"(curves.png, metrics.jsonl); try `python -m minibert predict {run.dir} ...`")


def read_dev_report(run_dir: str | Path) -> dict | None:
    """A run's dev_report.json: a classifier's per-class scores at the best model (None for other
    tasks, or before the first evaluation); read by the done line and the model card."""
    path = Path(run_dir) / DEV_REPORT
    return read_json(path) if path.is_file() else None


def check_positions(cfg: FinetuneConfig, model, source: DataSource) -> None:
    """The data's lengths against the model: every training and dev feature must fit the model's
    position table. Checked when the run is built, before anything is written (the first batch
    with a longer example used to fail, after --overwrite had cleared the old run)."""
    config = getattr(model, "config", None)
    positions = getattr(config, "max_position_embeddings", None)
    longest = source.longest()
    if isinstance(positions, int) and longest > positions:
        raise ValueError(f"an example has {longest} tokens after --max-seq-length {cfg.max_seq_length}, more than the "
                         f"model's position table holds (max_position_embeddings {positions}, --init {cfg.init}); "
                         f"choose --max-seq-length <= {positions}")
