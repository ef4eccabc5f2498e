"""Your own data files, as a practitioner brings them, broken the usual ways (issue 55): a CSV with
the wrong columns, a JSON Lines file with a bad line, a label in dev that train never has, an empty
file, a CSV row with a column too many, and bad early-stopping / class-weight settings. Each one,
through the command line: one `error:` line naming the file (and its line), and nothing written, no
run directory left behind (refusals.run_refused compares every file's sha256 under the work folder)."""
from __future__ import annotations

import pytest
from refusals import run_refused

GOOD = "text,label\nthe film was good,pos\nthe film was bad,neg\nthe film was fun,pos\n"
CASES = {
    "wrong columns": ({"train.csv": "review,stars\nthe film was good,5\n"}, "train.csv:1: cannot tell which "
                      "columns hold the texts: the columns found are 'review', 'stars'"),
    "a bad JSON line": ({"train.jsonl": '{"text": "the film was good", "label": "pos"}\n{not json\n'},
                        "train.jsonl:2 is not valid JSON"),
    "a label unseen in train": ({"dev.csv": GOOD + "the film was dull,meh\n"},
                                "dev.csv:5: label 'meh' does not occur in the train file; known labels: neg, pos"),
    "an empty train file": ({"train.csv": ""}, "train.csv:1: empty file"),
    "an empty dev file": ({"dev.csv": ""}, "dev.csv:1: empty file"),
    "a ragged row": ({"train.csv": GOOD + "the film was dull,neg,again\n"},
                     "train.csv:5: 3 comma-separated columns, expected 2 as in the header"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_broken_own_file_is_one_error_line_naming_it_and_writes_nothing(case, work, capsys):
    files, expected = CASES[case]
    own = work / "own"
    own.mkdir()
    train = next((n for n in files if n.startswith("train")), "train.csv")
    named = {train: GOOD, "dev.csv": GOOD, **files}
    for name, text in named.items():
        (own / name).write_text(text, encoding="utf-8")
    run_refused(work, ["finetune", "custom", "--train", f"{{w}}/own/{train}", "--dev", "{w}/own/dev.csv",
                       "--init", "{w}/pre", "--out", "{w}/ft", "--epochs", "1", "--quiet"], expected, capsys)
    assert not (work / "ft").exists()


@pytest.mark.parametrize("setting, expected", [
    ("patience=-2", "patience=-2 is out of range"),
    ("patience=two", "patience='two' is not a valid int"),
    ("class_weights=pos:0", "class_weights='pos:0': the weight of 'pos' is '0'; a weight must be a positive finite"),
    ("class_weights=pos:3,neutral:1", "unknown label(s) ['neutral']; the data's labels are ['neg', 'pos']"),
])
def test_a_bad_small_data_setting_is_one_error_line_and_writes_nothing(setting, expected, work, capsys):
    own = work / "own"
    own.mkdir()
    for name in ("train.csv", "dev.csv"):
        (own / name).write_text(GOOD, encoding="utf-8")
    run_refused(work, ["finetune", "custom", "--train", "{w}/own/train.csv", "--dev", "{w}/own/dev.csv", "--init",
                       "{w}/pre", "--out", "{w}/ft", "--epochs", "1", "--quiet", "--set", setting], expected, capsys)
    assert not (work / "ft").exists()
