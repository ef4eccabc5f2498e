"""The property behind issue 62's spilled rows and issue 63's readers: a CSV, TSV or JSON Lines
table with any texts and labels (quotes, commas, tabs, line breaks, control characters) either
reads every row exactly, or is refused with an error that names the file and the line of the
first row that cannot be read. Never a row cut, dropped or changed without a word."""
from __future__ import annotations

import csv
import io
import json
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minibert.taskdata.readers import read_glue

TRICKY = [",", '"', "\t", "\n", "\r", "\r\n", "\x00", "\x1b", "\x7f", "\u2028", "\u0085", " ", "a", "é", "{", "[",
          "\\", "'", "#", "<b>"]
texts = st.lists(st.one_of(st.sampled_from(TRICKY), st.text(max_size=4)), max_size=6).map("".join)
labels = st.one_of(st.sampled_from(["pos", "neg", " pos ", "1", "1.0", "a,b", 'say "x"', "x\ty", "a\nb", "\x00",
                                    "", " ", "ü", "p\u2028"]), texts)
rows = st.lists(st.tuples(texts, labels), min_size=1, max_size=8)
LABEL_REFUSED = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def label_error(label: str) -> bool:
    return not label.strip() or bool(LABEL_REFUSED.search(label.strip()))


def check(path, expected: list[tuple[str, str]], lines: list[int], bad: int | None):
    """`bad`: the index of the first row that may be refused (None: every row must read exactly)."""
    try:
        examples = read_glue(path, single=True)
    except ValueError as e:
        where = re.match(rf"{re.escape(str(path))}(?::| line )(\d+)", str(e))
        assert where, f"an error that names no line: {e}"
        assert bad is not None, f"refused a file that reads exactly: {e}"
        assert int(where.group(1)) <= lines[bad], (str(e), lines[bad])
        return
    got = [(e.text_a, e.label) for e in examples]
    assert got == expected[:len(got)] and len(got) == len(expected), (got, expected)
    assert [e.where for e in examples] == [f"{path}:{n}" for n in lines]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=rows, text_first=st.booleans(), padding=st.integers(0, 2), crlf=st.booleans())
def test_a_csv_reads_every_row_exactly_or_refuses_naming_the_line(tmp_path_factory, rows, text_first, padding, crlf):
    """Written as Python's csv module writes (lines ending in \r\n as Excel's, or in \n), with
    `padding` empty columns without a name after the two, as a spreadsheet's export has them."""
    path = tmp_path_factory.mktemp("csv") / "t.csv"
    out = io.StringIO(newline="")
    end = "\r\n" if crlf else "\n"
    csv.writer(out, lineterminator=end).writerow((["text", "label"] if text_first else ["label", "text"]) +
                                                 [""] * padding)
    line, lines, expected, bad = 2, [], [], None
    for text, label in rows:
        before = out.tell()
        fields = [text, label] if text_first else [label, text]
        # with \n line ends the csv module leaves a lone \r unquoted (a file it cannot read back itself)
        quoting = csv.QUOTE_ALL if not crlf and "\r" in text + label else csv.QUOTE_MINIMAL
        csv.writer(out, lineterminator=end, quoting=quoting).writerow(fields + [""] * padding)
        written = out.getvalue()[before:]
        if not any(f.strip() for f in fields):  # a row of empty fields: skipped, with a note
            line += written.count("\n")
            continue
        if bad is None and label_error(label):
            bad = len(lines)
        lines.append(line)
        expected.append((text, label.strip()))
        line += written.count("\n")
    if not lines:
        return
    path.write_text(out.getvalue(), encoding="utf-8", newline="")
    check(path, expected, lines, bad)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=rows, text_first=st.booleans())
def test_a_tsv_reads_every_row_exactly_or_refuses_naming_the_line(tmp_path_factory, rows, text_first):
    """GLUE's TSV has no quoting: a tab or a line break cannot be in a field. A text with a tab reads
    whole when it is the last column (its tabs joined back) and is refused otherwise; a line break in
    a text or label is no TSV (such rows are not written here: no reader could tell them apart)."""
    path = tmp_path_factory.mktemp("tsv") / "t.tsv"
    parts = ["text\tlabel" if text_first else "label\ttext"]
    lines, expected, bad = [], [], None
    for text, label in rows:
        text, label = re.sub("[\r\n\u2028\u0085]", " ", text), re.sub("[\r\n\t\u2028\u0085]", " ", label)
        parts.append(f"{text}\t{label}" if text_first else f"{label}\t{text}")
        if not parts[-1].strip():
            continue
        if bad is None and (label_error(label) or text_first and "\t" in text):
            bad = len(lines)
        lines.append(len(parts))
        expected.append((text, label.strip()))
    if not lines:
        return
    path.write_text("\n".join(parts) + "\n", encoding="utf-8", newline="")
    check(path, expected, lines, bad)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=rows, numbers=st.lists(st.sampled_from([1, 1.0, 0, 2.5, -3, True]), max_size=3),
       surrogate=st.booleans())
def test_json_lines_read_every_row_exactly_or_refuse_naming_the_line(tmp_path_factory, rows, numbers, surrogate):
    path = tmp_path_factory.mktemp("jsonl") / "t.jsonl"
    records = [{"text": t, "label": y} for t, y in rows] + [{"text": "n", "label": v} for v in numbers]
    if surrogate:
        records.append({"text": "a\ud800", "label": "pos"})
    shown = {"True": "true", "1": "1", "1.0": "1", "0": "0", "2.5": "2.5", "-3": "-3"}  # by repr: True == 1
    expected, bad = [], None
    for i, r in enumerate(records):
        label = r["label"] if isinstance(r["label"], str) else shown[repr(r["label"])]
        if bad is None and (isinstance(r["label"], str) and label_error(label) or "\ud800" in r["text"]):
            bad = i
        expected.append((r["text"], label.strip()))
    path.write_text("".join(json.dumps(r, ensure_ascii="\ud800" in r["text"]) + "\n" for r in records),
                    encoding="utf-8")
    check(path, expected, list(range(1, len(records) + 1)), bad)
