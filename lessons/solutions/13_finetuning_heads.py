"""Reference solutions for lesson 13's exercises. Try them yourself first: the lesson grades your
version and says what is wrong; come here when you are done, or truly stuck."""
import numpy as np


def my_head_backward(dlogits, cls, w_pool, pooled, W):
    """dlogits (B, K), cls (B, C), w_pool (C, C), pooled (B, C), W (C, K)
    -> dcls (B, C), dw_pool (C, C), db_pool (C,), dW (C, K), db (K,)"""
    # forward was: logits = pooled @ W + b
    dpooled = dlogits @ W.T  # (B, K) @ (K, C) -> (B, C)
    dW = pooled.T @ dlogits  # (C, B) @ (B, K) -> (C, K)
    db = dlogits.sum(axis=0)  # (K,) b was added to every row
    # forward was: pooled = tanh(pre); tanh'(pre) = 1 - tanh(pre)^2, read off the output itself
    dpre = dpooled * (1 - pooled * pooled)  # (B, C)
    # forward was: pre = cls @ w_pool + b_pool
    dcls = dpre @ w_pool.T  # (B, C)
    dw_pool = cls.T @ dpre  # (C, C)
    db_pool = dpre.sum(axis=0)  # (C,)
    return dcls, dw_pool, db_pool, dW, db


def my_first_piece_labels(pieces_per_word, word_labels):
    """pieces_per_word [n_1, ..., n_W], word_labels [l_1, ..., l_W] -> labels, one per piece"""
    out = []
    for n, label in zip(pieces_per_word, word_labels):
        out += [label] + [-100] * (n - 1)  # the label on the first piece, no loss on the rest
    return np.array(out, dtype=np.int64)


# What tests/lessons/test_exercises.py holds lesson 13 to: before it grades an exercise, the lesson shows
# none of the expressions under "shows" (whitespace aside), and the exercise's grader calls none
# of the library functions under "calls" (they compute the answer).
KEYS = {
    "my_head_backward": {"shows": ["dpooled * (1 - pooled * pooled)", "1 - pooled * pooled", "1 - pooled**2",
                                   "pooled.T @ dlogits", "dlogits @ W.T"],
                         "calls": ["linear_backward", "pooler_backward"]},
    "my_first_piece_labels": {"shows": ["[label] + [-100] * (n - 1)"], "calls": ["token_features"]},
}
