"""Lesson 10's exercises answered by the library (see README.md): the grader must refuse them."""


def my_tied_decoder_backward(dlogits, t, tok_emb):
    dt, dw, _ = layers.linear_backward(dlogits, layers.LinearCache(t, tok_emb.T))  # noqa: F821
    return dt, dw.T


def my_gather_backward(dh, flat_pos, B, T):
    C = dh.shape[-1]
    cache = layers.EmbeddingCache(flat_pos[None], flat_pos[None] * 0, (B * T, C), (1, C), (len(flat_pos), C))  # noqa: F821
    return layers.embedding_backward(dh[None], cache)[0].reshape(B, T, C)  # noqa: F821


def my_adam_first_step(g, lr, b1=0.9, b2=0.999, eps=1e-8):
    from minibert.optim import AdamW
    p = {"w": np.zeros_like(g)}  # noqa: F821
    AdamW(p, lr=lr, beta1=b1, beta2=b2, eps=eps, weight_decay=0.0, bias_correction=True).step({"w": g})
    return p["w"]
