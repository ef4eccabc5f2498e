"""Lesson 21's exercises answered by the library (see README.md): the grader must refuse them."""


def my_two_stream_masks(order):
    rank = np.argsort(order)[None]  # noqa: F821  (1, T) the step at which each position is predicted
    content, query = xlnet.two_stream_masks(rank, np.ones_like(rank))  # noqa: F821
    return content[0], query[0]


def my_query_attention_backward(dout, q, k, v, att, scale):
    cache = xlnet.MaskedAttentionCache(q[None, None], k[None, None], v[None, None], att[None, None], scale)  # noqa: F821
    return tuple(d[0, 0] for d in xlnet.masked_attention_backward(dout[None, None], cache))  # noqa: F821


def my_two_stream_core_backward(dout_h, dout_g, q_h, q_g, k, v, att_h, att_g, scale):
    backward = xlnet.masked_attention_backward  # noqa: F821
    dq_h, dk_h, dv_h = (d[0, 0] for d in backward(dout_h[None, None], xlnet.MaskedAttentionCache(  # noqa: F821
        q_h[None, None], k[None, None], v[None, None], att_h[None, None], scale)))
    dq_g, dk_g, dv_g = (d[0, 0] for d in backward(dout_g[None, None], xlnet.MaskedAttentionCache(  # noqa: F821
        q_g[None, None], k[None, None], v[None, None], att_g[None, None], scale)))
    return dq_h, dq_g, dk_h + dk_g, dv_h + dv_g


# --- the other ways around ---

def my_query_attention_backward__sibling_t5(dout, q, k, v, att, scale):
    from minibert.family import t5
    dq, dk, dv = t5.cross_attention_backward(dout[None, None], t5.CrossAttentionCache(
        q[None, None], k[None, None], v[None, None], att[None, None], scale))
    return dq[0, 0], dk[0, 0], dv[0, 0]


def my_two_stream_core_backward__sibling_t5(dout_h, dout_g, q_h, q_g, k, v, att_h, att_g, scale):
    from minibert.family import t5

    def one(dout, q, att):
        return [d[0, 0] for d in t5.cross_attention_backward(dout[None, None], t5.CrossAttentionCache(
            q[None, None], k[None, None], v[None, None], att[None, None], scale))]

    dq_h, dk_h, dv_h = one(dout_h, q_h, att_h)
    dq_g, dk_g, dv_g = one(dout_g, q_g, att_g)
    return dq_h, dq_g, dk_h + dk_g, dv_h + dv_g
