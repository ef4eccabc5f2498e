# %% [markdown]
# # Lesson 10: the whole BERT, forward, backward and gradient check
#
# **Goal.** Put everything together: embeddings (04), encoder blocks (07), and the two
# pretraining heads, masked-language modelling (MLM: guess the hidden tokens) and next-sentence
# prediction (NSP: is sentence B the real continuation of A?). Then derive the whole model's
# backward yourself, from its forward alone, check it numerically, and train it on one batch.
#
# **Finish line.**
# 1. The forward, one op per line, reproduces `minibert.model.bert_forward`'s loss.
# 2. Your backward (exercise 3) gives every intermediate gradient, and equals
#    `minibert.model.bert_backward` for all parameter tensors.
# 3. A sampled gradient check of **every** parameter tensor of the whole model passes.
# 4. A fresh model's loss is about `ln V + ln 2` (tolerance derived below).
# 5. The model overfits one small batch: the loss falls from ~4.9 to below 0.5.

# %% [markdown]
# ## Setup
# Shape legend: `B` batch, `T` tokens, `C` hidden size, `NH` heads, `FF` FFN size, `V` vocab
# size, `L` layers, `P` prediction slots per sequence (masked positions), `TV` segment types
# (2), `MAXPOS` rows of the position table (`max_position_embeddings`).
# A pretraining batch uses the original BERT feature names (docs/bert-notes.md §3.7):
# `input_ids`, `segment_ids`, `input_mask` `(B, T)`; `masked_lm_positions`, `masked_lm_ids`,
# `masked_lm_weights` `(B, P)` (weight 0 marks an unused slot); `next_sentence_labels` `(B,)`
# (0 = B follows A, 1 = random). Lesson 09 builds such batches from text; here
# `gradcheck.random_batch` makes random ones, with two padded tokens in the last sequence and
# one unused prediction slot, so the masks are exercised too.

# %%
import math
from typing import Any, NamedTuple

import matplotlib.pyplot as plt
import numpy as np

import course  # lessons/course.py: where pictures go, how exercises are graded
from course import FAST, show  # FAST (CI): fewer training steps
from minibert.analysis import gradcheck
from minibert import layers
from minibert.bert import BertForPreTraining
from minibert.model import BertConfig, bert_backward, bert_forward, init_params
from minibert.model import block_backward as encoder_block_backward, block_forward as encoder_block_forward

rng = np.random.default_rng(10)
cfg = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=64, max_position_embeddings=32)
V, C, L = cfg.vocab_size, cfg.hidden_size, cfg.num_hidden_layers
batch = gradcheck.random_batch(cfg, B=4, T=12, P=4, rng=rng)
B, T = batch["input_ids"].shape
P = batch["masked_lm_positions"].shape[1]
params = init_params(cfg, seed=0, dtype=np.float64)  # float64 for the checks
for p in params.values():
    p += 0.05 * rng.standard_normal(p.shape)  # move away from ones/zeros so no bug hides
print(gradcheck.HEADER)

# %% [markdown]
# ## The math
#
#     x0     = LayerNorm(tok_emb[input_ids] + seg_emb[segment_ids] + pos_emb[:T])   (B, T, C)  lessons 04, 02
#     seq    = block_{L-1}( ... block_0(x0) ... )                     (B, T, C)   lesson 07, L blocks
#     pooled = tanh(seq[:, 0] @ pool.w + pool.b)                        (B, C)  the [CLS] vector
#     nsp_loss = CE(pooled @ nsp.w + nsp.b, next_sentence_labels)       lesson 03
#     h      = seq at the masked positions                              (B*P, C)
#     t      = LayerNorm(GELU(h @ mlm.dense.w + mlm.dense.b))           (B*P, C)
#     mlm_loss = CE(t @ tok_emb.T + mlm.bias, masked_lm_ids), unused slots ignored
#     loss   = mlm_loss + nsp_loss
#
# The MLM decoder has **no matrix of its own**: it reuses the token embedding table `tok_emb`
# (tied weights). So `tok_emb` is used in two places, at the bottom and at the top of the model.
#
# The forward below is the whole model, one op per line (dropout off). It returns the loss and a
# cache: every intermediate the backward needs, as plain arrays and the layers' caches of
# lessons 01-03 (`LinearCache(x, w)`, `LayerNormCache`, `GeluCache`, `CrossEntropyCache`), and
# the `L` blocks' caches of lesson 07 (`encoder_block_forward` is minibert.model.block_forward,
# lesson 07's block).

# %%
class BertCache(NamedTuple):
    ids: Any  # (B, T) input_ids
    segs: Any  # (B, T) segment_ids
    pos_rows: int  # MAXPOS: the rows of pos_emb (the forward reads the first T)
    seg_rows: int  # TV: the rows of seg_emb
    emb_ln: Any  # LayerNormCache of the embedding sum (B, T, C)
    layers: list  # L block caches, lesson 07's (block l reads the parameters h{l}.*)
    pool: Any  # LinearCache of the pooler's dense layer, [CLS] (B, C) -> (B, C)
    pool_pre: Any  # (B, C) the pooler's pre-activation
    pooled: Any  # (B, C) tanh(pool_pre)
    nsp: Any  # LinearCache (B, C) -> (B, 2)
    nsp_ce: Any  # CrossEntropyCache of the NSP loss
    flat_pos: Any  # (B*P,) b * T + position of each prediction slot
    mlm_dense: Any  # LinearCache (B*P, C) -> (B*P, C)
    mlm_gelu: Any  # GeluCache (B*P, C)
    mlm_ln: Any  # LayerNormCache (B*P, C)
    t: Any  # (B*P, C) the transformed vectors the decoder reads
    tok_emb: Any  # (V, C) the token table, the decoder's matrix (tied)
    mlm_ce: Any  # CrossEntropyCache of the MLM loss (unused slots: target -100, ignored)


def forward(p, batch):
    """The whole BERT for pretraining, one op per line -> (loss, BertCache). p: the params dict."""
    ids, segs, mask = batch["input_ids"], batch["segment_ids"], batch["input_mask"]  # (B, T) each
    B, T = ids.shape
    emb = p["tok_emb"][ids] + p["seg_emb"][segs] + p["pos_emb"][:T]  # (B, T, C) three lookups, summed
    x, c_eln = layers.layernorm_forward(emb, p["emb_ln.w"], p["emb_ln.b"], cfg.layer_norm_eps)  # (B, T, C)
    blocks = []
    for l in range(cfg.num_hidden_layers):  # lesson 07's block, L times; block l reads h{l}.*
        x, c_block = encoder_block_forward(p, cfg, l, x, mask, None, layers)  # (B, T, C)
        blocks.append(c_block)
    seq = x  # (B, T, C)
    # NSP: the pooler on [CLS], then a 2-way classifier
    pre, c_pool = layers.linear_forward(seq[:, 0], p["pool.w"], p["pool.b"])  # (B, C)
    pooled = np.tanh(pre)  # (B, C)
    nsp_logits, c_nsp = layers.linear_forward(pooled, p["nsp.w"], p["nsp.b"])  # (B, 2)
    nsp_loss, c_nsp_ce = layers.cross_entropy_forward(nsp_logits, batch["next_sentence_labels"])  # ()
    # MLM: gather the masked positions, transform, tied decoder
    flat_pos = (np.arange(B)[:, None] * T + batch["masked_lm_positions"]).reshape(-1)  # (B*P,) rows of B*T
    h = seq.reshape(B * T, -1)[flat_pos]  # (B*P, C)
    t1, c_dense = layers.linear_forward(h, p["mlm.dense.w"], p["mlm.dense.b"])  # (B*P, C)
    t2, c_gelu = layers.gelu_forward(t1)  # (B*P, C)
    t, c_ln = layers.layernorm_forward(t2, p["mlm.ln.w"], p["mlm.ln.b"], cfg.layer_norm_eps)  # (B*P, C)
    logits = t @ p["tok_emb"].T + p["mlm.bias"]  # (B*P, C) @ (C, V) -> (B*P, V)
    used = batch["masked_lm_weights"].reshape(-1) > 0  # (B*P,) False at an unused slot
    targets = np.where(used, batch["masked_lm_ids"].reshape(-1), -100)  # (B*P,) -100: ignored
    mlm_loss, c_mlm_ce = layers.cross_entropy_forward(logits, targets)  # () mean over the used slots
    loss = mlm_loss + nsp_loss  # ()
    return loss, BertCache(ids, segs, p["pos_emb"].shape[0], p["seg_emb"].shape[0], c_eln, blocks, c_pool, pre,
                           pooled, c_nsp, c_nsp_ce, flat_pos, c_dense, c_gelu, c_ln, t, p["tok_emb"], c_mlm_ce)


loss, cache = forward(params, batch)
loss_lib, metrics, _ = bert_forward(params, cfg, batch, ops=layers)
print(f"loss {loss:.6f}: the same as bert_forward's ({loss_lib:.6f})")
assert np.isclose(loss, loss_lib, rtol=0, atol=1e-12)

# %% [markdown]
# The whole model, drawn with this lesson's sizes and the parameters each part holds (counted
# from `params`): one encoder, two heads. The MLM head reads only the masked positions; the NSP
# head only `[CLS]`. The dashed line is the tie: the decoder is `tok_emb`, transposed.

# %%
count = lambda *prefixes: sum(p.size for n, p in params.items() if n.startswith(prefixes))  # noqa: E731
fig, ax = plt.subplots(figsize=(9, 6.5))
ax.axis("off")
body = course.flow(ax, [
    (f"input_ids, segment_ids  (B, T) = {(B, T)}", "white"),
    (f"embeddings: tok_emb[ids] + seg_emb + pos_emb, LayerNorm\n{count('tok_emb', 'seg_emb', 'pos_emb', 'emb_ln'):,} params",
     "#fce5cd"),
    (f"{cfg.num_hidden_layers} encoder blocks (lesson 07)\n{count('h'):,} params", "#cfe2f3"),
    (f"seq  (B, T, C) = {(B, T, C)}", "white")], x=0.5, bottom=0.04, top=0.46, width=0.55)
mlm = course.flow(ax, [
    (f"masked positions  (B*P, C) = {(B * P, C)}", "white"),
    (f"dense C -> C, GELU, LayerNorm\n{count('mlm.dense', 'mlm.ln'):,} params", "#d9ead3"),
    (f"tied decoder: t @ tok_emb.T + mlm.bias\n({count('mlm.bias')} params of its own)", "#d9ead3"),
    (f"MLM logits  (B*P, V) = {(B * P, V)}", "white")], x=0.25, bottom=0.58, top=0.97, width=0.42)
nsp = course.flow(ax, [
    (f"[CLS] vector  (B, C) = {(B, C)}", "white"),
    (f"pooler: dense C -> C, tanh\n{count('pool.'):,} params", "#ead1dc"),
    (f"NSP classifier C -> 2\n{count('nsp.'):,} params", "#ead1dc"),
    ("NSP logits  (B, 2)", "white")], x=0.76, bottom=0.58, top=0.97, width=0.38)
for (cx, cy) in (mlm[0], nsp[0]):
    ax.annotate("", xy=(cx, cy - 0.025), xytext=(body[-1][0], body[-1][1] + 0.025), arrowprops=dict(arrowstyle="->"))
ax.annotate("", xy=(mlm[2][0] - 0.2, mlm[2][1]), xytext=(body[1][0] - 0.29, body[1][1]),
            arrowprops=dict(arrowstyle="->", ls="--", color="C3", connectionstyle="arc3,rad=-0.25"))
ax.text(0.0, 0.36, "tied: the same\ntok_emb (V, C)", color="C3", fontsize=8)
ax.set_title(f"BERT for pretraining: {sum(p.size for p in params.values()):,} parameters, one encoder, two heads",
             fontsize=10)
show(fig, "10_whole_model.png")
assert count("tok_emb", "seg_emb", "pos_emb", "emb_ln", "h", "mlm.", "pool.", "nsp.") == sum(p.size for p in params.values())

# %% [markdown]
# ## Backward, two warm-ups (exercises 1 and 2)
# The chain rule starts at `dloss = 1`; `loss = mlm_loss + nsp_loss`, so both heads receive 1.
# Two steps of the backward are new in this lesson; warm up on each alone before the whole model
# (exercise 3). A stub left as it is makes the lesson go on with the reference solution
# (`lessons/solutions/10_bert_model.py`).
#
# **Exercise 1.** `my_tied_decoder_backward(dlogits, t, tok_emb)` for `logits = t @ tok_emb.T +
# bias`: return `(dt, dtok_from_decoder)`. It is a linear layer whose weight is `tok_emb.T`; mind
# the transpose. Each of the two is graded on its own against the numerical gradient.

# %%
ex = course.Exercises("10_bert_model")


def my_tied_decoder_backward(dlogits, t, tok_emb):
    """dlogits (B*P, V), t (B*P, C), tok_emb (V, C) -> dt (B*P, C), dtok_from_decoder (V, C)"""
    raise NotImplementedError("exercise 1: backward through the tied decoder")  # your code here


def check_tied_decoder_backward(fn):
    r = np.random.default_rng(1001)  # the grader's own inputs, drawn now: not the lesson's arrays
    n, width, vocab = 7, 5, 11  # (B*P, C, V), sizes of its own
    t_in, tok_in = r.standard_normal((n, width)), r.standard_normal((vocab, width))  # (n, C), (V, C)
    bias, d = r.standard_normal(vocab), r.standard_normal((n, vocab))  # (V,), (n, V)
    decoder = lambda: t_in @ tok_in.T + bias  # noqa: E731  (n, V)
    dt_mine, dtok_mine = fn(d.copy(), t_in.copy(), tok_in.copy())
    return [course.close("dt vs numerical gradient", dt_mine, gradcheck.numerical_grad(decoder, t_in, d)),
            course.close("dtok vs numerical gradient", dtok_mine, gradcheck.numerical_grad(decoder, tok_in, d))]


my_tied_decoder_backward = ex.grade(1, my_tied_decoder_backward, check_tied_decoder_backward, paths=("dt", "dtok"),
                                    refuses=("layers.linear_backward", "kernels.linear_backward",
                                             "model.mlm_loss_backward", "model.bert_backward"))

# %% [markdown]
# **Exercise 2.** `my_gather_backward(dh, flat_pos, B, T)`: undo `h = seq.reshape(B*T, C)[flat_pos]`,
# giving `dseq` `(B, T, C)`. Positions can repeat (the same row gathered twice). Graded against
# the numerical gradient, on positions the grader draws: distinct ones, then a list with repeats.

# %%
def my_gather_backward(dh, flat_pos, B, T):
    """dh (B*P, C), flat_pos (B*P,) -> dseq (B, T, C)"""
    raise NotImplementedError("exercise 2: scatter the gathered gradient back")  # your code here


def gather_mistakes(pos, d, want):
    """{words: the answer that mistake gives} for the gather's backward: a repeated row written, not
    added; the batch and position axes swapped (want (B, T, C), its flat row b * T + t)."""
    b, t_len, width = want.shape
    dense = np.zeros((b * t_len, width))  # (B*T, C)
    np.add.at(dense, pos, d)
    return {**course.repeated_rows(pos, d, want),
            f"B and T swapped: the (B*T, C) rows reshaped to (T, B, C) = {(t_len, b, width)}; row b * T + t is "
            f"sequence b, position t, so they reshape to (B, T, C)": dense.reshape(t_len, b, width),
            "B and T swapped in reading the flat rows: row b * T + t is sequence b, position t (you read row "
            "t * B + b as it)": dense.reshape(t_len, b, width).transpose(1, 0, 2)}


def check_gather_backward(fn):
    r = np.random.default_rng(1002)  # the grader's own inputs, drawn now: not the lesson's arrays
    b, t_len, width = 3, 6, 4  # (B, T, C), sizes of its own
    seq_in = r.standard_normal((b, t_len, width))  # (B, T, C)
    distinct = r.choice(b * t_len, size=5, replace=False)  # (5,) like the MLM head's positions: no repeats
    repeats = np.concatenate([distinct, distinct[:3]])  # (8,) a flat position gathered twice must add up
    r.shuffle(repeats)
    results = []
    for label, pos in (("dseq from the MLM head", distinct), ("repeated positions add up", repeats)):
        d = r.standard_normal((len(pos), width))  # (n, C)
        num = gradcheck.numerical_grad(lambda: seq_in.reshape(b * t_len, width)[pos], seq_in, d)  # (B, T, C)
        results.append(course.close(f"{label}, vs numerical gradient", fn(d.copy(), pos.copy(), b, t_len), num,
                                    wrongs=lambda pos=pos, d=d, num=num: gather_mistakes(pos, d, num)))
    return results


my_gather_backward = ex.grade(2, my_gather_backward, check_gather_backward,
                              refuses=("layers.embedding_backward", "kernels.embedding_backward",
                                       "kernels.scatter_add_rows", "model.mlm_loss_backward", "model.bert_backward"))

# %% [markdown]
# ## Backward, the whole model, every gradient (exercise 3)
# Now the whole backward, from `dloss = 1` to every parameter, naming every intermediate gradient
# on the way, as lesson 07 asked it for one block. Read `forward` above from the bottom up; each
# line undoes one forward line. Write `my_bert_backward(c, block_backward)`, `c` the `BertCache`
# that `forward` returned, returning a dict with these names, in the order backward reaches them
# (the parameters' gradients under the params' own names, beside the gradient they come with):
#
#     dmlm_logits   (B*P, V)  the MLM logits                                   mlm.bias
#     dt            (B*P, C)  the decoder's input t
#     dtok_decoder  (V, C)    tok_emb's gradient from the decoder (the tie's top side)
#     dmlm_gelu_out (B*P, C)  the MLM LayerNorm's input (GELU's output)        mlm.ln.w, mlm.ln.b
#     dmlm_gelu_in  (B*P, C)  GELU's input (the dense layer's output)
#     dh            (B*P, C)  the gathered rows h                              mlm.dense.w, mlm.dense.b
#     dseq_mlm      (B, T, C) seq's gradient from the MLM head
#     dnsp_logits   (B, 2)    the NSP logits
#     dpooled       (B, C)    the pooler's output                              nsp.w, nsp.b
#     dpool_pre     (B, C)    the pooler's pre-activation (tanh's input)
#     dcls          (B, C)    seq[:, 0], the [CLS] vector                      pool.w, pool.b
#     dseq          (B, T, C) seq's whole gradient, both heads
#     dblock1_in    (B, T, C) block 1's input (block 0's output)               h1.*, block_backward's
#     dblock0_in    (B, T, C) block 0's input x0                                h0.*, block_backward's
#                   (one dblock{l}_in per block, l = L-1 down to 0)
#     demb          (B, T, C) the embedding sum (the embedding LayerNorm's input)   emb_ln.w, emb_ln.b
#     pos_emb       (MAXPOS, C)   seg_emb (TV, C)   the two tables' gradients
#     dtok_input    (V, C)    tok_emb's gradient from the lookup (the tie's bottom side)
#     tok_emb       (V, C)    tok_emb's whole gradient
#
# The encoder blocks are lesson 07's work, and given: `block_backward(dx, l)` takes the gradient
# of block `l`'s output and returns `(the gradient of its input, {"h{l}.ln2.w": ..., ...})`, its
# twelve parameters' gradients under their full names. Everything else is yours. The layers of
# lessons 01-03 are there to compose (`layers.cross_entropy_backward`, `layers.linear_backward`,
# `layers.gelu_backward`, `layers.layernorm_backward`); the lookups, the gather, tanh and the
# decoder are yours to derive (your answers to exercises 1 and 2 are there to call: the room
# hands them over when your cell names them). Where one value feeds two others, its gradients
# add up: find every such place in the forward. The grade is a table, one row per name: `exact` (bit for bit),
# `close` (to 1e-5) and the largest difference; the first wrong one is diagnosed in words. The
# grader draws its own parameters and batch (with a prediction at [CLS] and an unused slot that
# repeats a position, so that every fork and every repeated row counts). A stub left as it is
# makes the lesson go on with the reference solution (`lessons/solutions/10_bert_model.py`).

# %%
def my_bert_backward(c, block_backward):
    """c: forward's BertCache; block_backward(dx, l) -> (dx_in, {name: gradient}) ->
    {name: gradient}, every name of the table above, intermediates and parameters"""
    raise NotImplementedError("exercise 3: the whole model's backward")  # your code here


# %%
def block_backward_for(c):
    """Lesson 07's block backward (encoder_block_backward: minibert.model.block_backward), on the blocks
    of the forward that made `c`, as the function your my_bert_backward is given: block_backward(dx, l)
    -> (dx_in, {"h{l}.…": gradient}), dx (B, T, C) the gradient of block l's output. It runs here, in
    the lesson's process, when your function calls it."""
    def given_block_backward(dx, l):
        if not 0 <= int(l) < len(c.layers):
            raise IndexError(f"block_backward(dx, l): there are {len(c.layers)} blocks, l = 0..{len(c.layers) - 1}; "
                             f"got l = {l}")
        grads = {}
        dx_in = encoder_block_backward(np.asarray(dx, dtype=np.float64), c.layers[int(l)], cfg, int(l), grads,
                                       layers)  # (B, T, C)
        return dx_in, grads
    return given_block_backward


BERT_HINTS = {  # what to ask yourself where a gradient is the first wrong one (questions, not answers)
    "dmlm_logits": "the MLM loss is a mean over the used slots only: does your CE backward ignore the unused ones "
                   "(target -100) and divide by the number of used ones?",
    "mlm.bias": "the bias is added to every row of the logits: over which axis do its gradients add up?",
    "dt": "logits = t @ tok_emb.T: which matrix multiplies dmlm_logits, and is it transposed?",
    "dtok_decoder": "logits = t @ tok_emb.T: tok_emb appears transposed; is your gradient (V, C), tok_emb's shape?",
    "dmlm_gelu_out": "the MLM LayerNorm is the head's last layer before the decoder: its backward, with its cache?",
    "mlm.ln.w": "the MLM LayerNorm's backward returns three things: are they in that order?",
    "dmlm_gelu_in": "GELU: did its backward get GELU's cache?",
    "dh": "the dense layer: its backward, with the mlm_dense cache?",
    "dseq_mlm": "h picked rows of seq.reshape(B*T, C): where does each row's gradient go back, what happens to a "
                "row picked twice, and which flat row is sequence b, position t?",
    "dnsp_logits": "the NSP loss enters the total loss with weight 1: is it its own cache's backward?",
    "dpooled": "the NSP classifier: its backward, with the nsp cache?",
    "dpool_pre": "pooled = tanh(pool_pre): what is d tanh(u) / du, and which of the two arrays gives it at once?",
    "dcls": "the pooler's dense layer: which way round does pool.w go in its backward?",
    "dseq": "seq[:, 0] feeds the pooler and seq feeds the MLM head: did both reach dseq, and at the right rows?",
    "demb": "x0 = LayerNorm(emb): its backward, after every block's, with the embedding LayerNorm's cache?",
    "pos_emb": "every sequence reads the same position rows: are they summed over the batch, into a table of "
               "pos_emb's own shape?",
    "seg_emb": "each segment row is read at many positions: does each read add to its row?",
    "dtok_input": "a token read several times: does each read add to its row?",
    "tok_emb": "tok_emb is used twice, at the bottom and at the top of the model: did both sides reach it?",
}
BERT_HINTS.update({f"dblock{l}_in": f"block {l}'s backward: did it get the gradient of block {l}'s own output, the "
                                    f"blocks taken from the last to the first?" for l in range(L)})
BERT_HINTS.update({f"h{l}.{name}": f"the block parameters are what block_backward(dx, {l}) returns: did you keep "
                                   f"them under their names, from block {l}'s call?"
                   for l in range(L) for name in ("ln2.w", "ln2.b", "ffn.out.w", "ffn.out.b", "ffn.in.w", "ffn.in.b",
                                                   "ln1.w", "ln1.b", "attn.out.w", "attn.out.b", "attn.qkv.w",
                                                   "attn.qkv.b")})


def grader_batch(r):
    """The grader's own parameters and batch, drawn from `r`, float64, away from the init's ones and zeros.
    A real prediction at [CLS] (the pooler and the MLM head then share its row) and the unused slot
    (weight 0) at a position that a used slot of its sequence predicts (a row gathered twice)."""
    p = {n: v + 0.1 * r.standard_normal(v.shape) for n, v in init_params(cfg, seed=4, dtype=np.float64).items()}
    b = gradcheck.random_batch(cfg, B=4, T=12, P=4, rng=r)
    b["masked_lm_positions"][1, 0] = 0  # (sorted) a used slot at [CLS]
    b["masked_lm_positions"][0, -1] = b["masked_lm_positions"][0, 0]  # the unused slot repeats a used position
    return p, b


def bert_mistakes(c, want, block_backward):
    """{name: {words: the answer that mistake gives there}}, for the first wrong gradient's diagnosis."""
    probs, targets = c.mlm_ce.probs, c.mlm_ce.targets  # (B*P, V), (B*P,) an unused slot's target read as 0
    n, used = len(targets), c.mlm_ce.weight > 0  # B*P, (B*P,)
    onehot = np.eye(probs.shape[1])[targets]  # (B*P, V)
    Bn, Tn, width = want["dseq"].shape
    dseq_no_cls = want["dseq_mlm"]
    dseq_set = want["dseq_mlm"].copy()
    dseq_set[:, 0] = want["dcls"]  # [CLS]'s row replaced, not added to
    first_to_last, x = {}, want["dseq"]
    for l in range(len(c.layers)):  # the blocks' backward in the forward's order: block 0 first
        x = block_backward(x, l)[0]
        first_to_last[l] = x
    top = f"dblock{len(c.layers) - 1}_in"
    out = {
        "dmlm_logits": {
            "the unused slots (weight 0, target -100) not ignored: every one of the B*P slots got (probs - onehot) / "
            "(B*P); the MLM loss is the mean over the used slots alone": (probs - onehot) / n,
            "the mean over all B*P slots: the unused slots are left out, yet the loss divides by the number of used "
            "slots, not by B*P": (probs - onehot) * used[:, None] / n},
        "mlm.bias": {"mlm.bias's gradient summed over the vocabulary (axis 1): the bias is added to every row, so it "
                     "sums over the rows (axis 0)": want["dmlm_logits"].sum(axis=1)},
        "dpool_pre": {
            "tanh's derivative taken at its input: 1 - pool_pre^2, where it is 1 - tanh(pool_pre)^2 = 1 - pooled^2":
                want["dpooled"] * (1 - c.pool_pre ** 2),
            "tanh applied once more: 1 - tanh(pooled)^2, where the derivative is 1 - pooled^2 (pooled is already "
            "tanh's output)": want["dpooled"] * (1 - np.tanh(c.pooled) ** 2),
            "tanh's backward skipped: dpooled passed on as it is, as if tanh were the identity": want["dpooled"]},
        "dcls": {"dpool_pre @ pool.w where dpool_pre @ pool.w.T belongs (pool.w is square, so the shapes could not "
                 "tell)": want["dpool_pre"] @ c.pool.w},
        "dseq": {"[CLS]'s gradient from the pooler not added: seq[:, 0] feeds the pooler too, so dseq[:, 0] gets "
                 "dcls added to what the MLM head gives": dseq_no_cls,
                 "[CLS]'s row set to dcls, not added to: the MLM head reads position 0 too here (a prediction at "
                 "[CLS]), and the two gradients add up": dseq_set,
                 "dcls added at every position: it belongs to position 0 ([CLS]) alone":
                     want["dseq_mlm"] + want["dcls"][:, None, :],
                 "the pooler's side alone: the MLM head's gradient dseq_mlm left out": want["dseq"] - dseq_no_cls},
        top: {"the blocks' backward run first to last (block 0 first): backward runs the last block first, block "
              "L-1 down to 0": first_to_last[len(c.layers) - 1],
              "block 0's backward given the gradient of the last block's output: backward runs the last block "
              "first, block L-1 down to 0": first_to_last[0]},
        "demb": {"the embedding LayerNorm's backward skipped: x0 = LayerNorm(emb)": want["dblock0_in"]},
        "pos_emb": {"pos_emb's gradient for the T positions read only, shape (T, C): the table has MAXPOS rows, and "
                    "the rows never read get 0": want["pos_emb"][:Tn],
                    "pos_emb's gradient not summed over the batch: every sequence reads the same row t, so row t is "
                    "the sum over b": want["demb"],
                    "pos_emb's gradient averaged over the batch, not summed: each sequence's read adds":
                        want["pos_emb"] / Bn},
        "dseq_mlm": gather_mistakes(c.flat_pos, want["dh"], want["dseq_mlm"]),
        "seg_emb": course.repeated_rows(c.segs, want["demb"], want["seg_emb"]),
        "dtok_input": course.repeated_rows(c.ids, want["demb"], want["dtok_input"]),
        "tok_emb": {"the decoder's side of the tie left out: tok_emb is read by the lookup and by the decoder, and "
                    "its gradient is dtok_input + dtok_decoder": want["dtok_input"],
                    "the lookup's side of the tie left out: tok_emb is read by the lookup and by the decoder, and "
                    "its gradient is dtok_input + dtok_decoder": want["dtok_decoder"],
                    **{f"{words}, plus the decoder's side": wrong + want["dtok_decoder"]
                       for words, wrong in course.repeated_rows(c.ids, want["demb"], want["dtok_input"]).items()}},
    }
    return out


def check_bert_backward(fn):
    p, b = grader_batch(np.random.default_rng(1004))  # the grader's own parameters and batch, drawn now
    _, c = forward(p, b)
    want = ex.solution("my_bert_backward")(c, block_backward_for(c))  # the reference, checked numerically by a test
    mine = fn(c, block_backward_for(c))
    return course.gradient_table(mine, want, lambda: bert_mistakes(c, want, block_backward_for(c)), BERT_HINTS)


my_bert_backward = ex.grade(3, my_bert_backward, check_bert_backward,
                            allows=("layers.cross_entropy_backward", "layers.linear_backward", "layers.gelu_backward",
                                    "layers.layernorm_backward"),
                            refuses=("model.bert_backward", "model.encoder_backward", "model.blocks_backward",
                                     "model.embeddings_backward", "model.mlm_loss_backward",
                                     "model.mlm_transform_backward", "model.pooler_backward",
                                     "model.dense_act_backward", "layers.embedding_backward",
                                     "kernels.embedding_backward", "kernels.scatter_add_rows"))

# %% [markdown]
# With your `my_bert_backward`, the lesson has every gradient of the whole model. Its parameter
# gradients must equal `minibert.model.bert_backward`'s, for all of them; the two sides of the tie
# are kept for the gradient check below.

# %%
d = my_bert_backward(cache, block_backward_for(cache))
g = {name: d[name] for name in params}  # the parameters' gradients
dtok_input, dtok_decoder = d["dtok_input"], d["dtok_decoder"]  # (V, C) each, the tie's two sides
grads = bert_backward(params, cfg, bert_forward(params, cfg, batch, ops=layers)[2], ops=layers)
assert set(grads) == set(params) and all(grads[k].shape == params[k].shape for k in params)
for name in params:
    assert np.allclose(g[name], grads[name], rtol=1e-12, atol=1e-15), f"{name} differs from bert_backward"
print(f"your backward equals bert_backward for all {len(params)} parameter tensors")


# %% [markdown]
# ## Whole-model gradient check
# Your gradients (exercise 3), against the numerical gradient of `forward`'s loss. A full
# numerical gradient would need two forward passes per parameter (tens of thousands).
# Instead we check a few **sampled entries of every tensor**, small LayerNorm vectors and
# biases included. For `tok_emb` we also sample rows that are both input tokens and MLM
# targets, where both sides of the tie matter. Same pass rule as single layers (rtol 1e-5,
# atol 1e-8). **Reading the numbers.** `max_abs` is about 1e-10 on every row: the numerical
# gradient of the whole model is as accurate, in absolute terms, as a single layer's. `max_rel`
# varies more from run to run (the cell prints the largest, and whether it is below rtol): it is
# large where the sampled entry's true gradient is itself small, so the same ~1e-10 of rounding
# is a larger fraction of it. When it is above rtol, that entry passes through atol (its true
# gradient is below about 1e-5, and `|diff| <= 1e-8 + 1e-5 |n|` holds); a wrong gradient gives
# ~1. (A `max_rel` of 1.0 on an `attn.qkv.b` row with verdict ok would be the key
# bias, whose true gradient is exactly 0: lesson 05.)

# %%
loss_fn = lambda: forward(params, batch)[0]  # noqa: E731  the forward shown above
k = 3 if FAST else 6
checks = []
for name, p in params.items():
    shape = (T, C) if name == "pos_emb" else p.shape  # rows >= T of pos_emb are unused (gradient 0)
    idx = gradcheck.sampled_indices(shape, k, rng)
    if name == "tok_emb":
        both = np.intersect1d(batch["input_ids"], batch["masked_lm_ids"][batch["masked_lm_weights"] > 0])
        idx += [(int(r), int(c)) for r in both[:3] for c in rng.integers(0, C, size=2)]
    num = gradcheck.numerical_grad_scalar(loss_fn, p, indices=idx)
    sel = tuple(np.array(i) for i in zip(*idx))
    checks.append(gradcheck.compare(f"model: {name}", g[name][sel], num[sel]))  # your gradients
    if name == "tok_emb":  # each side of the tie alone must FAIL: both are needed
        assert not gradcheck.compare("tok_emb, input side only (expected FAIL)", dtok_input[sel], num[sel])
        assert not gradcheck.compare("tok_emb, decoder side only (expected FAIL)", dtok_decoder[sel], num[sel])
assert all(checks), [c.name for c in checks if not c]
worst = max(checks, key=lambda c: c.max_rel)
print(f"largest max_rel: {worst.max_rel:.1e} ({worst.name}); largest max_abs: "
      f"{max(c.max_abs for c in checks):.1e}; the largest max_rel is "
      + ("below rtol 1e-5" if worst.max_rel <= 1e-5 else "above rtol 1e-5: that entry passed through atol"))

# %% [markdown]
# ## The initial loss: about ln V + ln 2
# At init every weight is small (std 0.02), so the logits are close to 0 and every prediction
# is close to uniform: MLM loss ~ `ln V` (lesson 03), NSP loss ~ `ln 2`.
# **Tolerance.** The MLM logits are `t @ tok_emb.T` with `t` LayerNorm-ed (each entry has unit
# variance) and `tok_emb` entries of std `s ~ 0.02`, so each logit has std `sigma ~ s sqrt(C)`.
# Small logit noise raises the expected loss by about `sigma^2 / 2`, and averaging over `n`
# predictions leaves a random error of about `sigma / sqrt(n)`. We allow the bias plus four
# standard errors, plus 0.01 for NSP (its logits pass two 0.02 matrices and are far smaller).

# %%
model = BertForPreTraining(cfg, seed=1)  # float32, the original init, as training uses it
big = gradcheck.random_batch(cfg, B=16, T=12, P=5, rng=rng)
loss0, _, metrics0 = model.loss_grads_metrics(big, compute_grads=False)
sigma = float(model.params["tok_emb"].std()) * math.sqrt(C)
n = metrics0.mlm_count  # number of real MLM predictions in the batch
expected = math.log(V) + math.log(2)
tol = sigma**2 / 2 + 4 * sigma / math.sqrt(n) + 0.01
print(f"initial loss {loss0:.4f}, ln V + ln 2 = {expected:.4f}, |diff| {abs(loss0 - expected):.4f} <= tol {tol:.4f} "
      f"(sigma {sigma:.3f}, n {n})")
assert abs(loss0 - expected) <= tol

# %% [markdown]
# ## Overfit one batch
# The classic sanity test: a model that can learn must be able to memorize a handful of
# examples. We train on the same batch with plain Adam (lesson 11 introduces BERT's AdamW,
# warmup and decay). Loss curve: `lessons/out/10_overfit_loss.png`.

# %%
def adam_step(params, grads, m, v, step, lr=3e-3, b1=0.9, b2=0.999, eps=1e-8):
    for name, p in params.items():
        m[name] = b1 * m[name] + (1 - b1) * grads[name]  # running mean of the gradient
        v[name] = b2 * v[name] + (1 - b2) * grads[name] ** 2  # running mean of its square
        mhat = m[name] / (1 - b1**step)  # correct the bias of starting at 0
        vhat = v[name] / (1 - b2**step)
        p -= lr * mhat / (np.sqrt(vhat) + eps)  # in place: params[name] changes


steps = 100 if FAST else 300
model = BertForPreTraining(cfg, seed=2)  # float32
one = gradcheck.random_batch(cfg, B=4, T=16, P=4, rng=np.random.default_rng(0))
m = {k: np.zeros_like(p) for k, p in model.params.items()}
v = {k: np.zeros_like(p) for k, p in model.params.items()}
curve = []
for step in range(1, steps + 1):
    loss_t, grads_t = model.loss_and_grads(one)
    adam_step(model.params, grads_t, m, v, step)
    curve.append(float(loss_t))
fig, ax = plt.subplots(figsize=(5, 3.5))
ax.semilogy(range(1, steps + 1), curve)
ax.set_xlabel("step")
ax.set_ylabel("loss (MLM + NSP)")
ax.set_title("overfitting one batch")
fig.tight_layout()
show(fig, "10_overfit_loss.png")
print(f"overfit: loss {curve[0]:.3f} -> {curve[-1]:.4f} in {steps} steps")
assert curve[-1] < 0.5 and curve[-1] < curve[0] / 8

# %% [markdown]
# ## Discussion
# - `bert_forward` returns `(loss, metrics, cache)`; the cache is the encoder cache plus the heads'
#   caches. The MLM head runs only at the `P` masked positions, not all `T`, which keeps the
#   `(B*P, V)` logits small: with BERT's `V = 30522`, this is the biggest saving in the heads.
#   `bert_forward` goes two steps further, with the same loss and gradients: it keeps only the
#   `M` slots with weight > 0, and it runs the per-token layers on the `N` real tokens only
#   (`unpad=True`: the fast path `encoder_forward_unpadded` in `minibert/model.py`, which runs
#   the same blocks on `(N, C)` rows); attention alone needs the padded grid.
#   On the tiny preset's data, 13.5% of the tokens are padding.
# - The tie means one `(V, C)` table serves as input lookup and output projection; its gradient
#   is a scatter (input side) plus a dense matrix product (decoder side).
# - `BertForPreTraining` is a thin class over these functions: `model.loss_and_grads(batch)`, or
#   `model.loss_grads_metrics(batch)` for the batch's accuracies as well.

# %% [markdown]
# ## Exercises
# Replace each `raise NotImplementedError(...)` with your code and re-run; the cell after the
# stub grades your function, and names the check that failed and by how much. A stub left as it
# is makes the lesson go on with the reference solution (`lessons/solutions/10_bert_model.py`).
#
# (Exercises 1 to 3, the tied decoder, the gather and the whole backward, came up in the backward sections.)
#
# 4. `my_adam_first_step(g, lr, b1=0.9, b2=0.999, eps=1e-8)`: the change that Adam (the
#    `adam_step` above, with bias correction) makes to a parameter on step 1, from zero moments,
#    as one closed-form line in `g`, `lr` and `eps` (no `m`, `v`, `b1` or `b2` left in it: work
#    it out on paper first). Graded against `adam_step` itself, for gradients of very different
#    sizes, down to a few times `eps`.

# %%
def my_adam_first_step(g, lr, b1=0.9, b2=0.999, eps=1e-8):
    """g (any shape) -> (same shape) the first update of Adam with bias correction"""
    raise NotImplementedError("exercise 4: work out Adam's first step")  # your code here


# %%
def check_adam_first_step(fn):
    r = np.random.default_rng(1003)  # the grader's own gradients, drawn now: sizes 1e-4 to 1e3, two of them near eps
    gg = np.concatenate([r.choice([-1.0, 1.0], size=4) * 10.0 ** r.uniform(-4, 3, size=4),
                         r.choice([-1.0, 1.0], size=2) * 10.0 ** r.uniform(-8.7, -7.7, size=2)])  # (6,)
    lr = float(r.uniform(1e-3, 1e-1))
    mine = fn(gg.copy(), lr)
    p, m1, v1 = {"x": np.zeros(6)}, {"x": np.zeros(6)}, {"x": np.zeros(6)}  # (6,) each
    adam_step(p, {"x": gg}, m1, v1, step=1, lr=lr)  # m1, v1: the moments after step 1
    p_no_eps = {"x": np.zeros(6)}
    adam_step(p_no_eps, {"x": gg}, {"x": np.zeros(6)}, {"x": np.zeros(6)}, step=1, lr=lr, eps=0.0)
    m_hat, v_hat = m1["x"] / (1 - 0.9), v1["x"] / (1 - 0.999)  # (6,) each: the bias-corrected moments
    wrongs = {"Adam without bias correction: the step-1 moments m, v used as they are, not divided by "
              "1 - b1^1 and 1 - b2^1": -lr * m1["x"] / (np.sqrt(v1["x"]) + 1e-8),
              "eps left out (as if it were 0): it matters where |g| is near eps = 1e-8, as for the last two "
              "gradients here": p_no_eps["x"],
              "the bias correction on m alone: v too is divided by 1 - b2^1": -lr * m_hat / (np.sqrt(v1["x"]) + 1e-8),
              "the bias correction on v alone: m too is divided by 1 - b1^1": -lr * m1["x"] / (np.sqrt(v_hat) + 1e-8),
              "v used where its square root belongs: the step divides by sqrt(v_hat) + eps":
              -lr * m_hat / (v_hat + 1e-8),
              "eps inside the square root: Adam adds it to sqrt(v_hat)": -lr * m_hat / np.sqrt(v_hat + 1e-8)}
    return [course.close("equals adam_step's first update", mine, p["x"], wrongs=wrongs)]


my_adam_first_step = ex.grade(4, my_adam_first_step, check_adam_first_step,
                              refuses=("optim.AdamW", "kernels.adamw_update", "kernels.adamw_update_all"))
step1 = my_adam_first_step(np.array([1e-3, -5.0, 200.0, 1e-8]), 0.01)  # (4,)
print(f"Adam's first step for g = 1e-3, -5, 200 at lr 0.01: {step1[:3].round(6)}: about -lr * sign(g) whatever "
      f"|g| is, until |g| comes near eps: g = 1e-8 gives {step1[3]:.6f}")
assert np.allclose(step1[:3], -0.01 * np.sign([1e-3, -5.0, 200.0]), rtol=1e-3) and abs(step1[3]) < 0.006

# %% [markdown]
# ## Recap
# - BERT = embeddings -> L post-LN blocks -> NSP head on `[CLS]` + MLM head at masked positions.
# - The loss is `mlm_loss + nsp_loss`; a fresh model starts near `ln V + ln 2`.
# - The backward is the forward read bottom-up; wherever one value feeds two, the gradients add:
#   the tied `tok_emb` (lookup and decoder), `[CLS]`'s row (pooler and MLM head), and every row a
#   lookup or a gather reads twice. The sampled check of every tensor proves your whole backward,
#   and overfitting one batch proves the model can learn.
#
# **Next: lesson 11**, pretraining a tiny BERT for real: BERT's AdamW, warmup and decay, and
# loss curves on a real corpus.

# %%
print("lesson 10 passed")
