# %% [markdown]
# # Lesson 04: the embedding sum (token + segment + position)
#
# **Goal.** Turn token ids into BERT's first hidden states. BERT adds three looked-up vectors
# for every position: *which token* it is, *which segment* (sentence A or B) it belongs to, and
# *where* it is (its position 0, 1, 2, ...). LayerNorm (lesson 02) follows.
#
# **Finish line.** A backward that scatters gradients back into the three tables, equal to the
# numerical gradient and to `minibert.layers.embedding_backward`, including token ids that
# repeat. You will also watch the most common embedding bug (`dW[ids] += dout`) fail the check,
# and draw BERT's input representation (the paper's Figure 2) from real tensors.

# %% [markdown]
# ## Setup
# Shape legend: `B` batch, `T` tokens per sequence, `C` hidden size, `V` vocabulary size,
# `TV` number of segment types (2: A and B), `MAXPOS` the largest supported `T`.
# A sentence pair is fed as `[CLS] a1 a2 [SEP] b1 b2 [SEP]`; segment id 0 marks `[CLS]`, A and
# its `[SEP]`, segment id 1 marks B and its `[SEP]`.

# %%
import matplotlib.pyplot as plt
import numpy as np

import course  # lessons/course.py: where pictures go, how exercises are graded
from course import show
from minibert.analysis import gradcheck
from minibert import layers

rng = np.random.default_rng(4)
V, TV, MAXPOS, C = 7, 2, 10, 5
CLS, SEP = 2, 3  # pretend ids of the special tokens in this toy vocabulary
input_ids = np.array([[CLS, 5, 6, SEP, 5, 5, SEP],
                      [CLS, 4, SEP, 6, 6, 4, SEP]])  # (B, T) ids repeat on purpose
segment_ids = np.array([[0, 0, 0, 0, 1, 1, 1],
                        [0, 0, 0, 1, 1, 1, 1]])  # (B, T)
B, T = input_ids.shape
tok_emb = rng.standard_normal((V, C))  # (V, C)
seg_emb = rng.standard_normal((TV, C))  # (TV, C)
pos_emb = rng.standard_normal((MAXPOS, C))  # (MAXPOS, C)
print(gradcheck.HEADER)

# %% [markdown]
# ## The math
# For sequence `b` and position `t`:
#
#     out[b, t] = tok_emb[input_ids[b, t]] + seg_emb[segment_ids[b, t]] + pos_emb[t]
#
# A lookup `tok_emb[ids]` copies rows. Its backward sends each `dout[b, t]` back to the row it
# was copied from, and rows used several times receive the **sum** of their gradients. Backward
# needs only the ids and the table shapes, not the tables themselves.
# (BERT does not scale embeddings by `sqrt(C)`, unlike the original Transformer.)

# %%
# forward, one op per line
tok = tok_emb[input_ids]  # (V, C)[(B, T)] -> (B, T, C)
seg = seg_emb[segment_ids]  # (TV, C)[(B, T)] -> (B, T, C)
pos = pos_emb[:T]  # (T, C) positions 0..T-1, the same for every sequence
out = tok + seg + pos  # (B, T, C) pos is broadcast over B
out_lib, cache = layers.embedding_forward(input_ids, segment_ids, tok_emb, seg_emb, pos_emb)
assert np.array_equal(out, out_lib)
dout = rng.standard_normal(out.shape)  # (B, T, C)

# %% [markdown]
# ## Picture: BERT's input representation (the paper's Figure 2)
# The paper draws its input as three rows of embeddings added position by position. Here is the
# same picture from real tensors: the paper's example pair, a small vocabulary of its tokens,
# random tables with `C = 12`, and `layers.embedding_forward`. Each column is one position's
# `(C,)` vector, colour = value. The token row changes with every token (`dog` and `he` differ),
# the segment row has only two different columns (`E_A` up to the first `[SEP]`, `E_B` after),
# the position row has a different column at every position, and the bottom row is their sum,
# what LayerNorm receives. Saved as `lessons/out/04_input_representation.png`.

# %%
pair = ["[CLS]", "my", "dog", "is", "cute", "[SEP]", "he", "likes", "play", "##ing", "[SEP]"]
pic_vocab = {tok: i for i, tok in enumerate(dict.fromkeys(["[PAD]", "[UNK]", *pair]))}  # token -> id
pic_ids = np.array([[pic_vocab[tok] for tok in pair]])  # (1, 11)
pic_segs = np.array([[0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1]])  # (1, 11) A: [CLS] my dog is cute [SEP]; B: the rest
pic_rng = np.random.default_rng(42)
C_pic = 12
pic_tok = pic_rng.standard_normal((len(pic_vocab), C_pic))  # (V_pic, C_pic)
pic_seg = pic_rng.standard_normal((2, C_pic))  # (2, C_pic)
pic_pos = pic_rng.standard_normal((16, C_pic))  # (16, C_pic)
pic_sum, _ = layers.embedding_forward(pic_ids, pic_segs, pic_tok, pic_seg, pic_pos)  # (1, 11, C_pic)
rows = [("token embeddings", pic_tok[pic_ids[0]], [f"E_{t}" for t in pair]),
        ("segment embeddings", pic_seg[pic_segs[0]], [f"E_{'AB'[s]}" for s in pic_segs[0]]),
        ("position embeddings", pic_pos[:len(pair)], [f"E_{t}" for t in range(len(pair))]),
        ("sum (to LayerNorm)", pic_sum[0], ["" for _ in pair])]
assert np.allclose(rows[0][1] + rows[1][1] + rows[2][1], rows[3][1])
lim = np.abs(pic_sum).max()
fig, axes = plt.subplots(len(rows), 1, figsize=(11, 7.5), sharex=True, layout="constrained")
for ax, (title, vectors, labels), sign in zip(axes, rows, ["", "+", "+", "="]):
    im = ax.imshow(vectors.T, cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto")  # (C_pic, 11)
    ax.set_yticks([])
    ax.set_ylabel(f"{sign}   " + title.replace(" ", "\n", 1), rotation=0, ha="right", va="center", fontsize=9)
    for t, label in enumerate(labels):
        ax.text(t, -0.8, label, ha="center", va="bottom", fontsize=7)
axes[0].set_title("input: " + " ".join(pair), pad=18)
axes[-1].set_xticks(range(len(pair)), pair)
fig.colorbar(im, ax=axes, shrink=0.6, label="value")
show(fig, "04_input_representation.png")

# %% [markdown]
# ## Backward, line by line
# The sum passes `dout` unchanged to each of its three terms. The position term was broadcast
# over the batch, so its gradient sums over the batch; rows `T..MAXPOS-1` of the table were not
# used and get 0. The two lookups are the interesting part: each `dout[b, t]` must go back to the
# row it was copied from, and a row used several times must receive the **sum** of its
# gradients, *including repeats*. The tempting `dtable[ids] += values` does not: for a repeated
# id, NumPy performs the writes one after another from the same starting value, so only one
# survives. (A loop over the tokens does it right; NumPy also has an unbuffered in-place add,
# find it in its `ufunc` methods.) Writing the lookup's backward is exercise 1, right here: the
# lesson uses your function for the token table and the segment table.

# %%
fwd = lambda: layers.embedding_forward(input_ids, segment_ids, tok_emb, seg_emb, pos_emb)[0]  # noqa: E731
# forward was: out = tok + seg + pos;  pos = pos_emb[:T]
dpos = np.zeros((MAXPOS, C))  # (MAXPOS, C) rows T.. were not used: gradient 0
dpos[:T] = dout.sum(axis=0)  # (T, C) pos was broadcast over the batch
assert gradcheck.compare("dpos_emb", dpos, gradcheck.numerical_grad(fwd, pos_emb, dout))


# %% [markdown]
# **Exercise 1.** `my_embedding_backward(dout, ids, V)`: the gradient `(V, C)` of a table of `V`
# rows that `ids` `(B, T)` looked up, given `dout` `(B, T, C)`. The same function serves the
# token table (`V` rows) and the segment table (`TV` rows). A stub left as it is makes the lesson
# go on with the reference solution (`lessons/solutions/04_embedding_sum.py`).

# %%
ex = course.Exercises("04_embedding_sum")


def my_embedding_backward(dout, ids, V):
    """dout (B, T, C), ids (B, T) -> dtable (V, C)"""
    raise NotImplementedError("exercise 1: scatter-add the gradient into the table")  # your code here


def fresh_inputs(seed, Vg=8, Bg=3, Tg=6):
    """The grader's own ids (B, T), with repeats, segment ids, tables and dout, drawn now, and the
    forward for them: no lesson variable holds the answer for these."""
    r = np.random.default_rng(seed)
    ids = r.integers(0, Vg, (Bg, Tg))  # (Bg, Tg) Bg * Tg > Vg draws: some ids repeat
    segs = (np.arange(Tg) >= r.integers(2, Tg - 1, (Bg, 1))).astype(int)  # (Bg, Tg) 0s then 1s
    tabs = r.standard_normal((Vg, C)), r.standard_normal((TV, C)), r.standard_normal((MAXPOS, C))
    d = r.standard_normal((Bg, Tg, C))  # (Bg, Tg, C)
    forward = lambda: layers.embedding_forward(ids, segs, *tabs)[0]  # noqa: E731
    return ids, segs, tabs, d, forward


def check_embedding_backward(fn):
    ids, segs, (tk, sg, _), d, forward = fresh_inputs(4001)
    want_tok, want_seg = gradcheck.numerical_grad(forward, tk, d), gradcheck.numerical_grad(forward, sg, d)
    return [course.close("token table vs numerical gradient", fn(d, ids.copy(), len(tk)), want_tok,
                         wrongs=lambda: course.repeated_rows(ids, d, want_tok)),
            course.close("segment table vs numerical gradient", fn(d, segs.copy(), TV), want_seg,
                         wrongs=lambda: course.repeated_rows(segs, d, want_seg))]


my_embedding_backward = ex.grade(1, my_embedding_backward, check_embedding_backward,
                                 refuses=("layers.embedding_backward", "kernels.embedding_backward",
                                          "kernels.scatter_add_rows"))
dtok = my_embedding_backward(dout, input_ids, V)  # (V, C)
dseg = my_embedding_backward(dout, segment_ids, TV)  # (TV, C)

# %% [markdown]
# ## The classic bug
# Fancy-index `+=` drops repeated ids. Every id in this batch is used at least twice (`[SEP]`
# four times), so those rows come out wrong, and the check says so.

# %%
dtok_bug = np.zeros((V, C))  # (V, C)
dtok_bug[input_ids.reshape(-1)] += dout.reshape(-1, C)  # BUG: repeated ids keep only one write
assert not gradcheck.compare("dtok_emb (fancy +=, expected FAIL)", dtok_bug, dtok)
counts = np.bincount(input_ids.reshape(-1), minlength=V)  # (V,)
wrong = np.where(~np.isclose(dtok_bug, dtok).all(axis=1))[0]
print("rows that came out wrong:", wrong.tolist(), "use counts:", counts[wrong].tolist())
assert all(counts[wrong] > 1), "only repeated ids go wrong"

# %% [markdown]
# ## Fused backward, and minibert's version
# There is little to fuse: `minibert.layers.embedding_backward` does exactly these three
# scatters and returns `(dtok_emb, dseg_emb, dpos_emb)`.

# %%
dtok_lib, dseg_lib, dpos_lib = layers.embedding_backward(dout, cache)
for name, mine, lib in (("dtok_emb", dtok, dtok_lib), ("dseg_emb", dseg, dseg_lib), ("dpos_emb", dpos, dpos_lib)):
    assert gradcheck.compare(f"{name} vs layers.embedding_backward", mine, lib)

# %% [markdown]
# ## Out-of-range ids fail loudly
# Plain NumPy indexing accepts a negative id without a word: `tok_emb[-1]` is the *last* row, so
# a bug that produces id -1 would quietly read, and train, the embedding of another token. An id
# of `V` or more is an `IndexError` in NumPy already, but one that does not say which input held
# it. minibert checks both before the lookup and raises a `ValueError` that names the input, the
# bad value and the limit.

# %%
wrapped = tok_emb[np.array([[0, -1]])]  # (1, 2, C) NumPy: no error
print("NumPy: tok_emb[-1] is row", V - 1, "->", np.array_equal(wrapped[0, 1], tok_emb[V - 1]))
assert np.array_equal(wrapped[0, 1], tok_emb[V - 1])
for bad in (-1, V):
    try:
        layers.embedding_forward(np.array([[0, bad]]), np.zeros((1, 2), int), tok_emb, seg_emb, pos_emb)
        raise AssertionError(f"id {bad} should be rejected")
    except ValueError as err:
        print(f"minibert, id {bad}: ValueError: {err}")
        assert str(bad) in str(err) and str(V) in str(err)

# %% [markdown]
# ## Discussion
# - `EmbeddingCache` holds the two id arrays and the three table shapes: nothing of size `C`.
#   The tables themselves are not needed, since the lookup is linear in them.
# - `dtok_emb` is mostly zeros (only ids in the batch get gradient). Real BERT has `V = 30522`,
#   so it is a big dense array of zeros; sparse updates are an optimization minibert skips.
# - In the full model the token table is *also* the MLM output matrix (tied weights, lesson 10),
#   so its gradient will be this scatter **plus** the decoder's contribution.

# %% [markdown]
# ## Exercises
# Replace each `raise NotImplementedError(...)` with your code and re-run; the cell after the
# stubs grades your functions and names the check that failed and by how much. A stub left as it
# is makes the lesson go on with the reference solution (`lessons/solutions/04_embedding_sum.py`).
#
# (Exercise 1, the scatter-add backward, came up in the backward section.)
#
# 2. `my_onehot_backward(dout, ids, V)`: the same gradient as exercise 1 as a matrix product,
#    `onehot(ids).T @ dout`: a lookup is a multiplication by a one-hot matrix. Build the
#    one-hot matrix of the ids, then one product.
# 3. `my_segment_ids(tokens)`: given token strings like `["[CLS]", "a", "[SEP]", "b", "[SEP]"]`,
#    return the segment ids `[0, 0, 0, 1, 1]` (0 up to and including the first `[SEP]`).

# %%
def my_onehot_backward(dout, ids, V):
    """dout (B, T, C), ids (B, T) -> dtok_emb (V, C), as onehot(ids).T @ dout"""
    raise NotImplementedError("exercise 2: write the gradient as a matrix product")  # your code here


def my_segment_ids(tokens):
    """list of token strings -> list of 0/1 segment ids"""
    raise NotImplementedError("exercise 3: assign segment ids")  # your code here


# %%
def check_onehot_backward(fn):
    ids, _, (tk, _, _), d, forward = fresh_inputs(4002)
    return [course.close("token table vs numerical gradient", fn(d, ids.copy(), len(tk)),
                         gradcheck.numerical_grad(forward, tk, d))]


def check_segment_ids(fn):
    r = np.random.default_rng(4003)
    na, nb = r.integers(2, 7, 2)  # the lengths of the two sides, drawn now
    drawn = ["[CLS]", *(f"a{i}" for i in range(na)), "[SEP]", *(f"b{i}" for i in range(nb)), "[SEP]"]
    return [course.equal("lesson pair", fn(["[CLS]", "a1", "a2", "[SEP]", "b1", "b2", "[SEP]"]),
                         [0, 0, 0, 0, 1, 1, 1]),
            course.equal("the paper's pair", fn(list(pair)), [0] * 6 + [1] * 5),
            course.equal(f"a drawn pair, sides of {na} and {nb} tokens", fn(drawn), [0] * (na + 2) + [1] * (nb + 1)),
            course.equal("one-token sides", fn(["[CLS]", "x", "[SEP]", "y", "[SEP]"]), [0, 0, 0, 1, 1])]


my_onehot_backward = ex.grade(2, my_onehot_backward, check_onehot_backward,
                              refuses=("layers.embedding_backward", "kernels.embedding_backward",
                                       "kernels.scatter_add_rows"))
my_segment_ids = ex.grade(3, my_segment_ids, check_segment_ids)

# %% [markdown]
# ## Recap
# - The input to BERT's encoder is `LayerNorm(tok_emb[ids] + seg_emb[segs] + pos_emb[0..T-1])`.
# - Backward is a scatter-add: use `np.add.at`, never fancy-index `+=`.
#
# **Next: lesson 05**, attention: how each token mixes in information from the others, and how
# padding is kept out of it.

# %%
print("lesson 04 passed")
