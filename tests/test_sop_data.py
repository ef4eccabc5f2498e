"""ALBERT's sentence-order prediction (SOP) pairs from pretraining_data (sentence_order=True):
labels balanced, A and B always from one document, and swapped exactly when the label is 1.

Every token names where it comes from ("d{doc}s{segment}w{word}"), so an instance's unmasked
tokens say which document and which segments A and B were taken from."""
import random

import pytest

from minibert.data.pretraining_data import CLS, MASK, SEP, TrainingInstance, create_instances_from_document
from minibert.data.shards import build_pretraining_data, load_shards, read_meta


def traced_documents(n_docs, seed, seg_lo=1, seg_hi=9, words_hi=6):
    rng = random.Random(seed)
    return [[[f"d{d}s{s}w{w}" for w in range(rng.randint(1, words_hi))] for s in range(rng.randint(seg_lo, seg_hi))]
            for d in range(n_docs)]


def sop_instances(documents, seed, T=24, short_p=0.1, dupe=3):
    rng = random.Random(seed)
    vocab = [CLS, SEP, MASK] + [t for doc in documents for seg in doc for t in seg]
    out = []
    for _ in range(dupe):
        for i in range(len(documents)):
            out += create_instances_from_document(documents, i, T, short_p, 0.15, 5, vocab, rng, sentence_order=True)
    return out


def provenance(inst: TrainingInstance):
    """-> (documents of A, documents of B, segment indices of A, of B) from the unmasked tokens."""
    tokens = list(inst.tokens)
    for p, label in zip(inst.masked_lm_positions, inst.masked_lm_labels):
        tokens[p] = label  # undo the masking: labels are the original tokens
    sep = tokens.index(SEP)
    a, b = tokens[1:sep], tokens[sep + 1:-1]
    doc = lambda t: int(t[1:t.index("s")])  # noqa: E731
    seg = lambda t: int(t[t.index("s") + 1:t.index("w")])  # noqa: E731
    return {doc(t) for t in a}, {doc(t) for t in b}, [seg(t) for t in a], [seg(t) for t in b]


@pytest.fixture(scope="module")
def instances():
    return sop_instances(traced_documents(100, seed=1), seed=2, dupe=4)


def test_sop_labels_are_balanced(instances):
    n = len(instances)
    swapped = sum(inst.is_random_next for inst in instances)
    assert n > 300
    assert abs(swapped / n - 0.5) < 4 * (0.25 / n) ** 0.5  # a fair coin, within 4 standard deviations


def test_sop_segments_come_from_one_document(instances):
    for inst in instances:
        docs_a, docs_b, _, _ = provenance(inst)
        assert len(docs_a) == 1 and docs_a == docs_b, inst.tokens


def test_sop_order_is_swapped_exactly_when_the_label_says_so(instances):
    for inst in instances:
        _, _, segs_a, segs_b = provenance(inst)
        assert segs_a == sorted(segs_a) and segs_b == sorted(segs_b)  # each part reads in document order
        if inst.is_random_next:  # label 1: B is the earlier part
            assert max(segs_b) <= min(segs_a) and segs_b != segs_a, (segs_a, segs_b)
        else:  # label 0: A, then the segments that follow it
            assert max(segs_a) <= min(segs_b) and segs_a != segs_b, (segs_a, segs_b)
        # consecutive: no whole segment between the two parts, unless truncation (to T = 24) cut it
        first, second = (segs_b, segs_a) if inst.is_random_next else (segs_a, segs_b)
        assert min(second) - max(first) <= 1 or len(inst.tokens) == 24


def test_sop_segment_ids_and_specials(instances):
    for inst in instances:
        sep = len(provenance(inst)[2]) + 1  # [CLS] A [SEP]: masking may have put a random [SEP] elsewhere
        assert inst.tokens[0] == CLS and inst.tokens[sep] == SEP and inst.tokens[-1] == SEP  # never masked
        assert len(inst.tokens) <= 24
        assert inst.segment_ids == [0] * (sep + 1) + [1] * (len(inst.tokens) - sep - 1)


def test_sop_one_segment_documents_make_no_instances():
    docs = [[["d0s0w0", "d0s0w1"]], [["d1s0w0"]]]
    assert sop_instances(docs, seed=0) == []


def test_sop_long_segments_still_pair_within_the_document():
    """Every segment alone fills the sequence: a chunk still takes two segments and is truncated."""
    docs = traced_documents(6, seed=3, seg_lo=4, seg_hi=6, words_hi=1)
    docs = [[[f"d{d}s{s}w{w}" for w in range(30)] for s in range(len(doc))] for d, doc in enumerate(docs)]
    insts = sop_instances(docs, seed=4, T=16, short_p=0.0, dupe=1)
    assert len(insts) == sum(len(doc) // 2 for doc in docs)
    for inst in insts:
        docs_a, docs_b, _, _ = provenance(inst)
        assert docs_a == docs_b


def test_sop_flag_reaches_the_shards(tmp_path):
    from minibert.text.tokenizer import BertTokenizer

    words = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"]
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    rng = random.Random(0)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join("\n".join(" ".join(rng.choice(words) for _ in range(4)) for _ in range(5))
                                  for _ in range(8)) + "\n")
    out = tmp_path / "sop"
    build_pretraining_data([corpus], vocab, out, max_seq_length=16, max_predictions_per_seq=3, dupe_factor=2,
                           verbose=False, tokenizer=BertTokenizer(str(vocab)), sentence_order=True)
    assert read_meta(out)["flags"]["sentence_order"] is True
    labels = load_shards(out)["next_sentence_labels"]
    assert set(labels.tolist()) == {0, 1}
