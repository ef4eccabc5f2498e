"""The fine-tuning classes compute what transformers' classes of the same name compute: logits in
float32, loss and every gradient in float64 (dropout off), for random models of two shapes with
padding; save_pretrained -> transformers gives the same logits; transformers' save_pretrained ->
minibert loads; a pretraining checkpoint loads into each class with the encoder unchanged."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from minibert.bert import BertForPreTraining  # noqa: E402
from minibert.checkpoint import to_hf_state_dict  # noqa: E402
from minibert.finetune.models import (BertForMultipleChoice, BertForQuestionAnswering,  # noqa: E402
                                      BertForSequenceClassification, BertForTokenClassification)
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
TORCH_DTYPE = {np.float32: torch.float32, np.float64: torch.float64}


def config_for(shape):
    return BertConfig(max_position_embeddings=16, **SHAPES[shape])


def random_model(kind, config, dtype, seed):
    """A minibert model with random, non-trivial parameters (never unit LayerNorms or zero biases)."""
    cls, kw = KINDS[kind]
    model = cls(config, **kw, seed=seed, dtype=dtype)
    rng = np.random.default_rng(seed)
    for name, p in model.params.items():
        base = 1.0 if name.endswith(".w") and "ln" in name.split(".")[-2] else 0.0
        p[...] = base + 0.1 * rng.standard_normal(p.shape)
    return model


def hf_twin(model, dtype):
    """transformers' class of the same name (eager attention, eval mode) holding the model's params."""
    hcfg = transformers.BertConfig(**model.config.to_dict(), attn_implementation="eager")
    theirs = getattr(transformers, model.architecture)(hcfg).to(TORCH_DTYPE[dtype])
    state = {k: torch.from_numpy(v.copy()) for k, v in to_hf_state_dict(model.params).items()}
    result = theirs.load_state_dict(state, strict=True)
    assert not result.unexpected_keys and not result.missing_keys
    theirs.bert.embeddings.word_embeddings.padding_idx = None  # minibert, like Google BERT, trains row 0
    return theirs.eval()


def inputs(model, helpers, seed):
    """input_ids, token_type_ids, attention_mask: (B, T), or (B, NC, T) for multiple choice."""
    ids, seg, mask = helpers.make_inputs(model.config, seed=seed)
    if model.task == "choice":  # 3 questions x 3 choices: roll the rows so every choice differs
        ids, seg, mask = (np.stack([np.roll(a, i, axis=0) for i in range(3)], axis=1) for a in (ids, seg, mask))
    return ids, seg, mask


def labels_for(model, mask, seed):
    rng = np.random.default_rng(seed)
    B, T = mask.shape[0], mask.shape[-1]
    if model.task == "sequence":
        K = model.config.num_labels
        return {"labels": rng.standard_normal(B) if K == 1 else rng.integers(0, K, B)}
    if model.task == "token":
        labels = rng.integers(0, model.config.num_labels, (B, T))
        labels[mask == 0] = -100
        labels[:, 0] = -100
        return {"labels": labels}
    if model.task == "choice":
        return {"labels": rng.integers(0, mask.shape[1], B)}
    return {"start_positions": np.array([1, 2, T + 3]), "end_positions": np.array([3, 2, 1])}  # one out of window


def their_logits(out, task):
    if task == "qa":
        return np.stack([out.start_logits.detach().numpy(), out.end_logits.detach().numpy()], axis=-1)
    return out.logits.detach().numpy()


def our_logits(model, ids, seg, mask):
    out = model.forward(ids, seg, mask)
    return np.stack(out, axis=-1) if model.task == "qa" else out


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("kind", list(KINDS))
def test_logits_match_transformers_float32(kind, shape, backend, helpers, monkeypatch):
    monkeypatch.setenv("MINIBERT_BACKEND", backend)
    model = random_model(kind, config_for(shape), np.float32, seed=1)
    theirs = hf_twin(model, np.float32)
    ids, seg, mask = inputs(model, helpers, seed=2)
    with torch.no_grad():
        ref = their_logits(theirs(input_ids=torch.from_numpy(ids), token_type_ids=torch.from_numpy(seg),
                                  attention_mask=torch.from_numpy(mask)), model.task)
    ours = our_logits(model, ids, seg, mask)
    assert ours.shape == ref.shape and ours.dtype == np.float32
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-5)
    assert np.abs(ref).max() > 0.05  # not trivially small


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("kind", list(KINDS))
def test_loss_and_every_gradient_match_transformers_float64(kind, shape, backend, helpers, monkeypatch):
    monkeypatch.setenv("MINIBERT_BACKEND", backend)
    model = random_model(kind, config_for(shape), np.float64, seed=3)
    theirs = hf_twin(model, np.float64)
    ids, seg, mask = inputs(model, helpers, seed=4)
    labels = labels_for(model, mask, seed=5)
    loss, grads = model.loss_and_grads(dict(input_ids=ids, input_mask=mask, segment_ids=seg, **labels))
    t = {k: torch.from_numpy(np.asarray(v)) for k, v in
         dict(input_ids=ids, token_type_ids=seg, attention_mask=mask, **labels).items()}
    theirs.zero_grad()
    ref = theirs(**t)
    ref.loss.backward()
    assert abs(loss - ref.loss.item()) <= 1e-9 * abs(ref.loss.item())
    named = dict(theirs.named_parameters())
    hf_grads = to_hf_state_dict(grads)
    assert set(hf_grads) == set(named)
    scale = max(np.abs(p.grad.numpy()).max() for p in named.values())
    bad = {}
    for key, g in hf_grads.items():
        ref_g = named[key].grad.numpy()
        assert g.shape == ref_g.shape, key
        if np.abs(ref_g).max() <= 1e-12 * scale:  # analytically zero (the key bias), round-off both sides
            assert np.abs(g).max() <= 1e-12 * scale, key
            continue
        rel = float(np.max(np.abs(g - ref_g)) / np.abs(ref_g).max())
        if rel > 1e-8:
            bad[key] = rel
    assert not bad, f"gradients differ from transformers beyond 1e-8 relative: {bad}"


@pytest.mark.parametrize("kind", list(KINDS))
def test_save_pretrained_loads_in_transformers_and_back(kind, tmp_path, helpers):
    model = random_model(kind, config_for("C16-NH2-L2"), np.float32, seed=6)
    if model.task in ("sequence", "token"):
        names = ["neg", "pos", "mixed", "odd"][:model.config.num_labels]
        model.config.id2label = dict(enumerate(names))
        model.config.label2id = {n: i for i, n in enumerate(names)}
    model.save_pretrained(tmp_path / "m", vocab=[f"t{i}" for i in range(model.config.vocab_size)])
    theirs = getattr(transformers, model.architecture).from_pretrained(tmp_path / "m", attn_implementation="eager")
    theirs.eval()
    assert theirs.config.architectures == [model.architecture]
    if model.task in ("sequence", "token"):
        assert theirs.config.id2label == model.config.id2label
        assert theirs.config.num_labels == model.config.num_labels
    if kind == "regression":
        assert theirs.config.problem_type == "regression"
    ids, seg, mask = inputs(model, helpers, seed=7)
    with torch.no_grad():
        ref = their_logits(theirs(input_ids=torch.from_numpy(ids), token_type_ids=torch.from_numpy(seg),
                                  attention_mask=torch.from_numpy(mask)), model.task)
    np.testing.assert_allclose(our_logits(model, ids, seg, mask), ref, rtol=0, atol=1e-5)
    # and back: transformers' own save_pretrained -> minibert, everything loaded
    theirs.save_pretrained(tmp_path / "hf", safe_serialization=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # same class: no "newly initialised" warning
        again = type(model).from_pretrained(tmp_path / "hf")
    assert again.config.id2label == model.config.id2label
    for name, p in model.params.items():
        np.testing.assert_array_equal(again.params[name], p, err_msg=name)  # exact: float32 copied, not computed


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
    ids, seg, mask = inputs(model, helpers, seed=9)
    theirs = hf_twin(model, np.float32)  # the loaded model still matches transformers
    with torch.no_grad():
        ref = their_logits(theirs(input_ids=torch.from_numpy(ids), token_type_ids=torch.from_numpy(seg),
                                  attention_mask=torch.from_numpy(mask)), model.task)
    np.testing.assert_allclose(our_logits(model, ids, seg, mask), ref, rtol=0, atol=1e-5)
