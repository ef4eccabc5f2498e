"""Plausible wrong answers to lesson 16's exercises (see README.md)."""


def my_concat_layers__sum(states, which):
    return sum(states[i] for i in which)  # summed, not concatenated


def my_head_grads__mean_over_all(x, labels, w, b):
    D, K = w.shape
    x2, y = x.reshape(-1, D), labels.reshape(-1)
    z = x2 @ w + b
    z = z - z.max(-1, keepdims=True)
    probs = np.exp(z) / np.exp(z).sum(-1, keepdims=True)  # noqa: F821
    keep = y != -100
    d = probs.copy()
    d[np.arange(len(y)), np.where(keep, y, 0)] -= 1.0  # noqa: F821
    d *= keep[:, None] / len(y)  # divided by every position, untagged ones included
    return x2.T @ d, d.sum(0)



def my_head_grads__sum_not_mean(x, labels, w, b):
    D, K = w.shape
    x2, y = x.reshape(-1, D), labels.reshape(-1)
    z = x2 @ w + b
    z = z - z.max(-1, keepdims=True)
    probs, keep = np.exp(z) / np.exp(z).sum(-1, keepdims=True), y != -100  # noqa: F821
    d = probs.copy()
    d[np.arange(len(y)), np.where(keep, y, 0)] -= 1.0  # noqa: F821
    d *= keep[:, None]  # summed over the tagged positions: the mean's 1/n left out
    return x2.T @ d, d.sum(0)


def my_head_grads__no_onehot(x, labels, w, b):
    D, K = w.shape
    x2, y = x.reshape(-1, D), labels.reshape(-1)
    z = x2 @ w + b
    z = z - z.max(-1, keepdims=True)
    probs, keep = np.exp(z) / np.exp(z).sum(-1, keepdims=True), y != -100  # noqa: F821
    d = probs * keep[:, None] / max(int(keep.sum()), 1)  # the -1 at the tag forgotten
    return x2.T @ d, d.sum(0)


def my_head_grads__db_not_summed(x, labels, w, b):
    D, K = w.shape
    x2, y = x.reshape(-1, D), labels.reshape(-1)
    z = x2 @ w + b
    z = z - z.max(-1, keepdims=True)
    probs, keep = np.exp(z) / np.exp(z).sum(-1, keepdims=True), y != -100  # noqa: F821
    d = probs.copy()
    d[np.arange(len(y)), np.where(keep, y, 0)] -= 1.0  # noqa: F821
    d *= keep[:, None] / max(int(keep.sum()), 1)
    return x2.T @ d, d  # db per position
