"""Every command's parser comes from minibert/io/cli.py's `command_parser`: the same prog, and for
every command that trains, --set and the shared options, defined once."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from minibert.__main__ import COMMANDS, main
from minibert.io.cli import RETIRED_OPTIONS, SHARED, CommandParser, build_settings, command_parser, given_settings
from minibert.loop.settings import RETIRED_NAMES

# settings_renames: skip-file (the older option spellings, on purpose)
PACKAGE = Path(__file__).resolve().parents[2] / "minibert"
RUNNERS = ("test", "test-all", "test-interop")  # pytest: they pass their arguments on
TRAINING = {"train", "train-tiny", "train-t5", "train-xlnet", "finetune", "ablate"}


class Parsed(Exception):
    """Raised by the patched parse_args: the command built its parser and asked it to parse."""


def parser_of(command: str, monkeypatch) -> argparse.ArgumentParser:
    """The parser `python -m minibert COMMAND` parses its arguments with (caught at parse_args)."""
    seen = []

    def parse_args(self, args=None, namespace=None):
        seen.append(self)
        raise Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_args)
    with pytest.raises(Parsed):
        main([command])
    return seen[0]


@pytest.mark.parametrize("command", [c for c in COMMANDS if c not in RUNNERS])
def test_every_commands_parser_comes_from_the_builder(command, monkeypatch):
    p = parser_of(command, monkeypatch)
    assert isinstance(p, CommandParser) and p.prog == f"python -m minibert {command}"
    assert p.description and "\n\n" not in p.description
    if command in TRAINING:  # --set, and every shared setting the command uses, one option each
        options = {o for action in p._actions for o in action.option_strings}
        assert p.settings is not None and "--set" in options and "--minutes" in options and "--steps" in options
        for key in p.shared:
            assert set(SHARED[key][0]) <= options, (command, key)
    else:
        assert p.settings is None


def test_the_commands_that_train_are_the_ones_with_settings(monkeypatch):
    with_settings = {c for c in COMMANDS if c not in RUNNERS and parser_of(c, monkeypatch).settings is not None}
    assert with_settings == TRAINING


def test_no_module_builds_a_parser_of_its_own():
    found = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
             if "ArgumentParser(" in p.read_text(encoding="utf-8") and p.name != "cli.py"]
    assert not found


def test_the_shared_options_and_set_read_into_the_settings():
    from minibert.train.xlnet_command import XLNetTrainConfig

    p = command_parser("train-xlnet", "Pretrain.", settings=XLNetTrainConfig)
    args = p.parse_args(["--lr", "5e-4", "--warmup-steps", "7", "--log-interval", "3", "--set", "batch_size=4"])
    assert given_settings(args, p) == {"lr": 5e-4, "warmup_steps": 7, "log_interval": 3, "batch_size": 4}
    args = p.parse_args(["--steps", "6", "--set", "steps=9"])  # --set wins over an option
    cfg = build_settings(args, p, {"steps": 2, "seed": 4})
    assert (cfg.steps, cfg.seed) == (9, 4)
    with pytest.raises(ValueError, match="max_seq_length=1"):  # validated before anything is written
        build_settings(p.parse_args(["--set", "max_seq_length=1"]), p)
    with pytest.raises(ValueError, match="unknown setting 'nope'"):
        given_settings(p.parse_args(["--set", "nope=1"]), p)


def test_a_setting_the_command_does_not_use_gets_no_option():
    from minibert.finetune.run import FinetuneConfig

    p = command_parser("finetune", "Fine-tune.", settings=FinetuneConfig)
    options = {o for action in p._actions for o in action.option_strings}
    assert "--eval-interval" not in options and "--warmup-steps" not in options and "--lr" in options
    with pytest.raises(ValueError, match="warmup_steps=3: fine-tuning counts in epochs"):
        build_settings(p.parse_args(["--set", "warmup_steps=3"]), p, dict(task="sst2", init="none", out="o"))


@pytest.mark.parametrize("command, old, new", [
    ("train", "--warmup", "--warmup-steps"), ("finetune", "--warmup", "--warmup-proportion"),
    ("train-t5", "--warmup=5", "--warmup-steps"), ("train-t5", "--chunk-len", "--max-seq-length"),
    ("train", "--seq-len", "--max-seq-length"), ("train-xlnet", "--log-every", "--log-interval"),
    ("train-t5", "--eval-every", "--eval-interval"), ("train-t5", "--save-every", "--checkpoint-interval")])
def test_an_older_option_spelling_is_refused_naming_todays(command, old, new, capsys):
    """--warmup meant steps on train and a fraction on finetune: neither now, and argparse's
    prefix matching must not read it as --warmup-steps or --warmup-proportion."""
    with pytest.raises(SystemExit) as e:
        main([command, old, "5"] if "=" not in old else [command, old])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"{old.split('=')[0]} is not an option (one name, one meaning); use " in err and new in err


def test_a_commands_own_setting_options_read_into_its_settings_by_name():
    from minibert.finetune.run import FinetuneConfig
    from minibert.train.config import TrainConfig

    p = command_parser("finetune", "Fine-tune.", settings=FinetuneConfig)
    p.setting("--max-seq-length", type=int)
    p.setting("--dropout", type=float, to=lambda v: {"hidden_dropout_prob": v, "attention_probs_dropout_prob": v})
    args = p.parse_args(["--max-seq-length", "64", "--dropout", "0.2", "--lr", "1e-4", "--set", "max_seq_length=32"])
    assert given_settings(args, p) == {"max_seq_length": 32, "hidden_dropout_prob": 0.2,  # --set wins
                                       "attention_probs_dropout_prob": 0.2, "lr": 1e-4}
    with pytest.raises(ValueError, match="TrainConfig has no setting 'seq_len'"):
        command_parser("train", "Train.", settings=TrainConfig).setting("--seq-len", type=int)


def test_minibert_fast_is_read_as_fast_with_a_line_saying_so(monkeypatch, capsys):
    from minibert.train.xlnet_command import XLNetTrainConfig

    p = command_parser("train-xlnet", "Pretrain.", settings=XLNetTrainConfig, fast="a slice")
    assert p.parse_args([]).fast is False and p.parse_args(["--fast"]).fast is True
    monkeypatch.setenv("MINIBERT_FAST", "1")
    assert p.parse_args([]).fast is True and p.parse_args([]).fast is True
    assert capsys.readouterr().err.count("MINIBERT_FAST=1 is read as --fast") == 1  # once a process


@pytest.mark.parametrize("command", sorted(TRAINING))
def test_no_command_has_an_option_of_a_retired_name(command, monkeypatch):
    options = {o for action in parser_of(command, monkeypatch)._actions for o in action.option_strings}
    # --dropout sets both of BertConfig's dropouts; --fast is a mode (a recipe of slices), no setting
    retired = {"--" + name.replace("_", "-") for name in RETIRED_NAMES} - {"--dropout", "--fast"}

    assert not options & (retired | set(RETIRED_OPTIONS)), sorted(options & (retired | set(RETIRED_OPTIONS)))
