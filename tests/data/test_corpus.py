"""Default-corpus tests: sentence splitting, cleaning, the file format, held-out split, build."""
import json

import pytest
from corpora import REPO

from minibert.data import corpus as C
from minibert.text.tokenizer import BertTokenizer

SAMPLE = REPO / "data" / "sample.txt"


# -- sentence splitter -----------------------------------------------------------------------

@pytest.mark.parametrize("text,expected", [
    ("One. Two! Three? Four.", ["One.", "Two!", "Three?", "Four."]),
    ("Use e.g. Foo here, i.e. Bar. Next one.", ["Use e.g. Foo here, i.e. Bar.", "Next one."]),
    ("It is 3.5 times faster. Yes.", ["It is 3.5 times faster.", "Yes."]),
    ("Call os.path.join() now. Then stop.", ["Call os.path.join() now.", "Then stop."]),
    ('He said "stop." Then left.', ['He said "stop."', "Then left."]),
    ("Version 3.11 added it. 42 is the answer.", ["Version 3.11 added it.", "42 is the answer."]),
    ("Lowercase after. a period does not split.", ["Lowercase after. a period does not split."]),
    ("See J. Smith for details. Done.", ["See J. Smith for details.", "Done."]),
])
def test_split_sentences(text, expected):
    assert C.split_sentences(text) == expected


# -- cleaning --------------------------------------------------------------------------------

DOC = """Heading
*******

The first paragraph has two sentences. It ends here.

For example::

    def f():
        return 1

   rule ::= "if" expression ":" suite
            | other

>>> print(1)
1

After the code, prose resumes with :func:`len` and ``literal`` text and *emphasis*.

str.count(sub)

   Return the number of occurrences of *sub* in the string.
"""


def test_clean_paragraphs_drops_code_grammar_doctest_headings():
    paragraphs = C.clean_paragraphs(DOC)
    assert paragraphs == [
        "The first paragraph has two sentences. It ends here.",
        "After the code, prose resumes with len and literal text and emphasis.",
        "Return the number of occurrences of sub in the string.",
    ]


def test_code_block_after_single_colon_is_dropped():
    text = "Use it like this:\n\n   x = compute(1, 2)\n   print(x)\n\nBack to prose again now."
    assert C.clean_paragraphs(text) == ["Use it like this:", "Back to prose again now."]


def test_make_documents_keeps_multi_sentence_unique_docs():
    raw = [("a", "Only one sentence here, friend."),
           ("b", "First sentence of b is here. Second sentence of b."),
           ("c", "First sentence of b is here. Second sentence of b.")]
    docs = C.make_documents(raw)
    assert docs == [("b", ["First sentence of b is here.", "Second sentence of b."])]


# -- file format -----------------------------------------------------------------------------

def test_read_documents_format(tmp_path):
    a = tmp_path / "a.txt"
    a.write_text("  s1 \ns2\n\n\n s3\n", encoding="utf-8")
    b = tmp_path / "b.txt"
    b.write_text("s4\n\ns5\n", encoding="utf-8")
    assert C.read_documents([a, b]) == [["s1", "s2"], ["s3"], ["s4"], ["s5"]]
    assert C.read_documents(a) == [["s1", "s2"], ["s3"]]


def test_read_documents_rejects_bytes_that_are_not_utf8(tmp_path):
    a = tmp_path / "a.txt"
    a.write_bytes("s1\n\nthe caf\u00e9\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"a.txt line 3: invalid UTF-8 byte 0xe9 at column 8"):
        C.read_documents(a)


def test_sample_file_is_in_corpus_format():
    docs = C.read_documents(SAMPLE)
    assert 6 <= len(docs) <= 10
    assert all(len(d) >= 2 for d in docs)
    text = SAMPLE.read_text(encoding="utf-8")
    assert text.endswith("\n") and "\n\n\n" not in text


# -- held-out split and build ----------------------------------------------------------------

def test_heldout_choice_is_stable_and_about_5_percent():
    titles = [f"module{i}.func{i}" for i in range(4000)]
    chosen = [t for t in titles if C.is_heldout(t)]
    assert 0.04 < len(chosen) / len(titles) < 0.06
    assert chosen == [t for t in titles if C.is_heldout(t)]
    assert C.is_heldout("topic:if") == C.is_heldout("topic:if")


def _fake_raw(n=60):
    return [(f"mod{i}.f", f"Function number {i} does thing {i}. It returns {i} values quickly. "
             f"Call it with care, friend {i}.") for i in range(n)]


def test_build_default_corpus_offline(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(C, "collect_docstrings", lambda: _fake_raw())
    monkeypatch.setattr(C, "collect_topics", lambda: [("topic:x", "The x topic. It has text.")])
    paths = C.build_default_corpus(tmp_path / "out", vocab_size=120)
    train, heldout = C.read_documents(paths.train), C.read_documents(paths.heldout)
    assert len(train) + len(heldout) == 61
    assert heldout, "expected at least one held-out document among 61"
    assert not {tuple(d) for d in train} & {tuple(d) for d in heldout}
    stats = json.loads((paths.train.parent / "stats.json").read_text())
    assert stats["train"]["documents"] == len(train)
    assert stats["heldout"]["sentences"] == sum(map(len, heldout))
    assert set(stats["train"]) == {"documents", "sentences", "words", "bytes"}
    tok = BertTokenizer(paths.vocab)
    assert len(tok) <= 120 and tok.ids_to_tokens[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    # a second call skips both steps
    mtime = paths.vocab.stat().st_mtime_ns
    C.build_default_corpus(tmp_path / "out", vocab_size=120)
    assert paths.vocab.stat().st_mtime_ns == mtime
    assert "skipping" in capsys.readouterr().out


def test_build_is_deterministic(tmp_path, monkeypatch):
    monkeypatch.setattr(C, "collect_docstrings", lambda: _fake_raw(30))
    monkeypatch.setattr(C, "collect_topics", lambda: [])
    p1 = C.build_default_corpus(tmp_path / "a", vocab_size=100)
    p2 = C.build_default_corpus(tmp_path / "b", vocab_size=100)
    for f1, f2 in zip(p1, p2):
        assert f1.read_bytes() == f2.read_bytes()


def test_collect_docstrings_real_stdlib():
    raw = C.collect_docstrings()
    titles = [t for t, _ in raw]
    assert len(raw) > 1000
    assert len(set(titles)) == len(titles)
    tops = {t.split(".")[0] for t in titles}
    assert {"os", "json", "builtins", "collections"} <= tops
    assert not tops & {"antigravity", "this", "tkinter", "idlelib", "test"}
    assert C.collect_docstrings() == raw  # deterministic


def test_cli_and_ensure_default_corpus(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(C, "collect_docstrings", lambda: _fake_raw(40))
    monkeypatch.setattr(C, "collect_topics", lambda: [])
    out = tmp_path / "cli"
    assert C.cli(["--out", str(out), "--vocab-size", "110", "--merge-rule", "frequency"]) == 0
    stats = json.loads((out / "stats.json").read_text())
    assert stats["vocab"]["merge_rule"] == "frequency" and stats["vocab"]["size"] <= 110
    assert '"documents"' in capsys.readouterr().out
    monkeypatch.setattr(C, "DEFAULT_DIR", tmp_path / "default")
    monkeypatch.setattr(C, "build_default_corpus",
                        lambda: C.CorpusPaths(*(tmp_path / n for n in ("t", "h", "v"))))
    assert C.ensure_default_corpus().vocab == tmp_path / "v"  # missing -> build
    for name in ("train.txt", "heldout.txt", "vocab.txt"):
        (tmp_path / "default").mkdir(exist_ok=True)
        (tmp_path / "default" / name).write_text("x\n")
    assert C.ensure_default_corpus().vocab == tmp_path / "default" / "vocab.txt"  # present


def test_cli_rejects_tiny_vocab(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(C, "collect_docstrings", lambda: _fake_raw(20))
    monkeypatch.setattr(C, "collect_topics", lambda: [])
    assert C.cli(["--out", str(tmp_path), "--vocab-size", "10"]) == 1
    assert "vocab_size=10" in capsys.readouterr().err
