"""A learner's own table of texts and labels, as they bring it: GLUE's TSV, a CSV with a
`text,label` header, JSON Lines; the format found from the files; every bad file one error
naming the file, the line and what was expected."""
from __future__ import annotations

import pytest

from minibert.taskdata.readers import read_glue, table_format
from minibert.taskdata.tasks import TASKS, custom_task, task_paths


def write(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


def test_a_csv_with_text_and_label_reads_with_quoted_commas(tmp_path):
    path = write(tmp_path / "train.csv", 'text,label\n"good, really good",pos\nawful film,neg\n\n"a ""quoted"" word",pos\n')
    examples = read_glue(path, single=True)
    assert [(e.text_a, e.label) for e in examples] == [
        ("good, really good", "pos"), ("awful film", "neg"), ('a "quoted" word', "pos")]
    assert examples[0].where.endswith("train.csv:2") and examples[2].where.endswith("train.csv:5")
    assert table_format(path) == "glue-single"


def test_json_lines_pairs_with_number_labels(tmp_path):
    path = write(tmp_path / "dev.jsonl", '{"premise": "a cat sat", "hypothesis": "a cat", "label": 1}\n\n'
                                         '{"premise": "x", "hypothesis": "y", "label": 0, "id": 7}\n')
    examples = read_glue(path, single=False)
    assert [(e.text_a, e.text_b, e.label) for e in examples] == [("a cat sat", "a cat", "1"), ("x", "y", "0")]
    assert examples[1].where.endswith("dev.jsonl:3")
    assert table_format(path) == "glue-pair"


@pytest.mark.parametrize("name, text, words", [
    ("bad.jsonl", '{"text": "ok", "label": 1}\n{"text": "broken", "label": \n', ["bad.jsonl:2", "not valid JSON"]),
    ("list.jsonl", '["text", "label"]\n', ["list.jsonl:1", "must be an object"]),
    ("number.jsonl", '{"text": 5, "label": 1}\n', ["number.jsonl:1", "not a text"]),
    ("missing.jsonl", '{"text": "a", "label": 1}\n{"text": "b"}\n', ["missing.jsonl:2", "no 'label'"]),
    ("null.jsonl", '{"text": "a", "label": null}\n', ["null.jsonl:1", "expected a text or a number"]),
    ("empty.jsonl", "\n", ["empty.jsonl", "empty file"]),
    ("empty.csv", "", ["empty.csv:1", "empty file"]),
    ("cols.csv", "text,label\na film, a fine one,pos\n", ["cols.csv:2", "3 comma-separated columns", "double quotes"]),
    ("open.csv", 'text,label\n"never closed,pos\n', ["open.csv", "not valid CSV"]),
    # issue 63: a JSON Lines row of 100k nested brackets was a RecursionError traceback
    ("deep.jsonl", '{"text": "a", "label": 1}\n{"text": ' + "[" * 100_000 + "\n",
     ["deep.jsonl:2", "nested too deeply"]),
    # issue 63: a label of 5,000 digits named no file
    ("long.jsonl", '{"text": "a", "label": ' + "7" * 5000 + "}\n", ["long.jsonl:1", "too long"]),
    ("nan.jsonl", '{"text": "a", "label": NaN}\n', ["nan.jsonl:1", "finite"]),
    ("twice.jsonl", '{"text": "a", "text": "b", "label": 1}\n', ["twice.jsonl:1", "'text' twice"]),
    ("lone.jsonl", '{"text": "a\\ud800b", "label": 1}\n', ["lone.jsonl:1", "lone surrogate", "character 2"]),
    ("newline.csv", 'text,label\nfine,"pos\nneg"\n', ["newline.csv:2", "control character U+000A"]),
    ("tab.jsonl", '{"text": "a", "label": "pos\\t"}\n{"text": "a", "label": "p\\u0000s"}\n',
     ["tab.jsonl:2", "U+0000"]),
    ("sep.jsonl", '{"text": "a", "label": "p\\u2028s"}\n', ["sep.jsonl:1", "U+2028"]),
    ("cr.csv", "text,label\rfine,pos\rbad,neg\r", ["cr.csv:1", "carriage return"]),
    ("long_open.csv", 'text,label\nfine,pos\n"never closed,pos\n' + "more text\n" * 120_000,  # over 1 MiB
     ["long_open.csv:3", "quote left open"]),
    ("end.csv", 'text,label\nfine,pos\n"never closed,pos\n', ["end.csv:3", "quote left open"]),
])
def test_a_bad_file_is_one_error_naming_its_line(tmp_path, name, text, words):
    path = write(tmp_path / name, text)
    with pytest.raises(ValueError) as raised:
        read_glue(path, single=True)
    for word in words:
        assert word in str(raised.value), (word, str(raised.value)[:300])


def test_a_csv_read_as_tsv_says_so(tmp_path):
    path = write(tmp_path / "train.tsv", "sentence,label\na fine film,1\n")
    with pytest.raises(ValueError, match=r"train.tsv:1: no text column; the columns found are 'sentence,label'.*"
                                         r"should be named \.csv"):
        read_glue(path, single=True)


def test_unknown_columns_are_named_with_the_expected_ones(tmp_path):
    path = write(tmp_path / "train.csv", "review,stars\ngood,5\n")
    with pytest.raises(ValueError) as raised:
        table_format(path)
    message = str(raised.value)
    assert "'review', 'stars'" in message and "text, sentence, content" in message and "premise/hypothesis" in message
    with pytest.raises(ValueError, match="no pair of text columns; the columns found are 'review', 'stars'"):
        read_glue(path, single=False)


def test_the_format_of_your_own_files_is_found_and_must_agree(tmp_path):
    write(tmp_path / "train.csv", "text,label\ngood,pos\nbad,neg\n")
    write(tmp_path / "validation.jsonl", '{"text": "fine", "label": "pos"}\n')
    task = custom_task(data_dir=tmp_path)
    assert (task.format, task.kind) == ("glue-single", "classification") and "macro_f1" in task.metrics
    assert [p.name for p in task_paths(task, tmp_path)] == ["train.csv", "validation.jsonl"]

    other = tmp_path / "pairs"
    other.mkdir()
    write(other / "train.tsv", "sentence1\tsentence2\tlabel\na\tb\t1\n")
    write(other / "dev.csv", "text,label\nc,0\n")
    with pytest.raises(ValueError, match=r"two formats: .*train.tsv reads as glue-pair, .*dev.csv as glue-single"):
        custom_task(data_dir=other)
    assert custom_task("glue-pair").format == "glue-pair"  # a named format is taken as it is
    explicit = custom_task(train_path=other / "train.tsv", dev_path=other / "train.tsv")
    assert explicit.format == "glue-pair"
    with pytest.raises(ValueError, match="--data DIR"):
        custom_task()


def test_a_built_in_task_finds_a_validation_file(tmp_path):
    write(tmp_path / "train.tsv", "sentence\tlabel\na\t1\n")
    write(tmp_path / "validation.tsv", "sentence\tlabel\nb\t0\n")
    assert [p.name for p in task_paths(TASKS["sst2"], tmp_path)] == ["train.tsv", "validation.tsv"]
