"""Reference solutions for lesson 21's exercises. Try them yourself first: the lesson grades your
version and says what is wrong; come here when you are done, or truly stuck."""
import numpy as np


def my_two_stream_masks(order):
    """order (T,) a permutation -> content (T, T) bool, query (T, T) bool"""
    T = len(order)
    rank = np.empty(T, dtype=np.int64)
    rank[np.asarray(order)] = np.arange(T)  # position order[t] is predicted at step t
    query = rank[None, :] < rank[:, None]  # (T, T) [i, j]: j comes strictly before i
    content = query | np.eye(T, dtype=bool)  # (T, T) ... or j is i itself
    return content, query


def my_query_attention_backward(dout, q, k, v, att, scale):
    """dout, q, k, v (T, HS); att (T, T) -> dq, dk, dv (T, HS) each"""
    # forward was: out = att @ v
    dv = att.T @ dout  # (T, T) @ (T, HS) -> (T, HS)
    datt = dout @ v.T  # (T, HS) @ (HS, T) -> (T, T)
    # forward was: att = softmax(preatt) over the visible keys (hidden keys and empty rows have att 0)
    dpreatt = att * (datt - (datt * att).sum(axis=-1, keepdims=True))  # (T, T)
    # forward was: preatt = q @ k.T * scale + mask
    dq = dpreatt @ k * scale  # (T, HS)
    dk = dpreatt.T @ q * scale  # (T, HS)
    return dq, dk, dv


def my_two_stream_core_backward(dout_h, dout_g, q_h, q_g, k, v, att_h, att_g, scale):
    """dout_h, dout_g, q_h, q_g, k, v (T, HS); att_h, att_g (T, T) -> dq_h, dq_g, dk, dv (T, HS) each"""
    # each stream is an attention of its own queries over the SAME k and v: exercise 2, twice
    dq_h, dk_h, dv_h = my_query_attention_backward(dout_h, q_h, k, v, att_h, scale)  # content stream
    dq_g, dk_g, dv_g = my_query_attention_backward(dout_g, q_g, k, v, att_g, scale)  # query stream
    return dq_h, dq_g, dk_h + dk_g, dv_h + dv_g  # k and v feed both: gradients add up at the fork


# What tests/lessons/test_exercises.py holds lesson 21 to: before it grades an exercise, the lesson shows
# none of the expressions under "shows" (whitespace aside), and the exercise's grader calls none
# of the library functions under "calls" (they compute the answer).
KEYS = {
    "my_two_stream_masks": {"shows": ["rank[np.asarray(order)] = np.arange(T)", "rank[None, :] < rank[:, None]"],
                            "calls": ["two_stream_masks"]},
    "my_query_attention_backward": {"shows": ["dpreatt.T @ q * scale", "dpreatt @ k * scale"],
                                    "calls": ["masked_attention_backward", "two_stream_attention_backward"]},
    "my_two_stream_core_backward": {"shows": ["dk_h + dk_g", "dv_h + dv_g"],
                                    "calls": ["masked_attention_backward", "two_stream_attention_backward"]},
}
