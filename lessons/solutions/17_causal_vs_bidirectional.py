"""Reference solutions for lesson 17's exercises. Try them yourself first: the lesson grades your
version and says what is wrong; come here when you are done, or truly stuck."""
import numpy as np

from minibert.layers import MASK_VALUE


def my_causal_adder(attn_mask):
    """attn_mask (B, T) 1 = real token -> adder (B, 1, T, T): 0 visible, MASK_VALUE hidden"""
    T = attn_mask.shape[-1]
    left = np.tril(np.ones((T, T)))  # (T, T) left[i, j] = 1 if j <= i: no looking ahead
    visible = attn_mask[:, None, None, :] * left  # (B, 1, 1, T) * (T, T) -> (B, 1, T, T) and real keys only
    return (1.0 - visible) * MASK_VALUE  # (B, 1, T, T) 0 where visible, MASK_VALUE where hidden


def my_next_token_targets(ids, mask):
    """ids, mask (B, T) -> targets (B, T) int64: ids[b, t + 1] where both are real, else -100"""
    targets = np.full(ids.shape, -100, dtype=np.int64)  # (B, T) no loss by default
    both_real = (mask[:, :-1] > 0) & (mask[:, 1:] > 0)  # (B, T - 1) token t and token t + 1 are real
    targets[:, :-1] = np.where(both_real, ids[:, 1:], -100)  # (B, T - 1) position t predicts token t + 1
    return targets


# What tests/lessons/test_exercises.py holds lesson 17 to: before it grades an exercise, the lesson shows
# none of the expressions under "shows" (whitespace aside), and the exercise's grader calls none
# of the library functions under "calls" (they compute the answer).
KEYS = {
    "my_causal_adder": {"shows": ["attn_mask[:, None, None, :] * left", "(1.0 - visible) * MASK_VALUE"],
                        "calls": ["causal_visible"]},
    "my_next_token_targets": {"shows": ["np.where(both_real, ids[:, 1:], -100)"], "calls": ["ltr_targets"]},
}
