"""Plausible wrong answers to lesson 05's exercises (see README.md)."""


def my_softmax_backward__elementwise(datt, att):
    return att * datt  # the diagonal of the Jacobian only


def my_score_std__unscaled(HS, rng):
    q, k = rng.standard_normal((2, 10000, HS))
    return float((q * k).sum(-1).std())  # the 1/sqrt(HS) left out


def my_mask_adder__wrong_shape(attn_mask):
    return (1.0 - attn_mask) * layers.MASK_VALUE  # noqa: F821  (B, T): does not broadcast over heads and queries


def my_softmax_backward__unweighted_sum(datt, att):
    return att * (datt - datt.sum(axis=-1, keepdims=True))  # the sum is there, but not weighted by att


def my_mask_adder__inverted(attn_mask):
    return (attn_mask * layers.MASK_VALUE)[:, None, None, :]  # noqa: F821  MASK_VALUE where the mask is 1: the real keys


def my_score_std__constant(HS, rng):
    return 1.0  # the expected answer typed in: no measurement


def my_score_std__tiny_noise(HS, rng):
    return 1.0 + 0.001 * rng.standard_normal()  # a typed-in answer that draws a little from rng


def my_score_std__divided_by_hs(HS, rng):
    q, k = rng.standard_normal((2, 10000, HS))
    return float(((q * k).sum(-1) / HS).std())  # HS where sqrt(HS) belongs


def my_score_std__no_sum(HS, rng):
    q, k = rng.standard_normal((2, 10000, HS))
    return float((q * k / HS ** 0.5).std())  # the products, not the dot product


def my_score_std__few_pairs(HS, rng):
    q, k = rng.standard_normal((2, 100, HS))  # 100 pairs: the measurement spreads ten times as much
    return float(((q * k).sum(-1) / HS ** 0.5).std())
