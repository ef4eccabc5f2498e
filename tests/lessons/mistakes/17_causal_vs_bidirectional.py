"""Plausible wrong answers to lesson 17's exercises (see README.md)."""


def my_causal_adder__upper_triangle(attn_mask):
    T = attn_mask.shape[-1]
    visible = attn_mask[:, None, None, :] * np.triu(np.ones((T, T)))  # noqa: F821  the future, not the past
    return (1.0 - visible) * layers.MASK_VALUE  # noqa: F821


def my_next_token_targets__padding_predicted(ids, mask):
    targets = np.full(ids.shape, -100, dtype=np.int64)  # noqa: F821
    targets[:, :-1] = ids[:, 1:]  # the padding after the last real token is predicted too
    return targets
