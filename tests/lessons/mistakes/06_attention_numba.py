"""Plausible wrong answers to lesson 06's exercises (see README.md), as plain Python."""


def my_softmax_backward_rows__no_reduction(att, datt):
    return att * datt  # the row's sum over datt * att forgotten


def my_dv__not_transposed(att, dout):
    return att @ dout  # att, not att^T
