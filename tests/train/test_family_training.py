"""RoBERTa's recipe and ALBERT's model as settings of the training pipeline (docs/bert-notes.md
§10.1, §10.2): gradient accumulation (accumulation_steps) equal to one big batch, the packing,
model_type and sentence_order settings, the roberta-tiny and albert-tiny presets end to end
(train and train-tiny), their bit-exact resume, and ALBERT checkpoints that load as
minibert.AlbertForPreTraining. The defaults stay BERT's: tests/train/test_train.py runs unchanged."""
from __future__ import annotations

import json
from functools import partial

import numpy as np
import pytest
from corpora import SPECIALS, WORDS, pretraining_files, word_corpus, write_vocab

import minibert
from minibert.bert import BertForPreTraining
from minibert.family.albert import AlbertConfig, AlbertForPreTraining
from minibert.analysis.inspect import attention_maps
from minibert.loop import engine
from minibert.loop.state import LoopState
from minibert.loop.curves import read_metrics
from minibert.loop.rundir import latest_checkpoint
from minibert.loop.step import training_step
from minibert.train.pretraining_step import accumulate_gradients, loss_counts, pretraining_loss
from minibert.model import BertConfig
from minibert.optim import AdamW
from minibert.data.pretraining_data import UNMASKED_NAME, remask
from minibert.data.shards import BatchIterator, read_meta
from minibert.tools.look_inside import attention_cli, fill_mask_cli
from minibert.train import commands
from minibert.train import config as train_config
from minibert.train import curves, pretrain
from minibert.train import runs as train_runs
from minibert.train import trainer as trainer_mod
from minibert.train.commands import train_tiny_cli

TINY = dict(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
            max_position_embeddings=16)


# ---------------------------------------------------------------------------------------------
# gradient accumulation: k micro-batches of b = one batch of k * b

def _model(kind, seed=0):
    """A float64 model away from the init's unit LayerNorms and zero biases."""
    if kind == "albert":
        model = AlbertForPreTraining(AlbertConfig(**TINY, embedding_size=8), seed=seed, dtype=np.float64)
    else:
        model = BertForPreTraining(BertConfig(**TINY), seed=seed, dtype=np.float64)
    rng = np.random.default_rng(seed + 100)
    for p in model.params.values():
        p += 0.1 * rng.standard_normal(p.shape)
    return model


def _micro_batches(k=3, b=4, T_=16, P=4, seed=0):
    """k batches of b sequences of varied lengths, so their prediction counts differ."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(k):
        lengths = rng.integers(5, T_ + 1, size=b)  # (b,)
        mask = (np.arange(T_)[None, :] < lengths[:, None]).astype(np.int32)  # (b, T)
        ids = rng.integers(len(SPECIALS), 50, size=(b, T_)) * mask  # (b, T)
        ids[:, 0] = 2  # [CLS]
        ids[np.arange(b), lengths - 1] = 3  # [SEP]
        feats = {UNMASKED_NAME: ids, "input_mask": mask, "segment_ids": np.zeros_like(mask),
                 "next_sentence_labels": rng.integers(0, 2, size=b)}
        out.append(remask(feats, rng, 0.15, P, 50, [2, 3], 4))
    return out


def _concat(batches):
    return {n: np.concatenate([b[n] for b in batches]) for n in batches[0]}


CASES = [("bert", "mlm_nsp"), ("bert", "mlm"), ("bert", "ltr"), ("albert", "mlm_nsp")]


@pytest.mark.parametrize("kind,objective", CASES)
def test_accumulated_gradients_equal_one_batch_of_all_micro_batches(kind, objective):
    micro = _micro_batches()
    assert len({loss_counts(b, objective)[0] for b in micro}) > 1  # the micro-batches' predictions differ
    loss, grads, metrics = accumulate_gradients(_model(kind), micro, objective=objective)
    ref_loss, ref_grads, ref_metrics = _model(kind).loss_grads_metrics(_concat(micro), objective=objective)
    assert abs(loss - ref_loss) <= 1e-9 * abs(ref_loss)
    assert metrics[3:] == ref_metrics[3:]  # hits and counts (ints)
    np.testing.assert_allclose(metrics[:3], ref_metrics[:3], rtol=1e-9, atol=1e-12)
    assert grads.keys() == ref_grads.keys()
    for k, g in ref_grads.items():
        np.testing.assert_allclose(grads[k], g, rtol=1e-6, atol=1e-9 * np.abs(g).max(), err_msg=k)


def test_a_plain_mean_of_micro_batch_gradients_is_not_the_big_batch_gradient():
    """Why the weights: each micro-batch's MLM loss is a mean over its own predictions."""
    micro = _micro_batches()
    model = _model("bert")
    plain = [model.loss_grads_metrics(b, loss_weights=(1 / 3, 1 / 3)).grads for b in micro]
    ref = model.loss_grads_metrics(_concat(micro)).grads
    g = sum(p["mlm.bias"] for p in plain)
    assert np.abs(g - ref["mlm.bias"]).max() > 1e-3 * np.abs(ref["mlm.bias"]).max()


@pytest.mark.parametrize("kind,objective", CASES)
def test_accumulated_step_updates_like_one_big_batch(kind, objective):
    micro = _micro_batches(seed=1)
    results = []
    for batch in (micro, _concat(micro)):
        model = _model(kind)
        before = {k: p.copy() for k, p in model.params.items()}
        names = [k for k in model.params if objective == "mlm_nsp" or k.split(".")[0] not in ("pool", "nsp")]
        opt = AdamW({k: model.params[k] for k in names}, lr=1e-2, beta2=0.98, bias_correction=True)
        r = training_step(model, opt, batch, 0, lr=1e-2, warmup_steps=0, total_steps=10,
                          loss_fn=partial(pretraining_loss, model, objective=objective))
        results.append((r, {k: model.params[k] - before[k] for k in names}))
    (r_acc, d_acc), (r_big, d_big) = results
    assert abs(r_acc.grad_norm - r_big.grad_norm) <= 1e-6 * r_big.grad_norm
    for k, d in d_big.items():
        np.testing.assert_allclose(d_acc[k], d, rtol=1e-6, atol=1e-12, err_msg=k)


def test_a_list_of_one_batch_is_that_batch():
    batch = _micro_batches(k=1)[0]
    m, n = _model("bert"), _model("bert")
    a = training_step(m, AdamW(m.params, lr=1e-2), [batch], 0, lr=1e-2, warmup_steps=0, total_steps=5,
                      loss_fn=partial(pretraining_loss, m, objective="mlm_nsp"))
    b = training_step(n, AdamW(n.params, lr=1e-2), batch, 0, lr=1e-2, warmup_steps=0, total_steps=5,
                      loss_fn=partial(pretraining_loss, n, objective="mlm_nsp"))
    assert a.loss == b.loss  # exact: the same code path on the same batch
    assert all(np.array_equal(m.params[k], n.params[k]) for k in m.params)  # exact: same path


# ---------------------------------------------------------------------------------------------
# settings

def test_defaults_stay_bert():
    cfg = train_config.make_config("tiny")
    assert (cfg.accumulation_steps, cfg.packing, cfg.sentence_order, cfg.model_type) == (1, "segment_pair", False,
                                                                                          "bert")
    assert type(cfg.model_config(50)) is BertConfig
    assert not train_config.FAMILY_PRESETS.get("tiny")  # train-tiny's default recipe gets no changes


def test_presets_hold_each_family_members_changes():
    r = train_config.make_config("roberta-tiny")
    assert (r.objective, r.packing, r.masking, r.accumulation_steps, r.model_type) == ("mlm", "full_sentences",
                                                                                       "dynamic", 2, "bert")
    assert abs(r.beta2 - 0.98) < 1e-12
    a = train_config.make_config("albert-tiny")
    assert (a.model_type, a.embedding_size, a.sentence_order, a.objective) == ("albert", 64, True, "mlm_nsp")
    mc = a.model_config(100)
    assert isinstance(mc, AlbertConfig) and (mc.embedding_size, mc.hidden_size) == (64, 128)
    for cfg in (r, a):
        cfg.validate(require_files=False)
        assert cfg.model.hidden_size == train_config.make_config("tiny").model.hidden_size


@pytest.mark.parametrize("bad,match", [
    (dict(accumulation_steps=0), "accumulation_steps"),
    (dict(packing="sentences"), "packing"),
    (dict(packing="full_sentences"), "objective 'mlm'"),  # objective mlm_nsp has no pairs to read
    (dict(packing="doc_sentences", objective="mlm", sentence_order=True), "sentence_order"),
    (dict(model_type="xlnet"), "model_type"),
    (dict(model_type="albert", objective="mlm"), "albert"),
    (dict(model_type="albert", embedding_size=0), "embedding_size"),
    (dict(model_type="albert", classifier_dropout_prob=1.0), "classifier_dropout_prob"),
])
def test_bad_family_settings_are_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        train_config.make_config("tiny", **bad).validate(require_files=False)


def test_new_settings_parse_from_the_command_line():
    got = train_config.TrainConfig.parse_set(["accumulation_steps=4", "packing=doc_sentences", "sentence_order=1", "model_type=albert",
                       "embedding_size=32"])
    assert got == dict(accumulation_steps=4, packing="doc_sentences", sentence_order=True, model_type="albert",
                       embedding_size=32)


# ---------------------------------------------------------------------------------------------
# through the training loop

@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("family")
    return pretraining_files(d, word_corpus(d / "train.txt", 60, 0), word_corpus(d / "heldout.txt", 10, 1),
                             write_vocab(d / "vocab.txt", SPECIALS + WORDS))


SMALL = dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
             max_position_embeddings=32, max_seq_length=32, max_predictions_per_seq=5, batch_size=8, dupe_factor=2,
             warmup_steps=2, steps=6, log_interval=2, eval_interval=3, checkpoint_interval=3, eval_examples=32,
             curves=False, embedding_size=8)


def _config(files, out, preset, **kw):
    return train_config.make_config(preset, **{**files, "out": str(out), **SMALL, **kw})


def _state(trainer):
    return {**{f"p.{k}": v for k, v in trainer.model.params.items()},
            **{f"o.{k}": v for k, v in trainer.optimizer.state_dict().items()}}


@pytest.mark.parametrize("preset", ["roberta-tiny", "albert-tiny"])
def test_preset_run_resumes_bit_exactly(files, tmp_path, preset, capsys):
    straight = pretrain.train(_config(files, tmp_path / "straight", preset), verbose=True)
    out = capsys.readouterr().out
    part = pretrain.train(_config(files, tmp_path / "part", preset), verbose=False, max_steps_this_run=3)
    assert part.loop.status == "paused" and part.loop.step == 3
    resumed = pretrain.train(train_runs.resume_config(tmp_path / "part", {}), resume=True, verbose=False)
    assert straight.loop.status == resumed.loop.status == "done" and resumed.loop.step == 6
    a, b = _state(straight.run), _state(resumed.run)
    assert a.keys() == b.keys()
    assert all(np.array_equal(a[k], b[k]) for k in a), [k for k in a if not np.array_equal(a[k], b[k])]  # exact: resume
    assert straight.run.last_eval == resumed.run.last_eval  # exact: the same bits, evaluated the same way
    saved = json.loads((tmp_path / "part" / "run.json").read_text())["settings"]
    expected = train_config.make_config(preset)
    for key in ("model_type", "accumulation_steps", "packing", "sentence_order", "objective"):
        assert saved[key] == getattr(expected, key), key
    assert train_runs.resume_config(tmp_path / "part", {}).flat() == _config(files, tmp_path / "part", preset).flat()
    if preset == "roberta-tiny":
        assert "full_sentences packing" in out and "x 2 micro-batches (16 sequences per step)" in out
        assert isinstance(straight.run.model, BertForPreTraining) and "NSP" not in out
    else:
        assert isinstance(straight.run.model, AlbertForPreTraining) and "SOP acc" in out and "NSP" not in out


def test_albert_run_checkpoints_load_as_albert_for_pretraining(files, tmp_path):
    trainer = pretrain.train(_config(files, tmp_path / "run", "albert-tiny", steps=3, checkpoint_interval=2), verbose=False)
    for where in (tmp_path / "run", latest_checkpoint(tmp_path / "run")):
        model = minibert.AlbertForPreTraining.from_pretrained(where)
        assert model.config.embedding_size == 8 and model.config.num_hidden_groups == 1
        for k, p in trainer.run.model.params.items():
            assert np.array_equal(model.params[k], p), k  # exact: float32 saved and read back
        out = model.forward(np.array([[2, 7, 8, 3]]))
        assert out.mlm_logits.shape == (1, 4, 50) and out.nsp_logits.shape == (1, 2)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["model_type"] == "albert" and config["architectures"] == ["AlbertForPreTraining"]
    # the inspection commands read the run as ALBERT
    assert fill_mask_cli([str(tmp_path / "run"), "w1 [MASK] w2"]) == 0
    assert attention_cli([str(tmp_path / "run"), "w1 w2 w3", "--out", str(tmp_path / "att")]) == 0
    assert len(list((tmp_path / "att").glob("layer1_head*.png"))) == 2
    maps = attention_maps(trainer.run.model, trainer.run.tokenizer, "w1 w2 w3").maps
    assert maps.shape == (2, 2, 5, 5) and np.allclose(maps.sum(-1), 1.0, atol=1e-5)


def test_doc_sentences_run_trains_on_shorter_sequences_of_one_document(files, tmp_path):
    runs = {p: pretrain.train(_config(files, tmp_path / p, "roberta-tiny", packing=p, steps=2, eval_interval=2), verbose=False)
            for p in ("full_sentences", "doc_sentences")}
    fill = {p: read_meta(r.run.data.train)["stats"]["tokens"] / read_meta(r.run.data.train)["stats"]["instances"]
            for p, r in runs.items()}
    assert fill["doc_sentences"] < fill["full_sentences"] <= SMALL["max_seq_length"]
    assert read_meta(runs["doc_sentences"].run.data.train)["flags"]["packing"] == "doc_sentences"
    assert all(r.loop.status == "done" and np.isfinite(r.run.last_eval.mlm_loss) for r in runs.values())


def test_a_step_takes_k_micro_batches_and_counts_all_their_tokens(files, tmp_path):
    cfg = _config(files, tmp_path / "run", "roberta-tiny", accumulation_steps=3)
    trainer = trainer_mod.Trainer(cfg, verbose=False)
    loop = LoopState.start(trainer.settings)
    tokens = engine.train_step(trainer, loop).metrics["tokens"][0]
    assert loop.step == 1 and trainer.iterator.position == 3 * cfg.batch_size
    fresh = BatchIterator(str(trainer.data.train), cfg.batch_size, cfg.seed, masking="dynamic", vocab=cfg.vocab)
    assert tokens == sum(int(fresh.next_batch()["input_mask"].sum()) for _ in range(3))


@pytest.mark.parametrize("preset", ["roberta-tiny", "albert-tiny"])
def test_train_tiny_cli_runs_a_family_preset_fast(files, tmp_path, preset, monkeypatch, capsys):
    monkeypatch.delenv("MINIBERT_FAST", raising=False)
    sets = [f"corpus={files['corpus'][0]}", f"heldout={files['heldout'][0]}", f"vocab={files['vocab']}",
            f"data_cache={files['data_cache']}", f"out={tmp_path / preset}", "minutes=0",
            "steps=3", "eval_interval=2", "checkpoint_interval=2", "curves=0",
            *(f"{k}={v}" for k, v in SMALL.items() if k not in ("steps", "eval_interval", "checkpoint_interval",
                                                                 "curves", "log_interval", "warmup_steps"))]
    argv = ["--fast", "--preset", preset, *(a for s in sets for a in ("--set", s))]
    assert train_tiny_cli(argv) == 0
    out = capsys.readouterr().out
    assert "fill-mask examples" in out and ("SOP accuracy" in out) == (preset == "albert-tiny")
    saved = json.loads((tmp_path / preset / "run.json").read_text())
    assert saved["command"] == "train-tiny" and saved["settings"]["preset"] == preset
    assert saved["settings"]["model_type"] == ("albert" if preset == "albert-tiny" else "bert")


@pytest.mark.parametrize("preset,key,value", [("roberta-tiny", "packing", "full_sentences"),
                                              ("electra-tiny", "model_type", "electra")])
def test_train_cli_takes_a_family_preset(files, tmp_path, capsys, preset, key, value):
    argv = ["--preset", preset, "--corpus", *files["corpus"], "--heldout", *files["heldout"],
            "--vocab", files["vocab"], "--out", str(tmp_path / "r"), "--steps", "2",
            *(a for k, v in {**SMALL, "data_cache": files["data_cache"], "eval_interval": 2}.items()
              if k != "steps" for a in ("--set", f"{k}={v}"))]
    assert commands.cli(argv) == 0
    assert json.loads((tmp_path / "r" / "run.json").read_text())["settings"][key] == value


def test_train_tiny_refuses_an_unknown_preset(capsys):
    with pytest.raises(SystemExit) as e:
        train_tiny_cli(["--preset", "mystery"])
    assert e.value.code == 2


# ---------------------------------------------------------------------------------------------
# ELECTRA: generator + discriminator on the same loop (minibert/train/electra.py)

def test_electra_preset_sizes_its_generator_a_quarter_of_the_discriminator():
    cfg = train_config.make_config("electra-tiny")
    disc, gen = cfg.model_config(100), cfg.generator_config(100)
    tiny = train_config.make_config("tiny").model
    assert (disc.hidden_size, disc.num_hidden_layers, disc.num_attention_heads, disc.intermediate_size) == (
        tiny.hidden_size, tiny.num_hidden_layers, tiny.num_attention_heads, tiny.intermediate_size)
    assert (gen.hidden_size, gen.num_hidden_layers, gen.num_attention_heads, gen.intermediate_size) == (
        tiny.hidden_size // 4, tiny.num_hidden_layers, 1, tiny.hidden_size)
    assert disc.embedding_size == gen.embedding_size == 128 and gen.factorized and not disc.factorized
    assert (cfg.objective, cfg.masking, cfg.pair_task()[0]) == ("mlm", "dynamic", None)
    assert abs(cfg.rtd_weight - 50.0) < 1e-12


@pytest.mark.parametrize("bad,match", [
    (dict(objective="mlm_nsp"), "electra"),
    (dict(accumulation_steps=2), "accumulation_steps"),
    (dict(generator_size=0.0), "generator_size"),
    (dict(rtd_weight=-1.0), "rtd_weight"),
])
def test_bad_electra_settings_are_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        train_config.make_config("electra-tiny", **bad).validate(require_files=False)


def _electra_state(trainer):
    return {**{f"p.{k}": v for k, v in trainer.model.params.items()},
            **{f"o.{k}": v for k, v in trainer.optimizer.state_dict().items()}}


def test_electra_run_resumes_bit_exactly_and_saves_both_networks(files, tmp_path, capsys):
    kw = dict(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    straight = pretrain.train(_config(files, tmp_path / "straight", "electra-tiny", **kw), verbose=True)
    out = capsys.readouterr().out
    part = pretrain.train(_config(files, tmp_path / "part", "electra-tiny", **kw), verbose=False, max_steps_this_run=3)
    assert part.loop.status == "paused" and part.loop.step == 3
    resumed = pretrain.train(train_runs.resume_config(tmp_path / "part", {}), resume=True, verbose=False)
    assert straight.loop.status == resumed.loop.status == "done" and resumed.loop.step == 6
    a, b = _electra_state(straight.run), _electra_state(resumed.run)
    assert a.keys() == b.keys() and any(k.startswith("p.gen.") for k in a)
    assert all(np.array_equal(a[k], b[k]) for k in a), [k for k in a if not np.array_equal(a[k], b[k])]  # exact: resume
    assert not np.array_equal(part.run.model.params["disc.out.w"], straight.run.model.params["disc.out.w"])
    assert straight.run.last_eval == resumed.run.last_eval  # exact: the same bits, evaluated with the same samples
    # the progress line and the evaluation show the generator's and the discriminator's numbers
    assert "gen MLM acc" in out and "disc acc" in out and "replaced recall" in out and "NSP acc" not in out
    assert "held-out generator MLM acc" in out and "ELECTRA: generator hidden 4" in out
    recs = read_metrics(tmp_path / "part" / "metrics.jsonl")
    assert {"mlm_acc", "disc_acc", "replaced_recall", "rtd_loss"} <= set(recs[-1])
    # the run's top level is the discriminator, generator/ the generator, sharing the embeddings
    run = tmp_path / "straight"
    disc = minibert.ElectraForPreTraining.from_pretrained(run)
    gen = minibert.ElectraForMaskedLM.from_pretrained(run / "generator")
    assert json.loads((run / "config.json").read_text())["architectures"] == ["ElectraForPreTraining"]
    assert json.loads((run / "generator" / "config.json").read_text())["architectures"] == ["ElectraForMaskedLM"]
    assert gen.config.hidden_size == 4 and disc.config.hidden_size == 16  # SMALL's 16, a quarter of it
    for k, p in straight.run.model.disc.params.items():
        assert np.array_equal(disc.params[k], p), k  # exact: float32 saved and read back
    for k, p in straight.run.model.gen.params.items():
        assert np.array_equal(gen.params[k], p), k
    assert np.array_equal(gen.params["tok_emb"], disc.params["tok_emb"])  # exact: one shared table
    assert disc.forward(np.array([[2, 7, 8, 3]])).shape == (1, 4)


def test_electra_step_trains_both_networks_through_the_shared_embedding(files, tmp_path):
    trainer = trainer_mod.Trainer(_config(files, tmp_path / "run", "electra-tiny"), verbose=False)
    before = {k: p.copy() for k, p in trainer.model.params.items()}
    loop = LoopState.start(trainer.settings)
    engine.train_step(trainer, loop)  # step 0: lr 0 (warmup)
    entry = engine.train_step(trainer, loop)
    metrics, norm, lr, tokens = entry.metrics, entry.grad_norm, entry.lr, entry.metrics["tokens"][0]
    assert lr > 0 and norm > 0
    assert trainer.model.gen.params["tok_emb"] is trainer.model.disc.params["tok_emb"]  # still tied
    moved = {k for k, p in trainer.model.params.items() if not np.array_equal(p, before[k])}
    assert {"tok_emb", "gen.mlm.dense.w", "disc.out.w", "gen.h0.attn.qkv.w", "h0.attn.qkv.w"} <= moved
    mlm_count, disc_count, replaced_count = metrics["mlm_acc"][1], metrics["disc_acc"][1], metrics["replaced_recall"][1]
    assert mlm_count > 0 and disc_count == tokens and 0 <= replaced_count <= mlm_count


def test_train_tiny_cli_runs_electra_fast_with_curves(files, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("MINIBERT_FAST", raising=False)
    sets = [f"corpus={files['corpus'][0]}", f"heldout={files['heldout'][0]}", f"vocab={files['vocab']}",
            f"data_cache={files['data_cache']}", f"out={tmp_path / 'e'}", "minutes=0",
            "steps=3", "eval_interval=2", "checkpoint_interval=2", "curves=1",
            *(f"{k}={v}" for k, v in SMALL.items() if k not in ("steps", "eval_interval", "checkpoint_interval",
                                                                 "curves", "log_interval", "warmup_steps"))]
    assert train_tiny_cli(["--fast", "--preset", "electra-tiny", *(a for s in sets for a in ("--set", s))]) == 0
    out = capsys.readouterr().out
    assert "discriminator accuracy" in out and "replaced-token recall" in out
    assert "fill-mask examples (the generator)" in out
    assert (tmp_path / "e" / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "e" / "generator" / "model.safetensors").is_file()
    saved = json.loads((tmp_path / "e" / "run.json").read_text())
    assert saved["command"] == "train-tiny" and saved["settings"]["model_type"] == "electra"
