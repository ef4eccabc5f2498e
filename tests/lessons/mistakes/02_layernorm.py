"""Plausible wrong answers to lesson 02's exercises (see README.md)."""


def my_layernorm_backward__no_mean_term(dout, norm, w, rstd):
    C = norm.shape[-1]
    g = dout * w
    dx = rstd * (g - norm * (g * norm).mean(-1, keepdims=True))  # the mean's dependence on x forgotten
    return dx, (dout * norm).reshape(-1, C).sum(0), dout.reshape(-1, C).sum(0)


def my_rmsnorm_backward__no_second_term(dout, x, w, eps=1e-12):
    r = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + eps)  # noqa: F821
    return r * dout * w  # as if r did not depend on x


def my_dx_without_mean_term__full_formula(dout, norm, w, rstd):
    g = dout * w
    return rstd * (g - g.mean(-1, keepdims=True) - norm * (g * norm).mean(-1, keepdims=True))  # exercise 1's, unchanged


def my_dx_without_mean_term__no_variance_term(dout, norm, w, rstd):
    return rstd * dout * w  # the variance held constant too


def my_layernorm_backward__no_variance_term(dout, norm, w, rstd):
    C = norm.shape[-1]
    g = dout * w
    dx = rstd * (g - g.mean(-1, keepdims=True))  # the variance's dependence on x forgotten
    return dx, (dout * norm).reshape(-1, C).sum(0), dout.reshape(-1, C).sum(0)


def my_layernorm_backward__variance_term_sign(dout, norm, w, rstd):
    C = norm.shape[-1]
    g = dout * w
    dx = rstd * (g - g.mean(-1, keepdims=True) + norm * (g * norm).mean(-1, keepdims=True))  # + for -
    return dx, (dout * norm).reshape(-1, C).sum(0), dout.reshape(-1, C).sum(0)


def my_layernorm_backward__dw_not_summed(dout, norm, w, rstd):
    C = norm.shape[-1]
    g = dout * w
    dx = rstd * (g - g.mean(-1, keepdims=True) - norm * (g * norm).mean(-1, keepdims=True))
    return dx, dout * norm, dout.reshape(-1, C).sum(0)  # dw per position, not summed over them


def my_layernorm_backward__no_w(dout, norm, w, rstd):
    C = norm.shape[-1]
    g = dout  # w forgotten
    dx = rstd * (g - g.mean(-1, keepdims=True) - norm * (g * norm).mean(-1, keepdims=True))
    return dx, (dout * norm).reshape(-1, C).sum(0), dout.reshape(-1, C).sum(0)


def my_rmsnorm_backward__sum_not_mean(dout, x, w, eps=1e-12):
    r = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + eps)  # noqa: F821
    n, g = x * r, dout * w
    return r * (g - n * (g * n).sum(-1, keepdims=True))  # d mean(x^2) / dx_c = 2 x_c / C: the 1/C dropped


def my_rmsnorm_backward__no_w(dout, x, w, eps=1e-12):
    r = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + eps)  # noqa: F821
    n = x * r
    return r * (dout - n * (dout * n).mean(-1, keepdims=True))  # w forgotten
