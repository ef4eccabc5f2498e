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


def my_unshared_num_parameters(V, E, C, FF, L, MAXPOS, TV):
    """-> the number of parameters of a factorised-embedding model with L unshared blocks"""
    embedding = (V + MAXPOS + TV) * E + 2 * E + (E * C + C)  # tables, LayerNorm(E), the E -> C map
    block = (3 * C * C + 3 * C) + (C * C + C) + (C * FF + FF) + (FF * C + C) + 2 * (2 * C)
    heads = (C * C + C) + (C * E + E + 2 * E + V) + (2 * C + 2)  # pooler, MLM (C -> E), SOP
    return embedding + L * block + heads
