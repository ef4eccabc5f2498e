# %% [markdown]
# # Lesson 14: question answering, windows and the "no answer" decision
#
# **Goal.** SQuAD is the fourth task shape of the BERT paper (§4.2-4.3): given a question and a
# passage, point at the answer span, or (SQuAD 2.0) say there is none. Three ideas make it work,
# and each is where teaching code most often goes wrong:
#
# 1. **Windows.** A passage longer than the model's window is cut into overlapping windows
#    (`doc_stride` apart). A token then appears in several windows; it is scored only in the
#    window where it has the most context on both sides ("max context").
# 2. **Two pointers.** The head is one linear layer `(C, 2)`: a start score and an end score for
#    every token. An answer is the best pair start <= end, within a length limit.
# 3. **No answer.** `[CLS]` stands for "no answer": the null score is start[CLS] + end[CLS]. The
#    model answers "" when null score - best span score exceeds a threshold tuned on dev.
#
# **Finish line.**
# 1. Every passage token is max-context in exactly one window; the windows cover the passage.
# 2. The window holding the whole answer labels its tokens; the others label `[CLS]`.
# 3. Sweeping the threshold from -inf to +inf goes from "always no answer" (F1 = the share of
#    unanswerable questions) to "always answer", and the best point matches the official
#    script's `best_f1`.

# %%
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import course  # lessons/course.py: where pictures go, how exercises are graded
from course import FAST, ROOT, show
from minibert import BertConfig, BertForQuestionAnswering, BertTokenizer
from minibert.finetune import squad, squad_eval
from minibert.optim import AdamW, lr_at
from minibert.text.wordpiece_trainer import train_wordpiece

DATA = ROOT / "data" / "squad2"  # 14 Wikipedia articles of SQuAD 2.0 (CC BY-SA 4.0, data/squad2/README.md)

# %% [markdown]
# ## A vocabulary and a long passage
# A real run uses the pretrained model's vocabulary; here a small WordPiece vocabulary is
# learned from the passages themselves (lesson 08) so the lesson needs nothing built first.

# %%
train_ex, _ = squad.read_squad(DATA / "train-v2.0.json", is_training=True)
dev_ex, _ = squad.read_squad(DATA / "dev-v2.0.json", is_training=False)
if FAST:  # CI: a tenth of the questions
    train_ex, dev_ex = train_ex[::10], dev_ex[::10]
with tempfile.TemporaryDirectory() as tmp:
    text = Path(tmp) / "passages.txt"
    text.write_text("\n".join(" ".join(e.doc_tokens) for e in train_ex[::10]) + "\n", encoding="utf-8")
    tok = BertTokenizer(train_wordpiece([text], vocab_size=2000, merge_rule="frequency", progress=False))
T, STRIDE, QLEN = 128, 48, 24  # window, stride, question cut (the real defaults: 384, 128, 64)

answerable = [e for e in train_ex if not e.is_impossible and e.start_position > 120]  # deep in the passage
example = max(answerable, key=lambda e: len(e.doc_tokens))
print(f"question: {example.question_text}\nanswer:   {example.orig_answer_text!r} "
      f"(words {example.start_position}-{example.end_position} of {len(example.doc_tokens)})")

# %% [markdown]
# ## 1. Windows and max context
# Each window holds `T - len(question) - 3` passage tokens and starts `doc_stride` tokens after
# the previous one. The picture shows every window as a row: grey where a token is present,
# dark where this window is the token's max-context window, and the answer in red.

# %%
feats = squad.convert_examples_to_features([example], tok, T, STRIDE, QLEN, is_training=True)
all_doc_tokens, _, _ = squad.tokenize_passage(example.doc_tokens, tok)
n_tokens = len(all_doc_tokens)
first = feats[0].tokens.index("[SEP]") + 1  # the passage starts after [CLS] question [SEP]
spans = squad.make_doc_spans(n_tokens, T - (first - 2) - 3, STRIDE)  # what the features were cut with
grid = np.zeros((len(feats), n_tokens))  # (windows, passage tokens): 0 absent, 1 present, 2 max context
for w, f in enumerate(feats):
    for pos in range(first, len(f.tokens) - 1):  # the passage tokens, before the last [SEP]
        grid[w, spans[w].start + pos - first] = 2 if f.token_is_max_context[pos] else 1
fig, ax = plt.subplots(figsize=(11, 0.5 + 0.45 * len(feats)))
ax.imshow(grid, aspect="auto", cmap="Greys", vmin=0, vmax=2.4, interpolation="nearest")
for w, f in enumerate(feats):  # the window that holds the whole answer labels its tokens
    if f.start_position:
        ax.axvspan(spans[w].start + f.start_position - first - 0.5, spans[w].start + f.end_position - first + 0.5,
                   ymin=1 - (w + 1) / len(feats), ymax=1 - w / len(feats), color="red", alpha=0.6)
ax.set(xlabel="passage token", ylabel="window", yticks=range(len(feats)),
       title=f"{len(feats)} windows of {T} tokens, stride {STRIDE}: grey = in the window, dark = scored here "
             f"(max context), red = the answer")
show(fig, "14_windows.png", dpi=90, bbox_inches="tight")

assert (grid == 2).sum(axis=0).tolist() == [1] * n_tokens  # each token scored in exactly one window
assert (grid > 0).any(axis=0).all()  # and the windows cover the passage

# %% [markdown]
# ## 2. Training labels
# A window that holds the whole answer labels its first and last token; a window that cuts it,
# or misses it, labels `[CLS]` (position 0), exactly as for an unanswerable question. Such
# windows are kept: they teach the model to say "not here".

# %%
answer_pieces = [p for w in example.doc_tokens[example.start_position:example.end_position + 1]
                 for p in tok.tokenize(w)]
for w, f in enumerate(feats):
    label = " ".join(f.tokens[f.start_position:f.end_position + 1]) if f.start_position else "[CLS] (not here)"
    print(f"window {w}: start {f.start_position:3d}, end {f.end_position:3d} -> {label}")
holding = [f for f in feats if f.start_position]
assert holding, "some window holds the whole answer"
for f in holding:
    got = f.tokens[f.start_position:f.end_position + 1]
    assert " ".join(got).replace(" ##", "") in " ".join(answer_pieces).replace(" ##", ""), got

# %% [markdown]
# ## Exercises
# They come here, before the model is trained (the slow cell of this lesson), so that each
# retry is quick. Replace each `raise NotImplementedError(...)` with your code and re-run; the cell after the
# stubs grades your functions. A stub left as it is makes the lesson go on with the reference
# solution (`lessons/solutions/14_squad_windows.py`).
#
# 1. `my_max_context_score(start, length, position)`: how much context a passage token at
#    `position` has in the window `(start, length)`: the smaller of its left and right context
#    (tokens before it, tokens after it, within the window) plus 0.01 x the window length, so
#    that of two windows giving the same context the longer one wins. Graded on windows the
#    grader draws (a passage length, a window length and a stride, like section 1's).
# 2. `my_best_span(start_logits, end_logits, max_answer_length)`: the pair `(s, e)` with the
#    highest `start_logits[s] + end_logits[e]` such that `s <= e < s + max_answer_length`.
#    Section 3 scores every window's tokens; section 4 turns the scores into answers with
#    `squad.postprocess`, which applies the same rule to the best starts and ends.

# %%
def my_max_context_score(start, length, position):
    """a window (start, length) over the passage tokens, a token position in it -> its score"""
    raise NotImplementedError("exercise 1: score a token's context in a window")  # your code here


def my_best_span(start_logits, end_logits, max_answer_length):
    """start_logits (T,), end_logits (T,), max length -> (s, e) of the best valid span"""
    raise NotImplementedError("exercise 2: find the best valid span")  # your code here


# %%
ex = course.Exercises("14_squad_windows")


def fresh_windows(r):
    """A passage of n tokens cut into windows (start, length) of a drawn length and stride, drawn now."""
    n, length = int(r.integers(20, 40)), int(r.integers(6, 12))
    stride = int(r.integers(2, length))
    starts = [0]
    while starts[-1] + length < n:
        starts.append(starts[-1] + stride)  # the last window may be shorter: it stops at the passage's end
    return n, [(st, min(length, n - st)) for st in starts]


def context_slips(st, L_, i):
    """The scores the usual slips give to passage token i in the window (st, L_), named."""
    p, after = i - st, L_ - 1 - (i - st)  # the tokens of the window before token i and after it
    return {"the 0.01 x length term left out: two windows that give a token the same context then tie, and the "
            "longer one must win": min(p, after),
            "the right context counted one too many: the token itself is not after itself":
            min(p, after + 1) + 0.01 * L_,
            "the left context counted one too many: the token itself is not before itself":
            min(p + 1, after) + 0.01 * L_,
            "the larger of the two contexts where the smaller belongs": max(p, after) + 0.01 * L_,
            "the position counted from the passage's first token, not from the window's start":
            min(i, st + after) + 0.01 * L_}


def check_max_context_score(fn):
    r = np.random.default_rng(1401)
    results = []
    for _ in range(2):  # single windows, the definition worked out here
        L_ = int(r.integers(6, 15))
        st, p = int(r.integers(0, 20)), int(r.integers(1, L_ - 1))
        results.append(course.close(f"token {p} of a {L_}-token window at {st}", fn(st, L_, st + p),
                                    min(p, L_ - 1 - p) + 0.01 * L_, wrongs=lambda: context_slips(st, L_, st + p)))
    n, wins = fresh_windows(r)
    want, got = [], []
    for i in range(n):
        holding = [w for w, (st, ln) in enumerate(wins) if st <= i < st + ln]
        score = {w: min(i - wins[w][0], wins[w][0] + wins[w][1] - 1 - i) + 0.01 * wins[w][1] for w in holding}
        want.append(max(holding, key=lambda w: score[w]))  # the first of the best
        got.append(max(holding, key=lambda w: fn(wins[w][0], wins[w][1], i)))

    def chosen():  # the window each slip chooses for every token
        holds = [[w for w, (st, ln) in enumerate(wins) if st <= i < st + ln] for i in range(n)]
        return {words: [max(holds[i], key=lambda w: context_slips(*wins[w], i)[words]) for i in range(n)]
                for words in context_slips(0, 3, 1)}

    results.append(course.equal(f"the max-context window of every token, {n} tokens in windows {wins}", got, want,
                                wrongs=chosen))
    return results


def check_best_span(fn):
    r = np.random.default_rng(1402)
    results = []
    for name, T_, limit in (("a drawn pair of score rows, limit 3", 10, 3), ("length limit 1: a single token", 7, 1)):
        s_, e_ = r.standard_normal(T_), r.standard_normal(T_)  # (T,) each
        a_, b_ = sorted(r.choice(T_, 2, replace=False).tolist())
        s_[a_] += 4.0
        e_[b_] += 4.0  # the best pair with no limit: far apart
        pairs = [(i, j) for i in range(T_) for j in range(i, min(T_, i + limit))]
        want = max(pairs, key=lambda ij: s_[ij[0]] + e_[ij[1]])
        results.append(course.equal(f"{name}", tuple(int(x) for x in fn(s_.copy(), e_.copy(), limit)), want))
    s_, e_ = r.standard_normal(6), r.standard_normal(6)
    late, early = int(r.integers(3, 6)), int(r.integers(0, 3))
    s_[late] += 5.0
    e_[early] += 5.0  # the best start after the best end
    pairs = [(i, j) for i in range(6) for j in range(i, 6)]
    want = max(pairs, key=lambda ij: s_[ij[0]] + e_[ij[1]])
    results.append(course.equal(f"end may not precede start (not ({late}, {early}))",
                                tuple(int(x) for x in fn(s_.copy(), e_.copy(), 30)), want))
    return results


my_max_context_score = ex.grade(1, my_max_context_score, check_max_context_score)
my_best_span = ex.grade(2, my_best_span, check_best_span)

# %% [markdown]
# ## 3. Start and end scores
# A small model (no pretraining, a couple of minutes at most) trained on the 12 training
# articles. Half of the questions have no answer, so what it learns first is to put its start
# and end scores on `[CLS]`. Do not expect it to find answers: `python -m minibert finetune
# squad2 --init runs/tiny` fine-tunes the pretrained tiny BERT on the same articles for 2 epochs,
# and in docs/finetuning.md every run of it, pretrained or from scratch, ends at "always no
# answer" (F1 53.1, the share of unanswerable dev questions; HasAns F1 0.0). So does the
# published BERT-Tiny on the full SQuAD 2.0 (F1 49.7, close to its no-answer rate). Section 4
# prints this model's numbers beside those baselines.

# %%
cfg = BertConfig(vocab_size=len(tok), hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=128, max_position_embeddings=T)
model = BertForQuestionAnswering(cfg, seed=0)
train_feats = squad.convert_examples_to_features(train_ex, tok, T, STRIDE, QLEN, is_training=True)
batch_all = squad.stack_features(train_feats)
rng, B = np.random.default_rng(0), (16 if FAST else 32)
steps = 30 if FAST else 400  # CI checks the plumbing; the full run lets the scores take shape
opt = AdamW(model.params, lr=1e-3)
for step in range(steps):
    rows = rng.choice(len(train_feats), B, replace=False)
    loss, grads = model.loss_and_grads({k: v[rows] for k, v in batch_all.items()})
    opt.step(model.params, grads, lr_at(step, 1e-3, steps // 10, steps))
    if step % 100 == 0 or step == steps - 1:
        print(f"step {step:3d}  loss {loss:.3f}  (ln {T} = {np.log(T):.2f}: uniform over positions)")

f = feats[0]
start, end = model.forward(np.array([f.input_ids]), np.array([f.segment_ids]), np.array([f.input_mask]))
n = sum(f.input_mask)
fig, ax = plt.subplots(figsize=(11, 3))
ax.plot(start[0, :n], label="start score")
ax.plot(end[0, :n], label="end score")
ax.axvline(0, color="k", lw=0.8, ls=":", label="[CLS]: no answer")
ax.set(xlabel="position in window 0", ylabel="logit", title=f"window 0 after {steps} steps")
ax.legend()
show(fig, "14_start_end_logits.png", dpi=90, bbox_inches="tight")

# %% [markdown]
# ## 4. The null threshold, swept
# For each dev question: `diff` = null score - best span score (over its windows). Answer ""
# when `diff > threshold`. At threshold -inf every question gets "": F1 equals the share of
# unanswerable questions. At +inf every question gets its best span. The official script's
# `best_f1` is the best point of this sweep (a threshold chosen on dev, so an optimistic number).
# Every number is printed next to the two baselines it must beat: always "no answer" and
# always answering.

# %%
dev_feats = squad.convert_examples_to_features(dev_ex, tok, T, STRIDE, QLEN, is_training=False)
dev = squad.stack_features(dev_feats)
starts, ends = [], []
for i in range(0, len(dev_feats), 256):
    s_, e_ = model.forward(dev["input_ids"][i:i + 256], dev["segment_ids"][i:i + 256], dev["input_mask"][i:i + 256])
    starts.append(s_)
    ends.append(e_)
always_answer, _, diff = squad.postprocess(dev_ex, dev_feats, (np.concatenate(starts), np.concatenate(ends)),
                                           version_2=True, null_score_diff_threshold=np.inf)
gold = {q: g for q, g in squad_eval.load_gold(DATA / "dev-v2.0.json").items() if q in diff}  # the questions used
official = squad_eval.evaluate(gold, always_answer, na_probs=diff)


def f1_at(t):
    return squad_eval.evaluate(gold, {q: "" if diff[q] > t else a for q, a in always_answer.items()})["f1"]


thresholds = np.concatenate([[-np.inf], np.quantile(list(diff.values()), np.linspace(0, 1, 41)), [np.inf]])
f1 = [f1_at(t) for t in thresholds]
no_answer_share = 100 * sum(not g for g in gold.values()) / len(gold)
answering = squad_eval.evaluate(gold, always_answer)  # every question gets its best span
print(f"always no answer: F1 {f1[0]:.1f} (= {no_answer_share:.1f}% unanswerable); always answer: F1 {f1[-1]:.1f} "
      f"(on the answerable questions: F1 {answering['HasAns_f1']:.1f}); best of the sweep {max(f1):.1f} "
      f"(official best_f1 {official['best_f1']:.1f} at threshold {official['best_f1_thresh']:.2f})")
fig, ax = plt.subplots(figsize=(8, 3.5))
ax.plot(np.arange(len(f1)), f1, "o-", ms=3)
ax.axhline(no_answer_share, color="gray", ls="--", label="always 'no answer'")
ax.set(xlabel="threshold: -inf, the 0..100% quantiles of the dev diffs, +inf (left: always null)", ylabel="dev F1",
       title="F1 as the null threshold moves")
ax.legend()
show(fig, "14_null_threshold.png", dpi=90, bbox_inches="tight")

assert abs(f1[0] - no_answer_share) < 1e-9  # a count (407 of 766 questions in full), nothing computed
best_gain = max(f1) - f1[0]
print(f"best threshold beats always 'no answer' by {best_gain:.1f} F1")
assert max(f1) <= official["best_f1"] + 1e-9  # the official search tries every threshold
assert abs(f1_at(official["best_f1_thresh"]) - official["best_f1"]) < 1e-6  # and its best is one of ours


# %% [markdown]
# **Reading the sweep.** Here it only falls, from always "no answer" on the left to always
# answering on the right, and its best point is its left end (the printed numbers). That is the
# sweep of a model that does not find answers: each question moved from "" to its best span loses
# F1 1 if it was unanswerable, and gains next to nothing if it was answerable, because the span is
# almost never right (the printed HasAns F1). The threshold search cannot make a model answer; it
# only chooses where to stop answering. A model that does find answers (BERT-base: HasAns F1 in
# the 80s) gives a curve that rises first, as the questions it is surest about switch to their
# right spans, and peaks inside the sweep. The same code scores it: `python -m minibert finetune
# squad2` prints `best_f1` and its threshold for any model.

# %% [markdown]
# ## Recap
# - A passage longer than the window is cut into overlapping windows; a token is scored in the
#   window where it has the most context on both sides (the max-context rule of exercise 1).
# - The head is one `(C, 2)` linear layer: a start and an end score per token; the answer is the
#   best pair with start <= end within the length limit (exercise 2).
# - `[CLS]` stands for "no answer"; a threshold on null score minus best span score, tuned on
#   dev, decides. Swept, it runs from "always no answer" to "always answer".
#
# **Next: lesson 15**, whether the pretrained encoder mattered, against a random-init control.

# %%
print("lesson 14 passed")
