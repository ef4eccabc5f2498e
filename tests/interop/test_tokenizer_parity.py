"""minibert's tokenizer against transformers' pure-Python BERT tokenizer (the Google port).

Known, documented differences are kept out of the generated text (docs/bert-notes.md §1.7): transformers
treats every C* category as control (Google: only Cc/Cf), so unassigned (Cn), private-use (Co)
and surrogate (Cs) characters are excluded; its 100-character word limit is raised to
Google's 200; special-token strings are not protected because the basic tokenizer is
compared directly (no never_split).
"""
import unicodedata

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

legacy = pytest.importorskip("transformers.models.bert.tokenization_bert_legacy")

from minibert.text.tokenizer import BertTokenizer, basic_tokenize  # noqa: E402
from minibert.text.wordpiece_trainer import train_wordpiece  # noqa: E402
from minibert.io.paths import repo_root

SAMPLE = repo_root() / "data" / "sample.txt"
text_no_private = st.text(st.characters(blacklist_categories=("Cn", "Co", "Cs")), max_size=60)


@pytest.fixture(scope="module")
def vocab():
    return train_wordpiece([SAMPLE], 400, progress=False)


@settings(max_examples=300, deadline=None)
@given(text_no_private)
def test_basic_tokenizer_matches_transformers_lowercase(text):
    hf = legacy.BasicTokenizer(do_lower_case=True, tokenize_chinese_chars=True)
    assert basic_tokenize(text, do_lower_case=True) == hf.tokenize(text)


@settings(max_examples=300, deadline=None)
@given(text_no_private)
def test_basic_tokenizer_matches_transformers_cased(text):
    # cased: no accent stripping, so transformers' extra NFC step (which Google never does)
    # shows; compare only on text that NFC leaves unchanged
    assume(unicodedata.normalize("NFC", text) == text)
    hf = legacy.BasicTokenizer(do_lower_case=False, tokenize_chinese_chars=True)
    assert basic_tokenize(text, do_lower_case=False) == hf.tokenize(text)


def test_full_tokenizer_matches_transformers_on_sample(vocab):
    ours = BertTokenizer(vocab)
    hf_basic = legacy.BasicTokenizer(do_lower_case=True)
    hf_wp = legacy.WordpieceTokenizer({t: i for i, t in enumerate(vocab)}, "[UNK]",
                                      max_input_chars_per_word=200)
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()
    lines += ["Unseen words: zygomorphic, café, naïve, 東京, x" + "y" * 150]
    for line in lines:
        expected = [p for w in hf_basic.tokenize(line) for p in hf_wp.tokenize(w)]
        assert ours.tokenize(line) == expected, line
