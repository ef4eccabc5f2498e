"""Plausible wrong answers to lesson 20's exercises (see README.md)."""


def my_bce_backward__sum_not_mean(logits, labels, mask):
    s = 1 / (1 + np.exp(-logits))  # noqa: F821
    return (s - labels) * mask  # the 1 / (number of real tokens) forgotten
