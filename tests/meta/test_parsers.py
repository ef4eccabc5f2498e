"""Every command's parser comes from minibert/io/cli.py's `command_parser`: the same prog, and for
every command that trains, --set and the shared options, defined once."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from minibert.__main__ import COMMANDS, main
from minibert.io.cli import SHARED, CommandParser, build_settings, command_parser, given_settings

PACKAGE = Path(__file__).resolve().parents[2] / "minibert"
RUNNERS = ("test", "test-all", "test-interop", "lessons")  # pytest and the lessons: they pass their arguments on
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
    args = p.parse_args(["--lr", "5e-4", "--warmup", "7", "--log-every", "3", "--set", "batch_size=4"])
    assert given_settings(args, p) == {"lr": 5e-4, "warmup_steps": 7, "log_interval": 3, "batch_size": 4}
    args = p.parse_args(["--steps", "6", "--set", "steps=9"])  # --set wins over an option
    cfg = build_settings(args, p, {"steps": 2, "seed": 4})
    assert (cfg.steps, cfg.seed) == (9, 4)
    with pytest.raises(ValueError, match="seq_len=1"):  # validated before anything is written
        build_settings(p.parse_args(["--set", "seq_len=1"]), p)
    with pytest.raises(ValueError, match="unknown setting 'nope'"):
        given_settings(p.parse_args(["--set", "nope=1"]), p)


def test_a_setting_the_command_does_not_use_gets_no_option():
    from minibert.finetune.run import FinetuneConfig

    p = command_parser("finetune", "Fine-tune.", settings=FinetuneConfig)
    options = {o for action in p._actions for o in action.option_strings}
    assert "--eval-interval" not in options and "--warmup-steps" not in options and "--lr" in options
    with pytest.raises(ValueError, match="warmup_steps=3: fine-tuning counts in epochs"):
        build_settings(p.parse_args(["--set", "warmup_steps=3"]), p, dict(task="sst2", init="none", out="o"))
