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
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from minibert.io.textio import iter_lines, read_text, shown


@dataclass
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
SINGLE_COLUMNS = ("text", "sentence", "content")
PAIR_COLUMNS = (("sentence1", "sentence2"), ("premise", "hypothesis"), ("question1", "question2"),
                ("question", "sentence"), ("text_a", "text_b"), ("#1 String", "#2 String"))
LABEL_COLUMNS = ("label", "gold_label", "Quality", "is_duplicate", "score")
# how a table's file is split, by its suffix: GLUE's TSV (tabs, no quoting), CSV (quoted, as
# spreadsheets and pandas write it), JSON Lines (one object a line, the keys are the columns)
TABLE_KINDS = {".tsv": "tsv", ".txt": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
SWAG_COLUMNS = ("sent1", "sent2", "ending0")  # SWAG's CSV (and HellaSwag-style exports)


def _expected_single() -> str:
    return ", ".join(SINGLE_COLUMNS)


def _expected_pairs() -> str:
    return ", ".join(f"{a}/{b}" for a, b in PAIR_COLUMNS)


def glue_columns(header: list[str], single: bool, where: str) -> tuple[int, int | None, int | None]:
    """Indices of (text_a, text_b, label) in the header; text_b None when single, label None
    when the file has no label column (a test set)."""
    names = _header_names(header, where)
    label = next((names[c] for c in LABEL_COLUMNS if c in names), None)
    found = ", ".join(shown(h.strip(), 60) for h in header)
    if single:
        a = next((names[c] for c in SINGLE_COLUMNS if c in names), None)
        if a is None:
            raise ValueError(f"{where}: no text column; the columns found are {found}, and a one-text task "
                             f"expects one of {_expected_single()} (with {LABEL_COLUMNS[0]} for the labels)"
                             f"{_comma_hint(header, where)}")
        return a, None, label
    for first, second in PAIR_COLUMNS:
        if first in names and second in names:
            return names[first], names[second], label
    raise ValueError(f"{where}: no pair of text columns; the columns found are {found}, and a two-text task "
                     f"expects one of {_expected_pairs()}{_comma_hint(header, where)}")


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


def table_rows(path) -> Iterator[tuple[str, list[str], list]]:
    """The header first, then each row of a TSV, CSV or JSON Lines file, as (where, header, fields).

    Every row has the header's columns: a TSV or CSV row with another count is an error naming
    its line; a JSON Lines file's header is its first object's keys, and every object must have
    them (extra keys are ignored). Blank lines are skipped. Fields are strings, except a JSON
    value, which is kept as it is (the caller checks its type)."""
    kind = table_kind(path)
    if kind == "jsonl":
        yield from _jsonl_rows(path)
        return
    if kind == "csv":
        yield from _csv_rows(path)
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
            continue
        fields = line.split("\t")
        if len(fields) != len(header):
            raise ValueError(f"{where}: {len(fields)} tab-separated columns, expected "
                             f"{len(header)} as in the header ({', '.join(shown(h, 60) for h in header)})"
                             f"{_comma_hint(header, where) if lineno == 2 else ''}")
        yield where, header, fields


def _csv_rows(path) -> Iterator[tuple[str, list[str], list]]:
    text = read_text(path)  # strict UTF-8, a spreadsheet's BOM dropped
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)  # a quote left open is an error
    try:
        header = next(reader, None)
        if not header or not any(h.strip() for h in header):
            raise ValueError(f"{path}:1: empty file (or empty first line); expected a header line such as label,text")
        yield f"{path}:1", header, header
        for fields in reader:
            where = f"{path}:{reader.line_num}"
            if not fields or not any(f.strip() for f in fields):
                continue
            if len(fields) != len(header):
                raise ValueError(f"{where}: {len(fields)} comma-separated columns, expected {len(header)} as in the "
                                 f"header ({', '.join(shown(h, 60) for h in header)}; a comma inside a text needs the text in "
                                 f"double quotes)")
            if any(len(f) > LINE_BYTES for f in fields):
                raise ValueError(f"{where}: a field of over {LINE_BYTES:,} characters; is a quote left open?")
            yield where, header, fields
    except csv.Error as e:
        raise ValueError(f"{path}:{reader.line_num}: not valid CSV ({e})") from None


def _jsonl_rows(path) -> Iterator[tuple[str, list[str], list]]:
    header: list[str] | None = None
    for lineno, line in enumerate(iter_lines(path, LINE_BYTES), start=1):
        where = f"{path}:{lineno}"
        line = text_line(line, where)
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{where}: not a JSON object ({e.msg} at column {e.colno}): {shown(line, 80)}") from None
        if not isinstance(record, dict):
            raise ValueError(f"{where}: a JSON Lines row must be an object {{\"text\": ..., \"label\": ...}}, "
                             f"not {type(record).__name__}")
        if header is None:
            header = [str(k) for k in record]
            yield f"{path}:{lineno}", header, header
        missing = [k for k in header if k not in record]
        if missing:
            raise ValueError(f"{where}: the object has no {', '.join(shown(k, 60) for k in missing)} "
                             f"(the first row's keys are {', '.join(shown(k, 60) for k in header)})")
        yield where, header, [record[k] for k in header]
    if header is None:
        raise ValueError(f"{path}: empty file; expected one JSON object a line, such as "
                         f"{{\"text\": \"a fine film\", \"label\": \"pos\"}}")


def _text_field(value, column: str, where: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{where}: {shown(column, 60)} is {shown(json.dumps(value), 60)}, not a text")
    return value


def _label_field(value, column: str, where: str) -> str | None:
    """A label as text: JSON's 1, true or "pos" -> "1", "true", "pos"; null or "" -> an error."""
    if isinstance(value, bool):
        value = "true" if value else "false"
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        value = repr(value)
    elif not isinstance(value, str):
        raise ValueError(f"{where}: the label {shown(column, 60)} is {shown(json.dumps(value), 60)}; "
                         f"expected a text or a number")
    value = value.strip()
    if value == "":
        raise ValueError(f"{where}: empty label in column {shown(column)}")
    return value


def read_glue(path, single: bool) -> list[TextExample]:
    """A table of one or two texts and a label a row: GLUE's TSV, a CSV, or JSON Lines (by suffix).

    TSV (GLUE's; .tsv, .txt or no suffix): split on tabs only; GLUE files are not CSV-quoted (a
    `"` is an ordinary character). CSV (.csv): quoted as spreadsheets and pandas write it.
    JSON Lines (.jsonl): one object a line with the same names as keys. The columns are found by
    name (SINGLE_COLUMNS, PAIR_COLUMNS, LABEL_COLUMNS); every row has the header's columns;
    blank lines are skipped; a trailing "\\r" (Windows line ends) is dropped.

    Example: the file `f.tsv` holding "label<TAB>sentence", "1<TAB>a fine film" gives
    [TextExample(text_a='a fine film', text_b=None, label='1', where='f.tsv:2')]; so does
    `f.csv` holding "text,label", '"a fine film",1' (where='f.csv:2'), and `f.jsonl` holding
    '{"text": "a fine film", "label": 1}' (where='f.jsonl:1').
    """
    rows = table_rows(path)
    where, header, _ = next(rows)
    columns = glue_columns(header, single, where)
    return [glue_example(header, fields, columns, where) for where, header, fields in rows]


def glue_example(header: list[str], fields: list, columns: tuple[int, int | None, int | None],
                 where: str) -> TextExample:
    """One row of a table (table_rows) as an example, its (text, pair text, label) columns found by
    glue_columns: read_glue's rule, for readers that stream a file row by row (predict, evaluate)."""
    a, b, label = columns
    value = None if label is None else _label_field(fields[label], header[label], where)
    text_b = None if b is None else _text_field(fields[b], header[b], where)
    return TextExample(_text_field(fields[a], header[a], where), text_b, value, where)


def table_format(path) -> str:
    """The format of a learner's file, found from its suffix and columns: 'conll' (.conll),
    'swag' (SWAG's columns), 'glue-pair' (a pair of text columns), 'glue-single' (one text
    column); a ValueError naming the columns found and those expected otherwise."""
    if Path(path).suffix.lower() == ".conll":
        return "conll"
    where, header, _ = next(table_rows(path))
    names = {h.strip() for h in header}
    if all(c in names for c in SWAG_COLUMNS):
        return "swag"
    if any(a in names and b in names for a, b in PAIR_COLUMNS):
        return "glue-pair"
    if any(c in names for c in SINGLE_COLUMNS):
        return "glue-single"
    found = ", ".join(shown(h.strip(), 60) for h in header)
    raise ValueError(f"{where}: cannot tell the task's format from the columns {found}: expected a text column "
                     f"({_expected_single()}), a pair ({_expected_pairs()}) or SWAG's "
                     f"({', '.join(SWAG_COLUMNS)}, ...), each with a label column ({', '.join(LABEL_COLUMNS)}); "
                     f"or name the format with --format{_comma_hint(header, where)}")


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
    rows = swag_rows(path)
    _, header = next(rows, (1, None))
    if not header:
        raise ValueError(f"{path}:1: empty file; expected a SWAG header with {', '.join(SWAG_COLUMNS)}, label")
    names = _header_names(header, f"{path}:1")
    missing = [c for c in SWAG_COLUMNS if c not in names]
    if missing:
        raise ValueError(f"{path}:1: SWAG header lacks column(s) {', '.join(missing)} (header: {shown(str(header))})")
    return [_swag_example(row, names, len(header), f"{path}:{lineno}") for lineno, row in rows]


SWAG_FIELD_LIMIT = 1 << 22  # 4 MiB: a field above it is refused (Python's csv stops at 128 KiB with a traceback)


def swag_rows(path) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of a SWAG CSV: the header first, then every row that holds anything
    (a blank row, or one of empty fields such as `,,,,`, is skipped), the line number of the row's
    first line (a quoted field may span lines). `read_swag` and the predictions of
    `predict --file` read a file through this one function, so they skip the same rows."""
    reader = csv.reader(io.StringIO(read_text(path), newline=""))
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
