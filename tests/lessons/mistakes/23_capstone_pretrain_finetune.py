"""Plausible wrong answers to lesson 23's exercises (see README.md)."""


def my_accuracy_interval__no_clip(hits, n, z=1.96):
    import math
    p = hits / n
    half = z * math.sqrt(p * (1 - p) / n)
    return p - half, p + half  # not clipped to [0, 1]
