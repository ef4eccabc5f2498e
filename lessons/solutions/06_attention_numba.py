"""Reference solutions for lesson 06's exercises. Try them yourself first: the lesson grades your
version and says what is wrong; come here when you are done, or truly stuck."""
import numba
import numpy as np


@numba.njit(parallel=True, cache=True)
def my_softmax_backward_rows(att, keep, datt, p):
    """att, keep, datt (N, T), p -> dpreatt (N, T): the backward of att * keep / (1 - p), att = softmax(preatt)"""
    scale = 1.0 / (1.0 - p)  # dropout's forward was att_d = att * keep * scale
    out = np.empty_like(att)  # (N, T)
    for i in numba.prange(att.shape[0]):  # rows are independent: each iteration writes only out[i]
        dot = 0.0
        for j in range(att.shape[1]):  # with g = datt * keep * scale = dL/datt: sum_j g_j att_j
            dot += datt[i, j] * keep[i, j] * scale * att[i, j]
        for j in range(att.shape[1]):  # dpreatt_j = att_j (g_j - dot): 0 wherever att_j is 0
            out[i, j] = att[i, j] * (datt[i, j] * keep[i, j] * scale - dot)
    return out


@numba.njit(cache=True)
def my_dv(att, dout):
    """att (T, T), dout (T, HS) -> dv (T, HS) = att^T @ dout, as loops"""
    T, HS = dout.shape
    dv = np.zeros((T, HS))  # (T, HS) accumulated over every query
    for i in range(T):  # query
        for j in range(T):  # key: forward was out[i] += att[i, j] * v[j]
            a = att[i, j]
            for d in range(HS):  # contiguous inner loop
                dv[j, d] += a * dout[i, d]
    return dv


# What tests/lessons/test_exercises.py holds lesson 06 to: before it grades an exercise, the lesson shows
# none of the expressions under "shows" (whitespace aside), and the exercise's grader calls none
# of the library functions under "calls" (they compute the answer).
KEYS = {
    "my_softmax_backward_rows": {"shows": ["att[i, j] * (datt[i, j] * keep[i, j] * scale - dot)",
                                          "dot += datt[i, j] * keep[i, j] * scale * att[i, j]"],
                                 "calls": ["attention_backward"]},
    "my_dv": {"shows": ["dv[j, d] += a * dout[i, d]", "dv[j] += att[i, j] * dout[i]"], "calls": ["attention_backward"]},
}
