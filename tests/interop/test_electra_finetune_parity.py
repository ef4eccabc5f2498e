"""ELECTRA's fine-tuning classes compute what transformers' classes of the same name compute: logits
in float32, loss and every gradient in float64 (dropout off), for random models of two shapes with
padding (E != C, exact GELU; E == C, hidden_act gelu_new, which the classification head ignores:
transformers' ElectraClassificationHead always uses the exact GELU); save_pretrained -> transformers
and back; a discriminator checkpoint loads into each class with the encoder unchanged, in minibert
and in transformers alike."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from minibert.family.electra import ElectraConfig, ElectraForPreTraining  # noqa: E402
from minibert.finetune import electra_tasks as ef  # noqa: E402

SHAPES = {
    "E8-C16-NH2-L2": dict(vocab_size=40, embedding_size=8, hidden_size=16, num_attention_heads=2, num_hidden_layers=2,
                          intermediate_size=32),
    "E12-C12-NH3-L1-gelu_new": dict(vocab_size=30, embedding_size=12, hidden_size=12, num_attention_heads=3,
                                    num_hidden_layers=1, intermediate_size=20, hidden_act="gelu_new"),
}
# label -> (minibert class, constructor kwargs)
KINDS = {"sequence": (ef.ElectraForSequenceClassification, dict(num_labels=3)),
         "regression": (ef.ElectraForSequenceClassification, dict(num_labels=1)),
         "token": (ef.ElectraForTokenClassification, dict(num_labels=4)),
         "choice": (ef.ElectraForMultipleChoice, {}),
         "qa": (ef.ElectraForQuestionAnswering, {})}


def config_for(shape):
    return ElectraConfig(max_position_embeddings=16, **SHAPES[shape])


def random_model(kind, config, dtype, seed, helpers):
    """A minibert model with random, non-trivial parameters (never unit LayerNorms or zero biases)."""
    return helpers.random_task_model(*KINDS[kind], config, dtype, seed)


def hf_twin(model, dtype, helpers):
    """transformers' class of the same name (eager attention, eval mode) holding the model's params."""
    return helpers.hf_task_twin(model, dtype, transformers.ElectraConfig,
                                ef.to_hf_state_dict(model.params, model.config, model.head_shape), "electra")


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("kind", list(KINDS))
def test_electra_task_logits_match_transformers_float32(kind, shape, backend, helpers, monkeypatch):
    monkeypatch.setenv("MINIBERT_BACKEND", backend)
    model = random_model(kind, config_for(shape), np.float32, 1, helpers)
    theirs = hf_twin(model, np.float32, helpers)
    ids, seg, mask = helpers.task_inputs(model, seed=2)
    ref = helpers.assert_same_task_logits(model, theirs, ids, seg, mask)  # float32 logits, 1e-5 apart
    assert np.abs(ref).max() > 0.05  # not trivially small


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("kind", list(KINDS))
def test_electra_task_loss_and_every_gradient_match_transformers_float64(kind, shape, backend, helpers, monkeypatch):
    monkeypatch.setenv("MINIBERT_BACKEND", backend)
    model = random_model(kind, config_for(shape), np.float64, 3, helpers)
    theirs = hf_twin(model, np.float64, helpers)
    ids, seg, mask = helpers.task_inputs(model, seed=4)
    labels = helpers.task_labels(model, mask, seed=5)
    # Besides the attention key biases (a shift shared by all of a query's scores), a softmax
    # ignores: multiple choice's classifier bias (shared by the choices of a question), and in QA
    # the qa_outputs bias and the last LayerNorm's bias (shared by every position of the window).
    last_ln = f"electra.encoder.layer.{model.config.num_hidden_layers - 1}.output.LayerNorm.bias"
    zero_by_softmax = {"choice": {"classifier.bias"}, "qa": {"qa_outputs.bias", last_ln}}.get(model.head_shape, set())
    bad = helpers.task_gradient_mismatches(
        model, theirs, ids, seg, mask, labels, lambda grads: ef.to_hf_state_dict(grads, model.config, model.head_shape),
        may_vanish=lambda key: key.endswith("attention.self.key.bias") or key in zero_by_softmax)
    assert not bad, f"gradients differ from transformers beyond 1e-8 relative: {bad}"


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("kind", list(KINDS))
def test_electra_task_save_pretrained_loads_in_transformers_and_back(kind, shape, tmp_path, helpers):
    model = random_model(kind, config_for(shape), np.float32, 6, helpers)
    helpers.name_task_labels(model)
    model.save_pretrained(tmp_path / "m", vocab=[f"t{i}" for i in range(model.config.vocab_size)])
    theirs = helpers.load_in_transformers(model, tmp_path / "m", kind)
    ids, seg, mask = helpers.task_inputs(model, seed=7)
    helpers.assert_same_task_logits(model, theirs, ids, seg, mask)
    helpers.load_back_from_transformers(model, theirs, tmp_path / "hf")  # and back, everything loaded


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("kind", ["sequence", "token", "choice", "qa"])
def test_a_discriminator_checkpoint_loads_with_the_encoder_unchanged(kind, shape, tmp_path, helpers):
    config = config_for(shape)
    disc = ElectraForPreTraining(config, seed=8)
    for p in disc.params.values():
        p += np.float32(0.05)  # distinguishable from any fresh init
    disc.save_pretrained(tmp_path / "disc", vocab=[f"t{i}" for i in range(config.vocab_size)])
    cls = KINDS[kind][0]
    with pytest.warns(UserWarning, match="newly initialised") as record:
        model = cls.from_pretrained(tmp_path / "disc")
    assert "not used: the disc head(s)" in str(record[0].message)
    for name, p in model.params.items():
        if name in disc.params:
            np.testing.assert_array_equal(p, disc.params[name], err_msg=name)  # exact: loaded, not computed
    assert model.vocab_path is not None
    # transformers reads the same discriminator directory into its class: the same encoder tensors
    hf = getattr(transformers, model.architecture).from_pretrained(tmp_path / "disc", attn_implementation="eager")
    ours = ef.to_hf_state_dict(model.params, model.config, model.head_shape)
    for key, value in hf.state_dict().items():
        if key.startswith("electra."):
            np.testing.assert_array_equal(value.numpy(), ours[key], err_msg=key)
    ids, seg, mask = helpers.task_inputs(model, seed=9)
    theirs = hf_twin(model, np.float32, helpers)  # the loaded model (with its new head) still matches transformers
    helpers.assert_same_task_logits(model, theirs, ids, seg, mask)
