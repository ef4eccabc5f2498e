"""The settings a resumed pretraining run continues with (the guard a fresh run passes is
train/pretrain.pretraining_job's, through the launcher)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from minibert.loop import rundir
from minibert.train.config import TrainConfig, flatten

PRETRAINING_COMMANDS = ("train", "train-tiny", "ablate")  # the commands whose runs train/ makes


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
