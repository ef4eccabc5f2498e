"""The fine-tuning classes compute what transformers' classes of the same name compute: logits in
float32, loss and every gradient in float64 (dropout off), for random models of two shapes with
padding; save_pretrained -> transformers gives the same logits; transformers' save_pretrained ->
minibert loads; a pretraining checkpoint loads into each class with the encoder unchanged."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from minibert.bert import BertForPreTraining  # noqa: E402
from minibert.finetune.models import (BertForMultipleChoice, BertForQuestionAnswering,  # noqa: E402
                                      BertForSequenceClassification, BertForTokenClassification)
from minibert.checkpoint import to_hf_state_dict  # noqa: E402
from minibert.model import BertConfig  # noqa: E402

SHAPES = {
    "C16-NH2-L2": dict(vocab_size=40, hidden_size=16, num_attention_heads=2, num_hidden_layers=2, intermediate_size=32),
    "C24-NH3-L1-gelu_new": dict(vocab_size=30, hidden_size=24, num_attention_heads=3, num_hidden_layers=1,
                                intermediate_size=40, hidden_act="gelu_new"),
}
# label -> (minibert class, constructor kwargs)
KINDS = {"sequence": (BertForSequenceClassification, dict(num_labels=3)),
         "regression": (BertForSequenceClassification, dict(num_labels=1)),
         "token": (BertForTokenClassification, dict(num_labels=4)),
         "choice": (BertForMultipleChoice, {}),
         "qa": (BertForQuestionAnswering, {})}


def config_for(shape):
    return BertConfig(max_position_embeddings=16, **SHAPES[shape])


def random_model(kind, config, dtype, seed, helpers):
    """A minibert model with random, non-trivial parameters (never unit LayerNorms or zero biases)."""
    return helpers.random_task_model(*KINDS[kind], config, dtype, seed)


def hf_twin(model, dtype, helpers):
    """transformers' class of the same name (eager attention, eval mode) holding the model's params."""
    return helpers.hf_task_twin(model, dtype, transformers.BertConfig, to_hf_state_dict(model.params), "bert")


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("kind", list(KINDS))
def test_logits_match_transformers_float32(kind, shape, backend, helpers, monkeypatch):
    monkeypatch.setattr("minibert.backend.chosen", backend)
    model = random_model(kind, config_for(shape), np.float32, 1, helpers)
    theirs = hf_twin(model, np.float32, helpers)
    ids, seg, mask = helpers.task_inputs(model, seed=2)
    ref = helpers.assert_same_task_logits(model, theirs, ids, seg, mask)  # float32 logits, 1e-5 apart
    assert np.abs(ref).max() > 0.05  # not trivially small


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("kind", list(KINDS))
def test_loss_and_every_gradient_match_transformers_float64(kind, shape, backend, helpers, monkeypatch):
    monkeypatch.setattr("minibert.backend.chosen", backend)
    model = random_model(kind, config_for(shape), np.float64, 3, helpers)
    theirs = hf_twin(model, np.float64, helpers)
    ids, seg, mask = helpers.task_inputs(model, seed=4)
    labels = helpers.task_labels(model, mask, seed=5)
    # the only analytically zero gradient is the key bias's (round-off on both sides)
    bad = helpers.task_gradient_mismatches(model, theirs, ids, seg, mask, labels, to_hf_state_dict)
    assert not bad, f"gradients differ from transformers beyond 1e-8 relative: {bad}"


@pytest.mark.parametrize("kind", list(KINDS))
def test_save_pretrained_loads_in_transformers_and_back(kind, tmp_path, helpers):
    model = random_model(kind, config_for("C16-NH2-L2"), np.float32, 6, helpers)
    helpers.name_task_labels(model)
    model.save_pretrained(tmp_path / "m", vocab=[f"t{i}" for i in range(model.config.vocab_size)])
    theirs = helpers.load_in_transformers(model, tmp_path / "m", kind)
    ids, seg, mask = helpers.task_inputs(model, seed=7)
    helpers.assert_same_task_logits(model, theirs, ids, seg, mask)
    helpers.load_back_from_transformers(model, theirs, tmp_path / "hf")  # and back, everything loaded


@pytest.mark.parametrize("kind", ["sequence", "token", "choice", "qa"])
def test_a_pretraining_checkpoint_loads_with_the_encoder_unchanged(kind, tmp_path, helpers):
    config = config_for("C16-NH2-L2")
    pre = BertForPreTraining(config, seed=8)
    for p in pre.params.values():
        p += np.float32(0.05)  # distinguishable from any fresh init
    pre.save_pretrained(tmp_path / "pre", vocab=[f"t{i}" for i in range(config.vocab_size)])
    cls = KINDS[kind][0]
    with pytest.warns(UserWarning, match="newly initialised") as record:
        model = cls.from_pretrained(tmp_path / "pre")
    message = str(record[0].message)
    assert ("classifier.weight" if kind != "qa" else "qa_outputs.weight") in message
    assert "not used" in message and "mlm" in message
    for name, p in model.params.items():
        if name.split(".")[0] in ("cls", "qa"):
            continue
        np.testing.assert_array_equal(p, pre.params[name], err_msg=name)  # exact: loaded, not computed
    assert model.vocab_path is not None
    ids, seg, mask = helpers.task_inputs(model, seed=9)
    theirs = hf_twin(model, np.float32, helpers)  # the loaded model still matches transformers
    helpers.assert_same_task_logits(model, theirs, ids, seg, mask)
