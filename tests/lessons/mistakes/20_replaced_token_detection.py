"""Plausible wrong answers to lesson 20's exercises (see README.md)."""


def my_bce_backward__sum_not_mean(logits, labels, mask):
    s = 1 / (1 + np.exp(-logits))  # noqa: F821
    return (s - labels) * mask  # the 1 / (number of real tokens) forgotten


def my_rtd_labels__every_sampled_position(original_ids, sampled, positions):
    labels = np.zeros_like(original_ids, dtype=np.int64)  # noqa: F821
    positions = np.asarray(positions)  # noqa: F821
    labels[positions[:, 0], positions[:, 1]] = 1  # a sample equal to the original is "original"
    return labels
