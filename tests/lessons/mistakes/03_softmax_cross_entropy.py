"""Plausible wrong answers to lesson 03's exercises (see README.md)."""


def my_cross_entropy_backward__sum_not_mean(dloss, probs, t0, weight):
    d = probs.copy()
    d[np.arange(len(t0)), t0] -= 1.0  # noqa: F821
    return d * ((weight > 0) * dloss)[:, None]  # the sum's gradient: the 1/n of the mean forgotten


def my_tempered_ce_backward__no_inner_factor(dloss, z, t0, weight, tau):
    u = z / tau
    e = np.exp(u - u.max(-1, keepdims=True))  # noqa: F821
    d = e / e.sum(-1, keepdims=True)
    d[np.arange(len(t0)), t0] -= 1.0  # noqa: F821
    return d * (weight * dloss)[:, None]  # the chain rule's 1 / tau forgotten


def my_masked_mean__nan_when_empty(values, valid):
    return (values * valid).sum() / valid.sum()  # 0 / 0 when nothing is valid


def my_masked_mean__over_all(values, valid):
    return float(np.sum(np.where(valid, values, 0.0)) / len(values))  # divided by N, not by the valid count


def my_cross_entropy_backward__no_dloss(dloss, probs, t0, weight):
    d = probs.copy()
    d[np.arange(len(t0)), t0] -= 1.0  # noqa: F821
    return d * weight[:, None]  # dloss left out: right only when dloss is 1


def my_cross_entropy_backward__no_target_term(dloss, probs, t0, weight):
    return probs * (weight * dloss)[:, None]  # the -1 at the target forgotten


def my_cross_entropy_backward__no_weight(dloss, probs, t0, weight):
    d = probs.copy()
    d[np.arange(len(t0)), t0] -= 1.0  # noqa: F821
    return d * dloss  # weight left out: ignored rows get a gradient, and the mean's 1/n is gone
