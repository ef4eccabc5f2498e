"""Lesson 01's exercises answered by the library (see README.md): the grader must refuse them."""


def my_linear_backward(dout, x, w):
    return layers.linear_backward(dout, layers.LinearCache(x, w))  # noqa: F821  (the lesson's name)


def my_gelu_tanh_backward(dout, x):
    return layers.gelu_backward(dout, layers.GeluCache(x, "tanh"))  # noqa: F821
