"""Lesson 02's exercises answered by the library (see README.md): the grader must refuse them."""


def my_layernorm_backward(dout, norm, w, rstd):
    return layers.layernorm_backward(dout, layers.LayerNormCache(norm, w, rstd))  # noqa: F821


def my_dx_without_mean_term(dout, norm, w, rstd):
    dx = layers.layernorm_backward(dout, layers.LayerNormCache(norm, w, rstd))[0]  # noqa: F821
    return dx + rstd * (dout * w).mean(-1, keepdims=True)  # the mean term put back
