# %% [markdown]
# # Lesson 11: pretraining a tiny BERT
#
# **Goal.** Put the pieces together and train. Lesson 10 gave us the loss and every gradient;
# this lesson adds what turns gradients into learning, exactly as the original BERT did it:
# the **AdamW** optimizer (with BERT's quirk: no bias correction), the **learning-rate
# schedule** (warmup, then linear decay, overlapping), and **global-norm clipping**. Then we
# pretrain a tiny BERT on a small corpus and watch the loss fall.
#
# **Finish line.** BERT's AdamW moves a parameter by `3.16 * lr` on its first step where
# PyTorch's moves it by `1 * lr`; the schedule drops at the end of warmup; clipping rescales
# only gradients whose joint norm exceeds 1; the training loss starts near `ln V + ln 2`, and
# the MLM loss ends below the unigram entropy (the model uses the context). Pictures:
# `lessons/out/11_schedule.png`, `lessons/out/11_adam_first_steps.png`, `lessons/out/11_loss.png`.
# The trained model is saved to `lessons/out/11_tiny_bert/` for lesson 12. `MINIBERT_FAST=1`
# trains 200 steps instead of 1000 (about 10-25 s instead of a minute or two on 2 cores).

# %% [markdown]
# ## Setup
# The model here is so small that one thread is fastest: waking extra threads for each small
# matrix product costs more than the product, and on a busy machine much more (measured: about
# 30 ms per training step on one thread, 160-600 ms with two threads while other programs ran).
# So we ask OpenBLAS and Numba for one thread, before NumPy is imported. An explicit setting
# in your environment wins.

# %%
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import math  # noqa: E402
import random  # noqa: E402
import time  # noqa: E402

import minibert  # noqa: E402,F401  before NumPy: sets OPENBLAS_THREAD_TIMEOUT (lesson 06)
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import course  # noqa: E402  lessons/course.py: where pictures go, how exercises are graded
from course import FAST, OUT, ROOT, show  # noqa: E402  FAST (CI): fewer training steps
from minibert import optim  # noqa: E402
from minibert.data import pretraining_data as pd  # noqa: E402
from minibert.data.shards import BatchIterator  # noqa: E402
from minibert.bert import BertForPreTraining  # noqa: E402
from minibert.model import BertConfig  # noqa: E402
from minibert.text.tokenizer import BertTokenizer  # noqa: E402
from minibert.text.wordpiece_trainer import train_wordpiece  # noqa: E402

# %% [markdown]
# ## AdamW as BERT does it
# For every parameter `p` with gradient `g`, every step (Google's `AdamWeightDecayOptimizer`):
#
#     m = b1 * m + (1 - b1) * g          # running mean of the gradient      (b1 = 0.9)
#     v = b2 * v + (1 - b2) * g * g      # running mean of its square        (b2 = 0.999)
#     update = m / (sqrt(v) + eps)       # about +-1 per element: Adam's step has a fixed size
#     update += wd * p                   # weight decay, only for weights (not biases, LayerNorm)
#     p = p - lr * update
#
# `m` and `v` start at 0, so for the first steps they are too small. Adam's paper divides them
# by `1 - b1**t` and `1 - b2**t` ("bias correction"); PyTorch's `AdamW` does. **BERT does not**
# (its authors called it an oversight that warmup makes harmless). On step 1 with gradient `g`:
# `m = 0.1 g`, `v = 0.001 g^2`, so `update = 0.1 g / (0.0316 |g|) = 3.16 sign(g)`, not `1`.

# %%
g = np.array([0.5, -3.0, 0.05])  # (3,) a constant gradient, three very different sizes
moves = {}
for bias_correction in (False, True):
    p = {"w": np.zeros(3)}  # (3,)
    adam = optim.AdamW(p, lr=1.0, weight_decay=0.0, bias_correction=bias_correction)
    sizes = []
    for step in range(3000):
        before = p["w"].copy()  # (3,)
        adam.step(p, {"w": g})
        sizes.append(np.abs(before - p["w"]))  # (3,) how far each element moved (lr = 1)
    moves[bias_correction] = np.array(sizes)  # (3000, 3)
print("first step, BERT (no bias correction):", moves[False][0].round(3))
print("first step, PyTorch (bias correction): ", moves[True][0].round(3))
assert np.allclose(moves[False][0], math.sqrt(10), rtol=1e-3)  # 0.1 / sqrt(0.001) = 3.162
assert np.allclose(moves[True][0], 1.0, rtol=1e-3)
biggest = moves[False][:, 0].max()
print(f"BERT's largest step: {biggest:.2f} at step {moves[False][:, 0].argmax() + 1}; "
      f"after 3000 steps: {moves[False][-1, 0]:.3f}")
assert biggest > 6  # v (b2 = 0.999) warms up far slower than m (b1 = 0.9)
assert np.allclose(moves[False][-1], moves[True][-1], rtol=0.05)  # they meet, eventually

fig, ax = plt.subplots(figsize=(5, 3.5))
steps = np.arange(1, len(moves[False]) + 1)
ax.semilogx(steps, moves[False][:, 0], label="BERT: no bias correction")
ax.semilogx(steps, moves[True][:, 0], "--", label="PyTorch AdamW: bias correction")
ax.set_xlabel("step")
ax.set_ylabel("|update| / lr  (constant gradient)")
ax.legend()
fig.tight_layout()
show(fig, "11_adam_first_steps.png")

# %% [markdown]
# It gets stronger before it fades: `m` forgets its zero start within ~20 steps (b1 = 0.9), `v`
# needs thousands (b2 = 0.999), so for a while `update = m / sqrt(v)` reaches about 6.6 `lr`
# (around step 12) and is back near 1 only after a few thousand steps. Warmup keeps `lr`
# small exactly in that period, which is why the missing correction "does not really matter"
# (picture: `lessons/out/11_adam_first_steps.png`).
#
# Note also that all three elements moved by the same amount although the gradients differ by
# a factor of 60: Adam divides by the gradient's own size. That is why the learning rate, not
# the gradient scale, sets how far parameters move.
#
# **Weight decay** pulls weights toward 0 by `lr * wd * p` per step, outside `m` and `v`
# ("decoupled"). BERT excludes biases and LayerNorm parameters (`optim.is_decayed`).

# %%
params = {"h0.attn.qkv.w": np.ones(2), "h0.attn.qkv.b": np.ones(2), "h0.ln1.w": np.ones(2)}
zero_grads = {k: np.zeros(2) for k in params}
optim.AdamW(params, lr=0.1, weight_decay=0.01).step(params, zero_grads)
for name, value in params.items():
    print(f"{name:14} decayed={optim.is_decayed(name)!s:5}  after one step: {value[0]:.4f}")
assert np.allclose(params["h0.attn.qkv.w"], 1 - 0.1 * 0.01)  # only the weight shrank
assert np.allclose(params["h0.attn.qkv.b"], 1) and np.allclose(params["h0.ln1.w"], 1)

# %% [markdown]
# ## The learning-rate schedule: warmup and decay, overlapping
# BERT raises the rate linearly from 0 over `W` warmup steps, then lowers it linearly to 0 at
# the last step `T` (called `T_steps` in the code: `T` is the sequence length elsewhere). In
# Google's code the decay does not start where the warmup ends: it starts at step 0, *under* the
# warmup, and the warmup simply wins while `t < W`. The picture draws `optim.lr_at` against
# Hugging Face's schedule, which decays from the peak instead. What is `lr(t)`, and what happens
# at `t = W`? That is exercise 2; the formula and its consequence come after the exercises.

# %%
peak, W, T_steps = 1e-3, 20, 100
lrs = [optim.lr_at(t, peak, W, T_steps) for t in range(T_steps + 1)]
fig, ax = plt.subplots(figsize=(7, 3.5))
ax.plot(range(T_steps + 1), lrs, label='BERT (schedule="bert")')
ax.plot(range(T_steps + 1), [optim.lr_at(t, peak, W, T_steps, schedule="hf") for t in range(T_steps + 1)], "--",
        label='Hugging Face (schedule="hf")')
ax.axvline(W, color="grey", lw=0.8, ls=":", label=f"end of warmup (t = {W})")
ax.set_xlabel("global step t")
ax.set_ylabel("learning rate")
ax.legend()
fig.tight_layout()
show(fig, "11_schedule.png")
assert lrs[0] == 0.0 and lrs[T_steps] == 0.0  # the first update does nothing

# %% [markdown]
# ## Global-norm clipping
# Before the update, all gradients are treated as one long vector. If its length (L2 norm)
# is above 1, every gradient is scaled by `1 / norm`: the direction is kept, only the step is
# shortened. One bad batch then cannot throw the parameters far away.

# %%
grads = {"a": np.array([3.0, 0.0]), "b": np.array([[4.0]])}  # joint norm sqrt(9 + 16) = 5
clipped, norm = optim.clip_by_global_norm(grads, 1.0)
print(f"norm before {norm}, after {optim.global_norm(clipped):.6f}")
assert norm == 5.0 and math.isclose(optim.global_norm(clipped), 1.0)
assert np.allclose(clipped["a"], [0.6, 0.0]) and np.allclose(clipped["b"], [[0.8]])
small = {"a": np.array([0.3, 0.4])}  # norm 0.5: left alone
assert optim.clip_by_global_norm(small, 1.0)[0]["a"] is small["a"]

# %% [markdown]
# ## Exercises
# Here, before the data and the training run (the slow part of this lesson), so that each
# retry is quick. Replace each `raise NotImplementedError(...)` with your code and re-run; the cell after the
# stubs grades your functions and names the check that failed and by how much. A stub left as it is makes the lesson go on with the reference solution
# (`lessons/solutions/11_pretrain_tiny.py`).
#
# 1. `my_update_size(t, b1, b2)`: the size of BERT's AdamW update, `|update| / lr`, at step `t`
#    (1, 2, ...) for a gradient that is the same at every step, without bias correction and
#    without weight decay. The first section worked out step 1 (3.16); write `m` and `v` after `t`
#    steps as sums (geometric series) and simplify. Ignore `eps`. Graded against the sizes
#    measured with `optim.AdamW` as in the first section, steps 1 to 3000, for a gradient the
#    grader draws, and for a (b1, b2) it draws.
# 2. `my_lr(t, peak, W, T)`: BERT's overlapping warmup/decay schedule (the picture of section 2).
#    Graded on known values, worked out by hand, and on a schedule it draws.
# 3. `my_clip(grads, max_norm)`: global-norm clipping of a dict of arrays; returns a new dict.

# %%
def my_update_size(t, b1=0.9, b2=0.999):
    """t (int or array of steps 1, 2, ...) -> |update| / lr for a constant gradient, no bias correction"""
    raise NotImplementedError("exercise 1: the size of Adam's update at step t")  # your code here


def my_lr(t, peak, W, T):
    """-> the learning rate at global step t"""
    raise NotImplementedError("exercise 2: write BERT's schedule")  # your code here


def my_clip(grads, max_norm):
    """{name: array} -> {name: array}, all scaled together to a joint norm of at most max_norm"""
    raise NotImplementedError("exercise 3: write global-norm clipping")  # your code here


# %%
ex = course.Exercises("11_pretrain_tiny")
def measured_sizes(g, steps, b1=0.9, b2=0.999):
    """|update| / lr of optim.AdamW (no bias correction, no weight decay) for the constant gradient g
    (C,), step by step: the grader's own measurement, on a gradient it draws. (steps, C)"""
    p = {"w": np.zeros_like(g)}  # (C,)
    adam = optim.AdamW(p, lr=1.0, beta1=b1, beta2=b2, weight_decay=0.0, bias_correction=False)
    sizes = []
    for _ in range(steps):
        before = p["w"].copy()  # (C,)
        adam.step(p, {"w": g})
        sizes.append(np.abs(before - p["w"]))  # (C,)
    return np.array(sizes)  # (steps, C)


def moments(steps, b1, b2, g=1.0):
    """m and v after each of `steps` steps of Adam's moment updates for the constant gradient g,
    step by step from 0, as AdamW keeps them (steps,) each."""
    m, v, ms, vs = 0.0, 0.0, [], []
    for _ in range(steps):
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        ms.append(m)
        vs.append(v)
    return np.array(ms), np.array(vs)


def update_size_slips(steps, b1=0.9, b2=0.999):
    """The sizes the usual slips give, step by step, for close(..., wrongs=...)."""
    m, v = moments(steps + 1, b1, b2)  # (steps + 1,) each
    t = np.arange(1, steps + 2)  # (steps + 1,)
    return {"1 at every step: that is Adam with bias correction (m / (1 - b1^t) over sqrt(v / (1 - b2^t))); "
            "BERT's AdamW, measured here, has none": np.ones(steps),
            "m / v: the square root of v left out": (m / v)[:steps],
            "the sizes one step later (t + 1): step t = 1 is the update made with m and v after one step":
            (m / np.sqrt(v))[1:],
            "b1 and b2 swapped": (1 - b2**t[:steps]) / np.sqrt(1 - b1**t[:steps]),
            "m and v as the sums of the b^k alone: each step adds (1 - b1) g to m and (1 - b2) g^2 to v, so those "
            "factors stay": (m / (1 - b1) / np.sqrt(v / (1 - b2)))[:steps]}


def check_update_size(fn):
    r = np.random.default_rng(1101)  # a constant gradient and a second (b1, b2), drawn now
    g = r.uniform(0.5, 3.0, 3) * r.choice([-1.0, 1.0], 3)  # (3,) well above eps, so eps does not show
    b1, b2 = round(float(r.uniform(0.5, 0.95)), 3), round(float(r.uniform(0.9, 0.999)), 4)
    t = np.arange(1, 3001)  # (3000,) steps
    measured = measured_sizes(g, len(t))  # (3000, 3) the same for every element: the ratio does not depend on g
    t2 = np.arange(1, 301)  # (300,)
    measured2 = measured_sizes(g[:1], len(t2), b1, b2)[:, 0]  # (300,)
    return [course.close("steps 1..3000 vs optim.AdamW's measured steps", fn(t), measured[:, 0], rtol=2e-4,
                         wrongs=lambda: update_size_slips(len(t))),
            course.close(f"b1 = {b1:g}, b2 = {b2:g}, steps 1..300 vs optim.AdamW's measured steps", fn(t2, b1, b2),
                         measured2, rtol=2e-4, wrongs=lambda: update_size_slips(len(t2), b1, b2)),
            course.close("b1 = 0.5, b2 = 0.9, step 2 (worked out by hand)", fn(2, 0.5, 0.9), 1.720618004029213,
                         rtol=1e-9, atol=1e-12,
                         wrongs=lambda: {k: w[1] for k, w in update_size_slips(2, 0.5, 0.9).items()})]


def check_lr(fn):
    # peak 1e-3, W = 20, T = 100: values worked out by hand
    want = {0: 0.0, 10: 5e-4, 19: 9.5e-4, 20: 8e-4, 21: 7.9e-4, 60: 4e-4, 100: 0.0}
    results = [course.close(f"t = {list(want)}", [fn(t, 1e-3, 20, 100) for t in want], list(want.values()),
                            rtol=1e-12, atol=1e-15),
               course.close("no warmup (W = 0): t = 0, 25 of 50", [fn(t, 1e-3, 0, 50) for t in (0, 25)],
                            [1e-3, 5e-4], rtol=1e-12, atol=1e-15)]
    r = np.random.default_rng(1102)  # a schedule drawn now: what every such schedule keeps
    peak, T = float(r.uniform(1e-4, 1e-2)), int(r.integers(200, 2000))
    W = int(r.integers(10, T // 3))
    ts = np.unique(np.r_[0, W, T, r.integers(1, T, 30)])  # (n,) steps
    lrs = np.array([fn(int(t), peak, W, T) for t in ts])  # (n,)
    after = lrs[ts >= W]  # from the end of warmup on
    shaped = bool(np.all((lrs >= 0) & (lrs <= peak)) and np.all(np.diff(after) < 0))
    return results + [
        course.close(f"peak {peak:.3g}, W = {W}, T = {T}: 0 at t = 0 and t = T", [lrs[0], lrs[-1]], [0.0, 0.0],
                     rtol=0, atol=1e-15),
        course.true(f"peak {peak:.3g}, W = {W}, T = {T}: between 0 and peak, falling after warmup", shaped,
                    "" if shaped else f"at t = {ts.tolist()}: {lrs.round(6).tolist()}"),
        course.close(f"peak {peak:.3g} and 2 x peak: the rate scales with peak",
                     [fn(int(t), 2 * peak, W, T) for t in ts], 2 * lrs, rtol=1e-12, atol=1e-18)]


def check_clip(fn):
    small = {"a": np.array([3.0, 0.0]), "b": np.array([[4.0]])}  # joint norm 5
    results = [course.close("{a: [3, 0], b: [[4]]} to norm 1: a", fn(small, 1.0)["a"], [0.6, 0.0]),
               course.close("{a: [3, 0], b: [[4]]} to norm 1: b", fn(small, 1.0)["b"], [[0.8]]),
               course.close("norm 5 under max_norm 10: unchanged", fn(small, 10.0)["b"], [[4.0]])]
    r = np.random.default_rng(1103)  # arrays drawn now, of drawn shapes and sizes
    big = {"a": r.standard_normal((3, 4)) * r.uniform(2, 8), "b": r.standard_normal(5) * r.uniform(2, 8),
           "c": r.standard_normal((2, 2, 3))}
    norm = float(np.sqrt(sum((x * x).sum() for x in big.values())))  # the joint norm, of order 10..30
    for max_norm in (round(float(r.uniform(0.2, 0.8)), 2), round(norm * 3, 1)):
        mine = fn({k: x.copy() for k, x in big.items()}, max_norm)
        factors = [float(np.linalg.norm(mine[k]) / np.linalg.norm(big[k])) for k in big]  # one per array
        after = float(np.sqrt(sum((np.asarray(x) ** 2).sum() for x in mine.values())))
        results += [course.close(f"max_norm {max_norm:g}: the same factor for every array", factors[1:],
                                 factors[:1] * (len(factors) - 1), rtol=1e-12),
                    course.close(f"max_norm {max_norm:g}: joint norm {min(norm, max_norm):.3g} after",
                                 after, min(norm, max_norm), rtol=1e-12)]
    return results


my_update_size = ex.grade(1, my_update_size, check_update_size,
                          refuses=("optim.AdamW", "kernels.adamw_update", "kernels.adamw_update_all"))
my_lr = ex.grade(2, my_lr, check_lr,
                 refuses=("optim.lr_at",))
my_clip = ex.grade(3, my_clip, check_clip,
                   refuses=("optim.clip_by_global_norm", "optim.global_norm", "kernels.sum_of_squares",
                            "kernels.scaled"))
peak_step = int(np.argmax(my_update_size(np.arange(1, 3001)))) + 1
print(f"BERT's uncorrected update is largest at step {peak_step}: {my_update_size(peak_step):.2f} x lr")

# %% [markdown]
# ## The schedule's formula (exercise 2's answer)
#
#     lr(t) = peak * t / W          if t < W
#     lr(t) = peak * (1 - t / T)    otherwise
#
# So the peak is never reached: at `t = W` the rate *drops* from `peak (W-1)/W` to
# `peak (1 - W/T)`. With BERT's own numbers (`W = 10 000`, `T = 1 000 000`) the drop is 1%; with
# short runs it is visible in the picture above.

# %%
print(f"lr(0)={lrs[0]}, lr(W-1)={lrs[W - 1]:.2e}, lr(W)={lrs[W]:.2e}, lr(T)={lrs[T_steps]}")
assert math.isclose(lrs[W - 1], peak * (W - 1) / W)  # the last warmup step
assert math.isclose(lrs[W], peak * (1 - W / T_steps))  # the decay line, already lower
assert lrs[W] < lrs[W - 1]  # the drop at the end of warmup
assert math.isclose(optim.lr_at(W, peak, W, T_steps, schedule="hf"), peak)  # HF reaches the peak


# %% [markdown]
# ## Data for the run
# A small corpus (one sentence per line, blank line between documents), a WordPiece vocab
# learned from it (lesson 08), and MLM/NSP features (lesson 09). With `dupe_factor` copies
# and *dynamic* masking, every batch sees fresh masks.

# %%
# the small corpus lessons 09 and 11 share (data/lessons_corpus.txt): ten documents of four
# sentences, one sentence per line, a blank line between documents
DOCUMENTS = [doc.split("\n") for doc in (ROOT / "data" / "lessons_corpus.txt").read_text(encoding="utf-8")
             .strip().split("\n\n")]  # list of documents, each a list of sentences
corpus_path = OUT / "11_corpus.txt"
corpus_path.write_text("\n\n".join("\n".join(doc) for doc in DOCUMENTS) + "\n", encoding="utf-8")
vocab = train_wordpiece([corpus_path], vocab_size=300, merge_rule="frequency", progress=False)
tok = BertTokenizer(vocab)
V, T, P = len(tok), 32, 5  # vocab size, max_seq_length, max_predictions_per_seq
instances = pd.create_training_instances(
    [corpus_path], tok, max_seq_length=T, dupe_factor=10, short_seq_prob=0.1,
    masked_lm_prob=0.15, max_predictions_per_seq=P, rng=random.Random(12345))
features = pd.instances_to_features(instances, tok, T, P)
batches = BatchIterator(features, batch_size=16, seed=0, masking="dynamic",
                           max_predictions_per_seq=P, vocab_size=V, mask_id=tok.mask_id,
                           special_ids=[tok.cls_id, tok.sep_id])
print(f"{len(instances)} instances, vocab {V}, {batches.batches_per_epoch} batches per epoch")

# %% [markdown]
# ## The model and the training loop
# A really tiny BERT: hidden size 64, 2 layers, 2 heads. Dropout is off (the corpus is tiny
# and we want to see memorisation). One step is five lines:
#
#     batch = batches.next_batch()                              # lesson 09's arrays
#     loss, grads = model.loss_and_grads(batch)                 # lesson 10
#     grads, norm = optim.clip_by_global_norm(grads, 1.0)       # clip
#     lr = optim.lr_at(step, peak, warmup, total)               # schedule
#     adam.step(model.params, grads, lr)                        # AdamW, in place
#
# Before training, the MLM loss should be about `ln V` (a uniform guess over the vocab) and the
# NSP loss about `ln 2` (a coin flip).

# %%
config = BertConfig(vocab_size=V, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=128, max_position_embeddings=T, hidden_dropout_prob=0.0,
                    attention_probs_dropout_prob=0.0)
model = BertForPreTraining(config, seed=0)
print(f"{model.num_parameters:,} parameters")
total_steps = 200 if FAST else 1000
warmup_steps = total_steps // 4  # a long warmup: see the discussion
peak_lr = 2e-3  # tiny models take a much larger rate than BERT-base's 1e-4
adam = optim.AdamW(model.params, lr=peak_lr, weight_decay=0.01)
history = []  # (step, loss, mlm_loss, nsp_loss, lr, grad_norm)
t0 = time.perf_counter()
for step in range(total_steps):
    batch = batches.next_batch()  # dict of (B, T), (B, P) and (B,) arrays
    loss, grads, m = model.loss_grads_metrics(batch)  # m: this batch's losses, hits and counts
    grads, norm = optim.clip_by_global_norm(grads, 1.0)
    lr = optim.lr_at(step, peak_lr, warmup_steps, total_steps)
    adam.step(model.params, grads, lr)
    history.append((step, m.loss, m.mlm_loss, m.nsp_loss, lr, norm))
    if step % (total_steps // 10) == 0 or step == total_steps - 1:
        print(f"step {step:4d}  loss {m.loss:.3f}  (mlm {m.mlm_loss:.3f}, nsp {m.nsp_loss:.3f})"
              f"  lr {lr:.2e}  grad norm {norm:.2f}")
seconds = time.perf_counter() - t0
print(f"{total_steps} steps in {seconds:.1f} s ({1000 * seconds / total_steps:.0f} ms/step)")
h = np.array(history)  # (steps, 6)
norms = h[:, 5]  # (steps,) the gradient norm before clipping
print(f"gradient norm before clipping: min {norms.min():.2f}, median {np.median(norms):.2f}, max "
      f"{norms.max():.2f}; above 1 (so clipped) at {np.mean(norms > 1.0):.0%} of the steps")

# %% [markdown]
# ## Did it learn?

# A useful yardstick: the **unigram entropy** `H` of the masked words. A model that ignores
# the context and always predicts the corpus's word frequencies gets an MLM loss of exactly
# `H`. Training first drops from `ln V` to about `H` (it learns which words are common), often
# sits there for a while (the "unigram plateau"), and goes *below* `H` only once it uses the
# context: that is the sign that attention started doing its job.

# %%
first_mlm, first_nsp = h[0, 2], h[0, 3]
print(f"initial: mlm {first_mlm:.3f} vs ln V = {math.log(V):.3f}; nsp {first_nsp:.3f} vs "
      f"ln 2 = {math.log(2):.3f}")
assert abs(first_mlm - math.log(V)) < 0.5 and abs(first_nsp - math.log(2)) < 0.2
labels = features["masked_lm_ids"][features["masked_lm_weights"] > 0]  # (n,) every masked word
freq = np.bincount(labels, minlength=V) / labels.size  # (V,)
H = -np.sum(freq[freq > 0] * np.log(freq[freq > 0]))
last_mlm = h[-10:, 2].mean()  # mean MLM loss of the last 10 steps
print(f"MLM loss: ln V = {math.log(V):.3f} -> last 10 steps {last_mlm:.3f}; unigram entropy H = "
      f"{H:.3f}")
print(f"total loss: step 0 {h[0, 1]:.3f} -> last 10 steps {h[-10:, 1].mean():.3f}")
assert last_mlm < math.log(V) - 0.6, "the MLM loss should fall well below ln V"
assert last_mlm < H - 0.15, "below the unigram entropy: the model must use the context"
assert h[-10:, 1].mean() < h[0, 1] - 0.7

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.5))
ax1.plot(h[:, 0], h[:, 1], label="total")
ax1.plot(h[:, 0], h[:, 2], label="MLM")
ax1.plot(h[:, 0], h[:, 3], label="NSP")
ax1.axhline(math.log(V) + math.log(2), color="grey", ls=":", label="ln V + ln 2")
ax1.axhline(H, color="grey", ls="--", label="unigram entropy H")
ax1.set_xlabel("step")
ax1.set_ylabel("training loss")
ax1.legend()
ax2.plot(h[:, 0], h[:, 4])
ax2.set_xlabel("step")
ax2.set_ylabel("learning rate")
fig.tight_layout()
show(fig, "11_loss.png")

# %% [markdown]
# ## Save the model for lesson 12
# `save_pretrained` writes the Hugging Face layout (`config.json`, `model.safetensors`,
# `vocab.txt`): `transformers.BertForPreTraining.from_pretrained` could load this directory.

# %%
run_dir = OUT / "11_tiny_bert"
model.save_pretrained(run_dir, vocab=tok.ids_to_tokens)
reloaded = BertForPreTraining.from_pretrained(run_dir)
for name, value in model.params.items():
    assert np.array_equal(reloaded.params[name], value), name
print(f"saved to {run_dir}")

# %% [markdown]
# ## Discussion
# - The quick drop is the model learning word frequencies; the plateau near `H` is normal.
#   `python -m minibert train` is this loop plus held-out evaluation, checkpoints and an exact
#   resume, for runs of minutes to hours on a real corpus.
# - How large the early steps are matters. Measured on this setup (MLM loss of the last 10
#   steps; `H` = 4.73): peak 3e-3 with 10% warmup stayed on the plateau (4.71 after 300
#   steps); the same peak with 50% warmup reached 3.94; peak 1e-3 with 10% warmup 4.08; peak
#   2e-3 with 25% warmup (used here) 4.38 after 200 steps. A plausible reason, not tested
#   further here: Adam's uncorrected early steps are up to 6.6x larger (above), and a high
#   rate at that moment pushes the model somewhere it is slow to leave.
# - With a corpus this small, a longer run memorises it (the full mode's 1000 steps go far
#   below `H`); on real data the held-out loss tells memorising from learning.
# - Clipping is on at nearly every step here, not only early on: the line printed after training
#   ("gradient norm before clipping: ...") gives this run's smallest, median and largest norm
#   and the share of steps above 1, which is nearly all of them in both modes (the norms drift
#   from run to run, and grow later in training in the full run). So nearly every update is
#   rescaled to norm 1. A tiny model on
#   batches of 16 short sequences has noisy, large gradients compared to the threshold of 1 that
#   BERT uses with batches of 256 long ones. Adam divides each update by the gradient's own
#   running size, so rescaling every step changes its updates far less than it would change
#   plain SGD's; what clipping still does is stop one unusual batch from getting more weight
#   than the others.

# %% [markdown]
# ## Recap
# - BERT's AdamW: Adam moments without bias correction (first step 3.16x), decoupled weight
#   decay except for biases and LayerNorm.
# - Schedule: linear warmup over a linear decay that started at step 0, hence the drop at the
#   end of warmup. Clipping: scale all gradients together to a joint norm of at most 1.
# - Five lines per step; the loss fell from about `ln V + ln 2`, past the unigram plateau.
#
# **Next: lesson 12**, looking inside the trained model: what it predicts for `[MASK]`, and
# where its attention heads look.

# %%
print("lesson 11 passed")
