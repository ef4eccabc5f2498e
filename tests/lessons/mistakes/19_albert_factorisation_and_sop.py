"""Plausible wrong answers to lesson 19's exercises (see README.md)."""


def my_albert_num_parameters__no_map(V, E, C, FF, L, MAXPOS, TV, shared=True):
    embedding = (V + MAXPOS + TV) * E + 2 * E  # the E -> C map forgotten
    block = (3 * C * C + 3 * C) + (C * C + C) + (C * FF + FF) + (FF * C + C) + 2 * (2 * C)
    heads = (C * C + C) + (C * E + E + 2 * E + V) + (2 * C + 2)
    return embedding + (1 if shared else L) * block + heads


def my_embedding_map_backward__dW_transposed(dx, e, W):
    return dx @ W.T, np.einsum("btc,bte->ce", dx, e), dx.sum(axis=(0, 1))  # noqa: F821


def my_albert_num_parameters__bert_mlm_head(V, E, C, FF, L, MAXPOS, TV, shared=True):
    embedding = (V + MAXPOS + TV) * E + 2 * E + (E * C + C)
    block = (3 * C * C + 3 * C) + (C * C + C) + (C * FF + FF) + (FF * C + C) + 2 * (2 * C)
    heads = (C * C + C) + (C * C + C + 2 * C + V) + (2 * C + 2)  # BERT's MLM head, C -> C
    return embedding + (1 if shared else L) * block + heads


def my_embedding_map_backward__db_wrong_axis(dx, e, W):
    return dx @ W.T, np.einsum("bte,btc->ec", e, dx), dx.sum(axis=(0, 2))  # noqa: F821  positions kept, C summed
