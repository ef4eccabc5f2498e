"""ALBERT's fine-tuning classes: float64 gradient checks of each whole class on both backends
(sampled entries of every tensor, the shared block included), a check that catches a shared block
whose L gradients are not summed, checkpoints both ways, the dropout ALBERT's heads read, clear
errors, and `finetune --init <an ALBERT run>` picking the ALBERT class. Parity with transformers
is in tests/interop/test_albert_finetune_parity.py."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import minibert
from minibert.analysis import gradcheck
from minibert.bert import BertForPreTraining
from minibert.family import albert
from minibert.family.albert import AlbertConfig, AlbertForPreTraining
from minibert.finetune import gradchecks as ft_checks
from minibert.finetune.albert_tasks import (ALBERT_ENCODER, AlbertForMultipleChoice, AlbertForQuestionAnswering,
                                            AlbertForSequenceClassification, AlbertForTokenClassification,
                                            AlbertTaskConfig, to_hf_state_dict)
from minibert.finetune.models import BertForSequenceClassification
from minibert.model import BertConfig

# E != C and three applications of the shared block, so a missing sum or a wrong map shows
CFG = AlbertConfig(vocab_size=40, embedding_size=6, hidden_size=8, num_hidden_layers=3, num_attention_heads=2,
                   intermediate_size=16, max_position_embeddings=16, classifier_dropout_prob=0.1)
VOCAB = [f"t{i}" for i in range(CFG.vocab_size)]


def models(seed, dtype=np.float64):
    """label -> one model of each class (and the regression variant)."""
    return {"sequence": AlbertForSequenceClassification(CFG, 3, seed, dtype),
            "regression": AlbertForSequenceClassification(CFG, 1, seed, dtype),
            "token": AlbertForTokenClassification(CFG, 3, seed, dtype),
            "choice": AlbertForMultipleChoice(CFG, seed=seed, dtype=dtype),
            "qa": AlbertForQuestionAnswering(CFG, seed=seed, dtype=dtype)}


def gradient_checks(rng, samples_per_tensor=3, rtol=1e-5, atol=1e-8):
    """Each class, whole, in float64, dropout off: sampled entries of every parameter tensor against
    centered differences of the loss (finetune/gradchecks.check_task_model, as for BERT's classes)."""
    checks = []
    for label, model in models(int(rng.integers(1 << 30))).items():
        checks += ft_checks.check_task_model(label, model, CFG, rng, False, samples_per_tensor, rtol, atol)
    return checks


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_every_albert_class_gradcheck_float64(backend, monkeypatch):
    monkeypatch.setenv("MINIBERT_BACKEND", backend)
    checks = gradient_checks(np.random.default_rng(1))
    assert len(checks) == sum(len(m.params) for m in models(0).values())  # every tensor of every class
    assert sum(c.name.endswith("block.ffn.in.w") for c in checks) == 5  # the shared block, in each class
    assert all(checks), [c.row() for c in checks if not c]


def test_a_shared_block_gradient_not_summed_fails_the_check(monkeypatch):
    """Keep the mean of the L applications' gradients instead of their sum: the shared block's
    checks fail, the embedding's (below the block) still pass."""
    monkeypatch.setenv("MINIBERT_BACKEND", "numpy")
    L = CFG.num_hidden_layers

    def averaging_backward(dseq, cache, cfg, grads, ops):
        grads = albert.encoder_backward(dseq, cache, cfg, grads, ops)
        return {k: g / L if k.startswith(albert.BLOCK) else g for k, g in grads.items()}

    broken = ALBERT_ENCODER._replace(backward=averaging_backward)
    for cls in (AlbertForSequenceClassification, AlbertForTokenClassification, AlbertForMultipleChoice,
                AlbertForQuestionAnswering):
        monkeypatch.setattr(cls, "encoder", broken)
    checks = gradient_checks(np.random.default_rng(1))
    assert any(not c for c in checks if c.name == "sequence: block.attn.qkv.w")
    assert all(c for c in checks if c.name.endswith(("tok_emb", "emb_map.w", "cls.w", "qa.w")))


def test_package_root_exports_the_classes():
    assert minibert.AlbertForSequenceClassification is AlbertForSequenceClassification
    assert minibert.AlbertForTokenClassification is AlbertForTokenClassification
    assert minibert.AlbertForMultipleChoice is AlbertForMultipleChoice
    assert minibert.AlbertForQuestionAnswering is AlbertForQuestionAnswering


def test_params_are_albert_s_without_the_pretraining_heads():
    shapes = albert.param_shapes(CFG)
    encoder = {n for n in shapes if n.split(".")[0] not in ("pool", "mlm", "sop")}
    for label, model in models(0, np.float32).items():
        names = set(model.params)
        pooled = label in ("sequence", "regression", "choice")  # transformers: add_pooling_layer=False otherwise
        head = {"qa.w", "qa.b"} if label == "qa" else {"cls.w", "cls.b"}
        assert names == encoder | head | ({"pool.w", "pool.b"} if pooled else set()), label
        assert model.params["tok_emb"].shape == (CFG.vocab_size, CFG.embedding_size)  # factorised
        assert model.params["block.attn.qkv.w"].dtype == np.float32
    assert models(0)["sequence"].params["cls.w"].shape == (CFG.hidden_size, 3)
    assert models(0)["choice"].params["cls.w"].shape == (CFG.hidden_size, 1)


def test_forward_shapes():
    ids = np.array([[2, 7, 8, 3, 0], [2, 9, 3, 0, 0]])  # (B, T) with padding
    mask = (ids > 0).astype(np.int64)
    m = models(0, np.float32)
    assert m["sequence"].forward(ids, None, mask).shape == (2, 3)
    assert m["regression"].forward(ids, None, mask).shape == (2, 1)
    assert m["token"].forward(ids, None, mask).shape == (2, 5, 3)
    assert m["choice"].forward(np.stack([ids, ids[::-1]], 1), None, np.stack([mask, mask[::-1]], 1)).shape == (2, 2)
    start, end = m["qa"].forward(ids, None, mask)
    assert start.shape == end.shape == (2, 5)
    states = m["token"].hidden_states(ids, None, mask)
    assert len(states) == CFG.num_hidden_layers + 1 and states[-1].shape == (2, 5, CFG.hidden_size)
    seq, _ = albert.encoder_forward(m["token"].params, CFG, ids, np.zeros_like(ids), mask)  # (B, T, C)
    np.testing.assert_allclose(states[-1], seq, rtol=0, atol=1e-5)


def test_the_classifier_dropout_is_classifier_dropout_prob():
    """hidden and attention dropout 0: only ALBERT's classifier_dropout_prob can change the logits."""
    ids = np.array([[2, 7, 8, 9, 10, 3]])
    cfg = AlbertConfig(**{**CFG.to_dict(), "classifier_dropout_prob": 0.5})
    model = AlbertForSequenceClassification(cfg, 3, seed=0)
    eval_logits = model.forward(ids)
    train_logits = model.forward(ids, train=True, rng=np.random.default_rng(0))
    assert np.abs(train_logits - eval_logits).max() > 1e-6
    model.config.classifier_dropout_prob = 0.0
    np.testing.assert_allclose(model.forward(ids, train=True, rng=np.random.default_rng(0)), eval_logits,
                               rtol=0, atol=1e-7)


def test_save_and_load_the_same_class(tmp_path):
    model = AlbertForTokenClassification(CFG, 3, seed=2)
    model.config.id2label = {0: "O", 1: "B-X", 2: "I-X"}
    model.config.label2id = {v: k for k, v in model.config.id2label.items()}
    model.save_pretrained(tmp_path / "m", vocab=VOCAB)
    saved = json.loads((tmp_path / "m" / "config.json").read_text())
    assert saved["architectures"] == ["AlbertForTokenClassification"] and saved["model_type"] == "albert"
    assert saved["id2label"] == {"0": "O", "1": "B-X", "2": "I-X"} and saved["embedding_size"] == 6
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same class: nothing is new
        again = AlbertForTokenClassification.from_pretrained(tmp_path / "m")
    assert again.config.id2label == model.config.id2label and isinstance(again.config, AlbertTaskConfig)
    assert set(again.params) == set(model.params)
    for name, p in model.params.items():
        np.testing.assert_array_equal(again.params[name], p, err_msg=name)  # exact: copied, not computed
    with pytest.raises(ValueError, match="with 3 labels, not 5"):
        AlbertForTokenClassification.from_pretrained(tmp_path / "m", num_labels=5)


def test_from_a_pretraining_checkpoint_says_what_is_new(tmp_path):
    pre = AlbertForPreTraining(CFG, seed=3)
    for p in pre.params.values():
        p += np.float32(0.05)  # distinguishable from a fresh init
    pre.save_pretrained(tmp_path / "pre", vocab=VOCAB)
    with pytest.warns(UserWarning, match="newly initialised") as record:
        model = AlbertForSequenceClassification.from_pretrained(tmp_path / "pre", num_labels=2)
    message = str(record[0].message)
    assert "['classifier.bias', 'classifier.weight']" in message and "mlm" in message and "sop" in message
    for name, p in model.params.items():
        if not name.startswith("cls."):
            np.testing.assert_array_equal(p, pre.params[name], err_msg=name)  # the pooler included
    assert model.config.num_labels == 2 and model.vocab_path is not None
    with pytest.warns(UserWarning, match=r"newly initialised \['qa_outputs.bias', 'qa_outputs.weight'\]"):
        AlbertForQuestionAnswering.from_pretrained(tmp_path / "pre")


def test_grads_map_to_transformers_names():
    model = models(0)["sequence"]
    batch = gradcheck.head_batch("sequence", CFG, np.random.default_rng(0))
    _, grads = model.loss_and_grads(batch)
    hf = to_hf_state_dict(grads)
    assert "classifier.weight" in hf and hf["classifier.weight"].shape == (3, CFG.hidden_size)
    assert "albert.encoder.embedding_hidden_mapping_in.weight" in hf and "albert.pooler.weight" in hf
    assert not any(k.startswith(("predictions.", "sop_classifier.")) for k in hf)


def test_bad_configs_and_checkpoints_name_the_problem(tmp_path):
    bert = BertConfig(vocab_size=40, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16)
    with pytest.raises(TypeError, match="needs an AlbertConfig"):
        AlbertForSequenceClassification(bert)
    BertForPreTraining(bert).save_pretrained(tmp_path / "bert", vocab=VOCAB)
    with pytest.raises(ValueError, match="model_type 'bert' is not 'albert'"):
        AlbertForSequenceClassification.from_pretrained(tmp_path / "bert")
    AlbertForPreTraining(CFG).save_pretrained(tmp_path / "alb", vocab=VOCAB)
    with pytest.raises(ValueError, match="AlbertForPreTraining"):  # and the other way round
        BertForSequenceClassification.from_pretrained(tmp_path / "alb")
    with pytest.raises(ValueError, match="token id 40 is outside the vocabulary"):
        models(0)["sequence"].forward(np.array([[2, 40, 3]]))
    with pytest.raises(ValueError, match="batch is missing 'labels'"):
        models(0)["token"].loss_and_grads(dict(input_ids=np.array([[2, 5, 3]])))


def test_finetune_init_an_albert_run_picks_the_albert_class(tmp_path):
    from minibert.finetune.run import FinetuneConfig, load_model

    AlbertForPreTraining(CFG, seed=4).save_pretrained(tmp_path / "run", vocab=["[PAD]", "[UNK]", "[CLS]", "[SEP]",
                                                                               "[MASK]"] + VOCAB[5:])
    for kind, cls in (("classification", AlbertForSequenceClassification), ("token", AlbertForTokenClassification),
                      ("choice", AlbertForMultipleChoice), ("qa", AlbertForQuestionAnswering)):
        cfg = FinetuneConfig(task="nextsent", init=str(tmp_path / "run"), out=str(tmp_path / "out"), dropout=0.2)
        model, tokenizer = load_model(cfg, kind, 2 if kind in ("classification", "token") else None, None)
        assert type(model) is cls and len(tokenizer) == CFG.vocab_size
        assert model.config.classifier_dropout_prob == pytest.approx(0.2)  # --dropout reaches ALBERT's heads


def test_predict_runs_a_fine_tuned_albert(tmp_path, capsys):
    from minibert.finetune.commands import predict_cli

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "list", "is", "sorted"] + VOCAB[9:]
    model = AlbertForSequenceClassification(CFG, 2, seed=5)
    model.config.id2label, model.config.label2id = {0: "neg", 1: "pos"}, {"neg": 0, "pos": 1}
    model.save_pretrained(tmp_path / "sst", vocab=vocab)
    assert predict_cli([str(tmp_path / "sst"), "the list is sorted"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.split()[0] in ("neg", "pos") and "neg 0." in line and "pos 0." in line
