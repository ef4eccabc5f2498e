"""Lesson 06's exercises answered by the library (see README.md): the grader must refuse them.
Written without `@numba.njit` (a compiled one that calls the library is `__compiled` below)."""


def my_softmax_backward_rows(att, keep, datt, p):
    a = np.ascontiguousarray(att[None, None])  # noqa: F821  (1, 1, N, T)
    d = np.ascontiguousarray(datt[None, None])  # noqa: F821
    drop = (keep / (1 - p))[None, None]
    kernels.attention._softmax_rows_backward_kernel(d, a, drop, True, 1.0)  # noqa: F821
    return d[0, 0]


def my_dv(att, dout):
    T, HS = dout.shape
    q = k = v = np.zeros((1, 1, T, HS))  # noqa: F821  only att and dout matter for dv
    cache = layers.AttentionCache(q, k, v, att[None, None], None, 1.0)  # noqa: F821
    return layers.attention_backward(dout[None, None], cache)[2][0, 0]  # noqa: F821


# --- the other ways around ---

def my_softmax_backward_rows__sibling_t5(att, keep, datt, p):
    import numpy as np
    from minibert.family import t5
    T = att.shape[-1]
    eye = np.eye(T)[None, None]
    d = datt * keep / (1 - p)
    return t5.cross_attention_backward(d[None, None], t5.CrossAttentionCache(eye, eye, eye, att[None, None], 1.0))[0][0, 0]


def my_softmax_backward_rows__compiled(att, keep, datt, p):
    """A kernel of one's own, compiled while graded, that calls the library's compiled kernel:
    no Python call for the profile hook to see once it runs."""
    import numba
    import numpy as np
    from minibert import kernels

    @numba.njit
    def rows(d, a, drop):
        for h in range(a.shape[0]):
            kernels.softmax_backward_head(d[h], a[h], drop, 0, h, True, 1.0)

    a = np.ascontiguousarray(att[None])
    d = np.ascontiguousarray(datt[None])
    rows(d, a, np.ascontiguousarray((keep / (1 - p))[None, None]))
    return d[0]


def my_dv__sibling_t5(att, dout):
    import numpy as np
    from minibert.family import t5
    T, HS = dout.shape
    z = np.zeros((1, 1, T, HS))
    return t5.cross_attention_backward(dout[None, None], t5.CrossAttentionCache(z, z, z, att[None, None], 1.0))[2][0, 0]


def my_softmax_backward_rows__getsource_kernel(att, keep, datt, p):
    """The compiled kernel's Python source, read and run as one's own."""
    import inspect

    import numpy as np
    from minibert import kernels

    ns = dict(kernels.attention.__dict__)
    exec(inspect.getsource(kernels.attention._softmax_rows_backward_kernel.py_func).split("\n", 1)[1], ns)  # minus the decorator
    d = np.ascontiguousarray(datt[None, None])
    a = np.ascontiguousarray(att[None, None])
    ns["_softmax_rows_backward_kernel"](d, a, (keep / (1 - p))[None, None], True, 1.0)
    return d[0, 0]
