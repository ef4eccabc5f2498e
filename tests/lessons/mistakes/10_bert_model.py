"""Plausible wrong answers to lesson 10's exercises (see README.md)."""


def my_tied_decoder_backward__dtok_transposed(dlogits, t, tok_emb):
    return dlogits @ tok_emb, t.T @ dlogits  # the gradient of tok_emb.T, not of tok_emb


def my_gather_backward__fancy_add(dh, flat_pos, B, T):
    d = np.zeros((B * T, dh.shape[-1]))  # noqa: F821
    d[flat_pos] += dh  # repeated positions: one write survives
    return d.reshape(B, T, -1)


def my_adam_first_step__no_bias_correction(g, lr, b1=0.9, b2=0.999, eps=1e-8):
    m, v = (1 - b1) * g, (1 - b2) * g * g
    return -lr * m / (np.sqrt(v) + eps)  # noqa: F821  BERT's optimizer, not Adam with bias correction


def my_adam_first_step__sign(g, lr, b1=0.9, b2=0.999, eps=1e-8):
    return -lr * np.sign(g)  # noqa: F821  eps dropped: right for every |g| far above eps


def my_adam_first_step__only_m_corrected(g, lr, b1=0.9, b2=0.999, eps=1e-8):
    m, v = (1 - b1) * g, (1 - b2) * g * g
    return -lr * (m / (1 - b1)) / (np.sqrt(v) + eps)  # noqa: F821  v left uncorrected


def my_adam_first_step__no_sqrt(g, lr, b1=0.9, b2=0.999, eps=1e-8):
    m, v = (1 - b1) * g / (1 - b1), (1 - b2) * g * g / (1 - b2)
    return -lr * m / (v + eps)  # the square root of v forgotten


def my_adam_first_step__eps_in_sqrt(g, lr, b1=0.9, b2=0.999, eps=1e-8):
    m, v = (1 - b1) * g / (1 - b1), (1 - b2) * g * g / (1 - b2)
    return -lr * m / np.sqrt(v + eps)  # noqa: F821  eps under the root
