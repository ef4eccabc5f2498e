"""Fine-tuning on a small data set of your own (issue 55): early stopping on the dev metric
(`--set patience=N`, its count resumed bit-exactly), class weights in the loss (`--set
class_weights=balanced` or per label, the weighted cross-entropy's backward checked in float64),
the recipe's epochs raised so a small data set gets about FEW_STEPS steps, and the per-class dev
scores of the best model in dev_report.json, the model card and the last line."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from corpora import tiny_pretrained, unbalanced_reviews

from minibert import layers
from minibert.__main__ import main
from minibert.finetune.commands import FEW_STEPS, build_run, epochs_for_small_data
from minibert.finetune.gradchecks import check_weighted_classifier
from minibert.finetune.run import DEV_REPORT, FinetuneConfig, FinetuneRun, class_weight_vector, parse_class_weights
from minibert.loop import engine
from minibert.loop.launch import begin

WORDS = ["good", "great", "fun", "bad", "awful", "dull", "film", "the", "was"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A tiny pretrained model and an unbalanced text,label CSV pair (3 neg : 1 pos)."""
    return unbalanced_reviews(tmp_path_factory.mktemp("small"))


def _finetune(files, out, *extra):
    return main(["finetune", "custom", "--train", str(files / "train.csv"), "--dev", str(files / "dev.csv"),
                 "--init", str(files / "pre"), "--out", str(out), "--batch-size", "8", "--max-seq-length", "16",
                 *map(str, extra)])


def _cfg(files, out, **kw):
    return FinetuneConfig(task="custom", train_file=str(files / "train.csv"), dev_file=str(files / "dev.csv"),
                          init=str(files / "pre"), out=str(out), batch_size=8, max_seq_length=16, **kw)


def _records(out):
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


# --- early stopping --------------------------------------------------------------------------

def test_patience_stops_after_evaluations_without_a_better_dev_score(files, tmp_path, capsys):
    out = tmp_path / "run"
    # lr this small moves nothing: every evaluation after the first ties the best, none beats it
    # (by macro-F1, what your own classification task is kept by)
    assert _finetune(files, out, "--epochs", 10, "--lr", 1e-9, "--dropout", 0, "--set", "patience=2", "--quiet") == 0
    said = capsys.readouterr().out
    evals = [r for r in _records(out) if r["type"] == "eval"]
    assert [r["step"] for r in evals] == [6, 12, 18]  # the first, then 2 without a better one; 60 steps were planned
    stop = [r for r in _records(out) if r["type"] == "early_stop"]
    assert len(stop) == 1 and stop[0]["step"] == 18 and stop[0]["patience"] == 2 and stop[0]["metric"] == "macro_f1"
    run = json.loads((out / "run.json").read_text())
    assert run["settings"]["patience"] == 2 and run["best"]["step"] == 6  # the best model kept: the first
    assert run["early_stop"] == {"step": 18, "total_steps": 60, "patience": 2, "metric": "macro_f1", "best_step": 6}
    assert "done (early stop at step 18 of 60, patience 2): best dev" in said  # shown under --quiet too
    assert "Stopped early at step 18 of 60" in (out / "README.md").read_text()


def test_an_early_stopped_run_resumed_stops_at_the_same_step_with_the_same_bits(files, tmp_path):
    def cfg(out):
        return _cfg(files, out, epochs=10, lr=1e-9, patience=3, hidden_dropout_prob=0.1,
                    attention_probs_dropout_prob=0.1)

    straight = build_run(cfg(tmp_path / "a"), verbose=False)
    assert engine.run(straight, loop := begin(straight, False)) == "done" and loop.step == 24  # 1 + 3 evaluations
    paused = build_run(cfg(tmp_path / "b"), verbose=False)
    assert engine.run(paused, begin(paused, False), max_steps=15) == "paused"  # after 2 evaluations: 1 without a better one
    state = json.loads(next((tmp_path / "b" / "checkpoints").glob("step-*/trainer_state.json")).read_text())
    assert state["early_stopping"]["stale_evals"] == 1
    again = build_run(cfg(tmp_path / "b"), verbose=False)
    resumed = begin(again, True)
    assert resumed.stale_evals == 1 and engine.run(again, resumed) == "done" and resumed.step == 24
    for name, p in straight.model.params.items():
        np.testing.assert_array_equal(again.model.params[name], p, err_msg=name)  # exact: same steps, same machine
    strip = lambda recs: [{k: v for k, v in r.items() if k not in ("time", "tokens_per_s")} for r in recs]  # noqa: E731
    assert strip(_records(tmp_path / "a")) == strip(_records(tmp_path / "b"))
    # a resume of the stopped run trains no further
    done = build_run(cfg(tmp_path / "b"), verbose=False)
    loop = begin(done, True)
    assert engine.run(done, loop) == "done" and loop.step == 24


def test_patience_needs_a_dev_set(files, tmp_path):
    run = build_run(_cfg(files, tmp_path / "r", epochs=1), verbose=False)
    run.source.dev = {k: v[:0] for k, v in run.source.dev.items()}
    with pytest.raises(ValueError, match=r"patience=2 stops on the dev score, and the run has no dev examples"):
        FinetuneRun(_cfg(files, tmp_path / "r", epochs=1, patience=2), run.model, run.source, run.tokenizer,
                    run.task_info, verbose=False)


def test_a_negative_patience_is_one_error_line_and_writes_nothing(files, tmp_path, capsys):
    assert _finetune(files, tmp_path / "r", "--set", "patience=-1", "--quiet") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: patience=-1 is out of range")
    assert not (tmp_path / "r").exists()


# --- class weights ---------------------------------------------------------------------------

def _weighted_ce_reference(logits, targets, w):
    """sum_i w[y_i] * nll_i / sum_i w[y_i], written from torch's documentation of CrossEntropyLoss(weight=w)."""
    logp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) \
        - logits.max(-1, keepdims=True)
    nll = -logp[np.arange(len(targets)), targets]
    return (w[targets] * nll).sum() / w[targets].sum()


def test_weighted_cross_entropy_is_the_weighted_mean_and_its_gradient_checks_in_float64():
    rng = np.random.default_rng(3)
    logits, targets, w = rng.standard_normal((7, 4)), rng.integers(0, 4, 7), rng.uniform(0.1, 10.0, 4)
    loss, _ = layers.cross_entropy_forward(logits, targets, class_weights=w)
    assert loss == pytest.approx(_weighted_ce_reference(logits, targets, w), rel=1e-12)
    checks = check_weighted_classifier(np.random.default_rng(0), verbose=False)
    assert len(checks) > 10 and all(checks), [c.row() for c in checks if not c]


def test_equal_class_weights_are_the_plain_loss():
    rng = np.random.default_rng(4)
    logits, targets = rng.standard_normal((5, 3)), rng.integers(0, 3, 5)
    weighted, wc = layers.cross_entropy_forward(logits, targets, class_weights=np.full(3, 2.5))
    plain, pc = layers.cross_entropy_forward(logits, targets)
    assert weighted == pytest.approx(plain, rel=1e-12)
    np.testing.assert_allclose(layers.cross_entropy_backward(1.0, wc), layers.cross_entropy_backward(1.0, pc),
                               rtol=1e-12, atol=1e-15)


def test_balanced_weights_are_scikit_learns_and_per_label_weights_default_to_one():
    y = np.array([0, 0, 0, 1, 2, 2])
    np.testing.assert_allclose(class_weight_vector("balanced", ["a", "b", "c"], y), [6 / 9, 6 / 3, 6 / 6], rtol=1e-15)
    np.testing.assert_allclose(class_weight_vector("c:3, a:0.5", ["a", "b", "c"], y), [0.5, 1.0, 3.0], rtol=0)
    assert parse_class_weights("odd:label:2") == {"odd:label": 2.0}  # the weight follows the last colon


@pytest.mark.parametrize("text, words", [
    ("neg:0", "the weight of 'neg' is '0'; a weight must be a positive finite number"),
    ("neg:-1", "the weight of 'neg' is '-1'"),
    ("neg:inf", "the weight of 'neg' is 'inf'"),
    ("neg:nan", "the weight of 'neg' is 'nan'"),
    ("neg:heavy", "the weight of 'neg' is 'heavy'"),
    ("neg", "'neg' is not LABEL:WEIGHT"),
    ("neg:1,neg:2", "'neg' is named twice"),
    ("neutral:2", "unknown label(s) ['neutral']; the data's labels are ['neg', 'pos']"),
])
def test_bad_class_weights_are_one_error_line_naming_them_and_write_nothing(files, tmp_path, capsys, text, words):
    assert _finetune(files, tmp_path / "r", "--epochs", 1, "--set", f"class_weights={text}", "--quiet") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and words in err[0], err
    assert not (tmp_path / "r").exists()


def test_class_weights_are_refused_outside_classification(tmp_path, capsys):
    tiny_pretrained(tmp_path / "pre", [*VOCAB, "paris", "john"])
    conll = "john B-per\nvisited O\nparis B-loc\n\nthe O\nfilm O\n"
    for split in ("train", "dev"):
        (tmp_path / f"{split}.conll").write_text(conll, encoding="utf-8")
    assert main(["finetune", "custom", "--train", str(tmp_path / "train.conll"), "--dev", str(tmp_path / "dev.conll"),
                 "--init", str(tmp_path / "pre"), "--out", str(tmp_path / "r"), "--epochs", "1", "--quiet",
                 "--set", "class_weights=balanced"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "class_weights weigh the classes of a classifier's loss" in err[0] and "token" in err[0]
    assert not (tmp_path / "r").exists()


def test_a_run_with_class_weights_trains_on_the_weighted_loss_and_records_them(files, tmp_path):
    run = build_run(_cfg(files, tmp_path / "r", epochs=1, class_weights="balanced", hidden_dropout_prob=0.0,
                         attention_probs_dropout_prob=0.0), verbose=False)
    labels = run.source.train["labels"]
    counts = np.bincount(labels, minlength=2)
    np.testing.assert_allclose(run.class_weights, len(labels) / (2 * counts), rtol=1e-15)  # 3 neg : 1 pos
    batch = run.next_batch(0)
    loss, _, _ = run.loss_grads_metrics(batch, None)
    logits = run.model.eval_logits(batch["input_ids"], batch["segment_ids"], batch["input_mask"]).astype(np.float64)
    assert loss == pytest.approx(_weighted_ce_reference(logits, batch["labels"], run.class_weights), rel=1e-5)
    assert loss != pytest.approx(run.model.loss_grads_metrics(batch)[0], rel=1e-6)  # not the plain mean
    assert engine.run(run, begin(run, False)) == "done"
    saved = json.loads((tmp_path / "r" / "run.json").read_text())
    assert saved["settings"]["class_weights"] == "balanced"
    assert saved["class_weights"] == pytest.approx({"neg": 48 / 72, "pos": 48 / 24}, rel=1e-12)


# --- the recipe's steps for a small data set ---------------------------------------------------

def test_the_recipe_raises_epochs_for_small_data_only():
    def cfg(**kw):
        return FinetuneConfig(task="x", init="none", out="o", **{"batch_size": 32, "epochs": 3.0, **kw})
    assert epochs_for_small_data(cfg(), 160) == 20.0  # 5 steps an epoch: 100 steps
    assert epochs_for_small_data(cfg(epochs=1.0), 67_349) is None  # SST-2's recipe: unchanged
    assert epochs_for_small_data(cfg(), 2_490) is None  # RTE's: 234 steps, unchanged
    assert epochs_for_small_data(cfg(max_train_examples=64), 67_349) == 50.0  # the slice is what is trained on
    assert epochs_for_small_data(cfg(epochs=24.0, batch_size=32), 3_394) is None  # WNUT-17's token recipe
    assert all(round(epochs_for_small_data(cfg(), n) * math.ceil(n / 32)) >= FEW_STEPS for n in (1, 31, 160, 1000))


def test_a_small_data_set_gets_about_a_hundred_steps_unless_the_user_says(files, tmp_path, capsys):
    out = tmp_path / "r"
    assert _finetune(files, out, "--set", "patience=1", "--lr", "1e-9") == 0
    said = capsys.readouterr()
    assert ("recipe (small model, classification; docs/finetuning.md): epochs 17 (the recipe's 3, raised for 48 "
            "training features: 102 steps; --epochs or --steps wins)") in said.out
    assert "warning" not in said.err
    run = json.loads((out / "run.json").read_text())
    assert run["total_steps"] == 102 and run["settings"]["epochs"] == 17.0  # exact: a count
    assert run["recipe"] == {"name": "small model, classification", "settings": {"epochs": 17.0},
                             "epochs_raised_from": 3.0}
    assert "the epochs raised from 3" in (out / "README.md").read_text()
    # --steps given: the recipe leaves the epochs alone
    assert _finetune(files, tmp_path / "s", "--steps", 3, "--quiet") == 0
    assert "recipe" not in json.loads((tmp_path / "s" / "run.json").read_text()) or \
        "epochs_raised_from" not in json.loads((tmp_path / "s" / "run.json").read_text())["recipe"]


# --- per-class dev scores of the run -----------------------------------------------------------

def test_the_best_models_per_class_scores_are_kept_and_shown(files, tmp_path, capsys):
    out = tmp_path / "r"
    # the task sst2 scores accuracy only: macro-F1 comes from the per-class report
    data = tmp_path / "sst"
    data.mkdir()
    for split in ("train", "dev"):
        rows = (files / f"{split}.csv").read_text().splitlines()[1:]
        (data / f"{split}.tsv").write_text("sentence\tlabel\n" + "".join(
            f"{r.split(',')[0]}\t{int(r.endswith('pos'))}\n" for r in rows), encoding="utf-8")
    assert main(["finetune", "sst2", "--data", str(data), "--init", str(files / "pre"), "--out", str(out),
                 "--epochs", "3", "--batch-size", "8", "--lr", "3e-3", "--quiet"]) == 0
    said = capsys.readouterr().out.strip().splitlines()
    report = json.loads((out / DEV_REPORT).read_text())
    run = json.loads((out / "run.json").read_text())
    assert report["step"] == run["best"]["step"] and report["labels"] == ["0", "1"]
    assert report["support"] == [9, 3] and sum(map(sum, report["confusion"])) == 12
    hits = sum(report["confusion"][k][k] for k in range(2))
    assert hits / 12 == pytest.approx(run["best"]["accuracy"], rel=1e-12)
    assert report["macro_f1"] == pytest.approx(np.mean(report["f1"]), rel=1e-12)
    assert said[-1].startswith("done: best dev accuracy ") and \
        f"macro-F1 {report['macro_f1']:.4f} at step {run['best']['step']}" in said[-1]  # shown under --quiet
    card = (out / "README.md").read_text()
    assert "| class | precision | recall | F1 | support |" in card and "| gold / predicted | 0 | 1 |" in card
    assert f"| macro-F1 | | | {report['macro_f1']:.4f} | 12 |" in card


def test_the_command_paused_and_resumed_stops_early_with_the_same_bytes_and_record(files, tmp_path, monkeypatch):
    """Through the command line: a run cut off after 9 steps (as a kill leaves it: its last
    checkpoint) and continued with --resume ends as the run that never stopped: the same model
    bytes, the same early stop in run.json, and the recipe's record kept."""
    argv = ["--lr", "1e-9", "--set", "patience=2", "--quiet"]  # no --epochs: the recipe's, raised
    assert _finetune(files, tmp_path / "a", *argv) == 0
    real = engine.run
    with monkeypatch.context() as m:
        m.setattr(engine, "run", lambda run, state, max_steps=None: real(run, state, 9))
        assert _finetune(files, tmp_path / "b", *argv) == 0
    assert json.loads((tmp_path / "b" / "run.json").read_text()).get("early_stop") is None  # not yet
    assert main(["finetune", "--resume", str(tmp_path / "b"), "--quiet"]) == 0
    a, b = (json.loads((tmp_path / d / "run.json").read_text()) for d in "ab")
    assert a["early_stop"]["step"] == 18 and b["early_stop"] == a["early_stop"]
    assert b["recipe"] == a["recipe"] and a["recipe"]["epochs_raised_from"] == 3.0
    assert (tmp_path / "a" / "model.safetensors").read_bytes() == (tmp_path / "b" / "model.safetensors").read_bytes()
