"""Run files read by one typed reader, model directories loaded one way (issue 56).

Every field minibert reads from a run file (run.json, trainer_state.json, compile-ahead's marker)
has its type and its range in a small schema that io/jsonfile.check_fields applies: a wrong type
is one `error:` line naming the file and the field, not a TypeError in whichever command reads it
first. A value an error echoes is at most 200 characters with its length (and the command line
cuts anything longer that nobody capped). Every command that loads a model directory checks its
vocab.txt against the checkpoint with checkpoint.model_tokenizer: a 500-line vocab beside a model
of another vocab_size made `predict` answer and `evaluate` score, both with exit status 0.

The fixtures are in conftest.py, the checks in refusals.py.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest
from refusals import FT, VOCAB, edit_json, read_json, refused, run_refused

from minibert import compile_ahead
from minibert.__main__ import main
from minibert.loop import rundir
from minibert.train.xlnet_command import XLNetTrainConfig

HUGE = "A" * 3_000_000  # a 3 MB string: no field of a run file is that long
LIMIT = 2000  # an error line longer than this echoes a value nobody capped (a list of the known settings: 900)

WRONG_TYPES = {"a string": "2", "null": None, "a list": [2], "an object": {}}


def _state(run: Path) -> Path:
    return next(run.glob("checkpoints/step-*")) / "trainer_state.json"


# --- run.json ------------------------------------------------------------------------------------

OTHER_LAYOUTS = {**WRONG_TYPES, "1": 1, "3": 3, "true": True, "2.0": 2.0}


@pytest.mark.parametrize("value", list(OTHER_LAYOUTS.values()), ids=list(OTHER_LAYOUTS))
def test_a_run_json_of_another_layout_is_refused_by_train_resume(value, run_copy, capsys):
    """A run written by another format of minibert: one line naming run.json, nothing written."""
    edit_json(run_copy / "run.json", layout=value)
    run_refused(run_copy.parent, ["train", "--resume", "{w}/run"],
                "run.json: the run was written by another format of minibert (", capsys,
                writes="run")


@pytest.mark.parametrize("value", list(OTHER_LAYOUTS.values()), ids=list(OTHER_LAYOUTS))
def test_a_run_json_of_another_layout_is_refused_by_finetune_resume(value, paused, capsys):
    edit_json(paused / "run.json", layout=value)
    run_refused(paused.parent, ["finetune", "--resume", "{w}/ft", "--quiet"],
                "run.json: the run was written by another format of minibert (", capsys,
                writes="ft")


def _xlnet_run(d: Path, **extra) -> Path:
    """A train-xlnet run directory as far as --resume reads it before training: run.json and a
    checkpoint whose state can resume."""
    rundir.write_run(d, "train-xlnet", XLNetTrainConfig.build().to_dict(), preset="xlnet-tiny", **extra)
    (d / "checkpoints" / "step-000001").mkdir(parents=True)
    (d / "checkpoints" / "step-000001" / "trainer_state.json").write_text('{"batches": {}}', encoding="utf-8")
    return d


XLNET_DATA = {
    "a string": ("corpus.txt", "run.json: data is 'corpus.txt'"),
    "a list": (["corpus.txt"], "run.json: data is ['corpus.txt']"),
    "no heldout": ({"corpus": "c.txt", "vocab": "v.txt"}, "run.json has no data.heldout"),
    "an empty object": ({}, "run.json has no data.corpus"),
    "a number as a path": ({"corpus": 7, "heldout": "h.txt", "vocab": "v.txt"}, "run.json: data is"),
    "a null path": ({"corpus": "c.txt", "heldout": None, "vocab": "v.txt"}, "run.json: data is"),
    "a huge path": ({"corpus": HUGE, "heldout": "h.txt", "vocab": "v.txt"}, "run.json: data is"),
}


@pytest.mark.parametrize("case", XLNET_DATA, ids=list(XLNET_DATA))
def test_train_xlnet_resume_refuses_a_data_field_of_the_wrong_shape(case, tmp_path, capsys):
    """`data` a string, a list or without its keys: TypeError / KeyError on --resume."""
    data, expected = XLNET_DATA[case]
    _xlnet_run(tmp_path / "w" / "x", data=data)
    run_refused(tmp_path / "w", ["train-xlnet", "--resume", "{w}/x"], expected, capsys, writes="x")


def _finetune_run_json(model: Path, **changes) -> None:
    """run.json of the fine-tuning run that saved `model` (evaluate reads its task)."""
    task = {"name": "glue-single", "kind": "classification", "format": "glue-single", "labels": ["0", "1"],
            "main_metric": "accuracy", "max_seq_length": 16, "train_file": "train.tsv", "dev_file": "dev.tsv",
            "train_examples": 32, "dev_examples": 8, "train_features": 32, "dev_features": 8}
    extra = {"task": task, "architecture": "BertForSequenceClassification", "total_steps": 4, "best": None}
    for key, value in changes.items():
        if key.startswith("task_"):
            task[key[len("task_"):]] = value
        else:
            extra[key] = value
    rundir.write_run(model, "finetune", {}, **extra)


@pytest.mark.parametrize("layout", [None, 1])
def test_a_finished_model_beside_a_run_json_of_another_format_still_loads(layout, work, capsys):
    """A model is a transformers directory: predict reads it (its task then comes from --format),
    whatever run.json lies beside it."""
    _finetune_run_json(work / "cls")
    edit_json(work / "cls" / "run.json", layout=layout)
    capsys.readouterr()
    assert main(["predict", str(work / "cls"), "a good film", "--format", "glue-single"]) == 0
    out = capsys.readouterr().out.split()
    assert out and out[0] in ("LABEL_0", "LABEL_1")  # the model config.json names its labels


RUN_FIELDS = {  # another field of run.json, each read by another command
    "command a list": ("train", lambda w: edit_json(w / "run" / "run.json", command=["train"]),
                       "run.json: command is ['train']"),
    "data a list (nsp-baseline)": ("nsp-baseline", lambda w: edit_json(w / "run" / "run.json", data=["x"]),
                                   "run.json: data is ['x']"),
    "total_steps text": ("evaluate", lambda w: _finetune_run_json(w / "cls", total_steps="4"),
                         "run.json: total_steps is '4'"),
    "task a list": ("evaluate", lambda w: _finetune_run_json(w / "cls", task=["glue-single"]),
                    "run.json: task is ['glue-single']"),
    "task.max_seq_length text": ("evaluate", lambda w: _finetune_run_json(w / "cls", task_max_seq_length="16"),
                                 "run.json: task.max_seq_length is '16'"),
    "task.labels an object": ("evaluate", lambda w: _finetune_run_json(w / "cls", task_labels={"0": "neg"}),
                              "run.json: task.labels is {'0': 'neg'}"),
    "task.format huge": ("evaluate", lambda w: _finetune_run_json(w / "cls", task_format=HUGE),
                         "run.json: task.format is 'AAAA"),
}
COMMANDS = {"train": ["train", "--resume", "{w}/run"], "nsp-baseline": ["nsp-baseline", "{w}/run"],
            "evaluate": ["evaluate", "{w}/cls", "--data", "{w}/sst/dev.tsv"]}


@pytest.mark.parametrize("case", RUN_FIELDS, ids=list(RUN_FIELDS))
def test_another_run_json_field_of_the_wrong_type_is_one_line(case, request, capsys):
    command, damage, expected = RUN_FIELDS[case]
    work = request.getfixturevalue("work" if command == "evaluate" else "run_copy")
    work = work if command == "evaluate" else work.parent
    damage(work)
    run_refused(work, COMMANDS[command], expected, capsys, writes="run" if command != "evaluate" else "cls/run.json")


# --- trainer_state.json --------------------------------------------------------------------------

STATE_FIELDS = {
    "status a list": ("status", ["done"], "status is ['done']"),
    "eval_interval text": ("eval_interval", "x", "eval_interval is 'x'"),
    "last_eval_step an object": ("last_eval_step", {}, "last_eval_step is {}"),
    "layout 9": ("layout", 9, "the run was written by another format of minibert (layout 9; this one writes layout 2)"),
    "no layout": ("layout", None, "the run was written by another format of minibert (no layout;"),
    "lr_anchor text": ("lr_anchor", "x", "lr_anchor is 'x'"),
}


@pytest.mark.parametrize("case", STATE_FIELDS, ids=list(STATE_FIELDS))
def test_a_loop_field_of_trainer_state_of_the_wrong_type_is_refused(case, run_copy, capsys):
    """Each was taken as it was (a run resumed with a list for its status), or failed later."""
    key, value, expected = STATE_FIELDS[case]
    edit_json(_state(run_copy), **{key: value})
    run_refused(run_copy.parent, ["train", "--resume", "{w}/run"], f"trainer_state.json: {expected}", capsys,
                writes="run")


# --- huge values: never echoed whole -------------------------------------------------------------

def _settings(run: Path, **changes) -> None:
    edit_json(run / "run.json", settings={**read_json(run / "run.json")["settings"], **changes})


HUGE_CASES = {
    "config.json hidden_act": ("work", lambda w: edit_json(w / "cls" / "config.json", hidden_act=HUGE),
                               ["predict", "{w}/cls", "good film"], "hidden_act"),
    "run.json masking": ("run_copy", lambda r: _settings(r, masking=HUGE), ["train", "--resume", "{w}/run"],
                         "masking="),
    "run.json an unknown setting": ("run_copy", lambda r: _settings(r, **{HUGE: 1}),
                                    ["train", "--resume", "{w}/run"], "unknown"),
    "run.json format": ("paused", lambda r: _settings(r, format=HUGE), ["finetune", "--resume", "{w}/ft", "--quiet"],
                        "format"),
    "run.json command": ("run_copy", lambda r: edit_json(r / "run.json", command=HUGE),
                         ["train", "--resume", "{w}/run"], "run.json: command is 'AAAA"),
    "trainer_state.json step": ("run_copy", lambda r: edit_json(_state(r), step=HUGE),
                                ["train", "--resume", "{w}/run"], "trainer_state.json: step is 'AAAA"),
}


@pytest.mark.parametrize("case", HUGE_CASES, ids=list(HUGE_CASES))
def test_a_huge_string_in_a_run_file_is_not_echoed_whole(case, request, capsys):
    """A 3 MB value is named with at most 200 of its characters and its length."""
    fixture, damage, argv, expected = HUGE_CASES[case]
    where = request.getfixturevalue(fixture)
    damage(where)
    work = where if fixture == "work" else where.parent
    before = {p: p.stat().st_mtime_ns for p in work.rglob("*") if p.is_file() and ".lock" not in p.name}
    rc = main([a.format(w=work) for a in argv])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 1 and len(lines) == 1 and lines[0].startswith("error:"), err[:LIMIT]
    assert expected in lines[0] and len(lines[0]) < LIMIT, lines[0][:LIMIT]
    assert "characters)" in lines[0], lines[0]  # says how long the value was
    assert {p: p.stat().st_mtime_ns for p in work.rglob("*") if p.is_file() and ".lock" not in p.name} == before


# --- compile-ahead's marker ----------------------------------------------------------------------

def _marker(tmp_path, monkeypatch, text: str | None) -> Path:
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    path = compile_ahead.marker_path()
    monkeypatch.setattr(compile_ahead, "_noted", set(), raising=False)
    if text is None:
        os.mkfifo(path)
    else:
        path.write_text(text, encoding="utf-8")
    return path


MARKERS = {
    "plans a number": lambda key: {"key": key, "plans": 7},
    "plans null": lambda key: {"key": key, "plans": None},
    "plans of lists": lambda key: {"key": key, "plans": [["step"]]},
    "key a list": lambda key: {"key": [key], "plans": ["step"]},
    "a list": lambda key: [key],
}


@pytest.mark.parametrize("case", [*MARKERS, "a FIFO", "not JSON"])
def test_a_bad_compile_ahead_marker_is_read_as_absent_with_a_note(case, tmp_path, monkeypatch, capsys):
    """`"plans": 7` or null was a TypeError in compile-ahead and train-tiny (both ask is_warm); a
    FIFO in the marker's place made compile-ahead wait forever. Now the cache is taken as cold,
    with one note (once), and the next clean compile writes the marker again."""
    text = None if case == "a FIFO" else "{not json" if case == "not JSON" else \
        json.dumps(MARKERS[case](compile_ahead.cache_key()))
    _marker(tmp_path, monkeypatch, text)
    old = signal.signal(signal.SIGALRM, lambda *a: pytest.fail("reading the marker waited"))
    signal.alarm(10)
    try:
        assert compile_ahead.is_warm(["step"]) is False
        assert compile_ahead.warm_plans() == []
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    err = capsys.readouterr().err
    assert err.count("note: the compile-ahead marker is not readable") == 1, err
    assert len(err) < LIMIT


def test_a_good_marker_still_says_warm(tmp_path, monkeypatch, capsys):
    _marker(tmp_path, monkeypatch, json.dumps({"key": compile_ahead.cache_key(), "plans": ["step", "attention"]}))
    assert compile_ahead.is_warm(["step"]) and not compile_ahead.is_warm(["lesson10"])
    assert capsys.readouterr().err == ""


# --- model directories: the vocabulary against the checkpoint ------------------------------------

LOADERS = {
    "predict": ["predict", "{w}/cls", "a good film"],
    "evaluate": ["evaluate", "{w}/cls", "--data", "{w}/sst/dev.tsv", "--format", "glue-single"],
    "fill-mask": ["fill-mask", "{w}/pre", "the [MASK] was good"],
    "attention": ["attention", "{w}/pre", "good film", "--out", "{w}/maps"],
    "finetune --init": ["finetune", "custom", "--format", "glue-single", "--data", "{w}/sst", "--init", "{w}/pre",
                        "--out", "{w}/ft", "--epochs", "1", "--quiet"],
}


@pytest.mark.parametrize("lines", [500, 9193], ids=["a smaller vocab", "a larger vocab"])
@pytest.mark.parametrize("command", LOADERS, ids=list(LOADERS))
def test_every_command_refuses_a_vocab_txt_of_another_size_than_the_model(command, lines, work, decoy, capsys):
    """predict answered (rc 0) with 500 lines beside the model and evaluate scored with 9,193;
    fill-mask, attention and finetune --init refused: now one check, one message, for all."""
    for model in ("cls", "pre"):
        (work / model / "vocab.txt").write_text("".join(f"{t}\n" for t in VOCAB + [f"tok{i}" for i in range(lines - len(VOCAB))]),
                                                encoding="utf-8")
    run_refused(work, LOADERS[command], "vocab/checkpoint mismatch", capsys)
    assert sorted(p.name for p in decoy.iterdir()) == ["step-000001", "target.txt"]


@pytest.mark.parametrize("command", LOADERS, ids=list(LOADERS))
def test_every_command_refuses_a_model_directory_without_vocab_txt(command, work, capsys):
    for model in ("cls", "pre"):
        (work / model / "vocab.txt").unlink()
    run_refused(work, LOADERS[command], "vocab.txt", capsys)


def test_every_command_prints_its_error_line_one_way():
    """The cap on an error line holds for every command only if every command prints it with
    io/textio.error_line (a command that printed `error: {e}` itself echoed a 3 MB value whole)."""
    package = Path(__file__).resolve().parents[2] / "minibert"
    own = [f"{p.relative_to(package)}:{i}" for p in sorted(package.rglob("*.py"))
           for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if 'f"error: {e' in line]
    assert own == [], own


# --- a run killed before its first checkpoint ----------------------------------------------------

def test_a_run_killed_before_its_first_checkpoint_is_not_sent_to_resume(paused, capsys):
    """A fine-tuning run writes its best model before the checkpoint that follows the evaluation;
    killed between the two, it was called "a finished finetune run" and sent to --resume, which
    then found no checkpoint. Now it is named as what it is, and --overwrite is the way on."""
    shutil.rmtree(paused / "checkpoints")
    shutil.copy(paused.parent / "cls" / "model.safetensors", paused / "model.safetensors")  # the best model so far
    run_refused(paused.parent, FT, "a finetune run that stopped before its first checkpoint (its model is there; "
                                   "nothing to resume); nothing was written. Replace it with --overwrite", capsys)
    run_refused(paused.parent, ["finetune", "--resume", "{w}/ft", "--quiet"], "no checkpoint", capsys, writes="ft")


# --- a shard directory's meta.json ---------------------------------------------------------------

META_CASES = {
    "flags a list": ({"flags": ["x"]}, "meta.json: flags is ['x']"),
    "special_ids a list": ({"special_ids": [2, 3]}, "meta.json: special_ids is [2, 3]"),
    "vocab_size text": ({"vocab_size": "50"}, "meta.json: vocab_size is '50'"),
    "format huge": ({"format": HUGE}, "meta.json: format is 'AAAA"),
    "version 2": ({"version": 2}, "meta.json: version is 2; expected 1"),
}


@pytest.mark.parametrize("case", META_CASES, ids=list(META_CASES))
def test_a_shard_index_field_of_the_wrong_type_is_one_line(case, corpus, tmp_path, capsys):
    """flags or special_ids a list was an AttributeError where the batches are made; a huge
    format was echoed whole."""
    work = tmp_path / "w"
    work.mkdir()
    assert main(["data", "--corpus", corpus["corpus"][0], "--vocab", corpus["vocab"], "--out", str(work / "shards"),
                 "--dupe-factor", "1"]) == 0
    capsys.readouterr()
    changes, expected = META_CASES[case]
    edit_json(work / "shards" / "meta.json", **changes)
    run_refused(work, ["export-data", "{w}/shards", "--out", "{w}/x.jsonl"], expected, capsys)


# --- other files minibert reads back: a train-t5 run's config.json, the corpus' stats.json -------

def test_a_t5_config_json_that_is_not_an_object_is_one_error(tmp_path):
    """load_run read it with .get: a list was an AttributeError."""
    from minibert.train import t5

    (tmp_path / "config.json").write_text("[1]", encoding="utf-8")
    with pytest.raises(ValueError, match="config.json must hold a JSON object, not list"):
        t5.load_run(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": HUGE}), encoding="utf-8")
    with pytest.raises(ValueError, match=r"describes model_type 'AAAA.*\(3,000,000 characters\), not a minibert-t5"):
        t5.load_run(tmp_path)


def test_a_damaged_corpus_stats_json_is_one_error(tmp_path):
    """The default corpus' stats.json was read with json.loads and indexed: a list was a TypeError."""
    from minibert.data import corpus

    (tmp_path / "stats.json").write_text("[1]", encoding="utf-8")
    (tmp_path / "heldout.txt").write_text("the film\n", encoding="utf-8")
    with pytest.raises(ValueError, match="stats.json must hold a JSON object"):
        corpus._record_vocab_stats(tmp_path / "stats.json", VOCAB, "score", tmp_path / "heldout.txt")


@pytest.mark.parametrize("value", [["regression"], {}, 7, HUGE], ids=["a list", "an object", "a number", "huge"])
def test_a_task_models_problem_type_of_the_wrong_type_is_refused(value, work, decoy, capsys):
    """config.json's problem_type of any type was taken (predict answered, rc 0)."""
    edit_json(work / "cls" / "config.json", problem_type=value)
    refused(work, decoy, ["predict", "{w}/cls", "a good film"], "config.json: problem_type is", capsys)


SAVED_SETTINGS = {  # found by this branch's probe: a saved setting of the wrong shape, on train --resume
    "model a string": ({"model": "tiny"}, "an object \"model\""),
    "model a list": ({"model": [1]}, "an object \"model\""),
    "corpus of numbers": ({"corpus": [2]}, "corpus is [2]; it must be a list of strings"),
    "heldout of lists": ({"heldout": [["a"]]}, "heldout is [['a']]; it must be a list of strings"),
}


@pytest.mark.parametrize("case", SAVED_SETTINGS, ids=list(SAVED_SETTINGS))
def test_a_saved_setting_of_the_wrong_shape_is_one_line(case, run_copy, capsys):
    """They were an AttributeError ('str' object has no attribute 'items') and a TypeError (a
    path that is an int)."""
    changes, expected = SAVED_SETTINGS[case]
    _settings(run_copy, **changes)
    run_refused(run_copy.parent, ["train", "--resume", "{w}/run"], expected, capsys, writes="run")
