"""Reference solutions for lesson 11's exercises. Try them yourself first: the lesson grades your
version and says what is wrong; come here when you are done, or truly stuck."""
import numpy as np


def my_update_size(t, b1=0.9, b2=0.999):
    """t (int or array of steps 1, 2, ...) -> |update| / lr for a constant gradient, no bias correction"""
    # m_t = (1 - b1) g (1 + b1 + ... + b1^(t-1)) = (1 - b1^t) g, and likewise v_t = (1 - b2^t) g^2
    t = np.asarray(t)
    return (1 - b1**t) / np.sqrt(1 - b2**t)  # m / sqrt(v): |g| cancels


def my_lr(t, peak, W, T):
    """-> the learning rate at global step t"""
    if W > 0 and t < W:  # warmup wins while t < W ...
        return peak * t / W
    return peak * (1 - min(t, T) / T)  # ... over a linear decay that started at step 0


def my_clip(grads, max_norm):
    """{name: array} -> {name: array}, all scaled together to a joint norm of at most max_norm"""
    norm = np.sqrt(sum(np.sum(g * g) for g in grads.values()))  # one long vector's length
    scale = max_norm / max(norm, max_norm)  # 1 when the norm is already small enough
    return {k: g * scale for k, g in grads.items()}


# What tests/lessons/test_exercises.py holds lesson 11 to: before it grades an exercise, the lesson shows
# none of the expressions under "shows" (whitespace aside), and the exercise's grader calls none
# of the library functions under "calls" (they compute the answer).
KEYS = {
    "my_update_size": {"shows": ["(1 - b1**t) / np.sqrt(1 - b2**t)", "0.75 / sqrt(0.19)", "sqrt(0.19)"], "calls": []},
    "my_lr": {"shows": ["peak * (1 - min(t, T) / T)", "peak * (1 - t / T)", "1 - t/100"], "calls": ["lr_at"]},
    "my_clip": {"shows": ["max_norm / max(norm, max_norm)"], "calls": ["clip_by_global_norm"]},
}
