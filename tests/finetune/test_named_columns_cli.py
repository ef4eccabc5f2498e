"""Columns by name through the commands (issue 62): `finetune custom`, `evaluate` and `predict` take
--text-column, --text-pair-column and --label-column; the run records the columns, so evaluate and
predict read the same files without them; a file whose columns cannot be found is one error that
names the options, and following it works."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from corpora import tiny_pretrained

from minibert.__main__ import main

WORDS = ["good", "great", "fun", "bad", "awful", "dull", "film", "the", "was"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]


def sms_style(rows) -> str:
    """A downloaded-style CSV: `label,masseges,,,`, padding commas, some texts with an unquoted comma."""
    lines = ["label,masseges,,,"]
    for i, (text, label) in enumerate(rows):  # every fourth text spills: "the film, was good" over two columns
        lines.append(f"{label},{text.replace(' was', ', was')},," if i % 4 == 0 else f"{label},{text},,,")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("named")
    tiny_pretrained(d / "pre", VOCAB)
    rng = np.random.default_rng(0)
    rows = [(f"the film was {w}", "spam" if w in WORDS[:3] else "ham") for w in rng.choice(WORDS[:6], 40)]
    (d / "train.csv").write_text(sms_style(rows[:32]), encoding="utf-8")
    (d / "dev.csv").write_text(sms_style(rows[32:]), encoding="utf-8")
    (d / "other.jsonl").write_text("".join(json.dumps({"sms": t, "y": y}) + "\n" for t, y in rows[32:]),
                                   encoding="utf-8")
    return d


@pytest.fixture(scope="module")
def tuned(files, tmp_path_factory):
    out = tmp_path_factory.mktemp("tuned") / "run"
    assert main(["finetune", "custom", "--train", str(files / "train.csv"), "--dev", str(files / "dev.csv"),
                 "--text-column", "masseges", "--init", str(files / "pre"), "--out", str(out),
                 "--epochs", "1", "--batch-size", "8", "--max-seq-length", "16", "--quiet"]) == 0
    return out


def test_without_named_columns_the_error_names_the_options(files, tmp_path, capsys):
    rc = main(["finetune", "custom", "--train", str(files / "train.csv"), "--dev", str(files / "dev.csv"),
               "--init", str(files / "pre"), "--out", str(tmp_path / "run"), "--epochs", "1", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 1 and "--text-column masseges" in err and "--format" not in err.splitlines()[-1]
    assert not (tmp_path / "run").exists()


def test_the_run_reads_the_named_columns_joins_spilled_texts_and_records_them(files, tuned, capsys):
    run = json.loads((tuned / "run.json").read_text())
    assert run["task"]["columns"] == {"text": "masseges"} and run["settings"]["text_column"] == "masseges"
    assert run["task"]["train_examples"] == 32 and run["task"]["dev_examples"] == 8


def test_evaluate_and_predict_read_the_columns_the_run_recorded(files, tuned, tmp_path, capsys):
    assert main(["evaluate", str(tuned), "--data", str(files / "dev.csv")]) == 0
    said = capsys.readouterr()
    assert "accuracy" in said.out and "2 row(s) whose text ran on" in said.err
    out = tmp_path / "pred.csv"
    assert main(["predict", str(tuned), "--file", str(files / "dev.csv"), "--out", str(out)]) == 0
    rows = list(csv.reader(out.read_text(encoding="utf-8").splitlines()))
    assert rows[0] == ["label", "masseges", "", "", "", "prob_ham", "prob_spam"] and len(rows) == 9
    assert {r[0] for r in rows[1:]} <= {"ham", "spam"}


def test_evaluate_and_predict_take_the_options_for_another_file(files, tuned, tmp_path, capsys):
    other = str(files / "other.jsonl")
    assert main(["evaluate", str(tuned), "--data", other]) == 1
    assert "--text-column 'masseges' is not a column" in capsys.readouterr().err
    assert main(["evaluate", str(tuned), "--data", other, "--text-column", "sms", "--label-column", "y"]) == 0
    assert "accuracy" in capsys.readouterr().out
    out = tmp_path / "pred.jsonl"
    assert main(["predict", str(tuned), "--file", other, "--text-column", "sms", "--label-column", "y",
                 "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 8 and all(set(r) == {"sms", "y", "prob_ham", "prob_spam"} and r["y"] in ("ham", "spam")
                                  for r in rows)


def test_column_options_where_no_table_is_read_are_refused(files, tuned, tmp_path, capsys):
    assert main(["predict", str(tuned), "the film was good", "--text-column", "x"]) == 1
    assert "name the columns of --file" in capsys.readouterr().err
    assert main(["finetune", "wnut17", "--init", str(files / "pre"), "--out", str(tmp_path / "w"),
                 "--text-column", "x", "--quiet"]) == 1
    assert "for your own files" in capsys.readouterr().err


def test_a_label_column_not_found_is_named_by_the_option_that_names_it(files, tuned, tmp_path, capsys):
    v1 = tmp_path / "v1.csv"
    v1.write_text((files / "train.csv").read_text(encoding="utf-8").replace("label,masseges", "v1,masseges", 1),
                  encoding="utf-8")
    assert main(["finetune", "custom", "--train", str(v1), "--dev", str(v1), "--text-column", "masseges",
                 "--init", str(files / "pre"), "--out", str(tmp_path / "run"), "--quiet"]) == 1
    assert "--label-column NAME" in capsys.readouterr().err.splitlines()[-1]
    assert main(["evaluate", str(tuned), "--data", str(v1)]) == 1
    assert "--label-column NAME" in capsys.readouterr().err.splitlines()[-1]
    assert main(["finetune", "custom", "--train", str(v1), "--dev", str(v1), "--text-column", "masseges",
                 "--label-column", "v1", "--init", str(files / "pre"), "--out", str(tmp_path / "run"), "--steps", "2",
                 "--quiet"]) == 0
