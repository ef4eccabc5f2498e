"""`evaluate RUN --data FILE` and `predict RUN --file FILE --out PRED` (minibert/finetune/evaluate.py)
for every task format: the scores equal the ones the run logged for the model it kept, the
predictions come back in the task's format (so evaluating them against themselves is perfect),
and a bad file gets one error naming it."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
from corpora import tiny_pretrained

from minibert.__main__ import main

WORDS = ["good", "great", "fun", "bad", "awful", "dull", "film", "plot", "the", "was", "paris", "john", "visited",
         "who", "a", "man", "sits", "he", "smiles", "runs", "in", "london"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
SWAG_HEADER = ["video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source", "ending0", "ending1",
               "ending2", "ending3", "label"]
pytestmark = pytest.mark.filterwarnings("ignore:.*(newly initialised|not at character)")


def _tsv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    path.write_text("\n".join("\t".join(r) for r in [header, *rows]) + "\n", encoding="utf-8")
    return path


def _squad(path: Path, n: int) -> Path:
    qas = [{"id": f"q{i}", "question": "who visited paris" if i % 2 else "who runs in london",
            "is_impossible": i % 3 == 0,
            "answers": [] if i % 3 == 0 else [{"text": "john", "answer_start": 0}]} for i in range(n)]
    data = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [
        {"context": "john visited paris and a man runs in london", "qas": qas}]}]}
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One fine-tuned run per format, 1 epoch on a small fixture, from one tiny pretrained model."""
    d = tmp_path_factory.mktemp("runs")
    tiny_pretrained(d / "pre", VOCAB)
    rng = np.random.default_rng(0)
    pick = lambda ws: str(rng.choice(ws))  # noqa: E731
    for split, n in (("train", 24), ("dev", 10)):
        (d / "single").mkdir(exist_ok=True)
        (d / "pair").mkdir(exist_ok=True)
        (d / "tags").mkdir(exist_ok=True)
        (d / "swag").mkdir(exist_ok=True)
        (d / "squad").mkdir(exist_ok=True)
        _tsv(d / "single" / f"{split}.tsv", ["sentence", "label"],
             [[f"the film was {pick(WORDS[:6])}", str(rng.integers(2))] for _ in range(n)])
        _tsv(d / "pair" / f"{split}.tsv", ["index", "sentence1", "sentence2", "label"],
             [[str(i), f"the plot was {pick(WORDS[:6])}", f"the film was {pick(WORDS[:6])}",
               pick(["entailment", "not_entailment"])] for i in range(n)])
        sentences = [[("john", "B-person"), ("visited", "O"), (pick(["paris", "london"]), "B-location")]
                     for _ in range(n)]
        (d / "tags" / f"{split}.conll").write_text("\n\n".join("\n".join(f"{w}\t{t}" for w, t in s)
                                                               for s in sentences) + "\n", encoding="utf-8")
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerows(
            [SWAG_HEADER] + [[f"v{i}", "0", "x", "a man sits", "he", "gold", "smiles", "runs", "sits", "was",
                              str(rng.integers(4))] for i in range(n)])
        (d / "swag" / ("val.csv" if split == "dev" else "train.csv")).write_text(buffer.getvalue(), encoding="utf-8")
        _squad(d / "squad" / f"{split}-v2.0.json", n)
    common = ["--init", str(d / "pre"), "--epochs", "1", "--batch-size", "8", "--quiet"]
    for name, argv in {"single": ["custom", "--format", "glue-single", "--max-seq-length", "16"],
                       "pair": ["custom", "--format", "glue-pair", "--max-seq-length", "24"],
                       "tags": ["custom", "--format", "conll", "--max-seq-length", "16"],
                       "swag": ["swag", "--max-seq-length", "16"],
                       "squad": ["squad2", "--max-seq-length", "32", "--doc-stride", "8"]}.items():
        assert main(["finetune", *argv, "--data", str(d / name), "--out", str(d / f"ft-{name}"), *common]) == 0
    return d


DEV = {"single": "single/dev.tsv", "pair": "pair/dev.tsv", "tags": "tags/dev.conll", "swag": "swag/val.csv",
       "squad": "squad/dev-v2.0.json"}


@pytest.mark.parametrize("name", list(DEV))
def test_evaluate_on_the_dev_file_gives_the_scores_the_run_logged(runs, name, tmp_path, capsys):
    out = tmp_path / "scores.json"
    assert main(["evaluate", str(runs / f"ft-{name}"), "--data", str(runs / DEV[name]), "--out", str(out)]) == 0
    scores = json.loads(out.read_text())
    best = json.loads((runs / f"ft-{name}" / "run.json").read_text())["best"]
    shared = [k for k in best if k != "step" and isinstance(best[k], (int, float))]
    assert len(shared) >= 1
    for key in shared:
        assert scores[key] == pytest.approx(best[key], abs=1e-9), key
    assert str(runs / DEV[name]) in capsys.readouterr().out


@pytest.mark.parametrize("name", ["single", "pair", "tags", "swag"])
def test_predict_file_writes_the_task_format_and_scores_perfectly_against_itself(runs, name, tmp_path):
    source = runs / DEV[name]
    pred = tmp_path / f"pred{source.suffix}"
    if name in ("single", "pair"):  # a test file has no label column
        rows = [line.split("\t") for line in source.read_text().splitlines()]
        keep = [i for i, h in enumerate(rows[0]) if h != "label"]
        source = _tsv(tmp_path / "test.tsv", [rows[0][i] for i in keep], [[r[i] for i in keep] for r in rows[1:]])
    elif name == "tags":  # words only
        source = tmp_path / "test.conll"
        source.write_text("\n".join(line.split("\t")[0] for line in (runs / DEV[name]).read_text().splitlines()) + "\n")
    assert main(["predict", str(runs / f"ft-{name}"), "--file", str(source), "--out", str(pred)]) == 0
    if name == "tags":
        gold = [line.split("\t")[0] for line in (runs / DEV[name]).read_text().splitlines()]
        got = pred.read_text().splitlines()
        assert [line.split("\t")[0] for line in got] == gold  # every word, sentence breaks kept
        labels = set(json.loads((runs / "ft-tags" / "config.json").read_text())["id2label"].values())
        assert {line.split("\t")[1] for line in got if line} <= labels
        return
    fmt = {"single": "glue-single", "pair": "glue-pair", "swag": "swag"}[name]
    assert main(["evaluate", str(runs / f"ft-{name}"), "--data", str(pred), "--format", fmt,
                 "--out", str(tmp_path / "s.json")]) == 0
    assert json.loads((tmp_path / "s.json").read_text())["accuracy"] == 1.0


def test_predict_file_for_squad_writes_what_squad_eval_scores(runs, tmp_path, capsys):
    out = tmp_path / "preds"
    assert main(["predict", str(runs / "ft-squad"), "--file", str(runs / DEV["squad"]), "--out", str(out)]) == 0
    preds = json.loads((out / "predictions.json").read_text())
    assert sorted(preds) == [f"q{i}" for i in range(10)]
    assert sorted(json.loads((out / "null_odds.json").read_text())) == sorted(preds)
    assert main(["squad-eval", str(runs / DEV["squad"]), str(out / "predictions.json")]) == 0
    assert '"total": 10' in capsys.readouterr().out


BAD = {
    "no label column": (lambda w: _tsv(w / "x.tsv", ["sentence"], [["the film was good"]]), "single",
                        "no label column"),
    "an unknown label": (lambda w: _tsv(w / "x.tsv", ["sentence", "label"], [["the film was good", "7"]]), "single",
                         "x.tsv:2"),
    "a missing file": (lambda w: w / "nothing.tsv", "single", "nothing.tsv does not exist"),
    "a tag that is not BIO": (lambda w: (w / "x.conll").write_text("john\tPERSON\n") and w / "x.conll", "tags",
                              "is not BIO"),
    "not a SQuAD file": (lambda w: (w / "x.json").write_text("[1, 2]") and w / "x.json", "squad", "x.json"),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_a_bad_file_is_one_error_naming_it(runs, case, tmp_path, capsys):
    make, name, expected = BAD[case]
    path = make(tmp_path)
    assert main(["evaluate", str(runs / f"ft-{name}"), "--data", str(path)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("error:") and expected in err, err


def test_predict_file_without_out_prints_and_the_format_must_fit_the_model(runs, tmp_path, capsys):
    assert main(["predict", str(runs / "ft-single"), "--file", str(runs / DEV["single"])]) == 0
    lines = capsys.readouterr().out.splitlines()  # a line each on stdout: label, probability, text
    assert lines and all(len(line.split("\t")) == 3 for line in lines)
    assert main(["predict", str(runs / "ft-single"), "--out", str(tmp_path / "p.tsv")]) == 1
    assert "--out goes with --file" in capsys.readouterr().err
    assert main(["evaluate", str(runs / "ft-single"), "--data", str(runs / DEV["tags"]), "--format", "conll"]) == 1
    assert "conll is a token format" in capsys.readouterr().err
