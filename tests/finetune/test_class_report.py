"""Per-class scores of a classifier: precision, recall, F1, support, macro-F1 and the confusion
matrix, counted by hand on small cases."""
from __future__ import annotations

import numpy as np
import pytest

from minibert.finetune import metrics
from minibert.finetune.task_data import TaskData, score
from minibert.taskdata.tasks import generic_task


def test_per_class_scores_counted_by_hand():
    # gold: a a a b b c; predicted: a a b b c c
    r = metrics.class_report([0, 0, 1, 1, 2, 2], [0, 0, 0, 1, 1, 2], ["a", "b", "c"])
    assert r.confusion == [[2, 1, 0], [0, 1, 1], [0, 0, 1]]
    assert r.support == [3, 2, 1]
    assert r.precision == pytest.approx([1.0, 0.5, 0.5])
    assert r.recall == pytest.approx([2 / 3, 0.5, 1.0])
    assert r.f1 == pytest.approx([0.8, 0.5, 2 / 3])
    assert r.macro_f1 == pytest.approx((0.8 + 0.5 + 2 / 3) / 3)
    table = r.table()
    assert "macro-F1" in table and "confusion matrix (rows: gold, columns: predicted)" in table
    assert table.splitlines()[1].split()[0] == "a"


def test_a_class_never_seen_gets_a_row_of_zeros():
    r = metrics.class_report([0, 0], [0, 0], ["pos", "neg", "neutral"])
    assert r.support == [2, 0, 0] and r.precision == [1.0, 0.0, 0.0] and r.recall == [1.0, 0.0, 0.0]
    assert r.confusion[1] == [0, 0, 0] and r.macro_f1 == pytest.approx(1 / 3)


def test_ids_outside_the_labels_are_refused():
    with pytest.raises(ValueError, match=r"label ids must be in 0..1"):
        metrics.class_report([0, 2], [0, 1], ["a", "b"])


def test_macro_f1_counts_a_rare_class_as_much_as_a_common_one():
    gold = np.array([0] * 9 + [1])
    always_common = np.zeros(10, dtype=int)
    assert metrics.accuracy(always_common, gold) == pytest.approx(0.9)
    assert metrics.macro_f1(always_common, gold) == pytest.approx((18 / 19 + 0) / 2)


def test_your_own_classification_task_reports_macro_f1():
    data = TaskData(generic_task("glue-single"), {}, {"labels": np.array([0, 1, 1, 1])}, ["neg", "pos"], [])
    scores = score(data, np.array([0, 1, 1, 0]))
    assert list(scores) == ["accuracy", "macro_f1", "mcc"]
    assert scores["macro_f1"] == pytest.approx((2 / 3 + 0.8) / 2)
