"""Tokenizer tests: Google's test vectors (docs/bert-notes.md §1.5), edge characters, properties, bad input."""
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minibert.text import tokenizer as T
from minibert.text.tokenizer import BertTokenizer, basic_tokenize, load_vocab

GOOGLE_VOCAB = ["[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn", "##ing", ","]
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


# -- docs/bert-notes.md §1.5 vectors ---------------------------------------------------------------------

def test_full_tokenizer_google_vector():
    tok = BertTokenizer(GOOGLE_VOCAB)
    tokens = tok.tokenize("UNwant\u00E9d,running")
    assert tokens == ["un", "##want", "##ed", ",", "runn", "##ing"]
    assert tok.convert_tokens_to_ids(tokens) == [7, 4, 5, 10, 8, 9]


def test_full_tokenizer_from_vocab_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("".join(t + "\n" for t in GOOGLE_VOCAB), encoding="utf-8")
    tok = BertTokenizer(path)
    assert tok.tokenize("UNwant\u00E9d,running") == ["un", "##want", "##ed", ",", "runn", "##ing"]
    out = tmp_path / "copy" / "vocab.txt"
    tok.save_vocabulary(out)
    assert load_vocab(out) == GOOGLE_VOCAB


def test_basic_tokenizer_chinese():
    assert basic_tokenize("ah\u535A\u63A8zz") == ["ah", "\u535A", "\u63A8", "zz"]


def test_basic_tokenizer_lower():
    assert basic_tokenize(" \tHeLLo!how  \n Are yoU?  ") == ["hello", "!", "how", "are", "you", "?"]
    assert basic_tokenize("H\u00E9llo") == ["hello"]


def test_basic_tokenizer_no_lower():
    assert basic_tokenize(" \tHeLLo!how  \n Are yoU?  ", do_lower_case=False) == [
        "HeLLo", "!", "how", "Are", "yoU", "?"]


def test_wordpiece_tokenizer_google_vectors():
    vocab = {t: i for i, t in enumerate(["[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed",
                                         "wa", "un", "runn", "##ing"])}

    def wp(text):
        return [p for w in text.split() for p in T.wordpiece(w, vocab)]

    assert wp("") == []
    assert wp("unwanted running") == ["un", "##want", "##ed", "runn", "##ing"]
    assert wp("unwantedX running") == ["[UNK]", "runn", "##ing"]


@pytest.mark.parametrize("ch,expected", [(" ", True), ("\t", True), ("\r", True), ("\n", True),
                                         ("\u00A0", True), ("A", False), ("-", False)])
def test_is_whitespace(ch, expected):
    assert T.is_whitespace(ch) is expected


@pytest.mark.parametrize("ch,expected", [("\u0005", True), ("A", False), (" ", False),
                                         ("\t", False), ("\r", False), ("\U0001F4A9", False)])
def test_is_control(ch, expected):
    assert T.is_control(ch) is expected


@pytest.mark.parametrize("ch,expected", [("-", True), ("$", True), ("`", True), (".", True),
                                         ("A", False), (" ", False)])
def test_is_punctuation(ch, expected):
    assert T.is_punctuation(ch) is expected


# -- edge characters (docs/bert-notes.md §1.8 list) ------------------------------------------------------

def test_zero_width_space_is_dropped_not_split():
    # U+200B is category Cf (control): deleted, so the two halves join into one word.
    assert basic_tokenize("foo\u200Bbar") == ["foobar"]


def test_nbsp_is_a_separator():
    assert basic_tokenize("foo\u00A0bar") == ["foo", "bar"]


def test_line_separator_survives_cleaning_but_splits():
    assert T.clean_text("a\u2028b") == "a\u2028b"  # category Zl: neither control nor Zs
    assert basic_tokenize("a\u2028b") == ["a", "b"]


def test_mask_typed_in_text_is_split():
    tok = BertTokenizer(SPECIALS + ["mask", "[", "]", "a"])
    assert tok.tokenize("a [MASK]") == ["a", "[", "mask", "]"]


def test_word_length_limit():
    tok = BertTokenizer(SPECIALS + ["a", "##a"])
    assert tok.tokenize("a" * 201) == ["[UNK]"]
    assert tok.tokenize("a" * 200) == ["a"] + ["##a"] * 199


def test_whole_word_unk():
    tok = BertTokenizer(SPECIALS + ["b", "##u", "##g"])
    assert tok.tokenize("bum bug") == ["[UNK]", "b", "##u", "##g"]


def test_accent_stripping_only_when_lowercasing():
    assert basic_tokenize("Caf\u00E9") == ["cafe"]
    assert basic_tokenize("Caf\u00E9", do_lower_case=False) == ["Caf\u00E9"]


def test_nul_and_replacement_char_dropped():
    assert basic_tokenize("a\x00b\ufffdc") == ["abc"]


# -- encode / decode ----------------------------------------------------------------------

def _small_tok():
    return BertTokenizer(SPECIALS + ["the", "cat", "sat", "on", "mat", "##s", "a", "dog", ","])


def test_encode_single_and_pair_segments():
    tok = _small_tok()
    ids, seg = tok.encode("the cat")
    assert tok.convert_ids_to_tokens(ids) == ["[CLS]", "the", "cat", "[SEP]"]
    assert seg == [0, 0, 0, 0]
    ids, seg = tok.encode("the cat", "a dog")
    assert tok.convert_ids_to_tokens(ids) == ["[CLS]", "the", "cat", "[SEP]", "a", "dog", "[SEP]"]
    assert seg == [0, 0, 0, 0, 1, 1, 1]


def test_encode_truncates_longer_side_from_end():
    tok = _small_tok()
    ids, seg = tok.encode("the cat sat on the mat", "a dog", max_length=8)
    assert tok.convert_ids_to_tokens(ids) == ["[CLS]", "the", "cat", "sat", "[SEP]", "a", "dog", "[SEP]"]
    assert len(seg) == 8
    ids, _ = tok.encode("the cat sat", max_length=3)
    assert tok.convert_ids_to_tokens(ids) == ["[CLS]", "the", "[SEP]"]
    with pytest.raises(ValueError, match="max_length=2"):
        tok.encode("a", "b", max_length=2)


def test_decode_joins_pieces_and_drops_pad():
    tok = _small_tok()
    ids, _ = tok.encode("the cats, sat")
    assert tok.decode(ids + [tok.pad_id] * 3) == "[CLS] the cats , sat [SEP]"
    assert tok.decode(ids, skip_special_tokens=True) == "the cats , sat"


def test_special_ids():
    tok = _small_tok()
    assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 1, 2, 3, 4)
    assert len(tok) == len(tok.ids_to_tokens)


def test_unknown_token_and_bad_id_raise():
    tok = _small_tok()
    with pytest.raises(ValueError, match="'zebra'"):
        tok.convert_tokens_to_ids(["cat", "zebra"])
    with pytest.raises(ValueError, match="id 99 .* size 14"):
        tok.convert_ids_to_tokens([2, 99])
    with pytest.raises(ValueError, match="id -1"):
        tok.convert_ids_to_tokens([-1])


# -- vocab file errors ---------------------------------------------------------------------

def test_load_vocab_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        load_vocab(tmp_path / "nope.txt")


def test_load_vocab_empty_file(tmp_path):
    p = tmp_path / "vocab.txt"
    p.write_text("\n\n")
    with pytest.raises(ValueError, match="empty"):
        load_vocab(p)


def test_load_vocab_without_unk(tmp_path):
    p = tmp_path / "vocab.txt"
    p.write_text("[PAD]\n[CLS]\na\n")
    with pytest.raises(ValueError, match=r"no \[UNK\]"):
        BertTokenizer(p)


def test_load_vocab_duplicate_names_token_and_lines(tmp_path):
    p = tmp_path / "vocab.txt"
    p.write_text("[UNK]\ncat\ndog\ncat\n")
    with pytest.raises(ValueError, match=r"'cat' on lines 2 and 4"):
        load_vocab(p)


def test_load_vocab_invalid_utf8_and_blank_line(tmp_path):
    p = tmp_path / "vocab.txt"
    p.write_bytes(b"[UNK]\ncat\n\ndog\n")
    with pytest.raises(ValueError, match="line 3 is blank"):
        load_vocab(p)
    p.write_bytes(b"[UNK]\nca\xfft\n")  # not UTF-8: an error, not a token with U+FFFD in it
    with pytest.raises(ValueError, match=r"vocab.txt line 2: invalid UTF-8 byte 0xff at column 3"):
        load_vocab(p)


def test_vocab_missing_special_tokens_names_file_and_tokens(tmp_path):
    p = tmp_path / "vocab.txt"
    p.write_text("[PAD]\n[UNK]\n[CLS]\nthe\n", encoding="utf-8")
    tok = BertTokenizer(p)  # tokenizing needs only [UNK]
    assert tok.tokenize("the") == ["the"]
    with pytest.raises(ValueError, match=r"vocab file .*vocab.txt lacks the special token\(s\) "
                                         r"\[SEP\] \[MASK\]; pretraining needs"):
        tok.check_special_tokens()
    tok.check_special_tokens(("[CLS]", "[UNK]"))  # present: no error
    with pytest.raises(ValueError, match=r"vocab file .*vocab.txt has no \[MASK\] token"):
        tok.mask_id


def test_vocab_list_errors():
    with pytest.raises(ValueError, match="empty"):
        BertTokenizer([])
    with pytest.raises(ValueError, match="'a' at ids 1 and 2"):
        BertTokenizer(["[UNK]", "a", "a"])


# -- properties (Hypothesis) ---------------------------------------------------------------

ascii_text = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=127), max_size=80)


@settings(max_examples=400, deadline=None)
@given(ascii_text, st.booleans())
def test_ascii_fast_path_equals_reference(text, lower):
    assert T._basic_tokenize_ascii(text, lower) == T._basic_tokenize_reference(text, lower)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_any_unicode_tokenizes_into_vocab_ids(text):
    tok = BertTokenizer(SPECIALS + list(string.ascii_lowercase)
                        + ["##" + c for c in string.ascii_lowercase] + ["the", "##ing"])
    ids, seg = tok.encode(text)
    assert all(0 <= i < len(tok) for i in ids)
    assert len(ids) == len(seg)
    assert ids[0] == tok.cls_id and ids[-1] == tok.sep_id


WORDS = ["the", "cat", "sat", "on", "mat", "hello", "world", "running", "Dog", "CAFÉ"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(WORDS + [",", ".", "!", "?", "(", ")"]), max_size=15),
       st.lists(st.sampled_from([" ", "  ", "\t", "\n", "\u00A0", ""]), min_size=15, max_size=15))
def test_decode_encode_roundtrip(words, seps):
    text = "".join(w + s for w, s in zip(words, seps))
    basic = basic_tokenize(text)
    # a vocab whose pieces cover every basic token: whole words, or a prefix plus one ## piece
    vocab = SPECIALS + sorted({w[:2] for w in basic} | {"##" + w[2:] for w in basic if len(w) > 2})
    tok = BertTokenizer(vocab)
    ids, _ = tok.encode(text)
    assert tok.decode(ids, skip_special_tokens=True) == " ".join(basic)
    assert " ".join(basic) == " ".join(basic).lower()


def test_cache_does_not_change_results():
    tok = _small_tok()
    first = tok.tokenize("the cats sat on the mats")
    second = tok.tokenize("the cats sat on the mats")
    assert first == second == ["the", "cat", "##s", "sat", "on", "the", "mat", "##s"]


def test_cli_prints_tokens_and_ids(tmp_path, capsys):
    p = tmp_path / "vocab.txt"
    p.write_text("".join(t + "\n" for t in SPECIALS + ["the", "cat"]))
    assert T.cli(["--vocab", str(p), "The", "cat"]) == 0
    out = capsys.readouterr().out
    assert "cat" in out and "[CLS]" in out and "      6" in out
    assert T.cli(["--vocab", str(tmp_path / "missing.txt"), "x"]) == 1


def test_cli_rejects_text_that_is_not_utf8(tmp_path, capsys):
    """Python passes undecodable argv bytes on as lone surrogates; they are an error, not [UNK]."""
    p = tmp_path / "vocab.txt"
    p.write_text("".join(t + "\n" for t in SPECIALS + ["the", "cat"]))
    latin1_argument = b"caf\xe9".decode("utf-8", errors="surrogateescape")  # as os.fsdecode
    assert T.cli(["--vocab", str(p), "the", latin1_argument]) == 1
    assert "text: invalid UTF-8 byte 0xe9 at column 8" in capsys.readouterr().err
