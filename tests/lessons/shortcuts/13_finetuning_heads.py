"""Lesson 13's exercises answered by the library (see README.md): the grader must refuse them."""


def my_head_backward(dlogits, cls, w_pool, pooled, W):
    dpooled, dW, db = layers.linear_backward(dlogits, layers.LinearCache(pooled, W))  # noqa: F821
    dpre = dpooled * (1 - pooled * pooled)
    dcls, dw_pool, db_pool = layers.linear_backward(dpre, layers.LinearCache(cls, w_pool))  # noqa: F821
    return dcls, dw_pool, db_pool, dW, db
