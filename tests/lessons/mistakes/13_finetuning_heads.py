"""Plausible wrong answers to lesson 13's exercises (see README.md)."""


def my_head_backward__no_tanh(dlogits, cls, w_pool, pooled, W):
    dpooled = dlogits @ W.T
    dpre = dpooled  # the tanh's derivative forgotten
    return dpre @ w_pool.T, cls.T @ dpre, dpre.sum(0), pooled.T @ dlogits, dlogits.sum(0)


def my_head_backward__dW_transposed(dlogits, cls, w_pool, pooled, W):
    dpre = (dlogits @ W.T) * (1 - pooled * pooled)
    return dpre @ w_pool.T, cls.T @ dpre, dpre.sum(0), dlogits.T @ pooled, dlogits.sum(0)


def my_first_piece_labels__every_piece(pieces_per_word, word_labels):
    out = []
    for n, label in zip(pieces_per_word, word_labels):
        out += [label] * n  # the label on every piece: a word with more pieces weighs more
    return np.array(out, dtype=np.int64)  # noqa: F821


def my_head_backward__tanh_twice(dlogits, cls, w_pool, pooled, W):
    dpre = (dlogits @ W.T) * (1 - np.tanh(pooled) ** 2)  # noqa: F821  tanh's derivative at tanh(pre), not at pre
    return dpre @ w_pool.T, cls.T @ dpre, dpre.sum(0), pooled.T @ dlogits, dlogits.sum(0)


def my_head_backward__w_pool_not_transposed(dlogits, cls, w_pool, pooled, W):
    dpre = (dlogits @ W.T) * (1 - pooled * pooled)
    return dpre @ w_pool, cls.T @ dpre, dpre.sum(0), pooled.T @ dlogits, dlogits.sum(0)  # w_pool square: shapes pass


def my_head_backward__cls_for_pooled(dlogits, cls, w_pool, pooled, W):
    dpre = (dlogits @ W.T) * (1 - pooled * pooled)
    return dpre @ w_pool.T, cls.T @ dpre, dpre.sum(0), cls.T @ dlogits, dlogits.sum(0)  # the classifier reads pooled


def my_head_backward__mean_again(dlogits, cls, w_pool, pooled, W):
    dlogits = dlogits / len(dlogits)  # the mean's 1/B applied a second time
    dpre = (dlogits @ W.T) * (1 - pooled * pooled)
    return dpre @ w_pool.T, cls.T @ dpre, dpre.sum(0), pooled.T @ dlogits, dlogits.sum(0)


def my_head_backward__db_not_summed(dlogits, cls, w_pool, pooled, W):
    dpre = (dlogits @ W.T) * (1 - pooled * pooled)
    return dpre @ w_pool.T, cls.T @ dpre, dpre, pooled.T @ dlogits, dlogits  # the biases' gradients per example
