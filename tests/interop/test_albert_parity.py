"""minibert's ALBERT computes what transformers' AlbertForPreTraining computes: forward in float32,
loss and every gradient in float64, and checkpoints that each library reads from the other.
Two shapes, both with embedding_size != hidden_size (one with E > C), padding and both segments."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from minibert.family import albert  # noqa: E402
from minibert.family.albert import AlbertConfig, AlbertForPreTraining  # noqa: E402

SHAPES = {
    "E8-C16-NH2-L3": dict(vocab_size=40, embedding_size=8, hidden_size=16, num_attention_heads=2,
                          num_hidden_layers=3, intermediate_size=32),
    "E24-C12-NH3-L2-gelu-TV3": dict(vocab_size=30, embedding_size=24, hidden_size=12, num_attention_heads=3,
                                    num_hidden_layers=2, intermediate_size=20, hidden_act="gelu", type_vocab_size=3),
}
BACKENDS = ["numpy", "numba"]
TORCH_DTYPE = {np.float32: torch.float32, np.float64: torch.float64}


def config_for(name):
    return AlbertConfig(max_position_embeddings=16, **SHAPES[name])


def random_hf_model(config, dtype, seed):
    """transformers AlbertForPreTraining (eager attention, eval mode) with random, non-trivial
    weights: matrices and biases N(0, 0.1), LayerNorm weights 1 + N(0, 0.1)."""
    hcfg = transformers.AlbertConfig(**config.to_dict(), attn_implementation="eager")
    model = transformers.AlbertForPreTraining(hcfg).to(TORCH_DTYPE[dtype])
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():  # the tied decoder appears once, under its owners
            base = 1.0 if name.endswith(("LayerNorm.weight", "layer_norm.weight")) else 0.0
            p.copy_(torch.from_numpy(base + 0.1 * rng.standard_normal(tuple(p.shape))))
    assert model.predictions.decoder.weight is model.albert.embeddings.word_embeddings.weight  # still tied
    return model.eval()


def minibert_from_hf(model, config, dtype):
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    return AlbertForPreTraining(config, dtype=dtype, params=albert.from_hf_state_dict(state, config, dtype))


def make_inputs(config, seed, B=3, T=9):
    """(ids, segments, mask): rows of length T, T-3 and 4, [CLS] ... [SEP], segments 0 then 1."""
    rng = np.random.default_rng(seed)
    lengths = [T, T - 3, 4][:B]
    ids = np.zeros((B, T), np.int64)  # (B, T) [PAD] = 0
    seg = np.zeros((B, T), np.int64)  # (B, T)
    for b, n in enumerate(lengths):
        ids[b, :n] = rng.integers(5, config.vocab_size, n)
        ids[b, 0], ids[b, n - 1] = 2, 3
        seg[b, n // 2:n] = config.type_vocab_size - 1
    mask = (np.arange(T)[None] < np.array(lengths)[:, None]).astype(np.int64)  # (B, T)
    return ids, seg, mask


def mlm_labels(ids, mask, seed, P=3):
    """Row b gets b + 1 predictions at real non-special positions -> minibert's gathered features
    and transformers' (B, T) labels (-100 elsewhere)."""
    rng = np.random.default_rng(seed)
    B, T = ids.shape
    positions, targets, weights = np.zeros((B, P), np.int64), np.zeros((B, P), np.int64), np.zeros((B, P))
    labels = np.full((B, T), -100, np.int64)  # (B, T)
    for b in range(B):
        n = int(mask[b].sum())
        picked = rng.choice(np.arange(1, n - 1), size=min(P, n - 2, 1 + b), replace=False)
        tgt = rng.integers(5, ids.max() + 1, len(picked))
        positions[b, :len(picked)], targets[b, :len(picked)], weights[b, :len(picked)] = picked, tgt, 1.0
        labels[b, picked] = tgt
    return positions, targets, weights, labels


def hf_outputs(model, ids, seg, mask):
    t = [torch.from_numpy(a) for a in (ids, seg, mask)]
    with torch.no_grad():
        base = model.albert(input_ids=t[0], token_type_ids=t[1], attention_mask=t[2])
        heads = model(input_ids=t[0], token_type_ids=t[1], attention_mask=t[2])
    return {"sequence_output": base.last_hidden_state.numpy(), "pooled_output": base.pooler_output.numpy(),
            "mlm_logits": heads.prediction_logits.numpy(), "nsp_logits": heads.sop_logits.numpy()}


def assert_outputs_match(out, ref, atol=1e-5):
    for name, b in ref.items():
        a = getattr(out, name)
        assert a.shape == b.shape and a.dtype == np.float32, name
        np.testing.assert_allclose(a, b, rtol=0, atol=atol, err_msg=name)
    assert np.abs(out.sequence_output).max() > 0.5  # outputs are not trivially small


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", list(SHAPES))
def test_albert_forward_matches_transformers_float32(shape, backend, monkeypatch):
    monkeypatch.setattr("minibert.backend.chosen", backend)
    config = config_for(shape)
    theirs = random_hf_model(config, np.float32, seed=1)
    ours = minibert_from_hf(theirs, config, np.float32)
    ids, seg, mask = make_inputs(config, seed=2)
    assert_outputs_match(ours(ids, seg, mask), hf_outputs(theirs, ids, seg, mask))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", list(SHAPES))
def test_albert_loss_and_every_gradient_match_transformers_float64(shape, backend, helpers, monkeypatch):
    monkeypatch.setattr("minibert.backend.chosen", backend)
    config = config_for(shape)
    theirs = random_hf_model(config, np.float64, seed=3)
    ours = minibert_from_hf(theirs, config, np.float64)
    # nn.Embedding(padding_idx=0) drops the input-side gradient of word row 0 ([PAD]); minibert has
    # no padding special case (as Google's code), so switch it off here (as tests/interop/test_parity.py).
    theirs.albert.embeddings.word_embeddings.padding_idx = None
    ids, seg, mask = make_inputs(config, seed=4)
    positions, targets, weights, labels = mlm_labels(ids, mask, seed=5)
    sop = np.array([0, 1, 1])
    batch = {"input_ids": ids, "input_mask": mask, "segment_ids": seg, "masked_lm_positions": positions,
             "masked_lm_ids": targets, "masked_lm_weights": weights, "next_sentence_labels": sop}
    loss, grads = ours.loss_and_grads(batch)  # eval: no dropout anywhere, as theirs.eval()

    t = {k: torch.from_numpy(v) for k, v in dict(input_ids=ids, token_type_ids=seg, attention_mask=mask,
                                                     labels=labels, sentence_order_label=sop).items()}
    theirs.zero_grad()
    ref = theirs(**t)
    ref.loss.backward()
    assert abs(loss - ref.loss.item()) <= 1e-12 * abs(ref.loss.item())
    hf_grads = albert.to_hf_state_dict(grads)
    worst = helpers.gradient_errors(hf_grads, dict(theirs.named_parameters()), "attention.key.bias")
    assert len(worst) == len(hf_grads) - 1
    bad = {k: v for k, v in worst.items() if v > 1e-8}
    assert not bad, f"gradients differ from transformers beyond 1e-8 relative: {bad}"


@pytest.mark.parametrize("shape", list(SHAPES))
def test_minibert_albert_checkpoint_loads_in_transformers(shape, tmp_path):
    config = config_for(shape)
    ours = minibert_from_hf(random_hf_model(config, np.float32, seed=6), config, np.float32)
    ours.save_pretrained(tmp_path, vocab=[f"[unused{i}]" for i in range(config.vocab_size)])
    loaded = transformers.AlbertForPreTraining.from_pretrained(tmp_path, attn_implementation="eager").eval()
    assert loaded.predictions.decoder.weight is loaded.albert.embeddings.word_embeddings.weight  # re-tied on load
    for key, value in albert.to_hf_state_dict(ours.params).items():
        np.testing.assert_array_equal(loaded.state_dict()[key].numpy(), value)  # exact: copied float32 values
    ids, seg, mask = make_inputs(config, seed=7)
    assert_outputs_match(ours(ids, seg, mask), hf_outputs(loaded, ids, seg, mask))


@pytest.mark.parametrize("shape", list(SHAPES))
def test_transformers_albert_checkpoint_loads_in_minibert(shape, tmp_path):
    config = config_for(shape)
    theirs = random_hf_model(config, np.float32, seed=8)
    theirs.save_pretrained(tmp_path)
    ours = AlbertForPreTraining.from_pretrained(tmp_path)
    assert ours.config == config
    ids, seg, mask = make_inputs(config, seed=9)
    assert_outputs_match(ours(ids, seg, mask), hf_outputs(theirs, ids, seg, mask))
