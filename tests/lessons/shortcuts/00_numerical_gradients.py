"""Lesson 00's exercises answered by the library (see README.md): the grader must refuse them."""


def my_numerical_grad(f, x, dout, h=1e-5):
    return gradcheck.numerical_grad(f, x, dout, h)  # noqa: F821  (the lesson's name)


def my_rel_error(a, n):
    return gradcheck.compare("a", a, n, verbose=False).max_rel  # noqa: F821


# --- the other ways around (each refused as well; see test_exercises.py's HAND_WRITTEN) ---

def my_numerical_grad__lesson_variable(f, x, dout, h=1e-5):
    return dx_fused  # noqa: F821  the lesson's true gradient, computed before the exercise


def my_numerical_grad__lesson_via_main(f, x, dout, h=1e-5):
    import __main__
    return __main__.dx_fused  # the lesson's variable through its module: the grader's inputs are its own


def my_silu_backward__numerical(dout, x):
    import numpy as np
    from minibert.analysis import gradcheck
    return gradcheck.numerical_grad(lambda: x / (1 + np.exp(-x)), x, dout)


def my_silu_backward__grader_frame(dout, x):
    import sys
    return sys._getframe(1).f_globals["dx_fused"]  # the grader's globals: the lesson's


def my_silu_backward__inspect_frame(dout, x):
    import inspect
    return inspect.currentframe().f_back.f_globals["dx_fused"]


def my_silu_backward__traceback_frame(dout, x):
    try:
        raise ValueError
    except ValueError as e:
        return e.__traceback__.tb_frame.f_back.f_globals["dx_fused"]
