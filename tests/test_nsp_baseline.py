"""The word-overlap NSP baseline: its features on hand-made pairs, and that the classifier finds
the cue when it is there and not when it is not."""
from __future__ import annotations

import numpy as np
import pytest

from minibert.analysis.nsp_baseline import FEATURES, document_idf, nsp_overlap_baseline, overlap_features, token_sets

PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
SPECIAL = {PAD, UNK, CLS, SEP, MASK}


def _example(a: list[int], b: list[int], T: int = 12):
    ids = [CLS, *a, SEP, *b, SEP]
    seg = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    pad = T - len(ids)
    return ids + [PAD] * pad, seg + [0] * pad, [1] * len(ids) + [0] * pad


def _batch(examples, labels):
    ids, seg, mask = (np.array(x, dtype=np.int64) for x in zip(*examples))
    return {"input_ids": ids, "segment_ids": seg, "input_mask": mask,
            "next_sentence_labels": np.array(labels, dtype=np.int64)}


def test_token_sets_leave_out_specials_and_padding():
    b = _batch([_example([5, 6, MASK, 6], [6, 7, UNK])], [0])
    assert token_sets(b["input_ids"], b["segment_ids"], b["input_mask"], SPECIAL) == [({5, 6}, {6, 7})]


def test_overlap_features_by_hand():
    pairs = [({5, 6}, {6, 7, 8}), ({5}, {9})]
    idf = np.zeros(10)
    idf[[5, 6, 7, 8, 9]] = [1.0, 2.0, 3.0, 4.0, 0.5]
    f = overlap_features(pairs, idf)
    assert f.shape == (2, len(FEATURES))
    # pair 0 shares token 6: 1 of B's 3, 1 of A's 2; idf 2 of B's 9 and of A's 3
    np.testing.assert_allclose(f[0], [1 / 3, 1 / 2, 2 / 9, 2 / 3, 2.0, np.log(3), np.log(4)])
    np.testing.assert_allclose(f[1], [0, 0, 0, 0, 0, np.log(2), np.log(2)])


def test_document_idf_counts_each_example_once():
    idf = document_idf([({5, 6}, {6}), ({5}, {7})], vocab_size=8)
    np.testing.assert_allclose(idf[[5, 6, 7, 0]], np.log(3 / np.array([3, 2, 2, 1])))


def _topic_pairs(rng, n, share_words: bool):
    """IsNext pairs draw A and B from one small topic; random-next pairs from two topics."""
    examples, labels = [], []
    for _ in range(n):
        label = int(rng.integers(2))
        ta = int(rng.integers(40))
        tb = int(rng.integers(40)) if label else ta
        words = lambda t: (5 + 6 * t + rng.integers(6, size=5)).tolist()  # noqa: E731
        a, b = words(ta), words(tb)
        if not share_words:
            label = int(rng.integers(2))  # the label no longer depends on the words
        examples.append(_example(a, b, T=14))
        labels.append(label)
    return _batch(examples, labels)


@pytest.mark.parametrize("share_words", [True, False])
def test_baseline_finds_the_overlap_cue_only_when_it_exists(share_words):
    rng = np.random.default_rng(0)
    train, heldout = _topic_pairs(rng, 2000, share_words), _topic_pairs(rng, 600, share_words)
    r = nsp_overlap_baseline(train, heldout, vocab_size=5 + 6 * 40, special_ids=SPECIAL)
    assert (r.train_examples, r.heldout_examples) == (2000, 600)
    assert 0.5 <= r.heldout_majority < 0.56
    if share_words:
        assert r.heldout_acc > 0.95
    else:
        assert r.heldout_acc < 0.56
