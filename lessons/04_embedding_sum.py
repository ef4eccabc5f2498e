# %% [markdown]
# # Lesson 04: the embedding sum (token + segment + position)
#
# **Goal.** Turn token ids into BERT's first hidden states. BERT adds three looked-up vectors
# for every position: *which token* it is, *which segment* (sentence A or B) it belongs to, and
# *where* it is (its position 0, 1, 2, ...). LayerNorm (lesson 02) follows.
#
# **Finish line.** A backward that scatters gradients back into the three tables, equal to the
# numerical gradient and to `minibert.layers.embedding_backward`, including token ids that
# repeat. You will also watch the most common embedding bug (`dW[ids] += dout`) fail the check.

# %% [markdown]
# ## Setup
# Shape legend: `B` batch, `T` tokens per sequence, `C` hidden size, `V` vocabulary size,
# `TV` number of segment types (2: A and B), `MAXPOS` the largest supported `T`.
# A sentence pair is fed as `[CLS] a1 a2 [SEP] b1 b2 [SEP]`; segment id 0 marks `[CLS]`, A and
# its `[SEP]`, segment id 1 marks B and its `[SEP]`.

# %%
import numpy as np

from minibert import gradcheck, layers

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
# ## Backward, line by line
# `np.add.at(table, ids, values)` adds `values[i]` into `table[ids[i]]` for every `i`, *including
# repeats*. The tempting `dtable[ids] += values` does not: for a repeated id, NumPy performs
# the writes one after another from the same starting value, so only one of them survives.

# %%
fwd = lambda: layers.embedding_forward(input_ids, segment_ids, tok_emb, seg_emb, pos_emb)[0]  # noqa: E731
# forward was: out = tok + seg + pos
dtok_rows, dseg_rows = dout, dout  # (B, T, C) a sum passes the gradient to every term unchanged
dpos_rows = dout.sum(axis=0)  # (T, C) pos was broadcast over the batch
# forward was: tok = tok_emb[input_ids]
dtok = np.zeros((V, C))  # (V, C)
np.add.at(dtok, input_ids.reshape(-1), dtok_rows.reshape(-1, C))  # scatter-add (B*T, C) rows
assert gradcheck.compare("dtok_emb (np.add.at)", dtok, gradcheck.numerical_grad(fwd, tok_emb, dout))
# forward was: seg = seg_emb[segment_ids]
dseg = np.zeros((TV, C))  # (TV, C)
np.add.at(dseg, segment_ids.reshape(-1), dseg_rows.reshape(-1, C))
assert gradcheck.compare("dseg_emb", dseg, gradcheck.numerical_grad(fwd, seg_emb, dout))
# forward was: pos = pos_emb[:T]
dpos = np.zeros((MAXPOS, C))  # (MAXPOS, C) rows T.. were not used: gradient 0
dpos[:T] = dpos_rows
assert gradcheck.compare("dpos_emb", dpos, gradcheck.numerical_grad(fwd, pos_emb, dout))

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
# NumPy would silently wrap a negative id around to the end of the table. minibert checks ids
# and raises an error that names the bad value and the limit.

# %%
try:
    layers.embedding_forward(np.array([[0, V]]), np.zeros((1, 2), int), tok_emb, seg_emb, pos_emb)
    raise AssertionError("an id equal to V should be rejected")
except ValueError as err:
    print("ValueError:", err)
    assert str(V) in str(err)

# %% [markdown]
# ## Discussion
# - `EmbeddingCache` holds the two id arrays and the three table shapes: nothing of size `C`.
#   The tables themselves are not needed, since the lookup is linear in them.
# - `dtok_emb` is mostly zeros (only ids in the batch get gradient). Real BERT has `V = 30522`,
#   so it is a big dense array of zeros; sparse updates are an optimization minibert skips.
# - In the full model the token table is *also* the MLM output matrix (tied weights, lesson 10),
#   so its gradient will be this scatter **plus** the decoder's contribution.

# %% [markdown]
# ## Try it yourself
# 1. `my_embedding_backward(dout, ids, V)`: the token-table gradient, using `np.add.at`.
# 2. `my_onehot_backward(dout, ids, V)`: the same gradient as a matrix product,
#    `onehot(ids).T @ dout`: a lookup is a multiplication by a one-hot matrix.
# 3. `my_segment_ids(tokens)`: given a list of token strings like
#    `["[CLS]", "a", "[SEP]", "b", "[SEP]"]`, return the segment ids `[0, 0, 0, 1, 1]`.

# %%
def my_embedding_backward(dout, ids, V):
    d = np.zeros((V, dout.shape[-1]))  # (V, C)  replace these lines with your own
    np.add.at(d, ids.reshape(-1), dout.reshape(-1, dout.shape[-1]))
    return d


def my_onehot_backward(dout, ids, V):
    onehot = np.eye(V)[ids.reshape(-1)]  # (B*T, V)  replace these lines with your own
    return onehot.T @ dout.reshape(-1, dout.shape[-1])  # (V, B*T) @ (B*T, C) -> (V, C)


def my_segment_ids(tokens):
    ids, seg = [], 0  # replace these lines with your own
    for tok in tokens:
        ids.append(seg)
        if tok == "[SEP]":
            seg = 1  # everything after the first [SEP] belongs to sentence B
    return ids


# %%
assert gradcheck.compare("exercise 1", my_embedding_backward(dout, input_ids, V), dtok_lib)
assert gradcheck.compare("exercise 2", my_onehot_backward(dout, input_ids, V), dtok_lib)
assert my_segment_ids(["[CLS]", "a1", "a2", "[SEP]", "b1", "b2", "[SEP]"]) == segment_ids[0].tolist(), "exercise 3"

# %% [markdown]
# ## Recap
# - The input to BERT's encoder is `LayerNorm(tok_emb[ids] + seg_emb[segs] + pos_emb[0..T-1])`.
# - Backward is a scatter-add: use `np.add.at`, never fancy-index `+=`.
#
# **Next: lesson 05**, attention: how each token mixes in information from the others, and how
# padding is kept out of it.

# %%
print("lesson 04 passed")
