"""A pretraining run's directory as training sees it: whether a fresh run may start there
(loop/rundir.py's one guard, with the settings that differ in its message) and the settings a
resumed run continues with."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from minibert.loop import rundir
from minibert.train.config import TrainConfig, flatten

PRETRAINING_COMMANDS = ("train", "train-tiny", "ablate")  # the commands whose runs train/ makes


def check_run_dir(cfg: TrainConfig, overwrite: bool = False, command: str = "train") -> None:
    """Refuse to start a fresh run in a directory that holds another run (nothing is written).
    train-tiny replaces a finished run it made itself (it re-runs into runs/tiny); an unfinished
    one is kept for --resume. A run that stopped before its first checkpoint holds nothing to
    resume and is replaced."""
    new = cfg.flat()

    def differs(saved: dict) -> list[str]:
        old = flatten(saved)
        return sorted(k for k, v in new.items() if k in old and old[k] != v and k != "out")

    resume = (f"python -m minibert {command} --resume" if command == "train-tiny"
              else f"python -m minibert train --resume {cfg.run_dir}")
    rundir.check_run_dir(cfg.run_dir, command, overwrite=overwrite, replaceable=command == "train-tiny",
                              resume=resume, differs=differs)


def resume_config(run_dir: str | Path, overrides: dict[str, Any]) -> TrainConfig:
    """The saved config of a run, with the few settings a resume may change."""
    run_dir = Path(run_dir)
    info = rundir.read_run(run_dir)
    if info is None or info.command not in PRETRAINING_COMMANDS:
        what = "no run.json" if info is None else f"a {info.command} run"
        raise ValueError(f"{run_dir} holds no resumable pretraining run ({what})")
    if rundir.latest_checkpoint(run_dir) is None:
        raise ValueError(f"{run_dir} holds no resumable run: it has no checkpoint (the run stopped before "
                         f"its first save); start it again with --overwrite")
    changeable = {"minutes", "log_interval", "eval_interval", "checkpoint_interval", "eval_examples"}
    TrainConfig.from_run(info, str(run_dir / rundir.RUN_FILE), out=str(run_dir))  # every saved setting typed first
    flat = flatten(info.settings)
    bad = {k: v for k, v in overrides.items() if k not in changeable and flat.get(k) != v}
    if bad:
        raise ValueError(f"--resume continues {run_dir} with its saved settings; these differ: "
                         + ", ".join(f"{k}={v!r} (saved {flat.get(k)!r})" for k, v in bad.items()))
    return TrainConfig.from_run(info, **overrides, out=str(run_dir))
