"""Numerical gradients and the comparisons that decide a gradient check. Shared by tests and lessons.

A check compares a hand-written (analytic) gradient with centered differences
    df/dx[i] ~= (f(x + h e_i) - f(x - h e_i)) / (2h)
computed in float64: in float32 the differences are dominated by rounding (a correct LayerNorm
backward checked in float32 shows a relative error of ~0.7 against ~2e-9 in float64).
An entry passes when |analytic - numeric| <= atol + rtol * |numeric| (llm.c's rule), so a
true gradient of 1e-15 against a numeric 0 does not fail on a meaningless relative error.

`python -m minibert gradcheck` prints the table of every check (tools/gradcheck_table.py): the layers
and BERT here, the family's models in family/gradchecks.py, the fine-tuning classes in
finetune/gradchecks.py.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

RTOL = 1e-5  # single layers in float64: measured errors are ~1e-9, bugs give ~1
ATOL = 1e-8


def numerical_grad(f: Callable[[], np.ndarray], x: np.ndarray, dout: np.ndarray, h: float = 1e-5,
                   indices=None) -> np.ndarray:
    """Centered-difference gradient of sum(f() * dout) with respect to x, changing x in place
    and restoring it. `f` takes no arguments and reads x. With `indices` (a list of index
    tuples), only those entries are computed (others are left 0)."""
    grad = np.zeros_like(x, dtype=np.float64)
    it = indices if indices is not None else np.ndindex(*x.shape)
    for idx in it:
        old = x[idx]
        x[idx] = old + h
        fp = np.sum(f() * dout)
        x[idx] = old - h
        fm = np.sum(f() * dout)
        x[idx] = old
        grad[idx] = (fp - fm) / (2 * h)
    return grad


def numerical_grad_scalar(f: Callable[[], float], x: np.ndarray, h: float = 1e-5, indices=None) -> np.ndarray:
    """Centered-difference gradient of a scalar function f() with respect to x (in place, restored)."""
    return numerical_grad(lambda: np.asarray(f()), x, np.float64(1.0), h, indices)


def sampled_indices(shape: tuple, k: int, rng: np.random.Generator) -> list[tuple]:
    """Up to k distinct index tuples of an array of `shape`, for checking big tensors cheaply."""
    size = int(np.prod(shape))
    flat = rng.choice(size, size=min(k, size), replace=False)
    return [tuple(int(i) for i in np.unravel_index(j, shape)) for j in sorted(flat)]


class Check(NamedTuple):
    name: str
    ok: bool
    max_abs: float
    max_rel: float  # CS231n's rel_error: max |a - n| / max(|a| + |n|, 1e-12)

    def __bool__(self) -> bool:
        return self.ok

    def row(self) -> str:
        verdict = "ok" if self.ok else "FAIL"
        return f"{self.name:<44} {self.max_abs:10.2e} {self.max_rel:10.2e}  {verdict}"


HEADER = f"{'check':<44} {'max_abs':>10} {'max_rel':>10}  verdict"


def compare(name: str, analytic, reference, rtol: float = RTOL, atol: float = ATOL, verbose: bool = True) -> Check:
    """Compare two gradients elementwise; print one table row (when verbose) and return a Check
    that is truthy when every entry satisfies |a - r| <= atol + rtol * |r|."""
    a = np.asarray(analytic, dtype=np.float64)
    r = np.asarray(reference, dtype=np.float64)
    if a.shape != r.shape:
        raise ValueError(f"{name}: shapes differ, analytic {a.shape} vs reference {r.shape}")
    diff = np.abs(a - r)
    ok = bool(np.all(diff <= atol + rtol * np.abs(r))) and bool(np.all(np.isfinite(a)))
    max_abs = float(diff.max()) if diff.size else 0.0
    rel = diff / np.maximum(np.abs(a) + np.abs(r), 1e-12)
    check = Check(name, ok, max_abs, float(rel.max()) if rel.size else 0.0)
    if verbose:
        print(check.row())
    return check


# ---------------------------------------------------------------------------------------------
# The checks of every layer, as functions returning a list of Checks. Tests assert them; the
# `gradcheck` command prints them. Parameters and upstream gradients are random, never ones.

def rand_array(rng, *shape, scale=1.0):
    return rng.standard_normal(shape) * scale


def layer_check(name, forward, arrays: dict, backward, rng, verbose, rtol=RTOL, atol=ATOL):
    """Run forward on `arrays` (float64), backprop a random dout, compare each gradient with
    the numerical one. `forward(**arrays)` -> (out, cache); backward(dout, cache) -> grads in
    the order of `arrays`."""
    out, cache = forward(**arrays)
    dout = rng.standard_normal(np.shape(out))
    grads = backward(dout, cache)
    grads = grads if isinstance(grads, tuple) else (grads,)
    checks = []
    for (argname, x), g in zip(arrays.items(), grads):
        num = numerical_grad(lambda: forward(**arrays)[0], x, dout)
        checks.append(compare(f"{name}: d{argname}", g, num, rtol, atol, verbose))
    return checks


def check_linear(rng, verbose=True):
    from minibert import layers as L

    arrays = dict(x=rand_array(rng, 2, 3, 5), w=rand_array(rng, 5, 4), b=rand_array(rng, 4))
    return layer_check("linear", L.linear_forward, arrays, L.linear_backward, rng, verbose)


def check_embedding(rng, verbose=True):
    """Repeated token ids must accumulate."""
    from minibert import layers as L

    ids = np.array([[1, 3, 3, 0], [3, 1, 2, 3]])  # id 3 appears four times
    segs = np.array([[0, 0, 1, 1], [0, 1, 1, 1]])
    arrays = dict(tok_emb=rand_array(rng, 5, 6), seg_emb=rand_array(rng, 2, 6), pos_emb=rand_array(rng, 7, 6))
    fwd = lambda **a: L.embedding_forward(ids, segs, **a)  # noqa: E731
    return layer_check("embedding (repeated ids)", fwd, arrays, L.embedding_backward, rng, verbose)


def check_layernorm(rng, verbose=True):
    from minibert import layers as L

    arrays = dict(x=rand_array(rng, 2, 3, 8), w=1 + 0.1 * rand_array(rng, 8), b=0.1 * rand_array(rng, 8))
    return layer_check("layernorm", L.layernorm_forward, arrays, L.layernorm_backward, rng, verbose)


def check_gelu(rng, verbose=True):
    from minibert import layers as L

    checks = []
    for approx in ("none", "tanh"):
        fwd = lambda x, approx=approx: L.gelu_forward(x, approximate=approx)  # noqa: E731
        arrays = dict(x=rand_array(rng, 4, 7, scale=2.0))
        checks += layer_check(f"gelu ({'erf' if approx == 'none' else 'tanh'})", fwd, arrays,
                               L.gelu_backward, rng, verbose)
    return checks


def check_dropout(rng, verbose=True):
    """The mask is fixed by re-seeding the rng on every forward call."""
    from minibert import layers as L

    fwd = lambda x: L.dropout_forward(x, 0.3, np.random.default_rng(7))  # noqa: E731
    return layer_check("dropout (fixed mask)", fwd, dict(x=rand_array(rng, 3, 9)), L.dropout_backward, rng, verbose)


def check_attention(rng, verbose=True, ops=None):
    """Padded keys, including a row whose every key but one is padding."""
    from minibert import layers as L

    ops = ops or L
    B, NH, T, HS = 2, 2, 5, 4
    mask = np.ones((B, T))
    mask[0, 3:] = 0  # sequence 0: two padded keys
    mask[1, 1:] = 0  # sequence 1: only its first key is real
    arrays = dict(q=rand_array(rng, B, NH, T, HS), k=rand_array(rng, B, NH, T, HS), v=rand_array(rng, B, NH, T, HS))
    fwd = lambda **a: ops.attention_forward(a["q"], a["k"], a["v"], mask)  # noqa: E731
    checks = layer_check("attention (padded keys)", fwd, arrays, ops.attention_backward, rng, verbose)
    fwd_d = lambda **a: ops.attention_forward(a["q"], a["k"], a["v"], mask, 0.2, np.random.default_rng(3))  # noqa: E731
    checks += layer_check("attention (dropout, fixed mask)", fwd_d, arrays, ops.attention_backward, rng, verbose)
    return checks


def check_cross_entropy(rng, verbose=True):
    """Ignored targets contribute nothing and are not counted in the mean."""
    from minibert import layers as L

    targets = np.array([[2, -100, 0], [4, 1, -100]])
    fwd = lambda logits: L.cross_entropy_forward(logits, targets)  # noqa: E731
    return layer_check("cross-entropy (ignored targets)", fwd, dict(logits=rand_array(rng, 2, 3, 5)),
                        L.cross_entropy_backward, rng, verbose)


LAYER_CHECKS = [check_linear, check_embedding, check_layernorm, check_gelu, check_dropout,
                check_attention, check_cross_entropy]


def sampled_loss_checks(label, loss, params, grads, rng, samples_per_tensor, rtol=RTOL, atol=ATOL, verbose=True,
                        names=None):
    """A whole model's check: `samples_per_tensor` sampled entries of each tensor in `names`
    (default: every one of params, in order) against centered differences of loss() (no
    arguments; it reads params), named `label: name`."""
    checks = []
    for name in params if names is None else names:
        p = params[name]
        idx = sampled_indices(p.shape, samples_per_tensor, rng)
        num = numerical_grad_scalar(loss, p, indices=idx)
        sel = tuple(np.array(i) for i in zip(*idx))
        checks.append(compare(f"{label}: {name}", grads[name][sel], num[sel], rtol, atol, verbose))
    return checks


def check_model(rng, verbose=True, samples_per_tensor=4, rtol=1e-5, atol=1e-8):
    """Whole-model check on a tiny float64 BertForPreTraining: a few sampled entries of every
    parameter tensor (tied word embeddings included) against centered differences of the loss."""
    from minibert.bert import BertForPreTraining
    from minibert.model import BertConfig

    cfg = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=16, type_vocab_size=2)
    model = BertForPreTraining(cfg, seed=int(rng.integers(1 << 30)), dtype=np.float64)
    # the init is 0.02-scale with zero biases and unit LayerNorms; perturb everything so that
    # a gradient that forgets a term (e.g. LayerNorm's w) cannot pass by accident
    for name, p in model.params.items():
        p += 0.1 * rng.standard_normal(p.shape)
    batch = random_batch(cfg, B=3, T=8, P=3, rng=rng)
    loss, grads = model.loss_and_grads(batch)
    return sampled_loss_checks("model", lambda: model.loss_and_grads(batch, compute_grads=False)[0], model.params,
                               grads, rng, samples_per_tensor, rtol, atol, verbose)


def head_batch(head_shape, cfg, rng, B=3, T=8, num_labels=3, num_choices=3):
    """A random fine-tuning batch for one of the four head shapes, with padding in the last row."""
    shape = (B, num_choices, T) if head_shape == "choice" else (B, T)
    ids = rng.integers(5, cfg.vocab_size, size=shape)
    mask = np.ones(shape, dtype=np.int64)
    mask[..., -1, T - 3:] = 0  # the last row (last choice) is padded
    ids *= mask
    seg = np.zeros(shape, dtype=np.int64)
    seg[..., T // 2:] = 1
    seg *= mask
    batch = dict(input_ids=ids, input_mask=mask, segment_ids=seg)
    if head_shape == "sequence":
        batch["labels"] = rng.standard_normal(B) if num_labels == 1 else rng.integers(0, num_labels, B)
    elif head_shape == "token":
        labels = rng.integers(0, num_labels, size=(B, T))
        labels[mask == 0] = -100
        labels[:, 0] = -100  # [CLS]
        labels[0, 2] = -100  # a later sub-token of a word
        batch["labels"] = labels
    elif head_shape == "choice":
        batch["labels"] = rng.integers(0, num_choices, B)
    else:  # qa; one start outside the window (ignored, as transformers)
        batch["start_positions"] = np.array([1, T + 4, 2])[:B]
        batch["end_positions"] = np.array([3, 2, 2])[:B]
    return batch


def random_batch(cfg, B, T, P, rng, pad_last=True):
    """A random pretraining batch with the original feature names (docs/bert-notes.md §3.7), with padding
    in the last sequence and one unused prediction slot."""
    input_ids = rng.integers(5, cfg.vocab_size, size=(B, T))
    input_mask = np.ones((B, T), dtype=np.int64)
    if pad_last and T > 3:
        input_mask[-1, T - 2:] = 0
        input_ids[-1, T - 2:] = 0
    segment_ids = np.zeros((B, T), dtype=np.int64)
    segment_ids[:, T // 2:] = 1
    segment_ids *= input_mask
    positions = np.stack([np.sort(rng.choice(np.arange(1, T - 2), size=P, replace=False)) for _ in range(B)])
    weights = np.ones((B, P))
    weights[0, -1] = 0.0  # an unused (padded) prediction slot
    ids = rng.integers(0, cfg.vocab_size, size=(B, P))
    positions[0, -1] = 0
    ids[0, -1] = 0
    return dict(input_ids=input_ids, input_mask=input_mask, segment_ids=segment_ids,
                masked_lm_positions=positions, masked_lm_ids=ids, masked_lm_weights=weights,
                next_sentence_labels=rng.integers(0, 2, size=B))


def check_causal_attention(rng, verbose=True, ops=None):
    """The left-to-right (causal) mask, with padded keys as well (the masks of check_attention):
    each query sees the real keys at and before it only. With and without a fixed dropout mask."""
    from minibert import layers as L

    ops = ops or L
    tag = "numba" if ops is not L else "numpy"
    B, NH, T, HS = 2, 2, 5, 4
    mask = np.ones((B, T))  # (B, T)
    mask[0, 3:] = 0  # sequence 0: two padded keys
    mask[1, 1:] = 0  # sequence 1: only its first key is real
    arrays = dict(q=rand_array(rng, B, NH, T, HS), k=rand_array(rng, B, NH, T, HS),
                  v=rand_array(rng, B, NH, T, HS))  # 3 x (B, NH, T, HS)
    fwd = lambda **a: ops.attention_forward(a["q"], a["k"], a["v"], mask, causal=True)  # noqa: E731
    checks = layer_check(f"causal attention [{tag}] (padded keys)", fwd, arrays, ops.attention_backward, rng,
                          verbose)
    fwd_d = lambda **a: ops.attention_forward(a["q"], a["k"], a["v"], mask, 0.2, np.random.default_rng(3),  # noqa: E731
                                              causal=True)
    checks += layer_check(f"causal attention [{tag}] (dropout, fixed mask)", fwd_d, arrays, ops.attention_backward,
                           rng, verbose)
    return checks


def check_objective_model(rng, verbose=True, objective="ltr", samples_per_tensor=4, rtol=1e-5, atol=1e-8):
    """check_model for another pretraining objective (model.OBJECTIVES): "ltr" (causal attention,
    next-token loss through the tied MLM head) or "mlm" (no NSP). Every parameter the objective
    trains is checked; the grads must hold exactly those (no pool.*, nsp.*). The batch has
    padding in its last sequence, so the unpadded encoder path runs."""
    from minibert.bert import BertForPreTraining
    from minibert.model import BertConfig, trained_params

    cfg = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=16, type_vocab_size=2)
    model = BertForPreTraining(cfg, seed=int(rng.integers(1 << 30)), dtype=np.float64)
    for p in model.params.values():  # away from the init's unit LayerNorms and zero biases
        p += 0.1 * rng.standard_normal(p.shape)
    batch = random_batch(cfg, B=3, T=8, P=3, rng=rng)
    loss, grads = model.loss_and_grads(batch, objective=objective)
    trained = trained_params(model.params, objective)
    if list(grads) != trained:
        raise AssertionError(f"{objective}: grads hold {sorted(set(grads) ^ set(trained))} unexpectedly")
    return sampled_loss_checks(f"model ({objective})",
                               lambda: model.loss_and_grads(batch, compute_grads=False, objective=objective)[0],
                               model.params, grads, rng, samples_per_tensor, rtol, atol, verbose, names=trained)
