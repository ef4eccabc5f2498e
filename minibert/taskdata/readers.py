"""Reading fine-tuning files into examples: tables of texts (GLUE TSV, CSV, JSON Lines), CoNLL,
SWAG CSV, and the nextsent task.

    read_glue(path, single)   -> [TextExample]     a table by its header: TSV (SST-2, RTE, ...), CSV, JSON Lines
    table_format(path)        -> the format of a learner's file, from its suffix and columns
    read_conll(path)          -> [TaggedExample]   one word and its BIO tag per line (WNUT-17)
    read_swag(path)           -> [ChoiceExample]   SWAG's quoted CSV, four endings
    nextsent_examples(docs)   -> [ChoiceExample]   "which of four sentences comes next"
    label_list(examples)      -> sorted labels: label id i is label_list(...)[i]

Every example keeps `where` ("file:line") so a bad value later can be traced to its line, and
every reader error is a ValueError that starts with that "file:line".
"""
from __future__ import annotations

import csv
import json
import math
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, NamedTuple

import numpy as np

from minibert.io.jsonfile import parse_json
from minibert.io.textio import iter_lines, shown, shown_value


@dataclass(slots=True)  # a million rows of a large file: no __dict__ each
class TextExample:
    """One or two texts and a label (None in an unlabelled test file)."""
    text_a: str
    text_b: str | None
    label: str | None
    where: str  # "file:line"


@dataclass
class TaggedExample:
    """A sentence as the data set's words, with one BIO tag per word."""
    words: list[str]
    tags: list[str]
    where: str  # "file:line" of the first word


@dataclass
class ChoiceExample:
    """A context and C candidate endings; `label` is the index of the right one."""
    context: str
    endings: list[str]
    label: int | None
    where: str


# ---------------------------------------------------------------------------------------------
# Tables of texts and labels: TSV (GLUE's), CSV, JSON Lines

# Accepted column names. The `datasets` library's files say `text` (and `label`); GLUE files
# differ: SST-2/CoLA `sentence` (some copies `content`), RTE/MNLI/WNLI/STS-B `sentence1`/`sentence2`,
# SNLI/MNLI exports `premise`/`hypothesis`, QQP `question1`/`question2`, QNLI
# `question`/`sentence`, MRPC `#1 String`/`#2 String`. The label column is `label` (SST-2, RTE,
# QNLI, WNLI, datasets), `gold_label` (MNLI), `Quality` (MRPC), `is_duplicate` (QQP) or `score` (STS-B).
# Any other header: name the columns (--text-column, --text-pair-column, --label-column).
SINGLE_COLUMNS = ("text", "sentence", "content")
PAIR_COLUMNS = (("sentence1", "sentence2"), ("premise", "hypothesis"), ("question1", "question2"),
                ("question", "sentence"), ("text_a", "text_b"), ("#1 String", "#2 String"))
LABEL_COLUMNS = ("label", "gold_label", "Quality", "is_duplicate", "score")
# how a table's file is split, by its suffix: GLUE's TSV (tabs, no quoting), CSV (quoted, as
# spreadsheets and pandas write it), JSON Lines (one object a line, the keys are the columns)
TABLE_KINDS = {".tsv": "tsv", ".txt": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
DELIMITERS = {"tsv": "\t", "csv": ",", "jsonl": ""}
SWAG_COLUMNS = ("sent1", "sent2", "ending0")  # SWAG's CSV (and HellaSwag-style exports)


class Columns(NamedTuple):
    """The columns of a table the user named (--text-column, --text-pair-column, --label-column);
    a None is found by name (SINGLE_COLUMNS, PAIR_COLUMNS, LABEL_COLUMNS)."""
    text: str | None = None
    pair: str | None = None
    label: str | None = None

    def as_json(self) -> dict:
        return {k: v for k, v in self._asdict().items() if v is not None}

    @classmethod
    def from_json(cls, value, where: str) -> "Columns | None":
        """The columns a run recorded (run.json's task.columns), checked: {"text": NAME, ...}."""
        if value is None:
            return None
        if not isinstance(value, dict) or not set(value) <= set(cls._fields) or \
                not all(isinstance(v, str) and v.strip() for v in value.values()):
            raise ValueError(f"{where}: task.columns is {shown_value(value)}; expected an object of column names "
                             f"(text, pair, label)")
        return cls(**value)


COLUMN_OPTIONS = (("--text-column", "text_column", "the column (a JSON Lines key) holding the text"),
                  ("--text-pair-column", "text_pair_column", "the column holding a pair's second text"),
                  ("--label-column", "label_column", "the column holding the label"))


def add_column_options(add) -> None:
    """The three options that name a table's columns, for every command that reads one (finetune
    custom, evaluate, predict): `add` is the parser's add_argument (or finetune's `setting`)."""
    for flag, dest, help_ in COLUMN_OPTIONS:
        add(flag, dest=dest, metavar="NAME",
            help=f"{help_} in your CSV, TSV or JSON Lines files (default: found by name, e.g. text, sentence, label)")


def columns_given(args) -> Columns | None:
    """Columns from the options of add_column_options (None when none was given)."""
    columns = Columns(*(getattr(args, dest, None) for _, dest, _ in COLUMN_OPTIONS))
    return columns if any(columns) else None


def _expected_single() -> str:
    return ", ".join(SINGLE_COLUMNS)


def _expected_pairs() -> str:
    return ", ".join(f"{a}/{b}" for a, b in PAIR_COLUMNS)


def _found(header: list[str]) -> str:
    return ", ".join(shown(h.strip(), 60) for h in header)


def _find_column(header: list[str], name: str, where: str, option: str) -> int:
    """The index of the column `name` (given by `option`): there, and there once."""
    hits = [i for i, h in enumerate(header) if h.strip() == name.strip()]
    if not hits:
        raise ValueError(f"{where}: {option} {shown(name, 60)} is not a column of this file; the columns found are "
                         f"{_found(header)}")
    if len(hits) > 1:
        raise ValueError(f"{where}: the header names column {shown(name.strip(), 60)} twice (columns {hits[0] + 1} "
                         f"and {hits[1] + 1}); rename one")
    return hits[0]


def _guess(header: list[str], names, where: str, option: str) -> int | None:
    """The first of `names` in the header (None if none is); a name there twice is an error."""
    present = {h.strip() for h in header}
    name = next((n for n in names if n in present), None)
    return None if name is None else _find_column(header, name, where, option)


def _name_them(header: list[str], single: bool, label: int | None) -> str:
    """The options that name the columns, with this file's own names where they can be guessed."""
    others = [h.strip() for i, h in enumerate(header) if h.strip() and i != label]
    text = f" {shlex.quote(others[0])}" if single and len(others) == 1 else " NAME"
    pair = "" if single else " --text-pair-column NAME"
    return (f"name your columns: --text-column{text}{pair}"
            + ("" if label is not None else " --label-column NAME"))


class Layout(NamedTuple):
    """Where a table's columns are: text, pair (None: one text), label (None: no labels), and
    `join_from`: the last text column when it is the last column with a name, so that a row's
    fields after it are the text's, spilled by an unquoted delimiter, and joined back."""
    header: list[str]
    text: int
    pair: int | None
    label: int | None
    join_from: int | None


def table_layout(header: list[str], single: bool, where: str, columns: Columns | None = None,
                 kind: str = "csv") -> Layout:
    """The columns a table is read by: the named ones (`columns`), else found by name. A header's
    empty or repeated names are no error unless they are the columns read."""
    columns = columns or Columns()
    if single and columns.pair is not None:
        raise ValueError(f"{where}: --text-pair-column names a second text, but this is a one-text task")
    label = (_find_column(header, columns.label, where, "--label-column") if columns.label is not None
             else _guess(header, LABEL_COLUMNS, where, "--label-column"))
    if columns.text is not None:
        a = _find_column(header, columns.text, where, "--text-column")
        b = None if single else (_find_column(header, columns.pair, where, "--text-pair-column")
                                 if columns.pair is not None else None)
        if not single and b is None:
            raise ValueError(f"{where}: a two-text task needs both texts: --text-column and --text-pair-column")
    elif columns.pair is not None:
        raise ValueError(f"{where}: --text-pair-column goes with --text-column (the first text)")
    elif single:
        a, b = _guess(header, SINGLE_COLUMNS, where, "--text-column"), None
        if a is None:
            raise ValueError(f"{where}: no text column; the columns found are {_found(header)}, and a one-text task "
                             f"looks for one of {_expected_single()} (and {LABEL_COLUMNS[0]} for the labels): "
                             f"{_name_them(header, True, label)}{_comma_hint(header, where)}")
    else:
        a = b = None
        for first, second in PAIR_COLUMNS:
            if first in {h.strip() for h in header} and second in {h.strip() for h in header}:
                a = _find_column(header, first, where, "--text-column")
                b = _find_column(header, second, where, "--text-pair-column")
                break
        if a is None:
            raise ValueError(f"{where}: no pair of text columns; the columns found are {_found(header)}, and a "
                             f"two-text task looks for one of {_expected_pairs()}: {_name_them(header, False, label)}"
                             f"{_comma_hint(header, where)}")
    used = [i for i in (a, b, label) if i is not None]
    if len(set(used)) != len(used):
        raise ValueError(f"{where}: one column is named for two roles (text, pair, label): "
                         f"{', '.join(shown(header[i].strip(), 60) for i in used)}")
    last = b if b is not None else a
    trailing_unnamed = all(not h.strip() for h in header[last + 1:])
    join = last if kind != "jsonl" and trailing_unnamed and max(used) == last else None
    return Layout(header, a, b, label, join)


def glue_columns(header: list[str], single: bool, where: str,
                 columns: Columns | None = None) -> tuple[int, int | None, int | None]:
    """Indices of (text_a, text_b, label) in the header (table_layout); text_b None when single,
    label None when the file has no label column (a test set)."""
    layout = table_layout(header, single, where, columns)
    return layout.text, layout.pair, layout.label


def _comma_hint(header: list[str], where: str) -> str:
    """What to say when a tab-separated file's header is one column with commas in it."""
    if len(header) == 1 and "," in header[0] and ".csv" not in where:
        return ("; this header is one column with commas in it: the file is read as tab-separated (.tsv, .txt), "
                "so a comma-separated file should be named .csv")
    return ""


def table_kind(path) -> str:
    """'tsv' | 'csv' | 'jsonl' from the file's suffix (a file without one of them is TSV, GLUE's)."""
    return TABLE_KINDS.get(Path(path).suffix.lower(), "tsv")


LINE_BYTES = 1 << 20  # a task file's line holds one example: 1 MiB is thousands of times BERT's 512 tokens


def text_line(line: str, where: str) -> str:
    """A line without its line end; a carriage return left inside it means lines that end in CR
    alone (classic Mac OS), which read as one long line: an error, not one strange example."""
    line = line.rstrip("\r\n")
    if "\r" in line:
        raise ValueError(f"{where}: lines end in a carriage return alone (\\r), not \\n or \\r\\n; convert the "
                         f"file (tr '\\r' '\\n' < in > out)")
    return line


def _header_names(header: list[str], where: str) -> dict[str, int]:
    """{column name: index}; a name twice is an error (which of the two columns is meant?)."""
    names: dict[str, int] = {}
    for i, name in enumerate(header):
        key = name.strip()
        if key in names:
            raise ValueError(f"{where}: the header names column {shown(key, 60)} twice (columns {names[key] + 1} "
                             f"and {i + 1}); rename one")
        names[key] = i
    return names


MISSING = object()  # a JSON Lines row without one of the first row's keys


def table_rows(path, skipped: list | None = None) -> Iterator[tuple[str, list[str], list]]:
    """The header first, then each row of a TSV, CSV or JSON Lines file, as (where, header, fields),
    read as a stream: one row at a time, never the whole file.

    A JSON Lines file's header is its first object's keys; a later object without one of them
    has MISSING there (extra keys are ignored). Rows that hold nothing (a blank line, a CSV row of
    empty fields) are not yielded: their "file:line" goes into `skipped`. Fields are strings,
    except a JSON value, which is kept as it is (the caller checks its type). The count of a
    row's fields is the caller's to check (table_layout says which rows may have more)."""
    skipped = [] if skipped is None else skipped
    kind = table_kind(path)
    if kind == "jsonl":
        yield from _jsonl_rows(path, skipped)
        return
    if kind == "csv":
        yield from _csv_rows(path, skipped)
        return
    rows = iter(iter_lines(path, LINE_BYTES))
    header_line = next(rows, None)
    if header_line is None or not header_line.strip():
        raise ValueError(f"{path}:1: empty file (or empty first line); expected a header line "
                         "such as label<TAB>sentence")
    header = text_line(header_line, f"{path}:1").split("\t")
    yield f"{path}:1", header, header
    for lineno, line in enumerate(rows, start=2):
        where = f"{path}:{lineno}"
        line = text_line(line, where)
        if not line.strip():
            skipped.append(where)
            continue
        yield where, header, line.split("\t")


def _csv_rows(path, skipped: list) -> Iterator[tuple[str, list[str], list]]:
    reader = csv.reader(iter_lines(path, LINE_BYTES), strict=True)  # a stream; a quote left open is an error
    first = 1
    previous = csv.field_size_limit(LINE_BYTES)  # a field as long as a TSV line may be (Python's csv: 128 KiB)
    try:
        header = next(reader, None)
        if not header or not any(h.strip() for h in header):
            raise ValueError(f"{path}:1: empty file (or empty first line); expected a header line such as label,text")
        yield f"{path}:1", header, header
        while True:
            first = reader.line_num + 1  # a quoted field may span lines: the row's first
            fields = next(reader, None)
            if fields is None:
                return
            if not any(f.strip() for f in fields):
                skipped.append(f"{path}:{first}")
                continue
            yield f"{path}:{first}", header, fields
    except csv.Error as e:
        hint = ("; is a quote left open?" if "field limit" in str(e) or "end of data" in str(e) else
                "; do the lines end in a carriage return alone (\\r)? convert the file (tr '\\r' '\\n' < in > out)"
                if "new-line" in str(e) else "")
        raise ValueError(f"{path}:{first}: not valid CSV ({shown(str(e), 100)}){hint}") from None
    finally:
        csv.field_size_limit(previous)


def _jsonl_rows(path, skipped: list) -> Iterator[tuple[str, list[str], list]]:
    header: list[str] | None = None
    for lineno, line in enumerate(iter_lines(path, LINE_BYTES), start=1):
        where = f"{path}:{lineno}"
        line = text_line(line, where)
        if not line.strip():
            skipped.append(where)
            continue
        # the one JSON reader: no RecursionError, no traceback for a number of 5,000 digits
        record = parse_json(line, where, unique_keys=True)
        if not isinstance(record, dict):
            raise ValueError(f"{where}: a JSON Lines row must be an object {{\"text\": ..., \"label\": ...}}, "
                             f"not {type(record).__name__}")
        if header is None:
            header = [str(k) for k in record]
            yield f"{path}:{lineno}", header, header
        yield where, header, [record.get(k, MISSING) for k in header]
    if header is None:
        raise ValueError(f"{path}: empty file; expected one JSON object a line, such as "
                         f"{{\"text\": \"a fine film\", \"label\": \"pos\"}}")


_SURROGATE = re.compile("[\ud800-\udfff]")  # JSON's "\ud800" escape: no character, cannot be written as UTF-8
# in a label, a character that can never be meant: a control character (a newline, a tab, NUL, ESC...),
# a line or paragraph separator (U+2028, U+2029), DEL and the C1 controls
_LABEL_REFUSED = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def _text_field(value, column: str, where: str) -> str:
    if value is MISSING:
        raise ValueError(f"{where}: the object has no {shown(column, 60)} (the text)")
    if not isinstance(value, str):
        raise ValueError(f"{where}: {shown(column, 60)} is {shown(json.dumps(value), 60)}, not a text")
    bad = _SURROGATE.search(value)
    if bad:
        raise ValueError(f"{where}: {shown(column, 60)} holds a lone surrogate (\\u{ord(bad.group()):04x}) at "
                         f"character {bad.start() + 1}: no character, it cannot be written as UTF-8")
    return value


def _label_field(value, column: str, where: str) -> str | None:
    """A label as text: JSON's 1, 1.0, true or "pos" -> "1", "1", "true", "pos" (one number, one
    label: 1 and 1.0 are the same); null, "", a number that is not finite, or a label holding a
    control character or a line break -> an error naming the line."""
    if value is MISSING:
        raise ValueError(f"{where}: the object has no {shown(column, 60)} (the label)")
    if isinstance(value, bool):
        value = "true" if value else "false"
    elif isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{where}: the label {shown(column, 60)} is {value}; a label is a text or a finite number")
        value = str(int(value)) if isinstance(value, int) or value.is_integer() else repr(value)
    elif not isinstance(value, str):
        raise ValueError(f"{where}: the label {shown(column, 60)} is {shown(json.dumps(value), 60)}; "
                         f"expected a text or a number")
    value = value.strip()
    if value == "":
        raise ValueError(f"{where}: empty label in column {shown(column)}")
    bad = _LABEL_REFUSED.search(value)
    if bad:
        raise ValueError(f"{where}: the label {shown(value, 60)} holds the control character U+{ord(bad.group()):04X} "
                         f"at character {bad.start() + 1}; a label is one line of text (is a quote left open?)")
    return sys.intern(value)  # a few labels, a million rows: one string each


class _Notes:
    """What a reader skipped or changed in a file, said once at its end: a count and the first lines."""

    def __init__(self, path):
        self.path, self.seen = path, {}

    def add(self, kind: str, where: str) -> None:
        count, first = self.seen.get(kind, (0, []))
        self.seen[kind] = (count + 1, first if len(first) >= 3 else first + [where.rsplit(":", 1)[-1]])

    def say(self, messages: dict[str, str]) -> None:
        for kind, (count, first) in self.seen.items():
            lines = ", ".join(first) + (", ..." if count > len(first) else "")
            print(f"note: {self.path}: {count:,} {messages[kind]} (line{'s' if count > 1 else ''} {lines})",
                  file=sys.stderr, flush=True)


NOTES = {
    "blank": "blank row(s) skipped: they hold no example",
    "joined": "row(s) whose text ran on into the columns after it (a delimiter inside an unquoted text) were "
              "read whole: the fields from the text column on, joined back with the delimiter",
    "empty": "row(s) with an empty text, read as they are (the model sees [CLS] [SEP] alone)",
}


def iter_glue(path, single: bool, columns: Columns | None = None, notes: bool = True) -> Iterator[TextExample]:
    """The examples of a table (read_glue), one at a time as the file is read: memory does not
    grow with the file. At its end, one note per kind of row that was skipped or changed (`notes`
    False: a file read again, whose notes were said the first time)."""
    return (example for example, _ in iter_glue_rows(path, single, columns, notes))


def iter_glue_rows(path, single: bool, columns: Columns | None = None,
                   notes: bool = True) -> Iterator[tuple[TextExample, list]]:
    """iter_glue's (example, row) pairs, the row's fields as the example was read from them (a
    spilled text joined back, the header's width): predict writes them out again with its labels."""
    skipped: list[str] = []
    rows = table_rows(path, skipped)
    where, header, _ = next(rows)
    kind = table_kind(path)
    layout = table_layout(header, single, where, columns, kind)
    delimiter, named = DELIMITERS[kind], [bool(h.strip()) for h in header]
    last = layout.pair if layout.pair is not None else layout.text
    said, rows_read = _Notes(path), 0
    unread = {i: [0, None] for i in range(last + 1, len(header)) if kind != "jsonl" and named[i] and
              i != layout.label}  # columns after the text that are not read: [rows holding something, first]
    for where, _, fields in rows:
        rows_read += 1
        if kind != "jsonl":
            fields = _fit_row(fields, layout, delimiter, where, said)
            for i, seen in unread.items():
                if fields[i].strip():
                    seen[0] += 1
                    seen[1] = seen[1] or where
        label = None if layout.label is None else _label_field(fields[layout.label], header[layout.label], where)
        text_b = None if layout.pair is None else _text_field(fields[layout.pair], header[layout.pair], where)
        text_a = _text_field(fields[layout.text], header[layout.text], where)
        if not text_a.strip() or text_b is not None and not text_b.strip():
            said.add("empty", where)
        yield TextExample(text_a, text_b, label, where), fields
    if not notes:
        return
    for where in skipped:
        said.add("blank", where)
    said.say(NOTES)
    for i, (count, first) in unread.items():
        if 0 < count < rows_read:  # a column empty in most rows and not in some: text that spilled into it?
            print(f"note: {path}: column {shown(header[i].strip(), 60)} is not read, and holds something in "
                  f"{count:,} of {rows_read:,} rows (first at {first}): if a text ran on into it over an unquoted "
                  f"delimiter, quote those texts, or leave the column's name empty (then they are joined back)",
                  file=sys.stderr, flush=True)


def _fit_row(fields: list[str], layout: Layout, delimiter: str, where: str, notes: _Notes) -> list[str]:
    """A TSV or CSV row with the header's columns. When the last text column is the last one with a
    name (layout.join_from), the fields from it on are its text, joined back with the delimiter,
    less the empty fields at the end that fill the header's unnamed columns after it (padding,
    as `label,text,,,` and `ham,hello,,,` in a spreadsheet's export); any other row with another
    count of fields than the header, or with something in a trailing column that has no name, is
    an error naming its line."""
    header, width = layout.header, len(layout.header)
    t = layout.join_from
    if t is not None:
        if len(fields) <= t:
            raise ValueError(f"{where}: {len(fields)} {_columns_word(delimiter)}, expected at least {t + 1} (the text "
                             f"is column {t + 1}, {shown(header[t].strip(), 60)})")
        tail, padding = fields[t:], width - t - 1  # the header's unnamed columns after the text
        while padding and len(tail) > 1 and tail[-1] == "":
            tail.pop()
            padding -= 1
        if len(tail) > 1:
            notes.add("joined", where)
        return fields[:t] + [delimiter.join(tail)] + [""] * (width - t - 1)
    if len(fields) != width:
        raise ValueError(f"{where}: {len(fields)} {_columns_word(delimiter)}, expected {width} as in the header "
                         f"({_found(header)})" + (
                             "; a comma inside a text needs the text in double quotes" if delimiter == "," else
                             _comma_hint(header, where) if where.endswith(":2") else ""))
    for i in range(width - 1, -1, -1):
        if header[i].strip():
            break
        if fields[i].strip():
            raise ValueError(f"{where}: column {i + 1} has no name in the header but holds {shown(fields[i], 60)}: "
                             f"a text that ran on over an unquoted {'comma' if delimiter == ',' else 'tab'}? "
                             + ("put such texts in double quotes" if delimiter == "," else
                                "a TSV text cannot hold a tab")
                             + " (a text in the last named column is joined back instead)")
    return fields


def _columns_word(delimiter: str) -> str:
    return "comma-separated columns" if delimiter == "," else "tab-separated columns"


def read_glue(path, single: bool, columns: Columns | None = None, notes: bool = True) -> list[TextExample]:
    """A table of one or two texts and a label a row: GLUE's TSV, a CSV, or JSON Lines (by suffix).

    TSV (GLUE's; .tsv, .txt or no suffix): split on tabs only; GLUE files are not CSV-quoted (a
    `"` is an ordinary character). CSV (.csv): quoted as spreadsheets and pandas write it.
    JSON Lines (.jsonl): one object a line with the same names as keys. The columns are those
    named (`columns`), else found by name (SINGLE_COLUMNS, PAIR_COLUMNS, LABEL_COLUMNS); every
    row has the header's columns, except that a text in the last named column takes the fields
    after it back (_fit_row); blank lines are skipped; a trailing "\\r" (Windows line ends) is
    dropped. Every row skipped or changed is counted in a note at the end (docs/safety.md).

    Example: the file `f.tsv` holding "label<TAB>sentence", "1<TAB>a fine film" gives
    [TextExample(text_a='a fine film', text_b=None, label='1', where='f.tsv:2')]; so does
    `f.csv` holding "text,label", '"a fine film",1' (where='f.csv:2'), and `f.jsonl` holding
    '{"text": "a fine film", "label": 1}' (where='f.jsonl:1').
    """
    return list(iter_glue(path, single, columns, notes))


def table_format(path, columns: Columns | None = None) -> str:
    """The format of a learner's file, found from its suffix and columns: 'conll' (.conll),
    'swag' (SWAG's columns), 'glue-pair' (a pair of text columns, or --text-pair-column),
    'glue-single' (one text column); a ValueError naming the columns found and the options
    that name them otherwise."""
    if Path(path).suffix.lower() == ".conll":
        return "conll"
    if columns is not None and (columns.text or columns.pair):
        return "glue-pair" if columns.pair else "glue-single"
    where, header, _ = next(table_rows(path))
    names = {h.strip() for h in header}
    if all(c in names for c in SWAG_COLUMNS):
        return "swag"
    if any(a in names and b in names for a, b in PAIR_COLUMNS):
        return "glue-pair"
    if any(c in names for c in SINGLE_COLUMNS):
        return "glue-single"
    label = columns.label if columns is not None and columns.label else \
        next((c for c in LABEL_COLUMNS if c in names), None)
    label_at = next((i for i, h in enumerate(header) if label is not None and h.strip() == label), None)
    raise ValueError(f"{where}: cannot tell which columns hold the texts: the columns found are {_found(header)}, "
                     f"and minibert looks for a text ({_expected_single()}) or a pair ({_expected_pairs()}), with a "
                     f"label ({', '.join(LABEL_COLUMNS)}); {_name_them(header, True, label_at)} (a pair: add "
                     f"--text-pair-column NAME){_comma_hint(header, where)}")


# ---------------------------------------------------------------------------------------------
# CoNLL: word and tag per line

_BIO = re.compile(r"O|[BI]-\S+")


def _conll_line(line: str, where: str) -> tuple[str, str]:
    """'Empire<TAB>B-location' -> ('Empire', 'B-location'); the tag is the last column."""
    fields = line.split("\t") if "\t" in line else line.split()
    fields = [f.strip() for f in fields]
    if len(fields) < 2 or not fields[0] or not fields[-1]:
        raise ValueError(f"{where}: expected a word and a tag (word<TAB>tag), got {shown(line)}")
    if not _BIO.fullmatch(fields[-1]):
        raise ValueError(f"{where}: tag {shown(fields[-1])} is not BIO (O, B-TYPE or I-TYPE)")
    return fields[0], fields[-1]


def read_conll(path) -> list[TaggedExample]:
    """CoNLL-style tagged sentences: `word<TAB>tag` per line (or whitespace-separated columns,
    the first is the word and the last the tag), a blank line between sentences.

    The last sentence needs no blank line after it; `-DOCSTART-` lines are skipped; a line of
    whitespace only (WNUT-17 uses a lone tab) counts as blank; tags must be BIO.

    Example: `f.conll` holding "New<TAB>B-location", "York<TAB>I-location", "" gives
    [TaggedExample(words=['New', 'York'], tags=['B-location', 'I-location'], where='f.conll:1')].
    """
    examples: list[TaggedExample] = []
    words, tags, first = [], [], 0

    def end_sentence():
        if words:
            examples.append(TaggedExample(list(words), list(tags), f"{path}:{first}"))
        words.clear()
        tags.clear()

    for lineno, line in enumerate(iter_lines(path, LINE_BYTES), start=1):
        line = text_line(line, f"{path}:{lineno}")
        if not line.strip():
            end_sentence()
        elif not line.startswith("-DOCSTART-"):
            word, tag = _conll_line(line, f"{path}:{lineno}")
            first = first if words else lineno
            words.append(word)
            tags.append(tag)
    end_sentence()
    return examples


# ---------------------------------------------------------------------------------------------
# SWAG CSV

SWAG_COLUMNS = ("sent1", "sent2", "ending0", "ending1", "ending2", "ending3")


def read_swag(path) -> list[ChoiceExample]:
    """SWAG's CSV (columns video-id, fold-ind, startphrase, sent1, sent2, gold-source,
    ending0..ending3, label), quoted as CSV. Paired as transformers' run_swag does:
    context = sent1, ending i = sent2 + " " + ending_i. No label column (a test file): None.

    Example: sent1 "A man sits down.", sent2 "He", ending0 "smiles." gives context
    "A man sits down." and endings[0] "He smiles.".
    """
    skipped: list[str] = []
    rows = swag_rows(path, skipped)
    _, header = next(rows, (1, None))
    if not header:
        raise ValueError(f"{path}:1: empty file; expected a SWAG header with {', '.join(SWAG_COLUMNS)}, label")
    names = _header_names(header, f"{path}:1")
    missing = [c for c in SWAG_COLUMNS if c not in names]
    if missing:
        raise ValueError(f"{path}:1: SWAG header lacks column(s) {', '.join(missing)} (header: {shown(str(header))})")
    examples = [_swag_example(row, names, len(header), f"{path}:{lineno}") for lineno, row in rows]
    said = _Notes(path)
    for where in skipped:
        said.add("blank", where)
    said.say(NOTES)
    return examples


SWAG_FIELD_LIMIT = 1 << 22  # 4 MiB: a field above it is refused (Python's csv stops at 128 KiB with a traceback)


def swag_rows(path, skipped: list | None = None) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of a SWAG CSV, read as a stream: the header first, then every row that
    holds anything (a blank row, or one of empty fields such as `,,,,`, is skipped: its "file:line"
    goes into `skipped`), the line number of the row's first line (a quoted field may span lines).
    `read_swag` and the predictions of `predict --file` read a file through this one function, so
    they skip the same rows."""
    skipped = [] if skipped is None else skipped
    reader = csv.reader(iter_lines(path, 4 * SWAG_FIELD_LIMIT))  # a line holds several fields
    previous = csv.field_size_limit(SWAG_FIELD_LIMIT)
    try:
        while True:
            lineno = reader.line_num + 1
            try:
                row = next(reader, None)
            except csv.Error as e:
                raise ValueError(f"{path}:{lineno}: not a readable CSV row ({shown(str(e), 100)}); a field may "
                                 f"hold at most {SWAG_FIELD_LIMIT:,} characters") from None
            if row is None:
                return
            if lineno == 1 or any(field.strip() for field in row):
                yield lineno, row
            else:
                skipped.append(f"{path}:{lineno}")
    finally:
        csv.field_size_limit(previous)


def _swag_example(row: list[str], names: dict, width: int, where: str) -> ChoiceExample:
    if len(row) != width:
        raise ValueError(f"{where}: {len(row)} columns, expected {width} as in the header")
    endings = [f"{row[names['sent2']]} {row[names[f'ending{i}']]}" for i in range(4)]
    label = None
    if "label" in names:
        value = row[names["label"]].strip()
        if value not in ("0", "1", "2", "3"):
            raise ValueError(f"{where}: label {shown(value)} is not one of 0, 1, 2, 3")
        label = int(value)
    return ChoiceExample(row[names["sent1"]], endings, label, where)


# ---------------------------------------------------------------------------------------------
# Labels

def label_list(examples) -> list[str]:
    """The sorted set of labels (TextExample) or tags (TaggedExample); id i is the i-th.

    Sorted rather than in order of first appearance, so shuffling the train file never changes
    the ids. For SST-2 this gives ['0', '1'], for RTE ['entailment', 'not_entailment'].

    >>> label_list([TextExample("a", None, "pos", "f:2"), TextExample("b", None, "neg", "f:3")])
    ['neg', 'pos']
    """
    found = set()
    for e in examples:
        if isinstance(e, TaggedExample):
            found.update(e.tags)
        elif e.label is not None:
            found.add(e.label)
    return sorted(found)


def label_id(label: str, index: dict[str, int], where: str) -> int:
    """The id of `label`; ValueError naming the line and the known labels if train never had it."""
    if label not in index:
        raise ValueError(f"{where}: label {shown(label)} does not occur in the train file; "
                         f"known labels: {', '.join(index)}")
    return index[label]


# ---------------------------------------------------------------------------------------------
# nextsent: an offline multiple-choice task from any one-sentence-per-line corpus

def _distractors(documents, d: int, avoid: set, k: int, rng: np.random.Generator, where: str) -> list[str]:
    """k different sentences from documents other than d, none equal to a text in `avoid`."""
    out: list[str] = []
    for _ in range(100 * k):  # rejection sampling; repeated sentences make a draw fail
        j = int(rng.integers(len(documents) - 1))
        j += j >= d  # a uniform document other than d
        sentence = documents[j][int(rng.integers(len(documents[j])))]
        if sentence not in avoid and sentence not in out:
            out.append(sentence)
            if len(out) == k:
                return out
    raise ValueError(f"{where}: could not find {k} distinct distractor sentences in other documents")


def nextsent_examples(documents: list[list[str]], seed: int, num_choices: int = 4,
                      max_per_doc: int | None = 2, source: str = "documents") -> list[ChoiceExample]:
    """"Which of these sentences comes next?" from documents (lists of sentences).

    For each document with at least 2 sentences, up to `max_per_doc` positions i (all when
    None) are drawn: the context is sentence i, the right ending sentence i + 1, and the
    num_choices - 1 distractors are random sentences of OTHER documents (as BERT's random-next
    sentences for next-sentence prediction). The choices are shuffled; label = the right one's
    index. Deterministic for a seed (one numpy Generator, no global state).

    >>> docs = [["a1.", "a2."], ["b1.", "b2."], ["c1.", "c2."], ["d1.", "d2."]]
    >>> e = nextsent_examples(docs, seed=0)[0]
    >>> e.context, e.endings[e.label]
    ('a1.', 'a2.')
    """
    if len(documents) < 2:
        raise ValueError(f"{source}: nextsent needs at least 2 documents, got {len(documents)}")
    rng = np.random.default_rng(seed)
    examples = []
    for d, doc in enumerate(documents):
        positions = np.arange(len(doc) - 1)  # (P,) sentences that have a next one
        if max_per_doc is not None and len(positions) > max_per_doc:
            positions = np.sort(rng.choice(positions, max_per_doc, replace=False))
        for i in positions.tolist():
            where = f"{source}: document {d + 1}, sentence {i + 1}"
            wrong = _distractors(documents, d, {doc[i], doc[i + 1]}, num_choices - 1, rng, where)
            order = rng.permutation(num_choices)  # (C,) position of each choice; right one is 0
            endings = [""] * num_choices
            for choice, slot in zip([doc[i + 1], *wrong], order.tolist()):
                endings[slot] = choice
            examples.append(ChoiceExample(doc[i], endings, int(order[0]), where))
    return examples


# punct: punctuation restoration, a token task built offline from any corpus of documents
PUNCT_TAGS = {",": "B-COMMA", ".": "B-PERIOD", "?": "B-PERIOD", "!": "B-PERIOD", ":": "B-COLON", ";": "B-COLON"}
_TRAILING_PUNCT = re.compile(r"^(.*?)([.,;:!?]+)$")


def punct_example(text: str, where: str) -> TaggedExample | None:
    """One text with its sentence punctuation taken out, each word tagged with the mark that
    followed it: B-COMMA (","), B-PERIOD (". ? !"), B-COLON (": ;"), or O. Only marks at the end
    of a whitespace-separated word count ("os.path" keeps its dots; a mark standing alone goes to
    the word before it). Every tag is a one-word BIO "entity", so entity P/R/F1 scores it.

    >>> e = punct_example("First, open it. Then read:", "f:1")
    >>> e.words, e.tags
    (['First', 'open', 'it', 'Then', 'read'], ['B-COMMA', 'O', 'B-PERIOD', 'O', 'B-COLON'])
    """
    words, tags = [], []
    for token in text.split():
        m = _TRAILING_PUNCT.match(token)
        word, mark = (m.group(1), m.group(2)[-1]) if m else (token, None)
        if word:
            words.append(word)
            tags.append("O")
        if mark is not None and words:
            tags[-1] = PUNCT_TAGS[mark]
    return TaggedExample(words, tags, where) if words else None


def punct_examples(documents: list[list[str]], sentences_per_example: int = 2,
                   source: str = "documents") -> list[TaggedExample]:
    """Punctuation restoration from documents (lists of sentences): each run of
    `sentences_per_example` consecutive sentences of a document is one example (punct_example),
    so the model must find where one sentence ends and the next begins, not only tag the last
    word. Deterministic: no sampling."""
    examples = []
    for d, doc in enumerate(documents):
        for i in range(0, len(doc), sentences_per_example):
            e = punct_example(" ".join(doc[i:i + sentences_per_example]),
                              f"{source}: document {d + 1}, sentence {i + 1}")
            if e is not None:
                examples.append(e)
    return examples
