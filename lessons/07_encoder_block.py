# %% [markdown]
# # Lesson 07: the post-LN encoder block
#
# **Goal.** Assemble one BERT encoder block ("transformer layer") from the layer functions of
# lessons 01-05, forward and backward. BERT stacks 12 of these (2 in our tiny models).
#
# **Finish line.** `block_forward` / `block_backward` written as mirror images; every gradient
# matches the numerical gradient; and on a 1-layer config the result equals minibert's own
# `minibert.model.encoder_forward` / `encoder_backward`, parameter by parameter.

# %% [markdown]
# ## Setup
# Shape legend: `B` batch, `T` tokens, `C` hidden size, `NH` heads, `HS = C // NH`,
# `FF` intermediate (feed-forward) size, usually `4 C`, `V` vocabulary size.
# We take the block's parameters from a real (tiny) model so the names match minibert's:
# `h0.attn.qkv.w`, `h0.ln1.w`, ... (`h0` = layer 0). Everything is float64 and perturbed away
# from the init (LayerNorm `w = 1`, `b = 0` would hide bugs, lesson 02). No dropout here.

# %%
from typing import Any, NamedTuple

import numpy as np

import course  # lessons/course.py: where pictures go, how exercises are graded
from minibert.analysis import gradcheck
from minibert import layers
from minibert.model import BertConfig, encoder_backward, encoder_forward, init_params, param_shapes

rng = np.random.default_rng(7)
cfg = BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                 intermediate_size=16, max_position_embeddings=12)
B, T, C, NH, FF = 2, 5, cfg.hidden_size, cfg.num_attention_heads, cfg.intermediate_size
eps = cfg.layer_norm_eps
params = init_params(cfg, seed=0, dtype=np.float64)
for p in params.values():
    p += 0.1 * rng.standard_normal(p.shape)  # random, not the ones/zeros of the init
attn_mask = np.array([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]])  # (B, T) one padded token
x = rng.standard_normal((B, T, C))  # (B, T, C) the block's input (in BERT: the embeddings)
print(gradcheck.HEADER)

# %% [markdown]
# ## The math (docs/bert-notes.md §4.6)
# BERT's block is *post-LN*: LayerNorm comes after each residual sum.
#
#     a  = MultiHeadAttention(x)          (lesson 05: linear, split heads, attention, merge, linear)
#     x1 = LayerNorm1(a + x)              residual connection, then normalize
#     h  = linear_out(GELU(linear_in(x1)))   the feed-forward network (FFN), C -> FF -> C
#     x2 = LayerNorm2(h + x1)
#
# Backward needs every sub-layer's cache. Two places fork: `x` feeds attention and the first
# residual; `x1` feeds the FFN and the second residual. At a fork, gradients add up.

# %%
# the picture of the block, with this lesson's shapes (the input at the bottom, as in the papers;
# how many parameters each box holds is exercise 3)
import matplotlib.pyplot as plt  # noqa: E402

boxes = [(f"x  (B, T, C) = {(B, T, C)}", "white"),
         (f"multi-head attention, {NH} heads of {C // NH}\nqkv C -> 3C, output projection C -> C", "#cfe2f3"),
         ("+ x, then LayerNorm 1\n= x1  (B, T, C)", "#fff2cc"),
         (f"feed-forward network: linear C -> FF = {FF},\nGELU, linear FF -> C", "#d9ead3"),
         ("+ x1, then LayerNorm 2\n= x2, the block's output  (B, T, C)", "#fff2cc")]
fig, ax = plt.subplots(figsize=(6, 5.5))
ax.axis("off")
course.flow(ax, boxes, x=0.4, width=0.5, skips=[(0, 2, "residual: x"), (2, 4, "residual: x1")])
ax.set_title("one post-LN encoder block (BERT): LayerNorm after each residual sum", fontsize=10)
course.show(fig, "07_encoder_block.png")

class MyBlockCache(NamedTuple):
    qkv: Any  # LinearCache, (B, T, C) -> (B, T, 3C)
    attn: Any  # AttentionCache, (B, NH, T, T) weights inside
    out: Any  # LinearCache of the attention output projection (B, T, C)
    ln1: Any  # LayerNormCache (B, T, C)
    ffn_in: Any  # LinearCache (B, T, C) -> (B, T, FF)
    gelu: Any  # GeluCache (B, T, FF)
    ffn_out: Any  # LinearCache (B, T, FF) -> (B, T, C)
    ln2: Any  # LayerNormCache (B, T, C)


def block_forward(x, p, attn_mask, pre="h0."):
    """One post-LN encoder block, one sub-layer per line. p: the params dict."""
    qkv, c_qkv = layers.linear_forward(x, p[pre + "attn.qkv.w"], p[pre + "attn.qkv.b"])  # (B, T, 3C)
    q, k, v = (layers.split_heads(t, NH) for t in np.split(qkv, 3, axis=-1))  # 3 x (B, NH, T, HS)
    a, c_att = layers.attention_forward(q, k, v, attn_mask)  # (B, NH, T, HS)
    a = layers.merge_heads(a)  # (B, NH, T, HS) -> (B, T, C)
    a, c_out = layers.linear_forward(a, p[pre + "attn.out.w"], p[pre + "attn.out.b"])  # (B, T, C)
    x1, c_ln1 = layers.layernorm_forward(a + x, p[pre + "ln1.w"], p[pre + "ln1.b"], eps)  # (B, T, C)
    h, c_in = layers.linear_forward(x1, p[pre + "ffn.in.w"], p[pre + "ffn.in.b"])  # (B, T, FF)
    h, c_gelu = layers.gelu_forward(h)  # (B, T, FF)
    h, c_fo = layers.linear_forward(h, p[pre + "ffn.out.w"], p[pre + "ffn.out.b"])  # (B, T, C)
    x2, c_ln2 = layers.layernorm_forward(h + x1, p[pre + "ln2.w"], p[pre + "ln2.b"], eps)  # (B, T, C)
    return x2, MyBlockCache(c_qkv, c_att, c_out, c_ln1, c_in, c_gelu, c_fo, c_ln2)


# %% [markdown]
# ## Backward, part 1: the feed-forward network (exercise 1)
# The block's backward reads the forward from the bottom up. Its middle is the FFN,
# `h = linear_out(GELU(linear_in(x1)))`: three layers whose backward functions you know from
# lesson 01 (`layers.linear_backward`, `layers.gelu_backward`). In which order do
# they run, and which cache goes with which? Write `my_ffn_backward(dh, c_in, c_gelu, c_fo)`,
# returning `(dx1, dw_in, db_in, dw_out, db_out)`; each of the five is graded on its own against
# the numerical gradient, and `block_backward` below uses your function. A stub left as it is
# makes the lesson go on with the reference solution (`lessons/solutions/07_encoder_block.py`).

# %%
ex = course.Exercises("07_encoder_block")


def my_ffn_backward(dh, c_in, c_gelu, c_fo):
    """dh (B, T, C) and the three caches -> dx1 (B, T, C), dw_in, db_in, dw_out, db_out"""
    raise NotImplementedError("exercise 1: backward through the feed-forward network")  # your code here


def ffn_forward(x):
    h1, ci = layers.linear_forward(x, params["h0.ffn.in.w"], params["h0.ffn.in.b"])  # (B, T, FF)
    h2, cg = layers.gelu_forward(h1)  # (B, T, FF)
    h3, cf = layers.linear_forward(h2, params["h0.ffn.out.w"], params["h0.ffn.out.b"])  # (B, T, C)
    return h3, (ci, cg, cf)


def check_ffn_backward(fn):
    r = np.random.default_rng(701)  # the grader's own input and upstream gradient, drawn now
    x, dh = r.standard_normal((B, T, C)), r.standard_normal((B, T, C))  # (B, T, C) each
    _, ffn_caches = ffn_forward(x)
    mine = fn(dh.copy(), *ffn_caches)
    names = ("dx1", "dw_in", "db_in", "dw_out", "db_out")
    wrt = (x, params["h0.ffn.in.w"], params["h0.ffn.in.b"], params["h0.ffn.out.w"], params["h0.ffn.out.b"])
    nums = tuple(gradcheck.numerical_grad(lambda: ffn_forward(x)[0], arr, dh) for arr in wrt)
    h1_0 = layers.linear_forward(x, params["h0.ffn.in.w"], params["h0.ffn.in.b"])[0]  # (B, T, FF) this x's

    def gelu_skipped(i):  # the FFN with its GELU replaced by a line of slope 1 through this point
        def line():
            h1 = layers.linear_forward(x, params["h0.ffn.in.w"], params["h0.ffn.in.b"])[0]  # (B, T, FF)
            h2 = layers.gelu_forward(h1_0)[0] + (h1 - h1_0)  # (B, T, FF)
            return layers.linear_forward(h2, params["h0.ffn.out.w"], params["h0.ffn.out.b"])[0]  # (B, T, C)
        return {"the GELU's backward skipped: the gradient reaches linear_in's backward as if GELU were the identity":
                gradcheck.numerical_grad(line, wrt[i], dh)}

    return [course.close(f"{name} vs numerical gradient", m, num,
                         wrongs=lambda i=i, name=name: {**course.out_of_order(names, nums, name), **gelu_skipped(i)})
            for i, (name, m, num) in enumerate(zip(names, mine, nums))]


my_ffn_backward = ex.grade(1, my_ffn_backward, check_ffn_backward,
                           paths=("dx1", "dw_in", "db_in", "dw_out", "db_out"),
                           allows=("layers.linear_backward", "layers.gelu_backward"))

# %% [markdown]
# ## Backward, part 2: the whole block, every gradient (exercise 2)
# Now the whole backward, as Karpathy's "backprop ninja" asks it: from `dx2` (the gradient of
# the loss w.r.t. the block's output) back to `dx`, naming every intermediate gradient on the way.
# Read `block_forward` above from the bottom up; each line undoes one forward line. Write
# `my_block_backward(dx2, c)`, `c` the `MyBlockCache` that `block_forward` returned, returning a
# dict with these names (in the order backward reaches them), the parameters' gradients under
# their names in the block, beside the gradient they come with (`"ln2.w"`, no `h0.` prefix):
#
#     dln2_in   (B, T, C)   LayerNorm 2's input h + x1        ln2.w, ln2.b     its parameters
#     dffn_out  (B, T, C)   the FFN's output h
#     dgelu_out (B, T, FF)  GELU's output (ffn.out's input)   ffn.out.w, ffn.out.b
#     dgelu_in  (B, T, FF)  GELU's input (ffn.in's output)    ffn.in.w, ffn.in.b
#     dx1       (B, T, C)   the first block half's output x1
#     dln1_in   (B, T, C)   LayerNorm 1's input a + x         ln1.w, ln1.b
#     dattn_out (B, T, C)   the attention output projection's output a
#     dcontext  (B, T, C)   its input: the heads' outputs, merged    attn.out.w, attn.out.b
#     dprobs    (B, NH, T, T)  the softmax probabilities `c.attn.att`
#     dscores   (B, NH, T, T)  the softmax's input: q k^T * scale + mask (`c.attn.scale`)
#     dq, dk, dv   (B, NH, T, HS)   the heads' queries, keys, values (`c.attn.q`, ...)
#     dqkv      (B, T, 3C)  the qkv projection's output (q, k, v merged, side by side)   attn.qkv.w, attn.qkv.b
#     dx        (B, T, C)   the block's input
#
# The layers of lessons 01-02 are there to compose (`layers.linear_backward`,
# `layers.gelu_backward`, `layers.layernorm_backward`); the attention's inside (lesson 05) is
# yours to derive: the heads split as `reshape(B, T, NH, HS)` then axes `(0, 2, 1, 3)`. Two
# places fork: where one value feeds two others, its gradients add up. The grade is a table,
# one row per name: `exact` (bit for bit), `close` (to 1e-5) and the largest difference; the
# first wrong one is diagnosed in words. A stub left as it is makes the lesson go on with the
# reference solution (`lessons/solutions/07_encoder_block.py`).

# %%
def my_block_backward(dx2, c):
    """dx2 (B, T, C) and the block's cache -> {name: gradient}, every name of the table above"""
    raise NotImplementedError("exercise 2: the whole block's backward")  # your code here


GRADIENT_HINTS = {  # what to ask yourself where a gradient is the first wrong one (questions, not answers)
    "dln2_in": "LayerNorm 2 is the block's last line: is its backward the first you run, with its own cache?",
    "dffn_out": "h enters LayerNorm 2 through a plain sum: what does a sum do to the gradient of each term?",
    "dgelu_out": "the FFN's output layer: is it its backward, with the ffn_out cache?",
    "dgelu_in": "GELU: did its backward get GELU's cache (and not a linear layer's)?",
    "dx1": "did you add the residual path's gradient? x1 feeds the FFN and the second residual sum",
    "dln1_in": "LayerNorm 1's backward: did it get the whole dx1, both of its paths?",
    "dattn_out": "a enters LayerNorm 1 through a plain sum: what does a sum do to the gradient of each term?",
    "dcontext": "the output projection: is it its backward, with its own cache?",
    "dprobs": "out = probs @ v per head: did you split dcontext into heads first, and which side does v go?",
    "dscores": "softmax: each probability depends on every score of its row; is the row's term there?",
    "dq": "scores = q k^T * scale: is the scale there, and k on the right side?",
    "dk": "scores = q k^T * scale: is the scale there, and is it the transpose of dscores?",
    "dv": "out = probs @ v: which side do probs go, and transposed?",
    "dqkv": "did you merge each of dq, dk, dv back to (B, T, C) and put them side by side in q, k, v order?",
    "dx": "did you add the residual path's gradient? x feeds the attention and the first residual sum",
}


def check_block_backward(fn):
    r = np.random.default_rng(702)  # the grader's own input and upstream gradient, drawn now
    x_, dx2_ = r.standard_normal((B, T, C)), r.standard_normal((B, T, C))  # (B, T, C) each
    _, c = block_forward(x_, params, attn_mask)
    want = ex.solution("my_block_backward")(dx2_.copy(), c)  # the reference, checked numerically below
    mine = fn(dx2_.copy(), c)
    probs = c.attn.att  # (B, NH, T, T)

    def mistakes():  # {name: {words: what that mistake gives there}}, run only when an answer is wrong
        return {"dx1": {"the residual path's gradient left out: x1 feeds the FFN and the residual sum, and dx1 is "
                        "the FFN's dx plus dln2_in": want["dx1"] - want["dln2_in"],
                        "the FFN's gradient left out: dx1 is dln2_in plus the FFN's dx": want["dln2_in"]},
                "dx": {"the residual path's gradient left out: x feeds the attention and the residual sum, and dx is "
                       "the qkv projection's dx plus dln1_in": want["dx"] - want["dln1_in"],
                       "the attention's gradient left out: dx is dln1_in plus the qkv projection's dx": want["dln1_in"]},
                "dscores": {"softmax's backward without its row-sum term: probs * dprobs alone treats each "
                            "probability as if it depended on its own score only": probs * want["dprobs"]}}

    return course.gradient_table(mine, want, mistakes, GRADIENT_HINTS, factors={"scale = 1/sqrt(HS)": c.attn.scale})


my_block_backward = ex.grade(2, my_block_backward, check_block_backward,
                             refuses=("layers.attention_backward", "model.encoder_backward"),
                             allows=("layers.linear_backward", "layers.gelu_backward", "layers.layernorm_backward"))


# %% [markdown]
# With your `my_block_backward`, the block's backward returns what the rest of the lesson needs:
# `dx` and the parameter gradients under the params' full names (`h0.ln1.w`, ...).

# %%
def block_backward(dx2, c: MyBlockCache, pre="h0."):
    d = my_block_backward(dx2, c)
    g = {pre + name: d[name] for name in d if not name.startswith("d")}  # the parameters' gradients
    return d["dx"], g


# %% [markdown]
# ## Check every gradient numerically
# We check all entries of `x` and of every block parameter (12 tensors, a few hundred numbers;
# each needs two forward passes, which takes about a second).

# %%
x2, cache = block_forward(x, params, attn_mask)
dx2 = rng.standard_normal(x2.shape)  # (B, T, C)
dx, g = block_backward(dx2, cache)
assert gradcheck.compare("block: dx", dx, gradcheck.numerical_grad(lambda: block_forward(x, params, attn_mask)[0], x, dx2))
for name in g:
    num = gradcheck.numerical_grad(lambda: block_forward(x, params, attn_mask)[0], params[name], dx2)
    assert gradcheck.compare(f"block: grad {name}", g[name], num)

# %% [markdown]
# ## The same block inside minibert's encoder
# `minibert.model.encoder_forward(params, cfg, input_ids, segment_ids, attn_mask)` runs the
# embedding sum and its LayerNorm (lessons 04, 02) and then `num_hidden_layers` blocks. With one
# layer, our block applied to `LayerNorm(embeddings)` must give the same output, and
# `encoder_backward` must give the same gradient for every block parameter. We pass
# `ops=layers` so minibert uses the NumPy reference (lesson 06 explains the Numba backend).

# %%
input_ids = rng.integers(0, cfg.vocab_size, size=(B, T))  # (B, T)
segment_ids = np.array([[0, 0, 1, 1, 0], [0, 0, 0, 1, 1]])  # (B, T)
emb, c_emb = layers.embedding_forward(input_ids, segment_ids, params["tok_emb"], params["seg_emb"], params["pos_emb"])  # (B, T, C)
x0, c_eln = layers.layernorm_forward(emb, params["emb_ln.w"], params["emb_ln.b"], eps)  # (B, T, C)
mine, my_cache = block_forward(x0, params, attn_mask)  # (B, T, C)
seq, enc_cache = encoder_forward(params, cfg, input_ids, segment_ids, attn_mask, ops=layers)  # (B, T, C)
assert gradcheck.compare("block output vs model.encoder_forward", mine, seq)
dseq = rng.standard_normal(seq.shape)  # (B, T, C)
lib_grads = encoder_backward(dseq, enc_cache, cfg, {}, ops=layers)
dx0, my_grads = block_backward(dseq, my_cache)
for name in my_grads:
    assert gradcheck.compare(f"grad {name} vs encoder_backward", my_grads[name], lib_grads[name])
# and through the embeddings, all the way back to the token table
de, _, _ = layers.layernorm_backward(dx0, c_eln)  # (B, T, C)
dtok, _, _ = layers.embedding_backward(de, c_emb)  # (V, C)
assert gradcheck.compare("dtok_emb vs model.encoder_backward", dtok, lib_grads["tok_emb"])

# %% [markdown]
# ## Discussion
# - The block cache is just the caches of its sub-layers. The largest pieces are the attention
#   weights `(B, NH, T, T)` and the FFN activations `(B, T, FF)` (stored twice: the GELU input in
#   `GeluCache` and the GELU output in the second `LinearCache`).
# - The residual connections are why the forks matter: without `dx = dx + dx_attn` the gradient
#   reaching earlier layers would lose its direct path, and the check above would fail.
# - minibert's real block (`model.encoder_forward`) also applies dropout after the attention
#   projection and after the FFN, and to the attention weights, when given an `rng`.

# %% [markdown]
# ## Exercises
# Replace each `raise NotImplementedError(...)` with your code and re-run; the cell after the
# stubs grades your functions and names the check that failed and by how much. A stub left as it
# is makes the lesson go on with the reference solution (`lessons/solutions/07_encoder_block.py`).
#
# (Exercises 1 and 2, the FFN's and the whole block's backward, came up in the backward sections.)
#
# 3. `my_block_param_count(C, FF)`: how many numbers does one block hold? (Attention: the `qkv`
#    and output projections, with biases; FFN: two linears; two LayerNorms.) Graded on this
#    lesson's block and on BERT-Base's (C = 768, FF = 3072), counted from the real parameter
#    shapes; the lesson prints BERT-Base's count after grading.
# 4. `my_stack_blocks(x, params, attn_mask, block, n_layers)`: run `n_layers` blocks one after
#    the other, layer `l` with the parameters `h{l}.*`: call
#    `block(x, params, attn_mask, pre=f"h{l}.")`, which returns `(output, cache)`. With this
#    lesson's `block_forward` it must equal minibert's 2-layer encoder.

# %%
def my_block_param_count(C, FF):
    """-> int: the number of parameters in one encoder block"""
    raise NotImplementedError("exercise 3: count a block's parameters")  # your code here


def my_stack_blocks(x, params, attn_mask, block, n_layers):
    """x (B, T, C) -> (B, T, C) after n_layers blocks"""
    raise NotImplementedError("exercise 4: stack the blocks")  # your code here


# %%
cfg2 = BertConfig(**{**cfg.to_dict(), "num_hidden_layers": 2})
params2 = init_params(cfg2, seed=1, dtype=np.float64)
seq2, _ = encoder_forward(params2, cfg2, input_ids, segment_ids, attn_mask, ops=layers)  # (B, T, C)
emb2 = layers.embedding_forward(input_ids, segment_ids, params2["tok_emb"], params2["seg_emb"], params2["pos_emb"])[0]
x0_2 = layers.layernorm_forward(emb2, params2["emb_ln.w"], params2["emb_ln.b"], eps)[0]  # (B, T, C)


def block_size(shapes):
    """The number of parameters of layer 0, from a {name: shape} table."""
    return sum(int(np.prod(s)) for n, s in shapes.items() if n.startswith("h0."))


base_config = BertConfig(hidden_size=768, intermediate_size=3072, num_attention_heads=12)  # BERT-Base


def block_parts(shapes):
    """{part of layer 0: its size}, from the shapes, for messages that name the part a count is off by."""
    h0 = {n[3:]: int(np.prod(s)) for n, s in shapes.items() if n.startswith("h0.")}
    linears = ("attn.qkv", "attn.out", "ffn.in", "ffn.out")
    return {"the linear layers' biases": sum(h0[f"{n}.b"] for n in linears),
            "the LayerNorms": sum(v for n, v in h0.items() if n.startswith("ln")),
            "the attention (qkv and output projection)": sum(v for n, v in h0.items() if n.startswith("attn.")),
            "the FFN": sum(v for n, v in h0.items() if n.startswith("ffn.")),
            "the qkv projection's biases": h0["attn.qkv.b"], "the output projection": h0["attn.out.w"] + h0["attn.out.b"]}


def check_block_param_count(fn):
    here, base = {n: p.shape for n, p in params.items()}, param_shapes(base_config)
    return [course.count("this lesson's block", fn(C, FF), block_size(here), block_parts(here)),
            course.count("BERT-Base (C=768, FF=3072)", fn(768, 3072), block_size(base), block_parts(base))]


def check_stack_blocks(fn):
    r = np.random.default_rng(7003)  # the grader's own sentences, drawn now: no lesson variable holds the answer
    ids, seg = r.integers(0, cfg2.vocab_size, size=input_ids.shape), r.integers(0, 2, size=input_ids.shape)
    emb = layers.embedding_forward(ids, seg, params2["tok_emb"], params2["seg_emb"], params2["pos_emb"])[0]
    x0 = layers.layernorm_forward(emb, params2["emb_ln.w"], params2["emb_ln.b"], eps)[0]  # (B, T, C)
    mine = fn(x0, params2, attn_mask, block_forward, 2)

    def run(*prefixes, x=x0):  # the blocks of `prefixes`, each fed the previous one's output
        for p in prefixes:
            x = block_forward(x, params2, attn_mask, pre=p)[0]
        return x

    def mistakes():  # the stacks that go wrong the usual ways, computed only when the answer is wrong
        return {"layer 0's parameters (h0.*) in every block: block l has its own, h{l}.*": run("h0.", "h0."),
                "layer 1's parameters (h1.*) in every block: block l has its own, h{l}.*": run("h1.", "h1."),
                "each block run on the input x, not on the block before's output (the last block's alone)": run("h1."),
                "one block only (layer 0's): the stack runs n_layers of them": run("h0."),
                "the layers in reverse order (h1.* first)": run("h1.", "h0.")}

    return [course.close("two blocks vs the 2-layer encoder", mine,
                         encoder_forward(params2, cfg2, ids, seg, attn_mask, ops=layers)[0], wrongs=mistakes)]


my_block_param_count = ex.grade(3, my_block_param_count, check_block_param_count,
                                refuses=("model.param_shapes", "model.init_params"))
my_stack_blocks = ex.grade(4, my_stack_blocks, check_stack_blocks,
                           refuses=("model.encoder_forward", "model.blocks_forward"))
print(f"one BERT-Base block holds {my_block_param_count(768, 3072):,} parameters")

# %% [markdown]
# ## Recap
# - Post-LN block: `x1 = LN(attn(x) + x)`, `x2 = LN(FFN(x1) + x1)`.
# - Backward is the forward read bottom-up; at every residual fork the two gradients add.
# - Our hand-assembled block equals `minibert.model.encoder_forward` / `encoder_backward`.
#
# **Next: lesson 08**, WordPiece: where the token ids come from. (Lesson 10 then puts the
# embeddings, the blocks and the two pretraining heads together into the whole BERT.)

# %%
print("lesson 07 passed")
