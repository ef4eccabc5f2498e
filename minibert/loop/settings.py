"""A run's settings, one way for every command: a dataclass whose fields are the settings.

    @dataclasses.dataclass
    class XLNetTrainConfig(Settings):
        lr: float = 1e-3
        ...

    cfg = XLNetTrainConfig.from_dict(saved)            # run.json's settings: unknown keys and wrong
                                                       # types are refused, naming the key
    cfg = XLNetTrainConfig.build(PRESET, {"lr": 5e-4})  # the one way a command builds them: defaults
                                                       # <- preset/recipe <- options <- --set; validated
    run_dir.write_run(out, "train-xlnet", cfg.to_dict())

Every training command's settings derive from `RunSettings`, which holds the names they share,
each with one meaning (lr, warmup_steps, steps, minutes, log_interval, eval_interval,
checkpoint_interval, seed); a command's own fields stand beside them, and a command that has no
use for one lists it in `unused`. Beyond those, a concept that several commands have has one
name (VOCABULARY; tests/loop/test_settings.py checks that no settings class has a name of
RETIRED_NAMES): the output directory `out`, the sequence length `max_seq_length`, the slice of
the training data `max_train_examples`, held-out examples per evaluation `eval_examples`,
dropout by BertConfig's names `hidden_dropout_prob` and `attention_probs_dropout_prob`, and
warmup `warmup_steps` (optimizer steps) or `warmup_proportion` (a fraction of the run's steps),
never one name for both.

A name outside the class is refused (from_dict, --set), whatever it meant elsewhere: each setting
has one name and one meaning. `build` is the one way a command makes its settings.

The type of a field is read from its annotation: int, float, bool, str, tuple (of str, or of
float when the default holds floats), or any of them `| None`. A field whose type is another
dataclass (TrainConfig's BertConfig) is handled by the class that has it.
"""
from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, ClassVar

from minibert.io.textio import shown_value

# settings_renames: skip-file (VOCABULARY names the synonyms no class may use)
_SIMPLE = {"int": int, "float": float, "bool": bool, "str": str, "tuple": tuple, "list": tuple}


def field_type(field: dataclasses.Field) -> tuple[type | None, bool]:
    """(the simple type of a field, whether None is allowed); (None, False) for anything else."""
    if isinstance(field.type, type):  # a module without `from __future__ import annotations`
        return {int: int, float: float, bool: bool, str: str, tuple: tuple, list: tuple}.get(field.type), False
    parts = [p.strip() for p in str(field.type).split("|")]
    optional = "None" in parts
    kinds = [_SIMPLE.get(p) for p in parts if p != "None"]
    return (kinds[0] if len(kinds) == 1 else None), optional


def holds_numbers(field: dataclasses.Field) -> bool:
    """Whether a tuple setting is a list of numbers (its default's are: mask_shares) rather than
    of strings (files): what check_value accepts and parse_value reads for it."""
    default = field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default
    return bool(default) and isinstance(default[0], (int, float)) and not isinstance(default[0], bool)


def check_value(key: str, value: Any, field: dataclasses.Field, where: str = "") -> Any:
    """`value` as the field's type, or a ValueError naming the key and what it should be. An int
    is accepted for a float (JSON writes 3.0 as 3.0 but a person writes 3); nothing else is
    converted: "8" is not a number and 1 is not a bool."""
    kind, optional = field_type(field)
    at = f"{where}: " if where else ""
    if value is None and optional:
        return None
    if kind is None:
        return value
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is tuple and isinstance(value, (list, tuple)):  # of strings (files), or of numbers as its default
        numbers = holds_numbers(field)
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) if numbers else isinstance(x, str)
                   for x in value):
            raise ValueError(f"{at}{key} is {shown_value(value)}; it must be a list of "
                             f"{'numbers' if numbers else 'strings'}")
        return tuple(value)
    if kind is bool and not isinstance(value, bool) or kind is int and (isinstance(value, bool) or
                                                                        not isinstance(value, int)) \
            or not isinstance(value, kind):
        name = {int: "an integer", float: "a number", bool: "true or false", str: "a string", tuple: "a list"}[kind]
        raise ValueError(f"{at}{key} is {shown_value(value)} ({type(value).__name__}); it must be {name}"
                         f"{' or null' if optional else ''}")
    if kind is float and not math.isfinite(value):
        raise ValueError(f"{at}{key}={value} must be a finite number")
    return value


def names_shown(names: list) -> str:
    """A list of names an error echoes (unknown settings, keys): the first ten, each at most 60
    characters (a run.json's key may be 30 MB long)."""
    more = f", ... ({len(names)} in all)" if len(names) > 10 else ""
    return f"[{', '.join(shown_value(k, 60) for k in names[:10])}{more}]"


def parse_value(key: str, raw: str, field: dataclasses.Field) -> Any:
    """A --set value (text) as the field's type: "1e-3" -> 0.001, "yes" -> True, "a,b" -> ("a", "b"),
    "none" -> None where None is allowed."""
    kind, optional = field_type(field)
    try:
        if optional and raw.lower() in ("none", "null"):
            return None
        if kind is bool:
            if raw.lower() not in ("1", "0", "true", "false", "yes", "no"):
                raise ValueError
            return raw.lower() in ("1", "true", "yes")
        if kind is int:
            return parse_int(key, raw)  # its own words for a number that is not whole
        if kind is float:
            value = read_float(raw)
            if not math.isfinite(value):
                raise ValueError
            return value
        if kind is tuple:
            parts = tuple(p for p in raw.split(",") if p)
            return tuple(read_float(p) for p in parts) if holds_numbers(field) else parts
        return raw
    except ValueError as e:
        if isinstance(e, NotWhole):
            raise
        name = "finite number" if kind is float else kind.__name__ if kind else "value"
        raise ValueError(f"{key}={shown_value(raw)} is not a valid {name}") from None


_NUMBER = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*|\s*[+-]?(inf|infinity|nan)\s*", re.I | re.A)


def read_float(raw: str) -> float:
    """A number as a person writes it: float(), less what float() takes that nobody means: "1_0"
    (read as 10) and digits of other scripts ("١"); ValueError otherwise."""
    if not _NUMBER.fullmatch(raw):
        raise ValueError(f"not a number: {raw!r}")
    return float(raw)


class NotWhole(ValueError):
    """An integer setting given a number with a fraction (parse_int)."""


def parse_int(key: str, raw: str) -> int:
    """An integer setting's text: "25" or "1e3" (a whole number written as a float); "25e-1" (2.5)
    and "1.5" are refused, never rounded: however a fraction is written, it is the same refusal."""
    if "_" in raw or not raw.isascii():  # int() reads "1_000" as 1000, and other scripts' digits
        raise ValueError(f"not a number: {raw!r}")
    try:
        return int(raw)
    except ValueError:
        pass
    value = read_float(raw)  # ValueError: not a number at all (the caller names the key)
    if not math.isfinite(value) or not value.is_integer():
        raise NotWhole(f"{key}={raw!r} is not a whole number; an integer setting is never rounded")
    return int(value)


# The range of every integer setting (and of the float counts, epochs and minutes), by name,
# checked wherever settings are made (`Settings.from_dict`: build, --set, a run.json on --resume):
# name -> (lowest, highest, why the highest). A class's `validate` may narrow a range (steps >= 1
# for a run that is not fitted to a budget); these are the outer bounds, so that no value runs
# for days or asks for a table nothing can hold. The model's sizes (hidden_size, num_hidden_layers,
# ...) are the model config's own, checked against model.SIZE_LIMITS when it is made (validate
# makes it). tests/loop/test_settings.py checks that every integer field of every settings class
# has one or the other.
MAX_STEPS = 10_000_000  # at the tiny model's ~3 steps a second on 2 cores, over a month; BERT-base took 1,000,000
MAX_POSITIONS = 65536  # model.SIZE_LIMITS' max_position_embeddings: the largest position table minibert builds
RANGES: dict[str, tuple[float, float, str]] = {
    "steps": (0, MAX_STEPS, "weeks of compute even for the tiny model; BERT-base took 1,000,000"),
    "warmup_steps": (0, MAX_STEPS, "the longest run's steps"),
    "log_interval": (0, MAX_STEPS, "the longest run's steps"),
    "eval_interval": (0, MAX_STEPS, "the longest run's steps"),
    "checkpoint_interval": (0, MAX_STEPS, "the longest run's steps"),
    "eval_per_epoch": (1, 10_000, "ten thousand evaluations an epoch"),
    "seed": (0, 2**32 - 1, "a 32-bit seed"),
    "data_seed": (0, 2**32 - 1, "a 32-bit seed"),
    "max_seq_length": (1, MAX_POSITIONS, "the largest position table minibert builds"),
    "short_seq_length": (0, MAX_POSITIONS, "the largest position table minibert builds"),
    "max_predictions_per_seq": (0, MAX_POSITIONS, "a sequence's tokens"),
    "max_query_length": (1, MAX_POSITIONS, "a sequence's tokens (and at least 1: 0 would empty every question)"),
    "doc_stride": (1, MAX_POSITIONS, "a sequence's tokens"),
    "batch_size": (1, 65536, "sequences in one micro-batch"),
    "accumulation_steps": (1, 65536, "micro-batches in one step"),
    "dupe_factor": (1, 1000, "a hundred times BERT's 10 passes of the generator"),
    "heldout_dupe_factor": (1, 1000, "a hundred times BERT's 10 passes of the generator"),
    "max_train_examples": (0, 10**9, "a billion examples"),
    "eval_examples": (0, 10**9, "a billion examples"),
    "pred_k": (1, MAX_POSITIONS, "a sequence's tokens"),
    "embedding_size": (1, 16384, "model.SIZE_LIMITS' hidden_size"),
    "epochs": (0, 10_000, "ten thousand passes over the training data"),
    "minutes": (0, 525_600, "a year"),
    "patience": (0, 1_000_000, "a million evaluations in a row without a better dev score"),
}


def check_range(key: str, value: Any, ranges: dict, where: str = "") -> None:
    """A ValueError naming the setting, its range and why, if `value` is outside `ranges[key]`."""
    if key not in ranges or value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    lo, hi, why = ranges[key]
    if not lo <= value <= hi:
        at = f"{where}: " if where else ""
        shown = f"{value:,}" if isinstance(value, int) and abs(value) < 10**15 else f"{value:.6g}"
        raise ValueError(f"{at}{key}={shown} is out of range: it must be in [{lo:,}, {hi:,}] "
                         f"({hi:,}: {why})")


# one name per concept: the name every settings class uses -> synonyms that no settings class may
# use beside it (tests/loop/test_settings.py: no settings class has a field named by one of these)
VOCABULARY: dict[str, tuple[str, ...]] = {
    "out": ("out_dir", "output_dir"),
    "max_seq_length": ("seq_len", "chunk_len", "max_input", "max_length"),
    "max_train_examples": ("max_train_lines", "fast"),
    "eval_examples": ("eval_sequences",),
    "hidden_dropout_prob": ("dropout",),
    "warmup_steps": ("warmup",),
    "log_interval": ("log_every",),
    "eval_interval": ("eval_every",),
    "checkpoint_interval": ("save_every",),
}
RETIRED_NAMES = frozenset(old for olds in VOCABULARY.values() for old in olds)


@dataclasses.dataclass
class Settings:
    """The base of every run's settings (see the module docstring)."""

    ranges: ClassVar[dict[str, tuple[float, float, str]]] = RANGES  # each integer setting's (lowest, highest, why)
    # a setting an option chooses before the others are read (train's preset: the sizes the options
    # then change) -> that option; --set refuses it, naming the option
    chosen_by: ClassVar[dict[str, str]] = {}
    unused: ClassVar[tuple[str, ...]] = ()  # shared names this command has no use for (no option; validate refuses them)

    @classmethod
    def from_run(cls, info, where: str = "", **changes):
        """The settings a run saved (a loop/rundir.RunInfo); `changes` (what a resume may change)
        over them."""
        return cls.from_dict({**info.settings, **changes}, where)

    @classmethod
    def fields(cls) -> dict[str, dataclasses.Field]:
        return {f.name: f for f in dataclasses.fields(cls)}

    @classmethod
    def from_dict(cls, d: dict, where: str = ""):
        """The settings a run saved (or a caller gives): every key must be a field and every value of
        its type; missing keys take their defaults."""
        at = f"{where}: " if where else ""
        if not isinstance(d, dict):
            raise ValueError(f"{at}the settings must be a JSON object, not {type(d).__name__}")
        fields = cls.fields()
        unknown = sorted(set(d) - set(fields))
        if unknown:
            raise ValueError(f"{at}unknown settings {names_shown(unknown)}; known: {sorted(fields)}")
        missing = [k for k, f in fields.items() if k not in d and f.default is dataclasses.MISSING
                   and f.default_factory is dataclasses.MISSING]
        if missing:
            raise ValueError(f"{at}settings {missing} are missing")
        typed = {k: check_value(k, v, fields[k], where) for k, v in d.items()}
        for k, v in typed.items():
            check_range(k, v, cls.ranges, where)
        return cls(**typed)

    @classmethod
    def build(cls, base: dict | None = None, given: dict | None = None, where: str = "", validate: bool = True):
        """The one way a command makes its settings: the class's defaults <- `base` (a preset, a
        recipe) <- `given` (the command's options, then --set, as io/cli.given_settings reads
        them); validated before anything is written."""
        cfg = cls.from_dict({**(base or {}), **(given or {})}, where)
        if validate:
            cfg.validate()
        return cfg

    @classmethod
    def settable_fields(cls) -> dict[str, dataclasses.Field]:
        """The fields --set reaches, by name (a class with nested settings lists them flat)."""
        return cls.fields()

    @classmethod
    def parse_set(cls, items: list[str]) -> dict[str, Any]:
        """["lr=1e-3", "masking=static"] (--set KEY=VALUE, repeatable) -> typed values."""
        fields = cls.settable_fields()
        out: dict[str, Any] = {}
        for item in items:
            key, sep, raw = item.partition("=")
            key = key.strip().replace("-", "_")
            if not sep:
                raise ValueError(f"--set {shown_value(item)}: expected KEY=VALUE")
            if key in cls.chosen_by:
                raise ValueError(f"--set {item!r}: {key} is chosen by {cls.chosen_by[key]} (it sets the values the "
                                 f"other settings start from), not by --set")
            if key not in fields:
                raise ValueError(f"--set {shown_value(item)}: unknown setting {shown_value(key, 60)}; "
                                 f"known: {sorted(fields)}")
            out[key] = parse_value(key, raw, fields[key])
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (run.json's "settings")."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}

    def validate(self) -> None:
        """Ranges and combinations, checked before anything is written (each class its own)."""


@dataclasses.dataclass(kw_only=True)
class RunSettings(Settings):
    """The settings every training command shares, one name and one meaning each; a command's
    class lists its own defaults and its own fields beside these.

    `steps` is the run's length in optimizer steps, which is its schedule's length too (the
    warmup, then the decay that ends at that step). 0 derives it: a pretraining command fits it to
    `minutes` from the loop's measured speed (loop/budget.py), fine-tuning takes `epochs` passes
    over its training data. `minutes` > 0 is a wall-clock limit of the loop in either case: with
    steps > 0 a run that has not finished when it is spent stops there (evaluated and saved,
    status "budget")."""

    lr: float = 1e-3  # the peak learning rate
    warmup_steps: int = 0  # optimizer steps of linear warmup (fine-tuning: warmup_proportion of its steps)
    steps: int = 0  # the run's (and its schedule's) length in optimizer steps; 0: fitted to `minutes` (or the epochs)
    minutes: float = 0.0  # wall-clock limit of the run (0: none); what steps 0 is fitted to
    log_interval: int = 20  # steps between two progress lines (and metrics.jsonl records)
    eval_interval: int = 250  # steps between two evaluations (fine-tuning: eval_per_epoch)
    checkpoint_interval: int = 250  # steps between two checkpoints (0: at the end and at Ctrl-C only)
    seed: int = 0
