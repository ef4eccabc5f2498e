"""loop/settings.py: every command's settings are a dataclass; run.json's form is read back with
unknown keys and wrong types refused by name, and --set KEY=VALUE is typed by the field."""
from __future__ import annotations

import dataclasses

import pytest

from minibert.finetune.run import FinetuneConfig
from minibert.loop.settings import RANGES, RETIRED_NAMES, VOCABULARY, Settings, field_type
from minibert.model import SIZE_LIMITS
from minibert.train.config import TrainConfig, make_config
from minibert.train.t5_command import T5TrainConfig
from minibert.train.xlnet_command import XLNetTrainConfig

# settings_renames: skip-file (these tests name the synonyms on purpose)


@dataclasses.dataclass
class Demo(Settings):
    out: str
    lr: float = 1e-3
    steps: int = 10
    fast: bool = False
    data: str | None = None
    shares: tuple = (0.8, 0.1, 0.1)
    files: tuple = ()


def test_from_dict_round_trips_and_accepts_an_int_for_a_float():
    d = Demo("runs/x", lr=3, data="d").to_dict()
    assert d["shares"] == [0.8, 0.1, 0.1]  # exact: the values given, copied into a list (JSON's form)
    back = Demo.from_dict(d)
    assert back == Demo("runs/x", lr=3.0, data="d")  # exact: the values given, copied back and forth
    assert isinstance(back.lr, float) and back.shares == (0.8, 0.1, 0.1)  # exact: the defaults, copied


@pytest.mark.parametrize("bad, message", [
    ({"out": "o", "steps": "8"}, "steps is '8' \\(str\\); it must be an integer"),
    ({"out": "o", "steps": True}, "steps is True \\(bool\\); it must be an integer"),
    ({"out": "o", "lr": None}, "lr is None \\(NoneType\\); it must be a number"),
    ({"out": "o", "lr": float("nan")}, "lr=nan must be a finite number"),
    ({"out": "o", "fast": 1}, "fast is 1 \\(int\\); it must be true or false"),
    ({"out": "o", "data": 3}, "data is 3 \\(int\\); it must be a string or null"),
    ({"out": "o", "typo": 1}, "unknown settings \\['typo'\\]"),
    ({"lr": 1.0}, "settings \\['out'\\] are missing"),
    ([1], "the settings must be a JSON object, not list"),
])
def test_from_dict_names_the_file_and_the_setting(bad, message):
    with pytest.raises(ValueError, match=f"^runs/x/run.json: {message}"):
        Demo.from_dict(bad, "runs/x/run.json")


def test_parse_set_types_each_value_by_its_field():
    got = Demo.parse_set(["lr=5e-4", "steps=1e3", "fast=yes", "data=none", "shares=1,0,0", "files=a.txt,b.txt"])
    assert got == {"lr": 5e-4, "steps": 1000, "fast": True, "data": None, "shares": (1.0, 0.0, 0.0),
                   "files": ("a.txt", "b.txt")}
    for item, message in (("steps=x", "steps='x' is not a valid int"), ("lr=inf", "lr='inf' is not a valid finite"),
                          ("fast=maybe", "fast='maybe' is not a valid bool"), ("nope=1", "unknown setting 'nope'"),
                          ("lr", "expected KEY=VALUE")):
        with pytest.raises(ValueError, match=message):
            Demo.parse_set([item])


def test_every_training_command_shares_one_settings_base():
    """train/train-tiny, train-xlnet, train-t5 and finetune: one base, the shared names on it."""
    from minibert.finetune.run import FinetuneConfig
    from minibert.loop.settings import RunSettings
    from minibert.train.config import TrainConfig
    from minibert.train.t5_command import T5TrainConfig
    from minibert.train.xlnet_command import XLNetTrainConfig

    shared = {"lr", "warmup_steps", "steps", "minutes", "log_interval", "eval_interval", "checkpoint_interval", "seed"}
    assert {f.name for f in dataclasses.fields(RunSettings)} == shared
    for cls in (TrainConfig, XLNetTrainConfig, T5TrainConfig, FinetuneConfig):
        assert issubclass(cls, RunSettings) and shared <= set(cls.fields()), cls.__name__
        assert not {"warmup", "log_every", "eval_every", "save_every"} & set(cls.fields()), cls.__name__


def test_warmup_is_unknown_on_every_command_and_warmup_steps_is_refused_by_finetune():
    """`warmup` once meant a fraction on finetune and steps on train-t5: it means nothing now, and
    the error lists the setting each command has."""
    for cls, named in ((FinetuneConfig, "warmup_proportion"), (T5TrainConfig, "warmup_steps"),
                       (XLNetTrainConfig, "warmup_steps"), (TrainConfig, "warmup_steps")):
        with pytest.raises(ValueError, match=f"unknown setting 'warmup'.*{named}"):
            cls.parse_set(["warmup=0.1"])
    with pytest.raises(ValueError, match="unknown settings \\['warmup'\\]"):
        FinetuneConfig.from_dict({"task": "sst2", "init": "none", "out": "runs/f", "warmup": 0.25})
    with pytest.raises(ValueError, match="warmup_steps=5: fine-tuning counts in epochs"):
        FinetuneConfig(task="sst2", init="none", out="runs/f", warmup_steps=5).validate()


@pytest.mark.parametrize("command", ["train", "train-tiny", "train-xlnet", "train-t5", "finetune", "ablate"])
def test_every_command_that_trains_takes_set(command, capsys):
    from minibert.__main__ import main

    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert "--set KEY=VALUE" in capsys.readouterr().out


def test_set_reaches_finetune_and_train_t5_settings():
    from minibert.finetune.run import FinetuneConfig
    from minibert.train.t5_command import T5TrainConfig

    assert FinetuneConfig.parse_set(["weight_decay=0", "warmup_proportion=0.2"]) == {"weight_decay": 0.0,
                                                                                     "warmup_proportion": 0.2}
    assert T5TrainConfig.parse_set(["checkpoint_interval=5", "lr=5e-4"]) == {"checkpoint_interval": 5, "lr": 5e-4}


def test_steps_has_one_meaning_the_runs_length_and_0_derives_it():
    """steps N: a run of N optimizer steps (its schedule's length); steps 0: fitted to `minutes`
    (pretraining) or `epochs` passes (fine-tuning), so a pretraining run with neither is refused."""
    from minibert.finetune.run import FinetuneConfig
    from minibert.train.config import make_config
    from minibert.train.t5_command import T5TrainConfig
    from minibert.train.xlnet_command import XLNetTrainConfig

    checks = {"train": lambda **kw: make_config("tiny", **kw).validate(require_files=False),
              "train-xlnet": lambda **kw: XLNetTrainConfig(**kw).validate(),
              "train-t5": lambda **kw: T5TrainConfig(out="o", **kw).validate()}
    for command, check in checks.items():
        check(steps=0, minutes=1.0)  # fitted to the budget
        check(steps=5, minutes=0.0)  # 5 steps, no time limit
        check(steps=5, minutes=1.0)  # 5 steps, stopped after a minute if not done
        with pytest.raises(ValueError, match="steps"):
            check(steps=0, minutes=0.0)
    FinetuneConfig(task="sst2", init="none", out="o", steps=7).validate()  # fine-tuning: 7 steps, epochs unused
    with pytest.raises(ValueError, match="steps=-1"):
        FinetuneConfig(task="sst2", init="none", out="o", steps=-1).validate()


def test_a_run_json_is_read_with_the_meanings_it_was_written_with(tmp_path):
    """No value is rewritten on the way back: steps 1,000,000 is a run of a million steps, steps
    > 0 beside minutes keeps its time limit."""
    from minibert.loop import rundir

    def info(command, settings):
        d = tmp_path / str(len(list(tmp_path.iterdir())))
        d.mkdir()
        rundir.write_run(d, command, settings)
        return rundir.read_run(d)

    assert T5TrainConfig.from_run(info("train-t5", {"out": "o", "steps": 1_000_000, "minutes": 9.5})).steps == 1_000_000
    assert XLNetTrainConfig.from_run(info("train-xlnet", {"steps": 6, "minutes": 9.5})).minutes == 9.5


@pytest.mark.parametrize("raw, shown", [
    ({"command": "train", "settings": {}}, "no layout"),  # run.json before "layout" was written
    ({"command": "train", "settings": {}, "layout": 1}, "layout 1"),
    ({"command": "train", "settings": {}, "layout": True}, "layout True"),
    ({"created_by": "train", "config": {}}, "no layout"),  # another form altogether
    ({"command": "train-t5", "steps": 40}, "no layout"),
])
def test_a_run_json_of_another_format_is_refused_in_one_line(raw, shown, tmp_path):
    from minibert.loop import rundir

    rundir.write_json(tmp_path / rundir.RUN_FILE, raw)
    with pytest.raises(rundir.OtherFormat) as e:
        rundir.read_run(tmp_path)
    message = str(e.value)
    assert "\n" not in message and message.startswith(str(tmp_path / rundir.RUN_FILE))
    assert f"written by another format of minibert ({shown};" in message and "must be started again" in message


def settings_classes():
    return (TrainConfig, XLNetTrainConfig, T5TrainConfig, FinetuneConfig)


@pytest.mark.parametrize("cls", settings_classes(), ids=lambda c: c.__name__)
def test_no_settings_class_has_a_retired_synonym(cls):
    """One name per concept: out, max_seq_length, max_train_examples, eval_examples, BertConfig's
    dropout names, warmup_steps / warmup_proportion (VOCABULARY), in every settings class."""
    names = set(cls.settable_fields())
    assert not names & RETIRED_NAMES, sorted(names & RETIRED_NAMES)
    assert {"out", "max_seq_length", "max_train_examples", "eval_examples"} - {"eval_examples"} <= names
    assert ("warmup_steps" in names) and ("warmup_steps" in cls.unused) == ("warmup_proportion" in names)


def test_the_vocabulary_names_are_each_one_concept():
    assert len(RETIRED_NAMES) == sum(len(v) for v in VOCABULARY.values())  # no old name in two places
    assert not RETIRED_NAMES & set(VOCABULARY)  # no name both today's and retired


def required(cls) -> dict:
    return {"task": "sst2", "init": "none", "out": "o"} if cls is FinetuneConfig else {"out": "o"}


@pytest.mark.parametrize("cls", settings_classes(), ids=lambda c: c.__name__)
@pytest.mark.parametrize("name", sorted(RETIRED_NAMES))
def test_a_synonym_is_an_unknown_setting_in_run_json_and_to_set(cls, name):
    """Each setting has one name: a synonym (VOCABULARY) is refused by name, never read as
    whichever setting it meant to some command."""
    with pytest.raises(ValueError, match=f"unknown .*settings \\['{name}'\\]"):
        cls.from_dict({**required(cls), name: 1})
    with pytest.raises(ValueError, match=f"unknown setting '{name}'"):
        cls.parse_set([f"{name}=1"])


# --- integer settings are integers, and every one has a range (issue 56) -------------------------

SETTINGS_CLASSES = (TrainConfig, XLNetTrainConfig, T5TrainConfig, FinetuneConfig)


@pytest.mark.parametrize("raw", ["25e-1", "1.5", "2.0000001", "nan", "inf"])
def test_an_integer_setting_is_never_rounded(raw):
    """steps=25e-1 was 2 steps while steps=1.5 was refused: both are refused now, by name."""
    with pytest.raises(ValueError, match=f"^steps='{raw}' is not a (whole number|valid int)"):
        Demo.parse_set([f"steps={raw}"])
    assert Demo.parse_set(["steps=1e3", "steps=25"]) == {"steps": 25}  # a whole number written either way


@pytest.mark.parametrize("cls", SETTINGS_CLASSES, ids=lambda c: c.__name__)
def test_every_integer_setting_has_a_range(cls):
    """Every integer field of every settings class is bounded (loop/settings.RANGES), or is a
    model size its config checks against model.SIZE_LIMITS; so are the counts in floats."""
    ints = [k for k, f in cls.settable_fields().items() if field_type(f)[0] is int]
    assert ints, cls
    missing = [k for k in ints if k not in cls.ranges and k not in SIZE_LIMITS]
    assert not missing, missing
    assert RANGES["epochs"][1] < 1e300 and RANGES["minutes"][1] <= 525_600


@pytest.mark.parametrize("cls, base, key, value", [
    (FinetuneConfig, {"task": "sst2", "init": "none", "out": "o"}, "steps", 10**30),
    (FinetuneConfig, {"task": "sst2", "init": "none", "out": "o"}, "max_query_length", 0),
    (FinetuneConfig, {"task": "sst2", "init": "none", "out": "o"}, "max_query_length", -5),
    (FinetuneConfig, {"task": "sst2", "init": "none", "out": "o"}, "epochs", 1e300),
    (FinetuneConfig, {"task": "sst2", "init": "none", "out": "o"}, "doc_stride", 0),
    (TrainConfig, {}, "steps", 10**30),
    (TrainConfig, {}, "dupe_factor", 10**6),
    (TrainConfig, {}, "seed", 2**40),
    (TrainConfig, {}, "minutes", 1e9),
    (XLNetTrainConfig, {}, "max_seq_length", 4096),
    (T5TrainConfig, {"out": "o"}, "eval_interval", 10**12),
])
def test_an_out_of_range_setting_is_refused_by_name_with_its_range(cls, base, key, value):
    with pytest.raises(ValueError, match=f"^{key}=.* is out of range: it must be in \\["):
        cls.build(base, {key: value}, validate=False)


def test_a_run_json_with_an_out_of_range_setting_names_the_file():
    with pytest.raises(ValueError, match="^runs/x/run.json: steps=1,000,000,000,000 is out of range"):
        Demo.from_dict({"out": "o", "steps": 10**12}, "runs/x/run.json")
