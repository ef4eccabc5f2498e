"""More hostile input (issue 37, the probe after test_bad_input.py): each case ended in a traceback,
in silent nonsense with exit 0, in a wait or a memory use without end, or in a write outside the
directory the command was told to write in. Now each ends in one `error:` line naming the file or
the setting, and nothing outside the run directory changes.

The helpers and the fixtures (a pretrained directory, a classifier, SST-style data, a SQuAD file,
a paused fine-tuning run) are test_bad_input.py's; this file adds a paused pretraining run.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from corpora import REPO, small_config
from test_bad_input import _listing, _read, base, paused, run_refused, work  # noqa: F401 (fixtures)

from minibert.__main__ import main

# --- settings out of range, checked before anything is written ---------------------------------

def _data(corpus, *flags):
    return ["data", "--corpus", corpus["corpus"][0], "--vocab", corpus["vocab"], "--out", "{w}/shards", *flags]


def _train(corpus, *flags):
    return ["train", "--corpus", corpus["corpus"][0], "--heldout", corpus["heldout"][0], "--vocab", corpus["vocab"],
            "--out", "{w}/run", "--steps", "2", "--set", "hidden_size=16", "--set", "num_hidden_layers=1",
            "--set", "num_attention_heads=2", "--set", "intermediate_size=32", *flags]


FT = ["finetune", "custom", "--format", "glue-single", "--data", "{w}/sst", "--init", "{w}/pre", "--out", "{w}/ft",
      "--batch-size", "8", "--max-seq-length", "16", "--quiet"]

SETTINGS_CASES = {
    "data masked_lm_prob 2": (lambda c: _data(c, "--masked-lm-prob", "2"), "masked_lm_prob=2.0 must be in (0, 1]"),
    "data dupe_factor 0": (lambda c: _data(c, "--dupe-factor", "0"), "dupe_factor=0 must be"),
    "data max predictions -1": (lambda c: _data(c, "--max-predictions-per-seq", "-1"),
                                "max_predictions_per_seq=-1 must be"),
    "data short_seq_prob nan": (lambda c: _data(c, "--short-seq-prob", "nan"), "short_seq_prob=nan must be in [0, 1]"),
    "data --out a file": (lambda c: _data(c)[:-1] + ["{w}/sst/train.tsv"], "sst/train.tsv is a file"),
}


@pytest.mark.parametrize("case", SETTINGS_CASES, ids=list(SETTINGS_CASES))
def test_settings_out_of_range_are_refused_before_anything_is_written(case, corpus, work, capsys, monkeypatch):
    argv, expected = SETTINGS_CASES[case]
    monkeypatch.chdir(work)  # what a relative path (data_cache='') would write lands where the listing sees it
    default_corpus = (REPO / "data" / "pydoc").exists()  # ablate's NaN used to build it first, then fail
    run_refused(work, argv(corpus), expected, capsys)
    assert (REPO / "data" / "pydoc").exists() == default_corpus


# --- files that are no regular files, and shard directories that lie ----------------------------

def _shards(corpus, work: Path) -> Path:
    assert main([a.format(w=work) for a in _data(corpus, "--dupe-factor", "1")]) == 0
    return work / "shards"


def test_a_shard_directory_whose_meta_or_shards_lie_is_refused(corpus, work, capsys):
    shards = _shards(corpus, work)
    capsys.readouterr()
    meta = _read(shards / "meta.json")
    argv = ["export-data", "{w}/shards", "--out", "{w}/x.jsonl"]
    (shards / "meta.json").write_text(json.dumps({**meta, "shards": 5}), encoding="utf-8")
    run_refused(work, argv, "shards is 5, expected a list", capsys)
    outside = [{**meta["shards"][0], "file": "../../../../../etc/passwd"}]  # read outside the directory
    (shards / "meta.json").write_text(json.dumps({**meta, "shards": outside}), encoding="utf-8")
    run_refused(work, argv, "shards[0] is", capsys)
    (shards / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    import numpy as np

    with open(shards / meta["shards"][0]["file"], "wb") as f:  # an object array: loading it would unpickle
        np.save(f, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    run_refused(work, argv, "it holds pickled objects, which minibert never loads", capsys)
