"""T5 (minibert/family/t5.py, t5_data.py, t5_train.py): float64 gradient checks of cross-attention,
the decoder block and the whole encoder-decoder on both backends; span corruption's invariants
(Hypothesis); the decoder's causality; greedy decoding of a memorised batch; the train-t5 command
(checkpoint, Ctrl-C, NaN stop, bit-exact resume, SST-2 text-to-text) on a tiny corpus."""
import json
import math
import os
import re
import signal

import numpy as np
import pytest
from corpora import REPO
from hypothesis import given, settings
from hypothesis import strategies as st

from minibert.family import gradchecks as gc
from minibert.family import t5
from minibert.family import t5_data as D
from minibert.io.tensorfile import load_tensors
from minibert.optim import AdamW
from minibert.text.tokenizer import SPECIAL_TOKENS, BertTokenizer, basic_tokenize
from minibert.__main__ import main
from minibert.train import t5 as t5_loop
from minibert.train import t5_command as t5_train

SPECIAL = D.Special(pad=0, start=2, eos=3)


def _failed(checks):
    return "\n".join(c.row() for c in checks if not c)


# ---------------------------------------------------------------------------------------------
# gradient checks

def test_cross_attention_backward_matches_numerical():
    checks = gc.check_cross_attention(np.random.default_rng(0), verbose=False)
    assert len(checks) == 3 and not _failed(checks), _failed(checks)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_decoder_block_backward_matches_numerical(backend, monkeypatch):
    """Every entry of d(block input) and d(encoder output), sampled entries of every parameter."""
    monkeypatch.setattr("minibert.backend.chosen", backend)
    checks = gc.check_t5_decoder_block(np.random.default_rng(1), verbose=False)
    assert not _failed(checks), _failed(checks)
    names = [c.name for c in checks]
    assert "t5 decoder block: denc_out" in names and "t5 decoder block: dec.h1.cross.kv.w" in names
    assert len(checks) == 2 + 20  # dy, denc_out and the block's 20 parameter tensors


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_t5_backward_matches_numerical_every_tensor(backend, monkeypatch):
    monkeypatch.setattr("minibert.backend.chosen", backend)
    checks = gc.check_t5(np.random.default_rng(2), verbose=False)
    assert not _failed(checks), _failed(checks)
    cfg, _ = gc.t5_setup(np.random.default_rng(0))
    assert len(checks) == len(t5.param_shapes(cfg))  # one check per tensor, tok_emb's three uses included


def test_cross_attention_gradient_reaches_the_encoder_only_through_keys_and_values():
    """Zeroing every cross.kv.w / cross.kv.b cuts the encoder off the loss: then no encoder
    parameter gets a gradient (the decoder alone still does)."""
    cfg, params = gc.t5_setup(np.random.default_rng(3))
    batch = gc.t5_batch(cfg, np.random.default_rng(4))
    _, _, grads = t5.t5_loss_and_grads(params, cfg, batch)
    assert np.abs(grads["h0.attn.qkv.w"]).max() > 1e-6
    for l in range(cfg.num_decoder_layers):
        params[f"dec.h{l}.cross.kv.w"][:] = 0.0
        params[f"dec.h{l}.cross.kv.b"][:] = 0.0
    _, _, grads = t5.t5_loss_and_grads(params, cfg, batch)
    assert np.abs(grads["h0.attn.qkv.w"]).max() < 1e-12
    assert np.abs(grads["dec.h0.self.qkv.w"]).max() > 1e-6


def test_decoder_is_causal_and_ignores_padded_encoder_tokens():
    cfg, params = gc.t5_setup(np.random.default_rng(5))
    rng = np.random.default_rng(6)
    enc_ids, dec_ids = rng.integers(5, cfg.vocab_size, (2, 7)), rng.integers(5, cfg.vocab_size, (2, 5))
    enc_mask = np.ones((2, 7), np.int64)
    enc_mask[1, 5:] = 0
    enc_out, _ = t5.encode(params, cfg, enc_ids, enc_mask)
    logits, _ = t5.decode(params, cfg, dec_ids, np.ones_like(dec_ids), enc_out, enc_mask)
    later = dec_ids.copy()
    later[:, 3:] = rng.integers(5, cfg.vocab_size, (2, 2))  # change the future
    enc_ids2 = enc_ids.copy()
    enc_ids2[1, 5:] = 9  # change what sits under the padding
    enc_out2, _ = t5.encode(params, cfg, enc_ids2, enc_mask)
    logits2, _ = t5.decode(params, cfg, later, np.ones_like(later), enc_out2, enc_mask)
    np.testing.assert_allclose(logits2[:, :3], logits[:, :3], rtol=1e-10, atol=1e-10)
    assert np.abs(logits2[:, 3:] - logits[:, 3:]).max() > 1e-6


def test_initial_loss_is_about_log_vocab():
    cfg = t5.T5Config(vocab_size=300, hidden_size=32, num_layers=1, num_decoder_layers=1, num_heads=2,
                      intermediate_size=64, max_position_embeddings=32, num_sentinels=10)
    params = t5.init_params(cfg, seed=0, dtype=np.float64)
    loss, metrics, _ = t5.t5_forward(params, cfg, gc.t5_batch(cfg, np.random.default_rng(0)))
    assert abs(float(loss) - math.log(300)) < 0.05
    assert metrics["tokens"] == 3 * 5 - 2


def test_batch_errors_name_the_problem():
    cfg, params = gc.t5_setup(np.random.default_rng(0))
    batch = gc.t5_batch(cfg, np.random.default_rng(0))
    with pytest.raises(ValueError, match="labels.*shape"):
        t5.t5_forward(params, cfg, {**batch, "labels": batch["labels"][:, :2]})
    with pytest.raises(ValueError, match="decoder_input_ids.*outside the vocabulary"):
        t5.t5_forward(params, cfg, {**batch, "decoder_input_ids": batch["decoder_input_ids"] + cfg.vocab_size})
    with pytest.raises(ValueError, match="lacks 'attention_mask'"):
        t5.t5_forward(params, cfg, {k: v for k, v in batch.items() if k != "attention_mask"})


def test_greedy_decoding_reproduces_a_memorised_batch():
    """Overfit two (input, target) pairs, then greedy decoding writes each target, EOS included."""
    cfg = t5.T5Config(vocab_size=40, hidden_size=32, num_layers=1, num_decoder_layers=1, num_heads=2,
                      intermediate_size=64, max_position_embeddings=16, num_sentinels=5)
    params = t5.init_params(cfg, seed=0)
    pairs = [(np.array([7, 8, 39, 10, 3]), np.array([39, 11, 12, 13, 3])),
             (np.array([20, 38, 22, 23, 39, 3]), np.array([39, 24, 38, 25, 3]))]
    batch = D.pad_batch(pairs, SPECIAL)
    opt = AdamW(params, lr=3e-3, weight_decay=0.0, bias_correction=True)
    for _ in range(150):
        loss, _, grads = t5.t5_loss_and_grads(params, cfg, batch)
        opt.step(params, grads)
    assert loss < 0.05
    out = t5.greedy_decode(params, cfg, batch["input_ids"], batch["attention_mask"], SPECIAL.start, SPECIAL.eos, 6)
    for (_, tgt), row in zip(pairs, out):
        assert row[:len(tgt)].tolist() == tgt.tolist()


# ---------------------------------------------------------------------------------------------
# span corruption

def _expected_counts(n):
    length = max(n, 2)
    noise = min(max(int(round(length * 0.15)), 1), length - 1)
    return noise, max(int(round(noise / 3)), 1)


@settings(max_examples=150, deadline=None)
@given(n=st.integers(2, 300), seed=st.integers(0, 2**31))
def test_span_corruption_invariants(n, seed):
    V, NS = 1000, 100
    rng = np.random.default_rng(seed)
    tokens = rng.integers(5, 800, n)  # never an id of a sentinel or of EOS (3)
    mask = D.random_spans_noise_mask(n, rng)
    noise, spans = _expected_counts(n)
    assert mask.shape == (n,) and int(mask.sum()) == noise
    starts = mask & ~np.concatenate([[False], mask[:-1]])
    assert int(starts.sum()) == spans  # the spans are separated by kept runs
    assert not mask[0] and mask[-1]  # kept run first, noise run last
    inp, tgt = D.span_corrupt(tokens, mask, V, SPECIAL.eos)
    sent_in, sent_tg = D.is_sentinel(inp, V, NS), D.is_sentinel(tgt, V, NS)
    assert inp[sent_in].tolist() == tgt[sent_tg].tolist() == [V - 1 - i for i in range(spans)]
    assert inp[-1] == tgt[-1] == SPECIAL.eos
    # every token in exactly one of input or target, in order: kept in the input, dropped in the target
    assert inp[~sent_in][:-1].tolist() == tokens[~mask].tolist()
    assert tgt[~sent_tg][:-1].tolist() == tokens[mask].tolist()
    assert len(inp) - 1 - spans + len(tgt) - 1 - spans == n
    assert D.reconstruct(inp, tgt, V, NS, SPECIAL.eos) == tokens.tolist()
    t_in, t_tg = D.max_lengths(n)
    assert len(inp) <= t_in and len(tgt) <= t_tg


def test_noise_share_is_close_to_15_percent_with_mean_span_3():
    rng = np.random.default_rng(0)
    masks = [D.random_spans_noise_mask(n, rng) for n in rng.integers(20, 200, 300)]
    share = sum(int(m.sum()) for m in masks) / sum(len(m) for m in masks)
    assert abs(share - 0.15) < 0.005
    lengths = [len(run) for m in masks for run in "".join("x" if v else "." for v in m).split(".") if run]
    assert 2.6 < np.mean(lengths) < 3.4


def test_random_segmentation_is_uniform_over_splits():
    rng = np.random.default_rng(0)
    counts = {}
    for _ in range(3000):
        seg = tuple(D.random_segmentation(4, 2, rng).tolist())
        counts[seg] = counts.get(seg, 0) + 1
    assert set(counts) == {(1, 3), (2, 2), (3, 1)}
    assert all(abs(c / 3000 - 1 / 3) < 0.04 for c in counts.values())
    with pytest.raises(ValueError, match="cannot cut 2 items into 3"):
        D.random_segmentation(2, 3, rng)


def test_reconstruct_names_a_missing_sentinel():
    with pytest.raises(ValueError, match="<extra_id_1> is not in the target"):
        D.reconstruct([5, 99, 6, 98, 3], [99, 7, 3], 100, 10, 3)


def test_sentinels_follow_the_vocab_without_changing_the_bert_tokenizer():
    base = list(SPECIAL_TOKENS) + ["extra", "_", "id", "0", "<", ">", "positive"]
    names = D.t5_tokens(base, 3)
    assert names[-3:] == ["<extra_id_2>", "<extra_id_1>", "<extra_id_0>"]
    assert names[D.sentinel_id(0, len(names))] == "<extra_id_0>"
    tok = BertTokenizer(base)
    assert len(tok) == len(base) and "<extra_id_0>" not in tok.vocab
    assert tok.tokenize("<extra_id_0>") == ["<", "extra", "_", "id", "_", "0", ">"]


def test_span_mask_keeps_the_dropped_text_only():
    cfg = t5.T5Config(vocab_size=100, hidden_size=8, num_layers=1, num_decoder_layers=1, num_heads=2,
                      intermediate_size=16, max_position_embeddings=16, num_sentinels=10)
    batch = D.pad_batch([(np.array([5, 99, 3]), np.array([99, 6, 7, 98, 8, 3])), (np.array([9, 3]), np.array([99, 3]))],
                        SPECIAL)
    assert t5_loop.span_mask(batch, cfg).astype(int).tolist() == [[0, 1, 1, 0, 1, 0], [0, 0, 0, 0, 0, 0]]
    token, share = t5_loop.span_baseline([batch], cfg)
    assert token == 6 and abs(share - 1 / 3) < 1e-12  # 6 is one of the three dropped-text tokens


# ---------------------------------------------------------------------------------------------
# the command

@pytest.fixture
def tiny_corpus(tmp_path):
    lines = (REPO / "data" / "sample.txt").read_text().splitlines()
    words = sorted({w for line in lines for w in basic_tokenize(line)} | {"sst", "##2", "sentence", ":", "positive",
                                                                          "negative", "good", "bad", "film"})
    (tmp_path / "vocab.txt").write_text("\n".join(list(SPECIAL_TOKENS) + words) + "\n")
    (tmp_path / "train.txt").write_text("\n".join(lines[:30]) + "\n")
    (tmp_path / "heldout.txt").write_text("\n".join(lines[30:]) + "\n")
    return tmp_path


def _cli(corpus, out, *extra):
    return t5_train.train_t5_cli(["--corpus", str(corpus / "train.txt"), "--heldout", str(corpus / "heldout.txt"),
                                  "--vocab", str(corpus / "vocab.txt"), "--out", str(out), "--max-seq-length", "24",
                                  "--batch-size", "4", "--preset", "t5-micro", *extra])


def test_train_t5_saves_a_run_that_loads_and_fine_tunes_on_sst2(tiny_corpus, tmp_path, capsys):
    out = tmp_path / "run"
    assert _cli(tiny_corpus, out, "--steps", "3", "--eval-interval", "3", "--log-interval", "1") == 0
    text = capsys.readouterr().out
    assert "step 3/3 | loss" in text and "tok/s" in text and "ETA" in text
    assert "eval step 3: held-out target-token loss" in text and "greedy" in text
    assert "held-out baseline: always answering" in text
    for name in ("config.json", "model.safetensors", "vocab.txt", "metrics.jsonl", "curves.png"):
        assert (out / name).is_file(), name
    cfg, params, base = t5_train.load_run(out)
    assert cfg.vocab_size == len(base) + 100 and set(params) == set(t5.param_shapes(cfg))
    glue = tmp_path / "sst2"
    glue.mkdir()
    rows = ["label\tsentence"] + [f"{i % 2}\t{'good' if i % 2 else 'bad'} film" for i in range(12)]
    (glue / "train.tsv").write_text("\n".join(rows) + "\n")
    (glue / "dev.tsv").write_text("\n".join(rows[:7]) + "\n")
    ft = tmp_path / "ft"
    assert t5_train.train_t5_cli(["--mode", "sst2", "--data", str(glue), "--init", str(out), "--out", str(ft),
                                  "--steps", "2", "--batch-size", "4", "--eval-interval", "2"]) == 0
    assert "dev accuracy (greedy decoding, exact word)" in capsys.readouterr().out
    assert (ft / "eval_results.json").is_file()
    # the control without pretraining: --init none, the preset's sizes and the given vocabulary
    assert t5_train.train_t5_cli(["--mode", "sst2", "--data", str(glue), "--init", "none", "--preset", "t5-micro",
                                  "--vocab", str(tiny_corpus / "vocab.txt"), "--out", str(tmp_path / "scratch"),
                                  "--steps", "2", "--batch-size", "4", "--eval-interval", "2"]) == 0
    assert t5_train.load_run(tmp_path / "scratch")[0].hidden_size == t5_train.PRESETS["t5-micro"]["hidden_size"]


def _newest(out):
    """The newest checkpoint's parameters and optimizer state, and its trainer_state.json."""
    ckpt = t5_train.rundir.latest_checkpoint(out)
    params = load_tensors(ckpt / "model.safetensors")[0]
    optim = load_tensors(ckpt / "optimizer.safetensors")[0]
    return {**{f"p.{k}": v for k, v in params.items()}, **{f"o.{k}": v for k, v in optim.items()}}, \
        t5_train.rundir.read_json(ckpt / "trainer_state.json")


def test_train_t5_ctrl_c_saves_a_checkpoint_and_exits_130(tiny_corpus, tmp_path, monkeypatch, capsys):
    calls = []
    real = t5_loop.t5_loss_and_grads

    def ctrl_c_during_step_2(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)  # the loop's handler sets a flag: step 2 finishes, then it saves
        return real(*a, **k)

    monkeypatch.setattr(t5_loop, "t5_loss_and_grads", ctrl_c_during_step_2)
    out = tmp_path / "run"
    assert _cli(tiny_corpus, out, "--steps", "10") == 130
    text = capsys.readouterr().out
    assert "interrupted at step 2" in text and f"python -m minibert train-t5 --resume {out}" in text
    _, state = _newest(out)
    assert state["step"] == 2 and state["status"] == "interrupted"
    assert (out / "model.safetensors").is_file()
    assert _cli(tiny_corpus, out, "--steps", "10") == 1  # kept for --resume
    assert re.search("unfinished train-t5 run.*--resume", capsys.readouterr().err)


def test_train_t5_paused_and_resumed_equals_an_uninterrupted_run(tiny_corpus, tmp_path, capsys):
    """Span corruption draws its masks from the batch source's Generator and the order is drawn
    again every epoch (the tiny corpus has fewer than 9 x 4 chunks): resume must restore both. The
    pause logs nothing of its own: the resumed run's lines are the uninterrupted run's."""
    common = ("--steps", "9", "--log-interval", "2", "--eval-interval", "4", "--checkpoint-interval", "4", "--warmup-steps", "3")
    straight = tmp_path / "straight"
    assert _cli(tiny_corpus, straight, *common) == 0
    part = tmp_path / "part"
    assert _cli(tiny_corpus, part, *common, "--max-steps-this-run", "5") == 0
    text = capsys.readouterr().out
    assert f"paused at step 5/9: saved {part}; continue with `python -m minibert train-t5 --resume {part}`" in text
    paused, state = _newest(part)
    assert state["status"] == "paused" and state["step"] == 5
    assert 0 < state["batches"]["pos"] < state["batches"]["rows"] < 9 * 4  # mid-epoch; epochs end within 9 steps
    assert t5_train.train_t5_cli(["--resume", str(part)]) == 0
    assert "resumed" in capsys.readouterr().out
    a, b = _newest(straight)[0], _newest(part)[0]
    assert a.keys() == b.keys() and len(a) > 2 * len(t5.param_shapes(t5_train.load_run(part)[0]))
    assert all(np.array_equal(a[k], b[k]) for k in a), [k for k in a if not np.array_equal(a[k], b[k])]  # exact: resume
    assert not np.array_equal(paused["p.tok_emb"], a["p.tok_emb"])  # the resumed steps trained
    recs = [t5_train.rundir.read_jsonl(d / "metrics.jsonl")[0] for d in (straight, part)]
    steps = {kind: [[r["step"] for r in rs if r["type"] == kind] for rs in recs] for kind in ("train", "eval")}
    assert steps["train"] == [[2, 4, 6, 8, 9], [2, 4, 6, 8, 9]]
    assert steps["eval"] == [[4, 8, 9], [4, 8, 9]]
    last = [[r for r in rs if r["type"] == "eval"][-1] for rs in recs]
    assert abs(last[0]["loss"] - last[1]["loss"]) < 1e-12 and last[0]["tokens"] == last[1]["tokens"]
    with pytest.raises(ValueError, match="only --minutes and --max-steps-this-run"):
        t5_train.train_t5_cli(["--resume", str(part), "--lr", "0.1"])


def test_train_t5_stops_on_a_nan_loss_without_saving_that_step(tiny_corpus, tmp_path, monkeypatch, capsys):
    calls = []
    real = t5_loop.t5_loss_and_grads

    def nan_at_step_3(*a, **k):
        calls.append(1)
        loss, m, grads = real(*a, **k)
        return (float("nan") if len(calls) == 3 else loss), m, grads

    monkeypatch.setattr(t5_loop, "t5_loss_and_grads", nan_at_step_3)
    out = tmp_path / "run"
    assert _cli(tiny_corpus, out, "--steps", "6", "--checkpoint-interval", "2") == 1
    err = capsys.readouterr().err
    assert "loss is nan" in err and "at step 2" in err and "Last good checkpoint" in err
    assert _newest(out)[1]["step"] == 2


def test_train_t5_refuses_bad_arguments(tiny_corpus, tmp_path, capsys):
    with pytest.raises(ValueError, match="--mode sst2 needs --data"):  # refused with the settings
        t5_train.train_t5_cli(["--mode", "sst2", "--out", str(tmp_path / "x")])
    with pytest.raises(ValueError, match="--corpus needs --heldout and --vocab"):  # refused with the settings
        t5_train.train_t5_cli(["--corpus", str(tmp_path / "c.txt"), "--out", str(tmp_path / "z")])
    assert not (tmp_path / "x").exists() and not (tmp_path / "z").exists()
    with pytest.raises(ValueError, match="--steps must be at least 1"):
        _cli(tiny_corpus, tmp_path / "y", "--steps", "0")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "file.txt").write_text("x")
    assert _cli(tiny_corpus, tmp_path / "other", "--steps", "1") == 1
    assert "already holds files of its own, not a train-t5 run" in capsys.readouterr().err
    with pytest.raises(ValueError, match="not a train-t5 run directory"):
        t5_train.load_run(tmp_path / "other")


def test_train_t5_resume_refuses_a_last_eval_of_the_wrong_type(tiny_corpus, tmp_path, capsys):
    """trainer_state.json's last_eval a list was taken as it was (issue 56's probe): the run's own
    fields are typed like the loop's (t5.STATE_FIELDS, io/jsonfile.check_fields)."""
    out = tmp_path / "run"
    assert _cli(tiny_corpus, out, "--steps", "4", "--checkpoint-interval", "2", "--max-steps-this-run", "2") == 0
    state_file = next((out / "checkpoints").glob("step-*")) / "trainer_state.json"
    state_file.write_text(json.dumps({**json.loads(state_file.read_text()), "last_eval": [1]}))
    capsys.readouterr()
    assert main(["train-t5", "--resume", str(out)]) == 1
    assert "trainer_state.json: last_eval is [1]; expected null or the last evaluation" in capsys.readouterr().err
