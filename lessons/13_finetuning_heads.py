# %% [markdown]
# # Lesson 13: fine-tuning heads, the other half of BERT
#
# **Goal.** Pretraining (lessons 09-12) gives an encoder; fine-tuning puts one small layer on top
# and trains everything on a labelled task (paper §3.2, Figure 4). The four task shapes differ
# only in *which* encoder outputs the new layer reads and how its logits meet the labels:
#
# | task | reads | logits | loss |
# |---|---|---|---|
# | sentence (pair) classification | pooled `[CLS]` `(B, C)` | `(B, K)` | cross-entropy |
# | token tagging (NER) | every position `(B, T, C)` | `(B, T, K)` | cross-entropy, `-100` skipped |
# | multiple choice | pooled `[CLS]` of each of `NC` choices | `(B, NC)` | cross-entropy over choices |
# | span extraction (SQuAD) | every position | start, end `(B, T)` each | `(CE(start) + CE(end)) / 2` |
#
# **Finish line.**
# 1. The classification head written here by hand (pooler, dropout -> linear -> cross-entropy,
#    and its backward through the pooler's tanh, exercise 1) gives the logits, loss and head gradients of
#    `minibert.BertForSequenceClassification`.
# 2. A sampled float64 gradient check of every tensor of all four classes passes.
# 3. The first-sub-token rule labels exactly one piece per word.
# 4. Multiple choice is classification with the choices flattened into the batch.
# 5. A tiny model fine-tuned on a toy sentiment task gets every dev sentence right.

# %%
import numpy as np

import course  # lessons/course.py: where pictures go, how exercises are graded
from course import FAST  # CI: fewer steps
from minibert import BertForMultipleChoice, BertForSequenceClassification, BertTokenizer, layers
from minibert.analysis import gradcheck
from minibert.finetune.features import token_features
from minibert.finetune.gradchecks import check_task_models
from minibert.taskdata.readers import TaggedExample
from minibert.analysis.gradcheck import numerical_grad_scalar
from minibert.model import BertConfig, encoder_forward, pooler_forward

rng = np.random.default_rng(13)
cfg = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=32, max_position_embeddings=32)

# %% [markdown]
# ## 1. The classification head by hand
# The encoder is lesson 10's. The head is two lines: `logits = dropout(pooled) @ W + b`, then the
# mean cross-entropy of lesson 03. Its backward restates each line in reverse. Dropout is off
# here (`rng=None`), as at evaluation time; `minibert.finetune.gradchecks.check_heads` checks it on.

# %%
model = BertForSequenceClassification(cfg, num_labels=3, seed=0, dtype=np.float64)
B, T = 4, 7
ids = rng.integers(5, cfg.vocab_size, (B, T))  # (B, T)
seg, mask = np.zeros_like(ids), np.ones_like(ids)
labels = np.array([0, 2, 1, 2])  # (B,)

seq, _ = encoder_forward(model.params, cfg, ids, seg, mask)  # (B, T, C)
pooled, _ = pooler_forward(model.params, seq, layers)  # (B, C) = tanh(h_[CLS] @ W_pool + b_pool)
logits = pooled @ model.params["cls.w"] + model.params["cls.b"]  # (B, C) @ (C, K) -> (B, K)
z = logits - logits.max(-1, keepdims=True)  # (B, K)
probs = np.exp(z) / np.exp(z).sum(-1, keepdims=True)  # (B, K)
loss = -np.log(probs[np.arange(B), labels]).mean()

# backward, first step: d loss / d logits = (probs - onehot) / B (lesson 03). The rest, through
# the linear layer and the pooler's tanh down to the [CLS] vector, is exercise 1 at the end.
dlogits = probs.copy()
dlogits[np.arange(B), labels] -= 1
dlogits /= B  # (B, K)

batch = dict(input_ids=ids, segment_ids=seg, input_mask=mask, labels=labels)
ref_loss, ref_grads = model.loss_and_grads(batch)
print(f"loss by hand {loss:.6f}, minibert {ref_loss:.6f}  (ln 3 = {np.log(3):.6f}: a fresh head guesses)")
assert np.allclose(logits, model.forward(ids, seg, mask), atol=1e-12)
assert abs(loss - ref_loss) < 1e-12

# %% [markdown]
# ## 2. Gradient check of all four classes
# Every tensor of every class (encoder, pooler where used, head) is sampled and compared with
# centered differences of the loss, in float64, with random (not initial) parameters.

# %%
checks = check_task_models(np.random.default_rng(0), verbose=False, samples_per_tensor=2)
worst = max(c.max_abs for c in checks)  # relative error is meaningless where a gradient is ~0
print(f"{len(checks)} tensors checked, all pass: {all(checks)}; largest absolute difference {worst:.1e}")
assert all(checks), [c.row() for c in checks if not c]

# %% [markdown]
# ## 3. Token tagging: one label per word, on its first piece
# NER data labels *words*; WordPiece splits a word into pieces. BERT puts the word's label on
# the first piece and `-100` (no loss) on the others and on `[CLS]`, `[SEP]` and padding, so
# every word counts once however it is split.

# %%
tok = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "visit", "##ed", "par", "##is", "john"])
ex = TaggedExample(["john", "visited", "paris"], ["B-person", "O", "B-location"], "lesson")
tags = ["B-location", "B-person", "O"]
f = token_features([ex], tok, 12, tags)
pieces = tok.convert_ids_to_tokens(f["input_ids"][0][f["input_mask"][0] == 1])
got = f["labels"][0][: len(pieces)]
for piece, label in zip(pieces, got):
    print(f"{piece:>8}  {tags[label] if label >= 0 else '-100 (no loss)'}")
assert list(pieces) == ["[CLS]", "john", "visit", "##ed", "par", "##is", "[SEP]"]
assert (got >= 0).sum() == 3  # one label per word

# %% [markdown]
# ## 4. Multiple choice is classification over flattened choices
# `(B, NC, T)` inputs become `B*NC` ordinary sequences; the head gives each one score from its
# pooled `[CLS]`, and the scores are reshaped to `(B, NC)` for a softmax over the choices.

# %%
mc = BertForMultipleChoice(cfg, seed=1)
choices = rng.integers(5, cfg.vocab_size, (2, 4, T))  # (B=2, NC=4, T)
scores = mc.forward(choices)  # (2, 4)
one_by_one = BertForSequenceClassification(cfg, num_labels=1, params=dict(mc.params)).forward(choices.reshape(8, T))
print("scores (B, NC):\n", np.round(scores, 4))
assert scores.shape == (2, 4) and np.allclose(scores.reshape(-1), one_by_one[:, 0], atol=1e-6)

# %% [markdown]
# ## 5. Fine-tune a tiny model on a toy sentiment task
# Sentences of two "positive" or two "negative" words. With the paper's recipe (AdamW, warm-up
# then linear decay, dropout 0.1) a randomly initialised tiny model learns it in a few hundred
# steps; `python -m minibert finetune` runs the same loop on real data (docs/finetuning.md).

# %%
from minibert.optim import AdamW, lr_at  # noqa: E402

pos, neg = [5, 6, 7], [8, 9, 10]


def toy(n, rng):
    y = rng.integers(0, 2, n)  # (n,)
    words = np.where(y[:, None] == 1, rng.choice(pos, (n, 2)), rng.choice(neg, (n, 2)))  # (n, 2)
    x = np.concatenate([np.full((n, 1), 2), rng.integers(11, 40, (n, 2)), words, np.full((n, 1), 3)], 1)  # (n, 6)
    return dict(input_ids=x, segment_ids=np.zeros_like(x), input_mask=np.ones_like(x), labels=y)


tiny = BertForSequenceClassification(BertConfig(**{**cfg.to_dict(), "hidden_dropout_prob": 0.1}), 2, seed=2)
opt = AdamW(tiny.params, lr=3e-3)
steps, drop = (150 if FAST else 300), np.random.default_rng(0)
for step in range(steps):
    loss, grads = tiny.loss_and_grads(toy(32, rng), train=True, rng=drop)
    opt.step(tiny.params, grads, lr_at(step, 3e-3, steps // 10, steps))
    if step % 50 == 0 or step == steps - 1:
        print(f"step {step:3d}  loss {loss:.4f}")
dev = toy(200, np.random.default_rng(99))
acc = (tiny.forward(dev["input_ids"]).argmax(-1) == dev["labels"]).mean()
print(f"dev accuracy {acc:.3f}")
assert acc == 1.0, acc  # exact: a count of 200 hits out of 200


# %% [markdown]
# ## Exercises
# Replace each `raise NotImplementedError(...)` with your code and re-run; the cell after the
# stubs grades your functions and names the check that failed and by how much. A stub left as it
# is makes the lesson go on with the reference solution (`lessons/solutions/13_finetuning_heads.py`).
#
# 1. `my_head_backward(dlogits, cls, w_pool, pooled, W)`: the backward of the whole
#    classification head, `pooled = tanh(cls @ w_pool + b_pool)` then `logits = pooled @ W + b`,
#    from `dlogits (B, K)` down to the `[CLS]` vector `cls (B, C)`. Return
#    `(dcls (B, C), dw_pool (C, C), db_pool (C,), dW (C, K), db (K,))`. What does the forward's
#    output `pooled` give you that you need for the tanh? Each of the five is graded on its own
#    against the numerical gradient of section 1's loss.
# 2. `my_first_piece_labels(pieces_per_word, word_labels)`: one label per WordPiece piece, the
#    word's label on its first piece and -100 on the others (no `[CLS]`/`[SEP]` here).

# %%
def my_head_backward(dlogits, cls, w_pool, pooled, W):
    """dlogits (B, K), cls (B, C), w_pool (C, C), pooled (B, C), W (C, K)
    -> dcls (B, C), dw_pool (C, C), db_pool (C,), dW (C, K), db (K,)"""
    raise NotImplementedError("exercise 1: backward through the classification head")  # your code here


def my_first_piece_labels(pieces_per_word, word_labels):
    """pieces_per_word [n_1, ..., n_W], word_labels [l_1, ..., l_W] -> labels, one per piece"""
    raise NotImplementedError("exercise 2: put each word's label on its first piece")  # your code here


# %%
ex = course.Exercises("13_finetuning_heads")


cls_vec = seq[:, 0]  # (B, C) the [CLS] vector the pooler reads


def _head_loss(c, wp, bp, W, b):
    z = np.tanh(c @ wp + bp) @ W + b  # (B, K)
    z = z - z.max(-1, keepdims=True)
    return float(-(z[np.arange(B), labels] - np.log(np.exp(z).sum(-1))).mean())


def _head_loss_with_slope(slope, pre0, c, wp, bp, W, b):
    """_head_loss with the tanh replaced by a straight line through the point pre0 (the graded
    batch's pre-activation), of the given slope per entry: its gradient is the head's backward with
    `slope` in place of tanh's derivative (the answers of the mistakes below)."""
    z = (np.tanh(pre0) + slope * (c @ wp + bp - pre0)) @ W + b  # (B, K)
    z = z - z.max(-1, keepdims=True)
    return float(-(z[np.arange(B), labels] - np.log(np.exp(z).sum(-1))).mean())


def check_head_backward(fn):
    r = np.random.default_rng(1301)  # the grader's own [CLS] vectors, drawn now: section 1's gradients answer another question
    c = r.standard_normal(cls_vec.shape) * cls_vec.std()  # (B, C)
    wp, bp, W, b = (model.params[k] for k in ("pool.w", "pool.b", "cls.w", "cls.b"))
    pooled_c = np.tanh(c @ wp + bp)  # (B, C) the pooler, as section 1 runs it
    z = pooled_c @ W + b  # (B, K)
    probs = np.exp(z - z.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    dz = (probs - np.eye(z.shape[-1])[labels]) / B  # (B, K) the mean cross-entropy's gradient (lesson 03)
    got = fn(dz, c.copy(), wp, pooled_c, W)
    arrays = [a.copy() for a in (c, wp, bp, W, b)]
    loss = lambda: _head_loss(*arrays)  # noqa: E731
    names = ("dcls", "dw_pool", "db_pool", "dW", "db")
    slope_at_pooled = (np.tanh(pooled_c + 1e-6) - np.tanh(pooled_c - 1e-6)) / 2e-6  # (B, C) tanh's slope at tanh(pre)
    pre0 = c @ wp + bp  # (B, C) the graded batch's pre-activation
    mistakes = {"tanh's derivative forgotten: the gradient passed through the tanh as if it were the identity":
                np.ones_like(pooled_c),
                "tanh's derivative taken at pooled: pooled is already tanh of the pre-activation, so that applies "
                "tanh twice; the derivative belongs at the pre-activation": slope_at_pooled}
    def wrongs(i):  # computed only when a check fails
        moved = [x.copy() for x in arrays]
        found = {}
        if i < 3:  # below the tanh
            found = {words: numerical_grad_scalar(lambda: _head_loss_with_slope(slope, pre0, *moved), moved[i])
                     for words, slope in mistakes.items()}
        pre = pre0.copy()
        dpre = numerical_grad_scalar(lambda: _head_loss(pre, np.eye(len(wp)), 0.0, W, b), pre)  # (B, C) at pre0
        swapped = {  # each linear's gradients with the wrong array of the forward in them
            0: {"w_pool where its transpose belongs (the pre-activation is cls @ w_pool, so the gradient goes back "
                "through w_pool transposed)": dpre @ wp},
            1: {"pooled where cls belongs: w_pool multiplies cls, the pooler's input": pooled_c.T @ dpre},
            3: {"cls where pooled belongs: W multiplies pooled, the classifier's input": c.T @ dz}}
        return {**found, **swapped.get(i, {})}

    extra_mean = {"1/B (dlogits is the gradient of the mean loss already: the 1/B is in it)": 1 / B}
    return [course.close(f"{name} vs numerical gradient", g, numerical_grad_scalar(loss, a),
                         wrongs=lambda i=i: wrongs(i), factors=extra_mean)
            for i, (name, g, a) in enumerate(zip(names, got, arrays))]


def check_first_piece_labels(fn):
    return [course.equal("3 words of 1, 2, 2 pieces", list(fn([1, 2, 2], [5, 0, 3])), [5, 0, -100, 3, -100]),
            course.equal("4 words of 3, 1, 1, 2 pieces", list(fn([3, 1, 1, 2], [2, 4, 0, 1])),
                         [2, -100, -100, 4, 0, 1, -100]),
            course.equal("no words", list(fn([], [])), [])]


my_head_backward = ex.grade(1, my_head_backward, check_head_backward,
                            paths=("dcls", "dw_pool", "db_pool", "dW", "db"),
                            refuses=("layers.linear_backward", "kernels.linear_backward", "model.pooler_backward"))
my_first_piece_labels = ex.grade(2, my_first_piece_labels, check_first_piece_labels)
_, dwp_mine, dbp_mine, dW_mine, db_mine = my_head_backward(dlogits, cls_vec, model.params["pool.w"], pooled,
                                                            model.params["cls.w"])
for name, mine in (("pool.w", dwp_mine), ("pool.b", dbp_mine), ("cls.w", dW_mine), ("cls.b", db_mine)):
    assert np.allclose(mine, ref_grads[name], rtol=1e-10, atol=1e-14), name  # section 1's model agrees
print("your head backward gives minibert's pool.w, pool.b, cls.w and cls.b gradients of section 1")

# %% [markdown]
# ## Recap
# - Fine-tuning adds one small layer on the pretrained encoder and trains everything; the four
#   task shapes differ only in which outputs the layer reads (pooled `[CLS]` or every position)
#   and how its logits meet the labels.
# - The classification head's backward: the linear layer's (lesson 01), then the pooler's tanh,
#   whose derivative `1 - tanh^2` comes from the forward's own output, then the pooler's linear.
# - Token tagging labels the first piece of each word and gives the others `-100` (no loss).
# - Multiple choice is classification with the choices flattened into the batch: one score each,
#   a softmax over the choices.
#
# **Next: lesson 14**, the fourth shape, span extraction, on SQuAD's long passages.

# %%
print("lesson 13 passed")
