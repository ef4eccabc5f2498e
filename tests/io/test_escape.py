"""io/escape: each writer is the inverse of its format's reader, whatever text it is handed
(control characters, markup, quotes, tabs, line ends, line separators), and the markdown and
one-line forms never start a second line, a heading, HTML or a table column."""
from __future__ import annotations

import ast
import csv
import io
import json
import re
import shlex
import shutil
import subprocess
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minibert.io.escape import csv_row, jsonl_row, markdown, one_line, python_str, shell_word, tsv_row

HOSTILE = ["a\nb", "# heading", "<img src=x onerror=alert(1)>", "a | b", "`code`", "*em* _u_", "[l](http://x)",
           "'\"", "\t", "\r", "\x00\x1b[31m", "\u2028\u2029\x85", "\\n", "$x^2$", "&amp;", "```", "- item", "1. x",
           "> quote", "", " lead and trail ", "ünïcødé ✓"]
# text as users' files may hold it: any character, with the hostile ones often
TEXT = st.one_of(st.sampled_from(HOSTILE), st.text(), st.text(alphabet=st.sampled_from(list("\n\r\t\x00\x1b\u2028|<>&#`*_[]()\\'\" ,;ab")), max_size=20))
SETTINGS = settings(max_examples=300, deadline=None)
LINE_BREAK = re.compile("[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")


@SETTINGS
@given(TEXT)
def test_one_line_is_one_printable_line_that_reads_back(text):
    line = one_line(text)
    assert not LINE_BREAK.search(line) and not any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in line)
    assert line.encode("ascii", "backslashreplace").decode("unicode_escape") == text or not text.isascii()
    assert len(line.splitlines() or [""]) == 1


@SETTINGS
@given(TEXT)
def test_markdown_text_starts_no_block_tag_or_column(text):
    md = markdown(text)
    assert not LINE_BREAK.search(md)
    assert "<" not in md and ">" not in md  # no HTML tag, no autolink
    assert not re.search(r"(?<!\\)(?:\\\\)*[|`*_\[\]()~!$]", md)  # every such character escaped
    # inside a table row the cell stays one cell: the row's unescaped pipes are the row's own
    row = f"| {md} | 1 |"
    assert len(re.findall(r"(?<!\\)(?:\\\\)*\|", row)) == 3


@SETTINGS
@given(st.lists(TEXT, min_size=1, max_size=5))
def test_csv_row_reads_back_equal(fields):
    assert list(csv.reader(io.StringIO(csv_row(fields), newline=""), strict=True)) == [fields] or fields == [""]


def test_csv_quotes_a_lone_carriage_return():
    """Python's csv.writer with lineterminator "\\n" leaves "c\\rd" unquoted: read back as two rows."""
    assert list(csv.reader(io.StringIO(csv_row(["c\rd", "x"]), newline=""))) == [["c\rd", "x"]]


@SETTINGS
@given(st.lists(TEXT, min_size=1, max_size=5))
def test_tsv_row_reads_back_equal_or_refuses_naming_where(fields):
    if any(c in f for f in fields for c in "\t\r\n"):
        with pytest.raises(ValueError, match="^f.tsv:3: .*write the predictions as .csv or .jsonl"):
            tsv_row(fields, "f.tsv:3")
    else:
        line = tsv_row(fields, "f.tsv:3")
        assert line.endswith("\n") and line[:-1].split("\t") == fields


@SETTINGS
@given(st.dictionaries(TEXT, st.one_of(TEXT, st.floats(allow_nan=False), st.integers()), max_size=5))
def test_jsonl_row_is_one_line_that_reads_back_equal(record):
    line = jsonl_row(record)
    assert len(line.splitlines()) == 1 and line.endswith("\n")  # one line to any splitter
    assert json.loads(line) == record


@SETTINGS
@given(TEXT)
def test_python_str_is_one_line_literal_of_the_text(text):
    literal = python_str(text)
    assert not LINE_BREAK.search(literal) and ast.literal_eval(literal) == text


@SETTINGS
@given(TEXT)
def test_shell_word_is_one_line_and_one_word(text):
    word = shell_word(text)
    assert not LINE_BREAK.search(word)
    if not word.startswith("$'"):
        assert shlex.split(word) == [text]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash reads $'...'")
@pytest.mark.parametrize("text", [t for t in HOSTILE if "\x00" not in t])  # no argument holds a NUL
def test_bash_reads_each_shell_word_as_the_text(text):
    out = subprocess.run(["bash", "-c", f"printf %s {shell_word(text)}"], capture_output=True, timeout=30,
                         env={"LC_ALL": "C.UTF-8", "PATH": "/usr/bin:/bin"}).stdout
    assert out.decode("utf-8") == text
