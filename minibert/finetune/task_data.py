"""Fine-tuning data: read a task's files, fix its label order, score predictions.

One call loads a task; the fine-tuning loop batches the feature arrays and scores its predictions:

    data = load_task("rte", tokenizer, max_seq_length=128, data_dir="path/to/rte")
    data.train["input_ids"]          # (N, T) int64; also input_mask, segment_ids, labels
    data.labels                      # ['entailment', 'not_entailment']: label id = list index
    data.info                        # paths, example counts, how many were truncated or split
    score(data, pred)                # {'accuracy': 0.61}; pred as described in `score`

The built-in tasks (`TASKS`: their kinds, file names and default directories), `generic_task`
for a learner's own files and the readers live below pretraining and fine-tuning, in
minibert/taskdata/ (tasks.py, readers.py); this module turns their examples into features.

Label order: label id i is `labels[i]`, with `labels` the SORTED set of labels in the train file
(`label_list`). Sorting, not the order of first appearance, so the ids do not depend on how the
train file is shuffled; it also gives the natural order for SST-2 ("0" < "1") and RTE
("entailment" < "not_entailment"). A dev label that train never has is a ValueError naming the
file, line and label.

The registry and readers (`minibert.taskdata.tasks`, `minibert.taskdata.readers`) and the feature
builders (`minibert.finetune.features`) are re-exported here, so `from minibert.finetune.task_data
import read_glue` works.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from minibert.finetune import metrics
from minibert.finetune.features import (IGNORE_INDEX, choice_features,  # noqa: F401 (re-exported)
                                        classification_features, token_features, trim, word_predictions)
from minibert.taskdata.split import stratified_split
from minibert.taskdata.readers import (ChoiceExample, TaggedExample, TextExample, label_list,  # noqa: F401
                                       nextsent_examples, punct_examples, read_conll, read_glue, read_swag)
from minibert.taskdata.tasks import (CORPUS_FORMATS, FORMATS, TASKS, Task, find_file,  # noqa: F401 (re-exported)
                                     custom_task, generic_task, get_task, read_examples, task_paths)

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
                         "classification needs at least 2" + ("" if labels else " (no label column was found: name "
                                                              "yours with --label-column NAME)"))
    return labels


def load_task(task: Task | str, tokenizer, max_seq_length: int, data_dir=None,
              train_path=None, dev_path=None, seed: int = 0, strict_length: bool = False,
              dev_split: float = 0.0) -> TaskData:
    """Read train and dev, fix the labels from train, build the features of both splits.

    `task` is a name in TASKS or a Task (e.g. from generic_task). `seed` matters for nextsent
    (its distractors are drawn at random; dev uses seed + 1) and for `dev_split`: that share of
    the train file's examples becomes the dev set, stratified by label (taskdata/split.py; info's
    `dev_split` records the share, the seed and the counts). An example longer than
    `max_seq_length` is cut as Google's run_classifier cuts it (counted in `info`, with the
    file:line of the first one); `strict_length=True` makes it an error naming that line instead.
    """
    task = get_task(task) if isinstance(task, str) else task
    train_file, dev_file = task_paths(task, data_dir, train_path, dev_path, split_dev=bool(dev_split))
    train_examples = read_examples(task, train_file, "train", seed)
    if not train_examples:
        raise ValueError(f"{train_file}: no examples")
    split = None
    if dev_split:
        train_examples, dev_examples, split = split_examples(task, train_examples, dev_split, seed, train_file)
    else:
        dev_examples = read_examples(task, dev_file, "dev", seed)
        if not dev_examples:
            raise ValueError(f"{dev_file}: no examples")
    labels = _labels_for(task, train_examples, train_file)
    train = task_features(task, train_examples, tokenizer, max_seq_length, labels)
    dev = task_features(task, dev_examples, tokenizer, max_seq_length, labels)
    info = {"train_file": str(train_file), "dev_file": str(dev_file if dev_file is not None else train_file),
            **({"dev_split": split} if split else {}),
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


def split_examples(task: Task, examples: list, fraction: float, seed: int, path: Path) -> tuple[list, list, dict]:
    """A file's examples -> (train, dev, the record of the split): `fraction` of them for dev,
    stratified by label for classification and multiple choice (a regression or tagging task's
    examples are split at random), the same for the same seed."""
    keys = [e.label for e in examples] if task.kind in ("classification", "choice") else [""] * len(examples)
    train_idx, dev_idx = stratified_split(keys, fraction, seed, what=str(path))
    record = {"fraction": fraction, "seed": seed, "stratified": task.kind in ("classification", "choice"),
              "train": len(train_idx), "dev": len(dev_idx)}
    return [examples[i] for i in train_idx], [examples[i] for i in dev_idx], record


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
    functions = {"accuracy": metrics.accuracy, "mcc": metrics.matthews_corrcoef, "macro_f1": metrics.macro_f1,
                 "pearson": metrics.pearson, "spearman": metrics.spearman}
    return {name: metrics.f1_binary(pred, gold, positive=data.labels.index(name[3:])) if name.startswith("f1:")
            else functions[name](pred, gold) for name in task.metrics}


def main_metrics(task: Task, labels) -> tuple[str, ...]:
    """The dev metrics `--set main_metric=` may name for a task: the one the best checkpoint is
    kept by, patience watches and the done line leads with. f1:LABEL is one label's F1."""
    if task.kind == "classification":
        return ("accuracy", "macro_f1", "mcc", *(f"f1:{label}" for label in labels or ()))
    if task.kind == "regression":
        return ("pearson", "spearman")
    if task.kind == "token":
        return ("f1", "precision", "recall")  # entity level, as conlleval
    return ("accuracy",)


def with_main_metric(task: Task, name: str | None, labels) -> Task:
    """The task with `name` as its main metric (scored on dev beside its own metrics); the task
    as it is when `name` is empty. A name the task does not have is an error listing those it has."""
    if not name:
        return task
    allowed = main_metrics(task, labels)
    if name not in allowed:
        raise ValueError(f"main_metric={name!r} is not a dev metric of {task.name} ({task.kind}); choose one of "
                         f"{', '.join(allowed)}")
    return replace(task, metrics=task.metrics if name in task.metrics else (*task.metrics, name), main_metric=name)
