"""The fine-tuning classes: float64 gradient checks of every head and of each whole class on both
backends, shapes, checkpoints (what transformers reads is in tests/interop), clear errors."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import minibert
from minibert.analysis import gradcheck
from minibert.bert import BertForPreTraining
from minibert.finetune import gradchecks as ft_checks
from minibert.finetune import heads, models
from minibert.finetune.models import (BertForMultipleChoice, BertForQuestionAnswering, BertForSequenceClassification,
                                      BertForTokenClassification, TaskConfig)
from minibert.checkpoint import to_hf_state_dict
from minibert.model import BertConfig

CFG = BertConfig(vocab_size=40, hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=16,
                 max_position_embeddings=16)
VOCAB = [f"t{i}" for i in range(CFG.vocab_size)]


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_heads_gradcheck(backend, monkeypatch):
    monkeypatch.setenv("MINIBERT_BACKEND", backend)
    checks = ft_checks.check_heads(np.random.default_rng(0), verbose=False)
    assert len(checks) == 4 and all(checks), [c.row() for c in checks if not c]


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_every_class_gradcheck_float64(backend, monkeypatch):
    monkeypatch.setenv("MINIBERT_BACKEND", backend)
    checks = ft_checks.check_task_models(np.random.default_rng(1), verbose=False)
    n_tensors = sum(len(m.params) for m in (BertForSequenceClassification(CFG, 3), BertForSequenceClassification(CFG, 1),
                                            BertForTokenClassification(CFG, 3), BertForMultipleChoice(CFG),
                                            BertForQuestionAnswering(CFG), BertForSequenceClassification(CFG, 3),
                                            BertForTokenClassification(CFG, 3), BertForMultipleChoice(CFG),
                                            BertForSequenceClassification(CFG, 3).make_causal(bilstm=True),
                                            BertForTokenClassification(CFG, 3).make_causal(bilstm=True)))
    # every tensor of every class sampled, the three causal ones and the two with a BiLSTM too
    assert len(checks) == n_tensors
    assert sum(", causal)" in c.name for c in checks) == sum(
        len(m.params) for m in (BertForSequenceClassification(CFG, 3), BertForTokenClassification(CFG, 3),
                                BertForMultipleChoice(CFG)))
    assert all(checks), [c.row() for c in checks if not c]


def test_a_wrong_backward_fails_the_check(monkeypatch):
    """The whole-class check can fail: drop the pooler's tanh derivative and it does."""
    monkeypatch.setenv("MINIBERT_BACKEND", "numpy")
    real = heads.head_backward

    def broken(params, cfg, cache, ops=None):
        return real(params, cfg, cache._replace(pool=cache.pool._replace(tanh=cache.pool.tanh * 0))
                    if cache.pool is not None else cache, ops)

    monkeypatch.setattr("minibert.finetune.models.head_backward", broken)
    checks = ft_checks.check_task_models(np.random.default_rng(1), verbose=False)
    assert any(not c for c in checks if c.name.startswith("SequenceClassification"))
    assert all(checks[i] for i, c in enumerate(checks) if c.name.startswith("TokenClassification"))


def test_package_root_exports_the_classes():
    assert minibert.BertForSequenceClassification is BertForSequenceClassification
    assert minibert.BertForQuestionAnswering is BertForQuestionAnswering


@pytest.mark.parametrize("cls,shape_of", [
    (lambda: BertForSequenceClassification(CFG, num_labels=3), lambda B, T: (B, 3)),
    (lambda: BertForTokenClassification(CFG, num_labels=5), lambda B, T: (B, T, 5)),
])
def test_forward_shapes(cls, shape_of):
    model = cls()
    ids = np.array([[2, 7, 8, 3, 0], [2, 9, 3, 0, 0]])
    logits = model.forward(ids, attention_mask=(ids > 0).astype(int))
    assert logits.shape == shape_of(2, 5) and logits.dtype == np.float32


def test_multiple_choice_and_qa_shapes():
    ids = np.full((2, 4, 6), 7)
    assert BertForMultipleChoice(CFG).forward(ids).shape == (2, 4)
    start, end = BertForQuestionAnswering(CFG).forward(ids[:, 0])
    assert start.shape == end.shape == (2, 6)
    with pytest.raises(ValueError, match=r"multiple choice input_ids must be \(batch, choices, seq_len\)"):
        BertForMultipleChoice(CFG).forward(ids[:, 0])


def test_config_keys_and_defaults():
    model = BertForSequenceClassification(CFG, num_labels=3)
    assert model.config.id2label == {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}
    assert model.config.label2id == {"LABEL_0": 0, "LABEL_1": 1, "LABEL_2": 2}
    assert model.config.problem_type == "single_label_classification"
    assert BertForSequenceClassification(CFG, num_labels=1).config.problem_type == "regression"
    assert "mlm.bias" not in model.params and "pool.w" in model.params
    assert "pool.w" not in BertForTokenClassification(CFG).params  # transformers' has no pooler either
    with pytest.raises(ValueError, match="num_labels=0"):
        BertForSequenceClassification(CFG, num_labels=0)


def test_new_head_leaves_the_encoder_init_unchanged():
    """The head draws from its own random stream: same seed, same encoder as BertForPreTraining."""
    pre = BertForPreTraining(CFG, seed=3)
    cls = BertForSequenceClassification(CFG, num_labels=2, seed=3)
    for name in ("tok_emb", "h1.ffn.in.w", "pool.w"):
        np.testing.assert_array_equal(cls.params[name], pre.params[name])  # exact: same generator, same draws
    assert 0.005 < cls.params["cls.w"].std() < 0.03 and not cls.params["cls.b"].any()


def test_grads_map_to_transformers_names():
    model = BertForTokenClassification(CFG, num_labels=3)
    batch = gradcheck.head_batch("token", CFG, np.random.default_rng(0), num_labels=3)
    _, grads = model.loss_and_grads(batch)
    assert set(grads) == set(model.params)
    hf = to_hf_state_dict(grads)
    assert hf["classifier.weight"].shape == (3, CFG.hidden_size)
    assert "bert.pooler.dense.weight" not in hf


def test_save_and_load_the_same_class(tmp_path):
    model = BertForSequenceClassification(CFG, num_labels=2, seed=4)
    model.config.id2label, model.config.label2id = {0: "negative", 1: "positive"}, {"negative": 0, "positive": 1}
    model.save_pretrained(tmp_path / "m", vocab=VOCAB)
    cfg = json.loads((tmp_path / "m" / "config.json").read_text())
    assert cfg["architectures"] == ["BertForSequenceClassification"]
    assert cfg["id2label"] == {"0": "negative", "1": "positive"} and cfg["problem_type"] == "single_label_classification"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = BertForSequenceClassification.from_pretrained(tmp_path / "m")
    assert again.config.id2label == {0: "negative", 1: "positive"}
    for name, p in model.params.items():
        np.testing.assert_array_equal(again.params[name], p)  # exact: written and read back, not computed
    with pytest.raises(ValueError, match="with 2 labels, not 5"):
        BertForSequenceClassification.from_pretrained(tmp_path / "m", num_labels=5)
    with pytest.raises(ValueError, match="fine-tuned BertForSequenceClassification; load it with"):
        BertForPreTraining.from_pretrained(tmp_path / "m")


def test_from_a_pretraining_checkpoint_says_what_is_new(tmp_path):
    pre = BertForPreTraining(CFG, seed=5)
    pre.save_pretrained(tmp_path / "pre", vocab=VOCAB)
    with pytest.warns(UserWarning, match=r"newly initialised \['classifier.bias', 'classifier.weight'\]"):
        model = BertForMultipleChoice.from_pretrained(tmp_path / "pre")
    np.testing.assert_array_equal(model.params["pool.w"], pre.params["pool.w"])  # exact: loaded
    with pytest.raises(ValueError, match="is a file; pass the checkpoint directory"):
        BertForTokenClassification.from_pretrained(tmp_path / "pre" / "config.json")


def test_task_config_round_trip():
    cfg = TaskConfig.from_bert(CFG, id2label={"0": "O", "1": "B-x"})
    assert cfg.num_labels == 2 and cfg.label2id == {"O": 0, "B-x": 1}
    assert TaskConfig.from_bert(CFG, **{k: v for k, v in cfg.to_dict().items()
                                        if k in ("id2label", "label2id")}).id2label == cfg.id2label
    with pytest.raises(ValueError, match="id2label keys must be 0..K-1"):
        TaskConfig.from_bert(CFG, id2label={"0": "a", "2": "b"})


def test_bad_batches_name_the_problem():
    model = BertForSequenceClassification(CFG, num_labels=2)
    batch = gradcheck.head_batch("sequence", CFG, np.random.default_rng(0), num_labels=2)
    with pytest.raises(ValueError, match="labels has shape"):
        model.loss_and_grads({**batch, "labels": np.zeros(7, int)})
    with pytest.raises(ValueError, match="target 5 is outside"):
        model.loss_and_grads({**batch, "labels": np.array([0, 1, 5])})
    with pytest.raises(ValueError, match="missing 'labels'"):
        model.loss_and_grads({k: v for k, v in batch.items() if k != "labels"})
    with pytest.raises(ValueError, match="token id 99 is outside the vocabulary"):
        model.forward(np.array([[2, 99]]))


def test_hidden_states_for_feature_based_use():
    model = BertForTokenClassification(CFG, num_labels=3)
    ids = np.array([[2, 7, 8, 3]])
    states = model.hidden_states(ids)
    assert len(states) == CFG.num_hidden_layers + 1 and states[-1].shape == (1, 4, CFG.hidden_size)
    last, _ = heads.encoder_forward(model.params, CFG, ids, np.zeros_like(ids), np.ones_like(ids), ops=model.ops)
    np.testing.assert_allclose(states[-1], last, rtol=0, atol=1e-6)


def _causal_inputs(rng):
    ids = rng.integers(5, CFG.vocab_size, (3, 9))
    mask = np.ones_like(ids)
    mask[1, 6:] = 0
    mask[2, 4:] = 0
    return ids, mask


def test_causal_token_output_at_t_ignores_the_tokens_after_t():
    """Left-to-right fine-tuning (the paper's LTR model): position t's logits depend on 0..t only."""
    rng = np.random.default_rng(0)
    model = BertForTokenClassification(CFG, 3, seed=1, dtype=np.float64).make_causal()
    ids, mask = _causal_inputs(rng)
    base = model.forward(ids, attention_mask=mask)
    for t in (0, 3, 5):
        changed = ids.copy()
        changed[:, t + 1:] = rng.integers(5, CFG.vocab_size, changed[:, t + 1:].shape)
        out = model.forward(changed, attention_mask=mask)
        np.testing.assert_allclose(out[:, :t + 1], base[:, :t + 1], rtol=1e-12, atol=1e-12)
        assert np.abs(out[0, t + 1:] - base[0, t + 1:]).max() > 1e-6  # the later positions do see it
    bidirectional = BertForTokenClassification(CFG, 3, seed=1, dtype=np.float64)
    changed = ids.copy()
    changed[:, -1] = (ids[:, -1] + 1 - 5) % (CFG.vocab_size - 5) + 5
    assert np.abs(bidirectional.forward(changed, attention_mask=mask)[0, 0]
                  - bidirectional.forward(ids, attention_mask=mask)[0, 0]).max() > 1e-6


def test_causal_sequence_head_reads_the_last_real_token():
    """[CLS] sees only itself under the causal mask; the pooled head reads each row's last real
    token: changing it moves that row's logits, changing padding after it moves nothing."""
    rng = np.random.default_rng(1)
    model = BertForSequenceClassification(CFG, 3, seed=2, dtype=np.float64).make_causal()
    ids, mask = _causal_inputs(rng)
    base = model.forward(ids, attention_mask=mask)
    last = mask.sum(axis=1) - 1  # 8, 5, 3
    for row in range(3):
        changed = ids.copy()
        changed[row, last[row]] = (ids[row, last[row]] + 1 - 5) % (CFG.vocab_size - 5) + 5
        delta = np.abs(model.forward(changed, attention_mask=mask) - base).max(axis=1)
        assert delta[row] > 1e-6 and np.delete(delta, row).max() < 1e-12
    padded = ids.copy()
    padded[2, 4:] = 7
    np.testing.assert_allclose(model.forward(padded, attention_mask=mask), base, rtol=1e-12, atol=1e-12)


def test_causal_is_saved_and_restored(tmp_path):
    model = BertForSequenceClassification(CFG, num_labels=2, seed=4).make_causal()
    model.save_pretrained(tmp_path / "m", vocab=VOCAB)
    assert json.loads((tmp_path / "m" / "config.json").read_text())["causal"] is True
    again = BertForSequenceClassification.from_pretrained(tmp_path / "m")
    assert again.config.causal and again.encoder is models.CAUSAL_ENCODER
    ids = np.random.default_rng(3).integers(5, CFG.vocab_size, (2, 6))
    np.testing.assert_allclose(again.forward(ids), model.forward(ids), rtol=1e-6)
    plain = BertForSequenceClassification(CFG, num_labels=2, seed=4)
    plain.save_pretrained(tmp_path / "p", vocab=VOCAB)
    assert "causal" not in json.loads((tmp_path / "p" / "config.json").read_text())  # transformers' keys only


def test_causal_is_for_berts_encoder_only():
    from minibert.family.albert import AlbertConfig
    from minibert.finetune.albert_tasks import AlbertForSequenceClassification

    albert = AlbertForSequenceClassification(AlbertConfig(vocab_size=40, embedding_size=4, hidden_size=8,
                                                          num_hidden_layers=2, num_attention_heads=2,
                                                          intermediate_size=16), 2)
    with pytest.raises(ValueError, match="causal .* is for BERT's encoder only"):
        albert.make_causal()


def test_a_wrong_causal_pool_position_fails_the_check(monkeypatch):
    """The causal classes' check can fail: send the pooled gradient to [CLS] instead of the last
    real token the forward read, and the causal sequence and choice checks fail, the rest pass."""
    monkeypatch.setenv("MINIBERT_BACKEND", "numpy")
    real = heads.head_backward
    monkeypatch.setattr("minibert.finetune.models.head_backward",
                        lambda params, cfg, cache, ops=None: real(params, cfg, cache._replace(pool_at=None), ops))
    checks = ft_checks.check_task_models(np.random.default_rng(1), verbose=False)
    assert any(not c for c in checks if c.name.startswith("SequenceClassification (sequence, causal)"))
    assert any(not c for c in checks if c.name.startswith("MultipleChoice (choice, causal)"))
    assert all(c for c in checks if ", causal)" not in c.name)


def test_causal_bilstm_sees_both_sides_again_and_round_trips(tmp_path):
    """The paper's "LTR + BiLSTM": on top of the left-to-right encoder a BiLSTM gives each
    position its right-hand context back (a later token moves an earlier position's logits), and
    a saved model loads with its BiLSTM (minibert's own bilstm.* tensors and config keys)."""
    rng = np.random.default_rng(4)
    model = BertForTokenClassification(CFG, 3, seed=1, dtype=np.float64).make_causal(bilstm=True)
    assert {k for k in model.params if k.startswith("lstm.")} == {
        f"lstm.{d}.{n}" for d in ("fwd", "bwd") for n in ("wx", "wh", "b")}
    ids, mask = _causal_inputs(rng)
    changed = ids.copy()
    changed[0, 5] = (ids[0, 5] + 1 - 5) % (CFG.vocab_size - 5) + 5
    assert np.abs(model.forward(changed, attention_mask=mask)[0, 2] - model.forward(ids, attention_mask=mask)[0, 2]
                  ).max() > 1e-8
    model.save_pretrained(tmp_path / "m", vocab=VOCAB)
    cfg = json.loads((tmp_path / "m" / "config.json").read_text())
    assert cfg["causal"] is True and cfg["bilstm"] is True
    again = BertForTokenClassification.from_pretrained(tmp_path / "m", dtype=np.float64)
    assert again.encoder is models.CAUSAL_BILSTM_ENCODER
    for k, v in model.params.items():
        np.testing.assert_array_equal(again.params[k], v)  # exact: written and read back
    np.testing.assert_allclose(again.forward(ids, attention_mask=mask), model.forward(ids, attention_mask=mask),
                               rtol=1e-12)
