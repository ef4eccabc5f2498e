"""The dev split of one file: each label keeps its share in both halves, the same seed gives the
same split (and another seed another), nothing is lost or doubled, and a label too rare to split
is named."""
from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minibert.taskdata.split import stratified_split


def test_each_label_keeps_its_share_in_dev():
    labels = ["ham"] * 870 + ["spam"] * 130
    train, dev = stratified_split(labels, 0.2, seed=0)
    assert Counter(labels[i] for i in dev) == {"ham": 174, "spam": 26}
    assert Counter(labels[i] for i in train) == {"ham": 696, "spam": 104}
    assert sorted(train + dev) == list(range(1000)) and train == sorted(train) and dev == sorted(dev)


def test_the_same_seed_gives_the_same_split_and_another_seed_another():
    labels = [("a", "b", "c")[i % 3] for i in range(300)]
    assert stratified_split(labels, 0.25, seed=7) == stratified_split(list(labels), 0.25, seed=7)
    assert stratified_split(labels, 0.25, seed=7)[1] != stratified_split(labels, 0.25, seed=8)[1]


def test_a_label_s_split_does_not_depend_on_the_other_labels():
    base = ["x", "y"] * 50
    more = base + ["z"] * 10  # a new label at the end: x's and y's examples go where they went
    assert stratified_split(more, 0.2, seed=3)[1][:20] == stratified_split(base, 0.2, seed=3)[1]


def test_a_label_too_rare_to_split_is_named():
    with pytest.raises(ValueError, match=r"too few examples of 'fraud' \(1 example\), 'other' \(1 example\) to put "
                                         r"one in both training and dev"):
        stratified_split(["ok"] * 20 + ["fraud", "other"], 0.2, seed=0)
    for bad in (0, 1, -0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="--dev-split"):
            stratified_split(["a", "b"] * 5, bad, seed=0)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from("abcd"), min_size=2, max_size=200), st.floats(0.05, 0.95), st.integers(0, 2**31))
def test_every_label_is_in_both_halves_near_its_share(labels, fraction, seed):
    counts = Counter(labels)
    if min(counts.values()) < 2:
        with pytest.raises(ValueError, match="too few examples of"):
            stratified_split(labels, fraction, seed)
        return
    train, dev = stratified_split(labels, fraction, seed)
    assert sorted(train + dev) == list(range(len(labels)))
    in_dev = Counter(labels[i] for i in dev)
    for label, n in counts.items():
        assert 1 <= in_dev[label] <= n - 1
        assert abs(in_dev[label] - n * fraction) <= max(1, 0.5 + 1e-9) or in_dev[label] in (1, n - 1)
