"""JSON read as untrusted input: every file a user hands minibert (config.json, run.json,
trainer_state.json, a SQuAD file, a safetensors header) goes through here, so a bad one ends in
one error naming the file, never in a traceback.

    read_json(path, what="")  the value, or ValueError "[WHAT ]PATH: ..." (missing or unreadable,
                              not UTF-8, not JSON, nested too deeply for Python's parser); a
                              UTF-8 byte-order mark is skipped. The one JSON file reader.
    read_json_object(path)    the same, and it must be a JSON object
    parse_json(text, where)   the same for text already read (`where` names it in errors)
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from minibert.io.textio import refuse_special_file


def parse_json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:  # '[' * 100000: the parser recurses once per level
        raise ValueError(f"{where}: the JSON is nested too deeply to read") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{where} is not valid JSON: {e}") from None
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


def read_json_object(path: str | Path) -> dict:
    d = read_json(path)
    if not isinstance(d, dict):
        raise ValueError(f"{path} must hold a JSON object, not {type(d).__name__}")
    return d
