"""Lesson 03's exercises answered by the library (see README.md): the grader must refuse them."""


def my_cross_entropy_backward(dloss, probs, t0, weight):
    return layers.cross_entropy_backward(dloss, layers.CrossEntropyCache(probs, t0, weight, probs.shape))  # noqa: F821


def my_tempered_ce_backward(dloss, z, t0, weight, tau):
    _, cache = layers.cross_entropy_forward(z / tau, t0)  # noqa: F821
    return layers.cross_entropy_backward(dloss, cache._replace(weight=weight)) / tau  # noqa: F821
