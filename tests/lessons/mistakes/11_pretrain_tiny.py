"""Plausible wrong answers to lesson 11's exercises (see README.md)."""


def my_clip__per_array(grads, max_norm):
    out = {}
    for k, g in grads.items():  # each array clipped on its own norm
        norm = float(np.sqrt(np.sum(g * g)))  # noqa: F821
        out[k] = g * (max_norm / max(norm, max_norm))
    return out
