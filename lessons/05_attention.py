# %% [markdown]
# # Lesson 05: scaled dot-product and multi-head attention, with a padding mask
#
# **Goal.** Attention is how each token gathers information from the other tokens of its
# sequence. Each token asks a question (query `q`), every token offers a label (key `k`) and a
# content (value `v`). The better a key matches a query, the more of its value flows to that
# query's output. Sequences in a batch have different lengths, so short ones are padded; the
# padding mask makes sure **no token attends to padding**.
#
# **Finish line.** Attention forward and backward, line by line, checked numerically and
# against `minibert.layers.attention_forward` / `attention_backward`; padded keys get exactly
# zero weight; a multi-head layer built from the pieces passes a numerical check; and a
# picture of the attention weights under the mask in `lessons/out/`.

# %% [markdown]
# ## Setup
# Shape legend: `B` batch, `T` tokens per sequence, `C` hidden size, `NH` number of heads,
# `HS = C // NH` head size. `attn_mask` is `(B, T)`: 1 for a real token, 0 for padding.

# %%
import math

import matplotlib.pyplot as plt
import numpy as np

import course  # lessons/course.py: where pictures go, how exercises are graded
from course import show
from minibert.analysis import gradcheck
from minibert import layers

rng = np.random.default_rng(5)
B, NH, T, HS = 2, 2, 5, 3
C = NH * HS
attn_mask = np.array([[1, 1, 1, 0, 0],
                      [1, 1, 1, 1, 1]])  # (B, T) sequence 0 has 2 padding tokens at the end
q, k, v = (rng.standard_normal((B, NH, T, HS)) for _ in range(3))  # 3 x (B, NH, T, HS)
print(gradcheck.HEADER)

# %% [markdown]
# ## The math
# For one head of one sequence, with `q, k, v` of shape `(T, HS)`:
#
#     preatt = q @ k.T / sqrt(HS) + adder       adder[j] = 0 for a real key j, -10000 for padding
#     att    = softmax(preatt) over keys (each row sums to 1)
#     out    = att @ v                          (each output row is a weighted mix of value rows)
#
# Dividing by `sqrt(HS)` keeps the scores around unit size (exercise 2). Adding -10000 before
# softmax makes `exp` underflow to exactly 0: padded keys get no weight, as in the original
# BERT (`minibert.layers.MASK_VALUE`). Padded *query* rows are still computed; nobody reads them.
# Backward needs `q`, `k`, `v` and the probabilities `att` (not `preatt`).

# %%
scale = 1.0 / math.sqrt(HS)
# forward, one op per line
scores = q @ k.swapaxes(-1, -2)  # (B, NH, T, HS) @ (B, NH, HS, T) -> (B, NH, T, T)
real_key = attn_mask[:, None, None, :] == 1  # (B, 1, 1, T) broadcast over heads and queries
preatt = np.where(real_key, scores * scale, layers.MASK_VALUE)  # (B, NH, T, T) padded keys: -10000
# (the library adds an adder to every score instead of replacing the padded ones: exercise 3)
shifted = preatt - preatt.max(axis=-1, keepdims=True)  # (B, NH, T, T) for a stable exp
e = np.exp(shifted)  # (B, NH, T, T)
att = e / e.sum(axis=-1, keepdims=True)  # (B, NH, T, T)
out = att @ v  # (B, NH, T, T) @ (B, NH, T, HS) -> (B, NH, T, HS)
out_lib, cache = layers.attention_forward(q, k, v, attn_mask)
assert np.allclose(out, out_lib)
assert np.allclose(att.sum(axis=-1), 1.0)
assert np.all(att[0, :, :, 3:] == 0.0), "padded keys must get exactly zero weight"
dout = rng.standard_normal(out.shape)  # (B, NH, T, HS)

# %% [markdown]
# **Attention is a soft dictionary lookup.** A dictionary returns the value of the one key that
# matches the query. Attention scores the query against *every* key, turns the scores into
# weights that sum to 1, and returns the weighted mix of all the values. The picture draws it for
# query 1 of sequence 0, head 0, from this cell's own arrays: the padded keys 3 and 4 get weight
# exactly 0.

# %%
b_, h_, i_ = 0, 0, 1  # sequence 0 (two padded keys), head 0, query 1
fig, axes = plt.subplots(1, 3, figsize=(10, 2.8), gridspec_kw=dict(width_ratios=[1, 1, 1.3]))
keys = [f"key {j}" + (" (pad)" if not attn_mask[b_, j] else "") for j in range(T)]
axes[0].barh(keys[::-1], (scores[b_, h_, i_] * scale)[::-1], color=["0.75" if not m else "C0" for m in attn_mask[b_, ::-1]])
axes[0].set_title(f"1. score q{i_} . k_j / sqrt(HS)", fontsize=9)
axes[1].barh(keys[::-1], att[b_, h_, i_, ::-1], color="C1")
axes[1].set_xlim(0, 1)
axes[1].set_title("2. softmax: weights (sum 1)", fontsize=9)
rows = np.vstack([v[b_, h_], out[b_, h_, i_][None]])  # (T + 1, HS) the values, then their mix
axes[2].imshow(rows, cmap="coolwarm", aspect="auto", vmin=-2.5, vmax=2.5)
axes[2].set_yticks(range(T + 1), [f"v{j}  x {att[b_, h_, i_, j]:.2f}" for j in range(T)] + [f"out[{i_}] = sum"])
axes[2].axhline(T - 0.5, color="k", lw=1.5)
axes[2].set_xticks(range(HS), [f"d{d}" for d in range(HS)])
axes[2].set_title("3. answer: the weighted mix of values", fontsize=9)
fig.tight_layout()
show(fig, "05_soft_lookup.png")
assert np.allclose(att[b_, h_, i_] @ v[b_, h_], out[b_, h_, i_])  # the bottom row is the weighted sum

# %% [markdown]
# ## Backward: the softmax first (exercise 1)
# Backward gets `dout` `(B, NH, T, HS)` and returns `dq`, `dk`, `dv`, each `(B, NH, T, HS)`,
# running the forward lines in reverse: `out = att @ v` is a matrix product (lesson 01's rule
# gives `datt` `(B, NH, T, T)` and `dv`), then the softmax turns `datt` into `dpreatt`
# `(B, NH, T, T)`, then the scale and `q @ k^T` give `dq` and `dk`. The mask is a constant, so it
# gets no gradient and needs no special case: where `att` is 0, `dpreatt` should come out 0 too.
# The softmax's step is yours: lesson 03 went through it on the way to a loss, one operation at a
# time; here it gets any upstream `datt`.

# %% [markdown]
# **Exercise 1.** `my_softmax_backward(datt, att)`: `dpreatt` for `att = softmax(preatt)` over the
# last axis, from `datt` and `att` alone (no `preatt`: the cache does not keep it). Each output
# `att[j]` depends on every `preatt[i]` of its row: work out `d att[j] / d preatt[i]` (two cases,
# `i = j` and `i != j`), then sum over `j` (chain rule: `dpreatt[i] = sum_j datt[j] d att[j] / d
# preatt[i]`). Graded against the numerical gradient of `sum(softmax(preatt) * datt)` for an
# upstream `datt` the grader draws. A stub left as it is makes the lesson go on with the
# reference solution (`lessons/solutions/05_attention.py`).

# %%
ex = course.Exercises("05_attention")


def my_softmax_backward(datt, att):
    """datt, att (..., T) -> dpreatt (..., T), for att = softmax(preatt) over the last axis"""
    raise NotImplementedError("exercise 1: write softmax's backward")  # your code here


def softmax(p):
    e = np.exp(p - p.max(axis=-1, keepdims=True))  # (..., T)
    return e / e.sum(axis=-1, keepdims=True)  # (..., T)


def fresh_inputs(seed):
    """The grader's own preatt (the lesson's shapes, padded keys at MASK_VALUE), drawn now, its att
    and an upstream datt: no lesson variable holds the answer for these."""
    r = np.random.default_rng(seed)
    mask = np.ones((B, T), int)  # (B, T)
    mask[0, T - r.integers(1, 3):] = 0  # 1 or 2 padded keys at the end of sequence 0
    pre = np.where(mask[:, None, None, :] == 1, r.standard_normal((B, NH, T, T)) * 1.5, layers.MASK_VALUE)
    return pre, softmax(pre), r.standard_normal((B, NH, T, T))  # (B, NH, T, T) x 3


def check_softmax_backward(fn):
    pre_g, att_g, up = fresh_inputs(5001)
    pre_in = pre_g.copy()  # (B, NH, T, T)
    full = gradcheck.numerical_grad(lambda: softmax(pre_in), pre_in, up)  # (B, NH, T, T)
    # the softmax with its row sum frozen (a constant): what is left without the term through the sum
    row_sum = np.exp(pre_g - pre_g.max(-1, keepdims=True)).sum(-1, keepdims=True)  # (B, NH, T, 1)
    no_sum = gradcheck.numerical_grad(lambda: np.exp(pre_in - pre_g.max(-1, keepdims=True)) / row_sum, pre_in, up)
    through_sum = "the term through the softmax's sum (every att row sums to 1, whatever preatt is)"
    wrongs = {"the sum's term with datt summed as it is: the sum runs over datt[j] * att[j], weighted by att":
              no_sum - att_g * up.sum(-1, keepdims=True)}
    return [course.close("dpreatt vs numerical gradient", fn(up, att_g.copy()), full, zero_sum=through_sum,
                         terms={through_sum: full - no_sum}, wrongs=wrongs)]


my_softmax_backward = ex.grade(1, my_softmax_backward, check_softmax_backward,
                               refuses=("layers.attention_backward", "kernels.attention_backward",
                                        "kernels.attention._softmax_rows_backward_kernel"))

# %% [markdown]
# ## Backward, line by line
# With `d att[j] / d preatt[i] = att[j] (1 if i = j else 0) - att[j] att[i]`, the sum over `j`
# gives exercise 1's line, `dpreatt = att * (datt - sum_j datt[j] att[j])`: each row's upstream
# gradient minus its `att`-weighted mean, times `att`. The first lines are the matrix product, as
# in lesson 01. To check an intermediate we make it the input of the rest of the forward.

# %%
fwd = lambda: layers.attention_forward(q, k, v, attn_mask)[0]  # noqa: E731
# forward was: out = att @ v
dv = att.swapaxes(-1, -2) @ dout  # (B, NH, T, T) @ (B, NH, T, HS) -> (B, NH, T, HS)
datt = dout @ v.swapaxes(-1, -2)  # (B, NH, T, HS) @ (B, NH, HS, T) -> (B, NH, T, T)
att_in = att.copy()
assert gradcheck.compare("datt", datt, gradcheck.numerical_grad(lambda: att_in @ v, att_in, dout))
# forward was: att = softmax(preatt)
dpreatt = my_softmax_backward(datt, att)  # (B, NH, T, T)
assert np.all(dpreatt[0, :, :, 3:] == 0.0), "no gradient flows to padded keys"
# forward was: preatt = scores * scale + adder
dscores = dpreatt * scale  # (B, NH, T, T)
# forward was: scores = q @ k^T
dq = dscores @ k  # (B, NH, T, T) @ (B, NH, T, HS) -> (B, NH, T, HS)
dk = dscores.swapaxes(-1, -2) @ q  # (B, NH, T, T) @ (B, NH, T, HS) -> (B, NH, T, HS)
for name, g, x in (("dq", dq, q), ("dk", dk, k), ("dv", dv, v)):
    assert gradcheck.compare(f"{name} (atomic)", g, gradcheck.numerical_grad(fwd, x, dout))

# %% [markdown]
# ## Fused backward, and minibert's version
# Attention is already a handful of matrix products; "fusing" here means folding `scale` into
# `dpreatt` and skipping the named intermediates. `minibert.layers.attention_backward(dout,
# cache)` returns `(dq, dk, dv)`. Its cache (`AttentionCache`) holds `q, k, v, att` (plus a
# dropout mask and the scale), exactly the inputs of the lines above.

# %%
for name, mine, lib in zip(("dq", "dk", "dv"), (dq, dk, dv), layers.attention_backward(dout, cache)):
    assert gradcheck.compare(f"{name} vs layers.attention_backward", mine, lib)

# %% [markdown]
# ## Padding really is invisible
# Change the keys and values of the padded tokens to garbage: the outputs of the real tokens
# must not change at all.

# %%
k2, v2 = k.copy(), v.copy()
k2[0, :, 3:] = 1e3 * rng.standard_normal((NH, 2, HS))
v2[0, :, 3:] = 1e3 * rng.standard_normal((NH, 2, HS))
out2, _ = layers.attention_forward(q, k2, v2, attn_mask)  # (B, NH, T, HS)
assert np.allclose(out2[0, :, :3], out_lib[0, :, :3], rtol=0, atol=1e-12)

# %% [markdown]
# ## Picture: attention weights under a padding mask
# Each panel is one head's `att` for sequence 0: row = query, column = key. The two padded
# key columns are exactly zero. Saved as `lessons/out/05_attention_padding.png`.

# %%
fig, axes = plt.subplots(1, NH, figsize=(4 * NH, 3.4))
for h, ax in enumerate(axes):
    im = ax.imshow(att[0, h], vmin=0, vmax=1, cmap="viridis")
    ax.set_title(f"sequence 0, head {h}")
    ax.set_xlabel("key position (3, 4 = padding)")
    ax.set_ylabel("query position")
fig.colorbar(im, ax=axes, shrink=0.8, label="attention weight")
show(fig, "05_attention_padding.png")

# %% [markdown]
# ## Multi-head attention from the pieces
# BERT's attention layer (docs/bert-notes.md §4.5): one linear layer makes `q, k, v` for all heads at once
# (`qkv`, shape `(B, T, 3C)`), `split_heads` reshapes `(B, T, C) -> (B, NH, T, HS)`, each head
# attends independently, `merge_heads` puts the heads back side by side, and a last linear
# layer mixes them. The reshapes are their own inverse in backward: `split` undoes `merge`.

# %%
x = rng.standard_normal((B, T, C))  # (B, T, C)
w_qkv, b_qkv = rng.standard_normal((C, 3 * C)) * 0.5, rng.standard_normal(3 * C) * 0.1  # (C, 3C), (3C,)
w_o, b_o = rng.standard_normal((C, C)) * 0.5, rng.standard_normal(C) * 0.1  # (C, C), (C,)


def mha_forward(x, w_qkv, b_qkv, w_o, b_o):
    qkv, c_qkv = layers.linear_forward(x, w_qkv, b_qkv)  # (B, T, 3C)
    qh, kh, vh = (layers.split_heads(t, NH) for t in np.split(qkv, 3, axis=-1))  # 3 x (B, NH, T, HS)
    a, c_att = layers.attention_forward(qh, kh, vh, attn_mask)  # (B, NH, T, HS)
    a = layers.merge_heads(a)  # (B, NH, T, HS) -> (B, T, C)
    y, c_o = layers.linear_forward(a, w_o, b_o)  # (B, T, C)
    return y, (c_qkv, c_att, c_o)


def mha_backward(dy, caches):
    c_qkv, c_att, c_o = caches
    da, dw_o, db_o = layers.linear_backward(dy, c_o)  # (B, T, C)
    da = layers.split_heads(da, NH)  # (B, T, C) -> (B, NH, T, HS), undoing merge_heads
    dqh, dkh, dvh = layers.attention_backward(da, c_att)  # 3 x (B, NH, T, HS)
    dqkv = np.concatenate([layers.merge_heads(t) for t in (dqh, dkh, dvh)], axis=-1)  # (B, T, 3C)
    dx, dw_qkv, db_qkv = layers.linear_backward(dqkv, c_qkv)  # (B, T, C)
    return dx, dw_qkv, db_qkv, dw_o, db_o


y, caches = mha_forward(x, w_qkv, b_qkv, w_o, b_o)
dy = rng.standard_normal(y.shape)  # (B, T, C)
grads = mha_backward(dy, caches)
arrays = dict(x=x, w_qkv=w_qkv, b_qkv=b_qkv, w_o=w_o, b_o=b_o)
for (name, arr), g in zip(arrays.items(), grads):
    num = gradcheck.numerical_grad(lambda: mha_forward(**arrays)[0], arr, dy)
    assert gradcheck.compare(f"multi-head: d{name}", g, num)

# %% [markdown]
# Look at the `db_qkv` row: `max_rel` is 1.0, yet the verdict is "ok". The middle third of
# `b_qkv` is the *key* bias, and its true gradient is exactly 0: adding the same vector `b_k` to
# every key adds the same number `q . b_k` to every score in a row, and softmax ignores a common
# shift (lesson 03). So we compare 0 with rounding noise (~1e-10); the relative error of noise
# against 0 is meaningless, which is why the verdict uses `atol + rtol * |n|`.

# %%
db_k = grads[2][C:2 * C]  # (C,) the key bias part of db_qkv
print(f"max |d b_k| = {np.abs(db_k).max():.1e}")
assert np.abs(db_k).max() < 1e-12

# %% [markdown]
# ## Discussion
# - The cache holds `att`, a `(B, NH, T, T)` array per layer: quadratic in `T`, the biggest
#   thing in memory for long sequences. It could be recomputed from `q`, `k` and the mask
#   (that is what "flash attention" does); minibert keeps it for clarity.
# - BERT also applies dropout to `att` during training (individual attention weights are
#   dropped); `attention_forward(..., dropout_p, rng)` does that, and the cache stores the mask.
# - Lesson 06 makes this core fast with Numba and checks it against this NumPy reference.

# %% [markdown]
# ## Exercises
# Replace each `raise NotImplementedError(...)` with your code and re-run; the cell after the
# stubs grades your functions and names the check that failed and by how much. A stub left as it
# is makes the lesson go on with the reference solution (`lessons/solutions/05_attention.py`).
#
# (Exercise 1, softmax's backward, came up in the backward section.)
#
# 2. `my_score_std(HS, rng)`: draw unit-normal `q`, `k` of size `HS` (10000 pairs) and return
#    the standard deviation of the *scaled* score `q . k / sqrt(HS)`. It should be about 1 for any
#    `HS`; without the scale it would be about `sqrt(HS)`.
# 3. `my_mask_adder(attn_mask)`: the library does not replace the padded scores as the forward
#    above did; it *adds* a matrix to all scores. Build it from a `(B, T)` 0/1 mask: 0 for a real
#    key, `layers.MASK_VALUE` for padding, with the shape that broadcasts over heads and queries,
#    `(B, 1, 1, T)`. One arithmetic line, no `np.where`.

# %%
def my_score_std(HS, rng):
    """-> () the standard deviation of q . k / sqrt(HS) for unit-normal q, k of size HS"""
    raise NotImplementedError("exercise 2: measure the spread of the scaled scores")  # your code here


def my_mask_adder(attn_mask):
    """attn_mask (B, T) of 0/1 -> adder (B, 1, 1, T): 0 for real keys, MASK_VALUE for padding"""
    raise NotImplementedError("exercise 3: build the mask adder")  # your code here


# %%
def check_score_std(fn):
    """A measurement: it draws from the rng it is given, changes with the draw, and lands within
    the sampling error of 1 (the std of a std of 10000 such scores is about 0.01)."""
    results = []
    for hs in (4, 64):
        r = np.random.default_rng(hs)
        before = r.bit_generator.state
        std = fn(hs, r)
        drew = r.bit_generator.state != before
        results.append(course.true(f"HS = {hs}: draws its q and k from rng", drew,
                                   hint="it drew nothing from rng: a measurement draws its q and k from the "
                                        "rng it is given, and a number typed in is not a measurement"))
        others = [float(fn(hs, np.random.default_rng(1000 + seed))) for seed in range(7)]
        results.append(course.true(f"HS = {hs}: changes with the draw", float(np.ptp([std] + others)) > 0,
                                   f"std = {std:.4f}, then {', '.join(f'{o:.4f}' for o in others[:3])}, ... for "
                                   f"other rngs", "the same number for every draw: a constant, not a measurement"))
        # the std of 10000 scores varies from draw to draw by about 1/sqrt(2 * 10000) = 0.007 of itself
        spread = float(np.std([std] + others, ddof=1) / max(abs(float(np.mean([std] + others))), 1e-12))
        results.append(course.true(f"HS = {hs}: varies as a sample of 10000 does", 0.002 < spread < 0.03,
                                   f"the 8 draws' results spread by {spread:.4f} of their mean",
                                   "a sample of 10000 pairs spreads by about 0.007 of its mean from draw to draw; "
                                   "this spreads " +
                                   ("far less: a number with a little noise added is not a measurement (nor is a "
                                    "std over far more than 10000 scores, the products q_i k_i say)" if spread <= 0.002
                                    else "far more: a smaller sample than 10000 pairs?")))
        results.append(course.true(f"HS = {hs}: std within 0.9..1.1", 0.9 < std < 1.1,
                                   f"std = {std:.3f} (without the 1/sqrt(HS) scale it would be {math.sqrt(hs):.1f})",
                                   score_std_hint(std, hs)))
    return results


def score_std_hint(std, hs):
    """What a std that is not about 1 is about, in words (the scale's usual slips)."""
    if 0.9 * math.sqrt(hs) < std < 1.1 * math.sqrt(hs):
        return "it is about sqrt(HS): the 1/sqrt(HS) scale left out"
    if 0.9 / math.sqrt(hs) < std < 1.1 / math.sqrt(hs):
        return ("it is about 1/sqrt(HS): scaled twice (divided by HS where sqrt(HS) belongs), or the std of the "
                "products q_i k_i, not of their sum over the HS features")
    return "the scaled score q . k / sqrt(HS) of unit-normal q and k has a std of 1"


def check_mask_adder(fn):
    M = layers.MASK_VALUE
    r = np.random.default_rng(5003)
    mask_g = (r.random((3, 7)) < 0.6).astype(int)  # (3, 7) the grader's own mask, drawn now
    mask_g[:, 0] = 1  # every sequence has a real first token
    mask_g[-1] = 1  # and one has no padding at all
    got = fn(mask_g.copy())
    inverted = "the mask read the other way round: MASK_VALUE on the real keys (1 in attn_mask) and 0 on the padding"
    return [course.equal("shape (B, 1, 1, T) for a (3, 7) mask", np.shape(got), (3, 1, 1, 7)),
            course.close("a random (3, 7) mask", got, np.where(mask_g == 1, 0.0, M)[:, None, None, :],
                         rtol=0, atol=0, wrongs={inverted: np.where(mask_g == 1, M, 0.0)[:, None, None, :]}),
            course.close("padding in the middle, [[1, 0, 1]]", fn(np.array([[1, 0, 1]])),
                         np.array([[[[0, M, 0]]]]), rtol=0, atol=0, wrongs={inverted: np.array([[[[M, 0, M]]]])})]


my_score_std = ex.grade(2, my_score_std, check_score_std)
my_mask_adder = ex.grade(3, my_mask_adder, check_mask_adder, allows=("layers.MASK_VALUE",))
for hs in (4, 64):
    print(f"HS = {hs}: std of scaled scores {my_score_std(hs, np.random.default_rng(hs)):.3f}")

# %% [markdown]
# ## Recap
# - `att = softmax(q k^T / sqrt(HS) + adder)`, `out = att v`; padding gets exactly 0 weight.
# - Backward: `dv = att^T dout`, `datt = dout v^T`, softmax backward, then `dq`, `dk`.
# - Multi-head attention = linear -> split heads -> attention -> merge heads -> linear.
#
# **Next: lesson 06**, making this attention core fast with Numba, measured against the NumPy
# reference you just built. (Then lesson 07 assembles a whole encoder block.)

# %%
print("lesson 05 passed")
