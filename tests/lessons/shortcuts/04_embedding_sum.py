"""Lesson 04's exercises answered by the library (see README.md): the grader must refuse them."""


def my_embedding_backward(dout, ids, V):
    C = dout.shape[-1]
    cache = layers.EmbeddingCache(ids, ids * 0, (V, C), (1, C), (ids.shape[1], C))  # noqa: F821
    return layers.embedding_backward(dout, cache)[0]  # noqa: F821


def my_onehot_backward(dout, ids, V):
    C = dout.shape[-1]
    cache = layers.EmbeddingCache(ids, ids * 0, (V, C), (1, C), (ids.shape[1], C))  # noqa: F821
    return layers.embedding_backward(dout, cache)[0]  # noqa: F821
