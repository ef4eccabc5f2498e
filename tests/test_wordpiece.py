"""WordPiece trainer tests: docs/bert-notes.md §2.2 toy example and course example, both merge rules,
fast == naive, determinism, vocab_size bound, bad input."""
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minibert.text import wordpiece_trainer as W
from minibert.text.tokenizer import SPECIAL_TOKENS, BertTokenizer, basic_tokenize
from minibert.text.wordpiece_trainer import train_from_word_counts, train_naive, train_wordpiece

TOY = {"hug": 10, "pug": 5, "pun": 12, "bun": 4, "hugs": 5}
N_SPECIAL = len(SPECIAL_TOKENS)

COURSE_CORPUS = [
    "This is the Hugging Face Course.",
    "This chapter is about tokenization.",
    "This section shows several tokenizer algorithms.",
    "Hopefully, you will be able to understand how they are trained and generate tokens.",
]
COURSE_LEARNED = ("ab ##fu Fa Fac ##ct ##ful ##full ##fully Th ch ##hm cha chap chapt ##thm "
                  "Hu Hug Hugg sh th is ##thms ##za ##zat ##ut").split()


def _course_counts():
    counts = {}
    for line in COURSE_CORPUS:
        for w in basic_tokenize(line, do_lower_case=False):
            counts[w] = counts.get(w, 0) + 1
    return counts


# -- helpers --------------------------------------------------------------------------------

def test_helpers_worked_examples():
    assert W.initial_split("hugs") == ["h", "##u", "##g", "##s"]
    assert W.merged_token("h", "##u") == "hu"
    assert W.merged_token("##g", "##s") == "##gs"
    assert W.merge_pair(["##s", "##s", "##s"], "##s", "##s") == ["##ss", "##s"]
    splits = {w: W.initial_split(w) for w in TOY}
    tok_freq, pair_freq = W.count_pairs(splits, TOY)
    assert tok_freq["##u"] == 36 and pair_freq[("##u", "##g")] == 20
    scores = W.pair_scores(tok_freq, pair_freq)
    assert scores[("##g", "##s")] == pytest.approx(1 / 20)
    assert scores[("h", "##u")] == pytest.approx(1 / 36)


# -- docs/bert-notes.md §2.2 toy example ----------------------------------------------------------------

@pytest.mark.parametrize("train", [train_from_word_counts, train_naive], ids=["fast", "naive"])
def test_toy_score_rule_first_merges(train):
    vocab = train(TOY, N_SPECIAL + 7 + 3)
    assert vocab[:N_SPECIAL] == list(SPECIAL_TOKENS)
    assert vocab[N_SPECIAL:N_SPECIAL + 7] == ["##g", "##n", "##s", "##u", "b", "h", "p"]
    assert vocab[N_SPECIAL + 7:] == ["##gs", "hu", "hugs"]


@pytest.mark.parametrize("train", [train_from_word_counts, train_naive], ids=["fast", "naive"])
def test_toy_frequency_rule_first_merge_differs(train):
    vocab = train(TOY, N_SPECIAL + 7 + 1, merge_rule="frequency")
    assert vocab[-1] == "##ug"  # (##u, ##g) occurs 20 times; the score rule picks ##gs
    assert train(TOY, N_SPECIAL + 7 + 1)[-1] == "##gs"


def test_toy_vocab_encodes_as_spec():
    tok = BertTokenizer(train_from_word_counts(TOY, N_SPECIAL + 10))
    assert tok.tokenize("hugs") == ["hugs"]
    assert tok.tokenize("bugs") == ["b", "##u", "##gs"]
    assert tok.tokenize("mug") == ["[UNK]"]
    assert tok.tokenize("bum") == ["[UNK]"]


# -- docs/bert-notes.md §2.2 course example ---------------------------------------------------------------

@pytest.mark.parametrize("train", [train_from_word_counts, train_naive], ids=["fast", "naive"])
def test_course_example_learns_the_25_tokens(train):
    vocab = train(_course_counts(), 70)
    alphabet = vocab[N_SPECIAL:N_SPECIAL + 40]
    assert alphabet[:3] == ["##a", "##b", "##c"] and alphabet[-3:] == ["u", "w", "y"]
    assert vocab[N_SPECIAL + 40:] == COURSE_LEARNED
    tok = BertTokenizer(vocab, do_lower_case=False)
    assert tok.tokenize("Hugging") == ["Hugg", "##i", "##n", "##g"]
    assert tok.tokenize("HOgging") == ["[UNK]"]
    assert tok.tokenize("This is the Hugging Face course!") == (
        "Th ##i ##s is th ##e Hugg ##i ##n ##g Fac ##e c ##o ##u ##r ##s ##e [UNK]".split())


def test_verbose_prints_each_merge(capsys):
    train_from_word_counts(TOY, N_SPECIAL + 9, verbose=True)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("merge 1/2: (##g, ##s) -> ##gs score=0.05 count=5")
    assert lines[1].startswith("merge 2/2: (h, ##u) -> hu")


# -- fast == naive, determinism, bounds -----------------------------------------------------

word_counts = st.dictionaries(st.text(alphabet="abcde", min_size=1, max_size=7),
                              st.integers(1, 9), min_size=1, max_size=25)


@settings(max_examples=120, deadline=None)
@given(word_counts, st.integers(0, 40), st.sampled_from(W.MERGE_RULES), st.integers(0, 3))
def test_fast_equals_naive(counts, extra, rule, min_freq):
    n_alpha = len({s for w in counts for s in W.initial_split(w)})
    size = N_SPECIAL + n_alpha + extra
    fast = train_from_word_counts(counts, size, merge_rule=rule, min_frequency=min_freq)
    assert fast == train_naive(counts, size, merge_rule=rule, min_frequency=min_freq)
    assert len(fast) <= size
    assert len(set(fast)) == len(fast)
    assert train_from_word_counts(dict(counts), size, merge_rule=rule,
                                  min_frequency=min_freq) == fast  # deterministic


def test_min_frequency_blocks_rare_pairs():
    vocab = train_from_word_counts(TOY, 100, merge_rule="frequency", min_frequency=16)
    assert vocab[N_SPECIAL + 7:] == ["##ug", "##un"][: len(vocab) - N_SPECIAL - 7]
    assert all(t not in vocab for t in ("hu", "##gs"))


def test_limit_alphabet_keeps_most_frequent_chars():
    # character counts: a 18, b 8, z 1, q 1 -> keep a, b; the word "zq" is skipped
    vocab = train_from_word_counts({"aaab": 5, "ba": 3, "zq": 1}, 12, limit_alphabet=2)
    assert vocab[N_SPECIAL:N_SPECIAL + 4] == ["##a", "##b", "a", "b"]
    assert not any("z" in t or "q" in t for t in vocab)
    assert len(vocab) == 12


@pytest.mark.parametrize("rule", W.MERGE_RULES)
def test_ties_go_to_the_pair_met_first(rule):
    # (a, ##b) and (c, ##d) tie on score (1.0) and on count (1): the earlier word wins
    assert train_from_word_counts({"ab": 1, "cd": 1}, N_SPECIAL + 4 + 1, merge_rule=rule)[-1] == "ab"
    assert train_from_word_counts({"cd": 1, "ab": 1}, N_SPECIAL + 4 + 1, merge_rule=rule)[-1] == "cd"
    # within one word, the leftmost of two tied pairs wins: (x, ##y) before (##y, ##z)
    assert train_from_word_counts({"xyz": 1}, N_SPECIAL + 3 + 1, merge_rule=rule)[-1] == "xy"


# -- files and bad input --------------------------------------------------------------------

def test_train_from_files_and_cli(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(COURSE_CORPUS) + "\n", encoding="utf-8")
    vocab = train_wordpiece([corpus], 70, do_lower_case=False, progress=False)
    assert vocab[N_SPECIAL + 40:] == COURSE_LEARNED
    out = tmp_path / "vocab.txt"
    assert W.cli(["--files", str(corpus), "--vocab-size", "70", "--cased", "--out", str(out), "--merge-rule",
                  "score"]) == 0
    assert out.read_text(encoding="utf-8").splitlines() == vocab
    # without --merge-rule the command learns with the frequency rule, as every vocabulary minibert builds
    assert W.cli(["--files", str(corpus), "--vocab-size", "70", "--cased", "--out", str(tmp_path / "f.txt")]) == 0
    frequency = train_wordpiece([corpus], 70, do_lower_case=False, merge_rule="frequency", progress=False)
    assert (tmp_path / "f.txt").read_text(encoding="utf-8").splitlines() == frequency != vocab


def test_vocab_size_too_small_is_a_clear_error():
    with pytest.raises(ValueError, match=r"vocab_size=8 .* 5 special tokens plus the 7-symbol"):
        train_from_word_counts(TOY, 8)


def test_empty_corpus_is_a_clear_error(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n\n", encoding="utf-8")
    with pytest.raises(ValueError, match="empty"):
        train_wordpiece([empty], 100, progress=False)
    with pytest.raises(ValueError, match="empty"):
        train_from_word_counts({}, 100)
    assert W.cli(["--files", str(empty), "--out", str(tmp_path / "v.txt")]) == 1


def test_missing_corpus_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        train_wordpiece([tmp_path / "nope.txt"], 100, progress=False)


def test_non_utf8_bytes_are_an_error_naming_file_line_and_byte(tmp_path, capsys):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"hug pug\n\n" + "na\u00efve caf\u00e9 hug\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1.txt line 3: invalid UTF-8 byte 0xef at column 3; "
                                         r"minibert reads text as UTF-8 \(convert with iconv"):
        train_wordpiece([bad], 40, progress=False)
    assert W.cli(["--files", str(bad), "--out", str(tmp_path / "v.txt")]) == 1
    assert "latin1.txt line 3: invalid UTF-8 byte 0xef" in capsys.readouterr().err
    assert not (tmp_path / "v.txt").exists()


@pytest.mark.parametrize("make_out,expected", [
    (lambda d: d, r"--out .* is a directory; give the file to write, e.g. --out .*vocab.txt"),
    (lambda d: d / "file.txt" / "vocab.txt", r"file.txt is a file, not a directory"),
], ids=["out-is-a-directory", "parent-is-a-file"])
def test_cli_checks_the_output_path_before_training(tmp_path, capsys, monkeypatch, make_out, expected):
    """`--out DIR` used to fail with IsADirectoryError only after the (slow) training."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(COURSE_CORPUS) + "\n", encoding="utf-8")
    (tmp_path / "file.txt").write_text("x\n", encoding="utf-8")
    monkeypatch.setattr(W, "train_wordpiece", lambda *a, **k: pytest.fail("trained before checking --out"))
    assert W.cli(["--files", str(corpus), "--out", str(make_out(tmp_path))]) == 1
    assert re.search(expected, capsys.readouterr().err)


def test_cli_creates_missing_output_directories(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(COURSE_CORPUS) + "\n", encoding="utf-8")
    out = tmp_path / "new" / "dir" / "vocab.txt"
    assert W.check_output_file(out) == out
    assert W.cli(["--files", str(corpus), "--vocab-size", "70", "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8").splitlines()[:N_SPECIAL] == list(SPECIAL_TOKENS)


def test_bad_merge_rule():
    with pytest.raises(ValueError, match="'bpe'"):
        train_from_word_counts(TOY, 20, merge_rule="bpe")
