# %% [markdown]
# # Lesson 10: the whole BERT, forward, backward and gradient check
#
# **Goal.** Put everything together: embeddings (04), encoder blocks (07), and the two
# pretraining heads, masked-language modelling (MLM: guess the hidden tokens) and next-sentence
# prediction (NSP: is sentence B the real continuation of A?). Then backpropagate through all of
# it by hand, check it numerically, and train it on one batch.
#
# **Finish line.**
# 1. Our head code reproduces `minibert.model.bert_forward` / `bert_backward` exactly.
# 2. A sampled gradient check of **every** parameter tensor of the whole model passes.
# 3. A fresh model's loss is about `ln V + ln 2` (tolerance derived below).
# 4. The model overfits one small batch: the loss falls from ~4.9 to below 0.5.

# %% [markdown]
# ## Setup
# Shape legend: `B` batch, `T` tokens, `C` hidden size, `NH` heads, `FF` FFN size, `V` vocab
# size, `L` layers, `P` prediction slots per sequence (masked positions).
# A pretraining batch uses the original BERT feature names (docs/bert-notes.md §3.7):
# `input_ids`, `segment_ids`, `input_mask` `(B, T)`; `masked_lm_positions`, `masked_lm_ids`,
# `masked_lm_weights` `(B, P)` (weight 0 marks an unused slot); `next_sentence_labels` `(B,)`
# (0 = B follows A, 1 = random). Lesson 09 builds such batches from text; here
# `gradcheck.random_batch` makes random ones, with two padded tokens in the last sequence and
# one unused prediction slot, so the masks are exercised too.

# %%
import math

import matplotlib.pyplot as plt
import numpy as np

import course  # lessons/course.py: where pictures go, how exercises are graded
from course import FAST, show  # FAST (CI): fewer training steps
from minibert.analysis import gradcheck
from minibert import layers
from minibert.bert import BertForPreTraining
from minibert.model import (BertConfig, bert_backward, bert_forward, encoder_backward, encoder_forward, init_params)

rng = np.random.default_rng(10)
cfg = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=64, max_position_embeddings=32)
V, C = cfg.vocab_size, cfg.hidden_size
batch = gradcheck.random_batch(cfg, B=4, T=12, P=4, rng=rng)
B, T = batch["input_ids"].shape
P = batch["masked_lm_positions"].shape[1]
params = init_params(cfg, seed=0, dtype=np.float64)  # float64 for the checks
for p in params.values():
    p += 0.05 * rng.standard_normal(p.shape)  # move away from ones/zeros so no bug hides
print(gradcheck.HEADER)

# %% [markdown]
# ## The math
#
#     seq    = encoder(input_ids, segment_ids, input_mask)            (B, T, C)   lessons 04, 02, 07
#     pooled = tanh(seq[:, 0] @ pool.w + pool.b)                        (B, C)  the [CLS] vector
#     nsp_loss = CE(pooled @ nsp.w + nsp.b, next_sentence_labels)       lesson 03
#     h      = seq at the masked positions                              (B*P, C)
#     t      = LayerNorm(GELU(h @ mlm.dense.w + mlm.dense.b))           (B*P, C)
#     mlm_loss = CE(t @ tok_emb.T + mlm.bias, masked_lm_ids), unused slots ignored
#     loss   = mlm_loss + nsp_loss
#
# The MLM decoder has **no matrix of its own**: it reuses the token embedding table `tok_emb`
# (tied weights). So `tok_emb` gets gradient from two places, and they add up.

# %%
# forward, one op per line (dropout off: no rng)
ids, segs, mask = batch["input_ids"], batch["segment_ids"], batch["input_mask"]
seq, enc_cache = encoder_forward(params, cfg, ids, segs, mask, ops=layers)  # (B, T, C)
pre, c_pool = layers.linear_forward(seq[:, 0], params["pool.w"], params["pool.b"])  # (B, C)
pooled = np.tanh(pre)  # (B, C)
nsp_logits, c_nsp = layers.linear_forward(pooled, params["nsp.w"], params["nsp.b"])  # (B, 2)
nsp_loss, c_nsp_ce = layers.cross_entropy_forward(nsp_logits, batch["next_sentence_labels"])
flat_pos = (np.arange(B)[:, None] * T + batch["masked_lm_positions"]).reshape(-1)  # (B*P,) index into B*T rows
h = seq.reshape(B * T, C)[flat_pos]  # (B*P, C)
t1, c_dense = layers.linear_forward(h, params["mlm.dense.w"], params["mlm.dense.b"])  # (B*P, C)
t2, c_gelu = layers.gelu_forward(t1)  # (B*P, C)
t, c_ln = layers.layernorm_forward(t2, params["mlm.ln.w"], params["mlm.ln.b"], cfg.layer_norm_eps)  # (B*P, C)
logits = t @ params["tok_emb"].T + params["mlm.bias"]  # (B*P, C) @ (C, V) -> (B*P, V)
targets = np.where(batch["masked_lm_weights"].reshape(-1) > 0, batch["masked_lm_ids"].reshape(-1), -100)  # (B*P,)
mlm_loss, c_mlm_ce = layers.cross_entropy_forward(logits, targets)
loss = mlm_loss + nsp_loss
loss_lib, metrics, cache = bert_forward(params, cfg, batch, ops=layers)
print(f"loss {loss:.6f} = mlm {mlm_loss:.4f} + nsp {nsp_loss:.4f}")
assert np.isclose(loss, loss_lib, rtol=0, atol=1e-12)

# %% [markdown]
# The whole model, drawn with this lesson's sizes and the parameters each part holds (counted
# from `params`): one encoder, two heads. The MLM head reads only the masked positions; the NSP
# head only `[CLS]`. The dashed line is the tie: the decoder is `tok_emb`, transposed.

# %%
count = lambda *prefixes: sum(p.size for n, p in params.items() if n.startswith(prefixes))  # noqa: E731
fig, ax = plt.subplots(figsize=(9, 6.5))
ax.axis("off")
body = course.flow(ax, [
    (f"input_ids, segment_ids  (B, T) = {(B, T)}", "white"),
    (f"embeddings: tok_emb[ids] + seg_emb + pos_emb, LayerNorm\n{count('tok_emb', 'seg_emb', 'pos_emb', 'emb_ln'):,} params",
     "#fce5cd"),
    (f"{cfg.num_hidden_layers} encoder blocks (lesson 07)\n{count('h'):,} params", "#cfe2f3"),
    (f"seq  (B, T, C) = {(B, T, C)}", "white")], x=0.5, bottom=0.04, top=0.46, width=0.55)
mlm = course.flow(ax, [
    (f"masked positions  (B*P, C) = {(B * P, C)}", "white"),
    (f"dense C -> C, GELU, LayerNorm\n{count('mlm.dense', 'mlm.ln'):,} params", "#d9ead3"),
    (f"tied decoder: t @ tok_emb.T + mlm.bias\n({count('mlm.bias')} params of its own)", "#d9ead3"),
    (f"MLM logits  (B*P, V) = {(B * P, V)}", "white")], x=0.25, bottom=0.58, top=0.97, width=0.42)
nsp = course.flow(ax, [
    (f"[CLS] vector  (B, C) = {(B, C)}", "white"),
    (f"pooler: dense C -> C, tanh\n{count('pool.'):,} params", "#ead1dc"),
    (f"NSP classifier C -> 2\n{count('nsp.'):,} params", "#ead1dc"),
    ("NSP logits  (B, 2)", "white")], x=0.76, bottom=0.58, top=0.97, width=0.38)
for (cx, cy) in (mlm[0], nsp[0]):
    ax.annotate("", xy=(cx, cy - 0.025), xytext=(body[-1][0], body[-1][1] + 0.025), arrowprops=dict(arrowstyle="->"))
ax.annotate("", xy=(mlm[2][0] - 0.2, mlm[2][1]), xytext=(body[1][0] - 0.29, body[1][1]),
            arrowprops=dict(arrowstyle="->", ls="--", color="C3", connectionstyle="arc3,rad=-0.25"))
ax.text(0.0, 0.36, "tied: the same\ntok_emb (V, C)", color="C3", fontsize=8)
ax.set_title(f"BERT for pretraining: {sum(p.size for p in params.values()):,} parameters, one encoder, two heads",
             fontsize=10)
show(fig, "10_whole_model.png")
assert count("tok_emb", "seg_emb", "pos_emb", "emb_ln", "h", "mlm.", "pool.", "nsp.") == sum(p.size for p in params.values())

# %% [markdown]
# ## Backward, one line per forward line
# The chain rule starts at `dloss = 1`. `loss = mlm_loss + nsp_loss`, so both heads receive 1.
# Then the heads backward, and finally `encoder_backward` (lesson 07) takes `dseq`. Two lines of
# the MLM head are new, and you write them: the tied decoder (exercise 1) and the gather of the
# masked positions (exercise 2). A stub left as it is makes the lesson go on with the reference
# solution (`lessons/solutions/10_bert_model.py`).
#
# **Exercise 1.** `my_tied_decoder_backward(dlogits, t, tok_emb)` for `logits = t @ tok_emb.T +
# bias`: return `(dt, dtok_from_decoder)`. It is a linear layer whose weight is `tok_emb.T`; mind
# the transpose. Each of the two is graded on its own against the numerical gradient.

# %%
ex = course.Exercises("10_bert_model")
g = {}
dloss = 1.0  # the chain rule starts here
dlogits = layers.cross_entropy_backward(dloss, c_mlm_ce)  # (B*P, V)


def my_tied_decoder_backward(dlogits, t, tok_emb):
    """dlogits (B*P, V), t (B*P, C), tok_emb (V, C) -> dt (B*P, C), dtok_from_decoder (V, C)"""
    raise NotImplementedError("exercise 1: backward through the tied decoder")  # your code here


def check_tied_decoder_backward(fn):
    r = np.random.default_rng(1001)  # the grader's own inputs, drawn now: not the lesson's arrays
    n, width, vocab = 7, 5, 11  # (B*P, C, V), sizes of its own
    t_in, tok_in = r.standard_normal((n, width)), r.standard_normal((vocab, width))  # (n, C), (V, C)
    bias, d = r.standard_normal(vocab), r.standard_normal((n, vocab))  # (V,), (n, V)
    decoder = lambda: t_in @ tok_in.T + bias  # noqa: E731  (n, V)
    dt_mine, dtok_mine = fn(d.copy(), t_in.copy(), tok_in.copy())
    return [course.close("dt vs numerical gradient", dt_mine, gradcheck.numerical_grad(decoder, t_in, d)),
            course.close("dtok vs numerical gradient", dtok_mine, gradcheck.numerical_grad(decoder, tok_in, d))]


my_tied_decoder_backward = ex.grade(1, my_tied_decoder_backward, check_tied_decoder_backward, paths=("dt", "dtok"),
                                    refuses=("layers.linear_backward", "kernels.linear_backward",
                                             "model.mlm_loss_backward", "model.bert_backward"))

# %%
# forward was: logits = t @ tok_emb.T + mlm.bias
g["mlm.bias"] = dlogits.sum(axis=0)  # (V,)
dt, dtok_decoder = my_tied_decoder_backward(dlogits, t, params["tok_emb"])  # (B*P, C), (V, C) decoder side of the tie
dt2, g["mlm.ln.w"], g["mlm.ln.b"] = layers.layernorm_backward(dt, c_ln)  # (B*P, C)
dt1 = layers.gelu_backward(dt2, c_gelu)  # (B*P, C)
dh, g["mlm.dense.w"], g["mlm.dense.b"] = layers.linear_backward(dt1, c_dense)  # (B*P, C)

# %% [markdown]
# **Exercise 2.** `my_gather_backward(dh, flat_pos, B, T)`: undo `h = seq.reshape(B*T, C)[flat_pos]`,
# giving `dseq` `(B, T, C)`. Positions can repeat (the same row gathered twice). Graded against
# the numerical gradient, on positions the grader draws: distinct ones, then a list with repeats.

# %%
def my_gather_backward(dh, flat_pos, B, T):
    """dh (B*P, C), flat_pos (B*P,) -> dseq (B, T, C)"""
    raise NotImplementedError("exercise 2: scatter the gathered gradient back")  # your code here


def check_gather_backward(fn):
    r = np.random.default_rng(1002)  # the grader's own inputs, drawn now: not the lesson's arrays
    b, t_len, width = 3, 6, 4  # (B, T, C), sizes of its own
    seq_in = r.standard_normal((b, t_len, width))  # (B, T, C)
    distinct = r.choice(b * t_len, size=5, replace=False)  # (5,) like the MLM head's positions: no repeats
    repeats = np.concatenate([distinct, distinct[:3]])  # (8,) a flat position gathered twice must add up
    r.shuffle(repeats)
    results = []
    for label, pos in (("dseq from the MLM head", distinct), ("repeated positions add up", repeats)):
        d = r.standard_normal((len(pos), width))  # (n, C)
        num = gradcheck.numerical_grad(lambda: seq_in.reshape(b * t_len, width)[pos], seq_in, d)  # (B, T, C)
        results.append(course.close(f"{label}, vs numerical gradient", fn(d.copy(), pos.copy(), b, t_len), num,
                                    wrongs=lambda: course.repeated_rows(pos, d, num)))
    return results


my_gather_backward = ex.grade(2, my_gather_backward, check_gather_backward,
                              refuses=("layers.embedding_backward", "kernels.embedding_backward",
                                       "kernels.scatter_add_rows", "model.mlm_loss_backward", "model.bert_backward"))

# %%
# forward was: h = seq.reshape(B*T, C)[flat_pos]   (a gather: scatter back, repeats add)
dseq = my_gather_backward(dh, flat_pos, B, T)  # (B, T, C)
dnsp = layers.cross_entropy_backward(dloss, c_nsp_ce)  # (B, 2)
dpooled, g["nsp.w"], g["nsp.b"] = layers.linear_backward(dnsp, c_nsp)  # (B, C)
# forward was: pooled = tanh(pre)
dpre = dpooled * (1 - pooled * pooled)  # (B, C)
dcls, g["pool.w"], g["pool.b"] = layers.linear_backward(dpre, c_pool)  # (B, C)
dseq[:, 0] += dcls  # gradients add up at forks ([CLS] feeds the pooler, and maybe the MLM head)
g = encoder_backward(dseq, enc_cache, cfg, g, ops=layers)  # fills h{l}.*, emb_ln.*, seg/pos_emb, tok_emb
dtok_input = g["tok_emb"]  # (V, C) input side of the tie
g["tok_emb"] = dtok_input + dtok_decoder  # gradients add up at forks (tied weights)
grads = bert_backward(params, cfg, cache, ops=layers)
assert set(grads) == set(params) and all(grads[k].shape == params[k].shape for k in params)
for name in params:
    assert np.allclose(g[name], grads[name], rtol=1e-12, atol=1e-15), f"{name} differs from bert_backward"
print(f"our backward equals bert_backward for all {len(params)} parameter tensors")

# %% [markdown]
# ## Whole-model gradient check
# A full numerical gradient would need two forward passes per parameter (tens of thousands).
# Instead we check a few **sampled entries of every tensor**, small LayerNorm vectors and
# biases included. For `tok_emb` we also sample rows that are both input tokens and MLM
# targets, where both sides of the tie matter. Same pass rule as single layers (rtol 1e-5,
# atol 1e-8). **Reading the numbers.** `max_abs` is about 1e-10 on every row: the numerical
# gradient of the whole model is as accurate, in absolute terms, as a single layer's. `max_rel`
# varies more from run to run (the cell prints the largest, and whether it is below rtol): it is
# large where the sampled entry's true gradient is itself small, so the same ~1e-10 of rounding
# is a larger fraction of it. When it is above rtol, that entry passes through atol (its true
# gradient is below about 1e-5, and `|diff| <= 1e-8 + 1e-5 |n|` holds); a wrong gradient gives
# ~1. (A `max_rel` of 1.0 on an `attn.qkv.b` row with verdict ok would be the key
# bias, whose true gradient is exactly 0: lesson 05.)

# %%
loss_fn = lambda: bert_forward(params, cfg, batch, ops=layers)[0]  # noqa: E731
k = 3 if FAST else 6
checks = []
for name, p in params.items():
    shape = (T, C) if name == "pos_emb" else p.shape  # rows >= T of pos_emb are unused (gradient 0)
    idx = gradcheck.sampled_indices(shape, k, rng)
    if name == "tok_emb":
        both = np.intersect1d(ids, batch["masked_lm_ids"][batch["masked_lm_weights"] > 0])
        idx += [(int(r), int(c)) for r in both[:3] for c in rng.integers(0, C, size=2)]
    num = gradcheck.numerical_grad_scalar(loss_fn, p, indices=idx)
    sel = tuple(np.array(i) for i in zip(*idx))
    checks.append(gradcheck.compare(f"model: {name}", grads[name][sel], num[sel]))
    if name == "tok_emb":  # each side of the tie alone must FAIL: both are needed
        assert not gradcheck.compare("tok_emb, input side only (expected FAIL)", dtok_input[sel], num[sel])
        assert not gradcheck.compare("tok_emb, decoder side only (expected FAIL)", dtok_decoder[sel], num[sel])
assert all(checks), [c.name for c in checks if not c]
worst = max(checks, key=lambda c: c.max_rel)
print(f"largest max_rel: {worst.max_rel:.1e} ({worst.name}); largest max_abs: "
      f"{max(c.max_abs for c in checks):.1e}; the largest max_rel is "
      + ("below rtol 1e-5" if worst.max_rel <= 1e-5 else "above rtol 1e-5: that entry passed through atol"))

# %% [markdown]
# ## The initial loss: about ln V + ln 2
# At init every weight is small (std 0.02), so the logits are close to 0 and every prediction
# is close to uniform: MLM loss ~ `ln V` (lesson 03), NSP loss ~ `ln 2`.
# **Tolerance.** The MLM logits are `t @ tok_emb.T` with `t` LayerNorm-ed (each entry has unit
# variance) and `tok_emb` entries of std `s ~ 0.02`, so each logit has std `sigma ~ s sqrt(C)`.
# Small logit noise raises the expected loss by about `sigma^2 / 2`, and averaging over `n`
# predictions leaves a random error of about `sigma / sqrt(n)`. We allow the bias plus four
# standard errors, plus 0.01 for NSP (its logits pass two 0.02 matrices and are far smaller).

# %%
model = BertForPreTraining(cfg, seed=1)  # float32, the original init, as training uses it
big = gradcheck.random_batch(cfg, B=16, T=12, P=5, rng=rng)
loss0, _, metrics0 = model.loss_grads_metrics(big, compute_grads=False)
sigma = float(model.params["tok_emb"].std()) * math.sqrt(C)
n = metrics0.mlm_count  # number of real MLM predictions in the batch
expected = math.log(V) + math.log(2)
tol = sigma**2 / 2 + 4 * sigma / math.sqrt(n) + 0.01
print(f"initial loss {loss0:.4f}, ln V + ln 2 = {expected:.4f}, |diff| {abs(loss0 - expected):.4f} <= tol {tol:.4f} "
      f"(sigma {sigma:.3f}, n {n})")
assert abs(loss0 - expected) <= tol

# %% [markdown]
# ## Overfit one batch
# The classic sanity test: a model that can learn must be able to memorize a handful of
# examples. We train on the same batch with plain Adam (lesson 11 introduces BERT's AdamW,
# warmup and decay). Loss curve: `lessons/out/10_overfit_loss.png`.

# %%
def adam_step(params, grads, m, v, step, lr=3e-3, b1=0.9, b2=0.999, eps=1e-8):
    for name, p in params.items():
        m[name] = b1 * m[name] + (1 - b1) * grads[name]  # running mean of the gradient
        v[name] = b2 * v[name] + (1 - b2) * grads[name] ** 2  # running mean of its square
        mhat = m[name] / (1 - b1**step)  # correct the bias of starting at 0
        vhat = v[name] / (1 - b2**step)
        p -= lr * mhat / (np.sqrt(vhat) + eps)  # in place: params[name] changes


steps = 100 if FAST else 300
model = BertForPreTraining(cfg, seed=2)  # float32
one = gradcheck.random_batch(cfg, B=4, T=16, P=4, rng=np.random.default_rng(0))
m = {k: np.zeros_like(p) for k, p in model.params.items()}
v = {k: np.zeros_like(p) for k, p in model.params.items()}
curve = []
for step in range(1, steps + 1):
    loss_t, grads_t = model.loss_and_grads(one)
    adam_step(model.params, grads_t, m, v, step)
    curve.append(float(loss_t))
fig, ax = plt.subplots(figsize=(5, 3.5))
ax.semilogy(range(1, steps + 1), curve)
ax.set_xlabel("step")
ax.set_ylabel("loss (MLM + NSP)")
ax.set_title("overfitting one batch")
fig.tight_layout()
show(fig, "10_overfit_loss.png")
print(f"overfit: loss {curve[0]:.3f} -> {curve[-1]:.4f} in {steps} steps")
assert curve[-1] < 0.5 and curve[-1] < curve[0] / 8

# %% [markdown]
# ## Discussion
# - `bert_forward` returns `(loss, metrics, cache)`; the cache is the encoder cache plus the heads'
#   caches. The MLM head runs only at the `P` masked positions, not all `T`, which keeps the
#   `(B*P, V)` logits small: with BERT's `V = 30522`, this is the biggest saving in the heads.
#   `bert_forward` goes two steps further, with the same loss and gradients: it keeps only the
#   `M` slots with weight > 0, and it runs the per-token layers on the `N` real tokens only
#   (`unpad=True`: the fast path `encoder_forward_unpadded` in `minibert/model.py`, which runs
#   the same blocks on `(N, C)` rows); attention alone needs the padded grid.
#   On the tiny preset's data, 13.5% of the tokens are padding.
# - The tie means one `(V, C)` table serves as input lookup and output projection; its gradient
#   is a scatter (input side) plus a dense matrix product (decoder side).
# - `BertForPreTraining` is a thin class over these functions: `model.loss_and_grads(batch)`, or
#   `model.loss_grads_metrics(batch)` for the batch's accuracies as well.

# %% [markdown]
# ## Exercises
# Replace each `raise NotImplementedError(...)` with your code and re-run; the cell after the
# stub grades your function, and names the check that failed and by how much. A stub left as it is makes the lesson go on with the reference solution
# (`lessons/solutions/10_bert_model.py`).
#
# (Exercises 1 and 2 came up in the backward section.)
#
# 3. `my_adam_first_step(g, lr, b1=0.9, b2=0.999, eps=1e-8)`: the change that Adam (the
#    `adam_step` above, with bias correction) makes to a parameter on step 1, from zero moments,
#    as one closed-form line in `g`, `lr` and `eps` (no `m`, `v`, `b1` or `b2` left in it: work
#    it out on paper first). Graded against `adam_step` itself, for gradients of very different
#    sizes, down to a few times `eps`.

# %%
def my_adam_first_step(g, lr, b1=0.9, b2=0.999, eps=1e-8):
    """g (any shape) -> (same shape) the first update of Adam with bias correction"""
    raise NotImplementedError("exercise 3: work out Adam's first step")  # your code here


# %%
def check_adam_first_step(fn):
    r = np.random.default_rng(1003)  # the grader's own gradients, drawn now: sizes 1e-4 to 1e3, two of them near eps
    gg = np.concatenate([r.choice([-1.0, 1.0], size=4) * 10.0 ** r.uniform(-4, 3, size=4),
                         r.choice([-1.0, 1.0], size=2) * 10.0 ** r.uniform(-8.7, -7.7, size=2)])  # (6,)
    lr = float(r.uniform(1e-3, 1e-1))
    mine = fn(gg.copy(), lr)
    p, m1, v1 = {"x": np.zeros(6)}, {"x": np.zeros(6)}, {"x": np.zeros(6)}  # (6,) each
    adam_step(p, {"x": gg}, m1, v1, step=1, lr=lr)  # m1, v1: the moments after step 1
    p_no_eps = {"x": np.zeros(6)}
    adam_step(p_no_eps, {"x": gg}, {"x": np.zeros(6)}, {"x": np.zeros(6)}, step=1, lr=lr, eps=0.0)
    m_hat, v_hat = m1["x"] / (1 - 0.9), v1["x"] / (1 - 0.999)  # (6,) each: the bias-corrected moments
    wrongs = {"Adam without bias correction: the step-1 moments m, v used as they are, not divided by "
              "1 - b1^1 and 1 - b2^1": -lr * m1["x"] / (np.sqrt(v1["x"]) + 1e-8),
              "eps left out (as if it were 0): it matters where |g| is near eps = 1e-8, as for the last two "
              "gradients here": p_no_eps["x"],
              "the bias correction on m alone: v too is divided by 1 - b2^1": -lr * m_hat / (np.sqrt(v1["x"]) + 1e-8),
              "the bias correction on v alone: m too is divided by 1 - b1^1": -lr * m1["x"] / (np.sqrt(v_hat) + 1e-8),
              "v used where its square root belongs: the step divides by sqrt(v_hat) + eps":
              -lr * m_hat / (v_hat + 1e-8),
              "eps inside the square root: Adam adds it to sqrt(v_hat)": -lr * m_hat / np.sqrt(v_hat + 1e-8)}
    return [course.close("equals adam_step's first update", mine, p["x"], wrongs=wrongs)]


my_adam_first_step = ex.grade(3, my_adam_first_step, check_adam_first_step,
                              refuses=("optim.AdamW", "kernels.adamw_update", "kernels.adamw_update_all"))
step1 = my_adam_first_step(np.array([1e-3, -5.0, 200.0, 1e-8]), 0.01)  # (4,)
print(f"Adam's first step for g = 1e-3, -5, 200 at lr 0.01: {step1[:3].round(6)}: about -lr * sign(g) whatever "
      f"|g| is, until |g| comes near eps: g = 1e-8 gives {step1[3]:.6f}")
assert np.allclose(step1[:3], -0.01 * np.sign([1e-3, -5.0, 200.0]), rtol=1e-3) and abs(step1[3]) < 0.006

# %% [markdown]
# ## Recap
# - BERT = embeddings -> L post-LN blocks -> NSP head on `[CLS]` + MLM head at masked positions.
# - The loss is `mlm_loss + nsp_loss`; a fresh model starts near `ln V + ln 2`.
# - The tied `tok_emb` sums its input-side and decoder-side gradients; the sampled check of
#   every tensor proves the whole backward, and overfitting one batch proves it can learn.
#
# **Next: lesson 11**, pretraining a tiny BERT for real: BERT's AdamW, warmup and decay, and
# loss curves on a real corpus.

# %%
print("lesson 10 passed")
