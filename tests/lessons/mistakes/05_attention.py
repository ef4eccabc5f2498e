"""Plausible wrong answers to lesson 05's exercises (see README.md)."""


def my_softmax_backward__elementwise(datt, att):
    return att * datt  # the diagonal of the Jacobian only


def my_score_std__unscaled(HS, rng):
    q, k = rng.standard_normal((2, 10000, HS))
    return float((q * k).sum(-1).std())  # the 1/sqrt(HS) left out


def my_mask_adder__wrong_shape(attn_mask):
    return (1.0 - attn_mask) * layers.MASK_VALUE  # noqa: F821  (B, T): does not broadcast over heads and queries
