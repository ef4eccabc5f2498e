"""Reference solutions for lesson 19's exercises. Try them yourself first: the lesson grades your
version and says what is wrong; come here when you are done, or truly stuck."""
import numpy as np


def my_embedding_map_backward(dx, e, W):
    """dx (B, T, C), e (B, T, E), W (E, C) -> de (B, T, E), dW (E, C), db (C,)"""
    # forward was: x = e @ W + b, the same W and b at every (batch, position)
    de = dx @ W.T  # (B, T, C) @ (C, E) -> (B, T, E)
    dW = np.einsum("bte,btc->ec", e, dx)  # (E, C): summed over batch and positions
    db = dx.sum(axis=(0, 1))  # (C,)
    return de, dW, db


def my_albert_num_parameters(V, E, C, FF, L, MAXPOS, TV, shared=True):
    """-> the number of parameters of ALBERT (factorised embedding; one shared block or L blocks)"""
    embedding = (V + MAXPOS + TV) * E + 2 * E + (E * C + C)  # tables, LayerNorm(E), the E -> C map
    block = (3 * C * C + 3 * C) + (C * C + C) + (C * FF + FF) + (FF * C + C) + 2 * (2 * C)
    heads = (C * C + C) + (C * E + E + 2 * E + V) + (2 * C + 2)  # pooler, MLM (C -> E), SOP
    return embedding + (1 if shared else L) * block + heads  # sharing: one block, whatever L is


# What tests/lessons/test_exercises.py holds lesson 19 to: before it grades an exercise, the lesson shows
# none of the expressions under "shows" (whitespace aside), and the exercise's grader calls none
# of the library functions under "calls" (they compute the answer).
KEYS = {
    "my_albert_num_parameters": {"shows": ["(V + MAXPOS + TV) * E + 2 * E + (E * C + C)", "C * E + E + 2 * E + V"],
                                 "calls": []},
    "my_embedding_map_backward": {"shows": ['np.einsum("bte,btc->ec", e, dx)', "dx @ W.T"],
                                  "calls": ["linear_backward"]},
}
