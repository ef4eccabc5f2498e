"""Plausible wrong answers to lesson 06's exercises (see README.md), as plain Python: each fails the
compiled-by-Numba check too, and the message also names its own mistake."""


def my_softmax_backward_rows__no_reduction(att, keep, datt, p):
    return att * datt * keep / (1 - p)  # the row's sum over datt * att forgotten


def my_softmax_backward_rows__no_rescale(att, keep, datt, p):
    g = datt * keep  # dropout's 1 / (1 - p) forgotten
    return att * (g - (g * att).sum(-1, keepdims=True))


def my_dv__not_transposed(att, dout):
    return att @ dout  # att, not att^T


def my_dv__plain_numpy(att, dout):
    return att.T @ dout  # the right numbers, but NumPy: not the Numba kernel the exercise asks for


def my_softmax_backward_rows__plain_numpy(att, keep, datt, p):
    g = datt * keep / (1 - p)  # the right numbers as NumPy lines: no @njit, no loops
    return att * (g - (g * att).sum(-1, keepdims=True))


def my_dv__one_expression(att, dout):
    return (att[:, :, None] * dout[:, None, :]).sum(0)  # dv's sums as one broadcast expression, no loops
