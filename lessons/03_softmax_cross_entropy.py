# %% [markdown]
# # Lesson 03: softmax cross-entropy, with ignored positions
#
# **Goal.** Build the loss BERT trains with. For masked-language modelling, BERT predicts the
# original token at only ~15% of positions; every other position must contribute *nothing*,
# neither to the loss nor to the gradient. We mark those positions with `ignore_index = -100`
# and average over the positions that are predicted.
#
# **Finish line.** A line-by-line backward that passes numerical checks, the fused form (you
# derive it: exercise 1) equal to `minibert.layers.cross_entropy_backward`, zero gradient at
# ignored positions, and a picture of softmax temperature in `lessons/out/`.

# %% [markdown]
# ## Setup
# Shape legend: `B` batch, `T` tokens per sequence, `K` number of classes (for BERT's MLM head
# that is the vocabulary size `V`), `N = B*T` positions after flattening.

# %%
import math

import matplotlib.pyplot as plt
import numpy as np

import course  # lessons/course.py: where pictures go, how exercises are graded
from course import show
from minibert.analysis import gradcheck
from minibert import layers

rng = np.random.default_rng(3)
B, T, K = 2, 4, 6
IGNORE = -100  # minibert's ignore_index (the Hugging Face convention)
logits = rng.standard_normal((B, T, K)) * 2  # (B, T, K)
targets = np.array([[2, IGNORE, 0, IGNORE], [5, 1, IGNORE, IGNORE]])  # (B, T) 4 predicted positions
print(gradcheck.HEADER)

# %% [markdown]
# ## The math
# For one position with scores (logits) `z` over `K` classes, softmax turns scores into
# probabilities: `p_k = exp(z_k) / sum_j exp(z_j)`. The loss for the right class `t` is
# `-log p_t`. Over the batch, with `n` the number of predicted (not ignored) positions:
#
#     loss = (1/n) * sum over predicted positions i of  -log p[i, t_i]
#
# We compute `log p` as `z - max(z) - log(sum(exp(z - max(z))))`: subtracting the row maximum
# changes nothing mathematically but keeps `exp` from overflowing.
# Backward needs the probabilities, the targets and the per-position weight (`1/n` or `0`).

# %%
# forward, one op per line
z = logits.reshape(-1, K)  # (B, T, K) -> (N, K)
t = targets.reshape(-1)  # (N,)
valid = t != IGNORE  # (N,) bool
t0 = np.where(valid, t, 0)  # (N,) any legal index for ignored rows; their weight is 0
zmax = z.max(axis=-1, keepdims=True)  # (N, 1)
shifted = z - zmax  # (N, K)
e = np.exp(shifted)  # (N, K)
s = e.sum(axis=-1, keepdims=True)  # (N, 1)
logp = shifted - np.log(s)  # (N, K) log-softmax
logp_t = logp[np.arange(len(t)), t0]  # (N,) log-probability of each target (row i, column t0[i])
n = int(valid.sum())
assert n > 0  # this batch predicts something (exercise 3 asks what to do when it does not)
weight = valid / n  # (N,) 1/n for predicted positions, 0 for ignored ones
loss = -(logp_t * weight).sum()  # ()
loss_lib, cache = layers.cross_entropy_forward(logits, targets, ignore_index=IGNORE)
print(f"loss = {loss:.6f} over n = {n} predicted positions (of N = {len(t)})")
assert np.isclose(loss, loss_lib)

# %% [markdown]
# ## Backward: your derivation
# The loss is a scalar, so the chain rule starts with `dloss = 1` (a caller may pass another
# value: backward multiplies by it). Backward returns `dz = dL/dz`, the same shape as the logits
# `(N, K)`. Each row's loss depends on every logit of its row through the softmax:
# `dz[i, k] = sum over j of dL/dlogp[i, j] * d logp[i, j] / d z[i, k]`, with
# `logp[i, j] = z[i, j] - log(sum over k' of exp(z[i, k']))`, and `dL/dlogp[i, j]` is `-weight[i]`
# at the target `j = t_i` and 0 elsewhere. The row maximum subtracted for stability is a common
# shift of the row, which softmax ignores. In words the answer is "probability minus ...": what,
# and scaled by what? Exercise 1 asks for that one line; the lesson shows the line-by-line
# backward and the formula after grading yours.

# %%
dloss = 1.0  # the chain rule starts here
probs = e / s  # (N, K) the probabilities: what the cache keeps for backward

# %% [markdown]
# ## Two sanity numbers
# With all-equal logits, every class has probability `1/K`, so the loss is `ln K`. This is why
# a freshly initialized BERT starts near `ln V` on the MLM loss (lesson 10). And changing the
# logits of an ignored position must not change the loss at all.

# %%
flat = np.zeros((B, T, K))  # (B, T, K)
assert np.isclose(layers.cross_entropy_forward(flat, targets, IGNORE)[0], math.log(K))
poked = logits.copy()
poked[0, 1] += 100.0  # position (0, 1) is ignored
assert layers.cross_entropy_forward(poked, targets, IGNORE)[0] == loss_lib

# %% [markdown]
# ## Picture: softmax temperature
# Dividing logits by a temperature `tau` before softmax sharpens (`tau < 1`) or flattens
# (`tau > 1`) the distribution. Entropy `-sum p log p` grows with `tau` towards `ln K`.
# Saved as `lessons/out/03_softmax_temperature.png`.

# %%
zrow = np.array([2.0, 1.0, 0.5, 0.0, -1.0, -2.0])  # (K,)
taus = [0.25, 0.5, 1.0, 2.0, 5.0]
fig, axes = plt.subplots(1, len(taus), figsize=(12, 2.6), sharey=True)
entropies = []
for ax, tau in zip(axes, taus):
    p = np.exp(zrow / tau - (zrow / tau).max())  # (K,)
    p = p / p.sum()  # (K,)
    entropies.append(-(p * np.log(p)).sum())
    ax.bar(range(K), p)
    ax.set_title(f"tau = {tau}\nentropy {entropies[-1]:.2f}")
    ax.set_xticks(range(K))
axes[0].set_ylabel("probability")
fig.tight_layout()
show(fig, "03_softmax_temperature.png")
assert all(a < b for a, b in zip(entropies, entropies[1:])) and entropies[-1] < math.log(K)

# %% [markdown]
# ## Discussion
# `CrossEntropyCache` keeps `probs` `(N, K)`, the targets, and the weights. It does not keep
# the logits: backward only needs `probs`. For BERT's MLM head `K` is the whole vocabulary, so
# `probs` is the biggest array in the heads; that is one reason BERT computes logits only at
# the masked positions (lesson 10), not at all `T` positions.

# %% [markdown]
# ## Exercises
# Replace each `raise NotImplementedError(...)` with your code and re-run; the cell after the
# stubs grades your functions and names the check that failed and by how much. A stub left as it
# is makes the lesson go on with the reference solution
# (`lessons/solutions/03_softmax_cross_entropy.py`).
#
# 1. `my_cross_entropy_backward(dloss, probs, t0, weight)`: the fused gradient `(N, K)`, with
#    `probs` `(N, K)`, the targets `t0` `(N,)` and the per-row weights `weight` `(N,)`.
# 2. `my_tempered_ce_backward(dloss, z, t0, weight, tau)`: the same loss with the logits divided
#    by a temperature before the softmax, `-log softmax(z / tau)[t]` averaged with `weight`
#    (distillation trains with such a loss). Return `dz` `(N, K)`: work out what the division
#    adds to exercise 1's gradient. Graded against the numerical gradient at `tau` = 0.5 and 3.
# 3. `my_masked_mean(values, valid)`: the mean over the `valid` entries that returns 0 (not NaN)
#    when nothing is valid, as `cross_entropy_forward` does for a batch with no predictions.

# %%
def my_cross_entropy_backward(dloss, probs, t0, weight):
    """probs (N, K), t0 (N,), weight (N,) -> dz (N, K)"""
    raise NotImplementedError("exercise 1: write the fused gradient")  # your code here


def my_tempered_ce_backward(dloss, z, t0, weight, tau):
    """z (N, K) logits, t0 (N,), weight (N,), tau > 0 -> dz (N, K) of the loss on softmax(z / tau)"""
    raise NotImplementedError("exercise 2: the gradient with a temperature")  # your code here


def my_masked_mean(values, valid):
    """values (N,), valid (N,) bool -> () the mean over valid entries, 0.0 if there are none"""
    raise NotImplementedError("exercise 3: write the masked mean")  # your code here


# %%
ex = course.Exercises("03_softmax_cross_entropy")


def fresh_inputs(seed):
    """The grader's own logits (B, T, K) and targets (B, T) with ignored positions, drawn now, and
    what backward takes for them: no lesson variable holds the answer for these."""
    r = np.random.default_rng(seed)
    lg = r.standard_normal((B, T, K)) * 2  # (B, T, K)
    tg = r.integers(0, K, (B, T))  # (B, T)
    tg[r.random((B, T)) < 0.4] = IGNORE
    tg[0, 0] = r.integers(0, K)  # at least one predicted position
    tg[-1, -1] = IGNORE  # and at least one ignored
    zg = lg.reshape(-1, K)  # (N, K)
    tf = tg.reshape(-1)  # (N,)
    ok = tf != IGNORE  # (N,)
    pg = np.exp(zg - zg.max(-1, keepdims=True))
    pg = pg / pg.sum(-1, keepdims=True)  # (N, K)
    return lg, tg, zg, pg, np.where(ok, tf, 0), ok / ok.sum()


def check_cross_entropy_backward(fn):
    lg, tg, _, pg, t0g, wg = fresh_inputs(3001)
    num = gradcheck.numerical_grad_scalar(
        lambda: layers.cross_entropy_forward(lg, tg, IGNORE)[0], lg).reshape(-1, K)  # (N, K)
    n = 1 / wg.max()  # the number of predicted positions the loss averages over
    factors = {"1/n": 1 / n, "n": n}
    zz = lg.reshape(-1, K).copy()  # (N, K)
    lse = lambda: np.log(np.exp(zz).sum(-1))  # noqa: E731  (N,) log sum exp of each row
    picked = lambda: np.take_along_axis(zz, t0g[:, None], -1)[:, 0]  # noqa: E731  (N,) z at the target

    def parts(dl):  # the loss is sum(weight * (lse(z) - z_t)): each part's gradient on its own
        return lambda: {"the term from -z_t (the target's own logit: -1 at the target)":
                        gradcheck.numerical_grad_scalar(lambda: -dl * (picked() * wg).sum(), zz),
                        "the term from log sum exp z (the softmax: probs on every class)":
                        gradcheck.numerical_grad_scalar(lambda: dl * (lse() * wg).sum(), zz)}

    def mistakes(dl):
        return lambda: {"the weights left out: each row's gradient is scaled by its weight (1/n on a predicted "
                        "position, 0 on an ignored one)":
                        gradcheck.numerical_grad_scalar(lambda: dl * (lse() - picked()).sum(), zz)}

    return [course.close("dz vs numerical gradient", fn(1.0, pg, t0g, wg), num, factors=factors, terms=parts(1.0),
                         wrongs=mistakes(1.0)),
            course.close("dz with dloss = 2.5", fn(2.5, pg, t0g, wg), 2.5 * num, factors={**factors, "dloss": 2.5},
                         terms=parts(2.5), wrongs=mistakes(2.5))]


def check_tempered_ce_backward(fn):
    _, _, zg, _, t0g, wg = fresh_inputs(3002)
    results = []
    for tau in (0.5, 3.0):
        zz = zg.copy()  # (N, K)
        loss_tau = lambda: -(np.take_along_axis(  # noqa: E731  the mean of -log softmax(z / tau)[t]
            (zz / tau) - np.log(np.exp(zz / tau).sum(-1, keepdims=True)), t0g[:, None], -1)[:, 0] * wg).sum()
        num = gradcheck.numerical_grad_scalar(loss_tau, zz)  # (N, K)
        results.append(course.close(f"dz at tau = {tau:g} vs numerical gradient", fn(1.0, zg.copy(), t0g, wg, tau), num,
                                    factors={"1/tau": 1 / tau}))
    return results


def check_masked_mean(fn):
    lg, tg, _, pg, t0g, _ = fresh_inputs(3003)
    ok = tg.reshape(-1) != IGNORE  # (N,)
    nll = -np.log(pg[np.arange(len(t0g)), t0g])  # (N,) -log p_t at every position
    vals = np.random.default_rng(3004).standard_normal(6)  # (6,)
    keep = np.array([False, True, False, True, True, False])  # (6,)
    over_all = "the sum of the valid entries divided by all N entries: the mean is over the valid ones alone"
    nan_words = "0/0 when no entry is valid: nan; with no valid entry the mean is 0.0, as the loss is"
    empty = fn(np.ones(5), np.zeros(5, bool))
    no_valid = course.close("no valid entries gives 0.0", empty, 0.0)
    if not no_valid.ok and np.ndim(empty) == 0 and np.isnan(empty):
        no_valid = no_valid._replace(detail=f"{no_valid.detail}. {nan_words}")
    return [no_valid,
            course.close("mean of -log p_t over predictions = loss", fn(nll, ok),
                         layers.cross_entropy_forward(lg, tg, IGNORE)[0], wrongs={over_all: nll[ok].sum() / len(nll)}),
            course.close("random values, entries 1, 3, 4 valid", fn(vals, keep), vals[keep].mean(),
                         wrongs={over_all: vals[keep].sum() / len(vals)})]


my_cross_entropy_backward = ex.grade(1, my_cross_entropy_backward, check_cross_entropy_backward,
                                     refuses=("layers.cross_entropy_backward", "kernels.cross_entropy_backward"))
my_tempered_ce_backward = ex.grade(2, my_tempered_ce_backward, check_tempered_ce_backward,
                                   refuses=("layers.cross_entropy_backward", "kernels.cross_entropy_backward"))
my_masked_mean = ex.grade(3, my_masked_mean, check_masked_mean)
all_ignored = np.full((B, T), IGNORE)  # (B, T)
assert layers.cross_entropy_forward(logits, all_ignored, IGNORE)[0] == 0.0  # what exercise 3 mimics

# %% [markdown]
# ## Backward, line by line (how exercise 1's line comes about)
# Each check below treats one intermediate as the input of "the rest of the forward" and differentiates the scalar loss
# numerically (`gradcheck.numerical_grad_scalar`).

# %%
rows = np.arange(len(t))  # (N,) row index for picking one entry per row


def loss_from_logp(logp):  # the forward from logp on
    return -(logp[rows, t0] * weight).sum()  # ()


def loss_from_e(e):  # the forward from e on (shifted held fixed)
    return loss_from_logp(shifted - np.log(e.sum(-1, keepdims=True)))  # ()


def loss_from_shifted(shifted):  # the forward from shifted on (both paths)
    return loss_from_logp(shifted - np.log(np.exp(shifted).sum(-1, keepdims=True)))  # ()


# forward was: loss = -(logp_t * weight).sum()
dlogp_t = -weight * dloss  # (N,)
# forward was: logp_t = logp[i, t0[i]]   (pick one entry per row)
dlogp = np.zeros_like(logp)  # (N, K)
dlogp[rows, t0] = dlogp_t  # one entry per row, so plain assignment is safe here
logp_in = logp.copy()
assert gradcheck.compare("dlogp", dlogp, gradcheck.numerical_grad_scalar(lambda: loss_from_logp(logp_in), logp_in))
# forward was: logp = shifted - log(s)
dshifted = dlogp.copy()  # (N, K) first path into shifted
ds = -dlogp.sum(axis=-1, keepdims=True) / s  # (N, 1) d(-log s)/ds = -1/s, summed over the K uses
# forward was: s = e.sum(axis=-1)
de = np.broadcast_to(ds, e.shape)  # (N, K) every e_k adds to s with weight 1
e_in = e.copy()
assert gradcheck.compare("de", de, gradcheck.numerical_grad_scalar(lambda: loss_from_e(e_in), e_in))
# forward was: e = exp(shifted)
dshifted = dshifted + de * e  # (N, K) gradients add up at forks (second path into shifted)
shifted_in = shifted.copy()
assert gradcheck.compare("dshifted", dshifted, gradcheck.numerical_grad_scalar(lambda: loss_from_shifted(shifted_in), shifted_in))
# forward was: shifted = z - zmax   (zmax is itself a function of z, so it has a gradient too...)
dzmax = -dshifted.sum(axis=-1)  # (N,) ...but it is 0 in exact math: softmax ignores a common shift
assert np.abs(dzmax).max() < 1e-12
dz = dshifted  # (N, K) so only the direct path remains
num_dz = gradcheck.numerical_grad_scalar(
    lambda: layers.cross_entropy_forward(logits, targets, IGNORE)[0], logits).reshape(-1, K)  # (N, K)
assert gradcheck.compare("dz (atomic)", dz, num_dz)

# %% [markdown]
# ## Fused backward (exercise 1's answer)
# Collapsing the lines: `dshifted = dlogp - p * sum(dlogp)`, and `dlogp` is `-weight` at the
# target and 0 elsewhere, so
#
#     dz = dloss * weight * (p - onehot(t))
#
# "Probability minus truth", scaled by `1/n`. Ignored rows have weight 0, so their gradient is
# exactly 0. This is `minibert.layers.cross_entropy_backward`.

# %%
onehot = np.eye(K)[t0]  # (N, K)
dz_fused = dloss * weight[:, None] * (probs - onehot)  # (N, K)
dz_lib = layers.cross_entropy_backward(dloss, cache).reshape(-1, K)  # (B, T, K) -> (N, K)
assert gradcheck.compare("dz fused vs numerical", dz_fused, num_dz)
assert gradcheck.compare("dz fused vs layers.cross_entropy_backward", dz_fused, dz_lib)
assert np.all(dz_lib[~valid] == 0), "ignored positions must get exactly zero gradient"

# %% [markdown]
# The `max_rel` of about 6e-7 above sits in CS231n's "look closer" range. Looking closer: it
# comes from the smallest gradient entry (about 2e-5, a tiny probability times `1/n`), where the
# numerical estimate's own rounding error (~3e-11, the `max_abs` column) is a larger fraction of
# the value. The verdict rule `atol + rtol * |n|` accepts it; a real bug would give ~1.


# %% [markdown]
# ## Recap
# - Loss: mean of `-log softmax(z)[target]` over predicted positions only.
# - Gradient: `weight * (probs - onehot)`; ignored positions get exactly 0.
# - Uniform logits give `ln K`, the sanity check for a fresh model.
#
# **Next: lesson 04**, the embedding sum that turns token ids into BERT's first hidden states.

# %%
print("lesson 03 passed")
