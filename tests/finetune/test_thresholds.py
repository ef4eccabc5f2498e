"""A two-label classifier's threshold: the precision-recall curve, the threshold that maximises the
positive label's F1 (checked by hand and against every possible cut), the positive label chosen
as documented, and `evaluate` printing it, writing it to its JSON and drawing NAME.pr.png."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from corpora import tiny_pretrained
from hypothesis import given, settings
from hypothesis import strategies as st

from minibert.__main__ import main
from minibert.finetune import metrics
from minibert.finetune.evaluate import load_finetuned, pr_positive_label, score_file, threshold_report
from minibert.finetune.models import BertForSequenceClassification


def test_the_best_threshold_of_a_hand_made_case():
    # p(spam) of 8 messages, highest first; gold spam at 0.95, 0.9, 0.6 and 0.3
    scores = [0.95, 0.9, 0.8, 0.7, 0.6, 0.4, 0.3, 0.1]
    gold = [1, 1, 0, 0, 1, 0, 1, 0]
    curve = metrics.pr_curve(scores, gold)
    # p >= 0.9: P 1, R 2/4, F1 2/3; p >= 0.6: P 3/5, R 3/4, F1 2/3; p >= 0.3: P 4/7, R 1, F1 8/11 (the best)
    best = curve.best_f1()
    assert curve.thresholds[best] == pytest.approx(0.3)
    assert (curve.precision[best], curve.recall[best], curve.f1[best]) == pytest.approx((4 / 7, 1.0, 8 / 11))
    found = threshold_report(np.c_[1 - np.array(scores), scores], np.array(gold), ["ham", "spam"], 1)
    assert found["best_f1_threshold"] == pytest.approx(0.3) and found["f1"] == pytest.approx(8 / 11)
    assert found["at_0.5"] == pytest.approx({"precision": 3 / 5, "recall": 3 / 4, "f1": 2 / 3})


def test_tied_scores_share_one_threshold():
    curve = metrics.pr_curve([0.8, 0.5, 0.5, 0.2], [1, 0, 1, 0])
    assert curve.thresholds.tolist() == [0.8, 0.5, 0.2]  # exact: the thresholds are the given scores, copied
    assert curve.precision.tolist() == pytest.approx([1.0, 2 / 3, 0.5]) and curve.recall.tolist() == [0.5, 1.0, 1.0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.booleans()), min_size=1, max_size=30))
def test_no_cut_has_a_higher_f1_than_the_best_threshold(examples):
    scores = np.array([s / 20 for s, _ in examples])
    gold = np.array([g for _, g in examples])
    curve = metrics.pr_curve(scores, gold)
    best = curve.best_f1()
    for t in np.unique(scores):  # every threshold, counted by brute force
        pred = scores >= t
        tp = int((pred & gold).sum())
        f1 = 2 * tp / (pred.sum() + gold.sum()) if pred.sum() + gold.sum() else 0.0
        assert f1 <= curve.f1[best] + 1e-12
        if t == curve.thresholds[best]:
            assert f1 == pytest.approx(curve.f1[best])


def test_the_positive_label_is_the_rarer_one_unless_named():
    labels = ["ham", "spam"]
    assert pr_positive_label(labels, np.array([0, 0, 0, 1]), None, "dev.csv") == \
        (1, "the rarer label in dev.csv; --positive names the other")
    assert pr_positive_label(labels, np.array([1, 1, 0]), None, "f")[0] == 0  # here ham is the rarer
    assert pr_positive_label(labels, np.array([0, 1]), None, "f")[0] == 1  # as common: the second label
    assert pr_positive_label(labels, np.array([0, 0, 1]), "ham", "f") == (0, "--positive")
    with pytest.raises(ValueError, match=r"--positive 'eggs' is not a label of this model \(its labels: ham, "
                                         r"spam\)"):
        pr_positive_label(labels, np.array([0, 1]), "eggs", "f")


VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "win", "a", "prize", "now", "see", "you", "at", "six", "call",
         "me", "free", "home", "soon"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("thr")
    tiny_pretrained(d / "pre", VOCAB)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a newly initialised head: its scores are what the test needs
        BertForSequenceClassification.from_pretrained(d / "pre", 2, id2label={0: "ham", 1: "spam"}, seed=5
                                                      ).save_pretrained(d / "cls", vocab=VOCAB)
    rows = [("spam", "win a prize now"), ("ham", "see you at six"), ("ham", "call me"), ("spam", "free prize"),
            ("ham", "home soon"), ("ham", "see you soon"), ("ham", "call me at six"), ("spam", "call now"),
            ("ham", "at home"), ("ham", "you win")]
    (d / "dev.tsv").write_text("label\tsentence\n" + "".join(f"{a}\t{b}\n" for a, b in rows), encoding="utf-8")
    return d


def test_evaluate_prints_the_threshold_and_draws_the_curve(model, tmp_path, capsys):
    out = tmp_path / "m.json"
    assert main(["evaluate", str(model / "cls"), "--data", str(model / "dev.tsv"), "--format", "glue-single",
                 "--out", str(out)]) == 0
    said = capsys.readouterr().out
    line = next(x for x in said.splitlines() if x.startswith("threshold for 'spam' (the rarer label in dev.tsv"))
    found = json.loads(out.read_text())["threshold"]
    assert found["positive_label"] == "spam" and f"p(spam) >= {found['best_f1_threshold']:.4f}" in line
    assert (tmp_path / "m.pr.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "m.pr.png" in said
    # the reported F1 is what that threshold gives, and no threshold gives more
    scored = score_file(load_finetuned(model / "cls"), model / "dev.tsv", "glue-single")
    p, spam = scored.probs[:, 1], scored.gold == 1
    f1 = [2 * (spam & (p >= t)).sum() / ((p >= t).sum() + spam.sum()) for t in p]
    assert found["f1"] == pytest.approx(max(f1))
    assert found["f1"] == pytest.approx(f1[int(np.argmin(abs(p - found["best_f1_threshold"])))])
    assert main(["evaluate", str(model / "cls"), "--data", str(model / "dev.tsv"), "--format", "glue-single",
                 "--positive", "ham"]) == 0
    assert "threshold for 'ham' (--positive)" in capsys.readouterr().out
