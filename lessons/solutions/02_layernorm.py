"""Reference solutions for lesson 02's exercises. Try them yourself first: the lesson grades your
version and says what is wrong; come here when you are done, or truly stuck."""
import numpy as np


def my_layernorm_backward(dout, norm, w, rstd):
    """dout, norm (B, T, C); w (C,); rstd (B, T, 1) -> dx (B, T, C), dw (C,), db (C,)"""
    C = norm.shape[-1]
    g = dout * w  # (B, T, C) the gradient reaching norm
    dx = rstd * (g - g.mean(-1, keepdims=True) - norm * (g * norm).mean(-1, keepdims=True))  # (B, T, C)
    dw = (dout * norm).reshape(-1, C).sum(axis=0)  # (C,) w scaled every token's norm
    db = dout.reshape(-1, C).sum(axis=0)  # (C,) b was added to every token
    return dx, dw, db


def my_rmsnorm_backward(dout, x, w, eps=1e-12):
    """dout, x (B, T, C); w (C,) -> dx (B, T, C) for out = w * x / sqrt(mean(x^2) + eps)"""
    r = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + eps)  # (B, T, 1)
    n = x * r  # (B, T, C) the normalized x
    g = dout * w  # (B, T, C)
    # out = w * x * r, and dr/dx_c = -r^3 x_c / C: the plain scaling r * g, minus the part that
    # would change the row's mean square (no mean term: RMSNorm does not centre)
    return r * (g - n * (g * n).mean(-1, keepdims=True))  # (B, T, C)


def my_dx_without_mean_term(dout, norm, w, rstd):
    """dout, norm (B, T, C); w (C,); rstd (B, T, 1) -> dx (B, T, C) with the mean held constant"""
    # with m a constant, x reaches the output through norm directly and through the variance,
    # but no longer through the mean: exercise 1's formula without its "- mean(g)" term
    g = dout * w  # (B, T, C)
    return rstd * (g - norm * (g * norm).mean(-1, keepdims=True))  # (B, T, C)


# What tests/lessons/test_exercises.py holds lesson 02 to: before it grades an exercise, the lesson shows
# none of the expressions under "shows" (whitespace aside), and the exercise's grader calls none
# of the library functions under "calls" (they compute the answer).
KEYS = {
    "my_layernorm_backward": {"shows": ["g - g.mean(-1, keepdims=True) - norm * (g * norm).mean(-1, keepdims=True)"],
                              "calls": ["layernorm_backward"]},
    "my_rmsnorm_backward": {"shows": ["r * (g - n * (g * n).mean(-1, keepdims=True))"], "calls": []},
    "my_dx_without_mean_term": {"shows": ["rstd * (g - norm * (g * norm).mean(-1, keepdims=True))"],
                                "calls": ["layernorm_backward"]},
}
