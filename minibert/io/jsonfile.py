"""JSON read as untrusted input: every file a user hands minibert (config.json, run.json,
trainer_state.json, a SQuAD file, a safetensors header) goes through here, so a bad one ends in
one error naming the file, never in a traceback.

    read_json(path, what="")  the value, or ValueError "[WHAT ]PATH: ..." (missing or unreadable,
                              not UTF-8, not JSON, nested too deeply for Python's parser); a
                              UTF-8 byte-order mark is skipped. The one JSON file reader.
    read_json_object(path, fields=None)
                              the same, and it must be a JSON object (whose `fields` are checked)
    parse_json(text, where)   the same for text already read (`where` names it in errors)

One typed reader for every run file: a file's fields are a small schema, {key: Field(types,
expected, check)}, and `check_fields(d, schema, where)` applies it, the one function that does, so
a wrong type is one error naming the file and the field, whatever the file (run.json,
trainer_state.json, compile-ahead's marker, a shard index, config.json):

    RUN_FIELDS = {"total_steps": Field(int, "an integer >= 0", lambda v: v >= 0), ...}
    check_fields(raw, RUN_FIELDS, "runs/x/run.json")
    -> ValueError "runs/x/run.json: total_steps is '2'; expected an integer >= 0"

A value an error echoes is at most 200 characters, with its length when cut (io/textio's
`shown_value`): a 30 MB string in a field must not become a 30 MB error line.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, NamedTuple

from minibert.io.textio import refuse_special_file, shown_value


class _KeyTwice(ValueError):
    """An object with a key twice (parse_json's unique_keys)."""


def _unique_keys(where: str):
    """json's object_pairs_hook that refuses a key twice in one object: json.loads keeps the last
    silently ({"text": "a", "text": "b"} would read as "b")."""
    def hook(pairs):
        d = dict(pairs)
        if len(d) != len(pairs):
            seen = set()
            twice = next(k for k, _ in pairs if k in seen or seen.add(k))
            raise _KeyTwice(f"{where}: an object names the key {shown_value(twice, 60)} twice; which one is meant?")
        return d
    return hook


def parse_json(text: str, where: str, unique_keys: bool = False) -> Any:
    """`unique_keys`: an object with a key twice is an error (a table's row), not its last value."""
    hook = _unique_keys(where) if unique_keys else None
    try:
        return json.loads(text, object_pairs_hook=hook)
    except RecursionError:  # '[' * 100000: the parser recurses once per level
        raise ValueError(f"{where}: the JSON is nested too deeply to read") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{where} is not valid JSON: {e}") from None
    except _KeyTwice as e:
        raise ValueError(str(e)) from None
    except ValueError as e:  # Python's own limit: "Exceeds the limit (4300 digits) for integer string conversion"
        raise ValueError(f"{where} holds a number too long to read (more than Python's 4300 digits; {e}): no "
                         f"setting or id of minibert's is that large") from None
    except MemoryError:
        raise ValueError(f"{where}: not enough memory to read this JSON") from None


def read_json(path: str | Path, what: str = "") -> Any:
    """`what` names the kind of file in the errors ("SQuAD file")."""
    path = Path(path)
    where = f"{what} {path}" if what else str(path)
    refuse_special_file(path)  # a FIFO would block, a device never end
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise ValueError(f"{where} is not UTF-8 text: {e}") from None
    except IsADirectoryError:
        raise ValueError(f"{where} is a directory, not a JSON file") from None
    except OSError as e:  # missing, no permission: an error naming the file, as every other
        raise ValueError(f"cannot read {where}: {e.strerror or e}") from None
    return parse_json(text, where)


def read_json_object(path: str | Path, fields: dict[str, "Field"] | None = None) -> dict:
    d = read_json(path)
    if not isinstance(d, dict):
        raise ValueError(f"{path} must hold a JSON object, not {type(d).__name__}")
    return check_fields(d, fields, str(path)) if fields else d


class Field(NamedTuple):
    """One field of a JSON file: the JSON types it may have (str, int, float, bool, list, dict,
    type(None); a float field takes an int too), how an error says what is expected, an optional
    check of the value once its type is right (-> True when good), and whether it must be there."""

    types: type | tuple[type, ...]
    expected: str
    check: Callable[[Any], bool] | None = None
    required: bool = False


def has_type(value: Any, types: type | tuple[type, ...]) -> bool:
    """Whether a JSON value is of one of `types`, read as JSON reads: a bool is not a number, and
    an int is a float too."""
    types = types if isinstance(types, tuple) else (types,)
    if isinstance(value, bool):
        return bool in types
    if isinstance(value, int) and float in types:
        return True
    return isinstance(value, tuple(types))


def check_fields(d: dict, schema: dict[str, Field], where: str, prefix: str = "") -> dict:
    """`d` (a JSON object read from `where`) with every field of `schema` of its type and passing
    its check, or a ValueError naming the file, the field (`prefix` + its key: "task." for an
    object inside the file), the value (at most 200 characters) and what was expected. A required
    field that is missing is an error too; keys the schema does not name are left alone (the
    reader that uses them checks them)."""
    for key, f in schema.items():
        if key not in d:
            if f.required:
                raise ValueError(f"{where} has no {prefix}{key} ({f.expected})")
            continue
        value = d[key]
        if not has_type(value, f.types) or (f.check is not None and not f.check(value)):
            raise ValueError(f"{where}: {prefix}{key} is {shown_value(value)}; expected {f.expected}")
    return d


def text_field(limit: int = 4096) -> Callable[[Any], bool]:
    """A check for a string field: not empty, and at most `limit` characters (a path of a megabyte
    is no path)."""
    return lambda v: 0 < len(v) <= limit
