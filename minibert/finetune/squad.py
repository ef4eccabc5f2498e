"""SQuAD 1.1/2.0 data for BERT: google-research/bert's `run_squad.py`, step for step.

Everything around the network (docs/bert-notes.md §9.4):

    SQuAD JSON --read_squad--> SquadExample per question (passage split on whitespace)
      --convert_examples_to_features--> SquadFeature per window of the passage:
            [CLS] question [SEP] passage window [SEP] 0 0 ...        (T = max_seq_length)
      --stack_features--> int64 arrays (N, T) for BertForQuestionAnswering
      model --> start_logits, end_logits (N, T)
      --postprocess--> predictions {qid: text}, nbest {qid: [...]}, null_odds {qid: diff}
      --squad_eval--> EM / F1

Shape legend: N features (windows), T = max_seq_length.

Choices where run_squad crashes or says nothing (errors are ValueError naming the file or question):
- a paragraph whose context is empty (or only whitespace) is an error, not skipped, and so is one
  longer than MAX_CONTEXT_CHARS, a question id seen twice, and a file with no usable question;
- a question so long that no passage token fits in the window is an error (shorten it with
  max_query_length or raise max_seq_length), as is a passage that tokenizes to nothing;
- for training, an answer whose text is not at its character offset (or whose offset lies
  outside the context) is warned about and skipped, like run_squad; `ReadStats` counts them;
- in postprocessing with version_2, if no window offers any valid non-null span, the
  prediction falls back to run_squad's "empty" placeholder (score 0) instead of crashing.

Why this module is over 500 lines: it is `run_squad.py`'s data half ported step for step, in the
original's order, so the two read side by side; the network and the loop are elsewhere.
"""
from __future__ import annotations

import collections
import math
import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np

from minibert.taskdata.squad_files import iter_qas, require
from minibert.io.jsonfile import read_json
from minibert.text.tokenizer import BertTokenizer, basic_tokenize

FIRST_UNIQUE_ID = 1000000000  # run_squad numbers features from here
# A context longer than this is refused: every window of a passage checks every other window for
# the best context (run_squad's _check_is_max_context), so time grows with the square of its
# length. SQuAD 2.0's longest context has about 4,000 characters; this is 25 times that.
MAX_CONTEXT_CHARS = 100_000


# ---------------------------------------------------------------------------------------------
# Reading SQuAD JSON into examples

class SquadExample(NamedTuple):
    qas_id: str
    question_text: str
    doc_tokens: list[str]          # the passage split on whitespace ("words")
    orig_answer_text: str | None   # training only: the answer ("" if impossible)
    start_position: int | None     # training only: first answer word (-1 if impossible)
    end_position: int | None       # training only: last answer word (-1 if impossible)
    is_impossible: bool
    answers: list[str]             # every gold answer text, for reference


class ReadStats(NamedTuple):
    version_2: bool          # auto-detected: some question has "is_impossible"
    questions: int           # questions in the file
    skipped: int             # training questions dropped: answer not found at its offset
    skipped_ids: list[str]


def _is_passage_whitespace(c: str) -> bool:
    """run_squad's own whitespace (not the tokenizer's): space, \\t, \\r, \\n, U+202F."""
    return c in " \t\r\n" or ord(c) == 0x202F


def split_passage(text: str) -> tuple[list[str], list[int]]:
    """Whitespace-separated words, and for each character the index of its word.

    >>> split_passage("Hi  you")
    (['Hi', 'you'], [0, 0, 0, 0, 1, 1, 1])

    A whitespace character maps to the word before it (-1 before the first word).
    """
    doc_tokens: list[str] = []
    char_to_word_offset: list[int] = []
    prev_is_whitespace = True
    for c in text:
        if _is_passage_whitespace(c):
            prev_is_whitespace = True
        else:
            if prev_is_whitespace:
                doc_tokens.append(c)
            else:
                doc_tokens[-1] += c
            prev_is_whitespace = False
        char_to_word_offset.append(len(doc_tokens) - 1)
    return doc_tokens, char_to_word_offset


def locate_answer(text: str, offset: int, doc_tokens: list[str],
                  char_to_word_offset: list[int]) -> tuple[int, int] | None:
    """Character answer -> (first word, last word), or None if those words do not hold the
    answer text (compared with whitespace collapsed, as run_squad does).

    >>> words, offsets = split_passage("The band (1895-1943).")
    >>> locate_answer("1895", 10, words, offsets)  # the coarse span: the word '(1895-1943).'
    (2, 2)
    """
    end_char = offset + len(text) - 1
    if not text or offset < 0 or end_char >= len(char_to_word_offset):
        return None
    start, end = char_to_word_offset[offset], char_to_word_offset[end_char]
    if start < 0:  # the offset points at whitespace before the first word
        return None
    actual_text = " ".join(doc_tokens[start:end + 1])
    cleaned_answer_text = " ".join(text.split())
    return (start, end) if cleaned_answer_text in actual_text else None


def _answer_texts(qa: dict, where: str, path) -> list[dict]:
    answers = require(qa, "answers", list, where, path)
    for i, answer in enumerate(answers):
        require(answer, "text", str, f"{where}.answers[{i}]", path)
    return answers


def _training_answer(qa, qid, where, path, doc_tokens, char_to_word_offset):
    """-> (answer text, first word, last word), or None if the answer is not at its offset."""
    answers = _answer_texts(qa, where, path)
    if not answers:
        raise ValueError(f"{path}: question id {qid!r} is answerable (no is_impossible) but has no answers")
    # run_squad refuses more than one answer (the official train file has one per question); a
    # train split cut from a dev file has several, and the first is used, as transformers does
    text = answers[0]["text"]
    offset = require(answers[0], "answer_start", int, f"{where}.answers[0]", path)
    span = locate_answer(text, offset, doc_tokens, char_to_word_offset)
    if span is None:
        warnings.warn(f"{path}: question id {qid!r}: the answer {text!r} is not at character "
                      f"{offset} of its context; question skipped (as run_squad does)")
        return None
    return text, span[0], span[1]


def _read_question(qa, where, path, doc_tokens, char_to_word_offset, is_training, version_2):
    """One question -> SquadExample, or None when training skips it."""
    qid = qa["id"]
    question = require(qa, "question", str, where, path)
    if not doc_tokens:
        raise ValueError(f"{path}: question id {qid!r} ({where}) has an empty context")
    if "is_impossible" in qa:
        require(qa, "is_impossible", bool, where, path)
    is_impossible = version_2 and qa.get("is_impossible", False)
    answers = _answer_texts(qa, where, path) if "answers" in qa or is_training else []
    texts = [a["text"] for a in answers]
    if not is_training:
        return SquadExample(qid, question, doc_tokens, None, None, None, is_impossible, texts)
    if is_impossible:
        return SquadExample(qid, question, doc_tokens, "", -1, -1, True, texts)
    found = _training_answer(qa, qid, where, path, doc_tokens, char_to_word_offset)
    if found is None:
        return None
    return SquadExample(qid, question, doc_tokens, *found, False, texts)


def read_squad(path: str | Path, is_training: bool,
               version_2: bool | None = None) -> tuple[list[SquadExample], ReadStats]:
    """SQuAD JSON file -> (examples, stats), exactly as run_squad's read_squad_examples.

    version_2=None detects SQuAD 2.0 from the presence of "is_impossible". For training, an
    answerable question trains on its first answer; questions whose answer is not found at
    its character offset are skipped with a warning and counted in stats.skipped.
    """
    squad_json = read_json(path, "SQuAD file")
    if version_2 is None:
        version_2 = any("is_impossible" in qa for _, _, qa in iter_qas(squad_json, path))
    examples: list[SquadExample] = []
    skipped: list[str] = []
    n_questions = 0
    passages: dict[int, tuple] = {}  # id(paragraph) -> split_passage(context), computed once
    seen: set[str] = set()
    for where, paragraph, qa in iter_qas(squad_json, path):
        if id(paragraph) not in passages:
            context = require(paragraph, "context", str, where.rsplit(".qas[", 1)[0], path)
            if len(context) > MAX_CONTEXT_CHARS:
                raise ValueError(f"{path}: {where.rsplit('.qas[', 1)[0]} has a context of {len(context):,} "
                                 f"characters (about {len(context.split()):,} words); the limit is "
                                 f"{MAX_CONTEXT_CHARS:,} (SQuAD's longest is about 4,000): split it into paragraphs")
            passages[id(paragraph)] = split_passage(context)
        if qa["id"] in seen:
            raise ValueError(f"{path}: question id {qa['id']!r} appears twice ({where})")
        seen.add(qa["id"])
        n_questions += 1
        example = _read_question(qa, where, path, *passages[id(paragraph)], is_training,
                                 version_2)
        if example is None:
            skipped.append(qa["id"])
        else:
            examples.append(example)
    if not examples:
        what = (f"no training question: all {n_questions:,} have their answer off its character offset"
                if is_training and n_questions else "no questions")
        raise ValueError(f"{path}: {what}")
    return examples, ReadStats(version_2, n_questions, len(skipped), skipped)


# ---------------------------------------------------------------------------------------------
# Examples -> features (one per window of the passage)

class SquadFeature(NamedTuple):
    unique_id: int
    example_index: int
    doc_span_index: int
    tokens: list[str]                     # [CLS] question [SEP] window [SEP], unpadded
    token_to_orig_map: dict[int, int]     # position of a passage token -> its word index
    token_is_max_context: dict[int, bool]  # position -> is this its best-context window?
    input_ids: list[int]                  # (T,) 0-padded
    input_mask: list[int]                 # (T,) 1 on real tokens
    segment_ids: list[int]                # (T,) 0 for [CLS] question [SEP], 1 for the rest
    start_position: int | None            # training: answer start in this window, 0 = [CLS]
    end_position: int | None
    is_impossible: bool


class DocSpan(NamedTuple):
    start: int   # first passage token of the window
    length: int  # passage tokens in the window


def tokenize_passage(doc_tokens: list[str], tokenizer: BertTokenizer):
    """Words -> (WordPiece tokens, token -> word index, word -> its first token index).

    Words ['The', 'bands'] with pieces the | band ##s give
    (['the', 'band', '##s'], [0, 1, 1], [0, 1]).
    """
    all_doc_tokens: list[str] = []
    tok_to_orig_index: list[int] = []
    orig_to_tok_index: list[int] = []
    for i, word in enumerate(doc_tokens):
        orig_to_tok_index.append(len(all_doc_tokens))
        for sub_token in tokenizer.tokenize(word):
            tok_to_orig_index.append(i)
            all_doc_tokens.append(sub_token)
    return all_doc_tokens, tok_to_orig_index, orig_to_tok_index


def _improve_answer_span(doc_tokens, input_start, input_end, tokenizer, orig_answer_text):
    """Tighten a token span to the tokenised answer, if it occurs inside it.

    Passage "The band (1895-1943)." tokenises as the band ( 1895 - 1943 ) . and the answer
    "1895" lies in the word "(1895-1943).", tokens 2..7; the tokenised answer '1895' is found
    at token 3, so the span becomes (3, 3). If not found, the span is returned unchanged.
    """
    tok_answer_text = " ".join(tokenizer.tokenize(orig_answer_text))
    for new_start in range(input_start, input_end + 1):
        for new_end in range(input_end, new_start - 1, -1):
            if " ".join(doc_tokens[new_start:new_end + 1]) == tok_answer_text:
                return new_start, new_end
    return input_start, input_end


def make_doc_spans(n_tokens: int, max_tokens_for_doc: int, doc_stride: int) -> list[DocSpan]:
    """Sliding windows over the passage tokens; each next one starts min(length, stride) on.

    >>> make_doc_spans(10, 4, 3)
    [DocSpan(start=0, length=4), DocSpan(start=3, length=4), DocSpan(start=6, length=4)]
    """
    spans = []
    start = 0
    while start < n_tokens:
        length = min(n_tokens - start, max_tokens_for_doc)
        spans.append(DocSpan(start, length))
        if start + length == n_tokens:
            break
        start += min(length, doc_stride)
    return spans


def _check_is_max_context(doc_spans, cur_span_index, position) -> bool:
    """Is cur_span_index the window where token `position` has the most context?

    Score = min(tokens left of it, tokens right of it) + 0.01 * window length; the first
    window with the highest score wins. With the windows above (0-3, 3-6, 6-9), token 3
    scores min(3, 0) + 0.04 in window 0 and min(0, 3) + 0.04 in window 1: window 0 wins;
    token 4 scores min(1, 2) + 0.04 in window 1 only: window 1.
    """
    best_score, best_span_index = None, None
    for span_index, span in enumerate(doc_spans):
        end = span.start + span.length - 1
        if position < span.start or position > end:
            continue
        score = min(position - span.start, end - position) + 0.01 * span.length
        if best_score is None or score > best_score:
            best_score, best_span_index = score, span_index
    return cur_span_index == best_span_index


def _answer_token_span(example, all_doc_tokens, orig_to_tok_index, tokenizer):
    """Training: the answer's (first, last) WordPiece token in the passage; (-1, -1) if none."""
    if example.is_impossible:
        return -1, -1
    tok_start = orig_to_tok_index[example.start_position]
    if example.end_position < len(example.doc_tokens) - 1:
        tok_end = orig_to_tok_index[example.end_position + 1] - 1
    else:
        tok_end = len(all_doc_tokens) - 1
    return _improve_answer_span(all_doc_tokens, tok_start, tok_end, tokenizer,
                                example.orig_answer_text)


def _window_labels(span: DocSpan, tok_start: int, tok_end: int, n_query: int,
                   is_impossible: bool) -> tuple[int, int]:
    """Answer positions inside this window; (0, 0), i.e. [CLS], if it is not wholly inside."""
    if is_impossible or not (tok_start >= span.start and tok_end <= span.start + span.length - 1):
        return 0, 0
    doc_offset = n_query + 2  # [CLS] question [SEP]
    return tok_start - span.start + doc_offset, tok_end - span.start + doc_offset


def _window_tokens(query_tokens, all_doc_tokens, tok_to_orig_index, spans, span_index):
    """-> (tokens, segment_ids, token_to_orig_map, token_is_max_context) of one window."""
    tokens = ["[CLS]", *query_tokens, "[SEP]"]
    segment_ids = [0] * len(tokens)
    token_to_orig_map, token_is_max_context = {}, {}
    span = spans[span_index]
    for i in range(span.start, span.start + span.length):
        token_to_orig_map[len(tokens)] = tok_to_orig_index[i]
        token_is_max_context[len(tokens)] = _check_is_max_context(spans, span_index, i)
        tokens.append(all_doc_tokens[i])
        segment_ids.append(1)
    tokens.append("[SEP]")
    segment_ids.append(1)
    return tokens, segment_ids, token_to_orig_map, token_is_max_context


def _example_windows(example, tokenizer, max_seq_length, doc_stride, max_query_length):
    """-> (query tokens, passage tokens, token -> word, windows), with the length checks."""
    query_tokens = tokenizer.tokenize(example.question_text)[:max_query_length]
    all_doc_tokens, tok_to_orig_index, orig_to_tok_index = tokenize_passage(
        example.doc_tokens, tokenizer)
    if not all_doc_tokens:
        raise ValueError(f"question id {example.qas_id!r}: the passage has no tokens "
                         "after tokenization")
    max_tokens_for_doc = max_seq_length - len(query_tokens) - 3  # [CLS], [SEP], [SEP]
    if max_tokens_for_doc <= 0:
        raise ValueError(
            f"question id {example.qas_id!r}: the question has {len(query_tokens)} tokens "
            f"(after cutting to max_query_length={max_query_length}), so with [CLS] and two "
            f"[SEP] no passage token fits in max_seq_length={max_seq_length}; lower "
            "max_query_length or raise max_seq_length")
    spans = make_doc_spans(len(all_doc_tokens), max_tokens_for_doc, doc_stride)
    return query_tokens, all_doc_tokens, tok_to_orig_index, orig_to_tok_index, spans


def convert_examples_to_features(examples: list[SquadExample], tokenizer: BertTokenizer,
                                 max_seq_length: int = 384, doc_stride: int = 128,
                                 max_query_length: int = 64, *,
                                 is_training: bool) -> list[SquadFeature]:
    """Examples -> one feature per window, exactly as run_squad's convert_examples_to_features.

    Training windows that do not hold the whole answer, and unanswerable questions, are kept
    with start = end = 0 (the [CLS] position).
    """
    if doc_stride < 1:
        raise ValueError(f"doc_stride must be at least 1, got {doc_stride}")
    tokenizer.check_special_tokens(("[CLS]", "[SEP]"), "SQuAD features")
    features: list[SquadFeature] = []
    for example_index, example in enumerate(examples):
        query_tokens, all_doc_tokens, tok_to_orig, orig_to_tok, spans = _example_windows(
            example, tokenizer, max_seq_length, doc_stride, max_query_length)
        if is_training:
            tok_start, tok_end = _answer_token_span(example, all_doc_tokens, orig_to_tok,
                                                    tokenizer)
        for span_index, span in enumerate(spans):
            tokens, segment_ids, to_orig, is_max = _window_tokens(
                query_tokens, all_doc_tokens, tok_to_orig, spans, span_index)
            input_ids = tokenizer.convert_tokens_to_ids(tokens)
            input_mask = [1] * len(input_ids)
            n_pad = max_seq_length - len(input_ids)  # padding id 0; the mask hides it
            start = end = None
            if is_training:
                start, end = _window_labels(span, tok_start, tok_end, len(query_tokens),
                                            example.is_impossible)
            features.append(SquadFeature(
                FIRST_UNIQUE_ID + len(features), example_index, span_index, tokens, to_orig,
                is_max, input_ids + [0] * n_pad, input_mask + [0] * n_pad,
                segment_ids + [0] * n_pad, start, end, example.is_impossible))
    return features


def stack_features(features: list[SquadFeature]) -> dict[str, np.ndarray]:
    """Features -> int64 arrays input_ids, input_mask, segment_ids (N, T), plus
    start_positions, end_positions (N,) when the features carry training labels."""
    batch = {name: np.array([getattr(f, name) for f in features], dtype=np.int64)  # (N, T)
             for name in ("input_ids", "input_mask", "segment_ids")}
    if features and features[0].start_position is not None:
        for name in ("start_position", "end_position"):
            batch[name + "s"] = np.array([getattr(f, name) for f in features], dtype=np.int64)  # (N,)
    return batch


# ---------------------------------------------------------------------------------------------
# Logits -> answer texts (run_squad's write_predictions)

class PrelimPrediction(NamedTuple):
    feature_index: int
    start_index: int
    end_index: int
    start_logit: float
    end_logit: float


class NbestPrediction(NamedTuple):
    text: str
    start_logit: float
    end_logit: float


def _get_best_indexes(logits: list[float], n_best_size: int) -> list[int]:
    """Indexes of the n largest logits, largest first (ties: lower index first).

    >>> _get_best_indexes([0.1, 3.0, -1.0, 3.0], 3)
    [1, 3, 0]
    """
    ranked = sorted(enumerate(logits), key=lambda x: x[1], reverse=True)  # stable
    return [i for i, _ in ranked[:n_best_size]]


def _compute_softmax(scores: list[float]) -> list[float]:
    if not scores:
        return []
    max_score = max(scores)
    exp_scores = [math.exp(s - max_score) for s in scores]
    total = sum(exp_scores)
    return [e / total for e in exp_scores]


def _strip_spaces(text: str) -> tuple[str, dict[int, int]]:
    """'a b' -> ('ab', {0: 0, 1: 2}): the text without spaces, and where each char was."""
    ns_chars, ns_to_s_map = [], {}
    for i, c in enumerate(text):
        if c != " ":
            ns_to_s_map[len(ns_chars)] = i
            ns_chars.append(c)
    return "".join(ns_chars), ns_to_s_map


def get_final_text(pred_text: str, orig_text: str, do_lower_case: bool) -> str:
    """Project a normalised prediction back onto the original words, character by character.

    >>> get_final_text("steve smith", "Steve Smith's", True)
    'Steve Smith'

    The original words are basic-tokenised and joined with spaces ("steve smith ' s"); the
    prediction is found in that, and, if both texts have the same characters once spaces are
    removed, the match maps back to the original casing and punctuation. When any step fails,
    the whole original span is returned.
    """
    tok_text = " ".join(basic_tokenize(orig_text, do_lower_case))
    start_position = tok_text.find(pred_text)
    if start_position == -1:
        return orig_text
    end_position = start_position + len(pred_text) - 1
    orig_ns_text, orig_ns_to_s_map = _strip_spaces(orig_text)
    tok_ns_text, tok_ns_to_s_map = _strip_spaces(tok_text)
    if len(orig_ns_text) != len(tok_ns_text):
        return orig_text
    tok_s_to_ns_map = {s: ns for ns, s in tok_ns_to_s_map.items()}
    ns_start = tok_s_to_ns_map.get(start_position)
    orig_start = orig_ns_to_s_map.get(ns_start) if ns_start is not None else None
    ns_end = tok_s_to_ns_map.get(end_position)
    orig_end = orig_ns_to_s_map.get(ns_end) if ns_end is not None else None
    if orig_start is None or orig_end is None:
        return orig_text
    return orig_text[orig_start:orig_end + 1]


def _span_candidates(feature, feature_index, start_logits, end_logits, n_best_size,
                     max_answer_length) -> list[PrelimPrediction]:
    """Every (start, end) from the top-n starts x top-n ends that passes the filters."""
    out = []
    end_indexes = _get_best_indexes(end_logits, n_best_size)
    for s in _get_best_indexes(start_logits, n_best_size):
        for e in end_indexes:
            if s >= len(feature.tokens) or e >= len(feature.tokens):
                continue
            if s not in feature.token_to_orig_map or e not in feature.token_to_orig_map:
                continue  # in the question, a special token or padding
            if not feature.token_is_max_context.get(s, False):
                continue  # another window scores this start token with more context
            if e < s or e - s + 1 > max_answer_length:
                continue
            out.append(PrelimPrediction(feature_index, s, e, start_logits[s], end_logits[e]))
    return out


def _span_text(example, feature, pred, do_lower_case) -> str:
    """A span of WordPiece tokens -> the original passage text it stands for."""
    tok_text = " ".join(feature.tokens[pred.start_index:pred.end_index + 1])
    tok_text = tok_text.replace(" ##", "").replace("##", "")  # glue WordPieces back
    tok_text = " ".join(tok_text.strip().split())
    orig_start = feature.token_to_orig_map[pred.start_index]
    orig_end = feature.token_to_orig_map[pred.end_index]
    orig_text = " ".join(example.doc_tokens[orig_start:orig_end + 1])
    return get_final_text(tok_text, orig_text, do_lower_case)


def _build_nbest(example, features, prelim, null, n_best_size, do_lower_case, version_2):
    """Sorted candidates -> up to n_best_size entries with distinct texts."""
    seen, nbest = set(), []
    for pred in prelim:
        if len(nbest) >= n_best_size:
            break
        text = ""
        if pred.start_index > 0:  # a non-null prediction
            text = _span_text(example, features[pred.feature_index], pred, do_lower_case)
            if text in seen:
                continue
        seen.add(text)
        nbest.append(NbestPrediction(text, pred.start_logit, pred.end_logit))
    if version_2 and "" not in seen:
        nbest.append(NbestPrediction("", null.start_logit, null.end_logit))
    if not any(entry.text for entry in nbest):  # no valid span at all: run_squad's placeholder
        nbest.append(NbestPrediction("empty", 0.0, 0.0))
    return nbest


def _predict_example(example, features, logits, n_best_size, max_answer_length,
                     do_lower_case, version_2, null_score_diff_threshold):
    """One question's windows -> (prediction text, nbest json list, null score diff or None)."""
    prelim, null = [], None
    for i, feature in enumerate(features):
        start_logits, end_logits = logits[i]
        null_score = start_logits[0] + end_logits[0]  # "no answer": start = end = [CLS]
        if version_2 and (null is None or null_score < null.start_logit + null.end_logit):
            null = PrelimPrediction(i, 0, 0, start_logits[0], end_logits[0])  # min over windows
        prelim += _span_candidates(feature, i, start_logits, end_logits, n_best_size,
                                   max_answer_length)
    if version_2:
        prelim.append(null)
    prelim.sort(key=lambda p: p.start_logit + p.end_logit, reverse=True)  # stable
    nbest = _build_nbest(example, features, prelim, null, n_best_size, do_lower_case, version_2)
    probs = _compute_softmax([e.start_logit + e.end_logit for e in nbest])
    nbest_json = [{"text": e.text, "probability": p, "start_logit": e.start_logit,
                   "end_logit": e.end_logit} for e, p in zip(nbest, probs)]
    if not version_2:
        return nbest[0].text, nbest_json, None
    best = next(e for e in nbest if e.text)  # the best non-null entry
    diff = null.start_logit + null.end_logit - best.start_logit - best.end_logit
    return ("" if diff > null_score_diff_threshold else best.text), nbest_json, diff


def _logits_per_feature(features, results) -> list[tuple[list[float], list[float]]]:
    """(start_logits, end_logits) arrays (N, T), or a dict with those keys -> per feature lists."""
    if isinstance(results, dict):
        results = (results["start_logits"], results["end_logits"])
    start, end = (np.asarray(r, dtype=np.float64) for r in results)  # (N, T) each
    if start.shape != end.shape or start.ndim != 2 or start.shape[0] != len(features):
        raise ValueError(f"start/end logits have shapes {start.shape} and {end.shape}; expected "
                         f"(N, T) with N = {len(features)} features")
    too_short = [f.unique_id for f in features if len(f.tokens) > start.shape[1]]
    if too_short:
        raise ValueError(f"logits have T = {start.shape[1]} positions but feature "
                         f"{too_short[0]} has more tokens")
    return list(zip(start.tolist(), end.tolist()))


def postprocess(examples: list[SquadExample], features: list[SquadFeature], results,
                n_best_size: int = 20, max_answer_length: int = 30, do_lower_case: bool = True,
                version_2: bool = False, null_score_diff_threshold: float = 0.0):
    """Model logits -> (predictions {qid: text}, nbest {qid: [entries]}, null_odds {qid: diff}),
    exactly as run_squad's write_predictions.

    `results` is (start_logits, end_logits), each (N, T) with row i for features[i] (or a dict
    with those keys). For version_2 the no-answer score is the smallest start[0] + end[0] over
    the question's windows, diff = that - (best non-null start + end), and the prediction is ""
    when diff > null_score_diff_threshold. null_odds is empty when not version_2.
    """
    logits = _logits_per_feature(features, results)
    by_example = collections.defaultdict(list)  # example index -> [feature index]
    for i, feature in enumerate(features):
        by_example[feature.example_index].append(i)
    predictions, nbest_all, null_odds = {}, {}, {}
    for example_index, example in enumerate(examples):
        idx = by_example.get(example_index)
        if not idx:
            raise ValueError(f"question id {example.qas_id!r} has no features; pass the "
                             "features convert_examples_to_features made for these examples")
        text, nbest_json, diff = _predict_example(
            example, [features[i] for i in idx], [logits[i] for i in idx], n_best_size,
            max_answer_length, do_lower_case, version_2, null_score_diff_threshold)
        predictions[example.qas_id], nbest_all[example.qas_id] = text, nbest_json
        if diff is not None:
            null_odds[example.qas_id] = diff
    return predictions, nbest_all, null_odds
