"""MLM/NSP pretraining data: google-research/bert's `create_pretraining_data.py`, step for step.

Given the same files, vocab, flags and `random.Random(seed)`, `create_training_instances`
returns exactly the instances the original script creates, in the same order: the random
number generator is called in the same order with the same arguments (docs/bert-notes.md §3.8), so every
segmentation, NSP pairing, truncation and mask is identical.

Pipeline (docs/bert-notes.md §3):
    corpus files --read_documents--> documents (list of segments = tokenized lines)
      --create_instances_from_document (x dupe_factor)--> TrainingInstance (static masks)
        (or RoBERTa's packed single segments: pack_documents, create_packed_instances)
      --instances_to_features--> dict of padded int32/float32 arrays (the original feature names)
      --write_shards--> DIR/shard_00000.npz ... + DIR/meta.json       (minibert/data/shards.py)
      --BatchIterator--> shuffled batches, static masks or masks redrawn every epoch (RoBERTa)
Dynamic masking redraws the masks with `remask`, the same algorithm as the generator's.

Shape legend: N instances, T = max_seq_length, P = max_predictions_per_seq, B batch size.

Corpus format: one sentence per line, a blank line between documents. NSP never crosses a
document boundary, so a blank line between every sentence makes every instance a forced
random-next negative (google-research/bert#125); a single document makes the "random" B come
from the same document (NVIDIA/DeepLearningExamples#421). Both cases warn.

The port keeps the original's order so it reads beside `create_pretraining_data.py` line by
line, with each successor's variant (masking mixes, SOP, RoBERTa's packing) at the line it
changes. Its output on disk is minibert/data/shards.py.
"""
from __future__ import annotations

import os
import random
import warnings
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from minibert.io.textio import iter_lines

CLS, SEP, MASK, PAD = "[CLS]", "[SEP]", "[MASK]", "[PAD]"
# A "sentence" line longer than this is almost surely a whole document on one line: it becomes
# one segment, so all but max_seq_length tokens of it are thrown away (after a slow tokenize).
LONG_LINE_CHARS = 10_000

# The features the original script serialises (docs/bert-notes.md §3.7), in its order.
FEATURE_NAMES = (
    "input_ids",             # int32 (N, T)   token ids after masking, 0-padded
    "input_mask",            # int32 (N, T)   1 on real tokens, 0 on padding
    "segment_ids",           # int32 (N, T)   0 for [CLS] A [SEP], 1 for B [SEP], 0-padded
    "masked_lm_positions",   # int32 (N, P)   ascending positions, 0-padded (points at [CLS])
    "masked_lm_ids",         # int32 (N, P)   original ids at those positions, 0-padded
    "masked_lm_weights",     # float32 (N, P) 1.0 per real prediction, 0.0 padding
    "next_sentence_labels",  # int32 (N,)     0 = IsNext, 1 = random next (NotNext)
)
# Stored beside them so masks can be redrawn every epoch (dynamic masking).
UNMASKED_NAME = "unmasked_input_ids"  # int32 (N, T) token ids before masking, 0-padded
# The generator's flags and their defaults (google-research/bert's create_pretraining_data.py):
# the one place they are stated; build_pretraining_data's signature and the `data` command read them.
DEFAULT_FLAGS = {"max_seq_length": 128, "max_predictions_per_seq": 20, "masked_lm_prob": 0.15,
                 "short_seq_prob": 0.1, "dupe_factor": 10, "random_seed": 12345,
                 "do_whole_word_mask": False, "do_lower_case": True, "mask_shares": (0.8, 0.1, 0.1)}
def check_mask_shares(mask_shares) -> tuple[float, float, float]:
    """(MASK, SAME, RND): what becomes of a token chosen for prediction, as shares that sum to 1:
    [MASK] / kept as it is / a random vocab token. BERT's 80/10/10 is (0.8, 0.1, 0.1); the paper's
    Table 8 also tries (1, 0, 0), (0.8, 0, 0.2), (0.8, 0.2, 0), (0, 0.2, 0.8) and (0, 0, 1)
    (docs/bert-notes.md §3.11). -> the three shares as floats; ValueError if they are not shares."""
    try:
        shares = tuple(float(x) for x in mask_shares)
    except (TypeError, ValueError):
        raise ValueError(f"mask_shares={mask_shares!r} must be three numbers (MASK, SAME, RND)") from None
    if len(shares) != 3 or not all(0.0 <= x <= 1.0 for x in shares) or abs(sum(shares) - 1.0) > 1e-6:
        raise ValueError(f"mask_shares={mask_shares!r} must be three shares in [0, 1] summing to 1 "
                         f"([MASK], same token, random token; BERT: 0.8, 0.1, 0.1)")
    return shares


class TrainingInstance(NamedTuple):
    """One MLM/NSP example, as the original script's `TrainingInstance`."""
    tokens: list[str]               # (L,) [CLS] A [SEP] B [SEP] after masking, L <= T
    segment_ids: list[int]          # (L,) 0 ... 0 1 ... 1
    is_random_next: bool            # True: B is from a random document (NSP label 1); SOP: A, B swapped
    masked_lm_positions: list[int]  # (n_pred,) ascending
    masked_lm_labels: list[str]     # (n_pred,) original tokens at those positions


# ----------------------------------------------------------------------------------------------
# reading documents (docs/bert-notes.md §3.1)

def read_documents(input_files: Sequence[str | os.PathLike], tokenizer) -> list[list[list[str]]]:
    """Documents as lists of segments (one tokenized line each); blank lines separate documents.

    Example: "a b\\nc\\n\\nd\\n" -> [[["a", "b"], ["c"]], [["d"]]].
    Lines are split on "\\n" only (like tf.gfile's readline) and must be UTF-8: the first bad
    byte is a ValueError naming file, line and byte (minibert.io.textio). The first line longer
    than LONG_LINE_CHARS is warned about when it is read, and their count at the end.
    """
    all_documents: list[list[list[str]]] = [[]]
    long_lines: list[tuple[str, int, int]] = []  # (file, line number, characters)
    for path in input_files:  # files are read in order into the same document list
        if not os.path.isfile(path):
            raise ValueError(f"corpus file not found: {path}")
        for lineno, line in enumerate(iter_lines(path), start=1):
            line = line.strip()
            if len(line) > LONG_LINE_CHARS:
                long_lines.append((str(path), lineno, len(line)))
                if len(long_lines) == 1:  # at once: tokenizing megabytes takes a minute
                    warn_long_lines(long_lines, first=True)
            if not line:  # empty lines are document delimiters
                all_documents.append([])
            tokens = tokenizer.tokenize(line)
            if tokens:
                all_documents[-1].append(tokens)
    if len(long_lines) > 1:
        warn_long_lines(long_lines)
    return [doc for doc in all_documents if doc]  # drop empty documents


def warn_long_lines(long_lines: list[tuple[str, int, int]], first: bool = False) -> None:
    """Warn about lines over LONG_LINE_CHARS: the first one as soon as it is read (before its
    slow tokenization), then, if there were more, once more with their count."""
    path, lineno, n_chars = long_lines[0]
    what = (f"{path}:{lineno} is a line of {n_chars:,} characters" if first else
            f"{len(long_lines)} lines are longer than {LONG_LINE_CHARS:,} characters, the first at "
            f"{path}:{lineno} ({n_chars:,} characters)")
    warnings.warn(f"{what}: the corpus format is one sentence per line, and each line is one "
                  "segment, cut to fit max_seq_length, so most of such a line is thrown away (after "
                  "a tokenization that takes a while); split the text into sentences", stacklevel=3)


def check_documents(documents: list[list[list[str]]], input_files: Sequence, pairs: bool = True) -> None:
    """Raise on an empty corpus; warn on the two corpus shapes that make NSP labels meaningless
    (only when the instances are sentence pairs: `pairs`; packed sequences have no NSP label)."""
    names = ", ".join(str(p) for p in input_files) or "(no files given)"
    if not documents:
        raise ValueError(f"the corpus has no tokens: {names} (expected one sentence per line, "
                         "a blank line between documents)")
    if not pairs:
        return
    if len(documents) < 2:
        warnings.warn(f"the corpus {names} has only 1 document: every random-next (NSP label 1) "
                      "B segment comes from that same document, sometimes the true continuation "
                      "(NVIDIA/DeepLearningExamples#421); separate documents with blank lines",
                      stacklevel=3)
    if all(len(doc) == 1 for doc in documents):
        warnings.warn(f"every document in {names} has a single segment (a blank line between "
                      "every sentence?): every instance is a forced random-next negative, NSP "
                      "label 1 for all (google-research/bert#125); put one sentence per line and "
                      "blank lines only between documents", stacklevel=3)


# ----------------------------------------------------------------------------------------------
# instances (docs/bert-notes.md §3.3 - §3.6)

def require_special_tokens(tokenizer, needed: Sequence[str], purpose: str) -> None:
    """ValueError listing the special tokens the vocab lacks (a BertTokenizer names its file),
    instead of a KeyError for [MASK] deep inside generation."""
    if hasattr(tokenizer, "check_special_tokens"):
        tokenizer.check_special_tokens(needed, purpose)
        return
    missing = [t for t in needed if t not in tokenizer.vocab]
    if missing:
        raise ValueError(f"the vocab lacks the special token(s) {' '.join(missing)}; {purpose} "
                         f"needs {' '.join(needed)}")


def check_generator_flags(dupe_factor, short_seq_prob, masked_lm_prob, max_predictions_per_seq) -> None:
    """ValueError naming the first generator flag out of its range (the same ranges TrainConfig
    checks), before any shard is made: a masked_lm_prob of 2 or NaN, or no passes at all, would
    otherwise make shards that look fine and teach nothing."""
    if isinstance(dupe_factor, bool) or not isinstance(dupe_factor, int) or dupe_factor < 1:
        raise ValueError(f"dupe_factor={dupe_factor!r} must be an integer >= 1 (passes over the corpus)")
    if isinstance(max_predictions_per_seq, bool) or not isinstance(max_predictions_per_seq, int) \
            or max_predictions_per_seq < 1:
        raise ValueError(f"max_predictions_per_seq={max_predictions_per_seq!r} must be an integer >= 1")
    if not 0.0 < masked_lm_prob <= 1.0:  # NaN fails every comparison
        raise ValueError(f"masked_lm_prob={masked_lm_prob} must be in (0, 1] (BERT: 0.15)")
    if not 0.0 <= short_seq_prob <= 1.0:
        raise ValueError(f"short_seq_prob={short_seq_prob} must be in [0, 1] (BERT: 0.1)")


def create_training_instances(input_files, tokenizer, max_seq_length, dupe_factor, short_seq_prob,
                              masked_lm_prob, max_predictions_per_seq, rng,
                              do_whole_word_mask=False, progress: Callable | None = None,
                              mask_shares=DEFAULT_FLAGS["mask_shares"],
                              sentence_order: bool = False, packing: str = "segment_pair") -> list[TrainingInstance]:
    """All instances of the corpus, exactly as google-research/bert creates them.

    `rng` is a `random.Random`; it is the only source of randomness, called in the order of
    docs/bert-notes.md §3.8. `progress(done, total, n_instances)` is called after each document, if given.
    `mask_shares` (MASK, SAME, RND) replaces BERT's 80/10/10 (check_mask_shares); the rng calls
    stay the same, so the default reproduces the original exactly. `sentence_order` makes ALBERT's
    SOP pairs instead of NSP pairs (create_instances_from_document). `packing` (PACKINGS) other
    than "segment_pair" makes RoBERTa's single-segment sequences instead of pairs
    (create_packed_instances); each pass after the first packs the documents in a new order.
    """
    mask_shares = check_mask_shares(mask_shares)
    check_packing(packing, sentence_order)
    if max_seq_length < 5:
        raise ValueError(f"max_seq_length={max_seq_length} is too small: [CLS] A [SEP] B [SEP] "
                         "needs at least 5 positions")
    check_generator_flags(dupe_factor, short_seq_prob, masked_lm_prob, max_predictions_per_seq)
    if not isinstance(rng, random.Random):
        raise ValueError(f"rng must be a random.Random (got {type(rng).__name__}); the exact "
                         "reproduction of the original relies on its call order")
    require_special_tokens(tokenizer, (CLS, SEP, MASK), "creating MLM/NSP instances")
    all_documents = read_documents(input_files, tokenizer)
    check_documents(all_documents, input_files, pairs=packing == "segment_pair")
    rng.shuffle(all_documents)

    vocab_words = list(tokenizer.vocab.keys())  # all vocab tokens in id order, specials included
    instances: list[TrainingInstance] = []
    total = dupe_factor * len(all_documents)
    if progress is not None:
        progress(0, total, 0)
    for dupe in range(dupe_factor):  # each pass redraws segmentation, pairing and masks
        if packing != "segment_pair":  # RoBERTa: packed sequences, no pairs
            if dupe:
                rng.shuffle(all_documents)  # FULL-SENTENCES: other neighbours across documents
            instances.extend(create_packed_instances(
                all_documents, max_seq_length, packing, masked_lm_prob, max_predictions_per_seq,
                vocab_words, rng, do_whole_word_mask, mask_shares))
            if progress is not None:
                progress((dupe + 1) * len(all_documents), total, len(instances))
            continue
        for document_index in range(len(all_documents)):
            instances.extend(create_instances_from_document(
                all_documents, document_index, max_seq_length, short_seq_prob, masked_lm_prob,
                max_predictions_per_seq, vocab_words, rng, do_whole_word_mask, mask_shares, sentence_order))
            if progress is not None:
                progress(dupe * len(all_documents) + document_index + 1, total, len(instances))
    rng.shuffle(instances)
    return instances


def create_instances_from_document(all_documents, document_index, max_seq_length, short_seq_prob,
                                   masked_lm_prob, max_predictions_per_seq, vocab_words, rng,
                                   do_whole_word_mask=False, mask_shares=DEFAULT_FLAGS["mask_shares"],
                                   sentence_order=False) -> list[TrainingInstance]:
    """Instances from one document (docs/bert-notes.md §3.4): chunks of segments split into A and B.

    `sentence_order` (ALBERT's SOP, docs/bert-notes.md §10.1): B is always the rest of the chunk,
    and A and B are swapped half the time (label 1 = swapped, kept in `is_random_next`). B never
    comes from another document: a chunk closes only once it has two segments, and a document's
    lone last segment makes no instance. False (the default) is BERT's NSP, the original's rng
    calls unchanged."""
    document = all_documents[document_index]
    max_num_tokens = max_seq_length - 3  # room for [CLS], [SEP], [SEP]

    # Mostly fill the sequence; with probability short_seq_prob aim shorter, to reduce the
    # mismatch between pretraining and short fine-tuning inputs. Once per document per pass.
    target_seq_length = max_num_tokens
    if rng.random() < short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)

    instances = []
    current_chunk: list[list[str]] = []
    current_length = 0
    i = 0
    while i < len(document):
        segment = document[i]
        current_chunk.append(segment)
        current_length += len(segment)
        full = current_length >= target_seq_length and (not sentence_order or len(current_chunk) >= 2)
        if i == len(document) - 1 or full:
            if current_chunk and not (sentence_order and len(current_chunk) == 1):
                # A = the first a_end segments of the chunk, a_end drawn only if there is a choice
                a_end = 1
                if len(current_chunk) >= 2:
                    a_end = rng.randint(1, len(current_chunk) - 1)
                tokens_a = [t for seg in current_chunk[:a_end] for t in seg]

                tokens_b: list[str] = []
                if sentence_order:  # SOP: the two consecutive parts of the chunk, swapped on a fair coin
                    tokens_b = [t for seg in current_chunk[a_end:] for t in seg]
                    is_random_next = rng.random() < 0.5  # True = swapped (SOP label 1)
                    if is_random_next:
                        tokens_a, tokens_b = tokens_b, tokens_a
                # a one-segment chunk is always random next (no draw); else a fair coin
                elif len(current_chunk) == 1 or rng.random() < 0.5:
                    is_random_next = True
                    target_b_length = target_seq_length - len(tokens_a)
                    # up to 10 tries for a different document; after that the same one is used
                    for _ in range(10):
                        random_document_index = rng.randint(0, len(all_documents) - 1)
                        if random_document_index != document_index:
                            break
                    random_document = all_documents[random_document_index]
                    random_start = rng.randint(0, len(random_document) - 1)
                    for j in range(random_start, len(random_document)):
                        tokens_b.extend(random_document[j])
                        if len(tokens_b) >= target_b_length:
                            break
                    # put-back: the chunk's unused segments are not wasted, the next chunk
                    # starts right after A
                    num_unused_segments = len(current_chunk) - a_end
                    i -= num_unused_segments
                else:
                    is_random_next = False  # actual next: B = the rest of the chunk
                    tokens_b = [t for seg in current_chunk[a_end:] for t in seg]

                truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
                assert len(tokens_a) >= 1 and len(tokens_b) >= 1, "truncation emptied a segment"

                tokens = [CLS, *tokens_a, SEP, *tokens_b, SEP]
                segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
                tokens, masked_lm_positions, masked_lm_labels = create_masked_lm_predictions(
                    tokens, masked_lm_prob, max_predictions_per_seq, vocab_words, rng,
                    do_whole_word_mask, mask_shares)
                instances.append(TrainingInstance(tokens, segment_ids, is_random_next,
                                                  masked_lm_positions, masked_lm_labels))
            current_chunk = []
            current_length = 0
        i += 1  # always, also after a put-back
    return instances


# ----------------------------------------------------------------------------------------------
# RoBERTa's input packing (docs/bert-notes.md §10.2): one segment of whole sentences, no pairs

PACKINGS = ("segment_pair", "full_sentences", "doc_sentences")  # BERT's pairs, RoBERTa's two packings


def check_packing(packing: str, sentence_order: bool = False) -> str:
    """ValueError unless `packing` is one of PACKINGS (and not packed with SOP pairs)."""
    if packing not in PACKINGS:
        raise ValueError(f"packing={packing!r} is not one of {PACKINGS}")
    if packing != "segment_pair" and sentence_order:
        raise ValueError(f"packing={packing!r} makes single-segment sequences; sentence_order (SOP) needs "
                         f"sentence pairs (packing 'segment_pair')")
    return packing


def pack_documents(documents: list[list[list[str]]], max_num_tokens: int, packing: str) -> list[list[str]]:
    """RoBERTa's inputs without [CLS] and the final [SEP]: the sentences of `documents`, in order,
    packed into token lists of at most `max_num_tokens`.

    "full_sentences": one stream across documents, with a [SEP] between two documents that share
    a sequence (it counts against the length; a document that begins a sequence needs none).
    "doc_sentences": a sequence never crosses a document, so a document's last one is shorter.
    A sentence that does not fit in what is left closes the sequence; one longer than a whole
    sequence is cut into pieces of max_num_tokens (the only split inside a sentence). So every
    token of the corpus is in exactly one sequence, in the corpus's order.

    Example, max_num_tokens 7, documents [[a b], [c d]] and [[e f], [g]]:
        full_sentences: [a b c d [SEP] e f], [g]
        doc_sentences:  [a b c d], [e f g]
    """
    sequences: list[list[str]] = []
    current: list[str] = []
    for document in documents:
        if packing == "doc_sentences" and current:  # never cross a document
            sequences.append(current)
            current = []
        for s, sentence in enumerate(document):
            sep = [SEP] if current and s == 0 else []  # another document's sentences precede it
            if current and len(current) + len(sep) + len(sentence) > max_num_tokens:
                sequences.append(current)  # the sentence does not fit: close the sequence
                current, sep = [], []
            current = current + sep + sentence
            while len(current) > max_num_tokens:  # only a sentence longer than a whole sequence
                sequences.append(current[:max_num_tokens])
                current = current[max_num_tokens:]
    if current:
        sequences.append(current)
    return sequences


def create_packed_instances(all_documents, max_seq_length, packing, masked_lm_prob, max_predictions_per_seq,
                            vocab_words, rng, do_whole_word_mask=False,
                            mask_shares=DEFAULT_FLAGS["mask_shares"]) -> list[TrainingInstance]:
    """[CLS] packed sentences [SEP] (pack_documents), one segment (segment_ids all 0), no NSP
    label (next_sentence_labels 0), masked like every other instance (create_masked_lm_predictions;
    a document-boundary [SEP] is never masked)."""
    instances = []
    for packed in pack_documents(all_documents, max_seq_length - 2, packing):  # room for [CLS], [SEP]
        tokens = [CLS, *packed, SEP]
        tokens, masked_lm_positions, masked_lm_labels = create_masked_lm_predictions(
            tokens, masked_lm_prob, max_predictions_per_seq, vocab_words, rng, do_whole_word_mask, mask_shares)
        instances.append(TrainingInstance(tokens, [0] * len(tokens), False, masked_lm_positions, masked_lm_labels))
    return instances


def truncate_seq_pair(tokens_a: list, tokens_b: list, max_num_tokens: int, rng) -> None:
    """Truncate the pair in place to at most max_num_tokens tokens (docs/bert-notes.md §3.5).

    The original deletes one token at a time, from the front or the back at random. Here the
    same decisions, with the same rng.random() call per token, are counted and applied as two
    slices at the end: `del tokens[0]` moves every other token, so a document on one line
    (a million tokens) took minutes in the one-at-a-time version."""
    len_a, len_b = len(tokens_a), len(tokens_b)
    cut = {"a_front": 0, "a_back": 0, "b_front": 0, "b_back": 0}
    while len_a + len_b > max_num_tokens:
        # trim the longer one; B on ties (A only if strictly longer)
        side = "a" if len_a > len_b else "b"
        assert (len_a if side == "a" else len_b) >= 1
        # random truncation side: the front half of the time, to avoid a bias to the end
        cut[side + ("_front" if rng.random() < 0.5 else "_back")] += 1
        if side == "a":
            len_a -= 1
        else:
            len_b -= 1
    for tokens, front, back in ((tokens_a, cut["a_front"], cut["a_back"]), (tokens_b, cut["b_front"], cut["b_back"])):
        del tokens[len(tokens) - back:]
        del tokens[:front]


def num_predictions(num_tokens: int, masked_lm_prob: float, max_predictions_per_seq: int) -> int:
    """How many positions to mask: len 128 -> 19, 10 -> 2, 30 -> 4, 50 -> 8, 5 -> 1 at 0.15.

    num_tokens includes [CLS] and the two [SEP]; Python's round is round-half-to-even.
    """
    return min(max_predictions_per_seq, max(1, int(round(num_tokens * masked_lm_prob))))


def create_masked_lm_predictions(tokens, masked_lm_prob, max_predictions_per_seq, vocab_words, rng,
                                 do_whole_word_mask=False, mask_shares=DEFAULT_FLAGS["mask_shares"]):
    """Mask tokens as the original does (docs/bert-notes.md §3.6); returns (output_tokens, positions, labels).

    With whole-word masking a `##` piece joins the previous candidate; the 80/10/10 decision is
    still drawn per piece, as in the reference (google-research/bert#910).
    `mask_shares` = (MASK, SAME, RND) generalises 80/10/10 with the original's two draws: [MASK]
    if the first is below MASK, else kept if the second is below SAME / (SAME + RND), else random
    (for the default, 0.8 and 0.1 / 0.2 = 0.5 exactly: the original's numbers and calls).
    """
    p_mask, p_same, p_rnd = check_mask_shares(mask_shares)
    p_same_of_rest = p_same / (p_same + p_rnd) if p_same + p_rnd > 0 else 0.0  # never read if p_mask is 1
    cand_indexes: list[list[int]] = []
    if not do_whole_word_mask:  # special tokens are never masked
        cand_indexes = [[i] for i, token in enumerate(tokens) if token != CLS and token != SEP]
    else:
        for i, token in enumerate(tokens):
            if token == CLS or token == SEP:  # special tokens are never masked
                continue
            if cand_indexes and token.startswith("##"):
                cand_indexes[-1].append(i)  # continuation piece: same word as the previous one
            else:
                cand_indexes.append([i])
    rng.shuffle(cand_indexes)

    output_tokens = list(tokens)
    num_to_predict = num_predictions(len(tokens), masked_lm_prob, max_predictions_per_seq)
    masked_lms: list[tuple[int, str]] = []
    covered_indexes: set[int] = set()
    for index_set in cand_indexes:
        if len(masked_lms) >= num_to_predict:
            break
        # a whole word that would overshoot the count is skipped, not cut
        if len(masked_lms) + len(index_set) > num_to_predict:
            continue
        if len(index_set) > 1 and any(index in covered_indexes for index in index_set):
            continue  # (a single index cannot be covered: each candidate is visited once)
        for index in index_set:
            covered_indexes.add(index)
            if rng.random() < p_mask:
                masked_token = MASK  # MASK share (BERT 80%): replace with [MASK]
            elif rng.random() < p_same_of_rest:
                masked_token = tokens[index]  # SAME share (10%): keep the original token
            else:
                # RND share (10%): a random vocab token (any, specials included; may equal the original)
                masked_token = vocab_words[rng.randint(0, len(vocab_words) - 1)]
            output_tokens[index] = masked_token
            masked_lms.append((index, tokens[index]))
    assert len(masked_lms) <= num_to_predict
    masked_lms.sort(key=lambda p: p[0])
    positions = [index for index, _ in masked_lms]
    labels = [label for _, label in masked_lms]
    return output_tokens, positions, labels


# ----------------------------------------------------------------------------------------------
# features (docs/bert-notes.md §3.7)

def instances_to_features(instances: Sequence[TrainingInstance], tokenizer, max_seq_length: int,
                          max_predictions_per_seq: int) -> dict[str, np.ndarray]:
    """The original padded features, plus `unmasked_input_ids` for dynamic masking.

    Shapes: every array in FEATURE_NAMES order is (N, T), (N, T), (N, T), (N, P), (N, P), (N, P),
    (N,); unmasked_input_ids is (N, T).
    """
    vocab = tokenizer.vocab
    N, T, P = len(instances), max_seq_length, max_predictions_per_seq
    input_ids = np.zeros((N, T), dtype=np.int32)               # (N, T)
    unmasked = np.zeros((N, T), dtype=np.int32)                # (N, T)
    input_mask = np.zeros((N, T), dtype=np.int32)              # (N, T)
    segment_ids = np.zeros((N, T), dtype=np.int32)             # (N, T)
    positions = np.zeros((N, P), dtype=np.int32)               # (N, P)
    lm_ids = np.zeros((N, P), dtype=np.int32)                  # (N, P)
    lm_weights = np.zeros((N, P), dtype=np.float32)            # (N, P)
    nsp = np.zeros((N,), dtype=np.int32)                       # (N,)
    for n, inst in enumerate(instances):
        L, k = len(inst.tokens), len(inst.masked_lm_positions)
        if L > T:
            raise ValueError(f"instance {n} has {L} tokens > max_seq_length={T}")
        if k > P:
            raise ValueError(f"instance {n} has {k} predictions > max_predictions_per_seq={P}")
        ids = [vocab[t] for t in inst.tokens]
        label_ids = [vocab[t] for t in inst.masked_lm_labels]
        input_ids[n, :L] = ids
        input_mask[n, :L] = 1
        segment_ids[n, :L] = inst.segment_ids
        positions[n, :k] = inst.masked_lm_positions
        lm_ids[n, :k] = label_ids
        lm_weights[n, :k] = 1.0
        nsp[n] = 1 if inst.is_random_next else 0  # 1 = random next (NotNext), 0 = IsNext
    unmasked[:] = input_ids
    rows = np.repeat(np.arange(N), P).reshape(N, P)            # (N, P)
    real = lm_weights > 0                                      # (N, P)
    unmasked[rows[real], positions[real]] = lm_ids[real]      # put the labels back
    return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids,
            "masked_lm_positions": positions, "masked_lm_ids": lm_ids,
            "masked_lm_weights": lm_weights, "next_sentence_labels": nsp,
            UNMASKED_NAME: unmasked}


# ----------------------------------------------------------------------------------------------
# dynamic masking (RoBERTa): redraw the masks of the unmasked pairs every epoch

def remask(unmasked_features: dict[str, np.ndarray], rng: np.random.Generator | int,
           masked_lm_prob: float, max_predictions_per_seq: int, vocab_size: int,
           special_ids: Sequence[int], mask_id: int,
           mask_shares=DEFAULT_FLAGS["mask_shares"]) -> dict[str, np.ndarray]:
    """New masks for unmasked pairs, vectorised, with the Google rule per sequence.

    Per row: exactly num_to_predict = min(P, max(1, round(L * masked_lm_prob))) positions
    (L = real tokens incl. [CLS]/[SEP], round half to even; fewer only if candidates run out),
    chosen uniformly among real tokens whose id is not in `special_ids`; each chosen position
    becomes [MASK] 80% / stays 10% / a random id 10%, the random id uniform over the whole vocab
    [0, vocab_size), specials included, exactly like Google.
    Unlike Google's static masking (Python `random.Random`, per-token loops) this path draws from
    a NumPy Generator, so its masks are not the ones the original script would draw; the rule and
    the distribution are the same. Whole-word masking is not applied here.
    `mask_shares` = (MASK, SAME, RND) replaces 80/10/10 (check_mask_shares): one uniform draw u
    per position, [MASK] if u < MASK, kept if u < MASK + SAME, else random.

    Shapes: unmasked_input_ids, input_mask, segment_ids (N, T), next_sentence_labels (N,) in;
    all FEATURE_NAMES out.
    """
    rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
    p_mask, p_same, _ = check_mask_shares(mask_shares)
    ids = np.asarray(unmasked_features[UNMASKED_NAME])                        # (N, T)
    input_mask = np.asarray(unmasked_features["input_mask"])                  # (N, T)
    N, T = ids.shape
    P = max_predictions_per_seq
    lengths = input_mask.sum(axis=1)                                          # (N,)
    n_pred = np.minimum(P, np.maximum(1, np.round(lengths * masked_lm_prob))).astype(np.int64)  # (N,)
    cand = (input_mask > 0) & ~np.isin(ids, np.asarray(special_ids))          # (N, T)
    k = np.minimum(n_pred, cand.sum(axis=1))                                  # (N,)

    # a uniform random subset of k candidates = the k candidates with the smallest random keys
    keys = rng.random((N, T))                                                 # (N, T)
    keys[~cand] = 2.0                                                         # never chosen first
    if P < T:
        first = np.argpartition(keys, P - 1, axis=1)[:, :P]                   # (N, P) unordered
        order = np.take_along_axis(first, np.argsort(
            np.take_along_axis(keys, first, axis=1), axis=1), axis=1)         # (N, P) by key
    else:
        order = np.argsort(keys, axis=1)                                      # (N, T)
        order = np.pad(order, ((0, 0), (0, P - T)), constant_values=T)        # (N, P)
    chosen = np.arange(P)[None, :] < k[:, None]                               # (N, P)
    positions = np.sort(np.where(chosen, order, T), axis=1)                   # (N, P) ascending
    valid = positions < T                                                     # (N, P) first k
    positions = np.where(valid, positions, 0)                                 # pad -> 0 ([CLS])

    orig = np.take_along_axis(ids, positions, axis=1)                         # (N, P)
    u = rng.random((N, P))                                                    # (N, P)
    random_ids = rng.integers(0, vocab_size, size=(N, P))                     # (N, P)
    replacement = np.where(u < p_mask, mask_id,                               # MASK share (80%): [MASK]
                           np.where(u < p_mask + p_same, orig, random_ids))   # SAME (10%) keep, RND (10%) random
    input_ids = ids.astype(np.int32, copy=True)                               # (N, T)
    rows = np.broadcast_to(np.arange(N)[:, None], (N, P))                     # (N, P)
    input_ids[rows[valid], positions[valid]] = replacement[valid]
    return {"input_ids": input_ids,
            "input_mask": input_mask.astype(np.int32, copy=False),
            "segment_ids": np.asarray(unmasked_features["segment_ids"], dtype=np.int32),
            "masked_lm_positions": positions.astype(np.int32),                # (N, P)
            "masked_lm_ids": np.where(valid, orig, 0).astype(np.int32),       # (N, P)
            "masked_lm_weights": valid.astype(np.float32),                    # (N, P)
            "next_sentence_labels": np.asarray(unmasked_features["next_sentence_labels"],
                                               dtype=np.int32)}


# ----------------------------------------------------------------------------------------------
# statistics

def generation_stats(data, tokenizer) -> dict[str, Any]:
    """Counts of a data set (instances or features): what the generator actually produced.

    Predictions are classified by the input token at the masked position: [MASK], the original
    token ("kept"; a random draw that hits the original counts here), or anything else ("random").
    """
    if isinstance(data, dict):
        feats = data
    else:
        T = max((len(i.tokens) for i in data), default=1)
        P = max((len(i.masked_lm_positions) for i in data), default=1)
        feats = instances_to_features(data, tokenizer, T, max(P, 1))
    mask_id = tokenizer.vocab[MASK]
    w = feats["masked_lm_weights"] > 0                                                # (N, P)
    at_pos = np.take_along_axis(feats["input_ids"], feats["masked_lm_positions"], axis=1)  # (N, P)
    n_inst = int(feats["input_ids"].shape[0])
    n_pred = int(w.sum())
    n_mask = int((w & (at_pos == mask_id)).sum())
    n_kept = int((w & (at_pos != mask_id) & (at_pos == feats["masked_lm_ids"])).sum())
    nsp = feats["next_sentence_labels"]
    return {
        "instances": n_inst,
        "tokens": int(feats["input_mask"].sum()),
        "nsp_is_next": int((nsp == 0).sum()),
        "nsp_random_next": int((nsp == 1).sum()),
        "random_next_share": float(nsp.mean()) if n_inst else 0.0,
        "predictions": n_pred,
        "mean_predictions_per_seq": n_pred / n_inst if n_inst else 0.0,
        "share_mask": n_mask / n_pred if n_pred else 0.0,
        "share_random": (n_pred - n_mask - n_kept) / n_pred if n_pred else 0.0,
        "share_kept": n_kept / n_pred if n_pred else 0.0,
    }


def format_stats(stats: dict[str, Any], pairs: str | None = "NSP") -> str:
    """One line of generation_stats; `pairs` names the pair labels: "NSP", "SOP" or None (packed)."""
    first, second = ("in order", "swapped") if pairs == "SOP" else ("IsNext", "random-next")
    return (f"instances {stats['instances']}, tokens {stats['tokens']}, "
            + ("" if pairs is None else
               f"{pairs} {first} {stats['nsp_is_next']} / {second} {stats['nsp_random_next']} "
               f"({second} share {stats['random_next_share']:.3f}), ")
            + f"mean predictions/seq {stats['mean_predictions_per_seq']:.2f}, "
            f"masked inputs: [MASK] {stats['share_mask']:.3f} / random {stats['share_random']:.3f}"
            f" / kept {stats['share_kept']:.3f}")
