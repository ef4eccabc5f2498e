"""Learn a WordPiece vocabulary (vocab.txt) from text.

Google never released its vocabulary learner (docs/bert-notes.md §2.1); any vocab that the greedy
longest-match tokenizer (minibert.text.tokenizer) consumes is a valid BERT vocab. This module
implements the two rules people mean by "WordPiece training":

- `score` (default, docs/bert-notes.md §2.2, the Hugging Face course's teaching formulation of WordPiece):
  merge the adjacent pair with the highest  freq(ab) / (freq(a) * freq(b)).  It prefers pairs
  whose parts rarely occur apart, e.g. (##g, ##s) in the toy corpus below.
- `frequency` (docs/bert-notes.md §2.3, what the Hugging Face `tokenizers` WordPieceTrainer really does):
  merge the most frequent adjacent pair, as BPE does.

Worked example (docs/bert-notes.md §2.2): word counts hug 10, pug 5, pun 12, bun 4, hugs 5.
    splits:   h ##u ##g | p ##u ##g | p ##u ##n | b ##u ##n | h ##u ##g ##s
    alphabet: b h p ##g ##n ##s ##u
    score:     freq(##u)=36, so every pair with ##u scores <= 20/(36*20); (##g, ##s) scores
               5/(20*5) = 1/20, the best  ->  first merge ##gs
    frequency: (##u, ##g) occurs 20 times, the most  ->  first merge ##ug

Tie-breaking (both rules, deterministic): among pairs with the same score (or count), the pair
that occurs FIRST in the corpus wins: the earliest word in first-appearance order that contains
it, then the leftmost position in that word. This is exactly the order in which the course's
code meets pairs (it keeps the first maximum of a dict filled in that order), so the results
match the course's example token for token.

Two implementations, which the tests check against each other:
- `train_naive`: the course algorithm as written, recounting everything after each merge.
  Small pure helpers (`initial_split`, `count_pairs`, `pair_scores`, `merge_pair`), easy to read.
- `train_from_word_counts`: the same result, fast. It counts unique words once, keeps pair
  counts, the words each pair occurs in, and a lazy max-heap of pair scores; after each merge
  it updates only the words that contained the pair and the scores that changed.
"""
from __future__ import annotations

import heapq
import os
import sys
import time
from collections import Counter
from pathlib import Path

from minibert.io.cli import command_parser
from minibert.io import outputs
from minibert.io.progress import Progress
from minibert.io.textio import error_line, read_text, refuse_special_file
from minibert.text.tokenizer import MAX_INPUT_CHARS_PER_WORD, SPECIAL_TOKENS, basic_tokenize

MERGE_RULES = ("score", "frequency")
# The rule every vocabulary minibert builds for a run uses (the default corpus's, a CORPUS= or
# --corpus-from-task corpus's, `python -m minibert vocab`'s): the frequency rule, as Hugging
# Face's WordPiece trainer. The course's score rule (the default of the functions below, which
# lesson 08 teaches) divides by the parts' frequencies, so on a corpus of a few hundred thousand
# words it spends the vocabulary on chains of rare suffixes and never merges the commonest
# words: on SST-2's sentences "the" stays `th ##e` and dev words average 2.9 pieces (1.1 with
# this rule), and a BERT pretrained on such pieces reads characters (docs/finetuning.md).
DEFAULT_MERGE_RULE = "frequency"


# ---------------------------------------------------------------------------------------------
# Small pure helpers (the readable version of the algorithm)

def initial_split(word: str) -> list[str]:
    """'hugs' -> ['h', '##u', '##g', '##s']: first character bare, the others with '##'."""
    return [word[0]] + ["##" + c for c in word[1:]]


def merged_token(a: str, b: str) -> str:
    """('h', '##u') -> 'hu'; ('##g', '##s') -> '##gs': drop b's '##' and glue."""
    return a + (b[2:] if b.startswith("##") else b)


def count_pairs(splits: dict[str, list[str]], word_counts: dict[str, int]):
    """Token and adjacent-pair frequencies, weighted by word count, in first-seen order.

    {'hug': [h, ##u, ##g]} with count 10 -> tokens {h: 10, ##u: 10, ##g: 10},
    pairs {(h, ##u): 10, (##u, ##g): 10}.
    """
    token_freq: dict[str, int] = {}
    pair_freq: dict[tuple[str, str], int] = {}
    for word, count in word_counts.items():
        split = splits[word]
        for token in split:
            token_freq[token] = token_freq.get(token, 0) + count
        for pair in zip(split, split[1:]):
            pair_freq[pair] = pair_freq.get(pair, 0) + count
    return token_freq, pair_freq


def pair_scores(token_freq, pair_freq, merge_rule: str = "score") -> dict:
    """score: freq(ab) / (freq(a) * freq(b)), e.g. (##g, ##s): 5 / (20 * 5) = 0.05.
    frequency: freq(ab)."""
    if merge_rule == "frequency":
        return dict(pair_freq)
    return {(a, b): n / (token_freq[a] * token_freq[b]) for (a, b), n in pair_freq.items()}


def merge_pair(split: list[str], a: str, b: str) -> list[str]:
    """Merge every (a, b) left to right, non-overlapping: [h, ##u, ##g], (h, ##u) -> [hu, ##g]."""
    out: list[str] = []
    i = 0
    while i < len(split):
        if i + 1 < len(split) and split[i] == a and split[i + 1] == b:
            out.append(merged_token(a, b))
            i += 2
        else:
            out.append(split[i])
            i += 1
    return out


def _alphabet(word_counts: dict[str, int], limit_alphabet: int | None):
    """Characters kept (all, or the `limit_alphabet` most frequent) and the sorted alphabet."""
    chars: Counter = Counter()
    for word, count in word_counts.items():
        for ch in word:
            chars[ch] += count
    if limit_alphabet is not None and len(chars) > limit_alphabet:
        kept = {ch for ch, _ in sorted(chars.items(), key=lambda kv: (-kv[1], kv[0]))[:limit_alphabet]}
    else:
        kept = set(chars)
    return kept


def _prepare(word_counts, vocab_size, merge_rule, limit_alphabet, special_tokens):
    """Validate inputs; return (kept word counts, starting vocab = specials + sorted alphabet)."""
    if merge_rule not in MERGE_RULES:
        raise ValueError(f"merge_rule={merge_rule!r} is not one of {MERGE_RULES}")
    if limit_alphabet is not None and limit_alphabet < 1:
        raise ValueError(f"limit_alphabet={limit_alphabet} must be at least 1")
    words = {w: int(c) for w, c in word_counts.items()
             if c > 0 and 0 < len(w) <= MAX_INPUT_CHARS_PER_WORD}
    if not words:
        raise ValueError("no words to train on: the corpus is empty (or has only words longer "
                         f"than {MAX_INPUT_CHARS_PER_WORD} characters)")
    kept = _alphabet(words, limit_alphabet)
    # words with a character outside the kept alphabet can only ever encode as [UNK]: skip them
    words = {w: c for w, c in words.items() if all(ch in kept for ch in w)}
    alphabet = sorted({s for w in words for s in initial_split(w)})
    vocab = list(special_tokens) + [s for s in alphabet if s not in special_tokens]
    if vocab_size < len(vocab):
        raise ValueError(
            f"vocab_size={vocab_size} is smaller than the {len(special_tokens)} special tokens "
            f"plus the {len(vocab) - len(special_tokens)}-symbol alphabet ({len(vocab)}); "
            "raise vocab_size or set limit_alphabet")
    return words, vocab


def train_naive(word_counts: dict[str, int], vocab_size: int, merge_rule: str = "score",
                min_frequency: int = 0, limit_alphabet: int | None = None,
                special_tokens=SPECIAL_TOKENS) -> list[str]:
    """The course algorithm, recounting all pairs after every merge. Slow; for reading and tests."""
    words, vocab = _prepare(word_counts, vocab_size, merge_rule, limit_alphabet, special_tokens)
    splits = {w: initial_split(w) for w in words}
    in_vocab = set(vocab)
    while len(vocab) < vocab_size:
        token_freq, pair_freq = count_pairs(splits, words)                   # count
        scores = pair_scores(token_freq, pair_freq, merge_rule)              # score
        best, best_score = None, None
        for pair, s in scores.items():                                       # pick: first max
            if pair_freq[pair] >= min_frequency and (best_score is None or s > best_score):
                best, best_score = pair, s
        if best is None:
            break                                                            # nothing left
        splits = {w: merge_pair(sp, *best) for w, sp in splits.items()}      # merge
        token = merged_token(*best)
        if token not in in_vocab:                                            # record
            vocab.append(token)
            in_vocab.add(token)
    return vocab


# ---------------------------------------------------------------------------------------------
# The fast trainer

class _State:
    """Incremental statistics over the unique words (token ids, not strings)."""

    def __init__(self, words: dict[str, int], vocab: list[str], merge_rule: str):
        self.vocab = vocab
        self.tok_id = {t: i for i, t in enumerate(vocab)}
        self.tok_len = [len(t) - 2 if t.startswith("##") else len(t) for t in vocab]  # chars
        self.tok_freq = [0] * len(vocab)
        self.syms: list[list[int]] = []       # current split of each word, as token ids
        self.counts: list[int] = []           # word count
        self.pair_count: dict[tuple[int, int], int] = {}
        self.pair_words: dict[tuple[int, int], set[int]] = {}  # words containing the pair
        self.first_key: dict[tuple[int, int], tuple[int, int]] = {}  # <= (word, char offset)
        self.tok_pairs: dict[int, set[tuple[int, int]]] = {}   # token -> pairs containing it
        self.score_rule = merge_rule == "score"
        for w, (word, count) in enumerate(words.items()):
            ids = [self.tok_id[s] for s in initial_split(word)]
            self.syms.append(ids)
            self.counts.append(count)
            for t in ids:
                self.tok_freq[t] += count
            for off, pair in enumerate(zip(ids, ids[1:])):
                self._add_pair(pair, count, w, (w, off))

    def _add_pair(self, pair, count, w, key):
        if pair not in self.pair_count:
            self.pair_count[pair] = 0
            self.pair_words[pair] = set()
            self.first_key[pair] = key
            self.tok_pairs.setdefault(pair[0], set()).add(pair)
            self.tok_pairs.setdefault(pair[1], set()).add(pair)
        elif key < self.first_key[pair]:
            self.first_key[pair] = key
        self.pair_count[pair] += count
        self.pair_words[pair].add(w)

    def score(self, pair) -> float | int:
        """The merge priority: freq(ab) / (freq(a) * freq(b)), or freq(ab)."""
        n = self.pair_count[pair]
        if not self.score_rule:
            return n
        return n / (self.tok_freq[pair[0]] * self.tok_freq[pair[1]])

    def entry(self, pair):
        """Heap entry: highest score first, then the earliest (word, offset) occurrence."""
        return (-self.score(pair), self.first_key[pair], pair)

    def push_all(self, heap: list, pairs, min_frequency: int) -> None:
        """Push fresh entries for `pairs` (the hot loop of training, so written out inline)."""
        count, key, freq, push = self.pair_count, self.first_key, self.tok_freq, heapq.heappush
        for q in pairs:
            n = count[q]
            if n >= min_frequency:
                push(heap, (-(n / (freq[q[0]] * freq[q[1]])) if self.score_rule else -n, key[q], q))

    def exact_key(self, pair) -> tuple[int, int]:
        """(first word containing the pair, char offset of its leftmost occurrence there)."""
        w = min(self.pair_words[pair])
        ids, off = self.syms[w], 0
        for i in range(len(ids) - 1):
            if ids[i] == pair[0] and ids[i + 1] == pair[1]:
                return w, off
            off += self.tok_len[ids[i]]
        raise AssertionError(f"pair {pair} not found in word {w}")

    def merge(self, pair) -> tuple[int, set]:
        """Merge `pair` in every word containing it; return (new id, pairs whose score rose)."""
        a, b = pair
        token = self.vocab[a] + self.vocab[b][2:]
        new = self.tok_id.get(token)
        if new is None:  # a string can be reached by two merge paths: then it keeps one id
            new = len(self.vocab)
            self.vocab.append(token)
            self.tok_id[token] = new
            self.tok_len.append(self.tok_len[a] + self.tok_len[b])
            self.tok_freq.append(0)
        delta: dict[tuple[int, int], int] = {}
        for w in sorted(self.pair_words[pair]):
            old_ids, c = self.syms[w], self.counts[w]
            ids: list[int] = []
            i, n = 0, len(old_ids)
            while i < n:
                if i + 1 < n and old_ids[i] == a and old_ids[i + 1] == b:
                    ids.append(new)
                    self.tok_freq[a] -= c
                    self.tok_freq[b] -= c
                    self.tok_freq[new] += c
                    i += 2
                else:
                    ids.append(old_ids[i])
                    i += 1
            self.syms[w] = ids
            old_pairs = list(zip(old_ids, old_ids[1:]))
            new_pairs = list(zip(ids, ids[1:]))
            for q in old_pairs:
                delta[q] = delta.get(q, 0) - c
            for q in new_pairs:
                delta[q] = delta.get(q, 0) + c
            old_set, new_set = set(old_pairs), set(new_pairs)
            for q in old_set - new_set:
                self.pair_words[q].discard(w)
            off = 0
            for q in new_pairs:
                if q not in old_set:
                    self._add_pair(q, 0, w, (w, off))
                off += self.tok_len[q[0]]
        risen = set()
        for q, d in delta.items():
            if d == 0:
                continue
            self.pair_count[q] += d
            if self.pair_count[q] == 0:
                self._remove_pair(q)
            elif d > 0:
                risen.add(q)
        if self.score_rule:  # freq(a), freq(b) fell, so every pair containing them scores higher
            for t in (a, b, new):
                risen |= self.tok_pairs.get(t, set())
        return new, risen

    def _remove_pair(self, q):
        del self.pair_count[q], self.pair_words[q], self.first_key[q]
        for t in set(q):
            pairs = self.tok_pairs[t]
            pairs.discard(q)
            if not pairs:
                del self.tok_pairs[t]


def _pop_best(state: _State, heap: list, min_frequency: int):
    """Pop heap entries until one is current (lazy deletion); return (pair, score) or None.

    Invariant: every live pair has an entry whose score and key are at least as good as its
    current ones. An entry that is out of date is pushed again with the current values.
    """
    while heap:
        neg_score, stored_key, pair = heapq.heappop(heap)
        count = state.pair_count.get(pair, 0)
        if count == 0 or count < min_frequency:
            continue  # gone, or too rare (a pair's count only rises via a fresh push)
        score = state.score(pair)
        if score != -neg_score:
            heapq.heappush(heap, state.entry(pair))
            continue
        key = state.exact_key(pair)
        if key != stored_key:
            state.first_key[pair] = key
            heapq.heappush(heap, state.entry(pair))
            continue
        return pair, score
    return None


def train_from_word_counts(word_counts: dict[str, int], vocab_size: int,
                           merge_rule: str = "score", min_frequency: int = 0,
                           limit_alphabet: int | None = None, special_tokens=SPECIAL_TOKENS,
                           verbose: bool = False, progress: bool = False) -> list[str]:
    """Learn a vocabulary from word counts (a dict in first-appearance order).

    Returns specials + sorted alphabet + merged tokens in merge order, at most `vocab_size`
    tokens. Pairs seen fewer than `min_frequency` times are never merged. With
    `limit_alphabet`, only the most frequent characters are kept, and words containing any
    other character are skipped (they can only encode as [UNK]). Words longer than 200
    characters are skipped for the same reason. Training stops early if no pair is left.

    >>> train_from_word_counts({"hug": 10, "pug": 5, "pun": 12, "bun": 4, "hugs": 5}, 15)[5:]
    ['##g', '##n', '##s', '##u', 'b', 'h', 'p', '##gs', 'hu', 'hugs']
    """
    words, vocab = _prepare(word_counts, vocab_size, merge_rule, limit_alphabet, special_tokens)
    state = _State(words, vocab, merge_rule)
    # pairs rarer than min_frequency are never pushed; a pair whose count rises is pushed again
    heap: list = []
    state.push_all(heap, state.pair_count, min_frequency)                    # count
    n_start, t0 = len(vocab), time.perf_counter()
    bar = Progress("wordpiece", vocab_size, "tokens") if progress else None
    total = vocab_size - n_start
    merges = 0
    while len(state.vocab) < vocab_size:
        best = _pop_best(state, heap, min_frequency)                         # score + pick
        if best is None:
            break                                                            # nothing left
        pair, score = best
        count = state.pair_count[pair]
        new, risen = state.merge(pair)                                       # merge + record
        state.push_all(heap, risen, min_frequency)                           # rescore
        merges += 1
        if verbose:
            a, b = (state.vocab[t] for t in pair)
            print(f"merge {len(state.vocab) - n_start}/{total}: ({a}, {b}) -> {state.vocab[new]} "
                  f"score={score:.6g} count={count}")
        if bar is not None and merges % 250 == 0:
            bar.update(len(state.vocab), f"{merges:,} merges")
    if bar is not None:
        bar.done(f"wordpiece: vocab {len(state.vocab)}/{vocab_size} after {merges} merges "
                 f"({time.perf_counter() - t0:.1f}s)")
    return state.vocab


# ---------------------------------------------------------------------------------------------
# From files

def count_words(files, do_lower_case: bool = True) -> dict[str, int]:
    """Basic-tokenize every line of every file; word -> count, in first-appearance order.

    Files must be UTF-8: the first invalid byte is a ValueError naming file, line and byte.
    """
    counts: dict[str, int] = {}
    for path in files:
        refuse_special_file(path)  # /dev/zero is not "not found"
        if not Path(path).is_file():
            raise FileNotFoundError(f"corpus file not found: {path}")
        for line in read_text(path).splitlines():
            for word in basic_tokenize(line, do_lower_case):
                counts[word] = counts.get(word, 0) + 1
    return counts


def train_wordpiece(files, vocab_size: int, do_lower_case: bool = True,
                    merge_rule: str = "score", min_frequency: int = 0,
                    limit_alphabet: int | None = None, verbose: bool = False,
                    progress: bool = True) -> list[str]:
    """Learn a WordPiece vocabulary from text files (specials [PAD] [UNK] [CLS] [SEP] [MASK]
    are ids 0-4). Words are the BERT basic tokenizer's, lowercased unless do_lower_case=False.
    """
    files = [files] if isinstance(files, (str, Path)) else list(files)
    if not files:
        raise ValueError("no corpus files given")
    counts = count_words(files, do_lower_case)
    if not counts:
        raise ValueError(f"the corpus is empty: no words in {', '.join(map(str, files))}")
    return train_from_word_counts(counts, vocab_size, merge_rule=merge_rule,
                                  min_frequency=min_frequency, limit_alphabet=limit_alphabet,
                                  verbose=verbose, progress=progress)


def check_output_file(path: str | Path, flag: str = "--out") -> Path:
    """Fail before a slow job if `path` cannot be written as a file: it is a directory, or its
    nearest existing ancestor is not a writable directory (missing parents are created later)."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{flag} {path} is a directory; give the file to write, e.g. "
                         f"{flag} {path / 'vocab.txt'}")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise ValueError(f"{flag} {path}: the file exists and is not writable")
        return path
    parent = path.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ValueError(f"{flag} {path}: {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"{flag} {path}: directory {parent} is not writable")
    return path


def cli(argv: list[str]) -> int:
    """python -m minibert vocab --files a.txt b.txt --vocab-size 8192 --out vocab.txt"""
    parser = command_parser("vocab", "Train a WordPiece vocab.txt from text files.")
    parser.add_argument("--files", nargs="+", required=True, help="UTF-8 text files")
    parser.add_argument("--vocab-size", type=int, default=8192)
    parser.add_argument("--out", default="vocab.txt", help="output vocab.txt path")
    parser.add_argument("--merge-rule", choices=MERGE_RULES, default=DEFAULT_MERGE_RULE,
                        help=f"default {DEFAULT_MERGE_RULE}; `score` is the course's rule (lesson 08), poor on small corpora")
    parser.add_argument("--cased", action="store_true", help="keep case and accents")
    parser.add_argument("--min-frequency", type=int, default=0)
    parser.add_argument("--limit-alphabet", type=int, default=None)
    parser.add_argument("--verbose", action="store_true", help="print every merge")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    try:
        check_output_file(args.out)  # before training, which can take minutes
        outputs.check_output(args.out, inputs=args.files)
        vocab = train_wordpiece(args.files, args.vocab_size, do_lower_case=not args.cased,
                                merge_rule=args.merge_rule, min_frequency=args.min_frequency,
                                limit_alphabet=args.limit_alphabet, verbose=args.verbose)
        path = outputs.write_output(args.out, "".join(t + "\n" for t in vocab))  # vocab.txt; a FIFO is written into
    except (OSError, ValueError) as e:
        print(error_line(e), file=sys.stderr)
        return 1
    print(f"wrote {path} ({len(vocab)} tokens, {time.perf_counter() - t0:.1f}s)")
    return 0
