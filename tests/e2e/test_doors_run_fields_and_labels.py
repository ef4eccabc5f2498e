"""Every file through its door (issue 63): run.json's recipe, early_stop and class_weights
fields are typed where run.json is read, so a bad one is one error naming run.json and the field
before a resume trains (it used to be a TypeError, a KeyError or "Unknown format code 'g'" after
training, and no model card was written); a config.json whose id2label names a label twice, or
whose label2id or num_labels disagree with it, is refused naming the file.

The fixtures are in conftest.py, the checks in refusals.py.
"""
from __future__ import annotations

import json

import pytest
from refusals import edit_json, read_json, refused, run_refused

from minibert.__main__ import main
from minibert.finetune.model_card import model_card

BAD_FIELDS = {  # run.json field -> a value the run never writes, and what the error names
    "recipe.settings=5": ({"recipe": {"name": "r", "settings": 5}}, "run.json: recipe.settings is 5"),
    "recipe.epochs_raised_from='x'": ({"recipe": {"name": "r", "settings": {"epochs": 3},
                                                  "epochs_raised_from": "x"}},
                                      "run.json: recipe.epochs_raised_from is 'x'"),
    "early_stop={'step': 3}": ({"early_stop": {"step": 3}}, "run.json has no early_stop.total_steps"),
    "early_stop.metric=[1]": ({"early_stop": {"step": 3, "total_steps": 4, "patience": 1, "metric": [1]}},
                              "run.json: early_stop.metric is [1]"),
    "recipe=[]": ({"recipe": []}, "run.json: recipe is []"),
    "class_weights={'a': 'x'}": ({"class_weights": {"a": "x"}}, "run.json: class_weights is"),
}


@pytest.mark.parametrize("case", list(BAD_FIELDS), ids=list(BAD_FIELDS))
def test_a_bad_run_json_field_is_refused_before_a_resume_trains(case, paused, capsys):
    change, expected = BAD_FIELDS[case]
    edit_json(paused / "run.json", **change)
    run_refused(paused.parent, ["finetune", "--resume", "{w}/ft", "--quiet"], expected, capsys, writes="ft")
    assert not (paused / "README.md").exists()


@pytest.mark.parametrize("case", list(BAD_FIELDS), ids=list(BAD_FIELDS))
def test_the_model_card_names_run_json_and_the_field(case, paused):
    change, expected = BAD_FIELDS[case]
    edit_json(paused / "run.json", **change)
    with pytest.raises(ValueError) as e:
        model_card(paused)
    assert expected in str(e.value)


def test_a_resumed_run_with_its_own_fields_writes_its_card(paused, capsys):
    """What the run writes passes its own reader: a resume to the end writes the card."""
    edit_json(paused / "run.json", recipe={"name": "r", "settings": {"epochs": 1.0}, "epochs_raised_from": 0.5})
    assert main(["finetune", "--resume", str(paused), "--quiet"]) == 0
    card = (paused / "README.md").read_text(encoding="utf-8")
    assert "the epochs raised from 0.5" in card


# --- config.json's labels ------------------------------------------------------------------------

LABEL_CASES = {
    "id2label names a label twice": ({"id2label": {"0": "positive", "1": "positive"}},
                                     "id2label names 'positive' twice"),
    "label2id not id2label's inverse": ({"id2label": {"0": "neg", "1": "pos"}, "label2id": {"neg": 1, "pos": 0}},
                                        "is not the inverse of id2label"),
    "num_labels not id2label's count": ({"id2label": {"0": "neg", "1": "pos"}, "label2id": {"neg": 0, "pos": 1},
                                         "num_labels": 3}, "num_labels is 3 but id2label names 2 classes"),
}


@pytest.mark.parametrize("case", list(LABEL_CASES), ids=list(LABEL_CASES))
def test_config_json_labels_must_name_each_class_once(case, work, decoy, capsys):
    """A repeated label was accepted, and evaluate reported accuracy 0.0000 with two "positive" rows."""
    change, expected = LABEL_CASES[case]
    edit_json(work / "cls/config.json", **change)
    (work / "lab.tsv").write_text("sentence\tlabel\nthe film was good\tpositive\n", encoding="utf-8")
    for argv in (["evaluate", "{w}/cls", "--data", "{w}/lab.tsv", "--format", "glue-single"],
                 ["predict", "{w}/cls", "the film was good"]):
        refused(work, decoy, argv, expected, capsys)
    run_refused(work, ["predict", "{w}/cls", "the film was good"], "cls/config.json: ", capsys)


def test_consistent_labels_still_load(work, capsys):
    edit_json(work / "cls/config.json", id2label={"0": "neg", "1": "pos"}, label2id={"neg": 0, "pos": 1},
              num_labels=2)
    assert main(["predict", str(work / "cls"), "the film was good"]) == 0
    assert capsys.readouterr().out.split()[0] in ("neg", "pos")
    assert read_json(work / "cls/config.json")["num_labels"] == 2
    assert json.loads((work / "cls/config.json").read_text())["id2label"] == {"0": "neg", "1": "pos"}
