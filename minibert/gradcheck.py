"""Numerical gradients and the comparisons that decide a gradient check. Shared by tests and lessons.

A check compares a hand-written (analytic) gradient with centered differences
    df/dx[i] ~= (f(x + h e_i) - f(x - h e_i)) / (2h)
computed in float64: in float32 the differences are dominated by rounding (a correct LayerNorm
backward checked in float32 shows a relative error of ~0.7 against ~2e-9 in float64).
An entry passes when |analytic - numeric| <= atol + rtol * |numeric| (llm.c's rule), so a
true gradient of 1e-15 against a numeric 0 does not fail on a meaningless relative error.

`python -m minibert gradcheck` prints the table of every check in `all_checks()`.
"""
from __future__ import annotations

import argparse
import math
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

def _rand(rng, *shape, scale=1.0):
    return rng.standard_normal(shape) * scale


def _layer_check(name, forward, arrays: dict, backward, rng, verbose, rtol=RTOL, atol=ATOL):
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

    arrays = dict(x=_rand(rng, 2, 3, 5), w=_rand(rng, 5, 4), b=_rand(rng, 4))
    return _layer_check("linear", L.linear_forward, arrays, L.linear_backward, rng, verbose)


def check_embedding(rng, verbose=True):
    """Repeated token ids must accumulate."""
    from minibert import layers as L

    ids = np.array([[1, 3, 3, 0], [3, 1, 2, 3]])  # id 3 appears four times
    segs = np.array([[0, 0, 1, 1], [0, 1, 1, 1]])
    arrays = dict(tok_emb=_rand(rng, 5, 6), seg_emb=_rand(rng, 2, 6), pos_emb=_rand(rng, 7, 6))
    fwd = lambda **a: L.embedding_forward(ids, segs, **a)  # noqa: E731
    return _layer_check("embedding (repeated ids)", fwd, arrays, L.embedding_backward, rng, verbose)


def check_layernorm(rng, verbose=True):
    from minibert import layers as L

    arrays = dict(x=_rand(rng, 2, 3, 8), w=1 + 0.1 * _rand(rng, 8), b=0.1 * _rand(rng, 8))
    return _layer_check("layernorm", L.layernorm_forward, arrays, L.layernorm_backward, rng, verbose)


def check_gelu(rng, verbose=True):
    from minibert import layers as L

    checks = []
    for approx in ("none", "tanh"):
        fwd = lambda x, approx=approx: L.gelu_forward(x, approximate=approx)  # noqa: E731
        arrays = dict(x=_rand(rng, 4, 7, scale=2.0))
        checks += _layer_check(f"gelu ({'erf' if approx == 'none' else 'tanh'})", fwd, arrays,
                               L.gelu_backward, rng, verbose)
    return checks


def check_dropout(rng, verbose=True):
    """The mask is fixed by re-seeding the rng on every forward call."""
    from minibert import layers as L

    fwd = lambda x: L.dropout_forward(x, 0.3, np.random.default_rng(7))  # noqa: E731
    return _layer_check("dropout (fixed mask)", fwd, dict(x=_rand(rng, 3, 9)), L.dropout_backward, rng, verbose)


def check_attention(rng, verbose=True, ops=None):
    """Padded keys, including a row whose every key but one is padding."""
    from minibert import layers as L

    ops = ops or L
    B, NH, T, HS = 2, 2, 5, 4
    mask = np.ones((B, T))
    mask[0, 3:] = 0  # sequence 0: two padded keys
    mask[1, 1:] = 0  # sequence 1: only its first key is real
    arrays = dict(q=_rand(rng, B, NH, T, HS), k=_rand(rng, B, NH, T, HS), v=_rand(rng, B, NH, T, HS))
    fwd = lambda **a: ops.attention_forward(a["q"], a["k"], a["v"], mask)  # noqa: E731
    checks = _layer_check("attention (padded keys)", fwd, arrays, ops.attention_backward, rng, verbose)
    fwd_d = lambda **a: ops.attention_forward(a["q"], a["k"], a["v"], mask, 0.2, np.random.default_rng(3))  # noqa: E731
    checks += _layer_check("attention (dropout, fixed mask)", fwd_d, arrays, ops.attention_backward, rng, verbose)
    return checks


def check_cross_entropy(rng, verbose=True):
    """Ignored targets contribute nothing and are not counted in the mean."""
    from minibert import layers as L

    targets = np.array([[2, -100, 0], [4, 1, -100]])
    fwd = lambda logits: L.cross_entropy_forward(logits, targets)  # noqa: E731
    return _layer_check("cross-entropy (ignored targets)", fwd, dict(logits=_rand(rng, 2, 3, 5)),
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


def check_albert(rng, verbose=True, samples_per_tensor=3, rtol=1e-5, atol=1e-8):
    """ALBERT in float64 on the backend of get_ops(): (1) the factorised embedding, every entry;
    (2) the encoder whose one block runs 3 times, sampled entries of every shared tensor (their
    gradient is the sum over the layers); (3) the whole AlbertForPreTraining, sampled entries of
    every tensor. Parameters are random, away from the init's zeros and ones."""
    from minibert.backend import get_ops
    from minibert.family import albert

    ops = get_ops()
    cfg = albert.AlbertConfig(vocab_size=30, embedding_size=6, hidden_size=8, num_hidden_layers=3,
                              num_attention_heads=2, intermediate_size=16, max_position_embeddings=12)
    params = {k: v + 0.1 * rng.standard_normal(v.shape)
              for k, v in albert.init_params(cfg, int(rng.integers(1 << 30)), np.float64).items()}
    ids = np.array([[2, 7, 7, 9, 3, 0], [2, 9, 5, 7, 4, 3]])  # id 7 repeats: its rows must accumulate
    seg = np.array([[0, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 1]])
    mask = np.array([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]])
    checks = []
    # (1) factorised embedding: (V, E) lookups -> LayerNorm(E) -> E -> C
    out, cache = albert.factorized_embedding_forward(params, cfg, ids, seg, ops=ops)  # (B, T, C)
    dout = rng.standard_normal(out.shape)
    grads = albert.factorized_embedding_backward(dout, cache, {}, ops)
    for name in ("tok_emb", "seg_emb", "pos_emb", "emb_ln.w", "emb_ln.b", "emb_map.w", "emb_map.b"):
        num = numerical_grad(lambda: albert.factorized_embedding_forward(params, cfg, ids, seg, ops=ops)[0],
                             params[name], dout)
        checks.append(compare(f"albert embedding: {name}", grads[name], num, rtol, atol, verbose))
    # (2) the shared-block encoder
    encode = lambda: albert.encoder_forward(params, cfg, ids, seg, mask, ops=ops)[0]  # noqa: E731
    out, cache = albert.encoder_forward(params, cfg, ids, seg, mask, ops=ops)  # (B, T, C)
    dout = rng.standard_normal(out.shape)
    grads = albert.encoder_backward(dout, cache, cfg, {}, ops)
    for part in albert.BLOCK_PARTS:
        name = albert.BLOCK + part
        idx = sampled_indices(params[name].shape, samples_per_tensor, rng)
        num = numerical_grad(encode, params[name], dout, indices=idx)
        sel = tuple(np.array(i) for i in zip(*idx))
        checks.append(compare(f"albert encoder (shared x3): {name}", grads[name][sel], num[sel], rtol, atol, verbose))
    # (3) the whole model: MLM + SOP loss
    model = albert.AlbertForPreTraining(cfg, dtype=np.float64, params=params)
    batch = random_batch(cfg, B=3, T=8, P=3, rng=rng)
    _, grads = model.loss_and_grads(batch)
    return checks + sampled_loss_checks("albert model", lambda: model.loss_and_grads(batch, compute_grads=False)[0],
                                        model.params, grads, rng, samples_per_tensor, rtol, atol, verbose)


def check_electra(rng, verbose=True, samples_per_tensor=3, rtol=1e-5, atol=1e-8):
    """ELECTRA in float64 on the backend of get_ops(): (1) the RTD loss (BCE with logits, mean over
    the real tokens), every entry; (2) the discriminator alone, sampled entries of every tensor;
    (3) the joint loss MLM + 50 * RTD of generator and discriminator, sampled entries of every
    tensor of joint_params, the shared embeddings included (their gradient is the sum of the two
    networks' parts). The sampling is FIXED: every evaluation draws the generator's samples from a
    fresh rng with the same seed, and each one is asserted to give the unperturbed samples (the
    loss is piecewise smooth in the parameters; a step of 1e-5 does not cross a sampling boundary).
    Generator E 6 -> C 8, discriminator E 6 -> C 12 (each its own projection)."""
    from minibert.backend import get_ops
    from minibert.family import electra

    ops = get_ops()
    common = dict(vocab_size=20, embedding_size=6, max_position_embeddings=12)
    gen_cfg = electra.ElectraConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16,
                                    **common)
    disc_cfg = electra.ElectraConfig(hidden_size=12, num_hidden_layers=2, num_attention_heads=3, intermediate_size=20,
                                     hidden_act="gelu_new", **common)
    perturbed = lambda cfg, head: {k: v + 0.1 * rng.standard_normal(v.shape)  # noqa: E731 (away from 0s and 1s)
                                   for k, v in electra.init_params(cfg, head, int(rng.integers(1 << 30)),
                                                                   np.float64).items()}
    disc = perturbed(disc_cfg, "disc")
    gen = electra.tie_embeddings(perturbed(gen_cfg, "gen"), disc)
    checks = []
    # (1) the RTD loss on its own: padding in the last row
    logits, labels = 2 * rng.standard_normal((3, 5)), rng.integers(0, 2, (3, 5))  # (B, T) each
    mask = np.ones((3, 5), dtype=np.int64)  # (B, T)
    mask[2, 3:] = 0
    _, cache = electra.bce_with_logits_forward(logits, labels, mask)
    num = numerical_grad_scalar(lambda: electra.bce_with_logits_forward(logits, labels, mask)[0], logits)
    checks.append(compare("electra rtd loss: dlogits", electra.bce_with_logits_backward(1.0, cache), num, rtol, atol,
                          verbose))

    def sampled_check(tag, loss_fn, params, grads):
        for name, p in params.items():
            idx = sampled_indices(p.shape, samples_per_tensor, rng)
            num = numerical_grad_scalar(loss_fn, p, indices=idx)
            sel = tuple(np.array(i) for i in zip(*idx))
            checks.append(compare(f"{tag}: {name}", grads[name][sel], num[sel], rtol, atol, verbose))

    # (2) the discriminator with its RTD loss
    batch = random_batch(disc_cfg, B=3, T=8, P=3, rng=rng)
    model = electra.ElectraForPreTraining(disc_cfg, dtype=np.float64, params=disc)
    rtd_batch = {**batch, "labels": rng.integers(0, 2, batch["input_ids"].shape)}
    _, grads = model.loss_and_grads(rtd_batch)
    sampled_check("electra discriminator", lambda: model.loss_and_grads(rtd_batch, compute_grads=False)[0],
                  disc, grads)
    # (3) the joint model, with a fixed sampling
    seed = int(rng.integers(1 << 30))
    _, grads, _ = electra.electra_forward_backward(gen, disc, gen_cfg, disc_cfg, batch, np.random.default_rng(seed),
                                                   ops=ops)
    base = electra.electra_forward(gen, disc, gen_cfg, disc_cfg, batch, np.random.default_rng(seed), ops=ops)[2]

    def joint_loss():
        loss, _, cache = electra.electra_forward(gen, disc, gen_cfg, disc_cfg, batch, np.random.default_rng(seed),
                                                 ops=ops)
        if not np.array_equal(cache.sampled, base.sampled):  # exact: integer token ids
            raise AssertionError("a perturbation changed the generator's samples; the check needs them fixed")
        return loss

    sampled_check("electra joint", joint_loss, electra.joint_params(gen, disc), grads)
    return checks


def t5_batch(cfg, rng, B=3, T=7, S=5):
    """A random encoder-decoder batch with padding in the last row of both sides."""
    input_ids = rng.integers(5, cfg.vocab_size, size=(B, T))  # (B, T)
    attention_mask = np.ones((B, T), dtype=np.int64)
    attention_mask[-1, T - 2:] = 0
    labels = rng.integers(5, cfg.vocab_size, size=(B, S))  # (B, S)
    decoder_input_ids = np.concatenate([np.full((B, 1), 2), labels[:, :-1]], axis=1)  # (B, S)
    decoder_attention_mask = np.ones((B, S), dtype=np.int64)
    decoder_attention_mask[-1, S - 2:] = 0
    labels[-1, S - 2:] = -100
    return dict(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids,
                decoder_attention_mask=decoder_attention_mask, labels=labels)


def _t5_setup(rng):
    from minibert.family.t5 import T5Config, init_params

    cfg = T5Config(vocab_size=40, hidden_size=16, num_layers=2, num_decoder_layers=2, num_heads=2,
                   intermediate_size=32, max_position_embeddings=16, num_sentinels=5)
    params = init_params(cfg, seed=int(rng.integers(1 << 30)), dtype=np.float64)
    for p in params.values():  # away from the init's unit LayerNorms and zero biases
        p += 0.1 * rng.standard_normal(p.shape)
    return cfg, params


def check_cross_attention(rng, verbose=True):
    """T5's cross-attention core: S = 3 decoder queries over T = 5 encoder keys, two of them
    padding in sequence 0 and all but the first in sequence 1."""
    from minibert.family import t5

    B, NH, S, T, HS = 2, 2, 3, 5, 4
    enc_mask = np.ones((B, T))  # (B, T)
    enc_mask[0, 3:] = 0
    enc_mask[1, 1:] = 0
    arrays = dict(q=_rand(rng, B, NH, S, HS), k=_rand(rng, B, NH, T, HS), v=_rand(rng, B, NH, T, HS))
    fwd = lambda **a: t5.cross_attention_forward(a["q"], a["k"], a["v"], enc_mask)  # noqa: E731
    return _layer_check("t5 cross-attention (padded keys)", fwd, arrays, t5.cross_attention_backward, rng, verbose)


def check_t5_decoder_block(rng, verbose=True, ops=None, samples_per_tensor=4):
    """One decoder block (causal self-attention, cross-attention, FFN): every entry of the
    gradients into the block input and into the encoder output, sampled entries of every
    parameter, with padding on both sides."""
    from minibert.backend import get_ops
    from minibert.family import t5

    ops = ops or get_ops()
    cfg, params = _t5_setup(rng)
    B, S, T, C = 2, 4, 5, cfg.hidden_size
    y, enc_out = _rand(rng, B, S, C), _rand(rng, B, T, C)
    dec_mask, enc_mask = np.ones((B, S)), np.ones((B, T))
    dec_mask[1, 3:], enc_mask[1, 3:] = 0, 0
    fwd = lambda: t5.decoder_block_forward(params, cfg, 1, y, dec_mask, enc_out, enc_mask, ops)[0]  # noqa: E731
    out, cache = t5.decoder_block_forward(params, cfg, 1, y, dec_mask, enc_out, enc_mask, ops)
    dout = rng.standard_normal(out.shape)
    grads = {}
    dy, denc = t5.decoder_block_backward(dout, cache, cfg, 1, grads, ops)
    checks = [compare("t5 decoder block: dy", dy, numerical_grad(fwd, y, dout), verbose=verbose),
              compare("t5 decoder block: denc_out", denc, numerical_grad(fwd, enc_out, dout), verbose=verbose)]
    for name in sorted(grads):
        idx = sampled_indices(params[name].shape, samples_per_tensor, rng)
        num = numerical_grad(fwd, params[name], dout, indices=idx)
        sel = tuple(np.array(i) for i in zip(*idx))
        checks.append(compare(f"t5 decoder block: {name}", grads[name][sel], num[sel], verbose=verbose))
    return checks


def check_t5(rng, verbose=True, ops=None, samples_per_tensor=3, rtol=1e-5, atol=1e-8):
    """The whole encoder-decoder (teacher-forced target-token loss): sampled entries of every
    parameter tensor, the shared tok_emb (encoder input, decoder input, output layer) included."""
    from minibert.backend import get_ops
    from minibert.family import t5

    ops = ops or get_ops()
    cfg, params = _t5_setup(rng)
    batch = t5_batch(cfg, rng)
    _, _, grads = t5.t5_loss_and_grads(params, cfg, batch, ops)
    if list(grads) != list(params):
        raise AssertionError(f"t5 grads keys differ from params: {sorted(set(grads) ^ set(params))}")
    checks = []
    for name, p in params.items():
        idx = sampled_indices(p.shape, samples_per_tensor, rng)
        if name == "tok_emb":  # rows read by the encoder, the decoder and only the output layer
            idx = sorted(set(idx) | {(int(batch["input_ids"][0, 1]), 0), (int(batch["decoder_input_ids"][0, 2]), 1),
                                      (cfg.vocab_size - 1, 2)})
        num = numerical_grad_scalar(lambda: t5.t5_forward(params, cfg, batch, ops)[0], p, indices=idx)
        sel = tuple(np.array(i) for i in zip(*idx))
        checks.append(compare(f"t5: {name}", grads[name][sel], num[sel], rtol, atol, verbose))
    return checks


def check_heads(rng, verbose=True):
    """The fine-tuning heads' own layers: dropout -> linear (with a fixed dropout mask) and MSE."""
    from minibert.finetune import heads

    x, w, b = _rand(rng, 5, 6), _rand(rng, 6, 3), _rand(rng, 3)
    mask_rng = lambda: np.random.default_rng(7)  # noqa: E731 (same dropout mask every call)
    checks = _layer_check("classifier (dropout 0.3 -> linear)",
                          lambda x, w, b: heads.classifier_forward(x, w, b, 0.3, mask_rng()),
                          dict(x=x, w=w, b=b), lambda d, c: heads.classifier_backward(d, c), rng, verbose)
    pred, target = _rand(rng, 7), _rand(rng, 7)
    loss, c = heads.mse_forward(pred, target)
    num = numerical_grad_scalar(lambda: heads.mse_forward(pred, target)[0], pred)
    checks.append(compare("mse: dpred", heads.mse_backward(1.0, c), num, verbose=verbose))
    return checks


def task_batch(task, cfg, rng, B=3, T=8, num_labels=3, num_choices=3):
    """A random fine-tuning batch for one of the four task shapes, with padding in the last row."""
    shape = (B, num_choices, T) if task == "choice" else (B, T)
    ids = rng.integers(5, cfg.vocab_size, size=shape)
    mask = np.ones(shape, dtype=np.int64)
    mask[..., -1, T - 3:] = 0  # the last row (last choice) is padded
    ids *= mask
    seg = np.zeros(shape, dtype=np.int64)
    seg[..., T // 2:] = 1
    seg *= mask
    batch = dict(input_ids=ids, input_mask=mask, segment_ids=seg)
    if task == "sequence":
        batch["labels"] = rng.standard_normal(B) if num_labels == 1 else rng.integers(0, num_labels, B)
    elif task == "token":
        labels = rng.integers(0, num_labels, size=(B, T))
        labels[mask == 0] = -100
        labels[:, 0] = -100  # [CLS]
        labels[0, 2] = -100  # a later sub-token of a word
        batch["labels"] = labels
    elif task == "choice":
        batch["labels"] = rng.integers(0, num_choices, B)
    else:  # qa; one start outside the window (ignored, as transformers)
        batch["start_positions"] = np.array([1, T + 4, 2])[:B]
        batch["end_positions"] = np.array([3, 2, 2])[:B]
    return batch


def check_task_models(rng, verbose=True, samples_per_tensor=3, rtol=1e-5, atol=1e-8):
    """Each fine-tuning class, whole, in float64: sampled entries of every parameter tensor against
    centered differences of the loss (dropout off; the heads' dropout is checked in check_heads)."""
    from minibert.finetune.models import (BertForMultipleChoice, BertForQuestionAnswering,
                                          BertForSequenceClassification, BertForTokenClassification)
    from minibert.model import BertConfig

    cfg = BertConfig(vocab_size=40, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=16, max_position_embeddings=16, type_vocab_size=2)
    seed = int(rng.integers(1 << 30))
    models = [("sequence", BertForSequenceClassification(cfg, 3, seed, np.float64)),
              ("regression", BertForSequenceClassification(cfg, 1, seed, np.float64)),
              ("token", BertForTokenClassification(cfg, 3, seed, np.float64)),
              ("choice", BertForMultipleChoice(cfg, seed, np.float64)),
              ("qa", BertForQuestionAnswering(cfg, seed, np.float64)),
              # left to right, as the LTR ablation fine-tunes (the pooled heads read the last real token)
              ("sequence, causal", BertForSequenceClassification(cfg, 3, seed, np.float64).make_causal()),
              ("token, causal", BertForTokenClassification(cfg, 3, seed, np.float64).make_causal()),
              ("choice, causal", BertForMultipleChoice(cfg, seed, np.float64).make_causal()),
              ("sequence, causal + BiLSTM", BertForSequenceClassification(cfg, 3, seed, np.float64).make_causal(True)),
              ("token, causal + BiLSTM", BertForTokenClassification(cfg, 3, seed, np.float64).make_causal(True))]
    checks = []
    for label, model in models:
        checks += check_task_model(f"{type(model).__name__[7:]} ({label})", model, cfg, rng, verbose,
                                   samples_per_tensor, rtol, atol)
    return checks


def check_task_model(label, model, cfg, rng, verbose=True, samples_per_tensor=3, rtol=1e-5, atol=1e-8):
    """One fine-tuning model (any encoder's), whole, in float64 with dropout off: its parameters
    moved away from the init's unit LayerNorms and zero biases, a task_batch, and sampled entries
    of every parameter tensor against centered differences of the loss; checks named `label: name`."""
    for p in model.params.values():
        p += 0.1 * rng.standard_normal(p.shape)
    batch = task_batch(model.task, cfg, rng, num_labels=model.config.num_labels)
    _, grads = model.loss_and_grads(batch)
    return sampled_loss_checks(label, lambda: model.loss_and_grads(batch, compute_grads=False)[0], model.params,
                               grads, rng, samples_per_tensor, rtol, atol, verbose)


def check_electra_finetune(rng, verbose=True, samples_per_tensor=3, rtol=1e-5, atol=1e-8):
    """ELECTRA's fine-tuning classes (family/electra_finetune.py) in float64 on the backend of
    get_ops(): (1) the new layer, dropout -> dense -> GELU (the classification head's first half and
    the multiple-choice summary), with a fixed dropout mask, exact and tanh GELU; (2) each class
    whole, sampled entries of every tensor (E 6 -> C 8, padding in the last row, dropout off)."""
    from minibert.backend import get_ops
    from minibert.family import electra_finetune as ef

    ops = get_ops()
    mask_rng = lambda: np.random.default_rng(5)  # noqa: E731 (same dropout mask every call)
    x, w, b = _rand(rng, 5, 8), _rand(rng, 8, 8), _rand(rng, 8)
    checks = []
    for approx, p in (("none", 0.3), ("tanh", 0.0)):
        checks += _layer_check(f"electra dense -> gelu ({approx}, dropout {p})",
                               lambda x, w, b: ef.dense_act_forward(x, w, b, p, mask_rng(), approx, ops),
                               dict(x=x, w=w, b=b), lambda d, c: ef.dense_act_backward(d, c, ops), rng, verbose, rtol, atol)
    cfg = ef.ElectraConfig(vocab_size=40, embedding_size=6, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=16, max_position_embeddings=16, hidden_act="gelu_new")
    seed = int(rng.integers(1 << 30))
    models = [("sequence", ef.ElectraForSequenceClassification(cfg, 3, seed, np.float64)),
              ("regression", ef.ElectraForSequenceClassification(cfg, 1, seed, np.float64)),
              ("token", ef.ElectraForTokenClassification(cfg, 3, seed, np.float64)),
              ("choice", ef.ElectraForMultipleChoice(cfg, seed, np.float64)),
              ("qa", ef.ElectraForQuestionAnswering(cfg, seed, np.float64))]
    for label, model in models:
        checks += check_task_model(f"{type(model).__name__} ({label})", model, cfg, rng, verbose, samples_per_tensor,
                                   rtol, atol)
    return checks


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
    arrays = dict(q=_rand(rng, B, NH, T, HS), k=_rand(rng, B, NH, T, HS),
                  v=_rand(rng, B, NH, T, HS))  # 3 x (B, NH, T, HS)
    fwd = lambda **a: ops.attention_forward(a["q"], a["k"], a["v"], mask, causal=True)  # noqa: E731
    checks = _layer_check(f"causal attention [{tag}] (padded keys)", fwd, arrays, ops.attention_backward, rng,
                          verbose)
    fwd_d = lambda **a: ops.attention_forward(a["q"], a["k"], a["v"], mask, 0.2, np.random.default_rng(3),  # noqa: E731
                                              causal=True)
    checks += _layer_check(f"causal attention [{tag}] (dropout, fixed mask)", fwd_d, arrays, ops.attention_backward,
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


def check_bilstm(rng, verbose=True):
    """The BiLSTM tagger's layer (finetune/bilstm.py): x and the six tensors of both directions,
    rows padded after 4 tokens and after 1, random parameters and upstream gradient."""
    from minibert.finetune import bilstm

    B, T, D, H = 3, 6, 5, 4
    mask = np.ones((B, T))
    mask[1, 4:] = 0
    mask[2, 1:] = 0
    shapes = bilstm.bilstm_shapes(D, H, "lstm")
    keys = list(shapes)

    def forward(x, **p):
        return bilstm.bilstm_forward(x, mask, {k: p[k.replace(".", "_")] for k in keys})

    def backward(dout, cache):
        dx, grads = bilstm.bilstm_backward(dout, cache)
        return (dx, *(grads[k] for k in keys))

    arrays = {"x": _rand(rng, B, T, D)}
    arrays.update({k.replace(".", "_"): _rand(rng, *shapes[k], scale=0.5) for k in keys})
    return _layer_check("bilstm", forward, arrays, backward, rng, verbose)


def all_checks(seed=0, verbose=True):
    from minibert import kernels, layers

    rng = np.random.default_rng(seed)
    checks = []
    for fn in LAYER_CHECKS:
        checks += fn(rng, verbose)
    checks += check_model(rng, verbose)
    checks += check_heads(rng, verbose)
    checks += check_task_models(rng, verbose)
    # the pretraining variants (appended: the checks above keep their random draws)
    for ops in (layers, kernels):
        checks += check_causal_attention(rng, verbose, ops)
    checks += check_objective_model(rng, verbose, "ltr")
    checks += check_objective_model(rng, verbose, "mlm")
    checks += check_albert(rng, verbose)  # ALBERT (appended, as above)
    checks += check_electra(rng, verbose)  # ELECTRA (appended, as above)
    checks += check_electra_finetune(rng, verbose)  # ELECTRA's fine-tuning classes (appended, as above)
    checks += check_cross_attention(rng, verbose)  # T5 (appended, as above)
    checks += check_t5_decoder_block(rng, verbose)
    checks += check_t5(rng, verbose)
    checks += check_bilstm(rng, verbose)  # the feature-based BiLSTM tagger (appended, as above)
    return checks


def cli(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m minibert gradcheck",
                                 description="Print every float64 gradient check (layers and whole model).")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    from minibert.backend import backend_name

    print(f"backend: {backend_name()}   pass rule: |a - n| <= {ATOL:g} + {RTOL:g} * |n|  (float64)")
    print("CS231n reading of max_rel: < 1e-7 good, 1e-7..1e-4 look closer, > 1e-2 wrong")
    print(HEADER)
    checks = all_checks(args.seed)
    failed = [c.name for c in checks if not c]
    print(f"{len(checks) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0
