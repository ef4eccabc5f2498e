"""--set main_metric through the command: the checkpoint kept, patience and the done line all
follow the metric named. The dev scores are scripted (the run's scorer replaced), so which
evaluation is best by each metric is known by construction; everything else is the real run."""
from __future__ import annotations

import json

import pytest
from corpora import unbalanced_reviews

from minibert.__main__ import main
from minibert.finetune import run as run_module

# three dev evaluations (steps 6, 12, 18): each metric is best at another one
SCRIPT = [{"accuracy": 0.80, "macro_f1": 0.40, "mcc": 0.10, "f1:pos": 0.00},
          {"accuracy": 0.70, "macro_f1": 0.65, "mcc": 0.30, "f1:pos": 0.50},
          {"accuracy": 0.75, "macro_f1": 0.60, "mcc": 0.35, "f1:pos": 0.55}]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A tiny pretrained model and an unbalanced text,label CSV pair (3 neg : 1 pos)."""
    return unbalanced_reviews(tmp_path_factory.mktemp("main"))


def _scripted(monkeypatch, script):
    calls = iter(script)

    def score(data, pred):  # the task's metrics, in its order, from the script
        scores = next(calls)
        return {name: scores[name] for name in data.task.metrics}
    monkeypatch.setattr(run_module, "score", score)


def _finetune(files, out, *extra) -> int:
    return main(["finetune", "custom", "--train", str(files / "train.csv"), "--dev", str(files / "dev.csv"),
                 "--init", str(files / "pre"), "--out", str(out), "--epochs", "3", "--batch-size", "8", "--quiet",
                 *extra])


@pytest.mark.parametrize("metric,best_step", [("accuracy", 6), ("macro_f1", 12), ("mcc", 18), ("f1:pos", 18),
                                              (None, 12)])
def test_the_checkpoint_kept_is_the_best_by_the_main_metric(files, tmp_path, monkeypatch, capsys, metric, best_step):
    _scripted(monkeypatch, SCRIPT)
    out = tmp_path / "run"
    assert _finetune(files, out, *(["--set", f"main_metric={metric}"] if metric else [])) == 0
    run = json.loads((out / "run.json").read_text())
    main_metric = metric or "macro_f1"  # your own classification task's default
    assert run["task"]["main_metric"] == main_metric and run["best"]["step"] == best_step
    assert json.loads((out / "dev_report.json").read_text())["step"] == best_step  # what was saved with it
    done = capsys.readouterr().out.strip().splitlines()[-1]
    shown = "macro-F1" if main_metric == "macro_f1" else main_metric
    assert done.startswith(f"done: best dev {shown} {SCRIPT[best_step // 6 - 1][main_metric]:.4f} (kept by it)")
    assert f"at step {best_step};" in done


def test_patience_watches_the_main_metric(files, tmp_path, monkeypatch, capsys):
    rising_accuracy = [{"accuracy": 0.5 + 0.1 * i, "macro_f1": 0.6 - 0.1 * i, "mcc": 0.0, "f1:pos": 0.0}
                       for i in range(3)]
    _scripted(monkeypatch, rising_accuracy)
    assert _finetune(files, tmp_path / "a", "--set", "patience=1", "--set", "main_metric=accuracy") == 0
    assert json.loads((tmp_path / "a/run.json").read_text()).get("early_stop") is None  # accuracy kept rising
    _scripted(monkeypatch, rising_accuracy)
    assert _finetune(files, tmp_path / "m", "--set", "patience=1") == 0  # macro_f1, the default, fell at once
    stop = json.loads((tmp_path / "m/run.json").read_text())["early_stop"]
    assert stop["step"] == 12 and stop["metric"] == "macro_f1" and stop["best_step"] == 6


def test_a_metric_the_task_lacks_is_refused_before_anything_is_written(files, tmp_path, capsys):
    out = tmp_path / "run"
    assert _finetune(files, out, "--set", "main_metric=f1:maybe") == 1
    err = capsys.readouterr().err
    assert "main_metric='f1:maybe' is not a dev metric" in err and "f1:neg, f1:pos" in err
    assert not out.exists()


def test_the_start_up_line_names_the_class_weights_and_the_patience_in_use(files, tmp_path, capsys):
    assert main(["finetune", "custom", "--train", str(files / "train.csv"), "--dev", str(files / "dev.csv"),
                 "--init", str(files / "pre"), "--out", str(tmp_path / "w"), "--epochs", "1", "--batch-size", "8",
                 "--set", "class_weights=balanced", "--set", "patience=2"]) == 0
    start = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("BertForSequenceClass"))
    # 36 neg and 12 pos: n / (K * count) = 48 / 72 and 48 / 24
    assert "class weights neg=0.667 pos=2 (balanced)" in start and "patience 2 on dev macro_f1" in start


def test_dev_split_through_the_command(files, tmp_path, capsys):
    """One file: a quarter of each label kept for dev, said at the start, recorded, and the same
    examples again for the same seed."""
    def run(out, seed):
        assert main(["finetune", "custom", "--train", str(files / "train.csv"), "--dev-split", "0.25", "--init",
                     str(files / "pre"), "--out", str(out), "--epochs", "1", "--batch-size", "8", "--seed", str(seed)]) == 0
        return capsys.readouterr().out
    said = run(tmp_path / "a", 3)
    assert "36 train / 12 dev examples" in said and "dev is 25% of" in said and "stratified by label, seed 3" in said
    task = json.loads((tmp_path / "a/run.json").read_text())["task"]
    assert task["dev_split"] == {"fraction": 0.25, "seed": 3, "stratified": True, "train": 36, "dev": 12}
    assert json.loads((tmp_path / "a/dev_report.json").read_text())["support"] == [9, 3]  # 36 neg, 12 pos: a quarter
    card = (tmp_path / "a/README.md").read_text()
    assert "25% of it split off by --dev-split (stratified by label, seed 3" in card
    assert "neg (27), pos (9)" in card  # the train part's counts
    run(tmp_path / "b", 3)
    assert (tmp_path / "a/dev_report.json").read_text().split('"step"')[1] == \
        (tmp_path / "b/dev_report.json").read_text().split('"step"')[1]  # the same split, the same dev scores
