"""Reference solutions for lesson 01's exercises. Try them yourself first: the lesson grades your
version and says what is wrong; come here when you are done, or truly stuck."""
import math

import numpy as np

from minibert import layers


def my_linear_backward(dout, x, w):
    """dout (..., C_out), x (..., C_in), w (C_in, C_out) -> dx (..., C_in), dw (C_in, C_out), db (C_out,)"""
    c_in, c_out = w.shape
    dx = dout @ w.T  # (..., C_out) @ (C_out, C_in) -> (..., C_in)
    dw = x.reshape(-1, c_in).T @ dout.reshape(-1, c_out)  # (C_in, N) @ (N, C_out): a sum over every token
    db = dout.reshape(-1, c_out).sum(axis=0)  # (C_out,) b was added to every token
    return dx, dw, db


def my_gelu_tanh_backward(dout, x):
    """(same shape as x) dL/dx for out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))"""
    k = math.sqrt(2 / math.pi)
    u = k * (x + 0.044715 * x**3)  # (...)
    t = np.tanh(u)  # (...)
    du_dx = k * (1 + 3 * 0.044715 * x * x)  # (...)
    # product rule on 0.5 x (1 + t): the factor (1 + t), plus x times d(1 + t)/dx
    return dout * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du_dx)  # (...)


def my_gelu_max_gap(lo, hi):
    """() max |gelu_exact(x) - gelu_tanh(x)| for x in [lo, hi]"""
    grid = np.linspace(lo, hi, 100_001)  # (100001,)
    exact = layers.gelu_forward(grid)[0]
    approx = layers.gelu_forward(grid, approximate="tanh")[0]
    return np.abs(exact - approx).max()


# What tests/lessons/test_exercises.py holds lesson 01 to: before it grades an exercise, the lesson shows
# none of the expressions under "shows" (whitespace aside), and the exercise's grader calls none
# of the library functions under "calls" (they compute the answer).
KEYS = {
    "my_linear_backward": {"shows": ["x.reshape(-1, c_in).T @ dout.reshape(-1, c_out)"], "calls": ["linear_backward"]},
    "my_gelu_tanh_backward": {"shows": ["0.5 * x * (1 - t * t) * du_dx"], "calls": ["gelu_backward"]},
    "my_gelu_max_gap": {"shows": ["np.abs(exact - approx).max()"], "calls": ["gelu_forward"]},
}
