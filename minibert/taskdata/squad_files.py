"""SQuAD's data: the file names of each version, the data set minibert ships (data/squad2), and
the nesting of a SQuAD file walked with an error that names the file, the place and the key.
squad_eval.py scores with it, squad.py reads training examples with it, and
train/task_corpus.py takes the passages and questions as pretraining text.
"""
from __future__ import annotations

from pathlib import Path

FILES = {"squad2": ("train-v2.0.json", "dev-v2.0.json"), "squad1": ("train-v1.1.json", "dev-v1.1.json")}
DEFAULT_DIR = {"squad2": Path(__file__).resolve().parent.parent.parent / "data" / "squad2"}  # shipped, CC BY-SA


def require(obj, key: str, kind: type, where: str, path) -> object:
    """obj[key], checked to be of `kind`; ValueError naming the file, the place and the key.

    >>> require({"qas": 3}, "qas", list, "data[0].paragraphs[1]", "dev.json")
    Traceback (most recent call last):
    ValueError: dev.json: data[0].paragraphs[1].qas is int, expected list (not a SQuAD file?)
    """
    if not isinstance(obj, dict):
        raise ValueError(f"{path}: {where} is {type(obj).__name__}, expected an object "
                         f"(not a SQuAD file?)")
    if key not in obj:
        raise ValueError(f"{path}: {where} has no {key!r} (not a SQuAD file?)")
    value = obj[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise ValueError(f"{path}: {where}.{key} is {type(value).__name__}, expected "
                         f"{kind.__name__} (not a SQuAD file?)")
    return value


def iter_qas(squad_json, path):
    """Yield (where, paragraph, qa) for every question of a parsed SQuAD file, checking the
    nesting {"data": [{"paragraphs": [{"qas": [{"id": ...}]}]}]} on the way."""
    articles = require(squad_json, "data", list, "the top level", path)
    for a, article in enumerate(articles):
        paragraphs = require(article, "paragraphs", list, f"data[{a}]", path)
        for p, paragraph in enumerate(paragraphs):
            qas = require(paragraph, "qas", list, f"data[{a}].paragraphs[{p}]", path)
            for q, qa in enumerate(qas):
                where = f"data[{a}].paragraphs[{p}].qas[{q}]"
                qid = require(qa, "id", str, where, path)
                yield f"{where} (question id {qid!r})", paragraph, qa


def gold_texts(qa: dict, where: str, path) -> list[str]:
    """The gold answer texts of one question of a labelled SQuAD file ([] when it has no answer),
    checked against its `is_impossible`: a question that is not marked impossible (SQuAD 1.1 marks
    none) must have an answer text, and one marked impossible must have none. Scoring reads an
    empty list as "no answer is right", so a file whose answers were emptied scored 100 for a
    model that never answers.
    """
    answers = require(qa, "answers", list, where, path)
    texts = [require(a, "text", str, f"{where}.answers[{i}]", path) for i, a in enumerate(answers)]
    impossible = require(qa, "is_impossible", bool, where, path) if "is_impossible" in qa else False
    said = [t for t in texts if t.strip()]
    if not impossible and not said:
        raise ValueError(f"{path}: {where} has no answer text and is not marked is_impossible: an emptied answer "
                         f"would score \"no answer\" as right")
    if impossible and said:
        raise ValueError(f"{path}: {where} is marked is_impossible but has the answer {said[0][:60]!r}: which is "
                         f"meant?")
    return texts
