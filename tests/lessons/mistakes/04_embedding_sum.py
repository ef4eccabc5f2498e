"""Plausible wrong answers to lesson 04's exercises (see README.md)."""


def my_embedding_backward__fancy_add(dout, ids, V):
    d = np.zeros((V, dout.shape[-1]))  # noqa: F821
    d[ids.reshape(-1)] += dout.reshape(-1, dout.shape[-1])  # repeated ids: only one write survives
    return d


def my_onehot_backward__transposed_product(dout, ids, V):
    onehot = np.eye(V)[ids.reshape(-1)]  # noqa: F821
    return dout.reshape(-1, dout.shape[-1]).T @ onehot  # (C, V): the product the other way round


def my_segment_ids__last_sep(tokens):
    last = len(tokens) - 1 - tokens[::-1].index("[SEP]")  # the last [SEP], not the first
    return [0 if i <= last else 1 for i in range(len(tokens))]


def my_embedding_backward__loop_assign(dout, ids, V):
    C = dout.shape[-1]
    d = np.zeros((V, C))  # noqa: F821
    for i, row in enumerate(ids.reshape(-1)):
        d[row] = dout.reshape(-1, C)[i]  # = for +=: a repeated id keeps only its last use
    return d


def my_embedding_backward__averaged(dout, ids, V):
    C = dout.shape[-1]
    d, n = np.zeros((V, C)), np.zeros((V, 1))  # noqa: F821
    for i, row in enumerate(ids.reshape(-1)):
        d[row] += dout.reshape(-1, C)[i]
        n[row] += 1
    return d / np.maximum(n, 1)  # the mean of the uses, not their sum
