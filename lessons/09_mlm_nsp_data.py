# %% [markdown]
# # Lesson 09: BERT's training examples, masked words and next sentences
#
# **Goal.** BERT learns from raw text with two self-made tasks. **MLM** (masked language
# model): hide about 15% of the tokens and ask the model to guess them. **NSP** (next sentence
# prediction): show two text pieces A and B and ask whether B really followed A. This lesson
# runs minibert's copy of Google's generator (`minibert.data.pretraining_data`) on a small corpus and
# looks at what it produces.
#
# **Finish line.** Every instance has the form `[CLS] A [SEP] B [SEP]` with segment ids
# `0...0 1...1`; NSP labels are 0 (IsNext) or 1 (random B); of the masked positions about 80% show
# `[MASK]`, 10% a random token and 10% the original (measured, within a tolerance); a sequence of
# 128 tokens gets 19 predictions; static and dynamic masking follow the same rule. Every check is
# an `assert`; a bar chart of the measured shares goes to `lessons/out/09_mask_shares.png`.

# %% [markdown]
# ## Setup
# A small corpus in the format the generator reads: **one sentence per line, a blank line
# between documents**. We learn a WordPiece vocab for it with lesson 08's trainer (frequency
# rule, 300 tokens: common words stay whole, rarer ones split into `##` pieces).
# Shape legend: `N` instances, `T = max_seq_length`, `P = max_predictions_per_seq`.

# %%
import random

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

import course  # lessons/course.py: where pictures go, how exercises are graded
from course import FAST, OUT, ROOT, show  # FAST: fewer copies of the corpus
from minibert.data import pretraining_data as pd
from minibert.text.tokenizer import BertTokenizer
from minibert.text.wordpiece_trainer import train_wordpiece

# the small corpus lessons 09 and 11 share (data/lessons_corpus.txt): ten documents of four
# sentences, one sentence per line, a blank line between documents
DOCUMENTS = [doc.split("\n") for doc in (ROOT / "data" / "lessons_corpus.txt").read_text(encoding="utf-8")
             .strip().split("\n\n")][:8]  # the first eight documents, each a list of sentences
corpus_path = OUT / "09_corpus.txt"
corpus_path.write_text("\n\n".join("\n".join(doc) for doc in DOCUMENTS) + "\n", encoding="utf-8")
vocab = train_wordpiece([corpus_path], vocab_size=300, merge_rule="frequency", progress=False)
tok = BertTokenizer(vocab)  # lowercases, like bert-base-uncased
print(f"{len(DOCUMENTS)} documents, vocab of {len(tok)} tokens")
print(tok.tokenize(DOCUMENTS[5][2]))  # words seen once or twice split into pieces

# %% [markdown]
# ## The input format: `[CLS] A [SEP] B [SEP]`
# One training example ("instance") packs two pieces of text into one sequence:
#
#     [CLS] the cat sat on the warm mat . [SEP] it watched the birds ... [SEP]
#     seg:  0   0   0   0  0   0    0   0   0    1  1       1   1     ... 1
#
# - `[CLS]` ("classification") sits at position 0; the NSP head reads the model's output there.
# - `[SEP]` ends A and ends B. **Segment ids** are 0 for `[CLS] A [SEP]` and 1 for `B [SEP]`;
#   the model adds a learned segment embedding so it knows which side each token is on.
# - **NSP label**: half of the time B is the text that really followed A in the same document
#   (label 0, IsNext); otherwise B starts at a random place in *another* document (label 1).
#   A chunk of a single sentence has nothing to split, so it always gets a random B.
#
# A and B are not single sentences: the generator collects whole sentences until the target
# length (`max_seq_length - 3`, room for the three specials) is reached, then cuts the
# collection at a random sentence boundary. If the pair is too long, the longer side loses a
# token at a random end until it fits.

# %%
T, P = 32, 5  # max_seq_length, max_predictions_per_seq (= round(32 * 0.15))
dupe_factor = 20 if FAST else 100  # how many differently masked copies of the corpus
rng = random.Random(12345)  # the generator uses Python's random.Random, as Google's does
instances = pd.create_training_instances(
    [corpus_path], tok, max_seq_length=T, dupe_factor=dupe_factor, short_seq_prob=0.1,
    masked_lm_prob=0.15, max_predictions_per_seq=P, rng=rng)
print(f"{len(instances)} instances")


def unmasked(inst: pd.TrainingInstance) -> list[str]:
    """The tokens before masking: put each label back at its position."""
    tokens = list(inst.tokens)
    for position, label in zip(inst.masked_lm_positions, inst.masked_lm_labels):
        tokens[position] = label
    return tokens


def describe(inst: pd.TrainingInstance) -> None:
    """Print one instance: original text, what the model sees, segment ids, labels."""
    print("original:", " ".join(unmasked(inst)))
    print("input:   ", " ".join(inst.tokens))
    print("segments:", " ".join(str(s) for s in inst.segment_ids))
    meaning = "(random B)" if inst.is_random_next else "(IsNext)"
    print("NSP label:", int(inst.is_random_next), meaning)
    print("predict (position, true token):", list(zip(inst.masked_lm_positions,
                                                      inst.masked_lm_labels)))


describe(instances[0])
describe(next(inst for inst in instances if not inst.is_random_next))

# %% [markdown]
# A piece may start with `##`, or stop mid-sentence: truncation cut it at a random end.
#
# ## Picture: MLM masking and an NSP pair, on real instances
# Two instances from the generator, one whose B really follows A (IsNext) and one whose B was
# taken from another document. Each box is one input token, coloured by segment; a box with a
# red frame is a prediction target, with what the model is asked to predict written under it,
# and whether the input shows `[MASK]`, a random token or the original. Saved as
# `lessons/out/09_mlm_nsp_example.png`.

# %%
def masking_case(inst, position, label):
    """What the input shows at a prediction target: "[MASK]", "random" or "kept"."""
    seen = inst.tokens[position]
    return "[MASK]" if seen == "[MASK]" else "kept" if seen == label else "random"


def draw_instance(ax, inst, title):
    """One instance as a row of token boxes (segment colours) with its prediction targets."""
    colours = {0: "#cfe2f3", 1: "#fce5cd"}  # segment A, segment B
    targets = dict(zip(inst.masked_lm_positions, inst.masked_lm_labels))  # position -> true token
    for t, (token, seg) in enumerate(zip(inst.tokens, inst.segment_ids)):
        special = token in ("[CLS]", "[SEP]")
        ax.add_patch(Rectangle((t, 0), 0.92, 1, facecolor="#dddddd" if special else colours[seg],
                               edgecolor="red" if t in targets else "grey", lw=2 if t in targets else 0.5))
        ax.text(t + 0.46, 0.5, token, rotation=90, ha="center", va="center", fontsize=7)
        if t in targets:
            case = masking_case(inst, t, targets[t])
            ax.text(t + 0.46, -0.1, f"{targets[t]}\n({case})", ha="center", va="top", fontsize=7, color="red")
    ax.set_xlim(-0.2, len(inst.tokens) + 0.2)
    ax.set_ylim(-0.8, 1.1)
    ax.axis("off")
    ax.set_title(title, fontsize=9, loc="left")


def has_every_case(inst):
    return len({masking_case(inst, p, lab) for p, lab in zip(inst.masked_lm_positions, inst.masked_lm_labels)}) > 1


picked = {}
for inst in instances:  # an instance of each NSP label, preferably showing more than [MASK]
    if inst.is_random_next not in picked or (has_every_case(inst) and not has_every_case(picked[inst.is_random_next])):
        picked[inst.is_random_next] = inst
fig, axes = plt.subplots(2, 1, figsize=(13, 4.2))
draw_instance(axes[0], picked[False], "NSP label 0 (IsNext): B is the text that followed A in the same document")
draw_instance(axes[1], picked[True], "NSP label 1 (random B): B starts at a random sentence of another document")
fig.text(0.01, 0.01, "blue: segment A (ids 0), orange: segment B (ids 1), grey: [CLS] / [SEP]; red frame: "
         "prediction target, with the true token and what the input shows there", fontsize=8)
fig.tight_layout(rect=(0, 0.04, 1, 1))
show(fig, "09_mlm_nsp_example.png")
# %% [markdown]
# ## Checking the format of every instance
# We check the *original* tokens: the input can show any vocab token at a masked position, even
# a `[SEP]` (a random replacement may draw a special token, as in Google's code).

# %%
for inst in instances:
    toks, seg = unmasked(inst), inst.segment_ids
    first_sep = toks.index("[SEP]")
    assert len(toks) <= T and toks[0] == "[CLS]" and toks[-1] == "[SEP]"
    assert toks.count("[SEP]") == 2 and 1 < first_sep < len(toks) - 2  # A and B non-empty
    assert seg == [0] * (first_sep + 1) + [1] * (len(toks) - first_sep - 1)
    assert all(toks[p] not in ("[CLS]", "[SEP]") for p in inst.masked_lm_positions)
    assert inst.masked_lm_positions == sorted(set(inst.masked_lm_positions))

nsp = np.array([inst.is_random_next for inst in instances])  # (N,)
print(f"NSP: {np.mean(~nsp):.3f} IsNext (label 0), {np.mean(nsp):.3f} random (label 1); "
      f"so about {2 * np.mean(nsp) - 1:.0%} of the chunks held a single sentence (discussion below)")
assert 0.4 < nsp.mean() < 0.7  # a fair coin, plus the forced single-sentence negatives

# %% [markdown]
# ## How many tokens to predict
# About 15% of each instance, with a floor and a cap (`max_predictions_per_seq`). The details
# matter for the arrays' shapes, and they are not the obvious ones. Here is what Google's rule
# (`pd.num_predictions`) gives for a few lengths, with a cap of 20. Which tokens does the length
# count, how does it round (look at 10, 30, 50 and 70), and what happens to a very short
# instance? That is exercise 1; the rule itself is written out after the exercises.

# %%
for n in (5, 10, 30, 50, 70, 128, 512):
    print(f"len {n:3d} -> {pd.num_predictions(n, 0.15, 20)} predictions")
for inst in instances:  # the generator's instances follow the same rule, with this lesson's cap P
    assert len(inst.masked_lm_positions) == pd.num_predictions(len(inst.tokens), 0.15, P)

# %% [markdown]
# ## The 80/10/10 rule, measured
# Each chosen position is **always** a prediction target (its label is the original token), but
# what the model *sees* there is drawn once:
# - 80%: `[MASK]`;
# - 10%: the original token, unchanged (so the model cannot assume "unmasked means correct");
# - 10%: a random token from the whole vocab (specials included; it can even hit the original).
#
# (Google draws this from two uniform numbers, one per decision: exercise 3.)
#
# Why not always `[MASK]`? `[MASK]` never appears when BERT is later used on real text. The 20%
# that look like ordinary tokens force the model to keep a good guess for *every* position.
# We count the three cases over all predictions.

# %%
def measured_shares(tokens_seen, labels):
    """Shares of ([MASK], random, kept) among predictions: what the input shows vs the label."""
    seen, lab = np.array(tokens_seen), np.array(labels)  # (n,) (n,)
    is_mask = seen == "[MASK]"  # (n,)
    is_kept = ~is_mask & (seen == lab)  # (n,)  a random draw that hits the original counts here
    return np.array([is_mask.mean(), (~is_mask & ~is_kept).mean(), is_kept.mean()])  # (3,)


seen = [inst.tokens[p] for inst in instances for p in inst.masked_lm_positions]
labels = [label for inst in instances for label in inst.masked_lm_labels]
static_shares = measured_shares(seen, labels)
n_static = len(labels)
print(f"{n_static} predictions: [MASK] {static_shares[0]:.3f}, random {static_shares[1]:.3f}, "
      f"kept {static_shares[2]:.3f}")
tol = 4 * np.sqrt(0.8 * 0.2 / n_static)  # 4 standard deviations of the 80% share
assert np.allclose(static_shares, [0.8, 0.1, 0.1], atol=tol), (static_shares, tol)

features = pd.instances_to_features(instances, tok, T, P)
stats = pd.generation_stats(features, tok)  # the library's count of the same thing
assert np.allclose([stats["share_mask"], stats["share_random"], stats["share_kept"]],
                   static_shares)

# %% [markdown]
# ## From instances to arrays
# The model wants fixed-size integer arrays. Each instance becomes one row, padded with 0
# (`[PAD]` has id 0): `input_ids` (N, T), `input_mask` (N, T) with 1 on real tokens,
# `segment_ids` (N, T), and the predictions as `masked_lm_positions`, `masked_lm_ids` (the
# labels) and `masked_lm_weights` (1.0 real, 0.0 padding), each (N, P), plus
# `next_sentence_labels` (N,).

# %%
for name in pd.FEATURE_NAMES:
    print(f"{name:22} {features[name].dtype}  {features[name].shape}")
row = 0
print(features["input_ids"][row])
assert features["input_ids"].shape == (len(instances), T)
assert features["masked_lm_positions"].shape == (len(instances), P)
assert tok.convert_ids_to_tokens(features["input_ids"][row][:len(instances[row].tokens)]) == \
    instances[row].tokens
assert np.array_equal(features["next_sentence_labels"], nsp.astype(np.int32))

# %% [markdown]
# ## Static versus dynamic masking
# Google's generator masks **once**, when the data is written (*static* masking). To show the
# model different masks of the same text it writes `dupe_factor` copies (10 by default), each
# masked anew. RoBERTa instead keeps the text unmasked and draws fresh masks every time a batch
# is built (*dynamic* masking): `pd.remask` does that, with the same count rule and the same
# 80/10/10 split, vectorised with NumPy. `BatchIterator(masking="dynamic")` calls it per batch.

# %%
np_rng = np.random.default_rng(0)
masked_a = pd.remask(features, np_rng, 0.15, P, len(tok), [tok.cls_id, tok.sep_id], tok.mask_id)
masked_b = pd.remask(features, np_rng, 0.15, P, len(tok), [tok.cls_id, tok.sep_id], tok.mask_id)
same_rows = np.mean(np.all(masked_a["masked_lm_positions"] == masked_b["masked_lm_positions"], 1))
print(f"rows with identical masked positions in two dynamic draws: {same_rows:.2f}")
assert same_rows < 0.2  # new masks every draw
assert np.array_equal(masked_a["masked_lm_weights"].sum(1), features["masked_lm_weights"].sum(1))
w = masked_a["masked_lm_weights"] > 0  # (N, P)
seen_ids = np.take_along_axis(masked_a["input_ids"], masked_a["masked_lm_positions"], 1)[w]  # (n,)
dynamic_shares = measured_shares(tok.convert_ids_to_tokens(seen_ids),
                                 tok.convert_ids_to_tokens(masked_a["masked_lm_ids"][w]))
print(f"dynamic: [MASK] {dynamic_shares[0]:.3f}, random {dynamic_shares[1]:.3f}, "
      f"kept {dynamic_shares[2]:.3f}")
assert np.allclose(dynamic_shares, [0.8, 0.1, 0.1], atol=tol), dynamic_shares

# %% [markdown]
# ## A picture of the measured shares
# Both kinds of masking against the intended 80/10/10 (`lessons/out/09_mask_shares.png`).

# %%
fig, ax = plt.subplots(figsize=(5, 3.5))
xs = np.arange(3)
ax.bar(xs - 0.2, static_shares, width=0.4, label=f"static ({n_static} predictions)")
ax.bar(xs + 0.2, dynamic_shares, width=0.4, label="dynamic (one remask)")
ax.scatter(xs, [0.8, 0.1, 0.1], color="k", marker="_", s=800, label="intended", zorder=3)
ax.set_xticks(xs, ["[MASK]", "random token", "kept original"])
ax.set_ylabel("share of predicted positions")
ax.legend()
fig.tight_layout()
show(fig, "09_mask_shares.png")

# %% [markdown]
# ## Discussion
# - Only the predicted positions enter the MLM loss; every other position is ignored (lesson
#   03's ignored positions). With 15% masked, BERT learns from ~15% of the tokens per step,
#   which is one reason it needs many steps.
# - The random-B share printed above is well above one half: 0.64 in this lesson's runs (fast
#   mode 0.638, full mode 0.643). A chunk that holds a single sentence has nothing to split, so
#   it always gets a random B; the rest get a fair coin. A share `r` therefore means that about
#   `2r - 1` of the chunks, here 28%, held one sentence: these documents are four short
#   sentences, and after a random B the chunk's unused sentences go back to start the next chunk,
#   so a document's last sentence often ends up alone. A corpus with a blank line after every
#   sentence would make *every* label 1 (the generator warns about that).
# - Google's generator reproduces exactly given the same seed: minibert calls the random
#   number generator in the same order (docs/bert-notes.md §3.8), so its instances equal the original script's.

# %% [markdown]
# ## Exercises
# Replace each `raise NotImplementedError(...)` with your code and re-run; the cell after the
# stubs grades your functions on known answers and names the case that failed. A stub left as it is makes the lesson go on with the reference
# solution (`lessons/solutions/09_mlm_nsp_data.py`).
#
# 1. `my_num_predictions(n_tokens)`: the count rule with 0.15 and a cap of 20, found from the
#    table of section "How many tokens to predict". Graded on lengths 3 to 512.
# 2. `my_truncate_pair(tokens_a, tokens_b, max_num_tokens, draws)`: the pair truncation of the
#    section on the input format, on lists of tokens: while the pair is longer than
#    `max_num_tokens`, the longer side loses one token (B when they are equally long), from its
#    front or its back at random. `draws` gives one uniform number in [0, 1) per lost token, in
#    order: below 0.5 means the front (Google's `rng.random() < 0.5`). Return the two new lists.
# 3. `my_mask_choice(u1, u2, original, random_token)`: what the input shows at a prediction
#    target, as Google draws it, from two uniform numbers in [0, 1): `u1` decides whether it is
#    `"[MASK]"`; if not, `u2` decides between the original (the lower values) and the random
#    token. Which thresholds give 80/10/10?

# %%
def my_num_predictions(n_tokens):
    """-> int: how many positions of an n_tokens-long instance become prediction targets"""
    raise NotImplementedError("exercise 1: write the count rule")  # your code here


def my_truncate_pair(tokens_a, tokens_b, max_num_tokens, draws):
    """two lists of tokens, a length, uniform numbers (one per lost token) -> (new a, new b)"""
    raise NotImplementedError("exercise 2: truncate the pair")  # your code here


def my_mask_choice(u1, u2, original, random_token):
    """-> the token the input shows at a prediction target"""
    raise NotImplementedError("exercise 3: write the 80/10/10 branch")  # your code here


# %%
ex = course.Exercises("09_mlm_nsp_data")


def check_num_predictions(fn):
    counts = {3: 1, 5: 1, 6: 1, 10: 2, 13: 2, 17: 3, 30: 4, 50: 8, 70: 10, 90: 14, 110: 16, 128: 19, 130: 20, 134: 20,
              512: 20}  # n_tokens -> predictions, worked out by hand (the halves at 10, 30, ..., 110 included)
    wrong = [n for n, want in counts.items() if fn(n) != want]
    drawn = sorted(set(np.random.default_rng(9001).integers(3, 513, 40).tolist()))  # lengths drawn now
    got = {n: fn(n) for n in drawn}
    far = [n for n in drawn if not 1 <= got[n] <= 20 or abs(got[n] - min(20.0, max(1.0, 0.15 * n))) > 0.5]
    return [course.true(f"{len(counts)} lengths from 3 to 512", not wrong,
                        f"{len(wrong)} lengths differ, first: n = {wrong[0]}: got {fn(wrong[0])}, expected "
                        f"{counts[wrong[0]]}" if wrong else ""),
            course.true(f"{len(drawn)} drawn lengths: between 1 and 20, within 0.5 of 15% of n", not far,
                        f"{len(far)} lengths off, first: n = {far[0]}: got {got[far[0]]}" if far else "")]


def check_truncate_pair(fn):
    a, b = ["a1", "a2", "a3", "a4", "a5"], ["b1", "b2", "b3"]
    results = [course.equal("A 5, B 3, to 5; draws 0.3, 0.7, 0.2",
                            [list(t) for t in fn(list(a), list(b), 5, [0.3, 0.7, 0.2])],
                            [["a2", "a3", "a4"], ["b2", "b3"]]),
               course.equal("B longer; draws 0.9, 0.9, 0.1, 0.6",
                            [list(t) for t in fn(["x", "x"], ["y1", "y2", "y3", "y4", "y5", "y6"], 4,
                                                 [0.9, 0.9, 0.1, 0.6])], [["x", "x"], ["y2", "y3"]]),
               course.equal("a pair that fits is left alone (no draw used)",
                            [list(t) for t in fn(list(a), list(b), 8, [])], [a, b])]
    r = np.random.default_rng(9002)  # pairs drawn now: lengths, limit, draws; checked for what any answer keeps
    for case in range(3):
        na, nb = (int(n) for n in r.integers(1, 12, 2))
        limit = int(r.integers(2, na + nb))
        ta, tb = [f"a{i}" for i in range(1, na + 1)], [f"b{i}" for i in range(1, nb + 1)]
        us = [round(float(u), 2) for u in r.random(na + nb - limit)]
        ga, gb = (list(t) for t in fn(list(ta), list(tb), limit, list(us)))
        runs = all(any(g == t[i:i + len(g)] for i in range(len(t) - len(g) + 1)) for g, t in ((ga, ta), (gb, tb)))
        fits = len(ga) + len(gb) == limit and runs
        results.append(course.true(f"drawn pair {case + 1}: A {na}, B {nb}, to {limit}: {limit} tokens, each side a "
                                   "run of its own tokens", fits, "" if fits else f"got A {ga}, B {gb}"))
    before = list(a)
    fn(a, list(b), 5, [0.3, 0.7, 0.2])
    results.append(course.true("new lists: the arguments are not changed", a == before, hint=f"tokens_a became {a}"))
    return results


def check_mask_choice(fn):
    grid = (np.arange(40) + 0.5) / 40  # (40,) midpoints: a grid of (u1, u2) pairs weighs every region by its area
    choices = [fn(float(u1), float(u2), "cat", "dog") for u1 in grid for u2 in grid]
    shares = np.array([choices.count(c) for c in ("[MASK]", "dog", "cat")]) / len(choices)  # (3,)
    return [course.equal("u1 = 0.5 -> [MASK]", fn(0.5, 0.99, "cat", "dog"), "[MASK]"),
            course.equal("u1 = 0.95, u2 = 0.2 -> the original", fn(0.95, 0.2, "cat", "dog"), "cat"),
            course.equal("u1 = 0.95, u2 = 0.9 -> the random token", fn(0.95, 0.9, "cat", "dog"), "dog"),
            course.close("shares over a 40 x 40 grid of (u1, u2) ([MASK], random, kept)", shares, [0.8, 0.1, 0.1],
                         rtol=0, atol=0.015)]


my_num_predictions = ex.grade(1, my_num_predictions, check_num_predictions,
                              refuses=("data.pretraining_data.num_predictions",))
my_truncate_pair = ex.grade(2, my_truncate_pair, check_truncate_pair,
                            refuses=("data.pretraining_data.truncate_seq_pair", "text.tokenizer.truncate_pair"))
my_mask_choice = ex.grade(3, my_mask_choice, check_mask_choice,
                          refuses=("data.pretraining_data.create_masked_lm_predictions", "data.pretraining_data.remask"))

# %% [markdown]
# ## How many tokens to predict: the rule (exercise 1's answer)
# `n_pred = min(max_predictions_per_seq, max(1, round(len(tokens) * 0.15)))`, where
# `len(tokens)` **includes** `[CLS]` and both `[SEP]`, and Python's `round` rounds halves to the
# even neighbour. So a full 128-token sequence gets `round(19.2) = 19` predictions, not 20
# (Google's README suggests `max_predictions_per_seq=20`: a cap never reached at length 128), and
# even a tiny sequence gets at least 1.

# %%
assert pd.num_predictions(128, 0.15, 20) == 19
assert [pd.num_predictions(n, 0.15, 20) for n in (5, 10, 30, 50)] == [1, 2, 4, 8]  # 7.5 -> 8
assert pd.num_predictions(512, 0.15, 20) == 20  # 76.8, capped


# %% [markdown]
# ## Recap
# - An instance is `[CLS] A [SEP] B [SEP]`, segment ids `0..0 1..1`, NSP label 0 if B really
#   follows A, 1 if B is random.
# - `round(0.15 * len)` positions (19 at length 128) become prediction targets; the input there
#   shows `[MASK]` 80%, a random token 10%, the original 10%.
# - Static masking fixes masks when the data is written (`dupe_factor` copies); dynamic masking
#   redraws them every batch.
#
# **Next: lesson 10**, the whole BERT model: these arrays go in, the MLM and NSP losses come out.

# %%
print("lesson 09 passed")
