"""Gradient checks of the BERT family's models (ALBERT, ELECTRA, T5), in float64 on the backend of
get_ops(): the layers each model adds, then every parameter tensor of the whole model. `python -m
minibert gradcheck` prints them with the rest (tools/gradcheck_table.py)."""
from __future__ import annotations

import numpy as np

from minibert.analysis.gradcheck import (compare, layer_check, numerical_grad, numerical_grad_scalar, rand_array, random_batch,
                                sampled_indices, sampled_loss_checks)
from minibert.model import embeddings_backward, embeddings_forward


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
    out, cache = embeddings_forward(params, cfg, ids, seg, ops=ops)  # (B, T, C)
    dout = rng.standard_normal(out.shape)
    grads = embeddings_backward(dout, cache, {}, ops)
    for name in ("tok_emb", "seg_emb", "pos_emb", "emb_ln.w", "emb_ln.b", "emb_map.w", "emb_map.b"):
        num = numerical_grad(lambda: embeddings_forward(params, cfg, ids, seg, ops=ops)[0],
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


def t5_setup(rng):
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
    arrays = dict(q=rand_array(rng, B, NH, S, HS), k=rand_array(rng, B, NH, T, HS), v=rand_array(rng, B, NH, T, HS))
    fwd = lambda **a: t5.cross_attention_forward(a["q"], a["k"], a["v"], enc_mask)  # noqa: E731
    return layer_check("t5 cross-attention (padded keys)", fwd, arrays, t5.cross_attention_backward, rng, verbose)


def check_t5_decoder_block(rng, verbose=True, ops=None, samples_per_tensor=4):
    """One decoder block (causal self-attention, cross-attention, FFN): every entry of the
    gradients into the block input and into the encoder output, sampled entries of every
    parameter, with padding on both sides."""
    from minibert.backend import get_ops
    from minibert.family import t5

    ops = ops or get_ops()
    cfg, params = t5_setup(rng)
    B, S, T, C = 2, 4, 5, cfg.hidden_size
    y, enc_out = rand_array(rng, B, S, C), rand_array(rng, B, T, C)
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
    cfg, params = t5_setup(rng)
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
