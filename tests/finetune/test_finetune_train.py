"""`python -m minibert finetune` / `predict` end to end on small fixtures: outputs, a resume that
continues bit-exactly, the best model loadable as its class, and bad input that writes nothing."""
from __future__ import annotations

import json

import numpy as np
import pytest

from minibert.loop import engine
from minibert.loop.launch import begin, rundir
from minibert.__main__ import main
from minibert.bert import BertForPreTraining
from minibert.finetune.commands import _parser, build_run, finetune, finetune_settings
from minibert.finetune.models import BertForSequenceClassification, BertForTokenClassification
from minibert.finetune.run import FinetuneConfig
from minibert.model import BertConfig

WORDS = ["good", "great", "fun", "bad", "awful", "dull", "film", "plot", "the", "was", "paris", "john", "visited"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]


@pytest.fixture
def pretrained(tmp_path):
    cfg = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=32)
    BertForPreTraining(cfg, seed=0).save_pretrained(tmp_path / "pre", vocab=VOCAB)
    return tmp_path / "pre"


@pytest.fixture
def sst(tmp_path):
    rng = np.random.default_rng(0)
    d = tmp_path / "sst"
    d.mkdir()
    for split, n in (("train", 64), ("dev", 16)):
        rows = ["sentence\tlabel"]
        for _ in range(n):
            label = int(rng.integers(2))
            words = rng.choice(["good", "great", "fun"] if label else ["bad", "awful", "dull"], 2)
            rows.append(f"the film was {words[0]} {words[1]}\t{label}")
        (d / f"{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return d


def _run(*argv):
    return main(["finetune", *map(str, argv), "--quiet"])


def _cli(*argv):  # the command's steps, raising what main and the launcher print as `error: ...` (exit 1)
    p = _parser()
    args = p.parse_args([*map(str, argv), "--quiet"])
    cfg, chosen = finetune_settings(args, p)
    outcome = finetune(cfg, resume=bool(args.resume), overwrite=args.overwrite, verbose=False, recipe=chosen)
    if outcome.error is not None:
        raise outcome.error
    return outcome.code


def test_finetune_writes_a_model_transformers_layout_and_learns(sst, pretrained, tmp_path, capsys):
    out = tmp_path / "out"
    assert _run("custom", "--format", "glue-single", "--data", sst, "--init", pretrained, "--out", out,
                "--epochs", 6, "--lr", 3e-3, "--batch-size", 8, "--dropout", 0) == 0
    run = json.loads((out / "run.json").read_text())
    assert run["architecture"] == "BertForSequenceClassification" and run["task"]["labels"] == ["0", "1"]
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in records if r["type"] == "eval"]
    assert len(evals) == 6 and run["best"]["accuracy"] == max(e["accuracy"] for e in evals)
    assert run["best"]["accuracy"] >= 0.9  # the words give the label away
    assert (out / "curves.png").stat().st_size > 1000
    model = BertForSequenceClassification.from_pretrained(out)
    assert model.config.id2label == {0: "0", 1: "1"}
    capsys.readouterr()
    assert main(["predict", str(out), "the film was great fun"]) == 0
    assert capsys.readouterr().out.startswith("1  (0 0.")


def test_resume_continues_bit_exactly(sst, pretrained, tmp_path, capsys):
    """A paused run resumed, by the loop and by the command's --resume, ends with the uninterrupted
    run's bits and its metrics.jsonl (the pause logs nothing of its own)."""
    def cfg(out):
        return FinetuneConfig(task="custom", format="glue-single", data=str(sst), init=str(pretrained), out=str(out),
                              epochs=2, lr=1e-3, batch_size=8, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)

    straight = build_run(cfg(tmp_path / "a"), verbose=False)
    assert engine.run(straight, begin(straight, False)) == "done"
    paused = build_run(cfg(tmp_path / "b"), verbose=False)
    assert engine.run(paused, begin(paused, False), max_steps=5) == "paused"
    assert len(rundir.run_state(tmp_path / "b")["window"]) == 5  # log_interval 20: nothing logged yet
    again = build_run(cfg(tmp_path / "b"), verbose=False)
    loop = begin(again, True)
    assert (loop.step, loop.total_steps) == (5, 16) and engine.run(again, loop) == "done"
    for name, p in straight.model.params.items():
        np.testing.assert_array_equal(again.model.params[name], p, err_msg=name)  # exact: same steps, same machine
    recs = [[{k: v for k, v in r.items() if k not in ("time", "tokens_per_s")}
             for r in rundir.read_jsonl(d / rundir.METRICS_FILE)[0]] for d in (tmp_path / "a", tmp_path / "b")]
    assert recs[0] == recs[1] and any("train_acc" in r for r in recs[0])
    # the command's --resume
    paused = build_run(cfg(tmp_path / "c"), verbose=False)
    assert engine.run(paused, begin(paused, False), max_steps=5) == "paused"
    assert main(["finetune", "--resume", str(tmp_path / "c"), "--quiet"]) == 0
    saved = [BertForSequenceClassification.from_pretrained(tmp_path / d).params for d in ("a", "c")]
    for name, p in saved[0].items():
        np.testing.assert_array_equal(saved[1][name], p, err_msg=name)  # exact: same steps, same machine


def test_steps_is_the_runs_length_as_for_every_command(sst, pretrained, tmp_path):
    """steps 0: epochs passes over the data (64 examples, batch 8: 8 steps an epoch); --steps N: N
    steps, the warmup its share of them, the epochs unused."""
    def cfg(**kw):
        return FinetuneConfig(task="custom", format="glue-single", data=str(sst), init=str(pretrained),
                              out=str(tmp_path / "o"), epochs=2, batch_size=8, **kw)

    assert build_run(cfg(), verbose=False).total_steps == 16
    run = build_run(cfg(steps=5, warmup_proportion=0.2), verbose=False)
    assert (run.total_steps, run.warmup_steps) == (5, 1)
    out = tmp_path / "cli"
    assert _run("custom", "--format", "glue-single", "--data", sst, "--init", pretrained, "--out", out,
                "--steps", 3, "--batch-size", 8) == 0
    state = json.loads(next((out / "checkpoints").glob("step-*/trainer_state.json")).read_text())
    assert (state["step"], state["status"]) == (3, "done")
    assert json.loads((out / "run.json").read_text())["total_steps"] == 3


def test_token_classification_run(tmp_path, pretrained):
    d = tmp_path / "ner"
    d.mkdir()
    sentence = "john\tB-person\nvisited\tO\nparis\tB-location\n\nthe\tO\nfilm\tO\n\n"
    for split in ("train", "dev"):
        (d / f"{split}.conll").write_text(sentence * 8, encoding="utf-8")
    out = tmp_path / "ner-out"
    assert _run("custom", "--format", "conll", "--data", d, "--init", pretrained, "--out", out, "--epochs", 30,
                "--lr", 3e-3, "--batch-size", 4, "--dropout", 0) == 0
    assert json.loads((out / "run.json").read_text())["best"]["f1"] == pytest.approx(1.0)
    model = BertForTokenClassification.from_pretrained(out)
    assert sorted(model.config.label2id) == ["B-location", "B-person", "O"]


def test_bad_input_is_named_and_writes_nothing(sst, pretrained, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(ValueError, match="is a file; pass the model directory"):
        _cli("sst2", "--data", sst, "--init", pretrained / "config.json", "--out", out)
    with pytest.raises(ValueError, match="unknown task 'sts'"):
        _cli("sts", "--data", sst, "--init", pretrained, "--out", out)
    other = tmp_path / "vocab.txt"
    other.write_text("\n".join(reversed(VOCAB)) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="differs from the vocabulary of --init"):
        _cli("sst2", "--data", sst, "--init", pretrained, "--out", out, "--vocab", other)
    (sst / "dev.tsv").write_text("sentence\tlabel\nthe film was dull\t2\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"dev.tsv:2.*'2'"):
        _cli("sst2", "--data", sst, "--init", pretrained, "--out", out)
    assert not out.exists()
    out.mkdir()
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(ValueError, match="already holds files of its own, not a finetune run"):
        _cli("sst2", "--data", sst, "--init", pretrained, "--out", out)
    assert (out / "notes.txt").read_text() == "mine"


def test_feature_based_tagger_trains_only_its_head(tmp_path, pretrained):
    d = tmp_path / "ner"
    d.mkdir()
    sentence = "john\tB-person\nvisited\tO\nparis\tB-location\n\nthe\tO\nfilm\tO\n\n"
    for split in ("train", "dev"):
        (d / f"{split}.conll").write_text(sentence * 8, encoding="utf-8")
    cfg = FinetuneConfig(task="custom", format="conll", data=str(d), init=str(pretrained), out=str(tmp_path / "fz"),
                         epochs=40, lr=1e-2, batch_size=4, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, frozen="last")
    run = build_run(cfg, verbose=False)
    before = {k: v.copy() for k, v in run.model.encoder.params.items()}
    assert engine.run(run, begin(run, False)) == "done"
    assert run.best["f1"] == pytest.approx(1.0)
    for k, v in run.model.encoder.params.items():
        np.testing.assert_array_equal(v, before[k])  # exact: the encoder is frozen, never written
    assert set(run.model.params) == {"cls.w", "cls.b"} and (tmp_path / "fz" / "frozen_head.safetensors").is_file()


@pytest.mark.parametrize("tagger", ["linear", "bilstm"])
def test_feature_based_head_gradient_float64(pretrained, tagger):
    from minibert.finetune.frozen import FrozenFeatureTagger
    from minibert.analysis.gradcheck import compare, numerical_grad_scalar

    with pytest.warns(UserWarning, match="newly initialised"):
        enc = BertForTokenClassification.from_pretrained(pretrained, num_labels=3, dtype=np.float64)
    tagger = FrozenFeatureTagger(enc, "last", 3, seed=1, tagger=tagger)
    rng = np.random.default_rng(0)
    for p in tagger.params.values():
        p += (0.3 if tagger.tagger == "bilstm" else 1.0) * rng.standard_normal(p.shape)
    ids = rng.integers(5, len(VOCAB), (2, 6))
    labels = rng.integers(0, 3, (2, 6))
    labels[0, 0] = -100
    mask = np.ones_like(ids)
    mask[1, 4:] = 0  # padding: the BiLSTM's backward direction starts at each row's last real token
    labels[1, 4:] = -100
    batch = dict(input_ids=ids, segment_ids=np.zeros_like(ids), input_mask=mask, labels=labels)
    _, grads, _ = tagger.loss_grads_metrics(batch)
    assert set(grads) == set(tagger.params) == ({"cls.w", "cls.b"} | (
        {f"lstm.{d}.{n}" for d in ("fwd", "bwd") for n in ("wx", "wh", "b")} if tagger.tagger == "bilstm" else set()))
    for name, p in tagger.params.items():
        num = numerical_grad_scalar(lambda: tagger.loss_grads_metrics(batch, compute_grads=False)[0], p)
        assert compare(name, grads[name], num, verbose=False)


def test_a_bilstm_tagger_reads_context_the_frozen_embeddings_lack(tmp_path, pretrained):
    """On the embeddings' output (no context), a word's tag that depends on the NEXT word is out
    of a linear tagger's reach; the BiLSTM tagger learns it from the same frozen features."""
    d = tmp_path / "ctx"
    d.mkdir()
    rows = []
    for first, second in (("john", "visited"), ("john", "the"), ("paris", "visited"), ("paris", "film")):
        tag = "B-x" if second == "visited" else "O"  # "john" / "paris" tagged by what follows
        rows.append(f"{first}\t{tag}\n{second}\tO\n\n")
    for split in ("train", "dev"):
        (d / f"{split}.conll").write_text("".join(rows) * 6, encoding="utf-8")
    f1 = {}
    for tagger, lr in (("linear", 1e-2), ("bilstm", 1e-2)):
        cfg = FinetuneConfig(task="custom", format="conll", data=str(d), init=str(pretrained),
                             out=str(tmp_path / tagger), epochs=30, lr=lr, batch_size=8, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                             frozen="embeddings", frozen_tagger=tagger, seed=0)
        run = build_run(cfg, verbose=False)
        assert engine.run(run, begin(run, False)) == "done"
        f1[tagger] = run.best["f1"]
    assert f1["bilstm"] == pytest.approx(1.0) and f1["linear"] < 0.8, f1


def test_frozen_tagger_needs_frozen():
    with pytest.raises(ValueError, match="--frozen-tagger bilstm goes with --frozen"):
        FinetuneConfig(task="wnut17", init="none", out="unused", frozen_tagger="bilstm").validate()


def test_squad2_finetune_writes_official_scores_and_predict_answers(tmp_path, pretrained, capsys):
    context = "john visited paris . the film was good . " * 3  # 27 words: several windows of 16 tokens
    qas = [{"id": "a", "question": "who visited paris", "is_impossible": False,
            "answers": [{"text": "john", "answer_start": 0}]},
           {"id": "b", "question": "was the plot dull", "is_impossible": True, "answers": []}]
    data = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}
    d = tmp_path / "squad"
    d.mkdir()
    for name in ("train-v2.0.json", "dev-v2.0.json"):
        (d / name).write_text(json.dumps(data), encoding="utf-8")
    out = tmp_path / "sq"
    assert _run("squad2", "--data", d, "--init", pretrained, "--out", out, "--epochs", 2, "--batch-size", 2,
                "--max-seq-length", 16, "--doc-stride", 4) == 0
    scores = json.loads((out / "eval.json").read_text())
    assert scores["total"] == 2 and scores["HasAns_total"] == 1 and scores["NoAns_total"] == 1
    assert {"best_f1", "best_f1_thresh", "exact", "f1"} <= set(scores)
    assert set(json.loads((out / "predictions.json").read_text())) == {"a", "b"}
    assert set(json.loads((out / "null_odds.json").read_text())) == {"a", "b"}
    capsys.readouterr()
    assert main(["predict", str(out), "--question", "who visited paris", "--context", context]) == 0
    shown = capsys.readouterr().out
    assert "window 0: words 0-" in shown and "window 1:" in shown  # the passage needs several windows
    assert "answer: " in shown or "no answer" in shown
    assert main(["predict", str(out), "--question", "who visited paris", "--context", context, "--threshold", "1e9"]) == 0
    assert "answer: " in capsys.readouterr().out  # any span beats a threshold that high
    assert main(["predict", str(out), "--question", "who visited paris", "--context", context, "--threshold=-1e9"]) == 0
    assert "no answer (null score minus best span" in capsys.readouterr().out


@pytest.mark.parametrize("family", ["albert", "electra"])
def test_feature_based_tagger_reads_each_family_encoder(family):
    """The frozen tagger takes its features from the encoder's own hidden_states: ALBERT's
    shared block applied L times, ELECTRA's embedding projection; and it never writes them."""
    from minibert.finetune.frozen import FrozenFeatureTagger

    if family == "albert":
        from minibert.family.albert import AlbertConfig
        from minibert.finetune.albert_tasks import AlbertForTokenClassification as Cls
        cfg = AlbertConfig(vocab_size=40, embedding_size=6, hidden_size=8, num_hidden_layers=3,
                           num_attention_heads=2, intermediate_size=16)
    else:
        from minibert.family.electra import ElectraConfig
        from minibert.finetune.electra_tasks import ElectraForTokenClassification as Cls
        cfg = ElectraConfig(vocab_size=40, embedding_size=6, hidden_size=8, num_hidden_layers=2,
                            num_attention_heads=2, intermediate_size=16)
    enc = Cls(cfg, num_labels=3, seed=0, dtype=np.float64)
    before = {k: v.copy() for k, v in enc.params.items()}
    tagger = FrozenFeatureTagger(enc, "concat_all", 3, seed=1)
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 40, (2, 6))
    states = enc.hidden_states(ids)
    assert len(states) == cfg.num_hidden_layers + 1
    feats = tagger.features(ids)  # (B, T, (L+1)C), the last layer first
    assert feats.shape == (2, 6, (cfg.num_hidden_layers + 1) * 8)
    np.testing.assert_allclose(feats[..., :8], states[-1], atol=1e-12)
    batch = dict(input_ids=ids, segment_ids=np.zeros_like(ids), input_mask=np.ones_like(ids),
                 labels=rng.integers(0, 3, (2, 6)))
    loss, grads, _ = tagger.loss_grads_metrics(batch)
    assert np.isfinite(loss) and set(grads) == {"cls.w", "cls.b"}
    for k, v in enc.params.items():
        np.testing.assert_array_equal(v, before[k])  # exact: the encoder is only read


def test_one_registry_picks_the_task_class_of_every_encoder():
    """`finetune --init` and `predict` pick classes from one table keyed by (config.json's
    model_type, task shape), and one by architecture: every encoder's four classes, each once."""
    import minibert
    from minibert.finetune.heads import SHAPES
    from minibert.finetune.registry import TASK_ARCHITECTURES, TASK_CLASSES, task_class

    assert sorted(TASK_CLASSES) == sorted((m, t) for m in ("albert", "bert", "electra") for t in SHAPES)
    assert TASK_CLASSES[("electra", "sequence")] is minibert.ElectraForSequenceClassification
    for (model_type, shape), cls in TASK_CLASSES.items():
        assert cls.encoder.model_type == model_type and cls.head_shape == shape
        assert TASK_ARCHITECTURES[cls.architecture] is cls and getattr(minibert, cls.architecture) is cls
    assert task_class("albert", "regression") is minibert.AlbertForSequenceClassification
    with pytest.raises(ValueError, match="model_type 'xlnet' has no fine-tuning classes"):
        task_class("xlnet", "token")
