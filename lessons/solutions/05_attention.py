"""Reference solutions for lesson 05's exercises. Try them yourself first: the lesson grades your
version and says what is wrong; come here when you are done, or truly stuck."""
import math

import numpy as np

from minibert import layers


def my_softmax_backward(datt, att):
    """datt, att (..., T) -> dpreatt (..., T), for att = softmax(preatt) over the last axis"""
    # d att_j / d preatt_i = att_j (delta_ij - att_i), so dpreatt_i = att_i (datt_i - sum_j datt_j att_j)
    return att * (datt - (datt * att).sum(axis=-1, keepdims=True))  # (..., T)


def my_score_std(HS, rng):
    """-> () the standard deviation of q . k / sqrt(HS) for unit-normal q, k of size HS"""
    q, k = rng.standard_normal((2, 10000, HS))  # 2 x (10000, HS)
    scores = (q * k).sum(-1) / math.sqrt(HS)  # (10000,) a sum of HS unit-variance products, rescaled
    return float(scores.std())


def my_mask_adder(attn_mask):
    """attn_mask (B, T) of 0/1 -> adder (B, 1, 1, T): 0 for real keys, MASK_VALUE for padding"""
    return ((1.0 - attn_mask) * layers.MASK_VALUE)[:, None, None, :]  # (B, T) -> (B, 1, 1, T)


# What tests/lessons/test_exercises.py holds lesson 05 to: before it grades an exercise, the lesson shows
# none of the expressions under "shows" (whitespace aside), and the exercise's grader calls none
# of the library functions under "calls" (they compute the answer).
KEYS = {
    "my_softmax_backward": {"shows": ["att * (datt - (datt * att).sum(axis=-1, keepdims=True))"],
                            "calls": ["attention_backward"]},
    "my_score_std": {"shows": ["(q * k).sum(-1) / math.sqrt(HS)"], "calls": []},
    "my_mask_adder": {"shows": ["((1.0 - attn_mask) * layers.MASK_VALUE)[:, None, None, :]"], "calls": []},
}
