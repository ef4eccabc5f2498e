"""Every command's parser, built one way: `python -m minibert COMMAND`, its description, and for a
command that trains, the settings every run shares as options, with one help text each.

    p = command_parser("fill-mask", "Top-k predictions for each [MASK] in a sentence.")
    p = command_parser("train-xlnet", "Pretrain xlnet-tiny ...", settings=XLNetTrainConfig)   # a training command
    p.setting("--batch-size", type=int)                     # a command's own option for one of its settings
    args = p.parse_args(argv)
    cfg = build_settings(args, p, preset)   # defaults <- preset <- the options given <- --set; validate()

A training command (`settings=` its settings class, a loop/settings.py `RunSettings`) takes
`--set KEY=VALUE` (any field of the class, repeatable) and an option for each setting of SHARED
that the class uses (all but its `unused`): --lr, --warmup-steps, --steps, --minutes,
--log-interval, --eval-interval, --checkpoint-interval, --seed. A command's own options for its
settings are declared with `p.setting` (the option's name is the setting's: --max-seq-length is
max_seq_length). They default to None, so that what a person gave is known; `given_settings`
reads them (and --set, which wins) into a dict, `build_settings` builds and validates the class
from it (the class's `build`): the one way every command makes its settings.

A synonym of a setting's option is refused with a message naming the option (RETIRED_OPTIONS):
argparse's prefix matching would otherwise read --warmup as --warmup-steps on `train` and as
--warmup-proportion on `finetune`, one name with two meanings. `fast=` gives a command `--fast` (a slice of the data, a few steps: a check of the
plumbing); MINIBERT_FAST=1 in the environment is read as --fast with a line saying so
(docs/settings.md).

This module sits in io/, below everything that runs (it imports nothing of minibert): the
settings class comes in as an argument.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Any, Callable

# settings_renames: skip-file (RETIRED_OPTIONS names the synonyms)
PROG = "python -m minibert"

# the settings every training command shares -> (its options, type, help); loop/settings.py's
# RunSettings defines them; one spelling each (RETIRED_OPTIONS refuses the synonyms).
SHARED: dict[str, tuple[tuple[str, ...], type, str]] = {
    "lr": (("--lr",), float, "peak learning rate"),
    "warmup_steps": (("--warmup-steps",), int, "optimizer steps of linear warmup"),
    "steps": (("--steps",), int, "the run's length in optimizer steps, its schedule's length (0: fitted to the "
                                 "time budget, or to the epochs when fine-tuning)"),
    "minutes": (("--minutes",), float, "wall-clock budget of the run (0: none); with steps 0 the steps are fitted "
                                       "to it, else the run stops early when it is spent"),
    "log_interval": (("--log-interval",), int, "steps between two progress lines"),
    "eval_interval": (("--eval-interval",), int, "steps between two evaluations"),
    "checkpoint_interval": (("--checkpoint-interval",), int,
                            "steps between two checkpoints (0: at the end and at Ctrl-C only)"),
    "seed": (("--seed",), int, "the run's random seed"),
}

# a synonym of an option -> what to give instead (refused, with this message, by every command)
RETIRED_OPTIONS: dict[str, str] = {
    "--warmup": "--warmup-steps N (optimizer steps) or, on finetune, --warmup-proportion F (a fraction of the steps)",
    "--log-every": "--log-interval", "--eval-every": "--eval-interval", "--save-every": "--checkpoint-interval",
    "--seq-len": "--max-seq-length", "--chunk-len": "--max-seq-length", "--max-input": "--max-seq-length",
    "--task": "--mode (train-t5: span-corruption or sst2; \"task\" names the fine-tuning data sets only)",
}
FAST_VARIABLE = "MINIBERT_FAST"  # read as --fast, with a line saying so (docs/settings.md)


class CommandParser(argparse.ArgumentParser):
    """argparse's parser, made by `command_parser` (tests/meta/test_parsers.py checks every command's is one).
    `settings`: the training command's settings class, or None."""

    settings: type | None = None
    shared: tuple[str, ...] = ()
    own: dict[str, Callable[[Any], dict]]  # a command's own setting options: dest -> its value as settings
    fast_noted = False

    def setting(self, *flags: str, key: str | None = None, to: Callable[[Any], dict] | None = None, **kwargs):
        """An option for one of the command's settings (default None: given or not). Its setting is
        `key` (default: the option's name, --batch-size -> batch_size); `to` maps one value to
        several settings (--dropout: both of BertConfig's dropouts)."""
        action = self.add_argument(*flags, default=None, **kwargs)
        name = key or action.dest
        if to is None and self.settings is not None and name not in self.settings.settable_fields():
            raise ValueError(f"{flags[0]}: {self.settings.__name__} has no setting {name!r}")
        self.own[action.dest] = to or (lambda value: {name: value})
        return action

    def parse_known_args(self, args=None, namespace=None):
        given = sys.argv[1:] if args is None else list(args)
        options = {o for action in self._actions for o in action.option_strings}
        for arg in given:
            old = arg.split("=", 1)[0]
            if old in RETIRED_OPTIONS and old not in options:
                self.error(f"{old} is not an option (one name, one meaning); use {RETIRED_OPTIONS[old]}")
        parsed, rest = super().parse_known_args(args, namespace)
        if "--fast" in options and not parsed.fast and os.environ.get(FAST_VARIABLE, "") not in ("", "0"):
            if not self.fast_noted:  # once (options_given parses the defaults again)
                print(f"note: {FAST_VARIABLE}=1 is read as --fast; give --fast instead", file=sys.stderr)
                self.fast_noted = True
            parsed.fast = True
        return parsed, rest


def command_parser(command: str, description: str, settings: type | None = None, shared: tuple[str, ...] | None = None,
           helps: dict[str, str] | None = None, set_help: str | None = None, fast: str | None = None,
           **kwargs) -> CommandParser:
    """The parser of `python -m minibert COMMAND`. `description`: a docstring or a line (its first
    paragraph is shown). A training command gives its `settings` class: --set and the shared
    options it uses come with it (`shared`: only these; `helps`: a command's own help text for
    one, e.g. its default). `fast`: the help of the command's --fast."""
    p = CommandParser(prog=f"{PROG} {command}", description=description.strip().split("\n\n")[0], **kwargs)
    p.own = {}
    if fast is not None:
        p.add_argument("--fast", action="store_true", help=fast)
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
    """The command's own setting options and the shared ones given on the command line, then
    --set (parsed and typed by the parser's settings class, and winning over the options)
    -> {setting: value}."""
    out: dict[str, Any] = {}
    for dest, to in p.own.items():
        if getattr(args, dest) is not None:
            out.update(to(getattr(args, dest)))
    out.update({k: getattr(args, k) for k in p.shared if getattr(args, k) is not None})
    out.update(p.settings.parse_set(args.set))
    return out


def build_settings(args: argparse.Namespace, p: CommandParser, base: dict[str, Any] | None = None,
                   validate: bool = True):
    """The run's settings, the one way: the class's defaults <- `base` (a preset, a recipe) <-
    what the command line gave (`given_settings`); validated before anything is written."""
    return p.settings.build(base, given_settings(args, p), validate=validate)


# --- the run options every training command has, and the one rule of --resume -------------------

def run_options(p: CommandParser, pause: bool = True, overwrite: str = "replace the run in the output directory "
                "(the new run is built beside it and takes its place once it has saved its first checkpoint)") -> None:
    """--resume RUN_DIR, --overwrite and (`pause`) --max-steps-this-run: one form on every command."""
    p.add_argument("--resume", metavar="RUN_DIR", help="continue the run saved in RUN_DIR with its saved settings "
                                                       "(--minutes may change the budget)")
    p.add_argument("--overwrite", action="store_true", help=overwrite)
    if pause:
        p.add_argument("--max-steps-this-run", type=int, help="pause (and save) after this many steps; --resume "
                                                              "continues")


# What a --resume may be given, for every command: the wall-clock budget and a pause, which change
# when the run stops but not what it computes. Any other option (or --set) would change the run's
# settings, so it is refused by name.
RESUME_OPTIONS = ("resume", "minutes", "max_steps_this_run")
RESUME_SETTINGS = ("minutes",)


def options_given(parser: argparse.ArgumentParser, args: argparse.Namespace, allowed=RESUME_OPTIONS) -> list[str]:
    """The options of an argparse Namespace that differ from the parser's defaults, as --names,
    leaving out `allowed`."""
    defaults = vars(parser.parse_args([]))
    return ["--" + k.replace("_", "-") for k, v in sorted(vars(args).items()) if k not in allowed and v != defaults[k]]


def resume_changes(parser: CommandParser, args: argparse.Namespace, keep: tuple[str, ...] = ()) -> dict:
    """The one rule of --resume RUN_DIR, for every command: the run continues with the settings
    its run.json saved; an option that would change them, or a --set of anything but the budget,
    is refused, naming it. `keep`: a command's options that change nothing the run computes (what
    it prints). -> the settings the resume changes ({"minutes": M} when given, by --minutes or
    --set minutes=M)."""
    given = options_given(parser, args, (*RESUME_OPTIONS, *keep, "set"))
    changes: dict = {}
    for item in getattr(args, "set", None) or []:
        key = item.partition("=")[0].strip().replace("-", "_")
        if key in RESUME_SETTINGS and getattr(parser, "settings", None) is not None:
            changes.update(parser.settings.parse_set([item]))
        else:
            given.append(f"--set {item}")
    if given:
        flags = {a.dest: a.option_strings[0] for a in parser._actions if a.option_strings}
        may = [flags[k] for k in (*RESUME_OPTIONS, *keep) if k in flags and k != "resume"]
        listed = f"{', '.join(may[:-1])} and {may[-1]}" if len(may) > 1 else "".join(may)
        raise ValueError(f"--resume continues {args.resume} with its saved settings, and {', '.join(given)} would "
                         f"change them; only {listed} may be given (to change a setting, start a new run "
                         f"with another --out, or this one again with --overwrite)")
    if getattr(args, "minutes", None) is not None and "minutes" not in changes:
        if not (math.isfinite(args.minutes) and args.minutes >= 0):  # named as the flag, not as run.json's
            raise ValueError(f"--minutes {args.minutes} must be a finite number of minutes, 0 or more")
        changes["minutes"] = args.minutes
    return changes
