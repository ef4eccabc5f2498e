"""Plausible wrong answers to lesson 03's exercises (see README.md)."""


def my_cross_entropy_backward__sum_not_mean(dloss, probs, t0, weight):
    d = probs.copy()
    d[np.arange(len(t0)), t0] -= 1.0  # noqa: F821
    return d * ((weight > 0) * dloss)[:, None]  # the sum's gradient: the 1/n of the mean forgotten
