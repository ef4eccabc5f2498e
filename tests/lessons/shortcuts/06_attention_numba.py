"""Lesson 06's exercises answered by the library (see README.md): the grader must refuse them.
Written without `@numba.njit`: a compiled function calling the library fails to compile under
the guard, and the grader says the same."""


def my_softmax_backward_rows(att, keep, datt, p):
    a = np.ascontiguousarray(att[None, None])  # noqa: F821  (1, 1, N, T)
    d = np.ascontiguousarray(datt[None, None])  # noqa: F821
    drop = (keep / (1 - p))[None, None]
    kernels._softmax_rows_backward_kernel(d, a, drop, True, 1.0)  # noqa: F821
    return d[0, 0]


def my_dv(att, dout):
    T, HS = dout.shape
    q = k = v = np.zeros((1, 1, T, HS))  # noqa: F821  only att and dout matter for dv
    cache = layers.AttentionCache(q, k, v, att[None, None], None, 1.0)  # noqa: F821
    return layers.attention_backward(dout[None, None], cache)[2][0, 0]  # noqa: F821
