"""Tests of minibert.data.pretraining_data: the original generator reproduced, invariants (docs/bert-notes.md §3.9),
statistics, pitfalls, dynamic masking, storage and the batch iterator."""
from __future__ import annotations

import json
import math
import random
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minibert.data import pretraining_data as pd
from minibert.data import shards
from minibert.data.pretraining_data import (CLS, MASK, SEP, TrainingInstance, create_masked_lm_predictions,
                                       create_training_instances, instances_to_features, num_predictions, remask,
                                       truncate_seq_pair)
from minibert.data.shards import BatchIterator

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["the", "cat", "sat", "on", "mat", "dog", "ran", "far", "away", "a", "big", "red", "sun",
         "un", "##aff", "##able", "play", "##ing", "##ed", "jump", "##s", "over", "moon", "and"]


class StandInTokenizer:
    """Whitespace split + greedy longest-match WordPiece: used only if minibert.text.tokenizer is absent."""

    def __init__(self, vocab: list[str], do_lower_case: bool = True):
        self.ids_to_tokens = list(vocab)
        self.vocab = {t: i for i, t in enumerate(vocab)}

    def tokenize(self, text: str) -> list[str]:
        out = []
        for word in text.lower().split():
            start, pieces = 0, []
            while start < len(word):
                end = len(word)
                while end > start:
                    piece = ("##" if start else "") + word[start:end]
                    if piece in self.vocab:
                        break
                    end -= 1
                if end == start:
                    pieces = ["[UNK]"]
                    break
                pieces.append(piece)
                start = end
            out.extend(pieces)
        return out

    def convert_tokens_to_ids(self, tokens):
        return [self.vocab[t] for t in tokens]


def make_tokenizer(words=WORDS):
    vocab = SPECIALS + list(words)
    try:
        from minibert.text.tokenizer import BertTokenizer
        return BertTokenizer(vocab)
    except Exception:  # the tokenizer module is not there yet (or broken): use the stand-in
        return StandInTokenizer(vocab)


@pytest.fixture(scope="module")
def tok():
    return make_tokenizer()


def sentence(rng: random.Random, lo=1, hi=8) -> str:
    plain = [w for w in WORDS if not w.startswith("##")]
    return " ".join(rng.choice(plain + ["unaffable", "playing", "jumps", "played"])
                    for _ in range(rng.randint(lo, hi)))


def write_corpus(path, n_docs, seg_lo, seg_hi, seed=0, words_hi=8):
    r = random.Random(seed)
    docs = ["\n".join(sentence(r, 1, words_hi) for _ in range(r.randint(seg_lo, seg_hi)))
            for _ in range(n_docs)]
    path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return path


def unmasked_tokens(inst: TrainingInstance) -> list[str]:
    tokens = list(inst.tokens)
    for p, label in zip(inst.masked_lm_positions, inst.masked_lm_labels):
        tokens[p] = label
    return tokens


def check_invariants(instances, max_seq_length, max_predictions_per_seq, masked_lm_prob):
    """Every invariant of docs/bert-notes.md §3.9 that holds per instance."""
    for inst in instances:
        toks = inst.tokens
        assert len(toks) <= max_seq_length
        assert toks[0] == CLS
        orig = unmasked_tokens(inst)
        assert orig.count(SEP) == 2 and orig[-1] == SEP
        sep = orig.index(SEP)
        assert sep >= 2 and len(orig) - sep - 1 >= 2  # len(A) >= 1, len(B) >= 1
        assert inst.segment_ids == [0] * (sep + 1) + [1] * (len(orig) - sep - 1)
        pos = inst.masked_lm_positions
        assert all(a < b for a, b in zip(pos, pos[1:]))  # strictly ascending
        assert len(pos) <= max_predictions_per_seq
        assert len(pos) <= num_predictions(len(toks), masked_lm_prob, max_predictions_per_seq)
        assert not any(orig[p] in (CLS, SEP) for p in pos)  # no special token masked
        assert toks[0] == CLS and toks[sep] == SEP and toks[-1] == SEP
        # labels equal the original tokens; unmasked positions are untouched
        assert [orig[p] for p in pos] == list(inst.masked_lm_labels)
        assert all(toks[i] == orig[i] for i in range(len(toks)) if i not in set(pos))


# ----------------------------------------------------------------------------------------------
# an independent, literal re-implementation of docs/bert-notes.md §3.3-§3.6, used to pin the RNG call order

def reference_instances(files, tokenizer, T, dupe, short_p, mlm_p, P, rng, wwm=False):
    """Returns (instances, chunk sizes); written from docs/bert-notes.md §3.4, not from the module."""
    docs = [[]]
    for f in files:
        with open(f, "rb") as fh:
            lines = fh.read().split(b"\n")
            if lines[-1] == b"":  # the text after the final newline is not a line
                lines.pop()
            for raw in lines:
                line = raw.decode("utf-8", errors="replace").strip()
                if line == "":
                    docs.append([])
                    continue
                t = tokenizer.tokenize(line)
                if len(t) > 0:
                    docs[-1].append(t)
    docs = [d for d in docs if len(d) > 0]
    rng.shuffle(docs)
    words = [t for t, _ in sorted(tokenizer.vocab.items(), key=lambda kv: kv[1])]
    out, sizes = [], []
    for _ in range(dupe):
        for di, doc in enumerate(docs):
            budget = T - 3
            target = budget
            if rng.random() < short_p:
                target = rng.randint(2, budget)
            chunk, length, i = [], 0, 0
            while i < len(doc):
                chunk.append(doc[i])
                length += len(doc[i])
                if (i == len(doc) - 1 or length >= target) and chunk:
                    a_end = rng.randint(1, len(chunk) - 1) if len(chunk) > 1 else 1
                    a = sum(chunk[:a_end], [])
                    if len(chunk) == 1:
                        rnd = True
                    else:
                        rnd = rng.random() < 0.5
                    if rnd:
                        other = di
                        for _try in range(10):
                            other = rng.randint(0, len(docs) - 1)
                            if other != di:
                                break
                        start = rng.randint(0, len(docs[other]) - 1)
                        b = []
                        for seg in docs[other][start:]:
                            b += seg
                            if len(b) >= target - len(a):
                                break
                        i = i - (len(chunk) - a_end)
                    else:
                        b = sum(chunk[a_end:], [])
                    while len(a) + len(b) > budget:
                        longer = a if len(a) > len(b) else b
                        if rng.random() < 0.5:
                            longer.pop(0)
                        else:
                            longer.pop(-1)
                    toks = ["[CLS]"] + a + ["[SEP]"] + b + ["[SEP]"]
                    segs = [0] * (len(a) + 2) + [1] * (len(b) + 1)
                    cands = []
                    for j, t in enumerate(toks):
                        if t in ("[CLS]", "[SEP]"):
                            continue
                        if wwm and cands and t[:2] == "##":
                            cands[-1] = cands[-1] + [j]
                        else:
                            cands.append([j])
                    rng.shuffle(cands)
                    n = min(P, max(1, int(round(len(toks) * mlm_p))))
                    new, picked, seen = list(toks), [], set()
                    for c in cands:
                        if len(picked) >= n:
                            break
                        if len(picked) + len(c) > n or seen.intersection(c):
                            continue
                        for j in c:
                            seen.add(j)
                            if rng.random() < 0.8:
                                new[j] = "[MASK]"
                            elif rng.random() < 0.5:
                                new[j] = toks[j]
                            else:
                                new[j] = words[rng.randint(0, len(words) - 1)]
                            picked.append(j)
                    picked.sort()
                    out.append(TrainingInstance(new, segs, rnd, picked, [toks[j] for j in picked]))
                    sizes.append(len(chunk))
                    chunk, length = [], 0
                i += 1
    order = list(range(len(out)))
    # the instance shuffle: shuffle a list of pairs so the chunk sizes follow their instances
    pairs = list(zip(out, sizes))
    rng.shuffle(pairs)
    return [p[0] for p in pairs], [p[1] for p in pairs]


# ----------------------------------------------------------------------------------------------
# counts and small pieces

@pytest.mark.parametrize("n,expected", [(128, 19), (10, 2), (30, 4), (50, 8), (5, 1), (70, 10),
                                        (3, 1), (200, 20)])
def test_num_predictions_round_half_to_even(n, expected):
    assert num_predictions(n, 0.15, 20) == expected


def test_masked_lm_predictions_count_and_specials():
    rng = random.Random(3)
    vocab = SPECIALS + WORDS
    for n in (5, 10, 30, 50, 128):
        tokens = [CLS] + ["cat"] * (n - 3) + [SEP] + ["dog"] + [SEP]
        tokens = tokens[:n - 1] + [SEP] if len(tokens) > n else tokens
        out, pos, labels = create_masked_lm_predictions(tokens, 0.15, 20, vocab, rng)
        assert len(pos) == num_predictions(len(tokens), 0.15, 20)
        assert all(tokens[p] not in (CLS, SEP) for p in pos)
        assert labels == [tokens[p] for p in pos]
        assert len(out) == len(tokens)


@given(st.integers(0, 60), st.integers(0, 60), st.integers(1, 80), st.integers(0, 2**32 - 1))
def test_truncate_seq_pair_equals_deleting_one_token_at_a_time(len_a, len_b, max_tokens, seed):
    """The counted version makes the original's decisions with the same random calls."""
    a, b = list(range(len_a)), list(range(100, 100 + len_b))
    a0, b0 = a[:], b[:]
    rng0, rng = random.Random(seed), random.Random(seed)
    while len(a0) + len(b0) > max_tokens:  # google-research/bert, token by token
        longer = a0 if len(a0) > len(b0) else b0
        if rng0.random() < 0.5:
            del longer[0]
        else:
            longer.pop()
    truncate_seq_pair(a, b, max_tokens, rng)
    assert (a, b) == (a0, b0)
    assert rng.getstate() == rng0.getstate()


def test_truncate_seq_pair_trims_longer_b_on_ties():
    class Coin:  # random() always 0.9: always delete the last token
        def random(self):
            return 0.9
    a, b = list("abcd"), list("wxyz")
    truncate_seq_pair(a, b, 6, Coin())
    assert a == list("abc") and b == list("wxy")  # B first on the tie, then A (longer), ...
    a, b = list("abcdef"), list("xy")
    truncate_seq_pair(a, b, 5, Coin())
    assert a == list("abc") and b == list("xy")
    a, b = list("abcdef"), list("xy")

    class Front:
        def random(self):
            return 0.1
    truncate_seq_pair(a, b, 5, Front())
    assert a == list("def")


def test_read_documents_as_tokens_blank_lines_and_crlf(tmp_path, tok):
    f1 = tmp_path / "a.txt"
    f1.write_bytes(b"the cat\r\nsat\n\n\n  \nthe dog ran\n")
    f2 = tmp_path / "b.txt"
    f2.write_bytes(b"a sun\n")
    docs = pd.read_documents_as_tokens([f1, f2], tok)
    assert docs[0] == [["the", "cat"], ["sat"]]
    assert docs[1][0] == ["the", "dog", "ran"]
    assert docs[1][1] == ["a", "sun"]  # files continue the same document list
    assert len(docs) == 2


def test_read_documents_as_tokens_stops_at_the_first_byte_that_is_not_utf8(tmp_path, tok):
    """A Latin-1 "café" used to lose its é silently ("caf"); now it is an error naming the line."""
    f = tmp_path / "corpus.txt"
    f.write_bytes("the cat\n\nthe dog ran\ncafé sun\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"corpus.txt line 4: invalid UTF-8 byte 0xe9 at column 4; "
                                         r"minibert reads text as UTF-8 \(convert with iconv"):
        pd.read_documents_as_tokens([f], tok)


def test_long_lines_warn_before_tokenizing_then_with_their_count(tmp_path, tok, monkeypatch):
    """A document on one line becomes one segment, cut to max_seq_length: say so as soon as the
    first such line is read (tokenizing megabytes takes a minute), and how many there were."""
    long = " ".join(["the cat sat"] * 1000)  # 11,999 characters
    assert len(long) > pd.LONG_LINE_CHARS
    f = tmp_path / "c.txt"
    f.write_text(f"the dog\nsat\n{long}\n\nthe sun\n{long} a\nran\n", encoding="utf-8")
    tokenize = tok.tokenize
    warned_before = []

    def watch(line):
        if len(line) > pd.LONG_LINE_CHARS:
            warned_before.append(len(caught))
        return tokenize(line)

    monkeypatch.setattr(tok, "tokenize", watch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        docs = pd.read_documents_as_tokens([f], tok)
    messages = [str(w.message) for w in caught if "characters" in str(w.message)]
    assert len(messages) == 2, messages
    assert messages[0].startswith(f"{f}:3 is a line of {len(long):,} characters: the corpus format is one "
                                  "sentence per line")
    assert messages[1].startswith(f"2 lines are longer than 10,000 characters, the first at {f}:3 "
                                  f"({len(long):,} characters)")
    assert warned_before == [1, 1]  # the first warning came before the first long line was tokenized
    assert [len(seg) for seg in docs[0]] == [2, 1, 3000]  # the data itself is unchanged
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pd.read_documents_as_tokens([write_corpus(tmp_path / "ok.txt", 3, 2, 3)], tok)
    assert not [w for w in caught if "characters" in str(w.message)]


# ----------------------------------------------------------------------------------------------
# exact reproduction (golden RNG order)

GOLDEN_CASES = [  # (T, dupe, short_p, mlm_p, P, wwm, seed)
    (32, 3, 0.1, 0.15, 5, False, 12345),
    (16, 2, 0.5, 0.15, 3, False, 1),
    (12, 2, 0.3, 0.3, 4, True, 7),
    (128, 2, 0.1, 0.15, 20, True, 12345),
]


@pytest.mark.parametrize("case", GOLDEN_CASES, ids=lambda c: f"T{c[0]}-wwm{int(c[5])}-seed{c[6]}")
def test_instances_equal_literal_reimplementation(tmp_path, tok, case):
    T, dupe, short_p, mlm_p, P, wwm, seed = case
    files = [write_corpus(tmp_path / "c1.txt", 6, 1, 9, seed=seed),
             write_corpus(tmp_path / "c2.txt", 3, 2, 5, seed=seed + 1)]
    got = create_training_instances(files, tok, T, dupe, short_p, mlm_p, P, random.Random(seed),
                                    do_whole_word_mask=wwm)
    want, _ = reference_instances(files, tok, T, dupe, short_p, mlm_p, P, random.Random(seed), wwm)
    assert len(got) > 10
    assert got == want
    check_invariants(got, T, P, mlm_p)


class LoggingRandom(random.Random):
    """Records the public calls the generator makes (the call order of docs/bert-notes.md §3.8)."""

    def __init__(self, seed):
        self.log = []
        super().__init__(seed)

    def getrandbits(self, k):  # defined so that randint keeps using getrandbits, as in Random
        return super().getrandbits(k)

    def random(self):
        self.log.append("random")
        return super().random()

    def randint(self, a, b):
        self.log.append(f"randint({a},{b})")
        return super().randint(a, b)

    def shuffle(self, x):
        self.log.append(f"shuffle({len(x)})")
        return super().shuffle(x)


def test_rng_call_order_hand_traced(tmp_path, tok):
    # two one-segment documents, no masking room to spare: every draw is forced by the rules of docs/bert-notes.md §3.6
    f = tmp_path / "c.txt"
    f.write_text("the cat\n\nthe dog\n", encoding="utf-8")
    rng = LoggingRandom(5)
    with pytest.warns(UserWarning, match="single segment"):
        insts = create_training_instances([f], tok, max_seq_length=8, dupe_factor=1,
                                          short_seq_prob=0.0, masked_lm_prob=0.15,
                                          max_predictions_per_seq=1, rng=rng)
    log = rng.log
    # documents shuffled; doc 0: short-seq draw; one-segment chunk -> no a_end, no NSP coin;
    # random document draw(s) until != 0 (2 docs: randint(0,1)), start randint(0,0);
    # A+B = 4 tokens <= 5 -> no truncation; candidates shuffled (4 of them); 1 prediction
    assert log[0] == "shuffle(2)"
    assert log[1] == "random"
    k = 2
    while log[k] == "randint(0,1)":
        k += 1
    assert 1 <= k - 2 <= 10
    assert log[k] == "randint(0,0)"
    assert log[k + 1] == "shuffle(4)"
    assert log[k + 2] == "random"  # the 80% draw of the one masked position
    assert log[-1] == "shuffle(2)"  # the instances
    assert len(insts) == 2 and all(i.is_random_next for i in insts)
    # the logging subclass draws exactly the numbers of a plain Random
    with pytest.warns(UserWarning):
        plain = create_training_instances([f], tok, 8, 1, 0.0, 0.15, 1, random.Random(5))
    assert plain == insts


# ----------------------------------------------------------------------------------------------
# invariants, hand-made and generated corpora

def test_invariants_hand_made_corpus(tmp_path, tok):
    f = write_corpus(tmp_path / "c.txt", 20, 1, 12, seed=3)
    for wwm in (False, True):
        insts = create_training_instances([f], tok, 24, 2, 0.2, 0.15, 4, random.Random(1), wwm)
        assert len(insts) > 50
        check_invariants(insts, 24, 4, 0.15)
        # long enough sequences get exactly num_to_predict (plenty of candidates, no WWM skips)
        if not wwm:
            assert all(len(i.masked_lm_positions) == num_predictions(len(i.tokens), 0.15, 4)
                       for i in insts)


def test_full_length_sequences_get_19_predictions(tmp_path, tok):
    f = write_corpus(tmp_path / "c.txt", 10, 30, 40, seed=4, words_hi=12)
    insts = create_training_instances([f], tok, 128, 1, 0.0, 0.15, 20, random.Random(2))
    full = [i for i in insts if len(i.tokens) == 128]
    assert full, "expected some full-length sequences"
    assert all(len(i.masked_lm_positions) == 19 for i in full)


corpus_strategy = st.lists(  # documents -> sentences -> words
    st.lists(st.lists(st.sampled_from(["the", "cat", "sat", "unaffable", "playing", "moon",
                                       "a", "jumps"]), min_size=0, max_size=9),
             min_size=1, max_size=7),
    min_size=1, max_size=6)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corpus=corpus_strategy, T=st.integers(5, 40), short_p=st.sampled_from([0.0, 0.1, 0.7]),
       mlm_p=st.sampled_from([0.15, 0.4]), P=st.integers(1, 8), wwm=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_invariants_and_exactness_hypothesis(tmp_path, tok, corpus, T, short_p, mlm_p, P, wwm, seed):
    text = "\n\n".join("\n".join(" ".join(s) for s in doc) for doc in corpus)
    f = tmp_path / "h.txt"
    f.write_text(text, encoding="utf-8")
    if not any(w for doc in corpus for s in doc for w in s):
        with pytest.raises(ValueError, match="no tokens"):
            create_training_instances([f], tok, T, 2, short_p, mlm_p, P, random.Random(seed), wwm)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = create_training_instances([f], tok, T, 2, short_p, mlm_p, P, random.Random(seed), wwm)
        want, _ = reference_instances([f], tok, T, 2, short_p, mlm_p, P, random.Random(seed), wwm)
    assert got == want
    check_invariants(got, T, P, mlm_p)
    feats = instances_to_features(got, tok, T, P)
    check_features(feats, got, tok, T, P)


def test_whole_word_masking_masks_whole_words(tmp_path, tok):
    f = tmp_path / "c.txt"
    r = random.Random(0)
    lines = [" ".join(r.choice(["unaffable", "playing", "jumps", "the", "cat", "played"])
                      for _ in range(6)) for _ in range(200)]
    f.write_text("\n".join(l + ("\n" if k % 5 == 4 else "") for k, l in enumerate(lines)),
                 encoding="utf-8")
    insts = create_training_instances([f], tok, 32, 2, 0.1, 0.15, 5, random.Random(3), True)
    multi_piece_masked = 0
    for inst in insts:
        orig = unmasked_tokens(inst)
        masked = set(inst.masked_lm_positions)
        words, cur = [], None  # the same grouping as docs/bert-notes.md §3.6: [CLS]/[SEP] skipped, ## glues
        for j, t in enumerate(orig):
            if t in (CLS, SEP):
                continue
            if t.startswith("##") and words:
                words[-1].append(j)
            else:
                words.append([j])
        for w in words:
            hit = [j in masked for j in w]
            assert all(hit) or not any(hit), f"partially masked word {[orig[j] for j in w]}"
            multi_piece_masked += len(w) > 1 and all(hit)
    assert multi_piece_masked > 20


# ----------------------------------------------------------------------------------------------
# statistics

def test_masking_follows_80_10_10(tmp_path, tok):
    f = write_corpus(tmp_path / "c.txt", 60, 3, 10, seed=9)
    insts = create_training_instances([f], tok, 64, 12, 0.1, 0.15, 10, random.Random(11))
    s = pd.generation_stats(insts, tok)
    n = s["predictions"]
    assert n > 6000
    V = len(tok.vocab)
    # a random replacement equals the original with probability ~1/V: it then counts as kept
    for share, p in ((s["share_mask"], 0.8), (s["share_random"], 0.1 - 0.1 / V),
                     (s["share_kept"], 0.1 + 0.1 / V)):
        se = math.sqrt(p * (1 - p) / n)
        assert abs(share - p) < 3 * se, (share, p, se)


def test_nsp_negatives_half_on_multi_segment_documents(tmp_path, tok):
    f = write_corpus(tmp_path / "c.txt", 60, 4, 12, seed=5)
    rng_seed = 21
    insts = create_training_instances([f], tok, 24, 10, 0.1, 0.15, 4, random.Random(rng_seed))
    ref, sizes = reference_instances([f], tok, 24, 10, 0.1, 0.15, 4, random.Random(rng_seed))
    assert insts == ref
    coin = [i.is_random_next for i, s in zip(insts, sizes) if s >= 2]
    forced = [i.is_random_next for i, s in zip(insts, sizes) if s == 1]
    assert all(forced)  # single-segment chunks are always negatives
    n = len(coin)
    assert n > 1000
    assert abs(np.mean(coin) - 0.5) < 3 * math.sqrt(0.25 / n)
    share = pd.generation_stats(insts, tok)["random_next_share"]
    assert 0.45 < share < 0.75


# ----------------------------------------------------------------------------------------------
# pitfalls

def test_blank_line_between_every_sentence_gives_only_negatives_and_warns(tmp_path, tok):
    f = tmp_path / "c.txt"
    r = random.Random(1)
    f.write_text("\n\n".join(sentence(r) for _ in range(30)) + "\n", encoding="utf-8")
    with pytest.warns(UserWarning, match="single segment"):
        insts = create_training_instances([f], tok, 32, 2, 0.1, 0.15, 5, random.Random(0))
    assert insts and all(i.is_random_next for i in insts)
    feats = instances_to_features(insts, tok, 32, 5)
    assert (feats["next_sentence_labels"] == 1).all()


def test_single_document_corpus_warns(tmp_path, tok):
    f = write_corpus(tmp_path / "c.txt", 1, 10, 10, seed=2)
    with pytest.warns(UserWarning, match="only 1 document"):
        insts = create_training_instances([f], tok, 32, 2, 0.1, 0.15, 5, random.Random(0))
    assert insts


def test_empty_corpus_is_an_error_naming_the_files(tmp_path, tok):
    f = tmp_path / "empty.txt"
    f.write_text("\n   \n\n", encoding="utf-8")
    with pytest.raises(ValueError, match="empty.txt"):
        create_training_instances([f], tok, 32, 2, 0.1, 0.15, 5, random.Random(0))
    with pytest.raises(ValueError, match="missing.txt"):
        create_training_instances([tmp_path / "missing.txt"], tok, 32, 2, 0.1, 0.15, 5,
                                  random.Random(0))


def test_bad_arguments_are_clear_errors(tmp_path, tok):
    f = write_corpus(tmp_path / "c.txt", 3, 2, 3)
    with pytest.raises(ValueError, match="max_seq_length=4"):
        create_training_instances([f], tok, 4, 1, 0.1, 0.15, 5, random.Random(0))
    with pytest.raises(ValueError, match="random.Random"):
        create_training_instances([f], tok, 32, 1, 0.1, 0.15, 5, np.random.default_rng(0))


# ----------------------------------------------------------------------------------------------
# features and storage

def check_features(feats, insts, tokenizer, T, P):
    N = len(insts)
    dtypes = {"masked_lm_weights": np.float32}
    for name in pd.FEATURE_NAMES:
        assert feats[name].dtype == dtypes.get(name, np.int32), name
    for name in ("input_ids", "input_mask", "segment_ids", pd.UNMASKED_NAME):
        assert feats[name].shape == (N, T)
    for name in ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights"):
        assert feats[name].shape == (N, P)
    assert feats["next_sentence_labels"].shape == (N,)
    for n, inst in enumerate(insts):
        L, k = len(inst.tokens), len(inst.masked_lm_positions)
        assert feats["input_ids"][n, :L].tolist() == tokenizer.convert_tokens_to_ids(inst.tokens)
        assert (feats["input_ids"][n, L:] == 0).all() and (feats["segment_ids"][n, L:] == 0).all()
        assert feats["input_mask"][n].tolist() == [1] * L + [0] * (T - L)
        assert feats["masked_lm_positions"][n].tolist() == list(inst.masked_lm_positions) + [0] * (P - k)
        assert feats["masked_lm_ids"][n].tolist() == \
            tokenizer.convert_tokens_to_ids(inst.masked_lm_labels) + [0] * (P - k)
        assert feats["masked_lm_weights"][n].tolist() == [1.0] * k + [0.0] * (P - k)
        assert feats["next_sentence_labels"][n] == int(inst.is_random_next)
        assert feats[pd.UNMASKED_NAME][n, :L].tolist() == \
            tokenizer.convert_tokens_to_ids(unmasked_tokens(inst))


@pytest.fixture()
def small_data(tmp_path, tok):
    f = write_corpus(tmp_path / "c.txt", 30, 2, 10, seed=8)
    insts = create_training_instances([f], tok, 24, 3, 0.1, 0.15, 4, random.Random(4))
    return insts, instances_to_features(insts, tok, 24, 4)


def test_features_padding_and_labels(small_data, tok):
    insts, feats = small_data
    check_features(feats, insts, tok, 24, 4)


def test_shards_round_trip_without_pickle(tmp_path, small_data, tok):
    _, feats = small_data
    meta = shards.write_shards(feats, tmp_path / "out", instances_per_shard=37,
                           meta={"vocab_sha256": shards.vocab_sha256(tok), "vocab_size": len(tok.vocab),
                                 "flags": {"masked_lm_prob": 0.15}})
    N = feats["input_ids"].shape[0]
    assert len(meta["shards"]) == math.ceil(N / 37)
    assert sum(s["num_instances"] for s in meta["shards"]) == N
    assert not list((tmp_path / "out").glob("*.tmp"))
    for s in meta["shards"]:  # every shard opens with allow_pickle=False
        with np.load(tmp_path / "out" / s["file"], allow_pickle=False) as z:
            assert set(z.files) == set(shards.ALL_NAMES)
    back = shards.load_shards(tmp_path / "out", vocab=tok)
    for name in shards.ALL_NAMES:
        assert back[name].dtype == feats[name].dtype
        np.testing.assert_array_equal(back[name], feats[name])
    assert json.loads((tmp_path / "out" / "meta.json").read_text())["num_instances"] == N


def test_shards_errors_missing_corrupt_vocab(tmp_path, small_data, tok):
    _, feats = small_data
    out = tmp_path / "out"
    shards.write_shards(feats, out, instances_per_shard=50,
                    meta={"vocab_sha256": shards.vocab_sha256(tok), "vocab_size": len(tok.vocab)})
    with pytest.raises(ValueError, match="vocab mismatch"):
        shards.load_shards(out, vocab=SPECIALS + ["x"])
    (out / "shard_00001.npz").write_bytes(b"not a zip file")
    with pytest.raises(ValueError, match="shard_00001.npz is corrupt"):
        shards.load_shards(out)
    (out / "shard_00001.npz").unlink()
    with pytest.raises(ValueError, match="shard_00001.npz.*missing"):
        shards.load_shards(out)
    with pytest.raises(ValueError, match="meta.json not found"):
        shards.load_shards(tmp_path)


def test_generation_stats_instances_equal_features(small_data, tok):
    insts, feats = small_data
    a, b = pd.generation_stats(insts, tok), pd.generation_stats(feats, tok)
    assert a == b
    assert a["instances"] == len(insts)
    assert a["tokens"] == sum(len(i.tokens) for i in insts)
    assert a["nsp_random_next"] == sum(i.is_random_next for i in insts)
    assert a["predictions"] == sum(len(i.masked_lm_positions) for i in insts)
    assert abs(a["share_mask"] + a["share_random"] + a["share_kept"] - 1) < 1e-12


# ----------------------------------------------------------------------------------------------
# dynamic masking

def remask_args(tok, P=4, prob=0.15):
    return dict(masked_lm_prob=prob, max_predictions_per_seq=P, vocab_size=len(tok.vocab),
                special_ids=[tok.vocab[CLS], tok.vocab[SEP]], mask_id=tok.vocab[MASK])


def test_remask_invariants(small_data, tok):
    _, feats = small_data
    out = remask(feats, np.random.default_rng(0), **remask_args(tok))
    un, mask = feats[pd.UNMASKED_NAME], feats["input_mask"]
    lengths = mask.sum(1)
    k = out["masked_lm_weights"].sum(1)
    special = np.isin(un, [tok.vocab[CLS], tok.vocab[SEP]])
    n_cand = ((mask > 0) & ~special).sum(1)
    want = [min(num_predictions(int(L), 0.15, 4), int(c)) for L, c in zip(lengths, n_cand)]
    assert k.astype(int).tolist() == want  # exact Google count per sequence
    pos, w = out["masked_lm_positions"], out["masked_lm_weights"] > 0
    for n in range(len(pos)):
        p = pos[n][w[n]]
        assert (np.diff(p) > 0).all() and (pos[n][~w[n]] == 0).all()
        assert not special[n, p].any() and (mask[n, p] == 1).all()  # never specials / padding
        np.testing.assert_array_equal(out["masked_lm_ids"][n][w[n]], un[n, p])
        rest = np.ones(un.shape[1], bool)
        rest[p] = False
        np.testing.assert_array_equal(out["input_ids"][n, rest], un[n, rest])
    for name in ("input_mask", "segment_ids", "next_sentence_labels"):  # the pairs are unchanged
        np.testing.assert_array_equal(out[name], feats[name])
    for name in pd.FEATURE_NAMES:
        assert out[name].dtype == feats[name].dtype and out[name].shape == feats[name].shape


def test_remask_new_masks_each_epoch_and_deterministic(small_data, tok):
    _, feats = small_data
    a = remask(feats, 1, **remask_args(tok))
    b = remask(feats, 1, **remask_args(tok))
    c = remask(feats, 2, **remask_args(tok))
    np.testing.assert_array_equal(a["masked_lm_positions"], b["masked_lm_positions"])
    np.testing.assert_array_equal(a["input_ids"], b["input_ids"])
    assert (a["masked_lm_positions"] != c["masked_lm_positions"]).any(axis=1).mean() > 0.5


def test_remask_80_10_10_shares(small_data, tok):
    _, feats = small_data
    big = {k: np.tile(v, (20,) + (1,) * (v.ndim - 1)) for k, v in feats.items()}
    out = remask(big, np.random.default_rng(3), **remask_args(tok))
    s = pd.generation_stats(out, tok)
    n, V = s["predictions"], len(tok.vocab)
    assert n > 10000
    for share, p in ((s["share_mask"], 0.8), (s["share_random"], 0.1 - 0.1 / V),
                     (s["share_kept"], 0.1 + 0.1 / V)):
        assert abs(share - p) < 3 * math.sqrt(p * (1 - p) / n), (share, p)


def test_remask_max_predictions_above_seq_length(tok):
    un = np.array([[2, 10, 11, 3, 12, 3, 0, 0]], dtype=np.int32)
    feats = {pd.UNMASKED_NAME: un, "input_mask": (un > 0).astype(np.int32),
             "segment_ids": np.zeros_like(un), "next_sentence_labels": np.zeros(1, np.int32)}
    out = remask(feats, 0, **remask_args(tok, P=12, prob=0.9))
    assert out["masked_lm_positions"].shape == (1, 12)
    assert sorted(out["masked_lm_positions"][0][:3].tolist()) == [1, 2, 4]  # all 3 candidates
    assert out["masked_lm_weights"].sum() == 3


# ----------------------------------------------------------------------------------------------
# batch iterator

def indexed_features(N=103, T=8, P=2):
    """Features whose input_ids[:, 1] is the example index, to track order."""
    ids = np.full((N, T), 20, dtype=np.int32)
    ids[:, 0], ids[:, 1], ids[:, -1] = 2, np.arange(N) + 100, 3
    ids[:, 4] = 3
    feats = {"input_ids": ids, "input_mask": np.ones((N, T), np.int32),
             "segment_ids": np.zeros((N, T), np.int32),
             "masked_lm_positions": np.tile(np.array([1, 2], np.int32), (N, 1))[:, :P],
             "masked_lm_ids": ids[:, 1:3].copy(), "masked_lm_weights": np.ones((N, P), np.float32),
             "next_sentence_labels": (np.arange(N) % 2).astype(np.int32),
             pd.UNMASKED_NAME: ids.copy()}
    return feats


def example_ids(batch):
    return (batch["input_ids"][:, 1] - 100).tolist()


def test_batch_iterator_epochs_cover_everything_once_and_deterministic():
    feats = indexed_features()
    it1, it2 = BatchIterator(feats, 10, seed=5), BatchIterator(feats, 10, seed=5)
    assert it1.batches_per_epoch == 10
    e0 = [i for _ in range(10) for i in example_ids(it1.next_batch())]
    assert len(set(e0)) == 100 and it1.epoch == 0
    e1 = [i for _ in range(10) for i in example_ids(it1.next_batch())]
    assert it1.epoch == 1 and e0 != e1
    both = [i for _ in range(20) for i in example_ids(it2.next_batch())]
    assert both == e0 + e1
    it3 = BatchIterator(feats, 10, seed=6)
    assert [i for _ in range(10) for i in example_ids(it3.next_batch())] != e0
    it4 = BatchIterator(feats, 10, seed=5, drop_remainder=False)
    sizes = [len(it4.next_batch()["input_ids"]) for _ in range(11)]
    assert sizes == [10] * 10 + [3] and it4.batches_per_epoch == 11


@pytest.mark.parametrize("masking", ["static", "dynamic"])
def test_batch_iterator_resume_mid_epoch_equals_uninterrupted(tmp_path, masking):
    feats = indexed_features()
    shards.write_shards(feats, tmp_path / "d", instances_per_shard=30,
                    meta={"vocab_size": 30, "special_ids": {CLS: 2, SEP: 3, MASK: 4},
                          "flags": {"masked_lm_prob": 0.15}})
    ref = BatchIterator(tmp_path / "d", 7, seed=3, masking=masking)
    want = [ref.next_batch() for _ in range(40)]
    it = BatchIterator(tmp_path / "d", 7, seed=3, masking=masking)
    got = [it.next_batch() for _ in range(17)]
    state = json.loads(json.dumps(it.state_dict()))
    it2 = BatchIterator(tmp_path / "d", 7, seed=3, masking=masking)
    it2.load_state_dict(state)
    got += [it2.next_batch() for _ in range(23)]
    for g, w in zip(got, want):
        assert set(g) == set(pd.FEATURE_NAMES)
        for name in pd.FEATURE_NAMES:
            np.testing.assert_array_equal(g[name], w[name])
    assert len(it2._cache) <= 2  # never more than two shards in memory
    # epoch 0 covers 14 full batches of 7 = 98 distinct examples across the 4 shards
    ids = [i for b in want[:14] for i in example_ids(b) if masking == "static"]
    assert masking == "dynamic" or len(set(ids)) == 98


def test_batch_iterator_dynamic_masks_change_per_epoch():
    N = 20
    feats = indexed_features(N=N, T=16, P=3)
    feats["input_ids"][:, 5:15] = np.arange(10) + 10
    feats[pd.UNMASKED_NAME] = feats["input_ids"].copy()
    # the example-id tokens (100 + n at position 1) are declared special, so never masked
    it = BatchIterator(feats, N, seed=0, masking="dynamic", max_predictions_per_seq=3,
                       vocab_size=30, mask_id=4, special_ids=[2, 3, *range(100, 100 + N)])
    b0, b1 = it.next_batch(), it.next_batch()
    assert it.epoch == 1
    assert sorted(example_ids(b0)) == sorted(example_ids(b1)) == list(range(N))
    m0 = {i: tuple(p) for i, p in zip(example_ids(b0), b0["masked_lm_positions"])}
    m1 = {i: tuple(p) for i, p in zip(example_ids(b1), b1["masked_lm_positions"])}
    assert sum(m0[i] != m1[i] for i in range(N)) > N // 2  # new masks in the new epoch
    assert (b0["masked_lm_weights"].sum(1) == num_predictions(16, 0.15, 3)).all()
    real = b0["masked_lm_positions"][b0["masked_lm_weights"] > 0]
    assert not np.isin(real, [0, 1, 4, 15]).any()  # specials untouched


def test_batch_iterator_state_mismatch_and_bad_args():
    feats = indexed_features()
    it = BatchIterator(feats, 10, seed=1)
    state = it.state_dict()
    with pytest.raises(ValueError, match="seed"):
        BatchIterator(feats, 10, seed=2).load_state_dict(state)
    with pytest.raises(ValueError, match="masking"):
        BatchIterator(feats, 10, seed=1, masking="sometimes")
    with pytest.raises(ValueError, match="cannot fill one batch"):
        BatchIterator(feats, 1000, seed=1)


# ----------------------------------------------------------------------------------------------
# end to end

def test_build_pretraining_data_and_cli(tmp_path, tok, capsys):
    f = write_corpus(tmp_path / "c.txt", 12, 2, 8, seed=1)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(SPECIALS + WORDS) + "\n", encoding="utf-8")
    meta = shards.build_pretraining_data([f], vocab, tmp_path / "out", max_seq_length=32,
                                     max_predictions_per_seq=5, dupe_factor=2, tokenizer=tok)
    assert meta["flags"]["dupe_factor"] == 2 and meta["vocab_size"] == len(SPECIALS + WORDS)
    assert meta["vocab_sha256"] == shards.vocab_sha256(vocab)
    out = capsys.readouterr()
    assert "instances" in out.out and "data: 24/24 documents" in out.err
    feats = shards.load_shards(tmp_path / "out", vocab=vocab)
    again = instances_to_features(
        create_training_instances([f], tok, 32, 2, 0.1, 0.15, 5, random.Random(12345)), tok, 32, 5)
    for name in shards.ALL_NAMES:
        np.testing.assert_array_equal(feats[name], again[name])
    it = BatchIterator(tmp_path / "out", 4, seed=0, masking="dynamic")
    assert it.next_batch()["input_ids"].shape == (4, 32)
    try:
        from minibert.text.tokenizer import BertTokenizer  # noqa: F401
    except Exception:
        return
    rc = shards.cli(["--corpus", str(f), "--vocab", str(vocab), "--out", str(tmp_path / "cli"),
                 "--max-seq-length", "32", "--max-predictions-per-seq", "5", "--dupe-factor", "2"])
    assert rc == 0
    cli_feats = shards.load_shards(tmp_path / "cli")
    np.testing.assert_array_equal(cli_feats["input_ids"], again["input_ids"])
    assert shards.cli(["--corpus", str(tmp_path / "nope.txt"), "--vocab", str(vocab),
                   "--out", str(tmp_path / "x")]) == 1


def test_vocab_without_special_tokens_fails_before_generation(tmp_path, capsys):
    """It used to be a KeyError for '[MASK]' after the whole corpus was tokenized."""
    f = write_corpus(tmp_path / "c.txt", 4, 2, 4, seed=1)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[SEP]"] + WORDS) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"vocab file .*vocab.txt lacks the special token\(s\) "
                                         r"\[CLS\] \[MASK\]; pretraining data needs"):
        shards.build_pretraining_data([f], vocab, tmp_path / "out", verbose=False)
    assert not (tmp_path / "out").exists()
    assert shards.cli(["--corpus", str(f), "--vocab", str(vocab), "--out", str(tmp_path / "out")]) == 1
    assert "lacks the special token(s) [CLS] [MASK]" in capsys.readouterr().err
    from minibert.text.tokenizer import BertTokenizer

    no_specials = BertTokenizer(["[PAD]", "[UNK]", "[SEP]"] + WORDS)
    with pytest.raises(ValueError, match=r"vocab list lacks the special token\(s\) \[CLS\] "
                                         r"\[MASK\]; creating MLM/NSP instances needs"):
        create_training_instances([f], no_specials, 32, 1, 0.1, 0.15, 5, random.Random(0))


def test_bench_data_fills_report():
    from minibert.tools.bench_data import bench_data
    report = {}
    out = bench_data(report, runs=1, max_lines=300, max_seq_length=32, max_predictions_per_seq=5,
                     dupe_factor=1, batch_size=4, n_batches=5)
    assert report["data"] is out
    for key in ("generation_tokens_per_s", "batch_static_tokens_per_s", "batch_dynamic_tokens_per_s"):
        assert out[key] > 0
