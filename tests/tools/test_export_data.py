"""export-data: minibert's MLM/NSP features as the JSON lines transformers' BertForPreTraining
takes (tests/interop/test_handoff.py feeds them to transformers' Trainer)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from minibert.data.pretraining_data import FEATURE_NAMES
from minibert.data.shards import build_pretraining_data, load_shards
from minibert.tools.export_data import IGNORE, cli, to_transformers

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "dog", "sat", "ran", "on", "mat", "."]


def test_labels_hold_the_targets_at_the_predicted_positions_only():
    batch = {"input_ids": np.array([[2, 4, 6, 3, 0], [2, 5, 4, 3, 7]]),
             "segment_ids": np.array([[0, 0, 0, 0, 0], [0, 0, 0, 1, 1]]),
             "input_mask": np.array([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]),
             "masked_lm_positions": np.array([[1, 0], [2, 4]]),
             "masked_lm_ids": np.array([[7, 0], [9, 11]]),
             "masked_lm_weights": np.array([[1.0, 0.0], [1.0, 1.0]]),  # one unused slot in row 0
             "next_sentence_labels": np.array([1, 0])}
    rows = list(to_transformers(batch))
    assert rows[0] == {"input_ids": [2, 4, 6, 3, 0], "token_type_ids": [0, 0, 0, 0, 0],
                       "attention_mask": [1, 1, 1, 1, 0], "labels": [IGNORE, 7, IGNORE, IGNORE, IGNORE],
                       "next_sentence_label": 1}
    assert rows[1]["labels"] == [IGNORE, IGNORE, 9, IGNORE, 11] and rows[1]["next_sentence_label"] == 0


def test_a_data_directory_exports_every_sequence_once_with_its_stored_masks(tmp_path, capsys):
    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    docs = ["the cat sat on the mat .\nthe dog ran .\nthe cat ran on the mat .",
            "the dog sat .\nthe mat .\nthe cat sat on the dog .", "the dog ran on the mat .\nthe cat ."]
    (tmp_path / "c.txt").write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    build_pretraining_data([tmp_path / "c.txt"], tmp_path / "vocab.txt", tmp_path / "data", max_seq_length=16,
                           max_predictions_per_seq=3, dupe_factor=3, verbose=False)
    stored = load_shards(tmp_path / "data", names=FEATURE_NAMES)
    assert cli([str(tmp_path / "data"), "--out", str(tmp_path / "x.jsonl")]) == 0
    assert "wrote" in capsys.readouterr().out
    rows = [json.loads(line) for line in (tmp_path / "x.jsonl").read_text().splitlines()]
    assert len(rows) == len(stored["input_ids"])
    # the same multiset of sequences (the export is shuffled), with the stored masks
    key = lambda ids, labels: (tuple(ids), tuple(labels))  # noqa: E731
    expected = sorted(key(r["input_ids"], r["labels"]) for r in to_transformers(stored))
    assert sorted(key(r["input_ids"], r["labels"]) for r in rows) == expected
    assert cli([str(tmp_path / "data"), "--out", str(tmp_path / "y.jsonl"), "--limit", "2"]) == 0
    assert len((tmp_path / "y.jsonl").read_text().splitlines()) == 2


def test_a_directory_that_is_neither_run_nor_data_is_named(tmp_path):
    with pytest.raises(ValueError, match=f"{tmp_path} is neither a training run .*nor a pretraining data"):
        cli([str(tmp_path), "--out", str(tmp_path / "x.jsonl")])
    assert not (tmp_path / "x.jsonl").exists()
