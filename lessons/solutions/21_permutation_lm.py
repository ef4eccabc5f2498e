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
