"""ELECTRA's fine-tuning classes (minibert/finetune/electra_tasks.py): float64 gradient checks of the
head's dense -> GELU layer (model.dense_act_forward, the pooler's layer) and of each whole class on both backends, the
head layouts, checkpoints (what transformers reads is in tests/interop/test_electra_finetune_parity.py),
`finetune --init` picking the ELECTRA class, clear errors."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import minibert
from minibert import layers
from minibert.family.electra import ElectraConfig, ElectraForPreTraining
from minibert.finetune import electra_tasks as ef
from minibert.finetune import gradchecks as ft_checks
from minibert.finetune import heads
from minibert.finetune.electra_tasks import (ElectraForMultipleChoice, ElectraForQuestionAnswering,
                                             ElectraForSequenceClassification, ElectraForTokenClassification)

CFG = ElectraConfig(vocab_size=40, embedding_size=6, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=16, max_position_embeddings=16)
VOCAB = [f"t{i}" for i in range(CFG.vocab_size)]


def all_classes(cfg=CFG, dtype=np.float32):
    return [ElectraForSequenceClassification(cfg, 3, dtype=dtype), ElectraForSequenceClassification(cfg, 1, dtype=dtype),
            ElectraForTokenClassification(cfg, 3, dtype=dtype), ElectraForMultipleChoice(cfg, dtype=dtype),
            ElectraForQuestionAnswering(cfg, dtype=dtype)]


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_electra_heads_and_every_class_gradcheck_float64(backend, monkeypatch):
    monkeypatch.setattr("minibert.backend.chosen", backend)
    checks = ft_checks.check_electra_finetune(np.random.default_rng(2), verbose=False)
    layer = [c for c in checks if c.name.startswith("electra dense -> gelu")]
    assert len(layer) == 6  # dx, dw, db; exact GELU with dropout, tanh GELU without
    n_tensors = sum(len(m.params) for m in all_classes())
    assert len(checks) == 6 + n_tensors  # every tensor of every class sampled
    assert all(checks), [c.row() for c in checks if not c]


def test_a_wrong_head_backward_fails_the_check(monkeypatch):
    """Drop the GELU derivative of the classification head: the sequence classes fail, the token
    classifier (which has no such layer) still passes."""
    monkeypatch.setattr("minibert.backend.chosen", "numpy")
    def no_gelu(dout, cache, ops=None):  # treat GELU as the identity in backward
        dx, dw, db = layers.linear_backward(dout, cache.linear)
        return layers.dropout_backward(dx, cache.drop), dw, db

    monkeypatch.setattr(heads, "dense_act_backward", no_gelu)
    checks = ft_checks.check_electra_finetune(np.random.default_rng(2), verbose=False)
    assert any(not c for c in checks if c.name.startswith("ElectraForSequenceClassification (sequence)"))
    assert any(not c for c in checks if c.name.startswith("ElectraForMultipleChoice"))
    assert all(c for c in checks if c.name.startswith("ElectraForTokenClassification"))


def test_package_root_exports_the_classes():
    assert minibert.ElectraForSequenceClassification is ElectraForSequenceClassification
    assert minibert.ElectraForTokenClassification is ElectraForTokenClassification
    assert minibert.ElectraForMultipleChoice is ElectraForMultipleChoice
    assert minibert.ElectraForQuestionAnswering is ElectraForQuestionAnswering


def test_the_classes_are_the_shared_task_model_on_electras_encoder():
    """One mechanism for every encoder: finetune/models.py's TaskModel with ELECTRA_ENCODER, whose
    sequence and choice heads are data for the shared heads (a dense -> GELU on the first token)."""
    from minibert.finetune.models import TaskModel

    for model in all_classes():
        assert isinstance(model, TaskModel) and model.encoder is ef.ELECTRA_ENCODER
    assert ef.ELECTRA_ENCODER.heads["sequence"].pool.dense == "cls.dense"
    assert ef.ELECTRA_ENCODER.heads["choice"].pool.dense == "summary"


def test_head_layouts_are_transformers():
    """No pooler anywhere; the sequence head is dense -> out_proj, the choice head summary -> classifier."""
    seq, reg, tok, choice, qa = all_classes()
    heads = lambda m: {k: v.shape for k, v in m.params.items() if not k.startswith(("h", "tok_", "pos_", "seg_",  # noqa: E731
                                                                                     "emb_"))}
    assert heads(seq) == {"cls.dense.w": (8, 8), "cls.dense.b": (8,), "cls.out.w": (8, 3), "cls.out.b": (3,)}
    assert heads(reg)["cls.out.w"] == (8, 1)
    assert heads(tok) == {"cls.w": (8, 3), "cls.b": (3,)}
    assert heads(choice) == {"summary.w": (8, 8), "summary.b": (8,), "cls.w": (8, 1), "cls.b": (1,)}
    assert heads(qa) == {"qa.w": (8, 2), "qa.b": (2,)}
    assert sorted(ef.to_hf_state_dict(seq.params, seq.config, "sequence"))[:4] == [
        "classifier.dense.bias", "classifier.dense.weight", "classifier.out_proj.bias", "classifier.out_proj.weight"]
    assert "sequence_summary.summary.weight" in ef.to_hf_state_dict(choice.params, choice.config, "choice")
    assert "emb_map.w" in seq.params  # E 6 != C 8: the projection is part of the encoder


def test_forward_shapes_and_padding_does_not_change_the_sequence_logits():
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 40, (2, 7))
    mask = np.ones_like(ids)
    mask[1, 4:] = 0
    seq, _, tok, choice, qa = all_classes()
    assert seq(ids, None, mask).shape == (2, 3)
    assert tok(ids, None, mask).shape == (2, 7, 3)
    assert choice(np.stack([ids, ids[::-1]], 1), None, np.stack([mask, mask[::-1]], 1)).shape == (2, 2)
    start, end = qa(ids, None, mask)
    assert start.shape == end.shape == (2, 7)
    # the padded row equals the same row cut to its real tokens; eval_logits (unpadded encoder) agrees
    np.testing.assert_allclose(seq(ids, None, mask)[1], seq(ids[1:, :4])[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(seq.eval_logits(ids, None, mask), seq(ids, None, mask), rtol=1e-5, atol=1e-6)


def test_dropout_runs_only_when_training():
    model = ElectraForSequenceClassification(CFG, 3)
    ids = np.random.default_rng(1).integers(5, 40, (4, 6))
    a, b = model(ids), model(ids)
    np.testing.assert_array_equal(a, b)  # exact: the same computation twice
    c = model(ids, train=True, rng=np.random.default_rng(0))
    assert np.abs(c - a).max() > 1e-6
    with pytest.raises(ValueError, match="train=True needs rng"):
        model(ids, train=True)


def test_config_keys_defaults_and_errors():
    seq = ElectraForSequenceClassification(CFG, 2)
    d = seq.config.to_dict()
    assert d["id2label"] == {"0": "LABEL_0", "1": "LABEL_1"} and d["problem_type"] == "single_label_classification"
    assert (d["summary_type"], d["summary_use_proj"], d["summary_activation"]) == ("first", True, "gelu")
    assert d["classifier_dropout"] is None and "num_labels" not in d
    assert ElectraForSequenceClassification(CFG, 1).config.problem_type == "regression"
    with pytest.raises(ValueError, match="summary_type"):
        ef.ElectraTaskConfig.from_electra(CFG, summary_type="mean")
    with pytest.raises(ValueError, match="summary_activation"):
        ef.ElectraTaskConfig.from_electra(CFG, summary_activation="relu")
    with pytest.raises(ValueError, match="num_labels"):
        ElectraForTokenClassification(CFG, 0)
    with pytest.raises(ValueError, match="classifier_dropout"):
        ef.ElectraTaskConfig.from_electra(CFG, classifier_dropout=1.5)


def test_classifier_dropout_overrides_hidden_dropout():
    cfg = ef.ElectraTaskConfig.from_electra(CFG, num_labels=2)
    assert cfg.head_dropout == CFG.hidden_dropout_prob
    cfg.classifier_dropout = 0.25
    assert cfg.head_dropout == 0.25  # exact: the value assigned


def test_save_and_load_the_same_class(tmp_path):
    for model in all_classes():
        rng = np.random.default_rng(3)
        for p in model.params.values():
            p += rng.standard_normal(p.shape).astype(np.float32)
        if model.head_shape == "token":
            model.config.id2label = {0: "O", 1: "B-X", 2: "I-X"}
            model.config.label2id = {"O": 0, "B-X": 1, "I-X": 2}
        out = tmp_path / model.architecture / str(model.config.num_labels)
        model.save_pretrained(out, vocab=VOCAB)
        saved = json.loads((out / "config.json").read_text())
        assert saved["architectures"] == [model.architecture] and saved["model_type"] == "electra"
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the same class: nothing new, no warning
            again = type(model).from_pretrained(out)
        assert again.config == model.config
        for name, p in model.params.items():
            np.testing.assert_array_equal(again.params[name], p, err_msg=name)  # exact: float32 copied
        assert again.vocab_path is not None


def test_a_discriminator_checkpoint_loads_with_the_encoder_unchanged_and_says_what_is_new(tmp_path):
    disc = ElectraForPreTraining(CFG, seed=4)
    for p in disc.params.values():
        p += np.float32(0.05)  # distinguishable from any fresh init
    disc.save_pretrained(tmp_path / "disc", vocab=VOCAB)
    for cls, new in ((ElectraForSequenceClassification, "classifier.out_proj.weight"),
                     (ElectraForTokenClassification, "classifier.weight"),
                     (ElectraForMultipleChoice, "sequence_summary.summary.weight"),
                     (ElectraForQuestionAnswering, "qa_outputs.weight")):
        with pytest.warns(UserWarning, match="newly initialised") as record:
            model = cls.from_pretrained(tmp_path / "disc")
        message = str(record[0].message)
        assert new in message and "not used: the disc head(s)" in message
        for name, p in model.params.items():
            if name in disc.params:
                np.testing.assert_array_equal(p, disc.params[name], err_msg=name)  # exact: loaded
        assert not any(k.startswith("disc.") for k in model.params)


def test_num_labels_from_the_discriminator_and_mismatch_errors(tmp_path):
    ElectraForPreTraining(CFG).save_pretrained(tmp_path / "disc", vocab=VOCAB)
    with pytest.warns(UserWarning):
        model = ElectraForSequenceClassification.from_pretrained(tmp_path / "disc", num_labels=5)
    assert model.config.num_labels == 5 and model.params["cls.out.w"].shape == (8, 5)
    model.save_pretrained(tmp_path / "five")
    with pytest.raises(ValueError, match="with 5 labels, not 3"):
        ElectraForSequenceClassification.from_pretrained(tmp_path / "five", num_labels=3)


def test_bad_checkpoints_and_batches_name_the_problem(tmp_path):
    from minibert.bert import BertForPreTraining
    from minibert.model import BertConfig

    BertForPreTraining(BertConfig(vocab_size=40, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=16)).save_pretrained(tmp_path / "bert")
    with pytest.raises(ValueError, match="model_type 'bert' is not 'electra'"):
        ElectraForSequenceClassification.from_pretrained(tmp_path / "bert")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        ElectraForTokenClassification.from_pretrained(tmp_path / "nothing")
    ElectraForPreTraining(CFG).save_pretrained(tmp_path / "disc")
    cfg = json.loads((tmp_path / "disc" / "config.json").read_text())
    cfg["hidden_size"] = 12
    (tmp_path / "disc" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="model.safetensors"):
        ElectraForQuestionAnswering.from_pretrained(tmp_path / "disc")
    model = ElectraForSequenceClassification(CFG, 3)
    ids = np.ones((2, 5), np.int64)
    with pytest.raises(ValueError, match="missing 'labels'"):
        model.loss_and_grads({"input_ids": ids})
    with pytest.raises(ValueError, match="labels has shape"):
        model.loss_and_grads({"input_ids": ids, "labels": np.zeros(3, np.int64)})
    with pytest.raises(ValueError, match="multiple choice input_ids"):
        ElectraForMultipleChoice(CFG)(ids)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        model(ids * 99)


def test_finetune_init_picks_the_electra_class(tmp_path):
    """`python -m minibert finetune TASK --init DIR` on an ELECTRA discriminator: load_model reads
    model_type from config.json and builds transformers' Electra* class of the task."""
    from minibert.finetune.run import FinetuneConfig, load_model

    ElectraForPreTraining(CFG).save_pretrained(tmp_path / "disc", vocab=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                                               + VOCAB[5:])
    for kind, cls in (("classification", ElectraForSequenceClassification), ("token", ElectraForTokenClassification),
                      ("choice", ElectraForMultipleChoice), ("qa", ElectraForQuestionAnswering)):
        cfg = FinetuneConfig(task="x", init=str(tmp_path / "disc"), out=str(tmp_path / "out"), hidden_dropout_prob=0.2, attention_probs_dropout_prob=0.2)
        model, tokenizer = load_model(cfg, kind, 3 if kind in ("classification", "token") else None, None)
        assert type(model) is cls and len(tokenizer) == CFG.vocab_size
        assert model.config.hidden_dropout_prob == 0.2  # exact: the value load_model assigned


def test_predict_runs_a_fine_tuned_electra(tmp_path, capsys):
    from minibert.finetune.commands import predict_cli

    model = ElectraForSequenceClassification(CFG, 2)
    model.config.id2label, model.config.label2id = {0: "neg", 1: "pos"}, {"neg": 0, "pos": 1}
    model.save_pretrained(tmp_path / "sst", vocab=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + VOCAB[5:])
    assert predict_cli([str(tmp_path / "sst"), "t7 t8 t9"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(("neg  (neg ", "pos  (neg ")), out


def test_hidden_states_for_feature_based_use():
    model = ElectraForTokenClassification(CFG, 3)
    ids = np.random.default_rng(5).integers(5, 40, (2, 6))
    mask = np.ones_like(ids)
    mask[1, 4:] = 0
    states = model.hidden_states(ids, None, mask)
    assert len(states) == CFG.num_hidden_layers + 1 and all(s.shape == (2, 6, 8) for s in states)
    seq, _ = ef.electra.encoder_forward(model.params, model.config, ids, np.zeros_like(ids), mask)
    np.testing.assert_allclose(states[-1], seq, rtol=1e-5, atol=1e-6)
