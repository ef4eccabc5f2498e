"""minibert's ELECTRA computes what transformers' ElectraForPreTraining (discriminator) and
ElectraForMaskedLM (generator) compute: logits in float32, loss and every gradient in float64
(dropout off), and checkpoints that each library reads from the other. Two shapes: E != C (the
embedding projected E -> C) and E == C (no projection; hidden_act "gelu_new", three token types)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from minibert.family import electra  # noqa: E402
from minibert.family.electra import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining  # noqa: E402

SHAPES = {
    "E8-C16-NH2-L2": dict(vocab_size=40, embedding_size=8, hidden_size=16, num_attention_heads=2,
                          num_hidden_layers=2, intermediate_size=32),
    "E12-C12-NH3-L2-gelu_new-TV3": dict(vocab_size=30, embedding_size=12, hidden_size=12, num_attention_heads=3,
                                        num_hidden_layers=2, intermediate_size=20, hidden_act="gelu_new",
                                        type_vocab_size=3),
}
OURS = {"disc": ElectraForPreTraining, "gen": ElectraForMaskedLM}
THEIRS = {"disc": "ElectraForPreTraining", "gen": "ElectraForMaskedLM"}
BACKENDS = ["numpy", "numba"]
TORCH_DTYPE = {np.float32: torch.float32, np.float64: torch.float64}


def config_for(name):
    return ElectraConfig(max_position_embeddings=16, **SHAPES[name])


def random_hf_model(head, config, dtype, seed):
    """A transformers ELECTRA model (eager attention, eval mode) with random, non-trivial weights:
    matrices and biases N(0, 0.1), LayerNorm weights 1 + N(0, 0.1)."""
    hcfg = transformers.ElectraConfig(**config.to_dict(), attn_implementation="eager")
    model = getattr(transformers, THEIRS[head])(hcfg).to(TORCH_DTYPE[dtype])
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():  # the tied decoder appears once, as the word embeddings
            base = 1.0 if name.endswith("LayerNorm.weight") else 0.0
            p.copy_(torch.from_numpy(base + 0.1 * rng.standard_normal(tuple(p.shape))))
    if head == "gen":
        assert model.generator_lm_head.weight is model.electra.embeddings.word_embeddings.weight  # still tied
    assert hasattr(model.electra, "embeddings_project") == config.factorized
    return model.eval()


def minibert_from_hf(head, model, config, dtype):
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    return OURS[head](config, dtype=dtype, params=electra.from_hf_state_dict(state, config, head, dtype))


def make_inputs(config, seed, B=3, T=9):
    """(ids, segments, mask): rows of length T, T-3 and 4, [CLS] ... [SEP], segments 0 then the last type."""
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


def make_labels(head, ids, mask, seed):
    """disc: 0/1 at every token (padding included: the loss must ignore it); gen: a target at
    b + 1 real non-special positions of row b, -100 elsewhere."""
    rng = np.random.default_rng(seed)
    if head == "disc":
        return rng.integers(0, 2, ids.shape)  # (B, T)
    labels = np.full(ids.shape, -100, np.int64)  # (B, T)
    for b in range(ids.shape[0]):
        n = int(mask[b].sum())
        picked = rng.choice(np.arange(1, n - 1), size=min(n - 2, 1 + b), replace=False)
        labels[b, picked] = rng.integers(5, ids.max() + 1, len(picked))
    return labels


def hf_logits(model, ids, seg, mask):
    with torch.no_grad():
        out = model(input_ids=torch.from_numpy(ids), token_type_ids=torch.from_numpy(seg),
                    attention_mask=torch.from_numpy(mask))
    return out.logits.numpy()


def assert_logits_match(ours, theirs, mask, atol=1e-5):
    """Every position, padding included (forward runs the padded encoder, as transformers)."""
    assert ours.shape == theirs.shape and ours.dtype == np.float32
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=atol)
    assert np.abs(theirs[mask.astype(bool)]).max() > 0.1  # not trivially small


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("head", list(OURS))
def test_electra_logits_match_transformers_float32(head, shape, backend, monkeypatch):
    monkeypatch.setattr("minibert.backend.chosen", backend)
    config = config_for(shape)
    theirs = random_hf_model(head, config, np.float32, seed=1)
    ours = minibert_from_hf(head, theirs, config, np.float32)
    ids, seg, mask = make_inputs(config, seed=2)
    assert_logits_match(ours(ids, seg, mask), hf_logits(theirs, ids, seg, mask), mask)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("head", list(OURS))
def test_electra_loss_and_every_gradient_match_transformers_float64(head, shape, backend, helpers, monkeypatch):
    monkeypatch.setattr("minibert.backend.chosen", backend)
    config = config_for(shape)
    theirs = random_hf_model(head, config, np.float64, seed=3)
    ours = minibert_from_hf(head, theirs, config, np.float64)
    # nn.Embedding(padding_idx=0) drops the input-side gradient of word row 0 ([PAD]); minibert has
    # no padding special case (as Google's code), so switch it off here (as tests/interop/test_parity.py).
    theirs.electra.embeddings.word_embeddings.padding_idx = None
    ids, seg, mask = make_inputs(config, seed=4)
    labels = make_labels(head, ids, mask, seed=5)
    batch = {"input_ids": ids, "input_mask": mask, "segment_ids": seg, "labels": labels}
    loss, grads = ours.loss_and_grads(batch)  # eval: no dropout anywhere, as theirs.eval()

    t = {k: torch.from_numpy(v) for k, v in dict(input_ids=ids, token_type_ids=seg, attention_mask=mask,
                                                     labels=labels).items()}
    theirs.zero_grad()
    ref = theirs(**t)
    ref_loss = ref.loss
    if head == "disc":
        # ElectraForPreTraining casts the labels with .float(), which runs its BCE (and the gradient
        # it sends back) in float32. Its own loss agrees to float32 precision; for the float64
        # comparison the same loss (mean BCE over attention_mask == 1) is taken with float64 targets.
        assert abs(loss - ref_loss.item()) <= 1e-6 * abs(ref_loss.item())
        active = t["attention_mask"] == 1
        ref_loss = torch.nn.functional.binary_cross_entropy_with_logits(ref.logits[active],
                                                                        t["labels"][active].double())
    ref_loss.backward()
    assert abs(loss - ref_loss.item()) <= 1e-12 * abs(ref_loss.item())
    hf_grads = electra.to_hf_state_dict(grads, config)
    worst = helpers.gradient_errors(hf_grads, dict(theirs.named_parameters()), "attention.self.key.bias")
    assert len(worst) == len(hf_grads) - config.num_hidden_layers
    bad = {k: v for k, v in worst.items() if v > 1e-8}
    assert not bad, f"gradients differ from transformers beyond 1e-8 relative: {bad}"


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("head", list(OURS))
def test_minibert_electra_checkpoint_loads_in_transformers(head, shape, tmp_path):
    config = config_for(shape)
    ours = minibert_from_hf(head, random_hf_model(head, config, np.float32, seed=6), config, np.float32)
    ours.save_pretrained(tmp_path, vocab=[f"[unused{i}]" for i in range(config.vocab_size)])
    loaded = getattr(transformers, THEIRS[head]).from_pretrained(tmp_path, attn_implementation="eager").eval()
    if head == "gen":
        assert loaded.generator_lm_head.weight is loaded.electra.embeddings.word_embeddings.weight  # re-tied on load
    for key, value in electra.to_hf_state_dict(ours.params, config).items():
        np.testing.assert_array_equal(loaded.state_dict()[key].numpy(), value)  # exact: copied float32 values
    ids, seg, mask = make_inputs(config, seed=7)
    assert_logits_match(ours(ids, seg, mask), hf_logits(loaded, ids, seg, mask), mask)


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("head", list(OURS))
def test_transformers_electra_checkpoint_loads_in_minibert(head, shape, tmp_path):
    config = config_for(shape)
    theirs = random_hf_model(head, config, np.float32, seed=8)
    theirs.save_pretrained(tmp_path)
    ours = OURS[head].from_pretrained(tmp_path)
    assert ours.config == config
    ids, seg, mask = make_inputs(config, seed=9)
    assert_logits_match(ours(ids, seg, mask), hf_logits(theirs, ids, seg, mask), mask)
