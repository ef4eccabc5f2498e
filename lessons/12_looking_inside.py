# %% [markdown]
# # Lesson 12: looking inside the trained model
#
# **Goal.** Use the tiny BERT from lesson 11 the way BERT is used: ask it to **fill in a
# `[MASK]`**, and look at **where its attention heads look**. Both are in `minibert.inspect`
# (`fill_mask`, `attention_maps`, `plot_attention`), and both are also commands:
# `python -m minibert fill-mask RUN_DIR "text with [MASK]"` and `python -m minibert attention`.
#
# **Finish line.** The fill-mask probabilities form a valid distribution and the top 5 are the
# 5 largest; the trained model gives the true word more probability than an untrained one;
# attention maps have shape `(layers, heads, T, T)` with rows summing to 1; in a padded batch,
# padded keys get exactly zero attention and padding does not change the real tokens' outputs.
# Pictures go to `lessons/out/12_attention/` and `lessons/out/12_fill_mask.png`.

# %% [markdown]
# ## Setup: the model from lesson 11
# Lesson 11 saved its model to `lessons/out/11_tiny_bert/` (`config.json`, `model.safetensors`,
# `vocab.txt`). If it is not there, we run lesson 11 first (in fast mode, about a minute).

# %%
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # tiny model: one thread is fastest (lesson 11)
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import math
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # save pictures to files, never open a window
import matplotlib.pyplot as plt
import numpy as np

from minibert import inspect, layers
from minibert.bert import BertForPreTraining
from minibert.model import encoder_forward

HERE = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
OUT = HERE / "out"
OUT.mkdir(exist_ok=True)
RUN_DIR = OUT / "11_tiny_bert"
if not (RUN_DIR / "model.safetensors").is_file():
    print(f"{RUN_DIR} not found: running lesson 11 (fast mode) to train the model")
    subprocess.run([sys.executable, str(HERE / "11_pretrain_tiny.py")], check=True,
                   env=dict(os.environ, MINIBERT_FAST="1", MPLBACKEND="Agg"))
model, tok = inspect.load_model_and_tokenizer(RUN_DIR)
cfg = model.config
print(f"model: {cfg.num_hidden_layers} layers, {cfg.num_attention_heads} heads, hidden "
      f"{cfg.hidden_size}, vocab {cfg.vocab_size}; {model.num_parameters:,} parameters")

# %% [markdown]
# ## Fill in the blank
# `fill_mask` puts the `[MASK]` id where the text says `[MASK]`, runs the model, and turns the
# MLM logits at that position into probabilities with a softmax over the whole vocabulary:
#
#     p(token | context) = softmax(mlm_logits[position])      # (V,), sums to 1
#
# We check that by hand: the distribution is valid and `fill_mask`'s top 5 are its 5 largest.

# %%
text = "the cat sat on the [MASK] mat ."
top5 = inspect.fill_mask(model, tok, text, k=5)[0]  # one list per [MASK]: (token, probability)
print(text)
for token, p in top5:
    print(f"  {token:12} {p:.3f}")
ids, positions = inspect.encode_with_masks(tok, text)
logits = model.forward(np.array([ids])).mlm_logits[0, positions[0]].astype(np.float64)  # (V,)
probs = np.exp(logits - logits.max())  # (V,)
probs /= probs.sum()  # (V,)
assert probs.shape == (cfg.vocab_size,) and np.all(probs >= 0) and math.isclose(probs.sum(), 1.0)
assert [t for t, _ in top5] == tok.convert_ids_to_tokens(np.argsort(-probs, kind="stable")[:5])
assert np.allclose([p for _, p in top5], np.sort(probs)[::-1][:5])
assert all(a >= b for (_, a), (_, b) in zip(top5, top5[1:]))  # sorted, most likely first

fig, ax = plt.subplots(figsize=(5, 3))
ax.barh([t for t, _ in top5][::-1], [p for _, p in top5][::-1])
ax.set_xlabel("probability")
ax.set_title(text, fontsize=9)
fig.tight_layout()
fig.savefig(OUT / "12_fill_mask.png")
plt.close(fig)

# %% [markdown]
# ## Did training help? Trained versus untrained
# Mask each word of a few training sentences in turn and average `log p(true word)`. An
# untrained model spreads probability almost evenly (about `-ln V`). Lesson 11's fast run (200
# steps) got only a little past the unigram plateau, so expect frequent words like `the` and
# `.` among the guesses next to a few context-driven ones, and a clear but modest gain; after
# its full run (1000 steps) the model has nearly memorised these sentences.

# %%
sentences = ["the cat sat on the warm mat .", "the yeast makes the dough rise .",
             "a piano has black and white keys .", "the moon moves around the earth ."]
untrained = BertForPreTraining(cfg, seed=1)


def mean_log_prob(m, sentences):
    """Average log p(word | the rest) over every word of every sentence, masked one at a time."""
    scores = []
    for s in sentences:
        ids = tok.convert_tokens_to_ids(["[CLS]", *tok.tokenize(s), "[SEP]"])
        for pos in range(1, len(ids) - 1):
            masked = list(ids)
            masked[pos] = tok.mask_id
            z = m.forward(np.array([masked])).mlm_logits[0, pos].astype(np.float64)  # (V,)
            scores.append(z[ids[pos]] - z.max() - np.log(np.exp(z - z.max()).sum()))  # log p
    return float(np.mean(scores))


trained_lp, untrained_lp = mean_log_prob(model, sentences), mean_log_prob(untrained, sentences)
print(f"mean log p(true word): trained {trained_lp:.2f}, untrained {untrained_lp:.2f}, "
      f"-ln V = {-math.log(cfg.vocab_size):.2f}")
assert abs(untrained_lp + math.log(cfg.vocab_size)) < 0.5
assert trained_lp > untrained_lp + 0.5

# %% [markdown]
# ## Attention maps
# `attention_maps` runs the encoder with the NumPy reference layers and keeps each layer's
# attention probabilities `att`: shape `(L, NH, T, T)`, row = the query token, column = the key
# token it attends to. Each row is a softmax, so it sums to 1. `plot_attention` draws one
# picture per layer (all heads side by side) and one per head.

# %%
result = inspect.attention_maps(model, tok, "the cat sat on the warm mat .",
                                "it watched the birds in the garden .")
L, NH, T = cfg.num_hidden_layers, cfg.num_attention_heads, len(result.tokens)
print(" ".join(result.tokens))
print("maps:", result.maps.shape)
assert result.maps.shape == (L, NH, T, T)
assert np.all(result.maps >= 0) and np.allclose(result.maps.sum(-1), 1.0, atol=1e-5)
paths = inspect.plot_attention(result, OUT / "12_attention")
print(f"wrote {len(paths)} PNGs to {paths[0].parent}")
assert len(paths) == L * (1 + NH) and all(p.is_file() for p in paths)
for layer in range(L):
    for head in range(NH):
        att = result.maps[layer, head]  # (T, T)
        favourite = att.argmax(-1)  # (T,) the key each query attends to most
        counts = np.bincount(favourite, minlength=T)  # (T,) how many queries favour each key
        print(f"layer {layer} head {head}: largest weight per row {att.max(-1).mean():.3f} on "
              f"average (uniform would be 1/T = {1 / T:.3f}); {counts.max()} of {T} queries "
              f"look most at {result.tokens[counts.argmax()]!r}")

# %% [markdown]
# **Reading the numbers and pictures.** If the largest weight in a row is close to `1/T`, the
# head spreads its attention evenly: it has not learned to pick out tokens, as in a model
# still on the unigram plateau (a model that predicts from word frequencies has no use for
# attention). Values near 1 mean each query looks at one key. In the pictures
# (`lessons/out/12_attention/layer*.png`) look for bright columns, where every query looks at
# the same token, often a fixed position, `.` or `[SEP]`. Such "sink" heads are common in real
# BERT too: a place to put attention when there is nothing useful to gather. Bright spots off
# the columns are queries that picked out a particular other word.

# %% [markdown]
# ## Padding: attention ignores padded keys
# In a batch, short sentences are padded to the longest with `[PAD]` and `attn_mask = 0`
# there. The mask adds -10000 to the scores of padded keys, so after the softmax their weight
# is exactly 0 (lesson 05). Consequence: a sentence's outputs at its real tokens do not depend
# on how much padding follows it.

# %%
def batch_of(texts):
    """Encode and pad: -> ids, segment ids, attn_mask, each (B, T_max)."""
    encoded = [tok.encode(t)[0] for t in texts]
    T_max = max(len(e) for e in encoded)
    ids = np.zeros((len(texts), T_max), dtype=np.int64)  # (B, T) [PAD] = 0
    mask = np.zeros((len(texts), T_max), dtype=np.int64)  # (B, T)
    for i, e in enumerate(encoded):
        ids[i, :len(e)], mask[i, :len(e)] = e, 1
    return ids, np.zeros_like(ids), mask


texts = ["we see the moon because it reflects the sun .", "bread ."]  # long, short
ids, seg, mask = batch_of(texts)
seq, cache = encoder_forward(model.params, cfg, ids, seg, mask, None, layers)  # (B, T, C)
n_real = int(mask[1].sum())  # real tokens of the short sentence
print(f"batch {ids.shape}; sentence 1 has {n_real} real tokens and {ids.shape[1] - n_real} [PAD]")
assert n_real < ids.shape[1], "the second sentence should be padded"
for block in cache.blocks:
    att = block.attn.att  # (B, NH, T, T)
    assert np.all(att[1, :, :, n_real:] == 0.0), "padded keys must get exactly zero weight"
alone_ids, alone_seg, alone_mask = batch_of(texts[1:])  # the short sentence alone, no padding
alone, _ = encoder_forward(model.params, cfg, alone_ids, alone_seg, alone_mask, None, layers)
diff = np.abs(seq[1, :n_real] - alone[0]).max()
print(f"max |difference| of its outputs, padded vs alone: {diff:.1e}")
assert np.allclose(seq[1, :n_real], alone[0], atol=1e-5), "padding changed the real outputs"

# %% [markdown]
# ## Discussion
# - What can a model this small, trained briefly on forty sentences, know? Word frequencies,
#   and some context: its guesses mix frequent words with context-driven ones. Train on real
#   text with `make train-tiny` (the default corpus) and ask `python -m minibert fill-mask
#   runs/tiny "..."`: the further the held-out loss falls below the unigram entropy, the more
#   the guesses depend on the context.
# - Attention maps are suggestive, not explanations: where a head looks says little about
#   what the model does with it, and a sink head may look busy while contributing nothing.
# - The padded query rows (the `[PAD]` positions themselves) are computed but never used;
#   only the keys need masking.

# %% [markdown]
# ## Try it yourself
# Each function ships with a working answer; replace the body with your own and re-run.
#
# 1. `my_top_k(logits, k)`: the k most likely token ids and their probabilities, most likely
#    first. It must agree with `inspect.fill_mask`.
# 2. `my_encode_with_masks(text)`: `[CLS]` + tokens + `[SEP]`, with the literal `[MASK]` turned
#    into the mask id (Google's tokenizer would split it into `[`, `mask`, `]`); returns ids and
#    mask positions like `inspect.encode_with_masks`.
# 3. `my_head_entropy(maps)`: the mean entropy of the attention rows of each head, shape
#    `(L, NH)`. A head that looks at one token has entropy 0; one that spreads evenly over `T`
#    tokens has `ln T`.

# %%
def my_top_k(logits, k):
    p = np.exp(logits - logits.max())  # replace these lines
    p /= p.sum()
    top = np.argsort(-p, kind="stable")[:k]
    return top, p[top]


def my_encode_with_masks(text):
    ids, positions = [tok.cls_id], []  # replace this body
    pieces = text.split("[MASK]")
    for i, piece in enumerate(pieces):
        ids += tok.convert_tokens_to_ids(tok.tokenize(piece))
        if i < len(pieces) - 1:
            positions.append(len(ids))
            ids.append(tok.mask_id)
    return ids + [tok.sep_id], positions


def my_head_entropy(maps):
    return -(maps * np.log(np.maximum(maps, 1e-30))).sum(-1).mean(-1)  # replace this line


# %%
top_ids, top_p = my_top_k(logits, 5)
assert tok.convert_ids_to_tokens(top_ids) == [t for t, _ in top5]
assert np.allclose(top_p, [p for _, p in top5])
for t in [text, "[MASK] bread smells [MASK] .", "no mask here"]:
    assert my_encode_with_masks(t) == inspect.encode_with_masks(tok, t), t
entropy = my_head_entropy(result.maps)  # (L, NH)
print("mean attention entropy per head:", entropy.round(2), f"(ln T = {math.log(T):.2f})")
assert entropy.shape == (L, NH) and np.all(entropy >= 0) and np.all(entropy <= math.log(T) + 1e-6)
one_hot = np.zeros((1, 1, 4, 4))
one_hot[..., 0] = 1.0  # every query looks only at key 0
assert np.allclose(my_head_entropy(one_hot), 0.0)
assert np.allclose(my_head_entropy(np.full((1, 1, 4, 4), 0.25)), math.log(4))

# %% [markdown]
# ## Recap
# - Fill-mask: softmax of the MLM logits at the `[MASK]` position; read the top k.
# - Attention maps: one `(T, T)` matrix per layer and head, rows sum to 1; padded keys get
#   exactly 0, so padding never changes real outputs.
# - A tiny, briefly trained model knows mostly word frequencies and a little context; more
#   training (and more text) is what makes the context matter.
#
# This is the end of the path: from a numerical gradient (lesson 00) to a pretrained BERT you
# can query. Next steps: `make train-tiny`, and the README's notes on loading the saved model
# into Hugging Face `transformers`.

# %%
print("lesson 12 passed")
