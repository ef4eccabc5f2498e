"""Lesson 16's exercises answered by the library (see README.md): the grader must refuse them."""


def my_concat_layers(states, which):
    return combine_layers([states[i] for i in which][::-1], "concat_all")  # noqa: F821  (it concatenates last first)


def my_head_grads(x, labels, w, b):
    from minibert import layers
    x2 = x.reshape(-1, w.shape[0])
    _, cache = layers.cross_entropy_forward(x2 @ w + b, labels.reshape(-1))
    dz = layers.cross_entropy_backward(1.0, cache)
    _, dw, db = layers.linear_backward(dz, layers.LinearCache(x2, w))
    return dw, db
