"""Where things are: the repository minibert runs from, worked out here and nowhere else.

minibert runs from its checkout (an editable install): the shipped data (data/), the lessons,
the tests and the docs are files of the repository, found from this file's place in it. Runs are
not: a command writes its run to --out, by default `runs/NAME` under the current directory, on
every command (train, train-tiny, train-t5, train-xlnet, finetune, ablate).
"""
from __future__ import annotations

from pathlib import Path

_REPO = Path(__file__).resolve().parents[2]  # this file is <repo>/minibert/io/paths.py


def repo_root() -> Path:
    """The repository: the folder holding minibert/, data/, lessons/, tests/ and docs/."""
    return _REPO
