"""The whole BERT: gradients, sanity checks before learning, and clear errors on bad input."""
import functools
import math

import numpy as np
import pytest

from minibert.analysis import gradcheck as gc
from minibert import layers
from minibert.backend import get_ops
from minibert.bert import BertForPreTraining
from minibert.model import (BertConfig, bert_backward, bert_forward, block_forward, blocks_forward, dense_act_forward,
                            embeddings_backward, embeddings_forward, init_from_shapes, mlm_transform_backward,
                            mlm_transform_forward, param_shapes, pooler_backward, pooler_forward,
                            self_attention_forward)

TINY = dict(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=32, max_position_embeddings=16)


def tiny_model(dtype=np.float64, seed=0, **over):
    return BertForPreTraining(BertConfig(**{**TINY, **over}), seed=seed, dtype=dtype)


def test_model_grads_have_the_keys_and_shapes_of_params():
    model = tiny_model()
    batch = gc.random_batch(model.config, B=2, T=8, P=3, rng=np.random.default_rng(0))
    loss, grads = model.loss_and_grads(batch)
    assert list(grads) == list(model.params)
    for name, p in model.params.items():
        assert grads[name].shape == p.shape and grads[name].dtype == p.dtype, name
    assert set(model.params) == set(param_shapes(model.config))


def test_model_backward_matches_numerical_every_tensor():
    """Sampled entries of every parameter tensor, tied word embeddings included."""
    checks = gc.check_model(np.random.default_rng(7), verbose=False, samples_per_tensor=6)
    assert len(checks) == len(param_shapes(BertConfig(**TINY)))
    failed = [c.row() for c in checks if not c]
    assert not failed, "\n".join(failed)


def test_tied_decoder_grad_is_input_side_plus_output_side():
    """tok_emb gets gradient from the embedding lookup and from the MLM decoder; both count."""
    model = tiny_model()
    rng = np.random.default_rng(3)
    for p in model.params.values():
        p += 0.1 * rng.standard_normal(p.shape)
    batch = gc.random_batch(model.config, B=2, T=8, P=2, rng=rng)
    _, grads = model.loss_and_grads(batch)
    used_in_input = int(batch["input_ids"][0, 1])
    unused = sorted(set(range(5, 50)) - set(batch["input_ids"].ravel().tolist()))[0]
    for row in (used_in_input, unused):  # unused rows still get the decoder's softmax gradient
        idx = [(row, j) for j in range(4)]
        num = gc.numerical_grad_scalar(lambda: model.loss_and_grads(batch, compute_grads=False)[0],
                                       model.params["tok_emb"], indices=idx)
        assert gc.compare(f"tok_emb row {row}", grads["tok_emb"][row, :4], num[row, :4], verbose=False)
        assert np.abs(grads["tok_emb"][row]).max() > 0


def _random_params(shapes, seed):
    """Random, non-trivial float64 parameters: LayerNorm w near 1, everything else near N(0, 0.1^2)."""
    rng = np.random.default_rng(seed)
    return {k: v + 0.1 * rng.standard_normal(v.shape)
            for k, v in init_from_shapes(shapes, 0.5, seed, np.float64).items()}


@pytest.mark.parametrize("act", [None, "gelu"], ids=["hidden_act", "exact-gelu"])
def test_mlm_transform_backward_matches_numerical(act):
    """The MLM head on E-wide tied embeddings (E != C, as ALBERT's), with hidden_act "gelu_new" or,
    as ELECTRA's generator passes, the exact GELU; tok_emb gets only the decoder's side here."""
    cfg = BertConfig(**{**TINY, "hidden_act": "gelu_new"})
    V, C, E, M = cfg.vocab_size, cfg.hidden_size, 6, 5
    params = _random_params({"tok_emb": (V, E), "mlm.dense.w": (C, E), "mlm.dense.b": (E,), "mlm.ln.w": (E,),
                             "mlm.ln.b": (E,), "mlm.bias": (V,)}, 11)
    rng = np.random.default_rng(12)
    h = rng.standard_normal((M, C))  # (M, C)
    logits, cache = mlm_transform_forward(params, cfg, h, layers, act)  # (M, V)
    other, _ = mlm_transform_forward(params, cfg, h, layers, "gelu" if act is None else None)  # (M, V)
    assert np.abs(logits - other).max() > 1e-6  # the activation is the one asked for
    dlogits = rng.standard_normal(logits.shape)  # (M, V)
    grads = {}
    dh = mlm_transform_backward(dlogits, cache, grads, layers)  # (M, C)
    assert sorted(grads) == sorted(params)
    f = lambda: mlm_transform_forward(params, cfg, h, layers, act)[0]  # noqa: E731
    assert gc.compare("dh", dh, gc.numerical_grad(f, h, dlogits), verbose=False)
    for name, x in params.items():
        assert gc.compare(name, grads[name], gc.numerical_grad(f, x, dlogits), verbose=False)


def test_pooler_backward_matches_numerical():
    params = _random_params({"pool.w": (16, 16), "pool.b": (16,)}, 13)
    rng = np.random.default_rng(14)
    seq = rng.standard_normal((3, 5, 16))  # (B, T, C)
    pooled, cache = pooler_forward(params, seq, layers)  # (B, C)
    dpooled = rng.standard_normal(pooled.shape)  # (B, C)
    grads = {}
    dcls = pooler_backward(dpooled, cache, grads, layers)  # (B, C)
    f = lambda: pooler_forward(params, seq, layers)[0]  # noqa: E731
    assert gc.compare("d seq[:, 0]", dcls, gc.numerical_grad(f, seq, dpooled)[:, 0], verbose=False)
    for name, x in params.items():
        assert gc.compare(name, grads[name], gc.numerical_grad(f, x, dpooled), verbose=False)


def test_the_pooler_is_the_pooled_heads_layer_with_tanh_and_no_dropout():
    """One pooler: BERT's is dense_act_forward on the [CLS] rows, tanh and no dropout, the same
    layer the fine-tuning heads' Pool runs."""
    params = _random_params({"pool.w": (16, 16), "pool.b": (16,)}, 15)
    seq = np.random.default_rng(16).standard_normal((3, 5, 16))  # (B, T, C)
    pooled, _ = pooler_forward(params, seq, layers)  # (B, C)
    np.testing.assert_allclose(pooled, np.tanh(seq[:, 0] @ params["pool.w"] + params["pool.b"]), rtol=1e-12)
    same, _ = dense_act_forward(seq[:, 0], params["pool.w"], params["pool.b"], 0.0, None, "tanh", layers)
    np.testing.assert_array_equal(pooled, same)


@pytest.mark.parametrize("causal", [False, True])
def test_blocks_forward_returns_every_hidden_state_on_request(causal):
    """states=True: the input and each block's output (L + 1 arrays), block l's output computed
    from state l by block l; without it the result is the last state and the caches, as before."""
    cfg = BertConfig(**{**TINY, "num_hidden_layers": 3})
    model = BertForPreTraining(cfg, seed=3, dtype=np.float64)
    rng = np.random.default_rng(17)
    x = rng.standard_normal((2, 6, 16))  # (B, T, C)
    mask = np.ones((2, 6), dtype=np.int64)
    mask[1, 4:] = 0
    last, caches, states = blocks_forward(model.params, cfg, x, mask, causal=causal, states=True)
    assert len(states) == cfg.num_hidden_layers + 1 and len(caches) == cfg.num_hidden_layers
    assert states[0] is x and states[-1] is last
    attend = functools.partial(self_attention_forward, causal=causal)
    for l in range(cfg.num_hidden_layers):
        np.testing.assert_array_equal(block_forward(model.params, cfg, l, states[l], mask, None, layers, attend)[0],
                                      states[l + 1])
    plain, plain_caches = blocks_forward(model.params, cfg, x, mask, causal=causal)
    np.testing.assert_array_equal(plain, last)
    assert len(plain_caches) == cfg.num_hidden_layers


@pytest.mark.parametrize("projection", [False, True], ids=["E==C", "E->C"])
@pytest.mark.parametrize("packed", [False, True], ids=["grid", "real-rows"])
def test_embeddings_backward_matches_numerical(projection, packed):
    """BERT's embedding (no emb_map) and the factorised one (emb_map, ALBERT's and ELECTRA's), on
    the (B, T) grid or on the real tokens' rows (the fast path); token 7 repeats."""
    cfg = BertConfig(**{**TINY, "hidden_dropout_prob": 0.0})
    E = 6 if projection else cfg.hidden_size
    shapes = {"tok_emb": (cfg.vocab_size, E), "pos_emb": (cfg.max_position_embeddings, E),
              "seg_emb": (cfg.type_vocab_size, E), "emb_ln.w": (E,), "emb_ln.b": (E,)}
    if projection:
        shapes.update({"emb_map.w": (E, cfg.hidden_size), "emb_map.b": (cfg.hidden_size,)})
    params = _random_params(shapes, 15)
    ids, seg = np.array([[2, 7, 7, 3, 0], [2, 9, 5, 7, 3]]), np.array([[0, 0, 1, 1, 0], [0, 0, 0, 1, 1]])
    keep = np.flatnonzero(ids.reshape(-1) > 0) if packed else None  # (N,)
    x, cache = embeddings_forward(params, cfg, ids, seg, None, layers, keep)  # (B, T, C) or (N, C)
    assert x.shape == ((keep.size,) if packed else ids.shape) + (cfg.hidden_size,)
    dx = np.random.default_rng(16).standard_normal(x.shape)
    grads = embeddings_backward(dx, cache, {}, layers)
    assert sorted(grads) == sorted(params)
    f = lambda: embeddings_forward(params, cfg, ids, seg, None, layers, keep)[0]  # noqa: E731
    for name, p in params.items():
        assert gc.compare(name, grads[name], gc.numerical_grad(f, p, dx), verbose=False)


def test_init_is_truncated_normal_with_zero_biases_and_unit_layernorm():
    model = BertForPreTraining(BertConfig(**{**TINY, "vocab_size": 500}), seed=1)
    p = model.params
    assert p["tok_emb"].dtype == np.float32
    for name in ("tok_emb", "pos_emb", "h0.attn.qkv.w", "h1.ffn.in.w", "nsp.w"):
        assert np.abs(p[name]).max() <= 0.04 + 1e-7, name
        assert 0.012 < p[name].std() < 0.02, name  # a 2-sigma truncated normal has std 0.88 * 0.02
    for name in ("h0.attn.qkv.b", "pool.b", "mlm.bias", "nsp.b", "emb_ln.b", "h1.ln2.b"):
        assert not p[name].any(), name
    for name in ("emb_ln.w", "h0.ln1.w", "h1.ln2.w", "mlm.ln.w"):
        assert np.all(p[name] == 1.0), name
    assert not np.array_equal(BertForPreTraining(model.config, seed=2).params["tok_emb"], p["tok_emb"])


def test_model_initial_loss_is_log_vocab_plus_log_two():
    cfg = BertConfig(vocab_size=2000, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=32)
    model = BertForPreTraining(cfg, seed=0)
    batch = gc.random_batch(cfg, B=8, T=32, P=5, rng=np.random.default_rng(0))
    loss, _, m = model.loss_grads_metrics(batch, compute_grads=False)
    # 0.02-scale weights give near-uniform predictions: MLM ~ ln V, NSP ~ ln 2
    assert m.mlm_loss == pytest.approx(math.log(2000), abs=0.02)
    assert m.nsp_loss == pytest.approx(math.log(2), abs=0.02)
    assert loss == pytest.approx(math.log(2000) + math.log(2), abs=0.03)


def test_model_overfits_one_batch():
    from minibert.optim import AdamW

    model = tiny_model(dtype=np.float32)
    batch = gc.random_batch(model.config, B=4, T=12, P=3, rng=np.random.default_rng(0))
    opt = AdamW(model.params, weight_decay=0.0)
    first = None
    for step in range(300):
        loss, grads, metrics = model.loss_grads_metrics(batch)
        first = loss if first is None else first
        opt.step(model.params, grads, lr=3e-3)
    assert first > 4.0 and loss < 0.05, (first, loss)
    assert metrics.mlm_correct == metrics.mlm_count


def test_padding_changes_no_output_at_real_positions():
    model = tiny_model(seed=4)
    rng = np.random.default_rng(0)
    for p in model.params.values():
        p += 0.1 * rng.standard_normal(p.shape)
    ids = rng.integers(5, 50, size=(1, 6))
    short = model.forward(ids, np.array([[0, 0, 0, 1, 1, 1]]))
    padded_ids = np.concatenate([ids, [[0, 0, 0]]], axis=1)
    padded = model.forward(padded_ids, np.array([[0, 0, 0, 1, 1, 1, 0, 0, 0]]),
                           np.array([[1, 1, 1, 1, 1, 1, 0, 0, 0]]))
    np.testing.assert_allclose(padded.sequence_output[:, :6], short.sequence_output, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(padded.pooled_output, short.pooled_output, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(padded.nsp_logits, short.nsp_logits, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(padded.mlm_logits[:, :6], short.mlm_logits, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_unpadding_gives_the_same_loss_and_gradients(backend, monkeypatch):
    """bert_forward skips padding tokens in the per-token layers (unpad=True, the default) and
    skips unused prediction slots; against the full padded grid, loss and every gradient agree to
    float64 rounding. Rows 1 and 2 are padded (5 and 3 of 8 tokens), row 0 is not."""
    monkeypatch.setattr("minibert.backend.chosen", backend)
    model = tiny_model(seed=5)
    rng = np.random.default_rng(6)
    for p in model.params.values():
        p += 0.1 * rng.standard_normal(p.shape)
    batch = gc.random_batch(model.config, B=3, T=8, P=2, rng=rng)
    lengths = np.array([8, 3, 5])
    batch["input_mask"] = (np.arange(8)[None] < lengths[:, None]).astype(np.int64)  # (B, T)
    batch["input_ids"] = batch["input_ids"] * batch["input_mask"]
    batch["masked_lm_positions"] = np.array([[1, 0], [1, 2], [3, 4]])
    batch["masked_lm_weights"] = np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 1.0]])  # one unused slot
    ops = get_ops()
    out = {}
    for unpad in (False, True):
        loss, metrics, cache = bert_forward(model.params, model.config, batch, ops=ops, unpad=unpad)
        assert (cache[0].keep is not None) == unpad  # the fast path ran, or the reference
        seq = cache[2].sequence_output
        out[unpad] = loss, metrics, seq, bert_backward(model.params, model.config, cache, ops)
    m_unpad, m_full = out[True][1], out[False][1]
    assert m_unpad._replace(loss=0, mlm_loss=0, nsp_loss=0) == m_full._replace(loss=0, mlm_loss=0, nsp_loss=0)
    np.testing.assert_allclose(m_unpad[:3], m_full[:3], rtol=1e-13)  # loss, mlm_loss, nsp_loss
    assert out[True][0] == m_unpad.loss
    real = batch["input_mask"].astype(bool)
    np.testing.assert_allclose(out[True][2][real], out[False][2][real], rtol=1e-12, atol=1e-14)
    assert not out[True][2][~real].any()  # unpadded: padding rows are never computed
    for name in model.params:
        np.testing.assert_allclose(out[True][3][name], out[False][3][name], rtol=1e-10, atol=1e-14, err_msg=name)
    assert np.abs(out[True][3]["h0.ffn.in.w"]).max() > 1e-3  # the gradients compared are not zero


def test_forward_output_shapes_and_dropout_only_in_training():
    model = tiny_model(dtype=np.float32, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    ids = np.array([[2, 7, 9, 3], [2, 8, 3, 0]])
    out = model.forward(ids, attention_mask=np.array([[1, 1, 1, 1], [1, 1, 1, 0]]))
    assert out.sequence_output.shape == (2, 4, 16) and out.pooled_output.shape == (2, 16)
    assert out.mlm_logits.shape == (2, 4, 50) and out.nsp_logits.shape == (2, 2)
    assert out.sequence_output.dtype == np.float32
    again = model.forward(ids, attention_mask=np.array([[1, 1, 1, 1], [1, 1, 1, 0]]))
    np.testing.assert_array_equal(out.sequence_output, again.sequence_output)
    t1 = model.forward(ids, train=True, rng=np.random.default_rng(1)).sequence_output
    t1b = model.forward(ids, train=True, rng=np.random.default_rng(1)).sequence_output
    t2 = model.forward(ids, train=True, rng=np.random.default_rng(2)).sequence_output
    np.testing.assert_array_equal(t1, t1b)
    assert not np.allclose(t1, t2)
    with pytest.raises(ValueError, match="train=True needs rng"):
        model.forward(ids, train=True)


def test_loss_and_grads_with_dropout_matches_numerical_for_a_fixed_mask():
    model = tiny_model(hidden_dropout_prob=0.2, attention_probs_dropout_prob=0.2)
    rng = np.random.default_rng(5)
    for p in model.params.values():
        p += 0.1 * rng.standard_normal(p.shape)
    batch = gc.random_batch(model.config, B=2, T=6, P=2, rng=rng)
    f = lambda: model.loss_and_grads(batch, train=True, rng=np.random.default_rng(11), compute_grads=False)[0]  # noqa: E731
    _, grads = model.loss_and_grads(batch, train=True, rng=np.random.default_rng(11))
    for name in ("h0.attn.qkv.w", "h1.ffn.out.w", "emb_ln.w", "tok_emb"):
        idx = gc.sampled_indices(model.params[name].shape, 5, rng)
        num = gc.numerical_grad_scalar(f, model.params[name], indices=idx)
        sel = tuple(np.array(i) for i in zip(*idx))
        assert gc.compare(name, grads[name][sel], num[sel], verbose=False), name


def test_bad_inputs_raise_clear_errors():
    model = tiny_model()
    with pytest.raises(ValueError, match=r"token id 50 is outside the vocabulary \[0, 50\)"):
        model.forward(np.array([[1, 50]]))
    with pytest.raises(ValueError, match=r"token id -1 is outside"):
        model.forward(np.array([[1, -1]]))
    with pytest.raises(ValueError, match="sequence length 17 exceeds max_position_embeddings 16"):
        model.forward(np.ones((1, 17), dtype=int))
    with pytest.raises(ValueError, match="hidden_size 30 is not divisible by num_attention_heads 4"):
        BertConfig(hidden_size=30, num_attention_heads=4)
    with pytest.raises(ValueError, match=r"token_type_ids has shape \(1, 3\), expected \(1, 2\)"):
        model.forward(np.array([[1, 2]]), np.zeros((1, 3), int))
    with pytest.raises(ValueError, match=r"attention_mask has shape \(2, 2\), expected \(1, 2\)"):
        model.forward(np.array([[1, 2]]), attention_mask=np.ones((2, 2), int))
    with pytest.raises(ValueError, match="input_ids must be integers"):
        model.forward(np.array([[1.0, 2.0]]))
    with pytest.raises(ValueError, match="hidden_act 'relu' is not supported"):
        BertConfig(hidden_act="relu")
    batch = gc.random_batch(model.config, B=2, T=8, P=3, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"masked_lm_weights has shape \(2, 2\), expected \(2, 3\)"):
        model.loss_and_grads({**batch, "masked_lm_weights": np.ones((2, 2))})
    with pytest.raises(ValueError, match=r"masked_lm_positions contains 8, outside the sequence \[0, 8\)"):
        model.loss_and_grads({**batch, "masked_lm_positions": np.full((2, 3), 8)})
    with pytest.raises(ValueError, match="next_sentence_labels has 3 entries, expected 2"):
        model.loss_and_grads({**batch, "next_sentence_labels": np.zeros(3, int)})
    with pytest.raises(ValueError, match=r"batch is missing \['masked_lm_ids'\]"):
        model.loss_and_grads({k: v for k, v in batch.items() if k != "masked_lm_ids"})
    # random_batch pads the last two tokens of sequence 1; a real prediction there is an error
    at_pad = batch["masked_lm_positions"].copy()
    at_pad[1, 2] = 7
    with pytest.raises(ValueError, match=r"masked_lm_positions\[1, 2\] = 7 is padding \(input_mask 0\)"):
        model.loss_and_grads({**batch, "masked_lm_positions": at_pad})
    no_cls = batch["input_mask"].copy()
    no_cls[0, 0] = 0
    with pytest.raises(ValueError, match=r"sequence 0 starts with padding \(input_mask\[0, 0\] = 0\)"):
        model.loss_and_grads({**batch, "input_mask": no_cls})


def test_config_round_trips_through_json_keys():
    cfg = BertConfig(**TINY)
    d = cfg.to_dict()
    assert d["hidden_act"] == "gelu" and d["layer_norm_eps"] == 1e-12  # exact: the default literal, copied
    assert BertConfig.from_dict({**d, "model_type": "bert", "architectures": ["BertForPreTraining"]}) == cfg
