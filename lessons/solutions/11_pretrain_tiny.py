"""Reference solutions for lesson 11's exercises. Try them yourself first: the lesson grades your
version and says what is wrong; come here when you are done, or truly stuck."""
import numpy as np


def my_lr(t, peak, W, T):
    """-> the learning rate at global step t"""
    if W > 0 and t < W:  # warmup wins while t < W ...
        return peak * t / W
    return peak * (1 - min(t, T) / T)  # ... over a linear decay that started at step 0


def my_adam_step(p, g, m, v, lr, wd, b1=0.9, b2=0.999, eps=1e-6):
    """arrays p, g, m, v of one shape -> new (p, m, v) after one BERT AdamW step"""
    m = b1 * m + (1 - b1) * g  # running mean of the gradient
    v = b2 * v + (1 - b2) * g * g  # running mean of its square
    update = m / (np.sqrt(v) + eps)  # no bias correction: BERT's form
    update = update + wd * p  # decoupled weight decay, outside m and v
    return p - lr * update, m, v


def my_clip(grads, max_norm):
    """{name: array} -> {name: array}, all scaled together to a joint norm of at most max_norm"""
    norm = np.sqrt(sum(np.sum(g * g) for g in grads.values()))  # one long vector's length
    scale = max_norm / max(norm, max_norm)  # 1 when the norm is already small enough
    return {k: g * scale for k, g in grads.items()}
