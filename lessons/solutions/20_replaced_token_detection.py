"""Reference solutions for lesson 20's exercises. Try them yourself first: the lesson grades your
version and says what is wrong; come here when you are done, or truly stuck."""
import numpy as np


def my_rtd_labels(original_ids, sampled, positions):
    """original_ids (B, T), sampled (M,), positions (M, 2) (row, column) -> labels (B, T) int"""
    corrupted = np.array(original_ids, copy=True)  # (B, T)
    rows, cols = np.asarray(positions)[:, 0], np.asarray(positions)[:, 1]  # (M,) each
    corrupted[rows, cols] = sampled  # the samples put into the original text
    return (corrupted != original_ids).astype(np.int64)  # (B, T) 1 = replaced; a right guess stays 0


def my_bce_backward(logits, labels, mask):
    """logits (B, T), labels (B, T) 0/1, mask (B, T) 0/1 -> dlogits (B, T)"""
    s = 1 / (1 + np.exp(-logits))  # (B, T) sigmoid
    weight = mask / max(int(mask.sum()), 1)  # (B, T) the mean over the real tokens; 0 at padding
    return (s - labels) * weight  # (B, T) d/dz of the per-token loss is s(z) - y


# What tests/lessons/test_exercises.py holds lesson 20 to: before it grades an exercise, the lesson shows
# none of the expressions under "shows" (whitespace aside), and the exercise's grader calls none
# of the library functions under "calls" (they compute the answer).
KEYS = {
    "my_rtd_labels": {"shows": ["(corrupted != original_ids).astype(np.int64)"], "calls": ["replace_tokens"]},
    "my_bce_backward": {"shows": ["(s - labels) * weight", "s(z) - y"], "calls": ["bce_with_logits_backward"]},
}
