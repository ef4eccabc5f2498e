"""Lesson 12's exercises answered by the library (see README.md): the grader must refuse them."""


def my_encode_with_masks(text, tok):
    return inspect.encode_with_masks(tok, text)  # noqa: F821  (the lesson's name)
