"""Lesson 00's exercises answered by the library (see README.md): the grader must refuse them."""


def my_numerical_grad(f, x, dout, h=1e-5):
    return gradcheck.numerical_grad(f, x, dout, h)  # noqa: F821  (the lesson's name)


def my_rel_error(a, n):
    return gradcheck.compare("a", a, n, verbose=False).max_rel  # noqa: F821
