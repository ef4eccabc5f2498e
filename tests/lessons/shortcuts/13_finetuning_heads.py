"""Lesson 13's exercises answered by the library (see README.md): the grader must refuse them."""


def my_head_backward(dlogits, pooled, W):
    return layers.linear_backward(dlogits, layers.LinearCache(pooled, W))  # noqa: F821
