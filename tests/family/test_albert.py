"""ALBERT (minibert/family/albert.py): gradient checks on both backends, the shared block and the
factorised embedding, config errors, and the transformers-format save/load round trip."""
import json
import math

import numpy as np
import pytest

from minibert import layers
from minibert.bert import BertForPreTraining
from minibert.family import albert
from minibert.family import gradchecks as gc
from minibert.family.albert import AlbertConfig, AlbertForPreTraining
from minibert.model import BertConfig, block_backward

TINY = dict(vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=3, num_attention_heads=2,
            intermediate_size=32, max_position_embeddings=16)


def tiny_model(dtype=np.float64, seed=0, perturb=True, **over):
    model = AlbertForPreTraining(AlbertConfig(**{**TINY, **over}), seed=seed, dtype=dtype)
    if perturb:  # away from the init's zero biases and unit LayerNorms
        rng = np.random.default_rng(seed + 100)
        for p in model.params.values():
            p += (0.1 * rng.standard_normal(p.shape)).astype(dtype)
    return model


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_albert_backward_matches_numerical_embedding_encoder_and_model(backend, monkeypatch):
    """Factorised embedding (every entry), the 3-times-shared block and the whole model (sampled
    entries of every tensor), float64, on each backend."""
    monkeypatch.setattr("minibert.backend.chosen", backend)
    checks = gc.check_albert(np.random.default_rng(11), verbose=False)
    n_params = len(albert.param_shapes(AlbertConfig(**TINY)))
    assert len(checks) == 7 + len(albert.BLOCK_PARTS) + n_params
    failed = [c.row() for c in checks if not c]
    assert not failed, "\n".join(failed)


def test_albert_grads_have_the_keys_shapes_and_dtype_of_params():
    model = tiny_model()
    batch = gc.random_batch(model.config, B=2, T=8, P=3, rng=np.random.default_rng(0))
    loss, grads = model.loss_and_grads(batch)
    assert list(grads) == list(model.params) == list(albert.param_shapes(model.config))
    for name, p in model.params.items():
        assert grads[name].shape == p.shape and grads[name].dtype == p.dtype, name
    assert np.isfinite(loss)


def test_albert_shared_block_is_one_set_of_tensors_whatever_the_depth():
    counts = {L: AlbertForPreTraining(AlbertConfig(**{**TINY, "num_hidden_layers": L})).num_parameters
              for L in (1, 4)}
    assert counts[1] == counts[4]  # sharing: depth adds no parameters
    cfg = AlbertConfig(**TINY)
    V, E, C, FF, P = 50, 8, 16, 32, 16
    block = C * 3 * C + 3 * C + C * C + C + 2 * C + C * FF + FF + FF * C + C + 2 * C
    expected = (V * E + P * E + 2 * E + 2 * E + E * C + C + block + C * C + C + C * E + E + 2 * E + V + C * 2 + 2)
    assert AlbertForPreTraining(cfg).num_parameters == expected
    model = tiny_model()
    view = albert.layer_view(model.params, model.config)  # every layer's names, the one block's arrays
    assert all(np.shares_memory(view[f"h{l}.{part}"], model.params["block." + part])
               for l in range(model.config.num_hidden_layers) for part in albert.BLOCK_PARTS)


def test_albert_shared_grad_is_the_sum_over_layers():
    """With L layers each application of the block adds its part: the encoder gradient of a
    shared tensor differs from the last layer's part alone, and equals the numerical one."""
    model = tiny_model()
    cfg, p = model.config, model.params
    rng = np.random.default_rng(5)
    ids, seg, mask = np.array([[2, 9, 7, 3]]), np.array([[0, 0, 1, 1]]), np.ones((1, 4), np.int64)
    out, cache = albert.encoder_forward(p, cfg, ids, seg, mask)  # (1, 4, C)
    dout = rng.standard_normal(out.shape)
    grads = albert.encoder_backward(dout, cache, cfg, {})
    last = {}
    block_backward(dout, cache.blocks[-1], cfg, 0, last, layers)
    assert np.abs(grads["block.ffn.out.w"] - last["h0.ffn.out.w"]).max() > 1e-3
    idx = gc.sampled_indices(p["block.ffn.out.w"].shape, 4, rng)
    num = gc.numerical_grad(lambda: albert.encoder_forward(p, cfg, ids, seg, mask)[0], p["block.ffn.out.w"], dout,
                            indices=idx)
    sel = tuple(np.array(i) for i in zip(*idx))
    assert gc.compare("block.ffn.out.w", grads["block.ffn.out.w"][sel], num[sel], verbose=False)


def test_albert_unpadded_encoder_gives_the_reference_loss_and_grads():
    model = tiny_model()
    batch = gc.random_batch(model.config, B=3, T=8, P=3, rng=np.random.default_rng(1))
    assert not batch["input_mask"].all()
    results = []
    for unpad in (False, True):
        loss, _, cache = albert.albert_forward(model.params, model.config, batch, unpad=unpad)
        assert (cache[0].keep is not None) == unpad
        results.append((loss, albert.albert_backward(model.params, model.config, cache)))
    (loss0, g0), (loss1, g1) = results
    assert abs(loss0 - loss1) <= 1e-12 * abs(loss0)
    for name in g0:
        np.testing.assert_allclose(g1[name], g0[name], rtol=1e-9, atol=1e-12, err_msg=name)


def test_albert_forward_shapes_dtype_and_initial_loss():
    cfg = AlbertConfig(**{**TINY, "vocab_size": 200})
    model = AlbertForPreTraining(cfg, seed=3)  # float32, the init
    ids = np.array([[2, 17, 40, 3, 0], [2, 11, 3, 60, 3]])
    out = model(ids, np.zeros_like(ids), (ids > 0).astype(int))
    assert out.sequence_output.shape == (2, 5, 16) and out.pooled_output.shape == (2, 16)
    assert out.mlm_logits.shape == (2, 5, 200) and out.nsp_logits.shape == (2, 2)
    assert all(a.dtype == np.float32 for a in out)
    batch = gc.random_batch(cfg, B=4, T=10, P=3, rng=np.random.default_rng(2))
    _, _, m = model.loss_grads_metrics(batch, compute_grads=False)
    assert abs(m.mlm_loss - math.log(200)) < 0.1 and abs(m.nsp_loss - math.log(2)) < 0.05  # chance level


def test_albert_sop_dropout_runs_only_in_training():
    model = tiny_model(classifier_dropout_prob=0.5)
    ids = np.array([[2, 9, 7, 3]])
    a, b = model(ids).nsp_logits, model(ids).nsp_logits
    np.testing.assert_array_equal(a, b)  # exact: eval is deterministic, the same computation twice
    c = model(ids, train=True, rng=np.random.default_rng(0)).nsp_logits
    assert np.abs(c - a).max() > 1e-6
    with pytest.raises(ValueError, match="train=True needs rng"):
        model(ids, train=True)


def test_albert_config_rejects_what_minibert_cannot_run():
    with pytest.raises(ValueError, match="num_hidden_groups=2 and inner_group_num=1"):
        AlbertConfig(**{**TINY, "num_hidden_groups": 2})
    with pytest.raises(ValueError, match="inner_group_num=2"):
        AlbertConfig(**{**TINY, "inner_group_num": 2})
    with pytest.raises(ValueError, match="embedding_size=0"):
        AlbertConfig(**{**TINY, "embedding_size": 0})
    with pytest.raises(ValueError, match="not divisible"):
        AlbertConfig(**{**TINY, "num_attention_heads": 3})
    with pytest.raises(ValueError, match="hidden_act 'relu'"):
        AlbertConfig(**{**TINY, "hidden_act": "relu"})
    with pytest.raises(ValueError, match="classifier_dropout_prob"):
        AlbertConfig(**{**TINY, "classifier_dropout_prob": 1.0})
    assert AlbertConfig().hidden_act == "gelu_new" and AlbertConfig().embedding_size == 128  # transformers' defaults
    cfg = AlbertConfig(**TINY)
    assert AlbertConfig.from_dict({**cfg.to_dict(), "bos_token_id": 2, "model_type": "albert"}) == cfg


def test_albert_rejects_missing_or_misshaped_params():
    cfg = AlbertConfig(**TINY)
    params = albert.init_params(cfg)
    with pytest.raises(ValueError, match="'block.ln2.b' is missing"):
        AlbertForPreTraining(cfg, params={k: v for k, v in params.items() if k != "block.ln2.b"})
    with pytest.raises(ValueError, match=r"'tok_emb' has shape \(50, 16\), expected \(50, 8\)"):
        AlbertForPreTraining(cfg, params={**params, "tok_emb": np.zeros((50, 16), np.float32)})
    with pytest.raises(ValueError, match="unknown parameters"):
        AlbertForPreTraining(cfg, params={**params, "h0.ln1.w": np.ones(16, np.float32)})


def test_albert_save_load_round_trip(tmp_path):
    model = tiny_model(dtype=np.float32)
    model.save_pretrained(tmp_path / "m", vocab=[f"t{i}" for i in range(50)])
    cfg = json.loads((tmp_path / "m" / "config.json").read_text())
    assert cfg["model_type"] == "albert" and cfg["architectures"] == ["AlbertForPreTraining"]
    assert cfg["embedding_size"] == 8 and cfg["num_hidden_groups"] == 1 and cfg["inner_group_num"] == 1
    assert (tmp_path / "m" / "vocab.txt").is_file()
    loaded = AlbertForPreTraining.from_pretrained(tmp_path / "m")
    assert loaded.config == model.config and loaded.vocab_path == tmp_path / "m" / "vocab.txt"
    for name, p in model.params.items():
        np.testing.assert_array_equal(loaded.params[name], p)  # exact: copied float32 values
    ids = np.array([[2, 9, 7, 3]])
    np.testing.assert_array_equal(loaded(ids).mlm_logits, model(ids).mlm_logits)  # exact: same weights, same code
    as64 = AlbertForPreTraining.from_pretrained(tmp_path / "m", dtype=np.float64)
    assert as64.params["tok_emb"].dtype == np.float64


def test_albert_and_bert_checkpoints_are_told_apart(tmp_path):
    tiny_model().save_pretrained(tmp_path / "albert")
    BertForPreTraining(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=32, max_position_embeddings=16)).save_pretrained(tmp_path / "bert")
    with pytest.raises(ValueError, match="model_type 'bert' is not 'albert'"):
        AlbertForPreTraining.from_pretrained(tmp_path / "bert")
    with pytest.raises(ValueError, match="AlbertForPreTraining"):
        BertForPreTraining.from_pretrained(tmp_path / "albert")
    cfg_path = tmp_path / "albert" / "config.json"
    cfg_path.write_text(json.dumps({**json.loads(cfg_path.read_text()), "num_hidden_groups": 2}))
    with pytest.raises(ValueError, match="num_hidden_groups=2"):
        AlbertForPreTraining.from_pretrained(tmp_path / "albert")


def test_albert_state_dict_names_are_transformers_and_invert():
    model = tiny_model()
    state = albert.to_hf_state_dict(model.params)
    assert "albert.encoder.albert_layer_groups.0.albert_layers.0.attention.query.weight" in state
    assert state["albert.encoder.embedding_hidden_mapping_in.weight"].shape == (16, 8)  # (C, E), PyTorch layout
    assert state["predictions.dense.weight"].shape == (8, 16) and "predictions.decoder.weight" not in state
    back = albert.from_hf_state_dict({**state, "predictions.decoder.weight": state[
        "albert.embeddings.word_embeddings.weight"]}, model.config, np.float64)
    for name, p in model.params.items():
        np.testing.assert_array_equal(back[name], p)  # exact: transposes and splits only
    untied = {**state, "predictions.decoder.weight": state["albert.embeddings.word_embeddings.weight"] + 1}
    with pytest.raises(ValueError, match="differs"):
        albert.from_hf_state_dict(untied, model.config)
