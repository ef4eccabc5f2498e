"""Plausible wrong answers to lesson 00's exercises (see README.md)."""


def my_numerical_grad__one_sided(f, x, dout, h=1e-5):
    import numpy as np
    grad = np.zeros_like(x)
    base = np.sum(f() * dout)
    for i in np.ndindex(*x.shape):
        x[i] += h
        grad[i] = (np.sum(f() * dout) - base) / h  # forward difference: off by about h
        x[i] -= h
    return grad


def my_numerical_grad__no_dout(f, x, dout, h=1e-5):
    g = np.zeros_like(x)
    for i in np.ndindex(*x.shape):
        keep = x[i]
        x[i] = keep + h
        up = np.sum(f())  # dout left out
        x[i] = keep - h
        down = np.sum(f())
        x[i] = keep
        g[i] = (up - down) / (2 * h)
    return g


def my_silu_backward__no_dout(dout, x):
    s = 1 / (1 + np.exp(-x))  # noqa: F821
    return s + x * s * (1 - s)  # dout forgotten


def my_rel_error__no_floor(a, n):
    return np.max(np.abs(a - n) / (np.abs(a) + np.abs(n)))  # noqa: F821  0 / 0 where both are 0


def my_rel_error__notes_denominator(a, n):
    return np.max(np.abs(a - n) / np.maximum(np.maximum(np.abs(a), np.abs(n)), 1e-12))  # noqa: F821  CS231n's notes


def my_silu_backward__no_x_slope(dout, x):
    s = 1 / (1 + np.exp(-x))  # noqa: F821
    return dout * x * s * (1 - s)  # the product rule's first term (sigmoid times x's slope 1) left out


def my_silu_backward__sigmoid_slope_only(dout, x):
    s = 1 / (1 + np.exp(-x))  # noqa: F821
    return dout * s * (1 - s)  # the derivative of sigmoid, not of x * sigmoid(x)


def my_silu_backward__sigmoid_constant(dout, x):
    s = 1 / (1 + np.exp(-x))  # noqa: F821
    return dout * s  # sigmoid(x) treated as a constant
