"""Fine-tuning on your own files as you bring them: a CSV with a text,label header and a JSON
Lines dev file, with no --format (found from the files), or named one by one with --train/--dev."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from corpora import tiny_pretrained

from minibert.__main__ import main

WORDS = ["good", "great", "fun", "bad", "awful", "dull", "film", "the", "was"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("own")
    tiny_pretrained(d / "pre", VOCAB)
    rng = np.random.default_rng(0)
    rows = [(f"the film was {w}", "pos" if w in WORDS[:3] else "neg") for w in rng.choice(WORDS[:6], 40)]
    (d / "train.csv").write_text("text,label\n" + "".join(f'"{t}",{y}\n' for t, y in rows[:32]), encoding="utf-8")
    (d / "validation.jsonl").write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in rows[32:]),
                                        encoding="utf-8")
    return d


def test_a_csv_and_a_json_lines_file_fine_tune_without_a_format(files, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["finetune", "custom", "--data", str(files), "--init", str(files / "pre"), "--out", str(out),
                 "--epochs", "1", "--batch-size", "8", "--max-seq-length", "16"]) == 0
    said = capsys.readouterr().out
    assert "reading glue-single (classification, glue-single)" in said
    run = json.loads((out / "run.json").read_text())
    assert run["task"]["labels"] == ["neg", "pos"] and run["task"]["format"] == "glue-single"
    assert run["task"]["train_file"].endswith("train.csv") and run["task"]["dev_file"].endswith("validation.jsonl")
    scores = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert {"accuracy", "macro_f1", "mcc"} <= set([r for r in scores if r["type"] == "eval"][-1])


def test_train_and_dev_files_named_one_by_one(files, tmp_path):
    out = tmp_path / "run"
    assert main(["finetune", "custom", "--train", str(files / "train.csv"), "--dev", str(files / "validation.jsonl"),
                 "--init", str(files / "pre"), "--out", str(out), "--epochs", "1", "--batch-size", "8",
                 "--max-seq-length", "16", "--quiet"]) == 0
    assert (out / "model.safetensors").is_file()


@pytest.mark.parametrize("extra, words", [
    (["--train", "{d}/train.csv"], "--train needs --dev FILE, or --dev-split FRACTION"),
    (["--dev", "{d}/train.csv"], "--dev goes with --train"),
    (["--train", "{d}/train.csv", "--dev", "{d}/validation.jsonl", "--dev-split", "0.2"], "--dev-split splits a dev "
                                                                                          "set off the training file"),
    (["--train", "{d}/train.csv", "--dev-split", "1"], "dev_split=1.0 must be in [0, 1)"),
    (["--data", "{d}/nothing-here"], "no train file"),
])
def test_bad_own_file_options_are_one_error_line_and_write_nothing(files, tmp_path, capsys, extra, words):
    out = tmp_path / "run"
    code = main(["finetune", "custom", "--init", str(files / "pre"), "--out", str(out), "--quiet",
                 *[a.format(d=files) for a in extra]])
    err = capsys.readouterr().err
    assert code == 1 and words in err and err.count("\n") == 1, err
    assert not out.exists()


def test_a_built_in_task_refuses_a_format(files, tmp_path, capsys):
    assert main(["finetune", "sst2", "--format", "glue-pair", "--init", str(files / "pre"),
                 "--out", str(tmp_path / "r")]) == 1
    assert "--format is for your own files" in capsys.readouterr().err


@pytest.fixture(scope="module")
def tuned(files, tmp_path_factory):
    out = tmp_path_factory.mktemp("tuned") / "run"
    assert main(["finetune", "custom", "--data", str(files), "--init", str(files / "pre"), "--out", str(out),
                 "--epochs", "1", "--batch-size", "8", "--max-seq-length", "16", "--quiet"]) == 0
    return out


def test_evaluate_prints_per_class_scores_and_draws_the_confusion_matrix(files, tuned, tmp_path, capsys):
    out = tmp_path / "metrics.json"
    assert main(["evaluate", str(tuned), "--data", str(files / "validation.jsonl"), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "macro-F1" in said and "confusion matrix (rows: gold, columns: predicted)" in said
    saved = json.loads(out.read_text())
    assert set(saved["per_class"]) == {"neg", "pos"} and saved["confusion"]["labels"] == ["neg", "pos"]
    counts = np.array(saved["confusion"]["counts"])
    assert counts.shape == (2, 2) and counts.sum() == 8
    assert [saved["per_class"][k]["support"] for k in ("neg", "pos")] == counts.sum(axis=1).tolist()
    png = tmp_path / "metrics.confusion.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("name", ["validation.jsonl", "train.csv"])
def test_predict_writes_your_file_back_in_its_own_format(files, tuned, tmp_path, name):
    out = tmp_path / f"predicted{Path(name).suffix}"
    assert main(["predict", str(tuned), "--file", str(files / name), "--out", str(out)]) == 0
    if name.endswith(".jsonl"):
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert len(rows) == 8 and all(r["label"] in ("neg", "pos") and r["text"].startswith("the film") for r in rows)
    else:
        rows = list(csv.reader(out.read_text().splitlines()))
        assert rows[0] == ["text", "label", "prob_neg", "prob_pos"] and len(rows) == 33
        assert {r[1] for r in rows[1:]} <= {"neg", "pos"}
        assert all(abs(float(r[2]) + float(r[3]) - 1) < 1e-5 for r in rows[1:])  # each label's probability


def test_a_one_text_model_given_two_texts_predicts_each(tuned, capsys):
    assert main(["predict", str(tuned), "the film was good", "the film was awful"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0].endswith("\tthe film was good") and lines[1].endswith("\tthe film was awful")
    assert all(line.split()[0] in ("neg", "pos") and "neg 0." in line and "pos 0." in line for line in lines)
    assert main(["predict", str(tuned), "the film was fun"]) == 0
    one = capsys.readouterr().out.splitlines()
    assert len(one) == 1 and "\t" not in one[0]


def test_a_plain_text_file_is_predicted_to_stdout_with_probabilities(tuned, tmp_path, capsys):
    texts = tmp_path / "sentences.txt"
    texts.write_text("the film was good\n\nthe film was awful\n", encoding="utf-8")
    assert main(["predict", str(tuned), "--file", str(texts)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[2] for line in lines] == ["the film was good", "the film was awful"]
    assert all(line.split("\t")[0] in ("neg", "pos") and 0.5 <= float(line.split("\t")[1]) <= 1 for line in lines)
    assert main(["predict", str(tuned), "--file", str(texts), "--all-classes"]) == 0
    every = capsys.readouterr().out.splitlines()
    probs = [dict(kv.split("=") for kv in line.split("\t")[1].split()) for line in every]
    assert all(set(p) == {"neg", "pos"} and abs(sum(map(float, p.values())) - 1) < 1e-3 for p in probs)
    out = tmp_path / "labels.tsv"
    assert main(["predict", str(tuned), "--file", str(texts), "--out", str(out)]) == 0
    table = [line.split("\t") for line in out.read_text(encoding="utf-8").splitlines()]
    assert table[0] == ["text", "label", "prob_neg", "prob_pos"]  # a table evaluate reads: the same predictions
    assert [(r[1], r[0]) for r in table[1:]] == [(line.split("\t")[0], line.split("\t")[2]) for line in lines]


def test_predict_options_that_do_not_go_together_are_refused(tuned, capsys):
    assert main(["predict", str(tuned), "the film", "--out", "x.tsv"]) == 1
    assert "--out goes with --file" in capsys.readouterr().err


def test_a_finished_run_has_a_model_card(files, tuned):
    card = (tuned / "README.md").read_text(encoding="utf-8")
    assert card.startswith(f"# {tuned.name}: BertForSequenceClassification fine-tuned on glue-single")
    assert "train.csv" in card and "validation.jsonl" in card and "32 examples" in card
    counts = {label: sum(1 for line in (files / "train.csv").read_text().splitlines()[1:] if line.endswith(label))
              for label in ("neg", "pos")}
    assert f"2 labels (classification, label id = position): neg ({counts['neg']:,}), pos ({counts['pos']:,})" in card
    assert "| lr |" in card and "| macro\\_f1 |" in card  # a name from run.json, escaped as markdown
    assert "AutoModelForSequenceClassification.from_pretrained" in card and "python -m minibert predict" in card


def test_a_run_with_too_few_steps_says_so_with_the_fix(files, tmp_path, capsys):
    assert main(["finetune", "custom", "--data", str(files), "--init", str(files / "pre"), "--out", str(tmp_path / "r"),
                 "--epochs", "1", "--batch-size", "8", "--max-seq-length", "16", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "warning: 4 optimizer steps" in err and "--epochs 25 gives about 100 steps" in err
