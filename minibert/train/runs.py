"""A run's directory as training sees it: the names of its files, the state of its newest
checkpoint, whether a fresh run may start there, and the settings a resumed run continues with.
(The layout and the atomic checkpoints themselves are in minibert/loop/rundir.py.)"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from minibert.loop import rundir as run_dir_mod
from minibert.train.config import TrainConfig, flatten

RUN_FILE, METRICS_FILE, CURVES_FILE = run_dir_mod.RUN_FILE, run_dir_mod.METRICS_FILE, run_dir_mod.CURVES_FILE
# the files of a checkpoint directory besides the transformers ones (also the names a run saved
# before checkpoints had their own directories used at its top level)
STATE_FILE, OPTIM_FILE = run_dir_mod.STATE_FILE, run_dir_mod.OPTIM_FILE
FINISHED = ("done", "budget")  # trainer_state.json "status" of a run that ran to its end


def run_state(run_dir: str | Path) -> dict | None:
    """trainer_state.json of a run's newest checkpoint, or None if it has none."""
    ckpt = run_dir_mod.latest_checkpoint(run_dir)
    return run_dir_mod.read_json(ckpt / STATE_FILE) if ckpt is not None else None


def check_run_dir(cfg: TrainConfig, overwrite: bool = False, replaceable_by: str | None = None) -> None:
    """Refuse to start a fresh run in a directory that holds another run (nothing is written).

    A directory holds a run if it has run.json, a checkpoint or a model. `replaceable_by` lets a
    command replace a finished run it created itself (train-tiny re-runs into runs/tiny); an
    unfinished one is kept for --resume. A run that stopped before its first checkpoint holds
    nothing to resume and is replaced.
    """
    d = cfg.run_dir
    if d.exists() and not d.is_dir():
        raise ValueError(f"output directory {d} is a file; choose another --out or --name")
    if overwrite or not d.exists():
        return
    has_run = (d / RUN_FILE).exists()
    state = run_state(d)
    if has_run and state is None and not (d / "model.safetensors").exists():
        return  # run.json (and perhaps metrics) of a run that never saved: nothing to lose
    marker = [p for p in (RUN_FILE, run_dir_mod.CHECKPOINTS, "model.safetensors", STATE_FILE) if (d / p).exists()]
    if not marker:
        return
    info = run_dir_mod.read_json(d / RUN_FILE) if has_run else {}
    finished = state is not None and state.get("status") in FINISHED
    if replaceable_by and info.get("created_by") == replaceable_by and (finished or state is None):
        return
    old = flatten(info.get("config", {}))
    diff = sorted(k for k, v in cfg.flat().items() if k in old and old[k] != v and k != "out_dir")
    differ = f"settings differ: {', '.join(diff)}"
    what = f"a different run ({differ})" if diff else "a run"
    if state is not None and not finished:
        stopped = f"stopped at step {state.get('step')} of {state.get('total_steps')}"
        what = f"an unfinished run ({stopped}{', ' + differ if diff else ''})"
    how = (f"`python -m minibert {replaceable_by} --resume` to continue it, `python -m minibert "
           f"{replaceable_by} --overwrite` to replace it" if replaceable_by
           else f"--resume {d} to continue it, --overwrite to replace it, or another --name")
    raise ValueError(f"output directory {d} already holds {what} ({', '.join(marker)}); nothing was "
                     f"written. Use {how}")


def resume_config(run_dir: str | Path, overrides: dict[str, Any]) -> TrainConfig:
    """The saved config of a run, with the few settings a resume may change."""
    run_dir = Path(run_dir)
    if not (run_dir / RUN_FILE).is_file():
        raise ValueError(f"{run_dir} holds no resumable run (no {RUN_FILE})")
    if run_dir_mod.latest_checkpoint(run_dir) is None:
        raise ValueError(f"{run_dir} holds no resumable run: it has no checkpoint (the run stopped before "
                         f"its first save); start it again with --overwrite")
    saved = run_dir_mod.read_json(run_dir / RUN_FILE).get("config")
    if not isinstance(saved, dict):
        raise ValueError(f"{run_dir / RUN_FILE} has no \"config\" object")
    changeable = {"minutes", "log_interval", "eval_interval", "checkpoint_interval", "eval_examples"}
    flat = flatten(saved)
    bad = {k: v for k, v in overrides.items() if k not in changeable and flat.get(k) != v}
    if bad:
        raise ValueError(f"--resume continues {run_dir} with its saved settings; these differ: "
                         + ", ".join(f"{k}={v!r} (saved {flat.get(k)!r})" for k, v in bad.items()))
    cfg = TrainConfig.from_dict({**saved, **overrides, "out_dir": str(run_dir)})
    return cfg
