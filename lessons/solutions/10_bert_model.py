"""Reference solutions for lesson 10's exercises. Try them yourself first: the lesson grades your
version and says what is wrong; come here when you are done, or truly stuck."""
import numpy as np

from minibert import layers


def my_gather_backward(dh, flat_pos, B, T):
    """dh (B*P, C), flat_pos (B*P,) -> dseq (B, T, C)"""
    d = np.zeros((B * T, dh.shape[-1]))  # (B*T, C) positions never gathered get 0
    np.add.at(d, flat_pos, dh)  # a gather's backward is a scatter-add: repeats accumulate
    return d.reshape(B, T, -1)  # (B*T, C) -> (B, T, C)


def my_tied_decoder_backward(dlogits, t, tok_emb):
    """dlogits (B*P, V), t (B*P, C), tok_emb (V, C) -> dt (B*P, C), dtok_from_decoder (V, C)"""
    # forward was: logits = t @ tok_emb.T + bias, a linear layer whose weight is tok_emb.T
    dt = dlogits @ tok_emb  # (B*P, V) @ (V, C) -> (B*P, C)
    dtok = dlogits.T @ t  # (V, B*P) @ (B*P, C) -> (V, C), the transpose of d(tok_emb.T)
    return dt, dtok


def my_bert_backward(c, block_backward):
    """c: forward's BertCache; block_backward(dx, l) -> (dx_in, {name: gradient}) ->
    {name: gradient}, every name of the table above, intermediates and parameters"""
    d = {}
    # forward was: loss = mlm_loss + nsp_loss, so d loss / d mlm_loss = d loss / d nsp_loss = 1
    # mlm_loss = CE(logits, targets): the mean over the used slots (the cache's weights are 1/M there, 0 elsewhere)
    d["dmlm_logits"] = layers.cross_entropy_backward(1.0, c.mlm_ce)  # (B*P, V)
    # forward was: logits = t @ tok_emb.T + mlm.bias
    d["mlm.bias"] = d["dmlm_logits"].sum(axis=0)  # (V,) the bias is added to every row
    d["dt"] = d["dmlm_logits"] @ c.tok_emb  # (B*P, V) @ (V, C) -> (B*P, C)
    d["dtok_decoder"] = d["dmlm_logits"].T @ c.t  # (V, C) the tie's top side
    # forward was: t = LN(GELU(h @ mlm.dense.w + mlm.dense.b))
    d["dmlm_gelu_out"], d["mlm.ln.w"], d["mlm.ln.b"] = layers.layernorm_backward(d["dt"], c.mlm_ln)  # (B*P, C)
    d["dmlm_gelu_in"] = layers.gelu_backward(d["dmlm_gelu_out"], c.mlm_gelu)  # (B*P, C)
    d["dh"], d["mlm.dense.w"], d["mlm.dense.b"] = layers.linear_backward(d["dmlm_gelu_in"], c.mlm_dense)  # (B*P, C)
    # forward was: h = seq.reshape(B*T, C)[flat_pos], a gather: scatter back, a row gathered twice adds up
    B, T = c.ids.shape
    width = d["dh"].shape[-1]  # C
    dflat = np.zeros((B * T, width))  # (B*T, C) rows never gathered get 0
    np.add.at(dflat, c.flat_pos, d["dh"])
    d["dseq_mlm"] = dflat.reshape(B, T, width)  # row b * T + t is sequence b, position t
    # forward was: nsp_loss = CE(pooled @ nsp.w + nsp.b), pooled = tanh(pool_pre), pool_pre = seq[:, 0] @ pool.w + pool.b
    d["dnsp_logits"] = layers.cross_entropy_backward(1.0, c.nsp_ce)  # (B, 2)
    d["dpooled"], d["nsp.w"], d["nsp.b"] = layers.linear_backward(d["dnsp_logits"], c.nsp)  # (B, C)
    d["dpool_pre"] = d["dpooled"] * (1 - c.pooled ** 2)  # (B, C) tanh' = 1 - tanh^2, from tanh's output
    d["dcls"], d["pool.w"], d["pool.b"] = layers.linear_backward(d["dpool_pre"], c.pool)  # (B, C)
    d["dseq"] = d["dseq_mlm"].copy()  # (B, T, C)
    d["dseq"][:, 0] += d["dcls"]  # seq feeds both heads: at [CLS] the two gradients add up
    # forward was: seq = block_{L-1}(... block_0(x0)): backward runs the last block first
    dx = d["dseq"]
    for l in reversed(range(len(c.layers))):
        dx, block_grads = block_backward(dx, l)  # (B, T, C), {"h{l}.*": ...}
        d[f"dblock{l}_in"] = dx
        d.update(block_grads)
    # forward was: x0 = LN(emb), emb = tok_emb[ids] + seg_emb[segs] + pos_emb[:T]
    d["demb"], d["emb_ln.w"], d["emb_ln.b"] = layers.layernorm_backward(dx, c.emb_ln)  # (B, T, C)
    d["pos_emb"] = np.zeros((c.pos_rows, width))  # (MAXPOS, C) rows >= T are never read: 0
    d["pos_emb"][:T] = d["demb"].sum(axis=0)  # every sequence reads row t: summed over the batch
    d["seg_emb"] = np.zeros((c.seg_rows, width))  # (TV, C)
    np.add.at(d["seg_emb"], c.segs, d["demb"])  # each read adds to its row
    d["dtok_input"] = np.zeros_like(c.tok_emb)  # (V, C) the tie's bottom side
    np.add.at(d["dtok_input"], c.ids, d["demb"])
    d["tok_emb"] = d["dtok_input"] + d["dtok_decoder"]  # tok_emb feeds the lookup and the decoder: both add up
    return d


def my_adam_first_step(g, lr, b1=0.9, b2=0.999, eps=1e-8):
    """g (any shape) -> (same shape) the first update of Adam with bias correction"""
    # from m = v = 0: m = (1 - b1) g and v = (1 - b2) g^2; the bias correction divides them by
    # (1 - b1) and (1 - b2), leaving mhat = g and vhat = g^2: b1 and b2 cancel out
    return -lr * g / (np.abs(g) + eps)  # sqrt(g^2) = |g|: about -lr * sign(g), whatever the size of g


# What tests/lessons/test_exercises.py holds lesson 10 to: before it grades an exercise, the lesson shows
# none of the expressions under "shows" (whitespace aside), and the exercise's grader calls none
# of the library functions under "calls" (they compute the answer).
KEYS = {
    "my_tied_decoder_backward": {"shows": ["dlogits.T @ t", "dlogits @ tok_emb"], "calls": ["bert_backward"]},
    "my_gather_backward": {"shows": ["np.add.at(d, flat_pos, dh)"], "calls": ["bert_backward"]},
    "my_bert_backward": {"shows": ['d["dpooled"] * (1 - c.pooled ** 2)', 'd["dseq"][:, 0] += d["dcls"]',
                                   'd["dtok_input"] + d["dtok_decoder"]', 'd["demb"].sum(axis=0)',
                                   'np.add.at(d["seg_emb"], c.segs, d["demb"])',
                                   'd["dmlm_logits"].T @ c.t', "reversed(range(len(c.layers)))"],
                         "calls": ["bert_backward", "encoder_backward", "embeddings_backward", "mlm_loss_backward",
                                   "pooler_backward"]},
    "my_adam_first_step": {"shows": ["-lr * g / (np.abs(g) + eps)"], "calls": []},
}
