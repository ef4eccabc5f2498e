# %% [markdown]
# # Lesson 16: feature-based vs fine-tuning
#
# **Goal.** There are two ways to use a pretrained encoder on a new task (paper §5.3, Table 7):
#
# | | fine-tuning (lessons 13-15) | feature-based |
# |---|---|---|
# | what trains | every weight: embeddings, every layer, the new head | the new head only |
# | encoder | updated by its backward pass | **frozen**: run forward once, dropout off |
# | what the head reads | the last layer | any hidden states: the last layer, the sum of the last four, their concatenation, ... |
# | per task you store | a whole model | a head (and the shared encoder) |
#
# The paper tagged CoNLL-2003 names with BERT-base both ways (docs/bert-notes.md §9.6):
# fine-tuning 96.4 dev F1; frozen features fed to a two-layer BiLSTM 96.1 with the last four layers
# concatenated, 95.9 with a weighted sum of them, 94.9 for the last layer alone and 91.0 for the
# embeddings alone. Feature-based nearly matches fine-tuning when the head
# reads several layers, and it is cheaper: the encoder's backward never runs, and its features
# can be computed once and reused.
#
# **Finish line.**
# 1. A feature-based step runs the encoder's backward zero times (a fine-tuning step once), and
#    after training, every encoder weight is bit-identical to before.
# 2. The trained parameters: all of them for fine-tuning, `D * K + K` for a head on `D`-wide
#    features.
# 3. On a small tagging task, a head on the frozen encoder's last layer (or on all its layers
#    concatenated) tags as well as fine-tuning, while a head on the embeddings alone cannot tag
#    the words whose tag depends on the context.
# 4. The paper's tagger, a BiLSTM, on those same context-free embeddings: it tags the context
#    words too, because it reads the sentence itself.

# %% [markdown]
# ## Setup
# One thread, as in lesson 11: the matrices here are tiny.

# %%
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import random  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections import Counter  # noqa: E402

import minibert  # noqa: E402,F401  before NumPy: sets OPENBLAS_THREAD_TIMEOUT (lesson 06)
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import course  # noqa: E402  lessons/course.py: where pictures go, how exercises are graded
from course import OUT, show  # noqa: E402
from minibert import optim  # noqa: E402
from minibert.data import pretraining_data as pd  # noqa: E402
from minibert.data.shards import BatchIterator  # noqa: E402
from minibert.bert import BertForPreTraining  # noqa: E402
from minibert.finetune.frozen import FrozenFeatureTagger, combine_layers  # noqa: E402
from minibert.finetune.models import BertForTokenClassification  # noqa: E402
from minibert.analysis.gradcheck import numerical_grad_scalar  # noqa: E402
from minibert.model import BertConfig  # noqa: E402
from minibert.text.tokenizer import BertTokenizer  # noqa: E402

# %% [markdown]
# ## 1. A pretrained encoder
# Lesson 15's world and pretraining, repeated so that this lesson stands alone: four topics of 14
# words each plus seven function words shared by all, 200 unlabelled documents that each stay on
# one topic, and a tiny BERT (hidden 32, 2 layers) pretrained with MLM and NSP for 400 steps.

# %%
TOPICS = {
    "animals": "cat dog horse cow sheep goat duck mouse owl fox bark fur tail paw".split(),
    "food": "bread cheese soup rice apple cake egg milk salt honey bake cook taste spoon".split(),
    "travel": "train bus ship plane ticket station road map bridge car ride drive port trip".split(),
    "weather": "rain snow wind cloud storm sun fog ice frost thunder cold warm wet sky".split(),
}
NAMES = list(TOPICS)  # tag id -> topic
FILLERS = "the a and with of in is".split()
tok = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + FILLERS
                    + [w for words in TOPICS.values() for w in words])
V, T, P = len(tok), 20, 5


def sentence(words, rng, n=6, p_topic=0.85):
    return " ".join(rng.choice(words) if rng.random() < p_topic else rng.choice(FILLERS) for _ in range(n))


text_rng = random.Random(15)
documents = [[sentence(TOPICS[NAMES[d % 4]], text_rng) for _ in range(4)] for d in range(200)]
corpus_path = OUT / "16_corpus.txt"
corpus_path.write_text("\n\n".join("\n".join(doc) for doc in documents) + "\n", encoding="utf-8")
instances = pd.create_training_instances([corpus_path], tok, max_seq_length=T, dupe_factor=5, short_seq_prob=0.1,
                                         masked_lm_prob=0.25, max_predictions_per_seq=P, rng=random.Random(12345))
batches = BatchIterator(pd.instances_to_features(instances, tok, T, P), batch_size=32, seed=0,
                           masking="dynamic", max_predictions_per_seq=P, vocab_size=V, mask_id=tok.mask_id,
                           special_ids=[tok.cls_id, tok.sep_id])
config = BertConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                    max_position_embeddings=T, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
bert = BertForPreTraining(config, seed=0)
adam, steps, t0 = optim.AdamW(bert.params, lr=2e-3, weight_decay=0.01), 400, time.perf_counter()
mlm = []
for step in range(steps):
    loss, grads, m = bert.loss_grads_metrics(batches.next_batch())
    adam.step(bert.params, optim.clip_by_global_norm(grads, 1.0)[0], optim.lr_at(step, 2e-3, steps // 10, steps))
    mlm.append(m.mlm_loss)
print(f"pretrained {steps} steps in {time.perf_counter() - t0:.1f} s: MLM loss {mlm[0]:.2f} -> "
      f"{np.mean(mlm[-20:]):.2f} (last 20 steps)")
assert np.mean(mlm[-20:]) < np.log(V) - 1.0, "pretraining must have learned (lesson 15 has the details)"
pretrained_dir = OUT / "16_pretrained"
bert.save_pretrained(pretrained_dir, vocab=tok)

# %% [markdown]
# ## 2. A tagging task where context matters
# Tag every word with the topic of its sentence, function words included (`-100`, no loss, on
# `[CLS]` and `[SEP]`, as in lesson 13). A topic word gives its tag away by itself; `the` or
# `with` can only be tagged from the words around it. So features without context (the
# embeddings) can tag the first kind and not the second.

# %%
L_TASK = 8  # [CLS] + 6 words + [SEP]
FILLER_IDS = tok.convert_tokens_to_ids(FILLERS)


def tagging_task(n, rng):
    """n sentences of 6 words, 3 or 4 of them from one topic, the rest function words."""
    y = rng.integers(0, 4, n)  # (n,) each sentence's topic
    ids = np.zeros((n, L_TASK), dtype=np.int64)  # (n, L_TASK)
    for i in range(n):
        k = int(rng.integers(3, 5))  # topic words in this sentence
        words = list(rng.choice(TOPICS[NAMES[y[i]]], k)) + list(rng.choice(FILLERS, 6 - k))
        rng.shuffle(words)
        ids[i] = [tok.cls_id, *tok.convert_tokens_to_ids(words), tok.sep_id]
    labels = np.repeat(y[:, None], L_TASK, axis=1)  # (n, L_TASK) the topic on every word
    labels[:, [0, -1]] = -100  # no tag on [CLS], [SEP]
    return dict(input_ids=ids, segment_ids=np.zeros_like(ids), input_mask=np.ones_like(ids), labels=labels)


train, dev = tagging_task(64, np.random.default_rng(1)), tagging_task(300, np.random.default_rng(2))
is_filler = np.isin(dev["input_ids"], FILLER_IDS)  # (N, L_TASK) the words only context can tag
is_topic = (dev["labels"] >= 0) & ~is_filler  # (N, L_TASK)
print(" ".join(f"{w}/{NAMES[t][:4] if t >= 0 else '-'}" for w, t in
               zip(tok.convert_ids_to_tokens(dev["input_ids"][0]), dev["labels"][0])))
print(f"dev: {int(is_topic.sum())} topic words, {int(is_filler.sum())} function words")
assert is_filler.sum() > 400 and is_topic.sum() > 900


def hits(logits, mask):
    """-> (right, total) over the positions in mask: ints."""
    return int(((logits.argmax(-1) == dev["labels"]) & mask).sum()), int(mask.sum())


# %% [markdown]
# ## 3. What trains, what does not
# Fine-tuning: `BertForTokenClassification` on the pretrained encoder, a new head, and every
# parameter in the optimizer. Feature-based: `minibert.finetune.frozen.FrozenFeatureTagger`
# (what `python -m minibert finetune --frozen ...` trains) keeps the loaded model as a frozen
# `encoder` and has one parameter dict, its head: `cls.w` `(D, K)` and `cls.b` `(K,)`, where
# `D = C` for one layer and `D = (L + 1) C` for `concat_all`, every hidden state side by side.
# Our encoder has 2 layers, so 3 hidden states: the paper's "last four" rows (`sum4`, `concat4`)
# need at least 3 layers, and `concat_all` is their 2-layer counterpart.

# %%
def load_token_model(seed=0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the "newly initialised classifier" warning (lesson 15)
        return BertForTokenClassification.from_pretrained(pretrained_dir, num_labels=4, seed=seed)


fine = load_token_model()
encoder_size = sum(v.size for k, v in fine.params.items() if not k.startswith("cls."))  # embeddings + layers
frozen = {how: FrozenFeatureTagger(load_token_model(), how, 4, seed=0) for how in ("embeddings", "last", "concat_all")}
C, K, L = config.hidden_size, 4, config.num_hidden_layers
print(f"fine-tuning trains {fine.num_parameters:,} parameters")
for how, tagger in frozen.items():
    D = tagger.params["cls.w"].shape[0]
    print(f"feature-based ({how:10}) trains {tagger.num_parameters:,} = {D} * {K} + {K}; "
          f"(its frozen encoder's {encoder_size:,} are never updated)")
    assert sorted(tagger.params) == ["cls.b", "cls.w"] and tagger.num_parameters == D * K + K
assert frozen["last"].params["cls.w"].shape == (C, K) and frozen["concat_all"].params["cls.w"].shape == ((L + 1) * C, K)
assert fine.num_parameters == encoder_size + C * K + K  # no pooler: a tagger reads every position
assert encoder_size == sum(v.size for k, v in bert.params.items() if not k.startswith(("mlm.", "nsp.", "pool.")))

# %% [markdown]
# **The encoder's backward never runs.** Every backward in minibert is a call to a layer's
# `*_backward` function on the model's `ops` module (`minibert.kernels`, or `minibert.layers` with
# `MINIBERT_BACKEND=numpy`). We wrap each of them with a counter for one step of each: fine-tuning
# runs the backward of every layer, attention included; the frozen tagger's `loss_grads_metrics`
# stops at its head (one linear layer and its dropout) and returns gradients for the head only.

# %%
def count_backward_calls(step, ops):
    """Run step() with every ops.*_backward counted -> (Counter {name: calls}, step's result)."""
    names = [n for n in dir(ops) if n.endswith("_backward") and callable(getattr(ops, n))]
    saved, counts = {n: getattr(ops, n) for n in names}, Counter()

    def spy(name, fn):
        def counted(*args, **kwargs):
            counts[name] += 1
            return fn(*args, **kwargs)
        return counted

    for n in names:
        setattr(ops, n, spy(n, saved[n]))
    try:
        out = step()
    finally:
        for n in names:
            setattr(ops, n, saved[n])  # the module as it was
    return counts, out


batch = {k: v[:16] for k, v in train.items()}
fine_calls, (_, fine_grads) = count_backward_calls(lambda: fine.loss_and_grads(batch), fine.ops)
frozen_calls, (_, frozen_grads, _) = count_backward_calls(lambda: frozen["last"].loss_grads_metrics(batch),
                                                          frozen["last"].ops)
print("backward calls, fine-tuning step:  ", dict(sorted(fine_calls.items())))
print("backward calls, feature-based step:", dict(sorted(frozen_calls.items())))
print(f"gradients returned: {len(fine_grads)} tensors vs {sorted(frozen_grads)}")
assert fine_calls["attention_backward"] == L and fine_calls["layernorm_backward"] >= 2 * L
assert frozen_calls["attention_backward"] == 0 and frozen_calls["layernorm_backward"] == 0
assert frozen_calls["linear_backward"] == 1  # the head's: logits = x @ w + b
assert sorted(frozen_grads) == ["cls.b", "cls.w"] and sorted(fine_grads) == sorted(fine.params)


# %% [markdown]
# ## 4. Train both ways and compare
# The same recipe for all four but the learning rate: AdamW with warm-up and linear decay,
# clipping at 1, batches of 16 in the same order, 100 steps, dropout off. A head on frozen features starts from features that
# will not move towards it, so it takes a larger learning rate (1e-2, as the `--frozen` test in
# tests/finetune/test_finetune_train.py; fine-tuning: 2e-3, lesson 15's). We snapshot every encoder weight
# of the frozen taggers before training, to compare after.

# %%
def train_model(model, lr, seed=0, steps=100, batch_size=16):
    """Train model.params in place with the model's own loss_grads_metrics -> the final dev logits."""
    rng = np.random.default_rng(seed)
    adam = optim.AdamW(model.params, lr=lr, weight_decay=0.01)
    for step in range(steps):
        rows = rng.choice(len(train["labels"]), batch_size, replace=False)  # (batch_size,)
        _, grads, _ = model.loss_grads_metrics({k: v[rows] for k, v in train.items()})
        adam.step(model.params, optim.clip_by_global_norm(grads, 1.0)[0], optim.lr_at(step, lr, steps // 10, steps))
    return model.forward(dev["input_ids"])  # (N, L_TASK, K)


before = {how: {k: v.copy() for k, v in t.encoder.params.items()} for how, t in frozen.items()}
t0 = time.perf_counter()
results = {"fine-tuning": train_model(fine, 2e-3)}
for how, tagger in frozen.items():
    results[f"frozen: {how}"] = train_model(tagger, 1e-2)
print(f"4 runs in {time.perf_counter() - t0:.1f} s")
table = {name: (hits(logits, is_topic), hits(logits, is_filler)) for name, logits in results.items()}
print(f"{'':20} {'topic words':>14} {'function words':>16}")
for name, ((a, n), (b, m)) in table.items():
    print(f"{name:20} {a:5}/{n} {100 * a / n:4.0f}% {b:5}/{m} {100 * b / m:4.0f}%")

for how, tagger in frozen.items():
    for k, v in tagger.encoder.params.items():
        assert np.array_equal(v, before[how][k]), k  # exact: a frozen weight is never written
print("every encoder weight of the three frozen taggers is bit-identical to before training")

# %% [markdown]
# The assertions compare integer counts of right tags:

# %%
pct = {name: (100 * a / n, 100 * b / m) for name, ((a, n), (b, m)) in table.items()}
assert pct["fine-tuning"][0] >= 95 and pct["fine-tuning"][1] >= 90, "fine-tuning tags both kinds of word"
for how in ("last", "concat_all"):
    assert min(pct[f"frozen: {how}"]) >= 85, f"frozen {how}: features with context tag both kinds"
    assert pct["fine-tuning"][1] - pct[f"frozen: {how}"][1] <= 10, "within a few points of fine-tuning"
assert pct["frozen: embeddings"][0] >= 90, "the embeddings know each topic word"
assert pct["frozen: embeddings"][1] <= 40, "but the function words need context they do not have"

print("dev words tagged right, of the function words (the ones that need context): "
      + ", ".join(f"{name} {b}/{m}" for name, (_, (b, m)) in table.items()))
misses = {name: (n - a) + (m - b) for name, ((a, n), (b, m)) in table.items()}
assert all(misses[k] <= 5 for k in ("fine-tuning", "frozen: last", "frozen: concat_all")), misses
fig, ax = plt.subplots(figsize=(7, 3.4))
names = list(pct)
xs = np.arange(len(names))  # (4,)
ax.bar(xs - 0.2, [pct[n][0] for n in names], 0.4, label="topic words")
ax.bar(xs + 0.2, [pct[n][1] for n in names], 0.4, label="function words (need context)")
ax.axhline(25, color="grey", ls=":", lw=1, label="chance")
ax.set_xticks(xs, [n.replace(": ", ":\n") for n in names])
ax.set_ylabel("dev tag accuracy (%)")
ax.set_ylim(0, 125)
ax.legend(loc="upper center", ncol=3, fontsize=8)
fig.tight_layout()
show(fig, "16_feature_vs_finetune.png")

# %% [markdown]
# What the table says, as Table 7 did at full size:
#
# - **Layers with context win.** The embeddings layer is a lookup: `the` has one vector whatever
#   the sentence, so its tag is a guess. Every layer above it has attended to the rest of the
#   sentence. In BERT-base the embeddings row is 91.0 F1, the worst of Table 7: names are far less
#   ambiguous than `the`, so context matters less there than here, but it still matters.
# - **Frozen can be as good, when pretraining already put the answer in a layer.** Here the topic
#   of a sentence is what MLM and NSP had to learn, so the last layer holds it and a linear head
#   reads it off; frozen and fine-tuned are level, each within a word or two of a perfect score
#   on both kinds of word (the counts printed above the picture). When the task needs
#   something pretraining did not put there, only fine-tuning can reshape the encoder for it, and
#   concatenating several layers lets a frozen head pick from more of what is there (the paper's
#   best feature-based row, the last four layers concatenated, is 0.3 F1 behind fine-tuning).
# - **Frozen is cheap.** No encoder backward (the counted calls), no optimizer state for the
#   encoder, a head of `D * K + K` numbers per task, and the features of a fixed training set can be
#   computed once: with dropout off, the frozen encoder gives the same vectors every epoch. Then
#   training the head is a linear classifier on a table of numbers, the two exercises below.
#
# `python -m minibert finetune TASK --frozen last|second_to_last|embeddings|sum4|concat4|concat_all`
# runs the feature-based approach on real data (docs/finetuning.md: on WNUT-17 the tiny model
# gives 0 F1 both ways, a task out of its reach).

# %% [markdown]
# ## 5. The paper's tagger: a BiLSTM on the features
# The paper did not put a linear layer on its frozen features but "a randomly initialized
# two-layer 768-dimensional BiLSTM before the classification layer" (§5.3). A BiLSTM reads the
# sentence itself, left to right and right to left (`minibert/finetune/bilstm.py`, its backward
# written out and checked against `torch.nn.LSTM`), so it can bring context to features that have
# none. `FrozenFeatureTagger(..., tagger="bilstm")` puts one such layer (C/2 units each way) on
# the frozen features; here on the context-free embeddings, where the linear head could not tag
# the function words.

# %%
lstm_tagger = FrozenFeatureTagger(load_token_model(), "embeddings", K, seed=0, tagger="bilstm")
print(f"BiLSTM tagger: {lstm_tagger.num_parameters:,} trained parameters "
      f"({sum(v.size for k, v in lstm_tagger.params.items() if k.startswith('lstm.')):,} of them the BiLSTM's)")
lstm_logits = train_model(lstm_tagger, 1e-2)
(a, n), (b, m) = hits(lstm_logits, is_topic), hits(lstm_logits, is_filler)
print(f"{'frozen: emb. + BiLSTM':20} {a:5}/{n} {100 * a / n:4.0f}% {b:5}/{m} {100 * b / m:4.0f}%")
assert 100 * b / m >= pct["frozen: embeddings"][1] + 40, "the BiLSTM reads the context the embeddings lack"
assert 100 * a / n >= 90

# %% [markdown]
# The embeddings did not change (they are frozen); the tagger did. So a feature-based score
# measures the features *and* the tagger: with a BiLSTM, even context-free features tag words that
# need context, because the tagger learns the context from the labels. The paper's choice makes
# the feature-based rows closer to fine-tuning; a linear head isolates what the features hold.
# `python -m minibert finetune TASK --frozen concat_all --frozen-tagger bilstm` is this on real data.

# %% [markdown]
# ## Exercises
# Replace each `raise NotImplementedError(...)` with your code and re-run; the cell after the
# stubs grades your functions and names the check that failed and by how much. A stub left as it
# is makes the lesson go on with the reference solution
# (`lessons/solutions/16_feature_based_vs_finetuning.py`).
#
# 1. `my_concat_layers(states, which)`: the feature-based input. `states` is the list of `L + 1`
#    hidden states `(B, T, C)` (`encoder_layers` / `model.hidden_states`), `which` a list of
#    indices into it (`[-1, -2]`: the last two layers). Return them side by side, in the order
#    given, `(B, T, len(which) * C)` (`frozen.combine_layers`'s `concat_all` is `which = [-1, -2,
#    ..., -(L+1)]`). Graded slice by slice, on hidden states the grader draws: each `C`-wide block
#    of the result must be the hidden state asked for.
# 2. `my_head_grads(x, labels, w, b)`: the backward of a head on frozen features, which stops at
#    the head: `x (B, T, D)` features, `labels (B, T)` with `-100` for no tag, `logits = x @ w + b`
#    `(B, T, K)`, loss = the mean cross-entropy over the tagged positions. Return `(dw (D, K),
#    db (K,))`, and nothing for `x`: it is not trained. `dw` and `db` are each graded against the
#    numerical gradient, on the frozen features of training sentences the grader draws
#    (with a head it draws) and on random ones.

# %%
def my_concat_layers(states, which):
    """list of (B, T, C), list of indices -> (B, T, len(which) * C)"""
    raise NotImplementedError("exercise 1: concatenate the chosen hidden states")  # your code here


def my_head_grads(x, labels, w, b):
    """x (B, T, D), labels (B, T) ints (-100: none), w (D, K), b (K,) -> dw (D, K), db (K,)"""
    raise NotImplementedError("exercise 2: the head's backward, stopping at the features")  # your code here


# %%
ex = course.Exercises("16_feature_based_vs_finetuning")
tagger = frozen["concat_all"]
states = tagger.encoder.hidden_states(dev["input_ids"][:5])  # L + 1 arrays (5, L_TASK, C)


def fresh_states(seed):
    """The grader's own L + 1 hidden states (B, T, C), drawn now at this model's shapes."""
    r = np.random.default_rng(seed)
    return [r.standard_normal((3, 4, states[0].shape[-1])) for _ in states]


def check_concat_layers(fn):
    hs = fresh_states(1601)
    C_ = hs[0].shape[-1]
    results = []
    for which in ([-1, -2, -3], [-1], [0, -1]):
        got = np.asarray(fn([h.copy() for h in hs], which))
        if got.shape != hs[0].shape[:2] + (len(which) * C_,):
            results.append(course.equal(f"{which}: shape", got.shape, hs[0].shape[:2] + (len(which) * C_,)))
            continue
        for slot, i in enumerate(which):  # each C-wide block, in the order asked for
            results.append(course.close(f"{which}: block {slot} = states[{i}]", got[..., slot * C_:(slot + 1) * C_],
                                        hs[i]))
    return results


def check_head_grads(fn):
    rng = np.random.default_rng(1602)
    rows = rng.choice(len(train["labels"]), 8, replace=False)  # 8 training sentences, drawn now
    labels8 = train["labels"][rows].copy()
    labels8[0, 1:4] = -100  # some words without a tag too
    x_real = tagger.features(train["input_ids"][rows]).astype(np.float64)  # (8, L_TASK, D) their frozen features
    D_, K_ = tagger.params["cls.w"].shape
    w_real, b_real = 0.1 * rng.standard_normal((D_, K_)), 0.1 * rng.standard_normal(K_)  # a head, drawn now
    x64 = rng.standard_normal((2, 5, 6))  # random features
    y64 = rng.integers(0, 3, (2, 5))
    y64[rng.random((2, 5)) < 0.3] = -100
    y64[0, 0] = 1
    w64, b64 = rng.standard_normal((6, 3)), rng.standard_normal(3)
    results = []
    for label, x, y, w, b in (("frozen features", x_real, labels8, w_real, b_real), ("random", x64, y64, w64, b64)):
        def loss(w_, b_, x=x, y=y, part="both"):
            z = x @ w_ + b_  # (B, T, K)
            top = z.max(-1, keepdims=True)  # (B, T, 1) for a stable log-sum-exp, added back: each part is exact
            keep = y >= 0
            picked = np.take_along_axis(z, np.where(keep, y, 0)[..., None], -1)[..., 0]  # (B, T)
            lse = (top + np.log(np.exp(z - top).sum(-1, keepdims=True)))[..., 0]  # (B, T)
            per = {"both": lse - picked, "target": -picked, "softmax": lse}[part]
            return float(per[keep].mean())

        wn, bn = w.copy(), b.copy()
        dw, db = fn(x.copy(), y.copy(), w.copy(), b.copy())
        n = int((y >= 0).sum())
        share = {"(tagged / all positions)": n / y.size,  # a mean over every position
                 f"n = {n} (the tagged positions: a sum where the loss takes their mean)": n}

        def parts(a):  # the gradient of each part of the loss on its own, for close's terms
            return lambda: {
                "the term from -z_t (the tag's own logit: -1 at the tag, the one-hot)":
                numerical_grad_scalar(lambda: loss(wn, bn, part="target"), a),
                "the term from log sum exp z (the softmax: probs on every class)":
                numerical_grad_scalar(lambda: loss(wn, bn, part="softmax"), a)}

        results += [course.close(f"dw, {label}, vs numerical gradient", dw,
                                 numerical_grad_scalar(lambda: loss(wn, bn), wn), factors=share, terms=parts(wn)),
                    course.close(f"db, {label}, vs numerical gradient", db,
                                 numerical_grad_scalar(lambda: loss(wn, bn), bn), factors=share, terms=parts(bn))]
    return results


my_concat_layers = ex.grade(1, my_concat_layers, check_concat_layers,
                            refuses=("finetune.frozen.combine_layers",))
my_head_grads = ex.grade(2, my_head_grads, check_head_grads, paths=("dw", "db"),
                         refuses=("finetune.frozen.FrozenFeatureTagger.loss_grads_metrics",
                                  "layers.cross_entropy_backward", "kernels.cross_entropy_backward",
                                  "layers.linear_backward", "kernels.linear_backward"))
assert np.array_equal(my_concat_layers(states, [-1, -2, -3]), combine_layers(states, "concat_all"))  # the library's
_, lib_grads, _ = tagger.loss_grads_metrics({k: v[:8] for k, v in train.items()})  # float32, dropout off
mine32 = my_head_grads(tagger.features(train["input_ids"][:8]).astype(np.float64), train["labels"][:8],
                       tagger.params["cls.w"].astype(np.float64), tagger.params["cls.b"].astype(np.float64))
print("your head gradients against FrozenFeatureTagger's (float32):")
for r in (course.close("dw", mine32[0], lib_grads["cls.w"], rtol=1e-4, atol=1e-6, float32=True),
          course.close("db", mine32[1], lib_grads["cls.b"], rtol=1e-4, atol=1e-6, float32=True)):
    print(r.row())
    assert r.ok, r

# %% [markdown]
# ## Recap
# - Feature-based: the encoder frozen (its backward never runs, its weights stay bit-identical),
#   a head of `D * K + K` parameters on chosen hidden states. Fine-tuning: everything trains.
# - Hidden states with context (any layer above the embeddings) tag words whose label depends on
#   their neighbours; the embeddings alone cannot. With them, the frozen head comes within a few
#   points of fine-tuning, as in the paper's Table 7 (here, on an easy task, level with it).
#
# **Next:** the lessons that follow take BERT's successors apart (lessons/README.md lists them).

# %%
print("lesson 16 passed")
