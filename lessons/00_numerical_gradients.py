# %% [markdown]
# # Lesson 00: numerical gradients, and how to read a gradient check
#
# **Goal.** Every layer in minibert has a hand-written backward pass. How do we know it is
# right? We nudge the input a tiny bit, watch how the output moves, and compare that slope with
# the hand-written gradient. This lesson builds that check from scratch and teaches you to read
# the table that `minibert.analysis.gradcheck.compare` prints.
#
# **Finish line.** Your own `my_numerical_grad` agrees with `minibert.analysis.gradcheck.numerical_grad`,
# a hand-derived gradient passes the check, and two classic mistakes (float32, `dout = ones`)
# are shown to fool or break the check. Every check below is an `assert`: if this file runs to
# the end, you passed.

# %% [markdown]
# ## Setup
# We use float64 everywhere in checks (you will see why). `rng` is the one source of randomness.
# Shapes: `x` is an array of any shape; here `(N, D) = (3, 4)`.

# %%
import matplotlib.pyplot as plt
import numpy as np

import course  # lessons/course.py: where pictures go, how exercises are graded
from course import Exercises, show
from minibert.analysis import gradcheck

rng = np.random.default_rng(0)
N, D = 3, 4

# %% [markdown]
# ## The math
# A layer is a function `out = f(x)`. Somewhere later a scalar loss `L` is computed from `out`.
# Backward receives `dout = dL/dout` (same shape as `out`) and must return `dx = dL/dx`
# (same shape as `x`). By the chain rule, `dx[i] = sum_j dout[j] * d out[j] / d x[i]`.
#
# To test it we pretend the loss is exactly `L(x) = sum(f(x) * dout)` with a fixed random `dout`.
# Then `dL/dx` is precisely what backward should return, and we can estimate it one entry at a
# time with a **centered difference** (`e_i` is 1 at entry `i`, 0 elsewhere, `h` is tiny):
#
#     dx[i] ~= (L(x + h e_i) - L(x - h e_i)) / (2h)        error ~ h^2
#
# The one-sided version `(L(x + h e_i) - L(x)) / h` has error ~ h, much worse.
#
# Our example function, elementwise: `f(x) = tanh(x) * x^2`.

# %% [markdown]
# ## Forward, one operation per line

# %%
x = rng.standard_normal((N, D))  # (N, D)
t = np.tanh(x)  # (N, D)
sq = x * x  # (N, D)
out = t * sq  # (N, D)
dout = rng.standard_normal(out.shape)  # (N, D) a random upstream gradient, never ones

# %% [markdown]
# ## Backward, one line per forward line
# We walk the forward lines in reverse. Each line restates the forward line it undoes.
# `x` is used twice (in `t` and in `sq`), so its gradient is the **sum** of both contributions.
# To check an intermediate such as `t`, we treat it as the input of the rest of the forward
# (`out = t * sq`) and differentiate numerically with respect to it.

# %%
print(gradcheck.HEADER)
# forward was: out = t * sq
dt = dout * sq  # (N, D)
dsq = dout * t  # (N, D)
t_in = t.copy()
assert gradcheck.compare("dt", dt, gradcheck.numerical_grad(lambda: t_in * sq, t_in, dout))
sq_in = sq.copy()
assert gradcheck.compare("dsq", dsq, gradcheck.numerical_grad(lambda: t * sq_in, sq_in, dout))
# forward was: sq = x * x
dx_from_sq = dsq * 2 * x  # (N, D)
# forward was: t = tanh(x)
dx_from_t = dt * (1 - t * t)  # (N, D)
dx = dx_from_sq + dx_from_t  # (N, D) gradients add up at forks (x feeds t and sq)


def f(x):
    return np.tanh(x) * x * x  # (N, D)


num_dx = gradcheck.numerical_grad(lambda: f(x), x, dout)  # (N, D)
assert gradcheck.compare("dx (atomic)", dx, num_dx)

# %% [markdown]
# ## Fused backward
# Collapse the lines into one formula: `dx = dout * (2 x tanh(x) + x^2 (1 - tanh(x)^2))`.
# It must equal the atomic version and the numerical gradient.
#
# **Reading the table.** `gradcheck.compare(name, analytic, reference)` prints one row and
# returns a `Check` that is truthy when the check passes (so we can `assert` it). `max_abs` is
# the largest `|analytic - numeric|`. `max_rel` is a relative error: for each entry the
# difference divided by the *sum* of the two sizes, `|a| + |n|` (with a floor under it), the
# largest over the entries (exercise 2 writes it). That is the denominator of CS231n's
# assignment code (`rel_error`, floor 1e-8; minibert's floor is 1e-12); CS231n's notes divide by
# the *larger* size, `max(|a|, |n|)`, which gives up to twice as much, so their ranges read as
# a factor of 2 or less off here. Below 1e-7 is good, 1e-7..1e-4 deserves a closer look, above
# 1e-2 is wrong. The verdict uses the rule `|a - n| <= atol + rtol * |n|` for every entry
# (`gradcheck.ATOL`, `gradcheck.RTOL`), so a tiny true gradient next to a numeric 0 does not fail
# on a meaningless relative error.

# %%
dx_fused = dout * (2 * x * np.tanh(x) + x * x * (1 - np.tanh(x) ** 2))  # (N, D)
assert gradcheck.compare("dx (fused) vs atomic", dx_fused, dx)
check = gradcheck.compare("dx (fused) vs numerical", dx_fused, num_dx)
assert check and check.max_rel < 1e-7, check

# %% [markdown]
# ## Why float64
# In float32 (about 7 significant digits), `L(x + h) - L(x - h)` with `h = 1e-3` keeps only a
# few correct digits, so even a *correct* gradient fails the check. All checks run in float64.

# %%
x32 = x.astype(np.float32)
num32 = gradcheck.numerical_grad(lambda: f(x32), x32, dout.astype(np.float32), h=1e-3)
check32 = gradcheck.compare("dx vs float32 numerical (expected FAIL)", dx, num32)
assert not check32, "a float32 numerical gradient should be too noisy to pass"

# %% [markdown]
# ## Why `dout` must be random
# A classic bug: backward forgets to multiply by `dout`. With `dout = ones` that bug is
# invisible, because multiplying by one changes nothing. A random `dout` catches it.

# %%
def buggy_backward(dout):
    return 2 * x * np.tanh(x) + x * x * (1 - np.tanh(x) ** 2)  # (N, D) BUG: forgot "dout *"


ones = np.ones_like(x)
assert gradcheck.compare("buggy, dout = ones (bug hidden!)", buggy_backward(ones),
                         gradcheck.numerical_grad(lambda: f(x), x, ones))
assert not gradcheck.compare("buggy, random dout (bug caught)", buggy_backward(dout), num_dx)

# %% [markdown]
# ## Discussion
# A backward pass needs some values from the forward pass. Here it needs `t` and `x` (or just
# `x`, recomputing `tanh`). Every minibert layer keeps those values in a small "cache"
# (a NamedTuple) returned by forward; later lessons say which values each cache holds and
# which could be recomputed. For big tensors, checking every entry is slow (two forward passes
# per entry), so `gradcheck.sampled_indices` picks a few entries of each tensor instead.

# %% [markdown]
# ## Exercises
# Your turn. Each function below is a stub: replace its `raise NotImplementedError(...)` with
# your code and re-run the file (or the cell and the one after it). The next cell grades each
# function with `gradcheck.compare` and says which check failed and by how much. While a function
# is still the stub, the lesson says so and goes on with the reference solution from
# `lessons/solutions/00_numerical_gradients.py`; look there only when you are done.
#
# 1. `my_numerical_grad(f, x, dout, h)`: the centered difference of `sum(f() * dout)`, entry by
#    entry (`np.ndindex(*x.shape)` walks every index). `f` takes no arguments and reads `x`,
#    which you change in place, so `x` must be exactly as it was when you return. Graded against
#    the true gradient of this lesson's `f`: a centered difference is within about 1e-9 of it, a
#    one-sided one is off by about `h`.
# 2. `my_rel_error(a, n)`: the `max_rel` column. For every entry, `|a - n|` divided by the sum of
#    the two sizes, `|a| + |n|` (the assignment code's denominator, not the notes' `max(|a|, |n|)`);
#    return the largest. Two entries that are both 0 agree perfectly: make that a 0, not a
#    division by zero (a floor of 1e-12 under the denominator does it).
# 3. `my_silu_backward(dout, x)`: the gradient of SiLU, `f(x) = x * sigmoid(x)`. With
#    `s = sigmoid(x)`, `ds/dx = s (1 - s)`; do not forget `dout`.

# %%
def my_numerical_grad(f, x, dout, h=1e-5):
    """(same shape as x) d sum(f() * dout) / dx by centered differences; x is restored."""
    raise NotImplementedError("exercise 1: write the centered difference")  # your code here


def my_rel_error(a, n):
    """() |a - n| / (|a| + |n|), floored at 1e-12 below, the largest over all entries."""
    raise NotImplementedError("exercise 2: write the max_rel column's relative error")  # your code here


def my_silu_backward(dout, x):
    """(same shape as x) dL/dx for out = x * sigmoid(x), given dout = dL/dout."""
    raise NotImplementedError("exercise 3: write SiLU's backward")  # your code here


# %%
ex = Exercises("00_numerical_gradients")


def one_sided(x0, d0, h=1e-5):
    """The one-sided difference (L(x + h e_i) - L(x)) / h of the pretend loss at x0, entry by entry."""
    xx, g = x0.copy(), np.zeros_like(x0)  # (N, D) each
    base = np.sum(f(xx) * d0)
    for i in np.ndindex(*x0.shape):
        xx[i] += h
        g[i] = (np.sum(f(xx) * d0) - base) / h
        xx[i] = x0[i]
    return g


def check_numerical_grad(fn):
    r = np.random.default_rng(1001)  # the grader's own inputs, drawn now: no lesson variable holds the answer
    xg, dg = r.standard_normal(x.shape), r.standard_normal(x.shape)  # (N, D)
    x_before = xg.copy()
    mine = fn(course.given(f, "f(x)", x=xg), xg, dg)  # the lesson's f, handed over as its source
    true = dg * (2 * x_before * np.tanh(x_before) + x_before**2 * (1 - np.tanh(x_before) ** 2))  # the fused formula
    words = "the one-sided difference (L(x + h e_i) - L(x)) / h, off by about h: nudge both ways, by +h and by -h"
    return [course.true("x is restored afterwards", np.array_equal(xg, x_before),
                        hint="x changed: put x[i] back after the two nudges"),
            course.close("equals the true gradient dx (to 1e-9)", mine, true, rtol=1e-7, atol=1e-9,
                         wrongs=lambda: {words: one_sided(x_before, dg),
                                         "dout forgotten: the differences of sum(f(x)) alone, as if dout were all "
                                         "ones; the loss is sum(f(x) * dout), so each difference is weighted by dout":
                                         true / dg})]


def check_rel_error(fn):
    # known answers, worked out by hand (the worked lines are under "exercise 2's answer" below)
    exact = dict(rtol=1e-9, atol=1e-12)  # known answers: to rounding
    notes = "dividing by the larger size, max(|a|, |n|) (CS231n's notes), not by the sum |a| + |n|"
    mean = "the mean over the entries, not the largest"
    return [course.close("[1, 0, -2] vs [1.1, 0, -2]",
                         fn(np.array([1.0, 0.0, -2.0]), np.array([1.1, 0.0, -2.0])), 0.047619047619048, **exact,
                         wrongs={notes: 0.1 / 1.1, mean: 0.047619047619048 / 3}),
            course.close("0 vs 0: 0, not nan", fn(np.zeros(3), np.zeros(3)), 0.0, atol=1e-15),
            course.close("1e-3 vs -1e-3: 1", fn(np.array([1e-3]), np.array([-1e-3])), 1.0, **exact,
                         wrongs={notes: 2.0}),
            course.close("the largest entry of a (2, 2) array: 1 / 3",
                         fn(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[1.0, 1.0], [3.0, 4.0]])), 1 / 3, **exact,
                         wrongs={notes: 0.5, mean: 1 / 12})]


def check_silu_backward(fn):
    r = np.random.default_rng(1003)  # the grader's own inputs, drawn now
    xs, ds = 2 * r.standard_normal(x.shape), r.standard_normal(x.shape)  # (N, D)
    mine = fn(ds, xs.copy())
    silu = lambda: xs / (1 + np.exp(-xs))  # noqa: E731
    # the answer that forgets dout is the gradient for dout = ones (the bug "Why dout must be random" hides)
    no_dout = gradcheck.numerical_grad(silu, xs, np.ones_like(xs))  # (N, D)
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    x0, s0 = xs.copy(), sig(xs)  # (N, D) each, frozen: the product rule's two parts, one factor held at a time

    def parts():  # computed only when the answer is wrong
        return {"the product rule's term with sigmoid(x) held constant (the slope of the x factor)":
                gradcheck.numerical_grad(lambda: xs * s0, xs, ds),
                "the product rule's term through sigmoid(x) (x held constant, times ds/dx)":
                gradcheck.numerical_grad(lambda: x0 * sig(xs), xs, ds)}

    def mistakes():
        return {"dout forgotten (you return d out / dx; the chain rule multiplies it by dout)": no_dout,
                "the derivative of sigmoid(x) alone: SiLU is the product x * sigmoid(x), so the product rule "
                "gives two terms": gradcheck.numerical_grad(lambda: sig(xs), xs, ds)}

    return [course.close("dx vs numerical gradient", mine, gradcheck.numerical_grad(silu, xs, ds),
                         wrongs=mistakes, terms=parts)]


my_numerical_grad = ex.grade(1, my_numerical_grad, check_numerical_grad, inplace=True,  # x must come back restored
                             refuses=("analysis.gradcheck.numerical_grad", "analysis.gradcheck.numerical_grad_scalar"))
my_rel_error = ex.grade(2, my_rel_error, check_rel_error,
                        refuses=("analysis.gradcheck.compare",))
my_silu_backward = ex.grade(3, my_silu_backward, check_silu_backward)

# %% [markdown]
# **Exercise 2's answer, worked by hand.** `|1 - 1.1| / (1 + 1.1) = 0.1 / 2.1 = 0.0476`; two
# zeros agree (0, thanks to the floor); `1e-3` against `-1e-3` is `2e-3 / 2e-3 = 1`, as far apart
# as two numbers can be.
#
# ## Why centered differences
# Sweep `h`, with your `my_numerical_grad` and, beside it, the one-sided difference. Too large:
# the Taylor error dominates. Too small: floating-point rounding dominates (we subtract two nearly equal numbers). The centered difference has a much wider
# good region. The picture is saved to `lessons/out/00_error_vs_h.png` (and shown here in a
# notebook).

# %%
exponents = list(range(-1, -11, -1))  # h = 10**e for e = -1 ... -10
hs = np.logspace(-1, -10, 10)  # (10,) float64; hs[i] is about 10**exponents[i], not exactly
loss_of_x = lambda: np.sum(f(x) * dout)  # noqa: E731  the pretend loss L(x)
err_centered, err_forward = [], []
for h in hs:
    err_centered.append(np.abs(my_numerical_grad(lambda: f(x), x, dout, h=h) - dx).max())
    g = np.zeros_like(x)
    for i in np.ndindex(*x.shape):  # one-sided: (L(x + h e_i) - L(x)) / h
        base = loss_of_x()
        x[i] += h
        g[i] = (loss_of_x() - base) / h
        x[i] -= h
    err_forward.append(np.abs(g - dx).max())
fig, ax = plt.subplots(figsize=(5, 3.5))
ax.loglog(hs, err_centered, "o-", label="centered")
ax.loglog(hs, err_forward, "s-", label="one-sided")
ax.set_xlabel("h")
ax.set_ylabel("max |numeric - analytic|")
ax.legend()
fig.tight_layout()
show(fig, "00_error_vs_h.png")
i5 = exponents.index(-5)  # by construction: list(hs).index(1e-5) fails on CPUs whose pow is 1 ulp off
print(f"h=1e-5: centered error {err_centered[i5]:.1e}, one-sided error {err_forward[i5]:.1e}")
assert err_centered[i5] < 1e-9 and err_forward[i5] > 100 * err_centered[i5]


# %% [markdown]
# ## Recap
# - A gradient check compares backward's `dx` with centered differences of `sum(f(x) * dout)`.
# - Use float64, a random `dout`, and random (not ones/zeros) parameters.
# - Read `max_rel`, `max |a - n| / max(|a| + |n|, 1e-12)`, with the CS231n ranges; the verdict
#   uses `atol + rtol * |n|`.
#
# **Next: lesson 01**, the first two layers of BERT, linear and GELU, checked exactly this way.

# %%
print("lesson 00 passed")
