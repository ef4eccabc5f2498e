"""Lesson 22's exercises answered by the library (see README.md): the grader must refuse them."""


def my_span_corrupt(tokens, noise_mask, vocab_size, eos_id):
    return D.span_corrupt(tokens, noise_mask, vocab_size, eos_id)  # noqa: F821  (the lesson's name)


def my_cross_attention_backward(dout, q, enc_out, w_k, w_v, enc_mask):
    k, v = enc_out @ w_k, enc_out @ w_v
    _, cache = t5.cross_attention_forward(q[None, None], k[None, None], v[None, None], enc_mask[None])  # noqa: F821
    dq, dk, dv = t5.cross_attention_backward(dout[None, None], cache)  # noqa: F821
    return dq[0, 0], dk[0, 0] @ w_k.T, dv[0, 0] @ w_v.T


# --- the other ways around ---

def my_span_corrupt__patched_corrupted_batch(tokens, noise_mask, vocab_size, eos_id):
    import numpy as np
    from minibert.family import t5_data
    original = t5_data.random_spans_noise_mask
    t5_data.random_spans_noise_mask = lambda *args: np.asarray(noise_mask, dtype=bool)  # the mask it asks for
    try:
        special = t5_data.Special(*[eos_id] * len(t5_data.Special._fields))
        batch = t5_data.corrupted_batch([np.asarray(tokens)], np.random.default_rng(0), vocab_size, special,
                                        len(tokens) + 1, len(tokens) + 1)
    finally:
        t5_data.random_spans_noise_mask = original
    return batch


def my_cross_attention_backward__via_decoder(dout, q, enc_out, w_k, w_v, enc_mask):
    from minibert.family import t5
    k, v = enc_out @ w_k, enc_out @ w_v
    cache = t5.CrossAttentionCache(q[None, None], k[None, None], v[None, None], None, 1.0)
    dq, dk, dv = t5.cross_attention_backward(dout[None, None], cache)
    return dq[0, 0], dk[0, 0] @ w_k.T, dv[0, 0] @ w_v.T
