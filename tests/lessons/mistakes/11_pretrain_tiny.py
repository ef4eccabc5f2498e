"""Plausible wrong answers to lesson 11's exercises (see README.md)."""


def my_clip__per_array(grads, max_norm):
    out = {}
    for k, g in grads.items():  # each array clipped on its own norm
        norm = float(np.sqrt(np.sum(g * g)))  # noqa: F821
        out[k] = g * (max_norm / max(norm, max_norm))
    return out


def my_update_size__corrected(t, b1=0.9, b2=0.999):
    t = np.asarray(t)  # noqa: F821
    return np.ones(t.shape)  # noqa: F821  with bias correction the ratio is 1: the exercise has none


def my_lr__decay_after_warmup(t, peak, W, T):
    if W > 0 and t < W:
        return peak * t / W
    return peak * (1 - (t - W) / (T - W))  # decay from the end of warmup: the original decays from step 0


def my_update_size__no_sqrt(t, b1=0.9, b2=0.999):
    t = np.asarray(t)  # noqa: F821
    return (1 - b1**t) / (1 - b2**t)  # v's square root forgotten


def my_update_size__no_one_minus_b(t, b1=0.9, b2=0.999):
    t = np.asarray(t)  # noqa: F821
    return ((1 - b1**t) / (1 - b1)) / np.sqrt((1 - b2**t) / (1 - b2))  # noqa: F821  the bare geometric sums
