"""Text from the user's files written into another format as data, never as its markup.

A label, a text, a file or folder name comes from the user and may hold anything: a newline, a
tab, a `# heading`, `<img src=x onerror=...>`, a `|`, a quote, an escape sequence for the
terminal. Every writer that puts such text into another format calls the one function of that
format here (docs/safety.md, "Data is data", says what each does and why):

    one_line(text)        a line on stdout or in an error: backslash escapes (\\n \\t \\r \\\\ \\xNN \\uNNNN)
    markdown(text)        inline markdown (the model card, a table cell too): no heading, HTML,
                          link, emphasis or column can start inside it; shown as the text reads
    shell_word(text)      one word of a POSIX shell line (shlex.quote; $'...' when it holds a
                          control character, which no quote of sh can carry on one line)
    python_str(text)      a Python string literal (repr): one line, any character
    csv_row(fields)       one CSV record: a field holding , " CR or LF is quoted (Python's csv
                          module leaves a lone CR unquoted with lineterminator "\\n")
    tsv_row(fields, where) one GLUE TSV line: TSV has no quoting, so a field holding a tab, CR or LF
                          is refused, naming where it came from (write .csv or .jsonl instead)
    jsonl_row(record)     one JSON Lines record (json.dumps; DEL, C1 and U+2028/U+2029 escaped too)

Each is the inverse of its reader: what `predict` writes, `evaluate` reads back equal.
"""
from __future__ import annotations

import json
import shlex

# characters that end or break a line somewhere (a terminal, str.splitlines, JavaScript), besides the C0/C1 controls
_LINE_BREAKS = {"\u2028", "\u2029", "\x85"}
_SHORT = {"\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _unsafe(ch: str) -> bool:
    """A control character (C0, DEL, C1) or a line separator: never written raw on a line."""
    o = ord(ch)
    return o < 0x20 or 0x7F <= o < 0xA0 or ch in _LINE_BREAKS


def one_line(text: str, limit: int | None = None) -> str:
    """`text` on one line, every control character and line separator written as a backslash
    escape (a backslash as \\\\), so a line printed per example is one line whatever the text
    holds, and a terminal never sees an escape sequence from the data. `limit`: cut to that many
    characters (with "..." and the length) for a message.

    >>> one_line("a\\tb\\nc \\\\ \\x1b[31m")
    'a\\\\tb\\\\nc \\\\\\\\ \\\\x1b[31m'
    """
    out = "".join(_SHORT.get(ch) or (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")
                  if ch in _SHORT or _unsafe(ch) else ch for ch in text)
    if limit is not None and len(out) > limit:
        return f"{out[:limit]}... ({len(text):,} characters)"
    return out


# ASCII punctuation that starts inline markdown (emphasis, code, links, images, strikethrough, math,
# a table's column) or a backslash escape; CommonMark reads "\\" before any of them as the character itself
_MARKDOWN_PUNCT = set("\\`*_[]()|~!$")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def markdown(text: str) -> str:
    """`text` as inline markdown that renders as the text: on one line (one_line's escapes, so no
    heading, list or fence can start), HTML's & < > as entities (no tag, no autolink), and the
    punctuation of emphasis, code, links, math and table columns backslash-escaped.

    >>> markdown("<img src=x>|*a*")
    '&lt;img src=x&gt;\\\\|\\\\*a\\\\*'
    """
    return "".join(_HTML.get(ch) or ("\\" + ch if ch in _MARKDOWN_PUNCT else ch) for ch in one_line(text))


def shell_word(text: str) -> str:
    """`text` as one word of a shell command line: shlex.quote when it is printable; with a control
    character (a newline in a folder's name) ANSI-C quoting, $'...', which bash, zsh and ksh read
    (no quote of POSIX sh holds a newline on one line).

    >>> shell_word("runs/my run"), shell_word("a\\nb")
    ("'runs/my run'", "$'a\\\\nb'")
    """
    if not any(_unsafe(ch) for ch in text):
        return shlex.quote(text)
    # in $'...' \xNN is a byte: a character above ASCII is written \uNNNN (bash reads it in a UTF-8 locale)
    escaped = "".join(_SHORT.get(ch) or (f"\\x{ord(ch):02x}" if ord(ch) < 0x80 else f"\\u{ord(ch):04x}")
                      if ch in _SHORT or _unsafe(ch) else "\\'" if ch == "'" else ch for ch in text)
    return "$'" + escaped + "'"


def python_str(text: str) -> str:
    """`text` as a Python string literal, on one line (repr escapes every character that is not
    printable)."""
    return repr(str(text))


def csv_field(value: str) -> str:
    return '"' + value.replace('"', '""') + '"' if any(c in value for c in ',"\r\n') else value


def csv_row(fields) -> str:
    """One CSV record (RFC 4180 quoting) with its "\\n": what csv.reader reads back as `fields`.

    >>> csv_row(["a,b", "c\\rd", "plain"])
    '"a,b","c\\rd",plain\\n'
    """
    return ",".join(csv_field(str(f)) for f in fields) + "\n"


def tsv_row(fields, where: str) -> str:
    """One line of a GLUE TSV (no quoting: split on tabs, one line a row) with its "\\n"; a field
    holding a tab, CR or LF cannot be written and is refused, naming `where` it came from."""
    fields = [str(f) for f in fields]
    for f in fields:
        bad = next((c for c in "\t\n\r" if c in f), None)
        if bad is not None:
            raise ValueError(f"{where}: {one_line(f, 80)} holds a {_SHORT[bad]}, which a TSV (no quoting: one row a "
                             f"line, tab-separated) cannot hold; write the predictions as .csv or .jsonl instead")
    return "\t".join(fields) + "\n"


_JSON_ESCAPED = {ch: f"\\u{ord(ch):04x}" for ch in [*map(chr, range(0x7F, 0xA0)), *_LINE_BREAKS]}


def jsonl_row(record: dict) -> str:
    """One JSON Lines record with its "\\n": UTF-8 kept, but DEL, the C1 controls and U+2028/U+2029
    (line ends to str.splitlines and JavaScript; json.dumps escapes only the C0 controls) written as
    \\uNNNN, so any reader that splits lines sees one line a record."""
    return json.dumps(record, ensure_ascii=False).translate(str.maketrans(_JSON_ESCAPED)) + "\n"
