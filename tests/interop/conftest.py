"""tests/interop need torch and transformers (the `interop` extra, `make test-interop`).

Without them every test here is skipped with one clear reason instead of failing at import;
the test modules also guard their imports with pytest.importorskip so collection stays clean.
Shared helpers (building a transformers model from minibert params, inputs with padding) are
fixtures so the test files do not import each other.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).parent


def _missing(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is None
    except (ImportError, ValueError):  # a broken or blocked install counts as missing
        return True


MISSING = [m for m in ("torch", "transformers") if _missing(m)]


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason=f"{' and '.join(MISSING)} not installed (make test-interop installs them)")
    for item in items:
        if HERE in Path(item.fspath).parents:
            item.add_marker(pytest.mark.interop)
            if MISSING:
                item.add_marker(skip)


def random_params(config, dtype, seed):
    """Random, non-trivial minibert params: matrices N(0, 0.1), LayerNorm w = 1 + N(0, 0.1),
    every bias N(0, 0.1) (never ones or zeros, so a swapped or untransposed tensor shows)."""
    from minibert.model import param_shapes

    rng = np.random.default_rng(seed)
    params = {}
    for name, shape in param_shapes(config).items():
        base = 1.0 if name.endswith(".w") and "ln" in name.split(".")[-2] else 0.0
        params[name] = (base + 0.1 * rng.standard_normal(shape)).astype(dtype)
    return params


def make_inputs(config, seed, B=3, T=9):
    """(input_ids, token_type_ids, attention_mask) with padding in rows 1 and 2 and segments 0/1."""
    rng = np.random.default_rng(seed)
    lengths = [T, T - 3, 4][:B]
    ids = np.zeros((B, T), np.int64)  # (B, T) [PAD] = 0
    seg = np.zeros((B, T), np.int64)  # (B, T)
    for b, n in enumerate(lengths):
        ids[b, :n] = rng.integers(5, config.vocab_size, n)
        ids[b, 0], ids[b, n - 1] = 2, 3  # [CLS] ... [SEP]
        seg[b, n // 2:n] = 1  # the second segment
    mask = (np.arange(T)[None] < np.array(lengths)[:, None]).astype(np.int64)  # (B, T)
    return ids, seg, mask


def hf_model_from_params(params, config, dtype):
    """transformers BertForPreTraining (eager attention, eval mode) holding minibert's params."""
    import torch
    import transformers

    from minibert.checkpoint import to_hf_state_dict

    hcfg = transformers.BertConfig(**config.to_dict(), attn_implementation="eager")
    model = transformers.BertForPreTraining(hcfg).to({np.float32: torch.float32, np.float64: torch.float64}[dtype])
    state = {k: torch.from_numpy(v.copy()) for k, v in to_hf_state_dict(params).items()}
    result = model.load_state_dict(state, strict=False)
    assert not result.unexpected_keys, result.unexpected_keys
    assert set(result.missing_keys) <= {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}, \
        result.missing_keys
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight  # still tied
    return model.eval()


def max_rel(a, b):
    """max |a - b| / max |b|: tensor-relative, so entries near 0 do not blow it up."""
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def gradient_errors(hf_grads: dict, named: dict, key_bias: str) -> dict[str, float]:
    """minibert's gradients (transformers' names) against the .grad of transformers' parameters
    -> {name: max_rel} for every tensor but the attention key biases (names ending in
    `key_bias`). Those are analytically zero: b_k shifts every score of a query by the same
    q . b_k, which softmax ignores, so both sides hold round-off only and are compared with the
    overall gradient scale instead. Every other reference gradient must be a real one (above
    1e-6 of the scale), so that a relative error means something."""
    assert set(hf_grads) == set(named)
    scale = max(np.abs(p.grad.numpy()).max() for p in named.values())
    worst = {}
    for key, g in hf_grads.items():
        ref_g = named[key].grad.numpy()
        assert g.shape == ref_g.shape, key
        if key.endswith(key_bias):
            assert np.abs(g).max() <= 1e-12 * scale and np.abs(ref_g).max() <= 1e-12 * scale, key
            continue
        assert np.abs(ref_g).max() > 1e-6 * scale, key
        worst[key] = max_rel(g, ref_g)
    return worst


@pytest.fixture
def helpers():
    class H:
        pass

    H.random_params = staticmethod(random_params)
    H.make_inputs = staticmethod(make_inputs)
    H.hf_model_from_params = staticmethod(hf_model_from_params)
    H.gradient_errors = staticmethod(gradient_errors)
    return H
