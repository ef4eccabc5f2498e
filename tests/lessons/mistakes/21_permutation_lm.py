"""Plausible wrong answers to lesson 21's exercises (see README.md)."""


def my_query_attention_backward__no_scale(dout, q, k, v, att, scale):
    dv = att.T @ dout
    datt = dout @ v.T
    dpreatt = att * (datt - (datt * att).sum(axis=-1, keepdims=True))
    return dpreatt @ k, dpreatt.T @ q, dv  # the score's scale forgotten on dq and dk


def my_two_stream_masks__order_as_rank(order):
    T = len(order)
    rank = np.asarray(order)  # noqa: F821  the order itself used as ranks: its inverse is needed
    query = rank[None, :] < rank[:, None]
    return query | np.eye(T, dtype=bool), query  # noqa: F821


def my_two_stream_core_backward__dk_from_content_only(dout_h, dout_g, q_h, q_g, k, v, att_h, att_g, scale):
    def one(dout, q, att):
        dv = att.T @ dout
        datt = dout @ v.T
        dpre = att * (datt - (datt * att).sum(-1, keepdims=True))
        return dpre @ k * scale, dpre.T @ q * scale, dv
    dq_h, dk_h, dv_h = one(dout_h, q_h, att_h)
    dq_g, dk_g, dv_g = one(dout_g, q_g, att_g)
    return dq_h, dq_g, dk_h, dv_h + dv_g  # the query stream's share of dk forgotten


def my_query_attention_backward__dv_not_transposed(dout, q, k, v, att, scale):
    dv = att @ dout  # att, not att^T
    datt = dout @ v.T
    dpreatt = att * (datt - (datt * att).sum(axis=-1, keepdims=True)) * scale
    return dpreatt @ k, dpreatt.T @ q, dv


def my_two_stream_core_backward__dv_not_transposed(dout_h, dout_g, q_h, q_g, k, v, att_h, att_g, scale):
    def one(dout, q, att):
        datt = dout @ v.T
        dpre = att * (datt - (datt * att).sum(-1, keepdims=True))
        return dpre @ k * scale, dpre.T @ q * scale, att @ dout  # att, not att^T, in dv
    dq_h, dk_h, dv_h = one(dout_h, q_h, att_h)
    dq_g, dk_g, dv_g = one(dout_g, q_g, att_g)
    return dq_h, dq_g, dk_h + dk_g, dv_h + dv_g


def my_query_attention_backward__elementwise(dout, q, k, v, att, scale):
    datt = dout @ v.T
    dpreatt = att * datt * scale  # the softmax's backward without its sum term
    return dpreatt @ k, dpreatt.T @ q, att.T @ dout


def my_query_attention_backward__dk_not_transposed(dout, q, k, v, att, scale):
    datt = dout @ v.T
    dpreatt = att * (datt - (datt * att).sum(axis=-1, keepdims=True)) * scale
    return dpreatt @ k, dpreatt @ q, att.T @ dout  # dpreatt, not its transpose, for dk
