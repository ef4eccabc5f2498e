# %% [markdown]
# # Lesson 08: WordPiece, learning a vocabulary and cutting words into pieces
#
# **Goal.** BERT does not see characters or whole words; it sees *WordPiece tokens* such as
# `hug`, `##s`, `##ing`. This lesson learns such a vocabulary from word counts, one merge at a
# time, then uses it to cut new words into pieces with Google's greedy longest-match-first rule.
#
# **Finish line.** On the classic toy corpus (`hug` 10, `pug` 5, `pun` 12, `bun` 4, `hugs` 5)
# the *score* rule's first merge is `##gs` while the *frequency* rule's is `##ug`; the trained
# vocab encodes `bugs` as `b ##u ##gs` and turns `mug` and `bum` into a single `[UNK]`; the Hugging
# Face course's second example is reproduced token for token. Every check is an `assert`.

# %% [markdown]
# ## Setup
# `minibert.text.wordpiece_trainer` learns a vocab; `minibert.text.tokenizer` uses it. No arrays in this
# lesson, only strings and counts.

# %%
import re
from fractions import Fraction

import matplotlib.pyplot as plt
import numpy as np

import course  # lessons/course.py: where pictures go, how exercises are graded
from course import FAST, show
from minibert.text import tokenizer, wordpiece_trainer as wpt

# %% [markdown]
# ## The idea
# A vocabulary of whole words can never be big enough (names, typos, `tokenization`), and a
# vocabulary of characters makes sequences very long. WordPiece sits in between: it starts from
# characters and repeatedly **merges** the best adjacent pair into a new token, until the vocab
# has the size you asked for. Frequent words end up as one token, rare words as a few pieces.
#
# **Why `##`?** A piece that continues a word is written with a `##` prefix: `##s` is "an `s`
# glued to what came before", `s` is "a word that starts with s". The two mean different things
# (the plural ending versus the start of `sun`), so they are different tokens, and decoding can
# rebuild the words: `hug ##s` -> `hugs`, `hug s` -> two words.
#
# **The training loop** (docs/bert-notes.md §2.2, the Hugging Face course's formulation):
# 1. Split each word into characters: first one bare, the rest with `##`: `hugs` -> `h ##u ##g ##s`.
#    The starting vocab is `[PAD] [UNK] [CLS] [SEP] [MASK]` plus these symbols, sorted.
# 2. **count**: `freq(token)` and `freq(pair)` over all splits, weighted by word count.
# 3. **score**: `score(a, b) = freq(ab) / (freq(a) * freq(b))`.
# 4. **pick** the best pair (ties: the pair met first in the corpus) and **merge** it everywhere:
#    `(h, ##u)` -> `hu`, `(##g, ##s)` -> `##gs` (drop `b`'s `##`).
# 5. **record** the new token; repeat until the vocab is full.
#
# The score rule is a *teaching formulation*: Google never released its trainer. The score
# prefers pairs whose parts rarely appear apart. Hugging Face's `tokenizers` library actually
# uses plain pair **frequency** (like BPE). `wordpiece_trainer` implements both
# (`merge_rule="score"` or `"frequency"`); any vocab works with BERT's tokenizer.

# %% [markdown]
# ## Step 1: the starting splits and the alphabet

# %%
word_counts = {"hug": 10, "pug": 5, "pun": 12, "bun": 4, "hugs": 5}  # first-appearance order
splits = {w: wpt.initial_split(w) for w in word_counts}
print(splits)
alphabet = sorted({s for split in splits.values() for s in split})
print("alphabet:", alphabet)
assert splits["hugs"] == ["h", "##u", "##g", "##s"]
assert alphabet == ["##g", "##n", "##s", "##u", "b", "h", "p"]  # '#' sorts before letters

# %% [markdown]
# ## Step 2 and 3: count and score, by hand
# `##u` appears in every word: `freq(##u) = 10 + 5 + 12 + 4 + 5 = 36`. A pair `(x, ##u)` occurs
# at most `freq(x)` times, so its score is at most `freq(x) / (freq(x) * 36) = 1/36`. `(##g, ##s)`
# occurs 5 times, `freq(##g) = 20`, `freq(##s) = 5`: score `5 / (20 * 5) = 1/20`, the best.
# The frequency rule instead picks the most common pair: `(##u, ##g)`, 20 times.

# %%
token_freq, pair_freq = wpt.count_pairs(splits, word_counts)
scores = wpt.pair_scores(token_freq, pair_freq, "score")
for pair in pair_freq:
    print(f"{pair!s:16} freq={pair_freq[pair]:2d}  score={scores[pair]:.4f}")
assert token_freq["##u"] == 36 and token_freq["##g"] == 20
assert max(scores, key=scores.get) == ("##g", "##s")  # the first pair with the top score
assert abs(scores[("##g", "##s")] - 5 / (20 * 5)) < 1e-12
assert max(pair_freq, key=pair_freq.get) == ("##u", "##g")

# %% [markdown]
# ## Step 4 and 5: train, with every merge printed
# `verbose=True` prints one line per merge: the pair, the new token, its score and its count.
# Three merges take the vocab from 12 to 15 tokens.

# %%
print("score rule:")
vocab_score = wpt.train_from_word_counts(word_counts, 15, merge_rule="score", verbose=True)
print("frequency rule:")
vocab_freq = wpt.train_from_word_counts(word_counts, 15, merge_rule="frequency", verbose=True)
assert vocab_score[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]  # fixed ids 0-4
assert vocab_score[12:] == ["##gs", "hu", "hugs"]
assert vocab_freq[12:] == ["##ug", "##un", "hug"]

# %% [markdown]
# The second score merge is interesting: after `##gs` exists, every remaining pair scores 1/36,
# a tie, so the pair met first wins: `(h, ##u)` in `hug`. Then `(hu, ##gs)` scores
# `5 / (15 * 5) = 1/15` and `hugs` becomes a single token.
#
# The fast trainer (a heap of scores, updating only words that contain the merged pair) must
# give exactly what the slow, readable algorithm gives:

# %%
for rule in wpt.MERGE_RULES:
    assert wpt.train_naive(word_counts, 15, merge_rule=rule) == \
        wpt.train_from_word_counts(word_counts, 15, merge_rule=rule)

# %% [markdown]
# ## Tokenizing: greedy longest-match-first
# To cut a word with a finished vocab, BERT does **not** replay the merges. It takes the
# **longest** prefix that is in the vocab, then the longest `##` piece from there, and so on
# (`minibert.text.tokenizer.wordpiece`). If at some point *no* piece matches, the **whole word**
# becomes `[UNK]`, even if its start matched: `bum` starts with `b ##u` but `##m` is not in the
# vocab, so the answer is `[UNK]`, not `b ##u [UNK]`.

# %%
vocab = {t: i for i, t in enumerate(vocab_score)}
for word, expected in [("hugs", ["hugs"]), ("bugs", ["b", "##u", "##gs"]),
                       ("hug", ["hu", "##g"]), ("mug", ["[UNK]"]), ("bum", ["[UNK]"])]:
    pieces = tokenizer.wordpiece(word, vocab)
    print(f"{word:5} -> {pieces}")
    assert pieces == expected, (word, pieces)

# %% [markdown]
# Note `hug` -> `hu ##g`: the vocab has no `hug` token (only `hugs`), and `hugs` is longer than
# the word, so the longest prefix that matches is `hu`.

# %% [markdown]
# ## A real text: the Hugging Face course example
# Now the full pipeline: the BERT *basic tokenizer* splits text into words (whitespace, and
# punctuation as separate words), then we train a 70-token vocab (cased, as in the course) and
# tokenize a new sentence with `BertTokenizer`.

# %%
corpus = [
    "This is the Hugging Face Course.",
    "This chapter is about tokenization.",
    "This section shows several tokenizer algorithms.",
    "Hopefully, you will be able to understand how they are trained and generate tokens.",
]
counts: dict[str, int] = {}
for line in corpus:
    for word in tokenizer.basic_tokenize(line, do_lower_case=False):
        counts[word] = counts.get(word, 0) + 1
print(tokenizer.basic_tokenize(corpus[3], do_lower_case=False)[:4])
course_vocab = wpt.train_from_word_counts(counts, 70)
learned = course_vocab[5 + 40:]  # after the 5 specials and the 40-symbol alphabet
print("learned:", learned)
assert len(course_vocab) == 70 and learned[:3] == ["ab", "##fu", "Fa"]
assert learned[-3:] == ["##za", "##zat", "##ut"]
tok = tokenizer.BertTokenizer(course_vocab, do_lower_case=False)
pieces = tok.tokenize("This is the Hugging Face course!")
print(pieces)
assert pieces == ["Th", "##i", "##s", "is", "th", "##e", "Hugg", "##i", "##n", "##g", "Fac", "##e",
                  "c", "##o", "##u", "##r", "##s", "##e", "[UNK]"]  # '!' never seen: [UNK]
assert tok.tokenize("HOgging") == ["[UNK]"]  # no '##O' in the vocab: the whole word is lost

# %% [markdown]
# ## A picture: pieces per word as the vocab grows
# With more merges, words need fewer pieces. We train vocabs of growing size on the same small
# corpus and plot the average number of pieces per word (saved to `lessons/out/08_pieces.png`).

# %%
sizes = list(range(45, 131, 5 if not FAST else 15))
avg_pieces = []
for size in sizes:
    v = wpt.train_from_word_counts(counts, size)
    vmap = {t: i for i, t in enumerate(v)}
    total = sum(c * len(tokenizer.wordpiece(w, vmap)) for w, c in counts.items())
    avg_pieces.append(total / sum(counts.values()))
fig, ax = plt.subplots(figsize=(5, 3.5))
ax.plot(sizes, avg_pieces, "o-")
ax.set_xlabel("vocab size")
ax.set_ylabel("pieces per word (training corpus)")
fig.tight_layout()
show(fig, "08_pieces.png")
print(dict(zip(sizes, (round(a, 2) for a in avg_pieces))))
assert all(a >= b for a, b in zip(avg_pieces, avg_pieces[1:])), "more merges, fewer pieces"
assert avg_pieces[-1] < avg_pieces[0] / 2

# %% [markdown]
# ## Discussion
# - Training keeps **only the final vocab**, not the list of merges (unlike BPE). Encoding uses
#   longest-match, which usually, but not always, gives the same pieces the merges would.
# - The whole-word `[UNK]` rule means one unseen character (`!` above) loses the whole word.
#   Real vocabs include every character of the training corpus, bare and with `##`, so `[UNK]`
#   is rare in practice.
# - The score rule favours pairs whose parts are rare on their own; the frequency rule favours
#   common pairs. Both give valid BERT vocabs; `python -m minibert vocab --merge-rule ...`
#   chooses. minibert's default corpus vocab uses the score rule.

# %% [markdown]
# ## Exercises
# Replace each `raise NotImplementedError(...)` with your code and re-run; the cell after the
# stubs grades your functions on known answers and on inputs it draws when grading, and names the case that failed. A stub left as it is makes the lesson go on with the reference solution
# (`lessons/solutions/08_wordpiece.py`).
#
# 1. `my_merge(split, a, b)`: merge every adjacent `(a, b)` left to right, without overlaps:
#    `['h', '##u', '##g']`, `('h', '##u')` -> `['hu', '##g']` (the merged token drops `b`'s `##`).
# 2. `my_wordpiece(word, vocab)`: greedy longest-match-first with `##` continuations and the
#    whole-word `[UNK]` rule. Graded on 13 words, on the toy vocab and on the course's.
# 3. `my_best_pair(word_counts, splits)`: the pair the score rule merges next,
#    `freq(ab) / (freq(a) freq(b))` with frequencies weighted by word count (ties: the pair met
#    first, going through the words in order).

# %%
def my_merge(split, a, b):
    """list of pieces, a, b -> the list with every adjacent (a, b) merged, left to right"""
    raise NotImplementedError("exercise 1: write the merge")  # your code here


def my_wordpiece(word, vocab):
    """word, vocab (a dict or set of tokens) -> list of pieces, or ["[UNK]"]"""
    raise NotImplementedError("exercise 2: write greedy longest-match-first")  # your code here


def my_best_pair(word_counts, splits):
    """{word: count}, {word: list of pieces} -> (a, b), the best pair by the score rule"""
    raise NotImplementedError("exercise 3: find the best pair")  # your code here


# %%
ex = course.Exercises("08_wordpiece")
course_splits = {w: wpt.initial_split(w) for w in counts}


def check_merge(fn):
    r = np.random.default_rng(8001)  # pieces drawn now over a small alphabet, so pairs repeat and touch
    drawn = []
    for _ in range(4):
        chars = r.choice(list("abg"), int(r.integers(4, 10))).tolist()
        split = [chars[0]] + ["##" + c for c in chars[1:]]
        i = int(r.integers(0, len(split) - 1))
        a, b = split[i], split[i + 1]
        sep = "\x00"  # the grader's own answer: a regex over the joined pieces, left to right, no overlap
        joined = re.sub(f"(?<={sep}){re.escape(a + sep + b)}(?={sep})", a + b[2:], sep + sep.join(split) + sep)
        drawn.append(course.equal(f"drawn {split}, merging ({a!r}, {b!r})", fn(list(split), a, b),
                                  joined.strip(sep).split(sep)))
    return [course.equal("two merges", fn(["h", "##u", "##g", "##u", "##g"], "##u", "##g"), ["h", "##ug", "##ug"]),
            course.equal("left to right, no overlap", fn(["##g", "##g", "##g"], "##g", "##g"), ["##gg", "##g"]),
            course.equal("first piece", fn(["h", "##u", "##g"], "h", "##u"), ["hu", "##g"]),
            course.equal("no match", fn(["b", "##u", "##n"], "h", "##u"), ["b", "##u", "##n"])] + drawn


def check_wordpiece(fn):
    answers = [  # (word, vocab, its pieces), worked out by the longest-match-first rule
        ("hugs", "toy", ["hugs"]), ("bugs", "toy", ["b", "##u", "##gs"]), ("hug", "toy", ["hu", "##g"]),
        ("mug", "toy", ["[UNK]"]), ("bum", "toy", ["[UNK]"]), ("pun", "toy", ["p", "##u", "##n"]),
        ("hugsb", "toy", ["[UNK]"]), ("b", "toy", ["b"]),
        ("This", "course", ["Th", "##i", "##s"]), ("Hugging", "course", ["Hugg", "##i", "##n", "##g"]),
        ("tokenization", "course", ["t", "##o", "##k", "##e", "##n", "##i", "##zat", "##i", "##o", "##n"]),
        ("HOgging", "course", ["[UNK]"]), ("algorithms", "course", ["a", "##l", "##g", "##o", "##r", "##i", "##thms"]),
    ]
    vocabs = {"toy": vocab, "course": tok.vocab}  # the lesson's vocabs, handed to your function on purpose
    results = [course.equal(f"{w!r} ({v} vocab)", fn(w, vocabs[v]), want) for w, v, want in answers]
    r = np.random.default_rng(8002)  # words drawn now, glued from toy-vocab pieces: checked for what any answer keeps
    heads = sorted(t for t in vocab if t.isalpha())
    tails = sorted(t[2:] for t in vocab if t.startswith("##"))
    for _ in range(4):
        word = str(r.choice(heads)) + "".join(r.choice(tails, int(r.integers(1, 4))))
        got = list(fn(word, vocab))
        legal = got == ["[UNK]"] or (
            "".join(p.removeprefix("##") for p in got) == word and all(p in vocab for p in got)
            and not got[0].startswith("##") and all(p.startswith("##") for p in got[1:]))
        results.append(course.true(f"drawn {word!r} (toy vocab): vocab pieces that spell the word, or [UNK]", legal,
                                   "" if legal else f"got {got}"))
    return results


def check_best_pair(fn):
    r = np.random.default_rng(8003)  # a corpus drawn now: words over four letters, each with a count
    wc = {}
    while len(wc) < 5:
        wc.setdefault("".join(r.choice(list("hugs"), int(r.integers(2, 5)))), int(r.integers(1, 20)))
    sp = {w: wpt.initial_split(w) for w in wc}
    freq, pairs = {}, {}  # piece and pair frequencies weighted by word count, pairs in first-met order
    for w, n in wc.items():
        for piece in sp[w]:
            freq[piece] = freq.get(piece, 0) + n
        for pair in zip(sp[w], sp[w][1:]):
            pairs[pair] = pairs.get(pair, 0) + n
    best = max(pairs, key=lambda ab: Fraction(pairs[ab], freq[ab[0]] * freq[ab[1]]))  # exact; max keeps the first of ties
    return [course.equal("toy corpus (score 1/20)", fn(word_counts, splits), ("##g", "##s")),
            course.equal("course corpus (score 0.2)", fn(counts, course_splits), ("a", "##b")),
            course.equal(f"drawn corpus {wc}", tuple(fn(dict(wc), {w: list(p) for w, p in sp.items()})), best)]


my_merge = ex.grade(1, my_merge, check_merge,
                    refuses=("text.wordpiece_trainer.merge_pair", "text.wordpiece_trainer.merged_token"))
my_wordpiece = ex.grade(2, my_wordpiece, check_wordpiece,
                        refuses=("text.tokenizer.wordpiece", "text.tokenizer.BertTokenizer.wordpiece",
                                 "text.tokenizer.BertTokenizer.tokenize"))
my_best_pair = ex.grade(3, my_best_pair, check_best_pair,
                        refuses=("text.wordpiece_trainer.count_pairs", "text.wordpiece_trainer.pair_scores",
                                 "text.wordpiece_trainer.train_naive", "text.wordpiece_trainer.train_from_word_counts"))  # docs/bert-notes.md §2.2 works the toy example

# %% [markdown]
# ## Recap
# - WordPiece training: start from characters (`##` marks continuations), repeatedly merge the
#   best pair; the score rule `freq(ab) / (freq(a) freq(b))` and the frequency rule differ
#   already on the first merge (`##gs` vs `##ug`).
# - Tokenizing: greedy longest-match-first; if any part of a word cannot be matched, the whole
#   word is `[UNK]`.
#
# **Next: lesson 09**, turning tokenized text into BERT's training examples: `[CLS] A [SEP] B
# [SEP]`, next-sentence labels, and the 80/10/10 masking rule.

# %%
print("lesson 08 passed")
