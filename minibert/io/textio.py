"""Reading text: one policy for every command, strict UTF-8.

Text that is not UTF-8 (a Latin-1 "café" is the bytes 63 61 66 e9) is never guessed at: a
replaced byte is one the tokenizer drops ("café" becomes "caf"), so every reader stops at the
first invalid byte with one message naming the file, the line, the column and the byte:

    corpus.txt line 3: invalid UTF-8 byte 0xe9 at column 4; minibert reads text as UTF-8
    (convert with iconv -f latin1 -t utf-8)

A UTF-8 byte-order mark at the start of a file (some Windows editors write one) is dropped; it
is not text, and in a vocab.txt it would glue itself to the first token.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterator

BOM = b"\xef\xbb\xbf"
_CONVERT_HINT = "minibert reads text as UTF-8 (convert with iconv -f latin1 -t utf-8)"


def _open_error(path, e: OSError) -> OSError:
    """The same kind of OSError, with a message that names the file (and no errno clutter)."""
    return type(e)(f"cannot read {path}: {e.strerror or e}")


def _bad_byte_message(where: str, line: bytes, start: int) -> str:
    """'<where>: invalid UTF-8 byte 0xe9 at column 4; ...' for the first bad byte, line[start]."""
    column = len(line[:start].decode("utf-8")) + 1  # in characters; the prefix is valid
    return f"{where}: invalid UTF-8 byte 0x{line[start]:02x} at column {column}; {_CONVERT_HINT}"


def refuse_special_file(path) -> None:
    """ValueError for a path that exists but is no regular file or directory: a device such as
    /dev/zero is an endless line (reading it fills the memory), a FIFO blocks until someone writes.
    (A missing file or a directory is left to open(), whose error names it.)"""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise ValueError(f"cannot read {path}: not a regular file (a device, pipe or socket); minibert reads "
                         f"text from files")


def decode_line(raw: bytes, path, lineno: int) -> str:
    """One line's bytes -> str; ValueError naming path, line, column and byte if not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(_bad_byte_message(f"{path} line {lineno}", raw, e.start)) from None


def read_text(path: str | os.PathLike) -> str:
    """The whole file as str (strict UTF-8, a leading BOM dropped, newlines untouched)."""
    refuse_special_file(path)
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise _open_error(path, e) from e
    data = data[len(BOM):] if data.startswith(BOM) else data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        start = data.rfind(b"\n", 0, e.start) + 1  # the line holding the bad byte
        end = data.find(b"\n", e.start)
        line = data[start:end if end >= 0 else len(data)]
        lineno = data.count(b"\n", 0, e.start) + 1
        raise ValueError(_bad_byte_message(f"{path} line {lineno}", line, e.start - start)) from None


def iter_lines(path: str | os.PathLike, max_bytes: int | None = None) -> Iterator[str]:
    """Lines of a file split on "\\n" only (as Google's tf.gfile readline), each keeping its
    "\\n"; strict UTF-8, checked line by line, so a large corpus is never held in memory.
    `max_bytes`: a longer line is an error naming it, read no further than the limit (an 80 MB
    line is never held whole)."""
    refuse_special_file(path)
    try:
        f = open(path, "rb")
    except OSError as e:
        raise _open_error(path, e) from e
    with f:
        lines = iter(f) if max_bytes is None else iter(lambda: f.readline(max_bytes + 2), b"")
        for lineno, raw in enumerate(lines, start=1):
            if max_bytes is not None and len(raw.rstrip(b"\r\n")) > max_bytes:
                raise ValueError(f"{path} line {lineno} is longer than {max_bytes:,} bytes; a line of this file "
                                 f"holds one example (BERT reads at most 512 tokens of it)")
            if lineno == 1 and raw.startswith(BOM):
                raw = raw[len(BOM):]
            yield decode_line(raw, path, lineno)


def shown(text: str, limit: int = 200) -> str:
    """`text` quoted for an error message, at most `limit` characters of it: a 30 MB line must not
    become a 30 MB error line.

    >>> shown("x" * 300, 10)
    "'xxxxxxxxxx'... (300 characters)"
    """
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text):,} characters)"


def shown_value(value, limit: int = 200) -> str:
    """Any value (a JSON field's, a setting's) as an error message shows it: its repr, at most
    `limit` characters, saying how long it was when cut (a string: `shown`).

    >>> shown_value(["a"] * 100, 20)
    "['a', 'a', 'a', 'a',... (500 characters)"
    """
    if isinstance(value, str):
        return shown(value, limit)
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


LONG_WORD = 300  # characters without a space: no file name, setting or number of minibert's is that long


def capped_message(text: str, limit: int = 4000) -> str:
    """An error message as the command line prints it: every run of more than LONG_WORD characters
    without a space (a value nobody capped, a path of a megabyte) cut to 200 with its length, and
    the whole at most `limit` characters. The net under every message; the value a message echoes
    is capped where it is written (`shown`, `shown_value`)."""
    words = [w if len(w) <= LONG_WORD else f"{w[:200]}... ({len(w):,} characters)" for w in text.split(" ")]
    text = " ".join(words)
    return text if len(text) <= limit else f"{text[:limit - 500]} ... ({len(text):,} characters) ... {text[-400:]}"


def error_line(e: BaseException) -> str:
    """The one line a command prints for an error it refuses with: `error: MESSAGE`, capped
    (`capped_message`). Every command's `except (ValueError, OSError)` prints this."""
    return f"error: {capped_message(str(e))}"


def check_argument(text: str, name: str = "text") -> str:
    """A command-line argument, checked: Python hands undecodable argv bytes over as lone
    surrogates (U+DC80-U+DCFF, PEP 383), which would become [UNK] or crash a print."""
    for i, ch in enumerate(text):
        if "\udc80" <= ch <= "\udcff":
            raise ValueError(f"{name}: invalid UTF-8 byte 0x{ord(ch) - 0xdc00:02x} at column "
                             f"{i + 1}; minibert reads text as UTF-8 (is the terminal's locale "
                             "UTF-8? see `locale`)")
    return text
