"""Examples -> model inputs: padded int64 arrays, laid out as google-research/bert's run_classifier.

Every builder returns a dict of arrays with one row per feature, ready to be batched by indexing:

    classification_features  input_ids, input_mask, segment_ids (N, T); labels (N,) int64 ids
                             (float32 for regression); truncated (N,) bool
    token_features           input_ids, input_mask, segment_ids, labels (N, T), with labels
                             IGNORE_INDEX except on each word's first piece; word_index (N, T);
                             example_index (N,): a long sentence gives several features
    choice_features          input_ids, input_mask, segment_ids (N, C, T); labels (N,); truncated (N,)

Layout of one sequence (T = max_seq_length, padding with [PAD]):

    tokens       [CLS] the film [SEP] it was fun [SEP] [PAD] [PAD]
    segment_ids    0    0    0    0    1   1   1    1     0     0
    input_mask     1    1    1    1    1   1   1    1     0     0

A pair too long for T loses tokens at the end of the longer text, one at a time, until
len(A) + len(B) <= T - 3 (a single text is cut to T - 2), exactly as Google's truncate_seq_pair;
`truncated` marks the examples that lost tokens. Token tasks never cut: see `token_features`.
`trim(batch)` cuts the padding columns that no sequence of a batch uses.
"""
from __future__ import annotations

import math
import re

import numpy as np

from minibert.io.textio import shown
from minibert.taskdata.readers import label_id
from minibert.text.tokenizer import truncate_pair

IGNORE_INDEX = -100  # label of positions without a loss (cross_entropy_forward's default)


def _pad(rows: list[list[int]], T: int, value: int) -> np.ndarray:
    """Lists of ints (each at most T long) -> (N, T) int64, filled with `value` after each."""
    out = np.full((len(rows), T), value, dtype=np.int64)  # (N, T)
    for n, row in enumerate(rows):
        out[n, :len(row)] = row
    return out


def _target_length(rows: list[list[int]], max_seq_length: int, pad_to: str) -> int:
    if pad_to == "max_length":
        return max_seq_length
    if pad_to == "longest":
        return max((len(r) for r in rows), default=1)
    raise ValueError(f"pad_to={pad_to!r}; expected 'max_length' or 'longest'")


def _inputs(encoded: list[tuple[list[int], list[int]]], T: int, pad_id: int) -> dict:
    """[(ids, segment_ids)] -> input_ids, input_mask, segment_ids, each (N, T)."""
    ids = [e[0] for e in encoded]
    return {"input_ids": _pad(ids, T, pad_id),  # (N, T)
            "input_mask": _pad([[1] * len(i) for i in ids], T, 0),  # (N, T)
            "segment_ids": _pad([e[1] for e in encoded], T, 0)}  # (N, T)


def encode_pair(tokenizer, text_a: str, text_b: str | None,
                max_seq_length: int) -> tuple[list[int], list[int], bool]:
    """-> (ids, segment_ids, truncated) for [CLS] A [SEP] or [CLS] A [SEP] B [SEP].

    >>> from minibert.text.tokenizer import BertTokenizer
    >>> tok = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "b", "c"])
    >>> encode_pair(tok, "a b c", "c", 5)     # 3 + 1 > 5 - 3: "c" dropped from the longer A
    ([2, 4, 3, 6, 3], [0, 0, 0, 1, 1], True)
    """
    n_special = 2 if text_b is None else 3
    if max_seq_length <= n_special:
        raise ValueError(f"max_seq_length={max_seq_length} leaves no room for text "
                         f"({n_special} special tokens)")
    a = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text_a))
    b = None if text_b is None else tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text_b))
    n_text = len(a) + (0 if b is None else len(b))
    a, b = truncate_pair(a, b, max_seq_length - n_special)
    ids = [tokenizer.cls_id, *a, tokenizer.sep_id]
    segments = [0] * len(ids)
    if b is not None:
        ids += [*b, tokenizer.sep_id]
        segments += [1] * (len(b) + 1)
    return ids, segments, len(ids) - n_special < n_text


# ---------------------------------------------------------------------------------------------
# Sentence (pair) classification and regression

def _class_labels(examples, labels) -> np.ndarray:
    """(N,) int64 label ids (-1 for an unlabelled example), or float32 values for regression."""
    if labels is None or labels == "regression":
        return np.array([np.nan if e.label is None else _number(e.label, e.where)
                         for e in examples], dtype=np.float32)  # (N,)
    index = {label: i for i, label in enumerate(labels)}
    return np.array([-1 if e.label is None else label_id(e.label, index, e.where)
                     for e in examples], dtype=np.int64)  # (N,)


_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _number(value: str, where: str) -> float:
    """A regression label: a decimal number, finite in float32 (Python's float() also takes "1_0"
    as 10, "nan", "inf", and 5,000 digits as inf)."""
    number = float(value) if _DECIMAL.fullmatch(value.strip()) else math.nan
    if not math.isfinite(number) or abs(number) > float(np.finfo(np.float32).max):
        raise ValueError(f"{where}: label {shown(value)} is not a finite decimal number (regression task)")
    return number


def classification_features(examples, tokenizer, max_seq_length: int, labels,
                            pad_to: str = "max_length") -> dict:
    """TextExamples -> input_ids, input_mask, segment_ids (N, T), labels (N,), truncated (N,).

    `labels`: the label names (id = index), or "regression" / None for float labels.
    `pad_to`: "max_length" (T = max_seq_length, as Google) or "longest" (T = the longest here).
    """
    encoded = [encode_pair(tokenizer, e.text_a, e.text_b, max_seq_length) for e in examples]
    T = _target_length([e[0] for e in encoded], max_seq_length, pad_to)
    features = _inputs([e[:2] for e in encoded], T, tokenizer.pad_id)
    features["labels"] = _class_labels(examples, labels)  # (N,)
    features["truncated"] = np.array([e[2] for e in encoded], dtype=bool)  # (N,)
    return features


# ---------------------------------------------------------------------------------------------
# Token classification

def word_pieces(tokenizer, word: str, window: int) -> list[int]:
    """A word's WordPiece ids, at least one ([UNK] if the word tokenises to nothing, e.g. a lone
    U+FE0F variation selector, so every word keeps its label) and at most `window`."""
    ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(word)) or [tokenizer.unk_id]
    return ids[:window]


def _chunks(lengths: list[int], window: int) -> list[range]:
    """Split words (with these piece counts, each <= window) into consecutive runs whose pieces
    fit in the window. [3, 2, 2] with window 4 -> [range(0, 1), range(1, 3)]."""
    chunks, start, size = [], 0, 0
    for w, n in enumerate(lengths):
        if size + n > window:
            chunks.append(range(start, w))
            start, size = w, 0
        size += n
    chunks.append(range(start, len(lengths)))
    return chunks


def token_features(examples, tokenizer, max_seq_length: int, labels,
                   pad_to: str = "max_length") -> dict:
    """TaggedExamples -> input_ids, input_mask, segment_ids, labels, word_index (N, T) and
    example_index (N,).

    Each word is WordPiece-tokenised on its own; its tag id goes on its FIRST piece and the
    other pieces, [CLS], [SEP] and padding get IGNORE_INDEX. `word_index` holds the word's
    index in its sentence at first pieces and -1 elsewhere. A sentence with more pieces than the
    window (max_seq_length - 2) is SPLIT between words into consecutive features (no overlap),
    so no word loses its label; `example_index` says which sentence each feature came from
    (a word longer than the whole window keeps only its first window pieces).

    Example, window 4, words "New York rocks" = [new] [york] [rock ##s], tags B-loc I-loc O:
        feature 0: [CLS] new york [SEP]     labels -100 B-loc I-loc -100   word_index -1 0 1 -1
        feature 1: [CLS] rock ##s [SEP]     labels -100 O -100 -100        word_index -1 2 -1 -1
    """
    window = max_seq_length - 2
    if window < 1:
        raise ValueError(f"max_seq_length={max_seq_length} leaves no room for words")
    index = {label: i for i, label in enumerate(labels)}
    rows = []  # (ids, labels, word_index, example index)
    for n, e in enumerate(examples):
        if not e.words:
            raise ValueError(f"{e.where}: a sentence without words")
        pieces = [word_pieces(tokenizer, w, window) for w in e.words]
        tag_ids = [label_id(t, index, e.where) for t in e.tags]
        for chunk in _chunks([len(p) for p in pieces], window):
            ids, tag_row, word_row = [tokenizer.cls_id], [IGNORE_INDEX], [-1]
            for w in chunk:
                ids += pieces[w]
                tag_row += [tag_ids[w]] + [IGNORE_INDEX] * (len(pieces[w]) - 1)
                word_row += [w] + [-1] * (len(pieces[w]) - 1)
            rows.append((ids + [tokenizer.sep_id], tag_row + [IGNORE_INDEX], word_row + [-1], n))
    T = _target_length([r[0] for r in rows], max_seq_length, pad_to)
    features = _inputs([(r[0], [0] * len(r[0])) for r in rows], T, tokenizer.pad_id)
    features["labels"] = _pad([r[1] for r in rows], T, IGNORE_INDEX)  # (N, T)
    features["word_index"] = _pad([r[2] for r in rows], T, -1)  # (N, T)
    features["example_index"] = np.array([r[3] for r in rows], dtype=np.int64)  # (N,)
    return features


def word_predictions(features: dict, pred_ids, labels: list[str]) -> list[list[str]]:
    """Predicted label ids at every position (N, T' <= T) -> one tag per original word, per
    sentence, reading each word's first piece and joining the features of a split sentence.

    >>> feats = {"word_index": np.array([[-1, 0, 1, -1], [-1, 2, -1, -1]]),
    ...          "example_index": np.array([0, 0])}
    >>> word_predictions(feats, np.array([[0, 1, 2, 0], [0, 0, 1, 1]]), ["O", "B-loc", "I-loc"])
    [['B-loc', 'I-loc', 'O']]
    """
    pred = np.asarray(pred_ids)  # (N, T')
    word_index = features["word_index"][:, :pred.shape[1]]  # (N, T')
    example_index = features["example_index"]  # (N,)
    sentences: list[dict[int, str]] = [{} for _ in range(int(example_index.max()) + 1 if len(example_index) else 0)]
    rows, cols = np.nonzero(word_index >= 0)  # first pieces
    for r, c in zip(rows.tolist(), cols.tolist()):
        sentences[example_index[r]][int(word_index[r, c])] = labels[int(pred[r, c])]
    out = []
    for s, words in enumerate(sentences):
        if sorted(words) != list(range(len(words))):
            raise ValueError(f"sentence {s}: the features do not cover its words 0..{len(words) - 1}")
        out.append([words[w] for w in range(len(words))])
    return out


# ---------------------------------------------------------------------------------------------
# Multiple choice

def choice_features(examples, tokenizer, max_seq_length: int, pad_to: str = "max_length") -> dict:
    """ChoiceExamples -> input_ids, input_mask, segment_ids (N, C, T), labels (N,), truncated (N,).

    Choice i of an example is [CLS] context [SEP] ending_i [SEP], pair-truncated like a
    sentence pair; labels hold the right choice's index (-1 when unlabelled).
    """
    if not examples:
        raise ValueError("choice_features: no examples")
    C = len(examples[0].endings)
    encoded = []
    for e in examples:
        if len(e.endings) != C:
            raise ValueError(f"{e.where}: {len(e.endings)} endings, but the first example has {C}")
        encoded += [encode_pair(tokenizer, e.context, ending, max_seq_length) for ending in e.endings]
    T = _target_length([e[0] for e in encoded], max_seq_length, pad_to)
    flat = _inputs([e[:2] for e in encoded], T, tokenizer.pad_id)  # (N*C, T) each
    features = {k: v.reshape(len(examples), C, T) for k, v in flat.items()}  # (N, C, T)
    features["labels"] = np.array([-1 if e.label is None else e.label for e in examples], dtype=np.int64)  # (N,)
    features["truncated"] = np.array([e[2] for e in encoded], dtype=bool).reshape(-1, C).any(axis=1)  # (N,)
    return features


# ---------------------------------------------------------------------------------------------
# Batches

def trim(batch: dict) -> dict:
    """Cut the padding columns past the longest real sequence of the batch (a shorter T is
    faster: attention costs T²). Arrays shaped like input_ids are cut; the rest are kept.

    >>> b = {"input_ids": np.array([[2, 7, 3, 0, 0]]), "input_mask": np.array([[1, 1, 1, 0, 0]]),
    ...      "labels": np.array([1])}
    >>> {k: v.tolist() for k, v in trim(b).items()}
    {'input_ids': [[2, 7, 3]], 'input_mask': [[1, 1, 1]], 'labels': [1]}
    """
    shape = batch["input_ids"].shape
    lengths = batch["input_mask"].sum(axis=-1)  # (B,) or (B, C)
    keep = max(int(lengths.max()), 1) if lengths.size else shape[-1]
    return {k: v[..., :keep] if getattr(v, "shape", None) == shape else v for k, v in batch.items()}
