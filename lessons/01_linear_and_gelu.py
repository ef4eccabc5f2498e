# %% [markdown]
# # Lesson 01: the linear layer and GELU
#
# **Goal.** Build the two layers that make up most of BERT's arithmetic: the linear (dense)
# layer `out = x @ w + b` and the GELU activation used inside every feed-forward block. For
# each you write forward one operation per line, backward one line per forward line, then the
# short "fused" backward.
#
# **Finish line.** Your backward passes equal the numerical gradient (lesson 00) and
# `minibert.layers.linear_backward` / `minibert.layers.gelu_backward`.

# %% [markdown]
# ## Setup
# Shape legend: `B` batch size, `T` sequence length (tokens per sequence), `C_in` / `C_out`
# feature sizes before and after the layer. BERT applies a linear layer to every token
# separately, so `x` is `(B, T, C_in)` and the same `w` is used for every `(b, t)`.

# %%
import math

import numpy as np

import course  # lessons/course.py: where pictures go, how exercises are graded
from minibert.analysis import gradcheck
from minibert import layers

rng = np.random.default_rng(1)
B, T, C_in, C_out = 2, 3, 5, 4
print(gradcheck.HEADER)

# %% [markdown]
# ## Linear: the math
# `out[i, j, :] = x[i, j, :] @ w + b` for every sequence `i` and token `j`, with `w` of shape `(C_in, C_out)` (PyTorch stores
# it transposed as `(C_out, C_in)`; minibert keeps `(C_in, C_out)` so the code reads `x @ w`).
# Its backward is exercise 1, at the end of the lesson: from `dout` `(B, T, C_out)` it returns
# `dx` `(B, T, C_in)`, `dw` `(C_in, C_out)` and `db` `(C_out,)`, each entry by the chain rule
# `dL/dp = sum over every output entry o of dout[o] * d out[o] / d p`. `w` and `b` are shared by
# all `B*T` tokens: every token's output depends on them. The lesson shows the backward after
# grading yours.

# %%
x = rng.standard_normal((B, T, C_in))  # (B, T, C_in)
w = rng.standard_normal((C_in, C_out))  # (C_in, C_out)
b = rng.standard_normal(C_out)  # (C_out,)
# forward, one op per line
xw = x @ w  # (B, T, C_in) @ (C_in, C_out) -> (B, T, C_out)
out = xw + b  # (B, T, C_out)  b is broadcast over B and T
dout = rng.standard_normal(out.shape)  # (B, T, C_out)
x_lin, w_lin, b_lin, dout_lin = x, w, b, dout  # section 1's arrays, for the backward after the exercises

# %% [markdown]
# ## GELU: the math
# GELU ("Gaussian error linear unit") is BERT's nonlinearity: `gelu(x) = x * Phi(x)`, where
# `Phi` is the standard normal cumulative distribution, `Phi(x) = 0.5 (1 + erf(x / sqrt(2)))`.
# It is close to ReLU for large `|x|` but smooth near 0. Its derivative, with the normal
# density `phi(x) = exp(-x^2 / 2) / sqrt(2 pi)`:
#
#     d gelu / dx = Phi(x) + x * phi(x)
#
# Backward needs only `x`: `Phi` and `phi` are recomputed from it.
# (`hidden_act="gelu"` in BERT's config means this exact erf form; `"gelu_new"` is a tanh
# approximation, `approximate="tanh"` in minibert.) NumPy has no `erf`; we vectorize Python's
# `math.erf` (minibert.layers compiles the same libm function with Numba).

# %%
erf = np.vectorize(math.erf)
SQRT2 = math.sqrt(2.0)
x = rng.standard_normal((B, T, C_in))  # (B, T, C_in) any shape works: GELU is elementwise
# forward, one op per line
s = x / SQRT2  # (B, T, C_in)
e = erf(s)  # (B, T, C_in)
cdf = 0.5 * (1.0 + e)  # (B, T, C_in) Phi(x)
out = x * cdf  # (B, T, C_in)
dout = rng.standard_normal(out.shape)  # (B, T, C_in)
assert np.allclose(out, layers.gelu_forward(x)[0])

# %% [markdown]
# ## GELU: backward, line by line
# `x` is used twice (directly, and through `s`), so its two gradient contributions add up.
# The derivative of `erf(s)` is `2 / sqrt(pi) * exp(-s^2)`.

# %%
# forward was: out = x * cdf
dcdf = dout * x  # (B, T, C_in)
dx_direct = dout * cdf  # (B, T, C_in)
cdf_in = cdf.copy()
assert gradcheck.compare("gelu: dcdf", dcdf, gradcheck.numerical_grad(lambda: x * cdf_in, cdf_in, dout))
# forward was: cdf = 0.5 * (1 + e)
de = 0.5 * dcdf  # (B, T, C_in)
e_in = e.copy()
assert gradcheck.compare("gelu: de", de, gradcheck.numerical_grad(lambda: x * 0.5 * (1 + e_in), e_in, dout))
# forward was: e = erf(s)
ds = de * (2.0 / math.sqrt(math.pi)) * np.exp(-s * s)  # (B, T, C_in)
s_in = s.copy()
assert gradcheck.compare("gelu: ds", ds, gradcheck.numerical_grad(lambda: x * 0.5 * (1 + erf(s_in)), s_in, dout))
# forward was: s = x / sqrt(2)
dx = dx_direct + ds / SQRT2  # (B, T, C_in) gradients add up at forks
gelu = lambda: x * 0.5 * (1.0 + erf(x / SQRT2))  # noqa: E731
num_dx = gradcheck.numerical_grad(gelu, x, dout)  # (B, T, C_in)
assert gradcheck.compare("gelu: dx (atomic)", dx, num_dx)

# %% [markdown]
# ## GELU: fused, and minibert's version
# Substituting: `ds / sqrt(2) = dout * x * exp(-x^2 / 2) / sqrt(2 pi) = dout * x * phi(x)`, so
# `dx = dout * (Phi(x) + x * phi(x))`. That is one line of `minibert.layers.gelu_backward`.

# %%
pdf = np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)  # (B, T, C_in) phi(x)
dx_fused = dout * (cdf + x * pdf)  # (B, T, C_in)
out_lib, gcache = layers.gelu_forward(x)
assert gradcheck.compare("gelu: dx fused vs numerical", dx_fused, num_dx)
assert gradcheck.compare("gelu: dx fused vs layers.gelu_backward", dx_fused, layers.gelu_backward(dout, gcache))

# %% [markdown]
# ## Discussion
# - `LinearCache` holds `x` and `w`: `dw` needs the input, `dx` needs the weights. Nothing can be
#   recomputed more cheaply; `x` is the big one (`B*T*C_in` numbers per layer).
# - `GeluCache` holds only `x`. Backward recomputes `Phi(x)` and `phi(x)`; storing them would
#   cost two more arrays of the same size to save a few `erf`/`exp` calls. The Numba kernel
#   (`minibert/kernels/elementwise.py`) makes the other trade: its forward stores `gelu'(x)`, one array in
#   place of `x`, so its backward is a single multiply. Same memory, less arithmetic.
# - In BERT the FFN input to GELU is `(B, T, FF)` with `FF = 4 C`, the largest activation in a
#   block, so keeping one array instead of three matters.

# %% [markdown]
# ## Exercises
# Replace each `raise NotImplementedError(...)` with your code and re-run. The cell after the
# stubs grades them against `minibert.layers` and numerical gradients, and names the check that
# failed and by how much. A stub left as it is makes the lesson go on with the reference solution
# from `lessons/solutions/01_linear_and_gelu.py` (look there when you are done).
#
# 1. `my_linear_backward(dout, x, w)`: return `(dx, dw, db)` for any number of leading axes:
#    `x` may be `(B, T, C_in)`, `(N, C_in)` or `(B, H, T, C_in)`: your code cannot name the
#    leading axes, since it does not know how many there are. Work out one entry of each gradient
#    by the chain rule first (`out[..., j] = sum_i x[..., i] w[i, j] + b[j]`). Each of the three
#    gradients is graded on its own against the numerical gradient.
# 2. `my_gelu_tanh_backward(dout, x)`: the tanh approximation
#    `0.5 x (1 + tanh(u))`, `u = sqrt(2/pi) (x + 0.044715 x^3)`. Hint: `d tanh(u) = 1 - tanh(u)^2`,
#    and `x` appears twice (product rule).
# 3. `my_gelu_max_gap(lo, hi)`: the largest `|gelu_exact(x) - gelu_tanh(x)|` over `x` in
#    [lo, hi] (use a fine grid, `layers.gelu_forward(x)` and `layers.gelu_forward(x,
#    approximate="tanh")`). The grader measures intervals of its own choosing, so the answer is
#    the measurement, not a number. It is small but not zero, which is why a checkpoint's config
#    must say which GELU it used.

# %%
def my_linear_backward(dout, x, w):
    """dout (..., C_out), x (..., C_in), w (C_in, C_out) -> dx (..., C_in), dw (C_in, C_out), db (C_out,)"""
    raise NotImplementedError("exercise 1: write the linear layer's backward")  # your code here


def my_gelu_tanh_backward(dout, x):
    """(same shape as x) dL/dx for out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))"""
    raise NotImplementedError("exercise 2: write the tanh GELU's backward")  # your code here


def my_gelu_max_gap(lo, hi):
    """() max |gelu_exact(x) - gelu_tanh(x)| for x in [lo, hi]"""
    raise NotImplementedError("exercise 3: measure the gap between the two GELUs")  # your code here


# %%
ex = course.Exercises("01_linear_and_gelu")
x = rng.standard_normal((B, T, C_in))  # (B, T, C_in)
w = rng.standard_normal((C_in, C_out))  # (C_in, C_out)
b = rng.standard_normal(C_out)  # (C_out,)
dout = rng.standard_normal((B, T, C_out))  # (B, T, C_out)
xg = rng.standard_normal((4, 6)) * 2  # (4, 6)
dg = rng.standard_normal(xg.shape)  # (4, 6)


def check_linear_backward(fn):
    rng = np.random.default_rng(1011)  # the grader's own inputs, drawn now (the lesson's rng untouched)
    results = []
    x4, dout4 = rng.standard_normal((2, 2, 3, C_in)), rng.standard_normal((2, 2, 3, C_out))  # (B, H, T, C)
    x3, dout3 = rng.standard_normal(x.shape), rng.standard_normal(dout.shape)  # the lesson's shapes, not its arrays
    for label, xx, dd in (("(B, T, C_in)", x3, dout3), ("(N, C_in)", x3.reshape(-1, C_in), dout3.reshape(-1, C_out)),
                          ("(B, H, T, C_in)", x4, dout4)):
        mine = fn(dd, xx, w)
        fwd = lambda: xx @ w + b  # noqa: E731
        for name, m, arr in zip(("dx", "dw", "db"), mine, (xx, w, b)):
            results.append(course.close(f"{name}, x {label}, vs numerical gradient", m,
                                        gradcheck.numerical_grad(fwd, arr, dd)))
    return results


def check_gelu_tanh_backward(fn):
    num = gradcheck.numerical_grad(lambda: layers.gelu_forward(xg, approximate="tanh")[0], xg, dg)
    # x appears twice in 0.5 x (1 + tanh(u(x))): the numerical gradient through each copy, the
    # other held fixed, names the one a wrong answer leaves out
    a, c = xg.copy(), xg.copy()
    two_x = lambda: 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (c + 0.044715 * c**3)))  # noqa: E731
    paths = {"the path through the first x (tanh held fixed)": gradcheck.numerical_grad(two_x, a, dg),
             "the path through tanh(u(x)) (the first x held fixed)": gradcheck.numerical_grad(two_x, c, dg)}
    # u's cubic term frozen at this x: the tanh path with du/dx as if u were sqrt(2/pi) x alone
    flat_u = lambda: 0.5 * xg * (1 + np.tanh(math.sqrt(2 / math.pi) * (c + 0.044715 * xg**3)))  # noqa: E731
    no_cubic = paths["the path through the first x (tanh held fixed)"] + gradcheck.numerical_grad(flat_u, c, dg)
    wrongs = {"du/dx without the derivative of u's cubic term 0.044715 x^3 (it depends on x too)": no_cubic}
    return [course.close("dx vs numerical gradient", fn(dg, xg), num, terms=paths, wrongs=wrongs)]


def check_gelu_max_gap(fn):
    # the grader's own measurement, now, from the two formulas themselves (the exact one with this
    # lesson's erf), on intervals it draws (and [-6, 6]): a grid of step 1e-3, then a grid of step
    # 1e-6 around its largest gap
    def signed(grid):  # exact - tanh, same shape as grid
        tanh_form = 0.5 * grid * (1 + np.tanh(math.sqrt(2 / math.pi) * (grid + 0.044715 * grid**3)))
        return grid * 0.5 * (1.0 + erf(grid / SQRT2)) - tanh_form

    def gaps(grid):
        return np.abs(signed(grid))  # same shape as grid

    r = np.random.default_rng(103)
    intervals = [(-6.0, 6.0), *sorted(tuple(np.round(np.sort(r.uniform(-6, 6, 2)), 2)) for _ in range(3)),
                 (0.5, 1.5)]  # the last one holds neither peak (they are near +-2.3)
    results, answers = [], []
    for lo, hi in intervals:
        coarse = np.linspace(lo, hi, int(round((hi - lo) * 1000)) + 1)  # step 1e-3
        top = coarse[np.argmax(gaps(coarse))]
        grid = np.concatenate([coarse, np.clip(np.linspace(top - 1e-3, top + 1e-3, 2_001), lo, hi)])
        gap = gaps(grid)  # (n,)
        got = fn(lo, hi)
        answers.append(got)
        result = course.close(f"max gap on [{lo:g}, {hi:g}] (within 1%)", got, gap.max(), rtol=0.01, atol=0.0)
        sign = {"exact - tanh": signed(grid), "tanh - exact": -signed(grid)}  # a max without the absolute value
        unsigned = next((k for k, v in sign.items() if np.ndim(got) == 0 and np.isfinite(got)
                         and np.isclose(got, v.max(), rtol=0.01, atol=0.0)), None)
        if not result.ok and unsigned:
            peak = float(grid[np.argmax(gap)])
            result = result._replace(detail=f"{result.detail}. It is the largest value of {unsigned}, without the "
                                            f"absolute value: the gap is |exact - tanh|, and on this interval it is "
                                            f"largest at x = {peak:.2f}, where {unsigned} is negative")
        elif not result.ok and np.ndim(got) == 0 and np.isfinite(got) and got < gap.max():
            peak = float(grid[np.argmax(gap)])
            result = result._replace(detail=f"{result.detail}. Smaller than the largest gap: your grid steps over "
                                            f"its peak, at x = {peak:.2f}; a finer grid finds it")
        elif not result.ok and np.ndim(got) == 0 and got > gap.max():
            result = result._replace(detail=f"{result.detail}. Larger than the gap can be anywhere on [{lo:g}, "
                                            f"{hi:g}]: not |exact - tanh| of the same x, or not on this interval?")
        results.append(result)
    if len({repr(a) for a in answers}) == 1 and not all(r.ok for r in results):  # one number for every interval
        results = [r if r.ok else r._replace(detail=f"{r.detail}. The same number for every interval: a constant, "
                                                    f"not a measurement") for r in results]
    return results


my_linear_backward = ex.grade(1, my_linear_backward, check_linear_backward, paths=("dx", "dw", "db"),
                              refuses=("layers.linear_backward", "kernels.linear_backward"))
my_gelu_tanh_backward = ex.grade(2, my_gelu_tanh_backward, check_gelu_tanh_backward,
                                 refuses=("layers.gelu_backward", "kernels.gelu_backward"))
my_gelu_max_gap = ex.grade(3, my_gelu_max_gap, check_gelu_max_gap, allows=("layers.gelu_forward",))
print(f"max |gelu_exact - gelu_tanh| on [-6, 6] = {my_gelu_max_gap(-6.0, 6.0):.2e}")

# %% [markdown]
# ## Linear: backward, line by line (exercise 1's answer)
# Backward needs `x` (for `dw`) and `w` (for `dx`):
#
#     dx = dout @ w.T        dw = sum over (b, t) of x[b, t]^T dout[b, t]        db = sum of dout
#
# `w` and `b` are shared by all `B*T` tokens, so their gradients are *sums* over tokens. To check
# an intermediate we make it the input of "the rest of the forward" and take the numerical
# gradient with respect to it (lesson 00).

# %%
x, w, b, dout = x_lin, w_lin, b_lin, dout_lin  # section 1's arrays (the grader drew its own)
xw = x @ w  # (B, T, C_out) the forward's intermediate
# forward was: out = xw + b
dxw = dout  # (B, T, C_out) adding b does not change how out depends on xw
db = dout.sum(axis=(0, 1))  # (C_out,) b was broadcast to every token, so its gradient sums
xw_in = xw.copy()
assert gradcheck.compare("linear: dxw", dxw, gradcheck.numerical_grad(lambda: xw_in + b, xw_in, dout))
# forward was: xw = x @ w
dx = dxw @ w.T  # (B, T, C_out) @ (C_out, C_in) -> (B, T, C_in)
dw = np.einsum("bti,btj->ij", x, dxw)  # (C_in, C_out) sum over every token (b, t)
fwd = lambda: x @ w + b  # noqa: E731
assert gradcheck.compare("linear: dx", dx, gradcheck.numerical_grad(fwd, x, dout))
assert gradcheck.compare("linear: dw", dw, gradcheck.numerical_grad(fwd, w, dout))
assert gradcheck.compare("linear: db", db, gradcheck.numerical_grad(fwd, b, dout))

# %% [markdown]
# ## Linear: fused, and minibert's version
# `minibert.layers.linear_forward(x, w, b)` returns `(out, LinearCache(x, w))`, and
# `linear_backward(dout, cache)` returns `(dx, dw, db)`. It computes `dw` as one matrix product
# by flattening the tokens: `x.reshape(-1, C_in).T @ dout.reshape(-1, C_out)`.

# %%
out_lib, cache = layers.linear_forward(x, w, b)  # (B, T, C_out)
assert np.allclose(out_lib, x @ w + b)
dx_lib, dw_lib, db_lib = layers.linear_backward(dout, cache)
dw_flat = x.reshape(-1, C_in).T @ dout.reshape(-1, C_out)  # (C_in, B*T) @ (B*T, C_out) -> (C_in, C_out)
for name, mine, lib in (("dx", dx, dx_lib), ("dw", dw_flat, dw_lib), ("db", db, db_lib)):
    assert gradcheck.compare(f"linear: {name} vs layers.linear_backward", mine, lib)


# %% [markdown]
# ## Recap
# - Linear: `dx = dout @ w.T`, `dw = x^T dout` summed over tokens, `db = sum(dout)`.
# - GELU: `dx = dout * (Phi(x) + x phi(x))`; the cache holds only `x`.
# - Shared parameters get the *sum* of their gradients over every place they are used.
#
# **Next: lesson 02**, LayerNorm, whose backward is the first one with a real twist.

# %%
print("lesson 01 passed")
