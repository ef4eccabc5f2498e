# %% [markdown]
# # Lesson 12: looking inside the trained model
#
# **Goal.** Use the tiny BERT from lesson 11 the way BERT is used: ask it to **fill in a
# `[MASK]`**, and look at **where its attention heads look**. Both are in `minibert.analysis.inspect`
# (`fill_mask`, `attention_maps`, `plot_attention`), and both are also commands:
# `python -m minibert fill-mask RUN_DIR "text with [MASK]"` and `python -m minibert attention`.
#
# **Finish line.** The fill-mask probabilities form a valid distribution and the top 5 are the
# 5 largest; the trained model gives the true word more probability than an untrained one;
# attention maps have shape `(layers, heads, T, T)` with rows summing to 1; in a padded batch,
# padded keys get exactly zero attention and padding does not change the real tokens' outputs.
# On the way, the paper's Figure 1 (pre-training, then fine-tuning) drawn from this model's own
# tensors. Pictures go to `lessons/out/12_fill_mask.png`, `12_pretrain_finetune.png`,
# `12_attention_last_layer.png` and `12_attention/`.

# %% [markdown]
# ## Setup: the model from lesson 11
# Lesson 11 saved its model to `lessons/out/11_tiny_bert/` (`config.json`, `model.safetensors`,
# `vocab.txt`). If it is not there, we run lesson 11 first (in fast mode, about a minute).

# %%
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # tiny model: one thread is fastest (lesson 11)
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import math  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from collections import Counter  # noqa: E402

import minibert  # noqa: E402,F401  before NumPy: sets OPENBLAS_THREAD_TIMEOUT (lesson 06)
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import SymLogNorm  # noqa: E402
from matplotlib.patches import ConnectionPatch  # noqa: E402

import course  # noqa: E402  lessons/course.py: where pictures go, how exercises are graded
from course import HERE, OUT, show  # noqa: E402
from minibert.analysis import inspect  # noqa: E402
from minibert import layers
from minibert.bert import BertForPreTraining  # noqa: E402
from minibert.model import encoder_forward  # noqa: E402
from minibert.tools.look_inside import load_model_and_tokenizer  # noqa: E402

RUN_DIR = OUT / "11_tiny_bert"
if not (RUN_DIR / "model.safetensors").is_file():
    print(f"{RUN_DIR} not found: running lesson 11 (fast mode) to train the model")
    subprocess.run([sys.executable, str(HERE / "11_pretrain_tiny.py")], check=True,
                   env=dict(os.environ, MINIBERT_FAST="1", MPLBACKEND="Agg"))  # headless: no pictures shown
model, tok = load_model_and_tokenizer(RUN_DIR)
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
# Exercise 1 checks that by hand: you write the top-k from the logits, and it must give
# `fill_mask`'s five tokens and probabilities.

# %%
text = "the cat sat on the [MASK] mat ."
top5 = inspect.fill_mask(model, tok, text, k=5)[0]  # one list per [MASK]: (token, probability)
print(text)
for token, p in top5:
    print(f"  {token:12} {p:.3f}")
ids, positions = inspect.encode_with_masks(tok, text)
logits = model.forward(np.array([ids])).mlm_logits[0, positions[0]].astype(np.float64)  # (V,) the [MASK]'s logits
assert all(a >= b for (_, a), (_, b) in zip(top5, top5[1:]))  # sorted, most likely first

fig, ax = plt.subplots(figsize=(5, 3))
ax.barh([t for t, _ in top5][::-1], [p for _, p in top5][::-1])
ax.set_xlabel("probability")
ax.set_title(text, fontsize=9)
fig.tight_layout()
show(fig, "12_fill_mask.png")

# %% [markdown]
# **Why can `##s` top the guesses?** Where it ranks depends on lesson 11's run (the cell below
# prints its rank and probability in this one): measured once, it was first at 0.10 after the
# fast run, and fourth after a full run that put the true word `warm` first at 0.154. A `##`
# piece cannot follow the complete word `the`: `the ##s` would spell `thes`. The model has not
# learned that rule, and two things push it toward `##s`:
# - **frequency**: with a vocab of only 300 tokens, most words of this corpus are cut into
#   pieces; a third of all tokens are `##` continuations, and `##s` (the plural and verb ending)
#   is the most frequent piece and among the most frequent tokens overall, next to `.`, `the` and
#   `a`. A model near the unigram plateau (lesson 11) guesses mostly by frequency;
# - **a crude use of context**: here `##s` often ends a noun right before `.` or the next word
#   (`snow ##b ##all ##s .`, `train ##s`), the kind of slot this `[MASK]` sits in.
#
# Telling `the ##s` from `the warm` needs the model to know which tokens are whole words, which
# forty sentences barely teach. The counts, from lesson 11's corpus:

# %%
corpus_counts = Counter(t for line in (OUT / "11_corpus.txt").read_text(encoding="utf-8").splitlines()
                        if line.strip() for t in tok.tokenize(line))
n_tokens = sum(corpus_counts.values())
share_pieces = sum(c for t, c in corpus_counts.items() if t.startswith("##")) / n_tokens
ranked = [t for t, _ in corpus_counts.most_common()]
print("most frequent tokens:", ", ".join(f"{t} {c / n_tokens:.1%}" for t, c in corpus_counts.most_common(6)))
print(f"'##' pieces: {share_pieces:.0%} of the corpus's {n_tokens} tokens; '##s' is number "
      f"{ranked.index('##s') + 1} of {len(ranked)}")
print(f"top guess here: {top5[0][0]!r}, number {ranked.index(top5[0][0]) + 1} in the corpus counts")
guesses = [t for t, _ in inspect.fill_mask(model, tok, text, k=len(tok))[0]]  # every token, most likely first
p_s = dict(inspect.fill_mask(model, tok, text, k=len(tok))[0])["##s"]
print(f"'##s' in this run: guess number {guesses.index('##s') + 1}, probability {p_s:.3f}")
assert share_pieces > 0.25 and ranked.index("##s") < 5

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
# ## The big picture: pre-training, then fine-tuning (the paper's Figure 1)
# BERT's paper opens with one picture: the same network first **pre-trained** on unlabelled
# sentence pairs (MLM and NSP, lessons 09-11), then **fine-tuned**: the pre-trained weights are
# kept, small new output layers are added for the task, and everything is trained further on
# labelled examples. Below, both halves drawn from real tensors of this model:
# - bottom row, each side: the final hidden states (`sequence_output`, one column of `C` numbers
#   per token, colour bar below), computed by the **same parameters** on both sides. The middle
#   panel draws them: every tensor of the encoder (embeddings and both layers), one row per tensor,
#   its values in their real order, cut to the width of the panel. Nothing is copied or changed
#   between the two sides: it is one set of arrays.
# - top row, left: the two pre-training heads. NSP reads `[CLS]` (P(IsNext), P(NotNext)); MLM
#   reads the masked position (its three best guesses).
# - top row, right: a question and a passage, with the paper's SQuAD heads: a **start** head and
#   an **end** head, each a new `(C,)` vector scoring every passage token (the bars: the
#   softmax of the scores over the passage), and a 3-class classifier on `[CLS]` as in its MNLI
#   panel. The new heads are random (std 0.02, as BERT's init), so their outputs are close to
#   uniform (the dotted line): that is what fine-tuning starts from.
#
# Saved as `lessons/out/12_pretrain_finetune.png`.

# %%
def encode_pair(text_a, text_b):
    """[CLS] A [SEP] B [SEP], with literal [MASK]s in A -> ids, segment ids, mask positions."""
    ids_a, positions = inspect.encode_with_masks(tok, text_a)  # [CLS] ... [SEP]
    ids_b = tok.convert_tokens_to_ids(tok.tokenize(text_b)) + [tok.sep_id]
    return ids_a + ids_b, [0] * len(ids_a) + [1] * len(ids_b), positions


def softmax(z):
    e = np.exp(z - z.max())  # (n,)
    return e / e.sum()


# pre-training: a sentence pair with a [MASK], through the model and its two heads
ids_pt, segs_pt, mask_pos = encode_pair("the cat sat on the [MASK] mat .", "it watched the birds in the garden .")
out_pt = model.forward(np.array([ids_pt]), np.array([segs_pt]))
p_nsp = softmax(out_pt.nsp_logits[0])  # (2,)
p_mlm = softmax(out_pt.mlm_logits[0, mask_pos[0]])  # (V,)
top3 = np.argsort(-p_mlm)[:3]  # (3,)
# fine-tuning: a question and a passage, the same encoder weights, new (random) heads
ids_ft, segs_ft, _ = encode_pair("what is warm", "the cat sat on the warm mat .")
out_ft = model.forward(np.array([ids_ft]), np.array([segs_ft]))
head_rng = np.random.default_rng(0)
w_cls = 0.02 * head_rng.standard_normal((cfg.hidden_size, 3))  # (C, 3) new: a 3-class classifier
w_span = 0.02 * head_rng.standard_normal((cfg.hidden_size, 2))  # (C, 2) new: a start and an end vector
p_cls = softmax(out_ft.pooled_output[0] @ w_cls)  # (3,)
first_b = segs_ft.index(1)  # the passage starts here: an answer is a span of the passage
passage = out_ft.sequence_output[0, first_b:-1]  # (n, C) the passage tokens, without the last [SEP]
p_start, p_end = softmax(passage @ w_span[:, 0]), softmax(passage @ w_span[:, 1])  # (n,) each

encoder_names = [k for k in model.params if not k.startswith(("mlm.", "nsp.", "pool."))]  # the shared tensors
n_shared = sum(model.params[k].size for k in encoder_names)
width = 96  # numbers drawn per tensor
shared = np.full((len(encoder_names), width), np.nan)  # (tensors, width) NaN: a tensor with fewer numbers
for r, name in enumerate(encoder_names):
    flat = model.params[name].ravel()[:width]
    shared[r, :flat.size] = flat
lim = float(np.abs(np.concatenate([out_pt.sequence_output[0], out_ft.sequence_output[0]])).max())
fig = plt.figure(figsize=(15, 7), layout="constrained")
grid = fig.add_gridspec(2, 3, width_ratios=[len(ids_pt), 9, len(ids_ft)], height_ratios=[1, 1.6])
ax_pt_head, ax_ft_head = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 2])
ax_pt, ax_ft = fig.add_subplot(grid[1, 0]), fig.add_subplot(grid[1, 2])
ax_w = fig.add_subplot(grid[:, 1])
for ax, ids, out, title in ((ax_pt, ids_pt, out_pt, "pre-training: MLM + NSP on unlabelled pairs"),
                            (ax_ft, ids_ft, out_ft, "fine-tuning: the same encoder, new heads, labelled data")):
    im = ax.imshow(out.sequence_output[0].T, cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto",
                   interpolation="nearest")  # (C, T): one column per token
    ax.set_xticks(range(len(ids)), tok.convert_ids_to_tokens(ids), rotation=90, fontsize=8)
    ax.set_ylabel(f"final hidden state (C = {cfg.hidden_size})", fontsize=8)
    ax.set_yticks([])
    ax.set_title(title, fontsize=10)
fig.colorbar(im, ax=ax_ft, location="right", label="hidden state value (same scale on both sides)")
imw = ax_w.imshow(shared, cmap="PuOr_r", aspect="auto", interpolation="nearest",
                  norm=SymLogNorm(linthresh=0.01, vmin=-1.5, vmax=1.5))  # weights ~0.02 and LayerNorm scales ~1
ax_w.set_yticks(range(len(encoder_names)), encoder_names, fontsize=6)
ax_w.set_xticks([])
ax_w.set_title(f"shared parameters:\n{n_shared:,} numbers, {len(encoder_names)} tensors,\n"
               f"the same arrays on both sides", fontsize=9)
ax_w.set_xlabel(f"the first {width} values of each tensor", fontsize=8)
cbar = fig.colorbar(imw, ax=ax_w, location="bottom", label="parameter value (log scale beyond 0.01)", shrink=0.95)
cbar.set_ticks([-1, -0.1, 0, 0.1, 1], labels=["-1", "-0.1", "0", "0.1", "1"])
for ax_enc in (ax_pt, ax_ft):  # arrows from the parameters to both encoders
    fig.add_artist(ConnectionPatch(xyA=(0.5, 0.25), coordsA=ax_w.transAxes,
                                   xyB=(0.0 if ax_enc is ax_ft else 1.0, 0.5), coordsB=ax_enc.transAxes,
                                   arrowstyle="->", lw=1.5, color="#7f6000"))
# the heads: bars over the tokens they read
ax_pt_head.bar([0, 0.35], p_nsp, width=0.3, color=["#6aa84f", "#cc0000"])
ax_pt_head.text(0.9, 0.8, "<- NSP head at [CLS]:\nIsNext (green), NotNext (red)", ha="left", fontsize=7)
ax_pt_head.bar(mask_pos[0] + np.array([-0.3, 0.0, 0.3]), p_mlm[top3], width=0.28, color="#3d85c6")
for i, tid in enumerate(top3):
    ax_pt_head.text(mask_pos[0] - 0.3 + 0.3 * i, p_mlm[tid] + 0.02, tok.ids_to_tokens[int(tid)], rotation=90,
                    ha="center", va="bottom", fontsize=7)
ax_pt_head.text(mask_pos[0], max(p_mlm[top3]) + 0.3, "MLM head at [MASK]:\nits 3 best guesses", ha="center",
                fontsize=7)
xs = np.arange(first_b, len(ids_ft) - 1)  # (n,) positions of the passage tokens
ax_ft_head.bar(xs - 0.18, p_start, width=0.34, color="#6aa84f", label="new start head: P(answer starts here)")
ax_ft_head.bar(xs + 0.18, p_end, width=0.34, color="#8e7cc3", label="new end head: P(answer ends here)")
ax_ft_head.axhline(1 / len(xs), color="grey", ls=":", lw=1, label=f"uniform over the passage, 1/{len(xs)}")
ax_ft_head.bar([-0.3, 0.0, 0.3], p_cls, width=0.28, color="#e69138", label="new classifier on [CLS]: 3 classes")
for ax, n in ((ax_pt_head, len(ids_pt)), (ax_ft_head, len(ids_ft))):
    ax.set_xlim(-0.5, n - 0.5)
    ax.set_ylim(0, 1.0)
    ax.set_xticks([])
    ax.set_ylabel("probability", fontsize=8)
ax_pt_head.set_title("pre-training heads (trained in lesson 11)", fontsize=9)
ax_ft_head.set_title("fine-tuning heads (new, random: to be trained on the task)", fontsize=9)
ax_ft_head.legend(fontsize=7, loc="upper left")
show(fig, "12_pretrain_finetune.png")
print(f"pre-training heads: P(IsNext) {p_nsp[0]:.2f}; MLM top guess {tok.ids_to_tokens[int(top3[0])]!r}")
print(f"fine-tuning heads (random, untrained): classes {p_cls.round(2)}, start {p_start.min():.3f}-{p_start.max():.3f}, "
      f"end {p_end.min():.3f}-{p_end.max():.3f} (uniform {1 / len(xs):.3f})")
print(f"shared: {n_shared:,} encoder parameters; the pre-training heads add "
      f"{model.num_parameters - n_shared:,} (pooler, MLM, NSP), the new heads {w_cls.size + w_span.size:,}")
assert np.allclose(p_cls, 1 / 3, atol=0.05)  # a new head starts near uniform
assert np.allclose(p_start, 1 / len(xs), atol=0.05) and np.allclose(p_end, 1 / len(xs), atol=0.05)

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
fig = plt.figure(figsize=(6.5 * NH, 6))  # the last layer again, to show here
inspect.draw_layer(fig, result, L - 1)
fig.tight_layout()
show(fig, "12_attention_last_layer.png")
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
# head spreads its attention evenly (the white mark on the colour bar is `1/T`; a map whose
# colours sit there is uniform, not empty): it has not learned to pick out tokens, as in a model
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
# ## Exercises
# Replace each `raise NotImplementedError(...)` with your code and re-run; the cell after the
# stubs grades your functions against known answers, and names the check that failed and by how
# much. A stub left as it is makes the lesson go on with the reference
# solution (`lessons/solutions/12_looking_inside.py`).
#
# 1. `my_top_k(logits, k)`: the k most likely token ids and their probabilities, most likely
#    first (ties: the smaller id first). Graded on logits the grader draws; then it must give the
#    five tokens and probabilities that `inspect.fill_mask` printed at the start of the lesson.
# 2. `my_encode_with_masks(text, tok)`: `[CLS]` + tokens + `[SEP]` ids, with each literal
#    `[MASK]` turned into the mask id (Google's tokenizer would split it into `[`, `mask`, `]`);
#    returns the ids and the mask positions, like `inspect.encode_with_masks`.
# 3. `my_head_entropy(maps)`: the mean entropy of the attention rows of each head, shape
#    `(L, NH)` from maps `(L, NH, T, T)`. A head that looks at one token has entropy 0; one that
#    spreads evenly over `T` tokens has `ln T`. (Mind `0 * log 0`, which is 0.)

# %%
def my_top_k(logits, k):
    """logits (V,) -> ids (k,), probabilities (k,), most likely first"""
    raise NotImplementedError("exercise 1: write top-k")  # your code here


def my_encode_with_masks(text, tok):
    """text with literal [MASK]s -> (list of ids with [CLS] and [SEP], list of mask positions)"""
    raise NotImplementedError("exercise 2: encode around the [MASK] markers")  # your code here


def my_head_entropy(maps):
    """maps (L, NH, T, T), rows summing to 1 -> (L, NH) mean entropy of the rows"""
    raise NotImplementedError("exercise 3: measure how spread out each head is")  # your code here


# %%
ex = course.Exercises("12_looking_inside")


def check_top_k(fn):
    r = np.random.default_rng(1201)
    z = 3 * r.standard_normal(cfg.vocab_size)  # (V,) logits drawn now, at this vocabulary's size
    p = np.exp(z - z.max())
    p /= p.sum()  # the softmax
    want = np.argsort(-p, kind="stable")[:5]  # most likely first, the smaller id first on a tie
    tied = r.standard_normal(6)  # (6,) two entries tied for the top, at drawn places
    i, j = sorted(r.choice(6, 2, replace=False).tolist())
    tied[i] = tied[j] = tied.max() + 1.0
    top_ids, top_p = fn(z.copy(), 5)
    return [course.equal("token ids vs the softmax's five largest", list(np.asarray(top_ids).tolist()),
                         want.tolist()),
            course.close("probabilities vs the softmax's five largest", top_p, p[want]),
            course.equal("ties: smaller id first", list(np.asarray(fn(tied, 2)[0]).tolist()), [i, j])]


def fresh_texts(seed):
    """Texts drawn now from whole words of the vocabulary, and one made-up word, with [MASK]s at drawn places."""
    r = np.random.default_rng(seed)
    words = sorted(w for w in tok.vocab if w.isalpha() and w.islower() and len(w) > 2)
    made_up = "".join(r.choice(list("abcdefghijklmnopqrstuvwxyz"), 9))
    texts = []
    for n, masks in ((6, 1), (5, 2), (4, 0)):
        pieces = [str(w) for w in r.choice(words, n)] + ([made_up] if masks == 0 else [])
        for at in sorted(r.choice(len(pieces) + 1, masks, replace=False).tolist(), reverse=True):
            pieces.insert(at, "[MASK]")
        texts.append(" ".join(pieces + ["."]))
    return texts


def check_encode_with_masks(fn):
    results = []
    for t in fresh_texts(1202):
        tokens, positions = ["[CLS]"], []  # the definition, word by word
        for w in t.split():
            if w == "[MASK]":
                positions.append(len(tokens))
                tokens.append("[MASK]")
            else:
                tokens += tok.tokenize(w)
        tokens.append("[SEP]")
        ids, pos = fn(t, tok)
        results += [course.equal(f"{t!r}: tokens", tok.convert_ids_to_tokens(list(ids)), tokens),
                    course.equal(f"{t!r}: mask positions", list(pos), positions)]
    return results


def check_head_entropy(fn):
    r = np.random.default_rng(1203)
    n = int(r.integers(3, 9))
    one_hot = np.zeros((1, 1, n, n))  # (1, 1, n, n)
    one_hot[..., int(r.integers(0, n))] = 1.0  # every query looks only at one drawn key
    p = r.random(n)
    p[int(r.integers(0, n))] = 0.0
    p /= p.sum()  # (n,) one row, with a zero
    Lg, NHg, Tg = (int(v) for v in r.integers(2, 6, 3))
    maps = r.standard_normal((Lg, NHg, Tg, Tg))
    maps = np.exp(maps) / np.exp(maps).sum(-1, keepdims=True)  # (L, NH, T, T) rows summing to 1
    h = -(p[p > 0] * np.log(p[p > 0])).sum()  # the entropy in nats, 0 log 0 = 0
    factors = {"1/ln 2 (a logarithm to base 2: bits, where the entropy here is in nats, ln)": 1 / math.log(2),
               f"T = {n} (the rows' entropies summed, not averaged over the T rows)": n}
    return [course.close("one key per row: 0", fn(one_hot), np.zeros((1, 1)), atol=1e-12),
            course.close(f"uniform over {n}: ln {n}", fn(np.full((1, 1, n, n), 1 / n)), np.full((1, 1), math.log(n)),
                         factors=factors),
            course.close(f"a drawn row with a zero, {np.round(p, 3).tolist()}", fn(np.broadcast_to(p, (1, 1, n, n))),
                         np.full((1, 1), h), factors=factors),
            course.equal(f"shape (L, NH) for maps {maps.shape}", np.shape(fn(maps)), (Lg, NHg))]


my_top_k = ex.grade(1, my_top_k, check_top_k)
my_encode_with_masks = ex.grade(2, my_encode_with_masks, check_encode_with_masks,
                                refuses=("analysis.inspect.encode_with_masks",),
                                allows=("text.tokenizer.BertTokenizer.tokenize",
                                        "text.tokenizer.BertTokenizer.convert_tokens_to_ids",
                                        "text.tokenizer.BertTokenizer.cls_id", "text.tokenizer.BertTokenizer.sep_id",
                                        "text.tokenizer.BertTokenizer.mask_id"))
my_head_entropy = ex.grade(3, my_head_entropy, check_head_entropy)
mine5 = my_top_k(logits, 5)  # and on the lesson's own [MASK]: the five that fill_mask printed
assert tok.convert_ids_to_tokens(list(mine5[0])) == [t for t, _ in top5]
assert np.allclose(mine5[1], [q for _, q in top5])
top_ids, top_p = my_top_k(logits, cfg.vocab_size)  # every token, most likely first: the whole distribution
assert math.isclose(top_p.sum(), 1.0) and np.all(top_p >= 0)  # a valid distribution over the vocab
entropy = my_head_entropy(result.maps)  # (L, NH)
print("mean attention entropy per head:", entropy.round(2), f"(ln T = {math.log(T):.2f})")
assert np.all(entropy >= 0) and np.all(entropy <= math.log(T) + 1e-6)

# %% [markdown]
# ## Recap
# - Fill-mask: softmax of the MLM logits at the `[MASK]` position; read the top k.
# - Attention maps: one `(T, T)` matrix per layer and head, rows sum to 1; padded keys get
#   exactly 0, so padding never changes real outputs.
# - A tiny, briefly trained model knows mostly word frequencies and a little context; more
#   training (and more text) is what makes the context matter.
#
# That closes the first path, from a numerical gradient (lesson 00) to a pretrained BERT you can
# query. **Next: lesson 13**, the other half of the paper's Figure 1: the fine-tuning heads, then
# question answering (14), what pretraining buys (15), feature-based use (16), the paper's
# ablations and BERT's successors (17-22), and a capstone that runs the whole loop on a real
# task (23). `make train-tiny` pretrains a bigger model on real text meanwhile.

# %%
print("lesson 12 passed")
