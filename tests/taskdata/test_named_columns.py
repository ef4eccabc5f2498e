"""A table as people download it (issue 62): a header with empty or repeated names, columns that
must be named (--text-column, --text-pair-column, --label-column), a text that ran on over an
unquoted comma into the columns after it. Every row a reader skips or changes is said (a note with
the count and the first lines) or refused naming its line: never lost without a word."""
from __future__ import annotations

import re
import shlex

import pytest

from minibert.taskdata.readers import Columns, read_glue, table_format, table_layout
from minibert.taskdata.tasks import custom_task

# the shape of the SMS spam file as it is downloaded: `label,masseges,,,`, padding commas, and a
# message whose unquoted comma spilled into the unnamed columns
SMS = ("label,masseges,,,\n"
       "ham,Go until jurong point,,,\n"
       "ham,Hello, how are you,,\n"
       'spam,"Win, a prize",,,\n'
       "ham,Ok lar, joking, wif u oni,\n")


def write(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


def test_a_header_with_empty_names_reads_by_the_column_named_and_joins_the_spilled_text_back(tmp_path, capsys):
    path = write(tmp_path / "spam.csv", SMS)
    examples = read_glue(path, single=True, columns=Columns(text="masseges"))
    assert [(e.label, e.text_a) for e in examples] == [
        ("ham", "Go until jurong point"), ("ham", "Hello, how are you"), ("spam", "Win, a prize"),
        ("ham", "Ok lar, joking, wif u oni")]
    err = capsys.readouterr().err
    assert "2 row(s) whose text ran on into the columns after it" in err and "(lines 3, 5)" in err
    assert str(path) in err


def test_with_no_columns_named_the_error_names_the_options_and_following_it_reads(tmp_path):
    path = write(tmp_path / "spam.csv", SMS)
    for read in (lambda: read_glue(path, single=True), lambda: table_format(path)):
        with pytest.raises(ValueError) as raised:
            read()
        message = str(raised.value)
        assert "--format" not in message  # the old hint led to a second error ("header names column '' twice")
        assert f"{path}:1" in message and "--text-column masseges" in message
    hint = re.search(r"--text-column (\S+)", message).group(1)
    columns = Columns(text=shlex.split(hint)[0])
    assert table_format(path, columns) == "glue-single"
    assert len(read_glue(path, single=True, columns=columns)) == 4


def test_custom_task_reads_the_named_columns_of_both_files(tmp_path):
    train = write(tmp_path / "train.csv", SMS)
    dev = write(tmp_path / "dev.jsonl", '{"msg": "hi", "y": "ham"}\n')
    with pytest.raises(ValueError, match="--text-column"):
        custom_task(train_path=train, dev_path=dev)
    task = custom_task(train_path=tmp_path / "dev.jsonl", dev_path=dev, columns=Columns("msg", None, "y"))
    assert task.format == "glue-single" and task.columns == Columns("msg", None, "y")
    with pytest.raises(ValueError, match="conll"):
        custom_task("conll", train_path=train, dev_path=dev, columns=Columns(text="x"))


@pytest.mark.parametrize("header, columns, words", [
    ("label,text,text", Columns(), ["column 'text' twice", "columns 2 and 3"]),
    ("label,msg,msg", Columns(text="msg"), ["column 'msg' twice"]),
    ("label,msg", Columns(text="message"), ["--text-column 'message' is not a column", "'label', 'msg'"]),
    ("label,msg", Columns(text="msg", label="msg"), ["one column is named for two roles"]),
    ("label,msg", Columns(pair="msg"), ["one-text task"]),
])
def test_a_named_column_must_be_there_once(header, columns, words):
    with pytest.raises(ValueError) as raised:
        table_layout(header.split(","), True, "f.csv:1", columns)
    for word in words:
        assert word in str(raised.value), str(raised.value)


def test_repeated_or_empty_names_of_columns_not_read_are_no_error(tmp_path):
    path = write(tmp_path / "t.csv", "id,text,,note,note,label\n1,a film,,x,y,pos\n")
    assert [(e.text_a, e.label) for e in read_glue(path, single=True)] == [("a film", "pos")]


def test_a_pair_by_named_columns_in_json_lines(tmp_path):
    path = write(tmp_path / "p.jsonl", '{"q": "who?", "a": "me", "ok": true}\n{"q": "x", "a": "y", "ok": false}\n')
    columns = Columns("q", "a", "ok")
    assert table_format(path, columns) == "glue-pair"
    assert [(e.text_a, e.text_b, e.label) for e in read_glue(path, False, columns)] == [
        ("who?", "me", "true"), ("x", "y", "false")]


def test_a_renamed_header_that_cuts_spilled_texts_says_so(tmp_path, capsys):
    """`label,text,c3,c4,c5`: the columns after the text have names, so they are not the text's; the
    spilled rows read cut, and a note names the column that holds something in some rows only."""
    path = write(tmp_path / "renamed.csv", SMS.replace("label,masseges,,,", "label,text,c3,c4,c5"))
    assert read_glue(path, single=True)[1].text_a == "Hello"
    err = capsys.readouterr().err
    assert "column 'c3' is not read, and holds something in 2 of 4 rows" in err and f"{path}:3" in err


def test_a_spill_where_the_text_is_not_last_is_refused_with_its_line(tmp_path):
    path = write(tmp_path / "t.csv", "text,label,,\nfine,pos,,\nHello, how are you,ham,\n")
    with pytest.raises(ValueError, match=r"t\.csv:3: column 3 has no name in the header but holds 'ham'"):
        read_glue(path, single=True)
    ragged = write(tmp_path / "r.tsv", "sentence\tlabel\na\tb\t1\n")
    with pytest.raises(ValueError, match=r"r\.tsv:2: 3 tab-separated columns, expected 2"):
        read_glue(ragged, single=True)


def test_a_tsv_text_in_the_last_column_takes_its_tabs_back(tmp_path, capsys):
    path = write(tmp_path / "t.tsv", "label\tsentence\n1\ta\tb\t\n0\tplain\n")
    assert [e.text_a for e in read_glue(path, single=True)] == ["a\tb\t", "plain"]  # no padding column: kept whole
    assert "1 row(s) whose text ran on" in capsys.readouterr().err


def test_blank_rows_and_empty_texts_are_said_with_their_count_and_lines(tmp_path, capsys):
    path = write(tmp_path / "t.csv", 'text,label\nfine,pos\n\n,,\n"",neg\n   ,pos\nok,neg\n\n')
    examples = read_glue(path, single=True)
    assert [(e.text_a, e.label) for e in examples] == [("fine", "pos"), ("", "neg"), ("   ", "pos"), ("ok", "neg")]
    err = capsys.readouterr().err
    assert "3 blank row(s) skipped" in err and "(lines 3, 4, 8)" in err
    assert "2 row(s) with an empty text" in err and "(lines 5, 6)" in err
    write(tmp_path / "clean.csv", "text,label\nfine,pos\n")
    read_glue(tmp_path / "clean.csv", single=True)
    assert capsys.readouterr().err == ""  # a file read exactly says nothing


def test_json_numbers_equal_in_value_are_one_label(tmp_path):
    """issue 63: the JSON Lines labels 1 and 1.0 became two labels."""
    path = write(tmp_path / "n.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": 1.0}\n'
                                      '{"text": "c", "label": 0.5}\n{"text": "d", "label": 1e0}\n'
                                      '{"text": "e", "label": 1e20}\n{"text": "f", "label": 100000000000000000000}\n')
    assert [e.label for e in read_glue(path, single=True)] == ["1", "1", "0.5", "1", *["100000000000000000000"] * 2]


def test_a_label_keeps_the_spaces_inside_it_and_loses_those_around_it(tmp_path):
    path = write(tmp_path / "t.csv", 'text,label\na," very good "\n')
    assert read_glue(path, single=True)[0].label == "very good"


def test_a_large_csv_is_read_as_a_stream(tmp_path):
    """issue 63: a 100 MB CSV took 626 MB before it was refused (the whole text, then a copy of it in
    a StringIO). Now the file is read row by row: refusing a bad row near the start costs a little
    memory whatever follows it."""
    import tracemalloc

    path = tmp_path / "big.csv"
    row = "a fine film with a long enough text to make the file large,pos\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write("text,label\nfine,pos\nbad,row,here\n")
        f.write(row * (20_000_000 // len(row)))  # 20 MB after the bad row
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"big\.csv:3: 3 comma-separated columns"):
            read_glue(path, single=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < path.stat().st_size / 20, peak
