"""Reference solutions for lesson 03's exercises. Try them yourself first: the lesson grades your
version and says what is wrong; come here when you are done, or truly stuck."""
import numpy as np


def my_cross_entropy_backward(dloss, probs, t0, weight):
    """probs (N, K), t0 (N,), weight (N,) -> dz (N, K)"""
    d = probs.copy()  # (N, K) "probability ..."
    d[np.arange(len(t0)), t0] -= 1.0  # "... minus truth": one entry per row
    return d * (weight * dloss)[:, None]  # (N, K) 1/n on predicted rows, 0 on ignored ones


def my_tempered_ce_backward(dloss, z, t0, weight, tau):
    """z (N, K) logits, t0 (N,), weight (N,), tau > 0 -> dz (N, K) of the loss on softmax(z / tau)"""
    u = z / tau  # (N, K) the logits the softmax sees
    e = np.exp(u - u.max(axis=-1, keepdims=True))  # (N, K) stable: the largest exponent is 0
    d = e / e.sum(axis=-1, keepdims=True)  # (N, K) softmax(z / tau)
    d[np.arange(len(t0)), t0] -= 1.0  # exercise 1's "probability minus truth", now with respect to u
    return d * (weight * dloss / tau)[:, None]  # forward was u = z / tau: one more factor 1 / tau


def my_masked_mean(values, valid):
    """values (N,), valid (N,) bool -> () the mean over valid entries, 0.0 if there are none"""
    return (values * valid).sum() / max(int(valid.sum()), 1)


# What tests/lessons/test_exercises.py holds lesson 03 to: before it grades an exercise, the lesson shows
# none of the expressions under "shows" (whitespace aside), and the exercise's grader calls none
# of the library functions under "calls" (they compute the answer).
KEYS = {
    "my_cross_entropy_backward": {"shows": ["d[np.arange(len(t0)), t0] -= 1.0", "probs - onehot"],
                                  "calls": ["cross_entropy_backward"]},
    "my_tempered_ce_backward": {"shows": ["weight * dloss / tau"], "calls": ["cross_entropy_backward"]},
    "my_masked_mean": {"shows": ["max(int(valid.sum()), 1)"], "calls": []},
}
