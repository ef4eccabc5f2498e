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


def my_gather_backward__b_t_swapped(dh, flat_pos, B, T):
    d = np.zeros((B * T, dh.shape[-1]))  # noqa: F821
    np.add.at(d, flat_pos, dh)  # noqa: F821
    return d.reshape(T, B, -1)  # B and T swapped: row b * T + t is sequence b, position t


def _bert_backward(c, block_backward, layers, np, mistake=""):
    """The whole model's backward with one mistake built in (each def below passes the lesson's
    `layers` and `np`: a planted mistake runs with the lesson's names)."""
    d = {}
    d["dmlm_logits"] = layers.cross_entropy_backward(1.0, c.mlm_ce)
    if mistake == "unused_not_ignored":  # CE backward by hand, every slot counted
        probs, targets = c.mlm_ce.probs, c.mlm_ce.targets
        onehot = np.zeros_like(probs)
        onehot[np.arange(len(targets)), targets] = 1.0
        d["dmlm_logits"] = (probs - onehot) / len(targets)
    d["mlm.bias"] = d["dmlm_logits"].sum(axis=0)
    d["dt"] = d["dmlm_logits"] @ c.tok_emb
    d["dtok_decoder"] = d["dmlm_logits"].T @ c.t
    d["dmlm_gelu_out"], d["mlm.ln.w"], d["mlm.ln.b"] = layers.layernorm_backward(d["dt"], c.mlm_ln)
    d["dmlm_gelu_in"] = layers.gelu_backward(d["dmlm_gelu_out"], c.mlm_gelu)
    d["dh"], d["mlm.dense.w"], d["mlm.dense.b"] = layers.linear_backward(d["dmlm_gelu_in"], c.mlm_dense)
    B, T = c.ids.shape
    C = d["dh"].shape[-1]
    dflat = np.zeros((B * T, C))
    if mistake == "gather_assigned":
        dflat[c.flat_pos] = d["dh"]  # a row gathered twice: one write survives
    else:
        np.add.at(dflat, c.flat_pos, d["dh"])
    d["dseq_mlm"] = dflat.reshape(B, T, C)
    d["dnsp_logits"] = layers.cross_entropy_backward(1.0, c.nsp_ce)
    d["dpooled"], d["nsp.w"], d["nsp.b"] = layers.linear_backward(d["dnsp_logits"], c.nsp)
    pooled = c.pool_pre if mistake == "tanh_from_pre" else c.pooled  # the pre-activation in tanh's derivative
    d["dpool_pre"] = d["dpooled"] * (1 - pooled ** 2)
    d["dcls"], d["pool.w"], d["pool.b"] = layers.linear_backward(d["dpool_pre"], c.pool)
    d["dseq"] = d["dseq_mlm"].copy()
    if mistake != "no_cls":  # the pooler's gradient at [CLS] forgotten
        d["dseq"][:, 0] += d["dcls"]
    dx = d["dseq"]
    order = range(len(c.layers)) if mistake == "blocks_first_to_last" else reversed(range(len(c.layers)))
    for l in order:
        dx, grads = block_backward(dx, l)
        d[f"dblock{l}_in"] = dx
        d.update(grads)
    d["demb"], d["emb_ln.w"], d["emb_ln.b"] = layers.layernorm_backward(dx, c.emb_ln)
    if mistake == "pos_not_summed":
        d["pos_emb"] = d["demb"]  # (B, T, C): one row per sequence's read
    elif mistake == "pos_t_rows":
        d["pos_emb"] = d["demb"].sum(axis=0)  # (T, C): the rows never read left out
    else:
        d["pos_emb"] = np.zeros((c.pos_rows, C))
        d["pos_emb"][:T] = d["demb"].sum(axis=0)
    d["seg_emb"] = np.zeros((c.seg_rows, C))
    np.add.at(d["seg_emb"], c.segs, d["demb"])
    d["dtok_input"] = np.zeros_like(c.tok_emb)
    if mistake == "tok_fancy_add":
        d["dtok_input"][c.ids] += d["demb"]  # buffered: a token read twice keeps one read's gradient
    else:
        np.add.at(d["dtok_input"], c.ids, d["demb"])
    d["tok_emb"] = {"decoder_only": d["dtok_decoder"], "input_only": d["dtok_input"]}.get(
        mistake, d["dtok_input"] + d["dtok_decoder"])  # one side of the tie forgotten
    return d


def my_bert_backward__no_cls(c, block_backward, _backward=_bert_backward):
    return _backward(c, block_backward, layers, np, "no_cls")  # noqa: F821


def my_bert_backward__tanh_from_pre(c, block_backward, _backward=_bert_backward):
    return _backward(c, block_backward, layers, np, "tanh_from_pre")  # noqa: F821


def my_bert_backward__blocks_first_to_last(c, block_backward, _backward=_bert_backward):
    return _backward(c, block_backward, layers, np, "blocks_first_to_last")  # noqa: F821


def my_bert_backward__pos_not_summed(c, block_backward, _backward=_bert_backward):
    return _backward(c, block_backward, layers, np, "pos_not_summed")  # noqa: F821


def my_bert_backward__pos_t_rows(c, block_backward, _backward=_bert_backward):
    return _backward(c, block_backward, layers, np, "pos_t_rows")  # noqa: F821


def my_bert_backward__tok_fancy_add(c, block_backward, _backward=_bert_backward):
    return _backward(c, block_backward, layers, np, "tok_fancy_add")  # noqa: F821


def my_bert_backward__decoder_only(c, block_backward, _backward=_bert_backward):
    return _backward(c, block_backward, layers, np, "decoder_only")  # noqa: F821


def my_bert_backward__input_only(c, block_backward, _backward=_bert_backward):
    return _backward(c, block_backward, layers, np, "input_only")  # noqa: F821


def my_bert_backward__unused_not_ignored(c, block_backward, _backward=_bert_backward):
    return _backward(c, block_backward, layers, np, "unused_not_ignored")  # noqa: F821


def my_bert_backward__gather_assigned(c, block_backward, _backward=_bert_backward):
    return _backward(c, block_backward, layers, np, "gather_assigned")  # noqa: F821
