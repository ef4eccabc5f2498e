"""Issue 63's unclear cases, decided (docs/safety.md, "Reading task files"): a SQuAD 2.0 file with
every answer emptied, `class_weights=positive:1_0`, a regression label Python's float() reads but
nobody means, and a SWAG file's skipped rows."""
from __future__ import annotations

import copy
import json

import pytest

from minibert.__main__ import main
from minibert.finetune.features import classification_features
from minibert.finetune.run import parse_class_weights
from minibert.finetune.squad_eval import load_gold
from minibert.io.paths import repo_root
from minibert.loop.settings import read_float
from minibert.taskdata.readers import TextExample, read_swag
from minibert.text.tokenizer import BertTokenizer

SQUAD_DEV = repo_root() / "data" / "squad2" / "dev-v2.0.json"


def test_a_squad_file_with_every_answer_emptied_is_refused_not_scored_100(tmp_path, capsys):
    data = json.loads(SQUAD_DEV.read_text(encoding="utf-8"))
    emptied = copy.deepcopy(data)
    for article in emptied["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                qa["answers"] = []
    path = tmp_path / "emptied.json"
    path.write_text(json.dumps(emptied), encoding="utf-8")
    preds = tmp_path / "preds.json"
    preds.write_text(json.dumps({qid: "" for qid in load_gold(SQUAD_DEV)}), encoding="utf-8")
    assert main(["squad-eval", str(path), str(preds)]) == 1
    err = capsys.readouterr().err
    assert str(path) in err and "question id" in err and "not marked is_impossible" in err


@pytest.mark.parametrize("change, words", [
    (lambda qa: qa.update(answers=[{"text": "  ", "answer_start": 0}]), "has no answer text"),
    (lambda qa: qa.update(is_impossible=True), "marked is_impossible but has the answer"),
])
def test_a_squad_answer_that_contradicts_is_impossible_is_refused(tmp_path, change, words):
    data = json.loads(SQUAD_DEV.read_text(encoding="utf-8"))
    qa = next(qa for a in data["data"] for p in a["paragraphs"] for qa in p["qas"] if qa["answers"])
    change(qa)
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match=words):
        load_gold(path)


@pytest.mark.parametrize("text", ["positive:1_0", "positive:١", "positive:1 0"])
def test_class_weights_read_no_number_that_float_reads_but_nobody_writes(text):
    with pytest.raises(ValueError, match="positive finite number"):
        parse_class_weights(text)
    assert parse_class_weights("positive:1e1,negative:0.5") == {"positive": 10.0, "negative": 0.5}


@pytest.mark.parametrize("setting", ["lr=1_0e-5", "steps=1_000", "steps=١٠"])
def test_a_set_value_with_an_underscore_or_other_digits_is_refused(setting, tmp_path, capsys):
    assert main(["finetune", "custom", "--train", "t.csv", "--dev", "d.csv", "--init", "none",
                 "--out", str(tmp_path / "r"), "--set", setting]) == 1
    assert "is not a valid" in capsys.readouterr().err
    assert read_float(" 1e-3 ") == pytest.approx(1e-3)


def words():
    return BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "b"])


@pytest.mark.parametrize("label", ["1_0", "nan", "inf", "9" * 5000, "1e39", "0x10"])
def test_a_regression_label_that_is_no_finite_decimal_is_refused_naming_its_line(label):
    with pytest.raises(ValueError, match=r"f\.tsv:7: label .* not a finite decimal number"):
        classification_features([TextExample("a b", None, label, "f.tsv:7")], words(), 8, "regression")


def test_regression_labels_as_written_read_as_numbers():
    feats = classification_features([TextExample("a", None, v, f"f:{i}") for i, v in enumerate(["1", "-2.5", ".5",
                                                                                                 "3e2"])],
                                    words(), 8, "regression")
    assert feats["labels"].tolist() == pytest.approx([1.0, -2.5, 0.5, 300.0])


def test_a_swag_file_says_which_rows_it_skipped(tmp_path, capsys):
    header = "video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label\n"
    row = "v,1,s,A man sits.,He,gold,smiles.,runs.,eats.,sleeps.,0\n"
    path = tmp_path / "swag.csv"
    path.write_text(header + row + ",,,,,,,,,,\n\n" + row, encoding="utf-8")
    assert len(read_swag(path)) == 2
    err = capsys.readouterr().err
    assert "2 blank row(s) skipped" in err and "(lines 3, 4)" in err
