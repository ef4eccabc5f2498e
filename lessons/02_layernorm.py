# %% [markdown]
# # Lesson 02: LayerNorm
#
# **Goal.** Build LayerNorm, which BERT applies after the embeddings and twice in every
# encoder block. Its backward is the first with a twist: every output depends on every input
# of the same token (through the mean and the variance), so the gradient has extra terms.
#
# **Finish line.** A line-by-line backward where every intermediate passes a numerical check,
# then the fused three-term formula, equal to `minibert.layers.layernorm_backward`. You will
# also see a real bug slip through a check when `w` is all ones.

# %% [markdown]
# ## Setup
# Shape legend: `B` batch, `T` tokens per sequence, `C` hidden size (features per token).
# LayerNorm works on each token's `C` features separately.

# %%
import numpy as np

import course  # lessons/course.py: where pictures go, how exercises are graded
from minibert.analysis import gradcheck
from minibert import layers

rng = np.random.default_rng(2)
B, T, C = 2, 3, 8
eps = 1e-12  # BERT's epsilon (docs/bert-notes.md §4.7)
x = rng.standard_normal((B, T, C)) * 2 + 1  # (B, T, C)
w = 1 + 0.1 * rng.standard_normal(C)  # (C,) random, never ones (see the end of the lesson)
b = 0.1 * rng.standard_normal(C)  # (C,)
print(gradcheck.HEADER)

# %% [markdown]
# ## The math
# For each token (a row of `C` numbers):
#
#     mean = (1/C) sum_c x_c          var = (1/C) sum_c (x_c - mean)^2     (population variance)
#     rstd = 1 / sqrt(var + eps)      norm = (x - mean) * rstd             out = w * norm + b
#
# `w` and `b` (called gamma and beta in the paper) are learned, shape `(C,)`, shared by all
# tokens. After normalizing, each row of `norm` has mean 0 and variance 1.
# Backward needs `norm`, `rstd` and `w`: that is exactly what `LayerNormCache` holds.

# %%
# forward, one op per line
mean = x.mean(axis=-1, keepdims=True)  # (B, T, 1)
xc = x - mean  # (B, T, C)
var = (xc * xc).mean(axis=-1, keepdims=True)  # (B, T, 1)
rstd = 1.0 / np.sqrt(var + eps)  # (B, T, 1)
norm = xc * rstd  # (B, T, C)
out = norm * w + b  # (B, T, C)
assert np.allclose(norm.mean(-1), 0) and np.allclose(norm.var(-1), 1)
assert np.allclose(out, layers.layernorm_forward(x, w, b, eps)[0])
dout = rng.standard_normal(out.shape)  # (B, T, C)

# %% [markdown]
# ## Backward: your derivation
# Backward gets `dout` `(B, T, C)` and returns `dx` `(B, T, C)`, `dw` `(C,)` and `db` `(C,)`. By
# the chain rule, `dx[c] = sum over c' of dout[c'] * d out[c'] / d x[c]` within a token's row,
# and `x[c]` reaches every `out[c']` of its row three ways: directly through `xc = x - mean`,
# through `mean`, and through `var` (hence `rstd`). `mean`, `var` and `rstd` are `(B, T, 1)`,
# broadcast over `C` in the forward, so their gradients sum over `C` (`keepdims=True`); `w` and
# `b` are shared by every token, so theirs sum over `B` and `T`. Write `g = dout * w` (the
# gradient reaching `norm`) and use `xc = norm / rstd`: what is left is three terms in `g`,
# `norm` and `rstd`, with two means over the `C` features: the plain scaling of `g`, and one
# correction for each statistic the row's output depends on. Working that out, on paper, is
# exercise 1; the lesson shows the line-by-line backward and the formula after grading yours.

# %% [markdown]
# ## Discussion
# - `LayerNormCache(norm, w, rstd)`: backward needs `norm` and `rstd`, not `x` and `mean`.
#   `norm` is `(B, T, C)`, `rstd` only `(B, T, 1)`. One could store `x`, `mean`, `rstd` and
#   recompute `norm`; minibert stores `norm` because it is used twice (in `dw` and in `dx`).
# - `eps = 1e-12` is tiny: it only protects against a row of identical numbers. With float32
#   training it is smaller than rounding, as in the original BERT.

# %% [markdown]
# ## Exercises
# Replace each `raise NotImplementedError(...)` with your code and re-run; the cell after the
# stubs grades your functions and names the check that failed and by how much. A stub left as it
# is makes the lesson go on with the reference solution (`lessons/solutions/02_layernorm.py`).
#
# 1. `my_layernorm_backward(dout, norm, w, rstd)`: return `(dx, dw, db)`, `dx` with the fused
#    formula you derived above (one line, no `xc` or `var`: the cache holds only `norm`, `w` and
#    `rstd`). Each gradient is graded on its own against the numerical gradient.
# 2. `my_rmsnorm_backward(dout, x, w)`: RMSNorm (used by newer models such as LLaMA) skips the
#    mean: `out = w * x * r` with `r = 1 / sqrt(mean(x^2) + eps)`. Derive `dx` the same way
#    (it has two terms, not three: there is no mean to undo).
# 3. `my_dx_without_mean_term(dout, norm, w, rstd)`: the gradient you get if you forget that the
#    mean depends on `x`, that is the true gradient of a LayerNorm whose mean is a constant `m`
#    (computed once, then frozen): `out = w * (x - m) / sqrt(mean((x - m)^2) + eps) + b`. Derive it
#    as a change to your exercise 1 formula; it is graded against the numerical gradient of that
#    frozen-mean layer. The true `dx` sums to zero over the `C` features of every token, for
#    **every** `w` and `dout`: adding the same number to all inputs of a row leaves `norm`, hence
#    the output, unchanged, so the gradient has no component along `(1, ..., 1)`. The frozen-mean
#    gradient does not: the check below prints both row sums, with this lesson's random `w`.

# %%
def my_layernorm_backward(dout, norm, w, rstd):
    """dout, norm (B, T, C); w (C,); rstd (B, T, 1) -> dx (B, T, C), dw (C,), db (C,)"""
    raise NotImplementedError("exercise 1: write the fused LayerNorm backward")  # your code here


def my_rmsnorm_backward(dout, x, w, eps=1e-12):
    """dout, x (B, T, C); w (C,) -> dx (B, T, C) for out = w * x / sqrt(mean(x^2) + eps)"""
    raise NotImplementedError("exercise 2: derive RMSNorm's backward")  # your code here


def my_dx_without_mean_term(dout, norm, w, rstd):
    """dout, norm (B, T, C); w (C,); rstd (B, T, 1) -> dx (B, T, C) with the mean held constant"""
    raise NotImplementedError("exercise 3: write the formula without its mean term")  # your code here


# %%
ex = course.Exercises("02_layernorm")


def fresh_inputs(seed):
    """The grader's own x, w, b, dout (the lesson's shapes), drawn now, and the forward's norm and
    rstd for them: no lesson variable holds the answer for these."""
    r = np.random.default_rng(seed)
    xg, wg, bg, dg = (r.standard_normal(a.shape) for a in (x, w, b, dout))
    mu = xg.mean(-1, keepdims=True)
    rstd_g = 1 / np.sqrt(((xg - mu) ** 2).mean(-1, keepdims=True) + eps)  # (B, T, 1)
    return xg, wg, bg, dg, (xg - mu) * rstd_g, rstd_g


def frozen(x0, w0, b0, d0, mean_of=None, var_of=None):
    """LayerNorm of x0 with its mean and/or its variance frozen at x0's (constants), for the terms
    each statistic adds to the gradient: the full gradient minus this one's."""
    xx = x0.copy()

    def forward():
        m = mean_of if mean_of is not None else xx.mean(-1, keepdims=True)  # (B, T, 1)
        v = var_of if var_of is not None else ((xx - m) ** 2).mean(-1, keepdims=True)  # (B, T, 1)
        return (xx - m) / np.sqrt(v + eps) * w0 + b0  # (B, T, C)
    return gradcheck.numerical_grad(forward, xx, d0)  # (B, T, C)


W_FORGOTTEN = "w left out of dx: the gradient reaching the normalized x is dout * w, not dout"


def check_layernorm_backward(fn):
    xg, wg, bg, dg, norm_g, rstd_g = fresh_inputs(2001)
    mine = fn(dg, norm_g, wg, rstd_g)
    fwd = lambda: layers.layernorm_forward(xg, wg, bg, eps)[0]  # noqa: E731
    full = gradcheck.numerical_grad(fwd, xg, dg)  # (B, T, C)
    mean_g = xg.mean(-1, keepdims=True)
    var_g = ((xg - mean_g) ** 2).mean(-1, keepdims=True)
    terms = {"the mean term (the path from x through the mean)": full - frozen(xg, wg, bg, dg, mean_of=mean_g),
             "the variance term (the path from x through the variance)": full - frozen(xg, wg, bg, dg, var_of=var_g)}
    no_w = lambda: {W_FORGOTTEN: frozen(xg, np.ones_like(wg), bg, dg)}  # noqa: E731  the gradient for w = 1
    return [course.close("dx vs numerical gradient", mine[0], full, zero_sum="the mean term", terms=terms, wrongs=no_w),
            course.close("dw vs numerical gradient", mine[1], gradcheck.numerical_grad(fwd, wg, dg)),
            course.close("db vs numerical gradient", mine[2], gradcheck.numerical_grad(fwd, bg, dg))]


def check_rmsnorm_backward(fn):
    xg, wg, _, dg, _, _ = fresh_inputs(2002)
    mine = fn(dg, xg.copy(), wg, eps)
    rms = lambda: xg / np.sqrt((xg * xg).mean(-1, keepdims=True) + eps) * wg  # noqa: E731
    r = 1 / np.sqrt((xg * xg).mean(-1, keepdims=True) + eps)  # (B, T, 1) frozen: a constant
    xx = xg.copy()
    full = gradcheck.numerical_grad(rms, xg, dg)  # (B, T, C)
    r_constant = gradcheck.numerical_grad(lambda: xx * r * wg, xx, dg)  # (B, T, C)
    terms = {"the term through r (r = 1 / sqrt(mean(x^2) + eps) depends on x)": full - r_constant}
    no_w = lambda: {W_FORGOTTEN: gradcheck.numerical_grad(  # noqa: E731  the gradient of RMSNorm with w = 1
        lambda: xx / np.sqrt((xx * xx).mean(-1, keepdims=True) + eps), xx, dg)}
    return [course.close("dx vs numerical gradient", mine, full, terms=terms, wrongs=no_w,
                         factors={"C (a sum over the features where their mean belongs)": xg.shape[-1]})]


def check_dx_without_mean_term(fn):
    xx, wg, bg, dg, norm_g, rstd_g = fresh_inputs(2003)
    mine = fn(dg, norm_g, wg, rstd_g)
    m = xx.mean(axis=-1, keepdims=True)  # (B, T, 1) computed once, then a constant
    x_full = xx.copy()

    def frozen_mean_layernorm():
        xm = xx - m  # (B, T, C)
        return xm / np.sqrt((xm * xm).mean(-1, keepdims=True) + eps) * wg + bg  # (B, T, C)

    full = gradcheck.numerical_grad(lambda: layers.layernorm_forward(x_full, wg, bg, eps)[0], x_full, dg)  # (B, T, C)
    r0 = 1 / np.sqrt(((xx - m) ** 2).mean(-1, keepdims=True) + eps)  # (B, T, 1) the scale, frozen too
    both_frozen = gradcheck.numerical_grad(lambda: (xx - m) * r0 * wg + bg, xx, dg)  # (B, T, C)
    wrongs = {"exercise 1's dx unchanged (with the mean a constant, its term goes)": full,
              "the variance's term left out too: only the mean is held constant; the variance still moves with x, "
              "so its term stays": both_frozen}
    return [course.close("dx vs numerical gradient, mean held constant", mine,
                         gradcheck.numerical_grad(frozen_mean_layernorm, xx, dg), wrongs=wrongs)]


my_layernorm_backward = ex.grade(1, my_layernorm_backward, check_layernorm_backward, paths=("dx", "dw", "db"),
                                 refuses=("layers.layernorm_backward", "kernels.layernorm_backward"))
my_rmsnorm_backward = ex.grade(2, my_rmsnorm_backward, check_rmsnorm_backward)
my_dx_without_mean_term = ex.grade(3, my_dx_without_mean_term, check_dx_without_mean_term,
                                   refuses=("layers.layernorm_backward", "kernels.layernorm_backward"))
sums_true = np.abs(my_layernorm_backward(dout, norm, w, rstd)[0].sum(axis=-1)).max()  # largest |row sum| of the true dx
sums_no_mean = np.abs(my_dx_without_mean_term(dout, norm, w, rstd).sum(axis=-1)).max()
print(f"w = {w.round(2)} (random, not ones)")
print(f"largest |sum over C of dx|: true dx {sums_true:.1e}, without the mean term {sums_no_mean:.1e}")
assert sums_true < 1e-12 and sums_no_mean > 1e-3

# %% [markdown]
# ## Backward, line by line (how exercise 1's formula comes about)
# Each check treats one intermediate as the input of the rest of the forward. `rest_from_xc`
# recomputes `var`, `rstd`, `norm` and `out` from `xc`, so its numerical gradient includes
# *both* paths from `xc` (directly into `norm`, and through `var`).
# Broadcasting rule for backward: if forward broadcast a `(B, T, 1)` array over `C`, backward
# sums over that axis (`keepdims=True`).

# %%
def rest_from_xc(xc):
    rstd = 1.0 / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + eps)  # (B, T, 1)
    return xc * rstd * w + b  # (B, T, C)


# forward was: out = norm * w + b
db = dout.sum(axis=(0, 1))  # (C,)
dw = (dout * norm).sum(axis=(0, 1))  # (C,)
dnorm = dout * w  # (B, T, C)
norm_in = norm.copy()
assert gradcheck.compare("dnorm", dnorm, gradcheck.numerical_grad(lambda: norm_in * w + b, norm_in, dout))
# forward was: norm = xc * rstd
drstd = (dnorm * xc).sum(axis=-1, keepdims=True)  # (B, T, 1) rstd was broadcast over C
dxc = dnorm * rstd  # (B, T, C) first path into xc
rstd_in = rstd.copy()
assert gradcheck.compare("drstd", drstd, gradcheck.numerical_grad(lambda: xc * rstd_in * w + b, rstd_in, dout))
# forward was: rstd = (var + eps) ** -0.5
dvar = drstd * -0.5 * (var + eps) ** -1.5  # (B, T, 1)
var_in = var.copy()
assert gradcheck.compare("dvar", dvar, gradcheck.numerical_grad(
    lambda: xc / np.sqrt(var_in + eps) * w + b, var_in, dout))
# forward was: var = mean(xc * xc)
dxc = dxc + dvar * 2.0 * xc / C  # (B, T, C) gradients add up at forks (second path into xc)
xc_in = xc.copy()
assert gradcheck.compare("dxc", dxc, gradcheck.numerical_grad(lambda: rest_from_xc(xc_in), xc_in, dout))
# forward was: xc = x - mean,  mean = mean(x)
dmean = -dxc.sum(axis=-1, keepdims=True)  # (B, T, 1)
dx = dxc + dmean / C  # (B, T, C) every x_c contributed 1/C to the mean
fwd = lambda: layers.layernorm_forward(x, w, b, eps)[0]  # noqa: E731
num_dx = gradcheck.numerical_grad(fwd, x, dout)  # (B, T, C)
assert gradcheck.compare("dx (atomic)", dx, num_dx)
assert gradcheck.compare("dw", dw, gradcheck.numerical_grad(fwd, w, dout))
assert gradcheck.compare("db", db, gradcheck.numerical_grad(fwd, b, dout))

# %% [markdown]
# ## Fused backward (exercise 1's answer)
# Write `g = dout * w` (that is `dnorm`). Substituting the lines above and using
# `xc = norm / rstd` and `(var + eps)^-1.5 = rstd^3`, everything collapses to
#
#     dx = rstd * (g - mean(g) - norm * mean(g * norm))        (means over the C features)
#
# Read it as: the plain scaling `rstd * g`, minus the part of `g` that would shift the mean,
# minus the part that would change the variance. This is the line in
# `minibert.layers.layernorm_backward`.

# %%
g = dout * w  # (B, T, C)
dx_fused = rstd * (g - g.mean(-1, keepdims=True) - norm * (g * norm).mean(-1, keepdims=True))  # (B, T, C)
out_lib, cache = layers.layernorm_forward(x, w, b, eps)
dx_lib, dw_lib, db_lib = layers.layernorm_backward(dout, cache)
assert gradcheck.compare("dx fused vs atomic", dx_fused, dx)
assert gradcheck.compare("dx fused vs numerical", dx_fused, num_dx)
assert gradcheck.compare("dx fused vs layers.layernorm_backward", dx_fused, dx_lib)
assert gradcheck.compare("dw vs layers.layernorm_backward", dw, dw_lib)
assert gradcheck.compare("db vs layers.layernorm_backward", db, db_lib)

# %% [markdown]
# ## A bug that a lazy check lets through
# Forget `* w` in `g` of the fused formula. At initialization BERT's LayerNorm has `w = 1, b = 0`. If you check with
# those values, multiplying by one changes nothing and the bug passes. With random `w` it fails.

# %%
def buggy_dx(dout, norm, rstd):
    g = dout  # BUG: should be dout * w
    return rstd * (g - g.mean(-1, keepdims=True) - norm * (g * norm).mean(-1, keepdims=True))  # (B, T, C)


ones, zeros = np.ones(C), np.zeros(C)
_, c1 = layers.layernorm_forward(x, ones, zeros, eps)
num_ones = gradcheck.numerical_grad(lambda: layers.layernorm_forward(x, ones, zeros, eps)[0], x, dout)
assert gradcheck.compare("buggy, w = ones (bug hidden!)", buggy_dx(dout, c1.norm, c1.rstd), num_ones)
assert not gradcheck.compare("buggy, random w (bug caught)", buggy_dx(dout, norm, rstd), num_dx)


# %% [markdown]
# ## Recap
# - LayerNorm normalizes each token's features, then scales by `w` and shifts by `b`.
# - `dx = rstd * (g - mean(g) - norm * mean(g * norm))` with `g = dout * w`.
# - Check with random `w`, `b`: ones and zeros hide bugs.
#
# **Next: lesson 03**, softmax cross-entropy, the loss BERT uses, with positions it ignores.

# %%
print("lesson 02 passed")
