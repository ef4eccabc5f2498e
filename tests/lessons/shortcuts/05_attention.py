"""Lesson 05's exercises answered by the library (see README.md): the grader must refuse them."""


def my_softmax_backward(datt, att):
    import numpy as np
    from minibert import kernels
    a = np.ascontiguousarray(att.reshape(1, -1, *att.shape[-2:]))  # (1, N, T, T) as the kernel wants
    d = np.ascontiguousarray(datt.reshape(a.shape))
    kernels._softmax_rows_backward_kernel(d, a, np.zeros((1, 1, 1, 1)), False, 1.0)  # in place on d
    return d.reshape(att.shape)
