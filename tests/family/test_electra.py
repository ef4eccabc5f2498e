"""ELECTRA (minibert/family/electra.py): gradient checks on both backends (the RTD loss, the
discriminator, the joint generator + discriminator step with its shared embeddings), the sampling
and its labels, shapes, config errors and the transformers-format save/load round trip."""
import json
import math

import numpy as np
import pytest

from minibert.bert import BertForPreTraining
from minibert.family import electra
from minibert.family import gradchecks as gc
from minibert.family.electra import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining
from minibert.model import BertConfig

COMMON = dict(vocab_size=30, embedding_size=8, max_position_embeddings=16)
DISC = dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32, **COMMON)
GEN = dict(hidden_size=12, num_hidden_layers=1, num_attention_heads=2, intermediate_size=24, **COMMON)


def pair(seed=0, dtype=np.float64):
    """A tied (generator params, discriminator params), perturbed away from the init's 0s and 1s."""
    rng = np.random.default_rng(seed + 100)
    disc = {k: (v + 0.1 * rng.standard_normal(v.shape)).astype(dtype)
            for k, v in electra.init_params(ElectraConfig(**DISC), "disc", seed, dtype).items()}
    gen = {k: (v + 0.1 * rng.standard_normal(v.shape)).astype(dtype)
           for k, v in electra.init_params(ElectraConfig(**GEN), "gen", seed + 1, dtype).items()}
    return electra.tie_embeddings(gen, disc), disc


def step(gen, disc, batch, seed=0, lam=50.0):
    return electra.electra_forward_backward(gen, disc, ElectraConfig(**GEN), ElectraConfig(**DISC), batch,
                                            np.random.default_rng(seed), lam)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_electra_backward_matches_numerical_rtd_discriminator_and_joint(backend, monkeypatch):
    """The RTD loss (every entry), the discriminator and the joint model (sampled entries of every
    tensor, shared embeddings included, fixed sampling), float64, on each backend."""
    monkeypatch.setattr("minibert.backend.chosen", backend)
    checks = gc.check_electra(np.random.default_rng(11), verbose=False)
    failed = [c.row() for c in checks if not c]
    assert not failed, "\n".join(failed)
    names = [c.name for c in checks]
    assert "electra rtd loss: dlogits" in names
    for shared in electra.SHARED:
        assert f"electra joint: {shared}" in names
    assert sum(n.startswith("electra joint: gen.") for n in names) == 2 + 12 + 5  # emb_map, 1 block, MLM head


def test_replace_tokens_labels_a_sample_equal_to_the_original_as_original():
    ids = np.array([[2, 4, 4, 9, 3], [2, 4, 7, 3, 0]])  # 4 = [MASK]
    flat_pos = np.array([1, 2, 6])  # (0, 1), (0, 2), (1, 1)
    originals, sampled = np.array([11, 12, 13]), np.array([11, 20, 13])  # the first and last sample are right
    corrupted, labels = electra.replace_tokens(ids, flat_pos, originals, sampled)
    np.testing.assert_array_equal(corrupted, [[2, 11, 20, 9, 3], [2, 13, 7, 3, 0]])
    np.testing.assert_array_equal(labels, [[0, 0, 1, 0, 0], [0, 0, 0, 0, 0]])


def test_electra_step_labels_follow_the_samples():
    """Through the whole forward: the generator is pushed to sample token 7 everywhere, and the
    targets are 7 in row 0: those positions are labelled original, the rest of the masked ones
    replaced, every unmasked token original."""
    gen, disc = pair()
    gen["mlm.bias"][7] = 60.0  # softmax mass ~1 on token 7
    batch = gc.random_batch(ElectraConfig(**DISC), B=3, T=8, P=3, rng=np.random.default_rng(0))
    batch["masked_lm_ids"][0] = 7
    batch["masked_lm_ids"][1:] = 9
    _, metrics, cache = electra.electra_forward(gen, disc, ElectraConfig(**GEN), ElectraConfig(**DISC), batch,
                                                np.random.default_rng(1))
    assert (cache.sampled == 7).all()
    labels, pos, w = cache.labels, batch["masked_lm_positions"], batch["masked_lm_weights"]
    expected = np.zeros_like(labels)  # (B, T)
    for b in range(3):
        for j in range(3):
            if w[b, j] > 0:
                expected[b, pos[b, j]] = int(batch["masked_lm_ids"][b, j] != 7)
                assert cache.corrupted[b, pos[b, j]] == 7
    np.testing.assert_array_equal(labels, expected)
    assert labels[0].sum() == 0 and metrics.replaced_count == labels.sum() == 6


def test_sample_tokens_draws_from_the_softmax():
    logits = np.log(np.array([[0.2, 0.5, 0.3], [0.0 + 1e-12, 1.0, 0.0 + 1e-12]]))  # (2, 3)
    draws = np.stack([electra.sample_tokens(logits, np.random.default_rng(s)) for s in range(4000)])  # (4000, 2)
    freq = np.bincount(draws[:, 0], minlength=3) / 4000
    np.testing.assert_allclose(freq, [0.2, 0.5, 0.3], atol=0.03)  # 4.5 standard errors
    assert (draws[:, 1] == 1).all()


def test_electra_grads_are_keyed_as_joint_params_and_shared_ones_add_up():
    gen, disc = pair()
    batch = gc.random_batch(ElectraConfig(**DISC), B=3, T=8, P=3, rng=np.random.default_rng(2))
    loss, grads, metrics = step(gen, disc, batch)
    joint = electra.joint_params(gen, disc)
    assert list(grads) == list(joint)
    for name, p in joint.items():
        assert grads[name].shape == p.shape and grads[name].dtype == p.dtype, name
    # the shared tensors are the discriminator's arrays, once; the generator's own ones are "gen."
    assert all(joint[k] is disc[k] is gen[k] for k in electra.SHARED)
    assert "gen.emb_map.w" in joint and "gen.tok_emb" not in joint
    back_gen, back_disc = electra.split_params(joint)
    assert all(back_gen[k] is gen[k] for k in gen) and all(back_disc[k] is disc[k] for k in disc)
    # each network's part, computed apart: the shared gradients are their sum, the rest as they are
    _, _, cache = electra.electra_forward(gen, disc, ElectraConfig(**GEN), ElectraConfig(**DISC), batch,
                                          np.random.default_rng(0))
    g = electra.generator_backward(gen, ElectraConfig(**GEN), cache.gen, 1.0)
    d = electra.discriminator_backward(disc, ElectraConfig(**DISC), cache.disc, 50.0)
    for k in electra.SHARED:
        np.testing.assert_allclose(grads[k], g[k] + d[k], rtol=1e-12, atol=1e-15, err_msg=k)
        assert np.abs(g[k]).max() > 1e-6 and np.abs(d[k]).max() > 1e-6, k  # both networks contribute
    np.testing.assert_allclose(grads["gen.h0.ffn.in.w"], g["h0.ffn.in.w"], rtol=1e-12, atol=1e-15)
    assert abs(loss - (metrics.mlm_loss + 50.0 * metrics.rtd_loss)) <= 1e-12 * loss


def test_electra_lambda_scales_the_discriminator_only():
    """No gradient reaches the generator through the samples: its own tensors do not depend on
    lambda; the discriminator's scale with it."""
    gen, disc = pair()
    batch = gc.random_batch(ElectraConfig(**DISC), B=2, T=8, P=3, rng=np.random.default_rng(3))
    g10, g50 = step(gen, disc, batch, lam=10.0).grads, step(gen, disc, batch, lam=50.0).grads
    np.testing.assert_allclose(g50["gen.h0.attn.qkv.w"], g10["gen.h0.attn.qkv.w"], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(g50["gen.mlm.bias"], g10["gen.mlm.bias"], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(g50["h1.ffn.out.w"], 5.0 * g10["h1.ffn.out.w"], rtol=1e-10, atol=1e-15)


def test_electra_metrics_count_what_they_say():
    gen, disc = pair()
    batch = gc.random_batch(ElectraConfig(**DISC), B=3, T=8, P=3, rng=np.random.default_rng(4))
    _, metrics, cache = electra.electra_forward(gen, disc, ElectraConfig(**GEN), ElectraConfig(**DISC), batch,
                                                np.random.default_rng(5))
    real = batch["input_mask"] > 0  # (B, T)
    assert metrics.disc_count == real.sum() and metrics.mlm_count == (batch["masked_lm_weights"] > 0).sum()
    assert metrics.replaced_count == cache.labels[real].sum()
    r = metrics.rates()
    assert set(r) == {"mlm_accuracy", "disc_accuracy", "replaced_recall", "replaced_precision"}
    assert all(0.0 <= v <= 1.0 for v in r.values())


def test_electra_unpadded_encoder_gives_the_reference_loss_and_grads():
    gen, disc = pair()
    batch = gc.random_batch(ElectraConfig(**DISC), B=3, T=8, P=3, rng=np.random.default_rng(6))
    assert not batch["input_mask"].all()
    cfgs = (ElectraConfig(**GEN), ElectraConfig(**DISC))
    out = []
    for unpad in (False, True):
        loss, _, cache = electra.electra_forward(gen, disc, *cfgs, batch, np.random.default_rng(0), unpad=unpad)
        assert (cache.disc[0].keep is not None) == unpad
        out.append((loss, electra.electra_backward(gen, disc, *cfgs, cache)))
    (l0, g0), (l1, g1) = out
    assert abs(l0 - l1) <= 1e-12 * abs(l0)
    for name in g0:
        np.testing.assert_allclose(g1[name], g0[name], rtol=1e-9, atol=1e-12, err_msg=name)


def test_electra_forward_shapes_dtype_and_initial_losses():
    cfg = ElectraConfig(**{**DISC, "vocab_size": 200})
    disc, gen = ElectraForPreTraining(cfg, seed=1), ElectraForMaskedLM(ElectraConfig(**{**GEN, "vocab_size": 200}))
    ids = np.array([[2, 17, 40, 3, 0], [2, 11, 3, 60, 3]])
    assert disc(ids, np.zeros_like(ids), (ids > 0).astype(int)).shape == (2, 5)
    assert gen(ids).shape == (2, 5, 200)
    assert disc(ids).dtype == gen(ids).dtype == np.float32
    batch = gc.random_batch(cfg, B=4, T=10, P=3, rng=np.random.default_rng(2))
    gen_params = electra.tie_embeddings(gen.params, disc.params)
    _, m, _ = electra.electra_forward(gen_params, disc.params, gen.config, cfg, batch, np.random.default_rng(0))
    assert abs(m.mlm_loss - math.log(200)) < 0.1 and abs(m.rtd_loss - math.log(2)) < 0.05  # chance level


def test_electra_dropout_runs_only_in_training():
    model = ElectraForPreTraining(ElectraConfig(**DISC, hidden_dropout_prob=0.5))
    ids = np.array([[2, 9, 7, 3]])
    np.testing.assert_array_equal(model(ids), model(ids))  # exact: eval is deterministic, the same computation
    assert np.abs(model(ids, train=True, rng=np.random.default_rng(0)) - model(ids)).max() > 1e-6
    with pytest.raises(ValueError, match="train=True needs rng"):
        model(ids, train=True)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_electra_training_step_without_dropout_is_the_gradient_checked_step(backend, monkeypatch):
    """The Trainer calls the joint step with train=True (its rng also draws the samples) and the
    tiny recipe's dropout 0; the gradient check runs train=False. With dropout 0 the two must be
    the same computation on a padded batch (unpadded path): same samples, labels, loss and grads.
    If a p = 0 dropout drew from the rng, the samples would shift and this would fail."""
    monkeypatch.setattr("minibert.backend.chosen", backend)
    from minibert.backend import get_ops

    gen_cfg, disc_cfg = (ElectraConfig(**c, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
                         for c in (GEN, DISC))
    gen, disc = pair()
    batch = gc.random_batch(disc_cfg, B=3, T=8, P=3, rng=np.random.default_rng(8))
    assert not batch["input_mask"].all()  # the unpadded encoder runs
    out = [electra.electra_forward_backward(gen, disc, gen_cfg, disc_cfg, batch, np.random.default_rng(4), 50.0,
                                            train, get_ops()) for train in (False, True)]
    (l0, g0, m0), (l1, g1, m1) = out
    assert m0[3:] == m1[3:]  # integer counts: same samples, same labels, same flags
    assert abs(l0 - l1) <= 1e-12 * abs(l0)
    for name in g0:
        np.testing.assert_allclose(g1[name], g0[name], rtol=1e-10, atol=1e-14, err_msg=name)


def test_electra_config_and_pair_errors():
    with pytest.raises(ValueError, match="embedding_size=0"):
        ElectraConfig(**{**DISC, "embedding_size": 0})
    with pytest.raises(ValueError, match="not divisible"):
        ElectraConfig(**{**DISC, "num_attention_heads": 3})
    with pytest.raises(ValueError, match="hidden_act 'relu'"):
        ElectraConfig(**{**DISC, "hidden_act": "relu"})
    d = ElectraConfig()
    assert (d.embedding_size, d.hidden_size, d.num_attention_heads, d.hidden_act) == (128, 256, 4, "gelu")
    cfg = ElectraConfig(**DISC)
    assert ElectraConfig.from_dict({**cfg.to_dict(), "summary_type": "first"}) == cfg  # extra keys ignored
    with pytest.raises(ValueError, match="embedding_size: generator 4 vs discriminator 8"):
        electra.check_pair(ElectraConfig(**{**GEN, "embedding_size": 4}), ElectraConfig(**DISC))
    with pytest.raises(ValueError, match="head='x'"):
        electra.param_shapes(ElectraConfig(**DISC), "x")
    gen, disc = pair()
    untied = {**gen, "tok_emb": gen["tok_emb"].copy()}
    with pytest.raises(ValueError, match=r"\['tok_emb'\] are not the discriminator's arrays"):
        step(untied, disc, gc.random_batch(ElectraConfig(**DISC), B=2, T=8, P=3, rng=np.random.default_rng(0)))


def test_electra_models_reject_bad_params_and_labels():
    cfg = ElectraConfig(**DISC)
    params = electra.init_params(cfg, "disc")
    with pytest.raises(ValueError, match="'disc.out.b' is missing"):
        ElectraForPreTraining(cfg, params={k: v for k, v in params.items() if k != "disc.out.b"})
    with pytest.raises(ValueError, match=r"'tok_emb' has shape \(30, 16\), expected \(30, 8\)"):
        ElectraForPreTraining(cfg, params={**params, "tok_emb": np.zeros((30, 16), np.float32)})
    with pytest.raises(ValueError, match="unknown parameters"):
        ElectraForPreTraining(cfg, params={**params, "mlm.bias": np.zeros(30, np.float32)})
    ids, mask = np.array([[2, 9, 7, 3, 0]]), np.array([[1, 1, 1, 1, 0]])
    batch = {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)}
    with pytest.raises(ValueError, match="0 \\(original\\) or 1 \\(replaced\\)"):
        ElectraForPreTraining(cfg).loss_and_grads({**batch, "labels": np.array([[0, 2, 0, 1, 0]])})
    at_padding = np.array([[-100, 5, -100, -100, 6]])  # (1, 5) a target at the padded position 4
    with pytest.raises(ValueError, match="labels are set at padding"):
        ElectraForMaskedLM(ElectraConfig(**GEN)).loss_and_grads({**batch, "labels": at_padding})


@pytest.mark.parametrize("head", ["disc", "gen"])
@pytest.mark.parametrize("factorized", [True, False], ids=["E8-C16", "E16-C16"])
def test_electra_save_load_round_trip(head, factorized, tmp_path):
    cls = ElectraForPreTraining if head == "disc" else ElectraForMaskedLM
    cfg = ElectraConfig(**{**DISC, "embedding_size": 8 if factorized else 16})
    model = cls(cfg, seed=3)
    assert ("emb_map.w" in model.params) == factorized
    model.save_pretrained(tmp_path / "m", vocab=[f"t{i}" for i in range(30)])
    written = json.loads((tmp_path / "m" / "config.json").read_text())
    assert written["model_type"] == "electra" and written["architectures"] == [electra.HEADS[head]]
    assert written["embedding_size"] == cfg.embedding_size
    loaded = cls.from_pretrained(tmp_path / "m")
    assert loaded.config == cfg and loaded.vocab_path == tmp_path / "m" / "vocab.txt"
    for name, p in model.params.items():
        np.testing.assert_array_equal(loaded.params[name], p)  # exact: copied float32 values
    ids = np.array([[2, 9, 7, 3]])
    np.testing.assert_array_equal(loaded(ids), model(ids))  # exact: same weights, same code
    assert cls.from_pretrained(tmp_path / "m", dtype=np.float64).params["tok_emb"].dtype == np.float64


def test_electra_checkpoints_are_told_apart(tmp_path):
    ElectraForPreTraining(ElectraConfig(**DISC)).save_pretrained(tmp_path / "disc")
    ElectraForMaskedLM(ElectraConfig(**GEN)).save_pretrained(tmp_path / "gen")
    BertForPreTraining(BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=32, max_position_embeddings=16)).save_pretrained(tmp_path / "bert")
    with pytest.raises(ValueError, match="load it with minibert.ElectraForPreTraining"):
        ElectraForMaskedLM.from_pretrained(tmp_path / "disc")
    with pytest.raises(ValueError, match="load it with minibert.ElectraForMaskedLM"):
        ElectraForPreTraining.from_pretrained(tmp_path / "gen")
    with pytest.raises(ValueError, match="model_type 'bert' is not 'electra'"):
        ElectraForPreTraining.from_pretrained(tmp_path / "bert")
    with pytest.raises(ValueError, match="model_type 'electra' is not 'bert'"):
        BertForPreTraining.from_pretrained(tmp_path / "disc")


def test_electra_state_dict_names_are_transformers_and_invert():
    gen, _ = pair()
    cfg = ElectraConfig(**GEN)
    state = electra.to_hf_state_dict(gen, cfg)
    assert state["electra.embeddings_project.weight"].shape == (12, 8)  # (C, E), PyTorch layout
    assert state["generator_predictions.dense.weight"].shape == (8, 12) and "generator_lm_head.weight" not in state
    assert state["electra.encoder.layer.0.attention.self.query.weight"].shape == (12, 12)
    tied = {**state, "generator_lm_head.weight": state["electra.embeddings.word_embeddings.weight"]}
    back = electra.from_hf_state_dict(tied, cfg, "gen", np.float64)
    for name, p in gen.items():
        np.testing.assert_array_equal(back[name], p)  # exact: transposes and splits only
    untied = {**tied, "generator_lm_head.weight": tied["generator_lm_head.weight"] + 1}
    with pytest.raises(ValueError, match="differs"):
        electra.from_hf_state_dict(untied, cfg, "gen")
    with pytest.raises(ValueError, match="missing tensor 'discriminator_predictions.dense.weight'"):
        electra.from_hf_state_dict(state, cfg, "disc")  # a generator's file read as a discriminator
    with pytest.raises(ValueError, match="ElectraForMaskedLM does not know: \\['electra.pooler.weight'\\]"):
        electra.from_hf_state_dict({**state, "electra.pooler.weight": np.zeros((12, 12))}, cfg, "gen")
