"""Fine-tuning metrics against answers worked out by hand (formulas written in each test)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from minibert.finetune.metrics import (accuracy, average_ranks, confusion_matrix, entities, entity_scores, f1_binary,
                                       matthews_corrcoef, pearson, spearman)

# ---------------------------------------------------------------------------------------------
# Classification

def test_accuracy_counts_matches():
    assert accuracy([1, 0, 2, 2], [1, 1, 2, 0]) == pytest.approx(0.5)
    assert accuracy(["a", "b"], ["a", "b"]) == pytest.approx(1.0)


def test_f1_binary_hand_example():
    pred = [1, 1, 1, 0, 0, 0]
    gold = [1, 1, 0, 1, 0, 0]  # tp=2 fp=1 fn=1 -> P = R = 2/3, F1 = 2·2 / (2·2 + 1 + 1)
    assert f1_binary(pred, gold) == pytest.approx(2 / 3)
    assert f1_binary(pred, gold, positive=0) == pytest.approx(2 / 3)  # the same by symmetry here


def test_f1_binary_is_zero_without_positives():
    assert f1_binary([0, 0], [0, 0]) == pytest.approx(0.0)


def test_confusion_matrix_rows_are_gold():
    counts, classes = confusion_matrix(["b", "a", "a"], ["a", "a", "b"])
    assert classes == ["a", "b"]
    assert counts.tolist() == [[1, 1], [1, 0]]


def test_mcc_binary_matches_two_by_two_formula():
    gold = [1] * 6 + [0] * 4
    pred = [1, 1, 1, 1, 0, 0] + [1, 0, 0, 0]  # tp=4 fn=2 fp=1 tn=3
    tp, tn, fp, fn = 4, 3, 1, 2
    expected = (tp * tn - fp * fn) / math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    assert matthews_corrcoef(pred, gold) == pytest.approx(expected)  # 10 / sqrt(600)


def test_mcc_perfect_inverse_and_multiclass():
    assert matthews_corrcoef([0, 1, 2], [0, 1, 2]) == pytest.approx(1.0)
    assert matthews_corrcoef([1, 0, 1, 0], [0, 1, 0, 1]) == pytest.approx(-1.0)
    # 3 classes, C = [[1,1,0],[0,1,0],[0,0,1]] (rows gold): c=3, s=4, t=(2,1,1), p=(1,2,1)
    # MCC = (3·4 - (2+2+1)) / sqrt((16 - (1+4+1)) · (16 - (4+1+1))) = 7 / 10
    assert matthews_corrcoef([0, 1, 1, 2], [0, 0, 1, 2]) == pytest.approx(0.7)


def test_mcc_is_zero_when_undefined():
    assert matthews_corrcoef([1, 1, 1], [0, 1, 0]) == pytest.approx(0.0)  # constant prediction
    assert matthews_corrcoef([0, 1, 0], [1, 1, 1]) == pytest.approx(0.0)  # constant gold


@pytest.mark.parametrize("fn", [accuracy, f1_binary, matthews_corrcoef, pearson, spearman])
def test_empty_or_mismatched_input_is_an_error(fn):
    with pytest.raises(ValueError, match="empty"):
        fn([], [])
    with pytest.raises(ValueError, match="same length"):
        fn([1, 2], [1])


# ---------------------------------------------------------------------------------------------
# Regression

def test_pearson_hand_example():
    # x - mean = (-1, 0, 1); y - mean = (-7/3, -1/3, 8/3): cov sum 5, sums of squares 2 and 114/9
    assert pearson([1, 2, 3], [2, 4, 7]) == pytest.approx(5 / math.sqrt(2 * 114 / 9))
    assert pearson([1, 2, 3], [6, 4, 2]) == pytest.approx(-1.0)


def test_average_ranks_share_ties():
    np.testing.assert_allclose(average_ranks([3, 1, 3, 3, 2]), [4, 1, 4, 4, 2])


def test_spearman_with_ties_by_hand():
    # ranks x = (1, 2.5, 2.5, 4), y = (1, 3, 2, 4); both means 2.5
    # deviations (-1.5, 0, 0, 1.5) and (-1.5, .5, -.5, 1.5): 4.5 / sqrt(4.5 · 5)
    assert spearman([10, 20, 20, 30], [1, 3, 2, 4]) == pytest.approx(4.5 / math.sqrt(4.5 * 5))


def test_spearman_ignores_monotone_transforms():
    x = np.array([0.1, 0.5, 0.2, 0.9])
    assert spearman(x, np.exp(5 * x)) == pytest.approx(1.0)


def test_correlations_of_constant_input_are_nan():
    assert math.isnan(pearson([1, 1, 1], [1, 2, 3]))
    assert math.isnan(spearman([1, 2, 3], [4, 4, 4]))


# ---------------------------------------------------------------------------------------------
# Entities (conlleval)

def test_entities_plain_bio():
    tags = ["B-per", "I-per", "O", "B-loc", "B-loc", "O"]
    assert entities(tags) == {("per", 0, 2), ("loc", 3, 4), ("loc", 4, 5)}


def test_entities_i_after_o_starts_an_entity():
    assert entities(["O", "I-per", "I-per", "O", "I-loc"]) == {("per", 1, 3), ("loc", 4, 5)}
    assert entities(["I-org"]) == {("org", 0, 1)}  # at the start of a sentence too


def test_entities_type_change_mid_entity_splits():
    assert entities(["B-per", "I-per", "I-loc", "I-loc"]) == {("per", 0, 2), ("loc", 2, 4)}


def test_entities_edge_cases():
    assert entities([]) == set()
    assert entities(["O", "O"]) == set()
    with pytest.raises(ValueError, match="E-per"):
        entities(["B-per", "E-per"])


def test_entity_scores_exact_span_mismatch_is_fp_and_fn():
    gold = [["B-per", "I-per", "O"], ["B-loc", "O", "B-org"]]
    pred = [["B-per", "O", "O"], ["B-loc", "O", "O"]]
    # gold: per(0,2), loc, org = 3; pred: per(0,1) wrong span, loc right = 2; correct = 1
    s = entity_scores(gold, pred)
    assert (s["gold"], s["predicted"], s["correct"]) == (3, 2, 1)
    assert s["precision"] == pytest.approx(1 / 2)
    assert s["recall"] == pytest.approx(1 / 3)
    assert s["f1"] == pytest.approx(2 * (1 / 2) * (1 / 3) / (1 / 2 + 1 / 3))
    assert s["accuracy"] == pytest.approx(4 / 6)  # tokens: 2 of 6 differ
    assert s["per_type"]["per"] == pytest.approx((0.0, 0.0, 0.0, 1))
    assert s["per_type"]["loc"] == pytest.approx((1.0, 1.0, 1.0, 1))
    assert s["per_type"]["org"][3] == 1


def test_entity_scores_wrong_type_counts_against_both():
    s = entity_scores([["B-per"]], [["B-loc"]])
    assert (s["precision"], s["recall"], s["f1"]) == pytest.approx((0.0, 0.0, 0.0))
    assert s["per_type"]["loc"][3] == 0  # predicted only: no support


def test_entity_scores_do_not_merge_across_sentences():
    # I-per opening the second sentence is a new entity, not a continuation of the first
    s = entity_scores([["B-per"], ["I-per"]], [["B-per"], ["B-per"]])
    assert s["correct"] == 2 and s["f1"] == pytest.approx(1.0)


def test_entity_scores_without_entities_are_zero():
    s = entity_scores([["O", "O"]], [["O", "O"]])
    assert (s["precision"], s["recall"], s["f1"], s["gold"]) == pytest.approx((0.0, 0.0, 0.0, 0))
    assert entity_scores([], [])["f1"] == pytest.approx(0.0)


def test_entity_scores_length_mismatch_is_an_error():
    with pytest.raises(ValueError, match="sequence 0"):
        entity_scores([["O", "O"]], [["O"]])
    with pytest.raises(ValueError, match="1 gold sequences but 0"):
        entity_scores([["O"]], [])
