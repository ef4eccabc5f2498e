"""minibert computes what transformers computes: forward in float32, loss and every gradient in
float64, on random-initialised models of several shapes, with padding and both segments."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from minibert.bert import BertForPreTraining  # noqa: E402
from minibert.checkpoint import to_hf_state_dict  # noqa: E402
from minibert.model import BertConfig  # noqa: E402

SHAPES = {
    "C16-NH2-L2": dict(vocab_size=40, hidden_size=16, num_attention_heads=2, num_hidden_layers=2, intermediate_size=32),
    "C64-NH4-L2": dict(vocab_size=60, hidden_size=64, num_attention_heads=4, num_hidden_layers=2, intermediate_size=128),
    "C24-NH3-L1-gelu_new-TV3": dict(vocab_size=30, hidden_size=24, num_attention_heads=3, num_hidden_layers=1,
                                    intermediate_size=40, hidden_act="gelu_new", type_vocab_size=3),
}
BACKENDS = ["numpy", "numba"]


def config_for(name):
    return BertConfig(max_position_embeddings=16, **SHAPES[name])


def mlm_labels(ids, mask, seed, P=3):
    """Pick up to P distinct real (non-[CLS]/[SEP]) positions per row -> minibert's gathered
    features and transformers' (B, T) labels with -100 everywhere else."""
    rng = np.random.default_rng(seed)
    B, T = ids.shape
    positions = np.zeros((B, P), np.int64)  # padded slots gather position 0 with weight 0
    targets = np.zeros((B, P), np.int64)
    weights = np.zeros((B, P))
    labels = np.full((B, T), -100, np.int64)  # (B, T)
    for b in range(B):
        n = int(mask[b].sum())
        picked = rng.choice(np.arange(1, n - 1), size=min(P, n - 2, 1 + b), replace=False)  # rows have 1, 2, 3
        tgt = rng.integers(5, ids.max() + 1, len(picked))
        positions[b, :len(picked)], targets[b, :len(picked)], weights[b, :len(picked)] = picked, tgt, 1.0
        labels[b, picked] = tgt
    return positions, targets, weights, labels


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", list(SHAPES))
def test_forward_matches_transformers_float32(shape, backend, helpers, monkeypatch):
    monkeypatch.setattr("minibert.backend.chosen", backend)
    config = config_for(shape)
    params = helpers.random_params(config, np.float32, seed=1)
    ours = BertForPreTraining(config, dtype=np.float32, params=params)
    theirs = helpers.hf_model_from_params(params, config, np.float32)
    ids, seg, mask = helpers.make_inputs(config, seed=2)
    out = ours(ids, seg, mask)
    t = [torch.from_numpy(a) for a in (ids, seg, mask)]
    with torch.no_grad():
        base = theirs.bert(input_ids=t[0], token_type_ids=t[1], attention_mask=t[2])
        heads = theirs(input_ids=t[0], token_type_ids=t[1], attention_mask=t[2])
    pairs = {"sequence_output": (out.sequence_output, base.last_hidden_state),
             "pooled_output": (out.pooled_output, base.pooler_output),
             "mlm_logits": (out.mlm_logits, heads.prediction_logits),
             "nsp_logits": (out.nsp_logits, heads.seq_relationship_logits)}
    for name, (a, b) in pairs.items():
        b = b.numpy()
        assert a.shape == b.shape, name
        assert a.dtype == np.float32, name
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5, err_msg=name)
    assert np.abs(out.sequence_output).max() > 0.5  # outputs are not trivially small


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", list(SHAPES))
def test_loss_and_every_gradient_match_transformers_float64(shape, backend, helpers, monkeypatch):
    monkeypatch.setattr("minibert.backend.chosen", backend)
    config = config_for(shape)
    params = helpers.random_params(config, np.float64, seed=3)
    ours = BertForPreTraining(config, dtype=np.float64, params=params)
    theirs = helpers.hf_model_from_params(params, config, np.float64)
    # transformers' nn.Embedding(padding_idx=0) drops the input-side gradient of word row 0 ([PAD]);
    # Google BERT and minibert have no padding special case (docs/bert-notes.md §4.2), so switch it off here.
    # Row 0 still gets its MLM-decoder gradient through the tied weight either way.
    theirs.bert.embeddings.word_embeddings.padding_idx = None
    ids, seg, mask = helpers.make_inputs(config, seed=4)
    positions, targets, weights, labels = mlm_labels(ids, mask, seed=5)
    nsp = np.array([0, 1, 1])
    batch = {"input_ids": ids, "input_mask": mask, "segment_ids": seg, "masked_lm_positions": positions,
             "masked_lm_ids": targets, "masked_lm_weights": weights, "next_sentence_labels": nsp}
    loss, grads = ours.loss_and_grads(batch)

    t = {k: torch.from_numpy(v) for k, v in dict(input_ids=ids, token_type_ids=seg, attention_mask=mask,
                                                     labels=labels, next_sentence_label=nsp).items()}
    theirs.zero_grad()
    ref = theirs(**t)
    ref.loss.backward()
    assert abs(loss - ref.loss.item()) <= 1e-9 * abs(ref.loss.item())
    hf_grads = to_hf_state_dict(grads)
    named = dict(theirs.named_parameters())  # tied decoder weight/bias appear once, under their owners
    worst = helpers.gradient_errors(hf_grads, named, "attention.self.key.bias")
    assert len(worst) == len(hf_grads) - config.num_hidden_layers
    bad = {k: v for k, v in worst.items() if v > 1e-9}
    assert not bad, f"gradients differ from transformers beyond 1e-9 relative: {bad}"
