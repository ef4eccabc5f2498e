"""Reference solutions for lesson 04's exercises. Try them yourself first: the lesson grades your
version and says what is wrong; come here when you are done, or truly stuck."""
import numpy as np


def my_embedding_backward(dout, ids, V):
    """dout (B, T, C), ids (B, T) -> dtable (V, C)"""
    C = dout.shape[-1]
    d = np.zeros((V, C))  # (V, C) rows of ids that never occur stay 0
    np.add.at(d, ids.reshape(-1), dout.reshape(-1, C))  # repeated ids add up (fancy += would not)
    return d


def my_onehot_backward(dout, ids, V):
    """dout (B, T, C), ids (B, T) -> dtok_emb (V, C), as onehot(ids).T @ dout"""
    onehot = np.eye(V)[ids.reshape(-1)]  # (B*T, V) row i is 1 at column ids[i]
    return onehot.T @ dout.reshape(-1, dout.shape[-1])  # (V, B*T) @ (B*T, C) -> (V, C)


def my_segment_ids(tokens):
    """list of token strings -> list of 0/1 segment ids"""
    ids, seg = [], 0
    for tok in tokens:
        ids.append(seg)
        if tok == "[SEP]":
            seg = 1  # everything after the first [SEP] belongs to sentence B
    return ids


# What tests/lessons/test_exercises.py holds lesson 04 to: before it grades an exercise, the lesson shows
# none of the expressions under "shows" (whitespace aside), and the exercise's grader calls none
# of the library functions under "calls" (they compute the answer).
KEYS = {
    "my_embedding_backward": {"shows": ["np.add.at(d, ids.reshape(-1), dout.reshape(-1, C))", "np.add.at"],
                              "calls": ["embedding_backward"]},
    "my_onehot_backward": {"shows": ["np.eye(V)[ids.reshape(-1)]"], "calls": ["embedding_backward"]},
    "my_segment_ids": {"shows": ['if tok == "[SEP]"', 'index("[SEP]")'], "calls": []},
}
