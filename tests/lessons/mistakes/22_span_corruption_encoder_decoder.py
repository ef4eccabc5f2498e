"""Plausible wrong answers to lesson 22's exercises (see README.md)."""


def my_cross_attention_backward__no_sqrt(dout, q, enc_out, w_k, w_v, enc_mask):
    k, v = enc_out @ w_k, enc_out @ w_v
    preatt = q @ k.T / np.sqrt(q.shape[1]) + (1 - enc_mask) * -10000.0  # noqa: F821
    att = np.exp(preatt - preatt.max(-1, keepdims=True))  # noqa: F821
    att /= att.sum(-1, keepdims=True)
    datt = dout @ v.T
    dpreatt = att * (datt - (datt * att).sum(-1, keepdims=True))
    return dpreatt @ k, (dpreatt.T @ q) @ w_k.T, (att.T @ dout) @ w_v.T  # 1/sqrt(HS) forgotten on both


def my_cross_attention_backward__no_mask(dout, q, enc_out, w_k, w_v, enc_mask):
    k, v = enc_out @ w_k, enc_out @ w_v
    preatt = q @ k.T / np.sqrt(q.shape[1])  # noqa: F821  the padding mask forgotten
    att = np.exp(preatt - preatt.max(-1, keepdims=True))  # noqa: F821
    att /= att.sum(-1, keepdims=True)
    datt = dout @ v.T
    dpreatt = att * (datt - (datt * att).sum(-1, keepdims=True)) / np.sqrt(q.shape[1])  # noqa: F821
    return dpreatt @ k, (dpreatt.T @ q) @ w_k.T, (att.T @ dout) @ w_v.T


def my_span_corrupt__sentinel_per_token(tokens, noise_mask, vocab_size, eos_id):
    inputs, targets, span = [], [], -1
    for j, tok in enumerate(tokens):
        if noise_mask[j]:
            span += 1  # one sentinel per dropped token, not per run
            inputs.append(vocab_size - 1 - span)
            targets += [vocab_size - 1 - span, int(tok)]
        else:
            inputs.append(int(tok))
    return np.array(inputs + [eos_id]), np.array(targets + [eos_id])  # noqa: F821


def my_cross_attention_backward__wk_wv_swapped(dout, q, enc_out, w_k, w_v, enc_mask):
    k, v = enc_out @ w_k, enc_out @ w_v
    preatt = q @ k.T / np.sqrt(q.shape[1]) + (1 - enc_mask) * -10000.0  # noqa: F821
    att = np.exp(preatt - preatt.max(-1, keepdims=True))  # noqa: F821
    att /= att.sum(-1, keepdims=True)
    datt = dout @ v.T
    dpreatt = att * (datt - (datt * att).sum(-1, keepdims=True)) / np.sqrt(q.shape[1])  # noqa: F821
    return dpreatt @ k, (dpreatt.T @ q) @ w_v.T, (att.T @ dout) @ w_k.T  # each path through the other's matrix


def my_cross_attention_backward__elementwise(dout, q, enc_out, w_k, w_v, enc_mask):
    k, v = enc_out @ w_k, enc_out @ w_v
    preatt = q @ k.T / np.sqrt(q.shape[1]) + (1 - enc_mask) * -10000.0  # noqa: F821
    att = np.exp(preatt - preatt.max(-1, keepdims=True))  # noqa: F821
    att /= att.sum(-1, keepdims=True)
    datt = dout @ v.T
    dpreatt = att * datt / np.sqrt(q.shape[1])  # noqa: F821  the softmax's backward without its sum term
    return dpreatt @ k, (dpreatt.T @ q) @ w_k.T, (att.T @ dout) @ w_v.T


def my_cross_attention_backward__not_through_w(dout, q, enc_out, w_k, w_v, enc_mask):
    k, v = enc_out @ w_k, enc_out @ w_v
    preatt = q @ k.T / np.sqrt(q.shape[1]) + (1 - enc_mask) * -10000.0  # noqa: F821
    att = np.exp(preatt - preatt.max(-1, keepdims=True))  # noqa: F821
    att /= att.sum(-1, keepdims=True)
    datt = dout @ v.T
    dpreatt = att * (datt - (datt * att).sum(-1, keepdims=True)) / np.sqrt(q.shape[1])  # noqa: F821
    return dpreatt @ k, dpreatt.T @ q, att.T @ dout  # the gradients at k and v, stopped short of enc_out


def my_cross_attention_backward__no_mask(dout, q, enc_out, w_k, w_v, enc_mask):
    k, v = enc_out @ w_k, enc_out @ w_v
    preatt = q @ k.T / np.sqrt(q.shape[1])  # noqa: F821  the adder left out: padding takes attention
    att = np.exp(preatt - preatt.max(-1, keepdims=True))  # noqa: F821
    att /= att.sum(-1, keepdims=True)
    datt = dout @ v.T
    dpreatt = att * (datt - (datt * att).sum(-1, keepdims=True)) / np.sqrt(q.shape[1])  # noqa: F821
    return dpreatt @ k, (dpreatt.T @ q) @ w_k.T, (att.T @ dout) @ w_v.T
