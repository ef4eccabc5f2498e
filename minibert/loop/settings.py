"""A run's settings, one way for every command: a dataclass whose fields are the settings.

    @dataclasses.dataclass
    class XLNetTrainConfig(Settings):
        lr: float = 1e-3
        ...

    cfg = XLNetTrainConfig.from_dict(saved)            # run.json's settings: unknown keys and wrong
                                                       # types are refused, naming the key
    cfg = XLNetTrainConfig(**XLNetTrainConfig.parse_set(["lr=5e-4"]))   # --set KEY=VALUE, typed
    cfg.validate()                                     # ranges; before anything is written
    run_dir.write_run(out, "train-xlnet", cfg.to_dict())

Every training command's settings derive from `RunSettings`, which holds the names they share,
each with one meaning (lr, warmup_steps, steps, minutes, log_interval, eval_interval,
checkpoint_interval, seed); a command's own fields stand beside them, and a command that has no
use for one says so in its docstring. A name a run.json of an older minibert used is read once,
here: `renamed` maps it to today's name (`from_dict`).

The type of a field is read from its annotation: int, float, bool, str, tuple (of str, or of
float when the default holds floats), or any of them `| None`. A field whose type is another
dataclass (TrainConfig's BertConfig) is handled by the class that has it.
"""
from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, ClassVar

_SIMPLE = {"int": int, "float": float, "bool": bool, "str": str, "tuple": tuple, "list": tuple}


def field_type(field: dataclasses.Field) -> tuple[type | None, bool]:
    """(the simple type of a field, whether None is allowed); (None, False) for anything else."""
    if isinstance(field.type, type):  # a module without `from __future__ import annotations`
        return {int: int, float: float, bool: bool, str: str, tuple: tuple, list: tuple}.get(field.type), False
    parts = [p.strip() for p in str(field.type).split("|")]
    optional = "None" in parts
    kinds = [_SIMPLE.get(p) for p in parts if p != "None"]
    return (kinds[0] if len(kinds) == 1 else None), optional


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
    if kind is tuple and isinstance(value, (list, tuple)):
        return tuple(value)
    if kind is bool and not isinstance(value, bool) or kind is int and (isinstance(value, bool) or
                                                                        not isinstance(value, int)) \
            or not isinstance(value, kind):
        name = {int: "an integer", float: "a number", bool: "true or false", str: "a string", tuple: "a list"}[kind]
        raise ValueError(f"{at}{key} is {value!r} ({type(value).__name__}); it must be {name}"
                         f"{' or null' if optional else ''}")
    if kind is float and not math.isfinite(value):
        raise ValueError(f"{at}{key}={value} must be a finite number")
    return value


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
            return int(float(raw)) if "e" in raw.lower() else int(raw)
        if kind is float:
            value = float(raw)
            if not math.isfinite(value):
                raise ValueError
            return value
        if kind is tuple:
            parts = tuple(p for p in raw.split(",") if p)
            default = field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default
            return tuple(float(p) for p in parts) if default and isinstance(default[0], float) else parts
        return raw
    except ValueError:
        name = "finite number" if kind is float else kind.__name__ if kind else "value"
        raise ValueError(f"{key}={raw!r} is not a valid {name}") from None


def fast_mode() -> bool:
    """MINIBERT_FAST=1 (any value but empty or 0): every command runs its stages on a slice of the
    data for a few steps, a check of the plumbing (the one place that reads the variable)."""
    return os.environ.get("MINIBERT_FAST", "") not in ("", "0")


@dataclasses.dataclass
class Settings:
    """The base of every run's settings (see the module docstring)."""

    renamed: ClassVar[dict[str, str]] = {}  # an older run.json's name -> today's (read by from_dict)
    unused: ClassVar[tuple[str, ...]] = ()  # shared names this command has no use for (no option; validate refuses them)

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
        d = {cls.renamed.get(k, k): v for k, v in d.items()}  # the one place old names are read
        fields = cls.fields()
        unknown = sorted(set(d) - set(fields))
        if unknown:
            raise ValueError(f"{at}unknown settings {unknown}; known: {sorted(fields)}")
        missing = [k for k, f in fields.items() if k not in d and f.default is dataclasses.MISSING
                   and f.default_factory is dataclasses.MISSING]
        if missing:
            raise ValueError(f"{at}settings {missing} are missing")
        return cls(**{k: check_value(k, v, fields[k], where) for k, v in d.items()})

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
                raise ValueError(f"--set {item!r}: expected KEY=VALUE")
            if key not in fields:
                raise ValueError(f"--set {item!r}: unknown setting {key!r}; known: {sorted(fields)}")
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
    class lists its own defaults and its own fields beside these."""

    lr: float = 1e-3  # the peak learning rate
    warmup_steps: int = 0  # optimizer steps of linear warmup (fine-tuning: warmup_proportion of its steps)
    steps: int = 0  # the schedule's length in optimizer steps (0: fitted to `minutes`; train: auto_steps; train-t5: a cap)
    minutes: float = 0.0  # wall-clock budget of the run (0: none)
    log_interval: int = 20  # steps between two progress lines (and metrics.jsonl records)
    eval_interval: int = 250  # steps between two evaluations (fine-tuning: eval_per_epoch)
    checkpoint_interval: int = 250  # steps between two checkpoints (0: at the end and at Ctrl-C only)
    seed: int = 0
