"""RoBERTa's input packing in the pretraining-data generator (packing="full_sentences" and
"doc_sentences", docs/bert-notes.md §10.2): single-segment sequences of whole sentences, never
longer than the length, every sentence in order, DOC-SENTENCES inside one document,
FULL-SENTENCES with a [SEP] at every document boundary inside a sequence.

Every token names where it comes from ("d{doc}s{sentence}w{word}"), so a packed sequence says
which documents and sentences it holds."""
import random

import numpy as np
import pytest

from minibert.data.pretraining_data import (CLS, MASK, PACKINGS, SEP, create_packed_instances, create_training_instances,
                                       pack_documents)
from minibert.data.shards import build_pretraining_data, load_shards, read_meta

PACKED = ("full_sentences", "doc_sentences")


def traced_documents(n_docs, seed, sent_hi=7, words_hi=9):
    rng = random.Random(seed)
    return [[[f"d{d}s{s}w{w}" for w in range(rng.randint(1, words_hi))] for s in range(rng.randint(1, sent_hi))]
            for d in range(n_docs)]


def doc_of(token):
    return int(token[1:token.index("s")])


def sentence_of(token):
    return doc_of(token), int(token[token.index("s") + 1:token.index("w")])


def test_pack_documents_hand_example():
    docs = [[["a", "b"], ["c", "d"]], [["e", "f"], ["g"]]]
    assert pack_documents(docs, 7, "full_sentences") == [["a", "b", "c", "d", SEP, "e", "f"], ["g"]]
    assert pack_documents(docs, 7, "doc_sentences") == [["a", "b", "c", "d"], ["e", "f", "g"]]
    # a document that starts a sequence needs no separator; one too long for a sequence is cut
    long = [[["a", "b", "c"]], [["d"] * 5]]
    assert pack_documents(long, 3, "full_sentences") == [["a", "b", "c"], ["d"] * 3, ["d"] * 2]


@pytest.mark.parametrize("max_tokens", [3, 8, 30])
@pytest.mark.parametrize("packing", PACKED)
def test_packed_sequences_never_exceed_the_length(packing, max_tokens):
    seqs = pack_documents(traced_documents(40, seed=max_tokens), max_tokens, packing)
    assert seqs and all(1 <= len(s) <= max_tokens for s in seqs)


@pytest.mark.parametrize("max_tokens", [3, 8, 30])
@pytest.mark.parametrize("packing", PACKED)
def test_every_sentence_appears_in_order(packing, max_tokens):
    """Without the separators the sequences are the corpus, token for token; a sentence is split
    across sequences only when it is longer than a whole one."""
    docs = traced_documents(40, seed=max_tokens + 1)
    seqs = pack_documents(docs, max_tokens, packing)
    stream = [t for s in seqs for t in s if t != SEP]
    assert stream == [t for doc in docs for sent in doc for t in sent]
    for a, b in zip(seqs, seqs[1:]):
        if sentence_of(a[-1]) == sentence_of(b[0]):  # a sentence continues in the next sequence
            d, s = sentence_of(b[0])
            assert len(docs[d][s]) > max_tokens


@pytest.mark.parametrize("max_tokens", [3, 8, 30])
def test_doc_sentences_never_cross_a_document(max_tokens):
    docs = traced_documents(40, seed=max_tokens + 2)
    seqs = pack_documents(docs, max_tokens, "doc_sentences")
    assert all(len({doc_of(t) for t in s}) == 1 for s in seqs) and not any(SEP in s for s in seqs)
    # only a document's last sequence may be short: any other one closed because the next sentence did not fit
    for a, b in zip(seqs, seqs[1:]):
        if doc_of(a[-1]) == doc_of(b[0]) and sentence_of(a[-1]) != sentence_of(b[0]):
            d, s = sentence_of(b[0])
            assert len(a) + len(docs[d][s]) > max_tokens


@pytest.mark.parametrize("max_tokens", [3, 8, 30])
def test_full_sentences_marks_document_boundaries_with_the_separator(max_tokens):
    docs = traced_documents(40, seed=max_tokens + 3)
    seqs = pack_documents(docs, max_tokens, "full_sentences")
    crossings = 0
    for s in seqs:
        assert s[0] != SEP and s[-1] != SEP
        for i, t in enumerate(s):
            if t == SEP:  # between the last token of one document and the first of the next
                crossings += 1
                assert doc_of(s[i + 1]) == doc_of(s[i - 1]) + 1
                assert s[i - 1] == docs[doc_of(s[i - 1])][-1][-1] and s[i + 1] == docs[doc_of(s[i + 1])][0][0]
            elif i and s[i - 1] != SEP:
                assert doc_of(t) == doc_of(s[i - 1])  # no other document change inside a sequence
    assert crossings > 0 or max_tokens == 3
    # sequences fill up: one closes only when the next sentence (and its separator) does not fit
    for a, b in zip(seqs, seqs[1:]):
        if sentence_of(a[-1]) != sentence_of(b[0]):
            d, s = sentence_of(b[0])
            assert len(a) + (s == 0) + len(docs[d][s]) > max_tokens


@pytest.mark.parametrize("packing", PACKED)
def test_packed_instances_are_one_segment_without_pairs_and_never_mask_specials(packing):
    docs = traced_documents(30, seed=7)
    vocab = [CLS, SEP, MASK] + [t for doc in docs for sent in doc for t in sent]
    insts = create_packed_instances(docs, 16, packing, 0.15, 3, vocab, random.Random(0))
    for inst in insts:
        assert inst.tokens[0] == CLS and inst.tokens[-1] == SEP and len(inst.tokens) <= 16
        assert inst.segment_ids == [0] * len(inst.tokens) and inst.is_random_next is False
        assert all(label not in (CLS, SEP) for label in inst.masked_lm_labels)
        assert 1 <= len(inst.masked_lm_positions) <= 3


class _Tokenizer:
    """Whitespace tokens and a vocab of them: what create_training_instances reads."""

    def __init__(self, words):
        self.vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", CLS, SEP, MASK, *words])}

    def tokenize(self, line):
        return line.split()


def _write(path, docs):
    path.write_text("\n\n".join("\n".join(" ".join(s) for s in doc) for doc in docs) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("packing", PACKED)
def test_every_pass_packs_every_token_once(tmp_path, packing):
    docs = traced_documents(25, seed=11)
    corpus = _write(tmp_path / "c.txt", docs)
    tok = _Tokenizer([t for doc in docs for s in doc for t in s])
    insts = create_training_instances([corpus], tok, 20, 3, 0.1, 0.15, 4, random.Random(5), packing=packing)
    unmasked = []
    for inst in insts:
        tokens = list(inst.tokens)
        for p, label in zip(inst.masked_lm_positions, inst.masked_lm_labels):
            tokens[p] = label
        unmasked.append(tokens)
    corpus_tokens = sorted(t for doc in docs for s in doc for t in s)
    assert sorted(t for s in unmasked for t in s[1:-1] if t != SEP) == sorted(corpus_tokens * 3)  # 3 passes


def test_packing_flag_reaches_the_shards_and_the_default_meta_is_unchanged(tmp_path):
    docs = traced_documents(12, seed=3, words_hi=5)
    corpus = _write(tmp_path / "c.txt", docs)
    words = sorted({t for doc in docs for s in doc for t in s})
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(t + "\n" for t in ["[PAD]", "[UNK]", CLS, SEP, MASK, *words]), encoding="utf-8")
    kw = dict(max_seq_length=16, max_predictions_per_seq=3, dupe_factor=1, verbose=False)
    build_pretraining_data([corpus], vocab, tmp_path / "pairs", **kw)
    build_pretraining_data([corpus], vocab, tmp_path / "full", packing="full_sentences", **kw)
    assert "packing" not in read_meta(tmp_path / "pairs")["flags"]
    assert read_meta(tmp_path / "full")["flags"]["packing"] == "full_sentences"
    feats = load_shards(tmp_path / "full")
    assert not feats["segment_ids"].any() and not feats["next_sentence_labels"].any()
    sep = 3
    assert (feats["unmasked_input_ids"] == sep).sum(axis=1).max() >= 2  # a document boundary inside a sequence
    assert np.all(feats["input_mask"].sum(axis=1) <= 16)


@pytest.mark.parametrize("packing,sentence_order", [("pairs", False), ("full_sentences", True)])
def test_bad_packing_is_refused(tmp_path, packing, sentence_order):
    assert "segment_pair" in PACKINGS
    corpus = _write(tmp_path / "c.txt", traced_documents(3, seed=0))
    with pytest.raises(ValueError, match="packing"):
        create_training_instances([corpus], _Tokenizer([]), 16, 1, 0.1, 0.15, 3, random.Random(0), packing=packing,
                                  sentence_order=sentence_order)
