"""ALBERT's fine-tuning classes compute what transformers' classes of the same name compute: logits
in float32, loss and every gradient in float64 (dropout off), for random models of two shapes
(E < C with three applications of the shared block; E > C with the erf GELU and three segment
types) with padding; save_pretrained -> transformers gives the same logits and transformers'
save_pretrained -> minibert loads everything; a pretraining checkpoint (minibert's or
transformers') loads into each class with the encoder unchanged."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from minibert.family.albert import AlbertConfig, AlbertForPreTraining  # noqa: E402
from minibert.finetune.albert_tasks import (AlbertForMultipleChoice, AlbertForQuestionAnswering,
                                            AlbertForSequenceClassification, AlbertForTokenClassification,
                                            to_hf_state_dict)

SHAPES = {
    "E8-C16-NH2-L3": dict(vocab_size=40, embedding_size=8, hidden_size=16, num_attention_heads=2,
                          num_hidden_layers=3, intermediate_size=32),
    "E24-C12-NH3-L2-gelu-TV3": dict(vocab_size=30, embedding_size=24, hidden_size=12, num_attention_heads=3,
                                    num_hidden_layers=2, intermediate_size=20, hidden_act="gelu", type_vocab_size=3),
}
# label -> (minibert class, constructor kwargs)
KINDS = {"sequence": (AlbertForSequenceClassification, dict(num_labels=3)),
         "regression": (AlbertForSequenceClassification, dict(num_labels=1)),
         "token": (AlbertForTokenClassification, dict(num_labels=4)),
         "choice": (AlbertForMultipleChoice, {}),
         "qa": (AlbertForQuestionAnswering, {})}
VOCAB = [f"t{i}" for i in range(40)]


def config_for(shape):
    return AlbertConfig(max_position_embeddings=16, **SHAPES[shape])


def random_model(kind, config, dtype, seed, helpers):
    """A minibert model with random, non-trivial parameters (never unit LayerNorms or zero biases);
    the head's N(0, 1), so that the logits are of order 1 and the 1e-5 comparison means something."""
    return helpers.random_task_model(*KINDS[kind], config, dtype, seed, head_scale=1.0)


def hf_twin(model, dtype, helpers):
    """transformers' class of the same name (eager attention, eval mode) holding the model's params."""
    return helpers.hf_task_twin(model, dtype, transformers.AlbertConfig, to_hf_state_dict(model.params), "albert")


def inputs(model, helpers, seed):
    """input_ids, token_type_ids, attention_mask: (B, T), or (B, NC, T) for multiple choice; the
    second segment is the last segment type."""
    return helpers.task_inputs(model, seed, second_segment=model.config.type_vocab_size - 1)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("kind", list(KINDS))
def test_albert_logits_match_transformers_float32(kind, shape, backend, helpers, monkeypatch):
    monkeypatch.setattr("minibert.backend.chosen", backend)
    model = random_model(kind, config_for(shape), np.float32, 1, helpers)
    theirs = hf_twin(model, np.float32, helpers)
    ids, seg, mask = inputs(model, helpers, seed=2)
    ref = helpers.assert_same_task_logits(model, theirs, ids, seg, mask)  # float32 logits, 1e-5 apart
    assert np.abs(ref).max() > 1e3 * 1e-5  # not trivially small: a thousand times the tolerance


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("kind", list(KINDS))
def test_albert_loss_and_every_gradient_match_transformers_float64(kind, shape, backend, helpers, monkeypatch):
    monkeypatch.setattr("minibert.backend.chosen", backend)
    model = random_model(kind, config_for(shape), np.float64, 3, helpers)
    theirs = hf_twin(model, np.float64, helpers)
    ids, seg, mask = inputs(model, helpers, seed=4)
    labels = helpers.task_labels(model, mask, seed=5)
    # every tensor, the shared block's once; the only analytically zero gradient is the key bias's
    bad = helpers.task_gradient_mismatches(model, theirs, ids, seg, mask, labels, to_hf_state_dict)
    assert not bad, f"gradients differ from transformers beyond 1e-8 relative: {bad}"


@pytest.mark.parametrize("kind", list(KINDS))
def test_albert_save_pretrained_loads_in_transformers_and_back(kind, tmp_path, helpers):
    model = random_model(kind, config_for("E8-C16-NH2-L3"), np.float32, 6, helpers)
    helpers.name_task_labels(model)
    model.save_pretrained(tmp_path / "m", vocab=VOCAB)
    theirs = helpers.load_in_transformers(model, tmp_path / "m", kind)
    assert theirs.config.model_type == "albert" and theirs.config.embedding_size == 8
    ids, seg, mask = inputs(model, helpers, seed=7)
    helpers.assert_same_task_logits(model, theirs, ids, seg, mask)
    helpers.load_back_from_transformers(model, theirs, tmp_path / "hf")  # and back, everything loaded


@pytest.mark.parametrize("source", ["minibert", "transformers"])
@pytest.mark.parametrize("kind", ["sequence", "token", "choice", "qa"])
def test_an_albert_pretraining_checkpoint_loads_with_the_encoder_unchanged(kind, source, tmp_path, helpers):
    config = config_for("E8-C16-NH2-L3")
    pre = AlbertForPreTraining(config, seed=8)
    for p in pre.params.values():
        p += np.float32(0.05)  # distinguishable from any fresh init
    pre.save_pretrained(tmp_path / "pre", vocab=VOCAB)
    if source == "transformers":  # the same weights, written by transformers' AlbertForPreTraining
        hf = transformers.AlbertForPreTraining.from_pretrained(tmp_path / "pre")
        hf.save_pretrained(tmp_path / "pre", safe_serialization=True)
    cls = KINDS[kind][0]
    with pytest.warns(UserWarning, match="newly initialised") as record:
        model = cls.from_pretrained(tmp_path / "pre")
    message = str(record[0].message)
    assert ("classifier.weight" if kind != "qa" else "qa_outputs.weight") in message
    assert "not used" in message and "mlm" in message and "sop" in message
    for name, p in model.params.items():
        if name.split(".")[0] in ("cls", "qa"):
            continue
        np.testing.assert_array_equal(p, pre.params[name], err_msg=name)  # exact: loaded, not computed
    assert model.vocab_path is not None
    ids, seg, mask = inputs(model, helpers, seed=9)
    theirs = hf_twin(model, np.float32, helpers)  # the loaded model still matches transformers
    helpers.assert_same_task_logits(model, theirs, ids, seg, mask)
