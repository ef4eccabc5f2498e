"""T5's span corruption on minibert's WordPiece ids, and the batches the encoder-decoder trains on.

**The noise mask** (`random_spans_noise_mask`, T5's algorithm, reproduced in NumPy): for a
sequence of `length` tokens, the number of noise tokens is fixed first, round(length * 0.15),
kept between 1 and length - 1; the number of noise spans is round(noise tokens / 3), at least
one. Then both the noise tokens and the kept tokens are cut into that many non-empty runs, each
cut uniformly at random among all ways to split n items into k non-empty parts (choose k - 1
of the n - 1 gaps between items to be run boundaries). The runs alternate, kept run first:
kept, noise, kept, noise, ..., so the sequence always starts with a kept run and ends with a
noise run. Every such mask with those counts is equally likely. For a 64-token chunk: 10 noise
tokens in 3 spans.

**Input and target.** Each noise span is replaced in the input by one sentinel, the i-th span
by `<extra_id_i>`; the target is the sentinels again, each followed by the span it stands for,
and both end with an end-of-sequence token:

    tokens   the list is sorted in place and returned
    noise    .   .    x  x      .  .     .   x
    input    the list <extra_id_0> in place and <extra_id_1> [SEP]
    target   <extra_id_0> is sorted <extra_id_1> returned [SEP]

(With the kept run first and the noise run last this is exactly T5's layout: the target's
sentinels mark where each dropped span goes, so `reconstruct` can put them back.)

**Sentinel ids.** T5 takes the last ids of its vocabulary for the sentinels, counting down:
`<extra_id_0>` is vocab_size - 1, `<extra_id_1>` vocab_size - 2, ... Here the vocabulary the
model uses is minibert's WordPiece vocabulary (vocab.txt, unchanged) with `num_sentinels` ids
appended after it: with an 8192-token vocab.txt and 100 sentinels, the model's vocabulary has
8292 ids and `<extra_id_0>` is 8291. The BERT tokenizer never produces these ids (text is not
looked up as `<extra_id_0>`: its basic tokenizer would split the string at `<`, `_` and `>`),
they enter only through span corruption, and `t5_tokens` names them for printing. So the default
vocab file, the BERT tokenizer and every BERT model are untouched.

The encoder reads the corrupted input (no [CLS]); the decoder reads [CLS] (the start token,
T5 uses its padding id) followed by the target shifted right, and predicts the target. [SEP]
ends both sequences (T5's EOS); [PAD] (id 0) pads.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

IGNORE = -100  # label of a padded target position (minibert.family.t5.IGNORE)


# ---------------------------------------------------------------------------------------------
# the sentinel ids

def sentinel_id(i: int, vocab_size: int) -> int:
    """<extra_id_i>'s id in a vocabulary of `vocab_size` ids (sentinels included): T5 counts down
    from the last id. >>> sentinel_id(0, 8292), sentinel_id(1, 8292)  ->  (8291, 8290)"""
    return vocab_size - 1 - i


def t5_tokens(base_tokens: list[str], num_sentinels: int) -> list[str]:
    """The model's vocabulary as strings: vocab.txt's tokens, then the sentinels in id order
    (<extra_id_{n-1}> first, <extra_id_0> last)."""
    return list(base_tokens) + [f"<extra_id_{num_sentinels - 1 - j}>" for j in range(num_sentinels)]


def is_sentinel(ids, vocab_size: int, num_sentinels: int) -> np.ndarray:
    ids = np.asarray(ids)
    return ids >= vocab_size - num_sentinels


# ---------------------------------------------------------------------------------------------
# the noise mask

def random_segmentation(num_items: int, num_segments: int, rng: np.random.Generator) -> np.ndarray:
    """Lengths of `num_segments` non-empty runs that add up to `num_items`, every split equally
    likely. E.g. 10 items in 3 runs -> [4, 1, 5] or [2, 6, 2] ..."""
    if not 1 <= num_segments <= num_items:
        raise ValueError(f"cannot cut {num_items} items into {num_segments} non-empty runs")
    first = np.zeros(num_items, dtype=bool)  # first[j]: item j starts a new run
    first[1 + rng.choice(num_items - 1, size=num_segments - 1, replace=False)] = True
    segment = np.cumsum(first)  # (num_items,) run index of each item
    return np.bincount(segment, minlength=num_segments)  # (num_segments,)


def random_spans_noise_mask(length: int, rng: np.random.Generator, noise_density: float = 0.15,
                            mean_noise_span_length: float = 3.0) -> np.ndarray:
    """T5's noise mask: (length,) bool, True for the tokens to drop (see the module docstring)."""
    if length < 1:
        raise ValueError(f"cannot corrupt a sequence of {length} tokens")
    orig_length, length = length, max(length, 2)  # a 1-token sequence is masked as if it had 2
    num_noise = min(max(int(round(length * noise_density)), 1), length - 1)
    num_spans = max(int(round(num_noise / mean_noise_span_length)), 1)
    noise_lengths = random_segmentation(num_noise, num_spans, rng)  # (num_spans,)
    kept_lengths = random_segmentation(length - num_noise, num_spans, rng)  # (num_spans,)
    interleaved = np.stack([kept_lengths, noise_lengths], axis=1).reshape(-1)  # kept, noise, kept, ...
    run = np.repeat(np.arange(2 * num_spans), interleaved)  # (length,) run index of each token
    return (run % 2 == 1)[:orig_length]  # odd runs are noise


# ---------------------------------------------------------------------------------------------
# input and target from a mask, and back

def span_corrupt(tokens, noise_mask, vocab_size: int, eos_id: int) -> tuple[np.ndarray, np.ndarray]:
    """(input, target) ids: each noise span -> one sentinel in the input; the target lists each
    sentinel followed by its span. Both end with eos_id."""
    tokens, noise = np.asarray(tokens), np.asarray(noise_mask, dtype=bool)
    if tokens.shape != noise.shape:
        raise ValueError(f"tokens {tokens.shape} and noise mask {noise.shape} differ in shape")
    inputs, targets, span = [], [], -1
    for j, (tok, drop) in enumerate(zip(tokens.tolist(), noise.tolist())):
        starts_span = drop and (j == 0 or not noise[j - 1])
        if starts_span:
            span += 1
            inputs.append(sentinel_id(span, vocab_size))
            targets.append(sentinel_id(span, vocab_size))
        (targets if drop else inputs).append(tok)
    return np.array(inputs + [eos_id], dtype=np.int64), np.array(targets + [eos_id], dtype=np.int64)


def reconstruct(inputs, targets, vocab_size: int, num_sentinels: int, eos_id: int) -> list[int]:
    """The original tokens: each sentinel in the input replaced by what follows the same sentinel
    in the target. A sentinel missing from the target gives a ValueError naming it."""
    spans, current = {}, None
    for tok in list(targets):
        if tok == eos_id:
            break
        if is_sentinel(tok, vocab_size, num_sentinels):
            current = spans.setdefault(int(tok), [])
        elif current is not None:
            current.append(int(tok))
    out = []
    for tok in list(inputs):
        if tok == eos_id:
            break
        if is_sentinel(tok, vocab_size, num_sentinels):
            if int(tok) not in spans:
                raise ValueError(f"sentinel <extra_id_{vocab_size - 1 - int(tok)}> is not in the target")
            out.extend(spans[int(tok)])
        else:
            out.append(int(tok))
    return out


# ---------------------------------------------------------------------------------------------
# chunks of the corpus and padded batches

def document_chunks(documents: list[list[str]], tokenizer, chunk_len: int, min_len: int = 8) -> list[np.ndarray]:
    """Each document's sentences as one token stream, cut into pieces of `chunk_len` WordPiece
    ids (the last piece of a document kept if it has at least `min_len` ids)."""
    chunks = []
    for doc in documents:
        ids = tokenizer.convert_tokens_to_ids([t for sentence in doc for t in tokenizer.tokenize(sentence)])
        for start in range(0, len(ids), chunk_len):
            piece = ids[start:start + chunk_len]
            if len(piece) >= min_len:
                chunks.append(np.array(piece, dtype=np.int64))
    return chunks


def max_lengths(chunk_len: int, noise_density: float = 0.15, mean_noise_span_length: float = 3.0) -> tuple[int, int]:
    """(input length, target length) of a corrupted chunk of `chunk_len` tokens, EOS included:
    the longest over every chunk length up to chunk_len (the counts are fixed by the length)."""
    t_in = t_tg = 0
    for n in range(1, chunk_len + 1):
        length = max(n, 2)
        noise = min(max(int(round(length * noise_density)), 1), length - 1)
        spans = max(int(round(noise / mean_noise_span_length)), 1)
        t_in, t_tg = max(t_in, n - min(noise, n) + spans + 1), max(t_tg, noise + spans + 1)
    return t_in, t_tg


class Special(NamedTuple):
    pad: int
    start: int  # the decoder's first input ([CLS])
    eos: int  # the end of input and target ([SEP])


def pad_batch(pairs: list[tuple[np.ndarray, np.ndarray]], special: Special, T: int | None = None,
              S: int | None = None) -> dict:
    """(input, target) id pairs -> the batch t5_forward takes, padded to T and S (default: the
    longest). decoder_input_ids = [start] + target[:-1]; labels = target, IGNORE at padding."""
    T = T or max(len(a) for a, _ in pairs)
    S = S or max(len(b) for _, b in pairs)
    B = len(pairs)
    batch = dict(input_ids=np.full((B, T), special.pad, np.int64), attention_mask=np.zeros((B, T), np.int64),
                 decoder_input_ids=np.full((B, S), special.pad, np.int64),
                 decoder_attention_mask=np.zeros((B, S), np.int64), labels=np.full((B, S), IGNORE, np.int64))
    for b, (inp, tgt) in enumerate(pairs):
        if len(inp) > T or len(tgt) > S:
            raise ValueError(f"example {b}: input {len(inp)} / target {len(tgt)} tokens exceed the batch's {T} / {S}")
        batch["input_ids"][b, :len(inp)] = inp
        batch["attention_mask"][b, :len(inp)] = 1
        batch["decoder_input_ids"][b, :len(tgt)] = np.concatenate([[special.start], tgt[:-1]])
        batch["decoder_attention_mask"][b, :len(tgt)] = 1
        batch["labels"][b, :len(tgt)] = tgt
    return batch


def corrupted_batch(chunks: list[np.ndarray], rng: np.random.Generator, vocab_size: int, special: Special,
                    T: int, S: int, noise_density: float = 0.15, mean_noise_span_length: float = 3.0) -> dict:
    """A fresh noise mask for each chunk (dynamic corruption: each pass over the corpus drops
    other spans), padded to (B, T) and (B, S)."""
    pairs = [span_corrupt(c, random_spans_noise_mask(len(c), rng, noise_density, mean_noise_span_length),
                          vocab_size, special.eos) for c in chunks]
    return pad_batch(pairs, special, T, S)


# ---------------------------------------------------------------------------------------------
# text-to-text SST-2: the sentence in, the word "positive" or "negative" out

SST2_PREFIX = "sst2 sentence:"
SST2_WORDS = {"0": "negative", "1": "positive"}


def sst2_pairs(examples, tokenizer, max_input: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """GLUE SST-2 TextExamples -> (input, target) id pairs: "sst2 sentence: <text>" [SEP] ->
    "positive" | "negative" [SEP], as T5 casts classification as text."""
    for word in SST2_WORDS.values():
        if word not in tokenizer.vocab:
            raise ValueError(f"the vocabulary has no token {word!r}, which the SST-2 targets need")
    pairs = []
    for ex in examples:
        if ex.label not in SST2_WORDS:
            raise ValueError(f"{ex.where}: label {ex.label!r} is not one of {sorted(SST2_WORDS)}")
        ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(f"{SST2_PREFIX} {ex.text_a}"))[:max_input - 1]
        target = [tokenizer.vocab[SST2_WORDS[ex.label]], tokenizer.sep_id]
        pairs.append((np.array(ids + [tokenizer.sep_id], np.int64), np.array(target, np.int64)))
    return pairs
