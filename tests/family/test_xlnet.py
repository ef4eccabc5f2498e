"""XLNet (minibert/family/xlnet.py, train/xlnet.py, train/xlnet_command.py): float64 gradient checks of the masked
attention, the two-stream attention (both streams, every input and parameter) and the whole model
(sampled entries of every tensor) on both backends; what the query stream may and may not see under
a fixed order; the masks' invariants; partial prediction; batch errors; save/load; the driver on the
training loop (its run directory, Ctrl-C, NaN stop, bit-exact resume)."""
import json
import math

import numpy as np
import pytest
from corpora import REPO

from minibert.__main__ import main
from minibert.analysis import gradcheck as gc
from minibert.family import xlnet
from minibert.family.xlnet import XLNetConfig, XLNetForPermutationLM
from minibert.train import xlnet_command as xlnet_train

TINY = dict(vocab_size=30, hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=16,
            max_position_embeddings=12, pred_k=3)


def perturbed_params(cfg, seed=0):
    """Away from the init's zero biases and unit LayerNorms, so a forgotten term cannot pass."""
    rng = np.random.default_rng(seed + 100)
    return {k: v + 0.1 * rng.standard_normal(v.shape) for k, v in xlnet.init_params(cfg, seed, np.float64).items()}


def tiny_batch(rng, B=3, T=7, V=30, pred_k=3):
    """Random ids and orders; sequence 2 (when B > 2) has two padding positions at the end."""
    ids = rng.integers(5, V, (B, T))
    mask = np.ones((B, T), dtype=np.int64)
    mask[2:3, T - 2:] = 0
    ids[mask == 0] = 0
    rank = xlnet.sample_orders(mask, rng)
    return {"input_ids": ids, "input_mask": mask, "perm_rank": rank,
            "target_mask": xlnet.partial_targets(rank, mask, pred_k)}


def ops_for(backend):
    from minibert.backend import get_ops

    return get_ops(backend)


# ---------------------------------------------------------------------------------------------
# gradient checks

def test_masked_attention_backward_matches_numerical_with_an_empty_row():
    rng = np.random.default_rng(0)
    B, NH, T, HS = 2, 2, 5, 3
    mask = np.ones((B, T), dtype=np.int64)
    mask[1, 3:] = 0
    rank = xlnet.sample_orders(mask, rng)
    _, visible = xlnet.two_stream_masks(rank, mask)  # the query mask: the first of each order sees nothing
    assert (visible.sum(-1) == 0).any()
    arrays = dict(q=rng.standard_normal((B, NH, T, HS)), k=rng.standard_normal((B, NH, T, HS)),
                  v=rng.standard_normal((B, NH, T, HS)))
    fwd = lambda q, k, v: xlnet.masked_attention_forward(q, k, v, visible)  # noqa: E731
    checks = gc.layer_check("masked attention", fwd, arrays, xlnet.masked_attention_backward, rng, verbose=False)
    assert len(checks) == 3 and all(checks), [c.row() for c in checks]
    out, cache = fwd(**arrays)
    empty = visible.sum(-1) == 0  # (B, T)
    assert np.abs(cache.att.sum(-1)[np.broadcast_to(empty[:, None], cache.att.shape[:-1])]).max() < 1e-300
    assert np.abs(out.transpose(0, 2, 1, 3)[empty]).max() < 1e-300  # reads nothing


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_two_stream_attention_backward_matches_numerical_both_streams_every_input(backend):
    """h, g and the four parameters, every entry, against sum(a_h * dout_h) + sum(a_g * dout_g)."""
    ops = ops_for(backend)
    rng = np.random.default_rng(1)
    B, T, C, NH = 2, 5, 6, 2
    mask = np.ones((B, T), dtype=np.int64)
    mask[0, 4] = 0
    content, query = xlnet.two_stream_masks(xlnet.sample_orders(mask, rng), mask)
    arrays = dict(h=rng.standard_normal((B, T, C)), g=rng.standard_normal((B, T, C)),
                  w_qkv=0.5 * rng.standard_normal((C, 3 * C)), b_qkv=0.1 * rng.standard_normal(3 * C),
                  w_out=0.5 * rng.standard_normal((C, C)), b_out=0.1 * rng.standard_normal(C))
    dout_h, dout_g = rng.standard_normal((B, T, C)), rng.standard_normal((B, T, C))

    def f():
        (a_h, a_g), _ = xlnet.two_stream_attention_forward(*arrays.values(), content, query, NH, ops)
        return np.sum(a_h * dout_h) + np.sum(a_g * dout_g)

    _, cache = xlnet.two_stream_attention_forward(*arrays.values(), content, query, NH, ops)
    grads = xlnet.two_stream_attention_backward(dout_h, dout_g, cache, NH, ops)
    for (name, x), g in zip(arrays.items(), grads):
        check = gc.compare(f"two-stream attention: d{name}", g, gc.numerical_grad_scalar(f, x), verbose=False)
        assert check, check.row()
    # each stream reaches what it should: the content output depends on g not at all
    (_, _), c0 = xlnet.two_stream_attention_forward(*arrays.values(), content, query, NH, ops)
    _, dg_from_h, *_ = xlnet.two_stream_attention_backward(dout_h, np.zeros_like(dout_g), c0, NH, ops)
    assert np.abs(dg_from_h).max() < 1e-300


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_xlnet_model_backward_matches_numerical_every_tensor(backend):
    """The whole model, sampled entries of every tensor (query_emb, the shared embedding
    LayerNorm and the tied decoder included), float64."""
    cfg = XLNetConfig(**TINY)
    rng = np.random.default_rng(2)
    model = XLNetForPermutationLM(cfg, params=perturbed_params(cfg))
    model.ops = ops_for(backend)
    batch = tiny_batch(rng)
    _, grads = model.loss_and_grads(batch)
    assert list(grads) == list(model.params)
    for name, p in model.params.items():
        assert grads[name].shape == p.shape, name
        idx = gc.sampled_indices(p.shape, 4, rng)
        num = gc.numerical_grad_scalar(lambda: model.loss_and_grads(batch, compute_grads=False)[0], p, indices=idx)
        sel = tuple(np.array(i) for i in zip(*idx))
        check = gc.compare(f"xlnet model: {name}", grads[name][sel], num[sel], verbose=False)
        assert check, check.row()
    assert np.abs(grads["query_emb"]).max() > 1e-6  # the query stream is trained


# ---------------------------------------------------------------------------------------------
# what the query stream sees

def last_streams(params, cfg, batch):
    _, _, _, (h, g) = xlnet.xlnet_forward(params, cfg, batch, want_streams=True)
    return h, g


def test_query_stream_does_not_see_its_own_or_later_tokens_but_sees_earlier_ones():
    cfg = XLNetConfig(**TINY)
    params = perturbed_params(cfg, 3)
    rng = np.random.default_rng(3)
    T = 7
    batch = tiny_batch(rng, B=1, T=T)
    rank = batch["perm_rank"][0]
    i = int(np.flatnonzero(rank == 4)[0])  # a target in the middle of the order
    _, g0 = last_streams(params, cfg, batch)
    h0, _ = last_streams(params, cfg, batch)

    def changed(position):
        ids = batch["input_ids"].copy()
        ids[0, position] = 5 + (ids[0, position] - 5 + 7) % 25  # another token
        return last_streams(params, cfg, {**batch, "input_ids": ids})

    h_own, g_own = changed(i)
    assert np.abs(g_own[0, i] - g0[0, i]).max() < 1e-12  # its own token: invisible to g_i
    assert np.abs(h_own[0, i] - h0[0, i]).max() > 1e-6  # ... but the content stream h_i reads it
    for j in np.flatnonzero(rank > 4):  # later in the order: invisible
        assert np.abs(changed(j)[1][0, i] - g0[0, i]).max() < 1e-12, j
    for j in np.flatnonzero(rank < 4):  # earlier in the order: seen
        assert np.abs(changed(j)[1][0, i] - g0[0, i]).max() > 1e-6, j


def test_padding_changes_no_output_at_real_positions():
    cfg = XLNetConfig(**TINY)
    params = perturbed_params(cfg, 4)
    batch = tiny_batch(np.random.default_rng(4))
    loss0, _, _, (h0, g0) = xlnet.xlnet_forward(params, cfg, batch, want_streams=True)
    ids = batch["input_ids"].copy()
    ids[2, -2:] = [17, 23]  # different tokens at the padding positions
    loss1, _, _, (h1, g1) = xlnet.xlnet_forward(params, cfg, {**batch, "input_ids": ids}, want_streams=True)
    real = batch["input_mask"] > 0
    assert np.abs(h1[real] - h0[real]).max() < 1e-12 and np.abs(g1[real] - g0[real]).max() < 1e-12
    assert abs(loss1 - loss0) < 1e-12


# ---------------------------------------------------------------------------------------------
# masks, orders, partial prediction

@pytest.mark.parametrize("seed", range(5))
def test_masks_invariants(seed):
    rng = np.random.default_rng(seed)
    B, T = 4, 9
    mask = np.ones((B, T), dtype=np.int64)
    for b in range(B):
        mask[b, T - b * 2:] = 0  # 0, 2, 4, 6 padding positions
    rank = xlnet.sample_orders(mask, rng)
    content, query = xlnet.two_stream_masks(rank, mask)
    real = mask > 0
    diag_c = np.diagonal(content, axis1=1, axis2=2)  # (B, T)
    np.testing.assert_array_equal(diag_c, real)  # the content stream sees itself (real tokens)
    assert not np.diagonal(query, axis1=1, axis2=2).any()  # the query stream never sees its own content
    assert not content[~real].any() and not query[~real].any()  # padding rows see nothing
    for m in (content, query):
        assert not m.transpose(0, 2, 1)[~real].any()  # no one sees padding
    assert not (query & ~content).any()  # the query stream sees a subset of the content stream
    np.testing.assert_array_equal(query.sum(-1)[real], rank[real])  # the k-th of the order sees k tokens
    np.testing.assert_array_equal(content.sum(-1)[real], rank[real] + 1)


def test_sample_orders_permutes_the_real_positions_only():
    rng = np.random.default_rng(0)
    mask = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]])
    seen = set()
    for _ in range(50):
        rank = xlnet.sample_orders(mask, rng)
        np.testing.assert_array_equal(np.sort(rank[0, :4]), np.arange(4))
        np.testing.assert_array_equal(rank[0, 4:], [6, 6])
        np.testing.assert_array_equal(np.sort(rank[1]), np.arange(6))
        seen.add(tuple(rank[0, :4]))
    assert len(seen) > 10  # 24 orders of 4 tokens: the draws vary


def test_partial_targets_are_the_last_n_over_k_of_the_order():
    rng = np.random.default_rng(0)
    mask = np.ones((3, 64), dtype=np.int64)
    mask[1, 10:] = 0
    mask[2, 1:] = 0  # one real token: nothing to predict
    rank = xlnet.sample_orders(mask, rng)
    target = xlnet.partial_targets(rank, mask, 6)
    np.testing.assert_array_equal(target.sum(1), [10, 1, 0])  # 64 // 6, 10 // 6, none
    assert (rank[0][target[0]] >= 54).all() and (rank[1][target[1]] == 9).all()
    assert not (target & (mask == 0)).any() and not (target & (rank == 0)).any()
    k1 = xlnet.partial_targets(np.array([[2, 0, 1]]), np.ones((1, 3)), 1)  # K=1: all but the first of the order
    np.testing.assert_array_equal(k1, [[True, False, True]])


def test_check_batch_names_the_problem():
    cfg = XLNetConfig(**TINY)
    batch = tiny_batch(np.random.default_rng(0))
    with pytest.raises(ValueError, match="missing \\['perm_rank'\\]"):
        xlnet.check_batch(cfg, {k: v for k, v in batch.items() if k != "perm_rank"})
    bad = batch["perm_rank"].copy()
    bad[0, :2] = 0
    with pytest.raises(ValueError, match="perm_rank\\[0\\] is not an order"):
        xlnet.check_batch(cfg, {**batch, "perm_rank": bad})
    t = batch["target_mask"].copy()
    t[2, -1] = True
    with pytest.raises(ValueError, match="target_mask\\[2, 6\\] marks a padding position"):
        xlnet.check_batch(cfg, {**batch, "target_mask": t})
    t = batch["target_mask"].copy()
    t[0, int(np.flatnonzero(batch["perm_rank"][0] == 0)[0])] = True
    with pytest.raises(ValueError, match="first token of the order is a target"):
        xlnet.check_batch(cfg, {**batch, "target_mask": t})
    with pytest.raises(ValueError, match="outside the vocabulary"):
        xlnet.check_batch(cfg, {**batch, "input_ids": batch["input_ids"] + 30})
    with pytest.raises(ValueError, match="pred_k=0"):
        XLNetConfig(**{**TINY, "pred_k": 0})


# ---------------------------------------------------------------------------------------------
# model sanity, checkpoint, driver

def test_initial_loss_is_about_log_vocab_and_save_load_round_trips(tmp_path):
    cfg = XLNetConfig(**{**TINY, "vocab_size": 300})
    model = XLNetForPermutationLM(cfg, seed=1)
    batch = tiny_batch(np.random.default_rng(1), B=4, T=12, V=300)
    loss, grads, m = model.loss_grads_metrics(batch)
    assert abs(loss - math.log(300)) < 0.1 and m.count == int(batch["target_mask"].sum())
    model.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "minibert-xlnet"
    again = XLNetForPermutationLM.from_pretrained(tmp_path)
    assert abs(again.loss_and_grads(batch, compute_grads=False)[0] - loss) < 1e-6
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(ValueError, match="model_type 'bert'"):
        XLNetForPermutationLM.from_pretrained(tmp_path)


def test_model_overfits_one_batch():
    from minibert.optim import AdamW

    cfg = XLNetConfig(**{**TINY, "hidden_size": 16, "intermediate_size": 32})
    model = XLNetForPermutationLM(cfg, seed=0, dtype=np.float64)
    batch = tiny_batch(np.random.default_rng(5), B=2, T=8)
    opt = AdamW(model.params, lr=1e-2, weight_decay=0.0, bias_correction=True, fused=False)
    first = model.loss_and_grads(batch, compute_grads=False)[0]
    for _ in range(60):
        _, grads = model.loss_and_grads(batch)
        opt.step(model.params, grads)
    assert model.loss_and_grads(batch, compute_grads=False)[0] < 0.1 * first


def small_corpus(tmp_path):
    from minibert.text.tokenizer import BertTokenizer

    src = REPO / "data" / "sample.txt"
    text = src.read_text(encoding="utf-8")
    words = sorted({w for line in text.splitlines() for w in BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]",
                                                                              "[MASK]"]).basic_tokenize(line)})
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n", encoding="utf-8")
    return src, vocab


SMALL = ("--set", "hidden_size=16", "--set", "intermediate_size=32", "--set", "max_seq_length=16", "--set", "batch_size=4",
         "--set", "eval_examples=8", "--set", "warmup_steps=3")


def _cli(tmp_path, out, *extra):
    src, vocab = small_corpus(tmp_path)
    return xlnet_train.train_xlnet_cli(["--corpus", str(src), "--heldout", str(src), "--vocab", str(vocab),
                                        "--out", str(out), *SMALL, *extra])


def _newest(out):
    """The newest checkpoint's parameters and optimizer state, and its trainer_state.json."""
    from minibert.io.tensorfile import load_tensors

    ckpt = xlnet_train.rundir.latest_checkpoint(out)
    params = load_tensors(ckpt / "model.safetensors")[0]
    optim = load_tensors(ckpt / "optimizer.safetensors")[0]
    return {**{f"p.{k}": v for k, v in params.items()}, **{f"o.{k}": v for k, v in optim.items()}}, \
        xlnet_train.rundir.read_json(ckpt / "trainer_state.json")


@pytest.fixture
def no_fast(monkeypatch):
    monkeypatch.delenv("MINIBERT_FAST", raising=False)


def test_train_xlnet_writes_a_run_on_the_training_loop(tmp_path, capsys, no_fast):
    out = tmp_path / "run"
    assert _cli(tmp_path, out, "--steps", "4", "--set", "eval_interval=2", "--set", "log_interval=1") == 0
    text = capsys.readouterr().out
    assert "step 4/4 | loss" in text and "acc" in text and "tok/s" in text and "ETA" in text
    assert "eval step 2: held-out loss" in text and "held-out (8 sequences" in text
    for name in ("config.json", "model.safetensors", "vocab.txt", "metrics.jsonl", "curves.png", "run.json"):
        assert (out / name).is_file(), name
    recs = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in recs if r["type"] == "eval"]
    assert [r["step"] for r in evals] == [2, 4] and all(r["predicted"] > 0 for r in evals)
    assert evals[1]["loss"] < evals[0]["loss"]  # 4 steps with warmup capped at half: it moved
    assert [r["step"] for r in recs if r["type"] == "train"] == [1, 2, 3, 4]
    params, state = _newest(out)
    assert state["step"] == 4 and state["status"] == "done" and state["total_steps"] == 4
    loaded = XLNetForPermutationLM.from_pretrained(out)  # the published top-level model
    assert all(np.array_equal(loaded.params[k], params[f"p.{k}"]) for k in loaded.params)  # exact: the saved bytes
    assert _cli(tmp_path, out, "--steps", "2") == 0  # a finished run is replaced without --overwrite
    assert _newest(out)[1]["step"] == 2
    xlnet_train.rundir.write_run(out, "train-tiny", {})  # another command's run is refused
    assert _cli(tmp_path, out, "--steps", "2") == 1
    assert "already holds a train-tiny run, not a train-xlnet run" in capsys.readouterr().err
    with pytest.raises(ValueError, match="pred_k"):
        xlnet_train.XLNetTrainConfig.parse_set(["pred_k=x"])


def test_train_xlnet_ctrl_c_saves_refuses_to_overwrite_and_a_second_one_aborts(tmp_path, monkeypatch, capsys,
                                                                                no_fast):
    import os
    import signal

    from minibert.train import xlnet as xlnet_loop

    calls = []
    real = xlnet_loop.XLNetModel.loss_grads_metrics

    def ctrl_c(presses):
        def step(self, *a, **k):
            calls.append(1)
            if len(calls) == 2:  # during step 2: the first press lets the step finish, a second aborts
                for _ in range(presses):
                    os.kill(os.getpid(), signal.SIGINT)
            return real(self, *a, **k)
        return step

    monkeypatch.setattr(xlnet_loop.XLNetModel, "loss_grads_metrics", ctrl_c(1))
    out = tmp_path / "run"
    assert _cli(tmp_path, out, "--steps", "10") == 130
    text = capsys.readouterr().out
    assert "interrupted at step 2" in text and f"python -m minibert train-xlnet --resume {out}" in text
    _, state = _newest(out)
    assert state["step"] == 2 and state["status"] == "interrupted"
    assert main(["train-xlnet", "--resume", str(out), "--steps", "3"]) == 1  # resume keeps the settings
    assert "only --minutes and --max-steps-this-run" in capsys.readouterr().err
    assert _cli(tmp_path, out, "--steps", "10") == 1  # kept for --resume
    assert (f"unfinished train-xlnet run (stopped at step 2 of 10); nothing was written. Continue it with "
            f"`python -m minibert train-xlnet --resume {out}`") in capsys.readouterr().err
    calls.clear()
    monkeypatch.setattr(xlnet_loop.XLNetModel, "loss_grads_metrics", ctrl_c(2))
    assert _cli(tmp_path, out, "--steps", "10", "--set", "checkpoint_interval=1", "--overwrite") == 130
    assert "aborted at step 1 by a second Ctrl-C without saving" in capsys.readouterr().err
    _, state = _newest(out)
    # the step-1 checkpoint, nothing of step 2 (--overwrite: the checkpoint the new run is swapped in at, a pause)
    assert state["step"] == 1 and state["status"] == "paused"


def test_train_xlnet_paused_and_resumed_equals_an_uninterrupted_run(tmp_path, capsys, no_fast):
    """The windows and their factorisation orders come from the batch source's Generator, which the
    checkpoint keeps: a run paused after 3 steps and resumed ends with the same bits."""
    common = ("--steps", "7", "--set", "log_interval=2", "--set", "eval_interval=3", "--set", "checkpoint_interval=3")
    straight, part = tmp_path / "straight", tmp_path / "part"
    assert _cli(tmp_path, straight, *common) == 0
    assert _cli(tmp_path, part, *common, "--max-steps-this-run", "4") == 0
    text = capsys.readouterr().out
    assert f"paused at step 4/7: saved {part}; continue with `python -m minibert train-xlnet --resume {part}`" in text
    paused, state = _newest(part)
    assert state["status"] == "paused" and state["step"] == 4 and state["batches"]["tokens"] > 0
    assert xlnet_train.train_xlnet_cli(["--resume", str(part)]) == 0
    assert "resumed" in capsys.readouterr().out
    a, b = _newest(straight)[0], _newest(part)[0]
    assert a.keys() == b.keys() and any(k.startswith("o.m.") for k in a) and any(k.startswith("p.") for k in a)
    assert all(np.array_equal(a[k], b[k]) for k in a), [k for k in a if not np.array_equal(a[k], b[k])]  # exact
    assert not np.array_equal(paused["p.query_emb"], a["p.query_emb"])  # the resumed steps trained
    recs = [xlnet_train.rundir.read_jsonl(d / "metrics.jsonl")[0] for d in (straight, part)]
    steps = {kind: [[r["step"] for r in rs if r["type"] == kind] for rs in recs] for kind in ("train", "eval")}
    assert steps["train"] == [[2, 4, 6, 7], [2, 4, 6, 7]] and steps["eval"] == [[3, 6, 7], [3, 6, 7]]
    last = [[r for r in rs if r["type"] == "eval"][-1] for rs in recs]
    assert abs(last[0]["loss"] - last[1]["loss"]) < 1e-12 and last[0]["predicted"] == last[1]["predicted"]


def test_train_xlnet_stops_on_a_nan_loss_without_saving_that_step(tmp_path, monkeypatch, capsys, no_fast):
    from minibert.train import xlnet as xlnet_loop

    calls = []
    real = xlnet_loop.XLNetModel.loss_grads_metrics

    def nan_at_step_3(self, *a, **k):
        r = real(self, *a, **k)
        calls.append(1)
        return r._replace(loss=float("nan")) if len(calls) == 3 else r

    monkeypatch.setattr(xlnet_loop.XLNetModel, "loss_grads_metrics", nan_at_step_3)
    out = tmp_path / "run"
    assert _cli(tmp_path, out, "--steps", "6", "--set", "checkpoint_interval=2", "--set", "eval_interval=100") == 1
    err = capsys.readouterr().err
    assert "loss is nan" in err and "at step 2" in err and "Last good checkpoint" in err
    assert _newest(out)[1]["step"] == 2


def test_train_xlnet_cli_bad_settings_give_one_error_line(capsys, tmp_path):
    assert main(["train-xlnet", "--set", "bogus=1", "--out", str(tmp_path / "r")]) == 1
    assert capsys.readouterr().err.strip().startswith("error: --set 'bogus=1': unknown setting 'bogus'")
    assert main(["train-xlnet", "--set", "max_seq_length=1", "--out", str(tmp_path / "r")]) == 1
    assert "max_seq_length=1" in capsys.readouterr().err
    assert main(["train-xlnet", "--corpus", "x.txt", "--out", str(tmp_path / "r")]) == 1
    assert "--corpus needs --heldout and --vocab" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()  # nothing written before the settings are checked


def test_mlm_perplexity_by_input_splits_the_reported_number():
    """The BERT side of docs/family.md's comparison: the split covers every prediction once, and
    "all" is the perplexity of the model's own MLM loss on the same features."""
    from minibert.bert import BertForPreTraining
    from minibert.model import BertConfig

    cfg = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=16)
    model = BertForPreTraining(cfg, seed=0)
    rng = np.random.default_rng(7)
    feats = gc.random_batch(cfg, B=5, T=12, P=4, rng=rng)
    ids = feats["input_ids"].copy()
    rows = np.arange(5)
    ids[rows, feats["masked_lm_positions"][:, 0]] = 4  # [MASK]
    ids[rows, feats["masked_lm_positions"][:, 1]] = feats["masked_lm_ids"][:, 1]  # the target itself
    feats = {**feats, "input_ids": ids}
    split = xlnet_train.mlm_perplexity_by_input(model, feats, mask_id=4, batch_size=2)
    assert split["all"]["count"] == int((feats["masked_lm_weights"] > 0).sum())
    assert sum(split[k]["count"] for k in ("[MASK]", "same", "random")) == split["all"]["count"]
    assert split["[MASK]"]["count"] >= 1 and split["same"]["count"] >= 1  # both kinds were made above
    loss = model.loss_grads_metrics(feats, compute_grads=False).metrics.mlm_loss
    assert abs(math.log(split["all"]["perplexity"]) - loss) < 1e-4


def test_train_xlnet_resume_refuses_a_last_eval_of_the_wrong_type(tmp_path, capsys, no_fast):
    """trainer_state.json's last_eval a string was taken as it was (issue 56's probe): the run's own
    fields are typed like the loop's (xlnet.STATE_FIELDS, io/jsonfile.check_fields)."""
    out = tmp_path / "run"
    assert _cli(tmp_path, out, "--steps", "4", "--set", "checkpoint_interval=2", "--max-steps-this-run", "2") == 0
    state_file = xlnet_train.rundir.latest_checkpoint(out) / "trainer_state.json"
    state_file.write_text(json.dumps({**json.loads(state_file.read_text()), "last_eval": "x"}))
    capsys.readouterr()
    assert xlnet_train.train_xlnet_cli(["--resume", str(out)]) == 1
    assert "trainer_state.json: last_eval is 'x'; expected null or the last evaluation" in capsys.readouterr().err
