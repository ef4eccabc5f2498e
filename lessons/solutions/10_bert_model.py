"""Reference solutions for lesson 10's exercises. Try them yourself first: the lesson grades your
version and says what is wrong; come here when you are done, or truly stuck."""
import numpy as np


def my_gather_backward(dh, flat_pos, B, T):
    """dh (B*P, C), flat_pos (B*P,) -> dseq (B, T, C)"""
    d = np.zeros((B * T, dh.shape[-1]))  # (B*T, C) positions never gathered get 0
    np.add.at(d, flat_pos, dh)  # a gather's backward is a scatter-add: repeats accumulate
    return d.reshape(B, T, -1)  # (B*T, C) -> (B, T, C)


def my_tied_decoder_backward(dlogits, t, tok_emb):
    """dlogits (B*P, V), t (B*P, C), tok_emb (V, C) -> dt (B*P, C), dtok_from_decoder (V, C)"""
    # forward was: logits = t @ tok_emb.T + bias, a linear layer whose weight is tok_emb.T
    dt = dlogits @ tok_emb  # (B*P, V) @ (V, C) -> (B*P, C)
    dtok = dlogits.T @ t  # (V, B*P) @ (B*P, C) -> (V, C), the transpose of d(tok_emb.T)
    return dt, dtok


def my_adam_first_step(g, lr, b1=0.9, b2=0.999, eps=1e-8):
    """g (any shape) -> (same shape) the first update of Adam with bias correction"""
    # from m = v = 0: m = (1 - b1) g and v = (1 - b2) g^2; the bias correction divides them by
    # (1 - b1) and (1 - b2), leaving mhat = g and vhat = g^2: b1 and b2 cancel out
    return -lr * g / (np.abs(g) + eps)  # sqrt(g^2) = |g|: about -lr * sign(g), whatever the size of g


# What tests/lessons/test_exercises.py holds lesson 10 to: before it grades an exercise, the lesson shows
# none of the expressions under "shows" (whitespace aside), and the exercise's grader calls none
# of the library functions under "calls" (they compute the answer).
KEYS = {
    "my_tied_decoder_backward": {"shows": ["dlogits.T @ t", "dlogits @ tok_emb"], "calls": ["bert_backward"]},
    "my_gather_backward": {"shows": ["np.add.at(d, flat_pos, dh)"], "calls": ["bert_backward"]},
    "my_adam_first_step": {"shows": ["-lr * g / (np.abs(g) + eps)"], "calls": []},
}
