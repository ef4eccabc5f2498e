# %% [markdown]
# # Lesson 18: RoBERTa's recipe, BERT's model fed differently
#
# **Goal.** RoBERTa (Liu et al., 2019) keeps BERT's model line for line and changes how it is
# trained: it drops next-sentence prediction, fills every sequence with whole sentences up to the
# length limit instead of building sentence pairs, draws a fresh mask each time a sequence is
# used, and trains with bigger batches (Adam's β2 = 0.98). Its ablation of the inputs (§4.2,
# Table 2, BERT-base size; SQuAD 2.0 F1, MNLI-m, SST-2, RACE): pairs of single sentences are the
# worst (76.2, 82.9, 92.1, 63.0), below BERT's own segment pairs (78.7, 84.0, 92.9, 64.2), "which
# we hypothesize is because the model is not able to learn long-range dependencies"; dropping
# NSP and packing whole sentences matches or beats them on SQuAD, MNLI and RACE (FULL-SENTENCES
# 79.1, 84.7, 92.5, 64.8), and keeping each sequence inside one document is slightly better
# again (DOC-SENTENCES 79.7, 84.7, 92.7, 65.6; docs/bert-notes.md §10). On SST-2 the segment
# pairs stay ahead (92.9): these differences are tenths of a point. What mattered most in
# RoBERTa is elsewhere: ten times the data (16 GB to 160 GB) and longer training with bigger
# batches (§5, Table 4: most of the gain over BERT), and a byte-level BPE vocabulary (§4.4,
# slightly worse on some tasks, chosen for its universality). This lesson looks at the two data
# changes on real instances of the lesson corpus and measures what they change.
#
# **Finish line.**
# 1. The three packings (BERT's pairs, FULL-SENTENCES, DOC-SENTENCES) on the same documents, with
#    their invariants: one segment and no NSP label when packed, no document boundary inside a
#    DOC-SENTENCES sequence, every corpus token in exactly one FULL-SENTENCES sequence per pass.
# 2. A measured table: padding tokens per batch, the share of real tokens, MLM predictions per batch.
# 3. Dynamic masking: over ten epochs the share of tokens the model is ever asked to predict,
#    against the static mask and against the formula 1 - (1 - q)^epochs.

# %%
import random

import matplotlib.pyplot as plt
import numpy as np

import course  # lessons/course.py: where pictures go, how exercises are graded
from course import FAST, OUT, ROOT, show
from minibert.data import pretraining_data as pd
from minibert.text.tokenizer import BertTokenizer
from minibert.text.wordpiece_trainer import train_wordpiece

# the lesson corpus (data/lessons_corpus.txt): ten short documents, one sentence per line
corpus = ROOT / "data" / "lessons_corpus.txt"
vocab = train_wordpiece([corpus], vocab_size=300, merge_rule="frequency", progress=False)
tok = BertTokenizer(vocab)
T, P, BATCH = 64, 10, 32  # sequence length, max predictions per sequence, sequences per batch
DUPE = 5 if FAST else 10  # passes over the corpus (BERT's dupe_factor)
PACKINGS = ("segment_pair", "full_sentences", "doc_sentences")  # BERT, then RoBERTa's two
documents = pd.read_documents_as_tokens([corpus], tok)  # documents -> sentences -> WordPiece tokens
corpus_tokens = sum(len(s) for d in documents for s in d)
print(f"{len(documents)} documents, {sum(len(d) for d in documents)} sentences, {corpus_tokens} tokens")
assert pd.PACKINGS == PACKINGS

# %% [markdown]
# ## 1. Three ways to fill a sequence of 64 tokens
# - **BERT's pairs** (`segment_pair`): `[CLS] A [SEP] B [SEP]`, two segments; B is the text that
#   follows A, or on a fair coin text from another document (the NSP label); a chunk of one
#   sentence always gets a random B, so on short documents like these more than half are random.
#   The generator aims at the full length but cuts pairs short 10% of the time
#   (`short_seq_prob`), and a document's last chunk is as short as what is left of the document.
# - **FULL-SENTENCES** (`full_sentences`): `[CLS] s1 s2 ... [SEP]`, one segment, sentences taken in
#   order across documents until the next one does not fit; a `[SEP]` marks a document boundary.
# - **DOC-SENTENCES** (`doc_sentences`): the same, but a sequence never crosses a document, so a
#   document's last sequence is short.

# %%
def instances(packing, seed=18):
    return pd.create_training_instances([corpus], tok, T, DUPE, 0.1, 0.15, P, random.Random(seed), packing=packing)


data = {p: instances(p) for p in PACKINGS}
feats = {p: pd.instances_to_features(data[p], tok, T, P) for p in PACKINGS}
for p in PACKINGS:
    print(f"{p:>15}: {' '.join(data[p][0].tokens)}\n")

pair, full, doc = (feats[p] for p in PACKINGS)
assert set(np.unique(pair["segment_ids"])) == {0, 1}  # two segments
for packed in (full, doc):
    assert not packed["segment_ids"].any() and not packed["next_sentence_labels"].any()  # one segment, no NSP
sep = tok.vocab["[SEP]"]
seps_full = (full["input_ids"] == sep).sum(1)  # (N,) 1 + document boundaries crossed
seps_doc = (doc["input_ids"] == sep).sum(1)  # (N,)
assert seps_full.max() >= 2 and (seps_doc == 1).all()  # FULL-SENTENCES crosses documents, DOC- never
print(f"FULL-SENTENCES sequences crossing a document boundary: {(seps_full >= 2).mean():.2f}")
# every corpus token is in exactly one FULL-SENTENCES sequence of each pass (integers: exact)
specials = [tok.vocab[t] for t in ("[CLS]", "[SEP]")]
real_full = int((full["input_mask"] * ~np.isin(full["unmasked_input_ids"], specials)).sum())
assert real_full == DUPE * corpus_tokens, (real_full, DUPE * corpus_tokens)
print(f"BERT's pairs: random-next share {pair['next_sentence_labels'].mean():.2f} (the NSP label RoBERTa drops)")

# %% [markdown]
# ## 2. What fills a batch: real tokens, padding, predictions
# A batch is `(B, T)` whatever the sequences hold: the padding positions cost memory (and, on the
# padded code path, compute) and teach nothing. The MLM task predicts 15% of each sequence's real
# tokens (at most P), so fuller sequences also mean more predictions per step.
# The rest is arithmetic on the feature arrays, and it is exercise 1: from `input_mask` `(N, T)`
# (1 on a real token, `[CLS]` and `[SEP]` included) and `masked_lm_weights` `(N, P)` (1 on a real
# prediction), the mean padding tokens per batch of `BATCH` sequences, the share of real tokens,
# and the mean MLM predictions per batch. The table below is computed with your function. A stub
# left as it is makes the lesson go on with the reference solution
# (`lessons/solutions/18_roberta_recipe.py`).

# %%
ex = course.Exercises("18_roberta_recipe")


def my_batch_stats(input_mask, masked_lm_weights, batch_size):
    """input_mask (N, T), masked_lm_weights (N, P) -> (padding per batch, share real, predictions per batch)"""
    raise NotImplementedError("exercise 1: padding, real share and predictions per batch")  # your code here


def check_batch_stats(fn):
    r = np.random.default_rng(1801)
    results = []
    for name, full in (("drawn example", False), ("drawn full rows, no padding", True)):
        N, T_, P_, bs = int(r.integers(2, 7)), int(r.integers(4, 12)), int(r.integers(2, 5)), int(r.integers(2, 33))
        real = np.full(N, T_) if full else r.integers(2, T_ + 1, N)  # (N,) real tokens per sequence
        mask = (np.arange(T_)[None, :] < real[:, None]).astype(np.int64)  # (N, T)
        weights = (np.arange(P_)[None, :] < r.integers(0, P_ + 1, N)[:, None]).astype(np.float64)  # (N, P)
        n_pad, n_real, n_pred = int(mask.size - mask.sum()), int(mask.sum()), int((weights > 0).sum())
        want = [n_pad / N * bs, n_real / mask.size, n_pred / N * bs]  # totals over N sequences, per batch of bs
        got = np.array(fn(mask.copy(), weights.copy(), bs), dtype=float)
        if got.shape != (3,):
            results.append(course.equal(f"{name}: three numbers", got.shape, (3,)))
            continue
        per_seq = "per sequence, not per batch of batch_size sequences"
        total = "the total over all N sequences, not per batch"
        slips = [{per_seq: n_pad / N, total: n_pad},
                 {"the share of padding, not of real tokens": n_pad / mask.size,
                  "real tokens per sequence, not their share of the T positions": n_real / N},
                 {per_seq: n_pred / N, total: n_pred,
                  "every prediction slot counted (P per sequence), not the real ones (weight > 0)": P_ * bs}]
        results += [course.close(f"{name}, N {N} T {T_} batch {bs}: {what}", got[i], want[i], wrongs=slips[i])
                    for i, what in enumerate(("padding per batch", "share real", "predictions per batch"))]
    return results


my_batch_stats = ex.grade(1, my_batch_stats, check_batch_stats)

# %%
table = {}
for p in PACKINGS:
    pad, share, preds = my_batch_stats(feats[p]["input_mask"], feats[p]["masked_lm_weights"], BATCH)
    table[p] = dict(sequences=len(feats[p]["input_mask"]), real_per_seq=share * T, share_real=share,
                    padding_per_batch=pad, predictions_per_batch=preds)
stats_full = pd.generation_stats(feats["full_sentences"], tok)  # the generator's own count agrees
assert np.isclose(table["full_sentences"]["real_per_seq"], stats_full["tokens"] / stats_full["instances"])
print(f"{'packing':>15} {'sequences':>9} {'real/seq':>8} {'share real':>10} {'pad/batch':>9} {'preds/batch':>11}")
for p, r in table.items():
    print(f"{p:>15} {r['sequences']:>9} {r['real_per_seq']:>8.1f} {r['share_real']:>10.3f} "
          f"{r['padding_per_batch']:>9.0f} {r['predictions_per_batch']:>11.1f}")
# FULL-SENTENCES leaves a gap only where the next sentence does not fit: the fullest by construction
assert table["full_sentences"]["share_real"] > max(table["segment_pair"]["share_real"],
                                                   table["doc_sentences"]["share_real"])
assert table["full_sentences"]["predictions_per_batch"] > table["segment_pair"]["predictions_per_batch"]
# pairs cannot be full: random-next B, short_seq_prob and a document's last chunk cut them short
assert table["segment_pair"]["share_real"] < 0.9

# %% [markdown]
# The picture draws the first 24 sequences of each packing as rows: real tokens dark, padding
# light. On long documents FULL- and DOC-SENTENCES are almost equally full (only a document's last
# sequence is short); on ten documents of four sentences, DOC-SENTENCES ends a short sequence at
# every document. RoBERTa grows DOC-SENTENCES batches to about a constant token count for this
# reason (docs/bert-notes.md §10.2 says what minibert does instead).

# %%
fig, axes = plt.subplots(1, 3, figsize=(13, 3.6), sharey=True, layout="constrained")
for ax, p in zip(axes, PACKINGS):
    m = feats[p]["input_mask"][:24]  # (24, T)
    im = ax.imshow(m, cmap="Blues", vmin=-0.3, vmax=1.2, aspect="auto", interpolation="nearest")
    ax.set_title(f"{p}: {table[p]['share_real']:.0%} real")
    ax.set_xlabel("position")
axes[0].set_ylabel("sequence")
cbar = fig.colorbar(im, ax=axes, shrink=0.8)
cbar.set_ticks([0, 1], labels=["padding (input_mask 0)", "real token (input_mask 1)"])
fig.suptitle("real tokens (dark) and padding (light), T = 64")
show(fig, "18_packing.png")

# %% [markdown]
# ## 3. Dynamic masking
# BERT's generator masks each instance once, when the data is written (its `dupe_factor` copies
# give a corpus 10 different masks over 40 epochs). RoBERTa draws a new mask every time a sequence
# enters a batch (`masking="dynamic"`, `pd.remask`: Google's rule, NumPy's random numbers). If a
# sequence has n maskable tokens and k of them are predicted, each epoch asks for a given token with
# probability q = k / n, so after E epochs the share of tokens ever predicted is 1 - (1 - q)^E with
# fresh masks, and stays q with one static mask.

# %%
EPOCHS = 10
special_ids = [tok.vocab[t] for t in ("[CLS]", "[SEP]")]
cand = (full["input_mask"] > 0) & ~np.isin(full["unmasked_input_ids"], special_ids)  # (N, T) maskable
rows = np.repeat(np.arange(len(cand)), P).reshape(-1, P)  # (N, P)


def predicted(f):
    """(N, T) bool: the positions this feature set asks the model to predict."""
    out = np.zeros(cand.shape, dtype=bool)  # (N, T)
    w = f["masked_lm_weights"] > 0  # (N, P)
    out[rows[w], f["masked_lm_positions"][w]] = True
    return out


rng = np.random.default_rng(18)
ever = np.zeros(cand.shape, dtype=bool)  # (N, T)
for epoch in range(EPOCHS):
    fresh = pd.remask(full, rng, 0.15, P, len(tok), special_ids, tok.vocab["[MASK]"])
    ever |= predicted(fresh)
    if epoch < 3:
        print(f"epoch {epoch}: " + " ".join(tok.ids_to_tokens[i] for i in fresh["input_ids"][0][:24]))
static = predicted(full)
q = static.sum(1) / cand.sum(1)  # (N,) each sequence's share predicted in one epoch
theory = float((1 - (1 - q) ** EPOCHS) @ cand.sum(1) / cand.sum())
share_static, share_dynamic = static.sum() / cand.sum(), ever.sum() / cand.sum()
print(f"tokens ever predicted in {EPOCHS} epochs: static mask {share_static:.3f}, dynamic {share_dynamic:.3f} "
      f"(1 - (1 - q)^{EPOCHS} = {theory:.3f})")
assert not (static & ~cand).any() and not (ever & ~cand).any()  # never [CLS], [SEP] or padding
assert 0.10 < share_static < 0.20  # about 15%
assert abs(share_dynamic - theory) < 0.03  # as the formula says, within the noise of a few thousand tokens
assert share_dynamic > 3 * share_static

# %% [markdown]
# ## Exercises
# Replace each `raise NotImplementedError(...)` with your code and re-run; the cell after the
# stubs grades your functions. A stub left as it is makes the lesson go on with the reference
# solution (`lessons/solutions/18_roberta_recipe.py`).
#
# (Exercise 1, the batch statistics, came up in section 2.)
#
# 2. `my_full_sentences(sentence_lengths, max_tokens)`: FULL-SENTENCES packing on lengths alone.
#    `sentence_lengths` is a list of documents, each a list of sentence lengths; return the lengths
#    of the packed sequences (without `[CLS]` and the final `[SEP]`). Sentences go in order; a
#    sentence that starts a new document costs one `[SEP]` more, unless it starts the sequence; one
#    that does not fit closes the sequence; one longer than `max_tokens` is cut into full pieces.

# %%
def my_full_sentences(sentence_lengths, max_tokens):
    """[[n_11, n_12, ...], [n_21, ...], ...] -> [length of packed sequence 1, 2, ...]"""
    raise NotImplementedError("exercise 2: FULL-SENTENCES packing of sentence lengths")  # your code here


# %%
def check_full_sentences(fn):
    r = np.random.default_rng(1802)
    cases = []
    for name, M, top in (("drawn documents", int(r.integers(12, 30)), 12), ("drawn short documents", 7, 4),
                         ("drawn documents, some sentences longer than a sequence", 6, 15)):
        docs = [[int(n) for n in r.integers(1, top, int(r.integers(1, 5)))] for _ in range(int(r.integers(3, 7)))]
        cases.append((f"{name}, max_tokens {M}: {docs}", docs, M))
    def pack(docs, M, sep=lambda k, cur: k == 0 and cur > 0, cut=True):  # token count by token count
        out, cur = [], 0
        for d in docs:
            for k, n in enumerate(d):
                cost = n + (1 if sep(k, cur) else 0)  # a [SEP] before a new document, inside a sequence
                if cur > 0 and cur + cost > M:
                    out.append(cur)
                    cur, cost = 0, n + (1 if sep(k, 0) else 0)
                cur += cost
                while cut and cur > M:
                    out.append(M)
                    cur -= M
        return out + ([cur] if cur else [])

    def slips(docs, M):
        return {"no [SEP] where a new document starts inside a sequence": pack(docs, M, sep=lambda k, cur: False),
                "a [SEP] before every sentence inside a sequence, not only before a new document's first":
                pack(docs, M, sep=lambda k, cur: cur > 0),
                "a [SEP] also where a document starts a sequence (the final [SEP] is not counted here)":
                pack(docs, M, sep=lambda k, cur: k == 0),
                "a sentence longer than max_tokens kept whole: it is cut into full pieces": pack(docs, M, cut=False)}

    results = []
    for name, docs, M in cases:
        results.append(course.equal(name, list(fn([list(d) for d in docs], M)), pack(docs, M),
                                    wrongs=lambda docs=docs, M=M: slips(docs, M)))
    return results


my_full_sentences = ex.grade(2, my_full_sentences, check_full_sentences,
                             refuses=("data.pretraining_data.pack_documents", "data.pretraining_data.create_packed_instances"))
lengths = [[len(sent) for sent in d] for d in documents]
packed = [len(seq) for seq in pd.pack_documents([[["w"] * n for n in d] for d in lengths], T - 2, "full_sentences")]
assert my_full_sentences(lengths, T - 2) == packed  # the library's packing, on the same lengths

# %% [markdown]
# ## Recap
# RoBERTa's model is BERT's; what changed is what the model is shown. Without the NSP pairs a
# sequence can be filled with whole sentences (the share of real tokens and the predictions per
# batch printed in section 2's table, FULL-SENTENCES against BERT's pairs), and with a fresh mask
# per epoch the model sees most tokens as prediction targets over a few epochs instead of the same
# 15%. minibert runs the recipe as settings of the BERT pipeline: `python -m minibert train-tiny
# --preset roberta-tiny` (FULL-SENTENCES, dynamic masking, `objective=mlm`, β2 0.98, two
# accumulated micro-batches per step). Lesson 19 turns to ALBERT, which kept a sentence-pair task
# and changed the question it asks.

# %%
print("lesson 18 passed")
