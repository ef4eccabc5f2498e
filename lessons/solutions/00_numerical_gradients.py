"""Reference solutions for lesson 00's exercises. Try them yourself first: the lesson grades your
version and says what is wrong; come here when you are done, or truly stuck."""
import numpy as np


def my_numerical_grad(f, x, dout, h=1e-5):
    """(same shape as x) d sum(f() * dout) / dx by centered differences; x is restored."""
    grad = np.zeros_like(x)
    for i in np.ndindex(*x.shape):  # every entry of x, one at a time
        old = x[i]
        x[i] = old + h
        plus = np.sum(f() * dout)  # L(x + h e_i)
        x[i] = old - h
        minus = np.sum(f() * dout)  # L(x - h e_i)
        x[i] = old  # restore: the caller's x must come back unchanged
        grad[i] = (plus - minus) / (2 * h)
    return grad


def my_rel_error(a, n):
    """() the largest |a - n| / max(|a| + |n|, 1e-12) over all entries."""
    return np.max(np.abs(a - n) / np.maximum(np.abs(a) + np.abs(n), 1e-12))


def my_silu_backward(dout, x):
    """(same shape as x) dL/dx for out = x * sigmoid(x), given dout = dL/dout."""
    s = 1 / (1 + np.exp(-x))  # sigmoid(x)
    return dout * (s + x * s * (1 - s))  # product rule: d/dx [x s(x)] = s + x s'(x), s' = s (1 - s)


# What tests/lessons/test_exercises.py holds lesson 00 to: before it grades an exercise, the lesson shows
# none of the expressions under "shows" (whitespace aside), and the exercise's grader calls none
# of the library functions under "calls" (they compute the answer).
KEYS = {
    "my_numerical_grad": {"shows": ["(plus - minus) / (2 * h)"], "calls": ["numerical_grad"]},
    "my_rel_error": {"shows": ["np.abs(a - n) / np.maximum(np.abs(a) + np.abs(n), 1e-12)", "0.1 / 2.1"],
                     "calls": ["compare"]},
    "my_silu_backward": {"shows": ["s + x * s * (1 - s)"], "calls": []},
}
