"""Plausible wrong answers to lesson 02's exercises (see README.md)."""


def my_layernorm_backward__no_mean_term(dout, norm, w, rstd):
    C = norm.shape[-1]
    g = dout * w
    dx = rstd * (g - norm * (g * norm).mean(-1, keepdims=True))  # the mean's dependence on x forgotten
    return dx, (dout * norm).reshape(-1, C).sum(0), dout.reshape(-1, C).sum(0)
