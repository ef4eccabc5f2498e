"""One labelled file and --dev-split: the dev set split off it (stratified, seeded, recorded); and
the metric that keeps the best model: what each task may name, f1:LABEL scored, a name the task
lacks refused with the list, and your own classification task kept by macro-F1 by default."""
from __future__ import annotations

import csv
from collections import Counter

import numpy as np
import pytest

from minibert.finetune.task_data import (TaskData, custom_task, load_task, main_metrics, read_examples, score,
                                        split_examples, with_main_metric)
from minibert.finetune.squad_run import squad_main_metric
from minibert.taskdata.tasks import TASKS, generic_task
from minibert.text.tokenizer import BertTokenizer

TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "win", "cash", "now", "see", "you", "soon"]


def _one_file(path, n_ham=87, n_spam=13):
    rows = [("see you soon", "ham")] * n_ham + [("win cash now", "spam")] * n_spam
    rows = [rows[i] for i in np.random.default_rng(1).permutation(len(rows))]
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        w.writerows((f"{text} {i}", label) for i, (text, label) in enumerate(rows))
    return path


def test_dev_split_is_stratified_seeded_and_recorded(tmp_path):
    path = _one_file(tmp_path / "all.csv")
    tok = BertTokenizer(TOKENS)
    task = custom_task(None, None, path, None, split_dev=True)
    data = load_task(task, tok, 16, train_path=path, dev_split=0.2, seed=4)
    assert data.info["dev_split"] == {"fraction": 0.2, "seed": 4, "stratified": True, "train": 80, "dev": 20}
    gold = Counter(data.labels[i] for i in data.dev["labels"])
    assert gold == {"ham": 17, "spam": 3}  # 87 * 0.2 and 13 * 0.2, rounded
    again = load_task(task, tok, 16, train_path=path, dev_split=0.2, seed=4)
    assert [e.where for e in again.dev_examples] == [e.where for e in data.dev_examples]
    other = load_task(task, tok, 16, train_path=path, dev_split=0.2, seed=5)
    assert [e.where for e in other.dev_examples] != [e.where for e in data.dev_examples]
    assert not {e.where for e in data.dev_examples} & set(_train_wheres(task, tok, path, 4))


def _train_wheres(task, tok, path, seed):
    train, _, _ = split_examples(task, read_examples(task, path, "train"), 0.2, seed, path)
    return [e.where for e in train]


def test_a_label_too_rare_to_split_and_a_dev_file_too_are_refused(tmp_path):
    path = _one_file(tmp_path / "all.csv", n_spam=1)
    task = custom_task(None, None, path, None, split_dev=True)
    with pytest.raises(ValueError, match=r"too few examples of 'spam' \(1 example\)"):
        load_task(task, BertTokenizer(TOKENS), 16, train_path=path, dev_split=0.2)
    with pytest.raises(ValueError, match="--dev-split splits a dev set off the training file; --dev"):
        load_task(task, BertTokenizer(TOKENS), 16, train_path=path, dev_path=path, dev_split=0.2)


def test_the_metrics_a_task_may_keep_its_best_model_by():
    own = generic_task("glue-single")
    assert own.main_metric == "macro_f1"  # your own labels: accuracy would reward the common one
    assert TASKS["sst2"].main_metric == "accuracy"  # a benchmark keeps its paper's metric
    assert main_metrics(own, ["ham", "spam"]) == ("accuracy", "macro_f1", "mcc", "f1:ham", "f1:spam")
    assert main_metrics(TASKS["wnut17"], ["O", "B-x"]) == ("f1", "precision", "recall")
    chosen = with_main_metric(own, "f1:spam", ["ham", "spam"])
    assert chosen.main_metric == "f1:spam" and chosen.metrics == ("accuracy", "macro_f1", "mcc", "f1:spam")
    assert with_main_metric(own, None, ["ham", "spam"]) is own
    with pytest.raises(ValueError, match=r"main_metric='f1:eggs' is not a dev metric of glue-single \(classification"
                                         r"\); choose one of accuracy, macro_f1, mcc, f1:ham, f1:spam"):
        with_main_metric(own, "f1:eggs", ["ham", "spam"])
    with pytest.raises(ValueError, match="choose one of pearson, spearman"):
        with_main_metric(generic_task("glue-single", regression=True), "accuracy", None)


def test_f1_of_one_label_is_scored():
    task = with_main_metric(generic_task("glue-single"), "f1:spam", ["ham", "spam"])
    data = TaskData(task, {}, {"labels": np.array([0, 0, 0, 1, 1])}, ["ham", "spam"], [])
    got = score(data, np.array([0, 0, 1, 1, 0]))  # spam: tp 1, fp 1, fn 1
    assert got["f1:spam"] == pytest.approx(0.5) and got["accuracy"] == pytest.approx(0.6)


def test_squad_keeps_its_best_model_by_f1_or_exact():
    assert squad_main_metric(None, False, "squad1") == "f1" and squad_main_metric(None, True, "squad2") == "best_f1"
    assert squad_main_metric("exact", True, "squad2") == "exact"
    with pytest.raises(ValueError, match="main_metric='best_f1' is not a dev metric of squad1; choose one of f1, exact"):
        squad_main_metric("best_f1", False, "squad1")
