"""Bad input around pretraining: a damaged pretraining checkpoint on resume, a fine-tuning state
without usable best scores, settings out of range, devices and FIFOs where data is read, shard
directories whose meta or shards lie, and a run file that points nsp-baseline elsewhere. Each
case once ended in a traceback, in silent nonsense with exit 0, in a wait or a memory use without
end, or in a write outside the directory the command was told to write in; now each ends in one
`error:` line naming the file or the setting, and nothing outside the run directory changes.

The fixtures (the work folder, a paused fine-tuning run, a paused pretraining run) are in
conftest.py, the checks in refusals.py.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from corpora import REPO

from refusals import FT, listing, read_json, run_refused

from minibert.__main__ import main

# --- resuming a pretraining run from a damaged checkpoint ----------------------------------------


def _state(run: Path) -> Path:
    return run / "checkpoints" / "step-000004" / "trainer_state.json"


def _edit_state(run: Path, **changes) -> None:
    path = _state(run)
    path.write_text(json.dumps({**read_json(path), **changes}), encoding="utf-8")


def _drop_state(run: Path, key: str) -> None:
    state = read_json(_state(run))
    del state[key]
    _state(run).write_text(json.dumps(state), encoding="utf-8")


def _iterator(run: Path, **changes) -> dict:
    return {**read_json(_state(run))["iterator"], **changes}


PRETRAIN_STATE_CASES = {
    "step past total_steps": (lambda r: _edit_state(r, step=10), "step 10 is past total_steps 8"),
    "step not the directory's": (lambda r: _edit_state(r, step=3), "the checkpoint directory is step-000004"),
    "total_steps text": (lambda r: _edit_state(r, total_steps="x"), "total_steps is 'x'"),
    "elapsed NaN": (lambda r: _edit_state(r, elapsed_seconds=float("nan")), "elapsed_seconds is nan"),
    "model file missing": (lambda r: (r / "checkpoints/step-000004/model.safetensors").unlink(),
                           "model.safetensors is missing"),
    "sha256 null": (lambda r: _edit_state(r, sha256=None), "sha256 is None"),
    "sha256 of another file": (lambda r: _edit_state(r, sha256={"../../../etc/passwd": "0" * 64}), "sha256 is"),
    "iterator missing": (lambda r: _drop_state(r, "iterator"), "the iterator state is None"),
    "iterator empty": (lambda r: _edit_state(r, iterator={}), "the iterator state has no 'seed'"),
    "position negative": (lambda r: _edit_state(r, iterator=_iterator(r, position=-50)), "position=-50"),
    "epoch text": (lambda r: _edit_state(r, iterator=_iterator(r, epoch="x")), "epoch='x'"),
    "last_eval unknown fields": (lambda r: _edit_state(r, last_eval={"bogus": 1}), "last_eval is {'bogus': 1}"),
    "metrics binary": (lambda r: (r / "metrics.jsonl").write_bytes(bytes(range(128, 256)) * 8),
                       "metrics.jsonl line 1: invalid UTF-8 byte"),
    "metrics step text": (lambda r: (r / "metrics.jsonl").write_text('{"type": "train", "step": "x"}\n'
                                                                     '{"type": "train", "step": 2}\n'),
                          "metrics.jsonl: a record has step 'x'"),
}


@pytest.mark.parametrize("case", PRETRAIN_STATE_CASES, ids=list(PRETRAIN_STATE_CASES))
def test_a_damaged_pretraining_checkpoint_is_refused_on_resume_in_one_line(case, run_copy, capsys):
    damage, expected = PRETRAIN_STATE_CASES[case]
    damage(run_copy)
    run_refused(run_copy.parent, ["train", "--resume", "{w}/run"], expected, capsys, writes="run")


def test_an_intact_paused_pretraining_run_still_resumes(run_copy, capsys):
    """The checks above refuse damage only: the run itself continues to its end."""
    assert main(["train", "--resume", str(run_copy)]) == 0, capsys.readouterr().err
    assert read_json(next((run_copy / "checkpoints").glob("step-*")) / "trainer_state.json")["step"] == 8


FINETUNE_STATE_CASES = {
    "best missing": (lambda s: {k: v for k, v in s.items() if k != "best"}, "has no best"),
    "best a number": (lambda s: {**s, "best": 5}, "best is 5"),
}


@pytest.mark.parametrize("case", FINETUNE_STATE_CASES, ids=list(FINETUNE_STATE_CASES))
def test_a_fine_tuning_state_without_usable_best_scores_is_refused(case, paused, capsys):
    edit, expected = FINETUNE_STATE_CASES[case]
    path = next(paused.glob("checkpoints/step-*")) / "trainer_state.json"
    path.write_text(json.dumps(edit(read_json(path))), encoding="utf-8")
    run_refused(paused.parent, ["finetune", "--resume", "{w}/ft", "--quiet"], expected, capsys, writes="ft")


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
    "train data_cache empty": (lambda c: _train(c, "--set", "data_cache="), "data_cache='' must name a directory"),
    "train corpus a directory": (lambda c: _train(c)[:2] + ["{w}/sst"] + _train(c)[3:],
                                 "sst is not a regular file"),
    "finetune seed -1": (lambda c: FT + ["--seed", "-1"], "seed=-1 is out of range"),
    "finetune epochs inf": (lambda c: FT + ["--epochs", "inf"], "epochs=inf must be a finite number"),
    "finetune lr inf": (lambda c: FT + ["--lr", "inf"], "lr=inf must be a finite number"),
    "finetune minutes nan": (lambda c: FT + ["--minutes", "nan"], "minutes=nan must be a finite number"),
    "nsp-baseline max-train 0": (lambda c: ["nsp-baseline", "{w}/pre", "--max-train", "0"], "--max-train 0"),
    "nsp-baseline max-train -5": (lambda c: ["nsp-baseline", "{w}/pre", "--max-train", "-5"], "--max-train -5"),
    "export-data seed -1": (lambda c: ["export-data", "{w}/pre", "--out", "{w}/x.jsonl", "--seed", "-1"],
                            "--seed -1 must be >= 0"),
    "export-data --out a directory": (lambda c: ["export-data", "{w}/pre", "--out", "{w}/sst"], "is a directory"),
    "gradcheck seed -1": (lambda c: ["gradcheck", "--seed", "-1"], "--seed -1 must be >= 0"),
    "ablate steps 0": (lambda c: ["ablate", "tasks", "--steps", "0", "--minutes", "0.01", "--out", "{w}/ab"],
                       "--steps 0 must be at least 1"),  # (--minutes: a regression fails at once, not in 5 minutes)
    "ablate finetune minutes nan": (lambda c: ["ablate", "tasks", "--tasks", "wnut17", "--finetune-minutes", "nan",
                                               "--out", "{w}/ab"], "--finetune-minutes nan"),
    "xlnet steps 0": (lambda c: ["train-xlnet", "--steps", "0", "--minutes", "0.01", "--corpus", c["corpus"][0],
                                 "--heldout", c["heldout"][0], "--vocab", c["vocab"], "--out", "{w}/x"],
                      "--steps must be at least 1, got 0"),
    "squad-eval threshold nan": (lambda c: ["squad-eval", "{w}/squad/dev-v2.0.json", "{w}/squad/dev-v2.0.json",
                                            "--na-prob-thresh", "nan"], "--na-prob-thresh nan"),
    "attention empty text": (lambda c: ["attention", "{w}/pre", "", "--out", "{w}/att"], "attention needs the text"),
    "attention --out a file": (lambda c: ["attention", "{w}/pre", "the film", "--out", "{w}/sst/train.tsv"],
                               "sst/train.tsv is a file"),
}


@pytest.mark.parametrize("case", SETTINGS_CASES, ids=list(SETTINGS_CASES))
def test_settings_out_of_range_are_refused_before_anything_is_written(case, corpus, work, capsys, monkeypatch):
    argv, expected = SETTINGS_CASES[case]
    monkeypatch.chdir(work)  # what a relative path (data_cache='') would write lands where the listing sees it
    default_corpus = (REPO / "data" / "pydoc").exists()  # ablate's NaN used to build it first, then fail
    run_refused(work, argv(corpus), expected, capsys)
    assert (REPO / "data" / "pydoc").exists() == default_corpus


def test_a_diverging_fine_tuning_run_ends_in_one_error_line(work, capsys):
    """lr 1e30 is finite, so it passes the settings check; the NaN loss that follows is one error
    line (exit 1), not a TrainingDiverged traceback."""
    run_refused(work, FT + ["--lr", "1e30"], "loss is nan", capsys, writes="ft")


# --- files that are no regular files, and shard directories that lie ----------------------------

def _in_subprocess(argv: list[str], limit_bytes: int = 3 << 30) -> subprocess.CompletedProcess:
    """The command in a fresh process with its address space capped, so that a regression (a
    FIFO read forever, /dev/zero read into memory) fails the test instead of hanging it."""
    import resource

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))

    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("MINIBERT_TRACEBACK", None)
    return subprocess.run([sys.executable, "-m", "minibert", *argv], capture_output=True, text=True, timeout=120,
                          env=env, preexec_fn=cap)


def test_devices_and_fifos_are_refused_not_read_forever(corpus, work):
    os.mkfifo(work / "fifo.json")
    (work / "pred.json").write_text('{"q1": "john"}', encoding="utf-8")
    (work / "cls" / "config.json").unlink()
    os.mkfifo(work / "cls" / "config.json")
    cases = [
        (["train-t5", "--corpus", "/dev/zero", "--heldout", corpus["heldout"][0], "--vocab", corpus["vocab"],
          "--steps", "1", "--out", str(work / "t5")], "cannot read /dev/zero: not a regular file"),
        (["squad-eval", str(work / "squad/dev-v2.0.json"), str(work / "fifo.json")], "fifo.json: not a regular file"),
        (["squad-eval", str(work / "squad/dev-v2.0.json"), str(work / "pred.json"), "--na-prob",
          str(work / "fifo.json")], "fifo.json: not a regular file"),
        (["predict", str(work / "cls"), "a good film"], "config.json is not a regular file"),
    ]
    before = listing(work)
    for argv, expected in cases:
        res = _in_subprocess(argv)
        lines = [line for line in res.stderr.splitlines() if line.strip()]
        assert res.returncode == 1 and "Traceback" not in res.stderr, (argv[0], res.stderr[-2000:])
        assert lines[-1].startswith("error:") and expected in lines[-1], lines[-1]
    assert listing(work) == before


def _shards(corpus, work: Path) -> Path:
    assert main([a.format(w=work) for a in _data(corpus, "--dupe-factor", "1")]) == 0
    return work / "shards"


def test_a_shard_directory_whose_meta_or_shards_lie_is_refused(corpus, work, capsys):
    shards = _shards(corpus, work)
    capsys.readouterr()
    meta = read_json(shards / "meta.json")
    argv = ["export-data", "{w}/shards", "--out", "{w}/x.jsonl"]
    (shards / "meta.json").write_text(json.dumps({**meta, "shards": 5}), encoding="utf-8")
    run_refused(work, argv, "shards is 5; expected a list", capsys)
    outside = [{**meta["shards"][0], "file": "../../../../../etc/passwd"}]  # read outside the directory
    (shards / "meta.json").write_text(json.dumps({**meta, "shards": outside}), encoding="utf-8")
    run_refused(work, argv, "shards[0] is", capsys)
    (shards / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    import numpy as np

    with open(shards / meta["shards"][0]["file"], "wb") as f:  # an object array: loading it would unpickle
        np.save(f, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    run_refused(work, argv, "it holds pickled objects, which minibert never loads", capsys)


# --- nsp-baseline: the run file decides what is read, never where anything is written -----------

def test_nsp_baseline_writes_nothing_where_the_run_file_points(run_copy, capsys):
    work = run_copy.parent
    saved = read_json(run_copy / "run.json")
    hostile = {**saved, "settings": {**saved["settings"], "data_cache": str(work / "elsewhere")}}
    (run_copy / "run.json").write_text(json.dumps(hostile), encoding="utf-8")
    before = listing(work)
    assert main(["nsp-baseline", str(run_copy)]) == 0, capsys.readouterr().err
    assert listing(work) == before  # the recorded shards are read; nothing is generated
    # the recorded shards gone: generated again into --data-cache only, never into `elsewhere`
    gone = {**hostile, "data": {k: str(work / "gone" / Path(v).name) for k, v in saved["data"].items()}}
    (run_copy / "run.json").write_text(json.dumps(gone), encoding="utf-8")
    before = listing(work)
    assert main(["nsp-baseline", str(run_copy), "--data-cache", str(work / "cache")]) == 0, capsys.readouterr().err
    assert not (work / "elsewhere").exists()
    changed = {k for k, v in listing(work).items() if before.get(k) != v}
    assert changed and all(k.startswith("cache/") for k in changed), sorted(changed)
