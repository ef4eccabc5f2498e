# %% [markdown]
# # Lesson 21: XLNet's permutation language model, drawn as masks
#
# **Goal.** BERT predicts masked tokens from both sides but never sees `[MASK]` at fine-tuning
# time, and it predicts the masked tokens independently of each other. A left-to-right model
# (lesson 17's GPT-like baseline) has neither problem but sees one side only. XLNet keeps a
# language model's product of conditionals and still gets both sides: it predicts the tokens in
# a random **factorisation order** z,
#
#     p(x) = prod_t p(x_{z_t} | x_{z_1}, ..., x_{z_{t-1}})
#
# and, averaged over orders, every token is predicted from every subset of the others. Nothing is
# shuffled in the input: the order is only a pair of attention masks over the sentence as it is.
# Predicting x_{z_t} needs to know *where* z_t is but must not see *what* it is; one stream of
# hidden states cannot do both, so XLNet runs two streams through the same weights.
#
# **Finish line.**
# 1. The content and query masks of two orders of the same sentence, built and drawn.
# 2. Both failure modes of a single stream shown with numbers: it sees its own token, or it
#    cannot tell which position it predicts.
# 3. The two-stream attention of `minibert.family.xlnet` passes a float64 gradient check, and
#    under a fixed order its query output ignores the target's own token.
# 4. A tiny XLNet with partial prediction (the last 1/K of the order) learns a toy corpus.

# %%
import numpy as np

import course  # lessons/course.py: where pictures go, how exercises are graded
from course import FAST
from minibert.analysis import gradcheck
from minibert.family import xlnet
from minibert.family.xlnet import XLNetConfig, XLNetForPermutationLM

rng = np.random.default_rng(21)
words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "list", "is", "sorted", "in", "place"]
sentence = ["the", "list", "is", "sorted", "in", "place"]
ids = np.array([[words.index(w) for w in sentence]])  # (1, T)
T = ids.shape[1]
mask = np.ones((1, T), dtype=np.int64)  # (1, T) no padding

# %% [markdown]
# ## 1. An order is a pair of masks
# An order z lists the positions in the order they are predicted. Its **rank** says, for each
# position, at which step it comes: `rank[z_t] = t`. Then, for query position i and key j:
#
# - content stream h_i: sees j when `rank[j] <= rank[i]` (itself and what came before it);
# - query stream g_i: sees j when `rank[j] < rank[i]` (only what came before; never itself).
#
# The left-to-right order z = (0, 1, ..., T-1) gives back a GPT's causal mask (content stream);
# any other order gives another triangle, scattered over the sentence.
#
# **Exercise 1.** `my_two_stream_masks(order)`: from an order z (a permutation of 0..T-1, the
# positions in the order they are predicted), the content and query masks, `(T, T)` bool each,
# entry `[i, j]` True when position i may read position j. Careful: the order lists positions by
# step, the rule compares steps by position. No loop over `i` and `j`. The grader names the first
# entry that breaks the rule; the pictures below are drawn from your masks. A stub left as it is
# makes the lesson go on with the reference solution (`lessons/solutions/21_permutation_lm.py`).

# %%
ex = course.Exercises("21_permutation_lm")


def my_two_stream_masks(order):
    """order (T,) a permutation -> content (T, T) bool, query (T, T) bool"""
    raise NotImplementedError("exercise 1: build the two masks from the order")  # your code here


orders = {"left to right": np.arange(T), "z = (3, 1, 5, 0, 2, 4)": np.array([3, 1, 5, 0, 2, 4])}


def check_masks(fn):
    results = []
    for name, z in [*orders.items(), ("a random order of 9", np.random.default_rng(2101).permutation(9))]:
        step = {int(position): t for t, position in enumerate(z)}  # the definition: position z[t] comes at step t
        n = len(z)
        content = np.array([[step[j] <= step[i] for j in range(n)] for i in range(n)])  # (n, n)
        query = np.array([[step[j] < step[i] for j in range(n)] for i in range(n)])  # (n, n)

        def rule(idx, strict, z=z, step=step):
            i, j = idx
            sign = "<" if strict else "<="
            return (f"order {tuple(int(t) for t in z)} puts position {i} at step {step[i]} and position {j} at step "
                    f"{step[j]}; {'query' if strict else 'content'} stream: i reads j only if step[j] {sign} step[i]")

        got_c, got_q = fn(z)
        results += [course.mask(f"content mask, {name}", got_c, content, lambda idx, r=rule: r(idx, False)),
                    course.mask(f"query mask, {name}", got_q, query, lambda idx, r=rule: r(idx, True))]
    return results


my_two_stream_masks = ex.grade(1, my_two_stream_masks, check_masks,
                               refuses=("family.xlnet.two_stream_masks",))

# %%
masks = {}
for name, z in orders.items():
    content, query = my_two_stream_masks(z)  # (T, T) each: yours
    rank = query.sum(axis=1)  # (T,) position i reads the rank[i] positions before it: its step in the order
    lib_content, lib_query = xlnet.two_stream_masks(rank[None], mask)  # (1, T, T) each: the library's, from the rank
    assert (content == lib_content[0]).all() and (query == lib_query[0]).all()
    masks[name] = (rank, content, query)
    print(f"{name}: rank {rank.tolist()}; query stream of {sentence[z[-1]]!r} (last) sees "
          f"{[sentence[j] for j in np.flatnonzero(query[z[-1]])]}")
    assert (np.diagonal(content) == 1).all() and not np.diagonal(query).any()
    assert (rank[z] == np.arange(T)).all()  # position z_t comes at step t
rank_lr, content_lr, _ = masks["left to right"]
assert (content_lr == np.tril(np.ones((T, T), dtype=bool))).all()  # GPT's causal mask

# %%
import matplotlib.pyplot as plt  # noqa: E402

fig, axes = plt.subplots(2, 2, figsize=(10, 8.5), layout="constrained")
for row, (name, (rank, content, query)) in enumerate(masks.items()):
    for col, (stream, m) in enumerate((("content stream", content), ("query stream", query))):
        ax = axes[row, col]
        im = ax.imshow(m, cmap="Blues", vmin=0, vmax=1.3)
        ax.set_xticks(range(T), sentence, rotation=45)
        ax.set_yticks(range(T), [f"{w} ({r})" for w, r in zip(sentence, rank)])
        ax.set_title(f"{stream}, {name}", fontsize=10)
        ax.set_xlabel("key (what is read)")
        if col == 0:
            ax.set_ylabel("query (rank in the order)")
cbar = fig.colorbar(im, ax=axes, shrink=0.6)
cbar.set_ticks([0, 1], labels=["hidden", "read"])
course.show(fig, "21_permutation_masks.png")

# %% [markdown]
# ## 2. Why one stream is not enough
# Take one layer of attention over the embeddings and predict x_{z_t} from the state at z_t.
#
# **Failure A: the content stream sees the answer.** h_{z_t} reads position z_t itself
# (content mask), so its state depends on the very token it should predict: a model could copy
# it and reach zero loss while learning nothing.
#
# **Failure B: without its own content, a state does not know where it is.** Hide position z_t
# from itself (the query mask) but keep only content: the state is built from the earlier tokens
# alone. Two orders that share a prefix, z = (3, 1, 5, ...) and z' = (3, 1, 0, ...), then ask for
# x_5 = "place" and x_0 = "the" from exactly the same inputs, and must give the same distribution
# to both. XLNet's query stream starts from a learned vector plus the target's **position**
# embedding (minibert uses absolute positions; the paper uses relative ones), so it knows where,
# and not what.

# %%
cfg = XLNetConfig(vocab_size=len(words), hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=16, max_position_embeddings=T, pred_k=3)
params = {k: rng.standard_normal(v.shape) for k, v in xlnet.init_params(cfg, 0, np.float64).items()}  # unit scale
p = {k: params[k] for k in ("h0.attn.qkv.w", "h0.attn.qkv.b", "h0.attn.out.w", "h0.attn.out.b")}


def one_layer(token_ids, rank, start_g):
    """Two-stream attention over the embeddings: -> (a_h, a_g) (T, C) each."""
    e = params["tok_emb"][token_ids] + params["pos_emb"][:T]  # (1, T, C) what and where
    content, query = xlnet.two_stream_masks(rank[None], mask)  # (1, T, T)
    (a_h, a_g), _ = xlnet.two_stream_attention_forward(e, start_g[None], *p.values(), content, query, 2)
    return a_h[0], a_g[0]


rank_z = masks["z = (3, 1, 5, 0, 2, 4)"][0]
target = 5  # "place", third in the order
other = ids.copy()
other[0, target] = words.index("sorted")  # a different token at the target
g_pos = params["query_emb"] + params["pos_emb"][:T]  # (T, C) XLNet's start: where, not what
h1, g1 = one_layer(ids, rank_z, g_pos)
h2, g2 = one_layer(other, rank_z, g_pos)
leak = np.abs(h1[target] - h2[target]).max()
print(f"A. changing the target's own token moves the content state by {leak:.3f}, the query state by "
      f"{np.abs(g1[target] - g2[target]).max():.1e}")
assert leak > 1e-3 and np.abs(g1[target] - g2[target]).max() < 1e-12

z2 = np.array([3, 1, 0, 5, 4, 2])  # same prefix (3, 1), then position 0 instead of 5
rank_z2 = my_two_stream_masks(z2)[1].sum(axis=1)  # (T,) the step of each position, read off the query mask
g_what_only = np.broadcast_to(params["query_emb"], (T, cfg.hidden_size))  # (T, C) no position: content only
_, b1 = one_layer(ids, rank_z, g_what_only)
_, b2 = one_layer(ids, rank_z2, g_what_only)
same = np.abs(b1[5] - b2[0]).max()
_, q1 = one_layer(ids, rank_z, g_pos)
_, q2 = one_layer(ids, rank_z2, g_pos)
print(f"B. without a position, the states that predict 'place' (z) and 'the' (z') differ by {same:.1e}; "
      f"with the query stream's position they differ by {np.abs(q1[5] - q2[0]).max():.3f}")
assert same < 1e-12 and np.abs(q1[5] - q2[0]).max() > 1e-3

# %% [markdown]
# ## 3. Two-stream attention, forward and backward
# One set of weights serves both streams: `q_h = h Wq`, `q_g = g Wq`, and both attend to the
# content stream's keys and values `k = h Wk`, `v = h Wv`. So in the backward pass the gradients
# add up at three forks: Wq (both streams' queries), k and v (both attentions read them), and
# the output projection Wo. `minibert.family.xlnet.two_stream_attention_backward` writes each
# of them out; here it meets the numerical gradient, every entry of every input. (db_qkv's
# max_rel of 1 is harmless: it is the key bias, whose true gradient is 0, since adding one vector
# to every key shifts a row of scores by a constant, which softmax ignores; its max_abs is ~1e-10.)

# %%
B, C = 2, 6
rank2 = xlnet.sample_orders(np.ones((B, T), dtype=np.int64), rng)  # (B, T)
content, query = xlnet.two_stream_masks(rank2, np.ones((B, T), dtype=np.int64))
arrays = dict(h=rng.standard_normal((B, T, C)), g=rng.standard_normal((B, T, C)),
              w_qkv=0.5 * rng.standard_normal((C, 3 * C)), b_qkv=0.1 * rng.standard_normal(3 * C),
              w_out=0.5 * rng.standard_normal((C, C)), b_out=0.1 * rng.standard_normal(C))
dout_h, dout_g = rng.standard_normal((B, T, C)), rng.standard_normal((B, T, C))


def objective():
    (a_h, a_g), _ = xlnet.two_stream_attention_forward(*arrays.values(), content, query, 2)
    return np.sum(a_h * dout_h) + np.sum(a_g * dout_g)


_, cache = xlnet.two_stream_attention_forward(*arrays.values(), content, query, 2)
grads = xlnet.two_stream_attention_backward(dout_h, dout_g, cache, 2)
print(gradcheck.HEADER)
checks = [gradcheck.compare(f"two-stream attention: d{name}", g, gradcheck.numerical_grad_scalar(objective, x))
          for (name, x), g in zip(arrays.items(), grads)]
assert all(checks)

# %% [markdown]
# ## 4. Partial prediction and a tiny model that learns
# Early in an order a token has almost no context, and predicting it is mostly guessing. XLNet
# predicts only the last 1/K of each order, so every target sees at least (K - 1)/K of the
# sentence. The paper's base models use K = 6 (of 64 tokens the last 10, about BERT's 15%); the
# toy below uses K = 3 (`pred_k=3`: the last 2 of its 6 tokens), so that a sentence of six words
# still gives two targets a step.
# The head reads the query stream of the last layer at the targets and ties its decoder to the
# word embeddings, as BERT's MLM head does. A tiny model on four repeated sentences learns them.

# %%
target = xlnet.partial_targets(rank2, np.ones((B, T)), 3)  # (B, T) K = 3 of 6 tokens: the last 2
assert (target.sum(1) == 2).all() and (rank2[target] >= 4).all()
toy = [["the", "list", "is", "sorted", "in", "place"], ["the", "place", "is", "in", "the", "list"],
       ["sorted", "in", "place", "is", "the", "list"], ["the", "list", "is", "in", "place", "sorted"]]
toy_ids = np.array([[words.index(w) for w in s] for s in toy])  # (4, T)
model = XLNetForPermutationLM(XLNetConfig(**{**cfg.to_dict(), "hidden_size": 16, "intermediate_size": 32}),
                              seed=1, dtype=np.float64)
from minibert.optim import AdamW  # noqa: E402

opt = AdamW(model.params, lr=1e-2, weight_decay=0.0, bias_correction=True)
losses = []
for step in range(60 if FAST else 150):
    r = xlnet.sample_orders(np.ones_like(toy_ids), rng)  # a new order for every sentence, every step
    batch = {"input_ids": toy_ids, "input_mask": np.ones_like(toy_ids), "perm_rank": r,
             "target_mask": xlnet.partial_targets(r, np.ones_like(toy_ids), 3)}
    loss, grads = model.loss_and_grads(batch)
    opt.step(model.params, grads)
    losses.append(loss)
print(f"loss {np.mean(losses[:5]):.3f} (ln V = {np.log(len(words)):.3f}) -> {np.mean(losses[-10:]):.3f}")
assert np.mean(losses[-10:]) < 0.6 * np.mean(losses[:5])

# %% [markdown]
# On the real corpus: `python -m minibert train-xlnet` trains the `xlnet-tiny` preset in minutes
# and reports the held-out perplexity of the predicted tokens; docs/family.md ("XLNet") compares
# it with BERT-tiny's masked LM at the same budget.
#
# ## Exercises
# Replace each `raise NotImplementedError(...)` with your code and re-run; the cell after the
# stubs grades your functions and names the check that failed. A stub left as it is makes the
# lesson go on with the reference solution (`lessons/solutions/21_permutation_lm.py`).
#
# (Exercise 1, the two masks, came up in section 1.)
#
# 2. `my_query_attention_backward(dout, q, k, v, att, scale)`: the backward of the query
#    stream's attention `att = softmax(q k^T * scale + mask)`, `out = att @ v` for one head,
#    (T, HS) arrays and att (T, T) (0 at hidden keys; a row may be all 0). Return dq, dk, dv,
#    each graded on its own against the numerical gradient: `dv` is the value path, `dq` and `dk`
#    the score path through the softmax.
# 3. `my_two_stream_core_backward(dout_h, dout_g, q_h, q_g, k, v, att_h, att_g, scale)`: both
#    streams of section 3 at once, for one head: the content stream attends with `q_h`, the query
#    stream with `q_g`, both to the same `k` and `v`. Return `(dq_h, dq_g, dk, dv)`. `dk` and `dv`
#    are graded three times, with both streams' upstream gradients and with each stream's alone,
#    so a mistake in one stream's share is named.

# %%
def my_query_attention_backward(dout, q, k, v, att, scale):
    """dout, q, k, v (T, HS); att (T, T) -> dq, dk, dv (T, HS) each"""
    raise NotImplementedError("exercise 2: the backward of the query stream's attention")  # your code here


def my_two_stream_core_backward(dout_h, dout_g, q_h, q_g, k, v, att_h, att_g, scale):
    """dout_h, dout_g, q_h, q_g, k, v (T, HS); att_h, att_g (T, T) -> dq_h, dq_g, dk, dv (T, HS) each"""
    raise NotImplementedError("exercise 3: both streams' backward, k and v shared")  # your code here


# %%
ATT_NOT_TRANSPOSED = ("att @ dout, not att^T @ dout: dv[j] sums dout[i] over the queries i that read key j, "
                      "att[i, j], so the sum runs over att's first index")


def check_query_backward(fn):
    rng = np.random.default_rng(2102)  # the grader's own inputs, drawn now (the lesson's rng untouched)
    Tq, HS = 5, 3
    q, k, v = (rng.standard_normal((1, 1, Tq, HS)) for _ in range(3))
    r = rng.permutation(Tq)
    _, vis = xlnet.two_stream_masks(r[None], np.ones((1, Tq), dtype=np.int64))  # first row sees nothing
    out, cache = xlnet.masked_attention_forward(q, k, v, vis)
    dout = rng.standard_normal(out.shape)
    got = fn(dout[0, 0], q[0, 0], k[0, 0], v[0, 0], cache.att[0, 0], cache.scale)
    vv = v[0, 0].copy()  # (T, HS)
    qq, kk, seen = q[0, 0], k[0, 0], vis[0]  # (T, HS), (T, HS), (T, T) bool
    score_paths = {}  # d loss / d scores, and its part with each row's normaliser frozen: computed once, if needed

    def score_grads():
        if not score_paths:
            scores = qq @ kk.T * cache.scale  # (T, T)
            top = scores.max(-1, keepdims=True)  # (T, 1) a constant shift for a stable exp: it cancels in att

            def from_scores(normaliser=None):  # att @ v from the scores, as the forward masks them
                e = np.exp(scores - top) * seen  # (T, T)
                z = e.sum(-1, keepdims=True) if normaliser is None else normaliser  # (T, 1)
                return e / np.where(z > 0, z, 1.0) @ vv

            z0 = (np.exp(scores - top) * seen).sum(-1, keepdims=True)  # (T, 1)
            score_paths["full"] = gradcheck.numerical_grad(from_scores, scores, dout[0, 0])  # (T, T)
            score_paths["frozen"] = gradcheck.numerical_grad(lambda: from_scores(z0), scores, dout[0, 0])
        return score_paths["full"], score_paths["frozen"]

    sum_term = "the term through the softmax's sum (each score also moves its row's normaliser)"

    def slips(name):  # the usual slips of each gradient, for close's wrongs and terms
        if name == "v":  # the gradient of att^T @ v: att read the other way round
            return {ATT_NOT_TRANSPOSED: gradcheck.numerical_grad(lambda: cache.att[0, 0].T @ vv, vv, dout[0, 0])}, {}
        ds, frozen = score_grads()
        if name == "q":
            return ({"dscores^T @ k where dscores @ k belongs: dq[i] sums over the keys j that query i scores, "
                     "dscores[i, j]": ds.T @ kk * cache.scale}, {sum_term: (ds - frozen) @ kk * cache.scale})
        return ({"dscores @ q where dscores^T @ q belongs: dk[j] sums over the queries i that score key j, "
                 "dscores[i, j]": ds @ qq * cache.scale}, {sum_term: (ds - frozen).T @ qq * cache.scale})

    results = []
    for name, x, g in zip("qkv", (q, k, v), got):
        num = gradcheck.numerical_grad(lambda: xlnet.masked_attention_forward(q, k, v, vis)[0], x, dout)
        results.append(course.close(f"d{name} vs numerical gradient", np.asarray(g), num[0, 0],
                                    factors={"scale": cache.scale, "scale^2": cache.scale ** 2},
                                    wrongs=lambda name=name: slips(name)[0], terms=lambda name=name: slips(name)[1]))
    return results


def check_two_stream_core(fn):
    rng = np.random.default_rng(2103)  # the grader's own inputs, drawn now (the lesson's rng untouched)
    Tq, HS = 5, 3
    q_h, q_g, k, v = (rng.standard_normal((1, 1, Tq, HS)) for _ in range(4))
    content, query = xlnet.two_stream_masks(rng.permutation(Tq)[None], np.ones((1, Tq), dtype=np.int64))
    _, c_h = xlnet.masked_attention_forward(q_h, k, v, content)
    _, c_g = xlnet.masked_attention_forward(q_g, k, v, query)
    dh, dg = rng.standard_normal((Tq, HS)), rng.standard_normal((Tq, HS))

    def numerical(x, dout_h, dout_g):
        def both():  # what both streams' outputs contribute: sum(out_h * dout_h) + sum(out_g * dout_g)
            out_h = xlnet.masked_attention_forward(q_h, k, v, content)[0][0, 0]
            out_g = xlnet.masked_attention_forward(q_g, k, v, query)[0][0, 0]
            return float((out_h * dout_h).sum() + (out_g * dout_g).sum())
        return gradcheck.numerical_grad_scalar(both, x)[0, 0]

    def grads(dout_h, dout_g):
        return fn(dout_h, dout_g, q_h[0, 0], q_g[0, 0], k[0, 0], v[0, 0], c_h.att[0, 0], c_g.att[0, 0], c_h.scale)

    zero = np.zeros((Tq, HS))
    both_streams, content_only, query_only = grads(dh, dg), grads(dh, zero), grads(zero, dg)
    results = [course.close("dq_h vs numerical gradient", both_streams[0], numerical(q_h, dh, dg)),
               course.close("dq_g vs numerical gradient", both_streams[1], numerical(q_g, dh, dg))]
    vv = v[0, 0].copy()  # (T, HS)

    def untransposed(dout_h, dout_g):  # the gradient of both streams' att^T @ v: att read the other way round
        both = lambda: float(((c_h.att[0, 0].T @ vv) * dout_h).sum() + ((c_g.att[0, 0].T @ vv) * dout_g).sum())  # noqa: E731
        return {ATT_NOT_TRANSPOSED: gradcheck.numerical_grad_scalar(both, vv)}

    for i, (name, x) in enumerate((("dk", k), ("dv", v)), start=2):
        w = name == "dv"
        results += [course.close(f"{name}, both streams, vs numerical gradient", both_streams[i], numerical(x, dh, dg),
                                 wrongs=untransposed(dh, dg) if w else None),
                    course.close(f"{name}, the content stream's share alone", content_only[i], numerical(x, dh, zero),
                                 wrongs=untransposed(dh, zero) if w else None),
                    course.close(f"{name}, the query stream's share alone", query_only[i], numerical(x, zero, dg),
                                 wrongs=untransposed(zero, dg) if w else None)]
    return results


my_query_attention_backward = ex.grade(2, my_query_attention_backward, check_query_backward, paths=("dq", "dk", "dv"),
                                       refuses=("family.xlnet.masked_attention_backward",
                                                "family.xlnet.two_stream_attention_backward",
                                                "layers.attention_backward", "kernels.attention_backward"))
my_two_stream_core_backward = ex.grade(3, my_two_stream_core_backward, check_two_stream_core,
                                       paths=("dq_h", "dq_g", "dk", "dv"),
                                       refuses=("family.xlnet.masked_attention_backward",
                                                "family.xlnet.two_stream_attention_backward",
                                                "layers.attention_backward", "kernels.attention_backward"))

# %% [markdown]
# ## Recap
# A factorisation order is two masks; the content stream is a (scattered) causal encoder, the
# query stream predicts from the positions of the targets and the content of their prefix. Next,
# lesson 22 takes the other route out of BERT's encoder: T5's encoder-decoder.

# %%
print("lesson 21 passed")
