# %% [markdown]
# # Lesson 22: span corruption and the encoder-decoder, T5's pretraining
#
# **Goal.** BERT masks single tokens and predicts each from the bidirectional encoder's output at
# its position. T5 (Raffel et al., 2019) drops whole *spans*, puts one sentinel `<extra_id_i>` in
# the place of each, and has a separate *decoder* write the missing spans one token at a time.
# The decoder has two attentions: causal self-attention over what it has written so far, and
# cross-attention over the encoder's output. This lesson builds both on real text, checks their
# backward passes, and watches a tiny model fill in the blanks by greedy decoding.
#
# > **What minibert's T5 keeps from BERT (aside).** Only the objective and the encoder-decoder
# > shape are T5's. The blocks are BERT's: post-LN (LayerNorm after each residual add), GELU,
# > learned absolute position embeddings, and biases on every linear and LayerNorm. T5 itself
# > (§2.1) normalises *before* each sub-layer with a scale-only LayerNorm and no bias anywhere,
# > uses ReLU, and replaces absolute positions with a learned relative bias per head on the
# > attention scores. The objective is what this lesson is about; the rest would change no line
# > of the derivations below.
#
# **Finish line.**
# 1. T5's noise mask on a real sentence: 15% of the tokens in spans of mean length 3; the input
#    with sentinels, the target, and the original put back together (asserted).
# 2. The decoder's two attentions: the causal mask (an output at step s blind to later steps,
#    asserted) and cross-attention's shapes, S queries over T encoder keys.
# 3. Cross-attention's backward, checked numerically; where its gradient goes: into the decoder
#    through the queries, and into the *encoder output* through the keys and values of every
#    decoder layer (the contributions add up, asserted).
# 4. A tiny encoder-decoder memorises four corrupted sentences; greedy decoding writes each
#    missing span back (asserted).
# 5. Two exercises: input and target from a noise mask; cross-attention's backward to the
#    encoder states.
# `MINIBERT_FAST=1` trains fewer steps.

# %%
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # tiny matrices: one thread is fastest (lesson 11)

import minibert  # noqa: E402,F401  before NumPy (lesson 06)
import numpy as np  # noqa: E402

import course  # noqa: E402  lessons/course.py: where pictures go, how exercises are graded
from course import FAST, OUT, ROOT  # noqa: E402
from minibert import layers  # noqa: E402
from minibert.family import t5  # noqa: E402
from minibert.family import t5_data as D  # noqa: E402
from minibert.analysis.gradcheck import compare, numerical_grad, numerical_grad_scalar  # noqa: E402
from minibert.optim import AdamW  # noqa: E402
from minibert.text.tokenizer import BertTokenizer  # noqa: E402
from minibert.text.wordpiece_trainer import train_wordpiece  # noqa: E402

rng = np.random.default_rng(22)
# shape legend: B batch, T encoder (input) length, S decoder (target) length, C hidden size,
# NH heads, HS head size, V vocabulary (sentinels included)

# %% [markdown]
# ## 1. Span corruption on a real sentence
# The vocabulary is the lessons' WordPiece vocabulary with `NS` sentinel ids appended after it:
# T5 takes the *last* ids for its sentinels, counting down, so `<extra_id_0>` is `V - 1`.
# The BERT tokenizer never produces them (its vocab.txt is unchanged); only span corruption does.
#
# T5's noise mask (`t5_data.random_spans_noise_mask`): for n tokens, round(0.15 n) of them are
# noise, in round(noise / 3) spans. The noise tokens are cut into that many non-empty runs at
# random, and so are the kept tokens; the runs alternate, kept first. Each noise span becomes one
# sentinel in the input; the target is each sentinel followed by its span; [SEP] ends both.

# %%
SENTENCES = [s for s in (ROOT / "data" / "lessons_corpus.txt").read_text(encoding="utf-8").splitlines() if s.strip()]
corpus_path = OUT / "22_corpus.txt"
corpus_path.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
tok = BertTokenizer(train_wordpiece([corpus_path], vocab_size=300, merge_rule="frequency", progress=False))
NS = 10
V = len(tok) + NS
names = D.t5_tokens(tok.ids_to_tokens, NS)  # id -> string, sentinels included
SPECIAL = D.Special(tok.pad_id, tok.cls_id, tok.sep_id)


def show(ids):
    return " ".join(names[i] for i in ids).replace(" ##", "")


text = " ".join(SENTENCES[4:8])  # one document: rivers
tokens = np.array(tok.convert_tokens_to_ids(tok.tokenize(text)))  # (n,)
mask = D.random_spans_noise_mask(len(tokens), np.random.default_rng(3))  # (n,) bool
inp, tgt = D.span_corrupt(tokens, mask, V, SPECIAL.eos)
print(f"{len(tokens)} tokens, {int(mask.sum())} dropped in {int((mask & ~np.r_[False, mask[:-1]]).sum())} spans")
print("tokens: ", show(tokens))
print("noise:  ", "".join("x" if m else "." for m in mask))
print("input:  ", show(inp))
print("target: ", show(tgt))
assert int(mask.sum()) == round(0.15 * len(tokens)) and not mask[0] and mask[-1]
assert names[D.sentinel_id(0, V)] == "<extra_id_0>" and D.sentinel_id(0, V) == V - 1
assert D.reconstruct(inp, tgt, V, NS, SPECIAL.eos) == tokens.tolist()  # nothing lost, nothing added
assert len(inp) + len(tgt) == len(tokens) + 2 * int(D.is_sentinel(inp, V, NS).sum()) + 2  # + sentinels, 2 x EOS

# %% [markdown]
# ## 2. The decoder's two attentions
# The decoder reads `[CLS]` (the start token) then the target shifted right, and predicts the
# target: at step s it has seen the target tokens before s only. That is **causal
# self-attention**: query s sees keys 0..s (`layers.causal_visible`, the mask lesson 17 draws).
# **Cross-attention** takes its queries from the decoder (S of them) and its keys and values from
# the encoder output (T of them): `att` is (B, NH, S, T), a rectangle, and padded encoder tokens
# get no weight. Below: a tiny random model, the causal property asserted on its logits.

# %%
cfg = t5.T5Config(vocab_size=V, hidden_size=32, num_layers=1, num_decoder_layers=2, num_heads=2,
                  intermediate_size=64, max_position_embeddings=64, num_sentinels=NS)
params = t5.init_params(cfg, seed=0, dtype=np.float64)
for p in params.values():  # random, non-trivial values for the checks below
    p += 0.1 * rng.standard_normal(p.shape)
batch = D.pad_batch([(inp, tgt)], SPECIAL)  # (1, T) input, (1, S) decoder input and labels
enc_out, _ = t5.encode(params, cfg, batch["input_ids"], batch["attention_mask"])  # (1, T, C)
logits, (_, _, blocks, _) = t5.decode(params, cfg, batch["decoder_input_ids"], batch["decoder_attention_mask"],
                                      enc_out, batch["attention_mask"])  # (1, S, V)
T, S = batch["input_ids"].shape[1], batch["labels"].shape[1]
print(f"encoder output {enc_out.shape}, cross-attention weights {blocks[0].cross_attn.att.shape} (B, NH, S, T), "
      f"decoder self-attention {blocks[0].self_attn.att.shape} (B, NH, S, S)")
assert blocks[0].cross_attn.att.shape == (1, 2, S, T)
self_att = blocks[0].self_attn.att[0, 0]  # (S, S)
assert (self_att[np.triu_indices(S, 1)] < 1e-12).all()  # no weight on a later step
changed = batch["decoder_input_ids"].copy()
changed[0, 4:] = tok.vocab["fish"]  # change the decoder's input from step 4 on
logits2, _ = t5.decode(params, cfg, changed, batch["decoder_attention_mask"], enc_out, batch["attention_mask"])
assert np.abs(logits2[0, :4] - logits[0, :4]).max() < 1e-12 and np.abs(logits2[0, 4:] - logits[0, 4:]).max() > 1e-6
print("causal: steps 0..3 unchanged when the inputs from step 4 on change; steps 4.. changed")

# %% [markdown]
# ## 3. Cross-attention's backward, and where its gradient goes
# The core is attention with different lengths for queries and keys:
#     preatt = q @ k^T / sqrt(HS) + (1 - enc_mask) * MASK_VALUE ;  att = softmax(preatt) ;  out = att @ v
# with `q` from the decoder (S rows) and `k`, `v` from the encoder output (T rows). Its backward is
# attention's, with two lengths to keep apart: which of `dq`, `dk`, `dv` has S rows, which T, and
# which sums over what? Exercise 2 asks you to write it, into the encoder states; below,
# `t5.cross_attention_backward` meets the numerical gradient. `k` and `v` reach the encoder output
# through the block's kv projection (kv = enc_out @ cross.kv.w); every decoder layer reads the
# same enc_out, so its gradient is the **sum** over the layers, and from there it runs back
# through the whole encoder.

# %%
q, k, v = (rng.standard_normal(s) for s in ((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 4)))  # (B, NH, S|T, HS)
enc_mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])  # (B, T)
out, cache = t5.cross_attention_forward(q, k, v, enc_mask)  # (B, NH, S, HS)
dout = rng.standard_normal(out.shape)
dq, dk, dv = t5.cross_attention_backward(dout, cache)
for name, x, g in (("dq", q, dq), ("dk", k, dk), ("dv", v, dv)):
    num = numerical_grad(lambda: t5.cross_attention_forward(q, k, v, enc_mask)[0], x, dout)
    assert compare(f"cross-attention {name}", g, num)
assert (dk[0, :, 3:] == 0).all() and (dv[0, :, 3:] == 0).all()  # exact 0: padded keys got weight 0

# the encoder output's gradient: one share per decoder layer, added up
loss, _, cache_all = t5.t5_forward(params, cfg, batch)
grads = t5.t5_backward(cache_all, params, cfg)
dy = layers.linear_backward(layers.cross_entropy_backward(1.0, cache_all.loss), cache_all.logits)[0]  # (1, S, C)
shares = []
for l in reversed(range(cfg.num_decoder_layers)):
    dy, denc_l = t5.decoder_block_backward(dy, cache_all.blocks[l], cfg, l, {})  # (1, S, C), (1, T, C)
    shares.append(denc_l)
denc = sum(shares)  # (1, T, C)
enc_ref = enc_out.copy()  # (1, T, C) what t5_forward's encoder computed; perturbed in place below


def decoder_loss(e):
    """The loss as a function of the encoder output alone (the decoder and the loss, fixed params)."""
    lg, _ = t5.decode(params, cfg, batch["decoder_input_ids"], batch["decoder_attention_mask"], e,
                      batch["attention_mask"])  # (1, S, V)
    return layers.cross_entropy_forward(lg, batch["labels"], ignore_index=t5.IGNORE)[0]


num = numerical_grad_scalar(lambda: decoder_loss(enc_ref), enc_ref)  # (1, T, C)
assert compare("d enc_out = sum over decoder layers", denc, num)
print("norm of d enc_out from each decoder layer (last first):", [f"{np.linalg.norm(s):.3f}" for s in shares],
      f"sum {np.linalg.norm(denc):.3f}")
print(f"encoder input embedding gets a gradient too: |d tok_emb| over the input's rows "
      f"{np.abs(grads['tok_emb'][batch['input_ids'][0]]).sum():.3f}")

# %% [markdown]
# ## 4. Memorise four corrupted documents, then decode greedily
# Greedy decoding: run the encoder once; start the decoder with `[CLS]`, take the most likely
# token, append it, run again, until `[SEP]`. A few hundred AdamW steps on four fixed examples
# are enough for the tiny model to memorise them; then decoding writes each dropped span back
# after its sentinel, and `reconstruct` gives the original text.
#
# Why documents and not single sentences: the runs alternate kept, noise, kept, noise, ..., kept
# first and noise last, with as many noise runs as kept ones, so at any length the *last* run is
# noise: every sequence loses its last token(s) (the assert `mask[-1]` in section 1 checks it).
# Below about 30 tokens, 15% is at most 4 tokens, which round(4 / 3) makes *one* span: then the
# last run is all of the noise, and a single sentence only ever loses its tail. With two or more
# spans, as in these documents, the others land at random places inside the text (T5 itself
# corrupts 512-token chunks, about 25 spans each).

# %%
cfg = t5.T5Config(vocab_size=V, hidden_size=32, num_layers=1, num_decoder_layers=1, num_heads=2,
                  intermediate_size=64, max_position_embeddings=64, num_sentinels=NS)
params = t5.init_params(cfg, seed=1)
mask_rng = np.random.default_rng(5)
DOCS = [" ".join(SENTENCES[i:i + 4]) for i in range(0, 16, 4)]  # the first four documents (4 sentences each)
pairs = []
for doc in DOCS:
    ids = np.array(tok.convert_tokens_to_ids(tok.tokenize(doc)))
    pairs.append(D.span_corrupt(ids, D.random_spans_noise_mask(len(ids), mask_rng), V, SPECIAL.eos))
mem = D.pad_batch(pairs, SPECIAL)
opt = AdamW(params, lr=3e-3, weight_decay=0.0, bias_correction=True)
for step in range(150 if FAST else 300):
    loss, m, g = t5.t5_loss_and_grads(params, cfg, mem)
    opt.step(params, g)
    if step % 50 == 0:
        print(f"step {step:3d}  loss {m['loss']:.3f}  target-token accuracy {m['acc']:.2f}")
print(f"final loss {float(loss):.4f}")
decoded = t5.greedy_decode(params, cfg, mem["input_ids"], mem["attention_mask"], SPECIAL.start, SPECIAL.eos, 12)
for (i_ids, t_ids), row in zip(pairs, decoded):
    row = row[:list(row).index(SPECIAL.eos) + 1] if SPECIAL.eos in row else row
    print(f"input  {show(i_ids)}\n  greedy {show(row)}\n  -> {show(D.reconstruct(i_ids, row, V, NS, SPECIAL.eos))}")
    assert row.tolist() == t_ids.tolist()

# %% [markdown]
# ## Exercises
# Replace each `raise NotImplementedError(...)` with your code and re-run; the cell after the
# stubs grades your functions and names the check that failed and by how much. A stub left as it
# is makes the lesson go on with the reference solution
# (`lessons/solutions/22_span_corruption_encoder_decoder.py`).
#
# 1. `my_span_corrupt(tokens, noise_mask, vocab_size, eos_id)`: `tokens (n,)` ids and
#    `noise_mask (n,)` bool -> `(input, target)` int arrays: each run of noise tokens replaced in
#    the input by one sentinel (the i-th run by id `vocab_size - 1 - i`); the target is each
#    sentinel followed by the tokens of its run; both end with `eos_id`.
# 2. `my_cross_attention_backward(dout, q, enc_out, w_k, w_v, enc_mask)`: one head, no biases:
#    `k = enc_out @ w_k`, `v = enc_out @ w_v` (T, HS); `att = softmax(q @ k.T / sqrt(HS) + adder)`
#    with `adder = (1 - enc_mask) * -10000`; `out = att @ v` (S, HS). Given `dout (S, HS)`, return
#    `(dq (S, HS), denc_via_k (T, C), denc_via_v (T, C))`: the decoder's query gradient, and the
#    two shares of the gradient that reaches the encoder states, one through the keys (the score
#    path, through the softmax) and one through the values (the value path). Each is graded on its
#    own against a numerical gradient (for a share, with the other path's `enc_out` held fixed), so
#    a mistake in one path is named; then the lesson adds the two shares.

# %%
def my_span_corrupt(tokens, noise_mask, vocab_size, eos_id):
    """tokens (n,), noise_mask (n,) bool -> input ids, target ids (1-d int arrays, each ending with eos_id)"""
    raise NotImplementedError("exercise 1: build T5's input and target from a noise mask")  # your code here


def my_cross_attention_backward(dout, q, enc_out, w_k, w_v, enc_mask):
    """dout, q (S, HS), enc_out (T, C), w_k, w_v (C, HS), enc_mask (T,) -> dq (S, HS), denc_via_k, denc_via_v (T, C)"""
    raise NotImplementedError("exercise 2: backpropagate cross-attention, path by path")  # your code here


# %%
ex = course.Exercises("22_span_corruption_encoder_decoder")


def check_span_corrupt(fn):
    r = np.random.default_rng(2201)
    results = []
    for name, n, vocab in (("a drawn example", 8, 100), ("a drawn document", 60, 500)):
        toks = r.integers(5, vocab - 20, n)  # (n,) ordinary ids, below any sentinel
        if n > 20:
            noise = D.random_spans_noise_mask(n, r)  # (n,) bool
        else:  # a run of two and a run of one, at drawn places
            noise, a = np.zeros(n, bool), int(r.integers(0, 3))
            noise[a:a + 2] = True
            noise[int(r.integers(5, n))] = True
        eos = int(r.integers(1, 5))
        want_in, want_tg, span = [], [], -1  # T5's definition: one sentinel per run of noise, counting down
        for j, t in enumerate(toks.tolist()):
            if noise[j] and (j == 0 or not noise[j - 1]):
                span += 1
                want_in.append(vocab - 1 - span)
                want_tg.append(vocab - 1 - span)
            (want_tg if noise[j] else want_in).append(t)
        got_in, got_tg = fn(toks.copy(), noise.copy(), vocab, eos)
        results += [course.equal(f"{name}: input", np.asarray(got_in).tolist(), want_in + [eos]),
                    course.equal(f"{name}: target", np.asarray(got_tg).tolist(), want_tg + [eos])]
        if span < 20:
            results.append(course.equal(f"{name}: input and target give the tokens back (reconstruct)",
                                        D.reconstruct(np.asarray(got_in), np.asarray(got_tg), vocab, 20, eos),
                                        toks.tolist()))
    return results


def _attend(q, k, v, em, frozen=None):
    """out (S, HS) of one head from its queries (S, HS), keys and values (T, HS). `frozen`: each
    row's shift and normaliser (S, 1) each, held constant (the softmax without its sum's path)."""
    pre = q @ k.T / np.sqrt(q.shape[1]) + (1 - em) * -10000.0  # (S, T)
    top, z = frozen if frozen is not None else (pre.max(-1, keepdims=True), None)
    a = np.exp(pre - top)
    return (a / (a.sum(-1, keepdims=True) if z is None else z)) @ v  # (S, HS)


def _cross_attention_out(q, k_from, v_from, w_k, w_v, em):
    """out (S, HS) of one head, with the keys read from k_from and the values from v_from (T, C)."""
    return _attend(q, k_from @ w_k, v_from @ w_v, em)  # keys and values (T, HS) each


def check_cross_attention_backward(fn):
    r = np.random.default_rng(9)
    S_, T_, C_, HS_ = 3, 5, 6, 4
    dout, q = r.standard_normal((S_, HS_)), r.standard_normal((S_, HS_))
    enc, wk, wv = r.standard_normal((T_, C_)), r.standard_normal((C_, HS_)), r.standard_normal((C_, HS_))
    em = np.array([1, 1, 1, 1, 0])
    dq, via_k, via_v = (np.asarray(a) for a in fn(dout, q, enc, wk, wv, em))
    qq, enc_k, enc_v = q.copy(), enc.copy(), enc.copy()  # the keys read enc_k, the values enc_v
    scale = {"1/sqrt(HS)": 1 / np.sqrt(HS_), "sqrt(HS)": np.sqrt(HS_)}  # the mistakes the messages name
    # w_k and w_v swapped: each path's gradient at the keys (values) taken back through the other matrix
    kk, vv = enc @ wk, enc @ wv  # (T, HS) each
    dk_ = numerical_grad(lambda: _attend(q, kk, vv, em), kk, dout)  # (T, HS) at the keys
    dv_ = numerical_grad(lambda: _attend(q, kk, vv, em), vv, dout)  # (T, HS) at the values
    swapped = "w_k and w_v swapped: the score path reaches enc_out through the keys, k = enc_out @ w_k, " \
              "and the value path through v = enc_out @ w_v"
    at = "the gradient at the {0}, not at enc_out: {0} = enc_out @ {1}, so it goes back through {1} transposed"
    pre0 = q @ kk.T / np.sqrt(HS_) + (1 - em) * -10000.0  # (S, T)
    top0 = pre0.max(-1, keepdims=True)  # (S, 1)
    frozen = (top0, np.exp(pre0 - top0).sum(-1, keepdims=True))  # each row's shift and normaliser, held constant
    sum_term = "the term through the softmax's sum (each score also moves its row's normaliser)"
    q2, enc_k2 = q.copy(), enc.copy()
    dq_terms = lambda: {sum_term: numerical_grad(lambda: _attend(qq, kk, vv, em), qq, dout)  # noqa: E731
                        - numerical_grad(lambda: _attend(q2, kk, vv, em, frozen), q2, dout)}
    k_terms = lambda: {sum_term:  # noqa: E731
                       numerical_grad(lambda: _cross_attention_out(q, enc_k, enc, wk, wv, em), enc_k, dout)
                       - numerical_grad(lambda: _attend(q, enc_k2 @ wk, vv, em, frozen), enc_k2, dout)}
    unmasked = lambda which: {  # noqa: E731  the padded token's gradient with the mask left out
        "the encoder mask left out: the padded token takes attention, and so a gradient":
        numerical_grad(lambda: _cross_attention_out(q, enc_k, enc_v, wk, wv, np.ones_like(em)),
                       enc_k if which == "k" else enc_v, dout)[4]}
    no_mask = "the encoder mask left out: the padded token takes attention, and so a gradient"
    q3, enc_k3, enc_v3 = q.copy(), enc.copy(), enc.copy()
    ones = np.ones_like(em)  # (T,) every token real: what a forgotten mask computes
    dq_unmasked = lambda: {no_mask: numerical_grad(  # noqa: E731
        lambda: _cross_attention_out(q3, enc, enc, wk, wv, ones), q3, dout)}
    return [course.close("dq vs numerical gradient", dq,
                         numerical_grad(lambda: _cross_attention_out(qq, enc, enc, wk, wv, em), qq, dout),
                         factors=scale, terms=dq_terms, wrongs=dq_unmasked),
            course.close("denc_via_k (score path) vs numerical gradient, values held fixed", via_k,
                         numerical_grad(lambda: _cross_attention_out(q, enc_k, enc, wk, wv, em), enc_k, dout),
                         factors=scale, terms=k_terms,
                         wrongs=lambda: {swapped: dk_ @ wv.T, at.format("keys k", "w_k"): dk_, no_mask: numerical_grad(
                             lambda: _cross_attention_out(q, enc_k3, enc, wk, wv, ones), enc_k3, dout)}),
            course.close("denc_via_v (value path) vs numerical gradient, keys held fixed", via_v,
                         numerical_grad(lambda: _cross_attention_out(q, enc, enc_v, wk, wv, em), enc_v, dout),
                         wrongs=lambda: {swapped: dv_ @ wk.T, at.format("values v", "w_v"): dv_, no_mask: numerical_grad(
                             lambda: _cross_attention_out(q, enc, enc_v3, wk, wv, ones), enc_v3, dout)}),
            course.close("denc_via_k at the padded encoder token: exactly 0", via_k[4], np.zeros(C_), atol=0.0,
                         wrongs=lambda: unmasked("k")),
            course.close("denc_via_v at the padded encoder token: exactly 0", via_v[4], np.zeros(C_), atol=0.0,
                         wrongs=lambda: unmasked("v"))]


my_span_corrupt = ex.grade(1, my_span_corrupt, check_span_corrupt,
                           refuses=("family.t5_data.span_corrupt",))
my_cross_attention_backward = ex.grade(2, my_cross_attention_backward, check_cross_attention_backward,
                                       paths=("dq", "denc_via_k", "denc_via_v"),
                                       refuses=("family.t5.cross_attention_backward",
                                                "family.t5.decoder_block_backward",
                                                "family.xlnet.masked_attention_backward",
                                                "layers.attention_backward", "kernels.attention_backward",
                                                "layers.linear_backward", "kernels.linear_backward"))
r = np.random.default_rng(10)
dout2, q2, enc2 = r.standard_normal((3, 4)), r.standard_normal((3, 4)), r.standard_normal((5, 6))
wk2, wv2, em2 = r.standard_normal((6, 4)), r.standard_normal((6, 4)), np.array([1, 1, 1, 0, 0])
_, via_k, via_v = my_cross_attention_backward(dout2, q2, enc2, wk2, wv2, em2)
enc2_in = enc2.copy()
assert compare("enc_out's gradient = the two shares added", via_k + via_v,
               numerical_grad(lambda: _cross_attention_out(q2, enc2_in, enc2_in, wk2, wv2, em2), enc2_in, dout2))

# %% [markdown]
# ## Cross-attention's backward (exercise 2's answer)
# Attention's backward (lesson 05), line by line in reverse, with S query rows and T key rows:
#
#     dv = att^T @ dout   (B, NH, T, HS): sums over the S queries
#     datt = dout @ v^T ; dpreatt = att * (datt - sum(datt * att)) ; dq = dpreatt @ k * scale ;
#     dk = dpreatt^T @ q * scale   (B, NH, T, HS): sums over the S queries too
#
# then `denc_via_k = dk @ w_k^T` and `denc_via_v = dv @ w_v^T`: `enc_out` feeds both, so its
# gradient is their sum (the fork), and over the decoder layers the sum again.

# %% [markdown]
# ## Recap
# - Span corruption drops ~15% of the tokens in spans of mean length 3 and replaces each span
#   with one sentinel: the input shrinks, and the target is short (sentinels + dropped tokens),
#   so a step costs less decoder work than predicting every token.
# - The decoder's causal self-attention sees only what it has written; cross-attention reads the
#   encoder output at every layer. Its gradient reaches the encoder through keys and values,
#   summed over the decoder layers, and then flows through the encoder as BERT's would.
# - Greedy decoding: encoder once, decoder once per output token, the argmax fed back.
# - `python -m minibert train-t5` pretrains the `t5-tiny` preset on the default corpus, and
#   `train-t5 --mode sst2 --data DIR --init runs/t5-tiny` fine-tunes it text to text (the answer is
#   the word "positive" or "negative"); docs/family.md has the measured numbers.

# %%
print("lesson 22 passed")
