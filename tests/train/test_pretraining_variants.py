"""The pretraining variants of the paper's ablations, as settings of the one pipeline
(docs/bert-notes.md §3.11, §5.6): the MASK/SAME/RND shares of Table 8 in the generator and in
dynamic masking; No NSP (objective "mlm"); LTR & No NSP (objective "ltr": causal attention,
next-token loss through the MLM head). The default settings stay BERT's, bit for bit
(tests/data/test_pretraining_data.py, tests/test_model.py, tests/train/test_train.py run unchanged)."""
from __future__ import annotations

import math
import random
from functools import partial

import numpy as np
import pytest
from corpora import SPECIALS, WORDS, pretraining_files, word_corpus, write_vocab

from minibert.analysis import gradcheck as gc
from minibert import kernels, layers
from minibert.backend import get_ops
from minibert.bert import BertForPreTraining
from minibert.loop.step import training_step
from minibert.train.pretraining_step import pretraining_loss
from minibert.model import OBJECTIVES, BertConfig, bert_backward, bert_forward, ltr_targets, trained_params
from minibert.optim import AdamW
from minibert.data.pretraining_data import (CLS, MASK, SEP, UNMASKED_NAME, check_mask_shares, create_masked_lm_predictions,
                                       create_training_instances, remask)
from minibert.data.shards import BatchIterator, build_pretraining_data, read_meta
from minibert.dev import attention_v1, attention_v3
from minibert.train import config as train_config
from minibert.train import pretrain
from minibert.train import runs as train_runs

TABLE_8 = [(0.8, 0.1, 0.1), (1.0, 0.0, 0.0), (0.8, 0.0, 0.2), (0.8, 0.2, 0.0), (0.0, 0.2, 0.8), (0.0, 0.0, 1.0)]
TABLE_8_IDS = ["80-10-10", "100-0-0", "80-0-20", "80-20-0", "0-20-80", "0-0-100"]
TINY = dict(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=32, max_position_embeddings=16)
VOCAB = SPECIALS + WORDS


def perturbed_model(seed=0, dtype=np.float64, **over):
    """A tiny model away from the init's unit LayerNorms and zero biases."""
    model = BertForPreTraining(BertConfig(**{**TINY, **over}), seed=seed, dtype=dtype)
    rng = np.random.default_rng(seed + 100)
    for p in model.params.values():
        p += (0.1 * rng.standard_normal(p.shape)).astype(dtype)
    return model


# ---------------------------------------------------------------------------------------------
# MASK / SAME / RND shares (Table 8)

def _outcomes(pairs):
    """(original, input token) pairs of the predictions -> shares of [MASK], kept, other."""
    n = len(pairs)
    n_mask = sum(inp == MASK for _, inp in pairs)
    n_kept = sum(inp == orig for orig, inp in pairs)
    return n_mask / n, n_kept / n, (n - n_mask - n_kept) / n, n


def _expected(shares, V):
    """The shares a prediction's input shows: a random token is [MASK] or the original itself
    with probability 1/V each (the original's semantics: any vocab token, specials included)."""
    m, s, r = shares
    return m + r / V, s + r / V, r * (1 - 2 / V)


def _generator_pairs(shares, n_seqs=2000, seed=0):
    """Predictions of create_masked_lm_predictions on random 64-token pairs (10 per sequence)."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n_seqs):
        words = [WORDS[rng.randrange(len(WORDS))] for _ in range(61)]
        tokens = [CLS, *words[:30], SEP, *words[30:], SEP]
        out, positions, labels = create_masked_lm_predictions(tokens, 0.15, 20, VOCAB, rng, mask_shares=shares)
        assert len(positions) == 10 and labels == [tokens[p] for p in positions]
        pairs += [(tokens[p], out[p]) for p in positions]
    return pairs


def _remask_pairs(shares, N=2000, T_=64, P=10, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(len(SPECIALS), len(VOCAB), size=(N, T_))  # (N, T) word ids only
    ids[:, 0], ids[:, 30], ids[:, -1] = 2, 3, 3  # [CLS] ... [SEP] ... [SEP]
    feats = {UNMASKED_NAME: ids, "input_mask": np.ones((N, T_), np.int64),  # (N, T)
             "segment_ids": np.zeros((N, T_), np.int64), "next_sentence_labels": np.zeros(N, np.int64)}  # (N, T), (N,)
    out = remask(feats, seed + 1, 0.15, P, len(VOCAB), [2, 3], 4, mask_shares=shares)
    real = out["masked_lm_weights"] > 0  # (N, P)
    inp = np.take_along_axis(out["input_ids"], out["masked_lm_positions"], axis=1)[real]  # (n,)
    orig = out["masked_lm_ids"][real]  # (n,)
    return [(VOCAB[o], VOCAB[i]) for o, i in zip(orig, inp)]


@pytest.mark.parametrize("source", ["generator", "dynamic"])
@pytest.mark.parametrize("shares", TABLE_8, ids=TABLE_8_IDS)
def test_mask_shares_proportions_match_within_five_standard_errors(shares, source):
    """About 20,000 predictions per setting; each observed share lies within 5 binomial standard
    errors (at most 0.018 here) of its expectation, random tokens that hit [MASK] or the original
    included. A wrong branch moves a share by 0.1 or more."""
    pairs = _generator_pairs(shares) if source == "generator" else _remask_pairs(shares)
    got = _outcomes(pairs)
    n = got[3]
    assert n >= 19_000
    for name, g, e in zip(("MASK", "SAME", "RND"), got[:3], _expected(shares, len(VOCAB))):
        tol = 5 * math.sqrt(max(e * (1 - e), 1 / n) / n)
        assert abs(g - e) <= tol, f"{shares} {source}: {name} share {g:.4f}, expected {e:.4f} +- {tol:.4f}"


@pytest.mark.parametrize("source", ["generator", "dynamic"])
def test_mask_shares_100_0_0_turns_every_selected_position_into_mask(source):
    pairs = _generator_pairs((1.0, 0.0, 0.0), n_seqs=200) if source == "generator" else \
        _remask_pairs((1.0, 0.0, 0.0), N=400)
    assert pairs and all(inp == MASK for _, inp in pairs)


@pytest.mark.parametrize("source", ["generator", "dynamic"])
def test_mask_shares_0_0_100_never_masks_and_keeps_only_by_chance(source):
    """RND-only: no [MASK] unless the random token is [MASK] (1/V); the original stays only when
    the random token happens to be it (1/V): both within 5 standard errors of 1/V = 0.02."""
    pairs = _generator_pairs((0.0, 0.0, 1.0)) if source == "generator" else _remask_pairs((0.0, 0.0, 1.0))
    share_mask, share_kept, share_rnd, n = _outcomes(pairs)
    p = 1 / len(VOCAB)
    tol = 5 * math.sqrt(p * (1 - p) / n)
    assert abs(share_mask - p) <= tol and abs(share_kept - p) <= tol, (share_mask, share_kept)
    assert share_rnd > 0.9


def test_default_mask_shares_give_the_same_instances_and_rng_state(tmp_path):
    """Passing BERT's shares explicitly changes nothing: same instances, same rng state after."""
    from minibert.text.tokenizer import BertTokenizer

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(t + "\n" for t in VOCAB), encoding="utf-8")
    corpus = word_corpus(tmp_path / "c.txt", n_docs=12, seed=3)
    tok = BertTokenizer(str(vocab))
    runs = []
    for kw in ({}, {"mask_shares": (0.8, 0.1, 0.1)}):
        rng = random.Random(12345)
        inst = create_training_instances([str(corpus)], tok, 32, 2, 0.1, 0.15, 5, rng, **kw)
        runs.append((inst, rng.random()))
    assert runs[0] == runs[1]
    rng = random.Random(12345)
    other = create_training_instances([str(corpus)], tok, 32, 2, 0.1, 0.15, 5, rng, mask_shares=(1.0, 0.0, 0.0))
    assert [i.tokens for i in other] != [i.tokens for i in runs[0][0]]


@pytest.mark.parametrize("bad", [(0.8, 0.1), (0.5, 0.1, 0.1), (1.2, -0.1, -0.1), (float("nan"), 0.5, 0.5), "abc"])
def test_mask_shares_must_be_three_shares_summing_to_one(bad):
    with pytest.raises(ValueError, match="mask_shares"):
        check_mask_shares(bad)
    with pytest.raises(ValueError, match="mask_shares"):
        train_config.make_config("tiny", mask_shares=bad).validate(require_files=False)
    assert check_mask_shares(["0", "0.2", "0.8"]) == (0.0, 0.2, 0.8)  # exact: float() of text, no arithmetic


def test_mask_shares_setting_parses_round_trips_and_reaches_the_shards(tmp_path):
    """--set mask_shares=1,0,0 -> floats; run.json's list form reads back equal; the generator
    writes the shares to meta.json, and a dynamic iterator takes them from there."""
    assert train_config.TrainConfig.parse_set(["mask_shares=1,0,0"]) == {"mask_shares": (1.0, 0.0, 0.0)}
    cfg = train_config.make_config("tiny", mask_shares=[1, 0, 0], objective="mlm")
    cfg.validate(require_files=False)
    assert cfg.mask_shares == (1.0, 0.0, 0.0) and cfg.to_dict()["mask_shares"] == [1.0, 0.0, 0.0]
    assert train_config.TrainConfig.from_dict(cfg.to_dict()) == cfg and train_config.TrainConfig.from_dict(cfg.flat()) == cfg
    assert train_config.TrainConfig().mask_shares == (0.8, 0.1, 0.1) and train_config.TrainConfig().objective == "mlm_nsp"  # exact: literals

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(t + "\n" for t in VOCAB), encoding="utf-8")
    corpus = word_corpus(tmp_path / "c.txt", n_docs=20, seed=4)
    meta = build_pretraining_data([corpus], vocab, tmp_path / "d", max_seq_length=32, max_predictions_per_seq=5,
                                  dupe_factor=2, mask_shares=(1.0, 0.0, 0.0), verbose=False)
    assert meta["flags"]["mask_shares"] == [1.0, 0.0, 0.0] == read_meta(tmp_path / "d")["flags"]["mask_shares"]
    assert meta["stats"]["share_mask"] == 1.0 and meta["stats"]["predictions"] > 0
    it = BatchIterator(str(tmp_path / "d"), 8, seed=0, masking="dynamic")
    assert it.mask_shares == (1.0, 0.0, 0.0)
    batch = it.next_batch()
    real = batch["masked_lm_weights"] > 0  # (B, P)
    at = np.take_along_axis(batch["input_ids"], batch["masked_lm_positions"], axis=1)  # (B, P)
    assert real.any() and np.all(at[real] == VOCAB.index(MASK))


# ---------------------------------------------------------------------------------------------
# objectives: the default, No NSP, LTR

def test_objectives_and_the_parameters_they_train():
    names = list(BertForPreTraining(BertConfig(**TINY)).params)
    assert OBJECTIVES == ("mlm_nsp", "mlm", "ltr")
    assert trained_params(names, "mlm_nsp") == names
    for objective in ("mlm", "ltr"):
        kept = trained_params(names, objective)
        assert set(names) - set(kept) == {"pool.w", "pool.b", "nsp.w", "nsp.b"}
        assert kept == [k for k in names if k in kept]  # params' order
    with pytest.raises(ValueError, match="objective"):
        trained_params(names, "gpt")
    with pytest.raises(ValueError, match="objective"):
        train_config.make_config("tiny", objective="gpt").validate(require_files=False)
    with pytest.raises(ValueError, match="control_shuffle_labels"):
        train_config.make_config("tiny", objective="ltr", control_shuffle_labels=True).validate(require_files=False)


def test_default_objective_is_bert_mlm_plus_nsp():
    model = perturbed_model()
    batch = gc.random_batch(model.config, B=3, T=8, P=3, rng=np.random.default_rng(0))
    loss, grads, m = model.loss_grads_metrics(batch)
    loss2, grads2, m2 = model.loss_grads_metrics(batch, objective="mlm_nsp")
    np.testing.assert_allclose(loss, loss2, rtol=1e-14)
    np.testing.assert_allclose(loss, m.mlm_loss + m.nsp_loss, rtol=1e-12)
    assert list(grads) == list(model.params) == list(grads2) and m.nsp_count == 3


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_no_nsp_loss_is_the_mlm_loss_and_its_grads_skip_the_nsp_head(backend, monkeypatch):
    monkeypatch.setattr("minibert.backend.chosen", backend)
    model = perturbed_model(seed=1)
    batch = gc.random_batch(model.config, B=3, T=8, P=3, rng=np.random.default_rng(1))
    _, full_grads, full = model.loss_grads_metrics(batch)
    loss, grads, m = model.loss_grads_metrics(batch, objective="mlm")
    np.testing.assert_allclose(loss, full.mlm_loss, rtol=1e-12)
    assert m.mlm_loss == m.loss and m.nsp_loss == 0.0 and (m.nsp_count, m.nsp_correct) == (0, 0)
    assert (m.mlm_correct, m.mlm_count) == (full.mlm_correct, full.mlm_count)
    assert list(grads) == trained_params(model.params, "mlm")
    # the MLM head's own gradients do not depend on NSP; the encoder's do (NSP reads [CLS])
    np.testing.assert_allclose(grads["mlm.bias"], full_grads["mlm.bias"], rtol=1e-12, atol=1e-15)
    assert not np.allclose(grads["h1.ln2.w"], full_grads["h1.ln2.w"], rtol=1e-6)


def test_no_nsp_model_needs_only_the_mlm_head():
    full = perturbed_model(seed=2)
    mlm_only = BertForPreTraining(full.config, dtype=np.float64,
                                  params={k: v for k, v in full.params.items() if not k.startswith(("pool.", "nsp."))})
    batch = gc.random_batch(full.config, B=2, T=8, P=2, rng=np.random.default_rng(2))
    np.testing.assert_allclose(mlm_only.loss_and_grads(batch, objective="mlm")[0],
                               full.loss_and_grads(batch, objective="mlm")[0], rtol=1e-12)
    np.testing.assert_allclose(mlm_only.loss_and_grads(batch, objective="ltr")[0],
                               full.loss_and_grads(batch, objective="ltr")[0], rtol=1e-12)
    with pytest.raises(ValueError, match="the pretraining loss needs the pooler, MLM and NSP heads"):
        mlm_only.loss_and_grads(batch)


@pytest.mark.parametrize("objective", ["mlm", "ltr"])
def test_a_step_without_nsp_leaves_the_pooler_and_nsp_head_unchanged(objective):
    """The optimizer holds only the trained parameters: no update, not even weight decay,
    reaches pool.* and nsp.*; everything else moves."""
    model = perturbed_model(seed=3, dtype=np.float32)
    before = {k: v.copy() for k, v in model.params.items()}
    opt = AdamW({k: model.params[k] for k in trained_params(model.params, objective)}, lr=1e-2, weight_decay=0.01)
    batch = gc.random_batch(model.config, B=4, T=10, P=3, rng=np.random.default_rng(3))
    for step in range(2):
        r = training_step(model, opt, batch, step, lr=1e-2, warmup_steps=0, total_steps=10,
                          loss_fn=partial(pretraining_loss, model, objective=objective))
        assert math.isfinite(r.loss)
    for k in model.params:
        if k.startswith(("pool.", "nsp.")):
            assert np.array_equal(model.params[k], before[k]), k  # untouched arrays, the very bits
        else:  # a gradient step, or weight decay alone (embedding rows the batch does not use)
            assert not np.allclose(model.params[k], before[k]), k


def test_ltr_targets_predict_every_next_real_token():
    ids = np.array([[2, 7, 8, 3, 9, 3, 0, 0], [2, 5, 3, 6, 6, 6, 6, 3]])  # (2, 8)
    mask = np.array([[1, 1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1, 1, 1]])  # (2, 8)
    flat_pos, targets = ltr_targets(ids, mask)
    # row 0: positions 0..4 predict 7 8 3 9 3; position 5 (last real) and padding predict nothing
    assert flat_pos.tolist() == [0, 1, 2, 3, 4, 8, 9, 10, 11, 12, 13, 14]
    assert targets.tolist() == [7, 8, 3, 9, 3, 5, 3, 6, 6, 6, 6, 3]
    one = ltr_targets(np.array([[2]]), np.array([[1]]))  # T = 1: nothing to predict
    assert one[0].size == 0 and one[1].size == 0


def _ltr_batch(cfg, rng, B=3, T_=9):
    """Unmasked ids with padding in two rows (lengths T, T-3, 4) and no masked_lm_* features."""
    ids = rng.integers(5, cfg.vocab_size, size=(B, T_))  # (B, T)
    lengths = np.array([T_, T_ - 3, 4])[:B]
    mask = (np.arange(T_)[None] < lengths[:, None]).astype(np.int64)  # (B, T)
    seg = ((np.arange(T_)[None] >= 3) & (mask > 0)).astype(np.int64)  # (B, T)
    return {"input_ids": ids * mask, "input_mask": mask, "segment_ids": seg}


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_ltr_loss_is_the_mean_next_token_cross_entropy_of_the_causal_model(backend, monkeypatch):
    monkeypatch.setattr("minibert.backend.chosen", backend)
    model = perturbed_model(seed=4)
    batch = _ltr_batch(model.config, np.random.default_rng(4))
    loss, grads, m = model.loss_grads_metrics(batch, objective="ltr")
    out = model.forward(batch["input_ids"], batch["segment_ids"], batch["input_mask"], causal=True)
    logits = out.mlm_logits  # (B, T, V): at t, the prediction of token t + 1
    z = logits - logits.max(-1, keepdims=True)  # (B, T, V)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))  # (B, T, V)
    ids, mask = batch["input_ids"], batch["input_mask"]
    nll = [-logp[b, t, ids[b, t + 1]] for b in range(ids.shape[0]) for t in range(ids.shape[1] - 1)
           if mask[b, t] and mask[b, t + 1]]
    np.testing.assert_allclose(loss, np.mean(nll), rtol=1e-10)
    assert m.mlm_count == len(nll) == int(mask.sum()) - ids.shape[0] and m.nsp_count == 0
    assert list(grads) == trained_params(model.params, "ltr")


def test_ltr_reads_a_pretraining_batch_with_its_masked_tokens_put_back():
    """A masked pretraining batch (static or dynamic masks) and the same text unmasked give the
    same LTR loss: the model reads the original tokens, [MASK] never."""
    model = perturbed_model(seed=5)
    rng = np.random.default_rng(5)
    unmasked = _ltr_batch(model.config, rng)
    feats = {UNMASKED_NAME: unmasked["input_ids"], "input_mask": unmasked["input_mask"],
             "segment_ids": unmasked["segment_ids"], "next_sentence_labels": np.zeros(3, np.int64)}
    masked = remask(feats, 6, 0.3, 3, model.config.vocab_size, [], 4)
    assert (masked["input_ids"] != unmasked["input_ids"]).any()
    np.testing.assert_allclose(model.loss_and_grads(masked, objective="ltr")[0],
                               model.loss_and_grads(unmasked, objective="ltr")[0], rtol=1e-12)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_ltr_output_at_t_does_not_change_when_later_tokens_change(backend, monkeypatch):
    """Causal: sequence_output and the LM logits at positions 0..t depend on tokens 0..t only.
    Without the causal mask (control) the same change moves them."""
    monkeypatch.setattr("minibert.backend.chosen", backend)
    model = perturbed_model(seed=6)
    rng = np.random.default_rng(6)
    B, T_ = 2, 10
    ids = rng.integers(5, 50, size=(B, T_))  # (B, T)
    seg = np.zeros((B, T_), np.int64)  # (B, T)
    mask = np.ones((B, T_), np.int64)  # (B, T)
    mask[1, 8:] = 0  # a padded row too
    for t in (0, 3, 7):
        changed = ids.copy()  # (B, T)
        changed[:, t + 1:] = rng.integers(5, 50, size=(B, T_ - t - 1))
        for causal in (True, False):
            a = model.forward(ids, seg, mask, causal=causal)
            b = model.forward(changed, seg, mask, causal=causal)
            close = [np.allclose(x[:, :t + 1], y[:, :t + 1], rtol=1e-12, atol=1e-12)
                     for x, y in ((a.sequence_output, b.sequence_output), (a.mlm_logits, b.mlm_logits))]
            assert all(close) if causal else not any(close), (t, causal)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_ltr_unpadded_path_gives_the_same_loss_and_gradients(backend, monkeypatch):
    monkeypatch.setattr("minibert.backend.chosen", backend)
    model = perturbed_model(seed=7)
    batch = _ltr_batch(model.config, np.random.default_rng(7))
    ops = get_ops()
    out = {}
    for unpad in (False, True):
        loss, m, cache = bert_forward(model.params, model.config, batch, ops=ops, unpad=unpad, objective="ltr")
        assert (cache[0].keep is not None) == unpad
        out[unpad] = loss, bert_backward(model.params, model.config, cache, ops)
    np.testing.assert_allclose(out[True][0], out[False][0], rtol=1e-12)
    assert list(out[True][1]) == list(out[False][1]) == trained_params(model.params, "ltr")
    for name, g in out[False][1].items():
        np.testing.assert_allclose(out[True][1][name], g, rtol=1e-10, atol=1e-14, err_msg=name)


# ---------------------------------------------------------------------------------------------
# the causal attention: kernels against the reference, and gradient checks on both backends

@pytest.mark.parametrize("ops", [layers, kernels], ids=["numpy", "numba"])
def test_causal_attention_gradcheck(ops):
    checks = gc.check_causal_attention(np.random.default_rng(0), verbose=False, ops=ops)
    assert len(checks) == 6 and all(checks), [c for c in checks if not c]


@pytest.mark.parametrize("objective", ["ltr", "mlm"])
@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_objective_model_gradcheck(backend, objective, monkeypatch):
    """Whole model in float64, every trained tensor sampled, pass rule rtol 1e-5 / atol 1e-8 (the
    measured errors are below 1e-10 absolute)."""
    monkeypatch.setattr("minibert.backend.chosen", backend)
    checks = gc.check_objective_model(np.random.default_rng(1), verbose=False, objective=objective,
                                      samples_per_tensor=3)
    assert len(checks) == len(trained_params(BertForPreTraining(BertConfig(**TINY)).params, objective))
    assert all(checks), [c for c in checks if not c]


def test_causal_attention_weights_only_real_keys_up_to_the_query():
    rng = np.random.default_rng(0)
    B, NH, T_, HS = 2, 2, 6, 4
    q, k, v = (rng.standard_normal((B, NH, T_, HS)) for _ in range(3))  # 3 x (B, NH, T, HS)
    mask = np.ones((B, T_))  # (B, T)
    mask[1, 4:] = 0
    visible = layers.causal_visible(mask)  # (B, 1, T, T)
    assert visible[0, 0].tolist() == np.tril(np.ones((T_, T_))).tolist()
    for ops in (layers, kernels):
        _, c = ops.attention_forward(q, k, v, mask, causal=True)
        assert np.all(c.att[np.broadcast_to(visible == 0, c.att.shape)] == 0.0)  # exp underflows to exactly 0
        np.testing.assert_allclose(c.att.sum(-1), 1.0, rtol=1e-12)
        np.testing.assert_allclose(c.att[:, :, 0, 0], 1.0, rtol=1e-12)  # position 0 sees itself only


def _assert_matches(name, got, ref):
    if ref.dtype == np.float64:
        rtol, atol = 1e-10, 1e-13 * max(1.0, float(np.abs(ref).max()))
    else:
        rtol, atol = 1e-5, 3e-6 * max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol, err_msg=name)


CAUSAL_VERSIONS = {"v1": (attention_v1.attention_forward_v1, attention_v1.attention_backward_v1),
                   "v3": (attention_v3.attention_forward_v3, attention_v3.attention_backward_v3),
                   "v4": (kernels.attention_forward, kernels.attention_backward)}


def _causal_cases():
    """(shape, version, dtype), each a cold compile of its own: v1's causal builds (the lesson's
    all-Numba version, not the model's) are checked serial in float64 by make test, its float32
    and parallel builds by make test-all; v3 and v4, which the model runs, in full by both."""
    for shape, sid in [((2, 2, 7, 8), "T7"), ((1, 1, 1, 8), "T1"), ((5, 2, 64, 32), "parallel")]:
        for version in sorted(CAUSAL_VERSIONS):
            for dtype in (np.float64, np.float32):
                long = version == "v1" and (dtype == np.float32 or sid == "parallel")
                yield pytest.param(shape, dtype, version, id=f"{sid}-{np.dtype(dtype).name}-{version}",
                                   marks=[pytest.mark.slow] if long else [])


@pytest.mark.parametrize("shape,dtype,version", list(_causal_cases()))
@pytest.mark.parametrize("dropout_p", [0.0, 0.2], ids=["nodrop", "drop0.2"])
def test_causal_attention_kernels_match_reference(shape, dropout_p, dtype, version):
    forward, backward = CAUSAL_VERSIONS[version]
    rng = np.random.default_rng(sum(shape))
    B, NH, T_, HS = shape
    q, k, v = (rng.standard_normal(shape).astype(dtype) for _ in range(3))  # 3 x (B, NH, T, HS)
    mask = np.ones((B, T_))  # (B, T)
    mask[0, T_ // 2 + 1:] = 0  # padded tail
    out_ref, c_ref = layers.attention_forward(q, k, v, mask, dropout_p, np.random.default_rng(5), causal=True)
    out, c = forward(q, k, v, mask, dropout_p, np.random.default_rng(5), causal=True)
    _assert_matches("out", out, out_ref)
    _assert_matches("att", c.att, c_ref.att)
    dout = rng.standard_normal(shape).astype(dtype)  # (B, NH, T, HS)
    for name, g, g_ref in zip(("dq", "dk", "dv"), backward(dout, c), layers.attention_backward(dout, c_ref)):
        _assert_matches(name, g, g_ref)


# ---------------------------------------------------------------------------------------------
# through the training loop

@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("variants")
    return pretraining_files(d, word_corpus(d / "train.txt", 60, 0), word_corpus(d / "heldout.txt", 10, 1),
                             write_vocab(d / "vocab.txt", VOCAB))


def _config(files, out, **kw):
    base = dict(files, out=str(out), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                intermediate_size=32, max_position_embeddings=32, max_seq_length=32, max_predictions_per_seq=5,
                batch_size=8, dupe_factor=2, lr=5e-3, warmup_steps=2, steps=6, log_interval=2, eval_interval=3,
                checkpoint_interval=3, eval_examples=32, curves=False)
    return train_config.make_config("tiny", **{**base, **kw})


@pytest.mark.parametrize("objective", ["mlm", "ltr"])
def test_training_run_without_nsp_resumes_bit_exactly_and_never_touches_nsp(files, tmp_path, objective, capsys):
    cfg = _config(files, tmp_path / "run", objective=objective)
    trainer = pretrain.train(cfg, verbose=True, max_steps_this_run=3)
    assert trainer.loop.status == "paused" and set(trainer.run.optimizer.m) == set(trained_params(trainer.run.model.params,
                                                                                         objective))
    init = BertForPreTraining(trainer.run.model.config, seed=cfg.seed).params
    for k in ("pool.w", "pool.b", "nsp.w", "nsp.b"):
        assert np.array_equal(trainer.run.model.params[k], init[k]), k
    resumed = pretrain.train(train_runs.resume_config(tmp_path / "run", {}), resume=True, verbose=False)
    straight = pretrain.train(_config(files, tmp_path / "straight", objective=objective), verbose=False)
    assert resumed.loop.status == straight.loop.status == "done"
    for k, p in straight.run.model.params.items():
        assert np.array_equal(resumed.run.model.params[k], p), k  # the same computation, resumed
    ev = straight.run.last_eval
    assert 0.0 <= ev.mlm_acc <= 1.0 and math.isfinite(ev.mlm_loss)
    if objective == "ltr":
        assert ev.nsp_acc == 0.0
    out = capsys.readouterr().out
    assert f"objective {objective}" in out and ("LTR acc" in out) == (objective == "ltr")
    assert ("NSP acc" in out.split("eval step")[0]) is False  # train log lines show no NSP


def test_training_run_with_table_8_shares_uses_its_own_data(files, tmp_path):
    default = pretrain.train(_config(files, tmp_path / "a", steps=1, eval_interval=100), verbose=False)
    mask_only = pretrain.train(_config(files, tmp_path / "b", steps=1, eval_interval=100, masking="static",
                                mask_shares=(1.0, 0.0, 0.0)), verbose=False)
    assert default.run.data.train != mask_only.run.data.train
    assert read_meta(mask_only.run.data.train)["stats"]["share_mask"] == 1.0
    batch = mask_only.run.iterator.next_batch()
    real = batch["masked_lm_weights"] > 0  # (B, P)
    assert np.all(np.take_along_axis(batch["input_ids"], batch["masked_lm_positions"], axis=1)[real] == 4)
