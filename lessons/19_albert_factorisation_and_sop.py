# %% [markdown]
# # Lesson 19: ALBERT, fewer parameters and a harder sentence task
#
# **Goal.** ALBERT (Lan et al., 2019) makes three changes to BERT, all in
# `minibert/family/albert.py`:
# 1. a **factorised embedding**: the vocabulary table is `V x E` with `E` much smaller than the
#    hidden size `C`, followed by one `E -> C` linear map;
# 2. **cross-layer sharing**: one encoder block is applied `L` times, so its backward runs `L`
#    times and the `L` gradients of each shared tensor add up;
# 3. **sentence-order prediction (SOP)** instead of NSP: both segments always come from the same
#    document, consecutive, and the task is whether they are in their original order or swapped.
#
# **Finish line.**
# 1. Parameter counts of factorised vs full embedding and shared vs unshared blocks, from formulas
#    asserted equal to the real models' `num_parameters`.
# 2. The shared block's gradient is the sum of the per-layer gradients, shown term by term and
#    against a numerical gradient.
# 3. On the same documents: NSP's topic shortcut (a random "next" segment comes from another
#    document, so word overlap alone predicts the label; `minibert/analysis/nsp_baseline.py`'s method), and
#    SOP's immunity to it (the overlap of two segments is the same in both orders: measured).

# %%
import random

import numpy as np

import course  # lessons/course.py: where pictures go, how exercises are graded
from course import ROOT
from minibert.analysis import gradcheck, nsp_baseline
from minibert import layers
from minibert.data import pretraining_data as pd
from minibert.bert import BertForPreTraining
from minibert.family import albert
from minibert.family.albert import AlbertConfig, AlbertForPreTraining
from minibert.model import BertConfig, block_backward
from minibert.text.tokenizer import BertTokenizer
from minibert.text.wordpiece_trainer import train_wordpiece

rng = np.random.default_rng(19)
# Shape legend: B batch, T sequence, V vocab, E embedding size, C hidden size, FF intermediate size,
# L layers, MAXPOS positions, TV segment types

# %% [markdown]
# ## 1. Parameter counts
# One encoder block holds the attention projections (`3C x C` and `C x C` with biases), the FFN
# (`C x FF` and `FF x C` with biases) and two LayerNorms (`2C` each). BERT's embedding is three
# tables `x C` and a LayerNorm. The heads: the pooler `C x C + C`, the MLM transform (`C x C` with a
# bias, then a LayerNorm and a bias per vocabulary entry; the decoder is the tied embedding table)
# and the 2-way NSP classifier. Below, BERT's count as a formula, asserted against the real model.
# ALBERT's is exercise 1: its tables are `E` wide instead of `C`, with their LayerNorm, followed by
# one linear map from `E` to `C`; its MLM transform maps `C` to `E` (so that the decoder can tie to
# the `E`-wide table); its SOP head is NSP's; and its `L` layers share one block.

# %%
def block_params(C, FF):
    return (3 * C * C + 3 * C) + (C * C + C) + (C * FF + FF) + (FF * C + C) + 2 * (2 * C)


def bert_params(V, C, FF, L, MAXPOS, TV):
    embedding = (V + MAXPOS + TV) * C + 2 * C
    heads = (C * C + C) + (C * C + C + 2 * C + V) + (2 * C + 2)  # pooler, MLM, NSP
    return embedding + L * block_params(C, FF) + heads


small = dict(V=300, C=64, FF=128, L=4, MAXPOS=64, TV=2)
acfg = AlbertConfig(vocab_size=300, embedding_size=16, hidden_size=64, num_hidden_layers=4, num_attention_heads=2,
                    intermediate_size=128, max_position_embeddings=64)
bcfg = BertConfig(vocab_size=300, hidden_size=64, num_hidden_layers=4, num_attention_heads=2,
                  intermediate_size=128, max_position_embeddings=64)
n_albert, n_bert = AlbertForPreTraining(acfg).num_parameters, BertForPreTraining(bcfg).num_parameters
print(f"small: BERT {n_bert:,} (formula {bert_params(**small):,}), ALBERT E=16 {n_albert:,}")
assert n_bert == bert_params(**small)  # integers: exact


# %% [markdown]
# **Exercise 1.** `my_albert_num_parameters(V, E, C, FF, L, MAXPOS, TV, shared)`: the parameters
# of ALBERT with its pooler, MLM and SOP heads: with `shared=True` its `L` layers use one block;
# with `shared=False` (the paper's "not-shared" variant: the factorised embedding, but `L` blocks
# of their own) each layer has its own. `block_params` above shows how a block counts; graded in
# the exam room, your function counts on its own (write the count in, as `block_params` does).
# Graded against the real models' `num_parameters` (and, unshared, the shared model plus `L - 1` more copies of its
# block's tensors). A stub left as it is makes the lesson go on with the reference solution
# (`lessons/solutions/19_albert_factorisation_and_sop.py`).

# %%
ex = course.Exercises("19_albert_factorisation_and_sop")


def my_albert_num_parameters(V, E, C, FF, L, MAXPOS, TV, shared=True):
    """-> the number of parameters of ALBERT (factorised embedding; one shared block or L blocks)"""
    raise NotImplementedError("exercise 1: count ALBERT's parameters")  # your code here


def _unshared_count(cfg):
    """From real tensors: the ALBERT model's count, plus L - 1 more copies of its block."""
    model = AlbertForPreTraining(cfg)
    block = sum(p.size for n, p in model.params.items() if n.startswith(albert.BLOCK))
    return model.num_parameters + (cfg.num_hidden_layers - 1) * block


def _parts(params, L):
    """{part: its size} from the real tensors, for messages that name the part a count is off by."""
    groups = {"the three embedding tables": ("tok_emb", "pos_emb", "seg_emb"), "the embedding LayerNorm": ("emb_ln.",),
              "the E -> C map": ("emb_map.",), "one block": ("block.",), "the pooler": ("pool.",),
              "the MLM head": ("mlm.",), "the MLM output bias": ("mlm.bias",), "the SOP head": ("sop.",)}
    parts = {label: sum(p.size for n, p in params.items() if n.startswith(prefixes)) for label, prefixes in groups.items()}
    parts[f"{L - 1} more blocks (L - 1)"] = (L - 1) * parts["one block"]
    return parts


def fresh_configs(seed):
    """The grader's own two ALBERT configurations, drawn now: no lesson variable holds their counts."""
    r = np.random.default_rng(seed)
    out = []
    for _ in range(2):
        heads = int(r.integers(1, 4))
        C = heads * int(r.integers(2, 9))
        out.append(AlbertConfig(vocab_size=int(r.integers(30, 400)), embedding_size=int(r.integers(2, 20)),
                                hidden_size=C, num_hidden_layers=int(r.integers(2, 7)), num_attention_heads=heads,
                                intermediate_size=int(r.integers(4, 40)), max_position_embeddings=int(r.integers(8, 70)),
                                type_vocab_size=int(r.integers(2, 4))))
    return out


def count_mistakes(c, want):
    """{words: the count that mistake gives} for ALBERT configuration `c` whose right count is `want`, from
    the real tensors: BERT's C -> C MLM head (dense and LayerNorm of width C) where ALBERT's maps C -> E, and
    BERT's embedding (tables and LayerNorm of width C, no E -> C map)."""
    bert = BertForPreTraining(BertConfig(vocab_size=c.vocab_size, hidden_size=c.hidden_size, num_hidden_layers=1,
                                         num_attention_heads=c.num_attention_heads,
                                         intermediate_size=c.intermediate_size,
                                         max_position_embeddings=c.max_position_embeddings,
                                         type_vocab_size=c.type_vocab_size)).params
    mine = AlbertForPreTraining(c).params
    size = lambda params, *prefixes: sum(p.size for n, p in params.items() if n.startswith(prefixes))  # noqa: E731
    head = size(bert, "mlm.dense", "mlm.ln") - size(mine, "mlm.dense", "mlm.ln")
    embedding = size(bert, "tok_emb", "pos_emb", "seg_emb", "emb_ln") - size(mine, "tok_emb", "pos_emb", "seg_emb",
                                                                            "emb_ln", "emb_map")
    return {f"BERT's MLM head: dense C -> C and a LayerNorm of width C ({size(bert, 'mlm.dense', 'mlm.ln'):,}); "
            f"ALBERT's maps C -> E ({size(mine, 'mlm.dense', 'mlm.ln'):,}), to the width E of tok_emb, which its "
            f"tied decoder reads": want + head,
            f"BERT's embedding: the three tables and their LayerNorm at width C, no E -> C map "
            f"({size(bert, 'tok_emb', 'pos_emb', 'seg_emb', 'emb_ln'):,}); ALBERT's are at width E, then the map "
            f"({size(mine, 'tok_emb', 'pos_emb', 'seg_emb', 'emb_ln', 'emb_map'):,})": want + embedding,
            "BERT's MLM head and BERT's embedding, both at width C: ALBERT's tables, their LayerNorm and the MLM "
            "head's output are at width E": want + head + embedding}


def check_albert_count(fn):
    results = []
    for c in fresh_configs(1901):
        args = (c.vocab_size, c.embedding_size, c.hidden_size, c.intermediate_size, c.num_hidden_layers,
                c.max_position_embeddings, c.type_vocab_size)
        name = f"V{c.vocab_size} E{c.embedding_size} C{c.hidden_size} L{c.num_hidden_layers}"
        parts = _parts(AlbertForPreTraining(c).params, c.num_hidden_layers)  # measured on the real tensors
        shared, unshared = AlbertForPreTraining(c).num_parameters, _unshared_count(c)
        results += [course.count(f"{name}, shared", fn(*args, shared=True), shared, parts, count_mistakes(c, shared)),
                    course.count(f"{name}, not shared", fn(*args, shared=False), unshared, parts,
                                 count_mistakes(c, unshared))]
    return results


my_albert_num_parameters = ex.grade(1, my_albert_num_parameters, check_albert_count,
                                    refuses=("_unshared_count", "family.albert.AlbertForPreTraining",
                                             "family.albert.param_shapes", "family.albert.init_params"))

# %%
assert my_albert_num_parameters(E=16, **small) == n_albert
assert my_albert_num_parameters(E=16, **{**small, "L": 12}) == n_albert  # depth is free in parameters (not in compute)

# BERT-base's sizes, from the formulas (the models themselves would take a second and 0.5 GB here)
base = dict(V=30000, C=768, FF=3072, L=12, MAXPOS=512, TV=2)
full_emb, fact_emb = base["V"] * base["C"], base["V"] * 128 + 128 * base["C"]
print(f"vocabulary embedding V x C = {full_emb / 1e6:.1f}M  vs  V x E + E x C = {fact_emb / 1e6:.1f}M (E = 128)")
print(f"one block {block_params(base['C'], base['FF']) / 1e6:.1f}M, twelve {12 * block_params(768, 3072) / 1e6:.1f}M")
print(f"BERT-base {bert_params(**base) / 1e6:.1f}M, ALBERT-base (E=128, all shared) "
      f"{my_albert_num_parameters(E=128, **base) / 1e6:.1f}M, not shared "
      f"{my_albert_num_parameters(E=128, **base, shared=False) / 1e6:.1f}M")
assert fact_emb * 5 < full_emb and my_albert_num_parameters(E=128, **base) * 9 < bert_params(**base)

# %% [markdown]
# Most of ALBERT's saving is the sharing (eleven blocks of 7.1M), then the factorisation (19M of
# vocabulary table). What is not saved is compute: every layer still runs a full block, so a
# forward pass of ALBERT-base costs about what BERT-base's does.
#
# ## 2. The shared block's gradient is a sum over layers
# The block's tensors are used `L` times, like a variable that appears `L` times in a formula:
# its gradient is the sum of the gradients of each use ("gradients add up at forks", as the tied
# decoder of lesson 10). `albert.encoder_backward` runs BERT's `block_backward` for each
# application and sums. Here we run the same per-layer backward by hand, keep each layer's term,
# and compare with the sum, and the sum with a numerical gradient, for a random upstream gradient.

# %%
cfg = AlbertConfig(vocab_size=40, embedding_size=6, hidden_size=8, num_hidden_layers=3, num_attention_heads=2,
                   intermediate_size=16, max_position_embeddings=16)
params = albert.init_params(cfg, seed=0, dtype=np.float64)
for p in params.values():  # random, non-trivial: never unit LayerNorms or zero biases in a check
    p += 0.1 * rng.standard_normal(p.shape)
B, T = 2, 7
ids = rng.integers(5, cfg.vocab_size, (B, T))  # (B, T)
seg, mask = np.zeros_like(ids), np.ones_like(ids)  # (B, T)
dseq = rng.standard_normal((B, T, cfg.hidden_size))  # (B, T, C) random upstream gradient

seq, cache = albert.encoder_forward(params, cfg, ids, seg, mask)  # (B, T, C)
summed = albert.encoder_backward(dseq, cache, cfg, {})  # the library's: one gradient per shared tensor
dx, per_layer = dseq, []
for l in reversed(range(cfg.num_hidden_layers)):  # the same backward, each application's term kept
    terms = {}
    dx = block_backward(dx, cache.blocks[l], cfg, 0, terms, layers)  # (B, T, C); terms under "h0.*"
    per_layer.insert(0, terms)
name = "ffn.in.w"
for l, terms in enumerate(per_layer):
    print(f"layer {l}: |d block.{name}| = {np.linalg.norm(terms['h0.' + name]):.4f}")
total = sum(terms["h0." + name] for terms in per_layer)  # (C, FF)
print(f"sum {np.linalg.norm(total):.4f}; the library's gradient {np.linalg.norm(summed['block.' + name]):.4f}")
for part in albert.BLOCK_PARTS:  # every shared tensor
    assert np.allclose(sum(t["h0." + part] for t in per_layer), summed["block." + part], rtol=1e-12, atol=1e-14)


def objective():
    out, _ = albert.encoder_forward(params, cfg, ids, seg, mask)  # (B, T, C)
    return float((out * dseq).sum())  # its gradient with respect to out is dseq


idx = gradcheck.sampled_indices(params["block." + name].shape, 4, rng)
num = gradcheck.numerical_grad_scalar(objective, params["block." + name], indices=idx)
sel = tuple(np.array(i) for i in zip(*idx))
check = gradcheck.compare("shared block." + name, summed["block." + name][sel], num[sel], 1e-5, 1e-8)
assert check
for l, terms in enumerate(per_layer):  # no single layer's term is the gradient
    assert not gradcheck.compare(f"layer {l} alone", terms["h0." + name][sel], num[sel], 1e-5, 1e-8, verbose=False)

# %% [markdown]
# ## 3. NSP vs SOP on the same documents
# Both tasks take two segments of text and a binary label, here from the same corpus (the lesson
# corpus: ten documents on ten topics, 20 passes). NSP's negative B comes from **another
# document**; SOP's negative is the same two segments, **swapped**. `minibert/analysis/nsp_baseline.py`
# measures how much of a pair task word overlap alone solves (`python -m minibert nsp-baseline
# RUN`): the token sets of A and B, overlap shares (plain and idf-weighted), the rarest shared
# word, the two sizes, and a logistic regression on them, fit on some pairs and scored on others.
# We look at the text itself, before masking.

# %%
corpus = ROOT / "data" / "lessons_corpus.txt"
tok = BertTokenizer(train_wordpiece([corpus], vocab_size=300, merge_rule="frequency", progress=False))
special = {tok.vocab[t] for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")}
SEQ, P, DUPE = 64, 10, 20


def pair_data(sentence_order):
    inst = pd.create_training_instances([corpus], tok, SEQ, DUPE, 0.1, 0.15, P, random.Random(19),
                                        sentence_order=sentence_order)
    f = pd.instances_to_features(inst, tok, SEQ, P)
    return {**f, "input_ids": f["unmasked_input_ids"]}  # the text, before masking


nsp, sop = pair_data(False), pair_data(True)
cut = {task: len(f["next_sentence_labels"]) * 7 // 10 for task, f in (("NSP", nsp), ("SOP", sop))}
baseline = {}
for task, f in (("NSP", nsp), ("SOP", sop)):
    train = {k: v[:cut[task]] for k, v in f.items()}
    heldout = {k: v[cut[task]:] for k, v in f.items()}
    baseline[task] = r = nsp_baseline.nsp_overlap_baseline(train, heldout, len(tok), special)
    print(f"{task}: nsp_baseline fit on {r.train_examples} pairs, held-out {r.heldout_acc:.3f} on "
          f"{r.heldout_examples} (always the majority label: {r.heldout_majority:.3f})")
assert baseline["NSP"].heldout_acc > baseline["NSP"].heldout_majority + 0.1  # overlap goes far on NSP

# %% [markdown]
# SOP comes out above chance too, which needs a second look. Twenty passes over ten short
# documents make the same pairs again and again, so "held-out" pairs are mostly copies of
# training pairs, and a flexible classifier can memorise them: a pair and its swap are different
# points to it (the sizes and the directional shares trade places). On a real run `nsp-baseline`
# scores held-out **documents**, which avoids this; ten documents are too few to split that way.
# Counting repeated pairs (integers, exact):

# %%
def repeated_share(f, n):
    rows = [ids[m > 0].tobytes() for ids, m in zip(f["input_ids"], f["input_mask"])]  # each pair's tokens
    seen = set(rows[:n])
    return float(np.mean([r in seen for r in rows[n:]])), len(set(rows))


for task, f in (("NSP", nsp), ("SOP", sop)):
    share, distinct = repeated_share(f, cut[task])
    print(f"{task}: {distinct} distinct pairs among {len(f['input_ids'])}; {share:.0%} of the held-out pairs "
          f"are also training pairs")
assert repeated_share(sop, cut["SOP"])[0] > 0.5  # SOP's "held-out" score is mostly memory

# %% [markdown]
# So measure the topic cue without fitting anything. A symmetric measure of it is the Jaccard
# overlap `|A ∩ B| / |A ∪ B|` of the two token sets, and a fit-free score of how well it
# separates the labels is the chance that a positive pair (in order / IsNext) overlaps more than
# a negative one (the area under the ROC curve: 0.5 is no information, 1 perfect). For NSP the
# negatives share fewer words; for SOP the overlap cannot differ, because swapping A and B
# changes neither set: we check that on every SOP pair by swapping it and counting.

# %%
def jaccard(pairs):
    return np.array([len(a & b) / max(len(a | b), 1) for a, b in pairs])  # (N,)


def auc(score, y):
    """P(score of a label-0 pair > score of a label-1 pair), ties counted half."""
    pos, neg = score[y == 0], score[y == 1]  # (N0,), (N1,)
    return float((pos[:, None] > neg[None]).mean() + 0.5 * (pos[:, None] == neg[None]).mean())


stats = {}
for task, f in (("NSP", nsp), ("SOP", sop)):
    pairs = nsp_baseline.token_sets(f["input_ids"], f["segment_ids"], f["input_mask"], special)
    y, j = f["next_sentence_labels"], jaccard(pairs)
    stats[task] = (j[y == 0].mean(), j[y == 1].mean(), auc(j, y))
    print(f"{task}: Jaccard overlap label 0 {stats[task][0]:.3f} / label 1 {stats[task][1]:.3f}, "
          f"AUC {stats[task][2]:.3f}")
    if task == "SOP":  # every pair and its swap: the same shared and total token counts
        assert [(len(a & b), len(a | b)) for a, b in pairs] == [(len(b & a), len(b | a)) for a, b in pairs]
nsp_in, nsp_random, nsp_auc = stats["NSP"]
sop_in, sop_swapped, sop_auc = stats["SOP"]
assert nsp_in > 1.4 * nsp_random and nsp_auc > 0.65  # NSP: the topic shortcut
assert abs(sop_in - sop_swapped) < 0.1 * sop_in and abs(sop_auc - 0.5) < 0.1  # SOP: none

# %% [markdown]
# ## Exercises
# Replace each `raise NotImplementedError(...)` with your code and re-run; the cell after the
# stubs grades your functions. A stub left as it is makes the lesson go on with the reference
# solution (`lessons/solutions/19_albert_factorisation_and_sop.py`).
#
# (Exercise 1, ALBERT's parameter count, came up in section 1.)
#
# 2. `my_embedding_map_backward(dx, e, W)`: the backward of ALBERT's `E -> C` map
#    `x = e @ W + b` with `e (B, T, E)`, `W (E, C)`: return `(de (B, T, E), dW (E, C), db (C,))`
#    from `dx (B, T, C)`. Each of the three is graded on its own against the numerical gradient.

# %%
def my_embedding_map_backward(dx, e, W):
    """dx (B, T, C), e (B, T, E), W (E, C) -> de (B, T, E), dW (E, C), db (C,)"""
    raise NotImplementedError("exercise 2: the backward of the E -> C map")  # your code here


# %%
def fresh_map_inputs(seed):
    """The grader's own e (B, T, E), W (E, C), b (C,) and dx (B, T, C), drawn now."""
    r = np.random.default_rng(seed)
    return r.standard_normal((2, 5, 6)), r.standard_normal((6, 8)), r.standard_normal(8), r.standard_normal((2, 5, 8))


def check_map_backward(fn):
    e, W, b, dx_map = fresh_map_inputs(1902)
    de, dW, db = fn(dx_map, e, W)
    x, Wn, bn = e.copy(), W.copy(), b.copy()
    objective = lambda: float(((x @ Wn + bn) * dx_map).sum())  # noqa: E731  its gradient at the output: dx_map
    db_num = gradcheck.numerical_grad_scalar(objective, bn)  # (C,)
    db_wrongs = {"db summed over the batch and the features (axes 0 and 2): db has one entry per output feature "
                 "(C); the bias is added at every (batch, position), so its gradient sums over axes 0 and 1":
                 dx_map.sum(axis=(0, 2)),
                 "db summed over the positions and the features (axes 1 and 2): db has one entry per output feature "
                 "(C); the bias is added at every (batch, position), so its gradient sums over axes 0 and 1":
                 dx_map.sum(axis=(1, 2)),
                 "db summed over the features (the last axis): db has one entry per output feature (C), summed over "
                 "the batch and the positions (axes 0 and 1)": dx_map.sum(axis=-1),
                 "db summed over every axis, the features too: it has one entry per output feature (C)": dx_map.sum(),
                 "db averaged over the batch and the positions, not summed: the bias serves every (batch, position), "
                 "and each use adds its gradient": dx_map.mean(axis=(0, 1))}
    return [course.close("de vs numerical gradient", de, gradcheck.numerical_grad_scalar(objective, x)),
            course.close("dW vs numerical gradient", dW, gradcheck.numerical_grad_scalar(objective, Wn)),
            course.close("db vs numerical gradient", db, db_num, wrongs=db_wrongs)]


my_embedding_map_backward = ex.grade(2, my_embedding_map_backward, check_map_backward, paths=("de", "dW", "db"),
                                     refuses=("layers.linear_backward", "kernels.linear_backward"))

# %% [markdown]
# ## Recap
# ALBERT spends its parameters differently (one block, a thin vocabulary table) but not its
# compute, and replaces a pair task that word overlap largely separates (AUC about 0.8 here) with
# one where overlap carries no information (about 0.5): what is left to learn is the order of the text.
# `python -m minibert train-tiny --preset albert-tiny` pretrains it (E = 64, SOP data), and the
# fine-tuning classes `AlbertForSequenceClassification`, ... put BERT's heads on its encoder
# (`python -m minibert finetune TASK --init <an ALBERT run>`).

# %%
print("lesson 19 passed")
