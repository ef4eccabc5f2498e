"""Plausible wrong answers to lesson 21's exercises (see README.md)."""


def my_query_attention_backward__no_scale(dout, q, k, v, att, scale):
    dv = att.T @ dout
    datt = dout @ v.T
    dpreatt = att * (datt - (datt * att).sum(axis=-1, keepdims=True))
    return dpreatt @ k, dpreatt.T @ q, dv  # the score's scale forgotten on dq and dk
