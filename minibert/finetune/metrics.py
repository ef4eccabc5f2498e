"""Scores for fine-tuned models, in NumPy: the metrics the BERT paper reports on its tasks.

    accuracy(pred, gold)              SST-2, RTE, SWAG, nextsent
    f1_binary(pred, gold, positive)   MRPC, QQP (with accuracy)
    matthews_corrcoef(pred, gold)     CoLA
    macro_f1(pred, gold)              every class counted the same (your own, unbalanced data)
    class_report(pred, gold, labels)  per-class precision/recall/F1/support, macro-F1, confusion matrix
    pr_curve(scores, positive)        precision and recall at every threshold of a two-label classifier
    pearson(x, y), spearman(x, y)     STS-B (regression)
    entities(tags), entity_scores(gold_seqs, pred_seqs)
                                      NER (WNUT-17, CoNLL-2003): entity-level P/R/F1 as conlleval

Conventions: every function takes plain lists or arrays; two inputs must have the same length;
empty input is a ValueError (there is nothing to score), except `entity_scores`, which, like
conlleval, reports zeros when there are no entities. Undefined values follow the reference
tools: Matthews correlation and F1 are 0 when their denominator is 0 (as scikit-learn), and
Pearson/Spearman are NaN for constant input (as SciPy). Results are Python floats in [0, 1]
(conlleval prints percentages; multiply by 100 to compare).
"""
from __future__ import annotations

import math
from collections import Counter
from typing import NamedTuple

import numpy as np

from minibert.io.escape import one_line


def _pair(pred, gold, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Both inputs as 1-D arrays of the same, non-zero length."""
    pred, gold = np.asarray(pred), np.asarray(gold)
    if pred.shape != gold.shape or pred.ndim != 1:
        raise ValueError(f"{what}: predictions {pred.shape} and gold {gold.shape} must be 1-D "
                         "and of the same length")
    if len(pred) == 0:
        raise ValueError(f"{what}: no predictions to score (empty input)")
    return pred, gold


# ---------------------------------------------------------------------------------------------
# Classification

def accuracy(pred, gold) -> float:
    """Fraction of predictions equal to the gold label.

    >>> accuracy([1, 0, 1, 1], [1, 1, 1, 0])     # 2 of 4 right
    0.5
    """
    pred, gold = _pair(pred, gold, "accuracy")
    return float(np.mean(pred == gold))


def f1_binary(pred, gold, positive=1) -> float:
    """F1 of the `positive` class: 2·tp / (2·tp + fp + fn), 0 when there is no positive at all.

    >>> f1_binary([1, 1, 0, 0], [1, 0, 1, 0])    # tp=1 fp=1 fn=1: 2/(2+1+1)
    0.5
    """
    pred, gold = _pair(pred, gold, "f1_binary")
    tp = int(np.sum((pred == positive) & (gold == positive)))
    fp = int(np.sum((pred == positive) & (gold != positive)))
    fn = int(np.sum((pred != positive) & (gold == positive)))
    return _f1(tp, fp, fn)


def _f1(tp: int, fp: int, fn: int) -> float:
    return 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0


def confusion_matrix(pred, gold) -> tuple[np.ndarray, list]:
    """(K, K) counts, rows = gold class, columns = predicted class, classes sorted.

    >>> confusion_matrix([1, 0, 1], [1, 1, 0])[0].tolist()    # gold 0 -> pred 1 once, ...
    [[0, 1], [1, 1]]
    """
    pred, gold = _pair(pred, gold, "confusion_matrix")
    classes = sorted(set(pred.tolist()) | set(gold.tolist()))
    index = {c: i for i, c in enumerate(classes)}
    counts = np.zeros((len(classes), len(classes)), dtype=np.int64)  # (K, K)
    np.add.at(counts, ([index[g] for g in gold.tolist()], [index[p] for p in pred.tolist()]), 1)
    return counts, classes


def matthews_corrcoef(pred, gold) -> float:
    """Matthews correlation (CoLA's metric), general K-class form; 0 when undefined.

    With the (K, K) confusion matrix C, c = trace(C) (correct), s = sum(C) (total),
    t_k = row sums (gold counts), p_k = column sums (predicted counts):

        MCC = (c·s − t·p) / sqrt((s² − p·p) · (s² − t·t))

    For two classes this is (tp·tn − fp·fn) / sqrt((tp+fp)(tp+fn)(tn+fp)(tn+fn)).
    Constant predictions (or constant gold) make the denominator 0; the result is then 0.

    >>> round(matthews_corrcoef([1, 1, 0, 0], [1, 0, 0, 0]), 4)   # tp=1 tn=2 fp=1 fn=0
    0.5774
    """
    counts, _ = confusion_matrix(pred, gold)
    counts = counts.astype(np.float64)
    t, p = counts.sum(axis=1), counts.sum(axis=0)  # (K,) gold counts, predicted counts
    c, s = np.trace(counts), counts.sum()
    denominator = math.sqrt((s * s - p @ p) * (s * s - t @ t))
    return float((c * s - t @ p) / denominator) if denominator > 0 else 0.0


# The full confusion matrix (and the rows of every class) is shown up to this many labels, what a
# person can read in a table or a picture; above it, the classes with the lowest F1 and the most
# confused pairs. The cost of a report is then linear in the label count (3,000 labels made a
# 3000x3000 matrix: an 81 MB dev_report.json and minutes of drawing).
FULL_MATRIX_LABELS = 50
CONFUSED_PAIRS = 20  # the most confused (gold, predicted) pairs a report keeps
WORST_CLASSES = 20  # the classes of lowest F1 shown by a report of more than FULL_MATRIX_LABELS labels


class ClassReport(NamedTuple):
    """Per-class scores of a classifier: what `evaluate` prints and a run's model card shows."""
    labels: list  # the K class names, in label-id order
    precision: list[float]  # (K,) of the predictions of class k, the share that are k (0 if none predicted)
    recall: list[float]  # (K,) of the gold examples of class k, the share predicted k (0 if none)
    f1: list[float]  # (K,) 2PR / (P + R) per class, as 2·tp / (2·tp + fp + fn)
    support: list[int]  # (K,) gold examples of each class
    confusion: list[list[int]] | None  # (K, K) rows = gold class, columns = predicted; None above FULL_MATRIX_LABELS
    macro_f1: float  # the mean of the K F1s: every class counts the same, however rare
    # the most frequent mistakes, most first: {"gold": label, "predicted": label, "count": n} (CONFUSED_PAIRS)
    confused: list = []

    def worst(self, n: int = WORST_CLASSES) -> list[int]:
        """The ids of the `n` classes of lowest F1 (of those with gold examples first; ties: more support)."""
        return sorted(range(len(self.labels)), key=lambda k: (self.support[k] == 0, self.f1[k], -self.support[k], k))[:n]

    def table(self) -> str:
        """The report as text: one row a class, then macro-F1, then the confusion matrix (above
        FULL_MATRIX_LABELS labels: the classes of lowest F1, then the most confused pairs). Labels
        are shown escaped (io/escape.one_line): a label never breaks a row."""
        names = [one_line(str(label), 60) for label in self.labels]
        full = self.confusion is not None
        shown = range(len(names)) if full else self.worst()
        width = max(8, *(len(names[k]) for k in shown))
        rows = [] if full else [f"{len(names):,} classes: the {len(shown)} of lowest F1 (every class in --out's JSON)"]
        rows.append(f"{'class':<{width}}  precision  recall     f1  support")
        for k in shown:
            rows.append(f"{names[k]:<{width}}  {self.precision[k]:9.3f}  {self.recall[k]:6.3f}  "
                        f"{self.f1[k]:5.3f}  {self.support[k]:7d}")
        rows.append(f"{'macro-F1':<{width}}  {'':9}  {'':6}  {self.macro_f1:5.3f}  {sum(self.support):7d}")
        if not full:
            rows += ["", f"the most confused pairs (gold -> predicted: count), of {len(names):,} classes"]
            rows += [f"{one_line(str(c['gold']), 60)} -> {one_line(str(c['predicted']), 60)}: {c['count']}"
                     for c in self.confused] or ["(none: every prediction is right)"]
            return "\n".join(rows)
        cell = max(5, *(len(n) for n in names), *(len(str(n)) for r in self.confusion for n in r))
        rows += ["", "confusion matrix (rows: gold, columns: predicted)",
                 " " * width + "  " + "  ".join(f"{name:>{cell}}" for name in names)]
        for name, counts in zip(names, self.confusion):
            rows.append(f"{name:<{width}}  " + "  ".join(f"{n:>{cell}d}" for n in counts))
        return "\n".join(rows)


def class_report(pred, gold, labels) -> ClassReport:
    """Per-class precision, recall, F1 and support, macro-F1, the confusion matrix (up to
    FULL_MATRIX_LABELS labels) and the most confused pairs of label ids `pred` against `gold`
    (0..K-1, K = len(labels)); every class of `labels` has its row, even one that never occurs
    (its scores 0, as scikit-learn's zero_division=0). Time and memory grow with N + K, never K².

    >>> r = class_report([0, 1, 1, 1], [0, 0, 1, 1], ["neg", "pos"])
    >>> r.precision, r.recall, r.support, r.confusion
    ([1.0, 0.6666666666666666], [0.5, 1.0], [2, 2], [[1, 1], [0, 2]])
    >>> round(r.macro_f1, 4), r.confused                   # (2/3 + 4/5) / 2; one neg taken for pos
    (0.7333, [{'gold': 'neg', 'predicted': 'pos', 'count': 1}])
    """
    pred, gold = _pair(pred, gold, "class_report")
    k = len(labels)
    if k == 0 or pred.min() < 0 or gold.min() < 0 or max(pred.max(), gold.max()) >= k:
        raise ValueError(f"class_report: label ids must be in 0..{k - 1} for the {k} labels {list(labels)[:10]}")
    pred, gold = pred.astype(np.int64), gold.astype(np.int64)
    cells, counts = np.unique(gold * k + pred, return_counts=True)  # (C,) the cells that occur, C <= N
    g, p = np.divmod(cells, k)  # (C,), (C,)
    tp = np.bincount(gold[gold == pred], minlength=k)  # (K,)
    predicted, support = np.bincount(pred, minlength=k), np.bincount(gold, minlength=k)  # (K,), (K,)
    precision = [float(tp[c] / predicted[c]) if predicted[c] else 0.0 for c in range(k)]
    recall = [float(tp[c] / support[c]) if support[c] else 0.0 for c in range(k)]
    f1 = [_f1(int(tp[c]), int(predicted[c] - tp[c]), int(support[c] - tp[c])) for c in range(k)]
    confusion = None
    if k <= FULL_MATRIX_LABELS:
        dense = np.zeros((k, k), dtype=np.int64)  # (K, K)
        dense[g, p] = counts
        confusion = dense.tolist()
    off = np.flatnonzero(g != p)  # the mistakes
    top = off[np.lexsort((cells[off], -counts[off]))][:CONFUSED_PAIRS]  # most first; ties by (gold, predicted)
    confused = [{"gold": labels[int(g[i])], "predicted": labels[int(p[i])], "count": int(counts[i])} for i in top]
    return ClassReport(list(labels), precision, recall, f1, support.tolist(), confusion, float(np.mean(f1)),
                       confused)


class PRCurve(NamedTuple):
    """Precision and recall of "positive when its probability is at least t", for every threshold
    t that changes a prediction (each distinct score, highest first)."""
    thresholds: np.ndarray  # (M,) descending
    precision: np.ndarray  # (M,)
    recall: np.ndarray  # (M,)

    @property
    def f1(self) -> np.ndarray:
        pr = self.precision + self.recall  # (M,)
        return np.where(pr > 0, 2 * self.precision * self.recall / np.where(pr > 0, pr, 1), 0.0)

    def best_f1(self) -> int:
        """The index of the threshold whose F1 is highest (the highest such threshold on a tie)."""
        return int(np.argmax(self.f1))


def pr_curve(scores, positive) -> PRCurve:
    """The precision-recall curve of `scores` (each example's probability of the positive label)
    against `positive` (whether its gold label is the positive one). Tied scores share their
    threshold: all of them are predicted positive together.

    >>> c = pr_curve([0.9, 0.8, 0.7, 0.6, 0.4], [1, 1, 0, 1, 0])
    >>> c.thresholds.tolist(), c.precision.tolist(), c.recall.tolist()[:3]
    ([0.9, 0.8, 0.7, 0.6, 0.4], [1.0, 1.0, 0.6666666666666666, 0.75, 0.6], [0.3333333333333333, 0.6666666666666666, 0.6666666666666666])
    >>> float(c.thresholds[c.best_f1()])                # p >= 0.6: P 3/4, R 1, F1 6/7
    0.6
    """
    scores, positive = _pair(scores, positive, "pr_curve")
    scores, positive = scores.astype(np.float64), positive.astype(bool)
    if not np.all(np.isfinite(scores)):
        raise ValueError("pr_curve: the scores must be finite probabilities")
    order = np.argsort(-scores, kind="stable")  # (N,) highest first
    s, hit = scores[order], positive[order]  # (N,)
    last = np.r_[s[1:] != s[:-1], True]  # (N,) the last of each group of equal scores
    tp = np.cumsum(hit)[last]  # (M,) positives predicted positive at each threshold
    predicted = (np.arange(1, len(s) + 1))[last]  # (M,)
    n_positive = int(positive.sum())
    recall = tp / n_positive if n_positive else np.zeros(len(tp))
    return PRCurve(s[last], tp / predicted, recall)


def macro_f1(pred, gold) -> float:
    """The mean of the per-class F1 over the classes in `pred` or `gold`.

    >>> round(macro_f1([0, 1, 1, 1], [0, 0, 1, 1]), 4)
    0.7333
    """
    pred, gold = _pair(pred, gold, "macro_f1")
    classes = sorted(set(pred.tolist()) | set(gold.tolist()))
    f1 = [_f1(int(np.sum((pred == c) & (gold == c))), int(np.sum((pred == c) & (gold != c))),
              int(np.sum((pred != c) & (gold == c)))) for c in classes]
    return float(np.mean(f1))


# ---------------------------------------------------------------------------------------------
# Regression (STS-B)

def pearson(x, y) -> float:
    """Pearson correlation: cov(x, y) / (std(x)·std(y)); NaN if either input is constant.

    >>> pearson([1, 2, 3], [2, 4, 7])            # the means are 2 and 13/3
    0.9933992677987828
    """
    x, y = _pair(x, y, "pearson")
    dx = x.astype(np.float64) - x.mean()  # (N,)
    dy = y.astype(np.float64) - y.mean()  # (N,)
    denominator = math.sqrt(float(dx @ dx) * float(dy @ dy))
    return float(dx @ dy / denominator) if denominator > 0 else math.nan


def average_ranks(x) -> np.ndarray:
    """Ranks 1..N, tied values sharing the mean of their ranks (SciPy's rankdata 'average').

    >>> average_ranks([10, 20, 20, 5]).tolist()  # 5 -> 1, 10 -> 2, the two 20s share (3+4)/2
    [2.0, 3.5, 3.5, 1.0]
    """
    x = np.asarray(x)
    order = np.argsort(x, kind="stable")  # (N,)
    sorted_x = x[order]  # (N,)
    starts = np.flatnonzero(np.r_[True, sorted_x[1:] != sorted_x[:-1]])  # (G,) first of each tie group
    ends = np.r_[starts[1:], len(x)]  # (G,) one past the last
    group_rank = (starts + 1 + ends) / 2.0  # (G,) mean of ranks starts+1 .. ends
    ranks = np.empty(len(x), dtype=np.float64)  # (N,)
    ranks[order] = np.repeat(group_rank, ends - starts)
    return ranks


def spearman(x, y) -> float:
    """Spearman rank correlation: Pearson of the average ranks; NaN if either input is constant.

    >>> spearman([1, 2, 2, 3], [1, 3, 2, 4])     # ranks [1, 2.5, 2.5, 4] vs [1, 3, 2, 4]
    0.9486832980505138
    """
    x, y = _pair(x, y, "spearman")
    return pearson(average_ranks(x), average_ranks(y))


# ---------------------------------------------------------------------------------------------
# Entity-level scores for BIO tags (conlleval)

def _split_tag(tag: str) -> tuple[str, str]:
    """'B-person' -> ('B', 'person'); 'O' -> ('O', ''). Other schemes are a ValueError."""
    if tag == "O":
        return "O", ""
    if len(tag) > 2 and tag[0] in "BI" and tag[1] == "-":
        return tag[0], tag[2:]
    raise ValueError(f"tag {tag!r} is not BIO: expected O, B-TYPE or I-TYPE")


def entities(tags) -> set[tuple[str, int, int]]:
    """The entities of one tag sequence as (type, start, end), end exclusive, with conlleval's
    repair of broken BIO: an entity starts at every B-X, and also at an I-X that follows O or
    a tag of another type (so I-X is read as B-X there); an I-X after B-X or I-X continues it.

    >>> sorted(entities(["B-per", "I-per", "O", "I-loc", "I-loc", "B-loc", "I-org"]))
    [('loc', 3, 5), ('loc', 5, 6), ('org', 6, 7), ('per', 0, 2)]
    """
    found = set()
    start, current = None, ""  # the open entity's first index and type
    for i, tag in enumerate(list(tags) + ["O"]):  # a final O closes the last entity
        prefix, kind = _split_tag(tag)
        continues = prefix == "I" and start is not None and kind == current
        if start is not None and not continues:
            found.add((current, start, i))
            start = None
        if prefix != "O" and not continues:
            start, current = i, kind
    return found


def entity_scores(gold_seqs, pred_seqs) -> dict:
    """Entity-level precision, recall and F1, micro-averaged over all entities (conlleval).

    A predicted entity is correct only when its type, start and end all equal a gold entity's:
    a right type with a wrong span counts once as a false positive and once as a false negative.
    Returns {precision, recall, f1, accuracy (token level), gold, predicted, correct,
    per_type: {type: (precision, recall, f1, support = gold entities of that type)}}.

    >>> gold = [["B-per", "I-per", "O", "B-loc"]]
    >>> pred = [["B-per", "O", "O", "B-loc"]]                 # per span too short: wrong
    >>> s = entity_scores(gold, pred); s["precision"], s["recall"], s["per_type"]["loc"]
    (0.5, 0.5, (1.0, 1.0, 1.0, 1))
    """
    gold_seqs, pred_seqs = list(gold_seqs), list(pred_seqs)
    if len(gold_seqs) != len(pred_seqs):
        raise ValueError(f"entity_scores: {len(gold_seqs)} gold sequences but {len(pred_seqs)} predicted")
    gold_all, pred_all, same_tags, n_tags = set(), set(), 0, 0
    for s, (gold, pred) in enumerate(zip(gold_seqs, pred_seqs)):
        if len(gold) != len(pred):
            raise ValueError(f"entity_scores: sequence {s} has {len(gold)} gold tags but {len(pred)} predicted")
        gold_all |= {(s, *e) for e in entities(gold)}  # (sentence, type, start, end)
        pred_all |= {(s, *e) for e in entities(pred)}
        same_tags += sum(g == p for g, p in zip(gold, pred))
        n_tags += len(gold)
    scores = _prf(gold_all, pred_all)
    types = sorted({e[1] for e in gold_all | pred_all})
    per_type = {t: _prf({e for e in gold_all if e[1] == t}, {e for e in pred_all if e[1] == t})
                for t in types}
    return {"precision": scores["precision"], "recall": scores["recall"], "f1": scores["f1"],
            "accuracy": same_tags / n_tags if n_tags else 0.0,
            "gold": len(gold_all), "predicted": len(pred_all), "correct": scores["correct"],
            "per_type": {t: (v["precision"], v["recall"], v["f1"], v["gold"]) for t, v in per_type.items()}}


def _prf(gold: set, pred: set) -> dict:
    """Precision, recall, F1 of one set of predicted entities against the gold set (0 if empty)."""
    correct = len(gold & pred)
    precision = correct / len(pred) if pred else 0.0
    recall = correct / len(gold) if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "correct": correct, "gold": len(gold)}


def tag_counts(seqs) -> Counter:
    """How often each entity type occurs (gold support), e.g. for a data set summary.

    >>> tag_counts([["B-per", "I-per", "O", "B-loc"], ["B-per"]])
    Counter({'per': 2, 'loc': 1})
    """
    return Counter(kind for seq in seqs for kind, _, _ in entities(seq))
