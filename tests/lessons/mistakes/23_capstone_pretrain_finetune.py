"""Plausible wrong answers to lesson 23's exercises (see README.md)."""


def my_accuracy_interval__no_clip(hits, n, z=1.96):
    import math
    p = hits / n
    half = z * math.sqrt(p * (1 - p) / n)
    return p - half, p + half  # not clipped to [0, 1]


def my_question_labels__first_paragraph_only(articles):
    return [(qa["question"], i) for i, article in enumerate(articles) for qa in article["paragraphs"][0]["qas"]]


def my_accuracy_interval__variance(hits, n, z=1.96):
    p = hits / n
    half = z * p * (1 - p) / n  # the variance of the proportion, not its square root
    return max(0.0, p - half), min(1.0, p + half)


def my_accuracy_interval__z_ignored(hits, n, z=1.96):
    import math
    p = hits / n
    half = 1.96 * math.sqrt(p * (1 - p) / n)  # the default z, whatever z is given
    return max(0.0, p - half), min(1.0, p + half)


def my_accuracy_interval__n_outside_sqrt(hits, n, z=1.96):
    import math
    p = hits / n
    half = z * math.sqrt(p * (1 - p)) / n  # 1/n, not 1/sqrt(n)
    return max(0.0, p - half), min(1.0, p + half)
