"""Reference solutions for lesson 16's exercises. Try them yourself first: the lesson grades your
version and says what is wrong; come here when you are done, or truly stuck."""
import numpy as np


def my_concat_layers(states, which):
    """list of (B, T, C), list of indices -> (B, T, len(which) * C)"""
    return np.concatenate([states[i] for i in which], axis=-1)  # (B, T, C) x n -> (B, T, n*C)


def my_head_grads(x, labels, w, b):
    """x (B, T, D), labels (B, T) ints (-100: none), w (D, K), b (K,) -> dw (D, K), db (K,)"""
    D, K = w.shape
    x2 = x.reshape(-1, D)  # (N, D), N = B*T
    y = labels.reshape(-1)  # (N,)
    z = x2 @ w + b  # (N, K)
    z = z - z.max(axis=-1, keepdims=True)
    probs = np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)  # (N, K)
    keep = y != -100  # (N,) tagged positions
    dlogits = probs.copy()  # (N, K): d mean-CE / d logits = (probs - onehot) / n at tagged positions
    dlogits[np.arange(len(y)), np.where(keep, y, 0)] -= 1.0
    dlogits *= keep[:, None] / max(int(keep.sum()), 1)  # untagged rows get no gradient
    # forward was: logits = x @ w + b; x is frozen, so its gradient is never formed
    dw = x2.T @ dlogits  # (D, N) @ (N, K) -> (D, K)
    db = dlogits.sum(axis=0)  # (K,)
    return dw, db


# What tests/lessons/test_exercises.py holds lesson 16 to: before it grades an exercise, the lesson shows
# none of the expressions under "shows" (whitespace aside), and the exercise's grader calls none
# of the library functions under "calls" (they compute the answer).
KEYS = {
    "my_concat_layers": {"shows": ["np.concatenate([states[i] for i in which], axis=-1)"], "calls": ["combine_layers"]},
    "my_head_grads": {"shows": ["dlogits *= keep[:, None] / max(int(keep.sum()), 1)"],
                      "calls": ["loss_grads_metrics", "cross_entropy_backward"]},
}
