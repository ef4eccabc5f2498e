"""The original BERT tokenizer: basic tokenization, then greedy longest-match-first WordPiece.

This reproduces google-research/bert's `FullTokenizer` (docs/bert-notes.md §1): for the same vocab and casing
it gives the same tokens on any text. The pipeline is

    text --clean--> --CJK spacing--> --whitespace split--> words
         --lowercase + strip accents--> --punctuation split--> basic tokens
         --WordPiece (greedy longest match, "##" continuations)--> pieces

Worked example (docs/bert-notes.md §1.5), vocab `[UNK] [CLS] [SEP] want ##want ##ed wa un runn ##ing ,`:

    "UNwant\u00E9d,running" -> "unwanted , running"        (basic tokenizer, lowercased)
                            -> un ##want ##ed , runn ##ing  (WordPiece)

Two things make encoding of natural text fast without changing any result:
- ASCII text takes a regex fast path (`_basic_tokenize_ascii`) that gives exactly what the
  character-by-character reference path (`_basic_tokenize_reference`) gives; a Hypothesis test
  checks the two agree.
- WordPiece results are cached per word (`word -> pieces`), since natural text repeats words.

Differences from Hugging Face's `BertTokenizer` are deliberate (docs/bert-notes.md §1.7): special-token strings
typed in text are split like any text (`[MASK]` -> `[`, `mask`, `]`), control characters are
only categories Cc/Cf, words longer than 200 characters become `[UNK]`, and converting an
unknown token to an id raises instead of returning the `[UNK]` id.
"""
from __future__ import annotations

import re
import sys
import unicodedata
from pathlib import Path

from minibert.io.atomic import write_text_atomic
from minibert.io.cli import command_parser
from minibert.io.textio import check_argument, error_line, read_text, refuse_special_file

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
MAX_INPUT_CHARS_PER_WORD = 200  # Google's value (HF uses 100)
# the largest vocabulary minibert reads or builds (BERT's has 30,522); model.SIZE_LIMITS holds it too
MAX_VOCAB_SIZE = 1 << 22


# ---------------------------------------------------------------------------------------------
# Character classes (Google's exact definitions, docs/bert-notes.md §1.3)

def is_whitespace(ch: str) -> bool:
    """Space, \\t, \\n, \\r, or Unicode category Zs (so U+00A0 and U+3000 are whitespace)."""
    if ch in " \t\n\r":
        return True
    return unicodedata.category(ch) == "Zs"


def is_control(ch: str) -> bool:
    """Categories Cc and Cf, except \\t \\n \\r (which count as whitespace)."""
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch) in ("Cc", "Cf")


def is_punctuation(ch: str) -> bool:
    """All non-alphanumeric printable ASCII (33-47, 58-64, 91-96, 123-126) plus categories P*."""
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


_CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)


def is_cjk(ch: str) -> bool:
    """CJK Unified Ideographs (Google's ranges; Hangul, Hiragana, Katakana are not included)."""
    cp = ord(ch)
    if cp < 0x3400:  # fast exit for Latin, Greek, Cyrillic, ...
        return False
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


# ---------------------------------------------------------------------------------------------
# Basic tokenizer: reference path, one character at a time (docs/bert-notes.md §1.2, in this exact order)

def clean_text(text: str) -> str:
    """Drop NUL, U+FFFD and control characters; turn every whitespace character into ' '."""
    out = []
    for ch in text:
        if ch == "\x00" or ch == "\ufffd" or is_control(ch):
            continue
        out.append(" " if is_whitespace(ch) else ch)
    return "".join(out)


def space_cjk(text: str) -> str:
    """Surround every CJK ideograph with spaces, so each becomes its own word."""
    return "".join(f" {ch} " if is_cjk(ch) else ch for ch in text)


def strip_accents(text: str) -> str:
    """NFD-normalize, then delete non-spacing marks (category Mn): 'é' -> 'e'."""
    return "".join(ch for ch in unicodedata.normalize("NFD", text)
                   if unicodedata.category(ch) != "Mn")


def split_on_punctuation(word: str) -> list[str]:
    """'hello!?' -> ['hello', '!', '?']: each punctuation character is its own token."""
    pieces: list[str] = []
    current: list[str] = []
    for ch in word:
        if is_punctuation(ch):
            if current:
                pieces.append("".join(current))
                current = []
            pieces.append(ch)
        else:
            current.append(ch)
    if current:
        pieces.append("".join(current))
    return pieces


def _normalize_word(word: str, do_lower_case: bool) -> list[str]:
    """One whitespace-split word -> its basic tokens (lowercase, strip accents, split punct)."""
    if do_lower_case:
        word = strip_accents(word.lower())  # Google strips accents only when lowercasing
    return split_on_punctuation(word)


def _basic_tokenize_reference(text: str, do_lower_case: bool = True) -> list[str]:
    """Google's BasicTokenizer, character by character. The source of truth for the fast path."""
    text = space_cjk(clean_text(text))
    tokens: list[str] = []
    for word in text.split():
        tokens.extend(_normalize_word(word, do_lower_case))
    # Google joins with spaces and splits again; this drops empty strings (e.g. a word that was
    # only combining marks, which accent stripping deletes).
    return " ".join(tokens).split()


def _words_with_owners(text: str) -> list[tuple[str, list[int]]]:
    """The words `_basic_tokenize_reference` splits (after clean_text and space_cjk), each with
    the index in `text` of every character: a deleted control character joins its neighbours, as
    clean_text does, and each CJK ideograph is a word of its own."""
    words: list[tuple[str, list[int]]] = []
    chars: list[str] = []
    owners: list[int] = []

    def close():
        if chars:
            words.append(("".join(chars), owners[:]))
            chars.clear()
            owners.clear()
    for i, ch in enumerate(text):
        if ch == "\x00" or ch == "\ufffd" or is_control(ch):
            continue
        if is_whitespace(ch):
            close()
        elif is_cjk(ch):
            close()
            words.append((ch, [i]))
        else:
            chars.append(ch)
            owners.append(i)
    close()
    return words


# ---------------------------------------------------------------------------------------------
# Basic tokenizer: fast path for ASCII text

# ASCII control characters (category Cc) except \t \n \r; cleaning deletes them.
_ASCII_CONTROL_DELETE = {cp: None for cp in [*range(0, 9), 11, 12, *range(14, 32), 127]}
# After cleaning, an ASCII string holds only whitespace, letters/digits and punctuation,
# so tokens are runs of letters/digits or single punctuation characters.
_ASCII_TOKEN_RE = re.compile(r"[A-Za-z0-9]+|[!-/:-@\[-`{-~]")


def _basic_tokenize_ascii(text: str, do_lower_case: bool = True) -> list[str]:
    """Same result as `_basic_tokenize_reference` for ASCII-only text, via one regex."""
    text = text.translate(_ASCII_CONTROL_DELETE)
    if do_lower_case:
        text = text.lower()  # ASCII has no accents to strip
    return _ASCII_TOKEN_RE.findall(text)


def basic_tokenize(text: str, do_lower_case: bool = True) -> list[str]:
    """Google's BasicTokenizer: text -> words and punctuation (docs/bert-notes.md §1.2).

    >>> basic_tokenize(" \\tHeLLo!how  \\n Are yoU?  ")
    ['hello', '!', 'how', 'are', 'you', '?']
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="ignore")  # as Google's convert_to_unicode
    if text.isascii():
        return _basic_tokenize_ascii(text, do_lower_case)
    return _basic_tokenize_reference(text, do_lower_case)


# ---------------------------------------------------------------------------------------------
# WordPiece (docs/bert-notes.md §1.4)

def wordpiece(word: str, vocab: dict[str, int], max_token_chars: int | None = None,
              unk_token: str = "[UNK]",
              max_input_chars_per_word: int = MAX_INPUT_CHARS_PER_WORD) -> list[str]:
    """Greedy longest-match-first WordPiece of one basic token.

    With vocab {un, ##want, ##ed, runn, ##ing}: 'unwanted' -> ['un', '##want', '##ed'];
    'unwantedX' -> ['[UNK]'] (one unmatched piece makes the WHOLE word unknown).
    `max_token_chars` (the longest vocab entry, in characters) only bounds the search; it never
    changes the result.
    """
    n = len(word)
    if n > max_input_chars_per_word:
        return [unk_token]
    longest = n if max_token_chars is None else max_token_chars
    pieces: list[str] = []
    start = 0
    while start < n:
        end = min(n, start + longest)
        piece = None
        while end > start:
            candidate = word[start:end] if start == 0 else "##" + word[start:end]
            if candidate in vocab:
                piece = candidate
                break
            end -= 1
        if piece is None:
            return [unk_token]
        pieces.append(piece)
        start = end
    return pieces


# ---------------------------------------------------------------------------------------------
# Vocabulary file

def load_vocab(path: str | Path) -> list[str]:
    """Read vocab.txt: one token per line, the 0-based line number is the id.

    Lines are stripped of surrounding whitespace (as Google does); trailing blank lines are
    ignored. Raises a clear error for a missing or empty file, bytes that are not UTF-8 (naming
    line and byte), a blank line inside the file, a duplicate token (naming both line numbers)
    or a vocab without [UNK].
    """
    path = Path(path)
    refuse_special_file(path)  # /dev/zero is not "not found"
    if not path.is_file():
        raise FileNotFoundError(f"vocab file not found: {path}")
    text = read_text(path)
    lines = [line.strip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    if not lines:
        raise ValueError(f"vocab file {path} is empty")
    if len(lines) > MAX_VOCAB_SIZE:
        raise ValueError(f"vocab file {path} has {len(lines):,} lines, more than minibert builds "
                         f"({MAX_VOCAB_SIZE:,}; BERT's has 30,522)")
    tokens: list[str] = []
    first_line: dict[str, int] = {}
    for lineno, token in enumerate(lines, start=1):
        if not token:
            raise ValueError(f"vocab file {path}: line {lineno} is blank")
        if token in first_line:
            raise ValueError(f"vocab file {path}: duplicate token {token!r} on lines "
                             f"{first_line[token]} and {lineno}")
        first_line[token] = lineno
        tokens.append(token)
    if "[UNK]" not in first_line:
        raise ValueError(f"vocab file {path} has no [UNK] token")
    return tokens


def _check_vocab_list(tokens: list[str]) -> list[str]:
    tokens = list(tokens)
    if not tokens:
        raise ValueError("vocab list is empty")
    seen: dict[str, int] = {}
    for i, token in enumerate(tokens):
        if not isinstance(token, str) or not token:
            raise ValueError(f"vocab entry {i} is {token!r}; tokens must be non-empty strings")
        if token in seen:
            raise ValueError(f"duplicate token {token!r} at ids {seen[token]} and {i}")
        seen[token] = i
    if "[UNK]" not in seen:
        raise ValueError("vocab has no [UNK] token")
    return tokens


# ---------------------------------------------------------------------------------------------
# The tokenizer

class BertTokenizer:
    """Google's FullTokenizer plus BERT input formatting ([CLS] A [SEP] B [SEP]).

    `vocab` is a path to vocab.txt or a list of tokens (the list index is the id).

    >>> tok = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##want"])
    >>> tok.tokenize("Unwant")
    ['un', '##want']
    """

    def __init__(self, vocab: str | Path | list[str], do_lower_case: bool = True):
        self.vocab_file: Path | None = None  # named in errors about the vocab
        if isinstance(vocab, (str, Path)):
            self.vocab_file = Path(vocab)
            self.ids_to_tokens: list[str] = load_vocab(vocab)
        else:
            self.ids_to_tokens = _check_vocab_list(vocab)
        self.vocab: dict[str, int] = {t: i for i, t in enumerate(self.ids_to_tokens)}
        self.do_lower_case = do_lower_case
        self._max_token_chars = max(len(t) for t in self.ids_to_tokens)
        self._cache: dict[str, list[str]] = {}  # basic token -> WordPiece pieces

    def __len__(self) -> int:
        return len(self.ids_to_tokens)

    # -- special-token ids ----------------------------------------------------------------
    def _vocab_name(self) -> str:
        return f"vocab file {self.vocab_file}" if self.vocab_file else "the vocab list"

    def _special_id(self, token: str) -> int:
        if token not in self.vocab:
            raise ValueError(f"{self._vocab_name()} has no {token} token")
        return self.vocab[token]

    def check_special_tokens(self, needed=SPECIAL_TOKENS, purpose: str = "pretraining") -> None:
        """Raise one ValueError naming the vocab file and every missing special token.

        Pretraining data and training look up [CLS], [SEP], [MASK] (and pad with [PAD]) deep
        inside generation; checking first turns a KeyError there into a message up front.
        """
        missing = [t for t in needed if t not in self.vocab]
        if missing:
            raise ValueError(
                f"{self._vocab_name()} lacks the special token(s) {' '.join(missing)}; {purpose} "
                f"needs {' '.join(needed)} (a vocab from `python -m minibert vocab` has them all, "
                f"as ids 0-{len(SPECIAL_TOKENS) - 1})")

    @property
    def pad_id(self) -> int:
        return self._special_id("[PAD]")

    @property
    def unk_id(self) -> int:
        return self._special_id("[UNK]")

    @property
    def cls_id(self) -> int:
        return self._special_id("[CLS]")

    @property
    def sep_id(self) -> int:
        return self._special_id("[SEP]")

    @property
    def mask_id(self) -> int:
        return self._special_id("[MASK]")

    # -- text -> tokens -------------------------------------------------------------------
    def basic_tokenize(self, text: str) -> list[str]:
        return basic_tokenize(text, self.do_lower_case)

    def wordpiece(self, word: str) -> list[str]:
        """WordPiece of one basic token, cached (the cache never changes a result)."""
        pieces = self._cache.get(word)
        if pieces is None:
            pieces = wordpiece(word, self.vocab, self._max_token_chars)
            if len(self._cache) < 1_000_000:  # bound memory on adversarial input
                self._cache[word] = pieces
        return pieces

    def tokenize(self, text: str) -> list[str]:
        """Text -> WordPiece tokens, exactly as Google's FullTokenizer."""
        out: list[str] = []
        cache = self._cache
        for word in basic_tokenize(text, self.do_lower_case):
            pieces = cache.get(word)  # inlined cache hit: the common case in natural text
            out.extend(pieces if pieces is not None else self.wordpiece(word))
        return out

    def tokenize_with_offsets(self, text: str) -> list[tuple[str, int, int, int]]:
        """Text -> [(WordPiece token, start, end, word)]: the tokens of `tokenize`, each with the
        span of `text` it came from (text[start:end], as transformers' offset_mapping) and the
        index of its basic token (a word or a punctuation mark: transformers' word_ids). A piece of
        a word whose lowercasing changed its length, and an [UNK], spans the whole word.

        >>> BertTokenizer(["[UNK]", "un", "##want", "!"]).tokenize_with_offsets(" UnWant!")
        [('un', 1, 3, 0), ('##want', 3, 7, 0), ('!', 7, 8, 1)]
        """
        out: list[tuple[str, int, int, int]] = []
        w = -1  # the basic token's index
        for word, owners in _words_with_owners(text):  # each word of clean_text/space_cjk, in `text`'s indices
            if self.do_lower_case:
                normalized = strip_accents(word.lower())
                by_char = [i for ch, i in zip(word, owners) for _ in strip_accents(ch.lower())]  # owner of each
                if len(by_char) != len(normalized):  # lowercasing changed the length: pieces span the word
                    by_char = [None] * len(normalized)
            else:
                normalized, by_char = word, owners

            def span(a: int, b: int) -> tuple[int, int]:  # normalized chars a..b-1 -> their span in `text`
                chars = by_char[a:b]
                return (owners[0], owners[-1] + 1) if None in chars else (chars[0], chars[-1] + 1)
            j = 0
            for token in split_on_punctuation(normalized):
                w, start, j = w + 1, j, j + len(token)
                k = start
                for piece in self.wordpiece(token):
                    n = j - start if piece == "[UNK]" else len(piece) - (2 if k > start else 0)
                    out.append((piece, *span(k, k + n), w))
                    k += n
        return out

    # -- tokens <-> ids -------------------------------------------------------------------
    def convert_tokens_to_ids(self, tokens: list[str]) -> list[int]:
        vocab = self.vocab
        try:
            return [vocab[t] for t in tokens]
        except KeyError as e:
            raise ValueError(f"token {e.args[0]!r} is not in the vocabulary "
                             f"({len(vocab)} tokens)") from None

    def convert_ids_to_tokens(self, ids) -> list[str]:
        n = len(self.ids_to_tokens)
        out = []
        for i in ids:
            i = int(i)
            if not 0 <= i < n:
                raise ValueError(f"token id {i} is out of range for a vocabulary of size {n}")
            out.append(self.ids_to_tokens[i])
        return out

    # -- model inputs ---------------------------------------------------------------------
    def encode(self, text: str, text_pair: str | None = None,
               max_length: int | None = None) -> tuple[list[int], list[int]]:
        """Text (and optional pair) -> (input ids, segment ids) with [CLS]/[SEP] added.

        Single: [CLS] A [SEP], segments all 0. Pair: [CLS] A [SEP] B [SEP], segment 0 up to and
        including the first [SEP], 1 after. If `max_length` (including the specials) is
        exceeded, tokens are removed from the end of the longer side first (as Google's
        truncate_seq_pair, but always from the end).
        """
        a = self.convert_tokens_to_ids(self.tokenize(text))
        b = None if text_pair is None else self.convert_tokens_to_ids(self.tokenize(text_pair))
        if max_length is not None:
            n_special = 2 if b is None else 3
            if max_length < n_special:
                raise ValueError(f"max_length={max_length} is too small: the special tokens "
                                 f"alone need {n_special}")
            a, b = truncate_pair(a, b, max_length - n_special)
        cls, sep = self.cls_id, self.sep_id
        ids = [cls, *a, sep]
        segment_ids = [0] * len(ids)
        if b is not None:
            ids += [*b, sep]
            segment_ids += [1] * (len(b) + 1)
        return ids, segment_ids

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        """Ids -> text: join tokens with spaces, glue '##' pieces to the previous token.

        [PAD] is always dropped; [CLS] and [SEP] are dropped too when skip_special_tokens.
        The result is the basic-tokenized text (lowercased when do_lower_case), not the
        original string: 'Hello, world!' decodes as 'hello , world !'.
        """
        drop = {"[PAD]", "[CLS]", "[SEP]"} if skip_special_tokens else {"[PAD]"}
        tokens = [t for t in self.convert_ids_to_tokens(ids) if t not in drop]
        return " ".join(tokens).replace(" ##", "")

    def save_vocabulary(self, path: str | Path) -> Path:
        """Write vocab.txt (one token per line, in id order, UTF-8, newline-terminated)."""
        return save_vocab(self.ids_to_tokens, path)


def truncate_pair(a: list, b: list | None, max_tokens: int) -> tuple[list, list | None]:
    """Drop tokens from the end of the longer list until len(a) + len(b) <= max_tokens."""
    a = list(a)
    b = None if b is None else list(b)
    if b is None:
        return a[:max_tokens], None
    while len(a) + len(b) > max_tokens:
        if len(a) > len(b):
            a.pop()
        else:
            b.pop()
    return a, b


def save_vocab(tokens: list[str], path: str | Path) -> Path:
    """Write tokens one per line (vocab.txt format, docs/bert-notes.md §2.4)."""
    return write_text_atomic(path, "".join(t + "\n" for t in tokens))


# ---------------------------------------------------------------------------------------------
# Command line

def cli(argv: list[str]) -> int:
    """python -m minibert tokenize --vocab vocab.txt "some text" [--pair "other text"]"""
    parser = command_parser("tokenize", "Tokenize text with a vocab.txt (Google BERT semantics); print tokens and ids.")
    parser.add_argument("text", nargs="+", help="text to tokenize (several words are joined)")
    parser.add_argument("--vocab", default="data/pydoc/vocab.txt", help="vocab.txt path")
    parser.add_argument("--cased", action="store_true", help="do not lowercase / strip accents")
    parser.add_argument("--pair", default=None, help="optional second segment")
    parser.add_argument("--max-length", type=int, default=None)
    args = parser.parse_args(argv)
    try:
        tok = BertTokenizer(args.vocab, do_lower_case=not args.cased)
        text = check_argument(" ".join(args.text))
        pair = None if args.pair is None else check_argument(args.pair, "--pair")
        ids, segments = tok.encode(text, pair, args.max_length)
    except (OSError, ValueError) as e:
        print(error_line(e), file=sys.stderr)
        return 1
    tokens = tok.convert_ids_to_tokens(ids)
    width = max(len(t) for t in tokens)
    for t, i, s in zip(tokens, ids, segments):
        print(f"{t:<{width}}  {i:>6}  seg {s}")
    print(f"{len(ids)} tokens ({len(ids) - (2 if args.pair is None else 3)} without specials)")
    return 0
