"""Fine-tuning data: read a task's files, fix its label order, score predictions.

One call loads a task; the fine-tuning loop batches the feature arrays and scores its predictions:

    data = load_task("rte", tokenizer, max_seq_length=128, data_dir="path/to/rte")
    data.train["input_ids"]          # (N, T) int64; also input_mask, segment_ids, labels
    data.labels                      # ['entailment', 'not_entailment']: label id = list index
    data.info                        # paths, example counts, how many were truncated or split
    score(data, pred)                # {'accuracy': 0.61}; pred as described in `score`

Built-in tasks (`TASKS`), and the files each reads from its data directory:

    sst2      classification  glue-single  train.tsv, dev.tsv        accuracy
    rte       classification  glue-pair    train.tsv, dev.tsv        accuracy
    wnut17    token           conll        train.conll, dev.conll    entity precision/recall/F1
              (shipped in data/wnut17, the default directory)
    swag      choice          swag         train.csv, val.csv (or dev.csv)   accuracy
    nextsent  choice          nextsent     train.txt, heldout.txt    accuracy
              (offline "which sentence comes next"; default: the default pretraining corpus)
    punct     token           punct        train.txt, heldout.txt    tag precision/recall/F1
              (offline punctuation restoration: the marks taken out, each word tagged with
              the one that followed it; default: the default pretraining corpus)

`generic_task(format)` makes the same for a learner's own files in one of the formats.

Label order: label id i is `labels[i]`, with `labels` the SORTED set of labels in the train file
(`label_list`). Sorting, not the order of first appearance, so the ids do not depend on how the
train file is shuffled; it also gives the natural order for SST-2 ("0" < "1") and RTE
("entailment" < "not_entailment"). A dev label that train never has is a ValueError naming the
file, line and label.

The readers (`minibert.finetune.readers`) and feature builders (`minibert.finetune.features`)
are re-exported here, so `from minibert.finetune.tasks import read_glue` works.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from minibert.finetune import metrics
from minibert.finetune.features import (IGNORE_INDEX, choice_features,  # noqa: F401 (re-exported)
                                        classification_features, token_features, trim, word_predictions)
from minibert.finetune.readers import (ChoiceExample, TaggedExample, TextExample, label_list,  # noqa: F401
                                       nextsent_examples, punct_examples, read_conll, read_glue, read_swag)

ROOT = Path(__file__).resolve().parent.parent.parent
FORMATS = ("glue-single", "glue-pair", "conll", "swag", "nextsent", "punct")
CORPUS_FORMATS = ("nextsent", "punct")  # built from documents; default data: the default corpus


@dataclass(frozen=True)
class Task:
    """What a task is: its kind, file format, file names and the metrics to report.

    `train_files` / `dev_files` list accepted names in a data directory (the first present is
    used). `metrics` are reported in order; `main_metric` picks the best checkpoint.
    """
    name: str
    kind: str  # "classification" | "regression" | "token" | "choice"
    format: str  # one of FORMATS
    train_files: tuple[str, ...]
    dev_files: tuple[str, ...]
    metrics: tuple[str, ...]
    main_metric: str
    default_dir: Path | None = None  # where the files are when no data_dir is given

    @property
    def head(self) -> str:
        """The head in minibert.finetune.heads: 'sequence', 'token' or 'choice'."""
        return "sequence" if self.kind in ("classification", "regression") else self.kind


TASKS = {
    "sst2": Task("sst2", "classification", "glue-single", ("train.tsv",), ("dev.tsv",),
                 ("accuracy",), "accuracy"),
    "rte": Task("rte", "classification", "glue-pair", ("train.tsv",), ("dev.tsv",),
                ("accuracy",), "accuracy"),
    "wnut17": Task("wnut17", "token", "conll", ("train.conll",), ("dev.conll",),
                   ("precision", "recall", "f1"), "f1", ROOT / "data" / "wnut17"),
    "swag": Task("swag", "choice", "swag", ("train.csv",), ("val.csv", "dev.csv"),
                 ("accuracy",), "accuracy"),
    "nextsent": Task("nextsent", "choice", "nextsent", ("train.txt",), ("heldout.txt",),
                     ("accuracy",), "accuracy"),
    "punct": Task("punct", "token", "punct", ("train.txt",), ("heldout.txt",),
                  ("precision", "recall", "f1"), "f1"),
}
NEXTSENT_TRAIN_PER_DOC = 2  # nextsent: examples per train document (all positions for dev)


def generic_task(format: str, regression: bool = False) -> Task:
    """A task for your own files in one of the formats (`--format glue-pair` etc.).

    glue-*: classification (accuracy, Matthews correlation), or with `regression=True` a float
    label (Pearson, Spearman); conll: token classification (entity P/R/F1); swag: choice.

    >>> generic_task("glue-pair").dev_files
    ('dev.tsv',)
    """
    if format.startswith("glue-") and format in FORMATS:
        if regression:
            return Task("regression", "regression", format, ("train.tsv",), ("dev.tsv",),
                        ("pearson", "spearman"), "pearson")
        return Task(format, "classification", format, ("train.tsv",), ("dev.tsv",),
                    ("accuracy", "mcc"), "accuracy")
    if format == "conll":
        return Task("conll", "token", "conll", ("train.conll",), ("dev.conll",),
                    ("precision", "recall", "f1"), "f1")
    if format == "swag":
        return TASKS["swag"]
    raise ValueError(f"unknown format {format!r}; expected one of glue-single, glue-pair, conll, swag")


def get_task(name: str) -> Task:
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; known tasks: {', '.join(TASKS)}")
    return TASKS[name]


# ---------------------------------------------------------------------------------------------
# Finding the files

def find_file(data_dir: Path, names: tuple[str, ...], split: str, task: Task) -> Path:
    """The first of `names` present in data_dir; FileNotFoundError listing what is there."""
    for name in names:
        if (data_dir / name).is_file():
            return data_dir / name
    present = sorted(p.name for p in data_dir.iterdir()) if data_dir.is_dir() else None
    there = ("the directory does not exist" if present is None else
             f"files present: {', '.join(present) or '(none)'}")
    raise FileNotFoundError(f"task {task.name}: no {split} file {data_dir / names[0]}"
                            f"{' (or ' + ', '.join(names[1:]) + ')' if names[1:] else ''}; {there}")


def task_paths(task: Task, data_dir=None, train_path=None, dev_path=None) -> tuple[Path, Path]:
    """(train, dev) paths: explicit paths win, else the task's file names in data_dir."""
    directory = Path(data_dir) if data_dir is not None else task.default_dir
    if directory is None and task.format in CORPUS_FORMATS:
        from minibert.corpus import ensure_default_corpus
        directory = Path(ensure_default_corpus().train).parent
    if directory is None and (train_path is None or dev_path is None):
        raise ValueError(f"task {task.name} has no default data directory: give one holding "
                         f"{task.train_files[0]} and {task.dev_files[0]}")
    train = Path(train_path) if train_path is not None else find_file(directory, task.train_files, "train", task)
    dev = Path(dev_path) if dev_path is not None else find_file(directory, task.dev_files, "dev", task)
    for path in (train, dev):
        if not path.is_file():
            raise FileNotFoundError(f"task {task.name}: {path} does not exist")
    return train, dev


# ---------------------------------------------------------------------------------------------
# Loading a task

@dataclass
class TaskData:
    """A loaded task: feature arrays for train and dev, the label names and a summary.

    `train` / `dev` are dicts of arrays, all with N rows (see the feature builders); `labels` are
    the label names by id (None for regression and choice tasks); `dev_examples` keep the dev
    words and tags for entity scoring.
    """
    task: Task
    train: dict
    dev: dict
    labels: list[str] | None
    dev_examples: list
    info: dict = field(default_factory=dict)


def read_examples(task: Task, path: Path, split: str, seed: int = 0) -> list:
    """The examples of one file in the task's format."""
    if task.format in ("glue-single", "glue-pair"):
        return read_glue(path, single=task.format == "glue-single")
    if task.format == "conll":
        return read_conll(path)
    if task.format == "swag":
        return read_swag(path)
    from minibert.corpus import read_documents
    if task.format == "punct":
        return punct_examples(read_documents(path), source=str(path))
    per_doc = NEXTSENT_TRAIN_PER_DOC if split == "train" else None
    return nextsent_examples(read_documents(path), seed=seed + (split != "train"),
                             max_per_doc=per_doc, source=str(path))


def task_features(task: Task, examples: list, tokenizer, max_seq_length: int, labels) -> dict:
    if task.kind == "token":
        return token_features(examples, tokenizer, max_seq_length, labels)
    if task.kind == "choice":
        return choice_features(examples, tokenizer, max_seq_length)
    return classification_features(examples, tokenizer, max_seq_length,
                                   "regression" if task.kind == "regression" else labels)


def _labels_for(task: Task, train_examples: list, path: Path) -> list[str] | None:
    if task.kind in ("regression", "choice"):
        return None
    labels = label_list(train_examples)
    if len(labels) < 2 and task.kind == "classification":
        raise ValueError(f"{path}: the train file has {len(labels)} distinct label(s) {labels}; "
                         "classification needs at least 2")
    return labels


def load_task(task: Task | str, tokenizer, max_seq_length: int, data_dir=None,
              train_path=None, dev_path=None, seed: int = 0, strict_length: bool = False) -> TaskData:
    """Read train and dev, fix the labels from train, build the features of both splits.

    `task` is a name in TASKS or a Task (e.g. from generic_task). `seed` only matters for
    nextsent (its distractors are drawn at random; dev uses seed + 1). An example longer than
    `max_seq_length` is cut as Google's run_classifier cuts it (counted in `info`, with the
    file:line of the first one); `strict_length=True` makes it an error naming that line instead.
    """
    task = get_task(task) if isinstance(task, str) else task
    train_file, dev_file = task_paths(task, data_dir, train_path, dev_path)
    train_examples = read_examples(task, train_file, "train", seed)
    dev_examples = read_examples(task, dev_file, "dev", seed)
    for path, examples in ((train_file, train_examples), (dev_file, dev_examples)):
        if not examples:
            raise ValueError(f"{path}: no examples")
    labels = _labels_for(task, train_examples, train_file)
    train = task_features(task, train_examples, tokenizer, max_seq_length, labels)
    dev = task_features(task, dev_examples, tokenizer, max_seq_length, labels)
    info = {"train_file": str(train_file), "dev_file": str(dev_file),
            "train_examples": len(train_examples), "dev_examples": len(dev_examples),
            "train_features": len(train["input_ids"]), "dev_features": len(dev["input_ids"])}
    for split, feats, examples in (("train", train, train_examples), ("dev", dev, dev_examples)):
        if "truncated" in feats and feats["truncated"].any():
            first = examples[int(np.flatnonzero(feats["truncated"])[0])].where
            if strict_length:
                raise ValueError(f"{first}: this {split} example does not fit in max_seq_length={max_seq_length} "
                                 f"tokens ([CLS] and [SEP] included); {int(feats['truncated'].sum()):,} {split} "
                                 f"example(s) do not. Raise --max-seq-length, or drop --strict-length to cut "
                                 f"them as BERT's run_classifier does")
            info[f"{split}_truncated"] = int(feats["truncated"].sum())
            info[f"{split}_first_truncated"] = first
    return TaskData(task, train, dev, labels, dev_examples, info)


# ---------------------------------------------------------------------------------------------
# Scoring

def score(data: TaskData, pred) -> dict[str, float]:
    """The task's metrics on the dev split.

    `pred`: classification and choice: (N,) predicted ids (argmax of the logits); regression:
    (N,) predicted values; token: (N, T) predicted label ids for every position of every dev
    feature (argmax over the last axis; only first sub-tokens are read).

    >>> data = TaskData(TASKS["sst2"], {}, {"labels": np.array([0, 1, 1])}, ["0", "1"], [])
    >>> score(data, np.array([0, 1, 0]))["accuracy"]
    0.6666666666666666
    """
    task = data.task
    if task.kind == "token":
        pred_tags = word_predictions(data.dev, pred, data.labels)
        result = metrics.entity_scores([e.tags for e in data.dev_examples], pred_tags)
        return {name: result[name] for name in task.metrics}
    pred = np.asarray(pred)
    gold = data.dev["labels"]
    functions = {"accuracy": metrics.accuracy, "mcc": metrics.matthews_corrcoef,
                 "pearson": metrics.pearson, "spearman": metrics.spearman}
    return {name: functions[name](pred, gold) for name in task.metrics}
