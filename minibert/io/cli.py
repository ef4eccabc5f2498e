"""Every command's parser, built one way: `python -m minibert COMMAND`, its description, and for a
command that trains, the settings every run shares as options, with one help text each.

    p = command_parser("fill-mask", "Top-k predictions for each [MASK] in a sentence.")
    p = command_parser("train-xlnet", "Pretrain xlnet-tiny ...", settings=XLNetTrainConfig)   # a training command
    args = p.parse_args(argv)
    cfg = build_settings(args, XLNetTrainConfig, preset)    # preset <- the options given <- --set; validate()

A training command (`settings=` its settings class, a loop/settings.py `RunSettings`) takes
`--set KEY=VALUE` (any field of the class, repeatable) and an option for each setting of SHARED
that the class uses (all but its `unused`): --lr, --warmup-steps, --steps, --minutes,
--log-interval, --eval-interval, --checkpoint-interval, --seed. They default to None, so that
what a person gave is known; `given_settings` reads them (and --set, which wins) into a dict,
`build_settings` builds and validates the class from it.

This module sits at the bottom of the package's root layer (it imports nothing of minibert):
the settings class comes in as an argument.
"""
from __future__ import annotations

import argparse
from typing import Any

PROG = "python -m minibert"

# the settings every training command shares -> (its options, type, help); loop/settings.py's
# RunSettings defines them. The aliases are the names older commands used (train-t5's --warmup,
# --eval-every, --log-every, --save-every): one option, several spellings.
SHARED: dict[str, tuple[tuple[str, ...], type, str]] = {
    "lr": (("--lr",), float, "peak learning rate"),
    "warmup_steps": (("--warmup-steps", "--warmup"), int, "optimizer steps of linear warmup"),
    "steps": (("--steps",), int, "the run's length in optimizer steps, its schedule's length (0: fitted to the "
                                 "time budget, or to the epochs when fine-tuning)"),
    "minutes": (("--minutes",), float, "wall-clock budget of the run (0: none); with steps 0 the steps are fitted "
                                       "to it, else the run stops early when it is spent"),
    "log_interval": (("--log-interval", "--log-every"), int, "steps between two progress lines"),
    "eval_interval": (("--eval-interval", "--eval-every"), int, "steps between two evaluations"),
    "checkpoint_interval": (("--checkpoint-interval", "--save-every"), int,
                            "steps between two checkpoints (0: at the end and at Ctrl-C only)"),
    "seed": (("--seed",), int, "the run's random seed"),
}


class CommandParser(argparse.ArgumentParser):
    """argparse's parser, made by `command_parser` (tests/meta/test_parsers.py checks every command's is one).
    `settings`: the training command's settings class, or None."""

    settings: type | None = None
    shared: tuple[str, ...] = ()


def command_parser(command: str, description: str, settings: type | None = None, shared: tuple[str, ...] | None = None,
           helps: dict[str, str] | None = None, set_help: str | None = None, **kwargs) -> CommandParser:
    """The parser of `python -m minibert COMMAND`. `description`: a docstring or a line (its first
    paragraph is shown). A training command gives its `settings` class: --set and the shared
    options it uses come with it (`shared`: only these; `helps`: a command's own help text for
    one, e.g. its default)."""
    p = CommandParser(prog=f"{PROG} {command}", description=description.strip().split("\n\n")[0], **kwargs)
    if settings is None:
        return p
    p.settings = settings
    used = [k for k in SHARED if k in settings.fields() and k not in getattr(settings, "unused", ())]
    p.shared = tuple(k for k in used if shared is None or k in shared)
    for key in p.shared:
        flags, kind, help_ = SHARED[key]
        p.add_argument(*flags, dest=key, type=kind, default=None, help=(helps or {}).get(key, help_))
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help=set_help or f"any setting of {settings.__name__} by its name, e.g. --set seed=1 (repeatable; "
                                    "wins over the options)")
    return p


def given_settings(args: argparse.Namespace, p: CommandParser) -> dict[str, Any]:
    """The shared options given on the command line, then --set (parsed and typed by the parser's
    settings class, and winning over the options) -> {setting: value}."""
    out = {k: getattr(args, k) for k in p.shared if getattr(args, k) is not None}
    out.update(p.settings.parse_set(args.set))
    return out


def build_settings(args: argparse.Namespace, p: CommandParser, base: dict[str, Any] | None = None):
    """The run's settings: `base` (a preset, a recipe), then what the command line gave
    (`given_settings`); validated before anything is written."""
    cfg = p.settings(**{**(base or {}), **given_settings(args, p)})
    cfg.validate()
    return cfg
