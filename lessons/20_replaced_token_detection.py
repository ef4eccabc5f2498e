# %% [markdown]
# # Lesson 20: replaced-token detection, ELECTRA's pretraining task
#
# **Goal.** BERT's masked LM learns from the 15% of tokens it masks: the other 85% of every
# sequence give no loss term. ELECTRA (Clark et al., 2020) turns pretraining into a task on
# *every* token: a small generator (a masked LM) fills the masks with plausible tokens sampled from
# its softmax, and the discriminator (the model kept for fine-tuning) says, for each token, whether
# it is the original or a replacement. This lesson runs that step by hand on one real sentence.
#
# **Finish line.**
# 1. A tiny generator and discriminator trained together for a few seconds on
#    `data/lessons_corpus.txt` (`minibert.family.electra.electra_forward_backward`).
# 2. One sentence, step by step: the masks, what the generator sampled (and how likely each sample
#    was), the labels, what the discriminator flagged; each step checked against minibert's own.
# 3. A sample equal to the original token is labelled "original" (asserted on a constructed case).
# 4. The count of loss terms per sequence: RTD has one per real token, MLM one per masked token
#    (asserted, and seen in the gradients: which logits get a non-zero gradient).
# 5. Two exercises: the RTD labels from sampled vs original ids, and the binary cross-entropy
#    backward over the real tokens only.
# `MINIBERT_FAST=1` trains fewer steps.

# %%
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # tiny matrices: one thread is fastest (lesson 11)
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import minibert  # noqa: E402,F401  before NumPy (lesson 06)
import numpy as np  # noqa: E402

import course  # noqa: E402  lessons/course.py: where pictures go, how exercises are graded
from course import FAST, OUT, ROOT  # noqa: E402
from minibert.backend import get_ops  # noqa: E402
from minibert.family import electra  # noqa: E402
from minibert.family.electra import ElectraConfig  # noqa: E402
from minibert.analysis.gradcheck import numerical_grad_scalar  # noqa: E402
from minibert.optim import AdamW, clip_by_global_norm  # noqa: E402
from minibert.text.tokenizer import BertTokenizer  # noqa: E402
from minibert.text.wordpiece_trainer import train_wordpiece  # noqa: E402

rng = np.random.default_rng(20)
# shape legend: B batch, T sequence length, E embedding size, C hidden size, V vocabulary,
# P masked positions per sequence (slots), M real masked positions in the batch

# %% [markdown]
# ## 1. Data: one sentence per sequence, 15% of its tokens masked
# The lessons' small corpus (ten documents of four sentences). Each sentence becomes
# `[CLS] pieces [SEP]`, padded to T. Masking picks 15% of the real tokens (at least one, never
# `[CLS]`/`[SEP]`) and replaces them all with `[MASK]`: the generator must guess them, and the
# discriminator later sees the generator's guesses in their place. New masks every step.

# %%
SENTENCES = [s for s in (ROOT / "data" / "lessons_corpus.txt").read_text(encoding="utf-8").splitlines() if s.strip()]
corpus_path = OUT / "20_corpus.txt"
corpus_path.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
tok = BertTokenizer(train_wordpiece([corpus_path], vocab_size=300, merge_rule="frequency", progress=False))
V, T, P = len(tok), 20, 4

rows = [[tok.cls_id] + tok.convert_tokens_to_ids(tok.tokenize(s))[:T - 2] + [tok.sep_id] for s in SENTENCES]
IDS = np.zeros((len(rows), T), np.int64)  # (N, T) the original text, [PAD] = 0
for i, r in enumerate(rows):
    IDS[i, :len(r)] = r
MASK = (IDS != 0).astype(np.int64)  # (N, T) 1 at real tokens


def mask_batch(ids, mask, rng, n_masks=None):
    """ids (B, T) original -> a pretraining batch: 15% of each row's maskable tokens (at least 1,
    at most P; or n_masks) replaced by [MASK]; masked_lm_positions / _ids / _weights (B, P) say
    where and what."""
    B = ids.shape[0]
    inp = ids.copy()  # (B, T)
    pos, orig, w = np.zeros((B, P), np.int64), np.zeros((B, P), np.int64), np.zeros((B, P))  # (B, P) each
    for b in range(B):
        candidates = np.flatnonzero((mask[b] == 1) & (ids[b] != tok.cls_id) & (ids[b] != tok.sep_id))
        n = min(P, max(1, round(0.15 * int(mask[b].sum())))) if n_masks is None else n_masks
        picked = np.sort(rng.choice(candidates, n, replace=False))
        pos[b, :n], orig[b, :n], w[b, :n] = picked, ids[b, picked], 1.0
        inp[b, picked] = tok.mask_id
    return dict(input_ids=inp, input_mask=mask, segment_ids=np.zeros_like(ids), masked_lm_positions=pos,
                masked_lm_ids=orig, masked_lm_weights=w)


example = mask_batch(IDS[:1], MASK[:1], rng)
print(f"{len(SENTENCES)} sentences, vocab {V}; one masked:",
      " ".join(tok.convert_ids_to_tokens(example["input_ids"][0][MASK[0] == 1])))
assert (example["input_ids"] == tok.mask_id).sum() == example["masked_lm_weights"].sum()

# %% [markdown]
# ## 2. Train a tiny generator and discriminator together
# The generator is a small masked LM (hidden 16); the discriminator is bigger (hidden 32). They
# share the embedding tables (`electra.tie_embeddings`), as in the paper. One step of
# `electra_forward_backward` runs: generator -> sample at the masks -> corrupted text ->
# discriminator, with loss = MLM + 50 x RTD. A few seconds of AdamW on 40 sentences.

# %%
common = dict(vocab_size=V, embedding_size=24, max_position_embeddings=T, hidden_dropout_prob=0.0,
              attention_probs_dropout_prob=0.0)
gen_cfg = ElectraConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, **common)
disc_cfg = ElectraConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, **common)
disc = electra.init_params(disc_cfg, "disc", seed=0)
gen = electra.tie_embeddings(electra.init_params(gen_cfg, "gen", seed=1), disc)
joint = electra.joint_params(gen, disc)  # one dict for the optimizer; shared tensors once
opt = AdamW(joint, lr=2e-3, bias_correction=True)
steps = 150 if FAST else 500
history, counts = [], []  # losses; hit counts per step
for step in range(steps):
    rows_b = rng.choice(len(IDS), 16, replace=False)
    batch = mask_batch(IDS[rows_b], MASK[rows_b], rng)
    loss, grads, m = electra.electra_forward_backward(gen, disc, gen_cfg, disc_cfg, batch, rng)
    grads, _ = clip_by_global_norm(grads, 1.0)
    opt.step(joint, grads)  # in place: gen and disc hold the same arrays
    history.append((m.mlm_loss, m.rtd_loss))
    counts.append((m.mlm_correct, m.mlm_count, m.disc_correct, m.disc_count, m.replaced_count, m.replaced_flagged))
    if step % 50 == 0 or step == steps - 1:
        r = m.rates()
        print(f"step {step:3d}  MLM loss {m.mlm_loss:.3f} (acc {r['mlm_accuracy']:.2f})  RTD loss {m.rtd_loss:.3f} "
              f"(acc {r['disc_accuracy']:.2f}; always 'original' {1 - m.replaced_count / m.disc_count:.2f}; "
              f"recall of replaced {r['replaced_recall']:.2f})")
first, last = np.mean(history[:10], axis=0), np.mean(history[-10:], axis=0)
assert last[0] < first[0] and last[1] < first[1], (first, last)  # both losses went down
# the last 50 steps, counted together: how good are the two networks, and against what baseline?
mlm_hit, mlm_n, disc_hit, disc_n, replaced, flagged = np.array(counts[-50:]).sum(axis=0)
gen_acc, sample_right = mlm_hit / mlm_n, 1 - replaced / mlm_n  # argmax right; sample == original
disc_acc, always_original = disc_hit / disc_n, 1 - replaced / disc_n
print(f"last 50 steps: generator argmax accuracy {gen_acc:.2f}, samples equal to the original {sample_right:.2f} "
      f"of {mlm_n} masked tokens")
print(f"last 50 steps: discriminator accuracy {disc_acc:.3f} against {always_original:.3f} for always 'original' "
      f"({replaced} of {disc_n} real tokens replaced); recall of replaced {flagged / replaced:.2f}")
assert disc_acc > always_original  # the discriminator beats the constant answer (a measured count, not a rate)

# %% [markdown]
# ## 3. One sentence, step by step
# The same four steps as `electra_forward`, written out. The sentence is short (15% of it is one
# token), so three of its tokens are masked here, to see more; it keeps these masks from here on.

# %%
s = SENTENCES.index("The yeast makes the dough rise.")
batch = mask_batch(IDS[s:s + 1], MASK[s:s + 1], np.random.default_rng(4), n_masks=3)
ids, mask = batch["input_ids"], batch["input_mask"]  # (1, T) each
w = batch["masked_lm_weights"].reshape(-1) > 0  # (P,)
flat_pos = batch["masked_lm_positions"].reshape(-1)[w]  # (M,) positions b * T + t (b = 0)
originals = batch["masked_lm_ids"].reshape(-1)[w]  # (M,)
n_real = int(mask.sum())
print("original:", " ".join(tok.convert_ids_to_tokens(IDS[s][:n_real])))
print("masked:  ", " ".join(tok.convert_ids_to_tokens(ids[0][:n_real])))

# step 1: the generator reads the masked text and predicts the masked tokens
mlm_loss, _, gen_logits = electra.generator_forward(gen, gen_cfg, ids, batch["segment_ids"], mask, flat_pos,
                                                    originals)  # gen_logits (M, V)
probs = np.exp(gen_logits - gen_logits.max(-1, keepdims=True))
probs /= probs.sum(-1, keepdims=True)  # (M, V)
# step 2: sample one token per mask from the generator's softmax (integers: no gradient flows back)
sampled = electra.sample_tokens(gen_logits, np.random.default_rng(5))  # (M,)
for t, o, smp, p in zip(flat_pos, originals, sampled, probs):
    top = np.argsort(-p)[:3]
    print(f"  position {t}: original {tok.convert_ids_to_tokens([o])[0]!r}, sampled "
          f"{tok.convert_ids_to_tokens([smp])[0]!r} (p {p[smp]:.2f}); top 3: "
          + ", ".join(f"{tok.convert_ids_to_tokens([i])[0]} {p[i]:.2f}" for i in top))
# step 3: put the samples into the ORIGINAL text (not the masked one); label what changed
corrupted, labels = electra.replace_tokens(ids, flat_pos, originals, sampled)  # (1, T) each
assert (corrupted[0, flat_pos] == sampled).all() and (labels[0, flat_pos] == (sampled != originals)).all()
untouched = np.ones(T, bool)
untouched[flat_pos] = False
assert (corrupted[0, untouched] == IDS[s, untouched]).all() and (labels[0, untouched] == 0).all()
# step 4: the discriminator reads the corrupted text and scores every token: logit > 0 = "replaced"
rtd_loss, _, disc_logits = electra.discriminator_forward(disc, disc_cfg, corrupted, batch["segment_ids"], mask,
                                                         labels)  # disc_logits (1, T)
p_replaced = 1 / (1 + np.exp(-disc_logits[0]))  # (T,)
print(f"\n{'token':>10} {'label':>9} {'P(replaced)':>12}")
for t in range(n_real):
    flag = "  <- flagged" if disc_logits[0, t] > 0 else ""
    print(f"{tok.convert_ids_to_tokens([corrupted[0, t]])[0]:>10} {('replaced' if labels[0, t] else 'original'):>9} "
          f"{p_replaced[t]:12.3f}{flag}")
print(f"MLM loss {mlm_loss:.3f} over {len(flat_pos)} masked tokens; RTD loss {rtd_loss:.3f} over {n_real} tokens")

# %% [markdown]
# ## 4. A sample equal to the original is "original"
# Sometimes the generator's sample is the original token: this tiny generator, after a few seconds
# of training, drew the original for the share of masked tokens printed at the end of section 2
# (a well-trained generator, which is what training aims at, does so far more often). Then the
# token in the corrupted text IS the original one, and the paper labels it original: the
# discriminator is asked "is this token the one that was there?", not "was this position
# masked?". Here we set the first sample to the original token and the second to another token,
# and look at the labels.

# %%
forced = sampled.copy()
forced[0] = originals[0]  # the generator guessed right
forced[1] = (originals[1] + 1) % V  # and wrong
_, forced_labels = electra.replace_tokens(ids, flat_pos, originals, forced)
print("labels at the masked positions:", forced_labels[0, flat_pos], "for samples == originals:", forced == originals)
assert forced_labels[0, flat_pos[0]] == 0  # sampled == original -> "original"
assert forced_labels[0, flat_pos[1]] == 1  # sampled != original -> "replaced"

# %% [markdown]
# ## 5. Why every token gives a training signal
# Count the loss terms. The MLM loss is a mean over the masked positions: one term each. The RTD
# loss is a mean over the real tokens: one term each, masked or not, because every token can be
# asked "original or replaced?". The gradients say the same: the MLM cross-entropy sends a
# non-zero gradient to the M masked rows only, the RTD BCE to every real token (none to padding).

# %%
B16 = mask_batch(IDS[:16], MASK[:16], np.random.default_rng(6))
_, _, cache = electra.electra_forward(gen, disc, gen_cfg, disc_cfg, B16, np.random.default_rng(7))
mlm_terms = B16["masked_lm_weights"].sum(axis=1).astype(int)  # (B,) one per masked token
rtd_terms = B16["input_mask"].sum(axis=1)  # (B,) one per real token
print("per sequence, MLM terms:", mlm_terms)
print("per sequence, RTD terms:", rtd_terms)
print(f"RTD gives {rtd_terms.sum() / mlm_terms.sum():.1f}x as many loss terms as MLM on this batch")
ce_cache, bce_cache = cache.gen[2], cache.disc[2]  # the two losses' caches (generator_forward, discriminator_forward)
dmlm = get_ops().cross_entropy_backward(1.0, ce_cache)  # (M, V)
drtd = electra.bce_with_logits_backward(1.0, bce_cache)  # (B, T)
assert (np.abs(dmlm).sum(-1) > 0).sum() == mlm_terms.sum()  # every masked row gets a gradient
assert ((np.abs(drtd) > 0).sum(axis=1) == rtd_terms).all()  # every real token, in every row
assert (drtd[B16["input_mask"] == 0] == 0).all()  # exact 0: padding is weighted by 0
assert (rtd_terms > 3 * mlm_terms).all()  # 15% masking: RTD has at least 3x (here ~6x) the terms


# %% [markdown]
# ## Exercises
# Replace each `raise NotImplementedError(...)` with your code and re-run; the cell after the
# stubs grades your functions and names the check that failed and by how much. A stub left as it
# is makes the lesson go on with the reference solution
# (`lessons/solutions/20_replaced_token_detection.py`).
#
# 1. `my_rtd_labels(original_ids, sampled, positions)`: `original_ids (B, T)` the text before
#    masking, `positions (M, 2)` the (row, column) of each masked token, `sampled (M,)` the
#    generator's samples there -> labels `(B, T)` int: 1 where the sample differs from the
#    original token, 0 everywhere else (a sample equal to the original is 0).
# 2. `my_bce_backward(logits, labels, mask)`: the gradient of the mean binary cross-entropy with
#    logits over the real tokens (mask 1) -> `dlogits (B, T)`, 0 at padding. Per token the loss
#    is `-[y log s(z) + (1 - y) log(1 - s(z))]` with `s` the sigmoid: differentiate it (use
#    `s'(z) = s(z) (1 - s(z))`, then simplify), then work out what the mean over the real tokens
#    does to it. Graded against the numerical gradient of `electra.bce_with_logits_forward`.

# %%
def my_rtd_labels(original_ids, sampled, positions):
    """original_ids (B, T), sampled (M,), positions (M, 2) (row, column) -> labels (B, T) int"""
    raise NotImplementedError("exercise 1: label the replaced tokens")  # your code here


def my_bce_backward(logits, labels, mask):
    """logits (B, T), labels (B, T) 0/1, mask (B, T) 0/1 -> dlogits (B, T)"""
    raise NotImplementedError("exercise 2: write the BCE-with-logits backward over real tokens")  # your code here


# %%
ex = course.Exercises("20_replaced_token_detection")


def fresh_rtd_case(r, B, T, M, right=0, wrong=0):
    """Drawn now: original ids (B, T), M distinct masked (row, column) positions, samples (M,) of which the
    first `right` equal the original token and the next `wrong` differ from it; the rest drawn freely."""
    orig = r.integers(5, 60, (B, T))  # (B, T)
    flat = r.choice(B * T, M, replace=False)  # (M,)
    pos = np.stack([flat // T, flat % T], axis=1)  # (M, 2)
    smp = r.integers(5, 60, M)  # (M,)
    here = orig[pos[:, 0], pos[:, 1]]  # (M,) the originals at the masked positions
    smp[:right] = here[:right]
    smp[right:right + wrong] = here[right:right + wrong] + 1 + r.integers(0, 5, wrong)
    return orig, smp, pos


def check_rtd_labels(fn):
    r = np.random.default_rng(2001)
    cases = [("a drawn sentence, samples drawn freely", fresh_rtd_case(r, 1, 9, 3)),
             ("section 4: one right sample, one wrong", fresh_rtd_case(r, 1, 9, 2, right=1, wrong=1)),
             ("two rows, two right samples, one wrong", fresh_rtd_case(r, 2, 5, 3, right=2, wrong=1))]
    results = []
    for name, (orig, smp, pos) in cases:
        want = [[0] * orig.shape[1] for _ in range(orig.shape[0])]  # the definition, one masked token at a time
        for (b, t), v in zip(pos.tolist(), smp.tolist()):
            want[b][t] = int(v != orig[b, t])
        results.append(course.equal(name, np.asarray(fn(orig.copy(), smp.copy(), pos.copy())).tolist(), want))
    return results


def check_bce_backward(fn):
    r = np.random.default_rng(2002)
    results = []
    for name, (B, T) in (("dlogits vs numerical gradient", (3, 5)), ("one padded row vs numerical gradient", (1, 9))):
        z = 2 * r.standard_normal((B, T))  # (B, T)
        y = r.integers(0, 2, (B, T))  # (B, T)
        m = np.ones((B, T), np.int64)
        m[-1, T - 2:] = 0  # padding at the end of the last row
        results.append(course.close(name, fn(z.copy(), y.copy(), m.copy()),
                                    numerical_grad_scalar(lambda: electra.bce_with_logits_forward(z, y, m)[0], z),
                                    factors={"1/n (n real tokens)": 1 / m.sum()}))
    return results


my_rtd_labels = ex.grade(1, my_rtd_labels, check_rtd_labels,
                         refuses=("family.electra.replace_tokens",))
my_bce_backward = ex.grade(2, my_bce_backward, check_bce_backward,
                           refuses=("family.electra.bce_with_logits_backward",))

# %% [markdown]
# ## Recap
# - The generator is a masked LM; its samples replace the masks, and the gradient stops there
#   (sampling picks integers). Only the shared embeddings connect the two networks' gradients.
# - The discriminator's labels compare the corrupted text with the original, token by token: a
#   correct guess is "original".
# - RTD has a loss term at every real token, MLM only at the masked 15%: the same sequence gives
#   the discriminator about 1 / 0.15 = 6-7x as many training signals. ELECTRA's own ablation
#   (Clark et al., 2020, §3.5, Table 5, GLUE dev at base size) credits most of its gain to that:
#   BERT 82.2, ELECTRA with the discriminator's loss on the masked 15% only 82.4, an MLM that
#   predicts every token ("All-Tokens MLM") 84.3, ELECTRA 85.0. The rest comes from removing the
#   mismatch of `[MASK]` tokens seen in pretraining and never in fine-tuning ("Replace MLM",
#   generator samples instead of `[MASK]`: 82.4). That, with the small generator, is why ELECTRA
#   reaches BERT's scores with less pretraining compute; the comparison at equal FLOPs is in
#   docs/family.md.
# - After pretraining, the generator is dropped and the discriminator is fine-tuned like BERT
#   (`minibert.ElectraForSequenceClassification` and the other three task classes).

# %%
print("lesson 20 passed")
