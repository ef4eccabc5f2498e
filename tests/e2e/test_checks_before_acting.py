"""Check everything, then act (issue 56; docs/safety.md "Checks before acting"): every setting of a
training command, the data's lengths against the model included, is checked before a byte is
deleted or written, so `--overwrite` with a bad value leaves the old run whole; `--resume` takes
the saved settings and refuses, by name, any option that would change them (one rule, for every
command that has --resume); integer settings are integers and every one has a range; predict's
--threshold is honoured by every path that answers questions and refused, in the same words,
everywhere else."""
from __future__ import annotations

import pytest
from refusals import FT, edit_json, qa_model, read_json, refused, run_refused

from minibert.__main__ import main

from minibert.loop.state import LoopSettings
from minibert.train.t5_command import T5TrainConfig, command_defaults
from minibert.train.xlnet_command import XLNetTrainConfig

SQUAD = ["finetune", "squad2", "--data", "{w}/squad", "--init", "{w}/pre", "--out", "{w}/sq", "--quiet"]


# --- a bad value with --overwrite: refused while the old run is still whole ----------------------

@pytest.mark.parametrize("extra, expected", [
    (["--set", "clip_norm=0"], "clip_norm"),  # the case: was checked by the first step
    (["--set", "clip_norm=-1"], "clip_norm"),
    (["--set", "weight_decay=-0.5"], "weight_decay"),
    (["--set", "max_query_length=0"], "max_query_length=0"),
    (["--steps", "1000000000000"], "steps=1,000,000,000,000 is out of range"),
    (["--set", "steps=25e-1"], "steps='25e-1' is not a whole number"),
    (["--epochs", "1e300"], "epochs=1e+300 is out of range"),
])
def test_finetune_overwrite_with_a_bad_setting_keeps_the_old_run(extra, expected, paused, work, decoy, capsys):
    refused(work, decoy, [*FT, "--overwrite", *extra], expected, capsys)


def test_finetune_overwrite_with_examples_longer_than_the_position_table_keeps_the_old_run(paused, work, decoy,
                                                                                          capsys):
    """--max-seq-length 100 on a model of 64 positions, with an example of ~80 tokens: refused when
    the run is built (it was refused by the first step that met the example, after --overwrite had
    deleted the old model and checkpoints)."""
    with open(work / "sst" / "train.tsv", "a", encoding="utf-8") as f:
        f.write("the film was " + "good " * 80 + "\t1\n")
    refused(work, decoy, [*FT, "--overwrite", "--max-seq-length", "100"], "max_position_embeddings 64", capsys)


def test_pretraining_overwrite_with_a_bad_setting_keeps_the_old_run(run_copy, capsys):
    work = run_copy.parent
    for extra, expected in ((["--set", "clip_norm=0"], "clip_norm"), (["--set", "steps=1e30"], "out of range"),
                            (["--set", "dupe_factor=2.5"], "not a whole number"),
                            (["--max-steps-this-run", "0"], "--max-steps-this-run must be at least 1")):
        run_refused(work, ["train", "--out", "{w}/run", "--overwrite", *extra], expected, capsys)


@pytest.mark.parametrize("argv, expected", [
    (["train-xlnet", "--out", "{w}/x", "--set", "max_seq_length=4096"], "max_seq_length=4,096 is out of range"),
    (["train-xlnet", "--out", "{w}/x", "--steps", "100000000"], "steps=100,000,000 is out of range"),
    (["train-t5", "--out", "{w}/t5", "--set", "eval_interval=1e12"], "eval_interval=1,000,000,000,000"),
    (["train-t5", "--out", "{w}/t5", "--set", "batch_size=3.5"], "not a whole number"),
    ([*SQUAD, "--set", "max_query_length=-5"], "max_query_length=-5 is out of range"),
    ([*SQUAD, "--set", "doc_stride=0"], "doc_stride=0 is out of range"),
    (["ablate", "tasks", "--out", "{w}/ab", "--set", "steps=1e30"], "ablate sets these for every cell"),  # was dropped
    (["ablate", "tasks", "--out", "{w}/ab", "--set", "seed=3"], "ablate sets these for every cell (--seeds)"),
    (["ablate", "tasks", "--out", "{w}/ab", "--finetune-set", "batch_size=2.5"], "not a whole number"),
])
def test_out_of_range_and_fractional_integers_are_refused_by_every_training_command(argv, expected, work, capsys):
    run_refused(work, argv, expected, capsys)


def test_the_loop_refuses_its_numbers_when_a_run_makes_its_settings(tmp_path):
    """LoopSettings checks what the loop and its step use when a run makes them (in its
    constructor, before rundir.start_run clears an earlier run), whatever command made them."""
    good = dict(dir=tmp_path, vocab=[], resume_command="", total_steps=10, lr=1e-3, warmup_steps=1)
    LoopSettings(**good)
    for change, expected in (({"clip_norm": 0.0}, "clip_norm=0.0"), ({"lr": float("nan")}, "lr=nan"),
                             ({"total_steps": 0}, "total_steps=0"), ({"warmup_steps": -1}, "warmup_steps=-1"),
                             ({"schedule": "cosine?"}, "schedule="), ({"log_interval": 0}, "log_interval=0"),
                             ({"minutes": 0.0, "fit_steps": True}, "minutes=0.0"), ({"seed": -1}, "seed=-1")):
        with pytest.raises(ValueError, match=expected):
            LoopSettings(**{**good, **change})


# --- --resume: the saved settings; an option that would change them is refused by name -----------

def test_finetune_resume_refuses_options_that_would_change_the_run(paused, work, decoy, capsys):
    """The issue's case: rc 0 with all three dropped without a word."""
    argv = ["finetune", "--resume", "{w}/ft", "--epochs", "5", "--lr", "5", "--set", "weight_decay=0.5"]
    refused(work, decoy, argv, "--epochs, --lr, --set weight_decay=0.5 would change them", capsys)
    for extra, named in ((["--max-seq-length", "32"], "--max-seq-length"), (["--dropout", "0"], "--dropout"),
                         (["--set", "seed=3"], "--set seed=3"), (["--init", "none"], "--init"),
                         (["--steps", "9"], "--steps")):
        refused(work, decoy, ["finetune", "--resume", "{w}/ft", "--quiet", *extra], named, capsys)
    for minutes in ("nan", "-1"):  # named as the flag: the message named run.json, where the value was not
        refused(work, decoy, ["finetune", "--resume", "{w}/ft", "--minutes", minutes], f"--minutes {float(minutes)} must "
                "be a finite number", capsys)


def test_pretraining_resume_refuses_options_that_would_change_the_run(run_copy, capsys):
    work = run_copy.parent
    for extra, named in ((["--lr", "0.5"], "--lr"), (["--set", "log_interval=3"], "--set log_interval=3"),
                         (["--preset", "mini"], "--preset"), (["--batch-size", "4"], "--batch-size")):
        run_refused(work, ["train", "--resume", "{w}/run", *extra], named, capsys)


# --- predict --threshold: honoured where questions are answered, refused elsewhere ----------------

def test_threshold_is_honoured_by_a_squad_file(work, capsys):
    """The issue's case: --threshold 1e9 wrote the same predictions.json as --threshold=-1e9."""
    qa_model(work / "qa")
    answers = {}
    for t in ("1e9", "-1e9"):
        argv = ["predict", str(work / "qa"), "--file", str(work / "squad" / "dev-v2.0.json"), "--out",
                str(work / f"p{t}"), f"--threshold={t}"]
        assert main(argv) == 0, capsys.readouterr().err
        answers[t] = read_json(work / f"p{t}" / "predictions.json")
    assert answers["1e9"]["q1"] != ""  # any span beats a threshold that high
    assert answers["-1e9"]["q1"] == ""  # and none beats this one: no answer


@pytest.mark.parametrize("argv, expected", [
    (["predict", "{w}/cls", "--file", "{w}/texts.txt", "--format", "glue-single", "--threshold", "5"],
     "--threshold 5: a classifier's threshold is the positive label's probability, from 0 to 1"),
    (["predict", "{w}/cls", "--file", "{w}/texts.txt", "--out", "{w}/p.tsv", "--format", "glue-single",
      "--threshold", "5"],
     "--threshold 5: a classifier's threshold is the positive label's probability, from 0 to 1"),
    (["predict", "{w}/cls", "good film", "--threshold", "5"], "a classifier's threshold is the positive label's"),
    (["predict", "{w}/cls", "good film", "--threshold", "0.5", "--positive", "spam"],
     "--positive spam is not a label of"),
    (["predict", "{w}/cls", "good film", "--positive", "LABEL_1"], "--positive goes with --threshold"),
    (["predict", "{w}/tag", "the film", "--threshold", "0"], "--threshold is for SQuAD 2.0"),
    (["predict", "{w}/cls", "good film", "--threshold", "nan"], "--threshold nan must be a finite number"),
    (["predict", "{w}/qa", "--question", "who", "--context", "john visited paris", "--threshold", "nan"],
     "--threshold nan must be a finite number"),
    (["predict", "{w}/qa", "--file", "{w}/squad/dev-v2.0.json", "--out", "{w}/p", "--threshold", "inf"],
     "--threshold inf must be a finite number"),
])
def test_threshold_is_refused_where_it_has_no_meaning_in_the_same_words(argv, expected, work, capsys):
    qa_model(work / "qa")
    (work / "texts.txt").write_text("good film\nthe plot was dull\n", encoding="utf-8")
    run_refused(work, argv, expected, capsys)


# --- the "unclear" cases, decided (docs/safety.md) ---------------------------------------

@pytest.mark.parametrize("argv, expected", [
    (["train", "--out", "{w}/r", "--set", "preset=mini"], "preset is chosen by --preset NAME"),  # trained tiny's sizes
    (["train-tiny", "--set", "preset=mini"], "preset is chosen by --preset NAME"),  # TypeError: make_config() ...
    (["ablate", "tasks", "--out", "{w}/ab", "--set", "preset=mini"], "each variant of the study has its preset"),
])
def test_set_preset_is_refused_naming_the_option(argv, expected, work, capsys, monkeypatch):
    """ablate has no --preset: its variants choose the preset, and the refusal says so."""
    monkeypatch.chdir(work)
    run_refused(work, argv, expected, capsys)


@pytest.mark.parametrize("seeds", ["0", "101"])
def test_ablate_seeds_are_bounded(seeds, work, capsys, monkeypatch):
    monkeypatch.chdir(work)
    run_refused(work, ["ablate", "tasks", "--out", "{w}/ab", "--seeds", seeds], f"--seeds {seeds} must be 1 to 100",
                capsys)


@pytest.mark.parametrize("name", ["", ".", "..", "../x", "a/b", " "])
def test_a_run_name_is_a_plain_folder_name(name, work, capsys, monkeypatch):
    """runs/<name> of '' or '.' is runs/ itself, of '../x' a folder beside it: refused by name."""
    monkeypatch.chdir(work)
    run_refused(work, ["train", "--name", name, "--steps", "2"], f"--name {name!r} must be a plain folder name",
                capsys)


def test_xlnet_takes_weight_decay_0_and_t5_micro_its_own_default_length():
    assert XLNetTrainConfig.build({}, {"weight_decay": 0.0}).weight_decay == 0.0  # exact: the value given
    micro = T5TrainConfig.build(command_defaults({"preset": "t5-micro"}, False), {"preset": "t5-micro"})
    assert micro.max_seq_length == 63  # its 64 positions hold a chunk and its EOS
    assert T5TrainConfig.build(command_defaults({}, False), {}).max_seq_length == 64  # t5-tiny's, as before


def test_a_multi_label_model_is_refused_not_answered_with_a_softmax(work, capsys):
    edit_json(work / "cls" / "config.json", problem_type="multi_label_classification")
    for argv in (["predict", "{w}/cls", "good film"],
                 ["predict", "{w}/cls", "--file", "{w}/sst/dev.tsv", "--format", "glue-single"],
                 [*FT, "--init", "{w}/cls"]):
        run_refused(work, argv, "not multi-label classification", capsys)
