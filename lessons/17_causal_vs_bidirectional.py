# %% [markdown]
# # Lesson 17: causal vs bidirectional, the paper's main ablation
#
# **Goal.** BERT's central claim is that a *deep bidirectional* encoder, trained with the masked
# LM, beats a left-to-right language model (OpenAI GPT's kind) of the same size on the same data
# (paper §5.1, Table 5: "LTR & No NSP" loses on every task, by up to 10.7 F1 on SQuAD against
# BERT-Base). The whole difference between the two models is one matrix added to the attention
# scores:
#
# | | attention may look at | pretraining predicts | from |
# |---|---|---|---|
# | bidirectional (BERT, MLM) | every real token | the 15% masked tokens | both sides of each |
# | causal (LTR, GPT-like) | real tokens at or before the query | the next token, at every position | the left side only |
#
# **Finish line.**
# 1. Both masks built from a padding mask and drawn; the causal one is the padding mask times a
#    lower triangle.
# 2. In the causal model, the output at position t does not change when any later token changes
#    (asserted); in the bidirectional one it does.
# 3. Which inputs each output depends on, measured by changing one token at a time and drawn.
# 4. A tiny in-lesson ablation: a toy language whose middle word is decided by the word AFTER it.
#    The masked LM learns it; the left-to-right LM cannot beat chance, however long it trains.
# 5. Two exercises: the causal mask adder, and the next-token targets with -100 where nothing is
#    predicted.
# `MINIBERT_FAST=1` trains fewer steps (about 5 s on 2 cores).

# %%
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # tiny matrices: one thread is fastest (lesson 11)
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import minibert  # noqa: E402,F401  before NumPy (lesson 06)
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import course  # noqa: E402  lessons/course.py: where pictures go, how exercises are graded
from course import FAST, show  # noqa: E402
from minibert import layers  # noqa: E402
from minibert.bert import BertForPreTraining  # noqa: E402
from minibert.model import BertConfig, ltr_targets, trained_params  # noqa: E402
from minibert.optim import AdamW  # noqa: E402

rng = np.random.default_rng(17)
# shape legend: B batch, T sequence length, C hidden, NH heads, V vocabulary

# %% [markdown]
# ## 1. The two masks
# Attention adds a matrix to the scores before the softmax: 0 where a key may be seen,
# `MASK_VALUE` (-10000, the original's) where not; after the softmax a hidden key's weight is
# `exp(-10000)`, which is exactly 0 in floating point.
#
# - **bidirectional**: one row per sequence, `(B, 1, 1, T)`, hiding the padding keys only; every
#   query sees the same keys.
# - **causal**: one matrix per sequence, `(B, 1, T, T)`: query i sees key j if j is a real token
#   *and* j <= i.
#
# **Exercise 1.** `my_causal_adder(attn_mask)`: `(B, T)` padding mask (1 = real) -> the
# `(B, 1, T, T)` matrix attention adds to its scores under the causal mask: 0 where query i may
# see key j, `layers.MASK_VALUE` elsewhere. No loops over `i` and `j`: build it from the padding
# mask and one `(T, T)` array. The grader names the first entry that breaks the rule. A stub
# left as it is makes the lesson go on with the reference solution
# (`lessons/solutions/17_causal_vs_bidirectional.py`); the picture below draws your mask.

# %%
ex = course.Exercises("17_causal_vs_bidirectional")


def my_causal_adder(attn_mask):
    """attn_mask (B, T) 1 = real token -> adder (B, 1, T, T): 0 visible, MASK_VALUE hidden"""
    raise NotImplementedError("exercise 1: build the causal mask adder")  # your code here


check_mask = np.array([[1, 1, 1, 0], [1, 1, 1, 1], [1, 0, 0, 0]])  # (3, 4)


def check_causal_adder(fn):
    got = np.asarray(fn(check_mask), dtype=float)
    Bc, Tc = check_mask.shape
    if got.shape != (Bc, 1, Tc, Tc):
        return [course.equal("shape (B, 1, T, T)", got.shape, (Bc, 1, Tc, Tc))]
    visible = np.zeros((Bc, 1, Tc, Tc), dtype=bool)  # the rule, entry by entry
    for b, i, j in np.ndindex(Bc, Tc, Tc):
        visible[b, 0, i, j] = check_mask[b, j] == 1 and j <= i

    def rule(idx):
        b, _, i, j = idx
        return (f"query {i} sees key {j} only if key {j} is real (mask[{b}, {j}] = {check_mask[b, j]}) "
                f"and {j} <= {i}")

    values_ok = np.isin(got, (0.0, layers.MASK_VALUE))
    return [course.true("every entry is 0 or MASK_VALUE", values_ok.all(),
                        f"{int((~values_ok).sum())} other values, e.g. {got[~values_ok][:3]}" if not values_ok.all()
                        else "", hint="0 where visible, layers.MASK_VALUE (-10000) where hidden"),
            course.mask("which keys each query sees (adder == 0)", got == 0.0, visible, rule)]


my_causal_adder = ex.grade(1, my_causal_adder, check_causal_adder,
                           refuses=("layers.causal_visible",), allows=("layers.MASK_VALUE",))

# %%
mask = np.array([[1, 1, 1, 1, 1, 0, 0],  # (B, T): 5 real tokens, 2 padding
                 [1, 1, 1, 0, 0, 0, 0]])
B, T = mask.shape
bidir = np.broadcast_to(mask[:, None, None, :], (B, 1, T, T)).astype(float)  # (B, 1, T, T) what each query sees
causal = (my_causal_adder(mask) == 0).astype(float)  # (B, 1, T, T) your mask: 1 where visible
assert np.array_equal(causal, layers.causal_visible(mask))  # the library's, which the model uses
assert np.array_equal(causal[0, 0], np.tril(np.ones((T, T))) * mask[0])  # lower triangle, padding columns 0
assert np.array_equal(causal, np.minimum(bidir, np.tril(np.ones((T, T)))))  # causal = bidirectional AND j <= i
assert (causal <= bidir).all() and causal.sum() < bidir.sum()  # it only ever hides more
print(f"keys visible in sequence 0: bidirectional {int(bidir[0].sum())}, causal {int(causal[0].sum())} "
      f"(of {T} x {T} query-key pairs)")

fig, axes = plt.subplots(1, 2, figsize=(9, 3.8), layout="constrained")
for ax, m, title in zip(axes, (bidir, causal), ("bidirectional (BERT)", "causal (LTR, GPT-like)")):
    im = ax.imshow(m[0, 0], cmap="Greens", vmin=0, vmax=1.3)
    ax.set(title=title, xlabel="key position j", ylabel="query position i", xticks=range(T), yticks=range(T))
cbar = fig.colorbar(im, ax=axes, shrink=0.8)
cbar.set_ticks([0, 1], labels=["hidden: MASK_VALUE added", "visible: 0 added"])
fig.suptitle("which keys each query may attend to (sequence 0: 5 real tokens, 2 padding)")
show(fig, "17_masks.png")

# %% [markdown]
# ## 2. The causal model's output at t does not see the future
# Run the same tiny encoder both ways on a sequence, then change every token after position t.
# With the causal mask, the outputs at positions 0..t stay as they were (to rounding: the hidden
# keys' weights are exactly 0, but the padded products are still summed, so we compare with a
# tolerance). Without it, every position changes: each reads the whole sequence.

# %%
cfg = BertConfig(vocab_size=30, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                 max_position_embeddings=16, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
probe = BertForPreTraining(cfg, seed=0, dtype=np.float64)
T = 8
ids = rng.integers(5, cfg.vocab_size, (1, T))  # (1, T)
t = 3
later = ids.copy()
later[0, t + 1:] = rng.integers(5, cfg.vocab_size, T - t - 1)  # (1, T) a different future
assert (later[0, t + 1:] != ids[0, t + 1:]).any()


def hidden(x, causal):
    return probe.forward(x, np.zeros_like(x), np.ones_like(x), causal=causal).sequence_output  # (1, T, C)


for causal_ in (True, False):
    a, b = hidden(ids, causal_), hidden(later, causal_)  # (1, T, C) each
    past = np.abs(a[0, :t + 1] - b[0, :t + 1]).max()
    print(f"{'causal' if causal_ else 'bidirectional':>13}: outputs 0..{t} moved by at most {past:.1e} "
          f"when tokens {t + 1}..{T - 1} changed")
    if causal_:
        assert past < 1e-12  # the past is blind to the future
    else:
        assert past > 1e-3  # every position read the changed tokens

# %% [markdown]
# ## 3. What each output depends on
# Change one input token at a time and record which outputs move: entry (t, s) of the picture is
# how far the output at position t moved when token s changed. The bidirectional encoder fills
# the square; the causal one fills the lower triangle and the diagonal. This is what "deep
# bidirectional" means: in *every* layer, every position reads both sides.

# %%
def dependence(causal_):
    base = hidden(ids, causal_)  # (1, T, C)
    dep = np.zeros((T, T))  # (T outputs, T inputs)
    for s in range(T):
        x = ids.copy()
        x[0, s] = 5 + (ids[0, s] - 5 + 1) % (cfg.vocab_size - 5)  # another word at position s
        dep[:, s] = np.abs(hidden(x, causal_) - base)[0].max(-1)  # (T,)
    return dep


dep_bi, dep_causal = dependence(False), dependence(True)
assert (dep_bi > 1e-6).all()  # every output moved for every input
assert (dep_causal[np.triu_indices(T, 1)] < 1e-12).all()  # nothing above the diagonal: no future
assert (dep_causal[np.tril_indices(T)] > 1e-6).all()  # everything at or before t counts
fig, axes = plt.subplots(1, 2, figsize=(9, 3.8), layout="constrained")
for ax, d, title in zip(axes, (dep_bi, dep_causal), ("bidirectional", "causal")):
    im = ax.imshow(np.log10(d + 1e-16), cmap="magma", vmin=-6, vmax=0)
    ax.set(title=f"{title}: log10 |change|", xlabel="input token changed (s)", ylabel="output position (t)")
fig.colorbar(im, ax=axes, shrink=0.8, label="log10 of the largest |change| of output t\n(-6 and below: unchanged)")
show(fig, "17_dependence.png")

# %% [markdown]
# ## 4. What each objective predicts, and from what
# - **MLM** (BERT): pick 15% of the positions, hide them (`[MASK]`, lesson 09), predict the
#   originals. A prediction at position i reads both sides of i, but only the chosen positions
#   give a loss.
# - **LTR**: every real position t predicts token t + 1 from tokens 0..t. Every token gives a
#   loss (about 6x more predictions per sequence than MLM), but each prediction sees only its left.
#
# `minibert.model.ltr_targets` lists the LTR prediction sites (exercise 2 writes the same as a
# `(B, T)` target array with -100 where nothing is predicted, the form of a token-level loss).

# %%
toy_ids = np.array([[2, 11, 12, 13, 3, 0]])  # (1, T) [CLS] w w w [SEP] [PAD]
toy_mask = np.array([[1, 1, 1, 1, 1, 0]])
flat, targets = ltr_targets(toy_ids, toy_mask)  # (M,), (M,)
print(f"LTR: positions {flat.tolist()} predict tokens {targets.tolist()} (the last real token and the padding: none)")
assert flat.tolist() == [0, 1, 2, 3] and targets.tolist() == [11, 12, 13, 3]

# %% [markdown]
# ## 5. A tiny ablation: a word decided by its right neighbour
# The toy language: `[CLS] a m b [SEP]`, where `a` and `b` are random words and the middle word
# `m` is a fixed function of `b`, the word AFTER it. Train the same tiny model twice on the same
# sequences, once with the MLM objective (`m` is always the masked position) and once as a
# left-to-right LM (`objective="ltr"`: the same batch, its masked word put back). Then score the
# prediction of `m`: the MLM model's at the `[MASK]`, the LTR model's at the position before `m`
# (its prediction of the next token). The left-to-right model reads only `[CLS] a`, which says
# nothing about `b`: it can do no better than guessing among the possible `m`.

# %%
K = 6  # words b (and so middle words m) in the toy language
A_WORDS = np.arange(5, 5 + K)  # the first word's ids
B_WORDS = np.arange(5 + K, 5 + 2 * K)  # the right neighbour's
M_OF_B = np.arange(5 + 2 * K, 5 + 3 * K)  # the middle word for each b
MASK_ID = 4
toy = BertConfig(vocab_size=5 + 3 * K, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=64, max_position_embeddings=8, hidden_dropout_prob=0.0,
                 attention_probs_dropout_prob=0.0)


def toy_batch(n, rng):
    """n sequences [CLS] a m b [SEP] as a pretraining batch: m (position 2) masked and predicted."""
    a, b = rng.integers(0, K, n), rng.integers(0, K, n)  # (n,), (n,)
    ids = np.stack([np.full(n, 2), A_WORDS[a], np.full(n, MASK_ID), B_WORDS[b], np.full(n, 3)], 1)  # (n, 5)
    return {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids),
            "masked_lm_positions": np.full((n, 1), 2), "masked_lm_ids": M_OF_B[b][:, None],  # (n, 1)
            "masked_lm_weights": np.ones((n, 1)), "next_sentence_labels": np.zeros(n, np.int64)}


def pretrain(objective, steps, seed=0):
    model = BertForPreTraining(toy, seed=seed)
    trained = {k: model.params[k] for k in trained_params(model.params, objective)}  # no pooler, no NSP head
    # PyTorch's bias-corrected AdamW: BERT's uncorrected form needs a warm-up (lesson 11), not worth it here
    opt = AdamW(trained, lr=3e-3, weight_decay=0.0, bias_correction=True)
    data = np.random.default_rng(seed)
    for _ in range(steps):
        _, grads, _ = model.loss_grads_metrics(toy_batch(32, data), objective=objective)
        opt.step(trained, grads)
    return model


def middle_word_accuracy(model, objective, n=512):
    batch = toy_batch(n, np.random.default_rng(99))  # held-out sequences
    ids, gold = batch["input_ids"].copy(), batch["masked_lm_ids"][:, 0]  # (n, 5), (n,)
    if objective == "ltr":
        ids[:, 2] = gold  # the LTR model reads the real text; its output at 1 predicts token 2
        logits = model.forward(ids, causal=True).mlm_logits[:, 1]  # (n, V)
    else:
        logits = model.forward(ids).mlm_logits[:, 2]  # (n, V) the prediction at [MASK]
    return float((logits.argmax(-1) == gold).mean())


steps = 200 if FAST else 400
acc = {obj: middle_word_accuracy(pretrain(obj, steps), obj) for obj in ("mlm", "ltr")}
print(f"after {steps} steps: predicting the middle word, MLM {acc['mlm']:.1%}, LTR {acc['ltr']:.1%} "
      f"(chance among the {K} middle words {1 / K:.1%})")
assert acc["mlm"] > 0.9  # the masked LM reads b, on the right of the mask
assert acc["ltr"] < 1 / K + 0.1  # the left-to-right LM cannot: at best a guess among the K words

fig, ax = plt.subplots(figsize=(5, 3.5))
ax.bar(["MLM (bidirectional)", "LTR (causal)"], [100 * acc["mlm"], 100 * acc["ltr"]], color=["C0", "C1"])
ax.axhline(100 / K, ls="--", color="gray", label=f"chance (1/{K})")
ax.set(ylabel="middle word predicted, %", title=f"[CLS] a m b [SEP], m decided by b ({steps} steps)")
ax.legend()
fig.tight_layout()
show(fig, "17_ablation.png")

# %% [markdown]
# The toy exaggerates on purpose: here the right context is *all* the information. In real text
# some of it is on the left, and the paper's LTR model still trails the bidirectional No NSP
# model by 0.5 (SST-2) to 10.1 points (SQuAD F1; Table 5), most where a token's label is decided
# by words after it. `python -m minibert ablate
# tasks` re-runs Table 5 in small on the Python-docs corpus (`docs/ablations.md`).
#
# ## Exercises
# (Exercise 1, the causal mask adder, came up in section 1.)
#
# 2. `my_next_token_targets(ids, mask)`: `(B, T)` ids and padding mask -> `(B, T)` int64 targets,
#    `targets[b, t] = ids[b, t + 1]` where tokens t and t + 1 are both real, and -100 (no loss)
#    everywhere else: the last real token, the padding, the last column.

# %%
def my_next_token_targets(ids, mask):
    """ids, mask (B, T) -> targets (B, T) int64: ids[b, t + 1] where both are real, else -100"""
    raise NotImplementedError("exercise 2: the next-token targets, -100 where nothing is predicted")  # your code here


# %%
def check_next_token_targets(fn):
    rng = np.random.default_rng(1702)  # the grader's own inputs, drawn now (the lesson's rng untouched)
    ids = rng.integers(5, 30, (3, 4))  # (3, 4)
    want = np.full(ids.shape, -100, np.int64)  # (3, 4) the rule, entry by entry
    for b, t in np.ndindex(*ids.shape):
        if t + 1 < ids.shape[1] and check_mask[b, t] == 1 and check_mask[b, t + 1] == 1:
            want[b, t] = ids[b, t + 1]

    def rule(idx):
        b, t = idx
        if t + 1 == ids.shape[1]:
            return f"position {t} is the last column: there is no token {t + 1} to predict"
        return (f"position {t} predicts token {t + 1} (id {ids[b, t + 1]}) only if both are real "
                f"(mask[{b}, {t}] = {check_mask[b, t]}, mask[{b}, {t + 1}] = {check_mask[b, t + 1]})")

    hand = fn(np.array([[2, 11, 12, 3, 0]]), np.array([[1, 1, 1, 1, 0]]))
    return [course.equal("[CLS] w w [SEP] [PAD]", np.asarray(hand).tolist(), [[11, 12, 3, -100, -100]]),
            course.entries("three padded rows", np.asarray(fn(ids, check_mask)), want, rule),
            course.equal("one real token predicts nothing", np.asarray(fn(np.array([[2, 0]]), np.array([[1, 0]])))
                         .tolist(), [[-100, -100]])]


my_next_token_targets = ex.grade(2, my_next_token_targets, check_next_token_targets,
                                 refuses=("model.ltr_targets",))

# %% [markdown]
# ## Recap
# - The causal model is BERT's encoder with one more mask: the padding mask times a lower
#   triangle. Its output at t is a function of tokens 0..t alone (asserted above), which is what
#   makes it a language model that can generate, and what costs it the right context.
# - MLM predicts few positions (15%), each from both sides; LTR predicts every position, each from
#   its left. Where the deciding word is on the right, only the first can learn it.
# - Next: `python -m minibert ablate tasks` measures the difference on real fine-tuning tasks, at
#   equal pretraining time, with several seeds (`docs/ablations.md`).

# %%
print("lesson 17 passed")
